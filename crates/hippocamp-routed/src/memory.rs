//! A memory store behind the exact-scope router.
//!
//! [`RoutedMemory`] wraps any store: each operation first enters its
//! scope's worker (see `hippocamp_router`), then runs on the inner store
//! with the caller's deadline forwarded (the time spent waiting counts).
//! Reads of a scope run together, writes one at a time in arrival order,
//! different scopes in parallel. Quotas are the inner store's, so both
//! tiers, including the global one, hold whatever the number of workers.
//! A scope's worker activation loads the inner store's per-scope state
//! (`activate_scope`) and reclamation releases it (`release_scope`); a
//! volatile inner store is never reclaimed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Deadline, EntryId, MemoryScope, Result, SessionId};
use hippocamp_router::{Access, RouterConfig, RouterStats, ScopeRouter, ScopeState};

use hippocamp_memory::entry::{EntryUpdate, MemoryEntry, NewEntry, Revision, UpdateOutcome};
use hippocamp_memory::event::{Event, IngestReport};
use hippocamp_memory::import::{ImportReport, ImportedEntry};
use hippocamp_memory::store::{
    AddOutcome, Capabilities, EntryPage, Erasure, ErasureFence, ListRequest, MemoryStore, NamePage,
    NamesRequest, RouterStatus, RoutingInfo, SearchRequest, SearchResults, StoreStatus, Sweep,
    WriteOptions,
};

struct Adapter {
    inner: Arc<dyn MemoryStore>,
    volatile: bool,
}

#[async_trait]
impl ScopeState<MemoryScope> for Adapter {
    async fn activate(&self, scope: &MemoryScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }
    fn release(&self, scope: &MemoryScope) {
        self.inner.release_scope(scope);
    }
    fn volatile(&self) -> bool {
        self.volatile
    }
}

/// A store behind an exact-scope (or shared) router.
#[derive(Debug)]
pub struct RoutedMemory {
    inner: Arc<dyn MemoryStore>,
    router: ScopeRouter<MemoryScope>,
    default_timeout: Duration,
}

impl RoutedMemory {
    /// Routes `inner` with `config`.
    pub fn new(inner: Arc<dyn MemoryStore>, config: RouterConfig) -> Result<Self> {
        let caps = inner.capabilities();
        let default_timeout = caps.call_timeout();
        let adapter = Arc::new(Adapter {
            inner: Arc::clone(&inner),
            volatile: !caps.durable,
        });
        Ok(Self {
            router: ScopeRouter::new(config, adapter)?,
            inner,
            default_timeout,
        })
    }

    /// The router's counters.
    pub fn router_stats(&self) -> RouterStats {
        self.router.stats()
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.default_timeout)
    }
}

/// The caller's options with the deadline the router started.
fn forwarded(opts: &CallOptions, deadline: Deadline) -> CallOptions {
    CallOptions::until(deadline).on_behalf_of(opts.caller())
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl MemoryStore for RoutedMemory {
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        let s = self.router.stats();
        caps.routing = Some(RoutingInfo {
            strategy: s.strategy.as_str().to_owned(),
            max_active_scopes: s.max_active_scopes,
            max_cold_activations: s.max_cold_activations,
            idle_scope_timeout_ms: s.idle_scope_timeout_ms,
            idle_reclamation: s.idle_reclamation,
        });
        caps
    }

    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        let deadline = self.deadline(&opts.call);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        let opts = WriteOptions {
            call: forwarded(&opts.call, deadline),
            ..opts.clone()
        };
        self.inner.add_entry(scope, entry, &opts).await
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let deadline = self.deadline(&opts.call);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        let opts = WriteOptions {
            call: forwarded(&opts.call, deadline),
            ..opts.clone()
        };
        self.inner.add_events(scope, session, events, &opts).await
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
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .search(scope, request, &forwarded(opts, deadline))
            .await
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .get_entry(scope, id, &forwarded(opts, deadline))
            .await
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        self.inner
            .delete_entry(scope, id, &forwarded(opts, deadline))
            .await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        self.inner
            .delete_session(scope, session, &forwarded(opts, deadline))
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        self.inner
            .delete_user(scope, &forwarded(opts, deadline))
            .await
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .erasure_epoch(scope, &forwarded(opts, deadline))
            .await
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .erasure_fence(scope, session, &forwarded(opts, deadline))
            .await
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .list_entries(scope, request, &forwarded(opts, deadline))
            .await
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::store::ExportRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::store::EntryPage> {
        // Not through the scope's worker: activating it would load the
        // scope's search state, which an export must not need.
        self.inner.export_entries(scope, request, opts).await
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        // Across scopes: no one scope's worker to enter; the store orders
        // it with each scope's writes itself.
        self.inner.sweep_expired(max, spare, opts).await
    }

    async fn update_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        let deadline = self.deadline(&opts.call);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        let opts = WriteOptions {
            call: forwarded(&opts.call, deadline),
            ..opts.clone()
        };
        self.inner.update_entry(scope, id, update, &opts).await
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .entry_history(scope, id, &forwarded(opts, deadline))
            .await
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::lineage::Lineage> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .entry_lineage(scope, id, &forwarded(opts, deadline))
            .await
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        let deadline = self.deadline(&opts.call);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        let opts = WriteOptions {
            call: forwarded(&opts.call, deadline),
            ..opts.clone()
        };
        self.inner.import_entries(scope, entries, &opts).await
    }

    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::erasure::ErasureRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::erasure::ErasurePage> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .export_erasures(scope, request, &forwarded(opts, deadline))
            .await
    }

    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &hippocamp_memory::erasure::ImportedErasures,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::erasure::ErasureImport> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        self.inner
            .import_erasures(scope, erasures, &forwarded(opts, deadline))
            .await
    }

    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        // The store's index of scopes, not any one scope: no worker to enter.
        self.inner.list_apps(request, opts).await
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        self.inner.list_users(app, request, opts).await
    }

    async fn status(&self) -> Result<StoreStatus> {
        let mut status = self.inner.status().await?;
        let s = self.router.stats();
        status.router = Some(RouterStatus {
            strategy: s.strategy.as_str().to_owned(),
            active_scopes: s.active_scopes,
            cold_activations_in_flight: s.cold_activations_in_flight,
            reclaimed_workers: s.reclaimed_workers,
            idle_scope_timeout_ms: s.idle_scope_timeout_ms,
        });
        Ok(status)
    }

    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }

    fn release_scope(&self, scope: &MemoryScope) {
        self.inner.release_scope(scope);
    }
}
