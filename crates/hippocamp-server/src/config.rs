//! The server's configuration: one TOML file in which every key is known.
//!
//! Every section is the configuration type of the piece it configures
//! (`MemoryConfig`, `RouterConfig`, `ArtifactLimits`, `FsOptions`), so a
//! key means the same thing here as in the library. An unknown key is an
//! error naming the key and the nearest valid one.

use std::net::SocketAddr;
use std::path::PathBuf;

use hippocamp_artifacts::ArtifactLimits;
use hippocamp_artifacts_fs::FsOptions;
use hippocamp_core::error::check_range;
use hippocamp_core::{Error, Problem};
use hippocamp_memory::MemoryConfig;
use hippocamp_router::RouterConfig;
use serde::{Deserialize, Serialize};

/// Which services the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// In-memory stores, one shared store for all scopes; nothing survives
    /// a restart.
    Ephemeral,
    /// The embedded durable memory store and the filesystem artifact store,
    /// each behind an exact-scope router (the default).
    #[default]
    Durable,
    /// PostgreSQL and an S3-compatible store: not in this build yet.
    Distributed,
}

impl Profile {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Ephemeral => "ephemeral",
            Profile::Durable => "durable",
            Profile::Distributed => "distributed",
        }
    }
}

/// HTTP bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Longest a JSON request may take, milliseconds (1 ..= 300,000).
    pub request_timeout_ms: u64,
    /// Longest an artifact upload or download may take, milliseconds
    /// (1 ..= 3,600,000).
    pub transfer_timeout_ms: u64,
    /// Largest JSON request body, bytes (1 KiB ..= 64 MiB).
    pub max_json_body_bytes: u64,
    /// Requests served at once; more wait in no queue: they get 503
    /// (1 ..= 100,000).
    pub max_concurrent_requests: u64,
    /// How long shutdown waits for requests in flight, milliseconds
    /// (0 ..= 600,000).
    pub shutdown_grace_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            request_timeout_ms: 30_000,
            transfer_timeout_ms: 300_000,
            max_json_body_bytes: 8 << 20,
            max_concurrent_requests: 512,
            shutdown_grace_ms: 30_000,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// `ephemeral`, `durable` (default) or `distributed`.
    pub profile: Profile,
    /// The data directory (durable stores and the token file).
    pub data_dir: PathBuf,
    /// The listening address (default 127.0.0.1:8765).
    pub bind: SocketAddr,
    /// HTTP bounds.
    pub http: HttpConfig,
    /// Memory limits and ranking.
    pub memory: MemoryConfig,
    /// The router in front of the memory store.
    pub memory_router: RouterConfig,
    /// Artifact limits and quotas.
    pub artifacts: ArtifactLimits,
    /// The router in front of the artifact store.
    pub artifacts_router: RouterConfig,
    /// The filesystem artifact store's tuning.
    pub artifacts_fs: FsOptions,
    /// An embedding endpoint: with one, memory offers vector and hybrid
    /// search (hybrid by default); a durable store records the model and
    /// refuses another one later.
    pub embedder: Option<EmbedderConfig>,
}

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
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            profile: Profile::Durable,
            data_dir: PathBuf::from("./hippocamp-data"),
            bind: SocketAddr::from(([127, 0, 0, 1], 8765)),
            http: HttpConfig::default(),
            memory: MemoryConfig::default(),
            memory_router: RouterConfig::default(),
            artifacts: ArtifactLimits::default(),
            artifacts_router: RouterConfig::default(),
            artifacts_fs: FsOptions::default(),
            embedder: None,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, or a value of the wrong type.
    #[error("{0}")]
    Syntax(String),
    /// A key this version does not know.
    #[error("unknown key `{key}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        /// The key as written, with its section.
        key: String,
        /// The nearest valid key in the same section.
        suggestion: Option<String>,
    },
    /// A value outside its range, or a profile this build lacks.
    #[error(transparent)]
    Invalid(#[from] Error),
}

impl ServerConfig {
    /// Parses and validates a TOML document.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: ServerConfig = toml::from_str(text).map_err(|e| unknown_key(text, &e))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every range and the profile.
    pub fn validate(&self) -> Result<(), Error> {
        self.memory.validate()?;
        self.memory_router.validate()?;
        self.artifacts.validate()?;
        self.artifacts_router.validate()?;
        self.artifacts_fs.validate()?;
        let h = &self.http;
        check_range("http.request_timeout_ms", h.request_timeout_ms, 1, 300_000)?;
        check_range(
            "http.transfer_timeout_ms",
            h.transfer_timeout_ms,
            1,
            3_600_000,
        )?;
        check_range(
            "http.max_json_body_bytes",
            h.max_json_body_bytes,
            1 << 10,
            64 << 20,
        )?;
        check_range(
            "http.max_concurrent_requests",
            h.max_concurrent_requests,
            1,
            100_000,
        )?;
        check_range("http.shutdown_grace_ms", h.shutdown_grace_ms, 0, 600_000)?;
        if let Some(e) = &self.embedder {
            e.limits.validate()?;
            let bad = |m: &str| Error::config("embedder", Problem::Malformed(m.into()));
            match (&e.base_url, &e.model, &e.model_dir) {
                (Some(_), Some(_), None) | (None, None, Some(_)) => {}
                (Some(_), None, None) => return Err(bad("base_url needs model")),
                _ => return Err(bad("give either base_url and model, or model_dir")),
            }
        }
        if self.profile == Profile::Distributed {
            return Err(Error::config(
                "profile",
                Problem::Malformed(
                    "the distributed profile (PostgreSQL and S3) is not available in this build"
                        .into(),
                ),
            ));
        }
        Ok(())
    }
}

/// Turns serde's "unknown field `x`, expected one of `a`, `b`" into an
/// error naming the section and the nearest valid key.
fn unknown_key(text: &str, e: &toml::de::Error) -> ConfigError {
    let msg = e.message();
    let Some(rest) = msg.strip_prefix("unknown field `") else {
        return ConfigError::Syntax(e.to_string());
    };
    let Some((key, expected)) = rest.split_once('`') else {
        return ConfigError::Syntax(e.to_string());
    };
    let valid: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.is_empty())
        .collect();
    let suggestion = hippocamp_core::error::suggest(key, valid);
    let section = e.span().and_then(|span| section_of(text, span.start));
    let key = match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_owned(),
    };
    ConfigError::UnknownKey { key, suggestion }
}

/// The `[section]` header in force at byte `at`.
fn section_of(text: &str, at: usize) -> Option<String> {
    text.get(..at)?.lines().rev().find_map(|l| {
        let l = l.trim();
        (l.starts_with('[') && l.ends_with(']'))
            .then(|| l.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_are_valid_and_empty_text_gives_them() {
        assert_eq!(
            ServerConfig::from_toml("").unwrap(),
            ServerConfig::default()
        );
    }

    #[test]
    fn sections_configure_their_piece() {
        let c = ServerConfig::from_toml(
            "profile = \"ephemeral\"\n[http]\nrequest_timeout_ms = 1000\n\
             [memory_router]\nmax_active_scopes = 8\n[artifacts]\nmax_artifact_bytes = 1048576\n",
        )
        .unwrap();
        assert_eq!(c.profile, Profile::Ephemeral);
        assert_eq!(c.http.request_timeout_ms, 1000);
        assert_eq!(c.memory_router.max_active_scopes, 8);
        assert_eq!(c.artifacts.max_artifact_bytes, 1 << 20);
    }

    #[test]
    fn an_unknown_key_names_the_nearest_valid_one() {
        let e = ServerConfig::from_toml("bidn = \"127.0.0.1:1\"").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `bidn` (did you mean `bind`?)");
        let e = ServerConfig::from_toml("[http]\nrequest_timout_ms = 5\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown key `http.request_timout_ms` (did you mean `request_timeout_ms`?)"
        );
        let e = ServerConfig::from_toml("[http]\nzzzzzzzzzzzzzzzzzzzz = 5\n").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `http.zzzzzzzzzzzzzzzzzzzz`");
    }

    #[test]
    fn out_of_range_values_and_missing_profiles_are_refused() {
        let e = ServerConfig::from_toml("[http]\nrequest_timeout_ms = 0\n").unwrap_err();
        assert!(e.to_string().contains("http.request_timeout_ms"), "{e}");
        let e = ServerConfig::from_toml("profile = \"distributed\"").unwrap_err();
        assert!(e.to_string().contains("not available"), "{e}");
        let e = ServerConfig::from_toml(
            "[embedder]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\nkey = 1\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("embedder.key"), "{e}");
        let e = ServerConfig::from_toml(
            "[embedder]\nbase_url = \"http://127.0.0.1:1\"\nmodel_dir = \"/m\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("either"), "{e}");
        let c = ServerConfig::from_toml(
            "profile = \"ephemeral\"\n[embedder]\nmodel_dir = \"/models/minilm\"\n[embedder.limits]\nmax_inputs = 64\n",
        )
        .unwrap();
        assert_eq!(c.embedder.unwrap().limits.max_inputs, 64);
        let e = ServerConfig::from_toml("profile = \"fast\"").unwrap_err();
        assert!(matches!(e, ConfigError::Syntax(_)), "{e}");
    }
}
