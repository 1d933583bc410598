//! Agent sessions over HTTP, under their own prefix (`…/agent-sessions`;
//! the session paths of memory and artifacts are taken): list, read and
//! erase a user's sessions, and read, append and pop the items a
//! framework keeps in one (`hippocamp_agent::session_items`: byte-exact
//! JSON, remembered as turns, popped with the memory they became).
//! Sessions go through the governed session store, memory through the
//! governed memory handle; the rows join the one route table.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{delete, get, post};
use hippocamp_agent::session_items;
use hippocamp_core::{Error, Field, Problem, SessionId, time::now_ms};
use hippocamp_memory::{IngestReport, WriteOptions};
use hippocamp_services::auth::Permission;
use hippocamp_sessions::{AppendOptions, Session, SessionPage};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::api::{
    ApiResult, AppState, CONFIRM_SESSION, CallQuery, MEM_ERASE, MemoryCall, Payload, Q, Route,
    SessionErased, TIMEOUT, delete_session, json, json_body, memory, param, parse_query, schema,
    timed,
};

/// Items one append may carry.
pub const MAX_ITEMS_PER_APPEND: u64 = 100;

/// The capabilities rows of the agent-session routes' fixed bounds.
pub fn fixed_limits() -> Vec<hippocamp_core::LimitInfo> {
    vec![hippocamp_core::LimitInfo::fixed(
        "sessions.max_items_per_append",
        MAX_ITEMS_PER_APPEND,
        1,
        "items one POST …/agent-sessions/{session}/items may carry",
    )]
}

fn session(m: &MemoryCall) -> ApiResult<SessionId> {
    Ok(SessionId::new(param(&m.params, "session")?)?)
}

/// `GET …/agent-sessions`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    after: Option<String>,
    limit: Option<u64>,
    timeout_ms: Option<u64>,
}

async fn list_sessions(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<ListQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = m.call(q.timeout_ms)?;
    let after = q.after.map(SessionId::new).transpose()?;
    json(
        timed(
            "list_agent_sessions",
            s.services
                .sessions
                .list(&m.scope, after.as_ref(), q.limit, &call),
        )
        .await?,
    )
}

async fn get_session(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let id = session(&m)?;
    json(
        timed(
            "get_agent_session",
            s.services.sessions.get(&m.scope, &id, &call),
        )
        .await?,
    )
}

/// `GET …/items`'s query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemsQuery {
    /// The position to read from (a page's `next_cursor`).
    cursor: Option<u64>,
    limit: Option<u64>,
    /// The last N items instead (in order).
    last: Option<u64>,
    timeout_ms: Option<u64>,
}

/// A page of a session's items.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct SessionItems {
    /// The items, each the JSON object as it was appended.
    #[schemars(with = "Vec<serde_json::Value>")]
    items: Vec<Box<RawValue>>,
    /// The position of the next page; absent at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<u64>,
}

async fn get_items(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<ItemsQuery>,
) -> ApiResult<Response> {
    let q = parse_query(q)?;
    let call = m.call(q.timeout_ms)?;
    let id = session(&m)?;
    let sessions = &s.services.sessions;
    if q.last == Some(0) {
        return json(SessionItems {
            items: Vec::new(),
            next_cursor: None,
        });
    }
    let (from, limit) = match (q.last, q.cursor) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                Field::Cursor,
                Problem::Relation("give `cursor` or `last`, not both"),
            )
            .into());
        }
        (Some(n), None) => {
            let held = sessions.info(&m.scope, &id, &call).await?.events;
            (held.saturating_sub(n), Some(n))
        }
        (None, c) => (c.unwrap_or(0), q.limit),
    };
    let page = timed(
        "get_agent_session_items",
        sessions.events(&m.scope, &id, from, limit, &call),
    )
    .await?;
    let items = page
        .events
        .iter()
        .take(usize::try_from(limit.unwrap_or(u64::MAX)).unwrap_or(usize::MAX))
        .map(session_items::item_of)
        .collect::<hippocamp_core::Result<Vec<_>>>()?;
    let next_cursor = if q.last.is_some() { None } else { page.next };
    json(SessionItems { items, next_cursor })
}

/// `POST …/items`'s body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendItems {
    /// JSON objects, kept byte for byte, in order.
    #[schemars(with = "Vec<serde_json::Value>")]
    items: Vec<Box<RawValue>>,
}

/// What an append did.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct ItemsAppended {
    /// The events the items became, in order.
    ids: Vec<String>,
    /// What memory made of their text.
    ingested: IngestReport,
}

async fn append_items(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let id = session(&m)?;
    let req: AppendItems = json_body(&s, body, r#"{"items": [{…}]}"#).await?;
    let count = req.items.len() as u64;
    if count == 0 || count > MAX_ITEMS_PER_APPEND {
        return Err(Error::invalid(
            Field::Events,
            Problem::OutOfRange {
                value: i128::from(count),
                min: 1,
                max: i128::from(MAX_ITEMS_PER_APPEND),
            },
        )
        .into());
    }
    let sessions = &s.services.sessions;
    let held = match sessions.info(&m.scope, &id, &call).await {
        Ok(x) => x.events,
        Err(Error::NotFound(_)) => 0,
        Err(e) => return Err(e.into()),
    };
    // A session's bound is checked for the whole append first, so a
    // refusal appends none of it.
    let max = s.config.sessions.max_events_per_session;
    if held.saturating_add(count) > max {
        return Err(Error::QuotaExceeded {
            limit: hippocamp_core::QuotaLimit::EventsPerSession(max),
        }
        .into());
    }
    let at = now_ms();
    // Every item is checked before any is appended: bad input writes nothing.
    let events = req
        .items
        .iter()
        .zip(held..)
        .map(|(raw, position)| session_items::to_event(&id, position, at, raw))
        .collect::<hippocamp_core::Result<Vec<_>>>()?;
    let store = memory(&s)?;
    for event in &events {
        timed(
            "append_agent_session_item",
            sessions.append(&m.scope, &id, event, &AppendOptions::new(call)),
        )
        .await?;
    }
    let remembered = events
        .iter()
        .map(session_items::memory_event)
        .collect::<hippocamp_core::Result<Vec<_>>>()?;
    let ingested = timed(
        "add_events",
        store.add_events(&m.scope, &id, &remembered, &WriteOptions::new(call)),
    )
    .await?;
    json(ItemsAppended {
        ids: events.into_iter().map(|e| e.id).collect(),
        ingested,
    })
}

/// What a pop removed.
#[derive(Debug, Serialize, schemars::JsonSchema)]
struct Popped {
    /// The item, as it was appended; null when the session was empty.
    #[schemars(with = "Option<serde_json::Value>")]
    item: Option<Box<RawValue>>,
}

async fn pop_item(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let id = session(&m)?;
    let store = memory(&s)?;
    let popped = timed(
        "pop_agent_session_item",
        session_items::pop(
            s.services.sessions.as_ref(),
            Some(store.as_ref()),
            &m.scope,
            &id,
            &call,
        ),
    )
    .await?;
    json(Popped {
        item: popped.as_ref().map(session_items::item_of).transpose()?,
    })
}

const BASE: &str = "/v1/apps/{app}/users/{user}/agent-sessions";
const READ: &[&str] = &["invalid_argument", "forbidden", "not_found"];

/// The agent-session routes.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        method: "get",
        path: BASE,
        id: "list_agent_sessions",
        summary: "The user's agent sessions by id, a page at a time (?after= the last id of the previous page, ?limit=)",
        permission: Some(Permission::MemoryRead),
        query: &[
            ("after", "string", "the `next` of the previous page"),
            (
                "limit",
                "integer",
                "most sessions (default and ceiling: sessions.max_page)",
            ),
            TIMEOUT,
        ],
        request: Payload::None,
        success: (200, Payload::Json("SessionPage", schema::<SessionPage>)),
        errors: &["invalid_argument", "forbidden"],
        handler: || get(list_sessions),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/agent-sessions/{session}",
        id: "get_agent_session",
        summary: "One agent session with its events",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Session", schema::<Session>)),
        errors: READ,
        handler: || get(get_session),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/agent-sessions/{session}",
        id: "delete_agent_session",
        summary: "Erase a session: the agent session and every memory entry of it (the same erasure as DELETE …/memory/sessions/{session}); ?confirm={app}/{user}/{session} is required",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT, CONFIRM_SESSION],
        request: Payload::None,
        success: (200, Payload::Json("SessionErased", schema::<SessionErased>)),
        errors: MEM_ERASE,
        handler: || delete(delete_session),
    },
    Route {
        method: "get",
        path: "/v1/apps/{app}/users/{user}/agent-sessions/{session}/items",
        id: "get_agent_session_items",
        summary: "A session's items, each the JSON object as it was appended (an event the runner wrote comes as its event JSON): a page from ?cursor= (default 0) of ?limit=, or the ?last=N",
        permission: Some(Permission::MemoryRead),
        query: &[
            (
                "cursor",
                "integer",
                "the position to read from (a page's next_cursor)",
            ),
            (
                "limit",
                "integer",
                "most items (default and ceiling: sessions.max_events_page)",
            ),
            ("last", "integer", "the last N items instead, in order"),
            TIMEOUT,
        ],
        request: Payload::None,
        success: (200, Payload::Json("SessionItems", schema::<SessionItems>)),
        errors: READ,
        handler: || get(get_items),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/agent-sessions/{session}/items",
        id: "append_agent_session_items",
        summary: "Append items ({\"items\": [{…}]}, JSON objects kept byte for byte, at most sessions.max_items_per_append) and remember their text as turns of the session",
        permission: Some(Permission::MemoryWrite),
        query: &[TIMEOUT],
        request: Payload::Json("AppendItems", schema::<AppendItems>),
        success: (200, Payload::Json("ItemsAppended", schema::<ItemsAppended>)),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consent_required",
            "quota_exceeded",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || post(append_items),
    },
    Route {
        method: "delete",
        path: "/v1/apps/{app}/users/{user}/agent-sessions/{session}/items/last",
        id: "pop_agent_session_item",
        summary: "Remove the session's last item: it is erased with the memory entry it became, and re-sending it is skipped as erased; null when the session is empty",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("PoppedItem", schema::<Popped>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "retention",
            "legal_hold",
            "memory_disabled",
        ],
        handler: || delete(pop_item),
    },
];
