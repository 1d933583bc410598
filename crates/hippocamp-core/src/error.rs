//! The one error type of hippocamp's services, named for outcomes.
//!
//! Every variant says what happened to the caller's request (it was invalid,
//! nothing was found, a quota refused it, its deadline expired...), never
//! which backend failed, so a caller can match on it whatever store it talks
//! to. [`Error::code`] gives the stable snake_case name used on the wire.

use std::fmt;
use std::sync::Arc;

use crate::ident::EntryId;
use crate::secrets::SecretKind;

/// Result alias used across hippocamp.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong with a request, named for the outcome.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument failed validation; nothing was read or written.
    #[error("invalid {field}: {problem}")]
    InvalidArgument {
        /// Which argument.
        field: Field,
        /// What is wrong with it.
        problem: Problem,
    },
    /// A configuration value is unknown or out of range.
    #[error("invalid configuration `{key}`: {problem}")]
    InvalidConfig {
        /// The configuration key, as written by the user.
        key: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// Something that cannot be redacted (an identifier, a correction, an
    /// entry to restore) looks like a credential; nothing was stored. (Text
    /// that is added is stored with its secrets redacted instead.)
    #[error(
        "this looks like a secret ({0}) where one cannot be redacted (an identifier, a correction, or an entry to restore); secrets are never stored"
    )]
    SensitiveContent(SecretKind),
    /// The addressed record does not exist in the requested scope.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The idempotency key was already used in this scope for different data.
    #[error("idempotency key already used for different data (entry {0})")]
    IdempotencyConflict(EntryId),
    /// A derived entry names a source that is not (or no longer) a live
    /// entry of its scope: erased, expired or never there. Nothing was
    /// written, so nothing derived can outlive what it came from.
    #[error("source {0} of a derived entry is gone; nothing was written")]
    SourceGone(EntryId),
    /// A consolidation run is already running in this scope (its id).
    #[error("consolidation run {0} is already running in this scope")]
    ConsolidationRunning(String),
    /// A consolidation run cannot be applied or reverted in its state, or
    /// a later change touched what it changed; nothing was changed.
    #[error("consolidation run refused: {0}; nothing was changed")]
    RunConflict(String),
    /// One value (an entry's content, an artifact, a request body) is over
    /// a size limit, named by its configuration key; nothing was written.
    /// Unlike a full quota, the same value never fits later.
    #[error("over the size limit {limit} ({max} bytes); nothing was written")]
    TooLarge {
        /// The limit's configuration key.
        limit: &'static str,
        /// Its value, in bytes.
        max: u64,
    },
    /// A quota refused the write; nothing was written.
    #[error("quota exceeded: {limit}")]
    QuotaExceeded {
        /// The limit that refused it.
        limit: QuotaLimit,
    },
    /// The request's deadline expired before it completed; nothing was
    /// written. The stage says where the time ran out.
    #[error("deadline expired {0} before the operation completed; nothing was written")]
    Timeout(Stage),
    /// The write was admitted under an erasure epoch (of its scope, or of
    /// its session) that a later erasure has since closed; it was refused
    /// so it cannot revive erased data.
    #[error(
        "stale erasure epoch: the write was admitted at epoch {admitted}, an erasure has since advanced it to {current}"
    )]
    StaleEpoch {
        /// The epoch the write carried.
        admitted: u64,
        /// The scope's current epoch.
        current: u64,
    },
    /// The write names an erasure epoch the scope has not reached: no
    /// admission could have seen it, so the caller's epoch is wrong.
    #[error(
        "future erasure epoch: the write names epoch {admitted}, the scope or session is at epoch {current}"
    )]
    FutureEpoch {
        /// The epoch the write carried.
        admitted: u64,
        /// The scope's current epoch.
        current: u64,
    },
    /// Too much work is queued; retry later.
    #[error("overloaded: {0}")]
    Overloaded(&'static str),
    /// Every worker slot is taken by a busy scope.
    #[error("maximum number of active scopes ({max}) reached")]
    MaxActiveScopesReached {
        /// The configured maximum.
        max: usize,
    },
    /// Stored data failed an integrity check.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The operation is not offered by this store.
    #[error("{operation} is not supported by {backend}")]
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// The store.
        backend: &'static str,
    },
    /// The store is closed, locked by another process, or otherwise unusable.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A service this one depends on answered with something unusable: an
    /// embedding provider (wrong model, count, width, non-finite numbers),
    /// or a store that returned a record of another scope or name (the
    /// whole reply is refused, never filtered). Nothing of it was used.
    #[error("invalid reply from {service}: {detail}")]
    InvalidReply {
        /// The service.
        service: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Memory is turned off in this deployment (the `disabled` profile).
    #[error("memory is disabled in this deployment")]
    MemoryDisabled,
    /// Asynchronous ingestion is not offered here (a profile without an
    /// outbox) or its outbox is not healthy; nothing was queued.
    #[error("the ingestion outbox is unavailable: {0}")]
    OutboxUnavailable(String),
    /// The caller no longer owns the job it acts on (its lease expired or
    /// another owner took it over); nothing was changed.
    #[error("lease lost: {0}")]
    LeaseLost(&'static str),
    /// The job is still pending or running: only a finished job can be
    /// deleted (cancel it first); nothing was changed.
    #[error("the job is still {0}; only a finished job can be deleted (cancel it first)")]
    JobActive(&'static str),
    /// An I/O or storage-engine failure.
    #[error("storage failure: {0}")]
    Storage(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The governance policy refused the operation (or could not answer in
    /// time, which refuses too: fail closed); nothing was touched.
    #[error("refused by policy ({reason})")]
    PolicyDenied {
        /// The policy's reason code (snake_case, bounded).
        reason: String,
    },
    /// The app requires a recorded consent for this user before anything
    /// is ingested; nothing was written.
    #[error("the user has no recorded consent for {0}; nothing was written")]
    ConsentRequired(&'static str),
    /// The record must be retained until `until_ms`; nothing was deleted.
    #[error("retained until {until_ms} (ms since the Unix epoch); nothing was deleted")]
    Retention {
        /// When deletion becomes possible.
        until_ms: u64,
    },
    /// The record or scope is under a legal hold; nothing was deleted.
    #[error("under legal hold; nothing was deleted")]
    LegalHold,
    /// A whole-scope erasure must name the scope it erases (`?confirm=`).
    #[error("confirmation required: pass confirm={expected} to erase this scope")]
    ConfirmationRequired {
        /// The confirmation the request must carry.
        expected: String,
    },
}

/// Where a deadline ran out (named in [`Error::Timeout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// Waiting for a turn: the scope's worker or lock, the commit queue.
    Queueing,
    /// Waiting for the embedding provider.
    Embedding,
    /// At the commit point, checked immediately before the write commits.
    Commit,
    /// Moving content or a request body.
    Transfer,
    /// Waiting for a storage backend (an object store, a blocking read).
    Backend,
    /// Waiting for a model provider.
    Model,
    /// Running an agent's tool.
    Tool,
    /// A consolidation run, past its own bound (`max_run_ms`).
    Consolidation,
}

impl Stage {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Queueing => "queueing",
            Stage::Embedding => "embedding",
            Stage::Commit => "commit",
            Stage::Transfer => "transfer",
            Stage::Backend => "backend",
            Stage::Model => "model",
            Stage::Tool => "tool",
            Stage::Consolidation => "consolidation",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Queueing => "while queueing (waiting for the scope or the commit queue)",
            Stage::Embedding => "while embedding",
            Stage::Commit => "at the commit point",
            Stage::Transfer => "while transferring content",
            Stage::Backend => "while waiting for the storage backend",
            Stage::Model => "while waiting for the model",
            Stage::Tool => "while a tool ran",
            Stage::Consolidation => "while a consolidation run ran",
        })
    }
}

impl Error {
    /// Shorthand for an [`Error::InvalidArgument`].
    pub fn invalid(field: Field, problem: Problem) -> Self {
        Error::InvalidArgument { field, problem }
    }

    /// Shorthand for an [`Error::InvalidConfig`].
    pub fn config(key: impl Into<String>, problem: Problem) -> Self {
        Error::InvalidConfig {
            key: key.into(),
            problem,
        }
    }

    /// A store returned a record outside the requested scope, name or
    /// version: the reply is refused as [`Error::InvalidReply`].
    pub fn foreign_record(service: &'static str, what: &str) -> Self {
        Error::InvalidReply {
            service,
            detail: format!("it returned {what} outside the requested scope"),
        }
    }

    /// Wraps a storage-engine or I/O error.
    pub fn storage(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Storage(Arc::new(err))
    }

    /// The stable snake_case name of this error kind, used as the `code` of
    /// HTTP error bodies and in metrics labels.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::InvalidConfig { .. } => "invalid_config",
            Error::SensitiveContent(_) => "sensitive_content",
            Error::NotFound(_) => "not_found",
            Error::IdempotencyConflict(_) => "idempotency_conflict",
            Error::SourceGone(_) => "source_gone",
            Error::ConsolidationRunning(_) => "consolidation_running",
            Error::RunConflict(_) => "run_conflict",
            Error::QuotaExceeded { .. } => "quota_exceeded",
            Error::TooLarge { .. } => "payload_too_large",
            Error::Timeout(_) => "timeout",
            Error::StaleEpoch { .. } => "stale_epoch",
            Error::FutureEpoch { .. } => "future_epoch",
            Error::Overloaded(_) => "overloaded",
            Error::MaxActiveScopesReached { .. } => "max_active_scopes_reached",
            Error::Corrupt(_) => "corrupt",
            Error::Unsupported { .. } => "unsupported",
            Error::Unavailable(_) => "unavailable",
            Error::InvalidReply { .. } => "invalid_reply",
            Error::MemoryDisabled => "memory_disabled",
            Error::OutboxUnavailable(_) => "outbox_unavailable",
            Error::LeaseLost(_) => "lease_lost",
            Error::JobActive(_) => "job_active",
            Error::Storage(_) => "storage",
            Error::PolicyDenied { .. } => "policy_denied",
            Error::ConsentRequired(_) => "consent_required",
            Error::Retention { .. } => "retention",
            Error::LegalHold => "legal_hold",
            Error::ConfirmationRequired { .. } => "confirmation_required",
        }
    }
}

/// The argument an [`Error::InvalidArgument`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// A scope's application name.
    AppName,
    /// A consent record's id.
    ConsentId,
    /// A confirmation of an erasure.
    Confirm,
    /// A scope's user id.
    UserId,
    /// A session id.
    SessionId,
    /// An event id.
    EventId,
    /// An event or entry author.
    Author,
    /// An idempotency key.
    IdempotencyKey,
    /// An entry id.
    EntryId,
    /// Entry content.
    Content,
    /// Entry metadata.
    Metadata,
    /// Entry provenance.
    Provenance,
    /// A timestamp.
    Timestamp,
    /// A search query.
    Query,
    /// A search filter.
    Filter,
    /// A result-count limit.
    Limit,
    /// A result byte budget.
    MaxBytes,
    /// A call timeout.
    Timeout,
    /// A list of events.
    Events,
    /// One event of a batch.
    Event,
    /// An artifact name.
    Name,
    /// A MIME type.
    MimeType,
    /// An artifact version.
    Version,
    /// A byte range.
    Range,
    /// A page cursor.
    Cursor,
    /// A request body.
    Body,
    /// An outbox job id.
    JobId,
    /// An outbox target name.
    Target,
    /// The scope a restored record names.
    Scope,
    /// An entry's revision history.
    History,
    /// A line of an export being restored.
    Line,
    /// A search's context window.
    Context,
    /// A fact key.
    FactKey,
    /// A consolidation run's mode or options.
    Consolidation,
    /// A keyed item's namespace (its labels).
    Namespace,
    /// A keyed item's key.
    ItemKey,
    /// A keyed item's value.
    ItemValue,
    /// A memory-tool path (`/memories/...`).
    Path,
}

impl Field {
    /// The snake_case name of the field.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::AppName => "app_name",
            Field::ConsentId => "consent_id",
            Field::Confirm => "confirm",
            Field::UserId => "user_id",
            Field::SessionId => "session_id",
            Field::EventId => "event_id",
            Field::Author => "author",
            Field::IdempotencyKey => "idempotency_key",
            Field::EntryId => "entry_id",
            Field::Content => "content",
            Field::Metadata => "metadata",
            Field::Provenance => "provenance",
            Field::Timestamp => "timestamp",
            Field::Query => "query",
            Field::Filter => "filter",
            Field::Limit => "limit",
            Field::MaxBytes => "max_bytes",
            Field::Timeout => "timeout",
            Field::Events => "events",
            Field::Event => "event",
            Field::Name => "name",
            Field::MimeType => "mime_type",
            Field::Version => "version",
            Field::Range => "range",
            Field::Cursor => "cursor",
            Field::Context => "context",
            Field::Body => "body",
            Field::JobId => "job_id",
            Field::Target => "target",
            Field::Scope => "scope",
            Field::History => "history",
            Field::Line => "line",
            Field::FactKey => "fact_key",
            Field::Consolidation => "consolidation",
            Field::Namespace => "namespace",
            Field::ItemKey => "key",
            Field::ItemValue => "value",
            Field::Path => "path",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is wrong with an argument or configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// It is empty but must not be.
    Empty,
    /// It is longer (in bytes) than allowed.
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// It contains a NUL character.
    ContainsNul,
    /// It has more items than allowed.
    TooMany {
        /// How many it has.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// It nests deeper than allowed.
    TooDeep {
        /// The maximum depth.
        max: usize,
    },
    /// It has more JSON nodes than allowed.
    TooManyNodes {
        /// The maximum.
        max: usize,
    },
    /// A number is outside its allowed range.
    OutOfRange {
        /// The value given.
        value: i128,
        /// The smallest allowed value.
        min: i128,
        /// The largest allowed value.
        max: i128,
    },
    /// A key, option or operator is not known.
    Unknown {
        /// What was given.
        name: String,
        /// The nearest known name, if one is close.
        suggestion: Option<String>,
    },
    /// A key names a secret-bearing field that is redacted on write, so
    /// filtering on it could only match the redaction marker.
    RedactedKey(String),
    /// Two values break a rule that relates them.
    Relation(&'static str),
    /// It is not of the expected shape.
    Malformed(String),
    /// A new identifier breaks the identifier grammar
    /// ([`crate::ident::check_new_id`]); the text names the rule broken.
    Identifier(&'static str),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Empty => f.write_str("must not be empty"),
            Problem::TooLong { len, max } => write!(f, "{len} bytes is over the limit of {max}"),
            Problem::ContainsNul => f.write_str("must not contain a NUL character"),
            Problem::TooMany { count, max } => {
                write!(f, "{count} items is over the limit of {max}")
            }
            Problem::TooDeep { max } => write!(f, "nests deeper than {max} levels"),
            Problem::TooManyNodes { max } => write!(f, "has more than {max} JSON nodes"),
            Problem::OutOfRange { value, min, max } => {
                write!(f, "{value} is outside the allowed range {min}..={max}")
            }
            Problem::Unknown { name, suggestion } => {
                write!(f, "unknown `{name}`")?;
                if let Some(s) = suggestion {
                    write!(f, " (did you mean `{s}`?)")?;
                }
                Ok(())
            }
            Problem::RedactedKey(k) => {
                write!(f, "`{k}` is a secret-bearing key whose values are redacted")
            }
            Problem::Relation(r) => f.write_str(r),
            Problem::Malformed(m) => f.write_str(m),
            Problem::Identifier(rule) => {
                write!(f, "{rule}; a new id is {}", crate::ident::ID_GRAMMAR)
            }
        }
    }
}

/// The quota that refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaLimit {
    /// `max_entries_per_scope`.
    EntriesPerScope(u64),
    /// `max_bytes_per_scope`.
    BytesPerScope(u64),
    /// `max_entries_total`.
    EntriesTotal(u64),
    /// `max_bytes_total`.
    BytesTotal(u64),
    /// `max_scope_artifacts`: live versions in one scope.
    ArtifactsPerScope(u64),
    /// `max_scope_bytes`: artifact bytes in one scope.
    ArtifactBytesPerScope(u64),
    /// `max_total_artifacts`: live versions in the store.
    ArtifactsTotal(u64),
    /// `max_total_bytes`: artifact bytes in the store.
    ArtifactBytesTotal(u64),
    /// `outbox.max_active_jobs`: queued and running jobs in the outbox.
    OutboxJobs(u64),
    /// `outbox.max_active_jobs_per_scope`: queued and running jobs of one
    /// scope.
    OutboxJobsPerScope(u64),
    /// `outbox.max_active_bytes`: event bytes queued in the outbox.
    OutboxBytes(u64),
    /// `outbox.max_active_bytes_per_scope`: event bytes queued for one
    /// scope.
    OutboxBytesPerScope(u64),
    /// `outbox.max_watermark_events`: admitted event ids the outbox
    /// remembers.
    OutboxWatermarks(u64),
    /// `outbox.max_watermark_events_per_scope`: admitted event ids the
    /// outbox remembers for one scope.
    OutboxWatermarksPerScope(u64),
    /// `sessions.max_events_per_session`: events of one session.
    EventsPerSession(u64),
    /// `sessions.max_sessions_per_user`: sessions of one user.
    SessionsPerUser(u64),
}

impl QuotaLimit {
    /// The configuration key of the limit.
    pub fn name(self) -> &'static str {
        match self {
            QuotaLimit::EntriesPerScope(_) => "max_entries_per_scope",
            QuotaLimit::BytesPerScope(_) => "max_bytes_per_scope",
            QuotaLimit::EntriesTotal(_) => "max_entries_total",
            QuotaLimit::BytesTotal(_) => "max_bytes_total",
            QuotaLimit::ArtifactsPerScope(_) => "max_scope_artifacts",
            QuotaLimit::ArtifactBytesPerScope(_) => "max_scope_bytes",
            QuotaLimit::ArtifactsTotal(_) => "max_total_artifacts",
            QuotaLimit::ArtifactBytesTotal(_) => "max_total_bytes",
            QuotaLimit::OutboxJobs(_) => "outbox.max_active_jobs",
            QuotaLimit::OutboxJobsPerScope(_) => "outbox.max_active_jobs_per_scope",
            QuotaLimit::OutboxBytes(_) => "outbox.max_active_bytes",
            QuotaLimit::OutboxBytesPerScope(_) => "outbox.max_active_bytes_per_scope",
            QuotaLimit::OutboxWatermarks(_) => "outbox.max_watermark_events",
            QuotaLimit::OutboxWatermarksPerScope(_) => "outbox.max_watermark_events_per_scope",
            QuotaLimit::EventsPerSession(_) => "sessions.max_events_per_session",
            QuotaLimit::SessionsPerUser(_) => "sessions.max_sessions_per_user",
        }
    }

    /// The configured value of the limit.
    pub fn value(self) -> u64 {
        match self {
            QuotaLimit::EntriesPerScope(v)
            | QuotaLimit::BytesPerScope(v)
            | QuotaLimit::EntriesTotal(v)
            | QuotaLimit::BytesTotal(v)
            | QuotaLimit::ArtifactsPerScope(v)
            | QuotaLimit::ArtifactBytesPerScope(v)
            | QuotaLimit::ArtifactsTotal(v)
            | QuotaLimit::ArtifactBytesTotal(v)
            | QuotaLimit::OutboxJobs(v)
            | QuotaLimit::OutboxJobsPerScope(v)
            | QuotaLimit::OutboxBytes(v)
            | QuotaLimit::OutboxBytesPerScope(v)
            | QuotaLimit::OutboxWatermarks(v)
            | QuotaLimit::OutboxWatermarksPerScope(v)
            | QuotaLimit::EventsPerSession(v)
            | QuotaLimit::SessionsPerUser(v) => v,
        }
    }
}

impl fmt::Display for QuotaLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.value())
    }
}

/// `Ok` when `min <= value <= max`; otherwise the `InvalidConfig` error
/// naming `key` and the range.
pub fn check_range(key: &str, value: u64, min: u64, max: u64) -> Result<()> {
    if value < min || value > max {
        return Err(Error::config(
            key,
            Problem::OutOfRange {
                value: i128::from(value),
                min: i128::from(min),
                max: i128::from(max),
            },
        ));
    }
    Ok(())
}

/// The closest of `known` to `given` by edit distance, if it is close
/// enough to be a plausible typo.
pub fn suggest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        let d = edit_distance(given, k);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.filter(|(d, k)| *d <= 3.max(k.len() / 3))
        .map(|(_, k)| k.to_owned())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_near_names_only() {
        let known = ["max_results", "max_content_bytes", "max_query_bytes"];
        assert_eq!(suggest("max_result", known).as_deref(), Some("max_results"));
        assert_eq!(suggest("zzzzzzzzzzzzzzzzzzzzzz", known), None);
    }

    #[test]
    fn codes_are_snake_case() {
        let e = Error::QuotaExceeded {
            limit: QuotaLimit::BytesTotal(5),
        };
        assert_eq!(e.code(), "quota_exceeded");
        assert_eq!(e.to_string(), "quota exceeded: max_bytes_total (5)");
    }
}
