//! The preload route: the framed, nonce-delimited memory block the agent
//! runner puts before a model's first request, for clients that run their
//! own model loop (the AI SDK middleware, the Python clients). The block is
//! built by `hippocamp_agent::preload`, the runner's one implementation,
//! so no client frames memory itself; the search goes through the
//! governed memory handle like any other.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use hippocamp_agent::AgentError;
use hippocamp_agent::preload::{OnError, PreloadOptions, preload_block};
use hippocamp_core::EntryId;
use hippocamp_memory::SearchMode;
use hippocamp_services::auth::Permission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{
    ApiResult, AppState, CallQuery, MemoryCall, Payload, Q, Route, TIMEOUT, json, json_body,
    memory, parse_query, schema, timed,
};
use crate::error::ApiError;

/// `POST …/memory/preload`'s body: the user's message and the runner's
/// preload bounds (the same names, ranges and defaults).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PreloadRequest {
    /// The user's message. It is cut on a word boundary to the store's
    /// `max_query_bytes`; one without a letter or digit preloads nothing.
    query: String,
    /// Most hits, 1..=50 (default 5).
    #[serde(default)]
    limit: Option<u64>,
    /// A metadata filter (an object), as search takes.
    #[serde(default)]
    filter: Option<Value>,
    /// How to score (default: the store's).
    #[serde(default)]
    mode: Option<SearchMode>,
    /// Largest hit kept, in content bytes (1..=1 MiB, default 65,536):
    /// a larger one is skipped and smaller, later ones still count.
    #[serde(default)]
    max_hit_bytes: Option<u64>,
    /// Most content bytes of all hits together (max_hit_bytes..=8 MiB,
    /// default 262,144).
    #[serde(default)]
    max_total_bytes: Option<u64>,
}

impl PreloadRequest {
    /// The runner's options: a failed search is an error here (the
    /// client decides), and the request's own deadline bounds it.
    fn options(&self) -> PreloadOptions {
        let d = PreloadOptions::default();
        PreloadOptions {
            limit: self.limit.unwrap_or(d.limit),
            filter: self.filter.clone(),
            mode: self.mode,
            max_hit_bytes: self.max_hit_bytes.unwrap_or(d.max_hit_bytes),
            max_total_bytes: self.max_total_bytes.unwrap_or(d.max_total_bytes),
            on_error: OnError::Fail,
            timeout_ms: 60_000,
        }
    }
}

/// `POST …/memory/preload`'s reply.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct PreloadReply {
    /// The block, to put in a user message of the model's first request
    /// (never the system instruction); `null` when nothing was found.
    block: Option<String>,
    /// The random nonce its delimiters carry (`null` with no block).
    nonce: Option<String>,
    /// The entries in the block, in its order.
    entries: Vec<EntryId>,
}

async fn preload(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let req: PreloadRequest = json_body(&s, body, r#"{"query": "…"}"#).await?;
    let opts = req.options();
    opts.validate()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let call = m.call(q.timeout_ms)?;
    let store = memory(&s)?;
    // The store's query bound is the configuration's: read it there, not
    // from a capabilities report built per request.
    let max_query = hippocamp_core::limits::to_usize(s.config.memory.limits.max_query_bytes);
    let found = timed("preload", async {
        preload_block(store.as_ref(), &m.scope, &req.query, &opts, max_query, call)
            .await
            .map_err(AgentError::into_service_error)
    })
    .await?;
    json(match found {
        Some(p) => PreloadReply {
            block: Some(p.block),
            nonce: Some(p.nonce),
            entries: p.entries,
        },
        None => PreloadReply {
            block: None,
            nonce: None,
            entries: Vec::new(),
        },
    })
}

/// The preload route.
pub(crate) const ROUTES: &[Route] = &[Route {
    method: "post",
    path: "/v1/apps/{app}/users/{user}/memory/preload",
    id: "preload",
    summary: "The framed memory block the agent runner preloads for a user's message: current hits (facts first on equal score) between delimiters carrying a random nonce, content escaped, with a notice that it is untrusted reference data; put it in a user message of the model's first request. `block` is null when nothing was found",
    permission: Some(Permission::MemoryRead),
    query: &[TIMEOUT],
    request: Payload::Json("PreloadRequest", schema::<PreloadRequest>),
    success: (200, Payload::Json("Preload", schema::<PreloadReply>)),
    errors: &[
        "unsupported_media_type",
        "invalid_argument",
        "forbidden",
        "payload_too_large",
        "memory_disabled",
    ],
    handler: || post(preload),
}];
