//! The writer thread: every mutation goes through it, and concurrent
//! mutations share one transaction and one fsync (group commit).
//!
//! The thread takes the first queued operation, drains whatever else is
//! queued (up to [`MAX_GROUP`]), applies each to one write transaction, and
//! commits once. Each operation is checked (epoch fence, duplicates,
//! quotas, then its deadline, immediately before it writes) against the
//! transaction as the earlier operations of the group left it, and either
//! writes or fails on its own without touching the others. A storage
//! failure aborts the whole group and every operation in it fails. Replies
//! are sent only after the commit returned, and after the committed changes
//! were handed to the scope cache, so an acknowledged write is durable and
//! visible to the caller's next read.

use std::collections::HashMap;
use std::sync::Arc;

use hippocamp_core::{Deadline, EntryId, Error, MemoryLimits, MemoryScope, QuotaLimit, SessionId};
use hippocamp_memory::entry::PreparedEntry;
use hippocamp_memory::event::{Decision, EventPlan, IngestReport};
use hippocamp_memory::mem::check_epoch;
use hippocamp_memory::quota::check_scope_quota;
use hippocamp_memory::{AddOutcome, MemoryEntry};
use hippocamp_search::TermFreqs;
use redb::{Database, ReadableTable, Table};
use tokio::sync::{mpsc, oneshot};

use crate::cache::{CacheOp, ScopeCache};
use crate::format::{
    ENTRIES, EntryRecord, META, SCOPES, SESSIONS, ScopeRow, TOTALS_KEY, Totals, decode, encode,
    entry_key, entry_range, scope_hash, session_hash, session_key, session_range,
};

/// Committed changes, by scope key, for the cache.
type Changes = Vec<([u8; 16], CacheOp)>;

/// Most operations committed together.
pub(crate) const MAX_GROUP: usize = 256;

/// A queued mutation with its reply channel.
pub(crate) enum Op {
    AddEntry {
        scope: MemoryScope,
        prepared: Box<PreparedEntry>,
        terms: TermFreqs,
        fence: Option<u64>,
        deadline: Deadline,
        reply: oneshot::Sender<hippocamp_core::Result<AddOutcome>>,
    },
    AddEvents {
        scope: MemoryScope,
        plan: EventPlan,
        terms: HashMap<usize, TermFreqs>,
        fence: Option<u64>,
        deadline: Deadline,
        reply: oneshot::Sender<hippocamp_core::Result<IngestReport>>,
    },
    DeleteEntry {
        scope: MemoryScope,
        id: EntryId,
        deadline: Deadline,
        reply: oneshot::Sender<hippocamp_core::Result<u64>>,
    },
    DeleteSession {
        scope: MemoryScope,
        session: SessionId,
        deadline: Deadline,
        reply: oneshot::Sender<hippocamp_core::Result<u64>>,
    },
    DeleteUser {
        scope: MemoryScope,
        deadline: Deadline,
        reply: oneshot::Sender<hippocamp_core::Result<u64>>,
    },
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
enum Reply {
    Add(
        oneshot::Sender<hippocamp_core::Result<AddOutcome>>,
        hippocamp_core::Result<AddOutcome>,
    ),
    Events(
        oneshot::Sender<hippocamp_core::Result<IngestReport>>,
        hippocamp_core::Result<IngestReport>,
    ),
    Count(
        oneshot::Sender<hippocamp_core::Result<u64>>,
        hippocamp_core::Result<u64>,
    ),
}

impl Reply {
    fn fail_if_ok(&mut self, e: &Error) {
        match self {
            Reply::Add(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Events(_, r @ Ok(_)) => *r = Err(e.clone()),
            Reply::Count(_, r @ Ok(_)) => *r = Err(e.clone()),
            _ => {}
        }
    }

    fn send(self) {
        // A caller that went away no longer wants the answer.
        match self {
            Reply::Add(tx, r) => drop(tx.send(r)),
            Reply::Events(tx, r) => drop(tx.send(r)),
            Reply::Count(tx, r) => drop(tx.send(r)),
        }
    }
}

struct Tx<'t> {
    scopes: Table<'t, &'static [u8; 16], &'static [u8]>,
    entries: Table<'t, &'static [u8; 32], &'static [u8]>,
    sessions: Table<'t, &'static [u8; 48], ()>,
    totals: Totals,
    limits: &'t MemoryLimits,
    changes: Changes,
}

impl Tx<'_> {
    fn row(&self, h: &[u8; 16], scope: &MemoryScope) -> Result<ScopeRow, Fail> {
        match self.scopes.get(h)? {
            None => Ok(ScopeRow::new(scope)),
            Some(v) => {
                let row: ScopeRow = decode(v.value(), "scope").op()?;
                if row.app != scope.app().as_str() || row.user != scope.user().as_str() {
                    return Err(Fail::Op(Error::Corrupt("scope key collision".into())));
                }
                Ok(row)
            }
        }
    }

    fn put_row(&mut self, h: &[u8; 16], row: &ScopeRow) -> Result<(), Fail> {
        self.scopes.insert(h, encode(row).txn()?.as_slice())?;
        Ok(())
    }

    fn existing(
        &self,
        h: &[u8; 16],
        scope: &MemoryScope,
        id: &EntryId,
    ) -> Result<Option<MemoryEntry>, Fail> {
        match self.entries.get(&entry_key(h, id))? {
            None => Ok(None),
            Some(v) => {
                let rec: EntryRecord = decode(v.value(), "entry").op()?;
                Ok(Some(rec.into_entry(scope).op()?.0))
            }
        }
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
    fn insert(
        &mut self,
        h: &[u8; 16],
        row: &mut ScopeRow,
        mut entry: MemoryEntry,
        bytes: u64,
        terms: TermFreqs,
    ) -> Result<MemoryEntry, Fail> {
        entry.epoch = row.epoch;
        let rec = EntryRecord::new(&entry, bytes, &terms).txn()?;
        self.entries
            .insert(&entry_key(h, &entry.id), encode(&rec).txn()?.as_slice())?;
        if let Some(s) = &entry.provenance.session_id {
            self.sessions
                .insert(&session_key(h, &session_hash(s), &entry.id), ())?;
        }
        if row.entries == 0 {
            self.totals.scopes += 1;
        }
        row.entries += 1;
        row.bytes += bytes;
        self.totals.entries += 1;
        self.totals.bytes += bytes;
        self.changes
            .push((*h, CacheOp::Insert(Box::new((entry.clone(), bytes, terms)))));
        Ok(entry)
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
        let rec: EntryRecord = match self.entries.get(&key)? {
            None => return Ok(false),
            Some(v) => decode(v.value(), "entry").txn()?,
        };
        if rec.app != scope.app().as_str() || rec.user != scope.user().as_str() {
            return Err(Fail::Txn(Error::Corrupt("entry key collision".into())));
        }
        self.entries.remove(&key)?;
        if let Some(s) = &rec.session_id {
            let s = SessionId::new(s.as_str()).txn()?;
            self.sessions
                .remove(&session_key(h, &session_hash(&s), id))?;
        }
        row.entries = row.entries.saturating_sub(1);
        row.bytes = row.bytes.saturating_sub(rec.storage_bytes);
        if row.entries == 0 {
            self.totals.scopes = self.totals.scopes.saturating_sub(1);
        }
        self.totals.entries = self.totals.entries.saturating_sub(1);
        self.totals.bytes = self.totals.bytes.saturating_sub(rec.storage_bytes);
        self.changes.push((*h, CacheOp::Remove(*id)));
        Ok(true)
    }

    fn add_entry(
        &mut self,
        scope: &MemoryScope,
        prepared: PreparedEntry,
        terms: TermFreqs,
        fence: Option<u64>,
        deadline: Deadline,
    ) -> Result<AddOutcome, Fail> {
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        if prepared.keyed
            && let Some(existing) = self.existing(&h, scope, &prepared.entry.id)?
        {
            return if existing.same_data(&prepared.entry) {
                Ok(AddOutcome {
                    entry: existing,
                    duplicate: true,
                })
            } else {
                Err(Fail::Op(Error::IdempotencyConflict(prepared.entry.id)))
            };
        }
        check_scope_quota(
            self.limits,
            row.entries,
            row.bytes,
            1,
            prepared.storage_bytes,
        )
        .op()?;
        self.check_global(1, prepared.storage_bytes)?;
        deadline.check().op()?;
        let entry = self.insert(&h, &mut row, prepared.entry, prepared.storage_bytes, terms)?;
        self.put_row(&h, &row)?;
        Ok(AddOutcome {
            entry,
            duplicate: false,
        })
    }

    fn add_events(
        &mut self,
        scope: &MemoryScope,
        plan: EventPlan,
        mut terms: HashMap<usize, TermFreqs>,
        fence: Option<u64>,
        deadline: Deadline,
    ) -> Result<IngestReport, Fail> {
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        check_epoch(fence, row.epoch).op()?;
        let mut failure = None;
        let (new, report) = plan.resolve(|p| match self.existing(&h, scope, &p.entry.id) {
            Ok(None) => Decision::New,
            Ok(Some(e)) if e.same_data(&p.entry) => Decision::Duplicate,
            Ok(Some(_)) => Decision::Conflict,
            Err(f) => {
                failure.get_or_insert(f);
                Decision::Conflict
            }
        });
        if let Some(f) = failure {
            return Err(f);
        }
        let add_bytes: u64 = new.iter().map(|p| p.prepared.storage_bytes).sum();
        let add_entries = new.len() as u64;
        check_scope_quota(self.limits, row.entries, row.bytes, add_entries, add_bytes).op()?;
        self.check_global(add_entries, add_bytes)?;
        deadline.check().op()?;
        for p in new {
            let t = terms.remove(&p.index).unwrap_or_default();
            self.insert(&h, &mut row, p.prepared.entry, p.prepared.storage_bytes, t)?;
        }
        self.put_row(&h, &row)?;
        Ok(report)
    }

    fn delete_entry(
        &mut self,
        scope: &MemoryScope,
        id: &EntryId,
        deadline: Deadline,
    ) -> Result<u64, Fail> {
        deadline.check().op()?;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        let removed = self.remove(&h, scope, &mut row, id)?;
        if removed {
            self.put_row(&h, &row)?;
        }
        Ok(u64::from(removed))
    }

    fn delete_session(
        &mut self,
        scope: &MemoryScope,
        session: &SessionId,
        deadline: Deadline,
    ) -> Result<u64, Fail> {
        deadline.check().op()?;
        let h = scope_hash(scope);
        let mut prefix = [0u8; 32];
        prefix[..16].copy_from_slice(&h);
        prefix[16..].copy_from_slice(&session_hash(session));
        let (lo, hi) = session_range(&prefix);
        let mut ids = Vec::new();
        for item in self.sessions.range::<&[u8; 48]>(&lo..=&hi)? {
            let (k, _) = item?;
            let mut id = [0u8; 16];
            id.copy_from_slice(&k.value()[32..]);
            ids.push(EntryId::from_bytes(id));
        }
        let mut row = self.row(&h, scope)?;
        let mut n = 0;
        for id in ids {
            if self.remove(&h, scope, &mut row, &id)? {
                n += 1;
            }
        }
        if n > 0 {
            self.put_row(&h, &row)?;
        }
        Ok(n)
    }

    fn delete_user(&mut self, scope: &MemoryScope, deadline: Deadline) -> Result<u64, Fail> {
        deadline.check().op()?;
        let h = scope_hash(scope);
        let mut row = self.row(&h, scope)?;
        let (lo, hi) = entry_range(&h);
        self.entries
            .retain_in::<&[u8; 32], _>(&lo..=&hi, |_, _| false)?;
        let (slo, shi) = session_range(&h);
        self.sessions
            .retain_in::<&[u8; 48], _>(&slo..=&shi, |_, ()| false)?;
        let removed = row.entries;
        if removed > 0 {
            self.totals.scopes = self.totals.scopes.saturating_sub(1);
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
        Ok(removed)
    }
}

pub(crate) struct Writer {
    pub(crate) db: Arc<Database>,
    pub(crate) cache: Arc<ScopeCache>,
    pub(crate) limits: MemoryLimits,
    pub(crate) rx: mpsc::Receiver<Op>,
}

impl Writer {
    pub(crate) fn run(mut self) {
        while let Some(first) = self.rx.blocking_recv() {
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match self.rx.try_recv() {
                    Ok(op) => group.push(op),
                    Err(_) => break,
                }
            }
            self.commit_group(group);
        }
    }

    fn commit_group(&self, group: Vec<Op>) {
        let (mut replies, result) = self.apply_group(group);
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

    /// Applies and commits a group; on a storage failure every reply that
    /// was going to succeed is turned into that failure by the caller.
    fn apply_group(&self, group: Vec<Op>) -> (Vec<Reply>, hippocamp_core::Result<Changes>) {
        let mut replies = Vec::with_capacity(group.len());
        let txn = match self.db.begin_write() {
            Ok(t) => t,
            Err(e) => {
                let err = Error::storage(e);
                for op in group {
                    replies.push(Self::reply(op, Err(Fail::Txn(err.clone()))));
                }
                return (replies, Err(err));
            }
        };
        let result = (|| -> hippocamp_core::Result<Changes> {
            let mut meta = txn.open_table(META).map_err(Error::storage)?;
            let totals: Totals = match meta.get(TOTALS_KEY).map_err(Error::storage)? {
                Some(v) => decode(v.value(), "totals")?,
                None => Totals::default(),
            };
            let mut tx = Tx {
                scopes: txn.open_table(SCOPES).map_err(Error::storage)?,
                entries: txn.open_table(ENTRIES).map_err(Error::storage)?,
                sessions: txn.open_table(SESSIONS).map_err(Error::storage)?,
                totals,
                limits: &self.limits,
                changes: Vec::new(),
            };
            let mut fatal: Option<Error> = None;
            for op in group {
                if let Some(e) = &fatal {
                    replies.push(Self::reply(op, Err(Fail::Txn(e.clone()))));
                    continue;
                }
                let reply = match op {
                    Op::AddEntry {
                        scope,
                        prepared,
                        terms,
                        fence,
                        deadline,
                        reply,
                    } => {
                        let r = tx.add_entry(&scope, *prepared, terms, fence, deadline);
                        Self::collect(&mut fatal, r, |r| Reply::Add(reply, r))
                    }
                    Op::AddEvents {
                        scope,
                        plan,
                        terms,
                        fence,
                        deadline,
                        reply,
                    } => {
                        let r = tx.add_events(&scope, plan, terms, fence, deadline);
                        Self::collect(&mut fatal, r, |r| Reply::Events(reply, r))
                    }
                    Op::DeleteEntry {
                        scope,
                        id,
                        deadline,
                        reply,
                    } => {
                        let r = tx.delete_entry(&scope, &id, deadline);
                        Self::collect(&mut fatal, r, |r| Reply::Count(reply, r))
                    }
                    Op::DeleteSession {
                        scope,
                        session,
                        deadline,
                        reply,
                    } => {
                        let r = tx.delete_session(&scope, &session, deadline);
                        Self::collect(&mut fatal, r, |r| Reply::Count(reply, r))
                    }
                    Op::DeleteUser {
                        scope,
                        deadline,
                        reply,
                    } => {
                        let r = tx.delete_user(&scope, deadline);
                        Self::collect(&mut fatal, r, |r| Reply::Count(reply, r))
                    }
                };
                replies.push(reply);
            }
            if let Some(e) = fatal {
                return Err(e);
            }
            meta.insert(TOTALS_KEY, encode(&tx.totals)?.as_slice())
                .map_err(Error::storage)?;
            Ok(tx.changes)
        })();
        let result = match result {
            Ok(changes) => txn.commit().map(|()| changes).map_err(Error::storage),
            Err(e) => {
                // Dropping an uncommitted transaction aborts it.
                drop(txn);
                Err(e)
            }
        };
        (replies, result)
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
            Op::DeleteEntry { reply, .. }
            | Op::DeleteSession { reply, .. }
            | Op::DeleteUser { reply, .. } => Reply::Count(reply, Err(e)),
        }
    }
}
