//! LoCoMo: long two-person conversations with questions whose evidence is
//! a set of turns.
//!
//! Evidence ids need normalising: some strings hold several ids
//! (`"D8:6; D9:17"`, `"D9:1 D4:4"`), have a leading zero (`"D30:05"`) or an
//! extra colon (`"D:11:26"`), or name a turn that does not exist. They are
//! split on `;` and white space, matched with `D:?(\d+):0*(\d+)`, and kept
//! only when they name a turn of the conversation.

use std::collections::HashSet;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::DatasetError;

/// One conversation with its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// `conv-26`...
    pub sample_id: String,
    /// The sessions, in order.
    pub sessions: Vec<Session>,
    /// Questions with usable evidence.
    pub questions: Vec<Question>,
    /// Questions dropped because none of their evidence names a turn.
    pub dropped_questions: usize,
}

/// One session of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Session number (1-based, as in the data).
    pub number: u32,
    /// The date and time as written (`"1:56 pm on 8 May, 2023"`).
    pub date_time: String,
    /// Milliseconds since the Unix epoch, when the date parses.
    pub start_ms: Option<i64>,
    /// The turns, in order.
    pub turns: Vec<Turn>,
}

/// One turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// Who spoke.
    pub speaker: String,
    /// `D<session>:<turn>`.
    pub dia_id: String,
    /// What they said.
    pub text: String,
    /// A caption of a shared image.
    pub blip_caption: Option<String>,
}

impl Turn {
    /// The text remembered for this turn: `"<speaker>: <text>"`, plus
    /// `" [shares image: <caption>]"` when an image was shared.
    pub fn memory_text(&self) -> String {
        match &self.blip_caption {
            Some(c) => format!("{}: {} [shares image: {c}]", self.speaker, self.text),
            None => format!("{}: {}", self.speaker, self.text),
        }
    }
}

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The question, used verbatim as the query.
    pub text: String,
    /// 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// Normalised evidence turn ids.
    pub evidence: Vec<String>,
}

static EVIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"^D:?(\d+):0*(\d+)$").expect("literal pattern")
});

/// Normalises raw evidence strings against the conversation's turn ids.
pub fn normalize_evidence<'a, S: std::hash::BuildHasher>(
    raw: impl IntoIterator<Item = &'a str>,
    turns: &HashSet<String, S>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in raw
        .into_iter()
        .flat_map(|s| s.split(|c: char| c == ';' || c.is_whitespace()))
    {
        let Some(cap) = EVIDENCE.captures(piece.trim()) else {
            continue;
        };
        let id = format!("D{}:{}", &cap[1], &cap[2]);
        if turns.contains(&id) && !out.contains(&id) {
            out.push(id);
        }
    }
    out
}

fn format_err(path: &Path, message: impl Into<String>) -> DatasetError {
    DatasetError::Format {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Reads a LoCoMo JSON file.
pub fn load(path: &Path) -> Result<Vec<Sample>, DatasetError> {
    let text = crate::read(path)?;
    let raw: Vec<Value> = serde_json::from_str(&text).map_err(|source| DatasetError::Json {
        path: path.to_owned(),
        source,
    })?;
    raw.iter().map(|s| parse_sample(path, s)).collect()
}

fn parse_sample(path: &Path, v: &Value) -> Result<Sample, DatasetError> {
    let sample_id = v
        .get("sample_id")
        .and_then(Value::as_str)
        .ok_or_else(|| format_err(path, "a sample has no sample_id"))?
        .to_owned();
    let conv = v
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or_else(|| format_err(path, format!("{sample_id}: no conversation")))?;
    let sessions = parse_sessions(path, &sample_id, conv)?;
    let turn_ids: HashSet<String> = sessions
        .iter()
        .flat_map(|s| s.turns.iter().map(|t| t.dia_id.clone()))
        .collect();
    let mut questions = Vec::new();
    let mut dropped = 0;
    for q in v.get("qa").and_then(Value::as_array).into_iter().flatten() {
        let text = q
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let category = q
            .get("category")
            .and_then(Value::as_u64)
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(0);
        let raw: Vec<&str> = q
            .get("evidence")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let evidence = normalize_evidence(raw, &turn_ids);
        if evidence.is_empty() || text.is_empty() {
            dropped += 1;
            continue;
        }
        questions.push(Question {
            text: text.to_owned(),
            category,
            evidence,
        });
    }
    Ok(Sample {
        sample_id,
        sessions,
        questions,
        dropped_questions: dropped,
    })
}

fn parse_sessions(
    path: &Path,
    sample_id: &str,
    conv: &Map<String, Value>,
) -> Result<Vec<Session>, DatasetError> {
    let mut sessions = Vec::new();
    for (key, value) in conv {
        let Some(n) = key
            .strip_prefix("session_")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let turns = value
            .as_array()
            .ok_or_else(|| format_err(path, format!("{sample_id}: {key} is not a list")))?
            .iter()
            .filter_map(|t| {
                Some(Turn {
                    speaker: t.get("speaker")?.as_str()?.to_owned(),
                    dia_id: t.get("dia_id")?.as_str()?.to_owned(),
                    text: t.get("text")?.as_str()?.to_owned(),
                    blip_caption: t
                        .get("blip_caption")
                        .and_then(Value::as_str)
                        .filter(|c| !c.is_empty())
                        .map(str::to_owned),
                })
            })
            .collect();
        let date_time = conv
            .get(&format!("session_{n}_date_time"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        sessions.push(Session {
            number: n,
            start_ms: parse_date_time(&date_time),
            date_time,
            turns,
        });
    }
    sessions.sort_by_key(|s| s.number);
    Ok(sessions)
}

/// Parses `"1:56 pm on 8 May, 2023"` into milliseconds since the epoch.
pub fn parse_date_time(s: &str) -> Option<i64> {
    let (time, date) = s.split_once(" on ")?;
    let (clock, ampm) = time.trim().split_once(' ')?;
    let (h, m) = clock.split_once(':')?;
    let (mut h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    match ampm.to_ascii_lowercase().as_str() {
        "am" if h == 12 => h = 0,
        "am" => {}
        "pm" if h == 12 => {}
        "pm" => h += 12,
        _ => return None,
    }
    let mut parts = date.split([' ', ',']).filter(|p| !p.is_empty());
    let day: i64 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(month_name))?;
    let year: i64 = parts.next()?.parse().ok()?;
    let days = days_from_civil(year, i64::try_from(month).ok()? + 1, day);
    Some(((days * 24 + h) * 60 + m) * 60_000)
}

/// The English month names, January first.
pub(crate) const MONTHS: &[&str] = &[
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_is_normalised() {
        let turns: HashSet<String> = ["D8:6", "D9:17", "D11:26", "D30:5", "D9:1", "D4:4"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            normalize_evidence(
                ["D8:6; D9:17", "D:11:26", "D30:05", "D9:1 D4:4 D4:6", "D8:6"],
                &turns
            ),
            vec!["D8:6", "D9:17", "D11:26", "D30:5", "D9:1", "D4:4"]
        );
    }

    #[test]
    fn dates_parse() {
        // 2023-05-08 13:56 UTC.
        assert_eq!(
            parse_date_time("1:56 pm on 8 May, 2023"),
            Some(1_683_554_160_000)
        );
        assert_eq!(
            parse_date_time("12:09 am on 13 September, 2023"),
            Some(1_694_563_740_000)
        );
        assert_eq!(parse_date_time("not a date"), None);
    }

    #[test]
    fn memory_text_mentions_images() {
        let t = Turn {
            speaker: "Mel".into(),
            dia_id: "D1:1".into(),
            text: "look".into(),
            blip_caption: Some("a dog".into()),
        };
        assert_eq!(t.memory_text(), "Mel: look [shares image: a dog]");
    }
}
