//! The durable job store of the ingestion outbox.
//!
//! [`RedbJobStore`] keeps the outbox engine's tables (see
//! `hippocamp_outbox::kv`) in a redb file in its own directory, which one
//! process owns (a lock file). Every change goes through one writer that
//! groups concurrent changes into one transaction and one record of the
//! write-ahead log of `hippocamp-durable`: an admission is acknowledged
//! only after its record is synced, so it survives a crash or a power
//! cut; on open, records newer than the last checkpoint are replayed.
//! Claims are leases held in memory, checked with a monotonic clock, so a
//! restart voids every lease and a wall-clock jump cannot make two owners
//! act. The store's own clock (for due times, backoff and retention)
//! continues across restarts from its last stored value.
//!
//! | file | what |
//! |---|---|
//! | `outbox.redb` | the tables, plus `meta` keys `format` (u32 LE), `wal_seq` and `clock` (u64 LE) |
//! | `outbox.wal` | the write-ahead log |
//! | `LOCK` | the directory lock |

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod store;
mod writer;

pub use store::{DB_FILE, FORMAT_VERSION, LOCK_FILE, RedbJobStore, WAL_FILE};
pub use writer::DurableOptions;
