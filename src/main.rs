//! The `hippocamp` command: argument parsing and wiring only; the work is
//! done by the library crates.

mod artifacts_cli;
mod chat_cli;
mod consolidate_cli;
mod mcp_cli;
mod memory_cli;
mod outbox_cli;
mod remote;
mod server_cli;

// Every request allocates (query terms, score accumulators, hits), often on
// one thread and freed on another; glibc's allocator measured here scales
// to 1.69x on 2 cores for such a load, mimalloc to 1.92x. Built without
// transparent huge pages (see the workspace manifest).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use async_trait::async_trait;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hippocamp_eval::{StoreOpener, cranfield, locomo};
use hippocamp_memory::{MemoryConfig, MemoryStore};
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
    /// Run the HTTP server (the durable profile on ./hippocamp-data by default).
    Serve(server_cli::Serve),
    /// Manage the bearer tokens of a data directory (the durable profile)
    /// or of the distributed profile's database (`--config`).
    Token {
        /// The configuration file whose data directory holds the tokens.
        #[arg(long, global = true)]
        config: Option<PathBuf>,
        /// The data directory (overrides the file's `data_dir`; default
        /// ./hippocamp-data).
        #[arg(long, global = true)]
        data_dir: Option<PathBuf>,
        #[command(subcommand)]
        cmd: server_cli::TokenCmd,
    },
    /// Check a server configuration file.
    #[command(subcommand)]
    Config(server_cli::ConfigCmd),
    /// Measure retrieval quality and speed on evaluation data.
    #[command(subcommand)]
    Eval(Eval),
    /// System benchmarks (build with --release); each prints JSON.
    #[command(subcommand)]
    Bench(Bench),
    /// Artifact operations on a data directory, or on a running server
    /// with `--server` (repair: a data directory only).
    Artifacts {
        #[command(flatten)]
        target: artifacts_cli::Target,
        #[command(subcommand)]
        cmd: artifacts_cli::ArtifactsCmd,
    },
    /// Memory operations on a data directory, or on a running server with
    /// `--server`.
    Memory {
        #[command(flatten)]
        target: memory_cli::Target,
        #[command(subcommand)]
        cmd: memory_cli::MemoryCmd,
    },
    /// Talk to an agent over a local data directory: the runner with
    /// memory preload, built-in tools and ingestion, against an
    /// OpenAI-compatible (or Gemini) model endpoint.
    Chat(chat_cli::Chat),
    /// The MCP server over standard input and output for one user of a
    /// local data directory (for clients that spawn a process).
    Mcp(mcp_cli::Mcp),
    /// The ingestion outbox of a local data directory or a server.
    Outbox {
        #[command(flatten)]
        target: Place,
        #[command(subcommand)]
        cmd: outbox_cli::OutboxCmd,
    },
    /// One page of the audit log (erasures, denials, holds, consent
    /// changes, expiries; never content), oldest first.
    Audit {
        #[command(flatten)]
        target: Place,
        /// Records in the page, 1..=1000 (default 100).
        #[arg(long)]
        limit: Option<u64>,
        /// The `next_cursor` of the previous page.
        #[arg(long)]
        cursor: Option<String>,
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
        /// Search with paragraph-length queries: each question preceded
        /// by the turn before its first evidence turn.
        #[arg(long)]
        long_queries: bool,
        /// Also write each question's figures to FILE (JSON lines), for
        /// `eval compare`.
        #[arg(long, value_name = "FILE")]
        per_question: Option<PathBuf>,
        /// Search without a reference time (relative times in questions
        /// read against now, as a client without the field searches)
        /// instead of each conversation's last session date.
        #[arg(long)]
        no_reference_time: bool,
        /// Ingest each turn as a keyed item (namespace `("locomo",
        /// session)`, key its dia_id, its text indexed) and ask through the
        /// items' search, as a LangGraph store on hippocamp does (needs
        /// --no-reference-time).
        #[arg(long)]
        as_items: bool,
        /// Bury every N-th turn (1: each) in 2-16 KiB of generated code
        /// (the turn's text between its two halves): a one-line fact
        /// inside a pasted file.
        #[arg(long, value_name = "N")]
        long_turns: Option<usize>,
    },
    /// Compare two LoCoMo runs question by question (files written by
    /// `eval locomo --per-question`): the difference of a metric with a
    /// paired bootstrap 95% interval, per category, and whether the new
    /// run would be kept on by default.
    Compare {
        /// The base run's per-question file.
        base: PathBuf,
        /// The new run's per-question file.
        new: PathBuf,
        /// The metric.
        #[arg(long, value_enum, default_value_t = CompareMetric::HitAt10)]
        metric: CompareMetric,
        /// Bootstrap resamples.
        #[arg(long, default_value_t = 10_000)]
        resamples: usize,
        /// The bootstrap generator's seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print LoCoMo as `eval locomo` ingests and asks it (JSON), for
    /// other clients to replay.
    LocomoExport {
        /// A LoCoMo JSON file.
        path: PathBuf,
    },
    /// Cranfield: graded nDCG@10, MAP@100 and MRR.
    Cranfield {
        /// The folder holding cran.all.1400, cran.qry and cranqrel.
        dir: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// The secret rules on source files wrapped as turns: how many turns
    /// would be stored with a redaction (an upper bound on false
    /// positives: package sources hold few real credentials), by rule,
    /// with examples to judge by eye.
    Secrets {
        /// Files or folders to scan (e.g. ~/.cargo/registry/src, a Python
        /// environment's site-packages).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// File name endings to read, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "rs,py")]
        ext: Vec<String>,
        /// The most bytes of one turn (files are cut at line ends).
        #[arg(long, default_value_t = 4096)]
        turn_bytes: usize,
        /// Stop after this many files (in path order).
        #[arg(long)]
        max_files: Option<usize>,
        /// How many findings to show.
        #[arg(long, default_value_t = 20)]
        examples: usize,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// The S3 server of `bench artifacts-stream --store s3`.
#[derive(Debug, Args)]
struct S3Args {
    /// S3 endpoint.
    #[arg(long = "s3-endpoint", env = "HIPPOCAMP_TEST_S3_ENDPOINT")]
    endpoint: Option<String>,
    /// S3 bucket.
    #[arg(
        long = "s3-bucket",
        env = "HIPPOCAMP_TEST_S3_BUCKET",
        default_value = "hippocamp-test"
    )]
    bucket: String,
    /// S3 access key.
    #[arg(
        long = "s3-access-key",
        env = "HIPPOCAMP_TEST_S3_ACCESS_KEY",
        default_value = "hippocamp"
    )]
    access_key: String,
    /// S3 secret key.
    #[arg(
        long = "s3-secret-key",
        env = "HIPPOCAMP_TEST_S3_SECRET_KEY",
        default_value = "hippocamp-secret",
        hide_env_values = true
    )]
    secret_key: String,
}

/// Where `bench artifacts-stream` puts its artifact.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StreamStore {
    Filesystem,
    S3,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// One acknowledged add_entry on the durable store next to a raw
    /// write + fsync of the same bytes, interleaved in one run.
    DurableWrite {
        /// Samples of each.
        #[arg(long, default_value_t = 1_000)]
        samples: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// add_events batches of 1,000 ~200-byte turns: the in-memory store's
    /// CPU time per event, and the durable store's acknowledged rate next
    /// to the same entries written through its log and tables unchecked.
    DurableIngest {
        /// Batches of each.
        #[arg(long, default_value_t = 20)]
        batches: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// 64 scopes, 90% search / 10% add_entry through the router over the
    /// durable store, with 1 and 2 runtime worker threads.
    Router {
        /// Seconds per run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Entries per scope before the run.
        #[arg(long, default_value_t = 1_000)]
        entries_per_scope: usize,
        /// Concurrent clients (closed loop).
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// The store behind the router.
        #[arg(long, value_enum, default_value_t = StoreKind::Durable)]
        store: StoreKind,
        /// Share of add_entry operations, percent.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(0..=100))]
        write_percent: u16,
        /// Rounds of the three configurations (medians are compared).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
        rounds: u16,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Artifact put and get on the filesystem store, per size, each next
    /// to its raw floor measured in the same run.
    Artifacts {
        /// Sizes to measure.
        #[arg(long, value_delimiter = ',', value_parser = parse_size, default_value = "1KiB,64KiB,1MiB,16MiB")]
        sizes: Vec<u64>,
        /// Samples per size (fewer for sizes above 1 MiB: a tenth).
        #[arg(long, default_value_t = 300)]
        samples: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Artifact listing-page latency at many versions of one name and many
    /// names in one scope.
    ArtifactsList {
        /// Versions of one name.
        #[arg(long, default_value_t = 100_000)]
        versions: u64,
        /// Names in one scope.
        #[arg(long, default_value_t = 100_000)]
        names: u64,
        /// Items per page.
        #[arg(long, default_value_t = 100)]
        page: u64,
        /// Pages measured of each.
        #[arg(long, default_value_t = 1_000)]
        samples: usize,
        /// Working folder (a temporary one if not given; give one to reuse
        /// the filled store).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Puts and gets one large artifact as streams; reports times and the
    /// peak resident memory of this process.
    ArtifactsStream {
        /// Artifact size.
        #[arg(long, value_parser = parse_size, default_value = "1GiB")]
        size: u64,
        /// The store.
        #[arg(long, value_enum, default_value_t = StreamStore::Filesystem)]
        store: StreamStore,
        #[command(flatten)]
        s3: S3Args,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Many distinct scopes, each served once (a write, then a search),
    /// through the exact-scope router (default bounds: 1,024 live workers)
    /// over the durable store.
    Scopes {
        /// Distinct scopes.
        #[arg(long, default_value_t = 100_000)]
        scopes: u64,
        /// Concurrent clients (closed loop).
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The ingestion outbox: one durable admission of a 20-event job next
    /// to a raw append + fdatasync of its bytes; delivery by 2 workers
    /// next to 2 direct add_events callers; a claim pass with few and
    /// many pending jobs.
    Outbox {
        /// Admission samples.
        #[arg(long, default_value_t = 1_000)]
        samples: usize,
        /// Jobs (of 20 events) per delivery round.
        #[arg(long, default_value_t = 500)]
        jobs: usize,
        /// Delivery rounds, each a processor half and a direct half in
        /// alternating order (the median of their ratios is the figure).
        #[arg(long, default_value_t = 15)]
        rounds: usize,
        /// Pending jobs of the small claim queue.
        #[arg(long, default_value_t = 100)]
        few: usize,
        /// Pending jobs of the large claim queue.
        #[arg(long, default_value_t = 100_000)]
        many: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The HTTP layer: a bare route (same runtime, no layers, the bytes of
    /// a search reply), then search on a 600-entry scope, add, and a 90/10
    /// mix, at 1 and 32 connections; server on CPU 0, load on CPU 1
    Http {
        /// Measured seconds per phase.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Resident memory per stored entry: scopes × entries of ~200-byte
    /// turns, each scope searched once (active), RSS before and after
    Footprint {
        /// Scopes.
        #[arg(long, default_value_t = 100)]
        scopes: usize,
        /// Entries per scope.
        #[arg(long, default_value_t = 600)]
        entries: usize,
        /// The store.
        #[arg(long, value_enum, default_value_t = StoreKind::Durable)]
        store: StoreKind,
        /// The durable store's `scope_cache_bytes`.
        #[arg(long, default_value_t = hippocamp_memory_redb::SCOPE_CACHE_BYTES.0)]
        scope_cache_bytes: u64,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The server half of `bench http` (run by it).
    #[command(hide = true)]
    HttpServer {
        /// The server's data folder.
        #[arg(long)]
        dir: PathBuf,
    },
    /// The load half of `bench http` (run by it).
    #[command(hide = true)]
    HttpLoad {
        /// Measured seconds per phase.
        #[arg(long)]
        seconds: f64,
        /// A file holding what the server half printed.
        #[arg(long)]
        target: PathBuf,
    },
    /// An MCP memory_search round trip over HTTP next to the API v1
    /// search round trip, interleaved, on one server.
    Mcp {
        /// Calls of each.
        #[arg(long, default_value_t = 5_000)]
        samples: usize,
    },
    /// Turns per second into a store that embeds: short LoCoMo turns, then
    /// long code-heavy ones (2-16 KiB, generated), same embedder, same run.
    EmbedIngest {
        /// The embedder: `http:<base url>` or `local:<model dir>`.
        #[arg(long)]
        embedder: String,
        /// The model to ask the embedding endpoint for.
        #[arg(long)]
        embedder_model: Option<String>,
        /// Turns of each kind.
        #[arg(long, default_value_t = 200)]
        turns: usize,
        /// The embedder's window in tokens (`embed.max_input_tokens`;
        /// 8192 with `--max-batch-tokens 131072` sends texts whole, as
        /// before windows).
        #[arg(long, default_value_t = hippocamp_embed::EmbedLimits::default().max_input_tokens)]
        max_input_tokens: u64,
        /// Estimated tokens of one call (`embed.max_batch_tokens`).
        #[arg(long, default_value_t = hippocamp_embed::EmbedLimits::default().max_batch_tokens)]
        max_batch_tokens: u64,
    },
    /// The reranking stage's latency: one call scoring a LoCoMo question
    /// against its candidates (LoCoMo turns), p50/p95/p99.
    Rerank {
        /// The reranker: `rerank:<base url>` (a `/rerank` endpoint),
        /// `http:<base url>` or `local:<model dir>` (an embedder as a
        /// bi-encoder).
        #[arg(long)]
        reranker: String,
        /// The model the reranker's endpoint serves.
        #[arg(long)]
        reranker_model: Option<String>,
        /// Documents per call.
        #[arg(long, default_value_t = 20)]
        candidates: usize,
        /// Calls measured.
        #[arg(long, default_value_t = 200)]
        samples: usize,
    },
    /// Consolidation without a model: merge precision and recall of a
    /// dedupe run over generated notes with reworded copies, and its time
    /// per 1,000 entries.
    Dedupe {
        /// Entries in the scope.
        #[arg(long, default_value_t = 10_000)]
        entries: usize,
        /// Share of them that are reworded copies.
        #[arg(long, default_value_t = 0.2)]
        copies: f64,
    },
    /// Knowledge updates without a model: how often the current value of
    /// a changed fact ranks above the stale one, as notes (today, after a
    /// dedupe run) and as keyed facts.
    Updates {
        /// Changed attributes (at most 48).
        #[arg(long, default_value_t = 48)]
        questions: usize,
    },
    /// One extract run with a real model over LoCoMo turns: how it ends,
    /// its model calls and tokens.
    Extract {
        /// The model's OpenAI-compatible base URL (`…/v1`).
        #[arg(long)]
        model_url: String,
        /// The model name.
        #[arg(long, default_value = "smollm2")]
        model: String,
        /// Turns in the scope.
        #[arg(long, default_value_t = 100)]
        turns: usize,
        /// Turns shown per call.
        #[arg(long, default_value_t = 20)]
        turns_per_call: u64,
    },
    /// Memory preload (query shaping, search, checks, bounds, framing)
    /// next to the plain search it wraps, on a 600-entry scope,
    /// interleaved.
    Preload {
        /// Calls of each.
        #[arg(long, default_value_t = 20_000)]
        samples: usize,
    },
    /// `hippocamp memory export` of one user of the durable store, as its
    /// own process: its peak resident memory and time (the store is
    /// filled in DIR once and reused).
    Export {
        /// Entries of the user.
        #[arg(long, default_value_t = 100_000)]
        entries: usize,
        /// Where the data directory is kept between runs (default: a
        /// temporary one).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The PostgreSQL memory store (`HIPPOCAMP_POSTGRES_URL`, a fresh
    /// schema) next to the durable store in one run: search latency on a
    /// 600-entry scope (interleaved) and ingestion throughput, with one and
    /// with two servers.
    Postgres {
        /// Searches of each store.
        #[arg(long, default_value_t = 5_000)]
        samples: usize,
        /// `add_events` batches of 1,000 events per run.
        #[arg(long, default_value_t = 20)]
        batches: usize,
        /// Working folder of the durable store (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Vector search on the PostgreSQL memory store
    /// (`HIPPOCAMP_POSTGRES_URL`, a fresh schema) on scopes of several
    /// sizes: ranked exactly in the server's copy next to pgvector's HNSW
    /// index, interleaved, with the index's recall@10.
    PostgresVectors {
        /// Entries of each scope, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,30000")]
        sizes: Vec<usize>,
        /// Searches of each kind per size.
        #[arg(long, default_value_t = 500)]
        samples: usize,
        /// The embedder: `http:<base url>` (with `--embedder-model`) or
        /// `local:<model dir>`; the hashing embedder (384 dimensions)
        /// when absent.
        #[arg(long)]
        embedder: Option<String>,
        /// The model an `http:` embedder serves.
        #[arg(long)]
        embedder_model: Option<String>,
    },
    /// Search through the governance policy (PolicyChecked and a static
    /// policy) next to the bare store, on a 600-entry scope, interleaved.
    Policy {
        /// Searches of each.
        #[arg(long, default_value_t = 20_000)]
        samples: usize,
    },
    /// Open time of a durable store of scopes × entries (built in the
    /// folder on first use and reused after).
    Open {
        /// Scopes.
        #[arg(long, default_value_t = 10_000)]
        scopes: usize,
        /// Entries per scope.
        #[arg(long, default_value_t = 100)]
        per_scope: usize,
        /// Working folder (a temporary one if not given).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

/// `bench artifacts-stream`.
async fn bench_stream(
    size: u64,
    store: StreamStore,
    s3: S3Args,
    dir: Option<PathBuf>,
) -> anyhow::Result<serde_json::Value> {
    let (d, _t) = workdir(dir)?;
    let run = match store {
        StreamStore::Filesystem => {
            let s = hippocamp_bench::artifacts::fs_store(&d)?;
            hippocamp_bench::artifacts::stream(&s, "filesystem", size).await?
        }
        #[cfg(not(feature = "s3"))]
        StreamStore::S3 => {
            let _ = s3;
            anyhow::bail!("this build has no S3 support: rebuild with `--features s3`")
        }
        #[cfg(feature = "s3")]
        StreamStore::S3 => {
            let config = hippocamp_artifacts_object::S3Config {
                endpoint: Some(
                    s3.endpoint
                        .context("--s3-endpoint (or HIPPOCAMP_TEST_S3_ENDPOINT) is required")?,
                ),
                bucket: s3.bucket,
                region: "us-east-1".to_owned(),
                access_key_id: s3.access_key,
                secret_access_key: s3.secret_key,
                allow_http: true,
                virtual_hosted: false,
                request_timeout_ms: 300_000,
            };
            let options = hippocamp_artifacts_object::ObjectOptions {
                prefix: format!("bench/{}", std::process::id()),
                max_artifact_bytes: 5 << 40,
                ..hippocamp_artifacts_object::ObjectOptions::default()
            };
            let s = hippocamp_artifacts_object::ObjectArtifacts::s3(&config, options).await?;
            hippocamp_bench::artifacts::stream(&s, "s3", size).await?
        }
    };
    Ok(serde_json::to_value(run)?)
}

/// Prints a line on stdout; a reader that went away (`| head`) ends the
/// output quietly instead of failing.
fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Parses a size such as `64KiB`, `1MiB`, `1GiB` or `1024`.
fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        .iter()
        .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
        .unwrap_or((s, 1));
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("`{s}` is not a size (e.g. 1024, 64KiB, 16MiB, 1GiB)"))
}

/// A working folder: the one given, or a temporary one removed afterwards.
fn workdir(dir: Option<PathBuf>) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    if let Some(d) = dir {
        std::fs::create_dir_all(&d)?;
        return Ok((d, None));
    }
    let t = tempfile::tempdir_in(".").context("creating a working folder")?;
    Ok((t.path().to_owned(), Some(t)))
}

// One arm per benchmark: a dispatch table, read top to bottom.
#[allow(clippy::too_many_lines)]
async fn bench(cmd: Bench) -> anyhow::Result<serde_json::Value> {
    Ok(match cmd {
        Bench::DurableWrite { samples, dir } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(hippocamp_bench::durable_write(&d, samples).await?)?
        }
        Bench::DurableIngest { batches, dir } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(hippocamp_bench::durable_ingest(&d, batches)?)?
        }
        Bench::Router {
            seconds,
            entries_per_scope,
            write_percent,
            clients,
            store,
            rounds,
            dir,
        } => {
            anyhow::ensure!(
                store != StoreKind::Postgres,
                "the router benchmark runs on the memory or the durable store"
            );
            let (d, _t) = workdir(dir)?;
            let workload = hippocamp_bench::RouterWorkload {
                seconds,
                entries_per_scope,
                clients,
                write_percent: usize::from(write_percent),
                durable: store == StoreKind::Durable,
                rounds: usize::from(rounds),
            };
            let r = tokio::task::spawn_blocking(move || hippocamp_bench::router(&d, workload))
                .await??;
            serde_json::to_value(r)?
        }
        Bench::Artifacts {
            sizes,
            samples,
            dir,
        } => {
            let (d, _t) = workdir(dir)?;
            let per = move |size: u64| {
                if size > 1 << 20 {
                    (samples / 10).max(3)
                } else {
                    samples
                }
            };
            serde_json::to_value(hippocamp_bench::artifacts::put_get(&d, &sizes, per).await?)?
        }
        Bench::ArtifactsList {
            versions,
            names,
            page,
            samples,
            dir,
        } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(
                hippocamp_bench::artifacts::list(&d, versions, names, page, samples).await?,
            )?
        }
        Bench::ArtifactsStream {
            size,
            store,
            s3,
            dir,
        } => bench_stream(size, store, s3, dir).await?,
        Bench::Scopes {
            scopes,
            clients,
            dir,
        } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(hippocamp_bench::scopes(&d, scopes, clients).await?)?
        }
        Bench::Outbox {
            samples,
            jobs,
            rounds,
            few,
            many,
            dir,
        } => {
            let (d, _t) = workdir(dir)?;
            let admission =
                hippocamp_bench::outbox::admission(&d.join("admission"), samples).await?;
            let delivery =
                hippocamp_bench::outbox::delivery(&d.join("delivery"), jobs, rounds).await?;
            let claim = hippocamp_bench::outbox::claim(&d.join("claim"), few, many, 200).await?;
            serde_json::json!({"admission": admission, "delivery": delivery, "claim": claim})
        }
        Bench::Http { seconds, dir } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(hippocamp_bench::http::http(&d.join("server"), seconds).await?)?
        }
        Bench::Footprint {
            scopes,
            entries,
            store,
            scope_cache_bytes,
            dir,
        } => {
            anyhow::ensure!(
                store != StoreKind::Postgres,
                "the footprint benchmark runs on the memory or the durable store"
            );
            let (d, _t) = workdir(dir)?;
            let dir = (store == StoreKind::Durable).then_some(d.as_path());
            serde_json::to_value(
                hippocamp_bench::footprint::footprint(dir, scopes, entries, scope_cache_bytes)
                    .await?,
            )?
        }
        Bench::HttpServer { dir } => {
            server_cli::init_logging();
            hippocamp_bench::http::serve(&dir).await?;
            serde_json::Value::Null
        }
        Bench::HttpLoad { seconds, target } => {
            let target = serde_json::from_slice(&std::fs::read(&target)?)?;
            serde_json::to_value(hippocamp_bench::http::load(target, seconds).await?)?
        }
        Bench::Mcp { samples } => serde_json::to_value(hippocamp_bench::mcp::mcp(samples).await?)?,
        Bench::Export { entries, dir } => {
            let tmp = tempfile::tempdir()?;
            let dir = dir.unwrap_or_else(|| tmp.path().join("data"));
            let exe = std::env::current_exe()?;
            serde_json::to_value(hippocamp_bench::export::export(&exe, &dir, entries).await?)?
        }
        Bench::Postgres {
            samples,
            batches,
            dir,
        } => {
            let url = std::env::var("HIPPOCAMP_POSTGRES_URL")
                .context("bench postgres reads the URL from HIPPOCAMP_POSTGRES_URL")?;
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(
                hippocamp_bench::postgres::postgres(&d, &url, samples, batches).await?,
            )?
        }
        Bench::PostgresVectors {
            sizes,
            samples,
            embedder,
            embedder_model,
        } => {
            let url = std::env::var("HIPPOCAMP_POSTGRES_URL")
                .context("bench postgres-vectors reads the URL from HIPPOCAMP_POSTGRES_URL")?;
            let (e, label): (Arc<dyn hippocamp_embed::Embedder>, String) = match embedder {
                None => (
                    Arc::new(hippocamp_embed::hash::HashEmbedder::new(384)),
                    "hashing (384)".to_owned(),
                ),
                Some(spec) => {
                    let e = hippocamp_services::connect_embedder(&cli_embedder(
                        &spec,
                        embedder_model.as_deref(),
                    )?)
                    .await
                    .context("starting the embedder")?;
                    let label = format!("{}@{spec}", e.model());
                    (e, label)
                }
            };
            serde_json::to_value(
                hippocamp_bench::postgres::vectors(&url, e, &label, &sizes, samples).await?,
            )?
        }
        Bench::Policy { samples } => {
            serde_json::to_value(hippocamp_bench::policy::policy(samples).await?)?
        }
        Bench::EmbedIngest {
            embedder,
            embedder_model,
            turns,
            max_input_tokens,
            max_batch_tokens,
        } => {
            let mut config = cli_embedder(&embedder, embedder_model.as_deref())?;
            config.limits.max_input_tokens = max_input_tokens;
            config.limits.max_batch_tokens = max_batch_tokens;
            config.limits.validate()?;
            let e = hippocamp_services::connect_embedder(&config)
                .await
                .context("starting the embedder")?;
            let dir = hippocamp_datasets::data_dir()
                .context("set HIPPOCAMP_DATA_DIR or provide ../shared/data")?;
            let short = hippocamp_datasets::corpus::texts(&dir, turns)?;
            let long = hippocamp_bench::embed::long_turns(turns);
            serde_json::to_value(hippocamp_bench::embed::embed_ingest(e, short, long).await?)?
        }
        Bench::Rerank {
            reranker,
            reranker_model,
            candidates,
            samples,
        } => {
            let mut config = cli_reranker(&reranker, reranker_model.as_deref())?;
            config.limits.candidates = u64::try_from(candidates)?;
            let stage = hippocamp_services::reranker::connect(&config, None)
                .await
                .context("starting the reranker")?;
            serde_json::to_value(
                hippocamp_bench::rerank::rerank(stage.reranker, candidates, samples).await?,
            )?
        }
        Bench::Dedupe { entries, copies } => {
            anyhow::ensure!((0.0..1.0).contains(&copies), "--copies is a share in 0..1");
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let n = (entries as f64 * copies).round() as usize;
            serde_json::to_value(hippocamp_bench::consolidation::dedupe(entries, n).await?)?
        }
        Bench::Updates { questions } => {
            serde_json::to_value(hippocamp_bench::consolidation::updates(questions).await?)?
        }
        Bench::Extract {
            model_url,
            model,
            turns,
            turns_per_call,
        } => {
            let config = hippocamp_models::ModelConfig {
                provider: hippocamp_models::Provider::Openai,
                base_url: model_url,
                model,
                api_key: None,
                limits: hippocamp_models::ModelLimits::default(),
            };
            let limits = hippocamp_services::consolidation::extract::ExtractLimits {
                turns_per_call,
                max_model_calls: 1_000,
                ..Default::default()
            };
            limits.check_ranges()?;
            serde_json::to_value(
                hippocamp_bench::consolidation::extract(config, turns, limits).await?,
            )?
        }
        Bench::Preload { samples } => {
            serde_json::to_value(hippocamp_bench::preload::preload(samples).await?)?
        }
        Bench::Open {
            scopes,
            per_scope,
            dir,
        } => {
            let (d, _t) = workdir(dir)?;
            serde_json::to_value(hippocamp_bench::open(&d, scopes, per_scope).await?)?
        }
    })
}

/// What `eval compare` compares.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CompareMetric {
    /// Any evidence turn in the top 10.
    HitAt10,
    /// Share of the evidence turns in the top 10.
    RecallAt10,
    /// Reciprocal rank of the first evidence turn.
    Rr,
    /// A top-10 hit from a session holding evidence.
    SessionHitAt10,
}

impl From<CompareMetric> for hippocamp_eval::compare::Metric {
    fn from(m: CompareMetric) -> Self {
        match m {
            CompareMetric::HitAt10 => Self::HitAt10,
            CompareMetric::RecallAt10 => Self::RecallAt10,
            CompareMetric::Rr => Self::Rr,
            CompareMetric::SessionHitAt10 => Self::SessionHitAt10,
        }
    }
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
    /// BM25 k3, query term-frequency saturation (0..=1000; 0 weighs every
    /// query term once).
    #[arg(long, default_value_t = Bm25Params::default().k3)]
    bm25_k3: f32,
    /// Lexical search without session cohesion (BM25 alone; the stage is
    /// on by default).
    #[arg(long)]
    no_neighbours: bool,
    /// Lexical search without the time stage (on by default).
    #[arg(long)]
    no_time: bool,
    /// Long entries indexed whole, not as passages (on by default).
    #[arg(long)]
    no_passages: bool,
    /// How hybrid search fuses its lists (default: weighted).
    #[arg(long, value_enum)]
    fusion: Option<FusionArg>,
    /// The store to evaluate.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// Where a durable store keeps its data (a fresh temporary folder if
    /// not given); each store of the run gets a new sub-folder.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Search mode (default: hybrid with an embedder, lexical without).
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// The embedder: `http:<base url>` (an OpenAI-compatible endpoint) or
    /// `local:<model dir>`.
    #[arg(long)]
    embedder: Option<String>,
    /// The model to ask the embedding endpoint for.
    #[arg(long)]
    embedder_model: Option<String>,
    /// A reranking stage: `rerank:<base url>` (a `/rerank` endpoint),
    /// `http:<base url>` or `local:<model dir>` (an embedder as a
    /// bi-encoder), or `embedder` (the store's own embedder).
    #[arg(long)]
    reranker: Option<String>,
    /// The model the reranker's endpoint serves.
    #[arg(long)]
    reranker_model: Option<String>,
    /// The reranker's share of the blended order (0..=1).
    #[arg(long, default_value_t = hippocamp_services::reranker::DEFAULT_WEIGHT)]
    rerank_weight: f32,
    /// Best first-stage hits reranked per search (1..=100).
    #[arg(long, default_value_t = hippocamp_embed::rerank::RerankLimits::default().candidates)]
    rerank_candidates: u64,
    /// The reranking stage's deadline in milliseconds (a search whose
    /// reranker misses it keeps the first stage's order).
    #[arg(long, default_value_t = hippocamp_embed::rerank::RerankLimits::default().timeout_ms)]
    rerank_timeout_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FusionArg {
    /// Min-max-normalised scores, weighted (`dense_weight`).
    Weighted,
    /// Reciprocal-rank fusion (`rrf_k`).
    Rrf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Lexical,
    Vector,
    Hybrid,
}

impl From<ModeArg> for hippocamp_memory::SearchMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Lexical => Self::Lexical,
            ModeArg::Vector => Self::Vector,
            ModeArg::Hybrid => Self::Hybrid,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    /// The in-memory store.
    Memory,
    /// The durable store (redb).
    Durable,
    /// PostgreSQL (`HIPPOCAMP_POSTGRES_URL`), a fresh schema per store.
    Postgres,
}

/// Opens the stores of an evaluation on PostgreSQL (the URL in
/// `HIPPOCAMP_POSTGRES_URL`), each on a fresh schema of its own, behind the
/// reply check, with the embedder when one is given.
struct PostgresOpener {
    url: String,
    embedder: Option<(Arc<dyn hippocamp_embed::Embedder>, String)>,
    reranker: Option<hippocamp_services::reranker::RerankerConfig>,
}

#[async_trait]
impl StoreOpener for PostgresOpener {
    async fn open(
        &self,
        config: MemoryConfig,
        _label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error> {
        let schema = format!("eval_{:016x}", rand::random::<u64>());
        let db = hippocamp_postgres::Database::connect(
            &hippocamp_postgres::PgConfig::new(&self.url).schema(schema),
        )
        .await?;
        let mut store = hippocamp_postgres::PgMemoryStore::open(db, config)?;
        if let Some((e, _)) = &self.embedder {
            store = store.with_embedder(Arc::clone(e)).await?;
        }
        let store: Arc<dyn MemoryStore> = Arc::new(hippocamp_memory::ScopeChecked::new(store));
        match &self.reranker {
            Some(r) => {
                let stage = hippocamp_services::reranker::connect(
                    r,
                    self.embedder.as_ref().map(|(e, _)| e),
                )
                .await?;
                Ok(Arc::new(hippocamp_memory::Reranked::new(store, stage)?))
            }
            None => Ok(store),
        }
    }

    fn embedder(&self) -> Option<String> {
        self.embedder.as_ref().map(|(_, label)| label.clone())
    }
}

/// Opens the stores of an evaluation through the services, as the server
/// would: in memory, or durable in fresh sub-folders of one directory;
/// with the embedder when one is given.
struct ServicesOpener {
    profile: hippocamp_services::Profile,
    root: PathBuf,
    embedder: Option<(Arc<dyn hippocamp_embed::Embedder>, String)>,
    reranker: Option<hippocamp_services::reranker::RerankerConfig>,
    _temp: Option<tempfile::TempDir>,
}

#[async_trait]
impl StoreOpener for ServicesOpener {
    async fn open(
        &self,
        config: MemoryConfig,
        label: &str,
    ) -> Result<Arc<dyn MemoryStore>, hippocamp_core::Error> {
        let data_dir = self.root.join(label);
        if self.profile == hippocamp_services::Profile::Durable && data_dir.exists() {
            return Err(hippocamp_core::Error::Unavailable(format!(
                "{} already exists; evaluation needs an empty store",
                data_dir.display()
            )));
        }
        let config = hippocamp_services::Config {
            profile: self.profile,
            data_dir,
            memory: config,
            reranker: self.reranker.clone(),
            ..hippocamp_services::Config::default()
        };
        let embedder = self.embedder.as_ref().map(|(e, _)| Arc::clone(e));
        tokio::task::spawn_blocking(move || {
            hippocamp_services::Services::memory_with(&config, embedder).map(|m| m.memory)
        })
        .await
        .map_err(|e| hippocamp_core::Error::Unavailable(e.to_string()))?
    }

    fn embedder(&self) -> Option<String> {
        self.embedder.as_ref().map(|(_, label)| label.clone())
    }
}

impl Common {
    async fn opener(&self) -> anyhow::Result<Box<dyn StoreOpener>> {
        let embedder = match &self.embedder {
            None => None,
            Some(spec) => {
                let e = hippocamp_services::connect_embedder(&cli_embedder(
                    spec,
                    self.embedder_model.as_deref(),
                )?)
                .await
                .context("starting the embedder")?;
                let label = format!("{}@{spec}", e.model());
                Some((e, label))
            }
        };
        let reranker = self.reranker()?;
        let (profile, root, temp) = match self.store {
            StoreKind::Postgres => {
                let url = std::env::var("HIPPOCAMP_POSTGRES_URL")
                    .context("--store postgres reads the URL from HIPPOCAMP_POSTGRES_URL")?;
                return Ok(Box::new(PostgresOpener {
                    url,
                    embedder,
                    reranker,
                }));
            }
            StoreKind::Memory => (hippocamp_services::Profile::Ephemeral, PathBuf::new(), None),
            StoreKind::Durable => {
                if let Some(d) = &self.data_dir {
                    (hippocamp_services::Profile::Durable, d.clone(), None)
                } else {
                    let t = tempfile::tempdir().context("creating a temporary data directory")?;
                    let root = t.path().to_owned();
                    (hippocamp_services::Profile::Durable, root, Some(t))
                }
            }
        };
        Ok(Box::new(ServicesOpener {
            profile,
            root,
            embedder,
            reranker,
            _temp: temp,
        }))
    }

    /// The `[reranker]` `--reranker` names.
    fn reranker(&self) -> anyhow::Result<Option<hippocamp_services::reranker::RerankerConfig>> {
        let Some(spec) = &self.reranker else {
            return Ok(None);
        };
        let mut config = cli_reranker(spec, self.reranker_model.as_deref())?;
        config.weight = self.rerank_weight;
        config.limits.candidates = self.rerank_candidates;
        config.limits.timeout_ms = self.rerank_timeout_ms;
        config.validate(self.embedder.is_some())?;
        Ok(Some(config))
    }
}

/// The `[reranker]` a `--reranker` spec names, with default parameters:
/// `rerank:<base url>` (a `/rerank` endpoint, with `model`),
/// `http:<base url>` or `local:<model dir>` (an embedder as a
/// bi-encoder), or `embedder` (the store's own).
fn cli_reranker(
    spec: &str,
    model: Option<&str>,
) -> anyhow::Result<hippocamp_services::reranker::RerankerConfig> {
    use hippocamp_services::reranker::{DEFAULT_WEIGHT, RerankEndpoint, RerankerConfig};
    let mut config = RerankerConfig {
        endpoint: None,
        embedder: None,
        use_embedder: false,
        weight: DEFAULT_WEIGHT,
        limits: hippocamp_embed::rerank::RerankLimits::default(),
    };
    if spec == "embedder" {
        config.use_embedder = true;
    } else if let Some(url) = spec.strip_prefix("rerank:") {
        config.endpoint = Some(RerankEndpoint {
            base_url: url.to_owned(),
            model: model
                .context("--reranker rerank:… needs --reranker-model")?
                .to_owned(),
            shape: hippocamp_embed::http_rerank::RerankShape::default(),
            api_key_env: Some("HIPPOCAMP_RERANK_API_KEY".to_owned()),
        });
    } else {
        config.embedder = Some(
            cli_embedder(spec, model)
                .context("--reranker is rerank:<url>, http:<url>, local:<dir> or embedder")?,
        );
    }
    Ok(config)
}

/// The configuration a command on a data directory uses: the file given
/// (`--config`), or the defaults, with `--data-dir` overriding its
/// `data_dir`. Only the durable profile has a data directory to work on.
/// Where a CLI command works: a data directory (and the configuration
/// file the server would read) or a running server.
#[derive(Debug, Args)]
pub(crate) struct Place {
    /// The configuration file (limits, embedder, data directory), as the
    /// server reads it; unknown keys are refused.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// The data directory (overrides the file's `data_dir`; default
    /// ./hippocamp-data).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// A running server to use instead of the data directory.
    #[arg(long, global = true, env = "HIPPOCAMP_SERVER", hide_env_values = true)]
    server: Option<String>,
    /// The bearer token for `--server`.
    #[arg(long, global = true, env = "HIPPOCAMP_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

impl Place {
    /// Whether `--server` was given.
    pub(crate) fn is_remote(&self) -> bool {
        self.server.is_some()
    }

    /// The server named by `--server`, if any.
    pub(crate) fn remote(&self) -> anyhow::Result<Option<remote::Remote>> {
        self.server
            .as_deref()
            .map(|s| remote::Remote::new(s, self.token.as_deref()))
            .transpose()
    }

    /// The data directory's configuration.
    pub(crate) fn config(&self) -> anyhow::Result<hippocamp_services::Config> {
        local_config(self.config.as_deref(), self.data_dir.as_deref())
    }
}

/// Options of a call the command line makes on a data directory: on its
/// own authority (`CallerKind::Cli`), for the policy and the audit log.
pub(crate) fn cli_call() -> hippocamp_core::CallOptions {
    hippocamp_core::CallOptions::default()
        .on_behalf_of(hippocamp_core::Caller::of(hippocamp_core::CallerKind::Cli))
}

pub(crate) fn local_config(
    file: Option<&std::path::Path>,
    data_dir: Option<&std::path::Path>,
) -> anyhow::Result<hippocamp_services::Config> {
    let config = any_config(file, data_dir)?;
    if config.profile != hippocamp_services::Profile::Durable {
        anyhow::bail!(
            "the configuration's profile is `{}`; these commands work on a durable data directory (or on a server with --server)",
            config.profile.as_str()
        );
    }
    Ok(config)
}

/// The configuration of `file` (or the default) with `data_dir`, of any
/// profile.
fn any_config(
    file: Option<&std::path::Path>,
    data_dir: Option<&std::path::Path>,
) -> anyhow::Result<hippocamp_services::Config> {
    let mut config = match file {
        Some(f) => {
            hippocamp_services::Config::load(f).with_context(|| format!("in {}", f.display()))?
        }
        None => hippocamp_services::Config::default(),
    };
    if let Some(d) = data_dir {
        d.clone_into(&mut config.data_dir);
    }
    Ok(config)
}

/// The embedder section a `--embedder http:URL` (with `--embedder-model`)
/// or `--embedder local:DIR` argument stands for: the server's
/// `[embedder]` section, connected the same way.
pub(crate) fn cli_embedder(
    spec: &str,
    model: Option<&str>,
) -> anyhow::Result<hippocamp_services::EmbedderConfig> {
    let mut config = hippocamp_services::EmbedderConfig {
        base_url: None,
        model: None,
        model_dir: None,
        dimension: None,
        api_key_env: Some("HIPPOCAMP_EMBED_API_KEY".to_owned()),
        limits: hippocamp_embed::EmbedLimits::default(),
        local: hippocamp_embed::LocalLimits::default(),
        startup_wait_ms: hippocamp_services::embedder::DEFAULT_STARTUP_WAIT_MS,
    };
    if let Some(url) = spec.strip_prefix("http:") {
        let model = model.context("--embedder http:… needs --embedder-model")?;
        config.base_url = Some(url.to_owned());
        config.model = Some(model.to_owned());
    } else if let Some(dir) = spec.strip_prefix("local:") {
        config.model_dir = Some(PathBuf::from(dir));
    } else {
        anyhow::bail!("--embedder is http:<base url> or local:<model dir>");
    }
    Ok(config)
}

impl Common {
    fn bm25(&self) -> Bm25Params {
        Bm25Params {
            k1: self.bm25_k1,
            b: self.bm25_b,
            k3: self.bm25_k3,
        }
    }

    fn neighbours(&self) -> hippocamp_search::NeighbourParams {
        hippocamp_search::NeighbourParams {
            enabled: !self.no_neighbours,
            ..hippocamp_search::NeighbourParams::default()
        }
    }

    /// `base` with the stages and parameters the options set.
    fn memory_config(&self, base: MemoryConfig) -> MemoryConfig {
        MemoryConfig {
            bm25: self.bm25(),
            neighbours: self.neighbours(),
            time: self.time(),
            passages: self.passages(),
            fusion: self.fusion(base.fusion),
            ..base
        }
    }

    fn passages(&self) -> hippocamp_search::PassageParams {
        hippocamp_search::PassageParams {
            enabled: !self.no_passages,
            ..hippocamp_search::PassageParams::default()
        }
    }

    fn fusion(&self, base: hippocamp_search::FusionParams) -> hippocamp_search::FusionParams {
        hippocamp_search::FusionParams {
            method: match self.fusion {
                None => base.method,
                Some(FusionArg::Weighted) => hippocamp_search::FusionMethod::Weighted,
                Some(FusionArg::Rrf) => hippocamp_search::FusionMethod::Rrf,
            },
            ..base
        }
    }

    fn time(&self) -> hippocamp_search::TimeParams {
        hippocamp_search::TimeParams {
            enabled: !self.no_time,
            ..hippocamp_search::TimeParams::default()
        }
    }
}

fn print<T: serde::Serialize + std::fmt::Display>(report: &T, json: bool) -> anyhow::Result<()> {
    if json {
        emit(&serde_json::to_string(report)?)?;
    } else {
        emit(&report.to_string())?;
    }
    Ok(())
}

/// A file of `eval locomo --per-question`.
fn read_per_question(p: &PathBuf) -> anyhow::Result<Vec<locomo::QuestionResult>> {
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .with_context(|| format!("{} is not a per-question file", p.display()))
        })
        .collect()
}

async fn eval(cmd: Eval) -> anyhow::Result<()> {
    match cmd {
        Eval::Compare {
            base,
            new,
            metric,
            resamples,
            seed,
            json,
        } => {
            let c = hippocamp_eval::compare::compare(
                &read_per_question(&base)?,
                &read_per_question(&new)?,
                metric.into(),
                resamples,
                seed,
            )?;
            print(&c, json)
        }
        Eval::Locomo {
            path,
            common,
            no_isolation,
            long_queries,
            per_question,
            no_reference_time,
            as_items,
            long_turns,
        } => {
            let mut samples = hippocamp_datasets::locomo::load(&path)?;
            if let Some(every) = long_turns {
                hippocamp_datasets::synthetic::bury_in_code(&mut samples, every);
            }
            let opts = locomo::LocomoOptions {
                config: common.memory_config(MemoryConfig::default()),
                isolation_check: !no_isolation,
                mode: common.mode.map(Into::into),
                long_queries,
                reference_time: !no_reference_time,
                as_items,
                ..locomo::LocomoOptions::default()
            };
            let report = locomo::run(&*common.opener().await?, &samples, &opts).await?;
            if let Some(file) = per_question {
                let mut lines = String::new();
                for q in &report.per_question {
                    lines.push_str(&serde_json::to_string(q)?);
                    lines.push('\n');
                }
                std::fs::write(&file, lines)
                    .with_context(|| format!("cannot write {}", file.display()))?;
            }
            print(&report, common.json)
        }
        Eval::Secrets {
            paths,
            ext,
            turn_bytes,
            max_files,
            examples,
            json,
        } => {
            let opts = hippocamp_eval::secrets::SecretsOptions {
                extensions: ext,
                turn_bytes,
                max_files,
                examples,
            };
            print(&hippocamp_eval::secrets::run(&paths, &opts)?, json)
        }
        Eval::LocomoExport { path } => {
            let samples = hippocamp_datasets::locomo::load(&path)?;
            emit(&locomo::export(&samples).to_string())
        }
        Eval::Cranfield { dir, common } => {
            let collection = hippocamp_datasets::cranfield::load(&dir)?;
            let config = common.memory_config(cranfield::config());
            let report = cranfield::run_in_mode(
                &*common.opener().await?,
                &collection,
                config,
                common.mode.map(Into::into),
                true,
            )
            .await?;
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
            Command::Serve(args) => server_cli::serve(args).await,
            Command::Token {
                config,
                data_dir,
                cmd,
            } => {
                let config = any_config(config.as_deref(), data_dir.as_deref())?;
                emit(&serde_json::to_string_pretty(
                    &server_cli::token(&config, cmd).await?,
                )?)
            }
            Command::Config(cmd) => emit(&serde_json::to_string_pretty(&server_cli::config(cmd)?)?),
            Command::Eval(cmd) => eval(cmd).await,
            Command::Bench(cmd) => {
                let out = bench(cmd).await?;
                if !out.is_null() {
                    emit(&serde_json::to_string_pretty(&out)?)?;
                }
                Ok(())
            }
            Command::Artifacts { target, cmd } => {
                let out = artifacts_cli::run(&target, cmd).await?;
                if !out.is_null() {
                    emit(&serde_json::to_string_pretty(&out)?)?;
                }
                Ok(())
            }
            Command::Memory {
                target,
                cmd: memory_cli::MemoryCmd::Export,
            } => memory_cli::export(&target).await,
            Command::Memory {
                target,
                cmd: memory_cli::MemoryCmd::Restore { file },
            } => {
                let out = memory_cli::restore(&target, &file).await?;
                emit(&serde_json::to_string_pretty(&out)?)?;
                Ok(())
            }
            Command::Memory { target, cmd } => {
                let out = memory_cli::run(&target, cmd).await?;
                emit(&serde_json::to_string_pretty(&out)?)?;
                Ok(())
            }
            Command::Chat(args) => chat_cli::run(args).await,
            Command::Mcp(args) => mcp_cli::run(args).await,
            Command::Audit {
                target,
                limit,
                cursor,
            } => {
                let page = audit(&target, limit, cursor).await?;
                emit(&serde_json::to_string_pretty(&page)?)?;
                Ok(())
            }
            Command::Outbox { target, cmd } => {
                let out = outbox_cli::run(&target, cmd).await?;
                emit(&serde_json::to_string_pretty(&out)?)?;
                Ok(())
            }
        }
    })
}

/// `hippocamp audit`: a server's `GET /v1/audit`, or the data directory's
/// log on its own authority.
async fn audit(
    target: &Place,
    limit: Option<u64>,
    cursor: Option<String>,
) -> anyhow::Result<serde_json::Value> {
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(l) = limit {
        query.push(("limit", l.to_string()));
    }
    if let Some(c) = &cursor {
        query.push(("cursor", c.clone()));
    }
    if let Some(remote) = target.remote()? {
        return remote
            .json(reqwest::Method::GET, &["v1", "audit"], &query, None)
            .await;
    }
    let config = target.config()?;
    let governance =
        tokio::task::spawn_blocking(move || hippocamp_services::Services::governance(&config))
            .await??;
    Ok(serde_json::to_value(
        governance.audit.page(cursor.as_deref(), limit).await?,
    )?)
}
