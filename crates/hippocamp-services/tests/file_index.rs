//! Memory files are indexed for memory search by the services' artifact
//! layer (`hippocamp_services::file_index`), whichever path writes them,
//! and the index goes with the file: a deleted, renamed or expired
//! version is never found again, nor is a fact derived from it, and a
//! deletion the memory may not carry out is refused whole.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hippocamp_agent::memory_tool::{Command, MemoryTool, StoreFiles};
use hippocamp_artifacts::{
    ArtifactName, ArtifactScope, Body, DeleteSelector, PutOptions, Selector,
};
use hippocamp_core::{CallOptions, EntryId, Error, MemoryScope};
use hippocamp_governance::{AppPolicy, ConsentScope, NewConsent};
use hippocamp_memory::lineage::{Derivation, FileSource, Origin, Role, Source, Status};
use hippocamp_memory::{MemoryStore, NewEntry, SearchRequest, WriteOptions};
use hippocamp_services::{Config, Services};

fn config(dir: &std::path::Path, policy: AppPolicy) -> Config {
    let mut c = Config::from_toml(&format!(
        "profile = \"durable\"\ndata_dir = {:?}\n",
        dir.display().to_string()
    ))
    .unwrap();
    c.policy.apps.insert("app".into(), policy);
    c
}

async fn build(c: Config) -> Services {
    tokio::task::spawn_blocking(move || Services::build(&c, None))
        .await
        .unwrap()
        .unwrap()
}

fn alice() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

fn call() -> CallOptions {
    CallOptions::timeout(Duration::from_secs(10)).unwrap()
}

async fn run(
    s: &Services,
    scope: &MemoryScope,
    command: serde_json::Value,
) -> Result<String, Error> {
    let files = StoreFiles::new(&*s.artifacts, scope, call());
    let command: Command = serde_json::from_value(command).unwrap();
    MemoryTool::new(files).execute(&command).await
}

/// The ids and files a search for `q` finds (`superseded`: those too).
async fn found(
    m: &dyn MemoryStore,
    scope: &MemoryScope,
    q: &str,
    superseded: bool,
) -> Vec<(EntryId, Option<FileSource>)> {
    let mut req = SearchRequest::new(q);
    req.include_superseded = superseded;
    m.search(scope, &req, &call())
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.entry.id, h.entry.file.clone()))
        .collect()
}

fn file(name: &str, version: u64) -> FileSource {
    FileSource {
        name: name.into(),
        version,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_files_are_searchable_and_erased_with_their_versions() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(config(dir.path(), AppPolicy::default())).await;
    let m = s.memory_store().unwrap().clone();
    let a = alice();
    run(&s, &a, serde_json::json!({"command": "create", "path": "/memories/trip.md", "file_text": "The trip is to Lisbon in May.\n"}))
        .await
        .unwrap();
    let v1 = file(".memories/trip.md", 1);
    let hits = found(&*m, &a, "Lisbon", false).await;
    assert_eq!(hits, vec![(v1.entry_id(&a).unwrap(), Some(v1.clone()))]);
    let e1 = m.get_entry(&a, &hits[0].0, &call()).await.unwrap();
    assert_eq!(e1.origin, Origin::File);
    assert_eq!(e1.content, "The trip is to Lisbon in May.\n");
    // A new version supersedes the old one at once (even in the same
    // millisecond): a search finds the file's present text.
    run(&s, &a, serde_json::json!({"command": "str_replace", "path": "/memories/trip.md", "old_str": "Lisbon", "new_str": "Porto"}))
        .await
        .unwrap();
    let v2 = file(".memories/trip.md", 2);
    assert!(found(&*m, &a, "Lisbon", false).await.is_empty());
    assert_eq!(
        found(&*m, &a, "Lisbon", true).await.len(),
        1,
        "history stays"
    );
    assert_eq!(
        found(&*m, &a, "Porto", false).await,
        vec![(v2.entry_id(&a).unwrap(), Some(v2.clone()))]
    );
    let old = m
        .get_entry(&a, &v1.entry_id(&a).unwrap(), &call())
        .await
        .unwrap();
    assert_eq!(old.status, Status::Superseded);
    // Another user finds nothing of it.
    let bob = MemoryScope::parse("app", "bob").unwrap();
    assert!(found(&*m, &bob, "Porto", true).await.is_empty());
    // A fact derived from the file is erased with it.
    let fact = m
        .add_entry(
            &a,
            NewEntry {
                derivation: Some(Derivation {
                    sources: vec![Source {
                        entry: v2.entry_id(&a).unwrap(),
                        role: Role::Evidence,
                    }],
                    run: None,
                }),
                ..NewEntry::new("alice travels to Porto")
            },
            &WriteOptions::new(call()),
        )
        .await
        .unwrap()
        .entry
        .id;
    run(
        &s,
        &a,
        serde_json::json!({"command": "delete", "path": "/memories/trip.md"}),
    )
    .await
    .unwrap();
    assert!(found(&*m, &a, "Porto Lisbon trip", true).await.is_empty());
    for id in [v1.entry_id(&a).unwrap(), v2.entry_id(&a).unwrap(), fact] {
        assert!(matches!(
            m.get_entry(&a, &id, &call()).await,
            Err(Error::NotFound(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renames_and_single_deletions_move_the_index_and_other_files_have_none() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(config(dir.path(), AppPolicy::default())).await;
    let m = s.memory_store().unwrap().clone();
    let a = alice();
    // A rename indexes the new name and erases the old one's entries.
    run(&s, &a, serde_json::json!({"command": "create", "path": "/memories/a.md", "file_text": "prefers aisle seats"}))
        .await
        .unwrap();
    run(&s, &a, serde_json::json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}))
        .await
        .unwrap();
    assert_eq!(
        found(&*m, &a, "aisle", true).await,
        vec![(
            file(".memories/b.md", 1).entry_id(&a).unwrap(),
            Some(file(".memories/b.md", 1))
        )]
    );
    // Deleting one version through the artifact API: the one before is
    // current again.
    let scope = ArtifactScope::User {
        app: a.app().clone(),
        user: a.user().clone(),
    };
    let name = ArtifactName::new(".memories/b.md").unwrap();
    put(&s, &scope, &name, "prefers window seats")
        .await
        .unwrap();
    assert_eq!(
        found(&*m, &a, "seats", false).await[0].1,
        Some(file(".memories/b.md", 2))
    );
    s.artifacts
        .delete(&scope, &name, DeleteSelector::Latest, &call())
        .await
        .unwrap();
    assert_eq!(
        found(&*m, &a, "seats", false).await,
        vec![(
            file(".memories/b.md", 1).entry_id(&a).unwrap(),
            Some(file(".memories/b.md", 1))
        )]
    );
    // Not a memory file (another prefix, a session's scope, a name that
    // only shares the prefix): not indexed.
    for (scope, name) in [
        (scope.clone(), "notes/x.md"),
        (scope.clone(), ".memories_other/x.md"),
        (
            ArtifactScope::Session {
                app: a.app().clone(),
                user: a.user().clone(),
                session: hippocamp_core::SessionId::new("s1").unwrap(),
            },
            ".memories/x.md",
        ),
    ] {
        put(
            &s,
            &scope,
            &ArtifactName::new(name).unwrap(),
            "zebra crossing",
        )
        .await
        .unwrap();
    }
    assert!(found(&*m, &a, "zebra", true).await.is_empty());
    // An empty or binary version is indexed by its name, so it still
    // replaces the text before it.
    let bin = ArtifactName::new(".memories/blob.bin").unwrap();
    put(&s, &scope, &bin, "a kangaroo picture").await.unwrap();
    put_bytes(&s, &scope, &bin, vec![0xff, 0x00, 0xfe])
        .await
        .unwrap();
    assert!(found(&*m, &a, "kangaroo", false).await.is_empty());
    let by_name = m
        .get_entry(
            &a,
            &file(".memories/blob.bin", 2).entry_id(&a).unwrap(),
            &call(),
        )
        .await
        .unwrap();
    assert_eq!(by_name.content, ".memories/blob.bin");
}

async fn put(
    s: &Services,
    scope: &ArtifactScope,
    name: &ArtifactName,
    text: &str,
) -> Result<hippocamp_artifacts::ArtifactMeta, Error> {
    put_bytes(s, scope, name, text.as_bytes().to_vec()).await
}

async fn put_bytes(
    s: &Services,
    scope: &ArtifactScope,
    name: &ArtifactName,
    bytes: Vec<u8>,
) -> Result<hippocamp_artifacts::ArtifactMeta, Error> {
    let opts = PutOptions {
        call: call(),
        ..PutOptions::default()
    };
    s.artifacts.put(scope, name, Body::from(bytes), &opts).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_the_memory_refuses_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Memory entries are retained for a day; artifacts are not held.
    let policy = AppPolicy {
        retention_ms: Some(86_400_000),
        ..AppPolicy::default()
    };
    let s = build(config(dir.path(), policy)).await;
    let a = alice();
    run(&s, &a, serde_json::json!({"command": "create", "path": "/memories/kept.md", "file_text": "the locker code"}))
        .await
        .unwrap();
    let r = run(
        &s,
        &a,
        serde_json::json!({"command": "delete", "path": "/memories/kept.md"}),
    )
    .await;
    assert!(matches!(r, Err(Error::Retention { .. })), "{r:?}");
    let view = run(
        &s,
        &a,
        serde_json::json!({"command": "view", "path": "/memories/kept.md"}),
    )
    .await
    .unwrap();
    assert!(view.contains("the locker code"), "the file is still there");
    let m = s.memory_store().unwrap();
    assert_eq!(
        found(&**m, &a, "locker", false).await.len(),
        1,
        "and so is its index"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_memory_refuses_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let policy = AppPolicy {
        consent_required: true,
        ..AppPolicy::default()
    };
    let s = build(config(dir.path(), policy)).await;
    let a = alice();
    // A consent to artifacts only: the file's index is memory, so the
    // file is refused and nothing of it is kept.
    s.record_consent(
        &a,
        NewConsent {
            consent_id: "c1".into(),
            scope: ConsentScope::Artifacts,
        },
        hippocamp_core::deadline::Caller::default(),
    )
    .await
    .unwrap();
    let r = run(&s, &a, serde_json::json!({"command": "create", "path": "/memories/x.md", "file_text": "a secret plan"})).await;
    assert!(matches!(r, Err(Error::ConsentRequired(_))), "{r:?}");
    let scope = ArtifactScope::User {
        app: a.app().clone(),
        user: a.user().clone(),
    };
    let r = s
        .artifacts
        .head(
            &scope,
            &ArtifactName::new(".memories/x.md").unwrap(),
            Selector::Latest,
            &call(),
        )
        .await;
    assert!(matches!(r, Err(Error::NotFound(_))), "{r:?}");
    // Other artifacts are stored as before.
    put(
        &s,
        &scope,
        &ArtifactName::new("plain.txt").unwrap(),
        "plain",
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_entry_expires_with_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let policy = AppPolicy {
        artifact_ttl_ms: Some(60_000),
        ..AppPolicy::default()
    };
    let s = build(config(dir.path(), policy)).await;
    let a = alice();
    let scope = ArtifactScope::User {
        app: a.app().clone(),
        user: a.user().clone(),
    };
    let meta = put(
        &s,
        &scope,
        &ArtifactName::new(".memories/t.md").unwrap(),
        "short lived",
    )
    .await
    .unwrap();
    let m = s.memory_store().unwrap();
    let e = m
        .get_entry(
            &a,
            &file(".memories/t.md", 1).entry_id(&a).unwrap(),
            &call(),
        )
        .await
        .unwrap();
    assert_eq!(
        e.obligations.expires_at_ms,
        Some(meta.created_at_ms + 60_000)
    );
}

/// The export of `scope`.
async fn exported(s: &Services, scope: &MemoryScope) -> Vec<u8> {
    let mut rx = hippocamp_services::export::export(
        s,
        scope.clone(),
        call(),
        hippocamp_services::export::Include { artifacts: false },
    );
    let mut out = Vec::new();
    while let Some(line) = rx.recv().await {
        out.extend_from_slice(line.unwrap().as_bytes());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_brings_a_file_entry_back_only_next_to_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let s = build(config(&dir.path().join("a"), AppPolicy::default())).await;
    let a = alice();
    run(&s, &a, serde_json::json!({"command": "create", "path": "/memories/m.md", "file_text": "the harbour ferry"}))
        .await
        .unwrap();
    s.memory_store()
        .unwrap()
        .add_entry(
            &a,
            NewEntry::new("a plain note"),
            &WriteOptions::new(call()),
        )
        .await
        .unwrap();
    let file = exported(&s, &a).await;
    // A deployment without the file: the note is restored, its index is
    // refused.
    let fresh = build(config(&dir.path().join("b"), AppPolicy::default())).await;
    let r = hippocamp_services::restore::restore(&fresh, &a, &file[..], &call())
        .await
        .unwrap();
    assert_eq!((r.entries.imported, r.refused.entries), (1, 1), "{r:?}");
    let m = fresh.memory_store().unwrap();
    assert!(found(&**m, &a, "harbour", true).await.is_empty());
    // With the file stored there, its entry is the one the file has.
    let other = build(config(&dir.path().join("c"), AppPolicy::default())).await;
    run(&other, &a, serde_json::json!({"command": "create", "path": "/memories/m.md", "file_text": "the harbour ferry"}))
        .await
        .unwrap();
    let r = hippocamp_services::restore::restore(&other, &a, &file[..], &call())
        .await
        .unwrap();
    assert_eq!(
        (r.entries.imported, r.entries.existing, r.refused.entries),
        (1, 1, 0),
        "{r:?}"
    );
}
