//! A user's export: everything hippocamp holds about one `(app, user)`
//! scope, as JSON Lines, produced page by page so neither the server nor
//! the CLI holds the scope in memory (one page of entries, erasure
//! records or session events at a time).
//!
//! Lines, in order (each a JSON object with a `kind`), format version 2:
//! - `export`: format version, scope, time, and the erasure epochs the
//!   export was made at: memory's (`epoch`) and the agent sessions'
//!   (`sessions_epoch`). A restore refuses what a later erasure covers.
//! - `consent` (if recorded) · `legal_hold` (if the policy holds the user).
//! - `erasures`: pages of the memory store's erasure records (erased entry
//!   ids, erased sessions' epochs), so a restore elsewhere keeps them.
//! - `entry` (each live entry, with its obligations), followed by one
//!   `revision` line per kept revision when it was corrected (oldest first).
//! - `session` (each agent session's summary and erasure epoch), followed
//!   by `session_events` lines: its events, a page per line.
//! - `artifact` (each artifact version's record, never its bytes; the
//!   user's scope and each of their sessions' scopes).
//! - `end` (counts, so a truncated export is recognisable).
//!
//! Consent comes before the entries so that a restore (`crate::restore`)
//! records it before it writes them; erasures come before them so the
//! restore refuses what was erased. Every line is at most
//! [`max_line_bytes`] of the configuration, which the restore of the same
//! configuration accepts (checked when the configuration is loaded).

use hippocamp_artifacts::{ArtifactName, ArtifactScope, PageRequest};
use hippocamp_core::{CallOptions, Error, MemoryScope, Result, SessionId};
use hippocamp_memory::ExportRequest;
use hippocamp_memory::erasure::ErasureRequest;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::Services;
use crate::config::Config;

/// The export format version this build writes.
pub const EXPORT_VERSION: u32 = 2;

/// Lines queued between the producer and the writer at most (each a
/// record, at most one page in flight).
const QUEUE: usize = 64;

/// The session id a fence is read under when only the scope's epoch is
/// wanted (any valid id: the scope's half does not depend on it).
const ANY_SESSION: &str = "export";

/// The longest line an export of `config` can hold, in bytes: an entry
/// or a revision at the memory limits (content escaped at worst six bytes
/// a byte, metadata, provenance), a page of session events (bounded by
/// `max_events_page_bytes`, or one event at most `max_event_bytes`), a
/// page of erasure records, plus their envelopes.
pub fn max_line_bytes(config: &Config) -> u64 {
    let l = &config.memory.limits;
    let envelope = 4 << 10;
    let entry = l.max_content_bytes * 6 + l.max_metadata_bytes + (64 << 10) + envelope;
    let s = &config.sessions;
    let events = s.max_events_page_bytes.max(s.max_event_bytes) + envelope;
    let erasures = l.max_page_entries * (256 * 6 + 64) + envelope;
    entry.max(events).max(erasures)
}

/// What an export includes besides memory (the caller's authority
/// decides: a token that may not read the user's artifacts gets no
/// artifact records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Include {
    /// Artifact records of the user's and their sessions' scopes.
    pub artifacts: bool,
}

/// Starts exporting `scope` on the current runtime; the lines (each
/// ending in `\n`) arrive on the receiver, an error ends the stream.
/// Dropping the receiver stops the export.
pub fn export(
    services: &Services,
    scope: MemoryScope,
    call: CallOptions,
    include: Include,
) -> mpsc::Receiver<Result<String>> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let s = services.clone();
    tokio::spawn(async move {
        let done = produce(&s, &scope, call, include, &tx).await;
        // A user's data left the system (or an attempt ended): recorded,
        // with the entries sent.
        let outcome = done.as_ref().map(|n| n.entries).map_err(Clone::clone);
        s.governance
            .record(
                hippocamp_governance::AuditEvent::Export,
                "user",
                &scope,
                call.caller(),
                &outcome,
                outcome.as_ref().ok().copied(),
            )
            .await;
        if let Err(e) = done
            && !matches!(e, Error::Unavailable(ref m) if m == GONE)
        {
            let _ = tx.send(Err(e)).await;
        }
    });
    rx
}

const GONE: &str = "the export's reader went away";

async fn line(tx: &mpsc::Sender<Result<String>>, v: &Value) -> Result<()> {
    let mut text = serde_json::to_string(v)
        .map_err(|e| Error::Unavailable(format!("cannot encode an export line: {e}")))?;
    text.push('\n');
    tx.send(Ok(text))
        .await
        .map_err(|_| Error::Unavailable(GONE.into()))
}

/// Counts of what was written, for the `end` line.
#[derive(Debug, Default)]
struct Counts {
    entries: u64,
    revisions: u64,
    erasures: u64,
    sessions: u64,
    session_events: u64,
}

async fn produce(
    s: &Services,
    scope: &MemoryScope,
    call: CallOptions,
    include: Include,
    tx: &mpsc::Sender<Result<String>>,
) -> Result<Counts> {
    // The epochs and the first page are read before anything is sent, so
    // a refusal (the policy, a bad scope) is the reader's first item, not
    // a cut stream.
    let any = SessionId::new(ANY_SESSION)?;
    let sessions_epoch = s.sessions.fence(scope, &any, &call).await?.epoch;
    let mut request = ExportRequest::default();
    let (epoch, mut page) = match &s.memory {
        Some(m) => (
            m.erasure_epoch(scope, &call).await?,
            Some(m.export_entries(scope, &request, &call).await?),
        ),
        None => (0, None),
    };
    let now = s.governance.clock.now_ms();
    line(
        tx,
        &json!({"kind": "export", "version": EXPORT_VERSION, "scope": scope,
                "exported_at_ms": now, "epoch": epoch, "sessions_epoch": sessions_epoch}),
    )
    .await?;
    if let Some(c) = s.governance.consents.get(scope).await? {
        line(tx, &json!({"kind": "consent", "consent": c})).await?;
    }
    // The policy reports holds as `app/user`, the scope's display form.
    if s.governance
        .policy
        .describe()
        .legal_holds
        .contains(&scope.to_string())
    {
        line(tx, &json!({"kind": "legal_hold", "by": "policy"})).await?;
    }
    let mut n = Counts::default();
    if let Some(m) = &s.memory {
        let mut req = ErasureRequest::default();
        loop {
            let p = m.export_erasures(scope, &req, &call).await?;
            if !p.records.is_empty() {
                n.erasures += p.records.len() as u64;
                line(tx, &json!({"kind": "erasures", "records": p.records})).await?;
            }
            match p.next_cursor {
                Some(c) => req.cursor = Some(c),
                None => break,
            }
        }
    }
    while let Some(p) = page.take() {
        for e in &p.entries {
            n.entries += 1;
            line(tx, &json!({"kind": "entry", "entry": e})).await?;
            if let (Some(m), true) = (&s.memory, e.revision > 1) {
                // Oldest first, as a restore takes them.
                let mut history = m.entry_history(scope, &e.id, &call).await?;
                history.reverse();
                for r in history {
                    n.revisions += 1;
                    line(tx, &json!({"kind": "revision", "id": e.id, "revision": r})).await?;
                }
            }
        }
        if let (Some(c), Some(m)) = (p.next_cursor, &s.memory) {
            request.cursor = Some(c);
            page = Some(m.export_entries(scope, &request, &call).await?);
        }
    }
    let sessions = session_lines(s, scope, &call, tx, &mut n).await?;
    let mut scopes = vec![ArtifactScope::user(
        scope.app().as_str(),
        scope.user().as_str(),
    )?];
    for id in &sessions {
        scopes.push(ArtifactScope::session(
            scope.app().as_str(),
            scope.user().as_str(),
            id.as_str(),
        )?);
    }
    let mut versions = 0u64;
    if include.artifacts {
        for a in &scopes {
            versions += artifact_lines(s, a, &call, tx).await?;
        }
    }
    line(
        tx,
        &json!({"kind": "end", "entries": n.entries, "revisions": n.revisions,
            "erasures": n.erasures, "sessions": n.sessions,
            "session_events": n.session_events,
            "artifact_versions": include.artifacts.then_some(versions)}),
    )
    .await?;
    Ok(n)
}

/// Each agent session of the user: its summary and erasure epoch, then
/// its events a page per line (one page is held at a time); returns their
/// ids.
async fn session_lines(
    s: &Services,
    scope: &MemoryScope,
    call: &CallOptions,
    tx: &mpsc::Sender<Result<String>>,
    n: &mut Counts,
) -> Result<Vec<SessionId>> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = s.sessions.list(scope, after.as_ref(), None, call).await?;
        for info in page.items {
            let fence = s.sessions.fence(scope, &info.id, call).await?;
            n.sessions += 1;
            line(
                tx,
                &json!({"kind": "session", "session": info,
                        "session_epoch": fence.session_epoch}),
            )
            .await?;
            let mut from = Some(0);
            while let Some(at) = from {
                let p = s.sessions.events(scope, &info.id, at, None, call).await?;
                n.session_events += p.events.len() as u64;
                line(
                    tx,
                    &json!({"kind": "session_events", "id": info.id, "from": at,
                            "events": p.events}),
                )
                .await?;
                from = p.next;
            }
            ids.push(info.id);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(ids),
        }
    }
}

/// The records of every live version in `scope`, name by name.
async fn artifact_lines(
    s: &Services,
    scope: &ArtifactScope,
    call: &CallOptions,
    tx: &mpsc::Sender<Result<String>>,
) -> Result<u64> {
    let mut n = 0;
    let mut names = PageRequest::<ArtifactName>::default();
    loop {
        let page = s.artifacts.list_names(scope, &names, call).await?;
        for name in &page.items {
            let mut vs = PageRequest::<u64>::default();
            loop {
                let vp = s.artifacts.list_versions(scope, name, &vs, call).await?;
                for meta in &vp.items {
                    n += 1;
                    line(tx, &json!({"kind": "artifact", "meta": meta})).await?;
                }
                match vp.next_cursor {
                    Some(c) => vs.cursor = Some(c),
                    None => break,
                }
            }
        }
        match page.next_cursor {
            Some(c) => names.cursor = Some(c),
            None => return Ok(n),
        }
    }
}
