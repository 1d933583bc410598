//! Consent records: what a user agreed to, per exact scope, kept by a
//! [`ConsentStore`] (in memory, or durably in the data directory).

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use async_trait::async_trait;
use hippocamp_core::{Error, Field, MemoryScope, Problem, Result, secrets};
use hippocamp_durable::DirLock;
use parking_lot::RwLock;
use redb::{Database, ReadableDatabase as _, TableDefinition};
use serde::{Deserialize, Serialize};

/// Bytes of a consent id.
pub const MAX_CONSENT_ID_BYTES: usize = 128;

/// What a consent covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConsentScope {
    /// Memory only.
    Memory,
    /// Artifacts only.
    Artifacts,
    /// Both.
    All,
}

impl ConsentScope {
    /// Whether it covers memory (entries and agent sessions).
    pub fn covers_memory(self) -> bool {
        matches!(self, ConsentScope::Memory | ConsentScope::All)
    }

    /// Whether it covers artifacts.
    pub fn covers_artifacts(self) -> bool {
        matches!(self, ConsentScope::Artifacts | ConsentScope::All)
    }
}

/// A consent as a caller records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConsent {
    /// The caller's own reference for the consent (1..=128 bytes, printable,
    /// not secret-looking).
    pub consent_id: String,
    /// What it covers.
    pub scope: ConsentScope,
}

/// A recorded consent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Consent {
    /// The caller's reference.
    pub consent_id: String,
    /// What it covers.
    pub scope: ConsentScope,
    /// When this deployment recorded it (ms since the Unix epoch).
    pub recorded_at_ms: u64,
    /// It came from a restore, not from the user here: the file's claim
    /// of when it was recorded is `claimed_at_ms`, never this store's own
    /// record.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
    /// A restored consent's recording time as the restored file claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_at_ms: Option<u64>,
}

impl NewConsent {
    /// The consent this records at `now_ms`, checked: what every store
    /// keeps.
    pub fn recorded(self, now_ms: u64) -> Result<Consent> {
        self.validate()?;
        Ok(Consent {
            consent_id: self.consent_id,
            scope: self.scope,
            recorded_at_ms: now_ms,
            restored: false,
            claimed_at_ms: None,
        })
    }

    /// The consent a restore records at `now_ms` from a file that claims
    /// it was recorded at `claimed_at_ms`: marked as restored, the claim
    /// kept apart from this deployment's own time.
    pub fn restored(self, claimed_at_ms: u64, now_ms: u64) -> Result<Consent> {
        Ok(Consent {
            restored: true,
            claimed_at_ms: Some(claimed_at_ms),
            ..self.recorded(now_ms)?
        })
    }

    /// Checks the id.
    pub fn validate(&self) -> Result<()> {
        let id = &self.consent_id;
        hippocamp_core::ident::check_text(Field::ConsentId, id, MAX_CONSENT_ID_BYTES)?;
        if id.chars().any(char::is_control) {
            return Err(Error::invalid(
                Field::ConsentId,
                Problem::Malformed("control characters are not allowed".into()),
            ));
        }
        if let Some(kind) = secrets::detect(id) {
            return Err(Error::SensitiveContent(kind));
        }
        Ok(())
    }
}

/// Where consents are kept. A withdrawal leaves a record of when it
/// happened (the consent's id and content go): a restore never records
/// again a consent the user withdrew here.
#[async_trait]
pub trait ConsentStore: Send + Sync + fmt::Debug {
    /// Records (or replaces) the scope's consent, already checked
    /// ([`NewConsent::recorded`], [`NewConsent::restored`]); returns it.
    async fn record(&self, scope: &MemoryScope, consent: Consent) -> Result<Consent>;
    /// The scope's consent, if any.
    async fn get(&self, scope: &MemoryScope) -> Result<Option<Consent>>;
    /// Withdraws the scope's consent at `now_ms` (remembering when);
    /// returns what was withdrawn.
    async fn remove(&self, scope: &MemoryScope, now_ms: u64) -> Result<Option<Consent>>;
    /// When a consent of the scope was last withdrawn, if ever.
    async fn withdrawn_at(&self, scope: &MemoryScope) -> Result<Option<u64>>;

    /// Records the consent a caller gives at `now_ms`.
    async fn put(&self, scope: &MemoryScope, consent: NewConsent, now_ms: u64) -> Result<Consent> {
        self.record(scope, consent.recorded(now_ms)?).await
    }
}

/// Consents in memory (the ephemeral profile, tests).
#[derive(Debug, Default)]
pub struct InMemoryConsents {
    map: RwLock<HashMap<MemoryScope, Consent>>,
    withdrawn: RwLock<HashMap<MemoryScope, u64>>,
}

#[async_trait]
impl ConsentStore for InMemoryConsents {
    async fn record(&self, scope: &MemoryScope, consent: Consent) -> Result<Consent> {
        self.map.write().insert(scope.clone(), consent.clone());
        Ok(consent)
    }

    async fn get(&self, scope: &MemoryScope) -> Result<Option<Consent>> {
        Ok(self.map.read().get(scope).cloned())
    }

    async fn remove(&self, scope: &MemoryScope, now_ms: u64) -> Result<Option<Consent>> {
        let gone = self.map.write().remove(scope);
        self.withdrawn.write().insert(scope.clone(), now_ms);
        Ok(gone)
    }

    async fn withdrawn_at(&self, scope: &MemoryScope) -> Result<Option<u64>> {
        Ok(self.withdrawn.read().get(scope).copied())
    }
}

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `len(app) app user` → the consent's JSON.
const CONSENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("consents");
/// `len(app) app user` → when its consent was last withdrawn (ms).
const WITHDRAWN: TableDefinition<&[u8], u64> = TableDefinition::new("withdrawn");
const FORMAT: u32 = 1;

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

fn key(scope: &MemoryScope) -> Vec<u8> {
    scope.storage_key()
}

/// Consents in one redb file of the data directory, each change committed
/// with an fsync before it is acknowledged (consent changes are rare).
pub struct RedbConsents {
    db: Database,
    _lock: DirLock,
}

impl fmt::Debug for RedbConsents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbConsents").finish_non_exhaustive()
    }
}

impl RedbConsents {
    /// Opens (or creates) the store in `dir`, which this process then owns.
    pub fn open(dir: &Path) -> Result<Self> {
        let init = |db: &Database| {
            hippocamp_durable::db::init_format(
                db,
                META,
                "format",
                FORMAT,
                "the consent store",
                |txn| {
                    txn.open_table(CONSENTS).map_err(storage)?;
                    // Made on every open: stores created before it have none.
                    txn.open_table(WITHDRAWN).map(drop).map_err(storage)
                },
            )
        };
        let (lock, db) =
            hippocamp_durable::db::open_owned(dir, "governance.lock", "consents.redb", init, None)?;
        init(&db)?;
        Ok(Self { db, _lock: lock })
    }

    fn write<T>(&self, f: impl FnOnce(&mut redb::Table<&[u8], &[u8]>) -> Result<T>) -> Result<T> {
        let txn = self.db.begin_write().map_err(storage)?;
        let out = {
            let mut t = txn.open_table(CONSENTS).map_err(storage)?;
            f(&mut t)?
        };
        txn.commit().map_err(storage)?;
        Ok(out)
    }
}

fn decode(bytes: &[u8]) -> Result<Consent> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable consent record: {e}")))
}

#[async_trait]
impl ConsentStore for RedbConsents {
    async fn record(&self, scope: &MemoryScope, consent: Consent) -> Result<Consent> {
        let bytes = serde_json::to_vec(&consent)
            .map_err(|e| Error::Corrupt(format!("cannot encode a consent: {e}")))?;
        let k = key(scope);
        // Inline: consent changes are rare, and one fsync on the caller's
        // thread keeps the acknowledgement after the commit.
        self.write(|t| {
            t.insert(k.as_slice(), bytes.as_slice()).map_err(storage)?;
            Ok(())
        })?;
        Ok(consent)
    }

    async fn get(&self, scope: &MemoryScope) -> Result<Option<Consent>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let t = txn.open_table(CONSENTS).map_err(storage)?;
        t.get(key(scope).as_slice())
            .map_err(storage)?
            .map(|v| decode(v.value()))
            .transpose()
    }

    async fn remove(&self, scope: &MemoryScope, now_ms: u64) -> Result<Option<Consent>> {
        let k = key(scope);
        let txn = self.db.begin_write().map_err(storage)?;
        let gone = {
            let mut t = txn.open_table(CONSENTS).map_err(storage)?;
            let gone = t
                .remove(k.as_slice())
                .map_err(storage)?
                .map(|v| decode(v.value()))
                .transpose()?;
            txn.open_table(WITHDRAWN)
                .map_err(storage)?
                .insert(k.as_slice(), now_ms)
                .map_err(storage)?;
            gone
        };
        txn.commit().map_err(storage)?;
        Ok(gone)
    }

    async fn withdrawn_at(&self, scope: &MemoryScope) -> Result<Option<u64>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let t = txn.open_table(WITHDRAWN).map_err(storage)?;
        Ok(t.get(key(scope).as_slice())
            .map_err(storage)?
            .map(|v| v.value()))
    }
}
