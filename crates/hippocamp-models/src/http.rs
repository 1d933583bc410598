//! The HTTP exchange both clients share: a bounded body out, a bounded
//! body back, the status mapped to a typed error, all by the deadline.

use hippocamp_core::{Deadline, Error, Result, Stage};

use crate::ModelLimits;

pub(crate) fn bad(service: &'static str, detail: impl Into<String>) -> Error {
    Error::InvalidReply {
        service,
        detail: detail.into(),
    }
}

pub(crate) fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .build()
        .map_err(|e| Error::Unavailable(format!("cannot start an HTTP client: {e}")))
}

pub(crate) fn url(key: &str, url: &str) -> Result<reqwest::Url> {
    reqwest::Url::parse(url)
        .map_err(|e| Error::config(key, hippocamp_core::Problem::Malformed(e.to_string())))
}

/// POSTs `body` (JSON bytes) and returns the reply's bytes.
pub(crate) async fn post(
    service: &'static str,
    rq: reqwest::RequestBuilder,
    body: Vec<u8>,
    limits: &ModelLimits,
    deadline: Deadline,
) -> Result<Vec<u8>> {
    if body.len() as u64 > limits.max_request_bytes {
        return Err(Error::invalid(
            hippocamp_core::Field::Body,
            hippocamp_core::Problem::TooLong {
                len: body.len(),
                max: hippocamp_core::limits::to_usize(limits.max_request_bytes),
            },
        ));
    }
    deadline.check(Stage::Model)?;
    let cap = std::time::Duration::from_millis(limits.timeout_ms);
    let wait = deadline.remaining().min(cap);
    let rq = rq
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    // Dropping the request at the deadline cancels it.
    tokio::time::timeout(wait, async {
        let r = rq
            .send()
            .await
            .map_err(|e| Error::Unavailable(format!("{service} did not answer: {e}")))?;
        let status = r.status();
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(Error::Overloaded(
                "the model provider asks to slow down (429)",
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
        read_bounded(service, r, limits.max_reply_bytes).await
    })
    .await
    .map_err(|_| Error::Timeout(Stage::Model))?
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
