//! A `/rerank` endpoint as a [`Reranker`].
//!
//! Two request shapes exist in the wild, both sent to `{base_url}/rerank`:
//! - `documents` (llama.cpp's server with `--reranking`, Jina, Cohere,
//!   vLLM): `{model, query, documents, top_n}`, answered
//!   `{results: [{index, relevance_score}]}`;
//! - `texts` (text-embeddings-inference): `{query, texts, truncate}`,
//!   answered `[{index, score}]`.
//!
//! Either reply is accepted from either shape; every index from 0 to n - 1
//! must come exactly once with a finite score.

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Problem, Result, Stage};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::rerank::{Reranker, check_documents, check_scores};

const SERVICE: &str = "the reranking endpoint";

/// The request shape an endpoint speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankShape {
    /// `{model, query, documents, top_n}` (llama.cpp, Jina, Cohere, vLLM).
    #[default]
    Documents,
    /// `{query, texts, truncate}` (text-embeddings-inference).
    Texts,
}

/// Where and how to reach the endpoint.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRerankerConfig {
    /// Base URL; requests go to `{base_url}/rerank`.
    pub base_url: String,
    /// The model to ask for (sent in the `documents` shape).
    pub model: String,
    /// The request shape.
    pub shape: RerankShape,
    /// A bearer key, if the endpoint wants one (never printed).
    pub api_key: Option<String>,
    /// Most documents per call.
    pub max_documents: usize,
}

impl fmt::Debug for HttpRerankerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRerankerConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("shape", &self.shape)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_documents", &self.max_documents)
            .finish()
    }
}

/// The client.
#[derive(Debug, Clone)]
pub struct HttpReranker {
    config: HttpRerankerConfig,
    url: reqwest::Url,
    http: reqwest::Client,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Reply {
    Wrapped { results: Vec<Item> },
    Bare(Vec<Item>),
}

#[derive(Debug, Deserialize)]
struct Item {
    index: usize,
    #[serde(alias = "score")]
    relevance_score: f64,
}

fn bad(detail: impl Into<String>) -> Error {
    hippocamp_http::bad(SERVICE, detail)
}

/// The scores of a reply in document order: every index exactly once.
fn ordered(reply: Reply, documents: usize) -> Result<Vec<f32>> {
    let items = match reply {
        Reply::Wrapped { results } => results,
        Reply::Bare(items) => items,
    };
    let mut slots: Vec<Option<f32>> = vec![None; documents];
    for item in items {
        let slot = slots
            .get_mut(item.index)
            .ok_or_else(|| bad(format!("index {} for {documents} documents", item.index)))?;
        #[allow(clippy::cast_possible_truncation)]
        if slot.replace(item.relevance_score as f32).is_some() {
            return Err(bad(format!("index {} twice", item.index)));
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.ok_or_else(|| bad(format!("no score for document {i}"))))
        .collect()
}

impl HttpReranker {
    /// A client for `config` (nothing is sent until the first call).
    pub fn new(config: HttpRerankerConfig) -> Result<Self> {
        let url = reqwest::Url::parse(&format!("{}/rerank", config.base_url.trim_end_matches('/')))
            .map_err(|e| Error::config("reranker.base_url", Problem::Malformed(e.to_string())))?;
        Ok(Self {
            config,
            url,
            http: hippocamp_http::client()?,
        })
    }
}

#[async_trait]
impl Reranker for HttpReranker {
    fn model(&self) -> &str {
        &self.config.model
    }

    async fn score(&self, query: &str, documents: &[&str], deadline: Deadline) -> Result<Vec<f32>> {
        check_documents(query, documents, self.config.max_documents)?;
        deadline.check(Stage::Model)?;
        let request = match self.config.shape {
            RerankShape::Documents => json!({
                "model": self.config.model,
                "query": query,
                "documents": documents,
                "top_n": documents.len(),
            }),
            RerankShape::Texts => json!({
                "query": query,
                "texts": documents,
                "truncate": true,
            }),
        };
        let body = serde_json::to_vec(&request)
            .map_err(|e| bad(format!("cannot encode the request: {e}")))?;
        let mut rq = self.http.post(self.url.clone());
        if let Some(k) = &self.config.api_key {
            rq = rq.bearer_auth(k);
        }
        let bounds = hippocamp_http::Bounds {
            max_request_bytes: None,
            // An index and a score per document, with room for echoed
            // documents some servers add.
            max_reply_bytes: (body.len() as u64).saturating_mul(2) + (64 << 10),
            wait: deadline.remaining(),
            stage: Stage::Model,
        };
        let reply = hippocamp_http::post_json(SERVICE, rq, body, bounds).await?;
        let reply = serde_json::from_slice::<Reply>(&reply)
            .map_err(|e| bad(format!("not a rerank reply: {e}")))?;
        let scores = ordered(reply, documents.len())?;
        check_scores(SERVICE, documents.len(), &scores)?;
        Ok(scores)
    }
}
