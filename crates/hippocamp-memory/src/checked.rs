//! A wrapper that enforces "scope is authority" on replies.
//!
//! [`ScopeChecked`] forwards every call and checks every record that comes
//! back against the requested scope. One foreign record rejects the whole
//! reply with `ScopeViolation`: it is never filtered out or relabelled. The
//! server and the agent tools put every store behind it.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, EntryId, Error, MemoryScope, Result, SessionId};

use crate::entry::{MemoryEntry, NewEntry};
use crate::event::{Event, IngestReport};
use crate::store::{
    AddOutcome, Capabilities, MemoryStore, SearchRequest, SearchResults, StoreStatus, WriteOptions,
};

/// Checks every returned record against the requested scope.
#[derive(Debug, Clone)]
pub struct ScopeChecked<S> {
    inner: S,
}

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

fn own(scope: &MemoryScope, entry: &MemoryEntry) -> Result<()> {
    if entry.scope == *scope {
        Ok(())
    } else {
        Err(Error::ScopeViolation)
    }
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
        let out = self.inner.add_entry(scope, entry, opts).await?;
        own(scope, &out.entry)?;
        Ok(out)
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
            return Err(Error::ScopeViolation);
        }
        Ok(entry)
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        id: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
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

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner.delete_user(scope, opts).await
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner.erasure_epoch(scope, opts).await
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
