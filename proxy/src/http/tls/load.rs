//! Reading the serving certificate, key and client CA into a rustls
//! configuration, with one-line errors that name the flag and the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::{fmt, fs, io};

use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{InconsistentKeys, RootCertStore, ServerConfig};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsFiles;

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

/// Builds a serving configuration from the files.
pub(super) fn build(
    files: &TlsFiles,
    provider: &Arc<CryptoProvider>,
    alpn: &[&[u8]],
) -> Result<ServerConfig, TlsError> {
    let certified = certified_key(files, provider)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let builder = match &files.client_ca {
        Some(ca) => builder.with_client_cert_verifier(client_verifier(ca, provider)?),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
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
