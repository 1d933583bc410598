//! Process-crash trials: a child process runs acknowledged writes and
//! prints each acknowledgement; the parent kills it with SIGKILL at a random
//! moment, reopens the store and checks every stream against the model.
//!
//! The child is the calling executable itself, re-run with
//! `HIPPOCAMP_CRASH_CHILD` set (a test binary passes the name of its child
//! test so only that one runs).

#![allow(dead_code, clippy::unwrap_used, clippy::missing_panics_doc)]

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hippocamp_memory::MemoryConfig;
use hippocamp_memory_redb::RedbMemoryStore;
use parking_lot::Mutex;

use super::workload::{self, WOp};

/// Concurrent writer streams in the child (so commits are grouped).
pub const STREAMS: usize = 4;
/// Operations per stream (more than a child gets through before the kill).
pub const OPS: usize = 400;

/// If this process is a crash child, runs the workload and exits.
pub fn child_main() {
    let Ok(dir) = std::env::var("HIPPOCAMP_CRASH_CHILD") else {
        return;
    };
    let seed: u64 = std::env::var("HIPPOCAMP_CRASH_SEED")
        .unwrap()
        .parse()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // Half the trials checkpoint often, so kills also land in
        // checkpoints and log truncations.
        let options = hippocamp_memory_redb::DurableOptions {
            checkpoint_groups: if seed.is_multiple_of(2) { 8 } else { 1_024 },
            ..hippocamp_memory_redb::DurableOptions::default()
        };
        let store = Arc::new(
            RedbMemoryStore::open_with_options(&dir, MemoryConfig::default(), options).unwrap(),
        );
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for stream in 0..STREAMS {
            let store = Arc::clone(&store);
            let out = Arc::clone(&out);
            tasks.push(tokio::spawn(async move {
                for (i, op) in workload::ops(seed, stream, OPS).iter().enumerate() {
                    workload::run(&*store, stream, op).await;
                    let mut o = out.lock();
                    writeln!(o, "ACK {stream} {i}").unwrap();
                    o.flush().unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
    std::process::exit(0);
}

/// The outcome of one trial.
#[derive(Debug, Default, Clone, Copy)]
pub struct Trial {
    /// Acknowledged operations.
    pub acked: usize,
    /// Streams whose in-flight operation had also landed.
    pub in_flight_landed: usize,
}

/// Runs one trial in `dir`: start the child, kill it at a random moment,
/// reopen and check. `child_args` are the arguments that make the
/// executable run only its child part.
pub fn trial(dir: &Path, seed: u64, child_args: &[&str]) -> Result<Trial, String> {
    let acked = hippocamp_durable::crash::kill_child(
        dir,
        seed,
        child_args,
        STREAMS,
        Duration::from_millis(150),
    )?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store =
            RedbMemoryStore::open(dir, MemoryConfig::default()).map_err(|e| e.to_string())?;
        let mut out = Trial::default();
        let mut total = 0;
        for (stream, &acked) in acked.iter().enumerate() {
            let ops: Vec<WOp> = workload::ops(seed, stream, OPS);
            let all = workload::universe(stream, &ops);
            let observed = workload::observe(&store, stream, &all).await?;
            let matched = workload::check(stream, &ops, acked, &observed)?;
            total += observed.total();
            out.acked += acked;
            if matched > acked {
                out.in_flight_landed += 1;
            }
        }
        let status = hippocamp_memory::MemoryStore::status(&store)
            .await
            .map_err(|e| e.to_string())?;
        if status.entries != total {
            return Err(format!(
                "status counts {} entries, the streams hold {total}",
                status.entries
            ));
        }
        Ok(out)
    })
}
