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
    /// The fused score itself, before any later stage changed
    /// `candidate.score` (session cohesion, time); equal to it as [`fuse`]
    /// returns it.
    pub own: f32,
}

/// The best `depth` of an arm: in rank order when `ranked` (rank fusion
/// reads positions), else in any order (weighted fusion reads only
/// scores, so no sort).
fn top<K: Ord + Copy>(
    mut list: Vec<Candidate<K>>,
    depth: usize,
    ranked: bool,
) -> Vec<Candidate<K>> {
    if !ranked {
        let n = crate::rank::best_set(&mut list, depth);
        list.truncate(n);
        return list;
    }
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
    let ranked = p.method == FusionMethod::Rrf;
    let lexical = top(lexical, p.depth, ranked);
    let dense = top(dense, p.depth, ranked);
    // The fused list, with where each key sits in it (a key met twice,
    // in both arms or twice in one, adds up in one place).
    let mut out: Vec<Fused<K>> = Vec::with_capacity(lexical.len() + dense.len());
    let mut at: HashMap<K, usize> = HashMap::with_capacity(lexical.len() + dense.len());
    let (lexical_part, dense_part) = match p.method {
        FusionMethod::Weighted => (
            Contribution::Weighted(min_max(&lexical), 1.0 - p.dense_weight),
            Contribution::Weighted(min_max(&dense), p.dense_weight),
        ),
        FusionMethod::Rrf => (Contribution::Rank(p.rrf_k), Contribution::Rank(p.rrf_k)),
    };
    for (arm, part, lexical_side) in [
        (&lexical, &lexical_part, true),
        (&dense, &dense_part, false),
    ] {
        for (rank, c) in arm.iter().enumerate() {
            let i = *at.entry(c.key).or_insert_with(|| {
                out.push(Fused {
                    candidate: Candidate {
                        key: c.key,
                        score: 0.0,
                        recency: c.recency,
                    },
                    bm25: None,
                    vector: None,
                    own: 0.0,
                });
                out.len() - 1
            });
            let f = &mut out[i];
            f.candidate.score += part.of(rank, c.score);
            f.own = f.candidate.score;
            if lexical_side {
                f.bm25 = Some(c.score);
            } else {
                f.vector = Some(c.score);
            }
        }
    }
    out
}

/// What one arm's candidate adds to its fused score.
enum Contribution<N> {
    /// Its min-max normalised score (`N`), times the arm's weight.
    Weighted(N, f32),
    /// `1 / (k + rank)`, rank counted from 1.
    Rank(f32),
}

impl<N: Fn(f32) -> f32> Contribution<N> {
    fn of(&self, rank: usize, score: f32) -> f32 {
        match self {
            Contribution::Weighted(normalise, weight) => weight * normalise(score),
            Contribution::Rank(k) => 1.0 / (k + rank as f32 + 1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::rank::Ranked;

    /// Fusion as first written: each arm ranked whole and cut at `depth`,
    /// scores added up per key in a map.
    fn plain(
        lexical: &[Candidate<u32>],
        dense: &[Candidate<u32>],
        p: &FusionParams,
    ) -> std::collections::BTreeMap<u32, (f32, Option<f32>, Option<f32>)> {
        let cut = |l: &[Candidate<u32>]| -> Vec<Candidate<u32>> {
            Ranked::new(l.to_vec()).take(p.depth).collect()
        };
        let (lexical, dense) = (cut(lexical), cut(dense));
        let mut out = std::collections::BTreeMap::new();
        for (arm, list) in [(0, &lexical), (1, &dense)] {
            let norm = min_max(list);
            for (rank, c) in list.iter().enumerate() {
                let add = match p.method {
                    FusionMethod::Weighted if arm == 0 => (1.0 - p.dense_weight) * norm(c.score),
                    FusionMethod::Weighted => p.dense_weight * norm(c.score),
                    FusionMethod::Rrf => 1.0 / (p.rrf_k + rank as f32 + 1.0),
                };
                let e = out.entry(c.key).or_insert((0.0, None, None));
                e.0 += add;
                if arm == 0 {
                    e.1 = Some(c.score);
                } else {
                    e.2 = Some(c.score);
                }
            }
        }
        out
    }

    fn arm() -> impl Strategy<Value = Vec<Candidate<u32>>> {
        proptest::collection::btree_map(0u32..40, (-4i32..40, 0i64..3), 0..25).prop_map(|m| {
            m.into_iter()
                .map(|(key, (score, recency))| Candidate {
                    key,
                    score: score as f32 / 4.0,
                    recency,
                })
                .collect()
        })
    }

    proptest! {
        /// Whatever the arms' order, the fused scores and details are
        /// those of the plain fusion, for both methods.
        #[test]
        fn fusion_equals_the_plain_one(
            mut lexical in arm(),
            mut dense in arm(),
            depth in 1usize..30,
            rrf in any::<bool>(),
            shuffle in any::<usize>(),
        ) {
            let p = FusionParams {
                depth,
                method: if rrf { FusionMethod::Rrf } else { FusionMethod::Weighted },
                ..FusionParams::default()
            };
            // Some order other than rank order.
            let n = lexical.len().max(1);
            lexical.rotate_left(shuffle % n);
            dense.reverse();
            let want = plain(&lexical, &dense, &p);
            let got: std::collections::BTreeMap<u32, (f32, Option<f32>, Option<f32>)> =
                fuse(lexical, dense, &p)
                    .into_iter()
                    .map(|f| (f.candidate.key, (f.candidate.score, f.bm25, f.vector)))
                    .collect();
            prop_assert_eq!(got, want);
        }
    }

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
