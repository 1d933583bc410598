//! The `hippocamp` command: argument parsing and wiring only; the work is
//! done by the library crates.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use hippocamp_eval::{InMemoryOpener, cranfield, locomo};
use hippocamp_memory::MemoryConfig;
use hippocamp_search::Bm25Params;

#[derive(Debug, Parser)]
#[command(
    name = "hippocamp",
    version,
    about = "Scoped long-term memory and versioned artifacts for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Measure retrieval quality and speed on evaluation data.
    #[command(subcommand)]
    Eval(Eval),
}

#[derive(Debug, Subcommand)]
enum Eval {
    /// LoCoMo turn retrieval: recall, MRR, nDCG, isolation, ingest rate, latency.
    Locomo {
        /// A LoCoMo JSON file (e.g. ../shared/data/locomo/locomo-dev.json).
        path: PathBuf,
        #[command(flatten)]
        common: Common,
        /// Skip the per-conversation isolation comparison.
        #[arg(long)]
        no_isolation: bool,
    },
    /// Cranfield: graded nDCG@10, MAP@100 and MRR.
    Cranfield {
        /// The folder holding cran.all.1400, cran.qry and cranqrel.
        dir: PathBuf,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Debug, Args)]
struct Common {
    /// Print one JSON object on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// BM25 k1 (0..=10).
    #[arg(long, default_value_t = Bm25Params::default().k1)]
    bm25_k1: f32,
    /// BM25 b (0..=1).
    #[arg(long, default_value_t = Bm25Params::default().b)]
    bm25_b: f32,
}

impl Common {
    fn bm25(&self) -> Bm25Params {
        Bm25Params {
            k1: self.bm25_k1,
            b: self.bm25_b,
        }
    }
}

fn print<T: serde::Serialize + std::fmt::Display>(report: &T, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        println!("{report}");
    }
    Ok(())
}

async fn eval(cmd: Eval) -> anyhow::Result<()> {
    match cmd {
        Eval::Locomo {
            path,
            common,
            no_isolation,
        } => {
            let samples = hippocamp_datasets::locomo::load(&path)?;
            let opts = locomo::LocomoOptions {
                config: MemoryConfig {
                    bm25: common.bm25(),
                    ..MemoryConfig::default()
                },
                isolation_check: !no_isolation,
                ..locomo::LocomoOptions::default()
            };
            let report = locomo::run(&InMemoryOpener, &samples, &opts).await?;
            print(&report, common.json)
        }
        Eval::Cranfield { dir, common } => {
            let collection = hippocamp_datasets::cranfield::load(&dir)?;
            let config = MemoryConfig {
                bm25: common.bm25(),
                ..cranfield::config()
            };
            let report = cranfield::run(&InMemoryOpener, &collection, config, true).await?;
            print(&report, common.json)
        }
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        match cli.command {
            Command::Eval(cmd) => eval(cmd).await,
        }
    })
}
