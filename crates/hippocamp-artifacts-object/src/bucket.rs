//! The object store behind the artifact store, with ordered, bounded
//! listings: through `PaginatedListStore` (S3, GCS, Azure: `start-after`
//! offsets and server-side grouping by `/`), or through an ordered
//! `list_with_offset` (the in-memory store, for tests and embedding).

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::TryStreamExt as _;
use hippocamp_core::{Error, Result};
use object_store::ObjectStore;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path;

/// Maps an object-store failure to a typed error (never leaking
/// credentials: the messages name the operation and the status only).
pub(crate) fn store_err(e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound("object"),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            Error::Unavailable("the object store refused the credentials".into())
        }
        other => Error::Unavailable(format!("object store: {other}")),
    }
}

/// Ordered listings over a bucket.
#[async_trait]
pub(crate) trait Bucket: Send + Sync + fmt::Debug {
    /// The store.
    fn store(&self) -> &Arc<dyn ObjectStore>;

    /// Keys under `prefix` (ending in `/`) strictly after `offset`,
    /// ascending, at most `max` (fewer only at the end).
    async fn list_keys(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>>;

    /// The groups (`prefix` + one more segment) under `prefix` that sort
    /// strictly after `offset`, ascending, at most `max`.
    async fn list_groups(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>>;
}

/// A store with paginated listings (S3, GCS, Azure).
pub(crate) struct Paginated<T> {
    inner: Arc<T>,
    dyn_store: Arc<dyn ObjectStore>,
}

impl<T: ObjectStore + PaginatedListStore> Paginated<T> {
    pub(crate) fn new(inner: T) -> Self {
        let inner = Arc::new(inner);
        Self {
            dyn_store: Arc::clone(&inner) as Arc<dyn ObjectStore>,
            inner,
        }
    }

    async fn list(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
        groups: bool,
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut token = None;
        while out.len() < max {
            let opts = PaginatedListOptions {
                offset: offset.map(str::to_owned),
                // Every listing here is of one level; the delimiter also
                // lets servers skip unrelated subtrees (s3s-fs walks the
                // whole bucket without one).
                delimiter: Some("/".into()),
                max_keys: Some(max - out.len()),
                page_token: token.take(),
                ..PaginatedListOptions::default()
            };
            let page = self
                .inner
                .list_paginated(Some(prefix), opts)
                .await
                .map_err(store_err)?;
            let mut items: Vec<String> = if groups {
                page.result
                    .common_prefixes
                    .iter()
                    .map(|p| format!("{}/", p.as_ref()))
                    .collect()
            } else {
                page.result
                    .objects
                    .iter()
                    .map(|o| o.location.as_ref().to_owned())
                    .collect()
            };
            items.sort();
            out.extend(items);
            match page.page_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        out.truncate(max);
        Ok(out)
    }
}

impl<T: fmt::Debug> fmt::Debug for Paginated<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Paginated").field(&self.inner).finish()
    }
}

#[async_trait]
impl<T: ObjectStore + PaginatedListStore> Bucket for Paginated<T> {
    fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.dyn_store
    }

    async fn list_keys(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>> {
        self.list(prefix, offset, max, false).await
    }

    async fn list_groups(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>> {
        self.list(prefix, offset, max, true).await
    }
}

/// A store whose `list_with_offset` returns keys in order (the in-memory
/// store); groups are formed client-side.
#[derive(Debug)]
pub(crate) struct Ordered(pub(crate) Arc<dyn ObjectStore>);

impl Ordered {
    fn keys(
        &self,
        prefix: &str,
        offset: Option<&str>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        let p = Path::from(prefix);
        match offset {
            Some(o) => self.0.list_with_offset(Some(&p), &Path::from(o)),
            None => self.0.list(Some(&p)),
        }
    }
}

#[async_trait]
impl Bucket for Ordered {
    fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.0
    }

    async fn list_keys(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>> {
        let mut s = self.keys(prefix, offset);
        let mut out = Vec::new();
        while out.len() < max {
            match s.try_next().await.map_err(store_err)? {
                Some(o) => out.push(o.location.as_ref().to_owned()),
                None => break,
            }
        }
        Ok(out)
    }

    async fn list_groups(
        &self,
        prefix: &str,
        offset: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>> {
        let mut s = self.keys(prefix, offset);
        let mut out: Vec<String> = Vec::new();
        while let Some(o) = s.try_next().await.map_err(store_err)? {
            let key = o.location.as_ref();
            let Some(rest) = key.strip_prefix(prefix) else {
                continue;
            };
            let Some((segment, _)) = rest.split_once('/') else {
                continue;
            };
            let group = format!("{prefix}{segment}/");
            if offset.is_some_and(|off| group.as_str() <= off) || out.last() == Some(&group) {
                continue;
            }
            if out.len() == max {
                break;
            }
            out.push(group);
        }
        Ok(out)
    }
}
