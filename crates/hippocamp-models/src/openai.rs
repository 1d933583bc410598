//! An OpenAI-compatible chat-completions client (OpenAI, llama.cpp,
//! vLLM, Ollama...): `POST {base_url}/chat/completions`.
//!
//! Mapping: the system instruction is the first `system` message; a
//! `user` content's tool results become `role: tool` messages (one per
//! result, carrying `tool_call_id`) ahead of its text; a `model`
//! content is an `assistant` message whose tool calls carry their
//! arguments as a JSON string. Inline images travel as `image_url` data
//! URLs, inline text as text, other data as `file` parts. Thoughts are
//! the model's own and are not sent back (chat completions has no place
//! for them).

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Field, Problem, Result};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{bad, client, post, url};
use crate::{
    Content, FunctionCall, MODEL, Model, ModelConfig, ModelLimits, ModelRequest, ModelResponse,
    Part, ToolChoice, Usage,
};

const SERVICE: &str = "the chat-completions endpoint";

/// The client.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    config: ModelConfig,
    url: reqwest::Url,
    http: reqwest::Client,
}

impl OpenAiChat {
    /// A client for `config`.
    pub fn new(config: ModelConfig) -> Result<Self> {
        config.limits.validate()?;
        let url = url(
            "model.base_url",
            &format!("{}/chat/completions", config.base_url.trim_end_matches('/')),
        )?;
        Ok(Self {
            config,
            url,
            http: client()?,
        })
    }
}

fn data_url(mime: &str, data: &str) -> String {
    format!("data:{mime};base64,{data}")
}

fn user_parts(parts: &[&Part]) -> Value {
    let only_text = parts.iter().all(|p| p.inline_data.is_none());
    if only_text {
        let text: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
        return Value::String(text.join("\n"));
    }
    let items: Vec<Value> = parts
        .iter()
        .filter_map(|p| {
            if let Some(t) = &p.text {
                return Some(json!({"type": "text", "text": t}));
            }
            let d = p.inline_data.as_ref()?;
            Some(if d.mime_type.starts_with("image/") {
                json!({"type": "image_url", "image_url": {"url": data_url(&d.mime_type, &d.data)}})
            } else {
                json!({"type": "file", "file": {"file_data": data_url(&d.mime_type, &d.data)}})
            })
        })
        .collect();
    Value::Array(items)
}

fn call_id(id: Option<&String>, name: &str) -> Result<String> {
    id.cloned().ok_or_else(|| {
        Error::invalid(
            Field::Event,
            Problem::Malformed(format!(
                "a call of `{name}` has no id; chat completions pairs calls and results by id"
            )),
        )
    })
}

/// The request body of `r` for `model`.
pub fn request_body(model: &str, r: &ModelRequest) -> Result<Value> {
    let mut messages = Vec::new();
    if let Some(s) = &r.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for c in &r.contents {
        let visible: Vec<&Part> = c.parts.iter().filter(|p| !p.thought).collect();
        if c.role.as_deref() == Some(MODEL) {
            let text: Vec<&str> = visible.iter().filter_map(|p| p.text.as_deref()).collect();
            let calls = visible
                .iter()
                .filter_map(|p| p.function_call.as_ref())
                .map(|f| {
                    Ok(json!({
                        "id": call_id(f.id.as_ref(), &f.name)?,
                        "type": "function",
                        "function": {"name": f.name, "arguments": f.args.to_string()},
                    }))
                })
                .collect::<Result<Vec<_>>>()?;
            let mut m = json!({"role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text.join("\n")) }});
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            messages.push(m);
            continue;
        }
        for p in &visible {
            if let Some(fr) = &p.function_response {
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": call_id(fr.id.as_ref(), &fr.name)?,
                    "content": fr.response.to_string(),
                }));
            }
        }
        let rest: Vec<&Part> = visible
            .into_iter()
            .filter(|p| p.text.is_some() || p.inline_data.is_some())
            .collect();
        if !rest.is_empty() {
            messages.push(json!({"role": "user", "content": user_parts(&rest)}));
        }
    }
    let mut body = json!({"model": model, "messages": messages});
    if !r.tools.is_empty() {
        body["tools"] = r
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tool_choice"] = json!(match r.tool_choice {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
        });
    }
    if let Some(t) = r.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(n) = r.max_output_tokens {
        body["max_tokens"] = json!(n);
    }
    Ok(body)
}

#[derive(Deserialize)]
struct Reply {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// Reads a reply body into the neutral answer.
pub fn parse_reply(body: &[u8]) -> Result<ModelResponse> {
    let reply: Reply = serde_json::from_slice(body)
        .map_err(|e| bad(SERVICE, format!("not a chat-completions reply: {e}")))?;
    let choice = reply
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| bad(SERVICE, "the reply has no choice"))?;
    let mut parts = Vec::new();
    if let Some(t) = choice.message.content.filter(|t| !t.is_empty()) {
        parts.push(Part::text(t));
    }
    for c in choice.message.tool_calls.unwrap_or_default() {
        if c.function.name.is_empty() {
            return Err(bad(SERVICE, "a tool call without a name"));
        }
        let raw = c.function.arguments.unwrap_or_default();
        let args = if raw.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str::<Value>(&raw).map_err(|e| {
                bad(
                    SERVICE,
                    format!("the arguments of `{}` are not JSON: {e}", c.function.name),
                )
            })?
        };
        if !args.is_object() {
            return Err(bad(
                SERVICE,
                format!(
                    "the arguments of `{}` are not a JSON object",
                    c.function.name
                ),
            ));
        }
        parts.push(Part::call(FunctionCall {
            id: c.id.filter(|i| !i.is_empty()),
            name: c.function.name,
            args,
        }));
    }
    Ok(ModelResponse {
        content: Content {
            role: Some(MODEL.to_owned()),
            parts,
        },
        finish_reason: choice.finish_reason,
        usage: reply.usage.map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        }),
    })
}

#[async_trait]
impl Model for OpenAiChat {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn limits(&self) -> &ModelLimits {
        &self.config.limits
    }

    async fn generate(&self, request: &ModelRequest, deadline: Deadline) -> Result<ModelResponse> {
        let body = serde_json::to_vec(&request_body(&self.config.model, request)?)
            .map_err(|e| Error::invalid(Field::Body, Problem::Malformed(e.to_string())))?;
        let mut rq = self.http.post(self.url.clone());
        if let Some(k) = &self.config.api_key {
            rq = rq.bearer_auth(k);
        }
        let reply = post(SERVICE, rq, body, &self.config.limits, deadline).await?;
        parse_reply(&reply)
    }
}
