//! What only a shared database can show: two stores over one schema (two
//! servers) see each other's writes and erasures, the statistics in the
//! tables agree with the entries, the store-wide quota holds under
//! concurrent servers, migrations apply once, and LoCoMo's results equal
//! the embedded store's id for id.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use hippocamp_core::{CallOptions, Error, MemoryLimits, MemoryScope, QuotaLimit, SessionId};
use hippocamp_memory::{
    EntryUpdate, Event, MemoryConfig, MemoryStore, NewEntry, SearchRequest, SearchResults,
    WriteOptions,
};
use hippocamp_postgres::{Database, PgMemoryStore};

fn c() -> CallOptions {
    CallOptions::default()
}

fn scope(user: &str) -> MemoryScope {
    MemoryScope::parse("app", user).unwrap()
}

async fn two_servers(config: MemoryConfig) -> (PgMemoryStore, PgMemoryStore, Database) {
    let pg = support::config();
    let a = Database::connect(&pg).await.unwrap();
    let b = Database::connect(&pg).await.unwrap();
    (
        PgMemoryStore::open(a.clone(), config.clone()).unwrap(),
        PgMemoryStore::open(b, config).unwrap(),
        a,
    )
}

async fn ids(store: &dyn MemoryStore, s: &MemoryScope, q: &str) -> Vec<String> {
    store
        .search(s, &SearchRequest::new(q), &c())
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.id.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_through_one_server_is_read_through_the_other() {
    if !support::have_postgres() {
        return;
    }
    let (a, b, _) = two_servers(MemoryConfig::default()).await;
    let s = scope("alice");
    let first = a
        .add_entry(
            &s,
            NewEntry::new("alice keeps bees"),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .entry;
    // B loads the scope now, then must notice A's next writes.
    assert_eq!(ids(&b, &s, "bees").await, [first.id.to_string()]);
    let second = a
        .add_entry(
            &s,
            NewEntry::new("alice sells honey from her bees"),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .entry;
    assert_eq!(ids(&b, &s, "bees").await.len(), 2);
    // A correction through B is seen by A (whose copy is now stale).
    let update = EntryUpdate {
        content: "alice sells wax".into(),
        metadata: serde_json::Map::new(),
    };
    b.update_entry(&s, &second.id, &update, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&a, &s, "honey").await, Vec::<String>::new());
    assert_eq!(ids(&a, &s, "wax").await, [second.id.to_string()]);
    assert_eq!(
        a.entry_history(&s, &second.id, &c()).await.unwrap().len(),
        2
    );
    // An erasure through B: A finds nothing, and a write A admitted under
    // the old epoch is refused.
    let erased = b.delete_user(&s, &c()).await.unwrap();
    assert_eq!((erased.deleted, erased.epoch), (2, 1));
    assert!(ids(&a, &s, "bees").await.is_empty());
    assert_eq!(a.erasure_epoch(&s, &c()).await.unwrap(), 1);
    let stale = a
        .add_events(
            &s,
            &SessionId::new("s1").unwrap(),
            &[Event::text("e1", "user", 1, "queued before the erasure")],
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
    assert_eq!(a.status().await.unwrap().entries, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_session_stays_erased_for_the_other_server() {
    if !support::have_postgres() {
        return;
    }
    let (a, b, _) = two_servers(MemoryConfig::default()).await;
    let s = scope("bob");
    let sid = SessionId::new("chat-1").unwrap();
    let events = [Event::text("e1", "user", 1, "bob likes sailing")];
    a.add_events(&s, &sid, &events, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(ids(&b, &s, "sailing").await.len(), 1);
    assert_eq!(b.delete_session(&s, &sid, &c()).await.unwrap(), 1);
    // A redelivery through A (its copy stale) is skipped as erased.
    let again = a
        .add_events(&s, &sid, &events, &WriteOptions::default())
        .await
        .unwrap();
    assert!(again.added.is_empty(), "{again:?}");
    assert!(ids(&a, &s, "sailing").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_servers_never_exceed_the_store_wide_quota() {
    if !support::have_postgres() {
        return;
    }
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_entries_total: 30,
            max_entries_per_scope: 30,
            ..MemoryLimits::default()
        },
        ..MemoryConfig::default()
    };
    let (a, b, _) = two_servers(config).await;
    let (a, b) = (Arc::new(a), Arc::new(b));
    let mut tasks = Vec::new();
    for n in 0..40 {
        let store = if n % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        tasks.push(tokio::spawn(async move {
            store
                .add_entry(
                    &scope(&format!("u{}", n % 7)),
                    NewEntry::new(format!("fact number {n}")),
                    &WriteOptions::default(),
                )
                .await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(Error::QuotaExceeded {
                limit: QuotaLimit::EntriesTotal(30),
            }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(ok, 30);
    assert_eq!(a.status().await.unwrap().entries, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_statistics_in_the_tables_agree_with_the_entries() {
    if !support::have_postgres() {
        return;
    }
    let (a, b, db) = two_servers(MemoryConfig::default()).await;
    for (n, user) in ["ann", "ben", "cat"].iter().enumerate() {
        let s = scope(user);
        let sid = SessionId::new("s").unwrap();
        let events: Vec<Event> = (0..20)
            .map(|i| {
                Event::text(
                    format!("e{i}"),
                    "user",
                    i,
                    format!("{user} said thing {i} about topic {}", i % 3),
                )
            })
            .collect();
        a.add_events(&s, &sid, &events, &WriteOptions::default())
            .await
            .unwrap();
        let listed = b
            .list_entries(&s, &hippocamp_memory::ListRequest::default(), &c())
            .await
            .unwrap();
        b.delete_entry(&s, &listed.entries[n].id, &c())
            .await
            .unwrap();
        let update = EntryUpdate {
            content: format!("{user} corrected a much longer statement about several topics"),
            metadata: serde_json::Map::new(),
        };
        a.update_entry(
            &s,
            &listed.entries[n + 1].id,
            &update,
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    b.delete_user(&scope("cat"), &c()).await.unwrap();
    let client = db
        .client(hippocamp_core::Deadline::after(
            std::time::Duration::from_secs(5),
        ))
        .await
        .unwrap();
    let mismatched: i64 = client
        .query_one(
            "SELECT count(*) FROM memory_scopes s LEFT JOIN LATERAL \
             (SELECT count(*) n, COALESCE(sum(bytes), 0) b, COALESCE(sum(doc_len), 0) l \
              FROM memory_entries e WHERE e.scope_id = s.id) e ON TRUE \
             WHERE s.entries <> e.n OR s.bytes <> e.b OR s.total_len <> e.l",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mismatched, 0);
    let totals = client
        .query_one(
            "SELECT (SELECT entries FROM memory_totals) = (SELECT count(*) FROM memory_entries), \
                    (SELECT bytes FROM memory_totals) = (SELECT COALESCE(sum(bytes), 0) FROM memory_entries), \
                    (SELECT count(*) FROM memory_entries)",
            &[],
        )
        .await
        .unwrap();
    assert!(totals.get::<_, bool>(0) && totals.get::<_, bool>(1));
    assert_eq!(totals.get::<_, i64>(2), 38);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_starting_together_migrate_once_and_a_newer_schema_is_refused() {
    if !support::have_postgres() {
        return;
    }
    let pg = support::config();
    let opened = futures::future::join_all((0..4).map(|_| Database::connect(&pg))).await;
    let db = opened.into_iter().map(Result::unwrap).next_back().unwrap();
    let client = db
        .client(hippocamp_core::Deadline::after(
            std::time::Duration::from_secs(5),
        ))
        .await
        .unwrap();
    let rows: Vec<i32> = client
        .query("SELECT version FROM migrations ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let known: Vec<i32> = hippocamp_postgres::migrations::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(rows, known);
    client
        .execute(
            "INSERT INTO migrations (version, name) VALUES (9999, 'from the future')",
            &[],
        )
        .await
        .unwrap();
    let refused = Database::connect(&pg).await.unwrap_err();
    assert!(matches!(refused, Error::InvalidConfig { .. }), "{refused}");
    assert!(refused.to_string().contains("9999"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_is_a_configuration_error_that_does_not_echo_it() {
    let pg = hippocamp_postgres::PgConfig::new("mysql://root:hunter2@db/x");
    let e = Database::connect(&pg).await.unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
    assert!(!e.to_string().contains("hunter2"));
    assert!(!format!("{pg:?}").contains("hunter2"));
    let bad_schema =
        hippocamp_postgres::PgConfig::new("postgres://x@127.0.0.1/db").schema("a; DROP");
    assert!(matches!(
        bad_schema.validate(),
        Err(Error::InvalidConfig { .. })
    ));
    // Nobody listens there: unavailable, within the connect bound.
    let mut gone = hippocamp_postgres::PgConfig::new("postgres://x@127.0.0.1:9/db");
    gone.connect_timeout = std::time::Duration::from_millis(300);
    gone.wait_timeout = std::time::Duration::from_millis(300);
    let e = Database::connect(&gone).await.unwrap_err();
    assert!(
        matches!(e, Error::Unavailable(_) | Error::Timeout(_)),
        "{e}"
    );
}

/// LoCoMo's development half ingested into the embedded (redb) store and
/// into PostgreSQL: every question returns the same hits (ids, scores,
/// entries) in the same order, lexically and, with the same embedder, in
/// hybrid mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locomo_results_equal_the_embedded_stores() {
    if !support::have_postgres() {
        return;
    }
    let Some(data) = hippocamp_testkit::shared_data() else {
        return;
    };
    let samples = hippocamp_datasets::locomo::load(&data.join("locomo/locomo-dev.json")).unwrap();
    let embedder = Arc::new(hippocamp_embed::hash::HashEmbedder::new(64));
    let dir = tempfile::tempdir().unwrap();
    let redb = hippocamp_memory_redb::RedbMemoryStore::open(dir.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(embedder.clone())
        .unwrap();
    let pg = PgMemoryStore::open(support::database().await, MemoryConfig::default())
        .unwrap()
        .with_embedder(embedder)
        .await
        .unwrap();
    hippocamp_eval::locomo::ingest(&redb, &samples, None)
        .await
        .unwrap();
    hippocamp_eval::locomo::ingest(&pg, &samples, None)
        .await
        .unwrap();
    for mode in [
        hippocamp_memory::SearchMode::Lexical,
        hippocamp_memory::SearchMode::Hybrid,
    ] {
        let want = questions(&redb, &samples, mode).await;
        let got = questions(&pg, &samples, mode).await;
        assert_eq!(want.len(), got.len());
        assert!(want.iter().filter(|r| !r.hits.is_empty()).count() > want.len() / 2);
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(w == g, "question {i} in {mode:?} differs");
        }
    }
}

async fn questions(
    store: &dyn MemoryStore,
    samples: &[hippocamp_datasets::locomo::Sample],
    mode: hippocamp_memory::SearchMode,
) -> Vec<SearchResults> {
    let mut out = Vec::new();
    for s in samples {
        let scope = MemoryScope::parse("locomo", &s.sample_id).unwrap();
        for q in &s.questions {
            let r = store
                .search(
                    &scope,
                    &SearchRequest::new(q.text.clone()).limit(50).mode(mode),
                    &c(),
                )
                .await
                .unwrap();
            out.push(without_ingestion_times(r));
        }
    }
    out
}

/// `r` with each entry's ingestion time cleared: the two stores took the
/// same events at different moments; everything else must be equal.
fn without_ingestion_times(mut r: SearchResults) -> SearchResults {
    let clear = |e: &mut Arc<hippocamp_memory::MemoryEntry>| {
        assert!(e.ingested_at_ms.is_some(), "both stores keep it");
        Arc::make_mut(e).ingested_at_ms = None;
    };
    for hit in &mut r.hits {
        clear(&mut hit.entry);
        if let Some(ctx) = hit.context.as_mut() {
            ctx.before
                .iter_mut()
                .chain(ctx.after.iter_mut())
                .for_each(clear);
        }
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_cache_drops_idle_copies_and_reloads_them() {
    if !support::have_postgres() {
        return;
    }
    let store = PgMemoryStore::open(support::database().await, MemoryConfig::default())
        .unwrap()
        .max_cached_scopes(2);
    let mut want = Vec::new();
    for u in 0..6 {
        let e = store
            .add_entry(
                &scope(&format!("u{u}")),
                NewEntry::new(format!("fact kept for user {u}")),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        want.push(e.entry.id.to_string());
        assert!(store.cached_scopes() <= 2, "{}", store.cached_scopes());
    }
    for _ in 0..2 {
        for (u, id) in want.iter().enumerate() {
            assert_eq!(
                ids(&store, &scope(&format!("u{u}")), "fact kept").await,
                std::slice::from_ref(id)
            );
            assert!(store.cached_scopes() <= 2);
        }
    }
}

/// A delivery through one server (its fence read before) races the
/// session's erasure through another: once the erasure is acknowledged,
/// the session holds nothing, and the writer is refused at its commit
/// point (the session's epoch is read under the scope's row lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_through_one_server_cannot_write_back_a_session_erased_through_another() {
    if !support::have_postgres() {
        return;
    }
    let (a, b, _) = two_servers(MemoryConfig::default()).await;
    let (a, b) = (Arc::new(a), Arc::new(b));
    let s = scope("raced");
    let session = SessionId::new("raced").unwrap();
    let fence = b.erasure_fence(&s, &session, &c()).await.unwrap();
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (b, s, session, written) = (
            Arc::clone(&b),
            s.clone(),
            session.clone(),
            Arc::clone(&written),
        );
        tokio::spawn(async move {
            for batch in 0..500 {
                let events: Vec<Event> = (0..4)
                    .map(|i| {
                        Event::text(
                            format!("b{batch}-{i}"),
                            "user",
                            1 + i,
                            format!("raced fact {batch} {i}"),
                        )
                    })
                    .collect();
                match b
                    .add_events(
                        &s,
                        &session,
                        &events,
                        &WriteOptions::default().fenced(fence),
                    )
                    .await
                {
                    Ok(_) => {
                        written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    Err(Error::StaleEpoch { .. }) => return batch,
                    Err(e) => panic!("{e}"),
                }
            }
            500
        })
    };
    while written.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        tokio::task::yield_now().await;
    }
    a.delete_session(&s, &session, &c()).await.unwrap();
    let stopped_at = writer.await.unwrap();
    assert!(stopped_at < 500, "the writer was never refused");
    for store in [&a, &b] {
        assert!(ids(&**store, &s, "raced").await.is_empty());
        let f = store.erasure_fence(&s, &session, &c()).await.unwrap();
        assert_eq!((f.epoch, f.session_epoch), (0, 1));
    }
}
