//! Durable memory on [redb](https://docs.rs/redb): an embedded, crash-safe,
//! transactional store.
//!
//! An entry, its analysed terms (its forward postings), its scope's row
//! (counters, the statistics search needs, the erasure epoch) all change in
//! one transaction, so a delete leaves search atomically and a restart
//! never shows an entry search cannot find, or the reverse. Store-wide
//! totals are the sums of the scope rows, recomputed on open. Searches run
//! on a per-scope inverted index rebuilt in memory from the stored terms
//! when the scope is first used (no text is analysed again) and kept in
//! step with every commit; a router releases it when the scope goes idle.
//!
//! Writes go through one committer that commits concurrent writes together
//! (group commit): they share one log record and one fsync, and an
//! `add_events` batch is always one atomic group. Callers run the commits
//! themselves, one at a time. The fsync is that of a write-ahead log
//! record holding the group's changes ([`hippocamp_durable::wal`]); nothing
//! is visible before its record is durable. A group of adds is
//! acknowledged then, and applied to the database by the store's applier
//! thread behind the writer ([`pipeline`]); reads of the database wait
//! until it holds what was acknowledged when they started, and every
//! other operation runs on a write transaction once the applier has caught
//! up. Checkpoints make the database file itself durable and empty the
//! log; opening replays what the last checkpoint did not cover.
//!
//! One process owns a store's directory (a lock file); a new database is
//! created under a temporary name and renamed into place once complete; the
//! on-disk format carries a version, and an unknown version is refused. See
//! [`format`] for the tables.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache;
pub mod floor;
pub mod format;
pub mod pipeline;
mod store;
mod writer;

pub use hippocamp_durable::{FileWal, WalStorage};
pub use store::{
    DB_CACHE_BYTES, DB_FILE, DurableOptions, LOCK_FILE, RedbMemoryStore, SCOPE_CACHE_BYTES,
    WAL_FILE,
};
