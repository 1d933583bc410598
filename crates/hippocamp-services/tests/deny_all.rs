//! A policy that refuses everything changes nothing, whatever a surface
//! does with what it is handed: a property test over the governed handles
//! `Services::open` builds, the ones the HTTP server, MCP, the command
//! line and the runner all take (memory, agent sessions, artifacts, the
//! outbox). The app is suspended (the policy refuses every operation on
//! its data); random sequences of writes, erasures and reads through
//! those handles each fail with `policy_denied`, and the user's export
//! afterwards, under a policy that allows, is the one before.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use hippocamp_artifacts::{ArtifactName, ArtifactScope, DeleteSelector, PageRequest, PutOptions};
use hippocamp_core::{CallOptions, EntryId, Error, MemoryScope, SessionId};
use hippocamp_governance::AppPolicy;
use hippocamp_memory::{EntryUpdate, Event, NewEntry, SearchRequest, WriteOptions};
use hippocamp_services::{Config, Profile, Services};
use hippocamp_sessions::{AppendOptions, SessionEvent};
use proptest::prelude::*;

fn config(dir: &Path, suspended: bool) -> Config {
    let mut c = Config {
        profile: Profile::Durable,
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    c.policy.apps.insert(
        "shop".into(),
        AppPolicy {
            suspended,
            ..AppPolicy::default()
        },
    );
    c
}

fn scope() -> MemoryScope {
    MemoryScope::parse("shop", "alice").unwrap()
}

fn session() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One thing a surface can ask of its handles.
#[derive(Debug, Clone)]
enum Op {
    AddEntry(String),
    AddEvents(Vec<String>),
    Ingest(Vec<String>),
    Update(String),
    DeleteEntry,
    DeleteSession,
    DeleteUser,
    Search(String),
    GetEntry,
    Append(String),
    DeleteAgentSession,
    DeleteAgentUser,
    ReadAgentSession,
    PutArtifact(Vec<u8>),
    DeleteArtifact,
    ListArtifacts,
}

fn op() -> impl Strategy<Value = Op> {
    let text = "[a-z]{1,12}( [a-z]{1,12}){0,3}";
    prop_oneof![
        text.prop_map(Op::AddEntry),
        prop::collection::vec(text, 1..4).prop_map(Op::AddEvents),
        prop::collection::vec(text, 1..4).prop_map(Op::Ingest),
        text.prop_map(Op::Update),
        Just(Op::DeleteEntry),
        Just(Op::DeleteSession),
        Just(Op::DeleteUser),
        text.prop_map(Op::Search),
        Just(Op::GetEntry),
        text.prop_map(Op::Append),
        Just(Op::DeleteAgentSession),
        Just(Op::DeleteAgentUser),
        Just(Op::ReadAgentSession),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Op::PutArtifact),
        Just(Op::DeleteArtifact),
        Just(Op::ListArtifacts),
    ]
}

/// Runs `op` through the handles of `s`; its error, if it failed.
async fn apply(s: &Services, op: &Op, seeded: EntryId) -> Option<Error> {
    let call = CallOptions::default();
    let w = WriteOptions::default();
    let events = |texts: &[String]| -> Vec<Event> {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| Event::text(format!("p{i}-{t}"), "user", 1, t.as_str()))
            .collect()
    };
    let agent = s.agent();
    let memory = s.memory_store().unwrap();
    let artifacts = agent.artifacts.as_ref().unwrap();
    let user_files = ArtifactScope::user("shop", "alice").unwrap();
    let name = ArtifactName::new("notes.txt").unwrap();
    match op {
        Op::AddEntry(t) => memory
            .add_entry(&scope(), NewEntry::new(t.as_str()), &w)
            .await
            .err(),
        Op::AddEvents(t) => memory
            .add_events(&scope(), &session(), &events(t), &w)
            .await
            .err(),
        Op::Ingest(t) => {
            let (outbox, target) = agent.outbox.as_ref().unwrap();
            outbox
                .ingest(target, &scope(), &session(), &events(t), None, &call)
                .await
                .err()
        }
        Op::Update(t) => {
            let u = EntryUpdate {
                content: t.clone(),
                metadata: hippocamp_core::Metadata::new(),
            };
            memory.update_entry(&scope(), &seeded, &u, &w).await.err()
        }
        Op::DeleteEntry => memory.delete_entry(&scope(), &seeded, &call).await.err(),
        Op::DeleteSession => memory
            .delete_session(&scope(), &session(), &call)
            .await
            .err(),
        Op::DeleteUser => memory.delete_user(&scope(), &call).await.err(),
        Op::Search(q) => memory
            .search(&scope(), &SearchRequest::new(q.as_str()), &call)
            .await
            .err(),
        Op::GetEntry => memory.get_entry(&scope(), &seeded, &call).await.err(),
        Op::Append(t) => {
            let e = SessionEvent::text(format!("x-{t}"), "user", 1, t);
            agent
                .sessions
                .append(&scope(), &session(), &e, &AppendOptions::new(call))
                .await
                .err()
        }
        Op::DeleteAgentSession => agent
            .sessions
            .delete(&scope(), &session(), &call)
            .await
            .err(),
        Op::DeleteAgentUser => agent.sessions.delete_user(&scope(), &call).await.err(),
        Op::ReadAgentSession => agent.sessions.get(&scope(), &session(), &call).await.err(),
        Op::PutArtifact(b) => artifacts
            .put(&user_files, &name, b.clone().into(), &PutOptions::default())
            .await
            .err(),
        Op::DeleteArtifact => artifacts
            .delete(&user_files, &name, DeleteSelector::Latest, &call)
            .await
            .err(),
        Op::ListArtifacts => artifacts
            .list_names(&user_files, &PageRequest::default(), &call)
            .await
            .err(),
    }
}

/// The user's export, without the lines that carry the time of the
/// export itself.
async fn export(s: &Services) -> Vec<String> {
    let mut rx = hippocamp_services::export::export(
        s,
        scope(),
        CallOptions::default(),
        hippocamp_services::export::Include { artifacts: true },
    );
    let mut lines = Vec::new();
    while let Some(l) = rx.recv().await {
        let l = l.unwrap();
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        if v["kind"] != "export" {
            lines.push(l);
        }
    }
    lines
}

/// Seeds the user (an entry, a session's events, an agent session, a
/// file) under a policy that allows; its export and the entry's id.
fn seed(dir: &Path, rt: &tokio::runtime::Runtime) -> (Vec<String>, EntryId) {
    rt.block_on(async {
        let s = Services::open(&config(dir, false)).await.unwrap();
        let call = CallOptions::default();
        let memory = s.memory_store().unwrap();
        let id = memory
            .add_entry(
                &scope(),
                NewEntry::new("alice keeps bees"),
                &WriteOptions::default(),
            )
            .await
            .unwrap()
            .entry
            .id;
        memory
            .add_events(
                &scope(),
                &session(),
                &[Event::text("e1", "user", 1, "the hive is by the wall")],
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        let agent = s.agent();
        agent
            .sessions
            .append(
                &scope(),
                &session(),
                &SessionEvent::text("a1", "user", 1, "hello"),
                &AppendOptions::new(call),
            )
            .await
            .unwrap();
        agent
            .artifacts
            .as_ref()
            .unwrap()
            .put(
                &ArtifactScope::user("shop", "alice").unwrap(),
                &ArtifactName::new("notes.txt").unwrap(),
                b"bees".as_slice().into(),
                &PutOptions::default(),
            )
            .await
            .unwrap();
        (export(&s).await, id)
    })
}

#[test]
fn a_policy_refusing_everything_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let (before, seeded) = seed(dir.path(), &rt);
    assert!(before.len() >= 4, "{before:?}");
    let cases = ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    };
    proptest!(cases, |(ops in prop::collection::vec(op(), 1..12))| {
        rt.block_on(async {
            let s = Services::open(&config(dir.path(), true)).await.unwrap();
            for op in &ops {
                let e = apply(&s, op, seeded).await;
                let refused = matches!(&e, Some(Error::PolicyDenied { reason }) if reason == "app_suspended");
                prop_assert!(refused, "{op:?} answered {e:?}");
            }
            Ok(())
        })?;
    });
    // Nothing changed: the export under a policy that allows is the one
    // before.
    let after = rt.block_on(async {
        let s = Services::open(&config(dir.path(), false)).await.unwrap();
        export(&s).await
    });
    assert_eq!(after, before);
}
