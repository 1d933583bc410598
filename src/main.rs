//! The `hippocamp` command: argument parsing and wiring only; the work is
//! done by the library crates.

mod memory_cli;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use async_trait::async_trait;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hippocamp_eval::{InMemoryOpener, StoreOpener, cranfield, locomo};
use hippocamp_memory::{MemoryConfig, MemoryStore};
use hippocamp_memory_redb::RedbMemoryStore;
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
    /// Memory operations on a local data directory.
    Memory {
        #[command(flatten)]
        target: memory_cli::Target,
        #[command(subcommand)]
        cmd: memory_cli::MemoryCmd,
    },
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
    /// The store to evaluate.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// Where a durable store keeps its data (a fresh temporary folder if
    /// not given); each store of the run gets a new sub-folder.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// The in-memory store.
    Memory,
    /// The durable store (redb).
    Durable,
}

/// Opens durable stores in fresh sub-folders of one directory.
struct DurableOpener {
    root: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

#[async_trait]
impl StoreOpener for DurableOpener {
    async fn open(
        &self,
        config: MemoryConfig,
        label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error> {
        let dir = self.root.join(label);
        if dir.exists() {
            return Err(hippocamp_core::Error::Unavailable(format!(
                "{} already exists; evaluation needs an empty store",
                dir.display()
            )));
        }
        let store = tokio::task::spawn_blocking(move || RedbMemoryStore::open(dir, config))
            .await
            .map_err(|e| hippocamp_core::Error::Unavailable(e.to_string()))??;
        Ok(Arc::new(store))
    }
}

impl Common {
    fn opener(&self) -> anyhow::Result<Box<dyn StoreOpener>> {
        Ok(match self.store {
            StoreKind::Memory => Box::new(InMemoryOpener),
            StoreKind::Durable => {
                let (root, temp) = if let Some(d) = &self.data_dir {
                    (d.clone(), None)
                } else {
                    let t = tempfile::tempdir().context("creating a temporary data directory")?;
                    (t.path().to_owned(), Some(t))
                };
                Box::new(DurableOpener { root, _temp: temp })
            }
        })
    }
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
            let report = locomo::run(&*common.opener()?, &samples, &opts).await?;
            print(&report, common.json)
        }
        Eval::Cranfield { dir, common } => {
            let collection = hippocamp_datasets::cranfield::load(&dir)?;
            let config = MemoryConfig {
                bm25: common.bm25(),
                ..cranfield::config()
            };
            let report = cranfield::run(&*common.opener()?, &collection, config, true).await?;
            print(&report, common.json)
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The cause chain on one line, without a backtrace: these are
            // user-facing errors.
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        match cli.command {
            Command::Eval(cmd) => eval(cmd).await,
            Command::Memory { target, cmd } => {
                let out = memory_cli::run(&target, cmd).await?;
                println!("{}", serde_json::to_string_pretty(&out)?);
                Ok(())
            }
        }
    })
}
