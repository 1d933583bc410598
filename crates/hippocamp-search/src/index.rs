//! The per-scope inverted index and BM25 scoring.
//!
//! One [`InvertedIndex`] holds one scope's documents, so every statistic
//! BM25 uses (document count, average length, document frequencies) is the
//! scope's own: one user's data never changes another user's scores.
//! Inserts and removals update postings and statistics at once; there is no
//! lazy deletion, so scores after a delete equal scores of an index that
//! never held the document
//! (`tests::removals_leave_the_index_a_fresh_build_would_be`). A document
//! keeps where each of its postings is, so removing it costs its own terms,
//! not the length of their posting lists: erasing half of a 100k-entry
//! scope took 0.8 s with a search of each list, 0.1 s this way
//! (`cargo bench -p hippocamp-search -- remove_half`).

use std::hash::Hash;

use foldhash::{HashMap, HashMapExt as _};

use serde::{Deserialize, Serialize};

use crate::analyzer::{QueryTerm, TermFreqs};
use crate::rank::Candidate;

/// BM25 parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Bm25Params {
    /// Term-frequency saturation, 0 ..= 10 (default 1.2).
    pub k1: f32,
    /// Length normalisation, 0 ..= 1 (default 0.75).
    pub b: f32,
    /// Query term-frequency saturation, 0 ..= 1,000 (default 8, the value
    /// of Okapi's TREC runs): a term said `n` times in the query weighs
    /// `(k3 + 1) n / (k3 + n)`, at most `k3 + 1`; 0 weighs every term once.
    pub k3: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self {
            k1: 1.2,
            b: 0.75,
            k3: 8.0,
        }
    }
}

impl Bm25Params {
    /// Checks the ranges; returns the name of the first bad parameter.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(0.0..=10.0).contains(&self.k1) {
            return Err("k1");
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err("b");
        }
        if !(0.0..=1_000.0).contains(&self.k3) {
            return Err("k3");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    slot: u32,
    tf: u32,
}

#[derive(Debug, Clone)]
struct Doc<K> {
    key: K,
    recency: i64,
    /// Which passage of its document this is (0 for a document indexed
    /// whole).
    passage: u32,
    /// Each term's id and where this document's posting is in that term's
    /// list, ordered by term id: a removal goes straight to each posting
    /// (a search of the list made removing many documents of a large
    /// scope quadratic).
    terms: Box<[(u32, u32)]>,
}

/// One query term's share of a document's BM25 score
/// ([`InvertedIndex::explain`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TermShare {
    /// The analysed (stemmed) term.
    pub term: String,
    /// How often the document holds it.
    pub tf: u32,
    /// What it added to the score.
    pub score: f32,
}

/// Statistics of an index.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexStats {
    /// Documents.
    pub docs: usize,
    /// Distinct terms with at least one posting.
    pub terms: usize,
    /// Average document length in terms.
    pub avg_len: f64,
}

/// An inverted index over documents keyed by `K`.
///
/// `recency` orders documents whose scores tie: newer (larger) first, then
/// smaller keys first, so every ranking is deterministic.
#[derive(Debug, Clone)]
pub struct InvertedIndex<K> {
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    live_terms: usize,
    docs: Vec<Option<Doc<K>>>,
    lens: Vec<u32>,
    free: Vec<u32>,
    slots: HashMap<K, u32>,
    /// The other passages' slots of each document indexed as several
    /// (its first passage's slot is in `slots`).
    more: HashMap<K, Box<[u32]>>,
    /// Live slots: documents and their other passages (average lengths
    /// are over these).
    live: usize,
    /// Per term: postings beyond the first of a document indexed as
    /// passages, so a term's document frequency counts documents, not
    /// passages.
    repeats: Vec<u32>,
    total_len: u64,
}

impl<K> Default for InvertedIndex<K> {
    fn default() -> Self {
        Self {
            terms: HashMap::new(),
            postings: Vec::new(),
            live_terms: 0,
            docs: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            slots: HashMap::new(),
            more: HashMap::new(),
            live: 0,
            repeats: Vec::new(),
            total_len: 0,
        }
    }
}

impl<K: Copy + Eq + Hash + Ord> InvertedIndex<K> {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether `key` is indexed.
    pub fn contains(&self, key: &K) -> bool {
        self.slots.contains_key(key)
    }

    /// Statistics.
    pub fn stats(&self) -> IndexStats {
        IndexStats {
            docs: self.len(),
            terms: self.live_terms,
            avg_len: self.avg_len(),
        }
    }

    fn avg_len(&self) -> f64 {
        if self.live == 0 {
            0.0
        } else {
            self.total_len as f64 / self.live as f64
        }
    }

    /// Indexes a document, replacing any document with the same key.
    pub fn insert(&mut self, key: K, doc: &TermFreqs, recency: i64) {
        self.remove(&key);
        let slot = self.insert_slot(key, doc, recency, 0);
        self.slots.insert(key, slot);
    }

    /// Indexes a document as `passages` (see [`crate::passages`]), each
    /// scored as a document of its own; the document ranks by its best.
    /// Replaces any document with the same key.
    pub fn insert_passages(&mut self, key: K, passages: &[TermFreqs], recency: i64) {
        match passages {
            [] => self.insert(key, &TermFreqs::default(), recency),
            [one] => self.insert(key, one, recency),
            [first, rest @ ..] => {
                self.remove(&key);
                let slot = self.insert_slot(key, first, recency, 0);
                self.slots.insert(key, slot);
                let more: Box<[u32]> = rest
                    .iter()
                    .zip(1u32..)
                    .map(|(p, i)| self.insert_slot(key, p, recency, i))
                    .collect();
                self.count_repeats(slot, &more, true);
                self.more.insert(key, more);
            }
        }
    }

    /// How many passages `key` is indexed as (0: not indexed).
    pub fn passages(&self, key: &K) -> usize {
        if !self.slots.contains_key(key) {
            return 0;
        }
        1 + self.more.get(key).map_or(0, |m| m.len())
    }

    /// Which passage of `key` scores best for `terms` (with the arithmetic
    /// of [`Self::bm25`]; ties go to the earlier passage), when it is
    /// indexed as several.
    /// `None` too when no passage matches.
    pub fn best_passage(&self, key: &K, terms: &[QueryTerm], params: Bm25Params) -> Option<usize> {
        if self.more.is_empty() {
            return None;
        }
        let more = self.more.get(key)?;
        let first = *self.slots.get(key)?;
        let (_, slot) = std::iter::once(first)
            .chain(more.iter().copied())
            .map(|slot| (self.slot_score(slot, terms, params), slot))
            .filter(|(score, _)| *score > 0.0)
            .fold(None, |best: Option<(f32, u32)>, (score, slot)| match best {
                Some((b, _)) if b >= score => best,
                _ => Some((score, slot)),
            })?;
        self.docs[slot as usize]
            .as_ref()
            .map(|d| d.passage as usize)
    }

    fn slot_score(&self, slot: u32, terms: &[QueryTerm], params: Bm25Params) -> f32 {
        self.explain_slot(slot, terms, params)
            .iter()
            .map(|t| t.score)
            .sum()
    }

    /// Adds (or takes back) the postings a document's passages repeat:
    /// each term held by `c` of its passages counts `c - 1` repeats.
    fn count_repeats(&mut self, first: u32, more: &[u32], add: bool) {
        let mut ids: Vec<u32> = std::iter::once(first)
            .chain(more.iter().copied())
            .filter_map(|slot| self.docs[slot as usize].as_ref())
            .flat_map(|d| d.terms.iter().map(|&(id, _)| id))
            .collect();
        ids.sort_unstable();
        for run in ids.chunk_by(|a, b| a == b) {
            let extra = u32::try_from(run.len() - 1).unwrap_or(u32::MAX);
            if extra > 0 {
                let r = &mut self.repeats[run[0] as usize];
                *r = if add {
                    *r + extra
                } else {
                    r.saturating_sub(extra)
                };
            }
        }
    }

    /// Documents (not passages) holding term `id`.
    fn doc_freq(&self, id: u32) -> f32 {
        // Repeats never outnumber postings; saturating keeps a search from
        // panicking should that ever break.
        (self.postings[id as usize]
            .len()
            .saturating_sub(self.repeats[id as usize] as usize)) as f32
    }

    /// Puts one document or passage in a free slot.
    fn insert_slot(&mut self, key: K, doc: &TermFreqs, recency: i64, passage: u32) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.docs.push(None);
            self.lens.push(0);
            u32::try_from(self.docs.len() - 1).unwrap_or(u32::MAX)
        });
        let mut term_ids = Vec::with_capacity(doc.distinct());
        for (term, tf) in doc.iter() {
            let id = if let Some(&id) = self.terms.get(term) {
                id
            } else {
                let id = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
                self.terms.insert(term.into(), id);
                self.postings.push(Vec::new());
                self.repeats.push(0);
                id
            };
            let list = &mut self.postings[id as usize];
            if list.is_empty() {
                self.live_terms += 1;
            }
            let at = u32::try_from(list.len()).unwrap_or(u32::MAX);
            list.push(Posting { slot, tf });
            term_ids.push((id, at));
        }
        term_ids.sort_unstable_by_key(|&(id, _)| id);
        self.docs[slot as usize] = Some(Doc {
            key,
            recency,
            passage,
            terms: term_ids.into_boxed_slice(),
        });
        self.lens[slot as usize] = doc.doc_len();
        self.total_len += u64::from(doc.doc_len());
        self.live += 1;
        slot
    }

    /// Removes a document (all its passages); returns whether it was
    /// present.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some(slot) = self.slots.remove(key) else {
            return false;
        };
        if let Some(more) = self.more.remove(key) {
            self.count_repeats(slot, &more, false);
            for slot in more {
                self.remove_slot(slot);
            }
        }
        self.remove_slot(slot);
        true
    }

    fn remove_slot(&mut self, slot: u32) {
        if let Some(doc) = self.docs[slot as usize].take() {
            for &(id, at) in &doc.terms {
                let list = &mut self.postings[id as usize];
                // Where the document says; searched for only if that ever
                // disagreed with the list (it never should).
                let found = match list.get(at as usize) {
                    Some(p) if p.slot == slot => Some(at as usize),
                    _ => list.iter().position(|p| p.slot == slot),
                };
                if let Some(i) = found {
                    list.swap_remove(i);
                    // The list's last posting took its place: tell its
                    // document where it is now.
                    if let Some(moved) = list.get(i).map(|p| p.slot)
                        && let Some(other) = self.docs[moved as usize].as_mut()
                        && let Ok(j) = other.terms.binary_search_by_key(&id, |&(t, _)| t)
                    {
                        other.terms[j].1 = u32::try_from(i).unwrap_or(u32::MAX);
                    }
                }
                if list.is_empty() {
                    self.live_terms -= 1;
                }
            }
        }
        self.total_len -= u64::from(self.lens[slot as usize]);
        self.lens[slot as usize] = 0;
        self.free.push(slot);
        self.live -= 1;
    }

    /// BM25 scores of every document matching at least one of `terms`
    /// (the distinct analysed query terms with their query frequencies),
    /// unordered.
    ///
    /// IDF is `ln(1 + (N - df + 0.5) / (df + 0.5))`, which stays positive
    /// for terms in most documents, so every match scores above zero.
    pub fn bm25(&self, terms: &[QueryTerm], params: Bm25Params) -> Vec<Candidate<K>> {
        self.scores(terms, params)
            .into_iter()
            .filter_map(|(score, slot)| self.candidate(score, slot))
            .collect()
    }

    /// Documents matching `terms`, best first (the order of [`Candidate`]).
    pub fn search(&self, terms: &[QueryTerm], params: Bm25Params) -> Matches<'_, K> {
        Matches {
            index: self,
            scored: self.scores(terms, params),
            taken: 0,
            next_chunk: FIRST_CHUNK,
            chunk: Vec::new(),
        }
    }

    /// What each of `terms` added to `key`'s BM25 score, with the same
    /// arithmetic as [`Self::bm25`]: the analysed term, its frequency in
    /// the document and its share, in query order. Terms the document
    /// lacks added nothing and are left out. For explaining a hit, not
    /// for ranking (one lookup per term).
    /// A document indexed as passages is explained by its best one.
    pub fn explain(&self, key: &K, terms: &[QueryTerm], params: Bm25Params) -> Vec<TermShare> {
        let Some(&first) = self.slots.get(key) else {
            return Vec::new();
        };
        let slot = match (self.more.get(key), self.best_passage(key, terms, params)) {
            (Some(more), Some(p)) if p > 0 => more.get(p - 1).copied().unwrap_or(first),
            _ => first,
        };
        self.explain_slot(slot, terms, params)
    }

    fn explain_slot(&self, slot: u32, terms: &[QueryTerm], params: Bm25Params) -> Vec<TermShare> {
        let Some(doc) = self.docs.get(slot as usize).and_then(Option::as_ref) else {
            return Vec::new();
        };
        // N and document frequencies count documents; lengths are
        // passages' (a document indexed whole is one passage).
        let n = self.slots.len() as f32;
        let avg_len = self.total_len as f32 / self.live as f32;
        let len = self.lens[slot as usize] as f32;
        terms
            .iter()
            .filter_map(|QueryTerm { term, count }| {
                let &id = self.terms.get(term.as_str())?;
                let at = doc.terms.binary_search_by_key(&id, |&(t, _)| t).ok()?;
                let list = &self.postings[id as usize];
                let tf = list.get(doc.terms[at].1 as usize)?.tf;
                let idf = query_weight(params, *count as f32, n, self.doc_freq(id));
                Some(TermShare {
                    term: term.clone(),
                    tf,
                    score: posting_score(idf, tf as f32, len, avg_len, params.k1, params.b),
                })
            })
            .collect()
    }

    fn candidate(&self, score: f32, slot: u32) -> Option<Candidate<K>> {
        let doc = self.docs[slot as usize].as_ref()?;
        Some(Candidate {
            key: doc.key,
            score,
            recency: doc.recency,
        })
    }

    /// `(score, slot)` of every matching document, unordered.
    fn scores(&self, terms: &[QueryTerm], params: Bm25Params) -> Vec<(f32, u32)> {
        let scored = self.slot_scores(terms, params);
        if self.more.is_empty() {
            return scored;
        }
        // A document indexed as passages scores its best one (ties: the
        // earlier passage).
        let mut best: HashMap<K, usize> = HashMap::with_capacity(scored.len());
        let mut out: Vec<(f32, u32)> = Vec::with_capacity(scored.len());
        for (score, slot) in scored {
            let Some(doc) = self.docs[slot as usize].as_ref() else {
                continue;
            };
            match best.entry(doc.key) {
                std::collections::hash_map::Entry::Occupied(o) => {
                    let kept = &mut out[*o.get()];
                    let kept_passage = self.docs[kept.1 as usize].as_ref().map_or(0, |d| d.passage);
                    if score > kept.0
                        || (score.total_cmp(&kept.0).is_eq() && doc.passage < kept_passage)
                    {
                        *kept = (score, slot);
                    }
                }
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(out.len());
                    out.push((score, slot));
                }
            }
        }
        out
    }

    /// `(score, slot)` of every matching slot (documents and passages),
    /// unordered.
    fn slot_scores(&self, terms: &[QueryTerm], params: Bm25Params) -> Vec<(f32, u32)> {
        // As in `explain_slot`: documents for N and frequencies, passages
        // for lengths.
        let n = self.slots.len() as f32;
        if n == 0.0 {
            return Vec::new();
        }
        let avg_len = self.total_len as f32 / self.live as f32;
        let k1 = params.k1;
        let b = params.b;
        SCRATCH.with_borrow_mut(|acc| {
            // One accumulator per thread, zero between queries: a fresh
            // one per query was a page-faulting allocation at 100k entries.
            if acc.len() < self.docs.len() {
                acc.resize(self.docs.len(), 0.0);
            }
            let mut touched: Vec<u32> = Vec::new();
            for QueryTerm { term, count } in terms {
                let Some(&id) = self.terms.get(term.as_str()) else {
                    continue;
                };
                let list = &self.postings[id as usize];
                if list.is_empty() {
                    continue;
                }
                let idf = query_weight(params, *count as f32, n, self.doc_freq(id));
                for p in list {
                    let len = self.lens[p.slot as usize] as f32;
                    let s = posting_score(idf, p.tf as f32, len, avg_len, k1, b);
                    let slot = &mut acc[p.slot as usize];
                    if *slot == 0.0 {
                        touched.push(p.slot);
                    }
                    *slot += s;
                }
            }
            touched
                .into_iter()
                .map(|slot| (std::mem::take(&mut acc[slot as usize]), slot))
                .collect()
        })
    }
}

/// A query term's weight: its IDF, `ln(1 + (N - df + 0.5) / (df + 0.5))`,
/// times the query-frequency factor `(k3 + 1) qtf / (k3 + qtf)`.
#[inline]
fn query_weight(params: Bm25Params, qtf: f32, n: f32, df: f32) -> f32 {
    let weight = (params.k3 + 1.0) * qtf / (params.k3 + qtf);
    weight * (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// What one posting adds to its document's score: the term's weight `idf`
/// times the saturated, length-normalised term frequency.
#[inline]
fn posting_score(idf: f32, tf: f32, len: f32, avg_len: f32, k1: f32, b: f32) -> f32 {
    let norm = if avg_len > 0.0 {
        k1 * (1.0 - b + b * len / avg_len)
    } else {
        k1
    };
    idf * tf * (k1 + 1.0) / (tf + norm)
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How many candidates [`Matches`] ranks first; each later chunk is twice
/// the one before.
const FIRST_CHUNK: usize = 32;

/// Matching documents, best first, ranked lazily in growing chunks.
///
/// Callers filter while they walk and usually stop after a few hits, so
/// ranking every match (a heap of all of them, each looked up to break
/// ties) was most of a search at 100k entries. A chunk is the best
/// `n` of the rest by score alone, plus every other document tied with
/// the n-th: so it is exactly the next stretch of the full order, and only
/// its documents are looked up and sorted by the full order.
#[derive(Debug)]
pub struct Matches<'a, K> {
    index: &'a InvertedIndex<K>,
    /// `(score, slot)`; those before `taken` were moved into chunks.
    scored: Vec<(f32, u32)>,
    taken: usize,
    next_chunk: usize,
    /// The current chunk, worst first (yielded by `pop`).
    chunk: Vec<Candidate<K>>,
}

impl<K: Copy + Eq + Hash + Ord> Matches<'_, K> {
    /// Sizes the first chunk for a caller that expects to take about `n`
    /// (a few more, for those its filter rejects): each chunk costs a
    /// pass over every match not yet ranked.
    #[must_use]
    pub fn expecting(mut self, n: usize) -> Self {
        if self.chunk.is_empty() && self.taken == 0 {
            self.next_chunk = n.saturating_add(8);
        }
        self
    }

    fn refill(&mut self) {
        while self.chunk.is_empty() && self.taken < self.scored.len() {
            let rest = &mut self.scored[self.taken..];
            let by_score = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0);
            let mut n = self.next_chunk.min(rest.len());
            if n < rest.len() {
                rest.select_nth_unstable_by(n - 1, by_score);
                // Every match tied with the n-th joins the chunk.
                let edge = rest[n - 1].0;
                let mut end = n;
                for i in n..rest.len() {
                    if rest[i].0.total_cmp(&edge).is_eq() {
                        rest.swap(i, end);
                        end += 1;
                    }
                }
                n = end;
            }
            let index = self.index;
            self.chunk.extend(
                rest[..n]
                    .iter()
                    .filter_map(|&(score, slot)| index.candidate(score, slot)),
            );
            self.chunk.sort_unstable();
            self.taken += n;
            self.next_chunk = self.next_chunk.saturating_mul(2);
        }
    }

    /// Matches not yet yielded.
    pub fn remaining(&self) -> usize {
        self.chunk.len() + self.scored.len() - self.taken
    }
}

impl<K: Copy + Eq + Hash + Ord> Iterator for Matches<'_, K> {
    type Item = Candidate<K>;
    fn next(&mut self) -> Option<Candidate<K>> {
        self.refill();
        self.chunk.pop()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyzer::Analyzer;

    fn index(docs: &[&str]) -> (Analyzer, InvertedIndex<u32>) {
        let a = Analyzer::english();
        let mut idx = InvertedIndex::new();
        for (i, d) in docs.iter().enumerate() {
            idx.insert(u32::try_from(i).unwrap(), &a.analyze(d), 0);
        }
        (a, idx)
    }

    #[test]
    fn explained_shares_add_up_to_the_score() {
        let (a, idx) = index(&[
            "the cat sat on the mat with another cat",
            "dogs chase cats and cats chase mice",
            "an unrelated sentence about weather",
        ]);
        let q = a.query_terms("cat mat weather");
        for c in idx.search(&q, Bm25Params::default()) {
            let shares = idx.explain(&c.key, &q, Bm25Params::default());
            let sum: f32 = shares.iter().map(|t| t.score).sum();
            assert!((sum - c.score).abs() < 1e-5, "{shares:?} vs {}", c.score);
            assert!(shares.iter().all(|t| t.tf > 0 && t.score > 0.0));
        }
        let first = idx.explain(&0, &q, Bm25Params::default());
        let terms: Vec<(&str, u32)> = first.iter().map(|t| (t.term.as_str(), t.tf)).collect();
        assert_eq!(terms, [("cat", 2), ("mat", 1)]);
        assert!(idx.explain(&9, &q, Bm25Params::default()).is_empty());
    }

    #[test]
    fn a_document_of_passages_ranks_by_its_best_and_leaves_no_trace() {
        let a = Analyzer::english();
        let filler = "compile link test deploy rollback monitor ".repeat(40);
        let mut idx = InvertedIndex::new();
        idx.insert(
            0u32,
            &a.analyze("the locker code is written on a note in the kitchen drawer by the spoons"),
            0,
        );
        idx.insert(
            1,
            &a.analyze(&format!("{filler} my locker code is 4417 {filler}")),
            0,
        );
        let q = a.query_terms("locker code");
        let whole: Vec<u32> = idx
            .search(&q, Bm25Params::default())
            .map(|c| c.key)
            .collect();
        assert_eq!(whole, vec![0, 1], "whole, the long one is buried");
        let fresh = idx.clone();
        let passages = [
            a.analyze(&filler),
            a.analyze("my locker code is 4417"),
            a.analyze(&filler),
        ];
        idx.insert_passages(1, &passages, 0);
        assert_eq!(idx.passages(&1), 3);
        assert_eq!(idx.len(), 2);
        // Frequencies count documents: a word of every passage is in one.
        let compile = idx.terms["compil"];
        assert!((idx.doc_freq(compile) - 1.0).abs() < f32::EPSILON);
        let found: Vec<Candidate<u32>> = idx.search(&q, Bm25Params::default()).collect();
        assert_eq!(found.iter().map(|c| c.key).collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(idx.best_passage(&1, &q, Bm25Params::default()), Some(1));
        assert_eq!(idx.best_passage(&0, &q, Bm25Params::default()), None);
        let shares: f32 = idx
            .explain(&1, &q, Bm25Params::default())
            .iter()
            .map(|t| t.score)
            .sum();
        assert!((shares - found[0].score).abs() < 1e-5);
        assert_eq!(
            idx.bm25(&q, Bm25Params::default()).len(),
            2,
            "one candidate per document"
        );
        // Back to whole, then removed: what a fresh index would be.
        idx.insert(
            1,
            &a.analyze(&format!("{filler} my locker code is 4417 {filler}")),
            0,
        );
        assert_eq!(idx.stats(), fresh.stats());
        assert_eq!(idx.passages(&1), 1);
        idx.insert_passages(1, &passages, 0);
        assert!(idx.remove(&1));
        let mut only = InvertedIndex::new();
        only.insert(
            0u32,
            &a.analyze("the locker code is written on a note in the kitchen drawer by the spoons"),
            0,
        );
        assert_eq!(idx.stats(), only.stats());
        assert_eq!(idx.live, 1);
        assert!(
            idx.repeats.iter().all(|r| *r == 0),
            "document frequencies restored"
        );
        let s1: Vec<f32> = idx
            .search(&q, Bm25Params::default())
            .map(|c| c.score)
            .collect();
        let s2: Vec<f32> = only
            .search(&q, Bm25Params::default())
            .map(|c| c.score)
            .collect();
        assert_eq!(s1, s2);
    }

    #[test]
    fn ranks_by_bm25() {
        let (a, idx) = index(&[
            "the cat sat on the mat",
            "dogs chase cats and cats chase mice",
            "an unrelated sentence about weather",
        ]);
        let hits: Vec<u32> = idx
            .search(&a.query_terms("cat"), Bm25Params::default())
            .map(|c| c.key)
            .collect();
        assert_eq!(hits, vec![1, 0]);
        assert!(
            idx.search(&a.query_terms("zebra"), Bm25Params::default())
                .next()
                .is_none()
        );
    }

    proptest::proptest! {
        /// The lazy chunks yield exactly the full order (score, then
        /// newer, then smaller key), ties at chunk edges included: many
        /// documents share few words, so scores tie often.
        #[test]
        fn matches_walk_the_full_order(
            docs in proptest::collection::vec(
                (proptest::collection::vec(0usize..6, 1..4), 0i64..4),
                0..300,
            ),
            query in proptest::collection::vec(0usize..6, 1..4),
            removed in proptest::collection::vec(0usize..300, 0..20),
        ) {
            const WORDS: [&str; 6] = ["apple", "berry", "cherry", "grape", "lemon", "melon"];
            let a = Analyzer::english();
            let mut idx = InvertedIndex::new();
            for (i, (words, recency)) in docs.iter().enumerate() {
                let text: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
                idx.insert(u32::try_from(i).unwrap(), &a.analyze(&text.join(" ")), *recency);
            }
            for r in removed {
                idx.remove(&u32::try_from(r).unwrap());
            }
            let q: Vec<&str> = query.iter().map(|&w| WORDS[w]).collect();
            let terms = a.query_terms(&q.join(" "));
            let mut want = idx.bm25(&terms, Bm25Params::default());
            want.sort_unstable_by(|x, y| y.cmp(x));
            let got: Vec<_> = idx.search(&terms, Bm25Params::default()).collect();
            proptest::prop_assert_eq!(got, want);
        }

        /// After any sequence of inserts, replacements and removals, every
        /// document knows where each of its postings is, every posting
        /// belongs to a live document, and the index scores exactly as
        /// one built afresh from the documents left.
        #[test]
        fn removals_leave_the_index_a_fresh_build_would_be(
            ops in proptest::collection::vec(
                (0u32..40, proptest::option::of(proptest::collection::vec(0usize..8, 1..5))),
                0..200,
            ),
        ) {
            const WORDS: [&str; 8] =
                ["apple", "berry", "cherry", "grape", "lemon", "melon", "olive", "peach"];
            let a = Analyzer::english();
            let text = |words: &[usize]| {
                words.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" ")
            };
            let mut idx = InvertedIndex::new();
            let mut live = std::collections::BTreeMap::<u32, (String, i64)>::new();
            for (i, (key, words)) in ops.iter().enumerate() {
                match words {
                    Some(w) => {
                        let recency = i64::try_from(i).unwrap();
                        idx.insert(*key, &a.analyze(&text(w)), recency);
                        live.insert(*key, (text(w), recency));
                    }
                    None => {
                        proptest::prop_assert_eq!(idx.remove(key), live.remove(key).is_some());
                    }
                }
            }
            for (slot, doc) in idx.docs.iter().enumerate() {
                let Some(doc) = doc else { continue };
                for &(id, at) in &doc.terms {
                    let p = idx.postings[id as usize][at as usize];
                    proptest::prop_assert_eq!(p.slot as usize, slot);
                }
            }
            for list in &idx.postings {
                for p in list {
                    proptest::prop_assert!(idx.docs[p.slot as usize].is_some());
                }
            }
            let mut fresh = InvertedIndex::new();
            for (key, (t, recency)) in &live {
                fresh.insert(*key, &a.analyze(t), *recency);
            }
            proptest::prop_assert_eq!(idx.stats(), fresh.stats());
            for w in WORDS {
                let terms = a.query_terms(w);
                let got: Vec<_> = idx.search(&terms, Bm25Params::default()).collect();
                let want: Vec<_> = fresh.search(&terms, Bm25Params::default()).collect();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn known_bm25_value() {
        // N = 2, df(cat) = 1, idf = ln(1 + 1.5/1.5) = ln 2.
        // doc 0: len 1, avg 1 -> tf part = 1 * 2.2 / (1 + 1.2) = 1.
        let (a, idx) = index(&["cat", "dog"]);
        let c = idx.bm25(&a.query_terms("cat"), Bm25Params::default());
        assert_eq!(c.len(), 1);
        assert!((c[0].score - std::f32::consts::LN_2).abs() < 1e-6);
    }

    #[test]
    fn removal_restores_statistics() {
        let a = Analyzer::english();
        let mut with = InvertedIndex::new();
        let mut without = InvertedIndex::new();
        for (i, d) in ["red apple", "green apple", "red car"].iter().enumerate() {
            with.insert(i, &a.analyze(d), 0);
            if i != 1 {
                without.insert(i, &a.analyze(d), 0);
            }
        }
        with.insert(9, &a.analyze("apple apple pie"), 0);
        without.insert(9, &a.analyze("apple apple pie"), 0);
        assert!(with.remove(&1));
        assert!(!with.remove(&1));
        let q = a.query_terms("red apple");
        let x: Vec<_> = with.search(&q, Bm25Params::default()).collect();
        let y: Vec<_> = without.search(&q, Bm25Params::default()).collect();
        assert_eq!(x, y);
        assert_eq!(with.stats(), without.stats());
    }

    #[test]
    fn reinsert_replaces() {
        let a = Analyzer::english();
        let mut idx = InvertedIndex::new();
        idx.insert(1u8, &a.analyze("alpha"), 0);
        idx.insert(1u8, &a.analyze("beta"), 0);
        assert_eq!(idx.len(), 1);
        assert!(
            idx.search(&a.query_terms("alpha"), Bm25Params::default())
                .next()
                .is_none()
        );
        assert_eq!(idx.stats().terms, 1);
    }

    #[test]
    fn params_are_checked() {
        assert!(Bm25Params::default().validate().is_ok());
        let p = |k1, b, k3| Bm25Params { k1, b, k3 };
        assert_eq!(p(-1.0, 0.5, 8.0).validate(), Err("k1"));
        assert_eq!(p(1.0, 1.5, 8.0).validate(), Err("b"));
        assert_eq!(p(1.0, 0.5, 1_001.0).validate(), Err("k3"));
        assert_eq!(
            Bm25Params {
                k1: f32::NAN,
                ..Bm25Params::default()
            }
            .validate(),
            Err("k1")
        );
    }

    #[test]
    fn repeated_query_terms_weigh_more_within_a_bound() {
        let (a, idx) = index(&["cat", "dog"]);
        let score = |q: &str, k3: f32| {
            let p = Bm25Params {
                k3,
                ..Bm25Params::default()
            };
            let mut c = idx.bm25(&a.query_terms(q), p);
            c.sort_by_key(|c| c.key);
            c.iter().map(|c| c.score).collect::<Vec<_>>()
        };
        // Once each: equal weights, whatever k3.
        assert_eq!(score("cat dog", 8.0), score("cat dog", 0.0));
        // "cat" three times: (8 + 1) * 3 / (8 + 3) times its weight.
        let s = score("cat cat cat dog", 8.0);
        assert!((s[0] / s[1] - 27.0 / 11.0).abs() < 1e-5, "{s:?}");
        // k3 = 0 ignores repetition; the weight never exceeds k3 + 1.
        assert_eq!(score("cat cat cat dog", 0.0), score("cat dog", 0.0));
        let many = score(&"cat ".repeat(10_000), 8.0);
        assert!(many[0] <= 9.0 * std::f32::consts::LN_2 + 1e-4);
    }
}
