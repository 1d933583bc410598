//! Exclusive ownership of a data directory: an advisory lock on a file in
//! it, held for the owner's life and released by the OS when the process
//! dies, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

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
    /// Takes the lock on `dir/name` (creating the file), without waiting.
    pub fn acquire(dir: &Path, name: &str) -> Result<Self, LockError> {
        let path = dir.join(name);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(LockError::Io)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held),
            Err(std::fs::TryLockError::Error(e)) => Err(LockError::Io(e)),
        }
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
        drop(first);
        assert!(DirLock::acquire(dir.path(), "LOCK").is_ok());
    }
}
