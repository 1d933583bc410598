//! A user's export: everything hippocamp holds about one `(app, user)`
//! scope, as JSON Lines, produced page by page so neither the server nor
//! the CLI holds the scope in memory.
//!
//! Lines, in order (each a JSON object with a `kind`):
//! `export` (format version, scope, time) · `consent` (if recorded) ·
//! `legal_hold` (if the policy holds the user) · `entry` (each live
//! entry, with its obligations, and its kept revisions when it was
//! corrected) · `session` (each agent session with its events) ·
//! `artifact` (each artifact version's record, never its bytes; the
//! user's scope and each of their sessions' scopes) · `end` (counts, so a
//! truncated export is recognisable). Consent comes before the entries so
//! that a restore (`crate::restore`) records it before it writes them.

use hippocamp_artifacts::{ArtifactName, ArtifactScope, PageRequest};
use hippocamp_core::{CallOptions, Error, MemoryScope, Result, SessionId};
use hippocamp_memory::ExportRequest;
use hippocamp_sessions::Session;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::Services;

/// The export format version.
pub const EXPORT_VERSION: u32 = 1;

/// Lines queued between the producer and the writer at most (each a
/// record, at most one page of entries in flight).
const QUEUE: usize = 64;

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
        if let Err(e) = produce(&s, &scope, call, include, &tx).await
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

async fn produce(
    s: &Services,
    scope: &MemoryScope,
    call: CallOptions,
    include: Include,
    tx: &mpsc::Sender<Result<String>>,
) -> Result<()> {
    // The first page is read before anything is sent, so a refusal (the
    // policy, a bad scope) is the reader's first item, not a cut stream.
    let mut request = ExportRequest::default();
    let mut page = match &s.memory {
        Some(m) => Some(m.export_entries(scope, &request, &call).await?),
        None => None,
    };
    let now = s.governance.clock.now_ms();
    line(
        tx,
        &json!({"kind": "export", "version": EXPORT_VERSION, "scope": scope, "exported_at_ms": now}),
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
    let mut entries = 0u64;
    while let Some(p) = page.take() {
        for e in &p.entries {
            entries += 1;
            let v = match (&s.memory, e.revision > 1) {
                (Some(m), true) => {
                    // Oldest first, as a restore takes them.
                    let mut history = m.entry_history(scope, &e.id, &call).await?;
                    history.reverse();
                    json!({"kind": "entry", "entry": e, "history": history})
                }
                _ => json!({"kind": "entry", "entry": e}),
            };
            line(tx, &v).await?;
        }
        if let (Some(c), Some(m)) = (p.next_cursor, &s.memory) {
            request.cursor = Some(c);
            page = Some(m.export_entries(scope, &request, &call).await?);
        }
    }
    let sessions = session_lines(s, scope, &call, tx).await?;
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
        &json!({"kind": "end", "entries": entries, "sessions": sessions.len(),
            "artifact_versions": include.artifacts.then_some(versions)}),
    )
    .await
}

/// One line per agent session of the user, each read page by page (one
/// session is held at a time, never the user's); returns their ids.
async fn session_lines(
    s: &Services,
    scope: &MemoryScope,
    call: &CallOptions,
    tx: &mpsc::Sender<Result<String>>,
) -> Result<Vec<SessionId>> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = s.sessions.list(scope, after.as_ref(), None, call).await?;
        for info in page.items {
            let mut events = Vec::new();
            let mut from = Some(0);
            while let Some(at) = from {
                let p = s.sessions.events(scope, &info.id, at, None, call).await?;
                events.extend(p.events);
                from = p.next;
            }
            let session = Session {
                scope: scope.clone(),
                info,
                events,
            };
            line(tx, &json!({"kind": "session", "session": session})).await?;
            ids.push(session.info.id);
        }
        match page.next {
            Some(n) => after = Some(n),
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
