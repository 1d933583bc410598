//! Fusing a lexical and a dense candidate list into one ranking.
//!
//! Two methods: a weighted sum of min-max-normalised scores over each
//! list's top `depth` (the default: measured better than rank fusion on
//! LoCoMo, see `docs/PERFORMANCE.md`), and reciprocal-rank fusion. A
//! document missing from one list scores 0 there. Every fused candidate
//! keeps its raw scores for the hit's score details.

use foldhash::{HashMap, HashMapExt as _};
use std::hash::Hash;

use serde::{Deserialize, Serialize};

use crate::rank::Candidate;

/// How lists are fused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FusionMethod {
    /// `(1 - w) * bm25_norm + w * dense_norm`, each min-max-normalised.
    Weighted,
    /// `sum 1 / (k + rank)`.
    Rrf,
}

/// Fusion parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FusionParams {
    /// The method.
    pub method: FusionMethod,
    /// Weight of the dense list in `weighted` (0 ..= 1).
    pub dense_weight: f32,
    /// Candidates taken from each list (1 ..= 1,000).
    pub depth: usize,
    /// `k` of reciprocal-rank fusion (1 ..= 1,000).
    pub rrf_k: f32,
}

impl Default for FusionParams {
    fn default() -> Self {
        Self {
            method: FusionMethod::Weighted,
            dense_weight: 0.4,
            depth: 100,
            rrf_k: 60.0,
        }
    }
}

impl FusionParams {
    /// The name of the first parameter out of range.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(0.0..=1.0).contains(&self.dense_weight) {
            return Err("dense_weight");
        }
        if !(1..=1_000).contains(&self.depth) {
            return Err("depth");
        }
        if !(1.0..=1_000.0).contains(&self.rrf_k) {
            return Err("rrf_k");
        }
        Ok(())
    }
}

/// A fused candidate and the scores it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused<K> {
    /// Key, fused score and recency.
    pub candidate: Candidate<K>,
    /// Its BM25 score, if the lexical list held it.
    pub bm25: Option<f32>,
    /// Its dot product, if the dense list held it.
    pub vector: Option<f32>,
}

fn top<K: Ord + Copy>(list: Vec<Candidate<K>>, depth: usize) -> Vec<Candidate<K>> {
    // Both arms usually arrive ranked already (a search's best `depth`):
    // a check in one pass instead of a second sort.
    if list.len() <= depth && list.is_sorted_by(|a, b| a >= b) {
        return list;
    }
    crate::rank::best(list, depth)
}

fn min_max<K>(list: &[Candidate<K>]) -> impl Fn(f32) -> f32 + use<K> {
    let (lo, hi) = list
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(c.score), hi.max(c.score))
        });
    move |s| {
        if hi > lo { (s - lo) / (hi - lo) } else { 1.0 }
    }
}

/// Fuses `lexical` and `dense` (each in any order); the result is unordered
/// (rank it with [`Ranked`](crate::Ranked)).
pub fn fuse<K: Copy + Eq + Hash + Ord>(
    lexical: Vec<Candidate<K>>,
    dense: Vec<Candidate<K>>,
    p: &FusionParams,
) -> Vec<Fused<K>> {
    let lexical = top(lexical, p.depth);
    let dense = top(dense, p.depth);
    let mut out: HashMap<K, Fused<K>> = HashMap::with_capacity(lexical.len() + dense.len());
    let mut add = |c: &Candidate<K>, lexical_side: bool, contribution: f32| {
        let f = out.entry(c.key).or_insert(Fused {
            candidate: Candidate {
                key: c.key,
                score: 0.0,
                recency: c.recency,
            },
            bm25: None,
            vector: None,
        });
        f.candidate.score += contribution;
        if lexical_side {
            f.bm25 = Some(c.score);
        } else {
            f.vector = Some(c.score);
        }
    };
    match p.method {
        FusionMethod::Weighted => {
            let (nl, nd) = (min_max(&lexical), min_max(&dense));
            for c in &lexical {
                add(c, true, (1.0 - p.dense_weight) * nl(c.score));
            }
            for c in &dense {
                add(c, false, p.dense_weight * nd(c.score));
            }
        }
        FusionMethod::Rrf => {
            for (rank, c) in lexical.iter().enumerate() {
                add(c, true, 1.0 / (p.rrf_k + rank as f32 + 1.0));
            }
            for (rank, c) in dense.iter().enumerate() {
                add(c, false, 1.0 / (p.rrf_k + rank as f32 + 1.0));
            }
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::Ranked;

    fn c(key: u32, score: f32) -> Candidate<u32> {
        Candidate {
            key,
            score,
            recency: 0,
        }
    }

    fn ranked(f: Vec<Fused<u32>>) -> Vec<u32> {
        Ranked::new(f.into_iter().map(|f| f.candidate).collect())
            .map(|c| c.key)
            .collect()
    }

    #[test]
    fn weighted_fusion_blends_normalised_scores() {
        let lex = vec![c(1, 10.0), c(2, 5.0), c(3, 0.0)];
        let dense = vec![c(3, 0.9), c(2, 0.8), c(4, 0.1)];
        let p = FusionParams::default();
        let f = fuse(lex.clone(), dense.clone(), &p);
        // 1: .6; 2: .3 + .4 * .875; 3: 0 + .4; 4: 0.
        assert_eq!(ranked(f.clone()), vec![2, 1, 3, 4]);
        let two = f.iter().find(|x| x.candidate.key == 2).unwrap();
        assert_eq!((two.bm25, two.vector), (Some(5.0), Some(0.8)));
        let only_dense = fuse(
            lex.clone(),
            dense.clone(),
            &FusionParams {
                dense_weight: 1.0,
                ..p
            },
        );
        assert_eq!(ranked(only_dense)[..2], [3, 2]);
        let only_lex = fuse(
            lex,
            dense,
            &FusionParams {
                dense_weight: 0.0,
                ..p
            },
        );
        assert_eq!(ranked(only_lex)[..2], [1, 2]);
    }

    #[test]
    fn rank_fusion_rewards_agreement() {
        let lex = vec![c(1, 3.0), c(2, 2.0)];
        let dense = vec![c(2, 0.9), c(3, 0.8)];
        let f = fuse(
            lex,
            dense,
            &FusionParams {
                method: FusionMethod::Rrf,
                ..FusionParams::default()
            },
        );
        assert_eq!(ranked(f)[0], 2);
        assert!(
            FusionParams {
                depth: 0,
                ..FusionParams::default()
            }
            .validate()
            .is_err()
        );
    }
}
