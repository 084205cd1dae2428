//! The node cache on disk: one file per kept resource and one for tokens,
//! in a directory only its owner may enter (0700), each file readable by
//! its owner only (0600), as the kubelet keeps its own credentials.
//!
//! ```text
//!  offset  size  field
//!  0       8     magic "SGPXNODE"
//!  8       4     format version (little endian; 1)
//!  12      4     flags: bit 0 = sealed
//!  16      4     CRC-32 of the payload as stored
//!  20      8     payload length
//!  28      ...   payload: the postcard encoding of the file's records;
//!                sealed: a 12-byte nonce, then the records encrypted with
//!                ChaCha20-Poly1305 under the key of --node-cache-key-file
//!                (the header's first 16 bytes and the file name are its
//!                associated data, so a sealed file cannot pass for another)
//! ```
//!
//! A file is written whole (temporary file, fsync, rename, directory
//! fsync: `sitegrid_runtime::fs::AtomicFile`); the tokens' journal
//! ([`crate::journal`]) is the one file written in place, its records
//! framed as such files end to end. A file that is truncated, corrupt, of
//! another format, sealed without the key, or kept for another node is
//! refused whole: nothing of that resource is answered until the
//! kubelet lists it again through the proxy (a refused pod list is
//! answered `503`, never as an empty list).

use std::{
    fs,
    os::unix::fs::{DirBuilderExt, PermissionsExt},
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use ring::aead;
use serde::{Deserialize, Serialize};
use sitegrid_runtime::fs::AtomicFile;

use crate::{
    facts,
    resource::KeptResource,
    scope::Scope,
    state::{ResourceState, ScopeState},
    token::{KeptToken, Tokens},
    wire::{Format, Item},
};

const MAGIC: &[u8; 8] = b"SGPXNODE";
const VERSION: u32 = 1;
const HEADER: usize = 28;
const SEALED: u32 = 1;
/// The largest file read back.
const MAX_FILE: u64 = 256 << 20;
/// The name of the tokens' file.
pub const TOKENS_FILE: &str = "serviceaccount-tokens";
/// The name of the file of the kubelet's offline reports.
pub const LOCAL_FILE: &str = "local-pod-status";
/// The name of the file of the node's boot the node cache last ran in.
pub const BOOT_FILE: &str = "node-boot";

/// Where the node cache is kept, and how.
#[derive(Clone)]
pub struct Storage {
    dir: PathBuf,
    key: Option<SealingKey>,
    /// Held while a file is written: a file's temporary name is fixed, so
    /// two writes of one file (the write-behind and a first answer's) must
    /// not overlap.
    writing: std::sync::Arc<parking_lot::Mutex<()>>,
}

/// A ChaCha20-Poly1305 key (32 bytes, from --node-cache-key-file).
#[derive(Clone)]
pub struct SealingKey(aead::LessSafeKey);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(..)")
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("dir", &self.dir)
            .field("sealed", &self.key.is_some())
            .finish()
    }
}

/// Why the storage cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The directory cannot be made or given mode 0700.
    #[error("node cache directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    /// The key file cannot be read or is not 32 bytes.
    #[error("node cache key file {0}: {1}")]
    Key(PathBuf, String),
}

impl SealingKey {
    /// The key in `path`: 32 bytes, raw or as 64 hexadecimal digits.
    pub fn read(path: &Path) -> Result<SealingKey, StorageError> {
        let bad = |m: String| StorageError::Key(path.to_owned(), m);
        let raw = fs::read(path).map_err(|e| bad(e.to_string()))?;
        let text = std::str::from_utf8(&raw).map(str::trim).unwrap_or_default();
        let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap_or_default())
                .collect()
        } else {
            raw
        };
        SealingKey::from_bytes(&bytes).ok_or_else(|| {
            bad(format!(
                "{} bytes; a key is 32 bytes (or 64 hexadecimal digits)",
                bytes.len()
            ))
        })
    }

    /// A key of exactly 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<SealingKey> {
        let key = aead::UnboundKey::new(&aead::CHACHA20_POLY1305, bytes).ok()?;
        Some(SealingKey(aead::LessSafeKey::new(key)))
    }
}

impl Storage {
    /// The node cache in `dir` (made with mode 0700, or set to it), sealed
    /// with `key` when one is given.
    pub fn new(dir: &Path, key: Option<SealingKey>) -> Result<Storage, StorageError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(0o700)))
            .map_err(|e| StorageError::Dir(dir.to_owned(), e))?;
        Ok(Storage {
            dir: dir.to_owned(),
            key,
            writing: Default::default(),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads back a resource's file: `Ok(None)` when there is none.
    pub fn load_resource(
        &self,
        node: &str,
        resource: KeptResource,
    ) -> Result<Option<ResourceState>, String> {
        let Some(payload) = self.read(&resource.file_name())? else {
            return Ok(None);
        };
        let file: ResourceFile =
            postcard::from_bytes(&payload).map_err(|e| format!("unreadable records: {e}"))?;
        if file.node != node {
            return Err(format!("kept for node {:?}, not {node:?}", file.node));
        }
        if file.resource != resource.file_name() {
            return Err(format!(
                "holds {}, not {}",
                file.resource,
                resource.file_name()
            ));
        }
        let mut state = ResourceState::default();
        for o in file.objects {
            let item = item_of(resource, o.protobuf, o.bytes)?;
            state.objects.insert(
                (item.facts.namespace.clone(), item.facts.name.clone()),
                item,
            );
        }
        for s in file.scopes {
            let scope = Scope::new(s.namespace.as_deref(), &s.label, &s.field)
                .map_err(|e| format!("a scope that does not parse: {e}"))?;
            if let Some(missing) = s.members.iter().find(|k| !state.objects.contains_key(*k)) {
                return Err(format!(
                    "scope {scope} names {missing:?}, which is not in the file"
                ));
            }
            state.scopes.insert(
                scope,
                ScopeState {
                    resource_version: s.resource_version,
                    members: s.members.into_iter().collect(),
                    format: format_of(s.protobuf),
                },
            );
        }
        state.gotten = file.gotten.into_iter().collect();
        Ok(Some(state))
    }

    /// Writes a resource's file.
    pub fn write_resource(
        &self,
        node: &str,
        resource: KeptResource,
        state: &ResourceState,
    ) -> Result<u64, String> {
        let file = ResourceFile {
            node: node.to_owned(),
            resource: resource.file_name(),
            written_ms: now_ms(),
            objects: state
                .objects
                .values()
                .map(|i| ObjectRecord {
                    protobuf: i.format == Format::Protobuf,
                    bytes: i.bytes.to_vec(),
                })
                .collect(),
            scopes: state
                .scopes
                .iter()
                .map(|(scope, s)| ScopeRecord {
                    namespace: scope.namespace.clone(),
                    label: scope.label().to_owned(),
                    field: scope.field().to_owned(),
                    resource_version: s.resource_version.clone(),
                    protobuf: s.format == Format::Protobuf,
                    members: s.members.iter().cloned().collect(),
                })
                .collect(),
            gotten: state.gotten.iter().cloned().collect(),
        };
        let payload = postcard::to_allocvec(&file).map_err(|e| e.to_string())?;
        self.write(&resource.file_name(), payload)
    }

    /// Reads back the tokens' file, and the last journal record it holds
    /// (see [`crate::journal`]).
    pub fn load_tokens(&self, node: &str) -> Result<Option<(Tokens, u64)>, String> {
        let Some(file) = self.read_records(TOKENS_FILE, node, |f: &TokensFile| &f.node)? else {
            return Ok(None);
        };
        let mut tokens = Tokens::default();
        for t in file.tokens {
            tokens.insert(t.into());
        }
        tokens.dirty = false;
        Ok(Some((tokens, file.journal_seq)))
    }

    /// Writes the tokens' file, holding the journal's records up to
    /// `journal_seq`.
    pub fn write_tokens(
        &self,
        node: &str,
        tokens: &Tokens,
        journal_seq: u64,
    ) -> Result<u64, String> {
        let file = TokensFile {
            node: node.to_owned(),
            written_ms: now_ms(),
            journal_seq,
            tokens: tokens.iter().map(TokenRecord::from).collect(),
        };
        let payload = postcard::to_allocvec(&file).map_err(|e| e.to_string())?;
        self.write(TOKENS_FILE, payload)
    }

    /// Reads back the kubelet's offline reports.
    pub fn load_local(&self, node: &str) -> Result<Option<Vec<crate::local::LocalPod>>, String> {
        let file = self.read_records(LOCAL_FILE, node, |f: &LocalFile| &f.node)?;
        Ok(file.map(|f| f.pods))
    }

    /// Writes the kubelet's offline reports (none: removes the file).
    pub fn write_local(
        &self,
        node: &str,
        pods: Vec<crate::local::LocalPod>,
    ) -> Result<u64, String> {
        if pods.is_empty() {
            return self.remove(LOCAL_FILE).map(|()| 0);
        }
        let file = LocalFile {
            node: node.to_owned(),
            written_ms: now_ms(),
            pods,
        };
        let payload = postcard::to_allocvec(&file).map_err(|e| e.to_string())?;
        self.write(LOCAL_FILE, payload)
    }

    /// Reads back the node's boot the node cache last ran in.
    pub fn load_boot(&self, node: &str) -> Result<Option<String>, String> {
        let file = self.read_records(BOOT_FILE, node, |f: &BootFile| &f.node)?;
        Ok(file.map(|f| f.boot))
    }

    /// Writes the node's boot the node cache runs in.
    pub fn write_boot(&self, node: &str, boot: &str) -> Result<u64, String> {
        let file = BootFile {
            node: node.to_owned(),
            written_ms: now_ms(),
            boot: boot.to_owned(),
        };
        let payload = postcard::to_allocvec(&file).map_err(|e| e.to_string())?;
        self.write(BOOT_FILE, payload)
    }

    /// The records of the file `name`, kept for `node` (which `kept_for`
    /// reads of them), if there is one.
    fn read_records<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        node: &str,
        kept_for: impl Fn(&T) -> &str,
    ) -> Result<Option<T>, String> {
        let Some(payload) = self.read(name)? else {
            return Ok(None);
        };
        let file: T =
            postcard::from_bytes(&payload).map_err(|e| format!("unreadable records: {e}"))?;
        let of = kept_for(&file);
        if of != node {
            return Err(format!("kept for node {of:?}, not {node:?}"));
        }
        Ok(Some(file))
    }

    /// The bytes every kept file takes on disk.
    pub fn size(&self) -> u64 {
        fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, String> {
        let path = self.dir.join(name);
        let bytes = match fs::File::open(&path) {
            Ok(f) => {
                use std::io::Read;
                let mut out = Vec::new();
                f.take(MAX_FILE + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| e.to_string())?;
                if out.len() as u64 > MAX_FILE {
                    return Err(format!("larger than {MAX_FILE} bytes"));
                }
                out
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let (payload, end) = self.unframe(name, &bytes)?;
        if end != bytes.len() {
            return Err(format!(
                "{} bytes after a {end}-byte file: not one file",
                bytes.len() - end
            ));
        }
        Ok(Some(payload))
    }

    /// The payload of the framed file (or journal record) at the start of
    /// `bytes`, checked and opened, and where it ends; `name` is the file's
    /// name, which a sealed payload is bound to.
    pub(crate) fn unframe(&self, name: &str, bytes: &[u8]) -> Result<(Vec<u8>, usize), String> {
        let header = bytes.get(..HEADER).ok_or("shorter than its header")?;
        if &header[..8] != MAGIC {
            return Err("not a node cache file".into());
        }
        let word =
            |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().unwrap_or_default());
        if word(8) != VERSION {
            return Err(format!(
                "format version {}, this proxy reads {VERSION}",
                word(8)
            ));
        }
        let flags = word(12);
        let crc = word(16);
        let len = u64::from_le_bytes(header[20..28].try_into().unwrap_or_default());
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(HEADER))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| {
                format!(
                    "{} payload bytes, the header says {len}: torn",
                    bytes.len() - HEADER
                )
            })?;
        let payload = &bytes[HEADER..end];
        if crc32fast::hash(payload) != crc {
            return Err("checksum mismatch".into());
        }
        let plain = match (flags & SEALED != 0, &self.key) {
            (false, _) => payload.to_vec(),
            (true, None) => return Err("sealed, and no --node-cache-key-file was given".into()),
            (true, Some(key)) => {
                let (nonce, sealed) = payload
                    .split_at_checked(aead::NONCE_LEN)
                    .ok_or("sealed payload too short")?;
                let nonce =
                    aead::Nonce::try_assume_unique_for_key(nonce).map_err(|_| "bad nonce")?;
                let mut buf = sealed.to_vec();
                let plain = key
                    .0
                    .open_in_place(nonce, aead::Aad::from(aad(&bytes[..16], name)), &mut buf)
                    .map_err(|_| "does not open with this key (another key, or altered)")?;
                plain.to_vec()
            }
        };
        Ok((plain, end))
    }

    fn write(&self, name: &str, payload: Vec<u8>) -> Result<u64, String> {
        let whole = self.file(name, payload)?;
        let _writing = self.writing.lock();
        let file = AtomicFile::open(&self.dir.join(name), 0o600).map_err(|e| e.to_string())?;
        file.write(&whole).map_err(|e| e.to_string())?;
        Ok(whole.len() as u64)
    }

    /// The file `name` holding `payload`: the header, then the payload,
    /// sealed with the key if there is one.
    pub(crate) fn file(&self, name: &str, payload: Vec<u8>) -> Result<Vec<u8>, String> {
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        let payload = match &self.key {
            None => payload,
            Some(key) => {
                header[12..16].copy_from_slice(&SEALED.to_le_bytes());
                let mut nonce = [0u8; aead::NONCE_LEN];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
                    .map_err(|_| "no randomness for a nonce")?;
                let mut buf = payload;
                key.0
                    .seal_in_place_append_tag(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(aad(&header[..16], name)),
                        &mut buf,
                    )
                    .map_err(|_| "sealing failed")?;
                let mut out = nonce.to_vec();
                out.extend_from_slice(&buf);
                out
            }
        };
        header[16..20].copy_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        header[20..28].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        let mut whole = header.to_vec();
        whole.extend_from_slice(&payload);
        Ok(whole)
    }

    /// Removes a resource's file (nothing of it kept).
    pub fn remove(&self, name: &str) -> Result<(), String> {
        match fs::remove_file(self.dir.join(name)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A file holding `payload` as a storage without a key writes it (the
/// fuzz target reaches the records past the header and checksum with it).
pub fn framed(payload: &[u8]) -> Vec<u8> {
    let unkeyed = Storage {
        dir: std::path::PathBuf::new(),
        key: None,
        writing: Default::default(),
    };
    unkeyed.file("", payload.to_vec()).unwrap_or_default()
}

fn aad(header: &[u8], name: &str) -> Vec<u8> {
    let mut out = header.to_vec();
    out.extend_from_slice(name.as_bytes());
    out
}

fn item_of(resource: KeptResource, protobuf: bool, bytes: Vec<u8>) -> Result<Item, String> {
    let bytes = Bytes::from(bytes);
    let facts = if protobuf {
        facts::from_protobuf(resource, &bytes)
            .map_err(|e| format!("an object that does not decode: {e}"))?
    } else {
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("an object that is not JSON: {e}"))?;
        facts::from_json(resource, &value)
    };
    Ok(Item {
        bytes,
        format: format_of(protobuf),
        facts,
    })
}

fn format_of(protobuf: bool) -> Format {
    if protobuf {
        Format::Protobuf
    } else {
        Format::Json
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[derive(Serialize, Deserialize)]
struct ResourceFile {
    node: String,
    resource: String,
    written_ms: u64,
    objects: Vec<ObjectRecord>,
    scopes: Vec<ScopeRecord>,
    gotten: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct ObjectRecord {
    protobuf: bool,
    bytes: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct ScopeRecord {
    namespace: Option<String>,
    label: String,
    field: String,
    resource_version: String,
    protobuf: bool,
    members: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct LocalFile {
    node: String,
    written_ms: u64,
    pods: Vec<crate::local::LocalPod>,
}

#[derive(Serialize, Deserialize)]
struct BootFile {
    node: String,
    written_ms: u64,
    boot: String,
}

#[derive(Serialize, Deserialize)]
struct TokensFile {
    node: String,
    written_ms: u64,
    journal_seq: u64,
    tokens: Vec<TokenRecord>,
}

/// One kept token as it is written, in the tokens' file and in the journal.
#[derive(Serialize, Deserialize)]
pub(crate) struct TokenRecord {
    namespace: String,
    service_account: String,
    request: Vec<u8>,
    protobuf: bool,
    response: Vec<u8>,
    expires_unix: i64,
    pod_uid: String,
}

impl From<&KeptToken> for TokenRecord {
    fn from(t: &KeptToken) -> TokenRecord {
        TokenRecord {
            namespace: t.namespace.clone(),
            service_account: t.service_account.clone(),
            request: t.request.to_vec(),
            protobuf: t.format == Format::Protobuf,
            response: t.response.to_vec(),
            expires_unix: t.expires_unix,
            pod_uid: t.pod_uid.clone(),
        }
    }
}

impl From<TokenRecord> for KeptToken {
    fn from(t: TokenRecord) -> KeptToken {
        KeptToken {
            namespace: t.namespace,
            service_account: t.service_account,
            request: Bytes::from(t.request),
            format: format_of(t.protobuf),
            response: Bytes::from(t.response),
            expires_unix: t.expires_unix,
            pod_uid: t.pod_uid,
        }
    }
}
