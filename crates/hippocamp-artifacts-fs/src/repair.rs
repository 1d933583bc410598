//! Repair: removes content files that no catalog row references (files
//! of puts killed before their reservation, of versions whose deletion
//! was interrupted, and `.tmp` files left by earlier versions of the
//! store) once they are older than a grace period, and reports
//! catalog rows whose content is missing or (with `verify`) damaged.
//!
//! The walk goes through the fan-out directories in order, a bounded
//! number of files per call; when the bound is reached the report so far
//! is returned with a cursor to resume from, never discarded. Files of
//! puts in flight are never touched whatever their age, so a grace of 0 is
//! safe in the owning process. Nothing that a row references is removed;
//! corruption is reported, not repaired.

use std::collections::HashSet;
use std::io;
use std::time::{Duration, SystemTime};

use hippocamp_artifacts::Integrity;
use hippocamp_core::{Error, Field, Problem, Result, Sha256Digest};
use redb::ReadableDatabase;
use serde::{Deserialize, Serialize};

use crate::catalog::{
    BLOBS, BlobId, CHUNKS, VERSIONS, VersionRow, blob_file, decode, decode_chunks, parse_file,
};
use crate::store::{FsArtifacts, content_intact};

/// Most corrupt versions listed in one report (all are counted).
pub const MAX_REPORTED: usize = 1_000;

/// Where a walk resumes: after file `after` of fan-out directory `dir`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairCursor {
    /// The fan-out directory.
    pub dir: u8,
    /// The last file examined in it.
    pub after: String,
}

/// What a repair call does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RepairOptions {
    /// Most files examined in this call (1 ..= 10,000,000).
    pub limit: u64,
    /// Age below which an unreferenced file is kept, milliseconds; the
    /// store's `recovery_grace_ms` when absent.
    pub min_age_ms: Option<u64>,
    /// Also read every referenced file and check its digests.
    pub verify: bool,
    /// Resume after this point (a previous report's `next`).
    pub resume: Option<RepairCursor>,
}

impl Default for RepairOptions {
    fn default() -> Self {
        Self {
            limit: 100_000,
            min_age_ms: None,
            verify: false,
            resume: None,
        }
    }
}

/// A version whose content is missing or damaged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorruptVersion {
    /// The scope, as text.
    pub scope: String,
    /// The name.
    pub name: String,
    /// The version.
    pub version: u64,
    /// What is wrong.
    pub problem: String,
}

/// What a repair call found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Files examined.
    pub scanned: u64,
    /// Files a catalog row references (kept).
    pub referenced: u64,
    /// Unreferenced files removed.
    pub removed: u64,
    /// Bytes of the removed files.
    pub removed_bytes: u64,
    /// Unreferenced files kept because they are younger than the grace.
    pub kept_young: u64,
    /// Files of puts in flight (kept).
    pub in_flight: u64,
    /// Entries that are not content files (never touched).
    pub unknown: u64,
    /// Versions whose content is missing or damaged.
    pub corrupt_count: u64,
    /// The first [`MAX_REPORTED`] of them.
    pub corrupt: Vec<CorruptVersion>,
    /// Where to resume, when the limit stopped the walk.
    pub next: Option<RepairCursor>,
}

impl RepairReport {
    /// Whether the walk reached the end.
    pub fn complete(&self) -> bool {
        self.next.is_none()
    }

    fn corrupt(&mut self, row: &VersionRow, problem: String) {
        self.corrupt_count += 1;
        if self.corrupt.len() < MAX_REPORTED {
            let scope = row
                .scope
                .scope()
                .map_or_else(|_| "?".to_owned(), |s| s.to_string());
            self.corrupt.push(CorruptVersion {
                scope,
                name: row.name.clone(),
                version: row.version,
                problem,
            });
        }
    }
}

fn storage(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(e)
}

impl FsArtifacts {
    /// Walks the content files (see the module docs).
    pub async fn repair(&self, opts: RepairOptions) -> Result<RepairReport> {
        if opts.limit == 0 || opts.limit > 10_000_000 {
            return Err(Error::invalid(
                Field::Limit,
                Problem::OutOfRange {
                    value: i128::from(opts.limit),
                    min: 1,
                    max: 10_000_000,
                },
            ));
        }
        let grace =
            Duration::from_millis(opts.min_age_ms.unwrap_or(self.options.recovery_grace_ms));
        let this = Walker {
            files: std::sync::Arc::clone(&self.files),
            db: std::sync::Arc::clone(&self.db),
            in_flight: std::sync::Arc::clone(&self.in_flight),
        };
        tokio::task::spawn_blocking(move || this.walk(&opts, grace))
            .await
            .map_err(|e| Error::Unavailable(format!("repair failed: {e}")))?
    }
}

struct Walker {
    files: std::sync::Arc<dyn crate::files::FileOps>,
    db: std::sync::Arc<redb::Database>,
    in_flight: std::sync::Arc<parking_lot::Mutex<HashSet<BlobId>>>,
}

impl Walker {
    fn walk(&self, opts: &RepairOptions, grace: Duration) -> Result<RepairReport> {
        let mut report = RepairReport::default();
        let start = opts.resume.as_ref().map_or(0, |c| c.dir);
        let now = SystemTime::now();
        for dir in start..=255u8 {
            let mut listed = self
                .files
                .list(dir)
                .map_err(|e| Error::Unavailable(format!("cannot list a content directory: {e}")))?;
            listed.sort_by(|a, b| a.name.cmp(&b.name));
            let after = opts
                .resume
                .as_ref()
                .filter(|c| c.dir == dir)
                .map(|c| c.after.as_str());
            let mut present = HashSet::new();
            for entry in &listed {
                if let Some((blob, false)) = parse_file(&entry.name) {
                    present.insert(blob);
                }
            }
            let mut last = after.unwrap_or("").to_owned();
            for entry in listed
                .iter()
                .filter(|e| after.is_none_or(|a| e.name.as_str() > a))
            {
                if report.scanned == opts.limit {
                    report.next = Some(RepairCursor { dir, after: last });
                    return Ok(report);
                }
                report.scanned += 1;
                self.examine(dir, entry, now, grace, opts.verify, &mut report)?;
                last.clone_from(&entry.name);
            }
            self.check_missing(dir, &present, &mut report)?;
        }
        Ok(report)
    }

    fn examine(
        &self,
        dir: u8,
        entry: &crate::files::Listed,
        now: SystemTime,
        grace: Duration,
        verify: bool,
        report: &mut RepairReport,
    ) -> Result<()> {
        let Some((blob, staged)) = parse_file(&entry.name).filter(|_| entry.regular) else {
            report.unknown += 1;
            return Ok(());
        };
        if blob[0] != dir {
            report.unknown += 1;
            return Ok(());
        }
        if self.in_flight.lock().contains(&blob) {
            report.in_flight += 1;
            return Ok(());
        }
        // Looked up after the in-flight check: a put that finished in
        // between has its row in this snapshot.
        if !staged && let Some((row, chunks)) = self.owner(&blob)? {
            {
                report.referenced += 1;
                if entry.len != row.size {
                    report.corrupt(
                        &row,
                        format!("the file holds {} bytes, {} recorded", entry.len, row.size),
                    );
                } else if verify {
                    let integrity = Integrity {
                        size: row.size,
                        sha256: Sha256Digest::from_bytes(row.sha256),
                        chunk_size: row.chunk_size,
                        chunks,
                    };
                    if !content_intact(&*self.files, &blob, &integrity) {
                        report.corrupt(&row, "the content does not match its digests".to_owned());
                    }
                }
                return Ok(());
            }
        }
        let age = now.duration_since(entry.modified).unwrap_or(Duration::ZERO);
        if age < grace {
            report.kept_young += 1;
            return Ok(());
        }
        match self.files.remove(dir, &entry.name) {
            Ok(()) => {
                report.removed += 1;
                report.removed_bytes += entry.len;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::Unavailable(format!(
                    "cannot remove {}: {e}",
                    entry.name
                )));
            }
        }
        Ok(())
    }

    /// The row owning a blob, with its chunk digests.
    fn owner(&self, blob: &BlobId) -> Result<Option<(VersionRow, Vec<Sha256Digest>)>> {
        let rtx = self.db.begin_read().map_err(storage)?;
        let blobs = rtx.open_table(BLOBS).map_err(storage)?;
        let Some(key) = blobs.get(&blob[..]).map_err(storage)? else {
            return Ok(None);
        };
        let key = key.value().to_vec();
        let versions = rtx.open_table(VERSIONS).map_err(storage)?;
        let Some(raw) = versions.get(&key[..]).map_err(storage)? else {
            return Ok(None);
        };
        let row: VersionRow = decode(raw.value(), "version")?;
        let chunks = rtx.open_table(CHUNKS).map_err(storage)?;
        let digests = match chunks.get(&key[..]).map_err(storage)? {
            Some(c) => decode_chunks(c.value())?,
            None => Vec::new(),
        };
        Ok(Some((row, digests)))
    }

    /// Published rows of this directory's blobs whose file is absent.
    fn check_missing(
        &self,
        dir: u8,
        present: &HashSet<BlobId>,
        report: &mut RepairReport,
    ) -> Result<()> {
        let candidates: Vec<BlobId> = {
            let rtx = self.db.begin_read().map_err(storage)?;
            let blobs = rtx.open_table(BLOBS).map_err(storage)?;
            let lo = [dir; 1];
            let mut out = Vec::new();
            for item in blobs.range(&lo[..]..).map_err(storage)? {
                let (k, _) = item.map_err(storage)?;
                let k = k.value();
                if k.first() != Some(&dir) {
                    break;
                }
                if let Ok(b) = <BlobId>::try_from(k)
                    && !present.contains(&b)
                {
                    out.push(b);
                }
            }
            out
        };
        for blob in candidates {
            let (d, name) = blob_file(&blob);
            // Listed before the row existed, or really missing?
            match self.files.open(d, &name) {
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::Unavailable(format!("cannot open {name}: {e}"))),
            }
            if let Some((row, _)) = self.owner(&blob)?
                && row.state == crate::catalog::State::Published
            {
                report.corrupt(&row, "the content file is missing".to_owned());
            }
        }
        Ok(())
    }
}
