//! How stores use an embedder, and how callers pace ingestion with one.
//!
//! Passages are embedded before a write commits, so an acknowledged entry
//! always has its vector and search never meets one without; queries are
//! embedded when a search needs a vector; both within the request's
//! deadline. Only passages that would become new entries are embedded: an
//! event already stored with the same data, or a repeat within the batch,
//! costs no embedding (a store checks what it holds first, and if an entry
//! vanished meanwhile, embeds it before committing).
//!
//! Calls to the provider are split so that each fits its bounds: at most
//! `max_inputs` texts, `max_total_bytes` bytes and `max_batch_tokens`
//! estimated tokens per call; a text is sent only as far as the model
//! reads it (its first `max_input_tokens` × 4 bytes, within
//! `max_input_bytes`), while the entry keeps its whole content. Long,
//! code-heavy turns sent whole made calls that outlived their deadline
//! on a busy machine, and the provider kept computing them after they
//! were abandoned; windows and token-sized batches keep every call's
//! work bounded.
//!
//! [`Pacer`] sizes the batches of callers that ingest a lot (the eval
//! harness, `memory import`) from the throughput they observe, so each
//! call fits its deadline even on a loaded machine.

use std::collections::HashMap;
use std::time::Duration;

use hippocamp_core::{CallOptions, Deadline, Result};
use hippocamp_embed::{Embedder, InputKind, Vector, head};

use crate::event::EventPlan;
use crate::store::{Capabilities, EmbedderInfo, SearchMode};

/// One vector per text, in order (none without an embedder), in as many
/// provider calls as its count and byte bounds need.
pub async fn embed_passages(
    embedder: Option<&dyn Embedder>,
    texts: &[&str],
    deadline: Deadline,
) -> Result<Vec<Vector>> {
    let Some(e) = embedder else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(texts.len());
    for batch in batches(e.limits(), texts) {
        out.extend(e.embed(&batch, InputKind::Passage, deadline).await?);
    }
    Ok(out)
}

/// `texts`, each cut to the model's window, in calls within the
/// embedder's bounds (count, bytes, estimated tokens), in order.
fn batches(l: &hippocamp_embed::EmbedLimits, texts: &[&str]) -> Vec<Vec<String>> {
    let max_inputs = usize::try_from(l.max_inputs).unwrap_or(1).max(1);
    let window = usize::try_from(l.input_window_bytes()).unwrap_or(usize::MAX);
    let max_total = usize::try_from(l.max_total_bytes).unwrap_or(usize::MAX);
    let per_token = usize::try_from(hippocamp_embed::BYTES_PER_TOKEN).unwrap_or(4);
    let max_tokens = usize::try_from(l.max_batch_tokens).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut batch: Vec<String> = Vec::new();
    let (mut bytes, mut tokens) = (0usize, 0usize);
    for t in texts {
        let t = head(t, window.min(max_total));
        let t_tokens = t.len().div_ceil(per_token);
        if !batch.is_empty()
            && (batch.len() == max_inputs
                || bytes + t.len() > max_total
                || tokens + t_tokens > max_tokens)
        {
            out.push(std::mem::take(&mut batch));
            (bytes, tokens) = (0, 0);
        }
        bytes += t.len();
        tokens += t_tokens;
        batch.push(t.to_owned());
    }
    if !batch.is_empty() {
        out.push(batch);
    }
    out
}

/// The vectors of the plan's entries at `indices` (request positions),
/// by position: empty, with nothing copied, without an embedder.
pub async fn embed_plan(
    embedder: Option<&dyn Embedder>,
    plan: &EventPlan,
    indices: &[usize],
    deadline: Deadline,
) -> Result<HashMap<usize, Vector>> {
    if embedder.is_none() || indices.is_empty() {
        return Ok(HashMap::new());
    }
    let by_index: HashMap<usize, &str> = plan
        .entries
        .iter()
        .map(|p| (p.index, p.prepared.entry.content.as_str()))
        .collect();
    let texts: Vec<&str> = indices
        .iter()
        .filter_map(|i| by_index.get(i).copied())
        .collect();
    let vectors = embed_passages(embedder, &texts, deadline).await?;
    Ok(indices.iter().copied().zip(vectors).collect())
}

/// The query's vector, when `mode` needs one.
pub async fn embed_query(
    embedder: Option<&dyn Embedder>,
    mode: SearchMode,
    query: &str,
    deadline: Deadline,
) -> Result<Option<Vector>> {
    match (embedder, mode) {
        (Some(e), SearchMode::Vector | SearchMode::Hybrid) => {
            let max = usize::try_from(e.limits().input_window_bytes()).unwrap_or(usize::MAX);
            Ok(
                e.embed(&[head(query, max).to_owned()], InputKind::Query, deadline)
                    .await?
                    .pop(),
            )
        }
        _ => Ok(None),
    }
}

/// Adds the embedder and its modes to a capability report.
pub fn describe(c: &mut Capabilities, embedder: Option<&dyn Embedder>) {
    if let Some(e) = embedder {
        c.search.modes = vec!["lexical".into(), "vector".into(), "hybrid".into()];
        c.search.embedder = Some(EmbedderInfo {
            model: e.model().to_owned(),
            dimension: e.dimension(),
            ingestion: "synchronous".into(),
        });
        // The embedder's own bounds (`embed.*`) apply to every write and
        // vector query, so they are limits of this store too.
        c.limits.extend(e.describe_limits());
    }
}

/// Sizes `add_events` batches for a caller that ingests many events: with
/// an embedder every batch gets the longest deadline a call may have
/// (60 s), and holds as many events as the throughput seen so far embeds
/// in a third of it; a batch that still times out is retried (nothing of
/// it became visible) at a quarter of its size. Without an embedder,
/// batches are `max` events with the store's default deadline.
#[derive(Debug, Clone)]
pub struct Pacer {
    batch: usize,
    max: usize,
    embeds: bool,
    /// The deadline of every call, when the caller fixes it.
    timeout: Option<Duration>,
}

/// The part of a paced call's deadline its batch is sized to fill.
const PACE_BUDGET: Duration = Duration::from_secs(20);
/// The first batch of a paced caller with an embedder.
const FIRST_BATCH: usize = 16;

impl Pacer {
    /// A pacer for batches of at most `max` events (the store's
    /// `max_events_per_request`), for a store that embeds or not.
    pub fn new(max: u64, embeds: bool) -> Self {
        let max = usize::try_from(max).unwrap_or(usize::MAX).max(1);
        Self {
            batch: if embeds { FIRST_BATCH.min(max) } else { max },
            max,
            embeds,
            timeout: None,
        }
    }

    /// A pacer whose every call has the deadline `timeout` (a queue's
    /// configured call timeout); with an embedder, batches are sized to
    /// fill a third of it.
    pub fn with_timeout(max: u64, embeds: bool, timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            ..Self::new(max, embeds)
        }
    }

    fn budget(&self) -> Duration {
        self.timeout.map_or(PACE_BUDGET, |t| t / 3)
    }

    /// A pacer for `capabilities`' store.
    pub fn for_store(capabilities: &Capabilities) -> Self {
        let max = capabilities
            .limits
            .iter()
            .find(|l| l.name == "max_events_per_request")
            .map_or(1_000, |l| l.value);
        Self::new(max, capabilities.search.embedder.is_some())
    }

    /// Events in the next batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The deadline of a batch call.
    pub fn call(&self) -> CallOptions {
        match self.timeout_ms() {
            Some(ms) => CallOptions::timeout_ms(ms).unwrap_or_default(),
            None => CallOptions::default(),
        }
    }

    /// The timeout of a batch call in milliseconds, `None` for the store's
    /// default (as a client passes it to a server: `?timeout_ms=`).
    pub fn timeout_ms(&self) -> Option<u64> {
        if let Some(t) = self.timeout {
            return Some(u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1));
        }
        self.embeds.then(|| {
            u64::try_from(hippocamp_core::deadline::MAX_TIMEOUT.as_millis()).unwrap_or(60_000)
        })
    }

    /// A batch of `events` took `took`: the next one is sized from it.
    pub fn done(&mut self, events: usize, took: Duration) {
        if !self.embeds || events == 0 {
            return;
        }
        let per_second = events as f64 / took.as_secs_f64().max(1e-3);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let fits = (per_second * self.budget().as_secs_f64()) as usize;
        // Grow at most fourfold at a time: one fast batch proves little.
        self.batch = fits.clamp(1, self.max).min(self.batch.saturating_mul(4));
    }

    /// A batch did not fit (its deadline, or a body bound): shrinks the
    /// next one. False when it was a single event already.
    pub fn shrink(&mut self) -> bool {
        if self.batch == 1 {
            return false;
        }
        self.batch = (self.batch / 4).max(1);
        true
    }
}

/// Sends `len` items in the batches `pacer` sizes (`send` gets each
/// batch's positions), each with the pacer's deadline; a batch that did
/// not fit (`too_much`: it timed out, or its body was too large) is sent
/// again, smaller (nothing of it became visible; ingestion is idempotent
/// anyway). Returns each batch's reply with the position of its first
/// item.
pub async fn paced<R, E, F, Fut>(
    len: usize,
    pacer: &mut Pacer,
    too_much: impl Fn(&E) -> bool,
    mut send: F,
) -> std::result::Result<Vec<(usize, R)>, E>
where
    F: FnMut(std::ops::Range<usize>, CallOptions) -> Fut,
    Fut: Future<Output = std::result::Result<R, E>>,
{
    let mut out = Vec::new();
    let mut at = 0;
    while at < len {
        let n = pacer.batch().min(len - at);
        let started = std::time::Instant::now();
        match send(at..at + n, pacer.call()).await {
            Ok(r) => {
                pacer.done(n, started.elapsed());
                out.push((at, r));
                at += n;
            }
            Err(e) if too_much(&e) && pacer.shrink() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// `add_events` of a long list through [`paced`] batches, the reports
/// merged (positions relative to `events`).
pub async fn add_events_paced(
    store: &dyn crate::MemoryStore,
    scope: &hippocamp_core::MemoryScope,
    session: &hippocamp_core::SessionId,
    events: &[crate::Event],
    pacer: &mut Pacer,
) -> Result<crate::IngestReport> {
    let replies = paced(
        events.len(),
        pacer,
        |e: &hippocamp_core::Error| matches!(e, hippocamp_core::Error::Timeout(_)),
        |range, call| async move {
            store
                .add_events(
                    scope,
                    session,
                    &events[range],
                    &crate::WriteOptions::new(call),
                )
                .await
        },
    )
    .await?;
    let mut report = crate::IngestReport::default();
    for (at, r) in replies {
        let shift = |i: usize| i + at;
        report.added.extend(r.added.into_iter().map(|mut e| {
            e.index = shift(e.index);
            e
        }));
        report
            .duplicates
            .extend(r.duplicates.into_iter().map(|mut e| {
                e.index = shift(e.index);
                e
            }));
        report.skipped.extend(r.skipped.into_iter().map(|mut e| {
            e.index = shift(e.index);
            e
        }));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paced_batches_shrink_after_a_timeout_and_lose_nothing() {
        let items: Vec<u32> = (0..50).collect();
        let mut pacer = Pacer::new(1_000, true);
        let mut calls = Vec::new();
        let out = paced(
            items.len(),
            &mut pacer,
            |e: &&str| *e == "timeout",
            |range, _| {
                let batch = &items[range];
                calls.push(batch.len());
                // A provider that cannot do more than 5 at once in time.
                let r = if batch.len() > 5 {
                    Err("timeout")
                } else {
                    Ok(batch.to_vec())
                };
                async move { r }
            },
        )
        .await
        .unwrap();
        let sent: Vec<u32> = out.into_iter().flat_map(|(_, b)| b).collect();
        assert_eq!(sent, items);
        assert_eq!(&calls[..2], &[16, 4]);
    }

    /// Each text goes only as far as the model's window; calls hold at
    /// most `max_batch_tokens` estimated tokens (and the other bounds),
    /// and every text is sent once, in order.
    #[test]
    fn texts_are_cut_to_the_window_and_batched_by_tokens() {
        let limits = hippocamp_embed::EmbedLimits {
            max_input_tokens: 4,
            max_batch_tokens: 6,
            max_inputs: 3,
            ..hippocamp_embed::EmbedLimits::default()
        };
        assert_eq!(limits.input_window_bytes(), 16);
        let long = "x".repeat(100);
        let texts = [
            long.as_str(),
            long.as_str(),
            "bb",
            "cccccccccccc",
            "d",
            "e",
            "f",
            "g",
        ];
        let calls = batches(&limits, &texts);
        let sent: Vec<String> = calls.iter().flatten().cloned().collect();
        // The long texts cut to 16 bytes (4 tokens); the rest whole.
        assert_eq!(sent[0], "x".repeat(16));
        assert_eq!(sent.len(), texts.len());
        for (got, want) in sent.iter().zip(texts) {
            assert!(want.starts_with(got.as_str()));
        }
        for call in &calls {
            let tokens: usize = call.iter().map(|t| t.len().div_ceil(4)).sum();
            assert!(tokens <= 6 && call.len() <= 3, "{call:?}");
        }
        // 4 | 4 + 1 | 3 + 1 + 1 (three texts) | 1 + 1.
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 2, 3, 2]);
    }

    #[test]
    fn heads_cut_at_character_boundaries() {
        assert_eq!(head("abc", 5), "abc");
        assert_eq!(head("aé", 2), "a");
        assert_eq!(head("aéb", 3), "aé");
    }

    #[test]
    fn the_pacer_fits_batches_to_the_observed_rate() {
        let mut p = Pacer::new(1_000, true);
        assert_eq!(p.batch(), 16);
        // 16 events in 2 s: 8/s, 160 in the 20 s budget, capped at 4x.
        p.done(16, Duration::from_secs(2));
        assert_eq!(p.batch(), 64);
        p.done(64, Duration::from_secs(8));
        assert_eq!(p.batch(), 160);
        assert!(p.shrink());
        assert_eq!(p.batch(), 40);
        let mut one = Pacer::new(1, true);
        assert!(!one.shrink());
        let plain = Pacer::new(1_000, false);
        assert_eq!(plain.batch(), 1_000);
        assert_eq!(plain.call(), CallOptions::default());
    }
}
