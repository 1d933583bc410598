//! The route table is the contract: for every route, a token lacking the
//! permission its row declares is refused (403) and changes nothing, a
//! token holding only that permission is let in, and every error code its
//! row declares is answered when its cause is given.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use hippocamp_core::AppName;
use hippocamp_server::Profile;
use hippocamp_server::api::{Route, routes};
use hippocamp_server::auth::{Grant, Permission};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{TestServer, body, client, method, path, snapshot};

fn j(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or(Value::Null)
}

struct Rq {
    method: Method,
    path: String,
    token: Option<String>,
    body: Option<Vec<u8>>,
    headers: Vec<(&'static str, String)>,
}

async fn send(s: &TestServer, rq: Rq) -> (StatusCode, Vec<u8>) {
    let mut b = client().request(rq.method, s.url(&rq.path));
    if let Some(t) = rq.token {
        b = b.bearer_auth(t);
    }
    for (k, v) in rq.headers {
        b = b.header(k, v);
    }
    if let Some(body) = rq.body {
        b = b.body(body);
    }
    let r = b.send().await.unwrap();
    (r.status(), r.bytes().await.unwrap().to_vec())
}

fn token_with(s: &TestServer, app: Option<&str>, perms: BTreeSet<Permission>) -> String {
    let g = Grant {
        app: app.map(|a| AppName::new(a).unwrap()),
        user: None,
        permissions: perms,
    };
    s.services.tokens.create("contract", g).unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_checks_exactly_the_permission_its_row_declares() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let all: BTreeSet<Permission> = Permission::ALL
        .into_iter()
        .filter(|p| *p != Permission::Admin)
        .collect();
    let owner = token_with(&s, Some("shop"), all.clone());
    let (st, _) = send(
        &s,
        Rq {
            method: Method::POST,
            path: "/v1/apps/shop/users/alice/memory/entries".into(),
            token: Some(owner.clone()),
            body: Some(br#"{"content":"alice secret plan"}"#.to_vec()),
            headers: vec![],
        },
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    for prefix in [
        "/v1/apps/shop",
        "/v1/apps/shop/users/alice",
        "/v1/apps/shop/users/alice/sessions/s1",
    ] {
        let (st, _) = send(
            &s,
            Rq {
                method: Method::PUT,
                path: format!("{prefix}/artifacts/doc.txt"),
                token: Some(owner.clone()),
                body: Some(b"alice".to_vec()),
                headers: vec![],
            },
        )
        .await;
        assert_eq!(st, StatusCode::CREATED);
    }
    let before = snapshot(&s).await;
    let mut checked = 0;
    for r in routes() {
        let Some(perm) = r.permission else { continue };
        // Every permission of the right app, but this one: refused.
        let lacking: BTreeSet<Permission> = all.iter().copied().filter(|p| *p != perm).collect();
        let t = token_with(&s, Some("shop"), lacking);
        let (st, b) = send(
            &s,
            Rq {
                method: method(r),
                path: path(r, "shop", "alice", "doc.txt"),
                token: Some(t),
                body: body(r),
                headers: vec![],
            },
        )
        .await;
        assert_eq!(
            st,
            StatusCode::FORBIDDEN,
            "{} without {}",
            r.id,
            perm.as_str()
        );
        if r.method != "head" {
            assert_eq!(j(&b)["code"], "forbidden", "{}", r.id);
        }
        checked += 1;
    }
    assert!(checked >= 29, "{checked}");
    assert_eq!(snapshot(&s).await, before, "a refused request changed data");
    for r in routes() {
        let Some(perm) = r.permission else { continue };
        // This permission alone: let in (whatever the outcome). The
        // outbox's global routes take it over every app only: an
        // app-bound admin token is refused.
        let app = (perm != Permission::Admin).then_some("shop");
        // An app's own listing takes an admin of that app.
        if app.is_none() && !r.path.contains("{app}") {
            let bound = token_with(&s, Some("shop"), BTreeSet::from([perm]));
            let (st, _) = send(
                &s,
                Rq {
                    method: method(r),
                    path: path(r, "shop", "alice", "missing.txt"),
                    token: Some(bound),
                    body: body(r),
                    headers: vec![],
                },
            )
            .await;
            assert_eq!(
                st,
                StatusCode::FORBIDDEN,
                "{} with an app-bound admin",
                r.id
            );
        }
        let t = token_with(&s, app, BTreeSet::from([perm]));
        let (st, b) = send(
            &s,
            Rq {
                method: method(r),
                path: path(r, "shop", "alice", "missing.txt"),
                token: Some(t),
                body: body(r),
                headers: vec![],
            },
        )
        .await;
        assert_ne!(
            st,
            StatusCode::FORBIDDEN,
            "{} with only {}: {}",
            r.id,
            perm.as_str(),
            String::from_utf8_lossy(&b)
        );
    }
    s.stop().await;
}

/// How to cause `code` on route `r`, on a server with tiny limits; some
/// causes need a step first (an erasure, a first write).
async fn cause(s: &TestServer, r: &'static Route, code: &str, token: &str) -> Rq {
    let scoped = |name: &str| path(r, "shop", "alice", name);
    let rq = |path: String, body: Option<Vec<u8>>| Rq {
        method: method(r),
        path,
        token: Some(token.to_owned()),
        body,
        headers: vec![],
    };
    let with_query = |q: &str| {
        let p = scoped("doc.txt");
        let sep = if p.contains('?') { '&' } else { '?' };
        format!("{p}{sep}{q}")
    };
    match (r.id, code) {
        (_, "unauthorized") => Rq {
            token: None,
            ..rq(scoped("doc.txt"), body(r))
        },
        (_, "invalid_argument") => rq(with_query("no_such_option=1"), body(r)),
        (_, "forbidden") => {
            let rival = s.all_permissions("rival", None);
            Rq {
                token: Some(rival),
                ..rq(scoped("doc.txt"), body(r))
            }
        }
        ("update_entry", "not_found") => rq(scoped(""), body(r)),
        (_, "not_found") => rq(scoped("missing.txt"), None),
        // A revision (the second put) is refused a secret, as a
        // correction is.
        ("put_item", "sensitive_content") => {
            send(s, rq(scoped(""), body(r))).await;
            rq(
                scoped(""),
                Some(br#"{"value":{"text":"key AKIAIOSFODNN7EXAMPLE"}}"#.to_vec()),
            )
        }
        // Two items into a session that holds one.
        ("append_agent_session_items", "quota_exceeded") => rq(
            scoped(""),
            Some(br#"{"items":[{"content":"a"},{"content":"b"}]}"#.to_vec()),
        ),
        ("put_item", "quota_exceeded") => {
            let fill = Rq {
                method: Method::POST,
                path: "/v1/apps/shop/users/alice/memory/entries".into(),
                token: Some(token.to_owned()),
                body: Some(br#"{"content":"fills the scope"}"#.to_vec()),
                headers: vec![],
            };
            send(s, fill).await;
            rq(scoped(""), body(r))
        }
        ("update_entry", "sensitive_content" | "quota_exceeded" | "legal_hold") => {
            let id = first_entry(s, token).await;
            let content = match code {
                "sensitive_content" => "key AKIAIOSFODNN7EXAMPLE".to_owned(),
                // Past the scope's bytes (see the server's limits).
                "quota_exceeded" => "y".repeat(500),
                _ => "held and corrected".to_owned(),
            };
            rq(
                format!("/v1/apps/shop/users/alice/memory/entries/{id}"),
                Some(json!({ "content": content }).to_string().into_bytes()),
            )
        }
        ("restore", "sensitive_content") => rq(scoped(""), Some(export_of(&["key AKIAIOSFODNN7EXAMPLE"]))),
        ("restore", "quota_exceeded" | "consent_required") => {
            rq(scoped(""), Some(export_of(&["one", "two"])))
        }
        (_, "unsupported_media_type") => Rq {
            headers: vec![("content-type", "text/plain".to_owned())],
            ..rq(scoped(""), body(r))
        },
        (_, "range_not_satisfiable") => Rq {
            headers: vec![("range", "bytes=100-".to_owned())],
            ..rq(scoped("doc.txt"), None)
        },
        // A secret in the text is redacted; in an identifier, refused.
        ("add_entry", "sensitive_content") => rq(
            scoped(""),
            Some(br#"{"content":"x","provenance":{"author":"AKIAIOSFODNN7EXAMPLE"}}"#.to_vec()),
        ),
        ("add_entry", "idempotency_conflict") => {
            let first = rq(
                scoped(""),
                Some(br#"{"content":"one","idempotency_key":"k"}"#.to_vec()),
            );
            send(s, first).await;
            rq(
                scoped(""),
                Some(br#"{"content":"two","idempotency_key":"k"}"#.to_vec()),
            )
        }
        ("add_entry" | "add_events", "stale_epoch") => {
            let erase = Rq {
                method: Method::DELETE,
                path: "/v1/apps/shop/users/alice/memory?confirm=shop/alice".into(),
                token: Some(token.to_owned()),
                body: None,
                headers: vec![],
            };
            send(s, erase).await;
            rq(with_query("epoch=0"), body(r))
        }
        ("add_entry" | "add_events", "future_epoch") => rq(with_query("epoch=999"), body(r)),
        ("add_entry", "quota_exceeded") => {
            send(s, rq(scoped(""), Some(br#"{"content":"fills the scope"}"#.to_vec()))).await;
            rq(scoped(""), Some(br#"{"content":"one too many"}"#.to_vec()))
        }
        ("add_events", "quota_exceeded") => rq(
            scoped(""),
            Some(
                json!({"events": [
                    {"id": "q1", "author": "user", "timestamp_ms": 1, "content": {"parts": [{"text": "first"}]}},
                    {"id": "q2", "author": "user", "timestamp_ms": 2, "content": {"parts": [{"text": "second"}]}},
                ]})
                .to_string()
                .into_bytes(),
            ),
        ),
        // Within `max_artifact_bytes` (32), past the scope's 32 bytes with
        // the 4 already stored.
        (id, "quota_exceeded") if id.starts_with("put_artifact") => {
            rq(scoped("big.bin"), Some(vec![0u8; 30]))
        }
        (id, "payload_too_large") if id.starts_with("put_artifact") => {
            rq(scoped("big.bin"), Some(vec![0u8; 64]))
        }
        (_, "payload_too_large") => rq(scoped(""), Some(vec![b' '; 2_048])),
        (_, "confirmation_required") => {
            let p = scoped("doc.txt");
            rq(p.split('?').next().unwrap_or(&p).to_owned(), None)
        }
        // Deleting a held user's memory file, or one whose index is
        // retained (see `policy_for`).
        ("memory_tool", "legal_hold" | "retention") => {
            send(s, rq(scoped(""), body(r))).await;
            rq(
                scoped(""),
                Some(br#"{"command":"delete","path":"/memories/planted.md"}"#.to_vec()),
            )
        }
        // Within the artifact bound, past the scope's bytes.
        ("memory_tool", "quota_exceeded") => rq(
            scoped(""),
            Some(
                br#"{"command":"create","path":"/memories/big.md","file_text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#
                    .to_vec(),
            ),
        ),
        // The item's memory entry is held or retained: the pop erases
        // nothing.
        ("pop_agent_session_item", "retention" | "legal_hold") => {
            let append = Rq {
                method: Method::POST,
                path: "/v1/apps/shop/users/alice/agent-sessions/s1/items".into(),
                token: Some(token.to_owned()),
                body: Some(br#"{"items":[{"role":"user","content":"kept"}]}"#.to_vec()),
                headers: vec![],
            };
            let (st, b) = send(s, append).await;
            assert_eq!(st, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
            rq(scoped(""), None)
        }
        // Alice is held (see `policy_for`): her artifacts too.
        (id, "legal_hold") if id.starts_with("delete_artifact") => {
            let p = scoped("doc.txt");
            rq(format!("{p}?all=true"), None)
        }
        // Alice is held (see `policy_for`): the policy refuses first.
        (_, "legal_hold") => rq(scoped("doc.txt"), None),
        ("put_consent", "sensitive_content") => rq(
            scoped(""),
            Some(br#"{"consent_id":"AKIAIOSFODNN7EXAMPLE","scope":"all"}"#.to_vec()),
        ),
        // An item is an entry: the one put holds the retention.
        ("delete_item", "retention") => {
            let put = Rq {
                method: Method::PUT,
                path: scoped(""),
                token: Some(token.to_owned()),
                body: Some(br#"{"value":{"text":"kept"}}"#.to_vec()),
                headers: vec![],
            };
            let (st, b) = send(s, put).await;
            assert_eq!(st, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            rq(scoped(""), None)
        }
        // A memory file's index is retained (see `policy_for`): deleting
        // the file erases nothing.
        ("delete_artifact_user", "retention") => {
            let p = scoped(".memories/kept.md");
            let put = Rq {
                method: Method::PUT,
                path: p.clone(),
                token: Some(token.to_owned()),
                body: Some(b"kept".to_vec()),
                headers: vec![],
            };
            let (st, b) = send(s, put).await;
            assert_eq!(st, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            rq(format!("{p}?all=true"), None)
        }
        // App `shop` retains entries for an hour (see `policy_for`):
        // what is deleted holds one.
        (id, "retention") => {
            let entries = "/v1/apps/shop/users/alice/memory/entries";
            let add = Rq {
                method: Method::POST,
                path: entries.into(),
                token: Some(token.to_owned()),
                body: Some(
                    br#"{"content":"kept","provenance":{"session_id":"s1"}}"#.to_vec(),
                ),
                headers: vec![],
            };
            let (st, b) = send(s, add).await;
            assert_eq!(st, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
            let created = j(&b)["entry"]["id"].as_str().unwrap().to_owned();
            match id {
                "delete_entry" => rq(format!("{entries}/{created}"), None),

                // One revision kept (see the server's limits): a
                // correction would drop the retained one.
                "update_entry" => rq(format!("{entries}/{created}"), body(r)),
                _ => rq(scoped("doc.txt"), None),
            }
        }
        // Memory off, or no outbox: any request of the route says so.
        (_, "memory_disabled" | "outbox_unavailable") => rq(scoped("doc.txt"), body(r)),
        // One event is more bytes than the scope may queue; or the
        // server's policy requires a consent for app `shop` (see
        // `policy_for`).
        ("put_artifact_user" | "put_artifact_session", "consent_required") => {
            rq(scoped("new.txt"), body(r))
        }
        ("ingest_events", "quota_exceeded") | (_, "consent_required") => rq(scoped(""), body(r)),
        ("delete_job", "job_active") => {
            // A queued job nobody delivers (the processor is stopped).
            s.services.stop_processor().await;
            let ingest = Rq {
                method: Method::POST,
                path: "/v1/apps/shop/users/alice/memory/sessions/s1/ingest".to_owned(),
                token: Some(token.to_owned()),
                body: Some(
                    br#"{"events":[{"id":"e1","author":"user","timestamp_ms":1,"content":{"role":"user","parts":[{"text":"queued"}]}}]}"#
                        .to_vec(),
                ),
                headers: vec![],
            };
            let (st, b) = send(s, ingest).await;
            assert_eq!(st, StatusCode::ACCEPTED, "{}", String::from_utf8_lossy(&b));
            let job = j(&b)["jobs"][0]["id"].as_str().unwrap().to_owned();
            rq(format!("/v1/apps/shop/users/alice/memory/jobs/{job}"), None)
        }
        ("start_consolidation", "unsupported") => {
            rq(scoped(""), Some(br#"{"mode":"extract"}"#.to_vec()))
        }
        // A run under way holds the user's slot.
        (_, "consolidation_running") => {
            let scope = hippocamp_core::MemoryScope::parse("shop", "alice").unwrap();
            let req: hippocamp_services::consolidation::StartRun =
                serde_json::from_value(json!({"mode": "dedupe"})).unwrap();
            s.services.consolidations.begin(&scope, &req).await.unwrap();
            rq(scoped(""), body(r))
        }
        // Applying a run already applied, reverting one only proposed.
        (id, "run_conflict") => {
            let apply = if id == "apply_consolidation" { "auto" } else { "review" };
            let start = Rq {
                method: Method::POST,
                path: "/v1/apps/shop/users/alice/memory/consolidations?wait=true".into(),
                token: Some(token.to_owned()),
                body: Some(
                    json!({"mode": "dedupe", "apply": apply})
                        .to_string()
                        .into_bytes(),
                ),
                headers: vec![],
            };
            let (st, b) = send(s, start).await;
            assert_eq!(st, StatusCode::OK, "{}", String::from_utf8_lossy(&b));
            let run = j(&b)["id"].as_str().unwrap().to_owned();
            let verb = id.trim_end_matches("_consolidation");
            rq(
                format!("/v1/apps/shop/users/alice/memory/consolidations/{run}/{verb}"),
                None,
            )
        }
        (id, code) => panic!("no cause is known for {code} on {id}: add one to this table"),
    }
}

/// Adds an entry to alice's memory; its id.
async fn first_entry(s: &TestServer, token: &str) -> String {
    let add = Rq {
        method: Method::POST,
        path: "/v1/apps/shop/users/alice/memory/entries".into(),
        token: Some(token.to_owned()),
        body: Some(br#"{"content":"a first fact"}"#.to_vec()),
        headers: vec![],
    };
    let (st, b) = send(s, add).await;
    assert_eq!(st, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
    j(&b)["entry"]["id"].as_str().unwrap().to_owned()
}

/// A well-formed export of alice with entries of these contents.
fn export_of(contents: &[&str]) -> Vec<u8> {
    let scope = json!({"app": "shop", "user": "alice"});
    let mut out = format!(
        "{}\n",
        json!({"kind": "export", "version": 1, "scope": scope, "exported_at_ms": 1})
    );
    for (i, c) in contents.iter().enumerate() {
        let digest = hippocamp_core::Sha256Digest::of(c.as_bytes());
        let entry = json!({
            "id": format!("mem-{:032x}", i + 1),
            "scope": scope,
            "content": c,
            "metadata": {},
            "provenance": {"event_ids": []},
            "digest": digest,
            "timestamp_ms": 1,
            "epoch": 0,
        });
        out.push_str(&json!({"kind": "entry", "entry": entry}).to_string());
        out.push('\n');
    }
    out.push_str(
        &json!({"kind": "end", "entries": contents.len(), "sessions": 0, "artifact_versions": null})
            .to_string(),
    );
    out.push('\n');
    out.into_bytes()
}

/// The policy a case needs: app `shop` requiring consent, retaining its
/// entries, or holding alice (and erasing on withdrawal, so withdrawing
/// meets the retention or the hold).
fn policy_for(code: &str, c: &mut hippocamp_server::Config) {
    let app = c.policy.apps.entry("shop".to_owned()).or_default();
    match code {
        "consent_required" => app.consent_required = true,
        "retention" => {
            app.retention_ms = Some(3_600_000);
            app.erase_on_withdrawal = true;
        }
        "legal_hold" => {
            app.legal_holds = vec!["alice".to_owned()];
            app.erase_on_withdrawal = true;
        }
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_declared_error_code_is_answered() {
    let mut answered = 0;
    for r in routes() {
        let mut codes: Vec<&str> = r.errors.to_vec();
        codes.push("unauthorized");
        for code in codes {
            // A fresh server per case: the causes must not meet. The
            // outbox's routes need the durable profile (it runs one),
            // except to show what the others answer.
            let outbox_route = matches!(
                r.id,
                "ingest_events"
                    | "job_status"
                    | "cancel_job"
                    | "delete_job"
                    | "outbox_stats"
                    | "outbox_prune"
            );
            let profile = match code {
                "memory_disabled" => Profile::Disabled,
                "outbox_unavailable" => Profile::Ephemeral,
                _ if outbox_route => Profile::Durable,
                _ => Profile::Ephemeral,
            };
            let s = TestServer::start(profile, |c| {
                policy_for(code, c);
                c.http.max_json_body_bytes = 1_024;
                c.memory.limits.max_entries_per_scope = 1;
                c.memory.limits.max_bytes_per_scope = 600;
                c.memory.limits.max_revisions = 1;
                c.memory.limits.max_events_per_request = 10;
                if r.id == "append_agent_session_items" {
                    c.sessions.max_events_per_session = 1;
                }
                c.artifacts.max_artifact_bytes = 32;
                c.artifacts.max_scope_bytes = 32;
                if code != "job_active" {
                    c.outbox.max_active_bytes_per_scope = 10;
                }
            })
            .await;
            let token = if r.permission == Some(Permission::Admin) {
                s.admin.clone()
            } else {
                s.all_permissions("shop", None)
            };
            // Something to read, in every artifact scope.
            for prefix in [
                "/v1/apps/shop",
                "/v1/apps/shop/users/alice",
                "/v1/apps/shop/users/alice/sessions/s1",
            ] {
                let put = Rq {
                    method: Method::PUT,
                    path: format!("{prefix}/artifacts/doc.txt"),
                    token: Some(token.clone()),
                    body: Some(b"tiny".to_vec()),
                    headers: vec![],
                };
                // A user's artifacts need the consent this case withholds.
                let expected = if code == "consent_required" && prefix != "/v1/apps/shop" {
                    StatusCode::FORBIDDEN
                } else {
                    StatusCode::CREATED
                };
                assert_eq!(send(&s, put).await.0, expected);
            }
            let rq = cause(&s, r, code, &token).await;
            let (st, b) = send(&s, rq).await;
            let row = hippocamp_server::error::lookup(code).unwrap();
            assert_eq!(
                st.as_u16(),
                row.status,
                "{} {code}: {}",
                r.id,
                String::from_utf8_lossy(&b)
            );
            if r.method != "head" {
                assert_eq!(
                    j(&b)["code"],
                    code,
                    "{}: {}",
                    r.id,
                    String::from_utf8_lossy(&b)
                );
            }
            answered += 1;
            s.stop().await;
        }
    }
    assert!(answered > 80, "{answered}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_overloaded_when_the_server_is_full() {
    let s = TestServer::start(Profile::Ephemeral, |c| c.http.max_concurrent_requests = 1).await;
    let token = s.all_permissions("shop", None);
    // Hold the only slot with an upload that has not finished.
    let (tx, rx) = futures::channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let upload = client()
        .put(s.url("/v1/apps/shop/artifacts/slow"))
        .bearer_auth(&token)
        .body(reqwest::Body::wrap_stream(rx));
    let held = tokio::spawn(async move { upload.send().await.unwrap().status() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for r in routes() {
        let (st, b) = send(
            &s,
            Rq {
                method: method(r),
                path: path(r, "shop", "alice", "doc.txt"),
                token: Some(token.clone()),
                body: body(r),
                headers: vec![],
            },
        )
        .await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{}", r.id);
        if r.method != "head" {
            assert_eq!(j(&b)["code"], "overloaded", "{}", r.id);
        }
    }
    drop(tx);
    assert_eq!(held.await.unwrap(), StatusCode::CREATED);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_scope_is_refused_while_every_worker_is_busy() {
    let s = TestServer::start(Profile::Durable, |c| {
        c.artifacts_router.max_active_scopes = 1;
    })
    .await;
    let shop = s.all_permissions("shop", None);
    let mall = s.all_permissions("mall", None);
    // An upload that has not finished holds the only worker.
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
    let upload = client()
        .put(s.url("/v1/apps/shop/artifacts/slow"))
        .bearer_auth(&shop)
        .body(reqwest::Body::wrap_stream(rx));
    let held = tokio::spawn(async move { upload.send().await.unwrap().status() });
    futures::SinkExt::send(&mut tx, Ok(b"part".to_vec()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = client()
        .put(s.url("/v1/apps/mall/artifacts/other"))
        .bearer_auth(&mall)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(r.headers().contains_key("retry-after"));
    let b: serde_json::Value = r.json().await.unwrap();
    assert_eq!(b["code"], "max_active_scopes_reached", "{b}");
    drop(tx);
    assert_eq!(held.await.unwrap(), StatusCode::CREATED);
    // Once the worker is free, the other scope is served.
    let r = client()
        .put(s.url("/v1/apps/mall/artifacts/other"))
        .bearer_auth(&mall)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    s.stop().await;
}

/// An app the operator suspended is out of reach on every route that
/// names it: each is refused, and the data is exactly as it was once the
/// suspension is lifted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_app_is_refused_on_every_route_and_loses_nothing() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let owner = s.all_permissions("shop", None);
    let add = Rq {
        method: Method::POST,
        path: "/v1/apps/shop/users/alice/memory/entries".into(),
        token: Some(owner.clone()),
        body: Some(br#"{"content":"alice secret plan"}"#.to_vec()),
        headers: vec![],
    };
    assert_eq!(send(&s, add).await.0, StatusCode::CREATED);
    for prefix in [
        "/v1/apps/shop",
        "/v1/apps/shop/users/alice",
        "/v1/apps/shop/users/alice/sessions/s1",
    ] {
        let put = Rq {
            method: Method::PUT,
            path: format!("{prefix}/artifacts/doc.txt"),
            token: Some(owner.clone()),
            body: Some(b"alice".to_vec()),
            headers: vec![],
        };
        assert_eq!(send(&s, put).await.0, StatusCode::CREATED);
    }
    let before = snapshot(&s).await;
    let dir = s.stop_keeping().await;

    let s = TestServer::start_in(dir, Profile::Durable, |c| {
        c.policy
            .apps
            .entry("shop".to_owned())
            .or_default()
            .suspended = true;
    })
    .await;
    let mut refused = 0;
    let mut let_in = Vec::new();
    for r in routes() {
        if !r.path.contains("{app}") || r.permission.is_none() {
            continue;
        }
        match r.id {
            // Open by design: a user can always record, read and withdraw
            // consent; an epoch is a number, no data.
            "put_consent" | "get_consent" | "delete_consent" | "erasure_epoch" => continue,
            _ => {}
        }
        let token = if r.permission == Some(Permission::Admin) {
            s.admin.clone()
        } else {
            owner.clone()
        };
        for name in ["doc.txt", "new.txt"] {
            let rq = Rq {
                method: method(r),
                path: path(r, "shop", "alice", name),
                token: Some(token.clone()),
                body: body(r),
                headers: vec![],
            };
            let (st, b) = send(&s, rq).await;
            if !(st.is_client_error() && st != StatusCode::NOT_FOUND) {
                let_in.push(format!(
                    "{} {name}: {st} {}",
                    r.id,
                    String::from_utf8_lossy(&b)
                ));
                continue;
            }
            if r.method != "head" && st == StatusCode::FORBIDDEN {
                let code = j(&b)["code"].clone();
                assert!(
                    code == "policy_denied" || code == "invalid_argument",
                    "{}: {code}",
                    r.id
                );
            }
        }
        refused += 1;
    }
    assert!(let_in.is_empty(), "{let_in:#?}");
    assert!(refused >= 30, "{refused}");
    // MCP's tools reach the same governed stores.
    let mcp = Mcp::open(&s, &owner).await;
    for (tool, args) in [
        ("memory_search", json!({"query": "secret plan"})),
        ("load_memory", json!({"query": "secret plan"})),
        ("memory_add", json!({"content": "more"})),
        ("memory_forget_session", json!({"confirm": "mcp"})),
        ("artifact_list", json!({})),
        ("artifact_get", json!({"name": "doc.txt"})),
        ("artifact_put", json!({"name": "new.txt", "text": "x"})),
        (
            "artifact_delete",
            json!({"name": "doc.txt", "version": "all"}),
        ),
        ("memory", json!({"command": "view", "path": "/memories"})),
    ] {
        let r = mcp.call(tool, args).await;
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert!(r.to_string().contains("app_suspended"), "{tool}: {r}");
    }
    mcp.close().await;
    let dir = s.stop_keeping().await;

    let s = TestServer::start_in(dir, Profile::Durable, |_| {}).await;
    assert_eq!(snapshot(&s).await, before, "a suspended app's data changed");
    s.stop().await;
}

/// A bare MCP client over Streamable HTTP (JSON replies): enough to call
/// tools as a client would.
struct Mcp {
    url: String,
    token: String,
    session: String,
}

impl Mcp {
    async fn post(&self, session: Option<&str>, body: &Value) -> reqwest::Response {
        let mut rq = client()
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(id) = session {
            rq = rq.header("mcp-session-id", id);
        }
        rq.send().await.unwrap()
    }

    async fn open(s: &TestServer, token: &str) -> Self {
        let mut m = Mcp {
            url: s.url("/mcp/apps/shop/users/alice"),
            token: token.to_owned(),
            session: String::new(),
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "contract", "version": "0"}}});
        let r = m.post(None, &init).await;
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        m.session = r
            .headers()
            .get("mcp-session-id")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let r = m.post(Some(&m.session), &done).await;
        assert!(r.status().is_success());
        m
    }

    /// Ends the session (the server lets go of what it held for it).
    async fn close(self) {
        let r = client()
            .delete(&self.url)
            .bearer_auth(&self.token)
            .header("mcp-session-id", &self.session)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }

    async fn call(&self, tool: &str, args: Value) -> Value {
        let rq = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let r = self.post(Some(&self.session), &rq).await;
        let status = r.status();
        let text = r.text().await.unwrap();
        // A JSON reply, or one server-sent event carrying it.
        let json_text = text
            .lines()
            .find_map(|l| l.strip_prefix("data: ").filter(|d| d.starts_with('{')))
            .unwrap_or(&text);
        let v: Value = serde_json::from_str(json_text)
            .unwrap_or_else(|e| panic!("{tool}: {status} {e}: {text}"));
        v["result"].clone()
    }
}
