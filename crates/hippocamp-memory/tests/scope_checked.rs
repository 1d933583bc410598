//! `ScopeChecked` runs the conformance suite and rejects foreign records.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, EntryId, Error, MemoryScope, Result, SessionId};
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::event::{Event, IngestReport};
use hippocamp_memory::{
    AddOutcome, Capabilities, Erasure, InMemoryStore, MemoryConfig, MemoryEntry, MemoryStore,
    NewEntry, ScopeChecked, SearchRequest, SearchResults, StoreStatus, WriteOptions,
};

struct CheckedFactory;

#[async_trait]
impl StoreFactory for CheckedFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        Arc::new(ScopeChecked::new(InMemoryStore::new(config).unwrap()))
    }
}

hippocamp_memory::memory_conformance_tests!(CheckedFactory);

/// A misbehaving store that answers every call from one fixed scope.
#[derive(Debug)]
struct Misrouting {
    inner: InMemoryStore,
    real: MemoryScope,
}

#[async_trait]
impl MemoryStore for Misrouting {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn add_entry(
        &self,
        _: &MemoryScope,
        e: NewEntry,
        o: &WriteOptions,
    ) -> Result<AddOutcome> {
        self.inner.add_entry(&self.real, e, o).await
    }
    async fn add_events(
        &self,
        _: &MemoryScope,
        s: &SessionId,
        e: &[Event],
        o: &WriteOptions,
    ) -> Result<IngestReport> {
        self.inner.add_events(&self.real, s, e, o).await
    }
    async fn search(
        &self,
        _: &MemoryScope,
        r: &SearchRequest,
        o: &CallOptions,
    ) -> Result<SearchResults> {
        self.inner.search(&self.real, r, o).await
    }
    async fn get_entry(
        &self,
        _: &MemoryScope,
        id: &EntryId,
        o: &CallOptions,
    ) -> Result<MemoryEntry> {
        self.inner.get_entry(&self.real, id, o).await
    }
    async fn delete_entry(&self, _: &MemoryScope, id: &EntryId, o: &CallOptions) -> Result<u64> {
        self.inner.delete_entry(&self.real, id, o).await
    }
    async fn delete_session(&self, _: &MemoryScope, s: &SessionId, o: &CallOptions) -> Result<u64> {
        self.inner.delete_session(&self.real, s, o).await
    }
    async fn delete_user(&self, _: &MemoryScope, o: &CallOptions) -> Result<Erasure> {
        self.inner.delete_user(&self.real, o).await
    }
    async fn erasure_epoch(&self, _: &MemoryScope, o: &CallOptions) -> Result<u64> {
        self.inner.erasure_epoch(&self.real, o).await
    }
    async fn erasure_fence(
        &self,
        _: &MemoryScope,
        session: &SessionId,
        o: &CallOptions,
    ) -> Result<hippocamp_memory::ErasureFence> {
        self.inner.erasure_fence(&self.real, session, o).await
    }
    async fn status(&self) -> Result<StoreStatus> {
        self.inner.status().await
    }
}

#[tokio::test]
async fn foreign_records_refuse_the_whole_reply() {
    let real = MemoryScope::parse("app", "owner").unwrap();
    let asked = MemoryScope::parse("app", "intruder").unwrap();
    let store = ScopeChecked::new(Misrouting {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        real: real.clone(),
    });
    let w = WriteOptions::default();
    let c = CallOptions::default();
    let invalid = |r: Result<()>| matches!(r, Err(Error::InvalidReply { .. }));
    let added = store
        .add_entry(&asked, NewEntry::new("owner fact"), &w)
        .await;
    assert!(invalid(added.map(drop)));
    assert!(invalid(
        store
            .search(&asked, &SearchRequest::new("owner"), &c)
            .await
            .map(drop)
    ));
    // An event's entry id is derived from the scope: one stored under the
    // owner's scope does not have the id the asked scope derives.
    let session = SessionId::new("s").unwrap();
    let events = [Event::text("e1", "user", 1, "an owner event")];
    assert!(invalid(
        store
            .add_events(&asked, &session, &events, &w)
            .await
            .map(drop)
    ));
    let inner_hit = store
        .inner()
        .search(&real, &SearchRequest::new("owner event"), &c)
        .await
        .unwrap();
    let id = inner_hit.hits[0].entry.id;
    assert!(invalid(store.get_entry(&asked, &id, &c).await.map(drop)));
}
