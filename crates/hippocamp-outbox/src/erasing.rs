//! A memory-store wrapper that tells the outbox about erasures.
//!
//! [`Erasing`] forwards every call; after `delete_session` and
//! `delete_user` succeed in the store it cancels the scope's (the
//! session's) queued jobs, with reason `erased`, and drops their events in
//! the same call; a user's erasure also records the new epoch, so a
//! submission captured before it is refused. Whatever happens between the
//! two steps, nothing queued can undo the erasure: the store advanced the
//! epoch (jobs of the old one are refused at delivery) and remembers the
//! erased events (a repeat is skipped as erased). The services put the
//! memory store they hand out behind it whenever an outbox runs.

use async_trait::async_trait;
use hippocamp_core::{CallOptions, LimitInfo, MemoryScope, Result, SessionId};
use hippocamp_memory::store::Erasure;
use hippocamp_memory::{Capabilities, MemoryLayer, MemoryStore};

use crate::limits::ProcessorOptions;
use crate::outbox::Outbox;

/// Forwards to `inner` and reports erasures to `outbox`.
#[derive(Debug)]
pub struct Erasing<S> {
    inner: S,
    outbox: Outbox,
    processor: Vec<LimitInfo>,
}

impl<S: MemoryStore> Erasing<S> {
    /// Wraps `inner`; its capabilities add the job store's limits.
    pub fn new(inner: S, outbox: Outbox) -> Self {
        Self {
            inner,
            outbox,
            processor: Vec::new(),
        }
    }

    /// Reports the options of the processor that delivers for `inner` in
    /// its capabilities too (`outbox.processor.*`).
    #[must_use]
    pub fn with_processor(mut self, options: &ProcessorOptions) -> Self {
        self.processor = options.describe();
        self
    }
}

#[async_trait]
impl<S: MemoryStore> MemoryLayer for Erasing<S> {
    type Inner = S;

    fn inner(&self) -> &S {
        &self.inner
    }

    fn capabilities(&self) -> Capabilities {
        // An outbox runs in front of this store: its limits are this
        // store's too (an ingest is refused by them).
        let mut caps = self.inner.capabilities();
        caps.async_ingestion = true;
        caps.limits
            .extend(self.outbox.store().capabilities().limits);
        caps.limits.extend(self.processor.iter().cloned());
        caps
    }

    async fn delete_session(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        opts: &CallOptions,
    ) -> Result<u64> {
        // The store decides first: a deletion it refuses (retention, a
        // hold) cancels nothing, so events acknowledged for the session
        // are still delivered. Once it succeeded, the session's erasure
        // epoch has advanced in the store's own transaction: a delivery
        // already in flight, on this server or another, carries the old
        // one and is refused at its commit point, and the queued jobs
        // are cancelled here (a job this misses, because the process
        // died in between, is refused the same way when it runs).
        let deleted = self.inner.delete_session(scope, session, opts).await?;
        self.outbox.erased(scope, Some(session), None).await?;
        Ok(deleted)
    }

    async fn delete_user(&self, scope: &MemoryScope, opts: &CallOptions) -> Result<Erasure> {
        let erasure = self.inner.delete_user(scope, opts).await?;
        self.outbox.erased(scope, None, Some(erasure.epoch)).await?;
        Ok(erasure)
    }
}
