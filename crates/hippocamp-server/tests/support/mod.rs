//! A server on a loopback port for the tests, and tokens for it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use hippocamp_server::auth::{Grant, Permission, grant};
use hippocamp_server::{Bound, Config, Profile};

pub(crate) struct TestServer {
    pub(crate) base: String,
    pub(crate) admin: String,
    pub(crate) dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) done: Option<tokio::task::JoinHandle<hippocamp_core::Result<()>>>,
    pub(crate) services: hippocamp_server::Services,
}

impl TestServer {
    pub(crate) async fn start(profile: Profile, tune: impl FnOnce(&mut Config)) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), profile, tune).await
    }

    /// A server on `dir`'s data (a durable profile's, kept from a server
    /// stopped with [`stop_keeping`](Self::stop_keeping)).
    pub(crate) async fn start_in(
        dir: tempfile::TempDir,
        profile: Profile,
        tune: impl FnOnce(&mut Config),
    ) -> Self {
        let mut config = Config {
            profile,
            data_dir: dir.path().join("data"),
            bind: "127.0.0.1:0".parse().unwrap(),
            ..Config::default()
        };
        tune(&mut config);
        let bound = Bound::new(config).await.unwrap();
        let tokens = &bound.services().tokens;
        // A data directory used before has its tokens already.
        let admin = tokens.ensure_admin().unwrap().unwrap_or_else(|| {
            let g = grant(None, None, "admin").unwrap();
            tokens.create("test admin", g).unwrap().0
        });
        let services = bound.services().clone();
        let base = format!("http://{}", bound.local_addr());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(bound.serve(async {
            let _ = rx.await;
        }));
        Self {
            base,
            admin,
            dir,
            stop: Some(tx),
            done: Some(done),
            services,
        }
    }

    pub(crate) fn token(&self, app: Option<&str>, user: Option<&str>, perms: &str) -> String {
        let g = grant(app, user, perms).unwrap();
        self.services.tokens.create("test", g).unwrap().0
    }

    pub(crate) fn all_permissions(&self, app: &str, user: Option<&str>) -> String {
        let g = Grant {
            app: Some(hippocamp_core::AppName::new(app).unwrap()),
            user: user.map(|u| hippocamp_core::UserId::new(u).unwrap()),
            permissions: Permission::ALL
                .into_iter()
                .filter(|p| *p != Permission::Admin)
                .collect::<BTreeSet<_>>(),
        };
        self.services.tokens.create("test", g).unwrap().0
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(crate) async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(d) = self.done.take() {
            d.await.unwrap().unwrap();
        }
    }

    /// Stops the server and hands back its directory, data kept.
    pub(crate) async fn stop_keeping(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(d) = self.done.take() {
            d.await.unwrap().unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    pub(crate) fn shutdown_signal(&mut self) -> Option<tokio::sync::oneshot::Sender<()>> {
        self.stop.take()
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// `method path` with `token` and a JSON body; the status and the JSON
/// reply (`null` when the reply is not JSON).
pub(crate) async fn send_json(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<serde_json::Value>,
) -> (reqwest::StatusCode, serde_json::Value) {
    let mut rq = client().request(method, s.url(path)).bearer_auth(token);
    if let Some(b) = body {
        rq = rq.json(&b);
    }
    let r = rq.send().await.unwrap();
    let status = r.status();
    let bytes = r.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// One request per scoped route of the table, on scope `app`/`user`
/// (session `s1`, artifact `doc.txt`), with a body the route takes.
pub(crate) fn requests(app: &str, user: &str) -> Vec<(reqwest::Method, String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for r in hippocamp_server::api::routes() {
        if r.permission.is_none() {
            continue;
        }
        out.push((method(r), path(r, app, user, "doc.txt"), body(r)));
    }
    out
}

/// The route's method.
pub(crate) fn method(r: &hippocamp_server::api::Route) -> reqwest::Method {
    r.method.to_uppercase().parse().unwrap()
}

/// The route's path on scope `app`/`user`, session `s1`, artifact `name`
/// (a whole-scope erasure with its `?confirm=`).
pub(crate) fn path(r: &hippocamp_server::api::Route, app: &str, user: &str, name: &str) -> String {
    let confirm = match r.id {
        "delete_user" | "erase_artifacts_user" => format!("?confirm={app}/{user}"),
        "delete_session" | "erase_artifacts_session" | "delete_agent_session" => {
            format!("?confirm={app}/{user}/s1")
        }
        _ => String::new(),
    };
    let p = r
        .path
        .replace("{app}", app)
        .replace("{user}", user)
        .replace("{session}", "s1")
        .replace("/jobs/{id}", &format!("/jobs/job-{}", "1".repeat(32)))
        .replace(
            "/consolidations/{id}",
            &format!("/consolidations/run-{}", "1".repeat(32)),
        )
        .replace("{id}", &format!("mem-{}", "1".repeat(32)))
        .replace("{namespace}", "memories.prefs")
        .replace("{key}", "k1")
        .replace("{*name}", name);
    format!("{p}{confirm}")
}

/// A body the route takes (none for those without one).
pub(crate) fn body(r: &hippocamp_server::api::Route) -> Option<Vec<u8>> {
    use hippocamp_server::api::Payload;
    match r.request {
        Payload::Json("NewEntry" | "EntryUpdate", _) => Some(br#"{"content":"planted"}"#.to_vec()),
        Payload::Json("Events", _) => Some(
            br#"{"events":[{"id":"e9","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"planted"}]}}]}"#.to_vec(),
        ),
        Payload::Json("SearchRequest" | "PreloadRequest", _) => {
            Some(br#"{"query":"secret"}"#.to_vec())
        }
        Payload::Json("StartRun", _) => Some(br#"{"mode":"dedupe"}"#.to_vec()),
        Payload::Json("AppendItems", _) => {
            Some(br#"{"items":[{"role":"user","content":"planted"}]}"#.to_vec())
        }
        Payload::Json("MemoryToolCommand", _) => Some(
            br#"{"command":"create","path":"/memories/planted.md","file_text":"planted"}"#.to_vec(),
        ),
        Payload::Json("PutItem", _) => Some(br#"{"value":{"text":"planted"}}"#.to_vec()),
        Payload::Json("SearchItems", _) => Some(br#"{"query":"secret"}"#.to_vec()),
        Payload::Json("ListNamespaces", _) => Some(b"{}".to_vec()),
        Payload::Json("NewConsent", _) => {
            Some(br#"{"consent_id":"planted","scope":"all"}"#.to_vec())
        }
        Payload::Bytes => Some(b"planted".to_vec()),
        _ => None,
    }
}

/// Everything alice of app `shop` holds, as seen through the services:
/// the hits of a search for what tests plant, the versions of `doc.txt` in
/// each of her artifact scopes, and her erasure epoch.
pub(crate) async fn snapshot(s: &TestServer) -> (Vec<String>, Vec<Vec<u64>>, u64) {
    let c = hippocamp_core::CallOptions::default();
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    let hits = s
        .services
        .memory_store()
        .unwrap()
        .search(
            &scope,
            &hippocamp_memory::SearchRequest::new("alice planted secret plan"),
            &c,
        )
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.content.clone())
        .collect();
    let epoch = s
        .services
        .memory_store()
        .unwrap()
        .erasure_epoch(&scope, &c)
        .await
        .unwrap();
    let mut versions = Vec::new();
    for sc in [
        hippocamp_artifacts::ArtifactScope::app("shop").unwrap(),
        hippocamp_artifacts::ArtifactScope::user("shop", "alice").unwrap(),
        hippocamp_artifacts::ArtifactScope::session("shop", "alice", "s1").unwrap(),
    ] {
        let name = hippocamp_artifacts::ArtifactName::new("doc.txt").unwrap();
        let page = s
            .services
            .artifacts
            .list_versions(&sc, &name, &hippocamp_artifacts::PageRequest::default(), &c)
            .await
            .unwrap();
        versions.push(page.items.iter().map(|m| m.version).collect());
    }
    (hits, versions, epoch)
}

/// Alice of app `shop`, the user most tests act for.
pub(crate) const ALICE: &str = "/v1/apps/shop/users/alice";

/// An entry body with `text` and a provenance timestamp.
pub(crate) fn entry(text: &str, ts: u64) -> serde_json::Value {
    serde_json::json!({"content": text, "provenance": {"timestamp_ms": ts}})
}

/// The contents of alice's hits for `query`, in rank order.
pub(crate) async fn search(s: &TestServer, token: &str, query: &str) -> Vec<String> {
    let (st, b) = send_json(
        s,
        reqwest::Method::POST,
        &format!("{ALICE}/memory/search"),
        token,
        Some(serde_json::json!({"query": query})),
    )
    .await;
    assert_eq!(st, reqwest::StatusCode::OK, "{b}");
    b["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["content"].as_str().unwrap().to_owned())
        .collect()
}

/// `method path` with an optional bearer token and body: the status, the
/// headers and the body's bytes.
pub(crate) async fn send(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let mut rq = client().request(method, s.url(path));
    if let Some(t) = token {
        rq = rq.bearer_auth(t);
    }
    if let Some(b) = body {
        rq = rq.body(b);
    }
    let r = rq.send().await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap().to_vec())
}

/// A body as JSON (`null` when it is not).
pub(crate) fn j(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap_or(serde_json::Value::Null)
}
