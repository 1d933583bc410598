//! Router behaviour with a scope state whose activation can be held open.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Result};
use hippocamp_router::{Access, RouterConfig, ScopeRouter, ScopeState, Strategy};
use parking_lot::Mutex;
use tokio::sync::Semaphore;

struct State {
    volatile: bool,
    gate: Semaphore,
    activations: AtomicUsize,
    released: Mutex<Vec<u32>>,
}

impl State {
    fn new(volatile: bool, open: bool) -> Arc<Self> {
        Arc::new(Self {
            volatile,
            gate: Semaphore::new(if open { Semaphore::MAX_PERMITS } else { 0 }),
            activations: AtomicUsize::new(0),
            released: Mutex::new(Vec::new()),
        })
    }
    fn open(&self) {
        self.gate
            .add_permits(Semaphore::MAX_PERMITS - self.gate.available_permits());
    }
}

#[async_trait]
impl ScopeState<u32> for State {
    async fn activate(&self, _key: &u32) -> Result<()> {
        // Waits until the test opens the gate.
        let _p = self.gate.acquire().await.unwrap();
        self.activations.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn release(&self, key: &u32) {
        self.released.lock().push(*key);
    }
    fn volatile(&self) -> bool {
        self.volatile
    }
}

fn router(state: &Arc<State>, f: impl FnOnce(&mut RouterConfig)) -> Arc<ScopeRouter<u32>> {
    let mut c = RouterConfig::default();
    f(&mut c);
    Arc::new(ScopeRouter::new(c, state.clone() as Arc<dyn ScopeState<u32>>).unwrap())
}

fn soon(ms: u64) -> Deadline {
    Deadline::after(Duration::from_millis(ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_scope_is_ordered_while_others_run() {
    let state = State::new(false, true);
    let r = router(&state, |_| {});
    let held = r.enter(&1, soon(1_000), Access::Write).await.unwrap();
    // Another write to scope 1 waits, and times out at its deadline.
    assert!(matches!(
        r.enter(&1, soon(30), Access::Write).await,
        Err(Error::Timeout(_))
    ));
    // Scope 2 does not wait for scope 1.
    let other = r.enter(&2, soon(1_000), Access::Write).await.unwrap();
    drop(other);
    drop(held);
    // Writes to one scope run in arrival order.
    let order = Arc::new(Mutex::new(Vec::new()));
    let gate = r.enter(&1, soon(5_000), Access::Write).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (r, order) = (r.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let _l = r.enter(&1, soon(5_000), Access::Write).await.unwrap();
            order.lock().push(i);
        }));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(gate);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock(), (0..8).collect::<Vec<_>>());
    // Reads of one scope run together.
    let a = r.enter(&1, soon(1_000), Access::Read).await.unwrap();
    let b = r.enter(&1, soon(1_000), Access::Read).await.unwrap();
    drop((a, b));
}

#[tokio::test]
async fn a_volatile_store_runs_shared_so_distinct_scopes_have_no_ceiling() {
    let state = State::new(true, true);
    let r = router(&state, |c| {
        c.max_active_scopes = 1;
        c.idle_scope_timeout_ms = 1;
    });
    for key in 0..100 {
        drop(r.enter(&key, soon(1_000), Access::Write).await.unwrap());
    }
    let s = r.stats();
    assert_eq!(s.strategy, Strategy::Shared, "the strategy in force");
    assert_eq!((s.active_scopes, s.reclaimed_workers), (1, 0));
    assert!(!s.idle_reclamation);
    assert!(state.released.lock().is_empty(), "nothing was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_capacity_the_least_recently_used_free_worker_makes_room_at_once() {
    let state = State::new(false, true);
    let r = router(&state, |c| {
        c.max_active_scopes = 2;
        c.idle_scope_timeout_ms = 3_600_000;
    });
    drop(r.enter(&1, soon(1_000), Access::Write).await.unwrap());
    drop(r.enter(&2, soon(1_000), Access::Write).await.unwrap());
    // Scope 1 was used longest ago: it goes, however recently.
    drop(r.enter(&3, soon(1_000), Access::Write).await.unwrap());
    assert_eq!(*state.released.lock(), vec![1]);
    // Using a scope makes it the most recent: 2 goes next, not 3.
    drop(r.enter(&3, soon(1_000), Access::Read).await.unwrap());
    drop(r.enter(&4, soon(1_000), Access::Write).await.unwrap());
    assert_eq!(*state.released.lock(), vec![1, 2]);
    // Only when every worker has an operation in flight is a scope refused.
    let busy3 = r.enter(&3, soon(1_000), Access::Read).await.unwrap();
    let busy4 = r.enter(&4, soon(1_000), Access::Write).await.unwrap();
    assert!(matches!(
        r.enter(&5, soon(1_000), Access::Write).await,
        Err(Error::MaxActiveScopesReached { max: 2 })
    ));
    drop(busy3);
    drop(r.enter(&5, soon(1_000), Access::Write).await.unwrap());
    assert_eq!(*state.released.lock(), vec![1, 2, 3]);
    drop(busy4);
    assert_eq!(r.stats().reclaimed_workers, 3);
    // 10,000 distinct scopes through two slots, none refused.
    for key in 100..10_100 {
        drop(r.enter(&key, soon(1_000), Access::Write).await.unwrap());
    }
    assert_eq!(r.stats().active_scopes, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_durable_workers_are_swept_least_recently_used_first() {
    let state = State::new(false, true);
    let r = router(&state, |c| {
        c.max_active_scopes = 8;
        c.idle_scope_timeout_ms = 10;
    });
    drop(r.enter(&1, soon(1_000), Access::Write).await.unwrap());
    tokio::time::sleep(Duration::from_millis(2)).await;
    drop(r.enter(&2, soon(1_000), Access::Write).await.unwrap());
    // A busy worker is never reclaimed.
    let busy = r.enter(&3, soon(1_000), Access::Read).await.unwrap();
    for _ in 0..100 {
        if state.released.lock().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(*state.released.lock(), vec![1, 2]);
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(!state.released.lock().contains(&3));
    drop(busy);
    // Alternating scopes at capacity 1 keeps reclaiming; data would be
    // reloaded by activation each time.
    let r1 = router(&state, |c| {
        c.max_active_scopes = 1;
        c.idle_scope_timeout_ms = 3_600_000;
    });
    let before = state.activations.load(Ordering::SeqCst);
    for i in 0..6 {
        drop(
            r1.enter(&(10 + i % 2), soon(1_000), Access::Write)
                .await
                .unwrap(),
        );
    }
    assert_eq!(r1.stats().reclaimed_workers, 5);
    assert_eq!(state.activations.load(Ordering::SeqCst) - before, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_activations_are_bounded() {
    let state = State::new(false, false);
    let r = router(&state, |c| c.max_cold_activations = 2);
    let mut tasks = Vec::new();
    for key in 0..12u32 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            r.enter(&key, soon(10_000), Access::Write).await.map(drop)
        }));
    }
    // Let every route reach admission.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(r.stats().cold_activations_in_flight, 2);
    state.open();
    let mut ok = 0;
    let mut overloaded = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => ok += 1,
            Err(Error::Overloaded(_)) => overloaded += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((ok, overloaded), (2, 10));
    let s = r.stats();
    assert_eq!((s.cold_activations_in_flight, s.active_scopes), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_or_dropped_caller_leaks_nothing() {
    let state = State::new(false, false);
    let r = router(&state, |c| {
        c.max_active_scopes = 1;
        c.max_cold_activations = 1;
    });
    // Times out while activating: no worker is left behind.
    assert!(matches!(
        r.enter(&1, soon(20), Access::Write).await,
        Err(Error::Timeout(_))
    ));
    let s = r.stats();
    assert_eq!((s.active_scopes, s.cold_activations_in_flight), (0, 0));
    // Dropped mid-activation: the same.
    let task = {
        let r = r.clone();
        tokio::spawn(async move { r.enter(&2, soon(10_000), Access::Write).await.map(drop) })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(r.stats().cold_activations_in_flight, 1);
    task.abort();
    let _ = task.await;
    let s = r.stats();
    assert_eq!((s.active_scopes, s.cold_activations_in_flight), (0, 0));
    // Dropped while queued behind a busy scope: its lease is returned.
    state.open();
    let held = r.enter(&3, soon(1_000), Access::Write).await.unwrap();
    let queued = {
        let r = r.clone();
        tokio::spawn(async move { r.enter(&3, soon(10_000), Access::Write).await.map(drop) })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    queued.abort();
    let _ = queued.await;
    drop(held);
    // Only scope 3's own worker holds the one slot, and nothing is leased.
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(r.stats().active_scopes, 1);
    assert!(r.enter(&3, soon(1_000), Access::Write).await.is_ok());
}

#[tokio::test]
async fn a_reclaimed_worker_is_never_revived() {
    let state = State::new(false, true);
    let r = router(&state, |c| c.idle_scope_timeout_ms = 1);
    drop(r.enter(&1, soon(1_000), Access::Write).await.unwrap());
    // The background sweep reclaims it.
    for _ in 0..100 {
        if r.stats().reclaimed_workers > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(r.stats().reclaimed_workers, 1);
    assert_eq!(r.stats().active_scopes, 0);
    // The next caller gets a fresh worker, activated again.
    drop(r.enter(&1, soon(1_000), Access::Write).await.unwrap());
    assert_eq!(state.activations.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn shared_strategy_has_one_worker() {
    let state = State::new(true, false);
    let shared = router(&state, |c| c.strategy = Strategy::Shared);
    // No activation (the gate is closed and it still works), no ordering.
    let first = shared.enter(&1, soon(100), Access::Write).await.unwrap();
    let other = shared.enter(&2, soon(100), Access::Write).await.unwrap();
    let same = shared.enter(&1, soon(100), Access::Write).await.unwrap();
    drop((first, other, same));
    let stats = shared.stats();
    assert_eq!(stats.active_scopes, 1);
    assert_eq!(stats.strategy, Strategy::Shared);
}

#[test]
fn config_is_checked() {
    let state = State::new(true, true);
    let bad = RouterConfig {
        idle_scope_timeout_ms: 0,
        ..RouterConfig::default()
    };
    assert!(matches!(
        ScopeRouter::new(bad, state.clone() as Arc<dyn ScopeState<u32>>),
        Err(Error::InvalidConfig { ref key, .. }) if key == "idle_scope_timeout_ms"
    ));
    let too_long = RouterConfig {
        idle_scope_timeout_ms: 86_400_001,
        ..RouterConfig::default()
    };
    assert!(ScopeRouter::new(too_long, state as Arc<dyn ScopeState<u32>>).is_err());
}
