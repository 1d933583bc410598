//! hippocamp's search engine: pure and I/O-free.
//!
//! - [`analyzer`]: text to terms (Unicode words, lowercase, English
//!   stopwords, Snowball stemming), shared by documents and queries;
//! - [`index`]: a per-scope inverted index with BM25 scoring, whose
//!   statistics are the scope's own;
//! - [`rank`]: deterministic, lazy ordering of scored candidates;
//! - [`neighbours`] and [`time`]: the lexical stages after BM25 (session
//!   cohesion, time in questions and turns);
//! - [`passages`]: long documents indexed as bounded passages.
//!
//! Stores own persistence and concurrency; this crate only computes. A
//! later vector stage produces [`rank::Candidate`]s too, and fusion combines
//! candidate lists before ranking, so adding it does not reshape this API.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod analyzer;
pub mod fusion;
pub mod index;
pub mod neighbours;
pub mod passages;
pub mod rank;
pub mod time;
pub mod vector;

pub use analyzer::{Analyzer, QueryTerm, TermFreqs};
pub use fusion::{Fused, FusionMethod, FusionParams, fuse};
pub use index::{Bm25Params, IndexStats, InvertedIndex, Matches, TermShare};
pub use neighbours::{NeighbourParams, Supported, cohesion};
pub use passages::PassageParams;
pub use rank::{Candidate, Ranked, best, best_first, best_set};
pub use time::{TimeParams, TimeQuery, states_time};
pub use vector::{VectorSet, dot};
