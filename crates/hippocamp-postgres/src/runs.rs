//! [`PgRuns`]: consolidation run records on PostgreSQL, so every server
//! lists, applies and reverts the same runs and a restart forgets none.
//! Records are opaque JSON here, ordered by a key the services layer
//! makes (start time, then id): it owns their shape.

use hippocamp_core::{Deadline, MemoryScope, Result};

use crate::db::{Database, db_error};

/// How long a run-record call may wait for a connection.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The run-record table.
#[derive(Debug, Clone)]
pub struct PgRuns {
    db: Database,
}

impl PgRuns {
    /// The run records of `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }

    /// Writes `record` under `key` in `scope` (replacing the one there),
    /// then keeps the newest `keep` records of the scope, in one
    /// transaction.
    pub async fn put(&self, scope: &MemoryScope, key: &str, record: &str, keep: u64) -> Result<()> {
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let mut client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        tx.execute(
            "INSERT INTO consolidation_runs (app, usr, run_key, record) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (app, usr, run_key) DO UPDATE SET record = EXCLUDED.record",
            &[&app, &usr, &key, &record],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "DELETE FROM consolidation_runs WHERE app = $1 AND usr = $2 AND run_key IN \
             (SELECT run_key FROM consolidation_runs WHERE app = $1 AND usr = $2 \
              ORDER BY run_key DESC OFFSET $3)",
            &[&app, &usr, &keep],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    /// The scope's records, newest key first.
    pub async fn list(&self, scope: &MemoryScope) -> Result<Vec<String>> {
        let client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        Ok(client
            .query(
                "SELECT record FROM consolidation_runs WHERE app = $1 AND usr = $2 \
                 ORDER BY run_key DESC",
                &[&scope.app().as_str(), &scope.user().as_str()],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect())
    }

    /// Removes every record of `scope`.
    pub async fn forget(&self, scope: &MemoryScope) -> Result<()> {
        let client = self.db.client(Deadline::after(CALL_TIMEOUT)).await?;
        client
            .execute(
                "DELETE FROM consolidation_runs WHERE app = $1 AND usr = $2",
                &[&scope.app().as_str(), &scope.user().as_str()],
            )
            .await
            .map_err(db_error)?;
        Ok(())
    }
}
