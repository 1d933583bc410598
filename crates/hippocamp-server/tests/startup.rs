//! Start-up with an embedder that is slow or absent (issue 41, item 10):
//! with `[embedder] dimension` the server starts at once, `/readyz` says
//! the embedder is not ready, writes that need a vector answer 503 with
//! `Retry-After`, lexical search works; once the embedder answers, all of
//! it does. Against a real HTTP endpoint on loopback that stalls, then
//! answers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::many_single_char_names
)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use hippocamp_server::Profile;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestServer, client};

const ALICE: &str = "/v1/apps/shop/users/alice";
const DIMENSION: usize = 8;

/// An embeddings endpoint that stalls (past any deadline) until `up`,
/// then answers every input with a unit vector.
async fn stalling_embedder(up: Arc<AtomicBool>) -> String {
    async fn embed(State(up): State<Arc<AtomicBool>>, Json(rq): Json<Value>) -> Json<Value> {
        while !up.load(Ordering::Acquire) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let n = rq["input"].as_array().map_or(1, Vec::len);
        let mut v = vec![0.0; DIMENSION];
        v[0] = 1.0;
        let data: Vec<Value> = (0..n)
            .map(|i| json!({"index": i, "embedding": v}))
            .collect();
        Json(json!({"model": rq["model"], "data": data}))
    }
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embed))
        .with_state(up);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// `method path` with `token` and a JSON body, the reply as JSON.
async fn send(
    s: &TestServer,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let body = body.map(|b| serde_json::to_vec(&b).unwrap());
    let (st, h, b) = support::send(s, method, path, Some(token), body).await;
    (st, h, support::j(&b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_embedder_with_a_dimension_does_not_stop_the_server() {
    let up = Arc::new(AtomicBool::new(false));
    let url = stalling_embedder(Arc::clone(&up)).await;
    let s = TestServer::start(Profile::Ephemeral, |c| {
        // The probe gives up quickly; the server never waits for it.
        let limits = hippocamp_embed::EmbedLimits {
            timeout_ms: 300,
            ..Default::default()
        };
        c.embedder = Some(hippocamp_services::EmbedderConfig {
            base_url: Some(url),
            model: Some("stalling".into()),
            model_dir: None,
            dimension: Some(DIMENSION),
            api_key_env: None,
            limits,
            local: hippocamp_embed::LocalLimits::default(),
            startup_wait_ms: hippocamp_services::embedder::DEFAULT_STARTUP_WAIT_MS,
        });
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["embedder"], "not_ready", "{body}");
    // Past the first probe, a write that needs a vector is refused at
    // once: 503, Retry-After, nothing written.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let entry = json!({"content": "I keep bees on the roof"});
    let (st, h, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry.clone()),
    )
    .await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert_eq!(b["code"], "unavailable");
    assert!(h.contains_key("retry-after"));
    // Lexical search answers.
    let search = json!({"query": "bees", "mode": "lexical"});
    let (st, _, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/search"),
        &t,
        Some(search.clone()),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["hits"], json!([]));
    // The embedder comes up: the next probe sees it, and the write goes
    // through.
    up.store(true, Ordering::Release);
    let mut ready = false;
    for _ in 0..100 {
        let r = client().get(s.url("/readyz")).send().await.unwrap();
        if r.status() == StatusCode::OK {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the server never became ready");
    let (st, _, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    let (_, _, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/search"),
        &t,
        Some(search),
    )
    .await;
    assert_eq!(b["hits"][0]["content"], "I keep bees on the roof", "{b}");
    s.stop().await;
}

/// Without a dimension, start-up waits for the dimension probe for
/// `startup_wait_ms`, retrying, then gives up saying what to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dimension_start_up_waits_then_says_to_set_it() {
    let up = Arc::new(AtomicBool::new(false));
    let url = stalling_embedder(Arc::clone(&up)).await;
    let dir = tempfile::tempdir().unwrap();
    let limits = hippocamp_embed::EmbedLimits {
        timeout_ms: 200,
        ..Default::default()
    };
    let config = hippocamp_server::Config {
        profile: Profile::Ephemeral,
        data_dir: dir.path().join("data"),
        bind: "127.0.0.1:0".parse().unwrap(),
        embedder: Some(hippocamp_services::EmbedderConfig {
            base_url: Some(url),
            model: Some("stalling".into()),
            model_dir: None,
            dimension: None,
            api_key_env: None,
            limits,
            local: hippocamp_embed::LocalLimits::default(),
            startup_wait_ms: 1_000,
        }),
        ..hippocamp_server::Config::default()
    };
    let started = std::time::Instant::now();
    let e = hippocamp_server::Bound::new(config.clone())
        .await
        .err()
        .unwrap();
    let waited = started.elapsed();
    let m = e.to_string();
    assert!(
        m.contains("startup_wait_ms") && m.contains("set embedder.dimension"),
        "{m}"
    );
    // It retried for about the time it was given, not for ever.
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    // An embedder that answers within the wait is learnt.
    up.store(true, Ordering::Release);
    let bound = hippocamp_server::Bound::new(config).await.unwrap();
    assert_eq!(bound.services().embedder_ready(), None);
}
