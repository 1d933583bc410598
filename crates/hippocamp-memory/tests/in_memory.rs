//! The in-memory store runs the whole conformance suite, plus the checks
//! that need its internals.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{CallOptions, Error, MemoryScope};
use hippocamp_memory::conformance::InMemoryFactory;
use hippocamp_memory::{
    InMemoryStore, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions,
};

hippocamp_memory::memory_conformance_tests!(InMemoryFactory);

/// A write queued behind a busy scope times out and never appears later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_write_that_times_out_never_appears() {
    let store = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let scope = MemoryScope::parse("app", "u").unwrap();
    let held = store.hold_scope_for_test(&scope).await;
    let opts = WriteOptions::new(CallOptions::timeout(Duration::from_millis(20)).unwrap());
    let err = store
        .add_entry(&scope, NewEntry::new("suspended write"), &opts)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)));
    drop(held);
    let hits = store
        .search(
            &scope,
            &SearchRequest::new("suspended"),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert!(hits.hits.is_empty());
    assert!(
        store
            .add_entry(
                &scope,
                NewEntry::new("later write"),
                &WriteOptions::default()
            )
            .await
            .is_ok()
    );
}

/// Different scopes do not wait for each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_scopes_proceed_while_one_is_busy() {
    let store = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let busy = MemoryScope::parse("app", "busy").unwrap();
    let free = MemoryScope::parse("app", "free").unwrap();
    let _held = store.hold_scope_for_test(&busy).await;
    let opts = WriteOptions::new(CallOptions::timeout(Duration::from_millis(500)).unwrap());
    assert!(
        store
            .add_entry(&free, NewEntry::new("not blocked"), &opts)
            .await
            .is_ok()
    );
}

#[test]
fn invalid_config_is_refused() {
    let mut config = MemoryConfig::default();
    config.limits.max_results = 0;
    assert!(matches!(
        InMemoryStore::new(config),
        Err(Error::InvalidConfig { ref key, .. }) if key == "max_results"
    ));
}
