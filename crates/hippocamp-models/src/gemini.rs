//! A Gemini `generateContent` client:
//! `POST {base_url}/models/{model}:generateContent` with the key in
//! `x-goog-api-key`.
//!
//! Contents travel as Gemini's own (`user`/`model` roles, `functionCall`
//! and `functionResponse` parts), tools as `functionDeclarations` with
//! `parametersJsonSchema`, the tool choice as
//! `toolConfig.functionCallingConfig.mode`. Every part's
//! `thoughtSignature` is kept as the exact string received and sent back
//! unchanged with the part it came on.

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Field, Problem, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::http::{bad, client, post, url};
use crate::{
    Content, FunctionCall, FunctionResponse, InlineData, MODEL, Model, ModelConfig, ModelLimits,
    ModelRequest, ModelResponse, Part, ToolChoice, USER, Usage,
};

const SERVICE: &str = "the Gemini endpoint";

/// The client.
#[derive(Debug, Clone)]
pub struct Gemini {
    config: ModelConfig,
    url: reqwest::Url,
    http: reqwest::Client,
}

impl Gemini {
    /// A client for `config`.
    pub fn new(config: ModelConfig) -> Result<Self> {
        config.limits.validate()?;
        let url = url(
            "model.base_url",
            &format!(
                "{}/models/{}:generateContent",
                config.base_url.trim_end_matches('/'),
                config.model
            ),
        )?;
        Ok(Self {
            config,
            url,
            http: client()?,
        })
    }
}

/// A part on the wire (unknown keys of a reply are ignored).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    thought: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thought_signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function_call: Option<WireCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function_response: Option<WireResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inline_data: Option<WireBlob>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    name: String,
    response: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlob {
    mime_type: String,
    data: String,
}

fn to_wire(p: &Part) -> WirePart {
    WirePart {
        text: p.text.clone(),
        thought: p.thought,
        thought_signature: p.thought_signature.clone(),
        function_call: p.function_call.as_ref().map(|c| WireCall {
            id: c.id.clone(),
            name: c.name.clone(),
            args: Some(c.args.clone()),
        }),
        function_response: p.function_response.as_ref().map(|r| WireResponse {
            id: r.id.clone(),
            name: r.name.clone(),
            response: r.response.clone(),
        }),
        inline_data: p.inline_data.as_ref().map(|d| WireBlob {
            mime_type: d.mime_type.clone(),
            data: d.data.clone(),
        }),
    }
}

/// The request body of `r`.
pub fn request_body(r: &ModelRequest) -> Result<Value> {
    let contents: Vec<Value> = r
        .contents
        .iter()
        .map(|c| {
            let role = if c.role.as_deref() == Some(MODEL) {
                MODEL
            } else {
                USER
            };
            json!({"role": role, "parts": c.parts.iter().map(to_wire).collect::<Vec<_>>()})
        })
        .collect();
    let mut body = json!({"contents": contents});
    if let Some(s) = &r.system {
        body["systemInstruction"] = json!({"parts": [{"text": s}]});
    }
    if !r.tools.is_empty() {
        let decls: Vec<Value> = r
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                    "parametersJsonSchema": t.parameters})
            })
            .collect();
        body["tools"] = json!([{"functionDeclarations": decls}]);
        let mode = match r.tool_choice {
            ToolChoice::Auto => "AUTO",
            ToolChoice::Required => "ANY",
            ToolChoice::None => "NONE",
        };
        body["toolConfig"] = json!({"functionCallingConfig": {"mode": mode}});
    }
    let mut generation = serde_json::Map::new();
    if let Some(t) = r.temperature {
        generation.insert("temperature".into(), json!(t));
    }
    if let Some(n) = r.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(n));
    }
    if !generation.is_empty() {
        body["generationConfig"] = Value::Object(generation);
    }
    Ok(body)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reply {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
    #[serde(default)]
    prompt_feedback: Option<Feedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Feedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<WireContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireContent {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
}

/// Reads a reply body into the neutral answer.
pub fn parse_reply(body: &[u8]) -> Result<ModelResponse> {
    let reply: Reply = serde_json::from_slice(body)
        .map_err(|e| bad(SERVICE, format!("not a generateContent reply: {e}")))?;
    let Some(candidate) = reply.candidates.into_iter().next() else {
        let why = reply
            .prompt_feedback
            .and_then(|f| f.block_reason)
            .map_or_else(
                || "the reply has no candidate".to_owned(),
                |r| format!("the prompt was blocked ({r})"),
            );
        return Err(bad(SERVICE, why));
    };
    let mut parts = Vec::new();
    for w in candidate.content.map(|c| c.parts).unwrap_or_default() {
        let function_call = match w.function_call {
            None => None,
            Some(c) => {
                if c.name.is_empty() {
                    return Err(bad(SERVICE, "a function call without a name"));
                }
                let args = c.args.unwrap_or_else(|| json!({}));
                if !args.is_object() {
                    return Err(bad(
                        SERVICE,
                        format!("the args of `{}` are not a JSON object", c.name),
                    ));
                }
                Some(FunctionCall {
                    id: c.id,
                    name: c.name,
                    args,
                })
            }
        };
        let p = Part {
            text: w.text,
            thought: w.thought,
            function_call,
            function_response: w.function_response.map(|r| FunctionResponse {
                id: r.id,
                name: r.name,
                response: r.response,
            }),
            inline_data: w.inline_data.map(|b| InlineData {
                mime_type: b.mime_type,
                data: b.data,
            }),
            thought_signature: w.thought_signature,
        };
        // A part of a kind this client does not know carries nothing here.
        if p != Part::default() {
            parts.push(p);
        }
    }
    Ok(ModelResponse {
        content: Content {
            role: Some(MODEL.to_owned()),
            parts,
        },
        finish_reason: candidate.finish_reason,
        usage: reply.usage_metadata.map(|u| Usage {
            input_tokens: u.prompt_token_count,
            output_tokens: u.candidates_token_count,
        }),
    })
}

#[async_trait]
impl Model for Gemini {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn limits(&self) -> &ModelLimits {
        &self.config.limits
    }

    async fn generate(&self, request: &ModelRequest, deadline: Deadline) -> Result<ModelResponse> {
        let body = serde_json::to_vec(&request_body(request)?)
            .map_err(|e| Error::invalid(Field::Body, Problem::Malformed(e.to_string())))?;
        let mut rq = self.http.post(self.url.clone());
        if let Some(k) = &self.config.api_key {
            rq = rq.header("x-goog-api-key", k);
        }
        let reply = post(SERVICE, rq, body, &self.config.limits, deadline).await?;
        parse_reply(&reply)
    }
}
