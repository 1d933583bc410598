//! A simulated disk with power loss, for the database file (a redb
//! storage backend) and the write-ahead log (a `WalStorage`) together.
//!
//! Each device keeps the live bytes (what the process sees) and the durable
//! bytes (what survives after the last sync). Armed with a sync count N,
//! power fails when sync N+1 (of either device) begins: each device keeps
//! its durable bytes, plus, optionally, a prefix of the writes issued since
//! its last sync (whole writes, then one torn write), as a page cache may
//! have flushed some on its own. Everything after the cut is lost, whatever
//! the process goes on doing. Syncs are counted, so a test can check that
//! every acknowledged write was followed by one.

#![allow(dead_code)]

use std::io;
use std::sync::Arc;

use hippocamp_memory_redb::WalStorage;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use redb::StorageBackend;

#[derive(Debug, Clone)]
enum Unsynced {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct Device {
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
    fn with(image: Vec<u8>) -> Self {
        Self {
            live: image.clone(),
            durable: image,
            unsynced: Vec::new(),
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let op = Unsynced::Write(offset, data.to_vec());
        apply(&mut self.live, &op, None);
        self.unsynced.push(op);
    }

    fn set_len(&mut self, len: u64) {
        let op = Unsynced::SetLen(len);
        apply(&mut self.live, &op, None);
        self.unsynced.push(op);
    }

    /// What survives a power cut now.
    fn surviving(&self, tear: bool, rng: &mut rand::rngs::StdRng) -> Vec<u8> {
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

#[derive(Debug, Default)]
struct Disk {
    db: Device,
    wal: Device,
    syncs: u64,
    cut_after: Option<u64>,
    tear: bool,
    seed: u64,
    surviving: Option<(Vec<u8>, Vec<u8>)>,
}

impl Disk {
    fn sync(&mut self, wal: bool) {
        if self.surviving.is_none() && self.cut_after == Some(self.syncs) {
            // Power fails as this sync begins.
            let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
            let db = self.db.surviving(self.tear, &mut rng);
            let wal = self.wal.surviving(self.tear, &mut rng);
            self.surviving = Some((db, wal));
        }
        self.syncs += 1;
        let dev = if wal { &mut self.wal } else { &mut self.db };
        if self.surviving.is_none() {
            dev.durable.clone_from(&dev.live);
        }
        dev.unsynced.clear();
    }
}

/// The disk: hands out the database backend and the log.
#[derive(Debug, Clone, Default)]
pub struct PowerLoss {
    disk: Arc<Mutex<Disk>>,
}

impl PowerLoss {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    /// A disk holding these images (as after a reboot).
    pub fn with_images(db: Vec<u8>, wal: Vec<u8>) -> Self {
        let disk = Disk {
            db: Device::with(db),
            wal: Device::with(wal),
            ..Disk::default()
        };
        Self {
            disk: Arc::new(Mutex::new(disk)),
        }
    }

    /// The database file.
    pub fn backend(&self) -> DbFile {
        DbFile(self.clone())
    }

    /// The log.
    pub fn wal(&self) -> LogFile {
        LogFile(self.clone())
    }

    /// Power fails when sync `n + 1` begins; `tear` lets a random prefix of
    /// each device's unsynced writes (the last one possibly torn) survive.
    pub fn arm(&self, n: u64, tear: bool, seed: u64) {
        let mut d = self.disk.lock();
        d.cut_after = Some(n);
        d.tear = tear;
        d.seed = seed;
    }

    /// Syncs so far, of both devices.
    pub fn syncs(&self) -> u64 {
        self.disk.lock().syncs
    }

    /// Whether the power has failed.
    pub fn cut(&self) -> bool {
        self.disk.lock().surviving.is_some()
    }

    /// What the disk holds after the power failure (or its durable state,
    /// if the power has not failed).
    pub fn surviving(&self) -> (Vec<u8>, Vec<u8>) {
        let d = self.disk.lock();
        d.surviving
            .clone()
            .unwrap_or_else(|| (d.db.durable.clone(), d.wal.durable.clone()))
    }
}

/// The database file on the simulated disk.
#[derive(Debug)]
pub struct DbFile(PowerLoss);

impl StorageBackend for DbFile {
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
        self.0.disk.lock().sync(false);
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.0.disk.lock().db.write(offset, data);
        Ok(())
    }
}

/// The log on the simulated disk.
#[derive(Debug)]
pub struct LogFile(PowerLoss);

impl WalStorage for LogFile {
    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        Ok(self.0.disk.lock().wal.live.clone())
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut d = self.0.disk.lock();
        let end = d.wal.live.len() as u64;
        d.wal.write(end, data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.disk.lock().sync(true);
        Ok(())
    }

    fn truncate(&mut self) -> io::Result<()> {
        let mut d = self.0.disk.lock();
        d.wal.set_len(0);
        d.sync(true);
        Ok(())
    }
}
