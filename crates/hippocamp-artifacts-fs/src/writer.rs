//! Catalog writes: reservations, publications, aborts and deletions, each
//! one redb transaction whose changes are logged (see
//! `hippocamp_durable::wal`) before it is committed without an fsync.
//!
//! Which records are synced before the caller goes on:
//! - a reservation (a pending version row, its counters): yes, it runs
//!   while the content file is synced, and a publication may not be
//!   acknowledged before both;
//! - a publication (pending → published): no. If it is lost in a power
//!   cut, so is everything logged after it, and the open-time resolution
//!   publishes the pending row again once it has verified the content file
//!   the row names (which was durable before the put was acknowledged);
//! - an abort and a deletion: yes, so a put that failed or an artifact that
//!   was deleted never comes back.
//!
//! Changes are logged physically with absolute values, in commit order;
//! replay applies them in the same order.

use std::sync::Arc;

use hippocamp_artifacts::{ArtifactLimits, ArtifactName, ArtifactScope, DeleteSelector, Integrity};
use hippocamp_core::time::now_ms;
use hippocamp_core::{Deadline, Error, QuotaLimit, Result, Stage};
use hippocamp_durable::{WalStorage, encode_record};
use parking_lot::Mutex;
use redb::{Database, Durability, ReadableTable, WriteTransaction};

use crate::FsOptions;
use crate::catalog::{
    BlobId, META, Mutation, ScopeRow, State, StoredScope, Table, VersionKey, VersionRow,
    WAL_SEQ_KEY, decode, encode, encode_chunks, name_key, u64_value, version_key,
};

/// Store-wide counters (pending versions included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) artifacts: u64,
    pub(crate) bytes: u64,
}

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// A transaction that records what it changes.
pub(crate) struct Tx {
    pub(crate) txn: WriteTransaction,
    pub(crate) log: Vec<Mutation>,
}

impl Tx {
    pub(crate) fn get(&self, t: Table, k: &[u8]) -> Result<Option<Vec<u8>>> {
        let table = self.txn.open_table(t.def()).map_err(storage)?;
        let v = table.get(k).map_err(storage)?.map(|v| v.value().to_vec());
        Ok(v)
    }

    pub(crate) fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> Result<()> {
        let mut table = self.txn.open_table(t.def()).map_err(storage)?;
        table.insert(k, v).map_err(storage)?;
        self.log.push(Mutation::Put(t, k.to_vec(), v.to_vec()));
        Ok(())
    }

    pub(crate) fn del(&mut self, t: Table, k: &[u8]) -> Result<()> {
        let mut table = self.txn.open_table(t.def()).map_err(storage)?;
        table.remove(k).map_err(storage)?;
        self.log.push(Mutation::Del(t, k.to_vec()));
        Ok(())
    }

    fn u64_of(&self, t: Table, k: &[u8]) -> Result<u64> {
        self.get(t, k)?.map_or(Ok(0), |v| u64_value(&v))
    }

    fn scope_row(&self, h: &[u8; 32]) -> Result<Option<ScopeRow>> {
        self.get(Table::Scopes, h)?
            .map(|v| decode::<ScopeRow>(&v, "scope"))
            .transpose()
    }

    pub(crate) fn version_row(&self, key: &VersionKey) -> Result<Option<VersionRow>> {
        self.get(Table::Versions, key)?
            .map(|v| decode::<VersionRow>(&v, "version"))
            .transpose()
    }

    /// Removes a version and its content references, and takes it off its
    /// scope's counters (and off `live` when it was published).
    pub(crate) fn remove_version(&mut self, key: &VersionKey, row: &VersionRow) -> Result<()> {
        self.del(Table::Versions, key)?;
        self.del(Table::Chunks, key)?;
        self.del(Table::Blobs, &row.blob)?;
        let mut scope_hash = [0u8; 32];
        scope_hash.copy_from_slice(&key[..32]);
        match row.state {
            State::Pending => self.del(Table::Pending, key)?,
            State::Published => {
                let mut nk = scope_hash.to_vec();
                nk.extend_from_slice(row.name.as_bytes());
                let live = self.u64_of(Table::Live, &nk)?.saturating_sub(1);
                if live == 0 {
                    self.del(Table::Live, &nk)?;
                } else {
                    self.put(Table::Live, &nk, &live.to_le_bytes())?;
                }
            }
        }
        if let Some(mut s) = self.scope_row(&scope_hash)? {
            s.artifacts = s.artifacts.saturating_sub(1);
            s.bytes = s.bytes.saturating_sub(row.size);
            self.put(Table::Scopes, &scope_hash, &encode(&s)?)?;
        }
        Ok(())
    }

    /// Publishes a pending version.
    pub(crate) fn publish(&mut self, key: &VersionKey, mut row: VersionRow) -> Result<()> {
        row.state = State::Published;
        self.put(Table::Versions, key, &encode(&row)?)?;
        self.del(Table::Pending, key)?;
        let mut nk = key[..32].to_vec();
        nk.extend_from_slice(row.name.as_bytes());
        let live = self.u64_of(Table::Live, &nk)? + 1;
        self.put(Table::Live, &nk, &live.to_le_bytes())
    }
}

/// What a put asks the catalog to reserve.
pub(crate) struct Reservation {
    pub(crate) scope: ArtifactScope,
    pub(crate) name: ArtifactName,
    pub(crate) mime_type: String,
    pub(crate) metadata_json: String,
    pub(crate) integrity: Integrity,
    pub(crate) blob: BlobId,
    pub(crate) deadline: Deadline,
}

/// A reserved version.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reserved {
    pub(crate) key: VersionKey,
    pub(crate) version: u64,
    pub(crate) created_at_ms: u64,
}

/// The only writer of the catalog (behind a mutex).
pub(crate) struct Writer {
    pub(crate) db: Arc<Database>,
    pub(crate) wal: Box<dyn WalStorage>,
    pub(crate) seq: u64,
    pub(crate) since_checkpoint: u64,
    pub(crate) wal_bytes: u64,
    pub(crate) poisoned: Option<Error>,
    pub(crate) options: FsOptions,
    pub(crate) limits: ArtifactLimits,
    pub(crate) totals: Totals,
    pub(crate) published: Arc<Mutex<Totals>>,
}

impl Writer {
    fn begin(&self) -> Result<Tx> {
        if let Some(e) = &self.poisoned {
            return Err(Error::Unavailable(format!(
                "the artifact store stopped writing after a storage failure ({e}); reopen it"
            )));
        }
        let mut txn = self.db.begin_write().map_err(storage)?;
        txn.set_durability(Durability::None).map_err(storage)?;
        Ok(Tx {
            txn,
            log: Vec::new(),
        })
    }

    /// Logs the transaction's changes (syncing the log when `sync`), then
    /// commits it.
    fn commit(&mut self, tx: Tx, sync: bool, totals: Totals) -> Result<()> {
        if tx.log.is_empty() {
            drop(tx);
            return Ok(());
        }
        let seq = self.seq + 1;
        let record = encode_record(seq, &tx.log).map_err(storage)?;
        let logged = self
            .wal
            .append(&record)
            .and_then(|()| if sync { self.wal.sync() } else { Ok(()) });
        if let Err(e) = logged {
            let e = Error::storage(e);
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        self.seq = seq;
        self.since_checkpoint += 1;
        self.wal_bytes += record.len() as u64;
        if let Err(e) = tx.txn.commit() {
            let e = Error::Unavailable(format!(
                "a logged change could not be applied ({e}); it reappears when the store is reopened"
            ));
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        self.totals = totals;
        *self.published.lock() = totals;
        self.maybe_checkpoint();
        Ok(())
    }

    fn maybe_checkpoint(&mut self) {
        if (self.since_checkpoint >= self.options.checkpoint_records
            || self.wal_bytes >= self.options.checkpoint_bytes)
            && let Err(e) = self.checkpoint()
        {
            self.poisoned = Some(e);
        }
    }

    /// Makes everything logged durable in the database and empties the log.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.insert(WAL_SEQ_KEY, self.seq.to_le_bytes().as_slice())
                .map_err(storage)?;
        }
        txn.commit().map_err(storage)?;
        self.wal.truncate().map_err(storage)?;
        self.since_checkpoint = 0;
        self.wal_bytes = 0;
        Ok(())
    }

    /// Reserves the next version of a name for content already written:
    /// checks quotas, then the deadline, then records a pending row.
    pub(crate) fn reserve(&mut self, r: &Reservation) -> Result<Reserved> {
        let mut tx = self.begin()?;
        let sh = r.scope.hash();
        let nh = r.name.hash();
        let size = r.integrity.size;
        let l = &self.limits;
        let mut row = tx.scope_row(&sh)?.unwrap_or(ScopeRow {
            scope: StoredScope::new(&r.scope),
            artifacts: 0,
            bytes: 0,
        });
        if row.scope != StoredScope::new(&r.scope) {
            return Err(Error::foreign_record("the artifact catalog", "a version"));
        }
        let quota = |limit| Err(Error::QuotaExceeded { limit });
        if row.artifacts + 1 > l.max_scope_artifacts {
            return quota(QuotaLimit::ArtifactsPerScope(l.max_scope_artifacts));
        }
        if row.bytes + size > l.max_scope_bytes {
            return quota(QuotaLimit::ArtifactBytesPerScope(l.max_scope_bytes));
        }
        if self.totals.artifacts + 1 > l.max_total_artifacts {
            return quota(QuotaLimit::ArtifactsTotal(l.max_total_artifacts));
        }
        if self.totals.bytes + size > l.max_total_bytes {
            return quota(QuotaLimit::ArtifactBytesTotal(l.max_total_bytes));
        }
        r.deadline.check(Stage::Commit)?;
        let nk = name_key(&sh, &r.name);
        let version = tx.u64_of(Table::Counters, &nk)? + 1;
        tx.put(Table::Counters, &nk, &version.to_le_bytes())?;
        let key = version_key(&sh, &nh, version);
        let created_at_ms = now_ms();
        let vrow = VersionRow {
            state: State::Pending,
            scope: StoredScope::new(&r.scope),
            name: r.name.as_str().to_owned(),
            version,
            mime_type: r.mime_type.clone(),
            size,
            sha256: *r.integrity.sha256.as_bytes(),
            chunk_size: r.integrity.chunk_size,
            created_at_ms,
            metadata_json: r.metadata_json.clone(),
            blob: r.blob,
        };
        tx.put(Table::Versions, &key, &encode(&vrow)?)?;
        tx.put(Table::Chunks, &key, &encode_chunks(&r.integrity.chunks))?;
        tx.put(Table::Pending, &key, &[])?;
        tx.put(Table::Blobs, &r.blob, &key)?;
        row.artifacts += 1;
        row.bytes += size;
        tx.put(Table::Scopes, &sh, &encode(&row)?)?;
        let totals = Totals {
            artifacts: self.totals.artifacts + 1,
            bytes: self.totals.bytes + size,
        };
        self.commit(tx, true, totals)?;
        Ok(Reserved {
            key,
            version,
            created_at_ms,
        })
    }

    /// Publishes a reserved version whose content is durable, unless the
    /// deadline has passed (then it is aborted and `Timeout` returned).
    pub(crate) fn publish(&mut self, key: &VersionKey, deadline: Deadline) -> Result<()> {
        if deadline.expired() {
            self.abort(key)?;
            return Err(Error::Timeout(Stage::Commit));
        }
        let mut tx = self.begin()?;
        let row = tx
            .version_row(key)?
            .filter(|r| r.state == State::Pending)
            .ok_or_else(|| Error::Corrupt("a reserved version vanished".into()))?;
        tx.publish(key, row)?;
        let totals = self.totals;
        self.commit(tx, false, totals)
    }

    /// Removes a reserved version (its content failed or came too late).
    pub(crate) fn abort(&mut self, key: &VersionKey) -> Result<()> {
        let mut tx = self.begin()?;
        let Some(row) = tx.version_row(key)? else {
            return Ok(());
        };
        tx.remove_version(key, &row)?;
        let totals = Totals {
            artifacts: self.totals.artifacts.saturating_sub(1),
            bytes: self.totals.bytes.saturating_sub(row.size),
        };
        self.commit(tx, true, totals)
    }

    /// Deletes published versions; returns each removed version and its
    /// blob, ascending.
    pub(crate) fn delete(
        &mut self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        deadline: Deadline,
    ) -> Result<Vec<(u64, BlobId)>> {
        let mut tx = self.begin()?;
        let sh = scope.hash();
        let nh = name.hash();
        let (lo, hi) = (version_key(&sh, &nh, 0), version_key(&sh, &nh, u64::MAX));
        let mut published: Vec<(VersionKey, VersionRow)> = Vec::new();
        {
            let table = tx.txn.open_table(Table::Versions.def()).map_err(storage)?;
            let wanted_one = match selector {
                DeleteSelector::Version(v) => Some(version_key(&sh, &nh, v)),
                _ => None,
            };
            let range: Box<dyn Iterator<Item = _>> = match (selector, wanted_one) {
                (_, Some(k)) => Box::new(table.range(&k[..]..=&k[..]).map_err(storage)?),
                (DeleteSelector::Latest, _) => {
                    Box::new(table.range(&lo[..]..=&hi[..]).map_err(storage)?.rev())
                }
                _ => Box::new(table.range(&lo[..]..=&hi[..]).map_err(storage)?),
            };
            for item in range {
                let (k, v) = item.map_err(storage)?;
                let row: VersionRow = decode(v.value(), "version")?;
                if row.state != State::Published {
                    continue;
                }
                let key: VersionKey = k
                    .value()
                    .try_into()
                    .map_err(|_| Error::Corrupt("a version key is malformed".into()))?;
                published.push((key, row));
                if selector == DeleteSelector::Latest {
                    break;
                }
            }
        }
        published.sort_by_key(|(_, r)| r.version);
        for (_, row) in &published {
            row.meta(scope, name)?;
        }
        if published.is_empty() {
            return Ok(Vec::new());
        }
        deadline.check(Stage::Commit)?;
        let mut totals = self.totals;
        for (key, row) in &published {
            tx.remove_version(key, row)?;
            totals.artifacts = totals.artifacts.saturating_sub(1);
            totals.bytes = totals.bytes.saturating_sub(row.size);
        }
        self.commit(tx, true, totals)?;
        Ok(published.iter().map(|(_, r)| (r.version, r.blob)).collect())
    }
}
