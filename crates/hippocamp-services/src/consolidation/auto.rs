//! Runs that start by themselves: the outbox delivers events through
//! [`Consolidating`], which counts what each delivery added per user and,
//! once an app's `[consolidation.apps.NAME]` threshold is reached (or,
//! with `idle_ms`, once a user with new events has had no delivery for
//! that long), starts that app's run in the background, asked and run as
//! the outbox (`CallerKind::Outbox`) through the governed handle. Without
//! an outbox (the ephemeral profile) nothing counts, and runs start only
//! when asked.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Caller, CallerKind, MemoryScope, Result, SessionId};
use hippocamp_memory::lineage::Origin;
use hippocamp_memory::{Event, IngestReport, MemoryLayer, MemoryStore, WriteOptions};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::{ApplyMode, Consolidations, Mode, StartRun};

/// One app's automatic runs (`[consolidation.apps.NAME]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoRun {
    /// What the run does.
    pub mode: Mode,
    /// When its changes are written (default `auto`).
    #[serde(default)]
    pub apply: ApplyMode,
    /// Events the outbox delivered to a user since their last run that
    /// start the next one (1..=1,000,000).
    pub after_events: u64,
    /// Origins dedupe merges (default: notes, facts and files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<Origin>,
    /// Also start a run when a user with events delivered since their
    /// last run has had no delivery for this long (ms, 1,000..=
    /// 604,800,000); without it, only `after_events` starts runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
}

impl AutoRun {
    /// Checks the threshold and what the run asks for.
    pub fn validate(&self, app: &str) -> Result<()> {
        hippocamp_core::error::check_range(
            &format!("consolidation.apps.{app}.after_events"),
            self.after_events,
            1,
            1_000_000,
        )?;
        match self.idle_ms {
            Some(ms) => hippocamp_core::error::check_range(
                &format!("consolidation.apps.{app}.idle_ms"),
                ms,
                1_000,
                604_800_000,
            ),
            None => Ok(()),
        }
    }
}

/// The outbox's memory target with automatic runs.
#[derive(Debug, Clone)]
pub struct Consolidating {
    inner: Arc<dyn MemoryStore>,
    runs: Arc<Consolidations>,
    apps: Arc<BTreeMap<String, AutoRun>>,
    gate: hippocamp_governance::Gate,
    /// Events delivered per user since their last run started, and the
    /// number of the user's last delivery (what an idle timer compares).
    counts: Arc<Mutex<HashMap<MemoryScope, (u64, u64)>>>,
}

impl Consolidating {
    /// Counts what `inner` ingests and starts `apps`' runs in `runs`,
    /// asking `gate` first.
    pub fn new(
        inner: Arc<dyn MemoryStore>,
        runs: Arc<Consolidations>,
        apps: BTreeMap<String, AutoRun>,
        gate: hippocamp_governance::Gate,
    ) -> Self {
        Self {
            inner,
            runs,
            apps: Arc::new(apps),
            gate,
            counts: Arc::default(),
        }
    }

    /// Counts `added` events of `scope`; starts its app's run when they
    /// reach the threshold and no run of the user is under way (else the
    /// count stays, and the next delivery tries again).
    fn count(&self, scope: &MemoryScope, added: u64) {
        let Some(auto) = self.apps.get(scope.app().as_str()) else {
            return;
        };
        let (due, delivery) = {
            let mut counts = self.counts.lock();
            let (n, delivery) = counts.entry(scope.clone()).or_default();
            *n += added;
            *delivery += 1;
            (*n >= auto.after_events, *delivery)
        };
        if due {
            self.start(scope, auto);
        } else if let Some(ms) = auto.idle_ms {
            // Idle for `ms` after this delivery: no later one came.
            let this = self.clone();
            let scope = scope.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                let idle = this
                    .counts
                    .lock()
                    .get(&scope)
                    .is_some_and(|&(n, d)| n > 0 && d == delivery);
                if idle && let Some(auto) = this.apps.get(scope.app().as_str()) {
                    this.start(&scope, auto);
                }
            });
        }
    }

    /// Starts `auto`'s run for `scope` unless one is under way (then the
    /// count stays, and a later delivery tries again).
    fn start(&self, scope: &MemoryScope, auto: &AutoRun) {
        let req = StartRun {
            mode: auto.mode,
            apply: auto.apply,
            origins: auto.origins.clone(),
        };
        let Ok(run) = self.runs.claim(scope, &req) else {
            return;
        };
        // Counting starts over; the delivery number stays, so an idle
        // timer set before the run never mistakes a later delivery for
        // its own.
        if let Some(c) = self.counts.lock().get_mut(scope) {
            c.0 = 0;
        }
        let (inner, runs, gate, scope) = (
            Arc::clone(&self.inner),
            Arc::clone(&self.runs),
            self.gate.clone(),
            scope.clone(),
        );
        tokio::spawn(async move {
            let call = CallOptions::timeout(std::time::Duration::from_mins(1))
                .unwrap_or_default()
                .on_behalf_of(Caller::of(CallerKind::Outbox));
            let asked = super::ask(
                &gate,
                &scope,
                hippocamp_governance::Action::Consolidate,
                "an automatic run",
                &call,
            )
            .await;
            // Recorded as running, then as it ended; a refusal is recorded
            // on the run (and by the audit log). A record that cannot be
            // written is logged: the run's writes do not depend on it.
            if let Err(e) = runs.save(&scope, &run).await {
                tracing::warn!(error = %e, "an automatic run's record was not written");
            }
            if let Err(e) = runs.execute_asked(&*inner, &scope, run, &req, asked).await {
                tracing::warn!(error = %e, "an automatic run's record was not written");
            }
        });
    }
}

#[async_trait]
impl MemoryLayer for Consolidating {
    type Inner = dyn MemoryStore;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let report = MemoryStore::add_events(&*self.inner, scope, session, events, opts).await?;
        if !report.added.is_empty() {
            self.count(scope, report.added.len() as u64);
        }
        Ok(report)
    }
}
