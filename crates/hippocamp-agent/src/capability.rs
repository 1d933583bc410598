//! What a tool may do: the capability names a tool declares, and the set
//! its context enforces.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One operation a tool may be granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Search the user's memory.
    MemorySearch,
    /// Add entries or ingest events.
    MemoryAdd,
    /// Delete an entry or a session's entries.
    MemoryDelete,
    /// Store a new artifact version.
    ArtifactPut,
    /// Read an artifact version.
    ArtifactGet,
    /// List artifact names.
    ArtifactList,
    /// List an artifact's versions.
    ArtifactListVersions,
    /// Delete artifact versions.
    ArtifactDelete,
    /// Attach an artifact to the next model request.
    ArtifactAttach,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 9] = [
        Capability::MemorySearch,
        Capability::MemoryAdd,
        Capability::MemoryDelete,
        Capability::ArtifactPut,
        Capability::ArtifactGet,
        Capability::ArtifactList,
        Capability::ArtifactListVersions,
        Capability::ArtifactDelete,
        Capability::ArtifactAttach,
    ];

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::MemorySearch => "memory_search",
            Capability::MemoryAdd => "memory_add",
            Capability::MemoryDelete => "memory_delete",
            Capability::ArtifactPut => "artifact_put",
            Capability::ArtifactGet => "artifact_get",
            Capability::ArtifactList => "artifact_list",
            Capability::ArtifactListVersions => "artifact_list_versions",
            Capability::ArtifactDelete => "artifact_delete",
            Capability::ArtifactAttach => "artifact_attach",
        }
    }

    /// The capability named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// Whether it touches memory (else artifacts).
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            Capability::MemorySearch | Capability::MemoryAdd | Capability::MemoryDelete
        )
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of capabilities.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CapabilitySet(u16);

impl CapabilitySet {
    /// No capability.
    pub const EMPTY: Self = Self(0);

    /// The set of `caps`.
    pub fn of(caps: &[Capability]) -> Self {
        Self(caps.iter().fold(0, |b, c| b | c.bit()))
    }

    /// Whether `c` is in the set.
    pub fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// Its members, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }

    /// Whether it is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for CapabilitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Capability::as_str))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sets_hold_what_they_were_given() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(c));
            let s = CapabilitySet::of(&[c]);
            assert!(s.contains(c));
            assert_eq!(s.iter().collect::<Vec<_>>(), vec![c]);
        }
        assert_eq!(Capability::parse("identity"), None);
        assert!(CapabilitySet::EMPTY.is_empty());
    }
}
