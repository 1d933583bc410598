//! Power loss: only synced data survives. A simulated disk that drops
//! everything written since each device's last sync (optionally keeping a
//! torn prefix) is cut at random syncs of a write workload; the reopened
//! store must hold every write acknowledged before the cut. The disk also
//! counts syncs: every acknowledged write is followed by at least one
//! before its ack.

#![allow(clippy::unwrap_used)]

mod support;

use hippocamp_core::{CallOptions, MemoryScope};
use hippocamp_durable::sim::{Image, PowerLoss};
use hippocamp_memory::{MemoryConfig, MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_memory_redb::{DurableOptions, RedbMemoryStore};
use rand::{Rng, SeedableRng};
use support::workload::{self, WOp};

const OPS: usize = 60;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Checkpoints every few groups, so cuts also land in checkpoints and log
/// truncations.
fn open(disk: &PowerLoss) -> hippocamp_core::Result<RedbMemoryStore> {
    let options = DurableOptions {
        checkpoint_groups: 7,
        ..DurableOptions::default()
    };
    RedbMemoryStore::open_with_backend(disk.backend(), disk.wal(), MemoryConfig::default(), options)
}

/// A disk holding a freshly created, cleanly closed store. (Creating a
/// store on a file is atomic: it is built under a temporary name and
/// renamed into place; a raw backend has no rename, so power-loss trials
/// start from a created store.)
fn created() -> PowerLoss {
    let d = PowerLoss::new();
    drop(open(&d).unwrap());
    PowerLoss::with_image(d.surviving())
}

/// Runs the workload; returns the sync count at each acknowledgement.
fn run(disk: &PowerLoss, ops: &[WOp]) -> Vec<u64> {
    let rt = runtime();
    rt.block_on(async {
        let store = open(disk).unwrap();
        let mut at_ack = Vec::with_capacity(ops.len());
        for op in ops {
            let before = disk.syncs();
            workload::run(&store, 0, op).await;
            let after = disk.syncs();
            assert!(after > before, "{op:?} was acknowledged without a sync");
            at_ack.push(after);
        }
        at_ack
    })
}

#[test]
fn every_acknowledged_write_is_synced_before_its_ack() {
    let ops = workload::ops(7, 0, OPS);
    let disk = PowerLoss::new();
    let at_ack = run(&disk, &ops);
    assert_eq!(at_ack.len(), OPS);
    eprintln!("{} syncs for {OPS} acknowledged writes", disk.syncs());
}

#[test]
fn power_cut_at_random_syncs_loses_no_acknowledged_write() {
    let ops = workload::ops(11, 0, OPS);
    let all = workload::universe(0, &ops);
    let total_syncs = {
        let d = created();
        run(&d, &ops);
        d.syncs()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    for t in 0..80 {
        let cut = rng.random_range(0..total_syncs);
        let tear = rng.random_bool(0.5);
        let disk = created();
        disk.arm(cut, tear, t);
        let at_ack = run(&disk, &ops);
        assert!(disk.cut(), "trial {t}: the power never failed");
        let acked = at_ack.iter().take_while(|&&s| s <= cut).count();
        let image = disk.surviving();
        let rt = runtime();
        let result = rt.block_on(async {
            let after = PowerLoss::with_image(image);
            let store = open(&after).map_err(|e| format!("reopen failed: {e}"))?;
            let seen = workload::observe(&store, 0, &all).await?;
            workload::check(0, &ops, acked, &seen)
        });
        if let Err(e) = result {
            panic!("trial {t} (cut after sync {cut}, tear {tear}, {acked} acked): {e}");
        }
    }
}

/// A second power cut during the recovery of the first loses nothing
/// either: replaying the log is itself crash-safe.
#[test]
fn power_cut_during_recovery_loses_nothing() {
    let ops = workload::ops(13, 0, OPS);
    let all = workload::universe(0, &ops);
    let disk = created();
    let at_ack = run(&disk, &ops[..40]);
    let acked = at_ack.len();
    let image: Image = disk.surviving();
    // Count the syncs a clean recovery takes, then cut at each of them.
    let recovery_syncs = {
        let d = PowerLoss::with_image(image.clone());
        drop(open(&d).unwrap());
        d.syncs()
    };
    for cut in 0..recovery_syncs {
        let first = PowerLoss::with_image(image.clone());
        first.arm(cut, true, cut);
        drop(open(&first).unwrap());
        let second = PowerLoss::with_image(first.surviving());
        let rt = runtime();
        let result = rt.block_on(async {
            let store = open(&second).map_err(|e| e.to_string())?;
            let seen = workload::observe(&store, 0, &all).await?;
            workload::check(0, &ops, acked, &seen)
        });
        if let Err(e) = result {
            panic!("cut at recovery sync {cut}: {e}");
        }
    }
}

/// A lone add is logged with its text alone and acknowledged before it is
/// analysed; what a replay finds in the log it analyses, so after a power
/// cut the entry is found by its words.
#[test]
fn an_add_logged_before_its_analysis_is_searchable_after_a_power_cut() {
    let text = "Caroline adopted two puppies";
    let scope = MemoryScope::parse("app", "u").unwrap();
    let disk = created();
    let rt = runtime();
    let image = rt.block_on(async {
        let store = open(&disk).unwrap();
        store
            .add_entry(&scope, NewEntry::new(text), &WriteOptions::default())
            .await
            .unwrap();
        // The power fails before anything but the log was synced.
        disk.surviving()
    });
    let holds = |bytes: &[u8], part: &[u8]| bytes.windows(part.len()).any(|w| w == part);
    assert!(
        holds(&image.wal, text.as_bytes()),
        "the add is not in the log"
    );
    // An analysed record lists the stem "puppi" once: its length, the
    // stem, its count. The logged one has no terms.
    assert!(
        !holds(&image.wal, b"\x05puppi\x01"),
        "the add was logged analysed"
    );
    let after = PowerLoss::with_image(image);
    rt.block_on(async {
        let store = open(&after).unwrap();
        let found = store
            .search(
                &scope,
                &SearchRequest::new("puppy"),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(found.hits.len(), 1, "{found:?}");
        assert_eq!(found.hits[0].entry.content, text);
    });
}

/// Concurrent writers share fsyncs: many acknowledged writes, fewer syncs.
#[test]
fn concurrent_writes_share_syncs() {
    let disk = PowerLoss::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let writes = 400;
    let syncs = rt.block_on(async {
        let store = std::sync::Arc::new(open(&disk).unwrap());
        let before = disk.syncs();
        let mut tasks = Vec::new();
        for i in 0..writes {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let scope =
                    hippocamp_core::MemoryScope::parse("app", &format!("u{}", i % 8)).unwrap();
                hippocamp_memory::MemoryStore::add_entry(
                    &*store,
                    &scope,
                    hippocamp_memory::NewEntry::new(format!("fact {i}")),
                    &hippocamp_memory::WriteOptions::default(),
                )
                .await
                .unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        disk.syncs() - before
    });
    eprintln!("{writes} concurrent acknowledged writes took {syncs} syncs");
    assert!(syncs < writes, "no write shared a sync");
    assert!(syncs >= 1);
}
