//! Deterministic ranking of scored candidates.
//!
//! Every scoring stage (BM25, vector, fused) produces [`Candidate`]s;
//! [`Ranked`] yields a list of them best first: higher score, then newer
//! (`recency` larger), then smaller key. It is lazy (a heap built in
//! linear time) because callers apply filters and byte budgets while they
//! walk, and usually stop after a few dozen hits. (The index's
//! `Matches` yields BM25 matches in the same order without building a
//! candidate for each.)

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A scored document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate<K> {
    /// The document key.
    pub key: K,
    /// Its score; larger is better.
    pub score: f32,
    /// Tie-breaker: larger (newer) ranks first.
    pub recency: i64,
}

impl<K: Ord> Eq for Candidate<K> {}

impl<K: Ord> PartialOrd for Candidate<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> Ord for Candidate<K> {
    /// "Greater" means "ranks earlier".
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(self.recency.cmp(&other.recency))
            .then_with(|| other.key.cmp(&self.key))
    }
}

/// The best `n` of `candidates`, in rank order: a partition around the
/// n-th and a sort of those, cheaper than a heap when most are wanted.
pub fn best<K: Ord>(mut candidates: Vec<Candidate<K>>, n: usize) -> Vec<Candidate<K>> {
    let n = best_first(&mut candidates, n);
    candidates.truncate(n);
    candidates
}

/// Moves the best `n` of `candidates` to its front, in rank order (the
/// rest follow, unordered); returns how many that is (`n`, or fewer when
/// there are fewer candidates).
pub fn best_first<K: Ord>(candidates: &mut [Candidate<K>], n: usize) -> usize {
    let n = best_set(candidates, n);
    candidates[..n].sort_unstable_by(|a, b| b.cmp(a));
    n
}

/// Moves the best `n` of `candidates` to its front in no particular order
/// (the set is exact: the order is total); returns how many that is.
/// For callers that only need the set, [`best_first`] without its sort.
pub fn best_set<K: Ord>(candidates: &mut [Candidate<K>], n: usize) -> usize {
    let n = n.min(candidates.len());
    if n > 0 && candidates.len() > n {
        candidates.select_nth_unstable_by(n - 1, |a, b| b.cmp(a));
    }
    n
}

/// Candidates in rank order, produced lazily.
#[derive(Debug)]
pub struct Ranked<K> {
    heap: BinaryHeap<Candidate<K>>,
}

impl<K: Ord> Ranked<K> {
    /// Ranks `candidates`.
    pub fn new(candidates: Vec<Candidate<K>>) -> Self {
        Self {
            heap: BinaryHeap::from(candidates),
        }
    }

    /// Candidates not yet yielded.
    pub fn remaining(&self) -> usize {
        self.heap.len()
    }
}

impl<K: Ord> Iterator for Ranked<K> {
    type Item = Candidate<K>;
    fn next(&mut self) -> Option<Candidate<K>> {
        self.heap.pop()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.heap.len(), Some(self.heap.len()))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn order_is_score_then_recency_then_key() {
        let c = |key, score, recency| Candidate {
            key,
            score,
            recency,
        };
        let ranked: Vec<u32> =
            Ranked::new(vec![c(3, 1.0, 5), c(1, 2.0, 0), c(2, 1.0, 5), c(4, 1.0, 9)])
                .map(|c| c.key)
                .collect();
        assert_eq!(ranked, vec![1, 4, 2, 3]);
    }

    proptest! {
        #[test]
        fn lazy_heap_equals_full_sort(items in proptest::collection::vec((0u32..50, 0u8..4, 0i64..3), 0..200)) {
            let mut seen = std::collections::HashSet::new();
            let cands: Vec<Candidate<u32>> = items
                .into_iter()
                .filter(|(k, _, _)| seen.insert(*k))
                .map(|(key, s, recency)| Candidate { key, score: f32::from(s), recency })
                .collect();
            let mut sorted = cands.clone();
            sorted.sort_by(|a, b| b.cmp(a));
            let lazy: Vec<_> = Ranked::new(cands).collect();
            prop_assert_eq!(lazy, sorted);
        }
    }
}
