//! [`PolicyChecked`]: the memory store every caller is handed, which asks
//! the policy before each operation on data.
//!
//! The stores themselves stay policy-free: this wrapper is the one place
//! that asks, so a path cannot skip it by calling another method. Each
//! operation on data consults the policy with its exact scope, a bounded
//! description of what it touches (ids and counts, never content) and
//! the caller from its [`CallOptions`], within the earlier of the
//! policy's timeout and the call's deadline; a denial, an error or a
//! late answer refuses the operation before the store is touched.
//! Ingestion carries the grant's obligations into the write.
//!
//! Not consulted (no user data moves): `capabilities`, `status`,
//! `erasure_epoch`, `activate_scope`, `release_scope`. A write that brings
//! a retention or a hold of its own is also asked `retain`.
//!
//! With an audit log ([`PolicyChecked::with_audit`]) it also records every
//! denial, every erasure (entry, session, user) with its outcome, a
//! hold's refusal, and every sweep that removed something: all paths go
//! through here, so none escapes the log.

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Clock, EntryId, MemoryScope, Result, SessionId};
use hippocamp_memory::{
    AddOutcome, Capabilities, EntryPage, EntryUpdate, Erasure, Event, ImportReport, ImportedEntry,
    IngestReport, ListRequest, MemoryEntry, MemoryStore, NamePage, NamesRequest, NewEntry,
    Obligations, Revision, SearchRequest, SearchResults, StoreStatus, Sweep, UpdateOutcome,
    WriteOptions,
};

use crate::audit::{AuditEvent, AuditLog, NewAuditRecord};
use crate::gate::Gate;
use crate::policy::{Action, Grant, Policy, Resource};

/// Asks `policy` before every operation on `inner`'s data.
#[derive(Debug, Clone)]
pub struct PolicyChecked<S> {
    inner: S,
    gate: Gate,
}

impl<S: MemoryStore> PolicyChecked<S> {
    /// Wraps `inner`; questions are stamped with `clock`'s time.
    pub fn new(inner: S, policy: Arc<dyn Policy>, clock: Arc<dyn Clock>) -> Self {
        let default_timeout = inner.capabilities().call_timeout();
        Self {
            inner,
            gate: Gate::new(policy, clock, default_timeout),
        }
    }

    /// Records denials, erasures, holds and sweeps in `audit`.
    #[must_use]
    pub fn with_audit(mut self, audit: Arc<dyn AuditLog>) -> Self {
        self.gate = self.gate.with_audit(audit);
        self
    }

    /// The policy.
    pub fn policy(&self) -> &Arc<dyn Policy> {
        self.gate.policy()
    }

    async fn ask(
        &self,
        action: Action,
        scope: Option<&MemoryScope>,
        resource: Resource,
        opts: &CallOptions,
    ) -> Result<(Grant, CallOptions)> {
        self.gate.ask(action, scope, resource, opts).await
    }

    /// Asks `Retain` when a write brings obligations of its own that keep
    /// data (a retention or a legal hold): the policy decides whether the
    /// caller may keep data longer than its lifetimes would.
    async fn ask_retain(
        &self,
        scope: &MemoryScope,
        own: impl IntoIterator<Item = Obligations>,
        opts: &CallOptions,
    ) -> Result<()> {
        let keeps = own
            .into_iter()
            .filter(|o| o.retain_until_ms.is_some() || o.legal_hold)
            .count();
        if keeps > 0 {
            let r = Resource::new(
                "entries",
                format!("{keeps} entries retained or held by the caller"),
            );
            self.ask(Action::Retain, Some(scope), r, opts).await?;
        }
        Ok(())
    }

    /// The write options of an ingestion: the stricter of the caller's
    /// and the grant's obligations (the earlier expiry, the later
    /// retention, either hold), and the grant's metadata rules when it
    /// has any. A caller can shorten a lifetime, never escape the policy.
    fn granted(opts: &WriteOptions, grant: Grant, call: CallOptions) -> WriteOptions {
        let (a, b) = (opts.obligations, grant.obligations);
        let earliest = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        WriteOptions {
            call,
            epoch: opts.epoch,
            session_epoch: opts.session_epoch,
            obligations: Obligations {
                expires_at_ms: earliest(a.expires_at_ms, b.expires_at_ms),
                retain_until_ms: a.retain_until_ms.max(b.retain_until_ms),
                legal_hold: a.legal_hold || b.legal_hold,
            },
            by_metadata: if grant.by_metadata.is_empty() {
                opts.by_metadata.clone()
            } else {
                grant.by_metadata
            },
        }
    }
}

/// A restored entry's obligations: the policy's (`wanted`), the file's
/// expiry when earlier, and the file's retention and hold only when the
/// policy lets the caller keep them (`keep_own`).
fn restored_obligations(file: Obligations, wanted: Obligations, keep_own: bool) -> Obligations {
    let expires_at_ms = match (file.expires_at_ms, wanted.expires_at_ms) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if keep_own {
        Obligations {
            expires_at_ms,
            retain_until_ms: file.retain_until_ms.max(wanted.retain_until_ms),
            legal_hold: file.legal_hold || wanted.legal_hold,
        }
    } else {
        Obligations {
            expires_at_ms,
            ..wanted
        }
    }
}

#[async_trait]
#[deny(clippy::missing_trait_methods)]
impl<S: MemoryStore> MemoryStore for PolicyChecked<S> {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        let what = if entry.idempotency_key.is_some() {
            "one keyed entry"
        } else {
            "one entry"
        };
        let (grant, call) = self
            .ask(
                Action::Ingest,
                Some(scope),
                Resource::fixed("entry", what),
                &opts.call,
            )
            .await?;
        // The deadline the first question started, not a fresh one.
        self.ask_retain(scope, [opts.obligations], &call).await?;
        self.inner
            .add_entry(scope, entry, &Self::granted(opts, grant, call))
            .await
    }

    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        let r = Resource::events(events.len(), session, false);
        let (grant, call) = self.ask(Action::Ingest, Some(scope), r, &opts.call).await?;
        self.ask_retain(scope, [opts.obligations], &call).await?;
        self.inner
            .add_events(scope, session, events, &Self::granted(opts, grant, call))
            .await
    }

    async fn admit_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &CallOptions,
    ) -> Result<()> {
        let r = Resource::events(events.len(), session, true);
        let (_, call) = self.ask(Action::Ingest, Some(scope), r, opts).await?;
        self.inner.admit_events(scope, session, events, &call).await
    }

    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        let r = Resource::query(
            request.mode.map_or("default", |m| m.as_str()),
            request.query.len(),
        );
        let (_, call) = self.ask(Action::Search, Some(scope), r, opts).await?;
        self.inner.search(scope, request, &call).await
    }

    async fn get_entry(
        &self,
        scope: &MemoryScope,
        entry: &EntryId,
        opts: &CallOptions,
    ) -> Result<MemoryEntry> {
        let r = Resource::entry(*entry);
        let (_, call) = self.ask(Action::Get, Some(scope), r, opts).await?;
        self.inner.get_entry(scope, entry, &call).await
    }

    async fn delete_entry(
        &self,
        scope: &MemoryScope,
        entry: &EntryId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let r = Resource::entry(*entry);
        let (_, call) = self.ask(Action::Delete, Some(scope), r, opts).await?;
        let result = self.inner.delete_entry(scope, entry, &call).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "entry",
                Some(scope),
                opts.caller(),
                result,
                |n| *n,
            )
            .await
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        let r = Resource::session(session);
        let (_, call) = self.ask(Action::Delete, Some(scope), r, opts).await?;
        let result = self.inner.delete_session(scope, session, &call).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "session",
                Some(scope),
                opts.caller(),
                result,
                |n| *n,
            )
            .await
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let r = Resource::fixed("scope", "every entry of the scope");
        let (_, call) = self.ask(Action::Erase, Some(scope), r, opts).await?;
        let result = self.inner.delete_user(scope, &call).await;
        self.gate
            .recorded(
                AuditEvent::Erasure,
                "user",
                Some(scope),
                opts.caller(),
                result,
                |e| e.deleted,
            )
            .await
    }

    async fn erasure_epoch(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<u64> {
        self.inner.erasure_epoch(scope, opts).await
    }

    async fn erasure_fence(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::ErasureFence> {
        self.inner.erasure_fence(scope, session, opts).await
    }

    async fn list_entries(
        &self,
        scope: &MemoryScope,
        request: &ListRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let r = Resource::page(request.limit);
        let (_, call) = self.ask(Action::List, Some(scope), r, opts).await?;
        self.inner.list_entries(scope, request, &call).await
    }

    async fn export_entries(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::ExportRequest,
        opts: &CallOptions,
    ) -> Result<EntryPage> {
        let r = Resource::page(request.limit);
        let (_, call) = self.ask(Action::Export, Some(scope), r, opts).await?;
        self.inner.export_entries(scope, request, &call).await
    }

    async fn sweep_expired(
        &self,
        max: u64,
        spare: &[MemoryScope],
        opts: &CallOptions,
    ) -> Result<Sweep> {
        let r = Resource::sweep(max);
        let (_, call) = self.ask(Action::Prune, None, r, opts).await?;
        // Users the policy holds now keep everything, whatever their
        // entries' own obligations said when they were written.
        let mut spare = spare.to_vec();
        spare.extend(self.gate.policy().held_scopes());
        let sweep = self.inner.sweep_expired(max, &spare, &call).await?;
        if sweep.deleted > 0 {
            let n = Some(sweep.deleted);
            self.gate
                .record(
                    AuditEvent::Expiry,
                    "store",
                    None,
                    opts.caller(),
                    "ok".into(),
                    n,
                )
                .await;
        }
        Ok(sweep)
    }

    async fn update_entry(
        &self,
        scope: &MemoryScope,
        entry: &EntryId,
        update: &EntryUpdate,
        opts: &WriteOptions,
    ) -> Result<UpdateOutcome> {
        // A correction writes new content: consent applies, and the new
        // metadata's obligations with it (a shorter lifetime is taken, a
        // longer one never: `Obligations::corrected`).
        let r = Resource::entry(*entry);
        let (grant, call) = self.ask(Action::Update, Some(scope), r, &opts.call).await?;
        let result = self
            .inner
            .update_entry(scope, entry, update, &Self::granted(opts, grant, call))
            .await;
        let changed = result.as_ref().ok().map(|o| u64::from(o.changed));
        let outcome = NewAuditRecord::outcome_of(&result);
        self.gate
            .record(
                AuditEvent::Correction,
                "entry",
                Some(scope),
                opts.call.caller(),
                outcome,
                changed,
            )
            .await;
        result
    }

    async fn entry_history(
        &self,
        scope: &MemoryScope,
        entry: &EntryId,
        opts: &CallOptions,
    ) -> Result<Vec<Revision>> {
        let r = Resource::entry(*entry);
        let (_, call) = self.ask(Action::Get, Some(scope), r, opts).await?;
        self.inner.entry_history(scope, entry, &call).await
    }

    async fn entry_lineage(
        &self,
        scope: &MemoryScope,
        entry: &EntryId,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::lineage::Lineage> {
        let r = Resource::entry(*entry);
        let (_, call) = self.ask(Action::Get, Some(scope), r, opts).await?;
        self.inner.entry_lineage(scope, entry, &call).await
    }

    async fn import_entries(
        &self,
        scope: &MemoryScope,
        entries: &[ImportedEntry],
        opts: &WriteOptions,
    ) -> Result<ImportReport> {
        // A restore writes entries as an ingestion does (consent and the
        // policy's refusal apply), and they get the obligations of the
        // policy in force: a file cannot make the store keep anything
        // longer than the policy says. Its own retention or hold is kept
        // only when the policy lets this caller keep data (`retain`; the
        // static policy: the command line, not a token); its expiry is
        // kept when earlier.
        let r = Resource::new("entries", format!("{} restored entries", entries.len()));
        let (grant, call) = self.ask(Action::Ingest, Some(scope), r, &opts.call).await?;
        let keeps = entries.iter().any(|e| {
            e.entry.obligations.retain_until_ms.is_some() || e.entry.obligations.legal_hold
        });
        let keep_own = keeps
            && self
                .ask_retain(scope, entries.iter().map(|e| e.entry.obligations), &call)
                .await
                .is_ok();
        let policy = Self::granted(&WriteOptions::new(call), grant, call);
        let governed: Vec<ImportedEntry> = entries
            .iter()
            .map(|e| {
                let mut e = e.clone();
                let wanted = policy.obligations_for(&e.entry.metadata);
                e.entry.obligations = restored_obligations(e.entry.obligations, wanted, keep_own);
                e
            })
            .collect();
        let opts = WriteOptions {
            call,
            ..opts.clone()
        };
        self.inner.import_entries(scope, &governed, &opts).await
    }

    async fn export_erasures(
        &self,
        scope: &MemoryScope,
        request: &hippocamp_memory::erasure::ErasureRequest,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::erasure::ErasurePage> {
        let r = Resource::page(request.limit);
        let (_, call) = self.ask(Action::Export, Some(scope), r, opts).await?;
        self.inner.export_erasures(scope, request, &call).await
    }

    async fn import_erasures(
        &self,
        scope: &MemoryScope,
        erasures: &hippocamp_memory::erasure::ImportedErasures,
        opts: &CallOptions,
    ) -> Result<hippocamp_memory::erasure::ErasureImport> {
        let r = Resource::new(
            "erasures",
            format!(
                "{} erasure records at epoch {}",
                erasures.records.len(),
                erasures.epoch
            ),
        );
        let (_, call) = self.ask(Action::Restore, Some(scope), r, opts).await?;
        self.inner.import_erasures(scope, erasures, &call).await
    }

    async fn list_apps(&self, request: &NamesRequest, opts: &CallOptions) -> Result<NamePage> {
        let r = Resource::fixed("apps", "the apps that hold memory");
        let (_, call) = self.ask(Action::List, None, r, opts).await?;
        self.inner.list_apps(request, &call).await
    }

    async fn list_users(
        &self,
        app: &hippocamp_core::AppName,
        request: &NamesRequest,
        opts: &CallOptions,
    ) -> Result<NamePage> {
        let r = Resource::new("users", format!("the users of app {app}"));
        let (_, call) = self.gate.ask_app(Action::List, app, r, opts).await?;
        self.inner.list_users(app, request, &call).await
    }

    async fn status(&self) -> Result<StoreStatus> {
        self.inner.status().await
    }

    async fn activate_scope(&self, scope: &MemoryScope) -> Result<()> {
        self.inner.activate_scope(scope).await
    }

    fn release_scope(&self, scope: &MemoryScope) {
        self.inner.release_scope(scope);
    }
}
