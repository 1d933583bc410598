//! The ingestion outbox over real HTTP: an ingest is accepted at once and
//! becomes searchable, a resubmission adds only what is new, a job is its
//! scope's alone, a cancel drops the events, an erased session stays
//! erased, and the profiles without an outbox (or without memory) say so.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::time::{Duration, Instant};

use hippocamp_server::Profile;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{ALICE, TestServer, client, search, send_json as send};

fn event(id: &str, text: &str) -> Value {
    json!({"id": id, "author": "user", "timestamp_ms": 1,
           "content": {"role": "user", "parts": [{"text": text}]}})
}

fn events(list: &[(&str, &str)]) -> Value {
    json!({"events": list.iter().map(|(i, t)| event(i, t)).collect::<Vec<_>>()})
}

/// Polls a job until it has ended; its last status.
async fn settled(s: &TestServer, token: &str, id: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (st, b) = send(
            s,
            Method::GET,
            &format!("{ALICE}/memory/jobs/{id}"),
            token,
            None,
        )
        .await;
        assert_eq!(st, StatusCode::OK, "{b}");
        let state = b["state"].as_str().unwrap().to_owned();
        if ["succeeded", "failed", "cancelled"].contains(&state.as_str()) {
            return b;
        }
        assert!(Instant::now() < until, "job {id} still {state}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ingest_path(session: &str) -> String {
    format!("{ALICE}/memory/sessions/{session}/ingest")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_is_accepted_at_once_then_searchable_and_only_new_events_become_work() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let first = events(&[
        ("e1", "I keep bees on the roof"),
        ("e2", "My sister lives in Lisbon"),
    ]);
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &t,
        Some(first.clone()),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["new_events"], 2);
    assert_eq!(b["skipped"], json!([]));
    let id = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("job-"), "{id}");

    let done = settled(&s, &t, &id).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        (
            done["events"].clone(),
            done["delivered_events"].clone(),
            done["attempts"].clone()
        ),
        (json!(2), json!(2), json!(1))
    );
    // A status carries no content.
    assert!(!done.to_string().contains("bees"), "{done}");
    assert!(done["created_ms"].as_u64().unwrap() <= done["updated_ms"].as_u64().unwrap());
    // The match first (its session neighbour may follow: lexical search
    // adds session cohesion).
    assert_eq!(
        search(&s, &t, "bees roof").await[0],
        "I keep bees on the roof"
    );

    // The whole session again: nothing new, the same job.
    let (st, b) = send(&s, Method::POST, &ingest_path("s1"), &t, Some(first)).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["new_events"], 0);
    assert_eq!(b["jobs"][0]["id"], id.as_str());
    // The session grown by a turn: only the new event is work.
    let grown = events(&[
        ("e1", "I keep bees on the roof"),
        ("e2", "My sister lives in Lisbon"),
        ("e3", "I am learning the cello"),
        ("e4", "my key is AKIAIOSFODNN7EXAMPLE"),
    ]);
    let (st, b) = send(&s, Method::POST, &ingest_path("s1"), &t, Some(grown)).await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["new_events"], 2);
    assert!(b["skipped"].as_array().is_none_or(Vec::is_empty), "{b}");
    let id2 = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert_ne!(id2, id);
    assert_eq!(settled(&s, &t, &id2).await["state"], "succeeded");
    // The turn with a key is remembered, the key redacted.
    assert_eq!(search(&s, &t, "key").await[0], "my key is [REDACTED]");
    assert!(search(&s, &t, "AKIAIOSFODNN7EXAMPLE").await.is_empty());
    assert_eq!(search(&s, &t, "cello").await[0], "I am learning the cello");
    assert!(search(&s, &t, "AKIAIOSFODNN7EXAMPLE").await.is_empty());
    // The outbox's metrics: counters, depth and delivery latency.
    let page = client()
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "hippocamp_outbox_admitted_total 2",
        "hippocamp_outbox_delivered_events_total 4",
        "hippocamp_outbox_queue_depth 0",
        "hippocamp_outbox_jobs{state=\"succeeded\"} 2",
    ] {
        assert!(page.lines().any(|l| l == line), "{line} not in\n{page}");
    }
    assert!(
        page.contains("hippocamp_outbox_batch_delivery_seconds"),
        "{page}"
    );

    // Bad input: a typed error, nothing queued.
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &t,
        Some(json!({"events": [event("e5", "x")], "extra": 1})),
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("invalid_argument"))
    );
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{}?wait=1", ingest_path("s1")),
        &t,
        Some(events(&[("e5", "x")])),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{b}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_its_scopes_alone_and_a_cancel_drops_its_events() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    // Nothing is delivered while the processor is stopped: the job stays
    // pending for the cancel.
    s.services.stop_processor().await;
    let alice = s.all_permissions("shop", Some("alice"));
    let bob = s.all_permissions("shop", Some("bob"));
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &alice,
        Some(events(&[("e1", "my locker code is on a yellow note")])),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let id = b["jobs"][0]["id"].as_str().unwrap().to_owned();

    // Bob, on his own path, does not see (or cancel) alice's job.
    for (method, suffix) in [(Method::GET, ""), (Method::POST, "/cancel")] {
        let (st, b) = send(
            &s,
            method,
            &format!("/v1/apps/shop/users/bob/memory/jobs/{id}{suffix}"),
            &bob,
            None,
        )
        .await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::NOT_FOUND, json!("not_found"))
        );
    }
    // Nor on hers: his token is bound to him.
    let (st, _) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/jobs/{id}"),
        &bob,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // A read-only token reads the job but may not cancel it.
    let reader = s.token(Some("shop"), Some("alice"), "memory:read");
    let (st, b) = send(
        &s,
        Method::GET,
        &format!("{ALICE}/memory/jobs/{id}"),
        &reader,
        None,
    )
    .await;
    assert_eq!((st, b["state"].clone()), (StatusCode::OK, json!("pending")));
    let (st, _) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/jobs/{id}/cancel"),
        &reader,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // A job's status is deleted only once it finished, by a writer of its
    // own scope.
    let job_path = format!("{ALICE}/memory/jobs/{id}");
    let (st, b) = send(&s, Method::DELETE, &job_path, &alice, None).await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::CONFLICT, json!("job_active"))
    );
    let (st, _) = send(&s, Method::DELETE, &job_path, &reader, None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("/v1/apps/shop/users/bob/memory/jobs/{id}"),
        &bob,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/jobs/{id}/cancel"),
        &alice,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(
        (b["state"].clone(), b["cancel_reason"].clone()),
        (json!("cancelled"), json!("requested"))
    );
    // The processor starts again: the cancelled job delivers nothing.
    s.services.start_processor().unwrap();
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s2"),
        &alice,
        Some(events(&[("e1", "a later turn about kites")])),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let later = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(settled(&s, &alice, &later).await["state"], "succeeded");
    assert!(search(&s, &alice, "locker yellow note").await.is_empty());
    assert_eq!(
        search(&s, &alice, "kites").await,
        ["a later turn about kites"]
    );

    // The operator's view: counters over every app, for a token over every
    // app only.
    let (st, stats) = send(&s, Method::GET, "/v1/outbox/stats", &s.admin, None).await;
    assert_eq!(st, StatusCode::OK, "{stats}");
    assert_eq!(
        (
            stats["succeeded"].clone(),
            stats["cancelled"].clone(),
            stats["cancelled_requested_total"].clone(),
            stats["pending"].clone()
        ),
        (json!(1), json!(1), json!(1), json!(0))
    );
    let app_admin = s.token(Some("shop"), None, "admin");
    let (st, _) = send(&s, Method::GET, "/v1/outbox/stats", &app_admin, None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let (st, b) = send(
        &s,
        Method::POST,
        "/v1/outbox/prune?limit=10",
        &s.admin,
        None,
    )
    .await;
    // Within the retention nothing is old enough to go.
    assert_eq!((st, b["pruned"].clone()), (StatusCode::OK, json!(0)));
    let (st, _) = send(&s, Method::POST, "/v1/outbox/prune?lmit=10", &s.admin, None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    // The cancelled job's status goes when its scope deletes it.
    let (st, _) = send(&s, Method::DELETE, &job_path, &alice, None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    for method in [Method::GET, Method::DELETE] {
        let (st, _) = send(&s, method, &job_path, &alice, None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
    }
    let (_, stats) = send(&s, Method::GET, "/v1/outbox/stats", &s.admin, None).await;
    assert_eq!(stats["cancelled"], json!(0));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_session_stays_erased_however_it_is_resubmitted() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let session = events(&[
        ("e1", "I was diagnosed with asthma"),
        ("e2", "I walk my dog at dawn"),
    ]);
    let (_, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &t,
        Some(session.clone()),
    )
    .await;
    let id = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(settled(&s, &t, &id).await["state"], "succeeded");
    assert_eq!(
        search(&s, &t, "asthma").await[0],
        "I was diagnosed with asthma"
    );

    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/sessions/s1?confirm=shop/alice/s1"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    // Through the outbox: nothing new.
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &t,
        Some(session.clone()),
    )
    .await;
    assert_eq!((st, b["new_events"].clone()), (StatusCode::OK, json!(0)));
    // Directly: each event is skipped as erased.
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s1/events"),
        &t,
        Some(session),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["added"], json!([]), "{b}");
    let reasons: Vec<&str> = b["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["erased", "erased"], "{b}");
    assert!(search(&s, &t, "asthma").await.is_empty());
    assert!(search(&s, &t, "dog dawn").await.is_empty());

    // Queued work for a user who is then erased ends cancelled, erased,
    // and recreates nothing once delivery resumes.
    s.services.stop_processor().await;
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s2"),
        &t,
        Some(events(&[("e1", "my passport expires in June")])),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let queued = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    s.services.start_processor().unwrap();
    let ended = settled(&s, &t, &queued).await;
    assert_eq!(
        (ended["state"].clone(), ended["cancel_reason"].clone()),
        (json!("cancelled"), json!("erased")),
        "{ended}"
    );
    // A new session id starts over on purpose.
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s3"),
        &t,
        Some(events(&[("e1", "I walk my dog at dawn")])),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let fresh = b["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(settled(&s, &t, &fresh).await["state"], "succeeded");
    assert_eq!(search(&s, &t, "dog dawn").await[0], "I walk my dog at dawn");
    assert!(search(&s, &t, "passport").await.is_empty());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiles_without_an_outbox_or_memory_say_so() {
    // Ephemeral: memory answers, the ingest route does not.
    let s = TestServer::start(Profile::Ephemeral, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (st, b) = send(
        &s,
        Method::POST,
        &ingest_path("s1"),
        &t,
        Some(events(&[("e1", "x")])),
    )
    .await;
    assert_eq!(
        (st, b["code"].clone()),
        (StatusCode::SERVICE_UNAVAILABLE, json!("outbox_unavailable"))
    );
    let (st, caps) = send(&s, Method::GET, "/v1/memory/capabilities", &t, None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(caps["async_ingestion"], false);
    let (st, _) = send(&s, Method::GET, "/v1/outbox/stats", &s.admin, None).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;

    // Disabled: every memory route answers memory_disabled; artifacts work.
    let s = TestServer::start(Profile::Disabled, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    for (method, path, body) in [
        (Method::GET, "/v1/memory/capabilities".to_owned(), None),
        (
            Method::POST,
            format!("{ALICE}/memory/entries"),
            Some(json!({"content": "x"})),
        ),
        (
            Method::POST,
            format!("{ALICE}/memory/search"),
            Some(json!({"query": "x"})),
        ),
        (
            Method::POST,
            ingest_path("s1"),
            Some(events(&[("e1", "x")])),
        ),
        (
            Method::DELETE,
            format!("{ALICE}/memory?confirm=shop/alice"),
            None,
        ),
    ] {
        let (st, b) = send(&s, method, &path, &t, body).await;
        assert_eq!(
            (st, b["code"].clone()),
            (StatusCode::SERVICE_UNAVAILABLE, json!("memory_disabled")),
            "{path}"
        );
    }
    let r = client()
        .put(s.url(&format!("{ALICE}/artifacts/notes.txt")))
        .bearer_auth(&t)
        .body("kept")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;

    // Durable: the capabilities say ingestion can be queued, and a stopped
    // processor makes the server unready instead of writing synchronously.
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (_, caps) = send(&s, Method::GET, "/v1/memory/capabilities", &t, None).await;
    assert_eq!(caps["async_ingestion"], true);
    let names: Vec<&str> = caps["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"outbox.max_active_jobs_per_scope"),
        "{names:?}"
    );
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.services.stop_processor().await;
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    s.services.start_processor().unwrap();
    let r = client().get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;
}
