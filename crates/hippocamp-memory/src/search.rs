//! Search requests: validation shared by every store, and evaluation over a
//! scope held in memory.

use hippocamp_core::limits::to_usize;
use hippocamp_core::{Error, Field, Filter, Problem, Result};
use hippocamp_search::Analyzer;

use crate::config::MemoryConfig;
use crate::store::{SearchMode, SearchRequest};

/// A validated search.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedSearch {
    /// Distinct analysed query terms with their query frequencies (may be
    /// empty: a query of stopwords matches nothing).
    pub terms: Vec<hippocamp_search::QueryTerm>,
    /// The metadata filter.
    pub filter: Filter,
    /// Most hits.
    pub limit: usize,
    /// Byte budget of the hits.
    pub max_bytes: u64,
    /// The mode asked for (the store resolves the default).
    pub mode: Option<SearchMode>,
    /// The moment the search runs at (ms since the Unix epoch): entries
    /// expired by then are never hits. The store sets it from its clock.
    pub now_ms: u64,
    /// Whether each hit carries its explanation.
    pub explain: bool,
    /// Session cohesion (lexical search), from the store's configuration.
    pub neighbours: hippocamp_search::NeighbourParams,
    /// Turns of context before and after each hit.
    pub context: (usize, usize),
    /// What the query says about time.
    pub time: hippocamp_search::TimeQuery,
    /// The time stage's parameters, from the store's configuration.
    pub time_params: hippocamp_search::TimeParams,
    /// What relative times are read against (`None`: the search's now).
    pub reference_ms: Option<u64>,
    /// Which statuses and origins it returns.
    pub lineage: LineageQuery,
}

/// Which entries a search returns by lineage: current ones of every
/// origin unless it asks for more or fewer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineageQuery {
    /// Return superseded entries too.
    pub include_superseded: bool,
    /// Return merged entries too.
    pub include_merged: bool,
    /// Only these origins (empty: all).
    pub origins: Vec<crate::lineage::Origin>,
}

impl PreparedSearch {
    /// Whether lexical search runs its later stages (cohesion, time).
    pub fn staged(&self) -> bool {
        (self.neighbours.enabled && self.neighbours.weight > 0.0) || self.timed()
    }

    /// Whether the time stage has something to do for this query.
    pub fn timed(&self) -> bool {
        self.time_params.enabled && self.time_params.weight > 0.0 && !self.time.is_empty()
    }
}

fn in_range(field: Field, value: u64, max: u64) -> Result<u64> {
    if value == 0 || value > max {
        return Err(Error::invalid(
            field,
            Problem::OutOfRange {
                value: i128::from(value),
                min: 1,
                max: i128::from(max),
            },
        ));
    }
    Ok(value)
}

/// The mode a search runs in: the one asked for, or `hybrid` when the
/// store embeds and `lexical` otherwise. Vector modes without an embedder
/// are refused (never silently answered lexically or emptily).
pub fn resolve_mode(requested: Option<SearchMode>, embeds: bool) -> Result<SearchMode> {
    match (requested, embeds) {
        (None, true) => Ok(SearchMode::Hybrid),
        (None, false) | (Some(SearchMode::Lexical), _) => Ok(SearchMode::Lexical),
        (Some(m), true) => Ok(m),
        (Some(m), false) => Err(Error::invalid(
            Field::Query,
            Problem::Malformed(format!(
                "mode `{}` needs an embedder and this store has none",
                m.as_str()
            )),
        )),
    }
}

/// Validates `req` against `config`'s limits (query, limit, byte budget,
/// filter, in that order), analyses the query and takes the
/// configuration's search stages (session cohesion), so every store
/// searches with the same ones.
pub fn prepare_search(
    req: &SearchRequest,
    config: &MemoryConfig,
    analyzer: &Analyzer,
) -> Result<PreparedSearch> {
    let limits = &config.limits;
    hippocamp_core::ident::check_text(Field::Query, &req.query, to_usize(limits.max_query_bytes))?;
    let limit = in_range(
        Field::Limit,
        req.limit.unwrap_or(limits.max_results),
        limits.max_results,
    )?;
    let max_bytes = in_range(
        Field::MaxBytes,
        req.max_bytes.unwrap_or(limits.max_result_bytes),
        limits.max_result_bytes,
    )?;
    let filter = match &req.filter {
        None => Filter::all(),
        Some(v) => Filter::parse(v, limits.json())?,
    };
    let context = req.context.unwrap_or_default();
    let max = hippocamp_core::limits::MAX_CONTEXT_TURNS;
    for side in [context.before, context.after] {
        if side > max {
            return Err(Error::invalid(
                Field::Context,
                Problem::OutOfRange {
                    value: i128::from(side),
                    min: 0,
                    max: i128::from(max),
                },
            ));
        }
    }
    Ok(PreparedSearch {
        terms: analyzer.query_terms(&req.query),
        filter,
        limit: to_usize(limit),
        max_bytes,
        mode: req.mode,
        now_ms: 0,
        explain: req.explain,
        neighbours: config.neighbours,
        context: (
            to_usize(context.before.into()),
            to_usize(context.after.into()),
        ),
        time: if config.time.enabled {
            hippocamp_search::TimeQuery::parse(&req.query)
        } else {
            hippocamp_search::TimeQuery::default()
        },
        time_params: config.time,
        reference_ms: req.reference_time_ms,
        lineage: LineageQuery {
            include_superseded: req.include_superseded,
            include_merged: req.include_merged,
            origins: req.origins.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn validation_order_and_errors() {
        let l = MemoryConfig::default();
        let a = Analyzer::english();
        let err = |r: SearchRequest| prepare_search(&r, &l, &a).unwrap_err();
        assert!(matches!(
            err(SearchRequest::new("")),
            Error::InvalidArgument {
                field: Field::Query,
                problem: Problem::Empty
            }
        ));
        assert!(matches!(
            err(SearchRequest::new("x".repeat(4097))),
            Error::InvalidArgument {
                field: Field::Query,
                problem: Problem::TooLong { .. }
            }
        ));
        assert!(matches!(
            err(SearchRequest::new("q").limit(0)),
            Error::InvalidArgument {
                field: Field::Limit,
                ..
            }
        ));
        assert!(matches!(
            err(SearchRequest::new("q").limit(51)),
            Error::InvalidArgument {
                field: Field::Limit,
                ..
            }
        ));
        assert!(matches!(
            err(SearchRequest::new("q").max_bytes(262_145)),
            Error::InvalidArgument {
                field: Field::MaxBytes,
                ..
            }
        ));
        assert!(matches!(
            err(SearchRequest::new("q").filter(json!({"a": {"$bad": 1}}))),
            Error::InvalidArgument {
                field: Field::Filter,
                ..
            }
        ));
        let p = prepare_search(&SearchRequest::new("what is it"), &l, &a).unwrap();
        assert!(p.terms.is_empty());
        assert_eq!(p.limit, 50);
    }
}
