//! Streaming in bounded memory: a child process puts and gets a 128 MiB
//! artifact as streams on the filesystem store and on a real S3 server
//! (when one is configured, see `hippocamp-artifacts-object`'s tests), and
//! its peak resident memory stays far below the artifact's size. The
//! release figures for 1 GiB come from `hippocamp bench artifacts-stream`.

#![allow(clippy::unwrap_used, clippy::single_match_else)]

use std::process::Command;

const SIZE: u64 = 128 << 20;
/// Peak resident memory allowed to the child (a debug build), MiB.
const LIMIT_MIB: f64 = 64.0;

/// The child side: does nothing unless started by a test below.
#[test]
fn stream_child() {
    let Ok(target) = std::env::var("HIPPOCAMP_STREAM_CHILD") else {
        return;
    };
    let dir = std::env::var("HIPPOCAMP_STREAM_DIR").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let run = rt.block_on(async {
        match target.as_str() {
            "filesystem" => {
                let s = hippocamp_bench::artifacts::fs_store(std::path::Path::new(&dir)).unwrap();
                hippocamp_bench::artifacts::stream(&s, "filesystem", SIZE)
                    .await
                    .unwrap()
            }
            _ => {
                let s3 = hippocamp_testkit::s3_server().unwrap();
                let config = hippocamp_artifacts_object::S3Config {
                    endpoint: Some(s3.endpoint),
                    bucket: s3.bucket,
                    region: "us-east-1".into(),
                    access_key_id: s3.access_key,
                    secret_access_key: s3.secret_key,
                    allow_http: true,
                    virtual_hosted: false,
                    request_timeout_ms: 300_000,
                };
                let options = hippocamp_artifacts_object::ObjectOptions {
                    prefix: format!("stream-test/{}", std::process::id()),
                    max_artifact_bytes: SIZE,
                    ..hippocamp_artifacts_object::ObjectOptions::default()
                };
                let s = hippocamp_artifacts_object::ObjectArtifacts::s3(&config, options)
                    .await
                    .unwrap();
                hippocamp_bench::artifacts::stream(&s, "s3", SIZE)
                    .await
                    .unwrap()
            }
        }
    });
    println!("STREAM {}", serde_json::to_string(&run).unwrap());
}

fn run_child(target: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["stream_child", "--exact", "--nocapture", "--test-threads=1"])
        .env("HIPPOCAMP_STREAM_CHILD", target)
        .env("HIPPOCAMP_STREAM_DIR", dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("STREAM ").map(|(_, j)| j.to_owned()))
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn filesystem_streams_128_mib_in_bounded_memory() {
    let run = run_child("filesystem");
    eprintln!("{run}");
    assert_eq!(run["bytes"], SIZE);
    assert!(run["peak_rss_mib"].as_f64().unwrap() < LIMIT_MIB, "{run}");
}

#[test]
fn s3_streams_128_mib_in_bounded_memory() {
    if hippocamp_testkit::s3_server().is_none() {
        return;
    }
    let run = run_child("s3");
    eprintln!("{run}");
    assert_eq!(run["bytes"], SIZE);
    assert!(run["peak_rss_mib"].as_f64().unwrap() < LIMIT_MIB, "{run}");
}
