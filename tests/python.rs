//! The Python package (`clients/python`: the typed client and the ADK
//! services) with pytest and ruff, against a real `hippocamp serve` on
//! loopback and google-adk from PyPI (pinned; `scripts/python-env.sh
//! install`), so `cargo test --workspace` stays the one test command.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

mod support;

use support::local::{hippocamp, serve, token};

/// The LoCoMo replays' environment: the data exported as the eval reads
/// it, the eval's own R@10 (as turns, and as keyed items) and the tokens
/// of the replays' apps; nothing when the shared data is missing.
fn locomo_env(dir: &Path, locomo: String, locomo_lg: String) -> Vec<(String, String)> {
    let mut envs = Vec::new();
    let Some(shared) = hippocamp_testkit::shared_data() else {
        return envs;
    };
    let file = shared.join("locomo/locomo-dev.json");
    let export = dir.join("export.json");
    let eval = dir.join("eval.json");
    let items_eval = dir.join("items-eval.json");
    for (args, out) in [
        (vec!["eval", "locomo-export"], &export),
        // ADK's `search_memory` carries no reference time: the eval
        // searches as it does (relative times against now).
        (
            vec![
                "eval",
                "locomo",
                "--json",
                "--no-isolation",
                "--no-reference-time",
            ],
            &eval,
        ),
        // The LangGraph replay puts turns as keyed items and asks
        // through their search: the eval does the same.
        (
            vec![
                "eval",
                "locomo",
                "--json",
                "--no-isolation",
                "--no-reference-time",
                "--as-items",
            ],
            &items_eval,
        ),
    ] {
        let o = hippocamp().args(&args).arg(&file).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(out, o.stdout).unwrap();
    }
    envs.push((
        "HIPPOCAMP_LOCOMO_EXPORT".into(),
        export.display().to_string(),
    ));
    envs.push(("HIPPOCAMP_LOCOMO_EVAL".into(), eval.display().to_string()));
    envs.push(("HIPPOCAMP_LOCOMO_TOKEN".into(), locomo));
    envs.push((
        "HIPPOCAMP_LOCOMO_ITEMS_EVAL".into(),
        items_eval.display().to_string(),
    ));
    envs.push(("HIPPOCAMP_LOCOMO_LG_TOKEN".into(), locomo_lg));
    envs
}

#[test]
fn the_python_package_passes_ruff_and_pytest_against_a_real_server() {
    let Some(python) = hippocamp_testkit::env(
        "HIPPOCAMP_TEST_PYTHON",
        "eval \"$(scripts/python-env.sh install)\"",
    ) else {
        return;
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python");
    let bin = Path::new(&python).parent().unwrap();
    let ruff = Command::new(bin.join("ruff"))
        .arg("check")
        .arg(&here)
        .output()
        .unwrap();
    assert!(
        ruff.status.success(),
        "ruff:\n{}",
        String::from_utf8_lossy(&ruff.stdout)
    );

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Tokens first: the server reads the file it finds at start (and
    // watches it after).
    std::fs::create_dir_all(&data).unwrap();
    let adk = token(&data, "adk");
    let locomo = token(&data, "locomo");
    let locomo_lg = token(&data, "locomo_lg");
    let server = serve(&data);
    let addr = server.addr.clone();

    // LoCoMo: the data exported as the eval reads it, and the eval's own R@10.
    let mut envs = vec![
        ("HIPPOCAMP_URL".to_owned(), format!("hippocamp://{addr}")),
        ("HIPPOCAMP_TOKEN".to_owned(), adk),
    ];
    envs.extend(locomo_env(dir.path(), locomo, locomo_lg));
    // The OpenAI Agents runner test drives the real small model.
    let chat =
        hippocamp_testkit::env("HIPPOCAMP_TEST_CHAT_URL", "scripts/chat-model.sh start").is_some();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-s"])
        .arg(here.join("tests"))
        .current_dir(&here)
        .envs(envs)
        .output()
        .unwrap();
    drop(server);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        out.status.success(),
        "pytest:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every test ran (none skipped for a missing variable), bar the one
    // whose model is knowingly absent here.
    if chat {
        assert!(!text.contains("skipped"), "{text}");
    }
    installs_leave_nothing_untracked(&python, &here);
}

/// `pip install ./clients/python` (as the README says) builds in the
/// source tree: what it leaves there is ignored by git, never untracked.
fn installs_leave_nothing_untracked(python: &str, here: &Path) {
    let target = tempfile::tempdir().unwrap();
    let pip = Command::new(python)
        .args(["-m", "pip", "install", "-q", "--no-deps"])
        .arg("--target")
        .arg(target.path())
        .arg(here)
        .output()
        .unwrap();
    assert!(
        pip.status.success(),
        "pip install:\n{}",
        String::from_utf8_lossy(&pip.stderr)
    );
    let Ok(status) = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=all"])
        .arg(here)
        .current_dir(here)
        .output()
    else {
        return;
    };
    if !status.status.success() {
        // Not a git checkout: nothing to compare with.
        return;
    }
    let text = String::from_utf8_lossy(&status.stdout);
    let untracked: Vec<&str> = text.lines().filter(|l| l.starts_with("??")).collect();
    assert!(untracked.is_empty(), "left untracked: {untracked:?}");
}
