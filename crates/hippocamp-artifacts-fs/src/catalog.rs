//! The catalog: every table, key and row of the embedded database (redb),
//! and the logged mutation that replays a change.
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"format"`, `"wal_seq"` | format version (u32 LE); last log record applied at a checkpoint (u64 LE) |
//! | `scopes` | scope hash (32) | [`ScopeRow`]: the scope, its versions and bytes (pending ones included) |
//! | `counters` | scope hash ‖ name | the name's high-water version (u64 LE), never lowered |
//! | `live` | scope hash ‖ name | the name's published versions (u64 LE); absent at 0 |
//! | `versions` | scope hash ‖ name hash ‖ version BE (72) | [`VersionRow`] |
//! | `chunks` | same as `versions` | the chunk digests, 32 bytes each |
//! | `pending` | same as `versions` | empty: a version reserved but not yet published |
//! | `blobs` | blob id (16) | the `versions` key that owns the content file |
//!
//! Hashes are SHA-256 of the canonical encodings ([`ArtifactScope::hash`],
//! [`ArtifactName::hash`]); every row stores its full scope and name and
//! is checked against the request when read, so a collision cannot cross
//! scopes or names. Names are UTF-8, so no name contains the byte `0xff`,
//! which bounds a scope's key range in `live`. Every table maps bytes to
//! bytes so the log can replay any change with one code path. Rows are
//! postcard-encoded; custom metadata is kept as JSON text inside them. The
//! format version is written at creation and checked on every open.

use hippocamp_artifacts::{ArtifactMeta, ArtifactName, ArtifactScope, MimeType};
use hippocamp_core::{Error, Result, Sha256Digest};
use redb::TableDefinition;
use serde::{Deserialize, Serialize};

/// The format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

type Bytes2Bytes = TableDefinition<'static, &'static [u8], &'static [u8]>;

pub(crate) const META: Bytes2Bytes = TableDefinition::new("meta");
pub(crate) const SCOPES: Bytes2Bytes = TableDefinition::new("scopes");
pub(crate) const COUNTERS: Bytes2Bytes = TableDefinition::new("counters");
pub(crate) const LIVE: Bytes2Bytes = TableDefinition::new("live");
pub(crate) const VERSIONS: Bytes2Bytes = TableDefinition::new("versions");
pub(crate) const CHUNKS: Bytes2Bytes = TableDefinition::new("chunks");
pub(crate) const PENDING: Bytes2Bytes = TableDefinition::new("pending");
pub(crate) const BLOBS: Bytes2Bytes = TableDefinition::new("blobs");

pub(crate) const FORMAT_KEY: &[u8] = b"format";
pub(crate) const WAL_SEQ_KEY: &[u8] = b"wal_seq";

/// The tables a logged mutation can touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Table {
    Meta,
    Scopes,
    Counters,
    Live,
    Versions,
    Chunks,
    Pending,
    Blobs,
}

impl Table {
    pub(crate) const ALL: [Table; 8] = [
        Table::Meta,
        Table::Scopes,
        Table::Counters,
        Table::Live,
        Table::Versions,
        Table::Chunks,
        Table::Pending,
        Table::Blobs,
    ];

    pub(crate) fn def(self) -> Bytes2Bytes {
        match self {
            Table::Meta => META,
            Table::Scopes => SCOPES,
            Table::Counters => COUNTERS,
            Table::Live => LIVE,
            Table::Versions => VERSIONS,
            Table::Chunks => CHUNKS,
            Table::Pending => PENDING,
            Table::Blobs => BLOBS,
        }
    }
}

/// One logged change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Mutation {
    Put(Table, Vec<u8>, Vec<u8>),
    Del(Table, Vec<u8>),
}

/// Key of a version (and of its chunks and pending mark).
pub(crate) type VersionKey = [u8; 72];

/// A random content-file id.
pub(crate) type BlobId = [u8; 16];

pub(crate) fn version_key(scope: &[u8; 32], name: &[u8; 32], version: u64) -> VersionKey {
    let mut k = [0u8; 72];
    k[..32].copy_from_slice(scope);
    k[32..64].copy_from_slice(name);
    k[64..].copy_from_slice(&version.to_be_bytes());
    k
}

#[cfg(test)]
pub(crate) fn key_version(k: &[u8]) -> Result<u64> {
    let b: [u8; 8] = k
        .get(64..72)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::Corrupt("a version key is malformed".into()))?;
    Ok(u64::from_be_bytes(b))
}

pub(crate) fn name_key(scope: &[u8; 32], name: &ArtifactName) -> Vec<u8> {
    let mut k = Vec::with_capacity(32 + name.as_str().len());
    k.extend_from_slice(scope);
    k.extend_from_slice(name.as_str().as_bytes());
    k
}

pub(crate) fn u64_value(v: &[u8]) -> Result<u64> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| Error::Corrupt("a counter is malformed".into()))?;
    Ok(u64::from_le_bytes(b))
}

/// The file name of a blob and its fan-out directory.
pub(crate) fn blob_file(blob: &BlobId) -> (u8, String) {
    (blob[0], hex::encode(blob))
}

/// Parses a content file name: the blob and whether it is staged (a
/// `.tmp` name, which earlier versions of the store wrote before renaming
/// it and no row ever references).
pub(crate) fn parse_file(name: &str) -> Option<(BlobId, bool)> {
    let (hex_part, staged) = match name.strip_suffix(".tmp") {
        Some(h) => (h, true),
        None => (name, false),
    };
    if hex_part.len() != 32 {
        return None;
    }
    let mut b = [0u8; 16];
    hex::decode_to_slice(hex_part, &mut b).ok()?;
    Some((b, staged))
}

/// A scope as stored: its kind and parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredScope {
    kind: u8,
    parts: Vec<String>,
}

impl StoredScope {
    pub(crate) fn new(scope: &ArtifactScope) -> Self {
        match scope {
            ArtifactScope::App { app } => Self {
                kind: b'a',
                parts: vec![app.as_str().to_owned()],
            },
            ArtifactScope::User { app, user } => Self {
                kind: b'u',
                parts: vec![app.as_str().to_owned(), user.as_str().to_owned()],
            },
            ArtifactScope::Session { app, user, session } => Self {
                kind: b's',
                parts: vec![
                    app.as_str().to_owned(),
                    user.as_str().to_owned(),
                    session.as_str().to_owned(),
                ],
            },
        }
    }

    pub(crate) fn scope(&self) -> Result<ArtifactScope> {
        let bad = || Error::Corrupt("a stored scope is malformed".into());
        match (self.kind, self.parts.as_slice()) {
            (b'a', [a]) => ArtifactScope::app(a),
            (b'u', [a, u]) => ArtifactScope::user(a, u),
            (b's', [a, u, s]) => ArtifactScope::session(a, u, s),
            _ => Err(bad()),
        }
        .map_err(|_| bad())
    }
}

/// A scope's counters (pending versions included, so quotas hold while
/// uploads are in flight).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ScopeRow {
    pub(crate) scope: StoredScope,
    pub(crate) artifacts: u64,
    pub(crate) bytes: u64,
}

/// Whether a version is visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum State {
    /// Reserved: its content may not be durable yet; never visible.
    Pending,
    /// Published.
    Published,
}

/// One version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VersionRow {
    pub(crate) state: State,
    pub(crate) scope: StoredScope,
    pub(crate) name: String,
    pub(crate) version: u64,
    pub(crate) mime_type: String,
    pub(crate) size: u64,
    pub(crate) sha256: [u8; 32],
    pub(crate) chunk_size: u64,
    pub(crate) created_at_ms: u64,
    pub(crate) metadata_json: String,
    pub(crate) blob: BlobId,
}

impl VersionRow {
    /// The record, checked against the scope and name asked for.
    pub(crate) fn meta(&self, scope: &ArtifactScope, name: &ArtifactName) -> Result<ArtifactMeta> {
        if self.scope != StoredScope::new(scope) || self.name != name.as_str() {
            return Err(Error::foreign_record("the artifact catalog", "a version"));
        }
        let metadata = serde_json::from_str(&self.metadata_json)
            .map_err(|e| Error::Corrupt(format!("stored metadata is malformed: {e}")))?;
        Ok(ArtifactMeta {
            scope: scope.clone(),
            name: name.clone(),
            version: self.version,
            mime_type: MimeType::new(self.mime_type.clone())
                .map_err(|_| Error::Corrupt("a stored MIME type is malformed".into()))?,
            size: self.size,
            sha256: Sha256Digest::from_bytes(self.sha256),
            chunk_size: self.chunk_size,
            created_at_ms: self.created_at_ms,
            metadata,
        })
    }
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| Error::Corrupt(format!("cannot encode a record: {e}")))
}

pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable {what} record: {e}")))
}

pub(crate) fn encode_chunks(chunks: &[Sha256Digest]) -> Vec<u8> {
    chunks.iter().flat_map(|c| *c.as_bytes()).collect()
}

pub(crate) fn decode_chunks(bytes: &[u8]) -> Result<Vec<Sha256Digest>> {
    if !bytes.len().is_multiple_of(32) {
        return Err(Error::Corrupt("a chunk digest list is malformed".into()));
    }
    Ok(bytes
        .chunks_exact(32)
        .map(|c| {
            let mut d = [0u8; 32];
            d.copy_from_slice(c);
            Sha256Digest::from_bytes(d)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_files_round_trip() {
        let k = version_key(&[1; 32], &[2; 32], 258);
        assert_eq!(key_version(&k).unwrap(), 258);
        assert!(version_key(&[1; 32], &[2; 32], 9) < version_key(&[1; 32], &[2; 32], 10));
        let blob = [0xab; 16];
        let (dir, name) = blob_file(&blob);
        assert_eq!(dir, 0xab);
        assert_eq!(parse_file(&name), Some((blob, false)));
        assert_eq!(parse_file(&format!("{name}.tmp")), Some((blob, true)));
        assert_eq!(parse_file("LOCK"), None);
        let s = ArtifactScope::session("a", "u", "s").unwrap();
        assert_eq!(StoredScope::new(&s).scope().unwrap(), s);
        let d = vec![Sha256Digest::of(b"a"), Sha256Digest::of(b"b")];
        assert_eq!(decode_chunks(&encode_chunks(&d)).unwrap(), d);
    }
}
