//! `hippocamp bench http`: the HTTP layer next to its own floor.
//!
//! Two processes on two different cores (`taskset`): a server and a load
//! generator. The server is the real application (the default durable
//! profile in a fresh folder, tokens, the concurrency limit, tracing with
//! its one log line per request, metrics) and, on a second listener of the
//! same runtime, a bare route with no layers that answers the bytes of a
//! real search reply. The load generator runs closed-loop phases against
//! each (bare, search on a 600-entry scope of LoCoMo turns with LoCoMo
//! questions, add, and a 90/10 search/add mix), at 1 and at 32
//! connections, one after the other in one session.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hippocamp_core::MemoryScope;
use hippocamp_services::{Config, Profile};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

use crate::{BenchError, Latency, Result, failed, latency};

/// What the server process tells the load generator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    /// The application's address.
    pub addr: String,
    /// The bare route's address.
    pub bare: String,
    /// A token for the benchmark's app.
    pub token: String,
    /// Queries for the search phases.
    pub queries: Vec<String>,
    /// Texts for the add phases.
    pub texts: Vec<String>,
}

/// The user whose 600 entries are searched.
const SEARCHED: &str = "searched";
/// The user adds go to (so the searched scope stays at 600).
const WRITTEN: &str = "written";

/// The server half, in its own process: prints a [`Target`] as one JSON
/// line on stdout, then serves until stdin closes.
pub async fn serve(dir: &Path) -> Result<()> {
    let config = Config {
        profile: Profile::Durable,
        data_dir: dir.to_path_buf(),
        bind: ([127, 0, 0, 1], 0).into(),
        ..Config::default()
    };
    let bound = hippocamp_server::Bound::new(config).await?;
    let addr = bound.local_addr();
    let services = bound.services().clone();
    let grant = hippocamp_services::auth::grant(Some("bench"), None, "memory:read,memory:write")?;
    let (token, _) = services.tokens.create("bench", grant)?;
    let scope = MemoryScope::parse("bench", SEARCHED)?;
    let queries = crate::locomo_scope(services.memory_store()?.as_ref(), &scope, 600).await?;
    let texts = crate::turns(2_000)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    // The bare route's reply: the bytes the real route gives for a
    // typical question.
    let reply = reqwest::Client::new()
        .post(format!(
            "http://{addr}/v1/apps/bench/users/{SEARCHED}/memory/search"
        ))
        .bearer_auth(&token)
        .json(&json!({"query": queries[0], "limit": 10}))
        .send()
        .await
        .map_err(failed)?
        .bytes()
        .await
        .map_err(failed)?;
    let bare_listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let bare = bare_listener.local_addr()?;
    let bare_app = axum::Router::new().route(
        "/search",
        axum::routing::post(move |_body: bytes::Bytes| {
            let reply = reply.clone();
            async move { ([("content-type", "application/json")], reply) }
        }),
    );
    let bare_server = tokio::spawn(async move { axum::serve(bare_listener, bare_app).await });
    let target = Target {
        addr: addr.to_string(),
        bare: bare.to_string(),
        token,
        queries,
        texts,
    };
    println!("{}", serde_json::to_string(&target).map_err(failed)?);
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    bare_server.abort();
    let _ = stop.send(());
    let _ = server.await;
    Ok(())
}

/// What a phase sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// The bare route.
    Bare,
    /// `POST …/memory/search`, limit 10.
    Search,
    /// `POST …/memory/entries`.
    Add,
    /// 90% search, 10% add.
    Mixed,
}

/// One phase's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    /// What was sent.
    pub load: Load,
    /// Concurrent connections, each one request at a time.
    pub connections: usize,
    /// Successful requests measured.
    pub requests: usize,
    /// Failed requests (not 2xx, or a transport error).
    pub errors: usize,
    /// Successful requests per second.
    pub req_per_s: f64,
    /// Latency of successful requests.
    pub latency: Latency,
}

/// The load half, in its own process: every phase, one after the other.
pub async fn load(target: Target, seconds: f64) -> Result<Vec<Phase>> {
    let mut out = Vec::new();
    for load in [Load::Bare, Load::Search, Load::Add, Load::Mixed] {
        for connections in [1, 32] {
            out.push(phase(&target, load, connections, seconds).await?);
        }
    }
    Ok(out)
}

async fn phase(target: &Target, load: Load, connections: usize, seconds: f64) -> Result<Phase> {
    let warm = Duration::from_secs_f64((seconds * 0.1).min(1.0));
    let started = Instant::now();
    let measure_from = started + warm;
    let until = measure_from + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for c in 0..connections {
        let target = target.clone();
        tasks.push(tokio::spawn(async move {
            // A client per connection: one kept-alive connection each.
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .build()
                .map_err(failed)?;
            let search = format!(
                "http://{}/v1/apps/bench/users/{SEARCHED}/memory/search",
                target.addr
            );
            let add = format!(
                "http://{}/v1/apps/bench/users/{WRITTEN}/memory/entries",
                target.addr
            );
            let bare = format!("http://{}/search", target.bare);
            let (mut us, mut errors) = (Vec::new(), 0usize);
            let mut i = c;
            loop {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                i += connections;
                let q = &target.queries[i % target.queries.len()];
                let writes = match load {
                    Load::Add => true,
                    Load::Mixed => i % 10 == 0,
                    Load::Bare | Load::Search => false,
                };
                let request = if writes {
                    let t = &target.texts[i % target.texts.len()];
                    client
                        .post(&add)
                        .json(&json!({"content": format!("{t} #{i}")}))
                } else {
                    let url = if load == Load::Bare { &bare } else { &search };
                    client.post(url).json(&json!({"query": q, "limit": 10}))
                };
                let sent = Instant::now();
                let ok = match request.bearer_auth(&target.token).send().await {
                    Ok(r) => {
                        let good = r.status().is_success();
                        r.bytes().await.is_ok() && good
                    }
                    Err(_) => false,
                };
                if sent >= measure_from {
                    if ok {
                        us.push(sent.elapsed().as_secs_f64() * 1e6);
                    } else {
                        errors += 1;
                    }
                }
            }
            Ok::<_, BenchError>((us, errors))
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (us, e) = t.await.map_err(failed)??;
        all.extend(us);
        errors += e;
    }
    let requests = all.len();
    Ok(Phase {
        load,
        connections,
        requests,
        errors,
        req_per_s: requests as f64 / seconds,
        latency: latency(all),
    })
}

/// `http` results.
#[derive(Debug, Clone, Serialize)]
pub struct HttpBench {
    /// Measured seconds per phase.
    pub seconds: f64,
    /// Every phase.
    pub phases: Vec<Phase>,
    /// Search req/s / bare req/s at 32 connections (bar: ≥ 0.5).
    pub search_over_bare_at_32: f64,
    /// Search p50 − bare p50 at 1 connection, µs (bar: ≤ 100).
    pub search_minus_bare_p50_at_1_us: f64,
}

/// Runs the server on CPU 0 and the load on CPU 1 (`taskset`), each its
/// own process of this executable.
pub async fn http(dir: &Path, seconds: f64) -> Result<HttpBench> {
    let exe = std::env::current_exe()?;
    let mut server = tokio::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(&exe)
        .args(["bench", "http-server", "--dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.with_extension("server.log"))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("cannot start the server under taskset: {e}")))?;
    let stdout = server
        .stdout
        .take()
        .ok_or_else(|| failed("no server stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await?;
    let target: Target = serde_json::from_str(&line)
        .map_err(|e| failed(format!("the server did not start ({e}): {line}")))?;
    let target_file = dir.with_extension("target.json");
    std::fs::write(&target_file, serde_json::to_vec(&target).map_err(failed)?)?;
    let out = tokio::process::Command::new("taskset")
        .args(["-c", "1"])
        .arg(&exe)
        .args(["bench", "http-load", "--seconds", &seconds.to_string()])
        .arg("--target")
        .arg(&target_file)
        .stderr(Stdio::inherit())
        .output()
        .await?;
    drop(server.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(30), server.wait()).await;
    if !out.status.success() {
        return Err(failed(format!("the load generator failed: {}", out.status)));
    }
    let phases: Vec<Phase> = serde_json::from_slice(&out.stdout).map_err(failed)?;
    let find = |load: Load, connections: usize| {
        phases
            .iter()
            .find(|p| p.load == load && p.connections == connections)
            .cloned()
            .ok_or_else(|| failed("a phase is missing"))
    };
    let (bare32, search32) = (find(Load::Bare, 32)?, find(Load::Search, 32)?);
    let (bare1, search1) = (find(Load::Bare, 1)?, find(Load::Search, 1)?);
    Ok(HttpBench {
        seconds,
        search_over_bare_at_32: search32.req_per_s / bare32.req_per_s,
        search_minus_bare_p50_at_1_us: search1.latency.p50_us - bare1.latency.p50_us,
        phases,
    })
}
