//! Call options and deadlines.
//!
//! A caller gives a timeout (1 ms ..= 60 s) or accepts the store's
//! configured default (`call_timeout_ms`, 5 s unless changed). It becomes an
//! absolute [`Deadline`] when the call starts; that deadline travels with the
//! request through queues and routers, and a store checks it immediately
//! before a write commits. An expired request returns [`Error::Timeout`]
//! naming the stage that ran out of time, and never becomes a visible
//! write. The commit point is the last check: a write that passed it
//! completes and is reported as done, so its reply may follow the deadline
//! by the time left to commit it (in the durable store: the rest of its
//! group, the group's log write and the commit).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Field, Problem, Result, Stage};

/// The shortest accepted timeout.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1);
/// The longest accepted timeout of a memory or other short call.
pub const MAX_TIMEOUT: Duration = Duration::from_mins(1);
/// The longest accepted timeout of a transfer (artifacts).
pub const MAX_TRANSFER_TIMEOUT: Duration = Duration::from_mins(5);
/// The default of a store's configured call timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// An absolute point in monotonic time by which a request must complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline(Instant);

impl Deadline {
    /// A deadline `timeout` from now.
    pub fn after(timeout: Duration) -> Self {
        Self(Instant::now() + timeout)
    }

    /// A deadline at `instant`.
    pub fn at(instant: Instant) -> Self {
        Self(instant)
    }

    /// The instant.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Whether the deadline has passed.
    pub fn expired(self) -> bool {
        Instant::now() >= self.0
    }

    /// Time left, zero when expired.
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// `Err(Timeout(stage))` when the deadline has passed.
    pub fn check(self, stage: Stage) -> Result<()> {
        if self.expired() {
            Err(Error::Timeout(stage))
        } else {
            Ok(())
        }
    }
}

/// Options every scoped operation takes: how long the caller will wait,
/// and who is asking (for the governance policy and the audit log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOptions {
    when: When,
    caller: Caller,
}

/// Who made a call, as the policy and the audit log see it: the kind of
/// caller and, for a token, its public id (never its secret). Set by the
/// entry point that authenticated the caller (server, CLI, outbox, runner),
/// never taken from request data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Caller {
    /// What kind of caller.
    pub kind: CallerKind,
    /// A token's public id (12 hex characters), when a token made the call.
    pub token_id: Option<[u8; 12]>,
}

/// The kind of a [`Caller`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum CallerKind {
    /// Not stated (a library caller).
    #[default]
    Library,
    /// An HTTP client with a bearer token.
    Token,
    /// The command line, on its own authority.
    Cli,
    /// The outbox delivering a queued job.
    Outbox,
    /// The background sweeper.
    Sweeper,
    /// The agent runner or a tool it runs.
    Runner,
}

impl CallerKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallerKind::Library => "library",
            CallerKind::Token => "token",
            CallerKind::Cli => "cli",
            CallerKind::Outbox => "outbox",
            CallerKind::Sweeper => "sweeper",
            CallerKind::Runner => "runner",
        }
    }
}

impl Caller {
    /// A caller of `kind` without a token.
    pub const fn of(kind: CallerKind) -> Self {
        Self {
            kind,
            token_id: None,
        }
    }

    /// A token caller; `id` is the token's public id. An id that is not
    /// 12 ASCII bytes is kept as its first 12 bytes (ids are made here).
    pub fn token(id: &str) -> Self {
        let mut out = [b'?'; 12];
        for (o, b) in out.iter_mut().zip(id.bytes()) {
            *o = if b.is_ascii_alphanumeric() { b } else { b'?' };
        }
        Self {
            kind: CallerKind::Token,
            token_id: Some(out),
        }
    }

    /// A bounded description: `token:ab12…` or the kind's name.
    pub fn describe(&self) -> String {
        match &self.token_id {
            Some(id) => format!(
                "{}:{}",
                self.kind.as_str(),
                String::from_utf8_lossy(id.as_slice())
            ),
            None => self.kind.as_str().to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    StoreDefault,
    Timeout(Duration),
    Deadline(Deadline),
}

impl Default for CallOptions {
    /// The store's configured call timeout.
    fn default() -> Self {
        Self {
            when: When::StoreDefault,
            caller: Caller::default(),
        }
    }
}

impl CallOptions {
    /// Options with `timeout`, which must be within 1 ms ..= 60 s.
    pub fn timeout(timeout: Duration) -> Result<Self> {
        Self::bounded(timeout, MAX_TIMEOUT)
    }

    /// Options for a transfer with `timeout`, which must be within 1 ms ..=
    /// 300 s.
    pub fn transfer_timeout(timeout: Duration) -> Result<Self> {
        Self::bounded(timeout, MAX_TRANSFER_TIMEOUT)
    }

    fn bounded(timeout: Duration, max: Duration) -> Result<Self> {
        if timeout < MIN_TIMEOUT || timeout > max {
            let ms = |d: Duration| i128::try_from(d.as_millis()).unwrap_or(i128::MAX);
            return Err(Error::invalid(
                Field::Timeout,
                Problem::OutOfRange {
                    value: ms(timeout),
                    min: ms(MIN_TIMEOUT),
                    max: ms(max),
                },
            ));
        }
        Ok(Self {
            when: When::Timeout(timeout),
            caller: Caller::default(),
        })
    }

    /// Options with a timeout in milliseconds (1 ..= 60,000).
    pub fn timeout_ms(ms: u64) -> Result<Self> {
        Self::timeout(Duration::from_millis(ms))
    }

    /// Options carrying an absolute deadline, as forwarded by a router or
    /// queue that already started the caller's clock.
    pub fn until(deadline: Deadline) -> Self {
        Self {
            when: When::Deadline(deadline),
            caller: Caller::default(),
        }
    }

    /// The same options made on behalf of `caller`.
    #[must_use]
    pub fn on_behalf_of(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Who is asking.
    pub fn caller(&self) -> Caller {
        self.caller
    }

    /// The absolute deadline, using `store_default` when the caller gave no
    /// timeout. A timeout starts counting now, so call this once, at the
    /// start of an operation.
    pub fn deadline(&self, store_default: Duration) -> Deadline {
        match self.when {
            When::StoreDefault => Deadline::after(store_default),
            When::Timeout(t) => Deadline::after(t),
            When::Deadline(d) => d,
        }
    }
}

/// Serialised form of call options (e.g. in HTTP bodies): `timeout_ms` only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallOptionsSpec {
    /// Timeout in milliseconds, 1 ..= 60,000; default: the store's `call_timeout_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl TryFrom<CallOptionsSpec> for CallOptions {
    type Error = Error;
    fn try_from(spec: CallOptionsSpec) -> Result<Self> {
        match spec.timeout_ms {
            None => Ok(CallOptions::default()),
            Some(ms) => CallOptions::timeout_ms(ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_bounds() {
        assert!(CallOptions::timeout_ms(0).is_err());
        assert!(CallOptions::timeout_ms(1).is_ok());
        assert!(CallOptions::timeout_ms(60_000).is_ok());
        assert!(matches!(
            CallOptions::timeout_ms(60_001),
            Err(Error::InvalidArgument {
                field: Field::Timeout,
                problem: Problem::OutOfRange {
                    value: 60_001,
                    min: 1,
                    max: 60_000
                }
            })
        ));
    }

    #[test]
    fn deadline_expiry() {
        let past = Deadline::at(
            Instant::now()
                .checked_sub(Duration::from_millis(5))
                .unwrap(),
        );
        assert!(past.expired());
        assert!(matches!(
            past.check(Stage::Commit),
            Err(Error::Timeout(Stage::Commit))
        ));
        assert_eq!(past.remaining(), Duration::ZERO);
        let future = CallOptions::default().deadline(DEFAULT_TIMEOUT);
        assert!(!future.expired());
        assert!(future.remaining() > Duration::from_secs(4));
    }

    #[test]
    fn spec_rejects_unknown_keys() {
        assert!(serde_json::from_str::<CallOptionsSpec>(r#"{"timeout":5}"#).is_err());
        let spec: CallOptionsSpec = serde_json::from_str(r#"{"timeout_ms":5}"#).unwrap();
        assert!(CallOptions::try_from(spec).is_ok());
    }
}
