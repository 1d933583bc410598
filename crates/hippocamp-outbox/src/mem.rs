//! The volatile job store: the engine's tables in memory, under one lock.
//! For tests and for embedding in a process that needs no restart safety;
//! the `ephemeral` profile runs without an outbox.

use std::collections::BTreeSet;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Error, Field, MemoryScope, Problem, Result, SessionId};
use parking_lot::Mutex;

use crate::engine::{self, Ctx};
use crate::kv::{MemKv, Writes};
use crate::leases::{Clock, Leases, Taken};
use crate::limits::OutboxLimits;
use crate::model::{
    Admitted, BATCH_EVENTS, CancelReason, Delivered, JobError, JobId, JobState, JobStatus, Next,
    OutboxCapabilities, OutboxStats, Owner, Pruned, Submission, TargetName, WorkItem,
};
use crate::store::JobStore;

/// A job store in memory.
#[derive(Debug)]
pub struct InMemoryJobStore {
    limits: OutboxLimits,
    kv: Mutex<MemKv>,
    leases: Leases,
    clock: Clock,
    cursor: Mutex<Option<Vec<u8>>>,
}

impl InMemoryJobStore {
    /// An empty store with `limits`.
    pub fn new(limits: OutboxLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            limits,
            kv: Mutex::new(MemKv::default()),
            leases: Leases::default(),
            clock: Clock::starting_at(0),
            cursor: Mutex::new(None),
        })
    }

    /// Batches of events held (finished jobs hold none).
    pub fn held_batches(&self) -> usize {
        self.kv.lock().len(crate::kv::Table::Batches)
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            limits: &self.limits,
            now: self.clock.now_ms(),
            wall: hippocamp_core::time::now_ms(),
        }
    }

    /// Runs `op` on the tables and applies its changes if it succeeded.
    fn write<R>(&self, op: impl FnOnce(&MemKv, &Ctx<'_>) -> Result<(R, Writes)>) -> Result<R> {
        let ctx = self.ctx();
        let mut kv = self.kv.lock();
        let (r, w) = op(&kv, &ctx)?;
        kv.apply(w);
        Ok(r)
    }
}

/// The capabilities of a store with `limits`.
pub fn capabilities(backend: &str, durable: bool, limits: &OutboxLimits) -> OutboxCapabilities {
    OutboxCapabilities {
        backend: backend.to_owned(),
        durable,
        delivery: "at_least_once".into(),
        claim_fencing: "lease_owner_token".into(),
        erasure_fencing: "erasure_epoch".into(),
        batch_events: BATCH_EVENTS as u64,
        limits: limits.describe(),
    }
}

/// The page a prune pass takes: `limit`, at most `max_prune_batch`.
pub fn prune_limit(limit: Option<u64>, limits: &OutboxLimits) -> Result<usize> {
    let l = limit.unwrap_or(limits.max_prune_batch);
    if l == 0 || l > limits.max_prune_batch {
        return Err(Error::invalid(
            Field::Limit,
            Problem::OutOfRange {
                value: i128::from(l),
                min: 1,
                max: i128::from(limits.max_prune_batch),
            },
        ));
    }
    Ok(hippocamp_core::limits::to_usize(l))
}

#[async_trait]
impl JobStore for InMemoryJobStore {
    fn capabilities(&self) -> OutboxCapabilities {
        capabilities("memory", false, &self.limits)
    }

    async fn admit(&self, submission: Submission) -> Result<Admitted> {
        self.write(|kv, ctx| engine::admit(kv, ctx, &submission, &self.leases))
    }

    async fn claim(
        &self,
        owner: Owner,
        lease: Duration,
        targets: &BTreeSet<TargetName>,
    ) -> Result<Option<WorkItem>> {
        // A candidate taken by a racing claimer, or failed on expiry, is
        // passed over; the scan's own budget bounds each round.
        for _ in 0..8 {
            let ctx = self.ctx();
            let mut kv = self.kv.lock();
            let mut cursor = self.cursor.lock();
            let (found, next) = engine::scan(&*kv, &ctx, cursor.as_deref(), targets, &self.leases)?;
            *cursor = next;
            let Some(c) = found else {
                return Ok(None);
            };
            let mut row = c.row;
            match self.leases.take(c.id, owner, lease, row.attempts + 1) {
                Taken::Held => continue,
                Taken::Fresh => {}
                Taken::AfterExpiry => {
                    let (pending, w) = engine::count_expired(&*kv, &ctx, &c.id)?;
                    kv.apply(w);
                    if !pending {
                        self.leases.end(&c.id);
                        continue;
                    }
                    row.attempts += 1;
                    self.leases.set_attempt(&c.id, row.attempts + 1);
                }
            }
            return engine::work_item(&*kv, &c.id, &row, owner, row.attempts + 1).map(Some);
        }
        Ok(None)
    }

    async fn renew(&self, job: &JobId, owner: &Owner, lease: Duration) -> Result<()> {
        let kv = self.kv.lock();
        self.leases.check(job, owner)?;
        engine::deliverable(&*kv, job)?;
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
        let ctx = self.ctx();
        let mut kv = self.kv.lock();
        let held = self.leases.check(job, owner)?;
        let (next, w) = engine::complete_batch(&*kv, &ctx, job, batch, &delivered)?;
        kv.apply(w);
        if next.is_none() {
            self.leases.end(job);
            return Ok(Next::Done);
        }
        self.leases.renew(job, owner, lease)?;
        let row = engine::load_job(&*kv, job)?.ok_or(Error::NotFound("job"))?;
        Ok(Next::Batch(engine::work_item(
            &*kv,
            job,
            &row,
            *owner,
            held.attempt,
        )?))
    }

    async fn fail(&self, job: &JobId, owner: &Owner, error: JobError) -> Result<JobState> {
        let ctx = self.ctx();
        let mut kv = self.kv.lock();
        self.leases.check(job, owner)?;
        let (state, w) = engine::fail(&*kv, &ctx, job, error)?;
        kv.apply(w);
        self.leases.end_owned(job, owner);
        Ok(state)
    }

    async fn release(&self, job: &JobId, owner: &Owner, reason: CancelReason) -> Result<()> {
        let ctx = self.ctx();
        let mut kv = self.kv.lock();
        self.leases.check(job, owner)?;
        let (_, w) = engine::cancel(&*kv, &ctx, job, reason)?;
        kv.apply(w);
        self.leases.end_owned(job, owner);
        Ok(())
    }

    async fn cancel(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        let ctx = self.ctx();
        let mut kv = self.kv.lock();
        engine::status(&*kv, scope, job, &self.leases)?;
        let (_, w) = engine::cancel(&*kv, &ctx, job, CancelReason::Requested)?;
        kv.apply(w);
        // Its claim, if any, ends with it: the owner's next step is refused.
        self.leases.end(job);
        engine::status(&*kv, scope, job, &self.leases)
    }

    async fn erase(
        &self,
        scope: &MemoryScope,
        session: Option<&SessionId>,
        epoch: Option<u64>,
    ) -> Result<u64> {
        let cancelled = self.write(|kv, ctx| engine::erase(kv, ctx, scope, session, epoch))?;
        for job in &cancelled {
            self.leases.end(job);
        }
        Ok(cancelled.len() as u64)
    }

    async fn delete(&self, scope: &MemoryScope, job: &JobId) -> Result<()> {
        self.write(|kv, _| engine::delete(kv, scope, job, &self.leases))
    }

    async fn status(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus> {
        engine::status(&*self.kv.lock(), scope, job, &self.leases)
    }

    async fn stats(&self) -> Result<OutboxStats> {
        engine::stats(&*self.kv.lock(), self.clock.now_ms(), &self.leases)
    }

    async fn prune(&self, limit: Option<u64>) -> Result<Pruned> {
        let limit = prune_limit(limit, &self.limits)?;
        self.write(|kv, ctx| engine::prune(kv, ctx, limit))
    }

    async fn health(&self) -> Result<()> {
        self.write(|_, ctx| engine::probe(ctx))
    }
}
