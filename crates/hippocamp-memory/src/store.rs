//! The `MemoryStore` contract.
//!
//! Every scoped operation takes the exact [`MemoryScope`]; none reads or
//! writes outside it. Every operation takes [`CallOptions`] whose deadline
//! is checked immediately before a write commits: an expired request
//! returns [`Error::Timeout`](hippocamp_core::Error::Timeout) and never
//! becomes a visible write. Deletions are idempotent and report how many
//! entries they removed.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, EntryId, Error, LimitInfo, MemoryScope, Result, SessionId};
use hippocamp_search::Bm25Params;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entry::{EntryUpdate, MemoryEntry, NewEntry, Obligations, Revision, UpdateOutcome};
use crate::erasure::{ErasureImport, ErasurePage, ErasureRequest, ImportedErasures};
use crate::event::{Event, IngestReport};
use crate::import::{ImportReport, ImportedEntry};
pub use crate::list::{
    EntryPage, ExportRequest, ListOrder, ListRequest, NamePage, NamesRequest, Sweep,
};

/// The version of this contract, reported by `capabilities`.
pub const CONTRACT_VERSION: u32 = 1;

/// Options of a write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteOptions {
    /// Deadline.
    pub call: CallOptions,
    /// The erasure epoch the write was admitted under (e.g. by a queue).
    /// If the scope has since been erased (its epoch advanced), the write is
    /// refused with `StaleEpoch`. `None` writes at the current epoch.
    pub epoch: Option<u64>,
    /// The erasure epoch of the write's session (`add_events`) it was
    /// admitted under: once the session has been erased since
    /// (`delete_session` advanced it), the write is refused with
    /// `StaleEpoch` at the store's commit point, so a delivery that
    /// started before the erasure cannot write the session back.
    pub session_epoch: Option<u64>,
    /// Obligations every new entry of the write carries (expiry,
    /// retention, legal hold), as the policy decided them, unless one of
    /// `by_metadata` matches the entry's metadata. A duplicate keeps the
    /// obligations it was stored with.
    pub obligations: Obligations,
    /// Obligations by metadata: the first rule whose filter matches an
    /// entry's metadata gives that entry's obligations.
    pub by_metadata: ObligationRules,
}

/// Obligations chosen by an entry's metadata (e.g. a shorter TTL for
/// entries tagged as chit-chat), in order: the first match wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObligationRules(Arc<[(hippocamp_core::Filter, Obligations)]>);

impl ObligationRules {
    /// Rules in order.
    pub fn new(rules: Vec<(hippocamp_core::Filter, Obligations)>) -> Self {
        Self(rules.into())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl WriteOptions {
    /// Options with `call` and no epoch fence.
    pub fn new(call: CallOptions) -> Self {
        Self {
            call,
            epoch: None,
            session_epoch: None,
            obligations: Obligations::default(),
            by_metadata: ObligationRules::default(),
        }
    }

    /// The obligations of a new entry with `metadata`.
    pub fn obligations_for(&self, metadata: &hippocamp_core::Metadata) -> Obligations {
        self.by_metadata
            .0
            .iter()
            .find(|(f, _)| f.matches(metadata))
            .map_or(self.obligations, |(_, o)| *o)
    }

    /// Sets the obligations of the write's new entries.
    #[must_use]
    pub fn obligations(mut self, obligations: Obligations) -> Self {
        self.obligations = obligations;
        self
    }

    /// Sets the epoch fence.
    #[must_use]
    pub fn epoch(mut self, epoch: u64) -> Self {
        self.epoch = Some(epoch);
        self
    }

    /// Sets both fences: the scope's and the session's erasure epochs
    /// read before the write was admitted.
    #[must_use]
    pub fn fenced(mut self, fence: ErasureFence) -> Self {
        self.epoch = Some(fence.epoch);
        self.session_epoch = Some(fence.session_epoch);
        self
    }
}

pub use hippocamp_core::ErasureFence;

/// The result of `add_entry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddOutcome {
    /// The stored entry (for a duplicate, the one stored first).
    pub entry: MemoryEntry,
    /// Whether an entry with this idempotency key and data already existed.
    pub duplicate: bool,
    /// The secrets redacted from the content before it was stored (ranges
    /// in the content as sent); absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<hippocamp_core::secrets::Redaction>,
}

/// The result of `delete_user`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Erasure {
    /// Entries removed (0 when the scope held none).
    pub deleted: u64,
    /// The scope's erasure epoch after this erasure: a write admitted
    /// before it carries a smaller epoch and is refused.
    pub epoch: u64,
}

/// A search.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// Free text, 1..=`max_query_bytes` bytes.
    pub query: String,
    /// A metadata filter (see `hippocamp_core::filter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
    /// Most hits, 1..=`max_results`; default `max_results`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Byte budget of the hits, 1..=`max_result_bytes`; default
    /// `max_result_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// How to score: `lexical`, `vector` or `hybrid`. Default: `hybrid`
    /// when the store has an embedder, `lexical` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<SearchMode>,
    /// Add to each hit what made its score (`explanation`: one named
    /// contribution per stage). Replies without it are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explain: bool,
    /// The moment relative times in the query ("yesterday", "last week")
    /// are read against, in ms since the Unix epoch; default now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_time_ms: Option<u64>,
    /// Return with each hit the turns around it in its session
    /// (`context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextWindow>,
    /// Also return entries a newer one superseded (`status: superseded`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_superseded: bool,
    /// Also return entries merged into a derived fact (`status: merged`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_merged: bool,
    /// Only entries of these origins (`turn`, `note`, `file`, `fact`);
    /// empty or absent: every origin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<crate::lineage::Origin>,
}

/// How many turns around each hit a search returns: the entries of the
/// hit's session just before and after it by (time, id), each side
/// 0..=5 (`search.max_context_turns`). They share the search's byte
/// budget with the hits (hits first, then context in rank order, nearest
/// turn first), and an entry is in a reply once: a neighbour that is a
/// hit, or already another hit's context, is not repeated.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ContextWindow {
    /// Turns before each hit.
    #[serde(default)]
    pub before: u32,
    /// Turns after each hit.
    #[serde(default)]
    pub after: u32,
}

/// The turns around a hit, in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HitContext {
    /// The entries before it, earliest first.
    pub before: Vec<Arc<MemoryEntry>>,
    /// The entries after it, earliest first.
    pub after: Vec<Arc<MemoryEntry>>,
}

/// How a search scores entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// BM25 only.
    Lexical,
    /// Dot product of the query's and the entries' vectors only.
    Vector,
    /// BM25 and vector scores fused (see the store's fusion parameters).
    Hybrid,
}

impl SearchMode {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Lexical => "lexical",
            SearchMode::Vector => "vector",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

impl SearchRequest {
    /// A search for `query` with defaults.
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }

    /// Sets the limit.
    #[must_use]
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Sets the filter.
    #[must_use]
    pub fn filter(mut self, filter: Value) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Sets the byte budget.
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// Asks for each hit's explanation.
    #[must_use]
    pub fn explained(mut self) -> Self {
        self.explain = true;
        self
    }

    /// Sets the reference time of relative times in the query.
    #[must_use]
    pub fn reference_time_ms(mut self, at_ms: u64) -> Self {
        self.reference_time_ms = Some(at_ms);
        self
    }

    /// Asks for `before` and `after` turns around each hit.
    #[must_use]
    pub fn context(mut self, before: u32, after: u32) -> Self {
        self.context = Some(ContextWindow { before, after });
        self
    }
}

/// One named stage's part in a hit's score (a search with `explain`).
/// The list is open: a stage added later (a reranker, a recency prior)
/// appends its own; a client shows the stages it knows and lists the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Contribution {
    /// The stage: `bm25`, `vector`, `fusion`, `neighbours`, `time` or
    /// `rerank`.
    pub stage: String,
    /// Its score for this hit; `None` when the hit was not in that
    /// stage's list (a hybrid hit found by one side only).
    pub score: Option<f64>,
    /// `bm25`: each query term's share (the analysed term, its frequency
    /// in the entry, what it added).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<hippocamp_search::TermShare>,
    /// How the stage computed or combined its score, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// How a hit was scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ScoreType {
    /// Okapi BM25 over the scope's own statistics.
    Bm25,
    /// Dot product of unit vectors (cosine similarity).
    Vector,
    /// BM25 and vector scores fused.
    Hybrid,
}

/// The scores a fused hit came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScoreDetails {
    /// Its BM25 score, if the lexical list held it.
    pub bm25: Option<f64>,
    /// Its vector score, if the dense list held it.
    pub vector: Option<f64>,
    /// The fused score: the hit's `score` before the later stages
    /// (session cohesion, time), which `explain` lists.
    pub fused: f64,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchHit {
    /// The entry, shared with the store's copy (hits are read-only, and
    /// sharing keeps a search from copying every hit's content and
    /// metadata).
    #[serde(flatten)]
    pub entry: Arc<MemoryEntry>,
    /// Its score; larger is better.
    pub score: f64,
    /// How the score was computed.
    pub score_type: ScoreType,
    /// For hybrid hits, the scores that were fused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ScoreDetails>,
    /// What made the score, stage by stage (only when the search asked
    /// for `explain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Vec<Contribution>>,
    /// The turns around it (only when the search asked for `context`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<HitContext>,
    /// For an entry long enough to be indexed as passages
    /// (`search.passages`): the byte range of its content that matched
    /// the query best.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passage: Option<PassageSpan>,
}

/// A byte range of a hit's content: `content[start..end]`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct PassageSpan {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

/// Hits, best first: higher score, then newer, then smaller id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchResults {
    /// The hits.
    pub hits: Vec<SearchHit>,
    /// Whether a matching hit was left out because it did not fit the byte
    /// budget (later, smaller hits were still considered).
    pub skipped_over_budget: bool,
    /// In vector and hybrid modes: entries of the scope that have no
    /// vector (stored before the store had an embedder), which the vector
    /// side could not consider.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub entries_without_vectors: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Search features of a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SearchCapabilities {
    /// Scoring modes offered.
    pub modes: Vec<String>,
    /// BM25 parameters in force.
    pub bm25: Bm25Params,
    /// The text analyser.
    pub analyzer: String,
    /// Filter operators understood.
    pub filter_operators: Vec<String>,
    /// The embedder, when vector and hybrid modes are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<EmbedderInfo>,
    /// Fusion parameters of hybrid search.
    pub fusion: hippocamp_search::FusionParams,
    /// Session cohesion in lexical search (neighbour support).
    pub neighbours: hippocamp_search::NeighbourParams,
    /// Time in lexical search.
    pub time: hippocamp_search::TimeParams,
    /// Long entries indexed as passages (lexical side).
    pub passages: hippocamp_search::PassageParams,
    /// Most turns a search's `context` asks for on each side of a hit.
    pub max_context_turns: u32,
    /// The reranking stage, when one is configured (off by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<crate::rerank::RerankInfo>,
}

/// The embedder a store uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EmbedderInfo {
    /// Its model.
    pub model: String,
    /// The width of its vectors.
    pub dimension: usize,
    /// Content is embedded before the write commits (`synchronous`).
    pub ingestion: String,
}

/// Router details, present when a store is behind a scope router.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RoutingInfo {
    /// `exact_scope` or `shared`.
    pub strategy: String,
    /// Most scopes with a live worker.
    pub max_active_scopes: u64,
    /// Most concurrent cold-scope activations.
    pub max_cold_activations: u64,
    /// Idle time after which a durable scope's worker may be reclaimed.
    pub idle_scope_timeout_ms: u64,
    /// Whether idle reclamation is on (never for volatile stores).
    pub idle_reclamation: bool,
}

/// What a store offers and the limits it enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Capabilities {
    /// Contract version.
    pub contract_version: u32,
    /// The backend (`memory`, `redb`...).
    pub backend: String,
    /// Whether acknowledged writes survive a restart.
    pub durable: bool,
    /// The scope shape: always `app_user`.
    pub scope: String,
    /// Search features.
    pub search: SearchCapabilities,
    /// `add_entry` with an idempotency key and `add_events` are idempotent.
    pub idempotent_ingestion: bool,
    /// `add_events` can be called repeatedly with a growing session.
    pub incremental_events: bool,
    /// Writes can carry an erasure epoch and are refused once stale.
    pub erasure_epoch_fencing: bool,
    /// Events can be queued for delivery in the background (an outbox
    /// runs in front of the store: `…/ingest`); false for a store alone.
    pub async_ingestion: bool,
    /// Delete targets.
    pub delete: Vec<String>,
    /// Per-scope quotas are enforced.
    pub per_scope_quota: bool,
    /// Entries carry obligations (expiry, retention, legal hold) that the
    /// store enforces, and expired entries can be swept.
    pub obligations: bool,
    /// A scope's entries can be listed page by page.
    pub listing: bool,
    /// Store-wide quotas are enforced.
    pub global_quota: bool,
    /// Every limit with its value, default and range.
    pub limits: Vec<LimitInfo>,
    /// Router details, when routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingInfo>,
}

impl Capabilities {
    /// The store's default call timeout (`call_timeout_ms`): what a
    /// wrapper starts a caller's clock with when the call gives none.
    pub fn call_timeout(&self) -> std::time::Duration {
        self.limit("call_timeout_ms").map_or(
            hippocamp_core::deadline::DEFAULT_TIMEOUT,
            std::time::Duration::from_millis,
        )
    }

    /// The value in force of the limit called `name`, if the store has it.
    pub fn limit(&self, name: &str) -> Option<u64> {
        self.limits.iter().find(|l| l.name == name).map(|l| l.value)
    }
}

/// Content-free state of a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoreStatus {
    /// The backend.
    pub backend: String,
    /// Whether it is durable.
    pub durable: bool,
    /// Scopes holding at least one entry.
    pub scopes: u64,
    /// Entries.
    pub entries: u64,
    /// Stored bytes (as counted by quotas).
    pub bytes: u64,
    /// Router state, when routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterStatus>,
}

/// Router state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RouterStatus {
    /// `exact_scope` or `shared`.
    pub strategy: String,
    /// Scopes with a live worker.
    pub active_scopes: u64,
    /// Cold activations in flight.
    pub cold_activations_in_flight: u64,
    /// Workers reclaimed so far, by the idle sweep or to make room for
    /// a new scope at capacity.
    pub reclaimed_workers: u64,
    /// The idle timeout.
    pub idle_scope_timeout_ms: u64,
}

/// Scoped long-term memory.
///
/// Implementations must: validate every input with the shared functions
/// (`prepare_entry`, `plan_events`, `prepare_search`) so rules are identical
/// everywhere; never return a record of another scope; check the deadline
/// immediately before committing; keep entries and search in step so a
/// committed write is searchable and a deleted entry is not.
#[async_trait]
pub trait MemoryStore: Send + Sync + fmt::Debug {
    /// Features and limits.
    fn capabilities(&self) -> Capabilities;

    /// Adds one entry. With an idempotency key, adding the same data again
    /// returns the stored entry as a duplicate, and different data fails
    /// with `IdempotencyConflict`.
    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome>;

    /// Ingests a session's events in one atomic batch (see
    /// [`crate::event`]). Per-event problems are reported, not raised.
    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport>;

    /// Asks whether `events` may be queued now for later delivery into
    /// this store (a queue calls it before it admits them; delivery then
    /// calls `add_events`, which asks again). A store alone accepts; a
    /// policy wrapper consults its policy.
    async fn admit_events(
        &self,
        _scope: &MemoryScope,
        _session: &SessionId,
        _events: &[Event],
        _opts: &CallOptions,
    ) -> Result<()> {
        Ok(())
    }

    /// Lexical search within the scope.
    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults>;

    /// One entry, or `NotFound`.
    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry>;

    /// Deletes one entry, and in the same operation every entry derived
    /// from it (directly or not: erasure follows lineage); returns how
    /// many it removed, 0 when it did not exist. A hold or retention on
    /// any of them refuses the whole deletion.
    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64>;

    /// Deletes every entry of the session and advances the session's
    /// erasure epoch in the same step (even when it held none); returns
    /// how many entries went. A deletion refused (retention, hold)
    /// changes nothing.
    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64>;

    /// Deletes every entry of the scope and advances its erasure epoch in
    /// the same step; returns how many entries were removed and the new
    /// epoch.
    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure>;

    /// The scope's current erasure epoch (0 until its first erasure).
    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64>;

    /// The scope's and `session`'s current erasure epochs (both 0 until
    /// their first erasure): what a queue or a runner reads before it
    /// admits work, and carries with its writes.
    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence>;

    /// One page of the scope's live entries, newest or oldest first, with
    /// an opaque cursor to the next page.
    async fn list_entries(
        &self,
        _scope: &MemoryScope,
        _request: &ListRequest,
        _opts: &CallOptions,
    ) -> Result<EntryPage> {
        Err(Error::Unsupported {
            operation: "list_entries",
            backend: "this store",
        })
    }

    /// One page of the scope's live entries for an export, read from the
    /// store's own storage (a durable store does not load the scope's
    /// search state for it), in an order the store chooses, with an
    /// opaque cursor to the next page.
    async fn export_entries(
        &self,
        _scope: &MemoryScope,
        _request: &ExportRequest,
        _opts: &CallOptions,
    ) -> Result<EntryPage> {
        Err(Error::Unsupported {
            operation: "export_entries",
            backend: "this store",
        })
    }

    /// Deletes up to `max` expired entries (neither held nor retained),
    /// across scopes, earliest expiry first, in one durable step each
    /// batch; reports how many and whether more are due. Every entry of
    /// the scopes in `spare` stays (the policy's current legal holds,
    /// which may be newer than the entries' own obligations).
    async fn sweep_expired(
        &self,
        _max: u64,
        _spare: &[MemoryScope],
        _opts: &CallOptions,
    ) -> Result<Sweep> {
        Err(Error::Unsupported {
            operation: "sweep_expired",
            backend: "this store",
        })
    }

    /// Replaces a live entry's content and metadata as a new revision
    /// under the same id, in one step with its search state (the old text
    /// no longer matches, the new text does). The same content and
    /// metadata again change nothing (`changed: false`). At most
    /// `max_revisions` revisions are kept: beyond, the oldest is dropped,
    /// which retention and legal hold refuse as any deletion. A later add
    /// under the entry's id is a duplicate (see
    /// [`MemoryEntry::is_resubmission`]). Expired or absent: `NotFound`.
    async fn update_entry(
        &self,
        _scope: &MemoryScope,
        _id: &EntryId,
        _update: &EntryUpdate,
        _opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        Err(Error::Unsupported {
            operation: "update_entry",
            backend: "this store",
        })
    }

    /// A live entry's kept revisions, newest first (the current one
    /// first; one revision for an entry never corrected).
    async fn entry_history(
        &self,
        _scope: &MemoryScope,
        _id: &EntryId,
        _opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        Err(Error::Unsupported {
            operation: "entry_history",
            backend: "this store",
        })
    }

    /// A live entry's lineage: its sources and the live entries derived
    /// from it (see [`crate::lineage`]).
    async fn entry_lineage(
        &self,
        _scope: &MemoryScope,
        _id: &EntryId,
        _opts: &CallOptions,
    ) -> Result<crate::lineage::Lineage> {
        Err(Error::Unsupported {
            operation: "entry_lineage",
            backend: "this store",
        })
    }

    /// Restores exported entries under their own ids (see
    /// [`crate::import`]): idempotent, never over an existing id, never
    /// into an erased session; quotas and the epoch fence apply.
    async fn import_entries(
        &self,
        _scope: &MemoryScope,
        _entries: &[ImportedEntry],
        _opts: &WriteOptions,
    ) -> Result<ImportReport> {
        Err(Error::Unsupported {
            operation: "import_entries",
            backend: "this store",
        })
    }

    /// One page of the scope's erasure records (see [`crate::erasure`]),
    /// for an export.
    async fn export_erasures(
        &self,
        _scope: &MemoryScope,
        _request: &ErasureRequest,
        _opts: &CallOptions,
    ) -> Result<ErasurePage> {
        Err(Error::Unsupported {
            operation: "export_erasures",
            backend: "this store",
        })
    }

    /// Restores an export's erasures before its entries, in one step: a
    /// scope never held takes the export's epoch, one held at another
    /// epoch is refused (`StaleEpoch`: erased since the export;
    /// `FutureEpoch`: the export comes from elsewhere), and the records
    /// are added to the scope's (session epochs only ever rise).
    async fn import_erasures(
        &self,
        _scope: &MemoryScope,
        _erasures: &ImportedErasures,
        _opts: &CallOptions,
    ) -> Result<ErasureImport> {
        Err(Error::Unsupported {
            operation: "import_erasures",
            backend: "this store",
        })
    }

    /// One page of the apps that hold memory, from the store's own index
    /// of scopes (not a scan of entries), in byte order.
    async fn list_apps(&self, _request: &NamesRequest, _opts: &CallOptions) -> Result<NamePage> {
        Err(Error::Unsupported {
            operation: "list_apps",
            backend: "this store",
        })
    }

    /// One page of an app's users that hold memory, from the same index.
    async fn list_users(
        &self,
        _app: &hippocamp_core::AppName,
        _request: &NamesRequest,
        _opts: &CallOptions,
    ) -> Result<NamePage> {
        Err(Error::Unsupported {
            operation: "list_users",
            backend: "this store",
        })
    }

    /// Content-free counters.
    async fn status(&self) -> Result<StoreStatus>;

    /// Brings a scope's in-memory state (e.g. a durable store's search
    /// index) into memory ahead of its first operation. A router calls it
    /// when a scope becomes active. Stores without such state do nothing.
    async fn activate_scope(&self, _scope: &MemoryScope) -> Result<()> {
        Ok(())
    }

    /// Releases a scope's in-memory state; its stored data stays and is
    /// reloaded on next use. Only durable stores may release anything: a
    /// router never calls this on a volatile store.
    fn release_scope(&self, _scope: &MemoryScope) {}
}

/// A layer over another store that changes only some operations.
///
/// A wrapper (a router, a reply check, a policy, a queue's erasure
/// notices) implements this trait instead of [`MemoryStore`]: every
/// method it does not write forwards to [`inner`](Self::inner) unchanged,
/// and a blanket implementation makes every layer a [`MemoryStore`]. So a
/// method added to the contract is one edit here, not one per wrapper; a
/// layer that must decide every operation (the policy, the reply check)
/// says so with `#[deny(clippy::missing_trait_methods)]` on its impl.
/// `Arc<S>` and `Box<S>` are layers that change nothing.
#[async_trait]
pub trait MemoryLayer: Send + Sync + fmt::Debug {
    /// The store underneath.
    type Inner: MemoryStore + ?Sized;

    /// The store underneath.
    fn inner(&self) -> &Self::Inner;

    /// See [`MemoryStore::capabilities`].
    fn capabilities(&self) -> Capabilities {
        self.inner().capabilities()
    }

    /// See [`MemoryStore::add_entry`].
    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        self.inner().add_entry(scope, entry, opts).await
    }

    /// See [`MemoryStore::add_events`].
    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        self.inner().add_events(scope, session, events, opts).await
    }

    /// See [`MemoryStore::admit_events`].
    async fn admit_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &CallOptions,
    ) -> Result<()> {
        self.inner()
            .admit_events(scope, session, events, opts)
            .await
    }

    /// See [`MemoryStore::search`].
    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        self.inner().search(scope, request, opts).await
    }

    /// See [`MemoryStore::get_entry`].
    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        self.inner().get_entry(scope, id, opts).await
    }

    /// See [`MemoryStore::delete_entry`].
    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        self.inner().delete_entry(scope, id, opts).await
    }

    /// See [`MemoryStore::delete_session`].
    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        self.inner().delete_session(scope, session, opts).await
    }

    /// See [`MemoryStore::delete_user`].
    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        self.inner().delete_user(scope, opts).await
    }

    /// See [`MemoryStore::erasure_epoch`].
    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner().erasure_epoch(scope, opts).await
    }

    /// See [`MemoryStore::erasure_fence`].
    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        self.inner().erasure_fence(scope, session, opts).await
    }

    /// See [`MemoryStore::list_entries`].
    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        self.inner().list_entries(scope, request, opts).await
    }

    /// See [`MemoryStore::export_entries`].
    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &ExportRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        self.inner().export_entries(scope, request, opts).await
    }

    /// See [`MemoryStore::sweep_expired`].
    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        self.inner().sweep_expired(max, spare, opts).await
    }

    /// See [`MemoryStore::update_entry`].
    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        self.inner().update_entry(scope, id, update, opts).await
    }

    /// See [`MemoryStore::entry_history`].
    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        self.inner().entry_history(scope, id, opts).await
    }

    /// See [`MemoryStore::entry_lineage`].
    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<crate::lineage::Lineage> {
        self.inner().entry_lineage(scope, id, opts).await
    }

    /// See [`MemoryStore::import_entries`].
    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        self.inner().import_entries(scope, entries, opts).await
    }

    /// See [`MemoryStore::export_erasures`].
    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &ErasureRequest,
        opts: &CallOptions,
    ) -> Result<ErasurePage> {
        self.inner().export_erasures(scope, request, opts).await
    }

    /// See [`MemoryStore::import_erasures`].
    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &ImportedErasures,
        opts: &CallOptions,
    ) -> Result<ErasureImport> {
        self.inner().import_erasures(scope, erasures, opts).await
    }

    /// See [`MemoryStore::list_apps`].
    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        self.inner().list_apps(request, opts).await
    }

    /// See [`MemoryStore::list_users`].
    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        self.inner().list_users(app, request, opts).await
    }

    /// See [`MemoryStore::status`].
    async fn status(&self) -> Result<StoreStatus> {
        self.inner().status().await
    }

    /// See [`MemoryStore::activate_scope`].
    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        self.inner().activate_scope(scope).await
    }

    /// See [`MemoryStore::release_scope`].
    fn release_scope(&self, scope: &MemoryScope) {
        self.inner().release_scope(scope);
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<L: MemoryLayer> MemoryStore for L {
    fn capabilities(&self) -> Capabilities {
        MemoryLayer::capabilities(self)
    }
    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        MemoryLayer::add_entry(self, scope, entry, opts).await
    }
    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        MemoryLayer::add_events(self, scope, session, events, opts).await
    }
    async fn admit_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &CallOptions,
    ) -> Result<()> {
        MemoryLayer::admit_events(self, scope, session, events, opts).await
    }
    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        MemoryLayer::search(self, scope, request, opts).await
    }
    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        MemoryLayer::get_entry(self, scope, id, opts).await
    }
    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        MemoryLayer::delete_entry(self, scope, id, opts).await
    }
    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        MemoryLayer::delete_session(self, scope, session, opts).await
    }
    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        MemoryLayer::delete_user(self, scope, opts).await
    }
    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        MemoryLayer::erasure_epoch(self, scope, opts).await
    }
    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        MemoryLayer::erasure_fence(self, scope, session, opts).await
    }
    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        MemoryLayer::list_entries(self, scope, request, opts).await
    }
    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &ExportRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        MemoryLayer::export_entries(self, scope, request, opts).await
    }
    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        MemoryLayer::sweep_expired(self, max, spare, opts).await
    }
    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        MemoryLayer::update_entry(self, scope, id, update, opts).await
    }
    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        MemoryLayer::entry_history(self, scope, id, opts).await
    }
    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<crate::lineage::Lineage> {
        MemoryLayer::entry_lineage(self, scope, id, opts).await
    }
    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        MemoryLayer::import_entries(self, scope, entries, opts).await
    }
    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &ErasureRequest,
        opts: &CallOptions,
    ) -> Result<ErasurePage> {
        MemoryLayer::export_erasures(self, scope, request, opts).await
    }
    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &ImportedErasures,
        opts: &CallOptions,
    ) -> Result<ErasureImport> {
        MemoryLayer::import_erasures(self, scope, erasures, opts).await
    }
    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        MemoryLayer::list_apps(self, request, opts).await
    }
    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        MemoryLayer::list_users(self, app, request, opts).await
    }
    async fn status(&self) -> Result<StoreStatus> {
        MemoryLayer::status(self).await
    }
    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        MemoryLayer::activate_scope(self, scope).await
    }
    fn release_scope(&self, scope: &MemoryScope) {
        MemoryLayer::release_scope(self, scope);
    }
}

impl<T: MemoryStore + ?Sized> MemoryLayer for Arc<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}

impl<T: MemoryStore + ?Sized> MemoryLayer for Box<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}
