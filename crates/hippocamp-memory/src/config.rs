//! Store configuration and the capability report built from it.

use std::sync::Arc;

use hippocamp_core::{Clock, Error, MemoryLimits, Problem, Result};
use hippocamp_search::{Bm25Params, FusionParams, NeighbourParams, TimeParams};
use serde::{Deserialize, Serialize};

use crate::store::{CONTRACT_VERSION, Capabilities, SearchCapabilities};

/// Configuration every memory store accepts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Limits and quotas.
    pub limits: MemoryLimits,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// How hybrid search fuses BM25 and vector scores.
    pub fusion: FusionParams,
    /// Session cohesion in lexical search: a turn is supported by its
    /// neighbours' scores (on by default).
    pub neighbours: NeighbourParams,
    /// Time in lexical search: "when" questions favour turns that state a
    /// time, and a question naming a time favours turns said then.
    pub time: TimeParams,
    /// Long entries indexed as bounded passages, each ranked on its own;
    /// an entry ranks by its best (on by default).
    pub passages: hippocamp_search::PassageParams,
    /// Where the store reads "now" for expiry and retention (the system
    /// clock unless a test or the services bundle installs another).
    #[serde(skip)]
    pub clock: StoreClock,
}

/// The clock of a store's configuration: not configuration data, so it
/// compares equal to any other and is never serialised.
#[derive(Clone)]
pub struct StoreClock(pub Arc<dyn Clock>);

impl StoreClock {
    /// Milliseconds since the Unix epoch, by this clock.
    pub fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }
}

impl Default for StoreClock {
    fn default() -> Self {
        Self(hippocamp_core::time::system_clock())
    }
}

impl PartialEq for StoreClock {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for StoreClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl MemoryConfig {
    /// Checks every value.
    pub fn validate(&self) -> Result<()> {
        self.limits.validate()?;
        self.bm25.validate().map_err(|name| {
            Error::config(
                format!("bm25.{name}"),
                Problem::Malformed(match name {
                    "k1" => "k1 must be within 0..=10".into(),
                    "k3" => "k3 must be within 0..=1000".into(),
                    _ => "b must be within 0..=1".into(),
                }),
            )
        })?;
        self.fusion.validate().map_err(|name| {
            Error::config(
                format!("fusion.{name}"),
                Problem::Malformed(match name {
                    "dense_weight" => "dense_weight must be within 0..=1".into(),
                    "depth" => "depth must be within 1..=1000".into(),
                    _ => "rrf_k must be within 1..=1000".into(),
                }),
            )
        })?;
        self.neighbours.validate().map_err(|name| {
            Error::config(
                format!("neighbours.{name}"),
                Problem::Malformed(match name {
                    "weight" => "weight must be within 0..=1".into(),
                    _ => "depth must be within 1..=1000".into(),
                }),
            )
        })?;
        self.passages.validate().map_err(|_| {
            Error::config(
                "passages.max_bytes",
                Problem::OutOfRange {
                    value: self.passages.max_bytes as i128,
                    min: hippocamp_search::passages::MIN_PASSAGE_BYTES as i128,
                    max: hippocamp_search::passages::MAX_PASSAGE_BYTES as i128,
                },
            )
        })?;
        self.time.validate().map_err(|_| {
            Error::config(
                "time.weight",
                Problem::Malformed("weight must be within 0..=1".into()),
            )
        })
    }

    /// The capability report of a store with this configuration.
    pub fn capabilities(&self, backend: &str, durable: bool) -> Capabilities {
        Capabilities {
            contract_version: CONTRACT_VERSION,
            backend: backend.to_owned(),
            durable,
            scope: "app_user".to_owned(),
            search: SearchCapabilities {
                modes: vec!["lexical".to_owned()],
                bm25: self.bm25,
                analyzer: "english: unicode words, lowercase, stopwords, snowball stemming"
                    .to_owned(),
                filter_operators: [
                    "$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists", "$and",
                    "$or", "$not",
                ]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
                embedder: None,
                fusion: self.fusion,
                neighbours: self.neighbours,
                time: self.time,
                passages: self.passages,
                max_context_turns: hippocamp_core::limits::MAX_CONTEXT_TURNS,
                rerank: None,
            },
            idempotent_ingestion: true,
            incremental_events: true,
            erasure_epoch_fencing: true,
            async_ingestion: false,
            delete: vec!["entry".to_owned(), "session".to_owned(), "user".to_owned()],
            per_scope_quota: true,
            obligations: true,
            listing: true,
            global_quota: true,
            limits: {
                let mut l = self.limits.describe_all();
                l.push(crate::erasure::describe());
                l.extend(crate::lineage::describe());
                l
            },
            routing: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_bm25_is_a_config_error() {
        let c = MemoryConfig {
            bm25: Bm25Params {
                k1: 20.0,
                ..Bm25Params::default()
            },
            ..MemoryConfig::default()
        };
        assert!(
            matches!(c.validate(), Err(Error::InvalidConfig { ref key, .. }) if key == "bm25.k1")
        );
        assert!(MemoryConfig::default().validate().is_ok());
        let c = MemoryConfig {
            neighbours: hippocamp_search::NeighbourParams {
                weight: 2.0,
                ..hippocamp_search::NeighbourParams::default()
            },
            ..MemoryConfig::default()
        };
        assert!(
            matches!(c.validate(), Err(Error::InvalidConfig { ref key, .. }) if key == "neighbours.weight")
        );
        let c = MemoryConfig {
            time: hippocamp_search::TimeParams {
                weight: -0.5,
                ..hippocamp_search::TimeParams::default()
            },
            ..MemoryConfig::default()
        };
        assert!(
            matches!(c.validate(), Err(Error::InvalidConfig { ref key, .. }) if key == "time.weight")
        );
        // On by default, and reported.
        let caps = MemoryConfig::default().capabilities("x", false);
        assert!(caps.search.time.enabled);
        assert!(caps.search.neighbours.enabled);
        assert!((caps.search.neighbours.weight - 0.5).abs() < f32::EPSILON);
        assert!(serde_json::from_str::<MemoryConfig>(r#"{"limit": {}}"#).is_err());
    }
}
