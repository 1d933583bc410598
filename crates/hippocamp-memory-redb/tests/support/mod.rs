//! Test support shared by the crash and power-loss tests and the crash
//! example.

#![allow(unreachable_pub, dead_code, clippy::needless_range_loop)]

pub mod crash;
pub mod workload;
