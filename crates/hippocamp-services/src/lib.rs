//! The configuration of hippocamp and the one place that turns it into
//! services: the memory store, the artifact store and the tokens of a
//! profile, each behind its router and its reply-verifying wrapper.
//!
//! The server, the command line and the evaluation harness all open
//! their stores here, so a data directory is always opened
//! with the limits its configuration file states, and no caller can get a
//! store that skips a wrapper.
//!
//! - [`config`]: the TOML configuration (unknown keys refused, every value
//!   range-checked at load).
//! - [`layout`]: where each store lives in a data directory.
//! - [`auth`]: tokens, grants and permissions.
//! - [`embedder`]: the embedder a configuration names.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod auth;
pub mod config;
pub mod embedder;
pub mod layout;

use std::sync::Arc;

use hippocamp_artifacts::{ArtifactStore, InMemoryArtifacts, RoutedArtifacts};
use hippocamp_artifacts_fs::FsArtifacts;
use hippocamp_core::{Error, Result};
use hippocamp_memory::{InMemoryStore, MemoryStore, RoutedMemory};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_router::{RouterConfig, Strategy};

pub use config::{Config, ConfigError, HttpConfig, Profile};
pub use embedder::{EmbedderConfig, connect_embedder};

use crate::auth::TokenStore;

/// What a running server serves. Each store is behind its router and,
/// outermost, its reply check ([`hippocamp_memory::ScopeChecked`],
/// [`hippocamp_artifacts::ScopeChecked`]): no holder of these handles can
/// see a record of a scope it did not ask for.
#[derive(Debug, Clone)]
pub struct Services {
    /// The profile they were built for.
    pub profile: Profile,
    /// Memory (reply check, router, store).
    pub memory: Arc<dyn MemoryStore>,
    /// Artifacts (reply check, router, store).
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Tokens.
    pub tokens: Arc<TokenStore>,
}

/// The router configuration a profile uses: a volatile store has nothing
/// to release, so it runs with one shared worker.
fn router(profile: Profile, configured: &RouterConfig) -> RouterConfig {
    match profile {
        Profile::Ephemeral => RouterConfig {
            strategy: Strategy::Shared,
            ..configured.clone()
        },
        _ => configured.clone(),
    }
}

fn unavailable_profile() -> Error {
    Error::Unavailable("the distributed profile is not available in this build".into())
}

/// Connects `config`'s embedder, then runs `open` with it on a blocking
/// thread (stores open files and replay logs).
async fn with_embedder<T: Send + 'static>(
    config: &Config,
    open: impl FnOnce(&Config, Option<Arc<dyn hippocamp_embed::Embedder>>) -> Result<T> + Send + 'static,
) -> Result<T> {
    config.validate()?;
    let embedder = match &config.embedder {
        None => None,
        Some(e) => Some(connect_embedder(e).await?),
    };
    let c = config.clone();
    tokio::task::spawn_blocking(move || open(&c, embedder))
        .await
        .map_err(|e| Error::Unavailable(e.to_string()))?
}

impl Services {
    /// Connects the configured embedder, then opens every service of
    /// `config.profile` (blocking work runs off the async threads).
    pub async fn open(config: &Config) -> Result<Self> {
        with_embedder(config, Self::build).await
    }

    /// Opens (or creates) the services of `config.profile`, memory
    /// embedding with `embedder` when given. Blocking: call from a
    /// blocking context.
    pub fn build(
        config: &Config,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<Self> {
        config.validate()?;
        let tokens = match config.profile {
            Profile::Ephemeral => TokenStore::in_memory(),
            Profile::Durable => {
                layout::data_dir(&config.data_dir)?;
                TokenStore::open(&config.data_dir)?
            }
            Profile::Distributed => return Err(unavailable_profile()),
        };
        Ok(Self {
            profile: config.profile,
            memory: Self::memory_with(config, embedder)?,
            artifacts: Self::artifacts(config)?,
            tokens: Arc::new(tokens),
        })
    }

    /// The memory store of `config` alone, with the configured embedder
    /// connected (the `memory` commands use it).
    pub async fn memory(config: &Config) -> Result<Arc<dyn MemoryStore>> {
        with_embedder(config, Self::memory_with).await
    }

    /// The memory store of `config` embedding with `embedder`: in memory
    /// (ephemeral) or in the data directory (durable), behind its router
    /// and reply check. Blocking.
    pub fn memory_with(
        config: &Config,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<Arc<dyn MemoryStore>> {
        config.validate()?;
        let inner: Arc<dyn MemoryStore> = match config.profile {
            Profile::Ephemeral => {
                let mut m = InMemoryStore::new(config.memory.clone())?;
                if let Some(e) = embedder {
                    m = m.with_embedder(e);
                }
                Arc::new(m)
            }
            Profile::Durable => {
                let dir = layout::memory_dir(&config.data_dir)?;
                let mut m = RedbMemoryStore::open(dir, config.memory.clone())?;
                if let Some(e) = embedder {
                    m = m.with_embedder(e)?;
                }
                Arc::new(m)
            }
            Profile::Distributed => return Err(unavailable_profile()),
        };
        let routed = RoutedMemory::new(inner, router(config.profile, &config.memory_router))?;
        Ok(Arc::new(hippocamp_memory::ScopeChecked::new(routed)))
    }

    /// The artifact store of `config`: in memory (ephemeral) or in the
    /// data directory (durable), behind its router and reply check.
    /// Blocking.
    pub fn artifacts(config: &Config) -> Result<Arc<dyn ArtifactStore>> {
        config.validate()?;
        let inner: Arc<dyn ArtifactStore> = match config.profile {
            Profile::Ephemeral => Arc::new(InMemoryArtifacts::new(config.artifacts.clone())?),
            Profile::Durable => Arc::new(Self::filesystem_artifacts(config)?),
            Profile::Distributed => return Err(unavailable_profile()),
        };
        let routed = RoutedArtifacts::new(inner, router(config.profile, &config.artifacts_router))?;
        Ok(Arc::new(hippocamp_artifacts::ScopeChecked::new(routed)))
    }

    /// The filesystem artifact store of a durable `config`'s data
    /// directory, unwrapped: for maintenance (`repair`) only; every other
    /// use goes through [`artifacts`](Self::artifacts). Blocking.
    pub fn filesystem_artifacts(config: &Config) -> Result<FsArtifacts> {
        config.validate()?;
        FsArtifacts::open(
            layout::artifacts_dir(&config.data_dir)?,
            config.artifacts.clone(),
            config.artifacts_fs.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The services hand out wrapped stores only: the capabilities show
    /// the router (so the reply check, outermost, is in front of it).
    #[tokio::test]
    async fn every_profile_hands_out_routed_checked_stores() {
        let t = tempfile::tempdir().unwrap();
        for profile in [Profile::Ephemeral, Profile::Durable] {
            let config = Config {
                profile,
                data_dir: t.path().join(profile.as_str()),
                ..Config::default()
            };
            let s = Services::open(&config).await.unwrap();
            let debug = format!("{:?}", s.memory);
            assert!(debug.starts_with("ScopeChecked"), "{debug}");
            assert!(format!("{:?}", s.artifacts).starts_with("ScopeChecked"));
            let routing = s.memory.capabilities().routing.unwrap();
            let expected = match profile {
                Profile::Ephemeral => "shared",
                _ => "exact_scope",
            };
            assert_eq!(routing.strategy, expected);
        }
    }

    /// Everything the durable profile creates in a data directory is
    /// readable by its owner only.
    #[tokio::test]
    async fn a_durable_data_directory_is_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        let t = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: t.path().join("data"),
            ..Config::default()
        };
        let s = Services::open(&config).await.unwrap();
        s.tokens.ensure_admin().unwrap();
        let scope = hippocamp_core::MemoryScope::parse("a", "u").unwrap();
        s.memory
            .add_entry(
                &scope,
                hippocamp_memory::NewEntry::new("a fact"),
                &hippocamp_memory::WriteOptions::default(),
            )
            .await
            .unwrap();
        let a = hippocamp_artifacts::ArtifactScope::user("a", "u").unwrap();
        let name = hippocamp_artifacts::ArtifactName::new("f.txt").unwrap();
        s.artifacts
            .put(
                &a,
                &name,
                hippocamp_artifacts::Body::from("bytes"),
                &hippocamp_artifacts::PutOptions::default(),
            )
            .await
            .unwrap();
        drop(s);
        let mut seen = 0;
        let mut stack = vec![config.data_dir.clone()];
        while let Some(p) = stack.pop() {
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                assert_eq!(mode, 0o700, "{}", p.display());
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            } else {
                assert_eq!(mode, 0o600, "{}", p.display());
                seen += 1;
            }
        }
        // Database, log and lock of each store, a content file, tokens.
        assert!(seen >= 8, "{seen}");
    }
}
