//! A deterministic in-process embedder: feature hashing of lowercase
//! words into a fixed number of signed buckets, L2-normalised. Texts that
//! share words get similar vectors, which is all the conformance suite's
//! vector cases need; it knows nothing of meaning, so no quality figure is
//! ever taken from it. It counts the texts it embeds and can be made slow,
//! so tests can show what a store embeds and what a deadline does while a
//! provider works.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Result, Stage};
use sha2::{Digest as _, Sha256};

use crate::{EmbedLimits, Embedder, InputKind, Vector, check_reply, check_request, normalize};

/// The feature-hashing embedder.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dimension: usize,
    model: String,
    limits: EmbedLimits,
    /// Texts embedded so far (shared by clones).
    embedded: Arc<AtomicU64>,
    /// How long each call takes.
    delay: Duration,
}

impl HashEmbedder {
    /// An embedder of `dimension` buckets (named `hash-<dimension>`).
    pub fn new(dimension: usize) -> Self {
        Self {
            dimension: dimension.max(1),
            model: format!("hash-{}", dimension.max(1)),
            limits: EmbedLimits::default(),
            embedded: Arc::new(AtomicU64::new(0)),
            delay: Duration::ZERO,
        }
    }

    /// Each call takes `delay` (as a slow provider would).
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Other bounds.
    #[must_use]
    pub fn with_limits(mut self, limits: EmbedLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Texts embedded so far, by this embedder and its clones.
    pub fn texts_embedded(&self) -> u64 {
        self.embedded.load(Ordering::Relaxed)
    }

    fn one(&self, text: &str) -> Vector {
        let mut v = vec![0f32; self.dimension];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let h = Sha256::digest(word.to_lowercase().as_bytes());
            let bucket = u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
            let i = usize::try_from(bucket % self.dimension as u64).unwrap_or(0);
            v[i] += if h[8] & 1 == 0 { 1.0 } else { -1.0 };
        }
        normalize(&mut v);
        v
    }
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn limits(&self) -> &EmbedLimits {
        &self.limits
    }

    async fn embed(
        &self,
        texts: &[String],
        _kind: InputKind,
        deadline: Deadline,
    ) -> Result<Vec<Vector>> {
        check_request(&self.limits, texts)?;
        deadline.check(Stage::Embedding)?;
        if !self.delay.is_zero() {
            tokio::time::timeout_at(deadline.instant().into(), tokio::time::sleep(self.delay))
                .await
                .map_err(|_| hippocamp_core::Error::Timeout(Stage::Embedding))?;
        }
        self.embedded
            .fetch_add(texts.len() as u64, Ordering::Relaxed);
        let out: Vec<Vector> = texts.iter().map(|t| self.one(t)).collect();
        check_reply(
            "the hash embedder",
            &self.limits,
            &self.model,
            None,
            texts.len(),
            self.dimension,
            &out,
        )?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[tokio::test]
    async fn shared_words_make_similar_unit_vectors() {
        let e = HashEmbedder::new(64);
        let d = Deadline::after(std::time::Duration::from_secs(1));
        let v = e
            .embed(
                &[
                    "the cat sat".into(),
                    "The cat sat!".into(),
                    "stock market news".into(),
                ],
                InputKind::Passage,
                d,
            )
            .await
            .unwrap();
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-5);
        assert!((dot(&v[0], &v[1]) - 1.0).abs() < 1e-5);
        assert!(dot(&v[0], &v[2]) < 0.9);
        assert_eq!(e.model(), "hash-64");
    }
}
