//! Whether the API server can be reached: one state for the whole proxy,
//! with hysteresis, that the node cache acts on (online: the kubelet's
//! requests go upstream; offline: they are answered from what is kept, at
//! once — no request waits out a dial timeout to find out).
//!
//! ```text
//!   Unknown ──2 failures──► Offline ──3 successes──► Online
//!      └──────3 successes────────────────────────────►│
//!   Online ──2 failures──► Offline
//! ```
//!
//! A prober keeps one HTTP/2 connection to the API server and asks its
//! `/readyz` while it is not known to be online; once online it holds the
//! connection with HTTP/2 PINGs (every second, a second to answer) and asks
//! nothing: an idle node costs the API server a PING frame a second, not a
//! request. The connection dying, a refused or silent reconnection, a
//! `/readyz` that answers 5xx, and a kubelet request that cannot connect
//! are failures; a good `/readyz` is a success. Two failures in a row
//! (at most about 3 s after the API server stops answering) make it
//! offline; three successes a second apart make it online again.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use http::{Request, StatusCode, Uri};
use http_body_util::Empty;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use kube::client::ConfigExt;
use tokio::{net::TcpStream, sync::watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reachability {
    /// Not probed yet: requests are tried upstream (and answered from the
    /// node cache if they cannot connect).
    Unknown,
    /// The API server answers: requests go upstream.
    Online,
    /// It does not, since then: requests are answered from the node cache.
    Offline(SystemTime),
}

/// How many observations it takes to change state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Failures in a row that make it offline.
    pub failures: u32,
    /// Successes in a row that make it online.
    pub successes: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            failures: 2,
            successes: 3,
        }
    }
}

/// The state machine, without I/O: each observation may change the state.
#[derive(Debug, Clone)]
pub struct Hysteresis {
    state: Reachability,
    thresholds: Thresholds,
    failures: u32,
    successes: u32,
}

impl Hysteresis {
    /// Unknown, with these thresholds.
    pub fn new(thresholds: Thresholds) -> Hysteresis {
        Hysteresis {
            state: Reachability::Unknown,
            thresholds,
            failures: 0,
            successes: 0,
        }
    }

    /// The state.
    pub fn state(&self) -> Reachability {
        self.state
    }

    /// One observation at `now`; returns the new state when it changed.
    pub fn observe(&mut self, ok: bool, now: SystemTime) -> Option<Reachability> {
        if ok {
            self.failures = 0;
            self.successes += 1;
            if self.successes >= self.thresholds.successes && self.state != Reachability::Online {
                self.state = Reachability::Online;
                return Some(self.state);
            }
        } else {
            self.successes = 0;
            self.failures += 1;
            if self.failures >= self.thresholds.failures
                && !matches!(self.state, Reachability::Offline(_))
            {
                self.state = Reachability::Offline(now);
                return Some(self.state);
            }
        }
        None
    }
}

/// The shared view of the state (cheap to clone).
#[derive(Clone)]
pub struct Health {
    machine: Arc<parking_lot::Mutex<Hysteresis>>,
    state: watch::Sender<Reachability>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Health")
            .field(&*self.state.borrow())
            .finish()
    }
}

impl Health {
    /// Unknown until observed.
    pub fn new(thresholds: Thresholds) -> Health {
        Health {
            machine: Arc::new(parking_lot::Mutex::new(Hysteresis::new(thresholds))),
            state: watch::Sender::new(Reachability::Unknown),
        }
    }

    /// The state now.
    pub fn state(&self) -> Reachability {
        *self.state.borrow()
    }

    /// Whether the API server is known to be unreachable.
    pub fn is_offline(&self) -> bool {
        matches!(self.state(), Reachability::Offline(_))
    }

    /// Resolves once it is online (at once if it is).
    pub async fn online(&self) {
        let mut rx = self.state.subscribe();
        // Err: the sender is gone with the proxy; nothing to wait for.
        let _ = rx.wait_for(|s| *s == Reachability::Online).await;
    }

    /// Resolves once it is offline (at once if it is).
    pub async fn offline(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| matches!(s, Reachability::Offline(_))).await;
    }

    /// One observation (the prober's, or a request's that could not connect).
    pub fn observe(&self, ok: bool) {
        let changed = self.machine.lock().observe(ok, SystemTime::now());
        if let Some(state) = changed {
            match state {
                Reachability::Online => info!("the API server answers again: the kubelet's requests go upstream"),
                Reachability::Offline(_) => warn!("the API server does not answer: the kubelet's requests are answered from the node cache"),
                Reachability::Unknown => {}
            }
            self.state.send_replace(state);
        }
    }
}

impl Health {
    /// Registers `upstream_reachable` (1 online, 0 offline, -1 not known
    /// yet) and `upstream_offline_since_timestamp_seconds` (0 unless offline).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(HealthCollector(self.clone())));
    }
}

#[derive(Debug)]
struct HealthCollector(Health);

impl prometheus_client::collector::Collector for HealthCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::{
            encoding::EncodeMetric, metrics::gauge::ConstGauge, metrics::MetricType,
        };
        let (reachable, since) = match self.0.state() {
            Reachability::Unknown => (-1, 0),
            Reachability::Online => (1, 0),
            Reachability::Offline(t) => (
                0,
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64),
            ),
        };
        ConstGauge::new(reachable).encode(encoder.encode_descriptor(
            "upstream_reachable",
            "Whether the API server can be reached (1), cannot (0: the kubelet is answered from the node cache), or is not known yet (-1)",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(since).encode(encoder.encode_descriptor(
            "upstream_offline_since_timestamp_seconds",
            "When the API server stopped answering (0 while it answers)",
            None,
            MetricType::Gauge,
        )?)?;
        Ok(())
    }
}

/// How the prober paces itself.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTimes {
    /// Between two probes, and between HTTP/2 PINGs.
    pub interval: Duration,
    /// For a connection, an answer or a PING's acknowledgement.
    pub timeout: Duration,
}

impl Default for ProbeTimes {
    fn default() -> Self {
        ProbeTimes {
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
        }
    }
}

/// Probes the API server `config` names until `stop`, feeding `health`.
pub async fn probe(
    config: kube::Config,
    health: Health,
    times: ProbeTimes,
    stop: CancellationToken,
) {
    let tls = match prober_tls(&config) {
        Ok(tls) => tls,
        Err(e) => {
            warn!(error = %e, "cannot probe the API server (its TLS settings); it is taken to be reachable");
            health.observe(true);
            return;
        }
    };
    loop {
        let round = async {
            match connect(&config, tls.clone(), times).await {
                Ok((mut sender, conn)) => {
                    // The connection runs on its own (it must be polled for
                    // requests to go); its end is the probe's failure.
                    let mut conn = Aborting(tokio::spawn(conn));
                    // While not online: ask /readyz every interval.
                    loop {
                        let online = health.state() == Reachability::Online;
                        if !online {
                            let ok = readyz(&mut sender, &config.cluster_url, times.timeout).await;
                            health.observe(ok);
                            if !ok {
                                return;
                            }
                        }
                        tokio::select! {
                            done = &mut conn.0 => {
                                debug!(result = ?done, "probe connection ended");
                                health.observe(false);
                                return;
                            }
                            () = tokio::time::sleep(times.interval) => {}
                        }
                    }
                }
                Err(e) => {
                    debug!(error = %e, "probe connection failed");
                    health.observe(false);
                }
            }
        };
        tokio::select! {
            () = round => {}
            () = stop.cancelled() => return,
        }
        tokio::select! {
            () = tokio::time::sleep(times.interval) => {}
            () = stop.cancelled() => return,
        }
    }
}

type Sender = hyper::client::conn::http2::SendRequest<Empty<bytes::Bytes>>;

/// A task aborted when this is dropped (the probe's connection, when the
/// probe gives it up).
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The TLS client settings of the proxy's kubeconfig, speaking HTTP/2 only
/// (`None` for a plain-HTTP API server).
fn prober_tls(config: &kube::Config) -> Result<Option<Arc<rustls::ClientConfig>>, kube::Error> {
    if config.cluster_url.scheme_str() != Some("https") {
        return Ok(None);
    }
    let mut tls = config.rustls_client_config()?;
    tls.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(Arc::new(tls)))
}

/// One HTTP/2 connection, pinged every interval.
async fn connect(
    config: &kube::Config,
    tls: Option<Arc<rustls::ClientConfig>>,
    times: ProbeTimes,
) -> Result<(Sender, impl std::future::Future<Output = hyper::Result<()>>), String> {
    let uri = &config.cluster_url;
    let host = uri
        .host()
        .ok_or("no host in the cluster URL")?
        .trim_matches(['[', ']'])
        .to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let tcp = tokio::time::timeout(times.timeout, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(times.interval)
        .keep_alive_timeout(times.timeout)
        .keep_alive_while_idle(true);
    let handshake = async {
        match tls {
            None => {
                let (s, c) = builder
                    .handshake(TokioIo::new(tcp))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>((s, futures::future::Either::Left(c)))
            }
            Some(tls) => {
                let name = config
                    .tls_server_name
                    .clone()
                    .unwrap_or_else(|| host.clone());
                let name =
                    rustls_pki_types::ServerName::try_from(name).map_err(|e| e.to_string())?;
                let stream = tokio_rustls::TlsConnector::from(tls)
                    .connect(name, tcp)
                    .await
                    .map_err(|e| e.to_string())?;
                let (s, c) = builder
                    .handshake(TokioIo::new(stream))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((s, futures::future::Either::Right(c)))
            }
        }
    };
    tokio::time::timeout(times.timeout, handshake)
        .await
        .map_err(|_| "handshake timed out".to_owned())?
}

/// Whether `/readyz` answers in time with anything but a server error: a
/// 401 or 403 (a cluster without anonymous access) still says the API
/// server is there.
async fn readyz(sender: &mut Sender, base: &Uri, timeout: Duration) -> bool {
    let uri = format!("{}/readyz", base.to_string().trim_end_matches('/'));
    let Ok(req) = Request::get(uri).body(Empty::new()) else {
        return false;
    };
    match tokio::time::timeout(timeout, sender.send_request(req)).await {
        Ok(Ok(resp)) => {
            let code = resp.status();
            code.is_success() || code == StatusCode::UNAUTHORIZED || code == StatusCode::FORBIDDEN
        }
        Ok(Err(e)) => {
            debug!(error = %e, "readyz failed");
            false
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_failures_make_it_offline_and_three_successes_online() {
        let mut h = Hysteresis::new(Thresholds::default());
        let t = SystemTime::UNIX_EPOCH;
        assert_eq!(h.observe(false, t), None, "one failure is not enough");
        assert_eq!(h.observe(true, t), None);
        assert_eq!(h.observe(false, t), None, "not in a row");
        assert_eq!(h.observe(false, t), Some(Reachability::Offline(t)));
        assert_eq!(h.observe(false, t), None, "already offline");
        assert_eq!(h.observe(true, t), None);
        assert_eq!(h.observe(true, t), None);
        assert_eq!(h.observe(false, t), None, "a failure restarts the count");
        assert_eq!(h.observe(true, t), None);
        assert_eq!(h.observe(true, t), None);
        assert_eq!(h.observe(true, t), Some(Reachability::Online));
        assert_eq!(h.state(), Reachability::Online);
    }
}
