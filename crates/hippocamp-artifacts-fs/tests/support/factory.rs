//! A conformance factory of filesystem stores in temporary directories.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hippocamp_artifacts::conformance::ArtifactFactory;
use hippocamp_artifacts::{ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore};
use hippocamp_artifacts_fs::{FsArtifacts, FsOptions};
use parking_lot::Mutex;

/// Opens stores in fresh temporary directories (kept until the factory
/// is dropped) with small checkpoint intervals, so checkpoints happen.
#[derive(Debug, Default)]
pub struct FsFactory {
    dirs: Mutex<Vec<tempfile::TempDir>>,
    last: Mutex<Option<(PathBuf, ArtifactLimits, Arc<FsArtifacts>)>>,
}

pub fn options() -> FsOptions {
    FsOptions {
        checkpoint_records: 5,
        ..FsOptions::default()
    }
}

/// Whether an open failed only because a dropped store's last tasks
/// still hold the directory (its lock or its catalog), which passes.
fn still_held(e: &hippocamp_core::Error) -> bool {
    matches!(e, hippocamp_core::Error::Unavailable(m)
        if m.contains("in use by another process") || m.contains("already open"))
}

/// Opens `root`, retrying while a dropped store's last tasks still hold
/// the directory; any other failure fails the test at once.
pub fn open_retrying(root: &std::path::Path, limits: &ArtifactLimits) -> FsArtifacts {
    let started = Instant::now();
    loop {
        match FsArtifacts::open(root, limits.clone(), options()) {
            Ok(s) => return s,
            Err(e) if still_held(&e) && started.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("cannot reopen {}: {e}", root.display()),
        }
    }
}

#[async_trait]
impl ArtifactFactory for FsFactory {
    async fn open(&self, limits: ArtifactLimits) -> Arc<dyn ArtifactStore> {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("artifacts");
        let store = Arc::new(FsArtifacts::open(&root, limits.clone(), options()).unwrap());
        self.dirs.lock().push(dir);
        *self.last.lock() = Some((root, limits, Arc::clone(&store)));
        store
    }

    async fn corrupt_last(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
        offset: u64,
    ) -> bool {
        let Some((root, _, store)) = self.last.lock().clone() else {
            return false;
        };
        let Some((dir, file)) = store.content_file(scope, name, version) else {
            return false;
        };
        let path = hippocamp_artifacts_fs::dir_path(&root, dir).join(file);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let mut b = [0u8; 1];
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.read_exact(&mut b).unwrap();
        b[0] ^= 0x5a;
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(&b).unwrap();
        true
    }

    async fn reopen(&self, store: Arc<dyn ArtifactStore>) -> Option<Arc<dyn ArtifactStore>> {
        drop(store);
        let (root, limits, last) = self.last.lock().take()?;
        drop(last);
        let reopened = Arc::new(
            tokio::task::spawn_blocking({
                let root = root.clone();
                let limits = limits.clone();
                move || open_retrying(&root, &limits)
            })
            .await
            .unwrap(),
        );
        *self.last.lock() = Some((root, limits, Arc::clone(&reopened)));
        Some(reopened)
    }
}
