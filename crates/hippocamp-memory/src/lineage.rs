//! Lineage: where an entry came from, what it was derived from, and what
//! state it is in.
//!
//! An entry's `origin`, `derived_from` and `fact_key` are written with it
//! and never change. Its status is not stored: it is read from the scope
//! (see [`crate::scope::ScopeData::status_of`]). An entry is `merged` while
//! a live derived entry lists it as merged, `superseded` while a live
//! derived entry lists it as superseded or a newer entry has its fact key,
//! and `current` otherwise. So removing a derived entry (an erasure, a
//! revert) makes what it replaced current again with no write, and an
//! erased entry never comes back: it is gone, not hidden.
//!
//! Erasure follows lineage: every store erases, in the same operation, each
//! derived entry whose `derived_from` reaches an erased entry
//! ([`crate::scope::ScopeData::with_dependents`]), and refuses to write a
//! derived entry whose sources are not all live ([`Error::SourceGone`]).

use hippocamp_core::{EntryId, Error, Result};
use serde::{Deserialize, Serialize};

/// Where an entry came from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Ingested from a conversation event (its provenance names the event).
    Turn,
    /// Added directly.
    #[default]
    Note,
    /// Text indexed from an artifact version.
    File,
    /// Derived by consolidation from other entries (`derived_from`).
    Fact,
}

impl Origin {
    /// The origin of an entry that is not derived: a turn when its
    /// provenance names an event, else a note. (Entries written before
    /// origins were stored read as this.)
    pub fn of_provenance(p: &crate::entry::Provenance) -> Self {
        if p.event_ids.is_empty() {
            Origin::Note
        } else {
            Origin::Turn
        }
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Turn => "turn",
            Origin::Note => "note",
            Origin::File => "file",
            Origin::Fact => "fact",
        }
    }
}

/// What a derived entry does to one of its sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The source was merged into the derived entry: it is `merged` while
    /// the derived entry lives.
    Merged,
    /// The derived entry replaces the source: it is `superseded` while the
    /// derived entry lives.
    Superseded,
    /// The source is evidence for the derived entry and stays current.
    Evidence,
}

/// One source of a derived entry: an entry of the same scope, with what
/// the derived entry does to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The source entry.
    pub entry: EntryId,
    /// What the derived entry does to it.
    pub role: Role,
}

/// The artifact version a `file` entry's text was indexed from. A file
/// entry is written by the services' artifact layer when a version is
/// stored and erased when that version is, so it never outlives the file;
/// a client cannot name one (`NewEntry::file` is in no wire format).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSource {
    /// The artifact's name in the user's scope.
    pub name: String,
    /// Its version (never reused).
    pub version: u64,
}

/// The most bytes of a [`FileSource`]'s name (the artifact stores' own
/// bound on a name).
pub const MAX_FILE_NAME_BYTES: usize = 1_024;

impl FileSource {
    /// Checks the name (1..=[`MAX_FILE_NAME_BYTES`] bytes, no NUL) and
    /// the version (positive).
    pub fn check(&self) -> Result<()> {
        use hippocamp_core::{Field, Problem};
        if self.name.is_empty() {
            return Err(Error::invalid(Field::Name, Problem::Empty));
        }
        if self.name.len() > MAX_FILE_NAME_BYTES {
            return Err(Error::invalid(
                Field::Name,
                Problem::TooLong {
                    len: self.name.len(),
                    max: MAX_FILE_NAME_BYTES,
                },
            ));
        }
        if self.name.contains('\0') {
            return Err(Error::invalid(Field::Name, Problem::ContainsNul));
        }
        if self.version == 0 {
            return Err(Error::invalid(
                Field::Version,
                Problem::Relation("a file version is positive"),
            ));
        }
        Ok(())
    }

    /// The idempotency key its entry's id is derived from: one entry per
    /// version, so indexing a version twice finds the first.
    pub fn idempotency_key(&self) -> Result<hippocamp_core::IdempotencyKey> {
        hippocamp_core::IdempotencyKey::new(format!("file:{}:{}", self.name_hash(), self.version))
    }

    /// The id of its entry in `scope`.
    pub fn entry_id(&self, scope: &hippocamp_core::MemoryScope) -> Result<EntryId> {
        Ok(EntryId::derive(scope, &self.idempotency_key()?))
    }

    /// The fact key every version of the file shares: the newest indexed
    /// version supersedes the older ones, so a search finds a file's
    /// current text, and erasing the newest makes the one before current
    /// again.
    pub fn fact_key(&self) -> Result<hippocamp_core::FactKey> {
        hippocamp_core::FactKey::new(format!("file:{}", self.name_hash()))
    }

    fn name_hash(&self) -> String {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(self.name.as_bytes()))
    }
}

/// The most sources one derived entry may name.
pub const MAX_SOURCES: usize = 256;

/// The capabilities rows of lineage's fixed bounds.
pub fn describe() -> Vec<hippocamp_core::LimitInfo> {
    use hippocamp_core::LimitInfo;
    vec![
        LimitInfo::fixed(
            "max_derived_sources",
            MAX_SOURCES as u64,
            1,
            "sources one derived entry names (a larger dedupe group becomes several facts)",
        ),
        LimitInfo::fixed(
            "max_fact_key_bytes",
            hippocamp_core::ident::MAX_FACT_KEY_BYTES as u64,
            1,
            "bytes of an entry's fact_key",
        ),
    ]
}

/// How a derived entry is made: set by consolidation, never by a client
/// (`NewEntry::derivation` is not part of any wire format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derivation {
    /// Its sources (1..=[`MAX_SOURCES`], each once).
    pub sources: Vec<Source>,
    /// The consolidation run that derived it.
    pub run: Option<String>,
}

impl Derivation {
    /// Checks the sources: at least one, at most [`MAX_SOURCES`], no entry
    /// twice.
    pub fn check(&self) -> Result<()> {
        use hippocamp_core::{Field, Problem};
        if self.sources.is_empty() {
            return Err(Error::invalid(Field::Consolidation, Problem::Empty));
        }
        if self.sources.len() > MAX_SOURCES {
            return Err(Error::invalid(
                Field::Consolidation,
                Problem::TooMany {
                    count: self.sources.len(),
                    max: MAX_SOURCES,
                },
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.sources {
            if !seen.insert(s.entry) {
                return Err(Error::invalid(
                    Field::Consolidation,
                    Problem::Relation("a derived entry names one source twice"),
                ));
            }
        }
        Ok(())
    }
}

/// An entry's state, read from its scope.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Searched and preloaded.
    #[default]
    Current,
    /// Replaced by a newer entry (`superseded_by`).
    Superseded,
    /// Merged into a derived entry (`merged_into`).
    Merged,
}

impl Status {
    /// Whether it is [`Status::Current`] (serde's skip test).
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
    pub fn is_current(&self) -> bool {
        *self == Status::Current
    }
}

/// An entry's state with the entry that caused it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct State {
    /// The status.
    pub status: Status,
    /// The entry it was merged into or superseded by.
    pub by: Option<EntryId>,
}

/// The expiry of a derived entry whose own is `own` and whose sources'
/// are `sources`: the earliest of them (it lives no longer than its
/// shortest-lived source); `None` when none expires. Every store admits
/// a derived entry with it.
pub fn inherited_expiry(
    own: Option<u64>,
    sources: impl IntoIterator<Item = Option<u64>>,
) -> Option<u64> {
    sources.into_iter().flatten().chain(own).min()
}

/// Puts facts before other entries among hits of equal score (a run of
/// consecutive hits with the same score), keeping every other order: what
/// an agent is given first is the consolidated statement, not one of the
/// turns it came from.
pub fn facts_first(hits: &mut [crate::store::SearchHit]) {
    let mut start = 0;
    while start < hits.len() {
        let score = hits[start].score;
        let end = start
            + hits[start..]
                .iter()
                .take_while(|h| h.score.total_cmp(&score).is_eq())
                .count();
        hits[start..end].sort_by_key(|h| h.entry.origin != Origin::Fact);
        start = end;
    }
}

/// What `GET …/entries/{id}/lineage` answers: what the entry came from and
/// what was derived from it, each with its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lineage {
    /// The entry's own sources (empty unless it is derived).
    pub sources: Vec<LineageLink>,
    /// The live entries derived from it.
    pub derived: Vec<LineageLink>,
    /// The artifact version it was indexed from (a `file` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileSource>,
}

/// One entry in a [`Lineage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LineageLink {
    /// The entry.
    pub entry: EntryId,
    /// What the derived entry does to its source.
    pub role: Role,
    /// The linked entry's origin.
    pub origin: Origin,
    /// The linked entry's status.
    pub status: Status,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use hippocamp_core::{MemoryLimits, MemoryScope};

    use super::*;
    use crate::entry::{NewEntry, prepare_entry};
    use crate::store::{ScoreType, SearchHit};

    fn hit(text: &str, origin: Origin, score: f64) -> SearchHit {
        let scope = MemoryScope::parse("a", "u").unwrap();
        let mut e = prepare_entry(&scope, NewEntry::new(text), &MemoryLimits::default())
            .unwrap()
            .entry;
        e.origin = origin;
        SearchHit {
            entry: Arc::new(e),
            score,
            score_type: ScoreType::Bm25,
            details: None,
            explanation: None,
            context: None,
            passage: None,
        }
    }

    #[test]
    fn facts_come_first_among_equal_scores_only() {
        let mut hits = vec![
            hit("t1", Origin::Turn, 3.0),
            hit("t2", Origin::Turn, 2.0),
            hit("n", Origin::Note, 2.0),
            hit("f", Origin::Fact, 2.0),
            hit("f2", Origin::Fact, 1.0),
            hit("t3", Origin::Turn, 0.5),
        ];
        facts_first(&mut hits);
        let order: Vec<&str> = hits.iter().map(|h| h.entry.content.as_str()).collect();
        assert_eq!(order, ["t1", "f", "t2", "n", "f2", "t3"]);
    }
}
