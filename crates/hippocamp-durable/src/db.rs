//! The redb database file of an embedded store: created atomically and
//! owner-only, opened once per process, and stamped with the store's
//! on-disk format version (an unknown version is refused, never guessed).

use std::path::Path;

use hippocamp_core::{Error, Result};
use redb::{Database, Key, ReadableTable as _, TableDefinition, WriteTransaction};

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::Unavailable(format!("{what} {}: {e}", path.display()))
}

/// Opens an embedded store's directory the one way every store does:
/// `dir` made a private data directory (owner-only, never through a
/// link), locked for this process with the lock file `lock`, and its
/// database `dir/file` opened (created atomically and stamped by `init`
/// when new; see [`open_cached`]). The lock is held for as long as the
/// store keeps it.
pub fn open_owned(
    dir: &Path,
    lock: &str,
    file: &str,
    init: impl Fn(&Database) -> Result<()>,
    cache_bytes: Option<usize>,
) -> Result<(crate::DirLock, Database)> {
    crate::fs::private_dir(dir)
        .map_err(|e| Error::Unavailable(format!("cannot use {}: {e}", dir.display())))?;
    let lock = crate::DirLock::own(dir, lock)?;
    let db = open_cached(&dir.join(file), init, cache_bytes)?;
    Ok((lock, db))
}

/// Opens the database at `path`, creating it first (see
/// [`create_atomically`]) when it does not exist. `init` prepares a new
/// database (its format stamp and tables). Another handle to the same file
/// in this process is `Unavailable`.
pub fn open(path: &Path, init: impl Fn(&Database) -> Result<()>) -> Result<Database> {
    open_cached(path, init, None)
}

/// [`open`] with redb's page cache bounded to `cache_bytes` (redb's
/// default otherwise, 1 GiB): a store that reads its whole file (an
/// export) then keeps at most that much of it resident.
pub fn open_cached(
    path: &Path,
    init: impl Fn(&Database) -> Result<()>,
    cache_bytes: Option<usize>,
) -> Result<Database> {
    if !path.exists() {
        create_atomically(path, &init)?;
    }
    let mut builder = Database::builder();
    if let Some(bytes) = cache_bytes {
        builder.set_cache_size(bytes);
    }
    builder.open(path).map_err(|e| match e {
        redb::DatabaseError::DatabaseAlreadyOpen => {
            Error::Unavailable(format!("{} is already open", path.display()))
        }
        other => storage(other),
    })
}

/// Creates a new database under a temporary name (owner-only), prepares it
/// with `init`, and renames it into place once complete, then syncs the
/// directory: a crash during creation never leaves a half-written database
/// under the real name (only a temporary file, replaced on the next
/// attempt).
pub fn create_atomically(path: &Path, init: &dyn Fn(&Database) -> Result<()>) -> Result<()> {
    let dir = path.parent().ok_or_else(|| {
        Error::config(
            "data_dir",
            hippocamp_core::Problem::Malformed(format!("{} has no directory", path.display())),
        )
    })?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".creating");
    let tmp = std::path::PathBuf::from(tmp);
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot remove the stale temporary file", &tmp, &e)),
    }
    // redb initialises an existing empty file and keeps its mode.
    crate::fs::private_options()
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io("cannot create", &tmp, &e))?;
    let db = Database::builder().create(&tmp).map_err(storage)?;
    init(&db)?;
    drop(db);
    std::fs::rename(&tmp, path).map_err(|e| io("cannot move into place", path, &e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync", dir, &e))
}

/// Checks (or, in a new database, writes) the format version stored under
/// `key` in `meta`, then lets `tables` create the store's other tables, in
/// one transaction. `what` names the store in the refusal of a version
/// this build does not read.
pub fn init_format<K: Key + 'static>(
    db: &Database,
    meta: TableDefinition<'_, K, &'static [u8]>,
    key: K::SelfType<'_>,
    version: u32,
    what: &str,
    tables: impl FnOnce(&WriteTransaction) -> Result<()>,
) -> Result<()>
where
    for<'a> K::SelfType<'a>: Copy,
{
    let txn = db.begin_write().map_err(storage)?;
    {
        let mut t = txn.open_table(meta).map_err(storage)?;
        let found = match t.get(key).map_err(storage)? {
            Some(v) => Some(u32::from_le_bytes(v.value().try_into().map_err(|_| {
                Error::Corrupt(format!("{what}: the format version record is malformed"))
            })?)),
            None => None,
        };
        match found {
            Some(v) if v == version => {}
            Some(other) => {
                return Err(Error::Unavailable(format!(
                    "{what} uses on-disk format version {other}; this build reads version {version}"
                )));
            }
            None => {
                t.insert(key, version.to_le_bytes().as_slice())
                    .map_err(storage)?;
            }
        }
    }
    tables(&txn)?;
    txn.commit().map_err(storage)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

    fn init(db: &Database) -> Result<()> {
        init_format(db, META, "format", 3, "the test store", |_| Ok(()))
    }

    #[test]
    fn created_owner_only_stamped_and_checked() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("x.redb");
        let db = open(&path, init).unwrap();
        init(&db).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(matches!(open(&path, init), Err(Error::Unavailable(_))));
        drop(db);
        let db = open(&path, init).unwrap();
        let e = init_format(&db, META, "format", 4, "the test store", |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("version 3"), "{e}");
    }
}
