//! [`FileIndex`]: the artifact layer that indexes memory files for memory
//! search, and erases the index with the files.
//!
//! A version stored in a user's scope under the memory tool's prefix
//! (`.memories/`, [`hippocamp_agent::memory_tool::PREFIX`]) becomes, in the
//! same call, one memory entry of that user: origin `file`, naming the
//! version ([`FileSource`]), with the version's text (its first
//! `max_content_bytes` bytes, cut at a character; the name for an empty
//! or non-UTF-8 file). Each version is indexed once and the newest is
//! current (the versions share a fact key), so a search finds a file's
//! present text and erasing the newest version makes the one before
//! current again. The entry expires when the version does (the app's
//! `artifact_ttl_ms`, or the memory policy's earlier expiry).
//!
//! Erasure is final: deleting versions erases their entries first (and,
//! through lineage, every fact derived from them), then the versions, so
//! a version's text is never searchable once the version is gone. A
//! deletion whose entries the memory will not erase (a hold or retention
//! on an entry or a fact derived from it) is refused whole. A version
//! whose entry cannot be written is deleted again and the put fails with
//! the memory's error.
//!
//! The layer sits under the governed artifact store, so the policy is
//! asked (and an artifact hold refuses a deletion) before it erases
//! anything, and the sweep of expired versions passes through it. It
//! writes through the governed memory handle, so the memory policy
//! (consent, obligations, audit) applies to the index as to any entry.

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_artifacts::{
    ArtifactLayer, ArtifactMeta, ArtifactName, ArtifactScope, ArtifactStore, Body, ByteRange,
    DeleteSelector, PageRequest, PutOptions, Selector,
};
use hippocamp_core::{CallOptions, Error, MemoryScope, Result};
use hippocamp_governance::Policy;
use hippocamp_memory::lineage::FileSource;
use hippocamp_memory::{MemoryStore, NewEntry, Provenance, WriteOptions};

/// Indexes the memory files of `inner` into `memory`.
#[derive(Clone)]
pub struct FileIndex {
    inner: Arc<dyn ArtifactStore>,
    memory: Arc<dyn MemoryStore>,
    policy: Arc<dyn Policy>,
    max_content_bytes: u64,
}

impl std::fmt::Debug for FileIndex {
    // The store chain, not the memory handle (printed on its own).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileIndex")
            .field("inner", &self.inner)
            .field("max_content_bytes", &self.max_content_bytes)
            .finish_non_exhaustive()
    }
}

impl FileIndex {
    /// Indexes `inner`'s memory files into `memory` (the governed handle),
    /// each at most `max_content_bytes` of text; artifact lifetimes are
    /// read from `policy`.
    pub fn new(
        inner: Arc<dyn ArtifactStore>,
        memory: Arc<dyn MemoryStore>,
        policy: Arc<dyn Policy>,
        max_content_bytes: u64,
    ) -> Self {
        Self {
            inner,
            memory,
            policy,
            max_content_bytes: max_content_bytes.max(1),
        }
    }

    fn store(&self) -> &dyn ArtifactStore {
        &*self.inner
    }

    /// The memory scope whose memory indexes `name` of `scope`, if it is a
    /// memory file.
    fn owner(scope: &ArtifactScope, name: &ArtifactName) -> Option<MemoryScope> {
        let ArtifactScope::User { app, user } = scope else {
            return None;
        };
        let rest = name
            .as_str()
            .strip_prefix(hippocamp_agent::memory_tool::PREFIX)?;
        rest.starts_with('/')
            .then(|| MemoryScope::new(app.clone(), user.clone()))
    }

    /// Writes the entry of the version `meta`.
    async fn index(
        &self,
        owner: &MemoryScope,
        scope: &ArtifactScope,
        meta: &ArtifactMeta,
        call: &CallOptions,
    ) -> Result<()> {
        let file = FileSource {
            name: meta.name.as_str().to_owned(),
            version: meta.version,
        };
        let range = (meta.size > 0).then(|| ByteRange {
            offset: 0,
            len: meta.size.min(self.max_content_bytes),
        });
        let bytes = self
            .store()
            .get(
                scope,
                &meta.name,
                Selector::Version(meta.version),
                range,
                call,
            )
            .await?
            .bytes()
            .await?;
        let content = match text_prefix(&bytes) {
            Some(t) if !t.trim().is_empty() => t.to_owned(),
            _ => file.name.clone(),
        };
        let at = self
            .timestamp(owner, &file, meta.created_at_ms, call)
            .await?;
        let mut opts = WriteOptions::new(*call);
        opts.obligations.expires_at_ms = self
            .policy
            .artifact_terms(owner.app(), Some(owner.user()))
            .ttl_ms
            .map(|ttl| meta.created_at_ms.saturating_add(ttl));
        let entry = NewEntry {
            file: Some(file),
            ..NewEntry::new(content).provenance(Provenance {
                timestamp_ms: Some(at),
                ..Provenance::default()
            })
        };
        self.memory.add_entry(owner, entry, &opts).await?;
        Ok(())
    }

    /// The time of a version's entry: when it was stored, but after the
    /// previous version's entry, so two versions stored in one
    /// millisecond still order by version (the newest is current).
    async fn timestamp(
        &self,
        owner: &MemoryScope,
        file: &FileSource,
        stored_ms: u64,
        call: &CallOptions,
    ) -> Result<u64> {
        if file.version < 2 {
            return Ok(stored_ms);
        }
        let previous = FileSource {
            name: file.name.clone(),
            version: file.version - 1,
        };
        match self
            .memory
            .get_entry(owner, &previous.entry_id(owner)?, call)
            .await
        {
            Ok(e) => Ok(stored_ms.max(e.timestamp_ms.saturating_add(1))),
            Err(Error::NotFound(_)) => Ok(stored_ms),
            Err(e) => Err(e),
        }
    }

    /// Erases the entries of `versions` of `name`.
    async fn erase(
        &self,
        owner: &MemoryScope,
        name: &ArtifactName,
        versions: impl IntoIterator<Item = u64>,
        call: &CallOptions,
    ) -> Result<()> {
        for version in versions {
            let file = FileSource {
                name: name.as_str().to_owned(),
                version,
            };
            self.memory
                .delete_entry(owner, &file.entry_id(owner)?, call)
                .await?;
        }
        Ok(())
    }

    /// The versions `selector` names now, and the selector that deletes
    /// exactly those when it named one.
    async fn selected(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        call: &CallOptions,
    ) -> Result<(Vec<u64>, DeleteSelector)> {
        match selector {
            DeleteSelector::Version(v) => Ok((vec![v], selector)),
            DeleteSelector::Latest => {
                match self.store().head(scope, name, Selector::Latest, call).await {
                    Ok(m) => Ok((vec![m.version], DeleteSelector::Version(m.version))),
                    Err(Error::NotFound(_)) => Ok((Vec::new(), selector)),
                    Err(e) => Err(e),
                }
            }
            DeleteSelector::All => {
                let mut out = Vec::new();
                let mut page = PageRequest::<u64>::default();
                loop {
                    let p = match self.store().list_versions(scope, name, &page, call).await {
                        Ok(p) => p,
                        Err(Error::NotFound(_)) => return Ok((out, selector)),
                        Err(e) => return Err(e),
                    };
                    out.extend(p.items.iter().map(|m| m.version));
                    match p.next_cursor {
                        Some(c) => page.cursor = Some(c),
                        None => return Ok((out, selector)),
                    }
                }
            }
        }
    }
}

/// The longest UTF-8 prefix of `bytes` when it is text cut short (a read
/// of its first bytes may end inside a character); `None` when it is not
/// text.
fn text_prefix(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t),
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
    .filter(|t| !t.contains('\0'))
}

#[async_trait]
impl ArtifactLayer for FileIndex {
    type Inner = dyn ArtifactStore;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        let meta = self.store().put(scope, name, body, opts).await?;
        let Some(owner) = Self::owner(scope, name) else {
            return Ok(meta);
        };
        match self.index(&owner, scope, &meta, &opts.call).await {
            Ok(()) => Ok(meta),
            Err(e) => {
                // The version is taken back (its number is never reused):
                // a memory file is searchable or it is not stored.
                let undo = self
                    .store()
                    .delete(
                        scope,
                        name,
                        DeleteSelector::Version(meta.version),
                        &opts.call,
                    )
                    .await;
                if let Err(u) = undo {
                    tracing::error!(
                        error = %u,
                        version = meta.version,
                        "a memory file version whose index failed could not be removed"
                    );
                }
                Err(e)
            }
        }
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let Some(owner) = Self::owner(scope, name) else {
            return self.store().delete(scope, name, selector, opts).await;
        };
        let (versions, exact) = self.selected(scope, name, selector, opts).await?;
        self.erase(&owner, name, versions.iter().copied(), opts)
            .await?;
        let removed = self.store().delete(scope, name, exact, opts).await?;
        // A version stored between the listing and the deletion.
        let late: Vec<u64> = removed
            .iter()
            .copied()
            .filter(|v| !versions.contains(v))
            .collect();
        self.erase(&owner, name, late, opts).await?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_keeps_its_whole_characters() {
        let text = "café".as_bytes();
        assert_eq!(text_prefix(&text[..4]), Some("caf"));
        assert_eq!(text_prefix(text), Some("café"));
        assert_eq!(text_prefix(&[0xff, 0xfe, b'a']), None);
        assert_eq!(text_prefix(b"a\0b"), None);
    }
}
