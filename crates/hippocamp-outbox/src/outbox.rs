//! The outbox as callers use it: admission of a session's events (planned
//! with the memory stores' own `plan_events`, so a secret or malformed
//! event is reported at once and never stored), job status and
//! cancellation, erasure notices, and the registry of the memory stores
//! jobs deliver to.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hippocamp_core::{
    CallOptions, Error, Field, MemoryLimits, MemoryScope, Problem, Result, SessionId,
};
use hippocamp_memory::event::{SkippedEvent, plan_events};
use hippocamp_memory::{Event, MemoryStore};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::model::{
    JobId, JobRef, JobStatus, OutboxStats, Pruned, StoredEvent, Submission, TargetName,
};
use crate::store::JobStore;

/// Most targets a registry holds.
pub const MAX_TARGETS: usize = 128;

/// A memory store jobs deliver to, with the limits its events are planned
/// with.
#[derive(Debug, Clone)]
pub struct Target {
    /// The store.
    pub store: Arc<dyn MemoryStore>,
    /// Its limits (`plan_events` runs with them at admission).
    pub limits: MemoryLimits,
}

/// The memory stores registered in this process, by stable name. Jobs are
/// only claimed for a registered target: after a start, nothing is
/// delivered until the process has registered where it goes (the
/// admission barrier of the reference).
#[derive(Debug, Default)]
pub struct Registry {
    targets: RwLock<BTreeMap<TargetName, Registered>>,
}

/// A registered target with what the processor asks of its capabilities
/// (read once, at registration: a store's capabilities do not change).
#[derive(Debug, Clone)]
pub(crate) struct Registered {
    pub(crate) target: Target,
    /// It embeds what it stores (deliveries are paced for that).
    pub(crate) embeds: bool,
    /// It refuses a write of an older erasure epoch at its commit point.
    pub(crate) fences: bool,
}

impl Registry {
    /// Registers (or replaces) `name`; at most [`MAX_TARGETS`] names. A
    /// store that is not idempotent per event id, or cannot take a
    /// session's events a few at a time, is refused (`InvalidArgument`):
    /// delivery is at least once, in batches, so a retried or resumed
    /// batch must store nothing twice.
    pub fn register(&self, name: TargetName, target: Target) -> Result<()> {
        let caps = target.store.capabilities();
        if !caps.idempotent_ingestion {
            return Err(Error::invalid(
                Field::Target,
                Problem::Relation(
                    "the store is not idempotent per event id: delivery is at least once",
                ),
            ));
        }
        if !caps.incremental_events {
            return Err(Error::invalid(
                Field::Target,
                Problem::Relation(
                    "the store cannot take a session's events incrementally: delivery is in batches",
                ),
            ));
        }
        let mut t = self.targets.write();
        if !t.contains_key(&name) && t.len() >= MAX_TARGETS {
            return Err(Error::invalid(
                Field::Target,
                Problem::TooMany {
                    count: t.len() + 1,
                    max: MAX_TARGETS,
                },
            ));
        }
        let registered = Registered {
            embeds: caps.search.embedder.is_some(),
            fences: caps.erasure_epoch_fencing,
            target,
        };
        t.insert(name, registered);
        Ok(())
    }

    /// The target `name`.
    pub fn get(&self, name: &TargetName) -> Option<Target> {
        self.targets.read().get(name).map(|r| r.target.clone())
    }

    pub(crate) fn registered(&self, name: &TargetName) -> Option<Registered> {
        self.targets.read().get(name).cloned()
    }

    /// Every registered name.
    pub fn names(&self) -> BTreeSet<TargetName> {
        self.targets.read().keys().cloned().collect()
    }
}

/// What an ingest request did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Ingested {
    /// The jobs holding the request's events (new ones first).
    pub jobs: Vec<JobRef>,
    /// Events that became new work.
    pub new_events: u64,
    /// Events that will never be stored, each with its reason (reported
    /// now, at admission).
    pub skipped: Vec<SkippedEvent>,
}

/// A job store, the targets it delivers to, and the signal that wakes the
/// processor.
#[derive(Debug, Clone)]
pub struct Outbox {
    store: Arc<dyn JobStore>,
    registry: Arc<Registry>,
    kick: Arc<Notify>,
    /// The store's `max_events_per_submission` and `max_attempts`, read
    /// once: every ingest checks them.
    max_events: u64,
    max_attempts: u64,
}

impl Outbox {
    /// An outbox over `store`, with an empty registry.
    pub fn new(store: Arc<dyn JobStore>) -> Self {
        let limits = store.capabilities().limits;
        let limit = |name: &str, absent: u64| {
            limits
                .iter()
                .find(|l| l.name == name)
                .map_or(absent, |l| l.value)
        };
        let (max_events, max_attempts) = (
            limit("outbox.max_events_per_submission", u64::MAX),
            limit("outbox.max_attempts", 1),
        );
        Self {
            store,
            registry: Arc::new(Registry::default()),
            kick: Arc::new(Notify::new()),
            max_events,
            max_attempts,
        }
    }

    /// The job store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The signal the processor waits on.
    pub(crate) fn kick(&self) -> &Arc<Notify> {
        &self.kick
    }

    /// Registers a target and wakes the processor (its queued jobs become
    /// claimable).
    pub fn register(&self, name: TargetName, target: Target) -> Result<()> {
        self.registry.register(name, target)?;
        self.kick.notify_waiters();
        Ok(())
    }

    /// Queues a session's events for `target`: they are planned as the
    /// store would (skips are reported now), the scope's erasure epoch is
    /// captured, and what the session's watermark does not cover becomes
    /// jobs. Returns once the admission is durable; delivery happens in
    /// the background. The target's policy is asked on behalf of `call`'s
    /// caller (the token or the command line that handed the events in);
    /// delivery asks again as the outbox (`CallerKind::Outbox`).
    pub async fn ingest(
        &self,
        target: &TargetName,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        max_attempts: Option<u32>,
        call: &CallOptions,
    ) -> Result<Ingested> {
        let max = self.max_events;
        if events.len() as u64 > max {
            return Err(Error::invalid(
                Field::Events,
                Problem::TooMany {
                    count: events.len(),
                    max: hippocamp_core::limits::to_usize(max),
                },
            ));
        }
        if events.is_empty() {
            return Err(Error::invalid(Field::Events, Problem::Empty));
        }
        if let Some(a) = max_attempts {
            let ceiling = self.max_attempts;
            if a == 0 || u64::from(a) > ceiling {
                return Err(Error::invalid(
                    Field::Limit,
                    Problem::OutOfRange {
                        value: i128::from(a),
                        min: 1,
                        max: i128::from(ceiling),
                    },
                ));
            }
        }
        let t = self.registry.get(target).ok_or_else(|| {
            Error::OutboxUnavailable(format!("no memory store named `{target}` is registered"))
        })?;
        let (stored, skipped) = plan(scope, session, events, &t.limits)?;
        // The target's policy decides now whether these may be queued at
        // all (delivery asks it again).
        t.store.admit_events(scope, session, events, call).await?;
        let mut tries = 0;
        let admitted = loop {
            let fence = t.store.erasure_fence(scope, session, call).await?;
            let sub = Submission {
                target: target.clone(),
                scope: scope.clone(),
                session: session.clone(),
                epoch: fence.epoch,
                session_epoch: fence.session_epoch,
                events: stored.clone(),
                max_attempts,
            };
            match self.store.admit(sub).await {
                // An erasure came between reading the epoch and admitting:
                // read it again (the events then belong after it).
                Err(Error::StaleEpoch { .. }) if tries < 3 => tries += 1,
                Err(Error::StaleEpoch { .. }) => {
                    return Err(Error::Unavailable(
                        "the scope kept being erased during the admission; retry".into(),
                    ));
                }
                other => break other?,
            }
        };
        if admitted.new_events > 0 {
            self.kick.notify_waiters();
        }
        Ok(Ingested {
            jobs: admitted.jobs,
            new_events: admitted.new_events,
            skipped,
        })
    }

    /// [`ingest`](Self::ingest) of events given as JSON values (an HTTP
    /// body, JSON lines): each is parsed on its own, and one that is not
    /// an event is reported among the skips at its position instead of
    /// failing the request.
    pub async fn ingest_values(
        &self,
        target: &TargetName,
        scope: &MemoryScope,
        session: &SessionId,
        values: Vec<serde_json::Value>,
        max_attempts: Option<u32>,
        call: &CallOptions,
    ) -> Result<Ingested> {
        if values.is_empty() {
            return Err(Error::invalid(Field::Events, Problem::Empty));
        }
        let (events, positions, malformed) = hippocamp_memory::event::parse_events(values);
        let mut r = if events.is_empty() {
            Ingested {
                jobs: Vec::new(),
                new_events: 0,
                skipped: Vec::new(),
            }
        } else {
            self.ingest(target, scope, session, &events, max_attempts, call)
                .await?
        };
        for skip in &mut r.skipped {
            skip.index = positions.get(skip.index).copied().unwrap_or(skip.index);
        }
        r.skipped.extend(malformed);
        r.skipped.sort_by_key(|k| k.index);
        Ok(r)
    }

    /// A job of `scope`.
    pub async fn job(&self, scope: &MemoryScope, id: &JobId) -> Result<JobStatus> {
        self.store.status(scope, id).await
    }

    /// Cancels a job of `scope` (a finished one is left as it is).
    pub async fn cancel(&self, scope: &MemoryScope, id: &JobId) -> Result<JobStatus> {
        self.store.cancel(scope, id).await
    }

    /// Deletes a finished job of `scope` (`JobActive` while it is pending
    /// or running).
    pub async fn delete(&self, scope: &MemoryScope, id: &JobId) -> Result<()> {
        self.store.delete(scope, id).await
    }

    /// Tells the outbox that `scope` (its `session`, when given) was
    /// erased, at `epoch` for a user's erasure: its queued jobs are
    /// cancelled and their events dropped.
    pub async fn erased(
        &self,
        scope: &MemoryScope,
        session: Option<&SessionId>,
        epoch: Option<u64>,
    ) -> Result<u64> {
        self.store.erase(scope, session, epoch).await
    }

    /// Counters.
    pub async fn stats(&self) -> Result<OutboxStats> {
        self.store.stats().await
    }

    /// One prune pass.
    pub async fn prune(&self, limit: Option<u64>) -> Result<Pruned> {
        self.store.prune(limit).await
    }

    /// Whether the job store takes writes.
    pub async fn health(&self) -> Result<()> {
        self.store.health().await
    }
}

/// Plans `events` in chunks of the store's `max_events_per_request` and
/// keeps, of each event that would become an entry, exactly what the entry
/// holds; the rest are reported skipped (positions in `events`).
pub fn plan(
    scope: &MemoryScope,
    session: &SessionId,
    events: &[Event],
    limits: &MemoryLimits,
) -> Result<(Vec<StoredEvent>, Vec<SkippedEvent>)> {
    let chunk = hippocamp_core::limits::to_usize(limits.max_events_per_request).max(1);
    let mut stored = Vec::with_capacity(events.len());
    let mut skipped = Vec::new();
    for (n, part) in events.chunks(chunk).enumerate() {
        let offset = n * chunk;
        let plan = plan_events(scope, session, part, limits)?;
        for mut s in plan.skipped {
            s.index += offset;
            skipped.push(s);
        }
        for p in plan.entries {
            if let Some(e) = StoredEvent::of_entry(&p.event_id, &p.prepared.entry) {
                stored.push(e);
            }
        }
    }
    Ok((stored, skipped))
}
