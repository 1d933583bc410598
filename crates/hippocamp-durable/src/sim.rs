//! A simulated disk with power loss, for tests (feature `sim`): a redb
//! database file ([`DbFile`], a storage backend), a write-ahead log
//! ([`LogFile`]) and any further state a test attaches ([`Extra`], e.g. a
//! simulated directory tree), all behind one lock so a cut is one instant.
//!
//! Each device keeps the live bytes (what the process sees) and the
//! durable bytes (what survives after its last sync). Armed with a sync
//! count N, power fails when sync N+1 (of any device) begins: each device
//! keeps its durable state plus, when tearing, a random prefix of the
//! writes issued since its last sync (whole writes, then one torn write),
//! as a page cache may flush some on its own. Everything after the cut is
//! lost, whatever the process goes on doing. Syncs are counted, so a test
//! can check that every acknowledged write was followed by one.

use std::fmt;
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redb::StorageBackend;

use crate::WalStorage;

#[derive(Debug, Clone)]
enum Unsynced {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// A file's bytes: live, durable, and the writes in between.
#[derive(Debug, Clone, Default)]
pub struct Device {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Unsynced>,
}

fn apply(image: &mut Vec<u8>, op: &Unsynced, limit: Option<usize>) {
    match op {
        Unsynced::SetLen(len) => image.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        Unsynced::Write(off, data) => {
            let off = usize::try_from(*off).unwrap_or(usize::MAX);
            let n = limit.unwrap_or(data.len()).min(data.len());
            if image.len() < off + n {
                image.resize(off + n, 0);
            }
            image[off..off + n].copy_from_slice(&data[..n]);
        }
    }
}

impl Device {
    /// A device holding `image`, all of it durable.
    pub fn with(image: Vec<u8>) -> Self {
        Self {
            live: image.clone(),
            durable: image,
            unsynced: Vec::new(),
        }
    }

    /// The live bytes.
    pub fn live(&self) -> &[u8] {
        &self.live
    }

    /// Writes at `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let op = Unsynced::Write(offset, data.to_vec());
        apply(&mut self.live, &op, None);
        self.unsynced.push(op);
    }

    /// Appends at the end.
    pub fn append(&mut self, data: &[u8]) {
        let end = self.live.len() as u64;
        self.write(end, data);
    }

    /// Changes the length.
    pub fn set_len(&mut self, len: u64) {
        let op = Unsynced::SetLen(len);
        apply(&mut self.live, &op, None);
        self.unsynced.push(op);
    }

    /// Makes the live bytes durable.
    pub fn sync(&mut self) {
        self.durable.clone_from(&self.live);
        self.unsynced.clear();
    }

    /// What survives a power cut now.
    pub fn surviving(&self, tear: bool, rng: &mut StdRng) -> Vec<u8> {
        let mut image = self.durable.clone();
        if tear && !self.unsynced.is_empty() {
            let keep = rng.random_range(0..=self.unsynced.len());
            for op in &self.unsynced[..keep] {
                apply(&mut image, op, None);
            }
            if let Some(op @ Unsynced::Write(_, data)) = self.unsynced.get(keep) {
                let torn = rng.random_range(0..=data.len());
                apply(&mut image, op, Some(torn));
            }
        }
        image
    }
}

/// Further simulated state that a power cut affects.
pub trait Extra: Clone + Default + Send + fmt::Debug + 'static {
    /// What survives a power cut now (tearing: some unsynced changes too).
    #[must_use]
    fn surviving(&self, tear: bool, rng: &mut StdRng) -> Self;
}

impl Extra for () {
    fn surviving(&self, _tear: bool, _rng: &mut StdRng) -> Self {}
}

/// What a disk holds: after a power failure, or its durable state.
#[derive(Debug, Clone, Default)]
pub struct Image<X = ()> {
    /// The database file.
    pub db: Vec<u8>,
    /// The log.
    pub wal: Vec<u8>,
    /// The attached state.
    pub extra: X,
}

#[derive(Debug, Default)]
struct Disk<X> {
    db: Device,
    wal: Device,
    extra: X,
    syncs: u64,
    cut_after: Option<u64>,
    tear: bool,
    seed: u64,
    surviving: Option<Image<X>>,
}

impl<X: Extra> Disk<X> {
    /// Counts a sync, failing the power first if this is the armed one.
    /// Returns whether the power is still on.
    fn begin_sync(&mut self) -> bool {
        if self.surviving.is_none() && self.cut_after == Some(self.syncs) {
            let mut rng = StdRng::seed_from_u64(self.seed);
            self.surviving = Some(Image {
                db: self.db.surviving(self.tear, &mut rng),
                wal: self.wal.surviving(self.tear, &mut rng),
                extra: self.extra.surviving(self.tear, &mut rng),
            });
        }
        self.syncs += 1;
        self.surviving.is_none()
    }
}

/// The disk: hands out the database backend and the log, and holds the
/// attached state.
#[derive(Debug, Default)]
pub struct PowerLoss<X = ()> {
    disk: Arc<Mutex<Disk<X>>>,
}

impl<X> Clone for PowerLoss<X> {
    fn clone(&self) -> Self {
        Self {
            disk: Arc::clone(&self.disk),
        }
    }
}

impl<X: Extra> PowerLoss<X> {
    /// An empty disk.
    pub fn new() -> Self {
        Self {
            disk: Arc::new(Mutex::new(Disk::default())),
        }
    }

    /// A disk holding `image`, all of it durable (as after a reboot).
    pub fn with_image(image: Image<X>) -> Self {
        let disk = Disk {
            db: Device::with(image.db),
            wal: Device::with(image.wal),
            extra: image.extra,
            syncs: 0,
            cut_after: None,
            tear: false,
            seed: 0,
            surviving: None,
        };
        Self {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// The database file.
    pub fn backend(&self) -> DbFile<X> {
        DbFile(self.clone())
    }

    /// The log.
    pub fn wal(&self) -> LogFile<X> {
        LogFile(self.clone())
    }

    /// Power fails when sync `n + 1` begins; `tear` lets some unsynced
    /// changes survive.
    pub fn arm(&self, n: u64, tear: bool, seed: u64) {
        let mut d = self.disk.lock();
        d.cut_after = Some(n);
        d.tear = tear;
        d.seed = seed;
    }

    /// Syncs so far, of every device.
    pub fn syncs(&self) -> u64 {
        self.disk.lock().syncs
    }

    /// Whether the power has failed.
    pub fn cut(&self) -> bool {
        self.disk.lock().surviving.is_some()
    }

    /// What the disk holds after the power failure (or its durable state,
    /// if the power has not failed).
    pub fn surviving(&self) -> Image<X> {
        let d = self.disk.lock();
        d.surviving.clone().unwrap_or_else(|| Image {
            db: d.db.durable.clone(),
            wal: d.wal.durable.clone(),
            extra: d.extra.surviving(false, &mut StdRng::seed_from_u64(0)),
        })
    }

    /// Runs `f` on the attached state (an operation that syncs nothing).
    pub fn extra<R>(&self, f: impl FnOnce(&mut X) -> R) -> R {
        f(&mut self.disk.lock().extra)
    }

    /// A sync of the attached state: counted (and failing the power if it
    /// is the armed one) before `f` applies it.
    pub fn extra_sync<R>(&self, f: impl FnOnce(&mut X) -> R) -> R {
        let mut d = self.disk.lock();
        d.begin_sync();
        f(&mut d.extra)
    }
}

/// The database file on the simulated disk.
#[derive(Debug)]
pub struct DbFile<X>(PowerLoss<X>);

impl<X: Extra + Sync> StorageBackend for DbFile<X> {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.0.disk.lock().db.live.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let d = self.0.disk.lock();
        let off = usize::try_from(offset).map_err(|_| io::Error::other("offset"))?;
        let end = off + out.len();
        if end > d.db.live.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past end",
            ));
        }
        out.copy_from_slice(&d.db.live[off..end]);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.0.disk.lock().db.set_len(len);
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let mut d = self.0.disk.lock();
        if d.begin_sync() {
            d.db.sync();
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.0.disk.lock().db.write(offset, data);
        Ok(())
    }
}

/// The log on the simulated disk.
#[derive(Debug)]
pub struct LogFile<X>(PowerLoss<X>);

impl<X: Extra> WalStorage for LogFile<X> {
    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        Ok(self.0.disk.lock().wal.live.clone())
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.disk.lock().wal.append(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut d = self.0.disk.lock();
        if d.begin_sync() {
            d.wal.sync();
        }
        Ok(())
    }

    fn truncate(&mut self) -> io::Result<()> {
        let mut d = self.0.disk.lock();
        d.wal.set_len(0);
        if d.begin_sync() {
            d.wal.sync();
        }
        Ok(())
    }
}
