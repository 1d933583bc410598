//! The PostgreSQL job store runs the job-store conformance suite and its
//! model test, each store on a schema of its own; and two stores over one
//! schema (two servers' processors) share the work: a claim by one is
//! held for the other, and a job whose claimant died is taken over once
//! its lease runs out on the database's clock.

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
    Submission {
        target: TargetName::new("memory").unwrap(),
        scope: MemoryScope::parse("app", "u").unwrap(),
        session: SessionId::new("s").unwrap(),
        epoch: 0,
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

/// Two servers' processors over one schema: a claim through one is held
/// for the other; when its claimant stops (a killed server), the lease
/// runs out on the database's clock and the other takes the job over as
/// its next attempt, and the first owner's late record is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_the_work_and_take_over_a_dead_claim() {
    if !support::have_postgres() {
        return;
    }
    let pg = support::config();
    let limits = OutboxLimits::default();
    let a = PgJobStore::new(
        hippocamp_postgres::Database::connect(&pg).await.unwrap(),
        limits.clone(),
    )
    .unwrap();
    let b = PgJobStore::new(
        hippocamp_postgres::Database::connect(&pg).await.unwrap(),
        limits,
    )
    .unwrap();
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
