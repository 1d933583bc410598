//! `hippocamp memory …`: the memory operations on a local data directory,
//! or on a running server with `--server URL --token T`. Every command
//! prints one JSON document on stdout.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use hippocamp_core::{
    CallOptions, EntryId, IdempotencyKey, MemoryScope, SessionId, erasure_confirmation,
};
use hippocamp_memory::embedding::{Pacer, paced};
use hippocamp_memory::event::{IngestReport, merge_report, parse_events};
use hippocamp_memory::{NewEntry, Provenance, SearchRequest, WriteOptions};
use hippocamp_services::Services;
use serde_json::{Value, json};

/// Where and whose memory.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// Where: a data directory (and its configuration file) or a server.
    #[command(flatten)]
    pub(crate) place: crate::Place,
    /// The application of the scope.
    #[arg(long, global = true)]
    app: Option<String>,
    /// The user of the scope.
    #[arg(long, global = true)]
    user: Option<String>,
    /// Embed entries and queries (`http:<base url>` or `local:<model dir>`),
    /// for vector and hybrid search on the data directory.
    #[arg(long, global = true)]
    embedder: Option<String>,
    /// The model to ask an `http:` embedder for.
    #[arg(long, global = true)]
    embedder_model: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MemoryCmd {
    /// Add one entry.
    Add {
        /// The text to remember.
        content: String,
        /// Metadata as a JSON object.
        #[arg(long)]
        metadata: Option<String>,
        /// Idempotency key: the same key and data is a duplicate, not a second entry.
        #[arg(long)]
        key: Option<String>,
        /// The session the entry belongs to.
        #[arg(long)]
        session: Option<String>,
    },
    /// Show one entry.
    Get {
        /// The entry id (`mem-…`).
        id: String,
    },
    /// Search the scope.
    Search {
        /// Free text.
        query: String,
        /// Most hits.
        #[arg(long)]
        limit: Option<u64>,
        /// A metadata filter as a JSON object.
        #[arg(long)]
        filter: Option<String>,
        /// lexical, vector or hybrid (default: hybrid with an embedder).
        #[arg(long)]
        mode: Option<String>,
    },
    /// Delete one entry (prints how many were removed: 1 or 0).
    Delete {
        /// The entry id.
        id: String,
    },
    /// Delete every entry of a session (asks for the scope to be typed
    /// unless `--yes`).
    DeleteSession {
        /// The session id.
        session: String,
        /// Erase without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Delete every entry of the scope and its agent sessions, and advance
    /// its erasure epoch (asks for the scope to be typed unless `--yes`).
    DeleteUser {
        /// Erase without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Correct an entry: the content (and metadata) replace its own as a
    /// new revision under the same id.
    Correct {
        /// The entry id.
        id: String,
        /// The corrected text.
        content: String,
        /// The corrected metadata as a JSON object (default: none).
        #[arg(long)]
        metadata: Option<String>,
    },
    /// Show an entry's kept revisions, newest first.
    History {
        /// The entry id.
        id: String,
    },
    /// Merge near-duplicate notes and facts into derived facts with
    /// lineage (a dedupe run; no model). Prints the run with each change.
    Consolidate {
        /// Propose only: print the changes, write nothing (through a
        /// server, `apply` writes them later).
        #[arg(long)]
        review: bool,
        /// Origins to merge (turn, note, file, fact; repeatable). Default:
        /// note, fact and file.
        #[arg(long)]
        origin: Vec<String>,
    },
    /// List the user's consolidation runs, or show one (through a server).
    Runs {
        /// The run id (`run-…`); without it, every run kept.
        run: Option<String>,
    },
    /// Write a proposed run's changes (through a server).
    Apply {
        /// The run id.
        run: String,
    },
    /// Undo an applied run: its facts go, what they merged is current
    /// again.
    Revert {
        /// The run id.
        run: String,
    },
    /// Show what an entry was derived from and what was derived from it.
    Lineage {
        /// The entry id.
        id: String,
    },
    /// Print everything held about the user as JSON Lines (consent, legal
    /// hold, entries with their revisions, agent sessions, artifact
    /// records; see `GET …/export`), read page by page.
    Export,
    /// Restore a file written by `export` into the same user: consent,
    /// entries with their revisions, agent sessions (idempotent; artifact
    /// and legal-hold lines are counted, not restored).
    Restore {
        /// The export file.
        file: PathBuf,
    },
    /// Ingest events from a JSON-lines file (one event per line); each
    /// skip is named by its line.
    #[command(visible_alias = "ingest")]
    Import {
        /// The file.
        file: PathBuf,
        /// The session the events belong to.
        #[arg(long)]
        session: String,
        /// Queue the events in the ingestion outbox and return at once
        /// (durable profile or a server); they are delivered in the
        /// background (by the server, or `hippocamp outbox drain`).
        #[arg(long = "async")]
        queue: bool,
    },
}

fn scope(t: &Target) -> anyhow::Result<MemoryScope> {
    let (Some(app), Some(user)) = (&t.app, &t.user) else {
        bail!("--app and --user are required");
    };
    Ok(MemoryScope::parse(app, user)?)
}

/// `hippocamp memory export`: the JSON Lines on stdout as they come.
pub(crate) async fn export(target: &Target) -> anyhow::Result<()> {
    use std::io::Write as _;
    let scope = scope(target)?;
    let mut out = std::io::stdout().lock();
    let mut write = |bytes: &[u8]| -> anyhow::Result<bool> {
        match out.write_all(bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
            other => other.map(|()| true).map_err(Into::into),
        }
    };
    if let Some(remote) = target.place.remote()? {
        let url = user_url(&remote, &scope, "export")?;
        let mut r = remote
            .send(remote.request(reqwest::Method::GET, url))
            .await?;
        while let Some(chunk) = r.chunk().await? {
            if !write(&chunk)? {
                return Ok(());
            }
        }
        return Ok(out.flush()?);
    }
    let mut config = target.place.config()?;
    // An export reads each page of the database once: a cache only grows
    // this process (a server's cache serves its writes and later reads).
    config.memory_cache.db_cache_bytes = config
        .memory_cache
        .db_cache_bytes
        .min(hippocamp_services::config::EXPORT_DB_CACHE_BYTES);
    let services = Services::open(&config).await?;
    let call = crate::cli_call();
    // The command line acts on the data directory's own authority.
    let include = hippocamp_services::export::Include { artifacts: true };
    let mut lines = hippocamp_services::export::export(&services, scope, call, include);
    while let Some(line) = lines.recv().await {
        if !write(line?.as_bytes())? {
            return Ok(());
        }
    }
    Ok(out.flush()?)
}

/// The data directory's memory with its agent sessions: an erasure takes
/// both, as over HTTP.
async fn agent_services(
    config: &hippocamp_services::config::Config,
    services: &hippocamp_services::MemoryServices,
) -> anyhow::Result<hippocamp_agent::AgentServices> {
    let cfg = config.clone();
    let m = services.clone();
    let sessions = tokio::task::spawn_blocking(move || m.sessions(&cfg)).await??;
    Ok(hippocamp_agent::AgentServices {
        memory: Some(std::sync::Arc::clone(&services.memory)),
        ..hippocamp_agent::AgentServices::new(sessions)
    })
}

/// `delete-user` on a data directory: the user's agent sessions go with
/// their memory, as over HTTP.
async fn erase_user(
    config: &hippocamp_services::config::Config,
    services: &hippocamp_services::MemoryServices,
    scope: &MemoryScope,
    c: &CallOptions,
) -> anyhow::Result<Value> {
    let agent = agent_services(config, services).await?;
    let gone = agent.erase_user(scope, c).await?;
    let memory = gone.memory.ok_or(hippocamp_core::Error::MemoryDisabled)?;
    Ok(json!({"deleted": memory.deleted, "epoch": memory.epoch, "sessions": gone.sessions}))
}

/// `correct` and `history` on a data directory.
async fn revise(
    store: &dyn hippocamp_memory::MemoryStore,
    scope: &MemoryScope,
    cmd: MemoryCmd,
    w: &WriteOptions,
) -> anyhow::Result<Value> {
    Ok(match cmd {
        MemoryCmd::Correct {
            id,
            content,
            metadata,
        } => {
            let id: EntryId = id.parse()?;
            let update = correction(content, metadata.as_deref())?;
            serde_json::to_value(store.update_entry(scope, &id, &update, w).await?)?
        }
        MemoryCmd::History { id } => {
            let id: EntryId = id.parse()?;
            json!({"revisions": store.entry_history(scope, &id, &w.call).await?})
        }
        _ => bail!("not a correction command"),
    })
}

/// `correct` and `history` through a server.
async fn revise_remote(
    remote: &crate::remote::Remote,
    base: &[&str],
    cmd: MemoryCmd,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    match cmd {
        MemoryCmd::Correct {
            id,
            content,
            metadata,
        } => {
            let update = serde_json::to_value(correction(content, metadata.as_deref())?)?;
            remote
                .json(
                    Method::PUT,
                    &at(base, &["entries", &id]),
                    &[],
                    Some(&update),
                )
                .await
        }
        MemoryCmd::History { id } => {
            remote
                .json(
                    Method::GET,
                    &at(base, &["entries", &id, "history"]),
                    &[],
                    None,
                )
                .await
        }
        _ => bail!("not a correction command"),
    }
}

fn correction(
    content: String,
    metadata: Option<&str>,
) -> anyhow::Result<hippocamp_memory::EntryUpdate> {
    Ok(hippocamp_memory::EntryUpdate {
        content,
        metadata: match metadata {
            Some(m) => json_object(m, "--metadata")?,
            None => serde_json::Map::new(),
        },
    })
}

/// A server's URL of a route under the user: `/v1/apps/{app}/users/{user}/{last}`.
fn user_url(
    remote: &crate::remote::Remote,
    scope: &MemoryScope,
    last: &str,
) -> anyhow::Result<reqwest::Url> {
    remote.url(&[
        "v1",
        "apps",
        scope.app().as_str(),
        "users",
        scope.user().as_str(),
        last,
    ])
}

/// `hippocamp memory restore FILE`: on a data directory through its
/// services, or streamed to a server's `POST …/restore`.
pub(crate) async fn restore(target: &Target, file: &Path) -> anyhow::Result<Value> {
    let scope = scope(target)?;
    let f = tokio::fs::File::open(file)
        .await
        .with_context(|| format!("cannot open {}", file.display()))?;
    if let Some(remote) = target.place.remote()? {
        let url = user_url(&remote, &scope, "restore")?;
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(f));
        let r = remote
            .send(
                remote
                    .request(reqwest::Method::POST, url)
                    .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                    .body(body),
            )
            .await?;
        return Ok(r.json().await?);
    }
    let config = target.place.config()?;
    let services = Services::open(&config).await?;
    let call = crate::cli_call();
    let reader = tokio::io::BufReader::new(f);
    let report = hippocamp_services::restore::restore(&services, &scope, reader, &call).await?;
    Ok(serde_json::to_value(report)?)
}

/// A whole-scope erasure goes ahead only with `--yes` or once the person
/// at the terminal typed the exact scope (`app/user[/session]`); without a
/// terminal and without `--yes` it is refused.
fn confirm(scope: &str, yes: bool) -> anyhow::Result<()> {
    use std::io::{IsTerminal as _, Write as _};
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!("confirmation required: pass --yes to erase {scope}");
    }
    eprint!("This erases {scope} for good. Type `{scope}` to confirm: ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim_end_matches(['\r', '\n']) != scope {
        bail!("not confirmed; nothing was erased");
    }
    Ok(())
}

/// Asks for the scope of a whole-scope erasure (see [`confirm`]).
fn confirm_erasure(scope: &MemoryScope, cmd: &MemoryCmd) -> anyhow::Result<()> {
    match cmd {
        MemoryCmd::DeleteUser { yes } => confirm(&erasure_confirmation(scope, None), *yes),
        MemoryCmd::DeleteSession { session, yes } => confirm(
            &erasure_confirmation(scope, Some(&SessionId::new(session.as_str())?)),
            *yes,
        ),
        _ => Ok(()),
    }
}

fn json_object(arg: &str, what: &str) -> anyhow::Result<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(arg).with_context(|| format!("{what} is not JSON"))? {
        Value::Object(m) => Ok(m),
        _ => bail!("{what} must be a JSON object"),
    }
}

#[allow(clippy::too_many_lines)] // one arm per command
pub(crate) async fn run(target: &Target, cmd: MemoryCmd) -> anyhow::Result<Value> {
    let scope = scope(target)?;
    confirm_erasure(&scope, &cmd)?;
    if target.place.is_remote() && target.embedder.is_some() {
        bail!("--embedder is for a data directory; a server embeds with its own");
    }
    if let Some(remote) = target.place.remote()? {
        return run_remote(&remote, &scope, cmd).await;
    }
    if target.embedder_model.is_some() && target.embedder.is_none() {
        bail!("--embedder-model needs --embedder");
    }
    let mut config = target.place.config()?;
    if let Some(spec) = &target.embedder {
        config.embedder = Some(crate::cli_embedder(spec, target.embedder_model.as_deref())?);
    }
    let services = Services::memory(&config).await?;
    if let MemoryCmd::Import {
        file,
        session,
        queue: true,
    } = &cmd
    {
        return queue_local(&services, &scope, file, session).await;
    }
    let store = &*services.memory;
    // The command line acts on its own authority (the data directory).
    let c = crate::cli_call();
    let w = WriteOptions::new(c);
    Ok(match cmd {
        MemoryCmd::Add {
            content,
            metadata,
            key,
            session,
        } => {
            let mut entry = NewEntry::new(content);
            if let Some(m) = metadata {
                entry.metadata = json_object(&m, "--metadata")?;
            }
            if let Some(k) = key {
                entry.idempotency_key = Some(IdempotencyKey::new(k)?);
            }
            entry.provenance = Provenance {
                session_id: session.map(SessionId::new).transpose()?,
                ..Provenance::default()
            };
            serde_json::to_value(store.add_entry(&scope, entry, &w).await?)?
        }
        MemoryCmd::Get { id } => {
            let id: EntryId = id.parse()?;
            serde_json::to_value(store.get_entry(&scope, &id, &c).await?)?
        }
        MemoryCmd::Search {
            query,
            limit,
            filter,
            mode,
        } => {
            let mut req = SearchRequest::new(query);
            req.limit = limit;
            req.mode = mode.as_deref().map(parse_mode).transpose()?;
            if let Some(f) = filter {
                req.filter = Some(Value::Object(json_object(&f, "--filter")?));
            }
            serde_json::to_value(store.search(&scope, &req, &c).await?)?
        }
        MemoryCmd::Delete { id } => {
            let id: EntryId = id.parse()?;
            json!({"deleted": store.delete_entry(&scope, &id, &c).await?})
        }
        MemoryCmd::DeleteSession { session, .. } => {
            let session = SessionId::new(session)?;
            let gone = agent_services(&config, &services)
                .await?
                .erase_session(&scope, &session, &c)
                .await?;
            json!({"deleted": gone.memory.ok_or(hippocamp_core::Error::MemoryDisabled)?,
                   "agent_session": gone.agent_session})
        }
        MemoryCmd::DeleteUser { .. } => erase_user(&config, &services, &scope, &c).await?,
        MemoryCmd::Correct { .. } | MemoryCmd::History { .. } => {
            revise(store, &scope, cmd, &w).await?
        }
        MemoryCmd::Consolidate { .. }
        | MemoryCmd::Runs { .. }
        | MemoryCmd::Apply { .. }
        | MemoryCmd::Revert { .. }
        | MemoryCmd::Lineage { .. } => {
            crate::consolidate_cli::local(&services, &scope, cmd, &c).await?
        }
        MemoryCmd::Export | MemoryCmd::Restore { .. } => {
            bail!("export and restore run on the whole services (memory_cli::export, ::restore)")
        }
        MemoryCmd::Import { file, session, .. } => {
            let session = SessionId::new(session)?;
            let (scope, session) = (&scope, &session);
            let pacer = Pacer::for_store(&store.capabilities());
            import(&file, pacer, |events, call| async move {
                Ok(store
                    .add_events(scope, session, &events, &WriteOptions::new(call))
                    .await?)
            })
            .await?
        }
    })
}

fn parse_mode(m: &str) -> anyhow::Result<hippocamp_memory::SearchMode> {
    Ok(match m {
        "lexical" => hippocamp_memory::SearchMode::Lexical,
        "vector" => hippocamp_memory::SearchMode::Vector,
        "hybrid" => hippocamp_memory::SearchMode::Hybrid,
        other => bail!("--mode is lexical, vector or hybrid, not `{other}`"),
    })
}

/// `base` followed by `more`.
pub(crate) fn at<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    [base, more].concat()
}

/// The same commands through a server's API v1.
/// `import --async` on a data directory: into its outbox.
async fn queue_local(
    services: &hippocamp_services::MemoryServices,
    scope: &MemoryScope,
    file: &Path,
    session: &str,
) -> anyhow::Result<Value> {
    let outbox = services.outbox()?;
    let session = SessionId::new(session)?;
    let target = hippocamp_outbox::TargetName::new(hippocamp_services::MEMORY_TARGET)?;
    let (target, session) = (&target, &session);
    queue_file(file, |values| async move {
        Ok(serde_json::to_value(
            outbox
                .ingest_values(target, scope, session, values, None, &crate::cli_call())
                .await?,
        )?)
    })
    .await
}

async fn run_remote(
    remote: &crate::remote::Remote,
    scope: &MemoryScope,
    cmd: MemoryCmd,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    let (app, user) = (scope.app().as_str(), scope.user().as_str());
    let base = ["v1", "apps", app, "users", user, "memory"];
    Ok(match cmd {
        MemoryCmd::Add {
            content,
            metadata,
            key,
            session,
        } => {
            let mut entry = json!({ "content": content });
            if let Some(m) = metadata {
                entry["metadata"] = Value::Object(json_object(&m, "--metadata")?);
            }
            if let Some(k) = key {
                entry["idempotency_key"] = json!(k);
            }
            if let Some(s) = session {
                entry["provenance"] = json!({ "session_id": s });
            }
            remote
                .json(Method::POST, &at(&base, &["entries"]), &[], Some(&entry))
                .await?
        }
        MemoryCmd::Get { id } => {
            remote
                .json(Method::GET, &at(&base, &["entries", &id]), &[], None)
                .await?
        }
        MemoryCmd::Search {
            query,
            limit,
            filter,
            mode,
        } => {
            let mut req = json!({ "query": query });
            if let Some(m) = mode {
                req["mode"] = json!(parse_mode(&m)?.as_str());
            }
            if let Some(l) = limit {
                req["limit"] = json!(l);
            }
            if let Some(f) = filter {
                req["filter"] = Value::Object(json_object(&f, "--filter")?);
            }
            remote
                .json(Method::POST, &at(&base, &["search"]), &[], Some(&req))
                .await?
        }
        MemoryCmd::Delete { id } => {
            remote
                .json(Method::DELETE, &at(&base, &["entries", &id]), &[], None)
                .await?
        }
        MemoryCmd::DeleteSession { session, .. } => {
            let confirm = erasure_confirmation(scope, Some(&SessionId::new(session.as_str())?));
            remote
                .json(
                    Method::DELETE,
                    &at(&base, &["sessions", &session]),
                    &[("confirm", confirm)],
                    None,
                )
                .await?
        }
        MemoryCmd::DeleteUser { .. } => {
            let confirm = erasure_confirmation(scope, None);
            remote
                .json(Method::DELETE, &base, &[("confirm", confirm)], None)
                .await?
        }
        MemoryCmd::Import {
            file,
            session,
            queue: true,
        } => {
            let path = at(&base, &["sessions", &session, "ingest"]);
            queue_file(&file, |events| remote_ingest(remote, &path, events)).await?
        }
        MemoryCmd::Correct { .. } | MemoryCmd::History { .. } => {
            revise_remote(remote, &base, cmd).await?
        }
        MemoryCmd::Consolidate { .. }
        | MemoryCmd::Runs { .. }
        | MemoryCmd::Apply { .. }
        | MemoryCmd::Revert { .. }
        | MemoryCmd::Lineage { .. } => crate::consolidate_cli::remote(remote, &base, cmd).await?,
        MemoryCmd::Export | MemoryCmd::Restore { .. } => {
            bail!("export and restore run on the whole services (memory_cli::export, ::restore)")
        }
        MemoryCmd::Import { file, session, .. } => {
            let path = at(&base, &["sessions", &session, "events"]);
            import_remote(remote, &path, &file).await?
        }
    })
}

/// A synchronous import through a server's `events` route at `path`, paced
/// by the server's memory capabilities.
async fn import_remote(
    remote: &crate::remote::Remote,
    path: &[&str],
    file: &Path,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    let caps = remote
        .json(Method::GET, &["v1", "memory", "capabilities"], &[], None)
        .await?;
    let pacer = Pacer::for_store(&serde_json::from_value(caps)?);
    let timeout: Vec<(&str, String)> = pacer
        .timeout_ms()
        .map(|ms| ("timeout_ms", ms.to_string()))
        .into_iter()
        .collect();
    let timeout = &timeout;
    import(file, pacer, |events, _| async move {
        let reply = remote
            .json(
                Method::POST,
                path,
                timeout,
                Some(&json!({ "events": events })),
            )
            .await?;
        Ok(serde_json::from_value::<IngestReport>(reply)?)
    })
    .await
}

/// One admission through a server's `ingest` route at `path`.
async fn remote_ingest(
    remote: &crate::remote::Remote,
    path: &[&str],
    events: Vec<Value>,
) -> anyhow::Result<Value> {
    remote
        .json(
            reqwest::Method::POST,
            path,
            &[],
            Some(&json!({ "events": events })),
        )
        .await
}

/// Lines read at a time; the pacer cuts each read into the batches it
/// sends.
const READ: usize = 1_000;

/// A JSON-lines file read [`READ`] values at a time: blank lines are
/// ignored, and lines that are not JSON are noted in the skip log, not
/// returned.
struct JsonLines {
    lines_in: std::io::Lines<std::io::BufReader<std::fs::File>>,
    /// The file's size in bytes.
    size: u64,
    /// Lines read that were not blank.
    lines: usize,
    /// Physical lines read so far (1-based numbers in the file).
    line_no: usize,
    /// The line number of each value of the last read.
    read_lines: Vec<usize>,
}

impl JsonLines {
    fn open(file: &Path) -> anyhow::Result<Self> {
        let f =
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
        Ok(Self {
            size: f.metadata().map_or(0, |m| m.len()),
            lines_in: std::io::BufReader::new(f).lines(),
            lines: 0,
            line_no: 0,
            read_lines: Vec::new(),
        })
    }

    /// The next values (at most [`READ`]), or `None` at the end; `seen`
    /// gets the bytes of each line read, `skips` each line that is not
    /// JSON.
    fn next_read(
        &mut self,
        mut seen: impl FnMut(u64),
        skips: &mut SkipLog,
    ) -> anyhow::Result<Option<Vec<Value>>> {
        let mut batch = Vec::new();
        self.read_lines.clear();
        while batch.len() < READ {
            let Some(line) = self.lines_in.next() else {
                break;
            };
            let line = line.context("reading the import file")?;
            self.line_no += 1;
            seen(line.len() as u64 + 1);
            if line.trim().is_empty() {
                continue;
            }
            self.lines += 1;
            match serde_json::from_str::<Value>(&line) {
                Ok(v) => {
                    batch.push(v);
                    self.read_lines.push(self.line_no);
                }
                Err(e) => skips.note(self.line_no, None, "not_json", Some(&e.to_string())),
            }
        }
        Ok((!batch.is_empty()).then_some(batch))
    }

    /// The file line of the last read's value at `index`.
    fn line_of(&self, index: usize) -> usize {
        self.read_lines.get(index).copied().unwrap_or(0)
    }
}

/// The skips of an import, each named by its line: printed to standard
/// error as they come (every one), counted by reason, and the first
/// [`SkipLog::LISTED`] listed in the report.
#[derive(Default)]
struct SkipLog {
    by_reason: std::collections::BTreeMap<String, usize>,
    listed: Vec<Value>,
    total: usize,
}

impl SkipLog {
    /// Skips listed one by one in the JSON report (all are printed).
    const LISTED: usize = 100;

    fn note(&mut self, line: usize, event_id: Option<&str>, reason: &str, detail: Option<&str>) {
        self.total += 1;
        *self.by_reason.entry(reason.to_owned()).or_default() += 1;
        let id = event_id
            .map(|i| format!(" (event {i})"))
            .unwrap_or_default();
        let detail = detail.map(|d| format!(": {d}")).unwrap_or_default();
        eprintln!("line {line}{id}: skipped, {reason}{detail}");
        if self.listed.len() < Self::LISTED {
            let mut v = json!({ "line": line, "reason": reason });
            if let Some(i) = event_id {
                v["event_id"] = json!(i);
            }
            if !detail.is_empty() {
                v["detail"] = json!(detail.trim_start_matches(": "));
            }
            self.listed.push(v);
        }
    }

    /// Notes the skips of a reply (`skipped`, as `/events` and `/ingest`
    /// answer), their `index` in the last read of `reader`.
    fn note_reply(&mut self, reader: &JsonLines, skipped: &[Value]) {
        for s in skipped {
            let index = s["index"].as_u64().and_then(|i| usize::try_from(i).ok());
            let detail = match &s["detail"] {
                Value::Null => None,
                Value::String(d) => Some(d.clone()),
                other => Some(other.to_string()),
            };
            self.note(
                index.map_or(0, |i| reader.line_of(i)),
                s["event_id"].as_str(),
                s["reason"].as_str().unwrap_or("unknown"),
                detail.as_deref(),
            );
        }
    }

    /// The report's fields: the count, by reason, and the first skips.
    fn report(&self, report: &mut Value) {
        report["skipped"] = json!(self.total);
        report["skipped_by_reason"] = json!(self.by_reason);
        report["skips"] = json!(self.listed);
    }
}

/// Queues a JSON-lines file through `ingest` (the outbox, or a server's
/// `ingest` route) in reads of [`READ`] lines, each one admission; returns
/// the jobs, the events that became work and the skips (each named by its
/// line on standard error). What delivery skips later is in each job's
/// status (`hippocamp outbox status JOB`). As with a synchronous import, a
/// file of which every line was skipped is an error.
async fn queue_file<F, Fut>(file: &Path, ingest: F) -> anyhow::Result<Value>
where
    F: Fn(Vec<Value>) -> Fut,
    Fut: Future<Output = anyhow::Result<Value>>,
{
    let mut reader = JsonLines::open(file)?;
    let mut jobs: Vec<Value> = Vec::new();
    let mut new_events = 0u64;
    let mut skips = SkipLog::default();
    while let Some(batch) = reader.next_read(|_| {}, &mut skips)? {
        let r = ingest(batch).await?;
        new_events += r["new_events"].as_u64().unwrap_or(0);
        for j in r["jobs"].as_array().into_iter().flatten() {
            if !jobs.iter().any(|k| k["id"] == j["id"]) {
                jobs.push(j.clone());
            }
        }
        skips.note_reply(&reader, r["skipped"].as_array().map_or(&[], Vec::as_slice));
    }
    let lines = reader.lines;
    let mut report = json!({ "jobs": jobs, "new_events": new_events });
    skips.report(&mut report);
    // Events already admitted (even by jobs since pruned) are fine; a file
    // of which no line was an event to store is not.
    if lines > 0 && jobs.is_empty() && skips.total >= lines {
        bail!(
            "no event of {} can be stored (every line was skipped): {report}",
            file.display()
        );
    }
    Ok(report)
}

/// Whether a failed batch did not fit: it ran out of time, or its body
/// was larger than the server takes (it is then sent again, smaller:
/// nothing of it was written).
fn too_much(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<hippocamp_core::Error>(),
        Some(hippocamp_core::Error::Timeout(_))
    ) || e
        .downcast_ref::<crate::remote::ServerError>()
        .is_some_and(|s| s.code == "timeout" || s.code == "payload_too_large")
}

/// Streams a JSON-lines file into `send` (a store, or a server) in the
/// batches `pacer` sizes (with an embedder, from the throughput it sees).
/// A line that is not JSON, or not an event, is counted as skipped; a file
/// with events of which none was remembered (added or already there) is
/// an error, so a wrong format does not pass for a successful import.
async fn import<F, Fut>(file: &Path, mut pacer: Pacer, send: F) -> anyhow::Result<Value>
where
    F: Fn(Vec<hippocamp_memory::Event>, hippocamp_core::CallOptions) -> Fut,
    Fut: Future<Output = anyhow::Result<IngestReport>>,
{
    let mut reader = JsonLines::open(file)?;
    let bar = indicatif::ProgressBar::new(reader.size);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "import [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .map_or_else(
            |_| indicatif::ProgressStyle::default_bar(),
            |s| s.progress_chars("=> "),
        ),
    );
    let (mut added, mut duplicates, mut redacted) = (0usize, 0usize, 0usize);
    let mut skips = SkipLog::default();
    while let Some(batch) = reader.next_read(|bytes| bar.inc(bytes), &mut skips)? {
        let (events, positions, parse_skipped) = parse_events(batch);
        let events = &events;
        let send = &send;
        let replies = paced(events.len(), &mut pacer, too_much, |range, call| {
            send(events[range].to_vec(), call)
        })
        .await?;
        let mut skipped = parse_skipped;
        for (at, r) in replies {
            let shift = |e: &mut usize| *e += at;
            let mut r = r;
            r.added.iter_mut().for_each(|e| shift(&mut e.index));
            r.duplicates.iter_mut().for_each(|e| shift(&mut e.index));
            r.skipped.iter_mut().for_each(|e| shift(&mut e.index));
            let r = merge_report(r, &positions, Vec::new());
            added += r.added.len();
            duplicates += r.duplicates.len();
            redacted += r.added.iter().filter(|e| !e.redacted.is_empty()).count();
            skipped.extend(r.skipped);
        }
        skipped.sort_by_key(|s| s.index);
        let skipped: Vec<Value> = skipped
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect();
        bar.suspend(|| skips.note_reply(&reader, &skipped));
    }
    let lines = reader.lines;
    bar.finish_and_clear();
    // Events stored with a secret redacted from their text (counted, never
    // shown: the ranges point into the file the caller has).
    let mut report = json!({ "added": added, "duplicates": duplicates, "redacted": redacted });
    skips.report(&mut report);
    if lines > 0 && added == 0 && duplicates == 0 {
        bail!(
            "no event of {} was remembered (nothing added, nothing already there): {report}",
            file.display()
        );
    }
    Ok(report)
}
