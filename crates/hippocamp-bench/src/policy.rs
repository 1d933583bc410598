//! The governance wrapper's cost on search: one 600-entry in-memory scope
//! of LoCoMo turns, ingested through a static policy (so every entry
//! carries a TTL and a retention the search must check), searched with
//! LoCoMo questions through the bare store and through `PolicyChecked`
//! over it, interleaved call by call so both share the machine's state.

use std::sync::Arc;
use std::time::Instant;

use hippocamp_core::{CallOptions, Caller, MemoryScope};
use hippocamp_governance::{
    AppPolicy, InMemoryConsents, MetadataRule, PolicyChecked, PolicyConfig, StaticPolicy,
};
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore, SearchRequest};
use serde::Serialize;

use crate::{Latency, Result, latency};

/// Entries in the scope.
const ENTRIES: usize = 600;

/// `policy` results.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyBench {
    /// Entries in the scope.
    pub entries: usize,
    /// Searches of each kind.
    pub samples: usize,
    /// The store alone.
    pub bare: Latency,
    /// The same store behind `PolicyChecked` and the static policy.
    pub with_policy: Latency,
    /// `with_policy` p50 / `bare` p50 (bar: ≤ 1.1).
    pub p50_ratio: f64,
}

fn config() -> PolicyConfig {
    let app = AppPolicy {
        ttl_ms: Some(30 * 24 * 3_600_000),
        retention_ms: Some(24 * 3_600_000),
        legal_holds: vec!["someone-else".to_owned()],
        rules: vec![MetadataRule {
            matches: serde_json::json!({"kind": "chit_chat"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ttl_ms: Some(3_600_000),
            retention_ms: None,
        }],
        ..AppPolicy::default()
    };
    PolicyConfig {
        apps: [("bench".to_owned(), app)].into_iter().collect(),
        ..PolicyConfig::default()
    }
}

/// Runs `samples` interleaved pairs.
pub async fn policy(samples: usize) -> Result<PolicyBench> {
    let store = Arc::new(InMemoryStore::new(MemoryConfig::default())?);
    let policy = Arc::new(StaticPolicy::new(
        config(),
        Arc::new(InMemoryConsents::default()),
    )?);
    let governed = PolicyChecked::new(
        Arc::clone(&store),
        policy,
        hippocamp_core::time::system_clock(),
    );
    let scope = MemoryScope::parse("bench", "user")?;
    let queries = crate::locomo_scope(&governed, &scope, ENTRIES).await?;
    let call = CallOptions::default().on_behalf_of(Caller::token("0123456789ab"));
    let (mut plain, mut checked) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    // The first 200 pairs warm both paths; which one runs first alternates,
    // so neither always finds the caches the other warmed.
    for (i, q) in queries.iter().cycle().take(samples + 200).enumerate() {
        let request = SearchRequest::new(q.clone()).limit(10);
        let time = |governed_first: bool| {
            let request = &request;
            let (store, governed, scope, call) = (&store, &governed, &scope, &call);
            async move {
                let mut out = [0.0; 2];
                for turn in [governed_first, !governed_first] {
                    let started = Instant::now();
                    if turn {
                        std::hint::black_box(governed.search(scope, request, call).await?);
                    } else {
                        std::hint::black_box(store.search(scope, request, call).await?);
                    }
                    out[usize::from(turn)] = started.elapsed().as_secs_f64() * 1e6;
                }
                Ok::<_, crate::BenchError>(out)
            }
        };
        let [bare, wrapped] = time(i % 2 == 1).await?;
        if i >= 200 {
            plain.push(bare);
            checked.push(wrapped);
        }
    }
    let (bare, with_policy) = (latency(plain), latency(checked));
    Ok(PolicyBench {
        entries: ENTRIES,
        samples,
        p50_ratio: with_policy.p50_us / bare.p50_us,
        bare,
        with_policy,
    })
}
