//! Serving TLS: the certificate, key and client CA named by `--cert-file`,
//! `--key-file` and `--ca-file`, turned into a rustls configuration that is
//! swapped in atomically when the files change on disk, so a rotated
//! certificate is served without a restart.
//!
//! Nothing here touches process-wide state: the configuration is built with an
//! explicit ring [`CryptoProvider`], so it works whatever default provider
//! (if any) other crates in the process have installed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};
use std::{fmt, fs, io};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{InconsistentKeys, RootCertStore, ServerConfig};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

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

/// The flag a file came from, so an error tells the operator what to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// `--cert-file`.
    CertFile,
    /// `--key-file`.
    KeyFile,
    /// `--ca-file`.
    CaFile,
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Flag::CertFile => "--cert-file",
            Flag::KeyFile => "--key-file",
            Flag::CaFile => "--ca-file",
        })
    }
}

/// Why the TLS files could not be turned into a serving configuration; each
/// message is one line naming the flag, the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read (missing, unreadable, a directory, ...).
    #[error("{flag} {}: {}", .path.display(), describe_io(.source))]
    Read {
        /// The flag that named the file.
        flag: Flag,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A file is not well-formed PEM.
    #[error("{flag} {}: invalid PEM: {problem}", .path.display())]
    Pem {
        /// The flag that named the file.
        flag: Flag,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A certificate or CA file holds no `CERTIFICATE` section.
    #[error("{flag} {}: no certificate found", .path.display())]
    NoCertificate {
        /// The flag that named the file.
        flag: Flag,
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no private key section.
    #[error("--key-file {}: no private key found", .path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds a key the crypto provider cannot use.
    #[error("--key-file {}: unusable private key: {source}", .path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// Why rustls refused it.
        #[source]
        source: rustls::Error,
    },
    /// A certificate does not parse as X.509.
    #[error("{flag} {}: invalid certificate: {source}", .path.display())]
    Certificate {
        /// The flag that named the file.
        flag: Flag,
        /// The file.
        path: PathBuf,
        /// Why rustls refused it.
        #[source]
        source: rustls::Error,
    },
    /// The private key is not the key of the leaf certificate.
    #[error(
        "--cert-file {} and --key-file {}: certificate and key do not match",
        .cert.display(),
        .key.display()
    )]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The CA certificates cannot verify client certificates.
    #[error("--ca-file {}: cannot verify clients with it: {source}", .path.display())]
    ClientCa {
        /// The file.
        path: PathBuf,
        /// Why rustls refused it.
        #[source]
        source: VerifierBuilderError,
    },
    /// rustls refused the configuration itself (no usable protocol version).
    #[error("cannot build the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// A short, lower-case reason for an I/O error, for one-line messages.
fn describe_io(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => "no such file".to_owned(),
        io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => format!("cannot read: {error}"),
    }
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
        let config = build(&files, &provider)?;
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
        let config = build(&self.files, &self.provider)?;
        self.config.store(Arc::new(config));
        *loaded_from = now;
        Ok(true)
    }

    /// Spawns a task calling [`reload_if_changed`](Self::reload_if_changed)
    /// every `every` (at least 1 ms), logging reloads and errors; a failure is
    /// logged once until it changes or clears. The task holds only a `Weak`
    /// and ends at the first tick after the last other owner of the `Arc` is
    /// gone.
    pub fn spawn_reloader(self: &Arc<Self>, every: Duration) -> JoinHandle<()> {
        tokio::spawn(reload_loop(
            Arc::downgrade(self),
            every.max(MIN_RELOAD_PERIOD),
        ))
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

/// What a file looked like on disk, to notice that it changed without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    /// Last modification time, where the filesystem keeps one.
    modified: Option<SystemTime>,
    /// Size in bytes.
    len: u64,
    /// Inode: Kubernetes secret volumes rotate by swapping a symlink to new
    /// files, which may match the old ones in size and coarse mtime.
    #[cfg(unix)]
    inode: u64,
}

impl FileStamp {
    /// The stamp of `path` (following symlinks), or `None` if it cannot be stat'ed.
    fn of(path: &Path) -> Option<FileStamp> {
        let meta = fs::metadata(path).ok()?;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            #[cfg(unix)]
            inode: std::os::unix::fs::MetadataExt::ino(&meta),
        })
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

/// Builds a serving configuration from the files.
fn build(files: &TlsFiles, provider: &Arc<CryptoProvider>) -> Result<ServerConfig, TlsError> {
    let certified = certified_key(files, provider)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let builder = match &files.client_ca {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    config.alpn_protocols = ALPN.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(config)
}

/// The certificate chain and its private key, checked to belong together.
fn certified_key(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let chain = read_certificates(Flag::CertFile, &files.cert)?;
    let key = read_private_key(&files.key)?;
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|source| TlsError::Key {
            path: files.key.clone(),
            source,
        })?;
    let certified = CertifiedKey::new(chain, signer);
    match certified.keys_match() {
        Ok(()) => Ok(certified),
        // The provider cannot derive this key's public half, so a mismatch
        // can only show in handshakes; rustls's own `with_single_cert` accepts
        // such keys the same way.
        Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(certified),
        Err(rustls::Error::InconsistentKeys(_)) => Err(TlsError::KeyMismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
        }),
        Err(source) => Err(TlsError::Certificate {
            flag: Flag::CertFile,
            path: files.cert.clone(),
            source,
        }),
    }
}

/// A verifier that requires client certificates chaining to the CAs in `path`.
fn client_verifier(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certificates(Flag::CaFile, path)? {
        roots.add(cert).map_err(|source| TlsError::Certificate {
            flag: Flag::CaFile,
            path: path.to_owned(),
            source,
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
        .build()
        .map_err(|source| TlsError::ClientCa {
            path: path.to_owned(),
            source,
        })
}

/// Every `CERTIFICATE` section of a PEM file; at least one.
fn read_certificates(flag: Flag, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(flag, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(flag, path, &error))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            flag,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) of a PEM file.
fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(Flag::KeyFile, path)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(key) => Ok(key),
        Err(pem::Error::NoItemsFound) => Err(TlsError::NoKey {
            path: path.to_owned(),
        }),
        Err(error) => Err(pem_error(Flag::KeyFile, path, &error)),
    }
}

/// The whole of a file named by `flag`.
fn read(flag: Flag, path: &Path) -> Result<Vec<u8>, TlsError> {
    fs::read(path).map_err(|source| TlsError::Read {
        flag,
        path: path.to_owned(),
        source,
    })
}

/// A readable [`TlsError::Pem`]: `pem::Error` prints markers as byte arrays.
fn pem_error(flag: Flag, path: &Path, error: &pem::Error) -> TlsError {
    let problem = match error {
        // `end_marker` is the section's label, e.g. `PRIVATE KEY`.
        pem::Error::MissingSectionEnd { end_marker } => {
            format!(
                "no \"-----END {}-----\" line",
                String::from_utf8_lossy(end_marker)
            )
        }
        pem::Error::IllegalSectionStart { line } => {
            format!("malformed line \"{}\"", String::from_utf8_lossy(line))
        }
        other => other.to_string(),
    };
    TlsError::Pem {
        flag,
        path: path.to_owned(),
        problem,
    }
}
