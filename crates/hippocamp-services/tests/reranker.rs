//! `[reranker]` through the services: the stage is built from the
//! configuration, sits under the governance gate (a refused search never
//! reaches it) and is reported by capabilities. The store's embedder here
//! is the hashing one, reused as the bi-encoder (`use_embedder`): these
//! tests check wiring, not ranking quality.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_embed::hash::HashEmbedder;
use hippocamp_governance::AppPolicy;
use hippocamp_memory::{NewEntry, SearchMode, SearchRequest, WriteOptions};
use hippocamp_services::{Config, Services};

fn config(dir: &std::path::Path, suspended: bool) -> Config {
    let mut c = Config::from_toml(&format!(
        "profile = \"durable\"\ndata_dir = {:?}\n[reranker]\nuse_embedder = true\nweight = 1.0\n[reranker.limits]\ncandidates = 5\n",
        dir.display().to_string()
    ))
    .unwrap();
    c.policy.apps.insert(
        "shop".into(),
        AppPolicy {
            suspended,
            ..AppPolicy::default()
        },
    );
    c
}

async fn build(c: Config) -> Services {
    tokio::task::spawn_blocking(move || Services::build(&c, Some(Arc::new(HashEmbedder::new(64)))))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_stage_reranks_governed_searches() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(config(dir.path(), false)).await;
    let m = s.memory_store().unwrap();
    let caps = m.capabilities();
    let info = caps.search.rerank.as_ref().unwrap();
    assert_eq!((info.model.as_str(), info.candidates), ("hash-64", 5));
    assert!(caps.limits.iter().any(|l| l.name == "rerank.timeout_ms"));
    let scope = MemoryScope::parse("shop", "alice").unwrap();
    for text in [
        "window seat on long flights",
        "aisle seat please",
        "seat seat seat",
    ] {
        m.add_entry(&scope, NewEntry::new(text), &WriteOptions::default())
            .await
            .unwrap();
    }
    let r = m
        .search(
            &scope,
            &SearchRequest::new("window seat")
                .mode(SearchMode::Lexical)
                .explained(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.hits.len(), 3);
    for hit in &r.hits {
        let stages: Vec<&str> = hit
            .explanation
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.stage.as_str())
            .collect();
        assert_eq!(stages.last(), Some(&"rerank"), "{stages:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_search_never_reaches_the_reranker() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(config(dir.path(), true)).await;
    let scope = MemoryScope::parse("shop", "alice").unwrap();
    let e = s
        .memory_store()
        .unwrap()
        .search(&scope, &SearchRequest::new("seat"), &CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "policy_denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_embedder_without_an_embedder_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), false);
    let e = Services::open(&c).await.unwrap_err();
    assert!(e.to_string().contains("use_embedder"), "{e}");
}

#[test]
fn a_reranker_without_a_source_is_refused_at_load() {
    let bad = |text: &str| Config::from_toml(text).is_err();
    assert!(bad("[reranker]\nweight = 0.5\n"), "no source");
    assert!(
        bad("[reranker]\nuse_embedder = true\nspeed = 1\n"),
        "unknown key"
    );
    assert!(
        bad("[reranker]\nuse_embedder = true\nweight = 2.0\n"),
        "weight"
    );
    assert!(!bad("[reranker]\nuse_embedder = true\n"));
}
