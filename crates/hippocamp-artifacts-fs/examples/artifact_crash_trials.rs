//! Process-crash tally of the filesystem artifact store:
//! `cargo run --release -p hippocamp-artifacts-fs --example artifact_crash_trials
//! -- [TRIALS]` (default 1,000). Each trial starts a child that puts and
//! deletes artifacts from 4 concurrent streams and prints every
//! acknowledgement, kills it with SIGKILL at a random moment, reopens the
//! store and checks that every acknowledged put is listed, readable and
//! verified, that no acknowledged delete is undone, that nothing else is
//! visible, that no version is reused, and that repair then finds nothing
//! corrupt. Prints the tally; exits non-zero on any failure.

#![allow(clippy::unwrap_used)]

#[path = "../tests/support/mod.rs"]
mod support;

fn main() {
    support::crash::child_main();
    let trials: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000);
    let started = std::time::Instant::now();
    let (mut acked, mut puts, mut landed, mut repaired) = (0usize, 0usize, 0usize, 0u64);
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0x5eed_a000,
        |dir, seed| support::crash::trial(&dir.join("data"), seed, &[]),
        |r| {
            acked += r.acked;
            puts += r.puts_checked;
            landed += r.in_flight_landed;
            repaired += r.repaired;
        },
    );
    println!(
        "{trials} SIGKILL trials in {:.0} s: {failed} failed (a lost or unreadable acknowledged put, an undone delete, a partial or unexpected version, a reused number, or corruption found by repair); {acked} acknowledged operations; {puts} live acknowledged puts read back verified; {landed} in-flight operations had also landed; repair removed {repaired} unreferenced files",
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
