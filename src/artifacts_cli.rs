//! `hippocamp artifacts …`: the artifact operations on a local data
//! directory (the filesystem store in its `artifacts/` folder), or on a
//! running server with `--server URL --token T`. Every
//! command prints one JSON document on stdout, except `get`, which writes
//! the bytes to a file (or to stdout with `--out -`). Large transfers show
//! a progress bar on stderr.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use futures::StreamExt as _;
use hippocamp_artifacts::{
    ArtifactName, ArtifactScope, ArtifactStore, Body, ByteRange, DeleteSelector, MimeType,
    PageRequest, PutOptions, Selector,
};
use hippocamp_artifacts_fs::{RepairCursor, RepairOptions};
use hippocamp_core::CallOptions;
use hippocamp_services::Services;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

/// Where and whose artifacts.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// Where: a data directory (and its configuration file) or a server.
    #[command(flatten)]
    pub(crate) place: crate::Place,
    /// The application of the scope.
    #[arg(long, global = true)]
    app: Option<String>,
    /// The user of a user or session scope.
    #[arg(long, global = true)]
    user: Option<String>,
    /// The session of a session scope.
    #[arg(long, global = true)]
    session: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ArtifactsCmd {
    /// Store a file (or stdin with `-`) as the next version of a name.
    Put {
        /// The artifact name.
        name: String,
        /// The file to store, `-` for stdin.
        file: PathBuf,
        /// The MIME type.
        #[arg(long)]
        mime_type: Option<String>,
        /// Custom metadata as a JSON object.
        #[arg(long)]
        metadata: Option<String>,
    },
    /// Write a version (the latest by default) to a file, verified.
    Get {
        /// The artifact name.
        name: String,
        /// The version.
        #[arg(long)]
        version: Option<u64>,
        /// Where to write, `-` for stdout.
        #[arg(long)]
        out: PathBuf,
        /// First byte of a range.
        #[arg(long, requires = "length")]
        offset: Option<u64>,
        /// Bytes of a range.
        #[arg(long, requires = "offset")]
        length: Option<u64>,
    },
    /// Show a version's record.
    Head {
        /// The artifact name.
        name: String,
        /// The version.
        #[arg(long)]
        version: Option<u64>,
    },
    /// List names with live versions, one page.
    Ls {
        /// Start after this name.
        #[arg(long)]
        cursor: Option<String>,
        /// Names in the page.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// List a name's live versions, one page.
    Versions {
        /// The artifact name.
        name: String,
        /// Start after this version.
        #[arg(long)]
        cursor: Option<u64>,
        /// Versions in the page.
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Delete one version (`--version N`) or every version (`--all`);
    /// prints the versions removed.
    #[command(group(clap::ArgGroup::new("which").required(true).args(["version", "all"])))]
    Rm {
        /// The artifact name.
        name: String,
        /// The version.
        #[arg(long, conflicts_with = "all")]
        version: Option<u64>,
        /// Every version.
        #[arg(long)]
        all: bool,
    },
    /// Remove content files no version references and report corruption
    /// (a data directory only, with the server stopped: `--server`,
    /// `--token` and the scope flags do not apply).
    Repair {
        /// Files examined at most.
        #[arg(long, default_value_t = 100_000)]
        limit: u64,
        /// Keep unreferenced files younger than this, milliseconds.
        #[arg(long)]
        min_age_ms: Option<u64>,
        /// Also read and verify every referenced file.
        #[arg(long)]
        verify: bool,
        /// Resume after `DIR:FILE` (a previous report's `next`).
        #[arg(long)]
        resume: Option<String>,
    },
}

fn scope(t: &Target) -> anyhow::Result<ArtifactScope> {
    let Some(app) = &t.app else {
        bail!("--app is required");
    };
    Ok(match (&t.user, &t.session) {
        (None, None) => ArtifactScope::app(app)?,
        (Some(u), None) => ArtifactScope::user(app, u)?,
        (Some(u), Some(s)) => ArtifactScope::session(app, u, s)?,
        (None, Some(_)) => bail!("--session needs --user"),
    })
}

fn bar(len: u64, verb: &str) -> indicatif::ProgressBar {
    // Small transfers finish before a bar would help.
    if len < 8 << 20 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{verb} [{{bar:40}}] {{bytes}}/{{total_bytes}} ({{bytes_per_sec}}, eta {{eta}})"
        ))
        .map_or_else(
            |_| indicatif::ProgressStyle::default_bar(),
            |s| s.progress_chars("=> "),
        ),
    );
    bar
}

/// A file (or stdin) as a stream of 1 MiB pieces read on the blocking
/// pool, advancing `bar`.
fn file_stream(
    file: &Path,
    bar: indicatif::ProgressBar,
) -> anyhow::Result<hippocamp_artifacts::ByteStream> {
    let reader: Box<dyn std::io::Read + Send> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?,
        )
    };
    Ok(
        futures::stream::unfold(Some((reader, bar)), |state| async move {
            let (reader, bar) = state?;
            let read = tokio::task::spawn_blocking(move || {
                let mut buf = Vec::with_capacity(1 << 20);
                let mut reader = reader;
                let r = std::io::Read::read_to_end(
                    &mut std::io::Read::take(&mut reader, 1 << 20),
                    &mut buf,
                );
                (reader, buf, r)
            })
            .await;
            match read {
                Ok((_, _, Ok(0))) => {
                    bar.finish_and_clear();
                    None
                }
                Ok((reader, buf, Ok(n))) => {
                    bar.inc(n as u64);
                    Some((Ok(bytes::Bytes::from(buf)), Some((reader, bar))))
                }
                Ok((_, _, Err(e))) => Some((Err(hippocamp_core::Error::storage(e)), None)),
                Err(e) => Some((Err(hippocamp_core::Error::Unavailable(e.to_string())), None)),
            }
        })
        .boxed(),
    )
}

fn parse_resume(s: &str) -> anyhow::Result<RepairCursor> {
    let (dir, after) = s.split_once(':').context("--resume is DIR:FILE")?;
    Ok(RepairCursor {
        dir: u8::from_str_radix(dir, 16).context("DIR is two hex digits")?,
        after: after.to_owned(),
    })
}

pub(crate) async fn run(target: &Target, cmd: ArtifactsCmd) -> anyhow::Result<Value> {
    if matches!(cmd, ArtifactsCmd::Repair { .. }) && target.place.is_remote() {
        // Before the scope: repair takes none, and the server may come
        // from HIPPOCAMP_SERVER rather than a flag.
        bail!(
            "repair works on a data directory, not a server (--server or HIPPOCAMP_SERVER is set): run it where the server's data is, with the server stopped, with --data-dir or --config"
        );
    }
    if let Some(remote) = target.place.remote()? {
        return run_remote(&remote, &scope(target)?, cmd).await;
    }
    let config = target.place.config()?;
    if let ArtifactsCmd::Repair {
        limit,
        min_age_ms,
        verify,
        resume,
    } = cmd
    {
        let opts = RepairOptions {
            limit,
            min_age_ms,
            verify,
            resume: resume.as_deref().map(parse_resume).transpose()?,
        };
        let report = Services::repair_artifacts(&config, opts).await?;
        let next = report
            .next
            .as_ref()
            .map(|c| format!("{:02x}:{}", c.dir, c.after));
        let mut v = serde_json::to_value(&report)?;
        v["next"] = json!(next);
        return Ok(v);
    }
    // The whole services, as the server builds them: a memory file put
    // here is indexed in memory, and its index erased with it.
    let services = Services::open(&config).await?;
    let store = &*services.artifacts;
    let scope = scope(target)?;
    let c = CallOptions::default();
    let selector = |v: Option<u64>| v.map_or(Selector::Latest, Selector::Version);
    Ok(match cmd {
        ArtifactsCmd::Put {
            name,
            file,
            mime_type,
            metadata,
        } => put(store, &scope, name, &file, mime_type, metadata).await?,
        ArtifactsCmd::Get {
            name,
            version,
            out,
            offset,
            length,
        } => {
            let range = offset
                .zip(length)
                .map(|(offset, len)| ByteRange { offset, len });
            get(store, &scope, name, selector(version), range, &out).await?
        }
        ArtifactsCmd::Head { name, version } => serde_json::to_value(
            store
                .head(&scope, &ArtifactName::new(name)?, selector(version), &c)
                .await?,
        )?,
        ArtifactsCmd::Ls { cursor, limit } => {
            let page = PageRequest {
                cursor: cursor.map(ArtifactName::new).transpose()?,
                limit,
            };
            serde_json::to_value(store.list_names(&scope, &page, &c).await?)?
        }
        ArtifactsCmd::Versions {
            name,
            cursor,
            limit,
        } => {
            let page = PageRequest { cursor, limit };
            serde_json::to_value(
                store
                    .list_versions(&scope, &ArtifactName::new(name)?, &page, &c)
                    .await?,
            )?
        }
        ArtifactsCmd::Rm { name, version, all } => {
            let sel = match version {
                Some(v) => DeleteSelector::Version(v),
                None if all => DeleteSelector::All,
                None => bail!("give --version N or --all"),
            };
            json!({"removed": store.delete(&scope, &ArtifactName::new(name)?, sel, &c).await?})
        }
        ArtifactsCmd::Repair { .. } => bail!("repair takes no scope"),
    })
}

async fn put(
    store: &dyn ArtifactStore,
    scope: &ArtifactScope,
    name: String,
    file: &Path,
    mime_type: Option<String>,
    metadata: Option<String>,
) -> anyhow::Result<Value> {
    let name = ArtifactName::new(name)?;
    let len = if file.as_os_str() == "-" {
        0
    } else {
        std::fs::metadata(file).map_or(0, |m| m.len())
    };
    let mut opts = PutOptions {
        call: CallOptions::transfer_timeout(std::time::Duration::from_mins(5))?,
        ..PutOptions::default()
    };
    if let Some(m) = mime_type {
        opts.mime_type = MimeType::new(m)?;
    }
    if let Some(m) = metadata {
        match serde_json::from_str::<Value>(&m).context("--metadata is not JSON")? {
            Value::Object(o) => opts.metadata = o,
            _ => bail!("--metadata must be a JSON object"),
        }
    }
    let body = Body::Stream(file_stream(file, bar(len, "put"))?);
    Ok(serde_json::to_value(
        store.put(scope, &name, body, &opts).await?,
    )?)
}

/// Writes a verified read to `out` (`-`: stdout). A file is written
/// beside its target and renamed once every byte was verified, so a
/// corrupt artifact never leaves a partial file under the target's name.
async fn get(
    store: &dyn ArtifactStore,
    scope: &ArtifactScope,
    name: String,
    selector: Selector,
    range: Option<ByteRange>,
    out: &Path,
) -> anyhow::Result<Value> {
    let name = ArtifactName::new(name)?;
    let read = store
        .get(scope, &name, selector, range, &CallOptions::default())
        .await?;
    let meta = read.meta.clone();
    let total = range.map_or(meta.size, |r| r.len);
    let bar = bar(total, "get");
    let to_stdout = out.as_os_str() == "-";
    let part = out.with_extension("part");
    let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = if to_stdout {
        Box::new(tokio::io::stdout())
    } else {
        Box::new(tokio::fs::File::create(&part).await?)
    };
    let mut body = read.body;
    while let Some(piece) = body.next().await {
        let piece = match piece {
            Ok(p) => p,
            Err(e) => {
                drop(sink);
                if !to_stdout {
                    let _ = tokio::fs::remove_file(&part).await;
                }
                return Err(e.into());
            }
        };
        bar.inc(piece.len() as u64);
        sink.write_all(&piece).await?;
    }
    sink.flush().await?;
    drop(sink);
    bar.finish_and_clear();
    if to_stdout {
        return Ok(Value::Null);
    }
    tokio::fs::rename(&part, out).await?;
    Ok(json!({"written": out, "bytes": total, "meta": meta}))
}

/// The path segments of a scope's API prefix.
fn scope_segments(scope: &ArtifactScope) -> Vec<&str> {
    match scope {
        ArtifactScope::App { app } => vec!["v1", "apps", app.as_str()],
        ArtifactScope::User { app, user } => {
            vec!["v1", "apps", app.as_str(), "users", user.as_str()]
        }
        ArtifactScope::Session { app, user, session } => vec![
            "v1",
            "apps",
            app.as_str(),
            "users",
            user.as_str(),
            "sessions",
            session.as_str(),
        ],
    }
}

/// The same commands through a server's API v1.
async fn run_remote(
    remote: &crate::remote::Remote,
    scope: &ArtifactScope,
    cmd: ArtifactsCmd,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    let prefix = scope_segments(scope);
    let under = |kind: &'static str, name: &str| -> Vec<String> {
        prefix
            .iter()
            .map(|s| (*s).to_owned())
            .chain(std::iter::once(kind.to_owned()))
            .chain(name.split('/').map(str::to_owned))
            .collect()
    };
    let page = |cursor: Option<String>, limit: Option<u64>| {
        let cursor = cursor.map(|c| ("cursor", c));
        let limit = limit.map(|l| ("limit", l.to_string()));
        cursor.into_iter().chain(limit).collect::<Vec<_>>()
    };
    Ok(match cmd {
        ArtifactsCmd::Put {
            name,
            file,
            mime_type,
            metadata,
        } => {
            ArtifactName::new(name.clone())?;
            let segments = under("artifacts", &name);
            remote_put(remote, &strs(&segments), &file, mime_type, metadata).await?
        }
        ArtifactsCmd::Get {
            name,
            version,
            out,
            offset,
            length,
        } => {
            let segments = under("artifacts", &name);
            let url = remote.url(&strs(&segments))?;
            let mut rq = remote.request(Method::GET, url);
            if let Some(v) = version {
                rq = rq.query(&[("version", v)]);
            }
            if let (Some(o), Some(l)) = (offset, length) {
                if l == 0 {
                    bail!("--length must be at least 1");
                }
                rq = rq.header(reqwest::header::RANGE, format!("bytes={o}-{}", o + l - 1));
            }
            let reply = remote.send(rq).await?;
            remote_download(reply, &out, offset.is_none()).await?
        }
        ArtifactsCmd::Head { name, version } => {
            let segments = under("artifact-meta", &name);
            let q: Vec<(&str, String)> = version
                .map(|v| ("version", v.to_string()))
                .into_iter()
                .collect();
            remote.json(Method::GET, &strs(&segments), &q, None).await?
        }
        ArtifactsCmd::Ls { cursor, limit } => {
            let mut segments = prefix.clone();
            segments.push("artifacts");
            remote
                .json(Method::GET, &segments, &page(cursor, limit), None)
                .await?
        }
        ArtifactsCmd::Versions {
            name,
            cursor,
            limit,
        } => {
            let segments = under("artifact-versions", &name);
            remote
                .json(
                    Method::GET,
                    &strs(&segments),
                    &page(cursor.map(|c| c.to_string()), limit),
                    None,
                )
                .await?
        }
        ArtifactsCmd::Rm { name, version, all } => {
            let segments = under("artifacts", &name);
            let version = version.map(|v| ("version", v.to_string()));
            let all = all.then(|| ("all", "true".to_owned()));
            let q: Vec<_> = version.into_iter().chain(all).collect();
            remote
                .json(Method::DELETE, &strs(&segments), &q, None)
                .await?
        }
        ArtifactsCmd::Repair { .. } => {
            bail!(
                "repair works on a data directory; run it where the server's data is, with the server stopped"
            )
        }
    })
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Streams a file (or stdin) up as the next version.
async fn remote_put(
    remote: &crate::remote::Remote,
    segments: &[&str],
    file: &Path,
    mime_type: Option<String>,
    metadata: Option<String>,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    let len = if file.as_os_str() == "-" {
        0
    } else {
        std::fs::metadata(file).map_or(0, |m| m.len())
    };
    let mut rq = remote.request(Method::PUT, remote.url(segments)?);
    if let Some(m) = mime_type {
        rq = rq.header(reqwest::header::CONTENT_TYPE, m);
    }
    if let Some(m) = metadata {
        match serde_json::from_str::<Value>(&m).context("--metadata is not JSON")? {
            Value::Object(_) => rq = rq.header("x-hippocamp-metadata", m),
            _ => bail!("--metadata must be a JSON object"),
        }
    }
    let body = file_stream(file, bar(len, "put"))?;
    Ok(remote
        .send(rq.body(reqwest::Body::wrap_stream(body)))
        .await?
        .json()
        .await?)
}

/// Writes a reply's body to `out` (`-`: stdout) through a `.part` file.
/// The server verified every chunk before sending it; a whole read is
/// also checked here against the version's SHA-256 (its ETag), so a
/// truncated transfer never lands under the target's name.
async fn remote_download(
    reply: reqwest::Response,
    out: &Path,
    whole: bool,
) -> anyhow::Result<Value> {
    use sha2::Digest as _;
    let expected = reply
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_owned());
    let version = reply
        .headers()
        .get("x-hippocamp-version")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let total = reply.content_length().unwrap_or(0);
    let bar = bar(total, "get");
    let to_stdout = out.as_os_str() == "-";
    let part = out.with_extension("part");
    let mut sink: Box<dyn tokio::io::AsyncWrite + Unpin + Send> = if to_stdout {
        Box::new(tokio::io::stdout())
    } else {
        Box::new(tokio::fs::File::create(&part).await?)
    };
    let mut hasher = sha2::Sha256::new();
    let mut got = 0u64;
    let mut body = reply.bytes_stream();
    let result: anyhow::Result<()> = async {
        while let Some(piece) = body.next().await {
            let piece = piece.context("the download was cut")?;
            hasher.update(&piece);
            got += piece.len() as u64;
            bar.inc(piece.len() as u64);
            sink.write_all(&piece).await?;
        }
        sink.flush().await?;
        if got != total {
            bail!("the download ended after {got} of {total} bytes");
        }
        if whole && expected.as_deref() != Some(hex::encode(hasher.finalize()).as_str()) {
            bail!("the downloaded bytes do not match the version's SHA-256");
        }
        Ok(())
    }
    .await;
    drop(sink);
    bar.finish_and_clear();
    if let Err(e) = result {
        if !to_stdout {
            let _ = tokio::fs::remove_file(&part).await;
        }
        return Err(e);
    }
    if to_stdout {
        return Ok(Value::Null);
    }
    tokio::fs::rename(&part, out).await?;
    Ok(json!({"written": out, "bytes": got, "version": version}))
}
