//! Runs that start by themselves: the outbox delivers events through
//! [`Consolidating`], which counts what each delivery added per user and,
//! once an app's `[consolidation.apps.NAME]` threshold is reached, starts
//! that app's run in the background, asked and run as the outbox
//! (`CallerKind::Outbox`) through the governed handle. Without an outbox
//! (the ephemeral profile) nothing counts, and runs start only when asked.

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
}

impl AutoRun {
    /// Checks the threshold and what the run asks for.
    pub fn validate(&self, app: &str) -> Result<()> {
        hippocamp_core::error::check_range(
            &format!("consolidation.apps.{app}.after_events"),
            self.after_events,
            1,
            1_000_000,
        )
    }
}

/// The outbox's memory target with automatic runs.
#[derive(Debug)]
pub struct Consolidating {
    inner: Arc<dyn MemoryStore>,
    runs: Arc<Consolidations>,
    apps: BTreeMap<String, AutoRun>,
    gate: hippocamp_governance::Gate,
    /// Events delivered per user since their last run started.
    counts: Mutex<HashMap<MemoryScope, u64>>,
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
            apps,
            gate,
            counts: Mutex::default(),
        }
    }

    /// Counts `added` events of `scope`; starts its app's run when they
    /// reach the threshold and no run of the user is under way (else the
    /// count stays, and the next delivery tries again).
    fn count(&self, scope: &MemoryScope, added: u64) {
        let Some(auto) = self.apps.get(scope.app().as_str()) else {
            return;
        };
        let due = {
            let mut counts = self.counts.lock();
            let n = counts.entry(scope.clone()).or_default();
            *n += added;
            *n >= auto.after_events
        };
        if !due {
            return;
        }
        let req = StartRun {
            mode: auto.mode,
            apply: auto.apply,
            origins: auto.origins.clone(),
        };
        let Ok(run) = self.runs.begin(scope, &req) else {
            return;
        };
        self.counts.lock().remove(scope);
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
            // A refusal is recorded on the run (and by the audit log).
            let _ = runs.execute_asked(&*inner, &scope, run, &req, asked).await;
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
