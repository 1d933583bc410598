//! What only the durable job store has: admissions survive a reopen and a
//! crash (the log is replayed), a restart voids every lease, the store's
//! clock goes on across restarts, one process per directory.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use hippocamp_core::{Error, MemoryScope, SessionId};
use hippocamp_outbox::model::{Owner, StoredEvent, Submission};
use hippocamp_outbox::{JobError, JobState, JobStore, OutboxLimits, TargetName};
use hippocamp_outbox_redb::RedbJobStore;

fn scope() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

fn targets() -> BTreeSet<TargetName> {
    [TargetName::new("memory").unwrap()].into_iter().collect()
}

fn sub(ids: &[&str]) -> Submission {
    Submission {
        target: TargetName::new("memory").unwrap(),
        scope: scope(),
        session: SessionId::new("s").unwrap(),
        epoch: 0,
        session_epoch: 0,
        events: ids
            .iter()
            .map(|id| StoredEvent {
                id: (*id).to_owned(),
                author: "user".into(),
                timestamp_ms: 1,
                text: format!("text of {id}"),
                metadata: None,
            })
            .collect(),
        max_attempts: None,
    }
}

const LONG: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admissions_survive_a_reopen_and_leases_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let (job, later) = {
        let store = RedbJobStore::open(dir.path(), OutboxLimits::default()).unwrap();
        let job = store.admit(sub(&["e1", "e2"])).await.unwrap().jobs[0].id;
        let later = store.admit(sub(&["e3"])).await.unwrap().jobs[0].id;
        // Claimed, and the second put in a long backoff.
        let owner = Owner::random();
        let first = store.claim(owner, LONG, &targets()).await.unwrap().unwrap();
        assert_eq!(first.job, job);
        let o2 = Owner::random();
        store.claim(o2, LONG, &targets()).await.unwrap().unwrap();
        store
            .fail(&later, &o2, JobError::of(&Error::Overloaded("x")))
            .await
            .unwrap();
        (job, later)
    };
    let store = RedbJobStore::open(dir.path(), OutboxLimits::default()).unwrap();
    // The claim of the last run is void: claimable at once, and the
    // attempt it interrupted is not counted.
    let st = store.status(&scope(), &job).await.unwrap();
    assert_eq!((st.state, st.attempts), (JobState::Pending, 0));
    let item = store
        .claim(Owner::random(), LONG, &targets())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((item.job, item.attempt), (job, 1));
    // The store's clock went on: the retry is still waiting out its
    // backoff (250 ms base), not due at once because the clock restarted.
    let st = store.status(&scope(), &later).await.unwrap();
    assert_eq!((st.state, st.attempts), (JobState::Pending, 1));
    let stats = store.stats().await.unwrap();
    assert_eq!(
        (stats.pending, stats.running, stats.admitted_total),
        (1, 1, 2)
    );
    // The admission watermark survived too.
    assert_eq!(
        store
            .admit(sub(&["e1", "e2", "e3"]))
            .await
            .unwrap()
            .new_events,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_replays_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbJobStore::open(dir.path(), OutboxLimits::default()).unwrap();
    let job = store.admit(sub(&["e1"])).await.unwrap().jobs[0].id;
    // As if the process died: no checkpoint, the files as they are.
    let copy = tempfile::tempdir().unwrap();
    for name in [
        hippocamp_outbox_redb::DB_FILE,
        hippocamp_outbox_redb::WAL_FILE,
    ] {
        std::fs::copy(dir.path().join(name), copy.path().join(name)).unwrap();
    }
    std::mem::forget(store);
    let store = RedbJobStore::open(copy.path(), OutboxLimits::default()).unwrap();
    let st = store.status(&scope(), &job).await.unwrap();
    assert_eq!((st.state, st.events), (JobState::Pending, 1));
    assert_eq!(store.held_batches(), 1);
}

#[test]
fn one_process_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    let _store = RedbJobStore::open(dir.path(), OutboxLimits::default()).unwrap();
    assert!(matches!(
        RedbJobStore::open(dir.path(), OutboxLimits::default()),
        Err(Error::Unavailable(_))
    ));
}

/// A log that refuses writes once `broken` is set, as a full or
/// read-only disk does.
#[derive(Debug)]
struct BreakableLog {
    inner: hippocamp_durable::sim::LogFile<()>,
    broken: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl BreakableLog {
    fn check(&self) -> std::io::Result<()> {
        if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("no space left on device"));
        }
        Ok(())
    }
}

impl hippocamp_durable::wal::WalStorage for BreakableLog {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        self.inner.read_all()
    }
    fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.check()?;
        self.inner.append(data)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        self.check()?;
        self.inner.sync()
    }
    fn truncate(&mut self) -> std::io::Result<()> {
        self.check()?;
        self.inner.truncate()
    }
}

/// The health check writes: a store whose disk stopped taking writes
/// reports it at once, before any admission fails (a read alone would
/// pass), and stays unhealthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_fails_once_the_disk_stops_taking_writes() {
    let disk = hippocamp_durable::sim::PowerLoss::<()>::new();
    let broken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let log = BreakableLog {
        inner: disk.wal(),
        broken: std::sync::Arc::clone(&broken),
    };
    let store = RedbJobStore::open_with_backend(
        disk.backend(),
        log,
        OutboxLimits::default(),
        hippocamp_outbox_redb::DurableOptions::default(),
    )
    .unwrap();
    store.admit(sub(&["a"])).await.unwrap();
    store.health().await.unwrap();
    broken.store(true, std::sync::atomic::Ordering::SeqCst);
    // Reads still answer: only a write shows the failure.
    store.stats().await.unwrap();
    assert!(store.health().await.is_err());
    assert!(store.health().await.is_err());
}
