//! [`Gate`]: the one place the governed handles ask the policy and write
//! the audit log. [`crate::PolicyChecked`] (memory),
//! [`crate::GovernedSessions`] (agent sessions) and
//! [`crate::GovernedArtifacts`] (artifacts) each hold one, so a question
//! is asked, a denial recorded and a deadline started the same way on
//! every path.

use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::ident::check_new_id;
use hippocamp_core::{AppName, CallOptions, Caller, Clock, Deadline, Field, MemoryScope, Result};

use crate::audit::{AuditEvent, AuditLog, NewAuditRecord};
use crate::policy::{Action, Grant, Policy, Question, Resource, consult};

/// The policy, its clock, the audit log and the default deadline of the
/// store a governed handle wraps.
#[derive(Debug, Clone)]
pub struct Gate {
    policy: Arc<dyn Policy>,
    clock: Arc<dyn Clock>,
    default_timeout: Duration,
    audit: Option<Arc<dyn AuditLog>>,
}

impl Gate {
    /// A gate asking `policy` at `clock`'s time, starting a call without a
    /// deadline at `default_timeout`.
    pub fn new(policy: Arc<dyn Policy>, clock: Arc<dyn Clock>, default_timeout: Duration) -> Self {
        Self {
            policy,
            clock,
            default_timeout,
            audit: None,
        }
    }

    /// Records denials and what the handle audits in `audit`.
    #[must_use]
    pub fn with_audit(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.audit = Some(audit);
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Arc<dyn Policy> {
        &self.policy
    }

    /// Now, by the policy's clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Appends one record; a failure to record is logged, not returned
    /// (the operation it describes already happened or was refused).
    pub async fn record(
        &self,
        event: AuditEvent,
        target: &'static str,
        scope: Option<&MemoryScope>,
        caller: Caller,
        outcome: String,
        count: Option<u64>,
    ) {
        let Some(audit) = &self.audit else { return };
        let r = NewAuditRecord {
            event,
            target,
            scope: scope.cloned(),
            caller,
            outcome,
            count,
        };
        audit.record(r, self.clock.now_ms()).await;
    }

    /// Records how a deletion of `target` ended (an `event`, or a `Hold`
    /// when a hold refused it, with the count `count` gives) and passes the
    /// result on: every governed handle audits its deletions this way.
    pub async fn recorded<T>(
        &self,
        event: AuditEvent,
        target: &'static str,
        scope: Option<&MemoryScope>,
        caller: Caller,
        result: Result<T>,
        count: impl Fn(&T) -> u64,
    ) -> Result<T> {
        let event = match &result {
            Err(hippocamp_core::Error::LegalHold) => AuditEvent::Hold,
            _ => event,
        };
        let n = result.as_ref().ok().map(count);
        let outcome = NewAuditRecord::outcome_of(&result);
        self.record(event, target, scope, caller, outcome, n).await;
        result
    }

    /// Starts the call's clock, asks the policy, and returns the grant
    /// with the options to forward (the same deadline, the same caller).
    /// A denial (or an error, or a late answer) is recorded and returned.
    pub async fn ask(
        &self,
        action: Action,
        scope: Option<&MemoryScope>,
        resource: Resource,
        opts: &CallOptions,
    ) -> Result<(Grant, CallOptions)> {
        self.ask_in(action, scope.map(MemoryScope::app), scope, resource, opts)
            .await
    }

    /// [`ask`](Self::ask) about an app's own data (no user's): its
    /// app-scoped artifacts.
    pub async fn ask_app(
        &self,
        action: Action,
        app: &AppName,
        resource: Resource,
        opts: &CallOptions,
    ) -> Result<(Grant, CallOptions)> {
        self.ask_in(action, Some(app), None, resource, opts).await
    }

    async fn ask_in(
        &self,
        action: Action,
        app: Option<&AppName>,
        scope: Option<&MemoryScope>,
        resource: Resource,
        opts: &CallOptions,
    ) -> Result<(Grant, CallOptions)> {
        let deadline: Deadline = opts.deadline(self.default_timeout);
        if action.creates() {
            // The id grammar for new data is checked here, before the
            // policy, so every path that writes (HTTP, MCP, CLI, library)
            // meets the same rule.
            // `app` is the scope's app whenever there is a scope.
            if let Some(app) = app {
                check_new_id(Field::AppName, app.as_str())?;
            }
            if let Some(scope) = scope {
                check_new_id(Field::UserId, scope.user().as_str())?;
            }
            if let Some(session) = resource.named_session() {
                check_new_id(Field::SessionId, session.as_str())?;
            }
        }
        let question = Question {
            action,
            scope,
            app,
            resource,
            caller: opts.caller(),
            now_ms: self.clock.now_ms(),
        };
        match consult(&*self.policy, &question, deadline).await {
            Ok(grant) => Ok((
                grant,
                CallOptions::until(deadline).on_behalf_of(opts.caller()),
            )),
            Err(e) => {
                let outcome = match &e {
                    hippocamp_core::Error::PolicyDenied { reason } => {
                        format!("policy_denied:{reason}")
                    }
                    other => other.code().to_owned(),
                };
                let event = if matches!(e, hippocamp_core::Error::LegalHold) {
                    AuditEvent::Hold
                } else {
                    AuditEvent::Denial
                };
                self.record(event, action.as_str(), scope, opts.caller(), outcome, None)
                    .await;
                Err(e)
            }
        }
    }
}
