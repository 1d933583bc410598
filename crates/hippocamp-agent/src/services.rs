//! The stores a runner works over, and the user-level operations that
//! must reach all of them at once.
//!
//! Sessions are a user's data like their memory: [`AgentServices::erase_user`]
//! erases the user's memory (advancing its erasure epoch, which fences
//! queued ingestion) and then every session of the user, in one call;
//! [`AgentServices::erase_session`] does the same for one session. Each
//! store advances its own erasure epochs in the erasure's step, so a turn
//! still running, or a delivery still queued, writes nothing back.

use std::sync::Arc;

use hippocamp_artifacts::ArtifactStore;
use hippocamp_core::SessionId;
use hippocamp_core::{CallOptions, MemoryScope, Result};
use hippocamp_memory::{Erasure, MemoryStore};
use hippocamp_outbox::{Outbox, TargetName};
use hippocamp_sessions::SessionStore;
use serde::Serialize;

/// What a runner works over.
#[derive(Debug, Clone)]
pub struct AgentServices {
    /// Conversation sessions.
    pub sessions: Arc<dyn SessionStore>,
    /// The user's memory (needed by preload, ingestion and memory tools).
    pub memory: Option<Arc<dyn MemoryStore>>,
    /// Artifacts (needed by artifact tools and instruction placeholders).
    pub artifacts: Option<Arc<dyn ArtifactStore>>,
    /// The durable ingestion outbox and the memory target registered in it.
    pub outbox: Option<(Outbox, TargetName)>,
}

/// What erasing one session removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionErasure {
    /// Memory entries removed (`None`: no memory store).
    pub memory: Option<u64>,
    /// Whether an agent session of that id existed (and is gone).
    pub agent_session: bool,
}

/// What erasing a user removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UserErasure {
    /// The memory erasure (`None`: no memory store).
    pub memory: Option<Erasure>,
    /// Sessions removed.
    pub sessions: u64,
}

impl AgentServices {
    /// Services with only a session store.
    pub fn new(sessions: Arc<dyn SessionStore>) -> Self {
        Self {
            sessions,
            memory: None,
            artifacts: None,
            outbox: None,
        }
    }

    /// Erases the user's memory, then every session of the user. A
    /// refusal of the memory erasure (a hold, a retention) erases
    /// nothing.
    pub async fn erase_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<UserErasure> {
        let memory = match &self.memory {
            Some(m) => Some(m.delete_user(scope, call).await?),
            None => None,
        };
        let sessions = self.sessions.delete_user(scope, call).await?;
        Ok(UserErasure { memory, sessions })
    }

    /// Erases the session's memory entries, then the agent session of the
    /// same id. A refusal of the memory erasure erases nothing.
    pub async fn erase_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        call: &CallOptions,
    ) -> Result<SessionErasure> {
        let memory = match &self.memory {
            Some(m) => Some(m.delete_session(scope, session, call).await?),
            None => None,
        };
        let agent_session = self.sessions.delete(scope, session, call).await?;
        Ok(SessionErasure {
            memory,
            agent_session,
        })
    }
}
