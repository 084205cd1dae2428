//! The tokens' journal: a token is on disk before the kubelet has it, at
//! the cost of one data sync of a few kilobytes.
//!
//! The kubelet keeps a service-account token in memory and asks for it
//! again only when it restarts or most of the token's lifetime is gone: a
//! token the proxy handed out and then lost in a crash would be missing at
//! the next offline reboot, and its pod would not start. So the token is
//! written before the answer goes back. Rewriting the whole tokens' file
//! for that (temporary file, fsync, rename, directory fsync) cost more than
//! the millisecond the proxy may add to a kubelet request; one record
//! written into a file whose blocks already exist costs one `fdatasync`
//! and no metadata (`docs/decisions/0008-node-cache.md`).
//!
//! - `serviceaccount-tokens.journal` (0600) is [`JOURNAL_BYTES`] long,
//!   written with zeros when made and synced with its directory, so that
//!   writing a record changes neither its size nor its extents.
//! - A record is framed as a node cache file (magic, version, CRC-32,
//!   sealed with the key if there is one, bound to the journal's name) and
//!   holds the node, a sequence number and the token. Records lie end to
//!   end from offset 0, each numbered one more than the one before it.
//! - The tokens' file, written whole in the background within a second,
//!   says up to which number it holds the journal; once it is written the
//!   journal starts again at offset 0.
//! - Read back: records from offset 0 as long as each is whole, of this
//!   node and numbered one more than the one before; those numbered above
//!   the tokens' file's are applied over it. A torn last record (a crash
//!   while it was written) ends the journal: its token was never answered.
//! - A record that does not fit, or a journal that cannot be written, sends
//!   the token into a whole write of the tokens' file at once instead.

use std::{
    fs::{File, OpenOptions},
    io::Read,
    os::unix::fs::{FileExt, OpenOptionsExt},
};

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::{
    persist::{Storage, TokenRecord},
    token::KeptToken,
};

/// The journal's file name.
pub const JOURNAL_FILE: &str = "serviceaccount-tokens.journal";
/// The journal's size: room for about 70 tokens between two writes of the
/// tokens' file, far more than a kubelet asks for in a second.
pub const JOURNAL_BYTES: usize = 128 << 10;

/// The journal, as the node cache holds it (behind its own lock).
#[derive(Debug, Default)]
pub(crate) struct Journal {
    file: Option<File>,
    /// Where the next record goes.
    at: usize,
    /// The number of the last record written or read back.
    pub(crate) seq: u64,
}

#[derive(Serialize, Deserialize)]
struct Record {
    node: String,
    seq: u64,
    token: TokenRecord,
}

impl Journal {
    /// The journal in `storage` (made if there is none), and the tokens it
    /// holds that the tokens' file, which holds the journal up to `after`,
    /// does not. Without a usable file the tokens' file is written whole
    /// for every token.
    pub(crate) fn open(storage: &Storage, node: &str, after: u64) -> (Journal, Vec<KeptToken>) {
        let path = storage.dir().join(JOURNAL_FILE);
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .and_then(|file| {
                let mut bytes = Vec::new();
                (&file).take(JOURNAL_BYTES as u64).read_to_end(&mut bytes)?;
                if bytes.len() < JOURNAL_BYTES {
                    // Zeros to the full size, synced with the directory
                    // entry, once: from then on a record is data only.
                    file.write_all_at(&vec![0; JOURNAL_BYTES - bytes.len()], bytes.len() as u64)?;
                    file.sync_all()?;
                    File::open(storage.dir())?.sync_all()?;
                }
                Ok((file, bytes))
            });
        let (file, bytes) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                warn!(path = %path.display(), error = %e, "token journal not usable; every token is written with the tokens' file");
                return (
                    Journal {
                        seq: after,
                        ..Journal::default()
                    },
                    Vec::new(),
                );
            }
        };
        let (records, end) = records(storage, node, &bytes);
        let last = records.last().map(|(seq, _)| *seq);
        let mut journal = Journal {
            file: Some(file),
            at: end,
            seq: after,
        };
        match last {
            // Records the tokens' file does not hold: the next one follows them.
            Some(last) if last > after => journal.seq = last,
            // Nothing past the tokens' file: start again at the front.
            _ => journal.at = 0,
        }
        let tokens = records
            .into_iter()
            .filter(|(seq, _)| *seq > after)
            .map(|(_, t)| t)
            .collect();
        (journal, tokens)
    }

    /// Writes `token` as the next record and syncs it: `Ok(Some(bytes))`
    /// once it is on disk, `Ok(None)` when it does not fit (or there is no
    /// journal file) and the tokens' file must be written instead.
    pub(crate) fn append(
        &mut self,
        storage: &Storage,
        node: &str,
        token: &KeptToken,
    ) -> Result<Option<u64>, String> {
        let Some(file) = &self.file else {
            return Ok(None);
        };
        let seq = self.seq + 1;
        let record = Record {
            node: node.to_owned(),
            seq,
            token: TokenRecord::from(token),
        };
        let payload = postcard::to_allocvec(&record).map_err(|e| e.to_string())?;
        let framed = storage.file(JOURNAL_FILE, payload)?;
        if self.at + framed.len() > JOURNAL_BYTES {
            return Ok(None);
        }
        file.write_all_at(&framed, self.at as u64)
            .and_then(|()| file.sync_data())
            .map_err(|e| format!("{JOURNAL_FILE}: {e}"))?;
        self.at += framed.len();
        self.seq = seq;
        Ok(Some(framed.len() as u64))
    }

    /// The tokens' file now holds every record: the next goes to the front.
    pub(crate) fn restart(&mut self) {
        self.at = 0;
    }
}

/// The records at the front of `bytes`, each whole, of `node` and numbered
/// one more than the one before, and where they end.
fn records(storage: &Storage, node: &str, bytes: &[u8]) -> (Vec<(u64, KeptToken)>, usize) {
    let mut out: Vec<(u64, KeptToken)> = Vec::new();
    let mut at = 0;
    while let Some(rest) = bytes.get(at..) {
        let Ok((payload, len)) = storage.unframe(JOURNAL_FILE, rest) else {
            break;
        };
        let Ok(record) = postcard::from_bytes::<Record>(&payload) else {
            break;
        };
        let follows = out
            .last()
            .is_none_or(|(prev, _)| prev.checked_add(1) == Some(record.seq));
        if record.node != node || !follows {
            break;
        }
        out.push((record.seq, record.token.into()));
        at += len;
    }
    (out, at)
}
