//! Versioned artifacts: immutable, never-reused versions of named binary
//! objects under an app, user or session scope.
//!
//! - [`model`]: scopes, names, MIME types, records, selectors, pages;
//! - [`integrity`]: per-chunk and whole SHA-256, verified streaming reads;
//! - [`store`]: the [`ArtifactStore`] contract and its limits;
//! - [`mem`]: the in-memory store;
//! - [`checked`]: any store behind reply verification (foreign records
//!   refuse the reply);
//! - `conformance` (feature): the suite every store and wrapper runs.
//!
//! The filesystem store (`hippocamp-artifacts-fs`) and the object-store
//! store (`hippocamp-artifacts-object`) implement the same contract.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checked;
pub mod integrity;
pub mod mem;
pub mod model;
pub mod store;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use checked::ScopeChecked;
pub use integrity::{ChunkHasher, Integrity};
pub use mem::InMemoryArtifacts;
pub use model::{
    ArtifactMeta, ArtifactName, ArtifactScope, ByteRange, DeleteSelector, MimeType, Page,
    PageRequest, PutOptions, ScopePage, Selector,
};
pub use store::{
    ArtifactCapabilities, ArtifactLayer, ArtifactLimits, ArtifactRead, ArtifactStatus,
    ArtifactStore, Body, ByteStream,
};
