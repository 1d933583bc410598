//! The per-call context a tool gets: bound to one invocation's exact
//! scope, granting only the operations the tool declared, and never a
//! store handle.
//!
//! Every store reply that passes through it is verified (the stores are
//! held behind `ScopeChecked`, whatever the caller handed in): one record
//! of another scope, name or version refuses the whole reply as
//! `InvalidReply`, and a refused mutation records no effect. Successful
//! mutations record metadata-only `context_effects` for the tool event.
//! Attachments (`artifact_attach`) are verified (scope, name, version,
//! size, SHA-256), kept privately with their bytes for the next model
//! request only, and bounded: 8 per request, 10 MiB together.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use hippocamp_artifacts::{
    ArtifactMeta, ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector, Page,
    PageRequest, PutOptions, Selector,
};
use hippocamp_core::{
    CallOptions, Caller, Deadline, EntryId, ErasureFence, MemoryScope, SessionId, Sha256Digest,
};
use hippocamp_memory::{
    AddOutcome, Event, IngestReport, MemoryStore, NewEntry, SearchRequest, SearchResults,
    WriteOptions,
};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::capability::{Capability, CapabilitySet};
use crate::error::{AgentError, Bound, Result};

/// Most artifacts attached to one model request.
pub const MAX_ATTACHMENTS: usize = 8;
/// Most bytes attached to one model request, all artifacts together.
pub const MAX_ATTACHMENT_BYTES: u64 = 10 << 20;

/// An artifact attached to the next model request.
#[derive(Clone)]
pub struct Attachment {
    /// Its verified record.
    pub meta: ArtifactMeta,
    /// Its verified bytes.
    pub bytes: Bytes,
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes.
        f.debug_struct("Attachment")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

/// What one invocation may reach; owned by the runner, shared by the
/// contexts of its calls.
pub(crate) struct Invocation {
    pub(crate) scope: MemoryScope,
    pub(crate) session: SessionId,
    pub(crate) id: String,
    pub(crate) deadline: Deadline,
    /// Who the calls are made for (the audit log and the policy read it).
    caller: Caller,
    /// The erasure fence read when the invocation started: memory writes
    /// carry it, so a turn still running after the user's (or, for its
    /// own session, the session's) erasure writes nothing.
    fence: Option<ErasureFence>,
    memory: Option<Arc<dyn MemoryStore>>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    attachments: Mutex<Vec<Attachment>>,
}

impl fmt::Debug for Invocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invocation")
            .field("scope", &self.scope)
            .field("session", &self.session)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Invocation {
    /// An invocation over `memory` and `artifacts`, each put behind its
    /// reply check here, so no tool sees an unchecked reply.
    pub(crate) fn new(
        scope: MemoryScope,
        session: SessionId,
        invocation_id: String,
        deadline: Deadline,
        memory: Option<Arc<dyn MemoryStore>>,
        artifacts: Option<Arc<dyn ArtifactStore>>,
    ) -> Self {
        Self {
            scope,
            session,
            id: invocation_id,
            deadline,
            caller: Caller::default(),
            fence: None,
            memory: memory.map(|m| -> Arc<dyn MemoryStore> {
                Arc::new(hippocamp_memory::ScopeChecked::new(m))
            }),
            artifacts: artifacts.map(|a| -> Arc<dyn ArtifactStore> {
                Arc::new(hippocamp_artifacts::ScopeChecked::new(a))
            }),
            attachments: Mutex::default(),
        }
    }

    /// Its calls are made for `caller`.
    #[must_use]
    pub(crate) fn on_behalf_of(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Its memory writes carry `fence`.
    #[must_use]
    pub(crate) fn fenced(mut self, fence: Option<ErasureFence>) -> Self {
        self.fence = fence;
        self
    }

    /// The attachments staged since the last call, for the next request.
    pub(crate) fn take_attachments(&self) -> Vec<Attachment> {
        std::mem::take(&mut *self.attachments.lock())
    }
}

/// The context of one tool call.
pub struct ToolContext {
    invocation: Arc<Invocation>,
    tool: String,
    declared: CapabilitySet,
    call_id: String,
    effects: Mutex<Vec<Value>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("scope", &self.invocation.scope)
            .field("session", &self.invocation.session)
            .field("tool", &self.tool)
            .field("declared", &self.declared)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

fn scope_json(s: &ArtifactScope) -> Value {
    serde_json::to_value(s).unwrap_or(Value::Null)
}

impl ToolContext {
    pub(crate) fn new(
        invocation: Arc<Invocation>,
        tool: &str,
        declared: CapabilitySet,
        call_id: &str,
    ) -> Self {
        Self {
            invocation,
            tool: tool.to_owned(),
            declared,
            call_id: call_id.to_owned(),
            effects: Mutex::default(),
        }
    }

    /// A context outside a runner (the MCP server's): bound to `scope`
    /// and `session`, granting `declared` for `tool`, until `deadline`,
    /// its calls made for `caller`. Its stores are put behind their reply
    /// checks like a runner's.
    #[allow(clippy::too_many_arguments)] // each is one piece of the authority
    pub fn standalone(
        scope: MemoryScope,
        session: SessionId,
        memory: Option<Arc<dyn MemoryStore>>,
        artifacts: Option<Arc<dyn ArtifactStore>>,
        tool: &str,
        declared: CapabilitySet,
        call_id: &str,
        deadline: Deadline,
        caller: Caller,
    ) -> Self {
        let inv = Invocation::new(
            scope,
            session,
            call_id.to_owned(),
            deadline,
            memory,
            artifacts,
        )
        .on_behalf_of(caller);
        Self::new(Arc::new(inv), tool, declared, call_id)
    }

    /// The exact memory scope of the invocation.
    pub fn scope(&self) -> &MemoryScope {
        &self.invocation.scope
    }

    /// The session of the invocation.
    pub fn session(&self) -> &SessionId {
        &self.invocation.session
    }

    /// The invocation's id.
    pub fn invocation_id(&self) -> &str {
        &self.invocation.id
    }

    /// This call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// What the tool declared.
    pub fn capabilities(&self) -> CapabilitySet {
        self.declared
    }

    /// The effects recorded so far (drained by the runner).
    pub(crate) fn take_effects(&self) -> Vec<Value> {
        std::mem::take(&mut *self.effects.lock())
    }

    fn allow(&self, c: Capability) -> Result<()> {
        if self.declared.contains(c) {
            Ok(())
        } else {
            Err(AgentError::CapabilityDenied {
                tool: self.tool.clone(),
                capability: c,
            })
        }
    }

    fn call(&self) -> CallOptions {
        CallOptions::until(self.invocation.deadline).on_behalf_of(self.invocation.caller)
    }

    /// The options of a memory write: the call's, and the invocation's
    /// fence (the session's half only for its own session).
    fn write(&self, session: Option<&SessionId>) -> WriteOptions {
        let mut w = WriteOptions::new(self.call());
        if let Some(f) = self.invocation.fence {
            w.epoch = Some(f.epoch);
            if session == Some(&self.invocation.session) {
                w.session_epoch = Some(f.session_epoch);
            }
        }
        w
    }

    fn memory(&self, c: Capability) -> Result<&Arc<dyn MemoryStore>> {
        self.allow(c)?;
        self.invocation
            .memory
            .as_ref()
            .ok_or(AgentError::Service(hippocamp_core::Error::MemoryDisabled))
    }

    fn artifacts(&self, c: Capability) -> Result<&Arc<dyn ArtifactStore>> {
        self.allow(c)?;
        self.invocation.artifacts.as_ref().ok_or_else(|| {
            AgentError::Service(hippocamp_core::Error::Unavailable(
                "this runner has no artifact store".into(),
            ))
        })
    }

    /// The artifact scope a tool acts on: the user's, or one of the
    /// user's sessions.
    pub fn artifact_scope(&self, session: Option<&SessionId>) -> Result<ArtifactScope> {
        let s = &self.invocation.scope;
        Ok(match session {
            None => ArtifactScope::user(s.app().as_str(), s.user().as_str())?,
            Some(id) => ArtifactScope::session(s.app().as_str(), s.user().as_str(), id.as_str())?,
        })
    }

    fn effect(&self, e: Value) {
        self.effects.lock().push(e);
    }

    /// Searches the user's memory (`memory_search`).
    pub async fn memory_search(&self, request: &SearchRequest) -> Result<SearchResults> {
        let m = self.memory(Capability::MemorySearch)?;
        Ok(m.search(self.scope(), request, &self.call()).await?)
    }

    /// Adds an entry (`memory_add`).
    pub async fn memory_add(&self, entry: NewEntry) -> Result<AddOutcome> {
        let m = self.memory(Capability::MemoryAdd)?;
        let out = m.add_entry(self.scope(), entry, &self.write(None)).await?;
        self.effect(json!({"kind": "memory_delta", "operation": "add",
            "entry": {"id": out.entry.id.to_string()}, "duplicate": out.duplicate}));
        Ok(out)
    }

    /// Ingests events into `session` (`memory_add`).
    pub async fn memory_ingest(
        &self,
        session: &SessionId,
        events: &[Event],
    ) -> Result<IngestReport> {
        let m = self.memory(Capability::MemoryAdd)?;
        let r = m
            .add_events(self.scope(), session, events, &self.write(Some(session)))
            .await?;
        let added: Vec<String> = r.added.iter().map(|e| e.entry_id.to_string()).collect();
        self.effect(json!({"kind": "memory_delta", "operation": "ingest",
            "session_id": session.as_str(), "entries": added}));
        Ok(r)
    }

    /// Deletes an entry (`memory_delete`); how many were removed.
    pub async fn memory_delete(&self, id: &EntryId) -> Result<u64> {
        let m = self.memory(Capability::MemoryDelete)?;
        let n = m.delete_entry(self.scope(), id, &self.call()).await?;
        self.effect(json!({"kind": "memory_delta", "operation": "delete",
            "entry": {"id": id.to_string()}, "deleted": n}));
        Ok(n)
    }

    /// Deletes a session's entries (`memory_delete`).
    pub async fn memory_forget_session(&self, session: &SessionId) -> Result<u64> {
        let m = self.memory(Capability::MemoryDelete)?;
        let n = m
            .delete_session(self.scope(), session, &self.call())
            .await?;
        self.effect(
            json!({"kind": "memory_delta", "operation": "delete_session",
            "session_id": session.as_str(), "deleted": n}),
        );
        Ok(n)
    }

    /// Lists artifact names (`artifact_list`).
    pub async fn artifact_list(
        &self,
        session: Option<&SessionId>,
        page: &PageRequest<ArtifactName>,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let a = self.artifacts(Capability::ArtifactList)?;
        let scope = self.artifact_scope(session)?;
        Ok(a.list_names(&scope, page, &self.call()).await?)
    }

    /// Lists an artifact's versions (`artifact_list_versions`).
    pub async fn artifact_versions(
        &self,
        session: Option<&SessionId>,
        name: &ArtifactName,
        page: &PageRequest<u64>,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let a = self.artifacts(Capability::ArtifactListVersions)?;
        let scope = self.artifact_scope(session)?;
        Ok(a.list_versions(&scope, name, page, &self.call()).await?)
    }

    /// Reads a version of at most `max_bytes` bytes (`artifact_get`);
    /// the bytes are SHA-256 checked by the store's read.
    pub async fn artifact_get(
        &self,
        session: Option<&SessionId>,
        name: &ArtifactName,
        selector: Selector,
        max_bytes: u64,
    ) -> Result<(ArtifactMeta, Bytes)> {
        let a = self.artifacts(Capability::ArtifactGet)?;
        let scope = self.artifact_scope(session)?;
        read_checked(a.as_ref(), &scope, name, selector, max_bytes, self.call()).await
    }

    /// Stores a new version (`artifact_put`).
    pub async fn artifact_put(
        &self,
        session: Option<&SessionId>,
        name: &ArtifactName,
        bytes: Bytes,
        mut opts: PutOptions,
    ) -> Result<ArtifactMeta> {
        let a = self.artifacts(Capability::ArtifactPut)?;
        let scope = self.artifact_scope(session)?;
        opts.call = self.call();
        let meta = a.put(&scope, name, Body::from(bytes), &opts).await?;
        self.effect(json!({"kind": "artifact_delta", "operation": "put",
            "scope": scope_json(&scope), "name": name.as_str(), "version": meta.version,
            "digest": meta.sha256.to_string(), "size": meta.size,
            "mime_type": meta.mime_type.as_str()}));
        Ok(meta)
    }

    /// Deletes versions (`artifact_delete`); the versions removed.
    pub async fn artifact_delete(
        &self,
        session: Option<&SessionId>,
        name: &ArtifactName,
        selector: DeleteSelector,
    ) -> Result<Vec<u64>> {
        let a = self.artifacts(Capability::ArtifactDelete)?;
        let scope = self.artifact_scope(session)?;
        let gone = a.delete(&scope, name, selector, &self.call()).await?;
        // Unlike the reference, the delta names every version removed.
        self.effect(json!({"kind": "artifact_delta", "operation": "delete",
            "scope": scope_json(&scope), "name": name.as_str(), "versions": gone}));
        Ok(gone)
    }

    /// Attaches a version to the next model request (`artifact_attach`):
    /// read, verified against the request and its digest, and kept with
    /// its bytes in the invocation (never in an event or a log).
    pub async fn artifact_attach(
        &self,
        session: Option<&SessionId>,
        name: &ArtifactName,
        selector: Selector,
    ) -> Result<ArtifactMeta> {
        let a = self.artifacts(Capability::ArtifactAttach)?;
        let scope = self.artifact_scope(session)?;
        let (meta, bytes) = read_checked(
            a.as_ref(),
            &scope,
            name,
            selector,
            MAX_ATTACHMENT_BYTES,
            self.call(),
        )
        .await?;
        {
            let mut staged = self.invocation.attachments.lock();
            let same = |x: &Attachment| x.meta.name == meta.name && x.meta.version == meta.version;
            let others: u64 = staged
                .iter()
                .filter(|x| !same(x))
                .map(|x| x.meta.size)
                .sum();
            let count = staged.iter().filter(|x| !same(x)).count() + 1;
            if count > MAX_ATTACHMENTS {
                return Err(AgentError::BoundExceeded(Bound::Attachments(count as u64)));
            }
            if others + meta.size > MAX_ATTACHMENT_BYTES {
                return Err(AgentError::BoundExceeded(Bound::AttachmentBytes(
                    others + meta.size,
                )));
            }
            // Re-attaching the same version replaces it.
            staged.retain(|x| !same(x));
            staged.push(Attachment {
                meta: meta.clone(),
                bytes,
            });
        }
        self.effect(
            json!({"kind": "artifact_attachment", "scope": scope_json(&scope),
            "name": name.as_str(), "version": meta.version,
            "digest": meta.sha256.to_string(), "size": meta.size,
            "mime_type": meta.mime_type.as_str()}),
        );
        Ok(meta)
    }
}

/// Reads a version of at most `max_bytes`, checking the record against
/// the request and the bytes against its size and SHA-256 (tools,
/// placeholders and MCP resources all read through it).
pub async fn read_checked(
    store: &dyn ArtifactStore,
    scope: &ArtifactScope,
    name: &ArtifactName,
    selector: Selector,
    max_bytes: u64,
    call: CallOptions,
) -> Result<(ArtifactMeta, Bytes)> {
    let head = store.head(scope, name, selector, &call).await?;
    if head.size > max_bytes {
        return Err(AgentError::Service(hippocamp_core::Error::invalid(
            hippocamp_core::Field::Body,
            hippocamp_core::Problem::TooLong {
                len: hippocamp_core::limits::to_usize(head.size),
                max: hippocamp_core::limits::to_usize(max_bytes),
            },
        )));
    }
    // Read exactly the version the head named, so the two agree.
    let read = store
        .get(scope, name, Selector::Version(head.version), None, &call)
        .await?;
    let meta = read.meta.clone();
    let bytes = read.bytes().await?;
    let bad = |detail: &str| {
        AgentError::Service(hippocamp_core::Error::InvalidReply {
            service: "the artifact store",
            detail: detail.to_owned(),
        })
    };
    if meta.scope != *scope || meta.name != *name || meta.version != head.version {
        return Err(bad("it returned another version than the one asked for"));
    }
    if bytes.len() as u64 != meta.size || Sha256Digest::of(&bytes) != meta.sha256 {
        return Err(bad("the bytes do not match the record's size and SHA-256"));
    }
    Ok((meta, bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hippocamp_artifacts::{ArtifactLimits, InMemoryArtifacts};
    use hippocamp_memory::{InMemoryStore, MemoryConfig};
    use proptest::prelude::*;

    use super::*;

    /// Performs the operation `c` names; whether it was denied.
    async fn attempt(ctx: &ToolContext, c: Capability, n: usize) -> bool {
        let name = ArtifactName::new(format!("a{}.txt", n % 3)).unwrap();
        let r: Result<()> = match c {
            Capability::MemorySearch => ctx
                .memory_search(&SearchRequest::new("fact"))
                .await
                .map(drop),
            Capability::MemoryAdd => ctx
                .memory_add(NewEntry::new(format!("fact {n}")))
                .await
                .map(drop),
            Capability::MemoryDelete => ctx
                .memory_forget_session(&SessionId::new("s").unwrap())
                .await
                .map(drop),
            Capability::ArtifactPut => ctx
                .artifact_put(None, &name, Bytes::from_static(b"x"), PutOptions::default())
                .await
                .map(drop),
            Capability::ArtifactGet => ctx
                .artifact_get(None, &name, Selector::Latest, 1 << 20)
                .await
                .map(drop),
            Capability::ArtifactList => ctx
                .artifact_list(None, &PageRequest::default())
                .await
                .map(drop),
            Capability::ArtifactListVersions => ctx
                .artifact_versions(None, &name, &PageRequest::default())
                .await
                .map(drop),
            Capability::ArtifactDelete => ctx
                .artifact_delete(None, &name, DeleteSelector::All)
                .await
                .map(drop),
            Capability::ArtifactAttach => ctx
                .artifact_attach(None, &name, Selector::Latest)
                .await
                .map(drop),
        };
        matches!(r, Err(AgentError::CapabilityDenied { capability, .. }) if capability == c)
    }

    async fn state(
        m: &InMemoryStore,
        a: &InMemoryArtifacts,
        inv: &Invocation,
    ) -> (u64, u64, usize) {
        let mem = m.status().await.unwrap().entries;
        let art = a.status().await.unwrap().artifacts.unwrap_or(0);
        (mem, art, inv.attachments.lock().len())
    }

    #[tokio::test]
    async fn attachments_are_bounded_in_count_and_bytes_and_replace_themselves() {
        let limits = ArtifactLimits {
            max_artifact_bytes: 16 << 20,
            ..ArtifactLimits::default()
        };
        let a = Arc::new(InMemoryArtifacts::new(limits).unwrap());
        let scope = ArtifactScope::user("app", "u").unwrap();
        let put = |name: String, size: usize| {
            let a = Arc::clone(&a);
            let scope = scope.clone();
            async move {
                a.put(
                    &scope,
                    &ArtifactName::new(name).unwrap(),
                    Body::from(vec![7u8; size]),
                    &PutOptions::default(),
                )
                .await
                .unwrap();
            }
        };
        for i in 0..9 {
            put(format!("small{i}"), 10).await;
        }
        put("big1".into(), 6 << 20).await;
        put("big2".into(), 6 << 20).await;
        let inv = Arc::new(Invocation::new(
            MemoryScope::parse("app", "u").unwrap(),
            SessionId::new("s").unwrap(),
            "inv".into(),
            Deadline::after(std::time::Duration::from_secs(30)),
            None,
            Some(a.clone() as Arc<dyn ArtifactStore>),
        ));
        let ctx = ToolContext::new(
            Arc::clone(&inv),
            "t",
            CapabilitySet::of(&[Capability::ArtifactAttach]),
            "c",
        );
        let name = |n: &str| ArtifactName::new(n).unwrap();
        ctx.artifact_attach(None, &name("big1"), Selector::Latest)
            .await
            .unwrap();
        let e = ctx
            .artifact_attach(None, &name("big2"), Selector::Latest)
            .await
            .unwrap_err();
        assert!(
            matches!(e, AgentError::BoundExceeded(Bound::AttachmentBytes(_))),
            "{e}"
        );
        // Attaching the same version again replaces it.
        ctx.artifact_attach(None, &name("big1"), Selector::Latest)
            .await
            .unwrap();
        for i in 0..7 {
            ctx.artifact_attach(None, &name(&format!("small{i}")), Selector::Latest)
                .await
                .unwrap();
        }
        let e = ctx
            .artifact_attach(None, &name("small7"), Selector::Latest)
            .await
            .unwrap_err();
        assert!(
            matches!(e, AgentError::BoundExceeded(Bound::Attachments(9))),
            "{e}"
        );
        let staged = inv.take_attachments();
        assert_eq!(staged.len(), 8);
        assert_eq!(
            ctx.take_effects().len(),
            9,
            "one effect per successful attach"
        );
        assert!(
            inv.take_attachments().is_empty(),
            "taken once, for one request"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random declarations and operation sequences: an undeclared
        /// operation is always denied and changes nothing; a declared one
        /// is never denied.
        #[test]
        fn undeclared_operations_are_never_performed(
            declared in proptest::collection::vec(0usize..9, 0..9),
            ops in proptest::collection::vec(0usize..9, 1..30),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let caps: Vec<Capability> = declared.iter().map(|&i| Capability::ALL[i]).collect();
                let set = CapabilitySet::of(&caps);
                let m = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
                let a = Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap());
                let inv = Arc::new(Invocation::new(
                    MemoryScope::parse("app", "u").unwrap(),
                    SessionId::new("s").unwrap(),
                    "inv".into(),
                    Deadline::after(std::time::Duration::from_secs(30)),
                    Some(m.clone() as Arc<dyn MemoryStore>),
                    Some(a.clone() as Arc<dyn ArtifactStore>),
                ));
                let ctx = ToolContext::new(Arc::clone(&inv), "t", set, "c");
                for (n, &op) in ops.iter().enumerate() {
                    let c = Capability::ALL[op];
                    let before = state(&m, &a, &inv).await;
                    let effects_before = ctx.effects.lock().len();
                    let denied = attempt(&ctx, c, n).await;
                    assert_eq!(denied, !set.contains(c), "{c} declared={set:?}");
                    if denied {
                        assert_eq!(state(&m, &a, &inv).await, before, "{c} changed state");
                        assert_eq!(ctx.effects.lock().len(), effects_before);
                    }
                }
            });
        }
    }
}
