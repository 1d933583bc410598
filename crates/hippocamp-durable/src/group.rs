//! Group commit: concurrent writes share one transaction and one log
//! sync.
//!
//! A store puts each mutation in a queue with [`Committer::submit`] and
//! waits for its reply. Callers lead commits themselves, for a bounded
//! time each: when no commit is running, the caller takes the
//! [`GroupWriter`] and commits everything queued (up to the group bound)
//! as one group, on its own thread (through Tokio's `block_in_place`),
//! then goes on with what keeps arriving for up to [`LEAD_FOR`] before
//! waking the caller at the head of the queue to lead the next group. A
//! separate writer thread would, on a busy machine, wait for the
//! scheduler after every fsync; an uncontended write here wakes no other
//! thread. A caller that goes away while chosen to lead hands the queue to
//! a background drain, so a queued operation always has someone to commit
//! it.
//!
//! What a group means (one redb transaction, one log record) and how each
//! operation answers is the writer's business: it replies to every
//! operation of the group itself, after the group committed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hippocamp_core::{Error, Result};
use tokio::sync::{Notify, oneshot};

/// How long a caller may go on committing other callers' writes after its
/// own before handing leadership over.
pub const LEAD_FOR: Duration = Duration::from_millis(2);

/// The store side of group commit.
pub trait GroupWriter: Send {
    /// A queued mutation, carrying its own reply channel.
    type Op: Send;

    /// Applies and commits `ops` as one group, then answers each of them.
    fn commit_group(&mut self, ops: Vec<Self::Op>);

    /// Runs after each group (a checkpoint when one is due).
    fn after_group(&mut self) {}

    /// Runs once the queue is empty when the committer closes (a final
    /// checkpoint).
    fn close(&mut self) {}
}

/// Queues operations and commits them in groups through one writer.
pub struct Committer<W: GroupWriter> {
    /// Each queued operation with the signal that makes its caller the
    /// next leader.
    queue: parking_lot::Mutex<VecDeque<(W::Op, Arc<Notify>)>>,
    writer: parking_lot::Mutex<W>,
    /// Whether a background drain is scheduled or running.
    draining: AtomicBool,
    /// Most operations in one group.
    max_group: usize,
    /// Names the store in the error of a writer that stopped.
    what: &'static str,
}

impl<W: GroupWriter> std::fmt::Debug for Committer<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Committer")
            .field("what", &self.what)
            .field("queued", &self.queue.lock().len())
            .finish_non_exhaustive()
    }
}

/// Hands leadership on if a caller goes away while its operation may
/// still need someone to commit it.
struct Waiting<'a, W: GroupWriter + 'static> {
    committer: &'a Arc<Committer<W>>,
    done: bool,
}

impl<W: GroupWriter + 'static> Drop for Waiting<'_, W> {
    fn drop(&mut self) {
        if !self.done && !self.committer.queue.lock().is_empty() {
            // A cancelled caller may have been chosen to lead: make sure
            // the queue is still served.
            self.committer.schedule_drain();
        }
    }
}

impl<W: GroupWriter + 'static> Committer<W> {
    /// A committer of groups of at most `max_group` operations; `what`
    /// names the store in errors ("the memory writer").
    pub fn new(writer: W, max_group: usize, what: &'static str) -> Self {
        Self {
            queue: parking_lot::Mutex::new(VecDeque::new()),
            writer: parking_lot::Mutex::new(writer),
            draining: AtomicBool::new(false),
            max_group: max_group.max(1),
            what,
        }
    }

    /// Queues `op` and waits for its reply on `rx`, committing on this
    /// thread whenever it is this caller's turn to lead (see the module
    /// docs).
    pub async fn submit<T>(
        self: &Arc<Self>,
        op: W::Op,
        mut rx: oneshot::Receiver<Result<T>>,
    ) -> Result<T> {
        // One operation needs no lists: a single durable write is
        // measured against the log's own write + sync.
        let lead = Arc::new(Notify::new());
        self.queue.lock().push_back((op, Arc::clone(&lead)));
        let mut waiting = Waiting {
            committer: self,
            done: false,
        };
        let reply = self.reply(&mut rx, &lead).await;
        waiting.done = true;
        reply
    }

    /// Queues `ops` next to each other, so they share a group (up to the
    /// group bound), and waits for every reply, in order. A caller with
    /// several independent writes at hand (the outbox recording jobs that
    /// several workers finished) pays for one commit instead of one each.
    pub async fn submit_all<T>(
        self: &Arc<Self>,
        ops: Vec<(W::Op, oneshot::Receiver<Result<T>>)>,
    ) -> Vec<Result<T>> {
        let lead = Arc::new(Notify::new());
        let mut pending = Vec::with_capacity(ops.len());
        {
            let mut queue = self.queue.lock();
            for (op, rx) in ops {
                queue.push_back((op, Arc::clone(&lead)));
                pending.push(rx);
            }
        }
        let mut waiting = Waiting {
            committer: self,
            done: false,
        };
        let mut replies = Vec::with_capacity(pending.len());
        for mut rx in pending {
            replies.push(self.reply(&mut rx, &lead).await);
        }
        waiting.done = true;
        replies
    }

    /// Waits for the reply on `rx`, leading commits whenever `lead` says
    /// it is this caller's turn or no commit is running.
    async fn reply<T>(&self, rx: &mut oneshot::Receiver<Result<T>>, lead: &Notify) -> Result<T> {
        loop {
            if let Some(mut writer) = self.writer.try_lock() {
                blocking(|| {
                    // Keep committing while work keeps arriving, up to a
                    // bound: handing over costs the next leader a trip
                    // through the runtime's queue, but this caller's own
                    // reply must not wait long for other callers' writes.
                    let until = Instant::now() + LEAD_FOR;
                    while self.commit_next(&mut writer) && Instant::now() < until {}
                });
                drop(writer);
                self.hand_over();
            }
            tokio::select! {
                biased;
                reply = &mut *rx => {
                    return reply.unwrap_or_else(|_| {
                        Err(Error::Unavailable(format!("{} has stopped", self.what)))
                    });
                }
                () = lead.notified() => {}
            }
        }
    }

    /// Whether no commit is running and nothing is queued: a write
    /// submitted now will most likely lead its own group, alone.
    pub fn idle(&self) -> bool {
        !self.writer.is_locked() && self.queue.lock().is_empty()
    }

    /// Runs `f` on the writer once any running commit finished.
    pub fn with_writer<R>(&self, f: impl FnOnce(&mut W) -> R) -> R {
        f(&mut self.writer.lock())
    }

    /// After a commit: wakes the caller at the head of the queue to lead
    /// the next group. Every holder of the writer lock does this after
    /// releasing it, so a queued operation always has someone to commit
    /// it.
    fn hand_over(&self) {
        if let Some((_, lead)) = self.queue.lock().front() {
            lead.notify_one();
        }
    }

    fn schedule_drain(self: &Arc<Self>) {
        if self.draining.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        let drain = move || me.drain();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(drain)),
            Err(_) => drop(std::thread::spawn(drain)),
        }
    }

    /// Commits groups until the queue is empty (the safety net for a
    /// chosen leader that went away).
    fn drain(&self) {
        loop {
            if let Some(mut writer) = self.writer.try_lock() {
                while self.commit_next(&mut writer) {}
            }
            self.draining.store(false, Ordering::Release);
            self.hand_over();
            if self.queue.lock().is_empty() || self.draining.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    }

    /// Commits the next group; false if nothing was queued.
    fn commit_next(&self, writer: &mut W) -> bool {
        let group: Vec<W::Op> = {
            let mut q = self.queue.lock();
            let n = q.len().min(self.max_group);
            q.drain(..n).map(|(op, _)| op).collect()
        };
        if group.is_empty() {
            return false;
        }
        writer.commit_group(group);
        writer.after_group();
        true
    }

    /// Waits for any running commit, commits what is queued, then lets the
    /// writer close (checkpoint).
    pub fn close(&self) {
        let mut writer = self.writer.lock();
        while self.commit_next(&mut writer) {}
        writer.close();
    }
}

/// Runs blocking work on this thread, telling a multi-threaded Tokio
/// runtime to move its other tasks elsewhere meanwhile.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds numbers; each group is recorded.
    struct Summer {
        groups: Arc<parking_lot::Mutex<Vec<usize>>>,
    }

    struct Add(u64, oneshot::Sender<Result<u64>>);

    impl GroupWriter for Summer {
        type Op = Add;
        fn commit_group(&mut self, ops: Vec<Add>) {
            self.groups.lock().push(ops.len());
            std::thread::sleep(Duration::from_millis(2));
            for Add(n, tx) in ops {
                let _ = tx.send(Ok(n * 2));
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_operations_share_groups_and_each_gets_its_reply() {
        let groups = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let c = Arc::new(Committer::new(
            Summer {
                groups: Arc::clone(&groups),
            },
            8,
            "the test writer",
        ));
        let tasks: Vec<_> = (0..64u64)
            .map(|n| {
                let c = Arc::clone(&c);
                tokio::spawn(async move {
                    let (tx, rx) = oneshot::channel();
                    c.submit(Add(n, tx), rx).await.unwrap()
                })
            })
            .collect();
        for (n, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), n as u64 * 2);
        }
        let groups = groups.lock();
        assert_eq!(groups.iter().sum::<usize>(), 64);
        assert!(groups.iter().all(|&g| g <= 8));
        assert!(groups.len() < 64, "no group held two operations");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn operations_submitted_together_share_one_group() {
        let groups = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let c = Arc::new(Committer::new(
            Summer {
                groups: Arc::clone(&groups),
            },
            8,
            "the test writer",
        ));
        let ops = (0..5u64)
            .map(|n| {
                let (tx, rx) = oneshot::channel();
                (Add(n, tx), rx)
            })
            .collect();
        let replies: Vec<u64> = c
            .submit_all(ops)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(replies, vec![0, 2, 4, 6, 8]);
        assert_eq!(*groups.lock(), vec![5]);
        // Past the group bound they take several groups, each answered.
        let ops = (0..20u64)
            .map(|n| {
                let (tx, rx) = oneshot::channel();
                (Add(n, tx), rx)
            })
            .collect();
        assert_eq!(c.submit_all(ops).await.len(), 20);
        assert_eq!(groups.lock()[1..], [8, 8, 4]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abandoned_leader_does_not_strand_the_queue() {
        let groups = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let c = Arc::new(Committer::new(
            Summer {
                groups: Arc::clone(&groups),
            },
            1,
            "the test writer",
        ));
        for round in 0..50u64 {
            let (tx, rx) = oneshot::channel();
            let first = {
                let c = Arc::clone(&c);
                tokio::spawn(async move { c.submit(Add(round, tx), rx).await })
            };
            let (tx2, rx2) = oneshot::channel();
            let second = {
                let c = Arc::clone(&c);
                tokio::spawn(async move { c.submit(Add(round + 1, tx2), rx2).await })
            };
            first.abort();
            assert_eq!(second.await.unwrap().unwrap(), (round + 1) * 2);
        }
    }
}
