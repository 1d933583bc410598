//! Lineage scenarios: origins, fact keys, derived entries and erasure that
//! follows lineage (see [`crate::lineage`]). Every store runs them through
//! `memory_conformance_tests!`.

use std::sync::Arc;

use hippocamp_core::{EntryId, Error, FactKey, MemoryScope};

use super::lifecycle::{T0, clocked, expiring};
use super::{StoreFactory, c, scope, sid, w};
use crate::MemoryConfig;
use crate::entry::{NewEntry, Obligations, Provenance};
use crate::event::Event;
use crate::lineage::{Derivation, FileSource, Origin, Role, Source, Status};
use crate::store::{MemoryStore, SearchRequest, WriteOptions};

fn fk(k: &str) -> FactKey {
    FactKey::new(k).unwrap()
}

fn at(ms: u64) -> Provenance {
    Provenance {
        timestamp_ms: Some(ms),
        ..Provenance::default()
    }
}

async fn note(store: &dyn MemoryStore, s: &MemoryScope, text: &str, ms: u64) -> EntryId {
    store
        .add_entry(s, NewEntry::new(text).provenance(at(ms)), &w())
        .await
        .unwrap()
        .entry
        .id
}

fn derived(text: &str, sources: &[(EntryId, Role)]) -> NewEntry {
    NewEntry {
        derivation: Some(Derivation {
            sources: sources
                .iter()
                .map(|&(entry, role)| Source { entry, role })
                .collect(),
            run: Some("run-test".into()),
        }),
        ..NewEntry::new(text)
    }
}

async fn fact(
    store: &dyn MemoryStore,
    s: &MemoryScope,
    text: &str,
    sources: &[(EntryId, Role)],
) -> EntryId {
    store
        .add_entry(s, derived(text, sources), &w())
        .await
        .unwrap()
        .entry
        .id
}

/// Ids a search for `q` returns, with `f` applied to the request.
async fn found(
    store: &dyn MemoryStore,
    s: &MemoryScope,
    q: &str,
    f: impl FnOnce(&mut SearchRequest),
) -> Vec<EntryId> {
    let mut req = SearchRequest::new(q);
    f(&mut req);
    let mut ids: Vec<EntryId> = store
        .search(s, &req, &c())
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.entry.id)
        .collect();
    ids.sort();
    ids
}

fn sorted(mut v: Vec<EntryId>) -> Vec<EntryId> {
    v.sort();
    v
}

async fn gone(store: &dyn MemoryStore, s: &MemoryScope, id: &EntryId) -> bool {
    matches!(store.get_entry(s, id, &c()).await, Err(Error::NotFound(_)))
}

pub async fn origins_are_recorded_and_filter_search(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "origins");
    let n = note(&*store, &s, "the harbour ferry leaves at nine", 1).await;
    let session = sid("s1");
    store
        .add_events(
            &s,
            &session,
            &[Event::text("e1", "user", 2, "the harbour ferry was late")],
            &w(),
        )
        .await
        .unwrap();
    let f1 = fact(&*store, &s, "ferry: harbour, nine", &[(n, Role::Evidence)]).await;
    let all = found(&*store, &s, "harbour ferry", |_| {}).await;
    assert_eq!(all.len(), 3, "evidence keeps its source current");
    let mut origins = Vec::new();
    for h in store
        .search(&s, &SearchRequest::new("harbour ferry"), &c())
        .await
        .unwrap()
        .hits
    {
        origins.push((h.entry.id, h.entry.origin));
    }
    assert!(origins.contains(&(n, Origin::Note)));
    assert!(origins.contains(&(f1, Origin::Fact)));
    assert!(origins.iter().any(|&(_, o)| o == Origin::Turn));
    let facts = found(&*store, &s, "harbour ferry", |r| {
        r.origins = vec![Origin::Fact];
    })
    .await;
    assert_eq!(facts, [f1]);
    let e = store.get_entry(&s, &f1, &c()).await.unwrap();
    assert_eq!(e.origin, Origin::Fact);
    assert_eq!(
        e.derived_from,
        [Source {
            entry: n,
            role: Role::Evidence
        }]
    );
    assert_eq!(e.consolidation.as_deref(), Some("run-test"));
    // A client cannot forge lineage: the wire shape has no such field.
    let forged: Result<NewEntry, _> = serde_json::from_value(serde_json::json!({
        "content": "x", "derivation": {"sources": []}
    }));
    assert!(forged.is_err());
    let forged: Result<NewEntry, _> = serde_json::from_value(serde_json::json!({
        "content": "x", "derived_from": [{"entry": n.to_string(), "role": "merged"}]
    }));
    assert!(forged.is_err());
}

pub async fn a_newer_fact_key_supersedes_an_older_one(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "fact-keys");
    let add = |text: &'static str, ms: u64| {
        let store = Arc::clone(&store);
        let s = s.clone();
        async move {
            store
                .add_entry(
                    &s,
                    NewEntry::new(text)
                        .provenance(at(ms))
                        .fact_key(fk("user.home_city")),
                    &w(),
                )
                .await
                .unwrap()
                .entry
                .id
        }
    };
    let old = add("the user's home city is Lisbon", 10).await;
    let new = add("the user's home city is Porto", 20).await;
    let other = store
        .add_entry(
            &s,
            NewEntry::new("the user's work city is Braga").fact_key(fk("user.work_city")),
            &w(),
        )
        .await
        .unwrap()
        .entry
        .id;
    assert_eq!(
        found(&*store, &s, "user city", |_| {}).await,
        sorted(vec![new, other])
    );
    assert_eq!(
        found(&*store, &s, "user city", |r| r.include_superseded = true).await,
        sorted(vec![old, new, other])
    );
    let e = store.get_entry(&s, &old, &c()).await.unwrap();
    assert_eq!(e.status, Status::Superseded);
    assert_eq!(e.superseded_by, Some(new));
    assert_eq!(e.fact_key, Some(fk("user.home_city")));
    // Said earlier, learnt later: time said decides, not arrival.
    let late = add("the user's home city was Faro", 5).await;
    assert_eq!(
        store.get_entry(&s, &late, &c()).await.unwrap().status,
        Status::Superseded
    );
    let listed = store
        .list_entries(&s, &crate::list::ListRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(
        listed
            .entries
            .iter()
            .filter(|e| e.status == Status::Superseded)
            .count(),
        2
    );
    // The newest goes: the one before it is current again.
    store.delete_entry(&s, &new, &c()).await.unwrap();
    let e = store.get_entry(&s, &old, &c()).await.unwrap();
    assert_eq!(e.status, Status::Current);
    assert_eq!(e.superseded_by, None);
    assert_eq!(
        found(&*store, &s, "user city", |_| {}).await,
        sorted(vec![old, other])
    );
}

pub async fn derived_entries_hide_what_they_merge_and_need_live_sources(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "derived");
    let one = note(&*store, &s, "my favourite colour is blue", 1).await;
    let two = note(&*store, &s, "favourite colour: blue", 2).await;
    let f1 = fact(
        &*store,
        &s,
        "favourite colour: blue",
        &[(one, Role::Merged), (two, Role::Merged)],
    )
    .await;
    assert_eq!(found(&*store, &s, "favourite colour", |_| {}).await, [f1]);
    assert_eq!(
        found(&*store, &s, "favourite colour", |r| r.include_merged = true).await,
        sorted(vec![one, two, f1])
    );
    let err = store.get_entry(&s, &one, &c()).await.unwrap();
    assert_eq!((err.status, err.merged_into), (Status::Merged, Some(f1)));
    let lin = store.entry_lineage(&s, &f1, &c()).await.unwrap();
    assert_eq!(
        sorted(lin.sources.iter().map(|x| x.entry).collect()),
        sorted(vec![one, two])
    );
    assert!(lin.sources.iter().all(|x| x.status == Status::Merged));
    let lin = store.entry_lineage(&s, &one, &c()).await.unwrap();
    assert_eq!(lin.derived.len(), 1);
    assert_eq!(
        (lin.derived[0].entry, lin.derived[0].role),
        (f1, Role::Merged)
    );
    // A source that is not in the scope: nothing is written.
    let elsewhere = note(&*store, &scope("app", "someone-else"), "blue", 3).await;
    let before = store.status().await.unwrap().entries;
    let err = store
        .add_entry(
            &s,
            derived("x", &[(one, Role::Merged), (elsewhere, Role::Merged)]),
            &w(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::SourceGone(id) if id == elsewhere),
        "{err:?}"
    );
    assert_eq!(store.status().await.unwrap().entries, before);
    // No sources, one named twice, or more than the reported bound:
    // refused.
    assert!(store.add_entry(&s, derived("x", &[]), &w()).await.is_err());
    let max = store
        .capabilities()
        .limits
        .iter()
        .find(|l| l.name == "max_derived_sources")
        .map(|l| l.value);
    assert_eq!(max, Some(crate::lineage::MAX_SOURCES as u64));
    let many: Vec<(EntryId, Role)> = (0..=crate::lineage::MAX_SOURCES)
        .map(|_| (EntryId::random(), Role::Merged))
        .collect();
    let err = store.add_entry(&s, derived("x", &many), &w()).await;
    assert!(matches!(err, Err(Error::InvalidArgument { .. })), "{err:?}");
    assert!(
        store
            .add_entry(
                &s,
                derived("x", &[(one, Role::Merged), (one, Role::Evidence)]),
                &w()
            )
            .await
            .is_err()
    );
}

pub async fn erasing_a_source_erases_what_was_derived_from_it(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "cascade");
    let one = note(&*store, &s, "the dog is called Rex", 1).await;
    let two = note(&*store, &s, "our dog is called Rex", 2).await;
    let f1 = fact(
        &*store,
        &s,
        "dog: Rex",
        &[(one, Role::Merged), (two, Role::Merged)],
    )
    .await;
    let c2 = note(&*store, &s, "Rex is one beagle", 3).await;
    let f2 = fact(
        &*store,
        &s,
        "dog: Rex, one beagle",
        &[(f1, Role::Merged), (c2, Role::Merged)],
    )
    .await;
    // Erasing one source erases the chain derived from it, in one call.
    assert_eq!(store.delete_entry(&s, &one, &c()).await.unwrap(), 3);
    for id in [one, f1, f2] {
        assert!(gone(&*store, &s, &id).await, "{id} survived");
    }
    // What the erased facts merged, and was not erased, is current again.
    for id in [two, c2] {
        let err = store.get_entry(&s, &id, &c()).await.unwrap();
        assert_eq!(err.status, Status::Current, "{id}");
    }
    assert_eq!(
        found(&*store, &s, "Rex", |_| {}).await,
        sorted(vec![two, c2])
    );
    // A session's erasure erases what was derived from its turns.
    let session = sid("cascade-session");
    store
        .add_events(
            &s,
            &session,
            &[Event::text("t1", "user", 5, "I moved to Porto in May")],
            &w(),
        )
        .await
        .unwrap();
    let turn = store
        .search(&s, &SearchRequest::new("moved Porto"), &c())
        .await
        .unwrap()
        .hits[0]
        .entry
        .id;
    let f3 = fact(&*store, &s, "home: Porto", &[(turn, Role::Evidence)]).await;
    store.delete_session(&s, &session, &c()).await.unwrap();
    assert!(gone(&*store, &s, &f3).await);
    // Erasure is sticky for derived entries too: the same fact cannot be
    // written again from one source that is gone.
    let err = store
        .add_entry(&s, derived("home: Porto", &[(turn, Role::Evidence)]), &w())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SourceGone(_)), "{err:?}");
    // A user's erasure takes everything.
    let f4 = fact(&*store, &s, "dog: Rex", &[(two, Role::Merged)]).await;
    store.delete_user(&s, &c()).await.unwrap();
    for id in [two, c2, f4] {
        assert!(gone(&*store, &s, &id).await);
    }
}

pub async fn a_derived_entry_lives_no_longer_than_its_sources(f: &dyn StoreFactory) {
    let (store, clock) = clocked(f).await;
    let s = scope("app", "derived-ttl");
    let short = store
        .add_entry(
            &s,
            NewEntry::new("a short-lived note about tea"),
            &WriteOptions::default().obligations(expiring(T0 + 100)),
        )
        .await
        .unwrap()
        .entry
        .id;
    let long = note(&*store, &s, "a lasting note about tea", 1).await;
    let f1 = store
        .add_entry(
            &s,
            derived("tea", &[(short, Role::Merged), (long, Role::Merged)]),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    assert_eq!(f1.obligations.expires_at_ms, Some(T0 + 100));
    clock.set(T0 + 100);
    assert!(gone(&*store, &s, &f1.id).await);
    // Expired, the fact hides nothing, swept or not.
    assert_eq!(
        store.get_entry(&s, &long, &c()).await.unwrap().status,
        Status::Current
    );
    assert_eq!(found(&*store, &s, "lasting tea", |_| {}).await, [long]);
    // Expired, the source cannot be derived from.
    let e = store
        .add_entry(&s, derived("tea", &[(short, Role::Merged)]), &w())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::SourceGone(_)), "{e:?}");
    let swept = store.sweep_expired(100, &[], &c()).await.unwrap();
    assert_eq!(swept.deleted, 2, "the source and its fact");
    let e = store.get_entry(&s, &long, &c()).await.unwrap();
    assert_eq!(e.status, Status::Current);
}

pub async fn a_hold_on_a_derived_entry_refuses_erasing_its_source(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "derived-hold");
    let a = note(&*store, &s, "the contract ends in June", 1).await;
    let held = WriteOptions::default().obligations(Obligations {
        legal_hold: true,
        ..Obligations::default()
    });
    let f1 = store
        .add_entry(&s, derived("contract: June", &[(a, Role::Merged)]), &held)
        .await
        .unwrap()
        .entry
        .id;
    let e = store.delete_entry(&s, &a, &c()).await.unwrap_err();
    assert!(matches!(e, Error::LegalHold), "{e:?}");
    // Refused whole: the source and the fact are both still there.
    assert!(!gone(&*store, &s, &a).await);
    assert!(!gone(&*store, &s, &f1).await);
}

pub async fn an_import_keeps_a_derived_entry_only_with_live_sources(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "derived-import");
    let one = note(&*store, &s, "the gate code is 4411", 1).await;
    let two = note(&*store, &s, "gate code: 4411", 2).await;
    let f1 = fact(
        &*store,
        &s,
        "gate code 4411",
        &[(one, Role::Merged), (two, Role::Merged)],
    )
    .await;
    let exported = store
        .export_entries(&s, &crate::list::ExportRequest::default(), &c())
        .await
        .unwrap()
        .entries;
    let items = |order: &[EntryId]| -> Vec<crate::ImportedEntry> {
        order
            .iter()
            .map(|id| crate::ImportedEntry {
                entry: exported.iter().find(|e| e.id == *id).unwrap().clone(),
                history: Vec::new(),
            })
            .collect()
    };
    // Into a store that never held the scope: the fact before its
    // sources is not written; offered again after them, it is.
    let fresh = f.open(MemoryConfig::default()).await;
    let r = fresh
        .import_entries(&s, &items(&[f1, one, two]), &w())
        .await
        .unwrap();
    assert_eq!((r.imported, r.unsourced), (2, 1));
    let r = fresh.import_entries(&s, &items(&[f1]), &w()).await.unwrap();
    assert_eq!((r.imported, r.unsourced), (1, 0));
    let e = fresh.get_entry(&s, &one, &c()).await.unwrap();
    assert_eq!((e.status, e.merged_into), (Status::Merged, Some(f1)));
    let got = fresh.get_entry(&s, &f1, &c()).await.unwrap();
    assert_eq!(got.derived_from.len(), 2);
    assert!(got.lineage_restored, "a restored lineage says so");
    assert!(
        !store
            .get_entry(&s, &f1, &c())
            .await
            .unwrap()
            .lineage_restored
    );
    // Sources first: everything in one import.
    let other = f.open(MemoryConfig::default()).await;
    let r = other
        .import_entries(&s, &items(&[one, two, f1]), &w())
        .await
        .unwrap();
    assert_eq!((r.imported, r.unsourced), (3, 0));
    // A source erased since the export: the fact is never restored.
    store.delete_entry(&s, &two, &c()).await.unwrap();
    let r = store
        .import_entries(&s, &items(&[one, two, f1]), &w())
        .await
        .unwrap();
    assert_eq!(
        (r.existing, r.erased, r.unsourced, r.imported),
        (1, 2, 0, 0)
    );
    assert!(gone(&*store, &s, &f1).await);
}

fn file(name: &str, version: u64, text: &str, ms: u64) -> NewEntry {
    NewEntry {
        file: Some(FileSource {
            name: name.into(),
            version,
        }),
        ..NewEntry::new(text).provenance(at(ms))
    }
}

/// A file entry (text indexed from an artifact version): its id and fact
/// key follow from the version, so indexing a version twice finds the
/// first, the newest version is current, erasing it makes the one before
/// current again and erases what was derived from it, and it keeps its
/// version through a read, a search, its lineage, an export and an
/// import.
pub async fn file_entries_follow_their_versions(f: &dyn StoreFactory) {
    let store = f.open(MemoryConfig::default()).await;
    let s = scope("app", "files");
    let v1 = store
        .add_entry(
            &s,
            file(".memories/trip.md", 1, "the trip is to Lisbon", 10),
            &w(),
        )
        .await
        .unwrap();
    assert_eq!(v1.entry.origin, Origin::File);
    let again = store
        .add_entry(
            &s,
            file(".memories/trip.md", 1, "the trip is to Lisbon", 10),
            &w(),
        )
        .await
        .unwrap();
    assert!(again.duplicate, "a version is indexed once");
    assert_eq!(again.entry.id, v1.entry.id);
    let v2 = store
        .add_entry(
            &s,
            file(".memories/trip.md", 2, "the trip is to Porto", 20),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    let other = store
        .add_entry(
            &s,
            file(".memories/other.md", 1, "the trip budget", 30),
            &w(),
        )
        .await
        .unwrap()
        .entry;
    let got = store.get_entry(&s, &v1.entry.id, &c()).await.unwrap();
    assert_eq!(
        (got.status, got.superseded_by),
        (Status::Superseded, Some(v2.id)),
        "the newer version supersedes the older"
    );
    assert_eq!(
        got.file,
        Some(FileSource {
            name: ".memories/trip.md".into(),
            version: 1
        })
    );
    assert_eq!(
        found(&*store, &s, "trip", |_| {}).await,
        sorted(vec![v2.id, other.id])
    );
    let hit = store
        .search(&s, &SearchRequest::new("Porto"), &c())
        .await
        .unwrap()
        .hits
        .remove(0);
    assert_eq!(
        (hit.entry.origin, hit.entry.file.clone()),
        (Origin::File, v2.file.clone())
    );
    let only_files = found(&*store, &s, "trip", |r| r.origins = vec![Origin::File]).await;
    assert_eq!(only_files.len(), 2);
    let lineage = store.entry_lineage(&s, &v2.id, &c()).await.unwrap();
    assert_eq!(lineage.file, v2.file);
    // A fact derived from the newest version goes with it; the version
    // before is current again.
    let f1 = fact(
        &*store,
        &s,
        "destination: Porto",
        &[(v2.id, Role::Evidence)],
    )
    .await;
    store.delete_entry(&s, &v2.id, &c()).await.unwrap();
    assert!(
        gone(&*store, &s, &f1).await,
        "erasing a version erases its facts"
    );
    let got = store.get_entry(&s, &v1.entry.id, &c()).await.unwrap();
    assert_eq!(got.status, Status::Current);
    // Export and import keep the version; a file entry whose id does not
    // follow from its version is refused.
    let exported = store
        .export_entries(&s, &crate::list::ExportRequest::default(), &c())
        .await
        .unwrap()
        .entries;
    let e1 = exported
        .iter()
        .find(|e| e.id == v1.entry.id)
        .unwrap()
        .clone();
    let fresh = f.open(MemoryConfig::default()).await;
    let r = fresh
        .import_entries(
            &s,
            &[crate::ImportedEntry {
                entry: e1.clone(),
                history: Vec::new(),
            }],
            &w(),
        )
        .await
        .unwrap();
    assert_eq!(r.imported, 1);
    assert_eq!(
        fresh.get_entry(&s, &e1.id, &c()).await.unwrap().file,
        e1.file
    );
    let mut forged = e1;
    forged.file = Some(FileSource {
        name: ".memories/trip.md".into(),
        version: 9,
    });
    let r = fresh
        .import_entries(
            &s,
            &[crate::ImportedEntry {
                entry: forged,
                history: Vec::new(),
            }],
            &w(),
        )
        .await;
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    // A version is positive and a file entry is not derived.
    let r = store
        .add_entry(&s, file(".memories/trip.md", 0, "zero", 40), &w())
        .await;
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    let mut both = file(".memories/trip.md", 3, "both", 40);
    both.derivation = derived("x", &[(v1.entry.id, Role::Evidence)]).derivation;
    let r = store.add_entry(&s, both, &w()).await;
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
}
