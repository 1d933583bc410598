//! The [`SessionStore`] contract: a user's sessions, each an ordered list
//! of events with stable ids.

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, ErasureFence, LimitInfo, MemoryScope, Result, SessionId, limit_table,
};
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
        /// Events one page of a session may return.
        max_events_page: default 500, min 1, max 10_000,
            "events one page of a session's events may return (the default page size)";
        /// Bytes of one page of a session's events.
        max_events_page_bytes: default 4_194_304, min 1, max 268_435_456,
            "bytes (as JSON) one page of a session's events may hold; a page always holds at least one event";
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

/// One page of a session's events, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventPage {
    /// The events, from the requested position on.
    pub events: Vec<SessionEvent>,
    /// The position of the next page's first event; `None` at the end.
    pub next: Option<u64>,
}

/// Options of an append.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendOptions {
    /// Deadline and caller.
    pub call: CallOptions,
    /// The erasure fence read before the append was admitted (a runner
    /// reads it when its turn starts): once the user or the session has
    /// been erased since, the append is refused (`StaleEpoch`), so a turn
    /// in flight cannot re-create an erased session. `None`: unfenced.
    pub fence: Option<ErasureFence>,
}

impl AppendOptions {
    /// An unfenced append with `call`.
    pub fn new(call: CallOptions) -> Self {
        Self { call, fence: None }
    }

    /// Sets the fence.
    #[must_use]
    pub fn fenced(mut self, fence: ErasureFence) -> Self {
        self.fence = Some(fence);
        self
    }
}

/// One page of a user's sessions, by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
///
/// Erasure is fenced like memory's: erasing the user advances the scope's
/// erasure epoch and erasing a session advances the session's, each in
/// the deletion's own step (even when nothing was held), and an append
/// carrying an older [`ErasureFence`] is refused. Both epochs outlive the
/// data: they are what keeps an erased session from being re-created by
/// work that started before the erasure.
#[async_trait]
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// What the store is and its limits.
    fn capabilities(&self) -> SessionCapabilities;

    /// Appends `event` to the session (created by its first event).
    /// Appending an event whose id the session already holds is a no-op
    /// when the data is the same (`duplicate`), and `InvalidArgument`
    /// (`event_id`) when it differs. Acknowledged means stored (durable
    /// stores: survives a crash). With a fence, refused with `StaleEpoch`
    /// when the user or the session was erased after it was read.
    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        opts: &AppendOptions,
    ) -> Result<Appended>;

    /// The scope's and the session's erasure epochs now (0 until erased).
    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<ErasureFence>;

    /// The whole session, or `NotFound`.
    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Session>;

    /// The session's record without its events (its length among them),
    /// or `NotFound`: what an append or a pop reads instead of the whole
    /// session.
    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<SessionInfo>;

    /// One page of the session's events from position `from` (0 for the
    /// first), at most `limit` (default and ceiling: `max_events_page`)
    /// and at most `max_events_page_bytes` of JSON (always at least one
    /// event), with the position of the next page. A session that does
    /// not exist is `NotFound`.
    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<EventPage>;

    /// The user's sessions with an id after `after`, by id, at most
    /// `limit` (default and ceiling: `max_page`).
    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<SessionPage>;

    /// Deletes one session and advances its erasure epoch; whether it
    /// existed.
    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<bool>;

    /// Deletes every session of the user and advances the scope's erasure
    /// epoch; how many sessions there were.
    async fn delete_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<u64>;

    /// Removes the session's last event and returns it (`None` when the
    /// session is empty or absent). The session stays with one event
    /// fewer, and the removed event's id may be appended again.
    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Option<SessionEvent>>;

    /// Content-free counters.
    async fn status(&self) -> Result<SessionStatus>;
}

/// A layer over another session store that changes only some operations
/// (see `hippocamp_memory::MemoryLayer`, the same shape): what a layer
/// does not write forwards to [`inner`](Self::inner), and a blanket
/// implementation makes every layer a [`SessionStore`]. `Arc<S>` and
/// `Box<S>` are layers that change nothing.
#[async_trait]
pub trait SessionLayer: Send + Sync + fmt::Debug {
    /// The store underneath.
    type Inner: SessionStore + ?Sized;

    /// The store underneath.
    fn inner(&self) -> &Self::Inner;

    /// See [`SessionStore::capabilities`].
    fn capabilities(&self) -> SessionCapabilities {
        self.inner().capabilities()
    }

    /// See [`SessionStore::append`].
    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        opts: &AppendOptions,
    ) -> Result<Appended> {
        self.inner().append(scope, session, event, opts).await
    }

    /// See [`SessionStore::fence`].
    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<ErasureFence> {
        self.inner().fence(scope, session, call).await
    }

    /// See [`SessionStore::get`].
    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Session> {
        self.inner().get(scope, session, call).await
    }

    /// See [`SessionStore::info`].
    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<SessionInfo> {
        self.inner().info(scope, session, call).await
    }

    /// See [`SessionStore::events`].
    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<EventPage> {
        self.inner().events(scope, session, from, limit, call).await
    }

    /// See [`SessionStore::list`].
    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<SessionPage> {
        self.inner().list(scope, after, limit, call).await
    }

    /// See [`SessionStore::delete`].
    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<bool> {
        self.inner().delete(scope, session, call).await
    }

    /// See [`SessionStore::delete_user`].
    async fn delete_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<u64> {
        self.inner().delete_user(scope, call).await
    }

    /// See [`SessionStore::pop_last`].
    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        self.inner().pop_last(scope, session, call).await
    }

    /// See [`SessionStore::status`].
    async fn status(&self) -> Result<SessionStatus> {
        self.inner().status().await
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<L: SessionLayer> SessionStore for L {
    fn capabilities(&self) -> SessionCapabilities {
        SessionLayer::capabilities(self)
    }
    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        opts: &AppendOptions,
    ) -> Result<Appended> {
        SessionLayer::append(self, scope, session, event, opts).await
    }
    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<ErasureFence> {
        SessionLayer::fence(self, scope, session, call).await
    }
    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Session> {
        SessionLayer::get(self, scope, session, call).await
    }
    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<SessionInfo> {
        SessionLayer::info(self, scope, session, call).await
    }
    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<EventPage> {
        SessionLayer::events(self, scope, session, from, limit, call).await
    }
    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<SessionPage> {
        SessionLayer::list(self, scope, after, limit, call).await
    }
    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<bool> {
        SessionLayer::delete(self, scope, session, call).await
    }
    async fn delete_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<u64> {
        SessionLayer::delete_user(self, scope, call).await
    }
    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        SessionLayer::pop_last(self, scope, session, call).await
    }
    async fn status(&self) -> Result<SessionStatus> {
        SessionLayer::status(self).await
    }
}

impl<T: SessionStore + ?Sized> SessionLayer for std::sync::Arc<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}

impl<T: SessionStore + ?Sized> SessionLayer for Box<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}

/// A page of `events` (a session's, from its position `from`) as every
/// store cuts it: at most `limit` events and `max_bytes` of JSON, always
/// at least one; `sizes` gives each event's JSON size.
pub fn cut_page(
    limits: &SessionLimits,
    from: u64,
    limit: Option<u64>,
    events: impl Iterator<Item = (SessionEvent, u64)>,
    total: u64,
) -> Result<EventPage> {
    let max = limits.max_events_page;
    let limit = hippocamp_core::limits::page_limit(limit, max, max)?;
    let mut out = Vec::new();
    let mut bytes = 0;
    for (e, size) in events {
        if out.len() == limit || (!out.is_empty() && bytes + size > limits.max_events_page_bytes) {
            break;
        }
        bytes += size;
        out.push(e);
    }
    let reached = from + out.len() as u64;
    Ok(EventPage {
        events: out,
        next: (reached < total).then_some(reached),
    })
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
