//! The distributed profile's connections: `[postgres]` and `[s3]`, and
//! [`Remote`], what [`Services::open`](crate::Services::open) connects to
//! before it builds the stores on them.
//!
//! Secrets never sit in the configuration file (which `hippocamp config
//! check` prints): the PostgreSQL URL and the S3 keys are read from the
//! environment variables the sections name, or from files, and are never
//! logged.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{Error, Problem, Result};
use hippocamp_postgres::{Database, PgConfig};
use serde::{Deserialize, Serialize};

/// `[postgres]`: where the distributed profile keeps memory, sessions,
/// tokens and governance records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresSection {
    /// The environment variable holding the `postgres://` URL (default
    /// `HIPPOCAMP_POSTGRES_URL`), read when `url_file` is absent.
    pub url_env: String,
    /// A file holding the URL (e.g. a mounted secret), instead.
    pub url_file: Option<PathBuf>,
    /// The schema of hippocamp's tables (created if absent; default
    /// `hippocamp`).
    pub schema: String,
    /// Pooled connections of one server, 1..=1,000 (default 16).
    pub max_connections: usize,
    /// Longest wait for a pooled connection, ms, 1..=600,000 (default 5,000).
    pub wait_timeout_ms: u64,
    /// Longest wait to connect, ms, 1..=600,000 (default 5,000).
    pub connect_timeout_ms: u64,
    /// Scopes whose search state one server keeps in memory, at least 1
    /// (default 10,000): a cache, reloaded from the tables when another
    /// server wrote.
    pub max_cached_scopes: usize,
    /// Entries a scope may hold and still be searched exactly by vector
    /// (in the server's copy), 0..=10,000,000 (default 30,000); larger
    /// scopes are searched through PostgreSQL's HNSW index.
    pub exact_vectors_up_to: u64,
}

impl Default for PostgresSection {
    fn default() -> Self {
        Self {
            url_env: "HIPPOCAMP_POSTGRES_URL".into(),
            url_file: None,
            schema: "hippocamp".into(),
            max_connections: 16,
            wait_timeout_ms: 5_000,
            connect_timeout_ms: 5_000,
            max_cached_scopes: hippocamp_postgres::memory::DEFAULT_MAX_CACHED_SCOPES,
            exact_vectors_up_to: hippocamp_postgres::memory::DEFAULT_EXACT_VECTORS_UP_TO,
        }
    }
}

fn secret(what: &str, env: &str, file: Option<&PathBuf>) -> Result<String> {
    let value = match file {
        Some(f) => std::fs::read_to_string(f).map_err(|e| {
            Error::config(
                what,
                Problem::Malformed(format!("cannot read {}: {e}", f.display())),
            )
        })?,
        None => std::env::var(env).map_err(|_| {
            Error::config(
                what,
                Problem::Malformed(format!("the environment variable {env} is not set")),
            )
        })?,
    };
    Ok(value.trim().to_owned())
}

impl PostgresSection {
    /// The connection settings, with the URL read from its source.
    pub fn connection(&self) -> Result<PgConfig> {
        let url = secret("postgres.url", &self.url_env, self.url_file.as_ref())?;
        let pg = PgConfig {
            url,
            schema: self.schema.clone(),
            max_connections: self.max_connections,
            wait_timeout: Duration::from_millis(self.wait_timeout_ms),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
        };
        pg.validate()?;
        Ok(pg)
    }

    /// Checks what can be checked without the secret.
    pub fn validate(&self) -> Result<()> {
        if self.max_cached_scopes == 0 {
            return Err(Error::config(
                "postgres.max_cached_scopes",
                Problem::OutOfRange {
                    value: 0,
                    min: 1,
                    max: i128::from(u32::MAX),
                },
            ));
        }
        hippocamp_postgres::memory::check_exact_vectors_up_to(self.exact_vectors_up_to)?;
        PgConfig {
            url: "postgres://placeholder@127.0.0.1/db".into(),
            schema: self.schema.clone(),
            max_connections: self.max_connections,
            wait_timeout: Duration::from_millis(self.wait_timeout_ms),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
        }
        .validate()
    }
}

/// `[s3]`: where the distributed profile keeps artifact contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Section {
    /// Endpoint URL (e.g. `http://127.0.0.1:9000`); AWS when absent.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The bucket (it must exist).
    pub bucket: String,
    /// Region (default `us-east-1`).
    #[serde(default = "default_region")]
    pub region: String,
    /// Key prefix of hippocamp's objects (default `hippocamp`).
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// Plain HTTP (loopback servers only).
    #[serde(default)]
    pub allow_http: bool,
    /// Virtual-hosted-style requests instead of path style.
    #[serde(default)]
    pub virtual_hosted: bool,
    /// Timeout of one request, ms (default 30,000).
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// The environment variable holding the access key id (default
    /// `HIPPOCAMP_S3_ACCESS_KEY_ID`).
    #[serde(default = "default_key_env")]
    pub access_key_id_env: String,
    /// The environment variable holding the secret key (default
    /// `HIPPOCAMP_S3_SECRET_ACCESS_KEY`), read when the file is absent.
    #[serde(default = "default_secret_env")]
    pub secret_access_key_env: String,
    /// A file holding the secret key, instead.
    #[serde(default)]
    pub secret_access_key_file: Option<PathBuf>,
}

fn default_region() -> String {
    "us-east-1".into()
}
fn default_prefix() -> String {
    "hippocamp".into()
}
fn default_request_timeout_ms() -> u64 {
    30_000
}
fn default_key_env() -> String {
    "HIPPOCAMP_S3_ACCESS_KEY_ID".into()
}
fn default_secret_env() -> String {
    "HIPPOCAMP_S3_SECRET_ACCESS_KEY".into()
}

impl S3Section {
    /// The connection settings, with the keys read from their sources.
    pub fn connection(&self) -> Result<hippocamp_artifacts_object::S3Config> {
        Ok(hippocamp_artifacts_object::S3Config {
            endpoint: self.endpoint.clone(),
            bucket: self.bucket.clone(),
            region: self.region.clone(),
            access_key_id: secret("s3.access_key_id", &self.access_key_id_env, None)?,
            secret_access_key: secret(
                "s3.secret_access_key",
                &self.secret_access_key_env,
                self.secret_access_key_file.as_ref(),
            )?,
            allow_http: self.allow_http,
            virtual_hosted: self.virtual_hosted,
            request_timeout_ms: self.request_timeout_ms,
        })
    }

    /// Checks what can be checked without the keys.
    pub fn validate(&self) -> Result<()> {
        if self.bucket.is_empty() {
            return Err(Error::config("s3.bucket", Problem::Empty));
        }
        hippocamp_core::error::check_range(
            "s3.request_timeout_ms",
            self.request_timeout_ms,
            1,
            300_000,
        )
    }
}

/// What the distributed profile runs on: one PostgreSQL pool (migrated)
/// and the artifact store on S3.
#[derive(Debug, Clone)]
pub struct Remote {
    /// The database.
    pub db: Database,
    /// Artifacts: the catalog in PostgreSQL, contents on the object store.
    pub artifacts: Arc<hippocamp_postgres::PgArtifacts>,
    /// The object store's connection, for readiness pings.
    pub object_store: Arc<hippocamp_artifacts_object::ObjectArtifacts>,
    /// The memory store's cache bound.
    pub max_cached_scopes: usize,
    /// The largest scope searched exactly by vector.
    pub exact_vectors_up_to: u64,
    /// The deployment's scope-hash key, shared by every server.
    pub scope_key: hippocamp_core::ScopeKey,
}

impl Remote {
    /// Whether both answer now.
    pub async fn ping(&self) -> Result<()> {
        self.db
            .ping(hippocamp_core::Deadline::after(Duration::from_secs(2)))
            .await?;
        self.object_store.ping().await
    }

    /// Connects both (and applies the schema's migrations).
    pub async fn connect(config: &crate::Config) -> Result<Self> {
        let (Some(pg), Some(s3)) = (&config.postgres, &config.s3) else {
            return Err(Error::config(
                "profile",
                Problem::Malformed("the distributed profile needs [postgres] and [s3]".into()),
            ));
        };
        let db = Database::connect(&pg.connection()?).await?;
        let limits = &config.artifacts;
        let options = hippocamp_artifacts_object::ObjectOptions {
            prefix: s3.prefix.clone(),
            max_artifact_bytes: limits.max_artifact_bytes,
            max_page_limit: limits.max_page_limit,
            default_page_limit: limits.default_page_limit,
            call_timeout_ms: limits.call_timeout_ms,
            chunk_size: limits.chunk_size,
            ..hippocamp_artifacts_object::ObjectOptions::default()
        };
        // The object-store store connects and probes the bucket (and
        // answers readiness); the artifacts go through the catalog in
        // PostgreSQL, their contents under the same prefix.
        let object_store = Arc::new(
            hippocamp_artifacts_object::ObjectArtifacts::s3(&s3.connection()?, options).await?,
        );
        let artifacts = Arc::new(hippocamp_postgres::PgArtifacts::new(
            db.clone(),
            object_store.object_store(),
            s3.prefix.clone(),
            config.artifacts.clone(),
        )?);
        let scope_key = hippocamp_postgres::PgAudit::load_key(&db).await?;
        Ok(Self {
            db,
            object_store,
            artifacts,
            max_cached_scopes: pg.max_cached_scopes,
            exact_vectors_up_to: pg.exact_vectors_up_to,
            scope_key,
        })
    }
}
