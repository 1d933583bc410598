//! Listing a scope's entries page by page, and sweeping expired ones: the
//! request and reply shapes and the one validation every store uses
//! ([`prepare_list`]).
//!
//! A cursor is opaque to callers. It records the order it was made for and
//! the (timestamp, id) position of the last entry of its page, so the next
//! page starts strictly after it: entries added or removed meanwhile never
//! make a page repeat or skip an entry that stayed.

use hippocamp_core::limits::page_limit;
use hippocamp_core::{EntryId, Error, Field, Filter, MemoryLimits, Problem, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entry::MemoryEntry;

/// The order of a listing.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ListOrder {
    /// Newest first (by timestamp, then id).
    #[default]
    Newest,
    /// Oldest first.
    Oldest,
}

/// A listing request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// Most entries, 1..=`max_page_entries`; default `max_page_entries`.
    /// A page also stops before it exceeds `max_result_bytes` (it always
    /// holds at least one entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// `newest` (default) or `oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<ListOrder>,
    /// A metadata filter (see `hippocamp_core::filter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Value>,
}

/// One page of entries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntryPage {
    /// The entries, in the requested order.
    pub entries: Vec<MemoryEntry>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What one sweep did.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Sweep {
    /// Expired entries deleted.
    pub deleted: u64,
    /// Whether more expired entries were due when the batch filled.
    pub more: bool,
}

/// A validated listing.
#[derive(Debug, Clone)]
pub struct PreparedList {
    /// Newest first?
    pub newest_first: bool,
    /// Start strictly after this (timestamp, id).
    pub after: Option<(u64, EntryId)>,
    /// Most entries.
    pub limit: usize,
    /// Byte budget of the page (entries count as in search results).
    pub max_bytes: u64,
    /// The metadata filter.
    pub filter: Filter,
}

impl PreparedList {
    /// The cursor of a page that ended at `last`.
    pub fn cursor(&self, last: (u64, EntryId)) -> String {
        encode_cursor(self.newest_first, last)
    }

    /// Whether `entry` passes the filter.
    pub fn keeps(&self, entry: &MemoryEntry) -> bool {
        self.filter.matches(&entry.metadata)
    }
}

fn encode_cursor(newest_first: bool, (ts, id): (u64, EntryId)) -> String {
    format!(
        "{}{ts:016x}{}",
        if newest_first { 'n' } else { 'o' },
        hex(id.as_bytes())
    )
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn bad_cursor(why: &str) -> Error {
    Error::invalid(Field::Cursor, Problem::Malformed(why.to_owned()))
}

fn decode_cursor(cursor: &str, newest_first: bool) -> Result<(u64, EntryId)> {
    let b = cursor.as_bytes();
    if b.len() != 49 || !cursor.is_ascii() {
        return Err(bad_cursor("not a cursor this store made"));
    }
    let order = b[0];
    if order != if newest_first { b'n' } else { b'o' } {
        return Err(bad_cursor("the cursor was made for the other order"));
    }
    let ts = u64::from_str_radix(&cursor[1..17], 16)
        .map_err(|_| bad_cursor("not a cursor this store made"))?;
    Ok((ts, hex_id(&cursor[17..])?))
}

/// The bytes `hex` wrote, or `None` for text it could not have written.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

/// An entry id from its 32 hex digits (as cursors carry it).
fn hex_id(text: &str) -> Result<EntryId> {
    let id: [u8; 16] = unhex(text.get(..32).unwrap_or(""))
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad_cursor("not a cursor this store made"))?;
    Ok(EntryId::from_bytes(id))
}

/// Validates a listing (limit, cursor, filter, in that order).
pub fn prepare_list(req: &ListRequest, limits: &MemoryLimits) -> Result<PreparedList> {
    let limit = page_limit(req.limit, limits.max_page_entries, limits.max_page_entries)?;
    let newest_first = req.order.unwrap_or_default() == ListOrder::Newest;
    let after = req
        .cursor
        .as_deref()
        .map(|c| decode_cursor(c, newest_first))
        .transpose()?;
    let filter = match &req.filter {
        None => Filter::all(),
        Some(v) => Filter::parse(v, limits.json())?,
    };
    Ok(PreparedList {
        newest_first,
        after,
        limit,
        max_bytes: limits.max_result_bytes,
        filter,
    })
}

/// The most entries one sweep batch may delete.
pub const MAX_SWEEP_BATCH: u64 = 10_000;

/// Checks a sweep's batch size: 1..=[`MAX_SWEEP_BATCH`].
pub fn check_sweep_batch(max: u64) -> Result<usize> {
    page_limit(Some(max), max, MAX_SWEEP_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_bound_to_their_order() {
        let id = EntryId::from_bytes([7; 16]);
        let c = encode_cursor(true, (42, id));
        assert_eq!(decode_cursor(&c, true).unwrap(), (42, id));
        assert!(decode_cursor(&c, false).is_err());
        assert!(decode_cursor("x", true).is_err());
        assert!(decode_cursor(&c.replace('0', "g"), true).is_err());
        let l = MemoryLimits::default();
        let req = ListRequest {
            limit: Some(l.max_page_entries + 1),
            ..ListRequest::default()
        };
        assert!(prepare_list(&req, &l).is_err());
        assert!(check_sweep_batch(0).is_err());
        assert!(check_sweep_batch(MAX_SWEEP_BATCH + 1).is_err());
    }
}

/// One page of an export.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Most entries, 1..=`max_page_entries` (default); a page also stops
    /// before `max_result_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// Where an export page starts: after a (timestamp, id) position (stores
/// that keep a scope in memory), or after an id (stores that read their
/// tables in key order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportCursor {
    /// After this (timestamp, id).
    Time(u64, EntryId),
    /// After this id.
    Id(EntryId),
}

impl ExportCursor {
    /// The opaque text of the cursor.
    pub fn encode(self) -> String {
        match self {
            ExportCursor::Time(ts, id) => encode_cursor(false, (ts, id)),
            ExportCursor::Id(id) => format!("i{}", hex(id.as_bytes())),
        }
    }
}

/// A validated export page request.
#[derive(Debug, Clone, Copy)]
pub struct PreparedExport {
    /// Where to start.
    pub after: Option<ExportCursor>,
    /// Most entries.
    pub limit: usize,
    /// Byte budget of the page.
    pub max_bytes: u64,
}

/// Validates an export page request (limit, then cursor).
pub fn prepare_export(req: &ExportRequest, limits: &MemoryLimits) -> Result<PreparedExport> {
    let limit = page_limit(req.limit, limits.max_page_entries, limits.max_page_entries)?;
    let after = match req.cursor.as_deref() {
        None => None,
        Some(c) if c.starts_with('i') && c.len() == 33 => Some(ExportCursor::Id(hex_id(&c[1..])?)),
        Some(c) => {
            let (ts, id) = decode_cursor(c, false)?;
            Some(ExportCursor::Time(ts, id))
        }
    };
    Ok(PreparedExport {
        after,
        limit,
        max_bytes: limits.max_result_bytes,
    })
}

/// A page request of the store's index of apps or of one app's users.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NamesRequest {
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Most names, 1..=`max_page_entries` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// One page of names (apps, or one app's users), in byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NamePage {
    /// The names.
    pub names: Vec<String>,
    /// Where the next page starts; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A validated names request: the name to start after and the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedNames {
    /// Start strictly after this name.
    pub after: Option<String>,
    /// Most names.
    pub limit: usize,
}

impl PreparedNames {
    /// The page of `names` (sorted, starting after `after`): at most
    /// `limit`, with a cursor when one more was there.
    pub fn page(&self, names: impl IntoIterator<Item = String>) -> NamePage {
        let mut names: Vec<String> = names.into_iter().take(self.limit + 1).collect();
        let more = names.len() > self.limit;
        names.truncate(self.limit);
        NamePage {
            next_cursor: if more {
                names.last().map(|n| format!("n{}", hex(n.as_bytes())))
            } else {
                None
            },
            names,
        }
    }
}

/// Validates a names request (limit, then cursor).
pub fn prepare_names(req: &NamesRequest, limits: &MemoryLimits) -> Result<PreparedNames> {
    let limit = page_limit(req.limit, limits.max_page_entries, limits.max_page_entries)?;
    let after = match req.cursor.as_deref() {
        None => None,
        Some(c) => {
            let bad = || bad_cursor("not a names cursor");
            let hexed = c.strip_prefix('n').ok_or_else(bad)?;
            if hexed.len() > 2 * 256 {
                return Err(bad());
            }
            let bytes = unhex(hexed).ok_or_else(bad)?;
            Some(String::from_utf8(bytes).map_err(|_| bad())?)
        }
    };
    Ok(PreparedNames { after, limit })
}
