//! Readers for the evaluation data hippocamp is measured on.
//!
//! The data lives outside the repository (`../shared/data`, or the folder
//! named by `HIPPOCAMP_DATA_DIR`) and is never copied into it. This crate
//! only parses: LoCoMo conversations and questions ([`locomo`]), the
//! Cranfield collection ([`cranfield`]), a deterministic corpus of
//! realistic sentences for benchmarks ([`corpus`]), and generated
//! code-heavy turns ([`synthetic`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::{Path, PathBuf};

pub mod corpus;
pub mod cranfield;
pub mod facts;
pub mod locomo;
pub mod synthetic;

/// A dataset could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not valid JSON of the expected shape.
    #[error("cannot parse {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A file breaks the dataset's format.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

pub(crate) fn read(path: &Path) -> Result<String, DatasetError> {
    std::fs::read_to_string(path).map_err(|source| DatasetError::Io {
        path: path.to_owned(),
        source,
    })
}

/// The shared data folder: `HIPPOCAMP_DATA_DIR` if set, else
/// `../shared/data` next to the workspace, if it exists.
pub fn data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HIPPOCAMP_DATA_DIR") {
        return Some(PathBuf::from(dir));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = workspace.join("../shared/data");
    dir.is_dir().then(|| dir.canonicalize().unwrap_or(dir))
}
