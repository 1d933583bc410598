//! [`GovernedArtifacts`]: the artifact store every caller is handed, which
//! asks the policy before every operation on artifacts (as
//! [`crate::PolicyChecked`] does for memory: `put_artifact` for a put,
//! which the static policy gates on a consent covering artifacts when the
//! app requires one; `get` and `list` for reads; `delete` for deletions,
//! which are audited) and applies the policy's artifact terms
//! ([`ArtifactTerms`]) on every path. An app-scoped artifact has no user:
//! it is asked without a scope.
//!
//! On the same terms as memory entries: a version whose lifetime (the
//! app's `artifact_ttl_ms` after it was stored) has come is never returned
//! by `get`, `head`, `list_versions` or `list_names` from that exact
//! millisecond, whether or not the sweeper removed it yet; a user under a
//! legal hold cannot have any of their (or their sessions') versions
//! deleted (`LegalHold`, recorded in the audit log). [`sweep`] deletes
//! expired, unheld versions in bounded batches across the store's scopes.
//!
//! [`sweep`]: GovernedArtifacts::sweep

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_artifacts::{
    ArtifactCapabilities, ArtifactLayer, ArtifactMeta, ArtifactName, ArtifactRead, ArtifactScope,
    ArtifactStatus, ArtifactStore, Body, ByteRange, DeleteSelector, Page, PageRequest, PutOptions,
    ScopePage, Selector,
};
use hippocamp_core::ident::{check_new_id, check_segment};
use hippocamp_core::{CallOptions, Clock, Error, Field, MemoryScope, Result};
// The same report as a memory sweep: versions deleted, whether more were due.
use hippocamp_memory::Sweep;

use crate::audit::{AuditEvent, AuditLog};
use crate::gate::Gate;
use crate::policy::{Action, ArtifactTerms, Policy, Resource};

/// Asks the policy before every operation on `inner` and applies its
/// artifact terms.
#[derive(Debug, Clone)]
pub struct GovernedArtifacts<S> {
    inner: S,
    policy: Arc<dyn Policy>,
    clock: Arc<dyn Clock>,
    gate: Gate,
}

/// The memory scope an artifact scope belongs to (none for an app's).
fn owner(scope: &ArtifactScope) -> Option<MemoryScope> {
    match scope {
        ArtifactScope::App { .. } => None,
        ArtifactScope::User { app, user } | ArtifactScope::Session { app, user, .. } => {
            Some(MemoryScope::new(app.clone(), user.clone()))
        }
    }
}

fn terms(policy: &dyn Policy, scope: &ArtifactScope) -> ArtifactTerms {
    match scope {
        ArtifactScope::App { app } => policy.artifact_terms(app, None),
        ArtifactScope::User { app, user } | ArtifactScope::Session { app, user, .. } => {
            policy.artifact_terms(app, Some(user))
        }
    }
}

impl<S: ArtifactStore> GovernedArtifacts<S> {
    /// Wraps `inner`; lifetimes are measured with `clock`.
    pub fn new(inner: S, policy: Arc<dyn Policy>, clock: Arc<dyn Clock>) -> Self {
        let timeout = inner.capabilities().call_timeout();
        Self {
            gate: Gate::new(Arc::clone(&policy), Arc::clone(&clock), timeout),
            inner,
            policy,
            clock,
        }
    }

    /// Records denials, deletions and refusals by a hold in `audit`.
    #[must_use]
    pub fn with_audit(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.gate = self.gate.with_audit(audit);
        self
    }

    /// Asks the policy about `action` on `scope`'s artifacts.
    async fn ask(
        &self,
        action: Action,
        scope: &ArtifactScope,
        what: impl Into<String>,
        opts: &CallOptions,
    ) -> Result<CallOptions> {
        let r = Resource::new("artifact", what);
        let (_, call) = match scope {
            ArtifactScope::App { app } => self.gate.ask_app(action, app, r, opts).await?,
            ArtifactScope::User { app, user } | ArtifactScope::Session { app, user, .. } => {
                let owner = MemoryScope::new(app.clone(), user.clone());
                self.gate.ask(action, Some(&owner), r, opts).await?
            }
        };
        Ok(call)
    }

    /// Whether `meta` has expired now under `t` (inclusive: at the exact
    /// moment it is gone).
    fn expired(&self, t: ArtifactTerms, meta: &ArtifactMeta) -> bool {
        t.ttl_ms
            .is_some_and(|ttl| meta.created_at_ms.saturating_add(ttl) <= self.clock.now_ms())
    }

    fn live(&self, scope: &ArtifactScope, meta: ArtifactMeta) -> Result<ArtifactMeta> {
        if self.expired(terms(&*self.policy, scope), &meta) {
            Err(Error::NotFound("artifact"))
        } else {
            Ok(meta)
        }
    }

    async fn refuse_held(&self, scope: &ArtifactScope, opts: &CallOptions) -> Result<()> {
        if !terms(&*self.policy, scope).legal_hold {
            return Ok(());
        }
        if let Some(owner) = owner(scope) {
            let outcome = Error::LegalHold.code().to_owned();
            self.gate
                .record(
                    AuditEvent::Hold,
                    "artifacts",
                    Some(&owner),
                    opts.caller(),
                    outcome,
                    None,
                )
                .await;
        }
        Err(Error::LegalHold)
    }

    /// Deletes up to `max` expired versions of unheld scopes, walking the
    /// store's scopes (`list_scopes`) from the start; `more` when the
    /// batch filled first. A store that cannot list its scopes sweeps
    /// nothing (its expired versions stay invisible).
    pub async fn sweep(&self, max: u64, opts: &CallOptions) -> Result<Sweep> {
        let out = self.sweep_unaudited(max, opts).await?;
        if out.deleted > 0 {
            let ok = "ok".to_owned();
            self.gate
                .record(
                    AuditEvent::Expiry,
                    "artifacts",
                    None,
                    opts.caller(),
                    ok,
                    Some(out.deleted),
                )
                .await;
        }
        Ok(out)
    }

    async fn sweep_unaudited(&self, max: u64, opts: &CallOptions) -> Result<Sweep> {
        let mut out = Sweep::default();
        if !self.inner.capabilities().scope_listing {
            return Ok(out);
        }
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .inner
                .list_scopes(cursor.as_deref(), None, opts)
                .await?;
            for scope in &page.scopes {
                let t = terms(&*self.policy, scope);
                if t.ttl_ms.is_none() || t.legal_hold {
                    continue;
                }
                if self.sweep_scope(scope, t, max, &mut out, opts).await? {
                    return Ok(out);
                }
            }
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
    }

    /// Sweeps one scope; `true` once the batch is full.
    async fn sweep_scope(
        &self,
        scope: &ArtifactScope,
        t: ArtifactTerms,
        max: u64,
        out: &mut Sweep,
        opts: &CallOptions,
    ) -> Result<bool> {
        let mut names = PageRequest::<ArtifactName>::default();
        loop {
            let page = self.inner.list_names(scope, &names, opts).await?;
            for name in &page.items {
                let mut versions = PageRequest::<u64>::default();
                loop {
                    let vp = self
                        .inner
                        .list_versions(scope, name, &versions, opts)
                        .await?;
                    for m in vp.items.iter().filter(|m| self.expired(t, m)) {
                        if out.deleted == max {
                            out.more = true;
                            return Ok(true);
                        }
                        let gone = self
                            .inner
                            .delete(scope, name, DeleteSelector::Version(m.version), opts)
                            .await?;
                        out.deleted += gone.len() as u64;
                    }
                    match vp.next_cursor {
                        Some(c) => versions.cursor = Some(c),
                        None => break,
                    }
                }
            }
            match page.next_cursor {
                Some(c) => names.cursor = Some(c),
                None => return Ok(false),
            }
        }
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: ArtifactStore> ArtifactLayer for GovernedArtifacts<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn capabilities(&self) -> ArtifactCapabilities {
        self.inner.capabilities()
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        // A version's lifetime runs from when it was stored: nothing to
        // attach here. The app and user follow the id grammar for new data
        // (the gate checks them); the session and each name segment too.
        if let ArtifactScope::Session { session, .. } = scope {
            check_new_id(Field::SessionId, session.as_str())?;
        }
        for segment in name.as_str().split('/') {
            check_segment(Field::Name, segment)?;
        }
        let call = self
            .ask(Action::PutArtifact, scope, name.as_str(), &opts.call)
            .await?;
        let opts = PutOptions {
            call,
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
        let call = self.ask(Action::Get, scope, name.as_str(), opts).await?;
        let read = self.inner.get(scope, name, selector, range, &call).await?;
        // An expired version's stream is dropped unread.
        let meta = self.live(scope, read.meta.clone())?;
        Ok(ArtifactRead { meta, ..read })
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        let call = self.ask(Action::Get, scope, name.as_str(), opts).await?;
        let meta = self.inner.head(scope, name, selector, &call).await?;
        self.live(scope, meta)
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        self.refuse_held(scope, opts).await?;
        let call = self.ask(Action::Delete, scope, name.as_str(), opts).await?;
        let result = self.inner.delete(scope, name, selector, &call).await;
        self.gate
            .recorded(
                AuditEvent::ArtifactErasure,
                "artifact",
                owner(scope).as_ref(),
                opts.caller(),
                result,
                |v| v.len() as u64,
            )
            .await
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let call = self
            .ask(Action::List, scope, "a page of names", opts)
            .await?;
        let mut out = self.inner.list_names(scope, page, &call).await?;
        let t = terms(&*self.policy, scope);
        if t.ttl_ms.is_some() {
            // Versions of a name are stored in order, so a name whose
            // latest version expired has none left alive.
            let mut kept = Vec::with_capacity(out.items.len());
            for name in out.items {
                match self.inner.head(scope, &name, Selector::Latest, &call).await {
                    Ok(m) if !self.expired(t, &m) => kept.push(name),
                    Ok(_) | Err(Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            out.items = kept;
        }
        Ok(out)
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let call = self.ask(Action::List, scope, name.as_str(), opts).await?;
        let mut out = self.inner.list_versions(scope, name, page, &call).await?;
        let t = terms(&*self.policy, scope);
        out.items.retain(|m| !self.expired(t, m));
        Ok(out)
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<ScopePage> {
        let r = Resource::fixed("artifacts", "the scopes that hold artifacts");
        let (_, call) = self.gate.ask(Action::List, None, r, opts).await?;
        self.inner.list_scopes(cursor, limit, &call).await
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        self.inner.status().await
    }

    async fn activate_scope(&self, scope: &ArtifactScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }

    fn release_scope(&self, scope: &ArtifactScope) {
        self.inner.release_scope(scope);
    }
}
