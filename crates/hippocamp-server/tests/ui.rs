//! The inspection page end to end in headless Chromium, driven through
//! chromedriver's WebDriver protocol: search shows the hit, a wrong scope
//! typed back erases nothing, the exact one erases the entry, artifact
//! versions are listed (metadata only) and deleted, the user is erased.
//!
//! Needs `chromium` and `chromedriver` (Debian packages `chromium`,
//! `chromium-driver`); skips without them unless
//! `HIPPOCAMP_REQUIRE_EXTERNAL=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hippocamp_server::Profile;
use serde_json::{Value, json};
use support::{TestServer, client};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

fn find_binary(names: &[&str]) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

struct Driver {
    child: Child,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start(chromedriver: &std::path::Path, chromium: &std::path::Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if let Ok(r) = client().get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                         "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
                         format!("--user-data-dir={}", profile.path().display())]
            }
        }}});
        let mut d = Self {
            child,
            base,
            session: String::new(),
            _profile: profile,
        };
        let v = d.call(reqwest::Method::POST, "/session", Some(caps)).await;
        v["sessionId"]
            .as_str()
            .expect("a session")
            .clone_into(&mut d.session);
        d
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let mut rq = client().request(method, url);
        if let Some(b) = body {
            rq = rq.json(&b);
        }
        let v: Value = rq.send().await.unwrap().json().await.unwrap();
        v["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    async fn find_all(&self, css: &str) -> Vec<String> {
        let v = self
            .call(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The first element matching `css`, waiting up to 10 s for it.
    async fn find(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(e) = self.find_all(css).await.into_iter().next() {
                return e;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no element {css}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/clear"),
            Some(json!({})),
        )
        .await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    async fn click(&self, css: &str) {
        let e = self.find(css).await;
        self.click_element(&e).await;
    }

    async fn click_element(&self, e: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        )
        .await;
    }

    async fn text(&self, css: &str) -> String {
        let e = self.find(css).await;
        self.call(reqwest::Method::GET, &format!("/element/{e}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until the text of `css` satisfies `ok`.
    async fn wait_text(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let t = self.text(css).await;
            if ok(&t) {
                return t;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{css} stayed {t:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn confirm(&self, typed: &str) {
        self.type_into("#confirm-input", typed).await;
        self.click("#confirm-go").await;
    }
}

async fn api(s: &TestServer, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut rq = client().request(method, s.url(path)).bearer_auth(&s.admin);
    if let Some(b) = body {
        rq = rq.json(&b);
    }
    rq.send().await.unwrap().json().await.unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspection_page_searches_and_erases_in_chromium() {
    let chromedriver = find_binary(&["chromedriver"]);
    let chromium = find_binary(&["chromium", "chromium-browser", "google-chrome"]);
    let (Some(chromedriver), Some(chromium)) = (chromedriver, chromium) else {
        hippocamp_testkit::missing(
            "chromium or chromedriver is missing",
            "Debian packages chromium, chromium-driver",
        );
        return;
    };
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let alice = "/v1/apps/shop/users/alice";
    for content in ["I adopted a cat named Miso", "My favourite colour is green"] {
        api(&s, reqwest::Method::POST, &format!("{alice}/memory/entries"), Some(json!({"content": content, "provenance": {"author": "user", "event_ids": ["evt-secret-handle"]}}))).await;
    }
    api(
        &s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/bob/memory/entries",
        Some(json!({"content": "Bob has a cat too"})),
    )
    .await;
    let put = client()
        .put(s.url(&format!("{alice}/artifacts/notes/cat.txt")))
        .bearer_auth(&s.admin)
        .body("artifact bytes never shown")
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());

    let d = Driver::start(&chromedriver, &chromium).await;
    d.goto(&s.url("/ui")).await;
    d.type_into("#token", &s.admin).await;
    d.type_into("#app", "shop").await;
    d.type_into("#user", "alice").await;
    d.click("#use").await;
    d.wait_text("#who", |t| t == "admin token").await;

    // Search: alice's hit, with id, content, score and time; no handles.
    d.type_into("#query", "cat").await;
    d.click("#search").await;
    d.wait_text("#hits-msg", |t| t == "1 hit(s)").await;
    let row = d.text("tr.hit").await;
    assert!(row.contains("I adopted a cat named Miso"), "{row}");
    assert!(row.contains("mem-"), "{row}");
    let page = d.text("body").await;
    assert!(
        !page.contains("evt-secret-handle") && !page.contains("Bob"),
        "{page}"
    );

    // Erase with the wrong scope typed back: nothing happens.
    d.click("button.erase-entry").await;
    d.confirm("shop/bob").await;
    d.wait_text("#confirm-msg", |t| t.contains("does not match"))
        .await;
    let found = api(
        &s,
        reqwest::Method::POST,
        &format!("{alice}/memory/search"),
        Some(json!({"query": "cat"})),
    )
    .await;
    assert_eq!(found["hits"].as_array().unwrap().len(), 1);
    // The exact scope: erased.
    d.confirm("shop/alice").await;
    d.wait_text("#status", |t| t == "erased 1 entry").await;
    let found = api(
        &s,
        reqwest::Method::POST,
        &format!("{alice}/memory/search"),
        Some(json!({"query": "cat"})),
    )
    .await;
    assert_eq!(found["hits"], json!([]));
    let bob = api(
        &s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/bob/memory/search",
        Some(json!({"query": "cat"})),
    )
    .await;
    assert_eq!(
        bob["hits"].as_array().unwrap().len(),
        1,
        "another user's entry must stay"
    );

    artifacts(&s, &d, alice).await;

    // Erase the user.
    d.click("#erase-user").await;
    d.confirm("shop/alice").await;
    d.wait_text("#status", |t| t == "erased 1 entries").await;
    let found = api(
        &s,
        reqwest::Method::POST,
        &format!("{alice}/memory/search"),
        Some(json!({"query": "green colour"})),
    )
    .await;
    assert_eq!(found["hits"], json!([]));

    d.call(reqwest::Method::DELETE, "", None).await;
    drop(d);
    s.stop().await;
}

/// Artifacts: names, versions (metadata only), delete after confirming.
async fn artifacts(s: &TestServer, d: &Driver, alice: &str) {
    d.click("#names").await;
    d.wait_text("#names-msg", |t| t == "1 name(s)").await;
    d.click("button.artifact-name").await;
    let version = d
        .wait_text("tr.version", |t| t.contains("notes/cat.txt"))
        .await;
    assert!(version.contains("26"), "size shown: {version}");
    assert!(!d.text("body").await.contains("artifact bytes never shown"));
    d.click("button.delete-version").await;
    d.confirm("shop/alice").await;
    d.wait_text("#status", |t| t.starts_with("deleted version(s) 1"))
        .await;
    let r = client()
        .get(s.url(&format!("{alice}/artifacts/notes/cat.txt")))
        .bearer_auth(&s.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::NOT_FOUND);
}
