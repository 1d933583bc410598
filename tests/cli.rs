//! The `hippocamp` binary as users run it.

#![allow(clippy::unwrap_used)]

use std::process::Command;

fn data() -> Option<std::path::PathBuf> {
    let d = hippocamp_datasets::data_dir();
    if d.is_none() {
        assert!(
            std::env::var_os("HIPPOCAMP_REQUIRE_EXTERNAL").is_none(),
            "HIPPOCAMP_REQUIRE_EXTERNAL is set but the shared data folder is missing"
        );
        eprintln!("skipping: ../shared/data not found and HIPPOCAMP_DATA_DIR not set");
    }
    d
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
