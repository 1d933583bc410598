//! The job-store conformance suite on the durable store.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_outbox::OutboxLimits;
use hippocamp_outbox::conformance::{JobStoreFactory, Opened};
use hippocamp_outbox_redb::RedbJobStore;

struct Durable;

#[async_trait]
impl JobStoreFactory for Durable {
    async fn open(&self, limits: OutboxLimits) -> Opened {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(RedbJobStore::open(dir.path(), limits).unwrap());
        // The probe keeps the directory until the store's last handle goes
        // (a tuple drops its fields in order).
        let kept = (Arc::clone(&store), dir);
        Opened {
            store,
            held_batches: Box::new(move || kept.0.held_batches()),
        }
    }
}

hippocamp_outbox::job_store_conformance_tests!(Durable);
