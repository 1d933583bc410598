//! Bearer tokens bound to scopes.
//!
//! A token grants one application (or, for the admin token made on first
//! start, every application) and either one user or every user of it, with
//! a set of permissions. Tokens are 256 random bits, so they are stored as
//! their SHA-256 (a slow password hash buys nothing against a secret that
//! cannot be guessed), in `tokens.json` in the data directory, written
//! atomically. A running server looks at the file on a timer, off the
//! request path ([`TokenStore::watch`]), and reloads it when it changed, so
//! `hippocamp token create` and `revoke` take effect within a second;
//! checking a presented token is a lookup in memory, never file I/O.

use std::collections::{BTreeSet, HashMap};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use hippocamp_artifacts::ArtifactScope;
use hippocamp_core::{AppName, Error, Field, MemoryScope, Problem, Result, Sha256Digest, UserId};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

/// The token file in a data directory.
pub const TOKENS_FILE: &str = "tokens.json";
/// The prefix of every token (helps secret scanners).
pub const TOKEN_PREFIX: &str = "hct_";

pub use hippocamp_core::Permission;

/// What a token grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// The application; `None` for every application (the admin token).
    pub app: Option<AppName>,
    /// The user; `None` for every user of the application.
    pub user: Option<UserId>,
    /// Permissions.
    pub permissions: BTreeSet<Permission>,
}

impl Grant {
    fn has(&self, p: Permission) -> bool {
        self.permissions.contains(&p) || self.permissions.contains(&Permission::Admin)
    }

    fn app_ok(&self, app: &AppName) -> bool {
        self.app.as_ref().is_none_or(|a| a == app)
    }

    fn user_ok(&self, user: &UserId) -> bool {
        self.user.as_ref().is_none_or(|u| u == user)
    }

    /// Whether the grant covers `p` on a memory scope.
    pub fn allows_memory(&self, scope: &MemoryScope, p: Permission) -> bool {
        self.has(p) && self.app_ok(scope.app()) && self.user_ok(scope.user())
    }

    /// Whether the grant covers `p` on an artifact scope. A user-bound
    /// token may read its application's app-scoped artifacts; only a token
    /// for every user writes or deletes them.
    pub fn allows_artifacts(&self, scope: &ArtifactScope, p: Permission) -> bool {
        if !self.has(p) || !self.app_ok(scope.app_name()) {
            return false;
        }
        match scope {
            ArtifactScope::App { .. } => self.user.is_none() || p == Permission::ArtifactsRead,
            ArtifactScope::User { user, .. } | ArtifactScope::Session { user, .. } => {
                self.user_ok(user)
            }
        }
    }

    /// Whether this is an admin grant (the inspection page).
    pub fn is_admin(&self) -> bool {
        self.permissions.contains(&Permission::Admin)
    }
}

/// A stored token (its secret is never stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRecord {
    /// A short public id (the first 12 hex digits of the hash).
    pub id: String,
    /// SHA-256 of the secret, hex.
    pub sha256: String,
    /// A free label.
    pub label: String,
    /// What it grants.
    pub grant: Grant,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
    /// When it stops being accepted, ms since the epoch (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

impl TokenRecord {
    /// Whether it has expired at `now_ms` (at its expiry it already has).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// What a presented secret is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presented {
    /// A current token: its grant and its public id.
    Valid(Grant, String),
    /// A token that expired at `at_ms` (ms since the epoch).
    Expired {
        /// Its public id.
        id: String,
        /// When it expired.
        at_ms: u64,
    },
    /// No token has this secret (never made, or revoked).
    Unknown,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    format: u32,
    tokens: Vec<TokenRecord>,
}

const TOKEN_FORMAT: u32 = 1;

#[derive(Debug)]
struct Loaded {
    tokens: Vec<TokenRecord>,
    /// Grants and expiries by secret hash: what authentication looks up.
    by_hash: HashMap<String, (Grant, Option<u64>)>,
    modified: Option<Stamp>,
    /// The shared table's version these are as of.
    version: Option<i64>,
}

impl Loaded {
    fn new(tokens: Vec<TokenRecord>, modified: Option<Stamp>) -> Self {
        let by_hash = tokens
            .iter()
            .map(|t| (t.sha256.clone(), (t.grant.clone(), t.expires_at_ms)))
            .collect();
        Self {
            tokens,
            by_hash,
            modified,
            version: None,
        }
    }
}

/// How often a watched token file (or the shared table's version) is
/// looked at: a token revoked through one server is refused by every
/// other within this period plus one query.
pub const WATCH_PERIOD: Duration = Duration::from_millis(500);

/// The tokens of a server: a file in the data directory, memory only, or
/// a table in PostgreSQL shared by every server of the distributed
/// profile. Authentication is a lookup in memory either way; the file or
/// the table is watched.
#[derive(Debug)]
pub struct TokenStore {
    /// The shared table, in the distributed profile: changes go through
    /// the `*_shared` calls.
    shared: Option<hippocamp_postgres::PgTokens>,
    path: Option<PathBuf>,
    loaded: RwLock<Loaded>,
    /// Serialises re-reads of the file.
    reading: Mutex<()>,
}

/// What identifies a version of the token file: it is replaced by a
/// rename on every change, so its inode changes even when two writes land
/// within one tick of the file-time clock.
type Stamp = (SystemTime, u64, u64);

fn stamp(path: &Path) -> Option<Stamp> {
    stamp_of(&std::fs::metadata(path).ok()?)
}

fn stamp_of(m: &std::fs::Metadata) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt as _;
    Some((m.modified().ok()?, m.ino(), m.len()))
}

fn hash(secret: &str) -> String {
    Sha256Digest::of(secret.as_bytes()).to_string()
}

fn io(what: &str, e: &std::io::Error) -> Error {
    Error::Unavailable(format!("{what}: {e}"))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl TokenStore {
    /// Tokens kept in memory only (the ephemeral profile).
    pub fn in_memory() -> Self {
        Self {
            shared: None,
            path: None,
            loaded: RwLock::new(Loaded::new(Vec::new(), None)),
            reading: Mutex::new(()),
        }
    }

    /// The token file of `data_dir` (created on the first write).
    pub fn open(data_dir: &Path) -> Result<Self> {
        let path = data_dir.join(TOKENS_FILE);
        let (tokens, modified) = read_file(&path)?;
        Ok(Self {
            shared: None,
            path: Some(path),
            loaded: RwLock::new(Loaded::new(tokens, modified)),
            reading: Mutex::new(()),
        })
    }

    /// The tokens of the shared table (the distributed profile), loaded.
    pub async fn shared(table: hippocamp_postgres::PgTokens) -> Result<Self> {
        let store = Self {
            shared: Some(table),
            path: None,
            loaded: RwLock::new(Loaded::new(Vec::new(), None)),
            reading: Mutex::new(()),
        };
        store.refresh_shared().await?;
        Ok(store)
    }

    /// Re-reads the shared table if its version moved (for a file or
    /// memory, as [`refresh`](Self::refresh)).
    pub async fn refresh_shared(&self) -> Result<()> {
        let Some(table) = &self.shared else {
            return self.refresh();
        };
        let version = table.version().await?;
        if Some(version) == self.loaded.read().version {
            return Ok(());
        }
        let (version, records) = table.load().await?;
        let tokens = records
            .iter()
            .map(|r| {
                serde_json::from_str::<TokenRecord>(r)
                    .map_err(|e| Error::Corrupt(format!("a token record is unreadable: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut loaded = Loaded::new(tokens, None);
        loaded.version = Some(version);
        let mut l = self.loaded.write();
        // A slower reload never replaces a newer one.
        if l.version.is_none_or(|v| v < version) {
            *l = loaded;
        }
        Ok(())
    }

    /// Creates a token wherever the tokens live (the shared table, the
    /// file, memory), accepted for `lifetime` from now if given; returns
    /// its secret (shown once) and its record.
    pub async fn create_shared(
        &self,
        label: &str,
        grant: Grant,
        lifetime: Option<Duration>,
    ) -> Result<(String, TokenRecord)> {
        let Some(table) = &self.shared else {
            return self.create_for(label, grant, lifetime);
        };
        let (secret, record) = new_token(label, grant, lifetime)?;
        let json = serde_json::to_string(&record)
            .map_err(|e| Error::Corrupt(format!("cannot encode a token: {e}")))?;
        table.insert(&record.id, &record.sha256, &json).await?;
        self.refresh_shared().await?;
        Ok((secret, record))
    }

    /// Revokes a token by id wherever the tokens live.
    pub async fn revoke_shared(&self, id: &str) -> Result<bool> {
        let Some(table) = &self.shared else {
            return self.revoke(id);
        };
        let found = table.remove(id).await?;
        self.refresh_shared().await?;
        Ok(found)
    }

    /// Every token's record, wherever the tokens live.
    pub async fn list_shared(&self) -> Result<Vec<TokenRecord>> {
        self.refresh_shared().await?;
        Ok(self.loaded.read().tokens.clone())
    }

    /// [`ensure_admin`](Self::ensure_admin) wherever the tokens live.
    pub async fn ensure_admin_shared(&self) -> Result<Option<String>> {
        if self.shared.is_none() {
            return self.ensure_admin();
        }
        if !self.list_shared().await?.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            self.create_shared("admin (first start)", admin_grant(), None)
                .await?
                .0,
        ))
    }

    /// The token file, if the tokens live in one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Looks at the token file every [`WATCH_PERIOD`] on a blocking
    /// thread and reloads it when it changed, until the store is dropped.
    /// Needs a Tokio runtime; does nothing for in-memory tokens.
    pub fn watch(self: &Arc<Self>) {
        if self.shared.is_some() {
            let weak: Weak<Self> = Arc::downgrade(self);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(WATCH_PERIOD);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    let Some(me) = weak.upgrade() else { return };
                    if let Err(e) = me.refresh_shared().await {
                        tracing::warn!("cannot reload the shared tokens: {e}");
                    }
                }
            });
            return;
        }
        if self.path.is_none() {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WATCH_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(me) = weak.upgrade() else { return };
                let done = tokio::task::spawn_blocking(move || me.refresh());
                if let Ok(Err(e)) = done.await {
                    tracing::warn!("cannot reload the token file: {e}");
                }
            }
        });
    }

    /// Creates a token that does not expire; returns its secret (shown
    /// once) and its record.
    pub fn create(&self, label: &str, grant: Grant) -> Result<(String, TokenRecord)> {
        self.create_for(label, grant, None)
    }

    /// Creates a token accepted for `lifetime` from now (`None`: until
    /// revoked; zero: already expired, which tests use).
    pub fn create_for(
        &self,
        label: &str,
        grant: Grant,
        lifetime: Option<Duration>,
    ) -> Result<(String, TokenRecord)> {
        let (secret, record) = new_token(label, grant, lifetime)?;
        let rec = record.clone();
        self.update(move |tokens| {
            tokens.push(rec);
            Ok(())
        })?;
        Ok((secret, record))
    }

    /// Every token's record (the file as it is now).
    pub fn list(&self) -> Result<Vec<TokenRecord>> {
        self.refresh()?;
        Ok(self.loaded.read().tokens.clone())
    }

    /// Revokes a token by id; whether one was revoked.
    pub fn revoke(&self, id: &str) -> Result<bool> {
        let mut found = false;
        self.update(|tokens| {
            let before = tokens.len();
            tokens.retain(|t| t.id != id);
            found = tokens.len() != before;
            Ok(())
        })?;
        Ok(found)
    }

    /// Makes an admin token for every application if there is no token
    /// at all; returns its secret when it did.
    pub fn ensure_admin(&self) -> Result<Option<String>> {
        self.refresh()?;
        if !self.loaded.read().tokens.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.create("admin (first start)", admin_grant())?.0))
    }

    /// The grant of a presented secret, if it is a current token: a
    /// lookup in memory (the file is watched elsewhere).
    pub fn authenticate(&self, secret: &str) -> Option<Grant> {
        match self.identify(secret) {
            Presented::Valid(grant, _) => Some(grant),
            _ => None,
        }
    }

    /// [`authenticate`](Self::authenticate) with the token's public id
    /// (the first 12 hex digits of the same hash, computed once), and why
    /// a secret is not accepted: unknown, or expired (and when).
    pub fn identify(&self, secret: &str) -> Presented {
        let h = hash(secret);
        let Some((grant, expires)) = self.loaded.read().by_hash.get(&h).cloned() else {
            return Presented::Unknown;
        };
        let id = h[..12].to_owned();
        match expires {
            Some(at_ms) if at_ms <= now_ms() => Presented::Expired { id, at_ms },
            _ => Presented::Valid(grant, id),
        }
    }

    /// Re-reads the file if it changed since it was last read.
    pub fn refresh(&self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _reading = self.reading.lock();
        let modified = stamp(path);
        if modified == self.loaded.read().modified {
            return Ok(());
        }
        let (tokens, modified) = read_file(path)?;
        *self.loaded.write() = Loaded::new(tokens, modified);
        Ok(())
    }

    fn update(&self, change: impl FnOnce(&mut Vec<TokenRecord>) -> Result<()>) -> Result<()> {
        if self.shared.is_some() {
            // A change made here would stay in this process: the shared
            // table is changed through the `*_shared` calls only.
            return Err(Error::Unsupported {
                operation: "changing shared tokens synchronously",
                backend: "postgres (use create_shared / revoke_shared)",
            });
        }
        let Some(path) = &self.path else {
            let mut l = self.loaded.write();
            let mut tokens = std::mem::take(&mut l.tokens);
            let r = change(&mut tokens);
            *l = Loaded::new(tokens, None);
            return r;
        };
        let dir = path
            .parent()
            .ok_or_else(|| Error::Unavailable("the token file has no directory".into()))?;
        hippocamp_durable::fs::private_dir(dir)
            .map_err(|e| io("cannot use the data directory", &e))?;
        // A re-read must not interleave either: one that read the file
        // before this change would install the old tokens after it.
        let _reading = self.reading.lock();
        // Two `hippocamp token` commands must not interleave their edits.
        let _lock = loop {
            match hippocamp_durable::DirLock::acquire(dir, "tokens.lock") {
                Ok(l) => break l,
                Err(hippocamp_durable::lock::LockError::Held) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(hippocamp_durable::lock::LockError::Io(e)) => {
                    return Err(io("cannot lock the token file", &e));
                }
            }
        };
        let (mut tokens, _) = read_file(path)?;
        change(&mut tokens)?;
        let body = serde_json::to_vec_pretty(&TokenFile {
            format: TOKEN_FORMAT,
            tokens: tokens.clone(),
        })
        .map_err(|e| Error::Unavailable(format!("cannot encode tokens: {e}")))?;
        let tmp = path.with_extension("json.tmp");
        // The stamp of the file written (a rename keeps it), not of
        // whatever is at the path after the rename.
        let written = {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| io("cannot write the token file", &e))?;
            f.write_all(&body)
                .and_then(|()| f.sync_all())
                .map_err(|e| io("cannot write the token file", &e))?;
            f.metadata().ok().as_ref().and_then(stamp_of)
        };
        std::fs::rename(&tmp, path).map_err(|e| io("cannot replace the token file", &e))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("cannot sync the data directory", &e))?;
        *self.loaded.write() = Loaded::new(tokens, written);
        Ok(())
    }
}

/// The grant of the admin token a first start makes.
fn admin_grant() -> Grant {
    Grant {
        app: None,
        user: None,
        permissions: BTreeSet::from([Permission::Admin]),
    }
}

/// A new token's secret and record.
fn new_token(
    label: &str,
    grant: Grant,
    lifetime: Option<Duration>,
) -> Result<(String, TokenRecord)> {
    if grant.permissions.is_empty() {
        return Err(Error::config(
            "permissions",
            Problem::Malformed("a token needs at least one permission".into()),
        ));
    }
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(rand::random::<[u8; 32]>()));
    let sha256 = hash(&secret);
    let now = now_ms();
    let record = TokenRecord {
        id: sha256[..12].to_owned(),
        sha256,
        label: label.to_owned(),
        grant,
        created_at_ms: now,
        expires_at_ms: lifetime
            .map(|d| now.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))),
    };
    Ok((secret, record))
}

/// The tokens of the file at `path` and the stamp of the very file read
/// (taken from the open handle, so a replacement made while reading is
/// seen as a change by the next look, never mistaken for what was read).
fn read_file(path: &Path) -> Result<(Vec<TokenRecord>, Option<Stamp>)> {
    use std::io::Read as _;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(io("cannot read the token file", &e)),
    };
    let read_stamp = f.metadata().ok().as_ref().and_then(stamp_of);
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| io("cannot read the token file", &e))?;
    let file: TokenFile = serde_json::from_slice(&bytes).map_err(|e| {
        Error::Corrupt(format!(
            "the token file {} is unreadable: {e}",
            path.display()
        ))
    })?;
    if file.format != TOKEN_FORMAT {
        return Err(Error::Unavailable(format!(
            "the token file has format {}, this build reads {TOKEN_FORMAT}",
            file.format
        )));
    }
    Ok((file.tokens, read_stamp))
}

/// Parses `memory:read,artifacts:read` into a set.
pub fn parse_permissions(list: &str) -> Result<BTreeSet<Permission>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Permission::parse)
        .collect()
}

/// Validates the app and user of a grant given as text.
pub fn grant(app: Option<&str>, user: Option<&str>, permissions: &str) -> Result<Grant> {
    let app = app.map(AppName::new).transpose()?;
    let user = user.map(UserId::new).transpose()?;
    if app.is_none() && user.is_some() {
        return Err(Error::invalid(
            Field::UserId,
            Problem::Malformed("a user grant needs its application".into()),
        ));
    }
    Ok(Grant {
        app,
        user,
        permissions: parse_permissions(permissions)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn g(app: Option<&str>, user: Option<&str>, p: &str) -> Grant {
        grant(app, user, p).unwrap()
    }

    #[test]
    fn grants_cover_exactly_their_scope() {
        let alice = MemoryScope::parse("a", "alice").unwrap();
        let bob = MemoryScope::parse("a", "bob").unwrap();
        let other = MemoryScope::parse("b", "alice").unwrap();
        let user = g(Some("a"), Some("alice"), "memory:read");
        assert!(user.allows_memory(&alice, Permission::MemoryRead));
        assert!(!user.allows_memory(&alice, Permission::MemoryWrite));
        assert!(!user.allows_memory(&bob, Permission::MemoryRead));
        assert!(!user.allows_memory(&other, Permission::MemoryRead));
        let app = g(Some("a"), None, "memory:read");
        assert!(app.allows_memory(&bob, Permission::MemoryRead));
        assert!(!app.allows_memory(&other, Permission::MemoryRead));
        let admin = g(None, None, "admin");
        assert!(admin.allows_memory(&other, Permission::MemoryErase));
    }

    #[test]
    fn app_artifacts_are_readable_by_users_and_writable_by_the_app() {
        let shared = ArtifactScope::app("a").unwrap();
        let user = g(Some("a"), Some("alice"), "artifacts:read,artifacts:write");
        assert!(user.allows_artifacts(&shared, Permission::ArtifactsRead));
        assert!(!user.allows_artifacts(&shared, Permission::ArtifactsWrite));
        let app = g(Some("a"), None, "artifacts:write");
        assert!(app.allows_artifacts(&shared, Permission::ArtifactsWrite));
        let session = ArtifactScope::session("a", "bob", "s").unwrap();
        assert!(!user.allows_artifacts(&session, Permission::ArtifactsRead));
        assert!(
            !user.allows_artifacts(&ArtifactScope::app("b").unwrap(), Permission::ArtifactsRead)
        );
    }

    #[test]
    fn a_token_is_known_at_once_while_the_file_is_being_re_read() {
        // A re-read that read the file before a change must not install
        // the older tokens after it.
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(TokenStore::open(dir.path()).unwrap());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (store, stop) = (Arc::clone(&store), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    store.refresh().unwrap();
                }
            })
        };
        for i in 0..200 {
            let (secret, _) = store
                .create(&format!("t{i}"), g(Some("a"), None, "memory:read"))
                .unwrap();
            assert!(store.authenticate(&secret).is_some(), "token {i}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        reader.join().unwrap();
    }

    #[test]
    fn tokens_persist_hashed_and_revoke() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::open(dir.path()).unwrap();
        let admin = store.ensure_admin().unwrap().unwrap();
        assert!(store.ensure_admin().unwrap().is_none());
        let (secret, rec) = store
            .create("t", g(Some("a"), Some("u"), "memory:read"))
            .unwrap();
        let text = std::fs::read_to_string(dir.path().join(TOKENS_FILE)).unwrap();
        assert!(!text.contains(&secret) && !text.contains(&admin));
        let again = TokenStore::open(dir.path()).unwrap();
        assert!(again.authenticate(&secret).is_some());
        assert!(again.authenticate(&admin).unwrap().is_admin());
        assert!(again.authenticate("hct_nope").is_none());
        assert!(again.revoke(&rec.id).unwrap());
        assert!(!again.revoke(&rec.id).unwrap());
        assert!(
            TokenStore::open(dir.path())
                .unwrap()
                .authenticate(&secret)
                .is_none()
        );
        assert!(parse_permissions("memory:read,nope").is_err());
        assert!(grant(None, Some("u"), "memory:read").is_err());
    }

    #[tokio::test]
    async fn authentication_reads_memory_and_the_watch_picks_up_changes() {
        let dir = tempfile::tempdir().unwrap();
        let server = Arc::new(TokenStore::open(dir.path()).unwrap());
        server.watch();
        // Another process (the CLI) makes a token: the watch finds it.
        let cli = TokenStore::open(dir.path()).unwrap();
        let (secret, rec) = cli.create("t", g(Some("a"), None, "memory:read")).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.authenticate(&secret).is_none() {
            assert!(std::time::Instant::now() < deadline, "never picked up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Unknown tokens never touch the file: with it unreadable, the
        // known token still authenticates and an unknown one is refused
        // at once.
        std::fs::write(dir.path().join(TOKENS_FILE), b"not json").unwrap();
        assert!(server.authenticate("hct_unknown").is_none());
        assert!(server.authenticate(&secret).is_some());
        assert!(server.refresh().is_err());
        // Revocation by the CLI shows within the watch period.
        std::fs::remove_file(dir.path().join(TOKENS_FILE)).unwrap();
        let cli = TokenStore::open(dir.path()).unwrap();
        let (other, _) = cli.create("u", g(Some("a"), None, "memory:read")).unwrap();
        assert!(!cli.revoke(&rec.id).unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.authenticate(&other).is_none() || server.authenticate(&secret).is_some() {
            assert!(std::time::Instant::now() < deadline, "never reloaded");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
