//! Search replies as JSON, written directly.
//!
//! A search reply is mostly keys, ids, digests and content. Through serde
//! every key went through the generic map path and every byte of every
//! string through serde_json's byte-by-byte escape scan: together the
//! largest share of a search request's server time. Here keys are
//! literals, ids and digests hex on the stack, and strings go through
//! [`hippocamp_core::json::write_str`]. Parts that are rare or open-ended
//! (metadata, obligations, score details, floats) still go through
//! serde_json, so the bytes are serde_json's by construction there and by
//! test elsewhere (`tests::replies_are_the_bytes_serde_json_writes`).

use std::sync::Arc;

use hippocamp_core::json::write_str;

use crate::entry::{MemoryEntry, Provenance};
use crate::store::{ScoreType, SearchHit, SearchResults};

impl SearchResults {
    /// The reply's JSON: the same bytes as `serde_json::to_vec(self)`.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            64 + self
                .hits
                .iter()
                .map(|h| 400 + h.entry.content.len())
                .sum::<usize>(),
        );
        out.extend_from_slice(b"{\"hits\":[");
        for (i, hit) in self.hits.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_hit(&mut out, hit)?;
        }
        out.extend_from_slice(b"],\"skipped_over_budget\":");
        out.extend_from_slice(if self.skipped_over_budget {
            b"true"
        } else {
            b"false"
        });
        if self.entries_without_vectors != 0 {
            out.extend_from_slice(b",\"entries_without_vectors\":");
            write_u64(&mut out, self.entries_without_vectors);
        }
        out.push(b'}');
        Ok(out)
    }
}

/// A hit: its entry's fields (flattened), then its score.
fn write_hit(out: &mut Vec<u8>, hit: &SearchHit) -> serde_json::Result<()> {
    out.push(b'{');
    write_entry_fields(out, &hit.entry)?;
    out.extend_from_slice(b",\"score\":");
    serde_json::to_writer(&mut *out, &hit.score)?;
    out.extend_from_slice(b",\"score_type\":");
    write_str(
        out,
        match hit.score_type {
            ScoreType::Bm25 => "bm25",
            ScoreType::Vector => "vector",
            ScoreType::Hybrid => "hybrid",
        },
    );
    if let Some(d) = &hit.details {
        out.extend_from_slice(b",\"details\":");
        serde_json::to_writer(&mut *out, d)?;
    }
    if let Some(e) = &hit.explanation {
        out.extend_from_slice(b",\"explanation\":");
        serde_json::to_writer(&mut *out, e)?;
    }
    if let Some(c) = &hit.context {
        out.extend_from_slice(b",\"context\":{\"before\":");
        write_entries(out, &c.before)?;
        out.extend_from_slice(b",\"after\":");
        write_entries(out, &c.after)?;
        out.push(b'}');
    }
    if let Some(p) = &hit.passage {
        out.extend_from_slice(b",\"passage\":{\"start\":");
        write_u64(out, p.start);
        out.extend_from_slice(b",\"end\":");
        write_u64(out, p.end);
        out.push(b'}');
    }
    out.push(b'}');
    Ok(())
}

fn write_entries(out: &mut Vec<u8>, entries: &[Arc<MemoryEntry>]) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'{');
        write_entry_fields(out, e)?;
        out.push(b'}');
    }
    out.push(b']');
    Ok(())
}

/// An entry's fields in declaration order, without braces.
fn write_entry_fields(out: &mut Vec<u8>, e: &MemoryEntry) -> serde_json::Result<()> {
    out.extend_from_slice(b"\"id\":");
    write_str(out, e.id.text(&mut [0u8; 36]));
    out.extend_from_slice(b",\"scope\":{\"app\":");
    write_str(out, e.scope.app().as_str());
    out.extend_from_slice(b",\"user\":");
    write_str(out, e.scope.user().as_str());
    out.extend_from_slice(b"},\"content\":");
    write_str(out, &e.content);
    out.extend_from_slice(b",\"metadata\":");
    if e.metadata.is_empty() {
        out.extend_from_slice(b"{}");
    } else {
        serde_json::to_writer(&mut *out, &e.metadata)?;
    }
    out.extend_from_slice(b",\"provenance\":");
    write_provenance(out, &e.provenance);
    out.extend_from_slice(b",\"digest\":");
    write_str(out, e.digest.hex(&mut [0u8; 64]));
    out.extend_from_slice(b",\"timestamp_ms\":");
    write_u64(out, e.timestamp_ms);
    out.extend_from_slice(b",\"epoch\":");
    write_u64(out, e.epoch);
    if !e.obligations.is_empty() {
        out.extend_from_slice(b",\"obligations\":");
        serde_json::to_writer(&mut *out, &e.obligations)?;
    }
    if e.revision != 1 {
        out.extend_from_slice(b",\"revision\":");
        write_u64(out, u64::from(e.revision));
    }
    if let Some(at) = e.revised_at_ms {
        out.extend_from_slice(b",\"revised_at_ms\":");
        write_u64(out, at);
    }
    if let Some(at) = e.ingested_at_ms {
        out.extend_from_slice(b",\"ingested_at_ms\":");
        write_u64(out, at);
    }
    out.extend_from_slice(b",\"origin\":");
    write_str(out, e.origin.as_str());
    // Rare (derived entries, keyed facts, replaced entries): serde's.
    if !e.derived_from.is_empty() {
        out.extend_from_slice(b",\"derived_from\":");
        serde_json::to_writer(&mut *out, &e.derived_from)?;
    }
    if let Some(run) = &e.consolidation {
        out.extend_from_slice(b",\"consolidation\":");
        write_str(out, run);
    }
    if let Some(f) = &e.file {
        out.extend_from_slice(b",\"file\":{\"name\":");
        write_str(out, &f.name);
        out.extend_from_slice(b",\"version\":");
        write_u64(out, f.version);
        out.push(b'}');
    }
    if e.lineage_restored {
        out.extend_from_slice(b",\"lineage_restored\":true");
    }
    if let Some(k) = &e.fact_key {
        out.extend_from_slice(b",\"fact_key\":");
        write_str(out, k.as_str());
    }
    if !e.status.is_current() {
        out.extend_from_slice(b",\"status\":");
        serde_json::to_writer(&mut *out, &e.status)?;
    }
    for (key, id) in [
        (&b",\"superseded_by\":"[..], e.superseded_by),
        (&b",\"merged_into\":"[..], e.merged_into),
    ] {
        if let Some(id) = id {
            out.extend_from_slice(key);
            write_str(out, id.text(&mut [0u8; 36]));
        }
    }
    Ok(())
}

fn write_provenance(out: &mut Vec<u8>, p: &Provenance) {
    out.push(b'{');
    if let Some(s) = &p.session_id {
        out.extend_from_slice(b"\"session_id\":");
        write_str(out, s.as_str());
        out.push(b',');
    }
    out.extend_from_slice(b"\"event_ids\":[");
    for (i, id) in p.event_ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, id.as_str());
    }
    out.push(b']');
    if let Some(a) = &p.author {
        out.extend_from_slice(b",\"author\":");
        write_str(out, a.as_str());
    }
    if let Some(t) = p.timestamp_ms {
        out.extend_from_slice(b",\"timestamp_ms\":");
        write_u64(out, t);
    }
    out.push(b'}');
}

fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hippocamp_core::{Author, EventId, MemoryLimits, MemoryScope, SessionId};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::entry::prepare_entry;
    use crate::store::ScoreDetails;
    use crate::{NewEntry, Obligations};

    fn hit(content: &str, n: u64, score: f64) -> SearchHit {
        let scope = MemoryScope::parse("app", "user-\"1\"").unwrap();
        let mut e = prepare_entry(&scope, NewEntry::new(content), &MemoryLimits::default())
            .unwrap()
            .entry;
        e.timestamp_ms = n;
        e.epoch = n % 3;
        if n % 2 == 1 {
            e.provenance = Provenance {
                session_id: Some(SessionId::new(format!("s{n}")).unwrap()),
                event_ids: (0..n % 4)
                    .map(|i| EventId::new(format!("e{i}")).unwrap())
                    .collect(),
                author: Some(Author::new("user").unwrap()),
                timestamp_ms: Some(n * 7),
            };
            e.metadata = json!({"k": content, "n": [1, 2.5, null], "deep": {"a": true}})
                .as_object()
                .unwrap()
                .clone();
        }
        if n % 5 == 4 {
            e.obligations = Obligations {
                expires_at_ms: Some(n + 1),
                legal_hold: true,
                ..Obligations::default()
            };
            e.revision = 3;
            e.revised_at_ms = Some(n + 2);
        }
        e.ingested_at_ms = n.is_multiple_of(2).then_some(n * 11 + 5);
        if n % 7 == 3 {
            e.origin = crate::lineage::Origin::Fact;
            e.derived_from = vec![crate::lineage::Source {
                entry: hippocamp_core::EntryId::random(),
                role: crate::lineage::Role::Merged,
            }];
            e.consolidation = Some(format!("run-\"{n}\""));
            e.lineage_restored = n % 2 == 1;
            e.fact_key = Some(hippocamp_core::FactKey::new("user.home_city").unwrap());
        }
        if n % 7 == 6 {
            e.origin = crate::lineage::Origin::File;
            e.file = Some(crate::lineage::FileSource {
                name: format!(".memories/\"{n}\".md"),
                version: n + 1,
            });
        }
        if n % 7 == 5 {
            e = e.with_state(crate::lineage::State {
                status: crate::lineage::Status::Superseded,
                by: Some(hippocamp_core::EntryId::random()),
            });
        }
        let (score_type, details) = match n % 3 {
            0 => (ScoreType::Bm25, None),
            1 => (ScoreType::Vector, None),
            _ => (
                ScoreType::Hybrid,
                Some(ScoreDetails {
                    bm25: Some(score),
                    vector: None,
                    fused: score / 3.0,
                }),
            ),
        };
        let explanation = (n % 4 == 1).then(|| {
            vec![crate::store::Contribution {
                stage: "bm25".into(),
                score: Some(score),
                terms: vec![hippocamp_search::TermShare {
                    term: "caf\u{e9}".into(),
                    tf: 2,
                    score: 0.5,
                }],
                detail: None,
            }]
        });
        let context = (n % 3 == 2).then(|| crate::store::HitContext {
            before: vec![Arc::new(e.clone())],
            after: (0..n % 2).map(|_| Arc::new(e.clone())).collect(),
        });
        SearchHit {
            entry: Arc::new(e),
            score,
            score_type,
            details,
            explanation,
            context,
            passage: (n % 2 == 1).then_some(crate::store::PassageSpan {
                start: n,
                end: n * 7 + 1,
            }),
        }
    }

    proptest! {
        #[test]
        fn replies_are_the_bytes_serde_json_writes(
            contents in proptest::collection::vec("([\\x01-\\x7f]|é|日|\\u{2028}){1,40}", 0..6),
            scores in proptest::collection::vec(any::<f64>(), 6),
            skipped in any::<bool>(),
            without in 0u64..3,
        ) {
            let hits = contents
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.trim().is_empty())
                .map(|(i, c)| hit(c, i as u64, scores[i]))
                .collect();
            let r = SearchResults { hits, skipped_over_budget: skipped, entries_without_vectors: without };
            prop_assert_eq!(
                String::from_utf8(r.to_json().unwrap()).unwrap(),
                serde_json::to_string(&r).unwrap()
            );
        }
    }
}
