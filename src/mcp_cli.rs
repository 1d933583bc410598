//! `hippocamp mcp`: the MCP server over standard input and output, for
//! desktop clients that spawn a process. The command line is the
//! authority: the scope is `--app`/`--user`, with every permission in
//! it; nothing a client sends can change it. Standard output carries
//! only the protocol; logs go to standard error.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use hippocamp_core::MemoryScope;

/// `hippocamp mcp`.
#[derive(Debug, Args)]
pub(crate) struct Mcp {
    /// The configuration file (limits, embedder); unknown keys are refused.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data directory (overrides the file's `data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The application.
    #[arg(long)]
    app: String,
    /// The user: the only scope this server reads and writes.
    #[arg(long)]
    user: String,
}

pub(crate) async fn run(args: Mcp) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let config = crate::local_config(args.config.as_deref(), args.data_dir.as_deref())?;
    let scope = MemoryScope::parse(&args.app, &args.user)?;
    let services = hippocamp_services::Services::open(&config)
        .await
        .with_context(|| format!("opening {}", config.data_dir.display()))?;
    // Ingestion queued by a server on this directory keeps flowing.
    services.start_processor()?;
    let tools = Arc::new(hippocamp_mcp::tools::Tools::new()?);
    let backends = hippocamp_mcp::Backends {
        memory: services.memory.clone(),
        artifacts: Some(Arc::clone(&services.artifacts)),
    };
    let who = hippocamp_mcp::Authority::owner(scope, format!("http://{}", config.bind));
    hippocamp_mcp::serve_stdio(tools, backends, who).await?;
    services.stop_processor().await;
    Ok(())
}
