//! The processor end to end over the in-memory stores: delivery, the
//! registry barrier, erasure while queued or in flight, redelivery after a
//! lost claim, retries of a failing store.

#![allow(clippy::unwrap_used, clippy::cast_possible_wrap)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{CallOptions, Error, MemoryLimits, MemoryScope, Result, SessionId};
use hippocamp_memory::event::IngestReport;
use hippocamp_memory::{
    Event, InMemoryStore, MemoryConfig, MemoryStore, SearchRequest, SkipReason, WriteOptions,
};
use hippocamp_outbox::{
    CancelReason, Erasing, InMemoryJobStore, JobState, Outbox, OutboxLimits, Processor,
    ProcessorOptions, Target, TargetName,
};

fn target() -> TargetName {
    TargetName::new("memory").unwrap()
}

fn scope() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            Event::text(
                format!("e{i}"),
                "user",
                1 + i as i64,
                format!("fact {i} about lisbon"),
            )
        })
        .collect()
}

fn fast() -> ProcessorOptions {
    ProcessorOptions {
        workers: 2,
        lease_ms: 2_000,
        call_timeout_ms: 500,
        poll_interval_ms: 10,
        ..ProcessorOptions::default()
    }
}

fn outbox(limits: OutboxLimits) -> Outbox {
    Outbox::new(Arc::new(InMemoryJobStore::new(limits).unwrap()))
}

fn register(o: &Outbox, store: Arc<dyn MemoryStore>) {
    o.register(
        target(),
        Target {
            store,
            limits: MemoryLimits::default(),
        },
    )
    .unwrap();
}

async fn hits(store: &dyn MemoryStore) -> usize {
    store
        .search(
            &scope(),
            &SearchRequest::new("lisbon"),
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .hits
        .len()
}

async fn settled(o: &Outbox, id: &hippocamp_outbox::JobId) -> hippocamp_outbox::JobStatus {
    for _ in 0..400 {
        let st = o.job(&scope(), id).await.unwrap();
        if st.state.is_terminal() {
            return st;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("job {id} did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_events_are_delivered_in_the_background() {
    let memory: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&memory));
    let p = Processor::start(&o, fast()).unwrap();
    let mut evs = events(3);
    // A secret in an event's text is redacted at delivery; one in its id
    // cannot be, so the event is refused.
    evs.push(Event::text(
        "api_key=abcdefgh",
        "user",
        9,
        "an id holding a key",
    ));
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &evs,
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!((r.new_events, r.jobs.len()), (3, 1));
    assert_eq!(r.skipped.len(), 1, "the secret is reported at admission");
    assert_eq!(r.skipped[0].index, 3);
    let st = settled(&o, &r.jobs[0].id).await;
    assert_eq!(st.state, JobState::Succeeded);
    assert_eq!((st.result.added, st.delivered_events), (3, 3));
    assert_eq!(hits(&*memory).await, 3);
    // The whole session again, grown: only the new event is work.
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(4),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.new_events, 1);
    settled(&o, &r.jobs[0].id).await;
    assert_eq!(hits(&*memory).await, 4);
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(4),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(r.new_events, 0);
    assert_eq!(r.jobs.len(), 2);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_delivered_before_its_target_is_registered() {
    let memory: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let o = outbox(OutboxLimits::default());
    // Admission needs the target's limits: register, then take it away by
    // making a fresh outbox over the same job store.
    register(&o, Arc::clone(&memory));
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(2),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let restarted = Outbox::new(Arc::clone(o.store()));
    let p = Processor::start(&restarted, fast()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let st = restarted.job(&scope(), &r.jobs[0].id).await.unwrap();
    assert_eq!((st.state, st.attempts), (JobState::Pending, 0));
    assert_eq!(hits(&*memory).await, 0);
    register(&restarted, Arc::clone(&memory));
    assert_eq!(
        settled(&restarted, &r.jobs[0].id).await.state,
        JobState::Succeeded
    );
    assert_eq!(hits(&*memory).await, 2);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_cancels_queued_work_and_nothing_comes_back() {
    let inner: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&inner));
    let memory = Erasing::new(Arc::clone(&inner), o.clone());
    // Queued (no processor yet), then the user is erased.
    let queued = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(3),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let erasure = memory
        .delete_user(&scope(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(erasure.epoch, 1);
    let st = o.job(&scope(), &queued.jobs[0].id).await.unwrap();
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Erased))
    );
    let p = Processor::start(&o, fast()).unwrap();
    // Submitting the same session again: covered, nothing new.
    let again = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(3),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.new_events, 0);
    // Delivered events of a session, then the session erased: straight
    // resubmission and queued copies both stay erased.
    let s2 = SessionId::new("s2").unwrap();
    let r = o
        .ingest(
            &target(),
            &scope(),
            &s2,
            &events(2),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    settled(&o, &r.jobs[0].id).await;
    assert_eq!(hits(&*inner).await, 2);
    assert_eq!(
        memory
            .delete_session(&scope(), &s2, &CallOptions::default())
            .await
            .unwrap(),
        2
    );
    let direct = memory
        .add_events(&scope(), &s2, &events(2), &WriteOptions::default())
        .await
        .unwrap();
    assert!(
        direct
            .skipped
            .iter()
            .all(|s| s.reason == SkipReason::Erased)
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(hits(&*inner).await, 0);
    p.stop().await;
}

/// A store whose first `add_events` hangs far past its deadline (a worker
/// stuck, as if its process froze), then goes through.
#[derive(Debug)]
struct Hangs {
    inner: InMemoryStore,
    calls: AtomicUsize,
    delay: Duration,
    fails: bool,
}

#[async_trait]
impl hippocamp_memory::MemoryLayer for Hangs {
    type Inner = InMemoryStore;
    fn inner(&self) -> &InMemoryStore {
        &self.inner
    }
    async fn add_events(
        &self,
        s: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        o: &WriteOptions,
    ) -> Result<IngestReport> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fails {
            return Err(Error::Unavailable("the store is down".into()));
        }
        if n == 0 {
            tokio::time::sleep(self.delay).await;
            // Its deadline long gone, it still writes (with its fences):
            // the worst case.
            let late = WriteOptions {
                call: CallOptions::default(),
                ..o.clone()
            };
            return self.inner.add_events(s, session, events, &late).await;
        }
        self.inner.add_events(s, session, events, o).await
    }
}

/// A store that says it is not idempotent, or not incremental.
#[derive(Debug)]
struct Unfit {
    inner: InMemoryStore,
    idempotent: bool,
}

#[async_trait]
impl hippocamp_memory::MemoryLayer for Unfit {
    type Inner = InMemoryStore;
    fn inner(&self) -> &InMemoryStore {
        &self.inner
    }
    fn capabilities(&self) -> hippocamp_memory::Capabilities {
        let mut c = self.inner.capabilities();
        if self.idempotent {
            c.incremental_events = false;
        } else {
            c.idempotent_ingestion = false;
        }
        c
    }
}

/// Delivery is at least once and in batches: a target that could store
/// a retried event twice, or needs a session whole, is refused.
#[test]
fn a_target_that_is_not_idempotent_or_incremental_is_refused() {
    let o = outbox(OutboxLimits::default());
    for idempotent in [false, true] {
        let store = Unfit {
            inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
            idempotent,
        };
        let r = o.register(
            target(),
            Target {
                store: Arc::new(store),
                limits: MemoryLimits::default(),
            },
        );
        assert!(
            matches!(
                &r,
                Err(Error::InvalidArgument {
                    field: hippocamp_core::Field::Target,
                    ..
                })
            ),
            "{r:?}"
        );
    }
    assert!(o.registry().names().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_claim_is_delivered_again_and_stored_once() {
    let memory = Arc::new(Hangs {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(1_200),
        fails: false,
    });
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&memory) as Arc<dyn MemoryStore>);
    let options = ProcessorOptions {
        lease_ms: 400,
        call_timeout_ms: 50,
        ..fast()
    };
    let p = Processor::start(&o, options).unwrap();
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(3),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let st = settled(&o, &r.jobs[0].id).await;
    assert_eq!(st.state, JobState::Succeeded);
    assert_eq!(st.attempts, 2, "the stuck attempt expired and was counted");
    // The stuck call lands afterwards: a duplicate, not a second entry.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(memory.calls.load(Ordering::SeqCst), 2);
    assert_eq!(hits(&*memory).await, 3);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_is_retried_then_the_job_fails() {
    let memory = Arc::new(Hangs {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        calls: AtomicUsize::new(0),
        delay: Duration::ZERO,
        fails: true,
    });
    let o = outbox(OutboxLimits {
        max_attempts: 3,
        backoff_base_ms: 20,
        max_backoff_ms: 40,
        ..OutboxLimits::default()
    });
    register(&o, Arc::clone(&memory) as Arc<dyn MemoryStore>);
    let p = Processor::start(&o, fast()).unwrap();
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(2),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let st = settled(&o, &r.jobs[0].id).await;
    assert_eq!((st.state, st.attempts), (JobState::Failed, 3));
    assert_eq!(st.last_error.unwrap().code, "unavailable");
    assert_eq!(memory.calls.load(Ordering::SeqCst), 3);
    let stats = o.stats().await.unwrap();
    assert_eq!((stats.failed_total, stats.retried_total), (1, 2));
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_job_whose_user_is_erased_writes_nothing() {
    let memory = Arc::new(Hangs {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(300),
        fails: false,
    });
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&memory) as Arc<dyn MemoryStore>);
    let p = Processor::start(
        &o,
        ProcessorOptions {
            lease_ms: 5_000,
            ..fast()
        },
    )
    .unwrap();
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(2),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    // The first call is in flight (hanging) when the user is erased: its
    // write carries the old epoch and is refused.
    tokio::time::sleep(Duration::from_millis(100)).await;
    memory
        .inner
        .delete_user(&scope(), &CallOptions::default())
        .await
        .unwrap();
    let st = settled(&o, &r.jobs[0].id).await;
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Erased))
    );
    assert_eq!(hits(&*memory).await, 0);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_erased_while_its_batch_is_in_flight_keeps_nothing() {
    // The first call hangs, then writes whatever its deadline says, with
    // the fences it was admitted under: the session's erasure does not
    // wait for it, and the store refuses it when it lands.
    let memory = Arc::new(Hangs {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(400),
        fails: false,
    });
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&memory) as Arc<dyn MemoryStore>);
    let erasing = Erasing::new(Arc::clone(&memory), o.clone());
    let p = Processor::start(
        &o,
        ProcessorOptions {
            lease_ms: 5_000,
            ..fast()
        },
    )
    .unwrap();
    let r = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(3),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    while memory.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = std::time::Instant::now();
    erasing
        .delete_session(&scope(), &session(), &CallOptions::default())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(300), "it waited");
    let st = settled(&o, &r.jobs[0].id).await;
    assert_eq!(
        (st.state, st.cancel_reason),
        (JobState::Cancelled, Some(CancelReason::Erased))
    );
    // The call in flight landed after the erasure and was refused.
    assert!(memory.calls.load(Ordering::SeqCst) >= 1);
    assert_eq!(hits(&*memory).await, 0);
    // Queued again, the session's events stay dropped (their watermark).
    let again = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(3),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.new_events, 0, "{again:?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(hits(&*memory).await, 0);
    p.stop().await;
}

/// A session erasure the store refuses (an entry of it is retained)
/// cancels nothing: the events queued for the session are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_session_erasure_cancels_no_queued_work() {
    let inner: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&inner));
    let memory = Erasing::new(Arc::clone(&inner), o.clone());
    let retained = WriteOptions::default().obligations(hippocamp_memory::Obligations {
        retain_until_ms: Some(u64::MAX / 4),
        ..hippocamp_memory::Obligations::default()
    });
    memory
        .add_events(&scope(), &session(), &events(1), &retained)
        .await
        .unwrap();
    // Queued while no processor runs, then the erasure is refused.
    let queued = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(4),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(queued.new_events, 4);
    let err = memory
        .delete_session(&scope(), &session(), &CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Retention { .. }), "{err}");
    let st = o.job(&scope(), &queued.jobs[0].id).await.unwrap();
    assert_eq!(st.state, JobState::Pending, "{st:?}");
    let p = Processor::start(&o, fast()).unwrap();
    let st = settled(&o, &queued.jobs[0].id).await;
    assert_eq!(st.state, JobState::Succeeded);
    assert_eq!(hits(&*inner).await, 4);
    p.stop().await;
}

/// A worker claims its next job while its current call is in flight; when
/// it is stopped then, it hands that claim back: the job is pending again
/// with no attempt counted, and the next processor delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_hands_back_the_job_it_claimed_ahead() {
    let memory = Arc::new(Hangs {
        inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
        calls: AtomicUsize::new(0),
        delay: Duration::from_millis(300),
        fails: false,
    });
    let o = outbox(OutboxLimits::default());
    register(&o, Arc::clone(&memory) as Arc<dyn MemoryStore>);
    let later = SessionId::new("s2").unwrap();
    let first = o
        .ingest(
            &target(),
            &scope(),
            &session(),
            &events(2),
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let second = o
        .ingest(
            &target(),
            &scope(),
            &later,
            &events(4)[2..],
            None,
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let one = ProcessorOptions {
        workers: 1,
        ..fast()
    };
    let p = Processor::start(&o, one.clone()).unwrap();
    while memory.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ahead = o.job(&scope(), &second.jobs[0].id).await.unwrap();
    assert_eq!(
        ahead.state,
        JobState::Running,
        "claimed during the first call"
    );
    p.stop().await;
    assert_eq!(
        o.job(&scope(), &first.jobs[0].id).await.unwrap().state,
        JobState::Succeeded
    );
    let back = o.job(&scope(), &second.jobs[0].id).await.unwrap();
    assert_eq!((back.state, back.attempts), (JobState::Pending, 0));
    assert_eq!(memory.calls.load(Ordering::SeqCst), 1);
    let p = Processor::start(&o, one).unwrap();
    let done = settled(&o, &second.jobs[0].id).await;
    assert_eq!((done.state, done.attempts), (JobState::Succeeded, 1));
    assert_eq!(hits(&*memory).await, 4);
    p.stop().await;
}
