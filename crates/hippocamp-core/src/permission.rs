//! [`Permission`]: what a bearer token may do. It is part of the shared
//! vocabulary (not of the token store) so that a protocol adapter (MCP)
//! can map its tools to permissions without depending on the services
//! that issue tokens.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Problem, Result};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    /// Search and read memory entries.
    #[serde(rename = "memory:read")]
    MemoryRead,
    /// Add entries and events.
    #[serde(rename = "memory:write")]
    MemoryWrite,
    /// Delete entries, sessions and users.
    #[serde(rename = "memory:erase")]
    MemoryErase,
    /// Restore an export into a user's memory (writes entries with their
    /// history, consent and agent sessions: more than `memory:write`).
    #[serde(rename = "memory:restore")]
    MemoryRestore,
    /// Read artifacts.
    #[serde(rename = "artifacts:read")]
    ArtifactsRead,
    /// Put artifacts.
    #[serde(rename = "artifacts:write")]
    ArtifactsWrite,
    /// Delete artifacts.
    #[serde(rename = "artifacts:delete")]
    ArtifactsDelete,
    /// Every permission within the grant, and the inspection page.
    #[serde(rename = "admin")]
    Admin,
}

impl Permission {
    /// Every permission, in order.
    pub const ALL: [Permission; 8] = [
        Permission::MemoryRead,
        Permission::MemoryWrite,
        Permission::MemoryErase,
        Permission::MemoryRestore,
        Permission::ArtifactsRead,
        Permission::ArtifactsWrite,
        Permission::ArtifactsDelete,
        Permission::Admin,
    ];

    /// The wire name (`memory:read`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::MemoryRead => "memory:read",
            Permission::MemoryWrite => "memory:write",
            Permission::MemoryErase => "memory:erase",
            Permission::MemoryRestore => "memory:restore",
            Permission::ArtifactsRead => "artifacts:read",
            Permission::ArtifactsWrite => "artifacts:write",
            Permission::ArtifactsDelete => "artifacts:delete",
            Permission::Admin => "admin",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::config(
                    "permissions",
                    Problem::Malformed(format!(
                        "unknown permission `{s}`; one of {}",
                        Self::ALL.map(Permission::as_str).join(", ")
                    )),
                )
            })
    }
}
