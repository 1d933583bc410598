//! An artifact store behind the exact-scope router (`hippocamp-router`):
//! bounded active scopes and activations, idle reclamation of a durable
//! store's per-scope state, the caller's deadline forwarded. Deletes take
//! their scope's turn (one at a time, in arrival order); puts and reads do
//! not, because the store allocates a version only when a put publishes,
//! so concurrent uploads to one scope never block each other.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Deadline, Result};
use hippocamp_router::{Access, RouterConfig, RouterStats, ScopeRouter, ScopeState};

use hippocamp_artifacts::model::{
    ArtifactMeta, ArtifactName, ArtifactScope, ByteRange, DeleteSelector, Page, PageRequest,
    PutOptions, Selector,
};
use hippocamp_artifacts::store::{
    ArtifactCapabilities, ArtifactRead, ArtifactStatus, ArtifactStore, Body,
};

struct Adapter {
    inner: Arc<dyn ArtifactStore>,
    volatile: bool,
}

#[async_trait]
impl ScopeState<ArtifactScope> for Adapter {
    async fn activate(&self, scope: &ArtifactScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }
    fn release(&self, scope: &ArtifactScope) {
        self.inner.release_scope(scope);
    }
    fn volatile(&self) -> bool {
        self.volatile
    }
}

/// A store behind an exact-scope (or shared) router.
#[derive(Debug)]
pub struct RoutedArtifacts {
    inner: Arc<dyn ArtifactStore>,
    router: ScopeRouter<ArtifactScope>,
    default_timeout: Duration,
}

impl RoutedArtifacts {
    /// Routes `inner` with `config`.
    pub fn new(inner: Arc<dyn ArtifactStore>, config: RouterConfig) -> Result<Self> {
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

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl ArtifactStore for RoutedArtifacts {
    fn capabilities(&self) -> ArtifactCapabilities {
        let mut caps = self.inner.capabilities();
        caps.routing = Some(self.router.stats());
        caps
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(&opts.call);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        let opts = PutOptions {
            call: CallOptions::until(deadline),
            ..opts.clone()
        };
        self.inner.put(scope, name, body, &opts).await
    }

    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .get(scope, name, selector, range, &CallOptions::until(deadline))
            .await
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .head(scope, name, selector, &CallOptions::until(deadline))
            .await
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Write).await?;
        self.inner
            .delete(scope, name, selector, &CallOptions::until(deadline))
            .await
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .list_names(scope, page, &CallOptions::until(deadline))
            .await
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let deadline = self.deadline(opts);
        let _lease = self.router.enter(scope, deadline, Access::Read).await?;
        self.inner
            .list_versions(scope, name, page, &CallOptions::until(deadline))
            .await
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<hippocamp_artifacts::model::ScopePage> {
        // The store's index of scopes, not any one scope: no worker to enter.
        self.inner.list_scopes(cursor, limit, opts).await
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        let mut s = self.inner.status().await?;
        s.router = Some(self.router.stats());
        Ok(s)
    }

    async fn activate_scope(&self, scope: &ArtifactScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }

    fn release_scope(&self, scope: &ArtifactScope) {
        self.inner.release_scope(scope);
    }
}

/// A conformance factory whose stores are those of `inner` behind the
/// router with `config`, so the router runs the suite of every store it
/// fronts.
///
/// # Panics
///
/// When a store is opened with an invalid `config` (the test's bug).
#[cfg(feature = "conformance")]
#[allow(clippy::expect_used)] // test support: a bad config is the test's bug
pub fn routed_factory<F>(
    inner: F,
    config: RouterConfig,
) -> hippocamp_artifacts::conformance::WrappedFactory<F> {
    hippocamp_artifacts::conformance::WrappedFactory::new(inner, move |s| {
        Arc::new(RoutedArtifacts::new(s, config.clone()).expect("a valid router configuration"))
    })
}
