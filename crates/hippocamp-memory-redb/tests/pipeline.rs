//! Adds are acknowledged once logged and applied to the database behind
//! the writer (`hippocamp_memory_redb::pipeline`). With the applier held,
//! so the database lags the log, every guarantee still holds: later
//! writes decide against what was acknowledged, reads of the database
//! wait for it, and operations that need the database itself wait for the
//! applier.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use hippocamp_core::{CallOptions, Error, IdempotencyKey, MemoryScope, SessionId};
use hippocamp_memory::{
    Event, ExportRequest, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions,
};
use hippocamp_memory_redb::RedbMemoryStore;

fn keyed(content: &str, key: &str) -> NewEntry {
    NewEntry::new(content).idempotency_key(IdempotencyKey::new(key).unwrap())
}

/// Adds `n` entries, one write (one group) each.
async fn add_facts(store: &RedbMemoryStore, scope: &MemoryScope, n: usize) {
    for i in 0..n {
        store
            .add_entry(
                scope,
                NewEntry::new(format!("fact {i}")),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
}

/// Whether `f` is still waiting after a while.
async fn still_waiting<T>(f: &mut (impl Future<Output = T> + Unpin)) -> bool {
    tokio::time::timeout(Duration::from_millis(300), f)
        .await
        .is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_adds_hold_for_every_later_write_and_read_while_the_database_lags() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        std::sync::Arc::new(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    let scope = MemoryScope::parse("app", "u").unwrap();
    let w = WriteOptions::default();
    let call = CallOptions::default();
    let held = store.pause_applier();

    // Acknowledged without the database.
    let first = store
        .add_entry(&scope, keyed("Caroline adopted a dog named Rex", "k1"), &w)
        .await
        .unwrap();
    assert!(!first.duplicate);
    // Later writes decide against it: a duplicate, a conflict.
    let again = store
        .add_entry(&scope, keyed("Caroline adopted a dog named Rex", "k1"), &w)
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.entry, first.entry);
    let conflict = store
        .add_entry(&scope, keyed("something else", "k1"), &w)
        .await
        .unwrap_err();
    assert!(
        matches!(conflict, Error::IdempotencyConflict(_)),
        "{conflict}"
    );
    let session = SessionId::new("s").unwrap();
    let events: Vec<Event> = (0..300)
        .map(|i| {
            Event::text(
                format!("e{i}"),
                "user",
                i,
                format!("turn {i} about gardens"),
            )
        })
        .collect();
    let report = store
        .add_events(&scope, &session, &events, &w)
        .await
        .unwrap();
    assert_eq!(report.added.len(), 300);
    let report = store
        .add_events(&scope, &session, &events, &w)
        .await
        .unwrap();
    assert_eq!((report.added.len(), report.duplicates.len()), (0, 300));
    assert_eq!(store.status().await.unwrap().entries, 301);

    // Reads of the database wait for the applier, then see everything.
    let mut get = Box::pin(store.get_entry(&scope, &first.entry.id, &call));
    assert!(still_waiting(&mut get).await, "a read did not wait");
    let query = SearchRequest::new("gardens");
    let mut search = Box::pin(store.search(&scope, &query, &call));
    assert!(
        still_waiting(&mut search).await,
        "a scope load did not wait"
    );
    drop(held);
    assert_eq!(get.await.unwrap(), first.entry);
    assert!(!search.await.unwrap().hits.is_empty());
    let page = store
        .export_entries(&scope, &ExportRequest::default(), &call)
        .await
        .unwrap();
    assert!(!page.entries.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_waits_for_the_applier_and_takes_every_acknowledged_add() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        std::sync::Arc::new(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    let scope = MemoryScope::parse("app", "u").unwrap();
    let held = store.pause_applier();
    // Fewer groups than may wait for the applier (each write below is one).
    add_facts(&store, &scope, 4).await;
    let events: Vec<Event> = (0..16)
        .map(|i| Event::text(format!("e{i}"), "user", i, format!("turn {i}")))
        .collect();
    store
        .add_events(
            &scope,
            &SessionId::new("s").unwrap(),
            &events,
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let erase = {
        let (store, scope) = (std::sync::Arc::clone(&store), scope.clone());
        tokio::spawn(async move { store.delete_user(&scope, &CallOptions::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !erase.is_finished(),
        "the erasure did not wait for the applier"
    );
    drop(held);
    let erased = erase.await.unwrap().unwrap();
    assert_eq!((erased.deleted, erased.epoch), (20, 1));
    assert_eq!(store.status().await.unwrap().entries, 0);
    // A write admitted under the old epoch cannot come back.
    let stale = store
        .add_entry(
            &scope,
            NewEntry::new("late"),
            &WriteOptions {
                epoch: Some(0),
                ..WriteOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleEpoch { .. }), "{stale}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_acknowledged_survives_a_reopen_whatever_the_applier_did() {
    let dir = tempfile::tempdir().unwrap();
    let scope = MemoryScope::parse("app", "u").unwrap();
    let id = {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let held = store.pause_applier();
        let added = store
            .add_entry(
                &scope,
                keyed("kept across a reopen", "k"),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        drop(held);
        added.entry.id
    };
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    let got = store
        .get_entry(&scope, &id, &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(got.content, "kept across a reopen");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgements_wait_when_the_applier_falls_too_far_behind() {
    use hippocamp_memory_redb::pipeline::MAX_PENDING_GROUPS;
    let dir = tempfile::tempdir().unwrap();
    let store =
        std::sync::Arc::new(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    let scope = MemoryScope::parse("app", "u").unwrap();
    let held = store.pause_applier();
    add_facts(&store, &scope, MAX_PENDING_GROUPS).await;
    let next = {
        let (store, scope) = (std::sync::Arc::clone(&store), scope.clone());
        tokio::spawn(async move {
            store
                .add_entry(
                    &scope,
                    NewEntry::new("one too many"),
                    &WriteOptions::default(),
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!next.is_finished(), "a write ran past the bound");
    drop(held);
    next.await.unwrap().unwrap();
    assert_eq!(
        store.status().await.unwrap().entries,
        MAX_PENDING_GROUPS as u64 + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_after_a_delete_or_an_erasure_count_from_what_it_left() {
    // The writer keeps the scope rows of applied adds in memory
    // (`pipeline::Overlay`); deletes and erasures rewrite those rows on a
    // write transaction, and the adds after them must see what they wrote.
    let dir = tempfile::tempdir().unwrap();
    let mut config = MemoryConfig::default();
    config.limits.max_entries_per_scope = 2;
    let scope = MemoryScope::parse("app", "u").unwrap();
    let (w, call) = (WriteOptions::default(), CallOptions::default());
    {
        let store = RedbMemoryStore::open(dir.path(), config.clone()).unwrap();
        let one = store
            .add_entry(&scope, NewEntry::new("one"), &w)
            .await
            .unwrap();
        store
            .add_entry(&scope, NewEntry::new("two"), &w)
            .await
            .unwrap();
        // A read of the database waits until the applier holds both.
        store.get_entry(&scope, &one.entry.id, &call).await.unwrap();
        let full = store
            .add_entry(&scope, NewEntry::new("three"), &w)
            .await
            .unwrap_err();
        assert!(matches!(full, Error::QuotaExceeded { .. }), "{full}");
        assert_eq!(
            store
                .delete_entry(&scope, &one.entry.id, &call)
                .await
                .unwrap(),
            1
        );
        let three = store
            .add_entry(&scope, NewEntry::new("three"), &w)
            .await
            .unwrap();
        assert_eq!(three.entry.epoch, 0);
        store
            .get_entry(&scope, &three.entry.id, &call)
            .await
            .unwrap();
        let erased = store.delete_user(&scope, &call).await.unwrap();
        assert_eq!((erased.deleted, erased.epoch), (2, 1));
        for text in ["after", "after again"] {
            let added = store
                .add_entry(&scope, NewEntry::new(text), &w)
                .await
                .unwrap();
            assert_eq!(
                added.entry.epoch, 1,
                "an add after the erasure kept epoch 0"
            );
        }
        let full = store
            .add_entry(&scope, NewEntry::new("one too many"), &w)
            .await
            .unwrap_err();
        assert!(matches!(full, Error::QuotaExceeded { .. }), "{full}");
        assert_eq!(store.status().await.unwrap().entries, 2);
    }
    // The database's rows say the same.
    let store = RedbMemoryStore::open(dir.path(), config).unwrap();
    assert_eq!(store.status().await.unwrap().entries, 2);
    assert_eq!(store.erasure_epoch(&scope, &call).await.unwrap(), 1);
    let full = store
        .add_entry(&scope, NewEntry::new("one too many"), &w)
        .await
        .unwrap_err();
    assert!(matches!(full, Error::QuotaExceeded { .. }), "{full}");
}
