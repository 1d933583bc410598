//! Vectors in pgvector: a scope of at most `exact_vectors_up_to` entries is
//! searched exactly in the server's copy; a larger one through the HNSW
//! index (the vector and hybrid scenarios pass with every scope ranked in
//! PostgreSQL); its hits agree with the exact ones; a selective filter
//! still gets its hits; a copy stops holding vectors when its scope grows
//! past the bound.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_embed::hash::HashEmbedder;
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::{
    MemoryConfig, MemoryStore, NewEntry, SearchMode, SearchRequest, WriteOptions,
};
use hippocamp_postgres::PgMemoryStore;
use rand::{Rng, SeedableRng};

const DIMENSION: usize = 64;

async fn store(exact_up_to: u64) -> PgMemoryStore {
    PgMemoryStore::open(support::database().await, MemoryConfig::default())
        .unwrap()
        .exact_vectors_up_to(exact_up_to)
        .unwrap()
        .with_embedder(Arc::new(HashEmbedder::new(DIMENSION)))
        .await
        .unwrap()
}

/// Every scope above the bound (0): each vector search is ranked in
/// PostgreSQL.
struct ThroughTheIndex;

#[async_trait]
impl StoreFactory for ThroughTheIndex {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let store = PgMemoryStore::open(support::database().await, config)
            .unwrap()
            .exact_vectors_up_to(0)
            .unwrap()
            .with_embedder(Arc::new(HashEmbedder::new(DIMENSION)))
            .await
            .unwrap();
        Arc::new(store)
    }
}

hippocamp_memory::vector_conformance_tests!(guard = support::have_postgres, ThroughTheIndex);

const WORDS: &[&str] = &[
    "garden", "bees", "honey", "river", "boat", "piano", "jazz", "coffee", "tea", "mountain",
    "snow", "ski", "novel", "poetry", "chess", "python", "rust", "database", "index", "vector",
    "travel", "paris", "tokyo", "kitchen", "bread", "cheese", "wine", "bicycle", "marathon",
    "yoga", "painting", "museum", "violin", "guitar", "forest", "camping", "ocean", "surf",
];

/// `n` distinct texts of a few random words each; every `tag_every`th
/// tagged.
fn texts(n: usize, seed: u64) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..6)
                .map(|_| WORDS[rng.random_range(0..WORDS.len())])
                .collect();
            format!("{} (note {i})", words.join(" "))
        })
        .collect()
}

async fn fill(store: &PgMemoryStore, scope: &MemoryScope, texts: &[String], tag_every: usize) {
    for (i, t) in texts.iter().enumerate() {
        let meta = serde_json::json!({"tagged": i % tag_every == 0})
            .as_object()
            .unwrap()
            .clone();
        store
            .add_entry(
                scope,
                NewEntry::new(t.clone()).metadata(meta),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
}

async fn contents(
    store: &PgMemoryStore,
    scope: &MemoryScope,
    request: &SearchRequest,
) -> Vec<String> {
    store
        .search(scope, request, &CallOptions::default())
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.content.clone())
        .collect()
}

/// A scope past the bound is ranked through the HNSW index (the query's
/// plan uses it), and its top ten agree with the exact search of the same
/// entries (recall, not bit-equality: the index is approximate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_scope_is_ranked_through_the_index_and_agrees_with_the_exact_search() {
    if !support::have_postgres() {
        return;
    }
    let (indexed, exact) = (store(100).await, store(10_000).await);
    let scope = MemoryScope::parse("app", "u").unwrap();
    let corpus = texts(400, 7);
    fill(&indexed, &scope, &corpus, 1).await;
    fill(&exact, &scope, &corpus, 1).await;

    let caps = indexed.capabilities();
    assert_eq!(caps.limit("exact_vectors_up_to"), Some(100));

    let queries = texts(40, 99);
    let (mut found, mut wanted) = (0usize, 0usize);
    for q in &queries {
        let r = SearchRequest::new(q.clone())
            .mode(SearchMode::Vector)
            .limit(10);
        let a: HashSet<String> = contents(&indexed, &scope, &r).await.into_iter().collect();
        let b: HashSet<String> = contents(&exact, &scope, &r).await.into_iter().collect();
        assert_eq!(a.len(), 10);
        found += a.intersection(&b).count();
        wanted += b.len();
        // Hybrid fuses the index's candidates with BM25.
        let h = SearchRequest::new(q.clone())
            .mode(SearchMode::Hybrid)
            .limit(10);
        assert_eq!(contents(&indexed, &scope, &h).await.len(), 10);
    }
    let (through_index, _) = indexed.rankings_in_database();
    assert!(
        through_index >= 80,
        "{through_index} rankings through the index"
    );
    assert_eq!(
        exact.rankings_in_database(),
        (0, 0),
        "small scopes rank in the copy"
    );
    let recall = found as f64 / wanted as f64;
    assert!(
        recall >= 0.9,
        "recall@10 of the index against exact: {recall}"
    );

    // The query the store sends can be served by the index.
    let db = indexed.database();
    let client = db
        .client(hippocamp_core::Deadline::after(
            std::time::Duration::from_secs(10),
        ))
        .await
        .unwrap();
    let plan: Vec<String> = client
        .simple_query(&format!(
            "BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; \
             EXPLAIN SELECT id FROM memory_entries WHERE scope_id = 1 \
             ORDER BY embedding::vector({DIMENSION}) <#> (SELECT embedding FROM memory_entries LIMIT 1) LIMIT 10; \
             COMMIT"
        ))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .collect();
    assert!(
        plan.iter()
            .any(|l| l.contains(&format!("memory_entries_hnsw_{DIMENSION}"))),
        "{plan:#?}"
    );
}

/// A filter that passes over most of the index's candidates still gets
/// its hits (the search asks again, then ranks exactly), every one
/// passing the filter, the same as the exact search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_still_gets_its_hits() {
    if !support::have_postgres() {
        return;
    }
    let (indexed, exact) = (store(50).await, store(10_000).await);
    let scope = MemoryScope::parse("app", "u").unwrap();
    let corpus = texts(300, 3);
    fill(&indexed, &scope, &corpus, 25).await;
    fill(&exact, &scope, &corpus, 25).await;
    for q in texts(10, 5) {
        for mode in [SearchMode::Vector, SearchMode::Hybrid] {
            let r = SearchRequest::new(q.clone())
                .mode(mode)
                .limit(10)
                .filter(serde_json::json!({"tagged": true}));
            let hits = indexed
                .search(&scope, &r, &CallOptions::default())
                .await
                .unwrap()
                .hits;
            assert_eq!(hits.len(), 10, "{mode:?}: 12 entries are tagged");
            assert!(hits.iter().all(|h| h.entry.metadata["tagged"] == true));
            if mode == SearchMode::Vector {
                let a: HashSet<String> = hits.iter().map(|h| h.entry.content.clone()).collect();
                let b: HashSet<String> = contents(&exact, &scope, &r).await.into_iter().collect();
                assert_eq!(a, b, "ranked exactly once the index's candidates ran short");
            }
        }
    }
    let (_, exactly) = indexed.rankings_in_database();
    assert!(exactly > 0, "the exact ranking answered");
}

/// A scope searched in its copy until a write takes it past the bound;
/// then ranked in PostgreSQL, with the same hits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_growing_past_the_bound_moves_its_vectors_to_the_index() {
    if !support::have_postgres() {
        return;
    }
    let s = store(30).await;
    let scope = MemoryScope::parse("app", "u").unwrap();
    let corpus = texts(40, 11);
    fill(&s, &scope, &corpus[..30], 1).await;
    let r = SearchRequest::new(corpus[3].clone())
        .mode(SearchMode::Vector)
        .limit(5);
    let before = contents(&s, &scope, &r).await;
    assert_eq!(before[0], corpus[3]);
    assert_eq!(s.rankings_in_database(), (0, 0), "30 entries: in the copy");
    fill(&s, &scope, &corpus[30..], 1).await;
    let after = contents(&s, &scope, &r).await;
    assert_eq!(after[0], corpus[3]);
    assert_eq!(
        s.rankings_in_database().0,
        1,
        "40 entries: through the index"
    );
}
