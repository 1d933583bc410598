//! The `ArtifactStore` contract.
//!
//! Every operation takes the exact [`ArtifactScope`]; none reads or writes
//! outside it. Versions are immutable, positive, allocated by successful
//! puts and never reused, even after every version is deleted or the store
//! restarts. Reads stream and verify (see [`crate::integrity`]). Listings
//! are keyset pages with an exclusive cursor and never carry bytes.
//! Deletion is idempotent and reports the versions it removed.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use hippocamp_core::{CallOptions, Error, LimitInfo, Problem, Result};
use serde::{Deserialize, Serialize};

use crate::model::{
    ArtifactMeta, ArtifactName, ArtifactScope, ByteRange, DeleteSelector, Page, PageRequest,
    PutOptions, ScopePage, Selector,
};

/// Bytes flowing in or out of a store.
pub type ByteStream = BoxStream<'static, Result<Bytes>>;

/// What a put stores.
pub enum Body {
    /// Bytes in memory.
    Bytes(Bytes),
    /// A stream of bytes (of any piece sizes).
    Stream(ByteStream),
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Body::Bytes(b) => write!(f, "Body::Bytes({} bytes)", b.len()),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Body::Bytes(b)
    }
}

impl From<Vec<u8>> for Body {
    fn from(b: Vec<u8>) -> Self {
        Body::Bytes(Bytes::from(b))
    }
}

impl From<&'static [u8]> for Body {
    fn from(b: &'static [u8]) -> Self {
        Body::Bytes(Bytes::from_static(b))
    }
}

impl From<&'static str> for Body {
    fn from(b: &'static str) -> Self {
        Body::Bytes(Bytes::from_static(b.as_bytes()))
    }
}

impl Body {
    /// The body as a stream.
    pub fn into_stream(self) -> ByteStream {
        match self {
            Body::Bytes(b) => futures::stream::iter([Ok(b)]).boxed(),
            Body::Stream(s) => s,
        }
    }
}

/// A read: the version's record, the range read, and its verified bytes.
pub struct ArtifactRead {
    /// The version read.
    pub meta: ArtifactMeta,
    /// The range, when one was asked for.
    pub range: Option<ByteRange>,
    /// The bytes; a corrupt chunk ends the stream with `Corrupt` before
    /// any of its bytes.
    pub body: ByteStream,
}

impl fmt::Debug for ArtifactRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArtifactRead")
            .field("meta", &self.meta)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

impl ArtifactRead {
    /// Collects the bytes (bounded by the artifact or range size).
    pub async fn bytes(mut self) -> Result<Bytes> {
        // A read of one chunk is one piece: hand it over without a copy.
        let Some(first) = self.body.next().await.transpose()? else {
            return Ok(Bytes::new());
        };
        let Some(second) = self.body.next().await.transpose()? else {
            return Ok(first);
        };
        let cap = self.range.map_or(self.meta.size, |r| r.len);
        let mut out = Vec::with_capacity(usize::try_from(cap.min(1 << 26)).unwrap_or(0));
        out.extend_from_slice(&first);
        out.extend_from_slice(&second);
        while let Some(piece) = self.body.next().await {
            out.extend_from_slice(&piece?);
        }
        Ok(Bytes::from(out))
    }
}

hippocamp_core::limit_table! {
    /// Limits and quotas of an artifact store. Every value is within its
    /// range and reported by `capabilities()`.
    pub struct ArtifactLimits, prefix "" {
    /// Bytes of one artifact.
    max_artifact_bytes: default 64 << 20, min 1, max 1_u64 << 40,
        "bytes of one artifact";
    /// Bytes of live versions in one scope.
    max_scope_bytes: default 1 << 30, min 1, max 1_u64 << 44,
        "bytes of live versions in one scope";
    /// Bytes of live versions in the store.
    max_total_bytes: default 64_u64 << 30, min 1, max 1_u64 << 48,
        "bytes of live versions in the store";
    /// Live versions in one scope.
    max_scope_artifacts: default 25_000, min 1, max 100_000_000,
        "live versions in one scope";
    /// Live versions in the store.
    max_total_artifacts: default 1_000_000, min 1, max 1_000_000_000,
        "live versions in the store";
    /// Largest page of a listing.
    max_page_limit: default 1_000, min 1, max 10_000,
        "items in one listing page";
    /// Page size when a request gives none.
    default_page_limit: default 100, min 1, max 10_000,
        "items in a listing page when the request gives no limit";
    /// Timeout of a call that gives none, milliseconds.
    call_timeout_ms: default 30_000, min 1, max 300_000,
        "timeout in milliseconds of a call that gives none";
    /// Bytes per integrity chunk.
    chunk_size: default 1 << 20, min 4_096, max 64 << 20,
        "bytes per integrity chunk (each has its own SHA-256)";
    }
}

impl ArtifactLimits {
    /// Checks every range and relation.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        let rel = |key: &str, msg: &'static str| Err(Error::config(key, Problem::Relation(msg)));
        if self.max_artifact_bytes > self.max_scope_bytes {
            return rel(
                "max_artifact_bytes",
                "max_artifact_bytes must not exceed max_scope_bytes",
            );
        }
        if self.max_scope_bytes > self.max_total_bytes {
            return rel(
                "max_scope_bytes",
                "max_scope_bytes must not exceed max_total_bytes",
            );
        }
        if self.max_scope_artifacts > self.max_total_artifacts {
            return rel(
                "max_scope_artifacts",
                "max_scope_artifacts must not exceed max_total_artifacts",
            );
        }
        if self.default_page_limit > self.max_page_limit {
            return rel(
                "default_page_limit",
                "default_page_limit must not exceed max_page_limit",
            );
        }
        Ok(())
    }

    /// The timeout of a call that gives none.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// Configurable limits followed by the fixed validation limits.
    pub fn describe_all(&self) -> Vec<LimitInfo> {
        let mut all = self.describe();
        all.extend(fixed_limits(crate::model::MAX_NAME_BYTES as u64));
        all
    }

    /// Checks a page limit, giving the default when absent.
    pub fn page_limit(&self, limit: Option<u64>) -> Result<usize> {
        hippocamp_core::limits::page_limit(limit, self.default_page_limit, self.max_page_limit)
    }
}

/// The limits of the artifact contract that no configuration changes,
/// with the longest name a store keeps (`max_name_bytes`: object stores
/// keep shorter ones than the contract allows).
pub fn fixed_limits(max_name_bytes: u64) -> Vec<LimitInfo> {
    let fixed = LimitInfo::fixed;
    let m = crate::model::METADATA_LIMITS;
    vec![
        fixed(
            "max_scope_part_bytes",
            256,
            1,
            "bytes of an app name, user id or session id",
        ),
        fixed(
            "max_name_bytes",
            max_name_bytes,
            1,
            "bytes of an artifact name",
        ),
        fixed("max_mime_type_bytes", 255, 3, "bytes of a MIME type"),
        fixed(
            "max_metadata_bytes",
            m.max_bytes as u64,
            0,
            "bytes of custom metadata as compact JSON",
        ),
        fixed(
            "max_metadata_depth",
            m.max_depth as u64,
            0,
            "nesting depth of custom metadata (the top object is depth 0, its values depth 1)",
        ),
        fixed(
            "max_metadata_nodes",
            m.max_nodes as u64,
            1,
            "JSON nodes of custom metadata (the top object and every value under it)",
        ),
        fixed(
            "max_timeout_ms",
            300_000,
            1,
            "longest timeout a call may give",
        ),
    ]
}

/// What a store offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactCapabilities {
    /// Contract version.
    pub api_version: u32,
    /// The backend (`memory`, `filesystem`, `s3`...).
    pub backend: String,
    /// Whether acknowledged puts survive a restart.
    pub durable: bool,
    /// Scope kinds: `app`, `user`, `session`.
    pub scopes: Vec<String>,
    /// Versions never change once written.
    pub immutable_versions: bool,
    /// Byte ranges can be read.
    pub range_reads: bool,
    /// Puts and gets stream in bounded memory (false for the in-memory
    /// store, which holds every version's bytes whole).
    pub streaming: bool,
    /// The scopes holding versions can be listed (`list_scopes`), so
    /// expired versions can be swept; false for object stores, which keep
    /// no index of scopes.
    pub scope_listing: bool,
    /// Every limit with its value, default and range.
    pub limits: Vec<LimitInfo>,
    /// Router details, when routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<hippocamp_core::routing::RouterStats>,
}

impl ArtifactCapabilities {
    /// The deadline a call without one gets: the `call_timeout_ms` limit
    /// (30 s when a store reports none).
    pub fn call_timeout(&self) -> std::time::Duration {
        self.limits
            .iter()
            .find(|l| l.name == "call_timeout_ms")
            .map_or(std::time::Duration::from_secs(30), |l| {
                std::time::Duration::from_millis(l.value)
            })
    }
}

/// Content-free state of a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ArtifactStatus {
    /// The backend.
    pub backend: String,
    /// Live versions; `None` when the backend cannot count them without
    /// a full scan (object stores).
    pub artifacts: Option<u64>,
    /// Bytes of live versions (`None` likewise).
    pub bytes: Option<u64>,
    /// Router state, when routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<hippocamp_core::routing::RouterStats>,
}

/// Versioned artifacts.
///
/// Implementations must validate with the shared functions, never return a
/// record of another scope or name, check the deadline immediately before
/// the step that publishes or deletes, and verify bytes on every read.
#[async_trait]
pub trait ArtifactStore: Send + Sync + fmt::Debug {
    /// Features and limits.
    fn capabilities(&self) -> ArtifactCapabilities;

    /// Stores a new version and returns its record.
    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta>;

    /// Reads a version (or a byte range of it) as a verified stream.
    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead>;

    /// A version's record, without its bytes.
    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta>;

    /// Deletes versions; returns the versions removed (empty when none
    /// matched). Deletion frees quota, never version numbers.
    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>>;

    /// Names with at least one live version, in byte order.
    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>>;

    /// Live versions of a name, ascending, without bytes.
    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>>;

    /// One page of the scopes that hold at least one version, in the
    /// store's own order after `cursor` (opaque): what the sweeper of
    /// expired versions walks.
    async fn list_scopes(
        &self,
        _cursor: Option<&str>,
        _limit: Option<u64>,
        _opts: &CallOptions,
    ) -> Result<crate::model::ScopePage> {
        Err(hippocamp_core::Error::Unsupported {
            operation: "list_scopes",
            backend: "this store",
        })
    }

    /// Content-free counters.
    async fn status(&self) -> Result<ArtifactStatus>;

    /// Brings a scope's in-memory state in ahead of use (routers call it).
    async fn activate_scope(&self, _scope: &ArtifactScope) -> Result<()> {
        Ok(())
    }

    /// Releases a scope's in-memory state (durable stores only).
    fn release_scope(&self, _scope: &ArtifactScope) {}
}

/// Checks that a record belongs to the requested scope and name (and
/// version, when given); a foreign record is `InvalidReply` from `service`.
pub fn check_record_from(
    service: &'static str,
    meta: &ArtifactMeta,
    scope: &ArtifactScope,
    name: &ArtifactName,
    version: Option<u64>,
) -> Result<()> {
    if meta.scope != *scope || meta.name != *name || version.is_some_and(|v| v != meta.version) {
        return Err(Error::foreign_record(service, "a version record"));
    }
    Ok(())
}

/// [`check_record_from`] for a store's own stored records.
pub fn check_record(
    meta: &ArtifactMeta,
    scope: &ArtifactScope,
    name: &ArtifactName,
    version: Option<u64>,
) -> Result<()> {
    check_record_from("the artifact store", meta, scope, name, version)
}

/// Checks put options (the custom metadata bounds).
pub fn check_put(opts: &PutOptions) -> Result<()> {
    crate::model::check_metadata(&opts.metadata)
}

/// Checks that a selector names a positive version.
pub fn check_version(v: u64) -> Result<()> {
    if v == 0 {
        return Err(Error::invalid(
            hippocamp_core::Field::Version,
            Problem::OutOfRange {
                value: 0,
                min: 1,
                max: i128::from(u64::MAX),
            },
        ));
    }
    Ok(())
}

/// The version a selector picks among existing `versions` (ascending).
pub fn pick(selector: Selector, versions: impl DoubleEndedIterator<Item = u64>) -> Result<u64> {
    let mut versions = versions;
    match selector {
        Selector::Latest => versions.next_back().ok_or(Error::NotFound("artifact")),
        Selector::Version(v) => {
            check_version(v)?;
            versions
                .find(|&x| x == v)
                .ok_or(Error::NotFound("artifact version"))
        }
    }
}

/// A layer over another artifact store that changes only some
/// operations (see `hippocamp_memory::MemoryLayer`, the same shape): what
/// a layer does not write forwards to [`inner`](Self::inner), and a
/// blanket implementation makes every layer an [`ArtifactStore`].
/// `Arc<S>` and `Box<S>` are layers that change nothing.
#[async_trait]
pub trait ArtifactLayer: Send + Sync + fmt::Debug {
    /// The store underneath.
    type Inner: ArtifactStore + ?Sized;

    /// The store underneath.
    fn inner(&self) -> &Self::Inner;

    /// See [`ArtifactStore::capabilities`].
    fn capabilities(&self) -> ArtifactCapabilities {
        self.inner().capabilities()
    }

    /// See [`ArtifactStore::put`].
    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        self.inner().put(scope, name, body, opts).await
    }

    /// See [`ArtifactStore::get`].
    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        self.inner().get(scope, name, selector, range, opts).await
    }

    /// See [`ArtifactStore::head`].
    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        self.inner().head(scope, name, selector, opts).await
    }

    /// See [`ArtifactStore::delete`].
    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        self.inner().delete(scope, name, selector, opts).await
    }

    /// See [`ArtifactStore::list_names`].
    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        self.inner().list_names(scope, page, opts).await
    }

    /// See [`ArtifactStore::list_versions`].
    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        self.inner().list_versions(scope, name, page, opts).await
    }

    /// See [`ArtifactStore::list_scopes`].
    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<ScopePage> {
        self.inner().list_scopes(cursor, limit, opts).await
    }

    /// See [`ArtifactStore::status`].
    async fn status(&self) -> Result<ArtifactStatus> {
        self.inner().status().await
    }

    /// See [`ArtifactStore::activate_scope`].
    async fn activate_scope(&self, scope: &ArtifactScope) -> Result<()> {
        self.inner().activate_scope(scope).await
    }

    /// See [`ArtifactStore::release_scope`].
    fn release_scope(&self, scope: &ArtifactScope) {
        self.inner().release_scope(scope);
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<L: ArtifactLayer> ArtifactStore for L {
    fn capabilities(&self) -> ArtifactCapabilities {
        ArtifactLayer::capabilities(self)
    }
    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        ArtifactLayer::put(self, scope, name, body, opts).await
    }
    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        ArtifactLayer::get(self, scope, name, selector, range, opts).await
    }
    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        ArtifactLayer::head(self, scope, name, selector, opts).await
    }
    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        ArtifactLayer::delete(self, scope, name, selector, opts).await
    }
    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        ArtifactLayer::list_names(self, scope, page, opts).await
    }
    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        ArtifactLayer::list_versions(self, scope, name, page, opts).await
    }
    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<ScopePage> {
        ArtifactLayer::list_scopes(self, cursor, limit, opts).await
    }
    async fn status(&self) -> Result<ArtifactStatus> {
        ArtifactLayer::status(self).await
    }
    async fn activate_scope(&self, scope: &ArtifactScope) -> Result<()> {
        ArtifactLayer::activate_scope(self, scope).await
    }
    fn release_scope(&self, scope: &ArtifactScope) {
        ArtifactLayer::release_scope(self, scope);
    }
}

impl<T: ArtifactStore + ?Sized> ArtifactLayer for std::sync::Arc<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}

impl<T: ArtifactStore + ?Sized> ArtifactLayer for Box<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_validate() {
        ArtifactLimits::default().validate().unwrap();
        let bad = ArtifactLimits {
            max_artifact_bytes: 2 << 30,
            ..ArtifactLimits::default()
        };
        assert!(bad.validate().is_err());
        let bad = ArtifactLimits {
            chunk_size: 10,
            ..ArtifactLimits::default()
        };
        assert!(
            matches!(bad.validate(), Err(Error::InvalidConfig { ref key, .. }) if key == "chunk_size")
        );
        assert!(serde_json::from_str::<ArtifactLimits>(r#"{"max_page": 1}"#).is_err());
        let l = ArtifactLimits::default();
        assert_eq!(l.page_limit(None).unwrap(), 100);
        assert!(l.page_limit(Some(0)).is_err());
        assert!(l.page_limit(Some(1_001)).is_err());
    }

    #[test]
    fn selectors_pick() {
        let v = || [1u64, 3, 4].into_iter();
        assert_eq!(pick(Selector::Latest, v()).unwrap(), 4);
        assert_eq!(pick(Selector::Version(3), v()).unwrap(), 3);
        assert!(matches!(
            pick(Selector::Version(2), v()),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            pick(Selector::Version(0), v()),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            pick(Selector::Latest, std::iter::empty()),
            Err(Error::NotFound(_))
        ));
    }
}
