//! Per-scope search state held in memory: the scope's entries and inverted
//! index ([`ScopeData`]), built from the scope's records on first use and
//! dropped when the scope is released.
//!
//! A commit never waits for a search. After each commit the committer
//! appends the committed changes ([`CacheOp`]s) to the pending list of
//! every cached scope they touch, and the next reader applies pending
//! changes before reading. A write is acknowledged only after its changes
//! are pending, so a caller always reads its own writes.
//!
//! A lone add is acknowledged before its text is analysed (see `writer`):
//! its change carries no terms, and whoever applies it (the next reader,
//! or the writer's eager apply once [`EAGER_APPLY_AT`] changes wait)
//! analyses the text then. The analysis so leaves a lone add's
//! acknowledged path but for that eager apply, and the cache pays for it
//! only on scopes that are loaded.
//!
//! Loading races with commits: a commit may land after the load's snapshot
//! but before the loaded data is published. The slot exists (with its
//! pending list) before the snapshot is taken, so every such commit is
//! pending, and replaying a change already in the snapshot is harmless:
//! every [`CacheOp`] is idempotent (insert-or-replace, remove, clear).
//!
//! The cache is bounded: each loaded scope is charged its entries' storage
//! bytes ([`ScopeData::bytes`]) plus a measured per-entry overhead, and
//! when a load takes the total over [`ScopeCache::max_bytes`] the least
//! recently used other scopes are released (a reader holding one keeps
//! its copy until it is done; the next use reloads it from disk).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hippocamp_core::{EntryId, Result};
use hippocamp_memory::MemoryEntry;
use hippocamp_memory::scope::ScopeData;
use hippocamp_search::{Analyzer, TermFreqs};
use parking_lot::Mutex;
use tokio::sync::{OnceCell, RwLock, RwLockReadGuard};

/// A committed change to one scope.
#[derive(Debug, Clone)]
pub(crate) enum CacheOp {
    Insert(Box<Inserted>),
    Remove(EntryId),
    Clear,
}

/// An entry written, as the cache is handed it.
#[derive(Debug, Clone)]
pub(crate) struct Inserted {
    pub(crate) entry: MemoryEntry,
    /// Its storage bytes.
    pub(crate) bytes: u64,
    /// Its text's terms; none for a lone add, analysed when applied.
    pub(crate) terms: Option<TermFreqs>,
    pub(crate) vector: Option<Vec<f32>>,
}

impl CacheOp {
    fn apply(self, data: &mut ScopeData, analyzer: &Analyzer) {
        match self {
            CacheOp::Insert(b) => {
                let Inserted {
                    entry,
                    bytes,
                    terms,
                    vector,
                } = *b;
                let id = entry.id;
                let terms = terms.unwrap_or_else(|| analyzer.analyze(&entry.content));
                data.insert(entry, bytes, &terms);
                if let Some(v) = vector {
                    data.insert_vector(id, &v);
                }
            }
            CacheOp::Remove(id) => {
                data.remove(&id);
            }
            CacheOp::Clear => {
                data.clear();
            }
        }
    }
}

/// What a cached entry costs in memory beyond its storage bytes: its
/// postings, its places in the scope's maps and sets, its shared handle.
/// Measured with `hippocamp bench footprint` (~1,500 bytes of resident
/// memory per entry of ~530 storage bytes), so the bound approximates
/// resident memory rather than stored bytes.
const ENTRY_STATE_BYTES: u64 = 1_000;

/// What a loaded scope is charged against the bound.
fn charge(data: &ScopeData) -> u64 {
    data.bytes() + data.len() * ENTRY_STATE_BYTES
}

/// Pending changes are applied eagerly by the writer (without waiting)
/// once this many have piled up on an idle scope.
const EAGER_APPLY_AT: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct Slot {
    data: OnceCell<RwLock<ScopeData>>,
    pending: Mutex<Vec<CacheOp>>,
    /// Loads in progress. Changes are kept for a slot only while it is
    /// loaded or loading; a later load's snapshot includes them anyway.
    loaders: AtomicUsize,
    /// What the loaded copy is charged against the cache's bound, as of
    /// its last load or applied change.
    charged: AtomicU64,
    /// When it was last used (the cache's clock), for eviction.
    used: AtomicU64,
}

/// Counts a load in progress for as long as it lives, even if the load's
/// future is dropped.
struct Loading<'a>(&'a AtomicUsize);

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slot {
    /// Applies the pending changes to the loaded copy and charges it anew.
    fn apply_pending(&self, data: &mut ScopeData, analyzer: &Analyzer) {
        let ops = std::mem::take(&mut *self.pending.lock());
        for op in ops {
            op.apply(data, analyzer);
        }
        self.charged.store(charge(data), Ordering::Relaxed);
    }
}

/// The cached scopes.
#[derive(Debug)]
pub(crate) struct ScopeCache {
    slots: Mutex<HashMap<[u8; 16], Arc<Slot>>>,
    /// Most bytes charged to loaded scopes before older ones are released.
    max_bytes: u64,
    /// Ticks on every use: the clock of `Slot::used`.
    clock: AtomicU64,
    /// Analyses the changes that came without terms, whoever applies them.
    analyzer: Arc<Analyzer>,
}

impl ScopeCache {
    /// A cache that keeps at most about `max_bytes` of scopes (a scope
    /// larger than the bound is still loaded, alone), analysing the
    /// changes it applies itself with `analyzer`.
    pub(crate) fn new(max_bytes: u64, analyzer: Arc<Analyzer>) -> Self {
        Self {
            slots: Mutex::default(),
            max_bytes,
            clock: AtomicU64::new(0),
            analyzer,
        }
    }

    /// The bound.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Bytes charged to the loaded scopes.
    pub(crate) fn charged_bytes(&self) -> u64 {
        self.slots
            .lock()
            .values()
            .map(|s| s.charged.load(Ordering::Relaxed))
            .sum()
    }

    /// Releases the least recently used scopes other than `keep` until the
    /// charged total is within the bound.
    fn evict(&self, keep: &[u8; 16]) {
        let mut slots = self.slots.lock();
        let mut total: u64 = slots
            .values()
            .map(|s| s.charged.load(Ordering::Relaxed))
            .sum();
        if total <= self.max_bytes {
            return;
        }
        let mut order: Vec<([u8; 16], u64, u64)> = slots
            .iter()
            .filter(|(k, s)| *k != keep && s.data.initialized())
            .map(|(k, s)| {
                (
                    *k,
                    s.used.load(Ordering::Relaxed),
                    s.charged.load(Ordering::Relaxed),
                )
            })
            .collect();
        order.sort_unstable_by_key(|&(_, used, _)| used);
        for (key, _, charged) in order {
            if total <= self.max_bytes {
                break;
            }
            slots.remove(&key);
            total = total.saturating_sub(charged);
        }
    }

    /// `slot`'s scope, its pending changes applied first (analysed with
    /// the cache's analyzer where they came without terms).
    pub(crate) async fn read<'s>(&self, slot: &'s Slot) -> Option<RwLockReadGuard<'s, ScopeData>> {
        let data = slot.data.get()?;
        if !slot.pending.lock().is_empty() {
            slot.apply_pending(&mut *data.write().await, &self.analyzer);
        }
        Some(data.read().await)
    }

    /// The scope's slot, loading it with `load` on first use. Concurrent
    /// callers share one load; a cancelled load is retried by the next.
    pub(crate) async fn get_or_load<F, Fut>(&self, key: [u8; 16], load: F) -> Result<Arc<Slot>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<ScopeData>>,
    {
        let slot = Arc::clone(self.slots.lock().entry(key).or_default());
        slot.used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        if !slot.data.initialized() {
            // Counted before the load takes its snapshot, so every commit
            // after the snapshot finds a loader and keeps its changes.
            slot.loaders.fetch_add(1, Ordering::SeqCst);
            let _loading = Loading(&slot.loaders);
            slot.data
                .get_or_try_init(|| async {
                    let data = load().await?;
                    slot.charged.store(charge(&data), Ordering::Relaxed);
                    Ok::<_, hippocamp_core::Error>(RwLock::new(data))
                })
                .await?;
            self.evict(&key);
        }
        Ok(slot)
    }

    /// Whether the scope is cached (loaded or loading).
    pub(crate) fn contains(&self, key: &[u8; 16]) -> bool {
        self.slots.lock().contains_key(key)
    }

    /// Drops a scope's cached state; the next use reloads it.
    pub(crate) fn release(&self, key: &[u8; 16]) -> bool {
        self.slots.lock().remove(key).is_some()
    }

    /// Records committed changes for the scopes that are cached.
    pub(crate) fn push(&self, changes: Vec<([u8; 16], CacheOp)>) {
        let slots = self.slots.lock();
        let mut touched: Vec<Arc<Slot>> = Vec::new();
        for (key, op) in changes {
            if let Some(slot) = slots.get(&key) {
                let mut pending = slot.pending.lock();
                if !slot.data.initialized() && slot.loaders.load(Ordering::SeqCst) == 0 {
                    // Neither loaded nor loading: the next load reads the
                    // committed state, so nothing needs to be kept.
                    pending.clear();
                    continue;
                }
                pending.push(op);
                drop(pending);
                if !touched.iter().any(|s| Arc::ptr_eq(s, slot)) {
                    touched.push(Arc::clone(slot));
                }
            }
        }
        drop(slots);
        // Keep pending lists short on scopes nobody is reading, without ever
        // waiting for a reader.
        for slot in touched {
            if slot.pending.lock().len() >= EAGER_APPLY_AT
                && let Some(data) = slot.data.get()
                && let Ok(mut w) = data.try_write()
            {
                slot.apply_pending(&mut w, &self.analyzer);
            }
        }
    }

    /// Changes waiting for the scope `key`, if it is cached.
    pub(crate) fn pending_len(&self, key: &[u8; 16]) -> Option<usize> {
        self.slots.lock().get(key).map(|s| s.pending.lock().len())
    }

    /// Number of cached scopes.
    pub(crate) fn len(&self) -> usize {
        self.slots.lock().len()
    }
}
