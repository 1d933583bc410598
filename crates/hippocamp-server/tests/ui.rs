//! The inspection page end to end in headless Chromium, driven through
//! chromedriver's WebDriver protocol: search shows the hit, a wrong scope
//! typed back erases nothing, the exact one erases the entry, artifact
//! versions are listed (metadata only) and deleted, the user is erased;
//! and browsing: apps, their users, a user's entries newest first page by
//! page, an entry's history, consent, holds, the export and the outbox.
//! And the service: explained search (each hit's stages, BM25's term
//! shares), the status and the audit log. And consolidation: a proposed
//! run's changes side by side, applied, then reverted.
//! `HIPPOCAMP_UI_SCREENSHOTS=DIR` saves screenshots there
//! (`inspection-browse.png`, `inspection-search.png`,
//! `inspection-service.png`, `inspection-consolidation.png`; `docs/images` holds the committed ones).
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
                         "--window-size=1280,1000",
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

    /// Scrolls the element `css` to the bottom of the window.
    async fn scroll_to(&self, css: &str) {
        let script = format!("document.querySelector({css:?}).scrollIntoView(false)");
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await;
    }

    /// Saves the page as `DIR/name` when `HIPPOCAMP_UI_SCREENSHOTS=DIR`.
    async fn screenshot(&self, name: &str) {
        use base64::Engine as _;
        let Ok(dir) = std::env::var("HIPPOCAMP_UI_SCREENSHOTS") else {
            return;
        };
        let png = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(std::path::Path::new(&dir).join(name), bytes).unwrap();
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
#[allow(clippy::too_many_lines)] // one session in the browser, step by step
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

    // Search: alice's hit, with id, content, score and time, and what made
    // the score (BM25, the query term's share); no handles.
    d.type_into("#query", "cat named").await;
    d.click("#search").await;
    d.wait_text("#hits-msg", |t| t.starts_with("1 hit(s)"))
        .await;
    let row = d.text("tr.hit").await;
    assert!(row.contains("I adopted a cat named Miso"), "{row}");
    assert!(row.contains("mem-"), "{row}");
    let why = d.text("tr.hit .stage-bm25").await;
    assert!(
        why.starts_with("bm25 ") && why.contains("cat ") && why.contains("(tf 1)"),
        "{why}"
    );
    d.screenshot("inspection-search.png").await;
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

    service(&d).await;
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

/// The service: its counters, and the audit log holding the erasures.
async fn service(d: &Driver) {
    d.click("#service").await;
    d.wait_text("#service-msg", |t| t == "profile durable")
        .await;
    let table = d.text("#service-table").await;
    assert!(
        table.contains("memory") && table.contains("1 entries"),
        "{table}"
    );
    d.click("#audit").await;
    d.wait_text("#audit-msg", |t| t.ends_with("record(s)"))
        .await;
    let log = d.text("#audit-table").await;
    assert!(log.contains("erasure") && log.contains("token"), "{log}");
    assert!(
        !log.contains("alice"),
        "the audit log shows scope hashes only: {log}"
    );
    d.scroll_to("#audit-table").await;
    d.screenshot("inspection-service.png").await;
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

/// Alice with 25 entries a minute apart (the oldest corrected) and a
/// consent; bob (held by the policy) and carol of another app with one.
async fn seed_browsing(s: &TestServer) {
    let alice = "/v1/apps/shop/users/alice";
    let mut first = String::new();
    for i in 0..25u64 {
        let e = api(
            s,
            reqwest::Method::POST,
            &format!("{alice}/memory/entries"),
            Some(json!({"content": format!("alice fact number {i}"), "provenance": {"timestamp_ms": 1_700_000_000_000u64 + i * 60_000}})),
        )
        .await;
        if i == 0 {
            e["entry"]["id"].as_str().unwrap().clone_into(&mut first);
        }
    }
    api(
        s,
        reqwest::Method::PUT,
        &format!("{alice}/memory/entries/{first}"),
        Some(json!({"content": "alice fact number 0, corrected"})),
    )
    .await;
    api(
        s,
        reqwest::Method::PUT,
        &format!("{alice}/consent"),
        Some(json!({"consent_id": "signup-form-7", "scope": "memory"})),
    )
    .await;
    api(
        s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/bob/memory/entries",
        Some(json!({"content": "bob is on hold"})),
    )
    .await;
    api(
        s,
        reqwest::Method::POST,
        "/v1/apps/zoo/users/carol/memory/entries",
        Some(json!({"content": "carol"})),
    )
    .await;
}

/// Browsing a store from the page: the apps and users of the index, a
/// user's entries newest first in pages, a corrected entry's history, the
/// consent, a policy's hold, the export, the outbox's counters, and an
/// entry erased from the listing after the scope is typed back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspection_page_browses_users_entries_and_history_in_chromium() {
    let chromedriver = find_binary(&["chromedriver"]);
    let chromium = find_binary(&["chromium", "chromium-browser", "google-chrome"]);
    let (Some(chromedriver), Some(chromium)) = (chromedriver, chromium) else {
        hippocamp_testkit::missing(
            "chromium or chromedriver is missing",
            "Debian packages chromium, chromium-driver",
        );
        return;
    };
    let s = TestServer::start(Profile::Durable, |c| {
        c.policy
            .apps
            .entry("shop".to_owned())
            .or_default()
            .legal_holds = vec!["bob".to_owned()];
    })
    .await;
    seed_browsing(&s).await;
    let d = Driver::start(&chromedriver, &chromium).await;
    d.call(
        reqwest::Method::POST,
        "/window/rect",
        Some(json!({"width": 1280, "height": 1400})),
    )
    .await;
    d.goto(&s.url("/ui")).await;
    d.type_into("#token", &s.admin).await;
    d.click("#apps").await;
    d.wait_text("#apps-msg", |t| t == "2 app(s)").await;
    let apps = d.text("#app-list").await;
    assert!(apps.contains("shop") && apps.contains("zoo"), "{apps}");
    d.wait_text("#outbox", |t| t.contains("0 queued")).await;
    d.click("button.app-name").await;
    d.wait_text("#user-list", |t| t.contains("alice") && t.contains("bob"))
        .await;
    // Bob: held by the policy.
    let users = d.find_all("button.user-name").await;
    d.click_element(&users[1]).await;
    d.wait_text("#user-hold", |t| t == "held by the policy")
        .await;
    // Alice: consent, entries newest first, twenty to a page.
    d.click_element(&users[0]).await;
    d.wait_text("#consent", |t| t.contains("signup-form-7"))
        .await;
    d.wait_text("#entries-msg", |t| t == "20 entries shown, more follow")
        .await;
    let top = d.text("tr.entry").await;
    assert!(top.contains("alice fact number 24"), "newest first: {top}");
    d.click("#more-entries").await;
    d.wait_text("#entries-msg", |t| t == "25 entries shown")
        .await;
    let rows = d.find_all("tr.entry").await;
    assert_eq!(rows.len(), 25);
    // The corrected entry is the oldest: the last row; its history.
    let last = rows.last().unwrap();
    let text = d
        .call(reqwest::Method::GET, &format!("/element/{last}/text"), None)
        .await;
    assert!(text.as_str().unwrap().contains("corrected"), "{text}");
    let buttons = d.find_all("button.entry-history").await;
    d.click_element(buttons.last().unwrap()).await;
    d.wait_text("#history-title", |t| t.ends_with("2 revision(s)"))
        .await;
    let revisions = d.text("#history").await;
    assert!(
        revisions.contains("alice fact number 0, corrected"),
        "{revisions}"
    );
    let rows = d.find_all("tr.revision").await;
    let oldest = d
        .call(
            reqwest::Method::GET,
            &format!("/element/{}/text", rows[1]),
            None,
        )
        .await;
    assert!(!oldest.as_str().unwrap().contains("corrected"), "{oldest}");
    d.click("#export").await;
    d.wait_text("#status", |t| t.starts_with("exported ")).await;
    assert!(!d.find_all("#export-link:not([hidden])").await.is_empty());
    d.screenshot("inspection-browse.png").await;
    // Erase the newest from the listing, once the scope is typed back.
    d.click("button.erase-listed").await;
    d.confirm("shop/alice").await;
    d.wait_text("#status", |t| t == "erased 1 entry").await;
    d.wait_text("#entries-msg", |t| t == "20 entries shown, more follow")
        .await;
    let top = d.text("tr.entry").await;
    assert!(top.contains("alice fact number 23"), "{top}");

    d.call(reqwest::Method::DELETE, "", None).await;
    drop(d);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspection_page_shows_a_run_side_by_side_and_applies_and_reverts_it() {
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
    let entries = "/v1/apps/shop/users/alice/memory/entries";
    for text in [
        "My favourite tea is a smoky lapsang",
        "my favourite tea is a smoky lapsang!",
        "The spare key is under the blue flowerpot",
        "the spare key is under the BLUE flowerpot.",
        "I cycle to work on Tuesdays",
    ] {
        api(
            &s,
            reqwest::Method::POST,
            entries,
            Some(json!({"content": text})),
        )
        .await;
    }
    let d = Driver::start(&chromedriver, &chromium).await;
    d.call(
        reqwest::Method::POST,
        "/window/rect",
        Some(json!({"width": 1280, "height": 1400})),
    )
    .await;
    d.goto(&s.url("/ui")).await;
    d.type_into("#token", &s.admin).await;
    d.type_into("#app", "shop").await;
    d.type_into("#user", "alice").await;
    d.scroll_to("#consolidate").await;
    d.click("#consolidate").await;
    d.wait_text("#run-title", |t| {
        t.contains("proposed") && t.contains("2 change(s)")
    })
    .await;
    let changes = d.text("#run-changes").await;
    for part in [
        "My favourite tea is a smoky lapsang [note]",
        "my favourite tea is a smoky lapsang! [note]",
        "the spare key is under the BLUE flowerpot.",
    ] {
        assert!(changes.contains(part), "{part} missing: {changes}");
    }
    assert!(!changes.contains("cycle"), "{changes}");
    d.wait_text("#runs-msg", |t| t == "1 run(s)").await;
    d.screenshot("inspection-consolidation.png").await;
    // Nothing is written before apply.
    let hits = api(
        &s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/alice/memory/search",
        Some(json!({"query": "favourite tea"})),
    )
    .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 2, "{hits}");
    d.click("#run-apply").await;
    d.wait_text("#status", |t| {
        t.starts_with("apply: run ") && t.ends_with("is applied")
    })
    .await;
    d.wait_text("#run-title", |t| t.contains("applied")).await;
    let changes = d.text("#run-changes").await;
    assert!(changes.contains("merged"), "{changes}");
    let hits = api(
        &s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/alice/memory/search",
        Some(json!({"query": "favourite tea"})),
    )
    .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1, "{hits}");
    assert_eq!(hits["hits"][0]["origin"], "fact");
    d.click("#run-revert").await;
    d.wait_text("#status", |t| t.ends_with("is reverted")).await;
    let hits = api(
        &s,
        reqwest::Method::POST,
        "/v1/apps/shop/users/alice/memory/search",
        Some(json!({"query": "favourite tea"})),
    )
    .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 2, "{hits}");

    d.call(reqwest::Method::DELETE, "", None).await;
    drop(d);
    s.stop().await;
}
