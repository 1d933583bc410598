//! What a scope router reports (its strategy and counters): vocabulary
//! the store contracts' status types name, kept here so a contract does
//! not depend on the router that produces it (`hippocamp-router`).

use serde::{Deserialize, Serialize};

/// How scopes map to workers.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// One worker per active exact scope.
    #[default]
    ExactScope,
    /// One worker for every scope.
    Shared,
}

impl Strategy {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::ExactScope => "exact_scope",
            Strategy::Shared => "shared",
        }
    }
}

/// Counters of a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RouterStats {
    /// The strategy.
    pub strategy: Strategy,
    /// Live workers (1 for `shared`).
    pub active_scopes: u64,
    /// Activations in progress.
    pub cold_activations_in_flight: u64,
    /// Workers reclaimed so far, by the idle sweep or to make room for
    /// a new scope at capacity.
    pub reclaimed_workers: u64,
    /// Most live workers.
    pub max_active_scopes: u64,
    /// Most activations in progress.
    pub max_cold_activations: u64,
    /// Idle timeout in milliseconds.
    pub idle_scope_timeout_ms: u64,
    /// Whether idle workers are reclaimed (never for a volatile store, nor
    /// for `shared`).
    pub idle_reclamation: bool,
}
