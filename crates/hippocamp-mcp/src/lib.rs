//! The MCP server: the runner's built-in tools (the same
//! implementations, names, schemas, limits and capability checks, from
//! their one table; `load_artifacts` stays runner-only) and the user's
//! artifacts as resources, over Streamable HTTP (mounted at `/mcp` on the
//! API server) and stdio (`hippocamp mcp`).
//!
//! Scope comes from authority, never from the model: over HTTP the bearer
//! token's grant (and, for an app-wide token, the
//! `/mcp/apps/{app}/users/{user}` path, checked against the grant) fixes
//! the app and user; over stdio the command line does. No tool takes an
//! app or a user argument. The tool list follows the caller's
//! permissions: a tool is offered only when every capability it declares
//! maps to a permission the caller holds ([`PERMISSIONS`]), and its
//! context grants exactly those capabilities.
//!
//! - [`tools`]: the tool list, calls, and how results become MCP content;
//! - [`resources`]: artifacts as resources whose URIs are their API v1 URLs;
//! - [`handler`]: the rmcp `ServerHandler`, the HTTP service and stdio.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod handler;
pub mod resources;
pub mod tools;

use std::collections::BTreeSet;
use std::sync::Arc;

use hippocamp_agent::Capability;
use hippocamp_artifacts::ArtifactStore;
use hippocamp_core::MemoryScope;
use hippocamp_core::Permission;
use hippocamp_memory::MemoryStore;

pub use handler::{McpConfig, http_service, serve_stdio};

/// The permission each capability needs over MCP (`None`: not offered).
pub const PERMISSIONS: &[(Capability, Option<Permission>)] = &[
    (Capability::MemorySearch, Some(Permission::MemoryRead)),
    (Capability::MemoryAdd, Some(Permission::MemoryWrite)),
    (Capability::MemoryDelete, Some(Permission::MemoryErase)),
    (Capability::ArtifactGet, Some(Permission::ArtifactsRead)),
    (Capability::ArtifactList, Some(Permission::ArtifactsRead)),
    (
        Capability::ArtifactListVersions,
        Some(Permission::ArtifactsRead),
    ),
    (Capability::ArtifactPut, Some(Permission::ArtifactsWrite)),
    (
        Capability::ArtifactDelete,
        Some(Permission::ArtifactsDelete),
    ),
    // Attaching needs a model request to attach to: runner-only.
    (Capability::ArtifactAttach, None),
];

/// The MCP server's fixed limits, as `capabilities()` reports them (the
/// tools' own are `hippocamp_agent::builtin::fixed_limits`).
pub fn fixed_limits() -> Vec<hippocamp_core::LimitInfo> {
    use hippocamp_core::LimitInfo;
    vec![
        LimitInfo::fixed(
            "mcp.resources_page",
            resources::PAGE,
            1,
            "resources one resources/list page returns",
        ),
        LimitInfo::fixed(
            "mcp.max_read_bytes",
            resources::MAX_READ_BYTES,
            1,
            "bytes one resources/read returns",
        ),
        LimitInfo::fixed(
            "mcp.call_timeout_ms",
            u64::try_from(tools::CALL_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
            1,
            "milliseconds one MCP tool call may take",
        ),
    ]
}

/// The permission `c` needs, if it is offered at all.
pub fn permission_for(c: Capability) -> Option<Permission> {
    PERMISSIONS
        .iter()
        .find(|(k, _)| *k == c)
        .and_then(|(_, p)| *p)
}

/// Who is calling: the exact scope their authority fixes, what they may
/// do in it, and the server base their resource URIs point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    /// The scope.
    pub scope: MemoryScope,
    /// Their permissions in it (`Admin` stands for all).
    pub permissions: BTreeSet<Permission>,
    /// `http://HOST:PORT` of the API server, as the caller reaches it.
    pub base_url: String,
    /// Who is calling (a token's id, or the command line): every store
    /// call is made for them, so the audit log and the policy see it.
    pub caller: hippocamp_core::Caller,
}

impl Authority {
    /// Every permission in `scope` (the stdio server: the command line is
    /// the authority).
    pub fn owner(scope: MemoryScope, base_url: String) -> Self {
        Self {
            scope,
            permissions: BTreeSet::from([Permission::Admin]),
            base_url,
            caller: hippocamp_core::Caller::of(hippocamp_core::CallerKind::Cli),
        }
    }

    /// Whether they hold `p`.
    pub fn has(&self, p: Permission) -> bool {
        self.permissions.contains(&p) || self.permissions.contains(&Permission::Admin)
    }
}

/// What the server serves from.
#[derive(Debug, Clone)]
pub struct Backends {
    /// Memory (`None`: memory tools are not offered).
    pub memory: Option<Arc<dyn MemoryStore>>,
    /// Artifacts.
    pub artifacts: Option<Arc<dyn ArtifactStore>>,
}
