//! Correction and restore scenarios: revisions under the same id, the
//! bounded history, re-submissions after a correction, export/import
//! round trips, and the store's index of apps and users. Every store runs
//! them through `memory_conformance_tests!`.

use std::collections::BTreeMap;

use hippocamp_core::{AppName, EntryId, Error, Field, MemoryLimits, MemoryScope};
use serde_json::json;

use super::lifecycle::{T0, clocked};
use super::{StoreFactory, c, key, lexical, obj, scope, sid, with_limits};
use crate::entry::{EntryUpdate, MemoryEntry, NewEntry, Obligations, Revision};
use crate::event::Event;
use crate::import::{ImportReport, ImportedEntry};
use crate::list::{ExportRequest, ListRequest, NamesRequest};
use crate::store::{MemoryStore, WriteOptions};

fn update(content: &str) -> EntryUpdate {
    EntryUpdate {
        content: content.to_owned(),
        metadata: obj(json!({"corrected": true})),
    }
}

async fn found(store: &dyn MemoryStore, s: &MemoryScope, word: &str) -> Vec<EntryId> {
    store
        .search(s, &lexical(word), &c())
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.id)
        .collect()
}

/// A correction is a new revision under the same id: search follows the
/// new text at once, the old text no longer matches, the history lists
/// both newest first, and the same correction again changes nothing.
/// Replaying the add or the event that created the entry is a duplicate
/// and never reverts it; bad corrections are refused and change nothing.
pub async fn corrections_are_revisions_under_the_same_id(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "corrected");
    let original = NewEntry::new("the walrus eats herring").idempotency_key(key("fact-1"));
    let added = store
        .add_entry(&s, original.clone(), &WriteOptions::default())
        .await
        .unwrap()
        .entry;
    assert_eq!(added.revision, 1);
    clock.set(T0 + 5);
    let out = store
        .update_entry(
            &s,
            &added.id,
            &update("the walrus eats clams"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert!(out.changed);
    assert_eq!(out.entry.id, added.id);
    assert_eq!(out.entry.revision, 2);
    assert_eq!(out.entry.revised_at_ms, Some(T0 + 5));
    assert_eq!(out.entry.provenance, added.provenance);
    assert_eq!(out.entry.timestamp_ms, added.timestamp_ms);
    assert_eq!(found(&*store, &s, "clams").await, vec![added.id]);
    assert!(found(&*store, &s, "herring").await.is_empty());
    let got = store.get_entry(&s, &added.id, &c()).await.unwrap();
    assert_eq!(got, out.entry);
    let history = store.entry_history(&s, &added.id, &c()).await.unwrap();
    let revisions: Vec<u32> = history.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, vec![2, 1]);
    assert_eq!(history[1].content, "the walrus eats herring");
    assert_eq!(history[1].written_at_ms, added.timestamp_ms);
    assert_eq!(history[0].written_at_ms, T0 + 5);
    // The same correction again: idempotent.
    let again = store
        .update_entry(
            &s,
            &added.id,
            &update("the walrus eats clams"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert!(!again.changed);
    assert_eq!(again.entry.revision, 2);
    // Replaying the original add: a duplicate that keeps the correction.
    let replay = store
        .add_entry(&s, original, &WriteOptions::default())
        .await
        .unwrap();
    assert!(replay.duplicate);
    assert_eq!(replay.entry.content, "the walrus eats clams");
    // The same for an entry made from an event.
    let session = sid("sess-1");
    let event = Event::text("ev-1", "user", 1, "I live in Lisbon");
    let report = store
        .add_events(
            &s,
            &session,
            std::slice::from_ref(&event),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let from_event = report.added[0].entry_id;
    store
        .update_entry(
            &s,
            &from_event,
            &update("I live in Porto"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let replayed = store
        .add_events(&s, &session, &[event], &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(replayed.duplicates.len(), 1, "{replayed:?}");
    assert!(replayed.added.is_empty());
    assert_eq!(found(&*store, &s, "porto").await, vec![from_event]);
    assert!(found(&*store, &s, "lisbon").await.is_empty());
    // Refusals change nothing.
    let secret = store
        .update_entry(
            &s,
            &added.id,
            &update("password: hunter2"),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(secret, Error::SensitiveContent(_)), "{secret}");
    let empty = store
        .update_entry(&s, &added.id, &update(""), &WriteOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(
        empty,
        Error::InvalidArgument {
            field: Field::Content,
            ..
        }
    ));
    let missing = store
        .update_entry(
            &s,
            &EntryId::from_bytes([9; 16]),
            &update("x"),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
    let elsewhere = store
        .update_entry(
            &scope("app", "someone-else"),
            &added.id,
            &update("x"),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(elsewhere, Error::NotFound(_)), "{elsewhere}");
    let stale = store
        .update_entry(
            &s,
            &added.id,
            &update("walrus"),
            &WriteOptions::default().epoch(7),
        )
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::FutureEpoch { .. }), "{stale}");
    assert_eq!(
        store.get_entry(&s, &added.id, &c()).await.unwrap(),
        out.entry
    );
    // An expired entry cannot be corrected.
    let brief = store
        .add_entry(
            &s,
            NewEntry::new("brief fact"),
            &WriteOptions::default().obligations(Obligations {
                expires_at_ms: Some(T0 + 10),
                ..Obligations::default()
            }),
        )
        .await
        .unwrap()
        .entry;
    clock.set(T0 + 10);
    let gone = store
        .update_entry(&s, &brief.id, &update("x"), &WriteOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(gone, Error::NotFound(_)), "{gone}");
}

/// At most `max_revisions` revisions are kept (the oldest dropped, the
/// byte counters right), a hold refuses a correction that would drop
/// one, and erasure takes the history with the entry: the same key
/// starts again at revision 1.
pub async fn history_is_bounded_and_erased_with_the_entry(f: &dyn StoreFactory) {
    let limits = MemoryLimits {
        max_revisions: 3,
        ..MemoryLimits::default()
    };
    let store = with_limits(f, limits).await;
    let s = scope("app", "history");
    let e = store
        .add_entry(
            &s,
            NewEntry::new("version zero").idempotency_key(key("h")),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .entry;
    for i in 1..=5 {
        store
            .update_entry(
                &s,
                &e.id,
                &update(&format!("version {i} of a longer text")),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let history = store.entry_history(&s, &e.id, &c()).await.unwrap();
    let revisions: Vec<u32> = history.iter().map(|r| r.revision).collect();
    assert_eq!(revisions, vec![6, 5, 4]);
    let current = store.get_entry(&s, &e.id, &c()).await.unwrap();
    assert_eq!(current.revision, 6);
    assert_eq!(Revision::of(&current), history[0]);
    assert_eq!(
        store.status().await.unwrap().bytes,
        current.storage_bytes() + crate::conformance::vector_bytes(f).await
    );
    // A held entry with a full history cannot drop a revision.
    let held = store
        .add_entry(
            &s,
            NewEntry::new("held fact"),
            &WriteOptions::default().obligations(Obligations {
                legal_hold: true,
                ..Obligations::default()
            }),
        )
        .await
        .unwrap()
        .entry;
    for i in 1..=2 {
        store
            .update_entry(
                &s,
                &held.id,
                &update(&format!("held fact {i}")),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let refused = store
        .update_entry(
            &s,
            &held.id,
            &update("held fact 3"),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::LegalHold), "{refused}");
    assert_eq!(
        store.get_entry(&s, &held.id, &c()).await.unwrap().revision,
        3
    );
    // Erasure removes the history; the same key starts afresh.
    assert_eq!(store.delete_entry(&s, &e.id, &c()).await.unwrap(), 1);
    assert!(matches!(
        store.entry_history(&s, &e.id, &c()).await,
        Err(Error::NotFound(_))
    ));
    let again = store
        .add_entry(
            &s,
            NewEntry::new("version zero").idempotency_key(key("h")),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert!(!again.duplicate);
    assert_eq!(again.entry.revision, 1);
    let history = store.entry_history(&s, &e.id, &c()).await.unwrap();
    assert_eq!(history, vec![Revision::of(&again.entry)]);
}

/// Every live entry of `s` with its history, as an export reads them.
async fn exported(store: &dyn MemoryStore, s: &MemoryScope) -> BTreeMap<EntryId, ImportedEntry> {
    let mut out = BTreeMap::new();
    let mut cursor = None;
    loop {
        let page = store
            .export_entries(
                s,
                &ExportRequest {
                    cursor: cursor.take(),
                    limit: Some(2),
                },
                &c(),
            )
            .await
            .unwrap();
        for entry in page.entries {
            let history = if entry.revision > 1 {
                let mut h = store.entry_history(s, &entry.id, &c()).await.unwrap();
                h.reverse();
                h
            } else {
                Vec::new()
            };
            out.insert(entry.id, ImportedEntry { entry, history });
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return out,
        }
    }
}

fn without_epoch(mut e: MemoryEntry) -> MemoryEntry {
    e.epoch = 0;
    e
}

/// An export imported into an empty store reads back equal (entries,
/// obligations, revisions, histories) and searches the same; importing
/// again changes nothing; an import never crosses scopes, never writes
/// over an existing id and never undoes a session's erasure.
pub async fn export_and_import_round_trip(f: &dyn StoreFactory) {
    let (source, _clock) = clocked(f).await;
    let s = scope("app", "round-trip");
    let retained = Obligations {
        retain_until_ms: Some(T0 + 1_000_000),
        expires_at_ms: Some(T0 + 2_000_000),
        legal_hold: false,
    };
    source
        .add_entry(
            &s,
            NewEntry::new("kept fact about owls").metadata(obj(json!({"topic": "birds"}))),
            &WriteOptions::default().obligations(retained),
        )
        .await
        .unwrap();
    let corrected = source
        .add_entry(
            &s,
            NewEntry::new("owls eat mice").idempotency_key(key("owl")),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .entry;
    for text in ["owls eat voles", "owls eat voles and mice"] {
        source
            .update_entry(&s, &corrected.id, &update(text), &WriteOptions::default())
            .await
            .unwrap();
    }
    let session = sid("owl-talk");
    source
        .add_events(
            &s,
            &session,
            &[
                Event::text("o1", "user", 10, "I saw a barn owl"),
                Event::text("o2", "user", 11, "the owl was white"),
            ],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let before = exported(&*source, &s).await;
    assert_eq!(before.len(), 4);

    let (target, _clock) = clocked(f).await;
    let items: Vec<ImportedEntry> = before.values().cloned().collect();
    let mut report = ImportReport::default();
    for chunk in items.chunks(3) {
        report.absorb(
            target
                .import_entries(&s, chunk, &WriteOptions::default())
                .await
                .unwrap(),
        );
    }
    assert_eq!(report.imported, 4, "{report:?}");
    let after = exported(&*target, &s).await;
    assert_eq!(
        after
            .values()
            .map(|i| (without_epoch(i.entry.clone()), i.history.clone()))
            .collect::<Vec<_>>(),
        before
            .values()
            .map(|i| {
                // What the file said of earlier revisions is kept, marked
                // as restored (the file's claim, not the store's record).
                let history = i
                    .history
                    .iter()
                    .map(|r| crate::Revision {
                        restored: true,
                        ..r.clone()
                    })
                    .collect::<Vec<_>>();
                (without_epoch(i.entry.clone()), history)
            })
            .collect::<Vec<_>>()
    );
    for word in ["owls", "voles", "mice", "white"] {
        assert_eq!(
            found(&*target, &s, word).await,
            found(&*source, &s, word).await,
            "{word}"
        );
    }
    // Again: nothing new, nothing changed.
    let twice = target
        .import_entries(&s, &items, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(twice.imported, 0);
    assert_eq!(twice.existing, 4);
    assert_eq!(exported(&*target, &s).await, after);
    // Another scope's records are refused as a whole.
    let foreign = target
        .import_entries(&scope("app", "other"), &items, &WriteOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            foreign,
            Error::InvalidArgument {
                field: Field::Scope,
                ..
            }
        ),
        "{foreign}"
    );
    // Content that does not match its digest (a damaged or hand-edited
    // line) is refused. The digest is a checksum, not provenance: a
    // forger recomputes it, which is why restored history is marked
    // `restored` and a restore takes its obligations from the policy.
    let mut forged = items[0].clone();
    forged.entry.content.push('!');
    let bad = target
        .import_entries(
            &scope("app", "fresh"),
            &[ImportedEntry {
                entry: MemoryEntry {
                    scope: scope("app", "fresh"),
                    ..forged.entry
                },
                history: forged.history,
            }],
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::InvalidArgument { .. }), "{bad}");
    // A session erased in the target stays erased.
    assert_eq!(target.delete_session(&s, &session, &c()).await.unwrap(), 2);
    let restored = target
        .import_entries(&s, &items, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(restored.erased, 2, "{restored:?}");
    assert!(found(&*target, &s, "barn").await.is_empty());
}

async fn names(pages: impl AsyncFnMut(Option<String>) -> crate::list::NamePage) -> Vec<String> {
    let mut pages = pages;
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..50 {
        let page = pages(cursor.take()).await;
        assert!(page.names.len() <= 1);
        out.extend(page.names);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
    panic!("the listing never ended");
}

/// The store indexes the apps and users that hold memory: both page in
/// byte order with cursors, and a scope leaves the index when its last
/// entry goes (erasure, deletion) and comes back with a new one.
pub async fn apps_and_users_are_indexed(f: &dyn StoreFactory) {
    let store = super::default_store(f).await;
    for (app, user) in [
        ("zoo", "u2"),
        ("zoo", "u1"),
        ("aquarium", "u1"),
        ("zoo2", "u9"),
    ] {
        store
            .add_entry(
                &scope(app, user),
                NewEntry::new("a fact"),
                &WriteOptions::default(),
            )
            .await
            .unwrap();
    }
    let one = |cursor: Option<String>| NamesRequest {
        cursor,
        limit: Some(1),
    };
    let apps = names(async |cursor| store.list_apps(&one(cursor), &c()).await.unwrap()).await;
    assert_eq!(apps, ["aquarium", "zoo", "zoo2"]);
    let zoo = AppName::new("zoo").unwrap();
    let users =
        names(async |cursor| store.list_users(&zoo, &one(cursor), &c()).await.unwrap()).await;
    assert_eq!(users, ["u1", "u2"]);
    let all = store
        .list_apps(&NamesRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(all.names, ["aquarium", "zoo", "zoo2"]);
    assert!(all.next_cursor.is_none());
    store.delete_user(&scope("zoo", "u1"), &c()).await.unwrap();
    let left = store
        .list_users(&zoo, &NamesRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(left.names, ["u2"]);
    let only = store
        .list_entries(&scope("aquarium", "u1"), &ListRequest::default(), &c())
        .await
        .unwrap();
    store
        .delete_entry(&scope("aquarium", "u1"), &only.entries[0].id, &c())
        .await
        .unwrap();
    let apps = store
        .list_apps(&NamesRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(apps.names, ["zoo", "zoo2"]);
    store
        .add_entry(
            &scope("aquarium", "u1"),
            NewEntry::new("back"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let apps = store
        .list_apps(&NamesRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(apps.names, ["aquarium", "zoo", "zoo2"]);
    let bad = store
        .list_apps(
            &NamesRequest {
                cursor: Some("not-a-cursor".into()),
                limit: None,
            },
            &c(),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        bad,
        Error::InvalidArgument {
            field: Field::Cursor,
            ..
        }
    ));
    let none = store
        .list_users(
            &AppName::new("nothing").unwrap(),
            &NamesRequest::default(),
            &c(),
        )
        .await
        .unwrap();
    assert!(none.names.is_empty() && none.next_cursor.is_none());
}

/// A correction takes the obligations its new metadata is granted
/// (`WriteOptions::obligations_for`, as the policy gives them) when they
/// are stricter: an earlier expiry applies, a later one never lengthens the
/// entry's life, and the sweeper removes the entry at its new expiry (the
/// store's expiry index follows the correction).
pub async fn a_correction_takes_the_shorter_lifetime_it_is_granted(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "relabelled");
    let expiring = |at: u64| {
        WriteOptions::default().obligations(Obligations {
            expires_at_ms: Some(at),
            ..Obligations::default()
        })
    };
    let added = store
        .add_entry(&s, NewEntry::new("a passing remark"), &expiring(T0 + 1_000))
        .await
        .unwrap()
        .entry;
    let shorter = store
        .update_entry(&s, &added.id, &update("small talk"), &expiring(T0 + 100))
        .await
        .unwrap()
        .entry;
    assert_eq!(shorter.obligations.expires_at_ms, Some(T0 + 100));
    let longer = store
        .update_entry(&s, &added.id, &update("more talk"), &expiring(T0 + 5_000))
        .await
        .unwrap()
        .entry;
    assert_eq!(
        longer.obligations.expires_at_ms,
        Some(T0 + 100),
        "a correction never lengthens a lifetime"
    );
    clock.set(T0 + 99);
    assert_eq!(store.sweep_expired(10, &[], &c()).await.unwrap().deleted, 0);
    clock.set(T0 + 100);
    assert_eq!(store.sweep_expired(10, &[], &c()).await.unwrap().deleted, 1);
    assert!(matches!(
        store.get_entry(&s, &added.id, &c()).await,
        Err(Error::NotFound(_))
    ));
}
