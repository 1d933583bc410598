//! The HTTP exchange both clients share, on `hippocamp-http`'s bounded
//! POST with the model's limits and the call's deadline.

use hippocamp_core::{Deadline, Result, Stage};

pub(crate) use hippocamp_http::{bad, client, url};

use crate::ModelLimits;

/// POSTs `body` (JSON bytes) and returns the reply's bytes.
pub(crate) async fn post(
    service: &'static str,
    rq: reqwest::RequestBuilder,
    body: Vec<u8>,
    limits: &ModelLimits,
    deadline: Deadline,
) -> Result<Vec<u8>> {
    deadline.check(Stage::Model)?;
    let cap = std::time::Duration::from_millis(limits.timeout_ms);
    let bounds = hippocamp_http::Bounds {
        max_request_bytes: Some(limits.max_request_bytes),
        max_reply_bytes: limits.max_reply_bytes,
        wait: deadline.remaining().min(cap),
        stage: Stage::Model,
    };
    hippocamp_http::post_json(service, rq, body, bounds).await
}
