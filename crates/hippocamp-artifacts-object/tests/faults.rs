//! Fault injection at each step of a put, a delete and a read: a bucket
//! wrapper (over the real in-memory bucket) that delays or fails chosen
//! requests, and counts what reaches the bucket. What is checked: once a
//! version's manifest is written the put reports it and it stays readable;
//! a put that published nothing leaves nothing visible; `Latest` costs a
//! few reads however many versions were deleted, also when two writers
//! share the bucket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use hippocamp_artifacts::{
    ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector, PutOptions, Selector,
};
use hippocamp_artifacts_object::{ObjectArtifacts, ObjectOptions};
use hippocamp_core::{CallOptions, Error, Stage};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions as OsPutOptions, PutPayload, PutResult,
};
use parking_lot::Mutex;

/// What happens to a matching request.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// It reaches the bucket, and its answer comes `Duration` late.
    Late(Duration),
    /// It never reaches the bucket: an error.
    Refused,
    /// It reaches the bucket, but its answer is lost: an error.
    AnswerLost,
}

/// Which puts a fault applies to: create-only or not, and a piece of the
/// key (`/m/` manifests, `/d/` content, `/h/` hints).
#[derive(Debug, Clone, Copy)]
struct Rule {
    create: bool,
    key: &'static str,
    fault: Fault,
}

#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn ObjectStore>,
    rules: Mutex<Vec<Rule>>,
    manifest_gets: AtomicUsize,
}

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: "injected fault".into(),
    }
}

impl Faulty {
    fn new(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            rules: Mutex::new(Vec::new()),
            manifest_gets: AtomicUsize::new(0),
        })
    }

    fn set(&self, rules: Vec<Rule>) {
        *self.rules.lock() = rules;
    }

    fn fault(&self, location: &Path, create: bool) -> Option<Fault> {
        self.rules
            .lock()
            .iter()
            .find(|r| r.create == create && location.as_ref().contains(r.key))
            .map(|r| r.fault)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: OsPutOptions,
    ) -> object_store::Result<PutResult> {
        let create = matches!(opts.mode, PutMode::Create);
        let fault = self.fault(location, create);
        if let Some(Fault::Refused) = fault {
            return Err(injected());
        }
        let r = self.inner.put_opts(location, payload, opts).await;
        match fault {
            Some(Fault::Late(d)) => {
                tokio::time::sleep(d).await;
                r
            }
            Some(Fault::AnswerLost) => Err(injected()),
            _ => r,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if location.as_ref().contains("/m/") {
            self.manifest_gets.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

async fn store_on(bucket: Arc<Faulty>) -> ObjectArtifacts {
    let options = ObjectOptions {
        prefix: "faults".into(),
        ..ObjectOptions::default()
    };
    ObjectArtifacts::on_ordered_store(bucket, options, "faulty")
        .await
        .unwrap()
}

fn fresh() -> Arc<Faulty> {
    Faulty::new(Arc::new(object_store::memory::InMemory::new()))
}

fn scope() -> ArtifactScope {
    ArtifactScope::user("app", "alice").unwrap()
}

fn name() -> ArtifactName {
    ArtifactName::new("report.txt").unwrap()
}

fn put_opts(ms: u64) -> PutOptions {
    PutOptions {
        call: CallOptions::timeout_ms(ms).unwrap(),
        ..PutOptions::default()
    }
}

async fn read(store: &ObjectArtifacts, selector: Selector) -> hippocamp_core::Result<Bytes> {
    store
        .get(&scope(), &name(), selector, None, &CallOptions::default())
        .await?
        .bytes()
        .await
}

/// Content objects under the store's prefix.
async fn content_objects(bucket: &Faulty) -> usize {
    bucket
        .inner
        .list(Some(&Path::from("faults")))
        .filter(|m| {
            let key = m
                .as_ref()
                .map(|m| m.location.to_string())
                .unwrap_or_default();
            async move { key.contains("/d/") }
        })
        .count()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_after_the_manifest_write_reports_the_published_version() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    // The manifest lands; its answer arrives after the put's deadline.
    bucket.set(vec![Rule {
        create: true,
        key: "/m/",
        fault: Fault::Late(Duration::from_millis(600)),
    }]);
    let meta = store
        .put(&scope(), &name(), Body::from("published"), &put_opts(300))
        .await
        .unwrap();
    assert_eq!(meta.version, 1);
    bucket.set(Vec::new());
    assert_eq!(
        &read(&store, Selector::Latest).await.unwrap()[..],
        b"published"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_to_the_manifest_write_is_settled_by_reading_it_back() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    bucket.set(vec![Rule {
        create: true,
        key: "/m/",
        fault: Fault::AnswerLost,
    }]);
    let meta = store
        .put(
            &scope(),
            &name(),
            Body::from("landed"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    bucket.set(Vec::new());
    assert_eq!(
        &read(&store, Selector::Version(meta.version)).await.unwrap()[..],
        b"landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_that_published_nothing_leaves_nothing_visible() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    // The manifest write never reaches the bucket.
    bucket.set(vec![Rule {
        create: true,
        key: "/m/",
        fault: Fault::Refused,
    }]);
    let e = store
        .put(
            &scope(),
            &name(),
            Body::from("lost"),
            &PutOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "unavailable", "{e}");
    // The upload outlasts the deadline: nothing is published either.
    bucket.set(vec![Rule {
        create: false,
        key: "/d/",
        fault: Fault::Late(Duration::from_millis(600)),
    }]);
    let e = store
        .put(&scope(), &name(), Body::from("slow"), &put_opts(300))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(Stage::Transfer)), "{e}");
    bucket.set(Vec::new());
    assert!(matches!(
        read(&store, Selector::Latest).await,
        Err(Error::NotFound(_))
    ));
    // The late upload's content was removed when its put gave up (it
    // published nothing). The refused manifest's content stays: an error
    // from the bucket leaves the write's outcome unknown, and content a
    // manifest might name is never removed.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(content_objects(&bucket).await, 1);
    let meta = store
        .put(
            &scope(),
            &name(),
            Body::from("fine"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(meta.version, 1, "no number was taken by the failed puts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_whose_deadline_passes_mid_way_reports_what_it_deleted() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    for i in 0..3 {
        store
            .put(
                &scope(),
                &name(),
                Body::from(format!("v{i}").into_bytes()),
                &PutOptions::default(),
            )
            .await
            .unwrap();
    }
    // Each tombstone lands but answers slowly: the deadline passes after
    // the first.
    bucket.set(vec![Rule {
        create: false,
        key: "/m/",
        fault: Fault::Late(Duration::from_millis(250)),
    }]);
    let removed = store
        .delete(
            &scope(),
            &name(),
            DeleteSelector::All,
            &CallOptions::timeout_ms(200).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(removed, vec![1, 2, 3]);
    bucket.set(Vec::new());
    assert!(matches!(
        read(&store, Selector::Latest).await,
        Err(Error::NotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_costs_a_few_reads_however_many_versions_were_deleted_by_two_writers() {
    let bucket = fresh();
    // Two servers on one bucket.
    let a = store_on(Arc::clone(&bucket)).await;
    let b = store_on(Arc::clone(&bucket)).await;
    for i in 1..=60u64 {
        let w = if i % 2 == 0 { &a } else { &b };
        let m = w
            .put(
                &scope(),
                &name(),
                Body::from(format!("v{i}").into_bytes()),
                &PutOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(m.version, i);
    }
    // The newest 55 versions go, alternately through each writer.
    for v in (6..=60u64).rev() {
        let w = if v % 2 == 0 { &b } else { &a };
        let removed = w
            .delete(
                &scope(),
                &name(),
                DeleteSelector::Version(v),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(removed, vec![v]);
    }
    for w in [&a, &b] {
        let before = bucket.manifest_gets.load(Ordering::Relaxed);
        let meta = w
            .head(&scope(), &name(), Selector::Latest, &CallOptions::default())
            .await
            .unwrap();
        let gets = bucket.manifest_gets.load(Ordering::Relaxed) - before;
        assert_eq!(meta.version, 5);
        assert!(gets <= 2, "Latest read {gets} manifests");
    }
    // A writer that wrote a stale hint after the other's delete: still
    // the right answer (the hint is verified, then walked past).
    let m = a
        .put(&scope(), &name(), Body::from("v61"), &PutOptions::default())
        .await
        .unwrap();
    assert_eq!(m.version, 61);
    b.delete(
        &scope(),
        &name(),
        DeleteSelector::Latest,
        &CallOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(&read(&a, Selector::Latest).await.unwrap()[..], b"v5");
    // Deleting the latest through the other writer, again and again.
    for want in (1..=4u64).rev() {
        a.delete(
            &scope(),
            &name(),
            DeleteSelector::Latest,
            &CallOptions::default(),
        )
        .await
        .unwrap();
        let meta = b
            .head(&scope(), &name(), Selector::Latest, &CallOptions::default())
            .await
            .unwrap();
        assert_eq!(meta.version, want);
    }
    b.delete(
        &scope(),
        &name(),
        DeleteSelector::Latest,
        &CallOptions::default(),
    )
    .await
    .unwrap();
    assert!(matches!(
        read(&a, Selector::Latest).await,
        Err(Error::NotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_and_hint_writes_fail_as_their_roles_say() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    // The live marker comes before the content: its failure fails the put,
    // and nothing is published.
    bucket.set(vec![Rule {
        create: false,
        key: "/l/",
        fault: Fault::Refused,
    }]);
    assert!(
        store
            .put(&scope(), &name(), Body::from("x"), &PutOptions::default())
            .await
            .is_err()
    );
    bucket.set(Vec::new());
    assert!(matches!(
        read(&store, Selector::Latest).await,
        Err(Error::NotFound(_))
    ));
    // The hint is best effort: a put whose hint write fails is still
    // published, and Latest still finds it (the hint is only a start).
    store
        .put(&scope(), &name(), Body::from("one"), &PutOptions::default())
        .await
        .unwrap();
    bucket.set(vec![Rule {
        create: false,
        key: "/h/",
        fault: Fault::Refused,
    }]);
    let m = store
        .put(&scope(), &name(), Body::from("two"), &PutOptions::default())
        .await
        .unwrap();
    assert_eq!(m.version, 2);
    assert_eq!(&read(&store, Selector::Latest).await.unwrap()[..], b"two");
    store
        .delete(
            &scope(),
            &name(),
            DeleteSelector::Version(2),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(&read(&store, Selector::Latest).await.unwrap()[..], b"one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hint_above_every_manifest_is_not_trusted() {
    let bucket = fresh();
    let store = store_on(Arc::clone(&bucket)).await;
    for body in ["one", "two"] {
        store
            .put(&scope(), &name(), Body::from(body), &PutOptions::default())
            .await
            .unwrap();
    }
    // A damaged (or hand-edited) hint claims far more than was allocated.
    let hints: Vec<Path> = bucket
        .inner
        .list(Some(&Path::from("faults")))
        .filter_map(|m| async move {
            m.ok()
                .map(|m| m.location)
                .filter(|l| l.as_ref().contains("/h/"))
        })
        .collect()
        .await;
    assert_eq!(hints.len(), 1);
    object_store::ObjectStoreExt::put(
        &bucket.inner,
        &hints[0],
        br#"{"allocated":50,"latest":50}"#.to_vec().into(),
    )
    .await
    .unwrap();
    assert_eq!(&read(&store, Selector::Latest).await.unwrap()[..], b"two");
    // The next version is still the next number: none is reused.
    let m = store
        .put(
            &scope(),
            &name(),
            Body::from("three"),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(m.version, 3);
    assert_eq!(
        &read(&store, Selector::Version(1)).await.unwrap()[..],
        b"one"
    );
    assert_eq!(&read(&store, Selector::Latest).await.unwrap()[..], b"three");
}
