//! Conversation events and how they become entries.
//!
//! One event format serves `add_events`, the HTTP API and `memory import`
//! (as JSON lines). It is ADK's:
//!
//! ```json
//! {"id": "e1", "author": "user", "timestamp_ms": 1700000000000,
//!  "partial": false,
//!  "content": {"role": "user", "parts": [{"text": "I moved to Lisbon"}]},
//!  "metadata": {"topic": "travel"}}
//! ```
//!
//! Real ADK events are read as they are, in the snake_case of its Python
//! objects (`event.model_dump()`) and in the camelCase of `adk api_server`
//! replies (`by_alias=True`): `timestamp` in float seconds stands for
//! `timestamp_ms`; `invocation_id`, `actions` and every other ADK field
//! are ignored; a part's `null` keys are absent keys; `custom_metadata`
//! stands for `metadata`. A part carries `text` (a `thought: true` part is
//! the model's reasoning, not conversation, and is not remembered),
//! `function_call`, `function_response` or `inline_data` (`{"mime_type",
//! "data"}`), or anything else, all ignored for memory.
//!
//! Ingestion joins an event's non-empty, non-thought text parts with `\n`
//! into the entry's content, copies its metadata (redacted), and sets
//! provenance from the session id, event id, author and timestamp; the
//! idempotency key is `event:<id>`. It skips partial events, events
//! authored by `runner`, `tool` or `system`, events without text, and
//! secret-looking text. A malformed event is skipped and reported on its
//! own; it never fails the batch.
//!
//! Erasure is sticky: a store remembers the (session, entry id) of every
//! entry it erased (ids only, no content), and an event that would make
//! one of them again is skipped as [`SkipReason::Erased`], whether it comes
//! straight to `add_events` or through a queue. A new session id starts
//! over on purpose.

use hippocamp_core::{
    Author, EntryId, Error, EventId, IdempotencyKey, MemoryLimits, MemoryScope, Metadata,
    SecretKind, SessionId,
};
use hippocamp_search::{Analyzer, TermFreqs};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entry::{NewEntry, PreparedEntry, Provenance, prepare_entry};

/// A conversation event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "wire::Event")]
pub struct Event {
    /// Event id, unique within its scope (1..=256 bytes).
    pub id: String,
    /// Who produced it (`user`, an agent name, `tool`...).
    pub author: String,
    /// When, in milliseconds since the Unix epoch (non-negative). ADK's
    /// `timestamp` (float seconds) is read into it.
    pub timestamp_ms: i64,
    /// Streaming fragments are not remembered.
    #[serde(default)]
    pub partial: bool,
    /// The message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// JSON-safe metadata copied to the entry (ADK: `custom_metadata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An event's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Content {
    /// `user`, `model`...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The parts.
    #[serde(default, deserialize_with = "wire::null_as_default")]
    pub parts: Vec<Part>,
}

/// One part of a message; the keys it does not name are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text is the model's reasoning (not remembered).
    #[serde(
        default,
        skip_serializing_if = "std::ops::Not::not",
        deserialize_with = "wire::null_as_default"
    )]
    pub thought: bool,
    /// A tool call (not remembered).
    #[serde(
        default,
        alias = "functionCall",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_call: Option<Value>,
    /// A tool result (not remembered).
    #[serde(
        default,
        alias = "functionResponse",
        skip_serializing_if = "Option::is_none"
    )]
    pub function_response: Option<Value>,
    /// Binary data (not remembered).
    #[serde(default, alias = "inlineData", skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<InlineData>,
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
    pub fn function_call(call: Value) -> Self {
        Self {
            function_call: Some(call),
            ..Self::default()
        }
    }

    /// A tool-result part.
    pub fn function_response(response: Value) -> Self {
        Self {
            function_response: Some(response),
            ..Self::default()
        }
    }
}

/// Inline binary data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InlineData {
    /// MIME type.
    #[serde(alias = "mimeType")]
    pub mime_type: String,
    /// Base64 data.
    pub data: String,
}

/// How events arrive: every shape ADK writes, normalised into [`Event`].
mod wire {
    use serde::{Deserialize, Deserializer};

    use super::{Content, Metadata};

    /// `null` reads as the default (ADK writes `null` for absent values).
    pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Default,
    {
        Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
    }

    /// A conversation event, as ADK writes it (snake_case or camelCase;
    /// unknown keys ignored).
    #[derive(Deserialize, schemars::JsonSchema)]
    #[schemars(rename = "Event")]
    pub(super) struct Event {
        /// Event id, unique within its scope (1..=256 bytes).
        id: String,
        /// Who produced it (`user`, an agent name, `tool`...).
        author: String,
        /// When, in milliseconds since the Unix epoch (or `timestamp`).
        #[serde(default, alias = "timestampMs")]
        timestamp_ms: Option<i64>,
        /// ADK: seconds since the Unix epoch, as a float.
        #[serde(default)]
        timestamp: Option<f64>,
        /// A streaming fragment (not remembered).
        #[serde(default, deserialize_with = "null_as_default")]
        partial: bool,
        /// The message.
        #[serde(default)]
        content: Option<Content>,
        /// JSON-safe metadata copied to the entry (ADK: `custom_metadata`).
        #[serde(default, alias = "custom_metadata", alias = "customMetadata")]
        metadata: Option<Metadata>,
    }

    impl TryFrom<Event> for super::Event {
        type Error = String;

        fn try_from(e: Event) -> Result<Self, String> {
            let timestamp_ms = match (e.timestamp_ms, e.timestamp) {
                (Some(ms), _) => ms,
                (None, Some(s)) if s.is_finite() && s.abs() < 1e15 => {
                    #[allow(clippy::cast_possible_truncation)]
                    let ms = (s * 1000.0).round() as i64;
                    ms
                }
                (None, Some(s)) => return Err(format!("timestamp {s} is not a time in seconds")),
                (None, None) => {
                    return Err(
                        "an event needs timestamp_ms (or ADK's timestamp in seconds)".into(),
                    );
                }
            };
            Ok(super::Event {
                id: e.id,
                author: e.author,
                timestamp_ms,
                partial: e.partial,
                content: e.content,
                metadata: e.metadata,
            })
        }
    }
}

impl Event {
    /// A text event, handy for tests and examples.
    pub fn text(
        id: impl Into<String>,
        author: impl Into<String>,
        timestamp_ms: i64,
        text: impl Into<String>,
    ) -> Self {
        let author = author.into();
        Self {
            id: id.into(),
            timestamp_ms,
            partial: false,
            content: Some(Content {
                role: Some(if author == "user" { "user" } else { "model" }.to_owned()),
                parts: vec![Part::text(text)],
            }),
            metadata: None,
            author,
        }
    }

    /// Sets the metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// The text parts joined with `\n` (empty and thought parts dropped).
    pub fn text_content(&self) -> String {
        let Some(content) = &self.content else {
            return String::new();
        };
        let mut out = String::new();
        for t in content
            .parts
            .iter()
            .filter(|p| !p.thought)
            .filter_map(|p| p.text.as_deref())
            .filter(|t| !t.is_empty())
        {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(t);
        }
        out
    }
}

/// Authors whose events are control traffic, not conversation.
pub const CONTROL_AUTHORS: &[&str] = &["runner", "tool", "system"];

/// Why an event did not become an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
#[non_exhaustive]
pub enum SkipReason {
    /// A streaming fragment.
    Partial,
    /// Authored by `runner`, `tool` or `system`.
    ControlAuthor,
    /// No text parts.
    NoText,
    /// The text looks like a credential (the rule `add_entry` rejects with).
    SensitiveContent(SecretKind),
    /// The event breaks a rule of the format.
    Malformed(String),
    /// Its text is over a size limit (the detail names it,
    /// `max_content_bytes`); the same event never fits later.
    TooLarge(String),
    /// Its id was already used in this scope for different data. Event
    /// ids are unique per user, not per session: the same id in another
    /// session of the user is this conflict. The detail says so.
    IdempotencyConflict(String),
    /// The entry it makes was erased (the entry, its session or its user
    /// was deleted): a resubmission never brings it back. To remember it
    /// again on purpose, submit it under a new session id.
    Erased,
}

impl SkipReason {
    /// The reason's name, as `reason` in JSON.
    pub fn code(&self) -> &'static str {
        match self {
            SkipReason::Partial => "partial",
            SkipReason::ControlAuthor => "control_author",
            SkipReason::NoText => "no_text",
            SkipReason::SensitiveContent(_) => "sensitive_content",
            SkipReason::Malformed(_) => "malformed",
            SkipReason::TooLarge(_) => "too_large",
            SkipReason::IdempotencyConflict(_) => "idempotency_conflict",
            SkipReason::Erased => "erased",
        }
    }
}

/// The detail of an event's [`SkipReason::IdempotencyConflict`].
pub const EVENT_ID_CONFLICT: &str = "this event id was already stored for this user from another event (another session, or other content, author or time); event ids are unique per user, not per session: give each event its own id";

/// An event that became (or already was) an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IngestedEvent {
    /// Position in the request.
    pub index: usize,
    /// The event id.
    pub event_id: EventId,
    /// The entry holding it.
    pub entry_id: EntryId,
    /// The secrets redacted from its text before it was stored (ranges in
    /// the text as sent); absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<hippocamp_core::secrets::Redaction>,
}

/// An event that was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkippedEvent {
    /// Position in the request.
    pub index: usize,
    /// The event id, when it was readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Why.
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// What `add_events` did with each event, in request order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IngestReport {
    /// Events stored as new entries.
    pub added: Vec<IngestedEvent>,
    /// Events already stored with the same data (repeats are safe).
    pub duplicates: Vec<IngestedEvent>,
    /// Events not stored, each with its reason.
    pub skipped: Vec<SkippedEvent>,
}

/// An event ready to commit.
#[derive(Debug, Clone)]
pub struct PlannedEntry {
    /// Position in the request.
    pub index: usize,
    /// The event id.
    pub event_id: EventId,
    /// The validated entry.
    pub prepared: PreparedEntry,
}

/// The validated form of an `add_events` request, before any store looks.
#[derive(Debug, Clone, Default)]
pub struct EventPlan {
    /// Entries to commit, in request order (an id may repeat).
    pub entries: Vec<PlannedEntry>,
    /// Events skipped before storage.
    pub skipped: Vec<SkippedEvent>,
}

/// The analysed terms of a plan's entries, by request position (one
/// analysis per entry, taken once at commit).
#[derive(Debug, Clone, Default)]
pub struct PlanTerms(Vec<Option<TermFreqs>>);

impl PlanTerms {
    /// The terms of the entry at request position `index` (empty when
    /// there is none or they were taken).
    pub fn take(&mut self, index: usize) -> TermFreqs {
        self.0
            .get_mut(index)
            .and_then(Option::take)
            .unwrap_or_default()
    }
}

/// What a store already holds under a planned entry's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: commit it.
    New,
    /// The same data: a duplicate.
    Duplicate,
    /// Different data: an idempotency conflict.
    Conflict,
    /// It was stored and erased: it stays erased.
    Erased,
}

impl EventPlan {
    /// Analyses every planned entry's content.
    pub fn analyze(&self, analyzer: &Analyzer) -> PlanTerms {
        let len = self.entries.last().map_or(0, |p| p.index + 1);
        let mut terms = vec![None; len];
        for p in &self.entries {
            terms[p.index] = Some(analyzer.analyze(&p.prepared.entry.content));
        }
        PlanTerms(terms)
    }

    /// The request positions of the entries that would be committed
    /// against a store that holds what `decide` says (the first occurrence
    /// of each id that the store does not hold): the passages worth
    /// embedding. Agrees with [`resolve`](Self::resolve) for the same
    /// `decide`.
    pub fn new_indices(&self, mut decide: impl FnMut(&PreparedEntry) -> Decision) -> Vec<usize> {
        let mut seen = std::collections::HashSet::new();
        self.entries
            .iter()
            .filter(|p| seen.insert(p.prepared.entry.id))
            .filter(|p| decide(&p.prepared) == Decision::New)
            .map(|p| p.index)
            .collect()
    }

    /// Splits the plan into the entries to commit and the report, given
    /// what the store holds under an id (`decide`). Events are taken in
    /// order, each against the store as the earlier events of the batch
    /// would leave it: a repeat of an event added by this batch is a
    /// duplicate (same data) or a conflict (different data). The report's
    /// `added` holds only if the caller commits every returned entry.
    pub fn resolve(
        self,
        mut decide: impl FnMut(&PreparedEntry) -> Decision,
    ) -> (Vec<PlannedEntry>, IngestReport) {
        let mut report = IngestReport {
            skipped: self.skipped,
            ..IngestReport::default()
        };
        let mut new: Vec<PlannedEntry> = Vec::new();
        let mut added: foldhash::HashMap<EntryId, usize> =
            foldhash::HashMap::with_capacity_and_hasher(
                self.entries.len(),
                foldhash::fast::RandomState::default(),
            );
        for p in self.entries {
            let id = p.prepared.entry.id;
            let decision = match added.get(&id) {
                Some(&i) if new[i].prepared.entry.same_data(&p.prepared.entry) => {
                    Decision::Duplicate
                }
                Some(_) => Decision::Conflict,
                None => decide(&p.prepared),
            };
            let done = IngestedEvent {
                index: p.index,
                event_id: p.event_id.clone(),
                entry_id: id,
                redacted: p.prepared.redacted.clone(),
            };
            match decision {
                Decision::New => {
                    report.added.push(done);
                    added.insert(id, new.len());
                    new.push(p);
                }
                Decision::Duplicate => report.duplicates.push(done),
                Decision::Conflict => report.skipped.push(skip(
                    p.index,
                    Some(p.event_id.as_str()),
                    SkipReason::IdempotencyConflict(EVENT_ID_CONFLICT.to_owned()),
                )),
                Decision::Erased => report.skipped.push(skip(
                    p.index,
                    Some(p.event_id.as_str()),
                    SkipReason::Erased,
                )),
            }
        }
        report.skipped.sort_by_key(|e| e.index);
        (new, report)
    }
}

fn skip(index: usize, id: Option<&str>, reason: SkipReason) -> SkippedEvent {
    SkippedEvent {
        index,
        event_id: id.map(str::to_owned),
        reason,
    }
}

/// Validates the request shape and turns each event into an entry or a
/// skip reason. The caller has validated the scope and session id.
pub fn plan_events(
    scope: &MemoryScope,
    session: &SessionId,
    events: &[Event],
    limits: &MemoryLimits,
) -> hippocamp_core::Result<EventPlan> {
    check_event_count(events.len(), limits)?;
    Ok(plan_from(scope, session, events, 0, limits))
}

/// The bound on events per request.
fn check_event_count(count: usize, limits: &MemoryLimits) -> hippocamp_core::Result<()> {
    let max = hippocamp_core::limits::to_usize(limits.max_events_per_request);
    if count > max {
        return Err(Error::invalid(
            hippocamp_core::Field::Events,
            hippocamp_core::Problem::TooMany { count, max },
        ));
    }
    Ok(())
}

/// Batches of at least this many events are prepared on two threads by
/// [`prepare_events`].
pub const PARALLEL_FROM: usize = 256;

/// [`plan_events`] and [`EventPlan::analyze`] at once. A batch of at
/// least [`PARALLEL_FROM`] events is prepared in two halves at the same
/// time on rayon's pool (whose threads keep their analysis memos warm):
/// preparation is most of a large batch's cost on the caller's path, and
/// a store that applies its writes on a thread of its own (the durable
/// one) has the caller waiting on nothing else. The result is the one
/// [`plan_events`] and [`EventPlan::analyze`] give (tested).
pub fn prepare_events(
    scope: &MemoryScope,
    session: &SessionId,
    events: &[Event],
    limits: &MemoryLimits,
    analyzer: &Analyzer,
) -> hippocamp_core::Result<(EventPlan, PlanTerms)> {
    if events.len() < PARALLEL_FROM {
        let plan = plan_events(scope, session, events, limits)?;
        let terms = plan.analyze(analyzer);
        return Ok((plan, terms));
    }
    check_event_count(events.len(), limits)?;
    let mid = events.len() / 2;
    let half = |events: &[Event], offset: usize| {
        let plan = plan_from(scope, session, events, offset, limits);
        let terms = plan.analyze(analyzer);
        (plan, terms)
    };
    let ((mut plan, mut terms), (rest, rest_terms)) =
        rayon::join(|| half(&events[..mid], 0), || half(&events[mid..], mid));
    plan.entries.extend(rest.entries);
    plan.skipped.extend(rest.skipped);
    terms.0.resize(mid, None);
    terms.0.extend(rest_terms.0.into_iter().skip(mid));
    Ok((plan, terms))
}

/// Plans `events`, the first of which is at request position `offset`.
fn plan_from(
    scope: &MemoryScope,
    session: &SessionId,
    events: &[Event],
    offset: usize,
    limits: &MemoryLimits,
) -> EventPlan {
    let mut plan = EventPlan::default();
    plan.entries.reserve(events.len());
    for (i, event) in events.iter().enumerate() {
        let index = offset + i;
        match plan_one(scope, session, event, limits) {
            Err(s) => plan.skipped.push(skip(index, Some(&event.id), s)),
            Ok((event_id, prepared)) => plan.entries.push(PlannedEntry {
                index,
                event_id,
                prepared,
            }),
        }
    }
    plan
}

fn plan_one(
    scope: &MemoryScope,
    session: &SessionId,
    event: &Event,
    limits: &MemoryLimits,
) -> Result<(EventId, PreparedEntry), SkipReason> {
    let malformed = |e: Error| SkipReason::Malformed(e.to_string());
    let event_id = EventId::new(event.id.as_str()).map_err(malformed)?;
    let author = Author::new(event.author.as_str()).map_err(malformed)?;
    let timestamp_ms = u64::try_from(event.timestamp_ms).map_err(|_| {
        SkipReason::Malformed(format!(
            "invalid timestamp_ms: {} is negative",
            event.timestamp_ms
        ))
    })?;
    if event.partial {
        return Err(SkipReason::Partial);
    }
    if CONTROL_AUTHORS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(author.as_str()))
    {
        return Err(SkipReason::ControlAuthor);
    }
    let text = event.text_content();
    if text.trim().is_empty() {
        return Err(SkipReason::NoText);
    }
    let key = event_key(&event_id).map_err(malformed)?;
    let input = NewEntry {
        content: text,
        metadata: event.metadata.clone().unwrap_or_default(),
        provenance: Provenance {
            session_id: Some(session.clone()),
            event_ids: vec![event_id.clone()],
            author: Some(author),
            timestamp_ms: Some(timestamp_ms),
        },
        idempotency_key: Some(key),
        ..NewEntry::default()
    };
    match prepare_entry(scope, input, limits) {
        Ok(p) => Ok((event_id, p)),
        Err(Error::SensitiveContent(kind)) => Err(SkipReason::SensitiveContent(kind)),
        Err(Error::TooLarge { limit, .. }) => Err(SkipReason::TooLarge(limit.to_owned())),
        Err(e) => Err(malformed(e)),
    }
}

/// Parses events given as JSON values (HTTP bodies, JSON lines), keeping
/// the position of each: a value that is not a valid event is reported as
/// a malformed skip at its index instead of failing the whole request.
pub fn parse_events(values: Vec<Value>) -> (Vec<Event>, Vec<usize>, Vec<SkippedEvent>) {
    let mut events = Vec::with_capacity(values.len());
    let mut positions = Vec::with_capacity(values.len());
    let mut skipped = Vec::new();
    for (index, v) in values.into_iter().enumerate() {
        let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
        match serde_json::from_value::<Event>(v) {
            Ok(e) => {
                events.push(e);
                positions.push(index);
            }
            Err(e) => skipped.push(SkippedEvent {
                index,
                event_id: id,
                reason: SkipReason::Malformed(format!("not a valid event: {e}")),
            }),
        }
    }
    (events, positions, skipped)
}

/// Maps a report over parsed events back to the positions of the original
/// values and merges in the parse failures.
pub fn merge_report(
    mut report: IngestReport,
    positions: &[usize],
    parse_skipped: Vec<SkippedEvent>,
) -> IngestReport {
    let pos = |i: usize| positions.get(i).copied().unwrap_or(i);
    for e in report.added.iter_mut().chain(report.duplicates.iter_mut()) {
        e.index = pos(e.index);
    }
    for s in &mut report.skipped {
        s.index = pos(s.index);
    }
    report.skipped.extend(parse_skipped);
    report.skipped.sort_by_key(|s| s.index);
    report
}

/// The idempotency key of the entry an event becomes: one per event id
/// within a user, whatever its session.
pub fn event_key(event_id: &hippocamp_core::EventId) -> hippocamp_core::Result<IdempotencyKey> {
    IdempotencyKey::new(format!("event:{}", event_id.as_str()))
}

/// The id of the entry an event becomes in `scope` (erasing it erases
/// what the event was remembered as, and makes a re-sent event `erased`).
pub fn event_entry_id(
    scope: &hippocamp_core::MemoryScope,
    event_id: &hippocamp_core::EventId,
) -> hippocamp_core::Result<hippocamp_core::EntryId> {
    Ok(hippocamp_core::EntryId::derive(
        scope,
        &event_key(event_id)?,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scope() -> MemoryScope {
        MemoryScope::parse("app", "u").unwrap()
    }

    fn session() -> SessionId {
        SessionId::new("s1").unwrap()
    }

    #[test]
    fn format_round_trips() {
        let v = json!({
            "id": "e1", "author": "user", "timestamp_ms": 5,
            "content": {"role": "user", "parts": [
                {"text": "hello"},
                {"function_call": {"name": "f"}},
                {"inline_data": {"mime_type": "image/png", "data": "AAAA"}},
                {"text": "world"}
            ]},
            "metadata": {"k": 1},
            "invocation_id": "ignored"
        });
        let e: Event = serde_json::from_value(v).unwrap();
        assert_eq!(e.text_content(), "hello\nworld");
        assert!(!e.partial);
    }

    /// The google-adk 2.13 exports of one session, in both casings
    /// (`tests/fixtures/adk`).
    const ADK: [&str; 2] = [
        include_str!("../../../tests/fixtures/adk/events-snake.jsonl"),
        include_str!("../../../tests/fixtures/adk/events-camel.jsonl"),
    ];

    #[test]
    fn real_adk_exports_read_as_they_are_in_both_casings() {
        let mut planned: Vec<Vec<(String, String, u64)>> = Vec::new();
        for file in ADK {
            let values: Vec<Value> = file
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            let (events, _, malformed) = parse_events(values);
            assert!(malformed.is_empty(), "{malformed:?}");
            assert_eq!(events.len(), 11);
            assert_eq!(events[0].timestamp_ms, 1_773_392_400_123);
            assert!(events[8].partial);
            let plan =
                plan_events(&scope(), &session(), &events, &MemoryLimits::default()).unwrap();
            let (new, report) = plan.resolve(|_| Decision::New);
            assert_eq!(
                report.added.iter().map(|e| e.index).collect::<Vec<_>>(),
                vec![0, 1, 4, 5, 7, 10]
            );
            let reasons: Vec<(usize, &SkipReason)> = report
                .skipped
                .iter()
                .map(|s| (s.index, &s.reason))
                .collect();
            assert_eq!(
                reasons,
                vec![
                    (2, &SkipReason::NoText),
                    (3, &SkipReason::NoText),
                    (6, &SkipReason::NoText),
                    (8, &SkipReason::Partial),
                    (9, &SkipReason::NoText),
                ]
            );
            planned.push(
                new.iter()
                    .map(|p| {
                        let e = &p.prepared.entry;
                        (e.id.to_string(), e.content.clone(), e.timestamp_ms)
                    })
                    .collect(),
            );
        }
        // Both casings are the same events: the same entries.
        assert_eq!(planned[0], planned[1]);
        let contents: Vec<&str> = planned[0].iter().map(|(_, c, _)| c.as_str()).collect();
        assert!(contents[2].starts_with("I found two direct flights on Friday:\n1. TAP"));
        assert_eq!(
            contents[4],
            "The cheaper one is TAP TP561 at 07:05 for €89. Booking it now."
        );
    }

    #[test]
    fn a_timestamp_is_needed_and_must_be_a_time() {
        let (events, _, bad) = parse_events(vec![
            json!({"id": "a", "author": "user"}),
            json!({"id": "b", "author": "user", "timestamp": 1.5}),
            json!({"id": "c", "author": "user", "timestamp": 1e300}),
            json!({"id": "d", "author": "user", "timestampMs": 7, "partial": null,
                   "content": {"role": null, "parts": null}}),
        ]);
        assert_eq!(
            events
                .iter()
                .map(|e| (e.id.as_str(), e.timestamp_ms))
                .collect::<Vec<_>>(),
            vec![("b", 1_500), ("d", 7)]
        );
        assert_eq!(bad.iter().map(|s| s.index).collect::<Vec<_>>(), vec![0, 2]);
        assert!(matches!(&bad[0].reason, SkipReason::Malformed(m) if m.contains("timestamp")));
    }

    #[test]
    fn skip_rules_and_reasons() {
        let mut partial = Event::text("p", "user", 1, "partial words");
        partial.partial = true;
        let mut no_text = Event::text("n", "agent", 1, "");
        no_text.content = Some(Content {
            role: Some("model".into()),
            parts: vec![Part::function_call(json!({"name": "f"}))],
        });
        let events = vec![
            Event::text("e1", "user", 1, "I like tea"),
            partial,
            Event::text("r", "runner", 1, "control"),
            Event::text("t", "Tool", 1, "tool output"),
            no_text,
            // A secret in an identifier cannot be redacted: skipped.
            Event::text("api_key=abcdefgh", "user", 1, "fine words"),
            Event::text("", "user", 1, "no id"),
            Event::text("neg", "user", -5, "negative time"),
            Event::text("big", "user", 1, "x".repeat(70_000)),
            Event::text("e1", "user", 1, "I like tea"),
            Event::text("e1", "user", 1, "I like coffee"),
            // A secret in the text is redacted: kept.
            Event::text("pw", "user", 1, "password=hunter2"),
        ];
        let plan = plan_events(&scope(), &session(), &events, &MemoryLimits::default()).unwrap();
        assert_eq!(plan.entries.len(), 4);
        let e = plan.entries[0].prepared.entry.clone();
        let (new, report) = plan.resolve(|_| Decision::New);
        assert_eq!(new.len(), 2);
        assert_eq!(new[1].prepared.entry.content, "password=[REDACTED]");
        assert_eq!(report.added[1].index, 11);
        assert_eq!(report.added[1].redacted.len(), 1);
        assert_eq!(report.duplicates.len(), 1);
        assert_eq!(report.duplicates[0].index, 9);
        let reasons: Vec<(usize, &SkipReason)> = report
            .skipped
            .iter()
            .map(|s| (s.index, &s.reason))
            .collect();
        assert_eq!(reasons[0], (1, &SkipReason::Partial));
        assert_eq!(reasons[1], (2, &SkipReason::ControlAuthor));
        assert_eq!(reasons[2], (3, &SkipReason::ControlAuthor));
        assert_eq!(reasons[3], (4, &SkipReason::NoText));
        assert_eq!(
            reasons[4],
            (
                5,
                &SkipReason::SensitiveContent(SecretKind::CredentialAssignment)
            )
        );
        assert!(matches!(reasons[5], (6, SkipReason::Malformed(_))));
        assert!(matches!(reasons[6], (7, SkipReason::Malformed(_))));
        assert_eq!(
            reasons[7],
            (8, &SkipReason::TooLarge("max_content_bytes".into()))
        );
        assert!(
            matches!(reasons[8], (10, SkipReason::IdempotencyConflict(d)) if d.contains("unique per user")),
            "{reasons:?}"
        );
        assert_eq!(e.provenance.session_id, Some(session()));
        assert_eq!(e.timestamp_ms, 1);
        assert_eq!(
            e.id,
            EntryId::derive(&scope(), &IdempotencyKey::new("event:e1").unwrap())
        );
    }

    #[test]
    fn each_event_meets_the_store_as_earlier_events_left_it() {
        let events = vec![
            Event::text("a", "user", 1, "alpha changed"),
            Event::text("a", "user", 1, "alpha"),
            Event::text("a", "user", 1, "alpha"),
            Event::text("b", "user", 1, "beta"),
            Event::text("b", "user", 1, "beta"),
            Event::text("b", "user", 1, "beta changed"),
        ];
        let plan = plan_events(&scope(), &session(), &events, &MemoryLimits::default()).unwrap();
        // The store holds "alpha" under a; b is new.
        let (new, r) = plan.resolve(|p| {
            if p.entry.content == "alpha" {
                Decision::Duplicate
            } else if p.entry.content.starts_with("alpha") {
                Decision::Conflict
            } else {
                Decision::New
            }
        });
        assert_eq!(new.len(), 1);
        assert_eq!(r.added.iter().map(|e| e.index).collect::<Vec<_>>(), vec![3]);
        assert_eq!(
            r.duplicates.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
        assert_eq!(
            r.skipped.iter().map(|e| e.index).collect::<Vec<_>>(),
            vec![0, 5]
        );
    }

    #[test]
    fn too_many_events_is_an_error() {
        let limits = MemoryLimits {
            max_events_per_request: 2,
            ..MemoryLimits::default()
        };
        let events = vec![Event::text("a", "user", 1, "x"); 3];
        assert!(plan_events(&scope(), &session(), &events, &limits).is_err());
    }

    #[test]
    fn two_halves_prepare_what_one_pass_does() {
        let mut events: Vec<Event> = (0..(PARALLEL_FROM + 9))
            .map(|i| {
                Event::text(
                    format!("e{}", i % 300),
                    if i % 7 == 3 { "tool" } else { "user" },
                    i64::try_from(i).unwrap(),
                    if i % 11 == 5 {
                        String::new()
                    } else {
                        format!("turn {i}: dogs chase cats {}", i % 13)
                    },
                )
            })
            .collect();
        events[17].partial = true;
        let analyzer = Analyzer::english();
        let limits = MemoryLimits::default();
        for n in [0, 3, PARALLEL_FROM - 1, PARALLEL_FROM, events.len()] {
            let events = &events[..n];
            let (plan, mut terms) =
                prepare_events(&scope(), &session(), events, &limits, &analyzer).unwrap();
            let one = plan_events(&scope(), &session(), events, &limits).unwrap();
            let mut one_terms = one.analyze(&analyzer);
            let key = |p: &EventPlan| {
                (
                    p.entries
                        .iter()
                        .map(|e| (e.index, e.event_id.clone(), e.prepared.entry.id))
                        .collect::<Vec<_>>(),
                    p.skipped
                        .iter()
                        .map(|s| (s.index, s.event_id.clone(), format!("{:?}", s.reason)))
                        .collect::<Vec<_>>(),
                )
            };
            assert_eq!(key(&plan), key(&one), "{n} events");
            for i in 0..n {
                assert_eq!(terms.take(i), one_terms.take(i), "event {i} of {n}");
            }
        }
        let limits = MemoryLimits {
            max_events_per_request: 200,
            ..MemoryLimits::default()
        };
        let err = prepare_events(&scope(), &session(), &events, &limits, &analyzer);
        assert!(err.is_err());
    }

    #[test]
    fn parse_keeps_positions() {
        let (events, positions, skipped) = parse_events(vec![
            json!({"id": "a", "author": "user", "timestamp_ms": 1}),
            json!({"id": "b", "author": 5}),
            json!({"id": "c", "author": "user", "timestamp_ms": 2}),
        ]);
        assert_eq!(events.len(), 2);
        assert_eq!(positions, vec![0, 2]);
        assert_eq!(skipped[0].index, 1);
        assert_eq!(skipped[0].event_id.as_deref(), Some("b"));
        let report = IngestReport {
            skipped: vec![skip(1, Some("c"), SkipReason::NoText)],
            ..IngestReport::default()
        };
        let merged = merge_report(report, &positions, skipped);
        assert_eq!(
            merged.skipped.iter().map(|s| s.index).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }
}
