#![allow(unreachable_pub)]
pub mod distributed;
