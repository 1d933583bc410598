//! Artifact benchmarks on the filesystem store.
//!
//! - [`put_get`]: put and get latency and throughput per size, each
//!   interleaved with its raw floor in the same run: a put next to
//!   create + write + `fdatasync` file + `fsync` directory (the same calls
//!   the store makes for content), a get next to open + read + SHA-256.
//!   The floor's files go where the store's go (its fan-out directories,
//!   a different one each sample) and stay until the run ends, as the
//!   store's versions do: a floor in a directory of its own, or one that
//!   deletes each file after measuring it (so the next one is written
//!   into space just freed), measured the disk's luck rather than the
//!   store (see docs/PERFORMANCE.md).
//! - [`list`]: listing-page latency at many versions of one name and many
//!   names in one scope.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, PageRequest, PutOptions,
    Selector,
};
use hippocamp_artifacts_fs::{DiskFiles, FileOps as _, FsArtifacts, FsOptions, dir_path};
use hippocamp_core::{CallOptions, Sha256Digest};
use serde::Serialize;

use crate::{Latency, Result, latency};

/// One size's figures.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRun {
    /// Artifact size in bytes.
    pub bytes: u64,
    /// Samples of each measurement.
    pub samples: usize,
    /// One acknowledged put.
    pub put: Latency,
    /// Create + write + fdatasync + fsync directory of the same bytes.
    pub put_floor: Latency,
    /// put p50 / floor p50.
    pub put_ratio_p50: f64,
    /// The store's content writing alone, through its own file layer
    /// and fan-out directories: create + write + fdatasync + fsync
    /// directory (no hashing, no catalog).
    pub put_protocol_floor: Latency,
    /// Bytes per second at the put p50, MiB/s.
    pub put_mib_s: f64,
    /// One whole, verified get (bytes collected).
    pub get: Latency,
    /// Open + read + SHA-256 of the same bytes.
    pub get_floor: Latency,
    /// get p50 / floor p50.
    pub get_ratio_p50: f64,
    /// Bytes per second at the get p50, MiB/s.
    pub get_mib_s: f64,
}

/// `put_get` results.
#[derive(Debug, Clone, Serialize)]
pub struct PutGet {
    /// One entry per size.
    pub sizes: Vec<SizeRun>,
}

fn us(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e6
}

fn mib_s(bytes: u64, us: f64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    b / (1024.0 * 1024.0) / (us / 1e6)
}

fn scope() -> Result<ArtifactScope> {
    Ok(ArtifactScope::user("bench", "artifacts")?)
}

fn big_limits() -> ArtifactLimits {
    ArtifactLimits {
        max_artifact_bytes: 1 << 40,
        max_scope_bytes: 1 << 44,
        max_total_bytes: 1 << 48,
        max_scope_artifacts: 100_000_000,
        max_total_artifacts: 1_000_000_000,
        ..ArtifactLimits::default()
    }
}

/// Put and get per size against their floors; `samples(size)` chooses
/// how many of each.
pub async fn put_get(dir: &Path, sizes: &[u64], samples: impl Fn(u64) -> usize) -> Result<PutGet> {
    let root = std::fs::canonicalize(dir)?.join("store");
    let store = FsArtifacts::open(&root, big_limits(), FsOptions::default())?;
    // The floors write into the store's own fan-out directories, a
    // different one each sample as the store's random blob ids do: how
    // fast a file is created depends on its directory (where its inode
    // lands, how many inodes were freed nearby lately), and a floor in a
    // directory of its own measured that luck as much as the store.
    let protocol_files = DiskFiles::open(&root)?;
    let sc = scope()?;
    let mut out = Vec::new();
    for &size in sizes {
        let n = samples(size);
        let data: bytes::Bytes = (0..size)
            .map(|i| u8::try_from(i % 251).unwrap_or(0))
            .collect::<Vec<u8>>()
            .into();
        let name = ArtifactName::new(format!("size-{size}"))?;
        let (mut put, mut put_floor, mut get, mut get_floor) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut protocol = Vec::new();
        for i in 0..n {
            let floor_dir = dir_path(&root, spread(size, i, 0));
            let path = floor_dir.join(format!("floor-{size}-{i}"));
            put_floor.push(raw_put(&path, &data, &File::open(&floor_dir)?)?);
            let protocol_name = format!("protocol-{size}-{i}");
            let started = Instant::now();
            let mut f = protocol_files.create(spread(size, i, 1), &protocol_name)?;
            f.write_all(&data)?;
            f.sync()?;
            f.sync_entry()?;
            protocol.push(us(started));

            let started = Instant::now();
            let meta = store
                .put(
                    &sc,
                    &name,
                    Body::Bytes(data.clone()),
                    &PutOptions::default(),
                )
                .await?;
            put.push(us(started));

            let started = Instant::now();
            let mut f = File::open(&path)?;
            let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            f.read_to_end(&mut buf)?;
            let digest = Sha256Digest::of(&buf);
            get_floor.push(us(started));
            assert_digest(digest, meta.sha256)?;

            let started = Instant::now();
            let got = store
                .get(
                    &sc,
                    &name,
                    Selector::Version(meta.version),
                    None,
                    &CallOptions::default(),
                )
                .await?
                .bytes()
                .await?;
            get.push(us(started));
            if got.len() as u64 != size {
                return Err(crate::BenchError::Failed(
                    "a get returned the wrong size".into(),
                ));
            }
        }
        let (put, put_floor, get, get_floor) = (
            latency(put),
            latency(put_floor),
            latency(get),
            latency(get_floor),
        );
        out.push(SizeRun {
            bytes: size,
            samples: n,
            put_ratio_p50: put.p50_us / put_floor.p50_us,
            put_protocol_floor: latency(protocol),
            put_mib_s: mib_s(size, put.p50_us),
            get_ratio_p50: get.p50_us / get_floor.p50_us,
            get_mib_s: mib_s(size, get.p50_us),
            put,
            put_floor,
            get,
            get_floor,
        });
    }
    Ok(PutGet { sizes: out })
}

/// A fan-out directory for sample `i` of `size` (`salt` tells the two
/// floors apart), spread over all 256.
fn spread(size: u64, i: usize, salt: u64) -> u8 {
    let x = (size ^ (i as u64) << 8 ^ salt << 40).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x.to_be_bytes()[0]
}

/// Microseconds of a raw durable put: create `path` + write + fdatasync,
/// then fsync the directory.
fn raw_put(path: &Path, data: &[u8], dir: &File) -> Result<f64> {
    let started = Instant::now();
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(data)?;
    f.sync_data()?;
    dir.sync_all()?;
    Ok(us(started))
}

fn assert_digest(a: Sha256Digest, b: Sha256Digest) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(crate::BenchError::Failed(
            "the floor read different bytes".into(),
        ))
    }
}

/// `list` results.
#[derive(Debug, Clone, Serialize)]
pub struct ListBench {
    /// Versions of the one name.
    pub versions: u64,
    /// Names in the one scope.
    pub names: u64,
    /// Items per page.
    pub page: u64,
    /// A `list_versions` page at a random cursor.
    pub list_versions: Latency,
    /// A `list_names` page at a random cursor.
    pub list_names: Latency,
    /// Seconds spent filling the store (concurrent 1-byte puts).
    pub fill_seconds: f64,
}

/// Listing pages of `page` items at `versions` versions of one name and
/// `names` names in one scope (the store is filled on first use of `dir`
/// and reused after).
pub async fn list(
    dir: &Path,
    versions: u64,
    names: u64,
    page: u64,
    samples: usize,
) -> Result<ListBench> {
    let root = std::fs::canonicalize(dir)?.join(format!("list-{versions}-{names}"));
    let store = Arc::new(FsArtifacts::open(
        &root,
        big_limits(),
        FsOptions::default(),
    )?);
    let sc = scope()?;
    let versions_name = ArtifactName::new("versions/one-name")?;
    let names_scope = ArtifactScope::user("bench", "many-names")?;
    let started = Instant::now();
    let have = store
        .list_versions(
            &sc,
            &versions_name,
            &PageRequest::first(1),
            &CallOptions::default(),
        )
        .await?;
    if have.items.is_empty() {
        fill(&store, &sc, versions, |_| versions_name.clone()).await?;
        fill(&store, &names_scope, names, |i| {
            ArtifactName::new(format!("names/{i:08}")).unwrap_or_else(|_| versions_name.clone())
        })
        .await?;
        store.checkpoint()?;
    }
    let fill_seconds = started.elapsed().as_secs_f64();
    let mut rng_state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state % n.max(1)
    };
    let (mut lv, mut ln) = (Vec::new(), Vec::new());
    let c = CallOptions::default();
    for _ in 0..samples {
        let cursor = next(versions.saturating_sub(page).max(1)) + 1;
        let started = Instant::now();
        let p = store
            .list_versions(&sc, &versions_name, &PageRequest::after(cursor, page), &c)
            .await?;
        lv.push(us(started));
        if p.items.len() as u64 != page.min(versions - cursor) {
            return Err(crate::BenchError::Failed(format!(
                "a version page after {cursor} held {} items",
                p.items.len()
            )));
        }
        let i = next(names.saturating_sub(page).max(1));
        let cursor = ArtifactName::new(format!("names/{i:08}"))?;
        let started = Instant::now();
        let p = store
            .list_names(&names_scope, &PageRequest::after(cursor, page), &c)
            .await?;
        ln.push(us(started));
        if p.items.is_empty() {
            return Err(crate::BenchError::Failed("an empty names page".into()));
        }
    }
    Ok(ListBench {
        versions,
        names,
        page,
        list_versions: latency(lv),
        list_names: latency(ln),
        fill_seconds,
    })
}

/// `n` one-byte puts, 32 at a time, named by `name(i)`.
async fn fill(
    store: &Arc<FsArtifacts>,
    scope: &ArtifactScope,
    n: u64,
    name: impl Fn(u64) -> ArtifactName,
) -> Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        if tasks.len() >= 32
            && let Some(r) = tasks.join_next().await
        {
            r.map_err(|e| crate::BenchError::Failed(e.to_string()))??;
        }
        let (store, scope, name) = (Arc::clone(store), scope.clone(), name(i));
        tasks.spawn(async move {
            store
                .put(&scope, &name, Body::from(&b"x"[..]), &PutOptions::default())
                .await
                .map(drop)
                .map_err(crate::BenchError::from)
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| crate::BenchError::Failed(e.to_string()))??;
    }
    Ok(())
}

/// `stream` results.
#[derive(Debug, Clone, Serialize)]
pub struct StreamRun {
    /// The store.
    pub store: String,
    /// Bytes read back (and verified).
    pub bytes: u64,
    /// Seconds of the streamed put.
    pub put_seconds: f64,
    /// Seconds of the streamed, verified get.
    pub get_seconds: f64,
    /// Put throughput, MiB/s.
    pub put_mib_s: f64,
    /// Peak resident memory of the process when the put had finished, MiB.
    pub put_peak_rss_mib: f64,
    /// Get throughput, MiB/s.
    pub get_mib_s: f64,
    /// Peak resident memory of this process (`VmHWM`), MiB.
    pub peak_rss_mib: f64,
}

/// Peak resident memory of this process, bytes (Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    crate::proc_status_bytes("VmHWM:")
}

/// A stream of `size` pseudo-random bytes in 1 MiB pieces, generated as
/// it is read (nothing is held), and the SHA-256 of what it produced,
/// available once it ends.
fn generated(
    size: u64,
) -> (
    hippocamp_artifacts::ByteStream,
    Arc<parking_lot::Mutex<Option<Sha256Digest>>>,
) {
    use futures::StreamExt as _;
    use sha2::Digest as _;
    let digest = Arc::new(parking_lot::Mutex::new(None));
    let out = Arc::clone(&digest);
    let state = (0u64, 0x2545_f491_4f6c_dd1d_u64, sha2::Sha256::new());
    let s = futures::stream::unfold(state, move |(sent, mut x, mut h)| {
        let out = Arc::clone(&out);
        async move {
            if sent >= size {
                if sent == size {
                    *out.lock() = Some(Sha256Digest::from_bytes(h.finalize().into()));
                }
                return None;
            }
            let n = usize::try_from((size - sent).min(1 << 20)).unwrap_or(0);
            let mut buf = vec![0u8; n];
            for w in buf.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = x.to_le_bytes();
                w.copy_from_slice(&b[..w.len()]);
            }
            h.update(&buf);
            let sent = sent + n as u64;
            if sent == size {
                *out.lock() = Some(Sha256Digest::from_bytes(h.clone().finalize().into()));
            }
            Some((
                Ok(bytes::Bytes::from(buf)),
                (sent + u64::from(sent == size), x, h),
            ))
        }
    })
    .boxed();
    (s, digest)
}

/// Puts a `size`-byte artifact as a stream and reads it back as a stream,
/// hashing on the way; reports times and this process's peak memory.
pub async fn stream(store: &dyn ArtifactStore, store_name: &str, size: u64) -> Result<StreamRun> {
    use futures::StreamExt as _;
    use sha2::Digest as _;
    let sc = ArtifactScope::user("bench", "stream")?;
    let name = ArtifactName::new(format!("stream-{size}"))?;
    let (body, digest) = generated(size);
    let started = Instant::now();
    let meta = store
        .put(
            &sc,
            &name,
            Body::Stream(body),
            &PutOptions {
                call: CallOptions::transfer_timeout(std::time::Duration::from_mins(5))?,
                ..PutOptions::default()
            },
        )
        .await?;
    let put_seconds = started.elapsed().as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let put_peak_rss_mib = peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    let expected = *digest.lock();
    if meta.size != size || Some(meta.sha256) != expected {
        return Err(crate::BenchError::Failed(
            "the stored artifact differs from what was sent".into(),
        ));
    }
    let started = Instant::now();
    let mut read = store
        .get(
            &sc,
            &name,
            Selector::Version(meta.version),
            None,
            &CallOptions::default(),
        )
        .await?
        .body;
    let mut h = sha2::Sha256::new();
    let mut got = 0u64;
    while let Some(piece) = read.next().await {
        let piece = piece?;
        got += piece.len() as u64;
        h.update(&piece);
    }
    let get_seconds = started.elapsed().as_secs_f64();
    if got != size || Sha256Digest::from_bytes(h.finalize().into()) != meta.sha256 {
        return Err(crate::BenchError::Failed(
            "the artifact read back differs".into(),
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    let mib = size as f64 / (1024.0 * 1024.0);
    #[allow(clippy::cast_precision_loss)]
    let peak_rss_mib = peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0);
    Ok(StreamRun {
        store: store_name.to_owned(),
        bytes: got,
        put_seconds,
        get_seconds,
        put_mib_s: mib / put_seconds,
        put_peak_rss_mib,
        get_mib_s: mib / get_seconds,
        peak_rss_mib,
    })
}

/// A filesystem store in `dir` for [`stream`] (no size quotas).
pub fn fs_store(dir: &Path) -> Result<FsArtifacts> {
    let root = std::fs::canonicalize(dir)?.join("stream-store");
    Ok(FsArtifacts::open(
        &root,
        big_limits(),
        FsOptions::default(),
    )?)
}
