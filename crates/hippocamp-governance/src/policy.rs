//! The `Policy` contract: what is asked, what may be answered, and the one
//! function that asks within a deadline and fails closed ([`consult`]).

use std::fmt;
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{
    AppName, Caller, Deadline, EntryId, Error, MemoryScope, Result, SessionId, UserId, secrets,
};
use hippocamp_memory::{ObligationRules, Obligations};
use serde::Serialize;

/// The longest a policy may take to answer (the bound); a
/// configured timeout is at most this.
pub const MAX_POLICY_TIMEOUT: Duration = Duration::from_mins(1);

/// Bytes of a resource description handed to a policy.
pub const MAX_DESCRIPTION_BYTES: usize = 256;

/// Bytes of a reason code a policy may give.
pub const MAX_REASON_BYTES: usize = 64;

/// What the caller wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Write entries (directly, from events, or queued for later delivery:
    /// checked at admission and again at delivery).
    Ingest,
    /// Search a scope.
    Search,
    /// Read one entry.
    Get,
    /// List a scope's entries.
    List,
    /// Export a scope.
    Export,
    /// Correct an entry.
    Update,
    /// Delete one entry or one session.
    Delete,
    /// Erase a whole scope.
    Erase,
    /// Keep data longer than the policy's lifetimes would: a write whose
    /// own obligations carry a retention or a legal hold (a library
    /// caller's `WriteOptions`, or restored entries that were retained or
    /// held), asked in addition to `Ingest`.
    Retain,
    /// Remove expired data (the sweeper's batches).
    Prune,
    /// Restore an export's record of erasures into a scope (before its
    /// entries, which are asked `Ingest` as any write).
    Restore,
    /// Append an event to an agent session (the runner's conversation).
    Append,
    /// Store an artifact version.
    PutArtifact,
    /// Start, apply or revert a consolidation run (its derived entries
    /// are also asked `Ingest` as any write, its reverts `Delete`).
    Consolidate,
}

impl Action {
    /// Whether the action creates data, so the ids it names must follow
    /// the grammar for new ids (`hippocamp_core::ident::check_new_id`).
    /// Reads, listings, corrections and erasures take older ids too.
    pub fn creates(self) -> bool {
        matches!(self, Action::Ingest | Action::Append | Action::PutArtifact)
    }

    /// Every action, in declaration order.
    pub const ALL: [Action; 14] = [
        Action::Ingest,
        Action::Search,
        Action::Get,
        Action::List,
        Action::Export,
        Action::Update,
        Action::Delete,
        Action::Erase,
        Action::Retain,
        Action::Prune,
        Action::Restore,
        Action::Append,
        Action::PutArtifact,
        Action::Consolidate,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Ingest => "ingest",
            Action::Search => "search",
            Action::Get => "get",
            Action::List => "list",
            Action::Export => "export",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Erase => "erase",
            Action::Retain => "retain",
            Action::Prune => "prune",
            Action::Restore => "restore",
            Action::Append => "append",
            Action::PutArtifact => "put_artifact",
            Action::Consolidate => "consolidate",
        }
    }
}

/// What a question is about, described for the policy without content.
///
/// The description is rendered only when a policy asks for it
/// ([`Resource::description`]), so a policy that decides by action and
/// scope alone (the static one) costs no formatting per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    kind: &'static str,
    detail: Detail,
}

/// What a resource description is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Detail {
    Static(&'static str),
    Entry(EntryId),
    Session(SessionId),
    Events {
        count: usize,
        session: SessionId,
        queued: bool,
    },
    Query {
        mode: &'static str,
        bytes: usize,
    },
    Page(Option<u64>),
    Sweep(u64),
    Text(String),
}

impl Resource {
    /// A resource of `kind` (`entry`, `session`, `events`, `query`,
    /// `scope`, `store`...) described by `description`.
    pub fn new(kind: &'static str, description: impl Into<String>) -> Self {
        Self::of(kind, Detail::Text(description.into()))
    }

    fn of(kind: &'static str, detail: Detail) -> Self {
        Self { kind, detail }
    }

    /// A fixed description.
    pub fn fixed(kind: &'static str, description: &'static str) -> Self {
        Self::of(kind, Detail::Static(description))
    }

    /// One entry, by id.
    pub fn entry(id: EntryId) -> Self {
        Self::of("entry", Detail::Entry(id))
    }

    /// One session.
    pub fn session(session: &SessionId) -> Self {
        Self::of("session", Detail::Session(session.clone()))
    }

    /// `count` events of `session`, written now or `queued` for later.
    pub fn events(count: usize, session: &SessionId, queued: bool) -> Self {
        Self::of(
            "events",
            Detail::Events {
                count,
                session: session.clone(),
                queued,
            },
        )
    }

    /// A query of `bytes` bytes in `mode`.
    pub fn query(mode: &'static str, bytes: usize) -> Self {
        Self::of("query", Detail::Query { mode, bytes })
    }

    /// A listing page of at most `limit` entries.
    pub fn page(limit: Option<u64>) -> Self {
        Self::of("entries", Detail::Page(limit))
    }

    /// A sweep of up to `max` expired entries.
    pub fn sweep(max: u64) -> Self {
        Self::of("store", Detail::Sweep(max))
    }

    /// The kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The session it names, if it names one.
    pub fn named_session(&self) -> Option<&SessionId> {
        match &self.detail {
            Detail::Session(s) | Detail::Events { session: s, .. } => Some(s),
            _ => None,
        }
    }

    /// The description: ids and counts, never content, cut to
    /// [`MAX_DESCRIPTION_BYTES`] on a character boundary and replaced by
    /// `[redacted]` when it looks like a credential, so a policy never sees
    /// a secret or unbounded text.
    pub fn description(&self) -> String {
        let mut d = match &self.detail {
            Detail::Static(s) => (*s).to_owned(),
            Detail::Entry(id) => id.to_string(),
            Detail::Session(s) => s.as_str().to_owned(),
            Detail::Events {
                count,
                session,
                queued,
            } => format!(
                "{count} events of session {session}{}",
                if *queued { ", queued" } else { "" }
            ),
            Detail::Query { mode, bytes } => format!("a {mode} query of {bytes} bytes"),
            Detail::Page(limit) => match limit {
                Some(n) => format!("a page of at most {n} entries"),
                None => "a page of entries".to_owned(),
            },
            Detail::Sweep(max) => format!("up to {max} expired entries"),
            Detail::Text(t) => t.clone(),
        };
        if secrets::detect(&d).is_some() {
            "[redacted]".clone_into(&mut d);
        }
        if d.len() > MAX_DESCRIPTION_BYTES {
            let mut cut = MAX_DESCRIPTION_BYTES;
            while !d.is_char_boundary(cut) {
                cut -= 1;
            }
            d.truncate(cut);
        }
        d
    }
}

/// One question to the policy.
#[derive(Debug, Clone)]
pub struct Question<'a> {
    /// What is asked for.
    pub action: Action,
    /// The exact scope; `None` for an app's own artifacts and store-wide
    /// work (the sweeper).
    pub scope: Option<&'a MemoryScope>,
    /// The app asked about: the scope's, or the app whose own artifacts
    /// are asked about; `None` only for store-wide work.
    pub app: Option<&'a AppName>,
    /// What it is about.
    pub resource: Resource,
    /// Who asks (from the caller's authority, never from request data).
    pub caller: Caller,
    /// The moment of the question (ms since the Unix epoch), by the
    /// services' clock: obligations are computed from it.
    pub now_ms: u64,
}

/// A policy's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Go ahead; written entries carry these obligations.
    AllowWith(Grant),
    /// Refused, with a reason code (snake_case, at most
    /// [`MAX_REASON_BYTES`]). `consent_required` and `legal_hold` are
    /// reported as their own errors; any other as `policy_denied`.
    Deny {
        /// Why.
        reason: String,
    },
}

/// What an allowing answer attaches to an ingestion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grant {
    /// Obligations of every written entry...
    pub obligations: Obligations,
    /// ...unless one of these metadata rules matches it.
    pub by_metadata: ObligationRules,
    /// The consent the ingestion relies on, when one was required.
    pub consent_id: Option<String>,
}

impl Decision {
    /// A denial with `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny {
            reason: reason.into(),
        }
    }
}

/// What a policy says about itself, for capabilities and status.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PolicyInfo {
    /// Its kind (`static`, or a custom name).
    pub kind: String,
    /// How long it may take before it is treated as a denial.
    pub timeout_ms: u64,
    /// Apps whose users need a recorded consent before ingestion.
    pub consent_required: Vec<String>,
    /// `app/user` scopes under a legal hold.
    pub legal_holds: Vec<String>,
    /// Apps with a TTL or retention.
    pub lifetimes: Vec<AppLifetime>,
}

impl PolicyInfo {
    /// What a caller confined to `app` is shown (`None`: a caller of
    /// every app sees everything): that app's terms only, and no held
    /// user's name (a hold is the operator's; `GET /v1/status` and an
    /// admin token's capabilities list them).
    #[must_use]
    pub fn seen_from(mut self, app: Option<&AppName>) -> Self {
        let Some(app) = app else { return self };
        self.consent_required.retain(|a| a == app.as_str());
        self.lifetimes.retain(|l| l.app == app.as_str());
        self.legal_holds.clear();
        self
    }
}

/// An app's lifetimes, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AppLifetime {
    /// The app.
    pub app: String,
    /// Entries expire this long after they are written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Entries cannot be deleted before this long after they are written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    /// Metadata rules with their own lifetimes.
    pub metadata_rules: usize,
    /// Artifact versions expire this long after they are stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_ttl_ms: Option<u64>,
}

/// Decides whether an operation may run and what it must carry.
///
/// Implementations answer from their own state (configuration, a
/// database, a remote service); an error or an answer later than
/// [`PolicyInfo::timeout_ms`] is a denial ([`consult`] enforces both).
#[async_trait]
pub trait Policy: Send + Sync + fmt::Debug {
    /// Answers one question.
    async fn decide(&self, question: &Question<'_>) -> Result<Decision>;

    /// What it enforces, for capabilities.
    fn describe(&self) -> PolicyInfo;

    /// How long it may take to answer (at most [`MAX_POLICY_TIMEOUT`]).
    /// Asked on every question: override it with something cheaper than
    /// `describe`.
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.describe().timeout_ms)
    }

    /// Whether withdrawing the scope's consent erases its memory (else it
    /// stops ingestion and cancels queued work only).
    fn erases_on_withdrawal(&self, _scope: &MemoryScope) -> bool {
        false
    }

    /// The terms of an app's artifacts (of `user`'s, when the scope has a
    /// user): how long a version lives after it is stored, and whether a
    /// legal hold forbids deleting it. Asked on every artifact operation,
    /// so it answers from memory; none by default.
    fn artifact_terms(&self, _app: &AppName, _user: Option<&UserId>) -> ArtifactTerms {
        ArtifactTerms::default()
    }

    /// The scopes under a legal hold now: the sweeper leaves every entry
    /// of theirs, even one written before the hold (whose own obligations
    /// do not say so). None by default.
    fn held_scopes(&self) -> Vec<MemoryScope> {
        Vec::new()
    }
}

/// What governs an artifact version (see [`Policy::artifact_terms`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArtifactTerms {
    /// A version is gone this long after it was stored (from the exact
    /// millisecond, whether or not the sweeper removed it yet).
    pub ttl_ms: Option<u64>,
    /// No version may be deleted.
    pub legal_hold: bool,
}

/// Asks `policy`, giving it until the earlier of its own timeout and the
/// caller's `deadline`. An error, a timeout or a malformed reason is a
/// denial (fail closed). Returns the grant of an allowing answer, or the
/// error a denial is reported as.
pub async fn consult(
    policy: &dyn Policy,
    question: &Question<'_>,
    deadline: Deadline,
) -> Result<Grant> {
    let mut decision = policy.decide(question);
    // A policy that answers at once (the static one) needs no timer: poll
    // it once, and arm the deadline only when it has to wait.
    let first = std::future::poll_fn(|cx| Poll::Ready(decision.as_mut().poll(cx))).await;
    let answer = match first {
        Poll::Ready(a) => Ok(a),
        Poll::Pending => {
            let timeout = policy.timeout().min(MAX_POLICY_TIMEOUT);
            let until = deadline.instant().min(std::time::Instant::now() + timeout);
            tokio::time::timeout_at(until.into(), decision).await
        }
    };
    let denied = |reason: &str| {
        tracing::warn!(
            action = question.action.as_str(),
            caller = %question.caller.describe(),
            reason,
            "policy denied"
        );
    };
    match answer {
        Ok(Ok(Decision::Allow)) => Ok(Grant::default()),
        Ok(Ok(Decision::AllowWith(grant))) => Ok(grant),
        Ok(Ok(Decision::Deny { reason })) => {
            let reason = if is_reason(&reason) {
                reason
            } else {
                "policy_gave_a_malformed_reason".to_owned()
            };
            denied(&reason);
            Err(match reason.as_str() {
                "consent_required" => Error::ConsentRequired(match question.action {
                    Action::Ingest => "ingestion",
                    _ => "this operation",
                }),
                "legal_hold" => Error::LegalHold,
                _ => Error::PolicyDenied { reason },
            })
        }
        Ok(Err(e)) => {
            denied("policy_error");
            tracing::warn!(error = %e, "the policy failed; denied");
            Err(Error::PolicyDenied {
                reason: "policy_error".to_owned(),
            })
        }
        Err(_) => {
            denied("policy_timeout");
            Err(Error::PolicyDenied {
                reason: "policy_timeout".to_owned(),
            })
        }
    }
}

/// A reason code: 1..=64 bytes of `[a-z0-9_]`.
fn is_reason(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= MAX_REASON_BYTES
        && r.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_bounded_and_redacted() {
        let long = Resource::new("query", "é".repeat(400));
        assert!(long.description().len() <= MAX_DESCRIPTION_BYTES);
        let secret = Resource::new("query", "key AKIAIOSFODNN7EXAMPLE here");
        assert_eq!(secret.description(), "[redacted]");
        assert!(is_reason("consent_required"));
        assert!(!is_reason("Bad Reason"));
        assert!(!is_reason(""));
        assert!(!is_reason(&"a".repeat(65)));
    }
}
