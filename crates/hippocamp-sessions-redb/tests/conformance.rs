//! The durable store runs the conformance suite, reopening its directory
//! where a scenario checks what survives.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hippocamp_sessions::conformance::SessionStoreFactory;
use hippocamp_sessions::{SessionLimits, SessionStore};
use hippocamp_sessions_redb::RedbSessions;

/// Opens stores in fresh directories (kept for the test process) and
/// remembers which directory each store it handed out lives in.
#[derive(Default)]
struct Factory {
    dirs: Mutex<HashMap<usize, PathBuf>>,
}

fn key(s: &Arc<dyn SessionStore>) -> usize {
    Arc::as_ptr(s).cast::<()>() as usize
}

#[async_trait]
impl SessionStoreFactory for Factory {
    async fn open(&self, limits: SessionLimits) -> Arc<dyn SessionStore> {
        let dir = tempfile::tempdir().unwrap().keep();
        let s: Arc<dyn SessionStore> = Arc::new(RedbSessions::open(&dir, limits).unwrap());
        self.dirs.lock().unwrap().insert(key(&s), dir);
        s
    }

    async fn reopen(&self, store: Arc<dyn SessionStore>) -> Option<Arc<dyn SessionStore>> {
        let dir = self.dirs.lock().unwrap().remove(&key(&store))?;
        drop(store);
        let s: Arc<dyn SessionStore> =
            Arc::new(RedbSessions::open(&dir, SessionLimits::default()).unwrap());
        self.dirs.lock().unwrap().insert(key(&s), dir);
        Some(s)
    }
}

hippocamp_sessions::session_store_conformance_tests!(Factory::default());
