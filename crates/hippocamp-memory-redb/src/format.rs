//! The on-disk format: tables, keys and record encodings.
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"format"`, `"wal_seq"` | format version (u32 LE); last log record applied at a checkpoint (u64 LE) |
//! | `scopes` | scope hash (16 bytes) | [`ScopeRow`]: app, user, counters, erasure epoch, erasure records |
//! | `entries` | scope hash ‖ entry id (32 bytes) | [`EntryRecord`]: the entry and its analysed terms, then its ingestion time (a postcard varint after the record; absent from records written before it, read as none) |
//! | `sessions` | scope hash ‖ session hash ‖ entry id (48 bytes) | `()` |
//! | `vectors` | scope hash ‖ entry id (32 bytes) | the entry's unit vector, f32 LE; written and deleted in the entry's transactions |
//! | `erased` | scope hash ‖ session hash ‖ entry id (48 bytes) | `()`: an erased entry of a session; an event of that session that would make it again is skipped (erasure is sticky); never removed, counted in the scope row's `erasures` |
//! | `erased_ids` | scope hash ‖ entry id (32 bytes) | `()`: an erased entry, with or without a session (by id, session, user or sweep); a restore does not write it back, and an export lists it; never removed, counted in the scope row's `erasures` (rows of `erased` written before it are recorded here once when such a store opens) |
//! | `obligations` | scope hash ‖ entry id (32 bytes) | the entry's [`Obligations`] when it has any; written and deleted in the entry's transactions |
//! | `expiry` | expiry ms (u64 BE) ‖ scope hash ‖ entry id (40 bytes) | `()`: entries by expiry, for the sweeper |
//! | `revisions` | scope hash ‖ entry id ‖ revision (u32 BE) (36 bytes) | [`RevisionRecord`]: the kept revisions of a corrected entry, the current one included (none for an entry never corrected); the last key gives the entry's revision; written and deleted in the entry's transactions |
//! | `session_epochs` | scope hash ‖ session hash (32 bytes) | the session's erasure epoch (u64 LE) ‖ its id: advanced by each `delete_session` in its transaction (absent: 0); a write admitted under an older one is refused; never removed, counted in the scope row's `erasures` |
//! | `users` | app ‖ NUL ‖ user (text) | `()`: the scopes that hold at least one entry, for `list_apps` and `list_users`; kept where a scope's entry count leaves or reaches zero (built from `scopes` once when a store written before it opens) |
//!
//! `meta` also holds `"embedder"` (`model` ‖ `\n` ‖ dimension) once a store
//! has embedded: its vectors are only comparable with that model's, so
//! opening it with another embedder is refused.
//!
//! The scope hash is the first 16 bytes of SHA-256 over the app and user;
//! every record also stores the full scope and is checked against the
//! requested scope when read, so a hash collision cannot cross scopes.
//! Records are postcard-encoded; metadata is kept as JSON text inside them.
//! The format version is written when a store is created and checked on
//! every open: an unknown version is refused, never guessed at.

use hippocamp_core::{
    Author, EntryId, Error, EventId, FactKey, MemoryScope, Metadata, Result, SessionId,
    Sha256Digest,
};
use hippocamp_memory::lineage::{FileSource, Origin, Role, Source, Status};
use hippocamp_memory::{MemoryEntry, Obligations, Provenance, Revision};
use hippocamp_search::{Analyzer, TermFreqs};
use redb::TableDefinition;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(crate) const SCOPES: TableDefinition<&[u8; 16], &[u8]> = TableDefinition::new("scopes");
pub(crate) const ENTRIES: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("entries");
pub(crate) const SESSIONS: TableDefinition<&[u8; 48], ()> = TableDefinition::new("sessions");
pub(crate) const VECTORS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("vectors");
pub(crate) const ERASED: TableDefinition<&[u8; 48], ()> = TableDefinition::new("erased");
pub(crate) const ERASED_IDS: TableDefinition<&[u8; 32], ()> = TableDefinition::new("erased_ids");

/// The `meta` key set once the `erased` rows of earlier builds were
/// recorded in `erased_ids` (and counted in their scope rows).
pub(crate) const ERASED_IDS_KEY: &str = "erased_ids";
pub(crate) const OBLIGATIONS: TableDefinition<&[u8; 32], &[u8]> =
    TableDefinition::new("obligations");
pub(crate) const EXPIRY: TableDefinition<&[u8; 40], ()> = TableDefinition::new("expiry");
pub(crate) const REVISIONS: TableDefinition<&[u8; 36], &[u8]> = TableDefinition::new("revisions");
pub(crate) const USERS: TableDefinition<&str, ()> = TableDefinition::new("users");
pub(crate) const SESSION_EPOCHS: TableDefinition<&[u8; 32], &[u8]> =
    TableDefinition::new("session_epochs");

/// A `session_epochs` value: the epoch, then the session's id (an export
/// lists the sessions by id).
pub(crate) fn encode_session_epoch(epoch: u64, session: &SessionId) -> Vec<u8> {
    let mut v = epoch.to_le_bytes().to_vec();
    v.extend_from_slice(session.as_str().as_bytes());
    v
}

/// The epoch and session of a `session_epochs` value.
pub(crate) fn decode_session_epoch(v: &[u8]) -> Result<(u64, SessionId)> {
    let bad = || Error::Corrupt("a session epoch record is malformed".into());
    let (epoch, id) = v.split_at_checked(8).ok_or_else(bad)?;
    let epoch = u64::from_le_bytes(epoch.try_into().map_err(|_| bad())?);
    let id = std::str::from_utf8(id).map_err(|_| bad())?;
    Ok((epoch, SessionId::new(id).map_err(|_| bad())?))
}

/// The `session_epochs` key of a session of the scope hashed `h`.
pub(crate) fn session_epoch_key(h: &[u8; 16], session: &[u8; 16]) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..16].copy_from_slice(h);
    k[16..].copy_from_slice(session);
    k
}

/// The `meta` key set once the `users` index holds every scope.
pub(crate) const USERS_INDEXED_KEY: &str = "users_indexed";

/// The `users` key of a scope: app names and user ids hold no NUL, so
/// the keys of one app sort together and after the app's prefix.
pub(crate) fn user_key(app: &str, user: &str) -> String {
    format!("{app}\0{user}")
}

/// The `revisions` key of revision `rev` of the entry under `entry_key`.
pub(crate) fn revision_key(entry_key: &[u8; 32], rev: u32) -> [u8; 36] {
    let mut k = [0u8; 36];
    k[..32].copy_from_slice(entry_key);
    k[32..].copy_from_slice(&rev.to_be_bytes());
    k
}

/// The first and last `revisions` keys under a 16-byte scope or 32-byte
/// entry prefix.
pub(crate) fn revision_range(prefix: &[u8]) -> ([u8; 36], [u8; 36]) {
    let mut lo = [0u8; 36];
    let mut hi = [0xffu8; 36];
    lo[..prefix.len()].copy_from_slice(prefix);
    hi[..prefix.len()].copy_from_slice(prefix);
    (lo, hi)
}

/// One kept revision of an entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RevisionRecord {
    pub(crate) app: String,
    pub(crate) user: String,
    pub(crate) content: String,
    pub(crate) metadata_json: String,
    pub(crate) digest: [u8; 32],
    pub(crate) written_at_ms: u64,
    /// It came from a restore: written after the other fields, only when
    /// true, so records of earlier builds read as false.
    #[serde(skip)]
    pub(crate) restored: bool,
}

impl RevisionRecord {
    /// Its bytes (see `restored`).
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut bytes = encode(self)?;
        if self.restored {
            bytes.push(1);
        }
        Ok(bytes)
    }

    /// A record from its bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut rec, rest): (Self, _) = postcard::take_from_bytes(bytes)
            .map_err(|e| Error::Corrupt(format!("undecodable revision record: {e}")))?;
        rec.restored = rest == [1];
        Ok(rec)
    }

    pub(crate) fn new(scope: &MemoryScope, r: &Revision) -> Result<Self> {
        Ok(Self {
            app: scope.app().as_str().to_owned(),
            user: scope.user().as_str().to_owned(),
            content: r.content.clone(),
            metadata_json: serde_json::to_string(&r.metadata)
                .map_err(|e| Error::Corrupt(format!("cannot encode metadata: {e}")))?,
            digest: *r.digest.as_bytes(),
            written_at_ms: r.written_at_ms,
            restored: r.restored,
        })
    }

    /// The revision numbered `rev`, checked against `scope` and its digest.
    pub(crate) fn into_revision(self, scope: &MemoryScope, rev: u32) -> Result<Revision> {
        if self.app != scope.app().as_str() || self.user != scope.user().as_str() {
            return Err(Error::foreign_record("the memory database", "a revision"));
        }
        let digest = Sha256Digest::from_bytes(self.digest);
        if Sha256Digest::of(self.content.as_bytes()) != digest {
            return Err(Error::Corrupt(
                "a revision's content does not match its digest".into(),
            ));
        }
        Ok(Revision {
            revision: rev,
            content: self.content,
            metadata: serde_json::from_str(&self.metadata_json)
                .map_err(|e| Error::Corrupt(format!("stored metadata is not JSON: {e}")))?,
            digest,
            written_at_ms: self.written_at_ms,
            restored: self.restored,
        })
    }
}

/// The `expiry` key of an entry that expires at `at`.
pub(crate) fn expiry_key(at: u64, entry_key: &[u8; 32]) -> [u8; 40] {
    let mut k = [0u8; 40];
    k[..8].copy_from_slice(&at.to_be_bytes());
    k[8..].copy_from_slice(entry_key);
    k
}

/// The `meta` key of the embedder the vectors were made with.
pub(crate) const EMBEDDER_KEY: &str = "embedder";

pub(crate) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Error::Corrupt("a stored vector is malformed".into()));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

pub(crate) const FORMAT_KEY: &str = "format";
/// Sequence number of the last log record applied to the database.
pub(crate) const WAL_SEQ_KEY: &str = "wal_seq";

/// The 16-byte key prefix of a scope.
pub(crate) fn scope_hash(scope: &MemoryScope) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"hippocamp-memory-scope\0");
    h.update(scope.app().as_str().as_bytes());
    h.update([0]);
    h.update(scope.user().as_str().as_bytes());
    first16(&h.finalize())
}

pub(crate) fn session_hash(session: &SessionId) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"hippocamp-memory-session\0");
    h.update(session.as_str().as_bytes());
    first16(&h.finalize())
}

fn first16(d: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

pub(crate) fn entry_key(scope: &[u8; 16], id: &EntryId) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..16].copy_from_slice(scope);
    k[16..].copy_from_slice(id.as_bytes());
    k
}

/// The first and last entry keys of a scope.
pub(crate) fn entry_range(scope: &[u8; 16]) -> ([u8; 32], [u8; 32]) {
    let mut lo = [0u8; 32];
    let mut hi = [0xffu8; 32];
    lo[..16].copy_from_slice(scope);
    hi[..16].copy_from_slice(scope);
    (lo, hi)
}

pub(crate) fn session_key(scope: &[u8; 16], session: &[u8; 16], id: &EntryId) -> [u8; 48] {
    let mut k = [0u8; 48];
    k[..16].copy_from_slice(scope);
    k[16..32].copy_from_slice(session);
    k[32..].copy_from_slice(id.as_bytes());
    k
}

/// The first and last session-index keys of `prefix` (16 or 32 bytes).
pub(crate) fn session_range(prefix: &[u8]) -> ([u8; 48], [u8; 48]) {
    let mut lo = [0u8; 48];
    let mut hi = [0xffu8; 48];
    lo[..prefix.len()].copy_from_slice(prefix);
    hi[..prefix.len()].copy_from_slice(prefix);
    (lo, hi)
}

/// Store-wide counters: the sums of the scope rows, rebuilt on open and
/// kept in memory by the writer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    pub(crate) scopes: u64,
}

/// One scope's counters and erasure epoch. The row outlives the scope's
/// entries: it carries the epoch that fences erased data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ScopeRow {
    pub(crate) app: String,
    pub(crate) user: String,
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
    pub(crate) epoch: u64,
    /// Erasure records of the scope (erased entry ids, erased sessions'
    /// epochs): written after the other fields, and only when not 0, so
    /// rows of earlier builds read as 0 and rows without records keep
    /// their bytes.
    #[serde(skip)]
    pub(crate) erasures: u64,
    /// Derived entries of the scope (those with sources): when 0, an
    /// erasure has no lineage to follow. Written after the erasure count,
    /// and only when not 0.
    #[serde(skip)]
    pub(crate) derived: u64,
}

impl ScopeRow {
    /// The row's record, sized up front (grown from empty, it was
    /// reallocated three times) and written as [`encode_entry`] writes an
    /// entry's (`tests::scope_rows_encode_as_serde_does`).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Postcard(Vec::with_capacity(self.app.len() + self.user.len() + 32));
        out.str(&self.app);
        out.str(&self.user);
        out.varint(self.entries);
        out.varint(self.bytes);
        out.varint(self.epoch);
        if self.erasures > 0 || self.derived > 0 {
            out.varint(self.erasures);
        }
        if self.derived > 0 {
            out.varint(self.derived);
        }
        out.0
    }

    /// A row from its record (see [`Self::encode`]).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut row, rest): (ScopeRow, _) = postcard::take_from_bytes(bytes)
            .map_err(|e| Error::Corrupt(format!("undecodable scope record: {e}")))?;
        if !rest.is_empty() {
            let (erasures, rest): (u64, _) = postcard::take_from_bytes(rest)
                .map_err(|e| Error::Corrupt(format!("undecodable scope's erasure count: {e}")))?;
            row.erasures = erasures;
            if !rest.is_empty() {
                row.derived = decode(rest, "scope's derived count")?;
            }
        }
        Ok(row)
    }

    /// The bytes it holds against its quota: its entries' and its
    /// erasure records'.
    pub(crate) fn held_bytes(&self) -> u64 {
        hippocamp_memory::erasure::erasure_records_bytes(self.bytes, self.erasures)
    }

    pub(crate) fn new(scope: &MemoryScope) -> Self {
        Self {
            app: scope.app().as_str().to_owned(),
            user: scope.user().as_str().to_owned(),
            entries: 0,
            bytes: 0,
            epoch: 0,
            erasures: 0,
            derived: 0,
        }
    }
}

/// A stored entry with its analysed terms (its forward postings), so a
/// scope's inverted index is rebuilt without analysing text again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EntryRecord {
    pub(crate) app: String,
    pub(crate) user: String,
    pub(crate) id: [u8; 16],
    pub(crate) content: String,
    pub(crate) metadata_json: String,
    pub(crate) session_id: Option<String>,
    pub(crate) event_ids: Vec<String>,
    pub(crate) author: Option<String>,
    pub(crate) provenance_timestamp_ms: Option<u64>,
    pub(crate) digest: [u8; 32],
    pub(crate) timestamp_ms: u64,
    pub(crate) epoch: u64,
    pub(crate) storage_bytes: u64,
    pub(crate) doc_len: u32,
    #[serde(with = "hippocamp_search::analyzer::term_list")]
    pub(crate) terms: TermFreqs,
    /// After the record's own bytes (see [`EntryRecord::decode`]).
    #[serde(skip)]
    pub(crate) ingested_at_ms: Option<u64>,
    /// After the ingestion time, when the entry has lineage to keep.
    #[serde(skip)]
    pub(crate) lineage: Option<LineageRecord>,
}

/// An entry's lineage as stored after its record: only for an entry whose
/// origin is not the one its provenance implies, or that is derived or
/// has a fact key (most entries have none, and pay nothing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LineageRecord {
    origin: Origin,
    derived_from: Vec<([u8; 16], Role)>,
    consolidation: Option<String>,
    fact_key: Option<String>,
    restored: bool,
    /// A file entry's artifact version, stored after the lineage record
    /// (records written before file entries have nothing there).
    #[serde(skip)]
    file: Option<(String, u64)>,
}

impl LineageRecord {
    /// What `entry` stores, if anything.
    pub(crate) fn of(entry: &MemoryEntry) -> Option<Self> {
        let plain = entry.origin == Origin::of_provenance(&entry.provenance)
            && entry.derived_from.is_empty()
            && entry.consolidation.is_none()
            && entry.fact_key.is_none()
            && entry.file.is_none()
            && !entry.lineage_restored;
        (!plain).then(|| Self {
            origin: entry.origin,
            derived_from: entry
                .derived_from
                .iter()
                .map(|s| (*s.entry.as_bytes(), s.role))
                .collect(),
            consolidation: entry.consolidation.clone(),
            fact_key: entry.fact_key.as_ref().map(|k| k.as_str().to_owned()),
            restored: entry.lineage_restored,
            file: entry.file.as_ref().map(|f| (f.name.clone(), f.version)),
        })
    }

    /// Whether the entry is derived (so erasing one of its sources erases
    /// it: the scope row counts them).
    pub(crate) fn is_derived(&self) -> bool {
        !self.derived_from.is_empty()
    }

    /// The source ids.
    pub(crate) fn sources(&self) -> impl Iterator<Item = EntryId> + '_ {
        self.derived_from
            .iter()
            .map(|(id, _)| EntryId::from_bytes(*id))
    }

    fn apply(self, entry: &mut MemoryEntry) -> Result<()> {
        entry.origin = self.origin;
        entry.derived_from = self
            .derived_from
            .into_iter()
            .map(|(id, role)| Source {
                entry: EntryId::from_bytes(id),
                role,
            })
            .collect();
        entry.consolidation = self.consolidation;
        entry.lineage_restored = self.restored;
        entry.file = self
            .file
            .map(|(name, version)| FileSource { name, version });
        entry.fact_key =
            self.fact_key.map(FactKey::new).transpose().map_err(|e| {
                Error::Corrupt(format!("stored entry has an invalid fact key: {e}"))
            })?;
        Ok(())
    }
}

/// postcard's encoding, written directly into a buffer: an
/// [`EntryRecord`] went through serde one field (and one byte of its id
/// and digest) at a time, which on the cold caches of a single durable
/// add took longer than the log write's system call. The layout is
/// postcard's (lengths and integers as LEB128 varints, fixed arrays as
/// their bytes, options as a 0 or 1 tag); `tests::records_encode_as_serde_does`
/// holds it to serde's encoding of an [`EntryRecord`].
struct Postcard(Vec<u8>);

impl Postcard {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v.to_le_bytes()[0] | 0x80);
            v >>= 7;
        }
        self.0.push(v.to_le_bytes()[0]);
    }

    fn len(&mut self, n: usize) {
        self.varint(n as u64);
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn tag(&mut self, some: bool) {
        self.0.push(u8::from(some));
    }

    fn opt_str(&mut self, s: Option<&str>) {
        self.tag(s.is_some());
        if let Some(s) = s {
            self.str(s);
        }
    }
}

/// `metadata` as JSON text; most entries have none, and its text is then
/// a constant rather than an allocation per record.
fn metadata_json(metadata: &Metadata) -> Result<std::borrow::Cow<'static, str>> {
    if metadata.is_empty() {
        return Ok("{}".into());
    }
    serde_json::to_string(metadata)
        .map(Into::into)
        .map_err(|e| Error::Corrupt(format!("cannot encode metadata: {e}")))
}

/// The stored record of `entry` with its storage bytes and terms.
pub(crate) fn encode_entry(
    entry: &MemoryEntry,
    storage_bytes: u64,
    terms: &TermFreqs,
) -> Result<Vec<u8>> {
    let p = &entry.provenance;
    let metadata = metadata_json(&entry.metadata)?;
    // Sized up front: grown from empty, a record was copied eight times.
    let size = 160
        + entry.content.len()
        + metadata.len()
        + p.event_ids
            .iter()
            .map(|e| e.as_str().len() + 2)
            .sum::<usize>()
        + terms.text_len()
        + 6 * terms.distinct();
    // The fields of an `EntryRecord`, in order.
    let mut out = Postcard(Vec::with_capacity(size));
    out.str(entry.scope.app().as_str());
    out.str(entry.scope.user().as_str());
    out.0.extend_from_slice(entry.id.as_bytes());
    out.str(&entry.content);
    out.str(&metadata);
    out.opt_str(p.session_id.as_ref().map(SessionId::as_str));
    out.len(p.event_ids.len());
    for e in &p.event_ids {
        out.str(e.as_str());
    }
    out.opt_str(p.author.as_ref().map(Author::as_str));
    out.tag(p.timestamp_ms.is_some());
    if let Some(t) = p.timestamp_ms {
        out.varint(t);
    }
    out.0.extend_from_slice(entry.digest.as_bytes());
    out.varint(entry.timestamp_ms);
    out.varint(entry.epoch);
    out.varint(storage_bytes);
    out.varint(u64::from(terms.doc_len()));
    out.len(terms.distinct());
    for (term, count) in terms.iter() {
        out.str(term);
        out.varint(u64::from(count));
    }
    write_trailer(
        &mut out.0,
        entry.ingested_at_ms,
        LineageRecord::of(entry).as_ref(),
    )?;
    Ok(out.0)
}

/// What follows a record: its ingestion time, then its lineage. A record
/// with lineage and no ingestion time writes 0 for the time (no entry is
/// ingested at the epoch), so the lineage is never read as a time.
fn write_trailer(
    out: &mut Vec<u8>,
    ingested_at_ms: Option<u64>,
    lineage: Option<&LineageRecord>,
) -> Result<()> {
    match (ingested_at_ms, lineage) {
        (None, None) => {}
        (t, l) => {
            out.extend(encode(&t.unwrap_or(0))?);
            if let Some(l) = l {
                out.extend(encode(l)?);
                if let Some(f) = &l.file {
                    out.extend(encode(f)?);
                }
            }
        }
    }
    Ok(())
}

/// `record` (logged by [`Mutation::PutEntryText`]) with its text's terms:
/// the record [`encode_entry`] makes of the same entry.
pub(crate) fn analysed_record(record: &[u8], analyzer: &Analyzer) -> Result<Vec<u8>> {
    let mut r = EntryRecord::decode(record)?;
    r.terms = analyzer.analyze(&r.content);
    r.doc_len = r.terms.doc_len();
    r.encode()
}

/// One change to one table, as logged; replayable in order.
///
/// Keys and values are (de)serialized as byte strings: postcard writes a
/// byte string exactly as it writes a sequence of `u8` (length, then the
/// bytes), which is how logs of earlier builds hold them, but in one copy
/// instead of a call per byte (`tests::mutations_keep_their_log_layout`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Mutation {
    PutEntry(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    DelEntry(#[serde(with = "serde_bytes")] Vec<u8>),
    DelEntries(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    PutSession(#[serde(with = "serde_bytes")] Vec<u8>),
    DelSession(#[serde(with = "serde_bytes")] Vec<u8>),
    DelSessions(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    PutScope(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    // Appended: older logs decode unchanged (variants are numbered).
    PutVector(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    DelVector(#[serde(with = "serde_bytes")] Vec<u8>),
    DelVectors(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    PutErased(#[serde(with = "serde_bytes")] Vec<u8>),
    PutObligations(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    DelObligations(#[serde(with = "serde_bytes")] Vec<u8>),
    DelObligationsIn(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    PutExpiry(#[serde(with = "serde_bytes")] Vec<u8>),
    DelExpiry(#[serde(with = "serde_bytes")] Vec<u8>),
    PutRevision(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    DelRevisionsIn(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    PutUser(String),
    DelUser(String),
    /// An entry record logged before its text was analysed (its terms
    /// empty): whoever applies it analyses the text first
    /// ([`analysed_record`]). A lone add is logged so, and acknowledged
    /// before anyone analysed it (`writer`).
    PutEntryText(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    /// A session's erasure epoch (`session_epochs`).
    PutSessionEpoch(
        #[serde(with = "serde_bytes")] Vec<u8>,
        #[serde(with = "serde_bytes")] Vec<u8>,
    ),
    /// An erased entry (`erased_ids`).
    PutErasedId(#[serde(with = "serde_bytes")] Vec<u8>),
}

impl Mutation {
    /// About the bytes it takes in a log record (to size the record).
    pub(crate) fn size_hint(&self) -> usize {
        let (a, b) = match self {
            Mutation::PutEntry(k, v)
            | Mutation::PutEntryText(k, v)
            | Mutation::DelEntries(k, v)
            | Mutation::DelSessions(k, v)
            | Mutation::PutScope(k, v)
            | Mutation::PutVector(k, v)
            | Mutation::DelVectors(k, v)
            | Mutation::PutObligations(k, v)
            | Mutation::DelObligationsIn(k, v)
            | Mutation::PutRevision(k, v)
            | Mutation::DelRevisionsIn(k, v)
            | Mutation::PutSessionEpoch(k, v) => (k.len(), v.len()),
            Mutation::DelEntry(k)
            | Mutation::PutSession(k)
            | Mutation::DelSession(k)
            | Mutation::DelVector(k)
            | Mutation::PutErased(k)
            | Mutation::PutErasedId(k)
            | Mutation::DelObligations(k)
            | Mutation::PutExpiry(k)
            | Mutation::DelExpiry(k) => (k.len(), 0),
            Mutation::PutUser(k) | Mutation::DelUser(k) => (k.len(), 0),
        };
        a + b + 8
    }
}

/// A log record of `log`, sized up front.
pub(crate) fn log_record(seq: u64, log: &[Mutation]) -> std::io::Result<Vec<u8>> {
    let size = log.iter().map(Mutation::size_hint).sum::<usize>() + 8;
    hippocamp_durable::encode_record_sized(seq, log, size)
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| Error::Corrupt(format!("cannot encode record: {e}")))
}

pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes)
        .map_err(|e| Error::Corrupt(format!("undecodable {what} record: {e}")))
}

impl EntryRecord {
    /// A record from its bytes: the postcard record, then the ingestion
    /// time as a varint when it has one (records written before the
    /// field have nothing after the record: no format change).
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut rec, rest): (Self, _) = postcard::take_from_bytes(bytes)
            .map_err(|e| Error::Corrupt(format!("undecodable entry record: {e}")))?;
        if !rest.is_empty() {
            let (t, tail): (u64, _) = postcard::take_from_bytes(rest)
                .map_err(|e| Error::Corrupt(format!("undecodable entry ingestion time: {e}")))?;
            rec.ingested_at_ms = Some(t);
            if !tail.is_empty() {
                let (mut l, end): (LineageRecord, _) = postcard::take_from_bytes(tail)
                    .map_err(|e| Error::Corrupt(format!("undecodable entry lineage: {e}")))?;
                if !end.is_empty() {
                    let (f, end): ((String, u64), _) = postcard::take_from_bytes(end)
                        .map_err(|e| Error::Corrupt(format!("undecodable entry file: {e}")))?;
                    if !end.is_empty() {
                        return Err(Error::Corrupt(
                            "an entry record has bytes after its file".into(),
                        ));
                    }
                    l.file = Some(f);
                }
                if t == 0 {
                    rec.ingested_at_ms = None;
                }
                rec.lineage = Some(l);
            }
        }
        Ok(rec)
    }

    /// Its bytes (see [`EntryRecord::decode`]).
    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        let mut bytes = encode(self)?;
        write_trailer(&mut bytes, self.ingested_at_ms, self.lineage.as_ref())?;
        Ok(bytes)
    }

    /// The owned record [`encode_entry`] writes (for tests of its layout).
    #[cfg(test)]
    pub(crate) fn new(entry: &MemoryEntry, storage_bytes: u64, terms: &TermFreqs) -> Result<Self> {
        let p = &entry.provenance;
        Ok(Self {
            app: entry.scope.app().as_str().to_owned(),
            user: entry.scope.user().as_str().to_owned(),
            id: *entry.id.as_bytes(),
            content: entry.content.clone(),
            metadata_json: serde_json::to_string(&entry.metadata)
                .map_err(|e| Error::Corrupt(format!("cannot encode metadata: {e}")))?,
            session_id: p.session_id.as_ref().map(|s| s.as_str().to_owned()),
            event_ids: p.event_ids.iter().map(|e| e.as_str().to_owned()).collect(),
            author: p.author.as_ref().map(|a| a.as_str().to_owned()),
            provenance_timestamp_ms: p.timestamp_ms,
            digest: *entry.digest.as_bytes(),
            timestamp_ms: entry.timestamp_ms,
            epoch: entry.epoch,
            storage_bytes,
            doc_len: terms.doc_len(),
            terms: terms.clone(),
            ingested_at_ms: entry.ingested_at_ms,
            lineage: LineageRecord::of(entry),
        })
    }

    /// Rebuilds the entry, checking that it belongs to `scope` and that its
    /// content still matches its digest.
    pub(crate) fn into_entry(self, scope: &MemoryScope) -> Result<(MemoryEntry, u64, TermFreqs)> {
        if self.app != scope.app().as_str() || self.user != scope.user().as_str() {
            return Err(Error::foreign_record("the memory database", "an entry"));
        }
        let digest = Sha256Digest::from_bytes(self.digest);
        if Sha256Digest::of(self.content.as_bytes()) != digest {
            return Err(Error::Corrupt(format!(
                "entry {} content does not match its digest",
                EntryId::from_bytes(self.id)
            )));
        }
        let corrupt = |e: Error| Error::Corrupt(format!("stored entry has an invalid field: {e}"));
        let metadata = serde_json::from_str(&self.metadata_json)
            .map_err(|e| Error::Corrupt(format!("stored metadata is not JSON: {e}")))?;
        let provenance = Provenance {
            session_id: self
                .session_id
                .map(SessionId::new)
                .transpose()
                .map_err(corrupt)?,
            event_ids: self
                .event_ids
                .into_iter()
                .map(EventId::new)
                .collect::<Result<_>>()
                .map_err(corrupt)?,
            author: self.author.map(Author::new).transpose().map_err(corrupt)?,
            timestamp_ms: self.provenance_timestamp_ms,
        };
        let entry = MemoryEntry {
            origin: Origin::of_provenance(&provenance),
            id: EntryId::from_bytes(self.id),
            scope: scope.clone(),
            content: self.content,
            metadata,
            provenance,
            digest,
            timestamp_ms: self.timestamp_ms,
            epoch: self.epoch,
            // Kept in their own tables; the reader attaches them.
            obligations: Obligations::default(),
            revision: 1,
            revised_at_ms: None,
            ingested_at_ms: self.ingested_at_ms,
            derived_from: Vec::new(),
            consolidation: None,
            file: None,
            lineage_restored: false,
            fact_key: None,
            status: Status::Current,
            superseded_by: None,
            merged_into: None,
        };
        let mut entry = entry;
        if let Some(l) = self.lineage {
            l.apply(&mut entry)?;
        }
        Ok((
            entry,
            self.storage_bytes,
            self.terms.with_doc_len(self.doc_len),
        ))
    }
}

/// An entry's obligations as stored: every field always present (the
/// wire type skips empty fields, which postcard cannot read back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct ObligationsRecord {
    expires_at_ms: Option<u64>,
    retain_until_ms: Option<u64>,
    legal_hold: bool,
}

pub(crate) fn encode_obligations(o: &Obligations) -> Result<Vec<u8>> {
    encode(&ObligationsRecord {
        expires_at_ms: o.expires_at_ms,
        retain_until_ms: o.retain_until_ms,
        legal_hold: o.legal_hold,
    })
}

pub(crate) fn decode_obligations(bytes: &[u8]) -> Result<Obligations> {
    let r: ObligationsRecord = decode(bytes, "obligations")?;
    Ok(Obligations {
        expires_at_ms: r.expires_at_ms,
        retain_until_ms: r.retain_until_ms,
        legal_hold: r.legal_hold,
    })
}

/// The revision and correction time of the entry under `key`, from the
/// `revisions` table: (1, none) for an entry never corrected.
pub(crate) fn revision_of(
    table: &impl redb::ReadableTable<&'static [u8; 36], &'static [u8]>,
    key: &[u8; 32],
) -> Result<(u32, Option<u64>)> {
    let (lo, hi) = revision_range(key);
    let last = table
        .range::<&[u8; 36]>(&lo..=&hi)
        .map_err(Error::storage)?
        .next_back();
    match last {
        None => Ok((1, None)),
        Some(item) => {
            let (k, v) = item.map_err(Error::storage)?;
            let rec = RevisionRecord::decode(v.value())?;
            let mut rev = [0u8; 4];
            rev.copy_from_slice(&k.value()[32..]);
            Ok((u32::from_be_bytes(rev), Some(rec.written_at_ms)))
        }
    }
}

/// Every kept revision of the entry under `key`, oldest first.
pub(crate) fn revisions_of(
    table: &impl redb::ReadableTable<&'static [u8; 36], &'static [u8]>,
    scope: &MemoryScope,
    key: &[u8; 32],
) -> Result<Vec<Revision>> {
    let (lo, hi) = revision_range(key);
    let mut out = Vec::new();
    for item in table
        .range::<&[u8; 36]>(&lo..=&hi)
        .map_err(Error::storage)?
    {
        let (k, v) = item.map_err(Error::storage)?;
        let rec = RevisionRecord::decode(v.value())?;
        let mut rev = [0u8; 4];
        rev.copy_from_slice(&k.value()[32..]);
        out.push(rec.into_revision(scope, u32::from_be_bytes(rev))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hippocamp_core::IdempotencyKey;
    use hippocamp_memory::NewEntry;
    use hippocamp_memory::entry::prepare_entry;

    /// [`Mutation`] as earlier builds declared it (keys and values as
    /// plain vectors).
    #[derive(Serialize)]
    enum PlainMutation {
        PutEntry(Vec<u8>, Vec<u8>),
        DelEntry(Vec<u8>),
        DelEntries(Vec<u8>, Vec<u8>),
        PutSession(Vec<u8>),
        DelSession(Vec<u8>),
        DelSessions(Vec<u8>, Vec<u8>),
        PutScope(Vec<u8>, Vec<u8>),
        PutVector(Vec<u8>, Vec<u8>),
        DelVector(Vec<u8>),
        DelVectors(Vec<u8>, Vec<u8>),
        PutErased(Vec<u8>),
        PutObligations(Vec<u8>, Vec<u8>),
        DelObligations(Vec<u8>),
        DelObligationsIn(Vec<u8>, Vec<u8>),
        PutExpiry(Vec<u8>),
        DelExpiry(Vec<u8>),
        PutRevision(Vec<u8>, Vec<u8>),
        DelRevisionsIn(Vec<u8>, Vec<u8>),
        PutUser(String),
        DelUser(String),
    }

    #[test]
    fn mutations_keep_their_log_layout() {
        use Mutation as M;
        use PlainMutation as P;
        let k = || (0u8..=200).collect::<Vec<u8>>();
        let v = || vec![7u8; 300];
        let pairs = vec![
            (M::PutEntry(k(), v()), P::PutEntry(k(), v())),
            (M::DelEntry(k()), P::DelEntry(k())),
            (M::DelEntries(k(), v()), P::DelEntries(k(), v())),
            (M::PutSession(k()), P::PutSession(k())),
            (M::DelSession(k()), P::DelSession(k())),
            (M::DelSessions(k(), v()), P::DelSessions(k(), v())),
            (M::PutScope(k(), v()), P::PutScope(k(), v())),
            (M::PutVector(k(), v()), P::PutVector(k(), v())),
            (M::DelVector(k()), P::DelVector(k())),
            (M::DelVectors(k(), v()), P::DelVectors(k(), v())),
            (M::PutErased(k()), P::PutErased(k())),
            (M::PutObligations(k(), v()), P::PutObligations(k(), v())),
            (M::DelObligations(k()), P::DelObligations(k())),
            (M::DelObligationsIn(k(), v()), P::DelObligationsIn(k(), v())),
            (M::PutExpiry(k()), P::PutExpiry(k())),
            (M::DelExpiry(k()), P::DelExpiry(k())),
            (M::PutRevision(k(), v()), P::PutRevision(k(), v())),
            (M::DelRevisionsIn(k(), v()), P::DelRevisionsIn(k(), v())),
            (M::PutUser("a\0b".into()), P::PutUser("a\0b".into())),
            (M::DelUser("a\0b".into()), P::DelUser("a\0b".into())),
        ];
        for (new, old) in pairs {
            let bytes = encode(&old).unwrap();
            assert_eq!(encode(&new).unwrap(), bytes, "{new:?}");
            assert_eq!(decode::<Mutation>(&bytes, "log").unwrap(), new);
        }
    }

    #[test]
    fn borrowed_records_encode_as_owned_ones() {
        #[derive(Serialize)]
        struct Pairs(Vec<(String, u32)>);
        let scope = MemoryScope::parse("app", "user").unwrap();
        let meta = serde_json::json!({"topic": "dogs", "n": 3});
        let input = NewEntry::new("Caroline walks her dogs; the dogs love it.")
            .metadata(meta.as_object().unwrap().clone())
            .idempotency_key(IdempotencyKey::new("k").unwrap());
        let mut entry = prepare_entry(&scope, input, &hippocamp_core::MemoryLimits::default())
            .unwrap()
            .entry;
        entry.provenance.session_id = Some(SessionId::new("s1").unwrap());
        entry.provenance.event_ids = vec![EventId::new("e1").unwrap(), EventId::new("e2").unwrap()];
        entry.provenance.author = Some(Author::new("user").unwrap());
        entry.provenance.timestamp_ms = Some(7);
        entry.epoch = 3;
        let terms = hippocamp_search::Analyzer::english().analyze(&entry.content);
        let fast = encode_entry(&entry, 99, &terms).unwrap();
        let owned = EntryRecord::new(&entry, 99, &terms).unwrap();
        assert_eq!(fast, owned.encode().unwrap());
        // The terms as a record of an earlier build wrote them, and the
        // ingestion time after them.
        let pairs: Vec<(String, u32)> = terms.iter().map(|(t, n)| (t.to_owned(), n)).collect();
        let tail = encode(&Pairs(pairs)).unwrap();
        let plain = encode(&owned).unwrap();
        assert!(plain.ends_with(&tail) && fast.starts_with(&plain));
        assert!(entry.ingested_at_ms.is_some());
        // A record written before the field reads as having none.
        let old = EntryRecord::decode(&plain).unwrap();
        assert_eq!(old.ingested_at_ms, None);
        let mut torn = fast.clone();
        torn.push(0);
        assert!(EntryRecord::decode(&torn).is_err(), "bytes after the time");
        let back = EntryRecord::decode(&fast).unwrap();
        let (e, bytes, t) = back.into_entry(&scope).unwrap();
        assert_eq!((e, bytes, t), (entry.clone(), 99, terms));
        // Logged before its analysis, it is completed into the same bytes.
        let bare = encode_entry(&entry, 99, &TermFreqs::default()).unwrap();
        assert_ne!(bare, fast);
        let analyzer = hippocamp_search::Analyzer::english();
        assert_eq!(analysed_record(&bare, &analyzer).unwrap(), fast);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        #[test]
        fn records_encode_as_serde_does(
            content in "\\PC{1,300}",
            topic in proptest::option::of("\\PC{0,200}"),
            session in proptest::option::of("[a-z0-9]{1,40}"),
            events in proptest::collection::vec("[a-z0-9]{1,20}", 0..4),
            author in proptest::option::of("[a-z]{1,20}"),
            at in proptest::option::of(proptest::prelude::any::<u64>()),
            epoch in proptest::prelude::any::<u64>(),
            bytes in proptest::prelude::any::<u64>(),
            analysed in proptest::prelude::any::<bool>(),
            lineage in 0u8..5,
        ) {
            let scope = MemoryScope::parse("app", "user").unwrap();
            let mut input = NewEntry::new(content);
            if let Some(t) = topic {
                input = input.metadata(serde_json::json!({"topic": t}).as_object().unwrap().clone());
            }
            let mut entry = prepare_entry(&scope, input, &hippocamp_core::MemoryLimits::default())
                .unwrap()
                .entry;
            entry.provenance.session_id = session.map(|s| SessionId::new(s).unwrap());
            entry.provenance.event_ids = events.into_iter().map(|e| EventId::new(e).unwrap()).collect();
            entry.provenance.author = author.map(|a| Author::new(a).unwrap());
            entry.provenance.timestamp_ms = at;
            entry.epoch = epoch;
            let terms = if analysed {
                hippocamp_search::Analyzer::english().analyze(&entry.content)
            } else {
                TermFreqs::default()
            };
            // Lineage after the record: derived (with and without an
            // ingestion time), keyed, or none.
            if lineage >= 1 {
                entry.origin = hippocamp_memory::lineage::Origin::Fact;
                entry.derived_from = vec![Source {
                    entry: EntryId::random(),
                    role: Role::Superseded,
                }];
                entry.consolidation = Some("run-1".into());
                entry.lineage_restored = epoch % 2 == 0;
            }
            if lineage == 2 {
                entry.ingested_at_ms = None;
            }
            if lineage == 3 {
                entry.fact_key = Some(FactKey::new("user.city").unwrap());
            }
            // A file entry: its version after the lineage.
            if lineage == 4 {
                let file = FileSource { name: ".memories/a.md".into(), version: epoch % 7 + 1 };
                entry.origin = hippocamp_memory::lineage::Origin::File;
                entry.fact_key = Some(file.fact_key().unwrap());
                entry.file = Some(file);
            }
            let direct = encode_entry(&entry, bytes, &terms).unwrap();
            let serde = EntryRecord::new(&entry, bytes, &terms).unwrap().encode().unwrap();
            proptest::prop_assert_eq!(&direct, &serde);
            let (back, _, _) = EntryRecord::decode(&direct).unwrap().into_entry(&scope).unwrap();
            proptest::prop_assert_eq!(back.origin, entry.origin);
            proptest::prop_assert_eq!(&back.derived_from, &entry.derived_from);
            proptest::prop_assert_eq!(&back.fact_key, &entry.fact_key);
            proptest::prop_assert_eq!(&back.file, &entry.file);
            proptest::prop_assert_eq!(back.lineage_restored, entry.lineage_restored);
            proptest::prop_assert_eq!(back.ingested_at_ms, entry.ingested_at_ms);
        }

        #[test]
        fn scope_rows_encode_as_serde_does(
            app in "\\PC{0,60}",
            user in "\\PC{0,60}",
            entries in proptest::prelude::any::<u64>(),
            bytes in proptest::prelude::any::<u64>(),
            epoch in proptest::prelude::any::<u64>(),
            erasures in proptest::prelude::any::<u64>(),
        ) {
            let row = ScopeRow { app, user, entries, bytes, epoch, erasures: 0, derived: 0 };
            // Derived entries without erasure records: both counts follow.
            let with_derived = ScopeRow { derived: epoch % 5 + 1, ..row.clone() };
            proptest::prop_assert_eq!(ScopeRow::decode(&with_derived.encode()).unwrap(), with_derived);
            proptest::prop_assert_eq!(row.encode(), encode(&row).unwrap());
            proptest::prop_assert_eq!(ScopeRow::decode(&row.encode()).unwrap(), row.clone());
            // With records: the count follows, and reads back.
            let row = ScopeRow { erasures, ..row };
            proptest::prop_assert_eq!(ScopeRow::decode(&row.encode()).unwrap(), row);
        }
    }
}
