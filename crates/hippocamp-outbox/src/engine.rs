//! Every rule of a job store, once: admission (watermark, splitting,
//! limits), claim scanning, batch progress, retries, cancellation,
//! erasure and pruning, as functions that read through [`KvRead`] and
//! return their changes. A store applies an operation's changes only when
//! it succeeded, so a refused operation leaves nothing behind.
//!
//! Persisted jobs are `pending` or finished; a pending job under a valid
//! lease (see [`crate::leases`]) is what a status calls `running`.

use std::collections::{BTreeSet, HashMap, HashSet};

use hippocamp_core::{Error, MemoryScope, QuotaLimit, Result, SessionId};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::kv::{KvRead, Table, Writes, prefix_end};
use crate::leases::Leases;
use crate::limits::OutboxLimits;
use crate::model::{
    Admitted, BATCH_EVENTS, CancelReason, Delivered, JobError, JobId, JobRef, JobState, JobStatus,
    OutboxStats, Pruned, Skips, StoredEvent, Submission, TargetName, backoff_ms,
};

/// The time and limits an operation runs with.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// The store's limits.
    pub limits: &'a OutboxLimits,
    /// Now on the store's clock, milliseconds.
    pub now: u64,
    /// Now on the wall clock (shown in statuses only), milliseconds.
    pub wall: u64,
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// Target name.
    pub target: String,
    /// Scope app.
    pub app: String,
    /// Scope user.
    pub user: String,
    /// Session.
    pub session: String,
    /// Erasure epoch at admission.
    pub epoch: u64,
    /// `Pending` or finished.
    pub state: JobState,
    /// Why it was cancelled.
    pub cancel_reason: Option<CancelReason>,
    /// Attempts that ended (failed, expired, or the one that succeeded).
    pub attempts: u32,
    /// Attempts before it fails.
    pub max_attempts: u32,
    /// Events held.
    pub events: u64,
    /// Bytes held (for quotas).
    pub bytes: u64,
    /// Batches.
    pub batches: u32,
    /// The next batch to deliver.
    pub next_batch: u32,
    /// Events of delivered batches.
    pub delivered_events: u64,
    /// What delivered batches did.
    pub result: Delivered,
    /// Admission, wall clock.
    pub created_ms: u64,
    /// Last change, wall clock.
    pub updated_ms: u64,
    /// Due time (store clock), its schedule key while active.
    pub due: u64,
    /// Finish time (store clock), its terminal key once finished.
    pub finished: u64,
    /// Admission order (jobs due at the same time go in this order).
    pub seq: u64,
    /// The last failure.
    pub last_error: Option<JobError>,
    /// The session's erasure epoch at admission. Stored after the row's
    /// other fields ([`encode_job`]), so rows written before it existed
    /// read as 0: the stores' session epochs start at 0 too.
    #[serde(skip)]
    pub session_epoch: u64,
    /// What its deliveries skipped. Stored after the session epoch, so
    /// rows written before it read as nothing skipped.
    #[serde(skip)]
    pub skips: Skips,
}

/// A job row's bytes: the row, its session epoch, then its skips (only
/// when there are any).
fn encode_job(row: &JobRow) -> Result<Vec<u8>> {
    let mut bytes = encode(row)?;
    bytes.extend(encode(&row.session_epoch)?);
    if !row.skips.is_empty() {
        // JSON: a skip reason is a tagged enum, which postcard cannot
        // write; the part is small (bounded by `max_skipped_details`).
        let json = serde_json::to_vec(&row.skips)
            .map_err(|e| Error::Corrupt(format!("cannot encode a job's skips: {e}")))?;
        bytes.extend(json);
    }
    Ok(bytes)
}

/// A job row from its bytes; a row written before session epochs (or
/// skips) ends after its other fields.
fn decode_job(bytes: &[u8]) -> Result<JobRow> {
    let (mut row, rest): (JobRow, _) = postcard::take_from_bytes(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable outbox job: {e}")))?;
    if !rest.is_empty() {
        let (epoch, rest): (u64, _) = postcard::take_from_bytes(rest)
            .map_err(|e| Error::Corrupt(format!("undecodable job's session epoch: {e}")))?;
        row.session_epoch = epoch;
        if !rest.is_empty() {
            row.skips = serde_json::from_slice(rest)
                .map_err(|e| Error::Corrupt(format!("undecodable job's skips: {e}")))?;
        }
    }
    Ok(row)
}

impl JobRow {
    /// Whether it belongs to `scope`.
    pub fn in_scope(&self, scope: &MemoryScope) -> bool {
        self.app == scope.app().as_str() && self.user == scope.user().as_str()
    }

    /// Its scope.
    pub fn scope(&self) -> Result<MemoryScope> {
        MemoryScope::parse(&self.app, &self.user)
            .map_err(|_| Error::Corrupt("a job row names an invalid scope".into()))
    }
}

/// Store-wide counters (the `stats` row).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Active jobs (pending, running or in backoff).
    pub pending: u64,
    /// Kept succeeded jobs.
    pub succeeded: u64,
    /// Kept failed jobs.
    pub failed: u64,
    /// Kept cancelled jobs.
    pub cancelled: u64,
    /// Bytes of active jobs.
    pub active_bytes: u64,
    /// Jobs admitted.
    pub admitted_total: u64,
    /// Events delivered.
    pub delivered_events_total: u64,
    /// Attempts retried.
    pub retried_total: u64,
    /// Jobs failed.
    pub failed_total: u64,
    /// Jobs cancelled by a caller.
    pub cancelled_requested_total: u64,
    /// Jobs cancelled by an erasure.
    pub cancelled_erased_total: u64,
    /// Jobs pruned.
    pub pruned_total: u64,
}

const STATS_KEY: &[u8] = b"stats";

fn h16(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(u32::try_from(p.len()).unwrap_or(u32::MAX).to_be_bytes());
        h.update(p);
    }
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The key of a scope.
pub fn scope_key(scope: &MemoryScope) -> [u8; 16] {
    h16(&[
        b"hippocamp-outbox-scope",
        scope.app().as_str().as_bytes(),
        scope.user().as_str().as_bytes(),
    ])
}

fn session_key(session: &str) -> [u8; 16] {
    h16(&[b"hippocamp-outbox-session", session.as_bytes()])
}

fn stream_key(target: &str, scope: &MemoryScope, session: &str) -> [u8; 16] {
    h16(&[
        b"hippocamp-outbox-stream",
        target.as_bytes(),
        scope.app().as_str().as_bytes(),
        scope.user().as_str().as_bytes(),
        session.as_bytes(),
    ])
}

fn event_key(id: &str) -> [u8; 16] {
    h16(&[b"hippocamp-outbox-event", id.as_bytes()])
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn batch_key(id: &JobId, batch: u32) -> Vec<u8> {
    cat(&[id.as_bytes(), &batch.to_be_bytes()])
}

fn time_key(t: u64, id: &JobId) -> Vec<u8> {
    cat(&[&t.to_be_bytes(), id.as_bytes()])
}

/// A job's schedule key: due time, then admission order, then id.
fn schedule_key(row: &JobRow, id: &JobId) -> Vec<u8> {
    cat(&[
        &row.due.to_be_bytes(),
        &row.seq.to_be_bytes(),
        id.as_bytes(),
    ])
}

/// Where the job id starts in a schedule key.
const SCHEDULE_ID_AT: usize = 16;

fn active_key(scope: &[u8; 16], session: &str, id: &JobId) -> Vec<u8> {
    cat(&[scope, &session_key(session), id.as_bytes()])
}

fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(v)
        .map_err(|e| Error::Corrupt(format!("cannot encode an outbox record: {e}")))
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable outbox {what}: {e}")))
}

fn job_of_key(key: &[u8], at: usize) -> Result<JobId> {
    let bytes: [u8; 16] = key
        .get(at..at + 16)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Error::Corrupt("an outbox index key is malformed".into()))?;
    Ok(JobId::from_bytes(bytes))
}

fn time_of_key(key: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = key
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| Error::Corrupt("an outbox index key is malformed".into()))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The row of `id`.
pub fn load_job(kv: &dyn KvRead, id: &JobId) -> Result<Option<JobRow>> {
    kv.get(Table::Jobs, id.as_bytes())?
        .map(|v| decode_job(&v))
        .transpose()
}

/// The counters.
pub fn counters(kv: &dyn KvRead) -> Result<Counters> {
    Ok(match kv.get(Table::Meta, STATS_KEY)? {
        Some(v) => decode(&v, "counters")?,
        None => Counters::default(),
    })
}

/// The events of batch `batch` of `id`.
pub fn load_batch(kv: &dyn KvRead, id: &JobId, batch: u32) -> Result<Vec<StoredEvent>> {
    let v = kv
        .get(Table::Batches, &batch_key(id, batch))?
        .ok_or_else(|| Error::Corrupt(format!("job {id} lost the events of batch {batch}")))?;
    decode(&v, "batch")
}

fn floor(kv: &dyn KvRead, scope: &[u8; 16]) -> Result<u64> {
    read_u64(kv, Table::Floors, scope)
}

/// Counter and usage changes of one operation, written once at its end.
struct Tally {
    counters: Counters,
    usage: HashMap<[u8; 16], (u64, u64)>,
    /// Watermark rows, store-wide (loaded on first use).
    marks_total: Option<u64>,
    /// Watermark rows per scope (loaded on first use).
    marks: HashMap<[u8; 16], u64>,
    /// The last finished job this operation removed to keep
    /// `max_finished_jobs`: the next one is after it.
    evicted_after: Option<Vec<u8>>,
}

impl Tally {
    fn new(kv: &dyn KvRead) -> Result<Self> {
        Ok(Self {
            counters: counters(kv)?,
            usage: HashMap::new(),
            marks_total: None,
            marks: HashMap::new(),
            evicted_after: None,
        })
    }

    /// Adds `n` watermark rows of `scope` (negative: removes), refusing
    /// an addition past either limit.
    fn mark(
        &mut self,
        kv: &dyn KvRead,
        limits: &OutboxLimits,
        scope: [u8; 16],
        n: i64,
    ) -> Result<()> {
        let total = match self.marks_total {
            Some(t) => t,
            None => read_u64(kv, Table::Meta, MARKS_KEY)?,
        };
        let mine = match self.marks.get(&scope) {
            Some(m) => *m,
            None => read_u64(kv, Table::Usage, &marks_key(&scope))?,
        };
        let (total, mine) = if n >= 0 {
            let n = n.unsigned_abs();
            if total.saturating_add(n) > limits.max_watermark_events {
                return Err(quota(QuotaLimit::OutboxWatermarks(
                    limits.max_watermark_events,
                )));
            }
            if mine.saturating_add(n) > limits.max_watermark_events_per_scope {
                return Err(quota(QuotaLimit::OutboxWatermarksPerScope(
                    limits.max_watermark_events_per_scope,
                )));
            }
            (total + n, mine + n)
        } else {
            let n = n.unsigned_abs();
            (total.saturating_sub(n), mine.saturating_sub(n))
        };
        self.marks_total = Some(total);
        self.marks.insert(scope, mine);
        Ok(())
    }

    fn usage(&mut self, kv: &dyn KvRead, scope: [u8; 16]) -> Result<&mut (u64, u64)> {
        use std::collections::hash_map::Entry;
        Ok(match self.usage.entry(scope) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let u = match kv.get(Table::Usage, &scope)? {
                    Some(v) => decode(&v, "usage")?,
                    None => (0, 0),
                };
                e.insert(u)
            }
        })
    }

    fn flush(self, w: &mut Writes) -> Result<()> {
        for (scope, u) in self.usage {
            if u == (0, 0) {
                w.del(Table::Usage, scope.to_vec());
            } else {
                w.put(Table::Usage, scope.to_vec(), encode(&u)?);
            }
        }
        for (scope, m) in self.marks {
            let key = marks_key(&scope);
            if m == 0 {
                w.del(Table::Usage, key);
            } else {
                w.put(Table::Usage, key, m.to_le_bytes().to_vec());
            }
        }
        if let Some(t) = self.marks_total {
            w.put(Table::Meta, MARKS_KEY.to_vec(), t.to_le_bytes().to_vec());
        }
        w.put(Table::Meta, STATS_KEY.to_vec(), encode(&self.counters)?);
        Ok(())
    }
}

/// The watermark rows counted store-wide (rows admitted before they were
/// counted are not: they were never limited either).
const MARKS_KEY: &[u8] = b"watermarks";

/// Where a scope's watermark row count lives: its usage key and `w`.
fn marks_key(scope: &[u8; 16]) -> Vec<u8> {
    cat(&[scope, b"w"])
}

fn read_u64(kv: &dyn KvRead, table: Table, key: &[u8]) -> Result<u64> {
    match kv.get(table, key)? {
        None => Ok(0),
        Some(v) => v
            .as_slice()
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| {
                Error::Corrupt(format!("an outbox {} record is not 8 bytes", table.name()))
            }),
    }
}

/// The state a status shows: pending under a valid lease is running.
fn shown(row: &JobRow, id: &JobId, leases: &Leases) -> (JobState, u32) {
    if row.state == JobState::Pending
        && let Some(l) = leases.get(id)
    {
        return (JobState::Running, l.attempt);
    }
    (row.state, row.attempts)
}

/// Queues the events of `sub` the watermark does not cover (see
/// [`crate::store::JobStore::admit`]).
pub fn admit(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    sub: &Submission,
    leases: &Leases,
) -> Result<(Admitted, Writes)> {
    let sk = scope_key(&sub.scope);
    let reached = floor(kv, &sk)?;
    if sub.epoch < reached {
        return Err(Error::StaleEpoch {
            admitted: sub.epoch,
            current: reached,
        });
    }
    let session = sub.session.as_str();
    let stream = stream_key(sub.target.as_str(), &sub.scope, session);
    let mut seen = HashSet::new();
    let mut fresh: Vec<&StoredEvent> = Vec::new();
    let mut covering: Vec<JobId> = Vec::new();
    for e in &sub.events {
        if !seen.insert(e.id.as_str()) {
            continue;
        }
        match kv.get(Table::Watermark, &cat(&[&stream, &event_key(&e.id)]))? {
            Some(job) => {
                let job = job_of_key(&job, 0)?;
                if !covering.contains(&job) {
                    covering.push(job);
                }
            }
            None => fresh.push(e),
        }
    }
    let mut refs = Vec::new();
    let mut w = Writes::default();
    let new_events = fresh.len() as u64;
    if !fresh.is_empty() {
        let limits = ctx.limits;
        let mut tally = Tally::new(kv)?;
        let max_attempts = sub
            .max_attempts
            .map_or(limits.max_attempts, u64::from)
            .clamp(1, limits.max_attempts);
        let per_job = hippocamp_core::limits::to_usize(limits.max_events_per_job);
        let max_attempts = u32::try_from(max_attempts).unwrap_or(u32::MAX);
        for chunk in fresh.chunks(per_job) {
            let job = NewJob {
                sub,
                scope: sk,
                stream,
                events: chunk,
                max_attempts,
            };
            refs.push(queue(kv, ctx, &job, &mut tally, &mut w, leases)?);
        }
        tally.flush(&mut w)?;
    }
    for id in covering {
        if refs.iter().any(|r| r.id == id) {
            continue;
        }
        if let Some(row) = load_job(kv, &id)? {
            refs.push(JobRef {
                id,
                state: shown(&row, &id, leases).0,
            });
        }
    }
    Ok((
        Admitted {
            jobs: refs,
            new_events,
        },
        w,
    ))
}

/// One job of an admission.
struct NewJob<'a> {
    sub: &'a Submission,
    scope: [u8; 16],
    stream: [u8; 16],
    events: &'a [&'a StoredEvent],
    max_attempts: u32,
}

/// Writes one new job (its row, batches, schedule, scope and watermark
/// entries) within the limits; an existing job of the same id is named
/// instead, unless it failed (then the new one replaces it).
/// Counts one more active job of `bytes` for `scope`, or refuses it
/// when a quota (store-wide or the scope's) would be passed.
fn reserve(
    kv: &dyn KvRead,
    limits: &OutboxLimits,
    tally: &mut Tally,
    scope: [u8; 16],
    bytes: u64,
) -> Result<()> {
    let c = &tally.counters;
    if c.pending + 1 > limits.max_active_jobs {
        return Err(quota(QuotaLimit::OutboxJobs(limits.max_active_jobs)));
    }
    if c.active_bytes + bytes > limits.max_active_bytes {
        return Err(quota(QuotaLimit::OutboxBytes(limits.max_active_bytes)));
    }
    let u = tally.usage(kv, scope)?;
    if u.0 + 1 > limits.max_active_jobs_per_scope {
        return Err(quota(QuotaLimit::OutboxJobsPerScope(
            limits.max_active_jobs_per_scope,
        )));
    }
    if u.1 + bytes > limits.max_active_bytes_per_scope {
        return Err(quota(QuotaLimit::OutboxBytesPerScope(
            limits.max_active_bytes_per_scope,
        )));
    }
    u.0 += 1;
    u.1 += bytes;
    let c = &mut tally.counters;
    c.pending += 1;
    c.active_bytes += bytes;
    c.admitted_total += 1;
    Ok(())
}

fn queue(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    job: &NewJob<'_>,
    tally: &mut Tally,
    w: &mut Writes,
    leases: &Leases,
) -> Result<JobRef> {
    let (sub, limits) = (job.sub, ctx.limits);
    let id = JobId::derive(
        &sub.target,
        &sub.scope,
        &sub.session,
        job.events.iter().map(|e| e.id.as_str()),
        sub.epoch,
        sub.session_epoch,
    );
    match load_job(kv, &id)? {
        // The same events failed before (their watermark was released): a
        // fresh job replaces the failed one.
        Some(old) if old.state == JobState::Failed => {
            w.del(Table::Terminal, time_key(old.finished, &id));
            tally.counters.failed = tally.counters.failed.saturating_sub(1);
        }
        Some(old) => {
            return Ok(JobRef {
                id,
                state: shown(&old, &id, leases).0,
            });
        }
        None => {}
    }
    let bytes: u64 = job.events.iter().map(|e| e.bytes()).sum();
    reserve(kv, limits, tally, job.scope, bytes)?;
    let session = sub.session.as_str();
    let row = JobRow {
        target: sub.target.as_str().to_owned(),
        app: sub.scope.app().as_str().to_owned(),
        user: sub.scope.user().as_str().to_owned(),
        session: session.to_owned(),
        epoch: sub.epoch,
        session_epoch: sub.session_epoch,
        skips: Skips::default(),
        state: JobState::Pending,
        cancel_reason: None,
        attempts: 0,
        max_attempts: job.max_attempts,
        events: job.events.len() as u64,
        bytes,
        batches: u32::try_from(job.events.len().div_ceil(BATCH_EVENTS)).unwrap_or(u32::MAX),
        next_batch: 0,
        delivered_events: 0,
        result: Delivered::default(),
        created_ms: ctx.wall,
        updated_ms: ctx.wall,
        due: ctx.now,
        finished: 0,
        seq: tally.counters.admitted_total,
        last_error: None,
    };
    w.put(Table::Jobs, id.as_bytes().to_vec(), encode_job(&row)?);
    for (i, b) in job.events.chunks(BATCH_EVENTS).enumerate() {
        w.put(
            Table::Batches,
            batch_key(&id, u32::try_from(i).unwrap_or(u32::MAX)),
            encode(&b)?,
        );
    }
    w.put(
        Table::Schedule,
        schedule_key(&row, &id),
        sub.target.as_str().as_bytes().to_vec(),
    );
    w.put(
        Table::Active,
        active_key(&job.scope, session, &id),
        Vec::new(),
    );
    let n = i64::try_from(job.events.len()).unwrap_or(i64::MAX);
    tally.mark(kv, limits, job.scope, n)?;
    for e in job.events {
        w.put(
            Table::Watermark,
            cat(&[&job.stream, &event_key(&e.id)]),
            id.as_bytes().to_vec(),
        );
    }
    Ok(JobRef {
        id,
        state: JobState::Pending,
    })
}

fn quota(limit: QuotaLimit) -> Error {
    Error::QuotaExceeded { limit }
}

/// A due job a claim may take.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The job.
    pub id: JobId,
    /// Its row.
    pub row: JobRow,
}

/// Walks the schedule from after `cursor` (then from its start, once),
/// examining at most `max_claim_scan` due entries, for a job of one of
/// `targets` that nobody holds. Returns it (if any) and where the next
/// pass starts.
pub fn scan(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    cursor: Option<&[u8]>,
    targets: &BTreeSet<TargetName>,
    leases: &Leases,
) -> Result<(Option<Candidate>, Option<Vec<u8>>)> {
    let mut budget = hippocamp_core::limits::to_usize(ctx.limits.max_claim_scan);
    let start = cursor.map(|c| cat(&[c, &[0]]));
    // Two legs: after the cursor, then from the start up to it.
    let legs: Vec<(Vec<u8>, Option<Vec<u8>>)> = match start {
        Some(s) => vec![(s, None), (Vec::new(), cursor.map(|c| cat(&[c, &[0]])))],
        None => vec![(Vec::new(), None)],
    };
    // Pages grow from a few entries: the usual pass claims one of the
    // first (only other workers' claims lie before it), and reading 256
    // rows to use one measurably slowed delivery.
    let mut page_len = 8;
    for (from, to) in legs {
        let mut from = from;
        'leg: while budget > 0 {
            let page = kv.range(Table::Schedule, &from, to.as_deref(), budget.min(page_len))?;
            page_len = (page_len * 2).min(256);
            if page.is_empty() {
                break;
            }
            for (key, target) in &page {
                if time_of_key(key)? > ctx.now {
                    break 'leg;
                }
                budget -= 1;
                let id = job_of_key(key, SCHEDULE_ID_AT)?;
                let claimable = !leases.is_held(&id)
                    && std::str::from_utf8(target)
                        .ok()
                        .and_then(|t| TargetName::new(t).ok())
                        .is_some_and(|t| targets.contains(&t));
                if claimable
                    && let Some(row) = load_job(kv, &id)?
                    && row.state == JobState::Pending
                {
                    return Ok((Some(Candidate { id, row }), Some(key.clone())));
                }
                if budget == 0 {
                    return Ok((None, Some(key.clone())));
                }
            }
            from = cat(&[&page[page.len() - 1].0, &[0]]);
        }
    }
    // Every due entry was seen: the next pass starts from the front.
    Ok((None, None))
}

/// Counts an attempt that ended with its lease expiring; fails the job
/// once it is out of attempts. Returns whether it is still pending.
pub fn count_expired(kv: &dyn KvRead, ctx: &Ctx<'_>, id: &JobId) -> Result<(bool, Writes)> {
    let mut w = Writes::default();
    let Some(mut row) = load_job(kv, id)? else {
        return Ok((false, w));
    };
    if row.state != JobState::Pending {
        return Ok((false, w));
    }
    row.attempts += 1;
    row.last_error = Some(JobError {
        code: "lease_expired".into(),
        message: "the attempt's lease expired before it finished".into(),
    });
    row.updated_ms = ctx.wall;
    if row.attempts >= row.max_attempts {
        let mut tally = Tally::new(kv)?;
        finish(kv, ctx, &mut w, &mut tally, id, row, JobState::Failed, None)?;
        tally.flush(&mut w)?;
        return Ok((false, w));
    }
    w.put(Table::Jobs, id.as_bytes().to_vec(), encode_job(&row)?);
    Ok((true, w))
}

/// Ends `row` in `state`: drops its events, its schedule and scope
/// entries and its usage; a failed job also releases its undelivered
/// events from the watermark, so submitting them again retries them.
#[allow(clippy::too_many_arguments)]
fn finish(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    w: &mut Writes,
    tally: &mut Tally,
    id: &JobId,
    mut row: JobRow,
    state: JobState,
    reason: Option<CancelReason>,
) -> Result<()> {
    let scope = row.scope()?;
    let sk = scope_key(&scope);
    if state == JobState::Failed {
        let stream = stream_key(&row.target, &scope, &row.session);
        let mut released = 0i64;
        for b in row.next_batch..row.batches {
            for e in load_batch(kv, id, b)? {
                let key = cat(&[&stream, &event_key(&e.id)]);
                if kv.get(Table::Watermark, &key)?.as_deref() == Some(id.as_bytes().as_slice()) {
                    w.del(Table::Watermark, key);
                    released += 1;
                }
            }
        }
        tally.mark(kv, ctx.limits, sk, -released)?;
    }
    for b in row.next_batch..row.batches {
        w.del(Table::Batches, batch_key(id, b));
    }
    w.del(Table::Schedule, schedule_key(&row, id));
    w.del(Table::Active, active_key(&sk, &row.session, id));
    let u = tally.usage(kv, sk)?;
    u.0 = u.0.saturating_sub(1);
    u.1 = u.1.saturating_sub(row.bytes);
    let c = &mut tally.counters;
    c.pending = c.pending.saturating_sub(1);
    c.active_bytes = c.active_bytes.saturating_sub(row.bytes);
    match state {
        JobState::Succeeded => c.succeeded += 1,
        JobState::Failed => {
            c.failed += 1;
            c.failed_total += 1;
        }
        _ => {
            c.cancelled += 1;
            match reason {
                Some(CancelReason::Erased) => c.cancelled_erased_total += 1,
                _ => c.cancelled_requested_total += 1,
            }
        }
    }
    row.state = state;
    row.cancel_reason = reason;
    row.finished = ctx.now;
    row.updated_ms = ctx.wall;
    w.put(Table::Terminal, time_key(row.finished, id), Vec::new());
    w.put(Table::Jobs, id.as_bytes().to_vec(), encode_job(&row)?);
    evict_past_cap(kv, ctx, w, tally)
}

/// Finished jobs held now.
fn finished_count(c: &Counters) -> u64 {
    c.succeeded + c.failed + c.cancelled
}

/// Keeps `max_finished_jobs`: removes the oldest finished job stored
/// before this operation while the count is past it. Jobs this operation
/// finished are not in the store's view yet; if they alone pass the cap,
/// the next operation that finishes one (or a prune) removes them.
fn evict_past_cap(kv: &dyn KvRead, ctx: &Ctx<'_>, w: &mut Writes, tally: &mut Tally) -> Result<()> {
    while finished_count(&tally.counters) > ctx.limits.max_finished_jobs {
        let from = tally
            .evicted_after
            .as_ref()
            .map_or_else(Vec::new, |k| cat(&[k, &[0]]));
        let Some((key, _)) = kv
            .range(Table::Terminal, &from, None, 1)?
            .into_iter()
            .next()
        else {
            return Ok(());
        };
        let id = job_of_key(&key, 8)?;
        drop_finished(kv, w, tally, &key, &id)?;
        tally.evicted_after = Some(key);
    }
    Ok(())
}

/// Removes the finished job `id` (its terminal index entry is `key`) and
/// counts it as pruned.
fn drop_finished(
    kv: &dyn KvRead,
    w: &mut Writes,
    tally: &mut Tally,
    key: &[u8],
    id: &JobId,
) -> Result<()> {
    w.del(Table::Terminal, key.to_vec());
    if let Some(row) = load_job(kv, id)? {
        w.del(Table::Jobs, id.as_bytes().to_vec());
        let c = &mut tally.counters;
        match row.state {
            JobState::Succeeded => c.succeeded = c.succeeded.saturating_sub(1),
            JobState::Failed => c.failed = c.failed.saturating_sub(1),
            JobState::Cancelled => c.cancelled = c.cancelled.saturating_sub(1),
            _ => {}
        }
    }
    tally.counters.pruned_total += 1;
    Ok(())
}

/// Deletes one finished job of `scope` (another scope's, or an unknown
/// id, is `NotFound`; a pending or running one is `JobActive`).
pub fn delete(
    kv: &dyn KvRead,
    scope: &MemoryScope,
    id: &JobId,
    leases: &Leases,
) -> Result<((), Writes)> {
    let row = load_job(kv, id)?
        .filter(|r| r.in_scope(scope))
        .ok_or(Error::NotFound("job"))?;
    if row.state == JobState::Pending {
        let shown = if leases.is_held(id) {
            "running"
        } else {
            "pending"
        };
        return Err(Error::JobActive(shown));
    }
    let mut w = Writes::default();
    let mut tally = Tally::new(kv)?;
    drop_finished(kv, &mut w, &mut tally, &time_key(row.finished, id), id)?;
    tally.flush(&mut w)?;
    Ok(((), w))
}

/// The health check's write: one meta row set to `now`, so a store that
/// can no longer write (a full or read-only disk) fails its health check
/// rather than its next admission. Counts and every other row stay as
/// they are.
pub fn probe(ctx: &Ctx<'_>) -> Result<((), Writes)> {
    let mut w = Writes::default();
    w.put(
        Table::Meta,
        HEALTH_KEY.to_vec(),
        ctx.now.to_le_bytes().to_vec(),
    );
    Ok(((), w))
}

const HEALTH_KEY: &[u8] = b"health";

fn active_row(kv: &dyn KvRead, id: &JobId) -> Result<JobRow> {
    match load_job(kv, id)? {
        Some(row) if row.state == JobState::Pending => Ok(row),
        Some(_) => Err(Error::LeaseLost("the job has ended")),
        None => Err(Error::LeaseLost("the job no longer exists")),
    }
}

/// Checks that a claimed job may still be delivered: active, and not of
/// an epoch the store knows was erased.
pub fn deliverable(kv: &dyn KvRead, id: &JobId) -> Result<JobRow> {
    let row = active_row(kv, id)?;
    if row.epoch < floor(kv, &scope_key(&row.scope()?))? {
        return Err(Error::LeaseLost("the job's scope was erased"));
    }
    Ok(row)
}

/// Records batch `batch` as delivered; returns the next batch, if any.
pub fn complete_batch(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    id: &JobId,
    batch: u32,
    delivered: &Delivered,
) -> Result<(Option<u32>, Writes)> {
    let mut row = active_row(kv, id)?;
    if row.next_batch != batch {
        return Err(Error::LeaseLost("that batch was already recorded"));
    }
    let mut w = Writes::default();
    let mut tally = Tally::new(kv)?;
    let events = delivered.added + delivered.duplicates + delivered.skipped;
    w.del(Table::Batches, batch_key(id, batch));
    row.next_batch += 1;
    row.delivered_events += events;
    row.result.added += delivered.added;
    row.result.duplicates += delivered.duplicates;
    row.result.skipped += delivered.skipped;
    let max = usize::try_from(ctx.limits.max_skipped_details).unwrap_or(usize::MAX);
    row.skips.add(&delivered.skipped_events, max);
    row.updated_ms = ctx.wall;
    row.last_error = None;
    tally.counters.delivered_events_total += events;
    let next = if row.next_batch >= row.batches {
        // The attempt that delivered the last batch counts.
        row.attempts += 1;
        finish(
            kv,
            ctx,
            &mut w,
            &mut tally,
            id,
            row,
            JobState::Succeeded,
            None,
        )?;
        None
    } else {
        let next = row.next_batch;
        w.put(Table::Jobs, id.as_bytes().to_vec(), encode_job(&row)?);
        Some(next)
    };
    tally.flush(&mut w)?;
    Ok((next, w))
}

/// Records a failed attempt: backoff, or failed once out of attempts.
pub fn fail(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    id: &JobId,
    error: JobError,
) -> Result<(JobState, Writes)> {
    let mut row = active_row(kv, id)?;
    let mut w = Writes::default();
    let mut tally = Tally::new(kv)?;
    row.attempts += 1;
    row.last_error = Some(error);
    row.updated_ms = ctx.wall;
    let state = if row.attempts >= row.max_attempts {
        finish(kv, ctx, &mut w, &mut tally, id, row, JobState::Failed, None)?;
        JobState::Failed
    } else {
        w.del(Table::Schedule, schedule_key(&row, id));
        row.due = ctx.now
            + backoff_ms(
                row.attempts,
                ctx.limits.backoff_base_ms,
                ctx.limits.max_backoff_ms,
            );
        w.put(
            Table::Schedule,
            schedule_key(&row, id),
            row.target.as_bytes().to_vec(),
        );
        w.put(Table::Jobs, id.as_bytes().to_vec(), encode_job(&row)?);
        tally.counters.retried_total += 1;
        JobState::Pending
    };
    tally.flush(&mut w)?;
    Ok((state, w))
}

/// Cancels `id` if it is active; returns its row after.
pub fn cancel(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    id: &JobId,
    reason: CancelReason,
) -> Result<(Option<JobRow>, Writes)> {
    let mut w = Writes::default();
    let Some(row) = load_job(kv, id)? else {
        return Ok((None, w));
    };
    if row.state != JobState::Pending {
        return Ok((Some(row), w));
    }
    let mut tally = Tally::new(kv)?;
    let mut after = row.clone();
    finish(
        kv,
        ctx,
        &mut w,
        &mut tally,
        id,
        row,
        JobState::Cancelled,
        Some(reason),
    )?;
    tally.flush(&mut w)?;
    after.state = JobState::Cancelled;
    after.cancel_reason = Some(reason);
    Ok((Some(after), w))
}

/// Cancels every active job of `scope` (of `session`) as erased and, with
/// `epoch`, records the epoch the scope reached.
pub fn erase(
    kv: &dyn KvRead,
    ctx: &Ctx<'_>,
    scope: &MemoryScope,
    session: Option<&SessionId>,
    epoch: Option<u64>,
) -> Result<(Vec<JobId>, Writes)> {
    let sk = scope_key(scope);
    let mut w = Writes::default();
    if let Some(e) = epoch
        && e > floor(kv, &sk)?
    {
        w.put(Table::Floors, sk.to_vec(), e.to_le_bytes().to_vec());
    }
    let prefix = match session {
        Some(s) => cat(&[&sk, &session_key(s.as_str())]),
        None => sk.to_vec(),
    };
    let end = prefix_end(&prefix);
    let keys = kv.range(Table::Active, &prefix, end.as_deref(), usize::MAX)?;
    let mut tally = Tally::new(kv)?;
    let mut cancelled = Vec::new();
    for (key, _) in keys {
        let id = job_of_key(&key, 32)?;
        if let Some(row) = load_job(kv, &id)?
            && row.state == JobState::Pending
            && row.in_scope(scope)
        {
            finish(
                kv,
                ctx,
                &mut w,
                &mut tally,
                &id,
                row,
                JobState::Cancelled,
                Some(CancelReason::Erased),
            )?;
            cancelled.push(id);
        }
    }
    tally.flush(&mut w)?;
    Ok((cancelled, w))
}

/// Removes finished jobs older than the retention, oldest first.
pub fn prune(kv: &dyn KvRead, ctx: &Ctx<'_>, limit: usize) -> Result<(Pruned, Writes)> {
    let mut w = Writes::default();
    // The store's clock starts at 0: nothing is older than a retention
    // longer than the clock has run.
    let Some(cutoff) = ctx.now.checked_sub(ctx.limits.terminal_retention_ms) else {
        return Ok((
            Pruned {
                pruned: 0,
                more: false,
            },
            w,
        ));
    };
    let keys = kv.range(Table::Terminal, &[], None, limit.saturating_add(1))?;
    let mut tally = Tally::new(kv)?;
    let mut pruned = 0u64;
    let mut more = false;
    for (i, (key, _)) in keys.iter().enumerate() {
        if time_of_key(key)? > cutoff {
            break;
        }
        if i == limit {
            more = true;
            break;
        }
        let id = job_of_key(key, 8)?;
        drop_finished(kv, &mut w, &mut tally, key, &id)?;
        pruned += 1;
    }
    if pruned > 0 {
        tally.flush(&mut w)?;
    }
    Ok((Pruned { pruned, more }, w))
}

/// The status of a job of `scope` (`NotFound` for another scope's).
pub fn status(
    kv: &dyn KvRead,
    scope: &MemoryScope,
    id: &JobId,
    leases: &Leases,
) -> Result<JobStatus> {
    let row = load_job(kv, id)?
        .filter(|r| r.in_scope(scope))
        .ok_or(Error::NotFound("job"))?;
    Ok(to_status(&row, id, leases))
}

/// A row as a status.
pub fn to_status(row: &JobRow, id: &JobId, leases: &Leases) -> JobStatus {
    let (state, attempts) = shown(row, id, leases);
    JobStatus {
        id: *id,
        state,
        session: SessionId::new(row.session.clone())
            .unwrap_or_else(|_| SessionId::new("?").unwrap_or_else(|_| unreachable!())),
        target: TargetName::new(row.target.clone())
            .unwrap_or_else(|_| TargetName::new("unknown").unwrap_or_else(|_| unreachable!())),
        epoch: row.epoch,
        attempts,
        max_attempts: row.max_attempts,
        events: row.events,
        delivered_events: row.delivered_events,
        batches: row.batches,
        delivered_batches: row.next_batch,
        result: row.result.clone(),
        created_ms: row.created_ms,
        updated_ms: row.updated_ms,
        cancel_reason: row.cancel_reason,
        last_error: row.last_error.clone(),
        skips: row.skips.clone(),
    }
}

/// The counters with what only the leases know.
pub fn stats(kv: &dyn KvRead, now: u64, leases: &Leases) -> Result<OutboxStats> {
    let c = counters(kv)?;
    let running = leases.running().min(c.pending);
    // The oldest due entry nobody holds: at most `running` held ones
    // come first.
    let mut oldest_due_age_ms = 0;
    let limit = usize::try_from(running)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    for (key, _) in kv.range(Table::Schedule, &[], None, limit)? {
        let id = job_of_key(&key, SCHEDULE_ID_AT)?;
        if leases.is_held(&id) {
            continue;
        }
        oldest_due_age_ms = now.saturating_sub(time_of_key(&key)?);
        break;
    }
    Ok(OutboxStats {
        pending: c.pending - running,
        running,
        succeeded: c.succeeded,
        failed: c.failed,
        cancelled: c.cancelled,
        active_bytes: c.active_bytes,
        admitted_total: c.admitted_total,
        delivered_events_total: c.delivered_events_total,
        retried_total: c.retried_total,
        failed_total: c.failed_total,
        cancelled_requested_total: c.cancelled_requested_total,
        cancelled_erased_total: c.cancelled_erased_total,
        pruned_total: c.pruned_total,
        oldest_due_age_ms,
    })
}

/// The work item of batch `row.next_batch` of a claimed job.
pub fn work_item(
    kv: &dyn KvRead,
    id: &JobId,
    row: &JobRow,
    owner: crate::model::Owner,
    attempt: u32,
) -> Result<crate::model::WorkItem> {
    let corrupt = |what: &str| Error::Corrupt(format!("job {id} names an invalid {what}"));
    Ok(crate::model::WorkItem {
        job: *id,
        owner,
        target: TargetName::new(row.target.clone()).map_err(|_| corrupt("target"))?,
        scope: row.scope()?,
        session: SessionId::new(row.session.clone()).map_err(|_| corrupt("session"))?,
        epoch: row.epoch,
        session_epoch: row.session_epoch,
        batch: row.next_batch,
        batches: row.batches,
        events: load_batch(kv, id, row.next_batch)?,
        attempt,
    })
}
