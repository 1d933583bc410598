//! Process-crash tally of the outbox: `cargo run --release -p
//! hippocamp-outbox-redb --example outbox_crash_trials -- [TRIALS]` (default
//! 1,000). Each trial starts a child that admits growing sessions through
//! the durable outbox from 4 streams (erasing its users now and then)
//! while the processor delivers into the durable memory store, kills it
//! with SIGKILL at a random moment, reopens both stores, lets the
//! processor finish, and checks that every acknowledged admission was
//! delivered, nothing was stored twice and nothing admitted before an
//! erasure came back. Prints the tally; exits non-zero on any failure.

#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

fn main() {
    support::child_main();
    let trials: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000);
    let started = std::time::Instant::now();
    let mut total = support::Checked::default();
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0x0B0C_0000,
        |dir, seed| support::trial(dir, seed, &[]),
        |c| {
            total.admissions += c.admissions;
            total.erasures += c.erasures;
            total.in_flight_landed += c.in_flight_landed;
        },
    );
    println!(
        "{trials} SIGKILL trials in {:.0} s: {failed} failed (a lost acknowledged admission, an entry stored twice, or one revived after an erasure); {} acknowledged admissions and {} erasures checked; {} in-flight operations had also landed",
        started.elapsed().as_secs_f64(),
        total.admissions,
        total.erasures,
        total.in_flight_landed
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
