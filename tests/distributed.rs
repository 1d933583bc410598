//! Two `hippocamp serve` processes in the distributed profile over one
//! PostgreSQL and one S3 server (black box, over HTTP): a write through one
//! is read through the other (memory, artifacts, consent), an erasure
//! through one is seen by the other, a token made or revoked with the CLI
//! works or is refused on both within the documented bound, SIGKILL of
//! one loses nothing it acknowledged, and the servers' sweeper repairs the
//! bucket.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use object_store::ObjectStoreExt as _;
use serde_json::{Value, json};
use support::distributed::Deployment;

/// How long a token made or revoked on one server may take to reach the
/// other. Servers poll every 500 ms; this bound is far above it, so the
/// checks below are of propagation, not of latency on a loaded machine.
const PROPAGATION: Duration = Duration::from_secs(30);

const SCOPE: &str = "/v1/apps/shop/users/alice";

struct Client {
    http: reqwest::Client,
    token: String,
}

impl Client {
    fn new(token: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            token: token.to_owned(),
        }
    }

    async fn post(&self, url: String, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, url: String) -> (u16, Value) {
        let r = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }
}

async fn search(c: &Client, base: &str, q: &str) -> (u16, Vec<String>) {
    let (status, v) = c
        .post(format!("{base}{SCOPE}/memory/search"), json!({"query": q}))
        .await;
    let ids = v["hits"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|h| h["id"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    (status, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines, clippy::many_single_char_names)] // one deployment, step by step; servers a and b
async fn two_servers_share_one_database_and_one_bucket() {
    let Some(d) = Deployment::new() else {
        return;
    };
    let a = d.serve();
    let admin = a
        .admin
        .clone()
        .expect("the first server makes the admin token");
    let mut b = d.serve();
    assert!(
        b.admin.is_none(),
        "the second server finds the shared admin token"
    );
    let http = reqwest::Client::new();
    for s in [&a, &b] {
        let r = http.get(s.url("/readyz")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
    // A token made with the CLI works on both servers.
    let made = d.token(&[
        "create",
        "--app",
        "shop",
        "--user",
        "alice",
        "--permissions",
        "memory:read,memory:write,memory:erase,artifacts:read,artifacts:write",
    ]);
    let c = Client::new(made["token"].as_str().unwrap());
    // Servers poll the shared tokens every 500 ms.
    for s in [&a, &b] {
        let started = Instant::now();
        while search(&c, &s.base, "warm up").await.0 == 401 {
            assert!(
                started.elapsed() < PROPAGATION,
                "a new token is still unknown"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    let (status, v) = c
        .post(
            a.url(&format!("{SCOPE}/memory/entries")),
            json!({"content": "alice keeps three hives of bees"}),
        )
        .await;
    assert!(status == 200 || status == 201, "{status} {v}");
    let id = v["entry"]["id"].as_str().unwrap().to_owned();
    let (status, hits) = search(&c, &b.base, "bees").await;
    assert_eq!((status, hits), (200, vec![id.clone()]));
    // An artifact written through B is read through A, byte for byte.
    let body = b"hive inspection report".to_vec();
    let r = c
        .http
        .put(b.url(&format!("{SCOPE}/artifacts/report.txt")))
        .bearer_auth(&c.token)
        .header("content-type", "text/plain")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = c
        .http
        .get(a.url(&format!("{SCOPE}/artifacts/report.txt")))
        .bearer_auth(&c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().to_vec(), body);
    // Listed through A from the catalog in PostgreSQL.
    let (status, v) = c.get(a.url(&format!("{SCOPE}/artifacts"))).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.to_string().contains("report.txt"), "{v}");
    // Consent recorded through A is what B reads.
    let r = c
        .http
        .put(a.url(&format!("{SCOPE}/consent")))
        .bearer_auth(&c.token)
        .json(&json!({"consent_id": "form-7", "scope": "all"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let (status, v) = c.get(b.url(&format!("{SCOPE}/consent"))).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.to_string().contains("form-7"), "{v}");
    // The audit log (admin) holds the consent, as recorded through A.
    let (status, v) = Client::new(&admin).get(b.url("/v1/audit")).await;
    assert_eq!(status, 200, "{v}");
    assert!(v.to_string().contains("consent_recorded"), "{v}");
    // An erasure through B: A finds nothing and reports the new epoch.
    let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
    let confirm = hippocamp_core::erasure_confirmation(&scope, None);
    let r = c
        .http
        .delete(b.url(&format!("{SCOPE}/memory")))
        .query(&[("confirm", confirm.as_str())])
        .bearer_auth(&c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let (_, hits) = search(&c, &a.base, "bees").await;
    assert!(hits.is_empty());
    let (status, v) = c.get(a.url(&format!("{SCOPE}/memory/epoch"))).await;
    assert_eq!((status, v["epoch"].as_u64()), (200, Some(1)), "{v}");

    // SIGKILL of A while it acknowledges writes: B serves every one.
    let writer = {
        let c = Client::new(&c.token);
        let url = a.url(&format!("{SCOPE}/memory/entries"));
        tokio::spawn(async move {
            let mut acked = Vec::new();
            for i in 0.. {
                let sent = c
                    .http
                    .post(&url)
                    .bearer_auth(&c.token)
                    .json(&json!({"content": format!("fact {i} written before the kill")}))
                    .send()
                    .await;
                let Ok(r) = sent else { break };
                let Ok(v) = r.json::<Value>().await else {
                    break;
                };
                match v["entry"]["id"].as_str() {
                    Some(id) => acked.push(id.to_owned()),
                    None => break,
                }
            }
            acked
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut a = a;
    a.kill();
    let acked = writer.await.unwrap();
    assert!(
        !acked.is_empty(),
        "no write was acknowledged before the kill"
    );
    for id in &acked {
        let (status, v) = c.get(b.url(&format!("{SCOPE}/memory/entries/{id}"))).await;
        assert_eq!(
            status, 200,
            "{id} acknowledged by the killed server is lost: {v}"
        );
    }

    // Revoked with the CLI: refused by B once it has polled.
    let revoked = d.token(&["revoke", made["record"]["id"].as_str().unwrap()]);
    assert_eq!(revoked["revoked"], true);
    let started = Instant::now();
    loop {
        let (status, _) = search(&c, &b.base, "bees").await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            started.elapsed() < PROPAGATION,
            "a revoked token still works after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    b.kill();
}

fn events(n: usize, tag: &str) -> Value {
    let events: Vec<Value> = (0..n)
        .map(|i| {
            json!({"id": format!("{tag}{i}"), "author": "user", "timestamp_ms": i + 1,
                   "content": {"role": "user", "parts": [{"text": format!("{tag} said thing number {i}")}]}})
        })
        .collect();
    json!({ "events": events })
}

async fn wait_finished(c: &Client, base: &str, scope: &str, jobs: &[String]) -> Vec<String> {
    let started = Instant::now();
    loop {
        let mut states = Vec::new();
        for j in jobs {
            let (status, v) = c.get(format!("{base}{scope}/memory/jobs/{j}")).await;
            assert_eq!(status, 200, "{v}");
            states.push(v["state"].as_str().unwrap().to_owned());
        }
        if states
            .iter()
            .all(|s| s == "succeeded" || s == "failed" || s == "cancelled")
        {
            return states;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "jobs not finished: {states:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The outbox's jobs are shared: work queued through one server and
/// erased through the other stays erased; work queued through one that is
/// then SIGKILLed mid-delivery is finished by the other's processor (after
/// the dead claim's lease runs out), every event stored exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::many_single_char_names, clippy::too_many_lines)] // servers a and b, step by step
async fn queued_work_is_shared_fenced_and_taken_over() {
    let Some(d) = Deployment::with(
        "[outbox_processor]\nlease_ms = 5000\ncall_timeout_ms = 2000\npoll_interval_ms = 20\n",
    ) else {
        return;
    };
    let mut a = d.serve();
    let c = Client::new(&a.admin.clone().unwrap());
    let b = d.serve();
    // Queued through A, erased through B at once: nothing of it survives,
    // whichever jobs were delivered before the erasure.
    let carol = "/v1/apps/shop/users/carol";
    let (status, v) = c
        .post(
            a.url(&format!("{carol}/memory/sessions/s1/ingest")),
            events(1200, "c"),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let carol_jobs: Vec<String> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    let scope = hippocamp_core::MemoryScope::parse("shop", "carol").unwrap();
    let r = c
        .http
        .delete(b.url(&format!("{carol}/memory")))
        .query(&[(
            "confirm",
            hippocamp_core::erasure_confirmation(&scope, None),
        )])
        .bearer_auth(&c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    wait_finished(&c, &b.base, carol, &carol_jobs).await;
    // Queued through A, which is SIGKILLed once its processor delivered a
    // batch and before it delivered the last (B is down, so A holds the
    // claim); a new server's processor finishes the job.
    let mut b = b;
    b.kill();
    let bob = "/v1/apps/shop/users/bob";
    let (status, v) = c
        .post(
            a.url(&format!("{bob}/memory/sessions/s1/ingest")),
            events(2500, "b"),
        )
        .await;
    assert_eq!(status, 202, "{v}");
    let bob_jobs: Vec<String> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    let job = bob_jobs[0].clone();
    let started = Instant::now();
    loop {
        let (_, v) = c.get(a.url(&format!("{bob}/memory/jobs/{job}"))).await;
        let (done, of) = (
            v["delivered_batches"].as_u64().unwrap(),
            v["batches"].as_u64().unwrap(),
        );
        assert!(of > 1 && done < of, "the job ended before the kill: {v}");
        if done >= 1 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{v}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.kill();
    let b = d.serve();
    let states = wait_finished(&c, &b.base, bob, &bob_jobs).await;
    assert!(states.iter().all(|s| s == "succeeded"), "{states:?}");
    let (_, v) = c.get(b.url(&format!("{bob}/memory/jobs/{job}"))).await;
    assert_eq!(
        v["attempts"], 2,
        "the cut-off attempt counts, the take-over finishes: {v}"
    );
    // Every event once: 2,500 distinct entries.
    let mut ids = std::collections::BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cur) => b.url(&format!("{bob}/memory/entries?limit=100&cursor={cur}")),
            None => b.url(&format!("{bob}/memory/entries?limit=100")),
        };
        let (status, v) = c.get(url).await;
        assert_eq!(status, 200, "{v}");
        for e in v["entries"].as_array().unwrap() {
            assert!(
                ids.insert(e["id"].as_str().unwrap().to_owned()),
                "a duplicate entry"
            );
        }
        match v["next_cursor"].as_str() {
            Some(n) => cursor = Some(n.to_owned()),
            None => break,
        }
    }
    assert_eq!(ids.len(), 2_500);
    let (_, hits) = {
        let (status, v) = c
            .post(
                b.url(&format!("{carol}/memory/search")),
                json!({"query": "carol said thing"}),
            )
            .await;
        (status, v["hits"].as_array().map_or(0, Vec::len))
    };
    assert_eq!(hits, 0, "queued work outlived the erasure");
    let (status, v) = c
        .post(
            b.url(&format!("{carol}/memory/search")),
            json!({"query": "thing number"}),
        )
        .await;
    assert_eq!(
        (status, v["hits"].as_array().map_or(0, Vec::len)),
        (200, 0),
        "{v}"
    );
}

/// A session erased through one server while the other server's
/// processor may be delivering it (H3 of the 2026-12-07 review: the other
/// server's call landed after the erasure and wrote the session back):
/// once the erasure is acknowledged, nothing of the session is ever
/// searchable again, through either server, whichever processor held the
/// job. Long turns make a delivery analyse its batch for a while before
/// it takes the scope's row lock: before the session fence, the first
/// round already failed (checked against the build before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::many_single_char_names)] // servers a and b
async fn a_session_erased_through_one_server_is_never_written_back_by_the_other() {
    let Some(d) = Deployment::with("[outbox_processor]\npoll_interval_ms = 5\n") else {
        return;
    };
    let a = d.serve();
    let c = Client::new(&a.admin.clone().unwrap());
    let b = d.serve();
    let dave = "/v1/apps/shop/users/dave";
    let scope = hippocamp_core::MemoryScope::parse("shop", "dave").unwrap();
    for round in 0..6 {
        let tag = format!("round{round}x");
        let session = format!("s{round}");
        // Long turns: a delivery spends a while analysing its batch before
        // it takes the scope's row lock, the window an erasure through the
        // other server falls into.
        let long: Vec<Value> = (0..2000)
            .map(|i| {
                let text = format!("{tag} said thing number {i}: {}", "word salad ".repeat(180));
                json!({"id": format!("{tag}{i}"), "author": "user", "timestamp_ms": i + 1,
                       "content": {"role": "user", "parts": [{"text": text}]}})
            })
            .collect();
        let (status, v) = c
            .post(
                a.url(&format!("{dave}/memory/sessions/{session}/ingest")),
                json!({ "events": long }),
            )
            .await;
        assert_eq!(status, 202, "{v}");
        let jobs: Vec<String> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect();
        // Erase once delivery is under way (a batch recorded).
        let started = Instant::now();
        loop {
            let (_, v) = c
                .get(b.url(&format!("{dave}/memory/jobs/{}", jobs[0])))
                .await;
            if v["delivered_batches"].as_u64().unwrap_or(0) >= 1 || v["state"] != "pending" {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{v}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let sid = hippocamp_core::SessionId::new(session.clone()).unwrap();
        let r = c
            .http
            .delete(b.url(&format!("{dave}/memory/sessions/{session}")))
            .query(&[(
                "confirm",
                hippocamp_core::erasure_confirmation(&scope, Some(&sid)),
            )])
            .bearer_auth(&c.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        wait_finished(&c, &b.base, dave, &jobs).await;
        // Whatever was in flight on either server has landed or been
        // refused by now; give a straggler time anyway.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for s in [&a, &b] {
            let (status, v) = c
                .post(
                    s.url(&format!("{dave}/memory/search")),
                    json!({"query": format!("{tag} said thing"), "limit": 50}),
                )
                .await;
            assert_eq!(status, 200, "{v}");
            let back: Vec<&str> = v["hits"]
                .as_array()
                .map(|h| h.iter().filter_map(|h| h["id"].as_str()).collect())
                .unwrap_or_default();
            assert!(
                back.is_empty(),
                "round {round}: the erased session came back: {back:?}"
            );
        }
    }
}

/// The sweeper of a running server repairs the bucket: content that no
/// version references (what a put whose commit answer was lost leaves)
/// goes once older than the grace; a version's content stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_removes_content_no_version_references() {
    let Some(d) = Deployment::with(
        "[sweeper]\ninterval_ms = 200\nartifact_repair_grace_ms = 1000\n\n[artifacts]\ncall_timeout_ms = 1000\n",
    ) else {
        return;
    };
    let a = d.serve();
    let made = d.token(&[
        "create",
        "--app",
        "shop",
        "--user",
        "alice",
        "--permissions",
        "artifacts:read,artifacts:write",
    ]);
    let c = Client::new(made["token"].as_str().unwrap());
    let put = || {
        c.http
            .put(a.url(&format!("{SCOPE}/artifacts/kept.txt")))
            .bearer_auth(&c.token)
            .header("content-type", "text/plain")
            .body("a version's content")
            .send()
    };
    let started = Instant::now();
    loop {
        let r = put().await.unwrap();
        if r.status() == 201 {
            break;
        }
        assert!(
            r.status() == 401 && started.elapsed() < PROPAGATION,
            "{}",
            r.status()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let s3 = hippocamp_testkit::s3_server().unwrap();
    let bucket = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&s3.endpoint)
        .with_bucket_name(&s3.bucket)
        .with_region("us-east-1")
        .with_access_key_id(&s3.access_key)
        .with_secret_access_key(&s3.secret_key)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    let orphan = object_store::path::Path::from(format!("{}/content/orphan", d.name));
    bucket
        .put(&orphan, bytes::Bytes::from_static(b"left behind").into())
        .await
        .unwrap();
    let started = Instant::now();
    while bucket.head(&orphan).await.is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the orphan is still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = c
        .http
        .get(a.url(&format!("{SCOPE}/artifacts/kept.txt")))
        .bearer_auth(&c.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "a version's content");
}
