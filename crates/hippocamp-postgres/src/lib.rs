//! The distributed profile's stores on PostgreSQL (with pgvector).
//!
//! Several stateless hippocamp servers share one PostgreSQL database: every
//! durable record lives in its tables, every write is one transaction
//! ordered by its scope's row lock, and what a server keeps in memory is a
//! cache it may lose at any time. [`Database`] owns the pool and the
//! schema's migrations; [`PgMemoryStore`] is the memory store, [`PgSessions`]
//! the runner's session store, [`PgConsents`] and [`PgAudit`] the
//! governance records, [`PgTokens`] the bearer tokens' records,
//! [`PgJobStore`] the ingestion outbox's jobs, [`PgArtifacts`] the artifact
//! catalog over contents on an object store.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod artifacts;
pub mod db;
pub mod governance;
pub mod memory;
pub mod migrations;
pub mod outbox;
pub mod runs;
pub mod sessions;
pub mod tokens;

pub use artifacts::PgArtifacts;
pub use db::{Database, PgConfig};
pub use governance::{PgAudit, PgConsents};
pub use memory::PgMemoryStore;
pub use outbox::PgJobStore;
pub use runs::PgRuns;
pub use sessions::PgSessions;
pub use tokens::PgTokens;
