//! One scope's entries and search index held in memory.
//!
//! [`ScopeData`] keeps entries, the scope's inverted index, each session's
//! entries in time order (with every entry linked to its neighbours in its
//! session) and the scope's byte count in step: every mutation updates all
//! of them together. The in-memory store keeps one per scope; a durable
//! store can load one per active scope as its cache. A store whose vectors
//! are searched where they are stored (PostgreSQL's index for large
//! scopes) keeps a copy without them and hands its nearest candidates to
//! [`ScopeData::search_with_dense`].

use std::collections::BTreeSet;

// Entry ids and terms are hashed on every insert and search: foldhash
// (seeded per process) rather than SipHash, a measured share of both.
use foldhash::HashMap;
use std::sync::Arc;

use hippocamp_core::{EntryId, SessionId};
use hippocamp_search::{
    Bm25Params, Candidate, Fused, FusionParams, InvertedIndex, Ranked, TermFreqs, VectorSet, fuse,
};

mod lineage;
mod reply;

use crate::entry::MemoryEntry;
use crate::search::PreparedSearch;
use crate::store::{ScoreDetails, ScoreType, SearchHit, SearchMode, SearchResults};

#[derive(Debug, Clone)]
struct Stored {
    entry: Arc<MemoryEntry>,
    /// What it counts against quotas (its vector included).
    bytes: u64,
    /// What it costs a listing or a search's byte budget: what a reply
    /// carries, so never its vector.
    hit_bytes: u64,
    /// The previous and the next entry of its session by (time, id):
    /// kept with the entry so session cohesion finds a candidate's
    /// neighbours with the lookup that finds the candidate (two range
    /// descents per candidate were a fifth of a search).
    links: [Option<(u64, EntryId)>; 2],
    /// Whether its text states a time (`hippocamp_search::states_time`):
    /// read from its terms once, at insert.
    states_time: bool,
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
    /// Each session's entries by (time, id): what links an entry to its
    /// neighbours. Keyed by time, so a conversation's next turn goes in at
    /// the tree's right edge (a B-tree of random ids was a measured share
    /// of ingestion).
    sessions: HashMap<SessionId, BTreeSet<(u64, EntryId)>>,
    bytes: u64,
    /// Unit vectors of the entries, when the store embeds (created with
    /// the first vector; its width is the embedder's).
    vectors: Option<VectorSet<EntryId>>,
    /// The copy holds no vectors: they are searched where they are stored
    /// and come to [`ScopeData::search_with_dense`] as candidates.
    vectors_elsewhere: bool,
    /// Every entry by (timestamp, id): the order of listings.
    by_time: BTreeSet<(u64, EntryId)>,
    /// Entries with an expiry, by (expiry, id): what the sweeper looks at.
    expiring: BTreeSet<(u64, EntryId)>,
    /// Entries that cannot be deleted now or later (legal hold or
    /// retention), so an erasure checks them without walking the scope.
    guarded: BTreeSet<EntryId>,
    /// How long entries are indexed as passages.
    passages: hippocamp_search::PassageParams,
    /// What was derived from each entry, and each fact key's entries.
    lineage: lineage::LineageIndex,
}

/// The results of a search whose vector candidates came from elsewhere.
#[derive(Debug, Default)]
pub struct DenseSearch {
    /// The results (`entries_without_vectors` is the caller's to fill).
    pub results: SearchResults,
    /// The candidates ran out before the search was answered (a filter or
    /// the byte budget passed over too many): more of them may change the
    /// results.
    pub wants_more: bool,
}

/// Where a search's vector candidates come from.
enum Dense<'a> {
    /// Scored here, over the copy's vectors.
    Held(&'a VectorSet<EntryId>, &'a [f32]),
    /// The scope's nearest entries, scored elsewhere (unfiltered).
    Given(Vec<Candidate<EntryId>>),
}

/// A scored candidate on its way to a hit.
struct Scored {
    candidate: Candidate<EntryId>,
    details: Option<ScoreDetails>,
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

    /// One entry, expired or not (for the store's own bookkeeping).
    pub fn get(&self, id: &EntryId) -> Option<&MemoryEntry> {
        self.entries.get(id).map(|s| &*s.entry)
    }

    /// One entry as a caller may see it at `now_ms`: not expired.
    pub fn get_live(&self, id: &EntryId, now_ms: u64) -> Option<&MemoryEntry> {
        self.get(id).filter(|e| !e.obligations.expired(now_ms))
    }

    /// Whether deleting `ids` at `now_ms` is allowed (see
    /// [`check_deletes`](crate::entry::check_deletes)).
    pub fn check_deletes<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a EntryId>,
        now_ms: u64,
    ) -> hippocamp_core::Result<()> {
        crate::entry::check_deletes(
            ids.into_iter()
                .filter(|id| self.guarded.contains(id))
                .filter_map(|id| self.get(id))
                .map(|e| &e.obligations),
            now_ms,
        )
    }

    /// Whether deleting every entry at `now_ms` is allowed.
    pub fn check_delete_all(&self, now_ms: u64) -> hippocamp_core::Result<()> {
        self.check_deletes(&self.guarded, now_ms)
    }

    /// Up to `max` entries the sweeper may remove at `now_ms` (expired,
    /// neither held nor retained), earliest expiry first.
    pub fn sweepable(&self, now_ms: u64, max: usize) -> Vec<EntryId> {
        self.expiring
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .filter(|(_, id)| {
                self.get(id)
                    .is_some_and(|e| e.obligations.sweepable(now_ms))
            })
            .map(|(_, id)| *id)
            .take(max)
            .collect()
    }

    /// One page of live entries at `now_ms` in `order`, starting after
    /// `after` (a (timestamp, id) position), keeping those `keep` accepts,
    /// at most `limit` of them and at most `max_bytes` (at least one
    /// entry). Returns the entries and, when more may follow, the position
    /// of the last one.
    pub fn list(
        &self,
        newest_first: bool,
        after: Option<(u64, EntryId)>,
        limit: usize,
        max_bytes: u64,
        now_ms: u64,
        keep: impl Fn(&MemoryEntry) -> bool,
    ) -> (Vec<Arc<MemoryEntry>>, Option<(u64, EntryId)>) {
        use std::ops::Bound::{Excluded, Unbounded};
        let range: Box<dyn Iterator<Item = &(u64, EntryId)>> = match (newest_first, after) {
            (true, None) => Box::new(self.by_time.iter().rev()),
            (true, Some(a)) => Box::new(self.by_time.range((Unbounded, Excluded(a))).rev()),
            (false, None) => Box::new(self.by_time.iter()),
            (false, Some(a)) => Box::new(self.by_time.range((Excluded(a), Unbounded))),
        };
        let mut out = Vec::new();
        let mut used = 0u64;
        let mut last = None;
        for pos in range {
            let Some(stored) = self.entries.get(&pos.1) else {
                continue;
            };
            if stored.entry.obligations.expired(now_ms) || !keep(&stored.entry) {
                continue;
            }
            if out.len() == limit || (!out.is_empty() && used + stored.hit_bytes > max_bytes) {
                return (out, last);
            }
            used += stored.hit_bytes;
            out.push(Arc::clone(&stored.entry));
            last = Some(*pos);
        }
        (out, None)
    }

    /// Compares `entry` with what is stored under its id.
    pub fn existing(&self, entry: &MemoryEntry) -> Existing<'_> {
        match self.entries.get(&entry.id) {
            None => Existing::New,
            Some(s) if s.entry.is_resubmission(entry) => Existing::Duplicate(&s.entry),
            Some(_) => Existing::Conflict,
        }
    }

    /// What committing `prepared` would be against this scope.
    pub fn decide(&self, prepared: &crate::entry::PreparedEntry) -> crate::event::Decision {
        match self.existing(&prepared.entry) {
            Existing::New => crate::event::Decision::New,
            Existing::Duplicate(_) => crate::event::Decision::Duplicate,
            Existing::Conflict => crate::event::Decision::Conflict,
        }
    }

    /// Stores an entry with its analysed content, replacing one with the
    /// same id.
    pub fn insert(&mut self, entry: MemoryEntry, bytes: u64, terms: &TermFreqs) {
        use std::ops::Bound::{Excluded, Unbounded};
        self.remove(&entry.id);
        if self.passages.splits(entry.content.len()) {
            let passages = self.passages.split(&entry.content);
            // Analysed again, passage by passage: only long entries pay,
            // and nothing about passages is stored.
            let analyzer = hippocamp_search::analyzer::english();
            let terms: Vec<TermFreqs> = passages
                .iter()
                .map(|r| analyzer.analyze(&entry.content[r.clone()]))
                .collect();
            self.index
                .insert_passages(entry.id, &terms, recency(&entry));
        } else {
            self.index.insert(entry.id, terms, recency(&entry));
        }
        let at = (entry.timestamp_ms, entry.id);
        let mut links = [None, None];
        if let Some(s) = &entry.provenance.session_id {
            // Looked up before inserting: cloning the id for every entry
            // of a known session was an allocation per insert.
            if let Some(ids) = self.sessions.get_mut(s) {
                links = [
                    ids.range(..at).next_back().copied(),
                    ids.range((Excluded(at), Unbounded)).next().copied(),
                ];
                ids.insert(at);
            } else {
                self.sessions.insert(s.clone(), BTreeSet::from([at]));
            }
            self.relink(links[0], 1, Some(at));
            self.relink(links[1], 0, Some(at));
        }
        self.by_time.insert(at);
        let o = &entry.obligations;
        if let Some(at) = o.expires_at_ms {
            self.expiring.insert((at, entry.id));
        }
        if o.legal_hold || o.retain_until_ms.is_some() {
            self.guarded.insert(entry.id);
        }
        self.bytes += bytes;
        self.lineage.insert(&entry);
        self.entries.insert(
            entry.id,
            Stored {
                hit_bytes: entry.storage_bytes(),
                entry: Arc::new(entry),
                bytes,
                links,
                states_time: hippocamp_search::states_time(terms),
            },
        );
    }

    /// Points `entry`'s previous (`side` 0) or next (1) link at `to`.
    fn relink(&mut self, entry: Option<(u64, EntryId)>, side: usize, to: Option<(u64, EntryId)>) {
        if let Some(s) = entry.and_then(|(_, id)| self.entries.get_mut(&id)) {
            s.links[side] = to;
        }
    }

    /// What entry `id` was counted at when it was inserted.
    pub fn bytes_of(&self, id: &EntryId) -> Option<u64> {
        self.entries.get(id).map(|s| s.bytes)
    }

    /// Stores the vector of entry `id` (already inserted); `false` if it
    /// is unknown or the width differs from the scope's vectors. A copy
    /// whose vectors are kept elsewhere accepts it and keeps nothing.
    pub fn insert_vector(&mut self, id: EntryId, vector: &[f32]) -> bool {
        let Some(stored) = self.entries.get(&id) else {
            return false;
        };
        if self.vectors_elsewhere {
            return true;
        }
        let r = recency(&stored.entry);
        self.vectors
            .get_or_insert_with(|| VectorSet::new(vector.len()))
            .insert(id, vector, r)
    }

    /// From now on the copy keeps no vectors (and drops those it held):
    /// they are searched where they are stored.
    pub fn keep_vectors_elsewhere(&mut self) {
        self.vectors_elsewhere = true;
        self.vectors = None;
    }

    /// Whether the copy holds its entries' vectors (searches with a vector
    /// run here), rather than leaving them where they are stored.
    pub fn holds_vectors(&self) -> bool {
        !self.vectors_elsewhere
    }

    /// Entries without a vector (added before an embedder was configured).
    pub fn missing_vectors(&self) -> u64 {
        self.len() - self.vectors.as_ref().map_or(0, |v| v.len() as u64)
    }

    /// Removes an entry; returns it with its byte count.
    pub fn remove(&mut self, id: &EntryId) -> Option<(Arc<MemoryEntry>, u64)> {
        let stored = self.entries.remove(id)?;
        self.index.remove(id);
        self.by_time.remove(&(stored.entry.timestamp_ms, *id));
        if let Some(at) = stored.entry.obligations.expires_at_ms {
            self.expiring.remove(&(at, *id));
        }
        self.guarded.remove(id);
        self.lineage.remove(&stored.entry);
        if let Some(v) = &mut self.vectors {
            v.remove(id);
        }
        if let Some(s) = &stored.entry.provenance.session_id
            && let Some(ids) = self.sessions.get_mut(s)
        {
            ids.remove(&(stored.entry.timestamp_ms, *id));
            if ids.is_empty() {
                self.sessions.remove(s);
            }
            let [prev, next] = stored.links;
            self.relink(prev, 1, next);
            self.relink(next, 0, prev);
        }
        self.bytes -= stored.bytes;
        Some((stored.entry, stored.bytes))
    }

    /// Ids of a session's entries.
    pub fn session_entries(&self, session: &SessionId) -> Vec<EntryId> {
        self.sessions
            .get(session)
            .map(|ids| ids.iter().map(|&(_, id)| id).collect())
            .unwrap_or_default()
    }

    /// Every id.
    pub fn ids(&self) -> Vec<EntryId> {
        self.entries.keys().copied().collect()
    }

    /// Drops everything; returns the entries and bytes released.
    pub fn clear(&mut self) -> (u64, u64) {
        let released = (self.len(), self.bytes);
        *self = Self::with_passages(self.passages);
        released
    }

    /// An empty scope whose long entries are indexed as `passages` say
    /// (`default()` uses the default parameters).
    pub fn with_passages(passages: hippocamp_search::PassageParams) -> Self {
        Self {
            passages,
            ..Self::default()
        }
    }

    /// Runs a prepared search: BM25 over this scope's statistics, then the
    /// filter, then the limit and byte budget. A hit that does not fit the
    /// budget is skipped and later, smaller hits are still taken.
    pub fn search(&self, q: &PreparedSearch, params: Bm25Params) -> SearchResults {
        if q.terms.is_empty() {
            return SearchResults::default();
        }
        let mut out = if q.staged() {
            self.search_supported(q, params)
        } else {
            let mut ranked = self
                .index
                .search(&q.terms, params)
                .expecting(q.limit)
                .map(|c| Scored {
                    candidate: c,
                    details: None,
                });
            self.collect(q, &mut ranked, ScoreType::Bm25, params)
        };
        self.explain(&mut out, q, params, None);
        out
    }

    /// Lexical search with session cohesion ([`hippocamp_search::cohesion`]):
    /// the best `depth` BM25 candidates and their neighbours, scored with
    /// neighbour support, then the rest of the matches in BM25 order,
    /// merged so the walk stays best first.
    fn search_supported(&self, q: &PreparedSearch, params: Bm25Params) -> SearchResults {
        let depth = q.neighbours.depth.max(q.limit);
        // Only live entries the filter keeps lend support (as each arm of
        // a hybrid search selects its candidates): an expired or
        // filtered-out entry never moves another up.
        let all_match = self.all_match(q);
        let keep = |k: &EntryId| all_match || self.matches(k, q);
        let mut matches = self.index.search(&q.terms, params).expecting(depth);
        let head: Vec<Candidate<EntryId>> = matches
            .by_ref()
            .filter(|c| keep(&c.key))
            .take(depth)
            .collect();
        let (mut supported, seen) = self.staged(&head, q.limit, q);
        // The best `limit` are in order; should the walk go past them
        // (hits the filter or the budget skip), the rest is ordered then.
        let ordered = q.limit.min(supported.len());
        let mut rest_sorted = false;
        let mut at = 0;
        let mut head = std::iter::from_fn(move || {
            if at == ordered && !rest_sorted {
                supported[ordered..].sort_unstable_by_key(|s| std::cmp::Reverse(s.candidate));
                rest_sorted = true;
            }
            let next = supported.get(at).map(|s| s.candidate);
            at += 1;
            next
        })
        .peekable();
        let mut tail = matches
            .filter(|c| seen.binary_search(&c.key).is_err())
            .peekable();
        let mut ranked = std::iter::from_fn(|| {
            let next = match (head.peek(), tail.peek()) {
                (Some(h), Some(t)) if t > h => tail.next(),
                (Some(_), _) => head.next(),
                (None, _) => tail.next(),
            }?;
            Some(Scored {
                candidate: next,
                details: None,
            })
        });
        self.collect(q, &mut ranked, ScoreType::Bm25, params)
    }

    /// `head` through the stages after the first score: session cohesion
    /// (when on) and the time factor ([`hippocamp_search::cohesion`]),
    /// the best `first` in order at the front; and the keys, sorted.
    fn staged(
        &self,
        head: &[Candidate<EntryId>],
        first: usize,
        q: &PreparedSearch,
    ) -> (Vec<hippocamp_search::Supported<EntryId>>, Vec<EntryId>) {
        let cohesive = q.neighbours.enabled && q.neighbours.weight > 0.0;
        let weight = if cohesive { q.neighbours.weight } else { 0.0 };
        let neighbours = |k: &EntryId| {
            if cohesive {
                self.neighbours(k)
            } else {
                [None, None]
            }
        };
        hippocamp_search::cohesion(head, weight, first, neighbours, self.time_boost(q))
    }

    /// The time stage's factor for each entry, for this query
    /// ([`hippocamp_search::TimeQuery::boost`]); 1 for every entry when
    /// the stage is off or the query says nothing about time.
    fn time_boost(&self, q: &PreparedSearch) -> impl Fn(&EntryId) -> f32 + '_ {
        let timed = q.timed();
        let reference = q.reference_ms.unwrap_or(q.now_ms);
        let span = q.time.span(i64::try_from(reference).unwrap_or(i64::MAX));
        let (time, weight) = (q.time, q.time_params.weight);
        move |k: &EntryId| {
            if !timed {
                return 1.0;
            }
            self.entries.get(k).map_or(1.0, |s| {
                time.boost(weight, s.states_time, recency(&s.entry), span)
            })
        }
    }

    /// The entries of the same session just before and after `key` by
    /// (time, id), with their recency. An entry without a session has no
    /// neighbours.
    fn neighbours(&self, key: &EntryId) -> [Option<(EntryId, i64)>; 2] {
        self.entries.get(key).map_or([None, None], |s| {
            s.links
                .map(|l| l.map(|(t, id)| (id, i64::try_from(t).unwrap_or(i64::MAX))))
        })
    }

    /// Runs a prepared search in `mode` with the query's vector: `vector`
    /// ranks by dot product; `hybrid` fuses the top of the BM25 and the
    /// vector lists (`fusion`); then the filter, limit and byte budget as
    /// for BM25. In hybrid mode the filter selects each arm's candidates
    /// before fusion.
    pub fn search_vectors(
        &self,
        q: &PreparedSearch,
        mode: SearchMode,
        query_vector: &[f32],
        params: Bm25Params,
        fusion: &FusionParams,
    ) -> SearchResults {
        let mut out = self.search_vectors_in(q, mode, query_vector, params, fusion);
        if mode != SearchMode::Lexical {
            out.entries_without_vectors = self.missing_vectors();
        }
        out
    }

    fn search_vectors_in(
        &self,
        q: &PreparedSearch,
        mode: SearchMode,
        query_vector: &[f32],
        params: Bm25Params,
        fusion: &FusionParams,
    ) -> SearchResults {
        let Some(vectors) = &self.vectors else {
            return match mode {
                SearchMode::Vector => SearchResults::default(),
                _ => self.search(q, params),
            };
        };
        self.search_dense_in(q, mode, Dense::Held(vectors, query_vector), params, fusion)
            .results
    }

    /// Runs a prepared search in `mode` as [`search_vectors`] does, with
    /// the scope's entries nearest the query found elsewhere (`dense`: best
    /// first or not, unfiltered, scored by dot product): `vector` ranks
    /// them; `hybrid` fuses the `fusion.depth` of them the filter keeps
    /// with the BM25 list.
    ///
    /// [`search_vectors`]: ScopeData::search_vectors
    pub fn search_with_dense(
        &self,
        q: &PreparedSearch,
        mode: SearchMode,
        dense: Vec<Candidate<EntryId>>,
        params: Bm25Params,
        fusion: &FusionParams,
    ) -> DenseSearch {
        self.search_dense_in(q, mode, Dense::Given(dense), params, fusion)
    }

    fn search_dense_in(
        &self,
        q: &PreparedSearch,
        mode: SearchMode,
        dense: Dense<'_>,
        params: Bm25Params,
        fusion: &FusionParams,
    ) -> DenseSearch {
        match mode {
            SearchMode::Lexical => DenseSearch {
                results: self.search(q, params),
                wants_more: false,
            },
            SearchMode::Vector => {
                let candidates = match dense {
                    Dense::Held(vectors, query) => vectors.search(query, vectors.len().max(1)),
                    Dense::Given(given) => given,
                };
                let mut ranked = Ranked::new(candidates).map(|c| Scored {
                    candidate: c,
                    details: None,
                });
                let mut results = self.collect(q, &mut ranked, ScoreType::Vector, params);
                self.explain(&mut results, q, params, Some(fusion));
                // Short of the limit with every candidate walked.
                let wants_more = results.hits.len() < q.limit && ranked.next().is_none();
                DenseSearch {
                    results,
                    wants_more,
                }
            }
            SearchMode::Hybrid => {
                // The filter applies where each arm's candidates are made,
                // so a selective filter still fuses `depth` of its matches
                // from each side (not the few that survive the fused top).
                let all_match = self.all_match(q);
                let keep = |k: &EntryId| all_match || self.matches(k, q);
                let lexical: Vec<Candidate<EntryId>> = if q.terms.is_empty() {
                    Vec::new()
                } else {
                    self.index
                        .search(&q.terms, params)
                        .expecting(fusion.depth)
                        .filter(|c| keep(&c.key))
                        .take(fusion.depth)
                        .collect()
                };
                let dense: Vec<Candidate<EntryId>> = match dense {
                    Dense::Held(vectors, query) => vectors.search_where(query, fusion.depth, keep),
                    Dense::Given(mut given) => {
                        given.sort_unstable_by(|a, b| b.cmp(a));
                        given
                            .into_iter()
                            .filter(|c| self.matches(&c.key, q))
                            .take(fusion.depth)
                            .collect()
                    }
                };
                let wants_more = dense.len() < fusion.depth;
                let mut fused = fuse(lexical, dense, fusion);
                if q.staged() {
                    fused = self.supported_fused(&fused, q);
                }
                // At most twice `depth`, each with its details beside it:
                // the best `limit` sorted (usually all that is walked),
                // the rest only if the walk goes past them.
                let by_rank =
                    |a: &Fused<EntryId>, b: &Fused<EntryId>| b.candidate.cmp(&a.candidate);
                let limit = q.limit.min(fused.len());
                if limit > 0 && limit < fused.len() {
                    fused.select_nth_unstable_by(limit - 1, by_rank);
                }
                let (head, tail) = fused.split_at_mut(limit);
                head.sort_unstable_by(by_rank);
                let rest = std::iter::once(tail).flat_map(|tail| {
                    tail.sort_unstable_by(by_rank);
                    tail.iter()
                });
                let mut ranked = head.iter().chain(rest).map(|f| Scored {
                    details: Some(ScoreDetails {
                        bm25: f.bm25.map(f64::from),
                        vector: f.vector.map(f64::from),
                        fused: f64::from(f.own),
                    }),
                    candidate: f.candidate,
                });
                let mut results = self.collect(q, &mut ranked, ScoreType::Hybrid, params);
                self.explain(&mut results, q, params, Some(fusion));
                DenseSearch {
                    results,
                    wants_more,
                }
            }
        }
    }

    /// The fused list with the lexical stages after it (session cohesion,
    /// time), as lexical search runs them on BM25: each fused candidate
    /// and its session neighbours scored `(fused + weight × best
    /// neighbour's fused score) × time factor`. Each keeps its BM25 and
    /// vector scores beside it; `fused` in its details stays the fusion's
    /// own score (0 for a neighbour that entered through support), the
    /// candidate's score is the final one.
    fn supported_fused(&self, fused: &[Fused<EntryId>], q: &PreparedSearch) -> Vec<Fused<EntryId>> {
        let head: Vec<Candidate<EntryId>> = fused.iter().map(|f| f.candidate).collect();
        let (supported, _) = self.staged(&head, head.len(), q);
        let sides: foldhash::HashMap<EntryId, (Option<f32>, Option<f32>)> = fused
            .iter()
            .map(|f| (f.candidate.key, (f.bm25, f.vector)))
            .collect();
        supported
            .into_iter()
            .map(|s| {
                let (bm25, vector) = sides.get(&s.candidate.key).copied().unwrap_or_default();
                Fused {
                    candidate: s.candidate,
                    bm25,
                    vector,
                    own: s.own,
                }
            })
            .collect()
    }

    /// Whether every entry of the index and the vectors passes the
    /// search's filter: none filtered, none expired (the earliest expiry
    /// is still ahead). Then an arm's candidates need no lookup each
    /// (they are all entries: both are updated with `entries`).
    fn all_match(&self, q: &PreparedSearch) -> bool {
        q.filter.is_all()
            && self.expiring.first().is_none_or(|&(at, _)| at > q.now_ms)
            && self.all_visible(q)
    }

    /// Whether entry `key` is live and passes the search's filter.
    fn matches(&self, key: &EntryId, q: &PreparedSearch) -> bool {
        self.entries.get(key).is_some_and(|s| {
            !s.entry.obligations.expired(q.now_ms)
                && q.filter.matches(&s.entry.metadata)
                && self.visible(&s.entry, q)
        })
    }

    /// The byte range of the passage of `entry` that matches the query
    /// best, when it is indexed as passages and one matches.
    fn passage(
        &self,
        entry: &MemoryEntry,
        q: &PreparedSearch,
        params: Bm25Params,
    ) -> Option<crate::store::PassageSpan> {
        let p = self.index.best_passage(&entry.id, &q.terms, params)?;
        let r = self.passages.split(&entry.content).into_iter().nth(p)?;
        Some(crate::store::PassageSpan {
            start: r.start as u64,
            end: r.end as u64,
        })
    }

    /// Walks ranked candidates applying the filter, limit and byte budget.
    fn collect(
        &self,
        q: &PreparedSearch,
        ranked: &mut impl Iterator<Item = Scored>,
        score_type: ScoreType,
        params: Bm25Params,
    ) -> SearchResults {
        let mut out = SearchResults::default();
        let mut used = 0u64;
        let min_hit = crate::entry::ENTRY_OVERHEAD_BYTES as u64;
        while out.hits.len() < q.limit {
            let Some(Scored {
                candidate: c,
                details,
            }) = ranked.next()
            else {
                break;
            };
            let Some(stored) = self.entries.get(&c.key) else {
                continue;
            };
            if stored.entry.obligations.expired(q.now_ms)
                || !q.filter.matches(&stored.entry.metadata)
                || !self.visible(&stored.entry, q)
            {
                continue;
            }
            if used + stored.hit_bytes > q.max_bytes {
                out.skipped_over_budget = true;
                if q.max_bytes - used < min_hit {
                    // Nothing else can fit.
                    break;
                }
                continue;
            }
            used += stored.hit_bytes;
            out.hits.push(SearchHit {
                entry: self.annotated(&stored.entry, q.now_ms),
                score: f64::from(c.score),
                score_type,
                details,
                explanation: None,
                context: None,
                passage: self.passage(&stored.entry, q, params),
            });
        }
        if q.context != (0, 0) {
            self.attach_context(&mut out, q, used);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use hippocamp_core::{MemoryLimits, MemoryScope};
    use hippocamp_search::Analyzer;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::entry::{NewEntry, prepare_entry};
    use crate::store::SearchRequest;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.iter().map(|x| x / n).collect()
    }

    /// A scope of `docs` (words, vector, tag) with vectors held.
    fn scope_of(docs: &[(String, Vec<f32>, bool)]) -> ScopeData {
        let (limits, analyzer) = (MemoryLimits::default(), Analyzer::english());
        let scope = MemoryScope::parse("app", "u").unwrap();
        let mut data = ScopeData::default();
        for (i, (text, v, tag)) in docs.iter().enumerate() {
            let meta = json!({"tag": tag, "i": i}).as_object().unwrap().clone();
            let p =
                prepare_entry(&scope, NewEntry::new(text.clone()).metadata(meta), &limits).unwrap();
            let id = p.entry.id;
            data.insert(p.entry, p.storage_bytes, &analyzer.analyze(text));
            assert!(data.insert_vector(id, &unit(v)));
        }
        data
    }

    fn ids(r: &SearchResults) -> Vec<EntryId> {
        r.hits.iter().map(|h| h.entry.id).collect()
    }

    fn docs() -> impl Strategy<Value = Vec<(String, Vec<f32>, bool)>> {
        let words = prop::sample::select(vec!["apple", "pear", "plum", "fig", "kiwi", "lime"]);
        prop::collection::vec(
            (
                prop::collection::vec(words, 1..5).prop_map(|w| w.join(" ")),
                prop::collection::vec(-1.0f32..1.0, 4),
                any::<bool>(),
            ),
            1..40,
        )
    }

    proptest! {
        /// Given every entry's candidate, a search with vectors from
        /// elsewhere answers what the held vectors answer, in both modes,
        /// filtered or not, and wants nothing more.
        #[test]
        fn given_every_candidate_equals_the_held_vectors(
            docs in docs(),
            query in prop::collection::vec(-1.0f32..1.0, 4),
            filtered in any::<bool>(),
            limit in 1u64..10,
        ) {
            let data = scope_of(&docs);
            let query = unit(&query);
            let mut req = SearchRequest::new("apple fig").limit(limit);
            if filtered {
                req = req.filter(json!({"tag": true}));
            }
            let q = crate::search::prepare_search(&req, &crate::MemoryConfig::default(), &Analyzer::english()).unwrap();
            let fusion = FusionParams { depth: 5, ..FusionParams::default() };
            let params = Bm25Params::default();
            let all = data.vectors.as_ref().unwrap().search(&query, docs.len());
            for mode in [SearchMode::Vector, SearchMode::Hybrid] {
                let held = data.search_vectors(&q, mode, &query, params, &fusion);
                let given = data.search_with_dense(&q, mode, all.clone(), params, &fusion);
                prop_assert_eq!(ids(&held), ids(&given.results));
                let kept = all.iter().filter(|c| data.matches(&c.key, &q)).count();
                let short = match mode {
                    SearchMode::Hybrid => kept < fusion.depth,
                    _ => given.results.hits.len() < q.limit,
                };
                // Every candidate given: it wants more only when there
                // are no more to have.
                prop_assert_eq!(given.wants_more, short);
            }
        }

        /// A hybrid search sorts only the best `limit` of the fused list
        /// and the rest if its walk goes on (entries over the byte
        /// budget are passed over): its hits are those of a walk of the
        /// whole list in rank order, with the same budget.
        #[test]
        fn hybrid_hits_are_a_walk_of_the_whole_fused_ranking(
            docs in docs(),
            query in prop::collection::vec(-1.0f32..1.0, 4),
            filtered in any::<bool>(),
            limit in 1u64..6,
            budget in 200u64..1_500,
        ) {
            let data = scope_of(&docs);
            let query = unit(&query);
            let (config, analyzer) = (crate::MemoryConfig::default(), Analyzer::english());
            let fusion = FusionParams { depth: 8, ..FusionParams::default() };
            let params = Bm25Params::default();
            let mut whole = SearchRequest::new("apple fig").limit(50);
            let mut walked = SearchRequest::new("apple fig").limit(limit).max_bytes(budget);
            if filtered {
                whole = whole.filter(json!({"tag": true}));
                walked = walked.filter(json!({"tag": true}));
            }
            let whole = crate::search::prepare_search(&whole, &config, &analyzer).unwrap();
            let walked = crate::search::prepare_search(&walked, &config, &analyzer).unwrap();
            let ranking = data.search_vectors(&whole, SearchMode::Hybrid, &query, params, &fusion);
            let mut want = Vec::new();
            let mut used = 0;
            for hit in &ranking.hits {
                let bytes = data.entries[&hit.entry.id].hit_bytes;
                if want.len() < walked.limit && used + bytes <= walked.max_bytes {
                    used += bytes;
                    want.push(hit.entry.id);
                }
            }
            let got = data.search_vectors(&walked, SearchMode::Hybrid, &query, params, &fusion);
            prop_assert_eq!(ids(&got), want);
        }

        /// Whatever is inserted, replaced and removed, every entry's links
        /// are its session's previous and next entries by (time, id).
        #[test]
        fn links_are_the_neighbours_in_the_session(
            ops in prop::collection::vec((0u8..12, 0u8..3, 0u64..6, any::<bool>()), 1..60),
        ) {
            let (limits, analyzer) = (MemoryLimits::default(), Analyzer::english());
            let scope = MemoryScope::parse("app", "u").unwrap();
            let mut data = ScopeData::default();
            for (key, session, time, remove) in ops {
                let entry = |session: u8, time: u64| {
                    let provenance = crate::entry::Provenance {
                        session_id: (session > 0)
                            .then(|| SessionId::new(format!("s{session}")).unwrap()),
                        timestamp_ms: Some(time),
                        ..Default::default()
                    };
                    NewEntry::new("fig")
                        .provenance(provenance)
                        .idempotency_key(hippocamp_core::IdempotencyKey::new(format!("k{key}")).unwrap())
                };
                let p = prepare_entry(&scope, entry(session, time), &limits).unwrap();
                if remove {
                    data.remove(&p.entry.id);
                } else {
                    data.insert(p.entry, p.storage_bytes, &analyzer.analyze("fig"));
                }
            }
            let mut order: Vec<(Option<SessionId>, u64, EntryId)> = data
                .entries
                .values()
                .map(|s| (s.entry.provenance.session_id.clone(), s.entry.timestamp_ms, s.entry.id))
                .collect();
            order.sort();
            for (i, (session, _, id)) in order.iter().enumerate() {
                let at = |j: Option<usize>| {
                    let (s, t, id) = order.get(j?)?;
                    (session.is_some() && s == session)
                        .then(|| (*id, i64::try_from(*t).unwrap()))
                };
                prop_assert_eq!(data.neighbours(id), [at(i.checked_sub(1)), at(Some(i + 1))]);
            }
        }

        /// A copy that keeps its vectors elsewhere holds none, whatever
        /// is inserted into it.
        #[test]
        fn a_copy_without_vectors_keeps_none(docs in docs()) {
            let mut data = scope_of(&docs);
            data.keep_vectors_elsewhere();
            prop_assert!(!data.holds_vectors());
            let id = data.ids()[0];
            prop_assert!(data.insert_vector(id, &[1.0, 0.0, 0.0, 0.0]));
            prop_assert!(data.vectors.is_none());
        }
    }

    /// Fewer candidates than the filter needs: the search asks for more.
    #[test]
    fn too_few_candidates_want_more() {
        let docs: Vec<(String, Vec<f32>, bool)> = (0..20)
            .map(|i| {
                (
                    "apple".to_owned(),
                    vec![1.0, i as f32 / 20.0, 0.0, 0.0],
                    i % 4 == 0,
                )
            })
            .collect();
        let data = scope_of(&docs);
        let query = unit(&[1.0, 0.0, 0.0, 0.0]);
        let req = SearchRequest::new("apple")
            .limit(5)
            .filter(json!({"tag": true}));
        let q = crate::search::prepare_search(
            &req,
            &crate::MemoryConfig::default(),
            &Analyzer::english(),
        )
        .unwrap();
        let fusion = FusionParams {
            depth: 5,
            ..FusionParams::default()
        };
        let top4 = data.vectors.as_ref().unwrap().search(&query, 4);
        for mode in [SearchMode::Vector, SearchMode::Hybrid] {
            let r = data.search_with_dense(&q, mode, top4.clone(), Bm25Params::default(), &fusion);
            assert!(r.wants_more, "{mode:?}");
        }
    }
}
