//! The ingestion outbox's figures, each next to its floor in the same run:
//!
//! - [`admission`]: one durable admission of a 20-event job through
//!   [`Outbox::ingest`] (plan, epoch read, admit), interleaved with a raw
//!   append + `fdatasync` of the job's bytes;
//! - [`delivery`]: the processor delivering 20-event jobs into the durable
//!   memory store with 2 workers, against 2 callers making the same
//!   20-event `add_events` calls directly, in alternating rounds;
//! - [`claim`]: one claim pass with few and with many pending jobs (a
//!   claim that finds a job, and a pass that finds none: the window bound).

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hippocamp_core::{MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryConfig, MemoryStore, WriteOptions};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_outbox::model::{Owner, Submission};
use hippocamp_outbox::{
    JobStore, Outbox, OutboxLimits, Processor, ProcessorOptions, Target, TargetName,
};
use hippocamp_outbox_redb::RedbJobStore;
use serde::Serialize;

use crate::{BenchError, Latency, Result, big_config, cpu_seconds, latency, turns};

/// Events per job in these figures.
pub const JOB_EVENTS: usize = 20;

fn roomy_limits() -> OutboxLimits {
    OutboxLimits {
        max_active_jobs: 1_000_000,
        max_active_jobs_per_scope: 1_000_000,
        max_active_bytes: 10 << 30,
        max_active_bytes_per_scope: 10 << 30,
        ..OutboxLimits::default()
    }
}

fn job_events(texts: &[String], job: usize) -> Vec<Event> {
    (0..JOB_EVENTS)
        .map(|i| {
            let t = &texts[(job * JOB_EVENTS + i) % texts.len()];
            Event::text(format!("j{job}e{i}"), "user", 1, t.clone())
        })
        .collect()
}

fn target() -> Result<TargetName> {
    Ok(TargetName::new("memory")?)
}

/// An outbox over a durable job store in `dir`, delivering to `store`.
fn outbox_over(dir: &Path, store: Arc<dyn MemoryStore>, config: &MemoryConfig) -> Result<Outbox> {
    let jobs = RedbJobStore::open(dir, roomy_limits())?;
    let outbox = Outbox::new(Arc::new(jobs));
    outbox.register(
        target()?,
        Target {
            store,
            limits: config.limits.clone(),
        },
    )?;
    Ok(outbox)
}

/// `admission` results.
#[derive(Debug, Clone, Serialize)]
pub struct AdmissionBench {
    /// Samples of each.
    pub samples: usize,
    /// Events per job.
    pub events_per_job: usize,
    /// Bytes of the raw sample: the job's events as JSON.
    pub job_bytes: usize,
    /// One acknowledged `ingest` of a new 20-event session.
    pub admission: Latency,
    /// The job store's part alone: `admit` of the planned events.
    pub store_admit: Latency,
    /// Append the job's bytes to a file and `fdatasync` (the floor).
    pub raw_append_fdatasync: Latency,
    /// Admission p50 / floor p50.
    pub ratio_p50: f64,
}

/// Durable admissions against raw append + fdatasync, interleaved.
pub async fn admission(dir: &Path, samples: usize) -> Result<AdmissionBench> {
    let texts = turns(JOB_EVENTS * 50)?;
    let config = big_config();
    let memory: Arc<dyn MemoryStore> =
        Arc::new(RedbMemoryStore::open(dir.join("memory"), config.clone())?);
    let outbox = outbox_over(&dir.join("outbox"), memory, &config)?;
    let mut raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("raw.bin"))?;
    let target = target()?;
    let (mut adm_us, mut raw_us, mut store_us, mut job_bytes) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for i in 0..=samples {
        let scope = MemoryScope::parse("bench", &format!("u{}", i % 64))?;
        let session = SessionId::new(format!("s{i}"))?;
        let events = job_events(&texts, i);
        let bytes = serde_json::to_vec(&events).map_err(|e| BenchError::Failed(e.to_string()))?;
        job_bytes = bytes.len();
        let started = Instant::now();
        raw.write_all(&bytes)?;
        raw.sync_data()?;
        let raw_t = started.elapsed();
        let started = Instant::now();
        let r = outbox
            .ingest(
                &target,
                &scope,
                &session,
                &events,
                None,
                &hippocamp_core::CallOptions::default(),
            )
            .await?;
        let adm_t = started.elapsed();
        if r.new_events != JOB_EVENTS as u64 {
            return Err(BenchError::Failed(format!(
                "an admission queued {} events",
                r.new_events
            )));
        }
        // The same events in another session, straight into the store.
        let other = SessionId::new(format!("direct{i}"))?;
        let (stored, _) = hippocamp_outbox::outbox::plan(&scope, &other, &events, &config.limits)?;
        let sub = Submission {
            target: target.clone(),
            scope: scope.clone(),
            session: other,
            epoch: 0,
            session_epoch: 0,
            events: stored,
            max_attempts: None,
        };
        let started = Instant::now();
        outbox.store().admit(sub).await?;
        let store_t = started.elapsed();
        // The first of each is a warm-up.
        if i > 0 {
            raw_us.push(raw_t.as_secs_f64() * 1e6);
            adm_us.push(adm_t.as_secs_f64() * 1e6);
            store_us.push(store_t.as_secs_f64() * 1e6);
        }
    }
    let admission = latency(adm_us);
    let raw_append_fdatasync = latency(raw_us);
    Ok(AdmissionBench {
        samples,
        events_per_job: JOB_EVENTS,
        job_bytes,
        ratio_p50: admission.p50_us / raw_append_fdatasync.p50_us,
        admission,
        store_admit: latency(store_us),
        raw_append_fdatasync,
    })
}

/// One round of `delivery`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DeliveryRound {
    /// Events per second through the processor.
    pub outbox_events_per_s: f64,
    /// Events per second of the direct calls.
    pub direct_events_per_s: f64,
    /// The process's CPU time per event delivered by the processor, µs.
    pub outbox_cpu_us_per_event: f64,
    /// The process's CPU time per event of the direct calls, µs.
    pub direct_cpu_us_per_event: f64,
}

/// Seconds and process CPU seconds of a timed round.
#[derive(Debug, Clone, Copy)]
struct Timed {
    wall: f64,
    cpu: f64,
}

impl Timed {
    fn since(started: Instant, cpu: f64) -> Self {
        Self {
            wall: started.elapsed().as_secs_f64(),
            cpu: cpu_seconds() - cpu,
        }
    }
}

/// `delivery` results.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryBench {
    /// Jobs per round (each of 20 events).
    pub jobs: usize,
    /// Processor workers, and direct callers.
    pub concurrency: usize,
    /// Each round.
    pub rounds: Vec<DeliveryRound>,
    /// Median of the outbox's rounds, events per second.
    pub outbox_events_per_s: f64,
    /// Median of the direct rounds, events per second.
    pub direct_events_per_s: f64,
    /// Outbox / direct (medians).
    pub ratio: f64,
    /// The median of each round's outbox / direct: the disk's speed drifts
    /// between rounds, and a round's two halves meet the same drift.
    pub ratio_of_rounds: f64,
    /// Median process CPU µs per event, through the processor.
    pub outbox_cpu_us_per_event: f64,
    /// Median process CPU µs per event, direct calls.
    pub direct_cpu_us_per_event: f64,
}

/// Flushes every dirty page of the filesystem holding `dir`: a timed round
/// starts on a quiet disk, not on the writeback the previous one left.
fn quiet_disk(dir: &Path) -> Result<()> {
    let f = std::fs::File::open(dir)?;
    rustix::fs::syncfs(&f).map_err(std::io::Error::from)?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

type Work = Arc<Vec<(MemoryScope, SessionId, Vec<Event>)>>;

/// Seconds for two callers to make the jobs' `add_events` calls directly
/// on a fresh durable store in `dir`.
async fn direct_round(dir: &Path, config: &MemoryConfig, work: &Work) -> Result<Timed> {
    const CALLERS: usize = 2;
    let store = Arc::new(RedbMemoryStore::open(dir, config.clone())?);
    quiet_disk(dir)?;
    let (started, cpu) = (Instant::now(), cpu_seconds());
    let mut callers = Vec::new();
    for c in 0..CALLERS {
        let (store, work) = (Arc::clone(&store), Arc::clone(work));
        callers.push(tokio::spawn(async move {
            for (scope, session, evs) in work.iter().skip(c).step_by(CALLERS) {
                store
                    .add_events(scope, session, evs, &WriteOptions::default())
                    .await?;
            }
            Ok::<_, hippocamp_core::Error>(())
        }));
    }
    for c in callers {
        c.await.map_err(|e| BenchError::Failed(e.to_string()))??;
    }
    Ok(Timed::since(started, cpu))
}

/// Seconds for a 2-worker processor to deliver the jobs, admitted before
/// it starts, into a fresh durable store in `dir`.
async fn outbox_round(dir: &Path, config: &MemoryConfig, work: &Work) -> Result<Timed> {
    let memory: Arc<dyn MemoryStore> =
        Arc::new(RedbMemoryStore::open(dir.join("memory"), config.clone())?);
    let outbox = outbox_over(&dir.join("outbox"), memory, config)?;
    let target = target()?;
    for (scope, session, evs) in work.iter() {
        outbox
            .ingest(
                &target,
                scope,
                session,
                evs,
                None,
                &hippocamp_core::CallOptions::default(),
            )
            .await?;
    }
    let options = ProcessorOptions {
        workers: 2,
        poll_interval_ms: 5,
        ..ProcessorOptions::default()
    };
    let jobs = work.len() as u64;
    quiet_disk(dir)?;
    let (started, cpu) = (Instant::now(), cpu_seconds());
    let processor = Processor::start(&outbox, options)?;
    loop {
        let s = outbox.stats().await?;
        if s.succeeded == jobs {
            break;
        }
        if s.failed > 0 || started.elapsed() > Duration::from_mins(10) {
            return Err(BenchError::Failed(format!(
                "delivery did not finish: {s:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let timed = Timed::since(started, cpu);
    processor.stop().await;
    Ok(timed)
}

/// The same jobs delivered by the processor and by direct calls, in
/// alternating rounds on fresh durable stores.
pub async fn delivery(dir: &Path, jobs: usize, rounds: usize) -> Result<DeliveryBench> {
    let texts = turns(JOB_EVENTS * 50)?;
    let config = big_config();
    // Scopes as users spread them; each job is one session.
    let work: Vec<(MemoryScope, SessionId, Vec<Event>)> = (0..jobs)
        .map(|j| {
            Ok((
                MemoryScope::parse("bench", &format!("u{}", j % 16))?,
                SessionId::new(format!("s{j}"))?,
                job_events(&texts, j),
            ))
        })
        .collect::<Result<_>>()?;
    let work: Work = Arc::new(work);
    let events = (jobs * JOB_EVENTS) as f64;
    let mut out = Vec::new();
    for round in 0..rounds {
        // Which goes first alternates, so neither always meets the disk
        // as the other left it.
        let (direct, outboxed) = if round % 2 == 0 {
            let d = direct_round(&dir.join(format!("direct{round}")), &config, &work).await?;
            let o = outbox_round(&dir.join(format!("outbox{round}")), &config, &work).await?;
            (d, o)
        } else {
            let o = outbox_round(&dir.join(format!("outbox{round}")), &config, &work).await?;
            let d = direct_round(&dir.join(format!("direct{round}")), &config, &work).await?;
            (d, o)
        };
        out.push(DeliveryRound {
            outbox_events_per_s: events / outboxed.wall,
            direct_events_per_s: events / direct.wall,
            outbox_cpu_us_per_event: outboxed.cpu * 1e6 / events,
            direct_cpu_us_per_event: direct.cpu * 1e6 / events,
        });
    }
    let outbox_events_per_s = median(out.iter().map(|r| r.outbox_events_per_s).collect());
    let direct_events_per_s = median(out.iter().map(|r| r.direct_events_per_s).collect());
    let ratio_of_rounds = median(
        out.iter()
            .map(|r| r.outbox_events_per_s / r.direct_events_per_s)
            .collect(),
    );
    let outbox_cpu_us_per_event = median(out.iter().map(|r| r.outbox_cpu_us_per_event).collect());
    let direct_cpu_us_per_event = median(out.iter().map(|r| r.direct_cpu_us_per_event).collect());
    Ok(DeliveryBench {
        jobs,
        concurrency: 2,
        rounds: out,
        outbox_events_per_s,
        direct_events_per_s,
        ratio: outbox_events_per_s / direct_events_per_s,
        ratio_of_rounds,
        outbox_cpu_us_per_event,
        direct_cpu_us_per_event,
    })
}

/// Claim costs at one queue length.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimAt {
    /// Pending jobs when measured (the store's count before the first
    /// claim, less the claims measured).
    pub pending: usize,
    /// A claim that finds a due job.
    pub claim_hit: Latency,
    /// A pass that finds nothing claimable (its target is not registered):
    /// examines the whole window.
    pub claim_miss: Latency,
}

/// `claim` results.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimBench {
    /// Schedule entries one pass examines at most.
    pub max_claim_scan: u64,
    /// With few and with many pending jobs.
    pub at: Vec<ClaimAt>,
    /// Many / few, claim p50.
    pub hit_ratio_p50: f64,
    /// Many / few, empty-pass p50.
    pub miss_ratio_p50: f64,
}

/// Fills a durable job store with `pending` one-event jobs, `clients`
/// admissions at a time (group commit batches them).
async fn fill(store: &Arc<RedbJobStore>, pending: usize, clients: usize) -> Result<()> {
    let target = target()?;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (store, target) = (Arc::clone(store), target.clone());
        tasks.push(tokio::spawn(async move {
            for j in (c..pending).step_by(clients) {
                let event = Event::text(format!("e{j}"), "user", 1, format!("turn {j}"));
                let scope = MemoryScope::parse("bench", &format!("u{}", j % 1_000))?;
                let session = SessionId::new(format!("s{j}"))?;
                let (stored, _) = hippocamp_outbox::outbox::plan(
                    &scope,
                    &session,
                    &[event],
                    &MemoryConfig::default().limits,
                )?;
                store
                    .admit(Submission {
                        target: target.clone(),
                        scope,
                        session,
                        epoch: 0,
                        session_epoch: 0,
                        events: stored,
                        max_attempts: None,
                    })
                    .await?;
            }
            Ok::<_, hippocamp_core::Error>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| BenchError::Failed(e.to_string()))??;
    }
    Ok(())
}

async fn claim_at(dir: &Path, pending: usize, samples: usize) -> Result<ClaimAt> {
    let store = Arc::new(RedbJobStore::open(dir, roomy_limits())?);
    fill(&store, pending + samples, 64).await?;
    let queued = store.stats().await?.pending;
    if queued != (pending + samples) as u64 {
        return Err(BenchError::Failed(format!(
            "{queued} jobs pending, {} admitted",
            pending + samples
        )));
    }
    let lease = Duration::from_mins(10);
    let registered: BTreeSet<TargetName> = [target()?].into();
    let unregistered: BTreeSet<TargetName> = [TargetName::new("elsewhere")?].into();
    let (mut hit, mut miss) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let started = Instant::now();
        let item = store.claim(Owner::random(), lease, &registered).await?;
        hit.push(started.elapsed().as_secs_f64() * 1e6);
        if item.is_none() {
            return Err(BenchError::Failed("a claim found nothing".into()));
        }
        let started = Instant::now();
        let none = store.claim(Owner::random(), lease, &unregistered).await?;
        miss.push(started.elapsed().as_secs_f64() * 1e6);
        if none.is_some() {
            return Err(BenchError::Failed(
                "an unregistered target was claimed".into(),
            ));
        }
    }
    Ok(ClaimAt {
        pending,
        claim_hit: latency(hit),
        claim_miss: latency(miss),
    })
}

/// A claim pass with `few` and with `many` pending jobs.
pub async fn claim(dir: &Path, few: usize, many: usize, samples: usize) -> Result<ClaimBench> {
    let small = claim_at(&dir.join("few"), few, samples).await?;
    let large = claim_at(&dir.join("many"), many, samples).await?;
    Ok(ClaimBench {
        max_claim_scan: roomy_limits().max_claim_scan,
        hit_ratio_p50: large.claim_hit.p50_us / small.claim_hit.p50_us,
        miss_ratio_p50: large.claim_miss.p50_us / small.claim_miss.p50_us,
        at: vec![small, large],
    })
}
