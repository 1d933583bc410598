//! Extraction: a model reads new turns next to the user's most similar
//! current facts and proposes atomic facts, each an add, or an update or
//! supersession of a fact it was shown.
//!
//! The model sees short local ids (`t1`, `f1`), never entry ids, so a
//! reply can only name what it was shown; each reply is checked whole
//! (the tool's JSON shape, unknown fields refused, ids among those shown,
//! content bounds) before anything is written, and every call of a run is
//! checked before the run writes its first fact: a hostile or broken reply
//! fails the run with `invalid_reply` and changes nothing. Secrets in a
//! proposed fact are redacted by the write, as in any entry.
//!
//! An update is written as a new fact that supersedes the old one (with
//! the old one among its sources), not as a revision of it: a revision
//! would carry text from turns its lineage does not name, and erasing
//! those turns could not find it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use hippocamp_core::limits::to_usize;
use hippocamp_core::{Deadline, EntryId, Error, FactKey, Result, limit_table};
use hippocamp_memory::MemoryEntry;
use hippocamp_memory::lineage::{Origin, Status};
use hippocamp_models::{Content, Model, ModelRequest, Part, ToolChoice, ToolDeclaration, USER};
use serde::Deserialize;
use serde_json::json;

/// The instruction every extraction call carries.
pub const PROMPT: &str = include_str!("extract_prompt.md");
/// The JSON Schema of the `record_facts` tool's arguments.
pub const SCHEMA: &str = include_str!("extract_schema.json");
/// The tool the model must call.
pub const TOOL: &str = "record_facts";
const SERVICE: &str = "the consolidation model";

limit_table! {
    /// Bounds of extraction (`[consolidation.extract]`).
    pub struct ExtractLimits, prefix "consolidation.extract." {
        /// New turns shown per call.
        turns_per_call: default 20, min 1, max 200,
            "new turns shown to the model per call";
        /// Model calls in one run; later turns wait for the next run.
        max_model_calls: default 10, min 1, max 1_000,
            "model calls of one extract run (later turns wait for the next run)";
        /// Facts one reply may propose.
        max_facts_per_call: default 20, min 1, max 200,
            "facts one model reply may propose (more fails the run)";
        /// Existing facts shown per call (the most similar).
        max_candidates: default 20, min 0, max 200,
            "existing facts shown per call, the most similar to its turns";
        /// Bytes of one proposed fact.
        max_fact_bytes: default 1_000, min 16, max 65_536,
            "bytes of one proposed fact (more fails the run)";
    }
}

/// What the model proposed, in entry ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// `add`, `update` or `supersede`.
    pub op: super::ChangeOp,
    /// The fact.
    pub content: String,
    /// What it is about.
    pub fact_key: Option<FactKey>,
    /// The turns it comes from.
    pub evidence: Vec<EntryId>,
    /// The fact it replaces.
    pub target: Option<EntryId>,
}

/// A run's extraction: its proposals and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extraction {
    /// Every proposal of every call, checked.
    pub proposals: Vec<Proposal>,
    /// Model calls made.
    pub calls: u64,
    /// Tokens the provider reported (prompt, generated).
    pub tokens: (u64, u64),
    /// New turns shown.
    pub turns: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    facts: Vec<Proposed>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Proposed {
    op: String,
    content: String,
    #[serde(default)]
    fact_key: Option<String>,
    #[serde(default)]
    target: Option<String>,
    evidence: Vec<String>,
}

fn invalid(detail: impl Into<String>) -> Error {
    Error::InvalidReply {
        service: SERVICE,
        detail: detail.into(),
    }
}

/// The tool the model is asked to call.
pub fn tool() -> Result<ToolDeclaration> {
    Ok(ToolDeclaration {
        name: TOOL.into(),
        description: "Record the facts the new turns state.".into(),
        parameters: serde_json::from_str(SCHEMA)
            .map_err(|e| Error::Corrupt(format!("the extraction schema is not JSON: {e}")))?,
    })
}

/// Asks `model` about the new turns among `entries` (current turns no live
/// fact names yet), `turns_per_call` at a time, and checks every reply,
/// counting calls and tokens into `out` as it goes (so a failed run still
/// reports what it spent).
pub async fn plan(
    model: &dyn Model,
    entries: &[Arc<MemoryEntry>],
    limits: &ExtractLimits,
    deadline: Deadline,
    out: &mut Extraction,
) -> Result<()> {
    let used: BTreeSet<EntryId> = entries
        .iter()
        .filter(|e| e.origin == Origin::Fact)
        .flat_map(|e| e.derived_from.iter().map(|s| s.entry))
        .collect();
    let mut turns: Vec<&Arc<MemoryEntry>> = entries
        .iter()
        .filter(|e| e.origin == Origin::Turn && e.status == Status::Current)
        .filter(|e| !used.contains(&e.id))
        .collect();
    turns.sort_by_key(|e| (e.timestamp_ms, e.id));
    let facts: Vec<&Arc<MemoryEntry>> = entries
        .iter()
        .filter(|e| e.origin == Origin::Fact && e.status == Status::Current)
        .collect();
    let analyzer = hippocamp_search::analyzer::english();
    let fact_terms: Vec<BTreeSet<String>> =
        facts.iter().map(|f| terms(analyzer, &f.content)).collect();
    let tool = tool()?;
    for batch in turns.chunks(to_usize(limits.turns_per_call).max(1)) {
        if out.calls >= limits.max_model_calls {
            break;
        }
        let batch_terms: BTreeSet<String> = batch
            .iter()
            .flat_map(|t| terms(analyzer, &t.content))
            .collect();
        let mut ranked: Vec<(usize, usize)> = fact_terms
            .iter()
            .enumerate()
            .map(|(i, t)| (t.intersection(&batch_terms).count(), i))
            .filter(|&(n, _)| n > 0)
            .collect();
        ranked.sort_by(|a, b| b.cmp(a));
        let shown: Vec<&Arc<MemoryEntry>> = ranked
            .iter()
            .take(to_usize(limits.max_candidates))
            .map(|&(_, i)| facts[i])
            .collect();
        let request = request(batch, &shown, &tool);
        out.calls += 1;
        out.turns += batch.len() as u64;
        let reply = model.generate(&request, deadline).await?;
        if let Some(u) = reply.usage {
            out.tokens.0 += u.input_tokens;
            out.tokens.1 += u.output_tokens;
        }
        let call = reply
            .function_calls()
            .find(|c| c.name == TOOL)
            .ok_or_else(|| invalid(format!("it did not call {TOOL}")))?;
        let parsed: Reply = serde_json::from_value(call.args.clone())
            .map_err(|e| invalid(format!("{TOOL}'s arguments are not the tool's shape: {e}")))?;
        out.proposals.extend(check(parsed, batch, &shown, limits)?);
    }
    Ok(())
}

fn terms(analyzer: &hippocamp_search::Analyzer, text: &str) -> BTreeSet<String> {
    analyzer
        .analyze(text)
        .iter()
        .map(|(t, _)| t.to_owned())
        .collect()
}

fn request(
    turns: &[&Arc<MemoryEntry>],
    facts: &[&Arc<MemoryEntry>],
    tool: &ToolDeclaration,
) -> ModelRequest {
    let shown = json!({
        "turns": turns.iter().enumerate().map(|(i, t)| json!({
            "id": format!("t{}", i + 1),
            "author": t.provenance.author.as_ref().map(hippocamp_core::Author::as_str),
            "text": t.content,
        })).collect::<Vec<_>>(),
        "facts": facts.iter().enumerate().map(|(i, f)| json!({
            "id": format!("f{}", i + 1),
            "text": f.content,
            "fact_key": f.fact_key.as_ref().map(FactKey::as_str),
        })).collect::<Vec<_>>(),
    });
    ModelRequest {
        system: Some(PROMPT.to_owned()),
        contents: vec![Content {
            role: Some(USER.into()),
            parts: vec![Part::text(shown.to_string())],
        }],
        tools: vec![tool.clone()],
        tool_choice: ToolChoice::Required,
        temperature: Some(0.0),
        max_output_tokens: Some(1_024),
    }
}

/// One reply's proposals in entry ids, or why the reply is refused whole.
fn check(
    reply: Reply,
    turns: &[&Arc<MemoryEntry>],
    facts: &[&Arc<MemoryEntry>],
    limits: &ExtractLimits,
) -> Result<Vec<Proposal>> {
    if reply.facts.len() > to_usize(limits.max_facts_per_call) {
        return Err(invalid(format!(
            "it proposed {} facts, more than {}",
            reply.facts.len(),
            limits.max_facts_per_call
        )));
    }
    let turn_ids: HashMap<String, EntryId> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("t{}", i + 1), t.id))
        .collect();
    let fact_ids: HashMap<String, EntryId> = facts
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("f{}", i + 1), f.id))
        .collect();
    let mut out = Vec::new();
    for (n, p) in reply.facts.into_iter().enumerate() {
        let op = match p.op.as_str() {
            "add" => super::ChangeOp::Add,
            "update" => super::ChangeOp::Update,
            "supersede" => super::ChangeOp::Supersede,
            "noop" => super::ChangeOp::Noop,
            other => {
                return Err(invalid(format!(
                    "fact {n}: op `{other}` is not one of the tool's"
                )));
            }
        };
        let content = p.content.trim().to_owned();
        if content.is_empty()
            || content.len() > to_usize(limits.max_fact_bytes)
            || content.contains('\0')
        {
            return Err(invalid(format!(
                "fact {n}: content must be 1..={} bytes without NUL",
                limits.max_fact_bytes
            )));
        }
        if p.evidence.is_empty() {
            return Err(invalid(format!("fact {n}: it names no turn")));
        }
        let mut evidence = Vec::with_capacity(p.evidence.len());
        for id in &p.evidence {
            let e = turn_ids.get(id).ok_or_else(|| {
                invalid(format!(
                    "fact {n}: evidence `{id}` is not a turn it was shown"
                ))
            })?;
            if !evidence.contains(e) {
                evidence.push(*e);
            }
        }
        let target = match (&op, p.target.as_deref()) {
            (super::ChangeOp::Add, None) => None,
            (super::ChangeOp::Add, Some(_)) => {
                return Err(invalid(format!("fact {n}: an add names no target")));
            }
            (_, None) => return Err(invalid(format!("fact {n}: {} needs a target", p.op))),
            (_, Some(id)) => Some(*fact_ids.get(id).ok_or_else(|| {
                invalid(format!(
                    "fact {n}: target `{id}` is not a fact it was shown"
                ))
            })?),
        };
        let fact_key = p
            .fact_key
            .filter(|k| !k.is_empty())
            .map(FactKey::new)
            .transpose()
            .map_err(|e| invalid(format!("fact {n}: {e}")))?;
        out.push(Proposal {
            op,
            content,
            fact_key,
            evidence,
            target,
        });
    }
    Ok(out)
}
