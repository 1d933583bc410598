//! Model-based test: random sequences of admit, claim, renew, unclaim,
//! complete, fail, expire, erase, cancel and prune against a job store and a plain
//! reference model, checking after every step that every job's state, the
//! counters and the held event payloads agree, and that a stale owner can
//! never act.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{Error, MemoryScope, SessionId};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::{JobStoreFactory, Opened, submission, targets};
use crate::limits::OutboxLimits;
use crate::model::{CancelReason, Delivered, JobError, JobId, JobState, Next, Owner};

const USERS: &[&str] = &["alice", "bob"];
const SESSIONS: &[&str] = &["s0", "s1"];
const PER_JOB: usize = 3;
const MAX_ATTEMPTS: u32 = 2;

#[derive(Debug, Clone)]
enum Op {
    Admit {
        user: usize,
        session: usize,
        events: Vec<u8>,
    },
    Claim,
    /// A claim whose lease runs out at once.
    ClaimExpiring,
    Complete {
        pick: usize,
    },
    Fail {
        pick: usize,
    },
    Renew {
        pick: usize,
    },
    Unclaim {
        pick: usize,
    },
    Stale {
        pick: usize,
    },
    EraseSession {
        user: usize,
        session: usize,
    },
    EraseUser {
        user: usize,
    },
    Cancel {
        pick: usize,
    },
    Prune,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..USERS.len(), 0..SESSIONS.len(), proptest::collection::vec(0u8..8, 1..7))
            .prop_map(|(user, session, events)| Op::Admit { user, session, events }),
        3 => Just(Op::Claim),
        1 => Just(Op::ClaimExpiring),
        3 => (0usize..4).prop_map(|pick| Op::Complete { pick }),
        2 => (0usize..4).prop_map(|pick| Op::Fail { pick }),
        1 => (0usize..4).prop_map(|pick| Op::Renew { pick }),
        1 => (0usize..4).prop_map(|pick| Op::Unclaim { pick }),
        1 => (0usize..4).prop_map(|pick| Op::Stale { pick }),
        1 => (0..USERS.len(), 0..SESSIONS.len())
            .prop_map(|(user, session)| Op::EraseSession { user, session }),
        1 => (0..USERS.len()).prop_map(|user| Op::EraseUser { user }),
        1 => (0usize..8).prop_map(|pick| Op::Cancel { pick }),
        1 => Just(Op::Prune),
    ]
}

#[derive(Debug, Clone)]
struct MJob {
    user: usize,
    session: usize,
    events: Vec<String>,
    state: JobState,
    attempts: u32,
    reason: Option<CancelReason>,
}

#[derive(Debug, Default)]
struct Model {
    jobs: BTreeMap<JobId, MJob>,
    /// Admitted event ids per (user, session).
    watermark: BTreeSet<(usize, usize, String)>,
    epochs: Vec<u64>,
    /// Claims the test holds: job, owner, whether the lease is long.
    held: Vec<(JobId, Owner)>,
    /// Claims whose lease has run out.
    expired: Vec<(JobId, Owner)>,
    pruned: BTreeSet<JobId>,
}

fn scope(user: usize) -> MemoryScope {
    MemoryScope::parse("app", USERS[user]).unwrap_or_else(|_| unreachable!())
}

/// Runs `cases` random sequences of up to 30 operations
/// (`PROPTEST_CASES` overrides the count).
pub fn run(factory: Arc<dyn JobStoreFactory>, cases: u32) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&proptest::collection::vec(op(), 1..30), |ops| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        rt.block_on(check(factory.clone(), ops))
    });
    if let Err(e) = result {
        panic!("job store model test failed: {e}");
    }
}

const LONG: Duration = Duration::from_mins(1);

async fn check(factory: Arc<dyn JobStoreFactory>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let opened = factory
        .open(OutboxLimits {
            max_events_per_job: PER_JOB as u64,
            max_attempts: u64::from(MAX_ATTEMPTS),
            backoff_base_ms: 1,
            max_backoff_ms: 1,
            terminal_retention_ms: 0,
            ..OutboxLimits::default()
        })
        .await;
    let mut model = Model {
        epochs: vec![0; USERS.len()],
        ..Model::default()
    };
    for op in ops {
        apply(&opened, &mut model, op).await?;
        verify(&opened, &model).await?;
    }
    Ok(())
}

fn fail(e: Error) -> TestCaseError {
    TestCaseError::fail(format!("unexpected error: {e}"))
}

fn end_claim(model: &mut Model, job: &JobId) {
    model.held.retain(|(j, _)| j != job);
    model.expired.retain(|(j, _)| j != job);
}

/// Finishes a model job; a failed one leaves the watermark.
fn finish(model: &mut Model, job: &JobId, state: JobState, reason: Option<CancelReason>) {
    if let Some(j) = model.jobs.get_mut(job) {
        j.state = state;
        j.reason = reason;
        if state == JobState::Failed {
            let (u, s, events) = (j.user, j.session, j.events.clone());
            for e in events {
                model.watermark.remove(&(u, s, e));
            }
        }
    }
    end_claim(model, job);
}

#[allow(clippy::too_many_lines)]
async fn apply(o: &Opened, model: &mut Model, op: Op) -> Result<(), TestCaseError> {
    let store = &o.store;
    match op {
        Op::Admit {
            user,
            session,
            events,
        } => {
            let ids: Vec<String> = events.iter().map(|e| format!("e{e}")).collect();
            let got = store
                .admit(submission(
                    &scope(user),
                    SESSIONS[session],
                    &ids,
                    model.epochs[user],
                ))
                .await
                .map_err(fail)?;
            let mut seen = BTreeSet::new();
            let fresh: Vec<String> = ids
                .iter()
                .filter(|i| seen.insert((*i).clone()))
                .filter(|i| !model.watermark.contains(&(user, session, (*i).clone())))
                .cloned()
                .collect();
            prop_assert_eq!(got.new_events, fresh.len() as u64);
            let new_jobs = got.jobs.iter().filter(|j| {
                model
                    .jobs
                    .get(&j.id)
                    .is_none_or(|m| m.state == JobState::Failed)
            });
            let created: Vec<JobId> = new_jobs.map(|j| j.id).collect();
            prop_assert_eq!(created.len(), fresh.len().div_ceil(PER_JOB));
            for (id, chunk) in created.iter().zip(fresh.chunks(PER_JOB)) {
                model.jobs.insert(
                    *id,
                    MJob {
                        user,
                        session,
                        events: chunk.to_vec(),
                        state: JobState::Pending,
                        attempts: 0,
                        reason: None,
                    },
                );
                model.pruned.remove(id);
            }
            for e in fresh {
                model.watermark.insert((user, session, e));
            }
        }
        Op::Claim | Op::ClaimExpiring => {
            let expiring = matches!(op, Op::ClaimExpiring);
            let owner = Owner::random();
            let lease = if expiring {
                Duration::from_millis(1)
            } else {
                LONG
            };
            let got = store.claim(owner, lease, &targets()).await.map_err(fail)?;
            let claimed = got.as_ref().map(|i| i.job);
            // A job whose expired claim was its last attempt is failed by
            // the pass that meets it (whether this one did depends on the
            // scan's order): either outcome, never claimed.
            let exhausted: Vec<JobId> = model
                .expired
                .iter()
                .map(|(j, _)| *j)
                .filter(|j| model.jobs[j].attempts + 1 >= MAX_ATTEMPTS)
                .collect();
            for job in exhausted {
                prop_assert!(claimed != Some(job), "claimed a job out of attempts");
                let st = store
                    .status(&scope(model.jobs[&job].user), &job)
                    .await
                    .map_err(fail)?;
                if st.state == JobState::Failed {
                    model
                        .jobs
                        .get_mut(&job)
                        .unwrap_or_else(|| unreachable!())
                        .attempts += 1;
                    finish(model, &job, JobState::Failed, None);
                } else {
                    prop_assert_eq!(st.state, JobState::Pending);
                }
            }
            // What may be claimed: pending jobs no test claim holds (an
            // expired claim does not hold).
            let claimable: BTreeSet<JobId> = model
                .jobs
                .iter()
                .filter(|(id, j)| {
                    j.state == JobState::Pending && !model.held.iter().any(|(h, _)| h == *id)
                })
                .map(|(id, _)| *id)
                .collect();
            match got {
                None => {
                    // Only exhausted jobs the pass failed may be missing.
                    let left: Vec<&JobId> = claimable
                        .iter()
                        .filter(|j| {
                            !model.expired.iter().any(|(e, _)| e == *j)
                                || model.jobs[*j].attempts + 1 < MAX_ATTEMPTS
                        })
                        .collect();
                    prop_assert!(left.is_empty(), "nothing claimed of {:?}", left);
                }
                Some(item) => {
                    prop_assert!(claimable.contains(&item.job), "claimed a job it may not");
                    let was_expired = model.expired.iter().any(|(j, _)| *j == item.job);
                    model.expired.retain(|(j, _)| *j != item.job);
                    let m = model
                        .jobs
                        .get_mut(&item.job)
                        .unwrap_or_else(|| unreachable!());
                    if was_expired {
                        m.attempts += 1;
                    }
                    prop_assert_eq!(item.attempt, m.attempts + 1);
                    let events: Vec<String> = item.events.iter().map(|e| e.id.clone()).collect();
                    prop_assert_eq!(&events, &m.events);
                    if expiring {
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        model.expired.push((item.job, owner));
                    } else {
                        model.held.push((item.job, owner));
                    }
                }
            }
        }
        Op::Complete { pick } => {
            let Some(&(job, owner)) = model.held.get(pick) else {
                return Ok(());
            };
            let next = store
                .complete_batch(&job, &owner, 0, Delivered::default(), LONG)
                .await
                .map_err(fail)?;
            prop_assert!(matches!(next, Next::Done));
            finish(model, &job, JobState::Succeeded, None);
        }
        Op::Fail { pick } => {
            let Some(&(job, owner)) = model.held.get(pick) else {
                return Ok(());
            };
            let state = store
                .fail(&job, &owner, JobError::of(&Error::Overloaded("test")))
                .await
                .map_err(fail)?;
            let m = model.jobs.get_mut(&job).unwrap_or_else(|| unreachable!());
            m.attempts += 1;
            if m.attempts >= MAX_ATTEMPTS {
                prop_assert_eq!(state, JobState::Failed);
                finish(model, &job, JobState::Failed, None);
            } else {
                prop_assert_eq!(state, JobState::Pending);
                end_claim(model, &job);
                // Past its (1 ms) backoff before the next step.
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }
        Op::Renew { pick } => {
            let Some(&(job, owner)) = model.held.get(pick) else {
                return Ok(());
            };
            store.renew(&job, &owner, LONG).await.map_err(fail)?;
        }
        Op::Unclaim { pick } => {
            let Some(&(job, owner)) = model.held.get(pick) else {
                return Ok(());
            };
            // Due again at once, the attempt not counted.
            store.unclaim(&job, &owner).await.map_err(fail)?;
            end_claim(model, &job);
        }
        Op::Stale { pick } => {
            // An expired owner, or a stranger on a held job: refused.
            let (job, owner) = match (model.expired.get(pick), model.held.get(pick)) {
                (Some(&(j, o)), _) => (j, o),
                (None, Some(&(j, _))) => (j, Owner::random()),
                (None, None) => return Ok(()),
            };
            let r = store.renew(&job, &owner, LONG).await;
            prop_assert!(matches!(r, Err(Error::LeaseLost(_))), "renew: {:?}", r);
            if model.expired.get(pick).is_none() {
                // A stranger cannot give it back (an expired owner could:
                // its claim was never started, as far as the store knows).
                let r = store.unclaim(&job, &owner).await;
                prop_assert!(matches!(r, Err(Error::LeaseLost(_))), "unclaim: {:?}", r);
            }
            let r = store
                .complete_batch(&job, &owner, 0, Delivered::default(), LONG)
                .await;
            prop_assert!(
                matches!(r, Err(Error::LeaseLost(_))),
                "complete: {:?}",
                r.map(drop)
            );
            let r = store
                .fail(&job, &owner, JobError::of(&Error::Overloaded("x")))
                .await;
            prop_assert!(matches!(r, Err(Error::LeaseLost(_))), "fail: {:?}", r);
        }
        Op::EraseSession { user, session } => {
            let sid = SessionId::new(SESSIONS[session]).unwrap_or_else(|_| unreachable!());
            let n = store
                .erase(&scope(user), Some(&sid), None)
                .await
                .map_err(fail)?;
            let gone: Vec<JobId> = model
                .jobs
                .iter()
                .filter(|(_, j)| {
                    j.user == user && j.session == session && j.state == JobState::Pending
                })
                .map(|(id, _)| *id)
                .collect();
            prop_assert_eq!(n, gone.len() as u64);
            for id in gone {
                finish(model, &id, JobState::Cancelled, Some(CancelReason::Erased));
            }
        }
        Op::EraseUser { user } => {
            model.epochs[user] += 1;
            let n = store
                .erase(&scope(user), None, Some(model.epochs[user]))
                .await
                .map_err(fail)?;
            let gone: Vec<JobId> = model
                .jobs
                .iter()
                .filter(|(_, j)| j.user == user && j.state == JobState::Pending)
                .map(|(id, _)| *id)
                .collect();
            prop_assert_eq!(n, gone.len() as u64);
            for id in gone {
                finish(model, &id, JobState::Cancelled, Some(CancelReason::Erased));
            }
            // A submission captured at the old epoch is refused.
            let r = store
                .admit(submission(
                    &scope(user),
                    "s0",
                    &["late".to_owned()],
                    model.epochs[user] - 1,
                ))
                .await;
            prop_assert!(matches!(r, Err(Error::StaleEpoch { .. })), "{:?}", r);
        }
        Op::Cancel { pick } => {
            let Some((&job, m)) = model.jobs.iter().nth(pick) else {
                return Ok(());
            };
            if model.pruned.contains(&job) {
                return Ok(());
            }
            let user = m.user;
            let active = m.state == JobState::Pending;
            let st = store.cancel(&scope(user), &job).await.map_err(fail)?;
            if active {
                prop_assert_eq!(st.state, JobState::Cancelled);
                finish(
                    model,
                    &job,
                    JobState::Cancelled,
                    Some(CancelReason::Requested),
                );
            }
        }
        Op::Prune => {
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut total = 0;
            loop {
                let p = store.prune(None).await.map_err(fail)?;
                total += p.pruned;
                if !p.more {
                    break;
                }
            }
            let finished: Vec<JobId> = model
                .jobs
                .iter()
                .filter(|(id, j)| j.state.is_terminal() && !model.pruned.contains(*id))
                .map(|(id, _)| *id)
                .collect();
            prop_assert_eq!(total, finished.len() as u64);
            model.pruned.extend(finished);
        }
    }
    Ok(())
}

async fn verify(o: &Opened, model: &Model) -> Result<(), TestCaseError> {
    let store = &o.store;
    let mut held_batches = 0;
    let mut counts: BTreeMap<JobState, u64> = BTreeMap::new();
    for (id, m) in &model.jobs {
        let got = store.status(&scope(m.user), id).await;
        if model.pruned.contains(id) {
            prop_assert!(
                matches!(got, Err(Error::NotFound(_))),
                "pruned job still there"
            );
            continue;
        }
        let st = got.map_err(fail)?;
        let running = model.held.iter().any(|(j, _)| j == id);
        let want = if running { JobState::Running } else { m.state };
        prop_assert_eq!(st.state, want, "job {}", id);
        prop_assert_eq!(st.cancel_reason, m.reason);
        if m.state == JobState::Pending {
            held_batches += 1;
        }
        *counts.entry(want).or_default() += 1;
        let other = scope(1 - m.user);
        prop_assert!(matches!(
            store.status(&other, id).await,
            Err(Error::NotFound(_))
        ));
    }
    let s = store.stats().await.map_err(fail)?;
    let n = |state| counts.get(&state).copied().unwrap_or(0);
    prop_assert_eq!(s.running, n(JobState::Running));
    prop_assert_eq!(s.pending, n(JobState::Pending));
    prop_assert_eq!(s.succeeded, n(JobState::Succeeded));
    prop_assert_eq!(s.failed, n(JobState::Failed));
    prop_assert_eq!(s.cancelled, n(JobState::Cancelled));
    prop_assert_eq!((o.held_batches)(), held_batches);
    Ok(())
}
