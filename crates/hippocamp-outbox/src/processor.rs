//! The processor: workers that claim due jobs and deliver them into their
//! memory store, and a background pass that prunes finished jobs.
//!
//! Each worker loops: claim (a fresh random owner token, a lease), check
//! the scope's erasure epoch against the job's (an older job is cancelled
//! as erased and writes nothing), then for each batch: renew the lease
//! immediately before every `add_events` call (a lost or expired owner
//! never starts one), deliver with the job's epoch as the write's fence and
//! a deadline of `call_timeout_ms`, and record the batch, which also hands
//! over the next one. Batches are delivered in calls sized from the
//! store's embedding throughput (a call that times out is retried smaller;
//! nothing of it was visible). Any other failure is recorded as a failed
//! attempt (backoff, or failed once out of attempts). Delivery is
//! at-least-once: a batch whose recording was lost is delivered again and
//! the memory store's event ids make it a duplicate.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hippocamp_core::{CallOptions, Error, Result};
use hippocamp_memory::WriteOptions;
use hippocamp_memory::embedding::{Pacer, paced};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::limits::ProcessorOptions;
use crate::model::{CancelReason, Delivered, JobError, Next, Owner, WorkItem};
use crate::outbox::Outbox;

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
        for _ in 0..options.workers {
            let (outbox, stop, options) = (outbox.clone(), Arc::clone(&stop), options.clone());
            tasks.push(tokio::spawn(
                async move { work(outbox, options, stop).await },
            ));
        }
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

async fn work(outbox: Outbox, options: ProcessorOptions, stop: Arc<AtomicBool>) {
    let lease = Duration::from_millis(options.lease_ms);
    let idle = Duration::from_millis(options.poll_interval_ms);
    // The record of a job's last batch, still being written: it overlaps
    // the next claim and delivery (at most one per worker).
    let mut recording: Option<tokio::task::JoinHandle<()>> = None;
    while !stop.load(Ordering::Acquire) {
        // Registered before the claim, so a kick during it is not lost.
        let kicked = outbox.kick().notified();
        let targets = outbox.registry().names();
        let claimed = if targets.is_empty() {
            Ok(None)
        } else {
            outbox.store().claim(Owner::random(), lease, &targets).await
        };
        match claimed {
            Ok(Some(item)) => {
                let last = deliver(&outbox, &options, item).await;
                if let Some(previous) = recording.take() {
                    let _ = previous.await;
                }
                recording = last;
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
    if let Some(previous) = recording {
        let _ = previous.await;
    }
}

/// Delivers a claimed job batch by batch, until it is done, fails or is
/// lost. The record of the last batch is returned still being written (it
/// ends the job; the worker goes on meanwhile): the lease keeps the job
/// from anyone else until it lands, and were it lost, the batch would only
/// be delivered again, as duplicates.
async fn deliver(
    outbox: &Outbox,
    options: &ProcessorOptions,
    mut item: WorkItem,
) -> Option<tokio::task::JoinHandle<()>> {
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
        let outcome = deliver_batch(
            outbox,
            &target.store,
            registered.fences,
            &item,
            lease,
            &mut pacer,
        )
        .await;
        let (job, owner) = (item.job, item.owner);
        match outcome {
            Ok(delivered) => {
                metrics::histogram!("hippocamp_outbox_batch_delivery_seconds")
                    .record(started.elapsed().as_secs_f64());
                if item.batch + 1 >= item.batches {
                    let (store, batch) = (Arc::clone(store), item.batch);
                    return Some(tokio::spawn(async move {
                        let _ = store
                            .complete_batch(&job, &owner, batch, delivered, lease)
                            .await;
                    }));
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
                return None;
            }
            // Someone else owns it now, or it ended: nothing to record.
            Err(Error::LeaseLost(_)) => return None,
            Err(e) => {
                tracing::info!(job = %job, error = %e, "delivery attempt failed");
                let _ = store.fail(&job, &owner, JobError::of(&e)).await;
                return None;
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
    // Every call carries the job's epoch. A store that fences refuses it
    // at its commit point if the scope was erased since (`StaleEpoch`),
    // which is stronger than any check before the call; only a store that
    // does not is asked first.
    if !fences {
        let current = memory
            .erasure_epoch(&item.scope, &CallOptions::default())
            .await?;
        if current != item.epoch {
            return Err(Error::StaleEpoch {
                admitted: item.epoch,
                current,
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
                // Held across the renewal and the call: a session's erasure
                // waits for it.
                let _call = outbox.call(&item.scope, &item.session);
                store.renew(&item.job, &item.owner, lease).await?;
                memory
                    .add_events(
                        &item.scope,
                        &item.session,
                        events,
                        &WriteOptions::new(call).epoch(item.epoch),
                    )
                    .await
            }
        },
    )
    .await?;
    let mut d = Delivered::default();
    for (_, r) in replies {
        d.added += r.added.len() as u64;
        d.duplicates += r.duplicates.len() as u64;
        d.skipped += r.skipped.len() as u64;
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
