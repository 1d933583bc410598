//! Long documents as bounded passages.
//!
//! BM25 divides a term's weight by the document's length relative to the
//! average, so a one-line fact inside a long answer or a block of code
//! scores far below the same line said alone. A document longer than
//! `max_bytes` × 1.5 is indexed as passages of at most `max_bytes` each
//! (cut at a line break, else at a space, in the second half of the
//! window; a passage never splits a character), each scored as a document
//! of its own, and the document ranks by its best passage. Passages are a
//! pure function of the text and the parameters: nothing about them is
//! stored, and they are rebuilt whenever a document is indexed.

use std::ops::Range;

use serde::{Deserialize, Serialize};

/// Passage parameters (`[memory.passages]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PassageParams {
    /// Whether long documents are split (on by default).
    pub enabled: bool,
    /// Most bytes of a passage, 256 ..= 65,536 (default 1,024); a
    /// document of up to 1.5 times this stays whole.
    pub max_bytes: usize,
}

impl Default for PassageParams {
    fn default() -> Self {
        Self {
            enabled: true,
            max_bytes: 1_024,
        }
    }
}

/// The smallest [`PassageParams::max_bytes`].
pub const MIN_PASSAGE_BYTES: usize = 256;
/// The largest [`PassageParams::max_bytes`].
pub const MAX_PASSAGE_BYTES: usize = 65_536;

impl PassageParams {
    /// Checks the range; returns the name of the bad parameter.
    pub fn validate(&self) -> Result<(), &'static str> {
        if (MIN_PASSAGE_BYTES..=MAX_PASSAGE_BYTES).contains(&self.max_bytes) {
            Ok(())
        } else {
            Err("max_bytes")
        }
    }

    /// Whether a text of `len` bytes is split.
    pub fn splits(&self, len: usize) -> bool {
        let max = self.max_bytes.max(MIN_PASSAGE_BYTES);
        self.enabled && len > max + max / 2
    }

    /// The passages of `text`: one range for a short text (or when off),
    /// else consecutive ranges covering it, each at most `max_bytes`.
    pub fn split(&self, text: &str) -> Vec<Range<usize>> {
        let max = self.max_bytes.max(MIN_PASSAGE_BYTES);
        if !self.splits(text.len()) {
            #[allow(clippy::single_range_in_vec_init)] // one passage: the whole text
            return vec![0..text.len()];
        }
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(text.len() / max + 1);
        let mut start = 0;
        while text.len() - start > max + max / 2 {
            let limit = start + max;
            let half = start + max / 2;
            let window = &bytes[half..limit];
            let end = window
                .iter()
                .rposition(|b| *b == b'\n')
                .or_else(|| window.iter().rposition(u8::is_ascii_whitespace))
                .map_or_else(
                    || {
                        let mut e = limit;
                        while !text.is_char_boundary(e) {
                            e -= 1;
                        }
                        e
                    },
                    // Just after the break, so it ends this passage.
                    |i| half + i + 1,
                );
            out.push(start..end);
            start = end;
        }
        out.push(start..text.len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_stay_whole_and_long_ones_cover_every_byte_once() {
        let p = PassageParams::default();
        assert_eq!(p.split("a short turn"), vec![0..12]);
        let edge = "x".repeat(1_536);
        assert_eq!(p.split(&edge).len(), 1);
        let text = format!(
            "{}\nThe fact: my locker code is 4417.\n{}",
            "fn main() { let x = 1; }\n".repeat(60),
            "é".repeat(900)
        );
        let parts = p.split(&text);
        assert!(parts.len() > 2, "{}", parts.len());
        assert_eq!(parts[0].start, 0);
        assert_eq!(parts.last().map(|r| r.end), Some(text.len()));
        for w in parts.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in &parts {
            assert!(r.len() <= 1_024 + 512, "{r:?}");
            assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
        }
        // Cut after a line break where there is one.
        assert!(text[parts[0].clone()].ends_with('\n'));
        let off = PassageParams {
            enabled: false,
            ..p
        };
        assert_eq!(off.split(&text), vec![0..text.len()]);
        assert!(
            PassageParams {
                max_bytes: 100,
                ..p
            }
            .validate()
            .is_err()
        );
    }
}
