//! Validated identifiers and the memory scope.
//!
//! A value of these types has passed validation once, at construction, so the
//! rest of the code never re-checks it. Serde goes through the same checks.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::{Error, Field, Problem, Result};

/// The longest app name, user id, session id, event id or author, in bytes.
pub const MAX_ID_BYTES: usize = 256;
/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 512;

/// Maximum length in bytes of a fact key.
pub const MAX_FACT_KEY_BYTES: usize = 128;

/// Checks the rules every identifier shares: 1..=`max` bytes, no NUL.
pub fn check_text(field: Field, s: &str, max: usize) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, Problem::Empty));
    }
    if s.len() > max {
        return Err(Error::invalid(
            field,
            Problem::TooLong { len: s.len(), max },
        ));
    }
    if s.contains('\0') {
        return Err(Error::invalid(field, Problem::ContainsNul));
    }
    Ok(())
}

/// The identifier grammar new data follows, as the error and the docs
/// state it.
pub const ID_GRAMMAR: &str = "1-256 bytes with no control characters, no `/` or `\\`, \
     no leading or trailing space, and not `.` or `..`";

/// Checks the grammar a *new* app, user or session id follows (one
/// artifact-name segment too): no control characters, no `/` or `\`, no
/// leading or trailing whitespace, not `.` or `..`, on top of
/// [`check_text`]. Writes that create data check it (the governed gate);
/// reads, listings and erasures take any id [`check_text`] takes, so data
/// stored under an older, looser rule stays reachable and erasable.
pub fn check_new_id(field: Field, s: &str) -> Result<()> {
    check_text(field, s, MAX_ID_BYTES)?;
    check_segment(field, s)
}

/// The grammar's rules past length and NUL, for one id or one segment of
/// an artifact name.
pub fn check_segment(field: Field, s: &str) -> Result<()> {
    let rule = if s.chars().any(char::is_control) {
        Some("must not contain a control character")
    } else if s.contains(['/', '\\']) {
        Some("must not contain `/` or `\\`")
    } else if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        Some("must not start or end with a space")
    } else if s == "." || s == ".." {
        Some("must not be `.` or `..`")
    } else {
        None
    };
    match rule {
        Some(rule) => Err(Error::invalid(field, Problem::Identifier(rule))),
        None => Ok(()),
    }
}

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $field:expr, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps `value`.
            pub fn new(value: impl Into<String>) -> Result<Self> {
                let value = value.into();
                check_text($field, &value, $max)?;
                Ok(Self(value))
            }

            /// The identifier as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Error;
            fn try_from(value: &str) -> Result<Self> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                // maxLength counts characters: a bound, the byte limit is
                // in the description.
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": $max,
                    "description": format!("1..={} bytes of UTF-8, no NUL", $max),
                })
            }
        }
    };
}

text_id!(
    /// An application name: 1..=256 bytes of UTF-8 without NUL.
    AppName,
    Field::AppName,
    MAX_ID_BYTES
);
text_id!(
    /// A user id within an application: 1..=256 bytes of UTF-8 without NUL.
    UserId,
    Field::UserId,
    MAX_ID_BYTES
);
text_id!(
    /// A conversation session id: 1..=256 bytes of UTF-8 without NUL.
    SessionId,
    Field::SessionId,
    MAX_ID_BYTES
);
text_id!(
    /// An event id: 1..=256 bytes of UTF-8 without NUL.
    EventId,
    Field::EventId,
    MAX_ID_BYTES
);
text_id!(
    /// The author of an event or entry: 1..=256 bytes of UTF-8 without NUL.
    Author,
    Field::Author,
    MAX_ID_BYTES
);
text_id!(
    /// A caller-chosen idempotency key: 1..=512 bytes of UTF-8 without NUL.
    IdempotencyKey,
    Field::IdempotencyKey,
    MAX_IDEMPOTENCY_KEY_BYTES
);
text_id!(
    /// What a fact is about, as a subject/attribute string such as
    /// `user.home_city`: 1..=128 bytes of UTF-8 without NUL. A newer
    /// current entry with the same key supersedes an older one.
    FactKey,
    Field::FactKey,
    MAX_FACT_KEY_BYTES
);

/// The exact `(app, user)` scope every memory operation is authorised by.
///
/// The same user id in two applications is two unrelated principals; nothing
/// (metadata, filters, ids) can widen a scope.
#[derive(
    Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct MemoryScope {
    app: AppName,
    user: UserId,
}

impl MemoryScope {
    /// The scope of `user` within `app`.
    pub fn new(app: AppName, user: UserId) -> Self {
        Self { app, user }
    }

    /// Validates both parts (the app name first) and builds the scope.
    pub fn parse(app: &str, user: &str) -> Result<Self> {
        Ok(Self::new(AppName::new(app)?, UserId::new(user)?))
    }

    /// The scope as a table key of an embedded store: the app's length
    /// (4 bytes, big-endian), the app, then the user. Two scopes never
    /// share a key, and keys order by app, then user.
    pub fn storage_key(&self) -> Vec<u8> {
        let app = self.app.as_str();
        let mut k = Vec::with_capacity(4 + app.len() + self.user.as_str().len());
        // Ids are at most 256 bytes (validated types).
        k.extend_from_slice(&u32::try_from(app.len()).unwrap_or(u32::MAX).to_be_bytes());
        k.extend_from_slice(app.as_bytes());
        k.extend_from_slice(self.user.as_str().as_bytes());
        k
    }

    /// The application.
    pub fn app(&self) -> &AppName {
        &self.app
    }

    /// The user.
    pub fn user(&self) -> &UserId {
        &self.user
    }

    /// An opaque, stable 16-hex-character hash of the scope, keyed by a
    /// deployment's secret ([`ScopeKey`]): what the audit log and the
    /// request log carry. Without the key it cannot be matched to a user
    /// id by hashing candidates.
    pub fn keyed_hash(&self, key: &ScopeKey) -> String {
        use hmac::{KeyInit as _, Mac as _};
        // A 32-byte key is always accepted.
        let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(&key.0) else {
            return self.log_hash();
        };
        mac.update(b"hippocamp-scope\0");
        mac.update(self.app.as_str().as_bytes());
        mac.update(&[0]);
        mac.update(self.user.as_str().as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..8])
    }

    /// The unkeyed hash earlier builds wrote (16 hex characters of
    /// SHA-256 over app and user): anyone who knows a user id can match
    /// it, so it is kept only to read old records by; new ones are keyed
    /// ([`Self::keyed_hash`]).
    pub fn log_hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(b"hippocamp-scope-log\0");
        h.update(self.app.as_str().as_bytes());
        h.update([0]);
        h.update(self.user.as_str().as_bytes());
        hex::encode(&h.finalize()[..8])
    }
}

/// A deployment's secret for scope hashes (32 random bytes), created on
/// first start and kept in the governance store: the hashes in the audit
/// log and the request log are keyed with it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ScopeKey([u8; 32]);

impl ScopeKey {
    /// A new random key.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// A key from its stored bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Its bytes, to store.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for ScopeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.write_str("ScopeKey(..)")
    }
}

impl fmt::Debug for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MemoryScope({:?}, {:?})",
            self.app.as_str(),
            self.user.as_str()
        )
    }
}

/// What a whole-scope erasure must be confirmed with: the exact scope it
/// erases, `{app}/{user}` or `{app}/{user}/{session}` (the server's
/// `?confirm=`, the CLI's typed answer and the clients all use this).
pub fn erasure_confirmation(scope: &MemoryScope, session: Option<&SessionId>) -> String {
    match session {
        Some(s) => format!("{scope}/{s}"),
        None => scope.to_string(),
    }
}

impl fmt::Display for MemoryScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.app, self.user)
    }
}

/// An entry id: `mem-` followed by 32 lowercase hex characters (16 bytes).
///
/// With an idempotency key the bytes are the first 16 of
/// SHA-256(app ‖ 0x00 ‖ user ‖ 0x00 ‖ key); otherwise they are random. The id
/// never depends on an erasure epoch, so the same key always names the same
/// entry. Ordering is byte order, which equals the order of the text form.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryId([u8; 16]);

// Byte order, compared as one big-endian integer: the derived order on
// the array called `memcmp` for every comparison, a measured share of a
// search's sorts (candidates are sorted and merged by id) and of every
// B-tree keyed by id.
impl Ord for EntryId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        u128::from_be_bytes(self.0).cmp(&u128::from_be_bytes(other.0))
    }
}

impl PartialOrd for EntryId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

const ENTRY_ID_PREFIX: &str = "mem-";

impl EntryId {
    /// The deterministic id of `key` within `scope`.
    pub fn derive(scope: &MemoryScope, key: &IdempotencyKey) -> Self {
        let mut h = Sha256::new();
        h.update(scope.app().as_str().as_bytes());
        h.update([0]);
        h.update(scope.user().as_str().as_bytes());
        h.update([0]);
        h.update(key.as_str().as_bytes());
        let digest = h.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(bytes)
    }

    /// A fresh random id.
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// The id's raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Builds an id from raw bytes (as stored by a backend).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
}

impl FromStr for EntryId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                Field::EntryId,
                Problem::Malformed(
                    "expected `mem-` followed by 32 lowercase hex characters".into(),
                ),
            )
        };
        let hex_part = s.strip_prefix(ENTRY_ID_PREFIX).ok_or_else(bad)?;
        if hex_part.len() != 32 || hex_part.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(bad());
        }
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(hex_part, &mut bytes).map_err(|_| bad())?;
        Ok(Self(bytes))
    }
}

impl EntryId {
    /// The text form written into `buf` (no allocation: ids are written
    /// into every reply).
    pub fn text<'b>(&self, buf: &'b mut [u8; 36]) -> &'b str {
        buf[..4].copy_from_slice(ENTRY_ID_PREFIX.as_bytes());
        if hex::encode_to_slice(self.0, &mut buf[4..]).is_err() {
            return "";
        }
        std::str::from_utf8(buf).unwrap_or("")
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text(&mut [0u8; 36]))
    }
}

impl fmt::Debug for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntryId({self})")
    }
}

impl Serialize for EntryId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.text(&mut [0u8; 36]))
    }
}

impl schemars::JsonSchema for EntryId {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EntryId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^mem-[0-9a-f]{32}$" })
    }
}

impl<'de> Deserialize<'de> for EntryId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(app: &str, user: &str) -> MemoryScope {
        MemoryScope::parse(app, user).unwrap()
    }

    #[test]
    fn ids_validate_length_and_nul() {
        assert!(AppName::new("a").is_ok());
        assert!(AppName::new("a".repeat(256)).is_ok());
        assert!(matches!(
            AppName::new("a".repeat(257)),
            Err(Error::InvalidArgument {
                field: Field::AppName,
                problem: Problem::TooLong { len: 257, max: 256 }
            })
        ));
        assert!(matches!(
            UserId::new(""),
            Err(Error::InvalidArgument {
                field: Field::UserId,
                problem: Problem::Empty
            })
        ));
        assert!(matches!(
            SessionId::new("a\0b"),
            Err(Error::InvalidArgument {
                problem: Problem::ContainsNul,
                ..
            })
        ));
    }

    #[test]
    fn new_ids_follow_the_grammar_and_old_ones_still_parse() {
        for ok in ["alice", "a.b", "...", "ünï code", "a b", "user@example.com"] {
            check_new_id(Field::UserId, ok).unwrap();
        }
        for bad in [
            "a/b", "a\\b", " a", "a ", "\ta", ".", "..", "a\u{7f}b", "a\nb", "",
        ] {
            let e = check_new_id(Field::UserId, bad).unwrap_err();
            assert_eq!(e.code(), "invalid_argument", "{bad:?}");
            // The looser rule still takes it (reads, lists, erasures).
            if !bad.is_empty() {
                UserId::new(bad).unwrap();
            }
        }
        let e = check_new_id(Field::SessionId, "x/y")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("must not contain `/`") && e.contains("1-256 bytes"),
            "{e}"
        );
    }

    #[test]
    fn serde_goes_through_validation() {
        let ok: AppName = serde_json::from_str("\"app\"").unwrap();
        assert_eq!(ok.as_str(), "app");
        assert!(serde_json::from_str::<AppName>("\"\"").is_err());
        assert!(serde_json::from_str::<MemoryScope>(r#"{"app":"a","user":"u","x":1}"#).is_err());
    }

    #[test]
    fn derived_ids_are_scope_bound_and_stable() {
        let key = IdempotencyKey::new("k").unwrap();
        let a = EntryId::derive(&scope("app", "u1"), &key);
        assert_eq!(a, EntryId::derive(&scope("app", "u1"), &key));
        assert_ne!(a, EntryId::derive(&scope("app", "u2"), &key));
        assert_ne!(a, EntryId::derive(&scope("app2", "u1"), &key));
        // The NUL separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(
            EntryId::derive(&scope("ab", "c"), &key),
            EntryId::derive(&scope("a", "bc"), &key)
        );
    }

    #[test]
    fn entry_id_text_round_trip() {
        let id = EntryId::random();
        let text = id.to_string();
        assert!(text.starts_with("mem-"));
        assert_eq!(text.len(), 36);
        assert_eq!(text.parse::<EntryId>().unwrap(), id);
        assert!("mem-XYZ".parse::<EntryId>().is_err());
        assert!(text.to_uppercase().parse::<EntryId>().is_err());
        assert!(format!("{text}0").parse::<EntryId>().is_err());
    }

    #[test]
    fn entry_id_order_matches_text_order() {
        let mut ids: Vec<EntryId> = (0..50).map(|_| EntryId::random()).collect();
        let mut texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
        ids.sort();
        texts.sort();
        let sorted: Vec<String> = ids.iter().map(ToString::to_string).collect();
        assert_eq!(sorted, texts);
    }

    #[test]
    fn keyed_hashes_differ_by_key_and_scope_and_hide_both() {
        let (k1, k2) = (ScopeKey::random(), ScopeKey::random());
        let s = scope("secret-app", "alice");
        let h = s.keyed_hash(&k1);
        assert_eq!(h.len(), 16);
        assert!(h.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(h, s.keyed_hash(&k1), "stable under one key");
        assert_ne!(h, s.keyed_hash(&k2), "another deployment's key");
        assert_ne!(h, scope("secret-app", "bob").keyed_hash(&k1));
        // Without the key, hashing the candidate user id does not find it.
        assert_ne!(h, s.log_hash());
        assert_eq!(format!("{k1:?}"), "ScopeKey(..)");
    }

    #[test]
    fn log_hash_hides_scope() {
        let s = scope("secret-app", "alice");
        let h = s.log_hash();
        assert_eq!(h.len(), 16);
        assert!(!h.contains("alice"));
        assert_ne!(h, scope("secret-app", "bob").log_hash());
    }
}
