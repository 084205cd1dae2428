//! The hosts file, owned by dnsd alone: replaced atomically, and only when
//! its content changes.
//!
//! A write goes to `.{name}.tmp` in the same directory, is flushed to disk
//! (fsync), then renamed over the file, and the directory is synced so the
//! rename survives a crash: a reader (CoreDNS every `reload` period,
//! dnsmasq on inotify) sees the old file or the new one, never a part.
//!
//! The temporary name is fixed rather than random (the `tempfile` crate's
//! way) on purpose: a crash between create and rename leaves at most this
//! one file, which the next write reuses, instead of a new stray file per
//! crash; and its leading dot keeps it out of `dnsmasq --hostsdir` and of
//! most directory scans.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the hosts file cannot be written.
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

/// The hosts file: where it is, and what it holds now.
#[derive(Debug)]
pub struct HostsFile {
    path: PathBuf,
    temp: PathBuf,
    dir: PathBuf,
    /// The content on disk, as last written or found at start.
    current: Option<String>,
}

impl HostsFile {
    /// Checks that `path` can be written — its directory exists and takes a
    /// new file — without touching `path` itself, and reads what is there, so
    /// a restart that would write the same content writes nothing.
    pub fn open(path: &Path) -> Result<HostsFile, FileError> {
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
        let file = HostsFile {
            path: path.to_owned(),
            temp: dir.join(temp_name),
            dir,
            current: fs::read_to_string(path).ok(),
        };
        // The probe: the same create a write makes, then gone again.
        file.create_temp()?;
        fs::remove_file(&file.temp).map_err(|e| file.io(&file.temp, "remove", e))?;
        Ok(file)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file already holds exactly `content` (no I/O).
    pub fn holds(&self, content: &str) -> bool {
        self.current.as_deref() == Some(content)
    }

    /// Makes the file hold `content`. Returns whether it was written (false:
    /// it already held exactly that). On error the old file stays as it was.
    pub fn write(&mut self, content: &str) -> Result<bool, FileError> {
        if self.holds(content) {
            return Ok(false);
        }
        let mut tmp = self.create_temp()?;
        tmp.write_all(content.as_bytes())
            .map_err(|e| self.io(&self.temp, "write", e))?;
        tmp.sync_all().map_err(|e| self.io(&self.temp, "sync", e))?;
        drop(tmp);
        fs::rename(&self.temp, &self.path).map_err(|e| self.io(&self.path, "rename onto", e))?;
        // The rename is in the directory: sync it too, or a crash may undo it.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| self.io(&self.dir, "sync", e))?;
        self.current = Some(content.to_owned());
        Ok(true)
    }

    fn create_temp(&self) -> Result<File, FileError> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            // Readable by CoreDNS whatever user it runs as.
            .mode(0o644)
            .open(&self.temp)
            .map_err(|e| self.io(&self.temp, "create", e))
    }

    fn io(&self, path: &Path, step: &'static str, source: io::Error) -> FileError {
        FileError::Io {
            path: path.to_owned(),
            step,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sitegrid-dnsd-file-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn writes_replace_the_file_only_on_change() {
        let dir = scratch("change");
        let path = dir.join("hosts");
        let mut file = HostsFile::open(&path).unwrap();
        assert!(!path.exists(), "opening must not create the file");
        assert!(file.write("10.0.0.1 a\n").unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "10.0.0.1 a\n");
        let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap());
        assert!(!file.write("10.0.0.1 a\n").unwrap());
        assert_eq!(
            std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap()),
            inode
        );
        assert!(file.write("10.0.0.2 a\n").unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "10.0.0.2 a\n");
        // A new file each time (rename), readable by others, and no temporary left.
        let meta = fs::metadata(&path).unwrap();
        assert_ne!(std::os::unix::fs::MetadataExt::ino(&meta), inode);
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o644
        );
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["hosts"]);
        // A restart finds the same content and does not rewrite it.
        assert!(!HostsFile::open(&path)
            .unwrap()
            .write("10.0.0.2 a\n")
            .unwrap());
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = scratch("fail");
        let path = dir.join("hosts");
        let mut file = HostsFile::open(&path).unwrap();
        file.write("old\n").unwrap();
        // A directory where the temporary file goes: creating it fails, even as root.
        fs::create_dir_all(dir.join(".hosts.tmp/blocker")).unwrap();
        let err = file.write("new\n").unwrap_err().to_string();
        assert!(err.contains(".hosts.tmp: cannot create"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "old\n");
        fs::remove_dir_all(dir.join(".hosts.tmp")).unwrap();
        assert!(file.write("new\n").unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[test]
    fn unusable_paths_are_refused_at_open() {
        let dir = scratch("refuse");
        let missing = dir.join("no/such/dir/hosts");
        let err = HostsFile::open(&missing).unwrap_err().to_string();
        assert!(
            err.contains("no/such/dir/.hosts.tmp: cannot create"),
            "{err}"
        );
        assert!(matches!(
            HostsFile::open(&dir),
            Err(FileError::IsADirectory { .. })
        ));
        fs::write(dir.join("plain"), "").unwrap();
        assert!(HostsFile::open(&dir.join("plain/hosts")).is_err());
        assert!(matches!(
            HostsFile::open(Path::new("/")),
            Err(FileError::NotAFile { .. }) | Err(FileError::IsADirectory { .. })
        ));
    }
}
