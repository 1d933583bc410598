//! Conversation sessions of agents.
//!
//! - [`event`]: the event a session holds (the memory API's event,
//!   extended with tool calls, tool responses, context effects and
//!   opaque provider fields kept byte for byte).
//! - [`store`]: the [`SessionStore`] contract and the append rules every
//!   store applies.
//! - [`mem`]: the in-memory store.
//! - `conformance` (feature): the suite every store runs.
//!
//! The durable store is `hippocamp-sessions-redb`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod event;
pub mod mem;
pub mod store;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use event::{Actions, Content, FunctionCall, FunctionResponse, InlineData, Part, SessionEvent};
pub use mem::InMemorySessions;
pub use store::{
    AppendOptions, Appended, EventPage, Session, SessionCapabilities, SessionInfo, SessionLayer,
    SessionLimits, SessionPage, SessionStatus, SessionStore, check_session,
};
