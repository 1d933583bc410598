//! Store-level figures of the in-memory store:
//! - `search/<n>`: one search (top 50) on a scope of n entries built from
//!   LoCoMo turns and Cranfield sentences, LoCoMo questions as queries;
//! - `add_entry`: one acknowledged add;
//! - `add_events_1000`: one batch of 1,000 events of ~200 bytes;
//! - `vectors/{vector,hybrid}_600`: one vector or hybrid search (top 50)
//!   of a 600-entry scope with 384-wide vectors, excluding the query's
//!   embedding (vectors are computed before timing).

// Benchmark set-up may panic: a missing corpus is a usage error.
#![allow(clippy::expect_used, clippy::cast_possible_wrap)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use hippocamp_core::{CallOptions, MemoryLimits, MemoryScope, SessionId};
use hippocamp_memory::{
    Event, InMemoryStore, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn store() -> Arc<InMemoryStore> {
    store_with(
        hippocamp_search::NeighbourParams::default(),
        hippocamp_search::TimeParams::default(),
    )
}

/// A store whose lexical search adds neighbour support and reads time as
/// `neighbours` and `time` say (on by default; the `search_plain` group
/// turns both off).
fn store_with(
    neighbours: hippocamp_search::NeighbourParams,
    time: hippocamp_search::TimeParams,
) -> Arc<InMemoryStore> {
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_entries_per_scope: 10_000_000,
            max_bytes_per_scope: 10_737_418_240,
            ..MemoryLimits::default()
        },
        neighbours,
        time,
        ..MemoryConfig::default()
    };
    Arc::new(InMemoryStore::new(config).expect("store"))
}

fn events(texts: &[String], offset: usize) -> Vec<Event> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Event::text(
                format!("e{}", offset + i),
                "user",
                (offset + i) as i64,
                t.clone(),
            )
        })
        .collect()
}

fn search(c: &mut Criterion) {
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    let queries = hippocamp_datasets::corpus::queries(&dir).expect("LoCoMo questions");
    let rt = runtime();
    let plain = hippocamp_search::NeighbourParams {
        enabled: false,
        ..hippocamp_search::NeighbourParams::default()
    };
    let no_time = hippocamp_search::TimeParams {
        enabled: false,
        ..hippocamp_search::TimeParams::default()
    };
    // `search`: the default path (neighbour support and time on);
    // `search_plain`: BM25 alone, at 600 entries, for the stages' cost.
    for (group_name, sizes, neighbours, time) in [
        (
            "search",
            &[600usize, 10_000, 100_000][..],
            hippocamp_search::NeighbourParams::default(),
            hippocamp_search::TimeParams::default(),
        ),
        ("search_plain", &[600usize][..], plain, no_time),
    ] {
        let mut group = c.benchmark_group(group_name);
        for &n in sizes {
            let texts = hippocamp_datasets::corpus::texts(&dir, n).expect("corpus");
            let store = store_with(neighbours, time);
            let scope = MemoryScope::parse("bench", "user").expect("scope");
            let session = SessionId::new("s").expect("session");
            rt.block_on(async {
                for (i, chunk) in texts.chunks(1_000).enumerate() {
                    store
                        .add_events(
                            &scope,
                            &session,
                            &events(chunk, i * 1_000),
                            &WriteOptions::default(),
                        )
                        .await
                        .expect("ingest");
                }
            });
            let mut q = 0usize;
            let opts = CallOptions::default();
            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                b.iter(|| {
                    q = (q + 1) % queries.len();
                    let req = SearchRequest::new(queries[q].clone()).limit(50);
                    black_box(
                        rt.block_on(store.search(&scope, &req, &opts))
                            .expect("search"),
                    )
                });
            });
        }
        group.finish();
    }
}

fn ingest(c: &mut Criterion) {
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    // ~200-byte turns: LoCoMo turns padded or cut to 200 bytes.
    let texts: Vec<String> = hippocamp_datasets::corpus::texts(&dir, 1_000)
        .expect("corpus")
        .into_iter()
        .map(|t| {
            let mut t = format!("{t} {t} {t}");
            let mut cut = 200.min(t.len());
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            t.truncate(cut);
            t
        })
        .collect();
    let rt = runtime();
    let mut group = c.benchmark_group("ingest");
    let store = store();
    let mut n = 0usize;
    group.throughput(Throughput::Elements(1));
    group.bench_function("add_entry", |b| {
        b.iter(|| {
            n += 1;
            let scope = MemoryScope::parse("bench", &format!("u{}", n % 64)).expect("scope");
            let entry = NewEntry::new(texts[n % texts.len()].clone());
            black_box(
                rt.block_on(store.add_entry(&scope, entry, &WriteOptions::default()))
                    .expect("add"),
            )
        });
    });
    group.throughput(Throughput::Elements(1_000));
    let session = SessionId::new("s").expect("session");
    let mut batch = 0usize;
    group.bench_function("add_events_1000", |b| {
        b.iter(|| {
            batch += 1;
            let scope = MemoryScope::parse("bench", &format!("batch{batch}")).expect("scope");
            let evs = events(&texts, 0);
            black_box(
                rt.block_on(store.add_events(&scope, &session, &evs, &WriteOptions::default()))
                    .expect("add_events"),
            )
        });
    });
    group.finish();
}

fn vectors(c: &mut Criterion) {
    use hippocamp_memory::SearchMode;
    use hippocamp_memory::entry::prepare_entry;
    use hippocamp_memory::scope::ScopeData;
    use hippocamp_memory::search::prepare_search;
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    let queries = hippocamp_datasets::corpus::queries(&dir).expect("LoCoMo questions");
    let texts = hippocamp_datasets::corpus::texts(&dir, 600).expect("corpus");
    let rt = runtime();
    let embedder = hippocamp_embed::hash::HashEmbedder::new(384);
    let deadline = || hippocamp_core::Deadline::after(std::time::Duration::from_secs(5));
    let embed = |t: &[String]| {
        let t: Vec<&str> = t.iter().map(String::as_str).collect();
        rt.block_on(hippocamp_memory::embedding::embed_passages(
            Some(&embedder),
            &t,
            deadline(),
        ))
        .expect("embed")
    };
    let config = MemoryConfig::default();
    let analyzer = hippocamp_search::Analyzer::english();
    let scope = MemoryScope::parse("bench", "user").expect("scope");
    let mut data = ScopeData::default();
    for (text, v) in texts.iter().zip(embed(&texts)) {
        let p = prepare_entry(&scope, NewEntry::new(text.clone()), &config.limits).expect("entry");
        let id = p.entry.id;
        data.insert(p.entry, p.storage_bytes, &analyzer.analyze(text));
        data.insert_vector(id, &v);
    }
    let prepared: Vec<_> = queries
        .iter()
        .take(200)
        .map(|q| {
            let req = SearchRequest::new(q.clone()).limit(50);
            prepare_search(&req, &config, &analyzer).expect("query")
        })
        .collect();
    let qv = embed(&queries.iter().take(200).cloned().collect::<Vec<_>>());
    let mut group = c.benchmark_group("vectors");
    for (name, mode) in [
        ("vector_600", SearchMode::Vector),
        ("hybrid_600", SearchMode::Hybrid),
    ] {
        let mut q = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                q = (q + 1) % prepared.len();
                black_box(data.search_vectors(
                    &prepared[q],
                    mode,
                    &qv[q],
                    config.bm25,
                    &config.fusion,
                ))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, search, ingest, vectors);
criterion_main!(benches);
