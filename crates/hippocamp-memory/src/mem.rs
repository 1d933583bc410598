//! The volatile in-memory store.
//!
//! Each scope has its own lock, so operations on different scopes run in
//! parallel and operations on one scope are ordered; the scope map itself is
//! locked only to find or create a scope. The global quota is a shared
//! atomic budget. Data lives as long as the store; erasure epochs and the
//! ids of erased entries too (a scope's epoch survives `delete_user`,
//! which is what fences it).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, Deadline, EntryId, Error, MemoryScope, Result, SessionId, Stage,
};
use hippocamp_embed::Embedder;
use hippocamp_search::{Analyzer, TermFreqs};
use parking_lot::RwLock;
use tokio::sync::{RwLock as AsyncRwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::config::{MemoryConfig, StoreClock};
use crate::embedding::{embed_passages, embed_plan};
use crate::entry::{
    EntryUpdate, MemoryEntry, NewEntry, PreparedEntry, Revision, UpdateOutcome, apply_update,
    check_revise, check_update, prepare_entry, stored_bytes,
};
use crate::erasure::{
    ErasureCursor, ErasureImport, ErasurePage, ErasureRequest, ImportedErasures,
    check_import_epoch, erasure_records_bytes,
};
use crate::event::{Decision, Event, IngestReport, plan_events};
use crate::import::{ImportReport, ImportedEntry, prepare_import};
use crate::list::{
    EntryPage, ExportCursor, ExportRequest, ListRequest, NamePage, NamesRequest, PreparedList,
    Sweep, check_sweep_batch, prepare_export, prepare_list, prepare_names,
};
use crate::quota::{GlobalQuota, check_scope_quota};
use crate::scope::{Existing, ScopeData};
use crate::search::{prepare_search, resolve_mode};
use crate::store::{
    AddOutcome, Capabilities, Erasure, ErasureFence, MemoryStore, SearchRequest, SearchResults,
    StoreStatus, WriteOptions,
};

/// One listing page of `data` at `now_ms`, as every store that keeps a
/// scope in memory answers it.
pub fn list_page(data: &ScopeData, list: &PreparedList, now_ms: u64) -> EntryPage {
    let (entries, last) = data.list(
        list.newest_first,
        list.after,
        list.limit,
        list.max_bytes,
        now_ms,
        |e| list.keeps(e),
    );
    EntryPage {
        entries: entries
            .iter()
            .map(|e| (**e).clone().with_state(data.state_of(&e.id, now_ms)))
            .collect(),
        next_cursor: last.map(|l| list.cursor(l)),
    }
}

#[derive(Debug, Default)]
struct Shell {
    epoch: u64,
    data: ScopeData,
    /// The (session, entry id) of every erased entry of a session: an
    /// event of that session that would make one again is skipped
    /// (erasure is sticky; a new session id starts over on purpose).
    erased: HashSet<(SessionId, EntryId)>,
    /// The id of every erased entry, with or without a session: a restore
    /// does not bring one back, and an export carries them.
    erased_ids: HashSet<EntryId>,
    /// Ids an export said were erased (restored here): an event of any
    /// session that would make one again is skipped.
    erased_anywhere: HashSet<EntryId>,
    /// The kept revisions of every corrected entry, oldest first, the
    /// current one last (none for an entry never corrected).
    history: HashMap<EntryId, Vec<Revision>>,
    /// Each erased session's erasure epoch (absent: 0).
    session_epochs: HashMap<SessionId, u64>,
}

impl Shell {
    fn session_epoch(&self, session: &SessionId) -> u64 {
        self.session_epochs.get(session).copied().unwrap_or(0)
    }

    /// The bytes the scope holds against its quota: its entries and its
    /// erasure records.
    fn held_bytes(&self) -> u64 {
        erasure_records_bytes(
            self.data.bytes(),
            (self.erased.len()
                + self.erased_ids.len()
                + self.erased_anywhere.len()
                + self.session_epochs.len()) as u64,
        )
    }

    /// What ingesting `p` would do here.
    fn decide(&self, p: &PreparedEntry) -> Decision {
        match &p.entry.provenance.session_id {
            Some(s)
                if self.erased.contains(&(s.clone(), p.entry.id))
                    || self.erased_anywhere.contains(&p.entry.id) =>
            {
                Decision::Erased
            }
            _ => self.data.decide(p),
        }
    }

    /// Removes one entry, remembering it as erased; its bytes if it was
    /// there.
    /// Erases `ids`; the entries and bytes released.
    fn erase_all(&mut self, ids: &[EntryId]) -> (u64, u64) {
        let mut removed = (0, 0);
        for id in ids {
            if let Some(bytes) = self.erase(id) {
                removed.0 += 1;
                removed.1 += bytes;
            }
        }
        removed
    }

    fn erase(&mut self, id: &EntryId) -> Option<u64> {
        let (entry, bytes) = self.data.remove(id)?;
        self.history.remove(id);
        if let Some(s) = &entry.provenance.session_id {
            self.erased.insert((s.clone(), entry.id));
        }
        self.erased_ids.insert(entry.id);
        Some(bytes)
    }

    /// One page of the scope's erasure records after `after`.
    fn records(&self, after: Option<&ErasureCursor>, limit: usize) -> ErasurePage {
        let mut ids: Vec<EntryId> = self.erased_ids.iter().copied().collect();
        ids.sort_unstable();
        let mut sessions: Vec<(&SessionId, &u64)> = self.session_epochs.iter().collect();
        sessions.sort_unstable();
        ErasurePage::cut(
            ids.into_iter(),
            sessions.into_iter().map(|(s, e)| (s.clone(), *e)),
            after,
            limit,
        )
    }
}

type ShellRef = Arc<AsyncRwLock<Shell>>;

/// A volatile, in-process memory store.
#[derive(Debug)]
pub struct InMemoryStore {
    config: MemoryConfig,
    embedder: Option<Arc<dyn Embedder>>,
    analyzer: Analyzer,
    scopes: RwLock<HashMap<MemoryScope, ShellRef>>,
    quota: Arc<GlobalQuota>,
    clock: StoreClock,
    /// Apps and their users that hold at least one entry: the index
    /// `list_apps` and `list_users` page through.
    index: RwLock<BTreeMap<String, BTreeSet<String>>>,
}

pub use hippocamp_core::check_epoch;

impl InMemoryStore {
    /// A store with `config` and its own global quota.
    pub fn new(config: MemoryConfig) -> Result<Self> {
        config.validate()?;
        let quota = Arc::new(GlobalQuota::new(&config.limits));
        Ok(Self::build(config, quota))
    }

    /// A store that draws from a global quota shared with other stores.
    pub fn with_shared_quota(config: MemoryConfig, quota: Arc<GlobalQuota>) -> Result<Self> {
        config.validate()?;
        Ok(Self::build(config, quota))
    }

    fn build(config: MemoryConfig, quota: Arc<GlobalQuota>) -> Self {
        Self {
            clock: config.clock.clone(),
            config,
            embedder: None,
            analyzer: Analyzer::english(),
            scopes: RwLock::new(HashMap::new()),
            quota,
            index: RwLock::new(BTreeMap::new()),
        }
    }

    /// Keeps the app/user index in step with a scope after a write.
    fn reindex(&self, scope: &MemoryScope, shell: &Shell) {
        let (app, user) = (scope.app().as_str(), scope.user().as_str());
        let mut index = self.index.write();
        if shell.data.is_empty() {
            if let Some(users) = index.get_mut(app) {
                users.remove(user);
                if users.is_empty() {
                    index.remove(app);
                }
            }
        } else if !index.get(app).is_some_and(|u| u.contains(user)) {
            index
                .entry(app.to_owned())
                .or_default()
                .insert(user.to_owned());
        }
    }

    /// A store that embeds every entry with `embedder` before it commits
    /// and offers `vector` and `hybrid` search (the default mode).
    #[must_use]
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.config.limits.call_timeout())
    }

    fn find(&self, scope: &MemoryScope) -> Option<ShellRef> {
        self.scopes.read().get(scope).cloned()
    }

    fn find_or_create(&self, scope: &MemoryScope) -> ShellRef {
        if let Some(s) = self.find(scope) {
            return s;
        }
        let passages = self.config.passages;
        self.scopes
            .write()
            .entry(scope.clone())
            .or_insert_with(|| {
                Arc::new(AsyncRwLock::new(Shell {
                    data: ScopeData::with_passages(passages),
                    ..Shell::default()
                }))
            })
            .clone()
    }

    async fn write(shell: &ShellRef, deadline: Deadline) -> Result<RwLockWriteGuard<'_, Shell>> {
        let guard = tokio::time::timeout_at(deadline.instant().into(), shell.write())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))?;
        deadline.check(Stage::Queueing)?;
        Ok(guard)
    }

    async fn read(shell: &ShellRef, deadline: Deadline) -> Result<RwLockReadGuard<'_, Shell>> {
        tokio::time::timeout_at(deadline.instant().into(), shell.read())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))
    }

    fn release(&self, (entries, bytes): (u64, u64)) {
        self.quota.release(entries, bytes);
    }

    /// Takes the scope's write lock for a test, so a concurrent call can be
    /// shown to wait and time out without writing.
    #[cfg(any(test, feature = "conformance"))]
    #[doc(hidden)]
    pub async fn hold_scope_for_test(&self, scope: &MemoryScope) -> impl Drop + use<> {
        self.find_or_create(scope).write_owned().await
    }
}

#[async_trait]
impl MemoryStore for InMemoryStore {
    fn capabilities(&self) -> Capabilities {
        let mut c = self.config.capabilities("memory", false);
        crate::embedding::describe(&mut c, self.embedder.as_deref());
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
        // Embedded before the write commits, so every entry has its vector;
        // not when the store already holds this keyed entry.
        let known = prepared.keyed
            && match self.find(scope) {
                Some(shell) => {
                    Self::read(&shell, deadline).await?.data.decide(&prepared) != Decision::New
                }
                None => false,
            };
        let mut vector = if known {
            None
        } else {
            embed_passages(embedder, &[&prepared.entry.content], deadline)
                .await?
                .pop()
        };
        let shell = self.find_or_create(scope);
        let mut s = Self::write(&shell, deadline).await?;
        check_epoch(opts.epoch, s.epoch)?;
        if prepared.keyed {
            match s.data.existing(&prepared.entry) {
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
            // It vanished since the look: embed it now (the scope waits).
            vector = embed_passages(embedder, &[&prepared.entry.content], deadline)
                .await?
                .pop();
        }
        let bytes = stored_bytes(prepared.storage_bytes, vector.as_deref());
        check_scope_quota(limits, s.data.len(), s.held_bytes(), 1, bytes)?;
        let redacted = prepared.redacted;
        let mut entry = prepared.entry;
        entry.epoch = s.epoch;
        entry.obligations = opts.obligations_for(&entry.metadata);
        s.data.admit_derived(&mut entry, self.clock.now_ms())?;
        let reservation = self.quota.reserve(1, bytes)?;
        deadline.check(Stage::Commit)?;
        reservation.commit();
        let id = entry.id;
        s.data.insert(entry.clone(), bytes, &terms);
        if let Some(v) = vector {
            s.data.insert_vector(id, &v);
        }
        self.reindex(scope, &s);
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
        // Analysed before taking the lock: the scope stays free meanwhile.
        let mut terms = plan.analyze(&self.analyzer);
        let embedder = self.embedder.as_deref();
        // Only what would be new is embedded (not what the scope holds).
        let need = match (embedder, self.find(scope)) {
            (None, _) => Vec::new(),
            (Some(_), None) => plan.new_indices(|_| Decision::New),
            (Some(_), Some(shell)) => {
                let s = Self::read(&shell, deadline).await?;
                plan.new_indices(|p| s.decide(p))
            }
        };
        let mut vectors = embed_plan(embedder, &plan, &need, deadline).await?;
        let shell = self.find_or_create(scope);
        let mut s = Self::write(&shell, deadline).await?;
        check_epoch(opts.epoch, s.epoch)?;
        check_epoch(opts.session_epoch, s.session_epoch(session))?;
        if embedder.is_some() {
            // What vanished since the look is embedded now (the scope waits).
            let missing: Vec<usize> = plan
                .new_indices(|p| s.decide(p))
                .into_iter()
                .filter(|i| !vectors.contains_key(i))
                .collect();
            vectors.extend(embed_plan(embedder, &plan, &missing, deadline).await?);
        }
        let (new, report) = plan.resolve(|p| s.decide(p));
        let bytes_of = |p: &crate::event::PlannedEntry| {
            stored_bytes(
                p.prepared.storage_bytes,
                vectors.get(&p.index).map(Vec::as_slice),
            )
        };
        let add_bytes: u64 = new.iter().map(bytes_of).sum();
        let add_entries = new.len() as u64;
        check_scope_quota(limits, s.data.len(), s.held_bytes(), add_entries, add_bytes)?;
        let reservation = self.quota.reserve(add_entries, add_bytes)?;
        deadline.check(Stage::Commit)?;
        reservation.commit();
        let epoch = s.epoch;
        let sized: Vec<_> = new.into_iter().map(|p| (bytes_of(&p), p)).collect();
        for (bytes, planned) in sized {
            let mut entry = planned.prepared.entry;
            entry.epoch = epoch;
            entry.obligations = opts.obligations_for(&entry.metadata);
            let terms = terms.take(planned.index);
            let id = entry.id;
            s.data.insert(entry, bytes, &terms);
            if let Some(v) = vectors.remove(&planned.index) {
                s.data.insert_vector(id, &v);
            }
        }
        self.reindex(scope, &s);
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
        let query_vector =
            crate::embedding::embed_query(self.embedder.as_deref(), mode, &request.query, deadline)
                .await?;
        let Some(shell) = self.find(scope) else {
            return Ok(SearchResults::default());
        };
        let s = Self::read(&shell, deadline).await?;
        prepared.now_ms = self.clock.now_ms();
        Ok(match &query_vector {
            None => s.data.search(&prepared, self.config.bm25),
            Some(v) => {
                s.data
                    .search_vectors(&prepared, mode, v, self.config.bm25, &self.config.fusion)
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
        let shell = self.find(scope).ok_or(Error::NotFound("entry"))?;
        let s = Self::read(&shell, deadline).await?;
        s.data
            .read(id, self.clock.now_ms())
            .ok_or(Error::NotFound("entry"))
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<crate::lineage::Lineage> {
        let deadline = self.deadline(opts);
        let shell = self.find(scope).ok_or(Error::NotFound("entry"))?;
        let s = Self::read(&shell, deadline).await?;
        s.data
            .lineage_of(id, self.clock.now_ms())
            .ok_or(Error::NotFound("entry"))
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        let Some(shell) = self.find(scope) else {
            return Ok(0);
        };
        let mut s = Self::write(&shell, deadline).await?;
        if s.data.get(id).is_none() {
            return Ok(0);
        }
        // The entry and everything derived from it, in one erasure.
        let ids = s.data.with_dependents(&[*id]);
        s.data.check_deletes(&ids, self.clock.now_ms())?;
        let removed = s.erase_all(&ids);
        self.release(removed);
        self.reindex(scope, &s);
        Ok(removed.0)
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        // Created if absent: the session's epoch advances even when it
        // holds nothing, so work admitted before the erasure stays fenced.
        let shell = self.find_or_create(scope);
        let mut s = Self::write(&shell, deadline).await?;
        let ids = s.data.with_dependents(&s.data.session_entries(session));
        s.data.check_deletes(&ids, self.clock.now_ms())?;
        *s.session_epochs.entry(session.clone()).or_default() += 1;
        let removed = s.erase_all(&ids);
        self.release(removed);
        self.reindex(scope, &s);
        Ok(removed.0)
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let deadline = self.deadline(opts);
        // Created if absent: the epoch must advance even for a scope with
        // no entries, so work queued before the erasure stays fenced.
        let shell = self.find_or_create(scope);
        let mut s = Self::write(&shell, deadline).await?;
        s.data.check_delete_all(self.clock.now_ms())?;
        let mut released = (0, 0);
        for id in s.data.ids() {
            if let Some(bytes) = s.erase(&id) {
                released.0 += 1;
                released.1 += bytes;
            }
        }
        s.data.clear();
        s.epoch += 1;
        self.release(released);
        self.reindex(scope, &s);
        Ok(Erasure {
            deleted: released.0,
            epoch: s.epoch,
        })
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        let deadline = self.deadline(opts);
        let Some(shell) = self.find(scope) else {
            return Ok(0);
        };
        Ok(Self::read(&shell, deadline).await?.epoch)
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        let deadline = self.deadline(opts);
        let Some(shell) = self.find(scope) else {
            return Ok(ErasureFence::default());
        };
        let s = Self::read(&shell, deadline).await?;
        Ok(ErasureFence {
            epoch: s.epoch,
            session_epoch: s.session_epoch(session),
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
        let Some(shell) = self.find(scope) else {
            return Ok(EntryPage::default());
        };
        let s = Self::read(&shell, deadline).await?;
        Ok(list_page(&s.data, &prepared, self.clock.now_ms()))
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
        let Some(shell) = self.find(scope) else {
            return Ok(EntryPage::default());
        };
        let s = Self::read(&shell, deadline).await?;
        let (entries, last) = s.data.list(
            false,
            after,
            p.limit,
            p.max_bytes,
            self.clock.now_ms(),
            |_| true,
        );
        Ok(EntryPage {
            entries: entries.iter().map(|e| (**e).clone()).collect(),
            next_cursor: last.map(|(ts, id)| ExportCursor::Time(ts, id).encode()),
        })
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
        let shells: Vec<(MemoryScope, ShellRef)> = self
            .scopes
            .read()
            .iter()
            .filter(|(k, _)| !spare.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut sweep = Sweep::default();
        for (scope, shell) in shells {
            let mut s = Self::write(&shell, deadline).await?;
            let left = max - usize::try_from(sweep.deleted).unwrap_or(max);
            // One more than fits, to know whether more are due.
            let due = s.data.sweepable(now, left + 1);
            sweep.more |= due.len() > left;
            let due: Vec<EntryId> = due.into_iter().take(left).collect();
            let due = s.data.sweepable_with_dependents(&due, now);
            let released = s.erase_all(&due);
            self.release(released);
            self.reindex(&scope, &s);
            sweep.deleted += released.0;
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
        let embedder = self.embedder.as_deref();
        let shell = self.find(scope).ok_or(Error::NotFound("entry"))?;
        let current = {
            let s = Self::read(&shell, deadline).await?;
            s.data
                .get_live(id, self.clock.now_ms())
                .cloned()
                .ok_or(Error::NotFound("entry"))?
        };
        if current.content == update.content && current.metadata == update.metadata {
            return Ok(UpdateOutcome {
                entry: current,
                changed: false,
            });
        }
        // Embedded before the lock, as for a new entry.
        let vector = embed_passages(embedder, &[&update.content], deadline)
            .await?
            .pop();
        let mut s = Self::write(&shell, deadline).await?;
        check_epoch(opts.epoch, s.epoch)?;
        let now = self.clock.now_ms();
        let current = s
            .data
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
        let old_bytes = s
            .data
            .bytes_of(id)
            .unwrap_or_else(|| current.storage_bytes());
        let grow = bytes.saturating_sub(old_bytes);
        check_scope_quota(
            limits,
            s.data.len().saturating_sub(1),
            s.held_bytes() - old_bytes,
            1,
            bytes,
        )?;
        let reservation = self.quota.reserve(0, grow)?;
        deadline.check(Stage::Commit)?;
        reservation.commit();
        self.release((0, old_bytes.saturating_sub(bytes)));
        let max = usize::try_from(limits.max_revisions).unwrap_or(usize::MAX);
        let history = s
            .history
            .entry(*id)
            .or_insert_with(|| vec![Revision::of(&current)]);
        history.push(Revision::of(&entry));
        if history.len() > max {
            let drop = history.len() - max;
            history.drain(..drop);
        }
        s.data.insert(entry.clone(), bytes, &terms);
        if let Some(v) = vector {
            s.data.insert_vector(*id, &v);
        }
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
        let shell = self.find(scope).ok_or(Error::NotFound("entry"))?;
        let s = Self::read(&shell, deadline).await?;
        let entry = s
            .data
            .get_live(id, self.clock.now_ms())
            .ok_or(Error::NotFound("entry"))?;
        Ok(match s.history.get(id) {
            Some(h) => h.iter().rev().cloned().collect(),
            None => vec![Revision::of(entry)],
        })
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
        let shell = self.find_or_create(scope);
        // What is new is decided under the lock; embedding happens first
        // for everything not expired (an import is rare; a duplicate's
        // vector is simply not used).
        let texts: Vec<&str> = prepared
            .iter()
            .filter(|p| !p.entry.obligations.expired(now))
            .map(|p| p.entry.content.as_str())
            .collect();
        let mut vectors = embed_passages(self.embedder.as_deref(), &texts, deadline)
            .await?
            .into_iter();
        let mut s = Self::write(&shell, deadline).await?;
        check_epoch(opts.epoch, s.epoch)?;
        let mut report = ImportReport::default();
        let mut new = Vec::new();
        let mut kept = std::collections::HashSet::new();
        for (p, t) in prepared.into_iter().zip(terms) {
            if p.entry.obligations.expired(now) {
                report.expired += 1;
                continue;
            }
            let v = vectors.next();
            if s.erased_ids.contains(&p.entry.id) {
                report.erased += 1;
            } else if s.data.get(&p.entry.id).is_some() {
                report.existing += 1;
                kept.insert(p.entry.id);
            } else if !crate::import::sources_present(&p.entry, &kept, |id| {
                s.data.get_live(id, now).is_some()
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
        let add_entries = new.len() as u64;
        check_scope_quota(limits, s.data.len(), s.held_bytes(), add_entries, add_bytes)?;
        let reservation = self.quota.reserve(add_entries, add_bytes)?;
        deadline.check(Stage::Commit)?;
        reservation.commit();
        let epoch = s.epoch;
        for (p, t, v) in new {
            let mut entry = p.entry;
            entry.epoch = epoch;
            let id = entry.id;
            if !p.history.is_empty() {
                s.history.insert(id, p.history);
            }
            s.data
                .insert(entry, stored_bytes(p.storage_bytes, v.as_deref()), &t);
            if let Some(v) = v {
                s.data.insert_vector(id, &v);
            }
            report.imported += 1;
        }
        self.reindex(scope, &s);
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
        let Some(shell) = self.find(scope) else {
            return Ok(ErasurePage::default());
        };
        let s = Self::read(&shell, deadline).await?;
        Ok(s.records(after.as_ref(), limit))
    }

    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &ImportedErasures,
        opts: &CallOptions,
    ) -> Result<ErasureImport> {
        let deadline = self.deadline(opts);
        let shell = self.find_or_create(scope);
        let mut s = Self::write(&shell, deadline).await?;
        let held = !s.data.is_empty() || !s.erased_ids.is_empty() || !s.session_epochs.is_empty();
        let adopted_epoch = check_import_epoch(erasures.epoch, s.epoch, held)?;
        deadline.check(Stage::Commit)?;
        if adopted_epoch {
            s.epoch = erasures.epoch;
        }
        let mut added = 0;
        for id in &erasures.records.entries {
            added += u64::from(s.erased_ids.insert(*id));
            s.erased_anywhere.insert(*id);
        }
        for r in &erasures.records.sessions {
            let e = s.session_epochs.entry(r.session.clone()).or_default();
            if r.epoch > *e {
                added += u64::from(*e == 0);
                *e = r.epoch;
            }
        }
        Ok(ErasureImport {
            adopted_epoch,
            added,
        })
    }

    async fn list_apps(&self, request: &NamesRequest, _opts: &CallOptions) -> Result<NamePage> {
        use std::ops::Bound::{Excluded, Unbounded};
        let p = prepare_names(request, &self.config.limits)?;
        let index = self.index.read();
        let from = p.after.clone().map_or(Unbounded, Excluded);
        Ok(p.page(
            index
                .range::<String, _>((from, Unbounded))
                .map(|(a, _)| a.clone()),
        ))
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        _opts: &CallOptions,
    ) -> Result<NamePage> {
        use std::ops::Bound::{Excluded, Unbounded};
        let p = prepare_names(request, &self.config.limits)?;
        let index = self.index.read();
        let Some(users) = index.get(app.as_str()) else {
            return Ok(NamePage::default());
        };
        let from = p.after.clone().map_or(Unbounded, Excluded);
        Ok(p.page(users.range::<String, _>((from, Unbounded)).cloned()))
    }

    async fn status(&self) -> Result<StoreStatus> {
        // Counted from the scopes, not the global quota, which other stores
        // may share.
        let shells: Vec<ShellRef> = self.scopes.read().values().cloned().collect();
        let (mut scopes, mut entries, mut bytes) = (0, 0, 0);
        for shell in shells {
            let s = shell.read().await;
            if !s.data.is_empty() {
                scopes += 1;
                entries += s.data.len();
                bytes += s.data.bytes();
            }
        }
        Ok(StoreStatus {
            backend: "memory".to_owned(),
            durable: false,
            scopes,
            entries,
            bytes,
            router: None,
        })
    }
}
