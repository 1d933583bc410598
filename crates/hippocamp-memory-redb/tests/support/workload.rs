//! A deterministic write workload with its expected outcome, for crash and
//! power-loss tests.
//!
//! `ops(seed, stream, n)` generates the same operations in the process that
//! runs them and in the one that checks the result. Each stream owns two
//! scopes, so concurrent streams never touch each other's data, and a
//! stream's operations run one after another: after a crash, the stored
//! state of a stream must equal the model after its acknowledged operations,
//! or after those plus the one that was in flight.

#![allow(dead_code, clippy::unwrap_used, clippy::missing_panics_doc)]

use std::collections::{BTreeMap, BTreeSet};

use hippocamp_core::{CallOptions, EntryId, IdempotencyKey, MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use rand::{Rng, SeedableRng};

/// One operation.
#[derive(Debug, Clone)]
pub enum WOp {
    Add {
        scope: usize,
        key: String,
        token: String,
    },
    Events {
        scope: usize,
        session: String,
        events: Vec<(String, String)>,
    },
    Delete {
        scope: usize,
        id: EntryId,
    },
    Erase {
        scope: usize,
    },
}

/// The state a stream's scopes should hold: id → token, and epochs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    pub entries: [BTreeMap<EntryId, String>; 2],
    pub epochs: [u64; 2],
}

pub fn scope(stream: usize, i: usize) -> MemoryScope {
    MemoryScope::parse("crash", &format!("stream{stream}-scope{i}")).unwrap()
}

fn event_key(id: &str) -> IdempotencyKey {
    IdempotencyKey::new(format!("event:{id}")).unwrap()
}

impl Expected {
    pub fn apply(&mut self, stream: usize, op: &WOp) {
        match op {
            WOp::Add {
                scope: s,
                key,
                token,
            } => {
                let id = EntryId::derive(
                    &scope(stream, *s),
                    &IdempotencyKey::new(key.as_str()).unwrap(),
                );
                self.entries[*s].insert(id, token.clone());
            }
            WOp::Events {
                scope: s, events, ..
            } => {
                for (eid, token) in events {
                    let id = EntryId::derive(&scope(stream, *s), &event_key(eid));
                    self.entries[*s].insert(id, token.clone());
                }
            }
            WOp::Delete { scope: s, id } => {
                self.entries[*s].remove(id);
            }
            WOp::Erase { scope: s } => {
                self.entries[*s].clear();
                self.epochs[*s] += 1;
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.entries.iter().map(|m| m.len() as u64).sum()
    }
}

/// The operations of one stream.
pub fn ops(seed: u64, stream: usize, n: usize) -> Vec<WOp> {
    let mut rng =
        rand::rngs::StdRng::seed_from_u64(seed ^ (stream as u64).wrapping_mul(0x9e37_79b9));
    let mut model = Expected::default();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let s = rng.random_range(0..2usize);
        let roll = rng.random_range(0..100);
        let op = if roll < 45 {
            WOp::Add {
                scope: s,
                key: format!("k-{stream}-{i}"),
                token: format!("tok{stream}x{i}"),
            }
        } else if roll < 80 {
            let count = rng.random_range(1..5);
            WOp::Events {
                scope: s,
                session: format!("sess{}", rng.random_range(0..3)),
                events: (0..count)
                    .map(|j| {
                        (
                            format!("ev-{stream}-{i}-{j}"),
                            format!("tok{stream}x{i}x{j}"),
                        )
                    })
                    .collect(),
            }
        } else if roll < 93 && !model.entries[s].is_empty() {
            let pick = rng.random_range(0..model.entries[s].len());
            WOp::Delete {
                scope: s,
                id: *model.entries[s].keys().nth(pick).unwrap(),
            }
        } else {
            WOp::Erase { scope: s }
        };
        model.apply(stream, &op);
        out.push(op);
    }
    out
}

/// Runs one operation; an error is a test failure.
pub async fn run(store: &dyn MemoryStore, stream: usize, op: &WOp) {
    let w = WriteOptions::default();
    let c = CallOptions::default();
    match op {
        WOp::Add {
            scope: s,
            key,
            token,
        } => {
            store
                .add_entry(
                    &scope(stream, *s),
                    NewEntry::new(format!("remember {token}"))
                        .idempotency_key(IdempotencyKey::new(key.as_str()).unwrap()),
                    &w,
                )
                .await
                .unwrap();
        }
        WOp::Events {
            scope: s,
            session,
            events,
        } => {
            let evs: Vec<Event> = events
                .iter()
                .map(|(id, token)| Event::text(id.clone(), "user", 1, format!("said {token}")))
                .collect();
            let r = store
                .add_events(
                    &scope(stream, *s),
                    &SessionId::new(session.as_str()).unwrap(),
                    &evs,
                    &w,
                )
                .await
                .unwrap();
            assert!(r.skipped.is_empty(), "{r:?}");
        }
        WOp::Delete { scope: s, id } => {
            store
                .delete_entry(&scope(stream, *s), id, &c)
                .await
                .unwrap();
        }
        WOp::Erase { scope: s } => {
            store.delete_user(&scope(stream, *s), &c).await.unwrap();
        }
    }
}

/// Every id a stream's operations ever name, with its token.
pub fn universe(stream: usize, ops: &[WOp]) -> [BTreeMap<EntryId, String>; 2] {
    let mut all: [BTreeMap<EntryId, String>; 2] = Default::default();
    let mut m = Expected::default();
    for op in ops {
        m.apply(stream, op);
        for s in 0..2 {
            for (id, t) in &m.entries[s] {
                all[s].insert(*id, t.clone());
            }
        }
    }
    all
}

/// Reads back what the store holds of a stream: present ids and epochs.
/// Checks on the way that search and entries agree: a present entry is
/// found by its token, an absent one is not.
pub async fn observe(
    store: &dyn MemoryStore,
    stream: usize,
    all: &[BTreeMap<EntryId, String>; 2],
) -> Result<Expected, String> {
    let c = CallOptions::default();
    let mut seen = Expected::default();
    for s in 0..2 {
        let sc = scope(stream, s);
        seen.epochs[s] = store
            .erasure_epoch(&sc, &c)
            .await
            .map_err(|e| e.to_string())?;
        for (id, token) in &all[s] {
            let present = match store.get_entry(&sc, id, &c).await {
                Ok(e) => {
                    if !e.content.ends_with(token.as_str()) {
                        return Err(format!(
                            "entry {id} holds {:?}, expected {token}",
                            e.content
                        ));
                    }
                    true
                }
                Err(hippocamp_core::Error::NotFound(_)) => false,
                Err(e) => return Err(e.to_string()),
            };
            let hits = store
                .search(&sc, &SearchRequest::new(token.clone()).limit(50), &c)
                .await
                .map_err(|e| e.to_string())?
                .hits;
            let found = hits.iter().any(|h| h.entry.id == *id);
            if found != present {
                return Err(format!(
                    "entry {id} present={present} but search found={found}"
                ));
            }
            if present {
                seen.entries[s].insert(*id, token.clone());
            }
        }
    }
    Ok(seen)
}

/// Checks a recovered stream: equal to the model after `acked` operations,
/// or after one more (the one in flight).
pub fn check(stream: usize, ops: &[WOp], acked: usize, seen: &Expected) -> Result<usize, String> {
    let mut m = Expected::default();
    for op in &ops[..acked] {
        m.apply(stream, op);
    }
    if *seen == m {
        return Ok(acked);
    }
    if let Some(op) = ops.get(acked) {
        m.apply(stream, op);
        if *seen == m {
            return Ok(acked + 1);
        }
    }
    let lost: BTreeSet<&EntryId> = m.entries.iter().flat_map(|e| e.keys()).collect();
    Err(format!(
        "stream {stream}: state after {acked} acknowledged ops does not match; expected ids {lost:?}, found {seen:?}"
    ))
}
