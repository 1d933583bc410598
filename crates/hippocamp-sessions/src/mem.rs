//! [`InMemorySessions`]: sessions in a map, lost with the process.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, ErasureFence, Error, MemoryScope, Result, SessionId, check_fence, time::now_ms,
};
use parking_lot::RwLock;

use crate::event::SessionEvent;
use crate::store::{
    AppendOptions, AppendPlan, Appended, EventPage, Session, SessionCapabilities, SessionInfo,
    SessionLimits, SessionPage, SessionStatus, SessionStore, cut_page, plan_append,
};

#[derive(Debug, Default)]
struct Held {
    info_created: u64,
    info_updated: u64,
    events: Vec<SessionEvent>,
    by_id: HashMap<String, u64>,
}

/// A scope's erasure epochs: its own and its erased sessions'.
#[derive(Debug, Default)]
struct Epochs {
    scope: u64,
    sessions: HashMap<SessionId, u64>,
}

impl Epochs {
    fn of(&self, session: &SessionId) -> ErasureFence {
        ErasureFence {
            epoch: self.scope,
            session_epoch: self.sessions.get(session).copied().unwrap_or(0),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    scopes: HashMap<MemoryScope, BTreeMap<SessionId, Held>>,
    /// Kept after the sessions go: they fence what started before.
    epochs: HashMap<MemoryScope, Epochs>,
}

/// Sessions in memory, per scope, by id.
#[derive(Debug)]
pub struct InMemorySessions {
    limits: SessionLimits,
    state: RwLock<State>,
}

impl InMemorySessions {
    /// An empty store enforcing `limits`.
    pub fn new(limits: SessionLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            limits,
            state: RwLock::default(),
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
        opts: &AppendOptions,
    ) -> Result<Appended> {
        let mut state = self.state.write();
        let State { scopes, epochs } = &mut *state;
        let now = epochs.get(scope).map(|e| e.of(session)).unwrap_or_default();
        check_fence(opts.fence, now)?;
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

    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<ErasureFence> {
        let state = self.state.read();
        Ok(state
            .epochs
            .get(scope)
            .map(|e| e.of(session))
            .unwrap_or_default())
    }

    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Session> {
        let state = self.state.read();
        let h = state
            .scopes
            .get(scope)
            .and_then(|u| u.get(session))
            .ok_or(Error::NotFound("session"))?;
        Ok(Session {
            scope: scope.clone(),
            info: info(session, h),
            events: h.events.clone(),
        })
    }

    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<SessionInfo> {
        let state = self.state.read();
        state
            .scopes
            .get(scope)
            .and_then(|u| u.get(session))
            .map(|h| info(session, h))
            .ok_or(Error::NotFound("session"))
    }

    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        _call: &CallOptions,
    ) -> Result<EventPage> {
        let state = self.state.read();
        let h = state
            .scopes
            .get(scope)
            .and_then(|u| u.get(session))
            .ok_or(Error::NotFound("session"))?;
        let start = hippocamp_core::limits::to_usize(from).min(h.events.len());
        let sized = h.events[start..].iter().map(|e| {
            let size = serde_json::to_vec(e).map_or(0, |b| b.len() as u64);
            (e.clone(), size)
        });
        cut_page(&self.limits, from, limit, sized, h.events.len() as u64)
    }

    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        _call: &CallOptions,
    ) -> Result<SessionPage> {
        let max = self.limits.max_page;
        let limit = hippocamp_core::limits::page_limit(limit, max, max)?;
        let state = self.state.read();
        let Some(user) = state.scopes.get(scope) else {
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

    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<bool> {
        let mut state = self.state.write();
        *state
            .epochs
            .entry(scope.clone())
            .or_default()
            .sessions
            .entry(session.clone())
            .or_default() += 1;
        let Some(user) = state.scopes.get_mut(scope) else {
            return Ok(false);
        };
        let gone = user.remove(session).is_some();
        if user.is_empty() {
            state.scopes.remove(scope);
        }
        Ok(gone)
    }

    async fn delete_user(&self, scope: &MemoryScope, _call: &CallOptions) -> Result<u64> {
        let mut state = self.state.write();
        state.epochs.entry(scope.clone()).or_default().scope += 1;
        Ok(state.scopes.remove(scope).map_or(0, |u| u.len() as u64))
    }

    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        let mut state = self.state.write();
        let Some(h) = state.scopes.get_mut(scope).and_then(|u| u.get_mut(session)) else {
            return Ok(None);
        };
        let last = h.events.pop();
        if let Some(e) = &last {
            h.by_id.remove(&e.id);
            h.info_updated = now_ms();
        }
        Ok(last)
    }

    async fn status(&self) -> Result<SessionStatus> {
        let state = self.state.read();
        let mut s = SessionStatus::default();
        for u in state.scopes.values() {
            s.sessions += u.len() as u64;
            s.events += u.values().map(|h| h.events.len() as u64).sum::<u64>();
        }
        Ok(s)
    }
}
