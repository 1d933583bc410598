//! The router over the in-memory store, with both strategies, runs the
//! conformance suite; capabilities and status report the routing.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use hippocamp_artifacts::conformance::InMemoryFactory;
use hippocamp_artifacts::{ArtifactLimits, ArtifactStore, InMemoryArtifacts};
use hippocamp_routed::RoutedArtifacts;
use hippocamp_router::{RouterConfig, Strategy};

mod exact_scope {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(hippocamp_routed::artifacts::routed_factory(
        InMemoryFactory::default(),
        RouterConfig::default()
    ));
}

mod shared {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(hippocamp_routed::artifacts::routed_factory(
        InMemoryFactory::default(),
        RouterConfig {
            strategy: Strategy::Shared,
            ..RouterConfig::default()
        }
    ));
}

#[tokio::test]
async fn routing_is_reported() {
    let inner = Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap());
    let routed = RoutedArtifacts::new(inner, RouterConfig::default()).unwrap();
    let routing = routed.capabilities().routing.unwrap();
    // A volatile store runs with the shared strategy, whatever is asked.
    assert_eq!(routing.strategy, Strategy::Shared);
    assert_eq!(routing.max_active_scopes, 1_024);
    let status = routed.status().await.unwrap();
    assert_eq!(status.backend, "memory");
    assert!(status.router.is_some());
}
