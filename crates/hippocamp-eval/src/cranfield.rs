//! Cranfield: title + abstract indexed in one scope, all 225 queries
//! searched for the top 100, graded nDCG@10 (gain `5 - code`), MAP@100 and
//! MRR, following trec_eval conventions.

use std::collections::HashMap;

use hippocamp_core::{MemoryLimits, MemoryScope};
use hippocamp_datasets::cranfield::Collection;
use hippocamp_memory::{MemoryConfig, NewEntry, SearchRequest, WriteOptions};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::metrics::{average_precision, mean, ndcg_at, reciprocal_rank};
use crate::{EvalError, StoreOpener, progress};

/// The run's figures (`--json` keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CranfieldReport {
    /// The search mode (`lexical`, `vector`, `hybrid`).
    pub mode: String,
    /// The embedder (`model@where`), if any.
    pub embedder: Option<String>,
    /// Graded nDCG@10.
    pub ndcg_at_10: f64,
    /// MAP over the top 100.
    pub map: f64,
    /// MRR over the top 100.
    pub mrr: f64,
    /// Queries with judgements.
    pub queries: usize,
    /// Documents indexed.
    pub documents: usize,
}

/// Hits per query.
pub const TOP_K: u64 = 100;

/// The store configuration: room for 100 hits of abstracts.
pub fn config() -> MemoryConfig {
    MemoryConfig {
        limits: MemoryLimits {
            max_results: TOP_K,
            max_result_bytes: 1_048_576,
            ..MemoryLimits::default()
        },
        ..MemoryConfig::default()
    }
}

/// Runs the evaluation with `config` (see [`config`]) in the store's
/// default mode.
pub async fn run(
    opener: &dyn StoreOpener,
    collection: &Collection,
    config: MemoryConfig,
    show_progress: bool,
) -> Result<CranfieldReport, EvalError> {
    run_in_mode(opener, collection, config, None, show_progress).await
}

/// [`run`] with a search mode.
pub async fn run_in_mode(
    opener: &dyn StoreOpener,
    collection: &Collection,
    config: MemoryConfig,
    mode: Option<hippocamp_memory::SearchMode>,
    show_progress: bool,
) -> Result<CranfieldReport, EvalError> {
    let mode = crate::run_mode(mode, opener);
    let store = opener.open(config, "cranfield").await?;
    let scope = MemoryScope::parse("cranfield", "corpus")?;
    let bar = show_progress.then(|| progress(collection.docs.len() as u64, "index"));
    let mut documents = 0;
    for doc in &collection.docs {
        let content = doc.content();
        if !content.is_empty() {
            store
                .add_entry(
                    &scope,
                    NewEntry::new(content).metadata(
                        json!({"doc": doc.id})
                            .as_object()
                            .cloned()
                            .unwrap_or_default(),
                    ),
                    &WriteOptions::new(crate::call(&*store)),
                )
                .await?;
            documents += 1;
        }
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let (mut ndcg, mut ap, mut rr) = (Vec::new(), Vec::new(), Vec::new());
    for q in &collection.queries {
        let Some(judged) = collection.qrels.get(&q.number) else {
            continue;
        };
        let hits = store
            .search(
                &scope,
                &SearchRequest::new(q.text.clone()).limit(TOP_K).mode(mode),
                &crate::call(&*store),
            )
            .await?
            .hits;
        let ranked: Vec<String> = hits
            .iter()
            .map(|h| {
                h.entry
                    .metadata
                    .get("doc")
                    .map(ToString::to_string)
                    .unwrap_or_default()
            })
            .collect();
        let gains: HashMap<String, f64> = judged
            .iter()
            .map(|(d, g)| (d.to_string(), f64::from(*g)))
            .collect();
        let all: Vec<f64> = gains.values().copied().collect();
        ndcg.push(ndcg_at(
            &ranked,
            |x| gains.get(x).copied().unwrap_or(0.0),
            &all,
            10,
        ));
        ap.push(average_precision(&ranked, &gains));
        rr.push(reciprocal_rank(&ranked, |x| gains.contains_key(x)));
    }
    Ok(CranfieldReport {
        mode: mode.as_str().to_owned(),
        embedder: opener.embedder(),
        ndcg_at_10: mean(ndcg.iter().copied()),
        map: mean(ap.iter().copied()),
        mrr: mean(rr.iter().copied()),
        queries: ndcg.len(),
        documents,
    })
}

impl std::fmt::Display for CranfieldReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cranfield: {} documents, {} judged queries: nDCG@10 {:.3}  MAP@100 {:.3}  MRR {:.3}",
            self.documents, self.queries, self.ndcg_at_10, self.map, self.mrr
        )
    }
}
