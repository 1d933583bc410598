//! The artifact store with its catalog in PostgreSQL and its contents on a
//! real S3 server (s3s-fs) runs the artifact conformance suite and model
//! test, alone and routed; two servers over one catalog allocate distinct
//! versions and list each other's writes; the repair pass removes content
//! no version references, and only that.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_artifacts::conformance::ArtifactFactory;
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, PageRequest, PutOptions,
    Selector,
};
use hippocamp_core::CallOptions;
use hippocamp_postgres::{PgArtifacts, PgConfig};
use object_store::{ObjectStore, ObjectStoreExt as _};
use parking_lot::Mutex;

fn have_both() -> bool {
    support::have_postgres() && hippocamp_testkit::s3_server().is_some()
}

async fn bucket() -> Arc<dyn ObjectStore> {
    let s3 = hippocamp_testkit::s3_server().unwrap();
    let config = hippocamp_artifacts_object::S3Config {
        endpoint: Some(s3.endpoint),
        bucket: s3.bucket,
        region: "us-east-1".to_owned(),
        access_key_id: s3.access_key,
        secret_access_key: s3.secret_key,
        allow_http: true,
        virtual_hosted: false,
        request_timeout_ms: 30_000,
    };
    let options = hippocamp_artifacts_object::ObjectOptions {
        prefix: format!("probe/{:016x}", rand::random::<u64>()),
        ..hippocamp_artifacts_object::ObjectOptions::default()
    };
    hippocamp_artifacts_object::ObjectArtifacts::s3(&config, options)
        .await
        .unwrap()
        .object_store()
}

#[derive(Default)]
struct PgFactory {
    last: Mutex<Option<(PgConfig, String, ArtifactLimits, PgArtifacts)>>,
}

impl PgFactory {
    /// A store over `pg`'s schema and `prefix`, remembered as the last.
    async fn open_on(&self, pg: PgConfig, prefix: String, limits: ArtifactLimits) -> PgArtifacts {
        let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
        let store = PgArtifacts::new(db, bucket().await, prefix.clone(), limits.clone()).unwrap();
        *self.last.lock() = Some((pg, prefix, limits, store.clone()));
        store
    }
}

#[async_trait]
impl ArtifactFactory for PgFactory {
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore> {
        let pg = support::config();
        let prefix = format!("pgtest/{}", pg.schema);
        Arc::new(self.open_on(pg, prefix, limits).await)
    }

    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        let Some((_, _, _, store)) = self.last.lock().clone() else {
            return false;
        };
        let Some(key) = store.content_key(scope, name, version).await else {
            return false;
        };
        hippocamp_artifacts_object::store::flip_byte(&*store.object_store(), &key, offset).await
    }

    async fn reopen(&self, store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>> {
        drop(store);
        let (pg, prefix, limits, _) = self.last.lock().clone()?;
        Some(Arc::new(self.open_on(pg, prefix, limits).await))
    }

    fn model_cases(&self) -> u32 {
        // Every step lists and reads back over HTTP and SQL.
        8
    }
}

mod plain {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(guard = have_both, PgFactory::default());
}

mod routed {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(
        guard = have_both,
        hippocamp_routed::artifacts::routed_factory(
            PgFactory::default(),
            hippocamp_router::RouterConfig::default()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_allocate_distinct_versions_and_repair_removes_only_orphans() {
    if !have_both() {
        return;
    }
    let pg = support::config();
    let prefix = format!("pgtest/{}", pg.schema);
    let limits = ArtifactLimits::default();
    let open = || async {
        let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
        Arc::new(PgArtifacts::new(db, bucket().await, prefix.clone(), limits.clone()).unwrap())
    };
    let (a, b) = (open().await, open().await);
    let scope = ArtifactScope::user("app", "u").unwrap();
    let name = ArtifactName::new("shared").unwrap();
    let c = CallOptions::default();
    let mut tasks = Vec::new();
    for i in 0..20u8 {
        let s = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let (scope, name) = (scope.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            s.put(
                &scope,
                &name,
                Body::from(vec![i; 10]),
                &PutOptions::default(),
            )
            .await
            .unwrap()
            .version
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        versions.push(t.await.unwrap());
    }
    versions.sort_unstable();
    assert_eq!(versions, (1..=20).collect::<Vec<_>>());
    let page = b
        .list_versions(
            &scope,
            &name,
            &PageRequest {
                cursor: None,
                limit: Some(100),
            },
            &c,
        )
        .await
        .unwrap();
    assert_eq!(page.items.len(), 20);
    // An orphan (content a lost commit left), and a version's content.
    let orphan = object_store::path::Path::from(format!("{prefix}/content/orphan"));
    let os = a.object_store();
    os.put(&orphan, bytes::Bytes::from_static(b"left behind").into())
        .await
        .unwrap();
    let live = a.content_key(&scope, &name, 7).await.unwrap();
    // Within the grace period nothing goes (a put may be in flight).
    assert_eq!(a.repair(Duration::from_hours(1)).await.unwrap().removed, 0);
    let r = a.repair(Duration::ZERO).await.unwrap();
    assert_eq!((r.examined, r.removed), (21, 1));
    assert!(os.head(&orphan).await.is_err());
    assert!(os.head(&live).await.is_ok());
    let read = b
        .get(&scope, &name, Selector::Version(7), None, &c)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(read.len(), 10);
    assert_eq!(a.status().await.unwrap().artifacts, Some(20));
}

/// The repair pass walks the bucket in bounded pages, each continuing
/// after the last key of the one before: every orphan goes, every
/// version's content stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_walks_the_content_in_bounded_pages() {
    if !have_both() {
        return;
    }
    let pg = support::config();
    let prefix = format!("pgtest/{}", pg.schema);
    let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
    let a = PgArtifacts::new(
        db,
        bucket().await,
        prefix.clone(),
        ArtifactLimits::default(),
    )
    .unwrap();
    let scope = ArtifactScope::user("app", "u").unwrap();
    let name = ArtifactName::new("kept").unwrap();
    for i in 0..4u8 {
        a.put(
            &scope,
            &name,
            Body::from(vec![i; 10]),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    }
    let os = a.object_store();
    for i in 0..7 {
        let orphan = object_store::path::Path::from(format!("{prefix}/content/orphan-{i}"));
        os.put(&orphan, bytes::Bytes::from_static(b"left behind").into())
            .await
            .unwrap();
    }
    let (mut after, mut examined, mut removed, mut pages) = (None, 0, 0, 0);
    loop {
        let (page, next) = a
            .repair_page(Duration::ZERO, after.as_deref(), 3)
            .await
            .unwrap();
        assert!(page.examined <= 3, "a page looks at 3 objects at most");
        if let (Some(prev), Some(n)) = (&after, &next) {
            assert!(n > prev, "each page continues after the last");
        }
        examined += page.examined;
        removed += page.removed;
        pages += 1;
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!((examined, removed), (11, 7));
    assert!(pages >= 4);
    for v in 1..=4 {
        let key = a.content_key(&scope, &name, v).await.unwrap();
        assert!(os.head(&key).await.is_ok(), "version {v}'s content stays");
    }
    assert_eq!(a.repair(Duration::ZERO).await.unwrap().removed, 0);
}
