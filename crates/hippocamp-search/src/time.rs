//! Time in questions and turns: "when did…" favours turns that state a
//! time ("yesterday", "last week", "in May", "2023"), and a question that
//! names a time ("last week", "in May 2023", "three days ago") favours
//! turns said then.
//!
//! [`TimeQuery::parse`] reads a query's words (no model, English only);
//! [`states_time`] reads a turn's analysed terms; [`TimeQuery::boost`]
//! is the factor a candidate's score is multiplied by. Both factors are
//! `1 + weight` (0.25 by default, fixed a priori, not fitted: a time
//! signal counts for a quarter of a match), and they multiply when both
//! hold. Relative times ("last week") are read against the request's
//! reference time (`reference_time_ms`, default now), and generously:
//! this is a boost, never a filter, so a turn said just outside the
//! window loses only the boost.

use serde::{Deserialize, Serialize};

use crate::TermFreqs;

/// Parameters of the time stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TimeParams {
    /// Whether lexical search reads times in questions (default on).
    pub enabled: bool,
    /// What a time signal adds to a score, as a fraction, 0 ..= 1
    /// (default 0.25).
    pub weight: f32,
}

impl Default for TimeParams {
    fn default() -> Self {
        Self {
            enabled: true,
            weight: 0.25,
        }
    }
}

impl TimeParams {
    /// The name of the first parameter out of range.
    pub fn validate(&self) -> Result<(), &'static str> {
        if (0.0..=1.0).contains(&self.weight) {
            Ok(())
        } else {
            Err("weight")
        }
    }
}

const DAY_MS: i64 = 86_400_000;

/// A time a question names, before it is read against a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// Days back from the reference's day, `from ..= to` days ago
    /// (yesterday: 1, 1; last week: 1 ..= 14, generously).
    DaysAgo(i64, i64),
    /// A calendar span: `[start, end)` in days since the epoch.
    Days(i64, i64),
    /// A month without a year: the last one at or before the reference.
    Month(u32),
}

/// What a query says about time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeQuery {
    /// It asks when ("when did…", "what year…", "how long ago…").
    pub asks_when: bool,
    named: Option<Named>,
}

impl TimeQuery {
    /// Reads `query`. Nothing found is the default (no boost).
    pub fn parse(query: &str) -> Self {
        // One lower-cased copy, split in place: a query is parsed on
        // every search.
        let lower = query.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        let w = |i: usize| words.get(i).copied().unwrap_or("");
        let asks_when = words.iter().enumerate().any(|(i, &word)| {
            word == "when"
                || ((word == "what" || word == "which")
                    && matches!(
                        w(i + 1),
                        "time" | "date" | "day" | "year" | "month" | "week"
                    ))
                || (word == "how" && w(i + 1) == "long" && w(i + 2) == "ago")
        });
        Self {
            asks_when,
            named: named_time(&words),
        }
    }

    /// Whether it says anything about time.
    pub fn is_empty(&self) -> bool {
        !self.asks_when && self.named.is_none()
    }

    /// The span `[start, end)` in ms of the time the query names, read
    /// against `reference_ms`.
    pub fn span(&self, reference_ms: i64) -> Option<(i64, i64)> {
        let today = reference_ms.div_euclid(DAY_MS);
        let (start, end) = match self.named? {
            Named::DaysAgo(from, to) => (today - to, today - from + 1),
            Named::Days(start, end) => (start, end),
            Named::Month(m) => {
                let (y, rm, _) = civil_from_days(today);
                let y = if m > rm { y - 1 } else { y };
                month_span(y, m)
            }
        };
        Some((start * DAY_MS, end * DAY_MS))
    }

    /// The factor for a candidate: `1 + weight` if the query asks when
    /// and the turn `states_time`, times `1 + weight` if the turn was said
    /// (`at_ms`) within the named `span`.
    pub fn boost(
        &self,
        weight: f32,
        states_time: bool,
        at_ms: i64,
        span: Option<(i64, i64)>,
    ) -> f32 {
        let mut f = 1.0;
        if self.asks_when && states_time {
            f *= 1.0 + weight;
        }
        if span.is_some_and(|(s, e)| (s..e).contains(&at_ms)) {
            f *= 1.0 + weight;
        }
        f
    }
}

/// The analysed terms (Snowball stems) that say when something happened.
/// Not "may" (a verb as often as a month), not "now" or "recent" (they
/// date nothing).
const TIME_TERMS: &[&str] = &[
    "yesterday",
    "today",
    "tonight",
    "tomorrow",
    "ago",
    "week",
    "weekend",
    "month",
    "year",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "januari",
    "februari",
    "march",
    "april",
    "june",
    "juli",
    "august",
    "septemb",
    "octob",
    "novemb",
    "decemb",
    "summer",
    "winter",
    "spring",
    "autumn",
    "birthday",
    "anniversari",
];

/// Whether a turn states a time: one of its terms is a time word or a
/// year (1900-2099).
pub fn states_time(terms: &TermFreqs) -> bool {
    terms.iter().any(|(t, _)| {
        TIME_TERMS.contains(&t)
            || (t.len() == 4
                && (t.starts_with("19") || t.starts_with("20"))
                && t.bytes().all(|b| b.is_ascii_digit()))
    })
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

fn month(word: &str) -> Option<u32> {
    let i = MONTHS
        .iter()
        .position(|m| *m == word || (word.len() == 3 && m.starts_with(word) && word != "may"))?;
    u32::try_from(i + 1).ok()
}

fn year(word: &str) -> Option<i64> {
    let y: i64 = word.parse().ok()?;
    (word.len() == 4 && (1900..2100).contains(&y)).then_some(y)
}

fn number(word: &str) -> Option<i64> {
    const WORDS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    if let Some(i) = WORDS.iter().position(|w| *w == word) {
        return i64::try_from(i + 1).ok();
    }
    match word {
        "a" | "an" => Some(1),
        _ => word.parse().ok().filter(|n| (1..=400).contains(n)),
    }
}

/// The first time the words name, if any.
fn named_time(words: &[&str]) -> Option<Named> {
    let word_at = |i: usize| words.get(i).copied().unwrap_or("");
    for i in 0..words.len() {
        let named = match (word_at(i), word_at(i + 1)) {
            ("yesterday", _) | ("last" | "past", "night") => Some(Named::DaysAgo(1, 1)),
            ("today" | "tonight", _) => Some(Named::DaysAgo(0, 0)),
            ("last" | "past", "week") => Some(Named::DaysAgo(1, 14)),
            ("last" | "past", "weekend") => Some(Named::DaysAgo(1, 9)),
            ("last" | "past", "month") => Some(Named::DaysAgo(1, 62)),
            ("last" | "past", "year") => Some(Named::DaysAgo(1, 730)),
            ("this", "week") => Some(Named::DaysAgo(0, 7)),
            ("this", "month") => Some(Named::DaysAgo(0, 31)),
            (count, unit) if word_at(i + 2) == "ago" => ago(count, unit),
            (word, next) => month(word).and_then(|m| {
                dated(
                    m,
                    i.checked_sub(1).map_or("", word_at),
                    next,
                    word_at(i + 2),
                )
            }),
        };
        if named.is_some() {
            return named;
        }
        if let Some(y) = year(word_at(i)) {
            return Some(Named::Days(
                days_from_civil(y, 1, 1),
                days_from_civil(y + 1, 1, 1),
            ));
        }
    }
    None
}

/// "N units ago": around the day it names, a unit either way.
fn ago(count: &str, unit: &str) -> Option<Named> {
    let n = number(count)?;
    let days = match unit.trim_end_matches('s') {
        "day" => 1,
        "week" => 7,
        "month" => 30,
        "year" => 365,
        _ => return None,
    };
    let at = n * days;
    Some(Named::DaysAgo((at - days).max(0), at + days))
}

/// Month `m` with the words around it: "May 2023", "May 7, 2023",
/// "7 May 2023", or the month alone ("may" alone is a verb unless a
/// preposition before it says month).
fn dated(m: u32, prev: &str, next: &str, after_next: &str) -> Option<Named> {
    let day_of = |word: &str| number(word).filter(|d| (1..=31).contains(d));
    let day_after = day_of(next);
    let day = day_after.or_else(|| day_of(prev));
    let y = year(next).or_else(|| day_after.and_then(|_| year(after_next)));
    let month_word = m != 5
        || day.is_some()
        || y.is_some()
        || matches!(
            prev,
            "in" | "of" | "since" | "during" | "early" | "late" | "mid"
        );
    month_word.then(|| match (y, day) {
        (Some(y), Some(d)) => {
            let at = days_from_civil(y, m, u32::try_from(d).unwrap_or(1));
            Named::Days(at, at + 1)
        }
        (Some(y), None) => {
            let (start, end) = month_span(y, m);
            Named::Days(start, end)
        }
        _ => Named::Month(m),
    })
}

/// `[first day, first day of the next month)` in days since the epoch.
fn month_span(y: i64, m: u32) -> (i64, i64) {
    let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (days_from_civil(y, m, 1), days_from_civil(next.0, next.1, 1))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since the epoch (the inverse of
/// [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Analyzer;

    /// 2023-05-20 12:00 UTC.
    const REF: i64 = 1_684_584_000_000;

    fn day(y: i64, m: u32, d: u32) -> i64 {
        days_from_civil(y, m, d) * DAY_MS
    }

    #[test]
    fn dates_round_trip() {
        for z in [-1000, 0, 19_000, 19_497, 30_000] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
        assert_eq!(day(2023, 5, 20), REF - 12 * 3_600_000);
    }

    #[test]
    fn questions_that_ask_when() {
        for q in [
            "When did Caroline go to the support group?",
            "what year did she move",
            "How long ago was the trip?",
            "Which month was the wedding in?",
        ] {
            assert!(TimeQuery::parse(q).asks_when, "{q}");
        }
        for q in [
            "What did Caroline adopt?",
            "how long is the trail",
            "whenever",
        ] {
            assert!(!TimeQuery::parse(q).asks_when, "{q}");
        }
    }

    #[test]
    fn named_times_are_read_against_the_reference() {
        let span = |q: &str| TimeQuery::parse(q).span(REF);
        assert_eq!(
            span("what did I eat yesterday"),
            Some((day(2023, 5, 19), day(2023, 5, 20)))
        );
        assert_eq!(
            span("the trip in May 2023"),
            Some((day(2023, 5, 1), day(2023, 6, 1)))
        );
        assert_eq!(
            span("on 7 May 2023"),
            Some((day(2023, 5, 7), day(2023, 5, 8)))
        );
        assert_eq!(
            span("on May 7, 2023"),
            Some((day(2023, 5, 7), day(2023, 5, 8)))
        );
        assert_eq!(
            span("what happened in 2022"),
            Some((day(2022, 1, 1), day(2023, 1, 1)))
        );
        // A month alone: the last one at or before the reference.
        assert_eq!(
            span("back in June"),
            Some((day(2022, 6, 1), day(2022, 7, 1)))
        );
        assert_eq!(span("in march"), Some((day(2023, 3, 1), day(2023, 4, 1))));
        assert_eq!(
            span("three days ago"),
            Some((day(2023, 5, 16), day(2023, 5, 19)))
        );
        assert_eq!(
            span("2 weeks ago"),
            Some((day(2023, 4, 29), day(2023, 5, 14)))
        );
        assert_eq!(span("last week"), Some((day(2023, 5, 6), day(2023, 5, 20))));
        assert_eq!(span("who is my sister"), None);
        // "may" the verb names no month.
        assert_eq!(span("I may go"), None);
    }

    #[test]
    fn turns_that_state_a_time_and_the_boost() {
        let a = Analyzer::english();
        for t in [
            "I went there yesterday",
            "back in July 2022",
            "every Sunday",
            "in 2019",
        ] {
            assert!(states_time(&a.analyze(t)), "{t}");
        }
        for t in ["I love my cat", "may I ask", "I have 350 stamps"] {
            assert!(!states_time(&a.analyze(t)), "{t}");
        }
        let q = TimeQuery::parse("when did I go there last week");
        let span = q.span(REF);
        assert!((q.boost(0.25, true, day(2023, 5, 15), span) - 1.5625).abs() < 1e-6);
        assert!((q.boost(0.25, true, day(2023, 1, 1), span) - 1.25).abs() < 1e-6);
        assert!((q.boost(0.25, false, day(2023, 1, 1), span) - 1.0).abs() < 1e-6);
        assert!(TimeQuery::parse("what is it").is_empty());
    }
}
