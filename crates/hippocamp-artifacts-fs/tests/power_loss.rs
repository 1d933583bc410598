//! Power loss: only synced data and synced directory entries survive. The
//! store runs on a simulated disk (catalog file, catalog log and content
//! directories) that is cut at random syncs of a put/delete workload,
//! optionally tearing unsynced writes and committing unsynced directory
//! entries; the reopened store must hold every acknowledged put, readable
//! and verified, and nothing partial. The disk also counts syncs: every
//! acknowledged put synced its content file, its directory and the
//! catalog log before its acknowledgement.

#![allow(clippy::unwrap_used)]

mod support;

use hippocamp_artifacts::ArtifactLimits;
use hippocamp_artifacts_fs::{FsArtifacts, FsOptions, RepairOptions};
use hippocamp_durable::sim::PowerLoss;
use rand::{Rng, SeedableRng};
use support::crash::{self, Op};
use support::power::{self, SimFs};

const OPS: usize = 40;
const SEED: u64 = 0x0900_0001;

fn limits() -> ArtifactLimits {
    crash::limits()
}

/// Checkpoints often, so cuts also land in checkpoints.
fn options() -> FsOptions {
    FsOptions {
        checkpoint_records: 7,
        ..FsOptions::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn ops() -> Vec<Op> {
    crash::ops(SEED, 0).into_iter().take(OPS).collect()
}

/// Runs the workload until the power fails (or to its end); returns the
/// sync count at each acknowledgement.
fn run(disk: &PowerLoss<SimFs>, ops: &[Op], check_syncs: bool) -> Vec<u64> {
    runtime().block_on(async {
        let store: FsArtifacts = power::open(disk, limits(), options()).unwrap();
        let mut versions = Vec::new();
        let mut at_ack = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let (syncs, (content, dirs)) = (disk.syncs(), power::sync_counts(disk));
            let changed = crash::run(&store, SEED, 0, i, *op, &mut versions).await;
            if check_syncs {
                let (content2, dirs2) = power::sync_counts(disk);
                let others = disk.syncs() - syncs - (content2 - content) - (dirs2 - dirs);
                match op {
                    Op::Put { .. } => assert!(
                        content2 > content && dirs2 > dirs && others >= 1,
                        "put {i} was acknowledged after {} content, {} directory and {others} catalog syncs",
                        content2 - content,
                        dirs2 - dirs
                    ),
                    Op::Delete { .. } => assert!(
                        !changed || others >= 1,
                        "delete {i} was acknowledged without a catalog sync"
                    ),
                }
            }
            at_ack.push(disk.syncs());
            if disk.cut() {
                break;
            }
        }
        at_ack
    })
}

/// Opens the surviving disk and checks it against the model.
fn check(disk: &PowerLoss<SimFs>, ops: &[Op], acked: usize) -> Result<bool, String> {
    runtime().block_on(async {
        let store =
            power::open(disk, limits(), options()).map_err(|e| format!("reopen failed: {e}"))?;
        let (live, landed) = crash::check_stream(&store, SEED, 0, ops, acked).await?;
        let report = store
            .repair(RepairOptions {
                min_age_ms: Some(0),
                verify: true,
                ..RepairOptions::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        if report.corrupt_count > 0 || report.referenced != live {
            return Err(format!("repair found {report:?} with {live} live versions"));
        }
        Ok(landed)
    })
}

#[test]
fn every_acknowledged_put_syncs_content_directory_and_catalog() {
    let disk = PowerLoss::with_image(power::created(&limits(), &options()));
    let ops = ops();
    let at_ack = run(&disk, &ops, true);
    assert_eq!(at_ack.len(), OPS);
    let (content, dirs) = power::sync_counts(&disk);
    let puts = ops.iter().filter(|o| matches!(o, Op::Put { .. })).count();
    eprintln!(
        "{OPS} acknowledged operations ({puts} puts): {} syncs, {content} of content files, {dirs} of directories",
        disk.syncs()
    );
}

#[test]
fn power_cut_at_random_syncs_loses_no_acknowledged_put() {
    let image = power::created(&limits(), &options());
    let ops = ops();
    let total_syncs = {
        let d = PowerLoss::with_image(image.clone());
        run(&d, &ops, false);
        d.syncs()
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut landed, trials) = (0, 160);
    for t in 0..trials {
        let cut = rng.random_range(0..total_syncs);
        let tear = rng.random_bool(0.5);
        let disk = PowerLoss::with_image(image.clone());
        disk.arm(cut, tear, t);
        let at_ack = run(&disk, &ops, false);
        assert!(disk.cut(), "trial {t}: the power never failed");
        let acked = at_ack.iter().take_while(|&&s| s <= cut).count();
        let after = PowerLoss::with_image(disk.surviving());
        match check(&after, &ops, acked) {
            Ok(l) => landed += usize::from(l),
            Err(e) => panic!(
                "trial {t} (cut at sync {cut} of {total_syncs}, tear {tear}, {acked} acknowledged): {e}"
            ),
        }
    }
    eprintln!(
        "{trials} power cuts: every acknowledged operation survived; {landed} in-flight operations had also landed"
    );
}

/// A second power cut during the recovery of the first loses nothing
/// either: replay and the resolution of pending versions are crash-safe.
#[test]
fn power_cut_during_recovery_loses_nothing() {
    let ops = ops();
    let disk = PowerLoss::with_image(power::created(&limits(), &options()));
    // Cut in the middle of a put, so recovery has a pending version to
    // resolve and log records to replay.
    let clean = {
        let d = PowerLoss::with_image(disk.surviving());
        run(&d, &ops[..25], false);
        d.syncs()
    };
    disk.arm(clean - 1, true, 99);
    let at_ack = run(&disk, &ops[..26], false);
    let acked = at_ack.iter().take_while(|&&s| s < clean).count();
    let image = disk.surviving();
    let recovery_syncs = {
        let d = PowerLoss::with_image(image.clone());
        drop(power::open(&d, limits(), options()).unwrap());
        d.syncs()
    };
    assert!(recovery_syncs > 0);
    for cut in 0..recovery_syncs {
        let first = PowerLoss::with_image(image.clone());
        first.arm(cut, true, cut);
        drop(power::open(&first, limits(), options()).unwrap());
        let second = PowerLoss::with_image(first.surviving());
        if let Err(e) = check(&second, &ops, acked) {
            panic!("cut at recovery sync {cut}: {e}");
        }
    }
}
