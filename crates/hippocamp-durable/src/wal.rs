//! The write-ahead log: the durability point of every acknowledged write
//! of the embedded stores.
//!
//! Why a log in front of redb: a durable redb commit flushes every B-tree
//! page the transaction touched (records, scope rows, allocator state)
//! scattered over the file; measured here that costs 1.4-1.9x a plain
//! append + fdatasync of the same bytes. So each group of writes is applied to a redb
//! transaction, its resulting mutations are appended to this log as one
//! checksummed record and fsynced, and only then is the transaction
//! committed without fsync (`Durability::None`) and the writes
//! acknowledged. Visibility therefore never precedes durability.
//! Periodically (and on close) a durable redb commit checkpoints everything
//! and the log is emptied.
//!
//! On open, records newer than the checkpoint (`wal_seq` in the `meta`
//! table) are replayed in order in one durable transaction. A record is
//! `len u32 LE | seq u64 LE | XXH3-64(seq, payload) LE | payload` (a
//! torn-write check, not a defence against whoever can write the file;
//! records of earlier builds carry the first 8 bytes of SHA-256 instead and
//! are read too); the log ends at the first record that is short, fails its
//! checksum, or does not follow its predecessor's sequence number (a torn
//! tail was never acknowledged, since appends are sequential and each is
//! synced before its writes are acknowledged).
//!
//! The log file is written ahead of use in zero-filled steps (1 MiB, up
//! to 16 MiB as it grows), a page per write, and
//! reused from its start after each checkpoint, so a sync after a record
//! under 64 KiB flushes only the appended bytes, never a changed file size
//! (measured here: overwriting pre-written space and syncing takes about
//! 0.7-0.8x appending and syncing). A record of 64 KiB or more (a bulk
//! batch) that reaches past the written space is written there directly:
//! zeros ahead of it would be copied only to be overwritten.
//! Emptying it only invalidates its first record; what follows is ignored,
//! as it breaks the sequence.
//!
//! The kernel caches what a record overwrites in pages of the base size:
//! the zeros are written a page at a time and the log is read (once, at
//! open) with random-access advice, since a small write into a large
//! folio of the page cache walks every block of the folio
//! ([`crate::fs::advise_random`]).

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _, Seek as _};
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest as _, Sha256};

/// Storage for the log. The file implementation is [`FileWal`]; tests
/// substitute one that simulates power loss.
pub trait WalStorage: Send + fmt::Debug {
    /// The whole log.
    fn read_all(&mut self) -> io::Result<Vec<u8>>;
    /// Appends bytes at the end.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Empties the log, durably.
    fn truncate(&mut self) -> io::Result<()>;
}

/// Pre-written space is added in steps of this size.
const PREALLOCATE: u64 = 1 << 20;

/// What `read_all` reads at a time.
const READ_CHUNK: usize = 1 << 20;

/// Records of this size or more go past the written space directly: for
/// them the zeros cost more than the size change they save (a 1,000-event
/// batch is ~0.5 MB; with a 1 MiB threshold it took 98-112k acknowledged
/// events/s, with this one 117-126k, paired runs).
const DIRECT: u64 = 64 << 10;

/// The log in a file.
#[derive(Debug)]
pub struct FileWal {
    file: File,
    /// Where the next record goes.
    end: u64,
    /// Bytes of the file already written (zeros beyond `end`).
    len: u64,
}

impl FileWal {
    /// Opens (creating, owner-only) the log at `path`. Appends start after `truncate`,
    /// which the store calls once it has replayed the log.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = crate::fs::private_file(path)?;
        crate::fs::advise_random(&file)?;
        let len = file.metadata()?.len();
        Ok(Self { file, end: 0, len })
    }

    /// Writes zeros ahead so appends up to `need` overwrite written space.
    fn reserve(&mut self, need: u64) -> io::Result<()> {
        if need <= self.len {
            return Ok(());
        }
        // Steps grow with the log (up to 16 MiB), so a log filled by bulk
        // ingestion pays for few size-changing syncs, and a small one stays
        // small.
        let step = (self.len / 2).clamp(PREALLOCATE, 16 * PREALLOCATE);
        let new_len = need.max(self.len + step).div_ceil(PREALLOCATE) * PREALLOCATE;
        crate::fs::write_zeros(&self.file, self.len, new_len)?;
        // The size changes here, so this sync covers the metadata too.
        self.file.sync_all()?;
        self.len = new_len;
        Ok(())
    }
}

impl WalStorage for FileWal {
    /// Reads record by record and stops at the first one that is not
    /// intact: the file is pre-written with zeros and an emptied log keeps
    /// its size, so reading it whole would cost its full size in memory
    /// on every open.
    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let size = self.file.metadata()?.len();
        let mut out = Vec::new();
        let mut at = 0u64;
        // Read in large pieces: with random-access advice the kernel reads
        // ahead of nothing, so record-sized reads would each wait for the
        // device.
        let mut file = &self.file;
        file.seek(io::SeekFrom::Start(0))?;
        let mut file = io::BufReader::with_capacity(READ_CHUNK, file);
        loop {
            let mut header = [0u8; HEADER];
            if at + HEADER as u64 > size {
                return Ok(out);
            }
            file.read_exact(&mut header)?;
            let len = u64::from(u32::from_le_bytes([
                header[0], header[1], header[2], header[3],
            ]));
            if len == 0 || at + HEADER as u64 + len > size {
                return Ok(out);
            }
            let mut payload = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
            file.read_exact(&mut payload)?;
            let mut seq = [0u8; 8];
            seq.copy_from_slice(&header[4..12]);
            if !intact(u64::from_le_bytes(seq), &payload, &header[12..]) {
                return Ok(out);
            }
            out.extend_from_slice(&header);
            out.extend_from_slice(&payload);
            at += HEADER as u64 + len;
        }
    }

    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let end = self.end + data.len() as u64;
        // A large record (a bulk batch) goes past the written space
        // directly: zeros written ahead of it were copied in only to be
        // overwritten (the largest kernel cost of bulk ingestion), and its
        // one size change is small beside its own bytes.
        if (data.len() as u64) < DIRECT {
            self.reserve(end)?;
        }
        self.file.write_all_at(data, self.end)?;
        self.end = end;
        self.len = self.len.max(end);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self) -> io::Result<()> {
        // Invalidating the first record empties the log; the rest of the
        // file stays written for reuse.
        self.reserve(HEADER as u64)?;
        self.file.write_all_at(&[0u8; HEADER], 0)?;
        self.file.sync_data()?;
        self.end = 0;
        Ok(())
    }
}

const HEADER: usize = 4 + 8 + 8;

fn checksum(seq: u64, payload: &[u8]) -> [u8; 8] {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.digest().to_le_bytes()
}

/// The checksum records had before this build (the first 8 bytes of
/// SHA-256): a log a crash left behind under an earlier build still
/// replays.
fn legacy_checksum(seq: u64, payload: &[u8]) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(seq.to_le_bytes());
    h.update(payload);
    let d = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

/// Whether `sum` is the checksum of record `seq` holding `payload`.
fn intact(seq: u64, payload: &[u8], sum: &[u8]) -> bool {
    checksum(seq, payload) == sum || legacy_checksum(seq, payload) == sum
}

/// Encodes one record holding `mutations` (postcard-encoded), serialized
/// straight after the space its header takes (one buffer, no copy).
pub fn encode_record<M: Serialize>(seq: u64, mutations: &[M]) -> io::Result<Vec<u8>> {
    encode_record_sized(seq, mutations, 0)
}

/// [`encode_record`] into a buffer of `size_hint` bytes to start with (a
/// large group grown from empty was copied a dozen times).
pub fn encode_record_sized<M: Serialize>(
    seq: u64,
    mutations: &[M],
    size_hint: usize,
) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(HEADER + size_hint);
    out.resize(HEADER, 0);
    let out = postcard_into(out, mutations).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot encode a log record: {e}"),
        )
    })?;
    seal(seq, out)
}

/// postcard's encoding of `value` appended to `out` (the bytes of
/// `postcard::to_stdvec`, tested): through `Extend`, postcard added bytes
/// one call at a time, a measured share of encoding a durable write.
pub fn postcard_into<T: Serialize + ?Sized>(out: Vec<u8>, value: &T) -> postcard::Result<Vec<u8>> {
    postcard::serialize_with_flavor(value, VecFlavor(out))
}

/// A postcard output that appends to a vector in bulk.
struct VecFlavor(Vec<u8>);

impl postcard::ser_flavors::Flavor for VecFlavor {
    type Output = Vec<u8>;

    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Vec<u8>> {
        Ok(self.0)
    }
}

/// Fills in the header of a record whose payload follows [`HEADER`]
/// bytes of room.
fn seal(seq: u64, mut out: Vec<u8>) -> io::Result<Vec<u8>> {
    let payload = out.get(HEADER..).unwrap_or_default();
    let len = u32::try_from(payload.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a write group is too large for the log",
        )
    })?;
    let sum = checksum(seq, payload);
    out[..4].copy_from_slice(&len.to_le_bytes());
    out[4..12].copy_from_slice(&seq.to_le_bytes());
    out[12..HEADER].copy_from_slice(&sum);
    Ok(out)
}

/// Decodes the valid prefix of a log: its records in order.
pub fn decode_log<M: DeserializeOwned>(bytes: &[u8]) -> Vec<(u64, Vec<M>)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while bytes.len() >= at + HEADER {
        let mut len = [0u8; 4];
        len.copy_from_slice(&bytes[at..at + 4]);
        let len = u32::from_le_bytes(len) as usize;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[at + 4..at + 12]);
        let seq = u64::from_le_bytes(seq);
        let sum = &bytes[at + 12..at + HEADER];
        let Some(payload) = bytes.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        if !intact(seq, payload, sum) {
            break;
        }
        if out.last().is_some_and(|(prev, _)| seq != prev + 1) {
            // A stale record from before the log was last emptied.
            break;
        }
        let Ok(mutations) = postcard::from_bytes::<Vec<M>>(payload) else {
            break;
        };
        out.push((seq, mutations));
        at += HEADER + len;
    }
    out
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    enum Mutation {
        PutScope(Vec<u8>, Vec<u8>),
        DelEntry(Vec<u8>),
        PutSession(Vec<u8>),
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let a = vec![
            Mutation::PutScope(vec![1, 2], vec![5]),
            Mutation::DelEntry(vec![3; 32]),
        ];
        let b = vec![Mutation::PutSession(vec![4; 48])];
        let mut log = encode_record(1, &a).unwrap();
        log.extend(encode_record(2, &b).unwrap());
        assert_eq!(decode_log::<Mutation>(&log), vec![(1, a.clone()), (2, b)]);
        for cut in 0..log.len() {
            let got = decode_log::<Mutation>(&log[..cut]);
            assert!(got.len() <= 1);
            if let Some((seq, m)) = got.first() {
                assert_eq!((*seq, m), (1, &a));
            }
        }
        let mut flipped = log.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(decode_log::<Mutation>(&flipped).len(), 1);
        // A valid record that breaks the sequence ends the log.
        let mut stale = encode_record(5, &a).unwrap();
        stale.extend(encode_record(3, &a).unwrap());
        assert_eq!(decode_log::<Mutation>(&stale).len(), 1);
    }

    #[test]
    fn appended_postcard_is_postcard() {
        let m = vec![
            Mutation::PutScope(vec![1; 300], vec![2; 5]),
            Mutation::DelEntry(vec![]),
        ];
        let out = postcard_into(vec![9, 9], &m).unwrap();
        assert_eq!(out[..2], [9, 9]);
        assert_eq!(out[2..], postcard::to_stdvec(&m).unwrap());
    }

    #[test]
    fn a_record_is_its_header_then_its_payload() {
        let m = vec![Mutation::PutScope(vec![9; 3], vec![8; 70_000])];
        let rec = encode_record(42, &m).unwrap();
        let payload = postcard::to_stdvec(&m).unwrap();
        let mut want = u32::try_from(payload.len()).unwrap().to_le_bytes().to_vec();
        want.extend_from_slice(&42u64.to_le_bytes());
        let mut seeded = 42u64.to_le_bytes().to_vec();
        seeded.extend_from_slice(&payload);
        want.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&seeded).to_le_bytes());
        want.extend_from_slice(&payload);
        assert_eq!(rec, want);
    }

    #[test]
    fn records_of_earlier_builds_still_replay() {
        let m = vec![Mutation::DelEntry(vec![3; 32])];
        let payload = postcard::to_stdvec(&m).unwrap();
        let mut old = u32::try_from(payload.len()).unwrap().to_le_bytes().to_vec();
        old.extend_from_slice(&7u64.to_le_bytes());
        let d = Sha256::new()
            .chain_update(7u64.to_le_bytes())
            .chain_update(&payload)
            .finalize();
        old.extend_from_slice(&d[..8]);
        old.extend_from_slice(&payload);
        let mut log = old.clone();
        log.extend(encode_record(8, &m).unwrap());
        assert_eq!(decode_log::<Mutation>(&log), vec![(7, m.clone()), (8, m)]);
        let last = old.len() - 1;
        old[last] ^= 1;
        assert!(decode_log::<Mutation>(&old).is_empty());
    }

    /// An emptied log in `dir`, its path, and the bytes its file holds.
    fn emptied_log(dir: &tempfile::TempDir) -> (std::path::PathBuf, FileWal, u64) {
        let path = dir.path().join("wal");
        let mut wal = FileWal::open(&path).unwrap();
        wal.truncate().unwrap();
        let written = std::fs::metadata(&path).unwrap().len();
        (path, wal, written)
    }

    /// A record `seq` of about `n` bytes.
    fn record_of(seq: u64, n: usize) -> Vec<u8> {
        encode_record(seq, &[Mutation::DelEntry(vec![7; n])]).unwrap()
    }

    /// The sequence numbers the log at `path` replays when reopened.
    fn replayed(path: &Path) -> Vec<u64> {
        let log = FileWal::open(path).unwrap().read_all().unwrap();
        decode_log::<Mutation>(&log).iter().map(|r| r.0).collect()
    }

    #[test]
    fn a_large_record_extends_the_log_directly() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut wal, written) = emptied_log(&dir);
        // Past a step, so the written space cannot hold it whatever it is.
        let big = usize::try_from(PREALLOCATE + DIRECT).unwrap();
        let (first, second) = (record_of(1, big), record_of(2, 32));
        wal.append(&first).unwrap();
        wal.sync().unwrap();
        // Past the written space, the file ends where the record does.
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > written);
        assert_eq!(size, first.len() as u64);
        // A small record after it is written ahead of use again.
        wal.append(&second).unwrap();
        wal.sync().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len() % PREALLOCATE, 0);
        assert_eq!(replayed(&path), vec![1, 2]);
    }

    #[test]
    fn a_record_under_a_step_but_over_the_direct_size_is_not_zeroed_first() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut wal, written) = emptied_log(&dir);
        // Two records of 0.6 steps: the first fits the written space, the
        // second reaches past it and ends the file.
        let n = usize::try_from(PREALLOCATE * 6 / 10).unwrap();
        assert!(n as u64 >= DIRECT);
        let (first, second) = (record_of(1, n), record_of(2, n));
        wal.append(&first).unwrap();
        wal.append(&second).unwrap();
        wal.sync().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > written);
        assert_eq!(size, (first.len() + second.len()) as u64);
        assert_eq!(replayed(&path), vec![1, 2]);
    }

    #[test]
    fn records_across_the_reads_of_a_replay_all_replay() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut wal, _) = emptied_log(&dir);
        // Records of an odd size, so some straddle each piece `read_all`
        // reads, over more than two pieces.
        let n = u64::try_from(READ_CHUNK * 5 / 2 / 1_001).unwrap() + 1;
        for seq in 1..=n {
            wal.append(&record_of(seq, 1_001 - HEADER)).unwrap();
        }
        wal.sync().unwrap();
        assert_eq!(replayed(&path), (1..=n).collect::<Vec<_>>());
    }

    #[test]
    fn file_log_reuses_its_space() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut wal, _) = emptied_log(&dir);
        let rec = |seq| {
            encode_record(
                seq,
                &[Mutation::DelEntry(vec![u8::try_from(seq).unwrap(); 32])],
            )
            .unwrap()
        };
        for seq in 1..=3 {
            wal.append(&rec(seq)).unwrap();
        }
        wal.sync().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(size % PREALLOCATE, 0);
        assert_eq!(decode_log::<Mutation>(&wal.read_all().unwrap()).len(), 3);
        // Emptied, then one new record: the old ones after it are ignored.
        wal.truncate().unwrap();
        wal.append(&rec(4)).unwrap();
        wal.sync().unwrap();
        assert_eq!(replayed(&path), vec![4]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    }
}
