//! `hippocamp serve`, `hippocamp token …` and `hippocamp config check`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use hippocamp_server::Bound;
use hippocamp_services::Config;
use hippocamp_services::auth::{TokenStore, grant};
use serde_json::{Value, json};

/// Prints a line to stdout; a server does not stop because nobody reads
/// its output any more (`println!` would panic on a closed pipe).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, $($arg)*).and_then(|()| out.flush());
    }};
}

/// `hippocamp serve`.
#[derive(Debug, Args)]
pub(crate) struct Serve {
    /// A TOML configuration file (profile, bounds); unknown keys are refused.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data directory (overrides the file's `data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The listening address (overrides the file's `bind`).
    #[arg(long)]
    bind: Option<std::net::SocketAddr>,
}

/// `hippocamp token …` on a data directory.
#[derive(Debug, Subcommand)]
pub(crate) enum TokenCmd {
    /// Make a token; its secret is printed once and stored hashed.
    #[command(group(clap::ArgGroup::new("apps").required(true).args(["app", "all_apps"])))]
    Create {
        /// The application it grants.
        #[arg(long)]
        app: Option<String>,
        /// Every application instead of one (an admin token only:
        /// `--permissions admin`).
        #[arg(long, conflicts_with = "user")]
        all_apps: bool,
        /// The one user it grants (omit for every user of the app).
        #[arg(long)]
        user: Option<String>,
        /// Comma-separated: memory:read, memory:write, memory:erase,
        /// artifacts:read, artifacts:write, artifacts:delete, admin.
        #[arg(long)]
        permissions: String,
        /// A label for people.
        #[arg(long, default_value = "")]
        label: String,
        /// How long it is accepted, e.g. `30m`, `12h`, `90d` (default:
        /// until revoked). After that it is refused with 401, saying it
        /// expired.
        #[arg(long, value_parser = parse_lifetime)]
        expires_in: Option<std::time::Duration>,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by id (a running server notices within a second).
    Revoke {
        /// The token's id.
        id: String,
    },
}

/// The longest `--expires-in`: ten years.
const MAX_TOKEN_LIFETIME: std::time::Duration = std::time::Duration::from_hours(3_650 * 24);

/// A token lifetime: a positive duration such as `30m`, `12h` or `90d`, at
/// most ten years.
fn parse_lifetime(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration like 30m, 12h or 90d: {e}"))?;
    if d.is_zero() {
        return Err("a token's lifetime must be longer than zero".into());
    }
    if d > MAX_TOKEN_LIFETIME {
        return Err(
            "a token's lifetime is at most 3650d; omit --expires-in for one that does not expire"
                .into(),
        );
    }
    Ok(d)
}

/// `hippocamp config …`.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCmd {
    /// Validate a configuration file and print it with every default.
    Check {
        /// The TOML file.
        file: PathBuf,
    },
}

fn load(path: &Path) -> anyhow::Result<Config> {
    Config::load(path).with_context(|| format!("in {}", path.display()))
}

pub(crate) fn config(cmd: ConfigCmd) -> anyhow::Result<Value> {
    match cmd {
        ConfigCmd::Check { file } => {
            let c = load(&file)?;
            Ok(json!({ "valid": true, "config": c }))
        }
    }
}

/// `hippocamp token …` on the tokens a configuration names: the data
/// directory's file (durable), or the shared table in PostgreSQL
/// (distributed; every server sees a change within a second).
pub(crate) async fn token(config: &Config, cmd: TokenCmd) -> anyhow::Result<Value> {
    let store = match config.profile {
        hippocamp_services::Profile::Durable => {
            let dir = hippocamp_services::layout::data_dir(&config.data_dir)?;
            if let Some(note) = hippocamp_services::layout::ephemeral_mark(&dir) {
                eprintln!("warning: {}: {}", dir.display(), note.trim_end());
            }
            TokenStore::open(&dir)?
        }
        hippocamp_services::Profile::Distributed => {
            let pg = config
                .postgres
                .as_ref()
                .context("the distributed profile needs [postgres]")?;
            let db = hippocamp_postgres::Database::connect(&pg.connection()?).await?;
            TokenStore::shared(hippocamp_postgres::PgTokens::new(db)).await?
        }
        other => anyhow::bail!(
            "the configuration's profile is `{}`; tokens live in a durable data directory or in the distributed profile's database",
            other.as_str()
        ),
    };
    Ok(match cmd {
        TokenCmd::Create {
            app,
            all_apps,
            user,
            permissions,
            label,
            expires_in,
        } => {
            let g = grant(app.as_deref(), user.as_deref(), &permissions)?;
            if all_apps && !g.is_admin() {
                anyhow::bail!(
                    "--all-apps makes a token for every application: only an admin token (--permissions admin) may have that grant; give --app for anything else"
                );
            }
            let (secret, record) = store.create_shared(&label, g, expires_in).await?;
            json!({ "token": secret, "record": record })
        }
        TokenCmd::List => json!({ "tokens": store.list_shared().await? }),
        TokenCmd::Revoke { id } => {
            // A typo must not read as success: nothing was revoked.
            if !store.revoke_shared(&id).await? {
                anyhow::bail!(
                    "no token has the id `{id}`: nothing was revoked (`hippocamp token list` shows the ids)"
                );
            }
            json!({ "revoked": true })
        }
    })
}

/// The server's logging: one line per request (route, status, latency,
/// scope hash; never content or names) on stderr unless RUST_LOG says
/// otherwise.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

pub(crate) async fn serve(args: Serve) -> anyhow::Result<()> {
    init_logging();
    let mut config = match &args.config {
        Some(path) => load(path)?,
        None => Config::default(),
    };
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    }
    if let Some(b) = args.bind {
        config.bind = b;
    }
    let profile = config.profile;
    let bound = Bound::new(config.clone())
        .await
        .context("starting the server")?;
    if profile == hippocamp_services::Profile::Ephemeral {
        // Its tokens live in memory: `token create` on this directory
        // reads this and warns.
        // A directory it cannot write (a read-only place) only loses the
        // warning: the server itself keeps nothing there.
        if let Err(e) = hippocamp_services::layout::mark_ephemeral(
            &config.data_dir,
            &format!(
                "an ephemeral server (pid {}) keeps its tokens in memory: a token made in this directory is not seen by it\n",
                std::process::id()
            ),
        ) {
            eprintln!(
                "warning: cannot mark {} as an ephemeral server's: {e}",
                config.data_dir.display()
            );
        }
    }
    let admin = bound.services().tokens.ensure_admin_shared().await?;
    let addr = bound.local_addr();
    say!(
        "hippocamp {} profile listening on http://{addr}",
        profile.as_str()
    );
    if profile == hippocamp_services::Profile::Durable {
        hippocamp_services::layout::clear_ephemeral_mark(&config.data_dir);
        say!("data directory: {}", config.data_dir.display());
    }
    if let Some(pg) = &config.postgres {
        // The schema only: the URL may hold a password.
        say!("postgres schema: {}", pg.schema);
    }
    if let Some(t) = admin {
        say!("admin token (shown once, stored hashed): {t}\ninspection page: http://{addr}/ui");
    } else {
        say!(
            "inspection page: http://{addr}/ui (an admin token: `hippocamp token create --all-apps --permissions admin`)"
        );
    }
    bound
        .serve(async {
            let ctrl_c = tokio::signal::ctrl_c();
            #[cfg(unix)]
            {
                let Ok(mut term) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                else {
                    let _ = ctrl_c.await;
                    return;
                };
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            #[cfg(not(unix))]
            {
                let _ = ctrl_c.await;
            }
        })
        .await?;
    say!("stopped");
    Ok(())
}
