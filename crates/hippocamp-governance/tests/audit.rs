//! The audit log: both stores append in order, page with cursors, prune
//! by age without ever reusing a number, and the durable one keeps its
//! records across a reopen. `PolicyChecked` records denials, erasures,
//! holds and sweeps, content-free.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use hippocamp_core::{CallOptions, Caller, CallerKind, Error, MemoryScope};
use hippocamp_governance::{
    AuditEvent, AuditLog, InMemoryAudit, NewAuditRecord, PolicyChecked, RedbAudit, StaticPolicy,
};
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore, NewEntry, WriteOptions};

fn scope() -> MemoryScope {
    MemoryScope::parse("shop", "alice").unwrap()
}

fn record(outcome: &str) -> NewAuditRecord {
    NewAuditRecord {
        event: AuditEvent::Erasure,
        target: "user",
        scope: Some(scope()),
        caller: Caller::token("abc123def456"),
        outcome: outcome.to_owned(),
        count: Some(3),
    }
}

async fn appends_pages_and_prunes(log: &dyn AuditLog) {
    for (i, at) in [10, 20, 30, 40, 50].into_iter().enumerate() {
        log.append(record(&format!("ok{i}")), at).await.unwrap();
    }
    let first = log.page(None, Some(2)).await.unwrap();
    assert_eq!(
        first.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [1, 2]
    );
    let r = &first.records[0];
    // Keyed per deployment: the same user's records cannot be linked
    // across logs, or to the plain hash a request log writes.
    let keyed = scope().keyed_hash(&log.scope_key());
    assert_eq!(r.scope_hash.as_deref(), Some(keyed.as_str()));
    assert_ne!(keyed, scope().log_hash());
    assert_eq!(
        (r.caller.as_str(), r.token_id.as_deref()),
        ("token", Some("abc123def456"))
    );
    assert_eq!((r.at_ms, r.count, r.outcome.as_str()), (10, Some(3), "ok0"));
    let rest = log
        .page(first.next_cursor.as_deref(), Some(10))
        .await
        .unwrap();
    assert_eq!(
        rest.records.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [3, 4, 5]
    );
    assert!(rest.next_cursor.is_none());
    assert_eq!(log.prune(30).await.unwrap(), 2);
    let left = log.page(None, None).await.unwrap();
    assert_eq!(left.records.first().map(|r| r.seq), Some(3));
    assert_eq!(log.prune(1_000).await.unwrap(), 3);
    log.append(record("after"), 60).await.unwrap();
    let after = log.page(None, None).await.unwrap();
    assert_eq!(after.records[0].seq, 6, "a number is never reused");
    for bad in [(Some("x"), None), (None, Some(0)), (None, Some(1_001))] {
        assert!(matches!(
            log.page(bad.0, bad.1).await,
            Err(Error::InvalidArgument { .. })
        ));
    }
}

#[tokio::test]
async fn the_in_memory_log_appends_pages_and_prunes() {
    appends_pages_and_prunes(&InMemoryAudit::default()).await;
}

#[tokio::test]
async fn the_durable_log_appends_pages_prunes_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let key = {
        let log = RedbAudit::open(dir.path()).unwrap();
        appends_pages_and_prunes(&log).await;
        log.scope_key()
    };
    let log = RedbAudit::open(dir.path()).unwrap();
    let page = log.page(None, None).await.unwrap();
    assert_eq!(page.records.len(), 1);
    // The key is the log's: a reopen hashes a scope as before, another
    // log (another deployment) differently.
    assert_eq!(
        scope().keyed_hash(&log.scope_key()),
        scope().keyed_hash(&key)
    );
    let other = tempfile::tempdir().unwrap();
    assert_ne!(
        scope().keyed_hash(&RedbAudit::open(other.path()).unwrap().scope_key()),
        scope().keyed_hash(&key)
    );
    assert_eq!(page.records[0].outcome, "after");
    log.append(record("again"), 70).await.unwrap();
    assert_eq!(log.page(None, None).await.unwrap().records[1].seq, 7);
    assert!(
        RedbAudit::open(dir.path()).is_err(),
        "one process owns the log"
    );
}

/// Denials, erasures, a hold's refusal and a sweep are recorded by the
/// wrapper every path goes through, with the scope's hash and the caller,
/// and never a word of content.
#[tokio::test]
async fn the_policy_wrapper_records_governance_events_without_content() {
    let audit = Arc::new(InMemoryAudit::default());
    let clock = Arc::new(hippocamp_core::ManualClock::at(1_000));
    let policy: hippocamp_governance::PolicyConfig = toml::from_str(
        r#"
        [apps.shop]
        legal_holds = ["held"]
        ttl_ms = 10
        [apps.locked]
        consent_required = true
        "#,
    )
    .unwrap();
    let consents = Arc::new(hippocamp_governance::InMemoryConsents::default());
    let policy = Arc::new(StaticPolicy::new(policy, consents).unwrap());
    let inner = InMemoryStore::new(MemoryConfig {
        clock: hippocamp_memory::config::StoreClock(clock.clone()),
        ..MemoryConfig::default()
    })
    .unwrap();
    let store = PolicyChecked::new(inner, policy, clock.clone()).with_audit(audit.clone());
    let by = CallOptions::default().on_behalf_of(Caller::token("abc123def456"));
    let w = WriteOptions::new(by);
    store
        .add_entry(&scope(), NewEntry::new("alice's secret garden"), &w)
        .await
        .unwrap();
    let held = MemoryScope::parse("shop", "held").unwrap();
    store
        .add_entry(&held, NewEntry::new("kept for court"), &w)
        .await
        .unwrap();
    let locked = MemoryScope::parse("locked", "carol").unwrap();
    let denied = store
        .add_entry(&locked, NewEntry::new("no consent"), &w)
        .await
        .unwrap_err();
    assert!(matches!(denied, Error::ConsentRequired(_)), "{denied}");
    assert!(matches!(
        store.delete_user(&held, &by).await,
        Err(Error::LegalHold)
    ));
    store.delete_user(&scope(), &by).await.unwrap();
    store
        .add_entry(&scope(), NewEntry::new("brief"), &w)
        .await
        .unwrap();
    clock.advance(10);
    let sweeper = CallOptions::default().on_behalf_of(Caller::of(CallerKind::Sweeper));
    assert_eq!(
        store
            .sweep_expired(10, &[], &sweeper)
            .await
            .unwrap()
            .deleted,
        1
    );
    let records = audit.page(None, None).await.unwrap().records;
    let seen: Vec<(AuditEvent, &str, &str)> = records
        .iter()
        .map(|r| (r.event, r.target.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (AuditEvent::Denial, "ingest", "consent_required"),
            (AuditEvent::Hold, "erase", "legal_hold"),
            (AuditEvent::Erasure, "user", "ok"),
            (AuditEvent::Expiry, "store", "ok"),
        ]
    );
    assert_eq!(
        records[2].scope_hash.as_deref(),
        Some(scope().keyed_hash(&audit.scope_key()).as_str())
    );
    assert_eq!(records[2].count, Some(1));
    assert_eq!(records[3].caller, "sweeper");
    let text = serde_json::to_string(&records).unwrap();
    for word in ["alice", "garden", "court", "shop", "carol"] {
        assert!(
            !text.contains(word),
            "{word} leaked into the audit log: {text}"
        );
    }
}

/// A legal hold placed after a user's entries were written (their own
/// obligations carry none) still keeps the sweeper away from them: the
/// wrapper tells the store to spare every scope the policy holds now.
#[tokio::test]
async fn a_hold_placed_after_ingestion_keeps_the_sweeper_away() {
    let clock = Arc::new(hippocamp_core::ManualClock::at(1_000));
    let inner = Arc::new(
        InMemoryStore::new(MemoryConfig {
            clock: hippocamp_memory::config::StoreClock(clock.clone()),
            ..MemoryConfig::default()
        })
        .unwrap(),
    );
    let consents = Arc::new(hippocamp_governance::InMemoryConsents::default());
    let before: hippocamp_governance::PolicyConfig =
        toml::from_str("[apps.shop]\nttl_ms = 10\n").unwrap();
    let before = Arc::new(StaticPolicy::new(before, consents.clone()).unwrap());
    let w = WriteOptions::default();
    let store = PolicyChecked::new(inner.clone(), before, clock.clone());
    for user in ["alice", "bob"] {
        let s = MemoryScope::parse("shop", user).unwrap();
        let e = store
            .add_entry(&s, NewEntry::new("a fact"), &w)
            .await
            .unwrap();
        assert!(!e.entry.obligations.legal_hold);
    }
    // Later, alice is put under a hold.
    let after: hippocamp_governance::PolicyConfig =
        toml::from_str("[apps.shop]\nttl_ms = 10\nlegal_holds = [\"alice\"]\n").unwrap();
    let after = Arc::new(StaticPolicy::new(after, consents).unwrap());
    let store = PolicyChecked::new(inner.clone(), after, clock.clone());
    clock.advance(10);
    let sweeper = CallOptions::default().on_behalf_of(Caller::of(CallerKind::Sweeper));
    let sweep = store.sweep_expired(100, &[], &sweeper).await.unwrap();
    assert_eq!(sweep.deleted, 1, "bob's expired entry only");
    assert_eq!(inner.status().await.unwrap().entries, 1, "alice's is kept");
    assert!(matches!(
        store.delete_user(&scope(), &CallOptions::default()).await,
        Err(Error::LegalHold)
    ));
}
