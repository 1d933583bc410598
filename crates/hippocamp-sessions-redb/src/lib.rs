//! [`RedbSessions`]: a user's sessions and their events in one redb file.
//!
//! Each append is one redb write transaction committed with redb's
//! immediate durability (an fsync) before it is acknowledged: agent turns
//! are few per second per user, so the store favours the simplest
//! crash-safe path over group commit. The data directory is owned by
//! one process (`DirLock`).
//!
//! Tables (keys start with the scope, so a user's rows are one range):
//! - `sessions`: scope + session → created, updated (ms), event count;
//! - `events`: (scope + session, index) → the event's JSON;
//! - `event_ids`: (scope + session, event id) → index;
//! - `users`: scope → session count; `meta`: format version, totals;
//! - `epochs`: scope → the user's erasure epoch, scope + session → the
//!   session's (absent: 0), advanced by the deletions in their own
//!   transactions and kept after the data goes (they fence appends
//!   admitted before an erasure).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, ErasureFence, Error, MemoryScope, Result, SessionId, check_fence, time::now_ms,
};
use hippocamp_durable::DirLock;
use hippocamp_sessions::store::{AppendPlan, cut_page, plan_append};
use hippocamp_sessions::{
    AppendOptions, Appended, EventPage, Session, SessionCapabilities, SessionEvent, SessionInfo,
    SessionLimits, SessionPage, SessionStatus, SessionStore,
};
use redb::{Database, ReadableDatabase as _, ReadableTable, TableDefinition};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const SESSIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sessions");
const EVENTS: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("events");
const EVENT_IDS: TableDefinition<(&[u8], &str), u64> = TableDefinition::new("event_ids");
const USERS: TableDefinition<&[u8], u64> = TableDefinition::new("users");
const EPOCHS: TableDefinition<&[u8], u64> = TableDefinition::new("epochs");

const FORMAT: u32 = 1;
const TOTALS: &str = "totals";

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// `len(app) app len(user) user`: every key of a user starts with it.
fn user_key(scope: &MemoryScope) -> Vec<u8> {
    let mut k = Vec::new();
    for part in [scope.app().as_str(), scope.user().as_str()] {
        // Ids are at most 256 bytes (validated types).
        let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
        k.extend_from_slice(&len.to_be_bytes());
        k.extend_from_slice(part.as_bytes());
    }
    k
}

fn session_key(scope: &MemoryScope, session: &SessionId) -> Vec<u8> {
    let mut k = user_key(scope);
    k.extend_from_slice(session.as_str().as_bytes());
    k
}

#[derive(Debug, Clone, Copy, Default)]
struct Header {
    created: u64,
    updated: u64,
    events: u64,
}

impl Header {
    /// The record of session `id` with this header.
    fn info(self, id: &SessionId) -> SessionInfo {
        SessionInfo {
            id: id.clone(),
            events: self.events,
            created_at_ms: self.created,
            updated_at_ms: self.updated,
        }
    }

    fn encode(self) -> [u8; 24] {
        let mut b = [0; 24];
        b[..8].copy_from_slice(&self.created.to_le_bytes());
        b[8..16].copy_from_slice(&self.updated.to_le_bytes());
        b[16..].copy_from_slice(&self.events.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Result<Self> {
        let word = |i: usize| -> Result<u64> {
            b.get(i * 8..i * 8 + 8)
                .and_then(|s| s.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(|| Error::Corrupt("a session header is malformed".into()))
        };
        if b.len() != 24 {
            return Err(Error::Corrupt("a session header is malformed".into()));
        }
        Ok(Self {
            created: word(0)?,
            updated: word(1)?,
            events: word(2)?,
        })
    }
}

fn decode_event(b: &[u8]) -> Result<SessionEvent> {
    serde_json::from_slice(b).map_err(|e| Error::Corrupt(format!("a session event: {e}")))
}

/// (sessions, events) held.
fn totals(t: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<(u64, u64)> {
    match t.get(TOTALS).map_err(storage)? {
        None => Ok((0, 0)),
        Some(v) => {
            let h = Header::decode(v.value())?;
            Ok((h.created, h.updated))
        }
    }
}

fn put_totals(t: &mut redb::Table<&str, &[u8]>, sessions: u64, events: u64) -> Result<()> {
    let h = Header {
        created: sessions,
        updated: events,
        events: 0,
    };
    t.insert(TOTALS, h.encode().as_slice()).map_err(storage)?;
    Ok(())
}

/// Sessions in `DIR/sessions.redb`.
#[derive(Debug, Clone)]
pub struct RedbSessions {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    limits: SessionLimits,
    _lock: DirLock,
    path: PathBuf,
}

impl RedbSessions {
    /// Opens (or creates) the store in `dir`, enforcing `limits`; the
    /// directory is locked for this process. Blocking.
    pub fn open(dir: &Path, limits: SessionLimits) -> Result<Self> {
        limits.validate()?;
        let init = |db: &redb::Database| {
            hippocamp_durable::db::init_format(
                db,
                META,
                "format",
                FORMAT,
                "the session store",
                |txn| {
                    txn.open_table(SESSIONS).map_err(storage)?;
                    txn.open_table(EVENTS).map_err(storage)?;
                    txn.open_table(EVENT_IDS).map_err(storage)?;
                    txn.open_table(USERS).map_err(storage)?;
                    Ok(())
                },
            )
        };
        let (lock, db) =
            hippocamp_durable::db::open_owned(dir, "sessions.lock", "sessions.redb", init, None)?;
        hippocamp_durable::db::init_format(
            &db,
            META,
            "format",
            FORMAT,
            "the session store",
            // Made on every open: stores created before it have none.
            |txn| txn.open_table(EPOCHS).map(drop).map_err(storage),
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                limits,
                _lock: lock,
                path: dir.join("sessions.redb"),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| Error::Unavailable(e.to_string()))?
    }
}

/// The user's and the session's erasure epochs in `epochs`.
fn fence_in(
    epochs: &impl ReadableTable<&'static [u8], u64>,
    user: &[u8],
    session: &[u8],
) -> Result<ErasureFence> {
    let get =
        |k: &[u8]| -> Result<u64> { Ok(epochs.get(k).map_err(storage)?.map_or(0, |v| v.value())) };
    Ok(ErasureFence {
        epoch: get(user)?,
        session_epoch: get(session)?,
    })
}

impl Inner {
    fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        fence: Option<ErasureFence>,
    ) -> Result<Appended> {
        let user = user_key(scope);
        let key = session_key(scope, session);
        let txn = self.db.begin_write().map_err(storage)?;
        if fence.is_some() {
            let epochs = txn.open_table(EPOCHS).map_err(storage)?;
            check_fence(fence, fence_in(&epochs, &user, &key)?)?;
        }
        let plan = {
            let mut sessions = txn.open_table(SESSIONS).map_err(storage)?;
            let mut events = txn.open_table(EVENTS).map_err(storage)?;
            let mut ids = txn.open_table(EVENT_IDS).map_err(storage)?;
            let mut users = txn.open_table(USERS).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let header = match sessions.get(key.as_slice()).map_err(storage)? {
                Some(v) => Some(Header::decode(v.value())?),
                None => None,
            };
            let same = match ids
                .get((key.as_slice(), event.id.as_str()))
                .map_err(storage)?
            {
                Some(i) => {
                    let i = i.value();
                    let held = events
                        .get((key.as_slice(), i))
                        .map_err(storage)?
                        .ok_or_else(|| Error::Corrupt("an indexed event is missing".into()))?;
                    Some((i, decode_event(held.value())?))
                }
                None => None,
            };
            let count = users
                .get(user.as_slice())
                .map_err(storage)?
                .map_or(0, |v| v.value());
            let plan = plan_append(
                &self.limits,
                event,
                same.as_ref().map(|(i, e)| (*i, e)),
                header.map_or(0, |h| h.events),
                header.is_none(),
                count,
            )?;
            if let AppendPlan::Append { index, .. } = plan {
                let now = now_ms();
                let mut h = header.unwrap_or(Header {
                    created: now,
                    ..Header::default()
                });
                h.updated = now;
                h.events += 1;
                let json = serde_json::to_vec(event).map_err(|e| Error::Corrupt(e.to_string()))?;
                events
                    .insert((key.as_slice(), index), json.as_slice())
                    .map_err(storage)?;
                ids.insert((key.as_slice(), event.id.as_str()), index)
                    .map_err(storage)?;
                sessions
                    .insert(key.as_slice(), h.encode().as_slice())
                    .map_err(storage)?;
                let (s, e) = totals(&meta)?;
                if header.is_none() {
                    users.insert(user.as_slice(), count + 1).map_err(storage)?;
                }
                put_totals(&mut meta, s + u64::from(header.is_none()), e + 1)?;
            }
            plan
        };
        match plan {
            // Nothing changed: do not pay for a commit.
            AppendPlan::Duplicate(_) => txn.abort().map_err(storage)?,
            AppendPlan::Append { .. } => txn.commit().map_err(storage)?,
        }
        Ok(plan.appended())
    }

    fn pop_last(&self, scope: &MemoryScope, session: &SessionId) -> Result<Option<SessionEvent>> {
        let key = session_key(scope, session);
        let txn = self.db.begin_write().map_err(storage)?;
        let popped = {
            let mut sessions = txn.open_table(SESSIONS).map_err(storage)?;
            let mut events = txn.open_table(EVENTS).map_err(storage)?;
            let mut ids = txn.open_table(EVENT_IDS).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let header = match sessions.get(key.as_slice()).map_err(storage)? {
                Some(v) => Some(Header::decode(v.value())?),
                None => None,
            };
            match header {
                Some(mut h) if h.events > 0 => {
                    let last = h.events - 1;
                    let event = match events.remove((key.as_slice(), last)).map_err(storage)? {
                        Some(v) => decode_event(v.value())?,
                        None => {
                            return Err(Error::Corrupt("a session's last event is missing".into()));
                        }
                    };
                    ids.remove((key.as_slice(), event.id.as_str()))
                        .map_err(storage)?;
                    h.events = last;
                    h.updated = now_ms();
                    sessions
                        .insert(key.as_slice(), h.encode().as_slice())
                        .map_err(storage)?;
                    let (s, e) = totals(&meta)?;
                    put_totals(&mut meta, s, e.saturating_sub(1))?;
                    Some(event)
                }
                _ => None,
            }
        };
        if popped.is_some() {
            txn.commit().map_err(storage)?;
        } else {
            txn.abort().map_err(storage)?;
        }
        Ok(popped)
    }

    /// The session's header in `txn`, or `NotFound`.
    fn header(txn: &redb::ReadTransaction, key: &[u8]) -> Result<Header> {
        let sessions = txn.open_table(SESSIONS).map_err(storage)?;
        match sessions.get(key).map_err(storage)? {
            Some(v) => Header::decode(v.value()),
            None => Err(Error::NotFound("session")),
        }
    }

    fn info(&self, scope: &MemoryScope, session: &SessionId) -> Result<SessionInfo> {
        let key = session_key(scope, session);
        let txn = self.db.begin_read().map_err(storage)?;
        Ok(Self::header(&txn, &key)?.info(session))
    }

    fn get(&self, scope: &MemoryScope, session: &SessionId) -> Result<Session> {
        let key = session_key(scope, session);
        let txn = self.db.begin_read().map_err(storage)?;
        let h = Self::header(&txn, &key)?;
        let events = txn.open_table(EVENTS).map_err(storage)?;
        let mut out = Vec::with_capacity(hippocamp_core::limits::to_usize(h.events));
        for row in events
            .range((key.as_slice(), 0)..=(key.as_slice(), u64::MAX))
            .map_err(storage)?
        {
            let (_, v) = row.map_err(storage)?;
            out.push(decode_event(v.value())?);
        }
        if out.len() as u64 != h.events {
            return Err(Error::Corrupt("a session's event count is wrong".into()));
        }
        Ok(Session {
            scope: scope.clone(),
            info: h.info(session),
            events: out,
        })
    }

    fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
    ) -> Result<SessionPage> {
        let max = self.limits.max_page;
        let limit = hippocamp_core::limits::page_limit(limit, max, max)?;
        let user = user_key(scope);
        let start = match after {
            // The smallest key after `after`'s: its bytes plus NUL.
            Some(a) => {
                let mut k = session_key(scope, a);
                k.push(0);
                k
            }
            None => user.clone(),
        };
        let txn = self.db.begin_read().map_err(storage)?;
        let sessions = txn.open_table(SESSIONS).map_err(storage)?;
        let mut items = Vec::new();
        for row in sessions.range(start.as_slice()..).map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            let Some(id) = k.value().strip_prefix(user.as_slice()) else {
                break;
            };
            if items.len() == limit + 1 {
                break;
            }
            let id = std::str::from_utf8(id)
                .map_err(|_| Error::Corrupt("a session id is not UTF-8".into()))
                .and_then(SessionId::new)?;
            items.push(Header::decode(v.value())?.info(&id));
        }
        let next = if items.len() > limit {
            items.truncate(limit);
            items.last().map(|i| i.id.clone())
        } else {
            None
        };
        Ok(SessionPage { items, next })
    }

    fn fence(&self, scope: &MemoryScope, session: &SessionId) -> Result<ErasureFence> {
        let txn = self.db.begin_read().map_err(storage)?;
        let epochs = txn.open_table(EPOCHS).map_err(storage)?;
        fence_in(&epochs, &user_key(scope), &session_key(scope, session))
    }

    fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
    ) -> Result<EventPage> {
        let key = session_key(scope, session);
        let txn = self.db.begin_read().map_err(storage)?;
        let sessions = txn.open_table(SESSIONS).map_err(storage)?;
        let h = match sessions.get(key.as_slice()).map_err(storage)? {
            Some(v) => Header::decode(v.value())?,
            None => return Err(Error::NotFound("session")),
        };
        let events = txn.open_table(EVENTS).map_err(storage)?;
        let mut rows = Vec::new();
        // One more than a page can hold at most; cut_page stops first.
        let most = self.limits.max_events_page.saturating_add(1);
        for row in events
            .range((key.as_slice(), from)..=(key.as_slice(), u64::MAX))
            .map_err(storage)?
            .take(hippocamp_core::limits::to_usize(most))
        {
            let (_, v) = row.map_err(storage)?;
            let bytes = v.value();
            rows.push((decode_event(bytes)?, bytes.len() as u64));
        }
        cut_page(&self.limits, from, limit, rows.into_iter(), h.events)
    }

    /// Deletes the sessions whose keys are `keys` (all of `user`'s) and
    /// advances the epoch of what was erased (the session's, or the
    /// user's), in the same transaction.
    fn delete_keys(&self, user: &[u8], keys: Option<Vec<u8>>) -> Result<u64> {
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut epochs = txn.open_table(EPOCHS).map_err(storage)?;
            let erased = keys.as_deref().unwrap_or(user);
            let next = epochs
                .get(erased)
                .map_err(storage)?
                .map_or(0, |v| v.value())
                + 1;
            epochs.insert(erased, next).map_err(storage)?;
        }
        let gone = {
            let mut sessions = txn.open_table(SESSIONS).map_err(storage)?;
            let mut events = txn.open_table(EVENTS).map_err(storage)?;
            let mut ids = txn.open_table(EVENT_IDS).map_err(storage)?;
            let mut users = txn.open_table(USERS).map_err(storage)?;
            let mut meta = txn.open_table(META).map_err(storage)?;
            let targets: Vec<(Vec<u8>, Header)> = if let Some(k) = keys {
                match sessions.get(k.as_slice()).map_err(storage)? {
                    Some(v) => vec![(k.clone(), Header::decode(v.value())?)],
                    None => Vec::new(),
                }
            } else {
                let mut all = Vec::new();
                for row in sessions.range(user..).map_err(storage)? {
                    let (k, v) = row.map_err(storage)?;
                    if !k.value().starts_with(user) {
                        break;
                    }
                    all.push((k.value().to_vec(), Header::decode(v.value())?));
                }
                all
            };
            let mut removed_events = 0;
            for (k, h) in &targets {
                sessions.remove(k.as_slice()).map_err(storage)?;
                events
                    .retain_in((k.as_slice(), 0)..=(k.as_slice(), u64::MAX), |_, _| false)
                    .map_err(storage)?;
                let mut held = Vec::new();
                for row in ids.range((k.as_slice(), "")..).map_err(storage)? {
                    let (key, _) = row.map_err(storage)?;
                    let (session, id) = key.value();
                    if session != k.as_slice() {
                        break;
                    }
                    held.push(id.to_owned());
                }
                for id in &held {
                    ids.remove((k.as_slice(), id.as_str())).map_err(storage)?;
                }
                removed_events += h.events;
            }
            let n = targets.len() as u64;
            if n > 0 {
                let left = users.get(user).map_err(storage)?.map_or(0, |v| v.value());
                if left <= n {
                    users.remove(user).map_err(storage)?;
                } else {
                    users.insert(user, left - n).map_err(storage)?;
                }
                let (s, e) = totals(&meta)?;
                put_totals(
                    &mut meta,
                    s.saturating_sub(n),
                    e.saturating_sub(removed_events),
                )?;
            }
            n
        };
        // Committed even when nothing was held: the epoch advanced.
        txn.commit().map_err(storage)?;
        Ok(gone)
    }
}

#[async_trait]
impl SessionStore for RedbSessions {
    fn capabilities(&self) -> SessionCapabilities {
        SessionCapabilities {
            backend: "redb",
            durable: true,
            limits: self.inner.limits.describe(),
        }
    }

    async fn append(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        event: &SessionEvent,
        opts: &AppendOptions,
    ) -> Result<Appended> {
        let (scope, session, event, fence) =
            (scope.clone(), session.clone(), event.clone(), opts.fence);
        self.blocking(move |i| i.append(&scope, &session, &event, fence))
            .await
    }

    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<ErasureFence> {
        let (scope, session) = (scope.clone(), session.clone());
        self.blocking(move |i| i.fence(&scope, &session)).await
    }

    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Session> {
        let (scope, session) = (scope.clone(), session.clone());
        self.blocking(move |i| i.get(&scope, &session)).await
    }

    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<SessionInfo> {
        let (scope, session) = (scope.clone(), session.clone());
        self.blocking(move |i| i.info(&scope, &session)).await
    }

    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        _call: &CallOptions,
    ) -> Result<EventPage> {
        let (scope, session) = (scope.clone(), session.clone());
        self.blocking(move |i| i.events(&scope, &session, from, limit))
            .await
    }

    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
        _call: &CallOptions,
    ) -> Result<SessionPage> {
        let (scope, after) = (scope.clone(), after.cloned());
        self.blocking(move |i| i.list(&scope, after.as_ref(), limit))
            .await
    }

    async fn delete(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<bool> {
        let (user, key) = (user_key(scope), session_key(scope, session));
        self.blocking(move |i| i.delete_keys(&user, Some(key)).map(|n| n > 0))
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, _call: &CallOptions) -> Result<u64> {
        let user = user_key(scope);
        self.blocking(move |i| i.delete_keys(&user, None)).await
    }

    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        let (scope, session) = (scope.clone(), session.clone());
        self.blocking(move |i| i.pop_last(&scope, &session)).await
    }

    async fn status(&self) -> Result<SessionStatus> {
        self.blocking(|i| {
            let txn = i.db.begin_read().map_err(storage)?;
            let meta = txn.open_table(META).map_err(storage)?;
            let (sessions, events) = totals(&meta)?;
            Ok(SessionStatus { sessions, events })
        })
        .await
    }
}
