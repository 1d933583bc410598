//! The embedder a configuration names: an OpenAI-compatible endpoint or a
//! local sentence-transformer (in a build with the `local` feature).

use std::path::PathBuf;
use std::sync::Arc;

use hippocamp_core::{Error, Problem, Result};
use hippocamp_embed::Embedder;
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
}

impl EmbedderConfig {
    /// Checks the limits and that exactly one source is named.
    pub fn validate(&self) -> Result<()> {
        self.limits.validate()?;
        self.local.validate()?;
        let bad = |m: &str| Error::config("embedder", Problem::Malformed(m.into()));
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

/// Connects the embedder `e` names.
pub async fn connect_embedder(e: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    e.validate()?;
    if let Some(dir) = &e.model_dir {
        return local_embedder(dir, e);
    }
    let (Some(base_url), Some(model)) = (&e.base_url, &e.model) else {
        return Err(Error::config(
            "embedder",
            Problem::Malformed("base_url and model are needed".into()),
        ));
    };
    Ok(Arc::new(
        hippocamp_embed::http::OpenAiEmbedder::connect(hippocamp_embed::http::HttpEmbedderConfig {
            base_url: base_url.clone(),
            model: model.clone(),
            dimension: e.dimension,
            api_key: e.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
            limits: e.limits.clone(),
        })
        .await?,
    ))
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
