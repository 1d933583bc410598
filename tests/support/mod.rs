#![allow(unreachable_pub)]
pub mod distributed;
pub mod local;
