//! A download's body is bounded after its headers are sent: a reader that
//! stops is cut off after the idle timeout, one that trickles after the
//! transfer timeout, and the request holds its concurrency permit until
//! its body ends either way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use hippocamp_server::Profile;
use reqwest::StatusCode;
use support::{TestServer, client};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const PATH: &str = "/v1/apps/shop/users/alice/artifacts/big.bin";
/// Larger than loopback's socket buffers, so a reader that stops stalls
/// the server's writes.
const SIZE: usize = 48 << 20;

async fn put_big(s: &TestServer, token: &str) {
    let r = client()
        .put(s.url(PATH))
        .bearer_auth(token)
        .body(vec![7u8; SIZE])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
}

/// Sends a GET over a raw connection and reads just the headers.
async fn start_download(s: &TestServer, token: &str) -> tokio::net::TcpStream {
    let addr = s.base.trim_start_matches("http://");
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let rq =
        format!("GET {PATH} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n");
    c.write_all(rq.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    c
}

/// Reads until the server closes; returns the body bytes received.
async fn drain(c: &mut tokio::net::TcpStream, pace: Option<Duration>) -> usize {
    let mut got = 0;
    let mut buf = vec![0u8; 16 << 10];
    loop {
        match c.read(&mut buf).await {
            Ok(0) | Err(_) => return got,
            Ok(n) => got += n,
        }
        if let Some(p) = pace {
            tokio::time::sleep(p).await;
        }
    }
}

async fn status_of_another_request(s: &TestServer, token: &str) -> StatusCode {
    client()
        .get(s.url("/v1/memory/capabilities"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_is_cut_off_and_holds_its_permit_until_then() {
    let s = TestServer::start(Profile::Ephemeral, |c| {
        c.http.max_concurrent_requests = 1;
        c.http.transfer_idle_timeout_ms = 500;
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    put_big(&s, &t).await;
    let mut c = start_download(&s, &t).await;
    // The body is in flight: it still holds the only permit.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        status_of_another_request(&s, &t).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Stop reading: the server gives up on the connection after the idle
    // timeout and the permit returns.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(status_of_another_request(&s, &t).await, StatusCode::OK);
    let got = drain(&mut c, None).await;
    assert!(got < SIZE, "the whole body arrived after the cut: {got}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_reader_is_cut_off_at_the_transfer_deadline() {
    let s = TestServer::start(Profile::Ephemeral, |c| {
        c.http.transfer_timeout_ms = 1_500;
        c.http.transfer_idle_timeout_ms = 1_000;
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    put_big(&s, &t).await;
    let started = Instant::now();
    let mut c = start_download(&s, &t).await;
    // 16 KiB every 20 ms: never idle for long, far too slow for 48 MiB.
    let got = drain(&mut c, Some(Duration::from_millis(20))).await;
    let took = started.elapsed();
    assert!(got < SIZE, "{got}");
    assert!(
        took >= Duration::from_millis(1_400) && took < Duration::from_secs(10),
        "{took:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_keeps_up_gets_everything() {
    let s = TestServer::start(Profile::Ephemeral, |c| {
        c.http.transfer_idle_timeout_ms = 500;
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    put_big(&s, &t).await;
    let r = client()
        .get(s.url(PATH))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().len(), SIZE);
    s.stop().await;
}
