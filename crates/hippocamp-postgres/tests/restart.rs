//! PostgreSQL restarted under a running store: calls made while it is down
//! fail as `Unavailable` (503) or time out, never as anything else; calls
//! after it is back succeed with no intervention (the pool drops the dead
//! connections); every acknowledged write is still there.
//!
//! Its own test binary, so the restart interrupts no other test (cargo runs
//! test binaries one after another). `HIPPOCAMP_TEST_POSTGRES_CTL` names
//! the command that restarts the cluster (`scripts/postgres.sh` prints it).

#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use hippocamp_core::{CallOptions, Error, MemoryScope};
use hippocamp_memory::{MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_postgres::PgMemoryStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_fails_calls_as_unavailable_and_they_recover_by_themselves() {
    if !support::have_postgres() {
        return;
    }
    let Some(ctl) = hippocamp_testkit::env(
        "HIPPOCAMP_TEST_POSTGRES_CTL",
        "scripts/postgres.sh start prints it",
    ) else {
        return;
    };
    let store = PgMemoryStore::open(support::database().await, MemoryConfig::default()).unwrap();
    let s = MemoryScope::parse("app", "u").unwrap();
    let quick = || CallOptions::timeout_ms(2_000).unwrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let e = store
            .add_entry(
                &s,
                NewEntry::new(format!("fact {i} before")),
                &WriteOptions::new(quick()),
            )
            .await
            .unwrap();
        acked.push(e.entry.id);
    }
    // Stop, stay down for 2 s (longer than a call's bounded retries of a
    // connection), start again, in the background while calls keep coming.
    let restart = std::thread::spawn(move || {
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{ctl} 2"))
            .status()
            .unwrap();
        assert!(status.success(), "{ctl} failed");
    });
    let started = Instant::now();
    let mut failures = 0;
    let mut i = 0;
    // Until the restart is over and some call saw it (or 20 s passed).
    while !(restart.is_finished() && failures > 0) && started.elapsed() < Duration::from_secs(20) {
        i += 1;
        match store
            .add_entry(
                &s,
                NewEntry::new(format!("fact {i} during")),
                &WriteOptions::new(quick()),
            )
            .await
        {
            Ok(e) => acked.push(e.entry.id),
            Err(Error::Unavailable(_) | Error::Timeout(_)) => failures += 1,
            Err(e) => panic!("a call during the restart failed with {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    restart.join().unwrap();
    assert!(failures > 0, "no call noticed the restart");
    // Back by itself within a few attempts.
    let deadline = Instant::now() + Duration::from_secs(20);
    let recovered = loop {
        match store
            .add_entry(&s, NewEntry::new("fact after"), &WriteOptions::new(quick()))
            .await
        {
            Ok(e) => break e.entry.id,
            Err(Error::Unavailable(_) | Error::Timeout(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no recovery: {e:?}"),
        }
    };
    acked.push(recovered);
    for id in &acked {
        store
            .get_entry(&s, id, &CallOptions::default())
            .await
            .unwrap();
    }
    let found = store
        .search(
            &s,
            &SearchRequest::new("fact").limit(50),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(found.hits.len(), acked.len().min(50));
    // A call whose commit was cut off may have landed without an answer:
    // more, never fewer.
    assert!(store.status().await.unwrap().entries >= acked.len() as u64);
}
