//! Power loss: the job store comes back in the state of a prefix of its
//! operations, never shorter than the last one whose durability it
//! acknowledged. A simulated disk drops everything not synced (or keeps a
//! torn part of it) at a random sync of a workload of admissions,
//! deliveries, failures, cancellations and erasures; the reopened store
//! must equal the in-memory store (the same engine, no disk) after some
//! prefix at least as long as the last durable acknowledgement before the
//! cut.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hippocamp_core::{Error, MemoryScope, SessionId};
use hippocamp_durable::sim::PowerLoss;
use hippocamp_outbox::model::{Delivered, JobId, Next, Owner, StoredEvent, Submission};
use hippocamp_outbox::{InMemoryJobStore, JobError, JobState, JobStore, OutboxLimits, TargetName};
use hippocamp_outbox_redb::{DurableOptions, RedbJobStore};
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone)]
enum WOp {
    Admit {
        user: usize,
        session: usize,
        first: usize,
    },
    Deliver,
    Fail,
    Cancel {
        pick: usize,
    },
    EraseSession {
        user: usize,
        session: usize,
    },
}

impl WOp {
    /// Whether its acknowledgement waits for a sync.
    fn durable(&self) -> bool {
        !matches!(self, WOp::Deliver)
    }
}

fn ops(seed: u64, n: usize) -> Vec<WOp> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| match rng.random_range(0..10) {
            0..=3 => WOp::Admit {
                user: rng.random_range(0..2),
                session: rng.random_range(0..2),
                first: i * 4,
            },
            4..=6 => WOp::Deliver,
            7 => WOp::Fail,
            8 => WOp::Cancel {
                pick: rng.random_range(0..64),
            },
            _ => WOp::EraseSession {
                user: rng.random_range(0..2),
                session: rng.random_range(0..2),
            },
        })
        .collect()
}

fn limits() -> OutboxLimits {
    OutboxLimits {
        max_events_per_job: 2,
        // Retries stay out of the workload's reach: timing never matters.
        backoff_base_ms: 3_600_000,
        max_backoff_ms: 3_600_000,
        ..OutboxLimits::default()
    }
}

fn scope(user: usize) -> MemoryScope {
    MemoryScope::parse("app", ["alice", "bob"][user]).unwrap()
}

fn targets() -> BTreeSet<TargetName> {
    [TargetName::new("memory").unwrap()].into_iter().collect()
}

const LONG: Duration = Duration::from_mins(1);

/// Applies one operation; returns the jobs it admitted.
async fn apply(store: &dyn JobStore, op: &WOp, jobs: &[(JobId, usize)]) -> Vec<(JobId, usize)> {
    match op {
        WOp::Admit {
            user,
            session,
            first,
        } => {
            let events = (*first..first + 4)
                .map(|i| StoredEvent {
                    id: format!("e{i}"),
                    author: "user".into(),
                    timestamp_ms: 1,
                    text: format!("event {i}"),
                    metadata: None,
                })
                .collect();
            let a = store
                .admit(Submission {
                    target: TargetName::new("memory").unwrap(),
                    scope: scope(*user),
                    session: SessionId::new(format!("s{session}")).unwrap(),
                    epoch: 0,
                    session_epoch: 0,
                    events,
                    max_attempts: None,
                })
                .await
                .unwrap();
            a.jobs.iter().map(|j| (j.id, *user)).collect()
        }
        WOp::Deliver => {
            let owner = Owner::random();
            if let Some(item) = store.claim(owner, LONG, &targets()).await.unwrap() {
                let r = store
                    .complete_batch(&item.job, &owner, item.batch, Delivered::default(), LONG)
                    .await
                    .unwrap();
                assert!(matches!(r, Next::Done));
            }
            Vec::new()
        }
        WOp::Fail => {
            let owner = Owner::random();
            if let Some(item) = store.claim(owner, LONG, &targets()).await.unwrap() {
                store
                    .fail(&item.job, &owner, JobError::of(&Error::Overloaded("x")))
                    .await
                    .unwrap();
            }
            Vec::new()
        }
        WOp::Cancel { pick } => {
            if !jobs.is_empty() {
                let (job, user) = jobs[pick % jobs.len()];
                store.cancel(&scope(user), &job).await.unwrap();
            }
            Vec::new()
        }
        WOp::EraseSession { user, session } => {
            let sid = SessionId::new(format!("s{session}")).unwrap();
            store.erase(&scope(*user), Some(&sid), None).await.unwrap();
            Vec::new()
        }
    }
}

/// What a store holds: every known job's state and attempts, and the
/// counters.
type Snapshot = (BTreeMap<JobId, (JobState, u32)>, [u64; 4], usize);

async fn snapshot(store: &dyn JobStore, jobs: &[(JobId, usize)], held: usize) -> Snapshot {
    let mut states = BTreeMap::new();
    for (job, user) in jobs {
        if let Ok(st) = store.status(&scope(*user), job).await {
            states.insert(*job, (st.state, st.attempts));
        }
    }
    let s = store.stats().await.unwrap();
    (
        states,
        [s.pending + s.running, s.succeeded, s.failed, s.cancelled],
        held,
    )
}

/// The in-memory store's snapshot after each prefix of `ops`, and every
/// job any prefix names.
async fn prefixes(ops: &[WOp]) -> (Vec<Snapshot>, Vec<(JobId, usize)>) {
    let mut all = Vec::new();
    let first = InMemoryJobStore::new(limits()).unwrap();
    for op in ops {
        let new = apply(&first, op, &all).await;
        all.extend(new);
    }
    let store = InMemoryJobStore::new(limits()).unwrap();
    let mut jobs = Vec::new();
    let mut out = vec![snapshot(&store, &all, store.held_batches()).await];
    for op in ops {
        let new = apply(&store, op, &jobs).await;
        jobs.extend(new);
        out.push(snapshot(&store, &all, store.held_batches()).await);
    }
    (out, all)
}

fn open(disk: &PowerLoss) -> hippocamp_core::Result<RedbJobStore> {
    let options = DurableOptions {
        checkpoint_groups: 5,
        ..DurableOptions::default()
    };
    RedbJobStore::open_with_backend(disk.backend(), disk.wal(), limits(), options)
}

fn created() -> PowerLoss {
    let d = PowerLoss::new();
    drop(open(&d).unwrap());
    PowerLoss::with_image(d.surviving())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs the workload; returns each operation's sync count at its ack.
async fn run(disk: &PowerLoss, ops: &[WOp]) -> Vec<u64> {
    let store = open(disk).unwrap();
    let mut jobs = Vec::new();
    let mut acks = Vec::new();
    for op in ops {
        let before = disk.syncs();
        jobs.extend(apply(&store, op, &jobs).await);
        let after = disk.syncs();
        if op.durable() && !disk.cut() {
            // Only a change is synced (a cancel of a finished job changes
            // nothing).
            assert!(after >= before, "{op:?}");
        }
        acks.push(after);
    }
    acks
}

#[test]
fn a_power_cut_leaves_a_prefix_no_shorter_than_the_last_durable_ack() {
    const OPS: usize = 40;
    let rt = runtime();
    for seed in 0..6u64 {
        let ops = ops(seed, OPS);
        let (snapshots, all) = rt.block_on(prefixes(&ops));
        let total_syncs = {
            let d = created();
            rt.block_on(run(&d, &ops));
            d.syncs()
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for t in 0..12 {
            let cut = rng.random_range(0..total_syncs.max(1));
            let tear = rng.random_bool(0.5);
            let disk = created();
            disk.arm(cut, tear, t);
            let acks = rt.block_on(run(&disk, &ops));
            // The last durable operation acknowledged before the cut.
            let horizon = ops
                .iter()
                .zip(&acks)
                .enumerate()
                .filter(|(_, (op, ack))| op.durable() && **ack <= cut)
                .map(|(i, _)| i + 1)
                .max()
                .unwrap_or(0);
            let after = PowerLoss::with_image(disk.surviving());
            let store = open(&after).unwrap();
            let got = rt.block_on(snapshot(&store, &all, store.held_batches()));
            let matched = (horizon..=OPS).find(|&k| snapshots[k] == got);
            assert!(
                matched.is_some(),
                "seed {seed} trial {t} (cut {cut}, tear {tear}): the state is no prefix from {horizon} on: {got:?}"
            );
        }
    }
}
