//! The router over the durable store runs the conformance suite with an
//! idle timeout so short that scopes are reclaimed and reloaded all the
//! time, and survives callers dropped mid-flight.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_memory::conformance::{Guarded, StoreFactory};
use hippocamp_memory::{MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_router::RouterConfig;
use rand::{Rng, SeedableRng};

fn churning() -> RouterConfig {
    RouterConfig {
        idle_scope_timeout_ms: 1,
        ..RouterConfig::default()
    }
}

struct Factory;

#[async_trait]
impl StoreFactory for Factory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let dir = tempfile::tempdir().unwrap();
        let inner = Arc::new(RedbMemoryStore::open(dir.path(), config).unwrap());
        let routed = hippocamp_routed::RoutedMemory::new(inner, churning()).unwrap();
        Arc::new(Guarded::new(routed, dir))
    }
}

hippocamp_memory::memory_conformance_tests!(Factory);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_routing_reclaims_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let inner = Arc::new(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    let routed = hippocamp_routed::RoutedMemory::new(inner.clone(), churning()).unwrap();
    assert!(routed.capabilities().routing.unwrap().idle_reclamation);
    let s = MemoryScope::parse("app", "u").unwrap();
    routed
        .add_entry(
            &s,
            NewEntry::new("kept across reclaims"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert!(inner.is_cached(&s));
    for _ in 0..200 {
        if !inner.is_cached(&s) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        !inner.is_cached(&s),
        "the idle scope's state was not released"
    );
    let status = routed.status().await.unwrap();
    assert!(status.router.unwrap().reclaimed_workers >= 1);
    let hits = routed
        .search(&s, &SearchRequest::new("reclaims"), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(hits.hits.len(), 1);
}

/// Callers dropped at random moments leave no lease, no activation and no
/// half-applied state: afterwards every stored entry is searchable and the
/// counters agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_callers_leak_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = MemoryConfig::default();
    config.limits.max_results = 1_000;
    config.limits.max_result_bytes = 1_048_576;
    let inner = Arc::new(RedbMemoryStore::open(dir.path(), config).unwrap());
    let routed = Arc::new(
        hippocamp_routed::RoutedMemory::new(
            inner,
            RouterConfig {
                max_active_scopes: 4,
                idle_scope_timeout_ms: 1,
                ..RouterConfig::default()
            },
        )
        .unwrap(),
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for round in 0..20 {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let routed = routed.clone();
            let user = format!("u{}", (round * 16 + i) % 6);
            tasks.push(tokio::spawn(async move {
                let s = MemoryScope::parse("app", &user).unwrap();
                let opts = WriteOptions::new(CallOptions::timeout_ms(200).unwrap());
                let _ = routed
                    .add_entry(&s, NewEntry::new(format!("word{round}x{i} shared")), &opts)
                    .await;
                let _ = routed
                    .search(&s, &SearchRequest::new("shared"), &CallOptions::default())
                    .await;
            }));
        }
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..3_000))).await;
        for t in tasks.iter().step_by(2) {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let status = routed.status().await.unwrap();
    assert_eq!(
        status.router.as_ref().unwrap().cold_activations_in_flight,
        0
    );
    let mut total = 0;
    for u in 0..6 {
        let s = MemoryScope::parse("app", &format!("u{u}")).unwrap();
        let hits = routed
            .search(
                &s,
                &SearchRequest::new("shared").limit(1_000),
                &CallOptions::default(),
            )
            .await
            .unwrap()
            .hits;
        for h in &hits {
            let got = routed
                .get_entry(&s, &h.entry.id, &CallOptions::default())
                .await
                .unwrap();
            assert_eq!(got, *h.entry);
        }
        total += hits.len() as u64;
    }
    assert_eq!(status.entries, total, "search and stored entries disagree");
}

/// An export through the router reads the tables: the scope's search
/// state is not loaded for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_does_not_load_the_scope() {
    let dir = tempfile::tempdir().unwrap();
    let scope = MemoryScope::parse("app", "exported").unwrap();
    {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        for i in 0..3 {
            store
                .add_entry(
                    &scope,
                    NewEntry::new(format!("fact {i}")),
                    &WriteOptions::default(),
                )
                .await
                .unwrap();
        }
    }
    let inner = Arc::new(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    let routed =
        hippocamp_routed::RoutedMemory::new(inner.clone(), RouterConfig::default()).unwrap();
    let page = routed
        .export_entries(
            &scope,
            &hippocamp_memory::ExportRequest::default(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(page.entries.len(), 3);
    assert!(!inner.is_cached(&scope), "the export loaded the scope");
    routed
        .search(&scope, &SearchRequest::new("fact"), &CallOptions::default())
        .await
        .unwrap();
    assert!(inner.is_cached(&scope), "a search does");
}
