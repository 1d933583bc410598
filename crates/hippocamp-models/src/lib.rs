//! Model providers behind one small [`Model`] trait.
//!
//! A [`ModelRequest`] is provider-neutral: a system instruction, the
//! conversation as session [`Content`]s (roles `user` and `model`; tool
//! results are `function_response` parts of a `user` content), the tools
//! offered (a JSON Schema each) and the tool choice of this round. Each
//! client maps it to its wire format and back:
//!
//! - [`openai`]: chat completions (`messages`, `tools`, `tool_calls` with
//!   string arguments, `role: tool` replies carrying `tool_call_id`);
//! - [`gemini`]: `generateContent` (`functionCall`/`functionResponse`,
//!   `parametersJsonSchema`, `thoughtSignature` returned as received).
//!
//! Every call is bounded: the request body's bytes (checked before it is
//! sent), the reply's bytes (read no further), and a deadline. Errors are
//! the crate-wide [`hippocamp_core::Error`]: HTTP 429 is `Overloaded`,
//! 5xx and transport failures `Unavailable`, a reply that does not parse
//! or breaks the protocol (arguments that are not a JSON object, no
//! choice) `InvalidReply`, the deadline `Timeout(Model)`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod gemini;
mod http;
pub mod openai;
#[cfg(feature = "scripted")]
pub mod scripted;

use std::fmt;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Result, limit_table};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use hippocamp_core::content::{Content, FunctionCall, FunctionResponse, InlineData, Part};

/// Role of the user's (and tool results') contents.
pub const USER: &str = "user";
/// Role of the model's contents.
pub const MODEL: &str = "model";

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments' JSON Schema (an object schema).
    pub parameters: Value,
}

/// Whether the model must, may or must not call a tool this round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call a tool.
    Required,
    /// The model must answer without tools.
    None,
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    /// The system instruction.
    pub system: Option<String>,
    /// The conversation, oldest first.
    pub contents: Vec<Content>,
    /// Tools offered.
    pub tools: Vec<ToolDeclaration>,
    /// This round's tool choice.
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Most tokens to generate.
    pub max_output_tokens: Option<u32>,
}

/// Token counts a provider reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The answer (role `model`): text, tool calls, thoughts.
    pub content: Content,
    /// Why it stopped, as the provider says it.
    pub finish_reason: Option<String>,
    /// Token counts, if reported.
    pub usage: Option<Usage>,
}

impl ModelResponse {
    /// The tool calls of the answer.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.content
            .parts
            .iter()
            .filter_map(|p| p.function_call.as_ref())
    }

    /// The answer's text (non-thought parts, joined).
    pub fn text(&self) -> String {
        self.content
            .parts
            .iter()
            .filter(|p| !p.thought)
            .filter_map(|p| p.text.as_deref())
            .collect()
    }
}

/// A model provider.
#[async_trait]
pub trait Model: Send + Sync + fmt::Debug {
    /// The model's name, as configured.
    fn name(&self) -> &str;

    /// The limits every call is held to.
    fn limits(&self) -> &ModelLimits;

    /// One call, answered by `deadline`.
    async fn generate(&self, request: &ModelRequest, deadline: Deadline) -> Result<ModelResponse>;
}

limit_table! {
    /// Bounds of every model call.
    pub struct ModelLimits, prefix "model." {
        /// Bytes of one request body.
        max_request_bytes: default 4_194_304, min 1_024, max 67_108_864,
            "bytes of one model request body (checked before it is sent)";
        /// Bytes of one reply body.
        max_reply_bytes: default 4_194_304, min 1_024, max 67_108_864,
            "bytes of one model reply body (read no further)";
        /// Timeout of one call.
        timeout_ms: default 120_000, min 1, max 600_000,
            "milliseconds one model call may take";
    }
}

impl ModelLimits {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Chat completions (`{base_url}/chat/completions`).
    Openai,
    /// Gemini `generateContent` (`{base_url}/models/{model}:generateContent`).
    Gemini,
}

/// Where and how to reach a model.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The wire format.
    pub provider: Provider,
    /// Base URL, e.g. `http://127.0.0.1:8080/v1` or
    /// `https://generativelanguage.googleapis.com/v1beta`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The API key, if the endpoint wants one (never printed).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Bounds of every call.
    #[serde(default)]
    pub limits: ModelLimits,
}

impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("limits", &self.limits)
            .finish()
    }
}

/// The client `config` names.
pub fn connect(config: ModelConfig) -> Result<std::sync::Arc<dyn Model>> {
    Ok(match config.provider {
        Provider::Openai => std::sync::Arc::new(openai::OpenAiChat::new(config)?),
        Provider::Gemini => std::sync::Arc::new(gemini::Gemini::new(config)?),
    })
}
