//! The conformance suite every [`MemoryStore`] and wrapper runs.
//!
//! Each scenario is a public async function taking a [`StoreFactory`], so a
//! backend crate runs the same behaviour checks as the in-memory store:
//!
//! ```ignore
//! hippocamp_memory::memory_conformance_tests!(MyFactory::new());
//! ```
//!
//! expands to one `#[tokio::test]` per scenario plus the proptest model
//! test ([`model::run`]). Scenarios create stores with the configuration
//! they need (small quotas, small content limits) through the factory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines,
    clippy::missing_panics_doc,
    missing_docs
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hippocamp_core::secrets::Redaction;
use hippocamp_core::{
    CallOptions, Deadline, EntryId, Error, Field, IdempotencyKey, MemoryLimits, MemoryScope,
    Problem, QuotaLimit, SecretKind, SessionId,
};
use serde_json::{Value, json};

use crate::entry::{EntryUpdate, NewEntry, Provenance};
use crate::event::{Content, Event, Part, SkipReason};
use crate::store::{MemoryStore, ScoreType, SearchRequest, WriteOptions};
use crate::{InMemoryStore, MemoryConfig};

pub mod erasure;
pub mod lifecycle;
pub mod lineage;
pub mod model;
pub mod passages;
pub mod revisions;

pub use erasure::*;
pub use lifecycle::*;
pub use lineage::*;
pub use passages::*;
pub use revisions::*;

/// Creates fresh, empty stores for the suite.
#[async_trait]
pub trait StoreFactory: Send + Sync {
    /// A new empty store with `config`.
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore>;

    /// For stores that embed with a counting embedder: the texts it has
    /// embedded so far (the scenarios on what is embedded read it).
    fn embedded_texts(&self) -> Option<u64> {
        None
    }
}

/// A store that keeps something alive (a temporary directory, a server)
/// for as long as the store is used.
pub struct Guarded {
    store: Box<dyn MemoryStore>,
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl Guarded {
    /// `store`, keeping `guard` alive until the store is dropped (the store
    /// is dropped first).
    pub fn new(store: impl MemoryStore + 'static, guard: impl std::any::Any + Send + Sync) -> Self {
        Self {
            store: Box::new(store),
            _guard: Box::new(guard),
        }
    }
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for Guarded {
    type Target = dyn MemoryStore;
    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

impl crate::store::MemoryLayer for Guarded {
    type Inner = dyn MemoryStore;
    fn inner(&self) -> &Self::Inner {
        &*self.store
    }
}

/// Factory of [`InMemoryStore`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct InMemoryFactory;

#[async_trait]
impl StoreFactory for InMemoryFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        Arc::new(InMemoryStore::new(config).unwrap())
    }
}

/// In-memory stores that embed with the feature-hashing embedder (one
/// counting embedder shared by the factory's stores).
#[derive(Debug)]
pub struct EmbeddedInMemoryFactory {
    /// The embedder of every store it opens.
    pub embedder: hippocamp_embed::hash::HashEmbedder,
}

impl Default for EmbeddedInMemoryFactory {
    fn default() -> Self {
        Self {
            embedder: hippocamp_embed::hash::HashEmbedder::new(64),
        }
    }
}

#[async_trait]
impl StoreFactory for EmbeddedInMemoryFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        Arc::new(
            InMemoryStore::new(config)
                .unwrap()
                .with_embedder(Arc::new(self.embedder.clone())),
        )
    }

    fn embedded_texts(&self) -> Option<u64> {
        Some(self.embedder.texts_embedded())
    }
}

/// Expands to one test per vector and hybrid scenario for a factory whose
/// stores have an embedder.
#[macro_export]
macro_rules! vector_conformance_tests {
    ($factory:expr) => {
        $crate::vector_conformance_tests!(guard = (|| true), $factory);
    };
    (guard = $guard:expr, $factory:expr) => {
        $crate::memory_conformance_tests!(@cases $guard, $factory;
            vector_modes_are_reported_and_hybrid_is_the_default,
            vector_search_ranks_by_similarity_and_forgets_deleted_entries,
            hybrid_filters_and_budget_apply_to_the_fused_list,
            a_selective_filter_finds_in_hybrid_what_lexical_finds,
            vector_search_never_crosses_scopes,
            erased_users_leave_vector_search,
            only_what_would_be_new_is_embedded,
            large_batches_are_embedded_within_the_provider_bounds,
            vectors_count_against_byte_quotas,
            explained_hits_name_each_stage,
        );
    };
}

/// Expands to one test per conformance scenario, plus the model test, for
/// the factory expression given. With `guard = f`, each test returns at
/// once when `f()` is false (a backend whose server the environment lacks
/// skips, as `hippocamp_testkit` decides).
#[macro_export]
macro_rules! memory_conformance_tests {
    ($factory:expr) => {
        $crate::memory_conformance_tests!(guard = (|| true), $factory);
    };
    (guard = $guard:expr, $factory:expr) => {
        $crate::memory_conformance_tests!(@cases $guard, $factory;
            capabilities_report_contract_and_limits,
            neighbours_support_a_turn_and_can_be_turned_off,
            context_returns_the_turns_around_a_hit,
            time_in_questions_moves_turns_said_then,
            long_entries_rank_by_their_best_passage,
            keyed_add_is_idempotent_and_redacts,
            search_finds_with_filter_and_provenance,
            scopes_are_isolated,
            idempotency_conflict_keeps_original,
            add_events_reports_added_duplicates_skipped,
            secrets_in_events_are_redacted,
            delete_session_is_idempotent,
            delete_entry_and_user_are_idempotent,
            erasure_is_sticky,
            content_limits_are_enforced,
            secret_content_is_redacted,
            scope_entry_quota,
            scope_byte_quota,
            global_quotas_span_scopes,
            event_batch_is_atomic_under_quota,
            expired_deadline_never_writes,
            filter_semantics,
            bad_input_gets_typed_errors,
            ranking_is_deterministic,
            byte_budget_skips_and_continues,
            bm25_statistics_are_per_scope,
            event_fields_become_entry_fields,
            too_many_events_are_rejected,
            erasure_epoch_fences_stale_writes,
            status_counts_entries,
            concurrent_keyed_adds_make_one_entry,
            readd_after_delete,
            search_modes_match_capabilities,
            expiry_hides_an_entry_at_the_exact_moment,
            sweeps_are_bounded_and_spare_guarded_entries,
            retention_and_legal_hold_refuse_deletion,
            duplicates_keep_their_obligations,
            listing_pages_with_cursors,
            metadata_rules_choose_obligations,
            export_pages_through_every_live_entry_once,
            a_sweep_spares_the_scopes_it_is_told_to,
            corrections_are_revisions_under_the_same_id,
            a_correction_takes_the_shorter_lifetime_it_is_granted,
            history_is_bounded_and_erased_with_the_entry,
            export_and_import_round_trip,
            apps_and_users_are_indexed,
            a_session_erasure_fences_writes_admitted_before_it,
            a_delivery_racing_a_session_erasure_never_writes_it_back,
            erasures_leave_records_that_are_listed_and_counted,
            imported_erasures_fence_a_fresh_scope,
            origins_are_recorded_and_filter_search,
            a_newer_fact_key_supersedes_an_older_one,
            derived_entries_hide_what_they_merge_and_need_live_sources,
            erasing_a_source_erases_what_was_derived_from_it,
            a_derived_entry_lives_no_longer_than_its_sources,
            a_hold_on_a_derived_entry_refuses_erasing_its_source,
            an_import_keeps_a_derived_entry_only_with_live_sources,
            file_entries_follow_their_versions,
        );
        #[test]
        fn model_test() {
            if !($guard)() {
                return;
            }
            $crate::conformance::model::run(std::sync::Arc::new($factory), 48);
        }
    };
    (@cases $guard:expr, $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if !($guard)() {
                    return;
                }
                let factory = $factory;
                $crate::conformance::$name(&factory).await;
            }
        )*
    };
}

/// The core suite checks the lexical contract, so it asks for lexical
/// search explicitly: a store with an embedder would default to hybrid.
pub(crate) fn lexical(query: impl Into<String>) -> SearchRequest {
    SearchRequest::new(query).mode(crate::SearchMode::Lexical)
}

fn scope(app: &str, user: &str) -> MemoryScope {
    MemoryScope::parse(app, user).unwrap()
}

fn w() -> WriteOptions {
    WriteOptions::default()
}

fn c() -> CallOptions {
    CallOptions::default()
}

fn obj(v: Value) -> hippocamp_core::Metadata {
    v.as_object().unwrap().clone()
}

fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::new(k).unwrap()
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

async fn default_store(f: &dyn StoreFactory) -> Arc<dyn MemoryStore> {
    f.open(MemoryConfig::default()).await
}

/// What one vector of the factory's embedder counts against byte quotas
/// (0 for stores that do not embed).
pub(crate) async fn vector_bytes(f: &dyn StoreFactory) -> u64 {
    let store = f.open(MemoryConfig::default()).await;
    store
        .capabilities()
        .search
        .embedder
        .map_or(0, |e| 4 * e.dimension as u64)
}

async fn with_limits(f: &dyn StoreFactory, limits: MemoryLimits) -> Arc<dyn MemoryStore> {
    f.open(MemoryConfig {
        limits,
        ..MemoryConfig::default()
    })
    .await
}

async fn ids(store: &dyn MemoryStore, scope: &MemoryScope, req: SearchRequest) -> Vec<EntryId> {
    store
        .search(scope, &req, &c())
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.entry.id)
        .collect()
}

async fn add(store: &dyn MemoryStore, scope: &MemoryScope, content: &str) -> EntryId {
    store
        .add_entry(scope, NewEntry::new(content), &w())
        .await
        .unwrap()
        .entry
        .id
}

fn is_invalid(e: &Error, field: Field) -> bool {
    matches!(e, Error::InvalidArgument { field: f, .. } if *f == field)
}

pub async fn capabilities_report_contract_and_limits(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let caps = store.capabilities();
    assert_eq!(caps.contract_version, crate::store::CONTRACT_VERSION);
    assert_eq!(caps.scope, "app_user");
    assert!(caps.search.modes.contains(&"lexical".to_owned()));
    assert!(caps.idempotent_ingestion && caps.incremental_events);
    assert!(caps.erasure_epoch_fencing);
    assert!(caps.per_scope_quota && caps.global_quota);
    for (name, default, max) in [
        ("max_content_bytes", 65_536, 1_048_576),
        ("max_metadata_bytes", 16_384, 262_144),
        ("max_metadata_depth", 8, 32),
        ("max_metadata_nodes", 512, 100_000),
        ("max_query_bytes", 4_096, 65_536),
        ("max_results", 50, 1_000),
        ("max_result_bytes", 262_144, 1_048_576),
        ("max_events_per_request", 1_000, 10_000),
        ("max_entries_per_scope", 100_000, 10_000_000),
        ("max_bytes_per_scope", 268_435_456, 10_737_418_240),
        ("max_entries_total", 10_000_000, 1_000_000_000),
        ("max_bytes_total", 17_179_869_184, 1_099_511_627_776),
        ("call_timeout_ms", 5_000, 60_000),
    ] {
        let l = caps
            .limits
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("limit {name} not reported"));
        assert_eq!(
            (l.value, l.default, l.max),
            (default, default, max),
            "{name}"
        );
    }
    let small = with_limits(
        f,
        MemoryLimits {
            max_results: 7,
            ..MemoryLimits::default()
        },
    )
    .await;
    let l = small.capabilities().limits;
    assert_eq!(l.iter().find(|l| l.name == "max_results").unwrap().value, 7);
}

pub async fn keyed_add_is_idempotent_and_redacts(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let input = NewEntry::new("OTP supervisors restart failed child processes")
        .metadata(obj(json!({"password": "hunter2", "topic": "otp"})))
        .idempotency_key(key("session-7:fact-1"));
    let first = store.add_entry(&s, input.clone(), &w()).await.unwrap();
    assert!(!first.duplicate);
    assert_eq!(first.entry.metadata["password"], json!("[REDACTED]"));
    assert_eq!(first.entry.metadata["topic"], json!("otp"));
    assert_eq!(
        first.entry.id,
        EntryId::derive(&s, &key("session-7:fact-1"))
    );
    assert_eq!(first.entry.scope, s);
    assert_eq!(
        first.entry.digest,
        hippocamp_core::Sha256Digest::of(first.entry.content.as_bytes())
    );
    let second = store.add_entry(&s, input, &w()).await.unwrap();
    assert!(second.duplicate);
    assert_eq!(second.entry, first.entry);
    assert_eq!(
        ids(&*store, &s, lexical("supervisors")).await,
        vec![first.entry.id]
    );
    let got = store.get_entry(&s, &first.entry.id, &c()).await.unwrap();
    assert_eq!(got, first.entry);
    assert!(matches!(
        store.get_entry(&s, &EntryId::random(), &c()).await,
        Err(Error::NotFound(_))
    ));
}

pub async fn search_finds_with_filter_and_provenance(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let prov = Provenance {
        session_id: Some(sid("session-7")),
        author: Some(hippocamp_core::Author::new("user").unwrap()),
        ..Provenance::default()
    };
    let hit = store
        .add_entry(
            &s,
            NewEntry::new("OTP supervisors restart failed child processes")
                .metadata(obj(json!({"topic": "otp"})))
                .provenance(prov.clone()),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    store
        .add_entry(
            &s,
            NewEntry::new("Elixir supervisors restart too")
                .metadata(obj(json!({"topic": "elixir"}))),
            &w(),
        )
        .await
        .unwrap();
    let res = store
        .search(
            &s,
            &lexical("supervisors restart").filter(json!({"topic": "otp"})),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(res.hits.len(), 1);
    assert!(!res.skipped_over_budget);
    let h = &res.hits[0];
    assert_eq!(*h.entry, hit);
    assert_eq!(h.score_type, ScoreType::Bm25);
    assert!(h.score > 0.0 && h.score.is_finite());
    assert_eq!(h.entry.provenance, prov);
    assert_eq!(ids(&*store, &s, lexical("supervisors")).await.len(), 2);
}

pub async fn scopes_are_isolated(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let a = scope("app", "alice");
    let other_app = scope("other", "alice");
    let other_user = scope("app", "bob");
    let k = key("fact");
    let e = store
        .add_entry(
            &a,
            NewEntry::new("alice likes green tea").idempotency_key(k.clone()),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    for s in [&other_app, &other_user] {
        assert!(ids(&*store, s, lexical("green tea")).await.is_empty());
        assert!(matches!(
            store.get_entry(s, &e.id, &c()).await,
            Err(Error::NotFound(_))
        ));
        assert_eq!(store.delete_entry(s, &e.id, &c()).await.unwrap(), 0);
        assert_eq!(store.delete_user(s, &c()).await.unwrap().deleted, 0);
        assert_eq!(store.delete_session(s, &sid("x"), &c()).await.unwrap(), 0);
        // The same key in another scope is a different entry, not a duplicate.
        let other = store
            .add_entry(
                s,
                NewEntry::new("other green tea").idempotency_key(k.clone()),
                &w(),
            )
            .await
            .unwrap();
        assert!(!other.duplicate);
        assert_ne!(other.entry.id, e.id);
        assert_eq!(other.entry.scope, *s);
    }
    assert_eq!(store.get_entry(&a, &e.id, &c()).await.unwrap(), e);
    let hits = store
        .search(&a, &lexical("green tea"), &c())
        .await
        .unwrap()
        .hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].entry.scope, a);
}

pub async fn idempotency_conflict_keeps_original(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let first = store
        .add_entry(
            &s,
            NewEntry::new("first content").idempotency_key(key("k")),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    let err = store
        .add_entry(
            &s,
            NewEntry::new("second content").idempotency_key(key("k")),
            &w(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IdempotencyConflict(id) if id == first.id));
    let err = store
        .add_entry(
            &s,
            NewEntry::new("first content")
                .metadata(obj(json!({"x": 1})))
                .idempotency_key(key("k")),
            &w(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IdempotencyConflict(_)));
    assert_eq!(store.get_entry(&s, &first.id, &c()).await.unwrap(), first);
    assert!(ids(&*store, &s, lexical("second")).await.is_empty());
}

fn sample_events() -> Vec<Event> {
    let mut partial = Event::text("e3", "user", 3, "partial thought about lisbon");
    partial.partial = true;
    vec![
        Event::text("e1", "user", 1, "I moved to Lisbon last spring"),
        Event::text("e2", "assistant", 2, "Lisbon has lovely trams"),
        partial,
        Event::text("e4", "runner", 4, "runner bookkeeping about lisbon"),
        Event::text("e5", "user", 5, "password=hunter2 lisbon"),
        Event {
            id: "e6".into(),
            author: "assistant".into(),
            timestamp_ms: 6,
            partial: false,
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![Part::function_call(json!({"name": "lookup"}))],
            }),
            metadata: None,
        },
        Event::text("e7", "user", -7, "negative timestamp lisbon"),
        Event::text("e8", "tool", 8, "tool says lisbon"),
    ]
}

pub async fn add_events_reports_added_duplicates_skipped(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let session = sid("session-7");
    let report = store
        .add_events(&s, &session, &sample_events(), &w())
        .await
        .unwrap();
    assert_eq!(
        report.added.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![0, 1, 4]
    );
    assert!(report.duplicates.is_empty());
    // The event with a password is kept, the password redacted.
    assert_eq!(
        report.added[2].redacted,
        [Redaction {
            kind: SecretKind::CredentialAssignment,
            start: 9,
            end: 23
        }]
    );
    assert!(report.added[0].redacted.is_empty());
    let kept = store
        .get_entry(&s, &report.added[2].entry_id, &c())
        .await
        .unwrap();
    assert_eq!(kept.content, "password=[REDACTED]");
    let reasons: Vec<(usize, SkipReason)> = report
        .skipped
        .iter()
        .map(|s| (s.index, s.reason.clone()))
        .collect();
    assert_eq!(reasons.len(), 5);
    assert_eq!(reasons[0], (2, SkipReason::Partial));
    assert_eq!(reasons[1], (3, SkipReason::ControlAuthor));
    assert_eq!(reasons[2], (5, SkipReason::NoText));
    assert!(matches!(reasons[3], (6, SkipReason::Malformed(_))));
    assert_eq!(reasons[4], (7, SkipReason::ControlAuthor));
    assert_eq!(report.skipped[0].event_id.as_deref(), Some("e3"));
    // Repeating the same call is safe, and reports the redaction again.
    let again = store
        .add_events(&s, &session, &sample_events(), &w())
        .await
        .unwrap();
    assert!(again.added.is_empty());
    assert_eq!(again.duplicates.len(), 3);
    assert_eq!(again.duplicates[2].redacted, report.added[2].redacted);
    assert_eq!(again.duplicates[0].entry_id, report.added[0].entry_id);
    // The two turns that say it, and the redacted one next to them
    // (session cohesion: it is their neighbour).
    assert_eq!(ids(&*store, &s, lexical("lisbon")).await.len(), 3);
    // In-batch repeats: identical is a duplicate, different is a conflict.
    let batch = vec![
        Event::text("n1", "user", 10, "new fact about porto"),
        Event::text("n1", "user", 10, "new fact about porto"),
        Event::text("n1", "user", 10, "different fact about porto"),
        Event::text("e1", "user", 1, "changed lisbon text"),
    ];
    let r = store.add_events(&s, &session, &batch, &w()).await.unwrap();
    assert_eq!(r.added.len(), 1);
    assert_eq!(r.duplicates.len(), 1);
    assert_eq!(r.duplicates[0].index, 1);
    assert_eq!(
        r.skipped
            .iter()
            .map(|s| (s.index, s.reason.clone()))
            .collect::<Vec<_>>(),
        vec![(2, conflict()), (3, conflict())]
    );
}

fn conflict() -> SkipReason {
    SkipReason::IdempotencyConflict(crate::event::EVENT_ID_CONFLICT.to_owned())
}

/// Secrets in events are redacted, never stored: the turns are kept and
/// found by their other words, the secrets are found nowhere.
pub async fn secrets_in_events_are_redacted(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let events = vec![
        Event::text(
            "a",
            "user",
            1,
            "my github_token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
        Event::text(
            "b",
            "user",
            2,
            "Bearer abcdefghij0123456789 for the github api",
        ),
        Event::text("c", "user", 3, "I use github every day"),
    ];
    let r = store
        .add_events(&s, &sid("s"), &events, &w())
        .await
        .unwrap();
    assert_eq!(r.added.len(), 3);
    assert!(r.skipped.is_empty());
    let kinds: Vec<Vec<SecretKind>> = r
        .added
        .iter()
        .map(|e| e.redacted.iter().map(|x| x.kind).collect())
        .collect();
    assert_eq!(
        kinds,
        [
            vec![SecretKind::CredentialAssignment],
            vec![SecretKind::BearerToken],
            vec![]
        ]
    );
    let mut contents: Vec<String> = store
        .search(&s, &lexical("github"), &c())
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.entry.content.clone())
        .collect();
    contents.sort();
    assert_eq!(
        contents,
        [
            "Bearer [REDACTED] for the github api",
            "I use github every day",
            "my github_token: [REDACTED]",
        ]
    );
    for secret in [
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghij0123456789",
    ] {
        assert!(
            ids(&*store, &s, lexical(secret)).await.is_empty(),
            "{secret}"
        );
    }
}

/// Erased entries stay erased: the same events again, straight or after a
/// delete of the entry, the session or the user, are skipped as `erased`;
/// under a new session id they are remembered again.
pub async fn erasure_is_sticky(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "sticky");
    let events = |n: i64| -> Vec<Event> {
        (0..n)
            .map(|i| Event::text(format!("e{i}"), "user", 1 + i, format!("fact number {i}")))
            .collect()
    };
    let reasons = |r: &crate::event::IngestReport| -> Vec<(usize, SkipReason)> {
        r.skipped
            .iter()
            .map(|s| (s.index, s.reason.clone()))
            .collect()
    };
    let first = store
        .add_events(&s, &sid("s1"), &events(3), &w())
        .await
        .unwrap();
    assert_eq!(first.added.len(), 3);
    // One entry erased: only its event is refused.
    let gone = first.added[0].entry_id;
    assert_eq!(store.delete_entry(&s, &gone, &c()).await.unwrap(), 1);
    let again = store
        .add_events(&s, &sid("s1"), &events(3), &w())
        .await
        .unwrap();
    assert_eq!(reasons(&again), vec![(0, SkipReason::Erased)]);
    assert_eq!(again.duplicates.len(), 2);
    assert!(matches!(
        store.get_entry(&s, &gone, &c()).await,
        Err(Error::NotFound(_))
    ));
    // The session erased: every event of it, and a new one is still fine.
    assert_eq!(store.delete_session(&s, &sid("s1"), &c()).await.unwrap(), 2);
    let again = store
        .add_events(&s, &sid("s1"), &events(4), &w())
        .await
        .unwrap();
    assert_eq!(
        reasons(&again),
        vec![
            (0, SkipReason::Erased),
            (1, SkipReason::Erased),
            (2, SkipReason::Erased)
        ]
    );
    assert_eq!(again.added.len(), 1);
    // A new session id starts over on purpose.
    let other = store
        .add_events(&s, &sid("s2"), &events(2), &w())
        .await
        .unwrap();
    assert_eq!(other.added.len(), 2);
    // The user erased: nothing of either session comes back, even at the
    // new epoch.
    let erasure = store.delete_user(&s, &c()).await.unwrap();
    assert_eq!(erasure.deleted, 3);
    for session in ["s1", "s2"] {
        let again = store
            .add_events(
                &s,
                &sid(session),
                &events(2),
                &WriteOptions::default().epoch(erasure.epoch),
            )
            .await
            .unwrap();
        assert!(again.added.is_empty(), "{session}: {again:?}");
        assert_eq!(
            reasons(&again),
            vec![(0, SkipReason::Erased), (1, SkipReason::Erased)]
        );
    }
    assert!(ids(&*store, &s, lexical("fact")).await.is_empty());
    // Another scope with the same event ids is not affected.
    let o = scope("app", "sticky-other");
    let r = store
        .add_events(&o, &sid("s1"), &events(2), &w())
        .await
        .unwrap();
    assert_eq!(r.added.len(), 2);
}

pub async fn delete_session_is_idempotent(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    store
        .add_events(&s, &sid("s1"), &sample_events(), &w())
        .await
        .unwrap();
    store
        .add_events(
            &s,
            &sid("s2"),
            &[Event::text("x1", "user", 1, "lisbon again")],
            &w(),
        )
        .await
        .unwrap();
    let keep = add(&*store, &s, "lisbon without a session").await;
    assert_eq!(store.delete_session(&s, &sid("s1"), &c()).await.unwrap(), 3);
    assert_eq!(store.delete_session(&s, &sid("s1"), &c()).await.unwrap(), 0);
    let left = ids(&*store, &s, lexical("lisbon")).await;
    assert_eq!(left.len(), 2);
    assert!(left.contains(&keep));
    assert_eq!(
        store.delete_session(&s, &sid("never"), &c()).await.unwrap(),
        0
    );
}

pub async fn delete_entry_and_user_are_idempotent(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let a = add(&*store, &s, "alpha fact").await;
    add(&*store, &s, "alpha other").await;
    add(&*store, &s, "alpha third").await;
    assert_eq!(store.delete_entry(&s, &a, &c()).await.unwrap(), 1);
    assert_eq!(store.delete_entry(&s, &a, &c()).await.unwrap(), 0);
    assert!(matches!(
        store.get_entry(&s, &a, &c()).await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(ids(&*store, &s, lexical("alpha")).await.len(), 2);
    assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 2);
    assert!(ids(&*store, &s, lexical("alpha")).await.is_empty());
    assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 0);
    let erased = store
        .delete_user(&scope("app", "nobody"), &c())
        .await
        .unwrap();
    assert_eq!((erased.deleted, erased.epoch), (0, 1));
}

pub async fn content_limits_are_enforced(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_content_bytes: 32,
            max_result_bytes: 64,
            ..MemoryLimits::default()
        },
    )
    .await;
    let s = scope("app", "u1");
    let e = store
        .add_entry(&s, NewEntry::new("x".repeat(33)), &w())
        .await
        .unwrap_err();
    // Over a size limit, named: not a malformed argument (the same
    // content never fits later).
    assert!(matches!(
        e,
        Error::TooLarge {
            limit: "max_content_bytes",
            max: 32
        }
    ));
    assert!(
        store
            .add_entry(&s, NewEntry::new("x".repeat(32)), &w())
            .await
            .is_ok()
    );
    for bad in ["", "nul\0inside"] {
        let e = store
            .add_entry(&s, NewEntry::new(bad), &w())
            .await
            .unwrap_err();
        assert!(is_invalid(&e, Field::Content), "{e}");
    }
    // Multi-byte UTF-8 is measured in bytes.
    let e = store
        .add_entry(&s, NewEntry::new("é".repeat(17)), &w())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::TooLarge { max: 32, .. }));
    assert_eq!(store.status().await.unwrap().entries, 1);
}

/// `add_entry` stores content with its secrets redacted and says where
/// they were; the secret is never stored, so never found.
pub async fn secret_content_is_redacted(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    for (text, kind) in [
        (
            "api_key: abcdefghijklmnop",
            SecretKind::CredentialAssignment,
        ),
        (
            "deploy with AKIAIOSFODNN7EXAMPLE",
            SecretKind::AwsAccessKeyId,
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            SecretKind::PemPrivateKey,
        ),
        ("token xoxb-123456789012-abcdefgh", SecretKind::SlackToken),
        ("db_password=hunter2", SecretKind::CredentialAssignment),
    ] {
        let out = store
            .add_entry(&s, NewEntry::new(text), &w())
            .await
            .unwrap();
        assert_eq!(out.redacted.len(), 1, "{text}");
        let r = out.redacted[0];
        assert_eq!(r.kind, kind, "{text}");
        let want = format!("{}[REDACTED]{}", &text[..r.start], &text[r.end..]);
        assert_eq!(out.entry.content, want, "{text}");
        let stored = store.get_entry(&s, &out.entry.id, &c()).await.unwrap();
        assert_eq!(stored.content, want);
        assert!(!stored.content.contains(&text[r.start..r.end]));
    }
    assert_eq!(store.status().await.unwrap().entries, 5);
    // Keyed: the same add again is a duplicate and says the same.
    let key = IdempotencyKey::new("k").unwrap();
    let keyed = || NewEntry::new("api_key: abcdefghijklmnop").idempotency_key(key.clone());
    let first = store.add_entry(&s, keyed(), &w()).await.unwrap();
    let again = store.add_entry(&s, keyed(), &w()).await.unwrap();
    assert!(again.duplicate);
    assert_eq!(again.redacted, first.redacted);
    // Text with no secret reports nothing.
    let plain = store
        .add_entry(&s, NewEntry::new("I keep my passwords in a manager"), &w())
        .await
        .unwrap();
    assert!(plain.redacted.is_empty());
}

pub async fn scope_entry_quota(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_entries_per_scope: 2,
            ..MemoryLimits::default()
        },
    )
    .await;
    let s = scope("app", "u1");
    let first = add(&*store, &s, "one").await;
    add(&*store, &s, "two").await;
    let e = store
        .add_entry(&s, NewEntry::new("three"), &w())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::QuotaExceeded {
            limit: QuotaLimit::EntriesPerScope(2)
        }
    ));
    // A duplicate is not a new entry and needs no room.
    let k = store
        .add_entry(
            &scope("app", "u2"),
            NewEntry::new("k").idempotency_key(key("k")),
            &w(),
        )
        .await
        .unwrap();
    assert!(!k.duplicate);
    add(&*store, &scope("app", "u2"), "other scope has room").await;
    assert!(
        store
            .add_entry(
                &scope("app", "u2"),
                NewEntry::new("k").idempotency_key(key("k")),
                &w()
            )
            .await
            .unwrap()
            .duplicate
    );
    store.delete_entry(&s, &first, &c()).await.unwrap();
    add(&*store, &s, "three").await;
}

pub async fn scope_byte_quota(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_bytes_per_scope: 1_000,
            ..MemoryLimits::default()
        },
    )
    .await;
    let s = scope("app", "u1");
    // Each entry counts content + "{}" + provenance JSON + 256.
    let big = "b".repeat(400);
    let id = add(&*store, &s, &big).await;
    let e = store
        .add_entry(&s, NewEntry::new(big.clone()), &w())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::QuotaExceeded {
            limit: QuotaLimit::BytesPerScope(1_000)
        }
    ));
    let status = store.status().await.unwrap();
    assert_eq!(status.entries, 1);
    store.delete_entry(&s, &id, &c()).await.unwrap();
    add(&*store, &s, &big).await;
}

pub async fn global_quotas_span_scopes(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_entries_per_scope: 2,
            max_entries_total: 3,
            ..MemoryLimits::default()
        },
    )
    .await;
    let a = scope("app", "a");
    let b = scope("app", "b");
    add(&*store, &a, "one").await;
    add(&*store, &a, "two").await;
    let b1 = add(&*store, &b, "three").await;
    let e = store
        .add_entry(&b, NewEntry::new("four"), &w())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::QuotaExceeded {
            limit: QuotaLimit::EntriesTotal(3)
        }
    ));
    store.delete_entry(&b, &b1, &c()).await.unwrap();
    add(&*store, &b, "four").await;
    assert_eq!(store.delete_user(&a, &c()).await.unwrap().deleted, 2);
    add(&*store, &b, "five").await;

    // Vectors count too (0 for a store that does not embed).
    let vector = vector_bytes(f).await;
    let bytes = with_limits(
        f,
        MemoryLimits {
            max_bytes_per_scope: 1_000 + vector,
            max_bytes_total: 1_500 + 2 * vector,
            ..MemoryLimits::default()
        },
    )
    .await;
    add(&*bytes, &a, &"a".repeat(600)).await;
    let e = bytes
        .add_entry(&b, NewEntry::new("b".repeat(600)), &w())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::QuotaExceeded {
                limit: QuotaLimit::BytesTotal(total)
            } if total == 1_500 + 2 * vector
        ),
        "{e}"
    );
    add(&*bytes, &b, "small").await;
}

pub async fn event_batch_is_atomic_under_quota(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_entries_per_scope: 3,
            ..MemoryLimits::default()
        },
    )
    .await;
    let s = scope("app", "u1");
    add(&*store, &s, "existing").await;
    let events: Vec<Event> = (0..3)
        .map(|i| Event::text(format!("e{i}"), "user", i, format!("fact number {i}")))
        .collect();
    let e = store
        .add_events(&s, &sid("s"), &events, &w())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::QuotaExceeded {
            limit: QuotaLimit::EntriesPerScope(3)
        }
    ));
    assert!(ids(&*store, &s, lexical("fact")).await.is_empty());
    assert_eq!(store.status().await.unwrap().entries, 1);
    let r = store
        .add_events(&s, &sid("s"), &events[..2], &w())
        .await
        .unwrap();
    assert_eq!(r.added.len(), 2);
}

pub async fn expired_deadline_never_writes(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let past = || {
        CallOptions::until(Deadline::at(
            Instant::now()
                .checked_sub(Duration::from_millis(1))
                .unwrap(),
        ))
    };
    let e = store
        .add_entry(&s, NewEntry::new("late write"), &WriteOptions::new(past()))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)));
    let e = store
        .add_events(
            &s,
            &sid("s"),
            &[Event::text("e", "user", 1, "late event")],
            &WriteOptions::new(past()),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)));
    assert!(ids(&*store, &s, lexical("late")).await.is_empty());
    let kept = add(&*store, &s, "kept fact").await;
    assert!(matches!(
        store.delete_entry(&s, &kept, &past()).await,
        Err(Error::Timeout(_))
    ));
    assert!(matches!(
        store.delete_session(&s, &sid("s"), &past()).await,
        Err(Error::Timeout(_))
    ));
    assert!(matches!(
        store.delete_user(&s, &past()).await,
        Err(Error::Timeout(_))
    ));
    assert_eq!(store.get_entry(&s, &kept, &c()).await.unwrap().id, kept);
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 0);
    // A short timeout that has not expired still works.
    let quick = WriteOptions::new(CallOptions::timeout_ms(2_000).unwrap());
    assert!(
        store
            .add_entry(&s, NewEntry::new("in time"), &quick)
            .await
            .is_ok()
    );
}

pub async fn filter_semantics(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let mut by_name = std::collections::HashMap::new();
    for (name, meta) in [
        ("a", json!({"topic": "otp", "n": 1, "tags": ["x"]})),
        ("b", json!({"topic": "elixir", "n": 5})),
        ("c", json!({"topic": "otp", "n": 10.5, "deep": {"k": true}})),
        ("d", json!({})),
    ] {
        let id = store
            .add_entry(
                &s,
                NewEntry::new(format!("shared word {name}")).metadata(obj(meta)),
                &w(),
            )
            .await
            .unwrap()
            .entry
            .id;
        by_name.insert(id, name);
    }
    let names =
        |found: Vec<EntryId>| -> BTreeSet<&str> { found.iter().map(|id| by_name[id]).collect() };
    for (filter, want) in [
        (json!({}), vec!["a", "b", "c", "d"]),
        (json!({"topic": "otp"}), vec!["a", "c"]),
        (json!({"topic": {"$eq": "elixir"}}), vec!["b"]),
        (json!({"topic": {"$ne": "otp"}}), vec!["b", "d"]),
        (json!({"topic": {"$in": ["elixir", "rust"]}}), vec!["b"]),
        (json!({"topic": {"$nin": ["otp"]}}), vec!["b", "d"]),
        (json!({"n": {"$gt": 1}}), vec!["b", "c"]),
        (json!({"n": {"$gte": 1}}), vec!["a", "b", "c"]),
        (json!({"n": {"$lt": 5}}), vec!["a"]),
        (json!({"n": {"$lte": 5, "$gt": 1}}), vec!["b"]),
        (json!({"n": 1.0}), vec!["a"]),
        (json!({"deep": {"k": true}}), vec!["c"]),
        (json!({"tags": ["x"]}), vec!["a"]),
        (json!({"n": {"$exists": false}}), vec!["d"]),
        (
            json!({"$or": [{"topic": "elixir"}, {"n": {"$gt": 10}}]}),
            vec!["b", "c"],
        ),
        (
            json!({"$and": [{"topic": "otp"}, {"n": {"$lt": 2}}]}),
            vec!["a"],
        ),
        (json!({"$not": {"topic": "otp"}}), vec!["b", "d"]),
        (json!({"topic": "otp", "n": {"$gt": 2}}), vec!["c"]),
        (json!({"missing": "x"}), vec![]),
    ] {
        let found = ids(&*store, &s, lexical("shared word").filter(filter.clone())).await;
        assert_eq!(names(found), want.into_iter().collect(), "{filter}");
    }
}

pub async fn bad_input_gets_typed_errors(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    add(&*store, &s, "a harmless fact").await;
    let search_err = |req: SearchRequest| {
        let store = store.clone();
        let s = s.clone();
        async move { store.search(&s, &req, &c()).await.unwrap_err() }
    };
    assert!(is_invalid(&search_err(lexical("")).await, Field::Query));
    assert!(is_invalid(
        &search_err(lexical("q".repeat(4_097))).await,
        Field::Query
    ));
    assert!(is_invalid(
        &search_err(lexical("nul\0")).await,
        Field::Query
    ));
    assert!(is_invalid(
        &search_err(lexical("fact").limit(0)).await,
        Field::Limit
    ));
    assert!(is_invalid(
        &search_err(lexical("fact").limit(51)).await,
        Field::Limit
    ));
    assert!(is_invalid(
        &search_err(lexical("fact").max_bytes(0)).await,
        Field::MaxBytes
    ));
    for filter in [
        json!("not an object"),
        json!({"a": {"$regex": "x"}}),
        json!({"$nor": [{"a": 1}]}),
        json!({"password": "[REDACTED]"}),
        json!({"a": {"$in": "x"}}),
    ] {
        let e = search_err(lexical("fact").filter(filter.clone())).await;
        assert!(is_invalid(&e, Field::Filter), "{filter}: {e}");
    }
    // A query of stopwords or punctuation is valid and matches nothing.
    for q in ["what is it?", "?!..."] {
        let r = store.search(&s, &lexical(q), &c()).await.unwrap();
        assert!(r.hits.is_empty());
    }
    let deep = json!({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}});
    let wide: serde_json::Map<String, Value> =
        (0..600).map(|i| (format!("k{i}"), json!(i))).collect();
    let big = json!({"k": "v".repeat(16_384)});
    for (meta, problem) in [(obj(deep), "deep"), (wide, "nodes"), (obj(big), "bytes")] {
        let e = store
            .add_entry(&s, NewEntry::new("fact").metadata(meta), &w())
            .await
            .unwrap_err();
        let ok = match problem {
            "deep" => matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Metadata,
                    problem: Problem::TooDeep { max: 8 }
                }
            ),
            "nodes" => matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Metadata,
                    problem: Problem::TooManyNodes { max: 512 }
                }
            ),
            _ => matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Metadata,
                    problem: Problem::TooLong { .. }
                }
            ),
        };
        assert!(ok, "{problem}: {e}");
    }
    let many = Provenance {
        event_ids: (0..1_001)
            .map(|i| hippocamp_core::EventId::new(format!("e{i}")).unwrap())
            .collect(),
        ..Provenance::default()
    };
    let e = store
        .add_entry(&s, NewEntry::new("fact").provenance(many), &w())
        .await
        .unwrap_err();
    assert!(is_invalid(&e, Field::Provenance));
    let e = store.add_events(&s, &sid("s"), &[], &w()).await.unwrap();
    assert!(e.added.is_empty() && e.skipped.is_empty());
    // Identifiers reject bad input at construction.
    assert!(MemoryScope::parse("", "u").is_err());
    assert!(MemoryScope::parse("a", &"u".repeat(257)).is_err());
    assert!("mem-zz".parse::<EntryId>().is_err());
    assert!(CallOptions::timeout_ms(0).is_err());
    assert!(CallOptions::timeout_ms(60_001).is_err());
    assert_eq!(store.status().await.unwrap().entries, 1);
}

pub async fn ranking_is_deterministic(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let at = |t: u64| Provenance {
        timestamp_ms: Some(t),
        ..Provenance::default()
    };
    let mut same_time = Vec::new();
    for i in 0..4 {
        same_time.push(
            store
                .add_entry(
                    &s,
                    NewEntry::new("kayak trip")
                        .provenance(at(100))
                        .idempotency_key(key(&format!("k{i}"))),
                    &w(),
                )
                .await
                .unwrap()
                .entry
                .id,
        );
    }
    let newer = store
        .add_entry(&s, NewEntry::new("kayak trip").provenance(at(200)), &w())
        .await
        .unwrap()
        .entry
        .id;
    let best = store
        .add_entry(
            &s,
            NewEntry::new("kayak kayak trip").provenance(at(50)),
            &w(),
        )
        .await
        .unwrap()
        .entry
        .id;
    same_time.sort();
    let mut want = vec![best, newer];
    want.extend(same_time);
    let first = store
        .search(&s, &lexical("kayak trip"), &c())
        .await
        .unwrap();
    let got: Vec<EntryId> = first.hits.iter().map(|h| h.entry.id).collect();
    assert_eq!(got, want);
    assert!(first.hits.windows(2).all(|w| w[0].score >= w[1].score));
    for _ in 0..3 {
        let again = store
            .search(&s, &lexical("trip kayak"), &c())
            .await
            .unwrap();
        assert_eq!(again, first);
    }
}

pub async fn byte_budget_skips_and_continues(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    // The long entry repeats the word, so it ranks first, but does not fit.
    let long = store
        .add_entry(
            &s,
            NewEntry::new(format!("{} zebra", "zebra ".repeat(300))),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    let small = add(&*store, &s, "a zebra").await;
    let small2 = add(&*store, &s, "zebra crossing").await;
    let all = store.search(&s, &lexical("zebra"), &c()).await.unwrap();
    assert_eq!(all.hits[0].entry.id, long.id);
    assert!(!all.skipped_over_budget);
    let budget = 2 * 400;
    let r = store
        .search(&s, &lexical("zebra").max_bytes(budget), &c())
        .await
        .unwrap();
    assert!(r.skipped_over_budget);
    let got: BTreeSet<EntryId> = r.hits.iter().map(|h| h.entry.id).collect();
    assert_eq!(got, [small, small2].into_iter().collect());
    let limited = store
        .search(&s, &lexical("zebra").limit(1), &c())
        .await
        .unwrap();
    assert_eq!(limited.hits.len(), 1);
    assert!(!limited.skipped_over_budget);
}

pub async fn bm25_statistics_are_per_scope(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let a = scope("app", "alice");
    let b = scope("app", "bob");
    for t in [
        "sailing boats in the harbor",
        "boats need paint",
        "my cat likes boxes",
    ] {
        add(&*store, &a, t).await;
    }
    let before = store
        .search(&a, &lexical("boats harbor"), &c())
        .await
        .unwrap();
    for i in 0..50 {
        add(&*store, &b, &format!("boats boats harbor number {i}")).await;
    }
    let after = store
        .search(&a, &lexical("boats harbor"), &c())
        .await
        .unwrap();
    assert_eq!(
        before, after,
        "another scope's data changed this scope's ranking"
    );
    let alone = default_store(f).await;
    for t in [
        "sailing boats in the harbor",
        "boats need paint",
        "my cat likes boxes",
    ] {
        add(&*alone, &a, t).await;
    }
    let solo = alone
        .search(&a, &lexical("boats harbor"), &c())
        .await
        .unwrap();
    let scores = |r: &crate::SearchResults| -> Vec<(String, f64)> {
        r.hits
            .iter()
            .map(|h| (h.entry.content.clone(), h.score))
            .collect()
    };
    assert_eq!(scores(&solo), scores(&after));
}

pub async fn event_fields_become_entry_fields(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let event = Event {
        id: "evt-1".into(),
        author: "Caroline".into(),
        timestamp_ms: 1_683_000_000_000,
        partial: false,
        content: Some(Content {
            role: Some("user".into()),
            parts: vec![
                Part::text("I went to a support group"),
                Part::function_response(json!({"ok": true})),
                Part::text("it was powerful"),
            ],
        }),
        metadata: Some(obj(json!({"dia_id": "D1:3", "api_key": "nope"}))),
    };
    let before = hippocamp_core::time::now_ms();
    let r = store
        .add_events(&s, &sid("conv-1-s1"), &[event], &w())
        .await
        .unwrap();
    let after = hippocamp_core::time::now_ms();
    let id = r.added[0].entry_id;
    assert_eq!(id, EntryId::derive(&s, &key("event:evt-1")));
    let e = store.get_entry(&s, &id, &c()).await.unwrap();
    assert_eq!(e.content, "I went to a support group\nit was powerful");
    assert_eq!(e.metadata["dia_id"], json!("D1:3"));
    assert_eq!(e.metadata["api_key"], json!("[REDACTED]"));
    assert_eq!(e.timestamp_ms, 1_683_000_000_000);
    // When it was said and when it was taken in are kept apart.
    let ingested = e.ingested_at_ms.expect("an ingestion time");
    assert!((before..=after).contains(&ingested), "{ingested}");
    // Listings and exports carry it too.
    let page = store
        .list_entries(&s, &crate::list::ListRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(page.entries[0].ingested_at_ms, Some(ingested));
    assert_eq!(e.provenance.session_id, Some(sid("conv-1-s1")));
    assert_eq!(
        e.provenance
            .author
            .as_ref()
            .map(hippocamp_core::Author::as_str),
        Some("Caroline")
    );
    assert_eq!(e.provenance.event_ids.len(), 1);
    assert_eq!(e.provenance.event_ids[0].as_str(), "evt-1");
    assert_eq!(e.provenance.timestamp_ms, Some(1_683_000_000_000));
    assert_eq!(e.epoch, 0);
    // The same event through add_entry with the same key is a duplicate.
    let again = store
        .add_entry(
            &s,
            NewEntry {
                content: e.content.clone(),
                metadata: obj(json!({"dia_id": "D1:3", "api_key": "other"})),
                provenance: e.provenance.clone(),
                idempotency_key: Some(key("event:evt-1")),
                ..NewEntry::default()
            },
            &w(),
        )
        .await
        .unwrap();
    assert!(again.duplicate);
}

pub async fn too_many_events_are_rejected(f: &dyn StoreFactory) {
    let store = with_limits(
        f,
        MemoryLimits {
            max_events_per_request: 3,
            ..MemoryLimits::default()
        },
    )
    .await;
    let s = scope("app", "u1");
    let events: Vec<Event> = (0..4)
        .map(|i| Event::text(format!("e{i}"), "user", i, "counting events"))
        .collect();
    let e = store
        .add_events(&s, &sid("s"), &events, &w())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidArgument {
            field: Field::Events,
            problem: Problem::TooMany { count: 4, max: 3 }
        }
    ));
    assert_eq!(store.status().await.unwrap().entries, 0);
}

pub async fn erasure_epoch_fences_stale_writes(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let other = scope("app", "u2");
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 0);
    let admitted = store.erasure_epoch(&s, &c()).await.unwrap();
    let at0 = WriteOptions::default().epoch(admitted);
    let e = store
        .add_entry(
            &s,
            NewEntry::new("before erasure").idempotency_key(key("k")),
            &at0,
        )
        .await
        .unwrap();
    assert_eq!(e.entry.epoch, 0);
    assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 1);
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 1);
    let stale = store
        .add_entry(
            &s,
            NewEntry::new("before erasure").idempotency_key(key("k")),
            &at0,
        )
        .await
        .unwrap_err();
    assert!(matches!(
        stale,
        Error::StaleEpoch {
            admitted: 0,
            current: 1
        }
    ));
    let stale = store
        .add_events(
            &s,
            &sid("s"),
            &[Event::text("q", "user", 1, "queued before erasure")],
            &at0,
        )
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleEpoch { .. }));
    // An epoch the scope has not reached was never handed out.
    let future = store
        .add_entry(
            &s,
            NewEntry::new("from the future"),
            &WriteOptions::default().epoch(5),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            future,
            Error::FutureEpoch {
                admitted: 5,
                current: 1
            }
        ),
        "{future}"
    );
    let future = store
        .add_events(
            &s,
            &sid("s"),
            &[Event::text("f", "user", 1, "from the future")],
            &WriteOptions::default().epoch(2),
        )
        .await
        .unwrap_err();
    assert!(matches!(future, Error::FutureEpoch { .. }), "{future}");
    assert!(ids(&*store, &s, lexical("erasure")).await.is_empty());
    assert!(ids(&*store, &s, lexical("future")).await.is_empty());
    // Erasing an empty scope still advances its epoch.
    assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 0);
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 2);
    // The id never depends on the epoch; new writes carry the new epoch.
    let fresh = store
        .add_entry(
            &s,
            NewEntry::new("after erasure").idempotency_key(key("k")),
            &WriteOptions::default().epoch(2),
        )
        .await
        .unwrap();
    assert_eq!(fresh.entry.id, e.entry.id);
    assert_eq!(fresh.entry.epoch, 2);
    assert_eq!(store.erasure_epoch(&other, &c()).await.unwrap(), 0);
    assert!(
        store
            .add_entry(
                &other,
                NewEntry::new("untouched"),
                &WriteOptions::default().epoch(0)
            )
            .await
            .is_ok()
    );
}

pub async fn status_counts_entries(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let st = store.status().await.unwrap();
    assert_eq!((st.scopes, st.entries, st.bytes), (0, 0, 0));
    let a = scope("app", "a");
    add(&*store, &a, "one").await;
    add(&*store, &a, "two").await;
    add(&*store, &scope("app", "b"), "three").await;
    let st = store.status().await.unwrap();
    assert_eq!((st.scopes, st.entries), (2, 3));
    assert!(st.bytes >= 3 * 256);
    assert_eq!(st.durable, store.capabilities().durable);
    store.delete_user(&a, &c()).await.unwrap();
    let st = store.status().await.unwrap();
    assert_eq!((st.scopes, st.entries), (1, 1));
}

pub async fn concurrent_keyed_adds_make_one_entry(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let mut tasks = Vec::new();
    for _ in 0..40 {
        let store = store.clone();
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            store
                .add_entry(
                    &s,
                    NewEntry::new("concurrent fact").idempotency_key(key("same")),
                    &w(),
                )
                .await
        }));
    }
    let mut ids_seen = BTreeSet::new();
    let mut fresh = 0;
    for t in tasks {
        let out = t.await.unwrap().unwrap();
        ids_seen.insert(out.entry.id);
        if !out.duplicate {
            fresh += 1;
        }
    }
    assert_eq!(ids_seen.len(), 1);
    assert_eq!(fresh, 1);
    assert_eq!(ids(&*store, &s, lexical("concurrent")).await.len(), 1);
    assert_eq!(store.status().await.unwrap().entries, 1);
}

pub async fn readd_after_delete(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let input = NewEntry::new("recurring fact").idempotency_key(key("r"));
    let first = store
        .add_entry(&s, input.clone(), &w())
        .await
        .unwrap()
        .entry;
    assert_eq!(store.delete_entry(&s, &first.id, &c()).await.unwrap(), 1);
    let second = store.add_entry(&s, input, &w()).await.unwrap();
    assert!(!second.duplicate);
    assert_eq!(second.entry.id, first.id);
    assert_eq!(ids(&*store, &s, lexical("recurring")).await, vec![first.id]);
}

// ---- vector and hybrid scenarios (stores with an embedder) ------------

async fn seeded(f: &dyn StoreFactory, s: &MemoryScope) -> Arc<dyn MemoryStore> {
    let store = default_store(f).await;
    for (text, topic) in [
        ("the cat sat on the warm mat", "pets"),
        ("a cat and a kitten play with yarn", "pets"),
        ("stock markets fell sharply on monday", "finance"),
        ("interest rates and bond markets", "finance"),
    ] {
        store
            .add_entry(
                s,
                NewEntry::new(text).metadata(obj(json!({"topic": topic}))),
                &w(),
            )
            .await
            .unwrap();
    }
    store
}

/// Capabilities name the embedder and the modes; a search without a mode
/// is hybrid, with each hit's bm25, vector and fused scores.
pub async fn vector_modes_are_reported_and_hybrid_is_the_default(f: &dyn StoreFactory) {
    let s = scope("app", "v1");
    let store = seeded(f, &s).await;
    let caps = store.capabilities();
    let e = caps
        .search
        .embedder
        .as_ref()
        .expect("an embedder is reported");
    assert!(e.dimension > 0 && !e.model.is_empty());
    for m in ["lexical", "vector", "hybrid"] {
        assert!(caps.search.modes.contains(&m.to_owned()), "{m}");
    }
    let res = store
        .search(&s, &SearchRequest::new("cat on a mat"), &c())
        .await
        .unwrap();
    assert!(!res.hits.is_empty());
    let top = &res.hits[0];
    assert_eq!(top.score_type, ScoreType::Hybrid);
    assert!(top.entry.content.contains("mat"));
    let d = top.details.expect("hybrid hits carry score details");
    assert!(d.bm25.is_some() && d.vector.is_some());
    assert!((d.fused - top.score).abs() < 1e-9);
    let lexical = store
        .search(
            &s,
            &SearchRequest::new("cat").mode(crate::SearchMode::Lexical),
            &c(),
        )
        .await
        .unwrap();
    assert!(
        lexical
            .hits
            .iter()
            .all(|h| h.score_type == ScoreType::Bm25 && h.details.is_none())
    );
}

/// Vector mode ranks by similarity (no word in common needed beyond the
/// embedder's view) and a deleted entry is gone from it at once.
pub async fn vector_search_ranks_by_similarity_and_forgets_deleted_entries(f: &dyn StoreFactory) {
    let s = scope("app", "v2");
    let store = seeded(f, &s).await;
    let req = SearchRequest::new("markets").mode(crate::SearchMode::Vector);
    let res = store.search(&s, &req, &c()).await.unwrap();
    assert_eq!(res.hits.len(), 4, "vector mode scores every entry");
    assert!(res.hits[0].entry.content.contains("markets"));
    assert_eq!(res.hits[0].score_type, ScoreType::Vector);
    assert!(res.hits.windows(2).all(|w| w[0].score >= w[1].score));
    let first = res.hits[0].entry.id;
    assert_eq!(store.delete_entry(&s, &first, &c()).await.unwrap(), 1);
    let after = store.search(&s, &req, &c()).await.unwrap();
    assert_eq!(after.hits.len(), 3);
    assert!(after.hits.iter().all(|h| h.entry.id != first));
}

/// Filters, limits and the byte budget apply to the fused list.
pub async fn hybrid_filters_and_budget_apply_to_the_fused_list(f: &dyn StoreFactory) {
    let s = scope("app", "v3");
    let store = seeded(f, &s).await;
    let res = store
        .search(
            &s,
            &SearchRequest::new("cat markets").filter(json!({"topic": "finance"})),
            &c(),
        )
        .await
        .unwrap();
    assert!(!res.hits.is_empty());
    assert!(
        res.hits
            .iter()
            .all(|h| h.entry.metadata["topic"] == "finance")
    );
    let one = store
        .search(&s, &SearchRequest::new("cat markets").limit(1), &c())
        .await
        .unwrap();
    assert_eq!(one.hits.len(), 1);
    let tiny = store
        .search(&s, &SearchRequest::new("cat markets").max_bytes(1), &c())
        .await
        .unwrap();
    assert!(tiny.hits.is_empty() && tiny.skipped_over_budget);
}

/// A selective filter finds in hybrid mode what it finds in lexical mode,
/// even when its match ranks below the fusion depth on both arms.
pub async fn a_selective_filter_finds_in_hybrid_what_lexical_finds(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "selective");
    let events: Vec<Event> = (0..150)
        .map(|i| Event::text(format!("m{i}"), "user", i, "market market market report"))
        .collect();
    store
        .add_events(&s, &sid("s"), &events, &w())
        .await
        .unwrap();
    let long_tail = "the only tagged note mentions a market once among many other words \
                     about gardens rivers mountains kitchens trains violins and weather";
    store
        .add_entry(
            &s,
            NewEntry::new(long_tail).metadata(obj(json!({"tag": "rare"}))),
            &w(),
        )
        .await
        .unwrap();
    for mode in [crate::SearchMode::Lexical, crate::SearchMode::Hybrid] {
        let res = store
            .search(
                &s,
                &SearchRequest::new("market")
                    .mode(mode)
                    .filter(json!({"tag": "rare"})),
                &c(),
            )
            .await
            .unwrap();
        assert_eq!(res.hits.len(), 1, "{mode:?}");
        assert_eq!(res.hits[0].entry.content, long_tail);
    }
}

/// Another scope's vectors never answer a search.
pub async fn vector_search_never_crosses_scopes(f: &dyn StoreFactory) {
    let a = scope("app", "alice");
    let b = scope("app", "bob");
    let other_app = scope("other", "alice");
    let store = default_store(f).await;
    store
        .add_entry(&a, NewEntry::new("alice keeps bees"), &w())
        .await
        .unwrap();
    store
        .add_entry(&other_app, NewEntry::new("alice keeps bees too"), &w())
        .await
        .unwrap();
    for mode in [crate::SearchMode::Vector, crate::SearchMode::Hybrid] {
        let res = store
            .search(&b, &SearchRequest::new("keeps bees").mode(mode), &c())
            .await
            .unwrap();
        assert!(res.hits.is_empty(), "{mode:?}");
        let res = store
            .search(&a, &SearchRequest::new("keeps bees").mode(mode), &c())
            .await
            .unwrap();
        assert_eq!(res.hits.len(), 1, "{mode:?}");
        assert_eq!(res.hits[0].entry.scope, a);
    }
}

/// After `delete_user`, neither mode finds anything, and a stale write
/// cannot bring a vector back.
pub async fn erased_users_leave_vector_search(f: &dyn StoreFactory) {
    let s = scope("app", "v5");
    let store = seeded(f, &s).await;
    let epoch = store.erasure_epoch(&s, &c()).await.unwrap();
    assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 4);
    let late = WriteOptions {
        epoch: Some(epoch),
        ..w()
    };
    assert!(
        store
            .add_entry(&s, NewEntry::new("a cat again"), &late)
            .await
            .is_err()
    );
    for mode in [crate::SearchMode::Vector, crate::SearchMode::Hybrid] {
        let res = store
            .search(&s, &SearchRequest::new("cat").mode(mode), &c())
            .await
            .unwrap();
        assert!(res.hits.is_empty(), "{mode:?}");
    }
}

/// An event the store already holds, a repeat within a batch and a keyed
/// duplicate cost no embedding.
pub async fn only_what_would_be_new_is_embedded(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let Some(start) = f.embedded_texts() else {
        return;
    };
    let s = scope("app", "embed-once");
    let turns: Vec<Event> = (0..5)
        .map(|i| {
            Event::text(
                format!("t{i}"),
                "user",
                i,
                format!("turn number {i} of the talk"),
            )
        })
        .collect();
    let r = store.add_events(&s, &sid("s"), &turns, &w()).await.unwrap();
    assert_eq!(r.added.len(), 5);
    assert_eq!(f.embedded_texts(), Some(start + 5));
    // The session grows and is sent again whole (as ADK does).
    let mut grown = turns.clone();
    grown.push(Event::text("t5", "model", 5, "a new reply"));
    grown.push(Event::text("t5", "model", 5, "a new reply"));
    let r = store.add_events(&s, &sid("s"), &grown, &w()).await.unwrap();
    assert_eq!((r.added.len(), r.duplicates.len()), (1, 6));
    assert_eq!(f.embedded_texts(), Some(start + 6));
    let keyed = || NewEntry::new("a keyed fact").idempotency_key(key("fact"));
    store.add_entry(&s, keyed(), &w()).await.unwrap();
    assert!(store.add_entry(&s, keyed(), &w()).await.unwrap().duplicate);
    assert_eq!(f.embedded_texts(), Some(start + 7));
    // Deleted, then sent again: erased events cost nothing; under a new
    // session id they are embedded again, and found by vector.
    assert_eq!(store.delete_session(&s, &sid("s"), &c()).await.unwrap(), 6);
    let r = store.add_events(&s, &sid("s"), &grown, &w()).await.unwrap();
    assert_eq!((r.added.len(), r.skipped.len()), (0, 7));
    assert_eq!(f.embedded_texts(), Some(start + 7));
    let r = store
        .add_events(&s, &sid("s2"), &grown, &w())
        .await
        .unwrap();
    assert_eq!(r.added.len(), 6);
    assert_eq!(f.embedded_texts(), Some(start + 13));
    let hits = store
        .search(
            &s,
            &SearchRequest::new("new reply").mode(crate::SearchMode::Vector),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(hits.entries_without_vectors, 0);
}

/// A batch whose texts exceed the provider's bytes per call in all is
/// split, not refused.
pub async fn large_batches_are_embedded_within_the_provider_bounds(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "big-batch");
    // 17 texts of 64 KiB: more than the provider's 1 MiB per call.
    let events: Vec<Event> = (0..17)
        .map(|i| {
            let word = format!("topic{i} ");
            let text = word.repeat(65_536 / word.len());
            Event::text(format!("b{i}"), "user", i, text)
        })
        .collect();
    let r = store
        .add_events(&s, &sid("s"), &events, &w())
        .await
        .unwrap();
    assert_eq!(r.added.len(), 17, "{:?}", r.skipped);
    let hits = store
        .search(
            &s,
            &SearchRequest::new("topic3").mode(crate::SearchMode::Vector),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(hits.entries_without_vectors, 0);
    assert!(!hits.hits.is_empty());
}

/// For a store whose embedder takes about 400 ms a call: an entry known
/// when the store looked (so not embedded) but erased before the commit
/// stays erased, and every committed entry has its vector; a deadline that
/// runs out while the provider works writes nothing and says where.
pub async fn slow_embedder_races(store: Arc<dyn MemoryStore>) {
    let s = MemoryScope::parse("app", "race").unwrap();
    let sid = SessionId::new("s").unwrap();
    let apples = Event::text("a", "user", 1, "apples are red");
    store
        .add_events(&s, &sid, std::slice::from_ref(&apples), &w())
        .await
        .unwrap();
    let bananas = Event::text("b", "user", 2, "bananas are yellow");
    let writer = {
        let store = Arc::clone(&store);
        let (s, sid) = (s.clone(), sid.clone());
        tokio::spawn(async move { store.add_events(&s, &sid, &[apples, bananas], &w()).await })
    };
    // While `b` is being embedded (the provider is slow), `a` goes.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(
        store
            .delete_session(&s, &sid, &CallOptions::default())
            .await
            .unwrap(),
        1
    );
    let report = writer.await.unwrap().unwrap();
    assert_eq!(report.added.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].reason, crate::event::SkipReason::Erased);
    let hits = store
        .search(
            &s,
            &SearchRequest::new("bananas").mode(crate::SearchMode::Vector),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(hits.entries_without_vectors, 0);
    // A deadline shorter than the provider's work.
    let late = WriteOptions::new(CallOptions::timeout_ms(100).unwrap());
    let e = store
        .add_events(&s, &sid, &[Event::text("c", "user", 3, "cherries")], &late)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Timeout(hippocamp_core::Stage::Embedding)),
        "{e}"
    );
    let hits = store
        .search(
            &s,
            &SearchRequest::new("cherries").mode(crate::SearchMode::Lexical),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(hits.hits.is_empty());
}

/// Every store answers the modes its capabilities list and refuses the
/// others with a typed error (never silently empty or lexical results).
pub async fn search_modes_match_capabilities(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "modes");
    store
        .add_entry(&s, NewEntry::new("modes of search"), &w())
        .await
        .unwrap();
    let caps = store.capabilities();
    let modes = caps.search.modes;
    // A store that embeds reports the embedder's bounds with its own.
    let embeds = caps.search.embedder.is_some();
    assert_eq!(
        caps.limits.iter().any(|l| l.name == "embed.max_inputs"),
        embeds,
        "{:?}",
        caps.limits
    );
    for mode in [
        crate::SearchMode::Lexical,
        crate::SearchMode::Vector,
        crate::SearchMode::Hybrid,
    ] {
        let r = store
            .search(&s, &SearchRequest::new("search").mode(mode), &c())
            .await;
        if modes.contains(&mode.as_str().to_owned()) {
            assert_eq!(r.unwrap().hits.len(), 1, "{mode:?}");
        } else {
            assert!(
                matches!(
                    r,
                    Err(Error::InvalidArgument {
                        field: Field::Query,
                        ..
                    })
                ),
                "{mode:?}: {r:?}"
            );
        }
    }
}

/// A stored vector counts against the byte quotas with its entry (4 bytes
/// a dimension), on every path that writes one, and a correction is
/// counted at its new size: a quota that fits an entry's text but not its
/// vector refuses it.
pub async fn vectors_count_against_byte_quotas(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let dim = store
        .capabilities()
        .search
        .embedder
        .expect("an embedder is reported")
        .dimension as u64;
    let vector = 4 * dim;
    let s = scope("app", "vector-bytes");
    let bytes = || async { store.status().await.unwrap().bytes };
    let added = store
        .add_entry(&s, NewEntry::new("apples are red"), &w())
        .await
        .unwrap()
        .entry;
    assert_eq!(bytes().await, added.storage_bytes() + vector);
    let corrected = store
        .update_entry(
            &s,
            &added.id,
            &EntryUpdate {
                content: "apples are green, mostly".into(),
                metadata: hippocamp_core::Metadata::new(),
            },
            &w(),
        )
        .await
        .unwrap()
        .entry;
    assert_eq!(bytes().await, corrected.storage_bytes() + vector);
    let report = store
        .add_events(
            &s,
            &sid("s"),
            &[Event::text("e1", "user", 1, "pears are yellow")],
            &w(),
        )
        .await
        .unwrap();
    let from_event = store
        .get_entry(&s, &report.added[0].entry_id, &c())
        .await
        .unwrap();
    assert_eq!(
        bytes().await,
        corrected.storage_bytes() + from_event.storage_bytes() + 2 * vector
    );
    store.delete_entry(&s, &added.id, &c()).await.unwrap();
    assert_eq!(bytes().await, from_event.storage_bytes() + vector);

    // Room for the text, not for its vector: refused, nothing written.
    let text = NewEntry::new("plums are purple");
    let probe = crate::entry::prepare_entry(&s, text.clone(), &MemoryLimits::default())
        .unwrap()
        .storage_bytes;
    let tight = with_limits(
        f,
        MemoryLimits {
            max_bytes_per_scope: probe + vector - 1,
            ..MemoryLimits::default()
        },
    )
    .await;
    let e = tight.add_entry(&s, text, &w()).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::QuotaExceeded {
                limit: QuotaLimit::BytesPerScope(_)
            }
        ),
        "{e}"
    );
    assert_eq!(tight.status().await.unwrap().entries, 0);
}

/// `explain` adds to each hit one contribution per stage: BM25 with each
/// query term's share (which add up to its score), the vector score, and
/// for a hybrid hit the fusion whose score is the hit's. Without it,
/// hits carry none.
pub async fn explained_hits_name_each_stage(f: &dyn StoreFactory) {
    let s = scope("app", "explained");
    let store = default_store(f).await;
    for text in [
        "my cat sleeps on the warm windowsill",
        "the neighbour's cat chases birds in the garden",
        "I bought a new bicycle for commuting",
    ] {
        store
            .add_entry(&s, NewEntry::new(text), &w())
            .await
            .unwrap();
    }
    let stages = |h: &crate::store::SearchHit| -> Vec<String> {
        h.explanation
            .as_ref()
            .map(|e| e.iter().map(|c| c.stage.clone()).collect())
            .unwrap_or_default()
    };
    let shares_add_up = |c: &crate::store::Contribution| {
        let sum: f64 = c.terms.iter().map(|t| f64::from(t.score)).sum();
        let score = c.score.expect("a bm25 score");
        assert!((sum - score).abs() < 1e-4 * score.max(1.0), "{c:?}");
        assert!(
            c.terms.iter().all(|t| t.term == "cat" && t.tf == 1),
            "{c:?}"
        );
    };
    for mode in [
        crate::SearchMode::Lexical,
        crate::SearchMode::Vector,
        crate::SearchMode::Hybrid,
    ] {
        let plain = store
            .search(&s, &SearchRequest::new("cat").mode(mode), &c())
            .await
            .unwrap();
        assert!(
            plain.hits.iter().all(|h| h.explanation.is_none()),
            "{mode:?}"
        );
        let res = store
            .search(&s, &SearchRequest::new("cat").mode(mode).explained(), &c())
            .await
            .unwrap();
        assert!(!res.hits.is_empty(), "{mode:?}");
        // The same hits, in the same order, with the same scores.
        let key = |r: &crate::store::SearchResults| -> Vec<(EntryId, u64)> {
            r.hits
                .iter()
                .map(|h| (h.entry.id, h.score.to_bits()))
                .collect()
        };
        assert_eq!(key(&res), key(&plain), "{mode:?}");
        for h in &res.hits {
            let e = h.explanation.as_ref().unwrap();
            match mode {
                crate::SearchMode::Lexical => {
                    // These entries have no session: no neighbour support.
                    assert_eq!(stages(h), ["bm25", "neighbours"]);
                    shares_add_up(&e[0]);
                    assert_eq!(e[1].score, Some(0.0));
                    let sum = e[0].score.unwrap() + e[1].score.unwrap();
                    assert!((sum - h.score).abs() < 1e-5, "{e:?}");
                }
                crate::SearchMode::Vector => {
                    assert_eq!(stages(h), ["vector"]);
                    assert_eq!(e[0].score, Some(h.score));
                }
                crate::SearchMode::Hybrid => {
                    // The fusion's score, then the stages after it (no
                    // session here: no support, so the fused score is the
                    // hit's).
                    assert_eq!(stages(h), ["bm25", "vector", "fusion", "neighbours"]);
                    assert_eq!(e[2].score, Some(h.score));
                    assert_eq!(e[3].score, Some(0.0));
                    if e[0].score.is_some() {
                        shares_add_up(&e[0]);
                    }
                    assert!(e[2].detail.as_deref().is_some_and(|d| !d.is_empty()));
                }
            }
        }
    }
}

/// Session cohesion: the answer after a matching question is found
/// through its neighbour's support (an entry of the same session, next in
/// time), another session's turn next in time is not a neighbour, and
/// with `neighbours.enabled = false` lexical search is plain BM25.
/// The time stage of lexical search: a "when" question favours a turn
/// that states a time, a question naming a time favours turns said then
/// (read against `reference_time_ms`), `explain` lists it, and it can be
/// turned off.
pub async fn time_in_questions_moves_turns_said_then(f: &dyn StoreFactory) {
    // 2023-01-10 and 2023-05-10, 12:00 UTC.
    let (january, may) = (1_673_352_000_000_i64, 1_683_720_000_000_i64);
    let check = |on: bool| async move {
        let config = MemoryConfig {
            time: hippocamp_search::TimeParams {
                enabled: on,
                ..hippocamp_search::TimeParams::default()
            },
            ..MemoryConfig::default()
        };
        let store = f.open(config).await;
        let s = scope("app", "u1");
        let turn = |id: &str, at: i64, text: &str| Event::text(id, "user", at, text);
        for (session, event) in [
            ("s1", turn("a", may, "we saw the dolphins at the aquarium")),
            (
                "s2",
                turn(
                    "b",
                    may + 1,
                    "we saw the dolphins at the aquarium yesterday",
                ),
            ),
            ("s3", turn("c", january, "dinner at the harbour")),
            ("s4", turn("d", may, "dinner at the harbour")),
        ] {
            store
                .add_events(&s, &sid(session), &[event], &w())
                .await
                .unwrap();
        }
        let first = |req: SearchRequest| {
            let store = Arc::clone(&store);
            let s = s.clone();
            async move {
                // The stage is lexical search's (a store with an
                // embedder defaults to hybrid).
                let r = store
                    .search(&s, &req.mode(crate::SearchMode::Lexical), &c())
                    .await
                    .unwrap();
                let hit = &r.hits[0];
                let stages: Vec<String> = hit
                    .explanation
                    .iter()
                    .flatten()
                    .map(|x| x.stage.clone())
                    .collect();
                (
                    hit.entry.provenance.event_ids[0].as_str().to_owned(),
                    stages,
                )
            }
        };
        let reference = u64::try_from(may).unwrap() + 86_400_000;
        let asked = first(SearchRequest::new("dolphins aquarium").limit(1)).await;
        let when = first(
            SearchRequest::new("When did we see the dolphins at the aquarium?")
                .limit(1)
                .explained(),
        )
        .await;
        let named = first(
            SearchRequest::new("dinner at the harbour in January 2023")
                .limit(1)
                .reference_time_ms(reference)
                .explained(),
        )
        .await;
        (asked, when, named)
    };
    let (asked, when, named) = check(true).await;
    // The shorter turn matches better; asked when, the one that says when.
    assert_eq!(asked.0, "a");
    assert_eq!(when.0, "b");
    assert!(when.1.contains(&"time".to_owned()), "{when:?}");
    // The same words said in January and in May: January was asked for.
    assert_eq!(named.0, "c");
    assert!(named.1.contains(&"time".to_owned()), "{named:?}");
    // Off: BM25 (and recency on a tie) decide.
    let (_, when, named) = check(false).await;
    assert_eq!(when.0, "a");
    assert_eq!(named.0, "d");
    assert!(!named.1.contains(&"time".to_owned()));
}

/// `context` returns the turns of a hit's session around it, in time
/// order, within the byte budget, each entry once; other sessions and
/// session-less entries lend none.
pub async fn context_returns_the_turns_around_a_hit(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "u1");
    let turns = [
        "we met in june",
        "the weather was fine",
        "I adopted a kitten named Miso",
        "she is very playful",
        "we should get lunch",
    ];
    let events: Vec<Event> = turns
        .iter()
        .zip(1i64..)
        .map(|(t, i)| Event::text(format!("a{i}"), "user", 10 * i, *t))
        .collect();
    store
        .add_events(&s, &sid("s1"), &events, &w())
        .await
        .unwrap();
    // Another session's turn, between two of the first's in time.
    store
        .add_events(
            &s,
            &sid("s2"),
            &[Event::text("b0", "user", 35, "an unrelated remark")],
            &w(),
        )
        .await
        .unwrap();
    let search = |req: SearchRequest| {
        let store = Arc::clone(&store);
        let s = s.clone();
        async move { store.search(&s, &req, &c()).await }
    };
    let contents = |v: &[Arc<crate::MemoryEntry>]| -> Vec<String> {
        v.iter().map(|entry| entry.content.clone()).collect()
    };
    let r = search(SearchRequest::new("kitten miso").limit(1).context(2, 1))
        .await
        .unwrap();
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.hits[0].entry.content, turns[2]);
    let ctx = r.hits[0].context.as_ref().unwrap();
    assert_eq!(contents(&ctx.before), [turns[0], turns[1]]);
    assert_eq!(contents(&ctx.after), [turns[3]]);
    // Without `context`, none.
    let r = search(SearchRequest::new("kitten miso").limit(1))
        .await
        .unwrap();
    assert!(r.hits[0].context.is_none());
    // The budget holds hits and context together: nearest turns first.
    let room = r.hits[0].entry.storage_bytes() * 3 / 2;
    let r = search(
        SearchRequest::new("kitten miso")
            .limit(1)
            .max_bytes(room)
            .context(2, 2),
    )
    .await
    .unwrap();
    let ctx = r.hits[0].context.as_ref().unwrap();
    assert!(ctx.before.len() + ctx.after.len() <= 1, "{ctx:?}");
    // An entry is in a reply once: two hits next to each other.
    let r = search(SearchRequest::new("kitten playful").limit(2).context(1, 1))
        .await
        .unwrap();
    let mut seen: Vec<EntryId> = r.hits.iter().map(|h| h.entry.id).collect();
    for h in &r.hits {
        let ctx = h.context.as_ref().unwrap();
        seen.extend(ctx.before.iter().chain(&ctx.after).map(|e| e.id));
    }
    let n = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), n, "an entry repeated");
    // A session-less entry has no neighbours.
    add(&*store, &s, "a loose note about zebras").await;
    let r = search(SearchRequest::new("zebras").limit(1).context(5, 5))
        .await
        .unwrap();
    let ctx = r.hits[0].context.as_ref().unwrap();
    assert!(ctx.before.is_empty() && ctx.after.is_empty());
    // At most five each side.
    let err = search(SearchRequest::new("zebras").context(6, 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                field: Field::Context,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.capabilities().search.max_context_turns, 5);
}

pub async fn neighbours_support_a_turn_and_can_be_turned_off(f: &dyn StoreFactory) {
    let s = scope("app", "cohesion");
    let session = SessionId::new("talk").unwrap();
    let other = SessionId::new("elsewhere").unwrap();
    let events = |texts: &[(&str, &str)], start: i64| -> Vec<Event> {
        texts
            .iter()
            .enumerate()
            .map(|(i, (id, t))| Event::text(*id, "user", start + i64::try_from(i).unwrap(), *t))
            .collect()
    };
    for store in [
        default_store(f).await,
        f.open(MemoryConfig {
            neighbours: hippocamp_search::NeighbourParams {
                enabled: false,
                ..hippocamp_search::NeighbourParams::default()
            },
            ..MemoryConfig::default()
        })
        .await,
    ] {
        let on = store.capabilities().search.neighbours.enabled;
        store
            .add_events(
                &s,
                &session,
                &events(
                    &[
                        ("q", "which pet did you adopt last spring?"),
                        ("a", "a tabby called Miso, from the shelter"),
                        ("z", "the weather was lovely on the coast"),
                    ],
                    1_000,
                ),
                &w(),
            )
            .await
            .unwrap();
        // Between the question and the answer in time, but another
        // session: not a neighbour.
        store
            .add_events(
                &s,
                &other,
                &events(&[("o", "an unrelated note")], 1_000),
                &w(),
            )
            .await
            .unwrap();
        let res = store
            .search(&s, &lexical("adopt a pet").explained(), &c())
            .await
            .unwrap();
        let contents: Vec<&str> = res.hits.iter().map(|h| h.entry.content.as_str()).collect();
        if on {
            assert_eq!(
                contents,
                [
                    "which pet did you adopt last spring?",
                    "a tabby called Miso, from the shelter"
                ],
                "{res:?}"
            );
            let answer = res.hits[1].explanation.as_ref().unwrap();
            assert_eq!(answer[0].score, Some(0.0), "no word of its own matches");
            let support = answer[1].score.unwrap();
            assert!(
                (support - res.hits[0].score / 2.0).abs() < 1e-5,
                "{answer:?}"
            );
        } else {
            assert_eq!(
                contents,
                ["which pet did you adopt last spring?"],
                "{res:?}"
            );
        }
    }
}
