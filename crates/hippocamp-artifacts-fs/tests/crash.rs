//! SIGKILL a process putting and deleting artifacts at random moments:
//! every acknowledged put stays readable and verified, no acknowledged
//! delete is undone, nothing partial becomes visible, no version number
//! is reused. `HIPPOCAMP_CRASH_TRIALS` sets the count (default 50); the
//! release example `artifact_crash_trials` runs 1,000.

#![allow(clippy::unwrap_used)]

mod support;

/// The child side: does nothing unless started by a trial.
#[test]
fn crash_child() {
    support::crash::child_main();
}

#[test]
fn sigkill_during_puts_and_deletes_loses_nothing_acknowledged() {
    let trials: u64 = std::env::var("HIPPOCAMP_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let (mut acked, mut puts, mut landed, mut repaired) = (0, 0, 0, 0);
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0xA27F_0000,
        |dir, seed| {
            support::crash::trial(
                &dir.join("data"),
                seed,
                &["crash_child", "--exact", "--nocapture", "--test-threads=1"],
            )
        },
        |r| {
            acked += r.acked;
            puts += r.puts_checked;
            landed += r.in_flight_landed;
            repaired += r.repaired;
        },
    );
    assert_eq!(failed, 0, "{failed} of {trials} trials failed (see above)");
    eprintln!(
        "{trials} trials: {acked} acknowledged operations, {puts} live acknowledged puts read back verified; {landed} in-flight operations had also landed; repair removed {repaired} unreferenced files"
    );
    assert!(acked > 0 && puts > 0);
}
