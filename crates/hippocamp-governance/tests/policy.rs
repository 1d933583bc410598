//! `PolicyChecked`: the whole memory conformance suite behind an allowing
//! policy; every operation on data consults the policy (enumerated); a
//! denial, an error or a late answer refuses before the store is touched;
//! the static policy's consent, lifetimes and legal holds.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hippocamp_core::{
    CallOptions, Caller, CallerKind, EntryId, Error, ManualClock, MemoryScope, Result, SessionId,
};
use hippocamp_governance::{
    Action, ConsentScope, ConsentStore, Decision, InMemoryConsents, NewConsent, Policy,
    PolicyChecked, PolicyConfig, PolicyInfo, Question, RedbConsents, StaticPolicy,
};
use hippocamp_memory::config::StoreClock;
use hippocamp_memory::conformance::StoreFactory;
use hippocamp_memory::{
    Event, InMemoryStore, ListRequest, MemoryConfig, MemoryStore, NewEntry, SearchRequest,
    WriteOptions,
};
use parking_lot::Mutex;

/// A question as recorded: action, scope, description, caller.
type Asked = (Action, Option<MemoryScope>, String, Caller);

/// Records every question and answers with a fixed decision.
#[derive(Debug)]
struct Recording {
    answer: Decision,
    asked: Mutex<Vec<Asked>>,
    delay: Duration,
    fail: bool,
}

impl Recording {
    fn new(answer: Decision) -> Arc<Self> {
        Arc::new(Self {
            answer,
            asked: Mutex::new(Vec::new()),
            delay: Duration::ZERO,
            fail: false,
        })
    }

    fn take(&self) -> Vec<Asked> {
        std::mem::take(&mut *self.asked.lock())
    }
}

#[async_trait]
impl Policy for Recording {
    async fn decide(&self, q: &Question<'_>) -> Result<Decision> {
        self.asked.lock().push((
            q.action,
            q.scope.cloned(),
            q.resource.description(),
            q.caller,
        ));
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if self.fail {
            return Err(Error::Unavailable("the policy service is down".into()));
        }
        Ok(self.answer.clone())
    }

    fn describe(&self) -> PolicyInfo {
        PolicyInfo {
            kind: "recording".into(),
            timeout_ms: 100,
            consent_required: vec![],
            legal_holds: vec![],
            lifetimes: vec![],
        }
    }
}

struct AllowingFactory;

#[async_trait]
impl StoreFactory for AllowingFactory {
    async fn open(&self, config: MemoryConfig) -> Arc<dyn MemoryStore> {
        let clock = config.clock.0.clone();
        Arc::new(PolicyChecked::new(
            InMemoryStore::new(config).unwrap(),
            Recording::new(Decision::Allow),
            clock,
        ))
    }
}

hippocamp_memory::memory_conformance_tests!(AllowingFactory);

fn scope() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

fn caller() -> CallOptions {
    CallOptions::default().on_behalf_of(Caller::token("abc123def456"))
}

fn checked(policy: Arc<dyn Policy>) -> (PolicyChecked<Arc<InMemoryStore>>, Arc<InMemoryStore>) {
    let inner = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let clock = hippocamp_core::time::system_clock();
    (PolicyChecked::new(inner.clone(), policy, clock), inner)
}

/// One call of every `MemoryStore` method through the wrapper, in trait
/// order, with the action it must consult (`None`: not consulted, no data
/// moves). A new trait method fails to compile the wrapper
/// (`missing_trait_methods`) until it is added there and here.
async fn every_operation(store: &dyn MemoryStore) -> Vec<(&'static str, Option<Action>, bool)> {
    let s = scope();
    let session = SessionId::new("s1").unwrap();
    let w = WriteOptions::new(caller());
    let c = caller();
    let events = [Event::text("e1", "user", 1, "alice likes tea")];
    let id = EntryId::random();
    let mut out = Vec::new();
    let _ = store.capabilities();
    out.push(("capabilities", None, true));
    let r = store
        .add_entry(&s, NewEntry::new("alice likes tea"), &w)
        .await;
    out.push(("add_entry", Some(Action::Ingest), r.is_ok()));
    let r = store.add_events(&s, &session, &events, &w).await;
    out.push(("add_events", Some(Action::Ingest), r.is_ok()));
    let r = store.admit_events(&s, &session, &events, &c).await;
    out.push(("admit_events", Some(Action::Ingest), r.is_ok()));
    let r = store.search(&s, &SearchRequest::new("tea"), &c).await;
    out.push(("search", Some(Action::Search), r.is_ok()));
    let r = store.get_entry(&s, &id, &c).await;
    out.push((
        "get_entry",
        Some(Action::Get),
        matches!(r, Err(Error::NotFound(_))),
    ));
    let r = store.delete_entry(&s, &id, &c).await;
    out.push(("delete_entry", Some(Action::Delete), r.is_ok()));
    let r = store.delete_session(&s, &session, &c).await;
    out.push(("delete_session", Some(Action::Delete), r.is_ok()));
    let r = store.delete_user(&s, &c).await;
    out.push(("delete_user", Some(Action::Erase), r.is_ok()));
    let r = store.erasure_epoch(&s, &c).await;
    out.push(("erasure_epoch", None, r.is_ok()));
    let r = store.erasure_fence(&s, &session, &c).await;
    out.push(("erasure_fence", None, r.is_ok()));
    let r = store.list_entries(&s, &ListRequest::default(), &c).await;
    out.push(("list_entries", Some(Action::List), r.is_ok()));
    let r = store
        .export_entries(&s, &hippocamp_memory::ExportRequest::default(), &c)
        .await;
    out.push(("export_entries", Some(Action::Export), r.is_ok()));
    let r = store.sweep_expired(10, &[], &c).await;
    out.push(("sweep_expired", Some(Action::Prune), r.is_ok()));
    let fix = hippocamp_memory::EntryUpdate {
        content: "alice likes coffee".into(),
        metadata: serde_json::Map::new(),
    };
    let r = store.update_entry(&s, &id, &fix, &w).await;
    out.push((
        "update_entry",
        Some(Action::Update),
        matches!(r, Err(Error::NotFound(_))),
    ));
    let r = store.entry_history(&s, &id, &c).await;
    out.push((
        "entry_history",
        Some(Action::Get),
        matches!(r, Err(Error::NotFound(_))),
    ));
    let r = store.import_entries(&s, &[], &w).await;
    out.push(("import_entries", Some(Action::Ingest), r.is_ok()));
    let r = store
        .export_erasures(
            &s,
            &hippocamp_memory::erasure::ErasureRequest::default(),
            &c,
        )
        .await;
    out.push(("export_erasures", Some(Action::Export), r.is_ok()));
    let at_now = hippocamp_memory::erasure::ImportedErasures {
        epoch: 1,
        records: hippocamp_memory::erasure::ErasureRecords::default(),
    };
    let r = store.import_erasures(&s, &at_now, &c).await;
    out.push(("import_erasures", Some(Action::Restore), r.is_ok()));
    let names = hippocamp_memory::NamesRequest::default();
    let r = store.list_apps(&names, &c).await;
    out.push(("list_apps", Some(Action::List), r.is_ok()));
    let app = hippocamp_core::AppName::new("app").unwrap();
    let r = store.list_users(&app, &names, &c).await;
    out.push(("list_users", Some(Action::List), r.is_ok()));
    let r = store.status().await;
    out.push(("status", None, r.is_ok()));
    let r = store.activate_scope(&s).await;
    out.push(("activate_scope", None, r.is_ok()));
    store.release_scope(&s);
    out.push(("release_scope", None, true));
    out
}

#[tokio::test]
async fn every_operation_on_data_consults_the_policy_with_its_scope_and_caller() {
    let policy = Recording::new(Decision::Allow);
    let (store, _) = checked(policy.clone());
    let calls = every_operation(&store).await;
    let asked = policy.take();
    let consulted: Vec<&(&str, Option<Action>, bool)> =
        calls.iter().filter(|(_, a, _)| a.is_some()).collect();
    assert_eq!(asked.len(), consulted.len(), "{asked:?}");
    for ((name, action, ok), (got, got_scope, what, who)) in consulted.iter().zip(&asked) {
        assert!(*ok, "{name} failed under an allowing policy");
        assert_eq!(Some(*got), *action, "{name}");
        if *got == Action::Prune || name.starts_with("list_apps") || name.starts_with("list_users")
        {
            assert_eq!(*got_scope, None, "{name} is store-wide");
        } else {
            assert_eq!(got_scope.as_ref(), Some(&scope()), "{name}");
        }
        assert_eq!(who.kind, CallerKind::Token, "{name}");
        assert!(!what.contains("tea"), "{name} leaked content: {what}");
    }
    let names: Vec<&str> = calls.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(names.len(), 24, "every MemoryStore method is listed");
}

#[tokio::test]
async fn a_denial_refuses_every_operation_on_data_before_the_store_is_touched() {
    let policy = Recording::new(Decision::deny("region_locked"));
    let (store, inner) = checked(policy.clone());
    inner
        .add_entry(
            &scope(),
            NewEntry::new("already here"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let calls = every_operation(&store).await;
    for (name, action, ok) in &calls {
        if action.is_some() {
            assert!(!ok, "{name} ran under a denying policy");
        }
    }
    let s = scope();
    assert!(matches!(
        store.search(&s, &SearchRequest::new("here"), &caller()).await,
        Err(Error::PolicyDenied { reason }) if reason == "region_locked"
    ));
    let status = inner.status().await.unwrap();
    assert_eq!(status.entries, 1, "nothing was written or deleted");
    assert_eq!(inner.erasure_epoch(&s, &caller()).await.unwrap(), 0);
}

#[tokio::test]
async fn an_error_a_late_answer_or_a_malformed_reason_denies() {
    let slow = Arc::new(Recording {
        answer: Decision::Allow,
        asked: Mutex::new(Vec::new()),
        delay: Duration::from_secs(30),
        fail: false,
    });
    let (store, _) = checked(slow);
    let started = Instant::now();
    let r = store
        .search(&scope(), &SearchRequest::new("x"), &caller())
        .await;
    assert!(
        matches!(&r, Err(Error::PolicyDenied { reason }) if reason == "policy_timeout"),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the policy's 100 ms bound"
    );
    let failing = Arc::new(Recording {
        answer: Decision::Allow,
        asked: Mutex::new(Vec::new()),
        delay: Duration::ZERO,
        fail: true,
    });
    let (store, _) = checked(failing);
    let r = store
        .search(&scope(), &SearchRequest::new("x"), &caller())
        .await;
    assert!(matches!(&r, Err(Error::PolicyDenied { reason }) if reason == "policy_error"));
    let (store, _) = checked(Recording::new(Decision::deny("Not A Code")));
    let r = store
        .search(&scope(), &SearchRequest::new("x"), &caller())
        .await;
    assert!(
        matches!(&r, Err(Error::PolicyDenied { reason }) if reason == "policy_gave_a_malformed_reason")
    );
}

fn static_policy(toml: &str, consents: Arc<dyn ConsentStore>) -> Arc<StaticPolicy> {
    #[derive(serde::Deserialize)]
    struct File {
        policy: PolicyConfig,
    }
    let f: File = toml::from_str(toml).unwrap();
    Arc::new(StaticPolicy::new(f.policy, consents).unwrap())
}

#[tokio::test]
async fn the_static_policy_requires_consent_sets_lifetimes_and_holds_users() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let policy = static_policy(
        r#"
        [policy.apps.support]
        ttl_ms = 60000
        retention_ms = 1000
        consent_required = true
        legal_holds = ["bob"]
        [[policy.apps.support.rules]]
        match = { kind = "chit_chat" }
        ttl_ms = 10
        "#,
        consents.clone(),
    );
    let clock = Arc::new(ManualClock::at(1_000_000));
    let config = MemoryConfig {
        clock: StoreClock(clock.clone()),
        ..MemoryConfig::default()
    };
    let store = PolicyChecked::new(InMemoryStore::new(config).unwrap(), policy, clock.clone());
    let alice = MemoryScope::parse("support", "alice").unwrap();
    let bob = MemoryScope::parse("support", "bob").unwrap();
    let w = WriteOptions::default();
    let c = CallOptions::default();
    assert!(matches!(
        store.add_entry(&alice, NewEntry::new("a fact"), &w).await,
        Err(Error::ConsentRequired(_))
    ));
    assert!(matches!(
        store
            .admit_events(
                &alice,
                &SessionId::new("s").unwrap(),
                &[Event::text("e", "user", 1, "hi")],
                &c
            )
            .await,
        Err(Error::ConsentRequired(_))
    ));
    let artifacts_only = NewConsent {
        consent_id: "c-1".into(),
        scope: ConsentScope::Artifacts,
    };
    consents.put(&alice, artifacts_only, 0).await.unwrap();
    assert!(matches!(
        store.add_entry(&alice, NewEntry::new("a fact"), &w).await,
        Err(Error::ConsentRequired(_))
    ));
    let memory = NewConsent {
        consent_id: "c-2".into(),
        scope: ConsentScope::Memory,
    };
    consents.put(&alice, memory.clone(), 0).await.unwrap();
    let fact = store
        .add_entry(&alice, NewEntry::new("a fact"), &w)
        .await
        .unwrap()
        .entry;
    assert_eq!(fact.obligations.expires_at_ms, Some(1_060_000));
    assert_eq!(fact.obligations.retain_until_ms, Some(1_001_000));
    let chat = store
        .add_entry(
            &alice,
            NewEntry::new("hello").metadata(
                serde_json::json!({"kind": "chit_chat"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
            &w,
        )
        .await
        .unwrap()
        .entry;
    assert_eq!(chat.obligations.expires_at_ms, Some(1_000_010));
    assert!(matches!(
        store.delete_entry(&alice, &fact.id, &c).await,
        Err(Error::Retention {
            until_ms: 1_001_000
        })
    ));
    clock.advance(1_000);
    assert_eq!(store.delete_entry(&alice, &fact.id, &c).await.unwrap(), 1);
    // Bob is held: what he adds is held, and nothing of his can go.
    consents.put(&bob, memory, 0).await.unwrap();
    let held = store
        .add_entry(&bob, NewEntry::new("evidence"), &w)
        .await
        .unwrap()
        .entry;
    assert!(held.obligations.legal_hold);
    assert!(matches!(
        store.delete_user(&bob, &c).await,
        Err(Error::LegalHold)
    ));
    assert!(matches!(
        store
            .delete_session(&bob, &SessionId::new("s").unwrap(), &c)
            .await,
        Err(Error::LegalHold)
    ));
    // Other apps are untouched by this policy.
    let other = MemoryScope::parse("other", "alice").unwrap();
    let e = store
        .add_entry(&other, NewEntry::new("free"), &w)
        .await
        .unwrap()
        .entry;
    assert!(e.obligations.is_empty());
    let info = store.policy().describe();
    assert_eq!(info.consent_required, vec!["support".to_owned()]);
    assert_eq!(info.legal_holds, vec!["support/bob".to_owned()]);
}

#[test]
fn bad_policy_configuration_is_a_typed_error() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    for (toml, key) in [
        ("timeout_ms = 0", "policy.timeout_ms"),
        ("timeout_ms = 60001", "policy.timeout_ms"),
        ("[apps.a]\nttl_ms = 0", "policy.apps.a.ttl_ms"),
        (
            "[apps.a]\nlegal_holds = [\"\"]",
            "policy.apps.a.legal_holds",
        ),
        (
            "[apps.a]\n[[apps.a.rules]]\nmatch = { x = { \"$bogus\" = 1 } }",
            "policy.apps.a.rules[0].match",
        ),
    ] {
        let config: PolicyConfig = toml::from_str(toml).unwrap();
        match StaticPolicy::new(config, consents.clone()) {
            Err(Error::InvalidConfig { key: k, .. }) => assert_eq!(k, key, "{toml}"),
            other => panic!("{toml}: {other:?}"),
        }
    }
    assert!(toml::from_str::<PolicyConfig>("[apps.a]\nttl = 5").is_err());
}

#[tokio::test]
async fn consents_are_durable_and_validated() {
    let dir = tempfile::tempdir().unwrap();
    let s = scope();
    {
        let store = RedbConsents::open(dir.path()).unwrap();
        let c = store
            .put(
                &s,
                NewConsent {
                    consent_id: "form-7".into(),
                    scope: ConsentScope::All,
                },
                42,
            )
            .await
            .unwrap();
        assert_eq!(c.recorded_at_ms, 42);
        assert!(matches!(
            store
                .put(
                    &s,
                    NewConsent {
                        consent_id: String::new(),
                        scope: ConsentScope::All
                    },
                    1
                )
                .await,
            Err(Error::InvalidArgument { .. })
        ));
    }
    let store = RedbConsents::open(dir.path()).unwrap();
    let got = store.get(&s).await.unwrap().unwrap();
    assert_eq!(got.consent_id, "form-7");
    assert_eq!(store.withdrawn_at(&s).await.unwrap(), None);
    assert_eq!(
        store.remove(&s, 77).await.unwrap().unwrap().consent_id,
        "form-7"
    );
    assert!(store.get(&s).await.unwrap().is_none());
    drop(store);
    let store = RedbConsents::open(dir.path()).unwrap();
    assert!(store.get(&s).await.unwrap().is_none());
    // The withdrawal is remembered across a restart.
    assert_eq!(store.withdrawn_at(&s).await.unwrap(), Some(77));
    // A restored consent says so, and keeps the file's time apart.
    let r = NewConsent {
        consent_id: "form-8".into(),
        scope: ConsentScope::Memory,
    }
    .restored(5, 90)
    .unwrap();
    store.record(&s, r.clone()).await.unwrap();
    let got = store.get(&s).await.unwrap().unwrap();
    assert_eq!(got, r);
    assert!(got.restored);
    assert_eq!((got.recorded_at_ms, got.claimed_at_ms), (90, Some(5)));
}

/// Allows everything but keeping data longer than its lifetimes.
#[derive(Debug)]
struct NoRetaining;

#[async_trait]
impl Policy for NoRetaining {
    async fn decide(&self, q: &Question<'_>) -> Result<Decision> {
        Ok(if q.action == Action::Retain {
            Decision::deny("no_retention")
        } else {
            Decision::Allow
        })
    }

    fn describe(&self) -> PolicyInfo {
        PolicyInfo {
            kind: "no-retaining".into(),
            timeout_ms: 100,
            consent_required: vec![],
            legal_holds: vec![],
            lifetimes: vec![],
        }
    }
}

/// A write that brings a retention or a hold of its own (a library
/// caller's options, restored entries that were retained) is also asked
/// `retain`; refused, it writes nothing. Plain writes are not asked.
#[tokio::test]
async fn a_write_that_keeps_data_longer_asks_retain() {
    let policy = Recording::new(Decision::Allow);
    let (store, _) = checked(policy.clone());
    let s = scope();
    let kept = hippocamp_memory::Obligations {
        retain_until_ms: Some(u64::MAX / 2),
        ..hippocamp_memory::Obligations::default()
    };
    store
        .add_entry(&s, NewEntry::new("plain"), &WriteOptions::new(caller()))
        .await
        .unwrap();
    let asked: Vec<Action> = policy.take().iter().map(|a| a.0).collect();
    assert_eq!(asked, [Action::Ingest]);
    let retained = store
        .add_entry(
            &s,
            NewEntry::new("kept"),
            &WriteOptions::new(caller()).obligations(kept),
        )
        .await
        .unwrap()
        .entry;
    let asked: Vec<Action> = policy.take().iter().map(|a| a.0).collect();
    assert_eq!(asked, [Action::Ingest, Action::Retain]);
    let item = hippocamp_memory::ImportedEntry {
        entry: retained,
        history: vec![],
    };
    let other = MemoryScope::parse("app", "restored").unwrap();
    let moved = hippocamp_memory::ImportedEntry {
        entry: hippocamp_memory::MemoryEntry {
            scope: other.clone(),
            ..item.entry.clone()
        },
        history: vec![],
    };
    store
        .import_entries(
            &other,
            std::slice::from_ref(&moved),
            &WriteOptions::new(caller()),
        )
        .await
        .unwrap();
    let asked: Vec<Action> = policy.take().iter().map(|a| a.0).collect();
    assert_eq!(asked, [Action::Ingest, Action::Retain]);

    let inner = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let strict = PolicyChecked::new(
        inner.clone(),
        Arc::new(NoRetaining),
        hippocamp_core::time::system_clock(),
    );
    let w = WriteOptions::new(caller()).obligations(kept);
    for r in [
        strict
            .add_entry(&s, NewEntry::new("kept"), &w)
            .await
            .map(drop),
        strict
            .add_events(
                &s,
                &SessionId::new("s1").unwrap(),
                &[Event::text("e1", "user", 1, "kept")],
                &w,
            )
            .await
            .map(drop),
    ] {
        assert!(
            matches!(&r, Err(Error::PolicyDenied { reason }) if reason == "no_retention"),
            "{r:?}"
        );
    }
    assert_eq!(
        inner.status().await.unwrap().entries,
        0,
        "nothing was written"
    );
    // A restore is not refused for it: the entry comes back with the
    // policy's obligations, without the file's retention.
    let r = strict
        .import_entries(
            &other,
            std::slice::from_ref(&moved),
            &WriteOptions::new(caller()),
        )
        .await
        .unwrap();
    assert_eq!(r.imported, 1);
    let back = inner
        .get_entry(&other, &moved.entry.id, &caller())
        .await
        .unwrap();
    assert_eq!(back.obligations, hippocamp_memory::Obligations::default());
    strict
        .add_entry(&s, NewEntry::new("plain"), &WriteOptions::new(caller()))
        .await
        .unwrap();
}

/// A restore cannot hold or retain what the policy does not (H1 of the
/// 2026-12-07 review): under the static policy a token's restore gets
/// the app's lifetimes whatever the file says, its holds and retentions
/// dropped (the refusal is audited), so the user can still be erased; the
/// operator's command line keeps them. A file's expiry is kept when
/// earlier than the policy's.
#[tokio::test]
async fn a_restored_file_cannot_hold_or_retain_beyond_the_policy() {
    let consents: Arc<dyn ConsentStore> = Arc::new(InMemoryConsents::default());
    let policy = static_policy("[policy.apps.app]\nttl_ms = 1000000\n", consents);
    let inner = Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let audit = Arc::new(hippocamp_governance::InMemoryAudit::default());
    let store = PolicyChecked::new(inner.clone(), policy, hippocamp_core::time::system_clock())
        .with_audit(audit.clone());
    let s = scope();
    let forged = |content: &str, o: hippocamp_memory::Obligations| {
        let mut e = hippocamp_memory::entry::prepare_entry(
            &s,
            NewEntry::new(content),
            &hippocamp_core::MemoryLimits::default(),
        )
        .unwrap()
        .entry;
        e.obligations = o;
        hippocamp_memory::ImportedEntry {
            entry: e,
            history: vec![],
        }
    };
    let held = forged(
        "held forever",
        hippocamp_memory::Obligations {
            expires_at_ms: None,
            retain_until_ms: Some(1 << 62),
            legal_hold: true,
        },
    );
    let soon = forged(
        "gone soon",
        hippocamp_memory::Obligations {
            expires_at_ms: Some(u64::MAX / 8),
            ..hippocamp_memory::Obligations::default()
        },
    );
    let token = CallOptions::default().on_behalf_of(Caller::token("attacker"));
    let r = store
        .import_entries(&s, &[held.clone(), soon.clone()], &WriteOptions::new(token))
        .await
        .unwrap();
    assert_eq!(r.imported, 2);
    let got = inner
        .get_entry(&s, &held.entry.id, &caller())
        .await
        .unwrap();
    assert!(!got.obligations.legal_hold);
    assert_eq!(got.obligations.retain_until_ms, None);
    let ttl = got.obligations.expires_at_ms.unwrap();
    let now = hippocamp_core::time::now_ms();
    assert!(ttl > now && ttl <= now + 1_000_000, "the app's lifetime");
    // The user can be erased.
    assert_eq!(store.delete_user(&s, &token).await.unwrap().deleted, 2);
    let refused = hippocamp_governance::AuditLog::page(&*audit, None, None)
        .await
        .unwrap();
    assert!(
        refused
            .records
            .iter()
            .any(|r| r.outcome.contains("retention_not_granted")),
        "{refused:?}"
    );
    // The operator keeps them; the earlier expiry of a file is kept.
    let cli = CallOptions::default().on_behalf_of(Caller::of(CallerKind::Cli));
    let other = MemoryScope::parse("app", "operator").unwrap();
    let moved = |e: &hippocamp_memory::ImportedEntry| hippocamp_memory::ImportedEntry {
        entry: hippocamp_memory::MemoryEntry {
            scope: other.clone(),
            ..e.entry.clone()
        },
        history: vec![],
    };
    let early = forged(
        "early",
        hippocamp_memory::Obligations {
            expires_at_ms: Some(now + 5_000),
            ..hippocamp_memory::Obligations::default()
        },
    );
    store
        .import_entries(
            &other,
            &[moved(&held), moved(&early)],
            &WriteOptions::new(cli),
        )
        .await
        .unwrap();
    let got = inner.get_entry(&other, &held.entry.id, &cli).await.unwrap();
    assert!(got.obligations.legal_hold);
    let got = inner
        .get_entry(&other, &early.entry.id, &cli)
        .await
        .unwrap();
    assert_eq!(got.obligations.expires_at_ms, Some(now + 5_000));
    drop(soon);
}
