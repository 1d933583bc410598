//! The [`SessionStore`] contract: a user's sessions, each an ordered list
//! of events with stable ids.

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{LimitInfo, MemoryScope, Result, SessionId, limit_table};
use serde::{Deserialize, Serialize};

use crate::event::SessionEvent;

limit_table! {
    /// Limits of a session store.
    pub struct SessionLimits, prefix "sessions." {
        /// Bytes of one event encoded as JSON.
        max_event_bytes: default 1_048_576, min 256, max 16_777_216,
            "bytes of one session event encoded as JSON";
        /// Events of one session.
        max_events_per_session: default 10_000, min 1, max 1_000_000,
            "events one session may hold";
        /// Sessions of one user.
        max_sessions_per_user: default 10_000, min 1, max 1_000_000,
            "sessions one (app, user) scope may hold";
        /// Sessions one listing page may return.
        max_page: default 1_000, min 1, max 10_000,
            "sessions one listing page may return (the default page size)";
    }
}

impl SessionLimits {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// A session's summary, as listings carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionInfo {
    /// The session id.
    pub id: SessionId,
    /// Events it holds.
    pub events: u64,
    /// When its first event was appended (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When its last event was appended.
    pub updated_at_ms: u64,
}

/// A whole session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    /// The exact scope it belongs to.
    pub scope: MemoryScope,
    /// Its summary.
    #[serde(flatten)]
    pub info: SessionInfo,
    /// Its events, in the order they were appended.
    pub events: Vec<SessionEvent>,
}

/// What `append` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// The event's position in its session (0-based).
    pub index: u64,
    /// The same event (same id, same data) was already there; nothing
    /// changed.
    pub duplicate: bool,
}

/// One page of a user's sessions, by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPage {
    /// The sessions, by id.
    pub items: Vec<SessionInfo>,
    /// Pass as `after` for the next page; `None` at the end.
    pub next: Option<SessionId>,
}

/// Content-free counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStatus {
    /// Sessions held.
    pub sessions: u64,
    /// Events held.
    pub events: u64,
}

/// What a store is and which limits it enforces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCapabilities {
    /// `memory`, `redb`...
    pub backend: &'static str,
    /// Whether an acknowledged append survives a crash.
    pub durable: bool,
    /// Every limit in force.
    pub limits: Vec<LimitInfo>,
}

/// A user's conversation sessions. Every call names the exact scope;
/// nothing of another scope is ever read, changed or returned.
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// What the store is and its limits.
    fn capabilities(&self) -> SessionCapabilities;

    /// Appends `event` to the session (created by its first event).
    /// Appending an event whose id the session already holds is a no-op
    /// when the data is the same (`duplicate`), and `InvalidArgument`
    /// (`event_id`) when it differs. Acknowledged means stored (durable
    /// stores: survives a crash).
    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
    ) -> Result<Appended>;

    /// The whole session, or `NotFound`.
    async fn get(&self, scope: &MemoryScope, session: &SessionId) -> Result<Session>;

    /// The user's sessions with an id after `after`, by id, at most
    /// `limit` (default and ceiling: `max_page`).
    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
    ) -> Result<SessionPage>;

    /// Deletes one session; whether it existed.
    async fn delete(&self, scope: &MemoryScope, session: &SessionId) -> Result<bool>;

    /// Deletes every session of the user; how many there were.
    async fn delete_user(&self, scope: &MemoryScope) -> Result<u64>;

    /// Content-free counters.
    async fn status(&self) -> Result<SessionStatus>;
}

/// Checks a store's reply against the request: a session of another
/// scope or id is refused as an invalid reply.
pub fn check_session(scope: &MemoryScope, id: &SessionId, s: &Session) -> Result<()> {
    if &s.scope != scope || &s.info.id != id {
        return Err(hippocamp_core::Error::foreign_record(
            "session store",
            "a session",
        ));
    }
    Ok(())
}

/// The rules of `append` every store applies, in one place: what to do
/// with `event` in a session that holds `held` events, `same_id` being
/// the held event with its id, if any, and the user holding `sessions`
/// sessions (`new_session`: this one is not among them yet).
pub fn plan_append(
    limits: &SessionLimits,
    event: &SessionEvent,
    same_id: Option<(u64, &SessionEvent)>,
    held: u64,
    new_session: bool,
    sessions: u64,
) -> Result<AppendPlan> {
    use hippocamp_core::{Error, Field, Problem, QuotaLimit};
    let size = event.validate(limits.max_event_bytes)?;
    if let Some((index, old)) = same_id {
        if old == event {
            return Ok(AppendPlan::Duplicate(index));
        }
        return Err(Error::invalid(
            Field::EventId,
            Problem::Malformed(format!(
                "the session already holds event `{}` with other data",
                event.id
            )),
        ));
    }
    if held >= limits.max_events_per_session {
        return Err(Error::QuotaExceeded {
            limit: QuotaLimit::EventsPerSession(limits.max_events_per_session),
        });
    }
    if new_session && sessions >= limits.max_sessions_per_user {
        return Err(Error::QuotaExceeded {
            limit: QuotaLimit::SessionsPerUser(limits.max_sessions_per_user),
        });
    }
    Ok(AppendPlan::Append { index: held, size })
}

/// What [`plan_append`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendPlan {
    /// The same event is already at this index.
    Duplicate(u64),
    /// Append it at `index`; its JSON is `size` bytes.
    Append {
        /// Its position.
        index: u64,
        /// Its encoded size.
        size: u64,
    },
}

impl AppendPlan {
    /// The reply for this plan.
    pub fn appended(self) -> Appended {
        match self {
            AppendPlan::Duplicate(index) => Appended {
                index,
                duplicate: true,
            },
            AppendPlan::Append { index, .. } => Appended {
                index,
                duplicate: false,
            },
        }
    }
}
