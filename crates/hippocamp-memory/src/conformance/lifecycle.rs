//! Lifecycle scenarios: obligations (expiry, retention, legal hold), the
//! sweeper, and listing with cursors. Every store runs them through
//! `memory_conformance_tests!`, each with a [`ManualClock`] it moves.

use std::collections::BTreeSet;
use std::sync::Arc;

use hippocamp_core::{EntryId, Error, Field, ManualClock, MemoryScope};
use serde_json::json;

use super::{StoreFactory, c, key, obj, scope, sid};
use crate::MemoryConfig;
use crate::config::StoreClock;
use crate::entry::{NewEntry, Obligations, Provenance};
use crate::event::Event;
use crate::list::{ListOrder, ListRequest};
use crate::store::{MemoryStore, SearchRequest, WriteOptions};

pub(crate) const T0: u64 = 1_700_000_000_000;

pub(crate) async fn clocked(f: &dyn StoreFactory) -> (Arc<dyn MemoryStore>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(T0));
    let config = MemoryConfig {
        clock: StoreClock(clock.clone()),
        ..MemoryConfig::default()
    };
    (f.open(config).await, clock)
}

fn with(o: Obligations) -> WriteOptions {
    WriteOptions::default().obligations(o)
}

pub(crate) fn expiring(at: u64) -> Obligations {
    Obligations {
        expires_at_ms: Some(at),
        ..Obligations::default()
    }
}

/// Whether a lexical search, a hybrid search where the store offers it
/// (it fuses vector candidates; else lexical again), `get_entry` and a
/// listing find `id`.
async fn visible(store: &dyn MemoryStore, s: &MemoryScope, id: &EntryId, word: &str) -> [bool; 4] {
    let hybrid = if store
        .capabilities()
        .search
        .modes
        .iter()
        .any(|m| m == "hybrid")
    {
        crate::SearchMode::Hybrid
    } else {
        crate::SearchMode::Lexical
    };
    let mut searched = [false; 2];
    for (found, mode) in searched
        .iter_mut()
        .zip([crate::SearchMode::Lexical, hybrid])
    {
        *found = store
            .search(s, &SearchRequest::new(word).mode(mode), &c())
            .await
            .unwrap()
            .hits
            .iter()
            .any(|h| h.entry.id == *id);
    }
    let got = match store.get_entry(s, id, &c()).await {
        Ok(e) => e.id == *id,
        Err(Error::NotFound(_)) => false,
        Err(e) => panic!("get_entry: {e}"),
    };
    let listed = store
        .list_entries(s, &ListRequest::default(), &c())
        .await
        .unwrap()
        .entries
        .iter()
        .any(|e| e.id == *id);
    [searched[0], searched[1], got, listed]
}

/// An entry is visible one millisecond before it expires and gone from
/// search, get and listing at the exact moment, before any sweep; the
/// sweep then deletes it and the counters drop.
pub async fn expiry_hides_an_entry_at_the_exact_moment(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "expiry");
    let at = T0 + 10_000;
    let added = store
        .add_entry(&s, NewEntry::new("walrus facts"), &with(expiring(at)))
        .await
        .unwrap();
    assert_eq!(added.entry.obligations.expires_at_ms, Some(at));
    let kept = store
        .add_entry(&s, NewEntry::new("walrus tusks"), &WriteOptions::default())
        .await
        .unwrap();
    clock.set(at - 1);
    assert_eq!(
        visible(&*store, &s, &added.entry.id, "walrus").await,
        [true; 4]
    );
    assert_eq!(
        store.get_entry(&s, &added.entry.id, &c()).await.unwrap(),
        added.entry,
        "the obligations are stored with the entry"
    );
    clock.set(at);
    assert_eq!(
        visible(&*store, &s, &added.entry.id, "walrus").await,
        [false; 4]
    );
    assert_eq!(
        visible(&*store, &s, &kept.entry.id, "walrus").await,
        [true; 4]
    );
    assert_eq!(store.status().await.unwrap().entries, 2, "not swept yet");
    let sweep = store.sweep_expired(100, &[], &c()).await.unwrap();
    assert_eq!((sweep.deleted, sweep.more), (1, false));
    assert_eq!(store.status().await.unwrap().entries, 1);
    assert_eq!(
        store.sweep_expired(100, &[], &c()).await.unwrap().deleted,
        0
    );
    // Going back in time does not bring a swept entry back.
    clock.set(T0);
    assert!(matches!(
        store.get_entry(&s, &added.entry.id, &c()).await,
        Err(Error::NotFound(_))
    ));
}

/// A sweep deletes at most its batch, reports whether more are due, never
/// deletes an entry that has not expired, is held or is retained, and an
/// erased event's entry does not come back when the event is sent again.
pub async fn sweeps_are_bounded_and_spare_guarded_entries(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let a = scope("app", "sweep-a");
    let b = scope("other", "sweep-b");
    for i in 0..13u64 {
        let s = if i % 2 == 0 { &a } else { &b };
        store
            .add_entry(
                s,
                NewEntry::new(format!("expiring note {i}")),
                &with(expiring(T0 + 100 + i)),
            )
            .await
            .unwrap();
    }
    let held = Obligations {
        legal_hold: true,
        ..expiring(T0 + 50)
    };
    let retained = Obligations {
        retain_until_ms: Some(T0 + 10_000),
        ..expiring(T0 + 50)
    };
    store
        .add_entry(&a, NewEntry::new("held note"), &with(held))
        .await
        .unwrap();
    store
        .add_entry(&a, NewEntry::new("retained note"), &with(retained))
        .await
        .unwrap();
    let event = Event::text("ev-1", "user", 1, "an expiring event");
    let session = sid("sweep-session");
    store
        .add_events(
            &b,
            &session,
            std::slice::from_ref(&event),
            &with(expiring(T0 + 60)),
        )
        .await
        .unwrap();
    store
        .add_entry(&b, NewEntry::new("late note"), &with(expiring(T0 + 50_000)))
        .await
        .unwrap();
    assert_eq!(store.sweep_expired(5, &[], &c()).await.unwrap().deleted, 0);
    clock.set(T0 + 1_000);
    let mut total = 0;
    let mut rounds = 0;
    loop {
        let sweep = store.sweep_expired(5, &[], &c()).await.unwrap();
        assert!(sweep.deleted <= 5, "a batch of 5 deleted {}", sweep.deleted);
        total += sweep.deleted;
        rounds += 1;
        if !sweep.more {
            break;
        }
        assert!(rounds < 10, "the sweep never finished");
    }
    assert_eq!(total, 14, "13 notes and the event's entry");
    assert!(rounds >= 3);
    // Held, retained and not-yet-expired entries remain stored.
    assert_eq!(store.status().await.unwrap().entries, 3);
    let report = store
        .add_events(&b, &session, &[event], &WriteOptions::default())
        .await
        .unwrap();
    assert!(report.added.is_empty(), "a swept event came back");
    // Retention over, the retained (expired) entry goes; the hold stays.
    clock.set(T0 + 10_000);
    assert_eq!(store.sweep_expired(5, &[], &c()).await.unwrap().deleted, 1);
    assert_eq!(store.status().await.unwrap().entries, 2);
    assert!(matches!(
        store.sweep_expired(0, &[], &c()).await,
        Err(Error::InvalidArgument {
            field: Field::Limit,
            ..
        })
    ));
}

/// Retention refuses deletion of the entry, its session and its user with
/// `Retention` until the moment it ends; a legal hold refuses all three
/// with `LegalHold` (it wins over a retention) whatever the time; a
/// refused deletion deletes nothing and does not advance the epoch.
pub async fn retention_and_legal_hold_refuse_deletion(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "guarded");
    let until = T0 + 500;
    let session = sid("guarded-session");
    let in_session = |text: &str| {
        NewEntry::new(text).provenance(Provenance {
            session_id: Some(session.clone()),
            ..Provenance::default()
        })
    };
    let retained = store
        .add_entry(
            &s,
            in_session("retained fact"),
            &with(Obligations {
                retain_until_ms: Some(until),
                ..Obligations::default()
            }),
        )
        .await
        .unwrap()
        .entry;
    let free = store
        .add_entry(&s, in_session("free fact"), &WriteOptions::default())
        .await
        .unwrap()
        .entry;
    let retention = |r: hippocamp_core::Result<u64>| {
        assert!(
            matches!(r, Err(Error::Retention { until_ms }) if until_ms == until),
            "{r:?}"
        );
    };
    retention(store.delete_entry(&s, &retained.id, &c()).await);
    retention(store.delete_session(&s, &session, &c()).await);
    assert!(matches!(
        store.delete_user(&s, &c()).await,
        Err(Error::Retention { until_ms }) if until_ms == until
    ));
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 0);
    assert!(store.get_entry(&s, &free.id, &c()).await.is_ok());
    assert_eq!(store.status().await.unwrap().entries, 2);
    // An entry outside the session still goes on its own.
    let other = store
        .add_entry(&s, NewEntry::new("other fact"), &WriteOptions::default())
        .await
        .unwrap()
        .entry;
    assert_eq!(store.delete_entry(&s, &other.id, &c()).await.unwrap(), 1);

    let held = store
        .add_entry(
            &s,
            NewEntry::new("held fact"),
            &with(Obligations {
                legal_hold: true,
                ..Obligations::default()
            }),
        )
        .await
        .unwrap()
        .entry;
    assert!(matches!(
        store.delete_entry(&s, &held.id, &c()).await,
        Err(Error::LegalHold)
    ));
    assert!(matches!(
        store.delete_user(&s, &c()).await,
        Err(Error::LegalHold)
    ));
    clock.set(until);
    assert_eq!(store.delete_session(&s, &session, &c()).await.unwrap(), 2);
    clock.set(until + 1_000_000);
    assert!(matches!(
        store.delete_user(&s, &c()).await,
        Err(Error::LegalHold)
    ));
    assert!(store.get_entry(&s, &held.id, &c()).await.is_ok());
    assert_eq!(store.erasure_epoch(&s, &c()).await.unwrap(), 0);
}

/// A duplicate keeps the obligations of the entry stored first.
pub async fn duplicates_keep_their_obligations(f: &dyn StoreFactory) {
    let (store, _clock) = clocked(f).await;
    let s = scope("app", "dup-obligations");
    let first = store
        .add_entry(
            &s,
            NewEntry::new("keyed").idempotency_key(key("k")),
            &with(expiring(T0 + 99)),
        )
        .await
        .unwrap();
    let again = store
        .add_entry(
            &s,
            NewEntry::new("keyed").idempotency_key(key("k")),
            &with(Obligations {
                legal_hold: true,
                ..Obligations::default()
            }),
        )
        .await
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.entry.obligations, first.entry.obligations);
    assert!(store.delete_entry(&s, &first.entry.id, &c()).await.is_ok());
}

/// Listing pages through a scope newest or oldest first with opaque
/// cursors, never repeating or skipping an entry, honours the filter and
/// the limits, leaves out expired entries, and never shows another
/// scope's entries; bad cursors and limits are typed errors.
pub async fn listing_pages_with_cursors(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "lister");
    let other = scope("app", "someone-else");
    let mut ids = Vec::new();
    for i in 0..7u64 {
        let entry = NewEntry::new(format!("listed fact {i}"))
            .metadata(obj(json!({"n": i, "even": i % 2 == 0})))
            .provenance(Provenance {
                timestamp_ms: Some(T0 - 1_000 + i * 10),
                ..Provenance::default()
            });
        let o = if i == 3 {
            expiring(T0 + 5)
        } else {
            Obligations::default()
        };
        ids.push(store.add_entry(&s, entry, &with(o)).await.unwrap().entry.id);
    }
    store
        .add_entry(&other, NewEntry::new("not yours"), &WriteOptions::default())
        .await
        .unwrap();
    let page = |order, limit, cursor: Option<String>| ListRequest {
        limit: Some(limit),
        cursor,
        order: Some(order),
        filter: None,
    };
    let walk = |order| {
        let store = store.clone();
        let s = s.clone();
        async move {
            let mut seen = Vec::new();
            let mut cursor = None;
            let mut pages = 0;
            loop {
                let p = store
                    .list_entries(&s, &page(order, 3, cursor.take()), &c())
                    .await
                    .unwrap();
                assert!(p.entries.len() <= 3);
                seen.extend(p.entries.iter().map(|e| e.id));
                pages += 1;
                match p.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
                assert!(pages < 10);
            }
            seen
        }
    };
    let newest = walk(ListOrder::Newest).await;
    let want: Vec<EntryId> = ids.iter().rev().copied().collect();
    assert_eq!(newest, want);
    let oldest = walk(ListOrder::Oldest).await;
    assert_eq!(oldest, ids);
    // A cursor survives entries added and removed around it.
    let first = store
        .list_entries(&s, &page(ListOrder::Newest, 2, None), &c())
        .await
        .unwrap();
    store.delete_entry(&s, &ids[6], &c()).await.unwrap();
    store.delete_entry(&s, &ids[4], &c()).await.unwrap();
    let rest = store
        .list_entries(&s, &page(ListOrder::Newest, 10, first.next_cursor), &c())
        .await
        .unwrap();
    let rest: Vec<EntryId> = rest.entries.iter().map(|e| e.id).collect();
    assert_eq!(rest, vec![ids[3], ids[2], ids[1], ids[0]]);
    // Expired entries are left out.
    clock.set(T0 + 5);
    let all = store
        .list_entries(&s, &ListRequest::default(), &c())
        .await
        .unwrap();
    let got: BTreeSet<EntryId> = all.entries.iter().map(|e| e.id).collect();
    assert_eq!(got, BTreeSet::from([ids[0], ids[1], ids[2], ids[5]]));
    assert!(all.entries.iter().all(|e| e.scope == s));
    assert!(all.next_cursor.is_none());
    let even = store
        .list_entries(
            &s,
            &ListRequest {
                filter: Some(json!({"even": true})),
                ..ListRequest::default()
            },
            &c(),
        )
        .await
        .unwrap();
    let got: Vec<EntryId> = even.entries.iter().map(|e| e.id).collect();
    assert_eq!(got, vec![ids[2], ids[0]]);
    let empty = store
        .list_entries(&scope("app", "nobody"), &ListRequest::default(), &c())
        .await
        .unwrap();
    assert!(empty.entries.is_empty() && empty.next_cursor.is_none());
    let bad = |r: hippocamp_core::Result<crate::list::EntryPage>, field: Field| {
        assert!(
            matches!(&r, Err(Error::InvalidArgument { field: f, .. }) if *f == field),
            "{r:?}"
        );
    };
    let newest_cursor = store
        .list_entries(&s, &page(ListOrder::Newest, 1, None), &c())
        .await
        .unwrap()
        .next_cursor
        .unwrap();
    bad(
        store
            .list_entries(&s, &page(ListOrder::Oldest, 1, Some(newest_cursor)), &c())
            .await,
        Field::Cursor,
    );
    bad(
        store
            .list_entries(&s, &page(ListOrder::Newest, 1, Some("nope".into())), &c())
            .await,
        Field::Cursor,
    );
    bad(
        store
            .list_entries(&s, &page(ListOrder::Newest, 0, None), &c())
            .await,
        Field::Limit,
    );
    bad(
        store
            .list_entries(&s, &page(ListOrder::Newest, 1_001, None), &c())
            .await,
        Field::Limit,
    );
}

/// Obligations chosen by metadata: the first matching rule gives an
/// entry's obligations, the write's own obligations apply otherwise.
pub async fn metadata_rules_choose_obligations(f: &dyn StoreFactory) {
    let (store, _clock) = clocked(f).await;
    let s = scope("app", "rules");
    let limits = hippocamp_core::MemoryLimits::default();
    let chat = hippocamp_core::Filter::parse(&json!({"kind": "chat"}), limits.json()).unwrap();
    let opts = WriteOptions {
        by_metadata: crate::store::ObligationRules::new(vec![(chat, expiring(T0 + 1))]),
        ..with(expiring(T0 + 1_000))
    };
    let tagged = store
        .add_entry(
            &s,
            NewEntry::new("hello there").metadata(obj(json!({"kind": "chat"}))),
            &opts,
        )
        .await
        .unwrap()
        .entry;
    let plain = store
        .add_entry(&s, NewEntry::new("a real fact"), &opts)
        .await
        .unwrap()
        .entry;
    assert_eq!(tagged.obligations.expires_at_ms, Some(T0 + 1));
    assert_eq!(plain.obligations.expires_at_ms, Some(T0 + 1_000));
    let events = [Event::text("r1", "user", 1, "chatty event")];
    let report = store
        .add_events(&s, &sid("rules-session"), &events, &opts)
        .await
        .unwrap();
    let id = report.added[0].entry_id;
    assert_eq!(
        store
            .get_entry(&s, &id, &c())
            .await
            .unwrap()
            .obligations
            .expires_at_ms,
        Some(T0 + 1_000)
    );
}

/// An export pages through every live entry of the scope exactly once
/// (whatever order the store chooses), the same entries as a listing,
/// leaving out expired ones and never another scope's; a foreign cursor
/// is a typed error.
pub async fn export_pages_through_every_live_entry_once(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "exported");
    let other = scope("app", "not-exported");
    let mut live = BTreeSet::new();
    for i in 0..11u64 {
        let o = if i % 4 == 0 {
            expiring(T0 + 1)
        } else {
            Obligations::default()
        };
        let e = store
            .add_entry(&s, NewEntry::new(format!("exported fact {i}")), &with(o))
            .await
            .unwrap()
            .entry;
        if i % 4 != 0 {
            live.insert(e.id);
        }
    }
    store
        .add_entry(&other, NewEntry::new("elsewhere"), &WriteOptions::default())
        .await
        .unwrap();
    clock.set(T0 + 1);
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..20 {
        let page = store
            .export_entries(
                &s,
                &crate::list::ExportRequest {
                    cursor: cursor.take(),
                    limit: Some(3),
                },
                &c(),
            )
            .await
            .unwrap();
        assert!(page.entries.len() <= 3);
        assert!(page.entries.iter().all(|e| e.scope == s));
        seen.extend(page.entries.iter().map(|e| e.id));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen.len(), live.len(), "each entry once");
    assert_eq!(seen.iter().copied().collect::<BTreeSet<_>>(), live);
    let listed: BTreeSet<EntryId> = store
        .list_entries(&s, &ListRequest::default(), &c())
        .await
        .unwrap()
        .entries
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(listed, live);
    let bad = store
        .export_entries(
            &s,
            &crate::list::ExportRequest {
                cursor: Some("nonsense".into()),
                limit: None,
            },
            &c(),
        )
        .await;
    assert!(matches!(
        bad,
        Err(Error::InvalidArgument {
            field: Field::Cursor,
            ..
        })
    ));
}

/// A sweep leaves every entry of the scopes it is told to spare (a hold
/// placed after the entries were written), expired or not, and sweeps the
/// others; without the spare list those go too.
pub async fn a_sweep_spares_the_scopes_it_is_told_to(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let (held, free) = (scope("app", "held-later"), scope("app", "free"));
    for s in [&held, &free] {
        for i in 0..3 {
            store
                .add_entry(
                    s,
                    NewEntry::new(format!("fact {i}")),
                    &with(expiring(T0 + 5)),
                )
                .await
                .unwrap();
        }
    }
    clock.set(T0 + 5);
    let sweep = store
        .sweep_expired(100, std::slice::from_ref(&held), &c())
        .await
        .unwrap();
    assert_eq!((sweep.deleted, sweep.more), (3, false));
    assert_eq!(
        store.status().await.unwrap().entries,
        3,
        "the held scope's stay"
    );
    // Bounded the same way: a batch of 1 over the spared scope finds nothing.
    let none = store
        .sweep_expired(1, std::slice::from_ref(&held), &c())
        .await
        .unwrap();
    assert_eq!((none.deleted, none.more), (0, false));
    assert_eq!(
        store.sweep_expired(100, &[], &c()).await.unwrap().deleted,
        3
    );
    assert_eq!(store.status().await.unwrap().entries, 0);
}
