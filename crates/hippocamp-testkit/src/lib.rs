//! What a test does when a real service it needs is absent (the shared
//! evaluation data, an S3 server, an embedding server, a browser): it
//! skips with a message saying how to provide it, unless
//! `HIPPOCAMP_REQUIRE_EXTERNAL` is true (`1`, `true` or `yes`; `.ci/run`
//! sets it to 1), under which the skip is a failure. `0`, `false`, `no`
//! or empty mean not required; any other value is refused, so a typo does
//! not silently change what a run proves. One definition, so every test
//! agrees on the rule.

#![forbid(unsafe_code)]

use std::path::PathBuf;

/// Set when every external service must be present.
pub const REQUIRE_EXTERNAL: &str = "HIPPOCAMP_REQUIRE_EXTERNAL";

/// Whether `value` (of `HIPPOCAMP_REQUIRE_EXTERNAL`) requires every
/// external service; `Err` for a value that is neither yes nor no.
pub fn parse_required(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "0" | "false" | "no") => Ok(false),
        Some("1" | "true" | "yes") => Ok(true),
        Some(other) => Err(format!(
            "{REQUIRE_EXTERNAL}={other} is neither 1/true/yes nor 0/false/no"
        )),
    }
}

/// Whether every external service is required.
///
/// # Panics
///
/// When `HIPPOCAMP_REQUIRE_EXTERNAL` has a value that is neither yes nor
/// no.
#[track_caller]
pub fn required() -> bool {
    let v = std::env::var(REQUIRE_EXTERNAL).ok();
    match parse_required(v.as_deref()) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

/// Reports that `what` is missing: fails the calling test when external
/// services are required, else prints that it skips and how to provide
/// it (`hint`).
///
/// # Panics
///
/// When `HIPPOCAMP_REQUIRE_EXTERNAL` is true: that is the failure.
#[track_caller]
pub fn missing(what: &str, hint: &str) {
    assert!(!required(), "{REQUIRE_EXTERNAL} is set but {what}");
    eprintln!("skipping: {what} ({hint})");
}

/// The environment variable `name`, or `None` once reported missing.
#[track_caller]
pub fn env(name: &str, hint: &str) -> Option<String> {
    let value = std::env::var(name).ok();
    if value.is_none() {
        missing(&format!("{name} is not set"), hint);
    }
    value
}

/// The shared evaluation data folder, or `None` once reported missing.
#[track_caller]
pub fn shared_data() -> Option<PathBuf> {
    let dir = hippocamp_datasets::data_dir();
    if dir.is_none() {
        missing(
            "the shared data folder is missing",
            "../shared/data not found and HIPPOCAMP_DATA_DIR not set",
        );
    }
    dir
}

/// The OpenAI-compatible embedding server of the environment: its base
/// URL and model (`HIPPOCAMP_TEST_EMBED_URL`, `HIPPOCAMP_TEST_EMBED_MODEL`).
#[track_caller]
pub fn embed_server() -> Option<(String, String)> {
    let url = env("HIPPOCAMP_TEST_EMBED_URL", "scripts/embed-server.sh start")?;
    let model = std::env::var("HIPPOCAMP_TEST_EMBED_MODEL")
        .unwrap_or_else(|_| "multilingual-e5-small-q4".to_owned());
    Some((url, model))
}

/// The PostgreSQL database of the environment
/// (`HIPPOCAMP_TEST_POSTGRES_URL`, with pgvector installed), or `None` once
/// reported missing.
#[track_caller]
pub fn postgres_url() -> Option<String> {
    env(
        "HIPPOCAMP_TEST_POSTGRES_URL",
        "eval \"$(scripts/postgres.sh start)\" starts one",
    )
}

/// An S3-compatible server named by the environment.
#[derive(Debug, Clone)]
pub struct S3Server {
    /// `HIPPOCAMP_TEST_S3_ENDPOINT`, e.g. `http://127.0.0.1:18014`.
    pub endpoint: String,
    /// `HIPPOCAMP_TEST_S3_BUCKET` (default `hippocamp-test`; it must exist).
    pub bucket: String,
    /// `HIPPOCAMP_TEST_S3_ACCESS_KEY` (default `hippocamp`).
    pub access_key: String,
    /// `HIPPOCAMP_TEST_S3_SECRET_KEY` (default `hippocamp-secret`).
    pub secret_key: String,
}

/// The S3 server of the environment, or `None` once reported missing.
#[track_caller]
pub fn s3_server() -> Option<S3Server> {
    let endpoint = env(
        "HIPPOCAMP_TEST_S3_ENDPOINT",
        "scripts/s3-server.sh starts one",
    )?;
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
    Some(S3Server {
        endpoint,
        bucket: var("HIPPOCAMP_TEST_S3_BUCKET", "hippocamp-test"),
        access_key: var("HIPPOCAMP_TEST_S3_ACCESS_KEY", "hippocamp"),
        secret_key: var("HIPPOCAMP_TEST_S3_SECRET_KEY", "hippocamp-secret"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_yes_requires_and_nonsense_is_refused() {
        for (v, want) in [
            (None, Ok(false)),
            (Some(""), Ok(false)),
            (Some("0"), Ok(false)),
            (Some("false"), Ok(false)),
            (Some("No"), Ok(false)),
            (Some("1"), Ok(true)),
            (Some("TRUE"), Ok(true)),
            (Some("yes"), Ok(true)),
        ] {
            assert_eq!(parse_required(v), want, "{v:?}");
        }
        assert!(parse_required(Some("sometimes")).is_err());
    }
}
