//! The parts of a conversation message (text, tool calls, tool results,
//! inline data): what a model client sends and receives and what a session
//! event holds, so neither depends on the other (`hippocamp-models`,
//! `hippocamp-sessions`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A message: a role and its parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Content {
    /// `user`, `model` or `tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts, in order.
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One part of a message. Exactly what the provider sent is kept:
/// `thought_signature` byte for byte.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text is the model's reasoning (not remembered).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thought: bool,
    /// A tool call the model made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    /// What a tool answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    /// Inline binary data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<InlineData>,
    /// An opaque provider string (Gemini's `thoughtSignature`), returned
    /// to the provider exactly as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A tool-call part.
    pub fn call(call: FunctionCall) -> Self {
        Self {
            function_call: Some(call),
            ..Self::default()
        }
    }

    /// A tool-result part.
    pub fn response(response: FunctionResponse) -> Self {
        Self {
            function_response: Some(response),
            ..Self::default()
        }
    }
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FunctionCall {
    /// The provider's call id (chat completions: `tool_call_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// Its arguments (a JSON object).
    #[serde(default)]
    pub args: Value,
}

/// A tool's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FunctionResponse {
    /// The call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// The result (a JSON object).
    pub response: Value,
}

/// Inline binary data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InlineData {
    /// MIME type.
    pub mime_type: String,
    /// Base64 data.
    pub data: String,
}
