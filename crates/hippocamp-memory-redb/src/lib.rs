//! Durable memory on [redb](https://docs.rs/redb): an embedded, crash-safe,
//! transactional store with fsync on commit.
//!
//! An entry, its analysed terms (its forward postings), its scope's
//! counters and statistics, the store's totals and the scope's erasure
//! epoch all change in one transaction, so a delete leaves search
//! atomically and a restart never shows an entry search cannot find, or the
//! reverse. Searches run on a per-scope inverted index rebuilt in memory
//! from the stored terms when the scope is first used (no text is analysed
//! again) and kept in step with every commit; a router releases it when
//! the scope goes idle.
//!
//! Writes go through one writer thread that commits concurrent writes
//! together (group commit): they share one transaction and one fsync, and
//! an `add_events` batch is always one transaction. A write is acknowledged
//! only after its commit returned.
//!
//! One process owns a store's directory (a lock file); the on-disk format
//! carries a version, and an unknown version is refused. See [`format`]
//! for the tables.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache;
pub mod format;
mod store;
mod writer;

pub use store::{DB_FILE, LOCK_FILE, RedbMemoryStore};
