//! The filesystem artifact store: content in files, the catalog in redb.
//!
//! # Publication
//!
//! A put streams its body into a new file `objects/xx/<blob>` (a random
//! blob id, created exclusively; hashing each chunk on the way), then:
//!
//! 1. fsyncs the file;
//! 2. fsyncs the directory `objects/xx`;
//! 3. commits the catalog row that makes the version visible.
//!
//! Step 3 is the one publication point: a version exists exactly when its
//! row is published, and that happens only after 1-2. Until then the file
//! is staged: readers find content only through a published row, so no
//! reader can open a file being written, and a crash leaves at most a
//! file no row references. The classic "write `x.tmp`, rename it to `x`"
//! makes a *name* the publication point; here the name is never one, so
//! the rename would only cost a second directory update. (The store
//! staged anonymously with `O_TMPFILE` and a link before: on ext4 without
//! a journal the link's new link count reaches the disk only by
//! writeback, not by the directory's fsync, so a power cut could leave a
//! name pointing at an inode recorded as unlinked. See
//! docs/PERFORMANCE.md for the costs measured.)
//!
//! The version number is reserved in a logged, *pending* (invisible) row
//! written while steps 1-2 run, so the log's fsync overlaps the content's;
//! the reservation publishes nothing. After a crash, every pending row is
//! resolved on open: published if its content file is present and matches
//! every chunk digest, removed otherwise. A failed or late put aborts its
//! reservation (its number stays used) and removes its file. Deletion
//! removes the rows in one logged transaction, then the files. `repair`
//! removes content files no row references once they are older than a
//! grace period.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_artifacts::integrity::{
    ChunkSource, INLINE_HASH_BYTES, Rechunker, WholeDigest, verify_chunk,
};
use hippocamp_artifacts::store::ByteStream;
use hippocamp_artifacts::store::{check_put, check_version};
use hippocamp_artifacts::{
    ArtifactCapabilities, ArtifactLimits, ArtifactMeta, ArtifactName, ArtifactRead, ArtifactScope,
    ArtifactStatus, ArtifactStore, Body, ByteRange, DeleteSelector, Integrity, Page, PageRequest,
    PutOptions, Selector,
};
use hippocamp_core::{CallOptions, Deadline, Error, Problem, Result, Sha256Digest, Stage};
use hippocamp_durable::{DirLock, FileWal, WalStorage, decode_log};
use parking_lot::Mutex;
use redb::{Database, ReadableDatabase, ReadableTable, StorageBackend};
use sha2::Digest as _;

use crate::catalog::{
    BlobId, CHUNKS, FORMAT_KEY, FORMAT_VERSION, LIVE, META, Mutation, PENDING, SCOPES, ScopeRow,
    State, Table, VERSIONS, VersionKey, VersionRow, WAL_SEQ_KEY, blob_file, decode, decode_chunks,
    version_key,
};
use crate::files::{DiskFiles, FileOps, WriteFile};
use crate::writer::{Reservation, Totals, Tx, Writer};

/// The catalog database file in the data directory.
pub const DB_FILE: &str = "catalog.redb";
/// The catalog's write-ahead log.
pub const WAL_FILE: &str = "catalog.wal";
/// The lock file.
pub const LOCK_FILE: &str = "LOCK";

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

fn io_err(what: &str, e: &io::Error) -> Error {
    Error::Unavailable(format!("{what}: {e}"))
}

fn joined(e: tokio::task::JoinError) -> Error {
    Error::Unavailable(format!("a storage task failed: {e}"))
}

hippocamp_core::limit_table! {
    /// Tuning of the filesystem store.
    pub struct FsOptions, prefix "" {
        /// Catalog log records between checkpoints.
        checkpoint_records: default 4_096, min 1, max 1 << 20,
            "catalog log records between durable checkpoints";
        /// Log bytes between checkpoints.
        checkpoint_bytes: default 64 << 20, min 1 << 10, max 1 << 30,
            "catalog log bytes between durable checkpoints";
        /// Age below which `repair` leaves an unreferenced content file alone,
        /// milliseconds.
        recovery_grace_ms: default 300_000, min 0, max 7 * 86_400_000,
            "age in milliseconds below which repair keeps an unreferenced content file";
    }
}

impl FsOptions {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// Where the catalog lives.
#[derive(Debug)]
pub enum CatalogSource {
    /// A database file (created atomically when missing).
    Path(PathBuf),
    /// A custom redb storage backend (tests inject power loss with it).
    Backend(Box<dyn StorageBackend>),
}

/// Durable artifacts on a local file system.
#[derive(Debug)]
pub struct FsArtifacts {
    pub(crate) limits: ArtifactLimits,
    pub(crate) options: FsOptions,
    pub(crate) files: Arc<dyn FileOps>,
    pub(crate) db: Arc<Database>,
    pub(crate) writer: Arc<Mutex<Writer>>,
    pub(crate) published: Arc<Mutex<Totals>>,
    /// Blobs of puts in flight: repair never touches them.
    pub(crate) in_flight: Arc<Mutex<HashSet<BlobId>>>,
    root: Option<PathBuf>,
    lock: Option<DirLock>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl FsArtifacts {
    /// Opens (creating if needed) the store in `root`, an absolute path to
    /// a real directory, taking its lock: a second process gets
    /// `Unavailable`, as does a catalog of an unknown format version.
    pub fn open(
        root: impl AsRef<Path>,
        limits: ArtifactLimits,
        options: FsOptions,
    ) -> Result<Self> {
        limits.validate()?;
        options.validate()?;
        let root = root.as_ref();
        let files = DiskFiles::open(root).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidInput => Error::config("root", Problem::Malformed(e.to_string())),
            _ => io_err(&format!("cannot open {}", root.display()), &e),
        })?;
        let lock = DirLock::own(root, LOCK_FILE)?;
        let wal = FileWal::open(&root.join(WAL_FILE)).map_err(storage)?;
        let mut store = Self::open_with(
            Arc::new(files),
            CatalogSource::Path(root.join(DB_FILE)),
            Box::new(wal),
            limits,
            options,
        )?;
        store.root = Some(root.to_path_buf());
        store.lock = Some(lock);
        Ok(store)
    }

    /// Opens a store on custom file operations, catalog storage and log
    /// (no directory lock): the power-loss tests use it.
    pub fn open_with(
        files: Arc<dyn FileOps>,
        catalog: CatalogSource,
        mut wal: Box<dyn WalStorage>,
        limits: ArtifactLimits,
        options: FsOptions,
    ) -> Result<Self> {
        limits.validate()?;
        options.validate()?;
        let db = match catalog {
            CatalogSource::Path(path) => hippocamp_durable::db::open(&path, init_format)?,
            CatalogSource::Backend(b) => Database::builder()
                .create_with_backend(BoxedBackend(b))
                .map_err(storage)?,
        };
        init_format(&db)?;
        let seq = recover(&db, &mut *wal, &*files)?;
        let totals = count(&db)?;
        let db = Arc::new(db);
        let published = Arc::new(Mutex::new(totals));
        let writer = Writer {
            db: Arc::clone(&db),
            wal,
            seq,
            since_checkpoint: 0,
            wal_bytes: 0,
            poisoned: None,
            options: options.clone(),
            limits: limits.clone(),
            totals,
            published: Arc::clone(&published),
        };
        Ok(Self {
            limits,
            options,
            files,
            db,
            writer: Arc::new(Mutex::new(writer)),
            published,
            in_flight: Arc::new(Mutex::new(HashSet::new())),
            root: None,
            lock: None,
        })
    }

    /// The data directory, when opened on one.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Makes the catalog durable in its database file and empties the log
    /// (also done every `checkpoint_records` records and on drop).
    pub fn checkpoint(&self) -> Result<()> {
        self.writer.lock().checkpoint()
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.limits.call_timeout())
    }

    /// The content file of a published version: its fan-out directory and
    /// name (tests use it to damage content).
    #[doc(hidden)]
    pub fn content_file(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
    ) -> Option<(u8, String)> {
        let (_, row, _) = self.find(scope, name, Selector::Version(version)).ok()?;
        Some(blob_file(&row.blob))
    }

    /// The published version a selector picks, checked against the scope
    /// and name, with its metadata.
    fn find(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
    ) -> Result<(VersionKey, VersionRow, ArtifactMeta)> {
        let rtx = self.db.begin_read().map_err(storage)?;
        Self::find_in(&rtx, scope, name, selector)
    }

    fn find_in(
        rtx: &redb::ReadTransaction,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
    ) -> Result<(VersionKey, VersionRow, ArtifactMeta)> {
        let sh = scope.hash();
        let nh = name.hash();
        let table = rtx.open_table(VERSIONS).map_err(storage)?;
        let found = match selector {
            Selector::Version(v) => {
                check_version(v)?;
                let key = version_key(&sh, &nh, v);
                match table.get(&key[..]).map_err(storage)? {
                    Some(raw) => {
                        let row: VersionRow = decode(raw.value(), "version")?;
                        (row.state == State::Published).then_some((key, row))
                    }
                    None => None,
                }
            }
            Selector::Latest => {
                let (lo, hi) = (version_key(&sh, &nh, 0), version_key(&sh, &nh, u64::MAX));
                let mut found = None;
                for item in table.range(&lo[..]..=&hi[..]).map_err(storage)?.rev() {
                    let (k, v) = item.map_err(storage)?;
                    let row: VersionRow = decode(v.value(), "version")?;
                    if row.state == State::Published {
                        let key: VersionKey = k
                            .value()
                            .try_into()
                            .map_err(|_| Error::Corrupt("a version key is malformed".into()))?;
                        found = Some((key, row));
                        break;
                    }
                }
                found
            }
        };
        let (key, row) = found.ok_or(match selector {
            Selector::Latest => Error::NotFound("artifact"),
            Selector::Version(_) => Error::NotFound("artifact version"),
        })?;
        let meta = row.meta(scope, name)?;
        if let Selector::Version(v) = selector
            && row.version != v
        {
            return Err(Error::foreign_record("the artifact catalog", "a version"));
        }
        Ok((key, row, meta))
    }

    fn integrity_in(
        rtx: &redb::ReadTransaction,
        key: &VersionKey,
        row: &VersionRow,
    ) -> Result<Integrity> {
        let table = rtx.open_table(CHUNKS).map_err(storage)?;
        let raw = table
            .get(&key[..])
            .map_err(storage)?
            .ok_or_else(|| Error::Corrupt("a version has no chunk digests".into()))?;
        let integrity = Integrity {
            size: row.size,
            sha256: Sha256Digest::from_bytes(row.sha256),
            chunk_size: row.chunk_size,
            chunks: decode_chunks(raw.value())?,
        };
        integrity.check_shape()?;
        Ok(integrity)
    }

    /// Streams a body into a staged file, hashing each chunk on the way
    /// (and the whole on another thread); returns the open file (not yet
    /// synced) and the integrity record.
    async fn stage_stream(
        &self,
        blob: BlobId,
        mut body: ByteStream,
    ) -> Result<(Box<dyn WriteFile>, Integrity)> {
        let files = Arc::clone(&self.files);
        let (dir, name) = blob_file(&blob);
        let chunk = self.limits.chunk_size;
        let max = self.limits.max_artifact_bytes;
        let mut file = tokio::task::spawn_blocking(move || files.create(dir, &name))
            .await
            .map_err(joined)?
            .map_err(|e| io_err("cannot create a content file", &e))?;
        let mut rechunker = Rechunker::new(chunk);
        let mut whole = WholeDigest::new();
        let mut chunks = Vec::new();
        let mut size = 0u64;
        let mut pending: Vec<Bytes> = Vec::new();
        loop {
            let piece = body.next().await.transpose()?;
            match &piece {
                Some(p) => {
                    size += p.len() as u64;
                    if size > max {
                        return Err(Error::TooLarge {
                            limit: "max_artifact_bytes",
                            max,
                        });
                    }
                    pending.extend(rechunker.push(p));
                }
                None => pending
                    .extend(std::mem::replace(&mut rechunker, Rechunker::new(chunk)).finish()),
            }
            for c in pending.drain(..) {
                whole.push(c.clone()).await?;
                let (f, d) = tokio::task::spawn_blocking(move || -> Result<_> {
                    let mut f = file;
                    f.write_all(&c)
                        .map_err(|e| io_err("cannot write a content file", &e))?;
                    Ok((f, Sha256Digest::of(&c)))
                })
                .await
                .map_err(joined)??;
                file = f;
                chunks.push(d);
            }
            if piece.is_none() {
                break;
            }
        }
        let whole = whole.finish().await?;
        Ok((file, finish_integrity(size, chunk, chunks, whole)))
    }

    /// Removes a content file, ignoring a missing one.
    fn remove_content(files: &dyn FileOps, blob: &BlobId) {
        let (dir, name) = blob_file(blob);
        let _ = files.remove(dir, &name);
    }
}

/// The integrity record of staged content: the whole digest is that of
/// the single chunk (or of nothing) unless it was computed separately.
fn finish_integrity(
    size: u64,
    chunk_size: u64,
    chunks: Vec<Sha256Digest>,
    whole: Option<Sha256Digest>,
) -> Integrity {
    let sha256 = whole.unwrap_or_else(|| {
        chunks
            .first()
            .copied()
            .unwrap_or_else(|| Sha256Digest::of(b""))
    });
    Integrity {
        size,
        sha256,
        chunk_size,
        chunks,
    }
}

/// The integrity record of content still in memory: one chunk is hashed
/// here; for more, the whole digest is computed here while the content
/// task sends the chunk digests it computed as it wrote.
fn memory_integrity(
    b: &Bytes,
    chunk_size: u64,
    chunks_rx: &std::sync::mpsc::Receiver<Result<Option<Vec<Sha256Digest>>>>,
) -> Result<Integrity> {
    let size = b.len() as u64;
    if size <= chunk_size {
        let chunks = if b.is_empty() {
            Vec::new()
        } else {
            vec![Sha256Digest::of(b)]
        };
        return Ok(finish_integrity(size, chunk_size, chunks, None));
    }
    let whole = Sha256Digest::of(b);
    let chunks = chunks_rx
        .recv()
        .unwrap_or_else(|_| Err(Error::Unavailable("the content task stopped".into())))?
        .unwrap_or_default();
    Ok(finish_integrity(size, chunk_size, chunks, Some(whole)))
}

/// Forgets an in-flight blob when a put ends, however it ends; unless
/// disarmed by a publication, also removes its content files.
struct InFlight {
    set: Arc<Mutex<HashSet<BlobId>>>,
    files: Arc<dyn FileOps>,
    blob: BlobId,
    armed: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.armed {
            FsArtifacts::remove_content(&*self.files, &self.blob);
        }
        self.set.lock().remove(&self.blob);
    }
}

/// The content of a put: still in memory, or already streamed to a
/// staged file.
enum Staged {
    Memory(Bytes),
    Written(Box<dyn WriteFile>, Integrity),
}

/// A content file being written, with the chunk digests computed while
/// writing it (when the content was in memory).
type Written = (Box<dyn WriteFile>, Option<Vec<Sha256Digest>>);

type PutOutcome = Result<(crate::writer::Reserved, Integrity)>;

/// Where a put's two blocking halves meet: the content half (the file
/// written and synced, then its directory) and the catalog half (the
/// version reserved). Whichever arrives second publishes or aborts, on its
/// own thread, so a caller that went away changes nothing.
///
/// The reply leaves when the meeting is dropped, that is once both halves
/// have let go of it and of every store handle they held: a caller that
/// saw its put return can drop the store and reopen its directory at once
/// (the catalog's file lock is free).
struct Meeting {
    content: Option<Result<()>>,
    reserved: Option<PutOutcome>,
    writer: Arc<Mutex<Writer>>,
    deadline: Deadline,
    /// Removes the content of a put that failed, before the reply leaves
    /// (so a caller that saw the failure never finds its file).
    guard: InFlight,
    /// Declared last: fields drop in order, so the reply leaves after the
    /// writer and the guard are gone.
    reply: Reply,
}

/// A put's reply, sent when dropped: its outcome, or `Unavailable` if
/// the halves never met (a half's task was dropped unrun).
struct Reply {
    to: Option<tokio::sync::oneshot::Sender<PutOutcome>>,
    outcome: Option<PutOutcome>,
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(to) = self.to.take() {
            let outcome = self
                .outcome
                .take()
                .unwrap_or_else(|| Err(Error::Unavailable("a put's storage task stopped".into())));
            let _ = to.send(outcome);
        }
    }
}

impl Meeting {
    fn arrive(
        meeting: Arc<Mutex<Meeting>>,
        content: Option<Result<()>>,
        reserved: Option<PutOutcome>,
    ) {
        let mut m = meeting.lock();
        if content.is_some() {
            m.content = content;
        }
        if reserved.is_some() {
            m.reserved = reserved;
        }
        let (content, reserved) = match (m.content.take(), m.reserved.take()) {
            (Some(c), Some(r)) => (c, r),
            // The first to arrive leaves its half for the other.
            (c, r) => {
                (m.content, m.reserved) = (c, r);
                return;
            }
        };
        let outcome = match (content, reserved) {
            (Ok(()), Ok((reserved, integrity))) => m
                .writer
                .lock()
                .publish(&reserved.key, m.deadline)
                .map(|()| (reserved, integrity)),
            (Err(e), Ok((reserved, _))) => {
                let _ = m.writer.lock().abort(&reserved.key);
                Err(e)
            }
            (_, Err(e)) => Err(e),
        };
        if outcome.is_ok() {
            m.guard.armed = false;
        }
        m.reply.outcome = Some(outcome);
    }
}

/// Runs blocking `f` on this thread when the runtime allows it (a
/// multi-thread runtime hands this worker's other tasks to another
/// thread meanwhile), else on the blocking pool.
fn run_here(f: impl FnOnce() + Send + 'static) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        tokio::task::block_in_place(f);
    } else {
        drop(tokio::task::spawn_blocking(f));
    }
}

/// The commit phase of a put (see [`FsArtifacts::put`]).
async fn commit_put(
    files: Arc<dyn FileOps>,
    writer: Arc<Mutex<Writer>>,
    chunk_size: u64,
    staged: Staged,
    mut reservation: Reservation,
    guard: InFlight,
) -> PutOutcome {
    let (dir, fin) = blob_file(&reservation.blob);
    let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
    let meeting = Arc::new(Mutex::new(Meeting {
        content: None,
        reserved: None,
        writer: Arc::clone(&writer),
        deadline: reservation.deadline,
        guard,
        reply: Reply {
            to: Some(reply_tx),
            outcome: None,
        },
    }));
    let (chunks_tx, chunks_rx) =
        std::sync::mpsc::sync_channel::<Result<Option<Vec<Sha256Digest>>>>(1);
    let (memory, file) = match staged {
        Staged::Memory(b) => (Some(b), None),
        Staged::Written(f, integrity) => {
            reservation.integrity = integrity;
            (None, Some(f))
        }
    };
    let content_bytes = memory.clone();
    let content_meeting = Arc::clone(&meeting);
    drop(tokio::task::spawn_blocking(move || {
        let reserved = (|| -> PutOutcome {
            if let Some(b) = &memory {
                reservation.integrity = memory_integrity(b, chunk_size, &chunks_rx)?;
            }
            let reserved = writer.lock().reserve(&reservation)?;
            Ok((reserved, reservation.integrity))
        })();
        drop(writer);
        Meeting::arrive(meeting, None, Some(reserved));
    }));
    // The content half, the longer one, runs right here where the
    // runtime lets this thread block: it starts without waking a thread,
    // and when it arrives second (the usual case) the reply is ready when
    // awaited, where a pool thread's reply would have to wake this one
    // (~60 us of a ~600 us put, measured).
    run_here(move || {
        let chunk_len = usize::try_from(chunk_size).unwrap_or(usize::MAX);
        let written = (|| -> Result<Written> {
            match (file, content_bytes) {
                (Some(f), _) => Ok((f, None)),
                (None, Some(b)) => {
                    let mut f = files
                        .create(dir, &fin)
                        .map_err(|e| io_err("cannot create a content file", &e))?;
                    // One chunk is hashed by the catalog half (so its
                    // reservation starts at once); more are hashed here,
                    // chunk by chunk, while the catalog half computes the
                    // whole digest.
                    if b.len() <= chunk_len {
                        f.write_all(&b)
                            .map_err(|e| io_err("cannot write a content file", &e))?;
                        return Ok((f, None));
                    }
                    let mut chunks = Vec::with_capacity(b.len().div_ceil(chunk_len.max(1)));
                    for c in b.chunks(chunk_len) {
                        f.write_all(c)
                            .map_err(|e| io_err("cannot write a content file", &e))?;
                        chunks.push(Sha256Digest::of(c));
                    }
                    Ok((f, Some(chunks)))
                }
                (None, None) => Err(Error::Unavailable("a put lost its content".into())),
            }
        })();
        let r = match written {
            Ok((mut f, chunks)) => {
                let _ = chunks_tx.send(Ok(chunks));
                f.sync()
                    .map_err(|e| io_err("cannot sync a content file", &e))
                    .and_then(|()| {
                        f.sync_entry()
                            .map_err(|e| io_err("cannot sync a content directory", &e))
                    })
            }
            Err(e) => {
                let _ = chunks_tx.send(Err(e.clone()));
                Err(e)
            }
        };
        drop(files);
        Meeting::arrive(content_meeting, Some(r), None);
    });
    reply_rx
        .await
        .map_err(|_| Error::Unavailable("a put's storage task stopped".into()))?
}

/// Reads chunks of a content file.
struct FileSource {
    file: Arc<dyn crate::files::ReadFile>,
    chunk_size: u64,
}

fn read_chunk(file: &dyn crate::files::ReadFile, offset: u64, len: u64) -> Result<Bytes> {
    let buf = file
        .read_at(offset, usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => {
                Error::Corrupt("a content file is shorter than recorded".into())
            }
            _ => io_err("cannot read a content file", &e),
        })?;
    Ok(Bytes::from(buf))
}

#[async_trait]
impl ChunkSource for FileSource {
    async fn verified_chunk(&mut self, index: u64, integrity: &Arc<Integrity>) -> Result<Bytes> {
        let len = integrity.chunk_len(index);
        let offset = index * self.chunk_size;
        if usize::try_from(len).unwrap_or(usize::MAX) <= INLINE_HASH_BYTES {
            let bytes = read_chunk(&*self.file, offset, len)?;
            return verify_chunk(integrity, index, bytes).await;
        }
        let file = Arc::clone(&self.file);
        let integrity = Arc::clone(integrity);
        tokio::task::spawn_blocking(move || {
            let bytes = read_chunk(&*file, offset, len)?;
            integrity.verify(index, &bytes).map(|()| bytes)
        })
        .await
        .map_err(joined)?
    }
}

#[async_trait]
impl ArtifactStore for FsArtifacts {
    fn capabilities(&self) -> ArtifactCapabilities {
        let mut limits = self.limits.describe_all();
        limits.extend(self.options.describe());
        ArtifactCapabilities {
            api_version: 1,
            backend: "filesystem".to_owned(),
            durable: true,
            scopes: vec!["app".into(), "user".into(), "session".into()],
            immutable_versions: true,
            range_reads: true,
            streaming: true,
            scope_listing: true,
            limits,
            routing: None,
        }
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(&opts.call);
        check_put(opts)?;
        deadline.check(Stage::Queueing)?;
        let metadata_json = serde_json::to_string(&opts.metadata)
            .map_err(|e| Error::Corrupt(format!("cannot encode metadata: {e}")))?;
        let blob: BlobId = rand::random();
        self.in_flight.lock().insert(blob);
        let guard = InFlight {
            set: Arc::clone(&self.in_flight),
            files: Arc::clone(&self.files),
            blob,
            armed: true,
        };
        let staged = match body {
            Body::Bytes(b) if b.len() as u64 > self.limits.max_artifact_bytes => {
                return Err(Error::TooLarge {
                    limit: "max_artifact_bytes",
                    max: self.limits.max_artifact_bytes,
                });
            }
            Body::Bytes(b) => Staged::Memory(b),
            Body::Stream(s) => {
                let (file, integrity) =
                    tokio::time::timeout_at(deadline.instant().into(), self.stage_stream(blob, s))
                        .await
                        .map_err(|_| Error::Timeout(Stage::Transfer))??;
                Staged::Written(file, integrity)
            }
        };
        let reservation = Reservation {
            scope: scope.clone(),
            name: name.clone(),
            mime_type: opts.mime_type.as_str().to_owned(),
            metadata_json,
            integrity: Integrity {
                size: 0,
                sha256: Sha256Digest::of(b""),
                chunk_size: self.limits.chunk_size,
                chunks: Vec::new(),
            },
            blob,
            deadline,
        };
        // Two blocking halves run side by side. The content half writes
        // the content file (hashing each chunk of multi-chunk content still
        // in memory), fsyncs it and fsyncs its directory. The
        // catalog half meanwhile hashes single-chunk content itself, or
        // computes the whole digest and takes the chunk digests, and
        // reserves the version (a synced log record, overlapping the
        // content's writes and fsyncs). The second to finish publishes or
        // aborts. Both are started before the first await and run to
        // their end even if the caller goes away, so a reservation is
        // always either published or aborted.
        let (res, integrity) = commit_put(
            Arc::clone(&self.files),
            Arc::clone(&self.writer),
            self.limits.chunk_size,
            staged,
            reservation,
            guard,
        )
        .await?;
        Ok(ArtifactMeta {
            scope: scope.clone(),
            name: name.clone(),
            version: res.version,
            mime_type: opts.mime_type.clone(),
            size: integrity.size,
            sha256: integrity.sha256,
            chunk_size: integrity.chunk_size,
            created_at_ms: res.created_at_ms,
            metadata: opts.metadata.clone(),
        })
    }

    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        let deadline = self.deadline(opts);
        deadline.check(Stage::Queueing)?;
        // One snapshot for the row and its digests.
        let rtx = self.db.begin_read().map_err(storage)?;
        let (key, row, meta) = Self::find_in(&rtx, scope, name, selector)?;
        if let Some(r) = range {
            r.check(meta.size)?;
        }
        let integrity = Arc::new(Self::integrity_in(&rtx, &key, &row)?);
        drop(rtx);
        let (dir, file_name) = blob_file(&row.blob);
        let file = match self.files.open(dir, &file_name) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Deleted since it was found, or lost.
                return match self.find(scope, name, Selector::Version(row.version)) {
                    Err(Error::NotFound(_)) => Err(Error::NotFound("artifact version")),
                    _ => Err(Error::Corrupt(format!(
                        "the content of version {} is missing",
                        row.version
                    ))),
                };
            }
            Err(e) => return Err(io_err("cannot open a content file", &e)),
        };
        let len = file
            .size()
            .map_err(|e| io_err("cannot stat a content file", &e))?;
        if len != row.size {
            return Err(Error::Corrupt(format!(
                "the content of version {} holds {len} bytes, {} recorded",
                row.version, row.size
            )));
        }
        let source = FileSource {
            file: Arc::from(file),
            chunk_size: row.chunk_size,
        };
        Ok(ArtifactRead {
            meta,
            range,
            body: hippocamp_artifacts::integrity::verified_stream(source, integrity, range),
        })
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        self.deadline(opts).check(Stage::Queueing)?;
        let (_, _, meta) = self.find(scope, name, selector)?;
        Ok(meta)
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let deadline = self.deadline(opts);
        if let DeleteSelector::Version(v) = selector {
            check_version(v)?;
        }
        deadline.check(Stage::Queueing)?;
        let writer = Arc::clone(&self.writer);
        let files = Arc::clone(&self.files);
        let (scope, name) = (scope.clone(), name.clone());
        let task = tokio::spawn(async move {
            tokio::task::spawn_blocking(move || {
                let removed = writer.lock().delete(&scope, &name, selector, deadline)?;
                // The rows are gone (durably); the files follow. A file
                // left behind by a crash here is repair's to remove.
                for (_, blob) in &removed {
                    Self::remove_content(&*files, blob);
                }
                Ok(removed.into_iter().map(|(v, _)| v).collect())
            })
            .await
            .map_err(joined)?
        });
        task.await.map_err(joined)?
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        self.deadline(opts).check(Stage::Queueing)?;
        let limit = self.limits.page_limit(page.limit)?;
        let sh = scope.hash();
        let rtx = self.db.begin_read().map_err(storage)?;
        let table = rtx.open_table(LIVE).map_err(storage)?;
        let mut lo = sh.to_vec();
        if let Some(c) = &page.cursor {
            lo.extend_from_slice(c.as_str().as_bytes());
        }
        let mut hi = sh.to_vec();
        hi.push(0xff);
        let lower = if page.cursor.is_some() {
            std::ops::Bound::Excluded(&lo[..])
        } else {
            std::ops::Bound::Included(&lo[..])
        };
        let mut items = Vec::new();
        let mut more = false;
        for item in table
            .range::<&[u8]>((lower, std::ops::Bound::Excluded(&hi[..])))
            .map_err(storage)?
        {
            let (k, _) = item.map_err(storage)?;
            if items.len() == limit {
                more = true;
                break;
            }
            let raw = k
                .value()
                .get(32..)
                .ok_or_else(|| Error::Corrupt("a name key is malformed".into()))?;
            let name = std::str::from_utf8(raw)
                .ok()
                .and_then(|n| ArtifactName::new(n).ok())
                .ok_or_else(|| Error::Corrupt("a stored name is malformed".into()))?;
            items.push(name);
        }
        let next_cursor = if more { items.last().cloned() } else { None };
        Ok(Page {
            scope: scope.clone(),
            items,
            next_cursor,
        })
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        self.deadline(opts).check(Stage::Queueing)?;
        let limit = self.limits.page_limit(page.limit)?;
        let (sh, nh) = (scope.hash(), name.hash());
        let from = page.cursor.map_or(0, |c| c.saturating_add(1));
        let mut items = Vec::new();
        let mut more = false;
        if page.cursor != Some(u64::MAX) {
            let (lo, hi) = (version_key(&sh, &nh, from), version_key(&sh, &nh, u64::MAX));
            let rtx = self.db.begin_read().map_err(storage)?;
            let table = rtx.open_table(VERSIONS).map_err(storage)?;
            for item in table.range(&lo[..]..=&hi[..]).map_err(storage)? {
                let (_, v) = item.map_err(storage)?;
                let row: VersionRow = decode(v.value(), "version")?;
                if row.state != State::Published {
                    continue;
                }
                if items.len() == limit {
                    more = true;
                    break;
                }
                items.push(row.meta(scope, name)?);
            }
        }
        let next_cursor = if more {
            items.last().map(|m: &ArtifactMeta| m.version)
        } else {
            None
        };
        Ok(Page {
            scope: scope.clone(),
            items,
            next_cursor,
        })
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<hippocamp_artifacts::ScopePage> {
        self.deadline(opts).check(Stage::Queueing)?;
        let limit = self.limits.page_limit(limit)?;
        let after = cursor
            .map(hippocamp_artifacts::model::scope_cursor)
            .transpose()?;
        let rtx = self.db.begin_read().map_err(storage)?;
        let table = rtx.open_table(SCOPES).map_err(storage)?;
        let lower = match &after {
            Some(a) => std::ops::Bound::Excluded(a.as_slice()),
            None => std::ops::Bound::Unbounded,
        };
        let mut found = Vec::new();
        for item in table
            .range::<&[u8]>((lower, std::ops::Bound::Unbounded))
            .map_err(storage)?
        {
            let (k, v) = item.map_err(storage)?;
            let row: ScopeRow = decode(v.value(), "scope")?;
            if row.artifacts == 0 {
                continue;
            }
            let hash: [u8; 32] = k
                .value()
                .try_into()
                .map_err(|_| Error::Corrupt("a scope key is malformed".into()))?;
            found.push((hash, row.scope.scope()?));
            if found.len() > limit {
                break;
            }
        }
        hippocamp_artifacts::model::scope_page(found, None, limit)
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        let t = *self.published.lock();
        Ok(ArtifactStatus {
            backend: "filesystem".to_owned(),
            artifacts: Some(t.artifacts),
            bytes: Some(t.bytes),
            router: None,
        })
    }
}

impl Drop for FsArtifacts {
    fn drop(&mut self) {
        // A clean close leaves an empty log; a failure here is harmless,
        // as the next open replays the log.
        let mut w = self.writer.lock();
        if w.poisoned.is_none() && w.since_checkpoint > 0 {
            let _ = w.checkpoint();
        }
    }
}

/// A boxed redb backend.
#[derive(Debug)]
struct BoxedBackend(Box<dyn StorageBackend>);

impl StorageBackend for BoxedBackend {
    fn len(&self) -> std::result::Result<u64, io::Error> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::result::Result<(), io::Error> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::result::Result<(), io::Error> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::result::Result<(), io::Error> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::result::Result<(), io::Error> {
        self.0.write(offset, data)
    }
}

fn init_format(db: &Database) -> Result<()> {
    hippocamp_durable::db::init_format(
        db,
        META,
        FORMAT_KEY,
        FORMAT_VERSION,
        "the artifact catalog",
        |txn| {
            for t in Table::ALL.into_iter().filter(|t| *t != Table::Meta) {
                txn.open_table(t.def()).map_err(storage)?;
            }
            Ok(())
        },
    )
}

/// Replays the log records newer than the last checkpoint, then resolves
/// every pending version (published if its content is present and
/// verified, removed otherwise), all in one durable transaction, then
/// empties the log. Returns the last applied sequence number.
fn recover(db: &Database, wal: &mut dyn WalStorage, files: &dyn FileOps) -> Result<u64> {
    let records = decode_log::<Mutation>(&wal.read_all().map_err(storage)?);
    let txn = db.begin_write().map_err(storage)?;
    let mut tx = Tx {
        txn,
        log: Vec::new(),
    };
    let applied = match tx.get(Table::Meta, WAL_SEQ_KEY)? {
        Some(v) => crate::catalog::u64_value(&v)?,
        None => 0,
    };
    let mut last = applied;
    for (seq, mutations) in records {
        if seq <= applied {
            continue;
        }
        for m in mutations {
            match m {
                Mutation::Put(t, k, v) => tx.put(t, &k, &v)?,
                Mutation::Del(t, k) => tx.del(t, &k)?,
            }
        }
        last = seq;
    }
    let pending: Vec<VersionKey> = {
        let table = tx.txn.open_table(PENDING).map_err(storage)?;
        let mut keys = Vec::new();
        for item in table.iter().map_err(storage)? {
            let (k, _) = item.map_err(storage)?;
            keys.push(
                k.value()
                    .try_into()
                    .map_err(|_| Error::Corrupt("a pending key is malformed".into()))?,
            );
        }
        keys
    };
    for key in pending {
        let Some(row) = tx.version_row(&key)? else {
            tx.del(Table::Pending, &key)?;
            continue;
        };
        let chunks = tx
            .get(Table::Chunks, &key)?
            .map(|c| decode_chunks(&c))
            .transpose()?;
        let intact = chunks.is_some_and(|chunks| {
            let integrity = Integrity {
                size: row.size,
                sha256: Sha256Digest::from_bytes(row.sha256),
                chunk_size: row.chunk_size,
                chunks,
            };
            content_intact(files, &row.blob, &integrity)
        });
        if intact {
            tx.publish(&key, row)?;
        } else {
            tx.remove_version(&key, &row)?;
            FsArtifacts::remove_content(files, &row.blob);
        }
    }
    tx.put(Table::Meta, WAL_SEQ_KEY, &last.to_le_bytes())?;
    tx.txn.commit().map_err(storage)?;
    wal.truncate().map_err(storage)?;
    Ok(last)
}

/// Whether a blob's content file is present and matches its record.
pub(crate) fn content_intact(files: &dyn FileOps, blob: &BlobId, integrity: &Integrity) -> bool {
    let (dir, name) = blob_file(blob);
    let Ok(file) = files.open(dir, &name) else {
        return false;
    };
    if integrity.check_shape().is_err() || file.size().ok() != Some(integrity.size) {
        return false;
    }
    let mut whole = sha2::Sha256::new();
    for i in 0..integrity.chunks.len() as u64 {
        let len = integrity.chunk_len(i);
        let Ok(bytes) = read_chunk(&*file, i * integrity.chunk_size, len) else {
            return false;
        };
        if integrity.verify(i, &bytes).is_err() {
            return false;
        }
        whole.update(&bytes);
    }
    Sha256Digest::from_bytes(whole.finalize().into()) == integrity.sha256
}

/// Store-wide totals: the sums of the scope rows.
fn count(db: &Database) -> Result<Totals> {
    let rtx = db.begin_read().map_err(storage)?;
    let table = rtx.open_table(SCOPES).map_err(storage)?;
    let mut t = Totals::default();
    for item in table.iter().map_err(storage)? {
        let (_, v) = item.map_err(storage)?;
        let row: ScopeRow = decode(v.value(), "scope")?;
        t.artifacts += row.artifacts;
        t.bytes += row.bytes;
    }
    Ok(t)
}
