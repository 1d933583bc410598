//! `hippocamp serve` children in the distributed profile over the
//! environment's PostgreSQL and S3 server, each deployment on a schema and
//! a key prefix of its own.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::missing_panics_doc
)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

pub use super::local::hippocamp;

/// A deployment's configuration file, or `None` (skip) when the
/// environment lacks PostgreSQL or S3.
pub struct Deployment {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    /// Its schema and its key prefix in the bucket.
    pub name: String,
}

impl Deployment {
    pub fn new() -> Option<Self> {
        Self::with("")
    }

    /// A deployment whose configuration ends with `extra` (more sections).
    pub fn with(extra: &str) -> Option<Self> {
        hippocamp_testkit::postgres_url()?;
        let s3 = hippocamp_testkit::s3_server()?;
        let dir = tempfile::tempdir().unwrap();
        let name = format!("t_{:016x}", rand::random::<u64>());
        let config = dir.path().join("distributed.toml");
        std::fs::write(
            &config,
            format!(
                r#"profile = "distributed"
bind = "127.0.0.1:0"
data_dir = "{data}"

[postgres]
url_env = "HIPPOCAMP_TEST_POSTGRES_URL"
schema = "{name}"
max_connections = 8

[s3]
endpoint = "{endpoint}"
bucket = "{bucket}"
prefix = "{name}"
allow_http = true
access_key_id_env = "HIPPOCAMP_TEST_S3_ACCESS_KEY"
secret_access_key_env = "HIPPOCAMP_TEST_S3_SECRET_KEY"
{extra}
"#,
                data = dir.path().join("unused").display(),
                endpoint = s3.endpoint,
                bucket = s3.bucket,
            ),
        )
        .unwrap();
        Some(Self { dir, config, name })
    }

    /// Starts a server; its admin token when it made one (the first
    /// server of a deployment does).
    pub fn serve(&self) -> Server {
        let mut child = hippocamp()
            .args(["serve", "--config"])
            .arg(&self.config)
            .env("HIPPOCAMP_TEST_S3_ACCESS_KEY", s3_key())
            .env("HIPPOCAMP_TEST_S3_SECRET_KEY", s3_secret())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first.rsplit("http://").next().unwrap().to_owned();
        let mut admin = None;
        for l in lines.by_ref() {
            let l = l.unwrap();
            if let Some(t) = l.strip_prefix("admin token (shown once, stored hashed): ") {
                admin = Some(t.to_owned());
            }
            if l.starts_with("inspection page") || l.contains("inspection page:") {
                break;
            }
        }
        // Keep reading, so the server never writes into a closed pipe.
        std::thread::spawn(move || for _ in lines {});
        Server {
            child,
            base: format!("http://{addr}"),
            admin,
        }
    }

    /// `hippocamp token …` on the deployment's shared tokens.
    pub fn token(&self, args: &[&str]) -> serde_json::Value {
        let out = hippocamp()
            .arg("token")
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn s3_key() -> String {
    std::env::var("HIPPOCAMP_TEST_S3_ACCESS_KEY").unwrap_or_else(|_| "hippocamp".into())
}

fn s3_secret() -> String {
    std::env::var("HIPPOCAMP_TEST_S3_SECRET_KEY").unwrap_or_else(|_| "hippocamp-secret".into())
}

pub struct Server {
    pub child: Child,
    pub base: String,
    pub admin: Option<String>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGKILL: no shutdown of any kind.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
