//! Consolidation runs: dedupe a scope's entries into derived facts with
//! lineage, as a reviewable and reversible record.
//!
//! A run reads the scope through the governed memory handle (so the
//! policy is asked for every read and write, with the caller's identity),
//! plans with [`hippocamp_memory::dedupe`], and writes each merge as one
//! derived entry whose `derived_from` names the merged entries. Nothing
//! is overwritten: the merged entries stay, `merged` while the fact lives
//! (their status is read from the scope), so a revert is the removal of
//! the run's facts, and an erasure of any merged entry erases the fact
//! with it (the stores follow lineage).
//!
//! What a run record holds: ids, counts and states, never content. A
//! change's `before` and `after` are read from the store when a run is
//! shown, so an erased entry is never in a run record, and a proposal is
//! merged again from its live sources when it is applied.
//!
//! Run records (the last [`ConsolidationLimits::max_runs_kept`] per
//! scope) are kept where the profile keeps its data ([`records`]): in
//! memory, in the data directory, or in PostgreSQL, so a restart or
//! another server sees the same runs, and a proposed run can be applied
//! after a restart. A run still `running` past its own bound
//! (`max_run_ms`) is read as `failed` with `timeout`: the process that
//! ran it stopped.

pub mod auto;
pub mod extract;
pub mod records;

use std::collections::HashMap;
use std::sync::Arc;

use hippocamp_core::{
    CallOptions, EntryId, Error, Field, IdempotencyKey, MemoryScope, Problem, Result, limit_table,
};
use hippocamp_memory::dedupe::{self, DedupeParams, MergeGroup};
use hippocamp_memory::lineage::{Derivation, Origin, Role, Source, Status};
use hippocamp_memory::{
    ListOrder, ListRequest, MemoryEntry, MemoryStore, NewEntry, Provenance, WriteOptions,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// The memory handle with run records that go with their user: a user's
/// erasure forgets their runs (ids and states, no content, but records of
/// a user who is gone).
#[derive(Debug)]
pub struct ForgetsRuns {
    inner: Arc<dyn MemoryStore>,
    runs: Arc<Consolidations>,
}

impl ForgetsRuns {
    /// `inner`, forgetting `runs`' records of each user it erases.
    pub fn new(inner: Arc<dyn MemoryStore>, runs: Arc<Consolidations>) -> Self {
        Self { inner, runs }
    }
}

#[async_trait::async_trait]
impl hippocamp_memory::MemoryLayer for ForgetsRuns {
    type Inner = dyn MemoryStore;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    async fn delete_user(
        &self,
        scope: &MemoryScope,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::Erasure> {
        let erased = MemoryStore::delete_user(&*self.inner, scope, opts).await?;
        self.runs.forget(scope).await?;
        Ok(erased)
    }
}

/// Asks the policy through `gate` whether `call`'s caller may act on
/// `scope`'s consolidation runs: `consolidate` to start, apply or revert
/// one, `list` or `get` to read them (audited); the options to go on
/// with. Each entry a run writes or removes is asked again as any write
/// or deletion, through the governed memory handle.
pub async fn ask(
    gate: &hippocamp_governance::Gate,
    scope: &MemoryScope,
    action: hippocamp_governance::Action,
    what: &'static str,
    call: &CallOptions,
) -> Result<CallOptions> {
    let r = hippocamp_governance::Resource::fixed("consolidation", what);
    let (_, call) = gate.ask(action, Some(scope), r, call).await?;
    Ok(call)
}

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Merge near-duplicates (no model).
    Dedupe,
    /// Extract facts from new turns with a model (`[consolidation.model]`).
    Extract,
    /// Dedupe, then extract.
    All,
}

/// Whether a run's changes are written when it ends or wait for apply.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ApplyMode {
    /// Written when the run ends.
    #[default]
    Auto,
    /// Proposed; written by `apply`.
    Review,
}

/// A request to start a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// What the run does.
    pub mode: Mode,
    /// When its changes are written (default `auto`).
    #[serde(default)]
    pub apply: ApplyMode,
    /// Which origins dedupe merges (default `note`, `fact` and `file`;
    /// conversation turns only when named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<Origin>,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Reading and planning.
    Running,
    /// Planned; waiting for apply (review).
    Proposed,
    /// Its changes were written.
    Applied,
    /// Its changes were undone.
    Reverted,
    /// It stopped with an error and changed nothing.
    Failed,
}

/// Where a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeState {
    /// Planned, not written.
    Proposed,
    /// Written.
    Applied,
    /// Not written: what it would change changed or was erased first.
    Skipped,
    /// Written, then undone.
    Reverted,
}

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeOp {
    /// Its sources merged into one fact.
    Merge,
    /// A new fact extracted from turns (its evidence).
    Add,
    /// A fact extracted from turns that replaces an earlier fact (the
    /// model said update; written as a new fact superseding the old).
    Update,
    /// A fact extracted from turns that supersedes an earlier fact.
    Supersede,
    /// The model found an existing fact already says it: nothing written.
    Noop,
}

/// An entry as a run shows it (read from the store when shown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntryView {
    /// The entry.
    pub id: EntryId,
    /// Its content now.
    pub content: String,
    /// Its origin.
    pub origin: Origin,
    /// Its status now.
    pub status: Status,
}

/// One change of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// What it does.
    pub op: ChangeOp,
    /// The entries it reads, with the revision each had when planned.
    pub sources: Vec<SourceRevision>,
    /// The derived entry it wrote (once applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact: Option<EntryId>,
    /// Where it is.
    pub state: ChangeState,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its sources as they are now (shown, never kept; an erased one is
    /// absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<EntryView>,
    /// What it wrote (or, proposed, would write) as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A source of a change with the revision it had when planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SourceRevision {
    /// The entry.
    pub entry: EntryId,
    /// Its revision when the run planned.
    pub revision: u32,
}

/// A consolidation run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Run {
    /// `run-` and 32 hex characters.
    pub id: String,
    /// What it does.
    pub mode: Mode,
    /// When its changes are written.
    pub apply: ApplyMode,
    /// Where it is.
    pub state: RunState,
    /// When it started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// When it last changed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// Entries it read.
    pub entries_read: u64,
    /// Model calls it made (0: dedupe uses none).
    pub model_calls: u64,
    /// Prompt tokens its model calls took, as the provider reported.
    #[serde(default)]
    pub input_tokens: u64,
    /// Tokens its model calls generated, as the provider reported.
    #[serde(default)]
    pub output_tokens: u64,
    /// New turns it showed the model.
    #[serde(default)]
    pub turns_read: u64,
    /// Its changes.
    pub changes: Vec<Change>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunError {
    /// The error's code (as HTTP error bodies carry it).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A page of a scope's runs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunPage {
    /// The runs (without their changes' views).
    pub runs: Vec<Run>,
}

limit_table! {
    /// The bounds of consolidation (`[consolidation.limits]`).
    pub struct ConsolidationLimits, prefix "consolidation." {
        /// Entries one run reads.
        max_entries_read: default 10_000, min 1, max 1_000_000,
            "entries one consolidation run reads (a larger scope fails the run)";
        /// Run records kept per user.
        max_runs_kept: default 50, min 1, max 10_000,
            "consolidation run records kept per user (where the profile keeps its data; the oldest go first)";
        /// Milliseconds one run may take.
        max_run_ms: default 600_000, min 1_000, max 86_400_000,
            "milliseconds one consolidation run may take, reading, planning, model calls and writes together (past it the run ends failed with timeout; revert removes what it wrote)";
    }
}

#[derive(Debug, Default)]
struct ScopeRuns {
    /// The run, apply or revert under way (one at a time per scope).
    busy: Option<String>,
}

/// Every scope's runs: the ones under way in this process, and the
/// records.
#[derive(Debug)]
pub struct Consolidations {
    scopes: Mutex<HashMap<MemoryScope, ScopeRuns>>,
    records: Arc<dyn records::RunRecords>,
    limits: ConsolidationLimits,
    /// The model `extract` asks, with its bounds.
    model: Option<(Arc<dyn hippocamp_models::Model>, extract::ExtractLimits)>,
}

/// Frees a scope's slot when an operation ends, however it ends.
struct Busy<'a> {
    owner: &'a Consolidations,
    scope: MemoryScope,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.owner.scopes.lock().get_mut(&self.scope) {
            s.busy = None;
        }
    }
}

impl Default for Consolidations {
    fn default() -> Self {
        Self::new(ConsolidationLimits::default())
    }
}

impl Consolidations {
    /// Runs bounded by `limits`, their records in memory.
    pub fn new(limits: ConsolidationLimits) -> Self {
        Self {
            scopes: Mutex::default(),
            records: Arc::new(records::InMemoryRunRecords::default()),
            limits,
            model: None,
        }
    }

    /// The same runs, their records kept in `records`.
    #[must_use]
    pub fn with_records(mut self, records: Arc<dyn records::RunRecords>) -> Self {
        self.records = records;
        self
    }

    /// Runs that can extract, asking `model` within `limits`.
    #[must_use]
    pub fn with_model(
        mut self,
        model: Arc<dyn hippocamp_models::Model>,
        limits: extract::ExtractLimits,
    ) -> Self {
        self.model = Some((model, limits));
        self
    }

    /// Takes the scope's slot for `id`, or says which run holds it.
    fn take(&self, scope: &MemoryScope, id: &str) -> Result<Busy<'_>> {
        let mut scopes = self.scopes.lock();
        let s = scopes.entry(scope.clone()).or_default();
        if let Some(running) = &s.busy {
            return Err(Error::ConsolidationRunning(running.clone()));
        }
        s.busy = Some(id.to_owned());
        Ok(Busy {
            owner: self,
            scope: scope.clone(),
        })
    }

    /// Writes `run`'s record (keeping the newest `max_runs_kept`).
    pub(crate) async fn save(&self, scope: &MemoryScope, run: &Run) -> Result<()> {
        self.records
            .put(scope, run, self.limits.max_runs_kept)
            .await
    }

    /// `run` as it is now: one still `running` past its own bound ended
    /// with the process that ran it.
    fn as_now(&self, mut run: Run) -> Run {
        let bound = run.started_at_ms.saturating_add(self.limits.max_run_ms);
        if run.state == RunState::Running && hippocamp_core::time::now_ms() > bound {
            run.state = RunState::Failed;
            run.error = Some(RunError {
                code: Error::Timeout(hippocamp_core::Stage::Consolidation)
                    .code()
                    .to_owned(),
                message: "the run did not end within consolidation.max_run_ms: the server \
                          running it stopped"
                    .into(),
            });
        }
        run
    }

    async fn load(&self, scope: &MemoryScope, id: &str) -> Result<Run> {
        self.records
            .list(scope)
            .await?
            .into_iter()
            .find(|r| r.id == id)
            .map(|r| self.as_now(r))
            .ok_or(Error::NotFound("consolidation run"))
    }

    /// Forgets every run record of `scope` (its user was erased).
    pub async fn forget(&self, scope: &MemoryScope) -> Result<()> {
        self.records.forget(scope).await
    }

    /// The scope's runs, newest first.
    pub async fn list(&self, scope: &MemoryScope) -> Result<RunPage> {
        Ok(RunPage {
            runs: self
                .records
                .list(scope)
                .await?
                .into_iter()
                .map(|r| self.as_now(r))
                .collect(),
        })
    }

    /// Checks a start request, registers its run as running (or says
    /// which run is) and records it: what `start` and a background start
    /// share.
    pub async fn begin(&self, scope: &MemoryScope, req: &StartRun) -> Result<Run> {
        let run = self.claim(scope, req)?;
        if let Err(e) = self.save(scope, &run).await {
            // Not recorded: the slot is free again.
            drop(Busy {
                owner: self,
                scope: scope.clone(),
            });
            return Err(e);
        }
        Ok(run)
    }

    /// Checks a start request and registers its run as running in this
    /// process (or says which run is), without recording it yet.
    pub(crate) fn claim(&self, scope: &MemoryScope, req: &StartRun) -> Result<Run> {
        if req.mode != Mode::Dedupe && self.model.is_none() {
            return Err(Error::Unsupported {
                operation: "consolidation mode extract (it needs [consolidation.model])",
                backend: "this server",
            });
        }
        if req.mode != Mode::Dedupe && req.apply == ApplyMode::Review {
            // A proposal of a model is text derived from turns: kept in a
            // run record it could outlive their erasure.
            return Err(Error::Unsupported {
                operation: "review of an extract run (extract runs apply as they end)",
                backend: "this server",
            });
        }
        let run = Run {
            id: format!(
                "run-{}",
                EntryId::random().to_string().trim_start_matches("mem-")
            ),
            mode: req.mode,
            apply: req.apply,
            state: RunState::Running,
            started_at_ms: hippocamp_core::time::now_ms(),
            finished_at_ms: None,
            entries_read: 0,
            model_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            turns_read: 0,
            changes: Vec::new(),
            error: None,
        };
        let mut scopes = self.scopes.lock();
        let s = scopes.entry(scope.clone()).or_default();
        if let Some(running) = &s.busy {
            return Err(Error::ConsolidationRunning(running.clone()));
        }
        s.busy = Some(run.id.clone());
        drop(scopes);
        Ok(run)
    }

    /// Runs a run that [`begin`](Self::begin) registered, to its end: plans,
    /// and with `auto` applies. A failure is recorded on the run (and
    /// returned).
    pub async fn execute(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        mut run: Run,
        req: &StartRun,
        call: &CallOptions,
    ) -> Result<Run> {
        let _busy = Busy {
            owner: self,
            scope: scope.clone(),
        };
        // The run's own bound, whatever its caller's: a step cut short
        // leaves the writes made before it, which revert finds by their
        // lineage.
        let bound = std::time::Duration::from_millis(self.limits.max_run_ms);
        let outcome =
            tokio::time::timeout(bound, self.run_to_end(memory, scope, &mut run, req, call))
                .await
                .unwrap_or(Err(Error::Timeout(hippocamp_core::Stage::Consolidation)));
        match outcome {
            Ok(()) => {
                run.state = match run.apply {
                    ApplyMode::Auto => RunState::Applied,
                    ApplyMode::Review => RunState::Proposed,
                };
            }
            Err(e) => {
                run.state = RunState::Failed;
                run.error = Some(RunError {
                    code: e.code().to_owned(),
                    message: e.to_string(),
                });
            }
        }
        run.finished_at_ms = Some(hippocamp_core::time::now_ms());
        self.save(scope, &run).await?;
        Ok(run)
    }

    /// [`execute`](Self::execute) once the policy was asked: a refusal
    /// (`asked` is its error) ends the run `failed` with it, nothing read.
    pub async fn execute_asked(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        mut run: Run,
        req: &StartRun,
        asked: Result<CallOptions>,
    ) -> Result<Run> {
        match asked {
            Ok(call) => self.execute(memory, scope, run, req, &call).await,
            Err(e) => {
                let _busy = Busy {
                    owner: self,
                    scope: scope.clone(),
                };
                run.state = RunState::Failed;
                run.error = Some(RunError {
                    code: e.code().to_owned(),
                    message: e.to_string(),
                });
                run.finished_at_ms = Some(hippocamp_core::time::now_ms());
                self.save(scope, &run).await?;
                Ok(run)
            }
        }
    }

    /// Starts a run and waits for it.
    pub async fn start(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        req: &StartRun,
        call: &CallOptions,
    ) -> Result<Run> {
        let run = self.begin(scope, req).await?;
        self.execute(memory, scope, run, req, call).await
    }

    /// Reads the scope once (bounded), plans (dedupe; the model's
    /// proposals, every reply checked), and with `auto` writes: nothing
    /// is written before every plan is made and checked.
    async fn run_to_end(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        run: &mut Run,
        req: &StartRun,
        call: &CallOptions,
    ) -> Result<()> {
        let entries = read_all(memory, scope, self.limits.max_entries_read, call).await?;
        run.entries_read = entries.len() as u64;
        if matches!(req.mode, Mode::Dedupe | Mode::All) {
            let current: Vec<Arc<MemoryEntry>> = entries
                .iter()
                .filter(|e| e.status == Status::Current)
                .cloned()
                .collect();
            let mut params = DedupeParams::default();
            if !req.origins.is_empty() {
                params.origins.clone_from(&req.origins);
            }
            run.changes = dedupe::plan(&current, &params)
                .into_iter()
                .map(|g| Change {
                    op: ChangeOp::Merge,
                    sources: g
                        .members
                        .iter()
                        .map(|m| SourceRevision {
                            entry: m.id,
                            revision: m.revision,
                        })
                        .collect(),
                    fact: None,
                    state: ChangeState::Proposed,
                    reason: None,
                    before: Vec::new(),
                    after: None,
                })
                .collect();
        }
        let extraction = match (&self.model, req.mode) {
            (Some((model, limits)), Mode::Extract | Mode::All) => {
                let deadline = call.deadline(hippocamp_core::deadline::DEFAULT_TIMEOUT);
                let mut x = extract::Extraction::default();
                let planned =
                    extract::plan(model.as_ref(), &entries, limits, deadline, &mut x).await;
                run.model_calls = x.calls;
                (run.input_tokens, run.output_tokens) = x.tokens;
                run.turns_read = x.turns;
                planned?;
                Some(x)
            }
            _ => None,
        };
        if run.apply == ApplyMode::Review {
            return Ok(());
        }
        self.write_changes(memory, scope, run, call).await?;
        if let Some(x) = extraction {
            let times: HashMap<EntryId, u64> =
                entries.iter().map(|e| (e.id, e.timestamp_ms)).collect();
            for p in x.proposals {
                let change = write_proposal(memory, scope, run, p, &times, call).await?;
                run.changes.push(change);
            }
        }
        Ok(())
    }

    /// Writes every proposed change: each is merged again from its sources
    /// as they are now, and skipped (with the reason) when one changed,
    /// is no longer current, or was erased since the run planned.
    async fn write_changes(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        run: &mut Run,
        call: &CallOptions,
    ) -> Result<()> {
        for (n, change) in run.changes.iter_mut().enumerate() {
            if change.state != ChangeState::Proposed {
                continue;
            }
            let group = match live_group(memory, scope, &change.sources, call).await? {
                Ok(g) => g,
                Err(reason) => {
                    change.state = ChangeState::Skipped;
                    change.reason = Some(reason);
                    continue;
                }
            };
            let key = IdempotencyKey::new(format!("consolidation:{}:{n}", run.id))?;
            let fact = NewEntry {
                content: group.content,
                metadata: group.metadata,
                provenance: Provenance {
                    timestamp_ms: Some(group.timestamp_ms),
                    ..Provenance::default()
                },
                idempotency_key: Some(key),
                fact_key: group.fact_key,
                derivation: Some(Derivation {
                    sources: change
                        .sources
                        .iter()
                        .map(|s| Source {
                            entry: s.entry,
                            role: Role::Merged,
                        })
                        .collect(),
                    run: Some(run.id.clone()),
                }),
                file: None,
            };
            match memory
                .add_entry(scope, fact, &WriteOptions::new(*call))
                .await
            {
                Ok(out) => {
                    change.fact = Some(out.entry.id);
                    change.state = ChangeState::Applied;
                }
                // Erased between the look and the write: nothing derived.
                Err(Error::SourceGone(id)) => {
                    change.state = ChangeState::Skipped;
                    change.reason = Some(format!("{id} was erased"));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes a proposed run's changes.
    pub async fn apply(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        id: &str,
        call: &CallOptions,
    ) -> Result<Run> {
        let _busy = self.take(scope, id)?;
        let mut run = self.load(scope, id).await?;
        if run.state != RunState::Proposed {
            return Err(Error::RunConflict(format!(
                "run {id} is {}, only a proposed run is applied",
                state_name(run.state)
            )));
        }
        self.write_changes(memory, scope, &mut run, call).await?;
        run.state = RunState::Applied;
        run.finished_at_ms = Some(hippocamp_core::time::now_ms());
        self.save(scope, &run).await?;
        Ok(run)
    }

    /// Undoes an applied run, or what a run that failed midway wrote:
    /// removes the facts it wrote, so what they merged is current again.
    /// Refused, with nothing changed, when a fact it wrote was corrected,
    /// erased, or built on by a later run.
    ///
    /// The run's facts are found by their lineage (each names its run),
    /// so a run this process has no record of (written by another
    /// server, or before a restart) is reverted too.
    pub async fn revert(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        id: &str,
        call: &CallOptions,
    ) -> Result<Run> {
        let _busy = self.take(scope, id)?;
        let record = match self.load(scope, id).await {
            Ok(r) => Some(r),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        if let Some(run) = &record
            && !matches!(run.state, RunState::Applied | RunState::Failed)
        {
            return Err(Error::RunConflict(format!(
                "run {id} is {}, only an applied (or failed) run is reverted",
                state_name(run.state)
            )));
        }
        let written = facts_of(memory, scope, id, self.limits.max_entries_read, call).await?;
        let facts: Vec<EntryId> = match &record {
            Some(run) => {
                let applied: Vec<EntryId> = run
                    .changes
                    .iter()
                    .filter(|c| c.state == ChangeState::Applied)
                    .filter_map(|c| c.fact)
                    .collect();
                if let Some(gone) = applied.iter().find(|f| !written.contains(f)) {
                    return Err(Error::RunConflict(format!(
                        "fact {gone} of run {id} was erased since"
                    )));
                }
                applied
            }
            None if written.is_empty() => return Err(Error::NotFound("consolidation run")),
            None => written,
        };
        let mut run = record.unwrap_or_else(|| Run {
            id: id.to_owned(),
            mode: Mode::Dedupe,
            apply: ApplyMode::Auto,
            state: RunState::Applied,
            started_at_ms: hippocamp_core::time::now_ms(),
            finished_at_ms: None,
            entries_read: 0,
            model_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            turns_read: 0,
            changes: facts
                .iter()
                .map(|f| Change {
                    op: ChangeOp::Merge,
                    sources: Vec::new(),
                    fact: Some(*f),
                    state: ChangeState::Applied,
                    reason: None,
                    before: Vec::new(),
                    after: None,
                })
                .collect(),
            error: None,
        });
        for fact in &facts {
            let entry = match memory.get_entry(scope, fact, call).await {
                Ok(e) => e,
                Err(Error::NotFound(_)) => {
                    return Err(Error::RunConflict(format!(
                        "fact {fact} of run {id} was erased since"
                    )));
                }
                Err(e) => return Err(e),
            };
            if entry.revision > 1 {
                return Err(Error::RunConflict(format!(
                    "fact {fact} of run {id} was corrected since"
                )));
            }
            if !memory
                .entry_lineage(scope, fact, call)
                .await?
                .derived
                .is_empty()
            {
                return Err(Error::RunConflict(format!(
                    "a later run derived from fact {fact} of run {id}"
                )));
            }
        }
        for fact in &facts {
            memory.delete_entry(scope, fact, call).await?;
        }
        for c in &mut run.changes {
            if c.state == ChangeState::Applied {
                c.state = ChangeState::Reverted;
            }
        }
        run.state = RunState::Reverted;
        run.finished_at_ms = Some(hippocamp_core::time::now_ms());
        self.save(scope, &run).await?;
        Ok(run)
    }

    /// A run with each change's `before` and `after` read from the store
    /// now (so nothing erased is shown).
    pub async fn show(
        &self,
        memory: &dyn MemoryStore,
        scope: &MemoryScope,
        id: &str,
        call: &CallOptions,
    ) -> Result<Run> {
        let mut run = self.load(scope, id).await?;
        for change in &mut run.changes {
            let mut live = Vec::new();
            for s in &change.sources {
                if let Some(e) = found(memory.get_entry(scope, &s.entry, call).await)? {
                    change.before.push(EntryView {
                        id: e.id,
                        content: e.content.clone(),
                        origin: e.origin,
                        status: e.status,
                    });
                    live.push(Arc::new(e));
                }
            }
            change.after = match change.fact {
                Some(f) => found(memory.get_entry(scope, &f, call).await)?.map(|e| e.content),
                None if change.state == ChangeState::Proposed
                    && live.len() == change.sources.len() =>
                {
                    Some(dedupe::merge(live).content)
                }
                None => None,
            };
        }
        Ok(run)
    }
}

/// Writes one checked proposal of the model as a derived fact: its
/// evidence turns as sources, and the fact it replaces as superseded.
async fn write_proposal(
    memory: &dyn MemoryStore,
    scope: &MemoryScope,
    run: &Run,
    p: extract::Proposal,
    times: &HashMap<EntryId, u64>,
    call: &CallOptions,
) -> Result<Change> {
    let mut sources: Vec<SourceRevision> = p
        .evidence
        .iter()
        .chain(&p.target)
        .map(|&entry| SourceRevision { entry, revision: 1 })
        .collect();
    sources.dedup_by_key(|s| s.entry);
    let mut change = Change {
        op: p.op,
        sources,
        fact: None,
        state: ChangeState::Proposed,
        reason: None,
        before: Vec::new(),
        after: None,
    };
    if p.op == ChangeOp::Noop {
        change.state = ChangeState::Skipped;
        change.reason = Some("an existing fact already says it".into());
        return Ok(change);
    }
    let mut derived: Vec<Source> = p
        .evidence
        .iter()
        .map(|&entry| Source {
            entry,
            role: Role::Evidence,
        })
        .collect();
    if let Some(t) = p.target.filter(|t| !p.evidence.contains(t)) {
        derived.push(Source {
            entry: t,
            role: Role::Superseded,
        });
    }
    let at = p
        .evidence
        .iter()
        .filter_map(|e| times.get(e))
        .max()
        .copied();
    let key = IdempotencyKey::new(format!("consolidation:{}:x{}", run.id, run.changes.len()))?;
    let fact = NewEntry {
        content: p.content,
        provenance: Provenance {
            timestamp_ms: at,
            ..Provenance::default()
        },
        idempotency_key: Some(key),
        fact_key: p.fact_key,
        derivation: Some(Derivation {
            sources: derived,
            run: Some(run.id.clone()),
        }),
        ..NewEntry::default()
    };
    match memory
        .add_entry(scope, fact, &WriteOptions::new(*call))
        .await
    {
        Ok(out) => {
            change.fact = Some(out.entry.id);
            change.state = ChangeState::Applied;
        }
        Err(Error::SourceGone(id)) => {
            change.state = ChangeState::Skipped;
            change.reason = Some(format!("{id} was erased"));
        }
        Err(e) => return Err(e),
    }
    Ok(change)
}

fn state_name(s: RunState) -> &'static str {
    match s {
        RunState::Running => "running",
        RunState::Proposed => "proposed",
        RunState::Applied => "applied",
        RunState::Reverted => "reverted",
        RunState::Failed => "failed",
    }
}

fn found(r: Result<MemoryEntry>) -> Result<Option<MemoryEntry>> {
    match r {
        Ok(e) => Ok(Some(e)),
        Err(Error::NotFound(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The sources as they are now, merged again; or why the change cannot be
/// written (one erased, corrected or no longer current).
async fn live_group(
    memory: &dyn MemoryStore,
    scope: &MemoryScope,
    sources: &[SourceRevision],
    call: &CallOptions,
) -> Result<std::result::Result<MergeGroup, String>> {
    let mut members = Vec::with_capacity(sources.len());
    for s in sources {
        let Some(e) = found(memory.get_entry(scope, &s.entry, call).await)? else {
            return Ok(Err(format!("{} was erased", s.entry)));
        };
        if e.revision != s.revision {
            return Ok(Err(format!("{} was corrected", s.entry)));
        }
        if e.status != Status::Current {
            return Ok(Err(format!("{} is no longer current", s.entry)));
        }
        members.push(Arc::new(e));
    }
    Ok(Ok(dedupe::merge(members)))
}

/// The live entries of `scope` that run `id` derived.
async fn facts_of(
    memory: &dyn MemoryStore,
    scope: &MemoryScope,
    id: &str,
    max: u64,
    call: &CallOptions,
) -> Result<Vec<EntryId>> {
    Ok(read_all(memory, scope, max, call)
        .await?
        .into_iter()
        .filter(|e| e.consolidation.as_deref() == Some(id))
        .map(|e| e.id)
        .collect())
}

/// The scope's live entries, oldest first, at most `max`.
async fn read_all(
    memory: &dyn MemoryStore,
    scope: &MemoryScope,
    max: u64,
    call: &CallOptions,
) -> Result<Vec<Arc<MemoryEntry>>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let req = ListRequest {
            order: Some(ListOrder::Oldest),
            cursor: cursor.take(),
            ..ListRequest::default()
        };
        let page = memory.list_entries(scope, &req, call).await?;
        for e in page.entries {
            if out.len() as u64 >= max {
                return Err(Error::invalid(
                    Field::Consolidation,
                    Problem::TooMany {
                        count: hippocamp_core::limits::to_usize(max) + 1,
                        max: hippocamp_core::limits::to_usize(max),
                    },
                ));
            }
            out.push(Arc::new(e));
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
}
