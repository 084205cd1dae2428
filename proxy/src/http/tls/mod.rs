//! Serving TLS: the certificate, key and client CA named by `--cert-file`,
//! `--key-file` and `--ca-file`, turned into a rustls configuration that is
//! swapped in atomically when the files change on disk, so a rotated
//! certificate is served without a restart.
//!
//! Nothing here touches process-wide state: the configuration is built with an
//! explicit ring [`CryptoProvider`], so it works whatever default provider
//! (if any) other crates in the process have installed.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustls::crypto::CryptoProvider;
use rustls::ServerConfig;
use sitegrid_runtime::fs::FileStamp;
use tokio::time::MissedTickBehavior;

mod load;

pub use load::{Flag, TlsError};

/// Protocols offered through ALPN, preferred first: kube-proxy and client-go
/// speak HTTP/2 over TLS; HTTP/1.1 stays for curl and older clients.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The shortest reload period; `tokio::time::interval` panics on zero.
const MIN_RELOAD_PERIOD: Duration = Duration::from_millis(1);

/// Paths given by `--cert-file`, `--key-file` and (optionally) `--ca-file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Serving certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// Private key of the leaf certificate (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA bundle (PEM) client certificates must chain to; `None` means no client authentication.
    pub client_ca: Option<PathBuf>,
}

/// A serving TLS configuration that follows its files: load once, then reload
/// when they change.
pub struct ReloadingTls {
    /// Where the certificate, key and client CA come from.
    files: TlsFiles,
    /// The configuration new connections get; swapped whole, never mutated.
    config: ArcSwap<ServerConfig>,
    /// The files as they were when `config` was built. The lock also keeps
    /// two reloads from racing; it is only held for synchronous file reads.
    loaded_from: Mutex<Stamps>,
    /// ring, chosen here rather than taken from the process-wide default.
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for ReloadingTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadingTls {
    /// Reads the files and builds the first configuration.
    pub fn load(files: TlsFiles) -> Result<ReloadingTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // Stat before reading: a write that lands while we read then shows up
        // as a change at the next check instead of being missed.
        let stamps = stamps_of(&files);
        let config = load::build(&files, &provider, &ALPN)?;
        Ok(ReloadingTls {
            files,
            config: ArcSwap::from_pointee(config),
            loaded_from: Mutex::new(stamps),
            provider,
        })
    }

    /// An acceptor with the current configuration (call per connection, so
    /// each connection gets the newest certificate).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.load_full())
    }

    /// Re-reads the files if any changed (modification time, length or
    /// identity) since the last successful load, and returns whether the
    /// configuration was replaced.
    ///
    /// On error the old configuration stays in use and the error is returned;
    /// the next call tries again, so a rotation caught half-written (new
    /// certificate, old key) is picked up once the second file lands.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let mut loaded_from = self.loaded_from.lock();
        let now = stamps_of(&self.files);
        if now == *loaded_from {
            return Ok(false);
        }
        let config = load::build(&self.files, &self.provider, &ALPN)?;
        self.config.store(Arc::new(config));
        *loaded_from = now;
        Ok(true)
    }

    /// A task calling [`reload_if_changed`](Self::reload_if_changed) every
    /// `every` (at least 1 ms), logging reloads and errors; a failure is
    /// logged once until it changes or clears. The task holds only a `Weak`
    /// and ends at the first tick after the last other owner of the `Arc` is
    /// gone.
    pub fn reloader(
        self: &Arc<Self>,
        every: Duration,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        reload_loop(Arc::downgrade(self), every.max(MIN_RELOAD_PERIOD))
    }
}

/// The body of [`ReloadingTls::spawn_reloader`].
async fn reload_loop(owner: Weak<ReloadingTls>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick completes at once, and `load` has just read the files.
    ticks.tick().await;
    let mut reported: Option<String> = None;
    loop {
        ticks.tick().await;
        let Some(tls) = owner.upgrade() else { return };
        let cert = tls.files.cert.clone();
        // Stat and read off the runtime threads: the files may sit on a slow volume.
        match tokio::task::spawn_blocking(move || tls.reload_if_changed()).await {
            Ok(Ok(false)) => {}
            Ok(Ok(true)) => {
                reported = None;
                tracing::info!(cert = %cert.display(), "reloaded serving TLS certificate and key");
            }
            Ok(Err(error)) => {
                let message = error.to_string();
                if reported.as_ref() != Some(&message) {
                    tracing::warn!(
                        error = %message,
                        "TLS files changed but cannot be loaded; still serving the previous certificate"
                    );
                    reported = Some(message);
                }
            }
            Err(error) => tracing::error!(%error, "TLS reload task failed"),
        }
    }
}

/// Stamps of the certificate, key and client CA files, in that order.
type Stamps = [Option<FileStamp>; 3];

/// The current stamps of the files.
fn stamps_of(files: &TlsFiles) -> Stamps {
    [
        FileStamp::of(&files.cert),
        FileStamp::of(&files.key),
        files.client_ca.as_deref().and_then(FileStamp::of),
    ]
}
