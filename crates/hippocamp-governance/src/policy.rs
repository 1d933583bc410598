//! The `Policy` contract: what is asked, what may be answered, and the one
//! function that asks within a deadline and fails closed ([`consult`]).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Caller, Deadline, Error, MemoryScope, Result, secrets};
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
    /// Keep data beyond its lifetime (consulted before the sweeper
    /// deletes expired entries: a denial keeps them).
    Retain,
    /// Remove expired data (the sweeper's batches).
    Prune,
}

impl Action {
    /// Every action, in declaration order.
    pub const ALL: [Action; 10] = [
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
        }
    }
}

/// What a question is about, described for the policy without content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    kind: &'static str,
    description: String,
}

impl Resource {
    /// A resource of `kind` (`entry`, `session`, `events`, `query`,
    /// `scope`, `store`...) described by `description`: cut to
    /// [`MAX_DESCRIPTION_BYTES`] on a character boundary and replaced by
    /// `[redacted]` when it looks like a credential, so a policy never sees
    /// a secret or unbounded text.
    pub fn new(kind: &'static str, description: impl Into<String>) -> Self {
        let mut d: String = description.into();
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
        Self {
            kind,
            description: d,
        }
    }

    /// The kind.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The bounded, redacted description.
    pub fn description(&self) -> &str {
        &self.description
    }
}

/// One question to the policy.
#[derive(Debug, Clone)]
pub struct Question<'a> {
    /// What is asked for.
    pub action: Action,
    /// The exact scope; `None` only for store-wide work (the sweeper).
    pub scope: Option<&'a MemoryScope>,
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

    /// Whether withdrawing the scope's consent erases its memory (else it
    /// stops ingestion and cancels queued work only).
    fn erases_on_withdrawal(&self, _scope: &MemoryScope) -> bool {
        false
    }
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
    let timeout = Duration::from_millis(policy.describe().timeout_ms).min(MAX_POLICY_TIMEOUT);
    let until = deadline.instant().min(std::time::Instant::now() + timeout);
    let answer = tokio::time::timeout_at(until.into(), policy.decide(question)).await;
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
