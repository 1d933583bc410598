//! [`PgTokens`]: the bearer tokens' records on PostgreSQL (hashes and
//! grants, never secrets), so a token created through one server works on
//! all, and a revocation reaches every server at its next poll of the
//! version (the services layer polls it; see its documentation for the
//! bound). Records are opaque JSON here: the services layer owns their
//! shape.

use hippocamp_core::{Deadline, Result};

use crate::db::{Database, db_error};

/// How long a token call may wait for a connection.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The token table.
#[derive(Debug, Clone)]
pub struct PgTokens {
    db: Database,
}

impl PgTokens {
    /// The tokens of `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// The version, advanced by every change.
    pub async fn version(&self) -> Result<i64> {
        let client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        Ok(client
            .query_one("SELECT version FROM tokens_version", &[])
            .await
            .map_err(db_error)?
            .get(0))
    }

    /// Every record with the version they are as of.
    pub async fn load(&self) -> Result<(i64, Vec<String>)> {
        let mut client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(db_error)?;
        let version: i64 = tx
            .query_one("SELECT version FROM tokens_version", &[])
            .await
            .map_err(db_error)?
            .get(0);
        let records = tx
            .query("SELECT record FROM tokens ORDER BY id", &[])
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect();
        tx.commit().await.map_err(db_error)?;
        Ok((version, records))
    }

    /// Adds a record.
    pub async fn insert(&self, id: &str, sha256: &str, record: &str) -> Result<()> {
        let mut client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "INSERT INTO tokens (id, sha256, record) VALUES ($1, $2, $3)",
            &[&id, &sha256, &record],
        )
        .await
        .map_err(db_error)?;
        tx.execute("UPDATE tokens_version SET version = version + 1", &[])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    /// Removes the record `id`; whether there was one.
    pub async fn remove(&self, id: &str) -> Result<bool> {
        let mut client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let n = tx
            .execute("DELETE FROM tokens WHERE id = $1", &[&id])
            .await
            .map_err(db_error)?;
        tx.execute("UPDATE tokens_version SET version = version + 1", &[])
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(n > 0)
    }
}
