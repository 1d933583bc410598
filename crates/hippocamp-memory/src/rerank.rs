//! The reranking stage: a layer over any store that reorders a search's
//! best hits by a [`Reranker`]'s relevance scores.
//!
//! It asks the store for at least `rerank.candidates` hits (only the hits
//! asked for when the search asks for `context`), scores the
//! best `candidates` of them against the query within its own deadline
//! (`rerank.timeout_ms`, inside the caller's), and orders them by
//! `(1 - weight) × first stage + weight × reranker`, each min-max scaled
//! over the candidates; the rest keep their order below. A reranked hit's
//! score is that blend mapped back onto the candidates' first-stage range,
//! so scores keep their unit and stay above the hits that were not
//! reranked. A reranker that fails or misses its deadline costs the
//! search nothing but the wait: the first stage's order is returned, and
//! `explain` says the stage was skipped and why.
//!
//! Being a layer, it works alike over every store (in memory, redb,
//! PostgreSQL) and every mode; it sits under the governance gate, which
//! has already admitted the search, and sends only hits of the caller's
//! own scope to the reranker.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Deadline, MemoryScope, Result};
use hippocamp_embed::head;
use hippocamp_embed::rerank::{RerankLimits, Reranker, check_scores};
use serde::{Deserialize, Serialize};

use crate::store::{
    Capabilities, Contribution, MemoryLayer, MemoryStore, SearchHit, SearchRequest, SearchResults,
};

/// The stage's reranker and parameters.
#[derive(Debug, Clone)]
pub struct RerankStage {
    /// What scores the candidates.
    pub reranker: Arc<dyn Reranker>,
    /// Candidates, deadline, bytes per document.
    pub limits: RerankLimits,
    /// The reranker's share of the blended order, 0..=1 (1: its order
    /// alone).
    pub weight: f32,
}

/// The reranking stage in a capability report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RerankInfo {
    /// The scoring model.
    pub model: String,
    /// Best first-stage hits reranked per search.
    pub candidates: u64,
    /// The stage's deadline, milliseconds.
    pub timeout_ms: u64,
    /// Bytes of a hit's content the reranker reads.
    pub max_document_bytes: u64,
    /// The reranker's share of the blended order.
    pub weight: f32,
}

/// A store whose searches are reranked.
#[derive(Debug)]
pub struct Reranked<S> {
    inner: S,
    stage: RerankStage,
    /// The store's `max_results` and default call timeout, read once:
    /// building its capability report on every search was a Vec of every
    /// limit per call.
    max_results: u64,
    call_timeout: Duration,
}

impl<S: MemoryStore> Reranked<S> {
    /// Reranks `inner`'s searches with `stage` (its limits checked, its
    /// weight within 0..=1).
    pub fn new(inner: S, stage: RerankStage) -> Result<Self> {
        stage.limits.validate()?;
        if !(0.0..=1.0).contains(&stage.weight) {
            return Err(hippocamp_core::Error::config(
                "reranker.weight",
                hippocamp_core::Problem::Malformed("weight must be within 0..=1".into()),
            ));
        }
        let caps = inner.capabilities();
        Ok(Self {
            max_results: caps.limit("max_results").unwrap_or(u64::MAX),
            call_timeout: caps.call_timeout(),
            inner,
            stage,
        })
    }

    fn describe(&self) -> RerankInfo {
        RerankInfo {
            model: self.stage.reranker.model().to_owned(),
            candidates: self.stage.limits.candidates,
            timeout_ms: self.stage.limits.timeout_ms,
            max_document_bytes: self.stage.limits.max_document_bytes,
            weight: self.stage.weight,
        }
    }
}

/// `values` scaled to 0..=1 (all 1 when they are equal).
fn min_max(values: &[f64]) -> Vec<f64> {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|v| if hi > lo { (v - lo) / (hi - lo) } else { 1.0 })
        .collect()
}

/// Reorders `hits[..scores.len()]` by the blend and gives each its mapped
/// score.
fn blend(hits: &mut [SearchHit], scores: &[f32], weight: f32, explain: Option<&str>) {
    let n = scores.len();
    let first: Vec<f64> = hits[..n].iter().map(|h| h.score).collect();
    let rerank: Vec<f64> = scores.iter().map(|s| f64::from(*s)).collect();
    let (lo, hi) = first
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
            (lo.min(*s), hi.max(*s))
        });
    // Equal first-stage scores leave no range to map onto: a sliver keeps
    // the reranked order visible in the scores without passing hits above.
    let range = if hi > lo {
        hi - lo
    } else {
        f64::EPSILON * 1024.0 * lo.abs().max(1.0)
    };
    let w = f64::from(weight);
    let blended: Vec<f64> = min_max(&first)
        .iter()
        .zip(min_max(&rerank))
        .map(|(f, r)| (1.0 - w) * f + w * r)
        .collect();
    for (i, hit) in hits[..n].iter_mut().enumerate() {
        hit.score = lo + range * blended[i];
        if let (Some(list), Some(detail)) = (hit.explanation.as_mut(), explain) {
            list.push(Contribution {
                stage: "rerank".to_owned(),
                score: Some(rerank[i]),
                terms: Vec::new(),
                detail: Some(detail.to_owned()),
            });
        }
    }
    // Blend first, then the store's own tie rule: newer, then smaller id.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        blended[b]
            .total_cmp(&blended[a])
            .then(hits[b].entry.timestamp_ms.cmp(&hits[a].entry.timestamp_ms))
            .then(hits[a].entry.id.cmp(&hits[b].entry.id))
    });
    let sorted: Vec<SearchHit> = order.iter().map(|&i| hits[i].clone()).collect();
    for (slot, hit) in hits[..n].iter_mut().zip(sorted) {
        *slot = hit;
    }
}

#[async_trait]
impl<S: MemoryStore> MemoryLayer for Reranked<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn capabilities(&self) -> Capabilities {
        let mut c = self.inner.capabilities();
        c.search.rerank = Some(self.describe());
        c.limits.extend(self.stage.limits.describe());
        c
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        // One clock for the whole search: the store's part and the
        // reranker's share the caller's deadline.
        let deadline = opts.deadline(self.call_timeout);
        let opts = CallOptions::until(deadline).on_behalf_of(opts.caller());
        let max = self.max_results;
        let wanted = request.limit.unwrap_or(max);
        let candidates = self.stage.limits.candidates;
        // A limit the store would refuse goes to it unchanged, so the
        // caller gets the store's own error. With `context` the limit is
        // kept: the store picks each hit's context against the whole hit
        // list (an entry is in a reply once), so hits cut after reranking
        // would leave holes in their neighbours' context.
        let mut widened = request.clone();
        if (1..=max).contains(&wanted) && request.context.is_none() {
            widened.limit = Some(wanted.max(candidates).min(max));
        }
        let mut results = self.inner.search(scope, &widened, &opts).await?;
        let n = results
            .hits
            .len()
            .min(usize::try_from(candidates).unwrap_or(usize::MAX));
        if n > 1 {
            let per_doc =
                usize::try_from(self.stage.limits.max_document_bytes).unwrap_or(usize::MAX);
            let docs: Vec<&str> = results.hits[..n]
                .iter()
                .map(|h| head(&h.entry.content, per_doc))
                .collect();
            let own = Deadline::after(Duration::from_millis(self.stage.limits.timeout_ms));
            let deadline = if deadline.remaining() < own.remaining() {
                deadline
            } else {
                own
            };
            // Checked here too: the layer takes any reranker, and one
            // that answers the wrong count must not reorder anything.
            let scored = self
                .stage
                .reranker
                .score(&request.query, &docs, deadline)
                .await
                .and_then(|s| check_scores("the reranker", n, &s).map(|()| s));
            let explain = request.explain.then(|| {
                format!(
                    "{} over the best {n}: (1 - {w}) x first stage + {w} x reranker, each min-max scaled over them",
                    self.stage.reranker.model(),
                    w = self.stage.weight
                )
            });
            match scored {
                Ok(scores) => blend(
                    &mut results.hits,
                    &scores,
                    self.stage.weight,
                    explain.as_deref(),
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "the reranker failed; the first stage's order is kept");
                    if request.explain {
                        for hit in &mut results.hits[..n] {
                            if let Some(list) = hit.explanation.as_mut() {
                                list.push(Contribution {
                                    stage: "rerank".to_owned(),
                                    score: None,
                                    terms: Vec::new(),
                                    detail: Some(format!(
                                        "skipped ({e}); the first stage's order is kept"
                                    )),
                                });
                            }
                        }
                    }
                }
            }
        }
        results
            .hits
            .truncate(usize::try_from(wanted).unwrap_or(usize::MAX));
        Ok(results)
    }
}
