//! The one place that builds the services of a profile.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hippocamp_artifacts::{ArtifactStore, InMemoryArtifacts, RoutedArtifacts};
use hippocamp_artifacts_fs::FsArtifacts;
use hippocamp_core::{Error, Result};
use hippocamp_memory::{InMemoryStore, MemoryStore, RoutedMemory};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_router::{RouterConfig, Strategy};

use crate::auth::TokenStore;
use crate::config::{Profile, ServerConfig};

/// What a running server serves.
#[derive(Debug, Clone)]
pub struct Services {
    /// The profile they were built for.
    pub profile: Profile,
    /// Memory (behind a router).
    pub memory: Arc<dyn MemoryStore>,
    /// Artifacts (behind a router).
    pub artifacts: Arc<dyn ArtifactStore>,
    /// Tokens.
    pub tokens: Arc<TokenStore>,
}

/// The memory folder of a data directory.
pub fn memory_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("memory")
}

/// The artifacts folder of a data directory, created, as the absolute
/// real path the filesystem store requires.
pub fn artifacts_dir(data_dir: &Path) -> Result<PathBuf> {
    let dir = data_dir.join("artifacts");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::canonicalize(&dir))
        .map_err(|e| Error::Unavailable(format!("cannot use {}: {e}", dir.display())))
}

impl Services {
    /// Opens (or creates) the services of `config.profile`, memory
    /// embedding with `embedder` when given. Blocking: call from a
    /// blocking context.
    pub fn build(
        config: &ServerConfig,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<Self> {
        config.validate()?;
        match config.profile {
            Profile::Ephemeral => {
                // One store for every scope: a volatile store gains nothing
                // from per-scope workers and must never be reclaimed.
                let shared = RouterConfig {
                    strategy: Strategy::Shared,
                    ..config.memory_router.clone()
                };
                let mut memory = InMemoryStore::new(config.memory.clone())?;
                if let Some(e) = embedder {
                    memory = memory.with_embedder(e);
                }
                let memory = RoutedMemory::new(Arc::new(memory), shared.clone())?;
                let artifacts = InMemoryArtifacts::new(config.artifacts.clone())?;
                let artifacts = RoutedArtifacts::new(
                    Arc::new(artifacts),
                    RouterConfig {
                        strategy: Strategy::Shared,
                        ..config.artifacts_router.clone()
                    },
                )?;
                Ok(Self {
                    profile: Profile::Ephemeral,
                    memory: Arc::new(memory),
                    artifacts: Arc::new(artifacts),
                    tokens: Arc::new(TokenStore::in_memory()),
                })
            }
            Profile::Durable => {
                std::fs::create_dir_all(&config.data_dir).map_err(|e| {
                    Error::Unavailable(format!("cannot create {}: {e}", config.data_dir.display()))
                })?;
                let mut memory =
                    RedbMemoryStore::open(memory_dir(&config.data_dir), config.memory.clone())?;
                if let Some(e) = embedder {
                    memory = memory.with_embedder(e)?;
                }
                let memory = RoutedMemory::new(Arc::new(memory), config.memory_router.clone())?;
                let artifacts = FsArtifacts::open(
                    artifacts_dir(&config.data_dir)?,
                    config.artifacts.clone(),
                    config.artifacts_fs.clone(),
                )?;
                let artifacts =
                    RoutedArtifacts::new(Arc::new(artifacts), config.artifacts_router.clone())?;
                Ok(Self {
                    profile: Profile::Durable,
                    memory: Arc::new(memory),
                    artifacts: Arc::new(artifacts),
                    tokens: Arc::new(TokenStore::open(&config.data_dir)?),
                })
            }
            Profile::Distributed => Err(Error::Unavailable(
                "the distributed profile is not available in this build".into(),
            )),
        }
    }
}
