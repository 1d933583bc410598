//! A wrapper that enforces "scope is authority" on replies.
//!
//! [`ScopeChecked`] forwards every call and checks every record that comes
//! back against what was asked: an entry must carry the requested scope,
//! an entry fetched by id must have that id, an entry added under an
//! idempotency key (or from an event) must have the id that key derives in
//! the requested scope, and a count must be possible (one entry removes at
//! most one). One wrong record refuses the whole reply as
//! [`Error::InvalidReply`] (HTTP 502: the backend misbehaved); nothing of
//! it is filtered out, relabelled or passed on. For a mutation the
//! backend may still have applied it, so its outcome is unknown: retried
//! with the same idempotency key it is done at most once. Every store
//! `hippocamp-services` hands out (to the server, the CLI and the
//! evaluation harness) is behind it.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, EntryId, Error, IdempotencyKey, MemoryScope, Result, SessionId};

use crate::entry::{EntryUpdate, MemoryEntry, NewEntry, Revision, UpdateOutcome};
use crate::event::{Event, IngestReport, IngestedEvent};
use crate::import::{ImportReport, ImportedEntry};
use crate::store::{
    AddOutcome, Capabilities, EntryPage, Erasure, ErasureFence, ListRequest, MemoryStore, NamePage,
    NamesRequest, SearchRequest, SearchResults, StoreStatus, Sweep, WriteOptions,
};

/// Checks every returned record against the requested scope.
#[derive(Debug, Clone)]
pub struct ScopeChecked<S> {
    inner: S,
}

const SERVICE: &str = "the memory store";

impl<S> ScopeChecked<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

fn bad(detail: impl Into<String>) -> Error {
    Error::InvalidReply {
        service: SERVICE,
        detail: detail.into(),
    }
}

fn own(scope: &MemoryScope, entry: &MemoryEntry) -> Result<()> {
    if entry.scope == *scope {
        Ok(())
    } else {
        Err(Error::foreign_record(SERVICE, "an entry"))
    }
}

/// The id an event's entry must have in `scope`.
fn event_entry_id(scope: &MemoryScope, event_id: &str) -> Option<EntryId> {
    let key = IdempotencyKey::new(format!("event:{event_id}")).ok()?;
    Some(EntryId::derive(scope, &key))
}

/// Every added or duplicate event names an event of the request, by its
/// position and id, and the entry that event derives in `scope`.
fn check_report(scope: &MemoryScope, events: &[Event], report: &IngestReport) -> Result<()> {
    let check = |e: &IngestedEvent| {
        let asked = events
            .get(e.index)
            .filter(|ev| ev.id == e.event_id.as_str())
            .ok_or_else(|| bad(format!("it reported event {} that was not sent", e.index)))?;
        if event_entry_id(scope, &asked.id) != Some(e.entry_id) {
            return Err(Error::foreign_record(SERVICE, "an event's entry"));
        }
        Ok(())
    };
    report
        .added
        .iter()
        .chain(&report.duplicates)
        .try_for_each(check)?;
    if report.skipped.iter().any(|s| s.index >= events.len()) {
        return Err(bad("it skipped an event that was not sent"));
    }
    Ok(())
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for ScopeChecked<S> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        let expected = entry
            .idempotency_key
            .as_ref()
            .map(|k| EntryId::derive(scope, k));
        let out = self.inner.add_entry(scope, entry, opts).await?;
        own(scope, &out.entry)?;
        if expected.is_some_and(|id| id != out.entry.id) {
            return Err(Error::foreign_record(SERVICE, "an entry of another key"));
        }
        Ok(out)
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let report = self.inner.add_events(scope, session, events, opts).await?;
        check_report(scope, events, &report)?;
        Ok(report)
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
        let out = self.inner.search(scope, request, opts).await?;
        for hit in &out.hits {
            own(scope, &hit.entry)?;
        }
        Ok(out)
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        let entry = self.inner.get_entry(scope, id, opts).await?;
        own(scope, &entry)?;
        if entry.id != *id {
            return Err(Error::foreign_record(SERVICE, "an entry of another id"));
        }
        Ok(entry)
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        // More than one is what was derived from it (erasure follows
        // lineage), which only the store knows.
        self.inner.delete_entry(scope, id, opts).await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        self.inner.delete_session(scope, session, opts).await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let e = self.inner.delete_user(scope, opts).await?;
        if e.epoch == 0 {
            return Err(bad("an erasure left the epoch at 0"));
        }
        Ok(e)
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner.erasure_epoch(scope, opts).await
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<ErasureFence> {
        self.inner.erasure_fence(scope, session, opts).await
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let page = self.inner.list_entries(scope, request, opts).await?;
        for entry in &page.entries {
            own(scope, entry)?;
        }
        Ok(page)
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &crate::store::ExportRequest,
        opts: &CallOptions,
    ) -> Result<crate::store::EntryPage> {
        let page = self.inner.export_entries(scope, request, opts).await?;
        for entry in &page.entries {
            own(scope, entry)?;
        }
        Ok(page)
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        let sweep = self.inner.sweep_expired(max, spare, opts).await?;
        if sweep.deleted > max {
            return Err(bad(format!(
                "a sweep of at most {max} removed {}",
                sweep.deleted
            )));
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
        let out = self.inner.update_entry(scope, id, update, opts).await?;
        own(scope, &out.entry)?;
        if out.entry.id != *id {
            return Err(Error::foreign_record(SERVICE, "an entry of another id"));
        }
        Ok(out)
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        let history = self.inner.entry_history(scope, id, opts).await?;
        if history.windows(2).any(|w| w[0].revision <= w[1].revision) {
            return Err(bad("it returned a history out of order"));
        }
        Ok(history)
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<crate::lineage::Lineage> {
        self.inner.entry_lineage(scope, id, opts).await
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        let r = self.inner.import_entries(scope, entries, opts).await?;
        if r.imported + r.existing + r.erased + r.expired + r.unsourced != entries.len() as u64 {
            return Err(bad("its import report does not add up to the entries sent"));
        }
        Ok(r)
    }

    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &crate::erasure::ErasureRequest,
        opts: &CallOptions,
    ) -> Result<crate::erasure::ErasurePage> {
        // Ids and counters only: nothing that names a scope to check.
        self.inner.export_erasures(scope, request, opts).await
    }

    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &crate::erasure::ImportedErasures,
        opts: &CallOptions,
    ) -> Result<crate::erasure::ErasureImport> {
        self.inner.import_erasures(scope, erasures, opts).await
    }

    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        let page = self.inner.list_apps(request, opts).await?;
        for name in &page.names {
            hippocamp_core::AppName::new(name.as_str())
                .map_err(|_| bad("it listed an app name that is not valid"))?;
        }
        Ok(page)
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        let page = self.inner.list_users(app, request, opts).await?;
        for name in &page.names {
            hippocamp_core::UserId::new(name.as_str())
                .map_err(|_| bad("it listed a user id that is not valid"))?;
        }
        Ok(page)
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
