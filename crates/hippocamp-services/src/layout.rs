//! Where each store lives in a data directory:
//!
//! | path | holds |
//! |---|---|
//! | `DIR/memory/` | the durable memory store (`memory.redb`, `memory.wal`, `LOCK`) |
//! | `DIR/artifacts/` | the filesystem artifact store (`catalog.redb`, `catalog.wal`, `objects/`, `LOCK`) |
//! | `DIR/outbox/` | the ingestion outbox (`outbox.redb`, `outbox.wal`, `LOCK`) |
//! | `DIR/consolidation/` | consolidation run records (`runs.redb`, `runs.lock`) |
//! | `DIR/tokens.json` | the server's token hashes |
//! | `DIR/EPHEMERAL` | written by a server of the `ephemeral` profile: its tokens live in memory, so one made here is never seen |
//!
//! Every directory is created owner-only (`0700`) and none is followed
//! through a symbolic link: a data directory or store folder that is a
//! link is refused (`InvalidConfig`).

use std::path::{Path, PathBuf};

use hippocamp_core::{Error, Problem, Result};

fn refuse(what: &str, dir: &Path, e: &std::io::Error) -> Error {
    match e.kind() {
        std::io::ErrorKind::InvalidInput => Error::config(what, Problem::Malformed(e.to_string())),
        _ => Error::Unavailable(format!("cannot use {}: {e}", dir.display())),
    }
}

/// The data directory itself, created owner-only if missing, as an
/// absolute path (never resolved through links: a link is refused).
pub fn data_dir(dir: &Path) -> Result<PathBuf> {
    hippocamp_durable::fs::private_dir(dir).map_err(|e| refuse("data_dir", dir, &e))?;
    std::path::absolute(dir).map_err(|e| refuse("data_dir", dir, &e))
}

fn folder(data: &Path, name: &str) -> Result<PathBuf> {
    let root = data_dir(data)?;
    let dir = root.join(name);
    hippocamp_durable::fs::private_dir(&dir).map_err(|e| refuse("data_dir", &dir, &e))?;
    Ok(dir)
}

/// The marker an `ephemeral` server leaves in its data directory.
const EPHEMERAL_MARKER: &str = "EPHEMERAL";

/// Marks `data` as used by a server of the `ephemeral` profile (which
/// keeps its tokens in memory), so that `token create` on it can warn.
pub fn mark_ephemeral(data: &Path, note: &str) -> Result<()> {
    let root = data_dir(data)?;
    std::fs::write(root.join(EPHEMERAL_MARKER), note)
        .map_err(|e| Error::Unavailable(format!("cannot write {}: {e}", root.display())))
}

/// Removes the mark, if any: a server of another profile now owns
/// `data` (its tokens are the directory's).
pub fn clear_ephemeral_mark(data: &Path) {
    let _ = std::fs::remove_file(data.join(EPHEMERAL_MARKER));
}

/// What an `ephemeral` server wrote in `data`, if one did.
pub fn ephemeral_mark(data: &Path) -> Option<String> {
    std::fs::read_to_string(data.join(EPHEMERAL_MARKER)).ok()
}

/// The memory folder of a data directory (created).
pub fn memory_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "memory")
}

/// The outbox folder of a data directory (created).
pub fn outbox_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "outbox")
}

/// The governance folder (consents) of a data directory (created).
pub fn governance_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "governance")
}

/// The consolidation folder (run records) of a data directory (created).
pub fn consolidation_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "consolidation")
}

/// The sessions folder of a data directory (created).
pub fn sessions_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "sessions")
}

/// The artifacts folder of a data directory (created), as the absolute
/// path the filesystem store requires.
pub fn artifacts_dir(data: &Path) -> Result<PathBuf> {
    folder(data, "artifacts")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_linked_data_directory_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, t.path().join("link")).unwrap();
        let e = memory_dir(&t.path().join("link")).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
        std::os::unix::fs::symlink(&real, real.join("artifacts")).unwrap();
        assert!(artifacts_dir(&real).is_err());
        assert!(memory_dir(&real).unwrap().is_absolute());
    }
}
