//! The one mapping from errors to HTTP statuses and JSON bodies.
//!
//! [`CODES`] is the table: every code a response may carry, with its
//! status and meaning. An error's status is looked up there by its code,
//! so a code cannot answer with two statuses, and the OpenAPI document
//! lists each route's codes from the same table.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hippocamp_core::Error;
use serde::Serialize;

/// One error code: its HTTP status and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The snake_case code of the body.
    pub code: &'static str,
    /// The HTTP status it answers with.
    pub status: u16,
    /// What it means, for the OpenAPI document.
    pub meaning: &'static str,
}

const fn code(code: &'static str, status: u16, meaning: &'static str) -> Code {
    Code {
        code,
        status,
        meaning,
    }
}

/// Every error code a response may carry.
pub const CODES: &[Code] = &[
    code(
        "invalid_argument",
        400,
        "a parameter, query key or body is not what the route takes; nothing was done",
    ),
    code(
        "confirmation_required",
        400,
        "a whole-scope erasure needs ?confirm= naming the exact scope ({app}/{user} or {app}/{user}/{session}); nothing was erased",
    ),
    code(
        "invalid_config",
        400,
        "a configuration value is out of range",
    ),
    code(
        "sensitive_content",
        400,
        "the content looks like a credential; it was not stored",
    ),
    code("unauthorized", 401, "no bearer token, or not a current one"),
    code(
        "forbidden",
        403,
        "the token does not grant this permission on this scope; nothing was touched",
    ),
    code(
        "policy_denied",
        403,
        "the governance policy refused the operation, or did not answer in time (it fails closed); the message carries its reason code; nothing was touched",
    ),
    code(
        "consent_required",
        403,
        "the app requires a recorded consent for this user before ingestion; nothing was written",
    ),
    code("not_found", 404, "no such record, or no such route"),
    code(
        "method_not_allowed",
        405,
        "the path exists but not with this method",
    ),
    code(
        "idempotency_conflict",
        409,
        "the idempotency key was used for other data in this scope",
    ),
    code(
        "source_gone",
        409,
        "a derived entry names a source that is erased, expired or not in the scope; nothing was written",
    ),
    code(
        "consolidation_running",
        409,
        "a consolidation run is already running in this scope (the message names it); nothing was started",
    ),
    code(
        "run_conflict",
        409,
        "the consolidation run cannot be applied or reverted in its state, or a later run, correction or erasure touched what it changed; nothing was changed",
    ),
    code(
        "job_active",
        409,
        "the job is still pending or running; only a finished job can be deleted (cancel it first); nothing was changed",
    ),
    code(
        "retention",
        409,
        "a record is retained until a later time (the message says when); nothing was deleted",
    ),
    code(
        "legal_hold",
        409,
        "a record or the scope is under a legal hold; nothing was deleted",
    ),
    code(
        "stale_epoch",
        409,
        "the write names an erasure epoch older than the scope's: an erasure came after its admission",
    ),
    code(
        "future_epoch",
        409,
        "the write names an erasure epoch the scope has not reached",
    ),
    code(
        "quota_exceeded",
        429,
        "a quota refused the write; nothing was written (the message names the limit); it does not clear by waiting: erase or raise the limit (no Retry-After)",
    ),
    code(
        "payload_too_large",
        413,
        "a value is over a size limit, named in the message: the JSON body (http.max_json_body_bytes), an artifact (max_artifact_bytes) or an entry's content (max_content_bytes); the same value never fits later, so do not retry it; nothing was written",
    ),
    code(
        "unsupported_media_type",
        415,
        "the request's Content-Type is not one the route takes (JSON bodies: application/json or a +json type; restore: application/x-ndjson or application/json; a missing one is accepted); nothing was done",
    ),
    code(
        "range_not_satisfiable",
        416,
        "the Range is not one bytes= range within the artifact",
    ),
    code("corrupt", 500, "stored data failed an integrity check"),
    code("storage", 500, "a storage failure"),
    code(
        "unsupported",
        501,
        "the operation is not offered by this store",
    ),
    code(
        "invalid_reply",
        502,
        "a backend or provider answered wrongly (a record of another scope, a bad embedding); nothing of it was used, and a write's outcome is unknown (retry it with its idempotency key)",
    ),
    code(
        "overloaded",
        503,
        "the server's concurrency limit or a store's queue is full; retry after Retry-After",
    ),
    code(
        "max_active_scopes_reached",
        503,
        "every scope worker is busy; retry after Retry-After",
    ),
    code(
        "unavailable",
        503,
        "a store or provider is unavailable; retry after Retry-After",
    ),
    code(
        "memory_disabled",
        503,
        "memory is turned off in this deployment (the disabled profile)",
    ),
    code(
        "outbox_unavailable",
        503,
        "asynchronous ingestion is not offered by this profile, or its outbox is not healthy; nothing was queued",
    ),
    code(
        "lease_lost",
        409,
        "an outbox job changed owner while this call acted on it; nothing was changed",
    ),
    code(
        "timeout",
        504,
        "the deadline expired (the message names the stage); nothing was written",
    ),
];

/// Codes any route may answer with, whatever it does: authentication,
/// overload and the failures of what is behind it. Each route's own codes
/// are in its row of the route table.
pub const ANY_ROUTE: &[&str] = &[
    "unauthorized",
    // A policy that fails or answers late refuses any operation it is
    // asked about (fail closed); the static policy itself only refuses
    // with the specific codes its routes declare.
    "policy_denied",
    "overloaded",
    "max_active_scopes_reached",
    "unavailable",
    "timeout",
    "invalid_reply",
    "corrupt",
    "storage",
];

/// The row of `code`.
pub fn lookup(code: &str) -> Option<&'static Code> {
    CODES.iter().find(|c| c.code == code)
}

/// The body of every error response.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ErrorBody {
    /// The error kind, snake_case (one of [`CODES`]).
    pub code: &'static str,
    /// What happened, for people.
    pub message: String,
}

/// An error on its way to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
    /// The `WWW-Authenticate` challenge of a 401 (RFC 6750).
    challenge: Option<&'static str>,
}

impl ApiError {
    /// An error with `code` (its status from [`CODES`]; an unlisted code
    /// is a bug and answers 500).
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        let status = lookup(code)
            .and_then(|c| StatusCode::from_u16(c.status).ok())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self {
            status,
            body: ErrorBody {
                code,
                message: message.into(),
            },
            challenge: None,
        }
    }

    /// 400: a body or parameter that is not what the route takes.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new("invalid_argument", message)
    }

    /// 401: no bearer token (`WWW-Authenticate: Bearer`).
    pub fn unauthorized() -> Self {
        Self {
            challenge: Some("Bearer"),
            ..Self::new(
                "unauthorized",
                "a bearer token is required (Authorization: Bearer <token>)",
            )
        }
    }

    /// 401: a bearer token that is not a current one (unknown or
    /// revoked): `WWW-Authenticate: Bearer error="invalid_token"`.
    pub fn invalid_token() -> Self {
        Self {
            challenge: Some(r#"Bearer error="invalid_token""#),
            ..Self::new(
                "unauthorized",
                "the bearer token is not a current one (unknown or revoked)",
            )
        }
    }

    /// 401: a token that expired (`WWW-Authenticate: Bearer
    /// error="invalid_token"`), saying when.
    pub fn expired_token(at_ms: u64) -> Self {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at_ms);
        let at = humantime::format_rfc3339_seconds(at);
        Self {
            challenge: Some(
                r#"Bearer error="invalid_token", error_description="the token expired""#,
            ),
            ..Self::new(
                "unauthorized",
                format!(
                    "the bearer token expired at {at}; make a new one (hippocamp token create --expires-in …)"
                ),
            )
        }
    }

    /// 403: the token does not grant `permission` on `scope` (a scope in
    /// the path, or what the route needs, in words).
    pub fn forbidden(permission: &str, scope: impl std::fmt::Display) -> Self {
        Self::new(
            "forbidden",
            format!("the token does not grant `{permission}` on {scope}"),
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The code.
    pub fn code(&self) -> &'static str {
        self.body.code
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        if matches!(e, Error::QuotaExceeded { .. }) {
            metrics::counter!("hippocamp_quota_rejections_total").increment(1);
        }
        Self::new(e.code(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body)).into_response();
        if let Some(c) = self.challenge {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(c));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_error_maps_to_a_listed_code() {
        use hippocamp_core::{Field, Problem, QuotaLimit, Stage};
        let errors = [
            Error::invalid(Field::AppName, Problem::Empty),
            Error::NotFound("entry"),
            Error::Timeout(Stage::Commit),
            Error::StaleEpoch {
                admitted: 0,
                current: 1,
            },
            Error::FutureEpoch {
                admitted: 2,
                current: 1,
            },
            Error::Overloaded("x"),
            Error::QuotaExceeded {
                limit: QuotaLimit::EntriesPerScope(1),
            },
            Error::Corrupt("x".into()),
            Error::foreign_record("a store", "an entry"),
        ];
        let statuses = [400, 404, 504, 409, 409, 503, 429, 500, 502];
        for (e, s) in errors.into_iter().zip(statuses) {
            let a = ApiError::from(e);
            assert_eq!(a.status().as_u16(), s, "{}", a.code());
            assert!(lookup(a.code()).is_some(), "{}", a.code());
        }
        for c in ANY_ROUTE {
            assert!(lookup(c).is_some(), "{c}");
        }
    }
}
