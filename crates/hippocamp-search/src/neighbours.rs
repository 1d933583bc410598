//! Session cohesion: a turn is often answered, or explained, by the turn
//! next to it ("What did you adopt?" / "A cat named Miso"), so a turn
//! whose neighbour matches the query well is likely what the query is
//! after even when its own words do not match.
//!
//! [`cohesion`] takes the best `depth` lexical candidates and adds to each
//! candidate `weight` times the best score among its neighbours (the
//! previous and the next turn of its session) found there; a neighbour
//! that did not match at all becomes a candidate through that support
//! alone. The weight is fixed a priori at one half, not fitted: a turn
//! counts at most half as much for its neighbour as for itself. Measured
//! on LoCoMo with `hippocamp eval compare` (docs/PERFORMANCE.md).

use std::hash::Hash;

use serde::{Deserialize, Serialize};

use crate::rank::Candidate;

/// Parameters of the cohesion stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NeighbourParams {
    /// Whether lexical search adds neighbour support (default on).
    pub enabled: bool,
    /// What a neighbour's score counts for, 0 ..= 1 (default 0.5).
    pub weight: f32,
    /// Lexical candidates whose neighbours are supported, 1 ..= 1,000
    /// (default 50; at least the search's limit).
    pub depth: usize,
}

impl Default for NeighbourParams {
    fn default() -> Self {
        Self {
            enabled: true,
            weight: 0.5,
            depth: 50,
        }
    }
}

impl NeighbourParams {
    /// The name of the first parameter out of range.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(0.0..=1.0).contains(&self.weight) {
            return Err("weight");
        }
        if !(1..=1_000).contains(&self.depth) {
            return Err("depth");
        }
        Ok(())
    }
}

/// A candidate's score split into its own and its neighbours' support.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Supported<K> {
    /// The key, the combined score and the recency.
    pub candidate: Candidate<K>,
    /// Its own score (0 when it was not among the candidates).
    pub own: f32,
    /// The best score among its neighbours in the candidates.
    pub neighbour: f32,
}

/// `head` (the best lexical candidates, any order) with neighbour
/// support: each candidate and each neighbour of one scores
/// `(own + weight × best neighbour score) × boost(key)`. `neighbours(key)`
/// gives a key's previous and next turn with their recency; `boost` is a
/// later stage's factor (the time stage's, 1 when it has nothing to say). Returned with the best `first` in order
/// at the front (the rest after them, unordered: a search usually stops
/// within its limit), and the keys, sorted, to tell which are in it.
pub fn cohesion<K, F, B>(
    head: &[Candidate<K>],
    weight: f32,
    first: usize,
    neighbours: F,
    boost: B,
) -> (Vec<Supported<K>>, Vec<K>)
where
    K: Copy + Eq + Hash + Ord,
    F: Fn(&K) -> [Option<(K, i64)>; 2],
    B: Fn(&K) -> f32,
{
    // (key, own, support, recency) for every candidate and neighbour,
    // sorted by key and merged: cheaper than a hash map at these sizes.
    let mut parts: Vec<(K, f32, f32, i64)> = Vec::with_capacity(head.len() * 3);
    for c in head {
        parts.push((c.key, c.score, 0.0, c.recency));
        for (k, recency) in neighbours(&c.key).into_iter().flatten() {
            parts.push((k, 0.0, c.score, recency));
        }
    }
    parts.sort_unstable_by_key(|p| p.0);
    let mut out: Vec<Supported<K>> = Vec::with_capacity(parts.len());
    let mut keys: Vec<K> = Vec::with_capacity(parts.len());
    let mut merged: Option<(K, f32, f32, i64)> = None;
    let mut emit = |(key, own, neighbour, recency): (K, f32, f32, i64)| {
        keys.push(key);
        out.push(Supported {
            candidate: Candidate {
                key,
                score: (own + weight * neighbour) * boost(&key),
                recency,
            },
            own,
            neighbour,
        });
    };
    for p in parts {
        merged = match merged {
            Some(m) if m.0 == p.0 => Some((m.0, m.1.max(p.1), m.2.max(p.2), m.3)),
            Some(m) => {
                emit(m);
                Some(p)
            }
            None => Some(p),
        };
    }
    if let Some(m) = merged {
        emit(m);
    }
    let by_rank = |a: &Supported<K>, b: &Supported<K>| b.candidate.cmp(&a.candidate);
    let first = first.min(out.len());
    if first > 0 && first < out.len() {
        out.select_nth_unstable_by(first - 1, by_rank);
    }
    out[..first].sort_unstable_by(by_rank);
    (out, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(key: u32, score: f32) -> Candidate<u32> {
        Candidate {
            key,
            score,
            recency: i64::from(key),
        }
    }

    /// Turns 1..=5 of one session: each one's neighbours are the turns
    /// before and after.
    #[allow(clippy::trivially_copy_pass_by_ref)] // the signature `cohesion` takes
    fn line(k: &u32) -> [Option<(u32, i64)>; 2] {
        let at = |k: u32| (1..=5).contains(&k).then_some((k, i64::from(k)));
        [at(k.wrapping_sub(1)), at(k + 1)]
    }

    #[test]
    fn a_neighbour_of_a_strong_match_rises_and_an_unmatched_one_enters() {
        let one = |_: &u32| 1.0;
        let (out, keys) = cohesion(&[c(2, 4.0), c(4, 1.0)], 0.5, 10, line, one);
        assert_eq!(keys, [1, 2, 3, 4, 5]);
        let order: Vec<(u32, f32)> = out
            .iter()
            .map(|s| (s.candidate.key, s.candidate.score))
            .collect();
        // 2: 4 + 0 (its neighbours 1 and 3 did not match); 3: 0 + max(4, 1)
        // / 2 = 2; 1: 4 / 2; 4: 1 + 0; 5: 1 / 2.
        assert_eq!(order, [(2, 4.0), (3, 2.0), (1, 2.0), (4, 1.0), (5, 0.5)]);
        assert_eq!((out[1].own, out[1].neighbour), (0.0, 4.0));
        // Weight 0: the lexical order, and neighbours at 0 after it.
        let (plain, _) = cohesion(&[c(2, 4.0), c(4, 1.0)], 0.0, 10, line, one);
        // Only the best one in order: it is first.
        let (top, _) = cohesion(&[c(2, 4.0), c(4, 1.0)], 0.5, 1, line, one);
        assert_eq!(top[0].candidate.key, 2);
        assert_eq!(plain[0].candidate.key, 2);
        assert_eq!(plain[1].candidate.key, 4);
        // A boost multiplies the whole score: 4 x 2 puts 4 first.
        let (boosted, _) = cohesion(&[c(2, 4.0), c(4, 3.0)], 0.5, 10, line, |k: &u32| {
            if *k == 4 { 2.0 } else { 1.0 }
        });
        assert_eq!(boosted[0].candidate.key, 4);
        assert!((boosted[0].candidate.score - 6.0).abs() < 1e-6);
    }
}
