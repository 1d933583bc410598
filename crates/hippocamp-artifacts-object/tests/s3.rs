//! The object-store store on a real S3 server (`s3s-fs` on loopback),
//! alone and routed, runs the conformance suite; two stores on one
//! bucket never allocate the same version; a large artifact goes up in
//! parts. Skips without `HIPPOCAMP_TEST_S3_ENDPOINT` (fails instead under
//! `HIPPOCAMP_REQUIRE_EXTERNAL=1`).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_artifacts::{ArtifactName, ArtifactScope, ArtifactStore, Body, PutOptions, Selector};
use hippocamp_artifacts_object::{ObjectArtifacts, ObjectOptions};
use hippocamp_core::{CallOptions, Sha256Digest};
use hippocamp_router::RouterConfig;
use support::{ObjectFactory, Target, have_s3, s3_config};

mod plain {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(
        guard = have_s3,
        ObjectFactory::new(Target::S3)
    );
}

mod routed {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(
        guard = have_s3,
        hippocamp_routed::artifacts::routed_factory(
            ObjectFactory::new(Target::S3),
            RouterConfig::default()
        )
    );
}

fn prefix() -> String {
    format!("test/{}", hex::encode(rand::random::<[u8; 8]>()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_bucket_never_share_a_version() {
    let Some(config) = s3_config() else {
        return;
    };
    let opts = ObjectOptions {
        prefix: prefix(),
        ..ObjectOptions::default()
    };
    let a = Arc::new(ObjectArtifacts::s3(&config, opts.clone()).await.unwrap());
    let b = Arc::new(ObjectArtifacts::s3(&config, opts).await.unwrap());
    let scope = ArtifactScope::user("app", "u").unwrap();
    let name = ArtifactName::new("shared").unwrap();
    // Interleaved: each store allocates after the other wrote, through
    // its own (stale) view.
    let mut versions = Vec::new();
    for i in 0..10u8 {
        let s = if i % 2 == 0 { &a } else { &b };
        let m = s
            .put(&scope, &name, Body::from(vec![i]), &PutOptions::default())
            .await
            .unwrap();
        versions.push(m.version);
    }
    assert_eq!(versions, (1..=10).collect::<Vec<_>>());
    for (i, v) in versions.iter().enumerate() {
        let got = b
            .get(
                &scope,
                &name,
                Selector::Version(*v),
                None,
                &CallOptions::default(),
            )
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(got, Bytes::from(vec![u8::try_from(i).unwrap()]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_artifact_streams_up_in_parts_and_back_verified() {
    let Some(config) = s3_config() else {
        return;
    };
    let opts = ObjectOptions {
        prefix: prefix(),
        part_bytes: 5 << 20,
        ..ObjectOptions::default()
    };
    let s = ObjectArtifacts::s3(&config, opts).await.unwrap();
    let scope = ArtifactScope::user("app", "u").unwrap();
    let name = ArtifactName::new("big.bin").unwrap();
    let data: Vec<u8> = (0..12_000_000u32)
        .map(|i| u8::try_from(i % 253).unwrap())
        .collect();
    let pieces: Vec<hippocamp_core::Result<Bytes>> = data
        .chunks(100_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let meta = s
        .put(
            &scope,
            &name,
            Body::Stream(futures::stream::iter(pieces).boxed()),
            &PutOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(meta.size, 12_000_000);
    assert_eq!(meta.sha256, Sha256Digest::of(&data));
    let got = s
        .get(
            &scope,
            &name,
            Selector::Latest,
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(Sha256Digest::of(&got), meta.sha256);
}
