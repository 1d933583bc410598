//! `bench rerank`: the reranking stage's latency for one search, that is
//! one call scoring a query against its candidates (LoCoMo questions
//! against LoCoMo turns, cut to `rerank.max_document_bytes` as the stage
//! cuts them), after a few warm-up calls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hippocamp_core::Deadline;
use hippocamp_embed::head;
use hippocamp_embed::rerank::{RerankLimits, Reranker};
use serde::Serialize;

use crate::{BenchError, Result, failed};

/// Latency of the stage, milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct RerankBench {
    /// The scoring model.
    pub model: String,
    /// Documents per call.
    pub candidates: usize,
    /// Calls measured.
    pub samples: usize,
    /// Mean bytes of a document sent.
    pub mean_document_bytes: usize,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

/// Times `samples` calls of `candidates` documents each.
pub async fn rerank(
    reranker: Arc<dyn Reranker>,
    candidates: usize,
    samples: usize,
) -> Result<RerankBench> {
    let dir = hippocamp_datasets::data_dir().ok_or(BenchError::NoData)?;
    let texts = hippocamp_datasets::corpus::texts(&dir, 2_000)?;
    let queries = hippocamp_datasets::corpus::queries(&dir)?;
    if queries.is_empty() || texts.len() < candidates || candidates == 0 {
        return Err(failed("too few LoCoMo texts or questions"));
    }
    let max = usize::try_from(RerankLimits::default().max_document_bytes).unwrap_or(usize::MAX);
    let call = |i: usize| {
        let start = (i * candidates) % (texts.len() - candidates + 1);
        let docs: Vec<&str> = texts[start..start + candidates]
            .iter()
            .map(|t| head(t, max))
            .collect();
        (queries[i % queries.len()].clone(), docs)
    };
    let mut bytes = 0usize;
    let mut ms = Vec::with_capacity(samples);
    for i in 0..samples + 3 {
        let (q, docs) = call(i);
        let started = Instant::now();
        reranker
            .score(&q, &docs, Deadline::after(Duration::from_mins(1)))
            .await?;
        if i >= 3 {
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            bytes += docs.iter().map(|d| d.len()).sum::<usize>();
        }
    }
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| crate::percentile(&ms, p);
    Ok(RerankBench {
        model: reranker.model().to_owned(),
        candidates,
        samples,
        mean_document_bytes: bytes / (samples * candidates).max(1),
        p50_ms: at(50.0),
        p95_ms: at(95.0),
        p99_ms: at(99.0),
    })
}
