//! The PostgreSQL job store runs the job-store conformance suite and its
//! model test, each store on a schema of its own; and two stores over one
//! schema (two servers' processors) share the work: a claim by one is
//! held for the other, and a job whose claimant died is taken over once
//! its lease runs out on the database's clock. Claims run beside each
//! other: one passes over the job another holds locked, never waiting.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{MemoryScope, SessionId};
use hippocamp_outbox::conformance::{JobStoreFactory, Opened};
use hippocamp_outbox::model::{Delivered, Next, Owner, StoredEvent, Submission, TargetName};
use hippocamp_outbox::{JobStore, OutboxLimits};
use hippocamp_postgres::PgJobStore;

struct PgFactory;

#[async_trait]
impl JobStoreFactory for PgFactory {
    async fn open(&self, limits: OutboxLimits) -> Opened {
        let pg = support::config();
        let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
        let store = PgJobStore::new(db, limits.clone()).unwrap();
        Opened {
            store: Arc::new(store),
            // Called from async tests: counted on a thread and a
            // connection of its own.
            held_batches: Box::new(move || {
                let (pg, limits) = (pg.clone(), limits.clone());
                std::thread::spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(async {
                            let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
                            let probe = PgJobStore::new(db, limits).unwrap();
                            probe.held_batches().await.unwrap()
                        })
                })
                .join()
                .unwrap()
                .try_into()
                .unwrap()
            }),
        }
    }
}

hippocamp_outbox::job_store_conformance_tests!(guard = support::have_postgres, PgFactory);

fn submission(n: usize) -> Submission {
    submission_in("s", n)
}

fn submission_in(session: &str, n: usize) -> Submission {
    Submission {
        target: TargetName::new("memory").unwrap(),
        scope: MemoryScope::parse("app", "u").unwrap(),
        session: SessionId::new(session).unwrap(),
        epoch: 0,
        session_epoch: 0,
        events: (0..n)
            .map(|i| StoredEvent {
                id: format!("e{i}"),
                author: "user".into(),
                timestamp_ms: 1,
                text: format!("event {i}"),
                metadata: None,
            })
            .collect(),
        max_attempts: None,
    }
}

/// Two servers' job stores (pools of their own) over one fresh schema.
async fn two_servers() -> (PgJobStore, PgJobStore) {
    let pg = support::config();
    let open = || async {
        let db = hippocamp_postgres::Database::connect(&pg).await.unwrap();
        PgJobStore::new(db, OutboxLimits::default()).unwrap()
    };
    (open().await, open().await)
}

/// Two servers' processors over one schema: a claim through one is held
/// for the other; when its claimant stops (a killed server), the lease
/// runs out on the database's clock and the other takes the job over as
/// its next attempt, and the first owner's late record is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_the_work_and_take_over_a_dead_claim() {
    if !support::have_postgres() {
        return;
    }
    let (a, b) = two_servers().await;
    let targets = BTreeSet::from([TargetName::new("memory").unwrap()]);
    let admitted = a.admit(submission(3)).await.unwrap();
    assert_eq!(admitted.jobs.len(), 1);
    // Admitted through A, the same events again through B: nothing new.
    assert_eq!(b.admit(submission(3)).await.unwrap().new_events, 0);
    let dead = Owner::random();
    let item = a
        .claim(dead, Duration::from_millis(400), &targets)
        .await
        .unwrap()
        .expect("A claims the job");
    assert_eq!(item.attempt, 1);
    let other = Owner::random();
    assert!(
        b.claim(other, Duration::from_secs(30), &targets)
            .await
            .unwrap()
            .is_none(),
        "held by A"
    );
    assert_eq!(b.stats().await.unwrap().running, 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let item = b
        .claim(other, Duration::from_secs(30), &targets)
        .await
        .unwrap()
        .expect("B takes the job over once A's lease ran out");
    assert_eq!(item.attempt, 2);
    let late = a
        .complete_batch(
            &item.job,
            &dead,
            0,
            Delivered {
                added: 3,
                duplicates: 0,
                skipped: 0,
                ..Delivered::default()
            },
            Duration::from_secs(1),
        )
        .await;
    assert!(late.is_err(), "the dead owner's record is refused");
    let done = b
        .complete_batch(
            &item.job,
            &other,
            0,
            Delivered {
                added: 3,
                duplicates: 0,
                skipped: 0,
                ..Delivered::default()
            },
            Duration::from_secs(1),
        )
        .await
        .unwrap();
    assert!(matches!(done, Next::Done));
    let status = a
        .status(&MemoryScope::parse("app", "u").unwrap(), &item.job)
        .await
        .unwrap();
    assert_eq!(status.state, hippocamp_outbox::model::JobState::Succeeded);
    assert_eq!(status.attempts, 2);
    assert_eq!(a.held_batches().await.unwrap(), 0);
}

/// A claim in flight (here a transaction that holds the outbox's lock
/// shared and the first job's schedule row locked, as a claim does) neither
/// makes another claim wait nor shares its job with it: the other claim
/// passes over the locked row (`SKIP LOCKED`) and takes the next job; the
/// first job is claimable once that transaction ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_passes_over_the_job_another_claim_holds_locked() {
    if !support::have_postgres() {
        return;
    }
    let db = support::database().await;
    let store = PgJobStore::new(db.clone(), OutboxLimits::default()).unwrap();
    let targets = BTreeSet::from([TargetName::new("memory").unwrap()]);
    let first = store.admit(submission_in("s1", 2)).await.unwrap().jobs[0].id;
    let second = store.admit(submission_in("s2", 2)).await.unwrap().jobs[0].id;

    let deadline = hippocamp_core::Deadline::after(Duration::from_secs(10));
    let mut client = db.client(deadline).await.unwrap();
    let tx = client.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock_shared($1)",
        &[&hippocamp_postgres::outbox::OUTBOX_LOCK],
    )
    .await
    .unwrap();
    let locked = tx
        .execute(
            "SELECT 1 FROM (SELECT k FROM outbox_kv WHERE t = $1 ORDER BY k LIMIT 1 FOR UPDATE) x",
            &[&(hippocamp_outbox::kv::Table::Schedule as i16)],
        )
        .await
        .unwrap();
    assert_eq!(locked, 1);

    let claim = |owner| {
        let (store, targets) = (store.clone(), targets.clone());
        async move {
            // A claim that waited for the locked row would wait until the
            // rollback below, so any bound catches it; this one is long
            // enough for a slow, loaded machine (5 s was not, once).
            tokio::time::timeout(
                Duration::from_secs(30),
                store.claim(owner, Duration::from_secs(30), &targets),
            )
            .await
            .expect("a claim never waits for another")
            .unwrap()
        }
    };
    let item = claim(Owner::random()).await.expect("the job not locked");
    assert_eq!(item.job, second, "the locked first job was passed over");
    assert!(
        claim(Owner::random()).await.is_none(),
        "one job locked, the other claimed: nothing to take"
    );
    tx.rollback().await.unwrap();
    let item = claim(Owner::random())
        .await
        .expect("the first job, unlocked");
    assert_eq!(item.job, first);
}

/// Many claims at once, through two servers' stores: every job is taken
/// exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_take_each_job_once() {
    if !support::have_postgres() {
        return;
    }
    let (a, b) = two_servers().await;
    let targets = BTreeSet::from([TargetName::new("memory").unwrap()]);
    let mut admitted = BTreeSet::new();
    for i in 0..12 {
        admitted.insert(
            a.admit(submission_in(&format!("s{i}"), 1))
                .await
                .unwrap()
                .jobs[0]
                .id,
        );
    }
    let claims = (0..24).map(|i| {
        let (store, targets) = (
            if i % 2 == 0 { a.clone() } else { b.clone() },
            targets.clone(),
        );
        tokio::spawn(async move {
            store
                .claim(Owner::random(), Duration::from_secs(30), &targets)
                .await
                .unwrap()
                .map(|w| w.job)
        })
    });
    let mut taken = Vec::new();
    for c in futures::future::join_all(claims).await {
        taken.extend(c.unwrap());
    }
    let distinct: BTreeSet<_> = taken.iter().copied().collect();
    assert_eq!(distinct.len(), taken.len(), "a job was claimed twice");
    assert!(distinct.is_subset(&admitted));
    // A claim passes over jobs others hold locked, so one may come back
    // empty while a job is being taken; claimed again, the rest come.
    while let Some(w) = a
        .claim(Owner::random(), Duration::from_secs(30), &targets)
        .await
        .unwrap()
    {
        assert!(!distinct.contains(&w.job), "a job was claimed twice");
        taken.push(w.job);
    }
    assert_eq!(taken.iter().copied().collect::<BTreeSet<_>>(), admitted);
    assert_eq!(taken.len(), admitted.len());
}
