//! Durability building blocks shared by the embedded stores.
//!
//! - [`wal`]: a write-ahead log of checksummed, sequenced records, each
//!   made durable by one `fdatasync` of pre-written space; stores log a
//!   transaction's changes here before committing it without an fsync,
//!   and replay what their last checkpoint did not cover.
//! - [`db`]: the store's redb file: atomic owner-only creation, one open
//!   per process, the on-disk format stamp.
//! - [`group`]: group commit, concurrent writes sharing one transaction
//!   and one log sync, led by the callers themselves.
//! - [`lock`]: exclusive ownership of a data directory by one process.
//! - [`fs`]: owner-only files and directories; data directories are never
//!   followed through symbolic links.
//! - `sim` (feature): a simulated disk with power loss, and `crash`, the
//!   parent side of SIGKILL trials, for tests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "sim")]
pub mod crash;
pub mod db;
pub mod fs;
pub mod group;
pub mod lock;
#[cfg(feature = "sim")]
pub mod sim;
pub mod wal;

pub use lock::DirLock;
pub use wal::{FileWal, WalStorage, decode_log, encode_record, encode_record_sized, postcard_into};
