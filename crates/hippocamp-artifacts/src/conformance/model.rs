//! Model-based test: random puts, deletes and (for durable stores)
//! restarts against a store and a plain model, checking after every step
//! that versions are monotonic and never reused and that scopes never see
//! each other's artifacts.
//!
//! Four scopes share app, user and session names pairwise, and two names
//! are shared by every scope, so a leak across any part of a scope shows.

#![allow(clippy::cast_possible_truncation, clippy::many_single_char_names)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;
use hippocamp_core::{CallOptions, Sha256Digest};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::ArtifactFactory;
use crate::model::{
    ArtifactName, ArtifactScope, DeleteSelector, PageRequest, PutOptions, Selector,
};
use crate::store::{ArtifactLimits, ArtifactStore, Body};

const NAMES: &[&str] = &["a", "b/c", "report.txt"];

fn scopes() -> Vec<ArtifactScope> {
    vec![
        ArtifactScope::app("app").unwrap_or_else(|_| unreachable!()),
        ArtifactScope::user("app", "alice").unwrap_or_else(|_| unreachable!()),
        ArtifactScope::session("app", "alice", "s1").unwrap_or_else(|_| unreachable!()),
        ArtifactScope::session("app", "bob", "s1").unwrap_or_else(|_| unreachable!()),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Put {
        scope: usize,
        name: usize,
        len: usize,
    },
    Delete {
        scope: usize,
        name: usize,
        which: u8,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..4, 0..NAMES.len(), 0usize..5_000)
            .prop_map(|(scope, name, len)| Op::Put { scope, name, len }),
        3 => (0usize..4, 0..NAMES.len(), 0u8..6)
            .prop_map(|(scope, name, which)| Op::Delete { scope, name, which }),
        1 => Just(Op::Restart),
    ]
}

/// Runs `cases` random sequences of up to 24 operations (`PROPTEST_CASES`
/// overrides the count).
pub fn run(factory: Arc<dyn ArtifactFactory>, cases: u32) {
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

#[derive(Debug, Default)]
struct ModelName {
    high_water: u64,
    live: BTreeMap<u64, Sha256Digest>,
}

fn body(seed: u64, len: usize) -> Bytes {
    (0..len)
        .map(|i| u8::try_from((i as u64 * 7 + seed) % 253).unwrap_or(0))
        .collect::<Vec<u8>>()
        .into()
}

async fn check(factory: Arc<dyn ArtifactFactory>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let limits = ArtifactLimits {
        chunk_size: 4_096,
        ..ArtifactLimits::default()
    };
    let mut store: Arc<dyn ArtifactStore> = factory.open(limits).await;
    let scopes = scopes();
    let names: Vec<ArtifactName> = NAMES
        .iter()
        .map(|n| ArtifactName::new(*n).map_err(|e| TestCaseError::fail(e.to_string())))
        .collect::<Result<_, _>>()?;
    let mut model: BTreeMap<(usize, usize), ModelName> = BTreeMap::new();
    let c = CallOptions::default();
    let fail = |e: hippocamp_core::Error| TestCaseError::fail(e.to_string());
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put { scope, name, len } => {
                let data = body(step as u64, len);
                let meta = store
                    .put(
                        &scopes[scope],
                        &names[name],
                        Body::from(data.clone()),
                        &PutOptions::default(),
                    )
                    .await
                    .map_err(fail)?;
                let m = model.entry((scope, name)).or_default();
                prop_assert!(
                    meta.version > m.high_water,
                    "version {} not above {}",
                    meta.version,
                    m.high_water
                );
                prop_assert_eq!(meta.version, m.high_water + 1);
                prop_assert_eq!(&meta.scope, &scopes[scope]);
                m.high_water = meta.version;
                m.live.insert(meta.version, Sha256Digest::of(&data));
            }
            Op::Delete { scope, name, which } => {
                let m = model.entry((scope, name)).or_default();
                let sel = match which {
                    0 => DeleteSelector::All,
                    1 => DeleteSelector::Latest,
                    // Sometimes a version that may not exist.
                    w => DeleteSelector::Version(u64::from(w - 1)),
                };
                let removed = store
                    .delete(&scopes[scope], &names[name], sel, &c)
                    .await
                    .map_err(fail)?;
                let want: Vec<u64> = match sel {
                    DeleteSelector::All => m.live.keys().copied().collect(),
                    DeleteSelector::Latest => {
                        m.live.keys().next_back().copied().into_iter().collect()
                    }
                    DeleteSelector::Version(v) => {
                        m.live.contains_key(&v).then_some(v).into_iter().collect()
                    }
                };
                prop_assert_eq!(&removed, &want);
                for v in want {
                    m.live.remove(&v);
                }
            }
            Op::Restart => {
                // Volatile stores have nothing to reopen from.
                if store.capabilities().durable {
                    store = factory.reopen(store).await.ok_or_else(|| {
                        TestCaseError::fail("a durable store's factory must reopen it")
                    })?;
                }
            }
        }
        // Every scope sees exactly its own names and versions.
        for (si, scope) in scopes.iter().enumerate() {
            let listed = store
                .list_names(scope, &PageRequest::first(100), &c)
                .await
                .map_err(fail)?;
            prop_assert_eq!(&listed.scope, scope);
            let want: BTreeSet<&ArtifactName> = (0..NAMES.len())
                .filter(|ni| model.get(&(si, *ni)).is_some_and(|m| !m.live.is_empty()))
                .map(|ni| &names[ni])
                .collect();
            prop_assert_eq!(listed.items.iter().collect::<BTreeSet<_>>(), want);
            for (ni, name) in names.iter().enumerate() {
                let live = model
                    .get(&(si, ni))
                    .map(|m| m.live.clone())
                    .unwrap_or_default();
                let page = store
                    .list_versions(scope, name, &PageRequest::first(100), &c)
                    .await
                    .map_err(fail)?;
                let got: Vec<(u64, Sha256Digest)> =
                    page.items.iter().map(|m| (m.version, m.sha256)).collect();
                prop_assert!(
                    page.items
                        .iter()
                        .all(|m| m.scope == *scope && m.name == *name)
                );
                prop_assert_eq!(got, live.clone().into_iter().collect::<Vec<_>>());
                if let Some((&v, digest)) = live.iter().next_back() {
                    let read = store
                        .get(scope, name, Selector::Latest, None, &c)
                        .await
                        .map_err(fail)?;
                    prop_assert_eq!(read.meta.version, v);
                    let bytes = read.bytes().await.map_err(fail)?;
                    prop_assert_eq!(Sha256Digest::of(&bytes), *digest);
                }
            }
        }
    }
    Ok(())
}
