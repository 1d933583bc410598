//! The configuration of the server and the command line: one TOML file in
//! which every key is known and every value is range-checked at load (no
//! value is clamped later: what loads is what runs).
//!
//! Every section is the configuration type of the piece it configures
//! (`MemoryConfig`, `RouterConfig`, `ArtifactLimits`, `FsOptions`), so a
//! key means the same thing here as in the library. An unknown key is an
//! error naming the key and the nearest valid one.

use std::net::SocketAddr;
use std::path::PathBuf;

use hippocamp_artifacts::ArtifactLimits;
use hippocamp_artifacts_fs::FsOptions;
use hippocamp_core::{Error, Problem};
use hippocamp_memory::MemoryConfig;
use hippocamp_router::RouterConfig;
use serde::{Deserialize, Serialize};

/// Which services the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Memory and the outbox off (memory routes answer 503
    /// `memory_disabled`); artifacts in the data directory.
    Disabled,
    /// In-memory stores, one shared store for all scopes, no outbox
    /// (ingestion is synchronous only); nothing survives a restart.
    Ephemeral,
    /// The embedded durable memory store, the filesystem artifact store,
    /// each behind an exact-scope router, and the durable ingestion outbox
    /// delivering into memory (the default).
    #[default]
    Durable,
    /// Memory, sessions, tokens and governance records in PostgreSQL
    /// (with pgvector), artifacts on an S3-compatible store: several
    /// stateless servers over the same two (`[postgres]`, `[s3]`), the
    /// outbox's jobs shared by the processors of every server.
    Distributed,
}

impl Profile {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Disabled => "disabled",
            Profile::Ephemeral => "ephemeral",
            Profile::Durable => "durable",
            Profile::Distributed => "distributed",
        }
    }
}

hippocamp_core::limit_table! {
    /// HTTP bounds. A memory call without `?timeout_ms=` gets the memory
    /// store's `call_timeout_ms`, an artifact call the artifact store's: the
    /// values their capabilities report. Every value is range-checked at
    /// load; none is clamped later.
    pub struct HttpConfig, prefix "http." {
        /// Longest the server waits for a JSON request body, milliseconds.
        body_timeout_ms: default 30_000, min 1, max 300_000,
            "longest the server waits for a JSON request body, milliseconds";
        /// Deadline of an artifact upload or download without
        /// `?timeout_ms=`, milliseconds (the longest a transfer may take).
        transfer_timeout_ms: default 300_000, min 1, max 300_000,
            "deadline of an artifact upload or download without ?timeout_ms=, milliseconds";
        /// Longest a download may wait for its client to read more,
        /// milliseconds; then the connection is closed.
        transfer_idle_timeout_ms: default 30_000, min 1, max 300_000,
            "longest a download waits for its client to read more, milliseconds";
        /// Largest JSON request body, bytes.
        max_json_body_bytes: default 8 << 20, min 1 << 10, max 64 << 20,
            "bytes of a JSON request body";
        /// Requests served at once, counted until a reply's body is sent;
        /// more wait in no queue: they get 503.
        max_concurrent_requests: default 512, min 1, max 100_000,
            "requests served at once (counted until the reply's body is sent); more get 503";
        /// How long shutdown waits for requests in flight, milliseconds.
        shutdown_grace_ms: default 30_000, min 0, max 600_000,
            "how long shutdown waits for requests in flight, milliseconds";
    }
}

impl HttpConfig {
    /// Checks every range.
    pub fn validate(&self) -> Result<(), Error> {
        self.check_ranges()
    }
}

/// The MCP endpoint (`/mcp`) of the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSettings {
    /// `Host` values accepted (default: loopback only); a server reached
    /// under another name lists it here.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted when a request carries one (scheme, host,
    /// `:*` for any port); any other origin is refused.
    pub allowed_origins: Vec<String>,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ],
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `disabled`, `ephemeral`, `durable` (default) or `distributed`.
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
    pub embedder: Option<crate::embedder::EmbedderConfig>,
    /// A reranking stage over every search's best hits (off without one):
    /// a `/rerank` endpoint, an embedder as a bi-encoder, or the store's
    /// own embedder.
    pub reranker: Option<crate::reranker::RerankerConfig>,
    /// The ingestion outbox's limits, retries and retention (durable
    /// profile).
    pub outbox: hippocamp_outbox::OutboxLimits,
    /// How the outbox's processor delivers.
    pub outbox_processor: hippocamp_outbox::ProcessorOptions,
    /// Limits of the agent runner's session store.
    pub sessions: hippocamp_sessions::SessionLimits,
    /// The agent `hippocamp chat` runs.
    pub agent: hippocamp_agent::AgentConfig,
    /// The MCP endpoint.
    pub mcp: McpSettings,
    /// Governance: lifetimes, consent and legal holds per app.
    pub policy: hippocamp_governance::PolicyConfig,
    /// The background sweeper that deletes expired entries.
    pub sweeper: SweeperConfig,
    /// The durable memory store's in-memory search state (`[memory_cache]`).
    pub memory_cache: MemoryCacheConfig,
    /// The audit log's own retention.
    pub audit: AuditConfig,
    /// Bounds of a restore (`[restore]`).
    pub restore: crate::restore::RestoreLimits,
    /// Consolidation runs (`[consolidation]`).
    pub consolidation: ConsolidationConfig,
    /// PostgreSQL (the distributed profile only).
    pub postgres: Option<crate::distributed::PostgresSection>,
    /// The S3-compatible object store (the distributed profile only).
    pub s3: Option<crate::distributed::S3Section>,
}

/// Consolidation runs (`[consolidation]`): their bounds, and the model
/// `extract` asks (configured like `[agent.model]`; without one, only
/// `dedupe` runs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsolidationConfig {
    /// The model of `extract` runs.
    pub model: Option<hippocamp_models::ModelConfig>,
    /// Bounds of every run.
    pub limits: crate::consolidation::ConsolidationLimits,
    /// Bounds of extraction.
    pub extract: crate::consolidation::extract::ExtractLimits,
    /// Apps whose runs start by themselves after the outbox delivered
    /// enough events to a user (`[consolidation.apps.NAME]`).
    pub apps: std::collections::BTreeMap<String, crate::consolidation::auto::AutoRun>,
}

impl ConsolidationConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<(), Error> {
        self.limits.check_ranges()?;
        self.extract.check_ranges()?;
        if let Some(m) = &self.model {
            m.limits.validate()?;
        }
        for (app, auto) in &self.apps {
            hippocamp_core::AppName::new(app.as_str())?;
            auto.validate(app)?;
            if auto.mode != crate::consolidation::Mode::Dedupe && self.model.is_none() {
                return Err(Error::config(
                    format!("consolidation.apps.{app}.mode"),
                    Problem::Relation("extract runs need [consolidation.model]"),
                ));
            }
        }
        Ok(())
    }
}

/// The audit log (`[audit]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// How long a record is kept, in ms, 3,600,000 (an hour) ..=
    /// 3,153,600,000,000 (a century); default 31,536,000,000 (365 days).
    /// The sweeper prunes older records on each pass.
    pub retention_ms: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            retention_ms: 31_536_000_000,
        }
    }
}

impl AuditConfig {
    /// Checks the range.
    pub fn validate(&self) -> Result<(), Error> {
        hippocamp_core::error::check_range(
            "audit.retention_ms",
            self.retention_ms,
            3_600_000,
            3_153_600_000_000,
        )
    }
}

/// The database cache `hippocamp memory export` opens a data directory
/// with, at most (16 MiB): it reads each page once.
pub const EXPORT_DB_CACHE_BYTES: u64 = 16 << 20;

/// The durable memory store's in-memory search state (`[memory_cache]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryCacheConfig {
    /// Bytes of scopes' search state (entries and index) kept in memory,
    /// charged at their entries' storage bytes plus ~1,000 bytes an
    /// entry (about their resident size); loading a scope beyond it
    /// releases the least recently used ones. 1,048,576..=2^40 (default
    /// 1 GiB). The durable profile only; reported by the memory
    /// capabilities as `scope_cache_bytes`.
    pub scope_cache_bytes: u64,
    /// Bytes of the durable memory database's page cache and write buffer
    /// (filled only as pages are used): writes are applied to the
    /// database at the rate its inserts allow, which a small cache slows
    /// (measured in docs/PERFORMANCE.md). 1,048,576..=2^36 (default 256
    /// MiB). The durable profile only; reported by the memory capabilities
    /// as `db_cache_bytes`.
    pub db_cache_bytes: u64,
}

impl Default for MemoryCacheConfig {
    fn default() -> Self {
        Self {
            scope_cache_bytes: hippocamp_memory_redb::SCOPE_CACHE_BYTES.0,
            db_cache_bytes: hippocamp_memory_redb::DB_CACHE_BYTES.0,
        }
    }
}

impl MemoryCacheConfig {
    /// The store options it sets.
    pub fn options(&self) -> hippocamp_memory_redb::DurableOptions {
        hippocamp_memory_redb::DurableOptions {
            scope_cache_bytes: self.scope_cache_bytes,
            cache_bytes: usize::try_from(self.db_cache_bytes).unwrap_or(usize::MAX),
            ..hippocamp_memory_redb::DurableOptions::default()
        }
    }
}

/// How the background sweeper runs (`[sweeper]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweeperConfig {
    /// Milliseconds between sweeps, 100..=86,400,000 (default 60,000).
    pub interval_ms: u64,
    /// Most entries one sweep batch deletes, 1..=10,000 (default 1,000);
    /// a sweep runs batches until none are due. Also the artifact content
    /// objects one repair page looks at (distributed profile).
    pub batch: u64,
    /// How old unreferenced artifact content must be before the repair
    /// pass removes it (distributed profile), ms, 1..=604,800,000 (default
    /// 3,600,000); at least `[artifacts] call_timeout_ms`, since a
    /// put uploads its content before it publishes it.
    pub artifact_repair_grace_ms: u64,
}

impl Default for SweeperConfig {
    fn default() -> Self {
        Self {
            interval_ms: 60_000,
            batch: 1_000,
            artifact_repair_grace_ms: 3_600_000,
        }
    }
}

impl SweeperConfig {
    /// Checks both ranges.
    pub fn validate(&self) -> Result<(), Error> {
        hippocamp_core::error::check_range(
            "sweeper.interval_ms",
            self.interval_ms,
            100,
            86_400_000,
        )?;
        hippocamp_core::error::check_range(
            "sweeper.batch",
            self.batch,
            1,
            hippocamp_memory::list::MAX_SWEEP_BATCH,
        )?;
        hippocamp_core::error::check_range(
            "sweeper.artifact_repair_grace_ms",
            self.artifact_repair_grace_ms,
            1,
            604_800_000,
        )
    }
}

impl Default for Config {
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
            reranker: None,
            outbox: hippocamp_outbox::OutboxLimits::default(),
            outbox_processor: hippocamp_outbox::ProcessorOptions::default(),
            sessions: hippocamp_sessions::SessionLimits::default(),
            agent: hippocamp_agent::AgentConfig::default(),
            mcp: McpSettings::default(),
            policy: hippocamp_governance::PolicyConfig::default(),
            sweeper: SweeperConfig::default(),
            memory_cache: MemoryCacheConfig::default(),
            audit: AuditConfig::default(),
            restore: crate::restore::RestoreLimits::default(),
            consolidation: ConsolidationConfig::default(),
            postgres: None,
            s3: None,
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

impl Config {
    /// Parses and validates a TOML document.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| unknown_key(text, &e))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a TOML file.
    pub fn load(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Syntax(format!("cannot read {}: {e}", path.display())))?;
        Self::from_toml(&text)
    }

    /// Checks every range and the profile.
    pub fn validate(&self) -> Result<(), Error> {
        self.memory.validate()?;
        self.memory_router.validate()?;
        self.artifacts.validate()?;
        self.artifacts_router.validate()?;
        self.artifacts_fs.validate()?;
        self.http.validate()?;
        self.outbox.validate()?;
        self.outbox_processor.validate()?;
        self.sessions.validate()?;
        self.policy.validate()?;
        self.sweeper.validate()?;
        self.memory_cache.options().validate()?;
        if self.sweeper.artifact_repair_grace_ms < self.artifacts.call_timeout_ms {
            return Err(Error::config(
                "sweeper.artifact_repair_grace_ms",
                Problem::Relation(
                    "artifact_repair_grace_ms must be at least the artifacts' call_timeout_ms: \
                     a put in flight uploads its content before it publishes it",
                ),
            ));
        }
        self.audit.validate()?;
        self.restore.validate()?;
        self.consolidation.validate()?;
        // Every export this configuration makes can be restored by it.
        let longest = crate::export::max_line_bytes(self);
        if self.restore.max_line_bytes < longest {
            return Err(Error::config(
                "restore.max_line_bytes",
                Problem::Malformed(format!(
                    "{} is below the longest line an export of this configuration can hold ({longest} bytes: \
                     an entry or revision at the memory limits, or a page of session events)",
                    self.restore.max_line_bytes
                )),
            ));
        }
        self.agent
            .validate()
            .map_err(|e| Error::config("agent", Problem::Malformed(e.to_string())))?;
        if let Some(e) = &self.embedder {
            e.validate()?;
        }
        if let Some(r) = &self.reranker {
            // `use_embedder` is checked against the embedder the stores
            // get, when the stage is connected: a library caller may
            // hand one over without an `[embedder]` section.
            r.validate(true)?;
        }
        match (self.profile, &self.postgres, &self.s3) {
            (Profile::Distributed, Some(pg), Some(s3)) => {
                pg.validate()?;
                s3.validate()?;
            }
            (Profile::Distributed, _, _) => {
                return Err(Error::config(
                    "profile",
                    Problem::Malformed(
                        "the distributed profile needs a [postgres] and an [s3] section".into(),
                    ),
                ));
            }
            (_, None, None) => {}
            (p, _, _) => {
                return Err(Error::config(
                    "profile",
                    Problem::Malformed(format!(
                        "[postgres] and [s3] are read by the distributed profile only, not `{}`",
                        p.as_str()
                    )),
                ));
            }
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
    fn the_agent_sessions_and_mcp_sections_refuse_unknown_keys() {
        let ok = Config::from_toml(
            "[sessions]\nmax_events_per_session = 5\n[mcp]\nallowed_hosts = [\"mem.example\"]\n[agent]\nname = \"bot\"\ntools = [\"load_memory\"]\n[agent.runner.limits]\nmax_model_calls = 3\n",
        )
        .unwrap();
        assert_eq!(ok.sessions.max_events_per_session, 5);
        assert_eq!(ok.mcp.allowed_hosts, ["mem.example"]);
        assert_eq!(ok.agent.runner.limits.max_model_calls, 3);
        for bad in [
            "[sessions]\nmax_event = 5\n",
            "[mcp]\nallowed_host = []\n",
            "[agent]\nnmae = \"x\"\n",
            "[agent]\ntools = [\"no_such_tool\"]\n",
            "[agent.runner.limits]\nmax_model_calls = 0\n",
            "[sessions]\nmax_events_per_session = 0\n",
        ] {
            assert!(Config::from_toml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_consolidation_section_is_checked() {
        let ok = Config::from_toml(
            "[consolidation.limits]\nmax_entries_read = 500\n[consolidation.extract]\nturns_per_call = 5\n[consolidation.model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        )
        .unwrap();
        assert_eq!(ok.consolidation.limits.max_entries_read, 500);
        assert_eq!(ok.consolidation.extract.turns_per_call, 5);
        assert_eq!(ok.consolidation.model.unwrap().model, "m");
        let auto = Config::from_toml(
            "[consolidation.apps.shop]\nmode = \"dedupe\"\napply = \"review\"\nafter_events = 50\n",
        )
        .unwrap();
        assert_eq!(auto.consolidation.apps["shop"].after_events, 50);
        for bad in [
            "[consolidation]\nmodle = 1\n",
            "[consolidation.limits]\nmax_entries_read = 0\n",
            "[consolidation.extract]\nturns_per_call = 0\n",
            "[consolidation.extract]\nturns_per_cal = 3\n",
            "[consolidation.apps.shop]\nmode = \"dedupe\"\nafter_events = 0\n",
            "[consolidation.apps.shop]\nmode = \"extract\"\nafter_events = 5\n",
            "[consolidation.apps.shop]\nmode = \"dedupe\"\nafter_events = 5\nwhen = 1\n",
            "[consolidation.apps.shop]\nmode = \"dedupe\"\nafter_events = 5\nidle_ms = 10\n",
        ] {
            assert!(Config::from_toml(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_valid_and_empty_text_gives_them() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn sections_configure_their_piece() {
        let c = Config::from_toml(
            "profile = \"ephemeral\"\n[http]\nbody_timeout_ms = 1000\n\
             [memory_router]\nmax_active_scopes = 8\n[artifacts]\nmax_artifact_bytes = 1048576\n",
        )
        .unwrap();
        assert_eq!(c.profile, Profile::Ephemeral);
        assert_eq!(c.http.body_timeout_ms, 1000);
        assert_eq!(c.memory_router.max_active_scopes, 8);
        assert_eq!(c.artifacts.max_artifact_bytes, 1 << 20);
    }

    #[test]
    fn an_unknown_key_names_the_nearest_valid_one() {
        let e = Config::from_toml("bidn = \"127.0.0.1:1\"").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `bidn` (did you mean `bind`?)");
        let e = Config::from_toml("[http]\nbody_timout_ms = 5\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown key `http.body_timout_ms` (did you mean `body_timeout_ms`?)"
        );
        let e = Config::from_toml("[http]\nzzzzzzzzzzzzzzzzzzzz = 5\n").unwrap_err();
        assert_eq!(e.to_string(), "unknown key `http.zzzzzzzzzzzzzzzzzzzz`");
    }

    #[test]
    fn out_of_range_values_and_missing_profiles_are_refused() {
        let e = Config::from_toml("[http]\nbody_timeout_ms = 0\n").unwrap_err();
        assert!(e.to_string().contains("http.body_timeout_ms"), "{e}");
        // What loads is what runs: no value is clamped later, so one the
        // server could not apply is refused here.
        let e = Config::from_toml("[http]\ntransfer_timeout_ms = 300001\n").unwrap_err();
        assert!(e.to_string().contains("http.transfer_timeout_ms"), "{e}");
        let e = Config::from_toml("[memory.limits]\ncall_timeout_ms = 60001\n").unwrap_err();
        assert!(e.to_string().contains("call_timeout_ms"), "{e}");
        let e = Config::from_toml("profile = \"distributed\"").unwrap_err();
        assert!(e.to_string().contains("[postgres] and an [s3]"), "{e}");
        // Sections of the distributed profile are refused elsewhere, and
        // checked there without their secrets.
        let e = Config::from_toml("[postgres]\nschema = \"h\"\n").unwrap_err();
        assert!(e.to_string().contains("distributed profile only"), "{e}");
        let distributed = "profile = \"distributed\"\n[s3]\nbucket = \"b\"\n[postgres]\n";
        let c = Config::from_toml(distributed).unwrap();
        assert_eq!(c.postgres.unwrap().url_env, "HIPPOCAMP_POSTGRES_URL");
        let e = Config::from_toml(&format!("{distributed}schema = \"No-Caps\"\n")).unwrap_err();
        assert!(e.to_string().contains("postgres.schema"), "{e}");
        // The repair's grace covers a put in flight.
        let c = Config::from_toml("[memory_cache]\nscope_cache_bytes = 2097152\n").unwrap();
        assert_eq!(c.memory_cache.scope_cache_bytes, 2_097_152);
        let e = Config::from_toml("[memory_cache]\nscope_cache_bytes = 1000\n").unwrap_err();
        assert!(
            e.to_string().contains("memory_cache.scope_cache_bytes"),
            "{e}"
        );
        assert!(Config::from_toml("[memory_cache]\nbytes = 1\n").is_err());
        let c = Config::from_toml("[memory_cache]\ndb_cache_bytes = 2097152\n").unwrap();
        assert_eq!(c.memory_cache.options().cache_bytes, 2_097_152);
        assert_eq!(
            Config::default().memory_cache.options().cache_bytes,
            256 << 20
        );
        let e = Config::from_toml("[memory_cache]\ndb_cache_bytes = 1000\n").unwrap_err();
        assert!(e.to_string().contains("memory_cache.db_cache_bytes"), "{e}");
        let e = Config::from_toml("[sweeper]\nartifact_repair_grace_ms = 29999\n").unwrap_err();
        assert!(e.to_string().contains("artifact_repair_grace_ms"), "{e}");
        let c = Config::from_toml(
            "[sweeper]\nartifact_repair_grace_ms = 1000\n[artifacts]\ncall_timeout_ms = 1000\n",
        )
        .unwrap();
        assert_eq!(c.sweeper.artifact_repair_grace_ms, 1000);
        let e = Config::from_toml(&format!("{distributed}exact_vectors_up_to = 10000001\n"))
            .unwrap_err();
        assert!(
            e.to_string().contains("postgres.exact_vectors_up_to"),
            "{e}"
        );
        let c = Config::from_toml(&format!("{distributed}exact_vectors_up_to = 0\n")).unwrap();
        assert_eq!(c.postgres.unwrap().exact_vectors_up_to, 0);
        let e = Config::from_toml(&format!("{distributed}url = \"postgres://x:pw@h/d\"\n"))
            .unwrap_err();
        assert!(e.to_string().contains("unknown key"), "{e}");
        let e = Config::from_toml(
            "[embedder]\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"m\"\nkey = 1\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("embedder.key"), "{e}");
        let e = Config::from_toml(
            "[embedder]\nbase_url = \"http://127.0.0.1:1\"\nmodel_dir = \"/m\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("either"), "{e}");
        let c = Config::from_toml(
            "profile = \"ephemeral\"\n[embedder]\nmodel_dir = \"/models/minilm\"\n[embedder.limits]\nmax_inputs = 64\n",
        )
        .unwrap();
        assert_eq!(c.embedder.unwrap().limits.max_inputs, 64);
        let e = Config::from_toml("profile = \"fast\"").unwrap_err();
        assert!(matches!(e, ConfigError::Syntax(_)), "{e}");
    }
}
