//! The one mapping from errors to HTTP statuses and JSON bodies.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hippocamp_core::Error;
use serde::Serialize;

/// Every error code a response may carry (the OpenAPI document lists them).
pub const CODES: &[&str] = &[
    "invalid_argument",
    "invalid_config",
    "sensitive_content",
    "not_found",
    "idempotency_conflict",
    "quota_exceeded",
    "payload_too_large",
    "timeout",
    "stale_epoch",
    "future_epoch",
    "overloaded",
    "max_active_scopes_reached",
    "corrupt",
    "unsupported",
    "unavailable",
    "invalid_reply",
    "storage",
    "unauthorized",
    "forbidden",
    "range_not_satisfiable",
];

/// The body of every error response.
#[derive(Debug, Clone, Serialize)]
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
}

impl ApiError {
    /// An error with an explicit status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody {
                code,
                message: message.into(),
            },
        }
    }

    /// 400: a body or parameter that is not what the route takes.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid bearer token is required",
        )
    }

    /// 403: the token does not grant this scope or permission.
    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the token does not grant this operation on this scope",
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
        let status = match &e {
            Error::InvalidArgument { .. }
            | Error::InvalidConfig { .. }
            | Error::SensitiveContent(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::IdempotencyConflict(_)
            | Error::StaleEpoch { .. }
            | Error::FutureEpoch { .. } => StatusCode::CONFLICT,
            Error::QuotaExceeded { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Error::Overloaded(_) | Error::MaxActiveScopesReached { .. } | Error::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::Unsupported { .. } => StatusCode::NOT_IMPLEMENTED,
            Error::InvalidReply { .. } => StatusCode::BAD_GATEWAY,
            // Corrupt, Storage and kinds added later.
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if matches!(e, Error::QuotaExceeded { .. }) {
            metrics::counter!("hippocamp_quota_rejections_total").increment(1);
        }
        Self::new(status, e.code(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body)).into_response();
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
        use hippocamp_core::{Field, Problem, QuotaLimit};
        let errors = [
            Error::invalid(Field::AppName, Problem::Empty),
            Error::NotFound("entry"),
            Error::Timeout(hippocamp_core::Stage::Commit),
            Error::StaleEpoch {
                admitted: 0,
                current: 1,
            },
            Error::Overloaded("x"),
            Error::QuotaExceeded {
                limit: QuotaLimit::EntriesPerScope(1),
            },
            Error::Corrupt("x".into()),
        ];
        let statuses = [400, 404, 504, 409, 503, 413, 500];
        for (e, s) in errors.into_iter().zip(statuses) {
            let a = ApiError::from(e);
            assert_eq!(a.status().as_u16(), s);
            assert!(CODES.contains(&a.code()), "{}", a.code());
        }
    }
}
