//! `hippocamp bench postgres`: the PostgreSQL memory store next to the
//! embedded (redb) store in one run: search latency on a 600-entry scope
//! (LoCoMo questions, interleaved) and acknowledged ingestion throughput
//! (`add_events` batches of ~200-byte turns), with one and with two
//! "servers" (two stores with their own pools and caches over one schema,
//! ingesting into scopes of their own at the same time).
//!
//! `hippocamp bench postgres-vectors`: vector search on scopes of several
//! sizes, ranked exactly in the server's copy and through pgvector's HNSW
//! index, and the index's recall@10 against the exact ranking: what
//! `[postgres] exact_vectors_up_to` trades.

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

/// One scope size of `bench postgres-vectors`.
#[derive(Debug, Serialize)]
pub struct VectorRun {
    /// Entries of the scope.
    pub entries: usize,
    /// Vector search (limit 10) ranked exactly in the server's copy.
    pub exact_in_copy: Latency,
    /// The same searches ranked through the HNSW index.
    pub hnsw: Latency,
    /// Of the exact top ten, the share the index's top ten holds.
    pub recall_at_10: f64,
    /// Bytes the copy's vectors take in a server when held (entries ×
    /// dimension × 4).
    pub copy_vector_bytes: u64,
}

/// The report of `bench postgres-vectors`.
#[derive(Debug, Serialize)]
pub struct VectorBench {
    /// The embedder the entries and queries went through.
    pub embedder: String,
    /// Its vectors' width.
    pub dimension: usize,
    /// Searches of each kind per size (after 50 warm-up pairs).
    pub samples: usize,
    /// Rows in the table (every size's scope): the index covers them all.
    pub table_rows: usize,
    /// One run per scope size.
    pub runs: Vec<VectorRun>,
}

/// Keeps query vectors after their first embedding, so a search's time is
/// its ranking, not the embedder's round trip (both rankings would pay
/// the same).
#[derive(Debug)]
struct QueryCache {
    inner: Arc<dyn hippocamp_embed::Embedder>,
    seen: parking_lot::Mutex<std::collections::HashMap<String, hippocamp_embed::Vector>>,
}

#[async_trait::async_trait]
impl hippocamp_embed::Embedder for QueryCache {
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn limits(&self) -> &hippocamp_embed::EmbedLimits {
        self.inner.limits()
    }
    fn describe_limits(&self) -> Vec<hippocamp_core::LimitInfo> {
        self.inner.describe_limits()
    }
    async fn embed(
        &self,
        texts: &[String],
        kind: hippocamp_embed::InputKind,
        deadline: hippocamp_core::Deadline,
    ) -> hippocamp_core::Result<Vec<hippocamp_embed::Vector>> {
        if kind == hippocamp_embed::InputKind::Query
            && let [text] = texts
            && let Some(v) = self.seen.lock().get(text)
        {
            return Ok(vec![v.clone()]);
        }
        let out = self.inner.embed(texts, kind, deadline).await?;
        if kind == hippocamp_embed::InputKind::Query {
            let mut seen = self.seen.lock();
            for (t, v) in texts.iter().zip(&out) {
                seen.insert(t.clone(), v.clone());
            }
        }
        Ok(out)
    }
}

/// Fills a scope of each size in `sizes` (LoCoMo turns) on a fresh schema
/// of the PostgreSQL at `url`, then searches each with LoCoMo questions
/// by vector through two servers over it: one ranking exactly in its copy
/// (`exact_vectors_up_to` at its maximum), one through the HNSW index (0),
/// interleaved.
pub async fn vectors(
    url: &str,
    embedder: Arc<dyn hippocamp_embed::Embedder>,
    label: &str,
    sizes: &[usize],
    samples: usize,
) -> Result<VectorBench> {
    let embedder: Arc<dyn hippocamp_embed::Embedder> = Arc::new(QueryCache {
        inner: embedder,
        seen: parking_lot::Mutex::default(),
    });
    let dimension = embedder.dimension();
    let pg = PgConfig::new(url).schema(format!("bench_{:016x}", rand_u64()));
    let open = |exact_up_to: u64| {
        let (pg, embedder) = (pg.clone(), Arc::clone(&embedder));
        async move {
            PgMemoryStore::open(Database::connect(&pg).await?, big_config())?
                .exact_vectors_up_to(exact_up_to)?
                .with_embedder(embedder)
                .await
        }
    };
    let max = hippocamp_postgres::memory::MAX_EXACT_VECTORS_UP_TO;
    let writer = open(max).await?;
    let dir = hippocamp_datasets::data_dir().ok_or(crate::BenchError::NoData)?;
    let session = SessionId::new("s")?;
    for &n in sizes {
        let scope = MemoryScope::parse("bench", &format!("v{n}"))?;
        let texts = hippocamp_datasets::corpus::texts(&dir, n)?;
        for chunk in crate::turn_events(&texts).chunks(32) {
            writer
                .add_events(&scope, &session, chunk, &WriteOptions::default())
                .await?;
        }
    }
    let (exact, indexed) = (open(max).await?, open(0).await?);
    let queries: Vec<String> = hippocamp_datasets::corpus::queries(&dir)?
        .into_iter()
        .take(samples + 50)
        .collect();
    // Every query embedded once before any is timed.
    for chunk in queries.chunks(16) {
        embedder
            .embed(
                chunk,
                hippocamp_embed::InputKind::Query,
                hippocamp_core::Deadline::after(std::time::Duration::from_mins(1)),
            )
            .await?;
    }
    let call = CallOptions::default();
    let mut runs = Vec::new();
    for &n in sizes {
        let scope = MemoryScope::parse("bench", &format!("v{n}"))?;
        let (mut on_copy, mut on_index) = (Vec::new(), Vec::new());
        let (mut found, mut wanted) = (0usize, 0usize);
        for (i, q) in queries.iter().cycle().take(samples + 50).enumerate() {
            let request = SearchRequest::new(q.clone())
                .mode(hippocamp_memory::SearchMode::Vector)
                .limit(10);
            let mut ids: [Vec<hippocamp_core::EntryId>; 2] = [Vec::new(), Vec::new()];
            let mut times = [0.0; 2];
            for through_index in [i % 2 == 0, i % 2 != 0] {
                let store = if through_index { &indexed } else { &exact };
                let started = Instant::now();
                let hits = store.search(&scope, &request, &call).await?;
                times[usize::from(through_index)] = started.elapsed().as_secs_f64() * 1e6;
                ids[usize::from(through_index)] = hits.hits.iter().map(|h| h.entry.id).collect();
            }
            if i >= 50 {
                on_copy.push(times[0]);
                on_index.push(times[1]);
                found += ids[1].iter().filter(|id| ids[0].contains(id)).count();
                wanted += ids[0].len();
            }
        }
        runs.push(VectorRun {
            entries: n,
            exact_in_copy: latency(on_copy),
            hnsw: latency(on_index),
            recall_at_10: found as f64 / wanted.max(1) as f64,
            copy_vector_bytes: (n * dimension * 4) as u64,
        });
    }
    Ok(VectorBench {
        embedder: label.to_owned(),
        dimension,
        samples,
        table_rows: sizes.iter().sum(),
        runs,
    })
}
