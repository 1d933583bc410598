//! Engine-level search latency: analyse the query, score with BM25 and
//! take the top 50, on one scope of 600, 10k and 100k entries built from
//! LoCoMo turns and Cranfield sentences; queries are the LoCoMo questions.
//! Also the analysis of 1,000 turns, ingestion's largest share, and the
//! removal of every other entry of a scope (a large session's erasure).

// Benchmark set-up may panic: a missing corpus is a usage error.
#![allow(clippy::expect_used, clippy::cast_possible_wrap)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hippocamp_search::{Analyzer, Bm25Params, InvertedIndex};

fn search(c: &mut Criterion) {
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    let queries = hippocamp_datasets::corpus::queries(&dir).expect("LoCoMo questions");
    let analyzer = Analyzer::english();
    let mut group = c.benchmark_group("bm25_top50");
    for n in [600usize, 10_000, 100_000] {
        let texts = hippocamp_datasets::corpus::texts(&dir, n).expect("corpus");
        let mut index = InvertedIndex::new();
        for (i, t) in texts.iter().enumerate() {
            index.insert(i as u64, &analyzer.analyze(t), i as i64);
        }
        let mut q = 0usize;
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                q = (q + 1) % queries.len();
                let terms = analyzer.query_terms(&queries[q]);
                let top: Vec<_> = index
                    .search(&terms, Bm25Params::default())
                    .take(50)
                    .collect();
                black_box(top)
            });
        });
    }
    group.finish();
}

/// Analysis of 1,000 conversation turns (what ingestion pays per entry).
fn analyze(c: &mut Criterion) {
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    let texts = hippocamp_datasets::corpus::texts(&dir, 1_000).expect("corpus");
    let analyzer = Analyzer::english();
    let mut group = c.benchmark_group("analyze");
    group.throughput(criterion::Throughput::Elements(texts.len() as u64));
    group.bench_function("turns_1000", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(analyzer.analyze(t));
            }
        });
    });
    group.finish();
}

/// Removing half the entries of a 10k and a 100k scope, one at a time, as
/// an erasure does: each removal costs the document's own terms, not the
/// length of their posting lists (which made this quadratic).
fn remove_half(c: &mut Criterion) {
    let dir =
        hippocamp_datasets::data_dir().expect("set HIPPOCAMP_DATA_DIR or provide ../shared/data");
    let analyzer = Analyzer::english();
    let mut group = c.benchmark_group("remove_half");
    group.sample_size(10);
    for n in [10_000usize, 100_000] {
        let texts = hippocamp_datasets::corpus::texts(&dir, n).expect("corpus");
        let mut index = InvertedIndex::new();
        for (i, t) in texts.iter().enumerate() {
            index.insert(i as u64, &analyzer.analyze(t), i as i64);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_batched(
                || index.clone(),
                |mut index| {
                    for k in (0..n as u64).step_by(2) {
                        index.remove(&k);
                    }
                    index
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, search, analyze, remove_half);
criterion_main!(benches);
