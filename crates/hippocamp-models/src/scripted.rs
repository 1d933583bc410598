//! A scripted model server on loopback, for tests: it answers each POST
//! with the next reply of its script (status, body bytes, delay) and
//! records every request it got. The replies are written in the real
//! wire formats ([`Reply::openai_text`], [`Reply::gemini`]...), so the
//! clients under test parse exactly what a provider sends.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Body bytes, sent as they are.
    pub body: Vec<u8>,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Reply {
    /// A 200 with `body` as JSON.
    pub fn json(body: &Value) -> Self {
        Self::raw(200, body.to_string())
    }

    /// Any status and body.
    pub fn raw(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// The same reply after `delay`.
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// A chat-completions answer with text.
    pub fn openai_text(text: &str) -> Self {
        Self::json(&json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        }))
    }

    /// A chat-completions answer calling tools: `(id, name, arguments
    /// as the JSON string the wire carries)`.
    pub fn openai_calls(calls: &[(&str, &str, &str)]) -> Self {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": args}})
            })
            .collect();
        Self::json(&json!({
            "id": "chatcmpl-2", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": calls}}]
        }))
    }

    /// A generateContent answer with these parts (Gemini's JSON).
    pub fn gemini(parts: &Value) -> Self {
        Self::json(&json!({
            "candidates": [{"content": {"role": "model", "parts": parts},
                "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2}
        }))
    }
}

/// A request the server got.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its path.
    pub path: String,
    /// Its `authorization` or `x-goog-api-key` header.
    pub key: Option<String>,
    /// Its body bytes.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Recorded>>,
}

/// The running server (stops when dropped).
#[derive(Debug)]
pub struct Scripted {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    State(s): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers
        .get("authorization")
        .or_else(|| headers.get("x-goog-api-key"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    s.seen.lock().push(Recorded {
        path: uri.path().to_owned(),
        key,
        body: body.to_vec(),
    });
    let next = s.script.lock().pop_front();
    let Some(r) = next else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response();
    };
    if !r.delay.is_zero() {
        tokio::time::sleep(r.delay).await;
    }
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        r.body,
    )
        .into_response()
}

impl Scripted {
    /// Starts a server on 127.0.0.1 answering with `script`, in order.
    pub async fn start(script: Vec<Reply>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            seen: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.script.lock().extend(replies);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.seen.lock().clone()
    }
}
