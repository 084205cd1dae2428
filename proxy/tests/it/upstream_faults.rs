//! Broken upstreams: the in-memory API server plays a faulty kube-apiserver
//! (`sitegrid_fakeapi::apiserver::Faults`) behind a real proxy, and each test
//! asserts what a user sees: the proxy's answers stay whole and 200, its
//! watch misses no event of a good object, the fault is counted in
//! /metrics, and the proxy recovers once the upstream behaves, without a
//! restart.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::{json, Value};
use sitegrid_cache::CacheConfig;
use sitegrid_fakeapi::{
    apiserver::{Corruption, FaultVerb},
    sample, ApiServer, ApiServerConfig, ServerHandle,
};
use sitegrid_proxy::app::{start, ProxyOptions, RunningProxy};

/// Bounds every wait: a proxy that does not recover fails the test.
const LIMIT: Duration = Duration::from_secs(20);
const NS: &str = "faults";

struct Env {
    api: ApiServer,
    _upstream: ServerHandle,
    proxy: RunningProxy,
    url: String,
}

/// Endpoints `NS/name` with one address, labelled `app=name`.
fn endpoints(name: &str, ip: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Endpoints","metadata":{"name":name,"namespace":NS,"labels":{"app":name}},
        "subsets":[{"addresses":[{"ip":ip,"nodeName":"bj-1"}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]})
}

/// The two-site world plus endpoints alpha, beta and gamma in `NS`; `before`
/// runs on the API server before the proxy starts (faults it starts with).
/// What a proxy reads a JSON upstream with: the faults that corrupt the
/// bytes of an answer are written into JSON (a protobuf answer that does not
/// decode is `upstream::protobuf`'s: that resource is read in JSON from then
/// on, which is where these land).
fn json_upstream() -> CacheConfig {
    CacheConfig {
        upstream_protobuf: false,
        ..CacheConfig::default()
    }
}

async fn env(cache: CacheConfig, before: impl FnOnce(&ApiServer)) -> Env {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    for (name, ip) in [
        ("alpha", "10.9.0.1"),
        ("beta", "10.9.0.2"),
        ("gamma", "10.9.0.3"),
    ] {
        api.apply(endpoints(name, ip));
    }
    before(&api);
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let config = kube::Config::new(upstream.url().parse().unwrap());
    start_proxy(api, upstream, config, cache).await
}

async fn start_proxy(
    api: ApiServer,
    upstream: ServerHandle,
    config: kube::Config,
    cache: CacheConfig,
) -> Env {
    let mut opts = ProxyOptions::new("bj-1", "127.0.0.1:0".parse().unwrap());
    opts.cache = cache;
    let proxy = start(config, opts).await.unwrap();
    let url = format!("http://{}", proxy.local_addr);
    let env = Env {
        api,
        _upstream: upstream,
        proxy,
        url,
    };
    eventually("the proxy serves endpoints", || async {
        env.proxy.cache.readiness().is_ready()
    })
    .await;
    env
}

async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {LIMIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

impl Env {
    /// Status and JSON body of a GET on the proxy.
    async fn get(&self, path: &str) -> (u16, Value) {
        let resp = client()
            .get(format!("{}{path}", self.url).parse().unwrap())
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The proxy's endpoints in `NS` by name → first IP; asserts a 200.
    async fn endpoints(&self) -> (String, Vec<(String, String)>) {
        let (code, list) = self
            .get(&format!("/api/v1/namespaces/{NS}/endpoints"))
            .await;
        assert_eq!(code, 200, "{list}");
        let items = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["metadata"]["name"].as_str().unwrap().to_owned(),
                    i["subsets"][0]["addresses"][0]["ip"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                )
            })
            .collect();
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        (rv, items)
    }

    /// Whether the proxy lists endpoints `name` with IP `ip`.
    async fn serves(&self, name: &str, ip: &str) -> bool {
        self.endpoints()
            .await
            .1
            .iter()
            .any(|(n, i)| n == name && i == ip)
    }

    /// A good client's watch of the endpoints in `NS`, from `rv`.
    async fn watch(&self, rv: &str) -> Watch {
        let resp = client()
            .get(
                format!(
                    "{}/api/v1/namespaces/{NS}/endpoints?watch=1&resourceVersion={rv}",
                    self.url
                )
                .parse()
                .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        Watch {
            body: resp.into_body(),
            buf: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// A counter of the proxy's /metrics (0 when absent).
    async fn metric(&self, series: &str) -> u64 {
        let resp = client()
            .get(format!("{}/metrics", self.url).parse().unwrap())
            .await
            .unwrap();
        let text = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&text);
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    fn set_ip(&self, name: &str, ip: &str) {
        self.api.apply(endpoints(name, ip));
    }

    /// Makes the proxy list the endpoints again: the version its watch
    /// resumes from falls out of the API server's history (a write to a kind
    /// it does not watch moves the version past it; then compaction).
    fn force_relist(&self) {
        let n = self.api.resource_version();
        self.api.apply(json!({"apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"bump","namespace":NS},"data":{"n":n.to_string()}}));
        self.api.compact();
        self.api.disconnect_watches();
    }
}

/// A good client's open watch: the frames it received so far.
struct Watch {
    body: Incoming,
    buf: Vec<u8>,
    /// (type, name, first IP) of every frame.
    seen: Vec<(String, String, String)>,
}

impl Watch {
    /// Reads until frame (`ty`, `name`, `ip`) arrived; panics past [`LIMIT`].
    async fn until(&mut self, ty: &str, name: &str, ip: &str) {
        self.until_within(LIMIT, ty, name, ip).await;
    }

    /// [`Watch::until`], panicking past `limit`.
    async fn until_within(&mut self, limit: Duration, ty: &str, name: &str, ip: &str) {
        let want = (ty.to_owned(), name.to_owned(), ip.to_owned());
        tokio::time::timeout(limit, async {
            while !self.seen.contains(&want) {
                let frame = self.body.frame().await.expect("watch open").unwrap();
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                self.buf.extend_from_slice(&data);
                while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.buf.drain(..=pos).collect();
                    let ev: Value = serde_json::from_slice(&line).unwrap();
                    let o = &ev["object"];
                    self.seen.push((
                        ev["type"].as_str().unwrap_or("").to_owned(),
                        o["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                        o["subsets"][0]["addresses"][0]["ip"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned(),
                    ));
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("watch never got {want:?}; got {:?}", self.seen));
    }

    /// What the watch received about `name`.
    fn about(&self, name: &str) -> Vec<(String, String)> {
        self.seen
            .iter()
            .filter(|(_, n, _)| n == name)
            .map(|(t, _, ip)| (t.clone(), ip.clone()))
            .collect()
    }
}

fn skipped() -> &'static str {
    r#"sitegrid_proxy_upstream_objects_skipped_total{resource="endpoints"}"#
}

fn errors(reason: &str) -> String {
    format!(r#"sitegrid_proxy_upstream_errors_total{{resource="endpoints",reason="{reason}"}}"#)
}

/// Objects of the wrong type — `"subsets": 5`, `"ports": "x"`, a port number
/// as a string, a label value that is a number — are skipped, in the first
/// list and in watch events alike; every other object is served, the last
/// good version of a spoiled one stays, and it is taken in again once good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_of_the_wrong_type_are_skipped_and_the_others_served() {
    let env = env(json_upstream(), |api| {
        api.apply(endpoints("delta", "10.9.0.4"));
        let f = api.faults();
        f.corrupt(
            "endpoints",
            Some(NS),
            "delta",
            Corruption::Merge(json!({"subsets": 5})),
        );
        f.corrupt(
            "endpoints",
            Some(NS),
            "gamma",
            Corruption::Merge(json!({"metadata":{"labels":{"app": 5}}})),
        );
    })
    .await;
    let (rv, listed) = env.endpoints().await;
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["alpha", "beta"],
        "the readable objects, all of them"
    );
    assert!(env.metric(skipped()).await >= 2);
    // A whole list still decodes as typed objects (what client-go does).
    let (code, all) = env.get("/api/v1/endpoints").await;
    assert_eq!(code, 200);
    serde_json::from_value::<k8s_openapi::List<k8s_openapi::api::core::v1::Endpoints>>(all)
        .expect("every served object is a valid Endpoints");

    // In watch events: alpha's ports become a string, then its port a string.
    let mut watch = env.watch(&rv).await;
    let f = env.api.faults();
    f.clear();
    f.corrupt(
        "endpoints",
        Some(NS),
        "alpha",
        Corruption::Merge(json!({"subsets":[{"addresses":[{"ip":"10.9.9.9"}],"ports":"x"}]})),
    );
    env.set_ip("alpha", "10.9.1.1");
    env.set_ip("beta", "10.9.1.2");
    watch.until("MODIFIED", "beta", "10.9.1.2").await;
    f.clear();
    f.corrupt(
        "endpoints",
        Some(NS),
        "alpha",
        Corruption::Merge(
            json!({"subsets":[{"addresses":[{"ip":"10.9.9.9"}],"ports":[{"port":"80"}]}]}),
        ),
    );
    env.set_ip("alpha", "10.9.1.3");
    env.set_ip("beta", "10.9.1.4");
    watch.until("MODIFIED", "beta", "10.9.1.4").await;
    assert!(
        env.serves("alpha", "10.9.0.1").await,
        "alpha's last good version stays"
    );
    assert!(
        watch.about("alpha").is_empty(),
        "{:?}",
        watch.about("alpha")
    );
    // Once the upstream sends good objects again, they come in.
    f.clear();
    env.set_ip("alpha", "10.9.1.5");
    env.set_ip("gamma", "10.9.1.6");
    watch.until("MODIFIED", "alpha", "10.9.1.5").await;
    watch.until("ADDED", "gamma", "10.9.1.6").await;
    assert!(env.metric(skipped()).await >= 4);
}

/// A watch event that is not JSON is skipped, counted as a decode error; the
/// events after it arrive, and the object's next good event too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_watch_event_is_skipped_and_the_watch_goes_on() {
    let env = env(json_upstream(), |_| {}).await;
    let (rv, _) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    env.api
        .faults()
        .corrupt("endpoints", Some(NS), "alpha", Corruption::Malformed);
    env.set_ip("alpha", "10.9.2.1");
    env.set_ip("beta", "10.9.2.2");
    watch.until("MODIFIED", "beta", "10.9.2.2").await;
    assert!(env.metric(&errors("decode")).await >= 1);
    env.api.faults().clear();
    env.set_ip("alpha", "10.9.2.3");
    watch.until("MODIFIED", "alpha", "10.9.2.3").await;
    assert_eq!(
        watch.about("alpha"),
        [("MODIFIED".to_owned(), "10.9.2.3".to_owned())]
    );
}

/// A list that is not JSON cannot be trusted past its first error: it is
/// refused whole and retried while the cache keeps serving what it had;
/// once the upstream lists well again, what changed meanwhile arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_list_is_refused_and_the_cache_kept_until_a_good_one() {
    let env = env(json_upstream(), |_| {}).await;
    let (rv, before) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    env.api
        .faults()
        .corrupt("endpoints", Some(NS), "alpha", Corruption::Malformed);
    env.force_relist();
    eventually("the broken list is counted", || async {
        env.metric(&errors("decode")).await >= 1
    })
    .await;
    assert_eq!(env.endpoints().await.1, before, "the cache is kept whole");
    env.set_ip("beta", "10.9.3.2");
    env.api.faults().clear();
    watch.until("MODIFIED", "beta", "10.9.3.2").await;
    assert!(env.serves("alpha", "10.9.0.1").await);
}

/// An object listed and deleted before the watch starts is gone from the
/// proxy, and its watchers are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_right_after_the_list_is_gone() {
    let env = env(CacheConfig::default(), |_| {}).await;
    let (rv, _) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    env.api
        .faults()
        .delete_after_list("endpoints", Some(NS), "gamma");
    env.force_relist();
    watch.until("DELETED", "gamma", "10.9.0.3").await;
    let names: Vec<String> = env
        .endpoints()
        .await
        .1
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(
        env.api.faults().injected(),
        1,
        "the deletion happened mid-list"
    );
}

/// A list whose body never ends is abandoned at its deadline and retried;
/// the cache keeps serving meanwhile and syncs once lists end again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_never_ends_is_abandoned_and_retried() {
    let cache = CacheConfig {
        list_timeout: Duration::from_secs(1),
        ..CacheConfig::default()
    };
    let env = env(cache, |_| {}).await;
    let (rv, before) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    env.api.faults().stall("endpoints", FaultVerb::List);
    env.force_relist();
    eventually("the endless list is counted", || async {
        env.metric(&errors("timeout")).await >= 1
    })
    .await;
    assert_eq!(env.endpoints().await.1, before, "the cache is kept whole");
    env.set_ip("beta", "10.9.4.2");
    env.api.faults().clear();
    watch.until("MODIFIED", "beta", "10.9.4.2").await;
}

/// A watch that goes silent without closing is taken for stalled once it
/// outlives the timeoutSeconds it asked for, counted, and re-watched from
/// the last version seen: the event sent while it stalled arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_is_rewatched_without_losing_events() {
    let cache = CacheConfig {
        watch_timeout: Duration::from_secs(1),
        ..CacheConfig::default()
    };
    let env = env(cache, |_| {}).await;
    let (rv, _) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    let f = env.api.faults();
    f.stall("endpoints", FaultVerb::Watch);
    env.api.disconnect_watches();
    eventually("a stalled watch is open", || async { f.injected() >= 1 }).await;
    env.set_ip("beta", "10.9.5.2");
    f.clear();
    watch.until("MODIFIED", "beta", "10.9.5.2").await;
    assert!(env.metric(&errors("timeout")).await >= 1);
    env.set_ip("alpha", "10.9.5.1");
    watch.until("MODIFIED", "alpha", "10.9.5.1").await;
}

/// A storm of 500s and 429s (with Retry-After) on watch and list: retried
/// with backoff, counted by reason, the cache served throughout, and the
/// events sent during the storm arrive once it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_500s_and_429s_is_ridden_out() {
    let env = env(CacheConfig::default(), |_| {}).await;
    let (rv, before) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    let f = env.api.faults();
    f.fail("endpoints", FaultVerb::Watch, 500, None, 2);
    f.fail("endpoints", FaultVerb::Watch, 429, Some(1), 4);
    env.api.disconnect_watches();
    env.set_ip("beta", "10.9.6.2");
    assert_eq!(env.endpoints().await.1, before, "served from the cache");
    watch.until("MODIFIED", "beta", "10.9.6.2").await;
    assert_eq!(f.injected(), 6, "the whole storm was answered");
    assert!(env.metric(&errors("server_error")).await >= 2);
    assert!(env.metric(&errors("throttled")).await >= 1);
    // On a relist too.
    f.fail("endpoints", FaultVerb::List, 500, None, 2);
    f.fail("endpoints", FaultVerb::List, 429, Some(1), 4);
    env.force_relist();
    env.set_ip("alpha", "10.9.6.1");
    watch.until("MODIFIED", "alpha", "10.9.6.1").await;
    assert_eq!(f.injected(), 12);
    assert!(env.metric(&errors("server_error")).await >= 4);
}

/// An API server answering 429 with `Retry-After: 86400` (a day) is asked
/// again after the client's cap (30 s, its backoff's ceiling), counted; the
/// change made meanwhile arrives then, not a day later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_of_a_day_is_obeyed_only_up_to_the_cap() {
    let env = env(CacheConfig::default(), |_| {}).await;
    let (rv, _) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;
    let f = env.api.faults();
    f.fail("endpoints", FaultVerb::Watch, 429, Some(86_400), 1);
    env.api.disconnect_watches();
    env.set_ip("beta", "10.9.7.2");
    let capped = "sitegrid_proxy_upstream_retry_after_capped_total";
    eventually("the day-long Retry-After capped", || async {
        env.metric(capped).await == 1
    })
    .await;
    // The cap plus the margin of a busy machine; a day without the cap.
    watch
        .until_within(Duration::from_secs(120), "MODIFIED", "beta", "10.9.7.2")
        .await;
    assert_eq!(f.injected(), 1);
}

/// A TLS front for the in-memory API server whose serving certificate a
/// test changes; a change closes every open connection, as a restarted API
/// server would, so clients handshake again.
mod tls_front {
    use std::{net::SocketAddr, sync::Arc};

    use parking_lot::Mutex;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose, SanType, SerialNumber,
    };
    use rustls::{
        pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer},
        ServerConfig,
    };
    use tokio::{net::TcpListener, sync::watch, task::JoinHandle};
    use tokio_rustls::TlsAcceptor;

    /// A certificate authority.
    pub struct Ca(CertifiedIssuer<'static, KeyPair>);

    impl Ca {
        pub fn new(name: &str) -> Ca {
            let mut p = CertificateParams::default();
            p.distinguished_name.push(DnType::CommonName, name);
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
            Ca(CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap())
        }

        pub fn der(&self) -> Vec<u8> {
            self.0.der().to_vec()
        }

        /// A serving certificate for 127.0.0.1 signed by this CA.
        pub fn serving(&self, serial: u64) -> Arc<ServerConfig> {
            let mut p = CertificateParams::default();
            p.distinguished_name
                .push(DnType::CommonName, "kube-apiserver");
            p.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
            p.serial_number = Some(SerialNumber::from(serial));
            let key = KeyPair::generate().unwrap();
            let cert = p.signed_by(&key, &self.0).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![CertificateDer::from(cert.der().to_vec())],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
                )
                .unwrap();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        }
    }

    /// The front: TLS on its own port, plain bytes to the API server.
    pub struct Front {
        addr: SocketAddr,
        tls: Arc<Mutex<Arc<ServerConfig>>>,
        generation: watch::Sender<u64>,
        task: JoinHandle<()>,
    }

    impl Front {
        pub async fn start(backend: SocketAddr, tls: Arc<ServerConfig>) -> Front {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let tls = Arc::new(Mutex::new(tls));
            let generation = watch::channel(0).0;
            let (current, gen) = (Arc::clone(&tls), generation.clone());
            let task = tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let acceptor = TlsAcceptor::from(Arc::clone(&current.lock()));
                    let mut closed = gen.subscribe();
                    tokio::spawn(async move {
                        let relay = async {
                            // A refused handshake is the point of some tests.
                            let Ok(mut tls) = acceptor.accept(tcp).await else {
                                return;
                            };
                            let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await
                            else {
                                return;
                            };
                            let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                        };
                        tokio::select! {
                            () = relay => {}
                            _ = closed.changed() => {}
                        }
                    });
                }
            });
            Front {
                addr,
                tls,
                generation,
                task,
            }
        }

        pub fn url(&self) -> String {
            format!("https://{}", self.addr)
        }

        /// Serve `tls` from now on, closing every open connection.
        pub fn rotate(&self, tls: Arc<ServerConfig>) {
            *self.tls.lock() = tls;
            self.generation.send_modify(|g| *g += 1);
        }
    }

    impl Drop for Front {
        fn drop(&mut self) {
            self.task.abort();
        }
    }
}

/// The upstream's serving certificate changes: a new one the proxy's CA
/// signed is taken on reconnect; one it does not trust is refused, counted
/// and logged while the cache keeps serving; a trusted one again and the
/// proxy catches up, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_upstream_certificate_is_trusted_or_refused() {
    let api = ApiServer::new(ApiServerConfig::default());
    api.load(sample::two_sites("v1"));
    for (name, ip) in [
        ("alpha", "10.9.0.1"),
        ("beta", "10.9.0.2"),
        ("gamma", "10.9.0.3"),
    ] {
        api.apply(endpoints(name, ip));
    }
    let upstream = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let trusted = tls_front::Ca::new("trusted");
    let stranger = tls_front::Ca::new("stranger");
    let front = tls_front::Front::start(upstream.local_addr(), trusted.serving(1)).await;
    let mut config = kube::Config::new(front.url().parse().unwrap());
    config.root_cert = Some(vec![trusted.der()]);
    let env = start_proxy(api, upstream, config, CacheConfig::default()).await;
    let (rv, before) = env.endpoints().await;
    let mut watch = env.watch(&rv).await;

    front.rotate(trusted.serving(2));
    env.set_ip("alpha", "10.9.7.1");
    watch.until("MODIFIED", "alpha", "10.9.7.1").await;

    front.rotate(stranger.serving(3));
    env.set_ip("beta", "10.9.7.2");
    eventually("the untrusted certificate is counted", || async {
        env.metric(&errors("tls")).await >= 1
    })
    .await;
    let (_, now) = env.endpoints().await;
    assert_eq!(now.len(), before.len(), "the cache keeps serving");
    assert!(!watch.about("beta").iter().any(|(_, ip)| ip == "10.9.7.2"));

    front.rotate(trusted.serving(4));
    watch.until("MODIFIED", "beta", "10.9.7.2").await;
    assert!(env.serves("beta", "10.9.7.2").await);
}
