//! The reranking stage a configuration names (`[reranker]`; off without
//! one): a `/rerank` endpoint, an embedder used as a bi-encoder (an
//! endpoint or a local model), or the store's own embedder.

use std::sync::Arc;

use hippocamp_core::{Error, Problem, Result};
use hippocamp_embed::Embedder;
use hippocamp_embed::http_rerank::{HttpReranker, HttpRerankerConfig, RerankShape};
use hippocamp_embed::rerank::{EmbeddingReranker, RerankLimits, Reranker};
use hippocamp_memory::RerankStage;
use serde::{Deserialize, Serialize};

use crate::embedder::EmbedderConfig;

/// `[reranker]`: exactly one of `endpoint`, `embedder` or
/// `use_embedder = true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankerConfig {
    /// A `/rerank` endpoint.
    #[serde(default)]
    pub endpoint: Option<RerankEndpoint>,
    /// An embedder used as a bi-encoder (an OpenAI-compatible endpoint or
    /// a local model directory), apart from the store's.
    #[serde(default)]
    pub embedder: Option<EmbedderConfig>,
    /// The store's own `[embedder]` as a bi-encoder (worth it in lexical
    /// search; in hybrid search its vectors already voted).
    #[serde(default)]
    pub use_embedder: bool,
    /// The reranker's share of the blended order, 0..=1 (default 0.5;
    /// 1: its order alone).
    #[serde(default = "default_weight")]
    pub weight: f32,
    /// Candidates, deadline and bytes per document.
    #[serde(default)]
    pub limits: RerankLimits,
}

/// The default of [`RerankerConfig::weight`].
pub const DEFAULT_WEIGHT: f32 = 0.5;

fn default_weight() -> f32 {
    DEFAULT_WEIGHT
}

/// `[reranker.endpoint]`: requests go to `{base_url}/rerank`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerankEndpoint {
    /// Base URL (`http://127.0.0.1:8080` for llama.cpp or
    /// text-embeddings-inference, `https://api.jina.ai/v1` for Jina).
    pub base_url: String,
    /// The model to ask for.
    pub model: String,
    /// `documents` (llama.cpp, Jina, Cohere, vLLM; default) or `texts`
    /// (text-embeddings-inference).
    #[serde(default)]
    pub shape: RerankShape,
    /// The environment variable holding the API key (keys never go in the
    /// file).
    #[serde(default)]
    pub api_key_env: Option<String>,
}

impl RerankerConfig {
    /// Checks the limits, the weight, and that exactly one source is
    /// named.
    pub fn validate(&self, has_embedder: bool) -> Result<()> {
        self.limits.validate()?;
        if !(0.0..=1.0).contains(&self.weight) {
            return Err(Error::config(
                "reranker.weight",
                Problem::Malformed("weight must be within 0..=1".into()),
            ));
        }
        if let Some(e) = &self.embedder {
            e.validate()?;
        }
        let named = [
            self.endpoint.is_some(),
            self.embedder.is_some(),
            self.use_embedder,
        ];
        if named.iter().filter(|n| **n).count() != 1 {
            return Err(Error::config(
                "reranker",
                Problem::Malformed(
                    "name exactly one of [reranker.endpoint], [reranker.embedder] or use_embedder = true"
                        .into(),
                ),
            ));
        }
        if self.use_embedder && !has_embedder {
            return Err(Error::config(
                "reranker.use_embedder",
                Problem::Malformed("there is no [embedder] to use".into()),
            ));
        }
        Ok(())
    }
}

/// The stage `config` names; `store_embedder` is the store's embedder.
pub async fn connect(
    config: &RerankerConfig,
    store_embedder: Option<&Arc<dyn Embedder>>,
) -> Result<RerankStage> {
    config.validate(store_embedder.is_some())?;
    let reranker: Arc<dyn Reranker> = match (&config.endpoint, &config.embedder, store_embedder) {
        (Some(e), _, _) => Arc::new(HttpReranker::new(HttpRerankerConfig {
            base_url: e.base_url.clone(),
            model: e.model.clone(),
            shape: e.shape,
            api_key: e.api_key_env.as_ref().and_then(|v| std::env::var(v).ok()),
            max_documents: hippocamp_core::limits::to_usize(config.limits.candidates),
        })?),
        (None, Some(e), _) => Arc::new(EmbeddingReranker::new(
            crate::embedder::connect(e).await?.embedder,
        )),
        (None, None, Some(store)) => Arc::new(EmbeddingReranker::new(Arc::clone(store))),
        (None, None, None) => {
            return Err(Error::config(
                "reranker",
                Problem::Malformed("no source".into()),
            ));
        }
    };
    Ok(RerankStage {
        reranker,
        limits: config.limits.clone(),
        weight: config.weight,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(text: &str) -> std::result::Result<RerankerConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn one_source_a_weight_within_range_and_no_unknown_keys() {
        let c = parse(
            "[endpoint]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\nshape = \"texts\"\n",
        )
        .unwrap();
        assert!(c.validate(false).is_ok());
        assert!((c.weight - DEFAULT_WEIGHT).abs() < f32::EPSILON);
        assert_eq!(c.limits.candidates, 20);
        assert!(parse("use_embedder = true\nbogus = 1\n").is_err());
        assert!(parse("use_embedder = true\n[limits]\ncandidate = 3\n").is_err());
        assert!(
            parse("[endpoint]\nbase_url = \"x\"\nmodel = \"m\"\nshape = \"cohere\"\n").is_err()
        );
        let c = parse("use_embedder = true\n").unwrap();
        assert!(c.validate(true).is_ok());
        assert!(c.validate(false).is_err(), "no embedder to use");
        assert!(parse("").unwrap().validate(true).is_err(), "no source");
        let both =
            parse("use_embedder = true\n[endpoint]\nbase_url = \"x\"\nmodel = \"m\"\n").unwrap();
        assert!(both.validate(true).is_err());
        let heavy = parse("use_embedder = true\nweight = 1.5\n").unwrap();
        assert!(heavy.validate(true).is_err());
        let deep = parse("use_embedder = true\n[limits]\ncandidates = 101\n").unwrap();
        assert!(deep.validate(true).is_err());
    }
}
