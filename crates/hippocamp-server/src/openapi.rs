//! The OpenAPI 3.1 document, generated from the route table
//! ([`crate::api::routes`]) and the error mapping ([`crate::error::CODES`]).
//! `docs/openapi.json` is this document; a test fails when it is stale.

use serde_json::{Map, Value, json};

use crate::api::{Payload, routes};
use crate::error::{ANY_ROUTE, CODES, lookup};

fn payload(p: Payload) -> Option<Value> {
    match p {
        Payload::None => None,
        Payload::Json(schema) => Some(json!({
            "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } }
        })),
        Payload::Bytes => Some(json!({
            "application/octet-stream": { "schema": { "type": "string", "format": "binary" } }
        })),
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } }
    })
}

/// The whole document.
pub fn document() -> Value {
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
        if r.success.1 == Payload::Bytes && r.method == "get" {
            params.push(json!({ "name": "Range", "in": "header", "required": false,
                "description": "one `bytes=first-last`, `bytes=first-` or `bytes=-suffix` range",
                "schema": { "type": "string" } }));
        }
        let mut responses = Map::new();
        let mut ok = json!({ "description": "success" });
        if let Some(c) = payload(r.success.1) {
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
        if r.success.1 == Payload::Bytes && r.method == "get" {
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
        if let Some(c) = payload(r.request) {
            op["requestBody"] = json!({ "required": true, "content": c });
        }
        let item = paths
            .entry(r.path.replace("{*name}", "{name}"))
            .or_insert_with(|| json!({}));
        item[r.method] = op;
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
            "schemas": schemas(),
        }
    })
}

fn obj(description: &str, properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "description": description, "properties": properties, "required": required })
}

fn schemas() -> Value {
    let any = json!({ "type": "object", "additionalProperties": true });
    let meta = json!({ "type": "object", "description": "JSON-safe metadata (bounded bytes, depth and nodes)", "additionalProperties": true });
    json!({
        "Error": obj("Every error response", json!({
            "code": { "type": "string", "enum": CODES.iter().map(|c| c.code).collect::<Vec<_>>() },
            "message": { "type": "string" },
        }), &["code", "message"]),
        "NewEntry": obj("An entry to add; unknown fields are refused", json!({
            "content": { "type": "string" },
            "metadata": meta,
            "provenance": obj("Where it came from", json!({
                "session_id": { "type": "string" },
                "event_ids": { "type": "array", "items": { "type": "string" } },
                "author": { "type": "string" },
                "timestamp_ms": { "type": "integer" },
            }), &[]),
            "idempotency_key": { "type": "string" },
        }), &["content"]),
        "Events": obj("Conversation events (ADK-style)", json!({
            "events": { "type": "array", "items": obj("One event", json!({
                "id": { "type": "string" },
                "author": { "type": "string" },
                "timestamp_ms": { "type": "integer" },
                "partial": { "type": "boolean" },
                "content": obj("role and parts (text, function_call, function_response, inline_data)", json!({
                    "role": { "type": "string" },
                    "parts": { "type": "array", "items": any },
                }), &["parts"]),
                "metadata": meta,
            }), &["id", "author", "timestamp_ms", "content"]) },
        }), &["events"]),
        "SearchRequest": obj("A search; unknown fields are refused", json!({
            "query": { "type": "string" },
            "filter": { "description": "a metadata filter", "type": "object" },
            "limit": { "type": "integer" },
            "max_bytes": { "type": "integer" },
            "mode": { "type": "string", "enum": ["lexical", "vector", "hybrid"],
                      "description": "default: hybrid when the store has an embedder, else lexical" },
        }), &["query"]),
        "MemoryEntry": obj("A stored entry", json!({
            "id": { "type": "string", "pattern": "^mem-[0-9a-f]{32}$" },
            "content": { "type": "string" },
            "metadata": meta,
            "scope": any,
            "provenance": any,
            "digest": { "type": "string", "description": "SHA-256 of the content, hex" },
            "timestamp_ms": { "type": "integer" },
            "epoch": { "type": "integer" },
        }), &["id", "content"]),
        "AddOutcome": obj("The stored entry and whether it already existed", json!({
            "entry": { "$ref": "#/components/schemas/MemoryEntry" },
            "duplicate": { "type": "boolean" },
        }), &["entry", "duplicate"]),
        "IngestReport": obj("Entries added, duplicates and skipped events with reasons", any.clone(), &[]),
        "SearchResults": obj("Ranked hits with scores", json!({
            "hits": { "type": "array", "items": { "allOf": [
                { "$ref": "#/components/schemas/MemoryEntry" },
                obj("The entry's fields, and its score", json!({
                    "score": { "type": "number" },
                    "score_type": { "type": "string", "enum": ["bm25", "vector", "hybrid"] },
                    "details": obj("The scores a hybrid hit fused", json!({
                        "bm25": { "type": ["number", "null"] },
                        "vector": { "type": ["number", "null"] },
                        "fused": { "type": "number" },
                    }), &["fused"]),
                }), &["score", "score_type"]),
            ] } },
            "skipped_over_budget": { "type": "boolean", "description": "a hit was left out to keep within max_bytes" },
            "entries_without_vectors": { "type": "integer", "description": "vector and hybrid modes: entries without a vector (stored before the embedder), which the vector side could not consider; absent when 0" },
        }), &["hits"]),
        "Deleted": obj("How many entries were deleted", json!({ "deleted": { "type": "integer" } }), &["deleted"]),
        "Erasure": obj("How many entries an erasure removed, and the scope's erasure epoch after it", json!({ "deleted": { "type": "integer" }, "epoch": { "type": "integer" } }), &["deleted", "epoch"]),
        "Epoch": obj("A scope's erasure epoch", json!({ "epoch": { "type": "integer" } }), &["epoch"]),
        "Capabilities": obj("Limits (name, value, default, range) and features", any.clone(), &[]),
        "ArtifactCapabilities": obj("Limits and features of the artifact service", any.clone(), &[]),
        "ArtifactMeta": obj("A version's record (never its bytes)", json!({
            "scope": any,
            "name": { "type": "string" },
            "version": { "type": "integer" },
            "mime_type": { "type": "string" },
            "size": { "type": "integer" },
            "sha256": { "type": "string" },
            "chunk_size": { "type": "integer" },
            "created_at_ms": { "type": "integer" },
            "metadata": meta,
        }), &["name", "version", "size", "sha256"]),
        "NamePage": obj("A page of names", json!({
            "items": { "type": "array", "items": { "type": "string" } },
            "next_cursor": { "type": ["string", "null"] },
        }), &["items"]),
        "VersionPage": obj("A page of version records", json!({
            "items": { "type": "array", "items": { "$ref": "#/components/schemas/ArtifactMeta" } },
            "next_cursor": { "type": ["integer", "null"] },
        }), &["items"]),
        "Removed": obj("The versions removed", json!({
            "removed": { "type": "array", "items": { "type": "integer" } },
        }), &["removed"]),
    })
}
