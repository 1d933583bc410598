//! Test support shared by the filesystem store's tests and examples.

#![allow(
    unreachable_pub,
    dead_code,
    clippy::unwrap_used,
    clippy::missing_panics_doc
)]

pub mod factory;
