//! The configuration of hippocamp and the one place that turns it into
//! services: the memory store, the ingestion outbox, the artifact store
//! and the tokens of a profile, each store behind its router and its
//! reply-verifying wrapper.
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
//!
//! | profile | memory | outbox | artifacts | sessions |
//! |---|---|---|---|---|
//! | `disabled` | off (`MemoryDisabled`) | off | filesystem, data directory | redb, data directory |
//! | `ephemeral` | in memory, shared router | off (`OutboxUnavailable`) | in memory | in memory |
//! | `durable` | redb, exact-scope router | redb, processor delivering into memory | filesystem, data directory | redb, data directory |

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
use hippocamp_memory::{InMemoryStore, MemoryStore, RoutedMemory, ScopeChecked};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_outbox::{Erasing, Outbox, Processor, Target, TargetName};
use hippocamp_outbox_redb::RedbJobStore;
use hippocamp_router::{RouterConfig, Strategy};
use hippocamp_sessions::{InMemorySessions, SessionStore};
use hippocamp_sessions_redb::RedbSessions;
use parking_lot::Mutex;
use serde::Serialize;

pub use config::{Config, ConfigError, HttpConfig, Profile};
pub use embedder::{EmbedderConfig, connect_embedder};

use crate::auth::TokenStore;

/// The name under which the durable profile registers its memory store
/// with the outbox.
pub const MEMORY_TARGET: &str = "memory";

/// What a running server serves. Each store is behind its router and,
/// outermost, its reply check ([`hippocamp_memory::ScopeChecked`],
/// [`hippocamp_artifacts::ScopeChecked`]): no holder of these handles can
/// see a record of a scope it did not ask for.
#[derive(Debug, Clone)]
pub struct Services {
    /// The profile they were built for.
    pub profile: Profile,
    /// Memory (reply check, erasure notices to the outbox, router,
    /// store); `None` in the disabled profile.
    pub memory: Option<Arc<dyn MemoryStore>>,
    /// The ingestion outbox (durable profile only).
    pub outbox: Option<Outbox>,
    /// Artifacts (reply check, router, store).
    pub artifacts: Arc<dyn ArtifactStore>,
    /// The agent runner's conversation sessions.
    pub sessions: Arc<dyn SessionStore>,
    /// Tokens.
    pub tokens: Arc<TokenStore>,
    processor: Arc<Mutex<Option<Processor>>>,
    processor_options: hippocamp_outbox::ProcessorOptions,
}

/// The memory side of a profile: the store callers use and its outbox.
#[derive(Debug, Clone)]
pub struct MemoryServices {
    /// The store (reply check, erasure notices, router, store).
    pub memory: Arc<dyn MemoryStore>,
    /// The outbox in front of it (durable profile).
    pub outbox: Option<Outbox>,
    profile: Profile,
}

impl MemoryServices {
    /// The outbox, or `OutboxUnavailable` (as [`Services::outbox`]).
    pub fn outbox(&self) -> Result<&Outbox> {
        self.outbox.as_ref().ok_or_else(|| no_outbox(self.profile))
    }
}

fn no_outbox(profile: Profile) -> Error {
    Error::OutboxUnavailable(format!(
        "the {} profile runs no outbox; use the synchronous `events` route",
        profile.as_str()
    ))
}

/// Content-free state of every service.
#[derive(Debug, Clone, Serialize)]
pub struct ServicesStatus {
    /// The profile.
    pub profile: &'static str,
    /// Memory counters (`None`: disabled).
    pub memory: Option<hippocamp_memory::StoreStatus>,
    /// Outbox counters (`None`: no outbox).
    pub outbox: Option<hippocamp_outbox::OutboxStats>,
    /// Whether the outbox's processor is delivering.
    pub processor_running: bool,
    /// Artifact counters.
    pub artifacts: hippocamp_artifacts::ArtifactStatus,
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
        // The disabled profile has no memory to embed for.
        Some(_) if config.profile == Profile::Disabled => None,
        Some(e) => Some(connect_embedder(e).await?),
    };
    let c = config.clone();
    tokio::task::spawn_blocking(move || open(&c, embedder))
        .await
        .map_err(|e| Error::Unavailable(e.to_string()))?
}

impl Services {
    /// Connects the configured embedder, then opens every service of
    /// `config.profile` (blocking work runs off the async threads). The
    /// outbox's processor is not started: see
    /// [`start_processor`](Self::start_processor).
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
            Profile::Durable | Profile::Disabled => {
                layout::data_dir(&config.data_dir)?;
                TokenStore::open(&config.data_dir)?
            }
            Profile::Distributed => return Err(unavailable_profile()),
        };
        let (memory, outbox) = if config.profile == Profile::Disabled {
            (None, None)
        } else {
            let m = Self::memory_with(config, embedder)?;
            (Some(m.memory), m.outbox)
        };
        Ok(Self {
            profile: config.profile,
            memory,
            outbox,
            artifacts: Self::artifacts(config)?,
            sessions: Self::sessions(config)?,
            tokens: Arc::new(tokens),
            processor: Arc::new(Mutex::new(None)),
            processor_options: config.outbox_processor.clone(),
        })
    }

    /// The session store of `config`: in memory (ephemeral) or in the
    /// data directory. Blocking.
    pub fn sessions(config: &Config) -> Result<Arc<dyn SessionStore>> {
        config.validate()?;
        Ok(match config.profile {
            Profile::Ephemeral => Arc::new(InMemorySessions::new(config.sessions.clone())?),
            Profile::Durable | Profile::Disabled => Arc::new(RedbSessions::open(
                &layout::sessions_dir(&config.data_dir)?,
                config.sessions.clone(),
            )?),
            Profile::Distributed => return Err(unavailable_profile()),
        })
    }

    /// What an agent runner works over: these services' memory,
    /// artifacts, sessions and outbox (with the memory target).
    pub fn agent(&self) -> hippocamp_agent::AgentServices {
        hippocamp_agent::AgentServices {
            sessions: Arc::clone(&self.sessions),
            memory: self.memory.clone(),
            artifacts: Some(Arc::clone(&self.artifacts)),
            outbox: self
                .outbox
                .clone()
                .and_then(|o| TargetName::new(MEMORY_TARGET).ok().map(|t| (o, t))),
        }
    }

    /// The memory store callers use, or `MemoryDisabled`.
    pub fn memory_store(&self) -> Result<&Arc<dyn MemoryStore>> {
        self.memory.as_ref().ok_or(Error::MemoryDisabled)
    }

    /// The outbox, or why there is none.
    pub fn outbox(&self) -> Result<&Outbox> {
        match (&self.memory, &self.outbox) {
            (None, _) => Err(Error::MemoryDisabled),
            (_, Some(o)) => Ok(o),
            (_, None) => Err(no_outbox(self.profile)),
        }
    }

    /// Starts the outbox's processor (its workers and prune pass) on the
    /// current Tokio runtime, if there is an outbox and it is not running.
    pub fn start_processor(&self) -> Result<()> {
        let Some(outbox) = &self.outbox else {
            return Ok(());
        };
        let mut p = self.processor.lock();
        if p.is_none() {
            *p = Some(Processor::start(outbox, self.processor_options.clone())?);
        }
        Ok(())
    }

    /// Stops the processor (deliveries in flight finish their call).
    pub async fn stop_processor(&self) {
        let p = self.processor.lock().take();
        if let Some(p) = p {
            p.stop().await;
        }
    }

    /// Whether every service can serve: memory answers, and with an
    /// outbox, its store takes writes and its processor runs.
    pub async fn health(&self) -> Result<()> {
        if let Some(m) = &self.memory {
            m.status().await?;
        }
        if let Some(o) = &self.outbox {
            o.health()
                .await
                .map_err(|e| Error::OutboxUnavailable(e.to_string()))?;
            let running = self
                .processor
                .lock()
                .as_ref()
                .is_some_and(Processor::is_running);
            if !running {
                return Err(Error::OutboxUnavailable(
                    "the outbox's processor is not running".into(),
                ));
            }
        }
        self.artifacts.status().await.map(drop)
    }

    /// Content-free counters of every service.
    pub async fn status(&self) -> Result<ServicesStatus> {
        let memory = match &self.memory {
            Some(m) => Some(m.status().await?),
            None => None,
        };
        let outbox = match &self.outbox {
            Some(o) => Some(o.stats().await?),
            None => None,
        };
        let artifacts = self.artifacts.status().await?;
        let processor_running = self.processor.lock().is_some();
        Ok(ServicesStatus {
            profile: self.profile.as_str(),
            memory,
            outbox,
            processor_running,
            artifacts,
        })
    }

    /// The memory side of `config` alone, with the configured embedder
    /// connected (the `memory` and `outbox` commands use it).
    pub async fn memory(config: &Config) -> Result<MemoryServices> {
        with_embedder(config, Self::memory_with).await
    }

    /// The memory side of `config` embedding with `embedder`: in memory
    /// (ephemeral), or in the data directory with its outbox (durable),
    /// behind its router and reply check. Blocking.
    pub fn memory_with(
        config: &Config,
        embedder: Option<Arc<dyn hippocamp_embed::Embedder>>,
    ) -> Result<MemoryServices> {
        config.validate()?;
        let inner: Arc<dyn MemoryStore> = match config.profile {
            Profile::Disabled => return Err(Error::MemoryDisabled),
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
        let routed: Arc<dyn MemoryStore> = Arc::new(RoutedMemory::new(
            inner,
            router(config.profile, &config.memory_router),
        )?);
        if config.profile != Profile::Durable {
            return Ok(MemoryServices {
                memory: Arc::new(ScopeChecked::new(routed)),
                outbox: None,
                profile: config.profile,
            });
        }
        let jobs =
            RedbJobStore::open(layout::outbox_dir(&config.data_dir)?, config.outbox.clone())?;
        let outbox = Outbox::new(Arc::new(jobs));
        // The processor delivers through the reply check too; callers'
        // erasures go through `Erasing`, which cancels queued jobs.
        outbox.register(
            TargetName::new(MEMORY_TARGET)?,
            Target {
                store: Arc::new(ScopeChecked::new(Arc::clone(&routed))),
                limits: config.memory.limits.clone(),
            },
        )?;
        Ok(MemoryServices {
            memory: Arc::new(ScopeChecked::new(
                Erasing::new(routed, outbox.clone()).with_processor(&config.outbox_processor),
            )),
            outbox: Some(outbox),
            profile: config.profile,
        })
    }

    /// The artifact store of `config`: in memory (ephemeral) or in the
    /// data directory (durable, disabled), behind its router and reply
    /// check. Blocking.
    pub fn artifacts(config: &Config) -> Result<Arc<dyn ArtifactStore>> {
        config.validate()?;
        let inner: Arc<dyn ArtifactStore> = match config.profile {
            Profile::Ephemeral => Arc::new(InMemoryArtifacts::new(config.artifacts.clone())?),
            Profile::Durable | Profile::Disabled => Arc::new(Self::filesystem_artifacts(config)?),
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
            let memory = s.memory_store().unwrap();
            let debug = format!("{memory:?}");
            assert!(debug.starts_with("ScopeChecked"), "{debug}");
            assert!(format!("{:?}", s.artifacts).starts_with("ScopeChecked"));
            let caps = memory.capabilities();
            assert_eq!(caps.async_ingestion, profile == Profile::Durable);
            assert_eq!(s.outbox.is_some(), profile == Profile::Durable);
            // The outbox's limits are in force for an ingest: reported.
            let outbox_limits = [
                "outbox.max_active_bytes_per_scope",
                "outbox.processor.workers",
            ]
            .map(|n| caps.limits.iter().any(|l| l.name == n));
            assert_eq!(outbox_limits, [profile == Profile::Durable; 2]);
            let routing = caps.routing.unwrap();
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
        s.memory_store()
            .unwrap()
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
