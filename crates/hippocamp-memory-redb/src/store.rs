//! [`RedbMemoryStore`]: opening, the directory lock, and the
//! `MemoryStore` operations.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, Deadline, EntryId, Error, MemoryScope, Result, SessionId, Stage,
};
use hippocamp_memory::ErasureFence;
use hippocamp_memory::embedding::{embed_passages, embed_plan};
use hippocamp_memory::entry::check_update;
use hippocamp_memory::entry::{PreparedEntry, prepare_entry};
use hippocamp_memory::erasure::{
    ErasureCursor, ErasureImport, ErasurePage, ErasureRequest, ImportedErasures,
};
use hippocamp_memory::event::{
    Decision, Event, EventPlan, IngestReport, PlanTerms, prepare_events,
};
use hippocamp_memory::import::prepare_import;
use hippocamp_memory::list::prepare_names;
use hippocamp_memory::list::{
    ExportCursor, PreparedExport, check_sweep_batch, prepare_export, prepare_list,
};
use hippocamp_memory::mem::list_page;
use hippocamp_memory::scope::ScopeData;
use hippocamp_memory::search::prepare_search;
use hippocamp_memory::{
    AddOutcome, Capabilities, EntryPage, EntryUpdate, Erasure, ExportRequest, ImportReport,
    ImportedEntry, ListRequest, MemoryConfig, MemoryEntry, MemoryStore, NamePage, NamesRequest,
    NewEntry, Obligations, Revision, SearchRequest, SearchResults, StoreStatus, Sweep,
    UpdateOutcome, WriteOptions,
};
use hippocamp_search::{Analyzer, TermFreqs};
use parking_lot::Mutex;
use redb::{Database, ReadableDatabase, ReadableTable, StorageBackend};
use tokio::sync::oneshot;

use crate::cache::ScopeCache;
use crate::format::{
    EMBEDDER_KEY, ENTRIES, ERASED, ERASED_IDS, ERASED_IDS_KEY, EXPIRY, EntryRecord, FORMAT_KEY,
    FORMAT_VERSION, META, Mutation, OBLIGATIONS, REVISIONS, SCOPES, SESSION_EPOCHS, SESSIONS,
    ScopeRow, Totals, USERS, USERS_INDEXED_KEY, VECTORS, WAL_SEQ_KEY, decode_obligations,
    decode_session_epoch, decode_vector, entry_key, entry_range, revision_of, revision_range,
    revisions_of, scope_hash, session_epoch_key, session_hash, session_key, user_key,
};
use crate::pipeline::{LogTables, Progress};
use crate::writer::{Admission, Committer, Embedded, Moment, Op, Writer};
use hippocamp_durable::{DirLock, FileWal, WalStorage, decode_log};

/// The database file inside a store's directory.
pub const DB_FILE: &str = "memory.redb";
/// The lock file inside a store's directory.
pub const LOCK_FILE: &str = "LOCK";
/// The write-ahead log inside a store's directory.
pub const WAL_FILE: &str = "memory.wal";

/// Tuning of the durable store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableOptions {
    /// Checkpoint (durable database commit, empty log) after this many
    /// logged write groups (default 16,384).
    pub checkpoint_groups: usize,
    /// ...or once the log holds this many bytes (default 64 MiB).
    pub checkpoint_bytes: u64,
    /// redb's page cache and write buffer (default 256 MiB;
    /// [`DB_CACHE_BYTES`] is the range). Writes are applied to the
    /// database behind acknowledgements, at the rate its inserts allow,
    /// and inserts under random ids into pages that fell out of this cache
    /// re-read and re-write them: at 16 MiB, bulk ingestion was bound by
    /// it (measured; `docs/PERFORMANCE.md`). Searches run on the store's
    /// own per-scope state, so this is the database's share of the
    /// resident size, filled only as pages are used. Reported by
    /// `capabilities()` as the limit `db_cache_bytes`.
    pub cache_bytes: usize,
    /// Scopes' search state kept in memory (entries and index), charged at
    /// their entries' storage bytes plus ~1,000 bytes an entry of index
    /// and maps (measured; it approximates resident memory): when loading a scope takes the total
    /// over this, the least recently used scopes are released (default
    /// 1 GiB; [`SCOPE_CACHE_BYTES`] is the range). Reported by
    /// `capabilities()` as the limit `scope_cache_bytes`.
    pub scope_cache_bytes: u64,
}

/// Default, smallest and largest `scope_cache_bytes`.
pub const SCOPE_CACHE_BYTES: (u64, u64, u64) = (1 << 30, 1 << 20, 1 << 40);

/// Default, smallest and largest `cache_bytes` (`db_cache_bytes`).
pub const DB_CACHE_BYTES: (u64, u64, u64) = (256 << 20, 1 << 20, 1 << 36);

impl DurableOptions {
    /// Checks the options' ranges.
    pub fn validate(&self) -> Result<()> {
        let (_, min, max) = SCOPE_CACHE_BYTES;
        hippocamp_core::error::check_range(
            "memory_cache.scope_cache_bytes",
            self.scope_cache_bytes,
            min,
            max,
        )?;
        let (_, min, max) = DB_CACHE_BYTES;
        hippocamp_core::error::check_range(
            "memory_cache.db_cache_bytes",
            u64::try_from(self.cache_bytes).unwrap_or(u64::MAX),
            min,
            max,
        )
    }
}

impl Default for DurableOptions {
    fn default() -> Self {
        Self {
            checkpoint_groups: 16_384,
            checkpoint_bytes: 64 << 20,
            cache_bytes: usize::try_from(DB_CACHE_BYTES.0).unwrap_or(usize::MAX),
            scope_cache_bytes: SCOPE_CACHE_BYTES.0,
        }
    }
}

/// A durable memory store on redb. See the crate docs.
#[derive(Debug)]
pub struct RedbMemoryStore {
    config: MemoryConfig,
    embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    analyzer: Arc<Analyzer>,
    db: Arc<Database>,
    cache: Arc<ScopeCache>,
    committer: Arc<Committer>,
    totals: Arc<Mutex<Totals>>,
    /// How far the applier has got: reads of the database wait for it.
    progress: Arc<Progress>,
    /// The database's cache bound, for `capabilities()`.
    db_cache_bytes: u64,
    clock: hippocamp_memory::config::StoreClock,
    _lock: Option<DirLock>,
}

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

impl RedbMemoryStore {
    /// Opens (creating if needed) the store in `dir`, taking the
    /// directory's lock. A second process opening the same directory gets
    /// `Unavailable`; a database of an unknown format version is refused.
    pub fn open(dir: impl AsRef<Path>, config: MemoryConfig) -> Result<Self> {
        Self::open_with_options(dir, config, DurableOptions::default())
    }

    /// Makes the store embed every entry with `embedder` before it
    /// commits (the vector is stored in the entry's transaction) and offer
    /// `vector` and `hybrid` search (the default mode). The store records
    /// the embedder's model and dimension on first use and refuses another
    /// one later (`InvalidConfig`): vectors of two models do not compare.
    pub fn with_embedder(mut self, embedder: Arc<dyn hippocamp_embed::Embedder>) -> Result<Self> {
        let want = format!("{}\n{}", embedder.model(), embedder.dimension());
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            let have = meta
                .get(EMBEDDER_KEY)
                .map_err(storage)?
                .map(|v| String::from_utf8_lossy(v.value()).into_owned());
            match have {
                Some(h) if h != want => {
                    return Err(Error::config(
                        "embedder",
                        hippocamp_core::Problem::Malformed(format!(
                            "this store's vectors come from `{}`; `{}` cannot be compared with them",
                            h.replace('\n', "@"),
                            want.replace('\n', "@")
                        )),
                    ));
                }
                Some(_) => {}
                None => {
                    meta.insert(EMBEDDER_KEY, want.as_bytes())
                        .map_err(storage)?;
                }
            }
        }
        txn.commit().map_err(storage)?;
        self.embedder = Some(embedder);
        Ok(self)
    }

    /// [`open`](Self::open) with tuning options.
    pub fn open_with_options(
        dir: impl AsRef<Path>,
        config: MemoryConfig,
        options: DurableOptions,
    ) -> Result<Self> {
        config.validate()?;
        options.validate()?;
        let dir = dir.as_ref();
        let (lock, db) = hippocamp_durable::db::open_owned(
            dir,
            LOCK_FILE,
            DB_FILE,
            init_format,
            Some(options.cache_bytes),
        )?;
        let wal = FileWal::open(&dir.join(WAL_FILE)).map_err(storage)?;
        Self::start(db, Box::new(wal), config, options, Some(lock))
    }

    /// Opens a store on a custom redb storage backend and log storage (no
    /// directory lock). Tests use it to inject power loss; with
    /// `redb::backends::InMemoryBackend` it is a purely in-memory redb store.
    pub fn open_with_backend(
        backend: impl StorageBackend,
        wal: impl WalStorage + 'static,
        config: MemoryConfig,
        options: DurableOptions,
    ) -> Result<Self> {
        config.validate()?;
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(storage)?;
        Self::start(db, Box::new(wal), config, options, None)
    }

    fn start(
        db: Database,
        mut wal: Box<dyn WalStorage>,
        config: MemoryConfig,
        options: DurableOptions,
        lock: Option<DirLock>,
    ) -> Result<Self> {
        init_format(&db)?;
        let analyzer = Arc::new(Analyzer::english());
        let seq = replay(&db, &mut *wal, &analyzer)?;
        index_users(&db)?;
        move_erased_ids(&db)?;
        let totals = count(&db)?;
        let published = Arc::new(Mutex::new(totals));
        let db = Arc::new(db);
        options.validate()?;
        let cache = Arc::new(ScopeCache::new(
            options.scope_cache_bytes,
            Arc::clone(&analyzer),
        ));
        let writer = Writer::new(
            Arc::clone(&db),
            Arc::clone(&cache),
            config.limits.clone(),
            wal,
            seq,
            options,
            totals,
            Arc::clone(&published),
            Arc::clone(&analyzer),
        )?;
        let progress = Arc::clone(&writer.progress);
        Ok(Self {
            clock: config.clock.clone(),
            config,
            embedder: None,
            analyzer,
            db,
            cache,
            committer: Arc::new(Committer::new(
                writer,
                crate::writer::MAX_GROUP,
                "the memory writer",
            )),
            totals: published,
            progress,
            db_cache_bytes: u64::try_from(options.cache_bytes).unwrap_or(u64::MAX),
            _lock: lock,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.config.limits.call_timeout())
    }

    /// A deletion's deadline and the moment its checks use.
    fn moment(&self, opts: &CallOptions) -> Moment {
        Moment {
            deadline: self.deadline(opts),
            now_ms: self.clock.now_ms(),
        }
    }

    /// Waits, within `deadline`, until the database holds every write
    /// acknowledged so far (adds are applied behind the writer: see
    /// [`crate::pipeline`]); every read of the database does this first.
    async fn settled(&self, deadline: Deadline) -> Result<()> {
        tokio::time::timeout_at(deadline.instant().into(), self.progress.settled())
            .await
            .map_err(|_| Error::Timeout(Stage::Backend))?
    }

    async fn submit<T>(&self, make: impl FnOnce(oneshot::Sender<Result<T>>) -> Op) -> Result<T> {
        let (reply, rx) = oneshot::channel();
        self.committer.submit(make(reply), rx).await
    }

    /// Loads a scope's search state now (a router does this when a scope
    /// becomes active) rather than on its first search.
    /// Bounded by the store's call timeout: activation waits for the
    /// applier like any read, never without a deadline.
    pub async fn preload(&self, scope: &MemoryScope) -> Result<()> {
        let deadline = self.deadline(&CallOptions::default());
        tokio::time::timeout_at(deadline.instant().into(), self.slot(scope))
            .await
            .map_err(|_| Error::Timeout(Stage::Backend))?
            .map(drop)
    }

    /// Holds the thread that applies acknowledged adds to the database
    /// until the guard is dropped, so the database lags the log: for tests
    /// of what acknowledgements and reads guarantee meanwhile (see
    /// [`crate::pipeline`]). Drop the guard before the store.
    #[doc(hidden)]
    pub fn pause_applier(&self) -> crate::pipeline::Pause {
        self.progress.pause()
    }

    /// Drops a scope's in-memory search state; its data stays on disk and
    /// the next search reloads it. Returns whether it was cached.
    pub fn release_scope(&self, scope: &MemoryScope) -> bool {
        self.cache.release(&scope_hash(scope))
    }

    /// Whether a scope's search state is in memory.
    pub fn is_cached(&self, scope: &MemoryScope) -> bool {
        self.cache.contains(&scope_hash(scope))
    }

    /// Committed changes waiting to be applied to a cached scope's search
    /// state (`None` when it is not cached): a reader applies them, and
    /// the writer does once 64 wait on a scope nobody reads.
    pub fn pending_changes(&self, scope: &MemoryScope) -> Option<usize> {
        self.cache.pending_len(&scope_hash(scope))
    }

    /// Number of scopes whose search state is in memory.
    pub fn cached_scopes(&self) -> usize {
        self.cache.len()
    }

    /// Bytes charged to the scopes in memory (their entries' storage
    /// bytes), which `scope_cache_bytes` bounds.
    pub fn cached_bytes(&self) -> u64 {
        self.cache.charged_bytes()
    }

    /// The scope's cache slot (loading its copy if needed), by `deadline`.
    async fn slot_by(
        &self,
        scope: &MemoryScope,
        deadline: Deadline,
    ) -> Result<Arc<crate::cache::Slot>> {
        tokio::time::timeout_at(deadline.instant().into(), self.slot(scope))
            .await
            .map_err(|_| Error::Timeout(Stage::Backend))?
    }

    /// The copy in `slot`, read-locked, by `deadline`: what searches,
    /// listings and statuses read.
    async fn read_by<'s>(
        &self,
        slot: &'s crate::cache::Slot,
        deadline: Deadline,
    ) -> Result<tokio::sync::RwLockReadGuard<'s, ScopeData>> {
        tokio::time::timeout_at(deadline.instant().into(), self.cache.read(slot))
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))?
            .ok_or_else(|| Error::Unavailable("scope state not loaded".into()))
    }

    async fn slot(&self, scope: &MemoryScope) -> Result<Arc<crate::cache::Slot>> {
        let key = scope_hash(scope);
        let db = Arc::clone(&self.db);
        let progress = Arc::clone(&self.progress);
        let scope = scope.clone();
        let passages = self.config.passages;
        self.cache
            .get_or_load(key, move || async move {
                // After the load is counted (so later commits keep their
                // changes for it), before its snapshot: the snapshot then
                // holds every acknowledged write.
                progress.settled().await?;
                tokio::task::spawn_blocking(move || load_scope(&db, &scope, passages))
                    .await
                    .map_err(|e| Error::Unavailable(format!("scope load failed: {e}")))?
            })
            .await
    }
}

/// What a store holds for a plan's entries, as of one read snapshot.
struct Stored {
    entries: HashMap<EntryId, MemoryEntry>,
    /// The planned entries that were erased (and stay so).
    erased: HashSet<EntryId>,
}

impl RedbMemoryStore {
    /// What the store holds for `plan` (a read snapshot).
    fn planned(&self, scope: &MemoryScope, plan: &EventPlan) -> Result<Stored> {
        let entries = self.stored(scope, plan.entries.iter().map(|p| p.prepared.entry.id))?;
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(ERASED).map_err(storage)?;
        let h = scope_hash(scope);
        let mut erased = HashSet::new();
        for p in &plan.entries {
            let e = &p.prepared.entry;
            if let Some(s) = &e.provenance.session_id
                && table
                    .get(&session_key(&h, &session_hash(s), &e.id))
                    .map_err(storage)?
                    .is_some()
            {
                erased.insert(e.id);
            }
        }
        Ok(Stored { entries, erased })
    }

    /// The stored entries among `ids` (a read snapshot).
    fn stored(
        &self,
        scope: &MemoryScope,
        ids: impl IntoIterator<Item = EntryId>,
    ) -> Result<HashMap<EntryId, MemoryEntry>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let entries = txn.open_table(ENTRIES).map_err(storage)?;
        let revisions = txn.open_table(REVISIONS).map_err(storage)?;
        let h = scope_hash(scope);
        let mut out = HashMap::new();
        for id in ids {
            let key = entry_key(&h, &id);
            if let Some(v) = entries.get(&key).map_err(storage)? {
                let rec = EntryRecord::decode(v.value())?;
                let mut entry = rec.into_entry(scope)?.0;
                (entry.revision, entry.revised_at_ms) = revision_of(&revisions, &key)?;
                out.insert(id, entry);
            }
        }
        Ok(out)
    }
}

/// Submissions of one ingesting write: entries that vanish between the
/// store's look and the commit are embedded and the write submitted
/// again, this many times at most.
const EMBED_ATTEMPTS: usize = 3;

fn changed_while_embedding() -> Error {
    Error::Unavailable(
        "entries of the scope kept changing while the write was being embedded; retry".into(),
    )
}

impl Drop for RedbMemoryStore {
    fn drop(&mut self) {
        self.committer.close();
    }
}

pub(crate) fn init_format(db: &Database) -> Result<()> {
    hippocamp_durable::db::init_format(
        db,
        META,
        FORMAT_KEY,
        FORMAT_VERSION,
        "the memory store",
        |txn| {
            txn.open_table(SCOPES).map_err(storage)?;
            txn.open_table(ENTRIES).map_err(storage)?;
            txn.open_table(SESSIONS).map_err(storage)?;
            txn.open_table(VECTORS).map_err(storage)?;
            txn.open_table(ERASED).map_err(storage)?;
            txn.open_table(OBLIGATIONS).map_err(storage)?;
            txn.open_table(EXPIRY).map_err(storage)?;
            txn.open_table(REVISIONS).map_err(storage)?;
            txn.open_table(USERS).map_err(storage)?;
            // Made on every open: stores created before them have none.
            txn.open_table(SESSION_EPOCHS).map_err(storage)?;
            txn.open_table(ERASED_IDS).map_err(storage)?;
            Ok(())
        },
    )
}

/// Applies the log records newer than the last checkpoint, in order, in
/// one durable transaction, then empties the log. Returns the sequence
/// number of the last applied record.
fn replay(db: &Database, wal: &mut dyn WalStorage, analyzer: &Analyzer) -> Result<u64> {
    let records = decode_log::<Mutation>(&wal.read_all().map_err(storage)?);
    let txn = db.begin_write().map_err(storage)?;
    let last = {
        let mut meta = txn.open_table(META).map_err(storage)?;
        let applied = match meta.get(WAL_SEQ_KEY).map_err(storage)? {
            Some(v) => u64::from_le_bytes(
                v.value()
                    .try_into()
                    .map_err(|_| Error::Corrupt("the log position record is malformed".into()))?,
            ),
            None => 0,
        };
        let mut tables = LogTables::open(&txn, analyzer)?;
        let mut last = applied;
        for (seq, mutations) in records {
            if seq <= applied {
                continue;
            }
            for m in mutations {
                tables.apply(m)?;
            }
            last = seq;
        }
        meta.insert(WAL_SEQ_KEY, last.to_le_bytes().as_slice())
            .map_err(storage)?;
        last
    };
    txn.commit().map_err(storage)?;
    wal.truncate().map_err(storage)?;
    Ok(last)
}

/// Builds the `users` index from the scope rows once, for a store
/// written before the index existed; later every write keeps it.
fn index_users(db: &Database) -> Result<()> {
    let txn = db.begin_write().map_err(storage)?;
    {
        let mut meta = txn.open_table(META).map_err(storage)?;
        if meta.get(USERS_INDEXED_KEY).map_err(storage)?.is_some() {
            return Ok(());
        }
        let scopes = txn.open_table(SCOPES).map_err(storage)?;
        let mut users = txn.open_table(USERS).map_err(storage)?;
        for item in scopes.iter().map_err(storage)? {
            let (_, v) = item.map_err(storage)?;
            let row = ScopeRow::decode(v.value())?;
            if row.entries > 0 {
                users
                    .insert(user_key(&row.app, &row.user).as_str(), ())
                    .map_err(storage)?;
            }
        }
        meta.insert(USERS_INDEXED_KEY, [1u8].as_slice())
            .map_err(storage)?;
    }
    txn.commit().map_err(storage)
}

/// Records in `erased_ids` (and counts, in their scope rows) the erased
/// entries earlier builds kept only by session (`erased`), once.
fn move_erased_ids(db: &Database) -> Result<()> {
    let txn = db.begin_write().map_err(storage)?;
    {
        let mut meta = txn.open_table(META).map_err(storage)?;
        if meta.get(ERASED_IDS_KEY).map_err(storage)?.is_some() {
            return Ok(());
        }
        let old = txn.open_table(ERASED).map_err(storage)?;
        let mut ids = txn.open_table(ERASED_IDS).map_err(storage)?;
        let mut scopes = txn.open_table(SCOPES).map_err(storage)?;
        let mut added: std::collections::HashMap<[u8; 16], u64> = std::collections::HashMap::new();
        for item in old.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            let k = k.value();
            let mut h = [0u8; 16];
            h.copy_from_slice(&k[..16]);
            let mut key = [0u8; 32];
            key[..16].copy_from_slice(&k[..16]);
            key[16..].copy_from_slice(&k[32..]);
            // The session's record, and the id's when new.
            let n = 1 + u64::from(ids.insert(&key, ()).map_err(storage)?.is_none());
            *added.entry(h).or_default() += n;
        }
        for (h, n) in added {
            let Some(v) = scopes.get(&h).map_err(storage)?.map(|v| v.value().to_vec()) else {
                continue;
            };
            let mut row = ScopeRow::decode(&v)?;
            row.erasures += n;
            scopes
                .insert(&h, row.encode().as_slice())
                .map_err(storage)?;
        }
        meta.insert(ERASED_IDS_KEY, [1u8].as_slice())
            .map_err(storage)?;
    }
    txn.commit().map_err(storage)
}

/// Sums the scope rows into the store-wide counters.
fn count(db: &Database) -> Result<Totals> {
    let txn = db.begin_read().map_err(storage)?;
    let scopes = txn.open_table(SCOPES).map_err(storage)?;
    let mut t = Totals::default();
    for item in scopes.iter().map_err(storage)? {
        let (_, v) = item.map_err(storage)?;
        let row = ScopeRow::decode(v.value())?;
        t.entries += row.entries;
        t.bytes += row.bytes;
        t.scopes += u64::from(row.entries > 0);
    }
    Ok(t)
}

/// One export page of a scope, in key (id) order after `after`.
fn export_page(
    db: &Database,
    scope: &MemoryScope,
    after: Option<EntryId>,
    p: PreparedExport,
    now_ms: u64,
) -> Result<EntryPage> {
    use std::ops::Bound::{Excluded, Included};
    let txn = db.begin_read().map_err(storage)?;
    let entries = txn.open_table(ENTRIES).map_err(storage)?;
    let obligations = txn.open_table(OBLIGATIONS).map_err(storage)?;
    let revisions = txn.open_table(REVISIONS).map_err(storage)?;
    let h = scope_hash(scope);
    let (lo, hi) = entry_range(&h);
    let start = after.map(|id| entry_key(&h, &id));
    let range = match &start {
        Some(k) => entries.range::<&[u8; 32]>((Excluded(k), Included(&hi))),
        None => entries.range::<&[u8; 32]>(&lo..=&hi),
    }
    .map_err(storage)?;
    let mut page = EntryPage::default();
    let mut used = 0u64;
    let mut last = None;
    for item in range {
        let (k, v) = item.map_err(storage)?;
        let rec = EntryRecord::decode(v.value())?;
        let (mut entry, bytes, _) = rec.into_entry(scope)?;
        if let Some(o) = obligations.get(k.value()).map_err(storage)? {
            entry.obligations = decode_obligations(o.value())?;
        }
        if entry.obligations.expired(now_ms) {
            continue;
        }
        (entry.revision, entry.revised_at_ms) = revision_of(&revisions, k.value())?;
        if page.entries.len() == p.limit || (!page.entries.is_empty() && used + bytes > p.max_bytes)
        {
            page.next_cursor = last.map(|id| ExportCursor::Id(id).encode());
            return Ok(page);
        }
        used += bytes;
        last = Some(entry.id);
        page.entries.push(entry);
    }
    Ok(page)
}

/// A live entry with its obligations and revision, as of `txn`.
fn live_entry(
    txn: &redb::ReadTransaction,
    scope: &MemoryScope,
    id: &EntryId,
    now_ms: u64,
) -> Result<MemoryEntry> {
    let key = entry_key(&scope_hash(scope), id);
    let entries = txn.open_table(ENTRIES).map_err(storage)?;
    let Some(v) = entries.get(&key).map_err(storage)? else {
        return Err(Error::NotFound("entry"));
    };
    let rec = EntryRecord::decode(v.value())?;
    let (mut entry, _, _) = rec.into_entry(scope)?;
    if entry.id != *id {
        return Err(Error::Corrupt("entry stored under another id".into()));
    }
    let obligations = txn.open_table(OBLIGATIONS).map_err(storage)?;
    if let Some(v) = obligations.get(&key).map_err(storage)? {
        entry.obligations = decode_obligations(v.value())?;
    }
    if entry.obligations.expired(now_ms) {
        return Err(Error::NotFound("entry"));
    }
    let revisions = txn.open_table(REVISIONS).map_err(storage)?;
    (entry.revision, entry.revised_at_ms) = revision_of(&revisions, &key)?;
    Ok(entry)
}

/// One page of the `users` index in `range`, keys cut by `name`.
fn names_page(
    db: &Database,
    range: (std::ops::Bound<String>, std::ops::Bound<String>),
    p: &hippocamp_memory::list::PreparedNames,
    name: impl Fn(&str) -> Option<String>,
    skip_to: impl Fn(&str) -> Option<String>,
) -> Result<NamePage> {
    use std::ops::Bound::{Excluded, Included};
    let txn = db.begin_read().map_err(storage)?;
    let users = txn.open_table(USERS).map_err(storage)?;
    let mut names = Vec::new();
    let (mut from, to) = range;
    // One seek per name: after a name, the walk jumps past the rest of
    // its keys (an app's other users), so a page costs O(page) seeks.
    while names.len() <= p.limit {
        let bounds = (
            from.as_ref().map(String::as_str),
            to.as_ref().map(String::as_str),
        );
        let Some(item) = users.range::<&str>(bounds).map_err(storage)?.next() else {
            break;
        };
        let (k, _) = item.map_err(storage)?;
        let key = k.value().to_owned();
        let Some(n) = name(&key) else {
            break;
        };
        names.push(n);
        from = match skip_to(&key) {
            Some(next) => Included(next),
            None => Excluded(key),
        };
    }
    Ok(p.page(names))
}

/// Reads every record of a scope into a fresh [`ScopeData`].
fn load_scope(
    db: &Database,
    scope: &MemoryScope,
    passages: hippocamp_search::PassageParams,
) -> Result<ScopeData> {
    let txn = db.begin_read().map_err(storage)?;
    let entries = txn.open_table(ENTRIES).map_err(storage)?;
    let (lo, hi) = entry_range(&scope_hash(scope));
    let mut bound: HashMap<[u8; 32], Obligations> = HashMap::new();
    let obligations = txn.open_table(OBLIGATIONS).map_err(storage)?;
    for item in obligations.range::<&[u8; 32]>(&lo..=&hi).map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        bound.insert(*k.value(), decode_obligations(v.value())?);
    }
    // The last kept revision of each corrected entry is its current one.
    let mut revised: HashMap<[u8; 32], (u32, u64)> = HashMap::new();
    let revisions = txn.open_table(REVISIONS).map_err(storage)?;
    let (rlo, rhi) = revision_range(&scope_hash(scope));
    for item in revisions.range::<&[u8; 36]>(&rlo..=&rhi).map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let rec = crate::format::RevisionRecord::decode(v.value())?;
        let mut key = [0u8; 32];
        key.copy_from_slice(&k.value()[..32]);
        let mut rev = [0u8; 4];
        rev.copy_from_slice(&k.value()[32..]);
        revised.insert(key, (u32::from_be_bytes(rev), rec.written_at_ms));
    }
    let mut data = ScopeData::with_passages(passages);
    for item in entries.range::<&[u8; 32]>(&lo..=&hi).map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let rec = EntryRecord::decode(v.value())?;
        let (mut entry, bytes, terms) = rec.into_entry(scope)?;
        if let Some(o) = bound.remove(k.value()) {
            entry.obligations = o;
        }
        if let Some((rev, at)) = revised.remove(k.value()) {
            entry.revision = rev;
            entry.revised_at_ms = Some(at);
        }
        data.insert(entry, bytes, &terms);
    }
    let vectors = txn.open_table(VECTORS).map_err(storage)?;
    for item in vectors.range::<&[u8; 32]>(&lo..=&hi).map_err(storage)? {
        let (k, v) = item.map_err(storage)?;
        let mut id = [0u8; 16];
        id.copy_from_slice(&k.value()[16..]);
        data.insert_vector(EntryId::from_bytes(id), &decode_vector(v.value())?);
    }
    Ok(data)
}

/// The scope's erasure epoch as of `txn` (0 for a scope never written).
fn scope_epoch(txn: &redb::ReadTransaction, scope: &MemoryScope) -> Result<u64> {
    let scopes = txn.open_table(SCOPES).map_err(storage)?;
    match scopes.get(&scope_hash(scope)).map_err(storage)? {
        None => Ok(0),
        Some(v) => {
            let row = ScopeRow::decode(v.value())?;
            if row.app != scope.app().as_str() || row.user != scope.user().as_str() {
                return Err(Error::Corrupt("scope key collision".into()));
            }
            Ok(row.epoch)
        }
    }
}

#[async_trait]
impl MemoryStore for RedbMemoryStore {
    fn capabilities(&self) -> Capabilities {
        let mut c = self.config.capabilities("redb", true);
        hippocamp_memory::embedding::describe(&mut c, self.embedder.as_deref());
        let (default, min, max) = SCOPE_CACHE_BYTES;
        c.limits.push(hippocamp_core::limits::LimitInfo {
            name: "scope_cache_bytes".into(),
            value: self.cache.max_bytes(),
            default,
            min,
            max,
            description: "bytes of scopes' search state kept in memory (charged at their entries' storage bytes plus 1,000 an entry); least recently used scopes are released beyond it".into(),
            configurable: true,
        });
        let (default, min, max) = DB_CACHE_BYTES;
        c.limits.push(hippocamp_core::limits::LimitInfo {
            name: "db_cache_bytes".into(),
            value: self.db_cache_bytes,
            default,
            min,
            max,
            description:
                "bytes of the database's page cache and write buffer (filled as pages are used)"
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
        let prepared = prepare_entry(scope, entry, &self.config.limits)?;
        let embedder = self.embedder.as_deref();
        // Embedded before the write is queued, so the vector commits with
        // it; not when this keyed entry is already stored (a duplicate or a
        // conflict either way).
        if embedder.is_some() && prepared.keyed {
            self.settled(deadline).await?;
        }
        let known = embedder.is_some()
            && prepared.keyed
            && self
                .stored(scope, [prepared.entry.id])?
                .contains_key(&prepared.entry.id);
        let mut vector = None;
        if !known {
            vector = embed_passages(embedder, &[&prepared.entry.content], deadline)
                .await?
                .pop();
        }
        // Decided just before the write is queued (after any embedding):
        // with no write running or queued, this call will most likely
        // commit its own group, and it is acknowledged unanalysed (the
        // applier and the cache's reader analyse it, see `writer`). With
        // writes queued it is analysed here, in parallel with them, so the
        // applier and the readers are not handed a group's texts to
        // analyse one after another.
        let terms =
            (!self.committer.idle()).then(|| self.analyzer.analyze(&prepared.entry.content));
        let submit =
            |prepared: PreparedEntry, terms: Option<TermFreqs>, vector: Option<Vec<f32>>| {
                let scope = scope.clone();
                let mut admit = Admission::new(opts, embedder.is_some(), deadline);
                admit.now_ms = self.clock.now_ms();
                self.submit(move |reply| Op::AddEntry {
                    scope,
                    prepared: Box::new(prepared),
                    terms,
                    vector,
                    admit,
                    reply,
                })
            };
        if embedder.is_none() {
            return match submit(prepared, terms, None).await? {
                Embedded::Done(out) => Ok(out),
                Embedded::NeedVectors => Err(changed_while_embedding()),
            };
        }
        for _ in 0..EMBED_ATTEMPTS {
            match submit(prepared.clone(), terms.clone(), vector.take()).await? {
                Embedded::Done(out) => return Ok(out),
                // Stored when looked at, gone when committed: embed it.
                Embedded::NeedVectors => {
                    vector = embed_passages(embedder, &[&prepared.entry.content], deadline)
                        .await?
                        .pop();
                }
            }
        }
        Err(changed_while_embedding())
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let deadline = self.deadline(&opts.call);
        // A large batch is prepared on two threads: its inserts are applied
        // on the applier's, so preparation is what the caller waits for.
        let (plan, terms) =
            prepare_events(scope, session, events, &self.config.limits, &self.analyzer)?;
        let embedder = self.embedder.as_deref();
        let decide = |stored: &Stored, p: &PreparedEntry| {
            if stored.erased.contains(&p.entry.id) {
                return Decision::Erased;
            }
            match stored.entries.get(&p.entry.id) {
                None => Decision::New,
                Some(e) if e.is_resubmission(&p.entry) => Decision::Duplicate,
                Some(_) => Decision::Conflict,
            }
        };
        // Only what would be new is embedded (not what the scope holds).
        let mut vectors = HashMap::new();
        if embedder.is_some() {
            self.settled(deadline).await?;
            let stored = self.planned(scope, &plan)?;
            let need = plan.new_indices(|p| decide(&stored, p));
            vectors = embed_plan(embedder, &plan, &need, deadline).await?;
        }
        let submit = |plan: EventPlan, terms: PlanTerms, vectors| {
            let scope = scope.clone();
            let admit = Admission::of_session(opts, session, embedder.is_some(), deadline);
            self.submit(move |reply| Op::AddEvents {
                scope,
                plan,
                terms,
                vectors,
                admit,
                reply,
            })
        };
        if embedder.is_none() {
            return match submit(plan, terms, vectors).await? {
                Embedded::Done(report) => Ok(report),
                Embedded::NeedVectors => Err(changed_while_embedding()),
            };
        }
        for _ in 0..EMBED_ATTEMPTS {
            match submit(plan.clone(), terms.clone(), vectors.clone()).await? {
                Embedded::Done(report) => return Ok(report),
                // Stored when looked at, gone when committed: embed those.
                Embedded::NeedVectors => {
                    self.settled(deadline).await?;
                    let stored = self.planned(scope, &plan)?;
                    let missing: Vec<usize> = plan
                        .new_indices(|p| decide(&stored, p))
                        .into_iter()
                        .filter(|i| !vectors.contains_key(i))
                        .collect();
                    vectors.extend(embed_plan(embedder, &plan, &missing, deadline).await?);
                }
            }
        }
        Err(changed_while_embedding())
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        let deadline = self.deadline(opts);
        let mut prepared = prepare_search(request, &self.config, &self.analyzer)?;
        let mode = hippocamp_memory::search::resolve_mode(prepared.mode, self.embedder.is_some())?;
        let query_vector = hippocamp_memory::embedding::embed_query(
            self.embedder.as_deref(),
            mode,
            &request.query,
            deadline,
        )
        .await?;
        let slot = self.slot_by(scope, deadline).await?;
        let data = self.read_by(&slot, deadline).await?;
        prepared.now_ms = self.clock.now_ms();
        Ok(match &query_vector {
            None => data.search(&prepared, self.config.bm25),
            Some(v) => {
                data.search_vectors(&prepared, mode, v, self.config.bm25, &self.config.fusion)
            }
        })
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let txn = self.db.begin_read().map_err(storage)?;
        let entry = live_entry(&txn, scope, id, self.clock.now_ms())?;
        // Its state depends on other entries: read from the scope's
        // cached copy only when something could make it other than current.
        let derived = match txn
            .open_table(SCOPES)
            .map_err(storage)?
            .get(&scope_hash(scope))
            .map_err(storage)?
        {
            Some(v) => ScopeRow::decode(v.value())?.derived,
            None => 0,
        };
        if derived == 0 && entry.fact_key.is_none() {
            return Ok(entry);
        }
        drop(txn);
        let slot = self.slot_by(scope, deadline).await?;
        let data = self.read_by(&slot, deadline).await?;
        let state = data.state_of(id, self.clock.now_ms());
        Ok(entry.with_state(state))
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::lineage::Lineage> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let slot = self.slot_by(scope, deadline).await?;
        let data = self.read_by(&slot, deadline).await?;
        data.lineage_of(id, self.clock.now_ms())
            .ok_or(Error::NotFound("entry"))
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let at = self.moment(opts);
        let (scope, id) = (scope.clone(), *id);
        self.submit(|reply| Op::DeleteEntry {
            scope,
            id,
            at,
            reply,
        })
        .await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let at = self.moment(opts);
        let (scope, session) = (scope.clone(), session.clone());
        self.submit(|reply| Op::DeleteSession {
            scope,
            session,
            at,
            reply,
        })
        .await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let at = self.moment(opts);
        let scope = scope.clone();
        self.submit(|reply| Op::DeleteUser { scope, at, reply })
            .await
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let txn = self.db.begin_read().map_err(storage)?;
        scope_epoch(&txn, scope)
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let txn = self.db.begin_read().map_err(storage)?;
        let epoch = scope_epoch(&txn, scope)?;
        let key = session_epoch_key(&scope_hash(scope), &session_hash(session));
        let session_epoch = match txn
            .open_table(SESSION_EPOCHS)
            .map_err(storage)?
            .get(&key)
            .map_err(storage)?
        {
            Some(v) => decode_session_epoch(v.value())?.0,
            None => 0,
        };
        Ok(ErasureFence {
            epoch,
            session_epoch,
        })
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let deadline = self.deadline(opts);
        let prepared = prepare_list(request, &self.config.limits)?;
        let slot = self.slot_by(scope, deadline).await?;
        let data = self.read_by(&slot, deadline).await?;
        Ok(list_page(&data, &prepared, self.clock.now_ms()))
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &ExportRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        let p = prepare_export(request, &self.config.limits)?;
        let after = match p.after {
            None => None,
            Some(ExportCursor::Id(id)) => Some(id),
            Some(ExportCursor::Time(..)) => {
                return Err(Error::invalid(
                    hippocamp_core::Field::Cursor,
                    hippocamp_core::Problem::Malformed("not a cursor this store made".into()),
                ));
            }
        };
        self.settled(deadline).await?;
        let (db, scope, now) = (Arc::clone(&self.db), scope.clone(), self.clock.now_ms());
        // Straight from the tables, one bounded page per read transaction:
        // the scope's search state is neither needed nor loaded.
        tokio::task::spawn_blocking(move || export_page(&db, &scope, after, p, now))
            .await
            .map_err(|e| Error::Unavailable(format!("export failed: {e}")))?
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        let max = check_sweep_batch(max)?;
        let at = self.moment(opts);
        let spare = spare.iter().map(scope_hash).collect();
        self.submit(|reply| Op::Sweep {
            max,
            spare,
            at,
            reply,
        })
        .await
    }

    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        let at = self.moment(&opts.call);
        let update = check_update(update.clone(), &self.config.limits)?;
        let terms = self.analyzer.analyze(&update.content);
        let vector = embed_passages(self.embedder.as_deref(), &[&update.content], at.deadline)
            .await?
            .pop();
        let (scope, id, fence) = (scope.clone(), *id, opts.epoch);
        let granted = opts.obligations_for(&update.metadata);
        self.submit(|reply| Op::UpdateEntry {
            scope,
            id,
            update: Box::new(update),
            terms,
            vector,
            fence,
            granted,
            at,
            reply,
        })
        .await
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let txn = self.db.begin_read().map_err(storage)?;
        let entry = live_entry(&txn, scope, id, self.clock.now_ms())?;
        let revisions = txn.open_table(REVISIONS).map_err(storage)?;
        let mut kept = revisions_of(&revisions, scope, &entry_key(&scope_hash(scope), id))?;
        if kept.is_empty() {
            kept.push(Revision::of(&entry));
        }
        kept.reverse();
        Ok(kept)
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        let at = self.moment(&opts.call);
        let prepared = prepare_import(scope, entries, &self.config.limits)?;
        let texts: Vec<&str> = prepared
            .iter()
            .filter(|p| !p.entry.obligations.expired(at.now_ms))
            .map(|p| p.entry.content.as_str())
            .collect();
        // Embedded before the write, as for any new entry; a duplicate's
        // vector is simply not used (a restore is rare).
        let mut vectors = embed_passages(self.embedder.as_deref(), &texts, at.deadline)
            .await?
            .into_iter();
        let items = prepared
            .into_iter()
            .map(|p| {
                let terms = self.analyzer.analyze(&p.entry.content);
                let v = if p.entry.obligations.expired(at.now_ms) {
                    None
                } else {
                    vectors.next()
                };
                (p, terms, v)
            })
            .collect();
        let (scope, fence) = (scope.clone(), opts.epoch);
        self.submit(|reply| Op::ImportEntries {
            scope,
            items,
            fence,
            at,
            reply,
        })
        .await
    }

    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &ErasureRequest,
        opts: &CallOptions,
    ) -> Result<ErasurePage> {
        let deadline = self.deadline(opts);
        let (after, limit) = request.prepare(self.config.limits.max_page_entries)?;
        self.settled(deadline).await?;
        let txn = self.db.begin_read().map_err(storage)?;
        let h = scope_hash(scope);
        let mut ids = Vec::new();
        if !matches!(after, Some(ErasureCursor::Session(_))) {
            use std::ops::Bound::{Excluded, Included};
            let (lo, hi) = entry_range(&h);
            let from = match &after {
                Some(ErasureCursor::Entry(id)) => Excluded(entry_key(&h, id)),
                _ => Included(lo),
            };
            let table = txn.open_table(ERASED_IDS).map_err(storage)?;
            let range = (from.as_ref(), Included(&hi));
            for item in table.range::<&[u8; 32]>(range).map_err(storage)? {
                let (k, _) = item.map_err(storage)?;
                let mut id = [0u8; 16];
                id.copy_from_slice(&k.value()[16..]);
                ids.push(EntryId::from_bytes(id));
                if ids.len() > limit {
                    break;
                }
            }
        }
        let mut sessions = Vec::new();
        if ids.len() <= limit {
            let (lo, hi) = entry_range(&h);
            let table = txn.open_table(SESSION_EPOCHS).map_err(storage)?;
            for item in table.range::<&[u8; 32]>(&lo..=&hi).map_err(storage)? {
                let (_, v) = item.map_err(storage)?;
                let (epoch, session) = decode_session_epoch(v.value())?;
                sessions.push((session, epoch));
            }
            // Keyed by hash: put in id order for the page.
            sessions.sort_unstable();
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
        let at = self.moment(opts);
        let scope = scope.clone();
        let erasures = Box::new(erasures.clone());
        self.submit(|reply| Op::ImportErasures {
            scope,
            erasures,
            at,
            reply,
        })
        .await
    }

    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        use std::ops::Bound::{Included, Unbounded};
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let p = prepare_names(request, &self.config.limits)?;
        // Every key of an app sorts between `app\0` and `app\u{1}`.
        let from = match &p.after {
            Some(app) => Included(format!("{app}\u{1}")),
            None => Unbounded,
        };
        names_page(
            &self.db,
            (from, Unbounded),
            &p,
            |k| k.split_once('\0').map(|(a, _)| a.to_owned()),
            |k| k.split_once('\0').map(|(a, _)| format!("{a}\u{1}")),
        )
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        use std::ops::Bound::{Excluded, Included};
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        self.settled(deadline).await?;
        let p = prepare_names(request, &self.config.limits)?;
        let from = match &p.after {
            Some(user) => Excluded(user_key(app.as_str(), user)),
            None => Included(user_key(app.as_str(), "")),
        };
        let to = Excluded(format!("{}\u{1}", app.as_str()));
        let prefix = user_key(app.as_str(), "");
        names_page(
            &self.db,
            (from, to),
            &p,
            |k| k.strip_prefix(prefix.as_str()).map(str::to_owned),
            |_| None,
        )
    }

    async fn status(&self) -> Result<StoreStatus> {
        let totals = *self.totals.lock();
        Ok(StoreStatus {
            backend: "redb".to_owned(),
            durable: true,
            scopes: totals.scopes,
            entries: totals.entries,
            bytes: totals.bytes,
            router: None,
        })
    }

    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        self.preload(scope).await
    }

    fn release_scope(&self, scope: &MemoryScope) {
        RedbMemoryStore::release_scope(self, scope);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use hippocamp_memory::event::Event;
    use hippocamp_memory::{ImportedEntry, MemoryEntry, WriteOptions};

    /// A store written by a build that kept erased entries only by
    /// session: opened now, those entries are recorded by id once (a
    /// restore does not bring them back) and counted in their scope row;
    /// a second open changes nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn erased_entries_of_earlier_builds_are_recorded_by_id_once() {
        let dir = tempfile::tempdir().unwrap();
        let scope = MemoryScope::parse("app", "u").unwrap();
        let session = SessionId::new("s").unwrap();
        let c = CallOptions::default();
        let erased: MemoryEntry = {
            let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
            let events = [Event::text("e1", "user", 1, "an old fact")];
            let r = store
                .add_events(&scope, &session, &events, &WriteOptions::default())
                .await
                .unwrap();
            let e = store
                .get_entry(&scope, &r.added[0].entry_id, &c)
                .await
                .unwrap();
            store.delete_session(&scope, &session, &c).await.unwrap();
            e
        };
        // Back to what an earlier build left: no id records, no count.
        {
            let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            {
                txn.open_table(ERASED_IDS)
                    .unwrap()
                    .retain(|_, ()| false)
                    .unwrap();
                txn.open_table(META)
                    .unwrap()
                    .remove(ERASED_IDS_KEY)
                    .unwrap();
                let mut scopes = txn.open_table(SCOPES).unwrap();
                let h = scope_hash(&scope);
                let mut row = ScopeRow::decode(scopes.get(&h).unwrap().unwrap().value()).unwrap();
                assert!(row.erasures >= 2, "{row:?}");
                row.erasures = 0;
                scopes.insert(&h, row.encode().as_slice()).unwrap();
            }
            txn.commit().unwrap();
        }
        for _ in 0..2 {
            let store = RedbMemoryStore::open(dir.path(), MemoryConfig::default()).unwrap();
            let page = store
                .export_erasures(&scope, &ErasureRequest::default(), &c)
                .await
                .unwrap();
            assert_eq!(page.records.entries, vec![erased.id]);
            let r = store
                .import_entries(
                    &scope,
                    &[ImportedEntry {
                        entry: erased.clone(),
                        history: Vec::new(),
                    }],
                    &WriteOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!((r.erased, r.imported), (1, 0));
            drop(store);
            let db = redb::Database::open(dir.path().join(DB_FILE)).unwrap();
            let txn = db.begin_read().unwrap();
            let scopes = txn.open_table(SCOPES).unwrap();
            let row = ScopeRow::decode(scopes.get(&scope_hash(&scope)).unwrap().unwrap().value())
                .unwrap();
            // The session's record and the id's.
            assert_eq!(row.erasures, 2);
        }
    }
}
