//! `hippocamp chat` end to end: against a scripted OpenAI-compatible
//! server (preload framing, the required first tool call), durable
//! ingestion that survives `kill -9`, and the real small model of
//! `scripts/chat-model.sh` through a recording proxy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_memory::SearchRequest;
use hippocamp_models::scripted::{Reply, Scripted};
use serde_json::Value;

fn hippocamp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hippocamp"))
}

fn remember(dir: &std::path::Path, text: &str) {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(dir)
        .args(["add", "--app", "demo", "--user", "alice", text])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn chat(dir: &std::path::Path, url: &str, extra: &[&str]) -> Command {
    let mut c = hippocamp();
    c.args(["chat", "--data-dir"])
        .arg(dir)
        .args(["--app", "demo", "--user", "alice", "--session", "s1"])
        .args(["--model-url", url, "--model", "m"])
        .args(extra);
    c
}

fn block(body: &Value) -> Option<String> {
    body["messages"].as_array()?.iter().find_map(|m| {
        let t = m["content"].as_str()?;
        t.starts_with("[hippocamp-memory nonce=")
            .then(|| t.to_owned())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_with_preload_and_a_required_first_tool_call() {
    let server = Scripted::start(vec![
        Reply::openai_calls(&[("c1", "load_memory", r#"{"query": "cats"}"#)]),
        Reply::openai_text("You have two cats."),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    remember(&data, "Alice keeps two cats");
    let out = chat(
        &data,
        &server.url("/v1"),
        &[
            "--preload",
            "--tools",
            "load_memory",
            "--first-tool-choice",
            "required",
            "--json",
            "--message",
            "How many cats do I have?",
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(outcome["answer"], "You have two cats.");
    assert_eq!(outcome["model_calls"], 2);
    assert_eq!(outcome["preloaded"], true);
    let seen = server.requests();
    let first = seen[0].json();
    assert!(block(&first).unwrap().contains("Alice keeps two cats"));
    assert_eq!(first["tool_choice"], "required");
    let second = seen[1].json();
    assert!(block(&second).is_none());
    assert_eq!(second["tool_choice"], "auto");
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("Alice keeps two cats")
    );
}

/// The runner reaches memory and sessions through the same gate: with
/// the app suspended, a turn is refused before the model is asked, and no
/// memory is read into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_app_runs_no_turn() {
    let server = Scripted::start(vec![Reply::openai_text("You have two cats.")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    remember(&data, "Alice keeps two cats");
    let config = dir.path().join("suspended.toml");
    std::fs::write(&config, "[policy.apps.demo]\nsuspended = true\n").unwrap();
    let out = chat(
        &data,
        &server.url("/v1"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--preload",
            "--tools",
            "load_memory",
            "--json",
            "--message",
            "How many cats do I have?",
        ],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a turn ran: {err}");
    assert!(err.contains("app_suspended"), "{err}");
    assert!(server.requests().is_empty(), "the model was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_ingestion_is_admitted_before_the_answer_and_survives_kill_9() {
    let server = Scripted::start(vec![Reply::openai_text("Noted.")])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = chat(&data, &server.url("/v1"), &["--ingestion", "durable"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "I moved to Porto last spring").unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "Noted.");
    // The answer is out: the run's events are admitted. Kill it now.
    child.kill().unwrap();
    child.wait().unwrap();

    let mut config = hippocamp_services::Config::default();
    config.data_dir.clone_from(&data);
    let services = hippocamp_services::Services::open(&config).await.unwrap();
    services.start_processor().unwrap();
    let memory = Arc::clone(services.memory_store().unwrap());
    let scope = MemoryScope::parse("demo", "alice").unwrap();
    let started = Instant::now();
    loop {
        let hits = memory
            .search(
                &scope,
                &SearchRequest::new("Porto"),
                &CallOptions::default(),
            )
            .await
            .unwrap()
            .hits;
        if hits.iter().any(|h| h.entry.content.contains("Porto")) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never delivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The session kept both events.
    let s = services
        .sessions
        .get(
            &scope,
            &hippocamp_core::SessionId::new("s1").unwrap(),
            &hippocamp_core::CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(s.events.len(), 2);
    services.stop_processor().await;
}

/// Forwards every POST to `upstream` and records each request and reply.
async fn recording_proxy(
    upstream: String,
) -> (String, Arc<parking_lot::Mutex<Vec<(Value, Value)>>>) {
    let seen: Arc<parking_lot::Mutex<Vec<(Value, Value)>>> = Arc::default();
    let log = Arc::clone(&seen);
    let http = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, body: axum::body::Bytes| {
        let (http, log, upstream) = (http.clone(), Arc::clone(&log), upstream.clone());
        async move {
            let reply = http
                .post(format!(
                    "{upstream}{}",
                    uri.path().trim_start_matches("/v1")
                ))
                .header("content-type", "application/json")
                .body(body.to_vec())
                .send()
                .await
                .unwrap();
            let status = reply.status().as_u16();
            let bytes = reply.bytes().await.unwrap();
            log.lock().push((
                serde_json::from_slice(&body).unwrap_or(Value::Null),
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            ));
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                bytes.to_vec(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_small_model_gets_the_framed_fact_and_calls_load_memory() {
    let Some(url) =
        hippocamp_testkit::env("HIPPOCAMP_TEST_CHAT_URL", "scripts/chat-model.sh start")
    else {
        return;
    };
    let (proxy, seen) = recording_proxy(url).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    remember(
        &data,
        "Alice lives in Lisbon, in a yellow house near the river.",
    );
    let out = chat(
        &data,
        &proxy,
        &[
            "--preload",
            "--tools",
            "load_memory",
            "--first-tool-choice",
            "required",
            "--temperature",
            "0",
            // Room for a `query` at its 256-character bound: the prompt
            // changes with every nonce, and so does what the model writes.
            "--max-output-tokens",
            "400",
            "--json",
            "--message",
            "Where do I live?",
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen = seen.lock().clone();
    for (i, (rq, rp)) in seen.iter().enumerate() {
        eprintln!(
            "--- request {i}\n{}\n--- reply {i}\n{}",
            serde_json::to_string_pretty(rq).unwrap(),
            serde_json::to_string_pretty(rp).unwrap()
        );
    }
    eprintln!("--- outcome\n{outcome}");
    // With preload, the fact reaches the model inside the framed block.
    let first = &seen[0].0;
    let framed = block(first).expect("the first request carries the block");
    assert!(framed.contains("Alice lives in Lisbon"));
    assert_eq!(first["tool_choice"], "required");
    // The model called load_memory, and the hit reached the next request.
    let call = &seen[0].1["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "load_memory");
    let second = &seen[1].0;
    let tool_msg = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_msg["tool_call_id"], call["id"]);
    assert!(
        block(second).is_none(),
        "preload is in the first request only"
    );
    // The run ended with an answer within the bounds.
    assert!(!outcome["answer"].as_str().unwrap().trim().is_empty());
    assert!(outcome["model_calls"].as_u64().unwrap() <= 8);
}
