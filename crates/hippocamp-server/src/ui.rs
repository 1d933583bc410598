//! The developer inspection page: one static HTML file with a little
//! script (no build step). It holds no data: everything it shows comes
//! from API v1 with the admin token the developer types in, and content is
//! inserted as text, never as markup. A restrictive Content-Security-Policy
//! keeps it from loading anything else.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::api::Caller;

const PAGE: &str = include_str!("../assets/ui.html");

/// `GET /ui`.
pub async fn page() -> Response {
    let mut r = axum::response::Html(PAGE).into_response();
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
        ),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /ui/whoami`: whether the token is an admin token.
pub async fn whoami(Caller(grant, _): Caller) -> Response {
    axum::Json(json!({
        "admin": grant.is_admin(),
        "app": grant.app.as_ref().map(hippocamp_core::AppName::as_str),
        "user": grant.user.as_ref().map(hippocamp_core::UserId::as_str),
    }))
    .into_response()
}
