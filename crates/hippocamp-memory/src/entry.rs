//! Memory entries: what a caller adds ([`NewEntry`]), what a store keeps and
//! returns ([`MemoryEntry`]), and the one validation path between them
//! ([`prepare_entry`]) that every backend uses.

use hippocamp_core::json::{check_object, encoded_len};
use hippocamp_core::limits::MAX_PROVENANCE_EVENT_IDS;
use hippocamp_core::secrets::{self, Redaction, detect};
use hippocamp_core::time::now_ms;
use hippocamp_core::{
    Author, EntryId, Error, EventId, FactKey, Field, IdempotencyKey, MemoryLimits, MemoryScope,
    Metadata, Problem, Result, SessionId, Sha256Digest,
};
use serde::{Deserialize, Serialize};

use crate::lineage::{Derivation, FileSource, Origin, Source, State, Status};

/// Where an entry came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// The session the entry was learnt in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The events it was derived from (at most 1,000).
    #[serde(default)]
    pub event_ids: Vec<EventId>,
    /// Who said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<Author>,
    /// When it was said, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<u64>,
}

/// An entry to add.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEntry {
    /// The remembered text: 1..=`max_content_bytes` bytes, no NUL. A
    /// secret in it is redacted before it is stored (the reply says where).
    pub content: String,
    /// JSON-safe metadata; secret-bearing keys are redacted before storage.
    #[serde(default)]
    pub metadata: Metadata,
    /// Where it came from.
    #[serde(default)]
    pub provenance: Provenance,
    /// Makes the add idempotent: the same key in the same scope always
    /// names the same entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<IdempotencyKey>,
    /// What the entry is a fact about (`user.home_city`): the newest
    /// entry with a key supersedes the older ones with the same key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_key: Option<FactKey>,
    /// How consolidation derived it: set by the consolidation code, never
    /// read from a request (it is in no wire format).
    #[serde(skip)]
    #[schemars(skip)]
    pub derivation: Option<Derivation>,
    /// The artifact version its text comes from: set by the services'
    /// artifact layer, never read from a request. It makes the entry a
    /// `file` entry whose id and fact key follow from the version (see
    /// [`FileSource`]); it cannot be derived too.
    #[serde(skip)]
    #[schemars(skip)]
    pub file: Option<FileSource>,
}

impl NewEntry {
    /// An entry with `content` and nothing else.
    pub fn new(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    /// Sets the metadata.
    #[must_use]
    pub fn metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// Sets the provenance.
    #[must_use]
    pub fn provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = provenance;
        self
    }

    /// Sets the idempotency key.
    #[must_use]
    pub fn idempotency_key(mut self, key: IdempotencyKey) -> Self {
        self.idempotency_key = Some(key);
        self
    }

    /// Sets the fact key.
    #[must_use]
    pub fn fact_key(mut self, key: FactKey) -> Self {
        self.fact_key = Some(key);
        self
    }
}

/// A stored entry as every operation returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryEntry {
    /// `mem-` + 32 hex characters.
    pub id: EntryId,
    /// The exact scope it belongs to.
    pub scope: MemoryScope,
    /// The content, unchanged.
    pub content: String,
    /// Redacted metadata.
    pub metadata: Metadata,
    /// Where it came from.
    pub provenance: Provenance,
    /// SHA-256 of the content bytes.
    pub digest: Sha256Digest,
    /// The provenance timestamp if given, else the time it was prepared.
    pub timestamp_ms: u64,
    /// The scope's erasure epoch when the entry was written: a fence, never
    /// part of the id.
    pub epoch: u64,
    /// What governance attached when it was written: expiry, retention,
    /// legal hold. Stored with the entry and enforced by the store.
    #[serde(default, skip_serializing_if = "Obligations::is_empty")]
    pub obligations: Obligations,
    /// Which revision this is: 1 as written, one more for each correction
    /// (`update_entry`). Absent means 1.
    #[serde(default = "first_revision", skip_serializing_if = "is_first_revision")]
    pub revision: u32,
    /// When the current revision was written by a correction (ms since
    /// the Unix epoch); absent for revision 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_at_ms: Option<u64>,
    /// When it was taken in (ms since the Unix epoch), kept apart from
    /// `timestamp_ms`, the time the event was said: an event ingested
    /// late, or restored, keeps both. Absent for an entry stored before
    /// the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingested_at_ms: Option<u64>,
    /// Where it came from: `turn`, `note`, `file` or `fact`.
    #[serde(default)]
    pub origin: Origin,
    /// What it was derived from (a `fact`'s sources); set by the store's
    /// consolidation, never by a client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_from: Vec<Source>,
    /// The consolidation run that derived it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<String>,
    /// The artifact version its text was indexed from (a `file` entry):
    /// erasing that version erases it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileSource>,
    /// Its lineage came from a restored file (checked against this
    /// store's entries when restored), not from a run here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lineage_restored: bool,
    /// What it is a fact about; the newest entry with a key supersedes
    /// older ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_key: Option<FactKey>,
    /// Its state, read from its scope when it is returned (never stored).
    #[serde(default, skip_serializing_if = "Status::is_current")]
    pub status: Status,
    /// The entry that superseded it, when `status` is `superseded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<EntryId>,
    /// The entry it was merged into, when `status` is `merged`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_into: Option<EntryId>,
}

impl MemoryEntry {
    /// The entry with `state` set (what a read returns).
    #[must_use]
    pub fn with_state(mut self, state: State) -> Self {
        self.status = state.status;
        self.superseded_by = None;
        self.merged_into = None;
        match state.status {
            Status::Current => {}
            Status::Superseded => self.superseded_by = state.by,
            Status::Merged => self.merged_into = state.by,
        }
        self
    }

    /// The entry without its read state (what a store keeps).
    #[must_use]
    pub fn stateless(self) -> Self {
        self.with_state(State::default())
    }

    /// Whether it is derived from other entries.
    pub fn is_derived(&self) -> bool {
        !self.derived_from.is_empty()
    }
}

fn first_revision() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_first_revision(r: &u32) -> bool {
    *r == 1
}

/// One revision of an entry, as its history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Revision {
    /// 1 for the entry as first written, then one more per correction.
    pub revision: u32,
    /// The content of that revision.
    pub content: String,
    /// Its (redacted) metadata.
    pub metadata: Metadata,
    /// SHA-256 of its content.
    pub digest: Sha256Digest,
    /// When it was written: the entry's timestamp for revision 1, the
    /// correction's time after.
    pub written_at_ms: u64,
    /// It came from a restore: its content and time are what the restored
    /// file claims, not this store's own record of a correction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
}

impl Revision {
    /// The revision `entry` is now.
    pub fn of(entry: &MemoryEntry) -> Self {
        Self {
            revision: entry.revision,
            content: entry.content.clone(),
            metadata: entry.metadata.clone(),
            digest: entry.digest,
            written_at_ms: entry.revised_at_ms.unwrap_or(entry.timestamp_ms),
            restored: false,
        }
    }
}

/// A correction: the content and metadata that replace an entry's, as a
/// new revision under the same id (provenance, obligations and timestamp
/// stay).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryUpdate {
    /// The corrected text, under the same rules as a new entry's.
    pub content: String,
    /// The corrected metadata (replaces the old metadata as a whole).
    #[serde(default)]
    pub metadata: Metadata,
}

/// The result of `update_entry`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UpdateOutcome {
    /// The entry as it now is.
    pub entry: MemoryEntry,
    /// Whether a new revision was written (false when the update carried
    /// the current content and metadata: a repeated correction).
    pub changed: bool,
}

/// Validates a correction with the rules of a new entry: content rules,
/// metadata redaction and bounds. A correction that holds a secret is
/// refused rather than redacted: it replaces text the caller already
/// knows, so storing a redacted version would silently lose the words the
/// correction was for.
pub fn check_update(mut update: EntryUpdate, limits: &MemoryLimits) -> Result<EntryUpdate> {
    check_content(&update.content, limits)?;
    if let Some(kind) = detect(&update.content) {
        return Err(Error::SensitiveContent(kind));
    }
    secrets::redact_metadata(&mut update.metadata);
    check_object(Field::Metadata, &update.metadata, limits.json())?;
    Ok(update)
}

/// A correction applied to `current` at `now_ms`, after
/// [`check_update`], with the obligations the policy `granted` for its
/// new metadata ([`Obligations::corrected`]): the new revision and its
/// size, or `None` when it changes nothing (so repeating a correction is
/// idempotent). The caller
/// checks that the entry is live and may be revised
/// ([`check_revise`]).
pub fn apply_update(
    current: &MemoryEntry,
    update: &EntryUpdate,
    granted: Obligations,
    now_ms: u64,
) -> Option<(MemoryEntry, u64)> {
    if current.content == update.content && current.metadata == update.metadata {
        return None;
    }
    let entry = MemoryEntry {
        content: update.content.clone(),
        metadata: update.metadata.clone(),
        digest: Sha256Digest::of(update.content.as_bytes()),
        revision: current.revision.saturating_add(1),
        revised_at_ms: Some(now_ms),
        obligations: current.obligations.corrected(granted),
        ..current.clone()
    };
    let bytes = entry.storage_bytes();
    Some((entry, bytes))
}

/// Whether `current` may get another revision at `now_ms` with
/// `max_revisions` kept: a correction that would drop the oldest kept
/// revision deletes it, so retention and legal hold refuse it as they
/// refuse any deletion.
pub fn check_revise(current: &MemoryEntry, max_revisions: u64, now_ms: u64) -> Result<()> {
    let kept = u64::from(current.revision).min(max_revisions);
    if kept >= max_revisions {
        current.obligations.check_delete(now_ms)?;
    }
    Ok(())
}

/// Lifecycle obligations of an entry, decided by the policy when the entry
/// is written and enforced by every store from then on: an entry whose
/// `expires_at_ms` has come is never returned (whether or not the sweeper
/// has removed it yet); an entry with `retain_until_ms` in the future, or
/// under `legal_hold`, cannot be deleted.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct Obligations {
    /// From this moment (ms since the Unix epoch) the entry is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Until this moment the entry cannot be deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until_ms: Option<u64>,
    /// Whether a legal hold forbids deleting it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
}

impl Obligations {
    /// The obligations of an entry corrected under `granted` (what the
    /// policy gives its new metadata): the earlier expiry, the later
    /// retention, either hold. A correction can bring a shorter lifetime
    /// (metadata moved into a class with a short TTL) and never lengthens
    /// one or lifts a retention or a hold; with nothing granted (a store
    /// alone), the entry keeps its own.
    #[must_use]
    pub fn corrected(self, granted: Obligations) -> Obligations {
        let expires_at_ms = match (self.expires_at_ms, granted.expires_at_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Obligations {
            expires_at_ms,
            retain_until_ms: self.retain_until_ms.max(granted.retain_until_ms),
            legal_hold: self.legal_hold || granted.legal_hold,
        }
    }

    /// Whether there is nothing to enforce.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the entry has expired at `now_ms` (expiry is inclusive: at
    /// the exact moment it is gone).
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// Whether deleting the entry at `now_ms` is allowed: a legal hold
    /// refuses with `LegalHold`, a retention in the future with
    /// `Retention`.
    pub fn check_delete(&self, now_ms: u64) -> Result<()> {
        if self.legal_hold {
            return Err(Error::LegalHold);
        }
        match self.retain_until_ms {
            Some(until) if until > now_ms => Err(Error::Retention { until_ms: until }),
            _ => Ok(()),
        }
    }

    /// Whether the sweeper may remove the entry at `now_ms`: expired, and
    /// neither held nor retained.
    pub fn sweepable(&self, now_ms: u64) -> bool {
        self.expired(now_ms) && self.check_delete(now_ms).is_ok()
    }
}

/// The first refusal among `obligations` for a deletion at `now_ms`: a
/// legal hold anywhere wins over a retention, so a whole-scope erasure
/// reports the stronger reason.
pub fn check_deletes<'a>(
    obligations: impl IntoIterator<Item = &'a Obligations>,
    now_ms: u64,
) -> Result<()> {
    let mut retention: Option<u64> = None;
    for o in obligations {
        match o.check_delete(now_ms) {
            Ok(()) => {}
            Err(Error::Retention { until_ms }) => {
                retention = Some(retention.map_or(until_ms, |r| r.max(until_ms)));
            }
            Err(e) => return Err(e),
        }
    }
    match retention {
        Some(until_ms) => Err(Error::Retention { until_ms }),
        None => Ok(()),
    }
}

impl MemoryEntry {
    /// Whether `other` carries the same data (content, metadata and
    /// provenance); a repeated idempotent add of the same data is a
    /// duplicate, of different data a conflict.
    pub fn same_data(&self, other: &MemoryEntry) -> bool {
        self.digest == other.digest
            && self.content == other.content
            && self.metadata == other.metadata
            && self.provenance == other.provenance
            && self.fact_key == other.fact_key
            && self.derived_from == other.derived_from
    }

    /// Whether `submitted` (an add under this entry's id) is a duplicate
    /// rather than a conflict: the same data, or any data once the entry
    /// has been corrected, so replaying the event or idempotency key that
    /// created it never reverts nor refuses the correction.
    pub fn is_resubmission(&self, submitted: &MemoryEntry) -> bool {
        self.revision > 1 || self.same_data(submitted)
    }

    /// Bytes this entry counts against quotas and result budgets: content
    /// plus JSON metadata plus JSON provenance plus 256 of overhead.
    pub fn storage_bytes(&self) -> u64 {
        let n = self.content.len()
            + encoded_len(&self.metadata)
            + encoded_len(&self.provenance)
            + ENTRY_OVERHEAD_BYTES;
        n as u64
    }
}

/// Fixed per-entry overhead counted by quotas and result budgets.
pub const ENTRY_OVERHEAD_BYTES: usize = 256;

/// What an entry counts against byte quotas once stored: its
/// [`MemoryEntry::storage_bytes`] and its vector's floats (4 bytes each;
/// up to 32 KiB at 8,192 dimensions), so an embedding store's quotas hold
/// what it keeps. Every store counts an entry with this, once, when it
/// writes it, and releases what it counted.
pub fn stored_bytes(entry_bytes: u64, vector: Option<&[f32]>) -> u64 {
    let floats = vector.map_or(0, <[f32]>::len) as u64;
    entry_bytes.saturating_add(floats.saturating_mul(4))
}

/// A validated entry, ready for a store to commit.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedEntry {
    /// The entry; its `epoch` is filled in by the store at commit.
    pub entry: MemoryEntry,
    /// Its size for quotas and result budgets.
    pub storage_bytes: u64,
    /// Whether it has an idempotency key (so an existing id is a duplicate
    /// or a conflict, never a random collision).
    pub keyed: bool,
    /// The secrets redacted from the content as submitted.
    pub redacted: Vec<Redaction>,
}

/// Checks content: non-empty, within `max_content_bytes`, no NUL. (Secrets
/// are the caller's: [`prepare_entry`] redacts them, a correction refuses
/// them.)
pub fn check_content(content: &str, limits: &MemoryLimits) -> Result<()> {
    if content.is_empty() {
        return Err(Error::invalid(Field::Content, Problem::Empty));
    }
    if content.len() as u64 > limits.max_content_bytes {
        return Err(Error::TooLarge {
            limit: "max_content_bytes",
            max: limits.max_content_bytes,
        });
    }
    if content.contains('\0') {
        return Err(Error::invalid(Field::Content, Problem::ContainsNul));
    }
    Ok(())
}

fn check_provenance(p: &Provenance) -> Result<()> {
    if p.event_ids.len() > MAX_PROVENANCE_EVENT_IDS {
        return Err(Error::invalid(
            Field::Provenance,
            Problem::TooMany {
                count: p.event_ids.len(),
                max: MAX_PROVENANCE_EVENT_IDS,
            },
        ));
    }
    // Provenance is identifiers, but identifiers can still carry pasted
    // credentials; refuse them rather than store them unredacted.
    let texts = p
        .session_id
        .iter()
        .map(SessionId::as_str)
        .chain(p.author.iter().map(Author::as_str))
        .chain(p.event_ids.iter().map(EventId::as_str));
    for t in texts {
        if let Some(kind) = detect(t) {
            return Err(Error::SensitiveContent(kind));
        }
    }
    Ok(())
}

/// Validates and normalises `input` for `scope`: content rules, secrets
/// redacted from the content and metadata, metadata bounds, provenance
/// bounds, id derivation, digest, size. The content's limits apply to it
/// as stored (redacted).
pub fn prepare_entry(
    scope: &MemoryScope,
    input: NewEntry,
    limits: &MemoryLimits,
) -> Result<PreparedEntry> {
    let NewEntry {
        content,
        mut metadata,
        provenance,
        idempotency_key,
        mut fact_key,
        derivation,
        file,
    } = input;
    let (content, redacted) = match secrets::redact(&content) {
        (std::borrow::Cow::Borrowed(_), r) => (content, r),
        (std::borrow::Cow::Owned(text), r) => (text, r),
    };
    check_content(&content, limits)?;
    secrets::redact_metadata(&mut metadata);
    check_object(Field::Metadata, &metadata, limits.json())?;
    check_provenance(&provenance)?;
    if let Some(kind) = fact_key.as_ref().and_then(|k| detect(k.as_str())) {
        return Err(Error::SensitiveContent(kind));
    }
    if let Some(d) = &derivation {
        d.check()?;
    }
    let mut idempotency_key = idempotency_key;
    let origin = match (&derivation, &file) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                Field::Consolidation,
                Problem::Relation("a file entry is not derived"),
            ));
        }
        (Some(_), None) => Origin::Fact,
        (None, Some(f)) => {
            f.check()?;
            idempotency_key = Some(f.idempotency_key()?);
            fact_key = Some(f.fact_key()?);
            Origin::File
        }
        (None, None) => Origin::of_provenance(&provenance),
    };
    let (derived_from, consolidation) = derivation.map(|d| (d.sources, d.run)).unwrap_or_default();
    let id = idempotency_key
        .as_ref()
        .map_or_else(EntryId::random, |k| EntryId::derive(scope, k));
    let now = now_ms();
    let entry = MemoryEntry {
        id,
        scope: scope.clone(),
        digest: Sha256Digest::of(content.as_bytes()),
        timestamp_ms: provenance.timestamp_ms.unwrap_or(now),
        content,
        metadata,
        provenance,
        epoch: 0,
        obligations: Obligations::default(),
        revision: 1,
        revised_at_ms: None,
        ingested_at_ms: Some(now),
        origin,
        derived_from,
        consolidation,
        file,
        lineage_restored: false,
        fact_key,
        status: Status::Current,
        superseded_by: None,
        merged_into: None,
    };
    Ok(PreparedEntry {
        storage_bytes: entry.storage_bytes(),
        keyed: idempotency_key.is_some(),
        entry,
        redacted,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scope() -> MemoryScope {
        MemoryScope::parse("app", "u").unwrap()
    }

    #[test]
    fn prepares_and_redacts() {
        let meta = json!({"password": "x", "topic": "otp"})
            .as_object()
            .unwrap()
            .clone();
        let p = prepare_entry(
            &scope(),
            NewEntry::new("hello")
                .metadata(meta)
                .idempotency_key(IdempotencyKey::new("k").unwrap()),
            &MemoryLimits::default(),
        )
        .unwrap();
        assert_eq!(p.entry.metadata["password"], json!("[REDACTED]"));
        assert_eq!(
            p.entry.id,
            EntryId::derive(&scope(), &IdempotencyKey::new("k").unwrap())
        );
        assert_eq!(p.entry.digest, Sha256Digest::of(b"hello"));
        assert!(p.keyed);
        assert_eq!(p.storage_bytes, p.entry.storage_bytes());
    }

    #[test]
    fn content_rules() {
        let limits = MemoryLimits {
            max_content_bytes: 32,
            max_result_bytes: 64,
            ..MemoryLimits::default()
        };
        let err = |c: &str| prepare_entry(&scope(), NewEntry::new(c), &limits).unwrap_err();
        assert!(matches!(
            err(&"x".repeat(33)),
            Error::TooLarge {
                limit: "max_content_bytes",
                max: 32
            }
        ));
        assert!(matches!(
            err(""),
            Error::InvalidArgument {
                problem: Problem::Empty,
                ..
            }
        ));
        assert!(matches!(
            err("a\0b"),
            Error::InvalidArgument {
                problem: Problem::ContainsNul,
                ..
            }
        ));
        // A secret is redacted, not refused.
        let p = prepare_entry(&scope(), NewEntry::new("password: hunter2"), &limits).unwrap();
        assert_eq!(p.entry.content, "password: [REDACTED]");
        assert_eq!(p.entry.digest, Sha256Digest::of(b"password: [REDACTED]"));
        assert_eq!(
            p.redacted,
            [Redaction {
                kind: hippocamp_core::SecretKind::CredentialAssignment,
                start: 10,
                end: 17
            }]
        );
    }

    #[test]
    fn provenance_is_bounded_and_scanned() {
        let mut p = Provenance {
            event_ids: (0..1001)
                .map(|i| EventId::new(format!("e{i}")).unwrap())
                .collect(),
            ..Provenance::default()
        };
        let e = prepare_entry(
            &scope(),
            NewEntry::new("x").provenance(p.clone()),
            &MemoryLimits::default(),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidArgument {
                field: Field::Provenance,
                problem: Problem::TooMany {
                    count: 1001,
                    max: 1000
                }
            }
        ));
        p.event_ids.clear();
        p.author = Some(Author::new("sk-abcdefghijklmnopqrstu").unwrap());
        assert!(matches!(
            prepare_entry(
                &scope(),
                NewEntry::new("x").provenance(p),
                &MemoryLimits::default()
            ),
            Err(Error::SensitiveContent(_))
        ));
    }
}
