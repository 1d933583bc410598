//! Content files on the simulated disk of `hippocamp_durable::sim`: a
//! directory tree whose entries, like file bytes, are live until their
//! directory is synced. A power cut keeps each directory's synced entries
//! (when tearing, sometimes its live ones instead, as a file system may
//! commit on its own) and each file's synced bytes (plus, when tearing, a
//! prefix of its unsynced writes). A new file's name, like any entry, is
//! lost in a cut unless its directory was synced. Content and directory
//! syncs are counted separately.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use hippocamp_artifacts::ArtifactLimits;
use hippocamp_artifacts_fs::{
    CatalogSource, FileOps, FsArtifacts, FsOptions, Listed, ReadFile, WriteFile,
};
use hippocamp_durable::sim::{Device, Extra, Image, PowerLoss};
use rand::Rng as _;
use rand::rngs::StdRng;

#[derive(Debug, Clone, Default)]
struct SimDir {
    live: BTreeMap<String, (u64, SystemTime)>,
    durable: BTreeMap<String, (u64, SystemTime)>,
}

/// The simulated content directories.
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    inodes: HashMap<u64, Device>,
    next_inode: u64,
    dirs: BTreeMap<u8, SimDir>,
    /// Content-file syncs so far.
    pub content_syncs: u64,
    /// Directory syncs so far.
    pub dir_syncs: u64,
}

impl Extra for SimFs {
    fn surviving(&self, tear: bool, rng: &mut StdRng) -> Self {
        let mut out = SimFs {
            next_inode: self.next_inode,
            ..SimFs::default()
        };
        for (d, dir) in &self.dirs {
            let entries = if tear && rng.random_bool(0.5) {
                &dir.live
            } else {
                &dir.durable
            };
            for (name, (inode, created)) in entries {
                if let Some(dev) = self.inodes.get(inode) {
                    out.inodes
                        .entry(*inode)
                        .or_insert_with(|| Device::with(dev.surviving(tear, rng)));
                    let e = out.dirs.entry(*d).or_default();
                    e.live.insert(name.clone(), (*inode, *created));
                    e.durable.insert(name.clone(), (*inode, *created));
                }
            }
        }
        out
    }
}

/// [`FileOps`] on the simulated disk.
#[derive(Debug, Clone)]
pub struct SimFiles(pub PowerLoss<SimFs>);

/// A file being written.
struct SimWriter {
    disk: PowerLoss<SimFs>,
    inode: u64,
    dir: u8,
}

impl WriteFile for SimWriter {
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.disk
            .extra(|fs| fs.inodes.get_mut(&self.inode).map(|d| d.append(data)));
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        self.disk.extra_sync(|fs| {
            fs.content_syncs += 1;
            if let Some(d) = fs.inodes.get_mut(&self.inode) {
                d.sync();
            }
        });
        Ok(())
    }
    fn sync_entry(self: Box<Self>) -> io::Result<()> {
        self.disk.extra_sync(|fs| {
            fs.dir_syncs += 1;
            let d = fs.dirs.entry(self.dir).or_default();
            d.durable = d.live.clone();
        });
        Ok(())
    }
}

#[derive(Debug)]
struct SimReader {
    disk: PowerLoss<SimFs>,
    inode: u64,
}

impl ReadFile for SimReader {
    fn size(&self) -> io::Result<u64> {
        Ok(self.disk.extra(|fs| {
            fs.inodes
                .get(&self.inode)
                .map_or(0, |d| d.live().len() as u64)
        }))
    }
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        self.disk.extra(|fs| {
            let live = fs
                .inodes
                .get(&self.inode)
                .map(Device::live)
                .unwrap_or_default();
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            live.get(start..start.saturating_add(len))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "short file"))
        })
    }
}

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such file")
}

impl FileOps for SimFiles {
    fn create(&self, dir: u8, name: &str) -> io::Result<Box<dyn WriteFile>> {
        let inode = self.0.extra(|fs| {
            if fs.dirs.get(&dir).is_some_and(|d| d.live.contains_key(name)) {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
            }
            fs.next_inode += 1;
            let inode = fs.next_inode;
            fs.inodes.insert(inode, Device::default());
            fs.dirs
                .entry(dir)
                .or_default()
                .live
                .insert(name.to_owned(), (inode, SystemTime::now()));
            Ok(inode)
        })?;
        Ok(Box::new(SimWriter {
            disk: self.0.clone(),
            inode,
            dir,
        }))
    }

    fn open(&self, dir: u8, name: &str) -> io::Result<Box<dyn ReadFile>> {
        let inode = self
            .0
            .extra(|fs| {
                fs.dirs
                    .get(&dir)
                    .and_then(|d| d.live.get(name))
                    .map(|e| e.0)
            })
            .ok_or_else(not_found)?;
        Ok(Box::new(SimReader {
            disk: self.0.clone(),
            inode,
        }))
    }

    fn remove(&self, dir: u8, name: &str) -> io::Result<()> {
        self.0
            .extra(|fs| fs.dirs.get_mut(&dir).and_then(|d| d.live.remove(name)))
            .map(drop)
            .ok_or_else(not_found)
    }

    fn list(&self, dir: u8) -> io::Result<Vec<Listed>> {
        Ok(self.0.extra(|fs| {
            fs.dirs.get(&dir).map_or_else(Vec::new, |d| {
                d.live
                    .iter()
                    .map(|(name, (inode, created))| Listed {
                        name: name.clone(),
                        regular: true,
                        len: fs.inodes.get(inode).map_or(0, |i| i.live().len() as u64),
                        modified: *created,
                    })
                    .collect()
            })
        }))
    }
}

/// Opens the store on the disk (catalog, log and content all simulated).
pub fn open(
    disk: &PowerLoss<SimFs>,
    limits: ArtifactLimits,
    options: FsOptions,
) -> hippocamp_core::Result<FsArtifacts> {
    FsArtifacts::open_with(
        Arc::new(SimFiles(disk.clone())),
        CatalogSource::Backend(Box::new(disk.backend())),
        Box::new(disk.wal()),
        limits,
        options,
    )
}

/// A disk holding a freshly created, cleanly closed store.
pub fn created(limits: &ArtifactLimits, options: &FsOptions) -> Image<SimFs> {
    let d = PowerLoss::<SimFs>::new();
    drop(open(&d, limits.clone(), options.clone()).unwrap());
    d.surviving()
}

/// (content syncs, directory syncs) so far.
pub fn sync_counts(disk: &PowerLoss<SimFs>) -> (u64, u64) {
    disk.extra(|fs| (fs.content_syncs, fs.dir_syncs))
}
