//! Text analysis: the one function that turns content and queries into
//! terms, so both sides always agree.
//!
//! Words are Unicode word segments (UAX #29, via `unicode-segmentation`),
//! lowercased; English stopwords are dropped; the rest are stemmed with the
//! Snowball English (Porter2) stemmer. Curly apostrophes are folded to `'`
//! first so `Caroline’s` and `Caroline's` analyse alike.

use std::cell::RefCell;
use std::fmt;

// foldhash: terms are hashed several times per word on every ingest and
// query; SipHash was a measured share of ingestion. It is seeded per
// process, so text cannot be crafted to collide.
use foldhash::{HashMap, HashMapExt as _, HashSet};

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// Words already stemmed on this thread. Stemming is the most expensive
/// step of ingestion and vocabulary repeats heavily, so a small per-thread
/// memo (cleared when full, so memory stays bounded) pays for itself.
const STEM_CACHE_CAPACITY: usize = 1 << 16;

thread_local! {
    static STEMS: RefCell<HashMap<Box<str>, Box<str>>> = RefCell::new(HashMap::new());
}

/// Terms of one document with their frequencies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TermFreqs {
    /// Distinct terms, sorted, with how often each occurs.
    pub terms: Vec<(String, u32)>,
    /// Total number of terms (the BM25 document length).
    pub len: u32,
}

/// An analyser for English text.
pub struct Analyzer {
    stemmer: Stemmer,
    stopwords: HashSet<&'static str>,
}

impl fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Analyzer")
            .field("language", &"english")
            .field("stopwords", &self.stopwords.len())
            .finish_non_exhaustive()
    }
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::english()
    }
}

impl Analyzer {
    /// Lowercasing, English stopwords, Snowball English stemming.
    pub fn english() -> Self {
        Self {
            stemmer: Stemmer::create(Algorithm::English),
            stopwords: ENGLISH_STOPWORDS.iter().copied().collect(),
        }
    }

    /// The terms of `text`, in order, repeats kept.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.each_term(text, |t| out.push(t.to_owned()));
        out
    }

    fn each_term(&self, text: &str, mut f: impl FnMut(&str)) {
        let folded;
        let text = if text.contains('\u{2019}') {
            folded = text.replace('\u{2019}', "'");
            &folded
        } else {
            text
        };
        STEMS.with_borrow_mut(|cache| {
            let mut lower = String::new();
            let each_word = |word: &str| {
                lower.clear();
                if word.is_ascii() {
                    // The same as `char::to_lowercase` on ASCII, without
                    // decoding characters one by one.
                    lower.push_str(word);
                    lower.make_ascii_lowercase();
                } else {
                    lower.extend(word.chars().flat_map(char::to_lowercase));
                }
                // One lookup per word: the memo also remembers stopwords
                // (as empty stems, which give no term).
                if let Some(stem) = cache.get(lower.as_str()) {
                    if !stem.is_empty() {
                        f(stem);
                    }
                    return;
                }
                let stem: Box<str> = if self.stopwords.contains(lower.as_str()) {
                    "".into()
                } else {
                    self.stemmer.stem(&lower).into()
                };
                if !stem.is_empty() {
                    f(&stem);
                }
                if cache.len() >= STEM_CACHE_CAPACITY {
                    cache.clear();
                }
                cache.insert(lower.as_str().into(), stem);
            };
            if text.is_ascii() {
                ascii_words(text, each_word);
            } else {
                text.unicode_words().for_each(each_word);
            }
        });
    }

    /// The term frequencies and length of a document.
    pub fn analyze(&self, text: &str) -> TermFreqs {
        // The terms go into one buffer as spans, are sorted and counted
        // there, and only distinct terms are copied out: no allocation per
        // word, no hash table per document.
        let mut buf = String::with_capacity(text.len());
        // Each span carries its term's first 8 bytes as a big-endian
        // number, so most comparisons of the sort are one integer compare
        // (terms hold no NUL, so zero padding sorts as the bytes would).
        let mut spans: Vec<(u64, u32, u32)> = Vec::with_capacity(text.len() / 5);
        self.each_term(text, |t| {
            let start = buf.len();
            buf.push_str(t);
            let mut head = [0u8; 8];
            let n = t.len().min(8);
            head[..n].copy_from_slice(&t.as_bytes()[..n]);
            spans.push((
                u64::from_be_bytes(head),
                u32::try_from(start).unwrap_or(u32::MAX),
                u32::try_from(buf.len()).unwrap_or(u32::MAX),
            ));
        });
        let len = u32::try_from(spans.len()).unwrap_or(u32::MAX);
        let term = |&(_, a, b): &(u64, u32, u32)| buf.get(a as usize..b as usize).unwrap_or("");
        spans.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| term(x).cmp(term(y))));
        // At most one per span: no growth while filling.
        let mut terms: Vec<(String, u32)> = Vec::with_capacity(spans.len());
        for s in &spans {
            let t = term(s);
            match terms.last_mut() {
                Some((last, n)) if last == t => *n += 1,
                _ => terms.push((t.to_owned(), 1)),
            }
        }
        TermFreqs { terms, len }
    }

    /// The distinct terms of a query, sorted, each with how often the
    /// query says it: the same words in any order score identically, and a
    /// long query that keeps returning to a word weighs it more (bounded:
    /// see [`Bm25Params::k3`](crate::Bm25Params::k3)).
    pub fn query_terms(&self, query: &str) -> Vec<QueryTerm> {
        self.analyze(query)
            .terms
            .into_iter()
            .map(|(term, count)| QueryTerm { term, count })
            .collect()
    }
}

/// What UAX #29 word segmentation needs to know of an ASCII byte.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// ALetter.
    Letter,
    /// Numeric.
    Digit,
    /// ExtendNumLet (`_`).
    Joiner,
    /// MidLetter (`:`).
    MidLetter,
    /// MidNumLet (`.`) or Single_Quote (`'`): between two letters or two
    /// digits.
    MidBoth,
    /// MidNum (`,` `;`).
    MidNum,
    /// Anything else: never inside a word.
    Other,
}

fn class(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' => Class::Letter,
        b'0'..=b'9' => Class::Digit,
        b'_' => Class::Joiner,
        b':' => Class::MidLetter,
        b'.' | b'\'' => Class::MidBoth,
        b',' | b';' => Class::MidNum,
        _ => Class::Other,
    }
}

/// The words of ASCII text exactly as `unicode_words` finds them (UAX #29
/// restricted to ASCII, where no Extend, Format, Hebrew, Katakana or
/// regional-indicator rule applies), without its general state machine:
/// segmentation was a tenth of ingestion. `tests::ascii_words_are_unicode_words`
/// holds the two equal.
fn ascii_words<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    use Class::{Digit, Joiner, Letter, MidBoth, MidLetter, MidNum};
    let bytes = text.as_bytes();
    let n = bytes.len();
    let mut i = 0;
    while i < n {
        let c = class(bytes[i]);
        if !matches!(c, Letter | Digit | Joiner) {
            i += 1;
            continue;
        }
        // A segment starts here; `alnum` says whether it is a word (a run
        // of underscores alone is a segment without one).
        let start = i;
        let mut alnum = c != Joiner;
        let mut prev = c;
        i += 1;
        while i < n {
            let cur = class(bytes[i]);
            match cur {
                // WB5, WB8-10, WB13a/b: letters, digits and `_` join.
                Letter | Digit | Joiner if matches!(prev, Letter | Digit | Joiner) => {
                    alnum |= cur != Joiner;
                    prev = cur;
                    i += 1;
                }
                // WB6/7 (letter, mid, letter) and WB11/12 (digit, mid,
                // digit).
                MidLetter | MidBoth | MidNum if i + 1 < n => {
                    let next = class(bytes[i + 1]);
                    let joins = matches!(
                        (prev, cur, next),
                        (Letter, MidLetter | MidBoth, Letter) | (Digit, MidNum | MidBoth, Digit)
                    );
                    if !joins {
                        break;
                    }
                    prev = next;
                    i += 2;
                }
                _ => break,
            }
        }
        if alnum {
            f(&text[start..i]);
        }
    }
}

/// One distinct term of a query and how many times the query has it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueryTerm {
    /// The analysed term.
    pub term: String,
    /// Its frequency in the query (at least 1).
    pub count: u32,
}

/// English stopwords: function words that carry no topic.
pub const ENGLISH_STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ain",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "aren't",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "couldn",
    "couldn't",
    "d",
    "did",
    "didn",
    "didn't",
    "do",
    "does",
    "doesn",
    "doesn't",
    "doing",
    "don",
    "don't",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "hadn't",
    "has",
    "hasn",
    "hasn't",
    "have",
    "haven",
    "haven't",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "isn't",
    "it",
    "it's",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "ma",
    "me",
    "mightn",
    "mightn't",
    "more",
    "most",
    "mustn",
    "mustn't",
    "my",
    "myself",
    "needn",
    "needn't",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "shan't",
    "she",
    "she's",
    "should",
    "should've",
    "shouldn",
    "shouldn't",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "that'll",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "wasn't",
    "we",
    "were",
    "weren",
    "weren't",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "won",
    "won't",
    "wouldn",
    "wouldn't",
    "y",
    "you",
    "you'd",
    "you'll",
    "you're",
    "you've",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_lowercases_and_drops_stopwords() {
        let a = Analyzer::english();
        assert_eq!(
            a.terms("The Supervisors are restarting failed children!"),
            vec!["supervisor", "restart", "fail", "children"]
        );
        assert_eq!(a.terms("Caroline’s dog"), a.terms("Caroline's dog"));
        assert_eq!(a.terms("caroline's"), vec!["carolin"]);
        assert!(a.terms("what is it?").is_empty());
        assert!(a.terms("...!!!").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn ascii_words_are_unicode_words(
            text in "[aZq09_.:',; \"\n\r\t!?-]{0,40}",
        ) {
            let mut fast = Vec::new();
            ascii_words(&text, |w| fast.push(w));
            let slow: Vec<&str> = text.unicode_words().collect();
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn ascii_words_follow_the_mid_letter_and_number_rules() {
        fn words(t: &str) -> Vec<&str> {
            let mut out = Vec::new();
            ascii_words(t, |w| out.push(w));
            assert_eq!(out, t.unicode_words().collect::<Vec<_>>(), "{t:?}");
            out
        }
        assert_eq!(words("e.g. U.S.A. don't"), ["e.g", "U.S.A", "don't"]);
        assert_eq!(
            words("1,000.50 a:b 3.a a.3"),
            ["1,000.50", "a:b", "3", "a", "a", "3"]
        );
        assert_eq!(
            words("__ _x_ x__y a..b 1;2"),
            ["_x_", "x__y", "a", "b", "1;2"]
        );
    }

    #[test]
    fn analyze_counts_terms() {
        let a = Analyzer::english();
        let tf = a.analyze("run runs running fast");
        assert_eq!(tf.len, 4);
        assert_eq!(
            tf.terms,
            vec![("fast".to_owned(), 1), ("run".to_owned(), 3)]
        );
    }

    #[test]
    fn query_terms_are_sorted_and_counted() {
        let a = Analyzer::english();
        let t = |term: &str, count| QueryTerm {
            term: term.into(),
            count,
        };
        assert_eq!(
            a.query_terms("dogs and cats and dogs"),
            vec![t("cat", 1), t("dog", 2)]
        );
        assert_eq!(a.query_terms("cats dogs"), a.query_terms("dogs cats"));
    }
}
