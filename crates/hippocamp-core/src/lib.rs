//! Shared vocabulary of hippocamp: validated identifiers and scopes,
//! JSON-safe metadata and filters, SHA-256 digests, entry ids, call deadlines,
//! limits, the error type, and the secret rules.
//!
//! This crate does no I/O. Every other crate builds on it, so a rule stated
//! here (an identifier's length, a limit's ceiling, what counts as a secret)
//! holds on every path: the in-memory store, durable stores, the server and
//! the CLI.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod content;
pub mod deadline;
pub mod digest;
pub mod error;
pub mod fence;
pub mod filter;
pub mod ident;
pub mod json;
pub mod limits;
pub mod permission;
pub mod routing;
pub mod secrets;
pub mod time;

pub use deadline::{CallOptions, Caller, CallerKind, Deadline};
pub use digest::Sha256Digest;
pub use error::{Error, Field, Problem, QuotaLimit, Result, Stage};
pub use fence::{ErasureFence, check_epoch, check_fence};
pub use filter::Filter;
pub use ident::{
    AppName, Author, EntryId, EventId, FactKey, IdempotencyKey, MemoryScope, ScopeKey, SessionId,
    UserId, erasure_confirmation,
};
pub use json::{JsonLimits, Metadata};
pub use limits::{LimitInfo, MemoryLimits};
pub use permission::Permission;
pub use secrets::SecretKind;
pub use time::{Clock, ManualClock, SystemClock};
