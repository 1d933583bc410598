//! The PostgreSQL of the environment (`HIPPOCAMP_TEST_POSTGRES_URL`;
//! `scripts/postgres.sh` starts one): each store a test opens gets a schema
//! of its own, so tests run in parallel on one database. Without a URL the
//! tests skip with a message, unless `HIPPOCAMP_REQUIRE_EXTERNAL=1`.

#![allow(
    unreachable_pub,
    dead_code,
    clippy::unwrap_used,
    clippy::missing_panics_doc
)]

use hippocamp_postgres::{Database, PgConfig};

/// Whether the tests can run (fails instead under
/// `HIPPOCAMP_REQUIRE_EXTERNAL=1` when they cannot).
pub fn have_postgres() -> bool {
    hippocamp_testkit::postgres_url().is_some()
}

/// A fresh schema's name.
pub fn unique_schema() -> String {
    format!("t_{:016x}", rand::random::<u64>())
}

/// The configuration of a fresh schema.
pub fn config() -> PgConfig {
    let url = hippocamp_testkit::postgres_url().unwrap();
    PgConfig::new(url).schema(unique_schema())
}

/// A database on a fresh schema, migrated.
pub async fn database() -> Database {
    Database::connect(&config()).await.unwrap()
}
