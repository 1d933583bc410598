//! An MCP `memory_search` round trip over HTTP next to the plain API v1
//! search round trip, in one run on one server (ephemeral profile, one
//! 600-entry scope of LoCoMo turns, LoCoMo questions), interleaved call
//! by call over one keep-alive client. The MCP call is a stateless
//! 2026-07-28 `tools/call` (one POST, plain JSON reply), the way the
//! Python SDK calls tools.

use std::time::Instant;

use hippocamp_core::MemoryScope;
use hippocamp_services::{Config, Profile};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{Latency, Result, failed, latency};

/// `mcp` results.
#[derive(Debug, Clone, Serialize)]
pub struct McpBench {
    /// Calls of each.
    pub samples: usize,
    /// `POST /v1/apps/{app}/users/{user}/memory/search`.
    pub api_search: Latency,
    /// `tools/call memory_search` at `/mcp`.
    pub mcp_search: Latency,
    /// MCP p50 / API p50 (bar: ≤ 2).
    pub ratio_p50: f64,
}

/// Runs `samples` interleaved pairs after a warm-up.
pub async fn mcp(samples: usize) -> Result<McpBench> {
    let config = Config {
        profile: Profile::Ephemeral,
        bind: ([127, 0, 0, 1], 0).into(),
        ..Config::default()
    };
    let bound = hippocamp_server::Bound::new(config).await?;
    let addr = bound.local_addr();
    let services = bound.services().clone();
    let grant = hippocamp_services::auth::grant(Some("bench"), Some("user"), "memory:read")?;
    let (token, _) = services.tokens.create("bench", grant)?;
    let scope = MemoryScope::parse("bench", "user")?;
    let queries = crate::locomo_scope(services.memory_store()?.as_ref(), &scope, 600).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let api = format!("http://{addr}/v1/apps/bench/users/user/memory/search");
    let mcp = format!("http://{addr}/mcp");
    let (mut plain, mut framed) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for (i, q) in queries.iter().cycle().take(samples + 100).enumerate() {
        let started = Instant::now();
        let r = http
            .post(&api)
            .bearer_auth(&token)
            .json(&json!({"query": q, "limit": 5}))
            .send()
            .await
            .map_err(failed)?;
        let body: Value = r.json().await.map_err(failed)?;
        let a = started.elapsed();
        if body["hits"].is_null() {
            return Err(failed(format!("the API search failed: {body}")));
        }
        let started = Instant::now();
        let r = http
            .post(&mcp)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "memory_search")
            .json(
                &json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
                "name": "memory_search", "arguments": {"query": q, "limit": 5},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .send()
            .await
            .map_err(failed)?;
        let body: Value = r.json().await.map_err(failed)?;
        let m = started.elapsed();
        if body["result"]["structuredContent"]["hits"].is_null() {
            return Err(failed(format!("the MCP search failed: {body}")));
        }
        if i >= 100 {
            plain.push(a.as_secs_f64() * 1e6);
            framed.push(m.as_secs_f64() * 1e6);
        }
    }
    let _ = stop.send(());
    let _ = server.await;
    let (api_search, mcp_search) = (latency(plain), latency(framed));
    Ok(McpBench {
        samples,
        ratio_p50: mcp_search.p50_us / api_search.p50_us,
        api_search,
        mcp_search,
    })
}
