//! Ranking metrics, following trec_eval conventions.

use std::collections::HashMap;

/// Share of `relevant` found in the first `k` of `ranked`.
pub fn recall_at(ranked: &[String], relevant: &[String], k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = relevant
        .iter()
        .filter(|r| ranked.iter().take(k).any(|x| x == *r))
        .count();
    found as f64 / relevant.len() as f64
}

/// 1 when any of `relevant` is in the first `k` of `ranked`, else 0 (the
/// "hit@k" retrieval-only memory systems publish for LoCoMo).
pub fn hit_at(ranked: &[String], relevant: &[String], k: usize) -> f64 {
    let hit = ranked.iter().take(k).any(|x| relevant.contains(x));
    if hit { 1.0 } else { 0.0 }
}

/// A paired bootstrap of the mean of `diffs` (one paired difference per
/// question): the 2.5th and 97.5th percentiles of the means of
/// `resamples` resamples with replacement, drawn from a generator seeded
/// with `seed` (so a report can be reproduced).
pub fn paired_bootstrap(diffs: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    if diffs.is_empty() || resamples == 0 {
        return (0.0, 0.0);
    }
    // SplitMix64: small, fast and good enough to resample with; seeded so
    // that the interval of a run can be checked again.
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let n = diffs.len() as u64;
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: f64 = (0..n)
                .map(|_| diffs[usize::try_from(next() % n).unwrap_or(0)])
                .sum();
            sum / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (percentile(&means, 2.5), percentile(&means, 97.5))
}

/// 1 / rank of the first relevant item in `ranked` (0 if none).
pub fn reciprocal_rank(ranked: &[String], is_relevant: impl Fn(&str) -> bool) -> f64 {
    ranked
        .iter()
        .position(|x| is_relevant(x))
        .map_or(0.0, |p| 1.0 / (p as f64 + 1.0))
}

/// nDCG@k with gains from `gain` (0 for irrelevant), log2 discount, and
/// the ideal ranking built from `all_gains` (the gains of every relevant
/// item).
pub fn ndcg_at(ranked: &[String], gain: impl Fn(&str) -> f64, all_gains: &[f64], k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, x)| gain(x) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal = all_gains.to_vec();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| g / (i as f64 + 2.0).log2())
        .sum();
    if idcg > 0.0 { dcg / idcg } else { 0.0 }
}

/// Average precision over `ranked` against judgements `qrels` (item →
/// gain > 0), divided by the number of relevant items.
pub fn average_precision(ranked: &[String], qrels: &HashMap<String, f64>) -> f64 {
    if qrels.is_empty() {
        return 0.0;
    }
    let mut hits = 0.0;
    let mut sum = 0.0;
    for (i, x) in ranked.iter().enumerate() {
        if qrels.contains_key(x) {
            hits += 1.0;
            sum += hits / (i as f64 + 1.0);
        }
    }
    sum / qrels.len() as f64
}

/// The `p`-th percentile (0..=100) of `values` by nearest rank.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = (rank as usize).min(v.len()) - 1;
    v[i]
}

/// Mean of `values` (0 when empty).
pub fn mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn recall_and_rr() {
        let ranked = v(&["a", "b", "c", "d"]);
        assert!((recall_at(&ranked, &v(&["b", "z"]), 1) - 0.0).abs() < 1e-12);
        assert!((recall_at(&ranked, &v(&["b", "z"]), 2) - 0.5).abs() < 1e-12);
        assert!((reciprocal_rank(&ranked, |x| x == "c") - 1.0 / 3.0).abs() < 1e-12);
        assert!(reciprocal_rank(&ranked, |x| x == "z").abs() < 1e-12);
    }

    #[test]
    fn hits_and_bootstrap_intervals() {
        let ranked = v(&["a", "b", "c"]);
        assert!((hit_at(&ranked, &v(&["c", "z"]), 2) - 0.0).abs() < 1e-12);
        assert!((hit_at(&ranked, &v(&["c", "z"]), 3) - 1.0).abs() < 1e-12);
        assert!((hit_at(&ranked, &v(&[]), 3) - 0.0).abs() < 1e-12);
        // Every question gains 1: the interval is exactly 1.
        let (lo, hi) = paired_bootstrap(&[1.0; 50], 1_000, 7);
        assert!((lo - 1.0).abs() < 1e-12 && (hi - 1.0).abs() < 1e-12);
        // Half gain, half lose: the interval holds 0 and is symmetric-ish.
        let mixed: Vec<f64> = (0..400)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let (lo, hi) = paired_bootstrap(&mixed, 2_000, 7);
        assert!(lo < 0.0 && hi > 0.0 && (lo + hi).abs() < 0.05, "{lo} {hi}");
        // The same seed, the same interval.
        assert_eq!(
            paired_bootstrap(&mixed, 500, 3),
            paired_bootstrap(&mixed, 500, 3)
        );
    }

    #[test]
    fn ndcg_known_values() {
        let ranked = v(&["a", "b"]);
        // Only b relevant (gain 1): DCG = 1/log2(3), IDCG = 1.
        let g = |x: &str| if x == "b" { 1.0 } else { 0.0 };
        assert!((ndcg_at(&ranked, g, &[1.0], 10) - 1.0 / 3f64.log2()).abs() < 1e-12);
        let perfect = |x: &str| if x == "a" { 3.0 } else { 1.0 };
        assert!((ndcg_at(&ranked, perfect, &[3.0, 1.0], 10) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn map_and_percentiles() {
        let q: HashMap<String, f64> = [("a".to_owned(), 1.0), ("c".to_owned(), 1.0)].into();
        // Precision at a = 1, at c = 2/3; over 2 relevant.
        let ap = average_precision(&v(&["a", "b", "c"]), &q);
        assert!((ap - f64::midpoint(1.0, 2.0 / 3.0)).abs() < 1e-12);
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((percentile(&xs, 50.0) - 50.0).abs() < 1e-12);
        assert!((percentile(&xs, 99.0) - 99.0).abs() < 1e-12);
        assert!((mean([1.0, 2.0, 3.0]) - 2.0).abs() < 1e-12);
    }
}
