//! One gate for every kind of data: agent sessions behind
//! `GovernedSessions` (the whole session conformance suite, then consent
//! on appends and holds on erasures), consent on artifact writes, holds on
//! corrections, and an app the operator suspended: every operation on its
//! memory, sessions and artifacts (its own included) is refused before a
//! store is touched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector,
    InMemoryArtifacts, PageRequest, PutOptions, Selector,
};
use hippocamp_core::{CallOptions, Clock, Error, ManualClock, MemoryScope, SessionId};
use hippocamp_governance::{
    AuditEvent, AuditLog, ConsentScope, ConsentStore, Gate, GovernedArtifacts, GovernedSessions,
    InMemoryAudit, InMemoryConsents, NewConsent, Policy, PolicyChecked, PolicyConfig, StaticPolicy,
};
use hippocamp_memory::{
    EntryUpdate, InMemoryStore, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions,
};
use hippocamp_sessions::conformance::SessionStoreFactory;
use hippocamp_sessions::{
    AppendOptions, InMemorySessions, SessionEvent, SessionLimits, SessionStore,
};

fn policy(toml: &str, consents: Arc<dyn ConsentStore>) -> Arc<dyn Policy> {
    let config: PolicyConfig = toml::from_str(toml).unwrap();
    Arc::new(StaticPolicy::new(config, consents).unwrap())
}

fn gate(policy: Arc<dyn Policy>, audit: Arc<InMemoryAudit>) -> Gate {
    let clock: Arc<dyn Clock> = hippocamp_core::time::system_clock();
    Gate::new(policy, clock, hippocamp_core::deadline::DEFAULT_TIMEOUT).with_audit(audit)
}

/// In-memory session stores behind a gate whose policy sets nothing.
struct Governed;

#[async_trait]
impl SessionStoreFactory for Governed {
    async fn open(&self, limits: SessionLimits) -> Arc<dyn SessionStore> {
        let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
        let g = gate(policy("", consents), Arc::default());
        Arc::new(GovernedSessions::new(
            InMemorySessions::new(limits).unwrap(),
            g,
        ))
    }
}

mod sessions_without_terms {
    hippocamp_sessions::session_store_conformance_tests!(super::Governed);
}

fn c() -> CallOptions {
    CallOptions::default()
}

fn unit<T>(r: Result<T, Error>) -> Result<(), Error> {
    r.map(|_| ())
}

fn sid() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn event(id: &str) -> SessionEvent {
    SessionEvent::text(id, "user", 1, "hello")
}

#[tokio::test]
async fn an_append_needs_consent_to_memory_and_a_held_user_keeps_their_sessions() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let audit = Arc::new(InMemoryAudit::default());
    let p = policy(
        r#"
        [apps.support]
        consent_required = true
        legal_holds = ["bob"]
        "#,
        consents.clone(),
    );
    let inner = Arc::new(InMemorySessions::new(SessionLimits::default()).unwrap());
    let s = GovernedSessions::new(Arc::clone(&inner), gate(p, audit.clone()));
    let alice = MemoryScope::parse("support", "alice").unwrap();
    let bob = MemoryScope::parse("support", "bob").unwrap();
    let a = AppendOptions::default();
    assert!(matches!(
        s.append(&alice, &sid(), &event("e1"), &a).await,
        Err(Error::ConsentRequired(_))
    ));
    // A consent to artifacts does not cover the conversation.
    let only = |scope| NewConsent {
        consent_id: "c-1".into(),
        scope,
    };
    consents
        .put(&alice, only(ConsentScope::Artifacts), 0)
        .await
        .unwrap();
    assert!(matches!(
        s.append(&alice, &sid(), &event("e1"), &a).await,
        Err(Error::ConsentRequired(_))
    ));
    assert!(
        inner
            .list(&alice, None, None, &c())
            .await
            .unwrap()
            .items
            .is_empty(),
        "a refused append stores nothing"
    );
    consents
        .put(&alice, only(ConsentScope::Memory), 0)
        .await
        .unwrap();
    s.append(&alice, &sid(), &event("e1"), &a).await.unwrap();
    consents
        .put(&bob, only(ConsentScope::All), 0)
        .await
        .unwrap();
    s.append(&bob, &sid(), &event("e1"), &a).await.unwrap();
    assert!(matches!(
        s.delete(&bob, &sid(), &c()).await,
        Err(Error::LegalHold)
    ));
    assert!(matches!(
        s.delete_user(&bob, &c()).await,
        Err(Error::LegalHold)
    ));
    assert_eq!(inner.get(&bob, &sid(), &c()).await.unwrap().events.len(), 1);
    assert!(s.delete(&alice, &sid(), &c()).await.unwrap());
    let seen: Vec<(AuditEvent, String, String)> = audit
        .page(None, None)
        .await
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.event, r.target, r.outcome))
        .collect();
    let expect = |e, t: &str, o: &str| (e, t.to_owned(), o.to_owned());
    assert_eq!(
        seen,
        [
            expect(AuditEvent::Denial, "append", "consent_required"),
            expect(AuditEvent::Denial, "append", "consent_required"),
            expect(AuditEvent::Hold, "delete", "legal_hold"),
            expect(AuditEvent::Hold, "erase", "legal_hold"),
            expect(AuditEvent::Erasure, "agent_session", "ok"),
        ]
    );
}

#[tokio::test]
async fn an_artifact_write_needs_consent_to_artifacts() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let p = policy("[apps.shop]\nconsent_required = true", consents.clone());
    let clock: Arc<dyn Clock> = hippocamp_core::time::system_clock();
    let inner = Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap());
    let store = GovernedArtifacts::new(Arc::clone(&inner), p, clock);
    let alice = MemoryScope::parse("shop", "alice").unwrap();
    let scope = ArtifactScope::user("shop", "alice").unwrap();
    let name = ArtifactName::new("a.txt").unwrap();
    let opts = PutOptions::default();
    let put = || store.put(&scope, &name, Body::from("bytes"), &opts);
    assert!(matches!(put().await, Err(Error::ConsentRequired(_))));
    let consent = |scope| NewConsent {
        consent_id: "c-1".into(),
        scope,
    };
    consents
        .put(&alice, consent(ConsentScope::Memory), 0)
        .await
        .unwrap();
    assert!(matches!(put().await, Err(Error::ConsentRequired(_))));
    let names = inner
        .list_names(&scope, &PageRequest::default(), &c())
        .await
        .unwrap();
    assert!(names.items.is_empty(), "a refused put stores nothing");
    consents
        .put(&alice, consent(ConsentScope::Artifacts), 0)
        .await
        .unwrap();
    assert_eq!(put().await.unwrap().version, 1);
    // Reads need no consent: a withdrawal stops new writes; erasure is
    // what removes what was written.
    consents.remove(&alice, 1).await.unwrap();
    store
        .head(&scope, &name, Selector::Latest, &c())
        .await
        .unwrap();
}

/// A held user's entries cannot be corrected; another user's correction
/// is made and audited (content-free).
#[tokio::test]
async fn a_held_users_entries_cannot_be_corrected_and_corrections_are_audited() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let p = policy("[apps.shop]\nlegal_holds = [\"bob\"]", consents);
    let clock = Arc::new(ManualClock::at(1_000));
    let audit = Arc::new(InMemoryAudit::default());
    let store = PolicyChecked::new(
        InMemoryStore::new(MemoryConfig::default()).unwrap(),
        p,
        clock,
    )
    .with_audit(audit.clone());
    let bob = MemoryScope::parse("shop", "bob").unwrap();
    let alice = MemoryScope::parse("shop", "alice").unwrap();
    let w = WriteOptions::default();
    let update = EntryUpdate {
        content: "changed".into(),
        metadata: serde_json::Map::new(),
    };
    let mut ids = Vec::new();
    for s in [&bob, &alice] {
        let e = store
            .add_entry(s, NewEntry::new("evidence"), &w)
            .await
            .unwrap()
            .entry;
        ids.push(e.id);
    }
    assert!(matches!(
        store.update_entry(&bob, &ids[0], &update, &w).await,
        Err(Error::LegalHold)
    ));
    let kept = store.get_entry(&bob, &ids[0], &c()).await.unwrap();
    assert_eq!(kept.content, "evidence");
    store
        .update_entry(&alice, &ids[1], &update, &w)
        .await
        .unwrap();
    let seen: Vec<(AuditEvent, String, String)> = audit
        .page(None, None)
        .await
        .unwrap()
        .records
        .into_iter()
        .map(|r| (r.event, r.target, r.outcome))
        .collect();
    assert_eq!(
        seen,
        [
            (
                AuditEvent::Hold,
                "update".to_owned(),
                "legal_hold".to_owned()
            ),
            (AuditEvent::Correction, "entry".to_owned(), "ok".to_owned()),
        ]
    );
}

/// A suspended app is out of reach on every kind of data, and the stores
/// underneath are never asked.
#[tokio::test]
#[allow(clippy::too_many_lines)] // every operation of every kind, in turn
async fn a_suspended_app_is_refused_everything_before_a_store_is_touched() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let frozen = policy("[apps.shop]\nsuspended = true", consents);
    let audit = Arc::new(InMemoryAudit::default());
    let clock: Arc<dyn Clock> = hippocamp_core::time::system_clock();
    let scope = MemoryScope::parse("shop", "alice").unwrap();
    let user = ArtifactScope::user("shop", "alice").unwrap();
    let own = ArtifactScope::app("shop").unwrap();
    let name = ArtifactName::new("a.txt").unwrap();
    let w = WriteOptions::default();

    // What the app held before it was suspended.
    let memory = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let sessions = Arc::new(InMemorySessions::new(SessionLimits::default()).unwrap());
    let artifacts = Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap());
    let id = memory
        .add_entry(&scope, NewEntry::new("a fact"), &w)
        .await
        .unwrap()
        .entry
        .id;
    sessions
        .append(&scope, &sid(), &event("e1"), &AppendOptions::default())
        .await
        .unwrap();
    for s in [&user, &own] {
        artifacts
            .put(s, &name, Body::from("bytes"), &PutOptions::default())
            .await
            .unwrap();
    }

    let mem = PolicyChecked::new(Arc::clone(&memory), frozen.clone(), clock.clone())
        .with_audit(audit.clone());
    let ses = GovernedSessions::new(Arc::clone(&sessions), gate(frozen.clone(), audit.clone()));
    let art =
        GovernedArtifacts::new(Arc::clone(&artifacts), frozen, clock).with_audit(audit.clone());
    let suspended = |r: Result<(), Error>| {
        assert!(
            matches!(&r, Err(Error::PolicyDenied { reason }) if reason == "app_suspended"),
            "{r:?}"
        );
    };
    suspended(unit(mem.add_entry(&scope, NewEntry::new("x"), &w).await));
    suspended(unit(mem.get_entry(&scope, &id, &c()).await));
    suspended(unit(
        mem.search(&scope, &SearchRequest::new("fact"), &c()).await,
    ));
    suspended(unit(mem.delete_entry(&scope, &id, &c()).await));
    suspended(unit(mem.delete_user(&scope, &c()).await));
    suspended(unit(
        ses.append(&scope, &sid(), &event("e2"), &AppendOptions::default())
            .await,
    ));
    suspended(unit(ses.get(&scope, &sid(), &c()).await));
    suspended(unit(ses.list(&scope, None, None, &c()).await));
    suspended(unit(ses.delete(&scope, &sid(), &c()).await));
    for sc in [&user, &own] {
        suspended(unit(
            art.put(sc, &name, Body::from("more"), &PutOptions::default())
                .await,
        ));
        suspended(unit(art.get(sc, &name, Selector::Latest, None, &c()).await));
        suspended(unit(
            art.list_names(sc, &PageRequest::default(), &c()).await,
        ));
        suspended(unit(art.delete(sc, &name, DeleteSelector::All, &c()).await));
    }
    // Nothing underneath changed.
    memory.get_entry(&scope, &id, &c()).await.unwrap();
    assert_eq!(
        sessions
            .get(&scope, &sid(), &c())
            .await
            .unwrap()
            .events
            .len(),
        1
    );
    for sc in [&user, &own] {
        let v = artifacts
            .list_versions(sc, &name, &PageRequest::default(), &c())
            .await
            .unwrap();
        assert_eq!(v.items.len(), 1);
    }
    // Every refusal is in the audit log.
    let denials = audit
        .page(None, None)
        .await
        .unwrap()
        .records
        .iter()
        .filter(|r| r.outcome == "policy_denied:app_suspended")
        .count();
    assert_eq!(denials, 17);
}
