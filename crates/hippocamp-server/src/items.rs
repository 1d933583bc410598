//! Routes of keyed items (`hippocamp_memory::items`): values addressed
//! by `(namespace, key)` inside the token's `(app, user)` scope, stored
//! as memory entries through the governed handle. `{namespace}` is the
//! namespace's id (its labels joined with `.`, each with `%`, `.`, `/`,
//! `\` and edge spaces as `%XX`), `{key}` the key, each one path segment.

use axum::body::Body as HttpBody;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use hippocamp_memory::items::{
    self, ItemPage, ListNamespaces, Namespace, NamespacePage, PutItem, PutOutcome, SearchItems,
};
use hippocamp_services::auth::Permission;

use crate::api::{
    ApiResult, AppState, CallQuery, Deleted, MemoryCall, Payload, Q, Route, TIMEOUT, json,
    json_body, memory, param, parse_query, schema, timed,
};

fn address(m: &MemoryCall) -> ApiResult<(Namespace, String)> {
    let ns = Namespace::from_id(param(&m.params, "namespace")?)?;
    Ok((ns, param(&m.params, "key")?.to_owned()))
}

async fn put_item(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let (ns, key) = address(&m)?;
    let req: PutItem = json_body(&s, body, r#"{"value": {…}}"#).await?;
    let out = timed(
        "put_item",
        items::put(memory(&s)?.as_ref(), &m.scope, &ns, &key, &req, &call),
    )
    .await?;
    let status = if out.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, json(out)?).into_response())
}

async fn get_item(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let (ns, key) = address(&m)?;
    json(
        timed(
            "get_item",
            items::get(memory(&s)?.as_ref(), &m.scope, &ns, &key, &call),
        )
        .await?,
    )
}

async fn delete_item(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let (ns, key) = address(&m)?;
    let deleted = timed(
        "delete_item",
        items::delete(memory(&s)?.as_ref(), &m.scope, &ns, &key, &call),
    )
    .await?;
    json(Deleted { deleted })
}

async fn search_items(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let req: SearchItems = json_body(&s, body, r#"{"namespace_prefix": […]}"#).await?;
    json(
        timed(
            "search_items",
            items::search(memory(&s)?.as_ref(), &m.scope, &req, &call),
        )
        .await?,
    )
}

async fn list_namespaces(
    State(s): State<AppState>,
    m: MemoryCall,
    q: Q<CallQuery>,
    body: HttpBody,
) -> ApiResult<Response> {
    let call = m.call(parse_query(q)?.timeout_ms)?;
    let req: ListNamespaces = json_body(&s, body, r#"{"prefix": […]}"#).await?;
    json(
        timed(
            "list_namespaces",
            items::namespaces(memory(&s)?.as_ref(), &m.scope, &req, &call),
        )
        .await?,
    )
}

const ITEM: &str = "/v1/apps/{app}/users/{user}/memory/items/{namespace}/{key}";

/// The routes of keyed items.
pub(crate) const ROUTES: &[Route] = &[
    Route {
        method: "put",
        path: ITEM,
        id: "put_item",
        summary: "Put a keyed item ({\"value\": {…}, \"index\": true | false | [fields], \"ttl_ms\"}): 201 when it creates the item, 200 when it writes a new revision (history kept); the value is kept as it is and its indexed text is the fields named (default: the whole value)",
        permission: Some(Permission::MemoryWrite),
        query: &[TIMEOUT],
        request: Payload::Json("PutItem", schema::<PutItem>),
        success: (201, Payload::Json("PutOutcome", schema::<PutOutcome>)),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "consent_required",
            "sensitive_content",
            "quota_exceeded",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || put(put_item),
    },
    Route {
        method: "get",
        path: ITEM,
        id: "get_item",
        summary: "A keyed item",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Item", schema::<items::Item>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "not_found",
            "memory_disabled",
        ],
        handler: || get(get_item),
    },
    Route {
        method: "delete",
        path: ITEM,
        id: "delete_item",
        summary: "Erase a keyed item with its revisions and what was derived from it (idempotent; `deleted` 0 when there was none)",
        permission: Some(Permission::MemoryErase),
        query: &[TIMEOUT],
        request: Payload::None,
        success: (200, Payload::Json("Deleted", schema::<Deleted>)),
        errors: &[
            "invalid_argument",
            "forbidden",
            "retention",
            "legal_hold",
            "memory_disabled",
        ],
        handler: || delete(delete_item),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/items/search",
        id: "search_items",
        summary: "Keyed items under a namespace prefix ({\"namespace_prefix\": […], \"filter\", \"query\", \"limit\", \"offset\"}): ranked by memory search with a query, else in their namespaces' order of creation, then their own",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::Json("SearchItems", schema::<SearchItems>),
        success: (200, Payload::Json("ItemPage", schema::<ItemPage>)),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || post(search_items),
    },
    Route {
        method: "post",
        path: "/v1/apps/{app}/users/{user}/memory/items/namespaces",
        id: "list_namespaces",
        summary: "The namespaces holding keyed items ({\"prefix\", \"suffix\", \"max_depth\", \"limit\", \"offset\"}; `*` matches any one label), in label order",
        permission: Some(Permission::MemoryRead),
        query: &[TIMEOUT],
        request: Payload::Json("ListNamespaces", schema::<ListNamespaces>),
        success: (200, Payload::Json("NamespacePage", schema::<NamespacePage>)),
        errors: &[
            "unsupported_media_type",
            "invalid_argument",
            "forbidden",
            "payload_too_large",
            "memory_disabled",
        ],
        handler: || post(list_namespaces),
    },
];
