//! [`PgJobStore`]: the ingestion outbox's job store on PostgreSQL, shared
//! by the processors of every server.
//!
//! Every rule stays in the outbox's one engine (`hippocamp_outbox::engine`,
//! the same functions the in-memory and the embedded store run): here its
//! tables are rows of `outbox_kv` (table, key, value; `BYTEA` keys compare
//! byte by byte, as the engine's ranges need) and each operation is one
//! transaction that first takes a transaction-scoped advisory lock, so
//! operations of all servers apply one after another, as they do under the
//! in-memory store's mutex or the embedded store's single writer.
//!
//! Claims are the exception, so processors of several servers claim at
//! once: a claim takes that lock *shared* (every other operation takes it
//! alone, so none runs beside a claim) and locks its candidate's schedule
//! row with `FOR UPDATE SKIP LOCKED`, so concurrent claims never wait for
//! each other and never take the same job (one passes over the row the
//! other holds); once the row is locked, it reads the job's lease again
//! (one committed since its first read holds the job). A claim writes
//! nothing but its lease. One that meets a
//! job whose lease expired (its claimant died) must count that attempt,
//! which writes the job and the counters: it hands over to a claim that
//! holds the lock alone.
//!
//! Claims are leases in `outbox_leases` (job, owner token, expiry, attempt)
//! stamped by the database's clock, never a server's, so a lease means the
//! same to every server: a processor's claim is seen as held by all, a
//! killed server's lease runs out and another server's processor takes the
//! job (counting the cut-off attempt), and an owner token fences every
//! step (renew, record, fail) of the claim. Schedule times are on the same
//! clock. Each operation loads the leases into the engine's [`Leases`]
//! for its reads and writes back the one it changes.
//!
//! The engine's reads are synchronous: an operation runs on a blocking
//! thread, each read a query on the transaction's connection.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, MemoryScope, Result, SessionId};
use hippocamp_outbox::engine::{self, Ctx};
use hippocamp_outbox::kv::{KvRead, Table, Write, Writes};
use hippocamp_outbox::leases::{Leases, Taken};
use hippocamp_outbox::mem::{capabilities, prune_limit};
use hippocamp_outbox::model::{
    Admitted, CancelReason, Delivered, JobError, JobId, JobState, JobStatus, Next,
    OutboxCapabilities, OutboxStats, Owner, Pruned, Submission, TargetName, WorkItem,
};
use hippocamp_outbox::{JobStore, OutboxLimits};
use parking_lot::Mutex;
use tokio::runtime::Handle;

use crate::db::{Database, db_error};

/// The advisory lock every outbox transaction takes first.
pub const OUTBOX_LOCK: i64 = 0x6869_7070_6f75_7462; // "hippoutb"

/// How long an outbox operation may wait for a connection.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

fn table_id(t: Table) -> i16 {
    t as i16
}

/// The job store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgJobStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    limits: OutboxLimits,
    /// Where this server's next claim scan starts (a hint, safe to lose).
    cursor: Mutex<Option<Vec<u8>>>,
}

/// How an operation holds the outbox's advisory lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// Alone: no other operation runs (every write of the engine).
    Alone,
    /// Shared with other claims, which skip each other's schedule rows.
    Claim,
}

/// One operation's transaction, read by the engine.
struct Tx<'a> {
    inner: deadpool_postgres::Transaction<'a>,
    rt: Handle,
    /// Now on the database's clock, ms.
    now: u64,
    hold: Hold,
}

impl KvRead for Tx<'_> {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let row = self
            .rt
            .block_on(self.inner.query_opt(
                "SELECT v FROM outbox_kv WHERE t = $1 AND k = $2",
                &[&table_id(table), &key],
            ))
            .map_err(db_error)?;
        Ok(row.map(|r| r.get(0)))
    }

    fn range(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .rt
            .block_on(self.inner.query(
                "SELECT k, v FROM outbox_kv WHERE t = $1 AND k >= $2 AND ($3::BYTEA IS NULL OR k < $3) \
                 ORDER BY k LIMIT $4",
                &[&table_id(table), &from, &to, &limit],
            ))
            .map_err(db_error)?;
        Ok(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
    }
}

impl Tx<'_> {
    fn block<T>(
        &self,
        f: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    ) -> Result<T> {
        self.rt.block_on(f).map_err(db_error)
    }

    /// Applies `writes` (the last change of a key wins, as applying them in
    /// order would).
    fn apply(&self, writes: Writes) -> Result<()> {
        let mut last: BTreeMap<(i16, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        for w in writes.0 {
            match w {
                Write::Put(t, k, v) => last.insert((table_id(t), k), Some(v)),
                Write::Del(t, k) => last.insert((table_id(t), k), None),
            };
        }
        let (mut pt, mut pk, mut pv, mut dt, mut dk) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for ((t, k), v) in last {
            if let Some(v) = v {
                pt.push(t);
                pk.push(k);
                pv.push(v);
            } else {
                dt.push(t);
                dk.push(k);
            }
        }
        if !dt.is_empty() {
            self.block(self.inner.execute(
                "DELETE FROM outbox_kv WHERE (t, k) IN (SELECT * FROM unnest($1::INT2[], $2::BYTEA[]))",
                &[&dt, &dk],
            ))?;
        }
        if !pt.is_empty() {
            self.block(self.inner.execute(
                "INSERT INTO outbox_kv (t, k, v) SELECT * FROM unnest($1::INT2[], $2::BYTEA[], $3::BYTEA[]) \
                 ON CONFLICT (t, k) DO UPDATE SET v = EXCLUDED.v",
                &[&pt, &pk, &pv],
            ))?;
        }
        Ok(())
    }

    /// The leases as the engine reads them: each with what is left of it
    /// on the database's clock (an expired one with nothing left).
    fn leases(&self) -> Result<Leases> {
        let leases = Leases::default();
        for r in self.block(self.inner.query(
            "SELECT job, owner, until_ms, attempt FROM outbox_leases",
            &[],
        ))? {
            self.hold_lease(&leases, &r)?;
        }
        Ok(leases)
    }

    /// Locks a candidate's schedule row for this claim unless another
    /// claim holds it (`SKIP LOCKED`: never waits); whether it did.
    fn lock_candidate(&self, key: &[u8]) -> Result<bool> {
        let row = self.block(self.inner.query_opt(
            "SELECT 1 FROM outbox_kv WHERE t = $1 AND k = $2 FOR UPDATE SKIP LOCKED",
            &[&table_id(Table::Schedule), &key],
        ))?;
        Ok(row.is_some())
    }

    /// `job`'s lease read again into `leases`: a claim's first read may
    /// predate a lease that another claim committed since.
    fn reload_lease(&self, leases: &Leases, job: &JobId) -> Result<()> {
        leases.end(job);
        if let Some(r) = self.block(self.inner.query_opt(
            "SELECT job, owner, until_ms, attempt FROM outbox_leases WHERE job = $1",
            &[&job.as_bytes().as_slice()],
        ))? {
            self.hold_lease(leases, &r)?;
        }
        Ok(())
    }

    /// Puts a lease row (job, owner, until, attempt) into `leases`.
    fn hold_lease(&self, leases: &Leases, r: &tokio_postgres::Row) -> Result<()> {
        let (job, owner): (Vec<u8>, Vec<u8>) = (r.get(0), r.get(1));
        let until: i64 = r.get(2);
        let attempt: i32 = r.get(3);
        let left = u64::try_from(until).unwrap_or(0).saturating_sub(self.now);
        leases.take(
            JobId::from_bytes(bytes16(&job)?),
            Owner::from_bytes(bytes16(&owner)?),
            Duration::from_millis(left),
            u32::try_from(attempt).unwrap_or(0),
        );
        Ok(())
    }

    /// Records `owner`'s lease on `job` until `lease` from now.
    fn set_lease(&self, job: &JobId, owner: &Owner, lease: Duration, attempt: u32) -> Result<()> {
        let until = i64::try_from(self.now.saturating_add(ms(lease))).unwrap_or(i64::MAX);
        self.block(self.inner.execute(
            "INSERT INTO outbox_leases (job, owner, until_ms, attempt) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (job) DO UPDATE SET owner = EXCLUDED.owner, until_ms = EXCLUDED.until_ms, attempt = EXCLUDED.attempt",
            &[
                &job.as_bytes().as_slice(),
                &owner.as_bytes().as_slice(),
                &until,
                &i32::try_from(attempt).unwrap_or(i32::MAX),
            ],
        ))?;
        Ok(())
    }

    /// Ends the lease on `job` (any owner's, or `owner`'s only).
    fn end_lease(&self, job: &JobId, owner: Option<&Owner>) -> Result<()> {
        match owner {
            None => self.block(self.inner.execute(
                "DELETE FROM outbox_leases WHERE job = $1",
                &[&job.as_bytes().as_slice()],
            ))?,
            Some(o) => self.block(self.inner.execute(
                "DELETE FROM outbox_leases WHERE job = $1 AND owner = $2",
                &[&job.as_bytes().as_slice(), &o.as_bytes().as_slice()],
            ))?,
        };
        Ok(())
    }
}

fn bytes16(b: &[u8]) -> Result<[u8; 16]> {
    b.try_into()
        .map_err(|_| Error::Corrupt("an outbox lease names a malformed id".into()))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl PgJobStore {
    /// The job store over `db` with `limits`.
    pub fn new(db: Database, limits: OutboxLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                limits,
                cursor: Mutex::new(None),
            }),
        })
    }

    /// Batches of events held (finished jobs hold none): a probe for tests.
    pub async fn held_batches(&self) -> Result<u64> {
        let client = self.inner.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM outbox_kv WHERE t = $1",
                &[&table_id(Table::Batches)],
            )
            .await
            .map_err(db_error)?
            .get(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Runs `op` in one transaction under the outbox's lock (alone), on a
    /// blocking thread; commits when it succeeds.
    async fn run<R: Send + 'static>(
        &self,
        op: impl FnOnce(&Tx<'_>, &Ctx<'_>, &Inner) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        self.run_holding(Hold::Alone, op).await
    }

    /// Runs `op` in one transaction holding the outbox's lock as `hold`
    /// says.
    async fn run_holding<R: Send + 'static>(
        &self,
        hold: Hold,
        op: impl FnOnce(&Tx<'_>, &Ctx<'_>, &Inner) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let inner = Arc::clone(&self.inner);
        let mut client = inner.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let rt = Handle::current();
        tokio::task::spawn_blocking(move || {
            let tx = rt.block_on(client.transaction()).map_err(db_error)?;
            let lock = match hold {
                Hold::Alone => "SELECT pg_advisory_xact_lock($1)",
                Hold::Claim => "SELECT pg_advisory_xact_lock_shared($1)",
            };
            rt.block_on(tx.execute(lock, &[&OUTBOX_LOCK]))
                .map_err(db_error)?;
            let now: i64 = rt
                .block_on(tx.query_one(
                    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT",
                    &[],
                ))
                .map_err(db_error)?
                .get(0);
            let tx = Tx {
                inner: tx,
                rt: rt.clone(),
                now: u64::try_from(now).unwrap_or(0),
                hold,
            };
            let ctx = Ctx {
                limits: &inner.limits,
                now: tx.now,
                wall: hippocamp_core::time::now_ms(),
            };
            let out = op(&tx, &ctx, &inner)?;
            rt.block_on(tx.inner.commit()).map_err(db_error)?;
            Ok(out)
        })
        .await
        .map_err(|e| Error::Unavailable(format!("an outbox operation stopped: {e}")))?
    }
}

/// What a claim found.
enum Claimed {
    Item(WorkItem),
    Nothing,
    /// A job whose lease expired, met by a claim beside others: counting
    /// that attempt is a write, for a claim that holds the lock alone.
    Expired,
}

/// One claim. Beside other claims ([`Hold::Claim`]) it writes only its
/// lease; alone, it also counts attempts whose lease expired (and fails
/// jobs out of attempts).
fn claim_in(
    tx: &Tx<'_>,
    ctx: &Ctx<'_>,
    inner: &Inner,
    owner: Owner,
    lease: Duration,
    targets: &BTreeSet<TargetName>,
) -> Result<Claimed> {
    let leases = tx.leases()?;
    // A candidate held by another server, or failed on expiry, is passed
    // over; the scan's own budget bounds each round.
    for _ in 0..8 {
        // The hint is not held across the scan's queries: claims of this
        // server scan at once (one passes over the row another locked).
        let from = inner.cursor.lock().clone();
        let (found, key) = engine::scan(tx, ctx, from.as_deref(), targets, &leases)?;
        inner.cursor.lock().clone_from(&key);
        let (Some(c), Some(key)) = (found, key) else {
            return Ok(Claimed::Nothing);
        };
        if tx.hold == Hold::Claim {
            // Another claim is taking it: pass over it.
            if !tx.lock_candidate(&key)? {
                continue;
            }
            // Locked now: a lease another claim committed before that is
            // visible to this read.
            tx.reload_lease(&leases, &c.id)?;
        }
        let mut row = c.row;
        match leases.take(c.id, owner, lease, row.attempts + 1) {
            Taken::Held => continue,
            Taken::Fresh => {}
            Taken::AfterExpiry if tx.hold == Hold::Claim => return Ok(Claimed::Expired),
            Taken::AfterExpiry => {
                let pending = write(tx, || engine::count_expired(tx, ctx, &c.id))?;
                if !pending {
                    leases.end(&c.id);
                    tx.end_lease(&c.id, None)?;
                    continue;
                }
                row.attempts += 1;
            }
        }
        tx.set_lease(&c.id, &owner, lease, row.attempts + 1)?;
        return engine::work_item(tx, &c.id, &row, owner, row.attempts + 1).map(Claimed::Item);
    }
    Ok(Claimed::Nothing)
}

/// `f` applied, its writes written.
fn write<R>(tx: &Tx<'_>, f: impl FnOnce() -> Result<(R, Writes)>) -> Result<R> {
    let (r, w) = f()?;
    tx.apply(w)?;
    Ok(r)
}

#[async_trait]
impl JobStore for PgJobStore {
    fn capabilities(&self) -> OutboxCapabilities {
        capabilities("postgres", true, &self.inner.limits)
    }

    async fn admit(&self, submission: Submission) -> Result<Admitted> {
        self.run(move |tx, ctx, _| {
            let leases = tx.leases()?;
            write(tx, || engine::admit(tx, ctx, &submission, &leases))
        })
        .await
    }

    async fn claim(
        &self,
        owner: Owner,
        lease: Duration,
        targets: &BTreeSet<TargetName>,
    ) -> Result<Option<WorkItem>> {
        for hold in [Hold::Claim, Hold::Alone] {
            let targets = targets.clone();
            let claimed = self
                .run_holding(hold, move |tx, ctx, inner| {
                    claim_in(tx, ctx, inner, owner, lease, &targets)
                })
                .await?;
            match claimed {
                Claimed::Item(item) => return Ok(Some(item)),
                Claimed::Nothing => return Ok(None),
                Claimed::Expired => {}
            }
        }
        Ok(None)
    }

    async fn renew(&self, job: &JobId, owner: &Owner, lease: Duration) -> Result<()> {
        let (job, owner) = (*job, *owner);
        self.run(move |tx, _, _| {
            let held = tx.leases()?.check(&job, &owner)?;
            engine::deliverable(tx, &job)?;
            tx.set_lease(&job, &owner, lease, held.attempt)
        })
        .await
    }

    async fn unclaim(&self, job: &JobId, owner: &Owner) -> Result<()> {
        let (job, owner) = (*job, *owner);
        self.run(move |tx, _, _| {
            tx.leases()?.give_back(&job, &owner)?;
            tx.end_lease(&job, Some(&owner))
        })
        .await
    }

    async fn complete_batch(
        &self,
        job: &JobId,
        owner: &Owner,
        batch: u32,
        delivered: Delivered,
        lease: Duration,
    ) -> Result<Next> {
        let (job, owner) = (*job, *owner);
        self.run(move |tx, ctx, _| {
            let held = tx.leases()?.check(&job, &owner)?;
            let next = write(tx, || {
                engine::complete_batch(tx, ctx, &job, batch, &delivered)
            })?;
            if next.is_none() {
                tx.end_lease(&job, None)?;
                return Ok(Next::Done);
            }
            tx.set_lease(&job, &owner, lease, held.attempt)?;
            let row = engine::load_job(tx, &job)?.ok_or(Error::NotFound("job"))?;
            Ok(Next::Batch(engine::work_item(
                tx,
                &job,
                &row,
                owner,
                held.attempt,
            )?))
        })
        .await
    }

    async fn fail(&self, job: &JobId, owner: &Owner, error: JobError) -> Result<JobState> {
        let (job, owner) = (*job, *owner);
        self.run(move |tx, ctx, _| {
            tx.leases()?.check(&job, &owner)?;
            let state = write(tx, || engine::fail(tx, ctx, &job, error))?;
            tx.end_lease(&job, Some(&owner))?;
            Ok(state)
        })
        .await
    }

    async fn release(&self, job: &JobId, owner: &Owner, reason: CancelReason) -> Result<()> {
        let (job, owner) = (*job, *owner);
        self.run(move |tx, ctx, _| {
            tx.leases()?.check(&job, &owner)?;
            write(tx, || engine::cancel(tx, ctx, &job, reason))?;
            tx.end_lease(&job, Some(&owner))
        })
        .await
    }

    async fn cancel(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        let (scope, job) = (scope.clone(), *job);
        self.run(move |tx, ctx, _| {
            let leases = tx.leases()?;
            engine::status(tx, &scope, &job, &leases)?;
            write(tx, || {
                engine::cancel(tx, ctx, &job, CancelReason::Requested)
            })?;
            // Its claim, if any, ends with it: the owner's next step is
            // refused.
            leases.end(&job);
            tx.end_lease(&job, None)?;
            engine::status(tx, &scope, &job, &leases)
        })
        .await
    }

    async fn erase(
        &self,
        scope: &MemoryScope,
        session: Option<&SessionId>,
        epoch: Option<u64>,
    ) -> Result<u64> {
        let (scope, session) = (scope.clone(), session.cloned());
        self.run(move |tx, ctx, _| {
            let cancelled = write(tx, || {
                engine::erase(tx, ctx, &scope, session.as_ref(), epoch)
            })?;
            for job in &cancelled {
                tx.end_lease(job, None)?;
            }
            Ok(cancelled.len() as u64)
        })
        .await
    }

    async fn delete(&self, scope: &MemoryScope, job: &JobId) -> Result<()> {
        let (scope, job) = (scope.clone(), *job);
        self.run(move |tx, _, _| {
            let leases = tx.leases()?;
            write(tx, || engine::delete(tx, &scope, &job, &leases))
        })
        .await
    }

    async fn status(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        let (scope, job) = (scope.clone(), *job);
        self.run(move |tx, _, _| engine::status(tx, &scope, &job, &tx.leases()?))
            .await
    }

    async fn stats(&self) -> Result<OutboxStats> {
        self.run(move |tx, ctx, _| engine::stats(tx, ctx.now, &tx.leases()?))
            .await
    }

    async fn prune(&self, limit: Option<u64>) -> Result<Pruned> {
        let limit = prune_limit(limit, &self.inner.limits)?;
        self.run(move |tx, ctx, _| write(tx, || engine::prune(tx, ctx, limit)))
            .await
    }

    async fn health(&self) -> Result<()> {
        // A write, not a ping: a database that answers but cannot write
        // (read-only, out of space) is not healthy.
        self.run(move |tx, ctx, _| write(tx, || engine::probe(ctx)))
            .await
    }
}
