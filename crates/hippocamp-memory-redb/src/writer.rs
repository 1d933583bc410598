//! The writer: every mutation goes through it, and concurrent mutations
//! share one transaction and one fsync (group commit, driven by
//! `hippocamp_durable::group`).
//!
//! A group is everything queued (up to [`MAX_GROUP`]) applied to one write
//! transaction and committed once. Each operation is checked (epoch fence, duplicates,
//! quotas, then its deadline, immediately before it writes) against the
//! transaction as the earlier operations of the group left it, and either
//! writes or fails on its own without touching the others. A storage
//! failure aborts the whole group and every operation in it fails. Replies
//! are sent only after the commit returned, and after the committed changes
//! were handed to the scope cache, so an acknowledged write is durable and
//! visible to the caller's next read.
//!
//! An add that arrives without its terms (the store sends a lone add so)
//! is acknowledged before it is analysed: in a staged group its record is
//! logged unanalysed ([`Mutation::PutEntryText`]), the applier analyses it
//! before it writes the database, and the cache's change carries no terms
//! (its next reader analyses it, see [`crate::cache`]); in a direct group
//! it is analysed before it is written.

use std::collections::HashMap;
use std::sync::Arc;

use hippocamp_core::{
    Deadline, EntryId, Error, MemoryLimits, MemoryScope, QuotaLimit, SessionId, Stage,
};
use hippocamp_memory::entry::{
    EntryUpdate, PreparedEntry, Revision, UpdateOutcome, apply_update, check_deletes, check_revise,
    stored_bytes,
};
use hippocamp_memory::erasure::{ErasureImport, ImportedErasures, check_import_epoch};
use hippocamp_memory::event::{Decision, EventPlan, IngestReport, PlanTerms};
use hippocamp_memory::import::{ImportReport, PreparedImport};
use hippocamp_memory::mem::check_epoch;
use hippocamp_memory::quota::check_scope_quota;
use hippocamp_memory::{AddOutcome, Erasure, MemoryEntry, Obligations, Sweep, WriteOptions};
use hippocamp_search::{Analyzer, TermFreqs};
use std::cell::OnceCell;

use redb::{
    Database, Durability, ReadOnlyTable, ReadTransaction, ReadableDatabase, ReadableTable, Table,
    TableDefinition,
};
use tokio::sync::oneshot;

use crate::cache::{CacheOp, Inserted, ScopeCache};
use crate::format::{
    ENTRIES, ERASED, ERASED_IDS, EXPIRY, EntryRecord, LineageRecord, META, Mutation, OBLIGATIONS,
    REVISIONS, RevisionRecord, SCOPES, SESSION_EPOCHS, SESSIONS, ScopeRow, Totals, USERS, VECTORS,
    WAL_SEQ_KEY, decode_obligations, decode_session_epoch, encode_entry, encode_obligations,
    encode_session_epoch, encode_vector, entry_key, entry_range, expiry_key, log_record,
    revision_key, revision_of, revision_range, scope_hash, session_epoch_key, session_hash,
    session_key, session_range, user_key,
};
use crate::pipeline::{Applier, MAX_PENDING_BYTES, MAX_PENDING_GROUPS, Overlay, Progress};
use hippocamp_durable::WalStorage;

/// Committed changes, by scope key, for the cache.
type Changes = Vec<([u8; 16], CacheOp)>;

/// Most operations committed together.
pub(crate) const MAX_GROUP: usize = 256;

/// What an ingesting write did: committed, or nothing because an entry it
/// would add has no vector (the store embeds only what it saw missing;
/// one that vanished meanwhile is embedded and the write submitted again).
#[derive(Debug)]
pub(crate) enum Embedded<T> {
    Done(T),
    NeedVectors,
}

/// How an ingesting write was admitted.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    /// The erasure epoch it carries, if any.
    pub(crate) fence: Option<u64>,
    /// The session and the erasure epoch of it the write carries, if any
    /// (`add_events`).
    pub(crate) session_fence: Option<(SessionId, u64)>,
    /// The store embeds: a new entry without a vector is not written.
    pub(crate) embeds: bool,
    pub(crate) deadline: Deadline,
    /// What the new entries of the write carry.
    pub(crate) obligations: WriteOptions,
    /// The moment a derived entry's sources must be live at.
    pub(crate) now_ms: u64,
}

impl Admission {
    /// An ingestion of `session`'s events called with `opts`: its epochs
    /// (the scope's and the session's) the fence.
    pub(crate) fn of_session(
        opts: &WriteOptions,
        session: &SessionId,
        embeds: bool,
        deadline: Deadline,
    ) -> Self {
        Self {
            session_fence: opts.session_epoch.map(|e| (session.clone(), e)),
            ..Self::new(opts, embeds, deadline)
        }
    }

    /// A write called with `opts`, its epoch the fence.
    pub(crate) fn new(opts: &WriteOptions, embeds: bool, deadline: Deadline) -> Self {
        Self {
            fence: opts.epoch,
            session_fence: None,
            embeds,
            deadline,
            obligations: opts.clone(),
            now_ms: hippocamp_core::time::now_ms(),
        }
    }
}

/// A queued mutation with its reply channel.
pub(crate) enum Op {
    AddEntry {
        scope: MemoryScope,
        prepared: Box<PreparedEntry>,
        /// `None`: the writer analyses the text (after logging it, when
        /// the add is staged).
        terms: Option<TermFreqs>,
        vector: Option<Vec<f32>>,
        admit: Admission,
        reply: oneshot::Sender<hippocamp_core::Result<Embedded<AddOutcome>>>,
    },
    AddEvents {
        scope: MemoryScope,
        plan: EventPlan,
        terms: PlanTerms,
        vectors: HashMap<usize, Vec<f32>>,
        admit: Admission,
        reply: oneshot::Sender<hippocamp_core::Result<Embedded<IngestReport>>>,
    },
    DeleteEntry {
        scope: MemoryScope,
        id: EntryId,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<u64>>,
    },
    DeleteSession {
        scope: MemoryScope,
        session: SessionId,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<u64>>,
    },
    DeleteUser {
        scope: MemoryScope,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<Erasure>>,
    },
    Sweep {
        max: usize,
        /// Hashes of the scopes whose entries stay.
        spare: std::collections::HashSet<[u8; 16]>,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<Sweep>>,
    },
    UpdateEntry {
        scope: MemoryScope,
        id: EntryId,
        update: Box<EntryUpdate>,
        terms: TermFreqs,
        vector: Option<Vec<f32>>,
        fence: Option<u64>,
        /// The obligations the policy gives the new metadata.
        granted: Obligations,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<UpdateOutcome>>,
    },
    ImportEntries {
        scope: MemoryScope,
        items: Vec<(PreparedImport, TermFreqs, Option<Vec<f32>>)>,
        fence: Option<u64>,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<ImportReport>>,
    },
    ImportErasures {
        scope: MemoryScope,
        erasures: Box<ImportedErasures>,
        at: Moment,
        reply: oneshot::Sender<hippocamp_core::Result<ErasureImport>>,
    },
}

impl Op {
    /// Whether it only adds (and so may be staged).
    fn is_add(&self) -> bool {
        matches!(self, Op::AddEntry { .. } | Op::AddEvents { .. })
    }
}

/// When a deletion runs: its deadline, and the wall-clock moment its
/// retention and expiry checks use (read from the store's clock when the
/// operation was submitted).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moment {
    pub(crate) deadline: Deadline,
    pub(crate) now_ms: u64,
}

/// Why an operation did not write: its own problem, or the transaction's.
enum Fail {
    Op(Error),
    Txn(Error),
}

impl From<redb::StorageError> for Fail {
    fn from(e: redb::StorageError) -> Self {
        Fail::Txn(Error::storage(e))
    }
}

trait OpResult<T> {
    /// A failure before the operation wrote anything: it fails alone.
    fn op(self) -> Result<T, Fail>;
    /// A failure after the operation began writing: the group aborts, so a
    /// half-applied operation is never committed.
    fn txn(self) -> Result<T, Fail>;
}

impl<T> OpResult<T> for hippocamp_core::Result<T> {
    fn op(self) -> Result<T, Fail> {
        self.map_err(Fail::Op)
    }
    fn txn(self) -> Result<T, Fail> {
        self.map_err(Fail::Txn)
    }
}

/// An operation's reply, held until the group commits.
// Replies live only in one group's vector until it commits; boxing the
// largest would add an allocation per write for no measurable saving.
#[allow(clippy::large_enum_variant)]
enum Reply {
    Add(
        oneshot::Sender<hippocamp_core::Result<Embedded<AddOutcome>>>,
        hippocamp_core::Result<Embedded<AddOutcome>>,
    ),
    Events(
        oneshot::Sender<hippocamp_core::Result<Embedded<IngestReport>>>,
        hippocamp_core::Result<Embedded<IngestReport>>,
    ),
    Count(
        oneshot::Sender<hippocamp_core::Result<u64>>,
        hippocamp_core::Result<u64>,
    ),
    Erased(
        oneshot::Sender<hippocamp_core::Result<Erasure>>,
        hippocamp_core::Result<Erasure>,
    ),
    Swept(
        oneshot::Sender<hippocamp_core::Result<Sweep>>,
        hippocamp_core::Result<Sweep>,
    ),
    Updated(
        oneshot::Sender<hippocamp_core::Result<UpdateOutcome>>,
        hippocamp_core::Result<UpdateOutcome>,
    ),
    Imported(
        oneshot::Sender<hippocamp_core::Result<ImportReport>>,
        hippocamp_core::Result<ImportReport>,
    ),
    ErasuresImported(
        oneshot::Sender<hippocamp_core::Result<ErasureImport>>,
        hippocamp_core::Result<ErasureImport>,
    ),
}

impl Reply {
    fn fail_if_ok(&mut self, e: &Error) {
        match self {
            Reply::Add(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Events(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Count(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Erased(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Swept(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Updated(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Imported(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::ErasuresImported(_, r @ Ok(_)) => *r = Err(e.clone()),
            _ => {}
        }
    }

    fn send(self) {
        // A caller that went away no longer wants the answer.
        match self {
            Reply::Add(tx, r) => drop(tx.send(r)),
            Reply::Events(tx, r) => drop(tx.send(r)),
            Reply::Count(tx, r) => drop(tx.send(r)),
            Reply::Erased(tx, r) => drop(tx.send(r)),
            Reply::Swept(tx, r) => drop(tx.send(r)),
            Reply::Updated(tx, r) => drop(tx.send(r)),
            Reply::Imported(tx, r) => drop(tx.send(r)),
            Reply::ErasuresImported(tx, r) => drop(tx.send(r)),
        }
    }
}

/// Where a group's reads and writes go.
enum Tables<'t> {
    /// A write transaction: any operation, once the applier has caught up.
    Direct(Box<Direct<'t>>),
    /// A snapshot of what the applier has applied under what logged groups
    /// not yet applied and this group wrote: adds only (see
    /// [`crate::pipeline`]).
    Staged(Box<Staged<'t>>),
}

/// Every table, in a write transaction.
struct Direct<'t> {
    scopes: Table<'t, &'static [u8; 16], &'static [u8]>,
    entries: Table<'t, &'static [u8; 32], &'static [u8]>,
    sessions: Table<'t, &'static [u8; 48], ()>,
    vectors: Table<'t, &'static [u8; 32], &'static [u8]>,
    erased: Table<'t, &'static [u8; 48], ()>,
    erased_ids: Table<'t, &'static [u8; 32], ()>,
    obligations: Table<'t, &'static [u8; 32], &'static [u8]>,
    expiry: Table<'t, &'static [u8; 40], ()>,
    revisions: Table<'t, &'static [u8; 36], &'static [u8]>,
    users: Table<'t, &'static str, ()>,
    session_epochs: Table<'t, &'static [u8; 32], &'static [u8]>,
    /// Analyses the text of an add that came without its terms (a staged
    /// group logs it unanalysed instead).
    analyzer: &'t Analyzer,
}

/// What an add reads, as of a read snapshot, under two overlays. The
/// snapshot is begun, and its tables opened, on first use: a single add
/// reads one or two tables, often answered by the overlays alone, and
/// beginning a snapshot and opening a table each cost about a microsecond.
/// A snapshot begun later than the overlay was pruned is no older than
/// the prune, so what the overlay forgot it holds.
struct Staged<'t> {
    db: &'t Database,
    scopes: OnceCell<ReadOnlyTable<&'static [u8; 16], &'static [u8]>>,
    entries: OnceCell<ReadOnlyTable<&'static [u8; 32], &'static [u8]>>,
    erased: OnceCell<ReadOnlyTable<&'static [u8; 48], ()>>,
    session_epochs: OnceCell<ReadOnlyTable<&'static [u8; 32], &'static [u8]>>,
    obligations: OnceCell<ReadOnlyTable<&'static [u8; 32], &'static [u8]>>,
    revisions: OnceCell<ReadOnlyTable<&'static [u8; 36], &'static [u8]>>,
    /// After the tables, so they are dropped first.
    txn: OnceCell<ReadTransaction>,
    /// Logged groups not yet applied.
    pending: &'t Overlay,
    /// This group.
    group: Overlay,
}

/// `cell`'s table, opened in `s`'s snapshot on first use.
fn table<'c, K: redb::Key + 'static, V: redb::Value + 'static>(
    cell: &'c OnceCell<ReadOnlyTable<K, V>>,
    s: &Staged<'_>,
    def: redb::TableDefinition<K, V>,
) -> Result<&'c ReadOnlyTable<K, V>, Fail> {
    if cell.get().is_none() {
        let t = s
            .snapshot()?
            .open_table(def)
            .map_err(|e| Fail::Txn(Error::storage(e)))?;
        let _ = cell.set(t);
    }
    cell.get()
        .ok_or_else(|| Fail::Txn(Error::Unavailable("a table could not be opened".into())))
}

impl Staged<'_> {
    /// The read snapshot, begun on first use.
    fn snapshot(&self) -> Result<&ReadTransaction, Fail> {
        if self.txn.get().is_none() {
            let t = self
                .db
                .begin_read()
                .map_err(|e| Fail::Txn(Error::storage(e)))?;
            let _ = self.txn.set(t);
        }
        self.txn.get().ok_or_else(|| {
            Fail::Txn(Error::Unavailable(
                "a read snapshot could not be begun".into(),
            ))
        })
    }

    /// A value of the overlays, newest first, else of the snapshot.
    fn read<const N: usize>(
        &self,
        pick: impl Fn(&Overlay) -> &foldhash::HashMap<[u8; N], (u64, Vec<u8>)>,
        def: TableDefinition<&'static [u8; N], &'static [u8]>,
        cell: &OnceCell<ReadOnlyTable<&'static [u8; N], &'static [u8]>>,
        key: &[u8; N],
    ) -> Result<Option<Vec<u8>>, Fail> {
        self.read_with(pick, def, cell, key, <[u8]>::to_vec)
    }

    /// [`Self::read`], handing `f` the value where it is rather than a
    /// copy.
    fn read_with<const N: usize, R>(
        &self,
        pick: impl Fn(&Overlay) -> &foldhash::HashMap<[u8; N], (u64, Vec<u8>)>,
        def: TableDefinition<&'static [u8; N], &'static [u8]>,
        cell: &OnceCell<ReadOnlyTable<&'static [u8; N], &'static [u8]>>,
        key: &[u8; N],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, Fail> {
        for o in [&self.group, self.pending] {
            if let Some((_, v)) = pick(o).get(key) {
                return Ok(Some(f(v)));
            }
        }
        Ok(table(cell, self, def)?.get(key)?.map(|v| f(v.value())))
    }
}

/// The session hash under which restored erasure records sit in `erased`:
/// no session's hash (a SHA-256 prefix) is all ones in practice, and one
/// that were would only skip what an export said was erased.
const ANY_SESSION: [u8; 16] = [0xFF; 16];

/// An operation that only runs on a write transaction met a staged group:
/// the writer routes every such operation to a direct one, so this is a
/// bug, and the group fails rather than write half of it.
fn not_direct() -> Fail {
    Fail::Txn(Error::Unavailable(
        "the memory writer staged an operation that needs a write transaction".into(),
    ))
}

struct Tx<'t> {
    t: Tables<'t>,
    totals: Totals,
    limits: &'t MemoryLimits,
    changes: Changes,
    /// Every write, in order, for the log record.
    log: Vec<Mutation>,
    /// The session whose key hash was last computed, with that hash.
    last_session: Option<(SessionId, [u8; 16])>,
}

impl<'t> Tx<'t> {
    fn direct(
        txn: &'t redb::WriteTransaction,
        totals: Totals,
        limits: &'t MemoryLimits,
        analyzer: &'t Analyzer,
    ) -> hippocamp_core::Result<Self> {
        let d = Direct {
            scopes: txn.open_table(SCOPES).map_err(Error::storage)?,
            entries: txn.open_table(ENTRIES).map_err(Error::storage)?,
            sessions: txn.open_table(SESSIONS).map_err(Error::storage)?,
            vectors: txn.open_table(VECTORS).map_err(Error::storage)?,
            erased: txn.open_table(ERASED).map_err(Error::storage)?,
            erased_ids: txn.open_table(ERASED_IDS).map_err(Error::storage)?,
            obligations: txn.open_table(OBLIGATIONS).map_err(Error::storage)?,
            expiry: txn.open_table(EXPIRY).map_err(Error::storage)?,
            revisions: txn.open_table(REVISIONS).map_err(Error::storage)?,
            users: txn.open_table(USERS).map_err(Error::storage)?,
            session_epochs: txn.open_table(SESSION_EPOCHS).map_err(Error::storage)?,
            analyzer,
        };
        Ok(Self::with(Tables::Direct(Box::new(d)), totals, limits))
    }

    fn staged(
        db: &'t Database,
        pending: &'t Overlay,
        totals: Totals,
        limits: &'t MemoryLimits,
    ) -> Self {
        let s = Staged {
            db,
            txn: OnceCell::new(),
            scopes: OnceCell::new(),
            entries: OnceCell::new(),
            erased: OnceCell::new(),
            session_epochs: OnceCell::new(),
            obligations: OnceCell::new(),
            revisions: OnceCell::new(),
            pending,
            group: Overlay::default(),
        };
        Self::with(Tables::Staged(Box::new(s)), totals, limits)
    }

    fn with(t: Tables<'t>, totals: Totals, limits: &'t MemoryLimits) -> Self {
        Tx {
            t,
            totals,
            limits,
            changes: Vec::new(),
            log: Vec::new(),
            last_session: None,
        }
    }

    /// The write transaction's tables (operations other than adds).
    fn d(&mut self) -> Result<&mut Direct<'t>, Fail> {
        match &mut self.t {
            Tables::Direct(d) => Ok(d),
            Tables::Staged(_) => Err(not_direct()),
        }
    }

    /// The write transaction's tables, to read.
    fn dr(&self) -> Result<&Direct<'t>, Fail> {
        match &self.t {
            Tables::Direct(d) => Ok(d),
            Tables::Staged(_) => Err(not_direct()),
        }
    }

    fn row(&self, h: &[u8; 16], scope: &MemoryScope) -> Result<ScopeRow, Fail> {
        let decoded = |v: &[u8]| ScopeRow::decode(v);
        let found = match &self.t {
            Tables::Direct(d) => d.scopes.get(h)?.map(|v| decoded(v.value())),
            Tables::Staged(s) => s.read_with(|o| &o.scopes, SCOPES, &s.scopes, h, decoded)?,
        };
        match found.transpose().op()? {
            None => Ok(ScopeRow::new(scope)),
            Some(row) => {
                if row.app != scope.app().as_str() || row.user != scope.user().as_str() {
                    return Err(Fail::Op(Error::Corrupt("scope key collision".into())));
                }
                Ok(row)
            }
        }
    }

    fn put_row(&mut self, h: &[u8; 16], row: &ScopeRow) -> Result<(), Fail> {
        let bytes = row.encode();
        match &mut self.t {
            Tables::Direct(d) => drop(d.scopes.insert(h, bytes.as_slice())?),
            Tables::Staged(s) => drop(s.group.scopes.insert(*h, (0, bytes.clone()))),
        }
        self.log.push(Mutation::PutScope(h.to_vec(), bytes));
        Ok(())
    }

    fn existing(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        id: &EntryId,
    ) -> Result<Option<MemoryEntry>, Fail> {
        Ok(self.existing_counted(h, scope, id)?.map(|(e, _)| e))
    }

    /// [`Self::existing`] with the bytes its record was counted at.
    fn existing_counted(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        id: &EntryId,
    ) -> Result<Option<(MemoryEntry, u64)>, Fail> {
        let key = entry_key(h, id);
        let found = match &self.t {
            Tables::Direct(d) => d.entries.get(&key)?.map(|v| v.value().to_vec()),
            Tables::Staged(s) => s.read(|o| &o.entries, ENTRIES, &s.entries, &key)?,
        };
        match found {
            None => Ok(None),
            Some(v) => {
                let rec = EntryRecord::decode(&v).op()?;
                let (mut entry, bytes, _) = rec.into_entry(scope).op()?;
                entry.obligations = self.obligations_of(&key)?;
                (entry.revision, entry.revised_at_ms) = match &self.t {
                    Tables::Direct(d) => revision_of(&d.revisions, &key),
                    // Only corrections and imports write revisions, and
                    // they never run staged: the snapshot has them all.
                    Tables::Staged(s) => revision_of(table(&s.revisions, s, REVISIONS)?, &key),
                }
                .op()?;
                Ok(Some((entry, bytes)))
            }
        }
    }

    /// The obligations stored for an entry (none when it has no row).
    fn obligations_of(&self, key: &[u8; 32]) -> Result<Obligations, Fail> {
        let found = match &self.t {
            Tables::Direct(d) => d.obligations.get(key)?.map(|v| v.value().to_vec()),
            Tables::Staged(s) => s.read(|o| &o.obligations, OBLIGATIONS, &s.obligations, key)?,
        };
        match found {
            None => Ok(Obligations::default()),
            Some(v) => decode_obligations(&v).op(),
        }
    }

    /// Whether deleting the entries under `keys` at `now_ms` is allowed.
    fn check_deletes(&self, keys: &[[u8; 32]], now_ms: u64) -> Result<(), Fail> {
        let mut found = Vec::new();
        for k in keys {
            if let Some(v) = self.dr()?.obligations.get(k)? {
                found.push(decode_obligations(v.value()).op()?);
            }
        }
        check_deletes(&found, now_ms).op()
    }

    fn check_global(&self, entries: u64, bytes: u64) -> Result<(), Fail> {
        if self.totals.entries + entries > self.limits.max_entries_total {
            return Err(Fail::Op(Error::QuotaExceeded {
                limit: QuotaLimit::EntriesTotal(self.limits.max_entries_total),
            }));
        }
        if self.totals.bytes + bytes > self.limits.max_bytes_total {
            return Err(Fail::Op(Error::QuotaExceeded {
                limit: QuotaLimit::BytesTotal(self.limits.max_bytes_total),
            }));
        }
        Ok(())
    }

    /// Writes one new entry and counts it; the caller checked quotas.
    /// Returns the entry as written (its epoch set), owned by the change
    /// handed to the cache: a caller that answers with it clones it.
    ///
    /// Without `terms`, a staged entry is logged unanalysed
    /// ([`Mutation::PutEntryText`]) and handed to the cache without terms;
    /// a direct one is analysed here.
    fn insert(
        &mut self,
        h: &[u8; 16],
        row: &mut ScopeRow,
        mut entry: MemoryEntry,
        bytes: u64,
        terms: Option<TermFreqs>,
        vector: Option<Vec<f32>>,
    ) -> Result<&MemoryEntry, Fail> {
        entry.epoch = row.epoch;
        let terms = match (terms, &self.t) {
            (None, Tables::Direct(d)) => Some(d.analyzer.analyze(&entry.content)),
            (t, _) => t,
        };
        let unanalysed = TermFreqs::default();
        let rec = encode_entry(&entry, bytes, terms.as_ref().unwrap_or(&unanalysed)).txn()?;
        let key = entry_key(h, &entry.id);
        match &mut self.t {
            Tables::Direct(d) => drop(d.entries.insert(&key, rec.as_slice())?),
            Tables::Staged(s) => drop(s.group.entries.insert(key, (0, rec.clone()))),
        }
        self.log.push(match terms {
            Some(_) => Mutation::PutEntry(key.to_vec(), rec),
            None => Mutation::PutEntryText(key.to_vec(), rec),
        });
        if let Some(v) = &vector {
            let bytes = encode_vector(v);
            if let Tables::Direct(d) = &mut self.t {
                d.vectors.insert(&key, bytes.as_slice())?;
            }
            self.log.push(Mutation::PutVector(key.to_vec(), bytes));
        }
        if let Some(s) = &entry.provenance.session_id {
            let key = session_key(h, &self.session_hash(s), &entry.id);
            if let Tables::Direct(d) = &mut self.t {
                d.sessions.insert(&key, ())?;
            }
            self.log.push(Mutation::PutSession(key.to_vec()));
        }
        if !entry.obligations.is_empty() {
            let bytes = encode_obligations(&entry.obligations).txn()?;
            match &mut self.t {
                Tables::Direct(d) => drop(d.obligations.insert(&key, bytes.as_slice())?),
                Tables::Staged(s) => drop(s.group.obligations.insert(key, (0, bytes.clone()))),
            }
            self.log.push(Mutation::PutObligations(key.to_vec(), bytes));
            if let Some(at) = entry.obligations.expires_at_ms {
                let k = expiry_key(at, &key);
                if let Tables::Direct(d) = &mut self.t {
                    d.expiry.insert(&k, ())?;
                }
                self.log.push(Mutation::PutExpiry(k.to_vec()));
            }
        }
        if row.entries == 0 {
            self.totals.scopes += 1;
            self.index_user(row, true)?;
        }
        if entry.is_derived() {
            row.derived += 1;
        }
        row.entries += 1;
        row.bytes += bytes;
        self.totals.entries += 1;
        self.totals.bytes += bytes;
        self.changes.push((
            *h,
            CacheOp::Insert(Box::new(Inserted {
                entry,
                bytes,
                terms,
                vector,
            })),
        ));
        match self.changes.last() {
            Some((_, CacheOp::Insert(b))) => Ok(&b.entry),
            _ => Err(Fail::Txn(Error::Corrupt(
                "an inserted entry is missing from its changes".into(),
            ))),
        }
    }

    /// The key hash of `session`; a batch's entries share their session,
    /// so the last one is remembered.
    fn session_hash(&mut self, session: &SessionId) -> [u8; 16] {
        match &self.last_session {
            Some((s, h)) if s == session => *h,
            _ => {
                let h = session_hash(session);
                self.last_session = Some((session.clone(), h));
                h
            }
        }
    }

    /// Removes one entry if present; returns whether it was.
    fn remove(
        &mut self,
        h: &[u8; 16],
        scope: &MemoryScope,
        row: &mut ScopeRow,
        id: &EntryId,
    ) -> Result<bool, Fail> {
        let key = entry_key(h, id);
        let rec: EntryRecord = match self.dr()?.entries.get(&key)? {
            None => return Ok(false),
            Some(v) => EntryRecord::decode(v.value()).txn()?,
        };
        if rec.app != scope.app().as_str() || rec.user != scope.user().as_str() {
            return Err(Fail::Txn(Error::Corrupt("entry key collision".into())));
        }
        let obligations = self.obligations_of(&key)?;
        self.d()?.entries.remove(&key)?;
        self.log.push(Mutation::DelEntry(key.to_vec()));
        if self.d()?.vectors.remove(&key)?.is_some() {
            self.log.push(Mutation::DelVector(key.to_vec()));
        }
        if !obligations.is_empty() {
            self.d()?.obligations.remove(&key)?;
            self.log.push(Mutation::DelObligations(key.to_vec()));
            if let Some(at) = obligations.expires_at_ms {
                let k = expiry_key(at, &key);
                self.d()?.expiry.remove(&k)?;
                self.log.push(Mutation::DelExpiry(k.to_vec()));
            }
        }
        if let Some(s) = &rec.session_id {
            let s = SessionId::new(s.as_str()).txn()?;
            let key = session_key(h, &session_hash(&s), id);
            self.d()?.sessions.remove(&key)?;
            self.log.push(Mutation::DelSession(key.to_vec()));
            self.remember_erased_of_session(&key, row)?;
        }
        self.remember_erased(&key, row)?;
        self.drop_revisions(&key)?;
        if rec.lineage.as_ref().is_some_and(LineageRecord::is_derived) {
            row.derived = row.derived.saturating_sub(1);
        }
        row.entries = row.entries.saturating_sub(1);
        row.bytes = row.bytes.saturating_sub(rec.storage_bytes);
        if row.entries == 0 {
            self.totals.scopes = self.totals.scopes.saturating_sub(1);
            self.index_user(row, false)?;
        }
        self.totals.entries = self.totals.entries.saturating_sub(1);
        self.totals.bytes = self.totals.bytes.saturating_sub(rec.storage_bytes);
        self.changes.push((*h, CacheOp::Remove(*id)));
        Ok(true)
    }

    /// Replaces an entry's stored obligations (and its place in the
    /// expiry index), in a direct transaction.
    fn replace_obligations(
        &mut self,
        key: &[u8; 32],
        old: Obligations,
        new: Obligations,
    ) -> Result<(), Fail> {
        if let Some(at) = old.expires_at_ms {
            let k = expiry_key(at, key);
            self.d()?.expiry.remove(&k)?;
            self.log.push(Mutation::DelExpiry(k.to_vec()));
        }
        if new.is_empty() {
            self.d()?.obligations.remove(key)?;
            self.log.push(Mutation::DelObligations(key.to_vec()));
            return Ok(());
        }
        let bytes = encode_obligations(&new).txn()?;
        self.d()?.obligations.insert(key, bytes.as_slice())?;
        self.log.push(Mutation::PutObligations(key.to_vec(), bytes));
        if let Some(at) = new.expires_at_ms {
            let k = expiry_key(at, key);
            self.d()?.expiry.insert(&k, ())?;
            self.log.push(Mutation::PutExpiry(k.to_vec()));
        }
        Ok(())
    }

    /// Adds a scope to the `users` index (`present`) or removes it.
    fn index_user(&mut self, row: &ScopeRow, present: bool) -> Result<(), Fail> {
        let key = user_key(&row.app, &row.user);
        if present {
            if let Tables::Direct(d) = &mut self.t {
                d.users.insert(key.as_str(), ())?;
            }
            self.log.push(Mutation::PutUser(key));
        } else {
            self.d()?.users.remove(key.as_str())?;
            self.log.push(Mutation::DelUser(key));
        }
        Ok(())
    }

    /// Deletes every kept revision under `prefix` (an entry's key, or a
    /// scope's hash), logging only when there was one.
    fn drop_revisions(&mut self, prefix: &[u8]) -> Result<(), Fail> {
        let (lo, hi) = revision_range(prefix);
        if self
            .dr()?
            .revisions
            .range::<&[u8; 36]>(&lo..=&hi)?
            .next()
            .is_none()
        {
            return Ok(());
        }
        self.d()?
            .revisions
            .retain_in::<&[u8; 36], _>(&lo..=&hi, |_, _| false)?;
        self.log
            .push(Mutation::DelRevisionsIn(lo.to_vec(), hi.to_vec()));
        Ok(())
    }

    /// Stores one revision of the entry under `key`.
    fn put_revision(
        &mut self,
        scope: &MemoryScope,
        key: &[u8; 32],
        r: &Revision,
    ) -> Result<(), Fail> {
        let k = revision_key(key, r.revision);
        let v = RevisionRecord::new(scope, r).txn()?.encode().txn()?;
        self.d()?.revisions.insert(&k, v.as_slice())?;
        self.log.push(Mutation::PutRevision(k.to_vec(), v));
        Ok(())
    }

    /// The erasure epoch of the session hashed `sh` in the scope hashed
    /// `h` (0 until its first erasure). Only session erasures write it,
    /// and they never run staged: the snapshot has them all.
    fn session_epoch(&self, h: &[u8; 16], sh: &[u8; 16]) -> Result<u64, Fail> {
        let key = session_epoch_key(h, sh);
        let found = match &self.t {
            Tables::Direct(d) => d
                .session_epochs
                .get(&key)?
                .map(|v| decode_session_epoch(v.value())),
            Tables::Staged(s) => table(&s.session_epochs, s, SESSION_EPOCHS)?
                .get(&key)?
                .map(|v| decode_session_epoch(v.value())),
        };
        Ok(found.transpose().txn()?.map_or(0, |(e, _)| e))
    }

    /// Sets `session`'s erasure epoch to `epoch` (a new record in `row`
    /// when it had none).
    fn set_session_epoch(
        &mut self,
        h: &[u8; 16],
        session: &SessionId,
        epoch: u64,
        row: &mut ScopeRow,
    ) -> Result<(), Fail> {
        let key = session_epoch_key(h, &session_hash(session));
        let v = encode_session_epoch(epoch, session);
        if self
            .d()?
            .session_epochs
            .insert(&key, v.as_slice())?
            .is_none()
        {
            row.erasures += 1;
        }
        self.log.push(Mutation::PutSessionEpoch(key.to_vec(), v));
        Ok(())
    }

    /// Advances the session's erasure epoch, in the erasure's own
    /// transaction.
    fn advance_session_epoch(
        &mut self,
        h: &[u8; 16],
        session: &SessionId,
        row: &mut ScopeRow,
    ) -> Result<(), Fail> {
        let next = self.session_epoch(h, &session_hash(session))? + 1;
        self.set_session_epoch(h, session, next, row)
    }

    /// Remembers an erased entry of a session (its session-index key): an
    /// event of that session that would make it again is skipped.
    fn remember_erased_of_session(
        &mut self,
        key: &[u8; 48],
        row: &mut ScopeRow,
    ) -> Result<(), Fail> {
        if self.d()?.erased.insert(key, ())?.is_none() {
            row.erasures += 1;
        }
        self.log.push(Mutation::PutErased(key.to_vec()));
        Ok(())
    }

    /// Remembers an erased entry (its `entries` key), counting a new
    /// record in its scope's row: a restore does not bring it back.
    fn remember_erased(&mut self, key: &[u8; 32], row: &mut ScopeRow) -> Result<(), Fail> {
        if self.d()?.erased_ids.insert(key, ())?.is_none() {
            row.erasures += 1;
        }
        self.log.push(Mutation::PutErasedId(key.to_vec()));
        Ok(())
    }

    /// Whether the entry under `key` was erased (a restore's check). Only
    /// erasures and imports write records, and they never run staged.
    fn was_erased(&self, key: &[u8; 32]) -> Result<bool, Fail> {
        Ok(self.dr()?.erased_ids.get(key)?.is_some())
    }

    /// Admits a derived entry (see `ScopeData::admit_derived`): every
    /// source live at `now_ms`, and no longer-lived than the shortest-lived.
    fn admit_derived(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        entry: &mut MemoryEntry,
        now_ms: u64,
    ) -> Result<(), Fail> {
        let mut sources = Vec::with_capacity(entry.derived_from.len());
        for s in &entry.derived_from {
            let live = self
                .existing(h, scope, &s.entry)?
                .filter(|e| !e.obligations.expired(now_ms));
            let Some(source) = live else {
                return Err(Fail::Op(Error::SourceGone(s.entry)));
            };
            sources.push(source.obligations.expires_at_ms);
        }
        entry.obligations.expires_at_ms =
            hippocamp_memory::lineage::inherited_expiry(entry.obligations.expires_at_ms, sources);
        Ok(())
    }

    /// Whether every source of `entry` is live at `now_ms`: kept by the
    /// same import, or held by the scope (see `import::sources_present`).
    fn sources_live(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        entry: &MemoryEntry,
        kept: &std::collections::HashSet<EntryId>,
        now_ms: u64,
    ) -> Result<bool, Fail> {
        for s in &entry.derived_from {
            if kept.contains(&s.entry) {
                continue;
            }
            let live = self
                .existing(h, scope, &s.entry)?
                .is_some_and(|e| !e.obligations.expired(now_ms));
            if !live {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `ids` and every entry derived from them, directly or not (see
    /// [`Self::derived_of`]).
    fn with_dependents(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        row: &ScopeRow,
        ids: Vec<EntryId>,
    ) -> Result<Vec<EntryId>, Fail> {
        let derived = self.derived_of(h, scope, row)?;
        Ok(closure(&derived, ids))
    }

    /// Each source's derived entries in the scope. A scope with derived
    /// entries is read whole to find them (its row counts them; most
    /// scopes have none and pay nothing), once per operation.
    fn derived_of(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        row: &ScopeRow,
    ) -> Result<HashMap<EntryId, Vec<EntryId>>, Fail> {
        let mut derived: HashMap<EntryId, Vec<EntryId>> = HashMap::new();
        if row.derived == 0 {
            return Ok(derived);
        }
        let (lo, hi) = entry_range(h);
        for item in self.dr()?.entries.range::<&[u8; 32]>(&lo..=&hi)? {
            let (_, v) = item?;
            let rec = EntryRecord::decode(v.value()).txn()?;
            if rec.app != scope.app().as_str() || rec.user != scope.user().as_str() {
                return Err(Fail::Txn(Error::Corrupt("entry key collision".into())));
            }
            if let Some(l) = rec.lineage.as_ref().filter(|l| l.is_derived()) {
                for s in l.sources() {
                    derived
                        .entry(s)
                        .or_default()
                        .push(EntryId::from_bytes(rec.id));
                }
            }
        }
        Ok(derived)
    }

    /// What ingesting `p` would do against the transaction's state (`erasures`:
    /// whether the scope holds erasure records at all).
    fn decide(
        &mut self,
        h: &[u8; 16],
        scope: &MemoryScope,
        p: &PreparedEntry,
        erasures: bool,
    ) -> Result<Decision, Fail> {
        if let (Some(s), true) = (&p.entry.provenance.session_id, erasures) {
            // Erased from this session, or (restored from an export) from
            // any. Only erasures and imports write these, and they never
            // run staged: the snapshot has them all.
            let keys = [
                session_key(h, &self.session_hash(s), &p.entry.id),
                session_key(h, &ANY_SESSION, &p.entry.id),
            ];
            for key in &keys {
                let erased = match &self.t {
                    Tables::Direct(d) => d.erased.get(key)?.is_some(),
                    Tables::Staged(s) => table(&s.erased, s, ERASED)?.get(key)?.is_some(),
                };
                if erased {
                    return Ok(Decision::Erased);
                }
            }
        }
        Ok(match self.existing(h, scope, &p.entry.id)? {
            None => Decision::New,
            Some(e) if e.is_resubmission(&p.entry) => Decision::Duplicate,
            Some(_) => Decision::Conflict,
        })
    }

    fn add_entry(
        &mut self,
        scope: &MemoryScope,
        prepared: PreparedEntry,
        terms: Option<TermFreqs>,
        vector: Option<Vec<f32>>,
        admit: Admission,
    ) -> Result<Embedded<AddOutcome>, Fail> {
        let Admission {
            fence,
            embeds,
            deadline,
            obligations,
            now_ms,
            ..
        } = admit;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        let mut prepared = prepared;
        let redacted = std::mem::take(&mut prepared.redacted);
        prepared.entry.obligations = obligations.obligations_for(&prepared.entry.metadata);
        self.admit_derived(&h, scope, &mut prepared.entry, now_ms)?;
        if prepared.keyed
            && let Some(existing) = self.existing(&h, scope, &prepared.entry.id)?
        {
            return if existing.is_resubmission(&prepared.entry) {
                Ok(Embedded::Done(AddOutcome {
                    entry: existing,
                    duplicate: true,
                    redacted,
                }))
            } else {
                Err(Fail::Op(Error::IdempotencyConflict(prepared.entry.id)))
            };
        }
        if embeds && vector.is_none() {
            return Ok(Embedded::NeedVectors);
        }
        let bytes = stored_bytes(prepared.storage_bytes, vector.as_deref());
        check_scope_quota(self.limits, row.entries, row.held_bytes(), 1, bytes).op()?;
        self.check_global(1, bytes)?;
        deadline.check(Stage::Commit).op()?;
        let entry = self
            .insert(&h, &mut row, prepared.entry, bytes, terms, vector)?
            .clone();
        self.put_row(&h, &row)?;
        Ok(Embedded::Done(AddOutcome {
            entry,
            duplicate: false,
            redacted,
        }))
    }

    fn add_events(
        &mut self,
        scope: &MemoryScope,
        plan: EventPlan,
        mut terms: PlanTerms,
        mut vectors: HashMap<usize, Vec<f32>>,
        admit: Admission,
    ) -> Result<Embedded<IngestReport>, Fail> {
        let Admission {
            fence,
            session_fence,
            embeds,
            deadline,
            obligations,
            ..
        } = admit;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        if let Some((session, admitted)) = session_fence {
            let sh = self.session_hash(&session);
            check_epoch(Some(admitted), self.session_epoch(&h, &sh)?).op()?;
        }
        let mut failure = None;
        // A scope without erasure records has no erased entry to look up.
        let erasures = row.erasures > 0;
        let (new, report) = plan.resolve(|p| match self.decide(&h, scope, p, erasures) {
            Ok(d) => d,
            Err(f) => {
                failure.get_or_insert(f);
                Decision::Conflict
            }
        });
        if let Some(f) = failure {
            return Err(f);
        }
        if embeds && new.iter().any(|p| !vectors.contains_key(&p.index)) {
            return Ok(Embedded::NeedVectors);
        }
        let bytes_of = |p: &hippocamp_memory::event::PlannedEntry| {
            stored_bytes(
                p.prepared.storage_bytes,
                vectors.get(&p.index).map(Vec::as_slice),
            )
        };
        let add_bytes: u64 = new.iter().map(bytes_of).sum();
        let add_entries = new.len() as u64;
        check_scope_quota(
            self.limits,
            row.entries,
            row.held_bytes(),
            add_entries,
            add_bytes,
        )
        .op()?;
        self.check_global(add_entries, add_bytes)?;
        deadline.check(Stage::Commit).op()?;
        let sized: Vec<_> = new.into_iter().map(|p| (bytes_of(&p), p)).collect();
        for (bytes, p) in sized {
            let t = terms.take(p.index);
            let v = vectors.remove(&p.index);
            let mut entry = p.prepared.entry;
            entry.obligations = obligations.obligations_for(&entry.metadata);
            self.insert(&h, &mut row, entry, bytes, Some(t), v)?;
        }
        self.put_row(&h, &row)?;
        Ok(Embedded::Done(report))
    }

    fn delete_entry(&mut self, scope: &MemoryScope, id: &EntryId, at: Moment) -> Result<u64, Fail> {
        at.deadline.check(Stage::Commit).op()?;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        if self.dr()?.entries.get(&entry_key(&h, id))?.is_none() {
            return Ok(0);
        }
        // The entry and everything derived from it, in one transaction.
        let ids = self.with_dependents(&h, scope, &row, vec![*id])?;
        let keys: Vec<[u8; 32]> = ids.iter().map(|id| entry_key(&h, id)).collect();
        self.check_deletes(&keys, at.now_ms)?;
        let mut n = 0;
        for id in &ids {
            if self.remove(&h, scope, &mut row, id)? {
                n += 1;
            }
        }
        self.put_row(&h, &row)?;
        Ok(n)
    }

    fn delete_session(
        &mut self,
        scope: &MemoryScope,
        session: &SessionId,
        at: Moment,
    ) -> Result<u64, Fail> {
        at.deadline.check(Stage::Commit).op()?;
        let h = scope_hash(scope);
        let mut prefix = [0u8; 32];
        prefix[..16].copy_from_slice(&h);
        prefix[16..].copy_from_slice(&session_hash(session));
        let (lo, hi) = session_range(&prefix);
        let mut ids = Vec::new();
        for item in self.dr()?.sessions.range::<&[u8; 48]>(&lo..=&hi)? {
            let (k, _) = item?;
            let mut id = [0u8; 16];
            id.copy_from_slice(&k.value()[32..]);
            ids.push(EntryId::from_bytes(id));
        }
        let mut row = self.row(&h, scope)?;
        let ids = self.with_dependents(&h, scope, &row, ids)?;
        let keys: Vec<[u8; 32]> = ids.iter().map(|id| entry_key(&h, id)).collect();
        self.check_deletes(&keys, at.now_ms)?;
        // Advanced in the same transaction as the deletes (even for a
        // session that holds nothing): a write admitted before this
        // erasure can never land after it commits.
        self.advance_session_epoch(&h, session, &mut row)?;
        let mut n = 0;
        for id in ids {
            if self.remove(&h, scope, &mut row, &id)? {
                n += 1;
            }
        }
        self.put_row(&h, &row)?;
        Ok(n)
    }

    fn delete_user(&mut self, scope: &MemoryScope, at: Moment) -> Result<Erasure, Fail> {
        at.deadline.check(Stage::Commit).op()?;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        let (lo, hi) = entry_range(&h);
        // Every obligation of the scope, checked before anything goes.
        let mut bound = Vec::new();
        for item in self.dr()?.obligations.range::<&[u8; 32]>(&lo..=&hi)? {
            let (k, v) = item?;
            let o: Obligations = decode_obligations(v.value()).op()?;
            bound.push((*k.value(), o));
        }
        check_deletes(bound.iter().map(|(_, o)| o), at.now_ms).op()?;
        for (k, o) in &bound {
            if let Some(at) = o.expires_at_ms {
                let k = expiry_key(at, k);
                self.d()?.expiry.remove(&k)?;
                self.log.push(Mutation::DelExpiry(k.to_vec()));
            }
        }
        if !bound.is_empty() {
            self.d()?
                .obligations
                .retain_in::<&[u8; 32], _>(&lo..=&hi, |_, _| false)?;
            self.log
                .push(Mutation::DelObligationsIn(lo.to_vec(), hi.to_vec()));
        }
        let mut keys = Vec::new();
        for item in self.dr()?.entries.range::<&[u8; 32]>(&lo..=&hi)? {
            keys.push(*item?.0.value());
        }
        for key in &keys {
            self.remember_erased(key, &mut row)?;
        }
        self.d()?
            .entries
            .retain_in::<&[u8; 32], _>(&lo..=&hi, |_, _| false)?;
        self.log
            .push(Mutation::DelEntries(lo.to_vec(), hi.to_vec()));
        let (slo, shi) = session_range(&h);
        let mut keys = Vec::new();
        for item in self.dr()?.sessions.range::<&[u8; 48]>(&slo..=&shi)? {
            keys.push(*item?.0.value());
        }
        for key in &keys {
            self.remember_erased_of_session(key, &mut row)?;
        }
        self.d()?
            .sessions
            .retain_in::<&[u8; 48], _>(&slo..=&shi, |_, ()| false)?;
        self.log
            .push(Mutation::DelSessions(slo.to_vec(), shi.to_vec()));
        self.d()?
            .vectors
            .retain_in::<&[u8; 32], _>(&lo..=&hi, |_, _| false)?;
        self.log
            .push(Mutation::DelVectors(lo.to_vec(), hi.to_vec()));
        self.drop_revisions(&h)?;
        let removed = row.entries;
        if removed > 0 {
            self.totals.scopes = self.totals.scopes.saturating_sub(1);
            self.index_user(&row, false)?;
        }
        self.totals.entries = self.totals.entries.saturating_sub(row.entries);
        self.totals.bytes = self.totals.bytes.saturating_sub(row.bytes);
        row.entries = 0;
        row.bytes = 0;
        // Advanced in the same transaction as the deletes: a write admitted
        // under the old epoch can never land after this commits.
        row.epoch += 1;
        self.put_row(&h, &row)?;
        self.changes.push((h, CacheOp::Clear));
        Ok(Erasure {
            deleted: removed,
            epoch: row.epoch,
        })
    }
}

impl Tx<'_> {
    /// Removes up to `max` sweepable entries, earliest expiry first.
    fn sweep(
        &mut self,
        max: usize,
        spare: &std::collections::HashSet<[u8; 16]>,
        at: Moment,
    ) -> Result<Sweep, Fail> {
        at.deadline.check(Stage::Commit).op()?;
        let mut hi = [0xffu8; 40];
        hi[..8].copy_from_slice(&at.now_ms.to_be_bytes());
        let lo = [0u8; 40];
        let mut due: Vec<[u8; 32]> = Vec::new();
        let mut more = false;
        for item in self.dr()?.expiry.range::<&[u8; 40]>(&lo..=&hi)? {
            let (k, _) = item?;
            let mut key = [0u8; 32];
            key.copy_from_slice(&k.value()[8..]);
            let mut h = [0u8; 16];
            h.copy_from_slice(&key[..16]);
            if spare.contains(&h) {
                continue;
            }
            // Held or retained entries stay (their expiry key too): they
            // are invisible, and go once nothing guards them.
            if !self.obligations_of(&key)?.sweepable(at.now_ms) {
                continue;
            }
            if due.len() == max {
                more = true;
                break;
            }
            due.push(key);
        }
        let mut by_scope: HashMap<[u8; 16], Vec<EntryId>> = HashMap::new();
        for key in &due {
            let mut h = [0u8; 16];
            h.copy_from_slice(&key[..16]);
            let mut id = [0u8; 16];
            id.copy_from_slice(&key[16..]);
            by_scope.entry(h).or_default().push(EntryId::from_bytes(id));
        }
        let mut deleted = 0;
        for (h, ids) in by_scope {
            let row: ScopeRow = match self.dr()?.scopes.get(&h)? {
                Some(v) => ScopeRow::decode(v.value()).txn()?,
                None => {
                    return Err(Fail::Txn(Error::Corrupt(
                        "an expiring entry has no scope".into(),
                    )));
                }
            };
            let scope = MemoryScope::parse(&row.app, &row.user).txn()?;
            let mut row = self.row(&h, &scope)?;
            // What was derived from an expired entry goes with it, unless
            // a hold or retention on one keeps that lineage until it lifts.
            let mut gone = Vec::new();
            let derived = self.derived_of(&h, &scope, &row)?;
            for id in ids {
                let lineage = closure(&derived, vec![id]);
                let keys: Vec<[u8; 32]> = lineage.iter().map(|id| entry_key(&h, id)).collect();
                if self.check_deletes(&keys, at.now_ms).is_ok() {
                    gone.extend(lineage);
                }
            }
            for id in gone {
                if self.remove(&h, &scope, &mut row, &id)? {
                    deleted += 1;
                }
            }
            self.put_row(&h, &row)?;
        }
        Ok(Sweep { deleted, more })
    }

    /// Writes a correction as the entry's next revision.
    #[allow(clippy::too_many_arguments)] // one operation's parts, unpacked once
    fn update_entry(
        &mut self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        (terms, vector): (TermFreqs, Option<Vec<f32>>),
        fence: Option<u64>,
        granted: Obligations,
        at: Moment,
    ) -> Result<UpdateOutcome, Fail> {
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        let (current, old_bytes) = match self.existing_counted(&h, scope, id)? {
            Some((e, b)) if !e.obligations.expired(at.now_ms) => (e, b),
            _ => return Err(Fail::Op(Error::NotFound("entry"))),
        };
        let Some((entry, bytes)) = apply_update(&current, update, granted, at.now_ms) else {
            return Ok(UpdateOutcome {
                entry: current,
                changed: false,
            });
        };
        check_revise(&current, self.limits.max_revisions, at.now_ms).op()?;
        let key = entry_key(&h, id);
        let bytes = stored_bytes(bytes, vector.as_deref());
        check_scope_quota(
            self.limits,
            row.entries.saturating_sub(1),
            row.held_bytes().saturating_sub(old_bytes),
            1,
            bytes,
        )
        .op()?;
        self.check_global(0, bytes.saturating_sub(old_bytes))?;
        at.deadline.check(Stage::Commit).op()?;
        let rec = encode_entry(&entry, bytes, &terms).txn()?;
        self.d()?.entries.insert(&key, rec.as_slice())?;
        self.log.push(Mutation::PutEntry(key.to_vec(), rec));
        if entry.obligations != current.obligations {
            self.replace_obligations(&key, current.obligations, entry.obligations)?;
        }
        if let Some(v) = &vector {
            let b = encode_vector(v);
            self.d()?.vectors.insert(&key, b.as_slice())?;
            self.log.push(Mutation::PutVector(key.to_vec(), b));
        }
        if current.revision == 1 {
            self.put_revision(scope, &key, &Revision::of(&current))?;
        }
        self.put_revision(scope, &key, &Revision::of(&entry))?;
        let max = u32::try_from(self.limits.max_revisions).unwrap_or(u32::MAX);
        if entry.revision > max {
            let (lo, _) = revision_range(&key);
            let hi = revision_key(&key, entry.revision - max);
            self.d()?
                .revisions
                .retain_in::<&[u8; 36], _>(&lo..=&hi, |_, _| false)?;
            self.log
                .push(Mutation::DelRevisionsIn(lo.to_vec(), hi.to_vec()));
        }
        row.bytes = row.bytes.saturating_sub(old_bytes) + bytes;
        self.totals.bytes = self.totals.bytes.saturating_sub(old_bytes) + bytes;
        self.put_row(&h, &row)?;
        self.changes.push((
            h,
            CacheOp::Insert(Box::new(Inserted {
                entry: entry.clone(),
                bytes,
                terms: Some(terms),
                vector,
            })),
        ));
        Ok(UpdateOutcome {
            entry,
            changed: true,
        })
    }

    /// Restores an export's erasures (see `hippocamp_memory::erasure`).
    fn import_erasures(
        &mut self,
        scope: &MemoryScope,
        erasures: &ImportedErasures,
        at: Moment,
    ) -> Result<ErasureImport, Fail> {
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        let held = row.entries > 0 || row.erasures > 0;
        let adopted_epoch = check_import_epoch(erasures.epoch, row.epoch, held).op()?;
        at.deadline.check(Stage::Commit).op()?;
        if adopted_epoch {
            row.epoch = erasures.epoch;
        }
        let mut added = 0;
        for id in &erasures.records.entries {
            let before = row.erasures;
            self.remember_erased(&entry_key(&h, id), &mut row)?;
            added += row.erasures - before;
            // Erased before the export, from whichever session: an event
            // of any session that would make it again is skipped here too.
            self.remember_erased_of_session(&session_key(&h, &ANY_SESSION, id), &mut row)?;
        }
        for r in &erasures.records.sessions {
            let before = self.session_epoch(&h, &session_hash(&r.session))?;
            if r.epoch > before {
                self.set_session_epoch(&h, &r.session, r.epoch, &mut row)?;
                added += u64::from(before == 0);
            }
        }
        self.put_row(&h, &row)?;
        Ok(ErasureImport {
            adopted_epoch,
            added,
        })
    }

    /// Restores entries under their own ids (see `hippocamp_memory::import`).
    fn import_entries(
        &mut self,
        scope: &MemoryScope,
        items: Vec<(PreparedImport, TermFreqs, Option<Vec<f32>>)>,
        fence: Option<u64>,
        at: Moment,
    ) -> Result<ImportReport, Fail> {
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        let mut report = ImportReport::default();
        let mut new = Vec::new();
        let mut kept = std::collections::HashSet::new();
        for (p, terms, vector) in items {
            let e = &p.entry;
            let erased = self.was_erased(&entry_key(&h, &e.id))?;
            if e.obligations.expired(at.now_ms) {
                report.expired += 1;
            } else if erased {
                report.erased += 1;
            } else if self.dr()?.entries.get(&entry_key(&h, &e.id))?.is_some() {
                report.existing += 1;
                kept.insert(e.id);
            } else if !self.sources_live(&h, scope, e, &kept, at.now_ms)? {
                report.unsourced += 1;
            } else {
                kept.insert(e.id);
                new.push((p, terms, vector));
            }
        }
        let add_bytes: u64 = new
            .iter()
            .map(|(p, _, v)| stored_bytes(p.storage_bytes, v.as_deref()))
            .sum();
        let add_entries = new.len() as u64;
        check_scope_quota(
            self.limits,
            row.entries,
            row.held_bytes(),
            add_entries,
            add_bytes,
        )
        .op()?;
        self.check_global(add_entries, add_bytes)?;
        at.deadline.check(Stage::Commit).op()?;
        for (p, terms, vector) in new {
            let key = entry_key(&h, &p.entry.id);
            for r in &p.history {
                self.put_revision(scope, &key, r)?;
            }
            let bytes = stored_bytes(p.storage_bytes, vector.as_deref());
            self.insert(&h, &mut row, p.entry, bytes, Some(terms), vector)?;
            report.imported += 1;
        }
        if report.imported > 0 {
            self.put_row(&h, &row)?;
        }
        Ok(report)
    }
}

/// `ids` and, through `derived` (each source's derived entries), every
/// entry derived from them; each once, sources first.
fn closure(derived: &HashMap<EntryId, Vec<EntryId>>, mut ids: Vec<EntryId>) -> Vec<EntryId> {
    if derived.is_empty() {
        return ids;
    }
    let mut seen: std::collections::HashSet<EntryId> = ids.iter().copied().collect();
    let mut i = 0;
    while i < ids.len() {
        for d in derived.get(&ids[i]).into_iter().flatten() {
            if seen.insert(*d) {
                ids.push(*d);
            }
        }
        i += 1;
    }
    ids
}

/// Queues the memory store's mutations and commits them in groups.
pub(crate) type Committer = hippocamp_durable::group::Committer<Writer>;

pub(crate) struct Writer {
    pub(crate) db: Arc<Database>,
    pub(crate) cache: Arc<ScopeCache>,
    pub(crate) limits: MemoryLimits,
    pub(crate) wal: Box<dyn WalStorage>,
    /// Sequence number of the last logged group.
    pub(crate) seq: u64,
    pub(crate) since_checkpoint: usize,
    pub(crate) wal_bytes: u64,
    /// Set once the log or the database failed in a way that leaves their
    /// agreement uncertain; every later write is refused until reopen,
    /// which replays the log.
    pub(crate) poisoned: Option<Error>,
    pub(crate) options: crate::store::DurableOptions,
    /// Store-wide counters, in memory only: rebuilt from the scope rows
    /// on open, so no write has to touch a shared counter row.
    pub(crate) totals: Totals,
    /// The counters as of the last commit, for `status`.
    pub(crate) published: Arc<parking_lot::Mutex<Totals>>,
    /// What logged groups not yet applied wrote (only the writer touches
    /// it).
    pending: Overlay,
    pub(crate) progress: Arc<Progress>,
    applier: Applier,
    analyzer: Arc<Analyzer>,
}

impl hippocamp_durable::group::GroupWriter for Writer {
    type Op = Op;

    fn commit_group(&mut self, ops: Vec<Op>) {
        Writer::commit_group(self, ops);
    }

    fn after_group(&mut self) {
        self.maybe_checkpoint();
    }

    fn close(&mut self) {
        if self.poisoned.is_none() && self.since_checkpoint > 0 {
            let _ = self.checkpoint();
        }
        self.applier.stop();
    }
}

/// A staged group's result: its changes, mutations, counters and writes.
struct StagedGroup {
    changes: Changes,
    log: Vec<Mutation>,
    totals: Totals,
    writes: Overlay,
}

impl Writer {
    /// A writer of `db` and `wal` whose last logged group is `seq`, with
    /// its applier started.
    #[allow(clippy::too_many_arguments)] // the store's parts, assembled once
    pub(crate) fn new(
        db: Arc<Database>,
        cache: Arc<ScopeCache>,
        limits: MemoryLimits,
        wal: Box<dyn WalStorage>,
        seq: u64,
        options: crate::store::DurableOptions,
        totals: Totals,
        published: Arc<parking_lot::Mutex<Totals>>,
        analyzer: Arc<Analyzer>,
    ) -> hippocamp_core::Result<Self> {
        let progress = Arc::new(Progress::new(seq));
        let applier = Applier::start(
            Arc::clone(&db),
            Arc::clone(&progress),
            Arc::clone(&analyzer),
        )?;
        Ok(Self {
            db,
            cache,
            limits,
            wal,
            seq,
            since_checkpoint: 0,
            wal_bytes: 0,
            poisoned: None,
            options,
            totals,
            published,
            pending: Overlay::default(),
            progress,
            applier,
            analyzer,
        })
    }

    fn maybe_checkpoint(&mut self) {
        if self.poisoned.is_none()
            && (self.since_checkpoint >= self.options.checkpoint_groups
                || self.wal_bytes >= self.options.checkpoint_bytes)
            && let Err(e) = self.checkpoint()
        {
            // A stalled applier delays the checkpoint to the next group.
            self.poison_unless_stalled(&e);
        }
    }

    /// Waits until the applier holds every logged group, so a write
    /// transaction may be opened here.
    fn drain(&mut self) -> hippocamp_core::Result<()> {
        if let Err(e) = self.progress.drain() {
            self.poison_unless_stalled(&e);
            return Err(e);
        }
        self.pending = Overlay::default();
        Ok(())
    }

    /// Poisons the writer on an applier failure; a stall (`Timeout`: the
    /// applier made no progress for `APPLY_STALL`) only refuses the
    /// operation that waited, since nothing of it was logged.
    fn poison_unless_stalled(&mut self, e: &Error) {
        if !matches!(e, Error::Timeout(_)) {
            self.poisoned = Some(e.clone());
        }
    }

    /// Makes every logged group durable in the database and empties the log.
    fn checkpoint(&mut self) -> hippocamp_core::Result<()> {
        self.drain()?;
        let txn = self.db.begin_write().map_err(Error::storage)?;
        {
            let mut meta = txn.open_table(META).map_err(Error::storage)?;
            meta.insert(WAL_SEQ_KEY, self.seq.to_le_bytes().as_slice())
                .map_err(Error::storage)?;
        }
        txn.commit().map_err(Error::storage)?;
        self.wal.truncate().map_err(Error::storage)?;
        self.since_checkpoint = 0;
        self.wal_bytes = 0;
        Ok(())
    }

    fn commit_group(&mut self, group: Vec<Op>) {
        if self.poisoned.is_none()
            && let Some(e) = self.progress.failure()
        {
            self.poisoned = Some(e);
        }
        if let Some(e) = &self.poisoned {
            let e = Error::Unavailable(format!(
                "the memory store stopped writing after a storage failure ({e}); reopen it"
            ));
            for op in group {
                Self::reply(op, Err(Fail::Txn(e.clone()))).send();
            }
            return;
        }
        // Adds are staged and applied behind the writer; anything else
        // runs on a write transaction once the applier has caught up.
        let staged = group.iter().all(Op::is_add);
        let (mut replies, result) = if staged {
            self.stage_group(group)
        } else {
            match self.drain() {
                Ok(()) => self.apply_group(group),
                Err(e) => (
                    group
                        .into_iter()
                        .map(|op| Self::reply(op, Err(Fail::Txn(e.clone()))))
                        .collect(),
                    Err(e),
                ),
            }
        };
        match result {
            Ok(changes) => self.cache.push(changes),
            Err(e) => {
                for r in &mut replies {
                    r.fail_if_ok(&e);
                }
            }
        }
        for r in replies {
            r.send();
        }
    }

    /// Applies and commits a group on a write transaction; on a storage
    /// failure every reply that was going to succeed is turned into that
    /// failure by the caller.
    fn apply_group(&mut self, group: Vec<Op>) -> (Vec<Reply>, hippocamp_core::Result<Changes>) {
        let mut replies = Vec::with_capacity(group.len());
        let txn = match self.begin() {
            Ok(t) => t,
            Err(err) => {
                for op in group {
                    replies.push(Self::reply(op, Err(Fail::Txn(err.clone()))));
                }
                return (replies, Err(err));
            }
        };
        let seq = self.seq + 1;
        let totals = self.totals;
        let result = (|| -> hippocamp_core::Result<(Changes, Vec<Mutation>, Totals)> {
            let mut tx = Tx::direct(&txn, totals, &self.limits, &self.analyzer)?;
            Self::apply_ops(&mut tx, group, &mut replies)?;
            Ok((tx.changes, tx.log, tx.totals))
        })();
        let result = match result {
            // Nothing written (failures, duplicates): nothing to log.
            Ok((changes, log, _)) if log.is_empty() => {
                drop(txn);
                Ok(changes)
            }
            Ok((changes, log, totals)) => self.log_and_commit(txn, seq, &log).map(|()| {
                self.totals = totals;
                *self.published.lock() = totals;
                changes
            }),
            Err(e) => {
                // Dropping an uncommitted transaction aborts it.
                drop(txn);
                Err(e)
            }
        };
        (replies, result)
    }

    /// Applies `group` to `tx`, one reply each; a storage failure fails
    /// the rest and is returned.
    fn apply_ops(
        tx: &mut Tx<'_>,
        group: Vec<Op>,
        replies: &mut Vec<Reply>,
    ) -> hippocamp_core::Result<()> {
        let mut fatal: Option<Error> = None;
        for op in group {
            if let Some(e) = &fatal {
                replies.push(Self::reply(op, Err(Fail::Txn(e.clone()))));
                continue;
            }
            let reply = Self::apply_op(tx, op, &mut fatal);
            replies.push(reply);
        }
        fatal.map_or(Ok(()), Err)
    }

    /// Decides a group of adds against a snapshot and the overlays, logs
    /// it and hands it to the applier (see [`crate::pipeline`]).
    fn stage_group(&mut self, group: Vec<Op>) -> (Vec<Reply>, hippocamp_core::Result<Changes>) {
        let mut replies = Vec::with_capacity(group.len());
        let staged = self.stage(|tx| Self::apply_ops(tx, group, &mut replies));
        let result = staged.and_then(|g| {
            if !g.log.is_empty() {
                self.log_staged(g.log, g.writes)?;
                self.totals = g.totals;
                *self.published.lock() = g.totals;
            }
            Ok(g.changes)
        });
        (replies, result)
    }

    /// Runs `f` on a staged transaction: a snapshot of what the applier
    /// has applied under the writes of groups it has not.
    fn stage(
        &mut self,
        f: impl FnOnce(&mut Tx<'_>) -> hippocamp_core::Result<()>,
    ) -> hippocamp_core::Result<StagedGroup> {
        // Read before any snapshot is begun: what it covers is applied,
        // so the overlay may forget it (a later group's value stays).
        self.pending.prune(self.progress.applied());
        let mut tx = Tx::staged(&self.db, &self.pending, self.totals, &self.limits);
        f(&mut tx)?;
        let writes = match tx.t {
            Tables::Staged(s) => s.group,
            Tables::Direct(_) => Overlay::default(),
        };
        Ok(StagedGroup {
            changes: tx.changes,
            log: tx.log,
            totals: tx.totals,
            writes,
        })
    }

    /// Logs a staged group durably and hands it to the applier; only then
    /// may it be acknowledged (reads of the database wait for the applier;
    /// the cache is given its changes by the caller).
    ///
    /// Adds logged unanalysed ([`Mutation::PutEntryText`]) are analysed by
    /// the applier, on its own thread, as a replay analyses them: an
    /// acknowledgement waits for the record's sync and nothing else. (They
    /// were analysed between the start of the device's write and the sync
    /// before; that time was added to the sync, not hidden by it: paired
    /// runs of `hippocamp bench durable-write --samples 2000`
    /// (`scripts/paired-durable-write.sh 30 OLD NEW`) gave a median 1.191x
    /// the log floor before and 1.105x after.)
    fn log_staged(&mut self, log: Vec<Mutation>, writes: Overlay) -> hippocamp_core::Result<()> {
        let seq = self.seq + 1;
        let record = log_record(seq, &log).map_err(Error::storage)?;
        let bytes = record.len();
        if let Err(e) = self.progress.wait_for_room(
            MAX_PENDING_GROUPS - 1,
            MAX_PENDING_BYTES.saturating_sub(bytes),
        ) {
            self.poison_unless_stalled(&e);
            return Err(e);
        }
        // Wakes the applier, if this group makes it due, before the write
        // rather than after the sync: it then works while the record is
        // written.
        self.progress.nudge();
        self.append(seq, &record)?;
        self.pending.merge(writes, seq);
        if let Err(e) = self.progress.logged(seq, bytes, log) {
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Writes `entries` into `scope` as one logged group, with none of a
    /// write's checks (no fence, no lookups, no quotas, no deadline): the
    /// floor `hippocamp bench durable-ingest` measures `add_events`
    /// against. Records, log, tables and the applier are the store's own
    /// (the same [`Tx::insert`], staged as an add is), so the floor
    /// differs from a real write only by what makes the write correct.
    pub(crate) fn write_unchecked(
        &mut self,
        scope: &MemoryScope,
        entries: Vec<(MemoryEntry, u64, TermFreqs)>,
    ) -> hippocamp_core::Result<()> {
        let fail = |f: Fail| match f {
            Fail::Op(e) | Fail::Txn(e) => e,
        };
        let StagedGroup {
            changes: _,
            log,
            totals,
            writes,
        } = self.stage(|tx| {
            let h = scope_hash(scope);
            let mut row = tx.row(&h, scope).map_err(fail)?;
            for (entry, bytes, terms) in entries {
                tx.insert(&h, &mut row, entry, bytes, Some(terms), None)
                    .map_err(fail)?;
            }
            tx.put_row(&h, &row).map_err(fail)
        })?;
        self.log_staged(log, writes)?;
        self.totals = totals;
        self.maybe_checkpoint();
        Ok(())
    }

    /// Waits until every logged group is applied (the floor's end).
    pub(crate) fn settle(&mut self) -> hippocamp_core::Result<()> {
        self.drain()
    }

    /// A write transaction whose commit does not fsync: durability comes
    /// from the log, and the database is made durable at checkpoints.
    fn begin(&self) -> hippocamp_core::Result<redb::WriteTransaction> {
        let mut txn = self.db.begin_write().map_err(Error::storage)?;
        txn.set_durability(Durability::None)
            .map_err(Error::storage)?;
        Ok(txn)
    }

    /// Appends record `seq` to the log and syncs it.
    fn append(&mut self, seq: u64, record: &[u8]) -> hippocamp_core::Result<()> {
        self.wal_io(|w| w.append(record).and_then(|()| w.sync()))?;
        self.appended(seq, record.len());
        Ok(())
    }

    /// Runs `io` on the log; a failure stops the writer.
    fn wal_io(
        &mut self,
        io: impl FnOnce(&mut dyn WalStorage) -> std::io::Result<()>,
    ) -> hippocamp_core::Result<()> {
        if let Err(e) = io(&mut *self.wal) {
            // The log's tail is now unknown: stop writing until a reopen
            // replays whatever did reach the disk.
            let e = Error::storage(e);
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// Counts record `seq` of `bytes` as logged and synced.
    fn appended(&mut self, seq: u64, bytes: usize) {
        self.seq = seq;
        self.since_checkpoint += 1;
        self.wal_bytes += bytes as u64;
    }

    /// Logs the group durably, then commits it; only then may it be seen
    /// or acknowledged.
    fn log_and_commit(
        &mut self,
        txn: redb::WriteTransaction,
        seq: u64,
        log: &[Mutation],
    ) -> hippocamp_core::Result<()> {
        let record = log_record(seq, log).map_err(Error::storage)?;
        self.append(seq, &record)?;
        if let Err(e) = txn.commit() {
            // Logged but not applied: a reopen replays it. Until then the
            // store refuses writes rather than serve a view that disagrees
            // with its log.
            let e = Error::Unavailable(format!(
                "a logged write could not be applied ({e}); it is durable and reappears when the store is reopened"
            ));
            self.poisoned = Some(e.clone());
            return Err(e);
        }
        self.progress.committed(seq);
        Ok(())
    }

    fn apply_op(tx: &mut Tx<'_>, op: Op, fatal: &mut Option<Error>) -> Reply {
        match op {
            Op::AddEntry {
                scope,
                prepared,
                terms,
                vector,
                admit,
                reply,
            } => {
                let r = tx.add_entry(&scope, *prepared, terms, vector, admit);
                Self::collect(fatal, r, |r| Reply::Add(reply, r))
            }
            Op::AddEvents {
                scope,
                plan,
                terms,
                vectors,
                admit,
                reply,
            } => {
                let r = tx.add_events(&scope, plan, terms, vectors, admit);
                Self::collect(fatal, r, |r| Reply::Events(reply, r))
            }
            Op::DeleteEntry {
                scope,
                id,
                at,
                reply,
            } => {
                let r = tx.delete_entry(&scope, &id, at);
                Self::collect(fatal, r, |r| Reply::Count(reply, r))
            }
            Op::DeleteSession {
                scope,
                session,
                at,
                reply,
            } => {
                let r = tx.delete_session(&scope, &session, at);
                Self::collect(fatal, r, |r| Reply::Count(reply, r))
            }
            Op::DeleteUser { scope, at, reply } => {
                let r = tx.delete_user(&scope, at);
                Self::collect(fatal, r, |r| Reply::Erased(reply, r))
            }
            Op::Sweep {
                max,
                spare,
                at,
                reply,
            } => {
                let r = tx.sweep(max, &spare, at);
                Self::collect(fatal, r, |r| Reply::Swept(reply, r))
            }
            Op::UpdateEntry {
                scope,
                id,
                update,
                terms,
                vector,
                fence,
                granted,
                at,
                reply,
            } => {
                let r = tx.update_entry(&scope, &id, &update, (terms, vector), fence, granted, at);
                Self::collect(fatal, r, |r| Reply::Updated(reply, r))
            }
            Op::ImportEntries {
                scope,
                items,
                fence,
                at,
                reply,
            } => {
                let r = tx.import_entries(&scope, items, fence, at);
                Self::collect(fatal, r, |r| Reply::Imported(reply, r))
            }
            Op::ImportErasures {
                scope,
                erasures,
                at,
                reply,
            } => {
                let r = tx.import_erasures(&scope, &erasures, at);
                Self::collect(fatal, r, |r| Reply::ErasuresImported(reply, r))
            }
        }
    }

    fn collect<T>(
        fatal: &mut Option<Error>,
        r: Result<T, Fail>,
        wrap: impl FnOnce(hippocamp_core::Result<T>) -> Reply,
    ) -> Reply {
        match r {
            Ok(v) => wrap(Ok(v)),
            Err(Fail::Op(e)) => wrap(Err(e)),
            Err(Fail::Txn(e)) => {
                fatal.get_or_insert_with(|| e.clone());
                wrap(Err(e))
            }
        }
    }

    fn reply(op: Op, r: Result<std::convert::Infallible, Fail>) -> Reply {
        let e = match r {
            Err(Fail::Op(e) | Fail::Txn(e)) => e,
        };
        match op {
            Op::AddEntry { reply, .. } => Reply::Add(reply, Err(e)),
            Op::AddEvents { reply, .. } => Reply::Events(reply, Err(e)),
            Op::DeleteEntry { reply, .. } | Op::DeleteSession { reply, .. } => {
                Reply::Count(reply, Err(e))
            }
            Op::DeleteUser { reply, .. } => Reply::Erased(reply, Err(e)),
            Op::Sweep { reply, .. } => Reply::Swept(reply, Err(e)),
            Op::UpdateEntry { reply, .. } => Reply::Updated(reply, Err(e)),
            Op::ImportEntries { reply, .. } => Reply::Imported(reply, Err(e)),
            Op::ImportErasures { reply, .. } => Reply::ErasuresImported(reply, Err(e)),
        }
    }
}
