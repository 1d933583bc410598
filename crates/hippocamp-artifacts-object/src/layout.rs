//! Object keys and manifests.
//!
//! Under a prefix `P` (default `hippocamp/artifacts/v1`), a scope is `S`,
//! the hex of the first 16 bytes of the SHA-256 of its canonical encoding
//! (every manifest also holds the full scope and is checked against the
//! request, so a collision could never cross scopes), and a name is the
//! hex `N` of its bytes (hex keeps byte order, so listings come back in
//! name order). Keys stay short because some servers bound them well
//! below S3's 1,024 bytes (s3s-fs stores a base64 copy of the key in one
//! file name: about 170 bytes).
//!
//! | key | holds |
//! |---|---|
//! | `P/S/m/N/<version, 20 digits>` | the version's manifest; created with a create-only write, which allocates the number; a delete overwrites it with a tombstone, so the number is never free again |
//! | `P/S/l/N/<nonce>` | a live marker (empty), written before the manifest and removed with the version: `list_names` groups these by `N` |
//! | `P/S/d/<nonce>` | the content, written before the manifest |
//! | `P/S/h/N` | a hint (JSON `{"allocated": A, "latest": L}`): the last version allocated, and the latest live one as of when it was written, every version in (L, A] being deleted then (best effort, only ever a starting point, verified against the manifests) |
//! | `P/_probe/<nonce>` | the start-up probe of create-only writes |
//!
//! Zero-padded versions list in numeric order. The manifest is JSON with a
//! format version; it holds the whole record, the chunk digests and the
//! content and marker keys, and is checked against the requested scope,
//! name and version on every read.

use hippocamp_artifacts::{ArtifactMeta, ArtifactName, ArtifactScope, Integrity};
use hippocamp_core::{Error, Result, Sha256Digest};
use object_store::path::Path;
use serde::{Deserialize, Serialize};

/// The manifest format this build reads and writes.
pub const MANIFEST_FORMAT: u32 = 1;

/// Longest artifact name this backend stores: keys are at most 1,024
/// bytes and a name is hex-encoded in them (so listings keep byte order).
pub const MAX_OBJECT_NAME_BYTES: usize = 400;

/// Keys of one store.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    prefix: String,
}

impl Layout {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.trim_matches('/').to_owned(),
        }
    }

    fn scope(&self, scope: &ArtifactScope) -> String {
        format!("{}/{}", self.prefix, hex::encode(&scope.hash()[..16]))
    }

    pub(crate) fn manifests(&self, scope: &ArtifactScope, name: &ArtifactName) -> String {
        format!("{}/m/{}/", self.scope(scope), hex::encode(name.as_str()))
    }

    pub(crate) fn manifest(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
    ) -> Path {
        Path::from(format!("{}{version:020}", self.manifests(scope, name)))
    }

    pub(crate) fn markers_root(&self, scope: &ArtifactScope) -> String {
        format!("{}/l/", self.scope(scope))
    }

    pub(crate) fn marker(&self, scope: &ArtifactScope, name: &ArtifactName, nonce: &str) -> Path {
        Path::from(format!(
            "{}{}/{nonce}",
            self.markers_root(scope),
            hex::encode(name.as_str())
        ))
    }

    pub(crate) fn data(&self, scope: &ArtifactScope, nonce: &str) -> Path {
        Path::from(format!("{}/d/{nonce}", self.scope(scope)))
    }

    pub(crate) fn hint(&self, scope: &ArtifactScope, name: &ArtifactName) -> Path {
        Path::from(format!(
            "{}/h/{}",
            self.scope(scope),
            hex::encode(name.as_str())
        ))
    }

    pub(crate) fn probe(&self, nonce: &str) -> Path {
        Path::from(format!("{}/_probe/{nonce}", self.prefix))
    }
}

/// The version number at the end of a manifest key.
pub(crate) fn key_version(key: &str) -> Option<u64> {
    let last = key.rsplit('/').next()?;
    (last.len() == 20).then(|| last.parse().ok()).flatten()
}

/// The name of a marker group (`P/S/l/N`).
pub(crate) fn group_name(prefix: &str) -> Option<ArtifactName> {
    let hex_name = prefix.trim_end_matches('/').rsplit('/').next()?;
    let bytes = hex::decode(hex_name).ok()?;
    ArtifactName::new(String::from_utf8(bytes).ok()?).ok()
}

/// The hint of a name: where listing for the last version allocated
/// starts, and the latest live version as of when it was written (0: none
/// was live). Its claim, that every version in (`latest`, `allocated`] was
/// deleted, stays true for ever (deletion is final and numbers are never
/// allocated twice), so a reader only has to verify `latest` itself and
/// look above `allocated`. Written by puts and deletes, last writer wins;
/// any hint a writer wrote keeps the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hint {
    pub(crate) allocated: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) latest: Option<u64>,
}

impl Hint {
    /// Reads a hint; the bare number of older builds is an allocation
    /// hint without a latest; anything else is no hint.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok().or_else(|| {
            let allocated = std::str::from_utf8(bytes).ok()?.trim().parse().ok()?;
            Some(Hint {
                allocated,
                latest: None,
            })
        })
    }

    pub(crate) fn encode(self) -> Vec<u8> {
        serde_json::to_vec(&self).unwrap_or_default()
    }
}

/// A manifest: a live version or a tombstone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Manifest {
    /// A published version.
    Live {
        format: u32,
        meta: Box<ArtifactMeta>,
        chunks: Vec<Sha256Digest>,
        data: String,
        marker: String,
    },
    /// A deleted version: its number stays taken.
    Deleted { format: u32, version: u64 },
}

impl Manifest {
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self> {
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| Error::Corrupt(format!("a manifest is malformed: {e}")))?;
        let format = match &m {
            Manifest::Live { format, .. } | Manifest::Deleted { format, .. } => *format,
        };
        if format != MANIFEST_FORMAT {
            return Err(Error::Unavailable(format!(
                "a manifest uses format {format}; this build reads format {MANIFEST_FORMAT}"
            )));
        }
        Ok(m)
    }

    pub(crate) fn encode(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self)
            .map_err(|e| Error::Corrupt(format!("cannot encode a manifest: {e}")))
    }

    pub(crate) fn integrity(meta: &ArtifactMeta, chunks: &[Sha256Digest]) -> Result<Integrity> {
        let i = Integrity {
            size: meta.size,
            sha256: meta.sha256,
            chunk_size: meta.chunk_size,
            chunks: chunks.to_vec(),
        };
        i.check_shape()?;
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_round_trip_and_read_the_old_form() {
        let h = Hint {
            allocated: 9,
            latest: Some(4),
        };
        assert_eq!(Hint::decode(&h.encode()), Some(h));
        assert_eq!(
            Hint::decode(b"12"),
            Some(Hint {
                allocated: 12,
                latest: None
            })
        );
        assert_eq!(Hint::decode(b"{bad"), None);
    }

    #[test]
    fn keys_keep_order_and_round_trip() {
        let l = Layout::new("/p/q/");
        let s = ArtifactScope::user("a", "u").unwrap();
        let n = |x: &str| ArtifactName::new(x).unwrap();
        let k = l.manifest(&s, &n("doc"), 42);
        assert!(k.as_ref().starts_with("p/q/"));
        assert_eq!(key_version(k.as_ref()), Some(42));
        assert!(l.manifest(&s, &n("doc"), 9).as_ref() < l.manifest(&s, &n("doc"), 10).as_ref());
        // Hex keeps byte order, also when one name is a prefix of another.
        let names = ["B", "a", "a/z", "ab", "é"];
        let mut keys: Vec<String> = names
            .iter()
            .map(|x| l.marker(&s, &n(x), "x").as_ref().to_owned())
            .collect();
        keys.sort();
        let back: Vec<String> = keys
            .iter()
            .map(|k| {
                group_name(k.rsplit_once('/').unwrap().0)
                    .unwrap()
                    .as_str()
                    .to_owned()
            })
            .collect();
        assert_eq!(back, names);
    }
}
