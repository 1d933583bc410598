//! The conformance suite every [`SessionStore`] runs.
//!
//! Each scenario is a public async function taking a
//! [`SessionStoreFactory`]; `session_store_conformance_tests!(factory)`
//! expands to one test per scenario, plus [`model`]: random operations
//! checked against a plain model.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    clippy::many_single_char_names,
    missing_docs
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, ErasureFence, Error, Field, MemoryScope, QuotaLimit, SessionId};
use serde_json::json;

use crate::event::{
    Actions, Content, FunctionCall, FunctionResponse, InlineData, Part, SessionEvent,
};
use crate::store::{AppendOptions, SessionLimits, SessionStore};

/// Opens fresh, empty stores; `reopen` opens the same store again after
/// dropping it (durable stores keep what they acknowledged; others
/// return `None`).
#[async_trait]
pub trait SessionStoreFactory: Send + Sync {
    async fn open(&self, limits: SessionLimits) -> Arc<dyn SessionStore>;
    async fn reopen(&self, _store: Arc<dyn SessionStore>) -> Option<Arc<dyn SessionStore>> {
        None
    }
}

/// Factory of [`crate::InMemorySessions`].
#[derive(Debug, Default, Clone, Copy)]
pub struct InMemoryFactory;

#[async_trait]
impl SessionStoreFactory for InMemoryFactory {
    async fn open(&self, limits: SessionLimits) -> Arc<dyn SessionStore> {
        Arc::new(crate::InMemorySessions::new(limits).unwrap())
    }
}

fn scope(app: &str, user: &str) -> MemoryScope {
    MemoryScope::parse(app, user).unwrap()
}

fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn call() -> CallOptions {
    CallOptions::default()
}

fn ao() -> AppendOptions {
    AppendOptions::default()
}

fn fenced(f: ErasureFence) -> AppendOptions {
    AppendOptions::default().fenced(f)
}

/// An event with every field set.
pub fn full_event(id: &str) -> SessionEvent {
    SessionEvent {
        id: id.into(),
        author: "assistant".into(),
        timestamp_ms: 1_700_000_000_000,
        invocation_id: Some("inv-1".into()),
        partial: false,
        content: Some(Content {
            role: Some("model".into()),
            parts: vec![
                Part {
                    text: Some("reasoning".into()),
                    thought: true,
                    thought_signature: Some("c2lnbmF0dXJl+/=\u{1F600}".into()),
                    ..Part::default()
                },
                Part::call(FunctionCall {
                    id: Some("c1".into()),
                    name: "load_memory".into(),
                    args: json!({"query": "q"}),
                }),
                Part::response(FunctionResponse {
                    id: Some("c1".into()),
                    name: "load_memory".into(),
                    response: json!({"hits": []}),
                }),
                Part {
                    inline_data: Some(InlineData {
                        mime_type: "text/plain".into(),
                        data: "aGk=".into(),
                    }),
                    ..Part::default()
                },
                Part::text("done"),
            ],
        }),
        metadata: Some(json!({"k": [1, 2]}).as_object().unwrap().clone()),
        actions: Actions {
            context_effects: vec![json!({"kind": "memory_delta", "operation": "add"})],
        },
    }
}

fn text(id: &str, t: &str) -> SessionEvent {
    SessionEvent::text(id, "user", 1, t)
}

pub async fn the_last_event_pops_and_its_id_is_free_again(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "u1");
    assert_eq!(s.pop_last(&sc, &sid("s1"), &call()).await.unwrap(), None);
    let ev = [text("a", "first"), full_event("b")];
    for e in &ev {
        s.append(&sc, &sid("s1"), e, &ao()).await.unwrap();
    }
    s.append(&sc, &sid("s2"), &text("a", "other session"), &ao())
        .await
        .unwrap();
    let before = s.status().await.unwrap().events;
    assert_eq!(
        s.pop_last(&sc, &sid("s1"), &call()).await.unwrap(),
        Some(ev[1].clone())
    );
    assert_eq!(s.status().await.unwrap().events, before - 1);
    let got = s.get(&sc, &sid("s1"), &call()).await.unwrap();
    assert_eq!((got.info.events, got.events), (1, vec![ev[0].clone()]));
    // The id may be appended again, with other data, at the same index.
    let again = text("b", "a new second event");
    assert_eq!(
        s.append(&sc, &sid("s1"), &again, &ao())
            .await
            .unwrap()
            .index,
        1
    );
    // Down to empty: the session stays, and another pop finds nothing.
    s.pop_last(&sc, &sid("s1"), &call()).await.unwrap();
    assert!(
        s.pop_last(&sc, &sid("s1"), &call())
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(s.pop_last(&sc, &sid("s1"), &call()).await.unwrap(), None);
    let got = s.get(&sc, &sid("s1"), &call()).await.unwrap();
    assert!(got.events.is_empty());
    // Other sessions and users are untouched.
    assert_eq!(
        s.get(&sc, &sid("s2"), &call()).await.unwrap().events.len(),
        1
    );
    assert_eq!(
        s.pop_last(&scope("app", "u2"), &sid("s2"), &call())
            .await
            .unwrap(),
        None
    );
    if let Some(s) = f.reopen(s).await {
        assert!(
            s.get(&sc, &sid("s1"), &call())
                .await
                .unwrap()
                .events
                .is_empty()
        );
        assert_eq!(
            s.get(&sc, &sid("s2"), &call()).await.unwrap().events.len(),
            1
        );
    }
}

pub async fn events_come_back_in_order_with_every_field(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "u1");
    let ev = [text("b", "first"), full_event("a"), text("c", "third")];
    for (i, e) in ev.iter().enumerate() {
        let r = s.append(&sc, &sid("s1"), e, &ao()).await.unwrap();
        assert_eq!(r.index, i as u64);
        assert!(!r.duplicate);
    }
    let got = s.get(&sc, &sid("s1"), &call()).await.unwrap();
    assert_eq!(got.scope, sc);
    assert_eq!(got.info.id, sid("s1"));
    assert_eq!(got.info.events, 3);
    assert_eq!(got.events, ev);
    assert!(got.info.updated_at_ms >= got.info.created_at_ms);
    if let Some(s) = f.reopen(s).await {
        assert_eq!(s.get(&sc, &sid("s1"), &call()).await.unwrap().events, ev);
    }
}

pub async fn a_repeated_event_is_a_duplicate_and_a_changed_one_is_refused(
    f: &dyn SessionStoreFactory,
) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "u1");
    s.append(&sc, &sid("s"), &text("e1", "hello"), &ao())
        .await
        .unwrap();
    let again = s
        .append(&sc, &sid("s"), &text("e1", "hello"), &ao())
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.index, 0);
    let err = s
        .append(&sc, &sid("s"), &text("e1", "changed"), &ao())
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidArgument {
            field: Field::EventId,
            ..
        }
    ));
    let got = s.get(&sc, &sid("s"), &call()).await.unwrap();
    assert_eq!(got.events, vec![text("e1", "hello")]);
}

pub async fn scopes_never_see_each_other(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let a = scope("app", "alice");
    let b = scope("app", "bob");
    let c = scope("other", "alice");
    s.append(&a, &sid("s"), &text("e", "alice's"), &ao())
        .await
        .unwrap();
    s.append(&b, &sid("s"), &text("e", "bob's"), &ao())
        .await
        .unwrap();
    assert_eq!(
        s.get(&a, &sid("s"), &call()).await.unwrap().events[0].text_content(),
        "alice's"
    );
    assert_eq!(
        s.get(&b, &sid("s"), &call()).await.unwrap().events[0].text_content(),
        "bob's"
    );
    assert!(matches!(
        s.get(&c, &sid("s"), &call()).await,
        Err(Error::NotFound(_))
    ));
    assert!(
        s.list(&c, None, None, &call())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(!s.delete(&c, &sid("s"), &call()).await.unwrap());
    assert_eq!(s.delete_user(&c, &call()).await.unwrap(), 0);
    assert_eq!(s.delete_user(&a, &call()).await.unwrap(), 1);
    assert!(matches!(
        s.get(&a, &sid("s"), &call()).await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(s.get(&b, &sid("s"), &call()).await.unwrap().events.len(), 1);
}

pub async fn listing_pages_by_id(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "u");
    for name in ["s3", "s1", "s2", "s4", "s5"] {
        s.append(&sc, &sid(name), &text("e", name), &ao())
            .await
            .unwrap();
    }
    s.append(&scope("app", "v"), &sid("s0"), &text("e", "x"), &ao())
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s.list(&sc, after.as_ref(), Some(2), &call()).await.unwrap();
        assert!(page.items.len() <= 2);
        seen.extend(page.items.iter().map(|i| i.id.as_str().to_owned()));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, ["s1", "s2", "s3", "s4", "s5"]);
    assert!(s.list(&sc, None, Some(0), &call()).await.is_err());
    assert!(s.list(&sc, None, Some(1_000_000), &call()).await.is_err());
}

pub async fn deleting_a_session_leaves_the_others(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "u");
    s.append(&sc, &sid("keep"), &text("e", "k"), &ao())
        .await
        .unwrap();
    s.append(&sc, &sid("drop"), &text("e", "d"), &ao())
        .await
        .unwrap();
    assert!(s.delete(&sc, &sid("drop"), &call()).await.unwrap());
    assert!(!s.delete(&sc, &sid("drop"), &call()).await.unwrap());
    let page = s.list(&sc, None, None, &call()).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].id, sid("keep"));
    // A deleted session starts over: its old event ids are free.
    let r = s
        .append(&sc, &sid("drop"), &text("e", "new"), &ao())
        .await
        .unwrap();
    assert_eq!(r.index, 0);
    assert!(!r.duplicate);
    let st = s.status().await.unwrap();
    assert_eq!((st.sessions, st.events), (2, 2));
    if let Some(s) = f.reopen(s).await {
        let st = s.status().await.unwrap();
        assert_eq!((st.sessions, st.events), (2, 2));
        assert_eq!(
            s.get(&sc, &sid("drop"), &call()).await.unwrap().events[0].text_content(),
            "new"
        );
    }
}

pub async fn limits_refuse_and_change_nothing(f: &dyn SessionStoreFactory) {
    let limits = SessionLimits {
        max_event_bytes: 400,
        max_events_per_session: 2,
        max_sessions_per_user: 2,
        ..SessionLimits::default()
    };
    let s = f.open(limits).await;
    let sc = scope("app", "u");
    s.append(&sc, &sid("a"), &text("1", "x"), &ao())
        .await
        .unwrap();
    s.append(&sc, &sid("a"), &text("2", "x"), &ao())
        .await
        .unwrap();
    assert!(matches!(
        s.append(&sc, &sid("a"), &text("3", "x"), &ao()).await,
        Err(Error::QuotaExceeded {
            limit: QuotaLimit::EventsPerSession(2)
        })
    ));
    // A duplicate of a held event is still answered at the limit.
    assert!(
        s.append(&sc, &sid("a"), &text("2", "x"), &ao())
            .await
            .unwrap()
            .duplicate
    );
    s.append(&sc, &sid("b"), &text("1", "x"), &ao())
        .await
        .unwrap();
    assert!(matches!(
        s.append(&sc, &sid("c"), &text("1", "x"), &ao()).await,
        Err(Error::QuotaExceeded {
            limit: QuotaLimit::SessionsPerUser(2)
        })
    ));
    assert!(matches!(
        s.append(&sc, &sid("b"), &text("big", &"y".repeat(500)), &ao())
            .await,
        Err(Error::InvalidArgument {
            field: Field::Event,
            ..
        })
    ));
    let mut bad = text("", "x");
    assert!(s.append(&sc, &sid("b"), &bad, &ao()).await.is_err());
    bad.id = "ok".into();
    bad.timestamp_ms = -5;
    assert!(s.append(&sc, &sid("b"), &bad, &ao()).await.is_err());
    // Another user has their own quota.
    s.append(&scope("app", "v"), &sid("c"), &text("1", "x"), &ao())
        .await
        .unwrap();
    let st = s.status().await.unwrap();
    assert_eq!((st.sessions, st.events), (3, 4));
    assert!(matches!(
        s.get(&sc, &sid("c"), &call()).await,
        Err(Error::NotFound(_))
    ));
    let caps = s.capabilities();
    for key in SessionLimits::KEYS {
        let name = format!("sessions.{key}");
        assert!(
            caps.limits.iter().any(|l| l.name == name),
            "capabilities report {name}"
        );
    }
}

/// Erasing a session or the user advances its epoch, even when nothing
/// was held; an append carrying the fence read before is refused and
/// re-creates nothing, one read after is taken; other sessions and
/// scopes keep theirs.
pub async fn erasures_fence_appends_admitted_before_them(f: &dyn SessionStoreFactory) {
    let s = f.open(SessionLimits::default()).await;
    let sc = scope("app", "fenced");
    let before = s.fence(&sc, &sid("a"), &call()).await.unwrap();
    assert_eq!(before, ErasureFence::default());
    s.append(&sc, &sid("a"), &text("1", "x"), &fenced(before))
        .await
        .unwrap();
    assert!(s.delete(&sc, &sid("a"), &call()).await.unwrap());
    let after = s.fence(&sc, &sid("a"), &call()).await.unwrap();
    assert_eq!((after.epoch, after.session_epoch), (0, 1));
    let stale = s
        .append(&sc, &sid("a"), &text("2", "y"), &fenced(before))
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleEpoch { .. }), "{stale}");
    assert!(matches!(
        s.get(&sc, &sid("a"), &call()).await,
        Err(Error::NotFound(_))
    ));
    s.append(&sc, &sid("a"), &text("2", "y"), &fenced(after))
        .await
        .unwrap();
    // Another session: untouched; a session never held: fenced too.
    s.append(&sc, &sid("b"), &text("1", "x"), &fenced(before))
        .await
        .unwrap();
    assert!(!s.delete(&sc, &sid("ghost"), &call()).await.unwrap());
    assert_eq!(
        s.fence(&sc, &sid("ghost"), &call())
            .await
            .unwrap()
            .session_epoch,
        1
    );
    // The user: every session's appends read before are refused.
    let b = s.fence(&sc, &sid("b"), &call()).await.unwrap();
    assert_eq!(s.delete_user(&sc, &call()).await.unwrap(), 2);
    let err = s
        .append(&sc, &sid("b"), &text("2", "z"), &fenced(b))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StaleEpoch { .. }), "{err}");
    assert!(
        s.list(&sc, None, None, &call())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let now = s.fence(&sc, &sid("b"), &call()).await.unwrap();
    assert_eq!((now.epoch, now.session_epoch), (1, 0));
    let err = s
        .append(
            &sc,
            &sid("b"),
            &text("2", "z"),
            &fenced(ErasureFence {
                epoch: 2,
                session_epoch: 0,
            }),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FutureEpoch { .. }), "{err}");
    assert_eq!(
        s.fence(&scope("app", "other"), &sid("b"), &call())
            .await
            .unwrap(),
        ErasureFence::default()
    );
    if let Some(s) = f.reopen(s).await {
        assert_eq!(
            s.fence(&sc, &sid("a"), &call()).await.unwrap(),
            ErasureFence {
                epoch: 1,
                session_epoch: 1
            }
        );
    }
}

/// A session's events are read page by page: pages follow each other
/// without gap or repeat, stop at the count and at the byte bound (but
/// hold one event at least), and a missing session is not found.
pub async fn events_are_read_page_by_page(f: &dyn SessionStoreFactory) {
    let limits = SessionLimits {
        max_events_page: 4,
        max_events_page_bytes: 600,
        ..SessionLimits::default()
    };
    let s = f.open(limits).await;
    let sc = scope("app", "pages");
    let mut all = Vec::new();
    for i in 0..10 {
        let body = if i == 6 {
            "z".repeat(900)
        } else {
            format!("event {i}")
        };
        let e = text(&format!("e{i}"), &body);
        s.append(&sc, &sid("s"), &e, &ao()).await.unwrap();
        all.push(e);
    }
    let mut got = Vec::new();
    let mut from = 0;
    let mut pages = 0;
    loop {
        let page = s.events(&sc, &sid("s"), from, None, &call()).await.unwrap();
        assert!(!page.events.is_empty() && page.events.len() <= 4);
        let bytes: usize = page
            .events
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap().len())
            .sum();
        assert!(page.events.len() == 1 || bytes <= 600, "{bytes}");
        got.extend(page.events);
        pages += 1;
        match page.next {
            Some(n) => {
                assert_eq!(n, got.len() as u64);
                from = n;
            }
            None => break,
        }
    }
    assert_eq!(got, all);
    assert!(pages >= 3);
    let two = s.events(&sc, &sid("s"), 8, Some(10), &call()).await;
    assert!(two.is_err(), "a limit over the ceiling is refused");
    let two = s.events(&sc, &sid("s"), 8, Some(2), &call()).await.unwrap();
    assert_eq!((two.events.len(), two.next), (2, None));
    let past = s.events(&sc, &sid("s"), 50, None, &call()).await.unwrap();
    assert!(past.events.is_empty() && past.next.is_none());
    assert!(matches!(
        s.events(&sc, &sid("nope"), 0, None, &call()).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        s.events(&scope("app", "other"), &sid("s"), 0, None, &call())
            .await,
        Err(Error::NotFound(_))
    ));
}

/// Random appends (some carrying the fence read when the test began),
/// deletes and user erasures over two users and two sessions each,
/// checked against a map and the model's epochs after every step.
pub async fn model(f: &dyn SessionStoreFactory, ops: Vec<(u8, u8, u8, u8)>) {
    let s = f.open(SessionLimits::default()).await;
    let scopes = [scope("app", "u0"), scope("app", "u1")];
    let mut want: BTreeMap<(usize, u8), Vec<SessionEvent>> = BTreeMap::new();
    let mut epochs: BTreeMap<(usize, Option<u8>), u64> = BTreeMap::new();
    for (op, user, session, n) in ops {
        let u = usize::from(user % 2);
        let se = session % 2;
        let id = sid(&format!("s{se}"));
        match op % 7 {
            0..=3 => {
                let e = text(&format!("e{}", n % 8), &format!("t{}", n % 3));
                let stale = n % 4 == 0
                    && (epochs.contains_key(&(u, None)) || epochs.contains_key(&(u, Some(se))));
                let opts = if n % 4 == 0 {
                    fenced(ErasureFence::default())
                } else {
                    ao()
                };
                let r = s.append(&scopes[u], &id, &e, &opts).await;
                if stale {
                    assert!(matches!(r, Err(Error::StaleEpoch { .. })), "{r:?}");
                    continue;
                }
                let held = want.entry((u, se)).or_default();
                match held.iter().position(|x| x.id == e.id) {
                    Some(i) if held[i] == e => {
                        assert_eq!(r.unwrap().index, i as u64);
                    }
                    Some(_) => assert!(r.is_err()),
                    None => {
                        assert_eq!(r.unwrap().index, held.len() as u64);
                        held.push(e);
                    }
                }
                if held.is_empty() {
                    want.remove(&(u, se));
                }
            }
            6 => {
                // The session stays, one event shorter (or empty).
                let popped = s.pop_last(&scopes[u], &id, &call()).await.unwrap();
                let expected = want.get_mut(&(u, se)).and_then(Vec::pop);
                assert_eq!(popped, expected);
            }
            4 => {
                let existed = want.remove(&(u, se)).is_some();
                assert_eq!(s.delete(&scopes[u], &id, &call()).await.unwrap(), existed);
                *epochs.entry((u, Some(se))).or_default() += 1;
            }
            _ => {
                let n = want.keys().filter(|(x, _)| *x == u).count() as u64;
                want.retain(|(x, _), _| *x != u);
                assert_eq!(s.delete_user(&scopes[u], &call()).await.unwrap(), n);
                *epochs.entry((u, None)).or_default() += 1;
            }
        }
        for (ui, sc) in scopes.iter().enumerate() {
            for se in 0..2u8 {
                let fence = s.fence(sc, &sid(&format!("s{se}")), &call()).await.unwrap();
                let epoch = |k| epochs.get(&k).copied().unwrap_or(0);
                assert_eq!(
                    (fence.epoch, fence.session_epoch),
                    (epoch((ui, None)), epoch((ui, Some(se))))
                );
                let got = s.get(sc, &sid(&format!("s{se}")), &call()).await;
                // The record alone is the whole session's record.
                let info = s.info(sc, &sid(&format!("s{se}")), &call()).await;
                if let Some(evs) = want.get(&(ui, se)) {
                    let got = got.unwrap();
                    assert_eq!(&got.events, evs);
                    assert_eq!(info.unwrap(), got.info);
                } else {
                    assert!(matches!(got, Err(Error::NotFound(_))));
                    assert!(matches!(info, Err(Error::NotFound(_))), "{info:?}");
                }
            }
        }
    }
}

/// One test per scenario, plus the model test, for `$factory`.
#[macro_export]
macro_rules! session_store_conformance_tests {
    ($factory:expr) => {
        $crate::session_store_conformance_tests!(guard = (|| true), $factory);
    };
    (guard = $guard:expr, $factory:expr) => {
        $crate::session_store_conformance_tests!(@each $guard, $factory;
            events_come_back_in_order_with_every_field,
            a_repeated_event_is_a_duplicate_and_a_changed_one_is_refused,
            scopes_never_see_each_other,
            listing_pages_by_id,
            deleting_a_session_leaves_the_others,
            limits_refuse_and_change_nothing,
            erasures_fence_appends_admitted_before_them,
            events_are_read_page_by_page,
            the_last_event_pops_and_its_id_is_free_again,
        );

        ::proptest::proptest! {
            #![proptest_config(::proptest::prelude::ProptestConfig::with_cases(24))]
            #[test]
            fn random_operations_match_the_model(
                ops in ::proptest::collection::vec(
                    (0u8..7, 0u8..2, 0u8..2, 0u8..16), 1..40)
            ) {
                if !($guard)() {
                    return Ok(());
                }
                let rt = ::tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on($crate::conformance::model(&$factory, ops));
            }
        }
    };
    (@each $guard:expr, $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $name() {
                if !($guard)() {
                    return;
                }
                $crate::conformance::$name(&$factory).await;
            }
        )*
    };
}
