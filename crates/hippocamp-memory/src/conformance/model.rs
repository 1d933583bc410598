//! Model-based test: random operation sequences against a store and a plain
//! reference model, checking that they agree after every step.
//!
//! Three scopes share user and app names pairwise (`app/alice`, `app/bob`,
//! `other/alice`), so a leak across either half of a scope shows up. After
//! each operation every scope is searched for every word of a small
//! vocabulary and must return exactly the model's entries containing it;
//! erased entries must be gone from `get_entry` too, and an event that
//! would make an erased entry of its session again is skipped as erased.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hippocamp_core::{
    CallOptions, EntryId, Error, IdempotencyKey, MemoryLimits, MemoryScope, SessionId,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::StoreFactory;
use crate::MemoryConfig;
use crate::entry::{NewEntry, Provenance};
use crate::event::Event;
use crate::store::{MemoryStore, WriteOptions};

const WORDS: &[&str] = &["apple", "banana", "cherry", "delta", "echo", "falcon"];
const SCOPES: &[(&str, &str)] = &[("app", "alice"), ("app", "bob"), ("other", "alice")];

#[derive(Debug, Clone)]
enum Op {
    Add {
        scope: usize,
        words: Vec<usize>,
        key: Option<u8>,
        session: Option<u8>,
    },
    AddEvents {
        scope: usize,
        session: u8,
        events: Vec<(u8, Vec<usize>)>,
    },
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
}

fn words() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..WORDS.len(), 1..4)
}

fn op() -> impl Strategy<Value = Op> {
    let scope = 0..SCOPES.len();
    prop_oneof![
        4 => (scope.clone(), words(), proptest::option::of(0u8..4), proptest::option::of(0u8..3))
            .prop_map(|(scope, words, key, session)| Op::Add { scope, words, key, session }),
        3 => (scope.clone(), 0u8..3, proptest::collection::vec((0u8..6, words()), 1..4))
            .prop_map(|(scope, session, events)| Op::AddEvents { scope, session, events }),
        2 => (scope.clone(), 0usize..8).prop_map(|(scope, pick)| Op::DeleteEntry { scope, pick }),
        1 => (scope.clone(), 0u8..3).prop_map(|(scope, session)| Op::DeleteSession { scope, session }),
        1 => scope.prop_map(|scope| Op::DeleteUser { scope }),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct ModelEntry {
    content: String,
    session: Option<SessionId>,
    provenance: Provenance,
}

#[derive(Debug, Default)]
struct Model {
    scopes: Vec<BTreeMap<EntryId, ModelEntry>>,
    epochs: Vec<u64>,
    erased: Vec<BTreeSet<EntryId>>,
    /// Erased entries of a session: events that would make them again are
    /// skipped as erased.
    sticky: Vec<BTreeSet<(SessionId, EntryId)>>,
}

impl Model {
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

async fn check(factory: Arc<dyn StoreFactory>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_results: 1_000,
            max_result_bytes: 1_048_576,
            ..MemoryLimits::default()
        },
        ..MemoryConfig::default()
    };
    let store = factory.open(config).await;
    let scopes: Vec<MemoryScope> = SCOPES
        .iter()
        .map(|(a, u)| MemoryScope::parse(a, u).unwrap_or_else(|_| unreachable!()))
        .collect();
    let mut model = Model {
        scopes: vec![BTreeMap::new(); SCOPES.len()],
        epochs: vec![0; SCOPES.len()],
        erased: vec![BTreeSet::new(); SCOPES.len()],
        sticky: vec![BTreeSet::new(); SCOPES.len()],
    };
    let c = CallOptions::default();
    let w = WriteOptions::default();
    for op in ops {
        apply(&*store, &scopes, &mut model, op, &c, &w).await?;
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
    w: &WriteOptions,
) -> Result<(), TestCaseError> {
    let fail = |e: Error| TestCaseError::fail(format!("unexpected error: {e}"));
    match op {
        Op::Add {
            scope,
            words,
            key,
            session: sess,
        } => {
            let s = &scopes[scope];
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
                    model.scopes[scope].insert(out.entry.id, want);
                }
                (Ok(out), Some(old)) => {
                    prop_assert!(out.duplicate);
                    prop_assert_eq!(old, want);
                }
                (Err(Error::IdempotencyConflict(id)), Some(old)) => {
                    prop_assert_eq!(Some(id), expected_id);
                    prop_assert_ne!(old, want);
                }
                (Err(e), _) => return Err(fail(e)),
            }
        }
        Op::AddEvents {
            scope,
            session: sess,
            events,
        } => {
            let s = &scopes[scope];
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
                    Some(old) if *old == want => dups += 1,
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
            let n = store.delete_entry(s, &id, c).await.map_err(fail)?;
            prop_assert_eq!(n, u64::from(present));
            if present {
                model.erase(scope, id);
            }
        }
        Op::DeleteSession {
            scope,
            session: sess,
        } => {
            let s = &scopes[scope];
            let target = Some(session(sess));
            let gone: Vec<EntryId> = model.scopes[scope]
                .iter()
                .filter(|(_, e)| e.session == target)
                .map(|(id, _)| *id)
                .collect();
            let n = store
                .delete_session(s, &session(sess), c)
                .await
                .map_err(fail)?;
            prop_assert_eq!(n, gone.len() as u64);
            for id in gone {
                model.erase(scope, id);
            }
        }
        Op::DeleteUser { scope } => {
            let s = &scopes[scope];
            let e = store.delete_user(s, c).await.map_err(fail)?;
            prop_assert_eq!(e.deleted, model.scopes[scope].len() as u64);
            let gone: Vec<EntryId> = model.scopes[scope].keys().copied().collect();
            for id in gone {
                model.erase(scope, id);
            }
            model.epochs[scope] += 1;
            prop_assert_eq!(e.epoch, model.epochs[scope]);
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
        let entries = &model.scopes[i];
        total += entries.len() as u64;
        for word in WORDS {
            let res = store
                .search(s, &super::lexical(*word), c)
                .await
                .map_err(fail)?;
            let stem = analyzer.terms(word);
            let want: BTreeSet<EntryId> = entries
                .iter()
                .filter(|(_, e)| analyzer.terms(&e.content).iter().any(|t| stem.contains(t)))
                .map(|(id, _)| *id)
                .collect();
            for h in &res.hits {
                prop_assert_eq!(&h.entry.scope, s, "foreign hit");
            }
            let got: BTreeSet<EntryId> = res.hits.iter().map(|h| h.entry.id).collect();
            prop_assert_eq!(got, want, "search {:?} in {}", word, s);
        }
        for (id, e) in entries {
            let got = store.get_entry(s, id, c).await.map_err(fail)?;
            prop_assert_eq!(&got.content, &e.content);
            prop_assert_eq!(&got.scope, s);
        }
        for id in model.erased[i]
            .iter()
            .filter(|id| !entries.contains_key(id))
        {
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
