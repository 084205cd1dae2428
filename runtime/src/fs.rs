//! Files replaced atomically: what dnsd's hosts file and the proxy's
//! snapshot are written with.
//!
//! A write goes to `.{name}.tmp` in the same directory, is flushed to disk
//! (fsync), then renamed over the file, and the directory is synced so the
//! rename survives a crash: a reader sees the old file or the new one, never
//! a part of either, whatever moment the process or the machine dies.
//!
//! The temporary name is fixed rather than random (the `tempfile` crate's
//! way) on purpose: a crash between create and rename leaves at most this
//! one file, which the next write reuses, instead of a new stray file per
//! crash; and its leading dot keeps it out of most directory scans.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a file cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path has no file name (`/`, `..`).
    #[error("{path}: not a file path")]
    NotAFile {
        /// The path given.
        path: PathBuf,
    },
    /// The path names a directory.
    #[error("{path}: is a directory")]
    IsADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// An I/O step failed.
    #[error("{path}: cannot {step}: {source}")]
    Io {
        /// The file the step was on.
        path: PathBuf,
        /// What was being done (`create`, `write`, `sync`, `rename onto`).
        step: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// A file that is only ever replaced whole.
#[derive(Debug, Clone)]
pub struct AtomicFile {
    path: PathBuf,
    temp: PathBuf,
    dir: PathBuf,
    mode: u32,
}

impl AtomicFile {
    /// The file at `path`, created with permissions `mode`. Checks that
    /// `path` can be written — its directory exists and takes a new file —
    /// without touching `path` itself.
    pub fn open(path: &Path, mode: u32) -> Result<AtomicFile, FileError> {
        let name = path.file_name().ok_or_else(|| FileError::NotAFile {
            path: path.to_owned(),
        })?;
        if path.is_dir() {
            return Err(FileError::IsADirectory {
                path: path.to_owned(),
            });
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(".tmp");
        let file = AtomicFile {
            path: path.to_owned(),
            temp: dir.join(temp_name),
            dir,
            mode,
        };
        // The probe: the same create a write makes, then gone again.
        file.create_temp()?;
        fs::remove_file(&file.temp).map_err(|e| io_error(&file.temp, "remove", e))?;
        Ok(file)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file with `content`. On error the old file stays as it was.
    pub fn write(&self, content: &[u8]) -> Result<(), FileError> {
        self.write_with(|file| file.write_all(content))
    }

    /// Replaces the file with what `write` writes into a new, empty file
    /// (it may seek: to fill in a header last, say), and returns what
    /// `write` returned. On error the old file stays as it was.
    pub fn write_with<T>(
        &self,
        write: impl FnOnce(&mut File) -> io::Result<T>,
    ) -> Result<T, FileError> {
        let mut tmp = self.create_temp()?;
        let written = write(&mut tmp).map_err(|e| io_error(&self.temp, "write", e))?;
        tmp.sync_all()
            .map_err(|e| io_error(&self.temp, "sync", e))?;
        drop(tmp);
        fs::rename(&self.temp, &self.path).map_err(|e| io_error(&self.path, "rename onto", e))?;
        // The rename is in the directory: sync it too, or a crash may undo it.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(&self.dir, "sync", e))?;
        Ok(written)
    }

    fn create_temp(&self) -> Result<File, FileError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(self.mode)
            .open(&self.temp)
            .map_err(|e| io_error(&self.temp, "create", e))
    }
}

fn io_error(path: &Path, step: &'static str, source: io::Error) -> FileError {
    FileError::Io {
        path: path.to_owned(),
        step,
        source,
    }
}

/// What a file looked like on disk, to notice that it changed without
/// reading it (certificates and keys re-read when they are replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// Last modification time, where the filesystem keeps one.
    modified: Option<std::time::SystemTime>,
    /// Size in bytes.
    len: u64,
    /// Inode: Kubernetes secret volumes and the kubelet's certificate
    /// rotation swap a symlink to new files, which may match the old ones
    /// in size and coarse mtime.
    inode: u64,
}

impl FileStamp {
    /// The stamp of `path` (following symlinks), or `None` if it cannot be stat'ed.
    pub fn of(path: &Path) -> Option<FileStamp> {
        let meta = fs::metadata(path).ok()?;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode: std::os::unix::fs::MetadataExt::ino(&meta),
        })
    }
}
