//! LoCoMo turn-level retrieval.
//!
//! 1. One scope per conversation (app `locomo`, user = sample id), all in
//!    one store. Each session is a session (`<sample>-s<n>`), each turn an
//!    event with content `"<speaker>: <text>"` (plus the image caption),
//!    metadata `dia_id`, `session`, `session_date_time`, `speaker`, ingested
//!    session by session in order.
//! 2. Every question with usable evidence searches its scope verbatim, top
//!    50 (with `long_queries`, as a paragraph: see [`query_text`]). R@k is
//!    the share of its evidence turns in the top k; hit@k is 1 when any
//!    evidence turn is in the top k (what retrieval-only peers publish);
//!    session hit@k is 1 when any of the top k comes from a session that
//!    holds evidence; MRR uses the first evidence turn; nDCG@10 has binary
//!    gains. The headline averages categories 1-4; category 5
//!    (adversarial) is reported on its own.
//! 3. Isolation: every hit must belong to the searched scope, and each
//!    conversation's result lists must equal those of a store holding that
//!    conversation alone.
//! 4. Ingest events/s over the whole ingestion, and search latency
//!    percentiles over a timed pass that follows a warm-up pass.

use std::collections::BTreeMap;
use std::time::Instant;

use hippocamp_core::{EntryId, MemoryScope, SessionId};
use hippocamp_datasets::locomo::{Sample, Session};
use hippocamp_memory::event::{Content, Event, Part};
use hippocamp_memory::{MemoryConfig, MemoryStore, SearchRequest, items};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::metrics::{hit_at, mean, ndcg_at, percentile, recall_at, reciprocal_rank};
use crate::{EvalError, StoreOpener, progress};

/// How to run.
#[derive(Debug, Clone)]
pub struct LocomoOptions {
    /// Store configuration.
    pub config: MemoryConfig,
    /// Hits per question (50).
    pub top_k: u64,
    /// Whether to run the per-conversation isolation comparison.
    pub isolation_check: bool,
    /// Whether to draw progress bars.
    pub progress: bool,
    /// The search mode (default: the store's).
    pub mode: Option<hippocamp_memory::SearchMode>,
    /// Search with paragraph-length queries ([`query_text`]).
    pub long_queries: bool,
    /// Pass each conversation's last session date as the searches'
    /// reference time (the protocol; off: the store's now, as a client
    /// without the field, such as ADK's memory service, searches).
    pub reference_time: bool,
    /// Ingest each turn as a keyed item (`hippocamp_memory::items`: a
    /// note with the turn's text, namespace `("locomo", session)`, key its
    /// dia_id) and ask through the items' search: what a client on keyed
    /// items (the LangGraph store) does. No reference time (items search
    /// has none).
    pub as_items: bool,
}

impl Default for LocomoOptions {
    fn default() -> Self {
        Self {
            config: MemoryConfig::default(),
            top_k: 50,
            isolation_check: true,
            progress: true,
            mode: None,
            long_queries: false,
            reference_time: true,
            as_items: false,
        }
    }
}

/// hit@k (any evidence turn in the top k) and session hit@k (a top-k hit
/// from a session that holds evidence), k = 1, 5, 10, 20.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hits {
    /// hit@1.
    pub hit_at_1: f64,
    /// hit@5.
    pub hit_at_5: f64,
    /// hit@10.
    pub hit_at_10: f64,
    /// hit@20.
    pub hit_at_20: f64,
    /// Session hit@1.
    pub session_hit_at_1: f64,
    /// Session hit@5.
    pub session_hit_at_5: f64,
    /// Session hit@10.
    pub session_hit_at_10: f64,
    /// Session hit@20.
    pub session_hit_at_20: f64,
}

impl Hits {
    /// The means of the hit columns of `rows`.
    fn of(rows: &[&Row]) -> Self {
        let col = |i: usize| column(rows, i);
        Self {
            hit_at_1: col(HIT),
            hit_at_5: col(HIT + 1),
            hit_at_10: col(HIT + 2),
            hit_at_20: col(HIT + 3),
            session_hit_at_1: col(SESSION_HIT),
            session_hit_at_5: col(SESSION_HIT + 1),
            session_hit_at_10: col(SESSION_HIT + 2),
            session_hit_at_20: col(SESSION_HIT + 3),
        }
    }
}

/// Figures of one category.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CategoryReport {
    /// Questions.
    pub questions: usize,
    /// Mean R@10.
    pub recall_at_10: f64,
    /// Mean reciprocal rank.
    pub mrr: f64,
    /// hit@k and session hit@k.
    #[serde(flatten)]
    pub hits: Hits,
}

/// What one question retrieved (one line of `--per-question`; two runs'
/// lines pair by `index`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionResult {
    /// Position among every question of the run.
    pub index: usize,
    /// Conversation.
    pub sample_id: String,
    /// Category 1..=5.
    pub category: u8,
    /// R@10.
    pub recall_at_10: f64,
    /// Reciprocal rank.
    pub rr: f64,
    /// hit@10.
    pub hit_at_10: f64,
    /// Session hit@10.
    pub session_hit_at_10: f64,
}

/// The run's figures. The first keys are a stable interface (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocomoReport {
    /// The search mode (`lexical`, `vector`, `hybrid`).
    pub mode: String,
    /// The embedder (`model@where`), if any.
    pub embedder: Option<String>,
    /// R@1, categories 1-4.
    pub recall_at_1: f64,
    /// R@5, categories 1-4.
    pub recall_at_5: f64,
    /// R@10, categories 1-4.
    pub recall_at_10: f64,
    /// R@20, categories 1-4.
    pub recall_at_20: f64,
    /// R@50, categories 1-4.
    pub recall_at_50: f64,
    /// MRR, categories 1-4.
    pub mrr: f64,
    /// nDCG@10 (binary gains), categories 1-4.
    pub ndcg_at_10: f64,
    /// hit@k and session hit@k, categories 1-4.
    #[serde(flatten)]
    pub hits: Hits,
    /// Per category `"1"`..`"5"`.
    pub per_category: BTreeMap<String, CategoryReport>,
    /// Whether every conversation's results equal those of a store holding
    /// it alone; `None` when the check was not run (`--no-isolation`).
    pub isolation_equal: Option<bool>,
    /// Hits whose entry belongs to another scope (must be 0).
    pub foreign_scope_hits: u64,
    /// Events ingested per second.
    pub ingest_events_per_s: f64,
    /// Search latency percentiles, microseconds.
    pub search_p50_us: f64,
    /// 95th percentile.
    pub search_p95_us: f64,
    /// 99th percentile.
    pub search_p99_us: f64,
    /// Questions in categories 1-4.
    pub questions: usize,
    /// Questions of every category.
    pub questions_all: usize,
    /// Conversations.
    pub conversations: usize,
    /// Events offered.
    pub events: usize,
    /// Events skipped by ingestion (e.g. secret-looking text).
    pub skipped_events: usize,
    /// Per-question figures, for paired comparisons (not in `--json`).
    #[serde(skip)]
    pub per_question: Vec<QuestionResult>,
}

/// The events of one session.
pub fn session_events(session: &Session) -> Vec<Event> {
    let start = session.start_ms.unwrap_or(0);
    session
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| Event {
            id: t.dia_id.clone(),
            author: t.speaker.clone(),
            timestamp_ms: start + i64::try_from(i).unwrap_or(0) * 1_000,
            partial: false,
            content: Some(Content {
                role: Some("user".to_owned()),
                parts: vec![Part::text(t.memory_text())],
            }),
            metadata: json!({
                "dia_id": t.dia_id,
                "session": session.number,
                "session_date_time": session.date_time,
                "speaker": t.speaker,
            })
            .as_object()
            .cloned(),
        })
        .collect()
}

/// The query a question searches with: the question verbatim, or with
/// `long`, a paragraph as an agent's runner would pass (a whole user
/// message): the text of the turn that precedes the question's first
/// evidence turn in its session, then the question. The context is the
/// conversation's own (so it shares words with the evidence as a real
/// message would); a question whose evidence opens a session keeps its
/// text alone.
pub fn query_text(sample: &Sample, q: &hippocamp_datasets::locomo::Question, long: bool) -> String {
    let before = q.evidence.first().and_then(|first| {
        sample.sessions.iter().find_map(|s| {
            let pos = s.turns.iter().position(|t| &t.dia_id == first)?;
            pos.checked_sub(1).map(|p| s.turns[p].text.as_str())
        })
    });
    match before {
        Some(b) if long => format!("{b} {}", q.text),
        _ => q.text.clone(),
    }
}

/// The conversations exactly as [`run`] ingests and asks them: per
/// sample its scope's user, each session's id and events (the JSON
/// `add_events` takes), and the questions with their evidence. Other
/// clients (the ADK services) replay it to compare with the eval.
pub fn export(samples: &[Sample]) -> serde_json::Value {
    let out: Vec<serde_json::Value> = samples
        .iter()
        .map(|s| {
            let sessions: Vec<serde_json::Value> = s
                .sessions
                .iter()
                .map(|x| json!({"id": format!("{}-s{}", s.sample_id, x.number), "events": session_events(x)}))
                .collect();
            let questions: Vec<serde_json::Value> = s
                .questions
                .iter()
                .map(|q| json!({"text": q.text, "category": q.category, "evidence": q.evidence}))
                .collect();
            json!({"app": "locomo", "user": s.sample_id, "sessions": sessions, "questions": questions})
        })
        .collect();
    json!({"samples": out})
}

fn scope_of(sample: &Sample) -> Result<MemoryScope, EvalError> {
    Ok(MemoryScope::parse("locomo", &sample.sample_id)?)
}

/// A turn as a keyed item: its text (indexed) and its dia_id, under
/// namespace `("locomo", session id)` and key dia_id (what the LangGraph
/// replay puts).
fn turn_item(event: &Event) -> items::PutItem {
    let text = event
        .content
        .as_ref()
        .and_then(|c| c.parts.first())
        .and_then(|p| p.text.clone())
        .unwrap_or_default();
    let mut value = serde_json::Map::new();
    value.insert("text".into(), text.into());
    value.insert("dia_id".into(), event.id.clone().into());
    items::PutItem {
        value,
        index: Some(items::Index::Fields(vec!["text".into()])),
        ttl_ms: None,
    }
}

/// Ingests conversations as keyed items; returns (turns offered, 0).
async fn ingest_items(
    store: &dyn MemoryStore,
    samples: &[Sample],
    bar: Option<&indicatif::ProgressBar>,
) -> Result<(usize, usize), EvalError> {
    let mut turns = 0;
    for sample in samples {
        let scope = scope_of(sample)?;
        for session in &sample.sessions {
            let ns = items::Namespace::new(vec![
                "locomo".into(),
                format!("{}-s{}", sample.sample_id, session.number),
            ])?;
            for e in session_events(session) {
                items::put(
                    store,
                    &scope,
                    &ns,
                    &e.id,
                    &turn_item(&e),
                    &crate::call(store),
                )
                .await?;
                turns += 1;
                if let Some(b) = bar {
                    b.inc(1);
                }
            }
        }
    }
    Ok((turns, 0))
}

/// Ingests conversations; returns (events offered, events skipped).
pub async fn ingest(
    store: &dyn MemoryStore,
    samples: &[Sample],
    bar: Option<&indicatif::ProgressBar>,
) -> Result<(usize, usize), EvalError> {
    let (mut events, mut skipped) = (0, 0);
    // With an embedder, batches fit the provider's pace on this machine.
    let mut pacer = hippocamp_memory::embedding::Pacer::for_store(&store.capabilities());
    for sample in samples {
        let scope = scope_of(sample)?;
        for session in &sample.sessions {
            let evs = session_events(session);
            let sid = SessionId::new(format!("{}-s{}", sample.sample_id, session.number))?;
            let report = hippocamp_memory::embedding::add_events_paced(
                store, &scope, &sid, &evs, &mut pacer,
            )
            .await?;
            events += evs.len();
            skipped += report.skipped.len();
            if let Some(b) = bar {
                b.inc(evs.len() as u64);
            }
        }
    }
    Ok((events, skipped))
}

type Ranking = Vec<(EntryId, f64, String, MemoryScope)>;

/// The moment a conversation's questions are asked: its last session's
/// date (the protocol's reference time for "last week" and the like).
fn reference_of(sample: &Sample, opts: &LocomoOptions) -> Option<u64> {
    if !opts.reference_time {
        return None;
    }
    sample
        .sessions
        .iter()
        .filter_map(|s| s.start_ms)
        .max()
        .and_then(|ms| u64::try_from(ms).ok())
}

/// Searches `question` of `sample` in `scope` as the run's options say
/// (hits, reference time).
async fn search(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    sample: &Sample,
    question: &str,
    opts: &LocomoOptions,
    mode: hippocamp_memory::SearchMode,
) -> Result<Ranking, EvalError> {
    if opts.as_items {
        let req = items::SearchItems {
            namespace_prefix: vec!["locomo".into()],
            query: Some(question.to_owned()),
            limit: Some(opts.top_k),
            ..items::SearchItems::default()
        };
        let page = items::search(store, scope, &req, &crate::call(store)).await?;
        return Ok(page
            .items
            .into_iter()
            .map(|i| {
                let dia = i
                    .value
                    .get("dia_id")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned();
                (i.id, i.score.unwrap_or(0.0), dia, scope.clone())
            })
            .collect());
    }
    let mut req = SearchRequest::new(question).limit(opts.top_k).mode(mode);
    req.reference_time_ms = reference_of(sample, opts);
    let res = store.search(scope, &req, &crate::call(store)).await?;
    Ok(res
        .hits
        .into_iter()
        .map(|h| {
            let dia = h
                .entry
                .metadata
                .get("dia_id")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned();
            (h.entry.id, h.score, dia, h.entry.scope.clone())
        })
        .collect())
}

/// Runs the evaluation.
pub async fn run(
    opener: &dyn StoreOpener,
    samples: &[Sample],
    opts: &LocomoOptions,
) -> Result<LocomoReport, EvalError> {
    let store = opener.open(opts.config.clone(), "locomo").await?;
    let mode = crate::run_mode(opts.mode, opener);
    let total_turns: usize = samples
        .iter()
        .flat_map(|s| s.sessions.iter().map(|x| x.turns.len()))
        .sum();
    let bar = opts
        .progress
        .then(|| progress(total_turns as u64, "ingest"));
    let started = Instant::now();
    if opts.as_items && opts.reference_time {
        return Err(EvalError::Store(hippocamp_core::Error::invalid(
            hippocamp_core::Field::Query,
            hippocamp_core::Problem::Relation(
                "--as-items asks through the items' search, which has no reference time: add --no-reference-time",
            ),
        )));
    }
    let (events, skipped_events) = if opts.as_items {
        ingest_items(&*store, samples, bar.as_ref()).await?
    } else {
        ingest(&*store, samples, bar.as_ref()).await?
    };
    let ingest_secs = started.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }

    let all: Vec<(&Sample, &hippocamp_datasets::locomo::Question)> = samples
        .iter()
        .flat_map(|s| s.questions.iter().map(move |q| (s, q)))
        .collect();
    // Warm-up pass, then the timed pass whose results are scored.
    let bar = opts
        .progress
        .then(|| progress(2 * all.len() as u64, "search"));
    for (s, q) in &all {
        let text = query_text(s, q, opts.long_queries);
        search(&*store, &scope_of(s)?, s, &text, opts, mode).await?;
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    let mut latencies = Vec::with_capacity(all.len());
    let mut rankings: Vec<Ranking> = Vec::with_capacity(all.len());
    for (s, q) in &all {
        let scope = scope_of(s)?;
        let t = Instant::now();
        let text = query_text(s, q, opts.long_queries);
        let r = search(&*store, &scope, s, &text, opts, mode).await?;
        latencies.push(t.elapsed().as_secs_f64() * 1e6);
        rankings.push(r);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }

    let (rows, per_question, foreign) = score(&all, &rankings)?;
    let headline = of_categories(&rows, &per_question, &[1, 2, 3, 4]);
    let per_category = per_category(&rows, &per_question);
    let col = |i: usize| column(&headline, i);

    let isolation_equal = if opts.isolation_check {
        Some(isolation(opener, samples, &all, &rankings, opts).await?)
    } else {
        None
    };

    Ok(LocomoReport {
        mode: mode.as_str().to_owned(),
        embedder: opener.embedder(),
        recall_at_1: col(0),
        recall_at_5: col(1),
        recall_at_10: col(2),
        recall_at_20: col(3),
        recall_at_50: col(4),
        mrr: col(RR),
        ndcg_at_10: col(6),
        hits: Hits::of(&headline),
        per_category,
        isolation_equal,
        foreign_scope_hits: foreign,
        ingest_events_per_s: events as f64 / ingest_secs.max(1e-9),
        search_p50_us: percentile(&latencies, 50.0),
        search_p95_us: percentile(&latencies, 95.0),
        search_p99_us: percentile(&latencies, 99.0),
        questions: headline.len(),
        questions_all: all.len(),
        conversations: samples.len(),
        events,
        skipped_events,
        per_question,
    })
}

/// One question's figures: R@1, 5, 10, 20, 50, RR, nDCG@10, hit@1, 5,
/// 10, 20, session hit@1, 5, 10, 20.
type Row = [f64; 15];
/// Where R@10, RR, hit@1 and session hit@1 are in a [`Row`].
const R10: usize = 2;
const RR: usize = 5;
const HIT: usize = 7;
const SESSION_HIT: usize = 11;

type Scored = (Vec<Row>, Vec<QuestionResult>, u64);

/// The rows of the questions in `cats`.
fn of_categories<'a>(rows: &'a [Row], questions: &[QuestionResult], cats: &[u8]) -> Vec<&'a Row> {
    rows.iter()
        .zip(questions)
        .filter(|(_, p)| cats.contains(&p.category))
        .map(|(r, _)| r)
        .collect()
}

/// The mean of column `i`.
fn column(rows: &[&Row], i: usize) -> f64 {
    mean(rows.iter().map(|r| r[i]))
}

/// Each category's figures.
fn per_category(rows: &[Row], questions: &[QuestionResult]) -> BTreeMap<String, CategoryReport> {
    (1..=5u8)
        .map(|cat| {
            let r = of_categories(rows, questions, &[cat]);
            let col = |i: usize| column(&r, i);
            let report = CategoryReport {
                questions: r.len(),
                recall_at_10: col(R10),
                mrr: col(RR),
                hits: Hits::of(&r),
            };
            (cat.to_string(), report)
        })
        .collect()
}

/// The session of a LoCoMo turn id: `D3` of `D3:5`.
fn session_of(dia_id: &str) -> &str {
    dia_id.split(':').next().unwrap_or(dia_id)
}

/// Scores each question's ranking: its row of figures and its
/// per-question result (every category, in order), and the number of
/// foreign-scope hits.
fn score(
    all: &[(&Sample, &hippocamp_datasets::locomo::Question)],
    rankings: &[Ranking],
) -> Result<Scored, EvalError> {
    let mut foreign = 0u64;
    let mut per_question = Vec::with_capacity(all.len());
    let mut rows: Vec<Row> = Vec::with_capacity(all.len());
    for (index, ((s, q), r)) in all.iter().zip(rankings).enumerate() {
        let scope = scope_of(s)?;
        foreign += r.iter().filter(|h| h.3 != scope).count() as u64;
        let ranked: Vec<String> = r.iter().map(|h| h.2.clone()).collect();
        let rr = reciprocal_rank(&ranked, |x| q.evidence.iter().any(|e| e == x));
        let gain = |x: &str| {
            if q.evidence.iter().any(|e| e == x) {
                1.0
            } else {
                0.0
            }
        };
        let ndcg = ndcg_at(&ranked, gain, &vec![1.0; q.evidence.len()], 10);
        let sessions: Vec<String> = ranked.iter().map(|d| session_of(d).to_owned()).collect();
        let evidence_sessions: Vec<String> = q
            .evidence
            .iter()
            .map(|d| session_of(d).to_owned())
            .collect();
        let row = [
            recall_at(&ranked, &q.evidence, 1),
            recall_at(&ranked, &q.evidence, 5),
            recall_at(&ranked, &q.evidence, 10),
            recall_at(&ranked, &q.evidence, 20),
            recall_at(&ranked, &q.evidence, 50),
            rr,
            ndcg,
            hit_at(&ranked, &q.evidence, 1),
            hit_at(&ranked, &q.evidence, 5),
            hit_at(&ranked, &q.evidence, 10),
            hit_at(&ranked, &q.evidence, 20),
            hit_at(&sessions, &evidence_sessions, 1),
            hit_at(&sessions, &evidence_sessions, 5),
            hit_at(&sessions, &evidence_sessions, 10),
            hit_at(&sessions, &evidence_sessions, 20),
        ];
        per_question.push(QuestionResult {
            index,
            sample_id: s.sample_id.clone(),
            category: q.category,
            recall_at_10: row[R10],
            rr,
            hit_at_10: row[HIT + 2],
            session_hit_at_10: row[SESSION_HIT + 2],
        });
        rows.push(row);
    }
    Ok((rows, per_question, foreign))
}

/// Re-runs each conversation's questions against a store holding only
/// that conversation and compares ids and scores with the shared store.
async fn isolation(
    opener: &dyn StoreOpener,
    samples: &[Sample],
    all: &[(&Sample, &hippocamp_datasets::locomo::Question)],
    rankings: &[Ranking],
    opts: &LocomoOptions,
) -> Result<bool, EvalError> {
    let bar = opts
        .progress
        .then(|| progress(all.len() as u64, "isolation"));
    let mut equal = true;
    let mode = crate::run_mode(opts.mode, opener);
    for sample in samples {
        let alone = opener
            .open(opts.config.clone(), &format!("locomo-{}", sample.sample_id))
            .await?;
        ingest(&*alone, std::slice::from_ref(sample), None).await?;
        let scope = scope_of(sample)?;
        for ((s, q), shared) in all.iter().zip(rankings) {
            if s.sample_id != sample.sample_id {
                continue;
            }
            let text = query_text(s, q, opts.long_queries);
            let solo = search(&*alone, &scope, s, &text, opts, mode).await?;
            let key = |r: &Ranking| -> Vec<(EntryId, u64)> {
                r.iter().map(|h| (h.0, h.1.to_bits())).collect()
            };
            if key(&solo) != key(shared) {
                equal = false;
            }
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(equal)
}

/// LoCoMo's category names, by number.
pub const CATEGORY_NAMES: [&str; 6] = [
    "",
    "multi-hop",
    "temporal",
    "open-domain",
    "single-hop",
    "adversarial",
];

impl std::fmt::Display for LocomoReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "LoCoMo: {} conversations, {} events ({} skipped), {} questions in categories 1-4 ({} in all)",
            self.conversations,
            self.events,
            self.skipped_events,
            self.questions,
            self.questions_all
        )?;
        writeln!(
            f,
            "categories 1-4: R@1 {:.3}  R@5 {:.3}  R@10 {:.3}  R@20 {:.3}  R@50 {:.3}  MRR {:.3}  nDCG@10 {:.3}",
            self.recall_at_1,
            self.recall_at_5,
            self.recall_at_10,
            self.recall_at_20,
            self.recall_at_50,
            self.mrr,
            self.ndcg_at_10
        )?;
        writeln!(
            f,
            "categories 1-4: hit@1 {:.3}  hit@5 {:.3}  hit@10 {:.3}  hit@20 {:.3};  session hit@1 {:.3}  @5 {:.3}  @10 {:.3}  @20 {:.3}",
            self.hits.hit_at_1,
            self.hits.hit_at_5,
            self.hits.hit_at_10,
            self.hits.hit_at_20,
            self.hits.session_hit_at_1,
            self.hits.session_hit_at_5,
            self.hits.session_hit_at_10,
            self.hits.session_hit_at_20
        )?;
        for (cat, r) in &self.per_category {
            let name = cat
                .parse::<usize>()
                .ok()
                .and_then(|i| CATEGORY_NAMES.get(i))
                .unwrap_or(&"");
            writeln!(
                f,
                "  category {cat} {name:<12} {:>4} questions  R@10 {:.3}  MRR {:.3}  hit@10 {:.3}  session hit@10 {:.3}",
                r.questions, r.recall_at_10, r.mrr, r.hits.hit_at_10, r.hits.session_hit_at_10
            )?;
        }
        writeln!(
            f,
            "isolation: results equal to single-conversation stores: {}; foreign-scope hits: {}",
            self.isolation_equal
                .map_or("not checked", |e| if e { "true" } else { "false" }),
            self.foreign_scope_hits
        )?;
        write!(
            f,
            "ingest {:.0} events/s; search p50 {:.0} us, p95 {:.0} us, p99 {:.0} us",
            self.ingest_events_per_s, self.search_p50_us, self.search_p95_us, self.search_p99_us
        )
    }
}

#[cfg(test)]
mod tests {
    use hippocamp_datasets::locomo::{Question, Turn};

    use super::*;

    #[test]
    fn long_queries_put_the_turn_before_the_evidence_first() {
        let turn = |id: &str, text: &str| Turn {
            speaker: "A".into(),
            dia_id: id.into(),
            text: text.into(),
            blip_caption: None,
        };
        let sample = Sample {
            sample_id: "c".into(),
            sessions: vec![Session {
                number: 1,
                date_time: String::new(),
                start_ms: None,
                turns: vec![
                    turn("D1:1", "How was the weekend?"),
                    turn("D1:2", "I hiked"),
                ],
            }],
            questions: Vec::new(),
            dropped_questions: 0,
        };
        let q = |ev: &str| Question {
            text: "What did A do?".into(),
            category: 4,
            evidence: vec![ev.into()],
        };
        assert_eq!(
            query_text(&sample, &q("D1:2"), true),
            "How was the weekend? What did A do?"
        );
        assert_eq!(query_text(&sample, &q("D1:2"), false), "What did A do?");
        // Evidence that opens its session: the question alone.
        assert_eq!(query_text(&sample, &q("D1:1"), true), "What did A do?");
    }
}
