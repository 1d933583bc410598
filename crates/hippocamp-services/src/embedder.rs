//! The embedder a configuration names: an OpenAI-compatible endpoint or a
//! local sentence-transformer (in a build with the `local` feature).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{Error, Problem, Result};
use hippocamp_embed::Embedder;
use hippocamp_embed::probed::Probed;
use serde::{Deserialize, Serialize};

/// Where embeddings come from: an OpenAI-compatible endpoint (`base_url`
/// and `model`) or a local sentence-transformer directory (`model_dir`,
/// in a build with the `local-embed` feature).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedderConfig {
    /// Base URL (requests go to `{base_url}/v1/embeddings`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The model to ask the endpoint for.
    #[serde(default)]
    pub model: Option<String>,
    /// A local model directory (`config.json`, `model.safetensors`,
    /// `tokenizer.json`).
    #[serde(default)]
    pub model_dir: Option<PathBuf>,
    /// The vector width (learned from a probe when absent).
    #[serde(default)]
    pub dimension: Option<usize>,
    /// The environment variable holding the API key (keys never go in the
    /// file).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Bounds of every call (timeout, batch size...).
    #[serde(default)]
    pub limits: hippocamp_embed::EmbedLimits,
    /// How a local model runs (`model_dir` only): texts per forward
    /// pass, calls at once.
    #[serde(default)]
    pub local: hippocamp_embed::LocalLimits,
    /// How long start-up waits, retrying, for an endpoint without a
    /// configured `dimension` to answer its dimension probe (0..=600,000
    /// ms; default 60,000). With `dimension` set nothing waits: the
    /// endpoint is probed in the background.
    #[serde(default = "default_startup_wait_ms")]
    pub startup_wait_ms: u64,
}

/// The default of [`EmbedderConfig::startup_wait_ms`].
pub const DEFAULT_STARTUP_WAIT_MS: u64 = 60_000;
/// The largest [`EmbedderConfig::startup_wait_ms`].
pub const MAX_STARTUP_WAIT_MS: u64 = 600_000;

fn default_startup_wait_ms() -> u64 {
    DEFAULT_STARTUP_WAIT_MS
}

impl EmbedderConfig {
    /// Checks the limits and that exactly one source is named.
    pub fn validate(&self) -> Result<()> {
        self.limits.validate()?;
        self.local.validate()?;
        let bad = |m: &str| Error::config("embedder", Problem::Malformed(m.into()));
        if self.startup_wait_ms > MAX_STARTUP_WAIT_MS {
            return Err(Error::config(
                "embedder.startup_wait_ms",
                Problem::OutOfRange {
                    value: i128::from(self.startup_wait_ms),
                    min: 0,
                    max: i128::from(MAX_STARTUP_WAIT_MS),
                },
            ));
        }
        if let Some(d) = self.dimension
            && (d == 0 || d as u64 > self.limits.max_dimension)
        {
            return Err(Error::config(
                "embedder.dimension",
                Problem::OutOfRange {
                    value: d as i128,
                    min: 1,
                    max: i128::from(self.limits.max_dimension),
                },
            ));
        }
        match (&self.base_url, &self.model, &self.model_dir) {
            (Some(_), Some(_), None) | (None, None, Some(_)) => Ok(()),
            (Some(_), None, None) => Err(bad("base_url needs model")),
            _ => Err(bad("give either base_url and model, or model_dir")),
        }
    }
}

/// Connects the embedder `e` names (see [`connect`]).
pub async fn connect_embedder(e: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    Ok(connect(e).await?.embedder)
}

/// A connected embedder, and its readiness probe when it has one.
#[derive(Debug)]
pub struct Connected {
    /// What to embed with.
    pub embedder: Arc<dyn Embedder>,
    /// The background probe of an endpoint with a configured dimension
    /// (what `/readyz` asks).
    pub probe: Option<Arc<Probed>>,
}

/// Connects the embedder `e` names. An endpoint with a configured
/// `dimension` is not waited for: it is probed in the background
/// ([`Probed`]), so a slow or absent one does not stop a server from
/// starting. Without one, its dimension probe is retried with doubling
/// delays for up to `startup_wait_ms`, then the error says to set
/// `dimension`.
pub async fn connect(e: &EmbedderConfig) -> Result<Connected> {
    e.validate()?;
    if let Some(dir) = &e.model_dir {
        return Ok(Connected {
            embedder: local_embedder(dir, e)?,
            probe: None,
        });
    }
    let (Some(base_url), Some(model)) = (&e.base_url, &e.model) else {
        return Err(Error::config(
            "embedder",
            Problem::Malformed("base_url and model are needed".into()),
        ));
    };
    let http = hippocamp_embed::http::HttpEmbedderConfig {
        base_url: base_url.clone(),
        model: model.clone(),
        dimension: e.dimension,
        api_key: e.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
        limits: e.limits.clone(),
    };
    if e.dimension.is_some() {
        // No probe in `connect`: nothing to wait for.
        let inner = hippocamp_embed::http::OpenAiEmbedder::connect(http).await?;
        let probe = Probed::start(Arc::new(inner));
        return Ok(Connected {
            embedder: Arc::clone(&probe) as Arc<dyn Embedder>,
            probe: Some(probe),
        });
    }
    let waited = std::time::Instant::now();
    let wait = Duration::from_millis(e.startup_wait_ms);
    let mut backoff = Duration::from_millis(250);
    loop {
        match hippocamp_embed::http::OpenAiEmbedder::connect(http.clone()).await {
            Ok(embedder) => {
                return Ok(Connected {
                    embedder: Arc::new(embedder),
                    probe: None,
                });
            }
            Err(err @ (Error::Timeout(_) | Error::Unavailable(_))) => {
                if waited.elapsed() + backoff > wait {
                    return Err(Error::Unavailable(format!(
                        "the embedder at {base_url} did not answer its dimension probe within embedder.startup_wait_ms ({} ms): {err}; set embedder.dimension to start without waiting for it",
                        e.startup_wait_ms
                    )));
                }
                tracing::warn!(error = %err, "the embedder did not answer its dimension probe; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(other) => return Err(other),
        }
    }
}

#[cfg(feature = "local")]
fn local_embedder(dir: &std::path::Path, e: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    Ok(Arc::new(hippocamp_embed::local::LocalEmbedder::load(
        dir,
        e.limits.clone(),
        e.local.clone(),
    )?))
}

#[cfg(not(feature = "local"))]
fn local_embedder(_dir: &std::path::Path, _e: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    Err(Error::config(
        "embedder.model_dir",
        Problem::Malformed("local models need a build with `--features local-embed`".into()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(dimension: Option<usize>) -> EmbedderConfig {
        EmbedderConfig {
            base_url: Some("http://127.0.0.1:1".into()),
            model: Some("m".into()),
            model_dir: None,
            dimension,
            api_key_env: None,
            limits: hippocamp_embed::EmbedLimits::default(),
            local: hippocamp_embed::LocalLimits::default(),
            startup_wait_ms: DEFAULT_STARTUP_WAIT_MS,
        }
    }

    #[test]
    fn a_dimension_outside_the_limit_is_refused() {
        assert!(endpoint(None).validate().is_ok());
        assert!(endpoint(Some(384)).validate().is_ok());
        for d in [0, 8_193] {
            let e = endpoint(Some(d)).validate().unwrap_err();
            assert_eq!(e.code(), "invalid_config", "{d}: {e}");
        }
    }
}
