//! Guards the retrieval quality the project promises, on the real data.

#![allow(clippy::unwrap_used)]

use hippocamp_eval::{InMemoryOpener, cranfield, locomo};

fn data() -> Option<std::path::PathBuf> {
    hippocamp_testkit::shared_data()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locomo_dev_meets_the_lexical_bar() {
    let Some(dir) = data() else { return };
    let samples = hippocamp_datasets::locomo::load(&dir.join("locomo/locomo-dev.json")).unwrap();
    let opts = locomo::LocomoOptions {
        progress: false,
        ..locomo::LocomoOptions::default()
    };
    let r = locomo::run(&InMemoryOpener, &samples, &opts).await.unwrap();
    assert!(r.recall_at_10 >= 0.54, "R@10 {}", r.recall_at_10);
    assert!(r.mrr >= 0.39, "MRR {}", r.mrr);
    assert_eq!(r.isolation_equal, Some(true));
    assert_eq!(r.foreign_scope_hits, 0);
    assert_eq!(r.events, 2_960);
    assert_eq!(r.per_category.len(), 5);
    // Any evidence in the top 10 is at least the share found there, and a
    // hit from an evidence session at least that.
    assert!(
        r.hits.hit_at_10 >= r.recall_at_10 && r.hits.session_hit_at_10 >= r.hits.hit_at_10,
        "{r}"
    );
    let h = &r.hits;
    assert!(h.hit_at_1 <= h.hit_at_5 && h.hit_at_5 <= h.hit_at_10 && h.hit_at_10 <= h.hit_at_20);
    assert_eq!(r.per_question.len(), r.questions_all);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cranfield_meets_the_bm25_bar() {
    let Some(dir) = data() else { return };
    let c = hippocamp_datasets::cranfield::load(&dir.join("cranfield")).unwrap();
    let r = cranfield::run(&InMemoryOpener, &c, cranfield::config(), false)
        .await
        .unwrap();
    assert!(r.ndcg_at_10 >= 0.35, "nDCG@10 {}", r.ndcg_at_10);
    assert_eq!(r.queries, 225);
}

/// The modes run end to end through an embedding store (the hashing
/// embedder: this checks the plumbing and the report keys, never quality).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cranfield_runs_in_every_mode_with_an_embedder() {
    let Some(dir) = data() else { return };
    let c = hippocamp_datasets::cranfield::load(&dir.join("cranfield")).unwrap();
    let opener = hippocamp_eval::EmbeddingOpener {
        embedder: std::sync::Arc::new(hippocamp_embed::hash::HashEmbedder::new(256)),
        label: "hash-256@test".into(),
    };
    let lexical = cranfield::run(&InMemoryOpener, &c, cranfield::config(), false)
        .await
        .unwrap();
    assert_eq!(
        (lexical.mode.as_str(), lexical.embedder.as_deref()),
        ("lexical", None)
    );
    for mode in [
        hippocamp_memory::SearchMode::Lexical,
        hippocamp_memory::SearchMode::Vector,
        hippocamp_memory::SearchMode::Hybrid,
    ] {
        let r = cranfield::run_in_mode(&opener, &c, cranfield::config(), Some(mode), false)
            .await
            .unwrap();
        assert_eq!(r.mode, mode.as_str());
        assert_eq!(r.embedder.as_deref(), Some("hash-256@test"));
        assert!(r.ndcg_at_10 > 0.05, "{mode:?}: {}", r.ndcg_at_10);
        if mode == hippocamp_memory::SearchMode::Lexical {
            // The embedder changes nothing in lexical mode.
            assert!((r.ndcg_at_10 - lexical.ndcg_at_10).abs() < 1e-12);
        }
    }
}
