//! The conformance suite every [`JobStore`] runs.
//!
//! Each scenario is a public async function taking a [`JobStoreFactory`];
//! `job_store_conformance_tests!(factory)` expands to one test per
//! scenario plus the proptest model test ([`model::run`]).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_lines,
    clippy::missing_panics_doc,
    clippy::many_single_char_names,
    missing_docs
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Error, MemoryScope, QuotaLimit, SessionId};

use crate::limits::OutboxLimits;
use crate::model::{
    CancelReason, Delivered, JobError, JobState, Next, Owner, StoredEvent, Submission, TargetName,
};
use crate::store::JobStore;

pub mod model;

/// A store the suite opened, with a probe of how many batches of events
/// it still holds (finished jobs must hold none).
pub struct Opened {
    pub store: Arc<dyn JobStore>,
    pub held_batches: Box<dyn Fn() -> usize + Send + Sync>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Opens fresh, empty job stores.
#[async_trait]
pub trait JobStoreFactory: Send + Sync {
    async fn open(&self, limits: OutboxLimits) -> Opened;
}

/// Factory of [`crate::InMemoryJobStore`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct InMemoryJobFactory;

#[async_trait]
impl JobStoreFactory for InMemoryJobFactory {
    async fn open(&self, limits: OutboxLimits) -> Opened {
        let store = Arc::new(crate::InMemoryJobStore::new(limits).unwrap());
        let probe = Arc::clone(&store);
        Opened {
            store,
            held_batches: Box::new(move || probe.held_batches()),
        }
    }
}

#[macro_export]
macro_rules! job_store_conformance_tests {
    ($factory:expr) => {
        $crate::job_store_conformance_tests!(guard = (|| true), $factory);
    };
    (guard = $guard:expr, $factory:expr) => {
        $crate::job_store_conformance_tests!(@cases $guard, $factory;
            admission_is_idempotent_and_watermarked,
            long_sessions_split_into_jobs_and_batches,
            limits_refuse_and_store_nothing,
            claims_are_fenced_by_owner_and_lease,
            failures_back_off_then_fail_and_release_their_events,
            finished_jobs_keep_no_events_and_are_pruned,
            erasure_cancels_queued_jobs_and_fences_admission,
            claims_need_a_registered_target_and_rotate,
            jobs_are_scoped,
            concurrent_claims_take_distinct_jobs,
            a_released_job_is_cancelled,
            an_unclaimed_job_is_due_again_without_an_attempt,
            batches_recorded_together_answer_each_on_its_own,
            a_finished_job_can_be_deleted_and_an_active_one_cannot,
            finished_jobs_are_capped_oldest_first,
            watermarks_are_counted_and_bounded,
            a_health_check_writes_and_changes_no_count,
            skipped_events_are_counted_and_listed,
        );
        #[test]
        fn model_test() {
            if !($guard)() {
                return;
            }
            $crate::conformance::model::run(std::sync::Arc::new($factory), 32);
        }
    };
    (@cases $guard:expr, $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if !($guard)() {
                    return;
                }
                let factory = $factory;
                $crate::conformance::$name(&factory).await;
            }
        )*
    };
}

pub(crate) fn target() -> TargetName {
    TargetName::new("memory").unwrap()
}

pub(crate) fn targets() -> BTreeSet<TargetName> {
    [target()].into_iter().collect()
}

pub(crate) fn scope(user: &str) -> MemoryScope {
    MemoryScope::parse("app", user).unwrap()
}

pub(crate) fn event(id: &str) -> StoredEvent {
    StoredEvent {
        id: id.to_owned(),
        author: "user".into(),
        timestamp_ms: 1,
        text: format!("the text of event {id}"),
        metadata: None,
    }
}

pub(crate) fn submission(
    scope: &MemoryScope,
    session: &str,
    ids: &[String],
    epoch: u64,
) -> Submission {
    Submission {
        target: target(),
        scope: scope.clone(),
        session: SessionId::new(session).unwrap(),
        epoch,
        session_epoch: 0,
        events: ids.iter().map(|i| event(i)).collect(),
        max_attempts: None,
    }
}

fn ids(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("e{i}")).collect()
}

const LONG: Duration = Duration::from_secs(30);

/// `owner`'s claim of the next due job, which there must be.
async fn claimed(o: &Opened, owner: Owner, lease: Duration) -> crate::model::WorkItem {
    o.store
        .claim(owner, lease, &targets())
        .await
        .unwrap()
        .expect("a due job to claim")
}

fn done() -> Delivered {
    Delivered {
        added: 1,
        ..Delivered::default()
    }
}

/// The same submission twice is one job; a grown session queues only
/// what is new; a session fully covered names its jobs and queues nothing.
pub async fn admission_is_idempotent_and_watermarked(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("u1");
    let first = o
        .store
        .admit(submission(&s, "s1", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!(first.new_events, 3);
    assert_eq!(first.jobs.len(), 1);
    assert_eq!(first.jobs[0].state, JobState::Pending);
    let again = o
        .store
        .admit(submission(&s, "s1", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!(again.new_events, 0);
    assert_eq!(again.jobs, first.jobs);
    // The whole session again, grown by two: only those two are new.
    let grown = o
        .store
        .admit(submission(&s, "s1", &ids(0..5), 0))
        .await
        .unwrap();
    assert_eq!(grown.new_events, 2);
    assert_eq!(grown.jobs.len(), 2);
    assert_ne!(grown.jobs[0].id, first.jobs[0].id);
    assert_eq!(grown.jobs[1].id, first.jobs[0].id);
    // Repeated ids within a submission count once.
    let mut twice = ids(5..6);
    twice.push("e5".into());
    let r = o
        .store
        .admit(submission(&s, "s1", &twice, 0))
        .await
        .unwrap();
    assert_eq!(r.new_events, 1);
    // Another session or another scope has its own watermark.
    let other = o
        .store
        .admit(submission(&s, "s2", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!(other.new_events, 3);
    let other = o
        .store
        .admit(submission(&scope("u2"), "s1", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!(other.new_events, 3);
    let st = o.store.stats().await.unwrap();
    assert_eq!((st.pending, st.admitted_total), (5, 5));
    let status = o.store.status(&s, &first.jobs[0].id).await.unwrap();
    assert_eq!((status.events, status.batches, status.attempts), (3, 1, 0));
    assert_eq!(status.target, target());
}

/// A session longer than `max_events_per_job` becomes several jobs, each
/// delivered in batches of at most 500 events, in order.
pub async fn long_sessions_split_into_jobs_and_batches(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_events_per_job: 1_200,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("long");
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..2_500), 0))
        .await
        .unwrap();
    assert_eq!(r.new_events, 2_500);
    assert_eq!(r.jobs.len(), 3);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let owner = Owner::random();
        let mut item = claimed(&o, owner, LONG).await;
        let status = o.store.status(&s, &item.job).await.unwrap();
        assert_eq!(status.state, JobState::Running);
        loop {
            assert!(item.events.len() <= 500);
            seen.extend(item.events.iter().map(|e| e.id.clone()));
            let n = item.events.len() as u64;
            let next = o
                .store
                .complete_batch(
                    &item.job,
                    &owner,
                    item.batch,
                    Delivered {
                        added: n,
                        ..Delivered::default()
                    },
                    LONG,
                )
                .await
                .unwrap();
            match next {
                Next::Batch(b) => {
                    assert_eq!(b.batch, item.batch + 1);
                    item = b;
                }
                Next::Done => break,
            }
        }
        let status = o.store.status(&s, &item.job).await.unwrap();
        assert_eq!(status.state, JobState::Succeeded);
        assert_eq!(status.delivered_events, status.events);
        assert_eq!(status.delivered_batches, status.batches);
    }
    assert_eq!(seen, ids(0..2_500), "every event once, in session order");
    assert!(
        o.store
            .claim(Owner::random(), LONG, &targets())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!((o.held_batches)(), 0);
    let st = o.store.stats().await.unwrap();
    assert_eq!(
        (st.pending, st.succeeded, st.delivered_events_total),
        (0, 3, 2_500)
    );
}

/// Over a job or byte limit, per scope or in all, an admission stores
/// nothing and says which limit.
pub async fn limits_refuse_and_store_nothing(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_active_jobs: 3,
            max_active_jobs_per_scope: 2,
            max_events_per_job: 2,
            ..OutboxLimits::default()
        })
        .await;
    let a = scope("a");
    // Three jobs for one scope: over its limit of two, all refused.
    let e = o
        .store
        .admit(submission(&a, "s", &ids(0..6), 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::QuotaExceeded {
                limit: QuotaLimit::OutboxJobsPerScope(2)
            }
        ),
        "{e}"
    );
    assert_eq!(o.store.stats().await.unwrap().pending, 0);
    assert_eq!((o.held_batches)(), 0);
    let r = o
        .store
        .admit(submission(&a, "s", &ids(0..4), 0))
        .await
        .unwrap();
    assert_eq!(r.jobs.len(), 2);
    let b = scope("b");
    o.store
        .admit(submission(&b, "s", &ids(0..2), 0))
        .await
        .unwrap();
    let e = o
        .store
        .admit(submission(&scope("c"), "s", &ids(0..2), 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::QuotaExceeded {
                limit: QuotaLimit::OutboxJobs(3)
            }
        ),
        "{e}"
    );
    // A refused admission left no watermark behind: it can come back.
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    o.store
        .complete_batch(&item.job, &owner, 0, done(), LONG)
        .await
        .unwrap();
    let r = o
        .store
        .admit(submission(&scope("c"), "s", &ids(0..2), 0))
        .await
        .unwrap();
    assert_eq!(r.new_events, 2);
    // Bytes: one event's bytes over the scope's budget.
    let small = f
        .open(OutboxLimits {
            max_active_bytes_per_scope: 40,
            max_active_bytes: 1_000,
            ..OutboxLimits::default()
        })
        .await;
    let e = small
        .store
        .admit(submission(&a, "s", &ids(0..2), 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::QuotaExceeded {
                limit: QuotaLimit::OutboxBytesPerScope(40)
            }
        ),
        "{e}"
    );
}

/// Renewal, completion and failure need the claim's token and an
/// unexpired lease; an expired claim is taken over, counted as an attempt,
/// and its old owner can no longer act.
pub async fn claims_are_fenced_by_owner_and_lease(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("fence");
    o.store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap();
    let a = Owner::random();
    // A long lease until the checks below are done (a short one could
    // expire during them on a loaded machine); the owner shortens it
    // before the wait.
    let item = claimed(&o, a, LONG).await;
    assert_eq!(item.attempt, 1);
    assert_eq!(item.events.len(), 2);
    // Nobody else gets it while the lease holds.
    assert!(
        o.store
            .claim(Owner::random(), LONG, &targets())
            .await
            .unwrap()
            .is_none()
    );
    let stranger = Owner::random();
    let lost =
        |r: hippocamp_core::Result<()>| assert!(matches!(r, Err(Error::LeaseLost(_))), "{r:?}");
    lost(o.store.renew(&item.job, &stranger, LONG).await);
    lost(
        o.store
            .complete_batch(&item.job, &stranger, 0, done(), LONG)
            .await
            .map(drop),
    );
    lost(
        o.store
            .fail(&item.job, &stranger, JobError::of(&Error::Overloaded("x")))
            .await
            .map(drop),
    );
    lost(
        o.store
            .release(&item.job, &stranger, CancelReason::Erased)
            .await,
    );
    o.store
        .renew(&item.job, &a, Duration::from_millis(150))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    // Expired: the owner is refused, and the job is claimable again as a
    // second attempt.
    lost(o.store.renew(&item.job, &a, LONG).await);
    let b = Owner::random();
    let again = claimed(&o, b, LONG).await;
    assert_eq!(again.job, item.job);
    assert_eq!(again.attempt, 2);
    lost(
        o.store
            .complete_batch(&item.job, &a, 0, done(), LONG)
            .await
            .map(drop),
    );
    let status = o.store.status(&s, &item.job).await.unwrap();
    assert_eq!((status.state, status.attempts), (JobState::Running, 2));
    assert_eq!(status.last_error.unwrap().code, "lease_expired");
    assert!(matches!(
        o.store
            .complete_batch(&item.job, &b, 0, done(), LONG)
            .await
            .unwrap(),
        Next::Done
    ));
    // A batch recorded once cannot be recorded again.
    lost(
        o.store
            .complete_batch(&item.job, &b, 0, done(), LONG)
            .await
            .map(drop),
    );
}

/// A failed attempt waits for its backoff; out of attempts the job fails,
/// and its events leave the watermark so submitting them again retries.
pub async fn failures_back_off_then_fail_and_release_their_events(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_attempts: 2,
            backoff_base_ms: 300,
            max_backoff_ms: 300,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("retry");
    let job = o
        .store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    let a = Owner::random();
    claimed(&o, a, LONG).await;
    let state = o
        .store
        .fail(
            &job,
            &a,
            JobError::of(&Error::Unavailable("the store is down".into())),
        )
        .await
        .unwrap();
    assert_eq!(state, JobState::Pending);
    // Not due during its backoff (at least half the base).
    assert!(
        o.store
            .claim(Owner::random(), LONG, &targets())
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = Owner::random();
    let item = claimed(&o, b, LONG).await;
    assert_eq!(item.attempt, 2);
    let state = o
        .store
        .fail(
            &job,
            &b,
            JobError::of(&Error::Unavailable("still down".into())),
        )
        .await
        .unwrap();
    assert_eq!(state, JobState::Failed);
    let status = o.store.status(&s, &job).await.unwrap();
    assert_eq!(status.state, JobState::Failed);
    assert_eq!(status.last_error.unwrap().code, "unavailable");
    assert_eq!((o.held_batches)(), 0);
    let st = o.store.stats().await.unwrap();
    assert_eq!((st.failed, st.retried_total, st.failed_total), (1, 1, 1));
    // Submitted again, the same events are queued again.
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap();
    assert_eq!(r.new_events, 2);
    assert_eq!(r.jobs[0].state, JobState::Pending);
    assert_eq!(o.store.stats().await.unwrap().failed, 0);
}

/// Finished jobs drop their events at once and are pruned after the
/// retention, a bounded number per pass.
pub async fn finished_jobs_keep_no_events_and_are_pruned(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            terminal_retention_ms: 0,
            max_events_per_job: 1,
            max_prune_batch: 2,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("prune");
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!((o.held_batches)(), 3);
    for _ in 0..3 {
        let owner = Owner::random();
        let item = claimed(&o, owner, LONG).await;
        o.store
            .complete_batch(&item.job, &owner, 0, done(), LONG)
            .await
            .unwrap();
    }
    assert_eq!((o.held_batches)(), 0);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(matches!(
        o.store.prune(Some(3)).await,
        Err(Error::InvalidArgument { .. })
    ));
    let p = o.store.prune(None).await.unwrap();
    assert_eq!((p.pruned, p.more), (2, true));
    let p = o.store.prune(None).await.unwrap();
    assert_eq!((p.pruned, p.more), (1, false));
    for j in &r.jobs {
        assert!(matches!(
            o.store.status(&s, &j.id).await,
            Err(Error::NotFound(_))
        ));
    }
    let st = o.store.stats().await.unwrap();
    assert_eq!((st.succeeded, st.pruned_total), (0, 3));
    // A long retention keeps them.
    let keep = f.open(OutboxLimits::default()).await;
    keep.store
        .admit(submission(&s, "s", &ids(0..1), 0))
        .await
        .unwrap();
    let owner = Owner::random();
    let item = keep
        .store
        .claim(owner, LONG, &targets())
        .await
        .unwrap()
        .unwrap();
    keep.store
        .complete_batch(&item.job, &owner, 0, done(), LONG)
        .await
        .unwrap();
    assert_eq!(keep.store.prune(None).await.unwrap().pruned, 0);
}

/// Erasing a session cancels its queued jobs (reason erased, events
/// dropped) and the watermark keeps them from coming back; erasing a user
/// at a new epoch refuses submissions captured before it.
pub async fn erasure_cancels_queued_jobs_and_fences_admission(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("erase");
    let j1 = o
        .store
        .admit(submission(&s, "s1", &ids(0..2), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    let j2 = o
        .store
        .admit(submission(&s, "s2", &ids(0..2), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    let other = o
        .store
        .admit(submission(&scope("keep"), "s1", &ids(0..2), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    let sid = SessionId::new("s1").unwrap();
    assert_eq!(o.store.erase(&s, Some(&sid), None).await.unwrap(), 1);
    let st = o.store.status(&s, &j1).await.unwrap();
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Erased))
    );
    assert_eq!(
        o.store.status(&s, &j2).await.unwrap().state,
        JobState::Pending
    );
    assert_eq!((o.held_batches)(), 2);
    let again = o
        .store
        .admit(submission(&s, "s1", &ids(0..2), 0))
        .await
        .unwrap();
    assert_eq!(again.new_events, 0);
    // The user: every queued job of the scope, and the epoch is fenced.
    assert_eq!(o.store.erase(&s, None, Some(1)).await.unwrap(), 1);
    assert_eq!(
        o.store.status(&s, &j2).await.unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(
        o.store.status(&scope("keep"), &other).await.unwrap().state,
        JobState::Pending
    );
    assert!(matches!(
        o.store.admit(submission(&s, "s3", &ids(0..2), 0)).await,
        Err(Error::StaleEpoch {
            admitted: 0,
            current: 1
        })
    ));
    let r = o
        .store
        .admit(submission(&s, "s3", &ids(0..2), 1))
        .await
        .unwrap();
    assert_eq!(r.new_events, 2);
    let st = o.store.stats().await.unwrap();
    assert_eq!((st.cancelled, st.cancelled_erased_total), (2, 2));
    assert_eq!((o.held_batches)(), 2);
    // A claimed job whose scope was erased cannot be renewed.
    let owner = Owner::random();
    let item = loop {
        let item = claimed(&o, owner, LONG).await;
        if item.scope == s {
            break item;
        }
        o.store
            .complete_batch(&item.job, &owner, 0, done(), LONG)
            .await
            .unwrap();
    };
    o.store.erase(&s, None, Some(2)).await.unwrap();
    assert!(matches!(
        o.store.renew(&item.job, &owner, LONG).await,
        Err(Error::LeaseLost(_))
    ));
}

/// Only jobs of registered targets are claimed, and a pass examines a
/// bounded window from where the last one stopped: jobs nobody can claim
/// at the front never starve the others.
pub async fn claims_need_a_registered_target_and_rotate(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_claim_scan: 2,
            max_events_per_job: 1,
            ..OutboxLimits::default()
        })
        .await;
    let stuck = TargetName::new("elsewhere").unwrap();
    let mut sub = submission(&scope("x"), "s", &ids(0..5), 0);
    sub.target = stuck.clone();
    o.store.admit(sub).await.unwrap();
    let good = o
        .store
        .admit(submission(&scope("y"), "s", &ids(0..1), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    assert!(
        o.store
            .claim(Owner::random(), LONG, &BTreeSet::new())
            .await
            .unwrap()
            .is_none()
    );
    let mut passes = 0;
    let found = loop {
        passes += 1;
        assert!(passes <= 4, "the claimable job was starved");
        if let Some(item) = o
            .store
            .claim(Owner::random(), LONG, &targets())
            .await
            .unwrap()
        {
            break item;
        }
    };
    assert_eq!(found.job, good);
    // Registering the other target unlocks its jobs.
    let both: BTreeSet<TargetName> = [target(), stuck].into_iter().collect();
    // (A pass may spend its window on claimed jobs: a few passes.)
    let mut n = 0;
    for _ in 0..20 {
        if o.store
            .claim(Owner::random(), LONG, &both)
            .await
            .unwrap()
            .is_some()
        {
            n += 1;
        }
    }
    assert_eq!(n, 5);
}

/// Another scope's job is not found, for status and cancel alike.
pub async fn jobs_are_scoped(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let job = o
        .store
        .admit(submission(&scope("alice"), "s", &ids(0..1), 0))
        .await
        .unwrap()
        .jobs[0]
        .id;
    let bob = scope("bob");
    assert!(matches!(
        o.store.status(&bob, &job).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        o.store.cancel(&bob, &job).await,
        Err(Error::NotFound(_))
    ));
    let other_app = MemoryScope::parse("other", "alice").unwrap();
    assert!(matches!(
        o.store.status(&other_app, &job).await,
        Err(Error::NotFound(_))
    ));
    let st = o.store.cancel(&scope("alice"), &job).await.unwrap();
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Requested))
    );
    // A finished job is left as it is.
    let st = o.store.cancel(&scope("alice"), &job).await.unwrap();
    assert_eq!(st.state, JobState::Cancelled);
    assert_eq!(o.store.stats().await.unwrap().cancelled_requested_total, 1);
}

/// Concurrent claims never take the same job twice.
pub async fn concurrent_claims_take_distinct_jobs(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_events_per_job: 1,
            ..OutboxLimits::default()
        })
        .await;
    o.store
        .admit(submission(&scope("c"), "s", &ids(0..8), 0))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..12)
        .map(|_| {
            let store = Arc::clone(&o.store);
            tokio::spawn(async move {
                store
                    .claim(Owner::random(), LONG, &targets())
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut jobs = BTreeSet::new();
    let mut none = 0;
    for t in tasks {
        match t.await.unwrap() {
            Some(item) => assert!(jobs.insert(item.job), "claimed twice"),
            None => none += 1,
        }
    }
    assert_eq!((jobs.len(), none), (8, 4));
    assert_eq!(o.store.stats().await.unwrap().running, 8);
}

/// The owner of a claim can end it as cancelled (the processor does when
/// the scope's epoch moved on).
pub async fn a_released_job_is_cancelled(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("rel");
    o.store
        .admit(submission(&s, "s", &ids(0..1), 0))
        .await
        .unwrap();
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    o.store
        .release(&item.job, &owner, CancelReason::Erased)
        .await
        .unwrap();
    let st = o.store.status(&s, &item.job).await.unwrap();
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Erased))
    );
    assert_eq!((o.held_batches)(), 0);
    assert!(
        o.store
            .claim(Owner::random(), LONG, &targets())
            .await
            .unwrap()
            .is_none()
    );
}

/// A claim given back before its delivery started leaves the job due at
/// once, as the same attempt, even after its lease ran out; only its owner
/// can give it back, and only until someone else claims the job.
pub async fn an_unclaimed_job_is_due_again_without_an_attempt(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("unclaim");
    o.store
        .admit(submission(&s, "s", &ids(0..1), 0))
        .await
        .unwrap();
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    assert!(matches!(
        o.store.unclaim(&item.job, &Owner::random()).await,
        Err(Error::LeaseLost(_))
    ));
    o.store.unclaim(&item.job, &owner).await.unwrap();
    let st = o.store.status(&s, &item.job).await.unwrap();
    assert_eq!((st.state, st.attempts), (JobState::Pending, 0));
    // Its old owner can do nothing with it any more.
    assert!(matches!(
        o.store.renew(&item.job, &owner, LONG).await,
        Err(Error::LeaseLost(_))
    ));
    let again = claimed(&o, Owner::random(), LONG).await;
    assert_eq!((again.job, again.attempt), (item.job, 1));
    // A claim whose lease ran out untaken can still be given back, and
    // that costs no attempt either; once someone else took the job, not.
    let late = Owner::random();
    o.store.unclaim(&again.job, &again.owner).await.unwrap();
    let short = claimed(&o, late, Duration::from_millis(20)).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    o.store.unclaim(&short.job, &late).await.unwrap();
    let taken = claimed(&o, Owner::random(), Duration::from_millis(20)).await;
    assert_eq!(taken.attempt, 1, "no attempt was counted");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let thief = claimed(&o, Owner::random(), LONG).await;
    assert_eq!(
        thief.attempt, 2,
        "an expired claim that was not given back counts"
    );
    assert!(matches!(
        o.store.unclaim(&taken.job, &taken.owner).await,
        Err(Error::LeaseLost(_))
    ));
}

/// Several claims' batches recorded in one call: each answers as its own
/// `complete_batch` would, a refused one leaving the others alone.
pub async fn batches_recorded_together_answer_each_on_its_own(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("together");
    // Two batches each.
    let events = ids(0..crate::model::BATCH_EVENTS + 1);
    for session in ["a", "b", "c"] {
        o.store
            .admit(submission(&s, session, &events, 0))
            .await
            .unwrap();
    }
    let mut items = Vec::new();
    for _ in 0..3 {
        items.push(claimed(&o, Owner::random(), LONG).await);
    }
    let record = |i: &crate::model::WorkItem, owner: Owner| crate::model::BatchRecord {
        job: i.job,
        owner,
        batch: i.batch,
        delivered: done(),
    };
    let replies = o
        .store
        .complete_batches(
            vec![
                record(&items[0], items[0].owner),
                record(&items[1], Owner::random()),
                record(&items[2], items[2].owner),
            ],
            LONG,
        )
        .await;
    assert_eq!(replies.len(), 3);
    // The first record of each hands over its second batch.
    for (i, r) in [(0, &replies[0]), (2, &replies[2])] {
        match r {
            Ok(Next::Batch(next)) => {
                assert_eq!((next.job, next.batch), (items[i].job, 1));
                assert_eq!(next.owner, items[i].owner);
            }
            other => panic!("record {i}: {other:?}"),
        }
    }
    assert!(
        matches!(replies[1], Err(Error::LeaseLost(_))),
        "{:?}",
        replies[1]
    );
    let st = o.store.status(&s, &items[1].job).await.unwrap();
    assert_eq!((st.state, st.delivered_events), (JobState::Running, 0));
    let replies = o
        .store
        .complete_batches(
            vec![
                crate::model::BatchRecord {
                    batch: 1,
                    ..record(&items[0], items[0].owner)
                },
                crate::model::BatchRecord {
                    batch: 1,
                    ..record(&items[2], items[2].owner)
                },
            ],
            LONG,
        )
        .await;
    assert!(replies.iter().all(|r| matches!(r, Ok(Next::Done))));
    let stats = o.store.stats().await.unwrap();
    assert_eq!((stats.succeeded, stats.running), (2, 1));
    assert_eq!(stats.delivered_events_total, 4);
}

/// One finished job's status can be deleted by its scope; a pending or
/// running one is refused with `JobActive` and stays; another scope's is
/// `NotFound`.
pub async fn a_finished_job_can_be_deleted_and_an_active_one_cannot(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_events_per_job: 1,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("del");
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap();
    let (a, b) = (r.jobs[0].id, r.jobs[1].id);
    assert!(matches!(
        o.store.delete(&s, &a).await,
        Err(Error::JobActive("pending"))
    ));
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    assert!(matches!(
        o.store.delete(&s, &item.job).await,
        Err(Error::JobActive("running"))
    ));
    o.store
        .complete_batch(&item.job, &owner, 0, done(), LONG)
        .await
        .unwrap();
    let other = if item.job == a { b } else { a };
    o.store.cancel(&s, &other).await.unwrap();
    // Another scope cannot see it, let alone delete it.
    assert!(matches!(
        o.store.delete(&scope("mallory"), &item.job).await,
        Err(Error::NotFound(_))
    ));
    let before = o.store.stats().await.unwrap();
    assert_eq!((before.succeeded, before.cancelled), (1, 1));
    o.store.delete(&s, &item.job).await.unwrap();
    o.store.delete(&s, &other).await.unwrap();
    for j in [a, b] {
        assert!(matches!(
            o.store.status(&s, &j).await,
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            o.store.delete(&s, &j).await,
            Err(Error::NotFound(_))
        ));
    }
    let after = o.store.stats().await.unwrap();
    assert_eq!((after.succeeded, after.cancelled), (0, 0));
    assert_eq!(after.pruned_total, before.pruned_total + 2);
    // The watermark stays: the same events queue nothing again.
    let again = o
        .store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap();
    assert_eq!(again.new_events, 0);
}

/// Finished statuses are capped at `max_finished_jobs`: when another job
/// ends past it, the oldest finished one goes, whatever the retention.
pub async fn finished_jobs_are_capped_oldest_first(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_events_per_job: 1,
            max_finished_jobs: 2,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("cap");
    let mut order = Vec::new();
    for i in 0..5 {
        let r = o
            .store
            .admit(submission(&s, "s", &ids(i..i + 1), 0))
            .await
            .unwrap();
        let id = r.jobs[0].id;
        o.store.cancel(&s, &id).await.unwrap();
        order.push(id);
        let st = o.store.stats().await.unwrap();
        assert_eq!(st.cancelled, (i as u64 + 1).min(2), "after job {i}");
    }
    for (i, id) in order.iter().enumerate() {
        let kept = o.store.status(&s, id).await;
        if i < 3 {
            assert!(matches!(kept, Err(Error::NotFound(_))), "job {i} kept");
        } else {
            assert_eq!(kept.unwrap().state, JobState::Cancelled);
        }
    }
    assert_eq!(o.store.stats().await.unwrap().pruned_total, 3);
    // An erasure that cancels several at once keeps the cap too.
    let r = o
        .store
        .admit(submission(&s, "t", &ids(10..14), 0))
        .await
        .unwrap();
    assert_eq!(r.jobs.len(), 4);
    assert_eq!(o.store.erase(&s, None, None).await.unwrap(), 4);
    // The two kept before go at once; the four just cancelled are over
    // the cap until the next job ends.
    let st = o.store.stats().await.unwrap();
    assert!(st.cancelled <= 4, "{st:?}");
    let r = o
        .store
        .admit(submission(&s, "u", &ids(20..21), 0))
        .await
        .unwrap();
    o.store.cancel(&s, &r.jobs[0].id).await.unwrap();
    assert_eq!(o.store.stats().await.unwrap().cancelled, 2);
}

/// Watermark rows (one per admitted event id) are counted per scope and
/// store-wide: an admission past either limit is refused whole, a failed
/// job's released events are uncounted, and other scopes are not
/// affected by one scope's count.
pub async fn watermarks_are_counted_and_bounded(f: &dyn JobStoreFactory) {
    let o = f
        .open(OutboxLimits {
            max_watermark_events_per_scope: 4,
            max_watermark_events: 6,
            max_attempts: 1,
            ..OutboxLimits::default()
        })
        .await;
    let (a, b) = (scope("wa"), scope("wb"));
    o.store
        .admit(submission(&a, "s", &ids(0..3), 0))
        .await
        .unwrap();
    // Two more would make five of the scope's: refused whole.
    assert!(matches!(
        o.store.admit(submission(&a, "s", &ids(0..5), 0)).await,
        Err(Error::QuotaExceeded {
            limit: QuotaLimit::OutboxWatermarksPerScope(4)
        })
    ));
    // Resending what is covered costs nothing.
    let again = o
        .store
        .admit(submission(&a, "s", &ids(0..3), 0))
        .await
        .unwrap();
    assert_eq!(again.new_events, 0);
    o.store
        .admit(submission(&b, "s", &ids(0..3), 0))
        .await
        .unwrap();
    // Seven store-wide would pass the total.
    assert!(matches!(
        o.store.admit(submission(&a, "s2", &ids(0..1), 0)).await,
        Err(Error::QuotaExceeded {
            limit: QuotaLimit::OutboxWatermarks(6)
        })
    ));
    // A failed job releases its events, and their rows are uncounted.
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    let st = o
        .store
        .fail(
            &item.job,
            &owner,
            JobError {
                code: "x".into(),
                message: "x".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(st, JobState::Failed);
    o.store
        .admit(submission(&item.scope, "s2", &ids(0..3), 0))
        .await
        .unwrap();
}

/// The health check writes (a store that cannot write fails it) and
/// changes no count and no job.
pub async fn a_health_check_writes_and_changes_no_count(f: &dyn JobStoreFactory) {
    let o = f.open(OutboxLimits::default()).await;
    let s = scope("health");
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..2), 0))
        .await
        .unwrap();
    let before = o.store.stats().await.unwrap();
    let job = o.store.status(&s, &r.jobs[0].id).await.unwrap();
    for _ in 0..3 {
        o.store.health().await.unwrap();
    }
    let mut after = o.store.stats().await.unwrap();
    after.oldest_due_age_ms = before.oldest_due_age_ms;
    assert_eq!(after, before);
    assert_eq!(o.store.status(&s, &r.jobs[0].id).await.unwrap(), job);
}

/// What a delivery skipped is in the job's status: every skipped event
/// counted by reason, the first `max_skipped_details` one by one, across
/// batches, and still there once the job has finished.
pub async fn skipped_events_are_counted_and_listed(f: &dyn JobStoreFactory) {
    use hippocamp_memory::event::{SkipReason, SkippedEvent};
    let o = f
        .open(OutboxLimits {
            max_skipped_details: 2,
            ..OutboxLimits::default()
        })
        .await;
    let s = scope("skips");
    let r = o
        .store
        .admit(submission(&s, "s", &ids(0..4), 0))
        .await
        .unwrap();
    let owner = Owner::random();
    let item = claimed(&o, owner, LONG).await;
    let skip = |index: usize, reason: SkipReason| SkippedEvent {
        index,
        event_id: Some(format!("e{index}")),
        reason,
    };
    let delivered = Delivered {
        added: 1,
        skipped: 3,
        skipped_events: vec![
            skip(1, SkipReason::Erased),
            skip(2, SkipReason::TooLarge("max_content_bytes".into())),
            skip(3, SkipReason::Erased),
        ],
        ..Delivered::default()
    };
    o.store
        .complete_batch(&item.job, &owner, 0, delivered, LONG)
        .await
        .unwrap();
    let st = o.store.status(&s, &r.jobs[0].id).await.unwrap();
    assert_eq!(st.state, JobState::Succeeded);
    assert_eq!(st.result.skipped, 3);
    assert_eq!(
        st.skips.by_reason,
        std::collections::BTreeMap::from([("erased".to_owned(), 2), ("too_large".to_owned(), 1)])
    );
    // Positions and reasons, never the ids: the status outlives an
    // erasure of the user until it is pruned.
    let kept = |index: usize, reason: SkipReason| SkippedEvent {
        event_id: None,
        ..skip(index, reason)
    };
    assert_eq!(
        st.skips.events,
        vec![
            kept(1, SkipReason::Erased),
            kept(2, SkipReason::TooLarge("max_content_bytes".into()))
        ]
    );
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["skips"]["events"][1]["reason"], "too_large");
    assert_eq!(json["skips"]["events"][1]["detail"], "max_content_bytes");
    // A job that skipped nothing says nothing about skips.
    let quiet = o
        .store
        .admit(submission(&s, "t", &ids(0..1), 0))
        .await
        .unwrap();
    let item = claimed(&o, owner, LONG).await;
    o.store
        .complete_batch(&item.job, &owner, 0, done(), LONG)
        .await
        .unwrap();
    let st = o.store.status(&s, &quiet.jobs[0].id).await.unwrap();
    assert!(st.skips.is_empty());
    assert!(serde_json::to_value(&st).unwrap().get("skips").is_none());
}
