//! [`PgSessions`]: the runner's session store on PostgreSQL.
//!
//! An append is one transaction: it locks the user's row (so the
//! per-user session limit holds across servers), then the session's, and
//! applies [`plan_append`], the rule every session store shares. Events
//! are stored as JSON in append order and checked against the scope asked
//! for when read back. The user's row also holds the user's erasure epoch
//! and `session_epochs` each erased session's; deletions take the user's
//! row lock too, so a fenced append and an erasure are ordered.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use hippocamp_core::{
    CallOptions, Deadline, ErasureFence, Error, MemoryScope, Result, SessionId, check_fence,
    time::now_ms,
};
use hippocamp_sessions::store::{AppendPlan, cut_page, plan_append};
use hippocamp_sessions::{
    AppendOptions, Appended, EventPage, Session, SessionCapabilities, SessionEvent, SessionInfo,
    SessionLimits, SessionPage, SessionStatus, SessionStore,
};

use crate::db::{Database, db_error};

/// Sessions in PostgreSQL, shared by every server over the schema.
#[derive(Debug)]
pub struct PgSessions {
    db: Database,
    limits: SessionLimits,
}

/// How long a session call may wait for a connection.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn info(row: &tokio_postgres::Row, at: usize) -> Result<SessionInfo> {
    Ok(SessionInfo {
        id: SessionId::new(row.get::<_, String>(at))
            .map_err(|_| Error::Corrupt("a stored session id is not valid".into()))?,
        events: u64::try_from(row.get::<_, i64>(at + 1)).unwrap_or(0),
        created_at_ms: u64::try_from(row.get::<_, i64>(at + 2)).unwrap_or(0),
        updated_at_ms: u64::try_from(row.get::<_, i64>(at + 3)).unwrap_or(0),
    })
}

fn decode(json: &str) -> Result<SessionEvent> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("a session event: {e}")))
}

impl PgSessions {
    /// Sessions over `db` enforcing `limits`.
    pub fn new(db: Database, limits: SessionLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self { db, limits })
    }

    async fn client(&self) -> Result<crate::db::Client> {
        self.db.client(Deadline::after(CALL_TIMEOUT)).await
    }
}

fn u(x: i64) -> u64 {
    u64::try_from(x).unwrap_or(0)
}

/// Locks the user's row (creating it), returning its session count and
/// erasure epoch.
/// The session's row (`id, session, events, created_ms, updated_ms`),
/// or `NotFound`.
async fn session_row(
    c: &impl GenericClient,
    scope: &MemoryScope,
    session: &SessionId,
) -> Result<tokio_postgres::Row> {
    c.query_opt(
        "SELECT id, session, events, created_ms, updated_ms FROM sessions \
         WHERE app = $1 AND usr = $2 AND session = $3",
        &[
            &scope.app().as_str(),
            &scope.user().as_str(),
            &session.as_str(),
        ],
    )
    .await
    .map_err(db_error)?
    .ok_or(Error::NotFound("session"))
}

async fn lock_user(c: &impl GenericClient, app: &str, usr: &str) -> Result<(u64, u64)> {
    let row = c
        .query_one(
            "INSERT INTO session_users (app, usr) VALUES ($1, $2) \
             ON CONFLICT (app, usr) DO UPDATE SET sessions = session_users.sessions \
             RETURNING sessions, epoch",
            &[&app, &usr],
        )
        .await
        .map_err(db_error)?;
    Ok((u(row.get(0)), u(row.get(1))))
}

/// The session's erasure epoch (0 until erased).
async fn session_epoch(c: &impl GenericClient, app: &str, usr: &str, session: &str) -> Result<u64> {
    Ok(c.query_opt(
        "SELECT epoch FROM session_epochs WHERE app = $1 AND usr = $2 AND session = $3",
        &[&app, &usr, &session],
    )
    .await
    .map_err(db_error)?
    .map_or(0, |r| u(r.get(0))))
}

#[async_trait]
impl SessionStore for PgSessions {
    fn capabilities(&self) -> SessionCapabilities {
        SessionCapabilities {
            backend: "postgres",
            durable: true,
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
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let (sessions, epoch) = lock_user(&tx, app, usr).await?;
        if opts.fence.is_some() {
            let now = ErasureFence {
                epoch,
                session_epoch: session_epoch(&tx, app, usr, session.as_str()).await?,
            };
            check_fence(opts.fence, now)?;
        }
        let held = tx
            .query_opt(
                "SELECT id, events FROM sessions WHERE app = $1 AND usr = $2 AND session = $3 FOR UPDATE",
                &[&app, &usr, &session.as_str()],
            )
            .await
            .map_err(db_error)?
            .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)));
        let same_id = match held {
            Some((id, _)) => tx
                .query_opt(
                    "SELECT idx, event FROM session_events WHERE session_id = $1 AND event_id = $2",
                    &[&id, &event.id],
                )
                .await
                .map_err(db_error)?
                .map(|r| {
                    Ok::<_, Error>((
                        u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
                        decode(r.get(1))?,
                    ))
                })
                .transpose()?,
            None => None,
        };
        let plan = plan_append(
            &self.limits,
            event,
            same_id.as_ref().map(|(i, e)| (*i, e)),
            held.map_or(0, |(_, n)| u64::try_from(n).unwrap_or(0)),
            held.is_none(),
            sessions,
        )?;
        let AppendPlan::Append { index, .. } = plan else {
            return Ok(plan.appended());
        };
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        let session_id: i64 = if let Some((id, _)) = held {
            tx.execute(
                "UPDATE sessions SET events = events + 1, updated_ms = $2 WHERE id = $1",
                &[&id, &now],
            )
            .await
            .map_err(db_error)?;
            id
        } else {
            tx.execute(
                "UPDATE session_users SET sessions = sessions + 1 WHERE app = $1 AND usr = $2",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?;
            tx.query_one(
                "INSERT INTO sessions (app, usr, session, events, created_ms, updated_ms) \
                     VALUES ($1, $2, $3, 1, $4, $4) RETURNING id",
                &[&app, &usr, &session.as_str(), &now],
            )
            .await
            .map_err(db_error)?
            .get(0)
        };
        let json = serde_json::to_string(event).map_err(|e| Error::Corrupt(e.to_string()))?;
        tx.execute(
            "INSERT INTO session_events (session_id, idx, event_id, event) VALUES ($1, $2, $3, $4)",
            &[
                &session_id,
                &i64::try_from(index).unwrap_or(i64::MAX),
                &event.id,
                &json,
            ],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(plan.appended())
    }

    async fn fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<ErasureFence> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT COALESCE((SELECT epoch FROM session_users WHERE app = $1 AND usr = $2), 0), \
                 COALESCE((SELECT epoch FROM session_epochs WHERE app = $1 AND usr = $2 AND session = $3), 0)",
                &[&app, &usr, &session.as_str()],
            )
            .await
            .map_err(db_error)?;
        Ok(ErasureFence {
            epoch: u(row.get(0)),
            session_epoch: u(row.get(1)),
        })
    }

    async fn get(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Session> {
        let client = self.client().await?;
        let row = session_row(&client, scope, session).await?;
        let id: i64 = row.get(0);
        let events = client
            .query(
                "SELECT event FROM session_events WHERE session_id = $1 ORDER BY idx",
                &[&id],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| decode(r.get(0)))
            .collect::<Result<Vec<_>>>()?;
        let s = Session {
            scope: scope.clone(),
            info: info(&row, 1)?,
            events,
        };
        hippocamp_sessions::store::check_session(scope, session, &s)?;
        Ok(s)
    }

    async fn info(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<SessionInfo> {
        let client = self.client().await?;
        let out = info(&session_row(&client, scope, session).await?, 1)?;
        if &out.id != session {
            return Err(Error::foreign_record("session store", "a session"));
        }
        Ok(out)
    }

    async fn events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        from: u64,
        limit: Option<u64>,
        _call: &CallOptions,
    ) -> Result<EventPage> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT id, events FROM sessions WHERE app = $1 AND usr = $2 AND session = $3",
                &[
                    &scope.app().as_str(),
                    &scope.user().as_str(),
                    &session.as_str(),
                ],
            )
            .await
            .map_err(db_error)?
            .ok_or(Error::NotFound("session"))?;
        let (id, total): (i64, i64) = (row.get(0), row.get(1));
        let most = i64::try_from(self.limits.max_events_page.saturating_add(1)).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT event FROM session_events WHERE session_id = $1 AND idx >= $2 \
                 ORDER BY idx LIMIT $3",
                &[&id, &i64::try_from(from).unwrap_or(i64::MAX), &most],
            )
            .await
            .map_err(db_error)?;
        let events = rows
            .iter()
            .map(|r| {
                let json: &str = r.get(0);
                decode(json).map(|e| (e, json.len() as u64))
            })
            .collect::<Result<Vec<_>>>()?;
        cut_page(&self.limits, from, limit, events.into_iter(), u(total))
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
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT session, events, created_ms, updated_ms FROM sessions \
                 WHERE app = $1 AND usr = $2 AND ($3::TEXT IS NULL OR session > $3) \
                 ORDER BY session LIMIT $4",
                &[
                    &scope.app().as_str(),
                    &scope.user().as_str(),
                    &after.map(SessionId::as_str),
                    &i64::try_from(limit + 1).unwrap_or(i64::MAX),
                ],
            )
            .await
            .map_err(db_error)?;
        let mut items = rows
            .iter()
            .map(|r| info(r, 0))
            .collect::<Result<Vec<_>>>()?;
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
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_user(&tx, app, usr).await?;
        tx.execute(
            "INSERT INTO session_epochs (app, usr, session, epoch) VALUES ($1, $2, $3, 1) \
             ON CONFLICT (app, usr, session) DO UPDATE SET epoch = session_epochs.epoch + 1",
            &[&app, &usr, &session.as_str()],
        )
        .await
        .map_err(db_error)?;
        let gone = tx
            .execute(
                "DELETE FROM sessions WHERE app = $1 AND usr = $2 AND session = $3",
                &[&app, &usr, &session.as_str()],
            )
            .await
            .map_err(db_error)?;
        if gone > 0 {
            tx.execute(
                "UPDATE session_users SET sessions = sessions - 1 WHERE app = $1 AND usr = $2",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(gone > 0)
    }

    async fn delete_user(&self, scope: &MemoryScope, _call: &CallOptions) -> Result<u64> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        lock_user(&tx, app, usr).await?;
        let gone = tx
            .execute(
                "DELETE FROM sessions WHERE app = $1 AND usr = $2",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?;
        // The row stays: it carries the epoch that fences what started
        // before this erasure.
        tx.execute(
            "UPDATE session_users SET sessions = 0, epoch = epoch + 1 WHERE app = $1 AND usr = $2",
            &[&app, &usr],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(gone)
    }

    async fn pop_last(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        _call: &CallOptions,
    ) -> Result<Option<SessionEvent>> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let Some(row) = tx
            .query_opt(
                "SELECT id, events FROM sessions WHERE app = $1 AND usr = $2 AND session = $3 FOR UPDATE",
                &[&app, &usr, &session.as_str()],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(None);
        };
        let (id, events): (i64, i64) = (row.get(0), row.get(1));
        if events == 0 {
            return Ok(None);
        }
        let gone = tx
            .query_opt(
                "DELETE FROM session_events WHERE session_id = $1 AND idx = $2 RETURNING event",
                &[&id, &(events - 1)],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| Error::Corrupt("a session's last event is missing".into()))?;
        let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
        tx.execute(
            "UPDATE sessions SET events = events - 1, updated_ms = $2 WHERE id = $1",
            &[&id, &now],
        )
        .await
        .map_err(db_error)?;
        let event = decode(gone.get(0))?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(event))
    }

    async fn status(&self) -> Result<SessionStatus> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*), COALESCE(sum(events), 0)::BIGINT FROM sessions",
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(SessionStatus {
            sessions: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
            events: u64::try_from(row.get::<_, i64>(1)).unwrap_or(0),
        })
    }
}
