//! The audit log: a durable, append-only, content-free record of what
//! governance did — erasures, denials, refusals by a hold or retention,
//! consent changes, expiries swept — with who asked, a hash of the scope
//! (never its names, never any content), when, and the outcome.
//!
//! Records are numbered in order of appending; a page reads after a
//! cursor (the last number seen). The log keeps its own retention: records
//! older than it are pruned by the background sweeper.

use std::fmt;
use std::path::Path;

use async_trait::async_trait;
use hippocamp_core::{Caller, Error, Field, MemoryScope, Problem, Result, ScopeKey};
use hippocamp_durable::DirLock;
use parking_lot::Mutex;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditEvent {
    /// An entry, a session or a whole user was erased (or the erasure was
    /// refused: see the outcome).
    Erasure,
    /// The policy refused an operation.
    Denial,
    /// A legal hold refused a deletion.
    Hold,
    /// A consent was recorded.
    ConsentRecorded,
    /// A consent was withdrawn.
    ConsentWithdrawn,
    /// Expired entries were swept.
    Expiry,
    /// A user's artifacts were erased.
    ArtifactErasure,
    /// An entry was corrected (a new revision, or none when it changed
    /// nothing: the count says).
    Correction,
    /// A user's data left the system in an export.
    Export,
    /// An export was restored into a user.
    Restore,
}

/// One record to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAuditRecord {
    /// What happened.
    pub event: AuditEvent,
    /// What it was done to: `entry`, `session`, `user`, `store`,
    /// `consent`, `artifacts`, or the action a denial refused.
    pub target: &'static str,
    /// The scope, when there is one (only its hash is kept).
    pub scope: Option<MemoryScope>,
    /// Who asked.
    pub caller: Caller,
    /// `ok`, or the error code that ended it (`legal_hold`, `retention`,
    /// `policy_denied:<reason>`...).
    pub outcome: String,
    /// How many items it touched, when counted.
    pub count: Option<u64>,
}

/// A stored record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// Its number: increasing in order of appending, never reused.
    pub seq: u64,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
    /// What happened.
    pub event: AuditEvent,
    /// What it was done to.
    pub target: String,
    /// The scope's hash, when there is a scope: keyed with the
    /// deployment's secret (`keyed`, as in the server's request log), or,
    /// in records written before the key, the unkeyed hash earlier builds
    /// wrote (which anyone who knows a user id can match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope_hash: Option<String>,
    /// Whether `scope_hash` is keyed (false: a record of an earlier
    /// build).
    #[serde(default)]
    pub keyed: bool,
    /// The caller's kind (`token`, `cli`, `outbox`, `sweeper`...).
    pub caller: String,
    /// The token's public id, for a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    /// `ok`, or the code that ended it.
    pub outcome: String,
    /// Items touched, when counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// One page of the log, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AuditPage {
    /// The records.
    pub records: Vec<AuditRecord>,
    /// Where the next page starts; absent at the end of the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Records one page may return at most.
pub const MAX_AUDIT_PAGE: u64 = 1_000;

/// Bytes of an outcome kept at most (longer ones are cut).
const MAX_OUTCOME_BYTES: usize = 96;

impl NewAuditRecord {
    /// The outcome a record carries for `r`: `ok`, or the error's code.
    pub fn outcome_of<T>(r: &Result<T>) -> String {
        match r {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.code().to_owned(),
        }
    }

    /// The stored record this becomes as number `seq` at `at_ms` (its
    /// outcome cut to a bound, its scope hashed with `key`): every log
    /// stamps through here.
    pub fn stamp(self, seq: u64, at_ms: u64, key: &ScopeKey) -> AuditRecord {
        let mut outcome = self.outcome;
        if outcome.len() > MAX_OUTCOME_BYTES {
            let mut cut = MAX_OUTCOME_BYTES;
            while !outcome.is_char_boundary(cut) {
                cut -= 1;
            }
            outcome.truncate(cut);
        }
        AuditRecord {
            seq,
            at_ms,
            event: self.event,
            target: self.target.to_owned(),
            scope_hash: self.scope.as_ref().map(|s| s.keyed_hash(key)),
            keyed: true,
            caller: self.caller.kind.as_str().to_owned(),
            token_id: self
                .caller
                .token_id
                .map(|id| String::from_utf8_lossy(&id).into_owned()),
            outcome,
            count: self.count,
        }
    }
}

/// The cursor and limit of a page request, checked.
pub fn check_page(cursor: Option<&str>, limit: Option<u64>) -> Result<(u64, usize)> {
    let after = match cursor {
        None => 0,
        Some(c) => c.parse::<u64>().map_err(|_| {
            Error::invalid(
                Field::Cursor,
                Problem::Malformed("not an audit cursor".into()),
            )
        })?,
    };
    let limit = hippocamp_core::limits::page_limit(limit, 100, MAX_AUDIT_PAGE)?;
    Ok((after, limit))
}

/// Where audit records are kept.
#[async_trait]
pub trait AuditLog: Send + Sync + fmt::Debug {
    /// Appends one record stamped `at_ms`; durable when it returns.
    async fn append(&self, record: NewAuditRecord, at_ms: u64) -> Result<()>;
    /// The records after `cursor` (a `next_cursor`), oldest first, at
    /// most `limit` (default 100, at most [`MAX_AUDIT_PAGE`]).
    async fn page(&self, cursor: Option<&str>, limit: Option<u64>) -> Result<AuditPage>;
    /// Removes the records stamped before `before_ms`; how many.
    async fn prune(&self, before_ms: u64) -> Result<u64>;

    /// The deployment's secret its scope hashes are keyed with (created
    /// with the log, kept in it).
    fn scope_key(&self) -> ScopeKey;

    /// Appends as `append` does, logging a failure instead of returning
    /// it: what a record describes already happened (or was refused), so
    /// the operation's own answer stands.
    async fn record(&self, record: NewAuditRecord, at_ms: u64) {
        if let Err(e) = self.append(record, at_ms).await {
            tracing::error!(error = %e, "an audit record could not be written");
        }
    }
}

/// The page of `records` (in order, after the cursor) holding at most
/// `limit`, with the cursor of the next one when more follow.
pub fn page_of(records: impl Iterator<Item = AuditRecord>, limit: usize) -> AuditPage {
    let mut records: Vec<AuditRecord> = records.take(limit + 1).collect();
    let more = records.len() > limit;
    records.truncate(limit);
    AuditPage {
        next_cursor: more
            .then(|| records.last().map(|r| r.seq.to_string()))
            .flatten(),
        records,
    }
}

/// The log in memory (the ephemeral profile, tests), its key drawn when
/// it is made.
#[derive(Debug)]
pub struct InMemoryAudit {
    records: Mutex<Vec<AuditRecord>>,
    next: Mutex<u64>,
    key: ScopeKey,
}

impl Default for InMemoryAudit {
    fn default() -> Self {
        Self {
            records: Mutex::default(),
            next: Mutex::default(),
            key: ScopeKey::random(),
        }
    }
}

#[async_trait]
impl AuditLog for InMemoryAudit {
    async fn append(&self, record: NewAuditRecord, at_ms: u64) -> Result<()> {
        let mut next = self.next.lock();
        *next += 1;
        self.records
            .lock()
            .push(record.stamp(*next, at_ms, &self.key));
        Ok(())
    }

    fn scope_key(&self) -> ScopeKey {
        self.key
    }

    async fn page(&self, cursor: Option<&str>, limit: Option<u64>) -> Result<AuditPage> {
        let (after, limit) = check_page(cursor, limit)?;
        let records = self.records.lock();
        Ok(page_of(
            records.iter().filter(|r| r.seq > after).cloned(),
            limit,
        ))
    }

    async fn prune(&self, before_ms: u64) -> Result<u64> {
        let mut records = self.records.lock();
        let before = records.len();
        records.retain(|r| r.at_ms >= before_ms);
        Ok((before - records.len()) as u64)
    }
}

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// seq (u64 BE) → the record as JSON.
const RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new("records");
const FORMAT: u32 = 1;
const LAST_SEQ: &str = "last_seq";
/// The deployment's scope-hash key, made on first open.
const SCOPE_KEY: &str = "scope_key";

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// The log in one redb file of the data directory (`audit.redb`), each
/// record committed with an fsync before `append` returns.
pub struct RedbAudit {
    db: Database,
    /// Serialises appends, so numbers follow commit order.
    writer: Mutex<()>,
    key: ScopeKey,
    _lock: DirLock,
}

impl fmt::Debug for RedbAudit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbAudit").finish_non_exhaustive()
    }
}

impl RedbAudit {
    /// Opens (or creates) the log in `dir`, which this process then owns.
    pub fn open(dir: &Path) -> Result<Self> {
        let init = |db: &Database| {
            hippocamp_durable::db::init_format(db, META, "format", FORMAT, "the audit log", |txn| {
                txn.open_table(RECORDS).map(drop).map_err(storage)
            })
        };
        let (lock, db) =
            hippocamp_durable::db::open_owned(dir, "audit.lock", "audit.redb", init, None)?;
        init(&db)?;
        let key = scope_key(&db)?;
        Ok(Self {
            db,
            writer: Mutex::new(()),
            key,
            _lock: lock,
        })
    }
}

/// The log's scope-hash key, made (and committed) on first open.
fn scope_key(db: &Database) -> Result<ScopeKey> {
    let txn = db.begin_write().map_err(storage)?;
    let key = {
        let mut meta = txn.open_table(META).map_err(storage)?;
        let found = meta
            .get(SCOPE_KEY)
            .map_err(storage)?
            .map(|v| <[u8; 32]>::try_from(v.value()));
        match found {
            Some(Ok(k)) => ScopeKey::from_bytes(k),
            Some(Err(_)) => {
                return Err(Error::Corrupt(
                    "the audit log's scope key is malformed".into(),
                ));
            }
            None => {
                let k = ScopeKey::random();
                meta.insert(SCOPE_KEY, k.as_bytes().as_slice())
                    .map_err(storage)?;
                k
            }
        }
    };
    txn.commit().map_err(storage)?;
    Ok(key)
}

fn decode(bytes: &[u8]) -> Result<AuditRecord> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable audit record: {e}")))
}

#[async_trait]
impl AuditLog for RedbAudit {
    async fn append(&self, record: NewAuditRecord, at_ms: u64) -> Result<()> {
        // Inline: governance events are rare next to reads and writes, and
        // the record is durable before the caller hears back.
        let _w = self.writer.lock();
        let txn = self.db.begin_write().map_err(storage)?;
        {
            // The last number handed out is kept apart from the records,
            // so pruning every record never makes a number come back.
            let mut meta = txn.open_table(META).map_err(storage)?;
            let last = match meta.get(LAST_SEQ).map_err(storage)? {
                Some(v) => u64::from_le_bytes(v.value().try_into().map_err(|_| {
                    Error::Corrupt("the audit log's sequence record is malformed".into())
                })?),
                None => 0,
            };
            let seq = last + 1;
            meta.insert(LAST_SEQ, seq.to_le_bytes().as_slice())
                .map_err(storage)?;
            let mut t = txn.open_table(RECORDS).map_err(storage)?;
            let bytes = serde_json::to_vec(&record.stamp(seq, at_ms, &self.key))
                .map_err(|e| Error::Corrupt(format!("cannot encode an audit record: {e}")))?;
            t.insert(seq, bytes.as_slice()).map_err(storage)?;
        }
        txn.commit().map_err(storage)
    }

    async fn page(&self, cursor: Option<&str>, limit: Option<u64>) -> Result<AuditPage> {
        let (after, limit) = check_page(cursor, limit)?;
        let txn = self.db.begin_read().map_err(storage)?;
        let t = txn.open_table(RECORDS).map_err(storage)?;
        let mut out = Vec::with_capacity(limit + 1);
        for item in t.range((after + 1)..).map_err(storage)? {
            let (_, v) = item.map_err(storage)?;
            out.push(decode(v.value())?);
            if out.len() > limit {
                break;
            }
        }
        Ok(page_of(out.into_iter(), limit))
    }

    async fn prune(&self, before_ms: u64) -> Result<u64> {
        let _w = self.writer.lock();
        let txn = self.db.begin_write().map_err(storage)?;
        let mut n = 0;
        {
            let mut t = txn.open_table(RECORDS).map_err(storage)?;
            // Oldest first: stop at the first record young enough (the
            // clock of one process only moves forward in practice; a
            // record stamped out of order stays until the next pass).
            let mut old = Vec::new();
            for item in t.iter().map_err(storage)? {
                let (k, v) = item.map_err(storage)?;
                if decode(v.value())?.at_ms >= before_ms {
                    break;
                }
                old.push(k.value());
            }
            for k in old {
                t.remove(k).map_err(storage)?;
                n += 1;
            }
        }
        txn.commit().map_err(storage)?;
        Ok(n)
    }

    fn scope_key(&self) -> ScopeKey {
        self.key
    }
}
