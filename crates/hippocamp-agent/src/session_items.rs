//! Session items: JSON objects a framework keeps in an agent session
//! (OpenAI Agents' `TResponseInputItem`s), stored byte for byte as
//! session events and remembered as turns.
//!
//! - An item becomes one [`SessionEvent`] whose metadata `item` holds the
//!   item's JSON text exactly as it was sent; reading the session gives
//!   that text back.
//! - Its id is derived from the session, the item's position, the time it
//!   was appended and 32 random bits (`item-{session hash}-{position}-{ms}-{nonce}`):
//!   event ids are unique per user, and an item appended at a position a
//!   [`pop`] freed gets a new id even within the same millisecond, so it
//!   is never mistaken for the erased item (whose re-sent event memory
//!   skips as `erased`).
//! - Its text (a `content` string, or the `text` of its content parts)
//!   is what memory remembers, as a turn of the session; an item without
//!   text (a tool call) is kept in the session only.
//! - Popping the last item erases it from the session and erases the
//!   memory entry it became (so re-sending it is skipped as `erased`).

use hippocamp_core::{CallOptions, Error, EventId, Field, MemoryScope, Problem, Result, SessionId};
use hippocamp_memory::MemoryStore;
use hippocamp_sessions::{Content, Part, SessionEvent, SessionStore};
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

/// The event metadata key holding the item's JSON text.
pub const ITEM_KEY: &str = "item";

/// The event id of the item at `position` of `session`, appended at
/// `at_ms` with `nonce`.
pub fn item_id(session: &SessionId, position: u64, at_ms: u64, nonce: u32) -> String {
    let h = Sha256::digest(session.as_str().as_bytes());
    format!(
        "item-{}-{position}-{at_ms}-{nonce:08x}",
        &hex::encode(h)[..16]
    )
}

fn bad(why: impl Into<String>) -> Error {
    Error::invalid(Field::Event, Problem::Malformed(why.into()))
}

/// The text an item says, if any.
fn text_of(item: &serde_json::Map<String, Value>) -> String {
    match item.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The session event holding `raw` at `position` of `session`.
pub fn to_event(
    session: &SessionId,
    position: u64,
    at_ms: u64,
    raw: &RawValue,
) -> Result<SessionEvent> {
    let value: Value = serde_json::from_str(raw.get()).map_err(|e| bad(e.to_string()))?;
    let Value::Object(item) = value else {
        return Err(bad("an item must be a JSON object"));
    };
    let role = item.get("role").and_then(Value::as_str);
    let author = match (role, item.get("type").and_then(Value::as_str)) {
        (Some("user"), _) => "user",
        (None, Some("function_call_output")) => "tool",
        _ => "assistant",
    };
    let text = text_of(&item);
    let content = (!text.trim().is_empty()).then(|| Content {
        role: Some(if author == "user" { "user" } else { "model" }.to_owned()),
        parts: vec![Part::text(text)],
    });
    let mut metadata = serde_json::Map::new();
    metadata.insert(ITEM_KEY.into(), Value::String(raw.get().to_owned()));
    Ok(SessionEvent {
        id: item_id(session, position, at_ms, rand::random()),
        author: author.to_owned(),
        timestamp_ms: i64::try_from(at_ms).unwrap_or(i64::MAX),
        invocation_id: None,
        partial: false,
        content,
        metadata: Some(metadata),
        actions: hippocamp_sessions::event::Actions::default(),
    })
}

/// The item an event holds: its JSON text as it was sent, or, for an
/// event written otherwise (by the runner), the event's own JSON.
pub fn item_of(event: &SessionEvent) -> Result<Box<RawValue>> {
    match event
        .metadata
        .as_ref()
        .and_then(|m| m.get(ITEM_KEY))
        .and_then(Value::as_str)
    {
        Some(text) => RawValue::from_string(text.to_owned())
            .map_err(|e| Error::Corrupt(format!("a session item: {e}"))),
        None => serde_json::value::to_raw_value(event)
            .map_err(|e| Error::Corrupt(format!("a session event: {e}"))),
    }
}

/// The memory event an item's session event is remembered as: its text,
/// without the item's JSON (which memory's metadata bounds need not hold).
pub fn memory_event(event: &SessionEvent) -> Result<hippocamp_memory::Event> {
    let mut e = event.clone();
    e.metadata = None;
    let json = serde_json::to_value(&e).map_err(|x| Error::Corrupt(x.to_string()))?;
    serde_json::from_value(json).map_err(|x| Error::Corrupt(format!("a session event: {x}")))
}

/// Removes the session's last item and erases the memory entry it
/// became; the item, if there was one.
///
/// The entry of the item read as last is erased before the pop, so a
/// crash between the two leaves an item without its memory, never the
/// reverse; if a concurrent append made another item last, that one's
/// entry is erased after the pop too.
pub async fn pop(
    sessions: &dyn SessionStore,
    memory: Option<&dyn MemoryStore>,
    scope: &MemoryScope,
    session: &SessionId,
    call: &CallOptions,
) -> Result<Option<SessionEvent>> {
    let info = match sessions.info(scope, session, call).await {
        Ok(i) => i,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(last) = info.events.checked_sub(1) else {
        return Ok(None);
    };
    let page = sessions.events(scope, session, last, Some(1), call).await?;
    let predicted = page.events.first().map(|e| e.id.clone());
    if let (Some(id), Some(m)) = (&predicted, memory) {
        erase_entry(m, scope, id, call).await?;
    }
    let popped = sessions.pop_last(scope, session, call).await?;
    if let (Some(e), Some(m)) = (&popped, memory)
        && Some(&e.id) != predicted.as_ref()
    {
        erase_entry(m, scope, &e.id, call).await?;
    }
    Ok(popped)
}

async fn erase_entry(
    memory: &dyn MemoryStore,
    scope: &MemoryScope,
    event_id: &str,
    call: &CallOptions,
) -> Result<()> {
    let Ok(id) = EventId::new(event_id) else {
        return Ok(());
    };
    let entry = hippocamp_memory::event::event_entry_id(scope, &id)?;
    match memory.delete_entry(scope, &entry, call).await {
        Ok(_) | Err(Error::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn items_keep_their_bytes_and_give_their_text() {
        let sid = SessionId::new("s1").unwrap();
        let text = r#"{ "role":"user",  "content": "I live in Lisbon" , "z": 1, "a": [1.50, 2]}"#;
        let e = to_event(&sid, 3, 1_000, &raw(text)).unwrap();
        assert_eq!(item_of(&e).unwrap().get(), text);
        assert_eq!(e.author, "user");
        assert!(
            e.id.starts_with("item-") && e.id.contains("-3-1000-"),
            "{}",
            e.id
        );
        let m = memory_event(&e).unwrap();
        assert_eq!(m.text_content(), "I live in Lisbon");
        let out = to_event(
            &sid,
            4,
            1_001,
            &raw(r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Noted."}]}"#),
        )
        .unwrap();
        assert_eq!(
            (
                out.author.as_str(),
                memory_event(&out).unwrap().text_content().as_str()
            ),
            ("assistant", "Noted.")
        );
        let call = to_event(
            &sid,
            5,
            1_002,
            &raw(r#"{"type":"function_call","name":"f","arguments":"{}","call_id":"c1"}"#),
        )
        .unwrap();
        assert!(call.content.is_none());
        assert!(to_event(&sid, 6, 1, &raw("[1, 2]")).is_err());
        // Another session, the same position later, or another append in
        // the same millisecond: another id.
        assert_ne!(
            item_id(&sid, 3, 1_000, 7),
            item_id(&SessionId::new("s2").unwrap(), 3, 1_000, 7)
        );
        assert_ne!(item_id(&sid, 3, 1_000, 7), item_id(&sid, 3, 1_001, 7));
        assert_ne!(item_id(&sid, 3, 1_000, 7), item_id(&sid, 3, 1_000, 8));
        assert_ne!(
            to_event(&sid, 3, 1_000, &raw(text)).unwrap().id,
            to_event(&sid, 3, 1_000, &raw(text)).unwrap().id
        );
    }
}
