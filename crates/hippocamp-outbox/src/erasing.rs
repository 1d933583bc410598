//! A memory-store wrapper that tells the outbox about erasures.
//!
//! [`Erasing`] forwards every call; after `delete_session` and
//! `delete_user` succeed in the store it cancels the scope's (the
//! session's) queued jobs, with reason `erased`, and drops their events in
//! the same call; a user's erasure also records the new epoch, so a
//! submission captured before it is refused. Whatever happens between the
//! two steps, nothing queued can undo the erasure: the store advanced the
//! epoch (jobs of the old one are refused at delivery) and remembers the
//! erased events (a repeat is skipped as erased). The services put the
//! memory store they hand out behind it whenever an outbox runs.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, EntryId, LimitInfo, MemoryScope, Result, SessionId};
use hippocamp_memory::event::IngestReport;
use hippocamp_memory::store::{Erasure, StoreStatus};
use hippocamp_memory::{
    AddOutcome, Capabilities, Event, MemoryEntry, MemoryStore, NewEntry, SearchRequest,
    SearchResults, WriteOptions,
};

use crate::limits::ProcessorOptions;
use crate::outbox::Outbox;

/// Forwards to `inner` and reports erasures to `outbox`.
#[derive(Debug)]
pub struct Erasing<S> {
    inner: S,
    outbox: Outbox,
    processor: Vec<LimitInfo>,
}

impl<S: MemoryStore> Erasing<S> {
    /// Wraps `inner`; its capabilities add the job store's limits.
    pub fn new(inner: S, outbox: Outbox) -> Self {
        Self {
            inner,
            outbox,
            processor: Vec::new(),
        }
    }

    /// Reports the options of the processor that delivers for `inner` in
    /// its capabilities too (`outbox.processor.*`).
    #[must_use]
    pub fn with_processor(mut self, options: &ProcessorOptions) -> Self {
        self.processor = options.describe();
        self
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for Erasing<S> {
    fn capabilities(&self) -> Capabilities {
        // An outbox runs in front of this store: its limits are this
        // store's too (an ingest is refused by them).
        let mut caps = self.inner.capabilities();
        caps.async_ingestion = true;
        caps.limits
            .extend(self.outbox.store().capabilities().limits);
        caps.limits.extend(self.processor.iter().cloned());
        caps
    }

    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        self.inner.add_entry(scope, entry, opts).await
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        self.inner.add_events(scope, session, events, opts).await
    }

    async fn admit_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &CallOptions,
    ) -> Result<()> {
        self.inner.admit_events(scope, session, events, opts).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        self.inner.search(scope, request, opts).await
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        self.inner.get_entry(scope, id, opts).await
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        // A queued copy of the entry's event is skipped as erased when it
        // arrives: the store remembers the erased entry.
        self.inner.delete_entry(scope, id, opts).await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        // Queued work first: its jobs are cancelled (their leases end, so
        // no further call starts), then the calls already in flight are
        // waited for, and only then is the session deleted; what they
        // stored goes with it. (A session has no epoch to fence by.)
        // Were the process to die in between, the caller's delete did not
        // succeed, and the cancelled jobs stay cancelled.
        let deadline = opts.deadline(hippocamp_core::deadline::MAX_TIMEOUT);
        self.outbox.erased(scope, Some(session), None).await?;
        self.outbox.quiesce(scope, session, deadline).await?;
        self.inner
            .delete_session(
                scope,
                session,
                &CallOptions::until(deadline).on_behalf_of(opts.caller()),
            )
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let erasure = self.inner.delete_user(scope, opts).await?;
        self.outbox.erased(scope, None, Some(erasure.epoch)).await?;
        Ok(erasure)
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner.erasure_epoch(scope, opts).await
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::ListRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::EntryPage> {
        self.inner.list_entries(scope, request, opts).await
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::store::ExportRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::store::EntryPage> {
        self.inner.export_entries(scope, request, opts).await
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::Sweep> {
        self.inner.sweep_expired(max, spare, opts).await
    }

    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &hippocamp_memory::EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<hippocamp_memory::UpdateOutcome> {
        self.inner.update_entry(scope, id, update, opts).await
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<hippocamp_memory::Revision>> {
        self.inner.entry_history(scope, id, opts).await
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[hippocamp_memory::ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<hippocamp_memory::ImportReport> {
        self.inner.import_entries(scope, entries, opts).await
    }

    async fn list_apps(
        &self,
        request: &hippocamp_memory::NamesRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::NamePage> {
        self.inner.list_apps(request, opts).await
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &hippocamp_memory::NamesRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::NamePage> {
        self.inner.list_users(app, request, opts).await
    }

    async fn status(&self) -> Result<StoreStatus> {
        self.inner.status().await
    }

    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }

    fn release_scope(&self, scope: &MemoryScope) {
        self.inner.release_scope(scope);
    }
}
