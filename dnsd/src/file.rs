//! The hosts file, owned by dnsd alone: replaced atomically
//! ([`sitegrid_runtime::fs::AtomicFile`]: a temporary file, fsync, rename,
//! directory fsync), and only when its content changes, so a reader
//! (CoreDNS every `reload` period, dnsmasq on inotify) sees the old file or
//! the new one, never a part.

use std::fs;
use std::path::Path;

use sitegrid_runtime::fs::AtomicFile;
pub use sitegrid_runtime::fs::FileError;

/// The hosts file: where it is, and what it holds now.
#[derive(Debug)]
pub struct HostsFile {
    file: AtomicFile,
    /// The content on disk, as last written or found at start.
    current: Option<String>,
}

impl HostsFile {
    /// Checks that `path` can be written — its directory exists and takes a
    /// new file — without touching `path` itself, and reads what is there, so
    /// a restart that would write the same content writes nothing.
    pub fn open(path: &Path) -> Result<HostsFile, FileError> {
        // Readable by CoreDNS whatever user it runs as.
        let file = AtomicFile::open(path, 0o644)?;
        Ok(HostsFile {
            current: fs::read_to_string(path).ok(),
            file,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
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
        self.file.write(content.as_bytes())?;
        self.current = Some(content.to_owned());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
