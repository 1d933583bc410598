//! PostgreSQL restarted under a running distributed server (black box):
//! while it is down, requests fail with 503 (never another status) and
//! `/readyz` says so; once it is back, they succeed again by themselves;
//! every write acknowledged before, during or after is there.
//!
//! Its own test binary, so the restart interrupts no other test (cargo
//! runs test binaries one after another).

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::distributed::Deployment;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_is_503_and_the_server_recovers_by_itself() {
    let Some(d) = Deployment::new() else {
        return;
    };
    let Some(ctl) = hippocamp_testkit::env(
        "HIPPOCAMP_TEST_POSTGRES_CTL",
        "scripts/postgres.sh start prints it",
    ) else {
        return;
    };
    let server = d.serve();
    let token = server.admin.clone().unwrap();
    let http = reqwest::Client::new();
    let add = |i: usize| {
        http.post(server.url("/v1/apps/shop/users/alice/memory/entries"))
            .bearer_auth(&token)
            .timeout(Duration::from_secs(10))
            .json(&json!({"content": format!("fact {i}")}))
            .send()
    };
    let mut acked = Vec::new();
    let mut i = 0;
    let record = |status: u16, v: &Value, acked: &mut Vec<String>| {
        if let Some(id) = v["entry"]["id"].as_str() {
            acked.push(id.to_owned());
        }
        status
    };
    for _ in 0..5 {
        i += 1;
        let r = add(i).await.unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        assert_eq!(record(status, &v, &mut acked), 201, "{v}");
    }
    let restart = std::thread::spawn(move || {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{ctl} 2"))
            .status()
            .unwrap();
        assert!(status.success());
    });
    let mut unavailable = 0;
    let mut not_ready = false;
    while !restart.is_finished() {
        i += 1;
        let r = add(i).await.unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        match record(status, &v, &mut acked) {
            201 => {}
            503 => unavailable += 1,
            other => panic!("a request during the restart got {other}: {v}"),
        }
        let ready = http
            .get(server.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status();
        assert!(ready == 200 || ready == 503, "{ready}");
        not_ready |= ready == 503;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    restart.join().unwrap();
    assert!(unavailable > 0 && not_ready, "no request saw the restart");
    // Back by itself.
    let started = Instant::now();
    loop {
        i += 1;
        let r = add(i).await.unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if record(status, &v, &mut acked) == 201 {
            break;
        }
        assert_eq!(status, 503, "{v}");
        assert!(started.elapsed() < Duration::from_secs(15), "no recovery");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        http.get(server.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    for id in &acked {
        let r = http
            .get(server.url(&format!("/v1/apps/shop/users/alice/memory/entries/{id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "acknowledged {id} is lost");
    }
}
