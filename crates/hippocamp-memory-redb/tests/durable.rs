//! What only a durable store has: data and epochs survive a reopen, one
//! process per directory, a versioned format, releasable search state.

#![allow(clippy::unwrap_used)]

use hippocamp_core::{CallOptions, Error, MemoryScope, SessionId};
use hippocamp_memory::{
    Event, MemoryConfig, MemoryStore, NewEntry, SearchRequest, SearchResults, WriteOptions,
};
use hippocamp_memory_redb::RedbMemoryStore;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

fn scope(u: &str) -> MemoryScope {
    MemoryScope::parse("app", u).unwrap()
}

fn c() -> CallOptions {
    CallOptions::default()
}

async fn search(store: &RedbMemoryStore, s: &MemoryScope, q: &str) -> SearchResults {
    store.search(s, &SearchRequest::new(q), &c()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_epochs_and_counters_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (scope("alice"), scope("bob"));
    let (kept, before) = {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let kept = store
            .add_entry(
                &a,
                NewEntry::new("alice sails every summer"),
                &WriteOptions::default(),
            )
            .await
            .unwrap()
            .entry;
        store
            .add_events(
                &a,
                &SessionId::new("s1").unwrap(),
                &[Event::text("e1", "user", 5, "alice sails a blue boat")],
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        store
            .add_entry(&b, NewEntry::new("bob sails too"), &WriteOptions::default())
            .await
            .unwrap();
        store.delete_user(&b, &c()).await.unwrap();
        let before = search(&store, &a, "sails boat").await;
        (kept, before)
    };
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    assert_eq!(store.get_entry(&a, &kept.id, &c()).await.unwrap(), kept);
    assert_eq!(search(&store, &a, "sails boat").await, before);
    assert!(search(&store, &b, "sails").await.hits.is_empty());
    assert_eq!(store.erasure_epoch(&b, &c()).await.unwrap(), 1);
    let stale = store
        .add_entry(
            &b,
            NewEntry::new("queued before erasure"),
            &WriteOptions::default().epoch(0),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        stale,
        Error::StaleEpoch {
            admitted: 0,
            current: 1
        }
    ));
    let status = store.status().await.unwrap();
    assert_eq!((status.scopes, status.entries), (1, 2));
    assert!(status.durable);
}

#[test]
fn a_second_process_gets_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let _first = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    let err = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap_err();
    match err {
        Error::Unavailable(msg) => assert!(msg.contains("in use by another process"), "{msg}"),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn an_unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap());
    {
        let db = redb::Database::open(dir.path().join(hippocamp_memory_redb::DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn
                .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
                .unwrap();
            meta.insert("format", 99u32.to_le_bytes().as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let err = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap_err();
    match err {
        Error::Unavailable(msg) => {
            assert!(msg.contains("format version 99"), "{msg}");
            assert!(msg.contains("reads version 1"), "{msg}");
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_search_state_reloads_with_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    let s = scope("alice");
    for i in 0..20 {
        store
            .add_entry(
                &s,
                NewEntry::new(format!("note {i} about gardening tomatoes")),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let first = search(&store, &s, "gardening tomatoes").await;
    assert!(store.is_cached(&s));
    assert!(store.release_scope(&s));
    assert!(!store.is_cached(&s));
    // Writes while released are seen after the reload.
    let late = store
        .add_entry(&s, NewEntry::new("late tomatoes"), &WriteOptions::default())
        .await
        .unwrap()
        .entry;
    let again = search(&store, &s, "gardening tomatoes").await;
    assert_eq!(first.hits.len(), 20);
    assert_eq!(again.hits.len(), 21);
    assert!(again.hits.iter().any(|h| h.entry.id == late.id));
    for h in &first.hits {
        assert!(again.hits.iter().any(|g| g.entry == h.entry));
    }
    store.preload(&scope("bob")).await.unwrap();
    assert_eq!(store.cached_scopes(), 2);
}

/// Close and reopen: identical search results on the LoCoMo development
/// half.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locomo_results_are_identical_after_reopen() {
    let Some(data) = hippocamp_testkit::shared_data() else {
        return;
    };
    let samples = hippocamp_datasets::locomo::load(&data.join("locomo/locomo-dev.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        hippocamp_eval::locomo::ingest(&store, &samples, None)
            .await
            .unwrap();
        run_questions(&store, &samples).await
    };
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    let after = run_questions(&store, &samples).await;
    assert_eq!(before.len(), after.len());
    assert!(before.iter().any(|r| !r.hits.is_empty()));
    assert!(before == after, "search results changed across a reopen");
}

async fn run_questions(
    store: &RedbMemoryStore,
    samples: &[hippocamp_datasets::locomo::Sample],
) -> Vec<SearchResults> {
    let mut out = Vec::new();
    for s in samples {
        let scope = MemoryScope::parse("locomo", &s.sample_id).unwrap();
        for q in &s.questions {
            let r = store
                .search(&scope, &SearchRequest::new(q.text.clone()).limit(50), &c())
                .await
                .unwrap();
            out.push(r);
        }
    }
    out
}

#[test]
fn an_interrupted_creation_leaves_no_half_written_database() {
    let dir = tempfile::tempdir().unwrap();
    // What a crash during creation leaves: only the temporary file.
    std::fs::write(dir.path().join("memory.redb.creating"), b"partial").unwrap();
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    drop(store);
    assert!(!dir.path().join("memory.redb.creating").exists());
    assert!(dir.path().join(hippocamp_memory_redb::DB_FILE).exists());
    RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
}

fn hash_embedder(dim: usize) -> std::sync::Arc<dyn hippocamp_embed::Embedder> {
    Arc::new(hippocamp_embed::hash::HashEmbedder::new(dim))
}

/// Vectors are written in the entry's transaction and logged with it: after
/// a power cut (nothing checkpointed, only the synced log survives) the
/// replay restores them, and an erasure removes them for good. A store
/// made with one embedder refuses another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_are_logged_with_their_entries_and_erased_with_them() {
    use hippocamp_durable::sim::PowerLoss;
    use hippocamp_memory::{NewEntry, SearchMode, SearchRequest, WriteOptions};
    let options = hippocamp_memory_redb::DurableOptions {
        checkpoint_groups: 1_000_000,
        ..hippocamp_memory_redb::DurableOptions::default()
    };
    let open = |d: &PowerLoss, dim: usize| {
        RedbMemoryStore::open_with_backend(d.backend(), d.wal(), MemoryConfig::default(), options)
            .unwrap()
            .with_embedder(hash_embedder(dim))
    };
    let disk = PowerLoss::new();
    drop(open(&disk, 64).unwrap());
    let disk = PowerLoss::with_image(disk.surviving());
    let s = scope("vectors");
    let vector = |q: &str| SearchRequest::new(q).mode(SearchMode::Vector);
    let before = {
        let store = open(&disk, 64).unwrap();
        for t in ["bees make honey", "rust never sleeps", "honey bees dance"] {
            store
                .add_entry(&s, NewEntry::new(t), &WriteOptions::default())
                .await
                .unwrap();
        }
        let r = store.search(&s, &vector("honey bees"), &c()).await.unwrap();
        assert_eq!(r.hits.len(), 3);
        // The power goes: the store is never closed.
        std::mem::forget(store);
        r
    };
    let disk = PowerLoss::with_image(disk.surviving());
    {
        let store = open(&disk, 64).unwrap();
        let after = store.search(&s, &vector("honey bees"), &c()).await.unwrap();
        let ids = |r: &SearchResults| {
            r.hits
                .iter()
                .map(|h| (h.entry.id, h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&after), ids(&before), "replayed vectors rank as before");
        assert_eq!(store.delete_user(&s, &c()).await.unwrap().deleted, 3);
        std::mem::forget(store);
    }
    let disk = PowerLoss::with_image(disk.surviving());
    let store = open(&disk, 64).unwrap();
    assert!(
        store
            .search(&s, &vector("honey bees"), &c())
            .await
            .unwrap()
            .hits
            .is_empty()
    );
    drop(store);
    let err = open(&disk, 32).unwrap_err();
    assert_eq!(err.code(), "invalid_config", "{err}");
}

/// Entries stored before the store had an embedder have no vector; vector
/// and hybrid searches say how many they could not consider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_say_how_many_entries_lack_a_vector() {
    use hippocamp_memory::SearchMode;
    let dir = tempfile::tempdir().unwrap();
    let s = scope("late");
    {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        store
            .add_entry(
                &s,
                NewEntry::new("written before embedding"),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(hash_embedder(64))
        .unwrap();
    store
        .add_entry(
            &s,
            NewEntry::new("written with embedding"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let r = store
        .search(
            &s,
            &SearchRequest::new("written").mode(SearchMode::Vector),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!((r.hits.len(), r.entries_without_vectors), (1, 1));
    let r = store
        .search(
            &s,
            &SearchRequest::new("written").mode(SearchMode::Hybrid),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!((r.hits.len(), r.entries_without_vectors), (2, 1));
    let r = store
        .search(
            &s,
            &SearchRequest::new("written").mode(SearchMode::Lexical),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(r.entries_without_vectors, 0);
}

/// With a slow provider: an entry erased while a batch is embedded is
/// embedded before the commit (the writer refuses to commit it without
/// its vector), and a deadline that runs out during embedding writes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provider_meets_races_and_deadlines() {
    let dir = tempfile::tempdir().unwrap();
    let slow = hippocamp_embed::hash::HashEmbedder::new(64)
        .with_delay(std::time::Duration::from_millis(400));
    let store = RedbMemoryStore::open(dir.path(), hippocamp_memory::MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(slow))
        .unwrap();
    hippocamp_memory::conformance::slow_embedder_races(Arc::new(store)).await;
}

/// How the test log misbehaves, switched while a store runs on it: every
/// sync takes `sync_delay_ms` (a slow disk), and `sync` fails on demand (a
/// device that refuses).
#[derive(Debug, Default)]
struct LogFaults {
    sync_delay_ms: AtomicU64,
    fail_sync: AtomicBool,
}

/// An in-memory log driven by shared [`LogFaults`].
#[derive(Debug)]
struct TestLog {
    data: Vec<u8>,
    faults: Arc<LogFaults>,
}

impl hippocamp_durable::WalStorage for TestLog {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        Ok(self.data.clone())
    }
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.data.extend_from_slice(data);
        Ok(())
    }
    fn sync(&mut self) -> std::io::Result<()> {
        let ms = self.faults.sync_delay_ms.load(Relaxed);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        if self.faults.fail_sync.load(Relaxed) {
            return Err(std::io::Error::other("the device refused the flush"));
        }
        Ok(())
    }
    fn truncate(&mut self) -> std::io::Result<()> {
        self.data.clear();
        Ok(())
    }
}

/// A store on an in-memory database and a [`TestLog`], with the log's
/// fault switches.
fn store_on_test_log() -> (Arc<RedbMemoryStore>, Arc<LogFaults>) {
    let faults = Arc::new(LogFaults::default());
    let log = TestLog {
        data: Vec::new(),
        faults: Arc::clone(&faults),
    };
    let store = RedbMemoryStore::open_with_backend(
        redb::backends::InMemoryBackend::new(),
        log,
        MemoryConfig::default(),
        hippocamp_memory_redb::DurableOptions::default(),
    )
    .unwrap();
    (Arc::new(store), faults)
}

/// A write whose deadline passes while it waits in the group-commit queue
/// behind a slow commit is refused at its commit point and never visible;
/// the write it waited for commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_that_expires_in_the_commit_queue_writes_nothing() {
    let (store, faults) = store_on_test_log();
    faults.sync_delay_ms.store(400, Relaxed);
    let s = scope("queue");
    let first = {
        let (store, s) = (Arc::clone(&store), s.clone());
        tokio::spawn(async move {
            store
                .add_entry(
                    &s,
                    NewEntry::new("the slow first write"),
                    &WriteOptions::default(),
                )
                .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let late = WriteOptions::new(CallOptions::timeout_ms(150).unwrap());
    let e = store
        .add_entry(&s, NewEntry::new("the queued second write"), &late)
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Timeout(hippocamp_core::Stage::Commit)),
        "{e}"
    );
    first.await.unwrap().unwrap();
    faults.sync_delay_ms.store(0, Relaxed);
    let found: Vec<String> = store
        .search(&s, &SearchRequest::new("write"), &c())
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.content.clone())
        .collect();
    assert_eq!(found, vec!["the slow first write".to_owned()]);
}

/// What the deadline guarantees at the commit point: it is checked before
/// the group's log write; once that write has begun, the write commits and
/// is acknowledged as committed (the truth), even when the acknowledgement
/// comes after the deadline, by at most the log write's duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_log_write_began_commits_and_says_so() {
    let (store, faults) = store_on_test_log();
    faults.sync_delay_ms.store(300, Relaxed);
    let s = scope("truth");
    let started = std::time::Instant::now();
    let opts = WriteOptions::new(CallOptions::timeout_ms(100).unwrap());
    let out = store
        .add_entry(&s, NewEntry::new("logged before the deadline"), &opts)
        .await
        .unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    faults.sync_delay_ms.store(0, Relaxed);
    assert_eq!(
        store
            .get_entry(&s, &out.entry.id, &c())
            .await
            .unwrap()
            .content,
        "logged before the deadline"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erased_events_stay_erased_after_a_reopen_and_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let s = scope("sticky");
    let session = SessionId::new("s1").unwrap();
    let events: Vec<Event> = (0..3)
        .map(|i| Event::text(format!("e{i}"), "user", i, format!("remembered fact {i}")))
        .collect();
    {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let w = WriteOptions::default();
        store.add_events(&s, &session, &events, &w).await.unwrap();
        assert_eq!(store.delete_session(&s, &session, &c()).await.unwrap(), 3);
        // Dropped without a checkpoint of the tombstones' log record
        // being needed: the log alone must bring them back.
        std::mem::forget(store);
    }
    // The forgotten store still holds the directory lock in this process;
    // the lock is a file lock of the process, so take a copy of the files.
    let copy = tempfile::tempdir().unwrap();
    for name in ["memory.redb", "memory.wal"] {
        std::fs::copy(dir.path().join(name), copy.path().join(name)).unwrap();
    }
    let store = RedbMemoryStore::open(copy.path(), MemoryConfig::default()).unwrap();
    let again = store
        .add_events(&s, &session, &events, &WriteOptions::default())
        .await
        .unwrap();
    assert!(again.added.is_empty(), "{again:?}");
    assert_eq!(again.skipped.len(), 3);
    assert!(
        again
            .skipped
            .iter()
            .all(|k| k.reason == hippocamp_memory::SkipReason::Erased)
    );
}

/// Obligations and the expiry index are logged with their entries: after a
/// reopen (which replays the log) a retained entry still refuses deletion,
/// an expired one is still hidden, and the sweeper still finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn obligations_survive_a_reopen() {
    use hippocamp_core::ManualClock;
    use hippocamp_memory::Obligations;
    use hippocamp_memory::config::StoreClock;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::at(1_000));
    let config = || MemoryConfig {
        clock: StoreClock(clock.clone()),
        ..MemoryConfig::default()
    };
    let s = scope("obliged");
    let (retained, expiring) = {
        let store = RedbMemoryStore::open(dir.path(), config()).unwrap();
        let write = |o: Obligations| WriteOptions::default().obligations(o);
        let retained = store
            .add_entry(
                &s,
                NewEntry::new("kept for audit"),
                &write(Obligations {
                    retain_until_ms: Some(5_000),
                    ..Obligations::default()
                }),
            )
            .await
            .unwrap()
            .entry;
        let expiring = store
            .add_entry(
                &s,
                NewEntry::new("short lived"),
                &write(Obligations {
                    expires_at_ms: Some(2_000),
                    ..Obligations::default()
                }),
            )
            .await
            .unwrap()
            .entry;
        (retained, expiring)
    };
    clock.set(2_000);
    let store = RedbMemoryStore::open(dir.path(), config()).unwrap();
    assert_eq!(
        store.get_entry(&s, &retained.id, &c()).await.unwrap(),
        retained
    );
    assert!(matches!(
        store.delete_entry(&s, &retained.id, &c()).await,
        Err(Error::Retention { until_ms: 5_000 })
    ));
    assert!(matches!(
        store.get_entry(&s, &expiring.id, &c()).await,
        Err(Error::NotFound(_))
    ));
    assert!(search(&store, &s, "short lived").await.hits.is_empty());
    assert_eq!(store.sweep_expired(10, &[], &c()).await.unwrap().deleted, 1);
    drop(store);
    let store = RedbMemoryStore::open(dir.path(), config()).unwrap();
    assert_eq!(store.status().await.unwrap().entries, 1);
    assert_eq!(store.sweep_expired(10, &[], &c()).await.unwrap().deleted, 0);
}

/// Revisions, histories and the app/user index are logged and replayed:
/// after a reopen (replaying the log) and after a checkpointed reopen the
/// corrected entry, its history, its search terms and the index read back.
#[tokio::test]
async fn revisions_and_the_user_index_survive_a_reopen() {
    use hippocamp_core::{AppName, IdempotencyKey};
    use hippocamp_memory::{EntryUpdate, NamesRequest};

    let dir = tempfile::tempdir().unwrap();
    let s = scope("revised");
    let id = {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let e = store
            .add_entry(
                &s,
                NewEntry::new("the heron eats frogs")
                    .idempotency_key(IdempotencyKey::new("heron").unwrap()),
                &WriteOptions::default(),
            )
            .await
            .unwrap()
            .entry;
        for text in ["the heron eats fish", "the heron eats eels"] {
            store
                .update_entry(
                    &s,
                    &e.id,
                    &EntryUpdate {
                        content: text.into(),
                        metadata: serde_json::Map::new(),
                    },
                    &WriteOptions::default(),
                )
                .await
                .unwrap();
        }
        store
            .add_entry(&scope("gone"), NewEntry::new("x"), &WriteOptions::default())
            .await
            .unwrap();
        store.delete_user(&scope("gone"), &c()).await.unwrap();
        e.id
    };
    for _ in 0..2 {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let e = store.get_entry(&s, &id, &c()).await.unwrap();
        assert_eq!((e.revision, e.content.as_str()), (3, "the heron eats eels"));
        let h = store.entry_history(&s, &id, &c()).await.unwrap();
        assert_eq!(
            h.iter().map(|r| r.revision).collect::<Vec<_>>(),
            vec![3, 2, 1]
        );
        assert_eq!(search(&store, &s, "eels").await.hits.len(), 1);
        assert!(search(&store, &s, "frogs").await.hits.is_empty());
        let users = store
            .list_users(
                &AppName::new("app").unwrap(),
                &NamesRequest::default(),
                &c(),
            )
            .await
            .unwrap();
        assert_eq!(users.names, ["revised"]);
    }
}

/// A lone add whose sync fails (its record is in the log, unsynced) fails,
/// stays invisible, and stops the store's writes, since a later sync could
/// make the record durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_failure_between_the_write_and_the_sync_fails_the_add_and_stops_writes() {
    let (store, faults) = store_on_test_log();
    let s = scope("failing");
    let w = WriteOptions::default();
    store
        .add_entry(&s, NewEntry::new("kept before the failure"), &w)
        .await
        .unwrap();
    faults.fail_sync.store(true, Relaxed);
    let e = store
        .add_entry(&s, NewEntry::new("lost with the device"), &w)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
    faults.fail_sync.store(false, Relaxed);
    let later = store
        .add_entry(&s, NewEntry::new("after the failure"), &w)
        .await
        .unwrap_err();
    assert!(later.to_string().contains("stopped writing"), "{later}");
    let found: Vec<String> = search(&store, &s, "kept lost device failure")
        .await
        .hits
        .into_iter()
        .map(|h| h.entry.content.clone())
        .collect();
    assert_eq!(found, vec!["kept before the failure".to_owned()]);
}

/// A lone add is acknowledged before its text is analysed: the cache's
/// change carries no terms and whoever applies it analyses it (a reader,
/// or the writer once 64 changes wait on a scope nobody reads), and the
/// applier analyses the logged record before the database holds it. Each
/// of the three is searched by a stem only an analysis yields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_adds_are_analysed_by_the_reader_the_writer_and_the_applier() {
    let dir = tempfile::tempdir().unwrap();
    let (read, unread) = (scope("read"), scope("unread"));
    let w = WriteOptions::default();
    {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        // Both scopes loaded (empty), so their changes are kept.
        assert!(search(&store, &read, "puppy").await.hits.is_empty());
        assert!(search(&store, &unread, "puppy").await.hits.is_empty());
        store
            .add_entry(&read, NewEntry::new("Caroline adopted two puppies"), &w)
            .await
            .unwrap();
        // Applied, and analysed, by this search.
        assert_eq!(search(&store, &read, "puppy").await.hits.len(), 1);
        store
            .add_entry(&unread, NewEntry::new("Melanie adopted two kittens"), &w)
            .await
            .unwrap();
        assert_eq!(store.pending_changes(&unread), Some(1));
        for i in 0..70 {
            store
                .add_entry(&unread, NewEntry::new(format!("filler note {i}")), &w)
                .await
                .unwrap();
        }
        // Nobody read the scope: 71 changes were committed, and the
        // writer's eager apply (at 64) took them before this search.
        let waiting = store.pending_changes(&unread).unwrap();
        assert!(waiting < 64, "{waiting} changes waited: no eager apply");
        let found = search(&store, &unread, "kitten").await;
        assert_eq!(found.hits.len(), 1, "{found:?}");
        assert_eq!(found.hits[0].entry.content, "Melanie adopted two kittens");
    }
    // Closed: checkpointed, the log emptied; the database's own records
    // are searched.
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    assert_eq!(search(&store, &read, "puppy").await.hits.len(), 1);
    assert_eq!(search(&store, &unread, "kitten").await.hits.len(), 1);
    // 70 match; a search returns at most 50.
    let fillers = store
        .search(&unread, &SearchRequest::new("filler").limit(50), &c())
        .await
        .unwrap();
    assert_eq!(fillers.hits.len(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lineage_survives_a_reopen_and_erasure_still_follows_it() {
    use hippocamp_memory::lineage::{Derivation, Origin, Role, Source, Status};
    let dir = tempfile::tempdir().unwrap();
    let s = scope("lineage");
    let key = hippocamp_core::FactKey::new("user.pet").unwrap();
    let (a, b, fact) = {
        let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
        let add = |e: NewEntry| {
            let store = &store;
            let s = &s;
            async move {
                store
                    .add_entry(s, e, &WriteOptions::default())
                    .await
                    .unwrap()
                    .entry
            }
        };
        let a = add(NewEntry::new("our cat is called Miso").fact_key(key.clone())).await;
        let b = add(NewEntry::new("the cat is called Miso")).await;
        let fact = add(NewEntry {
            derivation: Some(Derivation {
                sources: vec![
                    Source {
                        entry: a.id,
                        role: Role::Merged,
                    },
                    Source {
                        entry: b.id,
                        role: Role::Merged,
                    },
                ],
                run: Some("run-1".into()),
            }),
            ..NewEntry::new("cat: Miso")
        })
        .await;
        (a, b, fact)
    };
    let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
    let got = store.get_entry(&s, &fact.id, &c()).await.unwrap();
    assert_eq!(got, fact);
    assert_eq!(got.origin, Origin::Fact);
    let got_a = store.get_entry(&s, &a.id, &c()).await.unwrap();
    assert_eq!(got_a.fact_key, Some(key));
    assert_eq!(
        (got_a.status, got_a.merged_into),
        (Status::Merged, Some(fact.id))
    );
    let hits = search(&store, &s, "cat Miso").await;
    assert_eq!(hits.hits.len(), 1);
    assert_eq!(hits.hits[0].entry.id, fact.id);
    // The scope's count of derived entries came back: erasure follows
    // lineage after the reopen.
    assert_eq!(store.delete_entry(&s, &b.id, &c()).await.unwrap(), 2);
    assert!(store.get_entry(&s, &fact.id, &c()).await.is_err());
    assert_eq!(
        store.get_entry(&s, &a.id, &c()).await.unwrap().status,
        Status::Current
    );
}
