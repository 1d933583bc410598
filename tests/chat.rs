//! `hippocamp chat` end to end: against a scripted OpenAI-compatible
//! server (preload framing, the required first tool call), durable
//! ingestion that survives `kill -9`, and the real small model of
//! `scripts/chat-model.sh` through a recording proxy.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
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
            // Nothing of the turn is remembered: the search below sees
            // what the tool saw.
            "--ingestion",
            "disabled",
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

    // The result recorded in the session is what a search for the
    // model's own query answers, and it holds the fact whenever that
    // query shares a term with it.
    recorded_is_the_search(
        &data,
        call,
        "Alice lives in Lisbon, in a yellow house near the river.",
    );
}

/// The result the session recorded for `call` (a chat-completions tool
/// call of `load_memory`) equals a search for the query the model sent,
/// and holds `fact` whenever that query shares a term with it.
fn recorded_is_the_search(data: &std::path::Path, call: &Value, fact_text: &str) {
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    let recorded = recorded_result(data, call["id"].as_str().unwrap());
    let query = args["query"].as_str().unwrap();
    let limit = args["limit"].as_u64().unwrap_or(5).to_string();
    let mut search = vec!["search", query, "--limit", &limit];
    let filter = args.get("filter").map(Value::to_string);
    if let Some(f) = &filter {
        search.extend(["--filter", f.as_str()]);
    }
    if let Some(m) = args["mode"].as_str() {
        search.extend(["--mode", m]);
    }
    let searched = memory_json(data, &search);
    let ids = |hits: &Value| -> Vec<String> {
        hits.as_array()
            .unwrap()
            .iter()
            .map(|h| {
                h["id"]
                    .as_str()
                    .or_else(|| h["entry"]["id"].as_str())
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(
        ids(&recorded["hits"]),
        ids(&searched["hits"]),
        "the recorded result is the search for {query:?}"
    );
    let analyzer = hippocamp_search::Analyzer::default();
    let fact = analyzer.terms(fact_text);
    if analyzer.terms(query).iter().any(|t| fact.contains(t)) {
        assert!(
            recorded.to_string().contains(fact_text),
            "{query:?} shares a term with the fact: {recorded}"
        );
    }
}

/// `hippocamp memory … ARGS` on alice's scope, its JSON reply.
fn memory_json(dir: &std::path::Path, args: &[&str]) -> Value {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(dir)
        .arg(args[0])
        .args(["--app", "demo", "--user", "alice"])
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every event of alice's agent sessions, from her export.
fn session_events(dir: &std::path::Path) -> Vec<Value> {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(dir)
        .args(["export", "--app", "demo", "--user", "alice"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "session_events")
        .flat_map(|l| l["events"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The result the session recorded for tool call `id`.
fn recorded_result(dir: &std::path::Path, id: &str) -> Value {
    session_events(dir)
        .iter()
        .flat_map(|e| {
            e["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .find_map(|p| {
            let r = p.get("function_response")?;
            (r["id"] == id).then(|| r["response"].clone())
        })
        .unwrap_or_else(|| panic!("no result recorded for call {id}"))
}

/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Row 107, wiring only: the real small model, offered `load_artifacts`
/// alone with a required first call, names a scoped image; the call is
/// answered in the session, an attachment is recorded as an effect with
/// no bytes in the session, and the image reaches the next request only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_small_model_loads_a_scoped_image_and_only_its_record_is_kept() {
    let Some(url) =
        hippocamp_testkit::env("HIPPOCAMP_TEST_CHAT_URL", "scripts/chat-model.sh start")
    else {
        return;
    };
    let (proxy, seen) = recording_proxy(url).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("photo.png");
    std::fs::write(&file, PNG).unwrap();
    let out = hippocamp()
        .args(["artifacts", "--data-dir"])
        .arg(&data)
        .args(["--app", "demo", "--user", "alice", "put", "photo.png"])
        .arg(&file)
        .args(["--mime-type", "image/png"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = chat(
        &data,
        &proxy,
        &[
            "--tools",
            "load_artifacts",
            "--first-tool-choice",
            "required",
            "--temperature",
            "0",
            "--max-output-tokens",
            "200",
            "--ingestion",
            "disabled",
            "--instruction",
            "The user has one artifact, named photo.png. To attach it, call load_artifacts with {\"artifacts\": [{\"name\": \"photo.png\"}]}.",
            "--json",
            "--message",
            "Attach photo.png",
        ],
    )
    .output()
    .unwrap();
    let seen = seen.lock().clone();
    for (i, (rq, rp)) in seen.iter().enumerate() {
        eprintln!(
            "--- request {i}\n{}\n--- reply {i}\n{}",
            serde_json::to_string_pretty(rq).unwrap(),
            serde_json::to_string_pretty(rp).unwrap()
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- status {:?}\n{stderr}", out.status);
    // Offered alone, required first: the model called it for the image.
    let first = &seen[0].0;
    assert_eq!(first["tool_choice"], "required");
    assert_eq!(first["tools"][0]["function"]["name"], "load_artifacts");
    let call = &seen[0].1["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "load_artifacts");
    // The session answers the call with the version's record...
    let recorded = recorded_result(&data, call["id"].as_str().unwrap());
    assert_eq!(recorded["success"], true, "{recorded}");
    assert_eq!(recorded["attachments"][0]["name"], "photo.png");
    assert_eq!(recorded["attachments"][0]["mime_type"], "image/png");
    // ...and records the attachment as an effect, with no bytes anywhere
    // in the session.
    let events = session_events(&data);
    let effects: Vec<&Value> = events
        .iter()
        .flat_map(|e| {
            e["actions"]["context_effects"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .collect();
    assert!(
        effects.iter().any(|f| f["kind"] == "artifact_attachment"),
        "{effects:?}"
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    let stored = serde_json::to_string(&events).unwrap();
    assert!(
        !stored.contains(&b64),
        "the image's bytes are in the session"
    );
    // The image reaches the next request only (this text-only model then
    // refuses it: wiring, not vision, is what is tested).
    let second = seen[1].0.to_string();
    assert!(second.contains(&b64), "the next request carries the image");
    if out.status.success() {
        for (rq, _) in &seen[2..] {
            assert!(!rq.to_string().contains(&b64));
        }
    } else {
        assert!(stderr.contains("HTTP 500"), "{stderr}");
        assert_eq!(seen.len(), 2);
    }
}
