//! `bench embed-ingest`: turns per second into a store that embeds, for
//! short conversational turns and for long, code-heavy ones (2-16 KiB),
//! so the two rates are compared on the same embedder in the same run.
//!
//! Each set goes in as sessions of 20 events through
//! `hippocamp_memory::embedding::add_events_paced`, the path the eval and
//! `memory import` use, into a fresh in-memory store with the embedder.

use std::sync::Arc;
use std::time::Instant;

use hippocamp_core::{MemoryScope, SessionId};
use hippocamp_embed::Embedder;
use hippocamp_memory::embedding::{Pacer, add_events_paced};
use hippocamp_memory::{Event, InMemoryStore, MemoryConfig, MemoryStore};
use serde::Serialize;

use crate::Result;

/// One set's rate.
#[derive(Debug, Clone, Serialize)]
pub struct IngestRate {
    /// Turns ingested.
    pub turns: usize,
    /// Their mean size in bytes.
    pub mean_turn_bytes: usize,
    /// Wall time.
    pub seconds: f64,
    /// Turns per second.
    pub turns_per_s: f64,
    /// Turns skipped (none expected).
    pub skipped: usize,
}

/// Both sets' rates.
#[derive(Debug, Clone, Serialize)]
pub struct EmbedIngest {
    /// The embedder (`model`).
    pub embedder: String,
    /// Short turns (LoCoMo's).
    pub short: IngestRate,
    /// Long, code-heavy turns.
    pub long: IngestRate,
    /// `long.turns_per_s / short.turns_per_s`.
    pub long_to_short: f64,
}

/// Ingests `short` and then `long` turns through `embedder`.
pub async fn embed_ingest(
    embedder: Arc<dyn Embedder>,
    short: Vec<String>,
    long: Vec<String>,
) -> Result<EmbedIngest> {
    let model = embedder.model().to_owned();
    let short = rate(Arc::clone(&embedder), &short).await?;
    let long = rate(embedder, &long).await?;
    Ok(EmbedIngest {
        embedder: model,
        long_to_short: long.turns_per_s / short.turns_per_s.max(f64::MIN_POSITIVE),
        short,
        long,
    })
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^52
async fn rate(embedder: Arc<dyn Embedder>, texts: &[String]) -> Result<IngestRate> {
    let store = InMemoryStore::new(MemoryConfig::default())?.with_embedder(embedder);
    let scope = MemoryScope::parse("bench", "embed-ingest")?;
    let mut pacer = Pacer::for_store(&store.capabilities());
    let started = Instant::now();
    let mut skipped = 0;
    for (s, chunk) in texts.chunks(20).enumerate() {
        let session = SessionId::new(format!("s{s}"))?;
        let events: Vec<Event> = chunk
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Event::text(
                    format!("e{s}-{i}"),
                    "user",
                    1 + i64::try_from(i).unwrap_or(0),
                    t.clone(),
                )
            })
            .collect();
        skipped += add_events_paced(&store, &scope, &session, &events, &mut pacer)
            .await?
            .skipped
            .len();
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(IngestRate {
        turns: texts.len(),
        mean_turn_bytes: texts.iter().map(String::len).sum::<usize>() / texts.len().max(1),
        seconds,
        turns_per_s: texts.len() as f64 / seconds.max(f64::MIN_POSITIVE),
        skipped,
    })
}

/// `n` long, code-heavy turns of 2-16 KiB
/// ([`hippocamp_datasets::synthetic::code_turns`]).
pub fn long_turns(count: usize) -> Vec<String> {
    hippocamp_datasets::synthetic::code_turns(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_turns_are_long_code_and_repeatable() {
        let a = long_turns(50);
        assert_eq!(a, long_turns(50));
        for t in &a {
            assert!((2_048..=16 * 1_024).contains(&t.len()), "{}", t.len());
            assert!(t.contains("def handle_"));
        }
        let sizes: std::collections::BTreeSet<usize> = a.iter().map(String::len).collect();
        assert!(sizes.len() > 40, "sizes spread");
    }
}
