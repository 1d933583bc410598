//! Conformance factories for the object store: an in-memory bucket, and a
//! real S3 server named by the environment.
//!
//! `HIPPOCAMP_TEST_S3_ENDPOINT` (e.g. `http://127.0.0.1:18014`),
//! `HIPPOCAMP_TEST_S3_BUCKET` (default `hippocamp-test`; it must exist),
//! `HIPPOCAMP_TEST_S3_ACCESS_KEY` and `HIPPOCAMP_TEST_S3_SECRET_KEY`
//! (default `hippocamp`/`hippocamp-secret`). Without an endpoint the S3
//! tests skip with a message, unless `HIPPOCAMP_REQUIRE_EXTERNAL=1`, which
//! turns the skip into a failure. `scripts/s3-server.sh` starts one.

#![allow(
    unreachable_pub,
    dead_code,
    clippy::unwrap_used,
    clippy::missing_panics_doc
)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_artifacts::conformance::ArtifactFactory;
use hippocamp_artifacts::{ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore};
use hippocamp_artifacts_object::{ObjectArtifacts, ObjectOptions, S3Config};
use parking_lot::Mutex;

pub fn options(limits: &ArtifactLimits, prefix: String) -> ObjectOptions {
    ObjectOptions {
        prefix,
        max_artifact_bytes: limits.max_artifact_bytes,
        max_page_limit: limits.max_page_limit,
        default_page_limit: limits.default_page_limit,
        call_timeout_ms: limits.call_timeout_ms,
        chunk_size: limits.chunk_size,
        ..ObjectOptions::default()
    }
}

/// The S3 server of the environment, if any; fails instead when external
/// services are required.
pub fn s3_config() -> Option<S3Config> {
    let s3 = hippocamp_testkit::s3_server()?;
    Some(S3Config {
        endpoint: Some(s3.endpoint),
        bucket: s3.bucket,
        region: "us-east-1".to_owned(),
        access_key_id: s3.access_key,
        secret_access_key: s3.secret_key,
        allow_http: true,
        virtual_hosted: false,
        request_timeout_ms: 30_000,
    })
}

pub fn have_s3() -> bool {
    s3_config().is_some()
}

fn unique_prefix() -> String {
    format!("test/{}", hex::encode(rand::random::<[u8; 8]>()))
}

/// Where the factory's stores live.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Memory,
    S3,
}

/// Opens stores under fresh prefixes (S3) or buckets (memory).
#[derive(Debug)]
pub struct ObjectFactory {
    target: Target,
    last: Mutex<Option<(String, ArtifactLimits, Arc<ObjectArtifacts>)>>,
}

impl ObjectFactory {
    pub fn new(target: Target) -> Self {
        Self {
            target,
            last: Mutex::new(None),
        }
    }

    async fn open_at(&self, prefix: String, limits: &ArtifactLimits) -> Arc<ObjectArtifacts> {
        let opts = options(limits, prefix);
        let store = match self.target {
            Target::Memory => ObjectArtifacts::in_memory(opts).await,
            Target::S3 => ObjectArtifacts::s3(&s3_config().unwrap(), opts).await,
        };
        Arc::new(store.unwrap())
    }
}

#[async_trait]
impl ArtifactFactory for ObjectFactory {
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore> {
        let prefix = unique_prefix();
        let store = self.open_at(prefix.clone(), &limits).await;
        *self.last.lock() = Some((prefix, limits, Arc::clone(&store)));
        store
    }

    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        let Some((_, _, store)) = self.last.lock().clone() else {
            return false;
        };
        let Some(key) = store.content_key(scope, name, version).await else {
            return false;
        };
        hippocamp_artifacts_object::store::flip_byte(&*store.object_store(), &key, offset).await
    }

    fn model_cases(&self) -> u32 {
        // Every step of the model lists and reads back over HTTP.
        match self.target {
            Target::Memory => 32,
            Target::S3 => 6,
        }
    }

    async fn reopen(&self, store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>> {
        drop(store);
        if matches!(self.target, Target::Memory) {
            return None;
        }
        let (prefix, limits, _) = self.last.lock().take()?;
        let reopened = self.open_at(prefix.clone(), &limits).await;
        *self.last.lock() = Some((prefix, limits, Arc::clone(&reopened)));
        Some(reopened)
    }
}
