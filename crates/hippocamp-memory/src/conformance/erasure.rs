//! Erasure fences: what a write admitted before an erasure may still do
//! after it (nothing). Every store runs them through
//! `memory_conformance_tests!`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hippocamp_core::{Error, MemoryScope, SessionId};

use super::{StoreFactory, c, default_store, scope, sid};
use crate::entry::Obligations;
use crate::erasure::{ErasureRecords, ErasureRequest, ImportedErasures, SessionEpoch};
use crate::event::Event;
use crate::list::ListRequest;
use crate::store::{ErasureFence, MemoryStore, WriteOptions};

fn events(prefix: &str, n: i64) -> Vec<Event> {
    (0..n)
        .map(|i| {
            Event::text(
                format!("{prefix}-{i}"),
                "user",
                1_000 + i,
                format!("{prefix} remembers fact {i}"),
            )
        })
        .collect()
}

/// The live entries of `session`, read through the listing.
pub(crate) async fn entries_of(
    store: &dyn MemoryStore,
    s: &MemoryScope,
    session: &SessionId,
) -> usize {
    let mut n = 0;
    let mut cursor = None;
    loop {
        let page = store
            .list_entries(
                s,
                &ListRequest {
                    cursor,
                    ..ListRequest::default()
                },
                &c(),
            )
            .await
            .unwrap();
        n += page
            .entries
            .iter()
            .filter(|e| e.provenance.session_id.as_ref() == Some(session))
            .count();
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return n,
        }
    }
}

fn fenced(f: ErasureFence) -> WriteOptions {
    WriteOptions::default().fenced(f)
}

/// `delete_session` advances the session's erasure epoch in its own
/// step, even for a session that holds nothing; a write carrying the
/// epoch read before is refused, whatever events it brings; other
/// sessions and a refused deletion change nothing.
pub async fn a_session_erasure_fences_writes_admitted_before_it(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "fenced");
    let (one, two, ghost) = (sid("one"), sid("two"), sid("ghost"));
    let before = store.erasure_fence(&s, &one, &c()).await.unwrap();
    assert_eq!(before, ErasureFence::default());
    store
        .add_events(&s, &one, &events("a", 3), &fenced(before))
        .await
        .unwrap();
    assert_eq!(store.delete_session(&s, &one, &c()).await.unwrap(), 3);
    let after = store.erasure_fence(&s, &one, &c()).await.unwrap();
    assert_eq!(
        after,
        ErasureFence {
            epoch: 0,
            session_epoch: 1
        }
    );
    // New events, admitted before the erasure: refused, nothing written.
    let stale = store
        .add_events(&s, &one, &events("b", 2), &fenced(before))
        .await
        .unwrap_err();
    assert!(
        matches!(
            stale,
            Error::StaleEpoch {
                admitted: 0,
                current: 1
            }
        ),
        "{stale}"
    );
    assert_eq!(entries_of(&*store, &s, &one).await, 0);
    // A fence the session has not reached was never handed out.
    let future = ErasureFence {
        epoch: 0,
        session_epoch: 2,
    };
    let err = store
        .add_events(&s, &one, &events("b", 2), &fenced(future))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FutureEpoch { .. }), "{err}");
    // Admitted after: written.
    let r = store
        .add_events(&s, &one, &events("b", 2), &fenced(after))
        .await
        .unwrap();
    assert_eq!(r.added.len(), 2);
    // Another session of the scope is untouched.
    assert_eq!(
        store.erasure_fence(&s, &two, &c()).await.unwrap(),
        ErasureFence::default()
    );
    store
        .add_events(&s, &two, &events("c", 1), &fenced(before))
        .await
        .unwrap();
    // A session that never held anything is fenced too.
    assert_eq!(store.delete_session(&s, &ghost, &c()).await.unwrap(), 0);
    assert_eq!(
        store
            .erasure_fence(&s, &ghost, &c())
            .await
            .unwrap()
            .session_epoch,
        1
    );
    // Another scope's sessions are its own.
    let other = scope("app", "other");
    assert_eq!(
        store.erasure_fence(&other, &one, &c()).await.unwrap(),
        ErasureFence::default()
    );
    // A deletion the store refuses (a retention) advances nothing.
    let retained = WriteOptions::default().obligations(Obligations {
        retain_until_ms: Some(u64::MAX / 4),
        ..Obligations::default()
    });
    store
        .add_events(&s, &two, &events("d", 1), &retained)
        .await
        .unwrap();
    let err = store.delete_session(&s, &two, &c()).await.unwrap_err();
    assert!(matches!(err, Error::Retention { .. }), "{err}");
    assert_eq!(
        store.erasure_fence(&s, &two, &c()).await.unwrap(),
        ErasureFence::default()
    );
    // Erasing the user advances the scope's epoch; the sessions keep
    // theirs, and a write carrying the old scope epoch is refused.
    let held = scope("app", "erased");
    let f = store.erasure_fence(&held, &one, &c()).await.unwrap();
    store.delete_user(&held, &c()).await.unwrap();
    let now = store.erasure_fence(&held, &one, &c()).await.unwrap();
    assert_eq!((now.epoch, now.session_epoch), (1, 0));
    let err = store
        .add_events(&held, &one, &events("e", 1), &fenced(f))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StaleEpoch { .. }), "{err}");
}

/// A writer delivering a session's events with the fence it read first
/// (as a queue's delivery or a runner's background ingestion does) races
/// the session's erasure through the same handle: once the erasure is
/// acknowledged, none of the session's entries is there, and none ever
/// comes back.
pub async fn a_delivery_racing_a_session_erasure_never_writes_it_back(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let s = scope("app", "racing");
    let session = sid("raced");
    let fence = store.erasure_fence(&s, &session, &c()).await.unwrap();
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (store, s, session, written) = (
            Arc::clone(&store),
            s.clone(),
            session.clone(),
            Arc::clone(&written),
        );
        tokio::spawn(async move {
            for batch in 0..200 {
                let evs = events(&format!("batch{batch}"), 4);
                match store.add_events(&s, &session, &evs, &fenced(fence)).await {
                    Ok(_) => {
                        written.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                    Err(Error::StaleEpoch { .. }) => return batch,
                    Err(e) => panic!("{e}"),
                }
            }
            200
        })
    };
    while written.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    store.delete_session(&s, &session, &c()).await.unwrap();
    let stopped_at = writer.await.unwrap();
    assert!(stopped_at < 200, "the writer was never refused");
    assert_eq!(entries_of(&*store, &s, &session).await, 0);
    assert_eq!(
        store
            .erasure_fence(&s, &session, &c())
            .await
            .unwrap()
            .session_epoch,
        1
    );
}

async fn records(store: &dyn MemoryStore, s: &MemoryScope) -> ErasureRecords {
    let mut all = ErasureRecords::default();
    let mut cursor = None;
    loop {
        let page = store
            .export_erasures(
                s,
                &ErasureRequest {
                    cursor,
                    limit: Some(2),
                },
                &c(),
            )
            .await
            .unwrap();
        assert!(page.records.len() <= 2);
        all.entries.extend(page.records.entries);
        all.sessions.extend(page.records.sessions);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return all,
        }
    }
}

/// Every erasure leaves a record, an entry's id whether or not it came
/// from a session, a session's epoch: an export lists them page by page,
/// an import of an erased entry counts it as erased, and each counts
/// against the scope's byte quota (an erasure is never refused for it,
/// the next write is).
#[allow(clippy::many_single_char_names)] // f, s, n: the suite's names
pub async fn erasures_leave_records_that_are_listed_and_counted(f: &dyn StoreFactory) {
    let max = 2_000;
    let store = f
        .open(crate::MemoryConfig {
            limits: hippocamp_core::MemoryLimits {
                max_bytes_per_scope: max,
                ..hippocamp_core::MemoryLimits::default()
            },
            ..crate::MemoryConfig::default()
        })
        .await;
    assert!(store.capabilities().limits.iter().any(
        |l| l.name == "erasure_record_bytes" && l.value == crate::erasure::ERASURE_RECORD_BYTES
    ));
    let s = scope("app", "records");
    // A note without a session, deleted by id: recorded too.
    let note = store
        .add_entry(&s, crate::NewEntry::new("a note"), &WriteOptions::default())
        .await
        .unwrap()
        .entry;
    assert_eq!(store.delete_entry(&s, &note.id, &c()).await.unwrap(), 1);
    store
        .add_events(&s, &sid("chat"), &events("m", 2), &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        store.delete_session(&s, &sid("chat"), &c()).await.unwrap(),
        2
    );
    let got = records(&*store, &s).await;
    assert_eq!(got.entries.len(), 3, "{got:?}");
    assert!(got.entries.contains(&note.id));
    let mut sorted = got.entries.clone();
    sorted.sort_unstable();
    assert_eq!(got.entries, sorted, "ids come in order");
    assert_eq!(got.sessions.len(), 1);
    assert_eq!(
        (got.sessions[0].session.as_str(), got.sessions[0].epoch),
        ("chat", 1)
    );
    // A restore of the deleted note does not bring it back.
    let imported = store
        .import_entries(
            &s,
            &[crate::ImportedEntry {
                entry: note.clone(),
                history: Vec::new(),
            }],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!((imported.erased, imported.imported), (1, 0));
    assert!(matches!(
        store.get_entry(&s, &note.id, &c()).await,
        Err(Error::NotFound(_))
    ));
    // Records count against the byte quota: a scope holding them fits
    // fewer entries than one that does not.
    let fill = |s: MemoryScope| {
        let store = Arc::clone(&store);
        async move {
            let mut n = 0u64;
            loop {
                let r = store
                    .add_entry(
                        &s,
                        crate::NewEntry::new(format!("filler {n:03}")),
                        &WriteOptions::default(),
                    )
                    .await;
                match r {
                    Ok(_) => n += 1,
                    Err(Error::QuotaExceeded { .. }) => return n,
                    Err(e) => panic!("{e}"),
                }
                assert!(n < 100);
            }
        }
    };
    let with_records = fill(s.clone()).await;
    let without = fill(scope("app", "no-records")).await;
    assert!(with_records < without, "{with_records} vs {without}");
    // Erasing never fails for it; the records grow, the entries go.
    store.delete_user(&s, &c()).await.unwrap();
    let after = records(&*store, &s).await;
    assert_eq!(
        after.entries.len(),
        3 + usize::try_from(with_records).unwrap()
    );
}

/// An export's erasures restored: a scope never held here takes the
/// export's epoch and its records (so the export's erased entries stay
/// erased); a scope held at another epoch is refused, typed.
pub async fn imported_erasures_fence_a_fresh_scope(f: &dyn StoreFactory) {
    let store = default_store(f).await;
    let fresh = scope("app", "fresh");
    let gone = crate::entry::prepare_entry(
        &fresh,
        crate::NewEntry::new("erased elsewhere"),
        &hippocamp_core::MemoryLimits::default(),
    )
    .unwrap()
    .entry;
    // A turn erased before the export, whatever its session.
    let turn = hippocamp_core::EntryId::derive(
        &fresh,
        &hippocamp_core::IdempotencyKey::new("event:x1").unwrap(),
    );
    let records = ErasureRecords {
        entries: vec![gone.id, turn],
        sessions: vec![SessionEpoch {
            session: sid("old"),
            epoch: 2,
        }],
    };
    let done = store
        .import_erasures(
            &fresh,
            &ImportedErasures {
                epoch: 3,
                records: records.clone(),
            },
            &c(),
        )
        .await
        .unwrap();
    assert!(done.adopted_epoch);
    assert_eq!(done.added, 3);
    let fence = store
        .erasure_fence(&fresh, &sid("old"), &c())
        .await
        .unwrap();
    assert_eq!((fence.epoch, fence.session_epoch), (3, 2));
    let mut gone_at_3 = gone.clone();
    gone_at_3.epoch = 3;
    let r = store
        .import_entries(
            &fresh,
            &[crate::ImportedEntry {
                entry: gone_at_3,
                history: Vec::new(),
            }],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.erased, 1);
    // The turn sent again, in any session: skipped as erased.
    let again = store
        .add_events(
            &fresh,
            &sid("new"),
            &[Event::text("x1", "user", 1, "a turn erased elsewhere")],
            &WriteOptions::default().epoch(3),
        )
        .await
        .unwrap();
    assert!(again.added.is_empty(), "{again:?}");
    // Again: idempotent, nothing new.
    let again = store
        .import_erasures(&fresh, &ImportedErasures { epoch: 3, records }, &c())
        .await
        .unwrap();
    assert_eq!((again.adopted_epoch, again.added), (false, 0));
    // An older export: erased since.
    let err = store
        .import_erasures(
            &fresh,
            &ImportedErasures {
                epoch: 1,
                records: ErasureRecords::default(),
            },
            &c(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::StaleEpoch { .. }), "{err}");
    // A scope that holds data at a lower epoch: the export comes from
    // elsewhere, refused.
    let held = scope("app", "held");
    store
        .add_entry(
            &held,
            crate::NewEntry::new("here"),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let err = store
        .import_erasures(
            &held,
            &ImportedErasures {
                epoch: 2,
                records: ErasureRecords::default(),
            },
            &c(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::FutureEpoch { .. }), "{err}");
    assert_eq!(store.erasure_epoch(&held, &c()).await.unwrap(), 0);
}
