//! The agent runner: a model, an instruction and tools over a user's
//! sessions, memory and artifacts.
//!
//! - [`runner`]: [`Runner::run`] with its hard bounds, the options
//!   checked when it is built, and ingestion after a run.
//! - [`preload`]: memory preload as framed, bounded, untrusted reference
//!   text in the first request of a run.
//! - [`tool`]: the [`Tool`] contract (strict JSON Schema, declared
//!   capabilities) and argument validation.
//! - [`capability`]: the capability names.
//! - [`context`]: the per-call [`ToolContext`], bound to the invocation's
//!   exact scope, enforcing the declared capabilities and verifying every
//!   store reply; attachments.
//! - [`builtin`]: the built-in tools, one table.
//! - [`instruction`]: `{user.artifact.NAME}` and `{app.artifact.NAME}`
//!   placeholders, framed as untrusted data.
//! - [`ingest`]: `on_success` and `durable` ingestion.
//! - [`services`]: the stores a runner works over; erasing a user erases
//!   their sessions too.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod builtin;
pub mod capability;
pub mod context;
pub mod error;
pub mod ingest;
pub mod instruction;
pub mod journal;
pub mod memory_tool;
pub mod preload;
pub mod runner;
pub mod services;
pub mod session_items;
pub mod tool;

pub use builtin::{BUILTINS, Builtin, builtins};
pub use capability::{Capability, CapabilitySet};
pub use context::ToolContext;
pub use error::{AgentError, Bound, Result};
pub use ingest::{Ingestion, IngestionStats};
pub use preload::{OnError, PreloadOptions};
pub use runner::{
    Agent, AgentConfig, RunLimits, RunOutcome, Runner, RunnerCapabilities, RunnerOptions,
};
pub use services::{AgentServices, SessionErasure, UserErasure};
pub use tool::{Registered, Tool, ToolSet};
