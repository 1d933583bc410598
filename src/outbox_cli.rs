//! `hippocamp outbox …`: the ingestion outbox of a local data directory
//! (durable profile), or of a running server with `--server URL --token
//! T`. Every command prints one JSON document on stdout; status replies
//! carry no event content, tokens or handles.

use std::time::{Duration, Instant};

use anyhow::bail;
use clap::{Args, Subcommand};
use hippocamp_core::MemoryScope;
use hippocamp_outbox::JobId;
use hippocamp_services::Services;
use serde_json::Value;

/// The scope of a job.
#[derive(Debug, Args)]
pub(crate) struct JobArgs {
    /// The application of the job's scope.
    #[arg(long)]
    app: String,
    /// The user of the job's scope.
    #[arg(long)]
    user: String,
    /// The job id (`job-…`).
    job: String,
}

#[derive(Debug, Subcommand)]
pub(crate) enum OutboxCmd {
    /// Counters: jobs by state, bytes queued, totals.
    Stats,
    /// One job's state and progress.
    Status(JobArgs),
    /// Cancel a job (its events are dropped).
    Cancel(JobArgs),
    /// Delete a finished job's status (a pending or running job is
    /// refused: cancel it first).
    Delete(JobArgs),
    /// Remove finished jobs older than the retention (one pass).
    Prune {
        /// Jobs to remove at most (default and ceiling:
        /// outbox.max_prune_batch).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Deliver what is queued, then print the counters (a data directory
    /// only: a server delivers on its own).
    Drain {
        /// Give up after this long, milliseconds.
        #[arg(long, default_value_t = 60_000)]
        timeout_ms: u64,
    },
}

fn job(args: &JobArgs) -> anyhow::Result<(MemoryScope, JobId)> {
    Ok((
        MemoryScope::parse(&args.app, &args.user)?,
        args.job.parse()?,
    ))
}

pub(crate) async fn run(target: &crate::Place, cmd: OutboxCmd) -> anyhow::Result<Value> {
    if let Some(remote) = target.remote()? {
        return run_remote(&remote, cmd).await;
    }
    let config = target.config()?;
    let services = Services::memory(&config).await?;
    let outbox = services.outbox()?;
    Ok(match cmd {
        OutboxCmd::Stats => serde_json::to_value(outbox.stats().await?)?,
        OutboxCmd::Status(args) => {
            let (scope, id) = job(&args)?;
            serde_json::to_value(
                services
                    .jobs()?
                    .status(&scope, &id, &crate::cli_call())
                    .await?,
            )?
        }
        OutboxCmd::Cancel(args) => {
            let (scope, id) = job(&args)?;
            serde_json::to_value(
                services
                    .jobs()?
                    .cancel(&scope, &id, &crate::cli_call())
                    .await?,
            )?
        }
        OutboxCmd::Delete(args) => {
            let (scope, id) = job(&args)?;
            services
                .jobs()?
                .delete(&scope, &id, &crate::cli_call())
                .await?;
            deleted(&id)
        }
        OutboxCmd::Prune { limit } => serde_json::to_value(outbox.prune(limit).await?)?,
        OutboxCmd::Drain { timeout_ms } => {
            let processor =
                hippocamp_outbox::Processor::start(outbox, config.outbox_processor.clone())?;
            let until = Instant::now() + Duration::from_millis(timeout_ms);
            let mut stats = outbox.stats().await?;
            while stats.pending + stats.running > 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(20)).await;
                stats = outbox.stats().await?;
            }
            processor.stop().await;
            if stats.pending + stats.running > 0 {
                bail!(
                    "{} jobs still queued after {timeout_ms} ms (some may be waiting out a retry): {}",
                    stats.pending + stats.running,
                    serde_json::to_string(&stats)?
                );
            }
            serde_json::to_value(stats)?
        }
    })
}

/// What `outbox delete` prints.
fn deleted(id: &JobId) -> Value {
    serde_json::json!({ "deleted": id.to_string() })
}

/// `METHOD /v1/apps/{app}/users/{user}/memory/jobs/{id}[/{action}]`.
async fn job_call(
    remote: &crate::remote::Remote,
    method: reqwest::Method,
    args: &JobArgs,
    action: Option<&str>,
) -> anyhow::Result<Value> {
    let (scope, id) = job(args)?;
    let id = id.to_string();
    let mut path = vec![
        "v1",
        "apps",
        scope.app().as_str(),
        "users",
        scope.user().as_str(),
        "memory",
        "jobs",
        &id,
    ];
    path.extend(action);
    remote.json(method, &path, &[], None).await
}

async fn run_remote(remote: &crate::remote::Remote, cmd: OutboxCmd) -> anyhow::Result<Value> {
    use reqwest::Method;
    Ok(match cmd {
        OutboxCmd::Stats => {
            remote
                .json(Method::GET, &["v1", "outbox", "stats"], &[], None)
                .await?
        }
        OutboxCmd::Status(args) => job_call(remote, Method::GET, &args, None).await?,
        OutboxCmd::Cancel(args) => job_call(remote, Method::POST, &args, Some("cancel")).await?,
        OutboxCmd::Delete(args) => {
            job_call(remote, Method::DELETE, &args, None).await?;
            deleted(&job(&args)?.1)
        }
        OutboxCmd::Prune { limit } => {
            let q: Vec<(&str, String)> = limit
                .map(|l| ("limit", l.to_string()))
                .into_iter()
                .collect();
            remote
                .json(Method::POST, &["v1", "outbox", "prune"], &q, None)
                .await?
        }
        OutboxCmd::Drain { .. } => {
            bail!("a server delivers on its own; drain is for a data directory")
        }
    })
}
