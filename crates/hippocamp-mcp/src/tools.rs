//! The tools over MCP: the runner's built-ins that the caller's
//! permissions allow, called through a context bound to the caller's
//! scope and granting only those capabilities.

use std::sync::Arc;
use std::time::Duration;

use hippocamp_agent::{AgentError, BUILTINS, Builtin, CapabilitySet, Tool, ToolContext};
use hippocamp_core::{Deadline, SessionId};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents, ToolAnnotations};
use serde_json::{Value, json};

use crate::{Authority, Backends, permission_for};

/// The session tool calls act in when they name none (`memory_ingest`,
/// `memory_forget_session`): MCP has no conversation of its own.
pub const MCP_SESSION: &str = "mcp";

/// How long one tool call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A built-in as offered to one caller: the capabilities their
/// permissions grant it, or `None` when it is not offered.
fn granted(b: Builtin, who: &Authority, backends: &Backends) -> Option<CapabilitySet> {
    let caps = b.capabilities();
    for c in caps.iter() {
        let p = permission_for(c)?;
        if !who.has(p) {
            return None;
        }
        let there = if c.is_memory() {
            backends.memory.is_some()
        } else {
            backends.artifacts.is_some()
        };
        if !there {
            return None;
        }
    }
    (!caps.is_empty()).then_some(caps)
}

/// The built-ins `who` is offered, in table order.
pub fn offered(who: &Authority, backends: &Backends) -> Vec<(Builtin, CapabilitySet)> {
    BUILTINS
        .iter()
        .filter_map(|s| Builtin::named(s.name))
        .filter(|b| !b.spec().runner_only)
        .filter_map(|b| granted(b, who, backends).map(|c| (b, c)))
        .collect()
}

fn object(v: Value) -> Arc<JsonObject> {
    Arc::new(match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    })
}

/// What a search tool returns, as its `outputSchema`.
fn search_output() -> Value {
    json!({"type": "object", "properties": {
        "success": {"type": "boolean"},
        "untrusted_reference_data": {"type": "boolean"},
        "note": {"type": "string"},
        "hits": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "content": {"type": "string"},
            "score": {"type": "number"}, "score_type": {"type": "string"},
            "timestamp": {"type": "integer"}},
            "required": ["id", "content", "score", "score_type", "timestamp"]}}},
        "required": ["success", "hits"]})
}

fn is_search(name: &str) -> bool {
    matches!(name, "memory_search" | "load_memory")
}

/// The MCP tool list of `who`.
pub fn list(who: &Authority, backends: &Backends) -> Vec<rmcp::model::Tool> {
    offered(who, backends)
        .into_iter()
        .map(|(b, caps)| {
            let d = b.declaration();
            let read_only = caps.iter().all(|c| {
                matches!(
                    c,
                    hippocamp_agent::Capability::MemorySearch
                        | hippocamp_agent::Capability::ArtifactGet
                        | hippocamp_agent::Capability::ArtifactList
                        | hippocamp_agent::Capability::ArtifactListVersions
                )
            });
            let mut t = rmcp::model::Tool::new(d.name.clone(), d.description, object(d.parameters))
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(read_only)
                        .destructive(d.name.contains("delete") || d.name.contains("forget"))
                        .open_world(false),
                );
            if is_search(&d.name) {
                t = t.with_raw_output_schema(object(search_output()));
            }
            t
        })
        .collect()
}

fn failure(e: &AgentError) -> CallToolResult {
    CallToolResult::structured_error(json!({"error": e.code(), "message": e.to_string()}))
}

/// The built-ins MCP can offer, with their schemas compiled once.
#[derive(Debug)]
pub struct Tools {
    set: hippocamp_agent::ToolSet,
}

impl Tools {
    /// Every built-in that is not runner-only.
    pub fn new() -> Result<Self, AgentError> {
        let tools: Vec<Arc<dyn Tool>> = BUILTINS
            .iter()
            .filter(|s| !s.runner_only)
            .filter_map(|s| Builtin::named(s.name))
            .map(|b| Arc::new(b) as Arc<dyn Tool>)
            .collect();
        Ok(Self {
            set: hippocamp_agent::ToolSet::new(tools)?,
        })
    }
}

/// Calls tool `name` for `who`; `None` when no such tool is offered to
/// them (a protocol error). A tool's own failure (bad arguments, quota,
/// not found...) is a result with `isError` and the typed code.
pub async fn call(
    tools: &Tools,
    who: &Authority,
    backends: &Backends,
    name: &str,
    args: Option<JsonObject>,
) -> Option<CallToolResult> {
    let (_, caps) = offered(who, backends)
        .into_iter()
        .find(|(b, _)| b.spec().name == name)?;
    let tool = tools.set.get(name).ok()?;
    let args = Value::Object(args.unwrap_or_default());
    // The same schema check the runner applies.
    if let Err(e) = tool.check(&args) {
        return Some(failure(&e));
    }
    let session_arg = args["session"].as_str().map(str::to_owned);
    let session = match SessionId::new(MCP_SESSION) {
        Ok(s) => s,
        Err(e) => return Some(failure(&e.into())),
    };
    let ctx = ToolContext::standalone(
        who.scope.clone(),
        session,
        backends.memory.clone(),
        backends.artifacts.clone(),
        name,
        caps,
        // Unique per call: turns ingested without ids are named after it.
        &format!("mcp-{:016x}", rand::random::<u64>()),
        Deadline::after(CALL_TIMEOUT),
        who.caller,
    );
    let out = tokio::time::timeout(CALL_TIMEOUT, tool.tool().execute(&ctx, args)).await;
    Some(match out {
        Ok(Ok(v)) => into_content(who, name, session_arg.as_deref(), v),
        Ok(Err(e)) => failure(&e),
        Err(_) => failure(&AgentError::Service(hippocamp_core::Error::Timeout(
            hippocamp_core::Stage::Tool,
        ))),
    })
}

/// A tool's JSON result as MCP content: `artifact_get` becomes the text
/// (text types) or an embedded resource with the blob; everything else
/// structured content with its JSON as text.
fn into_content(who: &Authority, name: &str, session: Option<&str>, v: Value) -> CallToolResult {
    if name != "artifact_get" {
        return CallToolResult::structured(v);
    }
    let uri = crate::resources::uri(
        &who.base_url,
        &who.scope,
        session,
        v["name"].as_str().unwrap_or_default(),
        v["version"].as_u64().unwrap_or_default(),
    );
    let mime = v["mime_type"]
        .as_str()
        .unwrap_or("application/octet-stream")
        .to_owned();
    let block = if let Some(t) = v["text"].as_str() {
        ContentBlock::text(t.to_owned())
    } else {
        let b64 = v["data_base64"].as_str().unwrap_or_default().to_owned();
        ContentBlock::resource(ResourceContents::blob(b64, uri).with_mime_type(mime))
    };
    let mut meta = v;
    if let Some(m) = meta.as_object_mut() {
        m.remove("text");
        m.remove("data_base64");
    }
    let mut r = CallToolResult::success(vec![block]);
    r.structured_content = Some(meta);
    r
}
