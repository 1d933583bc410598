//! Consent and audit records on PostgreSQL, as two servers over one schema
//! see them: consent recorded through one is read, replaced and withdrawn
//! through the other; audit numbers follow commit order across servers,
//! are never reused after a prune, and page with cursors.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use hippocamp_core::{Caller, MemoryScope};
use hippocamp_governance::{
    AuditEvent, AuditLog, ConsentScope, ConsentStore, NewAuditRecord, NewConsent,
};
use hippocamp_postgres::{Database, PgAudit, PgConsents};

fn scope(user: &str) -> MemoryScope {
    MemoryScope::parse("shop", user).unwrap()
}

fn consent(id: &str) -> NewConsent {
    NewConsent {
        consent_id: id.into(),
        scope: ConsentScope::All,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_is_shared_by_the_servers_and_kept_per_exact_scope() {
    if !support::have_postgres() {
        return;
    }
    let pg = support::config();
    let a = PgConsents::new(Database::connect(&pg).await.unwrap());
    let b = PgConsents::new(Database::connect(&pg).await.unwrap());
    assert_eq!(a.get(&scope("alice")).await.unwrap(), None);
    let put = a.put(&scope("alice"), consent("form-1"), 10).await.unwrap();
    assert_eq!(b.get(&scope("alice")).await.unwrap(), Some(put));
    assert_eq!(b.get(&scope("alicia")).await.unwrap(), None);
    let other = MemoryScope::parse("shop2", "alice").unwrap();
    assert_eq!(b.get(&other).await.unwrap(), None);
    let replaced = b.put(&scope("alice"), consent("form-2"), 20).await.unwrap();
    assert_eq!(
        a.get(&scope("alice")).await.unwrap(),
        Some(replaced.clone())
    );
    // Bad input is refused and loses nothing.
    assert!(a.put(&scope("alice"), consent(""), 30).await.is_err());
    assert_eq!(
        a.get(&scope("alice")).await.unwrap(),
        Some(replaced.clone())
    );
    assert_eq!(b.withdrawn_at(&scope("alice")).await.unwrap(), None);
    assert_eq!(a.remove(&scope("alice"), 40).await.unwrap(), Some(replaced));
    assert_eq!(b.get(&scope("alice")).await.unwrap(), None);
    // The withdrawal is remembered, by every server.
    assert_eq!(b.withdrawn_at(&scope("alice")).await.unwrap(), Some(40));
    assert_eq!(b.remove(&scope("alice"), 50).await.unwrap(), None);
    assert_eq!(a.withdrawn_at(&scope("alice")).await.unwrap(), Some(50));
    assert_eq!(a.withdrawn_at(&scope("alicia")).await.unwrap(), None);
}

fn record(n: u64) -> NewAuditRecord {
    NewAuditRecord {
        event: AuditEvent::Erasure,
        target: "entry",
        scope: Some(scope("alice")),
        caller: Caller::token("0123456789ab"),
        outcome: "ok".into(),
        count: Some(n),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_numbers_follow_commits_across_servers_and_are_never_reused() {
    if !support::have_postgres() {
        return;
    }
    let pg = support::config();
    let (da, db) = (
        Database::connect(&pg).await.unwrap(),
        Database::connect(&pg).await.unwrap(),
    );
    let (ka, kb) = (
        PgAudit::load_key(&da).await.unwrap(),
        PgAudit::load_key(&db).await.unwrap(),
    );
    assert_eq!(ka, kb, "every server keys its hashes alike");
    let a = Arc::new(PgAudit::new(da, ka));
    let b = Arc::new(PgAudit::new(db, kb));
    let mut tasks = Vec::new();
    for n in 0..40u64 {
        let log = if n % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        tasks.push(tokio::spawn(async move {
            log.append(record(n), 1_000 + n).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // Paged through one server: 1..=40, in order, each once.
    let mut seqs = Vec::new();
    let mut cursor = None;
    loop {
        let page = b.page(cursor.as_deref(), Some(7)).await.unwrap();
        seqs.extend(page.records.iter().map(|r| r.seq));
        assert!(
            page.records
                .iter()
                .all(|r| r.scope_hash.is_some() && r.caller == "token")
        );
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
    let counts: BTreeSet<u64> = a
        .page(None, Some(100))
        .await
        .unwrap()
        .records
        .iter()
        .filter_map(|r| r.count)
        .collect();
    assert_eq!(counts.len(), 40);
    // Prune everything stamped before 1_020; numbers go on from 41.
    assert_eq!(a.prune(1_020).await.unwrap(), 20);
    b.append(record(99), 5_000).await.unwrap();
    let page = a.page(None, Some(100)).await.unwrap();
    assert_eq!(page.records.len(), 21);
    assert_eq!(page.records.last().unwrap().seq, 41);
    assert!(a.page(Some("not-a-number"), None).await.is_err());
}
