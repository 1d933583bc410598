//! Memory ingestion after a successful run.
//!
//! - `on_success`: the run's events go to a bounded queue served by a few
//!   background workers (batches, bounded retries with backoff); the
//!   answer never waits for them. When the queue is full the run's
//!   ingestion is dropped, counted and logged. A crash loses at most the
//!   runs still queued. Each run's writes carry the erasure fence read
//!   when the run started: a run queued or retrying when its user or
//!   session is erased is refused by the store and never retried
//!   (`erased`).
//! - `durable`: the session's events are admitted to the ingestion outbox
//!   (which skips what its watermark already covers) before the run
//!   returns; a failed admission is an error to the caller.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hippocamp_core::{ErasureFence, Error, MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryStore, WriteOptions};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

use crate::error::{AgentError, Result};

/// How a run's events reach memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Ingestion {
    /// Not at all.
    #[default]
    Disabled,
    /// In the background, after the answer.
    OnSuccess {
        /// Background workers, 1..=16.
        #[serde(default = "default_workers")]
        workers: u64,
        /// Runs waiting for a worker, 1..=65,536; more are dropped.
        #[serde(default = "default_queue")]
        queue: u64,
        /// Tries per batch, 1..=10.
        #[serde(default = "default_attempts")]
        max_attempts: u64,
    },
    /// Admitted to the durable outbox before the run returns.
    Durable {
        /// Delivery attempts per job (default: the outbox's).
        #[serde(default)]
        max_attempts: Option<u32>,
    },
}

fn default_workers() -> u64 {
    2
}
fn default_queue() -> u64 {
    256
}
fn default_attempts() -> u64 {
    3
}

impl Ingestion {
    /// Background ingestion with its defaults.
    pub fn on_success() -> Self {
        Ingestion::OnSuccess {
            workers: default_workers(),
            queue: default_queue(),
            max_attempts: default_attempts(),
        }
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        if let Ingestion::OnSuccess {
            workers,
            queue,
            max_attempts,
        } = *self
        {
            let check = |k: &str, v: u64, max: u64| {
                if (1..=max).contains(&v) {
                    Ok(())
                } else {
                    Err(AgentError::InvalidOptions(format!(
                        "ingestion.{k} {v} is not within 1..={max}"
                    )))
                }
            };
            check("workers", workers, 16)?;
            check("queue", queue, 65_536)?;
            check("max_attempts", max_attempts, 10)?;
        }
        Ok(())
    }
}

/// Events per `add_events` call of a background worker.
pub const BATCH: usize = 500;

/// Counters of background ingestion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IngestionStats {
    /// Runs queued and not yet finished.
    pub pending: u64,
    /// Runs whose events were all stored.
    pub done: u64,
    /// Runs that gave up after their retries.
    pub failed: u64,
    /// Runs dropped because the queue was full.
    pub dropped: u64,
    /// Runs refused because their user or session was erased after they
    /// started (nothing of them is written).
    pub erased: u64,
}

struct Job {
    scope: MemoryScope,
    session: SessionId,
    events: Vec<Event>,
    fence: ErasureFence,
}

#[derive(Debug, Default)]
struct Counters {
    pending: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    erased: AtomicU64,
    idle: Notify,
}

/// The background workers of `on_success` ingestion.
#[derive(Debug)]
pub(crate) struct Background {
    tx: mpsc::Sender<Job>,
    counters: Arc<Counters>,
    workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Background {
    fn drop(&mut self) {
        for w in &self.workers {
            w.abort();
        }
    }
}

/// How a queued run ended.
enum Delivery {
    Done,
    Failed,
    Erased,
}

async fn deliver(memory: &dyn MemoryStore, job: &Job, attempts: u64) -> Delivery {
    let opts = WriteOptions::default().fenced(job.fence);
    for batch in job.events.chunks(BATCH) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match memory
                .add_events(&job.scope, &job.session, batch, &opts)
                .await
            {
                Ok(_) => break,
                // Erased since the run started: never retried.
                Err(Error::StaleEpoch { .. }) => {
                    tracing::info!(session = %job.session,
                        "background ingestion refused: the user or session was erased");
                    return Delivery::Erased;
                }
                Err(e) if attempt < attempts => {
                    tracing::debug!(error = %e, attempt, "background ingestion retries");
                    let ms = (25u64 << (attempt - 1).min(6)).min(1_000);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, code = e.code(), session = %job.session,
                        "background ingestion gave up");
                    return Delivery::Failed;
                }
            }
        }
    }
    Delivery::Done
}

impl Background {
    pub(crate) fn start(
        memory: Arc<dyn MemoryStore>,
        workers: u64,
        queue: u64,
        attempts: u64,
    ) -> Result<Self> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            AgentError::InvalidOptions(
                "on_success ingestion needs a Tokio runtime when the runner is built".into(),
            )
        })?;
        let (tx, rx) = mpsc::channel::<Job>(hippocamp_core::limits::to_usize(queue));
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let counters = Arc::new(Counters::default());
        let workers = (0..workers)
            .map(|_| {
                let (rx, memory, c) = (Arc::clone(&rx), Arc::clone(&memory), Arc::clone(&counters));
                handle.spawn(async move {
                    loop {
                        let next = rx.lock().await.recv().await;
                        let Some(job) = next else { return };
                        let counter = match deliver(memory.as_ref(), &job, attempts).await {
                            Delivery::Done => &c.done,
                            Delivery::Failed => &c.failed,
                            Delivery::Erased => &c.erased,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        if c.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                            c.idle.notify_waiters();
                        }
                    }
                })
            })
            .collect();
        Ok(Self {
            tx,
            counters,
            workers,
        })
    }

    /// Queues a run's events, fenced by what the run read when it
    /// started; never waits.
    pub(crate) fn submit(
        &self,
        scope: MemoryScope,
        session: SessionId,
        events: Vec<Event>,
        fence: ErasureFence,
    ) {
        self.counters.pending.fetch_add(1, Ordering::AcqRel);
        if self
            .tx
            .try_send(Job {
                scope,
                session,
                events,
                fence,
            })
            .is_err()
        {
            self.counters.pending.fetch_sub(1, Ordering::AcqRel);
            let n = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(
                dropped = n,
                "background ingestion queue is full; this run's memory is dropped"
            );
        }
    }

    pub(crate) fn stats(&self) -> IngestionStats {
        let c = &self.counters;
        IngestionStats {
            pending: c.pending.load(Ordering::Acquire),
            done: c.done.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            erased: c.erased.load(Ordering::Relaxed),
        }
    }

    /// Waits until nothing is queued or running, or `timeout` passed;
    /// whether it is idle.
    pub(crate) async fn flush(&self, timeout: Duration) -> bool {
        let c = &self.counters;
        tokio::time::timeout(timeout, async {
            loop {
                let idle = c.idle.notified();
                if c.pending.load(Ordering::Acquire) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }
}
