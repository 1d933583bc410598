//! Exclusive ownership of a data directory: an advisory lock on a file in
//! it, held for the owner's life and released by the OS when the process
//! dies, so a crash never leaves a stale lock behind.

use std::fs::File;
use std::io;
use std::path::Path;

use hippocamp_core::Error;

/// A held directory lock.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Why a lock could not be taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds it.
    Held,
    /// The lock file could not be opened or locked.
    Io(io::Error),
}

impl DirLock {
    /// Takes the lock on `dir/name` (creating the file owner-only),
    /// without waiting.
    pub fn acquire(dir: &Path, name: &str) -> Result<Self, LockError> {
        let file = crate::fs::private_file(&dir.join(name)).map_err(LockError::Io)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held),
            Err(std::fs::TryLockError::Error(e)) => Err(LockError::Io(e)),
        }
    }

    /// [`acquire`](Self::acquire) for a store that owns `dir`: a lock held
    /// by another process is `Unavailable` naming the directory (the one
    /// wording every store uses).
    pub fn own(dir: &Path, name: &str) -> hippocamp_core::Result<Self> {
        Self::acquire(dir, name).map_err(|e| match e {
            LockError::Held => Error::Unavailable(format!(
                "the data directory {} is in use by another process",
                dir.display()
            )),
            LockError::Io(e) => {
                Error::Unavailable(format!("cannot lock {}: {e}", dir.join(name).display()))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_owner_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path(), "LOCK").unwrap();
        assert!(matches!(
            DirLock::acquire(dir.path(), "LOCK"),
            Err(LockError::Held)
        ));
        let e = DirLock::own(dir.path(), "LOCK").unwrap_err();
        assert!(e.to_string().contains("in use by another process"), "{e}");
        drop(first);
        assert!(DirLock::acquire(dir.path(), "LOCK").is_ok());
    }
}
