//! Process-crash tally: `cargo run --release -p hippocamp-memory-redb
//! --example crash_trials -- [TRIALS]` (default 1,000) starts a child that
//! writes through the durable store from 4 concurrent streams and prints
//! each acknowledgement, kills it with SIGKILL at a random moment, reopens
//! the store and checks that every acknowledged write is present, no erased
//! entry reappears, and search agrees with the stored entries. It prints
//! the tally and exits non-zero on any failure.

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
    let (mut acked, mut landed) = (0usize, 0usize);
    let failed = hippocamp_durable::crash::run_trials(
        trials,
        0x5eed_0000,
        |dir, seed| support::crash::trial(dir, seed, &[]),
        |r| {
            acked += r.acked;
            landed += r.in_flight_landed;
        },
    );
    println!(
        "{trials} SIGKILL trials in {:.0} s: {failed} found a lost acknowledged write, a revived erased entry or search disagreeing with entries; {acked} acknowledged writes checked; {landed} in-flight writes had also landed",
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
