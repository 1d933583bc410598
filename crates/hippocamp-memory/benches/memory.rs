//! Store-level figures of the in-memory store:
//! - `search/<n>`: one search (top 50) on a scope of n entries built from
//!   LoCoMo turns and Cranfield sentences, LoCoMo questions as queries;
//! - `add_entry`: one acknowledged add;
//! - `add_events_1000`: one batch of 1,000 events of ~200 bytes.

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
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_entries_per_scope: 10_000_000,
            max_bytes_per_scope: 10_737_418_240,
            ..MemoryLimits::default()
        },
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
    let mut group = c.benchmark_group("search");
    for n in [600usize, 10_000, 100_000] {
        let texts = hippocamp_datasets::corpus::texts(&dir, n).expect("corpus");
        let store = store();
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

criterion_group!(benches, search, ingest);
criterion_main!(benches);
