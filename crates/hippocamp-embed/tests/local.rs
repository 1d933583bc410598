//! The local model against independently computed values: cosine
//! similarities of all-MiniLM-L6-v2 published with the model's reference
//! implementation (sentence-transformers), not this code's own output.
//! Needs `HIPPOCAMP_TEST_LOCAL_MODEL` (the model directory; set by
//! `scripts/embed-server.sh start`).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hippocamp_core::Deadline;
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
    let e = LocalEmbedder::load(&dir, EmbedLimits::default()).unwrap();
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
