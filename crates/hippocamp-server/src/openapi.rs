//! The OpenAPI 3.1 document, generated from the route table
//! ([`crate::api::routes`]), the error table ([`crate::error::CODES`]) and
//! the request and response types themselves (their JSON Schemas are
//! derived with `schemars` from the same definitions serde reads and
//! writes, so a field cannot be documented that the server does not take).
//! `docs/openapi.json` is this document; a test fails when it is stale,
//! and another checks real replies against its schemas.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::api::{Payload, routes};
use crate::error::{ANY_ROUTE, CODES, ErrorBody, lookup};

fn payload(p: Payload, g: &mut schemars::SchemaGenerator) -> Option<Value> {
    match p {
        Payload::None => None,
        Payload::Json(_, schema) => Some(json!({
            "application/json": { "schema": schema(g) }
        })),
        Payload::Bytes => Some(json!({
            "application/octet-stream": { "schema": { "type": "string", "format": "binary" } }
        })),
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } }
    })
}

/// A generator whose references point into `components/schemas`.
fn generator() -> schemars::SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.into_generator()
}

/// The whole document.
pub fn document() -> Value {
    let mut g = generator();
    let mut paths = Map::new();
    for r in routes() {
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                let name = name.trim_start_matches('*');
                json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } })
            })
            .collect();
        params.extend(r.query.iter().map(|(name, ty, description)| {
            json!({ "name": name, "in": "query", "required": false,
                    "description": description, "schema": { "type": ty } })
        }));
        if r.success.1.is_bytes() && r.method == "get" {
            params.push(json!({ "name": "Range", "in": "header", "required": false,
                "description": "one `bytes=first-last`, `bytes=first-` or `bytes=-suffix` range",
                "schema": { "type": "string" } }));
        }
        let mut responses = Map::new();
        let mut ok = json!({ "description": "success" });
        if let Some(c) = payload(r.success.1, &mut g) {
            ok["content"] = c;
        }
        responses.insert(r.success.0.to_string(), ok);
        // The route's own codes, then those of every route, by status.
        let mut by_status: std::collections::BTreeMap<u16, Vec<&str>> =
            std::collections::BTreeMap::new();
        for code in r.errors.iter().chain(ANY_ROUTE) {
            if let Some(c) = lookup(code) {
                let codes = by_status.entry(c.status).or_default();
                if !codes.contains(&c.code) {
                    codes.push(c.code);
                }
            }
        }
        for (status, codes) in by_status {
            let what = codes
                .iter()
                .filter_map(|c| lookup(c))
                .map(|c| format!("`{}`: {}", c.code, c.meaning))
                .collect::<Vec<_>>()
                .join("; ");
            responses.insert(status.to_string(), error_response(&what));
        }
        if r.success.1.is_bytes() && r.method == "get" {
            responses.insert(
                "206".into(),
                json!({ "description": "the requested range" }),
            );
        }
        let mut op = json!({
            "operationId": r.id,
            "summary": r.summary,
            "parameters": params,
            "responses": responses,
        });
        if let Some(p) = r.permission {
            op["description"] = json!(format!(
                "Needs the `{}` permission on the scope.",
                p.as_str()
            ));
        }
        if let Some(c) = payload(r.request, &mut g) {
            op["requestBody"] = json!({ "required": true, "content": c });
        }
        let item = paths
            .entry(r.path.replace("{*name}", "{name}"))
            .or_insert_with(|| json!({}));
        item[r.method] = op;
    }
    g.subschema_for::<ErrorBody>();
    let mut schemas = g.take_definitions(true);
    // The body's code is one of the table's.
    if let Some(code) = schemas
        .get_mut("ErrorBody")
        .and_then(|e| e.pointer_mut("/properties/code"))
    {
        code["enum"] = json!(CODES.iter().map(|c| c.code).collect::<Vec<_>>());
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "hippocamp",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Scoped long-term memory and versioned artifacts for AI agents. Every route under /v1/apps/{app}/users/{user} acts on exactly that scope; a bearer token must grant it.",
        },
        "security": [ { "bearer": [] } ],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas,
        }
    })
}
