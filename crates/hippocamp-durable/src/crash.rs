//! The parent side of process-crash trials (feature `sim`), shared by the
//! stores' crash tests: re-run the calling executable as a child that
//! writes and prints `ACK <stream> <op>` after each acknowledged
//! operation, kill it with SIGKILL at a random moment after its first
//! acknowledgement, and report how far each stream had been acknowledged.
//! The child reads its directory from `HIPPOCAMP_CRASH_CHILD` and its seed
//! from `HIPPOCAMP_CRASH_SEED`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Runs the child on `dir` with `child_args` (the arguments that make the
/// executable run only its child part), kills it within `kill_within`
/// after its first acknowledgement, and returns, per stream, the number of
/// operations acknowledged (operation `i` acknowledged means `i + 1`).
pub fn kill_child(
    dir: &Path,
    seed: u64,
    child_args: &[&str],
    streams: usize,
    kill_within: Duration,
) -> Result<Vec<usize>, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(child_args)
        .env("HIPPOCAMP_CRASH_CHILD", dir)
        .env("HIPPOCAMP_CRASH_SEED", seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let acks: Arc<Mutex<Vec<Option<usize>>>> = Arc::new(Mutex::new(vec![None; streams]));
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let reader = {
        let acks = Arc::clone(&acks);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The test harness may print on the same line before us.
                let Some(at) = line.rfind("ACK ") else {
                    continue;
                };
                let parts: Vec<&str> = line[at..].split_whitespace().collect();
                if let ["ACK", s, i] = parts[..]
                    && let (Ok(s), Ok(i)) = (s.parse::<usize>(), i.parse::<usize>())
                    && let Some(slot) = acks.lock().get_mut(s)
                {
                    *slot = Some(i);
                }
            }
        })
    };
    // Wait for the first acknowledgement, then kill at a random moment.
    let start = Instant::now();
    while acks.lock().iter().all(Option::is_none) && start.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("child exited early: {status}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let max = u64::try_from(kill_within.as_micros())
        .unwrap_or(u64::MAX)
        .max(1);
    std::thread::sleep(Duration::from_micros(rng.random_range(0..max)));
    child.kill().map_err(|e| e.to_string())?;
    child.wait().map_err(|e| e.to_string())?;
    reader.join().map_err(|_| "reader panicked".to_owned())?;
    Ok(acks.lock().iter().map(|a| a.map_or(0, |i| i + 1)).collect())
}

/// Runs `trials` trials, trial `t` with seed `seed_base + t` in a fresh
/// temporary directory (`trial` gets its path and the seed). Each result
/// goes to `tally`; each failure is printed with its seed and counted;
/// progress is printed every 100 trials. Returns the failures.
pub fn run_trials<T>(
    trials: u64,
    seed_base: u64,
    mut trial: impl FnMut(&Path, u64) -> Result<T, String>,
    mut tally: impl FnMut(T),
) -> u64 {
    let mut failed = 0;
    for t in 0..trials {
        let seed = seed_base + t;
        let outcome = tempfile::tempdir()
            .map_err(|e| format!("cannot create a directory: {e}"))
            .and_then(|dir| trial(dir.path(), seed));
        match outcome {
            Ok(r) => tally(r),
            Err(e) => {
                failed += 1;
                eprintln!("trial {t} (seed {seed}) FAILED: {e}");
            }
        }
        if (t + 1) % 100 == 0 {
            eprintln!("{} trials done", t + 1);
        }
    }
    failed
}
