//! A wrapper that enforces "scope is authority" on artifact replies.
//!
//! [`ScopeChecked`] forwards every call and checks what comes back: every
//! record must carry the requested scope and name (and the version asked
//! for), a read must cover the range asked for, pages must be of the
//! requested scope and strictly after their cursor, and a delete may only
//! report versions its selector could remove. One wrong record refuses the
//! whole reply as `InvalidReply` (HTTP 502); nothing of it is passed on.
//! For a put or a delete the backend may still have applied it, so its
//! outcome is unknown (a listing shows what exists). The services put
//! every artifact store they hand out behind it.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Error, Result};

use crate::model::{
    ArtifactMeta, ArtifactName, ArtifactScope, ByteRange, DeleteSelector, Page, PageRequest,
    PutOptions, Selector,
};
use crate::store::{
    ArtifactCapabilities, ArtifactRead, ArtifactStatus, ArtifactStore, Body, check_record_from,
};

const SERVICE: &str = "the artifact store";

/// Checks every returned record against the requested scope and name.
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

fn bad(detail: impl Into<String>) -> Error {
    Error::InvalidReply {
        service: SERVICE,
        detail: detail.into(),
    }
}

fn record(
    meta: &ArtifactMeta,
    scope: &ArtifactScope,
    name: &ArtifactName,
    selector: Selector,
) -> Result<()> {
    let version = match selector {
        Selector::Version(v) => Some(v),
        Selector::Latest => None,
    };
    check_record_from(SERVICE, meta, scope, name, version)?;
    if meta.version == 0 {
        return Err(bad("it returned version 0"));
    }
    Ok(())
}

/// Items strictly ascending and after the cursor, at most `limit`.
fn ordered<T: PartialOrd>(items: &[T], cursor: Option<&T>, limit: Option<u64>) -> Result<()> {
    if limit.is_some_and(|l| items.len() as u64 > l) {
        return Err(bad("it returned a page longer than asked for"));
    }
    let first_ok = match (cursor, items.first()) {
        (Some(c), Some(f)) => f > c,
        _ => true,
    };
    if !first_ok || items.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad("it returned a page out of order or before its cursor"));
    }
    Ok(())
}

fn page_scope<T, C>(page: &Page<T, C>, scope: &ArtifactScope) -> Result<()> {
    if page.scope == *scope {
        Ok(())
    } else {
        Err(Error::foreign_record(SERVICE, "a page"))
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: ArtifactStore> ArtifactStore for ScopeChecked<S> {
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
        let meta = self.inner.put(scope, name, body, opts).await?;
        record(&meta, scope, name, Selector::Latest)?;
        Ok(meta)
    }

    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        let read = self.inner.get(scope, name, selector, range, opts).await?;
        record(&read.meta, scope, name, selector)?;
        if read.range != range {
            return Err(bad("it read another range than the one asked for"));
        }
        Ok(read)
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        let meta = self.inner.head(scope, name, selector, opts).await?;
        record(&meta, scope, name, selector)?;
        Ok(meta)
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let removed = self.inner.delete(scope, name, selector, opts).await?;
        let possible = match selector {
            DeleteSelector::Version(v) => removed.iter().all(|r| *r == v) && removed.len() <= 1,
            DeleteSelector::Latest => removed.len() <= 1,
            DeleteSelector::All => true,
        };
        if !possible || removed.contains(&0) || removed.windows(2).any(|w| w[0] >= w[1]) {
            return Err(bad(format!(
                "it reported removing {removed:?} for {selector:?}"
            )));
        }
        Ok(removed)
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let out = self.inner.list_names(scope, page, opts).await?;
        page_scope(&out, scope)?;
        ordered(&out.items, page.cursor.as_ref(), page.limit)?;
        Ok(out)
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let out = self.inner.list_versions(scope, name, page, opts).await?;
        page_scope(&out, scope)?;
        for m in &out.items {
            record(m, scope, name, Selector::Latest)?;
        }
        let versions: Vec<u64> = out.items.iter().map(|m| m.version).collect();
        ordered(&versions, page.cursor.as_ref(), page.limit)?;
        Ok(out)
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<crate::model::ScopePage> {
        let out = self.inner.list_scopes(cursor, limit, opts).await?;
        if limit.is_some_and(|l| out.scopes.len() as u64 > l) {
            return Err(bad(format!(
                "it listed {} scopes for a page of {limit:?}",
                out.scopes.len()
            )));
        }
        Ok(out)
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
