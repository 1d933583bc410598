//! The object-store store on an in-memory bucket, alone and routed, runs
//! the conformance suite; a server that ignores create-only writes is
//! refused at start.

#![allow(clippy::unwrap_used)]

mod support;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use hippocamp_artifacts::{ArtifactName, ArtifactScope, ArtifactStore, Body, PutOptions};
use hippocamp_artifacts_object::{ObjectArtifacts, ObjectOptions};
use hippocamp_core::Error;
use hippocamp_router::RouterConfig;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions as OsPutOptions, PutPayload, PutResult,
};
use support::{ObjectFactory, Target};

mod plain {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(ObjectFactory::new(Target::Memory));
}

mod routed {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(hippocamp_routed::artifacts::routed_factory(
        ObjectFactory::new(Target::Memory),
        RouterConfig::default()
    ));
}

/// An in-memory bucket that, like Garage 2.5, ignores `If-None-Match`.
#[derive(Debug, Default)]
struct IgnoresCreate(InMemory);

impl fmt::Display for IgnoresCreate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IgnoresCreate")
    }
}

#[async_trait]
impl ObjectStore for IgnoresCreate {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: OsPutOptions,
    ) -> object_store::Result<PutResult> {
        opts.mode = PutMode::Overwrite;
        self.0.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.0.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.0.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.0.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}

#[tokio::test]
async fn a_server_that_ignores_create_only_writes_is_refused() {
    let e = ObjectArtifacts::on_ordered_store(
        Arc::new(IgnoresCreate::default()),
        ObjectOptions::default(),
        "test",
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&e, Error::Unavailable(m) if m.contains("If-None-Match")),
        "{e}"
    );
}

#[tokio::test]
async fn options_are_checked_and_long_names_refused() {
    let bad = ObjectOptions {
        part_bytes: 1 << 20,
        ..ObjectOptions::default()
    };
    assert!(matches!(
        ObjectArtifacts::in_memory(bad).await,
        Err(Error::InvalidConfig { .. })
    ));
    for prefix in ["", "a//b", "../x", "sp ace"] {
        let bad = ObjectOptions {
            prefix: prefix.to_owned(),
            ..ObjectOptions::default()
        };
        assert!(ObjectArtifacts::in_memory(bad).await.is_err(), "{prefix:?}");
    }
    assert!(serde_json::from_str::<ObjectOptions>(r#"{"endpoint": "x"}"#).is_err());
    let s = ObjectArtifacts::in_memory(ObjectOptions::default())
        .await
        .unwrap();
    let caps = s.capabilities();
    assert!(
        caps.limits
            .iter()
            .any(|l| l.name == "max_name_bytes" && l.value == 400)
    );
    let long = ArtifactName::new("n".repeat(401)).unwrap();
    let e = s
        .put(
            &ArtifactScope::app("a").unwrap(),
            &long,
            Body::from(&b"x"[..]),
            &PutOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
}
