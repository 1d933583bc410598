//! The distributed profile's stores on PostgreSQL (with pgvector).
//!
//! Several stateless hippocamp servers share one PostgreSQL database: every
//! durable record lives in its tables, every write is one transaction
//! ordered by its scope's row lock, and what a server keeps in memory is a
//! cache it may lose at any time. [`Database`] owns the pool and the
//! schema's migrations; [`PgMemoryStore`] is the memory store, [`PgSessions`]
//! the runner's session store.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod db;
pub mod memory;
pub mod migrations;
pub mod sessions;

pub use db::{Database, PgConfig};
pub use memory::PgMemoryStore;
pub use sessions::PgSessions;
