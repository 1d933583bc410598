//! `hippocamp chat`: the agent runner over a local data directory,
//! against any OpenAI-compatible (or Gemini) endpoint. One turn with
//! `--message`, an interactive loop (one line, one turn) without.
//!
//! The agent comes from the configuration file's `[agent]` section; the
//! flags override it. The model's API key is read from
//! `HIPPOCAMP_MODEL_API_KEY` only (never a flag, never printed).

use std::io::BufRead as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use hippocamp_agent::{Agent, Ingestion, PreloadOptions, Runner, builtins};
use hippocamp_models::{ModelConfig, ModelLimits, Provider, ToolChoice};

/// How long a one-shot chat waits for background ingestion before it
/// exits.
const FLUSH: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProviderArg {
    Openai,
    Gemini,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum IngestionArg {
    Disabled,
    OnSuccess,
    Durable,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ChoiceArg {
    Auto,
    Required,
    None,
}

impl From<ChoiceArg> for ToolChoice {
    fn from(c: ChoiceArg) -> Self {
        match c {
            ChoiceArg::Auto => ToolChoice::Auto,
            ChoiceArg::Required => ToolChoice::Required,
            ChoiceArg::None => ToolChoice::None,
        }
    }
}

/// `hippocamp chat`.
#[derive(Debug, Args)]
pub(crate) struct Chat {
    /// The configuration file (its `[agent]` section and the stores'
    /// limits); unknown keys are refused.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data directory (overrides the file's `data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The application.
    #[arg(long)]
    app: String,
    /// The user: the only scope this chat reads and writes.
    #[arg(long)]
    user: String,
    /// The conversation session.
    #[arg(long)]
    session: String,
    /// The model endpoint's base URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long)]
    model_url: Option<String>,
    /// The model name.
    #[arg(long)]
    model: Option<String>,
    /// The endpoint's wire format.
    #[arg(long, value_enum)]
    provider: Option<ProviderArg>,
    /// One turn with this message (else: read one message per line).
    #[arg(long)]
    message: Option<String>,
    /// Preload memory into the first request (default options).
    #[arg(long)]
    preload: bool,
    /// Built-in tools, by name (`all` for every one).
    #[arg(long, value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// How the run's events reach memory.
    #[arg(long, value_enum)]
    ingestion: Option<IngestionArg>,
    /// The first round's tool choice.
    #[arg(long, value_enum)]
    first_tool_choice: Option<ChoiceArg>,
    /// The tool choice of later rounds.
    #[arg(long, value_enum)]
    tool_choice: Option<ChoiceArg>,
    /// Sampling temperature.
    #[arg(long)]
    temperature: Option<f32>,
    /// Most tokens per model answer.
    #[arg(long)]
    max_output_tokens: Option<u32>,
    /// The system instruction.
    #[arg(long)]
    instruction: Option<String>,
    /// Print each outcome as JSON (answer, event ids, counts).
    #[arg(long)]
    json: bool,
}

fn print(out: &hippocamp_agent::RunOutcome, json: bool) -> anyhow::Result<()> {
    if json {
        crate::emit(&serde_json::to_string(out)?)
    } else {
        crate::emit(&out.answer)
    }
}

/// The agent of the configuration with the flags applied; its model.
fn overrides(args: &Chat, agent: &mut hippocamp_agent::AgentConfig) -> anyhow::Result<ModelConfig> {
    let mut model = agent.model.clone().unwrap_or(ModelConfig {
        provider: Provider::Openai,
        base_url: String::new(),
        model: String::new(),
        api_key: None,
        limits: ModelLimits::default(),
    });
    if let Some(u) = args.model_url.clone() {
        model.base_url = u;
    }
    if let Some(m) = args.model.clone() {
        model.model = m;
    }
    if let Some(p) = args.provider {
        model.provider = match p {
            ProviderArg::Openai => Provider::Openai,
            ProviderArg::Gemini => Provider::Gemini,
        };
    }
    if let Ok(k) = std::env::var("HIPPOCAMP_MODEL_API_KEY") {
        model.api_key = Some(k);
    }
    anyhow::ensure!(
        !model.base_url.is_empty() && !model.model.is_empty(),
        "name the model with --model-url and --model (or [agent.model] in --config)"
    );
    let o = &mut agent.runner;
    if args.preload && o.preload.is_none() {
        o.preload = Some(PreloadOptions::default());
    }
    if let Some(i) = args.ingestion {
        o.ingestion = match i {
            IngestionArg::Disabled => Ingestion::Disabled,
            IngestionArg::OnSuccess => Ingestion::on_success(),
            IngestionArg::Durable => Ingestion::Durable { max_attempts: None },
        };
    }
    if let Some(c) = args.first_tool_choice {
        o.first_tool_choice = Some(c.into());
    }
    if let Some(c) = args.tool_choice {
        o.tool_choice = c.into();
    }
    if args.temperature.is_some() {
        o.temperature = args.temperature;
    }
    if args.max_output_tokens.is_some() {
        o.max_output_tokens = args.max_output_tokens;
    }
    if let Some(t) = args.tools.clone() {
        agent.tools = t;
    }
    if let Some(i) = args.instruction.clone() {
        agent.instruction = i;
    }
    Ok(model)
}

/// Waits up to [`FLUSH`] for the outbox to finish `jobs`; whether it did.
async fn delivered(
    services: &hippocamp_services::Services,
    app: &str,
    user: &str,
    jobs: &[hippocamp_outbox::JobId],
) -> anyhow::Result<bool> {
    if jobs.is_empty() {
        return Ok(true);
    }
    let scope = hippocamp_core::MemoryScope::parse(app, user)?;
    let call = crate::cli_call();
    let until = std::time::Instant::now() + FLUSH;
    for id in jobs {
        loop {
            if services
                .jobs()?
                .status(&scope, id, &call)
                .await?
                .state
                .is_terminal()
            {
                break;
            }
            if std::time::Instant::now() > until {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(true)
}

pub(crate) async fn run(args: Chat) -> anyhow::Result<()> {
    let mut config = crate::local_config(args.config.as_deref(), args.data_dir.as_deref())?;
    let model = overrides(&args, &mut config.agent)?;
    let agent = &config.agent;
    let names: Vec<&str> = agent.tools.iter().map(String::as_str).collect();
    let tools = builtins(&names)?;
    let durable = matches!(agent.runner.ingestion, Ingestion::Durable { .. });
    let services = hippocamp_services::Services::open(&config)
        .await
        .with_context(|| format!("opening {}", config.data_dir.display()))?;
    if durable {
        // Deliver what is queued (this run's and earlier ones) while the
        // chat runs; what is not delivered stays queued on disk.
        services.start_processor()?;
    }
    let runner = Runner::new(
        Agent {
            name: config.agent.name.clone(),
            model: hippocamp_models::connect(model)?,
            instruction: config.agent.instruction.clone(),
            tools,
        },
        services.agent(),
        config.agent.runner.clone(),
    )?;
    let (app, user, session) = (&args.app, &args.user, &args.session);
    if let Some(m) = args.message {
        let out = runner.run(app, user, session, &m).await?;
        print(&out, args.json)?;
        if !runner.flush_ingestion(FLUSH).await {
            eprintln!("warning: background ingestion did not finish; that memory is lost");
        }
        if !delivered(&services, app, user, &out.jobs).await? {
            eprintln!(
                "note: the run's memory is queued durably; the next `serve` or `chat --ingestion durable` delivers it"
            );
        }
    } else {
        let mut lines = std::io::stdin().lock().lines();
        while let Some(line) = lines.next().transpose()? {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line == "/exit" {
                break;
            }
            match runner.run(app, user, session, line).await {
                // The processor keeps delivering while the loop runs.
                Ok(out) => print(&out, args.json)?,
                Err(e) => eprintln!("error: {e} ({})", e.code()),
            }
        }
        runner.flush_ingestion(FLUSH).await;
    }
    services.stop_processor().await;
    Ok(())
}
