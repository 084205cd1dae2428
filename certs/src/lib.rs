//! sitegrid-certs: a CA, the proxy's serving certificate, client
//! certificates and the kubeconfig kube-proxy reaches sitegrid-proxy with.
//!
//! Everything lives in one directory (`--out`):
//!
//! | file | what | mode |
//! |---|---|---|
//! | `ca.crt`, `ca.key` | the CA (`init`) | 0644, 0600 |
//! | `server.crt`, `server.key` | the proxy's serving certificate (`server`) | 0644, 0600 |
//! | `NAME.crt`, `NAME.key` | a client certificate (`client NAME`) | 0644, 0600 |
//! | `NAME.kubeconfig` | a kubeconfig for NAME (`kubeconfig`) | 0600 (0644 without embedded keys) |
//!
//! Keys are ECDSA P-256. Files are written atomically (a temporary file in
//! the same directory, then a rename) and never replaced unless `force`:
//! every file a command would write is checked before the first is written,
//! so a refused command leaves the directory as it was.

use std::fs;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};
use x509_parser::extensions::GeneralName;

/// File mode of private keys and of kubeconfigs that embed one.
const SECRET_MODE: u32 = 0o600;
/// File mode of certificates.
const PUBLIC_MODE: u32 = 0o644;
/// Names `client` refuses: they are the CA's and the server's files.
const RESERVED: [&str; 2] = ["ca", "server"];
/// Validity starts this long before now, for clocks a little behind.
const BACKDATE: Duration = Duration::hours(1);
/// The longest validity accepted, in days (100 years).
pub const MAX_DAYS: u32 = 36_500;

/// What can go wrong; each message names the file or flag to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the command would write is already there.
    #[error("{0} already exists (use --force to replace it)")]
    Exists(PathBuf),
    /// `server`/`client` without a CA in the directory.
    #[error("no CA in {0}: run `sitegrid-certs init --out {0}` first")]
    NoCa(String),
    /// `kubeconfig` for a client that has no certificate yet.
    #[error("no client certificate {0}: run `sitegrid-certs client {1}` first")]
    NoClient(PathBuf, String),
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A PEM file that is not what it should be.
    #[error("{path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A flag's value cannot be used.
    #[error("{0}")]
    Usage(String),
    /// rcgen refused to build the certificate.
    #[error("cannot build the certificate: {0}")]
    Cert(#[from] rcgen::Error),
}

/// A file a command wrote, for the report it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Where.
    pub path: PathBuf,
    /// What it is ("CA certificate CN=…", "private key").
    pub what: String,
    /// When the certificate in it expires (certificates and kubeconfigs).
    pub expires: Option<jiff::Timestamp>,
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "wrote {}: {}", self.path.display(), self.what)?;
        if let Some(t) = self.expires {
            write!(
                f,
                ", expires {}",
                sitegrid_apimachinery::duration::format_timestamp(t)
            )?;
        }
        Ok(())
    }
}

/// A certificate to write: its PEM, its key's PEM and what it is.
struct Issued {
    cert: String,
    key: String,
    what: String,
    expires: OffsetDateTime,
}

/// The directory the certificates live in.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
    force: bool,
}

/// How a kubeconfig carries its certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// Inline (`certificate-authority-data`, …): one self-contained file.
    Embedded,
    /// Paths `DIR/ca.crt`, `DIR/tls.crt`, `DIR/tls.key`: where a Secret of
    /// type `kubernetes.io/tls` (with `ca.crt`) is mounted.
    Files(PathBuf),
}

impl Pki {
    /// The directory `dir`; `force` lets commands replace existing files.
    pub fn new(dir: impl Into<PathBuf>, force: bool) -> Pki {
        Pki {
            dir: dir.into(),
            force,
        }
    }

    /// `init`: a self-signed CA valid for `days`, named `cn`.
    pub fn init(&self, cn: &str, days: u32) -> Result<Vec<Written>, Error> {
        let (crt, key) = (self.path("ca.crt"), self.path("ca.key"));
        self.check_free(&[&crt, &key])?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name(cn, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        let (not_before, not_after) = validity(days, None)?;
        params.not_before = not_before;
        params.not_after = not_after;
        let key_pair = KeyPair::generate()?;
        let cert = params.self_signed(&key_pair)?;
        self.write_issued(
            "ca",
            Issued {
                cert: cert.pem(),
                key: key_pair.serialize_pem(),
                what: format!("CA certificate CN={cn}"),
                expires: not_after,
            },
        )
    }

    /// `server`: the proxy's serving certificate, for `127.0.0.1`, `::1`,
    /// `localhost` and the extra `dns` names and `ips`.
    pub fn server(
        &self,
        cn: &str,
        dns: &[String],
        ips: &[IpAddr],
        days: u32,
    ) -> Result<Vec<Written>, Error> {
        self.check_free(&[&self.path("server.crt"), &self.path("server.key")])?;
        let ca = self.ca()?;
        let mut sans = vec![
            SanType::IpAddress(IpAddr::from([127, 0, 0, 1])),
            SanType::IpAddress(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
        ];
        sans.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        let mut names = vec!["localhost".to_owned()];
        for d in dns {
            if d.is_empty() || !d.is_ascii() || d.contains(char::is_whitespace) {
                return Err(Error::Usage(format!("--dns {d:?}: not a DNS name")));
            }
            names.push(d.clone());
        }
        for n in names {
            let n = n
                .try_into()
                .map_err(|_| Error::Usage(format!("--dns {:?}: not a DNS name", dns)))?;
            sans.push(SanType::DnsName(n));
        }
        sans.dedup();
        let shown: Vec<String> = sans.iter().map(san_text).collect();
        let mut params = leaf(cn, &[], ExtendedKeyUsagePurpose::ServerAuth);
        params.subject_alt_names = sans;
        let issued = ca.issue(
            params,
            days,
            format!("serving certificate CN={cn}, SANs {}", shown.join(", ")),
        )?;
        self.write_issued("server", issued)
    }

    /// `client NAME`: a client certificate for user `user` (default NAME)
    /// in `groups`, written as `NAME.crt`/`NAME.key`.
    pub fn client(
        &self,
        name: &str,
        user: Option<&str>,
        groups: &[String],
        days: u32,
    ) -> Result<Vec<Written>, Error> {
        check_client_name(name)?;
        self.check_free(&[
            &self.path(&format!("{name}.crt")),
            &self.path(&format!("{name}.key")),
        ])?;
        let ca = self.ca()?;
        let user = user.unwrap_or(name);
        if user.is_empty() {
            return Err(Error::Usage("--user must not be empty".to_owned()));
        }
        // rcgen keeps one value per attribute type in a subject.
        if groups.len() > 1 {
            return Err(Error::Usage(format!(
                "--group given {} times: a certificate from sitegrid-certs carries one group",
                groups.len()
            )));
        }
        let params = leaf(user, groups, ExtendedKeyUsagePurpose::ClientAuth);
        let mut what = format!("client certificate for user {user}");
        if !groups.is_empty() {
            what.push_str(&format!(" in groups {}", groups.join(", ")));
        }
        let issued = ca.issue(params, days, what)?;
        self.write_issued(name, issued)
    }

    /// `kubeconfig`: `NAME.kubeconfig`, reaching `server` with NAME's
    /// client certificate and trusting the CA.
    pub fn kubeconfig(
        &self,
        name: &str,
        server: &str,
        material: &KeyMaterial,
    ) -> Result<Vec<Written>, Error> {
        check_client_name(name)?;
        if !server.starts_with("https://") {
            return Err(Error::Usage(format!(
                "--server {server}: must be an https:// URL (the proxy verifies the client certificate over TLS)"
            )));
        }
        let out = self.path(&format!("{name}.kubeconfig"));
        self.check_free(&[&out])?;
        let ca = self.path("ca.crt");
        if !ca.exists() {
            return Err(Error::NoCa(self.dir.display().to_string()));
        }
        let (crt, key) = (
            self.path(&format!("{name}.crt")),
            self.path(&format!("{name}.key")),
        );
        if !crt.exists() || !key.exists() {
            return Err(Error::NoClient(crt, name.to_owned()));
        }
        let cert_pem = read(&crt)?;
        let expires = parse_cert(&crt, &cert_pem)?.not_after;
        let user = match material {
            KeyMaterial::Embedded => serde_json::json!({
                "client-certificate-data": b64(cert_pem.as_bytes()),
                "client-key-data": b64(read(&key)?.as_bytes()),
            }),
            KeyMaterial::Files(dir) => serde_json::json!({
                "client-certificate": dir.join("tls.crt"),
                "client-key": dir.join("tls.key"),
            }),
        };
        let cluster = match material {
            KeyMaterial::Embedded => serde_json::json!({
                "server": server,
                "certificate-authority-data": b64(read(&ca)?.as_bytes()),
            }),
            KeyMaterial::Files(dir) => serde_json::json!({
                "server": server,
                "certificate-authority": dir.join("ca.crt"),
            }),
        };
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "sitegrid-proxy", "cluster": cluster}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": "sitegrid-proxy", "context": {"cluster": "sitegrid-proxy", "user": name}}],
            "current-context": "sitegrid-proxy",
        });
        let yaml = serde_saphyr::to_string(&config)
            .map_err(|e| Error::Usage(format!("cannot write the kubeconfig as YAML: {e}")))?;
        let (mode, what) = match material {
            KeyMaterial::Embedded => (SECRET_MODE, format!("kubeconfig for {name} at {server}, certificates embedded")),
            KeyMaterial::Files(dir) => (
                PUBLIC_MODE,
                format!(
                    "kubeconfig for {name} at {server}, certificates read from {}/{{ca.crt,tls.crt,tls.key}}",
                    dir.display()
                ),
            ),
        };
        self.write(&out, yaml.as_bytes(), mode)?;
        Ok(vec![Written {
            path: out,
            what,
            expires: Some(timestamp(expires)),
        }])
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Refuses (unless `force`) when any of `paths` exists.
    fn check_free(&self, paths: &[&Path]) -> Result<(), Error> {
        if self.force {
            return Ok(());
        }
        match paths.iter().find(|p| p.exists()) {
            Some(p) => Err(Error::Exists(p.to_path_buf())),
            None => Ok(()),
        }
    }

    /// The CA of this directory, read back from `ca.crt` and `ca.key`.
    fn ca(&self) -> Result<Ca, Error> {
        let (crt, key) = (self.path("ca.crt"), self.path("ca.key"));
        if !crt.exists() || !key.exists() {
            return Err(Error::NoCa(self.dir.display().to_string()));
        }
        Ca::from_pem(&crt, &read(&crt)?, &key, &read(&key)?)
    }

    /// Writes `NAME.crt` and `NAME.key`.
    fn write_issued(&self, name: &str, issued: Issued) -> Result<Vec<Written>, Error> {
        fs::create_dir_all(&self.dir).map_err(|source| Error::Io {
            path: self.dir.clone(),
            source,
        })?;
        let (crt, key) = (
            self.path(&format!("{name}.crt")),
            self.path(&format!("{name}.key")),
        );
        // The key first: a certificate is never on disk without its key.
        self.write(&key, issued.key.as_bytes(), SECRET_MODE)?;
        self.write(&crt, issued.cert.as_bytes(), PUBLIC_MODE)?;
        Ok(vec![
            Written {
                path: crt,
                what: issued.what,
                expires: Some(timestamp(issued.expires)),
            },
            Written {
                path: key,
                what: format!("private key (ECDSA P-256, mode {SECRET_MODE:o})"),
                expires: None,
            },
        ])
    }

    /// Writes `path` atomically with `mode`: a temporary file, then a rename.
    fn write(&self, path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        fs::create_dir_all(&self.dir).map_err(|source| Error::Io {
            path: self.dir.clone(),
            source,
        })?;
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let result = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&tmp)?;
            // The mode given to open() is masked by the umask; set it exactly.
            f.set_permissions(fs::Permissions::from_mode(mode))?;
            f.write_all(contents)?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}

/// A CA that signs.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    not_after: OffsetDateTime,
}

impl Ca {
    /// Signs `params` with a new key, valid `days` (never past the CA).
    fn issue(
        &self,
        mut params: CertificateParams,
        days: u32,
        what: String,
    ) -> Result<Issued, Error> {
        let (not_before, not_after) = validity(days, Some(self.not_after))?;
        params.not_before = not_before;
        params.not_after = not_after;
        let key_pair = KeyPair::generate()?;
        let cert = params.signed_by(&key_pair, &self.issuer)?;
        Ok(Issued {
            cert: cert.pem(),
            key: key_pair.serialize_pem(),
            what,
            expires: not_after,
        })
    }

    /// The CA in `cert_pem` (read from `crt`) with its key `key_pem` (from
    /// `key`): the certificate must be a CA and the key its own.
    fn from_pem(crt: &Path, cert_pem: &str, key: &Path, key_pem: &str) -> Result<Ca, Error> {
        let parsed = parse_cert(crt, cert_pem)?;
        let key_pair = KeyPair::from_pem(key_pem).map_err(|e| Error::Invalid {
            path: key.to_path_buf(),
            what: format!("not a private key in PEM: {e}"),
        })?;
        if key_pair.public_key_raw() != parsed.public_key.as_slice() {
            return Err(Error::Invalid {
                path: key.to_path_buf(),
                what: format!("is not the key of {}", crt.display()),
            });
        }
        if !parsed.is_ca {
            return Err(Error::Invalid {
                path: crt.to_path_buf(),
                what: "is not a CA certificate".to_owned(),
            });
        }
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key_pair).map_err(|e| Error::Invalid {
            path: crt.to_path_buf(),
            what: format!("cannot sign with this CA: {e}"),
        })?;
        Ok(Ca {
            issuer,
            not_after: parsed.not_after,
        })
    }
}

/// Entry points for `sitegrid-fuzz`: what `server` and `client` read back
/// from a directory, from text instead of files.
#[doc(hidden)]
pub mod fuzzing {
    use std::path::Path;

    use super::{Ca, Error};

    /// Reads a CA certificate and its key as `server`/`client` do from `ca.crt` and `ca.key`.
    pub fn ca(cert_pem: &str, key_pem: &str) -> Result<(), Error> {
        Ca::from_pem(Path::new("ca.crt"), cert_pem, Path::new("ca.key"), key_pem).map(drop)
    }
}

/// The validity of a certificate of `days`, cut to `limit` (the CA's end).
fn validity(
    days: u32,
    limit: Option<OffsetDateTime>,
) -> Result<(OffsetDateTime, OffsetDateTime), Error> {
    if days == 0 || days > MAX_DAYS {
        return Err(Error::Usage(format!(
            "--days {days}: must be between 1 and {MAX_DAYS}"
        )));
    }
    let now = OffsetDateTime::now_utc();
    let mut not_after = now + Duration::days(i64::from(days));
    if let Some(limit) = limit {
        if limit <= now {
            return Err(Error::Usage(
                "the CA has expired: make a new one with `sitegrid-certs init --force`".to_owned(),
            ));
        }
        not_after = not_after.min(limit);
    }
    Ok((now - BACKDATE, not_after))
}

/// Parameters of a leaf certificate: subject `cn` (user), `o` (groups).
fn leaf(cn: &str, groups: &[String], usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(cn, groups);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    params
}

/// A subject: `CN=cn` and one `O=` per group (how Kubernetes reads users and
/// groups from client certificates).
fn name(cn: &str, groups: &[String]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for g in groups {
        dn.push(DnType::OrganizationName, g.as_str());
    }
    dn.push(DnType::CommonName, cn);
    dn
}

/// A client NAME is a file name in the directory, not a path.
fn check_client_name(name: &str) -> Result<(), Error> {
    if name.is_empty()
        || name.starts_with('.')
        || name.contains(['/', '\0'])
        || RESERVED.contains(&name)
    {
        return Err(Error::Usage(format!(
            "client name {name:?}: must be a plain file name, not empty, not starting with '.', and not {}",
            RESERVED.join(" or ")
        )));
    }
    Ok(())
}

fn san_text(san: &SanType) -> String {
    match san {
        SanType::IpAddress(ip) => ip.to_string(),
        SanType::DnsName(n) => n.as_str().to_owned(),
        other => format!("{other:?}"),
    }
}

fn read(path: &Path) -> Result<String, Error> {
    fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn timestamp(t: OffsetDateTime) -> jiff::Timestamp {
    jiff::Timestamp::from_second(t.unix_timestamp()).unwrap_or(jiff::Timestamp::MAX)
}

/// What sitegrid-certs reads back from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The subject's CN.
    pub common_name: String,
    /// The subject's O values (Kubernetes groups).
    pub organizations: Vec<String>,
    /// Whether basicConstraints says CA.
    pub is_ca: bool,
    /// The end of validity.
    pub not_after: OffsetDateTime,
    /// The raw subject public key.
    pub public_key: Vec<u8>,
    /// The subject alternative names (IP addresses and DNS names), as text.
    pub sans: Vec<String>,
}

/// Reads the first certificate of the PEM `text` (from `path`, for errors).
pub fn parse_cert(path: &Path, text: &str) -> Result<CertInfo, Error> {
    let invalid = |what: String| Error::Invalid {
        path: path.to_path_buf(),
        what,
    };
    let (_, pem) = x509_parser::pem::parse_x509_pem(text.as_bytes())
        .map_err(|e| invalid(format!("not a PEM certificate: {e}")))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| invalid(format!("not an X.509 certificate: {e}")))?;
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .filter_map(|a| a.as_str().ok())
        .next()
        .unwrap_or_default()
        .to_owned();
    let organizations = subject
        .iter_organization()
        .filter_map(|a| a.as_str().ok().map(str::to_owned))
        .collect();
    let is_ca = cert
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|bc| bc.value.ca);
    let not_after = cert.validity().not_after.to_datetime();
    let sans = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some((*d).to_owned()),
                    GeneralName::IPAddress(b) => match b.len() {
                        4 => <[u8; 4]>::try_from(*b)
                            .ok()
                            .map(|a| IpAddr::from(a).to_string()),
                        16 => <[u8; 16]>::try_from(*b)
                            .ok()
                            .map(|a| IpAddr::from(a).to_string()),
                        _ => None,
                    },
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(CertInfo {
        common_name,
        organizations,
        is_ca,
        not_after,
        public_key: cert.public_key().subject_public_key.data.to_vec(),
        sans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sitegrid-certs-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_client_certificate_names_its_user_and_groups_and_lives_no_longer_than_its_ca() {
        let dir = scratch("client");
        let pki = Pki::new(&dir, false);
        pki.init("test CA", 30).unwrap();
        pki.client(
            "kube-proxy",
            Some("system:kube-proxy"),
            &["edge".to_owned()],
            365,
        )
        .unwrap();
        let path = dir.join("kube-proxy.crt");
        let info = parse_cert(&path, &read(&path).unwrap()).unwrap();
        assert_eq!(info.common_name, "system:kube-proxy");
        assert_eq!(info.organizations, ["edge"]);
        assert!(!info.is_ca);
        let ca = parse_cert(&dir.join("ca.crt"), &read(&dir.join("ca.crt")).unwrap()).unwrap();
        assert!(ca.is_ca);
        assert!(info.not_after <= ca.not_after, "the client outlives its CA");
        assert_eq!(mode(&dir.join("kube-proxy.key")), 0o600);
        assert_eq!(mode(&dir.join("kube-proxy.crt")), 0o644);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nothing_is_replaced_without_force_and_a_refused_command_writes_nothing() {
        let dir = scratch("force");
        let pki = Pki::new(&dir, false);
        pki.init("test CA", 30).unwrap();
        let ca_before = read(&dir.join("ca.key")).unwrap();
        let err = pki.init("other CA", 30).unwrap_err();
        assert!(
            matches!(err, Error::Exists(ref p) if p.ends_with("ca.crt")),
            "{err}"
        );
        assert_eq!(read(&dir.join("ca.key")).unwrap(), ca_before);
        // Only the key exists: still refused, and no certificate appears.
        fs::write(dir.join("server.key"), "mine").unwrap();
        let err = pki.server("sitegrid-proxy", &[], &[], 30).unwrap_err();
        assert!(
            matches!(err, Error::Exists(ref p) if p.ends_with("server.key")),
            "{err}"
        );
        assert!(!dir.join("server.crt").exists());
        assert_eq!(read(&dir.join("server.key")).unwrap(), "mine");
        // With force, replaced (and the key's mode is 0600 again).
        Pki::new(&dir, true).init("other CA", 30).unwrap();
        assert_ne!(read(&dir.join("ca.key")).unwrap(), ca_before);
        assert_eq!(mode(&dir.join("ca.key")), 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_ca_whose_key_does_not_match_is_refused() {
        let dir = scratch("mismatch");
        Pki::new(&dir, false).init("test CA", 30).unwrap();
        let other = scratch("mismatch-other");
        Pki::new(&other, false).init("other CA", 30).unwrap();
        fs::copy(other.join("ca.key"), dir.join("ca.key")).unwrap();
        let err = Pki::new(&dir, false)
            .client("kube-proxy", None, &[], 30)
            .unwrap_err();
        assert!(err.to_string().contains("is not the key of"), "{err}");
        assert!(!dir.join("kube-proxy.crt").exists());
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_dir_all(&other).unwrap();
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_named() {
        let dir = scratch("usage");
        let pki = Pki::new(&dir, false);
        assert!(pki
            .init("CA", 0)
            .unwrap_err()
            .to_string()
            .contains("--days 0"));
        let err = pki.server("p", &[], &[], 30).unwrap_err();
        assert!(err.to_string().contains("sitegrid-certs init"), "{err}");
        pki.init("CA", 30).unwrap();
        for name in ["", "ca", "../x", ".hidden"] {
            let err = pki.client(name, None, &[], 30).unwrap_err();
            assert!(err.to_string().contains("client name"), "{name}: {err}");
        }
        let two = ["a".to_owned(), "b".to_owned()];
        let err = pki.client("x", None, &two, 30).unwrap_err();
        assert!(err.to_string().contains("--group given 2 times"), "{err}");
        let err = pki
            .server("p", &["has space".to_owned()], &[], 30)
            .unwrap_err();
        assert!(err.to_string().contains("--dns"), "{err}");
        let err = pki
            .kubeconfig(
                "kube-proxy",
                "http://127.0.0.1:51006",
                &KeyMaterial::Embedded,
            )
            .unwrap_err();
        assert!(err.to_string().contains("https://"), "{err}");
        let err = pki
            .kubeconfig(
                "kube-proxy",
                "https://127.0.0.1:51006",
                &KeyMaterial::Embedded,
            )
            .unwrap_err();
        assert!(
            err.to_string().contains("sitegrid-certs client kube-proxy"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
