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
    hippocamp_memory::memory_conformance_tests!(EmbeddedInMemoryFactory);
    hippocamp_memory::vector_conformance_tests!(EmbeddedInMemoryFactory);
}

struct Routed;

#[async_trait]
impl StoreFactory for Routed {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let inner = EmbeddedInMemoryFactory.open(config).await;
        Arc::new(RoutedMemory::new(inner, RouterConfig::default()).unwrap())
    }
}

mod routed {
    use super::*;
    hippocamp_memory::vector_conformance_tests!(Routed);
}
