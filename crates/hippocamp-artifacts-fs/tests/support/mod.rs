//! Test support shared by the filesystem store's tests and examples.

#![allow(
    unreachable_pub,
    dead_code,
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    clippy::cast_possible_truncation
)]

pub mod crash;
pub mod factory;
pub mod power;
