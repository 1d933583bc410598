//! The `JobStore` contract.
//!
//! A job store keeps the queue of ingestion work: it admits sanitised
//! events durably before it answers, hands out due jobs under a lease and a
//! random owner token, records each delivered batch, retries with backoff,
//! ends jobs (succeeded, failed, cancelled) and drops their event payload
//! when they end. Every step of a claim must present the claim's token
//! while its lease holds, checked with the store's own clock: callers pass
//! durations, never instants.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{MemoryScope, Result, SessionId};

use crate::model::{
    Admitted, BatchRecord, CancelReason, Delivered, JobError, JobId, JobState, JobStatus, Next,
    OutboxCapabilities, OutboxStats, Owner, Pruned, Submission, TargetName, WorkItem,
};

/// The queue of ingestion jobs.
#[async_trait]
pub trait JobStore: Send + Sync + fmt::Debug {
    /// What it offers and its limits.
    fn capabilities(&self) -> OutboxCapabilities;

    /// Queues the submission's events that the session's watermark does
    /// not cover yet, in jobs of at most `max_events_per_job` events, and
    /// answers once that is durable. Events already admitted for the
    /// session (by any earlier submission) are not queued again; the jobs
    /// that hold them are named. Over a limit, nothing is queued
    /// (`QuotaExceeded`). A submission captured before an erasure the
    /// store knows of is `StaleEpoch`.
    async fn admit(&self, submission: Submission) -> Result<Admitted>;

    /// Claims the next due job whose target is in `targets`, under a lease
    /// of `lease` for `owner`: examines at most `max_claim_scan` schedule
    /// entries from where the last pass stopped, so a job that cannot be
    /// claimed at the front never starves the others. `None` when nothing
    /// claimable is due.
    async fn claim(
        &self,
        owner: Owner,
        lease: Duration,
        targets: &BTreeSet<TargetName>,
    ) -> Result<Option<WorkItem>>;

    /// Extends the claim's lease to `lease` from now. Refused
    /// (`LeaseLost`) unless `owner` holds an unexpired lease on the job and
    /// the job is still active: a caller renews immediately before every
    /// store call, so a lost or expired owner never starts one.
    async fn renew(&self, job: &JobId, owner: &Owner, lease: Duration) -> Result<()>;

    /// Gives back `owner`'s claim on a job whose delivery it never started
    /// (a worker that claimed ahead, and is stopping or saw that claim's
    /// lease run out): the job is due again at once and the attempt is not
    /// counted. The lease may have expired; refused (`LeaseLost`) once
    /// anyone else claimed the job, or the job ended.
    async fn unclaim(&self, job: &JobId, owner: &Owner) -> Result<()>;

    /// Records that batch `batch` was delivered with `delivered`, under
    /// `owner`'s lease; the batch's events are dropped. Returns the next
    /// batch (still claimed, its lease renewed to `lease`) or `Done`.
    async fn complete_batch(
        &self,
        job: &JobId,
        owner: &Owner,
        batch: u32,
        delivered: Delivered,
        lease: Duration,
    ) -> Result<Next>;

    /// Records several claims' batches, each as
    /// [`complete_batch`](Self::complete_batch) would, answering in order;
    /// one refused record leaves the others alone. A store may commit them
    /// together (the processor records the jobs its workers finish this
    /// way: one commit instead of one each).
    async fn complete_batches(
        &self,
        records: Vec<BatchRecord>,
        lease: Duration,
    ) -> Vec<Result<Next>> {
        let mut replies = Vec::with_capacity(records.len());
        for r in records {
            replies.push(
                self.complete_batch(&r.job, &r.owner, r.batch, r.delivered, lease)
                    .await,
            );
        }
        replies
    }

    /// Records a failed attempt under `owner`'s lease: the job waits for
    /// its backoff, or fails once it is out of attempts. Returns the state
    /// it is left in.
    async fn fail(&self, job: &JobId, owner: &Owner, error: JobError) -> Result<JobState>;

    /// Ends a claimed job as cancelled under `owner`'s lease (the processor
    /// found its scope erased).
    async fn release(&self, job: &JobId, owner: &Owner, reason: CancelReason) -> Result<()>;

    /// Cancels a job of `scope` (no ownership needed); a finished job is
    /// left as it is. Another scope's job is `NotFound`.
    async fn cancel(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus>;

    /// Cancels, with reason `erased`, every active job of `scope` (of
    /// `session` only, when given) and drops their events; with `epoch`,
    /// remembers that the scope reached it, so a submission captured
    /// before it is refused. Returns how many jobs were cancelled.
    async fn erase(
        &self,
        scope: &MemoryScope,
        session: Option<&SessionId>,
        epoch: Option<u64>,
    ) -> Result<u64>;

    /// Deletes a finished job of `scope` (its status goes; nothing else
    /// changes). Another scope's job is `NotFound`; a pending or running
    /// one is `JobActive` (cancel it first).
    async fn delete(&self, scope: &MemoryScope, job: &JobId) -> Result<()>;

    /// A job of `scope`; another scope's job is `NotFound`.
    async fn status(&self, scope: &MemoryScope, job: &JobId) -> Result<JobStatus>;

    /// Counters (O(1): kept with every change).
    async fn stats(&self) -> Result<OutboxStats>;

    /// Removes finished jobs older than the retention, oldest first, at
    /// most `limit` (default and ceiling `max_prune_batch`).
    async fn prune(&self, limit: Option<u64>) -> Result<Pruned>;

    /// Whether it can take writes now: it writes one meta row (no count
    /// changes), so a store that can no longer write says so here.
    async fn health(&self) -> Result<()>;
}
