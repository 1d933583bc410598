//! Guards the retrieval quality the project promises, on the real data.

#![allow(clippy::unwrap_used)]

use hippocamp_eval::{InMemoryOpener, cranfield, locomo};

fn data() -> Option<std::path::PathBuf> {
    let d = hippocamp_datasets::data_dir();
    if d.is_none() {
        assert!(
            std::env::var_os("HIPPOCAMP_REQUIRE_EXTERNAL").is_none(),
            "HIPPOCAMP_REQUIRE_EXTERNAL is set but the shared data folder is missing"
        );
        eprintln!("skipping: ../shared/data not found and HIPPOCAMP_DATA_DIR not set");
    }
    d
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
    assert!(r.isolation_equal);
    assert_eq!(r.foreign_scope_hits, 0);
    assert_eq!(r.events, 2_960);
    assert_eq!(r.per_category.len(), 5);
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
