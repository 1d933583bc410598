//! [`PgMemoryStore`]: the memory store on PostgreSQL.
//!
//! PostgreSQL holds everything: each scope's row (erasure epoch, counters,
//! BM25 statistics, a version every write advances), its entries with
//! their analysed terms, term frequencies and lengths (the scope's
//! postings), their pgvector vectors, the erased entries of sessions and
//! the kept revisions. A write is one transaction that locks its scope's
//! row (`INSERT … ON CONFLICT DO UPDATE … RETURNING`), so writes to one
//! scope are ordered across every server, and the store-wide quota's row,
//! so concurrent servers cannot overshoot it.
//!
//! Scoring is `hippocamp-search`'s own, over a per-server copy of the
//! scope's postings and vectors ([`ScopeData`], the structure the embedded
//! stores search): every call reads the scope's version first and reloads
//! the copy from the tables when another server wrote since, so results
//! are the embedded store's, id for id. The copy is a cache, safe to lose:
//! at most `max_cached_scopes` scopes are kept, idle ones are dropped first.
//!
//! Vectors: a scope of at most `exact_vectors_up_to` entries (default
//! [`DEFAULT_EXACT_VECTORS_UP_TO`]) is searched exactly, over the vectors
//! its copy holds, as the embedded store searches them. A larger scope's
//! copy holds none (they would cost a server ~1.5 KiB an entry for 384
//! dimensions): PostgreSQL ranks them through pgvector's HNSW index (one
//! index over every scope, by inner product, scanned iteratively under
//! the scope's filter) and hands the nearest to the copy's fusion,
//! filter and budget. When a filter passes over too many of them the
//! search asks again for more, and when the index stops short of what the
//! scope holds (its scan bound) PostgreSQL ranks the scope's vectors
//! exactly. A copy that held vectors stops holding them once a write
//! takes its scope past the bound; a scope that shrinks below it while
//! its copy holds none is ranked exactly in PostgreSQL until the copy is
//! reloaded.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use futures::future::try_join_all;
use hippocamp_core::{
    AppName, CallOptions, Deadline, EntryId, Error, MemoryScope, QuotaLimit, Result, SessionId,
    Stage,
};
use hippocamp_embed::Embedder;
use hippocamp_memory::ErasureFence;
use hippocamp_memory::config::StoreClock;
use hippocamp_memory::embedding::{embed_passages, embed_plan};
use hippocamp_memory::entry::{
    PreparedEntry, apply_update, check_revise, check_update, prepare_entry, stored_bytes,
};
use hippocamp_memory::erasure::{
    ErasureCursor, ErasureImport, ErasurePage, ErasureRequest, ImportedErasures, check_import_epoch,
};
use hippocamp_memory::event::{Decision, plan_events};
use hippocamp_memory::import::prepare_import;
use hippocamp_memory::lineage::Origin;
use hippocamp_memory::list::{
    ExportCursor, PreparedList, check_sweep_batch, prepare_export, prepare_list, prepare_names,
};
use hippocamp_memory::mem::{check_epoch, list_page};
use hippocamp_memory::quota::check_scope_quota;
use hippocamp_memory::scope::{Existing, ScopeData};
use hippocamp_memory::search::{prepare_search, resolve_mode};
use hippocamp_memory::{
    AddOutcome, Capabilities, EntryPage, EntryUpdate, Erasure, Event, ExportRequest, ImportReport,
    ImportedEntry, IngestReport, ListRequest, MemoryConfig, MemoryEntry, MemoryStore, NamePage,
    NamesRequest, NewEntry, Revision, SearchRequest, SearchResults, StoreStatus, Sweep,
    UpdateOutcome, WriteOptions,
};
use hippocamp_search::{Analyzer, TermFreqs};
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock as AsyncRwLock};
use tokio_postgres::types::{ToSql, Type};

use crate::db::{Database, db_error};

/// Scopes whose copy a server keeps by default.
pub const DEFAULT_MAX_CACHED_SCOPES: usize = 10_000;

/// Entries a scope may hold and still be searched exactly by vector, by
/// default: measured with 384-dimension embeddings, the exact search in
/// the copy is faster up to about 30,000 entries, where both take ~2 ms
/// and the copy's vectors take 44 MiB of a server; the index's recall@10
/// is ~0.97 (`hippocamp bench postgres-vectors`, docs/PERFORMANCE.md).
pub const DEFAULT_EXACT_VECTORS_UP_TO: u64 = 30_000;

/// The most `exact_vectors_up_to` may be: what a scope may hold.
pub const MAX_EXACT_VECTORS_UP_TO: u64 = 10_000_000;

/// Checks an `exact_vectors_up_to` value: 0..=[`MAX_EXACT_VECTORS_UP_TO`].
pub fn check_exact_vectors_up_to(max: u64) -> Result<()> {
    hippocamp_core::error::check_range(
        "postgres.exact_vectors_up_to",
        max,
        0,
        MAX_EXACT_VECTORS_UP_TO,
    )
}

/// Candidates an HNSW search asks for at most before it hands over to the
/// exact ranking (also the most `hnsw.ef_search` takes).
const MAX_HNSW_CANDIDATES: usize = 1_000;

/// A scope's copy, as of `version`.
#[derive(Debug)]
struct Cached {
    version: i64,
    data: ScopeData,
}

type Cell = Arc<AsyncRwLock<Option<Cached>>>;

/// A scope's entries nearest a query, ranked by PostgreSQL.
struct Nearest {
    candidates: Vec<hippocamp_search::Candidate<EntryId>>,
    /// The scope's entries without a vector.
    unembedded: u64,
}

/// The per-server copies, bounded.
#[derive(Debug)]
struct ScopeCache {
    cells: parking_lot::Mutex<HashMap<MemoryScope, Cell>>,
    max: usize,
}

impl ScopeCache {
    fn cell(&self, scope: &MemoryScope) -> Cell {
        let mut cells = self.cells.lock();
        if let Some(c) = cells.get(scope) {
            return c.clone();
        }
        if cells.len() >= self.max {
            // Idle copies (no call holds them) go first; a copy in use
            // stays until its call ends.
            let idle: Vec<MemoryScope> = cells
                .iter()
                .filter(|(_, c)| Arc::strong_count(c) == 1)
                .map(|(k, _)| k.clone())
                .take(cells.len() + 1 - self.max)
                .collect();
            for k in idle {
                cells.remove(&k);
            }
        }
        cells.entry(scope.clone()).or_default().clone()
    }

    fn forget(&self, scope: &MemoryScope) {
        self.cells.lock().remove(scope);
    }
}

/// The memory store on PostgreSQL. Durable, shared by every server over
/// the same schema.
#[derive(Debug)]
pub struct PgMemoryStore {
    db: Database,
    config: MemoryConfig,
    embedder: Option<Arc<dyn Embedder>>,
    analyzer: Analyzer,
    clock: StoreClock,
    cache: ScopeCache,
    /// Scopes of at most this many entries are searched exactly by
    /// vector, in their copy.
    exact_vectors_up_to: u64,
    /// The width of the vectors the HNSW index covers, if there is one.
    hnsw: Option<usize>,
    /// Rankings PostgreSQL did: through the index, exactly.
    ranked: [std::sync::atomic::AtomicU64; 2],
}

/// A scope's row.
#[derive(Debug, Clone, Copy)]
struct ScopeRow {
    id: i64,
    epoch: u64,
    version: i64,
    entries: u64,
    /// Erasure records (erased entry ids, erased sessions' epochs).
    erasures: u64,
}

impl ScopeRow {
    fn of(row: &tokio_postgres::Row) -> Self {
        Self {
            id: row.get(0),
            epoch: u(row.get(1)),
            version: row.get(2),
            entries: u(row.get(3)),
            erasures: u(row.get(4)),
        }
    }

    /// Whether the scope holds entries or erasure records.
    fn held(&self) -> bool {
        self.entries > 0 || self.erasures > 0
    }
}

/// What a write transaction changes in its scope's counters.
#[derive(Debug, Default, Clone, Copy)]
struct Delta {
    entries: i64,
    bytes: i64,
    len: i64,
    epoch: Option<u64>,
    /// Erasure records added.
    erasures: i64,
}

impl Delta {
    fn add(&mut self, bytes: u64, len: u32) {
        self.entries += 1;
        self.bytes += i(bytes);
        self.len += i64::from(len);
    }
}

/// The values of one entry's row.
struct EntryRow {
    id: String,
    record: String,
    bytes: i64,
    ts: i64,
    session: Option<String>,
    sweep_at: Option<i64>,
    terms: Vec<String>,
    tfs: Vec<i32>,
    doc_len: i32,
    embedding: Option<pgvector::Vector>,
}

fn i(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

fn u(x: i64) -> u64 {
    u64::try_from(x).unwrap_or(0)
}

fn entry_row(
    entry: &MemoryEntry,
    bytes: u64,
    terms: &TermFreqs,
    vector: Option<&[f32]>,
) -> Result<EntryRow> {
    let o = &entry.obligations;
    let sweep_at = match o.expires_at_ms {
        Some(at) if !o.legal_hold => Some(i(at.max(o.retain_until_ms.unwrap_or(0)))),
        _ => None,
    };
    Ok(EntryRow {
        id: entry.id.to_string(),
        record: serde_json::to_string(entry)
            .map_err(|e| Error::Corrupt(format!("cannot encode an entry: {e}")))?,
        bytes: i(bytes),
        ts: i(entry.timestamp_ms),
        session: entry
            .provenance
            .session_id
            .as_ref()
            .map(|s| s.as_str().to_owned()),
        sweep_at,
        terms: terms.iter().map(|(t, _)| t.to_owned()).collect(),
        tfs: terms
            .iter()
            .map(|(_, n)| i32::try_from(n).unwrap_or(i32::MAX))
            .collect(),
        doc_len: i32::try_from(terms.doc_len()).unwrap_or(i32::MAX),
        embedding: vector.map(|v| pgvector::Vector::from(v.to_vec())),
    })
}

const INSERT_ENTRY: &str = "INSERT INTO memory_entries \
    (scope_id, id, record, bytes, ts, session, sweep_at, terms, tfs, doc_len, embedding) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";

const REPLACE_ENTRY: &str = "WITH old AS (SELECT doc_len FROM memory_entries WHERE scope_id = $1 AND id = $2) \
    UPDATE memory_entries SET record = $3, bytes = $4, ts = $5, session = $6, sweep_at = $7, \
    terms = $8, tfs = $9, doc_len = $10, embedding = $11 WHERE scope_id = $1 AND id = $2 \
    RETURNING (SELECT doc_len FROM old)";

const INSERT_REVISION: &str = "INSERT INTO memory_revisions (scope_id, id, rev, record) \
    VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING";

fn revision_record(r: &Revision) -> Result<String> {
    serde_json::to_string(r).map_err(|e| Error::Corrupt(format!("cannot encode a revision: {e}")))
}

/// An entry from its record. A record written before origins were stored
/// has none, and reads as its provenance says (a turn when it names an
/// event); only a note that names an event is read twice to tell.
fn decode_entry(record: &str) -> Result<MemoryEntry> {
    #[derive(serde::Deserialize)]
    struct Keys {
        origin: Option<serde::de::IgnoredAny>,
    }
    let corrupt =
        |e: serde_json::Error| Error::Corrupt(format!("an entry record does not decode: {e}"));
    let mut entry: MemoryEntry = serde_json::from_str(record).map_err(corrupt)?;
    if entry.origin == Origin::Note && !entry.provenance.event_ids.is_empty() {
        let keys: Keys = serde_json::from_str(record).map_err(corrupt)?;
        if keys.origin.is_none() {
            entry.origin = Origin::of_provenance(&entry.provenance);
        }
    }
    Ok(entry)
}

/// Reads a scope's whole copy from the tables, checking every record
/// against the scope asked for; with its vectors when `vectors` says so.
async fn load(
    c: &impl GenericClient,
    scope: &MemoryScope,
    scope_id: i64,
    vectors: bool,
    passages: hippocamp_search::PassageParams,
) -> Result<ScopeData> {
    let rows = c
        .query(
            "SELECT record, bytes, terms, tfs, doc_len, CASE WHEN $2 THEN embedding END \
             FROM memory_entries WHERE scope_id = $1",
            &[&scope_id, &vectors],
        )
        .await
        .map_err(db_error)?;
    let mut data = ScopeData::with_passages(passages);
    if !vectors {
        data.keep_vectors_elsewhere();
    }
    for row in rows {
        let record: &str = row.get(0);
        let entry = decode_entry(record)?;
        if entry.scope != *scope {
            return Err(Error::Corrupt(
                "a stored entry belongs to another scope".into(),
            ));
        }
        let terms: Vec<String> = row.get(2);
        let tfs: Vec<i32> = row.get(3);
        let doc_len: i32 = row.get(4);
        let freqs = TermFreqs::from_counts(
            terms
                .into_iter()
                .zip(tfs)
                .map(|(t, n)| (t, u32::try_from(n).unwrap_or(0))),
            u32::try_from(doc_len).unwrap_or(0),
        );
        let id = entry.id;
        data.insert(entry, u(row.get(1)), &freqs);
        let vector: Option<pgvector::Vector> = row.get(5);
        if let Some(v) = vector {
            data.insert_vector(id, v.as_slice());
        }
    }
    Ok(data)
}

/// The scope's row, if it was ever written: what every call reads first.
async fn read_scope(c: &impl GenericClient, scope: &MemoryScope) -> Result<Option<ScopeRow>> {
    // Prepared once per connection: one round trip per call, not two.
    let statement = c
        .prepare_cached(
            "SELECT id, epoch, version, entries, erasures FROM memory_scopes WHERE app = $1 AND usr = $2",
        )
        .await
        .map_err(db_error)?;
    Ok(
        c.query_opt(&statement, &[&scope.app().as_str(), &scope.user().as_str()])
            .await
            .map_err(db_error)?
            .as_ref()
            .map(ScopeRow::of),
    )
}

/// Locks the scope's row for this transaction, creating it if absent.
async fn lock_scope(c: &impl GenericClient, scope: &MemoryScope) -> Result<ScopeRow> {
    let row = c
        .query_one(
            "INSERT INTO memory_scopes (app, usr) VALUES ($1, $2) \
             ON CONFLICT (app, usr) DO UPDATE SET version = memory_scopes.version \
             RETURNING id, epoch, version, entries, erasures",
            &[&scope.app().as_str(), &scope.user().as_str()],
        )
        .await
        .map_err(db_error)?;
    Ok(ScopeRow::of(&row))
}

/// The erased entries of `session` among `ids` (what an event of the
/// session may not make again).
async fn erased_among(
    c: &impl GenericClient,
    scope_id: i64,
    session: &SessionId,
    ids: &[String],
) -> Result<HashSet<EntryId>> {
    let rows = c
        .query(
            // `''`: erased from any session (restored from an export).
            "SELECT id FROM memory_erased WHERE scope_id = $1 AND (session = $2 OR session = '') \
             AND id = ANY($3)",
            &[&scope_id, &session.as_str(), &ids],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .filter_map(|r| r.get::<_, &str>(0).parse().ok())
        .collect())
}

/// The erased entries among `ids`, whatever their session (what a restore
/// may not write back).
async fn erased_ids_among(
    c: &impl GenericClient,
    scope_id: i64,
    ids: &[String],
) -> Result<HashSet<EntryId>> {
    let rows = c
        .query(
            "SELECT id FROM memory_erased_ids WHERE scope_id = $1 AND id = ANY($2)",
            &[&scope_id, &ids],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .filter_map(|r| r.get::<_, &str>(0).parse().ok())
        .collect())
}

/// The erasure epoch of `session` (0 until its first erasure).
async fn session_epoch(c: &impl GenericClient, scope_id: i64, session: &SessionId) -> Result<u64> {
    let row = c
        .query_opt(
            "SELECT epoch FROM memory_session_epochs WHERE scope_id = $1 AND session = $2",
            &[&scope_id, &session.as_str()],
        )
        .await
        .map_err(db_error)?;
    Ok(row.map_or(0, |r| u(r.get::<_, i64>(0))))
}

/// Advances the erasure epoch of `session`, in the erasure's
/// transaction; whether that made a new erasure record.
async fn advance_session_epoch(
    c: &impl GenericClient,
    scope_id: i64,
    session: &SessionId,
) -> Result<bool> {
    let row = c
        .query_one(
            "INSERT INTO memory_session_epochs (scope_id, session, epoch) VALUES ($1, $2, 1) \
             ON CONFLICT (scope_id, session) DO UPDATE SET epoch = memory_session_epochs.epoch + 1 \
             RETURNING epoch",
            &[&scope_id, &session.as_str()],
        )
        .await
        .map_err(db_error)?;
    Ok(row.get::<_, i64>(0) == 1)
}

/// Deletes `ids`' rows and history, remembering each as erased; returns
/// what they took from (and added to) the scope's counters.
async fn erase_rows(c: &impl GenericClient, scope_id: i64, ids: &[EntryId]) -> Result<Delta> {
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    let of_sessions = c
        .execute(
            "INSERT INTO memory_erased (scope_id, session, id) \
             SELECT scope_id, session, id FROM memory_entries \
             WHERE scope_id = $1 AND id = ANY($2) AND session IS NOT NULL ON CONFLICT DO NOTHING",
            &[&scope_id, &ids],
        )
        .await
        .map_err(db_error)?;
    let by_id = c
        .execute(
            "INSERT INTO memory_erased_ids (scope_id, id) \
             SELECT scope_id, id FROM memory_entries \
             WHERE scope_id = $1 AND id = ANY($2) ON CONFLICT DO NOTHING",
            &[&scope_id, &ids],
        )
        .await
        .map_err(db_error)?;
    let records = of_sessions + by_id;
    c.execute(
        "DELETE FROM memory_revisions WHERE scope_id = $1 AND id = ANY($2)",
        &[&scope_id, &ids],
    )
    .await
    .map_err(db_error)?;
    let rows = c
        .query(
            "DELETE FROM memory_entries WHERE scope_id = $1 AND id = ANY($2) RETURNING bytes, doc_len",
            &[&scope_id, &ids],
        )
        .await
        .map_err(db_error)?;
    let mut d = Delta {
        erasures: i64::try_from(records).unwrap_or(i64::MAX),
        ..Delta::default()
    };
    for r in rows {
        d.entries -= 1;
        d.bytes -= r.get::<_, i64>(0);
        d.len -= i64::from(r.get::<_, i32>(1));
    }
    Ok(d)
}

async fn insert_entries(
    tx: &deadpool_postgres::Transaction<'_>,
    scope_id: i64,
    rows: &[EntryRow],
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let stmt = tx.prepare_cached(INSERT_ENTRY).await.map_err(db_error)?;
    let params: Vec<[&(dyn ToSql + Sync); 11]> = rows
        .iter()
        .map(|r| -> [&(dyn ToSql + Sync); 11] {
            [
                &scope_id,
                &r.id,
                &r.record,
                &r.bytes,
                &r.ts,
                &r.session,
                &r.sweep_at,
                &r.terms,
                &r.tfs,
                &r.doc_len,
                &r.embedding,
            ]
        })
        .collect();
    // Pipelined on the one connection: one round trip's latency for the
    // batch, not one per entry.
    try_join_all(params.iter().map(|p| tx.execute(&stmt, p)))
        .await
        .map_err(db_error)?;
    Ok(())
}

/// A write in progress: the scope's copy (locked for this server's other
/// calls and fresh as of the locked row) and the transaction.
struct Write<'c> {
    tx: deadpool_postgres::Transaction<'c>,
    row: ScopeRow,
    cell: OwnedRwLockWriteGuard<Option<Cached>>,
    /// The copy keeps vectors while its scope has at most this many
    /// entries.
    exact_vectors_up_to: u64,
}

impl Write<'_> {
    /// The bytes the scope holds against its quota: its entries' and its
    /// erasure records'.
    fn held_bytes(&self) -> u64 {
        hippocamp_memory::erasure::erasure_records_bytes(self.data().bytes(), self.row.erasures)
    }

    fn data(&self) -> &ScopeData {
        // `begin` always leaves a copy in the cell.
        static EMPTY: std::sync::OnceLock<ScopeData> = std::sync::OnceLock::new();
        self.cell
            .as_ref()
            .map_or_else(|| EMPTY.get_or_init(ScopeData::default), |c| &c.data)
    }

    /// Commits `delta` (checking the store-wide quota when it grows), then
    /// lets `apply` bring the copy to the committed state.
    async fn commit(
        mut self,
        delta: Delta,
        config: &MemoryConfig,
        deadline: Deadline,
        apply: impl FnOnce(&mut ScopeData),
    ) -> Result<()> {
        let limits = &config.limits;
        if delta.entries != 0 || delta.bytes != 0 {
            let row = self
                .tx
                .query_one(
                    "UPDATE memory_totals SET entries = entries + $1, bytes = bytes + $2 RETURNING entries, bytes",
                    &[&delta.entries, &delta.bytes],
                )
                .await
                .map_err(db_error)?;
            let (entries, bytes): (i64, i64) = (row.get(0), row.get(1));
            if delta.entries > 0 && u(entries) > limits.max_entries_total {
                return Err(Error::QuotaExceeded {
                    limit: QuotaLimit::EntriesTotal(limits.max_entries_total),
                });
            }
            if delta.bytes > 0 && u(bytes) > limits.max_bytes_total {
                return Err(Error::QuotaExceeded {
                    limit: QuotaLimit::BytesTotal(limits.max_bytes_total),
                });
            }
        }
        let epoch = i(delta.epoch.unwrap_or(self.row.epoch));
        self.tx
            .execute(
                "UPDATE memory_scopes SET version = version + 1, entries = entries + $2, \
                 bytes = bytes + $3, total_len = total_len + $4, epoch = $5, \
                 erasures = erasures + $6 WHERE id = $1",
                &[
                    &self.row.id,
                    &delta.entries,
                    &delta.bytes,
                    &delta.len,
                    &epoch,
                    &delta.erasures,
                ],
            )
            .await
            .map_err(db_error)?;
        deadline.check(Stage::Commit)?;
        let committed = self.tx.commit().await;
        match committed {
            Ok(()) => {
                if let Some(c) = self.cell.as_mut() {
                    apply(&mut c.data);
                    c.version = self.row.version + 1;
                    if c.data.holds_vectors() && c.data.len() > self.exact_vectors_up_to {
                        c.data.keep_vectors_elsewhere();
                    }
                }
                Ok(())
            }
            Err(e) => {
                // The outcome is unknown: the next call reloads.
                *self.cell = None;
                Err(db_error(e))
            }
        }
    }
}

impl PgMemoryStore {
    /// A store over `db` with `config` (the schema's migrations were
    /// applied when `db` connected).
    pub fn open(db: Database, config: MemoryConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            clock: config.clock.clone(),
            config,
            embedder: None,
            analyzer: Analyzer::english(),
            db,
            cache: ScopeCache {
                cells: parking_lot::Mutex::new(HashMap::new()),
                max: DEFAULT_MAX_CACHED_SCOPES,
            },
            exact_vectors_up_to: DEFAULT_EXACT_VECTORS_UP_TO,
            hnsw: None,
            ranked: Default::default(),
        })
    }

    /// Searches scopes of at most `max` entries exactly by vector (in the
    /// server's copy), larger ones through PostgreSQL's HNSW index;
    /// 0..=[`MAX_EXACT_VECTORS_UP_TO`].
    pub fn exact_vectors_up_to(mut self, max: u64) -> Result<Self> {
        check_exact_vectors_up_to(max)?;
        self.exact_vectors_up_to = max;
        Ok(self)
    }

    /// Keeps at most `max` scopes' copies in this server (at least 1).
    #[must_use]
    pub fn max_cached_scopes(mut self, max: usize) -> Self {
        self.cache.max = max.max(1);
        self
    }

    /// A store that embeds every entry with `embedder` before it commits.
    /// A schema holding another model's vectors is refused.
    pub async fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Result<Self> {
        let want = format!("{}\n{}", embedder.model(), embedder.dimension());
        let deadline = Deadline::after(self.config.limits.call_timeout());
        let client = self.db.client(deadline).await?;
        client
            .execute(
                "INSERT INTO memory_meta (key, value) VALUES ('embedder', $1) ON CONFLICT (key) DO NOTHING",
                &[&want],
            )
            .await
            .map_err(db_error)?;
        let have: String = client
            .query_one("SELECT value FROM memory_meta WHERE key = 'embedder'", &[])
            .await
            .map_err(db_error)?
            .get(0);
        if have != want {
            return Err(Error::config(
                "embedder",
                hippocamp_core::Problem::Malformed(format!(
                    "this store's vectors come from `{}`; `{}` cannot be compared with them",
                    have.replace('\n', "@"),
                    want.replace('\n', "@")
                )),
            ));
        }
        drop(client);
        let dimension = embedder.dimension();
        self.hnsw = self.db.vector_index(dimension).await?.then_some(dimension);
        self.embedder = Some(embedder);
        Ok(self)
    }

    /// Vector rankings this server asked PostgreSQL for: through the HNSW
    /// index, and exact (a probe for tests and metrics).
    pub fn rankings_in_database(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.ranked[0].load(Relaxed), self.ranked[1].load(Relaxed))
    }

    /// Scopes whose copy this server holds now.
    pub fn cached_scopes(&self) -> usize {
        self.cache.cells.lock().len()
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.config.limits.call_timeout())
    }

    /// Runs `read` over the scope's copy, fresh as of the scope's version
    /// read now; `None` when the scope was never written. It writes
    /// nothing, so a transient failure is tried again (bounded).
    async fn view<T>(
        &self,
        scope: &MemoryScope,
        deadline: Deadline,
        read: impl FnOnce(&ScopeData, ScopeRow) -> T,
    ) -> Result<Option<T>> {
        let fresh =
            crate::db::retry_transient(deadline, || self.fresh_copy(scope, deadline)).await?;
        Ok(fresh.and_then(|(copy, row)| copy.as_ref().map(|c| read(&c.data, row))))
    }

    /// The scope's copy, fresh as of its version read now, held for
    /// reading; `None` when the scope was never written.
    async fn fresh_copy(
        &self,
        scope: &MemoryScope,
        deadline: Deadline,
    ) -> Result<Option<(OwnedRwLockReadGuard<Option<Cached>>, ScopeRow)>> {
        let client = self.db.client_once(deadline).await?;
        let Some(row) = read_scope(&client, scope).await? else {
            return Ok(None);
        };
        let cell = self.cache.cell(scope);
        let at = deadline.instant().into();
        let g = tokio::time::timeout_at(at, cell.clone().read_owned())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))?;
        // A copy newer than the row just read is a committed state too
        // (this server's write landed in between).
        if g.as_ref().is_some_and(|c| c.version >= row.version) {
            return Ok(Some((g, row)));
        }
        drop(g);
        let mut w = tokio::time::timeout_at(at, cell.write_owned())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))?;
        if w.as_ref().is_none_or(|c| c.version < row.version) {
            // Tagged with the version read before the load: the load may
            // be newer, never older, so a later call at worst reloads.
            *w = Some(Cached {
                version: row.version,
                data: load(
                    &client,
                    scope,
                    row.id,
                    self.holds_vectors(&row),
                    self.config.passages,
                )
                .await?,
            });
        }
        Ok(Some((w.downgrade(), row)))
    }

    /// Whether a copy of the scope loaded now holds its vectors.
    fn holds_vectors(&self, row: &ScopeRow) -> bool {
        row.entries <= self.exact_vectors_up_to
    }

    /// Starts a write: the scope's row locked, its copy fresh.
    async fn begin<'c>(
        &self,
        client: &'c mut deadpool_postgres::Client,
        scope: &MemoryScope,
        deadline: Deadline,
    ) -> Result<Write<'c>> {
        let cell = self.cache.cell(scope);
        let mut cell = tokio::time::timeout_at(deadline.instant().into(), cell.write_owned())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))?;
        deadline.check(Stage::Queueing)?;
        let tx = client.transaction().await.map_err(db_error)?;
        let row = lock_scope(&tx, scope).await?;
        if cell.as_ref().is_none_or(|c| c.version != row.version) {
            *cell = Some(Cached {
                version: row.version,
                data: load(
                    &tx,
                    scope,
                    row.id,
                    self.holds_vectors(&row),
                    self.config.passages,
                )
                .await?,
            });
        }
        Ok(Write {
            tx,
            row,
            cell,
            exact_vectors_up_to: self.exact_vectors_up_to,
        })
    }

    /// The planned events that would be new entries now (neither held by
    /// the scope nor erased), read before the write's lock so only those
    /// are embedded.
    async fn would_be_new(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        plan: &hippocamp_memory::event::EventPlan,
        ids: &[String],
        deadline: Deadline,
    ) -> Result<Vec<usize>> {
        let client = self.db.client(deadline).await?;
        let erased = match read_scope(&client, scope).await? {
            Some(row) => erased_among(&client, row.id, session, ids).await?,
            None => HashSet::new(),
        };
        drop(client);
        let decide = |d: &ScopeData, p: &PreparedEntry| {
            if erased.contains(&p.entry.id) {
                Decision::Erased
            } else {
                d.decide(p)
            }
        };
        Ok(self
            .view(scope, deadline, |d, _| plan.new_indices(|p| decide(d, p)))
            .await?
            .unwrap_or_else(|| plan.new_indices(|_| Decision::New)))
    }

    /// A search whose vector candidates PostgreSQL ranks (the scope's copy
    /// holds no vectors): through the HNSW index when the scope is larger
    /// than `exact_vectors_up_to`, exactly otherwise; asking again for
    /// more candidates while the copy's filter and budget want them.
    async fn search_in_database(
        &self,
        scope: &MemoryScope,
        row: ScopeRow,
        prepared: &hippocamp_memory::search::PreparedSearch,
        mode: hippocamp_memory::SearchMode,
        query: &[f32],
        deadline: Deadline,
    ) -> Result<SearchResults> {
        let (bm25, fusion) = (self.config.bm25, &self.config.fusion);
        let wanted = match mode {
            hippocamp_memory::SearchMode::Vector => prepared.limit,
            _ => fusion.depth,
        };
        let mut k = wanted.max(1).saturating_mul(2);
        let mut exact = self.hnsw.is_none() || row.entries <= self.exact_vectors_up_to;
        let query = pgvector::Vector::from(query.to_vec());
        loop {
            let nearest = crate::db::retry_transient(deadline, || {
                self.nearest(row.id, &query, k, exact, deadline)
            })
            .await?;
            let got = nearest.candidates.len();
            let Some(found) = self
                .view(scope, deadline, |d, _| {
                    d.search_with_dense(prepared, mode, nearest.candidates, bm25, fusion)
                })
                .await?
            else {
                return Ok(SearchResults::default());
            };
            // Exact with fewer than asked: the scope has no more.
            let complete = exact && got < k;
            if !found.wants_more || complete {
                let mut results = found.results;
                results.entries_without_vectors = nearest.unembedded;
                return Ok(results);
            }
            // The index stopped short of what the scope holds (its scan
            // bound), or enough was asked of it: rank exactly.
            if !exact && (got < k || k >= MAX_HNSW_CANDIDATES) {
                exact = true;
            }
            k = k.saturating_mul(4);
        }
    }

    /// The `k` entries of the scope (by its row's id) nearest `query`, by
    /// inner product: exactly, or through the HNSW index; and how many of
    /// the scope's entries have no vector.
    async fn nearest(
        &self,
        scope_id: i64,
        query: &pgvector::Vector,
        k: usize,
        exact: bool,
        deadline: Deadline,
    ) -> Result<Nearest> {
        let client = self.db.client_once(deadline).await?;
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let index = self.hnsw.filter(|_| !exact);
        self.ranked[usize::from(index.is_none())]
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let count = client
            .prepare_cached(
                "SELECT count(*) FROM memory_entries WHERE scope_id = $1 AND embedding IS NULL",
            )
            .await
            .map_err(db_error)?;
        // The statements are pipelined: one round trip.
        let (rows, unembedded) = match index {
            // `<#>` is the negated inner product. No index has this
            // expression: the scope's rows (by the primary key) are ranked.
            None => {
                let rank = client
                    .prepare_cached(
                        "SELECT id, ts, (embedding <#> $2)::REAL AS d FROM memory_entries \
                         WHERE scope_id = $1 AND embedding IS NOT NULL \
                         ORDER BY d, ts DESC, id LIMIT $3",
                    )
                    .await
                    .map_err(db_error)?;
                futures::future::try_join(
                    client.query(&rank, &[&scope_id, query, &limit]),
                    client.query_one(&count, &[&scope_id]),
                )
                .await
                .map_err(db_error)?
            }
            Some(dimension) => {
                // Not a prepared statement: a generic plan (parameters
                // unknown) may pass the index over; this one is planned
                // with its values, in the same round trip (the vector goes
                // as `real[]`, whose type has a fixed id).
                let rank = format!(
                    "SELECT id, ts, (embedding::vector({dimension}) <#> $2::REAL[]::vector({dimension}))::REAL \
                     FROM memory_entries WHERE scope_id = $1 \
                     ORDER BY embedding::vector({dimension}) <#> $2::REAL[]::vector({dimension}) LIMIT $3"
                );
                let values = query.as_slice();
                // Iterative scans keep walking the graph until `k` rows of
                // this scope were found (or the scan's bound was reached).
                // Sorting is off so the planner takes the index, which
                // yields rows in order, over ranking the scope's rows (what
                // stale statistics of a fresh scope may suggest). Sent
                // together, so the transaction ends even if this call does
                // not wait for the answers.
                let begin = format!(
                    "BEGIN; SET LOCAL enable_sort = off; SET LOCAL hnsw.ef_search = {}; \
                     SET LOCAL hnsw.iterative_scan = strict_order",
                    k.clamp(40, MAX_HNSW_CANDIDATES)
                );
                let ((), rows, count, ()) = futures::future::try_join4(
                    client.batch_execute(&begin),
                    client.query_typed(
                        &rank,
                        &[
                            (&scope_id, Type::INT8),
                            (&values, Type::FLOAT4_ARRAY),
                            (&limit, Type::INT8),
                        ],
                    ),
                    client.query_one(&count, &[&scope_id]),
                    client.batch_execute("COMMIT"),
                )
                .await
                .map_err(db_error)?;
                (rows, count)
            }
        };
        let unembedded: i64 = unembedded.get(0);
        let mut candidates = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: &str = r.get(0);
            let key = id
                .parse()
                .map_err(|_| Error::Corrupt("a stored entry has a malformed id".into()))?;
            let distance: f32 = r.get(2);
            candidates.push(hippocamp_search::Candidate {
                key,
                score: -distance,
                recency: r.get(1),
            });
        }
        Ok(Nearest {
            candidates,
            unembedded: u(unembedded),
        })
    }

    /// Removes `ids` (already checked deletable) in `w`; how many.
    async fn erase(
        &self,
        w: Write<'_>,
        ids: Vec<EntryId>,
        epoch: Option<u64>,
        session_records: Option<i64>,
        deadline: Deadline,
    ) -> Result<u64> {
        let mut delta = erase_rows(&w.tx, w.row.id, &ids).await?;
        delta.epoch = epoch;
        delta.erasures += session_records.unwrap_or(0);
        let removed = u(-delta.entries);
        // A session's erasure commits even when it removed nothing: its
        // epoch advanced.
        if removed == 0 && epoch.is_none() && session_records.is_none() {
            return Ok(0);
        }
        w.commit(delta, &self.config, deadline, |data| {
            for id in &ids {
                data.remove(id);
            }
        })
        .await?;
        Ok(removed)
    }
}

#[async_trait]
#[allow(clippy::too_many_lines)] // one method per operation, each a transaction
impl MemoryStore for PgMemoryStore {
    fn capabilities(&self) -> Capabilities {
        let mut c = self.config.capabilities("postgres", true);
        hippocamp_memory::embedding::describe(&mut c, self.embedder.as_deref());
        c.limits.push(hippocamp_core::LimitInfo {
            name: "exact_vectors_up_to".into(),
            value: self.exact_vectors_up_to,
            default: DEFAULT_EXACT_VECTORS_UP_TO,
            min: 0,
            max: MAX_EXACT_VECTORS_UP_TO,
            description: "entries a scope may hold and still be searched exactly by vector; \
                          larger scopes are searched through PostgreSQL's HNSW index"
                .into(),
            configurable: true,
        });
        c
    }

    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        let deadline = self.deadline(&opts.call);
        let limits = &self.config.limits;
        let prepared = prepare_entry(scope, entry, limits)?;
        let terms = self.analyzer.analyze(&prepared.entry.content);
        let embedder = self.embedder.as_deref();
        let known = prepared.keyed
            && self
                .view(scope, deadline, |d, _| d.decide(&prepared) != Decision::New)
                .await?
                .unwrap_or(false);
        let mut vector = if known {
            None
        } else {
            embed_passages(embedder, &[&prepared.entry.content], deadline)
                .await?
                .pop()
        };
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        check_epoch(opts.epoch, w.row.epoch)?;
        if prepared.keyed {
            match w.data().existing(&prepared.entry) {
                Existing::New => {}
                Existing::Duplicate(e) => {
                    return Ok(AddOutcome {
                        entry: e.clone(),
                        duplicate: true,
                        redacted: prepared.redacted,
                    });
                }
                Existing::Conflict => return Err(Error::IdempotencyConflict(prepared.entry.id)),
            }
        }
        if vector.is_none() && embedder.is_some() {
            vector = embed_passages(embedder, &[&prepared.entry.content], deadline)
                .await?
                .pop();
        }
        let bytes = stored_bytes(prepared.storage_bytes, vector.as_deref());
        check_scope_quota(limits, w.data().len(), w.held_bytes(), 1, bytes)?;
        let redacted = prepared.redacted;
        let mut entry = prepared.entry;
        entry.epoch = w.row.epoch;
        entry.obligations = opts.obligations_for(&entry.metadata);
        w.data().admit_derived(&mut entry, self.clock.now_ms())?;
        let row = entry_row(&entry, bytes, &terms, vector.as_deref())?;
        insert_entries(&w.tx, w.row.id, std::slice::from_ref(&row)).await?;
        let mut delta = Delta::default();
        delta.add(bytes, terms.doc_len());
        let stored = entry.clone();
        w.commit(delta, &self.config, deadline, move |data| {
            let id = stored.id;
            data.insert(stored, bytes, &terms);
            if let Some(v) = vector {
                data.insert_vector(id, &v);
            }
        })
        .await?;
        Ok(AddOutcome {
            entry,
            duplicate: false,
            redacted,
        })
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let deadline = self.deadline(&opts.call);
        let limits = &self.config.limits;
        let plan = plan_events(scope, session, events, limits)?;
        let mut terms = plan.analyze(&self.analyzer);
        let ids: Vec<String> = plan
            .entries
            .iter()
            .map(|p| p.prepared.entry.id.to_string())
            .collect();
        let embedder = self.embedder.as_deref();
        // Only what would be new is embedded (not what the scope holds or
        // an erasure removed).
        let need = if embedder.is_some() {
            self.would_be_new(scope, session, &plan, &ids, deadline)
                .await?
        } else {
            Vec::new()
        };
        let mut vectors = embed_plan(embedder, &plan, &need, deadline).await?;
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        check_epoch(opts.epoch, w.row.epoch)?;
        if opts.session_epoch.is_some() {
            let current = session_epoch(&w.tx, w.row.id, session).await?;
            check_epoch(opts.session_epoch, current)?;
        }
        let erased = erased_among(&w.tx, w.row.id, session, &ids).await?;
        let decide = |p: &PreparedEntry| {
            if erased.contains(&p.entry.id) {
                Decision::Erased
            } else {
                w.data().decide(p)
            }
        };
        if embedder.is_some() {
            let missing: Vec<usize> = plan
                .new_indices(decide)
                .into_iter()
                .filter(|i| !vectors.contains_key(i))
                .collect();
            vectors.extend(embed_plan(embedder, &plan, &missing, deadline).await?);
        }
        let (new, report) = plan.resolve(decide);
        let bytes_of = |p: &hippocamp_memory::event::PlannedEntry| {
            stored_bytes(
                p.prepared.storage_bytes,
                vectors.get(&p.index).map(Vec::as_slice),
            )
        };
        let add_bytes: u64 = new.iter().map(bytes_of).sum();
        check_scope_quota(
            limits,
            w.data().len(),
            w.held_bytes(),
            new.len() as u64,
            add_bytes,
        )?;
        let epoch = w.row.epoch;
        let mut delta = Delta::default();
        let mut rows = Vec::with_capacity(new.len());
        let mut stored = Vec::with_capacity(new.len());
        let sized: Vec<_> = new.into_iter().map(|p| (bytes_of(&p), p)).collect();
        for (bytes, planned) in sized {
            let mut entry = planned.prepared.entry;
            entry.epoch = epoch;
            entry.obligations = opts.obligations_for(&entry.metadata);
            let t = terms.take(planned.index);
            let v = vectors.remove(&planned.index);
            rows.push(entry_row(&entry, bytes, &t, v.as_deref())?);
            delta.add(bytes, t.doc_len());
            stored.push((entry, bytes, t, v));
        }
        if rows.is_empty() {
            return Ok(report);
        }
        insert_entries(&w.tx, w.row.id, &rows).await?;
        w.commit(delta, &self.config, deadline, move |data| {
            for (entry, bytes, t, v) in stored {
                let id = entry.id;
                data.insert(entry, bytes, &t);
                if let Some(v) = v {
                    data.insert_vector(id, &v);
                }
            }
        })
        .await?;
        Ok(report)
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        let deadline = self.deadline(opts);
        let mut prepared = prepare_search(request, &self.config, &self.analyzer)?;
        let mode = resolve_mode(prepared.mode, self.embedder.is_some())?;
        let query_vector = hippocamp_memory::embedding::embed_query(
            self.embedder.as_deref(),
            mode,
            &request.query,
            deadline,
        )
        .await?;
        prepared.now_ms = self.clock.now_ms();
        let (bm25, fusion) = (self.config.bm25, &self.config.fusion);
        let here = self
            .view(scope, deadline, |d, row| match &query_vector {
                None => Ok(d.search(&prepared, bm25)),
                Some(v) if d.holds_vectors() => {
                    Ok(d.search_vectors(&prepared, mode, v, bm25, fusion))
                }
                Some(_) => Err(row),
            })
            .await?;
        match (here, query_vector) {
            (None, _) => Ok(SearchResults::default()),
            (Some(Ok(results)), _) => Ok(results),
            (Some(Err(row)), Some(v)) => {
                self.search_in_database(scope, row, &prepared, mode, &v, deadline)
                    .await
            }
            (Some(Err(_)), None) => Err(Error::Corrupt(
                "a search without a vector asked for vector candidates".into(),
            )),
        }
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        let deadline = self.deadline(opts);
        let now = self.clock.now_ms();
        self.view(scope, deadline, |d, _| d.read(id, now))
            .await?
            .flatten()
            .ok_or(Error::NotFound("entry"))
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::lineage::Lineage> {
        let deadline = self.deadline(opts);
        let now = self.clock.now_ms();
        self.view(scope, deadline, |d, _| d.lineage_of(id, now))
            .await?
            .flatten()
            .ok_or(Error::NotFound("entry"))
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        if w.data().get(id).is_none() {
            return Ok(0);
        }
        // The entry and everything derived from it, in one transaction.
        let ids = w.data().with_dependents(&[*id]);
        w.data().check_deletes(&ids, self.clock.now_ms())?;
        self.erase(w, ids, None, None, deadline).await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        let ids = w.data().with_dependents(&w.data().session_entries(session));
        w.data().check_deletes(&ids, self.clock.now_ms())?;
        // Advanced in the erasure's transaction, even for a session that
        // holds nothing: a delivery in flight on any server, admitted
        // before, is refused when it takes the scope's row lock.
        let new_record = advance_session_epoch(&w.tx, w.row.id, session).await?;
        self.erase(w, ids, None, Some(i64::from(new_record)), deadline)
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let deadline = self.deadline(opts);
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        w.data().check_delete_all(self.clock.now_ms())?;
        let ids = w.data().ids();
        // The epoch advances in the erasure's transaction, even for a
        // scope with no entries, so work queued before it stays fenced.
        let epoch = w.row.epoch + 1;
        let deleted = self.erase(w, ids, Some(epoch), None, deadline).await?;
        Ok(Erasure { deleted, epoch })
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        let deadline = self.deadline(opts);
        let client = self.db.client(deadline).await?;
        Ok(read_scope(&client, scope).await?.map_or(0, |r| r.epoch))
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        let deadline = self.deadline(opts);
        let client = self.db.client(deadline).await?;
        let row = client
            .query_opt(
                "SELECT s.epoch, COALESCE((SELECT e.epoch FROM memory_session_epochs e \
                 WHERE e.scope_id = s.id AND e.session = $3), 0) \
                 FROM memory_scopes s WHERE s.app = $1 AND s.usr = $2",
                &[
                    &scope.app().as_str(),
                    &scope.user().as_str(),
                    &session.as_str(),
                ],
            )
            .await
            .map_err(db_error)?;
        Ok(row.map_or(ErasureFence::default(), |r| ErasureFence {
            epoch: u(r.get::<_, i64>(0)),
            session_epoch: u(r.get::<_, i64>(1)),
        }))
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let deadline = self.deadline(opts);
        let prepared: PreparedList = prepare_list(request, &self.config.limits)?;
        let now = self.clock.now_ms();
        Ok(self
            .view(scope, deadline, |d, _| list_page(d, &prepared, now))
            .await?
            .unwrap_or_default())
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &ExportRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let deadline = self.deadline(opts);
        let p = prepare_export(request, &self.config.limits)?;
        let after = match p.after {
            None => None,
            Some(ExportCursor::Time(ts, id)) => Some((ts, id)),
            Some(ExportCursor::Id(_)) => {
                return Err(Error::invalid(
                    hippocamp_core::Field::Cursor,
                    hippocamp_core::Problem::Malformed("not a cursor this store made".into()),
                ));
            }
        };
        let now = self.clock.now_ms();
        Ok(self
            .view(scope, deadline, |d, _| {
                let (entries, last) = d.list(false, after, p.limit, p.max_bytes, now, |_| true);
                EntryPage {
                    entries: entries.iter().map(|e| (**e).clone()).collect(),
                    next_cursor: last.map(|(ts, id)| ExportCursor::Time(ts, id).encode()),
                }
            })
            .await?
            .unwrap_or_default())
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        let deadline = self.deadline(opts);
        let max = check_sweep_batch(max)?;
        let now = self.clock.now_ms();
        let limit = i((max + spare.len() + 1) as u64);
        let due: Vec<(String, String)> = {
            let client = self.db.client(deadline).await?;
            client
                .query(
                    "SELECT s.app, s.usr FROM memory_entries e JOIN memory_scopes s ON s.id = e.scope_id \
                     WHERE e.sweep_at <= $1 GROUP BY s.app, s.usr ORDER BY min(e.sweep_at), s.app, s.usr LIMIT $2",
                    &[&i(now), &limit],
                )
                .await
                .map_err(db_error)?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect()
        };
        let mut sweep = Sweep {
            deleted: 0,
            more: i(due.len() as u64) >= limit,
        };
        for (app, user) in due {
            let scope = MemoryScope::parse(&app, &user)
                .map_err(|_| Error::Corrupt("a stored scope name is not valid".into()))?;
            if spare.contains(&scope) {
                continue;
            }
            let left = max - usize::try_from(sweep.deleted).unwrap_or(max);
            let mut client = self.db.client(deadline).await?;
            let w = self.begin(&mut client, &scope, deadline).await?;
            // One more than fits, to know whether more are due.
            let mut ids = w.data().sweepable(now, left + 1);
            sweep.more |= ids.len() > left;
            ids.truncate(left);
            let ids = w.data().sweepable_with_dependents(&ids, now);
            if !ids.is_empty() {
                sweep.deleted += self.erase(w, ids, None, None, deadline).await?;
            }
            if sweep.more {
                break;
            }
        }
        Ok(sweep)
    }

    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        let deadline = self.deadline(&opts.call);
        let limits = &self.config.limits;
        let update = check_update(update.clone(), limits)?;
        let terms = self.analyzer.analyze(&update.content);
        let now = self.clock.now_ms();
        let current = self
            .view(scope, deadline, |d, _| d.get_live(id, now).cloned())
            .await?
            .flatten()
            .ok_or(Error::NotFound("entry"))?;
        if current.content == update.content && current.metadata == update.metadata {
            return Ok(UpdateOutcome {
                entry: current,
                changed: false,
            });
        }
        let vector = embed_passages(self.embedder.as_deref(), &[&update.content], deadline)
            .await?
            .pop();
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        check_epoch(opts.epoch, w.row.epoch)?;
        let now = self.clock.now_ms();
        let current = w
            .data()
            .get_live(id, now)
            .cloned()
            .ok_or(Error::NotFound("entry"))?;
        let granted = opts.obligations_for(&update.metadata);
        let Some((entry, bytes)) = apply_update(&current, &update, granted, now) else {
            return Ok(UpdateOutcome {
                entry: current,
                changed: false,
            });
        };
        check_revise(&current, limits.max_revisions, now)?;
        let bytes = stored_bytes(bytes, vector.as_deref());
        // What the entry was counted at when it was written.
        let old_bytes = w
            .data()
            .bytes_of(id)
            .unwrap_or_else(|| current.storage_bytes());
        check_scope_quota(
            limits,
            w.data().len().saturating_sub(1),
            w.held_bytes() - old_bytes,
            1,
            bytes,
        )?;
        let row = entry_row(&entry, bytes, &terms, vector.as_deref())?;
        let replaced =
            w.tx.query_opt(
                REPLACE_ENTRY,
                &[
                    &w.row.id,
                    &row.id,
                    &row.record,
                    &row.bytes,
                    &row.ts,
                    &row.session,
                    &row.sweep_at,
                    &row.terms,
                    &row.tfs,
                    &row.doc_len,
                    &row.embedding,
                ],
            )
            .await
            .map_err(db_error)?
            .ok_or_else(|| Error::Corrupt("a cached entry has no row".into()))?;
        let old_len: i32 = replaced.get(0);
        let stmt =
            w.tx.prepare_cached(INSERT_REVISION)
                .await
                .map_err(db_error)?;
        for r in [Revision::of(&current), Revision::of(&entry)] {
            w.tx.execute(
                &stmt,
                &[
                    &w.row.id,
                    &row.id,
                    &i64::from(r.revision).try_into().unwrap_or(i32::MAX),
                    &revision_record(&r)?,
                ],
            )
            .await
            .map_err(db_error)?;
        }
        let keep = i(limits.max_revisions);
        w.tx.execute(
            "DELETE FROM memory_revisions WHERE scope_id = $1 AND id = $2 AND rev NOT IN \
             (SELECT rev FROM memory_revisions WHERE scope_id = $1 AND id = $2 ORDER BY rev DESC LIMIT $3)",
            &[&w.row.id, &row.id, &keep],
        )
        .await
        .map_err(db_error)?;
        let delta = Delta {
            bytes: i(bytes) - i(old_bytes),
            len: i64::from(row.doc_len) - i64::from(old_len),
            ..Delta::default()
        };
        let stored = entry.clone();
        let id = *id;
        w.commit(delta, &self.config, deadline, move |data| {
            data.insert(stored, bytes, &terms);
            if let Some(v) = vector {
                data.insert_vector(id, &v);
            }
        })
        .await?;
        Ok(UpdateOutcome {
            entry,
            changed: true,
        })
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        let deadline = self.deadline(opts);
        let now = self.clock.now_ms();
        let (entry, row) = self
            .view(scope, deadline, |d, row| {
                d.get_live(id, now).cloned().map(|e| (e, row))
            })
            .await?
            .flatten()
            .ok_or(Error::NotFound("entry"))?;
        let client = self.db.client(deadline).await?;
        let rows = client
            .query(
                "SELECT record FROM memory_revisions WHERE scope_id = $1 AND id = $2 ORDER BY rev DESC",
                &[&row.id, &id.to_string()],
            )
            .await
            .map_err(db_error)?;
        if rows.is_empty() {
            return Ok(vec![Revision::of(&entry)]);
        }
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get(0))
                    .map_err(|e| Error::Corrupt(format!("a revision record does not decode: {e}")))
            })
            .collect()
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        let deadline = self.deadline(&opts.call);
        let limits = &self.config.limits;
        let prepared = prepare_import(scope, entries, limits)?;
        let terms: Vec<TermFreqs> = prepared
            .iter()
            .map(|p| self.analyzer.analyze(&p.entry.content))
            .collect();
        let now = self.clock.now_ms();
        let texts: Vec<&str> = prepared
            .iter()
            .filter(|p| !p.entry.obligations.expired(now))
            .map(|p| p.entry.content.as_str())
            .collect();
        let mut vectors = embed_passages(self.embedder.as_deref(), &texts, deadline)
            .await?
            .into_iter();
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        check_epoch(opts.epoch, w.row.epoch)?;
        let ids: Vec<String> = prepared.iter().map(|p| p.entry.id.to_string()).collect();
        let erased = erased_ids_among(&w.tx, w.row.id, &ids).await?;
        let mut report = ImportReport::default();
        let mut new = Vec::new();
        let mut kept = std::collections::HashSet::new();
        for (p, t) in prepared.into_iter().zip(terms) {
            if p.entry.obligations.expired(now) {
                report.expired += 1;
                continue;
            }
            let v = vectors.next();
            if erased.contains(&p.entry.id) {
                report.erased += 1;
            } else if w.data().get(&p.entry.id).is_some() {
                report.existing += 1;
                kept.insert(p.entry.id);
            } else if !hippocamp_memory::import::sources_present(&p.entry, &kept, |id| {
                w.data().get_live(id, now).is_some()
            }) {
                report.unsourced += 1;
            } else {
                kept.insert(p.entry.id);
                new.push((p, t, v));
            }
        }
        let add_bytes: u64 = new
            .iter()
            .map(|(p, _, v)| stored_bytes(p.storage_bytes, v.as_deref()))
            .sum();
        check_scope_quota(
            limits,
            w.data().len(),
            w.held_bytes(),
            new.len() as u64,
            add_bytes,
        )?;
        if new.is_empty() {
            return Ok(report);
        }
        let epoch = w.row.epoch;
        let mut delta = Delta::default();
        let mut rows = Vec::with_capacity(new.len());
        let mut revisions = Vec::new();
        let mut stored = Vec::with_capacity(new.len());
        for (p, t, v) in new {
            let mut entry = p.entry;
            entry.epoch = epoch;
            let bytes = stored_bytes(p.storage_bytes, v.as_deref());
            rows.push(entry_row(&entry, bytes, &t, v.as_deref())?);
            for r in &p.history {
                revisions.push((entry.id.to_string(), r.revision, revision_record(r)?));
            }
            delta.add(bytes, t.doc_len());
            stored.push((entry, bytes, t, v));
            report.imported += 1;
        }
        insert_entries(&w.tx, w.row.id, &rows).await?;
        if !revisions.is_empty() {
            let stmt =
                w.tx.prepare_cached(INSERT_REVISION)
                    .await
                    .map_err(db_error)?;
            for (id, rev, record) in &revisions {
                let rev = i32::try_from(*rev).unwrap_or(i32::MAX);
                w.tx.execute(&stmt, &[&w.row.id, id, &rev, record])
                    .await
                    .map_err(db_error)?;
            }
        }
        w.commit(delta, &self.config, deadline, move |data| {
            for (entry, bytes, t, v) in stored {
                let id = entry.id;
                data.insert(entry, bytes, &t);
                if let Some(v) = v {
                    data.insert_vector(id, &v);
                }
            }
        })
        .await?;
        Ok(report)
    }

    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &ErasureRequest,
        opts: &CallOptions,
    ) -> Result<ErasurePage> {
        let deadline = self.deadline(opts);
        let (after, limit) = request.prepare(self.config.limits.max_page_entries)?;
        let client = self.db.client(deadline).await?;
        let Some(row) = read_scope(&client, scope).await? else {
            return Ok(ErasurePage::default());
        };
        let most = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let mut ids = Vec::new();
        if !matches!(after, Some(ErasureCursor::Session(_))) {
            let from = match &after {
                Some(ErasureCursor::Entry(id)) => Some(id.to_string()),
                _ => None,
            };
            for r in client
                .query(
                    "SELECT id FROM memory_erased_ids WHERE scope_id = $1 \
                     AND ($2::TEXT IS NULL OR id > $2) ORDER BY id LIMIT $3",
                    &[&row.id, &from, &most],
                )
                .await
                .map_err(db_error)?
            {
                ids.push(
                    r.get::<_, &str>(0)
                        .parse::<EntryId>()
                        .map_err(|_| Error::Corrupt("an erased entry id is malformed".into()))?,
                );
            }
        }
        let mut sessions = Vec::new();
        if ids.len() <= limit {
            let from = match &after {
                Some(ErasureCursor::Session(s)) => Some(s.as_str().to_owned()),
                _ => None,
            };
            for r in client
                .query(
                    "SELECT session, epoch FROM memory_session_epochs WHERE scope_id = $1 \
                     AND ($2::TEXT IS NULL OR session > $2) ORDER BY session LIMIT $3",
                    &[&row.id, &from, &most],
                )
                .await
                .map_err(db_error)?
            {
                let session = SessionId::new(r.get::<_, String>(0))
                    .map_err(|_| Error::Corrupt("an erased session id is malformed".into()))?;
                sessions.push((session, u(r.get(1))));
            }
        }
        Ok(ErasurePage::cut(
            ids.into_iter(),
            sessions.into_iter(),
            after.as_ref(),
            limit,
        ))
    }

    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &ImportedErasures,
        opts: &CallOptions,
    ) -> Result<ErasureImport> {
        let deadline = self.deadline(opts);
        let mut client = self.db.client(deadline).await?;
        let w = self.begin(&mut client, scope, deadline).await?;
        let adopted_epoch = check_import_epoch(erasures.epoch, w.row.epoch, w.row.held())?;
        let ids: Vec<String> = erasures
            .records
            .entries
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut added =
            w.tx.execute(
                "INSERT INTO memory_erased_ids (scope_id, id) SELECT $1, unnest($2::TEXT[]) \
                 ON CONFLICT DO NOTHING",
                &[&w.row.id, &ids],
            )
            .await
            .map_err(db_error)?;
        // Erased before the export, from whichever session (`''`): an
        // event of any session that would make one again is skipped.
        let anywhere =
            w.tx.execute(
                "INSERT INTO memory_erased (scope_id, session, id) \
                 SELECT $1, '', unnest($2::TEXT[]) ON CONFLICT DO NOTHING",
                &[&w.row.id, &ids],
            )
            .await
            .map_err(db_error)?;
        for r in &erasures.records.sessions {
            let before = session_epoch(&w.tx, w.row.id, &r.session).await?;
            if r.epoch > before {
                w.tx.execute(
                    "INSERT INTO memory_session_epochs (scope_id, session, epoch) VALUES ($1, $2, $3) \
                     ON CONFLICT (scope_id, session) DO UPDATE SET epoch = $3",
                    &[&w.row.id, &r.session.as_str(), &i(r.epoch)],
                )
                .await
                .map_err(db_error)?;
                added += u64::from(before == 0);
            }
        }
        let delta = Delta {
            epoch: adopted_epoch.then_some(erasures.epoch),
            erasures: i(added + anywhere),
            ..Delta::default()
        };
        w.commit(delta, &self.config, deadline, |_| {}).await?;
        Ok(ErasureImport {
            adopted_epoch,
            added,
        })
    }

    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        let p = prepare_names(request, &self.config.limits)?;
        let client = self.db.client(self.deadline(opts)).await?;
        let rows = client
            .query(
                "SELECT DISTINCT app FROM memory_scopes WHERE entries > 0 AND ($1::TEXT IS NULL OR app > $1) \
                 ORDER BY app LIMIT $2",
                &[&p.after, &i(p.limit as u64 + 1)],
            )
            .await
            .map_err(db_error)?;
        Ok(p.page(rows.iter().map(|r| r.get::<_, String>(0))))
    }

    async fn list_users(
        &self,
        app: &AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        let p = prepare_names(request, &self.config.limits)?;
        let client = self.db.client(self.deadline(opts)).await?;
        let rows = client
            .query(
                "SELECT usr FROM memory_scopes WHERE app = $1 AND entries > 0 AND ($2::TEXT IS NULL OR usr > $2) \
                 ORDER BY usr LIMIT $3",
                &[&app.as_str(), &p.after, &i(p.limit as u64 + 1)],
            )
            .await
            .map_err(db_error)?;
        Ok(p.page(rows.iter().map(|r| r.get::<_, String>(0))))
    }

    async fn status(&self) -> Result<StoreStatus> {
        let client = self
            .db
            .client(Deadline::after(self.config.limits.call_timeout()))
            .await?;
        let row = client
            .query_one(
                "SELECT count(*) FILTER (WHERE entries > 0), COALESCE(sum(entries), 0)::BIGINT, \
                 COALESCE(sum(bytes), 0)::BIGINT FROM memory_scopes",
                &[],
            )
            .await
            .map_err(db_error)?;
        Ok(StoreStatus {
            backend: "postgres".to_owned(),
            durable: true,
            scopes: u(row.get(0)),
            entries: u(row.get(1)),
            bytes: u(row.get(2)),
            router: None,
        })
    }

    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        let deadline = Deadline::after(self.config.limits.call_timeout());
        self.view(scope, deadline, |_, _| ()).await?;
        Ok(())
    }

    fn release_scope(&self, scope: &MemoryScope) {
        self.cache.forget(scope);
    }
}
