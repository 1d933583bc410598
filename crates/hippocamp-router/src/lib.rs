//! The exact-scope router: concurrency and admission in front of a store.
//!
//! With the `exact_scope` strategy every active scope has a worker: a FIFO
//! lock that orders the scope's writes (one at a time, in arrival order)
//! while different scopes run in parallel. Reads hold a lease on the worker
//! but take no turn: they see the store's committed state and never wait
//! behind the scope's queued writes (a read that starts after a write was
//! acknowledged sees it). A scope's worker is created on its first use
//! (*activation*, which may load the scope's state), and the router bounds
//! both the number of live workers (`max_active_scopes`, then
//! `MaxActiveScopesReached`) and the activations in progress
//! (`max_cold_activations`, then `Overloaded`).
//!
//! For a durable store, a worker is reclaimed when nothing holds it: at
//! capacity, the least recently used worker with no operation in flight
//! makes room for a new scope at once (a durable scope reopens cheaply, so
//! the number of distinct scopes served over time has no ceiling), and a
//! periodic sweep reclaims workers idle for `idle_scope_timeout`;
//! reclaiming releases the scope's in-memory state (its data stays
//! stored). Only when every worker has an operation in flight is a new
//! scope refused (`MaxActiveScopesReached`). A volatile store cannot be
//! released without losing data, so it always runs with the `shared`
//! strategy, whatever the configuration says (reported as the strategy in
//! force).
//!
//! Everything a caller holds is a [`Lease`]; dropping it (including by
//! dropping the caller's future mid-flight) returns the capacity, and a
//! worker is reclaimed only while nobody holds a lease on it, so a stale
//! caller can never revive a reclaimed worker. A worker whose activation
//! failed or was abandoned is removed when its last lease goes.
//!
//! The `shared` strategy has one worker for every scope and adds no
//! ordering of its own: the store's own concurrency applies.
//!
//! The router is generic over the scope type, so memory and artifacts use
//! the same code.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Problem, Result, Stage};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{OnceCell, Semaphore};

pub use hippocamp_core::routing::{RouterStats, Strategy};

/// Router bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// `exact_scope` (default) or `shared`.
    pub strategy: Strategy,
    /// Most live workers, 1 ..= 1,000,000 (default 1,024).
    pub max_active_scopes: u64,
    /// Most activations in progress, 1 ..= 100,000 (default 256).
    pub max_cold_activations: u64,
    /// Idle time before a durable scope's worker may be reclaimed, in
    /// milliseconds, 1 ..= 86,400,000 (default 60,000).
    pub idle_scope_timeout_ms: u64,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            strategy: Strategy::ExactScope,
            max_active_scopes: 1_024,
            max_cold_activations: 256,
            idle_scope_timeout_ms: 60_000,
        }
    }
}

impl RouterConfig {
    /// Checks every range.
    pub fn validate(&self) -> Result<()> {
        let check = |key: &str, v: u64, max: u64| {
            if v == 0 || v > max {
                return Err(Error::config(
                    key,
                    Problem::OutOfRange {
                        value: i128::from(v),
                        min: 1,
                        max: i128::from(max),
                    },
                ));
            }
            Ok(())
        };
        check("max_active_scopes", self.max_active_scopes, 1_000_000)?;
        check("max_cold_activations", self.max_cold_activations, 100_000)?;
        check(
            "idle_scope_timeout_ms",
            self.idle_scope_timeout_ms,
            86_400_000,
        )
    }
}

/// What the router asks of the store behind it.
#[async_trait]
pub trait ScopeState<K>: Send + Sync {
    /// Brings a scope's state into memory before its first operation.
    async fn activate(&self, key: &K) -> Result<()>;
    /// Releases a reclaimed scope's in-memory state.
    fn release(&self, key: &K);
    /// Whether releasing would lose data; then workers are never reclaimed.
    fn volatile(&self) -> bool;
}

/// How an operation uses its scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Runs at once, alongside anything else on the scope.
    Read,
    /// Runs alone among the scope's writes, after every write that arrived
    /// before it.
    Write,
}

struct Worker {
    order: Arc<tokio::sync::Mutex<()>>,
    activated: OnceCell<()>,
    use_: Mutex<Use>,
}

/// Changed only under the router's map lock, so reclaiming (which needs
/// zero leases) and leasing never race.
struct Use {
    leases: usize,
    last_used: Instant,
    /// Its place in the map's idle order while it has no lease.
    idle_tick: Option<u64>,
}

impl Worker {
    fn new(activated: bool) -> Arc<Self> {
        Arc::new(Self {
            order: Arc::new(tokio::sync::Mutex::new(())),
            activated: OnceCell::new_with(activated.then_some(())),
            use_: Mutex::new(Use {
                leases: 0,
                last_used: Instant::now(),
                idle_tick: None,
            }),
        })
    }
}

type WorkerRef = Arc<Worker>;

/// The live workers, and those with no lease in the order they became
/// free (least recently used first), so reclaiming one is O(log n).
struct Workers<K> {
    by_key: HashMap<K, WorkerRef>,
    idle: std::collections::BTreeMap<u64, K>,
    tick: u64,
}

impl<K> Workers<K> {
    fn len(&self) -> usize {
        self.by_key.len()
    }
}

impl<K: Eq + Hash + Clone> Workers<K> {
    fn new() -> Self {
        Self {
            by_key: HashMap::new(),
            idle: std::collections::BTreeMap::new(),
            tick: 0,
        }
    }

    /// Takes a lease on `w` (it leaves the idle order).
    fn lease(&mut self, w: &Worker) {
        let mut u = w.use_.lock();
        u.leases += 1;
        u.last_used = Instant::now();
        if let Some(t) = u.idle_tick.take() {
            self.idle.remove(&t);
        }
    }

    /// Returns a lease on `w` of `key`; with none left it joins the idle
    /// order (or, never activated, leaves the map: it holds no state).
    fn release(&mut self, key: &K, w: &WorkerRef) {
        let mut u = w.use_.lock();
        u.leases -= 1;
        u.last_used = Instant::now();
        if u.leases > 0 {
            return;
        }
        let current = self.by_key.get(key).is_some_and(|cur| Arc::ptr_eq(cur, w));
        if !current {
            return;
        }
        if w.activated.initialized() {
            self.tick += 1;
            self.idle.insert(self.tick, key.clone());
            u.idle_tick = Some(self.tick);
        } else {
            drop(u);
            self.by_key.remove(key);
        }
    }

    /// Removes the least recently used worker with no lease, if it has
    /// been idle since `idle_before` (any, when `None`).
    fn pop_idle(&mut self, idle_before: Option<Instant>) -> Option<K> {
        let (&t, key) = self.idle.iter().next()?;
        if let Some(before) = idle_before {
            let w = self.by_key.get(key)?;
            if w.use_.lock().last_used > before {
                return None;
            }
        }
        let key = self.idle.remove(&t)?;
        self.by_key.remove(&key);
        Some(key)
    }
}

struct Shared<K> {
    workers: Mutex<Workers<K>>,
    evictions: AtomicU64,
    state: Arc<dyn ScopeState<K>>,
    idle: Duration,
    reclaim: bool,
}

/// The router. Cheap to share behind an `Arc`.
pub struct ScopeRouter<K> {
    config: RouterConfig,
    shared: Arc<Shared<K>>,
    cold: Arc<Semaphore>,
    one: Option<WorkerRef>,
}

impl<K> fmt::Debug for ScopeRouter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopeRouter")
            .field("config", &self.config)
            .field("active_scopes", &self.shared.workers.lock().len())
            .finish_non_exhaustive()
    }
}

/// An admitted operation on one scope. Dropping it returns the capacity.
pub struct Lease<K: Eq + Hash + Clone + Send + Sync + 'static> {
    shared: Option<Arc<Shared<K>>>,
    key: Option<K>,
    worker: WorkerRef,
    turn: Turn,
}

/// The lease's place in its scope's write order, held until the lease
/// drops.
enum Turn {
    None,
    Write(#[allow(dead_code)] OwnedWriteGuard),
}

type OwnedWriteGuard = tokio::sync::OwnedMutexGuard<()>;

impl<K: Eq + Hash + Clone + Send + Sync + 'static> fmt::Debug for Lease<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("write", &matches!(self.turn, Turn::Write(_)))
            .finish_non_exhaustive()
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> Drop for Lease<K> {
    fn drop(&mut self) {
        let (Some(shared), Some(key)) = (&self.shared, &self.key) else {
            return;
        };
        // The write turn goes first: the worker is free once both are.
        self.turn = Turn::None;
        shared.workers.lock().release(key, &self.worker);
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> ScopeRouter<K> {
    /// A router over `state` with `config`. With a Tokio runtime present,
    /// durable scopes are also swept for idleness in the background.
    pub fn new(mut config: RouterConfig, state: Arc<dyn ScopeState<K>>) -> Result<Self> {
        config.validate()?;
        // Workers of a volatile store could never be released: per-scope
        // workers would be a lifetime ceiling on distinct scopes.
        if state.volatile() {
            config.strategy = Strategy::Shared;
        }
        let reclaim = config.strategy == Strategy::ExactScope;
        let idle = Duration::from_millis(config.idle_scope_timeout_ms);
        let shared = Arc::new(Shared {
            workers: Mutex::new(Workers::new()),
            evictions: AtomicU64::new(0),
            state,
            idle,
            reclaim,
        });
        if reclaim && let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(sweep(Arc::downgrade(&shared)));
        }
        let permits = usize::try_from(config.max_cold_activations).unwrap_or(usize::MAX);
        let one = (config.strategy == Strategy::Shared).then(|| Worker::new(true));
        Ok(Self {
            config,
            shared,
            cold: Arc::new(Semaphore::new(permits)),
            one,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RouterConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> RouterStats {
        let active = if self.one.is_some() {
            1
        } else {
            self.shared.workers.lock().len() as u64
        };
        let free = self.cold.available_permits() as u64;
        RouterStats {
            strategy: self.config.strategy,
            active_scopes: active,
            cold_activations_in_flight: self.config.max_cold_activations.saturating_sub(free),
            reclaimed_workers: self.shared.evictions.load(Ordering::Relaxed),
            max_active_scopes: self.config.max_active_scopes,
            max_cold_activations: self.config.max_cold_activations,
            idle_scope_timeout_ms: self.config.idle_scope_timeout_ms,
            idle_reclamation: self.shared.reclaim,
        }
    }

    /// Admits an operation on `key`: finds or activates its worker, then
    /// waits for its turn, all within `deadline`.
    pub async fn enter(&self, key: &K, deadline: Deadline, access: Access) -> Result<Lease<K>> {
        deadline.check(Stage::Queueing)?;
        if let Some(one) = &self.one {
            return Ok(Lease {
                shared: None,
                key: None,
                worker: Arc::clone(one),
                turn: Turn::None,
            });
        }
        let until = tokio::time::Instant::from_std(deadline.instant());
        let (mut lease, permit) = if let Some(lease) = self.warm(key) {
            (lease, None)
        } else {
            let permit = Arc::clone(&self.cold)
                .try_acquire_owned()
                .map_err(|_| Error::Overloaded("too many scopes are activating"))?;
            (self.cold_lease(key)?, Some(permit))
        };
        if !lease.worker.activated.initialized() {
            // Concurrent first callers share one activation; if the caller
            // running it goes away, the next one retries.
            let state = &self.shared.state;
            let activation = lease
                .worker
                .activated
                .get_or_try_init(|| async { state.activate(key).await });
            tokio::time::timeout_at(until, activation)
                .await
                .map_err(|_| Error::Timeout(Stage::Queueing))??;
        }
        drop(permit);
        let order = Arc::clone(&lease.worker.order);
        match access {
            // Reads see the store's committed state and need no turn: a
            // read never waits for the scope's queued writes.
            Access::Read => {}
            Access::Write => {
                lease.turn = Turn::Write(
                    tokio::time::timeout_at(until, order.lock_owned())
                        .await
                        .map_err(|_| Error::Timeout(Stage::Queueing))?,
                );
            }
        }
        Ok(lease)
    }

    fn lease(&self, workers: &mut Workers<K>, key: &K, worker: &WorkerRef) -> Lease<K> {
        workers.lease(worker);
        Lease {
            shared: Some(Arc::clone(&self.shared)),
            key: Some(key.clone()),
            worker: Arc::clone(worker),
            turn: Turn::None,
        }
    }

    fn warm(&self, key: &K) -> Option<Lease<K>> {
        let mut map = self.shared.workers.lock();
        let w = map.by_key.get(key).cloned()?;
        Some(self.lease(&mut map, key, &w))
    }

    fn cold_lease(&self, key: &K) -> Result<Lease<K>> {
        let mut map = self.shared.workers.lock();
        if let Some(w) = map.by_key.get(key).cloned() {
            return Ok(self.lease(&mut map, key, &w));
        }
        let max = usize::try_from(self.config.max_active_scopes).unwrap_or(usize::MAX);
        if map.len() >= max && !self.shared.evict_lru(&mut map) {
            return Err(Error::MaxActiveScopesReached { max });
        }
        let worker = Worker::new(false);
        map.by_key.insert(key.clone(), Arc::clone(&worker));
        Ok(self.lease(&mut map, key, &worker))
    }
}

impl<K: Eq + Hash + Clone + Send + Sync + 'static> Shared<K> {
    /// At capacity: reclaims the least recently used worker that has no
    /// operation in flight, however briefly it has been idle; false if
    /// every worker is busy.
    fn evict_lru(&self, map: &mut Workers<K>) -> bool {
        if !self.reclaim {
            return false;
        }
        match map.pop_idle(None) {
            Some(k) => {
                self.evictions.fetch_add(1, Ordering::Relaxed);
                self.state.release(&k);
                true
            }
            None => false,
        }
    }

    /// Reclaims every worker idle for the idle timeout.
    fn sweep(&self) {
        let Some(before) = Instant::now().checked_sub(self.idle) else {
            return;
        };
        let mut map = self.workers.lock();
        while let Some(k) = map.pop_idle(Some(before)) {
            self.evictions.fetch_add(1, Ordering::Relaxed);
            self.state.release(&k);
        }
    }
}

async fn sweep<K: Eq + Hash + Clone + Send + Sync + 'static>(shared: Weak<Shared<K>>) {
    let period = match shared.upgrade() {
        Some(s) => (s.idle / 2).max(Duration::from_millis(5)),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        match shared.upgrade() {
            Some(s) => s.sweep(),
            None => return,
        }
    }
}
