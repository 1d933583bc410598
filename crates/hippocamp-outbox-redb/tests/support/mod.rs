//! Process-crash trials of the outbox with the durable memory store: a
//! child process admits growing sessions through the outbox (and erases
//! its user now and then) from concurrent streams, with the processor
//! delivering, printing each acknowledgement; the parent kills it with
//! SIGKILL at a random moment, reopens both stores, runs the processor
//! until nothing is left to do and checks every stream: every
//! acknowledged admission is delivered, nothing is stored twice, nothing
//! admitted before an erasure is found after it.
//!
//! Stream `s` owns user `u{s}`. Its operation `i` is an erasure of the
//! user when `i % 10 == 9`, otherwise an admission of the whole session
//! `b{i / 5}` so far (every turn `t` of the block up to `i`, two events
//! each): sessions never span an erasure.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    clippy::cast_possible_wrap
)]

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hippocamp_core::{CallOptions, EntryId, IdempotencyKey, MemoryLimits, MemoryScope, SessionId};
use hippocamp_memory::{Event, MemoryConfig, MemoryStore, SearchMode, SearchRequest};
use hippocamp_memory_redb::RedbMemoryStore;
use hippocamp_outbox::{
    Erasing, Outbox, OutboxLimits, Processor, ProcessorOptions, Target, TargetName,
};
use hippocamp_outbox_redb::RedbJobStore;
use parking_lot::Mutex;

/// Concurrent streams in the child.
pub(crate) const STREAMS: usize = 4;
/// Operations per stream (more than a child gets through before the kill).
pub(crate) const OPS: usize = 300;

fn is_erasure(i: usize) -> bool {
    i % 10 == 9
}

fn scope(stream: usize) -> MemoryScope {
    MemoryScope::parse("crash", &format!("u{stream}")).unwrap()
}

fn event_ids(stream: usize, turn: usize) -> [String; 2] {
    [format!("e{stream}-{turn}-a"), format!("e{stream}-{turn}-b")]
}

/// The session an admission `i` grows, with its events so far.
fn admission(stream: usize, i: usize) -> (SessionId, Vec<Event>) {
    let block = i / 5;
    let session = SessionId::new(format!("b{block}")).unwrap();
    let events = (block * 5..=i)
        .filter(|t| !is_erasure(*t))
        .flat_map(|t| {
            event_ids(stream, t).into_iter().map(move |id| {
                Event::text(id.clone(), "user", 1 + t as i64, format!("marker {id}"))
            })
        })
        .collect();
    (session, events)
}

fn target() -> TargetName {
    TargetName::new("memory").unwrap()
}

struct Stores {
    memory: Arc<dyn MemoryStore>,
    outbox: Outbox,
}

fn open(dir: &Path, seed: u64) -> Stores {
    let options = hippocamp_memory_redb::DurableOptions {
        checkpoint_groups: if seed.is_multiple_of(2) { 8 } else { 1_024 },
        ..hippocamp_memory_redb::DurableOptions::default()
    };
    let memory: Arc<dyn MemoryStore> = Arc::new(
        RedbMemoryStore::open_with_options(dir.join("memory"), MemoryConfig::default(), options)
            .unwrap(),
    );
    let job_options = hippocamp_outbox_redb::DurableOptions {
        checkpoint_groups: if seed.is_multiple_of(3) { 8 } else { 1_024 },
        ..hippocamp_outbox_redb::DurableOptions::default()
    };
    let jobs = Arc::new(
        RedbJobStore::open_with_options(dir.join("outbox"), OutboxLimits::default(), job_options)
            .unwrap(),
    );
    let outbox = Outbox::new(jobs);
    outbox
        .register(
            target(),
            Target {
                store: Arc::clone(&memory),
                limits: MemoryLimits::default(),
            },
        )
        .unwrap();
    Stores { memory, outbox }
}

fn processor_options() -> ProcessorOptions {
    ProcessorOptions {
        workers: 2,
        lease_ms: 2_000,
        call_timeout_ms: 500,
        poll_interval_ms: 5,
        ..ProcessorOptions::default()
    }
}

/// If this process is a crash child, runs the workload and exits.
pub(crate) fn child_main() {
    let Ok(dir) = std::env::var("HIPPOCAMP_CRASH_CHILD") else {
        return;
    };
    let seed: u64 = std::env::var("HIPPOCAMP_CRASH_SEED")
        .unwrap()
        .parse()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stores = open(Path::new(&dir), seed);
        let _processor = Processor::start(&stores.outbox, processor_options()).unwrap();
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for stream in 0..STREAMS {
            let memory = Erasing::new(Arc::clone(&stores.memory), stores.outbox.clone());
            let outbox = stores.outbox.clone();
            let out = Arc::clone(&out);
            tasks.push(tokio::spawn(async move {
                for i in 0..OPS {
                    if is_erasure(i) {
                        memory
                            .delete_user(&scope(stream), &CallOptions::default())
                            .await
                            .unwrap();
                    } else {
                        let (session, events) = admission(stream, i);
                        outbox
                            .ingest(
                                &target(),
                                &scope(stream),
                                &session,
                                &events,
                                None,
                                &hippocamp_core::CallOptions::default(),
                            )
                            .await
                            .unwrap();
                    }
                    let mut o = out.lock();
                    writeln!(o, "ACK {stream} {i}").unwrap();
                    o.flush().unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // Done before the kill: wait to be killed.
        tokio::time::sleep(Duration::from_hours(1)).await;
    });
    std::process::exit(0);
}

/// What a trial checked.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Checked {
    /// Acknowledged admissions whose events were all found delivered.
    pub(crate) admissions: usize,
    /// Acknowledged erasures.
    pub(crate) erasures: usize,
    /// In-flight operations that had landed.
    pub(crate) in_flight_landed: usize,
}

fn entry_id(stream: usize, event: &str) -> EntryId {
    EntryId::derive(
        &scope(stream),
        &IdempotencyKey::new(format!("event:{event}")).unwrap(),
    )
}

/// One trial: kill the child at a random moment, recover, check.
pub(crate) fn trial(dir: &Path, seed: u64, child_args: &[&str]) -> Result<Checked, String> {
    let acks = hippocamp_durable::crash::kill_child(
        dir,
        seed,
        child_args,
        STREAMS,
        Duration::from_millis(400),
    )?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let stores = open(dir, seed);
        let processor = Processor::start(&stores.outbox, processor_options()).unwrap();
        // Until nothing is queued or running.
        let mut quiet = false;
        for _ in 0..2_000 {
            let s = stores.outbox.stats().await.map_err(|e| e.to_string())?;
            if s.pending == 0 && s.running == 0 {
                quiet = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        processor.stop().await;
        if !quiet {
            return Err("the outbox never finished its jobs".into());
        }
        let mut checked = Checked::default();
        for (stream, &acked) in acks.iter().enumerate() {
            check_stream(&*stores.memory, stream, acked, &mut checked).await?;
        }
        Ok(checked)
    })
}

async fn check_stream(
    memory: &dyn MemoryStore,
    stream: usize,
    acked: usize,
    checked: &mut Checked,
) -> Result<(), String> {
    let c = CallOptions::default();
    let s = scope(stream);
    let acked_erasures = (0..acked).filter(|i| is_erasure(*i)).count();
    let epoch = memory
        .erasure_epoch(&s, &c)
        .await
        .map_err(|e| e.to_string())?;
    let epoch = usize::try_from(epoch).unwrap();
    let in_flight_erasure = is_erasure(acked);
    if epoch != acked_erasures && !(in_flight_erasure && epoch == acked_erasures + 1) {
        return Err(format!(
            "stream {stream}: epoch {epoch} after {acked_erasures} acknowledged erasures"
        ));
    }
    if epoch > acked_erasures {
        checked.in_flight_landed += 1;
    }
    checked.erasures += acked_erasures;
    // The last erasure that landed: every turn before it is gone.
    let last_erasure = (epoch > 0).then(|| epoch * 10 - 1);
    let present = async |event: &str| -> Result<bool, String> {
        match memory.get_entry(&s, &entry_id(stream, event), &c).await {
            Ok(_) => Ok(true),
            Err(hippocamp_core::Error::NotFound(_)) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    };
    let mut expected = 0usize;
    let mut maybe = 0usize;
    for turn in 0..=acked.min(OPS - 1) {
        if is_erasure(turn) {
            continue;
        }
        let before_erasure = last_erasure.is_some_and(|l| turn < l);
        for event in event_ids(stream, turn) {
            let found = present(&event).await?;
            if before_erasure {
                if found {
                    return Err(format!(
                        "stream {stream}: {event} (turn {turn}) came back after the erasure at {last_erasure:?}"
                    ));
                }
            } else if turn < acked {
                if !found {
                    return Err(format!(
                        "stream {stream}: acknowledged {event} (turn {turn}) was never delivered"
                    ));
                }
                expected += 1;
            } else if found {
                // The in-flight admission.
                maybe += 1;
            }
        }
        if !before_erasure && turn < acked {
            checked.admissions += 1;
        }
    }
    if maybe > 0 {
        checked.in_flight_landed += 1;
    }
    // Nothing stored twice, nothing else stored.
    let hits = memory
        .search(
            &s,
            &SearchRequest::new("marker")
                .limit(50)
                .mode(SearchMode::Lexical),
            &c,
        )
        .await
        .map_err(|e| e.to_string())?
        .hits;
    let mut ids: Vec<EntryId> = hits.iter().map(|h| h.entry.id).collect();
    ids.sort();
    ids.dedup();
    if ids.len() != hits.len() || hits.len() != expected + maybe {
        return Err(format!(
            "stream {stream}: {} hits ({} distinct), {expected} expected and {maybe} in flight",
            hits.len(),
            ids.len()
        ));
    }
    Ok(())
}
