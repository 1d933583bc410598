//! Rerankers: score a query against a few candidate texts, larger is more
//! relevant.
//!
//! A [`Reranker`] answers one relevance score per document, in order, or
//! an error; it never reorders or drops documents, so the caller owns what
//! a score means for its list. Every call is bounded by [`RerankLimits`]
//! (documents per call, bytes read of each, a deadline) and every reply
//! is checked by [`check_scores`] before anything uses it.
//!
//! - [`EmbeddingReranker`]: any [`Embedder`] used as a bi-encoder (the
//!   cosine of the query's and each document's vectors). No registry
//!   package ships cross-encoder weights that load here, so the local
//!   scorer is a sentence-transformer such as all-MiniLM-L6-v2; it reads
//!   query and document apart, which a cross-encoder would not.
//! - `http_rerank::HttpReranker` (feature `http`): a `/rerank` endpoint in
//!   the shape llama.cpp's server, Jina, Cohere and vLLM serve, or the
//!   one text-embeddings-inference serves.

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Field, Problem, Result};

use crate::{Embedder, InputKind, head};

hippocamp_core::limit_table! {
    /// Bounds of the reranking stage.
    pub struct RerankLimits, prefix "rerank." {
        /// Candidates reranked per search (the first stage's best).
        candidates: default 20, min 1, max 100,
            "best first-stage hits a search reranks; the rest keep their order below them";
        /// Deadline of the stage, milliseconds.
        timeout_ms: default 500, min 1, max 60_000,
            "deadline in milliseconds of the reranking stage; a search whose reranker misses it keeps the first stage's order";
        /// Bytes of one document sent to the reranker.
        max_document_bytes: default 2_048, min 1, max 65_536,
            "bytes of one hit's content sent to the reranker (its head)";
    }
}

impl RerankLimits {
    /// Checks every range.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// Scores documents against a query.
#[async_trait]
pub trait Reranker: Send + Sync + std::fmt::Debug {
    /// The scoring model's name.
    fn model(&self) -> &str;
    /// One score per document, in order, larger is more relevant; within
    /// `deadline`, checked by [`check_scores`].
    async fn score(&self, query: &str, documents: &[&str], deadline: Deadline) -> Result<Vec<f32>>;
}

/// Checks a reply: one finite score per document.
pub fn check_scores(service: &'static str, documents: usize, scores: &[f32]) -> Result<()> {
    let bad = |detail: String| Error::InvalidReply { service, detail };
    if scores.len() != documents {
        return Err(bad(format!(
            "{} scores for {documents} documents",
            scores.len()
        )));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(bad(format!("score {i} is not a finite number")));
    }
    Ok(())
}

/// Checks a request before anything is sent: a query and 1 ..= `max`
/// documents.
pub fn check_documents(query: &str, documents: &[&str], max: usize) -> Result<()> {
    if query.is_empty() {
        return Err(Error::invalid(Field::Query, Problem::Empty));
    }
    if documents.is_empty() {
        return Err(Error::invalid(Field::Content, Problem::Empty));
    }
    if documents.len() > max {
        return Err(Error::invalid(
            Field::Content,
            Problem::TooMany {
                count: documents.len(),
                max,
            },
        ));
    }
    Ok(())
}

const SERVICE: &str = "the reranking embedder";

/// An embedder as a bi-encoder reranker: a document's score is the cosine
/// of its vector and the query's.
#[derive(Debug, Clone)]
pub struct EmbeddingReranker {
    embedder: Arc<dyn Embedder>,
}

impl EmbeddingReranker {
    /// Reranks with `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self { embedder }
    }
}

#[async_trait]
impl Reranker for EmbeddingReranker {
    fn model(&self) -> &str {
        self.embedder.model()
    }

    async fn score(&self, query: &str, documents: &[&str], deadline: Deadline) -> Result<Vec<f32>> {
        let limits = self.embedder.limits();
        let max_inputs = usize::try_from(limits.max_inputs).unwrap_or(1).max(1);
        check_documents(query, documents, usize::MAX)?;
        let window = usize::try_from(limits.input_window_bytes()).unwrap_or(usize::MAX);
        let max_total = usize::try_from(limits.max_total_bytes).unwrap_or(usize::MAX);
        let q = self
            .embedder
            .embed(
                &[head(query, window).to_owned()],
                InputKind::Query,
                deadline,
            )
            .await?
            .pop()
            .ok_or_else(|| Error::InvalidReply {
                service: SERVICE,
                detail: "no vector for the query".into(),
            })?;
        // Each call within the embedder's count and byte bounds.
        let per_text = window.min(max_total / max_inputs.max(1)).max(1);
        let mut scores = Vec::with_capacity(documents.len());
        for chunk in documents.chunks(max_inputs) {
            let texts: Vec<String> = chunk.iter().map(|d| head(d, per_text).to_owned()).collect();
            for v in self
                .embedder
                .embed(&texts, InputKind::Passage, deadline)
                .await?
            {
                scores.push(q.iter().zip(&v).map(|(a, b)| a * b).sum::<f32>());
            }
        }
        check_scores(SERVICE, documents.len(), &scores)?;
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::hash::HashEmbedder;

    #[tokio::test]
    async fn a_bi_encoder_scores_shared_words_higher_and_keeps_the_order() {
        let r = EmbeddingReranker::new(Arc::new(HashEmbedder::new(64)));
        let docs = ["the cat sat", "stock prices fell", "a cat and a dog"];
        let s = r
            .score(
                "where is the cat",
                &docs,
                Deadline::after(std::time::Duration::from_secs(5)),
            )
            .await
            .unwrap();
        assert_eq!(s.len(), 3);
        assert!(s[0] > s[1] && s[2] > s[1], "{s:?}");
        assert_eq!(r.model(), "hash-64");
    }

    #[test]
    fn requests_and_replies_are_checked() {
        assert!(check_documents("q", &["a"], 1).is_ok());
        assert_eq!(
            check_documents("", &["a"], 1).unwrap_err().code(),
            "invalid_argument"
        );
        assert!(check_documents("q", &[], 1).is_err());
        assert!(check_documents("q", &["a", "b"], 1).is_err());
        assert!(check_scores("t", 2, &[0.1, 0.2]).is_ok());
        assert_eq!(
            check_scores("t", 2, &[0.1]).unwrap_err().code(),
            "invalid_reply"
        );
        assert!(check_scores("t", 1, &[f32::NAN]).is_err());
        assert_eq!(crate::head("héllo", 2), "h");
        assert!(RerankLimits::default().validate().is_ok());
        assert!(
            RerankLimits {
                candidates: 101,
                ..RerankLimits::default()
            }
            .validate()
            .is_err()
        );
    }
}
