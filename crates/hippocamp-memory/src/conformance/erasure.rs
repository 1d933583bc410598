//! Erasure fences: what a write admitted before an erasure may still do
//! after it (nothing). Every store runs them through
//! `memory_conformance_tests!`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hippocamp_core::{Error, MemoryScope, SessionId};

use super::{StoreFactory, c, default_store, scope, sid};
use crate::entry::Obligations;
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
