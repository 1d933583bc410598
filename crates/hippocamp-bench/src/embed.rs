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

/// Words the generated code is made of.
const WORDS: &[&str] = &[
    "order", "invoice", "customer", "session", "payload", "retry", "window", "cache", "ledger",
    "report", "schedule", "token", "buffer", "account", "record", "stream", "batch", "queue",
];

/// `n` long, code-heavy turns of 2-16 KiB (sizes spread evenly by a
/// fixed sequence, so every run makes the same turns): a line of prose
/// and then Python-like functions, as an agent pasting code writes them.
pub fn long_turns(count: usize) -> Vec<String> {
    use std::fmt::Write as _;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64: deterministic, no dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let word = |r: u64| WORDS[usize::try_from(r % WORDS.len() as u64).unwrap_or(0)];
    (0..count)
        .map(|turn| {
            let size = 2_048 + usize::try_from(next() % (14 * 1_024)).unwrap_or(0);
            let mut text = format!(
                "Here is the {} handler I wrote for the {} service (turn {turn}):\n",
                word(next()),
                word(next())
            );
            let mut function = 0;
            while text.len() < size {
                let (what, of, arg) = (word(next()), word(next()), word(next()));
                let limit = next() % 1_000;
                let _ = write!(
                    text,
                    "\ndef handle_{what}_{of}_{function}(request, {arg}):\n    \"\"\"Return the {what} of the {of} for a {arg}.\"\"\"\n    value = request.get(\"{arg}_{limit}\", {limit})\n    if value > {limit}:\n        raise ValueError(f\"{what} over {limit}: {{value}}\")\n    for item in {arg}.items():\n        {of}_total = {of}_total + item.{what}\n    return {what}.compute(value, retries={function})\n"
                );
                function += 1;
            }
            // Cut to the size (the text is ASCII, so any byte is a
            // boundary).
            text.truncate(size);
            text
        })
        .collect()
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
