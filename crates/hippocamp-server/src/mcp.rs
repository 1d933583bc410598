//! `/mcp`: the MCP server, behind the same bearer tokens as API v1. This
//! layer is the only way to it: it authenticates the token, fixes the
//! scope from the grant (a token bound to one user needs nothing more;
//! an app-wide token must name the user in `/mcp/apps/{app}/users/{user}`,
//! checked against the grant) and hands the MCP handler that authority.

use std::sync::Arc;

use axum::extract::{FromRequestParts as _, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hippocamp_core::{AppName, MemoryScope, UserId};
use hippocamp_mcp::Authority;
use hippocamp_services::auth::Grant;
use percent_encoding::percent_decode_str;

use crate::api::{AppState, Caller};
use crate::error::ApiError;

fn decode(s: &str) -> Result<String, ApiError> {
    percent_decode_str(s)
        .decode_utf8()
        .map(std::borrow::Cow::into_owned)
        .map_err(|_| ApiError::bad_request("bad path: not UTF-8".to_owned()))
}

/// The scope a request to `path` (below `/mcp`) acts in for `grant`.
fn scope_of(grant: &Grant, path: &str) -> Result<MemoryScope, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [] => match (&grant.app, &grant.user) {
            (Some(a), Some(u)) => Ok(MemoryScope::new(a.clone(), u.clone())),
            _ => Err(ApiError::bad_request(
                "this token is not bound to one user: name it in /mcp/apps/{app}/users/{user}"
                    .to_owned(),
            )),
        },
        ["apps", app, "users", user] => {
            let app = AppName::new(decode(app)?)?;
            let user = UserId::new(decode(user)?)?;
            let in_grant = grant.app.as_ref().is_none_or(|a| *a == app)
                && grant.user.as_ref().is_none_or(|u| *u == user);
            if !in_grant {
                return Err(ApiError::forbidden(
                    "any permission",
                    format_args!("{app}/{user}"),
                ));
            }
            Ok(MemoryScope::new(app, user))
        }
        _ => Err(ApiError::new("not_found", "no such route")),
    }
}

/// Authenticates and scopes an MCP request.
pub(crate) async fn authority(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let caller = match Caller::from_request_parts(&mut parts, &state).await {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let scope = match scope_of(&caller.0, parts.uri.path()) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    // Resource URIs point where the caller reached us (the MCP layer
    // refuses hosts it does not allow).
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_owned();
    parts.extensions.insert(Authority {
        scope,
        permissions: caller.0.permissions.clone(),
        base_url: format!("http://{host}"),
        caller: caller.1,
    });
    next.run(Request::from_parts(parts, body)).await
}

/// rmcp refuses a `Host` or `Origin` it does not allow with a plain-text
/// 403; every other error of the server is JSON (`ErrorBody`), so this one
/// is made JSON too, its text kept as the message.
async fn json_refusals(r: Response) -> Response {
    let is_json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if r.status() != axum::http::StatusCode::FORBIDDEN || is_json {
        return r;
    }
    let bytes = http_body_util::BodyExt::collect(http_body_util::Limited::new(r.into_body(), 4096))
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    let message = if text.is_empty() {
        "refused by the MCP transport".to_owned()
    } else {
        text
    };
    ApiError::new("forbidden", message).into_response()
}

/// The MCP service with its authority layer, for `/mcp`.
pub(crate) fn service(state: &AppState) -> Option<axum::Router<AppState>> {
    let tools = match hippocamp_mcp::tools::Tools::new() {
        Ok(t) => Arc::new(t),
        Err(e) => {
            tracing::error!(error = %e, "the MCP tools did not build; /mcp is not served");
            return None;
        }
    };
    let backends = hippocamp_mcp::Backends {
        memory: state.services.memory.clone(),
        artifacts: Some(Arc::clone(&state.services.artifacts)),
    };
    let config = hippocamp_mcp::McpConfig {
        allowed_hosts: state.config.mcp.allowed_hosts.clone(),
        allowed_origins: state.config.mcp.allowed_origins.clone(),
        max_body_bytes: usize::try_from(state.config.http.max_json_body_bytes)
            .unwrap_or(usize::MAX),
    };
    let svc = hippocamp_mcp::http_service(tools, backends, &config);
    Some(
        axum::Router::new()
            .fallback_service(svc)
            .layer(axum::middleware::map_response(json_refusals))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                authority,
            )),
    )
}
