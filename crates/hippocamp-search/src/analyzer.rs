//! Text analysis: the one function that turns content and queries into
//! terms, so both sides always agree.
//!
//! Words are Unicode word segments (UAX #29, via `unicode-segmentation`),
//! lowercased; English stopwords are dropped; the rest are stemmed with the
//! Snowball English (Porter2) stemmer. Curly apostrophes are folded to `'`
//! first so `Caroline’s` and `Caroline's` analyse alike.

use std::cell::RefCell;
use std::fmt;

// foldhash: words are hashed once per occurrence on every ingest and
// query; SipHash was a measured share of ingestion. It is seeded per
// process, so text cannot be crafted to collide.
use foldhash::{HashMap, HashSet};

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

/// Most words the per-thread memo holds before it is emptied (checked
/// before each text, so memory stays bounded by this plus one text).
const MEMO_CAPACITY: usize = 1 << 16;

/// Longest lowercased word the memo keys inline: one hash of a fixed-size
/// key and one comparison in place, where a boxed key cost a pointer
/// chase per probe. Longer words (rare in prose) use a map of boxed keys.
const INLINE: usize = 23;

/// The stem number of a word that gives no term (a stopword).
const NO_TERM: u32 = u32::MAX;

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// A lowercased word of at most [`INLINE`] bytes: its bytes, zero-padded,
/// and its length in the last byte, as three words, so a probe hashes and
/// compares three integers.
#[derive(Clone, Copy, PartialEq, Eq)]
struct InlineWord([u64; 3]);

impl std::hash::Hash for InlineWord {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for w in self.0 {
            state.write_u64(w);
        }
    }
}

impl InlineWord {
    /// The key of `word` (the bytes of a whole `str`), lowercased when
    /// `ascii_lower` (its bytes must then be ASCII), with the key's bytes,
    /// if it fits.
    fn new(word: &[u8], ascii_lower: bool) -> Option<(Self, [u8; INLINE + 1])> {
        let len = u8::try_from(word.len())
            .ok()
            .filter(|&n| usize::from(n) <= INLINE)?;
        let mut bytes = [0u8; INLINE + 1];
        bytes[..word.len()].copy_from_slice(word);
        bytes[INLINE] = len;
        let mut key = [0u64; 3];
        for (w, chunk) in key.iter_mut().zip(bytes.chunks_exact_mut(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
            if ascii_lower {
                // The length byte (at most 23) and the padding are below
                // `A`: unchanged.
                *w = ascii_lowercase(*w);
                chunk.copy_from_slice(&w.to_le_bytes());
            }
        }
        Some((InlineWord(key), bytes))
    }
}

/// Eight ASCII bytes lowercased at once (`u8::to_ascii_lowercase` on each;
/// `tests::eight_bytes_lowercase_as_one`).
fn ascii_lowercase(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    // Every byte is below 0x80, so these sums never carry into the next
    // byte: a byte's high bit says whether it reached `A`, and past `Z`.
    let from_a = x + ONES * (0x80 - u64::from(b'A'));
    let past_z = x + ONES * (0x80 - u64::from(b'Z') - 1);
    let upper = from_a & !past_z & (ONES * 0x80);
    x | (upper >> 2)
}

/// Words already analysed on this thread, each with the number of its
/// stem; stemming is the most expensive step of analysis and vocabulary
/// repeats heavily. Stems are numbered in order of first sight, so a text
/// is counted by number, and stored once, concatenated.
#[derive(Default)]
struct Memo {
    short: HashMap<InlineWord, u32>,
    long: HashMap<Box<str>, u32>,
    /// Stem text to number (consulted only when a word is new).
    numbers: HashMap<Box<str>, u32>,
    /// Every stem, concatenated.
    stems: String,
    /// Stem `n`'s span in `stems`, and its first 8 bytes as a big-endian
    /// number (zero-padded: stems hold no NUL), so most comparisons of a
    /// sort by text are one integer compare.
    spans: Vec<(u32, u32, u64)>,
}

impl Memo {
    fn words(&self) -> usize {
        self.short.len() + self.long.len()
    }

    fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
        self.numbers.clear();
        self.stems.clear();
        self.spans.clear();
    }

    /// Stem number `n` (one this memo gave since it was last emptied).
    fn stem(&self, n: u32) -> &str {
        let (start, end, _) = self.spans[n as usize];
        self.stems.get(start as usize..end as usize).unwrap_or("")
    }

    /// Orders stem numbers by their stems' text.
    fn by_text(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let head = |n: u32| self.spans[n as usize].2;
        head(a)
            .cmp(&head(b))
            .then_with(|| self.stem(a).cmp(self.stem(b)))
    }

    /// The stem number of `word` as it appears in text (any case), or
    /// [`NO_TERM`].
    fn number(&mut self, word: &str, analyzer: &Analyzer) -> u32 {
        if word.is_ascii()
            && let Some((key, bytes)) = InlineWord::new(word.as_bytes(), true)
        {
            // The same as `char::to_lowercase` on ASCII, without decoding
            // characters one by one.
            return self.inline(key, &bytes[..word.len()], analyzer);
        }
        let lower: String = word.chars().flat_map(char::to_lowercase).collect();
        if let Some((key, _)) = InlineWord::new(lower.as_bytes(), false) {
            return self.inline(key, lower.as_bytes(), analyzer);
        }
        if let Some(&n) = self.long.get(lower.as_str()) {
            return n;
        }
        let n = self.stem_number(&lower, analyzer);
        self.long.insert(lower.into_boxed_str(), n);
        n
    }

    /// The stem number of a short word; `lower` is its lowercased bytes.
    fn inline(&mut self, key: InlineWord, lower: &[u8], analyzer: &Analyzer) -> u32 {
        if let Some(&n) = self.short.get(&key) {
            return n;
        }
        // Lowercase ASCII, or the bytes of a lowercased `str`.
        let n = self.stem_number(std::str::from_utf8(lower).unwrap_or(""), analyzer);
        self.short.insert(key, n);
        n
    }

    /// Stems a lowercased word met for the first time and numbers its stem.
    fn stem_number(&mut self, lower: &str, analyzer: &Analyzer) -> u32 {
        if analyzer.stopwords.contains(lower) {
            return NO_TERM;
        }
        let stem = analyzer.stemmer.stem(lower);
        if stem.is_empty() {
            return NO_TERM;
        }
        if let Some(&n) = self.numbers.get(stem.as_ref()) {
            return n;
        }
        let n = u32::try_from(self.spans.len()).unwrap_or(NO_TERM - 1);
        let start = u32::try_from(self.stems.len()).unwrap_or(u32::MAX);
        self.stems.push_str(&stem);
        let end = u32::try_from(self.stems.len()).unwrap_or(u32::MAX);
        let mut head = [0u8; 8];
        let k = stem.len().min(8);
        head[..k].copy_from_slice(&stem.as_bytes()[..k]);
        self.spans.push((start, end, u64::from_be_bytes(head)));
        self.numbers.insert(stem.into_owned().into_boxed_str(), n);
        n
    }
}

/// Terms of one document with their frequencies: distinct terms, sorted,
/// kept in one string (two allocations a document, not one a term).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TermFreqs {
    /// The distinct terms, sorted, concatenated.
    text: String,
    /// Where each term ends in `text`, and how often it occurs.
    ends: Vec<(u32, u32)>,
    /// Total number of terms (the BM25 document length).
    len: u32,
}

impl TermFreqs {
    /// Terms and counts given in any order (repeats are added up), with
    /// the document length.
    pub fn from_counts<S: AsRef<str>>(
        counts: impl IntoIterator<Item = (S, u32)>,
        doc_len: u32,
    ) -> Self {
        let mut pairs: Vec<(S, u32)> = counts.into_iter().collect();
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut out = TermFreqs {
            len: doc_len,
            ..TermFreqs::default()
        };
        for (term, n) in &pairs {
            let term = term.as_ref();
            if out.iter().last().is_some_and(|(last, _)| last == term) {
                if let Some(last) = out.ends.last_mut() {
                    last.1 += n;
                }
            } else {
                out.push(term, *n);
            }
        }
        out
    }

    fn push(&mut self, term: &str, count: u32) {
        self.text.push_str(term);
        let end = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.ends.push((end, count));
    }

    /// The distinct terms, sorted, with how often each occurs.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, u32)> + '_ {
        let mut start = 0usize;
        self.ends.iter().map(move |&(end, count)| {
            let term = self.text.get(start..end as usize).unwrap_or("");
            start = end as usize;
            (term, count)
        })
    }

    /// Bytes of the distinct terms' text, together.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// How many distinct terms.
    pub fn distinct(&self) -> usize {
        self.ends.len()
    }

    /// Whether the document has no term.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total number of terms (the BM25 document length).
    pub fn doc_len(&self) -> u32 {
        self.len
    }

    /// The same terms with document length `len` (for decoders that keep
    /// the length apart from the terms).
    #[must_use]
    pub fn with_doc_len(mut self, len: u32) -> Self {
        self.len = len;
        self
    }
}

/// Serde for the terms of a [`TermFreqs`] (not its length) as a sequence
/// of `(term, count)` pairs: the layout of a `Vec<(String, u32)>`, which
/// stored records already use, read without a `String` per term. For
/// `#[serde(with = "hippocamp_search::analyzer::term_list")]`.
pub mod term_list {
    use std::fmt;

    use serde::de::{DeserializeSeed, SeqAccess, Visitor};
    use serde::ser::SerializeSeq as _;
    use serde::{Deserializer, Serializer};

    use super::TermFreqs;

    /// Writes the terms and counts.
    pub fn serialize<S: Serializer>(terms: &TermFreqs, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(terms.distinct()))?;
        for pair in terms.iter() {
            seq.serialize_element(&pair)?;
        }
        seq.end()
    }

    /// Reads terms and counts, in the order written; the document length
    /// is left at 0 (see [`TermFreqs::with_doc_len`]).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TermFreqs, D::Error> {
        d.deserialize_seq(Terms)
    }

    struct Terms;

    impl<'de> Visitor<'de> for Terms {
        type Value = TermFreqs;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a sequence of (term, count) pairs")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TermFreqs, A::Error> {
            let mut out = TermFreqs::default();
            out.ends.reserve(seq.size_hint().unwrap_or(0).min(4_096));
            while seq.next_element_seed(Pair(&mut out))?.is_some() {}
            Ok(out)
        }
    }

    /// One `(term, count)` pair, appended to the terms being read.
    struct Pair<'a>(&'a mut TermFreqs);

    impl<'de> DeserializeSeed<'de> for Pair<'_> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_tuple(2, self)
        }
    }

    impl<'de> Visitor<'de> for Pair<'_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a (term, count) pair")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let missing = || serde::de::Error::custom("a term pair is incomplete");
            let at = self.0.text.len();
            seq.next_element_seed(Text(&mut self.0.text))?
                .ok_or_else(missing)?;
            let count: u32 = seq.next_element()?.ok_or_else(missing)?;
            if self.0.text.len() == at {
                return Err(serde::de::Error::custom("a stored term is empty"));
            }
            let end = u32::try_from(self.0.text.len())
                .map_err(|_| serde::de::Error::custom("stored terms are too long"))?;
            self.0.ends.push((end, count));
            Ok(())
        }
    }

    /// A term, appended to the terms' text.
    struct Text<'a>(&'a mut String);

    impl<'de> DeserializeSeed<'de> for Text<'_> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_str(self)
        }
    }

    impl Visitor<'_> for Text<'_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a term")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
            self.0.push_str(v);
            Ok(())
        }
    }
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

/// One shared English analyser, for callers that hold none.
pub fn english() -> &'static Analyzer {
    static ENGLISH: std::sync::LazyLock<Analyzer> = std::sync::LazyLock::new(Analyzer::english);
    &ENGLISH
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
        self.with_numbers(text, |memo, numbers| {
            numbers.iter().map(|&n| memo.stem(n).to_owned()).collect()
        })
    }

    /// Runs `f` on the memo and the stem numbers of `text`'s terms, in
    /// order (numbers are valid only inside `f`: the memo may be emptied
    /// before the next text).
    fn with_numbers<R>(&self, text: &str, f: impl FnOnce(&Memo, &mut Vec<u32>) -> R) -> R {
        let folded;
        // ASCII text has no curly apostrophe to fold.
        let text = if !text.is_ascii() && text.contains('\u{2019}') {
            folded = text.replace('\u{2019}', "'");
            &folded
        } else {
            text
        };
        MEMO.with_borrow_mut(|memo| {
            if memo.words() >= MEMO_CAPACITY {
                memo.clear();
            }
            let mut numbers = Vec::with_capacity(text.len() / 6);
            let mut each_word = |word: &str| {
                let n = memo.number(word, self);
                if n != NO_TERM {
                    numbers.push(n);
                }
            };
            if text.is_ascii() {
                ascii_words(text, each_word);
            } else {
                text.unicode_words().for_each(&mut each_word);
            }
            f(memo, &mut numbers)
        })
    }

    /// The term frequencies and length of a document.
    pub fn analyze(&self, text: &str) -> TermFreqs {
        self.with_numbers(text, |memo, numbers| {
            let len = u32::try_from(numbers.len()).unwrap_or(u32::MAX);
            // Counted by stem number (integers), then only the distinct
            // terms are ordered by text.
            numbers.sort_unstable();
            let mut counts: Vec<(u32, u32)> = Vec::with_capacity(numbers.len());
            for &n in numbers.iter() {
                match counts.last_mut() {
                    Some((last, c)) if *last == n => *c += 1,
                    _ => counts.push((n, 1)),
                }
            }
            counts.sort_unstable_by(|a, b| memo.by_text(a.0, b.0));
            let bytes = counts.iter().map(|&(n, _)| memo.stem(n).len()).sum();
            let mut out = TermFreqs {
                text: String::with_capacity(bytes),
                ends: Vec::with_capacity(counts.len()),
                len,
            };
            for &(n, c) in &counts {
                out.push(memo.stem(n), c);
            }
            out
        })
    }

    /// The distinct terms of a query, sorted, each with how often the
    /// query says it: the same words in any order score identically, and a
    /// long query that keeps returning to a word weighs it more (bounded:
    /// see [`Bm25Params::k3`](crate::Bm25Params::k3)).
    pub fn query_terms(&self, query: &str) -> Vec<QueryTerm> {
        self.analyze(query)
            .iter()
            .map(|(term, count)| QueryTerm {
                term: term.to_owned(),
                count,
            })
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

    /// Analysis written plainly: a `String` per word, no memo.
    fn plain(text: &str) -> (Vec<(String, u32)>, u32) {
        let stemmer = Stemmer::create(Algorithm::English);
        let text = text.replace('\u{2019}', "'");
        let mut terms: Vec<String> = text
            .unicode_words()
            .map(|w| w.chars().flat_map(char::to_lowercase).collect::<String>())
            .filter(|w| !ENGLISH_STOPWORDS.contains(&w.as_str()))
            .map(|w| stemmer.stem(&w).into_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let len = u32::try_from(terms.len()).unwrap();
        terms.sort();
        let mut out: Vec<(String, u32)> = Vec::new();
        for t in terms {
            match out.last_mut() {
                Some((last, n)) if *last == t => *n += 1,
                _ => out.push((t, 1)),
            }
        }
        (out, len)
    }

    fn owned(tf: &TermFreqs) -> (Vec<(String, u32)>, u32) {
        let terms = tf.iter().map(|(t, n)| (t.to_owned(), n)).collect();
        (terms, tf.doc_len())
    }

    proptest::proptest! {
        #[test]
        fn analysis_equals_the_plain_one(
            text in "([A-Za-z]{1,30}|[Éé\u{2019}'ßİ]|[0-9.,:_]|[ \n!?]|Straße|ÉCOLE|running|the|don\u{2019}t){0,30}",
        ) {
            let a = Analyzer::english();
            proptest::prop_assert_eq!(owned(&a.analyze(&text)), plain(&text));
            // Again, now that every word is in the memo.
            proptest::prop_assert_eq!(owned(&a.analyze(&text)), plain(&text));
        }
    }

    proptest::proptest! {
        #[test]
        fn eight_bytes_lowercase_as_one(bytes in proptest::array::uniform8(0u8..0x80)) {
            let fast = ascii_lowercase(u64::from_le_bytes(bytes)).to_le_bytes();
            proptest::prop_assert_eq!(fast, bytes.map(|b| b.to_ascii_lowercase()));
        }
    }

    #[test]
    fn the_memo_is_emptied_when_full_and_analysis_is_unchanged() {
        let a = Analyzer::english();
        let text = "Running supervisors restarted the failed children twice";
        let before = a.analyze(text);
        // More distinct words than the memo holds, a text at a time.
        for chunk in 0..(MEMO_CAPACITY / 1_000 + 2) {
            let words: Vec<String> = (0..1_000).map(|i| format!("w{chunk}x{i}")).collect();
            let tf = a.analyze(&words.join(" "));
            assert_eq!(tf.distinct(), 1_000);
            assert!(MEMO.with_borrow(Memo::words) <= MEMO_CAPACITY + 1_000);
        }
        assert_eq!(a.analyze(text), before);
        assert_eq!(owned(&before), plain(text));
    }

    #[test]
    fn term_lists_keep_the_layout_of_a_vector_of_pairs() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Fast(#[serde(with = "term_list")] TermFreqs);
        let tf = Analyzer::english().analyze("dogs chase cats; cats chase mice");
        let pairs: Vec<(String, u32)> = tf.iter().map(|(t, n)| (t.to_owned(), n)).collect();
        let json = serde_json::to_string(&Fast(tf.clone())).unwrap();
        assert_eq!(json, serde_json::to_string(&pairs).unwrap());
        let back: Fast = serde_json::from_str(&json).unwrap();
        assert_eq!(back.0.with_doc_len(tf.doc_len()), tf);
        assert_eq!(
            TermFreqs::from_counts(pairs.iter().rev().map(|(t, n)| (t.as_str(), *n)), 6),
            tf
        );
    }

    #[test]
    fn analyze_counts_terms() {
        let a = Analyzer::english();
        let tf = a.analyze("run runs running fast");
        assert_eq!(tf.doc_len(), 4);
        assert_eq!(tf.iter().collect::<Vec<_>>(), [("fast", 1), ("run", 3)]);
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
