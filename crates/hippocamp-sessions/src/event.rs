//! The event a session holds.
//!
//! It is the event `add_events` takes (`hippocamp_memory::Event`),
//! extended without breaking that input: the JSON of a [`SessionEvent`]
//! is read by `add_events` as it is (the extensions are fields memory
//! ignores), and the fields the two share mean the same in both.
//! The extensions:
//!
//! - a part's `function_call` (`{id, name, args}`) and
//!   `function_response` (`{id, name, response}`): the tool calls a model
//!   made and what each tool answered;
//! - a part's `thought_signature`: an opaque provider string (Gemini's
//!   `thoughtSignature`) kept byte for byte, because the provider needs
//!   it back exactly as it sent it;
//! - the event's `invocation_id` (the run that wrote it) and
//!   `actions.context_effects` (metadata-only records of what a tool
//!   changed: never content, never bytes).

use hippocamp_core::{Author, Error, EventId, Field, Metadata, Problem, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use hippocamp_core::content::{Content, FunctionCall, FunctionResponse, InlineData, Part};

/// Who wrote an event: the user.
pub const USER: &str = "user";
/// Who wrote an event: a tool (its result).
pub const TOOL: &str = "tool";

/// One event of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEvent {
    /// Event id, unique within its session (1..=256 bytes).
    pub id: String,
    /// `user`, the agent's name, or `tool`.
    pub author: String,
    /// When, in milliseconds since the Unix epoch (non-negative).
    pub timestamp_ms: i64,
    /// The run that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation_id: Option<String>,
    /// A streaming fragment.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// The message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// JSON-safe metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// What the event did besides its message.
    #[serde(default, skip_serializing_if = "Actions::is_empty")]
    pub actions: Actions,
}

/// What an event did besides its message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Actions {
    /// Metadata-only records of what the event's tool calls changed
    /// (`memory_delta`, `artifact_delta`, `artifact_attachment`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_effects: Vec<Value>,
}

impl Actions {
    /// Whether there is nothing to record.
    pub fn is_empty(&self) -> bool {
        self.context_effects.is_empty()
    }
}

impl SessionEvent {
    /// An event of `author` with one text part.
    pub fn text(id: impl Into<String>, author: &str, timestamp_ms: i64, text: &str) -> Self {
        Self {
            id: id.into(),
            author: author.to_owned(),
            timestamp_ms,
            invocation_id: None,
            partial: false,
            content: Some(Content {
                role: Some(if author == USER { "user" } else { "model" }.to_owned()),
                parts: vec![Part::text(text)],
            }),
            metadata: None,
            actions: Actions::default(),
        }
    }

    /// The text of its non-thought text parts, joined with no separator.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .flat_map(|c| &c.parts)
            .filter(|p| !p.thought)
            .filter_map(|p| p.text.as_deref())
            .collect()
    }

    /// The tool calls it holds, in order.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.content
            .iter()
            .flat_map(|c| &c.parts)
            .filter_map(|p| p.function_call.as_ref())
    }

    /// Checks the shape (ids, author, timestamp, tool names) and that its
    /// JSON fits `max_bytes`; returns the encoded size.
    pub fn validate(&self, max_bytes: u64) -> Result<u64> {
        EventId::new(self.id.as_str())?;
        Author::new(self.author.as_str())?;
        if self.timestamp_ms < 0 {
            return Err(Error::invalid(
                Field::Timestamp,
                Problem::OutOfRange {
                    value: i128::from(self.timestamp_ms),
                    min: 0,
                    max: i128::from(i64::MAX),
                },
            ));
        }
        if let Some(i) = &self.invocation_id {
            EventId::new(i.as_str())?;
        }
        for p in self.content.iter().flat_map(|c| &c.parts) {
            let names = p
                .function_call
                .as_ref()
                .map(|c| c.name.as_str())
                .into_iter()
                .chain(p.function_response.as_ref().map(|r| r.name.as_str()));
            for n in names {
                if n.is_empty() {
                    return Err(Error::invalid(Field::Name, Problem::Empty));
                }
            }
        }
        let size = serde_json::to_vec(self)
            .map_err(|e| Error::invalid(Field::Event, Problem::Malformed(e.to_string())))?
            .len() as u64;
        if size > max_bytes {
            return Err(Error::invalid(
                Field::Event,
                Problem::TooLong {
                    len: hippocamp_core::limits::to_usize(size),
                    max: hippocamp_core::limits::to_usize(max_bytes),
                },
            ));
        }
        Ok(size)
    }

    /// The event as memory ingestion reads it (`add_events`, the
    /// outbox): the same JSON, read by memory's parser, so a session
    /// event is remembered exactly as the same event sent to the API.
    pub fn to_memory_event(&self) -> Result<hippocamp_memory::Event> {
        let v = serde_json::to_value(self)
            .map_err(|e| Error::invalid(Field::Event, Problem::Malformed(e.to_string())))?;
        serde_json::from_value(v)
            .map_err(|e| Error::invalid(Field::Event, Problem::Malformed(e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// One event with every field set.
    fn full() -> SessionEvent {
        SessionEvent {
            id: "e-1".into(),
            author: "assistant".into(),
            timestamp_ms: 1_700_000_000_123,
            invocation_id: Some("inv-1".into()),
            partial: true,
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![
                    Part {
                        text: Some("thinking…".into()),
                        thought: true,
                        // Not canonical base64 on purpose: kept as sent.
                        thought_signature: Some("CiQB/+9x=\u{00e9}==\n".into()),
                        ..Part::default()
                    },
                    Part::call(FunctionCall {
                        id: Some("call_1".into()),
                        name: "load_memory".into(),
                        args: json!({"query": "Lisbon", "limit": 3}),
                    }),
                    Part::response(FunctionResponse {
                        id: Some("call_1".into()),
                        name: "load_memory".into(),
                        response: json!({"success": true, "hits": [{"id": "mem-1"}]}),
                    }),
                    Part {
                        inline_data: Some(InlineData {
                            mime_type: "image/png".into(),
                            data: "iVBORw0KGgo=".into(),
                        }),
                        ..Part::default()
                    },
                    Part::text("I moved to Lisbon"),
                ],
            }),
            metadata: Some(json!({"topic": "travel"}).as_object().unwrap().clone()),
            actions: Actions {
                context_effects: vec![json!({
                    "kind": "memory_delta", "operation": "add",
                    "entry": {"id": "mem-0123"}
                })],
            },
        }
    }

    #[test]
    fn every_field_round_trips_and_the_signature_is_byte_exact() {
        let e = full();
        let bytes = serde_json::to_vec(&e).unwrap();
        let back: SessionEvent = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, e);
        let sig = back.content.as_ref().unwrap().parts[0]
            .thought_signature
            .as_deref()
            .unwrap();
        assert_eq!(sig.as_bytes(), "CiQB/+9x=\u{00e9}==\n".as_bytes());
        // And again: a second encoding is byte-identical.
        assert_eq!(serde_json::to_vec(&back).unwrap(), bytes);
    }

    #[test]
    fn memory_reads_a_session_event_as_it_reads_the_api_input() {
        let mut e = full();
        e.partial = false;
        let m = e.to_memory_event().unwrap();
        assert_eq!(m.id, "e-1");
        assert_eq!(m.timestamp_ms, 1_700_000_000_123);
        let parts = &m.content.as_ref().unwrap().parts;
        assert_eq!(parts.len(), 5);
        assert!(parts[0].thought);
        assert_eq!(
            parts[1].function_call.as_ref().unwrap()["name"],
            "load_memory"
        );
        assert_eq!(parts[4].text.as_deref(), Some("I moved to Lisbon"));
        assert_eq!(m.metadata.as_ref().unwrap()["topic"], "travel");
    }

    #[test]
    fn an_api_input_event_is_a_session_event() {
        let v = json!({"id": "e1", "author": "user", "timestamp_ms": 5,
            "content": {"role": "user", "parts": [{"text": "hi"}]},
            "metadata": {"topic": "x"}});
        let e: SessionEvent = serde_json::from_value(v).unwrap();
        assert_eq!(e.text_content(), "hi");
        e.validate(1_000).unwrap();
    }

    #[test]
    fn bad_events_are_refused_with_the_field() {
        let mut e = full();
        e.id = String::new();
        assert!(matches!(
            e.validate(1 << 20),
            Err(Error::InvalidArgument {
                field: Field::EventId,
                ..
            })
        ));
        let mut e = full();
        e.timestamp_ms = -1;
        assert!(matches!(
            e.validate(1 << 20),
            Err(Error::InvalidArgument {
                field: Field::Timestamp,
                ..
            })
        ));
        assert!(matches!(
            full().validate(64),
            Err(Error::InvalidArgument {
                field: Field::Event,
                ..
            })
        ));
        let unknown = json!({"id": "e", "author": "u", "timestamp_ms": 1, "surprise": 1});
        assert!(serde_json::from_value::<SessionEvent>(unknown).is_err());
    }
}
