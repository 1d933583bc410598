//! Erasure records: what a store keeps of an erasure so nothing brings
//! the erased data back, how they are bounded, and how an export carries
//! them to a restore.
//!
//! A scope keeps two kinds of record, ids and counters only, never
//! content:
//! - the id of every entry it erased (by id, with its session or user,
//!   or swept): an event that would make one again is skipped as
//!   `erased`, and a restore does not write one back;
//! - the erasure epoch of every session it erased (see
//!   [`crate::store::ErasureFence`]).
//!
//! Both outlive the data, so both are bounded: each counts
//! [`ERASURE_RECORD_BYTES`] against the scope's `max_bytes_per_scope`
//! (as an entry counts its bytes). An erasure is never refused for it:
//! a scope whose records fill its quota takes no more writes until its
//! quota is raised, which `capabilities()` reports (`erasure_record_bytes`).
//! They are not pruned: only the scope's epoch could make one unnecessary,
//! and a re-sent event carries no epoch.

use hippocamp_core::{EntryId, Error, Field, LimitInfo, Problem, Result, SessionId};
use serde::{Deserialize, Serialize};

/// Bytes each erasure record counts against the scope's byte quota.
pub const ERASURE_RECORD_BYTES: u64 = 64;

/// The bytes a scope holds against its quota: its entries' bytes and its
/// erasure records.
pub fn erasure_records_bytes(entry_bytes: u64, records: u64) -> u64 {
    entry_bytes.saturating_add(records.saturating_mul(ERASURE_RECORD_BYTES))
}

/// The capabilities row that reports the records' cost.
pub fn describe() -> LimitInfo {
    LimitInfo {
        name: "erasure_record_bytes".into(),
        value: ERASURE_RECORD_BYTES,
        default: ERASURE_RECORD_BYTES,
        min: ERASURE_RECORD_BYTES,
        max: ERASURE_RECORD_BYTES,
        description: "bytes each erasure record (an erased entry's id, an erased session's epoch) \
                      counts against max_bytes_per_scope; records are kept for good"
            .into(),
        configurable: false,
    }
}

/// A scope's erasure records (a page of them, or what an export carried).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErasureRecords {
    /// Ids of erased entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<EntryId>,
    /// Erased sessions with their erasure epochs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionEpoch>,
}

impl ErasureRecords {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.sessions.is_empty()
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.entries.len() + self.sessions.len()
    }
}

/// A session's erasure epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEpoch {
    /// The session.
    pub session: SessionId,
    /// Its erasure epoch (how many times it was erased).
    pub epoch: u64,
}

/// A request for one page of a scope's erasure records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErasureRequest {
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Most records, 1..=`max_page_entries` (default).
    pub limit: Option<u64>,
}

/// One page of a scope's erasure records: entry ids in id order, then
/// sessions in id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErasurePage {
    /// The records.
    pub records: ErasureRecords,
    /// Where the next page starts; `None` at the end.
    pub next_cursor: Option<String>,
}

/// Where a page of records starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErasureCursor {
    /// After this entry id.
    Entry(EntryId),
    /// After this session (every entry id was listed).
    Session(SessionId),
}

impl ErasureCursor {
    /// Its text form.
    pub fn encode(&self) -> String {
        match self {
            ErasureCursor::Entry(id) => format!("e:{id}"),
            ErasureCursor::Session(s) => format!("s:{s}"),
        }
    }

    /// Parses a cursor this module made.
    pub fn decode(text: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                Field::Cursor,
                Problem::Malformed("not a cursor of erasure records".into()),
            )
        };
        match text.split_once(':') {
            Some(("e", id)) => Ok(ErasureCursor::Entry(id.parse().map_err(|_| bad())?)),
            Some(("s", s)) => Ok(ErasureCursor::Session(
                SessionId::new(s).map_err(|_| bad())?,
            )),
            _ => Err(bad()),
        }
    }
}

impl ErasureRequest {
    /// The cursor and page size, checked.
    pub fn prepare(&self, max: u64) -> Result<(Option<ErasureCursor>, usize)> {
        let limit = hippocamp_core::limits::page_limit(self.limit, max, max)?;
        let cursor = self
            .cursor
            .as_deref()
            .map(ErasureCursor::decode)
            .transpose()?;
        Ok((cursor, limit))
    }
}

impl ErasurePage {
    /// The page after `after` of at most `limit` records, from `ids` and
    /// `sessions`, each sorted.
    pub fn cut(
        ids: impl Iterator<Item = EntryId>,
        sessions: impl Iterator<Item = (SessionId, u64)>,
        after: Option<&ErasureCursor>,
        limit: usize,
    ) -> Self {
        let mut page = ErasurePage::default();
        let mut last = None;
        let skip_ids = matches!(after, Some(ErasureCursor::Session(_)));
        if !skip_ids {
            for id in ids.filter(|id| match after {
                Some(ErasureCursor::Entry(a)) => id > a,
                _ => true,
            }) {
                if page.records.len() == limit {
                    page.next_cursor = last.map(|c: ErasureCursor| c.encode());
                    return page;
                }
                page.records.entries.push(id);
                last = Some(ErasureCursor::Entry(id));
            }
        }
        for (session, epoch) in sessions.filter(|(s, _)| match after {
            Some(ErasureCursor::Session(a)) => s > a,
            _ => true,
        }) {
            if page.records.len() == limit {
                page.next_cursor = last.map(|c: ErasureCursor| c.encode());
                return page;
            }
            last = Some(ErasureCursor::Session(session.clone()));
            page.records.sessions.push(SessionEpoch { session, epoch });
        }
        page
    }
}

/// What a restore brings of an export's erasures, before its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportedErasures {
    /// The scope's erasure epoch when the export was made.
    pub epoch: u64,
    /// Erasure records the export carried.
    pub records: ErasureRecords,
}

/// What importing erasures did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ErasureImport {
    /// Whether the scope, never held here, took the export's epoch.
    pub adopted_epoch: bool,
    /// Records the scope did not hold yet.
    pub added: u64,
}

/// How an import of erasures meets a scope at `current` epoch that holds
/// data or records (`held`): a scope never held takes the export's epoch
/// (erasures made elsewhere are not known to this deployment); one held
/// at a later epoch is stale (it was erased since the export); one held
/// at an earlier epoch is refused (the export comes from elsewhere, and
/// advancing the epoch would fence this scope's own queued work).
pub fn check_import_epoch(exported: u64, current: u64, held: bool) -> Result<bool> {
    if !held && current == 0 {
        return Ok(exported > 0);
    }
    hippocamp_core::check_epoch(Some(exported), current)?;
    Ok(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(n: u8) -> EntryId {
        EntryId::from_bytes([n; 16])
    }

    fn sid(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    #[test]
    fn pages_walk_ids_then_sessions_without_gap_or_repeat() {
        let ids = [id(1), id(2), id(3)];
        let sessions = [(sid("a"), 1), (sid("b"), 2)];
        let mut after = None;
        let mut seen = ErasureRecords::default();
        loop {
            let page = ErasurePage::cut(
                ids.iter().copied(),
                sessions.iter().cloned(),
                after.as_ref(),
                2,
            );
            assert!(page.records.len() <= 2);
            seen.entries.extend(page.records.entries);
            seen.sessions.extend(page.records.sessions);
            match page.next_cursor {
                Some(c) => after = Some(ErasureCursor::decode(&c).unwrap()),
                None => break,
            }
        }
        assert_eq!(seen.entries, ids);
        assert_eq!(
            seen.sessions.iter().map(|s| s.epoch).collect::<Vec<_>>(),
            [1, 2]
        );
        assert!(ErasureCursor::decode("x:1").is_err());
        assert!(ErasureCursor::decode("e:nope").is_err());
    }

    #[test]
    fn import_epochs_are_adopted_only_by_a_scope_never_held() {
        assert!(check_import_epoch(3, 0, false).unwrap());
        assert!(!check_import_epoch(0, 0, false).unwrap());
        assert!(!check_import_epoch(2, 2, true).unwrap());
        assert!(matches!(
            check_import_epoch(1, 2, true),
            Err(Error::StaleEpoch { .. })
        ));
        assert!(matches!(
            check_import_epoch(3, 0, true),
            Err(Error::FutureEpoch { .. })
        ));
    }

    #[test]
    fn records_count_against_the_byte_quota() {
        assert_eq!(
            erasure_records_bytes(1_000, 3),
            1_000 + 3 * ERASURE_RECORD_BYTES
        );
        assert_eq!(describe().value, ERASURE_RECORD_BYTES);
    }
}
