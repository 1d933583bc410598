//! System benchmarks run by `hippocamp bench …` (release builds).
//!
//! Each benchmark measures its floor in the same run, next to the figure,
//! because the machine is shared and noisy: a ratio to a floor measured
//! minutes apart means little.
//!
//! - [`durable_write`]: one acknowledged `add_entry` on the durable store,
//!   interleaved with a raw write + fsync of the same bytes.
//! - [`durable_ingest`]: `add_events` batches of 1,000 ~200-byte turns,
//!   next to the same entries written through the store's own log and
//!   tables with no checks ([`hippocamp_memory_redb::floor`]), and the
//!   in-memory store's CPU time per event.
//! - [`router`]: 64 scopes, 90% search / 10% `add_entry`, on a runtime with
//!   1 and then 2 worker threads.
//! - [`open`]: opening a durable store that holds many entries.
//! - [`artifacts`]: artifact put/get against their floors, listing pages.
//! - [`outbox`]: durable admission, delivery throughput and claim cost of
//!   the ingestion outbox.
//! - [`preload`]: memory preload next to the plain search it wraps.
//! - [`mcp`]: an MCP `memory_search` round trip next to the API's.
//! - [`rerank`]: the reranking stage's latency for one search's candidates.
//! - [`footprint`]: resident memory per entry, and with many active scopes.
//! - [`http`]: the HTTP layer under load next to a bare route, server and
//!   load generator on different cores.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod artifacts;
pub mod consolidation;
pub mod embed;
pub mod export;
pub mod footprint;
pub mod http;
pub mod mcp;
pub mod outbox;
pub mod policy;
pub mod postgres;
pub mod preload;
pub mod rerank;

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hippocamp_core::{CallOptions, MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_memory_redb::{RedbMemoryStore, WalStorage as _};
use hippocamp_routed::RoutedMemory;
use hippocamp_router::RouterConfig;
use serde::Serialize;

/// A benchmark failed to run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] hippocamp_core::Error),
    /// The data could not be read.
    #[error(transparent)]
    Dataset(#[from] hippocamp_datasets::DatasetError),
    /// Raw I/O for a floor failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The benchmark could not run as planned.
    #[error("{0}")]
    Failed(String),
    /// The shared data folder is missing.
    #[error("the evaluation data folder is missing (set HIPPOCAMP_DATA_DIR)")]
    NoData,
}

pub(crate) type Result<T> = std::result::Result<T, BenchError>;

/// A benchmark that could not run as planned, with why.
pub(crate) fn failed(e: impl std::fmt::Display) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// Percentiles of a latency sample, microseconds.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

pub(crate) fn latency(mut us: Vec<f64>) -> Latency {
    us.sort_by(f64::total_cmp);
    Latency {
        p50_us: percentile(&us, 50.0),
        p90_us: percentile(&us, 90.0),
        p99_us: percentile(&us, 99.0),
    }
}

/// The `p`-th percentile (nearest rank) of `sorted`; 0 when it is empty.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[i.min(sorted.len()) - 1]
}

/// Fills `scope` of `store` with `n` LoCoMo turns (one event each, one
/// session) and returns the LoCoMo questions to search it with: the
/// scope the latency benchmarks share.
pub(crate) async fn locomo_scope(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    n: usize,
) -> Result<Vec<String>> {
    let dir = hippocamp_datasets::data_dir().ok_or(BenchError::NoData)?;
    let texts = hippocamp_datasets::corpus::texts(&dir, n)?;
    let session = SessionId::new("s")?;
    let events = turn_events(&texts);
    for chunk in events.chunks(500) {
        store
            .add_events(scope, &session, chunk, &WriteOptions::default())
            .await?;
    }
    Ok(hippocamp_datasets::corpus::queries(&dir)?)
}

/// One user event per text, ids `e0`, `e1`…, timestamps their positions.
pub(crate) fn turn_events(texts: &[String]) -> Vec<Event> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Event::text(
                format!("e{i}"),
                "user",
                i64::try_from(i).unwrap_or(0),
                t.clone(),
            )
        })
        .collect()
}

/// ~200-byte conversation turns from the evaluation data.
pub fn turns(n: usize) -> Result<Vec<String>> {
    let dir = hippocamp_datasets::data_dir().ok_or(BenchError::NoData)?;
    Ok(hippocamp_datasets::corpus::texts(&dir, n)?
        .into_iter()
        .map(|t| {
            let mut t = format!("{t} {t} {t}");
            let mut cut = 200.min(t.len());
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            t.truncate(cut);
            t
        })
        .collect())
}

fn big_config() -> MemoryConfig {
    let mut c = MemoryConfig::default();
    c.limits.max_entries_per_scope = 10_000_000;
    c.limits.max_bytes_per_scope = 10_737_418_240;
    c
}

/// `durable_write` results.
#[derive(Debug, Clone, Serialize)]
pub struct DurableWrite {
    /// Samples of each.
    pub samples: usize,
    /// Bytes written by each raw sample.
    pub raw_bytes: usize,
    /// One acknowledged `add_entry`.
    pub add_entry: Latency,
    /// Append the same bytes to a file and `fdatasync` (the floor).
    pub raw_write_fsync: Latency,
    /// Overwrite the same bytes in pre-written space and `fdatasync` (the
    /// technique the store's log uses; a lower floor than an append).
    pub raw_overwrite_fsync: Latency,
    /// Bytes the store's log took for a scope's second add (its record
    /// with the record header): what the log floor writes each time.
    pub log_record_bytes: usize,
    /// The log floor: a record of `log_record_bytes` appended through the
    /// store's own log ([`hippocamp_memory_redb::FileWal`], in a file of
    /// its own: pre-written space, grown in the same steps as the store's
    /// log) and synced, with nothing else. The raw overwrite floor's file
    /// is sized by the sample count instead, and on this machine's disk
    /// the cost of an `fdatasync` depends on the file (a standalone probe:
    /// ~86 µs for a 421-byte overwrite in a 0.84 MB file, ~100 µs in files
    /// of 2.2 MB or more): `hippocamp bench durable-write --samples 5000`
    /// puts the ratio to the overwrite floor at 0.99-1.06, so figures are
    /// taken with `hippocamp bench durable-write --samples 2000`
    /// (docs/PERFORMANCE.md, Methods).
    pub log_fsync: Latency,
    /// `add_entry` p50 / append floor p50.
    pub ratio_p50: f64,
    /// `add_entry` p50 / overwrite floor p50.
    pub ratio_p50_to_overwrite: f64,
    /// `add_entry` p50 / log floor p50.
    pub ratio_p50_to_log: f64,
}

/// A file of `len` written zeros, synced: space to overwrite, written as
/// the store's log writes its own (`hippocamp_durable::fs::write_zeros`).
fn prewritten(path: &Path, len: usize) -> Result<std::fs::File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    hippocamp_durable::fs::write_zeros(&file, 0, len as u64)?;
    file.sync_all()?;
    Ok(file)
}

/// Single acknowledged writes against raw write + fsync, interleaved.
pub async fn durable_write(dir: &Path, samples: usize) -> Result<DurableWrite> {
    let texts = turns(samples)?;
    let store = RedbMemoryStore::open(dir.join("store"), big_config())?;
    let scope = MemoryScope::parse("bench", "writer")?;
    let raw_path = dir.join("raw.bin");
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&raw_path)?;
    let probe = store
        .add_entry(
            &scope,
            NewEntry::new(texts[0].clone()),
            &WriteOptions::default(),
        )
        .await?;
    // The raw floor writes as many bytes as the entry carries.
    let bytes = serde_json::to_vec(&probe.entry).map_err(|e| BenchError::Failed(e.to_string()))?;
    // The log floor, as many as the store logged for a second add (the
    // first one of a scope also indexes its user; nothing is checkpointed
    // yet, so the log holds both records).
    let logged = || -> Result<usize> {
        let path = dir.join("store").join(hippocamp_memory_redb::WAL_FILE);
        Ok(hippocamp_memory_redb::FileWal::open(&path)?
            .read_all()?
            .len())
    };
    let first = logged()?;
    store
        .add_entry(
            &scope,
            NewEntry::new(texts[0].clone()),
            &WriteOptions::default(),
        )
        .await?;
    let log_record_bytes = logged()? - first;
    let log_record = vec![0x5au8; log_record_bytes];
    let mut log = hippocamp_memory_redb::FileWal::open(&dir.join("floor.wal"))?;
    // Appends begin after a truncate (what the store does once it replayed).
    log.truncate()?;
    // Room for every sample's bytes at its own offset.
    let space = bytes.len() * (samples + 1);
    let pre = prewritten(&dir.join("pre.bin"), space)?;
    let (mut store_us, mut raw_us, mut over_us, mut log_us) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, t) in texts.iter().take(samples).enumerate() {
        // The four in a rotated order: none always follows the same one
        // (a sync right after the append floor's size-changing sync, say).
        for k in 0..4 {
            let started = Instant::now();
            let at = (i * bytes.len()) as u64;
            let times = match (i + k) % 4 {
                0 => {
                    raw.write_all(&bytes)?;
                    raw.sync_data()?;
                    &mut raw_us
                }
                1 => {
                    pre.write_all_at(&bytes, at)?;
                    pre.sync_data()?;
                    &mut over_us
                }
                2 => {
                    log.append(&log_record)?;
                    log.sync()?;
                    &mut log_us
                }
                _ => {
                    store
                        .add_entry(&scope, NewEntry::new(t.clone()), &WriteOptions::default())
                        .await?;
                    &mut store_us
                }
            };
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    let add_entry = latency(store_us);
    let raw_write_fsync = latency(raw_us);
    let raw_overwrite_fsync = latency(over_us);
    let log_fsync = latency(log_us);
    Ok(DurableWrite {
        samples,
        raw_bytes: bytes.len(),
        ratio_p50: add_entry.p50_us / raw_write_fsync.p50_us,
        ratio_p50_to_overwrite: add_entry.p50_us / raw_overwrite_fsync.p50_us,
        ratio_p50_to_log: add_entry.p50_us / log_fsync.p50_us,
        log_record_bytes,
        log_fsync,
        add_entry,
        raw_write_fsync,
        raw_overwrite_fsync,
    })
}

/// `durable_ingest` results.
#[derive(Debug, Clone, Serialize)]
pub struct DurableIngest {
    /// Batches of each.
    pub batches: usize,
    /// Events per batch.
    pub batch_size: usize,
    /// Mean event size in bytes.
    pub event_bytes: usize,
    /// In-memory store, one caller on a one-thread runtime: CPU time of
    /// that thread per event (validation, analysis, index).
    pub memory_cpu_us_per_event: f64,
    /// In-memory store: events per second of wall time.
    pub memory_events_per_s: f64,
    /// Durable store: acknowledged `add_events` events per second.
    pub add_events_per_s: f64,
    /// The floor, interleaved batch by batch: the same entries, validated
    /// and analysed before the timer, written as the store writes them
    /// (the same records with their postings, log record, `fdatasync`,
    /// tables and checkpoints) with no checks, lookups or index.
    pub floor_events_per_s: f64,
    /// `add_events` / floor.
    pub ratio: f64,
    /// Durable store: events per second until the database held them all
    /// (acknowledged time plus the wait, at the end, for the applier's
    /// bounded backlog).
    pub add_events_applied_per_s: f64,
    /// The floor's, likewise.
    pub floor_applied_per_s: f64,
}

/// CPU seconds a clock has counted (`clock_gettime`, nanosecond
/// resolution).
fn cpu_clock_seconds(clock: rustix::time::ClockId) -> f64 {
    let t = rustix::time::clock_gettime(clock);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// CPU seconds this thread has used.
fn thread_cpu_seconds() -> f64 {
    cpu_clock_seconds(rustix::time::ClockId::ThreadCPUTime)
}

/// CPU seconds this process has used (user + system, every thread).
pub(crate) fn cpu_seconds() -> f64 {
    cpu_clock_seconds(rustix::time::ClockId::ProcessCPUTime)
}

/// Batches of `durable_ingest`.
type Batches = Vec<(MemoryScope, Vec<Event>)>;

/// Events per `durable_ingest` batch.
const INGEST_BATCH: usize = 1_000;

/// Runs `f` on a thread of its own, as one task of a one-thread runtime:
/// one caller on one runtime thread.
fn on_own_runtime<R: Send>(name: &str, f: impl AsyncFnOnce() -> Result<R> + Send) -> Result<R> {
    std::thread::scope(|t| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(t, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(f())
            })?
            .join()
            .map_err(|_| BenchError::Failed(format!("{name} panicked")))?
    })
}

/// Batched ingestion: the in-memory store's CPU cost per event, and the
/// durable store's acknowledged rate next to its like-for-like floor.
pub fn durable_ingest(dir: &Path, batches: usize) -> Result<DurableIngest> {
    let texts = turns(INGEST_BATCH)?;
    let event_bytes = texts.iter().map(String::len).sum::<usize>() / texts.len().max(1);
    let session = SessionId::new("bench")?;
    let all: Batches = (0..batches)
        .map(|b| {
            let events = texts
                .iter()
                .enumerate()
                .map(|(i, t)| Event::text(format!("b{b}e{i}"), "user", 1, t.clone()))
                .collect();
            Ok((
                MemoryScope::parse("bench", &format!("ingest{}", b % 8))?,
                events,
            ))
        })
        .collect::<Result<_>>()?;
    // The thread's CPU time is the in-memory store's work and nothing
    // else's.
    let (memory_cpu, memory_wall) = on_own_runtime("ingest-memory", async || {
        let store = hippocamp_memory::InMemoryStore::new(big_config())?;
        let (cpu, wall) = (thread_cpu_seconds(), Instant::now());
        for (scope, events) in &all {
            let report = store
                .add_events(scope, &session, events, &WriteOptions::default())
                .await?;
            debug_assert_eq!(report.added.len(), INGEST_BATCH);
        }
        Ok((thread_cpu_seconds() - cpu, wall.elapsed().as_secs_f64()))
    })?;
    // The durable store's caller too (the store itself prepares a large
    // batch on two threads and applies its writes on another). Each run
    // goes back to back and is then waited for until the database holds
    // it all: writes are applied behind acknowledgements, so interleaving
    // the two would let each one's applier catch up during the other's
    // turn.
    let (store_secs, store_settle) = on_own_runtime("ingest-durable", async || {
        ingest_durable(dir, &all, &session).await
    })?;
    let (floor_secs, floor_settle) = ingest_floor(dir, &all, &session)?;
    let n = (batches * INGEST_BATCH) as f64;
    let add_events_per_s = n / store_secs;
    let floor_events_per_s = n / floor_secs;
    Ok(DurableIngest {
        batches,
        batch_size: INGEST_BATCH,
        event_bytes,
        memory_cpu_us_per_event: memory_cpu * 1e6 / n,
        memory_events_per_s: n / memory_wall,
        add_events_per_s,
        floor_events_per_s,
        ratio: add_events_per_s / floor_events_per_s,
        add_events_applied_per_s: n / (store_secs + store_settle),
        floor_applied_per_s: n / (floor_secs + floor_settle),
    })
}

/// `add_events` of every batch on a fresh durable store: seconds until the
/// last was acknowledged, then until the database held them all (waited
/// for as a read waits).
async fn ingest_durable(dir: &Path, all: &Batches, session: &SessionId) -> Result<(f64, f64)> {
    let store = RedbMemoryStore::open(dir.join("store"), big_config())?;
    let started = Instant::now();
    for (scope, events) in all {
        let report = store
            .add_events(scope, session, events, &WriteOptions::default())
            .await?;
        debug_assert_eq!(report.added.len(), INGEST_BATCH);
    }
    let acked = started.elapsed().as_secs_f64();
    if let Some((scope, _)) = all.first() {
        store.erasure_epoch(scope, &CallOptions::default()).await?;
    }
    Ok((acked, started.elapsed().as_secs_f64() - acked))
}

/// The same entries, validated and analysed before the timer, through the
/// floor: seconds until the last was logged, then until all were applied.
fn ingest_floor(dir: &Path, all: &Batches, session: &SessionId) -> Result<(f64, f64)> {
    let analyzer = hippocamp_search::Analyzer::english();
    let limits = big_config().limits;
    let mut prepared = Vec::with_capacity(all.len());
    for (scope, events) in all {
        let plan = hippocamp_memory::event::plan_events(scope, session, events, &limits)?;
        let entries: Vec<_> = plan
            .entries
            .into_iter()
            .map(|p| {
                let terms = analyzer.analyze(&p.prepared.entry.content);
                (p.prepared.entry, p.prepared.storage_bytes, terms)
            })
            .collect();
        prepared.push((scope.clone(), entries));
    }
    let mut floor = hippocamp_memory_redb::floor::IngestFloor::open(&dir.join("floor"))?;
    let started = Instant::now();
    for (scope, entries) in prepared {
        floor.write(&scope, entries)?;
    }
    let logged = started.elapsed().as_secs_f64();
    floor.settle()?;
    Ok((logged, started.elapsed().as_secs_f64() - logged))
}

/// A size line of `/proc/self/status` (`VmRSS:`, `VmHWM:`…), bytes.
pub(crate) fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(status_field_kib(&status, field)? * 1024)
}

/// A size line of a `/proc/<pid>/status` text, KiB.
pub(crate) fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One `router` run.
#[derive(Debug, Clone, Serialize)]
pub struct RouterRun {
    /// Runtime worker threads.
    pub threads: usize,
    /// CPUs the process was confined to (`None`: not confined).
    pub pinned_cpus: Option<usize>,
    /// Operations per second.
    pub ops_per_s: f64,
    /// Cores busy on average (process CPU time / wall time).
    pub cores_used: f64,
    /// Search latency (client side, under load).
    pub search: Latency,
    /// `add_entry` latency (client side, under load).
    pub add_entry: Latency,
    /// Searches done.
    pub searches: u64,
    /// Adds done.
    pub adds: u64,
}

/// `router` results.
#[derive(Debug, Clone, Serialize)]
pub struct RouterBench {
    /// What ran.
    pub workload: RouterWorkload,
    /// Scopes.
    pub scopes: usize,
    /// Every run, round by round: 1 thread on 1 CPU, 1 thread
    /// unconfined, 2 threads on 2 CPUs.
    pub runs: Vec<RouterRun>,
    /// Median operations per second of the three configurations, in that
    /// order.
    pub median_ops_per_s: [f64; 3],
    /// 2 threads on 2 CPUs / 1 thread on 1 CPU (medians): how the
    /// workload scales with cores.
    pub speedup: f64,
    /// 2 threads / 1 unconfined thread, medians (the store's commits and the
    /// kernel's fsync work may use the second core even then).
    pub speedup_unconfined: f64,
}

/// Runs `f` on a fresh thread confined to the first `cpus` CPUs this
/// process may use (threads it starts inherit the confinement).
fn on_cpus<R: Send>(cpus: Option<usize>, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if let Some(n) = cpus {
                    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
                    use nix::unistd::Pid;
                    let allowed = sched_getaffinity(Pid::from_raw(0))
                        .map_err(|e| BenchError::Failed(e.to_string()))?;
                    let mut set = CpuSet::new();
                    let mut taken = 0;
                    for cpu in 0..CpuSet::count() {
                        if taken < n && allowed.is_set(cpu).unwrap_or(false) {
                            set.set(cpu)
                                .map_err(|e| BenchError::Failed(e.to_string()))?;
                            taken += 1;
                        }
                    }
                    sched_setaffinity(Pid::from_raw(0), &set)
                        .map_err(|e| BenchError::Failed(e.to_string()))?;
                }
                f()
            })
            .join()
            .map_err(|_| BenchError::Failed("benchmark thread panicked".into()))?
    })
}

const ROUTER_SCOPES: usize = 64;

/// The router workload.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RouterWorkload {
    /// Seconds per run.
    pub seconds: f64,
    /// Entries per scope before the run.
    pub entries_per_scope: usize,
    /// Concurrent clients (closed loop).
    pub clients: usize,
    /// Share of `add_entry`, percent (the rest are searches).
    pub write_percent: usize,
    /// The durable store (else the in-memory one) behind the router.
    pub durable: bool,
    /// Rounds of the three configurations.
    pub rounds: usize,
}

impl Default for RouterWorkload {
    fn default() -> Self {
        Self {
            seconds: 10.0,
            entries_per_scope: 1_000,
            clients: 64,
            write_percent: 10,
            durable: true,
            rounds: 3,
        }
    }
}

fn bench_scope(i: usize) -> Result<MemoryScope> {
    Ok(MemoryScope::parse("bench", &format!("scope{i}"))?)
}

fn fill_events(texts: &[String], s: usize, per_scope: usize) -> Vec<Event> {
    texts[s * per_scope..(s + 1) * per_scope]
        .iter()
        .enumerate()
        .map(|(i, t)| Event::text(format!("f{i}"), "user", 1, t.clone()))
        .collect()
}

async fn fill(store: &dyn MemoryStore, texts: &[String], per_scope: usize) -> Result<()> {
    let session = SessionId::new("fill")?;
    for s in 0..ROUTER_SCOPES {
        let events = fill_events(texts, s, per_scope);
        store
            .add_events(
                &bench_scope(s)?,
                &session,
                &events,
                &WriteOptions::default(),
            )
            .await?;
    }
    Ok(())
}

/// Shared state of one run's clients.
struct Clients {
    routed: Arc<RoutedMemory>,
    stop: Instant,
    write_percent: usize,
    queries: Arc<Vec<String>>,
    texts: Arc<Vec<String>>,
    /// Search and add latencies, microseconds.
    latencies: parking_lot::Mutex<(Vec<f64>, Vec<f64>)>,
}

/// One client: a fixed share of its operations add, the others search.
async fn router_client(clients: Arc<Clients>, start: usize) -> Result<()> {
    let c = &*clients;
    let mut i = start;
    let (mut searches, mut adds): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    while Instant::now() < c.stop {
        i += 1;
        let scope = bench_scope(i % ROUTER_SCOPES)?;
        let t = Instant::now();
        // 37 is coprime with 100, so writes are spread evenly.
        if (i * 37) % 100 < c.write_percent {
            let entry = NewEntry::new(c.texts[i % c.texts.len()].clone());
            c.routed
                .add_entry(&scope, entry, &WriteOptions::default())
                .await?;
            adds.push(t.elapsed().as_secs_f64() * 1e6);
        } else {
            let req = SearchRequest::new(c.queries[i % c.queries.len()].clone()).limit(10);
            c.routed
                .search(&scope, &req, &CallOptions::default())
                .await?;
            searches.push(t.elapsed().as_secs_f64() * 1e6);
        }
        // A request boundary: a server task would wait for its next request
        // here, letting other ready tasks (woken writers among them) run.
        tokio::task::yield_now().await;
    }
    let mut l = c.latencies.lock();
    l.0.extend(searches);
    l.1.extend(adds);
    Ok(())
}

/// One run of the router workload on a runtime with `threads` workers.
fn router_run(
    store_dir: &Path,
    w: RouterWorkload,
    threads: usize,
    pinned_cpus: Option<usize>,
    queries: &Arc<Vec<String>>,
    texts: &Arc<Vec<String>>,
) -> Result<RouterRun> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let inner: Arc<dyn MemoryStore> = if w.durable {
            Arc::new(RedbMemoryStore::open(store_dir, big_config())?)
        } else {
            let store = Arc::new(hippocamp_memory::InMemoryStore::new(big_config())?);
            fill(&*store, texts, w.entries_per_scope).await?;
            store
        };
        let routed = Arc::new(RoutedMemory::new(inner, RouterConfig::default())?);
        // Warm every scope's search state first.
        for s in 0..ROUTER_SCOPES {
            routed
                .search(
                    &bench_scope(s)?,
                    &SearchRequest::new("warm"),
                    &CallOptions::default(),
                )
                .await?;
        }
        let clients = Arc::new(Clients {
            routed,
            stop: Instant::now() + Duration::from_secs_f64(w.seconds),
            write_percent: w.write_percent,
            queries: queries.clone(),
            texts: texts.clone(),
            latencies: parking_lot::Mutex::new((Vec::new(), Vec::new())),
        });
        let started = Instant::now();
        let cpu_before = cpu_seconds();
        let tasks: Vec<_> = (0..w.clients)
            .map(|c| tokio::spawn(router_client(clients.clone(), c * 7_919)))
            .collect();
        for t in tasks {
            t.await.map_err(|e| BenchError::Failed(e.to_string()))??;
        }
        let secs = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu_before;
        let (searches, adds) = std::mem::take(&mut *clients.latencies.lock());
        Ok(RouterRun {
            threads,
            pinned_cpus,
            ops_per_s: (searches.len() + adds.len()) as f64 / secs,
            cores_used: cpu / secs,
            searches: searches.len() as u64,
            adds: adds.len() as u64,
            search: latency(searches),
            add_entry: latency(adds),
        })
    })
}

/// 64 scopes, by default 90% search / 10% `add_entry`, through the
/// exact-scope router over the durable (or in-memory) store, in three
/// configurations: 1 runtime worker thread confined to 1 CPU, 1
/// unconfined, then 2 on 2 CPUs. Every run starts from an identically
/// filled store of its own (runs that shared one would each search the
/// entries the earlier ones added), and the configurations take turns for
/// `rounds` rounds, so a drift of the machine's speed affects them alike;
/// the speed-ups compare medians.
pub fn router(dir: &Path, w: RouterWorkload) -> Result<RouterBench> {
    let w = RouterWorkload {
        entries_per_scope: w.entries_per_scope.max(1),
        write_percent: w.write_percent.min(100),
        rounds: w.rounds.max(1),
        ..w
    };
    let texts = Arc::new(turns(ROUTER_SCOPES * w.entries_per_scope)?);
    let queries = {
        let d = hippocamp_datasets::data_dir().ok_or(BenchError::NoData)?;
        Arc::new(hippocamp_datasets::corpus::queries(&d)?)
    };
    let store_dir = dir.join("store");
    let fresh_store = || -> Result<()> {
        if store_dir.exists() {
            std::fs::remove_dir_all(&store_dir)?;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(async {
            let store = RedbMemoryStore::open(&store_dir, big_config())?;
            // Dropping the store checkpoints it and releases its lock.
            fill(&store, &texts, w.entries_per_scope).await
        })
    };
    let configs = [(1, Some(1)), (1, None), (2, Some(2))];
    let mut runs = Vec::new();
    for _ in 0..w.rounds {
        for (threads, cpus) in configs {
            if w.durable {
                fresh_store()?;
            }
            runs.push(on_cpus(cpus, || {
                router_run(&store_dir, w, threads, cpus, &queries, &texts)
            })?);
        }
    }
    // The nearest-rank median (the middle run for an odd count).
    let median_of = |threads: usize, cpus: Option<usize>| {
        let v: Vec<f64> = runs
            .iter()
            .filter(|r| r.threads == threads && r.pinned_cpus == cpus)
            .map(|r| r.ops_per_s)
            .collect();
        latency(v).p50_us
    };
    let (one_pinned, one, two) = (
        median_of(1, Some(1)),
        median_of(1, None),
        median_of(2, Some(2)),
    );
    Ok(RouterBench {
        workload: w,
        scopes: ROUTER_SCOPES,
        median_ops_per_s: [one_pinned, one, two],
        speedup: two / one_pinned,
        speedup_unconfined: two / one,
        runs,
    })
}

/// `open` results.
#[derive(Debug, Clone, Serialize)]
pub struct OpenBench {
    /// Entries in the store.
    pub entries: u64,
    /// Scopes in the store.
    pub scopes: u64,
    /// Database file size in bytes.
    pub file_bytes: u64,
    /// Seconds to build it.
    pub build_seconds: f64,
    /// Milliseconds to open it (clean shutdown before), median of 5.
    pub open_ms: f64,
    /// Milliseconds for the first search of a cold scope after opening.
    pub first_search_ms: f64,
}

/// Builds (or reuses) a store of `scopes × per_scope` entries in `dir` and
/// times opening it.
pub async fn open(dir: &Path, scopes: usize, per_scope: usize) -> Result<OpenBench> {
    let store_dir: PathBuf = dir.join("store");
    let texts = turns(per_scope.max(1) * 4)?;
    let mut build_seconds = 0.0;
    {
        let store = RedbMemoryStore::open(&store_dir, big_config())?;
        let have = store.status().await?.entries;
        let want = (scopes * per_scope) as u64;
        if have < want {
            let bar = indicatif::ProgressBar::new(scopes as u64);
            let started = Instant::now();
            let session = SessionId::new("fill")?;
            let mut tasks = Vec::new();
            let store = Arc::new(store);
            for s in 0..scopes {
                let scope = MemoryScope::parse("bench", &format!("scope{s}"))?;
                let events: Vec<Event> = (0..per_scope)
                    .map(|i| {
                        Event::text(
                            format!("e{i}"),
                            "user",
                            1,
                            texts[(s + i) % texts.len()].clone(),
                        )
                    })
                    .collect();
                let (store, session) = (store.clone(), session.clone());
                tasks.push(tokio::spawn(async move {
                    store
                        .add_events(&scope, &session, &events, &WriteOptions::default())
                        .await
                        .map(drop)
                }));
                // A few batches in flight keep the writer busy.
                if tasks.len() >= 16 {
                    for t in tasks.drain(..) {
                        t.await.map_err(|e| BenchError::Failed(e.to_string()))??;
                    }
                    bar.inc(16);
                }
            }
            for t in tasks {
                t.await.map_err(|e| BenchError::Failed(e.to_string()))??;
            }
            bar.finish_and_clear();
            build_seconds = started.elapsed().as_secs_f64();
        }
    }
    let mut opens = Vec::new();
    let mut first_search_ms = 0.0;
    let mut entries = 0;
    let mut n_scopes = 0;
    for round in 0..5 {
        let started = Instant::now();
        let store = RedbMemoryStore::open(&store_dir, big_config())?;
        opens.push(started.elapsed().as_secs_f64() * 1e3);
        let status = store.status().await?;
        entries = status.entries;
        n_scopes = status.scopes;
        if round == 0 {
            let scope = MemoryScope::parse("bench", "scope7")?;
            let started = Instant::now();
            store
                .search(
                    &scope,
                    &SearchRequest::new("what did they talk about"),
                    &CallOptions::default(),
                )
                .await?;
            first_search_ms = started.elapsed().as_secs_f64() * 1e3;
        }
    }
    opens.sort_by(f64::total_cmp);
    let file_bytes = std::fs::metadata(store_dir.join(hippocamp_memory_redb::DB_FILE))?.len();
    Ok(OpenBench {
        entries,
        scopes: n_scopes,
        file_bytes,
        build_seconds,
        open_ms: opens[opens.len() / 2],
        first_search_ms,
    })
}

/// `scopes` results.
#[derive(Debug, Clone, Serialize)]
pub struct ScopesBench {
    /// Distinct scopes served, each once (a write, then a search).
    pub scopes: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds for all of them.
    pub seconds: f64,
    /// Scopes served per second.
    pub scopes_per_s: f64,
    /// Operations refused or failed (any kind).
    pub errors: u64,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// Wall time per cold scope (seconds / scopes), microseconds.
    pub wall_us_per_scope: f64,
    /// Latency of each scope's first operation (activation + durable
    /// write), microseconds.
    pub cold_write: Latency,
    /// Latency of the search that follows on the now warm scope.
    pub warm_search: Latency,
    /// Workers the router reclaimed.
    pub evictions: u64,
    /// The router's bound on live workers.
    pub max_active_scopes: u64,
}

/// Serves `scopes` distinct scopes, each once (an `add_entry` on the cold
/// scope, then a search), from `clients` concurrent clients, through the
/// exact-scope router with its default bounds (1,024 live workers) over the
/// durable store in `dir`.
pub async fn scopes(dir: &Path, scopes: u64, clients: usize) -> Result<ScopesBench> {
    let inner = Arc::new(RedbMemoryStore::open(
        dir.join("store"),
        MemoryConfig::default(),
    )?);
    let config = RouterConfig::default();
    let max_active_scopes = config.max_active_scopes;
    let store = Arc::new(RoutedMemory::new(inner, config)?);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let bar = indicatif::ProgressBar::new(scopes);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (store, next, bar) = (Arc::clone(&store), Arc::clone(&next), bar.clone());
        tasks.push(tokio::spawn(async move {
            let (mut cold, mut warm, mut errors) = (Vec::new(), Vec::new(), Vec::new());
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= scopes {
                    break;
                }
                let Ok(scope) = MemoryScope::parse("bench", &format!("user-{i}")) else {
                    continue;
                };
                let t = Instant::now();
                let entry = NewEntry::new(format!("user {i} prefers window seats"));
                match store
                    .add_entry(&scope, entry, &WriteOptions::default())
                    .await
                {
                    Ok(_) => cold.push(t.elapsed().as_secs_f64() * 1e6),
                    Err(e) => errors.push(e.to_string()),
                }
                let t = Instant::now();
                let q = SearchRequest::new("seat preference");
                match store.search(&scope, &q, &CallOptions::default()).await {
                    Ok(r) if r.hits.len() == 1 => warm.push(t.elapsed().as_secs_f64() * 1e6),
                    Ok(r) => errors.push(format!("{} hits, 1 expected", r.hits.len())),
                    Err(e) => errors.push(e.to_string()),
                }
                bar.inc(1);
            }
            (cold, warm, errors)
        }));
    }
    let (mut cold, mut warm, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for t in tasks {
        let (c, w, e) = t.await.map_err(|e| BenchError::Failed(e.to_string()))?;
        cold.extend(c);
        warm.extend(w);
        errors.extend(e);
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let stats = store.router_stats();
    Ok(ScopesBench {
        scopes,
        clients,
        seconds,
        scopes_per_s: scopes as f64 / seconds,
        errors: errors.len() as u64,
        first_error: errors.into_iter().next(),
        wall_us_per_scope: seconds * 1e6 / scopes.max(1) as f64,
        cold_write: latency(cold),
        warm_search: latency(warm),
        evictions: stats.reclaimed_workers,
        max_active_scopes,
    })
}
