//! `hippocamp bench durable-write` on a few samples: every floor is
//! measured, and the log floor writes what the store logs for one add.

#![allow(clippy::unwrap_used)]

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_floor_is_measured_and_the_log_floor_writes_one_adds_record() {
    if hippocamp_datasets::data_dir().is_none() {
        assert!(
            std::env::var_os("HIPPOCAMP_REQUIRE_EXTERNAL").is_none(),
            "the shared data folder is required (HIPPOCAMP_DATA_DIR)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = hippocamp_bench::durable_write(dir.path(), 10)
        .await
        .unwrap();
    assert_eq!(r.samples, 10);
    for l in [
        &r.add_entry,
        &r.raw_write_fsync,
        &r.raw_overwrite_fsync,
        &r.log_fsync,
    ] {
        assert!(l.p50_us > 0.0 && l.p50_us <= l.p99_us, "{l:?}");
    }
    // One add's record: more than its ~200-byte text, less than two
    // records' worth.
    assert!(
        (200..2 * r.raw_bytes).contains(&r.log_record_bytes),
        "{} bytes logged for one add",
        r.log_record_bytes
    );
    assert!((r.ratio_p50_to_log - r.add_entry.p50_us / r.log_fsync.p50_us).abs() < 1e-9);
}
