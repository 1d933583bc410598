//! Retrieval evaluation against any [`MemoryStore`].
//!
//! - [`locomo`]: one scope per conversation, all conversations in one
//!   store, every question searched verbatim; recall, MRR, nDCG, per
//!   category, an isolation check, ingest rate and search latency.
//! - [`cranfield`]: the classic BM25 sanity check: graded nDCG@10, MAP@100
//!   and MRR.
//! - [`compare`]: two LoCoMo runs paired by question, with a bootstrap
//!   interval of the difference.
//! - [`secrets`]: how often the secret rules fire on source files wrapped
//!   as turns (their false-positive rate on code).
//!
//! The protocol is `../shared/reference/evaluation.md`; metric definitions
//! are in [`metrics`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_memory::{MemoryConfig, MemoryStore, SearchMode};

pub mod compare;
pub mod cranfield;
pub mod locomo;
pub mod metrics;
pub mod secrets;

/// An evaluation failed.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The data could not be read.
    #[error(transparent)]
    Dataset(#[from] hippocamp_datasets::DatasetError),
    /// A store operation failed.
    #[error("store: {0}")]
    Store(#[from] hippocamp_core::Error),
    /// Two runs to compare did not ask the same questions.
    #[error("the runs cannot be paired: {0}")]
    Mismatch(String),
    /// Files to scan could not be read.
    #[error("cannot read {0}")]
    Io(String),
}

/// Opens empty stores for an evaluation run.
#[async_trait]
pub trait StoreOpener: Send + Sync {
    /// A new, empty store with `config`; `label` names its purpose (e.g. a
    /// conversation id for an isolation store) for backends that need a
    /// location.
    async fn open(
        &self,
        config: MemoryConfig,
        label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error>;

    /// The embedder its stores use (`model@where`), if any.
    fn embedder(&self) -> Option<String> {
        None
    }
}

/// The deadline of an evaluation's store calls: the longest a call may
/// have when the store embeds (a loaded machine's provider is slow, and a
/// run must not fail on it), the store's default otherwise.
pub fn call(store: &dyn MemoryStore) -> hippocamp_core::CallOptions {
    hippocamp_memory::embedding::Pacer::for_store(&store.capabilities()).call()
}

/// The mode a run's searches use: the one asked for, or the store's
/// default (hybrid with an embedder, lexical without).
pub fn run_mode(requested: Option<SearchMode>, opener: &dyn StoreOpener) -> SearchMode {
    requested.unwrap_or(if opener.embedder().is_some() {
        SearchMode::Hybrid
    } else {
        SearchMode::Lexical
    })
}

/// Opens in-memory stores that embed with one embedder.
#[derive(Debug, Clone)]
pub struct EmbeddingOpener {
    /// The embedder.
    pub embedder: Arc<dyn hippocamp_embed::Embedder>,
    /// How to name it in reports.
    pub label: String,
}

#[async_trait]
impl StoreOpener for EmbeddingOpener {
    async fn open(
        &self,
        config: MemoryConfig,
        _label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error> {
        Ok(Arc::new(
            hippocamp_memory::InMemoryStore::new(config)?.with_embedder(Arc::clone(&self.embedder)),
        ))
    }

    fn embedder(&self) -> Option<String> {
        Some(self.label.clone())
    }
}

/// Opens in-memory stores.
#[derive(Debug, Clone, Copy, Default)]
pub struct InMemoryOpener;

#[async_trait]
impl StoreOpener for InMemoryOpener {
    async fn open(
        &self,
        config: MemoryConfig,
        _label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error> {
        Ok(Arc::new(hippocamp_memory::InMemoryStore::new(config)?))
    }
}

pub(crate) fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(
        "{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})",
    )
    .map_or_else(
        |_| indicatif::ProgressStyle::default_bar(),
        |s| s.progress_chars("=> "),
    );
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}
