//! The ordered key-value tables the job-store engine runs on, so the
//! in-memory store and the embedded (redb) store share every rule: the
//! engine reads through [`KvRead`] and returns its changes as [`Writes`],
//! which the store applies only when the whole operation succeeded (an
//! operation that fails leaves nothing behind).
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"stats"` | the counters |
//! | `jobs` | job id (16) | the job row |
//! | `batches` | job id ‖ batch (u32 BE) | the batch's events |
//! | `schedule` | due (u64 BE, store clock) ‖ admission order (u64 BE) ‖ job id | target name: the active jobs by due time |
//! | `terminal` | finished (u64 BE, store clock) ‖ job id | `()`: finished jobs, oldest first |
//! | `watermark` | stream (16) ‖ event (16) | job id: every event admitted for a (target, scope, session) |
//! | `active` | scope (16) ‖ session (16) ‖ job id | `()`: active jobs of a scope |
//! | `usage` | scope (16) | active jobs and bytes of the scope |
//! | `floors` | scope (16) | the erasure epoch the store knows the scope reached |

use std::collections::BTreeMap;
use std::ops::Bound;

use hippocamp_core::Result;
use serde::{Deserialize, Serialize};

/// A table of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Table {
    /// Counters.
    Meta,
    /// Job rows.
    Jobs,
    /// Batch payloads.
    Batches,
    /// Active jobs by due time.
    Schedule,
    /// Finished jobs by finish time.
    Terminal,
    /// Admitted events of each (target, scope, session).
    Watermark,
    /// Active jobs by scope and session.
    Active,
    /// Per-scope usage.
    Usage,
    /// Erasure epochs reached.
    Floors,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 9] = [
        Table::Meta,
        Table::Jobs,
        Table::Batches,
        Table::Schedule,
        Table::Terminal,
        Table::Watermark,
        Table::Active,
        Table::Usage,
        Table::Floors,
    ];

    /// The table's name (in redb).
    pub fn name(self) -> &'static str {
        match self {
            Table::Meta => "meta",
            Table::Jobs => "jobs",
            Table::Batches => "batches",
            Table::Schedule => "schedule",
            Table::Terminal => "terminal",
            Table::Watermark => "watermark",
            Table::Active => "active",
            Table::Usage => "usage",
            Table::Floors => "floors",
        }
    }
}

/// Reads of the tables.
pub trait KvRead {
    /// The value under `key`.
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// Up to `limit` entries with `from <= key < to` (no upper bound when
    /// `to` is `None`), in key order.
    fn range(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    /// Sets a value.
    Put(Table, Vec<u8>, Vec<u8>),
    /// Removes a key.
    Del(Table, Vec<u8>),
}

/// An operation's changes, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writes(pub Vec<Write>);

impl Writes {
    /// Sets `key` to `value`.
    pub fn put(&mut self, table: Table, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.0.push(Write::Put(table, key.into(), value.into()));
    }

    /// Removes `key`.
    pub fn del(&mut self, table: Table, key: impl Into<Vec<u8>>) {
        self.0.push(Write::Del(table, key.into()));
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The first key after every key starting with `prefix` (`None` when
/// there is none: the prefix is all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The tables in memory.
#[derive(Debug, Default, Clone)]
pub struct MemKv {
    tables: BTreeMap<Table, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl MemKv {
    /// Applies `writes` in order.
    pub fn apply(&mut self, writes: Writes) {
        for w in writes.0 {
            match w {
                Write::Put(t, k, v) => {
                    self.tables.entry(t).or_default().insert(k, v);
                }
                Write::Del(t, k) => {
                    if let Some(m) = self.tables.get_mut(&t) {
                        m.remove(&k);
                    }
                }
            }
        }
    }

    /// Entries of `table` (tests).
    pub fn len(&self, table: Table) -> usize {
        self.tables.get(&table).map_or(0, BTreeMap::len)
    }
}

impl KvRead for MemKv {
    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.tables.get(&table).and_then(|m| m.get(key).cloned()))
    }

    fn range(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some(m) = self.tables.get(&table) else {
            return Ok(Vec::new());
        };
        let upper = to.map_or(Bound::Unbounded, |t| Bound::Excluded(t.to_vec()));
        Ok(m.range((Bound::Included(from.to_vec()), upper))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
    }

    #[test]
    fn ranges_are_half_open() {
        let mut kv = MemKv::default();
        let mut w = Writes::default();
        for k in [b"a", b"b", b"c"] {
            w.put(Table::Jobs, k.to_vec(), b"v".to_vec());
        }
        kv.apply(w);
        let keys: Vec<_> = kv
            .range(Table::Jobs, b"a", Some(b"c"), 10)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(kv.range(Table::Jobs, b"b", None, 1).unwrap().len(), 1);
    }
}
