//! Model-based test: random operation sequences against a store and a plain
//! reference model, checking that they agree after every step.
//!
//! Three scopes share user and app names pairwise (`app/alice`, `app/bob`,
//! `other/alice`), so a leak across either half of a scope shows up. After
//! each operation every scope is searched for every word of a small
//! vocabulary and must return exactly the model's entries containing it;
//! erased entries must be gone from `get_entry` too, and an event that
//! would make an erased entry of its session again is skipped as erased.
//!
//! Derived entries merge up to three entries of their scope: those are
//! hidden from search while the derived entry is live (and read back as
//! `merged`), a derived entry never outlives its shortest-lived source,
//! and erasing, sweeping or erasing the session of any source erases
//! everything derived from it in the same call.
//!
//! Writes carry random obligations (expiry, retention, legal hold) and the
//! store's clock is a [`ManualClock`] the sequence moves forward: an
//! expired entry must vanish from search, `get_entry` and listings at the
//! exact moment it expires, a guarded entry must refuse every deletion
//! that would take it (and such a deletion must change nothing), and a
//! sweep must remove exactly the expired entries nothing guards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hippocamp_core::{
    CallOptions, EntryId, Error, IdempotencyKey, ManualClock, MemoryLimits, MemoryScope, SessionId,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::StoreFactory;
use crate::MemoryConfig;
use crate::config::StoreClock;
use crate::entry::{NewEntry, Obligations, Provenance};
use crate::event::Event;
use crate::store::{MemoryStore, WriteOptions};

const WORDS: &[&str] = &["apple", "banana", "cherry", "delta", "echo", "falcon"];
const SCOPES: &[(&str, &str)] = &[("app", "alice"), ("app", "bob"), ("other", "alice")];

/// Obligations relative to the model's clock: expiry and retention in
/// milliseconds from now, and a legal hold.
#[derive(Debug, Clone, Copy)]
struct Pick {
    expires_in: Option<u64>,
    retain_for: Option<u64>,
    hold: bool,
}

impl Pick {
    fn at(self, now: u64) -> Obligations {
        Obligations {
            expires_at_ms: self.expires_in.map(|d| now + d),
            retain_until_ms: self.retain_for.map(|d| now + d),
            legal_hold: self.hold,
        }
    }
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        3 => Just(Pick { expires_in: None, retain_for: None, hold: false }),
        2 => (1u64..60).prop_map(|d| Pick { expires_in: Some(d), retain_for: None, hold: false }),
        1 => (1u64..60).prop_map(|d| Pick { expires_in: None, retain_for: Some(d), hold: false }),
        1 => (1u64..60, 1u64..60).prop_map(|(e, r)| Pick { expires_in: Some(e), retain_for: Some(r), hold: false }),
        1 => proptest::option::of(1u64..60).prop_map(|e| Pick { expires_in: e, retain_for: None, hold: true }),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Add {
        scope: usize,
        words: Vec<usize>,
        key: Option<u8>,
        session: Option<u8>,
        pick: Pick,
    },
    AddEvents {
        scope: usize,
        session: u8,
        events: Vec<(u8, Vec<usize>)>,
        pick: Pick,
    },
    Advance {
        ms: u64,
    },
    Sweep,
    DeleteEntry {
        scope: usize,
        pick: usize,
    },
    DeleteSession {
        scope: usize,
        session: u8,
    },
    DeleteUser {
        scope: usize,
    },
    Update {
        scope: usize,
        pick: usize,
        words: Vec<usize>,
    },
    /// An export of the scope's live entries (with their histories) at
    /// its epoch, kept for a later `Restore`.
    Snapshot {
        scope: usize,
    },
    /// The scope's last snapshot imported again: what an erasure since
    /// covers is refused, whole (a later epoch) or by id. (Derived entries
    /// are not restored: the restore around imports refuses them.)
    Restore {
        scope: usize,
    },
    /// A derived entry merging the entries at `picks` (an index past the
    /// scope's entries names one that does not exist).
    Derive {
        scope: usize,
        picks: Vec<usize>,
        words: Vec<usize>,
    },
}

fn words() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..WORDS.len(), 1..4)
}

fn op() -> impl Strategy<Value = Op> {
    let scope = 0..SCOPES.len();
    prop_oneof![
        4 => (scope.clone(), words(), proptest::option::of(0u8..4), proptest::option::of(0u8..3), pick())
            .prop_map(|(scope, words, key, session, pick)| Op::Add { scope, words, key, session, pick }),
        3 => (scope.clone(), 0u8..3, proptest::collection::vec((0u8..6, words()), 1..4), pick())
            .prop_map(|(scope, session, events, pick)| Op::AddEvents { scope, session, events, pick }),
        2 => (1u64..30).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
        2 => (scope.clone(), 0usize..8).prop_map(|(scope, pick)| Op::DeleteEntry { scope, pick }),
        1 => (scope.clone(), 0u8..3).prop_map(|(scope, session)| Op::DeleteSession { scope, session }),
        1 => scope.clone().prop_map(|scope| Op::DeleteUser { scope }),
        2 => (scope.clone(), 0usize..8, words()).prop_map(|(scope, pick, words)| Op::Update { scope, pick, words }),
        1 => scope.clone().prop_map(|scope| Op::Snapshot { scope }),
        1 => scope.clone().prop_map(|scope| Op::Restore { scope }),
        3 => (scope, proptest::collection::vec(0usize..9, 1..4), words())
            .prop_map(|(scope, picks, words)| Op::Derive { scope, picks, words }),
    ]
}

#[derive(Debug, Clone)]
struct ModelEntry {
    content: String,
    session: Option<SessionId>,
    provenance: Provenance,
    /// Not part of the data (a duplicate keeps the first one's).
    obligations: Obligations,
    /// 1 as written, one more per correction; once above 1, any add
    /// under the id is a duplicate.
    revision: u32,
    /// What it merged (derived entries only).
    sources: Vec<EntryId>,
}

impl PartialEq for ModelEntry {
    fn eq(&self, other: &Self) -> bool {
        self.content == other.content
            && self.session == other.session
            && self.provenance == other.provenance
    }
}

#[derive(Debug, Default)]
struct Model {
    now: u64,
    scopes: Vec<BTreeMap<EntryId, ModelEntry>>,
    epochs: Vec<u64>,
    erased: Vec<BTreeSet<EntryId>>,
    /// Erased entries of a session: events that would make them again are
    /// skipped as erased.
    sticky: Vec<BTreeSet<(SessionId, EntryId)>>,
    /// The last export of each scope: its epoch and entries.
    snapshots: Vec<Option<(u64, Vec<crate::ImportedEntry>)>>,
}

// The model's own reading of obligations, written out here rather than
// borrowed from the store's code, so a wrong rule there is caught.
fn expired(o: &Obligations, now: u64) -> bool {
    matches!(o.expires_at_ms, Some(at) if at <= now)
}

fn retained(o: &Obligations, now: u64) -> bool {
    matches!(o.retain_until_ms, Some(until) if until > now)
}

impl Model {
    /// Entries a caller may see now.
    fn live(&self, scope: usize) -> impl Iterator<Item = (&EntryId, &ModelEntry)> {
        self.scopes[scope]
            .iter()
            .filter(|(_, e)| !expired(&e.obligations, self.now))
    }

    /// Whether a live derived entry merges `id` now.
    fn merged(&self, scope: usize, id: &EntryId) -> bool {
        self.live(scope).any(|(_, e)| e.sources.contains(id))
    }

    /// `ids` and every entry derived from them, directly or not.
    fn closure(&self, scope: usize, ids: &[EntryId]) -> Vec<EntryId> {
        let mut out: Vec<EntryId> = Vec::new();
        for id in ids {
            if !out.contains(id) {
                out.push(*id);
            }
        }
        let mut i = 0;
        while i < out.len() {
            let from = out[i];
            for (d, e) in &self.scopes[scope] {
                if e.sources.contains(&from) && !out.contains(d) {
                    out.push(*d);
                }
            }
            i += 1;
        }
        out
    }

    /// The error code deleting `ids` now must answer, if any: a hold wins.
    fn check(&self, scope: usize, ids: &[EntryId]) -> Result<(), &'static str> {
        let bound: Vec<&Obligations> = ids
            .iter()
            .filter_map(|id| self.scopes[scope].get(id))
            .map(|e| &e.obligations)
            .collect();
        if bound.iter().any(|o| o.legal_hold) {
            Err("legal_hold")
        } else if bound.iter().any(|o| retained(o, self.now)) {
            Err("retention")
        } else {
            Ok(())
        }
    }

    fn sweepable(&self, scope: usize) -> Vec<EntryId> {
        self.scopes[scope]
            .iter()
            .filter(|(_, e)| {
                let o = &e.obligations;
                expired(o, self.now) && !o.legal_hold && !retained(o, self.now)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn erase(&mut self, scope: usize, id: EntryId) {
        if let Some(e) = self.scopes[scope].remove(&id) {
            if let Some(s) = e.session {
                self.sticky[scope].insert((s, id));
            }
            self.erased[scope].insert(id);
        }
    }
}

fn text(words: &[usize]) -> String {
    words
        .iter()
        .map(|&w| WORDS[w])
        .collect::<Vec<_>>()
        .join(" ")
}

fn session(n: u8) -> SessionId {
    SessionId::new(format!("session-{n}")).unwrap_or_else(|_| unreachable!())
}

/// Runs `cases` random sequences of up to 24 operations (`PROPTEST_CASES`
/// overrides the count).
pub fn run(factory: Arc<dyn StoreFactory>, cases: u32) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..24), |ops| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        rt.block_on(check(factory.clone(), ops))
    });
    if let Err(e) = result {
        panic!("model test failed: {e}");
    }
}

const START_MS: u64 = 1_000_000;

async fn check(factory: Arc<dyn StoreFactory>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::at(START_MS));
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_results: 1_000,
            max_page_entries: 1_000,
            max_result_bytes: 1_048_576,
            ..MemoryLimits::default()
        },
        clock: StoreClock(clock.clone()),
        // The model states which entries match a word and in what order;
        // neighbour support and the time stage (on by default) add
        // session neighbours and reorder by time, which
        // `neighbours_support_a_turn_and_can_be_turned_off` and
        // `time_in_questions_moves_turns_said_then` check.
        neighbours: hippocamp_search::NeighbourParams {
            enabled: false,
            ..hippocamp_search::NeighbourParams::default()
        },
        time: hippocamp_search::TimeParams {
            enabled: false,
            ..hippocamp_search::TimeParams::default()
        },
        ..MemoryConfig::default()
    };
    let store = factory.open(config).await;
    let scopes: Vec<MemoryScope> = SCOPES
        .iter()
        .map(|(a, u)| MemoryScope::parse(a, u).unwrap_or_else(|_| unreachable!()))
        .collect();
    let mut model = Model {
        now: START_MS,
        scopes: vec![BTreeMap::new(); SCOPES.len()],
        epochs: vec![0; SCOPES.len()],
        erased: vec![BTreeSet::new(); SCOPES.len()],
        sticky: vec![BTreeSet::new(); SCOPES.len()],
        snapshots: vec![None; SCOPES.len()],
    };
    let c = CallOptions::default();
    for op in ops {
        apply(&*store, &scopes, &mut model, op, &c, &clock).await?;
        verify(&*store, &scopes, &model, &c).await?;
    }
    Ok(())
}

async fn apply(
    store: &dyn MemoryStore,
    scopes: &[MemoryScope],
    model: &mut Model,
    op: Op,
    c: &CallOptions,
    clock: &ManualClock,
) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("unexpected error: {e}"));
    match op {
        Op::Add {
            scope,
            words,
            key,
            session: sess,
            pick,
        } => {
            let s = &scopes[scope];
            let obligations = pick.at(model.now);
            let w = &WriteOptions::default().obligations(obligations);
            let content = text(&words);
            let provenance = Provenance {
                session_id: sess.map(session),
                ..Provenance::default()
            };
            let mut input = NewEntry::new(content.clone()).provenance(provenance.clone());
            let expected_id = key.map(|k| {
                let k = IdempotencyKey::new(format!("key-{k}")).unwrap_or_else(|_| unreachable!());
                input.idempotency_key = Some(k.clone());
                EntryId::derive(s, &k)
            });
            let want = ModelEntry {
                content,
                session: sess.map(session),
                provenance,
                obligations,
                revision: 1,
                sources: Vec::new(),
            };
            let existing = expected_id.and_then(|id| model.scopes[scope].get(&id).cloned());
            match (store.add_entry(s, input, w).await, existing) {
                (Ok(out), None) => {
                    prop_assert!(!out.duplicate);
                    if let Some(id) = expected_id {
                        prop_assert_eq!(out.entry.id, id);
                    }
                    prop_assert!(!model.scopes[scope].contains_key(&out.entry.id));
                    prop_assert_eq!(out.entry.epoch, model.epochs[scope]);
                    prop_assert_eq!(out.entry.obligations, obligations);
                    model.scopes[scope].insert(out.entry.id, want);
                }
                (Ok(out), Some(old)) => {
                    prop_assert!(out.duplicate);
                    prop_assert_eq!(out.entry.obligations, old.obligations);
                    prop_assert_eq!(out.entry.revision, old.revision);
                    // A corrected entry takes any re-submission as a
                    // duplicate; an uncorrected one only the same data.
                    prop_assert!(old.revision > 1 || old == want);
                }
                (Err(Error::IdempotencyConflict(id)), Some(old)) => {
                    prop_assert_eq!(Some(id), expected_id);
                    prop_assert_eq!(old.revision, 1, "a corrected entry never conflicts");
                    prop_assert_ne!(old, want);
                }
                (Err(e), _) => return Err(fail(e)),
            }
        }
        Op::AddEvents {
            scope,
            session: sess,
            events,
            pick,
        } => {
            let s = &scopes[scope];
            let obligations = pick.at(model.now);
            let w = &WriteOptions::default().obligations(obligations);
            let evs: Vec<Event> = events
                .iter()
                .map(|(id, words)| {
                    Event::text(format!("e{id}"), "user", i64::from(*id), text(words))
                })
                .collect();
            let report = store
                .add_events(s, &session(sess), &evs, w)
                .await
                .map_err(fail)?;
            // The model's expectation, event by event.
            let (mut added, mut dups, mut conflicts, mut erased) = (0, 0, 0, 0);
            for (id, words) in &events {
                let key =
                    IdempotencyKey::new(format!("event:e{id}")).unwrap_or_else(|_| unreachable!());
                let entry_id = EntryId::derive(s, &key);
                let provenance = Provenance {
                    session_id: Some(session(sess)),
                    event_ids: vec![
                        hippocamp_core::EventId::new(format!("e{id}"))
                            .unwrap_or_else(|_| unreachable!()),
                    ],
                    author: Some(
                        hippocamp_core::Author::new("user").unwrap_or_else(|_| unreachable!()),
                    ),
                    timestamp_ms: Some(u64::from(*id)),
                };
                let want = ModelEntry {
                    content: text(words),
                    session: Some(session(sess)),
                    provenance,
                    obligations,
                    revision: 1,
                    sources: Vec::new(),
                };
                if model.sticky[scope].contains(&(session(sess), entry_id)) {
                    erased += 1;
                    continue;
                }
                match model.scopes[scope].get(&entry_id) {
                    None => {
                        added += 1;
                        model.scopes[scope].insert(entry_id, want);
                    }
                    Some(old) if old.revision > 1 || *old == want => dups += 1,
                    Some(_) => conflicts += 1,
                }
            }
            prop_assert_eq!(report.added.len(), added);
            prop_assert_eq!(report.duplicates.len(), dups);
            prop_assert_eq!(report.skipped.len(), conflicts + erased);
            let reported_erased = report
                .skipped
                .iter()
                .filter(|s| s.reason == crate::event::SkipReason::Erased)
                .count();
            prop_assert_eq!(reported_erased, erased);
        }
        Op::DeleteEntry { scope, pick } => {
            let s = &scopes[scope];
            let ids: Vec<EntryId> = model.scopes[scope].keys().copied().collect();
            let (id, present) = match ids.get(pick) {
                Some(id) => (*id, true),
                None => (EntryId::random(), false),
            };
            let gone = if present {
                model.closure(scope, &[id])
            } else {
                Vec::new()
            };
            let expected = model.check(scope, &gone);
            match (store.delete_entry(s, &id, c).await, expected) {
                (Ok(n), Ok(())) => {
                    prop_assert_eq!(n, gone.len() as u64);
                    for id in gone {
                        model.erase(scope, id);
                    }
                }
                (Err(got), Err(want)) => prop_assert_eq!(got.code(), want),
                (got, want) => {
                    return Err(TestCaseError::fail(format!(
                        "delete_entry gave {got:?}, the model {want:?}"
                    )));
                }
            }
        }
        Op::DeleteSession {
            scope,
            session: sess,
        } => {
            let s = &scopes[scope];
            let target = Some(session(sess));
            let of_session: Vec<EntryId> = model.scopes[scope]
                .iter()
                .filter(|(_, e)| e.session == target)
                .map(|(id, _)| *id)
                .collect();
            let gone = model.closure(scope, &of_session);
            let expected = model.check(scope, &gone);
            match (store.delete_session(s, &session(sess), c).await, expected) {
                (Ok(n), Ok(())) => {
                    prop_assert_eq!(n, gone.len() as u64);
                    for id in gone {
                        model.erase(scope, id);
                    }
                }
                (Err(got), Err(want)) => prop_assert_eq!(got.code(), want),
                (got, want) => {
                    return Err(TestCaseError::fail(format!(
                        "delete_session gave {got:?}, the model {want:?}"
                    )));
                }
            }
        }
        Op::DeleteUser { scope } => {
            let s = &scopes[scope];
            let gone: Vec<EntryId> = model.scopes[scope].keys().copied().collect();
            match (store.delete_user(s, c).await, model.check(scope, &gone)) {
                (Ok(e), Ok(())) => {
                    prop_assert_eq!(e.deleted, gone.len() as u64);
                    for id in gone {
                        model.erase(scope, id);
                    }
                    model.epochs[scope] += 1;
                    prop_assert_eq!(e.epoch, model.epochs[scope]);
                }
                (Err(got), Err(want)) => prop_assert_eq!(got.code(), want),
                (got, want) => {
                    return Err(TestCaseError::fail(format!(
                        "delete_user gave {got:?}, the model {want:?}"
                    )));
                }
            }
        }
        Op::Advance { ms } => {
            model.now += ms;
            clock.set(model.now);
        }
        Op::Update { scope, pick, words } => {
            let s = &scopes[scope];
            let ids: Vec<EntryId> = model.scopes[scope].keys().copied().collect();
            let id = ids.get(pick).copied().unwrap_or_else(EntryId::random);
            let update = crate::entry::EntryUpdate {
                content: text(&words),
                metadata: hippocamp_core::Metadata::new(),
            };
            let now = model.now;
            let max = u32::try_from(MemoryLimits::default().max_revisions).unwrap_or(u32::MAX);
            let got = store
                .update_entry(s, &id, &update, &WriteOptions::default())
                .await;
            match model.scopes[scope].get(&id).cloned() {
                None => prop_assert!(matches!(got, Err(Error::NotFound(_))), "{got:?}"),
                Some(e) if expired(&e.obligations, now) => {
                    prop_assert!(matches!(got, Err(Error::NotFound(_))), "{got:?}");
                }
                Some(e) if e.content == update.content => {
                    let out = got.map_err(fail)?;
                    prop_assert!(!out.changed);
                    prop_assert_eq!(out.entry.revision, e.revision);
                }
                Some(e) => {
                    // Dropping the oldest kept revision is a deletion.
                    let full = e.revision >= max;
                    let refusal = if full && e.obligations.legal_hold {
                        Some("legal_hold")
                    } else if full && retained(&e.obligations, now) {
                        Some("retention")
                    } else {
                        None
                    };
                    match (got, refusal) {
                        (Err(g), Some(want)) => prop_assert_eq!(g.code(), want),
                        (Ok(out), None) => {
                            prop_assert!(out.changed);
                            prop_assert_eq!(out.entry.revision, e.revision + 1);
                            prop_assert_eq!(out.entry.obligations, e.obligations);
                            if let Some(m) = model.scopes[scope].get_mut(&id) {
                                m.content.clone_from(&update.content);
                                m.revision += 1;
                            }
                        }
                        (got, want) => {
                            return Err(TestCaseError::fail(format!(
                                "update_entry gave {got:?}, the model {want:?}"
                            )));
                        }
                    }
                }
            }
        }
        Op::Snapshot { scope } => {
            let s = &scopes[scope];
            let page = store
                .export_entries(s, &crate::list::ExportRequest::default(), c)
                .await
                .map_err(fail)?;
            prop_assert!(page.next_cursor.is_none());
            let mut items = Vec::new();
            for entry in page.entries {
                let history = if entry.revision > 1 {
                    let mut h = store.entry_history(s, &entry.id, c).await.map_err(fail)?;
                    h.reverse();
                    h
                } else {
                    Vec::new()
                };
                items.push(crate::ImportedEntry { entry, history });
            }
            model.snapshots[scope] = Some((model.epochs[scope], items));
        }
        Op::Restore { scope } => {
            let Some((epoch, items)) = model.snapshots[scope].clone() else {
                return Ok(());
            };
            let items: Vec<crate::ImportedEntry> = items
                .into_iter()
                .filter(|i| !i.entry.is_derived())
                .collect();
            let s = &scopes[scope];
            let w = WriteOptions::default().epoch(epoch);
            let got = store.import_entries(s, &items, &w).await;
            if model.epochs[scope] > epoch {
                // The user was erased since the export: nothing of it.
                prop_assert!(matches!(got, Err(Error::StaleEpoch { .. })), "{got:?}");
                return Ok(());
            }
            let report = got.map_err(fail)?;
            let mut want = crate::ImportReport::default();
            for item in items {
                let e = item.entry;
                if expired(&e.obligations, model.now) {
                    want.expired += 1;
                } else if model.erased[scope].contains(&e.id) {
                    want.erased += 1;
                } else if let std::collections::btree_map::Entry::Vacant(slot) =
                    model.scopes[scope].entry(e.id)
                {
                    want.imported += 1;
                    slot.insert(ModelEntry {
                        content: e.content.clone(),
                        session: e.provenance.session_id.clone(),
                        provenance: e.provenance.clone(),
                        obligations: e.obligations,
                        revision: e.revision,
                        sources: Vec::new(),
                    });
                } else {
                    want.existing += 1;
                }
            }
            prop_assert_eq!(report, want);
        }
        Op::Derive {
            scope,
            picks,
            words,
        } => {
            let s = &scopes[scope];
            let ids: Vec<EntryId> = model.scopes[scope].keys().copied().collect();
            let mut sources: Vec<EntryId> = Vec::new();
            for p in picks {
                let id = ids.get(p).copied().unwrap_or_else(EntryId::random);
                if !sources.contains(&id) {
                    sources.push(id);
                }
            }
            let input = NewEntry {
                derivation: Some(crate::lineage::Derivation {
                    sources: sources
                        .iter()
                        .map(|&entry| crate::lineage::Source {
                            entry,
                            role: crate::lineage::Role::Merged,
                        })
                        .collect(),
                    run: None,
                }),
                ..NewEntry::new(text(&words))
            };
            let gone = sources.iter().find(|id| {
                model.scopes[scope]
                    .get(id)
                    .is_none_or(|e| expired(&e.obligations, model.now))
            });
            match (
                store.add_entry(s, input, &WriteOptions::default()).await,
                gone,
            ) {
                (Ok(out), None) => {
                    let expiry = sources
                        .iter()
                        .filter_map(|id| model.scopes[scope][id].obligations.expires_at_ms)
                        .min();
                    prop_assert_eq!(out.entry.obligations.expires_at_ms, expiry);
                    prop_assert_eq!(out.entry.origin, crate::lineage::Origin::Fact);
                    model.scopes[scope].insert(
                        out.entry.id,
                        ModelEntry {
                            content: text(&words),
                            session: None,
                            provenance: out.entry.provenance.clone(),
                            obligations: out.entry.obligations,
                            revision: 1,
                            sources,
                        },
                    );
                }
                (Err(Error::SourceGone(id)), Some(want)) => {
                    prop_assert!(sources.contains(&id), "{id} is not a source");
                    let _ = want;
                }
                (got, want) => {
                    return Err(TestCaseError::fail(format!(
                        "a derived add gave {got:?}, the model a gone source {want:?}"
                    )));
                }
            }
        }
        Op::Sweep => {
            // Each expired entry nothing guards, with what was derived
            // from it, unless a guard in that lineage keeps it.
            let mut due: Vec<(usize, EntryId)> = Vec::new();
            for i in 0..scopes.len() {
                for id in model.sweepable(i) {
                    let lineage = model.closure(i, &[id]);
                    if model.check(i, &lineage).is_ok() {
                        for d in lineage {
                            if !due.contains(&(i, d)) {
                                due.push((i, d));
                            }
                        }
                    }
                }
            }
            let sweep = store
                .sweep_expired(crate::list::MAX_SWEEP_BATCH, &[], c)
                .await
                .map_err(fail)?;
            prop_assert_eq!(sweep.deleted, due.len() as u64);
            prop_assert!(!sweep.more);
            for (i, id) in due {
                model.erase(i, id);
            }
        }
    }
    Ok(())
}

async fn verify(
    store: &dyn MemoryStore,
    scopes: &[MemoryScope],
    model: &Model,
    c: &CallOptions,
) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("unexpected error: {e}"));
    let analyzer = hippocamp_search::Analyzer::english();
    let mut total = 0;
    for (i, s) in scopes.iter().enumerate() {
        total += model.scopes[i].len() as u64;
        let entries: BTreeMap<EntryId, ModelEntry> =
            model.live(i).map(|(id, e)| (*id, e.clone())).collect();
        let entries = &entries;
        for word in WORDS {
            let res = store
                .search(s, &super::lexical(*word), c)
                .await
                .map_err(fail)?;
            let stem = analyzer.terms(word);
            let want: BTreeSet<EntryId> = entries
                .iter()
                .filter(|(id, _)| !model.merged(i, id))
                .filter(|(_, e)| analyzer.terms(&e.content).iter().any(|t| stem.contains(t)))
                .map(|(id, _)| *id)
                .collect();
            for h in &res.hits {
                prop_assert_eq!(&h.entry.scope, s, "foreign hit");
            }
            let got: BTreeSet<EntryId> = res.hits.iter().map(|h| h.entry.id).collect();
            prop_assert_eq!(got, want, "search {:?} in {}", word, s);
        }
        let max = usize::try_from(MemoryLimits::default().max_revisions).unwrap_or(usize::MAX);
        for (id, e) in entries {
            let got = store.get_entry(s, id, c).await.map_err(fail)?;
            prop_assert_eq!(&got.content, &e.content);
            prop_assert_eq!(&got.scope, s);
            prop_assert_eq!(got.revision, e.revision);
            let status = if model.merged(i, id) {
                crate::lineage::Status::Merged
            } else {
                crate::lineage::Status::Current
            };
            prop_assert_eq!(got.status, status, "{}", id);
            let history = store.entry_history(s, id, c).await.map_err(fail)?;
            prop_assert_eq!(history.len(), (e.revision as usize).min(max));
            prop_assert_eq!(&history[0].content, &e.content);
        }
        let listed = store
            .list_entries(
                s,
                &crate::list::ListRequest {
                    limit: Some(1_000),
                    ..crate::list::ListRequest::default()
                },
                c,
            )
            .await
            .map_err(fail)?;
        let listed: BTreeSet<EntryId> = listed.entries.iter().map(|e| e.id).collect();
        prop_assert_eq!(&listed, &entries.keys().copied().collect::<BTreeSet<_>>());
        let gone = model.erased[i].iter().chain(model.scopes[i].keys());
        for id in gone.filter(|id| !entries.contains_key(id)) {
            prop_assert!(matches!(
                store.get_entry(s, id, c).await,
                Err(Error::NotFound(_))
            ));
        }
        prop_assert_eq!(
            store.erasure_epoch(s, c).await.map_err(fail)?,
            model.epochs[i]
        );
    }
    prop_assert_eq!(store.status().await.map_err(fail)?.entries, total);
    Ok(())
}
