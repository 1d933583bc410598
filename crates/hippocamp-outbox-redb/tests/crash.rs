//! SIGKILL a process that admits through the outbox while the processor
//! delivers: every acknowledged admission is delivered after the restart,
//! nothing is stored twice, nothing admitted before an erasure comes back.
//! (`cargo run --release -p hippocamp-outbox-redb --example outbox_crash_trials`
//! runs 1,000 of these.)

#![allow(clippy::unwrap_used)]

mod support;

/// The child side: does nothing unless started by a trial.
#[test]
fn crash_child() {
    support::child_main();
}

#[test]
fn sigkill_during_admission_and_delivery_loses_and_revives_nothing() {
    let trials: u64 = std::env::var("HIPPOCAMP_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut total = support::Checked::default();
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0x0B0C_5000,
        |dir, seed| {
            support::trial(
                dir,
                seed,
                &["crash_child", "--exact", "--nocapture", "--test-threads=1"],
            )
        },
        |c| {
            total.admissions += c.admissions;
            total.erasures += c.erasures;
            total.in_flight_landed += c.in_flight_landed;
        },
    );
    assert_eq!(failed, 0, "{failed} of {trials} trials failed (see above)");
    eprintln!("{trials} trials: {total:?}");
    assert!(total.admissions > 0 && total.erasures > 0, "{total:?}");
}
