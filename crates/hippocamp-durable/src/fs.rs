//! Owner-only files and directories, and the one refusal of symbolic links
//! for the directories a store lives in.
//!
//! Everything a store writes holds users' data (entries, catalogs, logs,
//! token hashes), so it is created readable by its owner only: files
//! `0600`, directories `0700`. A data directory that is a symbolic link is
//! refused rather than followed, so a link planted where a store expects
//! its directory cannot redirect the store's writes.
//!
//! It also holds how a log is pre-written ([`write_zeros`]) and the hint
//! it gives the kernel when it reads at open ([`advise_random`]).

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Mode of every file a store creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory a store creates.
pub const DIR_MODE: u32 = 0o700;

/// Makes `dir` (and missing parents) owner-only, or checks that it exists
/// as a real directory: a symbolic link, or anything that is not a
/// directory, is an `InvalidInput` error naming it. An existing directory
/// keeps its mode (it may be the user's own folder).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link; data directories are never followed through links",
                dir.display()
            ),
        )),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} exists and is not a directory", dir.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
        }
        Err(e) => Err(e),
    }
}

/// Options that create a file owner-only (read and write; add `create`,
/// `truncate` or `create_new` as needed).
pub fn private_options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.read(true).write(true).mode(FILE_MODE);
    o
}

/// Creates `path` owner-only and empty if it does not exist; an existing
/// file is left as it is.
pub fn private_file(path: &Path) -> io::Result<File> {
    private_options().create(true).truncate(false).open(path)
}

/// Tells the kernel `file` is read at random, not in sequence: its reads
/// then bring in what they ask for in pages of the base size, rather than
/// readahead's large folios. A small write into a large folio costs more
/// (the write walks every block of the folio): overwriting 700 bytes of a
/// page cached as part of a 1 MiB folio took 3.4-3.7 µs against 1.5-2.1
/// µs for a page of its own, and a write + `fdatasync` 5-6 µs more (a
/// standalone probe of paired writes; on the store, a lone acknowledged
/// `add_entry` got 6-12 µs faster in paired runs of `hippocamp bench
/// durable-write --samples 2000`, `scripts/paired-durable-write.sh`). A
/// log is read once, at open, and then overwritten record by record.
/// Elsewhere than on Linux it does nothing.
pub fn advise_random(file: &File) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random)?;
    #[cfg(not(target_os = "linux"))]
    let _ = file;
    Ok(())
}

/// Writes zeros over `file` from `from` up to `to`, a page per write
/// (aligned to pages): the page cache keeps what each write brought in as
/// one folio, and space written this way is later overwritten record by
/// record (see [`advise_random`] for what a large folio costs then).
pub fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    const PAGE: u64 = 4096;
    let page = [0u8; 4096];
    let mut at = from;
    while at < to {
        let next = ((at / PAGE + 1) * PAGE).min(to);
        let n = usize::try_from(next - at).unwrap_or(page.len());
        file.write_all_at(&page[..n], at)?;
        at = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn zeros_cover_exactly_the_range_asked_for() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("log");
        let f = private_file(&path).unwrap();
        f.write_all_at(&[7u8; 10], 0).unwrap();
        // From inside a page to inside a later one.
        write_zeros(&f, 10, 3 * 4096 + 5).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 3 * 4096 + 5);
        assert_eq!(bytes[..10], [7u8; 10]);
        assert!(bytes[10..].iter().all(|&b| b == 0));
        // An empty range writes nothing.
        write_zeros(&f, 9, 9).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }

    #[test]
    fn created_owner_only_and_links_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b");
        private_dir(&d).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&t.path().join("a")), 0o700);
        private_file(&d.join("f")).unwrap();
        assert_eq!(mode(&d.join("f")), 0o600);
        std::os::unix::fs::symlink(&d, t.path().join("link")).unwrap();
        let e = private_dir(&t.path().join("link")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(private_dir(&d.join("f")).is_err());
    }
}
