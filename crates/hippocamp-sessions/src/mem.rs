//! [`InMemorySessions`]: sessions in a map, lost with the process.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use hippocamp_core::{Error, MemoryScope, Result, SessionId, time::now_ms};
use parking_lot::RwLock;

use crate::event::SessionEvent;
use crate::store::{
    AppendPlan, Appended, Session, SessionCapabilities, SessionInfo, SessionLimits, SessionPage,
    SessionStatus, SessionStore, plan_append,
};

#[derive(Debug, Default)]
struct Held {
    info_created: u64,
    info_updated: u64,
    events: Vec<SessionEvent>,
    by_id: HashMap<String, u64>,
}

/// Sessions in memory, per scope, by id.
#[derive(Debug)]
pub struct InMemorySessions {
    limits: SessionLimits,
    scopes: RwLock<HashMap<MemoryScope, BTreeMap<SessionId, Held>>>,
}

impl InMemorySessions {
    /// An empty store enforcing `limits`.
    pub fn new(limits: SessionLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            limits,
            scopes: RwLock::default(),
        })
    }
}

fn info(id: &SessionId, h: &Held) -> SessionInfo {
    SessionInfo {
        id: id.clone(),
        events: h.events.len() as u64,
        created_at_ms: h.info_created,
        updated_at_ms: h.info_updated,
    }
}

#[async_trait]
impl SessionStore for InMemorySessions {
    fn capabilities(&self) -> SessionCapabilities {
        SessionCapabilities {
            backend: "memory",
            durable: false,
            limits: self.limits.describe(),
        }
    }

    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
    ) -> Result<Appended> {
        let mut scopes = self.scopes.write();
        let user = scopes.entry(scope.clone()).or_default();
        let sessions = user.len() as u64;
        let held = user.get(session);
        let plan = plan_append(
            &self.limits,
            event,
            held.and_then(|h| {
                h.by_id
                    .get(&event.id)
                    .map(|&i| (i, &h.events[hippocamp_core::limits::to_usize(i)]))
            }),
            held.map_or(0, |h| h.events.len() as u64),
            held.is_none(),
            sessions,
        );
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                if user.is_empty() {
                    scopes.remove(scope);
                }
                return Err(e);
            }
        };
        if let AppendPlan::Append { index, .. } = plan {
            let now = now_ms();
            let h = user.entry(session.clone()).or_insert_with(|| Held {
                info_created: now,
                ..Held::default()
            });
            h.info_updated = now;
            h.by_id.insert(event.id.clone(), index);
            h.events.push(event.clone());
        }
        Ok(plan.appended())
    }

    async fn get(&self, scope: &MemoryScope, session: &SessionId) -> Result<Session> {
        let scopes = self.scopes.read();
        let h = scopes
            .get(scope)
            .and_then(|u| u.get(session))
            .ok_or(Error::NotFound("session"))?;
        Ok(Session {
            scope: scope.clone(),
            info: info(session, h),
            events: h.events.clone(),
        })
    }

    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
    ) -> Result<SessionPage> {
        let max = self.limits.max_page;
        let limit = hippocamp_core::limits::page_limit(limit, max, max)?;
        let scopes = self.scopes.read();
        let Some(user) = scopes.get(scope) else {
            return Ok(SessionPage {
                items: Vec::new(),
                next: None,
            });
        };
        let range = match after {
            Some(a) => user
                .range::<SessionId, _>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)),
            None => user.range::<SessionId, _>(..),
        };
        let mut items: Vec<SessionInfo> =
            range.take(limit + 1).map(|(id, h)| info(id, h)).collect();
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|i| i.id.clone())
        } else {
            None
        };
        Ok(SessionPage { items, next })
    }

    async fn delete(&self, scope: &MemoryScope, session: &SessionId) -> Result<bool> {
        let mut scopes = self.scopes.write();
        let Some(user) = scopes.get_mut(scope) else {
            return Ok(false);
        };
        let gone = user.remove(session).is_some();
        if user.is_empty() {
            scopes.remove(scope);
        }
        Ok(gone)
    }

    async fn delete_user(&self, scope: &MemoryScope) -> Result<u64> {
        Ok(self
            .scopes
            .write()
            .remove(scope)
            .map_or(0, |u| u.len() as u64))
    }

    async fn status(&self) -> Result<SessionStatus> {
        let scopes = self.scopes.read();
        let mut s = SessionStatus::default();
        for u in scopes.values() {
            s.sessions += u.len() as u64;
            s.events += u.values().map(|h| h.events.len() as u64).sum::<u64>();
        }
        Ok(s)
    }
}
