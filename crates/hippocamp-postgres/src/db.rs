//! The connection pool, the schema's migrations and the mapping of
//! PostgreSQL's failures to hippocamp's errors.
//!
//! Every store of the distributed profile shares one [`Database`]: a
//! bounded pool (a caller waits at most its deadline, or the pool's wait
//! bound, for a connection) over one schema, whose tables are created by
//! versioned, forward-only migrations applied at start-up under an
//! advisory lock, so servers starting together apply each exactly once.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use hippocamp_core::{Deadline, Error, Problem, Result, Stage};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use crate::migrations::MIGRATIONS;

/// Where and how to reach PostgreSQL.
#[derive(Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// A libpq-style URL, `postgres://user:password@host:port/database`.
    /// It may hold a password: it is never logged or printed (see the
    /// `Debug` implementation).
    pub url: String,
    /// The schema holding hippocamp's tables (created if absent): lower
    /// case letters, digits and `_`, at most 63 bytes, not starting with a
    /// digit.
    pub schema: String,
    /// Most pooled connections of this process.
    pub max_connections: usize,
    /// Longest wait for a pooled connection (a call's own deadline may be
    /// shorter).
    pub wait_timeout: Duration,
    /// Longest wait for a new connection to be established.
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &"<redacted>")
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("wait_timeout", &self.wait_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl PgConfig {
    /// `url` with the default schema (`hippocamp`) and bounds.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: "hippocamp".to_owned(),
            max_connections: 16,
            wait_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// Sets the schema.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        let s = self.schema.as_bytes();
        let ok = !s.is_empty()
            && s.len() <= 63
            && !s[0].is_ascii_digit()
            && s.iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if !ok {
            return Err(Error::config(
                "postgres.schema",
                Problem::Malformed(
                    "lower case letters, digits and `_`, at most 63 bytes, not starting with a digit"
                        .into(),
                ),
            ));
        }
        if self.max_connections == 0 || self.max_connections > 1_000 {
            return Err(Error::config(
                "postgres.max_connections",
                Problem::OutOfRange {
                    value: self.max_connections as i128,
                    min: 1,
                    max: 1_000,
                },
            ));
        }
        for (key, d) in [
            ("postgres.wait_timeout_ms", self.wait_timeout),
            ("postgres.connect_timeout_ms", self.connect_timeout),
        ] {
            if d.is_zero() || d > Duration::from_mins(10) {
                return Err(Error::config(
                    key,
                    Problem::OutOfRange {
                        value: i128::try_from(d.as_millis()).unwrap_or(i128::MAX),
                        min: 1,
                        max: 600_000,
                    },
                ));
            }
        }
        // Parsed here so a bad URL is a configuration error at start-up,
        // with no part of it echoed back.
        tokio_postgres::Config::from_str(&self.url).map_err(|_| {
            Error::config(
                "postgres.url",
                Problem::Malformed("not a postgres:// URL".into()),
            )
        })?;
        Ok(())
    }
}

/// A pool of connections to one schema.
#[derive(Clone)]
pub struct Database {
    pool: Pool,
    schema: String,
    wait_timeout: Duration,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("schema", &self.schema)
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

/// A pooled connection.
pub type Client = deadpool_postgres::Client;

/// How many times a call tries again after a transient failure (getting
/// a connection; a read's queries) before it reports the failure; each
/// wait doubles from 20 ms, within the call's deadline. Writes are not
/// tried again once they sent a statement: one whose commit answer was
/// lost may have committed (an idempotency key makes the caller's retry
/// safe).
pub const MAX_RETRIES: u32 = 4;

/// Runs `op` again after a transient failure (`Unavailable`: no
/// connection, a lost one, a server restarting) at most [`MAX_RETRIES`]
/// times, with doubling waits from 20 ms, within `deadline`. Only for
/// what is safe to repeat: getting a connection, or a read that writes
/// nothing.
pub async fn retry_transient<T, F>(deadline: Deadline, mut op: impl FnMut() -> F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut wait = Duration::from_millis(20);
    let mut attempt = 0;
    loop {
        match op().await {
            Err(Error::Unavailable(why))
                if attempt < MAX_RETRIES && deadline.remaining() > wait =>
            {
                tracing::debug!(%why, attempt, "postgres: a read is tried again");
                tokio::time::sleep(wait).await;
                wait *= 2;
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// The advisory lock key migrations run under (any fixed number; one for
/// every schema, since `CREATE EXTENSION` is database-wide).
const MIGRATION_LOCK: i64 = 0x6869_7070_6f63_616d; // "hippocam"

impl Database {
    /// Connects, creates the schema if absent and applies the migrations
    /// this build knows that the schema lacks. A schema migrated by a newer
    /// build is refused (migrations only go forward).
    pub async fn connect(config: &PgConfig) -> Result<Self> {
        config.validate()?;
        let mut pg = tokio_postgres::Config::from_str(&config.url).map_err(|_| {
            Error::config(
                "postgres.url",
                Problem::Malformed("not a postgres:// URL".into()),
            )
        })?;
        pg.options(format!("-c search_path={},public", config.schema));
        pg.connect_timeout(config.connect_timeout);
        pg.application_name("hippocamp");
        let manager = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.max_connections)
            .wait_timeout(Some(config.wait_timeout))
            .create_timeout(Some(config.connect_timeout))
            .recycle_timeout(Some(config.connect_timeout))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| Error::Unavailable(format!("postgres: cannot build the pool: {e}")))?;
        let db = Self {
            pool,
            schema: config.schema.clone(),
            wait_timeout: config.wait_timeout,
        };
        db.migrate().await?;
        Ok(db)
    }

    /// The schema.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection, waiting at most until `deadline` (a failed attempt
    /// is tried again as [`retry_transient`] says).
    pub async fn client(&self, deadline: Deadline) -> Result<Client> {
        retry_transient(deadline, || self.client_once(deadline)).await
    }

    /// One attempt at a connection: `Timeout` once `deadline` passed,
    /// `Unavailable` when the pool could not give one (worth another try).
    /// For operations whose whole body [`retry_transient`] tries again.
    pub async fn client_once(&self, deadline: Deadline) -> Result<Client> {
        let remaining = deadline.remaining().min(self.wait_timeout);
        if remaining.is_zero() {
            return Err(Error::Timeout(Stage::Backend));
        }
        match tokio::time::timeout(remaining, self.pool.get()).await {
            Ok(Ok(client)) => Ok(client),
            Err(_) | Ok(Err(deadpool_postgres::PoolError::Timeout(_))) if deadline.expired() => {
                Err(Error::Timeout(Stage::Backend))
            }
            Ok(Err(e)) => Err(Error::Unavailable(format!("postgres: no connection: {e}"))),
            Err(_) => Err(Error::Unavailable(
                "postgres: no connection within the wait bound".into(),
            )),
        }
    }

    /// Whether PostgreSQL answers a query now (for `/readyz`).
    pub async fn ping(&self, deadline: Deadline) -> Result<()> {
        let client = self.client(deadline).await?;
        client.simple_query("SELECT 1").await.map_err(db_error)?;
        Ok(())
    }

    async fn migrate(&self) -> Result<()> {
        let deadline = Deadline::after(Duration::from_mins(2));
        let mut client = self.client(deadline).await?;
        lock_schema(&client).await?;
        let result = self.migrate_locked(&mut client).await;
        result.and(unlock_schema(&client).await)
    }

    /// Makes sure the HNSW index over `dimension`-wide vectors exists (an
    /// index on `embedding::vector(dimension)` by inner product, which is
    /// cosine for the unit vectors stored): created by the first server
    /// that opens the store with an embedder, under the migrations' lock.
    /// `false` when pgvector cannot index vectors that wide (more than
    /// [`MAX_HNSW_DIMENSION`]): large scopes are then searched exactly.
    pub async fn vector_index(&self, dimension: usize) -> Result<bool> {
        if dimension == 0 || dimension > MAX_HNSW_DIMENSION {
            return Ok(false);
        }
        // Building it over a large table takes a while, once.
        let client = self.client(Deadline::after(Duration::from_mins(2))).await?;
        lock_schema(&client).await?;
        let created = client
            .batch_execute(&format!(
                "CREATE INDEX IF NOT EXISTS {index} ON memory_entries \
                 USING hnsw ((embedding::vector({dimension})) vector_ip_ops)",
                index = hnsw_index(dimension)
            ))
            .await
            .map_err(db_error);
        created.and(unlock_schema(&client).await).map(|()| true)
    }

    async fn migrate_locked(&self, client: &mut Client) -> Result<()> {
        // The schema name was validated: only [a-z0-9_].
        client
            .batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {schema};
                 CREATE EXTENSION IF NOT EXISTS vector SCHEMA public;
                 CREATE TABLE IF NOT EXISTS {schema}.migrations (
                     version INTEGER PRIMARY KEY,
                     name TEXT NOT NULL,
                     applied_at TIMESTAMPTZ NOT NULL DEFAULT now());",
                schema = self.schema
            ))
            .await
            .map_err(db_error)?;
        let applied: i32 = client
            .query_one("SELECT COALESCE(max(version), 0) FROM migrations", &[])
            .await
            .map_err(db_error)?
            .get(0);
        let known = MIGRATIONS.last().map_or(0, |m| m.version);
        if applied > known {
            return Err(Error::config(
                "postgres.schema",
                Problem::Malformed(format!(
                    "schema `{}` is at migration {applied}; this build knows up to {known}",
                    self.schema
                )),
            ));
        }
        for m in MIGRATIONS.iter().filter(|m| m.version > applied) {
            let tx = client.transaction().await.map_err(db_error)?;
            tx.batch_execute(m.sql).await.map_err(db_error)?;
            tx.execute(
                "INSERT INTO migrations (version, name) VALUES ($1, $2)",
                &[&m.version, &m.name],
            )
            .await
            .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            tracing::info!(schema = %self.schema, version = m.version, name = m.name, "applied migration");
        }
        Ok(())
    }
}

/// The widest vectors pgvector's HNSW index takes (type `vector`).
pub const MAX_HNSW_DIMENSION: usize = 2_000;

/// The name of the HNSW index over `dimension`-wide vectors.
pub fn hnsw_index(dimension: usize) -> String {
    format!("memory_entries_hnsw_{dimension}")
}

/// Takes the lock schema changes run under (released by
/// [`unlock_schema`], or when the connection drops).
async fn lock_schema(client: &Client) -> Result<()> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Releases it: also after a failed change.
async fn unlock_schema(client: &Client) -> Result<()> {
    client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Whether a failure is worth retrying the whole transaction for:
/// PostgreSQL aborted it (serialisation failure, deadlock), so nothing of
/// it committed.
pub fn is_retryable(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// hippocamp's error for a PostgreSQL failure: a lost or refused
/// connection, a server shutting down or out of resources is
/// `Unavailable` (503, worth retrying); anything else is a storage error.
pub fn db_error(e: tokio_postgres::Error) -> Error {
    let unavailable = match e.code() {
        None => true,
        Some(c) => {
            let code = c.code();
            code.starts_with("08")
                || code.starts_with("53")
                || code.starts_with("57P")
                || is_retryable(&e)
        }
    };
    if unavailable {
        Error::Unavailable(format!("postgres: {e}"))
    } else {
        Error::Storage(std::sync::Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// A read that fails transiently is tried again until it succeeds, at
    /// most `MAX_RETRIES` more times; other failures are not retried.
    #[tokio::test]
    async fn transient_failures_are_retried_boundedly_and_others_not() {
        let deadline = || Deadline::after(Duration::from_secs(10));
        let calls = AtomicU32::new(0);
        let flaky = || async {
            if calls.fetch_add(1, Ordering::Relaxed) < 2 {
                Err(Error::Unavailable("lost".into()))
            } else {
                Ok(7)
            }
        };
        assert_eq!(retry_transient(deadline(), flaky).await.ok(), Some(7));
        assert_eq!(calls.load(Ordering::Relaxed), 3);

        let calls = AtomicU32::new(0);
        let down = || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err::<(), _>(Error::Unavailable("down".into()))
        };
        assert!(matches!(
            retry_transient(deadline(), down).await,
            Err(Error::Unavailable(_))
        ));
        assert_eq!(calls.load(Ordering::Relaxed), MAX_RETRIES + 1);

        let calls = AtomicU32::new(0);
        let broken = || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err::<(), _>(Error::Corrupt("bad".into()))
        };
        assert!(retry_transient(deadline(), broken).await.is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 1);

        // No time left: no wait, no retry.
        let calls = AtomicU32::new(0);
        let late = || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err::<(), _>(Error::Unavailable("down".into()))
        };
        let _ = retry_transient(Deadline::after(Duration::from_millis(1)), late).await;
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }
}
