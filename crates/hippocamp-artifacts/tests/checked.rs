//! `ScopeChecked` runs the conformance suite, and refuses whole replies
//! that hold a record of another scope or name.

#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use hippocamp_artifacts::conformance::{InMemoryFactory, WrappedFactory};
use hippocamp_artifacts::{
    ArtifactCapabilities, ArtifactLimits, ArtifactMeta, ArtifactName, ArtifactRead, ArtifactScope,
    ArtifactStatus, ArtifactStore, Body, ByteRange, DeleteSelector, InMemoryArtifacts, Page,
    PageRequest, PutOptions, ScopeChecked, Selector,
};
use hippocamp_core::{CallOptions, Error, Result};

hippocamp_artifacts::artifact_conformance_tests!(WrappedFactory::checked(
    InMemoryFactory::default()
));

/// A misbehaving store that answers every call from one fixed scope.
#[derive(Debug)]
struct Misrouting {
    inner: InMemoryArtifacts,
    real: ArtifactScope,
}

#[async_trait]
impl ArtifactStore for Misrouting {
    fn capabilities(&self) -> ArtifactCapabilities {
        self.inner.capabilities()
    }
    async fn put(
        &self,
        _: &ArtifactScope,
        n: &ArtifactName,
        b: Body,
        o: &PutOptions,
    ) -> Result<ArtifactMeta> {
        self.inner.put(&self.real, n, b, o).await
    }
    async fn get(
        &self,
        _: &ArtifactScope,
        n: &ArtifactName,
        s: Selector,
        r: Option<ByteRange>,
        o: &CallOptions,
    ) -> Result<ArtifactRead> {
        self.inner.get(&self.real, n, s, r, o).await
    }
    async fn head(
        &self,
        _: &ArtifactScope,
        n: &ArtifactName,
        s: Selector,
        o: &CallOptions,
    ) -> Result<ArtifactMeta> {
        self.inner.head(&self.real, n, s, o).await
    }
    async fn delete(
        &self,
        _: &ArtifactScope,
        n: &ArtifactName,
        s: DeleteSelector,
        o: &CallOptions,
    ) -> Result<Vec<u64>> {
        // Claims more than one version for a single-version selector.
        let mut v = self
            .inner
            .delete(&self.real, n, DeleteSelector::All, o)
            .await?;
        if matches!(s, DeleteSelector::Version(_)) {
            v.push(u64::MAX);
        }
        Ok(v)
    }
    async fn list_names(
        &self,
        _: &ArtifactScope,
        p: &PageRequest<ArtifactName>,
        o: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        self.inner.list_names(&self.real, p, o).await
    }
    async fn list_versions(
        &self,
        _: &ArtifactScope,
        n: &ArtifactName,
        p: &PageRequest<u64>,
        o: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        self.inner.list_versions(&self.real, n, p, o).await
    }
    async fn status(&self) -> Result<ArtifactStatus> {
        self.inner.status().await
    }
}

#[tokio::test]
async fn foreign_records_refuse_the_whole_reply() {
    let real = ArtifactScope::user("app", "owner").unwrap();
    let asked = ArtifactScope::user("app", "intruder").unwrap();
    let store = ScopeChecked::new(Misrouting {
        inner: InMemoryArtifacts::new(ArtifactLimits::default()).unwrap(),
        real: real.clone(),
    });
    let name = ArtifactName::new("notes.txt").unwrap();
    let c = CallOptions::default();
    let invalid = |r: Result<()>| matches!(r, Err(Error::InvalidReply { .. }));
    assert!(invalid(
        store
            .put(
                &asked,
                &name,
                Body::from("owner's bytes"),
                &PutOptions::default()
            )
            .await
            .map(drop)
    ));
    // The put reached the owner's scope behind the wrapper's back; every
    // read of it through the wrapper is refused, never relabelled.
    assert!(invalid(
        store
            .head(&asked, &name, Selector::Latest, &c)
            .await
            .map(drop)
    ));
    assert!(invalid(
        store
            .get(&asked, &name, Selector::Latest, None, &c)
            .await
            .map(drop)
    ));
    assert!(invalid(
        store
            .list_versions(&asked, &name, &PageRequest::default(), &c)
            .await
            .map(drop)
    ));
    assert!(invalid(
        store
            .list_names(&asked, &PageRequest::default(), &c)
            .await
            .map(drop)
    ));
    assert!(invalid(
        store
            .delete(&asked, &name, DeleteSelector::Version(1), &c)
            .await
            .map(drop)
    ));
}
