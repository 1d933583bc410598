//! The memory-tool route: Anthropic's `memory_20250818` commands executed
//! on the token's user's artifacts (`hippocamp_agent::memory_tool`, the one
//! implementation the Python and TypeScript handlers call), through the
//! governed artifact handle.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use hippocamp_agent::memory_tool::{Command, MemoryTool, StoreFiles};
use hippocamp_services::auth::Permission;
use serde::Serialize;

use crate::api::{
    ApiResult, AppState, CallQuery, MemoryCall, Payload, Q, Route, TIMEOUT, json, json_body,
    parse_query, schema, timed,
};

/// What a command answered.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct ToolResult {
    /// The text the model reads.
    result: String,
}

async fn run(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let command: Command =
        json_body(&s, body, r#"{"command": "view", "path": "/memories"}"#).await?;
    let tool = MemoryTool::new(StoreFiles::new(
        s.services.artifacts.as_ref(),
        &m.scope,
        call,
    ));
    let result = timed("memory_tool", tool.execute(&command)).await?;
    json(ToolResult { result })
}

/// The memory-tool route.
pub(crate) const ROUTES: &[Route] = &[Route {
    method: "post",
    path: "/v1/apps/{app}/users/{user}/memory-tool",
    id: "memory_tool",
    summary: "Run one command of Anthropic's memory tool (memory_20250818: view, create, str_replace, insert, delete, rename) on the user's /memories files: versioned artifacts under the reserved `.memories/` prefix (every edit a new version, indexed for memory search as an entry of origin `file`; delete erases every version and its entries). A command the files refuse (a missing path, a second match, a hostile path) is invalid_argument with the text the model should read",
    permission: Some(Permission::ArtifactsWrite),
    query: &[TIMEOUT],
    request: Payload::Json("MemoryToolCommand", schema::<Command>),
    success: (200, Payload::Json("MemoryToolResult", schema::<ToolResult>)),
    errors: &[
        "unsupported_media_type",
        "invalid_argument",
        "forbidden",
        "consent_required",
        "quota_exceeded",
        "payload_too_large",
        "legal_hold",
        "retention",
    ],
    handler: || post(run),
}];
