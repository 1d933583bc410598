//! Restoring a user's export (`crate::export`) into the same scope:
//! erasure records, consent, entries with their revisions, and agent
//! sessions, read line by line so a restore never holds the whole file.
//!
//! **A restore never undoes an erasure.** The export carries the erasure
//! epochs it was made at (memory's and the agent sessions'): when this
//! deployment erased the user since, everything the file holds of
//! memory (entries, consent) or of sessions is refused and counted in
//! [`RestoreReport::refused`]; a session erased here since is refused the
//! same way (its own epoch); an entry whose id was erased here is not
//! written back (`entries.erased`); a consent withdrawn here is never
//! recorded again. Writes carry the epochs read when the restore started,
//! so an erasure during the restore refuses the rest at the stores'
//! commit points. Into a scope this deployment never held, the restore
//! takes the export's epoch and erasure records (erasures made elsewhere
//! after the export are not known here). A file of format 1, which
//! carries no epoch, restores only into a scope never erased.
//!
//! The governed memory handle decides the rest: the policy is asked, its
//! consent rule applies, and entries get the policy's obligations (a
//! file's own retention or hold is kept only when the policy lets the
//! caller keep data). Restored consent and revisions are marked as
//! restored, the file's times kept as its claims. Artifact records and
//! legal-hold lines are counted and reported, never restored (bytes are
//! not in an export; holds come from the policy). The export's scope
//! must be the scope restored into, which comes from the caller's
//! authority, never from the file.
//!
//! Bounds (`[restore]`, reported with the HTTP limits): each line, the
//! whole body, and the restores running at once.

use hippocamp_core::{
    CallOptions, ErasureFence, Error, Field, MemoryScope, Problem, Result, SessionId, limit_table,
};
use hippocamp_governance::{Consent, NewConsent};
use hippocamp_memory::erasure::{ErasureRecords, ErasureRequest, ImportedErasures};
use hippocamp_memory::{ImportReport, ImportedEntry, MemoryStore, Revision, WriteOptions};
use hippocamp_sessions::{AppendOptions, Session, SessionEvent, SessionInfo};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _};

use crate::Services;
use crate::export::EXPORT_VERSION;

limit_table! {
    /// Bounds of a restore (`[restore]`).
    pub struct RestoreLimits, prefix "restore." {
        /// Bytes of one line of the file.
        max_line_bytes: default 16 << 20, min 64 << 10, max 1 << 30,
            "bytes of one line of a restored file (checked at load to hold the longest line an export of the same configuration writes)";
        /// Bytes of the whole file.
        max_body_bytes: default 4 << 30, min 1 << 20, max 1 << 40,
            "bytes of a restored file";
        /// Restores running at once; more are refused (`overloaded`).
        max_concurrent: default 2, min 1, max 64,
            "restores running at once (each holds a line); more are refused with 503";
    }
}

impl RestoreLimits {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()
    }
}

/// Derived entries one restore holds back until the end of its file
/// (more are refused and counted).
const MAX_DERIVED: usize = 100_000;

/// What a later erasure (or withdrawal) here refused of the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Refused {
    /// Entries the user's erasure since the export covers.
    pub entries: u64,
    /// Revision lines of those entries.
    pub revisions: u64,
    /// Agent sessions erased here since the export (the user's or the
    /// session's own erasure).
    pub sessions: u64,
    /// Their events.
    pub session_events: u64,
    /// Whether the file's consent was refused: the user was erased since
    /// the export, or a consent was withdrawn here.
    pub consent: bool,
}

/// What a restore did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RestoreReport {
    /// Entry lines restored, by what became of them.
    pub entries: ImportReport,
    /// Erasure records of the file this scope did not hold yet.
    pub erasures: u64,
    /// Whether the scope, never held here, took the export's epoch.
    pub adopted_epoch: bool,
    /// Whether a consent was recorded (false: none in the file, the same
    /// one already recorded, or refused).
    pub consent_restored: bool,
    /// Sessions in the file (restored or refused).
    pub sessions: u64,
    /// Their events newly appended (the others were there already).
    pub session_events_appended: u64,
    /// What erasures (and withdrawals) here since the export refused.
    pub refused: Refused,
    /// Artifact records in the file: reported, not restored.
    pub artifact_lines: u64,
    /// Legal-hold lines in the file: reported, not restored (holds come
    /// from the policy).
    pub legal_hold_lines: u64,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Export {
        version: u32,
        scope: MemoryScope,
        #[allow(dead_code)] // read for validation only
        exported_at_ms: u64,
        #[serde(default)]
        epoch: Option<u64>,
        #[serde(default)]
        sessions_epoch: Option<u64>,
    },
    Consent {
        consent: Consent,
    },
    LegalHold {
        #[allow(dead_code)]
        by: String,
    },
    Erasures {
        records: ErasureRecords,
    },
    Entry {
        entry: Box<hippocamp_memory::MemoryEntry>,
        /// Format 1 carried the history on the entry's line.
        #[serde(default)]
        history: Vec<Revision>,
    },
    Revision {
        id: hippocamp_core::EntryId,
        revision: Revision,
    },
    Session {
        /// Format 1: the whole session; format 2: its summary.
        session: serde_json::Value,
        #[serde(default)]
        session_epoch: Option<u64>,
    },
    SessionEvents {
        id: SessionId,
        from: u64,
        events: Vec<SessionEvent>,
    },
    Artifact {
        #[allow(dead_code)]
        meta: serde_json::Value,
    },
    End {
        entries: u64,
        sessions: u64,
        #[serde(default)]
        revisions: Option<u64>,
        #[serde(default)]
        erasures: Option<u64>,
        #[serde(default)]
        session_events: Option<u64>,
        #[allow(dead_code)]
        artifact_versions: Option<u64>,
    },
}

fn bad_line(n: u64, why: impl std::fmt::Display) -> Error {
    Error::invalid(Field::Line, Problem::Malformed(format!("line {n}: {why}")))
}

/// The session the file's `session_events` lines now belong to.
enum Current {
    None,
    /// Restored: its id and the fence its appends carry.
    Restoring(SessionId, ErasureFence),
    /// Refused (erased here since the export): its events are counted.
    Refused(SessionId),
}

/// One restore in progress: where it is in the file and what it did.
struct Restore<'a> {
    services: &'a Services,
    memory: &'a std::sync::Arc<dyn MemoryStore>,
    scope: &'a MemoryScope,
    call: CallOptions,
    batch: usize,
    version: u32,
    /// The export's epochs (0 for format 1).
    epoch: u64,
    sessions_epoch: u64,
    /// A later erasure here covers the file's memory / sessions.
    memory_stale: bool,
    sessions_stale: bool,
    pending: Vec<ImportedEntry>,
    /// Derived entries, restored after every other entry of the file
    /// (their sources may come later in it), at most `MAX_DERIVED`.
    derived: Vec<ImportedEntry>,
    current: Current,
    report: RestoreReport,
    seen: SeenCounts,
    ended: bool,
}

#[derive(Default)]
struct SeenCounts {
    entries: u64,
    revisions: u64,
    erasures: u64,
    session_events: u64,
}

impl Restore<'_> {
    async fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (derived, batch): (Vec<ImportedEntry>, Vec<ImportedEntry>) =
            std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|e| e.entry.is_derived());
        // Derived entries wait for the end of the file: their sources may
        // come after them. Past the bound they are refused and counted.
        for d in derived {
            if self.derived.len() < MAX_DERIVED {
                self.derived.push(d);
            } else {
                self.refuse_entries(std::slice::from_ref(&d));
            }
        }
        let batch = self.held_files(batch).await?;
        if batch.is_empty() {
            return Ok(());
        }
        if self.memory_stale {
            self.refuse_entries(&batch);
            return Ok(());
        }
        let w = WriteOptions::new(self.call).epoch(self.epoch);
        match self.memory.import_entries(self.scope, &batch, &w).await {
            Ok(r) => self.report.entries.absorb(r),
            // Erased while restoring: the rest of the file is refused.
            Err(Error::StaleEpoch { .. }) => {
                self.memory_stale = true;
                self.refuse_entries(&batch);
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// `batch` without the file entries whose version this store does not
    /// hold (refused and counted): an entry indexed from a file is
    /// restored only next to its file, so a restore never brings back
    /// the text of a version erased since the export, nor of one this
    /// store never had.
    async fn held_files(&mut self, batch: Vec<ImportedEntry>) -> Result<Vec<ImportedEntry>> {
        use hippocamp_artifacts::{ArtifactName, ArtifactScope, Selector};
        let mut out = Vec::with_capacity(batch.len());
        for e in batch {
            let Some(f) = &e.entry.file else {
                out.push(e);
                continue;
            };
            let held = match ArtifactName::new(f.name.as_str()) {
                Ok(name) => {
                    let scope = ArtifactScope::User {
                        app: self.scope.app().clone(),
                        user: self.scope.user().clone(),
                    };
                    match self
                        .services
                        .artifacts
                        .head(&scope, &name, Selector::Version(f.version), &self.call)
                        .await
                    {
                        Ok(_) => true,
                        Err(Error::NotFound(_)) => false,
                        Err(err) => return Err(err),
                    }
                }
                Err(_) => false,
            };
            if held {
                out.push(e);
            } else {
                self.refuse_entries(std::slice::from_ref(&e));
            }
        }
        Ok(out)
    }

    /// Restores the derived entries once every other entry is in: each
    /// only if every source is live here (restored from the file or
    /// already held, and not erased), which the store checks in its
    /// transaction (`unsourced` counts the others). A fact derived from
    /// another fact may need its source restored first, so the batch is
    /// offered again while that restores more.
    async fn flush_derived(&mut self) -> Result<()> {
        let derived = std::mem::take(&mut self.derived);
        if derived.is_empty() {
            return Ok(());
        }
        if self.memory_stale {
            self.refuse_entries(&derived);
            return Ok(());
        }
        let w = WriteOptions::new(self.call).epoch(self.epoch);
        let mut last: Option<ImportReport> = None;
        loop {
            let mut pass = ImportReport::default();
            for chunk in derived.chunks(self.batch.max(1)) {
                match self.memory.import_entries(self.scope, chunk, &w).await {
                    Ok(r) => pass.absorb(r),
                    Err(Error::StaleEpoch { .. }) => {
                        self.memory_stale = true;
                        self.refuse_entries(&derived);
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
            let progress = pass.imported > 0 && pass.unsourced > 0;
            match &mut last {
                None => last = Some(pass),
                Some(l) => {
                    // What a later pass finds held, an earlier restored.
                    l.imported += pass.imported;
                    l.unsourced = pass.unsourced;
                }
            }
            if !progress {
                break;
            }
        }
        if let Some(r) = last {
            self.report.entries.absorb(r);
        }
        Ok(())
    }

    fn refuse_entries(&mut self, batch: &[ImportedEntry]) {
        for e in batch {
            self.report.refused.entries += 1;
            self.report.refused.revisions += e.history.len() as u64;
        }
    }

    /// Checks the header and decides what a later erasure refuses.
    async fn header(
        &mut self,
        n: u64,
        version: u32,
        s: &MemoryScope,
        epochs: (Option<u64>, Option<u64>),
    ) -> Result<()> {
        if n != 1 {
            return Err(bad_line(n, "a second export header"));
        }
        if version != EXPORT_VERSION && version != 1 {
            return Err(bad_line(
                n,
                format!("export version {version}; this build reads 1 and {EXPORT_VERSION}"),
            ));
        }
        if s != self.scope {
            return Err(Error::invalid(
                Field::Scope,
                Problem::Malformed(format!(
                    "the export is of {s}, not of {}; a restore never changes scope",
                    self.scope
                )),
            ));
        }
        self.version = version;
        let any = SessionId::new("export")?;
        let memory_now = self.memory.erasure_epoch(self.scope, &self.call).await?;
        let sessions_now = self
            .services
            .sessions
            .fence(self.scope, &any, &self.call)
            .await?
            .epoch;
        if version == 1 {
            // No epoch in the file: only a scope never erased can take it.
            let records = self
                .memory
                .export_erasures(
                    self.scope,
                    &ErasureRequest {
                        cursor: None,
                        limit: Some(1),
                    },
                    &self.call,
                )
                .await?;
            if memory_now > 0 || sessions_now > 0 || !records.records.is_empty() {
                return Err(Error::invalid(
                    Field::Version,
                    Problem::Malformed(
                        "an export of format 1 carries no erasure epoch, so it restores only \
                         into a scope never erased; this one was: restore an export made since"
                            .into(),
                    ),
                ));
            }
        }
        let (epoch, sessions_epoch) = match (version, epochs) {
            (1, _) => (0, 0),
            (_, (Some(e), Some(se))) => (e, se),
            _ => return Err(bad_line(n, "the header has no erasure epochs")),
        };
        self.epoch = epoch;
        self.sessions_epoch = sessions_epoch;
        self.memory_stale = memory_now > epoch;
        self.sessions_stale = sessions_now > sessions_epoch;
        if !self.memory_stale {
            // Takes the export's epoch into a scope never held here, or
            // refuses one held at an earlier epoch (`future_epoch`).
            self.erasures(ErasureRecords::default()).await?;
        }
        Ok(())
    }

    async fn erasures(&mut self, records: ErasureRecords) -> Result<()> {
        if self.memory_stale {
            return Ok(());
        }
        let imported = ImportedErasures {
            epoch: self.epoch,
            records,
        };
        match self
            .memory
            .import_erasures(self.scope, &imported, &self.call)
            .await
        {
            Ok(r) => {
                self.report.adopted_epoch |= r.adopted_epoch;
                self.report.erasures += r.added;
                Ok(())
            }
            Err(Error::StaleEpoch { .. }) => {
                self.memory_stale = true;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn consent(&mut self, consent: Consent) -> Result<()> {
        let g = &self.services.governance;
        // Erased since the export, or withdrawn here: never re-recorded.
        if self.memory_stale || g.consents.withdrawn_at(self.scope).await?.is_some() {
            self.report.refused.consent = true;
            return Ok(());
        }
        let same = g
            .consents
            .get(self.scope)
            .await?
            .is_some_and(|c| c.consent_id == consent.consent_id && c.scope == consent.scope);
        if !same {
            let claimed = consent.claimed_at_ms.unwrap_or(consent.recorded_at_ms);
            let new = NewConsent {
                consent_id: consent.consent_id,
                scope: consent.scope,
            }
            .restored(claimed, g.clock.now_ms())?;
            let r = g.consents.record(self.scope, new).await;
            let event = hippocamp_governance::AuditEvent::ConsentRecorded;
            g.record(event, "consent", self.scope, self.call.caller(), &r, None)
                .await;
            r?;
            self.report.consent_restored = true;
        }
        Ok(())
    }

    fn entry(&mut self, entry: hippocamp_memory::MemoryEntry, history: Vec<Revision>) {
        self.seen.entries += 1;
        self.pending.push(ImportedEntry { entry, history });
    }

    fn revision(&mut self, n: u64, id: hippocamp_core::EntryId, revision: Revision) -> Result<()> {
        self.seen.revisions += 1;
        match self.pending.last_mut() {
            Some(e) if e.entry.id == id => {
                e.history.push(revision);
                Ok(())
            }
            _ => Err(bad_line(n, "a revision line not right after its entry")),
        }
    }

    /// A session's line: restored, or refused when erased here since.
    async fn session(&mut self, n: u64, info: SessionInfo, session_epoch: u64) -> Result<()> {
        self.report.sessions += 1;
        let fence = self
            .services
            .sessions
            .fence(self.scope, &info.id, &self.call)
            .await?;
        self.current = if self.sessions_stale || fence.session_epoch > session_epoch {
            self.report.refused.sessions += 1;
            Current::Refused(info.id)
        } else {
            let _ = n;
            Current::Restoring(info.id, fence)
        };
        Ok(())
    }

    async fn session_events(
        &mut self,
        n: u64,
        id: &SessionId,
        events: Vec<SessionEvent>,
    ) -> Result<()> {
        self.seen.session_events += events.len() as u64;
        let fence = match &self.current {
            Current::Restoring(cur, f) if cur == id => *f,
            Current::Refused(cur) if cur == id => {
                self.report.refused.session_events += events.len() as u64;
                return Ok(());
            }
            _ => return Err(bad_line(n, "session events not right after their session")),
        };
        for (i, event) in events.iter().enumerate() {
            let opts = AppendOptions::new(self.call).fenced(fence);
            match self
                .services
                .sessions
                .append(self.scope, id, event, &opts)
                .await
            {
                Ok(a) => self.report.session_events_appended += u64::from(!a.duplicate),
                // Erased while restoring: the rest of the session is
                // refused.
                Err(Error::StaleEpoch { .. }) => {
                    self.report.refused.sessions += 1;
                    self.report.refused.session_events += (events.len() - i) as u64;
                    self.current = Current::Refused(id.clone());
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn line(&mut self, n: u64, line: Line) -> Result<()> {
        match line {
            Line::Export {
                version,
                scope: s,
                epoch,
                sessions_epoch,
                ..
            } => self.header(n, version, &s, (epoch, sessions_epoch)).await?,
            _ if n == 1 => {
                return Err(bad_line(n, "the file does not begin with an export header"));
            }
            Line::Consent { consent } => self.consent(consent).await?,
            Line::LegalHold { .. } => self.report.legal_hold_lines += 1,
            Line::Erasures { records } => {
                self.seen.erasures += records.len() as u64;
                self.erasures(records).await?;
            }
            Line::Entry { entry, history } => self.entry(*entry, history),
            Line::Revision { id, revision } => self.revision(n, id, revision)?,
            Line::Session {
                session,
                session_epoch,
            } => {
                if self.version == 1 {
                    let s: Session = serde_json::from_value(session).map_err(|e| bad_line(n, e))?;
                    if s.scope != *self.scope {
                        return Err(Error::invalid(
                            Field::Scope,
                            Problem::Malformed(format!("line {n}: a session of another scope")),
                        ));
                    }
                    let id = s.info.id.clone();
                    self.session(n, s.info, 0).await?;
                    self.session_events(n, &id, s.events).await?;
                } else {
                    let info: SessionInfo =
                        serde_json::from_value(session).map_err(|e| bad_line(n, e))?;
                    let epoch = session_epoch
                        .ok_or_else(|| bad_line(n, "a session without its erasure epoch"))?;
                    self.session(n, info, epoch).await?;
                }
            }
            Line::SessionEvents { id, from, events } => {
                let _ = from;
                self.session_events(n, &id, events).await?;
            }
            Line::Artifact { .. } => self.report.artifact_lines += 1,
            Line::End {
                entries,
                sessions,
                revisions,
                erasures,
                session_events,
                ..
            } => {
                let counts_agree = entries == self.seen.entries
                    && sessions == self.report.sessions
                    && revisions.is_none_or(|r| r == self.seen.revisions)
                    && erasures.is_none_or(|r| r == self.seen.erasures)
                    && session_events.is_none_or(|r| r == self.seen.session_events);
                if !counts_agree {
                    return Err(bad_line(
                        n,
                        format!(
                            "the end line's counts disagree with the file ({entries} entries and {sessions} sessions announced; {} and {} read)",
                            self.seen.entries, self.report.sessions
                        ),
                    ));
                }
                self.ended = true;
            }
        }
        Ok(())
    }
}

/// Reads the next line of at most `max` bytes into `buf` (so an endless
/// line cannot fill memory), counting the body's bytes against
/// `max_body`; `false` at the end.
async fn next_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    n: u64,
    limits: &RestoreLimits,
    read_so_far: &mut u64,
) -> Result<bool> {
    buf.clear();
    let read = reader
        .take(limits.max_line_bytes + 1)
        .read_until(b'\n', buf)
        .await
        .map_err(|e| {
            Error::invalid(
                Field::Body,
                Problem::Malformed(format!("cannot read the export: {e}")),
            )
        })?;
    if buf.len() as u64 > limits.max_line_bytes {
        return Err(bad_line(
            n + 1,
            format!(
                "longer than restore.max_line_bytes ({})",
                limits.max_line_bytes
            ),
        ));
    }
    *read_so_far += read as u64;
    if *read_so_far > limits.max_body_bytes {
        return Err(Error::invalid(
            Field::Body,
            Problem::Malformed(format!(
                "longer than restore.max_body_bytes ({})",
                limits.max_body_bytes
            )),
        ));
    }
    Ok(read > 0)
}

/// Restores the export read from `reader` into `scope`, through the
/// governed handles (the policy is asked, consent applies, the policy's
/// obligations are given). Entries are written in batches of the store's
/// `max_page_entries`. A file that does not begin with an export header
/// of this scope and a known version, has an unknown line, or ends
/// without its `end` line (or with counts that disagree) is refused with
/// `invalid_argument`; what was restored before the problem stays (a
/// second run completes it). More than `restore.max_concurrent` restores
/// at once: `overloaded`.
pub async fn restore(
    services: &Services,
    scope: &MemoryScope,
    reader: impl AsyncBufRead + Unpin,
    call: &CallOptions,
) -> Result<RestoreReport> {
    let r = restore_unaudited(services, scope, reader, call).await;
    let imported = r.as_ref().map(|r| r.entries.imported).map_err(Clone::clone);
    services
        .governance
        .record(
            hippocamp_governance::AuditEvent::Restore,
            "user",
            scope,
            call.caller(),
            &imported,
            imported.as_ref().ok().copied(),
        )
        .await;
    r
}

async fn restore_unaudited(
    services: &Services,
    scope: &MemoryScope,
    mut reader: impl AsyncBufRead + Unpin,
    call: &CallOptions,
) -> Result<RestoreReport> {
    let memory = services.memory_store()?;
    let _permit = services
        .restores
        .try_acquire()
        .map_err(|_| Error::Overloaded("restores"))?;
    let limits = services.restore_limits.clone();
    // The store's own page bound, as its capabilities report it.
    let batch = memory
        .capabilities()
        .limit("max_page_entries")
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(100);
    let mut r = Restore {
        services,
        memory,
        scope,
        call: *call,
        batch,
        version: EXPORT_VERSION,
        epoch: 0,
        sessions_epoch: 0,
        memory_stale: false,
        sessions_stale: false,
        pending: Vec::new(),
        derived: Vec::new(),
        current: Current::None,
        report: RestoreReport::default(),
        seen: SeenCounts::default(),
        ended: false,
    };
    let mut n = 0u64;
    let mut buf = Vec::new();
    let mut read = 0u64;
    while next_line(&mut reader, &mut buf, n, &limits, &mut read).await? {
        n += 1;
        let text = std::str::from_utf8(&buf).map_err(|_| bad_line(n, "not UTF-8"))?;
        if text.trim().is_empty() {
            continue;
        }
        if r.ended {
            return Err(bad_line(n, "a line after the end line"));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| bad_line(n, e))?;
        if !matches!(line, Line::Revision { .. }) {
            // A revision joins the entry before it; anything else closes
            // the batch when it is full.
            if r.pending.len() >= r.batch {
                r.flush().await?;
            }
        }
        r.line(n, line).await?;
    }
    r.flush().await?;
    r.flush_derived().await?;
    if n == 0 {
        return Err(bad_line(0, "the file is empty"));
    }
    if !r.ended {
        return Err(bad_line(n, "the export is truncated: it has no end line"));
    }
    Ok(r.report)
}
