//! The lifecycle over real HTTP: listing a user's memory page by page,
//! consent (recorded, required, withdrawn), lifetimes and legal holds from
//! the `[policy]` section, confirmed erasure, and other users' tokens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use hippocamp_server::Profile;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{ALICE, TestServer, client, entry, send_json as send};

const BOB: &str = "/v1/apps/shop/users/bob";

fn policy(c: &mut hippocamp_server::Config) {
    #[derive(serde::Deserialize)]
    struct File {
        policy: hippocamp_governance::PolicyConfig,
    }
    let toml = r#"
        [policy.apps.shop]
        ttl_ms = 3600000
        retention_ms = 600000
        consent_required = true
        erase_on_withdrawal = true
        legal_holds = ["bob"]
    "#;
    let f: File = toml::from_str(toml).unwrap();
    c.policy = f.policy;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_listed_page_by_page_newest_first() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    for i in 0..5u64 {
        let (st, _) = send(
            &s,
            Method::POST,
            &format!("{ALICE}/memory/entries"),
            &t,
            Some(entry(&format!("fact {i}"), 1_000 + i)),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let mut seen = Vec::new();
    let mut path = format!("{ALICE}/memory/entries?limit=2");
    loop {
        let (st, b) = send(&s, Method::GET, &path, &t, None).await;
        assert_eq!(st, StatusCode::OK, "{b}");
        for e in b["entries"].as_array().unwrap() {
            seen.push(e["content"].as_str().unwrap().to_owned());
        }
        match b["next_cursor"].as_str() {
            Some(c) => path = format!("{ALICE}/memory/entries?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["fact 4", "fact 3", "fact 2", "fact 1", "fact 0"]);
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries?order=oldest&limit=1"),
        &t,
        None,
    )
    .await;
    assert_eq!(b["entries"][0]["content"], "fact 0");
    let filter = urlencode(r#"{"topic":"none"}"#);
    let (st, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries?filter={filter}"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["entries"].as_array().unwrap().len()),
        (StatusCode::OK, 0)
    );
    for bad in [
        "limit=0",
        "cursor=zzz",
        "order=sideways",
        "filter=notjson",
        "colour=red",
    ] {
        let (st, b) = send(
            &s,
            Method::GET,
            &format!("{ALICE}/memory/entries?{bad}"),
            &t,
            None,
        )
        .await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::BAD_REQUEST, json!("invalid_argument")),
            "{bad}"
        );
    }
    // Another user's token sees nothing of alice's, and is refused.
    let bob = s.all_permissions("shop", Some("bob"));
    for (m, p) in [
        (Method::GET, format!("{ALICE}/memory/entries")),
        (Method::GET, format!("{ALICE}/consent")),
        (Method::PUT, format!("{ALICE}/consent")),
        (Method::DELETE, format!("{ALICE}/consent")),
    ] {
        let (st, b) = send(
            &s,
            m,
            &p,
            &bob,
            Some(json!({"consent_id": "x", "scope": "all"})),
        )
        .await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::FORBIDDEN, json!("forbidden")),
            "{p}"
        );
    }
    s.stop().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_scope_erasure_needs_the_exact_scope_confirmed() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("keep me", 1)),
    )
    .await;
    for path in [
        format!("{ALICE}/memory"),
        format!("{ALICE}/memory?confirm=shop/bob"),
        format!("{ALICE}/memory?confirm=shop"),
        format!("{ALICE}/memory/sessions/s1"),
        format!("{ALICE}/memory/sessions/s1?confirm=shop/alice"),
    ] {
        let (st, b) = send(&s, Method::DELETE, &path, &t, None).await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::BAD_REQUEST, json!("confirmation_required")),
            "{path}"
        );
    }
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        b["entries"].as_array().unwrap().len(),
        1,
        "nothing was erased"
    );
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/sessions/s1?confirm=shop/alice/s1"),
        &t,
        None,
    )
    .await;
    assert_eq!((st, b["deleted"].clone()), (StatusCode::OK, json!(0)));
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!((st, b["deleted"].clone()), (StatusCode::OK, json!(1)));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_requires_consent_sets_lifetimes_holds_and_erases_on_withdrawal() {
    let s = TestServer::start(Profile::Durable, policy).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (st, b) = send(&s, Method::GET, "/v1/memory/capabilities", &t, None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(b["policy"]["consent_required"], json!(["shop"]));
    // Who is held is the operator's to know: an app's token is told the
    // app's own terms only.
    assert_eq!(b["policy"]["legal_holds"], json!([]));
    assert_eq!(b["obligations"], json!(true));
    // No consent: every ingestion path is refused, nothing is written.
    let events = json!({"events": [{"id": "e1", "author": "user", "timestamp_ms": 1, "content": {"role": "user", "parts": [{"text": "I like tea"}]}}]});
    for (path, body) in [
        (format!("{ALICE}/memory/entries"), entry("a fact", 1)),
        (format!("{ALICE}/memory/sessions/s1/events"), events.clone()),
        (format!("{ALICE}/memory/sessions/s1/ingest"), events.clone()),
    ] {
        let (st, b) = send(&s, Method::POST, &path, &t, Some(body)).await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::FORBIDDEN, json!("consent_required")),
            "{path}"
        );
    }
    let (st, b) = send(&s, Method::GET, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!((st, b["consent"].clone()), (StatusCode::OK, Value::Null));
    let (st, b) = send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-1", "scope": "memory", "extra": 1})),
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument"))
    );
    let (st, b) = send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-1", "scope": "memory"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["consent_id"], "form-1");
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("a fact", 1)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    let o = &b["entry"]["obligations"];
    assert!(o["expires_at_ms"].as_u64().unwrap() > o["retain_until_ms"].as_u64().unwrap());
    let id = b["entry"]["id"].as_str().unwrap().to_owned();
    // Retained: the entry cannot go yet.
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/entries/{id}"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::CONFLICT, json!("retention"))
    );
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s1/ingest"),
        &t,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    // Bob is under a legal hold: his erasure is refused.
    let bt = s.all_permissions("shop", Some("bob"));
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{BOB}/memory?confirm=shop/bob"),
        &bt,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::CONFLICT, json!("legal_hold"))
    );
    // Withdrawal: the consent goes and ingestion stops at once; erasing
    // on withdrawal meets alice's retention, which refuses it: the reply
    // says so, and the withdrawal stands (200, not an error).
    let (st, b) = send(&s, Method::DELETE, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(
        (st, b["erasure_refused"].clone(), b["erased"].clone()),
        (StatusCode::OK, json!("retention"), Value::Null),
        "{b}"
    );
    assert_eq!(b["withdrawn"]["consent_id"], "form-1", "{b}");
    let (_, b) = send(&s, Method::GET, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(b["consent"], Value::Null);
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("more", 2)),
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::FORBIDDEN, json!("consent_required"))
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdrawing_consent_erases_and_cancels_when_nothing_is_retained() {
    let s = TestServer::start(Profile::Durable, |c| {
        policy(c);
        if let Some(app) = c.policy.apps.get_mut("shop") {
            app.retention_ms = None;
        }
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-2", "scope": "all"})),
    )
    .await;
    let (st, _) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("a fact", 1)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    // The consent covers artifacts too: the user's own and an agent
    // session's go with the withdrawal.
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    let s1 = hippocamp_core::SessionId::new("s1").unwrap();
    s.services
        .sessions
        .append(
            &scope,
            &s1,
            &hippocamp_sessions::SessionEvent::text("e1", "user", 1, "hi"),
            &hippocamp_sessions::AppendOptions::default(),
        )
        .await
        .unwrap();
    for prefix in [ALICE.to_owned(), format!("{ALICE}/sessions/s1")] {
        let r = client()
            .put(s.url(&format!("{prefix}/artifacts/notes.txt")))
            .bearer_auth(&t)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let (st, b) = send(&s, Method::DELETE, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["withdrawn"]["consent_id"], "form-2");
    assert_eq!(b["erased"]["deleted"], 1);
    assert_eq!(b["artifacts"], json!({"names": 2, "versions": 2}));
    for prefix in [ALICE.to_owned(), format!("{ALICE}/sessions/s1")] {
        let (st, b) = send(&s, Method::GET, &format!("{prefix}/artifacts"), &t, None).await;
        assert_eq!(st, StatusCode::OK, "{b}");
        assert_eq!(b["items"], json!([]), "{prefix}");
    }
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries"),
        &t,
        None,
    )
    .await;
    assert_eq!(b["entries"].as_array().unwrap().len(), 0);
    // A second withdrawal finds nothing to withdraw and erases nothing.
    let (st, b) = send(&s, Method::DELETE, &format!("{ALICE}/consent"), &t, None).await;
    assert_eq!(
        (st, b["withdrawn"].clone(), b["erased"]["deleted"].clone()),
        (StatusCode::OK, Value::Null, json!(0))
    );
    s.stop().await;
}

/// The outbox asks the policy at admission and again at delivery: a job
/// admitted under a consent that is gone by the time it is delivered
/// stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_asks_the_policy_again() {
    let s = TestServer::start(Profile::Durable, |c| {
        policy(c);
        if let Some(app) = c.policy.apps.get_mut("shop") {
            app.retention_ms = None;
        }
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-3", "scope": "memory"})),
    )
    .await;
    s.services.stop_processor().await;
    let events = json!({"events": [{"id": "e1", "author": "user", "timestamp_ms": 1, "content": {"role": "user", "parts": [{"text": "I like tea"}]}}]});
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s1/ingest"),
        &t,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let job = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    // The consent goes behind the outbox's back (no withdrawal, so the
    // job is not cancelled): only delivery's own question can stop it.
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    s.services
        .governance
        .consents
        .remove(&scope, 0)
        .await
        .unwrap();
    s.services.start_processor().unwrap();
    let mut attempts = 0;
    for _ in 0..100 {
        let (_, b) = send(
            &s,
            Method::GET,
            &format!("{ALICE}/memory/jobs/{job}"),
            &t,
            None,
        )
        .await;
        attempts = b["attempts"].as_u64().unwrap_or(0);
        assert_ne!(b["state"], "succeeded", "{b}");
        if attempts >= 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(attempts >= 1, "the processor never tried the job");
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/entries"),
        &t,
        None,
    )
    .await;
    assert_eq!(b["entries"].as_array().unwrap().len(), 0, "{b}");
    // The refusal is the outbox's own, on the record; an admission is
    // asked as the token that handed the events in.
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s2/ingest"),
        &t,
        Some(json!({"events": [{"id": "e9", "author": "user", "timestamp_ms": 1, "content": {"role": "user", "parts": [{"text": "hi"}]}}]})),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{b}");
    let records = s.services.governance.audit.page(None, None).await.unwrap();
    let denials: Vec<(String, String)> = records
        .records
        .iter()
        .filter(|r| r.outcome == "consent_required")
        .map(|r| (r.target.clone(), r.caller.clone()))
        .collect();
    assert!(
        denials.contains(&("ingest".to_owned(), "outbox".to_owned())),
        "{denials:?}"
    );
    assert_eq!(
        denials.last(),
        Some(&("ingest".to_owned(), "token".to_owned()))
    );
    s.stop().await;
}

/// The background sweeper deletes what expired, on its own, once the
/// services' clock says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_deletes_expired_entries_in_the_background() {
    let clock = std::sync::Arc::new(hippocamp_core::ManualClock::at(1_000_000));
    let c2 = clock.clone();
    let s = TestServer::start(Profile::Durable, move |c| {
        c.memory.clock = hippocamp_memory::config::StoreClock(c2);
        c.sweeper.interval_ms = 100;
        c.policy.apps.entry("shop".to_owned()).or_default().ttl_ms = Some(1_000);
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("short lived", 1)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    assert_eq!(b["entry"]["obligations"]["expires_at_ms"], 1_001_000);
    let memory = s.services.memory_store().unwrap().clone();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(memory.status().await.unwrap().entries, 1, "not expired yet");
    clock.advance(1_000);
    let mut left = 1;
    for _ in 0..50 {
        left = memory.status().await.unwrap().entries;
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0, "the sweeper did not delete the expired entry");
    s.stop().await;
}

/// `DELETE …/artifacts` erases a whole user or session artifact scope,
/// only when `?confirm=` names it, and nothing beyond it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_scopes_are_erased_whole_when_confirmed() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    for (prefix, name) in [
        (ALICE.to_owned(), "a.txt"),
        (ALICE.to_owned(), "a.txt"),
        (ALICE.to_owned(), "b.txt"),
        (format!("{ALICE}/sessions/s1"), "c.txt"),
    ] {
        let r = client()
            .put(s.url(&format!("{prefix}/artifacts/{name}")))
            .bearer_auth(&t)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let (st, b) = send(&s, Method::DELETE, &format!("{ALICE}/artifacts"), &t, None).await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("confirmation_required"))
    );
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/artifacts?confirm=shop/alice/s1"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("confirmation_required"))
    );
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/artifacts?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(
        (b["names"].clone(), b["versions"].clone()),
        (json!(2), json!(3))
    );
    let (_, b) = send(&s, Method::GET, &format!("{ALICE}/artifacts"), &t, None).await;
    assert_eq!(b["items"], json!([]));
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/sessions/s1/artifacts"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        b["items"],
        json!(["c.txt"]),
        "the session's scope is its own"
    );
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/sessions/s1/artifacts?confirm=shop/alice/s1"),
        &t,
        None,
    )
    .await;
    assert_eq!((st, b["versions"].clone()), (StatusCode::OK, json!(1)));
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/artifacts?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["versions"].clone()),
        (StatusCode::OK, json!(0)),
        "idempotent"
    );
    s.stop().await;
}

/// A correction over HTTP: a new revision under the same id that search
/// follows, its history, an idempotent repeat, a replayed add that stays
/// a duplicate, and refusals (unknown entry, unknown field, another
/// user's token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_is_corrected_as_a_new_revision() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let original = json!({"content": "alice lives in Lisbon", "idempotency_key": "home"});
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(original.clone()),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    let id = b["entry"]["id"].as_str().unwrap().to_owned();
    let path = format!("{ALICE}/memory/entries/{id}");
    let fix = json!({"content": "alice lives in Porto", "metadata": {"source": "user"}});
    let (st, b) = send(&s, Method::PUT, &path, &t, Some(fix.clone())).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(
        (b["changed"].clone(), b["entry"]["revision"].clone()),
        (json!(true), json!(2))
    );
    assert_eq!(b["entry"]["id"], id.as_str());
    let (_, b) = send(&s, Method::PUT, &path, &t, Some(fix)).await;
    assert_eq!(
        (b["changed"].clone(), b["entry"]["revision"].clone()),
        (json!(false), json!(2))
    );
    let (st, b) = send(&s, Method::GET, &format!("{path}/history"), &t, None).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    let revs: Vec<(u64, String)> = b["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_u64().unwrap(),
                r["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        revs,
        [
            (2, "alice lives in Porto".to_owned()),
            (1, "alice lives in Lisbon".to_owned())
        ]
    );
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(original),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "a replayed add is a duplicate: {b}");
    assert_eq!(b["entry"]["content"], "alice lives in Porto");
    let (_, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/search"),
        &t,
        Some(json!({"query": "Lisbon"})),
    )
    .await;
    assert_eq!(b["hits"].as_array().unwrap().len(), 0, "{b}");
    let (_, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/search"),
        &t,
        Some(json!({"query": "Porto"})),
    )
    .await;
    assert_eq!(b["hits"][0]["id"], id.as_str());
    let missing = format!("{ALICE}/memory/entries/mem-{}", "2".repeat(32));
    let (st, b) = send(&s, Method::PUT, &missing, &t, Some(json!({"content": "x"}))).await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::NOT_FOUND, json!("not_found"))
    );
    let (st, b) = send(
        &s,
        Method::PUT,
        &path,
        &t,
        Some(json!({"content": "x", "colour": 1})),
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument"))
    );
    let bob = s.all_permissions("shop", Some("bob"));
    for (m, p) in [
        (Method::PUT, path.clone()),
        (Method::GET, format!("{path}/history")),
    ] {
        let (st, b) = send(&s, m, &p, &bob, Some(json!({"content": "bob was here"}))).await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::FORBIDDEN, json!("forbidden")),
            "{p}"
        );
    }
    let (_, b) = send(&s, Method::GET, &path, &t, None).await;
    assert_eq!(b["content"], "alice lives in Porto");
    s.stop().await;
}

/// The admin listing: every app for an admin token of every app, one
/// app's users for an admin token of that app, nothing for others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_and_users_are_listed_for_admins_only() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    for (app, user) in [("shop", "alice"), ("shop", "bob"), ("zoo", "carol")] {
        let t = s.all_permissions(app, Some(user));
        let (st, _) = send(
            &s,
            Method::POST,
            &format!("/v1/apps/{app}/users/{user}/memory/entries"),
            &t,
            Some(entry("x", 1)),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let (st, b) = send(&s, Method::GET, "/v1/apps?limit=1", &s.admin, None).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["names"], json!(["shop"]));
    let c = b["next_cursor"].as_str().unwrap();
    let (_, b) = send(
        &s,
        Method::GET,
        &format!("/v1/apps?limit=1&cursor={c}"),
        &s.admin,
        None,
    )
    .await;
    assert_eq!(b["names"], json!(["zoo"]));
    assert!(b["next_cursor"].is_null());
    let shop_admin = s.token(Some("shop"), None, "admin");
    let (st, b) = send(&s, Method::GET, "/v1/apps/shop/users", &shop_admin, None).await;
    assert_eq!(
        (st, b["names"].clone()),
        (StatusCode::OK, json!(["alice", "bob"]))
    );
    let (st, b) = send(&s, Method::GET, "/v1/apps/shop/users", &s.admin, None).await;
    assert_eq!(
        (st, b["names"].clone()),
        (StatusCode::OK, json!(["alice", "bob"]))
    );
    let alice_admin = s.token(Some("shop"), Some("alice"), "admin");
    let reader = s.token(Some("shop"), None, "memory:read");
    for (token, path) in [
        (&shop_admin, "/v1/apps"),
        (&shop_admin, "/v1/apps/zoo/users"),
        (&alice_admin, "/v1/apps/shop/users"),
        (&reader, "/v1/apps/shop/users"),
    ] {
        let (st, b) = send(&s, Method::GET, path, token, None).await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::FORBIDDEN, json!("forbidden")),
            "{path}"
        );
    }
    let (st, _) = send(&s, Method::GET, "/v1/apps?colour=red", &s.admin, None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    s.stop().await;
}

/// The audit log over HTTP: consent changes, a denial, a refused and a
/// done erasure, each with the caller and the scope's hash and no
/// content; only an admin of every app reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_governance_events_for_admins() {
    let s = TestServer::start(Profile::Durable, policy).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (st, _) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        &t,
        Some(entry("alice's diary", 1)),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "consent is required");
    send(
        &s,
        Method::PUT,
        &format!("{ALICE}/consent"),
        &t,
        Some(json!({"consent_id": "form-1", "scope": "all"})),
    )
    .await;
    let bob = s.all_permissions("shop", Some("bob"));
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{BOB}/memory?confirm=shop/bob"),
        &bob,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::CONFLICT, "bob is held");
    send(&s, Method::DELETE, &format!("{ALICE}/consent"), &t, None).await;
    let (st, page) = send(&s, Method::GET, "/v1/audit?limit=1000", &s.admin, None).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    let events: Vec<(String, String)> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for want in [
        ("denial", "consent_required"),
        ("consent_recorded", "ok"),
        ("hold", "legal_hold"),
        ("consent_withdrawn", "ok"),
        ("erasure", "ok"),
    ] {
        assert!(
            events.iter().any(|(e, o)| (e.as_str(), o.as_str()) == want),
            "{want:?} missing from {events:?}"
        );
    }
    let r = &page["records"][0];
    assert_eq!(r["caller"], "token");
    assert!(r["token_id"].as_str().is_some_and(|id| id.len() == 12));
    assert_eq!(r["scope_hash"].as_str().unwrap().len(), 16);
    let text = page.to_string();
    for word in ["alice", "diary", "form-1", "shop", "bob"] {
        assert!(!text.contains(word), "{word} leaked: {text}");
    }
    let (_, first) = send(&s, Method::GET, "/v1/audit?limit=1", &s.admin, None).await;
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let (_, next) = send(
        &s,
        Method::GET,
        &format!("/v1/audit?limit=1&cursor={cursor}"),
        &s.admin,
        None,
    )
    .await;
    assert_eq!(
        next["records"][0]["seq"],
        first["records"][0]["seq"].as_u64().unwrap() + 1
    );
    let shop_admin = s.token(Some("shop"), None, "admin");
    for token in [&shop_admin, &t] {
        let (st, _) = send(&s, Method::GET, "/v1/audit", token, None).await;
        assert_eq!(st, StatusCode::FORBIDDEN);
    }
    let (st, _) = send(&s, Method::GET, "/v1/audit?cursor=x", &s.admin, None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    s.stop().await;
}

/// Artifacts on the same terms over HTTP: a version expires with the
/// app's `artifact_ttl_ms` at the exact moment and the background sweeper
/// removes it; a held user's versions cannot be deleted (409).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_expire_and_held_ones_cannot_be_deleted() {
    let now = hippocamp_core::time::now_ms();
    let clock = std::sync::Arc::new(hippocamp_core::ManualClock::at(now));
    let c2 = clock.clone();
    let s = TestServer::start(Profile::Durable, move |c| {
        c.memory.clock = hippocamp_memory::config::StoreClock(c2);
        c.sweeper.interval_ms = 100;
        let app = c.policy.apps.entry("shop".to_owned()).or_default();
        app.artifact_ttl_ms = Some(60_000);
        app.legal_holds = vec!["bob".to_owned()];
    })
    .await;
    let t = s.all_permissions("shop", None);
    for user in ["alice", "bob"] {
        let put = client()
            .put(s.url(&format!("/v1/apps/shop/users/{user}/artifacts/notes.txt")))
            .bearer_auth(&t)
            .body("notes")
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), StatusCode::CREATED);
    }
    let get = |user: &'static str| {
        let url = s.url(&format!("/v1/apps/shop/users/{user}/artifacts/notes.txt"));
        let t = t.clone();
        async move {
            client()
                .get(url)
                .bearer_auth(t)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(get("alice").await, StatusCode::OK);
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{BOB}/artifacts/notes.txt?all=true"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::CONFLICT, json!("legal_hold"))
    );
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{BOB}/artifacts?confirm=shop/bob"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::CONFLICT, json!("legal_hold"))
    );
    // Past the lifetime (the versions were stored after `now`, within a minute).
    clock.set(hippocamp_core::time::now_ms() + 60_000);
    assert_eq!(get("alice").await, StatusCode::NOT_FOUND);
    let (_, names) = send(&s, Method::GET, &format!("{ALICE}/artifacts"), &t, None).await;
    assert_eq!(names["items"], json!([]));
    // The sweeper deletes alice's version; bob's (held) stays on disk.
    let mut left = u64::MAX;
    for _ in 0..50 {
        left = s
            .services
            .artifacts
            .status()
            .await
            .unwrap()
            .artifacts
            .unwrap();
        if left == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        left, 1,
        "alice's expired version swept, bob's held one kept"
    );
    // The hold is visible in the served status (and in the capabilities
    // a token of every app reads), never to the app's own tokens.
    let (st, status) = send(&s, Method::GET, "/v1/status", &s.admin, None).await;
    assert_eq!(st, StatusCode::OK, "{status}");
    assert_eq!(status["policy"]["legal_holds"], json!(["shop/bob"]));
    assert_eq!(status["policy"]["lifetimes"][0]["artifact_ttl_ms"], 60_000);
    assert_eq!(status["artifacts"]["artifacts"], 1);
    let (_, caps) = send(&s, Method::GET, "/v1/artifacts/capabilities", &t, None).await;
    assert_eq!(caps["scope_listing"], true, "{caps}");
    let (_, caps) = send(&s, Method::GET, "/v1/memory/capabilities", &t, None).await;
    assert_eq!(caps["policy"]["legal_holds"], json!([]));
    let (_, caps) = send(&s, Method::GET, "/v1/memory/capabilities", &s.admin, None).await;
    assert_eq!(caps["policy"]["legal_holds"], json!(["shop/bob"]));
    let rival = s.all_permissions("rival", None);
    let (_, caps) = send(&s, Method::GET, "/v1/memory/capabilities", &rival, None).await;
    assert_eq!(
        (
            &caps["policy"]["consent_required"],
            &caps["policy"]["lifetimes"]
        ),
        (&json!([]), &json!([])),
        "another app's terms are not shown"
    );
    let shop_admin = s.token(Some("shop"), None, "admin");
    let (st, _) = send(&s, Method::GET, "/v1/status", &shop_admin, None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    s.stop().await;
}
