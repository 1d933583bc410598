//! SIGKILL a writing process at random moments: no acknowledged write is
//! lost, no erased entry comes back, search and entries agree.

#![allow(clippy::unwrap_used)]

mod support;

/// The child side: does nothing unless started by a trial.
#[test]
fn crash_child() {
    support::crash::child_main();
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let trials: u64 = std::env::var("HIPPOCAMP_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let mut acked = 0;
    let mut landed = 0;
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0x00C0_FFEE,
        |dir, seed| {
            support::crash::trial(
                dir,
                seed,
                &["crash_child", "--exact", "--nocapture", "--test-threads=1"],
            )
        },
        |r| {
            acked += r.acked;
            landed += r.in_flight_landed;
        },
    );
    assert_eq!(failed, 0, "{failed} of {trials} trials failed (see above)");
    eprintln!(
        "{trials} trials: {acked} acknowledged operations all recovered; {landed} in-flight operations had also landed"
    );
    assert!(acked > 0);
}
