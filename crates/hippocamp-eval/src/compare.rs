//! Paired comparison of two LoCoMo runs, question by question: the mean
//! of a metric in each, their difference with a paired bootstrap 95%
//! interval (categories 1-4), and the difference per category. A stage
//! is kept on by default only when the interval of its hit@10 difference
//! is above 0 and no category falls by more than [`MAX_CATEGORY_DROP`]
//! (issue 42's rule); [`Comparison::keeps`] says whether it does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::EvalError;
use crate::locomo::QuestionResult;
use crate::metrics::{mean, paired_bootstrap};

/// The largest fall of any category's mean a kept stage may cause.
pub const MAX_CATEGORY_DROP: f64 = 0.02;

/// What is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Any evidence turn in the top 10.
    HitAt10,
    /// Share of the evidence turns in the top 10.
    RecallAt10,
    /// Reciprocal rank of the first evidence turn.
    Rr,
    /// A top-10 hit from a session holding evidence.
    SessionHitAt10,
}

impl Metric {
    fn of(self, q: &QuestionResult) -> f64 {
        match self {
            Metric::HitAt10 => q.hit_at_10,
            Metric::RecallAt10 => q.recall_at_10,
            Metric::Rr => q.rr,
            Metric::SessionHitAt10 => q.session_hit_at_10,
        }
    }
}

/// One category's means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryDiff {
    /// Questions.
    pub questions: usize,
    /// The base run's mean.
    pub base: f64,
    /// The new run's mean.
    pub new: f64,
    /// `new - base`.
    pub diff: f64,
}

/// Two runs compared on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The metric.
    pub metric: Metric,
    /// Questions paired (categories 1-4).
    pub questions: usize,
    /// The base run's mean, categories 1-4.
    pub base: f64,
    /// The new run's mean.
    pub new: f64,
    /// `new - base`.
    pub diff: f64,
    /// The paired bootstrap 95% interval of `diff`: its 2.5th percentile.
    pub ci_low: f64,
    /// Its 97.5th percentile.
    pub ci_high: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// The generator's seed.
    pub seed: u64,
    /// Per category `"1"`..`"5"`.
    pub per_category: BTreeMap<String, CategoryDiff>,
}

impl Comparison {
    /// Whether the new run would be kept by issue 42's rule: the interval
    /// above 0, and no category of 1-4 down by more than
    /// [`MAX_CATEGORY_DROP`].
    pub fn keeps(&self) -> bool {
        self.ci_low > 0.0
            && self
                .per_category
                .iter()
                .filter(|(c, _)| c.as_str() != "5")
                .all(|(_, d)| d.diff >= -MAX_CATEGORY_DROP)
    }
}

/// Compares `new` with `base`, paired by question: both runs must have
/// asked the same questions in the same order.
pub fn compare(
    base: &[QuestionResult],
    new: &[QuestionResult],
    metric: Metric,
    resamples: usize,
    seed: u64,
) -> Result<Comparison, EvalError> {
    if base.len() != new.len() {
        return Err(EvalError::Mismatch(format!(
            "the runs have {} and {} questions",
            base.len(),
            new.len()
        )));
    }
    for (a, b) in base.iter().zip(new) {
        if (a.index, &a.sample_id, a.category) != (b.index, &b.sample_id, b.category) {
            return Err(EvalError::Mismatch(format!(
                "question {} differs between the runs ({} category {} against {} category {})",
                a.index, a.sample_id, a.category, b.sample_id, b.category
            )));
        }
    }
    let pairs = |cats: &[u8]| -> Vec<(f64, f64)> {
        base.iter()
            .zip(new)
            .filter(|(a, _)| cats.contains(&a.category))
            .map(|(a, b)| (metric.of(a), metric.of(b)))
            .collect()
    };
    let headline = pairs(&[1, 2, 3, 4]);
    let diffs: Vec<f64> = headline.iter().map(|(a, b)| b - a).collect();
    let (ci_low, ci_high) = paired_bootstrap(&diffs, resamples, seed);
    let per_category = (1..=5u8)
        .map(|c| {
            let p = pairs(&[c]);
            let (b, n) = (mean(p.iter().map(|x| x.0)), mean(p.iter().map(|x| x.1)));
            (
                c.to_string(),
                CategoryDiff {
                    questions: p.len(),
                    base: b,
                    new: n,
                    diff: n - b,
                },
            )
        })
        .collect();
    let (b, n) = (
        mean(headline.iter().map(|x| x.0)),
        mean(headline.iter().map(|x| x.1)),
    );
    Ok(Comparison {
        metric,
        questions: headline.len(),
        base: b,
        new: n,
        diff: n - b,
        ci_low,
        ci_high,
        resamples,
        seed,
        per_category,
    })
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:?} over {} questions (categories 1-4): base {:.3}, new {:.3}, difference {:+.3}, paired bootstrap 95% interval [{:+.3}, {:+.3}] ({} resamples, seed {})",
            self.metric,
            self.questions,
            self.base,
            self.new,
            self.diff,
            self.ci_low,
            self.ci_high,
            self.resamples,
            self.seed
        )?;
        for (c, d) in &self.per_category {
            let name = c
                .parse::<usize>()
                .ok()
                .and_then(|i| crate::locomo::CATEGORY_NAMES.get(i))
                .unwrap_or(&"");
            writeln!(
                f,
                "  category {c} {name:<12} {:>4} questions  {:.3} -> {:.3} ({:+.3})",
                d.questions, d.base, d.new, d.diff
            )?;
        }
        write!(
            f,
            "kept by the rule (interval above 0, no category of 1-4 down more than {MAX_CATEGORY_DROP}): {}",
            if self.keeps() { "yes" } else { "no" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(index: usize, category: u8, hit: f64) -> QuestionResult {
        QuestionResult {
            index,
            sample_id: "c".into(),
            category,
            recall_at_10: hit,
            rr: hit,
            hit_at_10: hit,
            session_hit_at_10: hit,
        }
    }

    const CATS: [u8; 4] = [1, 2, 3, 4];

    #[test]
    fn a_clear_gain_is_kept_and_a_category_loss_is_not() {
        let base: Vec<_> = (0..200).map(|i| q(i, CATS[i % 4], 0.0)).collect();
        let better: Vec<_> = (0..200)
            .map(|i| q(i, CATS[i % 4], if i % 2 == 0 { 1.0 } else { 0.0 }))
            .collect();
        let c = compare(&base, &better, Metric::HitAt10, 1_000, 1).unwrap();
        assert!((c.diff - 0.5).abs() < 1e-12 && c.ci_low > 0.3, "{c}");
        assert!(c.keeps());
        // Category 2 loses every question it had.
        let base2: Vec<_> = (0..200)
            .map(|i| q(i, CATS[i % 4], if i % 4 == 1 { 1.0 } else { 0.0 }))
            .collect();
        let c = compare(&base2, &better, Metric::HitAt10, 1_000, 1).unwrap();
        assert!(
            c.per_category["2"].diff < -MAX_CATEGORY_DROP || !c.keeps(),
            "{c}"
        );
        // Other questions cannot be paired.
        assert!(compare(&base, &better[..10], Metric::HitAt10, 10, 1).is_err());
    }
}
