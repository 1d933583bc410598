//! Logged groups applied to the database off the writer's path.
//!
//! A group of adds (`add_entry`, `add_events`) is durable once its log
//! record is synced, and it is acknowledged then: its redb inserts are done
//! afterwards by the *applier*, a thread of the store's own, while the
//! writer goes on deciding and logging the next groups. Those decisions
//! read a snapshot of what the applier has applied, overlaid with what the
//! logged groups not yet applied wrote ([`Overlay`], which also keeps the
//! scope rows of applied groups until the next drain): scope rows, entry
//! records and their obligations, all that an add reads. Erased markers
//! and revisions, which only other operations write, come from the
//! snapshot. Every other operation first waits until the applier has
//! caught up (*drains*) and then runs directly on a write transaction, as
//! do checkpoints.
//!
//! Reads that go to the database wait until everything logged when they
//! started is applied ([`Progress::settled`]), so an acknowledged write is
//! visible to the caller's next read; searches use the scope cache, which
//! is handed each group's changes when it is acknowledged. The applier
//! applies a group's mutations exactly as a replay at open does
//! ([`LogTables`]); a crash loses nothing the log holds. The number and
//! bytes of groups logged but not applied are bounded, so acknowledgements
//! never run far ahead of the database.
//!
//! The applier is woken only when [`WAKE_GROUPS`] groups or [`WAKE_BYTES`]
//! bytes wait for it, or when someone waits for it (a read of the
//! database, an operation or a checkpoint that drains it, a writer out of
//! room, the store closing); once awake it goes on while groups keep
//! arriving. Waking a sleeping thread costs the waker a third of an fsync
//! on a virtual machine (an interrupt to an idle CPU), and a single
//! acknowledged add should pay for its fsync, not for that; batched, the
//! applier also commits several groups in one transaction.
//!
//! No wait on the applier is unbounded. If its thread ends for any reason
//! other than the store closing, a panic included, the store is poisoned
//! with a clear error (every waiter wakes to it, and the writer refuses
//! further writes until the store is reopened, when the log replays what
//! was acknowledged). A writer waiting for room or a drain gives up after
//! [`APPLY_STALL`] without progress (`Timeout`, nothing logged, the store
//! not poisoned); reads wait at most their call's deadline.

// foldhash: the keys are ids (random bytes), hashed for every add; SipHash
// was a measured share of the writer.
use foldhash::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;

use hippocamp_core::{Error, Result};
use parking_lot::{Condvar, Mutex};
use redb::{Database, Durability};

use hippocamp_search::Analyzer;

use crate::format::{
    ENTRIES, ERASED, ERASED_IDS, EXPIRY, Mutation, OBLIGATIONS, REVISIONS, SCOPES, SESSION_EPOCHS,
    SESSIONS, USERS, VECTORS, analysed_record,
};

/// Most groups logged and not yet applied: the next one waits for the
/// applier before it is logged.
pub const MAX_PENDING_GROUPS: usize = 8;
/// Most bytes of log records not yet applied, likewise.
pub const MAX_PENDING_BYTES: usize = 32 << 20;
/// Groups waiting that wake the applier without anyone waiting for it.
pub const WAKE_GROUPS: usize = MAX_PENDING_GROUPS / 2;
/// Bytes of log records waiting that wake it, likewise.
pub const WAKE_BYTES: usize = 1 << 20;
/// Longest a writer waits for the applier to make room or catch up
/// before the operation is refused with `Timeout` (nothing of it logged).
/// A batch of [`MAX_PENDING_BYTES`] applies in well under a second; this
/// bounds a wait on an applier that stalls.
pub const APPLY_STALL: std::time::Duration = std::time::Duration::from_mins(1);

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

/// Most scope rows [`Overlay::prune`] keeps once the database holds them.
pub const KEPT_SCOPE_ROWS: usize = 4_096;

/// What logged groups not yet applied wrote, that an add reads: each
/// value with the sequence number of the group that wrote it last; and,
/// up to [`KEPT_SCOPE_ROWS`], the scope rows of groups already applied.
///
/// Every add reads its scope's row, and reading it from a snapshot (a
/// read transaction begun, a table opened) was a sixth of a single add's
/// CPU before its log write. A kept row is still the database's: between
/// two drains only the applier writes scope rows, and it writes exactly
/// the values logged here; a drain, which any other operation and every
/// checkpoint does first, empties the overlay.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    pub(crate) scopes: HashMap<[u8; 16], (u64, Vec<u8>)>,
    pub(crate) entries: HashMap<[u8; 32], (u64, Vec<u8>)>,
    pub(crate) obligations: HashMap<[u8; 32], (u64, Vec<u8>)>,
}

impl Overlay {
    /// Takes in `group`'s writes, logged as `seq`.
    pub(crate) fn merge(&mut self, group: Overlay, seq: u64) {
        fn stamp<const N: usize>(
            into: &mut HashMap<[u8; N], (u64, Vec<u8>)>,
            from: HashMap<[u8; N], (u64, Vec<u8>)>,
            seq: u64,
        ) {
            into.extend(from.into_iter().map(|(k, (_, v))| (k, (seq, v))));
        }
        stamp(&mut self.scopes, group.scopes, seq);
        stamp(&mut self.entries, group.entries, seq);
        stamp(&mut self.obligations, group.obligations, seq);
    }

    /// Forgets what groups up to `applied` wrote: a snapshot taken after
    /// they were applied holds it (a later group's value stays). Scope
    /// rows are kept while there are at most [`KEPT_SCOPE_ROWS`] of them.
    pub(crate) fn prune(&mut self, applied: u64) {
        if self.scopes.len() > KEPT_SCOPE_ROWS {
            self.scopes.retain(|_, (s, _)| *s > applied);
        }
        self.entries.retain(|_, (s, _)| *s > applied);
        self.obligations.retain(|_, (s, _)| *s > applied);
    }
}

/// How far the log and the database have got.
#[derive(Debug, Default)]
struct State {
    /// The last group logged (acknowledged or about to be).
    logged: u64,
    /// The last group the database holds.
    applied: u64,
    /// Groups and bytes logged and not yet applied.
    pending: Vec<(u64, usize)>,
    /// Why the applier stopped, if it did.
    failed: Option<Error>,
    /// Holds of the applier (tests make the database lag with them).
    paused: usize,
    /// Logged groups the applier has not taken yet, oldest first.
    jobs: Vec<Job>,
    /// Their log records' bytes.
    job_bytes: usize,
    /// Someone waits for the applier: it takes what is there now.
    wanted: bool,
    /// The store is closing: the applier applies what is left and stops.
    closed: bool,
}

impl State {
    /// Whether the applier should take the jobs waiting.
    fn due(&self) -> bool {
        !self.jobs.is_empty()
            && (self.wanted
                || self.closed
                || self.jobs.len() >= WAKE_GROUPS
                || self.job_bytes >= WAKE_BYTES)
    }
}

/// The shared progress of the writer and the applier.
#[derive(Debug)]
pub(crate) struct Progress {
    state: Mutex<State>,
    changed: Condvar,
    /// Wakes the applier (see the module docs for when).
    work: Condvar,
    /// `applied`, for readers that wait without blocking a thread.
    applied: tokio::sync::watch::Sender<(u64, bool)>,
}

impl Progress {
    pub(crate) fn new(seq: u64) -> Self {
        Self {
            state: Mutex::new(State {
                logged: seq,
                applied: seq,
                ..State::default()
            }),
            changed: Condvar::new(),
            work: Condvar::new(),
            applied: tokio::sync::watch::Sender::new((seq, false)),
        }
    }

    /// The last group the database holds.
    pub(crate) fn applied(&self) -> u64 {
        self.state.lock().applied
    }

    /// Why the applier stopped, if it did.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.state.lock().failed.clone()
    }

    /// Records group `seq` (a log record of `bytes` bytes) as logged and
    /// hands its mutations to the applier, waking it if that many are due.
    pub(crate) fn logged(&self, seq: u64, bytes: usize, mutations: Vec<Mutation>) -> Result<()> {
        let mut s = self.state.lock();
        if s.closed {
            return Err(Error::Unavailable("the memory applier has stopped".into()));
        }
        s.logged = seq;
        s.pending.push((seq, bytes));
        s.jobs.push(Job { seq, mutations });
        s.job_bytes += bytes;
        if s.due() {
            self.work.notify_one();
        }
        Ok(())
    }

    /// The writer is about to log one more group: if that group would make
    /// the applier due, wakes it now for the groups already queued (the
    /// writer calls this before it writes the record, so the applier works
    /// while the record is written and synced, and the wake-up does not
    /// follow the sync; the new group is then taken on when that batch is
    /// done).
    pub(crate) fn nudge(&self) {
        let mut s = self.state.lock();
        if s.jobs.len() + 1 >= WAKE_GROUPS {
            self.want(&mut s);
        }
    }

    /// Someone waits for the applier: wakes it for what is queued.
    fn want(&self, s: &mut State) {
        if !s.jobs.is_empty() && !s.wanted {
            s.wanted = true;
            self.work.notify_one();
        }
    }

    /// Tells the applier to apply what is left and stop.
    fn close(&self) {
        self.state.lock().closed = true;
        self.work.notify_one();
    }

    /// The applier's wait for its next jobs; none once closed and empty.
    fn next_jobs(&self, busy: bool) -> Vec<Job> {
        let mut s = self.state.lock();
        // Just done with a batch: what came meanwhile goes on now, as no
        // one had to be woken for it.
        if !busy || s.jobs.is_empty() {
            while !s.due() {
                if s.closed && s.jobs.is_empty() {
                    return Vec::new();
                }
                self.work.wait(&mut s);
            }
        }
        s.wanted = false;
        s.job_bytes = 0;
        std::mem::take(&mut s.jobs)
    }

    /// Records group `seq`, written directly to the database, as logged
    /// and applied.
    pub(crate) fn committed(&self, seq: u64) {
        {
            let mut s = self.state.lock();
            s.logged = seq;
            s.applied = seq;
        }
        self.applied.send_replace((seq, false));
    }

    /// Holds the applier until the returned guard is dropped: it applies
    /// nothing meanwhile, so the database lags the log (for tests of what
    /// an acknowledgement and a read guarantee then).
    pub(crate) fn pause(self: &Arc<Self>) -> Pause {
        self.state.lock().paused += 1;
        Pause(Arc::clone(self))
    }

    /// Blocks the applier while it is held.
    fn wait_unpaused(&self) {
        let mut s = self.state.lock();
        while s.paused > 0 {
            self.changed.wait(&mut s);
        }
    }

    fn applied_up_to(&self, seq: u64) {
        {
            let mut s = self.state.lock();
            s.applied = s.applied.max(seq);
            s.pending.retain(|(g, _)| *g > seq);
        }
        self.changed.notify_all();
        self.applied.send_replace((seq, false));
    }

    fn fail(&self, e: Error) {
        let applied = {
            let mut s = self.state.lock();
            s.failed.get_or_insert(e);
            s.applied
        };
        self.changed.notify_all();
        self.applied.send_replace((applied, true));
    }

    /// Blocks until at most `groups` groups and `bytes` bytes are logged
    /// and not applied, or the applier failed (its error), or
    /// [`APPLY_STALL`] passed (`Timeout`).
    pub(crate) fn wait_for_room(&self, groups: usize, bytes: usize) -> Result<()> {
        self.wait_for_room_within(groups, bytes, APPLY_STALL)
    }

    fn wait_for_room_within(
        &self,
        groups: usize,
        bytes: usize,
        within: std::time::Duration,
    ) -> Result<()> {
        let until = std::time::Instant::now() + within;
        let mut s = self.state.lock();
        loop {
            if let Some(e) = &s.failed {
                return Err(e.clone());
            }
            let held: usize = s.pending.iter().map(|(_, b)| b).sum();
            if s.pending.len() <= groups && held <= bytes {
                return Ok(());
            }
            self.want(&mut s);
            if self.changed.wait_until(&mut s, until).timed_out() {
                return Err(Error::Timeout(hippocamp_core::Stage::Backend));
            }
        }
    }

    /// Blocks until the database holds every logged group (the applier is
    /// idle), or the applier failed.
    pub(crate) fn drain(&self) -> Result<()> {
        self.wait_for_room(0, 0)
    }

    /// Waits (without blocking a thread) until the database holds every
    /// group logged when this was called.
    pub(crate) async fn settled(&self) -> Result<()> {
        let target = {
            let mut s = self.state.lock();
            if let Some(e) = &s.failed {
                return Err(e.clone());
            }
            if s.applied >= s.logged {
                return Ok(());
            }
            self.want(&mut s);
            s.logged
        };
        let mut rx = self.applied.subscribe();
        let seen = rx
            .wait_for(|&(applied, failed)| failed || applied >= target)
            .await
            .map(|v| *v);
        match seen {
            Ok((applied, _)) if applied >= target => Ok(()),
            _ => Err(self.failure().unwrap_or_else(|| {
                Error::Unavailable("the memory store stopped applying writes".into())
            })),
        }
    }
}

/// A hold of the applier ([`Progress::pause`]).
#[derive(Debug)]
pub struct Pause(Arc<Progress>);

impl Drop for Pause {
    fn drop(&mut self) {
        self.0.state.lock().paused -= 1;
        self.0.changed.notify_all();
    }
}

/// A logged group for the applier.
#[derive(Debug)]
struct Job {
    seq: u64,
    mutations: Vec<Mutation>,
}

/// The applier thread (its queue is in [`Progress`]).
#[derive(Debug)]
pub(crate) struct Applier {
    progress: Arc<Progress>,
    thread: Option<JoinHandle<()>>,
}

impl Applier {
    /// Starts the applier of `db`; `analyzer` analyses any entry logged
    /// unanalysed (the writer hands over analysed ones).
    pub(crate) fn start(
        db: Arc<Database>,
        progress: Arc<Progress>,
        analyzer: Arc<Analyzer>,
    ) -> Result<Self> {
        let shared = Arc::clone(&progress);
        let thread = std::thread::Builder::new()
            .name("hippocamp-memory-applier".into())
            .spawn(move || run(&shared, |batch| apply(&db, batch, &analyzer)))
            .map_err(|e| Error::Unavailable(format!("cannot start the memory applier: {e}")))?;
        Ok(Self {
            progress,
            thread: Some(thread),
        })
    }

    /// Stops the thread once it has applied what it was given.
    pub(crate) fn stop(&mut self) {
        self.progress.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Poisons the store if the applier's thread ends while unwinding: a
/// panic anywhere in its loop (the analyzer, redb) wakes every waiter to
/// an error instead of leaving them waiting for progress that never comes.
struct PoisonOnPanic<'a>(&'a Progress);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.fail(Error::Unavailable(
                "the memory store's applier stopped (it panicked); what was acknowledged is durable \
                 and is applied when the store is reopened"
                    .into(),
            ));
        }
    }
}

/// The applier's loop: every group waiting is applied in one transaction
/// (committed without fsync: the log holds them until a checkpoint).
fn run(progress: &Progress, mut apply: impl FnMut(Vec<Job>) -> Result<()>) {
    let _poison = PoisonOnPanic(progress);
    let mut busy = false;
    loop {
        let batch = progress.next_jobs(busy);
        let Some(last) = batch.last().map(|j| j.seq) else {
            return;
        };
        busy = true;
        progress.wait_unpaused();
        match apply(batch) {
            Ok(()) => progress.applied_up_to(last),
            Err(e) => {
                progress.fail(Error::Unavailable(format!(
                    "a logged write could not be applied ({e}); it is durable and reappears when the store is reopened"
                )));
                return;
            }
        }
    }
}

fn apply(db: &Database, batch: Vec<Job>, analyzer: &Analyzer) -> Result<()> {
    let mut txn = db.begin_write().map_err(storage)?;
    txn.set_durability(Durability::None).map_err(storage)?;
    {
        let mut tables = LogTables::open(&txn, analyzer)?;
        for m in batch.into_iter().flat_map(|j| j.mutations) {
            tables.apply(m)?;
        }
    }
    txn.commit().map_err(storage)
}

/// The tables logged mutations are applied to: by the applier, and by a
/// replay when a store opens.
pub(crate) struct LogTables<'t> {
    scopes: redb::Table<'t, &'static [u8; 16], &'static [u8]>,
    entries: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    sessions: redb::Table<'t, &'static [u8; 48], ()>,
    vectors: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    erased: redb::Table<'t, &'static [u8; 48], ()>,
    erased_ids: redb::Table<'t, &'static [u8; 32], ()>,
    obligations: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    expiry: redb::Table<'t, &'static [u8; 40], ()>,
    revisions: redb::Table<'t, &'static [u8; 36], &'static [u8]>,
    users: redb::Table<'t, &'static str, ()>,
    session_epochs: redb::Table<'t, &'static [u8; 32], &'static [u8]>,
    /// Analyses the text of an entry logged unanalysed.
    analyzer: &'t Analyzer,
}

fn fixed<const N: usize>(k: &[u8]) -> Result<[u8; N]> {
    k.try_into()
        .map_err(|_| Error::Corrupt(format!("a log record has a key of {} bytes", k.len())))
}

impl<'t> LogTables<'t> {
    pub(crate) fn open(txn: &'t redb::WriteTransaction, analyzer: &'t Analyzer) -> Result<Self> {
        Ok(Self {
            scopes: txn.open_table(SCOPES).map_err(storage)?,
            entries: txn.open_table(ENTRIES).map_err(storage)?,
            sessions: txn.open_table(SESSIONS).map_err(storage)?,
            vectors: txn.open_table(VECTORS).map_err(storage)?,
            erased: txn.open_table(ERASED).map_err(storage)?,
            erased_ids: txn.open_table(ERASED_IDS).map_err(storage)?,
            obligations: txn.open_table(OBLIGATIONS).map_err(storage)?,
            expiry: txn.open_table(EXPIRY).map_err(storage)?,
            revisions: txn.open_table(REVISIONS).map_err(storage)?,
            users: txn.open_table(USERS).map_err(storage)?,
            session_epochs: txn.open_table(SESSION_EPOCHS).map_err(storage)?,
            analyzer,
        })
    }

    /// Applies one logged mutation.
    pub(crate) fn apply(&mut self, m: Mutation) -> Result<()> {
        let written = match m {
            Mutation::PutEntry(k, v) => self.entries.insert(&fixed(&k)?, v.as_slice()).map(drop),
            Mutation::PutEntryText(k, v) => {
                let v = analysed_record(&v, self.analyzer)?;
                self.entries.insert(&fixed(&k)?, v.as_slice()).map(drop)
            }
            Mutation::DelEntry(k) => self.entries.remove(&fixed(&k)?).map(drop),
            Mutation::DelEntries(lo, hi) => self
                .entries
                .retain_in::<&[u8; 32], _>(&fixed(&lo)?..=&fixed(&hi)?, |_, _| false),
            Mutation::PutSession(k) => self.sessions.insert(&fixed(&k)?, ()).map(drop),
            Mutation::DelSession(k) => self.sessions.remove(&fixed(&k)?).map(drop),
            Mutation::DelSessions(lo, hi) => self
                .sessions
                .retain_in::<&[u8; 48], _>(&fixed(&lo)?..=&fixed(&hi)?, |_, ()| false),
            Mutation::PutScope(k, v) => self.scopes.insert(&fixed(&k)?, v.as_slice()).map(drop),
            Mutation::PutVector(k, v) => self.vectors.insert(&fixed(&k)?, v.as_slice()).map(drop),
            Mutation::DelVector(k) => self.vectors.remove(&fixed(&k)?).map(drop),
            Mutation::DelVectors(lo, hi) => self
                .vectors
                .retain_in::<&[u8; 32], _>(&fixed(&lo)?..=&fixed(&hi)?, |_, _| false),
            // Earlier builds' records: moved to `erased_ids` at open.
            Mutation::PutErased(k) => self.erased.insert(&fixed(&k)?, ()).map(drop),
            Mutation::PutErasedId(k) => self.erased_ids.insert(&fixed(&k)?, ()).map(drop),
            Mutation::PutObligations(k, v) => {
                self.obligations.insert(&fixed(&k)?, v.as_slice()).map(drop)
            }
            Mutation::DelObligations(k) => self.obligations.remove(&fixed(&k)?).map(drop),
            Mutation::DelObligationsIn(lo, hi) => self
                .obligations
                .retain_in::<&[u8; 32], _>(&fixed(&lo)?..=&fixed(&hi)?, |_, _| false),
            Mutation::PutExpiry(k) => self.expiry.insert(&fixed(&k)?, ()).map(drop),
            Mutation::DelExpiry(k) => self.expiry.remove(&fixed(&k)?).map(drop),
            Mutation::PutRevision(k, v) => {
                self.revisions.insert(&fixed(&k)?, v.as_slice()).map(drop)
            }
            Mutation::DelRevisionsIn(lo, hi) => self
                .revisions
                .retain_in::<&[u8; 36], _>(&fixed(&lo)?..=&fixed(&hi)?, |_, _| false),
            Mutation::PutUser(k) => self.users.insert(k.as_str(), ()).map(drop),
            Mutation::DelUser(k) => self.users.remove(k.as_str()).map(drop),
            Mutation::PutSessionEpoch(k, v) => self
                .session_epochs
                .insert(&fixed(&k)?, v.as_slice())
                .map(drop),
        };
        written.map_err(storage)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use redb::ReadableDatabase;
    use std::time::{Duration, Instant};

    /// A group of one mutation.
    fn group(i: u64) -> Vec<Mutation> {
        vec![Mutation::PutUser(format!("app\u{0}user {i}"))]
    }

    /// Waits (up to ten seconds) until the applier has applied `seq`.
    fn until_applied(p: &Progress, seq: u64) {
        let until = Instant::now() + Duration::from_secs(10);
        while p.applied() < seq {
            assert!(Instant::now() < until, "group {seq} was never applied");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether the applier is still at `seq` after a while.
    fn stays_at(p: &Progress, seq: u64) -> bool {
        std::thread::sleep(Duration::from_millis(200));
        p.applied() == seq
    }

    fn started() -> (tempfile::TempDir, Arc<Progress>, Applier, Arc<Database>) {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::create(dir.path().join("db")).unwrap());
        let progress = Arc::new(Progress::new(0));
        let applier = Applier::start(
            Arc::clone(&db),
            Arc::clone(&progress),
            Arc::new(Analyzer::english()),
        )
        .unwrap();
        (dir, progress, applier, db)
    }

    #[test]
    fn the_applier_wakes_for_enough_groups_or_bytes_or_for_whoever_waits() {
        let (_dir, p, mut applier, db) = started();
        let wake = WAKE_GROUPS as u64;
        for seq in 1..wake {
            p.logged(seq, 10, group(seq)).unwrap();
        }
        assert!(stays_at(&p, 0), "woken before enough groups waited");
        p.logged(wake, 10, group(wake)).unwrap();
        until_applied(&p, wake);
        // A lone group waits, until someone waits for it.
        p.logged(wake + 1, 10, group(wake + 1)).unwrap();
        assert!(stays_at(&p, wake));
        p.drain().unwrap();
        assert_eq!(p.applied(), wake + 1);
        // Enough bytes wake it too.
        p.logged(wake + 2, WAKE_BYTES, group(wake + 2)).unwrap();
        until_applied(&p, wake + 2);
        // Closing applies what is left.
        p.logged(wake + 3, 10, group(wake + 3)).unwrap();
        applier.stop();
        assert_eq!(p.applied(), wake + 3);
        assert!(p.logged(wake + 4, 10, group(wake + 4)).is_err());
        // Every group reached the database.
        let txn = db.begin_read().unwrap();
        let users = txn.open_table(USERS).unwrap();
        for seq in 1..=wake + 3 {
            let key = format!("app\u{0}user {seq}");
            assert!(users.get(key.as_str()).unwrap().is_some(), "group {seq}");
        }
    }

    #[test]
    fn a_nudge_wakes_the_applier_only_when_the_next_group_would() {
        let (_dir, p, _applier, _db) = started();
        let wake = WAKE_GROUPS as u64;
        for seq in 1..wake - 1 {
            p.logged(seq, 10, group(seq)).unwrap();
        }
        p.nudge();
        assert!(stays_at(&p, 0), "woken with two groups short");
        p.logged(wake - 1, 10, group(wake - 1)).unwrap();
        assert!(stays_at(&p, 0));
        p.nudge();
        until_applied(&p, wake - 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_that_waits_for_the_database_wakes_the_applier() {
        let (_dir, p, _applier, _db) = started();
        p.logged(1, 10, group(1)).unwrap();
        let settled = tokio::time::timeout(Duration::from_secs(10), p.settled()).await;
        assert!(matches!(settled, Ok(Ok(()))), "the read was never served");
        assert_eq!(p.applied(), 1);
    }

    /// An applier that panics poisons the store: a writer waiting for it
    /// and a read waiting for it both get the error, at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_applier_poisons_and_wakes_every_waiter() {
        let p = Arc::new(Progress::new(0));
        let shared = Arc::clone(&p);
        let thread = std::thread::spawn(move || {
            run(&shared, |_batch| -> Result<()> {
                panic!("injected applier fault")
            });
        });
        p.logged(1, 10, group(1)).unwrap();
        let read = tokio::time::timeout(Duration::from_secs(10), p.settled()).await;
        assert!(
            matches!(&read, Ok(Err(Error::Unavailable(m))) if m.contains("panicked")),
            "{read:?}"
        );
        let started = Instant::now();
        assert!(matches!(p.drain(), Err(Error::Unavailable(_))));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(p.failure().is_some());
        assert!(thread.join().is_err(), "the thread did panic");
    }

    /// A writer waiting for an applier that makes no progress gives up at
    /// the bound with `Timeout`, and the store is not poisoned by it.
    #[test]
    fn a_stalled_applier_times_a_writer_out_without_poisoning() {
        let (_dir, p, _applier, _db) = started();
        let pause = p.pause();
        p.logged(1, 10, group(1)).unwrap();
        let r = p.wait_for_room_within(0, 0, Duration::from_millis(100));
        assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
        assert!(p.failure().is_none());
        drop(pause);
        p.drain().unwrap();
        assert_eq!(p.applied(), 1);
    }

    #[test]
    fn a_prune_keeps_applied_scope_rows_up_to_their_bound() {
        let mut o = Overlay::default();
        let mut g = Overlay::default();
        g.scopes.insert([1; 16], (0, vec![1]));
        g.entries.insert([1; 32], (0, vec![1]));
        g.obligations.insert([1; 32], (0, vec![1]));
        o.merge(g, 1);
        let mut g = Overlay::default();
        g.entries.insert([2; 32], (0, vec![2]));
        o.merge(g, 2);
        o.prune(1);
        // Entries and obligations of applied groups go; the row stays.
        assert_eq!(o.scopes.get(&[1; 16]), Some(&(1, vec![1])));
        assert!(!o.entries.contains_key(&[1; 32]) && o.obligations.is_empty());
        assert_eq!(o.entries.get(&[2; 32]), Some(&(2, vec![2])));
        // Past the bound, applied rows go and unapplied ones stay.
        let mut g = Overlay::default();
        for i in 0..=KEPT_SCOPE_ROWS {
            let mut k = [0; 16];
            k[..8].copy_from_slice(&(i as u64 + 2).to_le_bytes());
            g.scopes.insert(k, (0, vec![]));
        }
        o.merge(g, 3);
        o.prune(2);
        assert_eq!(o.scopes.len(), KEPT_SCOPE_ROWS + 1);
        assert!(!o.scopes.contains_key(&[1; 16]));
        o.prune(3);
        assert!(o.scopes.is_empty());
    }
}
