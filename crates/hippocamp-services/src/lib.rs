//! The configuration of hippocamp and the one place that turns it into
//! services: the memory store, the ingestion outbox, the artifact store
//! and the tokens of a profile, each store behind its router and its
//! reply-verifying wrapper.
//!
//! The server, the command line and the evaluation harness all open
//! their stores here, so a data directory is always opened
//! with the limits its configuration file states, and no caller can get a
//! store that skips a wrapper. Every store handed out is, outermost,
//! behind the governance gate ([`PolicyChecked`] for memory,
//! [`GovernedSessions`], [`GovernedArtifacts`]): the policy of `[policy]`
//! is asked before every operation on data, by every caller (server, CLI,
//! outbox admission and delivery, runner, MCP). No raw store leaves this
//! crate; `artifacts repair` runs inside it ([`Services::repair_artifacts`]).
//!
//! - [`config`]: the TOML configuration (unknown keys refused, every value
//!   range-checked at load).
//! - [`layout`]: where each store lives in a data directory.
//! - [`auth`]: tokens, grants and permissions.
//! - [`embedder`]: the embedder a configuration names.
//! - [`reranker`]: the reranking stage a configuration names (a layer over
//!   the router, under the governance gate; off by default).
//! - [`file_index`]: the artifact layer (under the governance gate) that
//!   indexes the memory tool's files in memory and erases the index with
//!   them, whenever memory is on.
//!
//! | profile | memory | outbox | artifacts | sessions |
//! |---|---|---|---|---|
//! | `disabled` | off (`MemoryDisabled`) | off | filesystem, data directory | redb, data directory |
//! | `ephemeral` | in memory, shared router | off (`OutboxUnavailable`) | in memory | in memory |
//! | `durable` | redb, exact-scope router | redb, processor delivering into memory | filesystem, data directory | redb, data directory |
//! | `distributed` | PostgreSQL + pgvector, exact-scope router | PostgreSQL, a processor in every server | catalog in PostgreSQL, contents on an S3-compatible store | PostgreSQL |
//!
//! In the distributed profile tokens, consent and the audit log are in
//! PostgreSQL too ([`distributed`]), so servers keep no local state but
//! caches.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod config;
pub mod consolidation;
pub mod distributed;
pub mod embedder;
pub mod export;
pub mod file_index;
pub mod layout;
pub mod reranker;
pub mod restore;

use std::sync::Arc;

use hippocamp_artifacts::{ArtifactStore, InMemoryArtifacts};
use hippocamp_artifacts_fs::FsArtifacts;
use hippocamp_core::{CallOptions, Caller, CallerKind, Clock, Error, MemoryScope, Result};
use hippocamp_governance::{
    AuditEvent, AuditLog, Consent, ConsentStore, Gate, GovernedArtifacts, GovernedSessions,
    InMemoryAudit, InMemoryConsents, NewConsent, Policy, PolicyChecked, RedbAudit, RedbConsents,
    StaticPolicy,
};
use hippocamp_memory::{InMemoryStore, MemoryStore, ScopeChecked};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_outbox::{Erasing, Outbox, Processor, Target, TargetName};
use hippocamp_outbox_redb::RedbJobStore;
use hippocamp_routed::{RoutedArtifacts, RoutedMemory};
use hippocamp_router::{RouterConfig, Strategy};
use hippocamp_sessions::{InMemorySessions, SessionStore};
use hippocamp_sessions_redb::RedbSessions;
use parking_lot::Mutex;
use serde::Serialize;

pub use config::{Config, ConfigError, HttpConfig, Profile, SweeperConfig};
pub use embedder::{Connected, EmbedderConfig, connect, connect_embedder};

use crate::auth::TokenStore;
use crate::distributed::Remote;

/// The name under which the durable profile registers its memory store
/// with the outbox.
pub const MEMORY_TARGET: &str = "memory";

/// What a running server serves. Each store is, outermost, behind the
/// governance gate ([`PolicyChecked`], [`GovernedSessions`],
/// [`GovernedArtifacts`]), then its reply check
/// ([`hippocamp_memory::ScopeChecked`],
/// [`hippocamp_artifacts::ScopeChecked`]: no holder of these handles can
/// see a record of a scope it did not ask for) and its router.
#[derive(Debug, Clone)]
pub struct Services {
    /// The profile they were built for.
    pub profile: Profile,
    /// Memory (policy, reply check, erasure notices to the outbox,
    /// router, store); `None` in the disabled profile.
    pub memory: Option<Arc<dyn MemoryStore>>,
    /// The ingestion outbox (durable profile only).
    pub outbox: Option<Outbox>,
    /// Artifacts (the policy's artifact terms, the index of memory files
    /// in memory, reply check, router, store).
    pub artifacts: Arc<dyn ArtifactStore>,
    /// The same store with its sweep of expired versions.
    governed_artifacts: Arc<GovernedArtifacts<Arc<dyn ArtifactStore>>>,
    /// The agent runner's conversation sessions (behind the policy).
    pub sessions: Arc<dyn SessionStore>,
    /// Tokens.
    pub tokens: Arc<TokenStore>,
    /// PostgreSQL and the object store, in the distributed profile
    /// (readiness pings both).
    remote: Option<Remote>,
    /// The policy, its consent records and its clock.
    pub governance: Governance,
    processor: Arc<Mutex<Option<Processor>>>,
    processor_options: hippocamp_outbox::ProcessorOptions,
    sweeper: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
    sweeper_options: SweeperConfig,
    /// Consolidation runs of this process.
    pub consolidations: Arc<consolidation::Consolidations>,
    /// Restores running at once (`restore.max_concurrent`).
    pub(crate) restores: Arc<tokio::sync::Semaphore>,
    pub(crate) restore_limits: restore::RestoreLimits,
    /// The embedder's background probe, when it has one (an endpoint
    /// with a configured dimension).
    embedder_probe: Option<Arc<hippocamp_embed::probed::Probed>>,
}

/// The outbox's memory target: `delivered`, counting deliveries for the
/// automatic runs of `[consolidation.apps]` when there are any.
fn auto_runs(
    config: &Config,
    delivered: Arc<dyn MemoryStore>,
    runs: &Arc<consolidation::Consolidations>,
    governance: &Governance,
) -> Arc<dyn MemoryStore> {
    if config.consolidation.apps.is_empty() {
        return delivered;
    }
    Arc::new(consolidation::auto::Consolidating::new(
        delivered,
        Arc::clone(runs),
        config.consolidation.apps.clone(),
        governance.gate(hippocamp_core::deadline::DEFAULT_TIMEOUT),
    ))
}

/// The consolidation runs `config` describes: with its model, if any.
/// The consolidation runs of `config`, their records where the profile
/// keeps its data: in memory (ephemeral, and disabled, which has no
/// memory to consolidate), in the data directory (durable), or in
/// PostgreSQL (distributed). Blocking.
fn consolidations(
    full: Valid<'_>,
    remote: Option<&Remote>,
) -> Result<consolidation::Consolidations> {
    use consolidation::records::{InMemoryRunRecords, PgRunRecords, RedbRunRecords, RunRecords};
    let config = &full.consolidation;
    let records: Arc<dyn RunRecords> = match full.profile {
        Profile::Ephemeral | Profile::Disabled => Arc::new(InMemoryRunRecords::default()),
        Profile::Durable => Arc::new(RedbRunRecords::open(&layout::consolidation_dir(
            &full.data_dir,
        )?)?),
        Profile::Distributed => Arc::new(PgRunRecords(hippocamp_postgres::PgRuns::new(
            remote.ok_or_else(needs_remote)?.db.clone(),
        ))),
    };
    let runs = consolidation::Consolidations::new(config.limits.clone()).with_records(records);
    Ok(match &config.model {
        Some(m) => runs.with_model(
            hippocamp_models::connect(m.clone())?,
            config.extract.clone(),
        ),
        None => runs,
    })
}

/// The governance every memory path goes through.
#[derive(Debug, Clone)]
pub struct Governance {
    /// The policy (the static policy of `[policy]`).
    pub policy: Arc<dyn Policy>,
    /// Consent records (durable in the data directory, except ephemeral).
    pub consents: Arc<dyn ConsentStore>,
    /// The clock the stores and the policy read.
    pub clock: Arc<dyn Clock>,
    /// The audit log (durable in the data directory, except ephemeral).
    pub audit: Arc<dyn AuditLog>,
    /// How long audit records are kept.
    pub audit_retention_ms: u64,
}

impl Governance {
    /// `store` behind this policy's gate, audited, its user erasures
    /// forgetting `runs`' records: the memory handle every surface gets.
    fn memory(
        &self,
        store: Arc<dyn MemoryStore>,
        runs: &Arc<consolidation::Consolidations>,
    ) -> Arc<dyn MemoryStore> {
        let checked = PolicyChecked::new(store, Arc::clone(&self.policy), Arc::clone(&self.clock))
            .with_audit(Arc::clone(&self.audit));
        Arc::new(consolidation::ForgetsRuns::new(
            Arc::new(checked),
            Arc::clone(runs),
        ))
    }

    /// The gate every governed handle asks through: this policy, clock and
    /// audit log, starting a call without a deadline at `default_timeout`.
    pub fn gate(&self, default_timeout: std::time::Duration) -> Gate {
        Gate::new(
            Arc::clone(&self.policy),
            Arc::clone(&self.clock),
            default_timeout,
        )
        .with_audit(Arc::clone(&self.audit))
    }

    /// Appends a record now; a failure is logged (what it records happened).
    async fn record(
        &self,
        event: AuditEvent,
        target: &'static str,
        scope: &MemoryScope,
        caller: Caller,
        outcome: &Result<impl Sized>,
        count: Option<u64>,
    ) {
        let r = hippocamp_governance::NewAuditRecord {
            event,
            target,
            scope: Some(scope.clone()),
            caller,
            outcome: hippocamp_governance::NewAuditRecord::outcome_of(outcome),
            count,
        };
        self.audit.record(r, self.clock.now_ms()).await;
    }
}

/// What erasing a scope's artifacts removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ArtifactsErased {
    /// Names removed.
    pub names: u64,
    /// Versions removed.
    pub versions: u64,
}

/// What withdrawing a consent did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Withdrawal {
    /// The consent withdrawn (`None`: there was none).
    pub withdrawn: Option<Consent>,
    /// Queued ingestion jobs of the scope cancelled.
    pub cancelled_jobs: u64,
    /// The erasure, when the policy erases on withdrawal.
    pub erased: Option<hippocamp_memory::Erasure>,
    /// The artifacts erased, when the policy erases on withdrawal and the
    /// consent covered artifacts: the user's own and those of each of
    /// their agent sessions.
    pub artifacts: Option<ArtifactsErased>,
    /// Why the erasure the policy asks for on withdrawal was refused
    /// (`retention` or `legal_hold`: the data is kept, nothing of it
    /// erased); the withdrawal itself took effect (ingestion stops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub erasure_refused: Option<&'static str>,
}

/// Why a store kept what an erasure asked for: `retention` or
/// `legal_hold`, or `None` for any other failure.
fn kept_by(e: &Error) -> Option<&'static str> {
    matches!(e, Error::Retention { .. } | Error::LegalHold).then(|| e.code())
}

/// The memory side of a profile: the store callers use and its outbox.
#[derive(Debug, Clone)]
pub struct MemoryServices {
    /// The store (reply check, erasure notices, router, store).
    pub memory: Arc<dyn MemoryStore>,
    /// Consolidation runs over it (started by the outbox's deliveries for
    /// the apps `[consolidation.apps]` names).
    pub consolidations: Arc<consolidation::Consolidations>,
    /// The outbox in front of it (durable profile).
    pub outbox: Option<Outbox>,
    profile: Profile,
    /// The governance the store asks through, for the sessions opened
    /// beside it.
    gate: Gate,
}

impl MemoryServices {
    /// Asks the policy whether `call`'s caller may act on `scope`'s
    /// consolidation runs (see [`consolidation::ask`]).
    pub async fn ask_consolidate(
        &self,
        scope: &MemoryScope,
        action: hippocamp_governance::Action,
        what: &'static str,
        call: &CallOptions,
    ) -> Result<CallOptions> {
        consolidation::ask(&self.gate, scope, action, what, call).await
    }

    /// The outbox's jobs, through the gate.
    pub fn jobs(&self) -> Result<Jobs<'_>> {
        Ok(Jobs {
            gate: self.gate.clone(),
            outbox: self.outbox()?,
        })
    }

    /// The agent session store of the same data directory, behind the
    /// same gate (the command line's erasures take a user's sessions with
    /// their memory). Blocking.
    pub fn sessions(&self, config: &Config) -> Result<Arc<dyn SessionStore>> {
        let inner = Services::sessions_on(Valid::check(config)?, None)?;
        Ok(Arc::new(GovernedSessions::new(inner, self.gate.clone())))
    }

    /// The outbox, or `OutboxUnavailable` (as [`Services::outbox`]).
    pub fn outbox(&self) -> Result<&Outbox> {
        self.outbox.as_ref().ok_or_else(|| no_outbox(self.profile))
    }
}

/// The queued jobs of an outbox behind the gate: a job belongs to its
/// scope like the memory it will write, so its status is asked `get` and
/// its cancellation or deletion `delete` (what it would have written is
/// given up).
#[derive(Debug)]
pub struct Jobs<'a> {
    gate: Gate,
    outbox: &'a Outbox,
}

impl Jobs<'_> {
    async fn ask(
        &self,
        action: hippocamp_governance::Action,
        scope: &MemoryScope,
        id: &hippocamp_outbox::JobId,
        call: &CallOptions,
    ) -> Result<()> {
        let r = hippocamp_governance::Resource::new("job", id.to_string());
        self.gate.ask(action, Some(scope), r, call).await.map(drop)
    }

    /// A job's status.
    pub async fn status(
        &self,
        scope: &MemoryScope,
        id: &hippocamp_outbox::JobId,
        call: &CallOptions,
    ) -> Result<hippocamp_outbox::JobStatus> {
        self.ask(hippocamp_governance::Action::Get, scope, id, call)
            .await?;
        self.outbox.job(scope, id).await
    }

    /// Cancels a job (a finished one is left as it is).
    pub async fn cancel(
        &self,
        scope: &MemoryScope,
        id: &hippocamp_outbox::JobId,
        call: &CallOptions,
    ) -> Result<hippocamp_outbox::JobStatus> {
        self.ask(hippocamp_governance::Action::Delete, scope, id, call)
            .await?;
        self.outbox.cancel(scope, id).await
    }

    /// Deletes a finished job's status.
    pub async fn delete(
        &self,
        scope: &MemoryScope,
        id: &hippocamp_outbox::JobId,
        call: &CallOptions,
    ) -> Result<()> {
        self.ask(hippocamp_governance::Action::Delete, scope, id, call)
            .await?;
        self.outbox.delete(scope, id).await
    }
}

fn no_outbox(profile: Profile) -> Error {
    Error::OutboxUnavailable(format!(
        "the {} profile runs no outbox; use the synchronous `events` route",
        profile.as_str()
    ))
}

/// Content-free state of every service.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ServicesStatus {
    /// The profile.
    pub profile: &'static str,
    /// Memory counters (`None`: disabled).
    pub memory: Option<hippocamp_memory::StoreStatus>,
    /// Outbox counters (`None`: no outbox).
    pub outbox: Option<hippocamp_outbox::OutboxStats>,
    /// Whether the outbox's processor is delivering.
    pub processor_running: bool,
    /// Artifact counters.
    pub artifacts: hippocamp_artifacts::ArtifactStatus,
    /// The policy in force: consent-requiring apps, legal holds, lifetimes.
    pub policy: hippocamp_governance::PolicyInfo,
}

/// Runs sweep batches until none are due (or one fails: logged, and the
/// next period tries again).
pub async fn sweep_once(memory: &dyn MemoryStore, batch: u64) -> u64 {
    let call = CallOptions::default().on_behalf_of(Caller::of(CallerKind::Sweeper));
    until_swept("entries", || memory.sweep_expired(batch, &[], &call)).await
}

/// Runs `batch` until nothing more is due; a failure is logged and ends
/// the pass (the next period retries).
async fn until_swept<F: std::future::Future<Output = Result<hippocamp_memory::Sweep>>>(
    what: &str,
    mut batch: impl FnMut() -> F,
) -> u64 {
    let mut total = 0;
    loop {
        match batch().await {
            Ok(s) => {
                total += s.deleted;
                if !s.more {
                    if total > 0 {
                        tracing::info!(deleted = total, what, "swept what expired");
                    }
                    return total;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, what, "the sweep failed; the next period retries");
                return total;
            }
        }
    }
}

/// Runs artifact sweep batches until none are due (or one fails: logged,
/// and the next period tries again).
pub async fn sweep_artifacts_once(
    artifacts: &GovernedArtifacts<Arc<dyn ArtifactStore>>,
    batch: u64,
) -> u64 {
    let call = CallOptions::default().on_behalf_of(Caller::of(CallerKind::Sweeper));
    until_swept("artifact versions", || artifacts.sweep(batch, &call)).await
}

/// One page of the distributed profile's artifact repair (content no
/// version references, older than `sweeper.artifact_repair_grace_ms`),
/// starting after `from`; returns where the next pass starts (the same
/// place again when it failed: logged, the next period retries).
pub async fn repair_artifacts_once(
    artifacts: &hippocamp_postgres::PgArtifacts,
    from: Option<String>,
    options: &SweeperConfig,
) -> Option<String> {
    let max = usize::try_from(options.batch).unwrap_or(usize::MAX);
    let grace = std::time::Duration::from_millis(options.artifact_repair_grace_ms);
    match artifacts.repair_page(grace, from.as_deref(), max).await {
        Ok((done, next)) => {
            if done.removed > 0 {
                tracing::info!(
                    removed = done.removed,
                    "removed unreferenced artifact content"
                );
            }
            next
        }
        Err(e) => {
            tracing::warn!(error = %e, "the artifact repair failed; the next period retries");
            from
        }
    }
}

/// Removes the audit records older than the log's retention (logged, not
/// returned, when it fails: the next period tries again).
pub async fn prune_audit(g: &Governance) -> u64 {
    let before = g.clock.now_ms().saturating_sub(g.audit_retention_ms);
    match g.audit.prune(before).await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "pruning the audit log failed; the next period retries");
            0
        }
    }
}

/// The router configuration a profile uses: a volatile store has nothing
/// to release, so it runs with one shared worker.
fn router(profile: Profile, configured: &RouterConfig) -> RouterConfig {
    match profile {
        Profile::Ephemeral => RouterConfig {
            strategy: Strategy::Shared,
            ..configured.clone()
        },
        _ => configured.clone(),
    }
}

/// Why a distributed store was asked for without its connections: they
/// are made by [`Services::open`], which is async.
fn needs_remote() -> Error {
    Error::Unavailable(
        "the distributed profile's stores open through Services::open (the server), not from a data directory"
            .into(),
    )
}

/// A configuration checked once, by the public entry point that builds
/// from it (`Config::validate`); every builder below takes one, so none
/// checks again and none can be reached with an unchecked one.
#[derive(Debug, Clone, Copy)]
struct Valid<'a>(&'a Config);

impl<'a> Valid<'a> {
    fn check(config: &'a Config) -> Result<Self> {
        config.validate()?;
        Ok(Self(config))
    }
}

impl std::ops::Deref for Valid<'_> {
    type Target = Config;
    fn deref(&self) -> &Config {
        self.0
    }
}

/// Connects `config`'s embedder, then runs `open` with it on a blocking
/// thread (stores open files and replay logs).
async fn with_embedder<T: Send + 'static>(
    config: Valid<'_>,
    open: impl FnOnce(Valid<'_>, Option<Arc<dyn hippocamp_embed::Embedder>>) -> Result<T>
    + Send
    + 'static,
) -> Result<(T, Option<Arc<hippocamp_embed::probed::Probed>>)> {
    let connected = match &config.embedder {
        None => None,
        // The disabled profile has no memory to embed for.
        Some(_) if config.profile == Profile::Disabled => None,
        Some(e) => Some(connect(e).await?),
    };
    let (embedder, probe) = match connected {
        Some(c) => (Some(c.embedder), c.probe),
        None => (None, None),
    };
    let c = config.0.clone();
    // A copy of a checked configuration is checked.
    let opened = tokio::task::spawn_blocking(move || open(Valid(&c), embedder))
        .await
        .map_err(|e| Error::Unavailable(e.to_string()))??;
    Ok((opened, probe))
}

impl Services {
    /// Connects the configured embedder, then opens every service of
    /// `config.profile` (blocking work runs off the async threads). The
    /// outbox's processor is not started: see
    /// [`start_processor`](Self::start_processor).
    pub async fn open(config: &Config) -> Result<Self> {
        let config = Valid::check(config)?;
        if config.profile != Profile::Distributed {
            let (mut services, probe) =
                with_embedder(config, |c, e| Self::build_on(c, e, None)).await?;
            services.embedder_probe = probe;
            return Ok(services);
        }
        let remote = Remote::connect(&config).await?;
        let tokens =
            TokenStore::shared(hippocamp_postgres::PgTokens::new(remote.db.clone())).await?;
        let (mut services, probe) =
            with_embedder(config, move |c, e| Self::build_on(c, e, Some(&remote))).await?;
        services.tokens = Arc::new(tokens);
        services.embedder_probe = probe;
        Ok(services)
    }

    /// Opens (or creates) the services of `config.profile`, memory
    /// embedding with `embedder` when given. Blocking: call from a
    /// blocking context.
    pub fn build(
        config: &Config,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<Self> {
        Self::build_on(Valid::check(config)?, embedder, None)
    }

    /// [`build`](Self::build), the distributed profile's stores on
    /// `remote` (its tokens are set by [`open`](Self::open)). Blocking.
    fn build_on(
        config: Valid<'_>,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
        remote: Option<&Remote>,
    ) -> Result<Self> {
        let tokens = match config.profile {
            // The distributed profile's shared tokens replace these.
            Profile::Ephemeral | Profile::Distributed => TokenStore::in_memory(),
            Profile::Durable | Profile::Disabled => {
                layout::data_dir(&config.data_dir)?;
                TokenStore::open(&config.data_dir)?
            }
        };
        let governance = Self::governance_on(config, remote)?;
        let (memory, outbox, consolidations) = if config.profile == Profile::Disabled {
            (None, None, Arc::new(consolidations(config, remote)?))
        } else {
            let m = Self::memory_governed(config, embedder, &governance, remote)?;
            (Some(m.memory), m.outbox, m.consolidations)
        };
        let governed_artifacts =
            Self::artifacts_governed(config, &governance, memory.as_ref(), remote)?;
        Ok(Self {
            profile: config.profile,
            memory,
            outbox,
            artifacts: governed_artifacts.clone(),
            governed_artifacts,
            sessions: Self::sessions_governed(config, &governance, remote)?,
            tokens: Arc::new(tokens),
            remote: remote.cloned(),
            governance,
            processor: Arc::new(Mutex::new(None)),
            processor_options: config.outbox_processor.clone(),
            sweeper: Arc::new(Mutex::new(None)),
            sweeper_options: config.sweeper.clone(),
            consolidations,
            restores: Arc::new(tokio::sync::Semaphore::new(
                hippocamp_core::limits::to_usize(config.restore.max_concurrent),
            )),
            restore_limits: config.restore.clone(),
            embedder_probe: None,
        })
    }

    /// Whether the embedder has answered its readiness probe: `None`
    /// when it has no probe (none configured, a local model, or an
    /// endpoint whose dimension was probed at start).
    pub fn embedder_ready(&self) -> Option<bool> {
        self.embedder_probe.as_ref().map(|p| p.is_ready())
    }

    /// The governance of `config`: its static policy over its consent
    /// records (in memory for the ephemeral profile, else in the data
    /// directory), reading the memory configuration's clock. Blocking.
    pub fn governance(config: &Config) -> Result<Governance> {
        Self::governance_on(Valid::check(config)?, None)
    }

    fn governance_on(config: Valid<'_>, remote: Option<&Remote>) -> Result<Governance> {
        let consents: Arc<dyn ConsentStore> = match config.profile {
            Profile::Ephemeral => Arc::new(InMemoryConsents::default()),
            Profile::Durable | Profile::Disabled => Arc::new(RedbConsents::open(
                &layout::governance_dir(&config.data_dir)?,
            )?),
            Profile::Distributed => Arc::new(hippocamp_postgres::PgConsents::new(
                remote.ok_or_else(needs_remote)?.db.clone(),
            )),
        };
        let audit: Arc<dyn AuditLog> = match config.profile {
            Profile::Ephemeral => Arc::new(InMemoryAudit::default()),
            Profile::Durable | Profile::Disabled => {
                Arc::new(RedbAudit::open(&layout::governance_dir(&config.data_dir)?)?)
            }
            Profile::Distributed => {
                let r = remote.ok_or_else(needs_remote)?;
                Arc::new(hippocamp_postgres::PgAudit::new(r.db.clone(), r.scope_key))
            }
        };
        let policy = Arc::new(StaticPolicy::new(config.policy.clone(), consents.clone())?);
        Ok(Governance {
            policy,
            consents,
            clock: config.memory.clock.0.clone(),
            audit,
            audit_retention_ms: config.audit.retention_ms,
        })
    }

    /// Records the scope's consent (and that `caller` recorded it, in
    /// the audit log).
    pub async fn record_consent(
        &self,
        scope: &MemoryScope,
        consent: NewConsent,
        caller: Caller,
    ) -> Result<Consent> {
        let g = &self.governance;
        let r = g.consents.put(scope, consent, g.clock.now_ms()).await;
        g.record(
            AuditEvent::ConsentRecorded,
            "consent",
            scope,
            caller,
            &r,
            None,
        )
        .await;
        r
    }

    /// Withdraws the scope's consent: new ingestion stops at once (the
    /// policy no longer finds it), the scope's queued jobs are cancelled,
    /// and, when the policy says so, what the consent covered is erased:
    /// the scope's memory and agent sessions, and (a consent to
    /// artifacts) the artifacts of the user and of each of their agent
    /// sessions. A legal hold or retention refuses that erasure, after
    /// the consent is gone and the jobs cancelled.
    pub async fn withdraw_consent(
        &self,
        scope: &MemoryScope,
        call: &CallOptions,
    ) -> Result<Withdrawal> {
        let now = self.governance.clock.now_ms();
        let removed = self.governance.consents.remove(scope, now).await;
        self.governance
            .record(
                AuditEvent::ConsentWithdrawn,
                "consent",
                scope,
                call.caller(),
                &removed,
                None,
            )
            .await;
        let withdrawn = removed?;
        let cancelled_jobs = match &self.outbox {
            Some(o) => o.erased(scope, None, None).await?,
            None => 0,
        };
        let erase = self.governance.policy.erases_on_withdrawal(scope);
        let covered = |c: &Consent| c.scope.covers_artifacts();
        // The withdrawal has taken effect: an erasure a retention or a
        // hold refuses is reported, not an error (nothing of it ran).
        let mut erasure_refused = None;
        let mut kept = |e: Error| match kept_by(&e) {
            Some(why) => {
                erasure_refused.get_or_insert(why);
                Ok(())
            }
            None => Err(e),
        };
        // Before the sessions go: they name the session scopes.
        let artifacts = if erase && withdrawn.as_ref().is_some_and(covered) {
            match self.erase_user_artifacts(scope, call).await {
                Ok(a) => Some(a),
                Err(e) => kept(e).map(|()| None)?,
            }
        } else {
            None
        };
        let erased = if erase && self.memory.is_some() {
            match self.agent().erase_user(scope, call).await {
                Ok(u) => u.memory,
                Err(e) => kept(e).map(|()| None)?,
            }
        } else {
            None
        };
        Ok(Withdrawal {
            withdrawn,
            cancelled_jobs,
            erased,
            artifacts,
            erasure_refused,
        })
    }

    /// Erases the artifacts of `scope`'s user and of each of their agent
    /// sessions.
    async fn erase_user_artifacts(
        &self,
        scope: &MemoryScope,
        call: &CallOptions,
    ) -> Result<ArtifactsErased> {
        use hippocamp_artifacts::ArtifactScope;
        let mut targets = vec![ArtifactScope::User {
            app: scope.app().clone(),
            user: scope.user().clone(),
        }];
        let mut after = None;
        loop {
            let page = self
                .sessions
                .list(scope, after.as_ref(), None, call)
                .await?;
            targets.extend(page.items.into_iter().map(|s| ArtifactScope::Session {
                app: scope.app().clone(),
                user: scope.user().clone(),
                session: s.id,
            }));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut out = ArtifactsErased::default();
        for t in &targets {
            let e = self.erase_artifacts(t, call).await?;
            out.names += e.names;
            out.versions += e.versions;
        }
        Ok(out)
    }

    /// Deletes every version of every artifact of `scope` (a user's or a
    /// session's), name by name; returns the names and versions removed.
    /// Idempotent: an empty scope removes nothing.
    pub async fn erase_artifacts(
        &self,
        scope: &hippocamp_artifacts::ArtifactScope,
        call: &CallOptions,
    ) -> Result<ArtifactsErased> {
        let r = self.erase_artifacts_unaudited(scope, call).await;
        if let hippocamp_artifacts::ArtifactScope::User { app, user }
        | hippocamp_artifacts::ArtifactScope::Session { app, user, .. } = scope
        {
            let memory_scope = MemoryScope::new(app.clone(), user.clone());
            let count = r.as_ref().ok().map(|e| e.versions);
            self.governance
                .record(
                    AuditEvent::ArtifactErasure,
                    "artifacts",
                    &memory_scope,
                    call.caller(),
                    &r,
                    count,
                )
                .await;
        }
        r
    }

    async fn erase_artifacts_unaudited(
        &self,
        scope: &hippocamp_artifacts::ArtifactScope,
        call: &CallOptions,
    ) -> Result<ArtifactsErased> {
        use hippocamp_artifacts::{DeleteSelector, PageRequest};
        let mut out = ArtifactsErased::default();
        loop {
            // Always the first page: what was deleted is no longer listed.
            let page = self
                .artifacts
                .list_names(scope, &PageRequest::default(), call)
                .await?;
            if page.items.is_empty() {
                return Ok(out);
            }
            let mut removed = 0;
            for name in &page.items {
                removed += self
                    .artifacts
                    .delete(scope, name, DeleteSelector::All, call)
                    .await?
                    .len() as u64;
                out.names += 1;
            }
            if removed == 0 {
                return Err(Error::Unavailable(
                    "artifacts are listed that deleting does not remove; retry".into(),
                ));
            }
            out.versions += removed;
        }
    }

    /// Starts the background sweeper on the current runtime (if memory
    /// is on and it is not running): every `sweeper.interval_ms` it
    /// deletes expired entries in batches of `sweeper.batch` until none
    /// are due, through the policy (action `prune`); in the distributed
    /// profile it also repairs a page of `sweeper.batch` artifact content
    /// objects, walking the bucket pass by pass.
    pub fn start_sweeper(&self) {
        let Some(memory) = self.memory.clone() else {
            return;
        };
        let mut slot = self.sweeper.lock();
        if slot.is_some() {
            return;
        }
        let options = self.sweeper_options.clone();
        let governance = self.governance.clone();
        let artifacts = Arc::clone(&self.governed_artifacts);
        let catalog = self.remote.as_ref().map(|r| Arc::clone(&r.artifacts));
        *slot = Some(tokio::spawn(async move {
            let period = std::time::Duration::from_millis(options.interval_ms);
            let mut repair_from = None;
            loop {
                tokio::time::sleep(period).await;
                sweep_once(&*memory, options.batch).await;
                sweep_artifacts_once(&artifacts, options.batch).await;
                prune_audit(&governance).await;
                if let Some(c) = &catalog {
                    repair_from = repair_artifacts_once(c, repair_from, &options).await;
                }
            }
        }));
    }

    /// Stops the sweeper.
    pub fn stop_sweeper(&self) {
        if let Some(task) = self.sweeper.lock().take() {
            task.abort();
        }
    }

    /// The session store of `config` (in memory for the ephemeral
    /// profile, in the data directory or PostgreSQL otherwise) behind
    /// `governance`'s gate. Blocking.
    fn sessions_governed(
        config: Valid<'_>,
        governance: &Governance,
        remote: Option<&Remote>,
    ) -> Result<Arc<dyn SessionStore>> {
        let inner = Self::sessions_on(config, remote)?;
        let gate = governance.gate(hippocamp_core::deadline::DEFAULT_TIMEOUT);
        Ok(Arc::new(GovernedSessions::new(inner, gate)))
    }

    fn sessions_on(config: Valid<'_>, remote: Option<&Remote>) -> Result<Arc<dyn SessionStore>> {
        Ok(match config.profile {
            Profile::Ephemeral => Arc::new(InMemorySessions::new(config.sessions.clone())?),
            Profile::Durable | Profile::Disabled => Arc::new(RedbSessions::open(
                &layout::sessions_dir(&config.data_dir)?,
                config.sessions.clone(),
            )?),
            Profile::Distributed => Arc::new(hippocamp_postgres::PgSessions::new(
                remote.ok_or_else(needs_remote)?.db.clone(),
                config.sessions.clone(),
            )?),
        })
    }

    /// What an agent runner works over: these services' memory,
    /// artifacts, sessions and outbox (with the memory target).
    pub fn agent(&self) -> hippocamp_agent::AgentServices {
        hippocamp_agent::AgentServices {
            sessions: Arc::clone(&self.sessions),
            memory: self.memory.clone(),
            artifacts: Some(Arc::clone(&self.artifacts)),
            outbox: self
                .outbox
                .clone()
                .and_then(|o| TargetName::new(MEMORY_TARGET).ok().map(|t| (o, t))),
        }
    }

    /// The memory store callers use, or `MemoryDisabled`.
    pub fn memory_store(&self) -> Result<&Arc<dyn MemoryStore>> {
        self.memory.as_ref().ok_or(Error::MemoryDisabled)
    }

    /// Asks the policy whether `call`'s caller may act on `scope`'s
    /// consolidation runs (see [`consolidation::ask`]).
    pub async fn ask_consolidate(
        &self,
        scope: &MemoryScope,
        action: hippocamp_governance::Action,
        what: &'static str,
        call: &CallOptions,
    ) -> Result<CallOptions> {
        self.memory_store()?;
        let gate = self
            .governance
            .gate(hippocamp_core::deadline::DEFAULT_TIMEOUT);
        consolidation::ask(&gate, scope, action, what, call).await
    }

    /// The outbox's jobs, through the gate.
    pub fn jobs(&self) -> Result<Jobs<'_>> {
        Ok(Jobs {
            gate: self
                .governance
                .gate(hippocamp_core::deadline::DEFAULT_TIMEOUT),
            outbox: self.outbox()?,
        })
    }

    /// The outbox, or why there is none.
    pub fn outbox(&self) -> Result<&Outbox> {
        match (&self.memory, &self.outbox) {
            (None, _) => Err(Error::MemoryDisabled),
            (_, Some(o)) => Ok(o),
            (_, None) => Err(no_outbox(self.profile)),
        }
    }

    /// Starts the outbox's processor (its workers and prune pass) on the
    /// current Tokio runtime, if there is an outbox and it is not running.
    pub fn start_processor(&self) -> Result<()> {
        let Some(outbox) = &self.outbox else {
            return Ok(());
        };
        let mut p = self.processor.lock();
        if p.is_none() {
            *p = Some(Processor::start(outbox, self.processor_options.clone())?);
        }
        Ok(())
    }

    /// Stops the processor (deliveries in flight finish their call).
    pub async fn stop_processor(&self) {
        let p = self.processor.lock().take();
        if let Some(p) = p {
            p.stop().await;
        }
    }

    /// Whether every service can serve: memory answers, and with an
    /// outbox, its store takes writes and its processor runs.
    pub async fn health(&self) -> Result<()> {
        if let Some(r) = &self.remote {
            r.ping().await?;
        }
        if let Some(m) = &self.memory {
            m.status().await?;
        }
        if let Some(o) = &self.outbox {
            o.health()
                .await
                .map_err(|e| Error::OutboxUnavailable(e.to_string()))?;
            let running = self
                .processor
                .lock()
                .as_ref()
                .is_some_and(Processor::is_running);
            if !running {
                return Err(Error::OutboxUnavailable(
                    "the outbox's processor is not running".into(),
                ));
            }
        }
        self.artifacts.status().await.map(drop)
    }

    /// Content-free counters of every service.
    pub async fn status(&self) -> Result<ServicesStatus> {
        let memory = match &self.memory {
            Some(m) => Some(m.status().await?),
            None => None,
        };
        let outbox = match &self.outbox {
            Some(o) => Some(o.stats().await?),
            None => None,
        };
        let artifacts = self.artifacts.status().await?;
        let processor_running = self.processor.lock().is_some();
        Ok(ServicesStatus {
            profile: self.profile.as_str(),
            memory,
            outbox,
            processor_running,
            artifacts,
            policy: self.governance.policy.describe(),
        })
    }

    /// The memory side of `config` alone, with the configured embedder
    /// connected (the `memory` and `outbox` commands use it).
    pub async fn memory(config: &Config) -> Result<MemoryServices> {
        Ok(with_embedder(Valid::check(config)?, Self::memory_valid)
            .await?
            .0)
    }

    /// The memory side of `config` embedding with `embedder`: in memory
    /// (ephemeral), or in the data directory with its outbox (durable),
    /// behind its router, reply check and policy. Blocking.
    pub fn memory_with(
        config: &Config,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<MemoryServices> {
        Self::memory_valid(Valid::check(config)?, embedder)
    }

    fn memory_valid(
        config: Valid<'_>,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<MemoryServices> {
        let governance = Self::governance_on(config, None)?;
        Self::memory_governed(config, embedder, &governance, None)
    }

    fn memory_governed(
        config: Valid<'_>,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
        governance: &Governance,
        remote: Option<&Remote>,
    ) -> Result<MemoryServices> {
        let runs = Arc::new(consolidations(config, remote)?);
        let governed = |store| governance.memory(store, &runs);
        let rerank = match &config.reranker {
            None => None,
            // Connected here, on the blocking thread that opens the
            // stores: an embedder named for it may need a probe.
            Some(r) => Some(
                tokio::runtime::Handle::try_current()
                    .map_err(|_| Error::Unavailable("no runtime to connect on".into()))?
                    .block_on(crate::reranker::connect(r, embedder.as_ref()))?,
            ),
        };
        let inner: Arc<dyn MemoryStore> = match config.profile {
            Profile::Disabled => return Err(Error::MemoryDisabled),
            Profile::Ephemeral => {
                let mut m = InMemoryStore::new(config.memory.clone())?;
                if let Some(e) = embedder {
                    m = m.with_embedder(e);
                }
                Arc::new(m)
            }
            Profile::Durable => {
                let dir = layout::memory_dir(&config.data_dir)?;
                let mut m = RedbMemoryStore::open_with_options(
                    dir,
                    config.memory.clone(),
                    config.memory_cache.options(),
                )?;
                if let Some(e) = embedder {
                    m = m.with_embedder(e)?;
                }
                Arc::new(m)
            }
            Profile::Distributed => {
                let remote = remote.ok_or_else(needs_remote)?;
                let m = hippocamp_postgres::PgMemoryStore::open(
                    remote.db.clone(),
                    config.memory.clone(),
                )?
                .max_cached_scopes(remote.max_cached_scopes)
                .exact_vectors_up_to(remote.exact_vectors_up_to)?;
                let m = match embedder {
                    // Checked against the model the schema's vectors
                    // came from (a query; this runs on a blocking thread).
                    Some(e) => tokio::runtime::Handle::try_current()
                        .map_err(|_| Error::Unavailable("no runtime to connect on".into()))?
                        .block_on(m.with_embedder(e))?,
                    None => m,
                };
                Arc::new(m)
            }
        };
        let routed: Arc<dyn MemoryStore> = Arc::new(RoutedMemory::new(
            inner,
            router(config.profile, &config.memory_router),
        )?);
        let routed: Arc<dyn MemoryStore> = match rerank {
            Some(stage) => Arc::new(hippocamp_memory::Reranked::new(routed, stage)?),
            None => routed,
        };
        let jobs: Arc<dyn hippocamp_outbox::JobStore> = match (config.profile, remote) {
            (Profile::Durable, _) => Arc::new(RedbJobStore::open(
                layout::outbox_dir(&config.data_dir)?,
                config.outbox.clone(),
            )?),
            // Shared by the processors of every server.
            (Profile::Distributed, Some(r)) => Arc::new(hippocamp_postgres::PgJobStore::new(
                r.db.clone(),
                config.outbox.clone(),
            )?),
            _ => {
                return Ok(MemoryServices {
                    memory: governed(Arc::new(ScopeChecked::new(routed))),
                    consolidations: runs,
                    outbox: None,
                    profile: config.profile,
                    gate: governance.gate(hippocamp_core::deadline::DEFAULT_TIMEOUT),
                });
            }
        };
        let outbox = Outbox::new(jobs);
        // The processor delivers through the reply check and the policy
        // too (admission asks it, and delivery asks again); callers'
        // erasures go through `Erasing`, which cancels queued jobs.
        let delivered = auto_runs(
            config.0,
            governed(Arc::new(ScopeChecked::new(Arc::clone(&routed)))),
            &runs,
            governance,
        );
        outbox.register(
            TargetName::new(MEMORY_TARGET)?,
            Target {
                store: delivered,
                limits: config.memory.limits.clone(),
            },
        )?;
        Ok(MemoryServices {
            memory: governed(Arc::new(ScopeChecked::new(
                Erasing::new(routed, outbox.clone()).with_processor(&config.outbox_processor),
            ))),
            consolidations: runs,
            outbox: Some(outbox),
            profile: config.profile,
            gate: governance.gate(hippocamp_core::deadline::DEFAULT_TIMEOUT),
        })
    }

    /// The artifact store of `config` under `governance`'s artifact terms
    /// (outermost), then, with `memory`, the index of its memory files
    /// there ([`file_index::FileIndex`]), its reply check and router.
    /// Blocking.
    fn artifacts_governed(
        config: Valid<'_>,
        governance: &Governance,
        memory: Option<&Arc<dyn MemoryStore>>,
        remote: Option<&Remote>,
    ) -> Result<Arc<GovernedArtifacts<Arc<dyn ArtifactStore>>>> {
        let mut checked = Self::artifacts_checked(config, remote)?;
        if let Some(memory) = memory {
            checked = Arc::new(file_index::FileIndex::new(
                checked,
                Arc::clone(memory),
                Arc::clone(&governance.policy),
                config.memory.limits.max_content_bytes,
            ));
        }
        Ok(Arc::new(
            GovernedArtifacts::new(
                checked,
                Arc::clone(&governance.policy),
                Arc::clone(&governance.clock),
            )
            .with_audit(Arc::clone(&governance.audit)),
        ))
    }

    fn artifacts_checked(
        config: Valid<'_>,
        remote: Option<&Remote>,
    ) -> Result<Arc<dyn ArtifactStore>> {
        let inner: Arc<dyn ArtifactStore> = match config.profile {
            Profile::Ephemeral => Arc::new(InMemoryArtifacts::new(config.artifacts.clone())?),
            Profile::Durable | Profile::Disabled => Arc::new(Self::filesystem_artifacts(config)?),
            Profile::Distributed => remote.ok_or_else(needs_remote)?.artifacts.clone(),
        };
        let routed = RoutedArtifacts::new(inner, router(config.profile, &config.artifacts_router))?;
        Ok(Arc::new(hippocamp_artifacts::ScopeChecked::new(routed)))
    }

    /// Repairs the filesystem artifact store of a durable `config`'s data
    /// directory (`hippocamp artifacts repair`, with the server stopped).
    /// Repair reconciles the catalog with the files; it reads and writes
    /// no user's artifacts on anyone's behalf, so it is the one use of the
    /// store that is not behind the policy, and the store itself is never
    /// handed out.
    pub async fn repair_artifacts(
        config: &Config,
        opts: hippocamp_artifacts_fs::RepairOptions,
    ) -> Result<hippocamp_artifacts_fs::RepairReport> {
        let config = config.clone();
        let store =
            tokio::task::spawn_blocking(move || Self::filesystem_artifacts(Valid::check(&config)?))
                .await
                .map_err(|e| Error::Unavailable(e.to_string()))??;
        store.repair(opts).await
    }

    fn filesystem_artifacts(config: Valid<'_>) -> Result<FsArtifacts> {
        FsArtifacts::open(
            layout::artifacts_dir(&config.data_dir)?,
            config.artifacts.clone(),
            config.artifacts_fs.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The services hand out wrapped stores only: the policy outermost,
    /// then the reply check, in front of the router (the capabilities
    /// show it).
    #[tokio::test]
    async fn every_profile_hands_out_routed_checked_stores() {
        let t = tempfile::tempdir().unwrap();
        for profile in [Profile::Ephemeral, Profile::Durable] {
            let config = Config {
                profile,
                data_dir: t.path().join(profile.as_str()),
                ..Config::default()
            };
            let s = Services::open(&config).await.unwrap();
            let memory = s.memory_store().unwrap();
            let debug = format!("{memory:?}");
            // The whole chain, in order: the policy decides first, so a
            // refused erasure never reaches `Erasing` (which cancels
            // queued jobs), and the store decides before `Erasing` acts;
            // a user's run records are forgotten once the store erased.
            let chain = match profile {
                Profile::Durable => {
                    "ForgetsRuns { inner: PolicyChecked { inner: ScopeChecked { inner: Erasing { inner: RoutedMemory { inner: RedbMemoryStore"
                }
                _ => {
                    "ForgetsRuns { inner: PolicyChecked { inner: ScopeChecked { inner: RoutedMemory { inner: InMemoryStore"
                }
            };
            assert!(debug.starts_with(chain), "{debug}");
            // Memory files are indexed under the policy, over the reply
            // check: every path to them writes and erases the index.
            let artifacts = format!("{:?}", s.artifacts);
            assert!(
                artifacts.starts_with(
                    "GovernedArtifacts { inner: FileIndex { inner: ScopeChecked { inner: RoutedArtifacts"
                ),
                "{artifacts}"
            );
            let sessions = format!("{:?}", s.sessions);
            assert!(sessions.starts_with("GovernedSessions {"), "{sessions}");
            let caps = memory.capabilities();
            assert_eq!(caps.async_ingestion, profile == Profile::Durable);
            assert_eq!(s.outbox.is_some(), profile == Profile::Durable);
            // The outbox's limits are in force for an ingest: reported.
            let outbox_limits = [
                "outbox.max_active_bytes_per_scope",
                "outbox.processor.workers",
            ]
            .map(|n| caps.limits.iter().any(|l| l.name == n));
            assert_eq!(outbox_limits, [profile == Profile::Durable; 2]);
            let routing = caps.routing.unwrap();
            let expected = match profile {
                Profile::Ephemeral => "shared",
                _ => "exact_scope",
            };
            assert_eq!(routing.strategy, expected);
        }
    }

    /// Everything the durable profile creates in a data directory is
    /// readable by its owner only.
    #[tokio::test]
    async fn a_durable_data_directory_is_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: t.path().join("data"),
            ..Config::default()
        };
        let s = Services::open(&config).await.unwrap();
        s.tokens.ensure_admin().unwrap();
        let scope = hippocamp_core::MemoryScope::parse("a", "u").unwrap();
        s.memory_store()
            .unwrap()
            .add_entry(
                &scope,
                hippocamp_memory::NewEntry::new("a fact"),
                &hippocamp_memory::WriteOptions::default(),
            )
            .await
            .unwrap();
        let a = hippocamp_artifacts::ArtifactScope::user("a", "u").unwrap();
        let name = hippocamp_artifacts::ArtifactName::new("f.txt").unwrap();
        s.artifacts
            .put(
                &a,
                &name,
                hippocamp_artifacts::Body::from("bytes"),
                &hippocamp_artifacts::PutOptions::default(),
            )
            .await
            .unwrap();
        drop(s);
        let mut seen = 0;
        let mut stack = vec![config.data_dir.clone()];
        while let Some(p) = stack.pop() {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                assert_eq!(mode, 0o700, "{}", p.display());
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            } else {
                assert_eq!(mode, 0o600, "{}", p.display());
                seen += 1;
            }
        }
        // Database, log and lock of each store, a content file, tokens.
        assert!(seen >= 8, "{seen}");
    }
}
