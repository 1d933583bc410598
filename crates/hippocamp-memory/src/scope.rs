//! One scope's entries and search index held in memory.
//!
//! [`ScopeData`] keeps entries, the scope's inverted index, a session →
//! entries map and the scope's byte count in step: every mutation updates
//! all of them together. The in-memory store keeps one per scope; a durable
//! store can load one per active scope as its cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hippocamp_core::{EntryId, SessionId};
use hippocamp_search::{Bm25Params, InvertedIndex, TermFreqs};

use crate::entry::MemoryEntry;
use crate::search::PreparedSearch;
use crate::store::{ScoreType, SearchHit, SearchResults};

#[derive(Debug, Clone)]
struct Stored {
    entry: Arc<MemoryEntry>,
    bytes: u64,
}

/// What a scope already holds under a prepared entry's id.
#[derive(Debug, PartialEq)]
pub enum Existing<'a> {
    /// Nothing: the entry is new.
    New,
    /// The same data: a duplicate.
    Duplicate(&'a MemoryEntry),
    /// Different data under the same id: an idempotency conflict.
    Conflict,
}

/// A scope's entries, index and counters.
#[derive(Debug, Default)]
pub struct ScopeData {
    entries: HashMap<EntryId, Stored>,
    index: InvertedIndex<EntryId>,
    sessions: HashMap<SessionId, BTreeSet<EntryId>>,
    bytes: u64,
}

fn recency(entry: &MemoryEntry) -> i64 {
    i64::try_from(entry.timestamp_ms).unwrap_or(i64::MAX)
}

impl ScopeData {
    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Whether the scope holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, as counted by quotas.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// One entry.
    pub fn get(&self, id: &EntryId) -> Option<&MemoryEntry> {
        self.entries.get(id).map(|s| &*s.entry)
    }

    /// Compares `entry` with what is stored under its id.
    pub fn existing(&self, entry: &MemoryEntry) -> Existing<'_> {
        match self.entries.get(&entry.id) {
            None => Existing::New,
            Some(s) if s.entry.same_data(entry) => Existing::Duplicate(&s.entry),
            Some(_) => Existing::Conflict,
        }
    }

    /// Stores an entry with its analysed content, replacing one with the
    /// same id.
    pub fn insert(&mut self, entry: MemoryEntry, bytes: u64, terms: &TermFreqs) {
        self.remove(&entry.id);
        self.index.insert(entry.id, terms, recency(&entry));
        if let Some(s) = &entry.provenance.session_id {
            self.sessions.entry(s.clone()).or_default().insert(entry.id);
        }
        self.bytes += bytes;
        self.entries.insert(
            entry.id,
            Stored {
                entry: Arc::new(entry),
                bytes,
            },
        );
    }

    /// Removes an entry; returns it with its byte count.
    pub fn remove(&mut self, id: &EntryId) -> Option<(Arc<MemoryEntry>, u64)> {
        let stored = self.entries.remove(id)?;
        self.index.remove(id);
        if let Some(s) = &stored.entry.provenance.session_id
            && let Some(ids) = self.sessions.get_mut(s)
        {
            ids.remove(id);
            if ids.is_empty() {
                self.sessions.remove(s);
            }
        }
        self.bytes -= stored.bytes;
        Some((stored.entry, stored.bytes))
    }

    /// Ids of a session's entries.
    pub fn session_entries(&self, session: &SessionId) -> Vec<EntryId> {
        self.sessions
            .get(session)
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Every id.
    pub fn ids(&self) -> Vec<EntryId> {
        self.entries.keys().copied().collect()
    }

    /// Drops everything; returns the entries and bytes released.
    pub fn clear(&mut self) -> (u64, u64) {
        let released = (self.len(), self.bytes);
        *self = Self::default();
        released
    }

    /// Runs a prepared search: BM25 over this scope's statistics, then the
    /// filter, then the limit and byte budget. A hit that does not fit the
    /// budget is skipped and later, smaller hits are still taken.
    pub fn search(&self, q: &PreparedSearch, params: Bm25Params) -> SearchResults {
        let mut out = SearchResults::default();
        if q.terms.is_empty() {
            return out;
        }
        let mut used = 0u64;
        let min_hit = crate::entry::ENTRY_OVERHEAD_BYTES as u64;
        let mut ranked = self.index.search(&q.terms, params);
        while out.hits.len() < q.limit {
            let Some(c) = ranked.next() else { break };
            let Some(stored) = self.entries.get(&c.key) else {
                continue;
            };
            if !q.filter.matches(&stored.entry.metadata) {
                continue;
            }
            if used + stored.bytes > q.max_bytes {
                out.skipped_over_budget = true;
                if q.max_bytes - used < min_hit {
                    // Nothing else can fit.
                    break;
                }
                continue;
            }
            used += stored.bytes;
            out.hits.push(SearchHit {
                entry: Arc::clone(&stored.entry),
                score: f64::from(c.score),
                score_type: ScoreType::Bm25,
            });
        }
        out
    }
}
