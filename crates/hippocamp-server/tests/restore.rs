//! Exports and restores over real HTTP: what an export streams, a round
//! trip into a fresh server, and that a restore never undoes an erasure
//! (of an entry, a session or the user), never re-records a withdrawn
//! consent, never holds or retains beyond the policy, and needs its own
//! permission.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use hippocamp_server::Profile;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{ALICE, TestServer, client, entry, search, send_json as send};

const BOB: &str = "/v1/apps/shop/users/bob";

/// `GET …/export` streams JSON Lines: a header, every live entry, the
/// consent, artifact records (never bytes), and an `end` line with counts;
/// another user's token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_streams_everything_held_about_the_user() {
    let s = TestServer::start(Profile::Durable, |c| {
        c.memory.limits.max_page_entries = 2;
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    for i in 0..5u64 {
        send(
            &s,
            Method::POST,
            &format!("{ALICE}/memory/entries"),
            &t,
            Some(entry(&format!("fact {i}"), 10 + i)),
        )
        .await;
    }
    send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-9", "scope": "all"})),
    )
    .await;
    let put = client()
        .put(s.url(&format!("{ALICE}/artifacts/notes.txt")))
        .bearer_auth(&t)
        .header("content-type", "text/plain")
        .body("secret bytes")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let r = client()
        .get(s.url(&format!("{ALICE}/export")))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let text = r.text().await.unwrap();
    assert!(
        !text.contains("secret bytes"),
        "artifact bytes were exported"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "export", "consent", "entry", "entry", "entry", "entry", "entry", "artifact", "end"
        ]
    );
    assert_eq!(lines[0]["scope"], json!({"app": "shop", "user": "alice"}));
    assert_eq!(lines[8]["entries"], 5);
    assert_eq!(lines[8]["artifact_versions"], 1);
    assert_eq!(lines[7]["meta"]["name"], "notes.txt");
    // A token that may read her memory but not her artifacts gets no
    // artifact records.
    let memory_only = s.token(Some("shop"), Some("alice"), "memory:read");
    let text = client()
        .get(s.url(&format!("{ALICE}/export")))
        .bearer_auth(&memory_only)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("notes.txt"), "{text}");
    assert!(text.contains(r#""kind":"end""#));
    let bob = s.all_permissions("shop", Some("bob"));
    let (st, b) = send(&s, Method::GET, &format!("{ALICE}/export"), &bob, None).await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::FORBIDDEN, json!("forbidden"))
    );
    s.stop().await;
}

async fn export_text(s: &TestServer, token: &str) -> String {
    let r = client()
        .get(s.url(&format!("{ALICE}/export")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.text().await.unwrap()
}

/// The lines of an export without its time and without what a restore
/// marks as restored (a consent's and a revision's), which it cannot
/// make equal: the restore's own record says what came from a file.
fn comparable(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if let Some(o) = v.as_object_mut() {
                o.remove("exported_at_ms");
            }
            if let Some(c) = v.get_mut("consent").and_then(Value::as_object_mut) {
                let claimed = c.remove("claimed_at_ms");
                c.remove("restored");
                if let Some(t) = claimed {
                    c.insert("recorded_at_ms".into(), t);
                }
            }
            if let Some(r) = v.get_mut("revision").and_then(Value::as_object_mut) {
                r.remove("restored");
            }
            v
        })
        .collect()
}

/// An export restored into a fresh server reads back equal (entries with
/// revisions and obligations, consent), a second restore changes
/// nothing, and a file of another user or a cut file is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_restores_into_a_fresh_server_unchanged() {
    let tune = |c: &mut hippocamp_server::Config| c.memory.limits.max_page_entries = 2;
    let a = TestServer::start(Profile::Durable, tune).await;
    let ta = a.all_permissions("shop", Some("alice"));
    send(
        &a,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &ta,
        Some(json!({"consent_id": "form-1", "scope": "memory"})),
    )
    .await;
    let mut first = String::new();
    for i in 0..5u64 {
        let (_, b) = send(
            &a,
            Method::POST,
            &format!("{ALICE}/memory/entries"),
            &ta,
            Some(entry(&format!("restored fact {i}"), 10 + i)),
        )
        .await;
        if i == 0 {
            first = b["entry"]["id"].as_str().unwrap().to_owned();
        }
    }
    let (st, _) = send(
        &a,
        Method::PUT,
        &format!("{ALICE}/memory/entries/{first}"),
        &ta,
        Some(json!({"content": "corrected fact"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let exported = export_text(&a, &ta).await;
    assert!(exported.contains(r#""kind":"revision""#), "{exported}");

    let b = TestServer::start(Profile::Durable, tune).await;
    let tb = b.all_permissions("shop", Some("alice"));
    let restore = |token: String, body: String, path: String| {
        let url = b.url(&path);
        async move {
            let r = client()
                .post(url)
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .unwrap();
            let st = r.status();
            (st, r.json::<Value>().await.unwrap())
        }
    };
    let (st, report) = restore(tb.clone(), exported.clone(), format!("{ALICE}/restore")).await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["entries"]["imported"], 5);
    assert_eq!(report["consent_restored"], true);
    let back = export_text(&b, &tb).await;
    assert_eq!(comparable(&back), comparable(&exported));
    // What came from the file says so: the consent (its time kept as the
    // file's claim) and the earlier revisions.
    let lines: Vec<Value> = back
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let consent = lines.iter().find(|l| l["kind"] == "consent").unwrap();
    assert_eq!(consent["consent"]["restored"], true);
    assert!(consent["consent"]["claimed_at_ms"].is_u64());
    let revision = lines.iter().find(|l| l["kind"] == "revision").unwrap();
    assert_eq!(revision["revision"]["restored"], true);
    let (_, again) = restore(tb.clone(), exported.clone(), format!("{ALICE}/restore")).await;
    assert_eq!(again["entries"]["imported"], 0, "{again}");
    assert_eq!(again["entries"]["existing"], 5);
    assert_eq!(again["consent_restored"], false);
    assert_eq!(
        comparable(&export_text(&b, &tb).await),
        comparable(&exported)
    );
    // Into bob: the file is alice's.
    let bob = b.all_permissions("shop", Some("bob"));
    let (st, e) = restore(bob.clone(), exported.clone(), format!("{BOB}/restore")).await;
    assert_eq!(
        (st, e["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument")),
        "{e}"
    );
    // Bob's token cannot restore into alice.
    let (st, _) = restore(bob, exported.clone(), format!("{ALICE}/restore")).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // A cut file (no end line) is refused.
    let cut: String = exported.lines().take(3).collect::<Vec<_>>().join("\n") + "\n";
    let (st, e) = restore(tb.clone(), cut, format!("{ALICE}/restore")).await;
    assert_eq!(
        (st, e["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument")),
        "{e}"
    );
    a.stop().await;
    b.stop().await;
}

async fn post_restore(
    s: &TestServer,
    token: &str,
    path: &str,
    body: String,
) -> (StatusCode, Value) {
    let r = client()
        .post(s.url(path))
        .bearer_auth(token)
        .header("content-type", "application/x-ndjson")
        .body(body)
        .send()
        .await
        .unwrap();
    let st = r.status();
    (st, r.json::<Value>().await.unwrap_or(Value::Null))
}

/// Alice with a note (no session), two turns of session `chat`, an agent
/// session `chat` and a consent.
async fn alice(s: &TestServer, t: &str) {
    let (st, _) = send(
        s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        t,
        Some(json!({"consent_id": "form-1", "scope": "all"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = send(
        s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        t,
        Some(entry("a note about herons", 5)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let events = json!({"events": [
        {"id": "t1", "author": "user", "timestamp_ms": 10,
         "content": {"role": "user", "parts": [{"text": "herons nest in trees"}]}},
        {"id": "t2", "author": "user", "timestamp_ms": 11,
         "content": {"role": "user", "parts": [{"text": "herons eat fish"}]}},
    ]});
    let (st, b) = send(
        s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/chat/events"),
        t,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    let chat = hippocamp_core::SessionId::new("chat").unwrap();
    for (i, text) in ["tell me about herons", "they nest in trees"]
        .iter()
        .enumerate()
    {
        s.services
            .sessions
            .append(
                &scope,
                &chat,
                &hippocamp_sessions::SessionEvent::text(format!("a{i}"), "user", 1, text),
                &hippocamp_sessions::AppendOptions::default(),
            )
            .await
            .unwrap();
    }
}

async fn agent_sessions(s: &TestServer) -> u64 {
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    s.services
        .sessions
        .list(&scope, None, None, &hippocamp_core::CallOptions::default())
        .await
        .unwrap()
        .items
        .len() as u64
}

/// An export restored after the user's erasure brings nothing back: not
/// an entry (with or without a session), not an agent session, not the
/// consent; everything is counted as refused. (H2 of the 2026-12-07
/// review.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_after_the_users_erasure_brings_nothing_back() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    alice(&s, &t).await;
    let exported = export_text(&s, &t).await;
    assert_eq!(search(&s, &t, "herons").await.len(), 3);
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(
        (b["deleted"].as_u64(), b["sessions"].as_u64()),
        (Some(3), Some(1))
    );
    let (st, report) = post_restore(&s, &t, &format!("{ALICE}/restore"), exported).await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["entries"]["imported"], 0, "{report}");
    assert_eq!(report["refused"]["entries"], 3, "{report}");
    assert_eq!(report["refused"]["sessions"], 1, "{report}");
    assert_eq!(report["refused"]["session_events"], 2, "{report}");
    assert_eq!(report["refused"]["consent"], true, "{report}");
    assert_eq!(report["consent_restored"], false);
    assert!(search(&s, &t, "herons").await.is_empty());
    assert_eq!(agent_sessions(&s).await, 0);
    // The consent recorded here stays as it was (an erasure of memory is
    // not a withdrawal); the file's is not recorded over it.
    let (_, c) = send(&s, Method::GET, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(c["consent"]["restored"], Value::Null, "{c}");
    s.stop().await;
}

/// An export restored after one entry (without a session) was deleted
/// and a session was erased: the rest comes back, those do not, and the
/// agent session erased since is refused. A consent withdrawn since is
/// not recorded again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_after_an_entry_and_a_session_were_erased_leaves_them_erased() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    alice(&s, &t).await;
    // One more session-less note, kept.
    let (_, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("a kept note about herons", 6)),
    )
    .await;
    let kept = b["entry"]["id"].as_str().unwrap().to_owned();
    let exported = export_text(&s, &t).await;
    let note = {
        let (_, b) = send(
            &s,
            Method::GET,
            &format!("{ALICE}/memory/entries"),
            &t,
            None,
        )
        .await;
        b["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["content"] == "a note about herons")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/entries/{note}"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/sessions/chat?confirm=shop/alice/chat"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["agent_session"], true, "{b}");
    let (st, _) = send(&s, Method::DELETE, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(st, StatusCode::OK);
    let (st, report) = post_restore(&s, &t, &format!("{ALICE}/restore"), exported).await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["entries"]["erased"], 3, "{report}");
    assert_eq!(report["entries"]["existing"], 1, "{report}");
    assert_eq!(report["refused"]["sessions"], 1, "{report}");
    assert_eq!(report["refused"]["consent"], true, "{report}");
    assert_eq!(search(&s, &t, "herons").await, ["a kept note about herons"]);
    let (st, _) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries/{kept}"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(agent_sessions(&s).await, 0);
    let (_, c) = send(&s, Method::GET, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(c["consent"], Value::Null, "{c}");
    s.stop().await;
}

/// Into a server that never held the user, a restore takes the export's
/// epoch and erasure records: events erased before the export stay
/// erased there too. A file of format 1 (no epoch) restores only into a
/// scope never erased; otherwise it is refused, typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_takes_the_exports_epoch_and_a_format_1_file_needs_a_scope_never_erased() {
    let a = TestServer::start(Profile::Durable, |_| {}).await;
    let ta = a.all_permissions("shop", Some("alice"));
    alice(&a, &ta).await;
    let (st, _) = send(
        &a,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &ta,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = send(
        &a,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &ta,
        Some(entry("after the erasure", 20)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let exported = export_text(&a, &ta).await;
    let header: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    assert_eq!(
        (header["version"].as_u64(), header["epoch"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(exported.contains(r#""kind":"erasures""#), "{exported}");

    let b = TestServer::start(Profile::Durable, |_| {}).await;
    let tb = b.all_permissions("shop", Some("alice"));
    let (st, report) = post_restore(&b, &tb, &format!("{ALICE}/restore"), exported).await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["adopted_epoch"], true, "{report}");
    assert_eq!(report["entries"]["imported"], 1, "{report}");
    assert!(report["erasures"].as_u64().unwrap() >= 3, "{report}");
    let (_, e) = send(&b, Method::GET, &format!("{ALICE}/memory/epoch"), &tb, None).await;
    assert_eq!(e["epoch"], 1);
    // The erased turns, sent again to this server, stay erased.
    let again = json!({"events": [
        {"id": "t1", "author": "user", "timestamp_ms": 10,
         "content": {"role": "user", "parts": [{"text": "herons nest in trees"}]}},
    ]});
    let (st, r) = send(
        &b,
        Method::POST,
        &format!("{ALICE}/memory/sessions/chat/events"),
        &tb,
        Some(again),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["skipped"][0]["reason"], "erased", "{r}");

    // A format 1 file: refused by a scope erased here, taken by a fresh one.
    let v1 = |user: &str| {
        [
            json!({"kind": "export", "version": 1, "scope": {"app": "shop", "user": user}, "exported_at_ms": 1}),
            json!({"kind": "end", "entries": 0, "sessions": 0, "artifact_versions": null}),
        ]
        .iter()
        .fold(String::new(), |acc, l| acc + &l.to_string() + "\n")
    };
    let (st, e) = post_restore(&a, &ta, &format!("{ALICE}/restore"), v1("alice")).await;
    assert_eq!(
        (st, e["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument")),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("format 1"), "{e}");
    let tbob = a.all_permissions("shop", Some("bob"));
    let (st, r) = post_restore(&a, &tbob, &format!("{BOB}/restore"), v1("bob")).await;
    assert_eq!(st, StatusCode::OK, "{r}");
    a.stop().await;
    b.stop().await;
}

/// A restore needs `memory:restore` (`admin` implies it): a token with
/// `memory:write` alone is refused, and told which permission it lacks.
/// A crafted file cannot hold or retain a user's entries: they get the
/// app's lifetimes, and the user can be erased. (H1 of the review.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::many_single_char_names)] // s, e, r, o, b: the file's names
async fn a_restore_needs_its_permission_and_cannot_hold_a_user() {
    let s = TestServer::start(Profile::Durable, |c| {
        c.policy.apps.entry("shop".to_owned()).or_default().ttl_ms = Some(3_600_000);
    })
    .await;
    let writer = s.token(
        Some("shop"),
        Some("alice"),
        "memory:read,memory:write,memory:erase",
    );
    let file = |content: &str| {
        let mut e = hippocamp_memory::entry::prepare_entry(
            &hippocamp_core::MemoryScope::parse("shop", "alice").unwrap(),
            hippocamp_memory::NewEntry::new(content),
            &hippocamp_core::MemoryLimits::default(),
        )
        .unwrap()
        .entry;
        e.obligations = hippocamp_memory::Obligations {
            expires_at_ms: None,
            retain_until_ms: Some(1 << 62),
            legal_hold: true,
        };
        [
            json!({"kind": "export", "version": 2, "scope": {"app": "shop", "user": "alice"},
                   "exported_at_ms": 1, "epoch": 0, "sessions_epoch": 0}),
            json!({"kind": "entry", "entry": e}),
            json!({"kind": "end", "entries": 1, "sessions": 0, "artifact_versions": null}),
        ]
        .iter()
        .fold(String::new(), |acc, l| acc + &l.to_string() + "\n")
    };
    let (st, e) = post_restore(
        &s,
        &writer,
        &format!("{ALICE}/restore"),
        file("held forever"),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{e}");
    let restorer = s.token(
        Some("shop"),
        Some("alice"),
        "memory:read,memory:erase,memory:restore",
    );
    let (st, r) = post_restore(
        &s,
        &restorer,
        &format!("{ALICE}/restore"),
        file("held forever"),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert_eq!(r["entries"]["imported"], 1, "{r}");
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries"),
        &restorer,
        None,
    )
    .await;
    let o = &b["entries"][0]["obligations"];
    assert_eq!(o["legal_hold"], Value::Null, "{o}");
    assert_eq!(o["retain_until_ms"], Value::Null, "{o}");
    assert!(o["expires_at_ms"].is_u64(), "the app's lifetime: {o}");
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &restorer,
        None,
    )
    .await;
    assert_eq!(
        (st, b["deleted"].as_u64()),
        (StatusCode::OK, Some(1)),
        "{b}"
    );
    s.stop().await;
}

/// A consolidated user restores into a fresh server with their facts and
/// lineage (a fact's line before its sources' is held until the end); a
/// file missing one of a fact's sources restores the rest, never the fact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_facts_restore_with_their_sources_and_never_without() {
    let a = TestServer::start(Profile::Durable, |_| {}).await;
    let ta = a.all_permissions("shop", Some("alice"));
    for (text, ts) in [
        ("The garage code is 7319", 10),
        ("the garage code is 7319!", 20),
    ] {
        send(
            &a,
            Method::POST,
            &format!("{ALICE}/memory/entries"),
            &ta,
            Some(entry(text, ts)),
        )
        .await;
    }
    let (st, run) = send(
        &a,
        Method::POST,
        &format!("{ALICE}/memory/consolidations?wait=true"),
        &ta,
        Some(json!({"mode": "dedupe"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{run}");
    let fact = run["changes"][0]["fact"].as_str().unwrap().to_owned();
    let exported = export_text(&a, &ta).await;
    // The fact's line first: it waits for its sources.
    let mut lines: Vec<&str> = exported.lines().collect();
    let at = lines.iter().position(|l| l.contains(&fact)).unwrap();
    let line = lines.remove(at);
    lines.insert(1, line);
    let reordered = lines.join("\n") + "\n";
    let b = TestServer::start(Profile::Durable, |_| {}).await;
    let tb = b.all_permissions("shop", Some("alice"));
    let (st, report) = post_restore(&b, &tb, &format!("{ALICE}/restore"), reordered).await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(report["entries"]["imported"], 3, "{report}");
    assert_eq!(report["entries"]["unsourced"], 0, "{report}");
    assert_eq!(
        search(&b, &tb, "garage code").await,
        ["the garage code is 7319!"]
    );
    let (_, l) = send(
        &b,
        Method::GET,
        &format!("{ALICE}/memory/entries/{fact}/lineage"),
        &tb,
        None,
    )
    .await;
    assert_eq!(l["sources"].as_array().unwrap().len(), 2, "{l}");
    let (_, got) = send(
        &b,
        Method::GET,
        &format!("{ALICE}/memory/entries/{fact}"),
        &tb,
        None,
    )
    .await;
    assert_eq!(got["lineage_restored"], true, "{got}");
    // Without one source's line: the fact is not restored, and counted.
    // (The end line counts the entries it announces: one fewer.)
    let missing: Vec<String> = exported
        .lines()
        .filter(|l| !l.contains("The garage code is 7319\""))
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if v["kind"] == "end" {
                v["entries"] = json!(2);
            }
            v.to_string()
        })
        .collect();
    let c = TestServer::start(Profile::Durable, |_| {}).await;
    let tc = c.all_permissions("shop", Some("alice"));
    let (st, report) = post_restore(
        &c,
        &tc,
        &format!("{ALICE}/restore"),
        missing.join("\n") + "\n",
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{report}");
    assert_eq!(
        (
            &report["entries"]["imported"],
            &report["entries"]["unsourced"]
        ),
        (&json!(1), &json!(1)),
        "{report}"
    );
    let (st, _) = send(
        &c,
        Method::GET,
        &format!("{ALICE}/memory/entries/{fact}"),
        &tc,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    for s in [a, b, c] {
        s.stop().await;
    }
}
