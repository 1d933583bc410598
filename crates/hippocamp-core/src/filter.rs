//! Metadata filters: parsed once, evaluated per candidate.
//!
//! A filter is a JSON object. Each key is either a logical operator
//! (`$and`, `$or`, `$not`) or a top-level metadata key; several keys must all
//! hold. A key's value is either a literal, which must equal the metadata
//! value (deep equality, numbers by value), or an object of comparison
//! operators, all of which must hold:
//!
//! | operator | holds when |
//! |---|---|
//! | `$eq` v | the key exists and equals v |
//! | `$ne` v | the key is missing or differs from v |
//! | `$in` [..] | the key exists and equals one of the list |
//! | `$nin` [..] | the key is missing or equals none of the list |
//! | `$gt` `$gte` `$lt` `$lte` v | both are numbers, or both strings, and compare so |
//! | `$exists` bool | the key is present (or absent) |
//!
//! `{"$and": [f, ..]}` and `{"$or": [f, ..]}` take non-empty lists of
//! filters; `{"$not": f}` negates one. Unknown operators, operator objects
//! mixed with plain keys, and keys whose values are redacted on write
//! (`password`, `github_token`...) are rejected with a typed error.

use serde_json::{Map, Value};

use crate::error::{Error, Field, Problem, Result, suggest};
use crate::json::{JsonLimits, check_object, json_cmp, json_eq};
use crate::secrets::is_sensitive_key;

const LOGICAL: &[&str] = &["$and", "$or", "$not"];
const COMPARISON: &[&str] = &[
    "$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists",
];

/// A parsed metadata filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Every listed filter holds (an empty list holds for everything).
    And(Vec<Filter>),
    /// At least one listed filter holds.
    Or(Vec<Filter>),
    /// The filter does not hold.
    Not(Box<Filter>),
    /// A condition on one top-level metadata key.
    Key {
        /// The metadata key.
        key: String,
        /// The condition.
        cond: Cond,
    },
}

/// A condition on one metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    /// Present and equal.
    Eq(Value),
    /// Missing or different.
    Ne(Value),
    /// Present and equal to one of these.
    In(Vec<Value>),
    /// Missing or equal to none of these.
    Nin(Vec<Value>),
    /// Greater than.
    Gt(Value),
    /// Greater than or equal.
    Gte(Value),
    /// Less than.
    Lt(Value),
    /// Less than or equal.
    Lte(Value),
    /// Present (`true`) or absent (`false`).
    Exists(bool),
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(Field::Filter, Problem::Malformed(msg.into()))
}

fn unknown(name: &str, known: &[&'static str]) -> Error {
    Error::invalid(
        Field::Filter,
        Problem::Unknown {
            name: name.to_owned(),
            suggestion: suggest(name, known.iter().copied()),
        },
    )
}

impl Filter {
    /// The filter that holds for everything.
    pub fn all() -> Self {
        Filter::And(Vec::new())
    }

    /// Whether this filter holds for everything.
    pub fn is_all(&self) -> bool {
        matches!(self, Filter::And(v) if v.is_empty())
    }

    /// Parses a filter, bounded like metadata by `limits`.
    pub fn parse(value: &Value, limits: JsonLimits) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(bad("a filter must be a JSON object"));
        };
        check_object(Field::Filter, map, limits)?;
        Self::parse_object(map)
    }

    fn parse_object(map: &Map<String, Value>) -> Result<Self> {
        let mut parts = Vec::with_capacity(map.len());
        for (k, v) in map {
            parts.push(match k.as_str() {
                "$and" | "$or" => {
                    let Value::Array(items) = v else {
                        return Err(bad(format!("{k} takes a list of filters")));
                    };
                    if items.is_empty() {
                        return Err(bad(format!("{k} takes a non-empty list")));
                    }
                    let subs = items
                        .iter()
                        .map(|i| match i {
                            Value::Object(m) => Self::parse_object(m),
                            _ => Err(bad(format!("{k} items must be filter objects"))),
                        })
                        .collect::<Result<Vec<_>>>()?;
                    if k == "$and" {
                        Filter::And(subs)
                    } else {
                        Filter::Or(subs)
                    }
                }
                "$not" => match v {
                    Value::Object(m) => Filter::Not(Box::new(Self::parse_object(m)?)),
                    _ => return Err(bad("$not takes a filter object")),
                },
                op if op.starts_with('$') => return Err(unknown(op, LOGICAL)),
                key => {
                    if is_sensitive_key(key) {
                        return Err(Error::invalid(
                            Field::Filter,
                            Problem::RedactedKey(key.to_owned()),
                        ));
                    }
                    Self::parse_key(key, v)?
                }
            });
        }
        Ok(if parts.len() == 1 {
            parts.pop().unwrap_or_else(Filter::all)
        } else {
            Filter::And(parts)
        })
    }

    fn parse_key(key: &str, v: &Value) -> Result<Self> {
        let ops = match v {
            Value::Object(m) if m.keys().any(|k| k.starts_with('$')) => m,
            literal => {
                return Ok(Filter::Key {
                    key: key.to_owned(),
                    cond: Cond::Eq(literal.clone()),
                });
            }
        };
        if ops.keys().any(|k| !k.starts_with('$')) {
            return Err(bad(format!(
                "the condition on `{key}` mixes operators with plain keys"
            )));
        }
        let mut conds = Vec::with_capacity(ops.len());
        for (op, arg) in ops {
            let list = || match arg {
                Value::Array(items) => Ok(items.clone()),
                _ => Err(bad(format!("{op} takes a list"))),
            };
            let cond = match op.as_str() {
                "$eq" => Cond::Eq(arg.clone()),
                "$ne" => Cond::Ne(arg.clone()),
                "$in" => Cond::In(list()?),
                "$nin" => Cond::Nin(list()?),
                "$gt" | "$gte" | "$lt" | "$lte" => {
                    if !matches!(arg, Value::Number(_) | Value::String(_)) {
                        return Err(bad(format!("{op} compares numbers or strings")));
                    }
                    match op.as_str() {
                        "$gt" => Cond::Gt(arg.clone()),
                        "$gte" => Cond::Gte(arg.clone()),
                        "$lt" => Cond::Lt(arg.clone()),
                        _ => Cond::Lte(arg.clone()),
                    }
                }
                "$exists" => match arg {
                    Value::Bool(b) => Cond::Exists(*b),
                    _ => return Err(bad("$exists takes true or false")),
                },
                other => return Err(unknown(other, COMPARISON)),
            };
            conds.push(Filter::Key {
                key: key.to_owned(),
                cond,
            });
        }
        Ok(if conds.len() == 1 {
            conds.pop().unwrap_or_else(Filter::all)
        } else {
            Filter::And(conds)
        })
    }

    /// Whether `metadata` satisfies the filter.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        match self {
            Filter::And(fs) => fs.iter().all(|f| f.matches(metadata)),
            Filter::Or(fs) => fs.iter().any(|f| f.matches(metadata)),
            Filter::Not(f) => !f.matches(metadata),
            Filter::Key { key, cond } => cond.holds(metadata.get(key)),
        }
    }
}

impl Cond {
    fn holds(&self, value: Option<&Value>) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let cmp = |want: &Value, ok: &[std::cmp::Ordering]| {
            value
                .and_then(|v| json_cmp(v, want))
                .is_some_and(|o| ok.contains(&o))
        };
        match self {
            Cond::Eq(want) => value.is_some_and(|v| json_eq(v, want)),
            Cond::Ne(want) => !value.is_some_and(|v| json_eq(v, want)),
            Cond::In(list) => value.is_some_and(|v| list.iter().any(|w| json_eq(v, w))),
            Cond::Nin(list) => !value.is_some_and(|v| list.iter().any(|w| json_eq(v, w))),
            Cond::Gt(want) => cmp(want, &[Greater]),
            Cond::Gte(want) => cmp(want, &[Greater, Equal]),
            Cond::Lt(want) => cmp(want, &[Less]),
            Cond::Lte(want) => cmp(want, &[Less, Equal]),
            Cond::Exists(want) => value.is_some() == *want,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const L: JsonLimits = JsonLimits {
        max_bytes: 16_384,
        max_depth: 8,
        max_nodes: 512,
    };

    fn f(v: Value) -> Filter {
        Filter::parse(&v, L).unwrap()
    }

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn literals_and_operators() {
        let meta = m(json!({"topic": "otp", "n": 3, "tags": ["a", "b"], "o": {"x": 1}}));
        assert!(f(json!({})).matches(&meta));
        assert!(f(json!({"topic": "otp"})).matches(&meta));
        assert!(!f(json!({"topic": "elixir"})).matches(&meta));
        assert!(f(json!({"n": 3.0})).matches(&meta));
        assert!(f(json!({"o": {"x": 1}})).matches(&meta));
        assert!(f(json!({"tags": ["a", "b"]})).matches(&meta));
        assert!(f(json!({"n": {"$gt": 2, "$lte": 3}})).matches(&meta));
        assert!(!f(json!({"n": {"$gt": 3}})).matches(&meta));
        assert!(f(json!({"n": {"$gte": 3}})).matches(&meta));
        assert!(f(json!({"n": {"$lt": 4}})).matches(&meta));
        assert!(f(json!({"topic": {"$lt": "p"}})).matches(&meta));
        assert!(!f(json!({"topic": {"$gt": 1}})).matches(&meta));
        assert!(f(json!({"topic": {"$in": ["x", "otp"]}})).matches(&meta));
        assert!(f(json!({"topic": {"$nin": ["x"]}})).matches(&meta));
        assert!(f(json!({"missing": {"$nin": ["x"]}})).matches(&meta));
        assert!(f(json!({"missing": {"$ne": 1}})).matches(&meta));
        assert!(!f(json!({"missing": {"$eq": null}})).matches(&meta));
        assert!(f(json!({"missing": {"$exists": false}})).matches(&meta));
        assert!(f(json!({"n": {"$exists": true}})).matches(&meta));
    }

    #[test]
    fn logic() {
        let meta = m(json!({"a": 1, "b": 2}));
        assert!(f(json!({"$or": [{"a": 5}, {"b": 2}]})).matches(&meta));
        assert!(!f(json!({"$and": [{"a": 1}, {"b": 3}]})).matches(&meta));
        assert!(f(json!({"$not": {"a": 5}})).matches(&meta));
        assert!(!f(json!({"$not": {"a": 1}})).matches(&meta));
        assert!(f(json!({"a": 1, "$or": [{"b": 2}]})).matches(&meta));
    }

    #[test]
    fn bad_filters_are_typed_errors() {
        for v in [
            json!([1]),
            json!({"$and": []}),
            json!({"$and": {}}),
            json!({"$or": [1]}),
            json!({"$not": []}),
            json!({"a": {"$gt": [1]}}),
            json!({"a": {"$in": 1}}),
            json!({"a": {"$exists": 1}}),
            json!({"a": {"$eq": 1, "b": 2}}),
        ] {
            assert!(
                matches!(
                    Filter::parse(&v, L),
                    Err(Error::InvalidArgument {
                        field: Field::Filter,
                        problem: Problem::Malformed(_)
                    })
                ),
                "{v}"
            );
        }
        assert!(matches!(
            Filter::parse(&json!({"a": {"$regex": "x"}}), L),
            Err(Error::InvalidArgument {
                problem: Problem::Unknown { .. },
                ..
            })
        ));
        assert!(matches!(
            Filter::parse(&json!({"$nor": []}), L),
            Err(Error::InvalidArgument {
                problem: Problem::Unknown { .. },
                ..
            })
        ));
        assert!(matches!(
            Filter::parse(&json!({"db_password": "[REDACTED]"}), L),
            Err(Error::InvalidArgument {
                problem: Problem::RedactedKey(_),
                ..
            })
        ));
        let deep = json!({"a": {"$eq": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}});
        assert!(matches!(
            Filter::parse(&deep, L),
            Err(Error::InvalidArgument {
                problem: Problem::TooDeep { .. },
                ..
            })
        ));
    }
}
