//! Durable artifacts on a local file system: the embedded default.
//!
//! Content lives in files under hashed paths (`objects/xx/<random blob
//! id>`; scopes and names never become path components), each written,
//! fsynced, renamed into place and its directory fsynced before the
//! catalog row that publishes it is committed ([`store`] documents the
//! protocol). The catalog (names, versions, sizes, digests, listing
//! order) is a redb database whose changes are logged ahead
//! (`hippocamp_durable`), so a listing page costs O(page + log n) and
//! never scans a directory, and nothing caps how many scopes, names or
//! versions a store holds over its life. One process owns a data
//! directory (a lock file); the root must be a real directory and no
//! symbolic link is ever followed ([`files`]). [`repair`] removes content
//! no row references.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub(crate) mod catalog;
pub mod files;
pub mod repair;
pub mod store;
mod writer;

pub use catalog::FORMAT_VERSION;
pub use files::{DiskFiles, FileOps, Listed, ReadFile, WriteFile, dir_path};
pub use repair::{RepairCursor, RepairOptions, RepairReport};
pub use store::{CatalogSource, DB_FILE, FsArtifacts, FsOptions, LOCK_FILE, WAL_FILE};
