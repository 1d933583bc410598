//! Memory preload's cost next to the plain search it wraps: query
//! shaping, the search, the scope check, the byte bounds and the framing
//! with a fresh nonce, excluding the model. Both on one 600-entry
//! in-memory scope of LoCoMo turns, with LoCoMo questions, interleaved
//! call by call so they share the machine's state.

use std::time::Instant;

use hippocamp_agent::PreloadOptions;
use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore, SearchRequest};
use serde::Serialize;

use crate::{BenchError, Latency, Result, latency};

/// Entries in the scope.
const ENTRIES: usize = 600;

/// `preload` results.
#[derive(Debug, Clone, Serialize)]
pub struct PreloadBench {
    /// Entries in the scope.
    pub entries: usize,
    /// Calls of each.
    pub samples: usize,
    /// Hits asked for (the preload default).
    pub limit: u64,
    /// `MemoryStore::search` with the preload's request.
    pub search: Latency,
    /// `preload()`: shaping, search, checks, bounds, framing.
    pub preload: Latency,
    /// `preload` p50 − `search` p50, microseconds (bar: ≤ 20).
    pub overhead_p50_us: f64,
}

/// Runs `samples` interleaved pairs.
pub async fn preload(samples: usize) -> Result<PreloadBench> {
    let store = InMemoryStore::new(MemoryConfig::default())?;
    let scope = MemoryScope::parse("bench", "user")?;
    let queries = crate::locomo_scope(&store, &scope, ENTRIES).await?;
    let opts = PreloadOptions::default();
    let max_query = hippocamp_agent::preload::max_query_bytes(&store);
    let call = CallOptions::default();
    let (mut plain, mut framed) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    // Warm both paths first.
    for (i, q) in queries.iter().cycle().take(samples + 200).enumerate() {
        let started = Instant::now();
        let hits = store
            .search(
                &scope,
                &SearchRequest::new(q.clone()).limit(opts.limit),
                &call,
            )
            .await?;
        let searched = started.elapsed();
        std::hint::black_box(hits);
        let started = Instant::now();
        let block = hippocamp_agent::preload::preload(&store, &scope, q, &opts, max_query, call)
            .await
            .map_err(|e| BenchError::Store(hippocamp_core::Error::Unavailable(e.to_string())))?;
        let preloaded = started.elapsed();
        std::hint::black_box(block);
        if i >= 200 {
            plain.push(searched.as_secs_f64() * 1e6);
            framed.push(preloaded.as_secs_f64() * 1e6);
        }
    }
    let (search, preload) = (latency(plain), latency(framed));
    Ok(PreloadBench {
        entries: ENTRIES,
        samples,
        limit: opts.limit,
        overhead_p50_us: preload.p50_us - search.p50_us,
        search,
        preload,
    })
}
