//! The per-scope search state in memory is bounded by
//! `scope_cache_bytes`: loading scopes beyond it releases the least
//! recently used ones, and a released scope searches the same when it is
//! loaded again.

#![allow(clippy::unwrap_used)]

use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_memory::{MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_memory_redb::{DurableOptions, RedbMemoryStore};

fn ids(r: &hippocamp_memory::SearchResults) -> Vec<String> {
    r.hits.iter().map(|h| h.entry.id.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_beyond_the_bound_releases_the_least_recently_used_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let bound = 2 << 20;
    let options = DurableOptions {
        scope_cache_bytes: bound,
        ..DurableOptions::default()
    };
    let store =
        RedbMemoryStore::open_with_options(dir.path(), MemoryConfig::default(), options).unwrap();
    let limit = store
        .capabilities()
        .limit("scope_cache_bytes")
        .expect("reported");
    assert_eq!(limit, bound);
    // Six scopes of ~0.9 MiB each (charged ~1,800 bytes an entry).
    let scopes: Vec<MemoryScope> = (0..6)
        .map(|i| MemoryScope::parse("app", &format!("u{i}")).unwrap())
        .collect();
    for (i, s) in scopes.iter().enumerate() {
        for j in 0..500 {
            let text = format!(
                "scope {i} entry {j} about gardens and tomatoes number {j} {}",
                "and a longer passage of words ".repeat(16)
            );
            store
                .add_entry(s, NewEntry::new(text), &WriteOptions::default())
                .await
                .unwrap();
        }
    }
    let q = SearchRequest::new("tomatoes entry 7").limit(5);
    let first = store
        .search(&scopes[0], &q, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(first.hits.len(), 5);
    let mut peak = 0;
    for s in &scopes {
        store.search(s, &q, &CallOptions::default()).await.unwrap();
        peak = peak.max(store.cached_bytes());
        // Within the bound, except for the one scope just loaded.
        assert!(
            store.cached_bytes() <= bound + 1_000_000,
            "{}",
            store.cached_bytes()
        );
    }
    assert!(peak > 0);
    assert!(store.cached_scopes() < scopes.len(), "nothing was released");
    assert!(!store.is_cached(&scopes[0]), "the oldest scope stays");
    assert!(store.is_cached(&scopes[5]), "the newest scope went");
    // Reloaded from disk, the released scope searches the same.
    let again = store
        .search(&scopes[0], &q, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&again), ids(&first));
}

#[test]
fn the_bound_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let options = DurableOptions {
        scope_cache_bytes: 1_000,
        ..DurableOptions::default()
    };
    let e = RedbMemoryStore::open_with_options(dir.path(), MemoryConfig::default(), options)
        .unwrap_err();
    assert!(e.to_string().contains("scope_cache_bytes"), "{e}");
}

#[test]
fn the_database_cache_is_bounded_checked_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    assert_eq!(
        store.capabilities().limit("db_cache_bytes").unwrap(),
        hippocamp_memory_redb::DB_CACHE_BYTES.0
    );
    drop(store);
    let options = DurableOptions {
        cache_bytes: 4 << 20,
        ..DurableOptions::default()
    };
    let store =
        RedbMemoryStore::open_with_options(dir.path(), MemoryConfig::default(), options).unwrap();
    assert_eq!(
        store.capabilities().limit("db_cache_bytes").unwrap(),
        4 << 20
    );
    drop(store);
    let options = DurableOptions {
        cache_bytes: 1_000,
        ..DurableOptions::default()
    };
    let e = RedbMemoryStore::open_with_options(dir.path(), MemoryConfig::default(), options)
        .unwrap_err();
    assert!(e.to_string().contains("db_cache_bytes"), "{e}");
}
