//! The Cranfield 1400 collection: aeronautics abstracts, queries and
//! graded relevance judgements.
//!
//! Pitfalls handled here: CRLF line ends; judgements number queries
//! 1..=225 by their *position* in `cran.qry`, not by the `.I` ids; code -1
//! means "no interest" and is dropped; codes 1..=4 are Cleverdon's scale
//! with 1 = complete answer, so the graded gain is `5 - code`.

use std::collections::HashMap;
use std::path::Path;

use crate::DatasetError;

/// One abstract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// The `.I` number.
    pub id: u32,
    /// `.T`.
    pub title: String,
    /// `.W`.
    pub text: String,
}

impl Doc {
    /// Title and abstract, the indexed text.
    pub fn content(&self) -> String {
        format!("{}\n{}", self.title, self.text).trim().to_owned()
    }
}

/// One query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Position in `cran.qry`, 1-based: the number the judgements use.
    pub number: u32,
    /// The text.
    pub text: String,
}

/// The whole collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collection {
    /// Documents.
    pub docs: Vec<Doc>,
    /// Queries.
    pub queries: Vec<Query>,
    /// Graded gains (1..=4) by query number, then document id.
    pub qrels: HashMap<u32, HashMap<u32, u32>>,
}

/// Splits a SMART-format file into records of `(.I value, fields)`.
fn records(text: &str) -> Vec<(String, HashMap<char, String>)> {
    let mut out: Vec<(String, HashMap<char, String>)> = Vec::new();
    let mut field: Option<char> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(id) = line.strip_prefix(".I") {
            out.push((id.trim().to_owned(), HashMap::new()));
            field = None;
            continue;
        }
        let mut chars = line.chars();
        if line.len() == 2 && chars.next() == Some('.') {
            field = chars.next();
            continue;
        }
        if let (Some((_, fields)), Some(f)) = (out.last_mut(), field) {
            let buf = fields.entry(f).or_default();
            if !buf.is_empty() {
                buf.push(' ');
            }
            buf.push_str(line.trim());
        }
    }
    out
}

/// Reads `cran.all.1400`, `cran.qry` and `cranqrel` from `dir`.
pub fn load(dir: &Path) -> Result<Collection, DatasetError> {
    let docs_path = dir.join("cran.all.1400");
    let docs = records(&crate::read(&docs_path)?)
        .into_iter()
        .map(|(id, mut f)| {
            Ok(Doc {
                id: id.parse().map_err(|_| DatasetError::Format {
                    path: docs_path.clone(),
                    message: format!("bad document id {id:?}"),
                })?,
                title: f.remove(&'T').unwrap_or_default(),
                text: f.remove(&'W').unwrap_or_default(),
            })
        })
        .collect::<Result<Vec<_>, DatasetError>>()?;
    let queries = records(&crate::read(&dir.join("cran.qry"))?)
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut f))| Query {
            number: u32::try_from(i + 1).unwrap_or(u32::MAX),
            text: f.remove(&'W').unwrap_or_default(),
        })
        .collect();
    let qrels_path = dir.join("cranqrel");
    let mut qrels: HashMap<u32, HashMap<u32, u32>> = HashMap::new();
    for line in crate::read(&qrels_path)?.lines() {
        let cols: Vec<i64> = line
            .split_whitespace()
            .filter_map(|c| c.parse().ok())
            .collect();
        let [q, d, code] = cols[..] else {
            continue;
        };
        if !(1..=4).contains(&code) {
            continue;
        }
        let (Ok(q), Ok(d), Ok(gain)) =
            (u32::try_from(q), u32::try_from(d), u32::try_from(5 - code))
        else {
            continue;
        };
        qrels.entry(q).or_default().insert(d, gain);
    }
    Ok(Collection {
        docs,
        queries,
        qrels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_records_parse_with_crlf() {
        let r =
            records(".I 1\r\n.T\r\nwing\r\nflow .\r\n.W\r\nsome text\r\n.I 2\r\n.W\r\nmore\r\n");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].0, "1");
        assert_eq!(r[0].1[&'T'], "wing flow .");
        assert_eq!(r[1].1[&'W'], "more");
    }
}
