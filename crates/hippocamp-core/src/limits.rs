//! Configurable memory limits with their defaults and ceilings.
//!
//! Every limit is explicit: it has a documented default, an allowed range
//! (1 ..= ceiling), and is reported by `capabilities()` through
//! [`MemoryLimits::describe`]. The table is written once, in the macro call
//! below, and the struct, its defaults, validation and description are all
//! generated from it so they cannot drift apart.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Problem, Result};
use crate::ident::{MAX_ID_BYTES, MAX_IDEMPOTENCY_KEY_BYTES};
use crate::json::JsonLimits;

/// One limit as reported by `capabilities()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

macro_rules! limits {
    ($(#[$doc:meta])* $name:ident {
        $( $(#[$fdoc:meta])* $field:ident: default $default:expr, max $max:expr, $desc:literal; )*
    }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
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

            fn check_ranges(&self) -> Result<()> {
                $(
                    if self.$field < 1 || self.$field > $max {
                        return Err(Error::config(
                            stringify!($field),
                            Problem::OutOfRange {
                                value: i128::from(self.$field),
                                min: 1,
                                max: i128::from($max as u64),
                            },
                        ));
                    }
                )*
                Ok(())
            }

            /// Every configurable limit with its value, default and range.
            pub fn describe(&self) -> Vec<LimitInfo> {
                vec![$(
                    LimitInfo {
                        name: stringify!($field).to_owned(),
                        value: self.$field,
                        default: $default,
                        min: 1,
                        max: $max,
                        description: $desc.to_owned(),
                        configurable: true,
                    },
                )*]
            }
        }
    };
}

limits! {
    /// Limits of a memory store. Defaults follow the reference service; the
    /// quota tiers (`*_per_scope`, `*_total`) are both always enforced.
    MemoryLimits {
        /// Bytes of one entry's content.
        max_content_bytes: default 65_536, max 1_048_576,
            "bytes of one entry's content";
        /// Bytes of one entry's metadata encoded as JSON.
        max_metadata_bytes: default 16_384, max 262_144,
            "bytes of one entry's metadata (or a filter) encoded as JSON";
        /// Nesting depth of metadata (the top object is depth 0).
        max_metadata_depth: default 8, max 32,
            "nesting depth of metadata and filters (the top object is depth 0)";
        /// JSON nodes of metadata (each scalar 1, each container 1 + children).
        max_metadata_nodes: default 512, max 100_000,
            "JSON nodes of metadata and filters (scalar 1, container 1 + children)";
        /// Bytes of a search query.
        max_query_bytes: default 4_096, max 65_536,
            "bytes of a search query";
        /// Hits one search may return.
        max_results: default 50, max 1_000,
            "hits one search may return (the default limit)";
        /// Bytes of hits one search may return.
        max_result_bytes: default 262_144, max 1_048_576,
            "bytes of hits one search may return (each hit counts content + JSON metadata + JSON provenance + 256)";
        /// Events in one `add_events` call.
        max_events_per_request: default 1_000, max 10_000,
            "events in one add_events call";
        /// Entries in one exact scope.
        max_entries_per_scope: default 100_000, max 10_000_000,
            "entries in one (app, user) scope";
        /// Stored bytes in one exact scope.
        max_bytes_per_scope: default 268_435_456, max 10_737_418_240,
            "stored bytes in one (app, user) scope";
        /// Entries in the whole store.
        max_entries_total: default 10_000_000, max 1_000_000_000,
            "entries across every scope of the store";
        /// Stored bytes in the whole store.
        max_bytes_total: default 17_179_869_184, max 1_099_511_627_776,
            "stored bytes across every scope of the store";
        /// Timeout of a call that gives none, in milliseconds.
        call_timeout_ms: default 5_000, max 60_000,
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

/// Limits that are part of the contract rather than configuration.
pub fn fixed_limits() -> Vec<LimitInfo> {
    let fixed = |name: &str, value: u64, min: u64, description: &str| LimitInfo {
        name: name.to_owned(),
        value,
        default: value,
        min,
        max: value,
        description: description.to_owned(),
        configurable: false,
    };
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
