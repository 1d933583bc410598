//! JSON-safe metadata: bounds on size, depth and node count, and the value
//! comparisons filters use.
//!
//! Metadata is a JSON object (`serde_json::Map`, key-sorted so its encoding
//! is deterministic). Non-finite numbers cannot be represented, so every
//! accepted value round-trips through JSON unchanged.

use std::cmp::Ordering;
use std::io;

use serde_json::{Map, Value};

use crate::error::{Error, Field, Problem, Result};

/// A JSON object used as entry metadata.
pub type Metadata = Map<String, Value>;

/// Bounds on a JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// Bytes of the compact JSON encoding.
    pub max_bytes: usize,
    /// Nesting depth; the top object is depth 0, its values depth 1.
    pub max_depth: usize,
    /// Nodes: each scalar counts 1, each container 1 plus its children.
    pub max_nodes: usize,
}

/// Checks `object` against `limits` and returns its encoded size in bytes.
pub fn check_object(
    field: Field,
    object: &Map<String, Value>,
    limits: JsonLimits,
) -> Result<usize> {
    let mut nodes = 1usize;
    for v in object.values() {
        walk(field, v, 1, &mut nodes, limits)?;
    }
    let len = encoded_len(object);
    if len > limits.max_bytes {
        return Err(Error::invalid(
            field,
            Problem::TooLong {
                len,
                max: limits.max_bytes,
            },
        ));
    }
    Ok(len)
}

fn walk(
    field: Field,
    v: &Value,
    depth: usize,
    nodes: &mut usize,
    limits: JsonLimits,
) -> Result<()> {
    if depth > limits.max_depth {
        return Err(Error::invalid(
            field,
            Problem::TooDeep {
                max: limits.max_depth,
            },
        ));
    }
    *nodes += 1;
    if *nodes > limits.max_nodes {
        return Err(Error::invalid(
            field,
            Problem::TooManyNodes {
                max: limits.max_nodes,
            },
        ));
    }
    match v {
        Value::Array(items) => items
            .iter()
            .try_for_each(|i| walk(field, i, depth + 1, nodes, limits)),
        Value::Object(map) => map
            .values()
            .try_for_each(|i| walk(field, i, depth + 1, nodes, limits)),
        _ => Ok(()),
    }
}

/// Bytes of the compact JSON encoding of `value`, without allocating it.
pub fn encoded_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Serialising a JSON value into a counter cannot fail.
    let _ = serde_json::to_writer(&mut c, value);
    c.0
}

/// Appends `s` as a JSON string, exactly as `serde_json` writes it (`"`,
/// `\` and control characters escaped, `\b \t \n \f \r` by name and the
/// rest as `\u00xx`; everything else as is), looking at eight bytes at a
/// time: serde_json's byte-by-byte scan was most of a search reply's
/// encoding time. `tests::strings_are_written_as_serde_json_writes_them`.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    /// Non-zero when a byte of `w` may need escaping (a control
    /// character, `"` or `\\`); may also flag bytes after one that does,
    /// never misses one.
    fn maybe_escapes(w: u64) -> u64 {
        let below_space = w.wrapping_sub(ONES * 0x20) & !w;
        let q = w ^ (ONES * u64::from(b'"'));
        let b = w ^ (ONES * u64::from(b'\\'));
        (below_space | (q.wrapping_sub(ONES) & !q) | (b.wrapping_sub(ONES) & !b)) & HIGH
    }
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(chunk);
            if maybe_escapes(u64::from_le_bytes(w)) == 0 {
                i += 8;
                continue;
            }
        }
        let end = (i + 8).min(bytes.len());
        for (j, &b) in bytes.iter().enumerate().take(end).skip(i) {
            let named = match b {
                b'"' => b'"',
                b'\\' => b'\\',
                0x08 => b'b',
                0x09 => b't',
                0x0a => b'n',
                0x0c => b'f',
                0x0d => b'r',
                0x00..=0x1f => 0,
                _ => continue,
            };
            out.extend_from_slice(&bytes[run..j]);
            run = j + 1;
            if named == 0 {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            } else {
                out.push(b'\\');
                out.push(named);
            }
        }
        i = end;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}

/// JSON equality where numbers compare by value (`1 == 1.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => json_cmp(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Orders two numbers or two strings; `None` for any other pair.
pub fn json_cmp(left: &Value, right: &Value) -> Option<Ordering> {
    match (left, right) {
        (Value::Number(l), Value::Number(r)) => {
            let as_int = |n: &serde_json::Number| {
                n.as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from))
            };
            match (as_int(l), as_int(r)) {
                (Some(li), Some(ri)) => Some(li.cmp(&ri)),
                _ => l.as_f64()?.partial_cmp(&r.as_f64()?),
            }
        }
        (Value::String(l), Value::String(r)) => Some(l.cmp(r)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        #[test]
        fn strings_are_written_as_serde_json_writes_them(
            s in "([\\x00-\\x7f]|é|日|\\u{2028}|\\u{10ffff}|[a-z ]{0,20}){0,60}",
        ) {
            let mut fast = Vec::new();
            super::write_str(&mut fast, &s);
            proptest::prop_assert_eq!(fast, serde_json::to_vec(&s).unwrap());
        }
    }

    #[test]
    fn every_byte_is_escaped_or_kept_as_serde_json_does() {
        for b in 0u8..0x80 {
            for at in 0..17 {
                let s = format!("{}{}{}", "a".repeat(at), char::from(b), "z".repeat(9));
                let mut fast = Vec::new();
                super::write_str(&mut fast, &s);
                assert_eq!(fast, serde_json::to_vec(&s).unwrap(), "byte {b:#x} at {at}");
            }
        }
    }

    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    const L: JsonLimits = JsonLimits {
        max_bytes: 100,
        max_depth: 2,
        max_nodes: 6,
    };

    #[test]
    fn depth_counts_from_the_top_object() {
        assert!(check_object(Field::Metadata, &obj(json!({"a": {"b": 1}})), L).is_ok());
        assert!(matches!(
            check_object(Field::Metadata, &obj(json!({"a": {"b": {"c": 1}}})), L),
            Err(Error::InvalidArgument {
                problem: Problem::TooDeep { max: 2 },
                ..
            })
        ));
    }

    #[test]
    fn nodes_and_bytes_are_bounded() {
        // 1 (top) + 1 (array) + 4 scalars = 6 nodes.
        assert!(check_object(Field::Metadata, &obj(json!({"a": [1, 2, 3, 4]})), L).is_ok());
        assert!(matches!(
            check_object(Field::Metadata, &obj(json!({"a": [1, 2, 3, 4, 5]})), L),
            Err(Error::InvalidArgument {
                problem: Problem::TooManyNodes { max: 6 },
                ..
            })
        ));
        assert!(matches!(
            check_object(Field::Metadata, &obj(json!({"a": "x".repeat(100)})), L),
            Err(Error::InvalidArgument {
                problem: Problem::TooLong { .. },
                ..
            })
        ));
        let m = obj(json!({"b": 1, "a": "x"}));
        assert_eq!(encoded_len(&m), serde_json::to_vec(&m).unwrap().len());
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!(1), &json!("1")));
        assert_eq!(json_cmp(&json!(2), &json!(10)), Some(Ordering::Less));
        assert_eq!(json_cmp(&json!("b"), &json!("a")), Some(Ordering::Greater));
        assert_eq!(
            json_cmp(&json!(u64::MAX), &json!(-1)),
            Some(Ordering::Greater)
        );
        assert_eq!(json_cmp(&json!(1), &json!("1")), None);
    }
}
