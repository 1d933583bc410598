//! The in-memory store with an embedder (feature hashing): the whole
//! conformance suite, the vector and hybrid scenarios, and both again
//! behind the exact-scope router.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_memory::conformance::{EmbeddedInMemoryFactory, StoreFactory};
use hippocamp_memory::{MemoryConfig, MemoryStore, RoutedMemory};
use hippocamp_router::RouterConfig;

mod plain {
    use super::*;
    hippocamp_memory::memory_conformance_tests!(EmbeddedInMemoryFactory::default());
    hippocamp_memory::vector_conformance_tests!(EmbeddedInMemoryFactory::default());
}

#[derive(Default)]
struct Routed(EmbeddedInMemoryFactory);

#[async_trait]
impl StoreFactory for Routed {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let inner = self.0.open(config).await;
        Arc::new(RoutedMemory::new(inner, RouterConfig::default()).unwrap())
    }

    fn embedded_texts(&self) -> Option<u64> {
        self.0.embedded_texts()
    }
}

mod routed {
    use super::*;
    hippocamp_memory::vector_conformance_tests!(Routed::default());
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
