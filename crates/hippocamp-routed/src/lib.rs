//! The exact-scope router (`hippocamp-router`) in front of a store: a
//! layer for memory ([`RoutedMemory`]) and one for artifacts
//! ([`RoutedArtifacts`]). The contracts they wrap know nothing of it.

pub mod artifacts;
pub mod memory;

pub use artifacts::RoutedArtifacts;
pub use memory::RoutedMemory;
