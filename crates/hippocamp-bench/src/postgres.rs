//! `hippocamp bench postgres`: the PostgreSQL memory store next to the
//! embedded (redb) store in one run: search latency on a 600-entry scope
//! (LoCoMo questions, interleaved) and acknowledged ingestion throughput
//! (`add_events` batches of ~200-byte turns), with one and with two
//! "servers" (two stores with their own pools and caches over one schema,
//! ingesting into scopes of their own at the same time).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hippocamp_core::{CallOptions, MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryStore, SearchRequest, WriteOptions};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_postgres::{Database, PgConfig, PgMemoryStore};
use serde::Serialize;

use crate::{Latency, Result, big_config, latency, locomo_scope, turns};

/// Entries of the searched scope.
const ENTRIES: usize = 600;
/// Events per `add_events` call.
const BATCH: usize = 1_000;

/// One ingestion run.
#[derive(Debug, Serialize)]
pub struct IngestRun {
    /// `redb`, `postgres`, or `postgres x2` (two servers at once).
    pub store: String,
    /// Events acknowledged.
    pub events: usize,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Acknowledged events per second.
    pub events_per_s: f64,
}

/// The report.
#[derive(Debug, Serialize)]
pub struct PostgresBench {
    /// Entries of the searched scope.
    pub entries: usize,
    /// Searches of each store.
    pub samples: usize,
    /// Lexical search on the embedded store.
    pub search_redb: Latency,
    /// The same searches on PostgreSQL (one version query plus the
    /// in-memory scoring of the server's copy).
    pub search_postgres: Latency,
    /// Whether every search returned the same ids in the same order.
    pub same_results: bool,
    /// Events per `add_events` call.
    pub batch: usize,
    /// Mean bytes of an event's text.
    pub event_bytes: usize,
    /// Ingestion runs, in order.
    pub ingest: Vec<IngestRun>,
}

async fn ingest(
    stores: &[Arc<dyn MemoryStore>],
    texts: &[String],
    batches: usize,
    label: &str,
    tag: &str,
) -> Result<IngestRun> {
    let started = Instant::now();
    let runs = stores.iter().enumerate().map(|(s, store)| {
        let store = Arc::clone(store);
        let texts = texts.to_vec();
        let tag = tag.to_owned();
        async move {
            let session = SessionId::new("bench")?;
            for b in 0..batches {
                let scope = MemoryScope::parse("bench", &format!("{tag}-s{s}-u{}", b % 8))?;
                let events: Vec<Event> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| Event::text(format!("b{b}e{i}"), "user", 1, t.clone()))
                    .collect();
                store
                    .add_events(&scope, &session, &events, &WriteOptions::default())
                    .await?;
            }
            Ok::<_, crate::BenchError>(())
        }
    });
    let handles: Vec<_> = runs.map(tokio::spawn).collect();
    for h in handles {
        h.await
            .map_err(|e| hippocamp_core::Error::Unavailable(e.to_string()))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let events = stores.len() * batches * texts.len();
    Ok(IngestRun {
        store: label.to_owned(),
        events,
        seconds,
        events_per_s: events as f64 / seconds,
    })
}

/// Runs the comparison on the PostgreSQL at `url` (a fresh schema) and a
/// redb store in `dir`.
pub async fn postgres(
    dir: &Path,
    url: &str,
    samples: usize,
    batches: usize,
) -> Result<PostgresBench> {
    let pg = PgConfig::new(url).schema(format!("bench_{:016x}", rand_u64()));
    let db = Database::connect(&pg).await?;
    let pg_store: Arc<dyn MemoryStore> = Arc::new(PgMemoryStore::open(db, big_config())?);
    let redb: Arc<dyn MemoryStore> =
        Arc::new(RedbMemoryStore::open(dir.join("store"), big_config())?);
    let scope = MemoryScope::parse("bench", "search")?;
    let queries = locomo_scope(&*redb, &scope, ENTRIES).await?;
    locomo_scope(&*pg_store, &scope, ENTRIES).await?;
    let call = CallOptions::default();
    let (mut on_redb, mut on_pg) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    let mut same = true;
    // 200 warm-up pairs; the order alternates.
    for (i, q) in queries.iter().cycle().take(samples + 200).enumerate() {
        let request = SearchRequest::new(q.clone()).limit(10);
        let mut ids = [Vec::new(), Vec::new()];
        let mut times = [0.0; 2];
        for turn in [i % 2 == 0, i % 2 != 0] {
            let store = if turn { &pg_store } else { &redb };
            let started = Instant::now();
            let hits = store.search(&scope, &request, &call).await?;
            times[usize::from(turn)] = started.elapsed().as_secs_f64() * 1e6;
            ids[usize::from(turn)] = hits.hits.iter().map(|h| h.entry.id).collect();
        }
        same &= ids[0] == ids[1];
        if i >= 200 {
            on_redb.push(times[0]);
            on_pg.push(times[1]);
        }
    }
    let texts = turns(BATCH)?;
    let event_bytes = texts.iter().map(String::len).sum::<usize>() / texts.len().max(1);
    let mut runs = vec![
        ingest(std::slice::from_ref(&redb), &texts, batches, "redb", "r").await?,
        ingest(
            std::slice::from_ref(&pg_store),
            &texts,
            batches,
            "postgres",
            "p1",
        )
        .await?,
    ];
    // A second server: its own pool and cache over the same schema.
    let second: Arc<dyn MemoryStore> = Arc::new(PgMemoryStore::open(
        Database::connect(&pg).await?,
        big_config(),
    )?);
    runs.push(
        ingest(
            &[Arc::clone(&pg_store), second],
            &texts,
            batches.div_ceil(2),
            "postgres x2",
            "p2",
        )
        .await?,
    );
    Ok(PostgresBench {
        entries: ENTRIES,
        samples,
        search_redb: latency(on_redb),
        search_postgres: latency(on_pg),
        same_results: same,
        batch: BATCH,
        event_bytes,
        ingest: runs,
    })
}

/// A random number (the standard library seeds each `RandomState` at
/// random), for a schema name of this run's own.
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}
