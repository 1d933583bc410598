//! Artifact scopes, names, MIME types, metadata records, selectors and
//! pages: the validated vocabulary of the artifact contract.

use std::fmt;

use hippocamp_core::{
    AppName, Error, Field, Metadata, Problem, Result, SessionId, Sha256Digest, UserId,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Who owns an artifact. The same name in two scopes is two independent
/// artifacts with separate version counters; there is no inheritance.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ArtifactScope {
    /// Shared by the whole application.
    App {
        /// The application.
        app: AppName,
    },
    /// One user of an application.
    User {
        /// The application.
        app: AppName,
        /// The user.
        user: UserId,
    },
    /// One session of a user.
    Session {
        /// The application.
        app: AppName,
        /// The user.
        user: UserId,
        /// The session.
        session: SessionId,
    },
}

impl ArtifactScope {
    /// An application scope.
    pub fn app(app: &str) -> Result<Self> {
        Ok(Self::App {
            app: AppName::new(app)?,
        })
    }

    /// A user scope.
    pub fn user(app: &str, user: &str) -> Result<Self> {
        Ok(Self::User {
            app: AppName::new(app)?,
            user: UserId::new(user)?,
        })
    }

    /// A session scope.
    pub fn session(app: &str, user: &str, session: &str) -> Result<Self> {
        Ok(Self::Session {
            app: AppName::new(app)?,
            user: UserId::new(user)?,
            session: SessionId::new(session)?,
        })
    }

    /// The application of any scope.
    pub fn app_name(&self) -> &AppName {
        match self {
            Self::App { app } | Self::User { app, .. } | Self::Session { app, .. } => app,
        }
    }

    /// `app`, `user` or `session`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::App { .. } => "app",
            Self::User { .. } => "user",
            Self::Session { .. } => "session",
        }
    }

    /// A canonical, versioned byte encoding: a domain tag, the kind, then
    /// each part length-prefixed. Stores hash it to name storage locations,
    /// so it never changes for a given scope.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = b"hippocamp-artifact-scope-v1\0".to_vec();
        let parts: Vec<&str> = match self {
            Self::App { app } => {
                out.push(b'a');
                vec![app.as_str()]
            }
            Self::User { app, user } => {
                out.push(b'u');
                vec![app.as_str(), user.as_str()]
            }
            Self::Session { app, user, session } => {
                out.push(b's');
                vec![app.as_str(), user.as_str(), session.as_str()]
            }
        };
        for p in parts {
            out.extend_from_slice(&(p.len() as u64).to_be_bytes());
            out.extend_from_slice(p.as_bytes());
        }
        out
    }

    /// SHA-256 of [`canonical_bytes`](Self::canonical_bytes).
    pub fn hash(&self) -> [u8; 32] {
        Sha256::digest(self.canonical_bytes()).into()
    }
}

impl fmt::Display for ArtifactScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::App { app } => write!(f, "app:{app}"),
            Self::User { app, user } => write!(f, "user:{app}/{user}"),
            Self::Session { app, user, session } => write!(f, "session:{app}/{user}/{session}"),
        }
    }
}

/// The longest artifact name, in bytes.
pub const MAX_NAME_BYTES: usize = 1_024;

/// A logical artifact name: 1..=1,024 bytes of UTF-8, `/`-separated
/// segments none of which is empty, `.` or `..`, no NUL. Names are never
/// used as paths or object keys; they sort bytewise.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactName(String);

impl ArtifactName {
    /// Validates `name`.
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let bad = |m: &str| Error::invalid(Field::Name, Problem::Malformed(m.to_owned()));
        if name.is_empty() {
            return Err(Error::invalid(Field::Name, Problem::Empty));
        }
        if name.len() > MAX_NAME_BYTES {
            return Err(Error::invalid(
                Field::Name,
                Problem::TooLong {
                    len: name.len(),
                    max: MAX_NAME_BYTES,
                },
            ));
        }
        if name.contains('\0') {
            return Err(Error::invalid(Field::Name, Problem::ContainsNul));
        }
        for seg in name.split('/') {
            match seg {
                "" => {
                    return Err(bad(
                        "a name must not have an empty segment (leading, trailing or double /)",
                    ));
                }
                "." | ".." => return Err(bad("a name must not have a `.` or `..` segment")),
                _ => {}
            }
        }
        Ok(Self(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// SHA-256 of the name's bytes with a domain tag.
    pub fn hash(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"hippocamp-artifact-name-v1\0");
        h.update(self.0.as_bytes());
        h.finalize().into()
    }
}

impl TryFrom<String> for ArtifactName {
    type Error = Error;
    fn try_from(v: String) -> Result<Self> {
        Self::new(v)
    }
}

impl From<ArtifactName> for String {
    fn from(v: ArtifactName) -> String {
        v.0
    }
}

impl fmt::Display for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ArtifactName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ArtifactName({:?})", self.0)
    }
}

impl schemars::JsonSchema for ArtifactName {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ArtifactName".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NAME_BYTES,
            "description": "1..=1024 bytes of UTF-8: /-separated segments, none empty, `.` or `..`; no NUL",
        })
    }
}

impl schemars::JsonSchema for MimeType {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MimeType".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "minLength": MIME_TYPE_BYTES.0,
            "maxLength": MIME_TYPE_BYTES.1,
            "description": "a MIME type: contains `/`, no CR, LF or NUL",
        })
    }
}

/// The default MIME type.
pub const DEFAULT_MIME_TYPE: &str = "application/octet-stream";
/// Shortest and longest MIME types, in bytes.
pub const MIME_TYPE_BYTES: (usize, usize) = (3, 255);

/// A MIME type: 3..=255 bytes of UTF-8 with a `/`, no CR, LF or NUL.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MimeType(String);

impl MimeType {
    /// Validates `value`.
    pub fn new(value: impl Into<String>) -> Result<Self> {
        let v = value.into();
        let (min, max) = MIME_TYPE_BYTES;
        if v.len() < min || v.len() > max {
            return Err(Error::invalid(
                Field::MimeType,
                Problem::OutOfRange {
                    value: v.len() as i128,
                    min: min as i128,
                    max: max as i128,
                },
            ));
        }
        if !v.contains('/') || v.contains(['\r', '\n', '\0']) {
            return Err(Error::invalid(
                Field::MimeType,
                Problem::Malformed("a MIME type contains `/` and no CR, LF or NUL".into()),
            ));
        }
        Ok(Self(v))
    }

    /// The MIME type.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for MimeType {
    fn default() -> Self {
        Self(DEFAULT_MIME_TYPE.to_owned())
    }
}

impl TryFrom<String> for MimeType {
    type Error = Error;
    fn try_from(v: String) -> Result<Self> {
        Self::new(v)
    }
}

impl From<MimeType> for String {
    fn from(v: MimeType) -> String {
        v.0
    }
}

impl fmt::Debug for MimeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MimeType({:?})", self.0)
    }
}

/// Bounds on custom metadata, checked by the same validator as memory
/// metadata (`hippocamp_core::json::check_object`): at most 16,384 bytes as
/// compact JSON, values nested at most 7 below the top object (8 container
/// levels counting the top one, as ADK's artifact metadata allows), and 129
/// JSON nodes (the top object and 128 pairs or elements below it).
pub const METADATA_LIMITS: hippocamp_core::JsonLimits = hippocamp_core::JsonLimits {
    max_bytes: 16_384,
    max_depth: 7,
    max_nodes: 129,
};

/// Checks custom metadata against [`METADATA_LIMITS`].
pub fn check_metadata(m: &Metadata) -> Result<()> {
    hippocamp_core::json::check_object(Field::Metadata, m, METADATA_LIMITS).map(drop)
}

/// The record of one version: what `put` returns and listings carry.
/// Never carries the bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactMeta {
    /// The exact scope.
    pub scope: ArtifactScope,
    /// The name.
    pub name: ArtifactName,
    /// A positive version, never reused.
    pub version: u64,
    /// The MIME type.
    pub mime_type: MimeType,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the whole artifact.
    pub sha256: Sha256Digest,
    /// Bytes per integrity chunk; each chunk has its own SHA-256.
    pub chunk_size: u64,
    /// When it was stored, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Custom metadata.
    pub metadata: Metadata,
}

/// Which version to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Selector {
    /// The highest existing version.
    Latest,
    /// One version.
    Version(u64),
}

/// Which versions to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeleteSelector {
    /// The highest existing version.
    Latest,
    /// One version.
    Version(u64),
    /// Every version.
    All,
}

/// A byte range of an artifact: `len` bytes from `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ByteRange {
    /// First byte.
    pub offset: u64,
    /// Number of bytes (at least 1).
    pub len: u64,
}

impl ByteRange {
    /// Checks the range against an artifact of `size` bytes.
    pub fn check(&self, size: u64) -> Result<()> {
        let end = self.offset.checked_add(self.len);
        if self.len == 0 || end.is_none_or(|e| e > size) {
            return Err(Error::invalid(
                Field::Range,
                Problem::Malformed(format!(
                    "{} bytes from offset {} do not lie within {size} bytes",
                    self.len, self.offset
                )),
            ));
        }
        Ok(())
    }
}

/// A page request: items strictly after `cursor`, at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageRequest<C> {
    /// Exclusive cursor: the last item of the previous page.
    #[serde(default = "none::<C>")]
    pub cursor: Option<C>,
    /// Most items (default: the store's default page size).
    #[serde(default)]
    pub limit: Option<u64>,
}

fn none<C>() -> Option<C> {
    None
}

impl<C> Default for PageRequest<C> {
    fn default() -> Self {
        Self {
            cursor: None,
            limit: None,
        }
    }
}

impl<C> PageRequest<C> {
    /// A first page of `limit` items.
    pub fn first(limit: u64) -> Self {
        Self {
            cursor: None,
            limit: Some(limit),
        }
    }

    /// The page after `cursor`.
    pub fn after(cursor: C, limit: u64) -> Self {
        Self {
            cursor: Some(cursor),
            limit: Some(limit),
        }
    }
}

/// A page of items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "{T}Page")]
pub struct Page<T, C> {
    /// The scope listed.
    pub scope: ArtifactScope,
    /// The items, in order.
    pub items: Vec<T>,
    /// The cursor of the next page, when there are more items.
    pub next_cursor: Option<C>,
}

impl<T, C> Page<T, C> {
    /// The page of `limit` items out of `fetched`, which asked for one
    /// more than `limit` so that its presence tells that more follow: the
    /// cursor is then `cursor_of` the page's last item.
    pub fn of_one_more(
        scope: &ArtifactScope,
        mut fetched: Vec<T>,
        limit: usize,
        cursor_of: impl FnOnce(&T) -> C,
    ) -> Self {
        let next_cursor = if fetched.len() > limit {
            fetched.truncate(limit);
            fetched.last().map(cursor_of)
        } else {
            None
        };
        Self {
            scope: scope.clone(),
            items: fetched,
            next_cursor,
        }
    }
}

/// One page of the scopes that hold at least one version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ScopePage {
    /// The scopes, in the store's own order.
    pub scopes: Vec<ArtifactScope>,
    /// Where the next page starts (opaque); absent on the last page.
    pub next_cursor: Option<String>,
}

/// The scope hash a `list_scopes` cursor names (the hex of the last
/// scope's hash, for stores keyed by it).
pub fn scope_cursor(cursor: &str) -> Result<Vec<u8>> {
    hex::decode(cursor)
        .ok()
        .filter(|b| b.len() == 32)
        .ok_or_else(|| {
            hippocamp_core::Error::invalid(
                hippocamp_core::Field::Cursor,
                hippocamp_core::Problem::Malformed("not a scope cursor".into()),
            )
        })
}

/// A page of `(hash, scope)` pairs sorted by hash, after the hex cursor,
/// at most `limit`: how stores keyed by scope hash page their scopes.
pub fn scope_page(
    mut scopes: Vec<([u8; 32], ArtifactScope)>,
    cursor: Option<&str>,
    limit: usize,
) -> Result<ScopePage> {
    let after = cursor.map(scope_cursor).transpose()?;
    scopes.sort_by_key(|a| a.0);
    let mut page: Vec<([u8; 32], ArtifactScope)> = scopes
        .into_iter()
        .filter(|(h, _)| after.as_ref().is_none_or(|a| h.as_slice() > a.as_slice()))
        .take(limit + 1)
        .collect();
    let more = page.len() > limit;
    page.truncate(limit);
    Ok(ScopePage {
        next_cursor: if more {
            page.last().map(|(h, _)| hex::encode(h))
        } else {
            None
        },
        scopes: page.into_iter().map(|(_, s)| s).collect(),
    })
}

/// Options of a put.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PutOptions {
    /// The MIME type (default `application/octet-stream`).
    pub mime_type: MimeType,
    /// Custom JSON-safe metadata.
    pub metadata: Metadata,
    /// The deadline.
    pub call: hippocamp_core::CallOptions,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn names() {
        assert!(ArtifactName::new("reports/summary.txt").is_ok());
        assert!(ArtifactName::new("nested/café.txt").is_ok());
        assert!(ArtifactName::new("x".repeat(1_024)).is_ok());
        for bad in ["", "/a", "a/", "a//b", "../escape", "a/./b", "a\0b"] {
            assert!(ArtifactName::new(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            ArtifactName::new("x".repeat(1_025)),
            Err(Error::InvalidArgument {
                field: Field::Name,
                problem: Problem::TooLong { .. }
            })
        ));
    }

    #[test]
    fn mime_types() {
        assert!(MimeType::new("text/plain").is_ok());
        assert!(MimeType::new("a/b").is_ok());
        assert!(MimeType::new("a/").is_err());
        assert!(MimeType::new("bad\r\nvalue").is_err());
        assert!(MimeType::new("textplain").is_err());
        assert!(MimeType::new(format!("a/{}", "b".repeat(254))).is_err());
        assert_eq!(MimeType::default().as_str(), "application/octet-stream");
    }

    #[test]
    fn metadata_bounds() {
        let m = |v: Value| v.as_object().unwrap().clone();
        // The reference's rule: counting the top object as level 1, every
        // value sits at level 8 or above, so 8 container levels are
        // allowed and a container at level 8 must be empty.
        let nest = |levels: usize, inner: Value| (1..levels).fold(inner, |v, _| json!({ "k": v }));
        assert!(check_metadata(&m(nest(8, json!({})))).is_ok());
        assert!(check_metadata(&m(nest(8, json!({"k": 1})))).is_err());
        assert!(check_metadata(&m(nest(8, json!([1])))).is_err());
        assert!(check_metadata(&m(nest(9, json!({})))).is_err());
        // A scalar at level 8 (inside the level-7 container) is fine.
        assert!(check_metadata(&m(nest(7, json!({"k": "deepest"})))).is_ok());
        assert!(check_metadata(&m(nest(7, json!({"k": []})))).is_ok());
        assert!(check_metadata(&m(nest(7, json!({"k": [true]})))).is_err());
        let keys = |n: usize| (0..n).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(check_metadata(&keys(128)).is_ok());
        assert!(check_metadata(&keys(129)).is_err());
        assert!(check_metadata(&m(json!({"s": "x".repeat(17_000)}))).is_err());
        // Entries count list elements across the tree.
        assert!(check_metadata(&m(json!({"a": vec![1; 127]}))).is_ok());
        assert!(check_metadata(&m(json!({"a": vec![1; 128]}))).is_err());
    }

    #[test]
    fn scopes_hash_canonically() {
        let a = ArtifactScope::user("ab", "c").unwrap();
        let b = ArtifactScope::user("a", "bc").unwrap();
        assert_ne!(a.hash(), b.hash());
        assert_ne!(
            ArtifactScope::app("a").unwrap().hash(),
            ArtifactScope::user("a", "a").unwrap().hash()
        );
        let json = serde_json::to_value(ArtifactScope::session("a", "u", "s").unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"type": "session", "app": "a", "user": "u", "session": "s"})
        );
    }

    #[test]
    fn ranges() {
        assert!(ByteRange { offset: 1, len: 3 }.check(6).is_ok());
        assert!(ByteRange { offset: 5, len: 2 }.check(6).is_err());
        assert!(ByteRange { offset: 0, len: 0 }.check(6).is_err());
        assert!(
            ByteRange {
                offset: u64::MAX,
                len: 2
            }
            .check(6)
            .is_err()
        );
    }
}
