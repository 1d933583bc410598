//! The processor: workers that claim due jobs and deliver them into their
//! memory store, and a background pass that prunes finished jobs.
//!
//! Each worker loops: claim (a fresh random owner token, a lease), check
//! the scope's erasure epoch against the job's (an older job is cancelled
//! as erased and writes nothing), then for each batch: renew the lease
//! immediately before every `add_events` call (a lost or expired owner
//! never starts one), deliver with the job's epoch as the write's fence and
//! a deadline of `call_timeout_ms`, and record the batch, which also hands
//! over the next one. A job's last batch is recorded by a recorder task
//! that commits the records of several finished jobs together. Batches are
//! delivered in calls sized from the store's embedding throughput (a call
//! that times out is retried smaller; nothing of it was visible). Any other
//! failure is recorded as a failed attempt (backoff, or failed once out of
//! attempts). While a job's last batch is in flight the worker claims its
//! next job, and hands that claim back untouched when it stops. Delivery
//! is at-least-once: a batch whose recording was lost is delivered again
//! and the memory store's event ids make it a duplicate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hippocamp_core::{CallOptions, Caller, CallerKind, Error, Result};
use hippocamp_memory::embedding::{Pacer, paced};
use hippocamp_memory::{ErasureFence, WriteOptions};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::limits::ProcessorOptions;
use crate::model::{BatchRecord, CancelReason, Delivered, JobError, Next, Owner, WorkItem};
use crate::outbox::Outbox;
use crate::store::JobStore;

/// Running workers and the prune pass; [`Processor::stop`] ends them.
#[derive(Debug)]
pub struct Processor {
    stop: Arc<AtomicBool>,
    stopping: Arc<Notify>,
    outbox: Outbox,
    tasks: Vec<JoinHandle<()>>,
}

impl Processor {
    /// Starts `options.workers` workers and the prune pass on the current
    /// Tokio runtime.
    pub fn start(outbox: &Outbox, options: ProcessorOptions) -> Result<Self> {
        options.validate()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::new(Notify::new());
        let mut tasks = Vec::new();
        let workers = usize::try_from(options.workers).unwrap_or(1);
        let (records, pending) = mpsc::channel(workers * 4);
        for _ in 0..options.workers {
            let (outbox, stop, options) = (outbox.clone(), Arc::clone(&stop), options.clone());
            let records = records.clone();
            tasks.push(tokio::spawn(async move {
                work(outbox, options, stop, records).await;
            }));
        }
        // Ends once every worker has (their senders dropped) and what they
        // sent is recorded.
        drop(records);
        let lease = Duration::from_millis(options.lease_ms);
        tasks.push(tokio::spawn(record_loop(
            Arc::clone(outbox.store()),
            pending,
            lease,
        )));
        let (o, s, n) = (outbox.clone(), Arc::clone(&stop), Arc::clone(&stopping));
        let interval = Duration::from_millis(options.prune_interval_ms);
        tasks.push(tokio::spawn(
            async move { prune_loop(o, interval, s, n).await },
        ));
        Ok(Self {
            stop,
            stopping,
            outbox: outbox.clone(),
            tasks,
        })
    }

    /// Whether every worker and the prune pass are still running (a task
    /// that ended, say by a panic, makes it false).
    pub fn is_running(&self) -> bool {
        self.tasks.iter().all(|t| !t.is_finished())
    }

    /// Asks every task to stop and waits for them (a delivery in flight
    /// finishes its call first).
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        self.outbox.kick().notify_waiters();
        self.stopping.notify_waiters();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for Processor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn work(
    outbox: Outbox,
    options: ProcessorOptions,
    stop: Arc<AtomicBool>,
    records: mpsc::Sender<BatchRecord>,
) {
    let lease = Duration::from_millis(options.lease_ms);
    let idle = Duration::from_millis(options.poll_interval_ms);
    // The job claimed while the previous one was being delivered.
    let mut ahead: Option<WorkItem> = None;
    while !stop.load(Ordering::Acquire) {
        // Registered before the claim, so a kick during it is not lost.
        let kicked = outbox.kick().notified();
        let claimed = match ahead.take() {
            Some(item)
                if outbox
                    .store()
                    .renew(&item.job, &item.owner, lease)
                    .await
                    .is_ok() =>
            {
                Ok(Some(item))
            }
            Some(item) => {
                // Its lease ran out while the batch before it took long
                // (or the job ended): handed back, never started, so no
                // attempt is counted.
                let _ = outbox.store().unclaim(&item.job, &item.owner).await;
                claim(&outbox, lease).await
            }
            None => claim(&outbox, lease).await,
        };
        match claimed {
            Ok(Some(item)) => {
                ahead = deliver(&outbox, &options, item, &records).await;
            }
            Ok(None) => {
                let _ = tokio::time::timeout(idle, kicked).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the outbox could not claim work");
                tokio::time::sleep(idle).await;
            }
        }
    }
    // Stopping: a job claimed ahead is handed back untouched (no attempt
    // counted; due again at once for the next processor).
    if let Some(item) = ahead {
        let _ = outbox.store().unclaim(&item.job, &item.owner).await;
    }
}

/// How long the recorder waits, after a finished job, for others to share
/// its commit; the jobs stay claimed meanwhile.
const RECORD_LINGER: Duration = Duration::from_millis(2);
/// Most finished jobs recorded in one commit.
const RECORD_GROUP: usize = 64;

/// Records the last batches the workers delivered, several per commit:
/// the job store's commit is most of what the outbox adds to a delivery,
/// and the jobs' records need not wait for each other's.
async fn record_loop(
    store: Arc<dyn JobStore>,
    mut pending: mpsc::Receiver<BatchRecord>,
    lease: Duration,
) {
    let mut group = Vec::new();
    while let Some(first) = pending.recv().await {
        group.push(first);
        let until = tokio::time::Instant::now() + RECORD_LINGER;
        while group.len() < RECORD_GROUP {
            match tokio::time::timeout_at(until, pending.recv()).await {
                Ok(Some(r)) => group.push(r),
                Ok(None) | Err(_) => break,
            }
        }
        // A refused record (the lease was lost, say to a cancellation)
        // has nothing left to do: the job ended, or its batch is
        // delivered again as duplicates.
        let _ = store
            .complete_batches(std::mem::take(&mut group), lease)
            .await;
    }
}

/// Claims the next due job of a registered target.
async fn claim(outbox: &Outbox, lease: Duration) -> Result<Option<WorkItem>> {
    let targets = outbox.registry().names();
    if targets.is_empty() {
        return Ok(None);
    }
    outbox.store().claim(Owner::random(), lease, &targets).await
}

/// Delivers a claimed job batch by batch, until it is done, fails or is
/// lost. The record of the last batch goes to the recorder (the worker
/// goes on meanwhile): the lease keeps the job from anyone else until it
/// lands, and were it lost, the batch would only be delivered again, as
/// duplicates.
///
/// Returns the next job, claimed while the last batch's call was in
/// flight: the worker starts its next call as soon as this one returns,
/// as a direct caller would. It is claimed only then, so it waits for one
/// batch at most; should that batch outlast its lease, the claim is
/// handed back unstarted (no attempt counted) and the worker claims anew.
async fn deliver(
    outbox: &Outbox,
    options: &ProcessorOptions,
    mut item: WorkItem,
    records: &mpsc::Sender<BatchRecord>,
) -> Option<WorkItem> {
    let lease = Duration::from_millis(options.lease_ms);
    let store = outbox.store();
    let Some(registered) = outbox.registry().registered(&item.target) else {
        // Claims only take registered targets; one that vanished waits.
        let _ = store
            .fail(
                &item.job,
                &item.owner,
                JobError::of(&Error::OutboxUnavailable(
                    "the target is not registered".into(),
                )),
            )
            .await;
        return None;
    };
    let target = &registered.target;
    let mut pacer = Pacer::with_timeout(
        target.limits.max_events_per_request,
        registered.embeds,
        Duration::from_millis(options.call_timeout_ms),
    );
    loop {
        let started = std::time::Instant::now();
        let last = item.batch + 1 >= item.batches;
        let batch = deliver_batch(
            outbox,
            &target.store,
            registered.fences,
            &item,
            lease,
            &mut pacer,
        );
        let (outcome, ahead) = if last {
            let (outcome, ahead) = tokio::join!(batch, claim(outbox, lease));
            let ahead = ahead.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the outbox could not claim work");
                None
            });
            (outcome, ahead)
        } else {
            (batch.await, None)
        };
        let (job, owner) = (item.job, item.owner);
        match outcome {
            Ok(delivered) => {
                metrics::histogram!("hippocamp_outbox_batch_delivery_seconds")
                    .record(started.elapsed().as_secs_f64());
                if last {
                    let record = BatchRecord {
                        job,
                        owner,
                        batch: item.batch,
                        delivered,
                    };
                    // Only a stopped recorder refuses: the processor is
                    // being dropped, and the batch is delivered again.
                    let _ = records.send(record).await;
                    return ahead;
                }
                match store
                    .complete_batch(&job, &owner, item.batch, delivered, lease)
                    .await
                {
                    Ok(Next::Batch(next)) => item = next,
                    Ok(Next::Done) | Err(_) => return None,
                }
            }
            Err(Error::StaleEpoch { .. }) => {
                let _ = store.release(&job, &owner, CancelReason::Erased).await;
                return ahead;
            }
            // Someone else owns it now, or it ended: nothing to record.
            Err(Error::LeaseLost(_)) => return ahead,
            Err(e) => {
                tracing::info!(job = %job, error = %e, "delivery attempt failed");
                let _ = store.fail(&job, &owner, JobError::of(&e)).await;
                return ahead;
            }
        }
    }
}

/// One batch: paced `add_events` calls fenced by the job's epoch, each
/// after a lease renewal.
async fn deliver_batch(
    outbox: &Outbox,
    memory: &Arc<dyn hippocamp_memory::MemoryStore>,
    fences: bool,
    item: &WorkItem,
    lease: Duration,
    pacer: &mut Pacer,
) -> Result<Delivered> {
    // Every call carries the job's epochs, its scope's and its
    // session's. A store that fences refuses it at its commit point if
    // either was erased since (`StaleEpoch`), on whichever server the
    // erasure ran: stronger than any check before the call. Only a store
    // that does not fence is asked first.
    if !fences {
        let current = memory
            .erasure_fence(&item.scope, &item.session, &CallOptions::default())
            .await?;
        if current.epoch != item.epoch || current.session_epoch != item.session_epoch {
            return Err(Error::StaleEpoch {
                admitted: item.session_epoch,
                current: current.session_epoch,
            });
        }
    }
    let events: Vec<_> = item
        .events
        .iter()
        .map(crate::model::StoredEvent::to_event)
        .collect();
    let store = outbox.store();
    let replies = paced(
        events.len(),
        pacer,
        |e: &Error| matches!(e, Error::Timeout(_)),
        |range, call| {
            let events = &events[range];
            async move {
                store.renew(&item.job, &item.owner, lease).await?;
                let fence = ErasureFence {
                    epoch: item.epoch,
                    session_epoch: item.session_epoch,
                };
                // Delivered on the outbox's own behalf: the policy is asked
                // again, knowing who asks.
                let call = call.on_behalf_of(Caller::of(CallerKind::Outbox));
                memory
                    .add_events(
                        &item.scope,
                        &item.session,
                        events,
                        &WriteOptions::new(call).fenced(fence),
                    )
                    .await
            }
        },
    )
    .await?;
    // A skipped event's position, counted in the job's events.
    let first = item.batch as usize * crate::model::BATCH_EVENTS;
    let mut d = Delivered::default();
    for (at, r) in replies {
        d.added += r.added.len() as u64;
        d.duplicates += r.duplicates.len() as u64;
        d.skipped += r.skipped.len() as u64;
        d.skipped_events.extend(r.skipped.into_iter().map(|mut s| {
            s.index += first + at;
            s
        }));
    }
    Ok(d)
}

async fn prune_loop(
    outbox: Outbox,
    interval: Duration,
    stop: Arc<AtomicBool>,
    stopping: Arc<Notify>,
) {
    while !stop.load(Ordering::Acquire) {
        let woken = stopping.notified();
        let _ = tokio::time::timeout(interval, woken).await;
        if stop.load(Ordering::Acquire) {
            return;
        }
        // Bounded: a few passes per interval, each at most
        // `max_prune_batch` jobs.
        for _ in 0..16 {
            match outbox.prune(None).await {
                Ok(p) if p.more => {}
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "pruning finished outbox jobs failed");
                    break;
                }
            }
        }
    }
}
