//! The volatile in-memory artifact store.
//!
//! Each scope has its own lock, so different scopes never wait for each
//! other; the store-wide counters are a short lock. A name's high-water
//! version survives the deletion of all its versions, so numbers are never
//! reused while the store lives. Quotas: one artifact, per scope and total,
//! in bytes and in live versions; deletion frees capacity, never numbers.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_core::time::now_ms;
use hippocamp_core::{CallOptions, Deadline, Error, QuotaLimit, Result, Stage};
use parking_lot::{Mutex, RwLock};

use crate::integrity::{BytesSource, ChunkHasher, Integrity, verified_stream};
use crate::model::{
    ArtifactMeta, ArtifactName, ArtifactScope, ByteRange, DeleteSelector, Page, PageRequest,
    PutOptions, Selector,
};
use crate::store::{
    ArtifactCapabilities, ArtifactLimits, ArtifactRead, ArtifactStatus, ArtifactStore, Body,
    check_put, check_version, pick,
};

#[derive(Debug, Clone)]
struct Stored {
    meta: ArtifactMeta,
    data: Bytes,
    integrity: Arc<Integrity>,
}

#[derive(Debug, Default)]
struct NameState {
    high_water: u64,
    versions: BTreeMap<u64, Stored>,
}

#[derive(Debug, Default)]
struct ScopeState {
    names: BTreeMap<ArtifactName, NameState>,
    bytes: u64,
    count: u64,
}

type ScopeRef = Arc<tokio::sync::Mutex<ScopeState>>;

/// A volatile, in-process artifact store.
#[derive(Debug)]
pub struct InMemoryArtifacts {
    limits: ArtifactLimits,
    scopes: RwLock<HashMap<ArtifactScope, ScopeRef>>,
    totals: Mutex<(u64, u64)>,
}

/// Reads a whole body into memory by `deadline` (else `Timeout` at the
/// transfer), bounded by `limits.max_artifact_bytes`, computing its
/// integrity record (`limits.chunk_size` chunks) on the way: what a store
/// that holds bodies whole does with a put's body.
pub async fn collect_body(
    body: Body,
    limits: &ArtifactLimits,
    deadline: Deadline,
) -> Result<(Bytes, Integrity)> {
    tokio::time::timeout_at(
        deadline.instant().into(),
        read_whole(body, limits.max_artifact_bytes, limits.chunk_size),
    )
    .await
    .map_err(|_| Error::Timeout(Stage::Transfer))?
}

async fn read_whole(body: Body, max: u64, chunk_size: u64) -> Result<(Bytes, Integrity)> {
    let mut hasher = ChunkHasher::new(chunk_size);
    let too_big = || Error::TooLarge {
        limit: "max_artifact_bytes",
        max,
    };
    let data = match body {
        Body::Bytes(b) => {
            if b.len() as u64 > max {
                return Err(too_big());
            }
            hasher.update(&b);
            b
        }
        Body::Stream(mut s) => {
            let mut buf = Vec::new();
            while let Some(piece) = s.next().await {
                let piece = piece?;
                if (buf.len() + piece.len()) as u64 > max {
                    return Err(too_big());
                }
                hasher.update(&piece);
                buf.extend_from_slice(&piece);
            }
            Bytes::from(buf)
        }
    };
    Ok((data, hasher.finish()))
}

impl InMemoryArtifacts {
    /// A store with `limits`.
    pub fn new(limits: ArtifactLimits) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            limits,
            scopes: RwLock::new(HashMap::new()),
            totals: Mutex::new((0, 0)),
        })
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.limits.call_timeout())
    }

    fn find(&self, scope: &ArtifactScope) -> Option<ScopeRef> {
        self.scopes.read().get(scope).cloned()
    }

    fn find_or_create(&self, scope: &ArtifactScope) -> ScopeRef {
        if let Some(s) = self.find(scope) {
            return s;
        }
        self.scopes
            .write()
            .entry(scope.clone())
            .or_default()
            .clone()
    }

    async fn lock(
        scope: &ScopeRef,
        deadline: Deadline,
    ) -> Result<tokio::sync::MutexGuard<'_, ScopeState>> {
        tokio::time::timeout_at(deadline.instant().into(), scope.lock())
            .await
            .map_err(|_| Error::Timeout(Stage::Queueing))
    }

    /// Flips one stored byte, for tests that show corruption is caught.
    #[cfg(any(test, feature = "conformance"))]
    #[doc(hidden)]
    pub async fn corrupt_for_test(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        let Some(s) = self.find(scope) else {
            return false;
        };
        let mut s = s.lock().await;
        let Some(stored) = s
            .names
            .get_mut(name)
            .and_then(|n| n.versions.get_mut(&version))
        else {
            return false;
        };
        let mut data = stored.data.to_vec();
        let Some(b) = usize::try_from(offset).ok().and_then(|o| data.get_mut(o)) else {
            return false;
        };
        *b ^= 0x5a;
        stored.data = Bytes::from(data);
        true
    }
}

#[async_trait]
impl ArtifactStore for InMemoryArtifacts {
    fn capabilities(&self) -> ArtifactCapabilities {
        ArtifactCapabilities {
            api_version: 1,
            backend: "memory".to_owned(),
            durable: false,
            scopes: vec!["app".into(), "user".into(), "session".into()],
            immutable_versions: true,
            range_reads: true,
            // Every version's bytes are held whole in memory.
            streaming: false,
            scope_listing: true,
            limits: self.limits.describe_all(),
            routing: None,
        }
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(&opts.call);
        check_put(opts)?;
        let (data, integrity) = collect_body(body, &self.limits, deadline).await?;
        let size = integrity.size;
        let state = self.find_or_create(scope);
        let mut s = Self::lock(&state, deadline).await?;
        let l = &self.limits;
        if s.count + 1 > l.max_scope_artifacts {
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactsPerScope(l.max_scope_artifacts),
            });
        }
        if s.bytes + size > l.max_scope_bytes {
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactBytesPerScope(l.max_scope_bytes),
            });
        }
        let mut totals = self.totals.lock();
        if totals.0 + 1 > l.max_total_artifacts {
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactsTotal(l.max_total_artifacts),
            });
        }
        if totals.1 + size > l.max_total_bytes {
            return Err(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactBytesTotal(l.max_total_bytes),
            });
        }
        deadline.check(Stage::Commit)?;
        totals.0 += 1;
        totals.1 += size;
        drop(totals);
        s.count += 1;
        s.bytes += size;
        let n = s.names.entry(name.clone()).or_default();
        n.high_water += 1;
        let meta = ArtifactMeta {
            scope: scope.clone(),
            name: name.clone(),
            version: n.high_water,
            mime_type: opts.mime_type.clone(),
            size,
            sha256: integrity.sha256,
            chunk_size: integrity.chunk_size,
            created_at_ms: now_ms(),
            metadata: opts.metadata.clone(),
        };
        n.versions.insert(
            meta.version,
            Stored {
                meta: meta.clone(),
                data,
                integrity: Arc::new(integrity),
            },
        );
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
        let deadline = self.deadline(opts);
        let stored = {
            let state = self.find(scope).ok_or(Error::NotFound("artifact"))?;
            let s = Self::lock(&state, deadline).await?;
            let n = s.names.get(name).ok_or(Error::NotFound("artifact"))?;
            let v = pick(selector, n.versions.keys().copied())?;
            n.versions
                .get(&v)
                .cloned()
                .ok_or(Error::NotFound("artifact version"))?
        };
        if let Some(r) = range {
            r.check(stored.meta.size)?;
        }
        let body = verified_stream(
            BytesSource(stored.data, stored.integrity.chunk_size),
            stored.integrity,
            range,
        );
        Ok(ArtifactRead {
            meta: stored.meta,
            range,
            body,
        })
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(opts);
        let state = self.find(scope).ok_or(Error::NotFound("artifact"))?;
        let s = Self::lock(&state, deadline).await?;
        let n = s.names.get(name).ok_or(Error::NotFound("artifact"))?;
        let v = pick(selector, n.versions.keys().copied())?;
        Ok(n.versions[&v].meta.clone())
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let deadline = self.deadline(opts);
        if let DeleteSelector::Version(v) = selector {
            check_version(v)?;
        }
        let Some(state) = self.find(scope) else {
            return Ok(Vec::new());
        };
        let mut s = Self::lock(&state, deadline).await?;
        let Some(n) = s.names.get_mut(name) else {
            return Ok(Vec::new());
        };
        let chosen: Vec<u64> = match selector {
            DeleteSelector::All => n.versions.keys().copied().collect(),
            DeleteSelector::Latest => n.versions.keys().next_back().copied().into_iter().collect(),
            DeleteSelector::Version(v) => n
                .versions
                .contains_key(&v)
                .then_some(v)
                .into_iter()
                .collect(),
        };
        deadline.check(Stage::Commit)?;
        let mut freed = 0;
        for v in &chosen {
            if let Some(st) = n.versions.remove(v) {
                freed += st.meta.size;
            }
        }
        let count = chosen.len() as u64;
        s.count -= count;
        s.bytes -= freed;
        let mut totals = self.totals.lock();
        totals.0 -= count;
        totals.1 -= freed;
        Ok(chosen)
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let deadline = self.deadline(opts);
        let limit = self.limits.page_limit(page.limit)?;
        let mut items = Vec::new();
        let mut next_cursor = None;
        if let Some(state) = self.find(scope) {
            let s = Self::lock(&state, deadline).await?;
            let lower = page
                .cursor
                .as_ref()
                .map_or(Bound::Unbounded, Bound::Excluded);
            let mut live = s
                .names
                .range((lower, Bound::Unbounded))
                .filter(|(_, n)| !n.versions.is_empty())
                .map(|(k, _)| k.clone());
            items.extend(live.by_ref().take(limit));
            if live.next().is_some() {
                next_cursor = items.last().cloned();
            }
        }
        Ok(Page {
            scope: scope.clone(),
            items,
            next_cursor,
        })
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let deadline = self.deadline(opts);
        let limit = self.limits.page_limit(page.limit)?;
        let mut items = Vec::new();
        let mut next_cursor = None;
        if let Some(state) = self.find(scope) {
            let s = Self::lock(&state, deadline).await?;
            if let Some(n) = s.names.get(name) {
                let lower = page.cursor.map_or(Bound::Unbounded, Bound::Excluded);
                let mut it = n.versions.range((lower, Bound::Unbounded));
                items.extend(it.by_ref().take(limit).map(|(_, st)| st.meta.clone()));
                if it.next().is_some() {
                    next_cursor = items.last().map(|m: &ArtifactMeta| m.version);
                }
            }
        }
        Ok(Page {
            scope: scope.clone(),
            items,
            next_cursor,
        })
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        _opts: &CallOptions,
    ) -> Result<crate::model::ScopePage> {
        let limit = self.limits.page_limit(limit)?;
        let all: Vec<(ArtifactScope, ScopeRef)> = self
            .scopes
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut held = Vec::new();
        for (scope, state) in all {
            // A name keeps its counter after its versions go (numbers are
            // never reused): a scope holds something only with a version.
            let holds = state
                .lock()
                .await
                .names
                .values()
                .any(|n| !n.versions.is_empty());
            if holds {
                held.push((scope.hash(), scope));
            }
        }
        crate::model::scope_page(held, cursor, limit)
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        let (artifacts, bytes) = *self.totals.lock();
        Ok(ArtifactStatus {
            backend: "memory".to_owned(),
            artifacts: Some(artifacts),
            bytes: Some(bytes),
            router: None,
        })
    }
}
