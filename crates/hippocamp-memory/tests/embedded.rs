//! The in-memory store with an embedder (feature hashing): the whole
//! conformance suite and the vector and hybrid scenarios (behind the
//! exact-scope router: `hippocamp-routed`).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use hippocamp_memory::MemoryConfig;
use hippocamp_memory::conformance::EmbeddedInMemoryFactory;

mod plain {
    use super::*;
    hippocamp_memory::memory_conformance_tests!(EmbeddedInMemoryFactory::default());
    hippocamp_memory::vector_conformance_tests!(EmbeddedInMemoryFactory::default());
}

/// The embedding races and deadlines on the in-memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_provider_meets_races_and_deadlines() {
    let slow = hippocamp_embed::hash::HashEmbedder::new(64)
        .with_delay(std::time::Duration::from_millis(400));
    let store = hippocamp_memory::InMemoryStore::new(MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(slow));
    hippocamp_memory::conformance::slow_embedder_races(Arc::new(store)).await;
}
