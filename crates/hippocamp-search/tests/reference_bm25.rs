//! The optimised engine (analyser, inverted index, BM25, ranking) against a
//! plain reference written for clarity, not speed, on the shared data: for
//! every LoCoMo question (per conversation) and every Cranfield query, the
//! top 50 must be the same documents in the same order with the same
//! scores. Swaps are allowed only between documents whose reference scores
//! tie.

#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use std::collections::HashMap;

use hippocamp_search::analyzer::ENGLISH_STOPWORDS;
use hippocamp_search::{Analyzer, Bm25Params, InvertedIndex};
use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

const TOP: usize = 50;

fn data() -> Option<std::path::PathBuf> {
    hippocamp_testkit::shared_data()
}

/// Analysis as the analyser's docs describe it, one word at a time.
fn plain_terms(stemmer: &Stemmer, text: &str) -> Vec<String> {
    text.replace('\u{2019}', "'")
        .unicode_words()
        .map(|w| w.chars().flat_map(char::to_lowercase).collect::<String>())
        .filter(|w| !ENGLISH_STOPWORDS.contains(&w.as_str()))
        .map(|w| stemmer.stem(&w).into_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// BM25 straight from its formula, in f64, over a whole collection.
struct Reference {
    docs: Vec<HashMap<String, f64>>,
    lens: Vec<f64>,
    df: HashMap<String, f64>,
}

impl Reference {
    fn new(stemmer: &Stemmer, texts: &[String]) -> Self {
        let mut docs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, f64> = HashMap::new();
        for t in texts {
            let terms = plain_terms(stemmer, t);
            lens.push(terms.len() as f64);
            let mut tf: HashMap<String, f64> = HashMap::new();
            for term in terms {
                *tf.entry(term).or_default() += 1.0;
            }
            for term in tf.keys() {
                *df.entry(term.clone()).or_default() += 1.0;
            }
            docs.push(tf);
        }
        Self { docs, lens, df }
    }

    /// (doc, score) of every matching document, best first (ties: smaller
    /// doc first, as the engine breaks them at equal recency).
    fn search(&self, stemmer: &Stemmer, query: &str, p: Bm25Params) -> Vec<(usize, f64)> {
        let (k1, b, k3) = (f64::from(p.k1), f64::from(p.b), f64::from(p.k3));
        let n = self.docs.len() as f64;
        let avg = self.lens.iter().sum::<f64>() / n;
        let mut qtf: HashMap<String, f64> = HashMap::new();
        for t in plain_terms(stemmer, query) {
            *qtf.entry(t).or_default() += 1.0;
        }
        let mut out = Vec::new();
        for (d, tf) in self.docs.iter().enumerate() {
            let mut score = 0.0;
            let mut matched = false;
            for (term, &q) in &qtf {
                let Some(&f) = tf.get(term) else { continue };
                matched = true;
                let df = self.df[term];
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let weight = (k3 + 1.0) * q / (k3 + q);
                score +=
                    weight * idf * f * (k1 + 1.0) / (f + k1 * (1.0 - b + b * self.lens[d] / avg));
            }
            if matched {
                out.push((d, score));
            }
        }
        out.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        out
    }
}

/// Compares the engine with the reference on one collection; returns the
/// number of queries checked.
fn check(texts: &[String], queries: &[String]) -> usize {
    let stemmer = Stemmer::create(Algorithm::English);
    let analyzer = Analyzer::english();
    let reference = Reference::new(&stemmer, texts);
    let mut index = InvertedIndex::new();
    for (i, t) in texts.iter().enumerate() {
        let tf = analyzer.analyze(t);
        // The analyser's own output against the plain analysis.
        let mut plain: Vec<(String, u32)> = Vec::new();
        let mut terms = plain_terms(&stemmer, t);
        assert_eq!(tf.doc_len() as usize, terms.len(), "length of {t:?}");
        terms.sort();
        for term in terms {
            match plain.last_mut() {
                Some((last, n)) if *last == term => *n += 1,
                _ => plain.push((term, 1)),
            }
        }
        let got: Vec<(String, u32)> = tf.iter().map(|(t, n)| (t.to_owned(), n)).collect();
        assert_eq!(got, plain, "analysis of {t:?}");
        index.insert(i, &tf, 0);
    }
    let p = Bm25Params::default();
    for q in queries {
        let want = reference.search(&stemmer, q, p);
        let got: Vec<_> = index
            .search(&analyzer.query_terms(q), p)
            .take(TOP)
            .collect();
        assert_eq!(got.len(), want.len().min(TOP), "hits for {q:?}");
        let score_of: HashMap<usize, f64> = want.iter().copied().collect();
        for (rank, c) in got.iter().enumerate() {
            let tol = 1e-4 * want[rank].1.abs().max(1.0);
            // The same score at each rank, and the document there has it.
            assert!(
                (f64::from(c.score) - want[rank].1).abs() <= tol,
                "score at rank {rank} for {q:?}: {} vs {}",
                c.score,
                want[rank].1
            );
            assert!(
                (score_of[&c.key] - want[rank].1).abs() <= tol,
                "document at rank {rank} for {q:?}: {} (reference {}), want {} ({})",
                c.key,
                score_of[&c.key],
                want[rank].0,
                want[rank].1
            );
        }
    }
    queries.len()
}

#[test]
fn locomo_rankings_equal_the_reference() {
    let Some(dir) = data() else { return };
    let samples = hippocamp_datasets::locomo::load(&dir.join("locomo/locomo-dev.json")).unwrap();
    let mut checked = 0;
    for s in &samples {
        let texts: Vec<String> = s
            .sessions
            .iter()
            .flat_map(|session| {
                session
                    .turns
                    .iter()
                    .map(hippocamp_datasets::locomo::Turn::memory_text)
            })
            .collect();
        let queries: Vec<String> = s.questions.iter().map(|q| q.text.clone()).collect();
        checked += check(&texts, &queries);
    }
    assert!(checked >= 1_000, "{checked} questions");
}

#[test]
fn cranfield_rankings_equal_the_reference() {
    let Some(dir) = data() else { return };
    let c = hippocamp_datasets::cranfield::load(&dir.join("cranfield")).unwrap();
    let texts: Vec<String> = c
        .docs
        .iter()
        .map(hippocamp_datasets::cranfield::Doc::content)
        .filter(|t| !t.is_empty())
        .collect();
    let queries: Vec<String> = c.queries.iter().map(|q| q.text.clone()).collect();
    assert_eq!(check(&texts, &queries), 225);
}
