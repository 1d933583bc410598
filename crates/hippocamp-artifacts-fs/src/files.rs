//! The file operations the store's content goes through: a small trait
//! (the shim) with the real implementation, [`DiskFiles`], and whatever a
//! test substitutes (the power-loss simulation in `tests/support`).
//!
//! Content lives in 256 fan-out directories `objects/00` .. `objects/ff`
//! under the root; a file name is a random blob id in hex. Scopes and
//! artifact names never become path components.
//! [`DiskFiles`] opens every directory and file relative to directory
//! descriptors with `O_NOFOLLOW`, starting from a root that must itself be
//! a real directory, so no symbolic link is ever followed; directories are
//! created 0700 and files 0600.

use std::fmt;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A new content file being written. It is staged in the sense that
/// matters here: no catalog row refers to it until the store publishes
/// one, which it does only after [`WriteFile::sync`] and
/// [`WriteFile::sync_entry`].
pub trait WriteFile: Send {
    /// Appends bytes.
    fn write_all(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes the written bytes (and the file's size) durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Makes the file's directory entry durable.
    fn sync_entry(self: Box<Self>) -> io::Result<()>;
}

/// A file being read.
pub trait ReadFile: Send + Sync + fmt::Debug {
    /// Its size.
    fn size(&self) -> io::Result<u64>;
    /// Reads `len` bytes from `offset`; a short file is an
    /// `UnexpectedEof` error.
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>>;
}

/// An entry of a fan-out directory, for repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// File name.
    pub name: String,
    /// Whether it is a regular file (anything else is never touched).
    pub regular: bool,
    /// Size in bytes.
    pub len: u64,
    /// Last modification, with the file system's resolution.
    pub modified: SystemTime,
}

/// Operations on content files, each within one fan-out directory
/// (`dir`, 0..=255).
pub trait FileOps: Send + Sync + fmt::Debug {
    /// Creates the file `name`, which must not exist.
    fn create(&self, dir: u8, name: &str) -> io::Result<Box<dyn WriteFile>>;
    /// Opens `name` for reading.
    fn open(&self, dir: u8, name: &str) -> io::Result<Box<dyn ReadFile>>;
    /// Removes `name`.
    fn remove(&self, dir: u8, name: &str) -> io::Result<()>;
    /// Lists the directory.
    fn list(&self, dir: u8) -> io::Result<Vec<Listed>>;
}

/// The fan-out directory's name.
pub fn dir_name(dir: u8) -> String {
    format!("{dir:02x}")
}

/// The path of fan-out directory `dir` under a store's `root`.
pub fn dir_path(root: &Path, dir: u8) -> PathBuf {
    root.join("objects").join(dir_name(dir))
}

/// Content files on a real file system.
#[derive(Debug)]
pub struct DiskFiles {
    root: PathBuf,
    /// The 256 fan-out directories, opened once (each operation is then
    /// one system call relative to its directory).
    dirs: Arc<Vec<OwnedFd>>,
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens (creating if missing) the directory `name` under `parent`,
/// refusing a link or anything else that is not a directory.
fn open_dir_at(parent: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    match rustix::fs::mkdirat(&parent, name, Mode::RWXU) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let st = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name} is not a directory (links are never followed)"),
        ));
    }
    Ok(rustix::fs::openat(
        &parent,
        name,
        dir_flags(),
        Mode::empty(),
    )?)
}

impl DiskFiles {
    /// Opens the content area under `root`, which must be an absolute path
    /// to a real directory (created 0700 when missing; a symbolic link is
    /// refused). The fan-out directories are created and made durable.
    pub fn open(root: &Path) -> io::Result<Self> {
        if !root.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the data directory {} must be an absolute path",
                    root.display()
                ),
            ));
        }
        match std::fs::symlink_metadata(root) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "the data directory {} is a symbolic link; links are never followed",
                        root.display()
                    ),
                ));
            }
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a directory", root.display()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(root)?;
            }
            Err(e) => return Err(e),
        }
        let root_fd = rustix::fs::open(root, dir_flags(), Mode::empty())?;
        let objects = open_dir_at(&root_fd, "objects")?;
        let dirs = (0..=255u8)
            .map(|d| open_dir_at(&objects, &dir_name(d)))
            .collect::<io::Result<Vec<_>>>()?;
        rustix::fs::fsync(&objects)?;
        rustix::fs::fsync(&root_fd)?;
        Ok(Self {
            root: root.to_path_buf(),
            dirs: Arc::new(dirs),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, dir: u8) -> &OwnedFd {
        &self.dirs[usize::from(dir)]
    }
}

/// A content file being written on disk.
struct DiskWriter {
    file: File,
    dirs: Arc<Vec<OwnedFd>>,
    dir: u8,
}

impl WriteFile for DiskWriter {
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)
    }
    fn sync(&mut self) -> io::Result<()> {
        // The file is new: its size and block map change, which
        // `fdatasync` also makes durable.
        self.file.sync_data()
    }
    fn sync_entry(self: Box<Self>) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.dirs[usize::from(self.dir)])?)
    }
}

#[derive(Debug)]
struct DiskReader {
    file: File,
    /// Taken when the file was opened: content files never change once
    /// published.
    len: u64,
}

impl ReadFile for DiskReader {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len)
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        // Read into spare capacity: zeroing a buffer first costs a few
        // percent of a small read.
        let mut buf = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            let want = len - buf.len();
            let n = rustix::io::pread(&self.file, rustix::buffer::spare_capacity(&mut buf), at)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{want} bytes missing at offset {at}"),
                ));
            }
        }
        Ok(buf)
    }
}

impl FileOps for DiskFiles {
    fn create(&self, dir: u8, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let file = File::from(rustix::fs::openat(
            self.dir(dir),
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )?);
        Ok(Box::new(DiskWriter {
            file,
            dirs: Arc::clone(&self.dirs),
            dir,
        }))
    }

    fn open(&self, dir: u8, name: &str) -> io::Result<Box<dyn ReadFile>> {
        let d = self.dir(dir);
        let fd = rustix::fs::openat(
            d,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a regular file",
            ));
        }
        Ok(Box::new(DiskReader {
            file,
            len: meta.len(),
        }))
    }

    fn remove(&self, dir: u8, name: &str) -> io::Result<()> {
        let d = self.dir(dir);
        Ok(rustix::fs::unlinkat(d, name, AtFlags::empty())?)
    }

    fn list(&self, dir: u8) -> io::Result<Vec<Listed>> {
        let d = self.dir(dir);
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(d)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let st = match rustix::fs::statat(d, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Removed while listing.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            let secs = u64::try_from(st.st_mtime).unwrap_or(0);
            let nanos = u32::try_from(st.st_mtime_nsec).unwrap_or(0);
            out.push(Listed {
                name: name.to_owned(),
                regular: FileType::from_raw_mode(st.st_mode) == FileType::RegularFile,
                len: u64::try_from(st.st_size).unwrap_or(0),
                modified: SystemTime::UNIX_EPOCH + Duration::new(secs, nanos),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn links_are_refused_and_files_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("data");
        let files = DiskFiles::open(&root).unwrap();
        let mut w = files.create(7, "abc").unwrap();
        w.write_all(b"hello").unwrap();
        w.sync().unwrap();
        w.sync_entry().unwrap();
        let r = files.open(7, "abc").unwrap();
        assert_eq!(r.read_at(0, 5).unwrap(), b"hello");
        assert_eq!(r.read_at(1, 3).unwrap(), b"ell");
        let short = r.read_at(2, 4).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        let mode = std::fs::metadata(root.join("objects/07/abc"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(root.join("objects/07"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        // Creation never replaces a file.
        let again = files.create(7, "abc").map(drop).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        // A planted link is not followed.
        std::fs::write(tmp.path().join("outside"), b"secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("outside"), root.join("objects/07/link"))
            .unwrap();
        assert!(files.open(7, "link").is_err());
        let listed = files.list(7).unwrap();
        assert!(
            listed
                .iter()
                .any(|l| l.name == "abc" && l.regular && l.len == 5)
        );
        assert!(listed.iter().any(|l| l.name == "link" && !l.regular));
        // A linked root or fan-out directory is refused.
        let link = tmp.path().join("linked-root");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        assert!(DiskFiles::open(&link).is_err());
        assert!(DiskFiles::open(Path::new("relative/dir")).is_err());
        drop(files);
        std::fs::remove_dir_all(root.join("objects/09")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("objects/09")).unwrap();
        assert!(DiskFiles::open(&root).is_err());
    }
}
