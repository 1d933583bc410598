//! The MCP server with the official client SDKs: Python `mcp` 2.3.0 and
//! TypeScript `@modelcontextprotocol/sdk` 1.32.2 (installed by
//! `scripts/mcp-clients.sh`), over Streamable HTTP on a real `hippocamp
//! serve` and over stdio (`hippocamp mcp`). Each client runs a plan of
//! steps (`clients/mcp-tests/`) and prints its results as JSON.

#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

fn hippocamp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hippocamp"))
}

/// The status of one plain HTTP/1.1 request (no client library needed).
fn status_of(base: &str, method: &str, path: &str, headers: &[String], body: &str) -> u16 {
    use std::io::{Read as _, Write as _};
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut rq = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        rq = rq + "Host: " + addr + "\r\n";
    }
    for h in headers {
        rq.push_str(h);
        rq.push_str("\r\n");
    }
    rq.push_str("\r\n");
    rq.push_str(body);
    s.write_all(rq.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A `hippocamp serve` on a free port; killed when dropped.
struct Server {
    child: Child,
    base: String,
    data: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(data: &Path) -> Self {
        let mut child = hippocamp()
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let addr = first.rsplit("http://").next().unwrap().to_owned();
        // Keep reading its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            base: format!("http://{addr}"),
            data: data.to_owned(),
        }
    }

    /// A token of `app` (and `user`, if given) with `permissions`.
    fn token(&self, app: &str, user: Option<&str>, permissions: &str) -> String {
        let mut c = hippocamp();
        c.args(["token", "--data-dir"]).arg(&self.data);
        c.args(["create", "--app", app, "--permissions", permissions]);
        if let Some(u) = user {
            c.args(["--user", u]);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let token = v["token"].as_str().unwrap().to_owned();
        // The server picks the token file up off the request path.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let auth = format!("Authorization: Bearer {token}");
            if status_of(&self.base, "GET", "/v1/memory/capabilities", &[auth], "") == 200 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        token
    }
}

/// The two clients of the environment.
struct Clients {
    python: String,
    node_dir: tempfile::TempDir,
}

fn clients() -> Option<Clients> {
    let hint = "eval \"$(scripts/mcp-clients.sh install)\"";
    let python = hippocamp_testkit::env("HIPPOCAMP_TEST_MCP_PYTHON", hint)?;
    let modules = hippocamp_testkit::env("HIPPOCAMP_TEST_MCP_NODE_MODULES", hint)?;
    // ESM resolves packages next to the script: a folder with the script
    // and a link to the installed modules.
    let node_dir = tempfile::tempdir().unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/mcp-tests");
    std::fs::copy(here.join("client.mjs"), node_dir.path().join("client.mjs")).unwrap();
    std::os::unix::fs::symlink(modules, node_dir.path().join("node_modules")).unwrap();
    Some(Clients { python, node_dir })
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    Node,
}

impl Clients {
    fn run(&self, sdk: Sdk, transport: &[String], plan: &Value) -> Vec<Value> {
        let mut c = match sdk {
            Sdk::Python => {
                let mut c = Command::new(&self.python);
                c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/mcp-tests/client.py"));
                c
            }
            Sdk::Node => {
                let mut c = Command::new("node");
                c.arg(self.node_dir.path().join("client.mjs"));
                c
            }
        };
        let out = c.args(transport).arg(plan.to_string()).output().unwrap();
        assert!(
            out.status.success(),
            "{sdk:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{sdk:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }
}

fn http(url: &str, token: &str) -> Vec<String> {
    vec!["http".into(), url.into(), token.into()]
}

fn tool_names(step: &Value) -> Vec<String> {
    step["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn structured(step: &Value) -> &Value {
    assert_ne!(step["isError"], true, "{step}");
    &step["structuredContent"]
}

/// The plan a user with full rights runs: every surface once.
fn full_plan(tag: &str) -> Value {
    json!([
        ["tools"],
        ["call", "memory_add", {"content": format!("{tag} keeps bees on the roof")}],
        ["call", "memory_search", {"query": "bees roof"}],
        ["call", "artifact_put", {"name": "notes/hive.txt", "text": format!("{tag} hive notes")}],
        ["call", "artifact_put", {"name": "hive.png", "data_base64": "iVBORw0KGgo=", "mime_type": "image/png"}],
        ["call", "artifact_get", {"name": "notes/hive.txt"}],
        ["call", "artifact_get", {"name": "hive.png"}],
        ["resources"],
    ])
}

fn check_full(sdk: Sdk, tag: &str, r: &[Value]) {
    let names = tool_names(&r[0]);
    for t in [
        "memory_search",
        "load_memory",
        "memory_add",
        "artifact_get",
        "artifact_put",
    ] {
        assert!(names.contains(&t.to_owned()), "{sdk:?}: {names:?}");
    }
    assert!(!names.contains(&"load_artifacts".to_owned()), "runner-only");
    let hits = structured(&r[2])["hits"].as_array().unwrap().clone();
    assert!(
        hits.iter()
            .any(|h| h["content"] == format!("{tag} keeps bees on the roof")),
        "{sdk:?}: {hits:?}"
    );
    assert_eq!(r[5]["content"][0]["text"], format!("{tag} hive notes"));
    let blob = &r[6]["content"][0];
    assert_eq!(blob["type"], "resource", "{sdk:?}: {blob}");
    assert_eq!(blob["resource"]["blob"], "iVBORw0KGgo=");
    assert_eq!(blob["resource"]["mimeType"], "image/png");
    let resources = r[7]["resources"].as_array().unwrap();
    assert!(
        resources.iter().any(|x| x["name"] == "notes/hive.txt"
            && x["uri"]
                .as_str()
                .unwrap()
                .contains("/artifacts/notes/hive.txt?version=")),
        "{sdk:?}: {resources:?}"
    );
}

#[test]
fn both_sdks_use_every_surface_over_http_and_stdio_within_their_scope() {
    let Some(c) = clients() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let all =
        "memory:read,memory:write,memory:erase,artifacts:read,artifacts:write,artifacts:delete";
    let mcp = format!("{}/mcp", server.base);
    for (sdk, user) in [(Sdk::Python, "alice"), (Sdk::Node, "dora")] {
        let token = server.token("demo", Some(user), all);
        let r = c.run(sdk, &http(&mcp, &token), &full_plan(user));
        check_full(sdk, user, &r);
        // Reading the resource listed returns the text.
        let uri = r[7]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "notes/hive.txt")
            .unwrap()["uri"]
            .as_str()
            .unwrap()
            .to_owned();
        let read = c.run(sdk, &http(&mcp, &token), &json!([["read", uri]]));
        assert_eq!(
            read[0]["contents"][0]["text"],
            format!("{user} hive notes"),
            "{sdk:?}"
        );

        // Another user of the same app sees none of it, by any tool or resource.
        let other = server.token("demo", Some("mallory"), all);
        let theirs = c.run(
            sdk,
            &http(&mcp, &other),
            &json!([
                ["call", "memory_search", {"query": "bees roof"}],
                ["call", "artifact_get", {"name": "notes/hive.txt"}],
                ["call", "artifact_list", {}],
                ["resources"],
                ["read", uri],
            ]),
        );
        assert!(
            structured(&theirs[0])["hits"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{sdk:?}"
        );
        assert_eq!(theirs[1]["isError"], true);
        assert_eq!(theirs[1]["structuredContent"]["error"], "not_found");
        assert!(
            structured(&theirs[2])["names"]
                .as_array()
                .unwrap()
                .is_empty()
        );
        assert!(theirs[3]["resources"].as_array().unwrap().is_empty());
        assert!(theirs[4].get("error").is_some(), "{sdk:?}: {}", theirs[4]);

        // A read-only token is offered no write tool and cannot write.
        let reader = server.token("demo", Some(user), "memory:read,artifacts:read");
        let ro = c.run(
            sdk,
            &http(&mcp, &reader),
            &json!([
                ["tools"],
                ["call", "memory_add", {"content": "should not land"}],
                ["call", "artifact_put", {"name": "x.txt", "text": "no"}],
            ]),
        );
        let names = tool_names(&ro[0]);
        assert!(
            names.iter().all(|n| !n.contains("add")
                && !n.contains("put")
                && !n.contains("delete")
                && !n.contains("ingest")
                && !n.contains("forget")),
            "{names:?}"
        );
        for step in &ro[1..] {
            assert!(
                step.get("error").is_some() || step["isError"] == true,
                "{sdk:?}: {step}"
            );
        }

        // An app-wide token names the user in the path, checked against the grant.
        let app_wide = server.token("demo", None, "memory:read");
        let named = c.run(
            sdk,
            &http(&format!("{mcp}/apps/demo/users/{user}"), &app_wide),
            &json!([["call", "memory_search", {"query": "bees roof"}]]),
        );
        assert_eq!(
            structured(&named[0])["hits"].as_array().unwrap().len(),
            1,
            "{sdk:?}"
        );

        // Over stdio, the command line fixes the scope.
        let data = dir.path().join(format!("stdio-{user}"));
        let command = json!([
            env!("CARGO_BIN_EXE_hippocamp"),
            "mcp",
            "--data-dir",
            data,
            "--app",
            "demo",
            "--user",
            user
        ]);
        let r = c.run(
            sdk,
            &["stdio".into(), command.to_string()],
            &full_plan(user),
        );
        check_full(sdk, user, &r);
    }
    // After both, the memory the readers could not write is not there.
    let check = c.run(
        Sdk::Python,
        &http(&mcp, &server.token("demo", Some("alice"), "memory:read")),
        &json!([["call", "memory_search", {"query": "should not land"}]]),
    );
    assert!(
        structured(&check[0])["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["content"] != "should not land")
    );
}

#[test]
fn bad_origins_hosts_and_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let token = server.token("demo", Some("alice"), "memory:read");
    let app_wide = server.token("demo", None, "memory:read");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let status = |path: &str, token: &str, extra: &[&str]| -> u16 {
        let mut c = Command::new("curl");
        c.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
            .args(["-H", "content-type: application/json"])
            .args(["-H", "accept: application/json, text/event-stream"])
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"));
        for h in extra {
            c.args(["-H", h]);
        }
        let out = c
            .arg("--data")
            .arg(init)
            .arg(format!("{}{path}", server.base))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).parse().unwrap()
    };
    assert_eq!(status("/mcp", &token, &[]), 200);
    assert_eq!(
        status("/mcp", &token, &["Origin: http://127.0.0.1:3000"]),
        200
    );
    assert_eq!(
        status("/mcp", &token, &["Origin: https://evil.example"]),
        403
    );
    assert_eq!(status("/mcp", &token, &["Host: evil.example"]), 403);
    // The refusals speak JSON, like every other error of the server.
    for bad in ["Host: evil.example", "Origin: https://evil.example"] {
        let out = Command::new("curl")
            .args(["-s", "-i", "-X", "POST"])
            .args(["-H", "content-type: application/json"])
            .args(["-H", "accept: application/json, text/event-stream"])
            .arg("-H")
            .arg(format!("Authorization: Bearer {token}"))
            .args(["-H", bad])
            .arg("--data")
            .arg(init)
            .arg(format!("{}/mcp", server.base))
            .output()
            .unwrap();
        let reply = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, body) = reply.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 403"), "{reply}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{reply}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["code"], "forbidden", "{reply}");
        assert!(
            v["message"].as_str().unwrap().contains("not allowed"),
            "{reply}"
        );
    }
    assert_eq!(status("/mcp", "hct_not_a_token", &[]), 401);
    // An app-wide token must name the user; another app is forbidden.
    assert_eq!(status("/mcp", &app_wide, &[]), 400);
    assert_eq!(status("/mcp/apps/demo/users/bob", &app_wide, &[]), 200);
    assert_eq!(status("/mcp/apps/other/users/bob", &app_wide, &[]), 403);
    // A user-bound token cannot name another user.
    assert_eq!(status("/mcp/apps/demo/users/bob", &token, &[]), 403);
    // Hostile bodies get errors, and the server keeps serving.
    let auth = format!("Authorization: Bearer {token}");
    let json_headers = |extra: &str| {
        vec![
            "Content-Type: application/json".to_owned(),
            "Accept: application/json, text/event-stream".to_owned(),
            auth.clone(),
            extra.to_owned(),
        ]
    };
    for body in [
        "not json",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":5}",
        "[]",
        "{}",
    ] {
        let s = status_of(
            &server.base,
            "POST",
            "/mcp",
            &json_headers("X-Test: 1"),
            body,
        );
        assert!((200..500).contains(&s), "{body}: {s}");
    }
    let huge = "x".repeat(9 << 20);
    let s = status_of(
        &server.base,
        "POST",
        "/mcp",
        &json_headers("X-Test: 2"),
        &huge,
    );
    assert!((400..500).contains(&s) || s == 0, "{s}");
    assert_eq!(status("/mcp", &token, &[]), 200);
}
