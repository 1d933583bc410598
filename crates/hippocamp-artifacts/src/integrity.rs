//! Integrity that survives streaming: the size, the SHA-256 of the whole
//! artifact and a SHA-256 per fixed-size chunk are recorded at put; every
//! read verifies each chunk it touches before releasing its bytes, and a
//! whole read also checks the whole digest. Corruption is an error
//! (`Corrupt`), never bad bytes.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt as _;
use hippocamp_core::{Error, Result, Sha256Digest};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::model::ByteRange;
use crate::store::ByteStream;

/// The default chunk size: 1 MiB.
pub const DEFAULT_CHUNK_SIZE: u64 = 1 << 20;

/// What a store records about an artifact's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the whole artifact.
    pub sha256: Sha256Digest,
    /// Bytes per chunk (the last chunk may be shorter).
    pub chunk_size: u64,
    /// SHA-256 of each chunk, in order.
    pub chunks: Vec<Sha256Digest>,
}

impl Integrity {
    /// Length of chunk `i`.
    pub fn chunk_len(&self, i: u64) -> u64 {
        let start = i * self.chunk_size;
        self.chunk_size.min(self.size.saturating_sub(start))
    }

    /// The chunks a read of `range` (or everything) touches, inclusive.
    pub fn span(&self, range: Option<ByteRange>) -> Option<(u64, u64)> {
        match range {
            None if self.size == 0 => None,
            None => Some((0, (self.size - 1) / self.chunk_size)),
            Some(r) => Some((
                r.offset / self.chunk_size,
                (r.offset + r.len - 1) / self.chunk_size,
            )),
        }
    }

    /// Checks one chunk's bytes.
    pub fn verify(&self, i: u64, bytes: &[u8]) -> Result<()> {
        let expected = usize::try_from(i)
            .ok()
            .and_then(|i| self.chunks.get(i))
            .ok_or_else(|| Error::Corrupt(format!("chunk {i} has no recorded digest")))?;
        if bytes.len() as u64 != self.chunk_len(i) {
            return Err(Error::Corrupt(format!(
                "chunk {i} holds {} bytes, expected {}",
                bytes.len(),
                self.chunk_len(i)
            )));
        }
        if Sha256Digest::of(bytes) != *expected {
            return Err(Error::Corrupt(format!(
                "chunk {i} does not match its digest"
            )));
        }
        Ok(())
    }

    /// Checks the record itself: chunk count consistent with the size.
    pub fn check_shape(&self) -> Result<()> {
        let want = self.size.div_ceil(self.chunk_size.max(1));
        if self.chunk_size == 0 || self.chunks.len() as u64 != want {
            return Err(Error::Corrupt(
                "the integrity record is inconsistent".into(),
            ));
        }
        Ok(())
    }
}

/// Computes an [`Integrity`] while bytes stream through.
#[derive(Debug)]
pub struct ChunkHasher {
    chunk_size: u64,
    whole: Sha256,
    current: Sha256,
    in_current: u64,
    chunks: Vec<Sha256Digest>,
    size: u64,
}

impl ChunkHasher {
    /// A hasher with `chunk_size`-byte chunks.
    pub fn new(chunk_size: u64) -> Self {
        Self {
            chunk_size,
            whole: Sha256::new(),
            current: Sha256::new(),
            in_current: 0,
            chunks: Vec::new(),
            size: 0,
        }
    }

    /// Feeds bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.whole.update(data);
        self.size += data.len() as u64;
        while !data.is_empty() {
            let room = usize::try_from(self.chunk_size - self.in_current).unwrap_or(usize::MAX);
            let take = room.min(data.len());
            self.current.update(&data[..take]);
            self.in_current += take as u64;
            data = &data[take..];
            if self.in_current == self.chunk_size {
                let done = std::mem::take(&mut self.current);
                self.chunks
                    .push(Sha256Digest::from_bytes(done.finalize().into()));
                self.in_current = 0;
            }
        }
    }

    /// Bytes fed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The record.
    pub fn finish(mut self) -> Integrity {
        if self.in_current > 0 {
            self.chunks
                .push(Sha256Digest::from_bytes(self.current.finalize().into()));
        }
        Integrity {
            size: self.size,
            sha256: Sha256Digest::from_bytes(self.whole.finalize().into()),
            chunk_size: self.chunk_size,
            chunks: self.chunks,
        }
    }
}

/// Chunks up to this size are hashed on the calling task; larger ones on a
/// blocking thread, so an async worker never hashes for long.
pub const INLINE_HASH_BYTES: usize = 256 << 10;

/// Verifies chunk `index` of `integrity`, off the async worker when large.
pub async fn verify_chunk(integrity: &Arc<Integrity>, index: u64, bytes: Bytes) -> Result<Bytes> {
    if bytes.len() <= INLINE_HASH_BYTES {
        integrity.verify(index, &bytes)?;
        return Ok(bytes);
    }
    let integrity = Arc::clone(integrity);
    tokio::task::spawn_blocking(move || integrity.verify(index, &bytes).map(|()| bytes))
        .await
        .map_err(|e| Error::Unavailable(format!("a verification task failed: {e}")))?
}

/// Where a store's verified reads get chunk bytes from.
#[async_trait]
pub trait ChunkSource: Send + 'static {
    /// The bytes of chunk `index`, verified against `integrity` (see
    /// [`Integrity::verify`]); a mismatch is `Corrupt`.
    async fn verified_chunk(&mut self, index: u64, integrity: &Arc<Integrity>) -> Result<Bytes>;
}

/// The SHA-256 of a whole artifact, computed on a blocking thread while
/// its chunks are verified or written on another, so a multi-chunk read or
/// write hashes each byte twice in the time of once. With at most one
/// piece pushed nothing is hashed: that piece's own digest is the whole
/// digest.
#[derive(Debug, Default)]
pub struct WholeDigest {
    held: Option<Bytes>,
    feed: Option<tokio::sync::mpsc::Sender<Bytes>>,
    result: Option<tokio::sync::oneshot::Receiver<Sha256Digest>>,
}

impl WholeDigest {
    /// A digest with nothing pushed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next piece.
    pub async fn push(&mut self, piece: Bytes) -> Result<()> {
        if self.feed.is_none() {
            let Some(first) = self.held.take() else {
                self.held = Some(piece);
                return Ok(());
            };
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(4);
            let (done, result) = tokio::sync::oneshot::channel();
            tokio::task::spawn_blocking(move || {
                let mut h = Sha256::new();
                while let Some(b) = rx.blocking_recv() {
                    h.update(&b);
                }
                let _ = done.send(Sha256Digest::from_bytes(h.finalize().into()));
            });
            self.result = Some(result);
            self.feed = Some(tx);
            self.send(first).await?;
        }
        self.send(piece).await
    }

    async fn send(&self, piece: Bytes) -> Result<()> {
        let gone = || Error::Unavailable("the digest task stopped".into());
        self.feed
            .as_ref()
            .ok_or_else(gone)?
            .send(piece)
            .await
            .map_err(|_| gone())
    }

    /// The digest, or `None` when at most one piece was pushed.
    pub async fn finish(mut self) -> Result<Option<Sha256Digest>> {
        drop(self.feed.take());
        match self.result.take() {
            None => Ok(None),
            Some(r) => r
                .await
                .map(Some)
                .map_err(|_| Error::Unavailable("the digest task stopped".into())),
        }
    }
}

/// A stream of the bytes of `range` (or the whole artifact), each chunk
/// verified before any of its bytes is released; a whole read also checks
/// the whole digest (computed alongside, see [`WholeDigest`]) before it
/// releases the last chunk.
pub fn verified_stream(
    source: impl ChunkSource,
    integrity: Arc<Integrity>,
    range: Option<ByteRange>,
) -> ByteStream {
    struct State<S> {
        source: S,
        integrity: Arc<Integrity>,
        range: Option<ByteRange>,
        next: u64,
        last: u64,
        whole: Option<WholeDigest>,
        failed: bool,
    }
    if let Err(e) = integrity.check_shape() {
        return futures::stream::iter([Err(e)]).boxed();
    }
    let Some((first, last)) = integrity.span(range) else {
        // An empty artifact: nothing to verify but the whole digest.
        let ok = integrity.sha256 == Sha256Digest::of(b"");
        return futures::stream::iter(if ok {
            Vec::new()
        } else {
            vec![Err(Error::Corrupt(
                "the empty artifact's digest is wrong".into(),
            ))]
        })
        .boxed();
    };
    // One chunk: its verified digest must be the whole digest, so it is
    // not hashed twice.
    if range.is_none() && last == 0 && integrity.chunks.first() != Some(&integrity.sha256) {
        return futures::stream::iter([Err(Error::Corrupt(
            "the integrity record is inconsistent".into(),
        ))])
        .boxed();
    }
    let state = State {
        source,
        whole: (range.is_none() && last > 0).then(WholeDigest::new),
        integrity,
        range,
        next: first,
        last,
        failed: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.failed || st.next > st.last {
            return None;
        }
        let i = st.next;
        st.next += 1;
        let fail = |mut st: State<_>, e: Error| {
            st.failed = true;
            Some((Err(e), st))
        };
        let bytes = match st.source.verified_chunk(i, &st.integrity).await {
            Ok(b) => b,
            Err(e) => return fail(st, e),
        };
        if let Some(h) = &mut st.whole {
            if let Err(e) = h.push(bytes.clone()).await {
                return fail(st, e);
            }
            if i == st.last {
                let whole = st.whole.take().map(WholeDigest::finish);
                if let Some(f) = whole {
                    match f.await {
                        Ok(Some(d)) if d == st.integrity.sha256 => {}
                        Ok(_) => {
                            return fail(
                                st,
                                Error::Corrupt("the artifact does not match its digest".into()),
                            );
                        }
                        Err(e) => return fail(st, e),
                    }
                }
            }
        }
        let out = match st.range {
            None => bytes,
            Some(r) => {
                let chunk_start = i * st.integrity.chunk_size;
                let from = r.offset.saturating_sub(chunk_start);
                let to = (r.offset + r.len - chunk_start).min(bytes.len() as u64);
                bytes.slice(usize::try_from(from).unwrap_or(0)..usize::try_from(to).unwrap_or(0))
            }
        };
        Some((Ok(out), st))
    })
    .boxed()
}

/// Feeds a byte stream (of any piece sizes) into fixed-size chunks.
#[derive(Debug)]
pub struct Rechunker {
    chunk_size: usize,
    buf: Vec<u8>,
}

impl Rechunker {
    /// Chunks of `chunk_size` bytes.
    pub fn new(chunk_size: u64) -> Self {
        let chunk_size = usize::try_from(chunk_size).unwrap_or(usize::MAX);
        Self {
            chunk_size,
            buf: Vec::with_capacity(chunk_size.min(1 << 24)),
        }
    }

    /// Adds bytes; returns the chunks now complete.
    pub fn push(&mut self, mut data: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let take = (self.chunk_size - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buf.len() == self.chunk_size {
                out.push(Bytes::from(std::mem::replace(
                    &mut self.buf,
                    Vec::with_capacity(self.chunk_size.min(1 << 24)),
                )));
            }
        }
        out
    }

    /// The last, possibly short, chunk.
    pub fn finish(self) -> Option<Bytes> {
        (!self.buf.is_empty()).then(|| Bytes::from(self.buf))
    }
}

/// A [`ChunkSource`] over an in-memory artifact.
#[derive(Debug, Clone)]
pub struct BytesSource(pub Bytes, pub u64);

#[async_trait]
impl ChunkSource for BytesSource {
    async fn verified_chunk(&mut self, index: u64, integrity: &Arc<Integrity>) -> Result<Bytes> {
        let start = usize::try_from(index * self.1).unwrap_or(usize::MAX);
        let len = integrity.chunk_len(index);
        let end = start.saturating_add(usize::try_from(len).unwrap_or(0));
        let bytes = self
            .0
            .get(start..end)
            .map(|_| self.0.slice(start..end))
            .ok_or_else(|| Error::Corrupt(format!("chunk {index} is missing")))?;
        verify_chunk(integrity, index, bytes).await
    }
}

#[cfg(test)]
#[allow(clippy::many_single_char_names)]
mod tests {
    use super::*;

    async fn collect(s: ByteStream) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut s = s;
        while let Some(b) = s.next().await {
            out.extend_from_slice(&b?);
        }
        Ok(out)
    }

    fn data(n: usize) -> Vec<u8> {
        (0..n).map(|i| u8::try_from(i % 251).unwrap()).collect()
    }

    #[test]
    fn hasher_matches_one_shot() {
        let d = data(10_000);
        let mut h = ChunkHasher::new(1_000);
        for piece in d.chunks(333) {
            h.update(piece);
        }
        let i = h.finish();
        assert_eq!(i.size, 10_000);
        assert_eq!(i.sha256, Sha256Digest::of(&d));
        assert_eq!(i.chunks.len(), 10);
        assert_eq!(i.chunks[3], Sha256Digest::of(&d[3_000..4_000]));
        i.check_shape().unwrap();
        let mut r = Rechunker::new(1_000);
        let mut chunks = Vec::new();
        for piece in d.chunks(777) {
            chunks.extend(r.push(piece));
        }
        chunks.extend(r.finish());
        assert_eq!(chunks.len(), 10);
        assert!(chunks.iter().all(|c| c.len() == 1_000));
    }

    #[tokio::test]
    async fn verified_reads_whole_and_ranged() {
        let d = data(2_500);
        let mut h = ChunkHasher::new(1_000);
        h.update(&d);
        let i = Arc::new(h.finish());
        let src = || BytesSource(Bytes::from(d.clone()), 1_000);
        assert_eq!(
            collect(verified_stream(src(), i.clone(), None))
                .await
                .unwrap(),
            d
        );
        let r = ByteRange {
            offset: 950,
            len: 1_100,
        };
        assert_eq!(
            collect(verified_stream(src(), i.clone(), Some(r)))
                .await
                .unwrap(),
            d[950..2_050]
        );
        // Corrupt the second chunk: a whole read and a range touching it
        // fail, a range not touching it succeeds.
        let mut bad = d.clone();
        bad[1_500] ^= 1;
        let bad_src = || BytesSource(Bytes::from(bad.clone()), 1_000);
        assert!(matches!(
            collect(verified_stream(bad_src(), i.clone(), None)).await,
            Err(Error::Corrupt(_))
        ));
        assert!(matches!(
            collect(verified_stream(bad_src(), i.clone(), Some(r))).await,
            Err(Error::Corrupt(_))
        ));
        let clean = ByteRange {
            offset: 0,
            len: 900,
        };
        assert!(
            collect(verified_stream(bad_src(), i.clone(), Some(clean)))
                .await
                .is_ok()
        );
        // No bytes of the bad chunk are released before the error.
        let mut s = verified_stream(bad_src(), i, None);
        assert_eq!(s.next().await.unwrap().unwrap().len(), 1_000);
        assert!(s.next().await.unwrap().is_err());
        assert!(s.next().await.is_none());
    }
}
