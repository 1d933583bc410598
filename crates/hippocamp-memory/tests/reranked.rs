//! The reranking layer: the conformance suite through it (a bi-encoder
//! reranker at weight 0, which must leave every contract as it was), and
//! what it changes with a scripted reranker (a test double that scores by
//! rule, so each assertion can name the order it expects).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Deadline, Error, MemoryScope, Result};
use hippocamp_embed::hash::HashEmbedder;
use hippocamp_embed::rerank::{EmbeddingReranker, RerankLimits, Reranker};
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::{
    InMemoryStore, MemoryConfig, MemoryStore, NewEntry, RerankStage, Reranked, SearchRequest,
    WriteOptions,
};

struct RerankedFactory;

#[async_trait]
impl StoreFactory for RerankedFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let stage = RerankStage {
            reranker: Arc::new(EmbeddingReranker::new(Arc::new(HashEmbedder::new(64)))),
            limits: RerankLimits::default(),
            weight: 0.0,
        };
        Arc::new(Reranked::new(InMemoryStore::new(config).unwrap(), stage).unwrap())
    }
}

hippocamp_memory::memory_conformance_tests!(RerankedFactory);

/// Scores a document by the position of its first `*` marks: more stars,
/// more relevant; fails or stalls as told. Counts the documents it saw.
#[derive(Debug, Default)]
struct Stars {
    fail: bool,
    stall: bool,
    /// Answers one score too few.
    short: bool,
    seen: AtomicUsize,
}

#[async_trait]
impl Reranker for Stars {
    fn model(&self) -> &'static str {
        "stars"
    }

    async fn score(
        &self,
        _query: &str,
        documents: &[&str],
        deadline: Deadline,
    ) -> Result<Vec<f32>> {
        self.seen.fetch_add(documents.len(), Ordering::Relaxed);
        if self.fail {
            return Err(Error::Unavailable("the scripted reranker is down".into()));
        }
        if self.stall {
            tokio::time::sleep(deadline.remaining()).await;
            return Err(Error::Timeout(hippocamp_core::Stage::Model));
        }
        let mut scores: Vec<f32> = documents
            .iter()
            .map(|d| d.chars().filter(|c| *c == '*').count() as f32)
            .collect();
        if self.short {
            scores.pop();
        }
        Ok(scores)
    }
}

fn scope() -> MemoryScope {
    MemoryScope::parse("app", "u").unwrap()
}

/// Five entries that all match "otter"; BM25 prefers the ones that say it
/// most, the scripted reranker the ones with most stars.
async fn store(reranker: Arc<Stars>, weight: f32, candidates: u64) -> Reranked<InMemoryStore> {
    let inner = InMemoryStore::new(MemoryConfig::default()).unwrap();
    for text in [
        "otter otter otter otter",
        "otter otter otter *",
        "otter otter **",
        "otter and a river ***",
        "an otter by the sea, far from here, on a long walk ****",
    ] {
        inner
            .add_entry(&scope(), NewEntry::new(text), &WriteOptions::default())
            .await
            .unwrap();
    }
    let limits = RerankLimits {
        candidates,
        timeout_ms: 200,
        ..RerankLimits::default()
    };
    let stage = RerankStage {
        reranker,
        limits,
        weight,
    };
    Reranked::new(inner, stage).unwrap()
}

fn contents(r: &hippocamp_memory::SearchResults) -> Vec<usize> {
    r.hits
        .iter()
        .map(|h| h.entry.content.chars().filter(|c| *c == '*').count())
        .collect()
}

#[tokio::test]
async fn the_reranker_orders_the_candidates_and_the_rest_stay_below() {
    let stars = Arc::new(Stars::default());
    let s = store(Arc::clone(&stars), 1.0, 3).await;
    let plain = hippocamp_memory::MemoryLayer::inner(&s)
        .search(
            &scope(),
            &SearchRequest::new("otter"),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let first = contents(&plain);
    assert_eq!(first.len(), 5);
    let r = s
        .search(
            &scope(),
            &SearchRequest::new("otter"),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let mut top: Vec<usize> = first[..3].to_vec();
    top.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(contents(&r)[..3], top[..], "the best three by stars");
    assert_eq!(contents(&r)[3..], first[3..], "the rest in their order");
    assert!(
        r.hits.windows(2).all(|w| w[0].score >= w[1].score),
        "scores descend"
    );
    assert_eq!(
        stars.seen.load(Ordering::Relaxed),
        3,
        "only the candidates are scored"
    );
}

#[tokio::test]
async fn a_small_limit_is_widened_to_the_candidates_then_cut() {
    let s = store(Arc::new(Stars::default()), 1.0, 5).await;
    let r = s
        .search(
            &scope(),
            &SearchRequest::new("otter").limit(1),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        contents(&r),
        vec![4],
        "the most starred, ranked last by BM25"
    );
    // At weight 0 the first stage's order is kept.
    let s = store(Arc::new(Stars::default()), 0.0, 5).await;
    let r = s
        .search(
            &scope(),
            &SearchRequest::new("otter").limit(1),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(contents(&r), vec![0]);
}

#[tokio::test]
async fn a_failing_late_or_miscounting_reranker_keeps_the_first_stage_and_says_so() {
    for stars in [
        Stars {
            fail: true,
            ..Stars::default()
        },
        Stars {
            stall: true,
            ..Stars::default()
        },
        Stars {
            short: true,
            ..Stars::default()
        },
    ] {
        let s = store(Arc::new(stars), 1.0, 5).await;
        let started = std::time::Instant::now();
        let r = s
            .search(
                &scope(),
                &SearchRequest::new("otter").explained(),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "bounded by rerank.timeout_ms"
        );
        let plain = hippocamp_memory::MemoryLayer::inner(&s)
            .search(
                &scope(),
                &SearchRequest::new("otter"),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(contents(&r), contents(&plain));
        let stage = r.hits[0]
            .explanation
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.stage == "rerank")
            .unwrap();
        assert!(stage.score.is_none());
        assert!(
            stage.detail.as_ref().unwrap().contains("skipped"),
            "{stage:?}"
        );
    }
}

#[tokio::test]
async fn explain_lists_the_rerank_score_and_capabilities_report_the_stage() {
    let s = store(Arc::new(Stars::default()), 0.5, 20).await;
    let r = s
        .search(
            &scope(),
            &SearchRequest::new("otter").explained(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    for hit in &r.hits {
        let stages: Vec<&str> = hit
            .explanation
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.stage.as_str())
            .collect();
        assert_eq!(stages.first(), Some(&"bm25"));
        assert_eq!(stages.last(), Some(&"rerank"));
    }
    let c = s.capabilities();
    let info = c.search.rerank.unwrap();
    assert_eq!(
        (info.model.as_str(), info.candidates, info.weight),
        ("stars", 20, 0.5)
    );
    for name in [
        "rerank.candidates",
        "rerank.timeout_ms",
        "rerank.max_document_bytes",
    ] {
        assert!(c.limits.iter().any(|l| l.name == name), "{name}");
    }
}

#[tokio::test]
async fn bad_limits_and_weights_are_refused() {
    let s = store(Arc::new(Stars::default()), 1.0, 5).await;
    for limit in [0, 51] {
        let e = s
            .search(
                &scope(),
                &SearchRequest::new("otter").limit(limit),
                &CallOptions::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), "invalid_argument", "{limit}");
    }
    let inner = || InMemoryStore::new(MemoryConfig::default()).unwrap();
    let stage = |weight, candidates| RerankStage {
        reranker: Arc::new(Stars::default()),
        limits: RerankLimits {
            candidates,
            ..RerankLimits::default()
        },
        weight,
    };
    assert!(Reranked::new(inner(), stage(1.5, 5)).is_err());
    assert!(Reranked::new(inner(), stage(f32::NAN, 5)).is_err());
    assert!(Reranked::new(inner(), stage(0.5, 0)).is_err());
}
