//! `hippocamp memory export` of one large user of the durable store, run
//! as its own process so its peak resident memory is the export's alone:
//! the store is filled once (100,000 entries of ~200-byte turns by
//! default), closed (a checkpoint, so the export replays no log), and
//! the export's lines are counted as they stream out of the child. Its
//! peak resident size is its own high-water mark (`VmHWM` of its
//! `/proc/<pid>/status`, a monotonic figure, read until it exits):
//! `ru_maxrss` of a child also counts the resident size of the process
//! that started it (the kernel records the old address space's high-water
//! mark at `exec`), which here is this one, after filling the store.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use hippocamp_core::{MemoryScope, SessionId};
use hippocamp_memory::WriteOptions;
use hippocamp_services::{Config, Profile, Services};
use serde::Serialize;

use crate::{BenchError, Result};

/// `export` results.
#[derive(Debug, Clone, Serialize)]
pub struct ExportBench {
    /// Entries of the user.
    pub entries: usize,
    /// Entry lines the export printed.
    pub entry_lines: u64,
    /// Bytes it printed.
    pub bytes: u64,
    /// Wall time of the export process, seconds.
    pub seconds: f64,
    /// Peak resident memory of the export process (its `VmHWM`), MiB
    /// (bar: < 64).
    pub peak_rss_mib: f64,
    /// The same store's files on disk, MiB.
    pub store_mib: f64,
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |rd| {
        rd.flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                Ok(m) => m.len(),
                Err(_) => 0,
            })
            .sum()
    })
}

/// Fills `data_dir` with `entries` entries of one user (if it is new),
/// then runs `exe memory export` on it and measures the child.
pub async fn export(exe: &Path, data_dir: &Path, entries: usize) -> Result<ExportBench> {
    let config = Config {
        profile: Profile::Durable,
        data_dir: data_dir.to_path_buf(),
        ..Config::default()
    };
    let scope = MemoryScope::parse("bench", "exported")?;
    let marker = data_dir.join(format!("filled-{entries}"));
    if !marker.exists() {
        let m = Services::memory(&config).await?;
        let texts = crate::turns(entries)?;
        let session = SessionId::new("history")?;
        let events = crate::turn_events(&texts);
        for chunk in events.chunks(1_000) {
            m.memory
                .add_events(&scope, &session, chunk, &WriteOptions::default())
                .await?;
        }
        drop(m);
        std::fs::write(&marker, b"")?;
    }
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(["memory", "--data-dir"])
        .arg(data_dir)
        .args(["--app", "bench", "--user", "exported", "export"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let out = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::Store(hippocamp_core::Error::Unavailable("no stdout".into())))?;
    let status_file = format!("/proc/{}/status", child.id());
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watcher = {
        let peak = std::sync::Arc::clone(&peak);
        std::thread::spawn(move || {
            // Gone once the child has exited (its status has no sizes then).
            while let Some(kib) = std::fs::read_to_string(&status_file)
                .ok()
                .as_deref()
                .and_then(|s| crate::status_field_kib(s, "VmHWM:"))
            {
                peak.fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let (mut entry_lines, mut bytes) = (0u64, 0u64);
    for line in BufReader::new(out).lines() {
        let line = line?;
        bytes += line.len() as u64 + 1;
        if line.starts_with(r#"{"entry""#) || line.contains(r#""kind":"entry""#) {
            entry_lines += 1;
        }
    }
    let status = child.wait()?;
    let _ = watcher.join();
    let seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(BenchError::Store(hippocamp_core::Error::Unavailable(
            format!("the export exited with {status}"),
        )));
    }
    #[allow(clippy::cast_precision_loss)]
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    Ok(ExportBench {
        entries,
        entry_lines,
        bytes,
        seconds,
        peak_rss_mib: mib(peak.load(std::sync::atomic::Ordering::Relaxed) * 1024),
        store_mib: mib(dir_bytes(&data_dir.join("memory"))),
    })
}
