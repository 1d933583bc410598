//! Routes of a user's lifecycle: listing their memory page by page,
//! correcting an entry and reading its history, exporting and restoring,
//! recording, reading and withdrawing their consent, erasing their
//! artifacts, and the admin listing of apps and users. The rows join the
//! one route table (`api::routes`), which declares each permission.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{delete, get, put};
use futures::StreamExt as _;
use hippocamp_governance::NewConsent;
use hippocamp_memory::{ListOrder, ListRequest};
use hippocamp_services::auth::Permission;
use serde::Deserialize;

use hippocamp_artifacts::ArtifactScope;
use hippocamp_core::{MemoryScope, erasure_confirmation};

use crate::api::{
    ApiResult, AppOperator, AppState, ArtifactCall, CallQuery, MemoryCall, NoQuery, Operator,
    Payload, Q, Route, call_options, entry_id, json, json_body, memory, parse_query, schema, timed,
};
use crate::error::ApiError;

/// `GET …/memory/entries`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<u64>,
    cursor: Option<String>,
    order: Option<ListOrder>,
    /// A metadata filter as JSON text.
    filter: Option<String>,
    timeout_ms: Option<u64>,
}

async fn list_entries(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<ListQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let filter = q
        .filter
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("filter is not JSON: {e}")))?;
    let request = ListRequest {
        limit: q.limit,
        cursor: q.cursor,
        order: q.order,
        filter,
    };
    let call = m.call(q.timeout_ms)?;
    json(
        timed(
            "list_entries",
            memory(&s)?.list_entries(&m.scope, &request, &call),
        )
        .await?,
    )
}

async fn update_entry(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let id = entry_id(&m)?;
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let update: hippocamp_memory::EntryUpdate =
        json_body(&s, body, crate::api::ENTRY_SHAPE).await?;
    let w = hippocamp_memory::WriteOptions::new(call);
    json(
        timed(
            "update_entry",
            memory(&s)?.update_entry(&m.scope, &id, &update, &w),
        )
        .await?,
    )
}

/// An entry's kept revisions, newest first.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct History {
    revisions: Vec<hippocamp_memory::Revision>,
}

async fn entry_history(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let id = entry_id(&m)?;
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let revisions = timed(
        "entry_history",
        memory(&s)?.entry_history(&m.scope, &id, &call),
    )
    .await?;
    json(History { revisions })
}

async fn restore(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let (call, _) = crate::api::transfer_options(&s, q.timeout_ms)?;
    let call = call.on_behalf_of(m.caller);
    let stream = body
        .into_data_stream()
        .map(|r| r.map_err(std::io::Error::other));
    let reader = tokio_util::io::StreamReader::new(stream);
    json(
        timed(
            "restore",
            hippocamp_services::restore::restore(&s.services, &m.scope, reader, &call),
        )
        .await?,
    )
}

/// `?limit=&cursor=` of the admin listings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamesQuery {
    limit: Option<u64>,
    cursor: Option<String>,
    timeout_ms: Option<u64>,
}

impl NamesQuery {
    fn request(self) -> hippocamp_memory::NamesRequest {
        hippocamp_memory::NamesRequest {
            cursor: self.cursor,
            limit: self.limit,
        }
    }
}

async fn list_apps(
    State(s): State<AppState>,
    o: Operator,
    q: Q<NamesQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = call_options(q.timeout_ms)?.on_behalf_of(o.caller);
    let request = q.request();
    json(timed("list_apps", memory(&s)?.list_apps(&request, &call)).await?)
}

async fn list_users(
    State(s): State<AppState>,
    o: AppOperator,
    q: Q<NamesQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = call_options(q.timeout_ms)?.on_behalf_of(o.caller);
    let request = q.request();
    json(
        timed(
            "list_users",
            memory(&s)?.list_users(&o.app, &request, &call),
        )
        .await?,
    )
}

async fn status(State(s): State<AppState>, _o: Operator, q: Q<NoQuery>) -> ApiResult<Response> {
    parse_query(q)?;
    json(timed("status", s.services.status()).await?)
}

/// `?limit=&cursor=` of the audit log.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    limit: Option<u64>,
    cursor: Option<String>,
}

async fn audit(State(s): State<AppState>, _o: Operator, q: Q<AuditQuery>) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let audit = &s.services.governance.audit;
    json(timed("audit", audit.page(q.cursor.as_deref(), q.limit)).await?)
}

async fn put_consent(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    parse_query(q)?;
    let consent: NewConsent =
        json_body(&s, body, r#"{"consent_id": "…", "scope": "memory"}"#).await?;
    json(
        timed(
            "put_consent",
            s.services.record_consent(&m.scope, consent, m.caller),
        )
        .await?,
    )
}

/// The scope's consent, or `null`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct ConsentReply {
    consent: Option<hippocamp_governance::Consent>,
}

async fn get_consent(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
) -> ApiResult<Response> {
    parse_query(q)?;
    let consent = timed("get_consent", s.services.governance.consents.get(&m.scope)).await?;
    json(ConsentReply { consent })
}

async fn delete_consent(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = m.call(q.timeout_ms)?;
    json(
        timed(
            "withdraw_consent",
            s.services.withdraw_consent(&m.scope, &call),
        )
        .await?,
    )
}

async fn export(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = m.call(q.timeout_ms)?;
    // Artifact records only for a token that may read the user's
    // artifacts: `memory:read` alone does not reach them.
    let user_artifacts = ArtifactScope::user(m.scope.app().as_str(), m.scope.user().as_str())?;
    let include = hippocamp_services::export::Include {
        artifacts: m
            .grant
            .allows_artifacts(&user_artifacts, Permission::ArtifactsRead),
    };
    let mut lines = hippocamp_services::export::export(&s.services, m.scope.clone(), call, include);
    // The first line comes after the first page was read: a refusal is
    // still an error status, not a cut stream.
    let first = match lines.recv().await {
        Some(Ok(l)) => l,
        Some(Err(e)) => return Err(e.into()),
        None => return Err(hippocamp_core::Error::Unavailable("the export stopped".into()).into()),
    };
    let rest = futures::stream::unfold(lines, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let body = futures::StreamExt::chain(futures::stream::once(async { Ok(first) }), rest).map(
        |item: hippocamp_core::Result<String>| {
            item.map(axum::body::Bytes::from)
                .map_err(std::io::Error::other)
        },
    );
    let mut r = Response::new(HttpBody::from_stream(body));
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(r)
}

async fn erase_artifacts(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<crate::api::EraseQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let expected = match &a.scope {
        ArtifactScope::User { app, user } => {
            erasure_confirmation(&MemoryScope::new(app.clone(), user.clone()), None)
        }
        ArtifactScope::Session { app, user, session } => {
            erasure_confirmation(&MemoryScope::new(app.clone(), user.clone()), Some(session))
        }
        // No route erases an app's artifacts: it would be refused here.
        ArtifactScope::App { app } => app.to_string(),
    };
    crate::api::confirmed(&expected, q.confirm.as_deref())?;
    let call = a.call(q.timeout_ms)?;
    json(
        timed(
            "erase_artifacts",
            s.services.erase_artifacts(&a.scope, &call),
        )
        .await?,
    )
}

const LIST_QUERY: &[(&str, &str, &str)] = &[
    (
        "limit",
        "integer",
        "entries in the page, 1..=max_page_entries (default max_page_entries); a page also stops at max_result_bytes",
    ),
    (
        "cursor",
        "string",
        "the next_cursor of the previous page (opaque)",
    ),
    ("order", "string", "newest (default) or oldest"),
    ("filter", "string", "a metadata filter as JSON text"),
    crate::api::TIMEOUT,
];

/// A whole-scope artifact erasure: confirmed, and refused for a held user.
const ERASE_ARTIFACTS: &[&str] = &[
    "invalid_argument",
    "confirmation_required",
    "forbidden",
    "legal_hold",
];

const NAMES_QUERY: &[(&str, &str, &str)] = &[
    (
        "limit",
        "integer",
        "names in the page, 1..=max_page_entries (default max_page_entries)",
    ),
    (
        "cursor",
        "string",
        "the next_cursor of the previous page (opaque)",
    ),
    crate::api::TIMEOUT,
];

/// The lifecycle routes.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        method: "get",
        path: "/v1/status",
        id: "status",
        summary: "Content-free state of every service: memory, outbox and artifact counters, and the policy in force (its legal holds, consent-requiring apps, lifetimes); only for an admin token of every app",
        permission: Some(Permission::Admin),
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json(
                "ServicesStatus",
                schema::<hippocamp_services::ServicesStatus>,
            ),
        ),
        errors: &["invalid_argument", "forbidden"],
        handler: || get(status),
    },
    Route {
        method: "get",
        path: "/v1/audit",
        id: "audit",
        summary: "The audit log, oldest first, one page: erasures, denials, holds, consent changes and expiries, each with who, the scope's hash, when and the outcome (never content); only for an admin token of every app",
        permission: Some(Permission::Admin),
        query: &[
            (
                "limit",
                "integer",
                "records in the page, 1..=1000 (default 100)",
            ),
            ("cursor", "string", "the next_cursor of the previous page"),
        ],
        request: Payload::None,
        success: (
            200,
            Payload::Json("AuditPage", schema::<hippocamp_governance::AuditPage>),
        ),
        errors: &["invalid_argument", "forbidden"],
        handler: || get(audit),
    },
    Route {
        method: "put",
        path: "/v1/apps/{app}/users/{user}/memory/entries/{id}",
        id: "update_entry",
        summary: "Correct an entry: {content, metadata} replace its own as a new revision under the same id (search follows at once); the same body again changes nothing; replaying the add or event that made it is a duplicate that never reverts it",
        permission: Some(Permission::MemoryWrite),
        query: &[crate::api::TIMEOUT],
        request: Payload::Json("EntryUpdate", schema::<hippocamp_memory::EntryUpdate>),
        success: (
            200,
            Payload::Json("UpdateOutcome", schema::<hippocamp_memory::UpdateOutcome>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "not_found",
            "sensitive_content",
            "quota_exceeded",
            "retention",
            "legal_hold",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || put(update_entry),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/entries/{id}/history",
        id: "entry_history",
        summary: "An entry's kept revisions, newest first (at most max_revisions, the current one included)",
        permission: Some(Permission::MemoryRead),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("History", schema::<History>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
        ],
        handler: || get(entry_history),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/restore",
        id: "restore",
        summary: "Restore an export of this same user (the JSON Lines of GET …/export as the body): consent, entries with their revisions, agent sessions; idempotent; artifact and legal-hold lines are counted, not restored",
        permission: Some(Permission::MemoryRestore),
        query: &[(
            "timeout_ms",
            "integer",
            "deadline of the whole restore, 1..=300000 ms (default: http.transfer_timeout_ms)",
        )],
        request: Payload::Bytes,
        success: (
            200,
            Payload::Json(
                "RestoreReport",
                schema::<hippocamp_services::restore::RestoreReport>,
            ),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "sensitive_content",
            "quota_exceeded",
            "consent_required",
            "memory_disabled",
        ],
        handler: || axum::routing::post(restore),
    },
    Route {
        method: "get",
        path: "/v1/apps",
        id: "list_apps",
        summary: "The apps that hold memory, one page in byte order, from the store's index; only for an admin token of every app",
        permission: Some(Permission::Admin),
        query: NAMES_QUERY,
        request: Payload::None,
        success: (
            200,
            Payload::Json("IndexPage", schema::<hippocamp_memory::NamePage>),
        ),
        errors: &["invalid_argument", "forbidden", "memory_disabled"],
        handler: || get(list_apps),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users",
        id: "list_users",
        summary: "The app's users that hold memory, one page in byte order, from the store's index; only for an admin token of that whole app (or of every app)",
        permission: Some(Permission::Admin),
        query: NAMES_QUERY,
        request: Payload::None,
        success: (
            200,
            Payload::Json("IndexPage", schema::<hippocamp_memory::NamePage>),
        ),
        errors: &["invalid_argument", "forbidden", "memory_disabled"],
        handler: || get(list_users),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/artifacts",
        id: "erase_artifacts_user",
        summary: "Delete every version of every artifact of the user's scope (not their sessions'); ?confirm={app}/{user} is required",
        permission: Some(Permission::ArtifactsDelete),
        query: &[crate::api::TIMEOUT, crate::api::CONFIRM_USER],
        request: Payload::None,
        success: (
            200,
            Payload::Json(
                "ArtifactsErased",
                schema::<hippocamp_services::ArtifactsErased>,
            ),
        ),
        errors: ERASE_ARTIFACTS,
        handler: || delete(erase_artifacts),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/sessions/{session}/artifacts",
        id: "erase_artifacts_session",
        summary: "Delete every version of every artifact of one session of the user; ?confirm={app}/{user}/{session} is required",
        permission: Some(Permission::ArtifactsDelete),
        query: &[crate::api::TIMEOUT, crate::api::CONFIRM_SESSION],
        request: Payload::None,
        success: (
            200,
            Payload::Json(
                "ArtifactsErased",
                schema::<hippocamp_services::ArtifactsErased>,
            ),
        ),
        errors: ERASE_ARTIFACTS,
        handler: || delete(erase_artifacts),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/entries",
        id: "list_entries",
        summary: "List the user's live entries, newest or oldest first, one page with an opaque cursor",
        permission: Some(Permission::MemoryRead),
        query: LIST_QUERY,
        request: Payload::None,
        success: (
            200,
            Payload::Json("EntryPage", schema::<hippocamp_memory::EntryPage>),
        ),
        errors: &["invalid_argument", "forbidden", "memory_disabled"],
        handler: || get(list_entries),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/export",
        id: "export",
        summary: "Everything held about the user as JSON Lines, streamed: entries (with obligations), consent, legal hold, agent sessions with their events, artifact records (never bytes; only for a token that may also read the user's artifacts), then an `end` line with counts",
        permission: Some(Permission::MemoryRead),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Bytes),
        errors: &["invalid_argument", "forbidden"],
        handler: || get(export),
    },
    Route {
        method: "put",
        path: "/v1/apps/{app}/users/{user}/consent",
        id: "put_consent",
        summary: "Record (or replace) the user's consent: {consent_id, scope: memory|artifacts|all}; durable",
        permission: Some(Permission::MemoryWrite),
        query: &[],
        request: Payload::Json("NewConsent", schema::<NewConsent>),
        success: (
            200,
            Payload::Json("Consent", schema::<hippocamp_governance::Consent>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "sensitive_content",
            "payload_too_large",
        ],
        handler: || put(put_consent),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/consent",
        id: "get_consent",
        summary: "The user's recorded consent, or null",
        permission: Some(Permission::MemoryRead),
        query: &[],
        request: Payload::None,
        success: (200, Payload::Json("ConsentReply", schema::<ConsentReply>)),
        errors: &["invalid_argument", "forbidden"],
        handler: || get(get_consent),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/consent",
        id: "delete_consent",
        summary: "Withdraw the user's consent: ingestion stops, queued jobs are cancelled, and the memory is erased when the app's policy says so",
        permission: Some(Permission::MemoryErase),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (
            200,
            Payload::Json("Withdrawal", schema::<hippocamp_services::Withdrawal>),
        ),
        errors: &["invalid_argument", "forbidden"],
        handler: || delete(delete_consent),
    },
];
