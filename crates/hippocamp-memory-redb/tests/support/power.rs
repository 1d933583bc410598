//! A redb storage backend that simulates power loss.
//!
//! It keeps the live bytes (what the process sees) and the durable bytes
//! (what a disk holds after the last `sync_data`). Armed with a sync count
//! N, power fails when sync N+1 begins: the surviving image is the durable
//! image after sync N, plus, optionally, a prefix of the writes issued
//! since (whole writes, then one torn write), as a page cache may have
//! flushed some of them on its own. Everything after the cut is lost,
//! whatever the process goes on doing. It also counts syncs, so a test can
//! check that every acknowledged write was followed by one.

#![allow(dead_code)]

use std::io;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng;
use redb::StorageBackend;

#[derive(Debug, Clone)]
enum Unsynced {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Default)]
struct State {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Unsynced>,
    syncs: u64,
    cut_after: Option<u64>,
    tear: bool,
    seed: u64,
    surviving: Option<Vec<u8>>,
}

/// The simulated disk.
#[derive(Debug, Clone, Default)]
pub struct PowerLossBackend {
    state: Arc<Mutex<State>>,
}

impl PowerLossBackend {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    /// A disk holding `image` (as after a reboot).
    pub fn with_image(image: Vec<u8>) -> Self {
        let s = State {
            live: image.clone(),
            durable: image,
            ..State::default()
        };
        Self {
            state: Arc::new(Mutex::new(s)),
        }
    }

    /// Power fails when sync `n + 1` begins; `tear` lets a random prefix of
    /// the unsynced writes (the last one possibly torn) survive.
    pub fn arm(&self, n: u64, tear: bool, seed: u64) {
        let mut s = self.state.lock();
        s.cut_after = Some(n);
        s.tear = tear;
        s.seed = seed;
    }

    /// Syncs so far.
    pub fn syncs(&self) -> u64 {
        self.state.lock().syncs
    }

    /// Whether the power has failed.
    pub fn cut(&self) -> bool {
        self.state.lock().surviving.is_some()
    }

    /// What the disk holds after the power failure (or now, if it has not
    /// failed yet and the process died without syncing more).
    pub fn surviving_image(&self) -> Vec<u8> {
        let s = self.state.lock();
        s.surviving.clone().unwrap_or_else(|| s.durable.clone())
    }
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

impl StorageBackend for PowerLossBackend {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.state.lock().live.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let s = self.state.lock();
        let off = usize::try_from(offset).map_err(|_| io::Error::other("offset"))?;
        let end = off + out.len();
        if end > s.live.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past end",
            ));
        }
        out.copy_from_slice(&s.live[off..end]);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut s = self.state.lock();
        s.live.resize(
            usize::try_from(len).map_err(|_| io::Error::other("len"))?,
            0,
        );
        s.unsynced.push(Unsynced::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        let mut s = self.state.lock();
        if s.surviving.is_none() && s.cut_after == Some(s.syncs) {
            // Power fails as this sync begins.
            let mut image = s.durable.clone();
            if s.tear && !s.unsynced.is_empty() {
                let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(s.seed);
                let keep = rng.random_range(0..=s.unsynced.len());
                for op in &s.unsynced[..keep] {
                    apply(&mut image, op, None);
                }
                if let Some(Unsynced::Write(_, data)) = s.unsynced.get(keep) {
                    let torn = rng.random_range(0..=data.len());
                    let op = s.unsynced[keep].clone();
                    apply(&mut image, &op, Some(torn));
                }
            }
            s.surviving = Some(image);
        }
        s.syncs += 1;
        if s.surviving.is_none() {
            let live = s.live.clone();
            s.durable = live;
        }
        s.unsynced.clear();
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut s = self.state.lock();
        let op = Unsynced::Write(offset, data.to_vec());
        apply(&mut s.live, &op, None);
        s.unsynced.push(op);
        Ok(())
    }
}
