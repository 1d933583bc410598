//! `bench dedupe` and `bench updates`: what consolidation without a model
//! does on generated data (`hippocamp_datasets::facts`).
//!
//! - dedupe: a scope of `count` notes of which `copies` are reworded
//!   copies; pair precision and recall of the merge groups against the
//!   generator's groups, groups that are pure, and the time per 1,000
//!   entries of planning alone and of a whole run through a store (read,
//!   plan, write each fact).
//! - updates: attributes stated and later changed; for each question,
//!   whether the current value ranks above the stale one, for plain notes
//!   (today's ranking), for notes after a dedupe run, and for keyed facts
//!   (a newer entry with the same `fact_key` supersedes).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use hippocamp_core::{CallOptions, FactKey, MemoryScope};
use hippocamp_memory::dedupe::{self, DedupeParams};
use hippocamp_memory::entry::prepare_entry;
use hippocamp_memory::{
    InMemoryStore, MemoryConfig, MemoryEntry, MemoryStore, NewEntry, Provenance, SearchRequest,
    WriteOptions,
};
use hippocamp_services::consolidation::{Consolidations, Mode, StartRun};
use serde::Serialize;

use crate::Result;

/// What `bench dedupe` reports.
#[derive(Debug, Clone, Serialize)]
pub struct DedupeBench {
    /// Entries in the scope.
    pub entries: usize,
    /// Of which reworded copies.
    pub copies: usize,
    /// The similarity threshold (fixed in `DedupeParams::default`).
    pub min_jaccard: f64,
    /// Merge groups found.
    pub groups: usize,
    /// Pairs merged that are copies of each other / pairs merged.
    pub pair_precision: f64,
    /// Pairs of copies merged / pairs of copies.
    pub pair_recall: f64,
    /// Groups whose members are all one fact / groups.
    pub pure_groups: f64,
    /// Planning alone, per 1,000 entries (ms).
    pub plan_ms_per_1000: f64,
    /// A whole run through an in-memory store (read, plan, write the
    /// facts), per 1,000 entries (ms).
    pub run_ms_per_1000: f64,
}

fn note(scope: &MemoryScope, text: &str, at_ms: u64) -> Result<MemoryEntry> {
    let p = Provenance {
        timestamp_ms: Some(at_ms),
        ..Provenance::default()
    };
    Ok(prepare_entry(
        scope,
        NewEntry::new(text).provenance(p),
        &hippocamp_core::MemoryLimits::default(),
    )?
    .entry)
}

/// Pairs of members that share a group, counted from group sizes.
fn pairs(n: usize) -> usize {
    n * n.saturating_sub(1) / 2
}

/// Runs `bench dedupe`.
pub async fn dedupe(count: usize, copies: usize) -> Result<DedupeBench> {
    let facts = hippocamp_datasets::facts::with_copies(count, copies);
    let scope = MemoryScope::parse("bench", "dedupe")?;
    let entries: Vec<Arc<MemoryEntry>> = facts
        .iter()
        .map(|f| note(&scope, &f.text, f.at_ms).map(Arc::new))
        .collect::<Result<_>>()?;
    let truth: HashMap<_, usize> = entries
        .iter()
        .zip(&facts)
        .map(|(e, f)| (e.id, f.group))
        .collect();
    let params = DedupeParams::default();
    let started = Instant::now();
    let groups = dedupe::plan(&entries, &params);
    let plan_ms = started.elapsed().as_secs_f64() * 1e3;
    let (mut merged, mut right, mut pure) = (0usize, 0usize, 0usize);
    for g in &groups {
        let mut by_truth: HashMap<usize, usize> = HashMap::new();
        for m in &g.members {
            *by_truth.entry(truth[&m.id]).or_default() += 1;
        }
        merged += pairs(g.members.len());
        right += by_truth.values().map(|&n| pairs(n)).sum::<usize>();
        pure += usize::from(by_truth.len() == 1);
    }
    let mut sizes: HashMap<usize, usize> = HashMap::new();
    for f in &facts {
        *sizes.entry(f.group).or_default() += 1;
    }
    let copy_pairs: usize = sizes.values().map(|&n| pairs(n)).sum();
    let run_ms = whole_run(&facts).await?;
    let ratio = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
    Ok(DedupeBench {
        entries: count,
        copies,
        min_jaccard: params.min_jaccard,
        groups: groups.len(),
        pair_precision: ratio(right, merged),
        pair_recall: ratio(right, copy_pairs),
        pure_groups: ratio(pure, groups.len()),
        plan_ms_per_1000: plan_ms * 1_000.0 / count.max(1) as f64,
        run_ms_per_1000: run_ms * 1_000.0 / count.max(1) as f64,
    })
}

fn store() -> Result<Arc<dyn MemoryStore>> {
    Ok(Arc::new(InMemoryStore::new(MemoryConfig::default())?))
}

async fn add_all(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    items: impl IntoIterator<Item = NewEntry>,
) -> Result<()> {
    for e in items {
        store.add_entry(scope, e, &WriteOptions::default()).await?;
    }
    Ok(())
}

fn at(ms: u64) -> Provenance {
    Provenance {
        timestamp_ms: Some(ms),
        ..Provenance::default()
    }
}

/// A dedupe run (auto) over the generated scope in a fresh store: ms.
async fn whole_run(facts: &[hippocamp_datasets::facts::Fact]) -> Result<f64> {
    let store = store()?;
    let scope = MemoryScope::parse("bench", "dedupe-run")?;
    add_all(
        &*store,
        &scope,
        facts
            .iter()
            .map(|f| NewEntry::new(f.text.clone()).provenance(at(f.at_ms))),
    )
    .await?;
    let runs = Consolidations::new(hippocamp_services::consolidation::ConsolidationLimits {
        max_entries_read: 1_000_000,
        ..Default::default()
    });
    let req = dedupe_request();
    let call = CallOptions::timeout(std::time::Duration::from_mins(1))?;
    let started = Instant::now();
    let run = runs.start(&*store, &scope, &req, &call).await?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    if let Some(e) = run.error {
        return Err(crate::failed(format!("the run failed: {}", e.message)));
    }
    Ok(ms)
}

fn dedupe_request() -> StartRun {
    StartRun {
        mode: Mode::Dedupe,
        apply: hippocamp_services::consolidation::ApplyMode::Auto,
        origins: Vec::new(),
    }
}

/// What `bench updates` reports: the share of questions whose current
/// value ranks above the stale one (a stale value not returned counts as
/// ranked below; a current one not returned as not above).
#[derive(Debug, Clone, Serialize)]
pub struct UpdatesBench {
    /// Questions (one per changed attribute).
    pub questions: usize,
    /// Plain notes, as search ranks them today.
    pub notes_today: f64,
    /// The same notes after a dedupe run.
    pub notes_after_dedupe: f64,
    /// Keyed facts (`fact_key`): the newer supersedes the older.
    pub keyed_facts: f64,
    /// Keyed facts, asked with `include_superseded` (both returned, the
    /// ranking alone decides): what the key adds over ranking.
    pub keyed_with_superseded: f64,
}

/// Runs `bench updates` with `count` attributes (at most 48).
pub async fn updates(count: usize) -> Result<UpdatesBench> {
    let u = hippocamp_datasets::facts::updates(count.min(48));
    let t0 = 1_700_000_000_000u64;
    let mut shares = Vec::new();
    for (keyed, dedupe, superseded) in [
        (false, false, false),
        (false, true, false),
        (true, false, false),
        (true, false, true),
    ] {
        let store = store()?;
        let scope = MemoryScope::parse("bench", "updates")?;
        // Every old statement first, then every new one (months later).
        let key = |k: &str| FactKey::new(k);
        let mut items = Vec::new();
        for (i, x) in u.iter().enumerate() {
            let mut e = NewEntry::new(x.old.clone()).provenance(at(t0 + i as u64));
            if keyed {
                e = e.fact_key(key(&x.key)?);
            }
            items.push(e);
        }
        for (i, x) in u.iter().enumerate() {
            let mut e = NewEntry::new(x.new.clone()).provenance(at(t0 + 10_000_000 + i as u64));
            if keyed {
                e = e.fact_key(key(&x.key)?);
            }
            items.push(e);
        }
        add_all(&*store, &scope, items).await?;
        if dedupe {
            let runs = Consolidations::default();
            runs.start(&*store, &scope, &dedupe_request(), &CallOptions::default())
                .await?;
        }
        let mut above = 0usize;
        for x in &u {
            let mut req = SearchRequest::new(x.question.clone()).limit(10);
            req.include_superseded = superseded;
            let hits = store
                .search(&scope, &req, &CallOptions::default())
                .await?
                .hits;
            let rank = |text: &str| hits.iter().position(|h| h.entry.content == text);
            let new = hits
                .iter()
                .position(|h| h.entry.content.contains(&x.new_value) && h.entry.content == x.new);
            above += usize::from(match (new, rank(&x.old)) {
                (Some(n), Some(o)) => n < o,
                (Some(_), None) => true,
                (None, _) => false,
            });
        }
        shares.push(above as f64 / u.len().max(1) as f64);
    }
    Ok(UpdatesBench {
        questions: u.len(),
        notes_today: shares[0],
        notes_after_dedupe: shares[1],
        keyed_facts: shares[2],
        keyed_with_superseded: shares[3],
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_benches_run_and_report_shares() {
        let d = super::dedupe(400, 80).await.unwrap();
        assert_eq!((d.entries, d.copies), (400, 80));
        assert!(d.groups > 0 && d.groups <= 80);
        for share in [d.pair_precision, d.pair_recall, d.pure_groups] {
            assert!((0.0..=1.0).contains(&share), "{d:?}");
        }
        let u = super::updates(12).await.unwrap();
        assert_eq!(u.questions, 12);
        // A newer keyed fact supersedes the older: the stale value is
        // never returned, so the current one always ranks above it.
        assert!((u.keyed_facts - 1.0).abs() < f64::EPSILON, "{u:?}");
    }
}

/// What `bench extract` reports: one extract run over `turns` LoCoMo
/// turns with a real model.
#[derive(Debug, Clone, Serialize)]
pub struct ExtractBench {
    /// The model.
    pub model: String,
    /// Turns in the scope.
    pub turns: usize,
    /// How the run ended (`applied` or `failed`).
    pub state: String,
    /// The error's code, when it failed.
    pub error: Option<String>,
    /// What the error says (what the reply got wrong).
    pub error_message: Option<String>,
    /// Model calls made.
    pub model_calls: u64,
    /// Prompt and generated tokens the provider reported (a reply that
    /// failed to parse reports none).
    pub input_tokens: u64,
    /// See `input_tokens`.
    pub output_tokens: u64,
    /// Turns shown to the model.
    pub turns_read: u64,
    /// Facts written.
    pub facts: usize,
    /// The run's wall time, seconds.
    pub seconds: f64,
}

/// Runs `bench extract`: `turns` LoCoMo turns ingested as one session,
/// then one extract run asking `model`.
pub async fn extract(
    model: hippocamp_models::ModelConfig,
    turns: usize,
    limits: hippocamp_services::consolidation::extract::ExtractLimits,
) -> Result<ExtractBench> {
    let dir = hippocamp_datasets::data_dir().ok_or(crate::BenchError::NoData)?;
    let texts = hippocamp_datasets::corpus::texts(&dir, turns)?;
    let store = store()?;
    let scope = MemoryScope::parse("bench", "extract")?;
    let session = hippocamp_core::SessionId::new("s1")?;
    let events: Vec<hippocamp_memory::Event> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let at = i64::try_from(i).unwrap_or(i64::MAX) * 1_000;
            hippocamp_memory::Event::text(format!("e{i}"), "user", at, t.clone())
        })
        .collect();
    for chunk in events.chunks(100) {
        store
            .add_events(&scope, &session, chunk, &WriteOptions::default())
            .await?;
    }
    let name = model.model.clone();
    let runs = Consolidations::default().with_model(hippocamp_models::connect(model)?, limits);
    let req = StartRun {
        mode: Mode::Extract,
        apply: hippocamp_services::consolidation::ApplyMode::Auto,
        origins: Vec::new(),
    };
    let call = CallOptions::timeout(std::time::Duration::from_mins(1))?;
    let started = Instant::now();
    let run = runs.start(&*store, &scope, &req, &call).await?;
    Ok(ExtractBench {
        model: name,
        turns: texts.len(),
        state: format!("{:?}", run.state).to_lowercase(),
        error: run.error.as_ref().map(|e| e.code.clone()),
        error_message: run.error.map(|e| e.message),
        model_calls: run.model_calls,
        input_tokens: run.input_tokens,
        output_tokens: run.output_tokens,
        turns_read: run.turns_read,
        facts: run.changes.iter().filter(|c| c.fact.is_some()).count(),
        seconds: started.elapsed().as_secs_f64(),
    })
}
