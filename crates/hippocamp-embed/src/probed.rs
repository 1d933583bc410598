//! [`Probed`]: an embedder not trusted until it has answered once.
//!
//! A server whose embedder is slow to start (a model still loading) or
//! absent should still start: lexical search and everything without a
//! vector work. A background task probes the embedder with doubling
//! delays. While the first probe is in flight a call waits for it (within
//! its own deadline), so a command that starts and embeds at once is not
//! refused; once a probe has failed, calls fail at once with
//! [`Error::Unavailable`] (a 503 with `Retry-After` over HTTP) instead of
//! each waiting out its deadline, until a probe succeeds. Then calls go
//! through unchanged; later failures are the inner embedder's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use async_trait::async_trait;
use hippocamp_core::{Deadline, Error, Result};

use crate::{EmbedLimits, Embedder, InputKind, Vector};

/// The first delay between probes; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest delay between probes.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// No probe has ended yet.
const PROBING: u8 = 0;
/// A probe failed; none has succeeded.
const FAILED: u8 = 1;
/// A probe succeeded.
const READY: u8 = 2;

/// Where the probes are, shared with the probing task.
#[derive(Debug, Default)]
struct State {
    phase: AtomicU8,
    /// Woken when the first probe ends.
    first: Notify,
}

/// An embedder whose calls are refused until a probe has succeeded.
#[derive(Debug)]
pub struct Probed {
    inner: Arc<dyn Embedder>,
    state: Arc<State>,
}

impl Probed {
    /// Wraps `inner` and starts probing it on the current Tokio runtime
    /// (the task ends with the first success, or when the wrapper is
    /// dropped).
    pub fn start(inner: Arc<dyn Embedder>) -> Arc<Self> {
        let state = Arc::new(State::default());
        let me = Arc::new(Self {
            inner: Arc::clone(&inner),
            state: Arc::clone(&state),
        });
        let alive = Arc::downgrade(&me);
        tokio::spawn(async move {
            let mut backoff = FIRST_BACKOFF;
            while alive.strong_count() > 0 {
                let deadline = inner.limits().default_deadline();
                match inner
                    .embed(&["readiness probe".to_owned()], InputKind::Query, deadline)
                    .await
                {
                    Ok(_) => {
                        state.phase.store(READY, Ordering::Release);
                        state.first.notify_waiters();
                        tracing::info!(model = inner.model(), "the embedder answered its probe");
                        return;
                    }
                    Err(e) => {
                        state.phase.store(FAILED, Ordering::Release);
                        state.first.notify_waiters();
                        tracing::warn!(error = %e, "the embedder did not answer its probe; retrying");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        });
        me
    }

    /// Whether a probe has succeeded.
    pub fn is_ready(&self) -> bool {
        self.state.phase.load(Ordering::Acquire) == READY
    }

    /// Waits (within `deadline`) for the first probe to end, if none has.
    async fn first_probe(&self, deadline: Deadline) {
        let woken = self.state.first.notified();
        if self.state.phase.load(Ordering::Acquire) != PROBING {
            return;
        }
        let _ = tokio::time::timeout(deadline.remaining(), woken).await;
    }
}

#[async_trait]
impl Embedder for Probed {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn limits(&self) -> &EmbedLimits {
        self.inner.limits()
    }

    fn describe_limits(&self) -> Vec<hippocamp_core::LimitInfo> {
        self.inner.describe_limits()
    }

    async fn embed(
        &self,
        texts: &[String],
        kind: InputKind,
        deadline: Deadline,
    ) -> Result<Vec<Vector>> {
        self.first_probe(deadline).await;
        if !self.is_ready() {
            return Err(Error::Unavailable(
                "the embedder has not answered its readiness probe yet; retry later".into(),
            ));
        }
        self.inner.embed(texts, kind, deadline).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Fails its first `fails` calls, then answers.
    #[derive(Debug)]
    struct Flaky {
        fails: usize,
        calls: AtomicUsize,
        limits: EmbedLimits,
    }

    #[async_trait]
    impl Embedder for Flaky {
        fn model(&self) -> &'static str {
            "flaky"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn limits(&self) -> &EmbedLimits {
            &self.limits
        }
        async fn embed(&self, texts: &[String], _: InputKind, _: Deadline) -> Result<Vec<Vector>> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.fails {
                return Err(Error::Unavailable("starting".into()));
            }
            Ok(texts.iter().map(|_| vec![1.0, 0.0]).collect())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_are_refused_until_a_probe_succeeds() {
        let inner = Arc::new(Flaky {
            fails: 3,
            calls: AtomicUsize::new(0),
            limits: EmbedLimits::default(),
        });
        let p = Probed::start(inner);
        let text = ["hello".to_owned()];
        let deadline = || EmbedLimits::default().default_deadline();
        let e = p
            .embed(&text, InputKind::Passage, deadline())
            .await
            .unwrap_err();
        assert_eq!(e.code(), "unavailable");
        // Three failed probes, with 250 + 500 + 1,000 ms between them.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(p.is_ready());
        let v = p
            .embed(&text, InputKind::Passage, deadline())
            .await
            .unwrap();
        assert_eq!(v.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_made_at_once_waits_for_the_first_probe() {
        let inner = Arc::new(Flaky {
            fails: 0,
            calls: AtomicUsize::new(0),
            limits: EmbedLimits::default(),
        });
        let p = Probed::start(inner);
        let deadline = EmbedLimits::default().default_deadline();
        let v = p
            .embed(&["now".to_owned()], InputKind::Passage, deadline)
            .await
            .unwrap();
        assert_eq!(v.len(), 1);
    }
}
