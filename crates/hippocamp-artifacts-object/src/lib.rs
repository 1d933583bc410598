//! Artifacts in object stores through the `object_store` crate: S3 (and
//! S3-compatible servers), Google Cloud Storage and Azure Blob Storage go
//! through the same code; an in-memory bucket serves tests and embedding.
//!
//! [`layout`] names every object; [`store`] documents version allocation
//! (create-only writes of zero-padded manifest keys), publication, deletion
//! (tombstones keep numbers taken) and what an object store cannot
//! guarantee here. At start the store probes that the server honours
//! create-only writes and refuses to run if it does not.
//!
//! Tested against a real S3 server (`s3s-fs`) on loopback; no GCS or Azure
//! server exists here, so those constructors are compiled, not exercised.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bucket;
pub mod layout;
pub mod store;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{Error, Problem, Result};
use object_store::ClientOptions;
use serde::{Deserialize, Serialize};

pub use layout::MAX_OBJECT_NAME_BYTES;
pub use store::{ObjectArtifacts, ObjectOptions};

use crate::bucket::{Ordered, Paginated};

/// Connection to an S3-compatible server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Config {
    /// Endpoint URL (e.g. `http://127.0.0.1:9000`); AWS when absent.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The bucket (it must exist).
    pub bucket: String,
    /// Region.
    #[serde(default = "default_region")]
    pub region: String,
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key (never printed).
    pub secret_access_key: String,
    /// Allow plain HTTP (loopback test servers).
    #[serde(default)]
    pub allow_http: bool,
    /// Virtual-hosted-style requests (`bucket.host`) instead of path style.
    #[serde(default)]
    pub virtual_hosted: bool,
    /// Timeout of one HTTP request, milliseconds.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: u64,
}

fn default_region() -> String {
    "us-east-1".to_owned()
}

fn default_request_timeout_ms() -> u64 {
    30_000
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("allow_http", &self.allow_http)
            .field("virtual_hosted", &self.virtual_hosted)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .finish()
    }
}

fn client_options(timeout_ms: u64, allow_http: bool) -> Result<ClientOptions> {
    if !(1..=300_000).contains(&timeout_ms) {
        return Err(Error::config(
            "request_timeout_ms",
            Problem::OutOfRange {
                value: i128::from(timeout_ms),
                min: 1,
                max: 300_000,
            },
        ));
    }
    Ok(ClientOptions::new()
        .with_timeout(Duration::from_millis(timeout_ms))
        .with_allow_http(allow_http))
}

fn build_err(e: object_store::Error) -> Error {
    Error::config("object_store", Problem::Malformed(e.to_string()))
}

impl ObjectArtifacts {
    /// A store on an S3-compatible server.
    pub async fn s3(config: &S3Config, options: ObjectOptions) -> Result<Self> {
        let mut b = object_store::aws::AmazonS3Builder::new()
            .with_client_options(client_options(
                config.request_timeout_ms,
                config.allow_http,
            )?)
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_access_key_id(&config.access_key_id)
            .with_secret_access_key(&config.secret_access_key)
            .with_virtual_hosted_style_request(config.virtual_hosted);
        if let Some(e) = &config.endpoint {
            b = b.with_endpoint(e);
        }
        let s3 = b.build().map_err(build_err)?;
        Self::start(Arc::new(Paginated::new(s3)), options, "s3").await
    }

    /// A store on Google Cloud Storage; credentials from the environment
    /// (`GOOGLE_SERVICE_ACCOUNT`, …) as `object_store` reads them.
    pub async fn gcs(bucket: &str, options: ObjectOptions) -> Result<Self> {
        let gcs = object_store::gcp::GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(build_err)?;
        Self::start(Arc::new(Paginated::new(gcs)), options, "gcs").await
    }

    /// A store on Azure Blob Storage; account and credentials from the
    /// environment (`AZURE_STORAGE_ACCOUNT_NAME`, …).
    pub async fn azure(container: &str, options: ObjectOptions) -> Result<Self> {
        let az = object_store::azure::MicrosoftAzureBuilder::from_env()
            .with_container_name(container)
            .build()
            .map_err(build_err)?;
        Self::start(Arc::new(Paginated::new(az)), options, "azure").await
    }

    /// A store on an in-memory bucket (volatile; for tests and embedding).
    pub async fn in_memory(options: ObjectOptions) -> Result<Self> {
        let mem: Arc<dyn object_store::ObjectStore> =
            Arc::new(object_store::memory::InMemory::new());
        Self::start(Arc::new(Ordered(mem)), options, "memory-object").await
    }

    /// A store on any `object_store` whose `list_with_offset` returns keys
    /// in order (such as `InMemory`); `backend` names it in capabilities.
    pub async fn on_ordered_store(
        store: Arc<dyn object_store::ObjectStore>,
        options: ObjectOptions,
        backend: &'static str,
    ) -> Result<Self> {
        Self::start(Arc::new(Ordered(store)), options, backend).await
    }
}
