//! The PostgreSQL memory store runs the whole memory conformance suite and
//! the model test, each store on a schema of its own; with an embedder, the
//! suite again and the vector and hybrid scenarios.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::{MemoryConfig, MemoryStore};
use hippocamp_postgres::PgMemoryStore;

struct PgFactory;

#[async_trait]
impl StoreFactory for PgFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        Arc::new(PgMemoryStore::open(support::database().await, config).unwrap())
    }
}

hippocamp_memory::memory_conformance_tests!(guard = support::have_postgres, PgFactory);

mod embedded {
    use super::*;

    struct EmbeddedPg(hippocamp_embed::hash::HashEmbedder);

    impl EmbeddedPg {
        fn new() -> Self {
            Self(hippocamp_embed::hash::HashEmbedder::new(64))
        }
    }

    #[async_trait]
    impl StoreFactory for EmbeddedPg {
        async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
            let store = PgMemoryStore::open(support::database().await, config)
                .unwrap()
                .with_embedder(Arc::new(self.0.clone()))
                .await
                .unwrap();
            Arc::new(store)
        }

        fn embedded_texts(&self) -> Option<u64> {
            Some(self.0.texts_embedded())
        }
    }

    hippocamp_memory::memory_conformance_tests!(guard = support::have_postgres, EmbeddedPg::new());
    hippocamp_memory::vector_conformance_tests!(guard = support::have_postgres, EmbeddedPg::new());
}
