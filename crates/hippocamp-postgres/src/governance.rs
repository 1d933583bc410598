//! Governance records on PostgreSQL: [`PgConsents`] (consent per exact
//! scope) and [`PgAudit`] (the append-only audit log), shared by every
//! server over the schema.

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, MemoryScope, Result, ScopeKey};
use hippocamp_governance::audit::{check_page, page_of};
use hippocamp_governance::{
    AuditLog, AuditPage, AuditRecord, Consent, ConsentStore, NewAuditRecord,
};

use crate::db::{Client, Database, db_error};

/// How long a governance call may wait for a connection.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

async fn client(db: &Database) -> Result<Client> {
    db.client(Deadline::after(CALL_TIMEOUT)).await
}

fn i(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Consents in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgConsents {
    db: Database,
}

impl PgConsents {
    /// Consents over `db`.
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

fn decode_consent(json: &str) -> Result<Consent> {
    serde_json::from_str(json)
        .map_err(|e| Error::Corrupt(format!("undecodable consent record: {e}")))
}

#[async_trait]
impl ConsentStore for PgConsents {
    async fn record(&self, scope: &MemoryScope, consent: Consent) -> Result<Consent> {
        let json = serde_json::to_string(&consent)
            .map_err(|e| Error::Corrupt(format!("cannot encode a consent: {e}")))?;
        client(&self.db)
            .await?
            .execute(
                "INSERT INTO consents (app, usr, record) VALUES ($1, $2, $3) \
                 ON CONFLICT (app, usr) DO UPDATE SET record = EXCLUDED.record",
                &[&scope.app().as_str(), &scope.user().as_str(), &json],
            )
            .await
            .map_err(db_error)?;
        Ok(consent)
    }

    async fn get(&self, scope: &MemoryScope) -> Result<Option<Consent>> {
        client(&self.db)
            .await?
            .query_opt(
                "SELECT record FROM consents WHERE app = $1 AND usr = $2",
                &[&scope.app().as_str(), &scope.user().as_str()],
            )
            .await
            .map_err(db_error)?
            .map(|r| decode_consent(r.get(0)))
            .transpose()
    }

    async fn remove(&self, scope: &MemoryScope, now_ms: u64) -> Result<Option<Consent>> {
        let mut c = client(&self.db).await?;
        let tx = c.transaction().await.map_err(db_error)?;
        let (app, usr) = (scope.app().as_str(), scope.user().as_str());
        let gone = tx
            .query_opt(
                "DELETE FROM consents WHERE app = $1 AND usr = $2 RETURNING record",
                &[&app, &usr],
            )
            .await
            .map_err(db_error)?
            .map(|r| decode_consent(r.get(0)))
            .transpose()?;
        tx.execute(
            "INSERT INTO consent_withdrawals (app, usr, at_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (app, usr) DO UPDATE SET at_ms = EXCLUDED.at_ms",
            &[&app, &usr, &i64::try_from(now_ms).unwrap_or(i64::MAX)],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(gone)
    }

    async fn withdrawn_at(&self, scope: &MemoryScope) -> Result<Option<u64>> {
        Ok(client(&self.db)
            .await?
            .query_opt(
                "SELECT at_ms FROM consent_withdrawals WHERE app = $1 AND usr = $2",
                &[&scope.app().as_str(), &scope.user().as_str()],
            )
            .await
            .map_err(db_error)?
            .map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
    }
}

/// The audit log in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgAudit {
    db: Database,
    key: ScopeKey,
}

impl PgAudit {
    /// The log over `db`, its scope hashes keyed with the deployment's
    /// key ([`PgAudit::load_key`]).
    pub fn new(db: Database, key: ScopeKey) -> Self {
        Self { db, key }
    }

    /// The deployment's scope-hash key: made by the first server that
    /// asks (a concurrent first start keeps one), read by the others.
    pub async fn load_key(db: &Database) -> Result<ScopeKey> {
        let c = client(db).await?;
        c.execute(
            "INSERT INTO governance_keys (name, key) VALUES ('scope_hash', $1) \
             ON CONFLICT (name) DO NOTHING",
            &[&ScopeKey::random().as_bytes().as_slice()],
        )
        .await
        .map_err(db_error)?;
        let row = c
            .query_one(
                "SELECT key FROM governance_keys WHERE name = 'scope_hash'",
                &[],
            )
            .await
            .map_err(db_error)?;
        let bytes: &[u8] = row.get(0);
        <[u8; 32]>::try_from(bytes)
            .map(ScopeKey::from_bytes)
            .map_err(|_| Error::Corrupt("the scope-hash key is malformed".into()))
    }
}

#[async_trait]
impl AuditLog for PgAudit {
    async fn append(&self, record: NewAuditRecord, at_ms: u64) -> Result<()> {
        let mut client = client(&self.db).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let seq: i64 = tx
            .query_one(
                "UPDATE audit_counter SET last = last + 1 RETURNING last",
                &[],
            )
            .await
            .map_err(db_error)?
            .get(0);
        let stamped = record.stamp(u64::try_from(seq).unwrap_or(0), at_ms, &self.key);
        let json = serde_json::to_string(&stamped)
            .map_err(|e| Error::Corrupt(format!("cannot encode an audit record: {e}")))?;
        tx.execute(
            "INSERT INTO audit_records (seq, at_ms, record) VALUES ($1, $2, $3)",
            &[&seq, &i(at_ms), &json],
        )
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)
    }

    async fn page(&self, cursor: Option<&str>, limit: Option<u64>) -> Result<AuditPage> {
        let (after, limit) = check_page(cursor, limit)?;
        let rows = client(&self.db)
            .await?
            .query(
                "SELECT record FROM audit_records WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&i(after), &i(limit as u64 + 1)],
            )
            .await
            .map_err(db_error)?;
        let records = rows
            .iter()
            .map(|r| {
                serde_json::from_str::<AuditRecord>(r.get(0))
                    .map_err(|e| Error::Corrupt(format!("undecodable audit record: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(page_of(records.into_iter(), limit))
    }

    async fn prune(&self, before_ms: u64) -> Result<u64> {
        let n = client(&self.db)
            .await?
            .execute(
                "DELETE FROM audit_records WHERE at_ms < $1",
                &[&i(before_ms)],
            )
            .await
            .map_err(db_error)?;
        Ok(n)
    }

    fn scope_key(&self) -> ScopeKey {
        self.key
    }
}
