//! The object-store artifact store.
//!
//! # Versions
//!
//! A put uploads its content under a fresh key (multipart when large,
//! hashing every chunk on the way), writes the name's live marker, then
//! allocates the version with a create-only write (`PutMode::Create`, an
//! `If-None-Match: *` on S3) of the manifest at the next zero-padded
//! version key: the first writer of a key wins, so servers sharing a
//! bucket never allocate one number twice, and a refused write retries at
//! the next number. The manifest's creation is the publication point. The
//! put's deadline is checked last just before that write, which is never
//! cut off once sent: its outcome decides, so a published version is never
//! reported as a failure (and its content never removed). A create whose
//! answer is lost or refused as already existing (a client retry of a
//! write that landed) is settled by reading the manifest back: ours is
//! success; one that is absent leaves the content in place (a repair pass
//! removes unreferenced content) and reports the failure.
//! Deletion overwrites the manifest with a tombstone (the key stays, so
//! the number is never allocated again) and then removes the marker and
//! the content. Within one process, writes to one name queue on a striped
//! lock so they do not race each other for numbers.
//!
//! `Latest` reads a name's hint (the last version allocated, and the
//! latest live one as of when a put or delete wrote it; see
//! [`crate::layout`]): it verifies that manifest and looks only at
//! versions allocated since, so it costs a listing and a few reads however
//! many versions were deleted; a hint that does not verify (another
//! server deleted that version) falls back to walking down the manifests.
//!
//! At start the store probes that the server refuses a second create-only
//! write to one key (Garage 2.5, for one, ignores `If-None-Match`) and
//! refuses to run if it does not.
//!
//! # What an object store cannot do here
//!
//! There is no transaction across objects: a delete of several versions
//! can stop half way (it then reports the versions it deleted), and a crash
//! between a put's marker and its manifest leaves a marker that lists a
//! name with no version, or content no manifest references. Scope and
//! store-wide quotas need counters a bucket does not keep: only the size
//! of one artifact is enforced, and `capabilities()` lists only what is.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use hippocamp_artifacts::integrity::{
    ChunkHasher, ChunkSource, Integrity, verified_stream, verify_chunk,
};
use hippocamp_artifacts::store::{check_put, check_record, check_version};
use hippocamp_artifacts::{
    ArtifactCapabilities, ArtifactMeta, ArtifactName, ArtifactRead, ArtifactScope, ArtifactStatus,
    ArtifactStore, Body, ByteRange, DeleteSelector, Page, PageRequest, PutOptions, Selector,
};
use hippocamp_core::time::now_ms;
use hippocamp_core::{CallOptions, Deadline, Error, Field, LimitInfo, Problem, Result, Stage};
use object_store::path::Path;
use object_store::{GetOptions, ObjectStoreExt as _, PutMode, PutPayload, WriteMultipart};
use serde::{Deserialize, Serialize};

use crate::bucket::{Bucket, store_err};
use crate::layout::{
    Hint, Layout, MANIFEST_FORMAT, MAX_OBJECT_NAME_BYTES, Manifest, group_name, key_version,
};

/// Settings of an object-store artifact store. Every value is checked and
/// reported by `capabilities()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObjectOptions {
    /// Key prefix inside the bucket (1 ..= 128 bytes of `[A-Za-z0-9._/-]`).
    pub prefix: String,
    /// Bytes of one artifact.
    pub max_artifact_bytes: u64,
    /// Items in one listing page.
    pub max_page_limit: u64,
    /// Items in a page when the request gives no limit.
    pub default_page_limit: u64,
    /// Timeout of a call that gives none, milliseconds.
    pub call_timeout_ms: u64,
    /// Bytes per integrity chunk.
    pub chunk_size: u64,
    /// Bytes per multipart part; bodies up to this size are one request.
    pub part_bytes: u64,
    /// Manifests fetched at once while listing versions.
    pub list_concurrency: u64,
}

impl Default for ObjectOptions {
    fn default() -> Self {
        Self {
            prefix: "hippocamp/artifacts/v1".to_owned(),
            max_artifact_bytes: 64 << 20,
            max_page_limit: 1_000,
            default_page_limit: 100,
            call_timeout_ms: 30_000,
            chunk_size: 1 << 20,
            part_bytes: 8 << 20,
            list_concurrency: 16,
        }
    }
}

/// (key, value, default, min, max, description) of every numeric option.
fn numeric(o: &ObjectOptions) -> [(&'static str, u64, u64, u64, u64, &'static str); 7] {
    let d = ObjectOptions::default();
    [
        (
            "max_artifact_bytes",
            o.max_artifact_bytes,
            d.max_artifact_bytes,
            1,
            5 << 40,
            "bytes of one artifact",
        ),
        (
            "max_page_limit",
            o.max_page_limit,
            d.max_page_limit,
            1,
            1_000,
            "items in one listing page",
        ),
        (
            "default_page_limit",
            o.default_page_limit,
            d.default_page_limit,
            1,
            1_000,
            "items in a listing page when the request gives no limit",
        ),
        (
            "call_timeout_ms",
            o.call_timeout_ms,
            d.call_timeout_ms,
            1,
            300_000,
            "timeout in milliseconds of a call that gives none",
        ),
        (
            "chunk_size",
            o.chunk_size,
            d.chunk_size,
            4_096,
            64 << 20,
            "bytes per integrity chunk (each has its own SHA-256)",
        ),
        (
            "part_bytes",
            o.part_bytes,
            d.part_bytes,
            5 << 20,
            512 << 20,
            "bytes per multipart part; smaller bodies are one request",
        ),
        (
            "list_concurrency",
            o.list_concurrency,
            d.list_concurrency,
            1,
            256,
            "manifests fetched at once while listing versions",
        ),
    ]
}

impl ObjectOptions {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        for (key, v, _, min, max, _) in numeric(self) {
            hippocamp_core::error::check_range(key, v, min, max)?;
        }
        let p = self.prefix.trim_matches('/');
        if p.is_empty()
            || p.len() > 128
            || !p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b))
            || p.split('/').any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(Error::config(
                "prefix",
                Problem::Malformed("1 to 128 bytes of letters, digits, `.`, `_`, `-` and `/`-separated non-empty segments".into()),
            ));
        }
        if self.default_page_limit > self.max_page_limit {
            return Err(Error::config(
                "default_page_limit",
                Problem::Relation("default_page_limit must not exceed max_page_limit"),
            ));
        }
        Ok(())
    }

    fn describe(&self) -> Vec<LimitInfo> {
        let mut out: Vec<LimitInfo> = numeric(self)
            .into_iter()
            .map(|(name, value, default, min, max, description)| LimitInfo {
                name: name.to_owned(),
                value,
                default,
                min,
                max,
                description: description.to_owned(),
                configurable: true,
            })
            .collect();
        out.extend(hippocamp_artifacts::store::fixed_limits(
            MAX_OBJECT_NAME_BYTES as u64,
        ));
        out
    }

    fn page_limit(&self, limit: Option<u64>) -> Result<usize> {
        hippocamp_core::limits::page_limit(limit, self.default_page_limit, self.max_page_limit)
    }
}

/// A live version's record, chunk digests, content key and marker key.
type LiveParts = (
    ArtifactMeta,
    Vec<hippocamp_core::Sha256Digest>,
    String,
    String,
);

/// The parts of a live manifest; `None` for a tombstone or no manifest.
fn live(m: Option<Manifest>) -> Option<LiveParts> {
    match m {
        Some(Manifest::Live {
            meta,
            chunks,
            data,
            marker,
            ..
        }) => Some((*meta, chunks, data, marker)),
        _ => None,
    }
}

/// What a create-only write of a manifest came to.
enum Created {
    /// It is ours: the version is published.
    Ours,
    /// Another writer holds the number.
    Taken,
}

/// Most attempts at allocating a version before giving up.
const ALLOCATION_ATTEMPTS: usize = 64;
/// Stripes of the per-name write lock.
const STRIPES: usize = 256;

/// Artifacts in an object store (S3, GCS, Azure, or in memory).
#[derive(Debug)]
pub struct ObjectArtifacts {
    bucket: Arc<dyn Bucket>,
    layout: Layout,
    options: ObjectOptions,
    backend: &'static str,
    stripes: Vec<tokio::sync::Mutex<()>>,
}

fn nonce() -> String {
    hex::encode(rand::random::<[u8; 8]>())
}

impl ObjectArtifacts {
    /// A store on `bucket`, after probing that create-only writes are
    /// honoured.
    pub(crate) async fn start(
        bucket: Arc<dyn Bucket>,
        options: ObjectOptions,
        backend: &'static str,
    ) -> Result<Self> {
        options.validate()?;
        let store = Self {
            layout: Layout::new(&options.prefix),
            bucket,
            options,
            backend,
            stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
        };
        store.probe().await?;
        Ok(store)
    }

    /// Whether the object store answers now (for readiness): a look at a
    /// key that is never written; "not found" is an answer.
    pub async fn ping(&self) -> Result<()> {
        let key = self.layout.probe("readiness");
        match self.bucket.store().head(&key).await {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Writes a probe key twice with create-only writes; the second must
    /// be refused.
    async fn probe(&self) -> Result<()> {
        let key = self.layout.probe(&nonce());
        let store = self.bucket.store();
        let create = || {
            store.put_opts(
                &key,
                PutPayload::from_static(b"probe"),
                PutMode::Create.into(),
            )
        };
        create().await.map_err(store_err)?;
        let second = create().await;
        let _ = store.delete(&key).await;
        match second {
            Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Ok(_) => Err(Error::Unavailable(format!(
                "the {} object store accepted a second create-only write to one key: it ignores If-None-Match, so two writers could allocate the same version; refusing to run on it",
                self.backend
            ))),
            Err(e) => Err(store_err(e)),
        }
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(Duration::from_millis(self.options.call_timeout_ms))
    }

    fn stripe(&self, scope: &ArtifactScope, name: &ArtifactName) -> &tokio::sync::Mutex<()> {
        let h = name.hash();
        let s = scope.hash();
        &self.stripes[usize::from(h[0] ^ s[0]) % STRIPES]
    }

    fn check_name(name: &ArtifactName) -> Result<()> {
        let len = name.as_str().len();
        if len > MAX_OBJECT_NAME_BYTES {
            return Err(Error::invalid(
                Field::Name,
                Problem::TooLong {
                    len,
                    max: MAX_OBJECT_NAME_BYTES,
                },
            ));
        }
        Ok(())
    }

    async fn timed<T>(
        deadline: Deadline,
        f: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        Self::timed_at(deadline, Stage::Backend, f).await
    }

    async fn timed_at<T>(
        deadline: Deadline,
        stage: Stage,
        f: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        tokio::time::timeout_at(deadline.instant().into(), f)
            .await
            .map_err(|_| Error::Timeout(stage))?
    }

    /// Creates a version's manifest with a create-only write, which is
    /// never cut off: its outcome decides whether the version is
    /// published. A refusal or a lost answer is settled by reading the
    /// key back: a manifest naming our content is ours (a client retry of
    /// a write that landed is refused as existing; an answer can be lost
    /// after the write landed).
    async fn create_manifest(
        &self,
        key: &Path,
        manifest: &Manifest,
        data_key: &Path,
    ) -> Result<Created> {
        let written = self
            .bucket
            .store()
            .put_opts(key, manifest.encode()?.into(), PutMode::Create.into())
            .await;
        let unknown = match written {
            Ok(_) => return Ok(Created::Ours),
            Err(object_store::Error::AlreadyExists { .. }) => None,
            Err(e) => Some(store_err(e)),
        };
        let ours = match self.bucket.store().get(key).await {
            Ok(r) => {
                let m = Manifest::decode(&r.bytes().await.map_err(store_err)?)?;
                matches!(m, Manifest::Live { data, .. } if data == data_key.as_ref())
            }
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => return Err(store_err(e)),
        };
        match (ours, unknown) {
            (true, _) => Ok(Created::Ours),
            (false, None) => Ok(Created::Taken),
            (false, Some(e)) => Err(e),
        }
    }

    /// The manifest of a version, if its key exists.
    async fn manifest(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
    ) -> Result<Option<Manifest>> {
        match self
            .bucket
            .store()
            .get(&self.layout.manifest(scope, name, version))
            .await
        {
            Ok(r) => Ok(Some(Manifest::decode(
                &r.bytes().await.map_err(store_err)?,
            )?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }

    /// The name's hint, if it has a readable one.
    async fn hint(&self, scope: &ArtifactScope, name: &ArtifactName) -> Result<Option<Hint>> {
        match self
            .bucket
            .store()
            .get(&self.layout.hint(scope, name))
            .await
        {
            Ok(r) => Ok(Hint::decode(&r.bytes().await.map_err(store_err)?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Writes the name's hint (best effort: a lost hint only costs the
    /// next reader a longer walk).
    async fn write_hint(&self, scope: &ArtifactScope, name: &ArtifactName, hint: Hint) {
        let _ = self
            .bucket
            .store()
            .put_opts(
                &self.layout.hint(scope, name),
                hint.encode().into(),
                PutMode::Overwrite.into(),
            )
            .await;
    }

    /// The hint and the highest allocated version (0 if none): from the
    /// hint on, the manifest keys are listed. A hint above every manifest
    /// (one a writer cannot have left: manifests are written before their
    /// hint) is dropped and the keys are listed from the start, so a stale
    /// or damaged hint can never make a version number be reused.
    async fn allocation(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
    ) -> Result<(Option<Hint>, u64)> {
        let hint = self.hint(scope, name).await?;
        let from = hint.map_or(0, |h| h.allocated);
        let max = self.max_listed(scope, name, from).await?;
        if max >= from {
            return Ok((hint, max));
        }
        Ok((None, self.max_listed(scope, name, 0).await?))
    }

    /// The highest version among the manifest keys from version `from`
    /// on (0 if none).
    async fn max_listed(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        from: u64,
    ) -> Result<u64> {
        let prefix = self.layout.manifests(scope, name);
        let mut max = 0;
        let mut offset = (from > 1).then(|| {
            self.layout
                .manifest(scope, name, from - 1)
                .as_ref()
                .to_owned()
        });
        loop {
            let keys = self
                .bucket
                .list_keys(&prefix, offset.as_deref(), 1_000)
                .await?;
            if let Some(v) = keys.iter().filter_map(|k| key_version(k)).max() {
                max = max.max(v);
            }
            if keys.len() < 1_000 {
                return Ok(max);
            }
            offset = keys.last().cloned();
        }
    }

    /// The highest allocated version (0 if none).
    async fn max_version(&self, scope: &ArtifactScope, name: &ArtifactName) -> Result<u64> {
        Ok(self.allocation(scope, name).await?.1)
    }

    /// The latest live version with its manifest parts, and the highest
    /// allocated version: versions above the hint's allocation are read
    /// from the top, then the hint's latest is verified; when there is no
    /// hint or it does not verify, the manifests are walked down.
    async fn latest(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
    ) -> Result<(Option<LiveParts>, u64)> {
        let (hint, max) = self.allocation(scope, name).await?;
        let trusted = hint.filter(|h| h.allocated <= max && h.latest.is_some());
        let floor = trusted.map_or(0, |h| h.allocated);
        let mut v = max;
        while v > floor {
            if let Some(found) = live(self.manifest(scope, name, v).await?) {
                return Ok((Some(found), max));
            }
            v -= 1;
        }
        // Every version in (latest, floor] was deleted when the hint was
        // written; only `latest` itself needs a look.
        if let Some(l) = trusted.and_then(|h| h.latest) {
            if l == 0 {
                return Ok((None, max));
            }
            if let Some(found) = live(self.manifest(scope, name, l).await?) {
                return Ok((Some(found), max));
            }
            v = l - 1;
        }
        while v > 0 {
            if let Some(found) = live(self.manifest(scope, name, v).await?) {
                return Ok((Some(found), max));
            }
            v -= 1;
        }
        Ok((None, max))
    }

    /// The live version a selector picks, with its manifest parts.
    async fn find(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
    ) -> Result<LiveParts> {
        let found = match selector {
            Selector::Version(v) => {
                check_version(v)?;
                live(self.manifest(scope, name, v).await?)
                    .ok_or(Error::NotFound("artifact version"))?
            }
            Selector::Latest => self
                .latest(scope, name)
                .await?
                .0
                .ok_or(Error::NotFound("artifact"))?,
        };
        let version = match selector {
            Selector::Version(v) => Some(v),
            Selector::Latest => None,
        };
        check_record(&found.0, scope, name, version)?;
        Ok(found)
    }

    /// Uploads a body to `key`, hashing it; multipart above `part_bytes`.
    async fn upload(&self, key: &Path, body: Body) -> Result<Integrity> {
        let max = self.options.max_artifact_bytes;
        let too_big = || Error::TooLarge {
            limit: "max_artifact_bytes",
            max,
        };
        let part = usize::try_from(self.options.part_bytes).unwrap_or(usize::MAX);
        let mut hasher = ChunkHasher::new(self.options.chunk_size);
        let store = self.bucket.store();
        let mut stream = body.into_stream();
        // Small bodies go up in one request: buffer up to one part.
        let mut head: Vec<Bytes> = Vec::new();
        let mut buffered = 0usize;
        let mut rest = None;
        while let Some(piece) = stream.next().await {
            let piece = piece?;
            if (hasher.size() + piece.len() as u64) > max {
                return Err(too_big());
            }
            hasher.update(&piece);
            buffered += piece.len();
            head.push(piece);
            if buffered > part {
                rest = Some(stream);
                break;
            }
        }
        let Some(mut stream) = rest else {
            let payload: PutPayload = head.into_iter().collect();
            store
                .put_opts(key, payload, PutMode::Overwrite.into())
                .await
                .map_err(store_err)?;
            return Ok(hasher.finish());
        };
        let upload = store.put_multipart(key).await.map_err(store_err)?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
        let result: Result<()> = async {
            for piece in head {
                writer.wait_for_capacity(2).await.map_err(store_err)?;
                writer.put(piece);
            }
            while let Some(piece) = stream.next().await {
                let piece = piece?;
                if (hasher.size() + piece.len() as u64) > max {
                    return Err(too_big());
                }
                hasher.update(&piece);
                writer.wait_for_capacity(2).await.map_err(store_err)?;
                writer.put(piece);
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                writer.finish().await.map_err(store_err)?;
                Ok(hasher.finish())
            }
            Err(e) => {
                let _ = writer.abort().await;
                Err(e)
            }
        }
    }

    /// The underlying object store (tests use it to damage content).
    #[doc(hidden)]
    pub fn object_store(&self) -> Arc<dyn object_store::ObjectStore> {
        Arc::clone(self.bucket.store())
    }

    /// The content key of a live version (tests use it to damage content).
    #[doc(hidden)]
    pub async fn content_key(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
    ) -> Option<Path> {
        match self.manifest(scope, name, version).await.ok()? {
            Some(Manifest::Live { data, .. }) => Some(Path::from(data)),
            _ => None,
        }
    }

    async fn remove_quietly(&self, keys: &[&Path]) {
        for k in keys {
            let _ = self.bucket.store().delete(k).await;
        }
    }
}

/// Flips the byte at `offset` of the object at `key` (tests use it to
/// damage content behind a store's back); `false` when there is none.
#[doc(hidden)]
pub async fn flip_byte(store: &dyn object_store::ObjectStore, key: &Path, offset: u64) -> bool {
    let Ok(got) = store.get(key).await else {
        return false;
    };
    let Ok(bytes) = got.bytes().await else {
        return false;
    };
    let mut bytes = bytes.to_vec();
    let Some(b) = usize::try_from(offset).ok().and_then(|o| bytes.get_mut(o)) else {
        return false;
    };
    *b ^= 0x5a;
    store.put(key, bytes.into()).await.is_ok()
}

/// Reads the chunks of a span with one ranged request, verifying each
/// before releasing it.
struct ObjectSource {
    store: Arc<dyn object_store::ObjectStore>,
    key: Path,
    range: std::ops::Range<u64>,
    stream: Option<futures::stream::BoxStream<'static, object_store::Result<Bytes>>>,
    /// Received bytes not yet part of a chunk.
    rest: Bytes,
}

#[async_trait]
impl ChunkSource for ObjectSource {
    async fn verified_chunk(&mut self, index: u64, integrity: &Arc<Integrity>) -> Result<Bytes> {
        if self.stream.is_none() {
            let opts = GetOptions {
                range: Some(self.range.clone().into()),
                ..GetOptions::default()
            };
            let r = self
                .store
                .get_opts(&self.key, opts)
                .await
                .map_err(|e| match e {
                    object_store::Error::NotFound { .. } => {
                        Error::Corrupt("the content of a version is missing".into())
                    }
                    other => store_err(other),
                })?;
            self.stream = Some(r.into_stream());
        }
        let len = usize::try_from(integrity.chunk_len(index)).unwrap_or(usize::MAX);
        // One exact-size allocation per chunk: growing a shared buffer
        // would reallocate (and keep alive) several chunk-sized blocks at
        // once, which showed as peak memory on long reads.
        let mut chunk = bytes::BytesMut::with_capacity(len);
        while chunk.len() < len {
            if self.rest.is_empty() {
                let next = match &mut self.stream {
                    Some(s) => s.try_next().await.map_err(store_err)?,
                    None => None,
                };
                match next {
                    Some(b) => self.rest = b,
                    None => {
                        return Err(Error::Corrupt(
                            "the content of a version is shorter than recorded".into(),
                        ));
                    }
                }
            }
            let take = (len - chunk.len()).min(self.rest.len());
            chunk.extend_from_slice(&self.rest.split_to(take));
        }
        let chunk = chunk.freeze();
        verify_chunk(integrity, index, chunk).await
    }
}

#[async_trait]
impl ArtifactStore for ObjectArtifacts {
    fn capabilities(&self) -> ArtifactCapabilities {
        ArtifactCapabilities {
            api_version: 1,
            backend: self.backend.to_owned(),
            durable: self.backend != "memory-object",
            scopes: vec!["app".into(), "user".into(), "session".into()],
            immutable_versions: true,
            range_reads: true,
            streaming: true,
            scope_listing: false,
            limits: self.options.describe(),
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
        Self::check_name(name)?;
        deadline.check(Stage::Queueing)?;
        let nonce = nonce();
        let data_key = self.layout.data(scope, &nonce);
        let marker_key = self.layout.marker(scope, name, &nonce);
        let store = self.bucket.store();
        let staged = Self::timed_at(deadline, Stage::Transfer, async {
            store
                .put_opts(&marker_key, PutPayload::new(), PutMode::Overwrite.into())
                .await
                .map_err(store_err)?;
            self.upload(&data_key, body).await
        })
        .await;
        let integrity = match staged {
            Ok(i) => i,
            Err(e) => {
                self.remove_quietly(&[&data_key, &marker_key]).await;
                return Err(e);
            }
        };
        let published = self
            .publish(
                scope,
                name,
                opts,
                &integrity,
                &data_key,
                &marker_key,
                deadline,
            )
            .await;
        match published {
            Ok(meta) => Ok(meta),
            // Nothing was published: nothing references the content.
            Err(Unpublished::Nothing(e)) => {
                self.remove_quietly(&[&data_key, &marker_key]).await;
                Err(e)
            }
            // Whether the manifest landed is unknown: the content stays
            // (unreferenced, it is repair's), so a version that did land
            // is never left without its bytes.
            Err(Unpublished::Unknown(e)) => Err(e),
        }
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
        let (meta, chunks, data, _) =
            Self::timed(deadline, self.find(scope, name, selector)).await?;
        if let Some(r) = range {
            r.check(meta.size)?;
        }
        let integrity = Arc::new(Manifest::integrity(&meta, &chunks)?);
        let span = integrity.span(range).map_or(0..0, |(first, last)| {
            first * integrity.chunk_size..(last * integrity.chunk_size + integrity.chunk_len(last))
        });
        let source = ObjectSource {
            store: Arc::clone(self.bucket.store()),
            key: Path::from(data),
            range: span,
            stream: None,
            rest: Bytes::new(),
        };
        Ok(ArtifactRead {
            meta,
            range,
            body: verified_stream(source, integrity, range),
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
        Ok(Self::timed(deadline, self.find(scope, name, selector))
            .await?
            .0)
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
        let (turn, chosen) = Self::timed(deadline, async {
            let turn = self.stripe(scope, name).lock().await;
            let chosen: Vec<(u64, String, String)> = match selector {
                DeleteSelector::Version(v) => match self.manifest(scope, name, v).await? {
                    Some(Manifest::Live {
                        meta, data, marker, ..
                    }) => {
                        check_record(&meta, scope, name, Some(v))?;
                        vec![(v, data, marker)]
                    }
                    _ => Vec::new(),
                },
                DeleteSelector::Latest => match self.find(scope, name, Selector::Latest).await {
                    Ok((meta, _, data, marker)) => vec![(meta.version, data, marker)],
                    Err(Error::NotFound(_)) => Vec::new(),
                    Err(e) => return Err(e),
                },
                DeleteSelector::All => {
                    let mut out = Vec::new();
                    let mut cursor = None;
                    loop {
                        let page = self.live_versions(scope, name, cursor, 1_000).await?;
                        let more = page.len() > 1_000;
                        for (meta, data, marker) in page.into_iter().take(1_000) {
                            cursor = Some(meta.version);
                            out.push((meta.version, data, marker));
                        }
                        if !more {
                            break;
                        }
                    }
                    out
                }
            };
            Ok((turn, chosen))
        })
        .await?;
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        deadline.check(Stage::Commit)?;
        // From the first tombstone on nothing is cut off, and what is
        // reported is what was deleted: a failure after some versions
        // went stops there and reports those.
        let store = self.bucket.store();
        let mut removed = Vec::new();
        for (v, data, marker) in chosen {
            let tomb = Manifest::Deleted {
                format: MANIFEST_FORMAT,
                version: v,
            };
            let written = store
                .put_opts(
                    &self.layout.manifest(scope, name, v),
                    tomb.encode()?.into(),
                    PutMode::Overwrite.into(),
                )
                .await;
            match written {
                Ok(_) => removed.push(v),
                Err(e) if removed.is_empty() => return Err(store_err(e)),
                Err(_) => break,
            }
            self.remove_quietly(&[&Path::from(marker), &Path::from(data)])
                .await;
        }
        // The latest may have gone: the hint says what is latest now
        // (best effort, within what is left of the deadline).
        let _ = tokio::time::timeout_at(deadline.instant().into(), async {
            if let Ok((found, max)) = self.latest(scope, name).await {
                let hint = Hint {
                    allocated: max,
                    latest: Some(found.map_or(0, |f| f.0.version)),
                };
                self.write_hint(scope, name, hint).await;
            }
        })
        .await;
        drop(turn);
        Ok(removed)
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let deadline = self.deadline(opts);
        let limit = self.options.page_limit(page.limit)?;
        let prefix = self.layout.markers_root(scope);
        let offset = page
            .cursor
            .as_ref()
            .map(|c| format!("{prefix}{}/~", hex::encode(c.as_str())));
        let groups = Self::timed(
            deadline,
            self.bucket
                .list_groups(&prefix, offset.as_deref(), limit + 1),
        )
        .await?;
        let items = groups
            .iter()
            .map(|g| {
                group_name(g)
                    .ok_or_else(|| Error::Corrupt(format!("a marker group is malformed: {g}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::of_one_more(scope, items, limit, Clone::clone))
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let deadline = self.deadline(opts);
        let limit = self.options.page_limit(page.limit)?;
        let found = Self::timed(
            deadline,
            self.live_versions(scope, name, page.cursor, limit),
        )
        .await?;
        let more = found.len() > limit;
        let items: Vec<ArtifactMeta> = found.into_iter().take(limit).map(|(m, _, _)| m).collect();
        let next_cursor = if more {
            items.last().map(|m| m.version)
        } else {
            None
        };
        Ok(Page {
            scope: scope.clone(),
            items,
            next_cursor,
        })
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        Ok(ArtifactStatus {
            backend: self.backend.to_owned(),
            artifacts: None,
            bytes: None,
            router: None,
        })
    }
}

/// Why a put published nothing, or may have.
enum Unpublished {
    /// Certainly nothing: the content can go.
    Nothing(Error),
    /// The publishing write's outcome is unknown.
    Unknown(Error),
}

impl ObjectArtifacts {
    /// Allocates the next version with a create-only manifest write. The
    /// waits (the name's turn, the listings) are bounded by the deadline,
    /// which is checked last immediately before each publishing write;
    /// that write is never cut off.
    #[allow(clippy::too_many_arguments)]
    async fn publish(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        opts: &PutOptions,
        integrity: &hippocamp_artifacts::Integrity,
        data_key: &Path,
        marker_key: &Path,
        deadline: Deadline,
    ) -> std::result::Result<ArtifactMeta, Unpublished> {
        let nothing = Unpublished::Nothing;
        let _turn = Self::timed_at(deadline, Stage::Queueing, async {
            Ok(self.stripe(scope, name).lock().await)
        })
        .await
        .map_err(nothing)?;
        let mut version = Self::timed(deadline, self.max_version(scope, name))
            .await
            .map_err(nothing)?
            + 1;
        for _ in 0..ALLOCATION_ATTEMPTS {
            let meta = ArtifactMeta {
                scope: scope.clone(),
                name: name.clone(),
                version,
                mime_type: opts.mime_type.clone(),
                size: integrity.size,
                sha256: integrity.sha256,
                chunk_size: integrity.chunk_size,
                created_at_ms: now_ms(),
                metadata: opts.metadata.clone(),
            };
            let manifest = Manifest::Live {
                format: MANIFEST_FORMAT,
                meta: Box::new(meta.clone()),
                chunks: integrity.chunks.clone(),
                data: data_key.as_ref().to_owned(),
                marker: marker_key.as_ref().to_owned(),
            };
            deadline.check(Stage::Commit).map_err(nothing)?;
            let key = self.layout.manifest(scope, name, version);
            match self.create_manifest(&key, &manifest, data_key).await {
                Ok(Created::Ours) => {
                    let hint = Hint {
                        allocated: version,
                        latest: Some(version),
                    };
                    // Published: the hint is best effort, and waits for
                    // nothing once the deadline has gone.
                    let _ = tokio::time::timeout_at(
                        deadline.instant().into(),
                        self.write_hint(scope, name, hint),
                    )
                    .await;
                    return Ok(meta);
                }
                Ok(Created::Taken) => {
                    let max = Self::timed(deadline, self.max_version(scope, name))
                        .await
                        .map_err(nothing)?;
                    version = max.max(version) + 1;
                }
                Err(e) => return Err(Unpublished::Unknown(e)),
            }
        }
        Err(nothing(Error::Unavailable(format!(
            "no version could be allocated in {ALLOCATION_ATTEMPTS} attempts; other writers keep winning"
        ))))
    }

    /// Up to `limit + 1` live versions after `cursor`, ascending, with
    /// their content and marker keys.
    async fn live_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        cursor: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(ArtifactMeta, String, String)>> {
        let prefix = self.layout.manifests(scope, name);
        let mut offset = cursor.map(|c| self.layout.manifest(scope, name, c).as_ref().to_owned());
        let mut out = Vec::new();
        let batch = (limit + 1).max(100);
        let concurrency = usize::try_from(self.options.list_concurrency).unwrap_or(16);
        loop {
            let keys = self
                .bucket
                .list_keys(&prefix, offset.as_deref(), batch)
                .await?;
            let versions: Vec<u64> = keys.iter().filter_map(|k| key_version(k)).collect();
            let mut fetches = Vec::with_capacity(versions.len());
            for v in &versions {
                fetches.push(self.manifest(scope, name, *v));
            }
            let manifests: Vec<Option<Manifest>> = futures::stream::iter(fetches)
                .buffered(concurrency)
                .try_collect()
                .await?;
            for (v, m) in versions.iter().zip(manifests) {
                if let Some(Manifest::Live {
                    meta, data, marker, ..
                }) = m
                {
                    check_record(&meta, scope, name, Some(*v))?;
                    out.push((*meta, data, marker));
                    if out.len() > limit {
                        return Ok(out);
                    }
                }
            }
            if keys.len() < batch {
                return Ok(out);
            }
            offset = keys.last().cloned();
        }
    }
}
