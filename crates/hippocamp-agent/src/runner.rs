//! The runner: an agent (model, instruction, tools) over a user's
//! session, with hard bounds on every run.
//!
//! `run(app, user, session, message)`:
//! 1. resolves the instruction's placeholders and appends the user event;
//! 2. optionally preloads memory (first request only, never persisted);
//! 3. loops model → tool calls → model: at most `max_model_calls` model
//!    calls and `max_tool_calls_per_round` calls a round, each request at
//!    most `max_request_bytes`, all by `deadline_ms`; every model answer
//!    and every round's tool results are appended to the session;
//!    attachments staged by `load_artifacts` reach the next request only;
//! 4. returns the final answer, then hands the events to ingestion.
//!
//! Options are checked when the runner is built (unknown keys, ranges,
//! and whether the services they need are there).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hippocamp_core::{
    Author, CallOptions, Caller, CallerKind, Deadline, ErasureFence, Error, Field, LimitInfo,
    MemoryScope, Problem, SessionId, Stage, limit_table,
};
use hippocamp_memory::Event;
use hippocamp_models::{
    Content, FunctionCall, FunctionResponse, InlineData, MODEL, Model, ModelRequest, Part,
    ToolChoice, USER,
};
use hippocamp_sessions::{Actions, AppendOptions, SessionEvent, check_session};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::capability::Capability;
use crate::context::{Attachment, Invocation, ToolContext};
use crate::error::{AgentError, Bound, Result};
use crate::ingest::{Background, Ingestion, IngestionStats};
use crate::instruction::Instruction;
use crate::preload::{PreloadOptions, preload};
use crate::services::AgentServices;
use crate::tool::{Tool, ToolSet};

limit_table! {
    /// Hard bounds of every run.
    pub struct RunLimits, prefix "runner." {
        /// Model calls per run.
        max_model_calls: default 8, min 1, max 64,
            "model calls one run may make before it must answer";
        /// Tool calls the model may ask for in one round.
        max_tool_calls_per_round: default 8, min 1, max 64,
            "tool calls one model answer may ask for";
        /// Bytes of one model request (system, contents, tools as JSON).
        max_request_bytes: default 1_048_576, min 1_024, max 67_108_864,
            "bytes of one model request (instruction, history, tools, attachments as JSON)";
        /// The run's deadline.
        deadline_ms: default 120_000, min 1, max 600_000,
            "milliseconds one run may take, model calls and tools included";
        /// One tool call's timeout (also bounded by the run's deadline).
        tool_timeout_ms: default 30_000, min 1, max 600_000,
            "milliseconds one tool call may take";
        /// Session events sent as history.
        max_history_events: default 200, min 1, max 10_000,
            "most recent session events sent to the model as history";
        /// Bytes of the resolved instruction.
        max_instruction_bytes: default 65_536, min 1, max 1_048_576,
            "bytes of the instruction after its placeholders are resolved";
    }
}

/// The runner's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerOptions {
    /// Hard bounds.
    #[serde(default)]
    pub limits: RunLimits,
    /// Memory preload (off when absent).
    #[serde(default)]
    pub preload: Option<PreloadOptions>,
    /// How the run's events reach memory.
    #[serde(default)]
    pub ingestion: Ingestion,
    /// The tool choice of every round after the first.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// The first round's tool choice (default: `tool_choice`).
    #[serde(default)]
    pub first_tool_choice: Option<ToolChoice>,
    /// Sampling temperature, 0..=2.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Most tokens per model answer.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
}

/// An agent: who it is, its model, its instruction and its tools.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The author of its events (not `user` or `tool`).
    pub name: String,
    /// The model.
    pub model: Arc<dyn Model>,
    /// The system instruction, with optional `{user.artifact.NAME}` and
    /// `{app.artifact.NAME}` placeholders.
    pub instruction: String,
    /// Its tools.
    pub tools: Vec<Arc<dyn Tool>>,
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunOutcome {
    /// The final answer.
    pub answer: String,
    /// The run's id (the `invocation_id` of its events).
    pub invocation_id: String,
    /// The ids of the events it appended, in order.
    pub events: Vec<String>,
    /// Model calls made.
    pub model_calls: u64,
    /// Tool calls run.
    pub tool_calls: u64,
    /// Whether memory was preloaded into the first request.
    pub preloaded: bool,
    /// The outbox jobs holding the session's events (durable ingestion).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<hippocamp_outbox::JobId>,
}

/// A tool as the runner reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// What it declared.
    pub capabilities: Vec<&'static str>,
}

/// What a runner is and which limits it enforces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerCapabilities {
    /// Every limit in force.
    pub limits: Vec<LimitInfo>,
    /// The agent's tools.
    pub tools: Vec<ToolInfo>,
}

/// The runner.
#[derive(Debug)]
pub struct Runner {
    name: String,
    model: Arc<dyn Model>,
    instruction: Instruction,
    tools: ToolSet,
    services: AgentServices,
    options: RunnerOptions,
    background: Option<Background>,
    /// The memory store's `max_query_bytes`, read once (preload cuts to it).
    max_query: usize,
    /// Who its calls are made for: the runner itself.
    caller: Caller,
    /// Results it could not append, for the next run of their session.
    journal: crate::journal::Journal,
}

fn invalid(m: impl Into<String>) -> AgentError {
    AgentError::InvalidOptions(m.into())
}

fn now() -> i64 {
    i64::try_from(hippocamp_core::time::now_ms()).unwrap_or(i64::MAX)
}

/// The JSON size of a request: what the bound counts.
fn request_bytes(r: &ModelRequest) -> u64 {
    fn len(v: &impl Serialize) -> u64 {
        serde_json::to_vec(v).map_or(u64::MAX, |v| v.len() as u64)
    }
    len(&r.system)
        .saturating_add(len(&r.contents))
        .saturating_add(len(&r.tools))
}

fn error_result(e: &AgentError) -> Value {
    json!({"success": false, "error": e.code(), "message": e.to_string()})
}

/// The conversation sent to the model: the last `max` events (never
/// starting with orphaned tool results), the preload block just before
/// the current user event, and the staged attachments at the end.
fn contents(
    history: &[SessionEvent],
    max: usize,
    current: &str,
    preload: Option<&str>,
    attachments: &[Attachment],
) -> Vec<Content> {
    let start = history.len().saturating_sub(max);
    let mut window = &history[start..];
    while window
        .first()
        .is_some_and(|e| e.author == hippocamp_sessions::event::TOOL)
    {
        window = &window[1..];
    }
    let mut out = Vec::with_capacity(window.len() + 2);
    for e in window {
        if e.partial {
            continue;
        }
        let Some(c) = &e.content else { continue };
        if let (Some(block), true) = (preload, e.id == current) {
            out.push(Content {
                role: Some(USER.into()),
                parts: vec![Part::text(block)],
            });
        }
        let role = if c.role.as_deref() == Some(MODEL) {
            MODEL
        } else {
            USER
        };
        out.push(Content {
            role: Some(role.into()),
            parts: c.parts.clone(),
        });
    }
    if !attachments.is_empty() {
        let mut parts = Vec::new();
        for a in attachments {
            let m = &a.meta;
            parts.push(Part::text(format!(
                "Attached artifact name={} version={} mime_type={}",
                m.name,
                m.version,
                m.mime_type.as_str()
            )));
            if a.bytes.is_empty() {
                parts.push(Part::text("[artifact content is empty]"));
            } else {
                parts.push(Part {
                    inline_data: Some(InlineData {
                        mime_type: m.mime_type.as_str().to_owned(),
                        data: base64::engine::general_purpose::STANDARD.encode(&a.bytes),
                    }),
                    ..Part::default()
                });
            }
        }
        out.push(Content {
            role: Some(USER.into()),
            parts,
        });
    }
    out
}

impl Runner {
    /// Builds a runner, checking every option against what it needs.
    pub fn new(agent: Agent, services: AgentServices, options: RunnerOptions) -> Result<Self> {
        Author::new(agent.name.as_str())?;
        if agent.name == hippocamp_sessions::event::USER
            || agent.name == hippocamp_sessions::event::TOOL
        {
            return Err(invalid(format!(
                "the agent cannot be named `{}` (it names the user's and the tools' events)",
                agent.name
            )));
        }
        options.limits.check_ranges()?;
        let model_max = agent.model.limits().max_request_bytes;
        if options.limits.max_request_bytes > model_max {
            return Err(invalid(format!(
                "runner.max_request_bytes {} is above the model's max_request_bytes {model_max}",
                options.limits.max_request_bytes
            )));
        }
        if let Some(t) = options.temperature
            && !(0.0..=2.0).contains(&t)
        {
            return Err(invalid(format!("temperature {t} is not within 0..=2")));
        }
        if let Some(p) = &options.preload {
            p.validate()?;
            if services.memory.is_none() {
                return Err(invalid("preload needs a memory store"));
            }
        }
        options.ingestion.validate()?;
        let background = match options.ingestion {
            Ingestion::Disabled => None,
            Ingestion::OnSuccess {
                workers,
                queue,
                max_attempts,
            } => {
                let m = services
                    .memory
                    .clone()
                    .ok_or_else(|| invalid("on_success ingestion needs a memory store"))?;
                Some(Background::start(m, workers, queue, max_attempts)?)
            }
            Ingestion::Durable { .. } => {
                let Some((outbox, target)) = &services.outbox else {
                    return Err(invalid("durable ingestion needs the ingestion outbox"));
                };
                // Every run's admission would fail otherwise.
                if outbox.registry().get(target).is_none() {
                    return Err(invalid(
                        "durable ingestion needs the outbox's memory target registered",
                    ));
                }
                None
            }
        };
        let tools = ToolSet::new(agent.tools)?;
        for t in tools.iter() {
            for c in t.capabilities.iter() {
                let missing = if c.is_memory() {
                    services.memory.is_none()
                } else {
                    services.artifacts.is_none()
                };
                if missing {
                    return Err(invalid(format!(
                        "tool `{}` declares `{c}` but the runner has no {} store",
                        t.declaration.name,
                        if c.is_memory() { "memory" } else { "artifact" }
                    )));
                }
            }
        }
        let instruction = Instruction::compile(&agent.instruction)?;
        if instruction.has_placeholders() && services.artifacts.is_none() {
            return Err(invalid(
                "the instruction has artifact placeholders but the runner has no artifact store",
            ));
        }
        let max_query = services
            .memory
            .as_deref()
            .map_or(0, crate::preload::max_query_bytes);
        Ok(Self {
            max_query,
            name: agent.name,
            model: agent.model,
            instruction,
            tools,
            services,
            options,
            background,
            caller: Caller::of(CallerKind::Runner),
            journal: crate::journal::Journal::default(),
        })
    }

    /// The services it runs over.
    pub fn services(&self) -> &AgentServices {
        &self.services
    }

    /// Its limits (the run's, the model's, the sessions', and the fixed
    /// ones of tools and attachments) and tools.
    pub fn capabilities(&self) -> RunnerCapabilities {
        let mut limits = self.options.limits.describe();
        limits.extend(self.model.limits().describe());
        limits.extend(self.services.sessions.capabilities().limits);
        limits.extend(crate::builtin::fixed_limits());
        RunnerCapabilities {
            limits,
            tools: self
                .tools
                .iter()
                .map(|t| ToolInfo {
                    name: t.declaration.name.clone(),
                    capabilities: t.capabilities.iter().map(Capability::as_str).collect(),
                })
                .collect(),
        }
    }

    /// Counters of background (`on_success`) ingestion.
    pub fn ingestion_stats(&self) -> Option<IngestionStats> {
        self.background.as_ref().map(Background::stats)
    }

    /// Waits up to `timeout` for background ingestion to finish what is
    /// queued; whether it did.
    pub async fn flush_ingestion(&self, timeout: Duration) -> bool {
        match &self.background {
            Some(b) => b.flush(timeout).await,
            None => true,
        }
    }

    /// One turn: `message` from the user, answered by the agent.
    #[allow(clippy::too_many_lines)] // one loop, read top to bottom
    pub async fn run(
        &self,
        app: &str,
        user: &str,
        session: &str,
        message: &str,
    ) -> Result<RunOutcome> {
        let scope = MemoryScope::parse(app, user)?;
        let session_id = SessionId::new(session)?;
        if message.trim().is_empty() {
            return Err(Error::invalid(Field::Content, Problem::Empty).into());
        }
        let limits = &self.options.limits;
        let deadline = Deadline::after(Duration::from_millis(limits.deadline_ms));
        let call = CallOptions::until(deadline);
        let call = call.on_behalf_of(self.caller);
        let invocation_id = format!("inv-{:016x}", rand::random::<u64>());
        // The erasures this turn starts after: its session appends and
        // its memory writes (tools, background ingestion) carry them, so
        // a turn still running when its user or session is erased
        // writes nothing back (nor re-creates the session).
        let sessions = &self.services.sessions;
        let session_fence = sessions.fence(&scope, &session_id, &call).await?;
        let memory_fence = match &self.services.memory {
            Some(m) => Some(m.erasure_fence(&scope, &session_id, &call).await?),
            None => None,
        };
        let inv = Arc::new(
            Invocation::new(
                scope.clone(),
                session_id.clone(),
                invocation_id.clone(),
                deadline,
                self.services.memory.clone(),
                self.services.artifacts.clone(),
            )
            .on_behalf_of(self.caller)
            .fenced(memory_fence),
        );
        let instruction = self
            .instruction
            .resolve(
                self.services.artifacts.as_deref(),
                scope.app(),
                scope.user(),
                limits.max_instruction_bytes,
                call,
            )
            .await?;

        let mut history = match sessions.get(&scope, &session_id, &call).await {
            Ok(s) => {
                check_session(&scope, &session_id, &s)?;
                s.events
            }
            Err(Error::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        // Calls of an earlier run left without a result get theirs first
        // (`journal`).
        let recovered = self.journal.recover(&scope, &session_id, &history, now());
        for (k, mut e) in recovered.into_iter().enumerate() {
            e.id = format!("{invocation_id}-j{k}");
            e.invocation_id = Some(invocation_id.clone());
            let opts = AppendOptions::new(call).fenced(session_fence);
            if let Err(err) = sessions.append(&scope, &session_id, &e, &opts).await {
                // Still failing: kept for the run after this one.
                self.journal.keep(&scope, &session_id, e);
                return Err(err.into());
            }
            history.push(e);
        }
        let mut ids = Vec::new();
        let mut append = async |mut e: SessionEvent, history: &mut Vec<SessionEvent>| {
            e.id = format!("{invocation_id}-{}", ids.len());
            e.invocation_id = Some(invocation_id.clone());
            let opts = AppendOptions::new(call).fenced(session_fence);
            sessions.append(&scope, &session_id, &e, &opts).await?;
            ids.push(e.id.clone());
            history.push(e);
            Ok::<_, AgentError>(())
        };
        append(
            SessionEvent::text("", hippocamp_sessions::event::USER, now(), message),
            &mut history,
        )
        .await?;
        let current = history.last().map(|e| e.id.clone()).unwrap_or_default();

        let block = match (&self.options.preload, &self.services.memory) {
            (Some(p), Some(m)) => {
                preload(m.as_ref(), &scope, message, p, self.max_query, call).await?
            }
            _ => None,
        };
        let declarations = self.tools.declarations();
        let mut attachments: Vec<Attachment> = Vec::new();
        let (mut model_calls, mut tool_calls) = (0u64, 0u64);
        let answer = loop {
            if model_calls == limits.max_model_calls {
                return Err(AgentError::BoundExceeded(Bound::ModelCalls(model_calls)));
            }
            if deadline.expired() {
                return Err(AgentError::BoundExceeded(Bound::Deadline));
            }
            let first = model_calls == 0;
            let request = ModelRequest {
                system: (!instruction.is_empty()).then(|| instruction.clone()),
                contents: contents(
                    &history,
                    hippocamp_core::limits::to_usize(limits.max_history_events),
                    &current,
                    if first { block.as_deref() } else { None },
                    &attachments,
                ),
                tools: declarations.clone(),
                tool_choice: if first {
                    self.options
                        .first_tool_choice
                        .unwrap_or(self.options.tool_choice)
                } else {
                    self.options.tool_choice
                },
                temperature: self.options.temperature,
                max_output_tokens: self.options.max_output_tokens,
            };
            // Attachments reach this request only.
            attachments.clear();
            let bytes = request_bytes(&request);
            if bytes > limits.max_request_bytes {
                return Err(AgentError::BoundExceeded(Bound::RequestBytes {
                    bytes,
                    max: limits.max_request_bytes,
                }));
            }
            model_calls += 1;
            let mut reply = match self.model.generate(&request, deadline).await {
                Err(Error::Timeout(Stage::Model)) if deadline.expired() => {
                    return Err(AgentError::BoundExceeded(Bound::Deadline));
                }
                other => other?,
            };
            let round = model_calls - 1;
            let mut n = 0;
            for p in &mut reply.content.parts {
                if let Some(c) = &mut p.function_call
                    && c.id.as_deref().is_none_or(str::is_empty)
                {
                    c.id = Some(format!("{invocation_id}-r{round}-c{n}"));
                    n += 1;
                }
            }
            let calls: Vec<FunctionCall> = reply.function_calls().cloned().collect();
            let mut event = SessionEvent::text("", &self.name, now(), "");
            event.content = Some(reply.content.clone());
            append(event, &mut history).await?;
            if calls.is_empty() {
                break reply.text();
            }
            if calls.len() as u64 > limits.max_tool_calls_per_round {
                return Err(AgentError::BoundExceeded(Bound::ToolCallsPerRound(
                    calls.len() as u64,
                )));
            }
            let mut parts = Vec::with_capacity(calls.len());
            let mut effects = Vec::new();
            for c in &calls {
                let id = c.id.clone().unwrap_or_default();
                let (response, mut fx) = self.call_tool(&inv, c, &id).await;
                tool_calls += 1;
                effects.append(&mut fx);
                parts.push(Part::response(FunctionResponse {
                    id: Some(id),
                    name: c.name.clone(),
                    response,
                }));
            }
            let mut event = SessionEvent::text("", hippocamp_sessions::event::TOOL, now(), "");
            event.content = Some(Content {
                role: Some(USER.into()),
                parts,
            });
            event.actions = Actions {
                context_effects: effects,
            };
            // The tools have run: a failed append must not lose what
            // they did (`journal`).
            let kept = event.clone();
            if let Err(e) = append(event, &mut history).await {
                self.journal.keep(&scope, &session_id, kept);
                return Err(e);
            }
            attachments = inv.take_attachments();
        };
        let outcome = RunOutcome {
            answer,
            invocation_id: invocation_id.clone(),
            events: ids,
            model_calls,
            tool_calls,
            preloaded: block.is_some(),
            jobs: Vec::new(),
        };
        let mut outcome = outcome;
        outcome.jobs = self
            .ingest(&scope, &session_id, &history, &outcome, memory_fence)
            .await?;
        Ok(outcome)
    }

    /// Runs one call: looked up, its arguments checked against its schema,
    /// executed with a context granting what it declared, bounded in
    /// time. A failure becomes an error result the model reads.
    async fn call_tool(
        &self,
        inv: &Arc<Invocation>,
        call: &FunctionCall,
        id: &str,
    ) -> (Value, Vec<Value>) {
        let reg = match self.tools.get(&call.name) {
            Ok(r) => r,
            Err(e) => return (error_result(&e), Vec::new()),
        };
        if let Err(e) = reg.check(&call.args) {
            return (error_result(&e), Vec::new());
        }
        let ctx = ToolContext::new(Arc::clone(inv), &call.name, reg.capabilities, id);
        let wait = Duration::from_millis(self.options.limits.tool_timeout_ms)
            .min(inv.deadline.remaining());
        let result = tokio::time::timeout(wait, reg.tool.execute(&ctx, call.args.clone())).await;
        let value = match result {
            Ok(Ok(v)) if v.is_object() => v,
            Ok(Ok(v)) => json!({"result": v}),
            Ok(Err(e)) => {
                tracing::debug!(tool = %call.name, code = e.code(), "tool call failed");
                error_result(&e)
            }
            Err(_) => error_result(&AgentError::Service(Error::Timeout(Stage::Tool))),
        };
        (value, ctx.take_effects())
    }

    async fn ingest(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        history: &[SessionEvent],
        outcome: &RunOutcome,
        fence: Option<ErasureFence>,
    ) -> Result<Vec<hippocamp_outbox::JobId>> {
        let to_memory = |events: &[SessionEvent]| -> Vec<Event> {
            events
                .iter()
                .filter_map(|e| e.to_memory_event().ok())
                .collect()
        };
        match self.options.ingestion {
            Ingestion::Disabled => Ok(Vec::new()),
            Ingestion::OnSuccess { .. } => {
                let run: Vec<SessionEvent> = history
                    .iter()
                    .filter(|e| e.invocation_id.as_deref() == Some(outcome.invocation_id.as_str()))
                    .cloned()
                    .collect();
                if let (Some(b), Some(f)) = (&self.background, fence) {
                    b.submit(scope.clone(), session.clone(), to_memory(&run), f);
                }
                Ok(Vec::new())
            }
            Ingestion::Durable { max_attempts } => {
                let Some((outbox, target)) = &self.services.outbox else {
                    return Ok(Vec::new());
                };
                // The whole session: the outbox's watermark skips what it
                // already holds, and a run whose admission failed before is
                // caught up by the next one.
                let events = to_memory(history);
                outbox
                    .ingest(
                        target,
                        scope,
                        session,
                        &events,
                        max_attempts,
                        &CallOptions::default().on_behalf_of(self.caller),
                    )
                    .await
                    .map(|i| i.jobs.into_iter().map(|j| j.id).collect())
                    .map_err(|source| {
                        AgentError::IngestionNotAdmitted(Box::new(crate::error::NotAdmitted {
                            answer: outcome.answer.clone(),
                            source,
                        }))
                    })
            }
        }
    }
}

/// The agent of a configuration file's `[agent]` section (what
/// `hippocamp chat` runs): every key optional, unknown keys refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The author name of its events.
    pub name: String,
    /// The system instruction (`{user.artifact.NAME}` and
    /// `{app.artifact.NAME}` placeholders allowed).
    pub instruction: String,
    /// The model (the command line can give or override it).
    pub model: Option<hippocamp_models::ModelConfig>,
    /// Built-in tools by name (`all` for every one).
    pub tools: Vec<String>,
    /// Bounds, preload, ingestion, tool choice.
    pub runner: RunnerOptions,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            name: "assistant".into(),
            instruction: "You are a helpful assistant. Answer briefly.".into(),
            model: None,
            tools: Vec::new(),
            runner: RunnerOptions::default(),
        }
    }
}

impl AgentConfig {
    /// Checks what can be checked without the services (the runner
    /// checks the rest when it is built).
    pub fn validate(&self) -> Result<()> {
        Author::new(self.name.as_str())?;
        self.runner.limits.check_ranges()?;
        if let Some(p) = &self.runner.preload {
            p.validate()?;
        }
        self.runner.ingestion.validate()?;
        let names: Vec<&str> = self.tools.iter().map(String::as_str).collect();
        crate::builtin::builtins(&names)?;
        Instruction::compile(&self.instruction)?;
        if let Some(m) = &self.model {
            m.limits.validate()?;
        }
        Ok(())
    }
}
