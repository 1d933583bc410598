//! The writer: every change of the job store goes through it, and
//! concurrent changes share one redb transaction and one log record
//! (group commit, driven by `hippocamp_durable::group`).
//!
//! Each operation runs the engine against the transaction as the earlier
//! operations of its group left it and either contributes its changes or
//! fails alone. The group's changes are appended to the write-ahead log as
//! one record, synced if any operation of the group must be durable before
//! its reply (admissions, failures, cancellations, erasures, prunes), then
//! committed without fsync. Progress records (a delivered batch, an
//! attempt that expired) are not synced on their own: losing one in a
//! power cut only makes a batch be delivered again, which the memory
//! store's event ids turn into duplicates. Replies are sent after the
//! commit.

use std::cell::OnceCell;
use std::sync::Arc;

use hippocamp_core::{Error, Result};
use hippocamp_durable::{WalStorage, encode_record};
use hippocamp_outbox::engine::Ctx;
use hippocamp_outbox::kv::{KvRead, Table, Write, Writes};
use hippocamp_outbox::leases::Clock;
use hippocamp_outbox::limits::OutboxLimits;
use parking_lot::Mutex;
use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase as _, ReadableTable, TableDefinition,
    WriteTransaction,
};

/// Most operations committed together.
pub(crate) const MAX_GROUP: usize = 256;

/// The `meta` key of the last log record applied at a checkpoint.
pub(crate) const WAL_SEQ_KEY: &[u8] = b"wal_seq";
/// The `meta` key of the store clock's last value.
pub(crate) const CLOCK_KEY: &[u8] = b"clock";

pub(crate) fn def(t: Table) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(t.name())
}

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// What an operation does once its group committed (or failed).
pub(crate) type Finish = Box<dyn FnOnce(Option<&Error>) + Send>;

/// A queued operation: runs the engine on the group's transaction and
/// returns its changes and how to answer.
pub(crate) struct Op {
    pub(crate) durable: bool,
    #[allow(clippy::type_complexity)]
    pub(crate) run: Box<dyn FnOnce(&dyn KvRead, &Ctx<'_>) -> (Writes, Finish) + Send>,
}

/// The tables of a write transaction, each opened on first use (a group
/// touches a few of them; opening all of them is measurable per commit).
struct TxKv<'t> {
    txn: &'t WriteTransaction,
    tables: [OnceCell<redb::Table<'t, &'static [u8], &'static [u8]>>; TABLES],
}

const TABLES: usize = Table::ALL.len();

impl<'t> TxKv<'t> {
    fn open(txn: &'t WriteTransaction) -> Self {
        Self {
            txn,
            tables: std::array::from_fn(|_| OnceCell::new()),
        }
    }

    fn table(&self, t: Table) -> Result<&redb::Table<'t, &'static [u8], &'static [u8]>> {
        opened(&self.tables[t as usize], || self.txn.open_table(def(t)))
    }

    fn table_mut(
        &mut self,
        t: Table,
    ) -> Result<&mut redb::Table<'t, &'static [u8], &'static [u8]>> {
        self.table(t)?;
        self.tables[t as usize]
            .get_mut()
            .ok_or_else(|| Error::Unavailable("an outbox table did not open".into()))
    }

    fn apply(&mut self, writes: &[Write]) -> Result<()> {
        for w in writes {
            match w {
                Write::Put(t, k, v) => {
                    self.table_mut(*t)?
                        .insert(k.as_slice(), v.as_slice())
                        .map_err(storage)?;
                }
                Write::Del(t, k) => {
                    self.table_mut(*t)?.remove(k.as_slice()).map_err(storage)?;
                }
            }
        }
        Ok(())
    }
}

/// The table in `cell`, opened by `open` on first use.
fn opened<T>(
    cell: &OnceCell<T>,
    open: impl FnOnce() -> std::result::Result<T, redb::TableError>,
) -> Result<&T> {
    if let Some(t) = cell.get() {
        return Ok(t);
    }
    let _ = cell.set(open().map_err(storage)?);
    cell.get()
        .ok_or_else(|| Error::Unavailable("an outbox table did not open".into()))
}

fn get(
    t: &impl ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    Ok(t.get(key).map_err(storage)?.map(|v| v.value().to_vec()))
}

fn range(
    t: &impl ReadableTable<&'static [u8], &'static [u8]>,
    from: &[u8],
    to: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let iter = match to {
        Some(to) => t.range::<&[u8]>(from..to),
        None => t.range::<&[u8]>(from..),
    }
    .map_err(storage)?;
    let mut out = Vec::new();
    for item in iter.take(limit) {
        let (k, v) = item.map_err(storage)?;
        out.push((k.value().to_vec(), v.value().to_vec()));
    }
    Ok(out)
}

impl KvRead for TxKv<'_> {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get(self.table(table)?, key)
    }

    fn range(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        range(self.table(table)?, from, to, limit)
    }
}

/// The tables of a read snapshot, each opened on first use.
pub(crate) struct ReadKv {
    txn: ReadTransaction,
    tables: [OnceCell<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>; TABLES],
}

impl ReadKv {
    pub(crate) fn open(db: &Database) -> Result<Self> {
        Ok(Self {
            txn: db.begin_read().map_err(storage)?,
            tables: std::array::from_fn(|_| OnceCell::new()),
        })
    }

    fn table(&self, t: Table) -> Result<&redb::ReadOnlyTable<&'static [u8], &'static [u8]>> {
        opened(&self.tables[t as usize], || self.txn.open_table(def(t)))
    }
}

impl KvRead for ReadKv {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        get(self.table(table)?, key)
    }

    fn range(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        range(self.table(table)?, from, to, limit)
    }
}

/// Tuning of the durable job store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableOptions {
    /// Checkpoint (durable database commit, empty log) after this many
    /// logged groups (default 16,384).
    pub checkpoint_groups: usize,
    /// ...or once the log holds this many bytes (default 64 MiB).
    pub checkpoint_bytes: u64,
}

impl Default for DurableOptions {
    fn default() -> Self {
        Self {
            checkpoint_groups: 16_384,
            checkpoint_bytes: 64 << 20,
        }
    }
}

pub(crate) struct Writer {
    pub(crate) db: Arc<Database>,
    pub(crate) wal: Box<dyn WalStorage>,
    pub(crate) limits: OutboxLimits,
    pub(crate) clock: Arc<Clock>,
    pub(crate) seq: u64,
    pub(crate) since_checkpoint: usize,
    pub(crate) wal_bytes: u64,
    pub(crate) options: DurableOptions,
    /// Set once the log or the database failed in a way that leaves their
    /// agreement uncertain: every later write is refused until a reopen
    /// replays the log.
    pub(crate) poisoned: Arc<Mutex<Option<Error>>>,
}

impl hippocamp_durable::group::GroupWriter for Writer {
    type Op = Op;

    fn commit_group(&mut self, ops: Vec<Op>) {
        let poisoned = self.poisoned.lock().clone();
        if let Some(e) = poisoned {
            let e = Error::Unavailable(format!(
                "the outbox stopped writing after a storage failure ({e}); reopen it"
            ));
            for op in ops {
                // Each operation's answer is the refusal.
                let (_, finish) = (op.run)(&Refused, &self.ctx());
                finish(Some(&e));
            }
            return;
        }
        let (finishes, result) = self.apply_group(ops);
        for f in finishes {
            f(result.as_ref().err());
        }
    }

    fn after_group(&mut self) {
        if self.poisoned.lock().is_none()
            && (self.since_checkpoint >= self.options.checkpoint_groups
                || self.wal_bytes >= self.options.checkpoint_bytes)
            && let Err(e) = self.checkpoint()
        {
            *self.poisoned.lock() = Some(e);
        }
    }

    fn close(&mut self) {
        if self.poisoned.lock().is_none() && self.since_checkpoint > 0 {
            let _ = self.checkpoint();
        }
    }
}

/// Reads that fail: what a refused group's operations see.
struct Refused;

impl KvRead for Refused {
    fn get(&self, _: Table, _: &[u8]) -> Result<Option<Vec<u8>>> {
        Err(Error::Unavailable("the outbox stopped writing".into()))
    }
    fn range(
        &self,
        _: Table,
        _: &[u8],
        _: Option<&[u8]>,
        _: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Err(Error::Unavailable("the outbox stopped writing".into()))
    }
}

impl Writer {
    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            limits: &self.limits,
            now: self.clock.now_ms(),
            wall: hippocamp_core::time::now_ms(),
        }
    }

    /// Makes everything logged durable in the database and empties the log.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut meta = txn.open_table(def(Table::Meta)).map_err(storage)?;
            meta.insert(WAL_SEQ_KEY, self.seq.to_le_bytes().as_slice())
                .map_err(storage)?;
        }
        txn.commit().map_err(storage)?;
        self.wal.truncate().map_err(storage)?;
        self.since_checkpoint = 0;
        self.wal_bytes = 0;
        Ok(())
    }

    fn apply_group(&mut self, ops: Vec<Op>) -> (Vec<Finish>, Result<()>) {
        let mut finishes = Vec::with_capacity(ops.len());
        let mut txn = match self.db.begin_write().map_err(storage) {
            Ok(t) => t,
            Err(e) => {
                let ctx = self.ctx();
                for op in ops {
                    finishes.push((op.run)(&Refused, &ctx).1);
                }
                return (finishes, Err(e));
            }
        };
        if let Err(e) = txn.set_durability(Durability::None).map_err(storage) {
            let ctx = self.ctx();
            for op in ops {
                finishes.push((op.run)(&Refused, &ctx).1);
            }
            return (finishes, Err(e));
        }
        let ctx = self.ctx();
        let mut durable = false;
        let mut log: Vec<Write> = Vec::new();
        let applied = (|| -> Result<()> {
            let mut kv = TxKv::open(&txn);
            let mut fatal = None;
            for op in ops {
                let (writes, finish) = (op.run)(&kv, &ctx);
                finishes.push(finish);
                if fatal.is_some() || writes.is_empty() {
                    continue;
                }
                durable |= op.durable;
                if let Err(e) = kv.apply(&writes.0) {
                    fatal = Some(e);
                    continue;
                }
                log.extend(writes.0);
            }
            if let Some(e) = fatal {
                return Err(e);
            }
            if !log.is_empty() {
                let clock = Write::Put(
                    Table::Meta,
                    CLOCK_KEY.to_vec(),
                    ctx.now.to_le_bytes().to_vec(),
                );
                kv.apply(std::slice::from_ref(&clock))?;
                log.push(clock);
            }
            Ok(())
        })();
        if let Err(e) = applied {
            // Dropping an uncommitted transaction aborts it.
            drop(txn);
            return (finishes, Err(e));
        }
        if log.is_empty() {
            drop(txn);
            return (finishes, Ok(()));
        }
        (finishes, self.log_and_commit(txn, &log, durable))
    }

    /// Logs the group (synced when `durable`), then commits it; only then
    /// may it be seen or acknowledged.
    fn log_and_commit(
        &mut self,
        txn: WriteTransaction,
        log: &[Write],
        durable: bool,
    ) -> Result<()> {
        let seq = self.seq + 1;
        let record = encode_record(seq, log).map_err(storage)?;
        let mut logged = self.wal.append(&record);
        if durable {
            logged = logged.and_then(|()| self.wal.sync());
        }
        if let Err(e) = logged {
            let e = Error::storage(e);
            *self.poisoned.lock() = Some(e.clone());
            return Err(e);
        }
        self.seq = seq;
        self.since_checkpoint += 1;
        self.wal_bytes += record.len() as u64;
        if let Err(e) = txn.commit() {
            let e = Error::Unavailable(format!(
                "a logged outbox change could not be applied ({e}); it reappears when the store is reopened"
            ));
            *self.poisoned.lock() = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }
}
