//! What a search adds to its hits after choosing them: explanations
//! (`explain: true`) and the turns around each hit (`context`).

use std::sync::Arc;

use hippocamp_core::EntryId;
use hippocamp_search::{Bm25Params, FusionMethod, FusionParams};

use super::ScopeData;
use crate::search::PreparedSearch;
use crate::store::{Contribution, ScoreDetails, ScoreType, SearchResults};

impl ScopeData {
    /// Fills each hit's explanation when the search asked for it, after
    /// the hits are chosen (nothing is computed otherwise): BM25 with each
    /// query term's share, the vector score, and for a hybrid hit the
    /// fusion that combined them.
    pub(super) fn explain(
        &self,
        out: &mut SearchResults,
        q: &PreparedSearch,
        params: Bm25Params,
        fusion: Option<&FusionParams>,
    ) {
        if !q.explain {
            return;
        }
        let time_boost = self.time_boost(q);
        for hit in &mut out.hits {
            let bm25 = |score: Option<f64>| Contribution {
                stage: "bm25".into(),
                score,
                terms: if score.is_some() {
                    self.index.explain(&hit.entry.id, &q.terms, params)
                } else {
                    Vec::new()
                },
                detail: Some(format!(
                    "Okapi BM25 over this scope's entries (k1 {}, b {}, k3 {}): the sum of each query term's share",
                    params.k1, params.b, params.k3
                )),
            };
            let vector = |score: Option<f64>| Contribution {
                stage: "vector".into(),
                score,
                terms: Vec::new(),
                detail: Some("cosine similarity of the query's and the entry's embeddings".into()),
            };
            let list = match (hit.score_type, hit.details) {
                (ScoreType::Bm25, _) if q.staged() => {
                    let own = bm25(Some(0.0));
                    let own_score: f64 = own.terms.iter().map(|t| f64::from(t.score)).sum();
                    let factor = f64::from(time_boost(&hit.entry.id));
                    let mut list = vec![Contribution {
                        score: Some(own_score),
                        ..own
                    }];
                    list.extend(stages(q, hit.score, own_score, factor, "BM25"));
                    list
                }
                (ScoreType::Bm25, _) => vec![bm25(Some(hit.score))],
                (ScoreType::Vector, _) => vec![vector(Some(hit.score))],
                (ScoreType::Hybrid, details) => {
                    let d = details.unwrap_or(ScoreDetails {
                        bm25: None,
                        vector: None,
                        fused: hit.score,
                    });
                    let how = match fusion {
                        Some(f) if f.method == FusionMethod::Rrf => format!(
                            "reciprocal-rank fusion, sum of 1 / ({} + rank) over the two lists",
                            f.rrf_k
                        ),
                        Some(f) => format!(
                            "weighted sum of min-max normalised scores over each list's top {}: {} x bm25 + {} x vector (a side that did not find the entry counts 0)",
                            f.depth,
                            1.0 - f.dense_weight,
                            f.dense_weight
                        ),
                        None => "the two lists fused".to_owned(),
                    };
                    let mut list = vec![
                        bm25(d.bm25),
                        vector(d.vector),
                        Contribution {
                            stage: "fusion".into(),
                            score: Some(d.fused),
                            terms: Vec::new(),
                            detail: Some(how),
                        },
                    ];
                    if q.staged() {
                        let factor = f64::from(time_boost(&hit.entry.id));
                        list.extend(stages(q, hit.score, d.fused, factor, "fused"));
                    }
                    list
                }
            };
            hit.explanation = Some(list);
        }
    }

    /// Most entries a hit's context steps over on each side (passed-over
    /// ones included).
    const CONTEXT_WALK: usize = 64;

    /// Gives each hit the turns around it that the search asked for
    /// ([`crate::store::ContextWindow`]): live entries the filter keeps,
    /// nearest first on each side, in the budget left after the hits; an
    /// entry already in the reply is passed over, not repeated.
    pub(super) fn attach_context(
        &self,
        out: &mut SearchResults,
        q: &PreparedSearch,
        mut used: u64,
    ) {
        let mut shown: foldhash::HashSet<EntryId> = out.hits.iter().map(|h| h.entry.id).collect();
        for hit in &mut out.hits {
            let mut context = crate::store::HitContext::default();
            for (side, want) in [(0, q.context.0), (1, q.context.1)] {
                let mut at = self.entries.get(&hit.entry.id).and_then(|s| s.links[side]);
                let mut taken = Vec::new();
                // Bounded: a session of filtered-out or expired turns is
                // not walked to its end for each hit.
                let mut steps = 0;
                while taken.len() < want && steps < Self::CONTEXT_WALK {
                    steps += 1;
                    let Some(stored) = at.and_then(|(_, id)| self.entries.get(&id)) else {
                        break;
                    };
                    at = stored.links[side];
                    let e = &stored.entry;
                    if e.obligations.expired(q.now_ms)
                        || !q.filter.matches(&e.metadata)
                        || !shown.insert(e.id)
                    {
                        continue;
                    }
                    if used + stored.hit_bytes > q.max_bytes {
                        out.skipped_over_budget = true;
                        break;
                    }
                    used += stored.hit_bytes;
                    taken.push(Arc::clone(e));
                }
                if side == 0 {
                    taken.reverse();
                    context.before = taken;
                } else {
                    context.after = taken;
                }
            }
            hit.context = Some(context);
        }
    }
}

/// The later stages' part in a score of `own` that became `score`: the
/// time stage multiplied it by `factor`, and what is left of it before
/// that over `own` is the neighbours' support (float noise below a
/// millionth is none). `what` names the score the stages started from.
fn stages(q: &PreparedSearch, score: f64, own: f64, factor: f64, what: &str) -> Vec<Contribution> {
    let before_time = score / factor;
    let support = before_time - own;
    let support = if support > 1e-6 { support } else { 0.0 };
    let mut list = vec![Contribution {
        stage: "neighbours".into(),
        score: Some(support),
        terms: Vec::new(),
        detail: Some(format!(
            "{} x the best {what} score of the turn before or after it in its session, among the top {} candidates",
            q.neighbours.weight, q.neighbours.depth
        )),
    }];
    if factor > 1.0 {
        list.push(Contribution {
            stage: "time".into(),
            score: Some(score - before_time),
            terms: Vec::new(),
            detail: Some(format!(
                "the score above times {factor}: 1 + {} for a turn that states a time when the question asks when, and again for a turn said within the time the question names",
                q.time_params.weight
            )),
        });
    }
    list
}
