//! `hippocamp bench footprint`: resident memory per stored entry.
//!
//! Fills `scopes` scopes of `entries` ~200-byte LoCoMo turns each (one
//! `add_events` batch per scope) in a fresh store, then searches every
//! scope once so each is active (the durable store loads its search state
//! on first use), and reports the process's resident size (`VmRSS`) before
//! and after, per entry. The durable store's search state is bounded by
//! `scope_cache_bytes`; its figure is reported next to what the cache was
//! charged.

use std::path::Path;

use hippocamp_core::{CallOptions, MemoryScope, SessionId};
use hippocamp_memory::{MemoryStore, SearchRequest, WriteOptions};
use hippocamp_memory_redb::{DurableOptions, RedbMemoryStore};
use serde::Serialize;

use crate::{Result, big_config, turn_events, turns};

/// `footprint` results.
#[derive(Debug, Clone, Serialize)]
pub struct Footprint {
    /// `memory` or `durable`.
    pub store: &'static str,
    /// Scopes filled and searched.
    pub scopes: usize,
    /// Entries per scope.
    pub entries_per_scope: usize,
    /// Resident size before filling, MiB.
    pub rss_before_mib: f64,
    /// Resident size with every scope active, MiB.
    pub rss_active_mib: f64,
    /// (active − before) / entries.
    pub bytes_per_entry: f64,
    /// Mean storage bytes of an entry (what quotas count).
    pub storage_bytes_per_entry: f64,
    /// The durable store's bound (`scope_cache_bytes`).
    pub scope_cache_bytes: Option<u64>,
    /// Scopes whose search state is in memory at the end (durable).
    pub cached_scopes: Option<usize>,
    /// Bytes charged to them (durable).
    pub cached_bytes: Option<u64>,
}

/// Resident size of this process, bytes (Linux `VmRSS`).
fn rss() -> u64 {
    crate::proc_status_bytes("VmRSS:").unwrap_or(0)
}

/// Fills and activates the scopes; `dir` is `None` for the in-memory store.
pub async fn footprint(
    dir: Option<&Path>,
    scopes: usize,
    entries: usize,
    scope_cache_bytes: u64,
) -> Result<Footprint> {
    let texts = turns(entries)?;
    let events = turn_events(&texts);
    let before = rss();
    let durable = match dir {
        Some(d) => Some(RedbMemoryStore::open_with_options(
            d,
            big_config(),
            DurableOptions {
                scope_cache_bytes,
                ..DurableOptions::default()
            },
        )?),
        None => None,
    };
    let memory;
    let store: &dyn MemoryStore = if let Some(s) = &durable {
        s
    } else {
        memory = hippocamp_memory::InMemoryStore::new(big_config())?;
        &memory
    };
    let session = SessionId::new("s")?;
    let q = SearchRequest::new("what did she paint").limit(5);
    let mut storage = 0u64;
    for i in 0..scopes {
        let scope = MemoryScope::parse("bench", &format!("u{i}"))?;
        store
            .add_events(&scope, &session, &events, &WriteOptions::default())
            .await?;
        let r = store.search(&scope, &q, &CallOptions::default()).await?;
        if i == 0 {
            let page = store
                .list_entries(
                    &scope,
                    &hippocamp_memory::ListRequest::default(),
                    &CallOptions::default(),
                )
                .await?;
            storage = page
                .entries
                .iter()
                .map(hippocamp_memory::MemoryEntry::storage_bytes)
                .sum::<u64>()
                / page.entries.len().max(1) as u64;
        }
        std::hint::black_box(r);
    }
    let active = rss();
    let n = (scopes * entries) as f64;
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    Ok(Footprint {
        store: if durable.is_some() {
            "durable"
        } else {
            "memory"
        },
        scopes,
        entries_per_scope: entries,
        rss_before_mib: mib(before),
        rss_active_mib: mib(active),
        bytes_per_entry: active.saturating_sub(before) as f64 / n,
        storage_bytes_per_entry: storage as f64,
        scope_cache_bytes: durable.as_ref().map(|_| scope_cache_bytes),
        cached_scopes: durable.as_ref().map(RedbMemoryStore::cached_scopes),
        cached_bytes: durable.as_ref().map(RedbMemoryStore::cached_bytes),
    })
}
