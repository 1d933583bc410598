//! The TypeScript client (`clients/typescript`: the typed API v1 client
//! and the Vercel AI SDK tools and middleware), built with `tsc --strict`
//! and tested with node's test runner against a real `hippocamp serve` on
//! loopback, the pinned npm packages (`scripts/typescript-env.sh
//! install`), the scripted model server and the real small model, so
//! `cargo test --workspace` stays the one test command.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

use support::local::{hippocamp, serve, token};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The package's sources copied out of the checkout (its build writes
/// `dist/`), with the pinned `node_modules` linked in.
fn workdir(here: &Path, modules: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["package.json", "tsconfig.json"] {
        std::fs::copy(here.join(f), dir.path().join(f)).unwrap();
    }
    for d in ["src", "test"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
        for e in std::fs::read_dir(here.join(d)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(d).join(e.file_name())).unwrap();
        }
    }
    std::os::unix::fs::symlink(modules, dir.path().join("node_modules")).unwrap();
    dir
}

/// Checks the generated API types and builds the package with `tsc`.
fn build(root: &Path, here: &Path, modules: &Path) -> tempfile::TempDir {
    let work = workdir(here, modules);
    let bin = |name: &str| modules.join(".bin").join(name);

    // The API types are generated from docs/openapi.json: the committed
    // ones must be what the generator makes of the committed document.
    let fresh = work.path().join("fresh-openapi.ts");
    let generated = Command::new(bin("openapi-typescript"))
        .arg(root.join("docs/openapi.json"))
        .args(["--default-non-nullable", "false", "-o"])
        .arg(&fresh)
        .output()
        .unwrap();
    ok("openapi-typescript", &generated);
    assert!(
        std::fs::read_to_string(&fresh).unwrap()
            == std::fs::read_to_string(here.join("src/openapi.ts")).unwrap(),
        "clients/typescript/src/openapi.ts is stale: run `npm run generate` in clients/typescript"
    );
    let tsc = Command::new(bin("tsc"))
        .arg("-p")
        .arg(work.path())
        .output()
        .unwrap();
    ok("tsc --strict", &tsc);

    work
}

#[test]
fn the_typescript_client_passes_tsc_and_its_tests_against_a_real_server() {
    let Some(modules) = hippocamp_testkit::env(
        "HIPPOCAMP_TEST_TS_NODE_MODULES",
        "eval \"$(scripts/typescript-env.sh install)\"",
    ) else {
        return;
    };
    let modules = PathBuf::from(modules);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let here = root.join("clients/typescript");
    let work = build(root, &here, &modules);

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let ts = token(&data, "ts");
    let locomo = token(&data, "locomo");
    let mut envs = vec![
        ("HIPPOCAMP_TOKEN".to_owned(), ts),
        ("HIPPOCAMP_LOCOMO_TOKEN".to_owned(), locomo),
    ];
    let mut expected_skips = 0;
    match hippocamp_testkit::env("HIPPOCAMP_TEST_CHAT_URL", "scripts/chat-model.sh start") {
        Some(url) => {
            let model = std::env::var("HIPPOCAMP_TEST_CHAT_MODEL")
                .unwrap_or_else(|_| "smollm2-135m".to_owned());
            envs.push(("HIPPOCAMP_TEST_CHAT_URL".into(), url));
            envs.push(("HIPPOCAMP_TEST_CHAT_MODEL".into(), model));
        }
        None => expected_skips += 1,
    }
    if let Some(shared) = hippocamp_testkit::shared_data() {
        let file = shared.join("locomo/locomo-dev.json");
        let export = dir.path().join("export.json");
        let eval = dir.path().join("eval.json");
        // The client's search carries no reference time, and every sample
        // goes to one server: the eval runs the same way.
        for (args, out) in [
            (vec!["eval", "locomo-export"], &export),
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
        ] {
            let o = hippocamp().args(&args).arg(&file).output().unwrap();
            ok("eval", &o);
            std::fs::write(out, o.stdout).unwrap();
        }
        envs.push((
            "HIPPOCAMP_LOCOMO_EXPORT".into(),
            export.display().to_string(),
        ));
        envs.push(("HIPPOCAMP_LOCOMO_EVAL".into(), eval.display().to_string()));
    } else {
        expected_skips += 1;
    }

    let server = serve(&data);
    let addr = server.addr.clone();
    envs.push(("HIPPOCAMP_URL".into(), format!("http://{addr}")));

    let tests: Vec<PathBuf> = std::fs::read_dir(work.path().join("dist/test"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".test.js"))
        .collect();
    assert!(tests.len() >= 3, "{tests:?}");
    let out = Command::new("node")
        .args(["--test", "--test-reporter=tap"])
        .args(&tests)
        .current_dir(work.path())
        .envs(envs)
        .output()
        .unwrap();
    drop(server);
    let report = text(&out.stdout);
    eprintln!("{report}");
    ok("node --test", &out);
    // Every test ran, bar those whose service is knowingly absent here.
    assert!(
        report.contains(&format!("# skipped {expected_skips}\n")),
        "{report}"
    );
    assert!(report.contains("# fail 0\n"), "{report}");
}
