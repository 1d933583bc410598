//! `hippocamp bench durable-write` on a few samples: every floor is
//! sampled, and the log floor writes what the store logs for one add.
//! The latencies themselves are figures, taken by the command, not
//! asserted here.

#![allow(clippy::unwrap_used)]

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_floor_is_sampled_and_the_log_floor_writes_one_adds_record() {
    if hippocamp_testkit::shared_data().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let r = hippocamp_bench::durable_write(dir.path(), 10)
        .await
        .unwrap();
    assert_eq!(r.samples, 10);
    // Each floor ran: a zero would mean a floor that timed nothing.
    for l in [
        &r.add_entry,
        &r.raw_write_fsync,
        &r.raw_overwrite_fsync,
        &r.log_fsync,
    ] {
        assert!(l.p50_us > 0.0, "{l:?}");
    }
    // One add's record: more than its ~200-byte text, less than two
    // records' worth.
    assert!(
        (200..2 * r.raw_bytes).contains(&r.log_record_bytes),
        "{} bytes logged for one add",
        r.log_record_bytes
    );
}
