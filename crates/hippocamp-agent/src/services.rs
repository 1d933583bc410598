//! The stores a runner works over, and the user-level operations that
//! must reach all of them at once.
//!
//! Sessions are a user's data like their memory: [`AgentServices::erase_user`]
//! erases the user's memory (advancing its erasure epoch, which fences
//! queued ingestion) and then every session of the user, in one call.

use std::sync::Arc;

use hippocamp_artifacts::ArtifactStore;
use hippocamp_core::{CallOptions, MemoryScope, Result};
use hippocamp_memory::{Erasure, MemoryStore};
use hippocamp_outbox::{Outbox, TargetName};
use hippocamp_sessions::{Session, SessionStore, check_session};
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

    /// Erases the user's memory, then every session of the user.
    pub async fn erase_user(&self, scope: &MemoryScope, call: &CallOptions) -> Result<UserErasure> {
        let memory = match &self.memory {
            Some(m) => Some(m.delete_user(scope, call).await?),
            None => None,
        };
        let sessions = self.sessions.delete_user(scope).await?;
        Ok(UserErasure { memory, sessions })
    }

    /// Every session of the user with its events (for an export).
    pub async fn export_sessions(&self, scope: &MemoryScope) -> Result<Vec<Session>> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self.sessions.list(scope, after.as_ref(), None).await?;
            for info in &page.items {
                let s = self.sessions.get(scope, &info.id).await?;
                check_session(scope, &info.id, &s)?;
                out.push(s);
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }
}
