//! Near-duplicate detection without a model: which current entries say
//! the same thing, and the one fact each group becomes.
//!
//! Two entries are duplicates when their normalised texts are equal, or
//! when the Jaccard similarity of their analysed term sets (stemmed, stop
//! words dropped) is at least [`DedupeParams::min_jaccard`]. Candidates
//! come from prefix filtering (each entry's rarest terms, as many as a
//! pair above the threshold must share), so a scope is not compared pair
//! by pair. Groups are formed greedily, oldest first: an entry joins the
//! first group whose first member it duplicates, so a chain of small
//! differences never merges two entries that are not alike.
//!
//! The thresholds are fixed here, before measuring (`hippocamp bench
//! dedupe` reports what they give); they are not tuned to any data set.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use hippocamp_core::Metadata;
use hippocamp_search::Analyzer;

use crate::entry::MemoryEntry;
use crate::lineage::{MAX_SOURCES, Origin};

/// What counts as a duplicate.
#[derive(Debug, Clone, PartialEq)]
pub struct DedupeParams {
    /// Least Jaccard similarity of two entries' term sets.
    pub min_jaccard: f64,
    /// Least distinct terms an entry needs to be compared by similarity
    /// (shorter ones only by equal normalised text: "yes" is not "yes,
    /// and more").
    pub min_terms: usize,
    /// Which origins take part.
    pub origins: Vec<Origin>,
}

impl Default for DedupeParams {
    fn default() -> Self {
        Self {
            min_jaccard: 0.8,
            min_terms: 3,
            // Conversation turns are the record of what was said; they are
            // merged only when a run asks for them.
            origins: vec![Origin::Note, Origin::Fact, Origin::File],
        }
    }
}

/// One group of duplicates and the fact it becomes.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeGroup {
    /// The members, oldest first.
    pub members: Vec<Arc<MemoryEntry>>,
    /// The fact's content: the newest member's (on a tie, the longest).
    pub content: String,
    /// The union of the members' metadata (a newer member's value wins).
    pub metadata: Metadata,
    /// The members' fact key, when they share one.
    pub fact_key: Option<hippocamp_core::FactKey>,
    /// The newest member's time.
    pub timestamp_ms: u64,
}

/// Text with case, punctuation and spacing removed.
pub fn normalised(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// The duplicate groups among `entries` (two members or more), each with
/// the fact it becomes.
pub fn plan(entries: &[Arc<MemoryEntry>], params: &DedupeParams) -> Vec<MergeGroup> {
    let analyzer = hippocamp_search::analyzer::english();
    let mut items: Vec<&Arc<MemoryEntry>> = entries
        .iter()
        .filter(|e| params.origins.contains(&e.origin))
        .collect();
    items.sort_by_key(|e| (e.timestamp_ms, e.id));
    let sets: Vec<Vec<String>> = items.iter().map(|e| terms(analyzer, &e.content)).collect();
    let texts: Vec<String> = items.iter().map(|e| normalised(&e.content)).collect();
    let candidates = candidates(&sets, &texts, params);
    let mut group_of: Vec<Option<usize>> = vec![None; items.len()];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in 0..items.len() {
        // The first (oldest) group whose leader this entry duplicates.
        let joined = candidates[i]
            .iter()
            .filter(|&&j| j < i)
            .filter_map(|&j| group_of[j].map(|g| (g, j)))
            // A full group (one fact names at most MAX_SOURCES sources)
            // takes no more: the entry leads a group of its own.
            .filter(|&(g, j)| groups[g][0] == j && groups[g].len() < MAX_SOURCES)
            .filter(|&(_, j)| {
                compatible(items[i], items[j]) && duplicates(i, j, &sets, &texts, params)
            })
            .map(|(g, _)| g)
            .min();
        if let Some(g) = joined {
            groups[g].push(i);
            group_of[i] = Some(g);
        } else {
            group_of[i] = Some(groups.len());
            groups.push(vec![i]);
        }
    }
    groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|g| merge(g.iter().map(|&i| Arc::clone(items[i])).collect()))
        .collect()
}

/// Entries that may merge: not two different fact keys.
fn compatible(a: &MemoryEntry, b: &MemoryEntry) -> bool {
    match (&a.fact_key, &b.fact_key) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

fn terms(analyzer: &Analyzer, text: &str) -> Vec<String> {
    let mut t: Vec<String> = analyzer
        .analyze(text)
        .iter()
        .map(|(t, _)| t.to_owned())
        .collect();
    t.sort_unstable();
    t
}

fn jaccard(a: &[String], b: &[String]) -> f64 {
    let (mut i, mut j, mut both) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - both;
    if union == 0 {
        return 0.0;
    }
    both as f64 / union as f64
}

fn duplicates(
    i: usize,
    j: usize,
    sets: &[Vec<String>],
    texts: &[String],
    params: &DedupeParams,
) -> bool {
    if !texts[i].is_empty() && texts[i] == texts[j] {
        return true;
    }
    sets[i].len() >= params.min_terms
        && sets[j].len() >= params.min_terms
        && jaccard(&sets[i], &sets[j]) >= params.min_jaccard
}

/// For each entry, the entries that may be its duplicates: equal
/// normalised text, or a shared term among each one's rarest
/// `|x| - ceil(t·|x|) + 1` (prefix filtering: two sets at Jaccard `t` or
/// more share one of those).
fn candidates(sets: &[Vec<String>], texts: &[String], params: &DedupeParams) -> Vec<Vec<usize>> {
    let mut df: HashMap<&str, usize> = HashMap::new();
    for s in sets {
        for t in s {
            *df.entry(t.as_str()).or_default() += 1;
        }
    }
    let mut by_text: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut by_term: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); sets.len()];
    for (i, s) in sets.iter().enumerate() {
        let mut found: HashSet<usize> = HashSet::new();
        if !texts[i].is_empty() {
            let same = by_text.entry(texts[i].as_str()).or_default();
            found.extend(same.iter().copied());
            same.push(i);
        }
        if s.len() >= params.min_terms {
            let mut rare: Vec<&str> = s.iter().map(String::as_str).collect();
            rare.sort_by_key(|t| (df.get(t).copied().unwrap_or(0), *t));
            // ceil(t·|x|) ≤ |x| for t in (0, 1]: the cast cannot truncate.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let keep = (s.len() as f64 * params.min_jaccard.clamp(0.0, 1.0)).ceil() as usize;
            let prefix = s.len().saturating_sub(keep) + 1;
            for t in rare.into_iter().take(prefix) {
                let seen = by_term.entry(t).or_default();
                found.extend(seen.iter().copied());
                seen.push(i);
            }
        }
        let mut f: Vec<usize> = found.into_iter().collect();
        f.sort_unstable();
        out[i] = f;
    }
    out
}

/// The fact a group becomes: the newest member's content (on a tie, the
/// longest), the union of their metadata, their fact key, the newest time.
pub fn merge(members: Vec<Arc<MemoryEntry>>) -> MergeGroup {
    let newest = members
        .iter()
        .max_by_key(|e| (e.timestamp_ms, e.content.len()))
        .map(Arc::clone);
    let mut metadata = Metadata::new();
    let mut by_time: BTreeMap<(u64, hippocamp_core::EntryId), &MemoryEntry> = BTreeMap::new();
    for m in &members {
        by_time.insert((m.timestamp_ms, m.id), m);
    }
    for m in by_time.values() {
        for (k, v) in &m.metadata {
            metadata.insert(k.clone(), v.clone());
        }
    }
    let fact_key = members.iter().find_map(|m| m.fact_key.clone());
    let (content, timestamp_ms) = newest
        .map(|n| (n.content.clone(), n.timestamp_ms))
        .unwrap_or_default();
    MergeGroup {
        members,
        content,
        metadata,
        fact_key,
        timestamp_ms,
    }
}

#[cfg(test)]
mod tests {
    use hippocamp_core::{MemoryLimits, MemoryScope};

    use super::*;
    use crate::entry::{NewEntry, Provenance, prepare_entry};

    fn note(text: &str, at: u64) -> Arc<MemoryEntry> {
        let scope = MemoryScope::parse("a", "u").unwrap();
        let p = Provenance {
            timestamp_ms: Some(at),
            ..Provenance::default()
        };
        Arc::new(
            prepare_entry(
                &scope,
                NewEntry::new(text).provenance(p),
                &MemoryLimits::default(),
            )
            .unwrap()
            .entry,
        )
    }

    #[test]
    fn copies_and_rewordings_merge_and_different_facts_do_not() {
        let e = [
            note("My favourite colour is blue.", 1),
            note("my favourite colour is BLUE", 2),
            note("Favourite colour: blue", 3),
            note("My favourite colour is green", 4),
            note("I live in Lisbon", 5),
            note("The user lives in Lisbon", 6),
        ];
        let groups = plan(&e, &DedupeParams::default());
        let ids: Vec<Vec<u64>> = groups
            .iter()
            .map(|g| g.members.iter().map(|m| m.timestamp_ms).collect())
            .collect();
        assert_eq!(ids, [vec![1, 2, 3]]);
        assert_eq!(groups[0].content, "Favourite colour: blue");
        assert_eq!(groups[0].timestamp_ms, 3);
    }

    #[test]
    fn turns_take_part_only_when_asked() {
        let mut a = (*note("we met at the harbour cafe", 1)).clone();
        a.origin = Origin::Turn;
        let mut b = (*note("We met at the harbour cafe!", 2)).clone();
        b.origin = Origin::Turn;
        let e = [Arc::new(a), Arc::new(b)];
        assert!(plan(&e, &DedupeParams::default()).is_empty());
        let all = DedupeParams {
            origins: vec![Origin::Turn],
            ..DedupeParams::default()
        };
        assert_eq!(plan(&e, &all).len(), 1);
    }

    #[test]
    fn a_group_past_max_sources_becomes_several_facts() {
        let n = MAX_SOURCES * 2 + 3;
        let e: Vec<_> = (0..n)
            .map(|i| note("My favourite colour is blue.", i as u64))
            .collect();
        let groups = plan(&e, &DedupeParams::default());
        let sizes: Vec<usize> = groups.iter().map(|g| g.members.len()).collect();
        assert_eq!(sizes, [MAX_SOURCES, MAX_SOURCES, 3]);
        for g in &groups {
            let d = crate::lineage::Derivation {
                sources: g
                    .members
                    .iter()
                    .map(|m| crate::lineage::Source {
                        entry: m.id,
                        role: crate::lineage::Role::Merged,
                    })
                    .collect(),
                run: None,
            };
            d.check().unwrap();
        }
    }

    #[test]
    fn normalises_case_punctuation_and_space() {
        assert_eq!(normalised("  Hello,   WORLD! "), "hello world");
        assert_eq!(normalised("!!!"), "");
    }
}
