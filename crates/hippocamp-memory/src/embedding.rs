//! How stores use an embedder: passages are embedded in batches of the
//! embedder's `max_inputs` before a write commits (so an acknowledged entry
//! always has its vector and search never meets one without), queries
//! when a search needs a vector. Both within the request's deadline.

use std::collections::HashMap;

use hippocamp_core::{Deadline, Result};
use hippocamp_embed::{Embedder, InputKind, Vector};

use crate::event::EventPlan;
use crate::store::{Capabilities, EmbedderInfo, SearchMode};

/// One vector per text, in order (none without an embedder).
pub async fn embed_passages(
    embedder: Option<&dyn Embedder>,
    texts: &[String],
    deadline: Deadline,
) -> Result<Vec<Vector>> {
    let Some(e) = embedder else {
        return Ok(Vec::new());
    };
    let batch = usize::try_from(e.limits().max_inputs).unwrap_or(1).max(1);
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(batch) {
        out.extend(e.embed(chunk, InputKind::Passage, deadline).await?);
    }
    Ok(out)
}

/// The vectors of an event plan's entries, by request position (empty,
/// with nothing copied, without an embedder).
pub async fn embed_plan(
    embedder: Option<&dyn Embedder>,
    plan: &EventPlan,
    deadline: Deadline,
) -> Result<HashMap<usize, Vector>> {
    if embedder.is_none() {
        return Ok(HashMap::new());
    }
    let texts: Vec<String> = plan
        .entries
        .iter()
        .map(|p| p.prepared.entry.content.clone())
        .collect();
    let vectors = embed_passages(embedder, &texts, deadline).await?;
    Ok(plan.entries.iter().map(|p| p.index).zip(vectors).collect())
}

/// The query's vector, when `mode` needs one.
pub async fn embed_query(
    embedder: Option<&dyn Embedder>,
    mode: SearchMode,
    query: &str,
    deadline: Deadline,
) -> Result<Option<Vector>> {
    match (embedder, mode) {
        (Some(e), SearchMode::Vector | SearchMode::Hybrid) => Ok(e
            .embed(&[query.to_owned()], InputKind::Query, deadline)
            .await?
            .pop()),
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
    }
}
