//! Configurable memory limits with their defaults and ceilings.
//!
//! Every limit is explicit: it has a documented default, an allowed range
//! (min ..= ceiling), and is reported by `capabilities()` through
//! `describe`. Every table of limits (memory, artifacts, the stores'
//! options, HTTP, embedding) is written once with [`limit_table!`], which
//! generates the struct, its defaults, the range check and the description
//! from it, so they cannot drift apart.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Problem, Result};
use crate::ident::{MAX_ID_BYTES, MAX_IDEMPOTENCY_KEY_BYTES};
use crate::json::JsonLimits;

/// One limit as reported by `capabilities()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LimitInfo {
    /// The configuration key.
    pub name: String,
    /// The value in force.
    pub value: u64,
    /// The default value.
    pub default: u64,
    /// The smallest allowed value.
    pub min: u64,
    /// The largest allowed value (the ceiling).
    pub max: u64,
    /// What it bounds.
    pub description: String,
    /// Whether it can be configured (fixed limits are part of the contract).
    pub configurable: bool,
}

impl LimitInfo {
    /// A limit fixed by the contract (not configurable): its value is its
    /// default and its ceiling.
    pub fn fixed(name: &str, value: u64, min: u64, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            value,
            default: value,
            min,
            max: value,
            description: description.to_owned(),
            configurable: false,
        }
    }
}

/// Declares a table of `u64` limits once; the struct, its defaults, the
/// range check and the `capabilities()` description are generated from
/// it, so they cannot drift apart. Rows: `field: default D, min A, max B,
/// "description";`. `prefix` is put before a key in errors (`"http."`).
/// The struct refuses unknown keys and fills missing ones with defaults.
#[macro_export]
macro_rules! limit_table {
    ($(#[$doc:meta])* $vis:vis struct $name:ident, prefix $prefix:literal {
        $( $(#[$fdoc:meta])* $field:ident: default $default:expr, min $min:expr, max $max:expr, $desc:literal; )*
    }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(deny_unknown_fields, default)]
        $vis struct $name {
            $( $(#[$fdoc])* pub $field: u64, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl $name {
            /// The configuration keys, in table order.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Checks every value against its range (relations between
            /// values are the type's own `validate`).
            pub fn check_ranges(&self) -> $crate::Result<()> {
                $(
                    $crate::error::check_range(
                        concat!($prefix, stringify!($field)),
                        self.$field,
                        $min,
                        $max,
                    )?;
                )*
                Ok(())
            }

            /// Every limit with its value, default and range.
            pub fn describe(&self) -> Vec<$crate::LimitInfo> {
                vec![$(
                    $crate::LimitInfo {
                        name: concat!($prefix, stringify!($field)).to_owned(),
                        value: self.$field,
                        default: $default,
                        min: $min,
                        max: $max,
                        description: $desc.to_owned(),
                        configurable: true,
                    },
                )*]
            }
        }
    };
}

/// The page size a listing gets: `requested`, or `default` when absent;
/// 1 ..= `max`.
pub fn page_limit(requested: Option<u64>, default: u64, max: u64) -> Result<usize> {
    let l = requested.unwrap_or(default);
    if l == 0 || l > max {
        return Err(Error::invalid(
            crate::Field::Limit,
            Problem::OutOfRange {
                value: i128::from(l),
                min: 1,
                max: i128::from(max),
            },
        ));
    }
    Ok(usize::try_from(l).unwrap_or(usize::MAX))
}

limit_table! {
    /// Limits of a memory store. Defaults follow the reference service; the
    /// quota tiers (`*_per_scope`, `*_total`) are both always enforced.
    pub struct MemoryLimits, prefix "" {
        /// Bytes of one entry's content.
        max_content_bytes: default 65_536, min 1, max 1_048_576,
            "bytes of one entry's content";
        /// Bytes of one entry's metadata encoded as JSON.
        max_metadata_bytes: default 16_384, min 1, max 262_144,
            "bytes of one entry's metadata (or a filter) encoded as JSON";
        /// Nesting depth of metadata (the top object is depth 0).
        max_metadata_depth: default 8, min 1, max 32,
            "nesting depth of metadata and filters (the top object is depth 0)";
        /// JSON nodes of metadata (each scalar 1, each container 1 + children).
        max_metadata_nodes: default 512, min 1, max 100_000,
            "JSON nodes of metadata and filters (scalar 1, container 1 + children)";
        /// Bytes of a search query.
        max_query_bytes: default 4_096, min 1, max 65_536,
            "bytes of a search query";
        /// Hits one search may return.
        max_results: default 50, min 1, max 1_000,
            "hits one search may return (the default limit)";
        /// Bytes of hits one search may return.
        max_result_bytes: default 262_144, min 1, max 1_048_576,
            "bytes of hits one search may return (each hit counts content + JSON metadata + JSON provenance + 256)";
        /// Entries one listing page may return.
        max_page_entries: default 100, min 1, max 1_000,
            "entries one listing page may return (the default limit); a page also stops at max_result_bytes";
        /// Revisions of one entry kept (the current one included).
        max_revisions: default 16, min 1, max 1_000,
            "revisions of one entry kept, the current one included; a correction beyond it drops the oldest";
        /// Events in one `add_events` call.
        max_events_per_request: default 1_000, min 1, max 10_000,
            "events in one add_events call";
        /// Entries in one exact scope.
        max_entries_per_scope: default 100_000, min 1, max 10_000_000,
            "entries in one (app, user) scope";
        /// Stored bytes in one exact scope.
        max_bytes_per_scope: default 268_435_456, min 1, max 10_737_418_240,
            "stored bytes in one (app, user) scope";
        /// Entries in the whole store.
        max_entries_total: default 10_000_000, min 1, max 1_000_000_000,
            "entries across every scope of the store";
        /// Stored bytes in the whole store.
        max_bytes_total: default 17_179_869_184, min 1, max 1_099_511_627_776,
            "stored bytes across every scope of the store";
        /// Timeout of a call that gives none, in milliseconds.
        call_timeout_ms: default 5_000, min 1, max 60_000,
            "timeout in milliseconds of a call that gives none";
    }
}

impl MemoryLimits {
    /// Checks every range and the relations between limits.
    pub fn validate(&self) -> Result<()> {
        self.check_ranges()?;
        if self.max_result_bytes < self.max_content_bytes {
            return Err(Error::config(
                "max_result_bytes",
                Problem::Relation("max_result_bytes must be at least max_content_bytes"),
            ));
        }
        if self.max_entries_per_scope > self.max_entries_total {
            return Err(Error::config(
                "max_entries_per_scope",
                Problem::Relation("max_entries_per_scope must not exceed max_entries_total"),
            ));
        }
        if self.max_bytes_per_scope > self.max_bytes_total {
            return Err(Error::config(
                "max_bytes_per_scope",
                Problem::Relation("max_bytes_per_scope must not exceed max_bytes_total"),
            ));
        }
        Ok(())
    }

    /// Bounds for metadata and filters.
    pub fn json(&self) -> JsonLimits {
        JsonLimits {
            max_bytes: to_usize(self.max_metadata_bytes),
            max_depth: to_usize(self.max_metadata_depth),
            max_nodes: to_usize(self.max_metadata_nodes),
        }
    }

    /// The timeout of a call that gives none.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// Configurable limits followed by the fixed ones of the contract.
    pub fn describe_all(&self) -> Vec<LimitInfo> {
        let mut all = self.describe();
        all.extend(fixed_limits());
        all
    }
}

/// Most event ids one entry's provenance may list.
pub const MAX_PROVENANCE_EVENT_IDS: usize = 1_000;

/// Most neighbours a search hit's context may ask for on each side.
pub const MAX_CONTEXT_TURNS: u32 = 5;

/// Limits that are part of the contract rather than configuration.
pub fn fixed_limits() -> Vec<LimitInfo> {
    let fixed = LimitInfo::fixed;
    vec![
        fixed(
            "max_id_bytes",
            MAX_ID_BYTES as u64,
            1,
            "bytes of an app name, user id, session id, event id or author",
        ),
        fixed(
            "max_idempotency_key_bytes",
            MAX_IDEMPOTENCY_KEY_BYTES as u64,
            1,
            "bytes of an idempotency key",
        ),
        fixed(
            "max_provenance_event_ids",
            MAX_PROVENANCE_EVENT_IDS as u64,
            0,
            "event ids listed in one entry's provenance",
        ),
        fixed(
            "max_timeout_ms",
            60_000,
            1,
            "longest timeout a call may give (the shortest is 1 ms)",
        ),
    ]
}

/// Converts a validated limit to `usize`, saturating on 32-bit targets.
pub fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_reported() {
        let l = MemoryLimits::default();
        l.validate().unwrap();
        let d = l.describe_all();
        assert!(
            d.iter()
                .any(|i| i.name == "max_entries_per_scope" && i.value == 100_000)
        );
        assert!(
            d.iter()
                .any(|i| i.name == "max_bytes_total" && i.value == 16 << 30)
        );
        assert_eq!(MemoryLimits::KEYS.len(), l.describe().len());
    }

    #[test]
    fn ranges_and_relations_are_checked() {
        let l = MemoryLimits {
            max_results: 0,
            ..MemoryLimits::default()
        };
        assert!(matches!(
            l.validate(),
            Err(Error::InvalidConfig { ref key, problem: Problem::OutOfRange { .. } }) if key == "max_results"
        ));
        let l = MemoryLimits {
            max_content_bytes: 1_048_576,
            ..MemoryLimits::default()
        };
        assert!(matches!(
            l.validate(),
            Err(Error::InvalidConfig { ref key, problem: Problem::Relation(_) }) if key == "max_result_bytes"
        ));
        let l = MemoryLimits {
            max_entries_per_scope: 11,
            max_entries_total: 10,
            ..MemoryLimits::default()
        };
        assert!(l.validate().is_err());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = serde_json::from_str::<MemoryLimits>(r#"{"max_result": 5}"#).unwrap_err();
        assert!(err.to_string().contains("max_result"));
        let ok: MemoryLimits = serde_json::from_str(r#"{"max_results": 5}"#).unwrap();
        assert_eq!(ok.max_results, 5);
        assert_eq!(ok.max_content_bytes, 65_536);
    }
}
