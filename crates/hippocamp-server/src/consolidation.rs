//! Routes of derived memory: consolidation runs (start, list, show,
//! apply, revert) and an entry's lineage. The rows join the one route
//! table (`api::routes`), which declares each permission; every run asks
//! the policy `consolidate` first (`Services::ask_consolidate`), then
//! reads and writes through the governed memory handle.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hippocamp_governance::Action;
use hippocamp_services::auth::Permission;
use hippocamp_services::consolidation::{Run, RunPage, StartRun};
use serde::{Deserialize, Serialize};

use crate::api::{
    ApiResult, AppState, CallQuery, MemoryCall, Payload, Q, Route, entry_id, json, json_body,
    memory, param, parse_query, schema, timed,
};

/// How long a run may take when the request does not say (a run is many
/// store calls: it reads the scope, then writes each merge).
const RUN_TIMEOUT_MS: u64 = 60_000;

/// `POST …/consolidations`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartQuery {
    /// Answer with the finished run (200) rather than at once (202).
    #[serde(default)]
    wait: bool,
    timeout_ms: Option<u64>,
}

/// A run as `202 Accepted` names it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct Started {
    run: StartedRun,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
struct StartedRun {
    id: String,
    state: hippocamp_services::consolidation::RunState,
}

async fn start(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<StartQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let req: StartRun = json_body(&s, body, r#"{"mode": "dedupe"}"#).await?;
    let call = m.call(Some(q.timeout_ms.unwrap_or(RUN_TIMEOUT_MS)))?;
    let call = s
        .services
        .ask_consolidate(&m.scope, Action::Consolidate, "start a run", &call)
        .await?;
    let runs = &s.services.consolidations;
    let run = runs.begin(&m.scope, &req).await?;
    let store = std::sync::Arc::clone(memory(&s)?);
    if q.wait {
        let run = timed(
            "consolidate",
            runs.execute(store.as_ref(), &m.scope, run, &req, &call),
        )
        .await?;
        return json(run);
    }
    let started = Started {
        run: StartedRun {
            id: run.id.clone(),
            state: run.state,
        },
    };
    let runs = std::sync::Arc::clone(runs);
    let scope = m.scope.clone();
    // The run's outcome is recorded on it (GET …/consolidations/{id}).
    tokio::spawn(async move {
        let _ = runs.execute(store.as_ref(), &scope, run, &req, &call).await;
    });
    Ok((StatusCode::ACCEPTED, json(started)?).into_response())
}

async fn list(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    s.services
        .ask_consolidate(&m.scope, Action::List, "list runs", &call)
        .await?;
    json(s.services.consolidations.list(&m.scope).await?)
}

fn run_id(m: &MemoryCall) -> ApiResult<String> {
    let id = param(&m.params, "id")?;
    let hex = id.strip_prefix("run-").unwrap_or("");
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(hippocamp_core::Error::NotFound("consolidation run").into());
    }
    Ok(id.to_owned())
}

async fn show(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let call = s
        .services
        .ask_consolidate(&m.scope, Action::Get, "read a run", &call)
        .await?;
    let id = run_id(&m)?;
    let runs = &s.services.consolidations;
    json(
        timed(
            "consolidation",
            runs.show(memory(&s)?.as_ref(), &m.scope, &id, &call),
        )
        .await?,
    )
}

async fn apply(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let call = m.call(Some(parse_query(q)?.timeout_ms.unwrap_or(RUN_TIMEOUT_MS)))?;
    let call = s
        .services
        .ask_consolidate(&m.scope, Action::Consolidate, "apply a run", &call)
        .await?;
    let id = run_id(&m)?;
    let runs = &s.services.consolidations;
    json(
        timed(
            "consolidation_apply",
            runs.apply(memory(&s)?.as_ref(), &m.scope, &id, &call),
        )
        .await?,
    )
}

async fn revert(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let call = m.call(Some(parse_query(q)?.timeout_ms.unwrap_or(RUN_TIMEOUT_MS)))?;
    let call = s
        .services
        .ask_consolidate(&m.scope, Action::Consolidate, "revert a run", &call)
        .await?;
    let id = run_id(&m)?;
    let runs = &s.services.consolidations;
    json(
        timed(
            "consolidation_revert",
            runs.revert(memory(&s)?.as_ref(), &m.scope, &id, &call),
        )
        .await?,
    )
}

async fn lineage(State(s): State<AppState>, m: MemoryCall, q: Q<CallQuery>) -> ApiResult<Response> {
    let id = entry_id(&m)?;
    let call = m.call(parse_query(q)?.timeout_ms)?;
    json(
        timed(
            "entry_lineage",
            memory(&s)?.entry_lineage(&m.scope, &id, &call),
        )
        .await?,
    )
}

const RUN_TIMEOUT: (&str, &str, &str) = (
    "timeout_ms",
    "integer",
    "deadline of the whole run, 1..=60000 ms (default 60000)",
);

const RUN_ERRORS: &[&str] = &[
    "invalid_argument",
    "forbidden",
    "not_found",
    "run_conflict",
    "consolidation_running",
    "memory_disabled",
];

/// The routes of derived memory.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/consolidations",
        id: "start_consolidation",
        summary: "Start a consolidation run ({\"mode\": \"dedupe\", \"apply\": \"auto\" | \"review\", \"origins\": [...]}): near-duplicates merge into derived facts with lineage; 202 with the run's id, or with ?wait=true 200 with the finished run; one run at a time per user",
        permission: Some(Permission::MemoryWrite),
        query: &[
            (
                "wait",
                "boolean",
                "answer with the finished run (200) rather than at once (202)",
            ),
            RUN_TIMEOUT,
        ],
        request: Payload::Json("StartRun", schema::<StartRun>),
        success: (202, Payload::Json("Run", schema::<Run>)),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consolidation_running",
            "unsupported",
            "memory_disabled",
        ],
        handler: || post(start),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/consolidations",
        id: "list_consolidations",
        summary: "The user's consolidation runs kept by this server, newest first",
        permission: Some(Permission::MemoryRead),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("RunPage", schema::<RunPage>)),
        errors: &["invalid_argument", "forbidden", "memory_disabled"],
        handler: || get(list),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/consolidations/{id}",
        id: "get_consolidation",
        summary: "One run with each change's entries before and after, read now (an erased entry is absent)",
        permission: Some(Permission::MemoryRead),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Run", schema::<Run>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
        ],
        handler: || get(show),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/consolidations/{id}/apply",
        id: "apply_consolidation",
        summary: "Write a proposed run's changes; a change whose entries changed or were erased since is skipped and reported",
        permission: Some(Permission::MemoryWrite),
        query: &[RUN_TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Run", schema::<Run>)),
        errors: RUN_ERRORS,
        handler: || post(apply),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/consolidations/{id}/revert",
        id: "revert_consolidation",
        summary: "Undo an applied run: its facts are removed and what they merged is current again; 409 run_conflict when a fact was corrected, erased or built on since",
        permission: Some(Permission::MemoryWrite),
        query: &[RUN_TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Run", schema::<Run>)),
        errors: RUN_ERRORS,
        handler: || post(revert),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/entries/{id}/lineage",
        id: "entry_lineage",
        summary: "What an entry was derived from and what was derived from it, each with its origin and status",
        permission: Some(Permission::MemoryRead),
        query: &[crate::api::TIMEOUT],
        request: Payload::None,
        success: (
            200,
            Payload::Json("Lineage", schema::<hippocamp_memory::lineage::Lineage>),
        ),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
        ],
        handler: || get(lineage),
    },
];
