//! Artifacts under the policy's terms: the whole artifact conformance
//! suite behind `GovernedArtifacts` (it must change nothing when the
//! policy sets no terms), then lifetimes at the exact millisecond, legal
//! holds that refuse deletion (and are audited), and bounded sweeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use hippocamp_artifacts::conformance::{InMemoryFactory, WrappedFactory};
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector,
    InMemoryArtifacts, PageRequest, PutOptions, Selector,
};
use hippocamp_core::{CallOptions, Clock, Error, ManualClock};
use hippocamp_governance::{
    AuditEvent, AuditLog, GovernedArtifacts, InMemoryAudit, InMemoryConsents, Policy, PolicyConfig,
    StaticPolicy,
};

fn policy(toml: &str) -> Arc<dyn Policy> {
    let config: PolicyConfig = toml::from_str(toml).unwrap();
    Arc::new(StaticPolicy::new(config, Arc::new(InMemoryConsents::default())).unwrap())
}

mod without_terms {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(WrappedFactory::new(
        InMemoryFactory::default(),
        |s| {
            let clock: Arc<dyn Clock> = hippocamp_core::time::system_clock();
            Arc::new(GovernedArtifacts::new(s, policy(""), clock))
        }
    ));
}

fn c() -> CallOptions {
    CallOptions::default()
}

async fn put(s: &dyn ArtifactStore, scope: &ArtifactScope, name: &str) -> u64 {
    s.put(
        scope,
        &ArtifactName::new(name).unwrap(),
        Body::Bytes(bytes::Bytes::from_static(b"report")),
        &PutOptions::default(),
    )
    .await
    .unwrap()
    .version
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one store's life, step by step
async fn versions_expire_at_the_exact_moment_and_holds_refuse_deletion() {
    let t0 = hippocamp_core::time::now_ms();
    let clock = Arc::new(ManualClock::at(t0));
    let audit = Arc::new(InMemoryAudit::default());
    let p = policy(
        r#"
        [apps.shop]
        artifact_ttl_ms = 60000
        legal_holds = ["held"]
        "#,
    );
    let inner = InMemoryArtifacts::new(ArtifactLimits::default()).unwrap();
    let store = GovernedArtifacts::new(inner, p, clock.clone()).with_audit(audit.clone());
    let alice = ArtifactScope::user("shop", "alice").unwrap();
    let held = ArtifactScope::session("shop", "held", "s1").unwrap();
    let other = ArtifactScope::user("zoo", "alice").unwrap();
    let name = ArtifactName::new("a.txt").unwrap();
    for sc in [&alice, &held, &other] {
        put(&store, sc, "a.txt").await;
        put(&store, sc, "a.txt").await;
    }
    put(&store, &alice, "b.txt").await;
    // Stored "now" by the store's own clock; the policy's clock decides.
    let created = store
        .head(&alice, &name, Selector::Latest, &c())
        .await
        .unwrap()
        .created_at_ms;
    clock.set(created + 59_999);
    assert!(
        store
            .get(&alice, &name, Selector::Latest, None, &c())
            .await
            .is_ok()
    );
    let names = store
        .list_names(&alice, &PageRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(names.items.len(), 2);
    clock.set(created + 60_000);
    assert!(
        matches!(
            store.head(&alice, &name, Selector::Latest, &c()).await,
            Err(Error::NotFound(_))
        ),
        "gone at the exact millisecond"
    );
    // Past every version's lifetime (they were stored within this test).
    clock.set(hippocamp_core::time::now_ms() + 60_000);
    assert!(matches!(
        store.get(&alice, &name, Selector::Latest, None, &c()).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.head(&alice, &name, Selector::Version(1), &c()).await,
        Err(Error::NotFound(_))
    ));
    assert!(
        store
            .list_versions(&alice, &name, &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        store
            .list_names(&alice, &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Another app has no lifetime: untouched.
    assert!(
        store
            .head(&other, &name, Selector::Latest, &c())
            .await
            .is_ok()
    );
    // A held user's versions cannot be deleted, expired or not.
    let refused = store
        .delete(&held, &name, DeleteSelector::All, &c())
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::LegalHold), "{refused}");
    let records = audit.page(None, None).await.unwrap().records;
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].event, records[0].target.as_str()),
        (AuditEvent::Hold, "artifacts")
    );
    // The sweep: bounded batches, the held scope spared.
    let first = store.sweep(2, &c()).await.unwrap();
    assert_eq!((first.deleted, first.more), (2, true));
    let rest = store.sweep(10, &c()).await.unwrap();
    assert_eq!((rest.deleted, rest.more), (1, false));
    let records = audit.page(None, None).await.unwrap().records;
    let expiries: Vec<Option<u64>> = records
        .iter()
        .filter(|r| r.event == AuditEvent::Expiry && r.target == "artifacts")
        .map(|r| r.count)
        .collect();
    assert_eq!(
        expiries,
        [Some(2), Some(1)],
        "each sweep that removed something is audited"
    );
    let inner = hippocamp_artifacts::ArtifactLayer::inner(&store);
    assert!(
        inner
            .list_names(&alice, &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            .is_empty(),
        "expired versions are gone from the store"
    );
    let kept = inner
        .list_versions(&held, &name, &PageRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(kept.items.len(), 2, "a held scope is never swept");
    assert_eq!(
        inner
            .list_versions(&other, &name, &PageRequest::default(), &c())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
}
