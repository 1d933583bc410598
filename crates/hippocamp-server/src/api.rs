//! HTTP API v1: the handlers and the route table that both registers them
//! and generates the OpenAPI document (`openapi.rs`), so the document
//! cannot list a route the server lacks or miss one it has.
//!
//! The table is the one place a route's permission and error codes are
//! declared: `router()` hands each handler its row, and the scope
//! extractors ([`MemoryCall`], [`ArtifactCall`]) check the token's grant
//! against the row's permission before any store is touched. JSON bodies
//! are read with an explicit size limit and parsed with unknown fields
//! refused. Artifact bodies are raw bytes, streamed both ways.

// Handlers bind the same extractors throughout: `s`, `m`/`a`, `q` read as
// state, the memory or artifact call, and the query.
#![allow(clippy::many_single_char_names)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body as HttpBody;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use futures::{StreamExt as _, TryStreamExt as _};
use hippocamp_artifacts::{
    ArtifactName, ArtifactScope, Body, ByteRange, DeleteSelector, MimeType, PageRequest,
    PutOptions, Selector,
};
use hippocamp_core::{CallOptions, EntryId, Error, MemoryScope, SessionId, erasure_confirmation};
use hippocamp_memory::event::{merge_report, parse_events};
use hippocamp_memory::{NewEntry, SearchRequest, WriteOptions};
use hippocamp_services::auth::{Grant, Permission, Presented};
use hippocamp_services::{Config, Services};
use http_body_util::BodyExt as _;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The stores and tokens. Behind one `Arc`: handlers and middleware
    /// clone the state several times a request, and cloning every store
    /// handle each time was a measured share of a search request.
    pub services: Arc<Services>,
    /// The configuration.
    pub config: Arc<Config>,
    /// Requests served at once (`http.max_concurrent_requests`); a permit
    /// is held until the reply's body ends.
    pub permits: Arc<tokio::sync::Semaphore>,
    /// Closed when the last clone is dropped: declared last, so after
    /// that clone's store handles (see [`AppState::new`]).
    _held: tokio::sync::mpsc::Sender<()>,
}

impl AppState {
    /// The state, and what tells when every clone of it is gone: a
    /// server's connection tasks drop theirs only after the server has
    /// stopped waiting for them, so whoever closes the stores waits for
    /// this receiver's `recv` to return `None`.
    pub fn new(services: Services, config: Arc<Config>) -> (Self, tokio::sync::mpsc::Receiver<()>) {
        let (held, released) = tokio::sync::mpsc::channel(1);
        let permits = usize::try_from(config.http.max_concurrent_requests).unwrap_or(usize::MAX);
        (
            Self {
                services: Arc::new(services),
                permits: Arc::new(tokio::sync::Semaphore::new(permits)),
                config,
                _held: held,
            },
            released,
        )
    }
}

impl axum::extract::FromRef<AppState> for Arc<tokio::sync::Semaphore> {
    fn from_ref(s: &AppState) -> Self {
        Arc::clone(&s.permits)
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The grant of the request's bearer token (`Authorization: Bearer …`,
/// the scheme in any case, RFC 7235), and who the policy sees: the
/// token's public id.
#[derive(Debug, Clone)]
pub struct Caller(pub Grant, pub hippocamp_core::Caller);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let secret = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        match state.services.tokens.identify(secret) {
            Presented::Valid(grant, id) => Ok(Caller(grant, hippocamp_core::Caller::token(&id))),
            Presented::Expired { at_ms, .. } => Err(ApiError::expired_token(at_ms)),
            Presented::Unknown => Err(ApiError::invalid_token()),
        }
    }
}

/// An artifact scope in words, for errors.
fn scope_words(scope: &ArtifactScope) -> String {
    match scope {
        ArtifactScope::App { app } => format!("the app {app}"),
        ArtifactScope::User { app, user } => format!("{app}/{user}"),
        ArtifactScope::Session { app, user, session } => format!("{app}/{user}/{session}"),
    }
}

/// The bearer secret of a request, if it has one.
fn bearer(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, secret)| secret.trim())
}

/// The row of the route being served (every handler is registered with
/// its row by [`router`]).
#[derive(Debug, Clone, Copy)]
struct Served(&'static Route);

fn served(parts: &Parts) -> ApiResult<&'static Route> {
    parts
        .extensions
        .get::<Served>()
        .map(|s| s.0)
        .ok_or_else(|| {
            ApiError::from(Error::Unavailable(
                "a handler was registered without its route".into(),
            ))
        })
}

/// The path's parameters; a malformed path (bad percent-encoding, not
/// UTF-8) is our 400.
async fn path_params(parts: &mut Parts, state: &AppState) -> ApiResult<HashMap<String, String>> {
    Path::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map(|Path(p)| p)
        .map_err(|e| ApiError::bad_request(format!("bad path: {}", e.body_text())))
}

pub(crate) fn param<'a>(p: &'a HashMap<String, String>, key: &str) -> ApiResult<&'a str> {
    p.get(key)
        .map(String::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("missing path parameter {key}")))
}

/// The permission the served route declares.
fn permission(route: &Route) -> ApiResult<Permission> {
    route.permission.ok_or_else(|| {
        ApiError::from(Error::Unavailable(format!(
            "route {} declares no permission",
            route.id
        )))
    })
}

/// A memory call: an authenticated caller whose token grants the route's
/// permission on the scope in the path, and the path's other parameters.
#[derive(Debug)]
pub struct MemoryCall {
    pub(crate) scope: MemoryScope,
    pub(crate) params: HashMap<String, String>,
    /// The token's grant (a route may also consult it for what else it
    /// returns, as the export does for artifacts).
    pub(crate) grant: Grant,
    /// The token that made the call, for the policy.
    pub(crate) caller: hippocamp_core::Caller,
}

impl MemoryCall {
    /// The call's options: `?timeout_ms=` (see [`call_options`]), on
    /// behalf of the calling token.
    pub(crate) fn call(&self, timeout_ms: Option<u64>) -> ApiResult<CallOptions> {
        Ok(call_options(timeout_ms)?.on_behalf_of(self.caller))
    }
}

impl FromRequestParts<AppState> for MemoryCall {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let route = served(parts)?;
        let Caller(grant, caller) = Caller::from_request_parts(parts, state).await?;
        let params = path_params(parts, state).await?;
        let scope = MemoryScope::parse(param(&params, "app")?, param(&params, "user")?)?;
        if let Some(logged) = parts.extensions.get::<crate::LoggedScope>() {
            logged.set(scope.keyed_hash(&state.services.governance.audit.scope_key()));
        }
        let needed = permission(route)?;
        if !grant.allows_memory(&scope, needed) {
            return Err(ApiError::forbidden(
                needed.as_str(),
                format_args!("{}/{}", scope.app(), scope.user()),
            ));
        }
        Ok(Self {
            scope,
            params,
            grant,
            caller,
        })
    }
}

/// An artifact call: as [`MemoryCall`], on an app, user or session scope.
#[derive(Debug)]
pub struct ArtifactCall {
    pub(crate) scope: ArtifactScope,
    params: HashMap<String, String>,
    /// Who calls: every store call is made for them.
    pub(crate) caller: hippocamp_core::Caller,
}

impl ArtifactCall {
    fn name(&self) -> ApiResult<ArtifactName> {
        Ok(ArtifactName::new(param(&self.params, "name")?)?)
    }

    /// The options of a call with `timeout_ms`, made for the caller.
    pub(crate) fn call(&self, timeout_ms: Option<u64>) -> ApiResult<CallOptions> {
        Ok(call_options(timeout_ms)?.on_behalf_of(self.caller))
    }

    /// The options of a transfer with `timeout_ms`, made for the caller,
    /// and when it ends.
    pub(crate) fn transfer(
        &self,
        s: &AppState,
        timeout_ms: Option<u64>,
    ) -> ApiResult<(CallOptions, Instant)> {
        let (call, until) = transfer_options(s, timeout_ms)?;
        Ok((call.on_behalf_of(self.caller), until))
    }
}

impl FromRequestParts<AppState> for ArtifactCall {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let route = served(parts)?;
        let Caller(grant, caller) = Caller::from_request_parts(parts, state).await?;
        let params = path_params(parts, state).await?;
        let app = param(&params, "app")?;
        let scope = match (params.get("user"), params.get("session")) {
            (None, _) => ArtifactScope::app(app)?,
            (Some(user), None) => ArtifactScope::user(app, user)?,
            (Some(user), Some(session)) => ArtifactScope::session(app, user, session)?,
        };
        let needed = permission(route)?;
        if !grant.allows_artifacts(&scope, needed) {
            return Err(ApiError::forbidden(needed.as_str(), scope_words(&scope)));
        }
        Ok(Self {
            scope,
            params,
            caller,
        })
    }
}

/// Reads a JSON body of at most `max_json_body_bytes`: a JSON object
/// (`shape` shows it, for the error), refusing unknown fields (the types
/// say so).
pub(crate) async fn json_body<T: DeserializeOwned>(
    state: &AppState,
    body: HttpBody,
    shape: &'static str,
) -> ApiResult<T> {
    let max = usize::try_from(state.config.http.max_json_body_bytes).unwrap_or(usize::MAX);
    // A client trickling its body must not hold a slot for ever.
    let patience = Duration::from_millis(state.config.http.body_timeout_ms);
    let bytes = tokio::time::timeout(patience, http_body_util::Limited::new(body, max).collect())
        .await
        .map_err(|_| ApiError::from(Error::Timeout(hippocamp_core::Stage::Transfer)))?
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                ApiError::from(Error::TooLarge {
                    limit: "http.max_json_body_bytes",
                    max: state.config.http.max_json_body_bytes,
                })
            } else {
                ApiError::bad_request(format!("cannot read the body: {e}"))
            }
        })?
        .to_bytes();
    // Every request body is an object: serde would also build a struct
    // from a positional array (`["text", {}]` was an entry), and a bare
    // list of events is the first thing a new user tries.
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(ApiError::bad_request(format!(
                "the body is a JSON object, {shape}, not an array"
            )));
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "the body is a JSON object, {shape}"
            )));
        }
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("bad JSON body: {e}")))
}

/// The shape of an entry's body, for errors.
pub(crate) const ENTRY_SHAPE: &str = r#"{"content": "…", "metadata": {…}}"#;

/// The shape of an events body, for errors.
const EVENTS_SHAPE: &str = r#"{"events": [ …ADK events… ]}"#;

pub(crate) fn json(v: impl serde::Serialize) -> ApiResult<Response> {
    // Straight to bytes: going through a `serde_json::Value` first was
    // the largest share of a search reply's CPU time in the profile.
    json_bytes(serde_json::to_vec(&v))
}

/// A JSON reply from bytes already encoded.
fn json_bytes(encoded: serde_json::Result<Vec<u8>>) -> ApiResult<Response> {
    encoded
        .map(|bytes| {
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/json"),
                )],
                bytes,
            )
                .into_response()
        })
        .map_err(|e| ApiError::from(Error::Unavailable(format!("cannot encode a reply: {e}"))))
}

/// Times a store call into `hippocamp_store_op_duration_seconds`.
pub(crate) async fn timed<T>(
    op: &'static str,
    f: impl Future<Output = hippocamp_core::Result<T>>,
) -> ApiResult<T> {
    let started = Instant::now();
    let out = f.await;
    metrics::histogram!("hippocamp_store_op_duration_seconds", "op" => op)
        .record(started.elapsed().as_secs_f64());
    Ok(out?)
}

/// `?timeout_ms=`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallQuery {
    pub(crate) timeout_ms: Option<u64>,
}

/// `?timeout_ms=` and `?epoch=` of memory writes.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteQuery {
    timeout_ms: Option<u64>,
    epoch: Option<u64>,
}

/// `?timeout_ms=` and `?confirm=` of a whole-scope erasure.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EraseQuery {
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) confirm: Option<String>,
}

/// A whole-scope erasure runs only when `?confirm=` names exactly the
/// scope it erases; else 400 `confirmation_required` and nothing is done.
pub(crate) fn confirmed(expected: &str, given: Option<&str>) -> ApiResult<()> {
    if given == Some(expected) {
        Ok(())
    } else {
        Err(Error::ConfirmationRequired {
            expected: expected.to_owned(),
        }
        .into())
    }
}

/// A call's deadline: `?timeout_ms=` (1 ..= 60,000), or the store's own
/// `call_timeout_ms` (the value its capabilities report).
pub(crate) fn call_options(timeout_ms: Option<u64>) -> ApiResult<CallOptions> {
    Ok(match timeout_ms {
        Some(ms) => CallOptions::timeout_ms(ms)?,
        None => CallOptions::default(),
    })
}

/// An upload's or download's deadline: `?timeout_ms=` (1 ..= 300,000) or
/// the server's transfer timeout.
pub(crate) fn transfer_options(
    state: &AppState,
    timeout_ms: Option<u64>,
) -> ApiResult<(CallOptions, Instant)> {
    let ms = timeout_ms.unwrap_or(state.config.http.transfer_timeout_ms);
    let timeout = Duration::from_millis(ms);
    let call = CallOptions::transfer_timeout(timeout)?;
    Ok((call, Instant::now() + timeout))
}

/// Query-string rejections become our 400.
pub(crate) type Q<T> = Result<Query<T>, axum::extract::rejection::QueryRejection>;

pub(crate) fn parse_query<T: DeserializeOwned + Default>(q: Q<T>) -> ApiResult<T> {
    match q {
        Ok(Query(q)) => Ok(q),
        Err(e) => Err(ApiError::bad_request(e.body_text())),
    }
}

// ---- memory ----------------------------------------------------------

/// The memory store, or 503 `memory_disabled`.
pub(crate) fn memory(s: &AppState) -> ApiResult<&Arc<dyn hippocamp_memory::MemoryStore>> {
    Ok(s.services.memory_store()?)
}

/// A store's capabilities with the server's own bounds in force (`http`):
/// every limit a client meets is reported, with the value that applies.
/// The policy shown is what the caller's app is held to (every app's, holds
/// included, only to a token of every app).
fn with_http(s: &AppState, c: &Caller, store: impl serde::Serialize) -> ApiResult<Response> {
    let mut agent = s.config.sessions.describe();
    agent.extend(hippocamp_agent::builtin::fixed_limits());
    agent.extend(hippocamp_agent::preload::fixed_limits());
    agent.extend(crate::agent_sessions::fixed_limits());
    agent.extend(hippocamp_agent::memory_tool::fixed_limits());
    agent.extend(hippocamp_mcp::fixed_limits());
    let mut http = s.config.http.describe();
    http.extend(s.config.restore.describe());
    http.extend(s.config.consolidation.limits.describe());
    http.extend(s.config.consolidation.extract.describe());
    http.extend(hippocamp_memory::items::fixed_limits());
    json(WithHttp {
        store,
        http,
        agent,
        policy: s
            .services
            .governance
            .policy
            .describe()
            .seen_from(c.0.app.as_ref()),
    })
}

async fn memory_capabilities(State(s): State<AppState>, c: Caller) -> ApiResult<Response> {
    with_http(&s, &c, memory(&s)?.capabilities())
}

async fn add_entry(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<WriteQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let entry: NewEntry = json_body(&s, body, ENTRY_SHAPE).await?;
    let opts = WriteOptions {
        epoch: q.epoch,
        ..WriteOptions::new(m.call(q.timeout_ms)?)
    };
    let out = timed("add_entry", memory(&s)?.add_entry(&m.scope, entry, &opts)).await?;
    let status = if out.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, json(out)?).into_response())
}

/// `POST …/events`: each event is parsed on its own, so one malformed
/// event is reported among the skips and never fails the batch.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Events")]
pub struct EventsBody {
    /// ADK events (what each may hold: `Event`).
    #[schemars(with = "Vec<hippocamp_memory::Event>")]
    events: Vec<Value>,
}

async fn add_events(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<WriteQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let session = SessionId::new(param(&m.params, "session")?)?;
    let q = parse_query(q)?;
    let b: EventsBody = json_body(&s, body, EVENTS_SHAPE).await?;
    let opts = WriteOptions {
        epoch: q.epoch,
        ..WriteOptions::new(m.call(q.timeout_ms)?)
    };
    let (events, positions, malformed) = parse_events(b.events);
    let report = timed(
        "add_events",
        memory(&s)?.add_events(&m.scope, &session, &events, &opts),
    )
    .await?;
    json(merge_report(report, &positions, malformed))
}

async fn search(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let req: SearchRequest = json_body(&s, body, r#"{"query": "…"}"#).await?;
    let call = m.call(q.timeout_ms)?;
    // The hot reply, written directly (the same bytes as serde_json's).
    json_bytes(
        timed("search", memory(&s)?.search(&m.scope, &req, &call))
            .await?
            .to_json(),
    )
}

pub(crate) fn entry_id(m: &MemoryCall) -> ApiResult<EntryId> {
    Ok(param(&m.params, "id")?.parse::<EntryId>()?)
}

async fn get_entry(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let id = entry_id(&m)?;
    let call = m.call(parse_query(q)?.timeout_ms)?;
    json(timed("get_entry", memory(&s)?.get_entry(&m.scope, &id, &call)).await?)
}

async fn delete_entry(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let id = entry_id(&m)?;
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let n = timed(
        "delete_entry",
        memory(&s)?.delete_entry(&m.scope, &id, &call),
    )
    .await?;
    json(Deleted { deleted: n })
}

pub(crate) async fn delete_session(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<EraseQuery>,
) -> ApiResult<Response> {
    let session = SessionId::new(param(&m.params, "session")?)?;
    let q = parse_query(q)?;
    confirmed(
        &erasure_confirmation(&m.scope, Some(&session)),
        q.confirm.as_deref(),
    )?;
    let call = m.call(q.timeout_ms)?;
    memory(&s)?;
    // The session's memory and its agent session go in one step.
    let agent = s.services.agent();
    let gone = timed(
        "delete_session",
        agent.erase_session(&m.scope, &session, &call),
    )
    .await?;
    json(SessionErased {
        deleted: gone.memory.ok_or(hippocamp_core::Error::MemoryDisabled)?,
        agent_session: gone.agent_session,
    })
}

/// What erasing a session removed.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct SessionErased {
    /// Memory entries removed (0 when the session held none).
    deleted: u64,
    /// Whether the agent session (the runner's conversation) of that id
    /// existed; it is gone too.
    agent_session: bool,
}

async fn delete_user(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<EraseQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    confirmed(&erasure_confirmation(&m.scope, None), q.confirm.as_deref())?;
    let call = m.call(q.timeout_ms)?;
    memory(&s)?;
    // The user's memory and their agent sessions go in one step.
    let agent = s.services.agent();
    let gone = timed("delete_user", agent.erase_user(&m.scope, &call)).await?;
    let memory = gone.memory.ok_or(hippocamp_core::Error::MemoryDisabled)?;
    json(UserErased {
        deleted: memory.deleted,
        epoch: memory.epoch,
        sessions: gone.sessions,
    })
}

/// What erasing a user removed.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct UserErased {
    /// Memory entries removed (0 when the scope held none).
    deleted: u64,
    /// The scope's erasure epoch after this erasure: a write admitted
    /// before it carries a smaller epoch and is refused.
    epoch: u64,
    /// Agent sessions of the user removed with it.
    sessions: u64,
}

async fn erasure_epoch(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let epoch = timed("erasure_epoch", memory(&s)?.erasure_epoch(&m.scope, &call)).await?;
    json(Epoch { epoch })
}

/// `POST …/ingest`: the events are parsed one by one (a malformed one is
/// reported among the skips), planned and queued; the reply comes once
/// the admission is durable.
/// A route without query parameters refuses any.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoQuery {}

async fn ingest_events(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    parse_query(q)?;
    let session = SessionId::new(param(&m.params, "session")?)?;
    let b: EventsBody = json_body(&s, body, EVENTS_SHAPE).await?;
    let outbox = s.services.outbox()?;
    let target = hippocamp_outbox::TargetName::new(hippocamp_services::MEMORY_TARGET)?;
    let call = m.call(None)?;
    let r = timed(
        "ingest",
        outbox.ingest_values(&target, &m.scope, &session, b.events, None, &call),
    )
    .await?;
    let status = if r.new_events > 0 {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, json(r)?).into_response())
}

fn job_id(m: &MemoryCall) -> ApiResult<hippocamp_outbox::JobId> {
    Ok(param(&m.params, "id")?.parse()?)
}

async fn job_status(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
) -> ApiResult<Response> {
    parse_query(q)?;
    let id = job_id(&m)?;
    let call = m.call(None)?;
    json(
        timed(
            "job_status",
            s.services.jobs()?.status(&m.scope, &id, &call),
        )
        .await?,
    )
}

async fn cancel_job(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
) -> ApiResult<Response> {
    parse_query(q)?;
    let id = job_id(&m)?;
    let call = m.call(None)?;
    json(
        timed(
            "cancel_job",
            s.services.jobs()?.cancel(&m.scope, &id, &call),
        )
        .await?,
    )
}

async fn delete_job(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<NoQuery>,
) -> ApiResult<Response> {
    parse_query(q)?;
    let id = job_id(&m)?;
    let call = m.call(None)?;
    timed(
        "delete_job",
        s.services.jobs()?.delete(&m.scope, &id, &call),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A caller whose token holds the route's permission over every app (an
/// app-bound token, even an admin one, is refused): the outbox's global
/// routes.
#[derive(Debug)]
pub struct Operator {
    /// The token that made the call, for the policy.
    pub(crate) caller: hippocamp_core::Caller,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let route = served(parts)?;
        let Caller(grant, caller) = Caller::from_request_parts(parts, state).await?;
        let needed = permission(route)?;
        if grant.app.is_some() || !grant.permissions.contains(&needed) {
            return Err(ApiError::forbidden(needed.as_str(), "every app"));
        }
        Ok(Self { caller })
    }
}

/// A caller whose token holds the route's permission over the whole app
/// in the path (every user of it, or every app): an app's admin listing.
#[derive(Debug)]
pub struct AppOperator {
    pub(crate) app: hippocamp_core::AppName,
    pub(crate) caller: hippocamp_core::Caller,
}

impl FromRequestParts<AppState> for AppOperator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        let route = served(parts)?;
        let Caller(grant, caller) = Caller::from_request_parts(parts, state).await?;
        let params = path_params(parts, state).await?;
        let app = hippocamp_core::AppName::new(param(&params, "app")?)?;
        let whole_app = grant.app.as_ref().is_none_or(|a| *a == app) && grant.user.is_none();
        let needed = permission(route)?;
        if !whole_app || !grant.permissions.contains(&needed) {
            return Err(ApiError::forbidden(
                needed.as_str(),
                format_args!("the whole app {app}"),
            ));
        }
        Ok(Self { app, caller })
    }
}

async fn outbox_stats(
    State(s): State<AppState>,
    _o: Operator,
    q: Q<NoQuery>,
) -> ApiResult<Response> {
    parse_query(q)?;
    let outbox = s.services.outbox()?;
    json(timed("outbox_stats", outbox.stats()).await?)
}

/// `?limit=` of a prune.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PruneQuery {
    limit: Option<u64>,
}

async fn outbox_prune(
    State(s): State<AppState>,
    _o: Operator,
    q: Q<PruneQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let outbox = s.services.outbox()?;
    json(timed("outbox_prune", outbox.prune(q.limit)).await?)
}

// ---- artifacts -------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    cursor: Option<String>,
    limit: Option<u64>,
}

async fn artifact_capabilities(State(s): State<AppState>, c: Caller) -> ApiResult<Response> {
    with_http(&s, &c, s.services.artifacts.capabilities())
}

async fn list_names(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<PageQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let page = PageRequest {
        cursor: q.cursor.map(ArtifactName::new).transpose()?,
        limit: q.limit,
    };
    let call = a.call(None)?;
    json(
        timed(
            "list_names",
            s.services.artifacts.list_names(&a.scope, &page, &call),
        )
        .await?,
    )
}

async fn list_versions(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<PageQuery>,
) -> ApiResult<Response> {
    let name = a.name()?;
    let q = parse_query(q)?;
    let cursor = q
        .cursor
        .map(|c| {
            c.parse::<u64>()
                .map_err(|_| ApiError::bad_request("cursor must be a version number"))
        })
        .transpose()?;
    let page = PageRequest {
        cursor,
        limit: q.limit,
    };
    let call = a.call(None)?;
    json(
        timed(
            "list_versions",
            s.services
                .artifacts
                .list_versions(&a.scope, &name, &page, &call),
        )
        .await?,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct VersionQuery {
    version: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadQuery {
    version: Option<u64>,
    timeout_ms: Option<u64>,
}

fn selector(v: Option<u64>) -> Selector {
    v.map_or(Selector::Latest, Selector::Version)
}

/// The custom-metadata header of a put (a JSON object).
pub const METADATA_HEADER: &str = "x-hippocamp-metadata";
/// The version header of put, get and head replies.
pub const VERSION_HEADER: &str = "x-hippocamp-version";

async fn put_artifact(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<CallQuery>,
    headers: HeaderMap,
    body: HttpBody,
) -> ApiResult<Response> {
    let name = a.name()?;
    let q = parse_query(q)?;
    let max = s.config.artifacts.max_artifact_bytes;
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && len > max
    {
        return Err(Error::TooLarge {
            limit: "max_artifact_bytes",
            max,
        }
        .into());
    }
    let mut opts = PutOptions {
        call: a.transfer(&s, q.timeout_ms)?.0,
        ..PutOptions::default()
    };
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        let ct = ct
            .to_str()
            .map_err(|_| ApiError::bad_request("Content-Type is not text"))?;
        opts.mime_type = MimeType::new(ct)?;
    }
    if let Some(m) = headers.get(METADATA_HEADER) {
        let v: Value = serde_json::from_slice(m.as_bytes())
            .map_err(|e| ApiError::bad_request(format!("{METADATA_HEADER} is not JSON: {e}")))?;
        match v {
            Value::Object(o) => opts.metadata = o,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "{METADATA_HEADER} must be a JSON object"
                )));
            }
        }
    }
    let stream = futures::TryStreamExt::map_err(body.into_data_stream(), |e| {
        Error::Unavailable(format!("the upload failed: {e}"))
    })
    .boxed();
    let meta = timed(
        "put_artifact",
        s.services
            .artifacts
            .put(&a.scope, &name, Body::Stream(stream), &opts),
    )
    .await?;
    let mut r = (StatusCode::CREATED, json(&meta)?).into_response();
    if let Ok(v) = HeaderValue::from_str(&meta.version.to_string()) {
        r.headers_mut().insert(VERSION_HEADER, v);
    }
    Ok(r)
}

/// Parses one `bytes=` range against a size (`None`: no Range header).
fn parse_range(headers: &HeaderMap, size: u64) -> ApiResult<Option<ByteRange>> {
    let Some(v) = headers.get(header::RANGE) else {
        return Ok(None);
    };
    let unsatisfiable = || {
        ApiError::new(
            "range_not_satisfiable",
            format!(
                "the range is not within the {size} bytes of the artifact (one bytes= range is served)"
            ),
        )
    };
    let spec = v
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("bytes="))
        .ok_or_else(unsatisfiable)?;
    if spec.contains(',') {
        return Err(unsatisfiable());
    }
    let (a, b) = spec.split_once('-').ok_or_else(unsatisfiable)?;
    let (first, last) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| unsatisfiable())?;
            if n == 0 {
                return Err(unsatisfiable());
            }
            (size.saturating_sub(n), size.saturating_sub(1))
        }
        (a, "") => (
            a.parse().map_err(|_| unsatisfiable())?,
            size.saturating_sub(1),
        ),
        (a, b) => {
            let a: u64 = a.parse().map_err(|_| unsatisfiable())?;
            let b: u64 = b.parse().map_err(|_| unsatisfiable())?;
            (a, b.min(size.saturating_sub(1)))
        }
    };
    if size == 0 || first >= size || last < first {
        return Err(unsatisfiable());
    }
    Ok(Some(ByteRange {
        offset: first,
        len: last - first + 1,
    }))
}

/// `filename*=` of a Content-Disposition (RFC 6266, RFC 8187): the last
/// segment of the name, percent-encoded.
fn disposition(name: &ArtifactName) -> String {
    let last = name.as_str().rsplit('/').next().unwrap_or("artifact");
    let mut out = String::from("attachment; filename*=UTF-8''");
    for b in last.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The headers of a download or head: the stored type as the type, but
/// never rendered by a browser on the server's origin (the inspection
/// page lives there): `nosniff`, an attachment disposition and a sandbox.
fn meta_headers(r: &mut Response, meta: &hippocamp_artifacts::ArtifactMeta) {
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(meta.mime_type.as_str()) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("\"{}\"", meta.sha256)) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&meta.version.to_string()) {
        h.insert(VERSION_HEADER, v);
    }
    if let Ok(v) = HeaderValue::from_str(&disposition(&meta.name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
}

async fn get_artifact(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<ReadQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let name = a.name()?;
    let q = parse_query(q)?;
    let sel = selector(q.version);
    let (call, deadline) = a.transfer(&s, q.timeout_ms)?;
    // A range needs the size first (a head, then a read of that version);
    // a whole read is one call.
    let (sel, range) = if headers.contains_key(header::RANGE) {
        let meta = timed(
            "head_artifact",
            s.services.artifacts.head(&a.scope, &name, sel, &call),
        )
        .await?;
        let range = parse_range(&headers, meta.size)?;
        (Selector::Version(meta.version), range)
    } else {
        (sel, None)
    };
    let read = timed(
        "get_artifact",
        s.services.artifacts.get(&a.scope, &name, sel, range, &call),
    )
    .await?;
    let len = range.map_or(read.meta.size, |r| r.len);
    // A chunk failing verification mid-stream ends the body early: its
    // bytes are never sent, and the length announced is not reached. So
    // does the transfer deadline (the client's pace does not extend it).
    let body = crate::transfer::until(read.body.map_err(std::io::Error::other), deadline);
    let body = HttpBody::from_stream(body);
    let status = if range.is_some() {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let mut r = (status, body).into_response();
    meta_headers(&mut r, &read.meta);
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Some(rg) = range {
        let v = format!(
            "bytes {}-{}/{}",
            rg.offset,
            rg.offset + rg.len - 1,
            read.meta.size
        );
        if let Ok(v) = HeaderValue::from_str(&v) {
            r.headers_mut().insert(header::CONTENT_RANGE, v);
        }
    }
    Ok(r)
}

async fn head_artifact(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<VersionQuery>,
) -> ApiResult<Response> {
    let name = a.name()?;
    let sel = selector(parse_query(q)?.version);
    let call = a.call(None)?;
    let meta = timed(
        "head_artifact",
        s.services.artifacts.head(&a.scope, &name, sel, &call),
    )
    .await?;
    let mut r = StatusCode::OK.into_response();
    meta_headers(&mut r, &meta);
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(meta.size));
    Ok(r)
}

async fn artifact_meta(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<VersionQuery>,
) -> ApiResult<Response> {
    let name = a.name()?;
    let sel = selector(parse_query(q)?.version);
    let call = a.call(None)?;
    json(
        timed(
            "head_artifact",
            s.services.artifacts.head(&a.scope, &name, sel, &call),
        )
        .await?,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteQuery {
    version: Option<u64>,
    all: Option<bool>,
}

async fn delete_artifact(
    State(s): State<AppState>,
    a: ArtifactCall,
    q: Q<DeleteQuery>,
) -> ApiResult<Response> {
    let name = a.name()?;
    let q = parse_query(q)?;
    // The selector is explicit: deleting "the latest" by default surprised
    // ADK users, whose delete_artifact removes every version.
    let sel = match (q.version, q.all) {
        (Some(v), None) => DeleteSelector::Version(v),
        (None, Some(true)) => DeleteSelector::All,
        _ => {
            return Err(ApiError::bad_request(
                "name what to delete: ?version=N for one version, or ?all=true for every version",
            ));
        }
    };
    let call = a.call(None)?;
    let removed = timed(
        "delete_artifact",
        s.services.artifacts.delete(&a.scope, &name, sel, &call),
    )
    .await?;
    json(Removed { removed })
}

// ---- the route table -------------------------------------------------

/// A JSON Schema of a request or response type, from the type itself.
pub type SchemaOf = fn(&mut schemars::SchemaGenerator) -> schemars::Schema;

pub(crate) fn schema<T: schemars::JsonSchema>(
    g: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    g.subschema_for::<T>()
}

/// What a route's body is, for the OpenAPI document.
#[derive(Debug, Clone, Copy)]
pub enum Payload {
    /// None.
    None,
    /// A JSON document: a name for people and tests, and the schema of
    /// the type the handler reads or writes.
    Json(&'static str, SchemaOf),
    /// Raw artifact bytes.
    Bytes,
}

impl Payload {
    /// Whether it is raw bytes.
    pub fn is_bytes(self) -> bool {
        matches!(self, Payload::Bytes)
    }
}

/// `{"deleted": n}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Deleted {
    /// Entries removed.
    pub deleted: u64,
}

/// `{"epoch": n}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Epoch {
    /// The scope's erasure epoch (0 until its first erasure).
    pub epoch: u64,
}

/// `{"removed": [versions]}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct Removed {
    /// The versions removed, ascending.
    pub removed: Vec<u64>,
}

/// A store's capabilities and the server's own bounds in force.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "{T}WithHttp")]
pub struct WithHttp<T> {
    /// The store's capabilities.
    #[serde(flatten)]
    pub store: T,
    /// The HTTP bounds in force (`http.*`).
    pub http: Vec<hippocamp_core::LimitInfo>,
    /// The agent surfaces' bounds in force: sessions (`sessions.*`), the
    /// built-in tools (`tools.*`, `attachments.*`) and the MCP server
    /// (`mcp.*`).
    pub agent: Vec<hippocamp_core::LimitInfo>,
    /// The governance policy in force: its timeout, the apps that need
    /// consent, the legal holds, the lifetimes.
    pub policy: hippocamp_governance::PolicyInfo,
}

/// One route of API v1.
#[derive(Debug)]
pub struct Route {
    /// HTTP method (lowercase).
    pub method: &'static str,
    /// Path with `{param}` (and `{*name}` for artifact names).
    pub path: &'static str,
    /// OpenAPI operation id.
    pub id: &'static str,
    /// One line for people.
    pub summary: &'static str,
    /// Permission needed (`None`: any valid token). The handler's scope
    /// extractor checks exactly this.
    pub permission: Option<Permission>,
    /// Query parameters: (name, type, description).
    pub query: &'static [(&'static str, &'static str, &'static str)],
    /// Request body.
    pub request: Payload,
    /// Success status and body.
    pub success: (u16, Payload),
    /// The error codes this route answers with besides those of every
    /// route (`error::ANY_ROUTE`).
    pub errors: &'static [&'static str],
    /// The handler.
    pub handler: fn() -> MethodRouter<AppState>,
}

pub(crate) const TIMEOUT: (&str, &str, &str) = (
    "timeout_ms",
    "integer",
    "deadline of the store call, 1..=60000 ms (default: the store's call_timeout_ms, in its capabilities)",
);
const EPOCH: (&str, &str, &str) = (
    "epoch",
    "integer",
    "the erasure epoch the write was admitted under: older than the scope's is 409 stale_epoch, newer is 409 future_epoch",
);
const PAGE: [(&str, &str, &str); 2] = [
    (
        "cursor",
        "string",
        "exclusive cursor: the last item of the previous page",
    ),
    ("limit", "integer", "items in the page"),
];
const VERSION: (&str, &str, &str) = ("version", "integer", "a version (default: the latest)");
const TRANSFER: (&str, &str, &str) = (
    "timeout_ms",
    "integer",
    "deadline of the whole transfer, 1..=300000 ms (default: http.transfer_timeout_ms)",
);

/// Codes of a scoped route that reads or deletes.
const SCOPED: &[&str] = &["invalid_argument", "forbidden"];
const READ_ONE: &[&str] = &["invalid_argument", "forbidden", "not_found"];
/// The same for memory, which may be disabled.
const MEM_SCOPED: &[&str] = &["invalid_argument", "forbidden", "memory_disabled"];
/// A whole-scope memory erasure.
pub(crate) const MEM_ERASE: &[&str] = &[
    "invalid_argument",
    "confirmation_required",
    "forbidden",
    "memory_disabled",
    "retention",
    "legal_hold",
];
pub(crate) const CONFIRM_USER: (&str, &str, &str) = (
    "confirm",
    "string",
    "required: the exact scope erased, {app}/{user}",
);
pub(crate) const CONFIRM_SESSION: (&str, &str, &str) = (
    "confirm",
    "string",
    "required: the exact scope erased, {app}/{user}/{session}",
);
const MEM_READ_ONE: &[&str] = &[
    "invalid_argument",
    "forbidden",
    "not_found",
    "memory_disabled",
];

macro_rules! artifact_routes {
    ($($prefix:literal, $suffix:literal, $put_errors:expr, $delete_errors:expr;)*) => {
        &[$(
            Route { method: "get", path: concat!($prefix, "/artifacts"), id: concat!("list_names", $suffix), summary: "List names with live versions, one page", permission: Some(Permission::ArtifactsRead), query: &PAGE, request: Payload::None, success: (200, Payload::Json("NamePage", schema::<hippocamp_artifacts::Page<ArtifactName, ArtifactName>>)), errors: SCOPED, handler: || get(list_names) },
            Route { method: "put", path: concat!($prefix, "/artifacts/{*name}"), id: concat!("put_artifact", $suffix), summary: "Store the body as the next version (Content-Type: its MIME type; x-hippocamp-metadata: a JSON object)", permission: Some(Permission::ArtifactsWrite), query: &[TRANSFER], request: Payload::Bytes, success: (201, Payload::Json("ArtifactMeta", schema::<hippocamp_artifacts::ArtifactMeta>)), errors: $put_errors, handler: || axum::routing::put(put_artifact) },
            Route { method: "get", path: concat!($prefix, "/artifacts/{*name}"), id: concat!("get_artifact", $suffix), summary: "Read a version, verified (one bytes= Range gives 206); served as an attachment, never rendered", permission: Some(Permission::ArtifactsRead), query: &[VERSION, TRANSFER], request: Payload::None, success: (200, Payload::Bytes), errors: &["invalid_argument", "forbidden", "not_found", "range_not_satisfiable"], handler: || get(get_artifact) },
            Route { method: "head", path: concat!($prefix, "/artifacts/{*name}"), id: concat!("head_artifact", $suffix), summary: "A version's size, type, digest (ETag) and number, as headers", permission: Some(Permission::ArtifactsRead), query: &[VERSION], request: Payload::None, success: (200, Payload::None), errors: READ_ONE, handler: || axum::routing::head(head_artifact) },
            Route { method: "delete", path: concat!($prefix, "/artifacts/{*name}"), id: concat!("delete_artifact", $suffix), summary: "Delete one version (?version=N) or every version (?all=true); one of them is required; idempotent; returns the versions removed", permission: Some(Permission::ArtifactsDelete), query: &[("version", "integer", "the version to delete"), ("all", "boolean", "true: delete every version")], request: Payload::None, success: (200, Payload::Json("Removed", schema::<Removed>)), errors: $delete_errors, handler: || delete(delete_artifact) },
            Route { method: "get", path: concat!($prefix, "/artifact-versions/{*name}"), id: concat!("list_versions", $suffix), summary: "List a name's live versions, one page (records, never bytes)", permission: Some(Permission::ArtifactsRead), query: &PAGE, request: Payload::None, success: (200, Payload::Json("VersionPage", schema::<hippocamp_artifacts::Page<hippocamp_artifacts::ArtifactMeta, u64>>)), errors: SCOPED, handler: || get(list_versions) },
            Route { method: "get", path: concat!($prefix, "/artifact-meta/{*name}"), id: concat!("artifact_meta", $suffix), summary: "A version's record as JSON", permission: Some(Permission::ArtifactsRead), query: &[VERSION], request: Payload::None, success: (200, Payload::Json("ArtifactMeta", schema::<hippocamp_artifacts::ArtifactMeta>)), errors: READ_ONE, handler: || get(artifact_meta) },
        )*]
    };
}

const MEMORY: &[Route] = &[
    Route {
        method: "get",
        path: "/v1/memory/capabilities",
        id: "memory_capabilities",
        summary: "Limits and features of the memory service, and the HTTP bounds in force (`http`)",
        permission: None,
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json(
                "Capabilities",
                schema::<WithHttp<hippocamp_memory::Capabilities>>,
            ),
        ),
        errors: &["memory_disabled"],
        handler: || get(memory_capabilities),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/entries",
        id: "add_entry",
        summary: "Add one entry (idempotent under its idempotency_key); 201, or 200 for a duplicate",
        permission: Some(Permission::MemoryWrite),
        query: &[TIMEOUT, EPOCH],
        request: Payload::Json("NewEntry", schema::<NewEntry>),
        success: (
            201,
            Payload::Json("AddOutcome", schema::<hippocamp_memory::AddOutcome>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consent_required",
            "sensitive_content",
            "memory_disabled",
            "idempotency_conflict",
            "stale_epoch",
            "future_epoch",
            "quota_exceeded",
            "payload_too_large",
        ],
        handler: || post(add_entry),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/sessions/{session}/events",
        id: "add_events",
        summary: "Ingest conversation events of a session now (ADK's event shape, snake_case or camelCase; each remembered once; a malformed event is skipped with its reason). With an embedder, events are embedded inside the call's deadline: a large batch needs a larger timeout_ms (up to 60000), or the asynchronous `ingest` route",
        permission: Some(Permission::MemoryWrite),
        query: &[TIMEOUT, EPOCH],
        request: Payload::Json("Events", schema::<EventsBody>),
        success: (
            200,
            Payload::Json("IngestReport", schema::<hippocamp_memory::IngestReport>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consent_required",
            "stale_epoch",
            "future_epoch",
            "quota_exceeded",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || post(add_events),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/search",
        id: "search",
        summary: "Search the scope's entries (BM25, vector or hybrid)",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::Json("SearchRequest", schema::<SearchRequest>),
        success: (
            200,
            Payload::Json("SearchResults", schema::<hippocamp_memory::SearchResults>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || post(search),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/entries/{id}",
        id: "get_entry",
        summary: "One entry",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (
            200,
            Payload::Json("MemoryEntry", schema::<hippocamp_memory::MemoryEntry>),
        ),
        errors: MEM_READ_ONE,
        handler: || get(get_entry),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/memory/entries/{id}",
        id: "delete_entry",
        summary: "Delete one entry and, in the same operation, every entry derived from it (idempotent; `deleted` counts both)",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Deleted", schema::<Deleted>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "memory_disabled",
            "retention",
            "legal_hold",
        ],
        handler: || delete(delete_entry),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/memory/sessions/{session}",
        id: "delete_session",
        summary: "Erase a session: every memory entry of it and the agent session of that id; ?confirm={app}/{user}/{session} is required",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT, CONFIRM_SESSION],
        request: Payload::None,
        success: (200, Payload::Json("SessionErased", schema::<SessionErased>)),
        errors: MEM_ERASE,
        handler: || delete(delete_session),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/memory",
        id: "delete_user",
        summary: "Erase the user: every entry and every agent session, and advance the erasure epoch; ?confirm={app}/{user} is required",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT, CONFIRM_USER],
        request: Payload::None,
        success: (200, Payload::Json("UserErased", schema::<UserErased>)),
        errors: MEM_ERASE,
        handler: || delete(delete_user),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/epoch",
        id: "erasure_epoch",
        summary: "The scope's erasure epoch (0 until its first erasure): what a queued write carries as ?epoch=",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Epoch", schema::<Epoch>)),
        errors: MEM_SCOPED,
        handler: || get(erasure_epoch),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/sessions/{session}/ingest",
        id: "ingest_events",
        summary: "Queue a session's events for delivery in the background (send the whole session every turn: only events not admitted before become work); 202 once durably queued, 200 when nothing was new; skipped events are reported now",
        permission: Some(Permission::MemoryWrite),
        query: &[],
        request: Payload::Json("Events", schema::<EventsBody>),
        success: (
            202,
            Payload::Json("Ingested", schema::<hippocamp_outbox::Ingested>),
        ),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consent_required",
            "quota_exceeded",
            "payload_too_large",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || post(ingest_events),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/memory/jobs/{id}",
        id: "job_status",
        summary: "An ingestion job of the scope: its state, attempts and progress (no event content)",
        permission: Some(Permission::MemoryRead),
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json("JobStatus", schema::<hippocamp_outbox::JobStatus>),
        ),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || get(job_status),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/jobs/{id}/cancel",
        id: "cancel_job",
        summary: "Cancel an ingestion job of the scope (its events are dropped; a finished job is left as it is)",
        permission: Some(Permission::MemoryWrite),
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json("JobStatus", schema::<hippocamp_outbox::JobStatus>),
        ),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || post(cancel_job),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/memory/jobs/{id}",
        id: "delete_job",
        summary: "Delete a finished ingestion job's status (a pending or running job is refused with job_active: cancel it first)",
        permission: Some(Permission::MemoryWrite),
        query: &[],
        request: Payload::None,
        success: (204, Payload::None),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "job_active",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || delete(delete_job),
    },
    Route {
        method: "get",
        path: "/v1/outbox/stats",
        id: "outbox_stats",
        summary: "The outbox's counters (O(1)); only for an admin token of every app",
        permission: Some(Permission::Admin),
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json("OutboxStats", schema::<hippocamp_outbox::OutboxStats>),
        ),
        errors: &[
            "invalid_argument",
            "forbidden",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || get(outbox_stats),
    },
    Route {
        method: "post",
        path: "/v1/outbox/prune",
        id: "outbox_prune",
        summary: "One pass removing finished jobs older than the retention (the processor also prunes on its own); only for an admin token of every app",
        permission: Some(Permission::Admin),
        query: &[(
            "limit",
            "integer",
            "jobs to remove at most, 1..=outbox.max_prune_batch",
        )],
        request: Payload::None,
        success: (
            200,
            Payload::Json("Pruned", schema::<hippocamp_outbox::Pruned>),
        ),
        errors: &[
            "invalid_argument",
            "forbidden",
            "memory_disabled",
            "outbox_unavailable",
        ],
        handler: || post(outbox_prune),
    },
    Route {
        method: "get",
        path: "/v1/artifacts/capabilities",
        id: "artifact_capabilities",
        summary: "Limits and features of the artifact service, and the HTTP bounds in force (`http`)",
        permission: None,
        query: &[],
        request: Payload::None,
        success: (
            200,
            Payload::Json(
                "ArtifactCapabilities",
                schema::<WithHttp<hippocamp_artifacts::ArtifactCapabilities>>,
            ),
        ),
        errors: &[],
        handler: || get(artifact_capabilities),
    },
];

/// Deleting a user's or a session's versions meets the user's legal hold.
const HELD_DELETE: &[&str] = &["invalid_argument", "forbidden", "legal_hold"];
/// Deleting a user's versions: a memory file's index is erased first, so
/// a retention on it refuses the deletion too.
const USER_DELETE: &[&str] = &["invalid_argument", "forbidden", "legal_hold", "retention"];

/// Storing an app's own version.
const APP_PUT: &[&str] = &[
    "invalid_argument",
    "forbidden",
    "quota_exceeded",
    "payload_too_large",
];

/// Storing a user's or a session's version needs the user's consent to
/// artifacts where the app requires one.
const USER_PUT: &[&str] = &[
    "invalid_argument",
    "forbidden",
    "quota_exceeded",
    "payload_too_large",
    "consent_required",
];

const ARTIFACTS: &[Route] = artifact_routes! {
    "/v1/apps/{app}", "_app", APP_PUT, SCOPED;
    "/v1/apps/{app}/users/{user}", "_user", USER_PUT, USER_DELETE;
    "/v1/apps/{app}/users/{user}/sessions/{session}", "_session", USER_PUT, HELD_DELETE;
};

/// Every route of API v1.
pub fn routes() -> Vec<&'static Route> {
    MEMORY
        .iter()
        .chain(crate::governance::ROUTES.iter())
        .chain(crate::consolidation::ROUTES.iter())
        .chain(crate::preload::ROUTES.iter())
        .chain(crate::items::ROUTES.iter())
        .chain(crate::agent_sessions::ROUTES.iter())
        .chain(crate::memory_tool::ROUTES.iter())
        .chain(ARTIFACTS.iter())
        .collect()
}

/// 405 with our JSON body.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new("method_not_allowed", "this path does not take this method")
}

/// The media types a route's request body may be declared as (`None`:
/// any, as for an artifact's bytes).
fn media_types(r: &Route) -> Option<&'static [&'static str]> {
    match (r.request, r.id) {
        (_, "restore") => Some(&["application/x-ndjson", "application/json"]),
        (Payload::Json(..), _) => Some(&["application/json"]),
        _ => None,
    }
}

/// Refuses a request whose `Content-Type` is not one of `types` (a
/// `+json` type counts as `application/json`; parameters are ignored; a
/// request without one is taken as what the route reads), with 415.
fn check_media_type(types: &[&str], headers: &HeaderMap) -> ApiResult<()> {
    let Some(given) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let given = given.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = given.split(';').next().unwrap_or("").trim();
    let json = types.contains(&"application/json")
        && essence.starts_with("application/")
        && essence.ends_with("+json");
    if types.contains(&essence) || json {
        return Ok(());
    }
    Err(ApiError::new(
        "unsupported_media_type",
        format!(
            "Content-Type `{essence}` is not taken here: send {}",
            types.join(" or ")
        ),
    ))
}

/// The API v1 router (without the state and the outer layers): each
/// handler is registered with its row of the table, and a route that
/// reads a typed body checks its `Content-Type` first.
pub fn router() -> axum::Router<AppState> {
    let mut by_path: Vec<(&'static str, MethodRouter<AppState>)> = Vec::new();
    for r in routes() {
        let mut handler = (r.handler)();
        if let Some(types) = media_types(r) {
            handler = handler.layer(axum::middleware::from_fn(
                move |rq: axum::extract::Request, next: axum::middleware::Next| async move {
                    match check_media_type(types, rq.headers()) {
                        Ok(()) => next.run(rq).await,
                        Err(e) => e.into_response(),
                    }
                },
            ));
        }
        let handler = handler.layer(axum::Extension(Served(r)));
        match by_path.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, m)) => *m = std::mem::take(m).merge(handler),
            None => by_path.push((r.path, handler)),
        }
    }
    by_path
        .into_iter()
        .fold(axum::Router::new(), |router, (path, m)| {
            router.route(path, m.fallback(method_not_allowed))
        })
}
