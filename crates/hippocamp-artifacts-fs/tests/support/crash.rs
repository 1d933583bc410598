//! Process-crash trials: a child process puts and deletes artifacts from
//! concurrent streams and prints each acknowledgement; the parent kills it
//! with SIGKILL at a random moment, reopens the store and checks every
//! stream against its model: every acknowledged put is listed, readable
//! and verified, every acknowledged delete stays deleted, nothing else is
//! visible (the one in-flight operation may have landed or not), no
//! version number is reused, and repair then finds nothing corrupt.
//!
//! The child is the calling executable itself, re-run with
//! `HIPPOCAMP_CRASH_CHILD` set (a test binary passes the name of its child
//! test so only that one runs).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector, PageRequest,
    PutOptions, Selector,
};
use hippocamp_artifacts_fs::{FsArtifacts, FsOptions, RepairOptions};
use hippocamp_core::{CallOptions, Sha256Digest};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};

/// Concurrent streams in the child.
pub const STREAMS: usize = 4;
/// Operations per stream (more than a child gets through before the kill).
pub const OPS: usize = 300;

/// One operation of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Put `len` bytes (streamed in pieces when `streamed`).
    Put { len: usize, streamed: bool },
    /// Delete the `nth` put of this stream (by position among its puts).
    Delete { nth: usize },
}

/// The operations of a stream.
pub fn ops(seed: u64, stream: usize) -> Vec<Op> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ ((stream as u64 + 1) * 0x9e37_79b9));
    let mut puts = 0usize;
    (0..OPS)
        .map(|_| {
            if puts > 0 && rng.random_range(0..4) == 0 {
                Op::Delete {
                    nth: rng.random_range(0..puts),
                }
            } else {
                puts += 1;
                let len = match rng.random_range(0..10) {
                    0 => rng.random_range(200_000..400_000),
                    1 => 0,
                    _ => rng.random_range(1..70_000),
                };
                Op::Put {
                    len,
                    streamed: rng.random_range(0..3) == 0,
                }
            }
        })
        .collect()
}

/// The bytes of op `i` of a stream.
pub fn content(seed: u64, stream: usize, i: usize, len: usize) -> Bytes {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ ((stream * 1_000 + i) as u64));
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    Bytes::from(v)
}

pub fn scope(stream: usize) -> ArtifactScope {
    ArtifactScope::session(
        "crash",
        &format!("user{}", stream % 2),
        &format!("s{stream}"),
    )
    .unwrap()
}

pub fn name(stream: usize) -> ArtifactName {
    ArtifactName::new(format!("stream/{stream}/doc")).unwrap()
}

pub fn limits() -> ArtifactLimits {
    ArtifactLimits {
        chunk_size: 64 << 10,
        ..ArtifactLimits::default()
    }
}

pub fn options(seed: u64) -> FsOptions {
    // Half the trials checkpoint often, so kills also land in checkpoints.
    FsOptions {
        checkpoint_records: if seed.is_multiple_of(2) { 8 } else { 4_096 },
        ..FsOptions::default()
    }
}

/// The live versions after the first `n` operations: version → digest.
/// Each put gets the next version (versions are never reused).
pub fn model(seed: u64, stream: usize, ops: &[Op], n: usize) -> BTreeMap<u64, Sha256Digest> {
    let mut live = BTreeMap::new();
    let mut versions = Vec::new();
    for (i, op) in ops.iter().take(n).enumerate() {
        match *op {
            Op::Put { len, .. } => {
                let v = versions.len() as u64 + 1;
                versions.push(v);
                live.insert(v, Sha256Digest::of(&content(seed, stream, i, len)));
            }
            Op::Delete { nth } => {
                live.remove(&versions[nth]);
            }
        }
    }
    live
}

/// Runs op `i` of a stream; `versions` holds the versions its puts got.
/// Returns whether it changed anything (a delete of a deleted version
/// does not).
pub async fn run(
    store: &FsArtifacts,
    seed: u64,
    stream: usize,
    i: usize,
    op: Op,
    versions: &mut Vec<u64>,
) -> bool {
    let c = CallOptions::default();
    match op {
        Op::Put { len, streamed } => {
            let data = content(seed, stream, i, len);
            let body = if streamed {
                let pieces: Vec<hippocamp_core::Result<Bytes>> = data
                    .chunks(7_000)
                    .map(|p| Ok(Bytes::copy_from_slice(p)))
                    .collect();
                Body::Stream(futures::stream::iter(pieces).boxed())
            } else {
                Body::Bytes(data)
            };
            let meta = store
                .put(&scope(stream), &name(stream), body, &PutOptions::default())
                .await
                .unwrap();
            assert_eq!(meta.version, versions.len() as u64 + 1);
            versions.push(meta.version);
            true
        }
        Op::Delete { nth } => !store
            .delete(
                &scope(stream),
                &name(stream),
                DeleteSelector::Version(versions[nth]),
                &c,
            )
            .await
            .unwrap()
            .is_empty(),
    }
}

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
        let store = Arc::new(FsArtifacts::open(&dir, limits(), options(seed)).unwrap());
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for stream in 0..STREAMS {
            let store = Arc::clone(&store);
            let out = Arc::clone(&out);
            tasks.push(tokio::spawn(async move {
                let mut versions = Vec::new();
                for (i, op) in ops(seed, stream).into_iter().enumerate() {
                    run(&store, seed, stream, i, op, &mut versions).await;
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
    /// Acknowledged puts whose version was checked.
    pub puts_checked: usize,
    /// Streams whose in-flight operation had also landed.
    pub in_flight_landed: usize,
    /// Files repair removed after the crash.
    pub repaired: u64,
}

/// Checks a stream after `n` acknowledged operations: every visible
/// version reads back whole and verified, and the visible set is the
/// model's after `n` operations or after `n + 1` (the in-flight one
/// landed). Returns the live versions and whether the in-flight one landed.
pub async fn check_stream(
    store: &FsArtifacts,
    seed: u64,
    stream: usize,
    ops: &[Op],
    n: usize,
) -> Result<(u64, bool), String> {
    let c = CallOptions::default();
    let mut observed = BTreeMap::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_versions(
                &scope(stream),
                &name(stream),
                &PageRequest {
                    cursor,
                    limit: Some(1_000),
                },
                &c,
            )
            .await
            .map_err(|e| e.to_string())?;
        for m in &page.items {
            let bytes = store
                .get(
                    &scope(stream),
                    &name(stream),
                    Selector::Version(m.version),
                    None,
                    &c,
                )
                .await
                .map_err(|e| format!("stream {stream} v{}: {e}", m.version))?
                .bytes()
                .await
                .map_err(|e| format!("stream {stream} v{}: {e}", m.version))?;
            if Sha256Digest::of(&bytes) != m.sha256 {
                return Err(format!(
                    "stream {stream} v{} does not match its record",
                    m.version
                ));
            }
            observed.insert(m.version, m.sha256);
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let before = model(seed, stream, ops, n);
    let after = model(seed, stream, ops, (n + 1).min(ops.len()));
    if observed == before {
        Ok((observed.len() as u64, false))
    } else if observed == after {
        Ok((observed.len() as u64, true))
    } else {
        Err(format!(
            "stream {stream} after {n} acknowledged operations holds versions {:?}; expected {:?} or {:?}",
            observed.keys().collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>()
        ))
    }
}

/// Runs one trial in `dir` (which must not exist yet, or be empty).
pub fn trial(dir: &Path, seed: u64, child_args: &[&str]) -> Result<Trial, String> {
    let acked = hippocamp_durable::crash::kill_child(
        dir,
        seed,
        child_args,
        STREAMS,
        Duration::from_millis(200),
    )?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = FsArtifacts::open(dir, limits(), options(seed)).map_err(|e| e.to_string())?;
        let mut out = Trial::default();
        let mut total = 0u64;
        for (stream, &n) in acked.iter().enumerate() {
            let ops = ops(seed, stream);
            let (live, landed) = check_stream(&store, seed, stream, &ops, n).await?;
            total += live;
            out.in_flight_landed += usize::from(landed);
            let before = model(seed, stream, &ops, n);
            out.acked += n;
            out.puts_checked += before.len();
            // No number is reused: the next put goes above every version
            // ever acknowledged.
            let puts_acked = ops
                .iter()
                .take(n)
                .filter(|o| matches!(o, Op::Put { .. }))
                .count() as u64;
            let next = store
                .put(
                    &scope(stream),
                    &name(stream),
                    Body::from(&b"after"[..]),
                    &PutOptions::default(),
                )
                .await
                .map_err(|e| e.to_string())?;
            if next.version <= puts_acked {
                return Err(format!(
                    "stream {stream}: version {} reused ({puts_acked} puts acknowledged)",
                    next.version
                ));
            }
            total += 1;
        }
        let status = store.status().await.map_err(|e| e.to_string())?;
        if status.artifacts != Some(total) {
            return Err(format!(
                "status counts {:?} artifacts, the streams hold {total}",
                status.artifacts
            ));
        }
        let report = store
            .repair(RepairOptions {
                min_age_ms: Some(0),
                verify: true,
                ..RepairOptions::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        if report.corrupt_count > 0 || report.referenced != total {
            return Err(format!(
                "repair after the crash: {report:?} ({total} versions)"
            ));
        }
        out.repaired = report.removed;
        Ok(out)
    })
}
