//! Consolidation run records on PostgreSQL (`PgRuns`): newest key first,
//! a record replaced in place, the oldest beyond `keep` dropped in the
//! same transaction, scopes apart, and forgotten with their user.

#![allow(clippy::unwrap_used)]

mod support;

use hippocamp_core::MemoryScope;
use hippocamp_postgres::PgRuns;

#[tokio::test]
async fn run_records_are_kept_newest_first_per_scope() {
    if !support::have_postgres() {
        return;
    }
    let runs = PgRuns::new(support::database().await);
    let a = MemoryScope::parse("app", "a").unwrap();
    let b = MemoryScope::parse("app", "b").unwrap();
    for (key, record) in [("001-r1", "one"), ("002-r2", "two"), ("003-r3", "three")] {
        runs.put(&a, key, record, 2).await.unwrap();
    }
    runs.put(&b, "009-r9", "nine", 2).await.unwrap();
    assert_eq!(runs.list(&a).await.unwrap(), ["three", "two"]);
    runs.put(&a, "002-r2", "two, applied", 2).await.unwrap();
    assert_eq!(runs.list(&a).await.unwrap(), ["three", "two, applied"]);
    runs.forget(&a).await.unwrap();
    assert!(runs.list(&a).await.unwrap().is_empty());
    assert_eq!(runs.list(&b).await.unwrap(), ["nine"]);
}
