//! What the outbox stores and answers: targets, job ids, states, the
//! sanitised events a job carries, and the content-free status of a job.
//!
//! # Job identity
//!
//! A job's id is the first 16 bytes of SHA-256 over, in order: the bytes
//! `hippocamp-outbox-job` and a NUL; the target name, the app, the user and
//! the session, each as a 4-byte big-endian length and its UTF-8 bytes;
//! the number of events as 8 bytes big-endian; each event id (in the job's
//! order) as a length and its bytes; the erasure epoch as 8 bytes
//! big-endian. It is written `job-` and 32 lowercase hex characters. The
//! same events of the same session at the same epoch are the same job; the
//! same events after an erasure are a new one.

use std::fmt;
use std::str::FromStr;

use hippocamp_core::{
    Author, Error, EventId, Field, MemoryScope, Metadata, Problem, Result, SessionId,
};
use hippocamp_memory::Event;
use hippocamp_memory::event::SkippedEvent;
use hippocamp_memory::event::{Content, Part};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The longest target name, in bytes.
pub const MAX_TARGET_BYTES: usize = 64;

/// The stable name of a memory store jobs are delivered to (a configured
/// name, never a handle): 1..=64 bytes of ASCII letters, digits, `.`, `_`
/// and `-`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TargetName(String);

impl TargetName {
    /// Validates `name`.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let ok = !name.is_empty()
            && name.len() <= MAX_TARGET_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(Error::invalid(
                Field::Target,
                Problem::Malformed(format!(
                    "a target is 1..={MAX_TARGET_BYTES} ASCII letters, digits, `.`, `_` or `-`"
                )),
            ));
        }
        Ok(Self(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TargetName {
    type Error = Error;
    fn try_from(value: String) -> Result<Self> {
        Self::new(value)
    }
}

impl From<TargetName> for String {
    fn from(value: TargetName) -> String {
        value.0
    }
}

impl fmt::Display for TargetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TargetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TargetName({:?})", self.0)
    }
}

impl schemars::JsonSchema for TargetName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TargetName".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[A-Za-z0-9._-]{1,64}$",
        })
    }
}

const JOB_PREFIX: &str = "job-";

/// A job's id (see the module docs for how it is derived).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId([u8; 16]);

impl JobId {
    /// The id of the job of `events` (their ids, in order) for `target`,
    /// `scope` and `session` at erasure epochs `epoch` (the scope's) and
    /// `session_epoch` (the session's; hashed only when not 0, so ids
    /// derived before session epochs existed stay the same).
    pub fn derive<'a>(
        target: &TargetName,
        scope: &MemoryScope,
        session: &SessionId,
        events: impl ExactSizeIterator<Item = &'a str>,
        epoch: u64,
        session_epoch: u64,
    ) -> Self {
        let mut h = Sha256::new();
        h.update(b"hippocamp-outbox-job\0");
        let mut field = |b: &[u8]| {
            h.update(u32::try_from(b.len()).unwrap_or(u32::MAX).to_be_bytes());
            h.update(b);
        };
        field(target.as_str().as_bytes());
        field(scope.app().as_str().as_bytes());
        field(scope.user().as_str().as_bytes());
        field(session.as_str().as_bytes());
        h.update((events.len() as u64).to_be_bytes());
        for id in events {
            h.update(u32::try_from(id.len()).unwrap_or(u32::MAX).to_be_bytes());
            h.update(id.as_bytes());
        }
        h.update(epoch.to_be_bytes());
        if session_epoch > 0 {
            h.update(session_epoch.to_be_bytes());
        }
        let d = h.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&d[..16]);
        Self(out)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// From raw bytes (as stored).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

impl FromStr for JobId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                Field::JobId,
                Problem::Malformed(
                    "expected `job-` followed by 32 lowercase hex characters".into(),
                ),
            )
        };
        let hex_part = s.strip_prefix(JOB_PREFIX).ok_or_else(bad)?;
        if hex_part.len() != 32 || hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(hex_part, &mut bytes).map_err(|_| bad())?;
        Ok(Self(bytes))
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(JOB_PREFIX)?;
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({self})")
    }
}

impl Serialize for JobId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for JobId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for JobId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JobId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^job-[0-9a-f]{32}$"})
    }
}

/// The random token a claim takes: every later step of the claim must
/// present it. Never shown in a status.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner([u8; 16]);

impl Owner {
    /// A fresh, unguessable token.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// Its bytes, for a store that keeps claims outside the process (a
    /// database shared by several servers); never shown.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// A token such a store read back.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A token is a credential of its claim: never printed.
        f.write_str("Owner(..)")
    }
}

/// Where a job is in its life.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its due time (first delivery, or a retry after backoff).
    Pending,
    /// Claimed by a worker, under a lease.
    Running,
    /// Every batch was delivered.
    Succeeded,
    /// It ran out of attempts.
    Failed,
    /// Cancelled by a caller or by an erasure; it starts no further call
    /// (one already in flight may land).
    Cancelled,
}

impl JobState {
    /// Whether it has ended (its event payload is gone).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

/// Why a job was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// A caller asked.
    Requested,
    /// Its session or user was erased (or its scope's erasure epoch moved
    /// past the job's): what it held must never be written.
    Erased,
}

impl CancelReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::Requested => "requested",
            CancelReason::Erased => "erased",
        }
    }
}

/// The last failure of a job: the error's code and a bounded message,
/// never event content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobError {
    /// The error code (`timeout`, `unavailable`...).
    pub code: String,
    /// What happened, at most 256 bytes.
    pub message: String,
}

/// The longest message a [`JobError`] keeps.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 256;

impl JobError {
    /// From an error: its code and its message, cut to
    /// [`MAX_ERROR_MESSAGE_BYTES`] (errors name fields, limits and stages,
    /// not content).
    pub fn of(e: &Error) -> Self {
        let mut message = e.to_string();
        if message.len() > MAX_ERROR_MESSAGE_BYTES {
            let mut cut = MAX_ERROR_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Self {
            code: e.code().to_owned(),
            message,
        }
    }
}

/// An event as a job keeps it: exactly what becomes the entry (the text,
/// redacted metadata, author and time), nothing else of the original.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// The event id.
    pub id: String,
    /// Its author.
    pub author: String,
    /// Its time, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The text the entry will hold.
    pub text: String,
    /// The redacted metadata, as JSON text (none when empty).
    pub metadata: Option<String>,
}

impl StoredEvent {
    /// The event that plans into the same entry.
    pub fn to_event(&self) -> Event {
        let metadata: Option<Metadata> = self
            .metadata
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok());
        Event {
            id: self.id.clone(),
            author: self.author.clone(),
            timestamp_ms: i64::try_from(self.timestamp_ms).unwrap_or(i64::MAX),
            partial: false,
            content: Some(Content {
                role: None,
                parts: vec![Part::text(self.text.clone())],
            }),
            metadata,
        }
    }

    /// Bytes it counts for quotas: its text, metadata and ids.
    pub fn bytes(&self) -> u64 {
        (self.id.len()
            + self.author.len()
            + self.text.len()
            + self.metadata.as_ref().map_or(0, String::len)
            + 8) as u64
    }

    /// From an event that planned into `entry` (the entry's content and
    /// redacted metadata).
    pub fn of_entry(event_id: &EventId, entry: &hippocamp_memory::MemoryEntry) -> Option<Self> {
        let author: &Author = entry.provenance.author.as_ref()?;
        Some(Self {
            id: event_id.as_str().to_owned(),
            author: author.as_str().to_owned(),
            timestamp_ms: entry.provenance.timestamp_ms?,
            text: entry.content.clone(),
            metadata: (!entry.metadata.is_empty())
                .then(|| serde_json::to_string(&entry.metadata).unwrap_or_default()),
        })
    }
}

/// What a caller asks the job store to queue: already sanitised events of
/// one session, captured at the scope's current erasure epoch.
#[derive(Debug, Clone)]
pub struct Submission {
    /// Where the jobs deliver.
    pub target: TargetName,
    /// The exact scope.
    pub scope: MemoryScope,
    /// The session.
    pub session: SessionId,
    /// The scope's erasure epoch when the events were admitted.
    pub epoch: u64,
    /// The session's erasure epoch when the events were admitted.
    pub session_epoch: u64,
    /// The events, in session order (repeated ids keep their first).
    pub events: Vec<StoredEvent>,
    /// Attempts before a job fails (default: the store's).
    pub max_attempts: Option<u32>,
}

/// A job, as a reply names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobRef {
    /// Its id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
}

/// What an admission did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The jobs holding the submission's events: new ones first, then
    /// existing ones that already held some of them.
    pub jobs: Vec<JobRef>,
    /// Events that became new work (not already admitted for the session).
    pub new_events: u64,
}

/// Totals of what a job's delivered batches did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Delivered {
    /// Events stored as new entries.
    pub added: u64,
    /// Events the store already held.
    pub duplicates: u64,
    /// Events the store skipped (erased entries among them).
    pub skipped: u64,
    /// The skipped events of one batch, their `index` counted in the
    /// job's events: carried to the job's [`Skips`], never stored here
    /// (a job row's encoding stays as it was).
    #[serde(skip)]
    #[schemars(skip)]
    pub skipped_events: Vec<SkippedEvent>,
}

/// What a job's deliveries skipped, content-free: every skipped event
/// counted by reason, and the first `outbox.max_skipped_details` of them
/// with their position and reason. Not their ids: a finished job's status
/// outlives an erasure of its user until it is pruned, so it keeps no
/// identifier the user chose beyond the session it already names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skips {
    /// Skipped events per reason (`erased`, `idempotency_conflict`,
    /// `too_large`, `malformed`, ...).
    pub by_reason: std::collections::BTreeMap<String, u64>,
    /// The first skipped events, `index` counted in the job's events.
    pub events: Vec<SkippedEvent>,
}

impl Skips {
    /// Whether nothing was skipped.
    pub fn is_empty(&self) -> bool {
        self.by_reason.is_empty()
    }

    /// Counts `skipped` and keeps their details up to `max` in all.
    pub fn add(&mut self, skipped: &[SkippedEvent], max: usize) {
        for s in skipped {
            *self
                .by_reason
                .entry(s.reason.code().to_owned())
                .or_default() += 1;
            if self.events.len() < max {
                self.events.push(SkippedEvent {
                    index: s.index,
                    event_id: None,
                    reason: s.reason.clone(),
                });
            }
        }
    }
}

/// A delivered batch to record, for
/// [`JobStore::complete_batches`](crate::JobStore::complete_batches).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    /// The job.
    pub job: JobId,
    /// The claim's token.
    pub owner: Owner,
    /// The batch delivered.
    pub batch: u32,
    /// What the store made of it.
    pub delivered: Delivered,
}

/// The content-free status of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct JobStatus {
    /// Its id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
    /// The session.
    pub session: SessionId,
    /// The store it delivers to.
    pub target: TargetName,
    /// The erasure epoch it was admitted under.
    pub epoch: u64,
    /// Delivery attempts so far (an attempt cut short by a restart of the
    /// embedded store is not counted).
    pub attempts: u32,
    /// Attempts before it fails.
    pub max_attempts: u32,
    /// Events it holds.
    pub events: u64,
    /// Events of its delivered batches.
    pub delivered_events: u64,
    /// Batches (of at most 500 events).
    pub batches: u32,
    /// Batches delivered.
    pub delivered_batches: u32,
    /// What the delivered batches did.
    pub result: Delivered,
    /// When it was admitted, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
    /// Why it was cancelled, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<CancelReason>,
    /// Its last failure, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<JobError>,
    /// What its deliveries skipped, by reason and (the first few) one by
    /// one: an asynchronous ingestion never drops an event silently.
    #[serde(default, skip_serializing_if = "Skips::is_empty")]
    pub skips: Skips,
}

/// One batch of a claimed job, ready to deliver.
#[derive(Debug, Clone)]
pub struct WorkItem {
    /// The job.
    pub job: JobId,
    /// The claim's token.
    pub owner: Owner,
    /// Where it delivers.
    pub target: TargetName,
    /// The scope.
    pub scope: MemoryScope,
    /// The session.
    pub session: SessionId,
    /// The erasure epoch it was admitted under (the write's fence).
    pub epoch: u64,
    /// The session's erasure epoch it was admitted under (the write's
    /// other fence).
    pub session_epoch: u64,
    /// This batch's position (0-based).
    pub batch: u32,
    /// The job's number of batches.
    pub batches: u32,
    /// This batch's events.
    pub events: Vec<StoredEvent>,
    /// This attempt (1-based).
    pub attempt: u32,
}

/// What completing a batch left to do.
#[derive(Debug, Clone)]
pub enum Next {
    /// The next batch, still under the same claim (its lease renewed).
    Batch(WorkItem),
    /// The job succeeded.
    Done,
}

/// Counters of the outbox, kept with every change (reading them is O(1)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutboxStats {
    /// Jobs waiting (including retries in backoff).
    pub pending: u64,
    /// Jobs under a lease now.
    pub running: u64,
    /// Jobs that succeeded and are still kept.
    pub succeeded: u64,
    /// Jobs that failed and are still kept.
    pub failed: u64,
    /// Jobs that were cancelled and are still kept.
    pub cancelled: u64,
    /// Event bytes of the active jobs.
    pub active_bytes: u64,
    /// Jobs ever admitted.
    pub admitted_total: u64,
    /// Events ever delivered.
    pub delivered_events_total: u64,
    /// Attempts that failed and were retried.
    pub retried_total: u64,
    /// Jobs that ran out of attempts.
    pub failed_total: u64,
    /// Jobs cancelled by a caller.
    pub cancelled_requested_total: u64,
    /// Jobs cancelled by an erasure.
    pub cancelled_erased_total: u64,
    /// Terminal jobs pruned.
    pub pruned_total: u64,
    /// Age of the oldest due job that is not running, milliseconds (0 when
    /// none is due).
    pub oldest_due_age_ms: u64,
}

/// What a prune pass removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Pruned {
    /// Terminal jobs removed.
    pub pruned: u64,
    /// Whether older terminal jobs remain past the retention (another pass
    /// would remove more).
    pub more: bool,
}

/// What a job store offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutboxCapabilities {
    /// The backend (`memory`, `redb`).
    pub backend: String,
    /// Whether an acknowledged admission survives a restart.
    pub durable: bool,
    /// `at_least_once`: a batch may be delivered again (the memory store's
    /// event ids make a repeat a duplicate).
    pub delivery: String,
    /// How a claim is fenced: `lease_owner_token`.
    pub claim_fencing: String,
    /// How erasure fences delivery: `erasure_epoch`.
    pub erasure_fencing: String,
    /// Events per delivered batch.
    pub batch_events: u64,
    /// Every limit with its value, default and range.
    pub limits: Vec<hippocamp_core::LimitInfo>,
}

/// Events per delivered batch.
pub const BATCH_EVENTS: usize = 500;

/// Bounded exponential backoff with jitter: the delay before attempt
/// `attempt + 1` after `attempt` failed ones is
/// `min(max, base * 2^(attempt - 1))`, less up to a quarter of it at
/// random (so retries of many jobs spread out), never below `base / 2`.
pub fn backoff_ms(attempt: u32, base: u64, max: u64) -> u64 {
    let exp = attempt.saturating_sub(1).min(40);
    let full = base.saturating_mul(1u64 << exp).min(max).max(1);
    let jitter = rand::random_range(0..=full / 4);
    (full - jitter).max((base / 2).max(1)).min(max.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> MemoryScope {
        MemoryScope::parse("app", "u").unwrap()
    }

    /// The id of `["e1", "e2"]` in session `s` of `app`/`u` for target
    /// `memory` at epoch 0, as builds before session epochs derived it.
    const JOB_ID_BEFORE_SESSION_EPOCHS: &str = "job-c3108f4e4d60c51613bbb6597342b2a8";

    #[test]
    fn job_ids_are_canonical_and_epoch_dependent() {
        let t = TargetName::new("memory").unwrap();
        let s = SessionId::new("s").unwrap();
        let a = JobId::derive(&t, &scope(), &s, ["e1", "e2"].into_iter(), 0, 0);
        assert_eq!(
            a,
            JobId::derive(&t, &scope(), &s, ["e1", "e2"].into_iter(), 0, 0)
        );
        assert_ne!(
            a,
            JobId::derive(&t, &scope(), &s, ["e1", "e2"].into_iter(), 1, 0)
        );
        let after_session_erasure = JobId::derive(&t, &scope(), &s, ["e1", "e2"].into_iter(), 0, 1);
        assert_ne!(a, after_session_erasure);
        // Ids derived before session epochs existed (no epoch hashed):
        // this one was computed by that code.
        assert_eq!(a.to_string(), JOB_ID_BEFORE_SESSION_EPOCHS);
        assert_ne!(
            a,
            JobId::derive(&t, &scope(), &s, ["e2", "e1"].into_iter(), 0, 0)
        );
        // Lengths prefix every field: no two splits of the same bytes meet.
        assert_ne!(
            JobId::derive(&t, &scope(), &s, ["e1e", "2"].into_iter(), 0, 0),
            JobId::derive(&t, &scope(), &s, ["e1", "e2"].into_iter(), 0, 0)
        );
        let text = a.to_string();
        assert!(text.starts_with("job-") && text.len() == 36);
        assert_eq!(text.parse::<JobId>().unwrap(), a);
        assert!("job-XYZ".parse::<JobId>().is_err());
        assert!(text.to_uppercase().parse::<JobId>().is_err());
    }

    #[test]
    fn target_names_are_checked() {
        assert!(TargetName::new("durable-local.memory_1").is_ok());
        for bad in ["", "a b", "é", &"x".repeat(65)] {
            assert!(TargetName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn backoff_is_bounded_and_grows() {
        for attempt in 1..60 {
            let d = backoff_ms(attempt, 250, 30_000);
            assert!((125..=30_000).contains(&d), "{attempt}: {d}");
        }
        let first: u64 = (0..100).map(|_| backoff_ms(1, 250, 30_000)).max().unwrap();
        let later: u64 = (0..100).map(|_| backoff_ms(6, 250, 30_000)).min().unwrap();
        assert!(first <= 250 && later >= 6_000, "{first} {later}");
    }

    #[test]
    fn job_errors_are_bounded() {
        let e = JobError::of(&Error::Unavailable("é".repeat(500)));
        assert_eq!(e.code, "unavailable");
        assert!(e.message.len() <= MAX_ERROR_MESSAGE_BYTES);
    }

    #[test]
    fn a_stored_event_plans_into_the_same_entry() {
        use hippocamp_core::MemoryLimits;
        use hippocamp_memory::event::plan_events;
        let original = Event::text("e1", "user", 42, "my api_key=hunter2 is not remembered")
            .with_metadata(
                serde_json::json!({"topic": "x", "password": "p"})
                    .as_object()
                    .unwrap()
                    .clone(),
            );
        let thought = Event {
            content: Some(Content {
                role: Some("model".into()),
                parts: vec![
                    Part {
                        text: Some("hidden reasoning".into()),
                        thought: true,
                        ..Part::default()
                    },
                    Part::text("visible answer"),
                ],
            }),
            ..Event::text("e2", "agent", 43, "")
        };
        let s = SessionId::new("s").unwrap();
        let limits = MemoryLimits::default();
        let plan = plan_events(&scope(), &s, &[original, thought], &limits).unwrap();
        for p in &plan.entries {
            let stored = StoredEvent::of_entry(&p.event_id, &p.prepared.entry).unwrap();
            assert!(!stored.text.contains("hidden"));
            assert!(!stored.text.contains("hunter2"), "{}", stored.text);
            assert!(
                !stored
                    .metadata
                    .clone()
                    .unwrap_or_default()
                    .contains("\"p\"")
            );
            let again = plan_events(&scope(), &s, &[stored.to_event()], &limits).unwrap();
            assert!(again.entries[0].prepared.entry.same_data(&p.prepared.entry));
            assert_eq!(again.entries[0].prepared.entry.id, p.prepared.entry.id);
        }
        // The event with a secret is queued with the secret redacted: the
        // queue never holds it.
        assert_eq!(plan.entries.len(), 2);
        assert!(plan.skipped.is_empty());
    }
}
