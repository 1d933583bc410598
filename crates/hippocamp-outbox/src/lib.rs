//! The durable ingestion outbox.
//!
//! A caller that wants a conversation remembered hands its events to the
//! outbox and gets an answer as soon as they are durably queued; workers
//! deliver them into the memory store in the background, at least once,
//! fenced by erasure epochs:
//!
//! - [`model`]: targets, job ids (a canonical hash), states, statuses.
//! - [`store`]: the [`JobStore`] contract; [`mem`] keeps it in memory,
//!   `hippocamp-outbox-redb` on disk. Both run one rule set, [`engine`],
//!   over the tables of [`kv`], and hold claims in [`leases`].
//! - [`outbox`]: admission (planned with the memory stores'
//!   `plan_events`), status, cancellation, erasure notices, the registry
//!   of targets.
//! - [`processor`]: the workers and the prune pass.
//! - [`erasing`]: the memory-store wrapper that cancels a scope's queued
//!   jobs when it is erased.
//! - `conformance` (feature): the suite every job store runs.
//!
//! What it guarantees: an admitted job survives a crash of the process
//! (with the durable store); a batch is delivered at least once and, the
//! memory store's event ids being stable, stored once; nothing admitted
//! before an erasure is written after it (the job's epoch fences the
//! write, and the store remembers erased events); a session submitted
//! whole every turn only queues what is new (a per-session watermark of
//! admitted event ids); finished jobs keep no event content and are pruned
//! after the retention.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod engine;
pub mod erasing;
pub mod kv;
pub mod leases;
pub mod limits;
pub mod mem;
pub mod model;
pub mod outbox;
pub mod processor;
pub mod store;

pub use erasing::Erasing;
pub use limits::{OutboxLimits, ProcessorOptions};
pub use mem::InMemoryJobStore;
pub use model::{
    CancelReason, Delivered, JobError, JobId, JobRef, JobState, JobStatus, OutboxCapabilities,
    OutboxStats, Pruned, Skips, TargetName,
};
pub use outbox::{Ingested, Outbox, Registry, Target};
pub use processor::Processor;
pub use store::JobStore;
