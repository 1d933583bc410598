//! A scope's lineage indexes: which live entries were derived from each
//! entry, and each fact key's entries by time. Statuses are read from
//! them ([`ScopeData::state_of`]), never stored, so removing an entry
//! updates every status that depended on it.

use std::collections::BTreeSet;
use std::sync::Arc;

use foldhash::HashMap;
use hippocamp_core::{EntryId, FactKey};

use super::ScopeData;
use crate::entry::MemoryEntry;
use crate::lineage::{Lineage, LineageLink, Role, State, Status};
use crate::search::PreparedSearch;

/// The lineage indexes of one scope.
#[derive(Debug, Default)]
pub(super) struct LineageIndex {
    /// Each source's live derived entries, with what each does to it.
    derived: HashMap<EntryId, Vec<(EntryId, Role)>>,
    /// Each fact key's entries by (time, id): the last is the newest.
    facts: HashMap<FactKey, BTreeSet<(u64, EntryId)>>,
    /// Entries of a fact key that are not its newest (Σ group size − 1):
    /// when 0 and nothing is derived, every entry is current and a search
    /// skips the status look-ups.
    replaced: usize,
}

impl LineageIndex {
    pub(super) fn insert(&mut self, entry: &MemoryEntry) {
        for s in &entry.derived_from {
            self.derived
                .entry(s.entry)
                .or_default()
                .push((entry.id, s.role));
        }
        if let Some(k) = &entry.fact_key {
            let group = self.facts.entry(k.clone()).or_default();
            if !group.is_empty() {
                self.replaced += 1;
            }
            group.insert((entry.timestamp_ms, entry.id));
        }
    }

    pub(super) fn remove(&mut self, entry: &MemoryEntry) {
        for s in &entry.derived_from {
            if let Some(list) = self.derived.get_mut(&s.entry) {
                list.retain(|(d, _)| *d != entry.id);
                if list.is_empty() {
                    self.derived.remove(&s.entry);
                }
            }
        }
        if let Some(k) = &entry.fact_key
            && let Some(group) = self.facts.get_mut(k)
            && group.remove(&(entry.timestamp_ms, entry.id))
        {
            if group.is_empty() {
                self.facts.remove(k);
            } else {
                self.replaced -= 1;
            }
        }
    }

    /// Whether every entry is current.
    fn all_current(&self) -> bool {
        self.derived.is_empty() && self.replaced == 0
    }
}

impl ScopeData {
    /// The state of entry `id` at `now_ms`: merged while a live derived
    /// entry merged it, superseded while one supersedes it or a newer live
    /// entry (not itself merged) has its fact key, else current. An
    /// expired entry replaces nothing: it is gone for reads, sweep or not.
    pub fn state_of(&self, id: &EntryId, now_ms: u64) -> State {
        let l = &self.lineage;
        if l.all_current() {
            return State::default();
        }
        let live = |e: &EntryId| self.get_live(e, now_ms).is_some();
        let by_role = |role: Role| {
            l.derived.get(id).and_then(|ds| {
                ds.iter()
                    .find(|(d, r)| *r == role && live(d))
                    .map(|(d, _)| *d)
            })
        };
        if let Some(by) = by_role(Role::Merged) {
            return State {
                status: Status::Merged,
                by: Some(by),
            };
        }
        if let Some(by) = by_role(Role::Superseded) {
            return State {
                status: Status::Superseded,
                by: Some(by),
            };
        }
        if let Some(k) = self.get(id).and_then(|e| e.fact_key.as_ref())
            && let Some(group) = l.facts.get(k)
        {
            // The newest live entry of the key that is not merged away.
            let head = group.iter().rev().map(|(_, e)| *e).find(|e| {
                live(e)
                    && !l
                        .derived
                        .get(e)
                        .is_some_and(|ds| ds.iter().any(|(d, r)| *r == Role::Merged && live(d)))
            });
            if let Some(head) = head
                && head != *id
            {
                return State {
                    status: Status::Superseded,
                    by: Some(head),
                };
            }
        }
        State::default()
    }

    /// `entry` as a read at `now_ms` returns it: with its state.
    pub fn annotated(&self, entry: &Arc<MemoryEntry>, now_ms: u64) -> Arc<MemoryEntry> {
        let state = self.state_of(&entry.id, now_ms);
        if state == State::default() {
            Arc::clone(entry)
        } else {
            Arc::new((**entry).clone().with_state(state))
        }
    }

    /// One live entry at `now_ms`, with its state.
    pub fn read(&self, id: &EntryId, now_ms: u64) -> Option<MemoryEntry> {
        let e = self.get_live(id, now_ms)?;
        Some(e.clone().with_state(self.state_of(id, now_ms)))
    }

    /// Whether a search may return entry `e`: its origin is asked for and
    /// its status is current or asked for.
    pub(super) fn visible(&self, e: &MemoryEntry, q: &PreparedSearch) -> bool {
        if !q.lineage.origins.is_empty() && !q.lineage.origins.contains(&e.origin) {
            return false;
        }
        if q.lineage.include_merged && q.lineage.include_superseded {
            return true;
        }
        match self.state_of(&e.id, q.now_ms).status {
            Status::Current => true,
            Status::Merged => q.lineage.include_merged,
            Status::Superseded => q.lineage.include_superseded,
        }
    }

    /// Whether every entry passes the search's lineage rules (so its
    /// candidates need no look-up for them).
    pub(super) fn all_visible(&self, q: &PreparedSearch) -> bool {
        q.lineage.origins.is_empty()
            && (self.lineage.all_current()
                || (q.lineage.include_merged && q.lineage.include_superseded))
    }

    /// `ids` and every live entry derived from them, directly or through
    /// other derived entries: what erasing `ids` erases. Sources come
    /// first; each id once (`ids` are taken as given, duplicates and all,
    /// when nothing in the scope is derived).
    pub fn with_dependents(&self, ids: &[EntryId]) -> Vec<EntryId> {
        if self.lineage.derived.is_empty() {
            return ids.to_vec();
        }
        let mut seen: BTreeSet<EntryId> = BTreeSet::new();
        let mut out: Vec<EntryId> = Vec::with_capacity(ids.len());
        for id in ids {
            if seen.insert(*id) {
                out.push(*id);
            }
        }
        let mut i = 0;
        while i < out.len() {
            if let Some(ds) = self.lineage.derived.get(&out[i]) {
                for (d, _) in ds {
                    if seen.insert(*d) {
                        out.push(*d);
                    }
                }
            }
            i += 1;
        }
        out
    }

    /// What a sweep at `now_ms` of the expired entries `due` removes: each
    /// with everything derived from it, unless a hold or a retention on
    /// one of them keeps that whole lineage until it lifts (the expired
    /// entry is already invisible to reads).
    pub fn sweepable_with_dependents(&self, due: &[EntryId], now_ms: u64) -> Vec<EntryId> {
        let mut out = Vec::with_capacity(due.len());
        let mut seen = BTreeSet::new();
        for id in due {
            let ids = self.with_dependents(std::slice::from_ref(id));
            if self.check_deletes(&ids, now_ms).is_ok() {
                out.extend(ids.into_iter().filter(|i| seen.insert(*i)));
            }
        }
        out
    }

    /// Entry `id`'s lineage: its sources and the live entries derived from
    /// it, each with its origin and state.
    pub fn lineage_of(&self, id: &EntryId, now_ms: u64) -> Option<Lineage> {
        let e = self.get_live(id, now_ms)?;
        let link = |entry: EntryId, role: Role| {
            self.get_live(&entry, now_ms).map(|s| LineageLink {
                entry,
                role,
                origin: s.origin,
                status: self.state_of(&entry, now_ms).status,
            })
        };
        Some(Lineage {
            sources: e
                .derived_from
                .iter()
                .filter_map(|s| link(s.entry, s.role))
                .collect(),
            derived: self
                .lineage
                .derived
                .get(id)
                .into_iter()
                .flatten()
                .filter_map(|(d, r)| link(*d, *r))
                .collect(),
            file: e.file.clone(),
        })
    }

    /// Checks that every source of a derived entry is a live entry of
    /// this scope at `now_ms`.
    fn check_sources(&self, entry: &MemoryEntry, now_ms: u64) -> hippocamp_core::Result<()> {
        match entry
            .derived_from
            .iter()
            .find(|s| self.get_live(&s.entry, now_ms).is_none())
        {
            Some(s) => Err(hippocamp_core::Error::SourceGone(s.entry)),
            None => Ok(()),
        }
    }

    /// Admits a derived entry about to be written at `now_ms`: every
    /// source must be live ([`Error::SourceGone`] otherwise), and it lives
    /// no longer than its shortest-lived source (it takes the earliest
    /// expiry among its own and theirs). A store calls it under the
    /// scope's write lock, in the write's transaction; an entry that is
    /// not derived passes unchanged.
    ///
    /// [`Error::SourceGone`]: hippocamp_core::Error::SourceGone
    pub fn admit_derived(
        &self,
        entry: &mut MemoryEntry,
        now_ms: u64,
    ) -> hippocamp_core::Result<()> {
        if !entry.is_derived() {
            return Ok(());
        }
        self.check_sources(entry, now_ms)?;
        let sources = entry
            .derived_from
            .iter()
            .filter_map(|s| self.get(&s.entry))
            .map(|e| e.obligations.expires_at_ms);
        entry.obligations.expires_at_ms =
            crate::lineage::inherited_expiry(entry.obligations.expires_at_ms, sources);
        Ok(())
    }
}
