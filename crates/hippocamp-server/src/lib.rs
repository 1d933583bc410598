//! The hippocamp server: HTTP API v1 over the memory and artifact
//! services of a profile, bearer tokens bound to scopes, a developer
//! inspection page, Prometheus metrics and health probes.
//!
//! The configuration, tokens and the stores come from `hippocamp-services`
//! (the one place that builds them); this crate adds HTTP.
//!
//! - [`api`]: the v1 handlers and the route table.
//! - [`openapi`]: the OpenAPI document generated from that table.
//! - [`ui`]: the inspection page.
//! - [`error`]: the one error → status mapping.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent_sessions;
pub mod api;
mod consolidation;
pub mod error;
pub mod governance;
mod items;
mod mcp;
mod memory_tool;
pub mod openapi;
mod preload;
pub mod transfer;
pub mod ui;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

pub use api::AppState;
pub use hippocamp_services::{Config, ConfigError, Profile, Services, auth};

use crate::error::ApiError;

/// The process-wide Prometheus recorder (installed on first use).
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
                    0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
                .ok()?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok()?;
            Some(handle)
        })
        .as_ref()
}

/// Where a request's handler leaves the scope's log hash for its log line
/// (a memory route sets it once it has parsed the scope).
#[derive(Clone, Default)]
pub(crate) struct LoggedScope(Arc<OnceLock<String>>);

impl LoggedScope {
    pub(crate) fn set(&self, hash: String) {
        let _ = self.0.set(hash);
    }
}

/// Counts and times every request by route, method and status, and logs
/// it: one event (an error for a 5xx reply), no span. A span per request
/// (its fields formatted when it opened and again when the scope was
/// recorded) cost ~10 µs, a fifth of search throughput in issue 17's
/// `bench http`, and nothing inside a handler logs.
async fn track(matched: Option<MatchedPath>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let scope = LoggedScope::default();
    req.extensions_mut().insert(scope.clone());
    let resp = next.run(req).await;
    let elapsed = started.elapsed();
    // Never the URI: it holds scope names.
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    let status = resp.status().as_u16();
    let latency_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    let scope = scope.0.get().map_or("-", String::as_str);
    macro_rules! request_line {
        ($level:expr) => {
            tracing::event!($level, method = %method, route = %route, status, latency_us, scope = %scope, "request")
        };
    }
    if resp.status().is_server_error() {
        request_line!(tracing::Level::ERROR);
    } else {
        request_line!(tracing::Level::INFO);
    }
    let labels = [
        ("route", route.to_owned()),
        ("method", method.as_str().to_owned()),
        ("status", status.to_string()),
    ];
    metrics::counter!("hippocamp_http_requests_total", &labels).increment(1);
    metrics::histogram!("hippocamp_http_request_duration_seconds", &labels)
        .record(elapsed.as_secs_f64());
    resp
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when every service answers: memory (unless disabled), the
/// artifact store, and with an outbox, its store and its processor (an
/// unhealthy outbox fails the probe; nothing falls back to writing
/// synchronously), and an embedder probed in the background has answered
/// (`{"embedder": "not_ready"}` until then).
async fn readyz(State(s): State<AppState>) -> Response {
    if s.services.embedder_ready() == Some(false) {
        // Lexical search and writes without a vector work meanwhile.
        let body = serde_json::json!({
            "code": "unavailable",
            "message": "the embedder has not answered its readiness probe yet (it is retried)",
            "embedder": "not_ready",
        });
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::RETRY_AFTER, "1")],
            axum::Json(body),
        )
            .into_response();
    }
    match s.services.health().await {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(e @ hippocamp_core::Error::OutboxUnavailable(_)) => ApiError::from(e).into_response(),
        Err(e) => ApiError::from(hippocamp_core::Error::Unavailable(format!(
            "a store did not answer: {e}"
        )))
        .into_response(),
    }
}

/// Prometheus text; store, router and outbox gauges are read from the
/// services' status now.
async fn metrics_page(State(s): State<AppState>) -> Response {
    if let Some(m) = &s.services.memory
        && let Ok(st) = m.status().await
    {
        metrics::gauge!("hippocamp_memory_entries").set(st.entries as f64);
        if let Some(r) = st.router {
            metrics::gauge!("hippocamp_router_active_scopes", "service" => "memory")
                .set(r.active_scopes as f64);
            metrics::gauge!("hippocamp_router_reclaimed_workers", "service" => "memory")
                .set(r.reclaimed_workers as f64);
        }
    }
    if let Some(o) = &s.services.outbox
        && let Ok(st) = o.stats().await
    {
        outbox_gauges(&st);
    }
    if let Ok(st) = s.services.artifacts.status().await
        && let Some(r) = st.router
    {
        metrics::gauge!("hippocamp_router_active_scopes", "service" => "artifacts")
            .set(r.active_scopes as f64);
        metrics::gauge!("hippocamp_router_reclaimed_workers", "service" => "artifacts")
            .set(r.reclaimed_workers as f64);
    }
    match prometheus() {
        Some(h) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4",
            )],
            h.render(),
        )
            .into_response(),
        None => ApiError::from(hippocamp_core::Error::Unavailable(
            "another metrics recorder is installed in this process".into(),
        ))
        .into_response(),
    }
}

/// The outbox's counters as gauges (the store keeps them; totals only
/// grow, so they read as counters).
fn outbox_gauges(st: &hippocamp_outbox::OutboxStats) {
    for (state, n) in [
        ("pending", st.pending),
        ("running", st.running),
        ("succeeded", st.succeeded),
        ("failed", st.failed),
        ("cancelled", st.cancelled),
    ] {
        metrics::gauge!("hippocamp_outbox_jobs", "state" => state).set(n as f64);
    }
    metrics::gauge!("hippocamp_outbox_queue_depth").set((st.pending + st.running) as f64);
    metrics::gauge!("hippocamp_outbox_oldest_due_age_seconds")
        .set(st.oldest_due_age_ms as f64 / 1_000.0);
    metrics::gauge!("hippocamp_outbox_active_bytes").set(st.active_bytes as f64);
    metrics::gauge!("hippocamp_outbox_admitted_total").set(st.admitted_total as f64);
    metrics::gauge!("hippocamp_outbox_delivered_events_total")
        .set(st.delivered_events_total as f64);
    metrics::gauge!("hippocamp_outbox_retried_total").set(st.retried_total as f64);
    metrics::gauge!("hippocamp_outbox_failed_total").set(st.failed_total as f64);
    metrics::gauge!("hippocamp_outbox_cancelled_total", "reason" => "requested")
        .set(st.cancelled_requested_total as f64);
    metrics::gauge!("hippocamp_outbox_cancelled_total", "reason" => "erased")
        .set(st.cancelled_erased_total as f64);
    metrics::gauge!("hippocamp_outbox_pruned_total").set(st.pruned_total as f64);
}

async fn openapi_json() -> Response {
    axum::Json(openapi::document()).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new("not_found", "no such route")
}

/// The whole application: API v1, the page, probes and metrics, with the
/// global concurrency limit (over it: 503 at once, no queue; a request
/// counts until its reply's body ends), metrics and one log line a request.
pub fn app(state: AppState) -> axum::Router {
    let _ = prometheus();
    let mut router = axum::Router::new().merge(api::router());
    if let Some(m) = mcp::service(&state) {
        router = router.nest("/mcp", m);
    }
    router
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .route("/openapi.json", get(openapi_json))
        .route("/ui", get(ui::page))
        .route("/ui/whoami", get(ui::whoami))
        .fallback(not_found)
        // Non-API routes (probes, page) answer a wrong method in JSON too.
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(axum::middleware::from_fn(track))
        // Outermost, so every request counts, and one semaphore (in the
        // state) is shared by every route.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            transfer::admit,
        ))
        .with_state(state)
}

/// How long `serve` waits, once every connection has closed, for their
/// tasks to drop their handles (they do at once; this bounds a bug).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// A server listening but not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: tokio::net::TcpListener,
    state: AppState,
    released: tokio::sync::mpsc::Receiver<()>,
}

impl Bound {
    /// Opens the services of `config` and binds its address (port 0 picks
    /// one).
    pub async fn new(config: Config) -> hippocamp_core::Result<Self> {
        let config = Arc::new(config);
        let services = Services::open(&config).await?;
        services.tokens.watch();
        // Queued jobs of the last run are delivered as soon as we run.
        services.start_processor()?;
        services.start_sweeper();
        if config.profile == Profile::Ephemeral
            && config
                .data_dir
                .join(hippocamp_services::auth::TOKENS_FILE)
                .exists()
        {
            tracing::warn!(
                "the ephemeral profile keeps its tokens in memory: {} is not read",
                config
                    .data_dir
                    .join(hippocamp_services::auth::TOKENS_FILE)
                    .display()
            );
        }
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|e| {
                hippocamp_core::Error::Unavailable(format!("cannot listen on {}: {e}", config.bind))
            })?;
        let (state, released) = AppState::new(services, config);
        Ok(Self {
            listener,
            state,
            released,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.state.config.bind)
    }

    /// The services (to make tokens before serving).
    pub fn services(&self) -> &Services {
        &self.state.services
    }

    /// Serves until `shutdown` resolves, then lets requests in flight
    /// finish (at most `http.shutdown_grace_ms`), then closes the stores.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> hippocamp_core::Result<()> {
        let grace = Duration::from_millis(self.state.config.http.shutdown_grace_ms);
        let app = app(self.state.clone());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let idle = Duration::from_millis(self.state.config.http.transfer_idle_timeout_ms);
        let listener = transfer::Listener::new(self.listener, idle);
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stop_tx.send(());
        });
        let drained = {
            let mut server = std::pin::pin!(server.into_future());
            tokio::select! {
                r = &mut server => {
                    r.map_err(|e| hippocamp_core::Error::Unavailable(e.to_string()))?;
                    true
                }
                () = async {
                    let _ = stop_rx.await;
                    tokio::time::sleep(grace).await;
                } => {
                    tracing::warn!("shutdown grace expired with requests in flight");
                    false
                }
            }
        };
        // The last handles: the stores close (and checkpoint) when the
        // server's last clone of the state goes. Every connection has
        // closed, but its task drops its clone just after saying so: wait
        // for them, so a caller that sees `serve` return can reopen the
        // data directory (its locks are free).
        // The processor holds the stores too: stop it first.
        self.state.services.stop_sweeper();
        self.state.services.stop_processor().await;
        drop(self.state);
        let mut released = self.released;
        if drained
            && tokio::time::timeout(RELEASE_WAIT, released.recv())
                .await
                .is_err()
        {
            tracing::warn!("connections still hold the stores after shutdown");
        }
        Ok(())
    }
}
