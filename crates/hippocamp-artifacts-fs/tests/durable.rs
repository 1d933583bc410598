//! Filesystem-specific behaviour: restarts, crash residue and repair,
//! tampering, the root and its lock, concurrency on one name.

#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector, PageRequest,
    PutOptions, Selector,
};
use hippocamp_artifacts_fs::{FsArtifacts, FsOptions, RepairCursor, RepairOptions};
use hippocamp_core::{CallOptions, Error};

fn scope() -> ArtifactScope {
    ArtifactScope::session("app", "u1", "s1").unwrap()
}

fn name(n: &str) -> ArtifactName {
    ArtifactName::new(n).unwrap()
}

fn c() -> CallOptions {
    CallOptions::default()
}

fn open(root: &Path) -> FsArtifacts {
    FsArtifacts::open(root, ArtifactLimits::default(), FsOptions::default()).unwrap()
}

fn root(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("data")
}

async fn put(s: &FsArtifacts, n: &str, data: &'static [u8]) -> u64 {
    s.put(&scope(), &name(n), Body::from(data), &PutOptions::default())
        .await
        .unwrap()
        .version
}

async fn read(s: &FsArtifacts, n: &str, v: u64) -> hippocamp_core::Result<Bytes> {
    s.get(&scope(), &name(n), Selector::Version(v), None, &c())
        .await?
        .bytes()
        .await
}

fn content_path(root: &Path, s: &FsArtifacts, n: &str, v: u64) -> PathBuf {
    let (dir, file) = s.content_file(&scope(), &name(n), v).unwrap();
    hippocamp_artifacts_fs::dir_path(root, dir).join(file)
}

#[tokio::test]
async fn versions_survive_restarts_and_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let root = root(&dir);
    {
        let s = open(&root);
        assert_eq!(put(&s, "a", b"one").await, 1);
    }
    let s = open(&root);
    assert_eq!(put(&s, "a", b"two").await, 2);
    assert_eq!(&read(&s, "a", 1).await.unwrap()[..], b"one");
    let page = s
        .list_versions(&scope(), &name("a"), &PageRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(
        page.items.iter().map(|m| m.version).collect::<Vec<_>>(),
        vec![1, 2]
    );
    s.delete(&scope(), &name("a"), DeleteSelector::Latest, &c())
        .await
        .unwrap();
    s.delete(&scope(), &name("a"), DeleteSelector::All, &c())
        .await
        .unwrap();
    drop(s);
    let s = open(&root);
    assert_eq!(put(&s, "a", b"three").await, 3);
    // Deleted versions' files are gone.
    let files: usize = (0..=255u8)
        .map(|d| {
            std::fs::read_dir(hippocamp_artifacts_fs::dir_path(&root, d))
                .unwrap()
                .count()
        })
        .sum();
    assert_eq!(files, 1);
    let st = s.status().await.unwrap();
    assert_eq!((st.artifacts, st.bytes), (Some(1), Some(5)));
}

#[tokio::test]
async fn crash_residue_is_invisible_and_repair_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = root(&dir);
    let s = open(&root);
    put(&s, "doc", b"v1").await;
    // What a killed put or delete leaves: a staged file, an unreferenced
    // final file; and a file that is not ours at all.
    std::fs::write(
        root.join("objects/0a/0a000000000000000000000000000001.tmp"),
        b"partial",
    )
    .unwrap();
    std::fs::write(
        root.join("objects/7f/7f000000000000000000000000000002"),
        b"orphan",
    )
    .unwrap();
    std::fs::write(root.join("objects/7f/notes.txt"), b"not ours").unwrap();
    let page = s
        .list_versions(&scope(), &name("doc"), &PageRequest::default(), &c())
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    // Young files are kept under the default grace.
    let r = s.repair(RepairOptions::default()).await.unwrap();
    assert_eq!(
        (r.scanned, r.removed, r.kept_young, r.referenced, r.unknown),
        (4, 0, 2, 1, 1)
    );
    assert!(r.complete());
    let r = s
        .repair(RepairOptions {
            min_age_ms: Some(0),
            ..RepairOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (r.removed, r.removed_bytes, r.referenced, r.corrupt_count),
        (2, 13, 1, 0)
    );
    assert!(
        !root
            .join("objects/0a/0a000000000000000000000000000001.tmp")
            .exists()
    );
    assert!(root.join("objects/7f/notes.txt").exists());
    assert_eq!(&read(&s, "doc", 1).await.unwrap()[..], b"v1");
    assert_eq!(put(&s, "doc", b"v2").await, 2);
}

#[tokio::test]
async fn repair_stops_at_its_limit_and_resumes_without_losing_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let root = root(&dir);
    let s = open(&root);
    for i in 0..5u8 {
        std::fs::write(
            root.join(format!(
                "objects/{i:02x}/{i:02x}0000000000000000000000000000ff.tmp"
            )),
            b"x",
        )
        .unwrap();
    }
    let mut total = 0;
    let mut resume: Option<RepairCursor> = None;
    let mut calls = 0;
    loop {
        let r = s
            .repair(RepairOptions {
                limit: 2,
                min_age_ms: Some(0),
                resume: resume.clone(),
                ..RepairOptions::default()
            })
            .await
            .unwrap();
        calls += 1;
        assert!(r.scanned <= 2);
        // Removals made before the limit are reported.
        assert_eq!(r.removed, r.scanned);
        total += r.removed;
        match r.next {
            Some(n) => resume = Some(n),
            None => break,
        }
    }
    assert_eq!(total, 5);
    assert_eq!(calls, 3);
    let bad = s
        .repair(RepairOptions {
            limit: 0,
            ..RepairOptions::default()
        })
        .await;
    assert!(matches!(bad, Err(Error::InvalidArgument { .. })));
    assert!(serde_json::from_str::<RepairOptions>(r#"{"limits": 3}"#).is_err());
}

#[tokio::test]
async fn tampering_is_detected_on_read_and_reported_by_repair() {
    let dir = tempfile::tempdir().unwrap();
    let root = root(&dir);
    let s = open(&root);
    put(&s, "flipped", b"hello world").await;
    put(&s, "short", b"hello world").await;
    put(&s, "gone", b"hello world").await;
    let p = content_path(&root, &s, "flipped", 1);
    std::fs::write(&p, b"hello WORLD").unwrap();
    std::fs::write(content_path(&root, &s, "short", 1), b"hello").unwrap();
    std::fs::remove_file(content_path(&root, &s, "gone", 1)).unwrap();
    for n in ["flipped", "short", "gone"] {
        let e = read(&s, n, 1).await.unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{n}: {e}");
    }
    let r = s
        .repair(RepairOptions {
            verify: true,
            ..RepairOptions::default()
        })
        .await
        .unwrap();
    assert_eq!(r.corrupt_count, 3, "{r:?}");
    let mut names: Vec<_> = r.corrupt.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, vec!["flipped", "gone", "short"]);
    // Nothing a row references was removed.
    assert!(p.exists());
    // Deleting a damaged version works.
    assert_eq!(
        s.delete(&scope(), &name("gone"), DeleteSelector::All, &c())
            .await
            .unwrap(),
        vec![1]
    );
}

#[tokio::test]
async fn the_root_must_be_a_real_absolute_directory_owned_by_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = root(&dir);
    let s = open(&root);
    let again = FsArtifacts::open(&root, ArtifactLimits::default(), FsOptions::default());
    assert!(matches!(again, Err(Error::Unavailable(_))));
    drop(s);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let e = FsArtifacts::open(&link, ArtifactLimits::default(), FsOptions::default()).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
    let e = FsArtifacts::open(
        "relative/root",
        ArtifactLimits::default(),
        FsOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { .. }), "{e}");
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(FsArtifacts::open(&file, ArtifactLimits::default(), FsOptions::default()).is_err());
    let bad = FsOptions {
        checkpoint_records: 0,
        ..FsOptions::default()
    };
    assert!(matches!(
        FsArtifacts::open(&root, ArtifactLimits::default(), bad),
        Err(Error::InvalidConfig { .. })
    ));
    assert!(serde_json::from_str::<FsOptions>(r#"{"grace": 1}"#).is_err());
    // Created directories and files are private.
    let s = open(&root);
    put(&s, "p", b"x").await;
    let mode = std::fs::metadata(content_path(&root, &s, "p", 1))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0);
    let caps = s.capabilities();
    assert!(caps.durable);
    assert_eq!(caps.backend, "filesystem");
    assert!(
        caps.limits
            .iter()
            .any(|l| l.name == "recovery_grace_ms" && l.value == 300_000)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_to_one_name_get_every_version_once() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open(&root(&dir)));
    let mut tasks = Vec::new();
    for i in 0..40u8 {
        let s = Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let meta = s
                .put(
                    &scope(),
                    &name("shared"),
                    Body::from(vec![i; 100]),
                    &PutOptions::default(),
                )
                .await
                .unwrap();
            (meta.version, i)
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        let (v, i) = t.await.unwrap();
        assert_eq!(
            read(&s, "shared", v).await.unwrap(),
            Bytes::from(vec![i; 100])
        );
        versions.push(v);
    }
    versions.sort_unstable();
    assert_eq!(versions, (1..=40).collect::<Vec<_>>());
}

#[tokio::test]
async fn many_scopes_names_and_versions_have_no_lifetime_ceiling() {
    // The reference caps scopes, names and versions per root forever
    // (max_scan_entries / 2 or / 3); here only live quotas apply.
    let dir = tempfile::tempdir().unwrap();
    let limits = ArtifactLimits {
        max_scope_artifacts: 2,
        ..ArtifactLimits::default()
    };
    let s = FsArtifacts::open(root(&dir), limits, FsOptions::default()).unwrap();
    for round in 0..20u64 {
        let n = name(&format!("n{round}"));
        let v = s
            .put(&scope(), &n, Body::from(&b"x"[..]), &PutOptions::default())
            .await
            .unwrap();
        assert_eq!(v.version, 1);
        s.delete(&scope(), &n, DeleteSelector::All, &c())
            .await
            .unwrap();
        let other = ArtifactScope::user("app", &format!("user{round}")).unwrap();
        s.put(&other, &n, Body::from(&b"y"[..]), &PutOptions::default())
            .await
            .unwrap();
    }
    for _ in 0..20 {
        s.put(
            &scope(),
            &name("v"),
            Body::from(&b"x"[..]),
            &PutOptions::default(),
        )
        .await
        .unwrap();
        s.delete(&scope(), &name("v"), DeleteSelector::Latest, &c())
            .await
            .unwrap();
    }
    assert_eq!(
        s.put(
            &scope(),
            &name("v"),
            Body::from(&b"x"[..]),
            &PutOptions::default()
        )
        .await
        .unwrap()
        .version,
        21
    );
}

#[test]
fn a_store_reopens_as_soon_as_its_puts_returned() {
    // A put's halves run on other threads; once it has returned, none of
    // them may still hold the catalog (its file lock would refuse the
    // reopen). Both runtime flavours: on a current-thread one both halves
    // run on the blocking pool.
    for multi in [false, true] {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = root(&dir);
        rt.block_on(async {
            for i in 1..=40u64 {
                let s = FsArtifacts::open(&root, ArtifactLimits::default(), FsOptions::default())
                    .unwrap_or_else(|e| panic!("reopen {i} (multi-thread: {multi}): {e}"));
                assert_eq!(put(&s, "again", b"x").await, i);
            }
        });
    }
}
