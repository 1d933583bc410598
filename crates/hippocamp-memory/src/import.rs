//! Restoring exported entries: the shapes of an import and the one
//! validation every store runs on it ([`prepare_import`]).
//!
//! An import writes entries under their original ids, with their
//! timestamps, obligations, revision and history (each earlier revision
//! marked `restored`: the file's claim, not this store's record), so an
//! export restored into an empty store reads back equal but for those
//! marks. It is idempotent: an id the scope already holds is left as it
//! is, and an id the scope erased stays erased (`erased` in the report).
//! The restore around it (`hippocamp_services::restore`) refuses what an
//! erasure since the export covers, and the policy gives the entries
//! their obligations.

use std::collections::HashSet;

use hippocamp_core::limits::to_usize;
use hippocamp_core::{Error, Field, MemoryLimits, MemoryScope, Problem, Result, Sha256Digest};
use serde::{Deserialize, Serialize};

use crate::entry::{EntryUpdate, MemoryEntry, NewEntry, Revision, check_update, prepare_entry};

/// One entry to restore, as an export's `entry` line carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportedEntry {
    /// The entry as exported (its `epoch` is replaced by the scope's).
    pub entry: MemoryEntry,
    /// Its kept revisions, oldest first, the current one last; empty for
    /// an entry never corrected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Revision>,
}

/// What an import did.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ImportReport {
    /// Entries written.
    pub imported: u64,
    /// Entries the scope already held under the same id (left as they are).
    pub existing: u64,
    /// Entries of an erased session, not written (erasure is sticky).
    pub erased: u64,
    /// Entries whose expiry has come, not written.
    pub expired: u64,
    /// Derived entries with a source neither live in the scope nor
    /// written before them by the same import (erased since the export,
    /// or not in the file): not written, so nothing derived outlives an
    /// erasure.
    #[serde(default)]
    pub unsourced: u64,
}

impl ImportReport {
    /// Adds another batch's counts.
    pub fn absorb(&mut self, other: ImportReport) {
        self.imported += other.imported;
        self.existing += other.existing;
        self.erased += other.erased;
        self.expired += other.expired;
        self.unsourced += other.unsourced;
    }
}

/// Whether every source of `entry` is live: among the entries `earlier`
/// the same import keeps (written or already held), or `live` in the
/// scope. Every store asks it of each derived entry it imports, in the
/// import's transaction.
pub fn sources_present(
    entry: &MemoryEntry,
    earlier: &std::collections::HashSet<hippocamp_core::EntryId>,
    mut live: impl FnMut(&hippocamp_core::EntryId) -> bool,
) -> bool {
    entry
        .derived_from
        .iter()
        .all(|s| earlier.contains(&s.entry) || live(&s.entry))
}

/// A validated entry to restore.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedImport {
    /// The entry, its epoch to be stamped by the store.
    pub entry: MemoryEntry,
    /// Its size for quotas.
    pub storage_bytes: u64,
    /// Its kept revisions, oldest first, the current one last; empty when
    /// it was never corrected.
    pub history: Vec<Revision>,
}

fn bad(field: Field, i: usize, why: impl std::fmt::Display) -> Error {
    Error::invalid(
        field,
        Problem::Malformed(format!("entry {i} of the import: {why}")),
    )
}

/// Validates an import for `scope`: at most `max_page_entries` entries
/// (an export's page),
/// distinct ids, each of this exact scope, each under the rules of a new
/// entry (content, metadata, provenance), its digest matching its
/// content, and its history consistent (increasing revisions, at most
/// `max_revisions`, every digest right, the last one the entry itself).
pub fn prepare_import(
    scope: &MemoryScope,
    items: &[ImportedEntry],
    limits: &MemoryLimits,
) -> Result<Vec<PreparedImport>> {
    let max = to_usize(limits.max_page_entries);
    if items.len() > max {
        return Err(Error::invalid(
            Field::Body,
            Problem::TooMany {
                count: items.len(),
                max,
            },
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, ImportedEntry { entry, history }) in items.iter().cloned().enumerate() {
        if entry.scope != *scope {
            return Err(bad(Field::Scope, i, "it belongs to another scope"));
        }
        if !seen.insert(entry.id) {
            return Err(bad(Field::EntryId, i, "its id appears twice"));
        }
        // The rules of a new entry, through the one function that has them.
        let checked = prepare_entry(
            scope,
            NewEntry {
                content: entry.content.clone(),
                metadata: entry.metadata.clone(),
                provenance: entry.provenance.clone(),
                idempotency_key: None,
                fact_key: entry.fact_key.clone(),
                derivation: None,
                file: entry.file.clone(),
            },
            limits,
        )?;
        // A file entry is one version's: its id and fact key follow from
        // the version, and it is never derived.
        let file_shaped = match &entry.file {
            None => entry.origin != crate::lineage::Origin::File,
            Some(_) => {
                entry.origin == crate::lineage::Origin::File
                    && !entry.is_derived()
                    && checked.entry.id == entry.id
                    && checked.entry.fact_key == entry.fact_key
            }
        };
        if !file_shaped {
            return Err(bad(
                Field::EntryId,
                i,
                "a file entry's origin, id or fact key does not follow from its version",
            ));
        }
        if checked.entry.metadata != entry.metadata {
            return Err(bad(Field::Metadata, i, "it carries unredacted secrets"));
        }
        // A restore keeps an entry exactly (id, digest), so a secret in
        // its content is refused, not redacted. hippocamp never exports
        // one: what it stores is redacted.
        if let Some(r) = checked.redacted.first() {
            return Err(Error::SensitiveContent(r.kind));
        }
        if Sha256Digest::of(entry.content.as_bytes()) != entry.digest {
            return Err(bad(
                Field::Content,
                i,
                "its digest does not match its content",
            ));
        }
        let history = check_history(i, &entry, history, limits)?;
        // A state is read from the scope, never restored from a file; a
        // derived entry's lineage says it was restored.
        let mut entry = entry.stateless();
        entry.lineage_restored = entry.is_derived();
        out.push(PreparedImport {
            storage_bytes: entry.storage_bytes(),
            entry,
            history,
        });
    }
    Ok(out)
}

fn check_history(
    i: usize,
    entry: &MemoryEntry,
    mut history: Vec<Revision>,
    limits: &MemoryLimits,
) -> Result<Vec<Revision>> {
    if entry.revision == 0 {
        return Err(bad(Field::History, i, "revisions start at 1"));
    }
    if entry.revision == 1 && entry.revised_at_ms.is_some() {
        return Err(bad(Field::History, i, "revision 1 has no correction time"));
    }
    if entry.revision > 1 && history.is_empty() {
        history.push(Revision::of(entry));
    }
    if history.len() > to_usize(limits.max_revisions) {
        return Err(Error::invalid(
            Field::History,
            Problem::TooMany {
                count: history.len(),
                max: to_usize(limits.max_revisions),
            },
        ));
    }
    for pair in history.windows(2) {
        if pair[0].revision >= pair[1].revision {
            return Err(bad(Field::History, i, "revisions are not increasing"));
        }
    }
    for r in &history {
        // A revision was a correction: the rules of one.
        let checked = check_update(
            EntryUpdate {
                content: r.content.clone(),
                metadata: r.metadata.clone(),
            },
            limits,
        )?;
        if checked.metadata != r.metadata {
            return Err(bad(
                Field::History,
                i,
                "a revision carries unredacted secrets",
            ));
        }
        if Sha256Digest::of(r.content.as_bytes()) != r.digest {
            return Err(bad(Field::History, i, "a revision's digest does not match"));
        }
    }
    let current = |r: &Revision| Revision {
        restored: r.restored,
        ..Revision::of(entry)
    };
    match history.last() {
        None => Ok(history),
        Some(last) if *last == current(last) => {
            // An entry at revision 1 keeps no history of its own.
            if entry.revision == 1 {
                history.clear();
            }
            // What the file says of earlier revisions is its claim: kept,
            // and marked so (`entry_history` tells it from this store's
            // own corrections).
            for r in &mut history {
                r.restored = true;
            }
            Ok(history)
        }
        Some(_) => Err(bad(
            Field::History,
            i,
            "its last revision is not the entry itself",
        )),
    }
}
