//! Restoring a user's export (`crate::export`) into the same scope:
//! consent, entries with their revisions, and agent sessions, read line
//! by line so a restore never holds the whole file.
//!
//! A restore is idempotent: a consent already recorded with the same id
//! and coverage is left as it is, an entry the store already holds is
//! left as it is (`import_entries`), an event a session already holds is
//! a duplicate. Artifact records and legal-hold lines are counted and
//! reported, never restored (bytes are not in an export; holds come from
//! the policy). The export's scope must be the scope restored into,
//! which comes from the caller's authority, never from the file.

use hippocamp_core::{CallOptions, Error, Field, MemoryScope, Problem, Result};
use hippocamp_governance::{Consent, NewConsent};
use hippocamp_memory::{ImportReport, ImportedEntry, WriteOptions};
use hippocamp_sessions::Session;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _};

use crate::Services;
use crate::export::EXPORT_VERSION;

/// Bytes of one line of an export at most (a session with many events is
/// the longest line).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// What a restore did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RestoreReport {
    /// Entry lines, by what became of them.
    pub entries: ImportReport,
    /// Whether a consent was recorded (false: none in the file, or the
    /// same one already recorded).
    pub consent_restored: bool,
    /// Sessions in the file.
    pub sessions: u64,
    /// Their events newly appended (the others were there already).
    pub session_events_appended: u64,
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
    },
    Consent {
        consent: Consent,
    },
    LegalHold {
        #[allow(dead_code)]
        by: String,
    },
    Entry {
        entry: Box<hippocamp_memory::MemoryEntry>,
        #[serde(default)]
        history: Vec<hippocamp_memory::Revision>,
    },
    Session {
        session: Box<Session>,
    },
    Artifact {
        #[allow(dead_code)]
        meta: serde_json::Value,
    },
    End {
        entries: u64,
        sessions: u64,
        #[allow(dead_code)]
        artifact_versions: Option<u64>,
    },
}

fn bad_line(n: u64, why: impl std::fmt::Display) -> Error {
    Error::invalid(Field::Line, Problem::Malformed(format!("line {n}: {why}")))
}

/// One restore in progress: where it is in the file and what it did.
struct Restore<'a> {
    services: &'a Services,
    memory: &'a std::sync::Arc<dyn hippocamp_memory::MemoryStore>,
    scope: &'a MemoryScope,
    call: CallOptions,
    batch: usize,
    pending: Vec<ImportedEntry>,
    report: RestoreReport,
    entries_seen: u64,
    ended: bool,
}

impl Restore<'_> {
    async fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            let w = WriteOptions::new(self.call);
            let r = self
                .memory
                .import_entries(self.scope, &self.pending, &w)
                .await?;
            self.report.entries.absorb(r);
            self.pending.clear();
        }
        Ok(())
    }

    fn header(&self, n: u64, version: u32, s: &MemoryScope) -> Result<()> {
        if n != 1 {
            return Err(bad_line(n, "a second export header"));
        }
        if version != EXPORT_VERSION {
            return Err(bad_line(
                n,
                format!("export version {version}; this build reads {EXPORT_VERSION}"),
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
        Ok(())
    }

    async fn consent(&mut self, consent: Consent) -> Result<()> {
        let g = &self.services.governance;
        let same = g
            .consents
            .get(self.scope)
            .await?
            .is_some_and(|c| c.consent_id == consent.consent_id && c.scope == consent.scope);
        if !same {
            let new = NewConsent {
                consent_id: consent.consent_id,
                scope: consent.scope,
            };
            let r = g
                .consents
                .put(self.scope, new, consent.recorded_at_ms)
                .await;
            let event = hippocamp_governance::AuditEvent::ConsentRecorded;
            g.record(event, "consent", self.scope, self.call.caller(), &r, None)
                .await;
            r?;
            self.report.consent_restored = true;
        }
        Ok(())
    }

    async fn session(&mut self, n: u64, session: &Session) -> Result<()> {
        if session.scope != *self.scope {
            return Err(Error::invalid(
                Field::Scope,
                Problem::Malformed(format!("line {n}: a session of another scope")),
            ));
        }
        self.report.sessions += 1;
        for event in &session.events {
            let appended = self
                .services
                .sessions
                .append(
                    self.scope,
                    &session.info.id,
                    event,
                    &hippocamp_sessions::AppendOptions::new(self.call),
                )
                .await?;
            self.report.session_events_appended += u64::from(!appended.duplicate);
        }
        Ok(())
    }

    async fn line(&mut self, n: u64, line: Line) -> Result<()> {
        match line {
            Line::Export {
                version, scope: s, ..
            } => self.header(n, version, &s)?,
            _ if n == 1 => {
                return Err(bad_line(n, "the file does not begin with an export header"));
            }
            Line::Consent { consent } => self.consent(consent).await?,
            Line::LegalHold { .. } => self.report.legal_hold_lines += 1,
            Line::Entry { entry, history } => {
                self.entries_seen += 1;
                self.pending.push(ImportedEntry {
                    entry: *entry,
                    history,
                });
                if self.pending.len() == self.batch {
                    self.flush().await?;
                }
            }
            Line::Session { session } => self.session(n, &session).await?,
            Line::Artifact { .. } => self.report.artifact_lines += 1,
            Line::End {
                entries, sessions, ..
            } => {
                if entries != self.entries_seen || sessions != self.report.sessions {
                    return Err(bad_line(
                        n,
                        format!(
                            "the end line counts {entries} entries and {sessions} sessions; the file holds {} and {}",
                            self.entries_seen, self.report.sessions
                        ),
                    ));
                }
                self.ended = true;
            }
        }
        Ok(())
    }
}

/// Reads the next line of at most [`MAX_LINE_BYTES`] into `buf` (so an
/// endless line cannot fill memory); `false` at the end.
async fn next_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    n: u64,
) -> Result<bool> {
    buf.clear();
    let read = reader
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)
        .await
        .map_err(|e| {
            Error::invalid(
                Field::Body,
                Problem::Malformed(format!("cannot read the export: {e}")),
            )
        })?;
    if buf.len() > MAX_LINE_BYTES {
        return Err(bad_line(
            n + 1,
            format!("longer than {MAX_LINE_BYTES} bytes"),
        ));
    }
    Ok(read > 0)
}

/// Restores the export read from `reader` into `scope`, through the
/// governed memory handle (the policy is asked, consent applies).
/// Entries are written in batches of the store's `max_page_entries`.
/// A file that does not begin with an export header of this scope and
/// version, has an unknown line, or ends without its `end` line (or
/// with counts that disagree) is refused with `invalid_argument`; what
/// was restored before the problem stays (a second run completes it).
pub async fn restore(
    services: &Services,
    scope: &MemoryScope,
    mut reader: impl AsyncBufRead + Unpin,
    call: &CallOptions,
) -> Result<RestoreReport> {
    let memory = services.memory_store()?;
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
        pending: Vec::new(),
        report: RestoreReport::default(),
        entries_seen: 0,
        ended: false,
    };
    let mut n = 0u64;
    let mut buf = Vec::new();
    while next_line(&mut reader, &mut buf, n).await? {
        n += 1;
        let text = std::str::from_utf8(&buf).map_err(|_| bad_line(n, "not UTF-8"))?;
        if text.trim().is_empty() {
            continue;
        }
        if r.ended {
            return Err(bad_line(n, "a line after the end line"));
        }
        let line: Line = serde_json::from_str(text).map_err(|e| bad_line(n, e))?;
        r.line(n, line).await?;
    }
    r.flush().await?;
    if n == 0 {
        return Err(bad_line(0, "the file is empty"));
    }
    if !r.ended {
        return Err(bad_line(n, "the export is truncated: it has no end line"));
    }
    Ok(r.report)
}
