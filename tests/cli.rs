//! The `hippocamp` binary as users run it.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn data() -> Option<std::path::PathBuf> {
    hippocamp_testkit::shared_data()
}

fn hippocamp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hippocamp"))
}

#[test]
fn eval_locomo_json_has_the_stable_keys() {
    let Some(dir) = data() else { return };
    let out = hippocamp()
        .args(["eval", "locomo", "--json"])
        .arg(dir.join("locomo/locomo-dev.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "recall_at_1",
        "recall_at_5",
        "recall_at_10",
        "recall_at_20",
        "recall_at_50",
        "mrr",
        "ndcg_at_10",
        "isolation_equal",
        "foreign_scope_hits",
        "ingest_events_per_s",
        "search_p50_us",
        "search_p95_us",
        "search_p99_us",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    for cat in ["1", "2", "3", "4", "5"] {
        let c = &v["per_category"][cat];
        assert!(c["questions"].as_u64().unwrap() > 0);
        assert!(c["recall_at_10"].is_f64() && c["mrr"].is_f64());
    }
    assert_eq!(v["isolation_equal"], serde_json::json!(true));
}

#[test]
fn eval_cranfield_json_has_the_stable_keys() {
    let Some(dir) = data() else { return };
    let out = hippocamp()
        .args(["eval", "cranfield", "--json"])
        .arg(dir.join("cranfield"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["ndcg_at_10", "map", "mrr", "queries"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
}

#[test]
fn bad_arguments_are_rejected() {
    let out = hippocamp()
        .args(["eval", "locomo", "x.json", "--bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
    let out = hippocamp()
        .args(["eval", "locomo", "/nonexistent/file.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/file.json"));
    let out = hippocamp()
        .args(["eval", "cranfield", "/nonexistent", "--bm25-k1", "50"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

fn memory(dir: &std::path::Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(dir)
        .args(["--app", "app", "--user", "alice"])
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `memory export` prints JSON Lines: a header, the entries, an end line
/// that counts them.
fn export_prints_json_lines(d: &std::path::Path) {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(d)
        .args(["--app", "app", "--user", "alice", "export"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "export");
    let last = lines.last().unwrap();
    assert_eq!(last["kind"], "end");
    let entries = lines.iter().filter(|l| l["kind"] == "entry").count();
    assert_eq!(last["entries"], entries);
    assert!(entries >= 1);
}

fn export_file(d: &std::path::Path, to: &std::path::Path) -> Vec<serde_json::Value> {
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(d)
        .args(["--app", "app", "--user", "alice", "export"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(to, &out.stdout).unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("exported_at_ms");
            v
        })
        .collect()
}

/// A correction and its history on a data directory, then the user's
/// export restored into another data directory reads back the same, and
/// a second restore writes nothing.
#[test]
fn a_corrected_user_exports_and_restores_into_another_data_directory() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (ok, added, err) = memory(a.path(), &["add", "Alice lives in Lisbon", "--key", "home"]);
    assert!(ok, "{err}");
    let id = added["entry"]["id"].as_str().unwrap().to_owned();
    let (ok, fixed, err) = memory(
        a.path(),
        &[
            "correct",
            &id,
            "Alice lives in Porto",
            "--metadata",
            r#"{"by":"alice"}"#,
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(fixed["entry"]["revision"], 2);
    let (_, history, _) = memory(a.path(), &["history", &id]);
    assert_eq!(history["revisions"][1]["content"], "Alice lives in Lisbon");
    memory(a.path(), &["add", "Alice has a cat"]);
    let file = a.path().join("alice.jsonl");
    let before = export_file(a.path(), &file);
    let (ok, report, err) = memory(b.path(), &["restore", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(report["entries"]["imported"], 2, "{report}");
    let again = b.path().join("again.jsonl");
    // The same, but for the marks of what came from the file: its
    // revisions say they were restored.
    let mut restored = export_file(b.path(), &again);
    for line in &mut restored {
        if let Some(r) = line.get_mut("revision").and_then(|r| r.as_object_mut()) {
            assert_eq!(r.remove("restored"), Some(serde_json::Value::Bool(true)));
        }
    }
    assert_eq!(restored, before);
    let (_, report, _) = memory(b.path(), &["restore", file.to_str().unwrap()]);
    assert_eq!(report["entries"]["existing"], 2, "{report}");
    let (_, got, _) = memory(b.path(), &["get", &id]);
    assert_eq!(
        (got["content"].as_str(), got["revision"].as_u64()),
        (Some("Alice lives in Porto"), Some(2))
    );
    // Into another user: refused, the file is alice's.
    let out = hippocamp()
        .args(["memory", "--data-dir"])
        .arg(b.path())
        .args(["--app", "app", "--user", "bob", "restore"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("scope"));
}

#[test]
#[allow(clippy::too_many_lines)] // one data directory, command by command
fn memory_commands_round_trip_on_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, added, err) = memory(
        d,
        &[
            "add",
            "I adopted a cat named Miso",
            "--metadata",
            r#"{"topic":"pets"}"#,
            "--key",
            "cat",
        ],
    );
    assert!(ok, "{err}");
    let id = added["entry"]["id"].as_str().unwrap().to_owned();
    assert_eq!(added["duplicate"], serde_json::json!(false));
    let (_, again, _) = memory(
        d,
        &[
            "add",
            "I adopted a cat named Miso",
            "--metadata",
            r#"{"topic":"pets"}"#,
            "--key",
            "cat",
        ],
    );
    assert_eq!(again["duplicate"], serde_json::json!(true));
    let (ok, got, _) = memory(d, &["get", &id]);
    assert!(ok);
    assert_eq!(got["content"], "I adopted a cat named Miso");
    let (ok, found, _) = memory(
        d,
        &[
            "search",
            "what is the cat called",
            "--filter",
            r#"{"topic":"pets"}"#,
        ],
    );
    assert!(ok);
    assert_eq!(found["hits"][0]["id"], id.as_str());
    let events = d.join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"id":"e1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"I love hiking"}]}}"#, "\n",
            "not json\n",
            r#"{"id":"e2","author":"tool","timestamp_ms":2,"content":{"role":"user","parts":[{"text":"tool output"}]}}"#, "\n",
            r#"{"id":"e3","author":5}"#, "\n",
        ),
    )
    .unwrap();
    let (ok, report, err) = memory(d, &["import", events.to_str().unwrap(), "--session", "s1"]);
    assert!(ok, "{err}");
    assert_eq!(report["added"], 1);
    assert_eq!(report["skipped"], 3);
    assert_eq!(report["skipped_by_reason"]["not_json"], 1);
    // Each skip is named by its line and reason, in the report and on
    // standard error.
    let lines: Vec<_> = report["skips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["line"].as_u64().unwrap(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (2, "not_json".to_owned()),
            (3, "control_author".to_owned()),
            (4, "malformed".to_owned())
        ],
        "{report}"
    );
    assert_eq!(report["skips"][1]["event_id"], "e2");
    assert!(
        err.contains("line 3 (event e2): skipped, control_author"),
        "{err}"
    );
    let (_, report, _) = memory(d, &["import", events.to_str().unwrap(), "--session", "s1"]);
    assert_eq!(
        (report["added"].as_u64(), report["duplicates"].as_u64()),
        (Some(0), Some(1))
    );
    export_prints_json_lines(d);
    // Without a terminal, a whole-scope erasure needs --yes.
    let (ok, _, err) = memory(d, &["delete-session", "s1"]);
    assert!(!ok && err.contains("--yes"), "{err}");
    let (ok, n, _) = memory(d, &["delete-session", "s1", "--yes"]);
    assert!(ok);
    assert_eq!(n["deleted"], 1);
    let (_, n, _) = memory(d, &["delete", &id]);
    assert_eq!(n["deleted"], 1);
    let (_, n, _) = memory(d, &["delete", &id]);
    assert_eq!(n["deleted"], 0);
    let (ok, _, err) = memory(d, &["delete-user"]);
    assert!(!ok && err.contains("confirmation required"), "{err}");
    let (_, n, _) = memory(d, &["delete-user", "--yes"]);
    assert_eq!(
        (
            n["deleted"].as_u64(),
            n["epoch"].as_u64(),
            n["sessions"].as_u64()
        ),
        (Some(0), Some(1), Some(0))
    );
    // The erasures are in the audit log, with the command line as caller.
    let out = hippocamp()
        .args(["audit", "--data-dir"])
        .arg(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let audit: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let erasures: Vec<&serde_json::Value> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["event"] == "erasure" && r["caller"] == "cli")
        .collect();
    assert!(erasures.iter().any(|r| r["target"] == "user"), "{audit}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Miso"));
    // Bad input: a clear error and a non-zero exit, nothing else.
    let (ok, _, err) = memory(d, &["get", "not-an-id"]);
    assert!(!ok);
    assert!(err.contains("entry_id"), "{err}");
    let (ok, _, err) = memory(d, &["search", "x", "--filter", "[1]"]);
    assert!(!ok);
    assert!(err.contains("JSON object"), "{err}");
}

#[test]
fn a_locked_data_directory_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let _held = hippocamp_memory_redb::RedbMemoryStore::open(
        dir.path().join("memory"),
        hippocamp_memory::MemoryConfig::default(),
    )
    .unwrap();
    let (ok, _, err) = memory(dir.path(), &["search", "anything"]);
    assert!(!ok);
    assert!(err.contains("in use by another process"), "{err}");
}

/// Real google-adk 2.13 exports import as they are, in both casings; a
/// file of which nothing is remembered is an error.
#[test]
fn adk_exports_import_without_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/adk");
    let import = |file: &str| {
        let path = fixtures.join(file);
        memory(
            d,
            &["import", path.to_str().unwrap(), "--session", "sess-7f3c2a"],
        )
    };
    let (ok, report, err) = import("events-snake.jsonl");
    assert!(ok, "{err}");
    assert_eq!(
        (report["added"].as_u64(), report["skipped"].as_u64()),
        (Some(6), Some(5))
    );
    assert_eq!(report["skipped_by_reason"]["no_text"], 4);
    assert_eq!(report["skipped_by_reason"]["partial"], 1);
    // The same session as api_server sends it: the same six entries.
    let (ok, report, err) = import("events-camel.jsonl");
    assert!(ok, "{err}");
    assert_eq!(
        (report["added"].as_u64(), report["duplicates"].as_u64()),
        (Some(0), Some(6))
    );
    let (_, found, _) = memory(d, &["search", "what was the confirmation code?"]);
    assert!(
        found["hits"][0]["content"]
            .as_str()
            .unwrap()
            .contains("LX7Q2P")
    );
    // Nothing rememberable: a non-zero exit that says why.
    let only_skipped = d.join("skipped.jsonl");
    std::fs::write(
        &only_skipped,
        concat!(
            r#"{"id":"x1","author":"tool","timestamp":1.5,"content":{"parts":[{"text":"tool output"}]}}"#,
            "\n",
            r#"{"not":"an event"}"#,
            "\n",
        ),
    )
    .unwrap();
    let (ok, _, err) = memory(
        d,
        &["import", only_skipped.to_str().unwrap(), "--session", "s2"],
    );
    assert!(!ok);
    assert!(
        err.contains("no event") && err.contains("control_author"),
        "{err}"
    );
}

#[test]
fn eval_on_the_durable_store_matches_the_in_memory_store() {
    let Some(data) = data() else { return };
    let run = |store: &str, more: &[&str]| -> serde_json::Value {
        let out = hippocamp()
            .args(["eval", "locomo", "--json", "--store", store])
            .args(more)
            .arg(data.join("locomo/locomo-dev.json"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let (mem_q, durable_q) = (
        dir.path().join("mem.jsonl"),
        dir.path().join("durable.jsonl"),
    );
    let mem = run("memory", &["--per-question", mem_q.to_str().unwrap()]);
    // Without the isolation check, which then reports null (not checked).
    let durable = run(
        "durable",
        &[
            "--no-isolation",
            "--per-question",
            durable_q.to_str().unwrap(),
        ],
    );
    assert_eq!(mem["isolation_equal"], serde_json::json!(true));
    assert!(durable["isolation_equal"].is_null());
    for key in [
        "recall_at_1",
        "recall_at_5",
        "recall_at_10",
        "recall_at_20",
        "recall_at_50",
        "mrr",
        "ndcg_at_10",
        "hit_at_10",
        "session_hit_at_10",
        "per_category",
        "foreign_scope_hits",
    ] {
        assert_eq!(mem[key], durable[key], "{key}");
    }
    // Paired question by question: no difference, an interval of [0, 0],
    // so not a stage to keep.
    let out = hippocamp()
        .args(["eval", "compare", "--json", "--resamples", "200"])
        .arg(&mem_q)
        .arg(&durable_q)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["questions"], mem["questions"], "{c}");
    assert_eq!(
        (
            c["diff"].as_f64(),
            c["ci_low"].as_f64(),
            c["ci_high"].as_f64()
        ),
        (Some(0.0), Some(0.0), Some(0.0)),
        "{c}"
    );
    assert_eq!(c["new"], mem["hit_at_10"], "{c}");
}

fn artifacts(dir: &std::path::Path, args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = hippocamp()
        .args(["artifacts", "--data-dir"])
        .arg(dir)
        .args(["--app", "app", "--user", "alice"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn artifact_commands_round_trip_on_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("report.txt");
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &body).unwrap();
    let f = file.to_str().unwrap();
    let (ok, out, err) = artifacts(
        d,
        &[
            "put",
            "reports/q3.txt",
            f,
            "--mime-type",
            "text/plain",
            "--metadata",
            r#"{"quarter":3}"#,
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(json(&out)["version"], 1);
    let (ok, out, err) = artifacts(d, &["put", "reports/q3.txt", f]);
    assert!(ok, "{err}");
    assert_eq!(json(&out)["version"], 2);

    let (ok, out, _) = artifacts(d, &["head", "reports/q3.txt", "--version", "1"]);
    assert!(ok);
    let head = json(&out);
    assert_eq!(head["size"], 300_000);
    assert_eq!(head["mime_type"], "text/plain");
    assert_eq!(head["metadata"]["quarter"], 3);

    let (ok, out, _) = artifacts(d, &["ls"]);
    assert!(ok);
    assert_eq!(json(&out)["items"], serde_json::json!(["reports/q3.txt"]));
    let (ok, out, _) = artifacts(d, &["versions", "reports/q3.txt"]);
    assert!(ok);
    assert_eq!(json(&out)["items"].as_array().unwrap().len(), 2);

    let copy = d.join("copy.bin");
    let (ok, _, err) = artifacts(
        d,
        &["get", "reports/q3.txt", "--out", copy.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&copy).unwrap(), body);
    let (ok, out, err) = artifacts(
        d,
        &[
            "get",
            "reports/q3.txt",
            "--version",
            "1",
            "--offset",
            "1000",
            "--length",
            "5",
            "--out",
            "-",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out, &body[1000..1005]);

    let (ok, _, err) = artifacts(d, &["rm", "reports/q3.txt"]);
    assert!(!ok && err.contains("--version"), "{err}");
    let (ok, out, _) = artifacts(d, &["rm", "reports/q3.txt", "--version", "1"]);
    assert!(ok);
    assert_eq!(json(&out)["removed"], serde_json::json!([1]));
    let (ok, out, _) = artifacts(d, &["rm", "reports/q3.txt", "--all"]);
    assert!(ok);
    assert_eq!(json(&out)["removed"], serde_json::json!([2]));
    let (ok, _, err) = artifacts(d, &["head", "reports/q3.txt"]);
    assert!(!ok);
    assert!(err.to_lowercase().contains("not found"), "{err}");
    // Versions are never reused.
    let (_, out, _) = artifacts(d, &["put", "reports/q3.txt", f]);
    assert_eq!(json(&out)["version"], 3);

    let (ok, out, err) = artifacts(d, &["repair", "--min-age-ms", "0"]);
    assert!(ok, "{err}");
    let report = json(&out);
    assert_eq!(report["corrupt_count"], 0);
    assert!(report["referenced"].as_u64().unwrap() >= 1);

    // Bad input: a clear error and a non-zero exit.
    let (ok, _, err) = artifacts(d, &["put", "a/../b", f]);
    assert!(!ok);
    assert!(err.contains(".."), "{err}");
    let (ok, _, err) = artifacts(d, &["get", "x", "--offset", "1", "--out", "-"]);
    assert!(!ok);
    assert!(err.contains("length"), "{err}");
}

#[test]
fn tokens_are_created_listed_and_revoked_on_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let out = hippocamp()
            .args(["token", "--data-dir", d])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .unwrap_or(serde_json::Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, made, err) = run(&[
        "create",
        "--app",
        "shop",
        "--user",
        "alice",
        "--permissions",
        "memory:read,artifacts:read",
        "--label",
        "agent",
    ]);
    assert!(ok, "{err}");
    let secret = made["token"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("hct_"));
    let id = made["record"]["id"].as_str().unwrap().to_owned();
    let (_, listed, _) = run(&["list"]);
    let text = listed.to_string();
    assert!(text.contains(&id) && !text.contains(&secret), "{text}");
    let stored = std::fs::read_to_string(dir.path().join("tokens.json")).unwrap();
    assert!(!stored.contains(&secret));
    let (_, revoked, _) = run(&["revoke", &id]);
    assert_eq!(revoked["revoked"], true);
    let (_, listed, _) = run(&["list"]);
    assert_eq!(listed["tokens"], serde_json::json!([]));
    // Revoking it again (or a typo) revokes nothing, and says so.
    let (ok, _, err) = run(&["revoke", &id]);
    assert!(!ok && err.contains("nothing was revoked"), "{err}");
    // A token that expires: its record says when; a bad lifetime is
    // refused, naming the form.
    let (ok, made, err) = run(&[
        "create",
        "--app",
        "shop",
        "--permissions",
        "memory:read",
        "--expires-in",
        "12h",
    ]);
    assert!(ok, "{err}");
    let created = made["record"]["created_at_ms"].as_u64().unwrap();
    let expires = made["record"]["expires_at_ms"].as_u64().unwrap();
    assert_eq!(expires - created, 12 * 3_600_000, "{made}");
    for bad in ["soon", "0s", "20000d"] {
        let (ok, _, err) = run(&[
            "create",
            "--app",
            "shop",
            "--permissions",
            "memory:read",
            "--expires-in",
            bad,
        ]);
        assert!(!ok && err.contains("--expires-in"), "{bad}: {err}");
    }
    let (ok, _, err) = run(&["create", "--app", "shop", "--permissions", "memory:fly"]);
    assert!(!ok);
    assert!(err.contains("unknown permission `memory:fly`"), "{err}");
    // A token for every application is never made by omission.
    let (ok, _, err) = run(&["create", "--permissions", "memory:read"]);
    assert!(!ok);
    assert!(err.contains("--app") && err.contains("--all-apps"), "{err}");
    let (ok, _, err) = run(&["create", "--all-apps", "--permissions", "memory:read"]);
    assert!(!ok);
    assert!(err.contains("admin"), "{err}");
    let (ok, made, err) = run(&["create", "--all-apps", "--permissions", "admin"]);
    assert!(ok, "{err}");
    assert!(made["record"]["grant"]["app"].is_null());
    let (_, listed, _) = run(&["list"]);
    // The admin token and the one that expires in 12 hours.
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 2);
    let help = hippocamp()
        .args(["token", "create", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--all-apps") && !help.contains("--admin"),
        "{help}"
    );
}

#[test]
fn config_check_names_an_unknown_key_and_its_nearest_valid_one() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "profile = \"ephemeral\"\n[http]\nmax_concurrent_requests = 64\n",
    )
    .unwrap();
    let out = hippocamp()
        .args(["config", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["http"]["max_concurrent_requests"], 64);
    assert_eq!(v["config"]["memory_router"]["max_active_scopes"], 1024);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[memory_router]\nmax_active_scope = 5\n").unwrap();
    let out = hippocamp()
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "unknown key `memory_router.max_active_scope` (did you mean `max_active_scopes`?)"
        ),
        "{err}"
    );
}

#[test]
fn serve_prints_its_address_and_admin_token_and_answers() {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let dir = tempfile::tempdir().unwrap();
    let mut child = hippocamp()
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first.rsplit("http://").next().unwrap().to_owned();
    assert!(first.contains("durable profile"), "{first}");
    let token = lines
        .by_ref()
        .map(Result::unwrap)
        .find_map(|l| {
            l.strip_prefix("admin token (shown once, stored hashed): ")
                .map(str::to_owned)
        })
        .unwrap();
    // A plain HTTP/1.1 request, no client library needed.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "GET /v1/memory/capabilities HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    // SIGTERM: a graceful stop.
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(lines.map(Result::unwrap).any(|l| l == "stopped"));
}

/// The server logs one line a request (method, route, status, latency and
/// the scope's hash) and never the scope's names or the content.
#[test]
fn serve_logs_each_request_by_route_and_scope_hash_only() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let (mut child, server, token) = spawn_server_with(
        &dir.path().join("data"),
        std::fs::File::create(&log).unwrap().into(),
    );
    let out = hippocamp()
        .args(["memory", "add", "the zanzibar password hint"])
        .args(["--server", &server, "--token", &token])
        .args(["--app", "secretshop", "--user", "alice-private"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The line is written before the reply is sent.
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("route=/v1/apps/{app}/users/{user}/memory/entries"))
        .unwrap_or_else(|| panic!("no request line in {text}"));
    assert!(
        line.contains("method=POST") && line.contains("status=201"),
        "{line}"
    );
    assert!(line.contains("latency_us="), "{line}");
    let hash = line.split("scope=").nth(1).unwrap_or_default();
    assert!(
        hash.len() >= 16 && hash[..16].bytes().all(|b| b.is_ascii_hexdigit()),
        "{line}"
    );
    for secret in ["secretshop", "alice-private", "zanzibar"] {
        assert!(!text.contains(secret), "{secret} logged: {text}");
    }
}

/// A `hippocamp serve` child on a free port; its address and admin token.
fn spawn_server(dir: &std::path::Path) -> (std::process::Child, String, String) {
    spawn_server_with(dir, std::process::Stdio::inherit())
}

/// [`spawn_server`] with its log (stderr, at the default level) sent to
/// `stderr`.
fn spawn_server_with(
    dir: &std::path::Path,
    stderr: std::process::Stdio,
) -> (std::process::Child, String, String) {
    use std::io::{BufRead as _, BufReader};
    let mut child = hippocamp()
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first.rsplit("http://").next().unwrap().to_owned();
    let token = lines
        .map(Result::unwrap)
        .find_map(|l| {
            l.strip_prefix("admin token (shown once, stored hashed): ")
                .map(str::to_owned)
        })
        .unwrap();
    (child, format!("http://{addr}"), token)
}

#[test]
#[allow(clippy::too_many_lines)] // one session against one server, step by step
fn memory_and_artifact_commands_work_against_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, server, token) = spawn_server(&dir.path().join("data"));
    let run = |args: &[&str]| {
        let out = hippocamp()
            .args(args)
            .args([
                "--server", &server, "--token", &token, "--app", "shop", "--user", "alice",
            ])
            .output()
            .unwrap();
        (
            out.status.success(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let v = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
    let (ok, out, err) = run(&["memory", "add", "Alice likes jazz", "--key", "music"]);
    assert!(ok, "{err}");
    let id = v(&out)["entry"]["id"].as_str().unwrap().to_owned();
    let events = dir.path().join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"id":"e1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"I play the saxophone"}]}}"#, "\n",
            "not json\n",
        ),
    )
    .unwrap();
    let (ok, out, err) = run(&[
        "memory",
        "import",
        events.to_str().unwrap(),
        "--session",
        "s1",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        (v(&out)["added"].clone(), v(&out)["skipped"].clone()),
        (serde_json::json!(1), serde_json::json!(1))
    );
    let (_, out, _) = run(&["memory", "search", "saxophone"]);
    assert!(
        v(&out)["hits"][0]["content"]
            .as_str()
            .unwrap()
            .contains("saxophone")
    );
    let (_, out, _) = run(&["memory", "get", &id]);
    assert_eq!(v(&out)["content"], "Alice likes jazz");
    let (ok, out, err) = run(&["memory", "correct", &id, "Alice likes bebop"]);
    assert!(ok, "{err}");
    assert_eq!(v(&out)["entry"]["revision"], 2);
    let (_, out, _) = run(&["memory", "history", &id]);
    assert_eq!(v(&out)["revisions"][1]["content"], "Alice likes jazz");
    let (ok, exported, err) = run(&["memory", "export"]);
    assert!(ok, "{err}");
    let file = dir.path().join("alice.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let (ok, out, err) = run(&["memory", "restore", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(
        v(&out)["entries"]["existing"],
        2,
        "{}",
        String::from_utf8_lossy(&out)
    );
    let (ok, _, err) = run(&["memory", "get", "mem-bad"]);
    assert!(!ok && err.contains("invalid_argument"), "{err}");

    let file = dir.path().join("song.txt");
    std::fs::write(&file, "la la la").unwrap();
    let (ok, out, err) = run(&[
        "artifacts",
        "put",
        "songs/a b.txt",
        file.to_str().unwrap(),
        "--mime-type",
        "text/plain",
    ]);
    assert!(ok, "{err}");
    assert_eq!(v(&out)["version"], 1);
    let copy = dir.path().join("copy.txt");
    let (ok, _, err) = run(&[
        "artifacts",
        "get",
        "songs/a b.txt",
        "--out",
        copy.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "la la la");
    let (ok, out, _) = run(&[
        "artifacts",
        "get",
        "songs/a b.txt",
        "--offset",
        "3",
        "--length",
        "2",
        "--out",
        "-",
    ]);
    assert!(ok);
    assert_eq!(out, b"la");
    let (_, out, _) = run(&["artifacts", "ls"]);
    assert_eq!(v(&out)["items"], serde_json::json!(["songs/a b.txt"]));
    let (_, out, _) = run(&["artifacts", "versions", "songs/a b.txt"]);
    assert_eq!(v(&out)["items"][0]["size"], 8);
    let (_, out, _) = run(&["artifacts", "rm", "songs/a b.txt", "--all"]);
    assert_eq!(v(&out)["removed"], serde_json::json!([1]));
    // A memory file put from the command line is indexed as the server
    // indexes it, and its index goes with it.
    let (ok, _, err) = run(&[
        "artifacts",
        "put",
        ".memories/song.md",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let (_, out, _) = run(&["memory", "search", "la"]);
    assert_eq!(
        v(&out)["hits"][0]["origin"],
        "file",
        "{}",
        String::from_utf8_lossy(&out)
    );
    let (_, out, _) = run(&["artifacts", "rm", ".memories/song.md", "--all"]);
    assert_eq!(v(&out)["removed"], serde_json::json!([1]));
    let (_, out, _) = run(&["memory", "search", "la"]);
    assert_eq!(v(&out)["hits"], serde_json::json!([]));
    let (_, out, _) = run(&["memory", "delete-user", "--yes"]);
    assert_eq!(v(&out)["deleted"], 2);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn memory_commands_embed_with_an_embedder_on_a_data_directory() {
    let Some((url, model)) = hippocamp_testkit::embed_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("http:{url}");
    let with = [
        "--embedder",
        spec.as_str(),
        "--embedder-model",
        model.as_str(),
    ];
    let run = |args: &[&str], embed: bool| {
        let mut cmd = hippocamp();
        cmd.args(["memory", "--data-dir"])
            .arg(dir.path())
            .args(["--app", "app", "--user", "alice"]);
        if embed {
            cmd.args(with);
        }
        let out = cmd.args(args).output().unwrap();
        (
            out.status.success(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for text in ["My daughter plays the violin", "I drive a red pickup truck"] {
        let (ok, _, err) = run(&["add", text], true);
        assert!(ok, "{err}");
    }
    let (ok, found, err) = run(
        &[
            "search",
            "musical instrument of her child",
            "--mode",
            "vector",
        ],
        true,
    );
    assert!(ok, "{err}");
    assert_eq!(found["hits"][0]["content"], "My daughter plays the violin");
    assert_eq!(found["hits"][0]["score_type"], "vector");
    let (ok, _, err) = run(&["search", "violin", "--mode", "vector"], false);
    assert!(!ok && err.contains("needs an embedder"), "{err}");
    let (ok, _, err) = run(&["search", "violin", "--mode", "fuzzy"], true);
    assert!(!ok && err.contains("lexical, vector or hybrid"), "{err}");
}

fn outbox(dir: &std::path::Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let out = hippocamp()
        .args(["outbox", "--data-dir"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_async_ingest_queues_and_the_outbox_commands_deliver_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = d.join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"id":"e1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"I grow tomatoes on the balcony"}]}}"#, "\n",
            "not json\n",
            // A secret in an event id cannot be redacted: refused.
            r#"{"id":"ghp_abcdefghijklmnopqrstuvwxyz0123456789","author":"user","timestamp_ms":2,"content":{"role":"user","parts":[{"text":"a turn"}]}}"#, "\n",
        ),
    )
    .unwrap();
    let (ok, queued, err) = memory(
        d,
        &[
            "ingest",
            events.to_str().unwrap(),
            "--session",
            "s1",
            "--async",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(queued["new_events"], 1, "{queued}");
    assert_eq!(queued["skipped"], 2, "{queued}");
    assert_eq!(queued["skipped_by_reason"]["not_json"], 1, "{queued}");
    assert_eq!(queued["skips"][1]["line"], 3, "{queued}");
    assert_eq!(
        queued["skips"][1]["reason"], "sensitive_content",
        "{queued}"
    );
    assert!(err.contains("line 2: skipped, not_json"), "{err}");
    let job = queued["jobs"][0]["id"].as_str().unwrap().to_owned();
    // Queued, not delivered: nothing to find yet.
    let (_, found, _) = memory(d, &["search", "tomatoes"]);
    assert_eq!(found["hits"], serde_json::json!([]));
    let (ok, stats, err) = outbox(d, &["stats"]);
    assert!(ok, "{err}");
    assert_eq!(
        (stats["pending"].as_u64(), stats["admitted_total"].as_u64()),
        (Some(1), Some(1))
    );
    let (ok, status, _) = outbox(d, &["status", "--app", "app", "--user", "alice", &job]);
    assert!(ok);
    assert_eq!(status["state"], "pending");
    // Another user's job is not found.
    let (ok, _, err) = outbox(d, &["status", "--app", "app", "--user", "bob", &job]);
    assert!(!ok && err.contains("not found"), "{err}");

    let (ok, stats, err) = outbox(d, &["drain"]);
    assert!(ok, "{err}");
    assert_eq!(
        (stats["pending"].as_u64(), stats["succeeded"].as_u64()),
        (Some(0), Some(1))
    );
    let (_, found, _) = memory(d, &["search", "tomatoes"]);
    assert_eq!(
        found["hits"][0]["content"],
        "I grow tomatoes on the balcony"
    );
    let (_, status, _) = outbox(d, &["status", "--app", "app", "--user", "alice", &job]);
    assert_eq!(
        (status["state"].clone(), status["delivered_events"].clone()),
        (serde_json::json!("succeeded"), serde_json::json!(1))
    );

    // The same file again: nothing new, so nothing was queued.
    let (ok, again, _) = memory(
        d,
        &[
            "ingest",
            events.to_str().unwrap(),
            "--session",
            "s1",
            "--async",
        ],
    );
    assert!(ok);
    assert_eq!(again["new_events"], 0);
    // Cancel and prune: a finished job is left as it is; nothing is old
    // enough to prune.
    let (ok, after, err) = outbox(d, &["cancel", "--app", "app", "--user", "alice", &job]);
    assert!(ok, "{err}");
    assert_eq!(after["state"], "succeeded");
    // A file with no event to store is an error, not an empty success.
    let junk = d.join("junk.jsonl");
    std::fs::write(&junk, "not json\n{\"id\": 5}\n").unwrap();
    let (ok, _, err) = memory(
        d,
        &[
            "ingest",
            junk.to_str().unwrap(),
            "--session",
            "s9",
            "--async",
        ],
    );
    assert!(!ok && err.contains("every line was skipped"), "{err}");
    let (ok, pruned, err) = outbox(d, &["prune", "--limit", "5"]);
    assert!(ok, "{err}");
    assert_eq!(pruned["pruned"], 0);
    let (ok, _, err) = outbox(d, &["prune", "--limt", "5"]);
    assert!(!ok && err.contains("--limt"), "{err}");
    // A finished job's status can be deleted, once.
    let (ok, deleted, err) = outbox(d, &["delete", "--app", "app", "--user", "alice", &job]);
    assert!(ok, "{err}");
    assert_eq!(deleted["deleted"], job.as_str());
    let (ok, _, err) = outbox(d, &["status", "--app", "app", "--user", "alice", &job]);
    assert!(!ok && err.contains("not found"), "{err}");
}

#[test]
fn an_async_ingest_through_a_server_is_delivered_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, server, token) = spawn_server(&dir.path().join("data"));
    let run = |args: &[&str]| {
        let out = hippocamp()
            .args(args)
            .args([
                "--server", &server, "--token", &token, "--app", "shop", "--user", "alice",
            ])
            .output()
            .unwrap();
        (
            out.status.success(),
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let v = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
    // Queued through the server's outbox; the server delivers it.
    let queued = dir.path().join("queued.jsonl");
    std::fs::write(
        &queued,
        concat!(r#"{"id":"q1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"I restore old clocks"}]}}"#, "\n"),
    )
    .unwrap();
    let (ok, out, err) = run(&[
        "memory",
        "ingest",
        queued.to_str().unwrap(),
        "--session",
        "s2",
        "--async",
    ]);
    assert!(ok, "{err}");
    assert_eq!(v(&out)["new_events"], 1);
    let job = v(&out)["jobs"][0]["id"].as_str().unwrap().to_owned();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (ok, out, err) = run(&["outbox", "status", &job]);
        assert!(ok, "{err}");
        if v(&out)["state"] == "succeeded" {
            break;
        }
        assert!(std::time::Instant::now() < until, "{}", v(&out));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (_, out, _) = run(&["memory", "search", "clocks"]);
    assert_eq!(v(&out)["hits"][0]["content"], "I restore old clocks");
    // The operator's commands take no scope.
    let operator = |args: &[&str]| {
        hippocamp()
            .args(args)
            .args(["--server", &server, "--token", &token])
            .output()
            .unwrap()
    };
    let out = operator(&["outbox", "stats"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v(&out.stdout)["succeeded"], 1);
    let out = operator(&["outbox", "drain"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("delivers on its own"),
        "{err}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The command line reaches the data through the same gate: with the app
/// suspended in the configuration, every memory and artifact command on
/// it is refused and changes nothing.
#[test]
fn a_suspended_app_is_refused_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ok, added, err) = memory(d, &["add", "I adopted a cat named Miso"]);
    assert!(ok, "{err}");
    let id = added["entry"]["id"].as_str().unwrap().to_owned();
    let file = d.join("a.txt");
    std::fs::write(&file, b"bytes").unwrap();
    let f = file.to_str().unwrap();
    let (ok, _, err) = artifacts(d, &["put", "a.txt", f]);
    assert!(ok, "{err}");
    let config = d.join("suspended.toml");
    std::fs::write(&config, "[policy.apps.app]\nsuspended = true\n").unwrap();
    let c = config.to_str().unwrap();
    let out_path = d.join("out.txt");
    let out_file = out_path.to_str().unwrap();
    let refused = |what: &str, out: std::process::Output| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} ran: {err}");
        assert!(err.contains("app_suspended"), "{what}: {err}");
    };
    for args in [
        vec!["add", "another fact"],
        vec!["get", &id],
        vec!["search", "cat"],
        vec!["correct", &id, "a dog"],
        vec!["history", &id],
        vec!["delete", &id],
        vec!["delete-session", "s1", "--yes"],
        vec!["delete-user", "--yes"],
        vec!["export"],
        vec!["consolidate"],
        vec!["revert", "run-00000000000000000000000000000000"],
        vec!["lineage", &id],
    ] {
        let out = hippocamp()
            .args(["memory", "--config", c, "--data-dir"])
            .arg(d)
            .args(["--app", "app", "--user", "alice"])
            .args(&args)
            .output()
            .unwrap();
        refused(args[0], out);
    }
    for args in [
        vec!["put", "b.txt", f],
        vec!["get", "a.txt", "--out", out_file],
        vec!["head", "a.txt"],
        vec!["ls"],
        vec!["versions", "a.txt"],
        vec!["rm", "a.txt", "--all"],
    ] {
        let out = hippocamp()
            .args(["artifacts", "--config", c, "--data-dir"])
            .arg(d)
            .args(["--app", "app", "--user", "alice"])
            .args(&args)
            .output()
            .unwrap();
        refused(args[0], out);
    }
    // Lifted: everything is as it was.
    let (ok, got, err) = memory(d, &["get", &id]);
    assert!(ok, "{err}");
    assert_eq!(got["content"], "I adopted a cat named Miso");
    let (ok, out, _) = artifacts(d, &["versions", "a.txt"]);
    assert!(ok);
    assert_eq!(json(&out)["items"].as_array().unwrap().len(), 1);
    let (_, found, _) = memory(d, &["search", "cat"]);
    assert_eq!(found["hits"].as_array().unwrap().len(), 1, "{found}");
}

/// Event ids are unique per user: `e1` again in another session, the same
/// text and time, is queued and then skipped at delivery, and the job's
/// status says which event and why (issue 41, item 7).
#[test]
fn a_reused_event_id_is_skipped_at_delivery_and_the_job_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let events = d.join("events.jsonl");
    std::fs::write(
        &events,
        concat!(
            r#"{"id":"e1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"I grow tomatoes"}]}}"#, "\n",
        ),
    )
    .unwrap();
    // The same file into two sessions: delivered in the first, then
    // queued and skipped in the second.
    let ingest = |session: &str| {
        let (ok, queued, err) = memory(
            d,
            &[
                "ingest",
                events.to_str().unwrap(),
                "--session",
                session,
                "--async",
            ],
        );
        assert!(ok, "{err}");
        let (ok, _, err) = outbox(d, &["drain"]);
        assert!(ok, "{err}");
        queued
    };
    ingest("s1");
    let queued = ingest("s2");
    let job2 = queued["jobs"][0]["id"].as_str().unwrap().to_owned();
    let (_, status, _) = outbox(d, &["status", "--app", "app", "--user", "alice", &job2]);
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(
        status["skips"]["by_reason"]["idempotency_conflict"], 1,
        "{status}"
    );
    let skip = &status["skips"]["events"][0];
    // Its position in the job, not its id (the status outlives an
    // erasure of the user until it is pruned).
    assert_eq!(
        (skip["index"].as_u64(), skip["event_id"].as_str()),
        (Some(0), None)
    );
    assert!(
        skip["detail"].as_str().unwrap().contains("unique per user"),
        "{status}"
    );
}

/// Help and refusals match what the commands do (issue 41, item 14):
/// `memory` and `artifacts` work on a data directory or a server, `ingest`
/// is listed, `artifacts repair` refuses a server however it is named,
/// and a token made in an `ephemeral` server's directory comes with a
/// warning that the server will not see it.
#[test]
fn help_and_refusals_say_what_the_commands_do() {
    use std::io::{BufRead as _, BufReader};
    let help = |args: &[&str]| {
        let out = hippocamp().args(args).arg("--help").output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&[]);
    for line in [
        "Memory operations on a data directory, or on a running server",
        "Artifact operations on a data directory, or on a running server",
    ] {
        assert!(top.contains(line), "{top}");
    }
    let memory = help(&["memory"]);
    assert!(memory.contains("[alias: ingest]"), "{memory}");
    assert!(!memory.contains("HIPPOCAMP_SERVER="), "{memory}");
    let dir = tempfile::tempdir().unwrap();
    let out = hippocamp()
        .args(["artifacts", "repair", "--data-dir"])
        .arg(dir.path())
        .env("HIPPOCAMP_SERVER", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("repair works on a data directory, not a server"),
        "{err}"
    );
    // An ephemeral server marks its directory; a token made there warns.
    let data = dir.path().join("eph");
    let config = dir.path().join("eph.toml");
    std::fs::write(&config, "profile = \"ephemeral\"\n").unwrap();
    let mut child = hippocamp()
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("ephemeral profile listening"), "{first}");
    std::thread::spawn(move || for _ in lines {});
    // The marker is written just after the first line.
    let mut marked = false;
    for _ in 0..100 {
        if data.join("EPHEMERAL").exists() {
            marked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = hippocamp()
        .args([
            "token",
            "create",
            "--app",
            "shop",
            "--permissions",
            "memory:read",
            "--data-dir",
        ])
        .arg(&data)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(marked, "no marker in {}", data.display());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning") && err.contains("ephemeral server"),
        "{err}"
    );
}

/// `memory consolidate`, `lineage` and `revert` on a data directory, and
/// the run commands through a server (where run records are kept).
#[test]
fn consolidation_commands_on_a_data_directory_and_through_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for text in ["My favourite tea is oolong", "my favourite tea is OOLONG!"] {
        let (ok, _, err) = memory(d, &["add", text]);
        assert!(ok, "{err}");
    }
    let (ok, proposed, err) = memory(d, &["consolidate", "--review"]);
    assert!(ok, "{err}");
    assert_eq!(proposed["state"], "proposed", "{proposed}");
    assert!(proposed["changes"][0]["after"].is_string(), "{proposed}");
    let (_, found, _) = memory(d, &["search", "favourite tea"]);
    assert_eq!(
        found["hits"].as_array().unwrap().len(),
        2,
        "review writes nothing"
    );
    let (ok, run, err) = memory(d, &["consolidate"]);
    assert!(ok, "{err}");
    assert_eq!(run["state"], "applied", "{run}");
    let fact = run["changes"][0]["fact"].as_str().unwrap().to_owned();
    let (ok, lineage, err) = memory(d, &["lineage", &fact]);
    assert!(ok, "{err}");
    assert_eq!(lineage["sources"].as_array().unwrap().len(), 2, "{lineage}");
    let (_, found, _) = memory(d, &["search", "favourite tea"]);
    assert_eq!(found["hits"].as_array().unwrap().len(), 1, "{found}");
    // A later command reverts the run from its facts' lineage.
    let id = run["id"].as_str().unwrap();
    let (ok, reverted, err) = memory(d, &["revert", id]);
    assert!(ok, "{err}");
    assert_eq!(reverted["state"], "reverted", "{reverted}");
    let (_, found, _) = memory(d, &["search", "favourite tea"]);
    assert_eq!(found["hits"].as_array().unwrap().len(), 2, "{found}");
    let (ok, _, err) = memory(d, &["runs"]);
    assert!(!ok && err.contains("--server"), "{err}");

    let (mut child, server, token) = spawn_server(&d.join("served"));
    let run = |args: &[&str]| {
        let out = hippocamp()
            .args(["memory"])
            .args(args)
            .args([
                "--server", &server, "--token", &token, "--app", "shop", "--user", "alice",
            ])
            .output()
            .unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
        (
            out.status.success(),
            v,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for text in [
        "Our flat is on the fourth floor",
        "our flat is on the FOURTH floor.",
    ] {
        let (ok, _, err) = run(&["add", text]);
        assert!(ok, "{err}");
    }
    let (ok, proposed, err) = run(&["consolidate", "--review"]);
    assert!(ok, "{err}");
    let id = proposed["id"].as_str().unwrap().to_owned();
    let (ok, listed, err) = run(&["runs"]);
    assert!(ok, "{err}");
    assert_eq!(listed["runs"][0]["id"], id.as_str());
    let (ok, applied, err) = run(&["apply", &id]);
    assert!(ok, "{err}");
    assert_eq!(applied["state"], "applied", "{applied}");
    let (ok, shown, err) = run(&["runs", &id]);
    assert!(ok, "{err}");
    assert_eq!(shown["changes"][0]["before"].as_array().unwrap().len(), 2);
    let (ok, reverted, err) = run(&["revert", &id]);
    assert!(ok, "{err}");
    assert_eq!(reverted["state"], "reverted");
    let _ = child.kill();
    let _ = child.wait();
}
