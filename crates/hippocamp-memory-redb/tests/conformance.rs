//! The durable store runs the whole conformance suite and the model test,
//! each store in its own temporary directory.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_memory::conformance::{Guarded, StoreFactory};
use hippocamp_memory::{MemoryConfig, MemoryStore};
use hippocamp_memory_redb::RedbMemoryStore;

struct RedbFactory;

#[async_trait]
impl StoreFactory for RedbFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbMemoryStore::open(dir.path(), config).unwrap();
        Arc::new(Guarded::new(store, dir))
    }
}

hippocamp_memory::memory_conformance_tests!(RedbFactory);

/// The durable store with an embedder: the whole suite again, and the
/// vector and hybrid scenarios.
mod embedded {
    use super::*;

    struct EmbeddedRedb(hippocamp_embed::hash::HashEmbedder);

    impl EmbeddedRedb {
        fn new() -> Self {
            Self(hippocamp_embed::hash::HashEmbedder::new(64))
        }
    }

    #[async_trait]
    impl StoreFactory for EmbeddedRedb {
        async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
            let dir = tempfile::tempdir().unwrap();
            let store = RedbMemoryStore::open(dir.path(), config)
                .unwrap()
                .with_embedder(Arc::new(self.0.clone()))
                .unwrap();
            Arc::new(Guarded::new(store, dir))
        }

        fn embedded_texts(&self) -> Option<u64> {
            Some(self.0.texts_embedded())
        }
    }

    hippocamp_memory::memory_conformance_tests!(EmbeddedRedb::new());
    hippocamp_memory::vector_conformance_tests!(EmbeddedRedb::new());
}
