//! [`PgSessions`]: the runner's session store on PostgreSQL.
//!
//! An append is one transaction: it locks the user's row (so the
//! per-user session limit holds across servers), then the session's, and
//! applies [`plan_append`], the rule every session store shares. Events
//! are stored as JSON in append order and checked against the scope asked
//! for when read back.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use hippocamp_core::{Deadline, Error, MemoryScope, Result, SessionId, time::now_ms};
use hippocamp_sessions::store::{AppendPlan, plan_append};
use hippocamp_sessions::{
    Appended, Session, SessionCapabilities, SessionEvent, SessionInfo, SessionLimits, SessionPage,
    SessionStatus, SessionStore,
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
    ) -> Result<Appended> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let sessions: i64 = tx
            .query_one(
                "INSERT INTO session_users (app, usr) VALUES ($1, $2) \
                 ON CONFLICT (app, usr) DO UPDATE SET sessions = session_users.sessions \
                 RETURNING sessions",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?
            .get(0);
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
            u64::try_from(sessions).unwrap_or(0),
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

    async fn get(&self, scope: &MemoryScope, session: &SessionId) -> Result<Session> {
        let client = self.client().await?;
        let row = client
            .query_opt(
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
            .ok_or(Error::NotFound("session"))?;
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

    async fn list(
        &self,
        scope: &MemoryScope,
        after: Option<&SessionId>,
        limit: Option<u64>,
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

    async fn delete(&self, scope: &MemoryScope, session: &SessionId) -> Result<bool> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
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

    async fn delete_user(&self, scope: &MemoryScope) -> Result<u64> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let gone = tx
            .execute(
                "DELETE FROM sessions WHERE app = $1 AND usr = $2",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?;
        tx.execute(
            "DELETE FROM session_users WHERE app = $1 AND usr = $2",
            &[&app, &usr],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(gone)
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
