//! The floor of batched ingestion, for benchmarks: entries already
//! validated and analysed, written as the store writes them (the same
//! records with their postings, the same log record and `fdatasync`, the
//! same tables, the same checkpoints) and nothing else. `hippocamp bench
//! durable-ingest` times `add_events` next to it, so what separates the
//! two is exactly validation, analysis, lookups and the index.

use std::path::Path;
use std::sync::Arc;

use hippocamp_core::{Error, MemoryLimits, MemoryScope, Result};
use hippocamp_memory::MemoryEntry;
use hippocamp_search::TermFreqs;
use parking_lot::Mutex;

use crate::cache::ScopeCache;
use crate::store::{DB_FILE, DurableOptions, WAL_FILE, init_format};
use crate::writer::Writer;
use hippocamp_durable::FileWal;

/// A store directory written without checks. Open it on a directory of
/// its own: it takes no lock and is not a store.
pub struct IngestFloor {
    writer: Writer,
}

impl std::fmt::Debug for IngestFloor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestFloor").finish_non_exhaustive()
    }
}

impl IngestFloor {
    /// Creates the database and log in `dir` with the store's default
    /// options.
    pub fn open(dir: &Path) -> Result<Self> {
        let options = DurableOptions::default();
        hippocamp_durable::fs::private_dir(dir)
            .map_err(|e| Error::Unavailable(format!("cannot use {}: {e}", dir.display())))?;
        let db = hippocamp_durable::db::open_cached(
            &dir.join(DB_FILE),
            init_format,
            Some(options.cache_bytes),
        )?;
        let wal = FileWal::open(&dir.join(WAL_FILE)).map_err(Error::storage)?;
        let analyzer = Arc::new(hippocamp_search::Analyzer::english());
        Ok(Self {
            writer: Writer::new(
                Arc::new(db),
                Arc::new(ScopeCache::new(
                    options.scope_cache_bytes,
                    Arc::clone(&analyzer),
                )),
                MemoryLimits::default(),
                Box::new(wal),
                0,
                options,
                crate::format::Totals::default(),
                Arc::new(Mutex::new(crate::format::Totals::default())),
                analyzer,
            )?,
        })
    }

    /// Writes `entries` (each with its storage bytes and analysed terms)
    /// into `scope` as one durable group, as `add_events` commits a batch.
    pub fn write(
        &mut self,
        scope: &MemoryScope,
        entries: Vec<(MemoryEntry, u64, TermFreqs)>,
    ) -> Result<()> {
        self.writer.write_unchecked(scope, entries)
    }

    /// Waits until the database holds everything written (as a store's
    /// reads would).
    pub fn settle(&mut self) -> Result<()> {
        self.writer.settle()
    }
}
