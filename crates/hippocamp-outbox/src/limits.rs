//! The outbox's limits and the processor's options, each declared once
//! (value, default, range, description) and reported by capabilities.

use hippocamp_core::{Error, Problem, Result};

hippocamp_core::limit_table! {
    /// Admission limits, retry policy and retention of a job store.
    pub struct OutboxLimits, prefix "outbox." {
        /// Active (pending or running) jobs in the store.
        max_active_jobs: default 10_000, min 1, max 1_000_000,
            "active (pending or running) jobs in the outbox";
        /// Active jobs of one scope.
        max_active_jobs_per_scope: default 1_000, min 1, max 1_000_000,
            "active jobs of one (app, user) scope";
        /// Event bytes of the active jobs.
        max_active_bytes: default 256 << 20, min 1, max 10 << 30,
            "event bytes held by active jobs";
        /// Event bytes of one scope's active jobs.
        max_active_bytes_per_scope: default 64 << 20, min 1, max 10 << 30,
            "event bytes held by one scope's active jobs";
        /// Events in one job (a longer session makes several jobs).
        max_events_per_job: default 5_000, min 1, max 100_000,
            "events in one job; a longer submission is split into several jobs";
        /// Events in one submission.
        max_events_per_submission: default 100_000, min 1, max 1_000_000,
            "events in one ingest request";
        /// Delivery attempts before a job fails.
        max_attempts: default 5, min 1, max 100,
            "delivery attempts before a job fails";
        /// First retry delay.
        backoff_base_ms: default 250, min 1, max 3_600_000,
            "delay before the first retry, milliseconds (doubling, with jitter)";
        /// Longest retry delay.
        max_backoff_ms: default 30_000, min 1, max 86_400_000,
            "longest delay between retries, milliseconds";
        /// How long a finished job's status is kept.
        terminal_retention_ms: default 604_800_000, min 0, max 315_360_000_000,
            "how long a finished job's status is kept before pruning, milliseconds (7 days)";
        /// Finished jobs removed by one prune pass.
        max_prune_batch: default 1_000, min 1, max 100_000,
            "finished jobs one prune pass removes at most";
        /// Finished jobs kept; past it the oldest goes when another ends.
        max_finished_jobs: default 100_000, min 1, max 10_000_000,
            "finished job statuses kept; when another job ends past it, the oldest finished one is removed (as a prune would)";
        /// Admitted event ids remembered (the watermark), store-wide.
        max_watermark_events: default 10_000_000, min 1, max 1_000_000_000,
            "admitted event ids the outbox remembers so a resent session queues only what is new; over it an admission is refused (quota_exceeded)";
        /// Admitted event ids remembered for one scope.
        max_watermark_events_per_scope: default 1_000_000, min 1, max 1_000_000_000,
            "admitted event ids remembered for one (app, user) scope; over it an admission is refused (quota_exceeded)";
        /// Skipped events a job's status lists one by one.
        max_skipped_details: default 100, min 0, max 10_000,
            "skipped events a job's status lists with their position and reason (every skipped event is counted by reason)";
        /// Schedule entries one claim pass examines.
        max_claim_scan: default 1_000, min 1, max 100_000,
            "schedule entries one claim pass examines at most";
    }
}

impl OutboxLimits {
    /// Checks every range and the relations between limits.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        let above = |key: &str, other: &str| {
            Err(Error::config(
                key,
                Problem::Malformed(format!("must not be above `{other}`")),
            ))
        };
        if self.max_active_jobs_per_scope > self.max_active_jobs {
            return above("outbox.max_active_jobs_per_scope", "outbox.max_active_jobs");
        }
        if self.max_active_bytes_per_scope > self.max_active_bytes {
            return above(
                "outbox.max_active_bytes_per_scope",
                "outbox.max_active_bytes",
            );
        }
        if self.max_watermark_events_per_scope > self.max_watermark_events {
            return above(
                "outbox.max_watermark_events_per_scope",
                "outbox.max_watermark_events",
            );
        }
        if self.backoff_base_ms > self.max_backoff_ms {
            return above("outbox.backoff_base_ms", "outbox.max_backoff_ms");
        }
        Ok(())
    }
}

hippocamp_core::limit_table! {
    /// How the processor delivers.
    pub struct ProcessorOptions, prefix "outbox.processor." {
        /// Concurrent delivery workers.
        workers: default 2, min 1, max 128,
            "concurrent delivery workers";
        /// Lease of a claim; renewed before every store call.
        lease_ms: default 45_000, min 250, max 3_600_000,
            "lease of a claimed job, milliseconds; at least 2 * call_timeout_ms + 250";
        /// Deadline of one `add_events` call.
        call_timeout_ms: default 20_000, min 10, max 60_000,
            "deadline of one delivery call to the memory store, milliseconds";
        /// Idle wait between claim passes when nothing is due.
        poll_interval_ms: default 100, min 5, max 60_000,
            "idle wait between claim passes when nothing is due, milliseconds";
        /// Interval of the automatic prune pass.
        prune_interval_ms: default 60_000, min 1_000, max 86_400_000,
            "interval of the automatic prune pass over finished jobs, milliseconds";
    }
}

impl ProcessorOptions {
    /// Checks every range and that a lease outlasts a renewal and a call.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        if self.lease_ms < 2 * self.call_timeout_ms + 250 {
            return Err(Error::config(
                "outbox.processor.lease_ms",
                Problem::Malformed(format!(
                    "{} is shorter than 2 * call_timeout_ms + 250 = {}",
                    self.lease_ms,
                    2 * self.call_timeout_ms + 250
                )),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations_are_checked() {
        assert!(OutboxLimits::default().validate().is_ok());
        assert!(ProcessorOptions::default().validate().is_ok());
        let bad = OutboxLimits {
            max_active_jobs: 10,
            max_active_jobs_per_scope: 11,
            ..OutboxLimits::default()
        };
        assert!(bad.validate().is_err());
        let short = ProcessorOptions {
            lease_ms: 10_000,
            call_timeout_ms: 5_000,
            ..ProcessorOptions::default()
        };
        let e = short.validate().unwrap_err();
        assert!(e.to_string().contains("10250"), "{e}");
        let ok = ProcessorOptions {
            lease_ms: 10_250,
            call_timeout_ms: 5_000,
            ..ProcessorOptions::default()
        };
        assert!(ok.validate().is_ok());
        assert!(
            serde_json::from_str::<ProcessorOptions>(r#"{"workerz": 2}"#).is_err(),
            "unknown options are refused"
        );
    }
}
