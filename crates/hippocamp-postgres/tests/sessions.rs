//! The PostgreSQL session store runs the session conformance suite and its
//! model test, each store on a schema of its own; `reopen` opens a second
//! store on the same schema (another server), which sees everything.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_postgres::{Database, PgConfig, PgSessions};
use hippocamp_sessions::conformance::SessionStoreFactory;
use hippocamp_sessions::{SessionLimits, SessionStore};
use parking_lot::Mutex;

#[derive(Default)]
struct PgFactory {
    last: Mutex<Option<(PgConfig, SessionLimits)>>,
}

#[async_trait]
impl SessionStoreFactory for PgFactory {
    async fn open(&self, limits: SessionLimits) -> Arc<dyn SessionStore> {
        let pg = support::config();
        let db = Database::connect(&pg).await.unwrap();
        *self.last.lock() = Some((pg, limits.clone()));
        Arc::new(PgSessions::new(db, limits).unwrap())
    }

    async fn reopen(&self, store: Arc<dyn SessionStore>) -> Option<Arc<dyn SessionStore>> {
        drop(store);
        let (pg, limits) = self.last.lock().clone()?;
        let db = Database::connect(&pg).await.unwrap();
        Some(Arc::new(PgSessions::new(db, limits).unwrap()))
    }
}

hippocamp_sessions::session_store_conformance_tests!(
    guard = support::have_postgres,
    PgFactory::default()
);
