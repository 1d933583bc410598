//! The conformance suite every [`ArtifactStore`] and wrapper runs.
//!
//! `artifact_conformance_tests!(factory)` expands to one `#[tokio::test]`
//! per scenario plus the proptest model test ([`model::run`]).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines,
    clippy::missing_panics_doc,
    clippy::many_single_char_names,
    clippy::cast_possible_truncation,
    clippy::duration_suboptimal_units,
    missing_docs
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_core::{CallOptions, Deadline, Error, Field, QuotaLimit, Sha256Digest};
use serde_json::json;

use crate::model::{
    ArtifactName, ArtifactScope, ByteRange, DeleteSelector, MimeType, PageRequest, PutOptions,
    Selector,
};
use crate::store::{ArtifactLimits, ArtifactStore, Body, ByteStream};
use crate::{ArtifactMeta, InMemoryArtifacts};

pub mod model;

/// Creates fresh, empty stores for the suite.
#[async_trait]
pub trait ArtifactFactory: Send + Sync {
    /// A new empty store with `limits`.
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore>;

    /// Flips one stored byte (at `offset`) of a version in the store opened
    /// last; false if this factory cannot.
    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool;

    /// Closes `store` (the one opened last) and opens it again from what
    /// it persisted; `None` for volatile stores.
    async fn reopen(&self, store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>>;

    /// Random sequences the model test runs (fewer for stores behind a
    /// slow server).
    fn model_cases(&self) -> u32 {
        32
    }
}

/// A store that keeps something alive (a directory, a server) while used.
pub struct Guarded {
    store: Box<dyn ArtifactStore>,
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl Guarded {
    /// `store`, keeping `guard` alive until the store is dropped.
    pub fn new(
        store: impl ArtifactStore + 'static,
        guard: impl std::any::Any + Send + Sync,
    ) -> Self {
        Self {
            store: Box::new(store),
            _guard: Box::new(guard),
        }
    }
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for Guarded {
    type Target = dyn ArtifactStore;
    fn deref(&self) -> &Self::Target {
        &*self.store
    }
}

impl crate::store::ArtifactLayer for Guarded {
    type Inner = dyn ArtifactStore;
    fn inner(&self) -> &Self::Inner {
        &*self.store
    }
}

/// Factory of [`InMemoryArtifacts`].
#[derive(Debug, Default)]
pub struct InMemoryFactory {
    last: parking_lot::Mutex<Option<Arc<InMemoryArtifacts>>>,
}

#[async_trait]
impl ArtifactFactory for InMemoryFactory {
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore> {
        let s = Arc::new(InMemoryArtifacts::new(limits).unwrap());
        *self.last.lock() = Some(s.clone());
        s
    }
    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        let s = self.last.lock().clone();
        match s {
            Some(s) => s.corrupt_for_test(scope, name, version, offset).await,
            None => false,
        }
    }
    async fn reopen(&self, _store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>> {
        None
    }
}

/// How a [`WrappedFactory`] wraps each store.
type Wrap = Box<dyn Fn(Arc<dyn ArtifactStore>) -> Arc<dyn ArtifactStore> + Send + Sync>;

/// Wraps the stores of another factory (in `hippocamp_routed::RoutedArtifacts`
/// or [`ScopeChecked`](crate::ScopeChecked)), so each wrapper runs the same
/// suite as the stores it fronts.
pub struct WrappedFactory<F> {
    inner: F,
    wrap: Wrap,
    last_inner: parking_lot::Mutex<Option<Arc<dyn ArtifactStore>>>,
}

impl<F: std::fmt::Debug> std::fmt::Debug for WrappedFactory<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrappedFactory")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<F> WrappedFactory<F> {
    /// Wraps the stores of `inner` with `wrap`.
    pub fn new(
        inner: F,
        wrap: impl Fn(Arc<dyn ArtifactStore>) -> Arc<dyn ArtifactStore> + Send + Sync + 'static,
    ) -> Self {
        Self {
            inner,
            wrap: Box::new(wrap),
            last_inner: parking_lot::Mutex::new(None),
        }
    }

    /// Puts the stores of `inner` behind reply verification.
    pub fn checked(inner: F) -> Self {
        Self::new(inner, |s| Arc::new(crate::ScopeChecked::new(s)))
    }

    fn wrap(&self, inner: Arc<dyn ArtifactStore>) -> Arc<dyn ArtifactStore> {
        *self.last_inner.lock() = Some(inner.clone());
        (self.wrap)(inner)
    }
}

#[async_trait]
impl<F: ArtifactFactory> ArtifactFactory for WrappedFactory<F> {
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore> {
        let inner = self.inner.open(limits).await;
        self.wrap(inner)
    }
    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        self.inner.corrupt_last(scope, name, version, offset).await
    }
    fn model_cases(&self) -> u32 {
        self.inner.model_cases()
    }
    async fn reopen(&self, store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>> {
        drop(store);
        let inner = self.last_inner.lock().take()?;
        let reopened = self.inner.reopen(inner).await?;
        Some(self.wrap(reopened))
    }
}

/// Expands to one test per scenario, plus the model test. With `guard =
/// f`, each test first calls `f() -> bool` and returns at once when it is
/// false (a test that needs an external service and skips without it).
#[macro_export]
macro_rules! artifact_conformance_tests {
    (guard = $guard:expr, $factory:expr) => {
        $crate::artifact_conformance_tests!(@cases $guard, $factory;
            capabilities_report_contract_and_limits,
            versions_increase_and_read_back,
            latest_falls_back_and_numbers_are_never_reused,
            scopes_are_isolated,
            names_page_in_byte_order,
            versions_page_without_bytes,
            delete_is_idempotent_and_reports_versions,
            range_reads,
            streaming_put_and_get_cross_chunks,
            corruption_is_detected,
            bad_input_gets_typed_errors,
            quotas_are_enforced,
            expired_deadline_never_publishes,
            concurrent_puts_get_distinct_versions,
            empty_artifacts,
            missing_things,
            versions_survive_restart,
            scopes_holding_versions_are_listed,
        );
        #[test]
        fn model_test() {
            if !($guard)() {
                return;
            }
            let factory = std::sync::Arc::new($factory);
            let cases = $crate::conformance::ArtifactFactory::model_cases(&*factory);
            $crate::conformance::model::run(factory, cases);
        }
    };
    ($factory:expr) => {
        $crate::artifact_conformance_tests!(guard = (|| true), $factory);
    };
    (@cases $guard:expr, $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if !($guard)() {
                    return;
                }
                let factory = $factory;
                $crate::conformance::$name(&factory).await;
            }
        )*
    };
}

fn scope() -> ArtifactScope {
    ArtifactScope::session("app", "u1", "s1").unwrap()
}

fn name(n: &str) -> ArtifactName {
    ArtifactName::new(n).unwrap()
}

fn c() -> CallOptions {
    CallOptions::default()
}

fn opts() -> PutOptions {
    PutOptions::default()
}

async fn put(
    s: &dyn ArtifactStore,
    sc: &ArtifactScope,
    n: &str,
    data: &'static [u8],
) -> ArtifactMeta {
    s.put(sc, &name(n), Body::from(data), &opts())
        .await
        .unwrap()
}

async fn read(s: &dyn ArtifactStore, sc: &ArtifactScope, n: &str, sel: Selector) -> Bytes {
    s.get(sc, &name(n), sel, None, &c())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
}

fn small() -> ArtifactLimits {
    ArtifactLimits {
        chunk_size: 4_096,
        ..ArtifactLimits::default()
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| u8::try_from((i * 31 + usize::from(seed)) % 251).unwrap())
        .collect()
}

fn pieces(data: Vec<u8>, piece: usize) -> Body {
    let chunks: Vec<hippocamp_core::Result<Bytes>> = data
        .chunks(piece)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Body::Stream(futures::stream::iter(chunks).boxed())
}

pub async fn capabilities_report_contract_and_limits(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let caps = s.capabilities();
    assert_eq!(caps.api_version, 1);
    assert!(caps.immutable_versions && caps.range_reads);
    // Holding bytes in memory is not streaming in bounded memory.
    if caps.backend == "memory" {
        assert!(!caps.streaming);
    }
    assert_eq!(caps.scopes, vec!["app", "user", "session"]);
    for (n, v) in [
        ("max_artifact_bytes", 64 << 20),
        ("max_page_limit", 1_000),
        ("chunk_size", 1 << 20),
        ("max_metadata_bytes", 16_384),
        ("max_metadata_nodes", 129),
        ("max_metadata_depth", 7),
        ("max_timeout_ms", 300_000),
    ] {
        let l = caps
            .limits
            .iter()
            .find(|l| l.name == n)
            .unwrap_or_else(|| panic!("limit {n} not reported"));
        assert_eq!(l.value, v, "{n}");
    }
    // Names may be bounded below the contract's 1,024 bytes by a backend
    // (object keys), but never silently: the bound is reported.
    let names = caps
        .limits
        .iter()
        .find(|l| l.name == "max_name_bytes")
        .expect("max_name_bytes reported");
    assert!((255..=1_024).contains(&names.value), "{names:?}");
    // Every reported limit is well formed.
    for l in &caps.limits {
        assert!(l.min <= l.value && l.value <= l.max, "{l:?}");
    }
}

pub async fn versions_increase_and_read_back(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    let o = PutOptions {
        mime_type: MimeType::new("text/plain").unwrap(),
        metadata: json!({"source": "agent"}).as_object().unwrap().clone(),
        ..PutOptions::default()
    };
    let v1 = s
        .put(
            &sc,
            &name("reports/summary.txt"),
            Body::from(&b"first"[..]),
            &o,
        )
        .await
        .unwrap();
    assert_eq!(v1.version, 1);
    assert_eq!(v1.size, 5);
    assert_eq!(v1.sha256, Sha256Digest::of(b"first"));
    assert_eq!(v1.mime_type.as_str(), "text/plain");
    assert_eq!(v1.metadata["source"], json!("agent"));
    assert_eq!(v1.scope, sc);
    let v2 = put(&*s, &sc, "reports/summary.txt", b"second").await;
    assert_eq!(v2.version, 2);
    assert_eq!(v2.mime_type.as_str(), "application/octet-stream");
    assert_eq!(
        &read(&*s, &sc, "reports/summary.txt", Selector::Version(1)).await[..],
        b"first"
    );
    assert_eq!(
        &read(&*s, &sc, "reports/summary.txt", Selector::Latest).await[..],
        b"second"
    );
    let head = s
        .head(
            &sc,
            &name("reports/summary.txt"),
            Selector::Version(1),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(head, v1);
    let got = s
        .get(
            &sc,
            &name("reports/summary.txt"),
            Selector::Latest,
            None,
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(got.meta, v2);
}

pub async fn latest_falls_back_and_numbers_are_never_reused(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    put(&*s, &sc, "a", b"one").await;
    put(&*s, &sc, "a", b"two").await;
    assert_eq!(
        s.delete(&sc, &name("a"), DeleteSelector::Latest, &c())
            .await
            .unwrap(),
        vec![2]
    );
    assert_eq!(&read(&*s, &sc, "a", Selector::Latest).await[..], b"one");
    assert_eq!(
        s.delete(&sc, &name("a"), DeleteSelector::All, &c())
            .await
            .unwrap(),
        vec![1]
    );
    assert!(matches!(
        s.get(&sc, &name("a"), Selector::Latest, None, &c()).await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(put(&*s, &sc, "a", b"three").await.version, 3);
}

pub async fn scopes_are_isolated(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let scopes = [
        ArtifactScope::app("app").unwrap(),
        ArtifactScope::user("app", "u1").unwrap(),
        ArtifactScope::user("app", "u2").unwrap(),
        ArtifactScope::session("app", "u1", "s1").unwrap(),
        ArtifactScope::session("app", "u1", "s2").unwrap(),
        ArtifactScope::app("other").unwrap(),
    ];
    for (i, sc) in scopes.iter().enumerate() {
        for _ in 0..=i {
            s.put(
                sc,
                &name("nested/café.txt"),
                Body::from(format!("{sc}").into_bytes()),
                &opts(),
            )
            .await
            .unwrap();
        }
    }
    for (i, sc) in scopes.iter().enumerate() {
        let got = s
            .get(sc, &name("nested/café.txt"), Selector::Latest, None, &c())
            .await
            .unwrap();
        assert_eq!(got.meta.version, i as u64 + 1);
        assert_eq!(got.meta.scope, *sc);
        assert_eq!(
            got.bytes().await.unwrap(),
            Bytes::from(format!("{sc}").into_bytes())
        );
        let names = s
            .list_names(sc, &PageRequest::default(), &c())
            .await
            .unwrap();
        assert_eq!(names.items, vec![name("nested/café.txt")]);
        assert_eq!(names.scope, *sc);
    }
    // Deleting in one scope touches no other.
    s.delete(
        &scopes[0],
        &name("nested/café.txt"),
        DeleteSelector::All,
        &c(),
    )
    .await
    .unwrap();
    assert!(
        s.head(&scopes[1], &name("nested/café.txt"), Selector::Latest, &c())
            .await
            .is_ok()
    );
    assert!(
        s.list_names(&scopes[0], &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// The scopes that hold a version are listed page by page, each once;
/// one whose versions are all deleted is not. A store without the index
/// says so in its capabilities and refuses with `Unsupported`.
pub async fn scopes_holding_versions_are_listed(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let scopes = [
        ArtifactScope::app("lister").unwrap(),
        ArtifactScope::user("lister", "u1").unwrap(),
        ArtifactScope::session("lister", "u1", "s1").unwrap(),
        ArtifactScope::user("lister", "u2").unwrap(),
    ];
    for sc in &scopes {
        put(&*s, sc, "doc.txt", b"x").await;
    }
    if !s.capabilities().scope_listing {
        assert!(matches!(
            s.list_scopes(None, None, &c()).await,
            Err(hippocamp_core::Error::Unsupported { .. })
        ));
        return;
    }
    s.delete(
        &scopes[3],
        &ArtifactName::new("doc.txt").unwrap(),
        DeleteSelector::All,
        &c(),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let page = s
            .list_scopes(cursor.as_deref(), Some(1), &c())
            .await
            .unwrap();
        assert!(page.scopes.len() <= 1);
        seen.extend(page.scopes);
        match page.next_cursor {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    let mut want: Vec<String> = scopes[..3].iter().map(ToString::to_string).collect();
    let mut got: Vec<String> = seen.iter().map(ToString::to_string).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "each scope holding a version, once");
    assert!(s.list_scopes(Some("zz"), None, &c()).await.is_err());
}

pub async fn names_page_in_byte_order(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    for n in ["b", "a", "c", "a/z", "é", "B"] {
        put(&*s, &sc, n, b"x").await;
        put(&*s, &sc, n, b"y").await;
    }
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let page = s
            .list_names(
                &sc,
                &PageRequest {
                    cursor: cursor.clone(),
                    limit: Some(2),
                },
                &c(),
            )
            .await
            .unwrap();
        assert!(page.items.len() <= 2);
        all.extend(page.items.clone());
        match page.next_cursor {
            Some(n) => {
                assert_eq!(Some(&n), page.items.last());
                cursor = Some(n);
            }
            None => break,
        }
    }
    let want: Vec<ArtifactName> = ["B", "a", "a/z", "b", "c", "é"]
        .iter()
        .map(|n| name(n))
        .collect();
    assert_eq!(all, want);
    // An exactly full last page reports no cursor.
    let p = s
        .list_names(&sc, &PageRequest::after(name("b"), 2), &c())
        .await
        .unwrap();
    assert_eq!(p.items, vec![name("c"), name("é")]);
    assert_eq!(p.next_cursor, None);
    // Cursors need not exist; a name without versions disappears.
    let p = s
        .list_names(&sc, &PageRequest::after(name("aa"), 10), &c())
        .await
        .unwrap();
    assert_eq!(p.items.first(), Some(&name("b")));
    s.delete(&sc, &name("b"), DeleteSelector::All, &c())
        .await
        .unwrap();
    let p = s
        .list_names(&sc, &PageRequest::after(name("aa"), 10), &c())
        .await
        .unwrap();
    assert_eq!(p.items.first(), Some(&name("c")));
}

pub async fn versions_page_without_bytes(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    for _ in 0..5 {
        put(&*s, &sc, "doc", b"data").await;
    }
    s.delete(&sc, &name("doc"), DeleteSelector::Version(3), &c())
        .await
        .unwrap();
    let p = s
        .list_versions(&sc, &name("doc"), &PageRequest::first(1), &c())
        .await
        .unwrap();
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.items[0].version, 1);
    assert_eq!(p.next_cursor, Some(1));
    let json = serde_json::to_value(&p.items[0]).unwrap();
    assert!(json.get("data").is_none());
    let p = s
        .list_versions(&sc, &name("doc"), &PageRequest::after(1, 2), &c())
        .await
        .unwrap();
    assert_eq!(
        p.items.iter().map(|m| m.version).collect::<Vec<_>>(),
        vec![2, 4]
    );
    assert_eq!(p.next_cursor, Some(4));
    let p = s
        .list_versions(&sc, &name("doc"), &PageRequest::after(4, 2), &c())
        .await
        .unwrap();
    assert_eq!(
        p.items.iter().map(|m| m.version).collect::<Vec<_>>(),
        vec![5]
    );
    assert_eq!(p.next_cursor, None);
    let p = s
        .list_versions(&sc, &name("nothing"), &PageRequest::default(), &c())
        .await
        .unwrap();
    assert!(p.items.is_empty() && p.next_cursor.is_none());
}

pub async fn delete_is_idempotent_and_reports_versions(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    for _ in 0..4 {
        put(&*s, &sc, "n", b"v").await;
    }
    let d = |sel| {
        let s = s.clone();
        let sc = sc.clone();
        async move { s.delete(&sc, &name("n"), sel, &c()).await.unwrap() }
    };
    assert_eq!(d(DeleteSelector::Version(2)).await, vec![2]);
    assert_eq!(d(DeleteSelector::Version(2)).await, Vec::<u64>::new());
    assert_eq!(d(DeleteSelector::Latest).await, vec![4]);
    assert_eq!(d(DeleteSelector::All).await, vec![1, 3]);
    assert_eq!(d(DeleteSelector::All).await, Vec::<u64>::new());
    assert_eq!(d(DeleteSelector::Latest).await, Vec::<u64>::new());
    assert!(
        s.delete(&sc, &name("never"), DeleteSelector::All, &c())
            .await
            .unwrap()
            .is_empty()
    );
    let st = s.status().await.unwrap();
    assert!(st.artifacts.is_none_or(|n| n == 0) && st.bytes.is_none_or(|n| n == 0));
}

pub async fn range_reads(f: &dyn ArtifactFactory) {
    let s = f.open(small()).await;
    let sc = scope();
    put(&*s, &sc, "abc", b"abcdef").await;
    let r = s
        .get(
            &sc,
            &name("abc"),
            Selector::Latest,
            Some(ByteRange { offset: 1, len: 3 }),
            &c(),
        )
        .await
        .unwrap();
    assert_eq!(r.range, Some(ByteRange { offset: 1, len: 3 }));
    assert_eq!(r.meta.size, 6);
    assert_eq!(&r.bytes().await.unwrap()[..], b"bcd");
    for bad in [
        ByteRange { offset: 5, len: 2 },
        ByteRange { offset: 0, len: 0 },
        ByteRange { offset: 6, len: 1 },
    ] {
        let e = s
            .get(&sc, &name("abc"), Selector::Latest, Some(bad), &c())
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Range,
                    ..
                }
            ),
            "{bad:?}: {e}"
        );
    }
    // Across chunk boundaries (chunk size 4 KiB).
    let data = pattern(20_000, 7);
    let meta = s
        .put(&sc, &name("big"), Body::from(data.clone()), &opts())
        .await
        .unwrap();
    assert_eq!(meta.chunk_size, 4_096);
    for (o, l) in [
        (0u64, 20_000u64),
        (4_095, 2),
        (4_096, 4_096),
        (10_000, 9_999),
        (19_999, 1),
    ] {
        let got = s
            .get(
                &sc,
                &name("big"),
                Selector::Latest,
                Some(ByteRange { offset: o, len: l }),
                &c(),
            )
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(&got[..], &data[o as usize..(o + l) as usize], "{o}+{l}");
    }
}

pub async fn streaming_put_and_get_cross_chunks(f: &dyn ArtifactFactory) {
    let s = f.open(small()).await;
    let sc = scope();
    let data = pattern(50_000, 3);
    let meta = s
        .put(
            &sc,
            &name("stream.bin"),
            pieces(data.clone(), 1_000),
            &opts(),
        )
        .await
        .unwrap();
    assert_eq!(meta.size, 50_000);
    assert_eq!(meta.sha256, Sha256Digest::of(&data));
    let mut body = s
        .get(&sc, &name("stream.bin"), Selector::Latest, None, &c())
        .await
        .unwrap()
        .body;
    let mut got = Vec::new();
    let mut pieces_seen = 0;
    while let Some(p) = body.next().await {
        let p = p.unwrap();
        assert!(p.len() <= 4_096, "a streamed piece exceeds one chunk");
        got.extend_from_slice(&p);
        pieces_seen += 1;
    }
    assert_eq!(got, data);
    assert!(pieces_seen >= 13);
    // A stream that fails mid-way publishes nothing.
    let failing: ByteStream = futures::stream::iter(vec![
        Ok(Bytes::from_static(b"partial")),
        Err(Error::Unavailable("client went away".into())),
    ])
    .boxed();
    assert!(
        s.put(&sc, &name("broken"), Body::Stream(failing), &opts())
            .await
            .is_err()
    );
    assert!(matches!(
        s.head(&sc, &name("broken"), Selector::Latest, &c()).await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(put(&*s, &sc, "broken", b"ok").await.version, 1);
}

pub async fn corruption_is_detected(f: &dyn ArtifactFactory) {
    let s = f.open(small()).await;
    let sc = scope();
    let data = pattern(12_000, 9);
    let meta = s
        .put(&sc, &name("c.bin"), Body::from(data.clone()), &opts())
        .await
        .unwrap();
    if !f
        .corrupt_last(&sc, &name("c.bin"), meta.version, 5_000)
        .await
    {
        panic!("the factory cannot corrupt stored bytes");
    }
    // Whole read: the first chunk comes through verified, then Corrupt
    // before any byte of the damaged chunk.
    let mut body = s
        .get(&sc, &name("c.bin"), Selector::Latest, None, &c())
        .await
        .unwrap()
        .body;
    let first = body.next().await.unwrap().unwrap();
    assert_eq!(&first[..], &data[..4_096]);
    assert!(matches!(body.next().await, Some(Err(Error::Corrupt(_)))));
    assert!(body.next().await.is_none());
    let whole = s
        .get(&sc, &name("c.bin"), Selector::Latest, None, &c())
        .await
        .unwrap()
        .bytes()
        .await;
    assert!(matches!(whole, Err(Error::Corrupt(_))));
    // A range touching the damaged chunk fails; one that does not, works.
    let bad = ByteRange {
        offset: 4_100,
        len: 10,
    };
    let r = s
        .get(&sc, &name("c.bin"), Selector::Latest, Some(bad), &c())
        .await
        .unwrap()
        .bytes()
        .await;
    assert!(matches!(r, Err(Error::Corrupt(_))));
    let good = ByteRange {
        offset: 9_000,
        len: 2_000,
    };
    let r = s
        .get(&sc, &name("c.bin"), Selector::Latest, Some(good), &c())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&r[..], &data[9_000..11_000]);
}

pub async fn bad_input_gets_typed_errors(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    assert!(ArtifactName::new("x".repeat(1_025)).is_err());
    assert!(ArtifactName::new("../escape").is_err());
    assert!(ArtifactScope::app(&"a".repeat(257)).is_err());
    assert!(MimeType::new("bad\r\nvalue").is_err());
    assert!(MimeType::new("ab").is_err());
    assert!(CallOptions::transfer_timeout(Duration::from_millis(300_001)).is_err());
    assert!(CallOptions::transfer_timeout(Duration::from_millis(300_000)).is_ok());
    let meta_err = |m: serde_json::Value| {
        let s = s.clone();
        let sc = sc.clone();
        async move {
            let o = PutOptions {
                metadata: m.as_object().unwrap().clone(),
                ..PutOptions::default()
            };
            s.put(&sc, &name("m"), Body::from(&b"x"[..]), &o)
                .await
                .unwrap_err()
        }
    };
    for m in [
        json!({"s": "x".repeat(17_000)}),
        serde_json::Value::Object((0..129).map(|i| (format!("k{i}"), json!(i))).collect()),
        json!({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}),
    ] {
        let e = meta_err(m).await;
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Metadata,
                    ..
                }
            ),
            "{e}"
        );
    }
    for bad in [Some(0), Some(1_001)] {
        let e = s
            .list_names(
                &sc,
                &PageRequest {
                    cursor: None,
                    limit: bad,
                },
                &c(),
            )
            .await
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidArgument {
                field: Field::Limit,
                ..
            }
        ));
        let e = s
            .list_versions(
                &sc,
                &name("m"),
                &PageRequest {
                    cursor: None,
                    limit: bad,
                },
                &c(),
            )
            .await
            .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidArgument {
                field: Field::Limit,
                ..
            }
        ));
    }
    let e = s
        .get(&sc, &name("m"), Selector::Version(0), None, &c())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidArgument {
            field: Field::Version,
            ..
        } | Error::NotFound(_)
    ));
    let e = s
        .delete(&sc, &name("m"), DeleteSelector::Version(0), &c())
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidArgument {
            field: Field::Version,
            ..
        }
    ));
    // Nothing was stored by any failed call.
    assert!(s.status().await.unwrap().artifacts.is_none_or(|n| n == 0));
}

pub async fn quotas_are_enforced(f: &dyn ArtifactFactory) {
    let s = f
        .open(ArtifactLimits {
            max_artifact_bytes: 3,
            max_scope_bytes: 4,
            max_total_bytes: 5,
            max_scope_artifacts: 2,
            max_total_artifacts: 3,
            ..small()
        })
        .await;
    let a = ArtifactScope::user("app", "a").unwrap();
    let b = ArtifactScope::user("app", "b").unwrap();
    let q = |e: Error| match e {
        Error::QuotaExceeded { limit } => limit,
        other => panic!("expected a quota error, got {other}"),
    };
    // One artifact over its size limit is too large, not a full quota:
    // the same bytes never fit later.
    let too_large = |e: Error| match e {
        Error::TooLarge { limit, max } => (limit, max),
        other => panic!("expected a size-limit error, got {other}"),
    };
    let e = s
        .put(&a, &name("x"), Body::from(&b"abcd"[..]), &opts())
        .await
        .unwrap_err();
    assert_eq!(too_large(e), ("max_artifact_bytes", 3));
    let streamed = s
        .put(&a, &name("x"), pieces(b"abcd".to_vec(), 1), &opts())
        .await
        .unwrap_err();
    assert_eq!(too_large(streamed), ("max_artifact_bytes", 3));
    // Stores without a catalog (object stores) enforce only the size of
    // one artifact, and say so.
    let caps = s.capabilities();
    if !caps.limits.iter().any(|l| l.name == "max_scope_bytes") {
        assert!(caps.limits.iter().all(|l| !l.name.starts_with("max_total")));
        return;
    }
    put(&*s, &a, "x", b"abc").await;
    let e = s
        .put(&a, &name("y"), Body::from(&b"ab"[..]), &opts())
        .await
        .unwrap_err();
    assert_eq!(q(e), QuotaLimit::ArtifactBytesPerScope(4));
    put(&*s, &b, "y", b"ab").await;
    let e = s
        .put(&b, &name("z"), Body::from(&b"a"[..]), &opts())
        .await
        .unwrap_err();
    assert_eq!(q(e), QuotaLimit::ArtifactBytesTotal(5));
    s.delete(&a, &name("x"), DeleteSelector::All, &c())
        .await
        .unwrap();
    put(&*s, &b, "z", b"a").await;
    let e = s
        .put(&b, &name("w"), Body::from(&b""[..]), &opts())
        .await
        .unwrap_err();
    assert_eq!(q(e), QuotaLimit::ArtifactsPerScope(2));
    put(&*s, &a, "v", b"").await;
    let e = s
        .put(&a, &name("u"), Body::from(&b""[..]), &opts())
        .await
        .unwrap_err();
    assert_eq!(q(e), QuotaLimit::ArtifactsTotal(3));
    // Freed capacity never frees version numbers.
    s.delete(&a, &name("v"), DeleteSelector::All, &c())
        .await
        .unwrap();
    assert_eq!(put(&*s, &a, "x", b"").await.version, 2);
}

pub async fn expired_deadline_never_publishes(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    let past = || {
        CallOptions::until(Deadline::at(
            Instant::now()
                .checked_sub(Duration::from_millis(1))
                .unwrap(),
        ))
    };
    let o = PutOptions {
        call: past(),
        ..PutOptions::default()
    };
    let e = s
        .put(&sc, &name("late"), Body::from(&b"late"[..]), &o)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    assert!(matches!(
        s.head(&sc, &name("late"), Selector::Latest, &c()).await,
        Err(Error::NotFound(_))
    ));
    let v = put(&*s, &sc, "late", b"on time").await.version;
    assert!(v >= 1);
    assert!(matches!(
        s.delete(&sc, &name("late"), DeleteSelector::All, &past())
            .await,
        Err(Error::Timeout(_))
    ));
    assert!(
        s.head(&sc, &name("late"), Selector::Latest, &c())
            .await
            .is_ok()
    );
}

pub async fn concurrent_puts_get_distinct_versions(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    let mut tasks = Vec::new();
    for i in 0..32u8 {
        let s = s.clone();
        let sc = sc.clone();
        tasks.push(tokio::spawn(async move {
            s.put(&sc, &name("shared"), Body::from(vec![i; 10]), &opts())
                .await
                .unwrap()
        }));
    }
    let mut versions = BTreeSet::new();
    for t in tasks {
        let m = t.await.unwrap();
        versions.insert(m.version);
        // Each version holds the bytes its own put sent.
        let got = read(&*s, &sc, "shared", Selector::Version(m.version)).await;
        assert_eq!(got.len(), 10);
        assert_eq!(Sha256Digest::of(&got), m.sha256);
    }
    assert_eq!(versions, (1..=32).collect());
}

pub async fn empty_artifacts(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    let m = put(&*s, &sc, "empty", b"").await;
    assert_eq!(m.size, 0);
    assert_eq!(m.sha256, Sha256Digest::of(b""));
    assert!(read(&*s, &sc, "empty", Selector::Latest).await.is_empty());
    let e = s
        .get(
            &sc,
            &name("empty"),
            Selector::Latest,
            Some(ByteRange { offset: 0, len: 1 }),
            &c(),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        e,
        Error::InvalidArgument {
            field: Field::Range,
            ..
        }
    ));
}

pub async fn missing_things(f: &dyn ArtifactFactory) {
    let s = f.open(ArtifactLimits::default()).await;
    let sc = scope();
    assert!(matches!(
        s.get(&sc, &name("nope"), Selector::Latest, None, &c())
            .await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        s.head(&sc, &name("nope"), Selector::Version(1), &c()).await,
        Err(Error::NotFound(_))
    ));
    put(&*s, &sc, "yes", b"1").await;
    assert!(matches!(
        s.head(&sc, &name("yes"), Selector::Version(2), &c()).await,
        Err(Error::NotFound(_))
    ));
    let p = s
        .list_names(
            &ArtifactScope::app("empty").unwrap(),
            &PageRequest::default(),
            &c(),
        )
        .await
        .unwrap();
    assert!(p.items.is_empty() && p.next_cursor.is_none());
}

pub async fn versions_survive_restart(f: &dyn ArtifactFactory) {
    let s = f.open(small()).await;
    let durable = s.capabilities().durable;
    let sc = scope();
    let data = pattern(10_000, 1);
    let m1 = s
        .put(&sc, &name("kept"), Body::from(data.clone()), &opts())
        .await
        .unwrap();
    put(&*s, &sc, "gone", b"1").await;
    put(&*s, &sc, "gone", b"2").await;
    s.delete(&sc, &name("gone"), DeleteSelector::All, &c())
        .await
        .unwrap();
    let Some(s) = f.reopen(s).await else {
        assert!(!durable, "a durable store's factory must reopen it");
        return;
    };
    assert!(durable);
    let got = s
        .get(&sc, &name("kept"), Selector::Latest, None, &c())
        .await
        .unwrap();
    assert_eq!(got.meta, m1);
    assert_eq!(&got.bytes().await.unwrap()[..], &data[..]);
    assert!(
        s.list_names(&sc, &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            == vec![name("kept")]
    );
    // Numbers of deleted versions stay used after a restart.
    assert_eq!(put(&*s, &sc, "gone", b"3").await.version, 3);
    let st = s.status().await.unwrap();
    if st.artifacts.is_some() {
        assert_eq!((st.artifacts, st.bytes), (Some(2), Some(10_001)));
    }
}
