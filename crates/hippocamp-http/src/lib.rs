//! One bounded JSON POST to a provider, shared by the embedding and the
//! model clients so that their bounds and error mapping cannot differ:
//! the request body is checked against its bound before anything is
//! sent, the reply is read no further than its bound, the whole exchange
//! ends at the deadline (dropping the request cancels it), and the status
//! becomes a typed error: 429 `Overloaded`, 5xx and transport failures
//! `Unavailable`, another non-2xx `InvalidReply` naming the status and
//! the start of the body.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::time::Duration;

use hippocamp_core::{Error, Field, Problem, Result, Stage};

/// What bounds one exchange.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Most request body bytes (`None`: the caller bounded it already).
    pub max_request_bytes: Option<u64>,
    /// Most reply body bytes.
    pub max_reply_bytes: u64,
    /// How long the exchange may take.
    pub wait: Duration,
    /// The stage a timeout names.
    pub stage: Stage,
}

/// `InvalidReply` from `service`.
pub fn bad(service: &'static str, detail: impl Into<String>) -> Error {
    Error::InvalidReply {
        service,
        detail: detail.into(),
    }
}

/// An HTTP client (rustls).
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .build()
        .map_err(|e| Error::Unavailable(format!("cannot start an HTTP client: {e}")))
}

/// The URL `url`, or a configuration error naming `key`.
pub fn url(key: &str, url: &str) -> Result<reqwest::Url> {
    reqwest::Url::parse(url).map_err(|e| Error::config(key, Problem::Malformed(e.to_string())))
}

/// POSTs `body` (JSON bytes) with `rq` and returns the reply's bytes.
pub async fn post_json(
    service: &'static str,
    rq: reqwest::RequestBuilder,
    body: Vec<u8>,
    bounds: Bounds,
) -> Result<Vec<u8>> {
    if let Some(max) = bounds.max_request_bytes
        && body.len() as u64 > max
    {
        return Err(Error::invalid(
            Field::Body,
            Problem::TooLong {
                len: body.len(),
                max: hippocamp_core::limits::to_usize(max),
            },
        ));
    }
    let rq = rq
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    tokio::time::timeout(bounds.wait, async {
        let r = rq
            .send()
            .await
            .map_err(|e| Error::Unavailable(format!("{service} did not answer: {e}")))?;
        let status = r.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(Error::Overloaded(
                "the provider asks to slow down (HTTP 429)",
            ));
        }
        if status.is_server_error() {
            return Err(Error::Unavailable(format!(
                "{service} failed with HTTP {status}"
            )));
        }
        if !status.is_success() {
            let head = read_head(r, 4 << 10).await;
            let text = String::from_utf8_lossy(&head);
            return Err(bad(
                service,
                format!(
                    "HTTP {status}: {}",
                    text.chars().take(300).collect::<String>()
                ),
            ));
        }
        read_bounded(service, r, bounds.max_reply_bytes).await
    })
    .await
    .map_err(|_| Error::Timeout(bounds.stage))?
}

/// Reads a reply body of at most `max` bytes.
async fn read_bounded(
    service: &'static str,
    mut r: reqwest::Response,
    max: u64,
) -> Result<Vec<u8>> {
    if r.content_length().is_some_and(|n| n > max) {
        return Err(bad(service, format!("a reply of more than {max} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = r
        .chunk()
        .await
        .map_err(|e| Error::Unavailable(format!("{service} broke off its reply: {e}")))?
    {
        if (body.len() + chunk.len()) as u64 > max {
            return Err(bad(service, format!("a reply of more than {max} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `max` bytes of a reply body (the rest is never read).
async fn read_head(mut r: reqwest::Response, max: usize) -> Vec<u8> {
    let mut head = Vec::new();
    while head.len() < max {
        match r.chunk().await {
            Ok(Some(chunk)) => head.extend_from_slice(&chunk[..chunk.len().min(max - head.len())]),
            _ => break,
        }
    }
    head
}
