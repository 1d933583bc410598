//! [`RedbJobStore`]: opening (lock, format, log replay, clock), and the
//! `JobStore` operations.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Error, MemoryScope, Result, SessionId};
use hippocamp_durable::group::Committer;
use hippocamp_durable::{DirLock, FileWal, WalStorage, decode_log};
use hippocamp_outbox::engine::{self, Ctx};
use hippocamp_outbox::kv::{KvRead, Table, Write, Writes};
use hippocamp_outbox::leases::{Clock, Leases, Taken};
use hippocamp_outbox::mem::{capabilities, prune_limit};
use hippocamp_outbox::model::{
    Admitted, BatchRecord, CancelReason, Delivered, JobError, JobId, JobState, JobStatus, Next,
    OutboxCapabilities, OutboxStats, Owner, Pruned, Submission, TargetName, WorkItem,
};
use hippocamp_outbox::{JobStore, OutboxLimits};
use parking_lot::Mutex;
use redb::{Database, ReadableTable as _, StorageBackend};
use tokio::sync::oneshot;

use crate::writer::{
    CLOCK_KEY, DurableOptions, Finish, MAX_GROUP, Op, ReadKv, WAL_SEQ_KEY, Writer, def,
};

/// The database file inside the store's directory.
pub const DB_FILE: &str = "outbox.redb";
/// The write-ahead log inside the store's directory.
pub const WAL_FILE: &str = "outbox.wal";
/// The lock file inside the store's directory.
pub const LOCK_FILE: &str = "LOCK";
/// The on-disk format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
const FORMAT_KEY: &[u8] = b"format";

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// The durable job store. See the crate docs.
#[derive(Debug)]
pub struct RedbJobStore {
    limits: OutboxLimits,
    db: Arc<Database>,
    committer: Arc<Committer<Writer>>,
    leases: Arc<Leases>,
    clock: Arc<Clock>,
    cursor: Mutex<Option<Vec<u8>>>,
    poisoned: Arc<Mutex<Option<Error>>>,
    _lock: Option<DirLock>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl RedbJobStore {
    /// Opens (creating if needed) the store in `dir`, taking the
    /// directory's lock: a second process gets `Unavailable`, a database
    /// of an unknown format version is refused. Every lease of the last
    /// run is void (leases live in memory).
    pub fn open(dir: impl AsRef<Path>, limits: OutboxLimits) -> Result<Self> {
        Self::open_with_options(dir, limits, DurableOptions::default())
    }

    /// [`open`](Self::open) with tuning options.
    pub fn open_with_options(
        dir: impl AsRef<Path>,
        limits: OutboxLimits,
        options: DurableOptions,
    ) -> Result<Self> {
        limits.validate()?;
        let dir = dir.as_ref();
        let (lock, db) =
            hippocamp_durable::db::open_owned(dir, LOCK_FILE, DB_FILE, init_format, None)?;
        let wal = FileWal::open(&dir.join(WAL_FILE)).map_err(storage)?;
        Self::start(db, Box::new(wal), limits, options, Some(lock))
    }

    /// Opens a store on a custom redb backend and log storage (no
    /// directory lock); tests use it to inject power loss.
    pub fn open_with_backend(
        backend: impl StorageBackend,
        wal: impl WalStorage + 'static,
        limits: OutboxLimits,
        options: DurableOptions,
    ) -> Result<Self> {
        limits.validate()?;
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(storage)?;
        Self::start(db, Box::new(wal), limits, options, None)
    }

    fn start(
        db: Database,
        mut wal: Box<dyn WalStorage>,
        limits: OutboxLimits,
        options: DurableOptions,
        lock: Option<DirLock>,
    ) -> Result<Self> {
        init_format(&db)?;
        let (seq, clock) = replay(&db, &mut *wal)?;
        let db = Arc::new(db);
        // The clock goes on from its last stored value: due times and
        // finish times stay ordered across restarts.
        let clock = Arc::new(Clock::starting_at(clock.saturating_add(1)));
        let poisoned = Arc::new(Mutex::new(None));
        let writer = Writer {
            db: Arc::clone(&db),
            wal,
            limits: limits.clone(),
            clock: Arc::clone(&clock),
            seq,
            since_checkpoint: 0,
            wal_bytes: 0,
            options,
            poisoned: Arc::clone(&poisoned),
        };
        Ok(Self {
            limits,
            db,
            committer: Arc::new(Committer::new(writer, MAX_GROUP, "the outbox writer")),
            leases: Arc::new(Leases::default()),
            clock,
            cursor: Mutex::new(None),
            poisoned,
            _lock: lock,
        })
    }

    /// Batches of events held (finished jobs hold none).
    pub fn held_batches(&self) -> usize {
        ReadKv::open(&self.db)
            .and_then(|kv| kv.range(Table::Batches, &[], None, usize::MAX))
            .map_or(0, |r| r.len())
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            limits: &self.limits,
            now: self.clock.now_ms(),
            wall: hippocamp_core::time::now_ms(),
        }
    }

    fn read(&self) -> Result<ReadKv> {
        ReadKv::open(&self.db)
    }

    /// Runs `f` in the writer's next group and waits for its answer.
    async fn write<R: Send + 'static>(
        &self,
        durable: bool,
        f: impl FnOnce(&dyn KvRead, &Ctx<'_>) -> Result<(R, Writes)> + Send + 'static,
    ) -> Result<R> {
        let (op, rx) = op(durable, f);
        self.committer.submit(op, rx).await
    }

    /// After a batch's record committed: the lease ends with the job, or
    /// is renewed for the next batch, which is handed over.
    fn after_record(
        &self,
        r: &BatchRecord,
        next: Option<u32>,
        attempt: u32,
        lease: Duration,
    ) -> Result<Next> {
        if next.is_none() {
            self.leases.end_owned(&r.job, &r.owner);
            return Ok(Next::Done);
        }
        self.leases.renew(&r.job, &r.owner, lease)?;
        let kv = self.read()?;
        let row = engine::load_job(&kv, &r.job)?.ok_or(Error::NotFound("job"))?;
        Ok(Next::Batch(engine::work_item(
            &kv, &r.job, &row, r.owner, attempt,
        )?))
    }
}

/// An operation for the writer's next group running `f`, and where
/// its answer arrives; its changes commit with the group (synced
/// before the reply when `durable`).
fn op<R: Send + 'static>(
    durable: bool,
    f: impl FnOnce(&dyn KvRead, &Ctx<'_>) -> Result<(R, Writes)> + Send + 'static,
) -> (Op, oneshot::Receiver<Result<R>>) {
    let (tx, rx) = oneshot::channel::<Result<R>>();
    let op = Op {
        durable,
        run: Box::new(move |kv, ctx| match f(kv, ctx) {
            Ok((r, writes)) => {
                let finish: Finish = Box::new(move |err| {
                    let _ = tx.send(match err {
                        None => Ok(r),
                        Some(e) => Err(e.clone()),
                    });
                });
                (writes, finish)
            }
            Err(e) => {
                let finish: Finish = Box::new(move |_| {
                    let _ = tx.send(Err(e));
                });
                (Writes::default(), finish)
            }
        }),
    };
    (op, rx)
}

impl Drop for RedbJobStore {
    fn drop(&mut self) {
        self.committer.close();
    }
}

fn init_format(db: &Database) -> Result<()> {
    hippocamp_durable::db::init_format(
        db,
        def(Table::Meta),
        FORMAT_KEY,
        FORMAT_VERSION,
        "the outbox",
        |txn| {
            for t in Table::ALL {
                txn.open_table(def(t)).map_err(storage)?;
            }
            Ok(())
        },
    )
}

fn le_u64(bytes: &[u8], what: &str) -> Result<u64> {
    Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| {
        Error::Corrupt(format!("the outbox's {what} record is malformed"))
    })?))
}

/// Applies the log records newer than the last checkpoint, in one durable
/// transaction, then empties the log. Returns the last sequence number
/// and the clock's last stored value.
fn replay(db: &Database, wal: &mut dyn WalStorage) -> Result<(u64, u64)> {
    let records = decode_log::<Write>(&wal.read_all().map_err(storage)?);
    let txn = db.begin_write().map_err(storage)?;
    let (last, clock) = {
        let mut tables = Table::ALL
            .iter()
            .map(|t| txn.open_table(def(*t)).map_err(storage))
            .collect::<Result<Vec<_>>>()?;
        let meta = Table::Meta as usize;
        let applied = match tables[meta].get(WAL_SEQ_KEY).map_err(storage)? {
            Some(v) => le_u64(v.value(), "log position")?,
            None => 0,
        };
        let mut last = applied;
        for (seq, writes) in records {
            if seq <= applied {
                continue;
            }
            for w in writes {
                match w {
                    Write::Put(t, k, v) => {
                        tables[t as usize]
                            .insert(k.as_slice(), v.as_slice())
                            .map_err(storage)?;
                    }
                    Write::Del(t, k) => {
                        tables[t as usize].remove(k.as_slice()).map_err(storage)?;
                    }
                }
            }
            last = seq;
        }
        tables[meta]
            .insert(WAL_SEQ_KEY, last.to_le_bytes().as_slice())
            .map_err(storage)?;
        let clock = match tables[meta].get(CLOCK_KEY).map_err(storage)? {
            Some(v) => le_u64(v.value(), "clock")?,
            None => 0,
        };
        (last, clock)
    };
    txn.commit().map_err(storage)?;
    wal.truncate().map_err(storage)?;
    Ok((last, clock))
}

#[async_trait]
impl JobStore for RedbJobStore {
    fn capabilities(&self) -> OutboxCapabilities {
        capabilities("redb", true, &self.limits)
    }

    async fn admit(&self, submission: Submission) -> Result<Admitted> {
        let leases = Arc::clone(&self.leases);
        self.write(true, move |kv, ctx| {
            engine::admit(kv, ctx, &submission, &leases)
        })
        .await
    }

    async fn claim(
        &self,
        owner: Owner,
        lease: Duration,
        targets: &BTreeSet<TargetName>,
    ) -> Result<Option<WorkItem>> {
        for _ in 0..8 {
            let found = {
                let kv = self.read()?;
                let ctx = self.ctx();
                let mut cursor = self.cursor.lock();
                let (found, next) =
                    engine::scan(&kv, &ctx, cursor.as_deref(), targets, &self.leases)?;
                *cursor = next;
                found
            };
            let Some(c) = found else {
                return Ok(None);
            };
            let mut row = c.row;
            match self.leases.take(c.id, owner, lease, row.attempts + 1) {
                Taken::Held => continue,
                Taken::Fresh => {}
                Taken::AfterExpiry => {
                    let id = c.id;
                    let pending = self
                        .write(false, move |kv, ctx| engine::count_expired(kv, ctx, &id))
                        .await?;
                    if !pending {
                        self.leases.end(&c.id);
                        continue;
                    }
                    row.attempts += 1;
                    self.leases.set_attempt(&c.id, row.attempts + 1);
                }
            }
            // The scan's snapshot may be stale by now (the job ended, or
            // failed into a backoff, meanwhile): work from the row as it is.
            let kv = self.read()?;
            let now = self.clock.now_ms();
            let fresh = match engine::load_job(&kv, &c.id) {
                Ok(Some(r)) if r.state == JobState::Pending && r.due <= now => r,
                Ok(_) => {
                    self.leases.end_owned(&c.id, &owner);
                    continue;
                }
                Err(e) => {
                    self.leases.end_owned(&c.id, &owner);
                    return Err(e);
                }
            };
            let item = engine::work_item(&kv, &c.id, &fresh, owner, fresh.attempts + 1);
            if item.is_err() {
                self.leases.end_owned(&c.id, &owner);
            }
            return item.map(Some);
        }
        Ok(None)
    }

    async fn renew(&self, job: &JobId, owner: &Owner, lease: Duration) -> Result<()> {
        self.leases.check(job, owner)?;
        if let Err(e) = engine::deliverable(&self.read()?, job) {
            self.leases.end_owned(job, owner);
            return Err(e);
        }
        self.leases.renew(job, owner, lease)
    }

    async fn unclaim(&self, job: &JobId, owner: &Owner) -> Result<()> {
        // A claim writes nothing (leases live in memory): ending the
        // lease is all there is to give back.
        self.leases.give_back(job, owner)
    }

    async fn complete_batch(
        &self,
        job: &JobId,
        owner: &Owner,
        batch: u32,
        delivered: Delivered,
        lease: Duration,
    ) -> Result<Next> {
        let record = BatchRecord {
            job: *job,
            owner: *owner,
            batch,
            delivered,
        };
        self.complete_batches(vec![record], lease)
            .await
            .pop()
            .unwrap_or(Err(Error::LeaseLost("the record was not answered")))
    }

    async fn complete_batches(
        &self,
        records: Vec<BatchRecord>,
        lease: Duration,
    ) -> Vec<Result<Next>> {
        // Every record's lease is checked here, and again where its change
        // is applied: the lease may have run out while the change waited
        // for its group. The records are queued together, so one group
        // (one commit) takes them all.
        let mut replies: Vec<Option<Result<Next>>> = Vec::with_capacity(records.len());
        let mut ops = Vec::new();
        let mut held = Vec::new();
        for r in &records {
            match self.leases.check(&r.job, &r.owner) {
                Err(e) => replies.push(Some(Err(e))),
                Ok(lease_held) => {
                    replies.push(None);
                    held.push(lease_held);
                    let (r, leases) = (r.clone(), Arc::clone(&self.leases));
                    ops.push(op(false, move |kv, ctx| {
                        leases.check(&r.job, &r.owner)?;
                        engine::complete_batch(kv, ctx, &r.job, r.batch, &r.delivered)
                    }));
                }
            }
        }
        let mut written = self.committer.submit_all(ops).await.into_iter();
        let mut held = held.into_iter();
        records
            .iter()
            .zip(replies)
            .map(|(r, reply)| {
                if let Some(refused) = reply {
                    return refused;
                }
                let next = written
                    .next()
                    .unwrap_or(Err(Error::LeaseLost("the record was not answered")))?;
                let attempt = held.next().map_or(1, |l| l.attempt);
                self.after_record(r, next, attempt, lease)
            })
            .collect()
    }

    async fn fail(&self, job: &JobId, owner: &Owner, error: JobError) -> Result<JobState> {
        self.leases.check(job, owner)?;
        let (id, who, leases) = (*job, *owner, Arc::clone(&self.leases));
        let state = self
            .write(true, move |kv, ctx| {
                leases.check(&id, &who)?;
                engine::fail(kv, ctx, &id, error)
            })
            .await?;
        self.leases.end_owned(job, owner);
        Ok(state)
    }

    async fn release(&self, job: &JobId, owner: &Owner, reason: CancelReason) -> Result<()> {
        self.leases.check(job, owner)?;
        let (id, who, leases) = (*job, *owner, Arc::clone(&self.leases));
        self.write(true, move |kv, ctx| {
            leases.check(&id, &who)?;
            engine::cancel(kv, ctx, &id, reason)
        })
        .await?;
        self.leases.end_owned(job, owner);
        Ok(())
    }

    async fn cancel(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        engine::status(&self.read()?, scope, job, &self.leases)?;
        let id = *job;
        self.write(true, move |kv, ctx| {
            engine::cancel(kv, ctx, &id, CancelReason::Requested)
        })
        .await?;
        // Its claim, if any, ends with it: the owner's next step is refused.
        self.leases.end(job);
        engine::status(&self.read()?, scope, job, &self.leases)
    }

    async fn erase(
        &self,
        scope: &MemoryScope,
        session: Option<&SessionId>,
        epoch: Option<u64>,
    ) -> Result<u64> {
        let (scope, session) = (scope.clone(), session.cloned());
        let cancelled = self
            .write(true, move |kv, ctx| {
                engine::erase(kv, ctx, &scope, session.as_ref(), epoch)
            })
            .await?;
        for job in &cancelled {
            self.leases.end(job);
        }
        Ok(cancelled.len() as u64)
    }

    async fn delete(&self, scope: &MemoryScope, job: &JobId) -> Result<()> {
        let (scope, id, leases) = (scope.clone(), *job, Arc::clone(&self.leases));
        self.write(true, move |kv, _| engine::delete(kv, &scope, &id, &leases))
            .await
    }

    async fn status(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        engine::status(&self.read()?, scope, job, &self.leases)
    }

    async fn stats(&self) -> Result<OutboxStats> {
        engine::stats(&self.read()?, self.clock.now_ms(), &self.leases)
    }

    async fn prune(&self, limit: Option<u64>) -> Result<Pruned> {
        let limit = prune_limit(limit, &self.limits)?;
        self.write(true, move |kv, ctx| engine::prune(kv, ctx, limit))
            .await
    }

    async fn health(&self) -> Result<()> {
        if let Some(e) = self.poisoned.lock().clone() {
            return Err(Error::Unavailable(format!(
                "the outbox stopped writing after a storage failure: {e}"
            )));
        }
        // A durable write proves the log and the database still take one
        // (a read alone passes on a full or read-only disk).
        self.write(true, |_, ctx| engine::probe(ctx)).await
    }
}
