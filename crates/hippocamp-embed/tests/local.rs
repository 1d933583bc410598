//! The local model against independently computed values: cosine
//! similarities of all-MiniLM-L6-v2 published with the model's reference
//! implementation (sentence-transformers), not this code's own output.
//! Needs `HIPPOCAMP_TEST_LOCAL_MODEL` (the model directory; set by
//! `scripts/embed-server.sh start`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hippocamp_core::Deadline;
use hippocamp_embed::LocalLimits;
use hippocamp_embed::local::LocalEmbedder;
use hippocamp_embed::{EmbedLimits, Embedder, InputKind};

fn model_dir() -> Option<std::path::PathBuf> {
    hippocamp_testkit::env(
        "HIPPOCAMP_TEST_LOCAL_MODEL",
        "scripts/embed-server.sh start",
    )
    .map(std::path::PathBuf::from)
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_similarities_of_all_minilm_l6_v2() {
    let Some(dir) = model_dir() else { return };
    let e = LocalEmbedder::load(&dir, EmbedLimits::default(), LocalLimits::default()).unwrap();
    assert_eq!(e.dimension(), 384);
    let texts: Vec<String> = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The new movie is awesome.",
    ]
    .map(str::to_owned)
    .to_vec();
    let d = || Deadline::after(Duration::from_secs(30));
    let v = e.embed(&texts, InputKind::Passage, d()).await.unwrap();
    for x in &v {
        assert!((cos(x, x) - 1.0).abs() < 1e-4);
    }
    let ab = cos(&v[0], &v[1]);
    let ac = cos(&v[0], &v[2]);
    assert!((ab - 0.7553).abs() < 0.001, "cos(a, b) = {ab}");
    assert!((ac - -0.0461).abs() < 0.001, "cos(a, c) = {ac}");
    // Padding never changes a vector: alone or in a batch, the same.
    let alone = e.embed(&texts[2..], InputKind::Query, d()).await.unwrap();
    assert!(
        alone[0]
            .iter()
            .zip(&v[2])
            .all(|(x, y)| (x - y).abs() < 1e-5)
    );
    // Bounds hold before any work.
    assert!(e.embed(&[], InputKind::Query, d()).await.is_err());
}

/// A call past its deadline gets `Timeout` at the deadline and its work
/// stops before its next chunk (the forward passes settle far below the
/// batch); at most `max_concurrent_batches` calls infer at once, so a
/// call that finds the slot taken waits, within its own deadline; both
/// limits are reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_call_stops_at_its_next_chunk_and_calls_wait_for_a_slot() {
    use std::time::Instant;
    let Some(dir) = model_dir() else { return };
    let local = LocalLimits {
        chunk_inputs: 1,
        max_concurrent_batches: 1,
    };
    let e = LocalEmbedder::load(&dir, EmbedLimits::default(), local).unwrap();
    let names: Vec<String> = e.describe_limits().into_iter().map(|l| l.name).collect();
    for n in [
        "embed.timeout_ms",
        "embed.local.chunk_inputs",
        "embed.local.max_concurrent_batches",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    let texts: Vec<String> = (0..128)
        .map(|i| format!("sentence {i} {}", "about many words ".repeat(4)))
        .collect();
    let started = Instant::now();
    let late = e
        .embed(
            &texts,
            InputKind::Passage,
            Deadline::after(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            late,
            hippocamp_core::Error::Timeout(hippocamp_core::Stage::Embedding)
        ),
        "{late}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The abandoned work stops: its passes settle, far below 128.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = e.passes();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(e.passes(), settled);
    assert!(settled < 64, "{settled} passes after the deadline");

    // One slot: a call that finds it taken waits, and its deadline ends
    // the wait.
    let long = {
        let (e, t) = (e.clone(), texts[..6].to_vec());
        tokio::spawn(async move {
            e.embed(
                &t,
                InputKind::Passage,
                Deadline::after(Duration::from_mins(1)),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waiting = e
        .embed(
            &texts[..1],
            InputKind::Query,
            Deadline::after(Duration::from_millis(20)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(waiting, hippocamp_core::Error::Timeout(_)),
        "{waiting}"
    );
    assert_eq!(long.await.unwrap().unwrap().len(), 6);
    // The slot is free again.
    let one = e
        .embed(
            &texts[..1],
            InputKind::Query,
            Deadline::after(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
}

/// The local model as the reranking stage's scorer (a bi-encoder): the
/// paraphrase outranks the unrelated sentences, scores in document order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_minilm_l6_v2_reranks_as_a_bi_encoder() {
    use hippocamp_embed::rerank::{EmbeddingReranker, Reranker};
    let Some(dir) = model_dir() else {
        return;
    };
    let e = LocalEmbedder::load(&dir, EmbedLimits::default(), LocalLimits::default()).unwrap();
    let r = EmbeddingReranker::new(std::sync::Arc::new(e));
    let docs = [
        "The new movie is awesome.",
        "A man is eating a piece of bread.",
        "Stock markets fell sharply on Monday.",
    ];
    let s = r
        .score(
            "A man is eating food.",
            &docs,
            Deadline::after(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    assert!(s[1] > s[0] + 0.3 && s[1] > s[2] + 0.3, "{s:?}");
    // The golden value of the pair, as a cosine.
    assert!((s[1] - 0.7553).abs() < 0.01, "{s:?}");
}
