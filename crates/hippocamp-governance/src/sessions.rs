//! [`GovernedSessions`]: the agent session store every caller is handed,
//! which asks the policy before each operation on a user's sessions, as
//! [`crate::PolicyChecked`] does for memory.
//!
//! An append is asked `append` (the static policy: a consent covering
//! memory when the app requires one; nothing of a suspended app), reads
//! `get` and `list`, deleting a session `delete` and erasing the user's
//! `erase` (a held user's are refused). Deletions and erasures are
//! recorded in the audit log with their outcome and caller, as memory's
//! are. Not consulted (no user data moves): `capabilities`, `fence`,
//! `status`.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, ErasureFence, MemoryScope, Result, SessionId};
use hippocamp_sessions::{
    AppendOptions, Appended, EventPage, Session, SessionCapabilities, SessionEvent, SessionInfo,
    SessionLayer, SessionPage, SessionStatus, SessionStore,
};

use crate::audit::AuditEvent;
use crate::gate::Gate;
use crate::policy::{Action, Resource};

/// Asks the gate's policy before every operation on `inner`'s sessions.
#[derive(Debug, Clone)]
pub struct GovernedSessions<S> {
    inner: S,
    gate: Gate,
}

impl<S: SessionStore> GovernedSessions<S> {
    /// Wraps `inner` behind `gate`.
    pub fn new(inner: S, gate: Gate) -> Self {
        Self { inner, gate }
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: SessionStore> SessionLayer for GovernedSessions<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn capabilities(&self) -> SessionCapabilities {
        self.inner.capabilities()
    }

    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        opts: &AppendOptions,
    ) -> Result<Appended> {
        let r = Resource::session(session);
        let (_, call) = self
            .gate
            .ask(Action::Append, Some(scope), r, &opts.call)
            .await?;
        let opts = AppendOptions { call, ..*opts };
        self.inner.append(scope, session, event, &opts).await
    }

    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<ErasureFence> {
        self.inner.fence(scope, session, call).await
    }

    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Session> {
        let r = Resource::session(session);
        let (_, call) = self.gate.ask(Action::Get, Some(scope), r, call).await?;
        self.inner.get(scope, session, &call).await
    }

    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<SessionInfo> {
        let r = Resource::session(session);
        let (_, call) = self.gate.ask(Action::Get, Some(scope), r, call).await?;
        self.inner.info(scope, session, &call).await
    }

    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<EventPage> {
        let r = Resource::session(session);
        let (_, call) = self.gate.ask(Action::Get, Some(scope), r, call).await?;
        self.inner.events(scope, session, from, limit, &call).await
    }

    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        call: &CallOptions,
    ) -> Result<SessionPage> {
        let r = Resource::fixed("sessions", "a page of the user's agent sessions");
        let (_, call) = self.gate.ask(Action::List, Some(scope), r, call).await?;
        self.inner.list(scope, after, limit, &call).await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<bool> {
        let r = Resource::session(session);
        let (_, inner) = self.gate.ask(Action::Delete, Some(scope), r, call).await?;
        let result = self.inner.delete(scope, session, &inner).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "agent_session",
                Some(scope),
                call.caller(),
                result,
                |d| u64::from(*d),
            )
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<u64> {
        let r = Resource::fixed("sessions", "every agent session of the user");
        let (_, inner) = self.gate.ask(Action::Erase, Some(scope), r, call).await?;
        let result = self.inner.delete_user(scope, &inner).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "agent_sessions",
                Some(scope),
                call.caller(),
                result,
                |n| *n,
            )
            .await
    }

    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        // Removing an item is erasing it: asked and recorded as a deletion.
        let r = Resource::session(session);
        let (_, inner) = self.gate.ask(Action::Delete, Some(scope), r, call).await?;
        let result = self.inner.pop_last(scope, session, &inner).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "agent_session_item",
                Some(scope),
                call.caller(),
                result,
                |e| u64::from(e.is_some()),
            )
            .await
    }

    async fn status(&self) -> Result<SessionStatus> {
        self.inner.status().await
    }
}
