//! Scoped long-term memory: the [`MemoryStore`] contract, the in-memory
//! store, event ingestion, and the conformance suite every store runs.
//!
//! ```
//! use hippocamp_core::{CallOptions, IdempotencyKey, MemoryScope};
//! use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> hippocamp_core::Result<()> {
//! let store = InMemoryStore::new(MemoryConfig::default())?;
//! let scope = MemoryScope::parse("my_app", "user-42")?;
//! let added = store
//!     .add_entry(
//!         &scope,
//!         NewEntry::new("OTP supervisors restart failed child processes")
//!             .idempotency_key(IdempotencyKey::new("session-7:fact-1")?),
//!         &WriteOptions::default(),
//!     )
//!     .await?;
//! let found = store
//!     .search(&scope, &SearchRequest::new("what restarts a failed child?"), &CallOptions::default())
//!     .await?;
//! assert_eq!(found.hits[0].entry.id, added.entry.id);
//! assert_eq!(store.delete_user(&scope, &CallOptions::default()).await?.deleted, 1);
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checked;
pub mod config;
pub mod dedupe;
pub mod embedding;
pub mod entry;
pub mod erasure;
pub mod event;
pub mod import;
pub mod items;
pub mod lineage;
pub mod list;
pub mod mem;
pub mod quota;
pub mod rerank;
pub mod scope;
pub mod search;
pub mod store;
pub mod wire;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use checked::ScopeChecked;
pub use config::MemoryConfig;
pub use entry::{
    EntryUpdate, MemoryEntry, NewEntry, Obligations, Provenance, Revision, UpdateOutcome,
};
pub use event::{Event, IngestReport, SkipReason};
pub use import::{ImportReport, ImportedEntry};
pub use mem::InMemoryStore;
pub use rerank::{RerankStage, Reranked};
pub use store::{
    AddOutcome, Capabilities, EmbedderInfo, EntryPage, Erasure, ErasureFence, ExportRequest,
    ListOrder, ListRequest, MemoryLayer, MemoryStore, NamePage, NamesRequest, ObligationRules,
    ScoreDetails, ScoreType, SearchHit, SearchMode, SearchRequest, SearchResults, StoreStatus,
    Sweep, WriteOptions,
};

/// The README's library example compiles and runs as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;
