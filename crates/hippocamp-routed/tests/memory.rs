//! The router over the in-memory store runs the conformance suite (asked
//! for either strategy; a volatile store runs shared); capabilities and
//! status report the routing in force.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore};
use hippocamp_routed::RoutedMemory;
use hippocamp_router::{RouterConfig, Strategy};

mod exact_scope {
    use super::*;

    pub(super) struct Factory;

    #[async_trait]
    impl StoreFactory for Factory {
        async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
            let inner = Arc::new(InMemoryStore::new(config).unwrap());
            Arc::new(RoutedMemory::new(inner, RouterConfig::default()).unwrap())
        }
    }

    hippocamp_memory::memory_conformance_tests!(Factory);
}

mod shared {
    use super::*;

    pub(super) struct Factory;

    #[async_trait]
    impl StoreFactory for Factory {
        async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
            let inner = Arc::new(InMemoryStore::new(config).unwrap());
            let config = RouterConfig {
                strategy: Strategy::Shared,
                ..RouterConfig::default()
            };
            Arc::new(RoutedMemory::new(inner, config).unwrap())
        }
    }

    hippocamp_memory::memory_conformance_tests!(Factory);
}

#[tokio::test]
async fn routing_is_reported() {
    let inner = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let routed = RoutedMemory::new(inner, RouterConfig::default()).unwrap();
    let caps = routed.capabilities();
    let routing = caps.routing.unwrap();
    // A volatile store runs with the shared strategy, whatever is asked.
    assert_eq!(routing.strategy, "shared");
    assert_eq!(routing.max_active_scopes, 1_024);
    assert_eq!(routing.max_cold_activations, 256);
    assert_eq!(routing.idle_scope_timeout_ms, 60_000);
    assert!(
        !routing.idle_reclamation,
        "a volatile store is never reclaimed"
    );
    let scope = hippocamp_core::MemoryScope::parse("app", "u").unwrap();
    routed
        .add_entry(
            &scope,
            hippocamp_memory::NewEntry::new("fact"),
            &hippocamp_memory::WriteOptions::default(),
        )
        .await
        .unwrap();
    let status = routed.status().await.unwrap();
    let report = status.router.unwrap();
    assert_eq!(report.active_scopes, 1);
    assert_eq!(report.strategy, "shared");
    assert_eq!(report.reclaimed_workers, 0);
    assert_eq!(report.idle_scope_timeout_ms, 60_000);
}

#[derive(Default)]
struct Embedded(hippocamp_memory::conformance::EmbeddedInMemoryFactory);

#[async_trait]
impl StoreFactory for Embedded {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let inner = self.0.open(config).await;
        Arc::new(RoutedMemory::new(inner, RouterConfig::default()).unwrap())
    }

    fn embedded_texts(&self) -> Option<u64> {
        self.0.embedded_texts()
    }
}

/// With an embedder: the vector and hybrid scenarios behind the router.
mod embedded {
    use super::*;
    hippocamp_memory::vector_conformance_tests!(Embedded::default());
}
