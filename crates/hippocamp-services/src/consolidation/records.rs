//! Where consolidation run records are kept ([`RunRecords`]): in memory
//! (the ephemeral profile), in the data directory (durable: one redb
//! file, each change committed with an fsync) or in PostgreSQL
//! (distributed: every server sees the same runs). A record holds ids,
//! counts and states, never content, and is forgotten with its user.
//!
//! Each scope keeps its newest `keep` records, ordered by start time then
//! id. A record read back in state `running` whose run is not under way
//! in this process (a restart cut it short) reads as `failed`
//! (`interrupted`): see [`super::Consolidations::list`].

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use async_trait::async_trait;
use hippocamp_core::{Error, MemoryScope, Result};
use parking_lot::Mutex;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::Run;

/// Where run records live.
#[async_trait]
pub trait RunRecords: Send + Sync + fmt::Debug {
    /// Writes `run` (replacing its earlier record), then keeps the newest
    /// `keep` records of `scope`.
    async fn put(&self, scope: &MemoryScope, run: &Run, keep: u64) -> Result<()>;

    /// The records of `scope`, newest first.
    async fn list(&self, scope: &MemoryScope) -> Result<Vec<Run>>;

    /// Forgets every record of `scope` (its user was erased).
    async fn forget(&self, scope: &MemoryScope) -> Result<()>;
}

/// The order of a scope's records: start time, then id (fixed width, so
/// byte order is time order).
fn run_key(run: &Run) -> String {
    format!("{:020}-{}", run.started_at_ms, run.id)
}

fn decode(json: &[u8]) -> Result<Run> {
    serde_json::from_slice(json)
        .map_err(|e| Error::Corrupt(format!("a consolidation run record: {e}")))
}

fn encode(run: &Run) -> Result<String> {
    serde_json::to_string(run)
        .map_err(|e| Error::Corrupt(format!("cannot encode a consolidation run record: {e}")))
}

/// Records in this process's memory (the ephemeral profile).
#[derive(Debug, Default)]
pub struct InMemoryRunRecords {
    scopes: Mutex<HashMap<MemoryScope, Vec<(String, Run)>>>,
}

#[async_trait]
impl RunRecords for InMemoryRunRecords {
    async fn put(&self, scope: &MemoryScope, run: &Run, keep: u64) -> Result<()> {
        let mut scopes = self.scopes.lock();
        let list = scopes.entry(scope.clone()).or_default();
        let key = run_key(run);
        list.retain(|(k, _)| *k != key);
        list.push((key, run.clone()));
        list.sort_by(|a, b| b.0.cmp(&a.0));
        list.truncate(hippocamp_core::limits::to_usize(keep));
        Ok(())
    }

    async fn list(&self, scope: &MemoryScope) -> Result<Vec<Run>> {
        Ok(self
            .scopes
            .lock()
            .get(scope)
            .map(|l| l.iter().map(|(_, r)| r.clone()).collect())
            .unwrap_or_default())
    }

    async fn forget(&self, scope: &MemoryScope) -> Result<()> {
        self.scopes.lock().remove(scope);
        Ok(())
    }
}

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `(len(app) app user, run key)` → the run's JSON.
const RUNS: TableDefinition<(&[u8], &str), &[u8]> = TableDefinition::new("runs");
const FORMAT: u32 = 1;

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// Records in one redb file of the data directory (`consolidation/`),
/// each change committed with an fsync before it is acknowledged (a run
/// writes its record when it starts and ends, apply and revert once).
pub struct RedbRunRecords {
    db: Database,
    _lock: hippocamp_durable::DirLock,
}

impl fmt::Debug for RedbRunRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbRunRecords").finish_non_exhaustive()
    }
}

impl RedbRunRecords {
    /// Opens (or creates) the records in `dir`, which this process then
    /// owns.
    pub fn open(dir: &Path) -> Result<Self> {
        let init = |db: &Database| {
            hippocamp_durable::db::init_format(
                db,
                META,
                "format",
                FORMAT,
                "the consolidation run records",
                |txn| txn.open_table(RUNS).map(drop).map_err(storage),
            )
        };
        let (lock, db) =
            hippocamp_durable::db::open_owned(dir, "runs.lock", "runs.redb", init, None)?;
        init(&db)?;
        Ok(Self { db, _lock: lock })
    }

    /// The keys of `scope`'s records, oldest first.
    fn keys(
        table: &impl ReadableTable<(&'static [u8], &'static str), &'static [u8]>,
        scope: &[u8],
    ) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for row in table.range((scope, "")..).map_err(storage)? {
            let (k, _) = row.map_err(storage)?;
            let (s, key) = k.value();
            if s != scope {
                break;
            }
            out.push(key.to_owned());
        }
        Ok(out)
    }
}

#[async_trait]
impl RunRecords for RedbRunRecords {
    async fn put(&self, scope: &MemoryScope, run: &Run, keep: u64) -> Result<()> {
        let s = scope.storage_key();
        let json = encode(run)?;
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut t = txn.open_table(RUNS).map_err(storage)?;
            t.insert((s.as_slice(), run_key(run).as_str()), json.as_bytes())
                .map_err(storage)?;
            let keys = Self::keys(&t, &s)?;
            let over = keys
                .len()
                .saturating_sub(hippocamp_core::limits::to_usize(keep));
            for k in &keys[..over] {
                t.remove((s.as_slice(), k.as_str())).map_err(storage)?;
            }
        }
        txn.commit().map_err(storage)
    }

    async fn list(&self, scope: &MemoryScope) -> Result<Vec<Run>> {
        let s = scope.storage_key();
        let txn = self.db.begin_read().map_err(storage)?;
        let t = txn.open_table(RUNS).map_err(storage)?;
        let mut out = Vec::new();
        for row in t.range((s.as_slice(), "")..).map_err(storage)? {
            let (k, v) = row.map_err(storage)?;
            if k.value().0 != s.as_slice() {
                break;
            }
            out.push(decode(v.value())?);
        }
        out.reverse();
        Ok(out)
    }

    async fn forget(&self, scope: &MemoryScope) -> Result<()> {
        let s = scope.storage_key();
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut t = txn.open_table(RUNS).map_err(storage)?;
            for k in Self::keys(&t, &s)? {
                t.remove((s.as_slice(), k.as_str())).map_err(storage)?;
            }
        }
        txn.commit().map_err(storage)
    }
}

/// Records in PostgreSQL (the distributed profile).
#[derive(Debug, Clone)]
pub struct PgRunRecords(pub hippocamp_postgres::PgRuns);

#[async_trait]
impl RunRecords for PgRunRecords {
    async fn put(&self, scope: &MemoryScope, run: &Run, keep: u64) -> Result<()> {
        self.0.put(scope, &run_key(run), &encode(run)?, keep).await
    }

    async fn list(&self, scope: &MemoryScope) -> Result<Vec<Run>> {
        self.0
            .list(scope)
            .await?
            .iter()
            .map(|r| decode(r.as_bytes()))
            .collect()
    }

    async fn forget(&self, scope: &MemoryScope) -> Result<()> {
        self.0.forget(scope).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::consolidation::{ApplyMode, Mode, RunState};

    fn run(id: &str, started_at_ms: u64, state: RunState) -> Run {
        Run {
            id: id.into(),
            mode: Mode::Dedupe,
            apply: ApplyMode::Review,
            state,
            started_at_ms,
            finished_at_ms: None,
            entries_read: 7,
            model_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            turns_read: 0,
            changes: Vec::new(),
            error: None,
        }
    }

    /// Newest first, a record replaced in place, the oldest beyond `keep`
    /// dropped, scopes apart, and forgetting one scope leaves the others
    /// (PostgreSQL's records: `hippocamp-postgres/tests/runs.rs`).
    async fn records_are_kept_newest_first_per_scope(r: &dyn RunRecords) {
        let a = MemoryScope::parse("app", "a").unwrap();
        let b = MemoryScope::parse("app", "b").unwrap();
        for (i, id) in ["run-1", "run-2", "run-3"].iter().enumerate() {
            r.put(&a, &run(id, 1_000 + i as u64, RunState::Running), 2)
                .await
                .unwrap();
        }
        r.put(&b, &run("run-9", 5, RunState::Applied), 2)
            .await
            .unwrap();
        let ids = |runs: Vec<Run>| runs.into_iter().map(|x| x.id).collect::<Vec<_>>();
        assert_eq!(ids(r.list(&a).await.unwrap()), ["run-3", "run-2"]);
        let mut done = run("run-2", 1_001, RunState::Proposed);
        done.finished_at_ms = Some(1_500);
        r.put(&a, &done, 2).await.unwrap();
        let runs = r.list(&a).await.unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1], done, "replaced, not added");
        r.forget(&a).await.unwrap();
        assert!(r.list(&a).await.unwrap().is_empty());
        assert_eq!(ids(r.list(&b).await.unwrap()), ["run-9"]);
    }

    /// A record still `running` past the run's own bound reads as failed
    /// with `timeout` (its server stopped); a recent one as running.
    #[tokio::test]
    async fn a_run_its_server_left_reads_as_failed() {
        let records = std::sync::Arc::new(InMemoryRunRecords::default());
        let runs = crate::consolidation::Consolidations::default().with_records(records.clone());
        let s = MemoryScope::parse("app", "left").unwrap();
        let now = hippocamp_core::time::now_ms();
        records
            .put(&s, &run("run-old", 1_000, RunState::Running), 10)
            .await
            .unwrap();
        records
            .put(&s, &run("run-new", now, RunState::Running), 10)
            .await
            .unwrap();
        let page = runs.list(&s).await.unwrap();
        assert_eq!(page.runs[0].state, RunState::Running);
        assert_eq!(page.runs[1].state, RunState::Failed);
        assert_eq!(page.runs[1].error.as_ref().unwrap().code, "timeout");
    }

    #[tokio::test]
    async fn in_memory_records_pass() {
        records_are_kept_newest_first_per_scope(&InMemoryRunRecords::default()).await;
    }

    #[tokio::test]
    async fn redb_records_pass_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let r = RedbRunRecords::open(dir.path()).unwrap();
        records_are_kept_newest_first_per_scope(&r).await;
        let s = MemoryScope::parse("app", "kept").unwrap();
        let kept = run("run-kept", 42, RunState::Proposed);
        r.put(&s, &kept, 5).await.unwrap();
        drop(r);
        let r = RedbRunRecords::open(dir.path()).unwrap();
        assert_eq!(r.list(&s).await.unwrap(), vec![kept]);
    }
}
