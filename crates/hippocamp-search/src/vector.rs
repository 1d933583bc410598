//! Exact vector search over one scope's unit vectors.
//!
//! Vectors sit in one contiguous array (a row per document), so a search is
//! a linear scan of dot products: about 0.08 ms for 1k × 384 and 16 ms for
//! 100k × 384 on this project's machine. An approximate index only pays
//! off beyond ~100k vectors per scope, which no scope holds by default, so
//! there is none.

use foldhash::{HashMap, HashMapExt as _};
use std::hash::Hash;

use crate::rank::Candidate;

/// The dot product, on the widest vectors the CPU has (see [`dots`]).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let mut out = 0.0;
    dots(&a[..n], &b[..n], |_, score| out = score);
    out
}

/// The dot product of `query` with each `query.len()`-wide row of `rows`:
/// `f(row number, score)`. One run-time dispatch (`pulp`) picks the widest
/// instructions this CPU has (AVX2 and FMA on x86-64, or the baseline),
/// with four independent sums so the adds are not one dependency chain:
/// the baseline build's loop was a fixed 4-lane chain and a third of a
/// hybrid search.
pub fn dots(rows: &[f32], query: &[f32], f: impl FnMut(usize, f32)) {
    if query.is_empty() {
        return;
    }
    pulp::Arch::new().dispatch(Dots { rows, query, f });
}

struct Dots<'a, F> {
    rows: &'a [f32],
    query: &'a [f32],
    f: F,
}

impl<F: FnMut(usize, f32)> pulp::WithSimd for Dots<'_, F> {
    type Output = ();

    // Must be inlined into pulp's dispatched function to be compiled for
    // its instruction set (not inlined, it ran the baseline's SSE code).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Dots { rows, query, mut f } = self;
        let (q_head, q_tail) = S::as_simd_f32s(query);
        for (i, row) in rows.chunks_exact(query.len()).enumerate() {
            let (r_head, r_tail) = S::as_simd_f32s(row);
            let zero = simd.splat_f32s(0.0);
            let mut acc = [zero; 4];
            let mut r4 = r_head.chunks_exact(4);
            let mut q4 = q_head.chunks_exact(4);
            for (r, q) in (&mut r4).zip(&mut q4) {
                for k in 0..4 {
                    acc[k] = simd.mul_add_e_f32s(r[k], q[k], acc[k]);
                }
            }
            for (r, q) in r4.remainder().iter().zip(q4.remainder()) {
                acc[0] = simd.mul_add_e_f32s(*r, *q, acc[0]);
            }
            let sum = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
            let tail: f32 = r_tail.iter().zip(q_tail).map(|(x, y)| x * y).sum();
            f(i, simd.reduce_sum_f32s(sum) + tail);
        }
    }
}

/// Unit vectors of one width, keyed.
#[derive(Debug, Clone)]
pub struct VectorSet<K> {
    dimension: usize,
    keys: Vec<K>,
    recency: Vec<i64>,
    data: Vec<f32>,
    pos: HashMap<K, usize>,
}

impl<K: Copy + Eq + Hash + Ord> VectorSet<K> {
    /// An empty set of `dimension`-wide vectors.
    pub fn new(dimension: usize) -> Self {
        Self {
            dimension,
            keys: Vec::new(),
            recency: Vec::new(),
            data: Vec::new(),
            pos: HashMap::new(),
        }
    }

    /// The width.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `key` has a vector.
    pub fn contains(&self, key: &K) -> bool {
        self.pos.contains_key(key)
    }

    /// Stores (or replaces) `key`'s vector; `false` if its width is wrong.
    pub fn insert(&mut self, key: K, vector: &[f32], recency: i64) -> bool {
        if vector.len() != self.dimension {
            return false;
        }
        self.remove(&key);
        self.pos.insert(key, self.keys.len());
        self.keys.push(key);
        self.recency.push(recency);
        self.data.extend_from_slice(vector);
        true
    }

    /// Removes `key`'s vector (the last row moves into its place).
    pub fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.pos.remove(key) else {
            return false;
        };
        let last = self.keys.len() - 1;
        if i != last {
            let moved = self.keys[last];
            self.keys.swap(i, last);
            self.recency.swap(i, last);
            let (d, w) = (&mut self.data, self.dimension);
            d.copy_within(last * w..(last + 1) * w, i * w);
            self.pos.insert(moved, i);
        }
        self.keys.pop();
        self.recency.pop();
        self.data.truncate(last * self.dimension);
        true
    }

    /// The `depth` best candidates by dot product with `query` (unordered).
    pub fn search(&self, query: &[f32], depth: usize) -> Vec<Candidate<K>> {
        self.search_where(query, depth, |_| true)
    }

    /// The `depth` best candidates among the keys `keep` accepts
    /// (unordered): a selective filter still yields `depth` of its own.
    pub fn search_where(
        &self,
        query: &[f32],
        depth: usize,
        mut keep: impl FnMut(&K) -> bool,
    ) -> Vec<Candidate<K>> {
        if query.len() != self.dimension || depth == 0 {
            return Vec::new();
        }
        let mut all: Vec<Candidate<K>> = Vec::with_capacity(self.keys.len());
        dots(&self.data, query, |i, score| {
            all.push(Candidate {
                key: self.keys[i],
                score,
                recency: self.recency[i],
            });
        });
        if depth >= all.len() {
            // Everything is wanted: no order needed.
            all.retain(|c| keep(&c.key));
            return all;
        }
        // The best `depth`, asking `keep` only about those (it looks
        // entries up, which cost more than the dot products); if it turns
        // some away, the rest are walked best first until `depth` pass.
        crate::rank::best_set(&mut all, depth);
        if all[..depth].iter().all(|c| keep(&c.key)) {
            all.truncate(depth);
            return all;
        }
        crate::rank::Ranked::new(all)
            .filter(|c| keep(&c.key))
            .take(depth)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::rank::Ranked;

    #[test]
    fn dot_matches_the_plain_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.1).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.02).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-3);
    }

    proptest! {
        /// Each row's dot product, whatever the width (SIMD chunks, the
        /// four sums and the tail), equals the plain sum in f64 to within
        /// f32 rounding.
        #[test]
        fn dots_are_the_plain_sums(
            width in 1usize..200,
            rows in 0usize..5,
            seed in proptest::collection::vec(-1.0f32..1.0, 1..64),
        ) {
            let value = |i: usize| seed[i % seed.len()] * (1.0 + (i % 7) as f32 / 7.0);
            let query: Vec<f32> = (0..width).map(|i| value(i * 3 + 1)).collect();
            let data: Vec<f32> = (0..width * rows).map(value).collect();
            let mut got = Vec::new();
            dots(&data, &query, |i, s| got.push((i, s)));
            prop_assert_eq!(got.len(), rows);
            for (i, s) in got {
                let row = &data[i * width..(i + 1) * width];
                let plain: f64 = row.iter().zip(&query).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
                let scale: f64 = row.iter().zip(&query).map(|(x, y)| f64::from((x * y).abs())).sum();
                prop_assert!((f64::from(s) - plain).abs() <= 1e-5 * scale.max(1.0), "{} vs {}", s, plain);
                prop_assert_eq!(s.to_bits(), dot(row, &query).to_bits());
            }
        }

        #[test]
        fn search_after_inserts_and_removes_equals_a_brute_force(
            ops in proptest::collection::vec((0u32..20, any::<bool>(), 0u8..8), 0..80),
            q in proptest::collection::vec(-1.0f32..1.0, 3),
        ) {
            let mut set = VectorSet::new(3);
            let mut model = std::collections::BTreeMap::<u32, (Vec<f32>, i64)>::new();
            for (key, insert, seed) in ops {
                if insert {
                    let v = vec![f32::from(seed), 1.0, -f32::from(seed) / 2.0];
                    set.insert(key, &v, i64::from(seed));
                    model.insert(key, (v, i64::from(seed)));
                } else {
                    set.remove(&key);
                    model.remove(&key);
                }
            }
            prop_assert_eq!(set.len(), model.len());
            let got: Vec<u32> = Ranked::new(set.search(&q, 5)).map(|c| c.key).collect();
            let want: Vec<u32> = Ranked::new(
                model
                    .iter()
                    .map(|(k, (v, r))| Candidate { key: *k, score: dot(v, &q), recency: *r })
                    .collect(),
            )
            .take(5)
            .map(|c| c.key)
            .collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_wrong_width_is_refused() {
        let mut set = VectorSet::new(2);
        assert!(!set.insert(1u32, &[1.0, 2.0, 3.0], 0));
        assert!(set.search(&[1.0], 3).is_empty());
    }
}
