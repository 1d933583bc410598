//! Power loss: only synced data survives. A backend that drops everything
//! written since the last sync (optionally keeping a torn prefix) is cut at
//! random syncs of a write workload; the reopened store must hold every
//! write acknowledged before the cut. The backend also counts syncs: every
//! acknowledged write is followed by at least one before its ack.

#![allow(clippy::unwrap_used)]

mod support;

use hippocamp_memory::MemoryConfig;
use hippocamp_memory_redb::RedbMemoryStore;
use rand::{Rng, SeedableRng};
use support::power::PowerLossBackend;
use support::workload::{self, WOp};

const OPS: usize = 60;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs the workload; returns the sync count at each acknowledgement.
fn run(backend: &PowerLossBackend, ops: &[WOp]) -> Vec<u64> {
    let rt = runtime();
    rt.block_on(async {
        let store =
            RedbMemoryStore::open_with_backend(backend.clone(), MemoryConfig::default()).unwrap();
        let mut at_ack = Vec::with_capacity(ops.len());
        for op in ops {
            let before = backend.syncs();
            workload::run(&store, 0, op).await;
            let after = backend.syncs();
            assert!(after > before, "{op:?} was acknowledged without a sync");
            at_ack.push(after);
        }
        at_ack
    })
}

#[test]
fn every_acknowledged_write_is_synced_before_its_ack() {
    let ops = workload::ops(7, 0, OPS);
    let backend = PowerLossBackend::new();
    let at_ack = run(&backend, &ops);
    assert_eq!(at_ack.len(), OPS);
    eprintln!("{} syncs for {OPS} acknowledged writes", backend.syncs());
}

#[test]
fn power_cut_at_random_syncs_loses_no_acknowledged_write() {
    let ops = workload::ops(11, 0, OPS);
    let all = workload::universe(0, &ops);
    let total_syncs = {
        let b = PowerLossBackend::new();
        run(&b, &ops);
        b.syncs()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let trials = 60;
    for t in 0..trials {
        let cut = rng.random_range(0..total_syncs);
        let tear = rng.random_bool(0.5);
        let backend = PowerLossBackend::new();
        backend.arm(cut, tear, t);
        let at_ack = run(&backend, &ops);
        assert!(backend.cut(), "trial {t}: the power never failed");
        let acked = at_ack.iter().take_while(|&&s| s <= cut).count();
        let image = backend.surviving_image();
        let rt = runtime();
        let result = rt.block_on(async {
            let store = RedbMemoryStore::open_with_backend(
                PowerLossBackend::with_image(image),
                MemoryConfig::default(),
            )
            .map_err(|e| format!("reopen failed: {e}"))?;
            let seen = workload::observe(&store, 0, &all).await?;
            workload::check(0, &ops, acked, &seen)
        });
        if let Err(e) = result {
            panic!("trial {t} (cut after sync {cut}, tear {tear}, {acked} acked): {e}");
        }
    }
}

/// Concurrent writers share fsyncs: many acknowledged writes, fewer syncs.
#[test]
fn concurrent_writes_share_syncs() {
    let backend = PowerLossBackend::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let writes = 400;
    let syncs = rt.block_on(async {
        let store = std::sync::Arc::new(
            RedbMemoryStore::open_with_backend(backend.clone(), MemoryConfig::default()).unwrap(),
        );
        let before = backend.syncs();
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
        backend.syncs() - before
    });
    eprintln!("{writes} concurrent acknowledged writes took {syncs} syncs");
    assert!(syncs < writes, "no write shared a sync");
    assert!(syncs >= 1);
}
