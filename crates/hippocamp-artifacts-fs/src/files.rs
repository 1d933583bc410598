//! The file operations the store's content goes through: a small trait
//! (the shim) with the real implementation, [`DiskFiles`], and whatever a
//! test substitutes (the power-loss simulation in `tests/support`).
//!
//! Content lives in 256 fan-out directories `objects/00` .. `objects/ff`
//! under the root; a file name is a random blob id in hex (and `.tmp`
//! while staged). Scopes and artifact names never become path components.
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

/// A staged content file being written: nobody can open it under its
/// final name before [`WriteFile::publish`].
pub trait WriteFile: Send {
    /// Appends bytes.
    fn write_all(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes the written bytes (and the file's size) durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Gives the (synced) file its final name atomically, then makes the
    /// directory entry durable.
    fn publish(self: Box<Self>) -> io::Result<()>;
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
    /// Stages a new file that [`WriteFile::publish`] names `name` (which
    /// must not exist then). Staging is anonymous where the file system
    /// allows it, so a crash leaves nothing behind; otherwise the file is
    /// `name.tmp` until published (see [`staged_name`]).
    fn create(&self, dir: u8, name: &str) -> io::Result<Box<dyn WriteFile>>;
    /// Opens `name` for reading.
    fn open(&self, dir: u8, name: &str) -> io::Result<Box<dyn ReadFile>>;
    /// Removes `name`.
    fn remove(&self, dir: u8, name: &str) -> io::Result<()>;
    /// Lists the directory.
    fn list(&self, dir: u8) -> io::Result<Vec<Listed>>;
}

/// The name of a file staged under a name (where anonymous staging is
/// not available).
pub fn staged_name(name: &str) -> String {
    format!("{name}.tmp")
}

/// The fan-out directory's name.
pub fn dir_name(dir: u8) -> String {
    format!("{dir:02x}")
}

/// Content files on a real file system.
#[derive(Debug)]
pub struct DiskFiles {
    root: PathBuf,
    /// The 256 fan-out directories, opened once (each operation is then
    /// one system call relative to its directory).
    dirs: Arc<Vec<OwnedFd>>,
    /// Whether staged files are anonymous (`O_TMPFILE`, linked into place
    /// through `/proc/self/fd`); probed on open.
    anonymous: bool,
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
        let anonymous = dirs.first().is_some_and(anonymous_staging_works);
        Ok(Self {
            root: root.to_path_buf(),
            dirs: Arc::new(dirs),
            anonymous,
        })
    }

    /// Whether staged files are anonymous on this file system.
    pub fn anonymous_staging(&self) -> bool {
        self.anonymous
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, dir: u8) -> &OwnedFd {
        &self.dirs[usize::from(dir)]
    }
}

/// Opens an anonymous file in `dir`, readable and writable by the owner
/// only once linked.
fn open_anonymous(dir: &OwnedFd) -> rustix::io::Result<File> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )
    .map(File::from)
}

/// Gives an anonymous file a name in `dir`. Linking an open descriptor
/// directly needs a capability (`AT_EMPTY_PATH`); its `/proc` link does
/// not.
fn link_anonymous(file: &File, dir: &OwnedFd, name: &str) -> rustix::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let proc_link = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(
        rustix::fs::CWD,
        proc_link.as_str(),
        dir,
        name,
        AtFlags::SYMLINK_FOLLOW,
    )
}

/// Whether an anonymous file can be created and linked in `dir` (the file
/// system must support `O_TMPFILE` and `/proc` must be mounted); leaves
/// nothing behind.
fn anonymous_staging_works(dir: &OwnedFd) -> bool {
    const PROBE: &str = ".anonymous-staging-probe";
    let _ = rustix::fs::unlinkat(dir, PROBE, AtFlags::empty());
    let works = open_anonymous(dir).is_ok_and(|f| link_anonymous(&f, dir, PROBE).is_ok());
    works && rustix::fs::unlinkat(dir, PROBE, AtFlags::empty()).is_ok()
}

/// A content file being staged on disk.
struct DiskWriter {
    file: File,
    dirs: Arc<Vec<OwnedFd>>,
    dir: u8,
    name: String,
    /// Staged under `name.tmp` rather than anonymously.
    named: bool,
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
    fn publish(self: Box<Self>) -> io::Result<()> {
        let d = &self.dirs[usize::from(self.dir)];
        if self.named {
            drop(self.file);
            rustix::fs::renameat(d, staged_name(&self.name), d, &self.name)?;
        } else {
            link_anonymous(&self.file, d, &self.name)?;
        }
        Ok(rustix::fs::fsync(d)?)
    }
}

#[derive(Debug)]
struct DiskReader {
    file: File,
    /// Taken when the file was opened: content files never change once
    /// named.
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
        let d = self.dir(dir);
        let file = if self.anonymous {
            open_anonymous(d)?
        } else {
            File::from(rustix::fs::openat(
                d,
                staged_name(name),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::RUSR | Mode::WUSR,
            )?)
        };
        Ok(Box::new(DiskWriter {
            file,
            dirs: Arc::clone(&self.dirs),
            dir,
            name: name.to_owned(),
            named: !self.anonymous,
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
        // ext4, xfs, btrfs and tmpfs stage anonymously; the named mode has
        // its own test below.
        eprintln!("anonymous staging: {}", files.anonymous_staging());
        let mut w = files.create(7, "abc").unwrap();
        w.write_all(b"hello").unwrap();
        w.sync().unwrap();
        assert!(files.open(7, "abc").is_err(), "visible before publish");
        if files.anonymous_staging() {
            assert_eq!(files.list(7).unwrap(), Vec::new());
        }
        w.publish().unwrap();
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
        // Publication never replaces a file.
        let mut again = files.create(7, "abc").unwrap();
        again.sync().unwrap();
        assert!(again.publish().is_err());
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

    #[test]
    fn named_staging_renames_into_place() {
        let tmp = tempfile::tempdir().unwrap();
        let mut files = DiskFiles::open(tmp.path()).unwrap();
        files.anonymous = false;
        let mut w = files.create(3, "abc").unwrap();
        w.write_all(b"hi").unwrap();
        w.sync().unwrap();
        let names = |f: &DiskFiles| -> Vec<String> {
            f.list(3).unwrap().into_iter().map(|l| l.name).collect()
        };
        assert_eq!(names(&files), vec!["abc.tmp".to_owned()]);
        w.publish().unwrap();
        assert_eq!(names(&files), vec!["abc".to_owned()]);
    }
}
