//! A deterministic corpus of realistic short texts for benchmarks: LoCoMo
//! turns and Cranfield sentences, combined pairwise when more texts are
//! needed than the data holds, so a scope of any size has natural term
//! statistics.

use std::path::Path;

use crate::DatasetError;

/// All distinct base texts: every LoCoMo turn and every Cranfield sentence.
pub fn base_texts(data_dir: &Path) -> Result<Vec<String>, DatasetError> {
    let mut texts = Vec::new();
    for sample in crate::locomo::load(&data_dir.join("locomo/locomo-dev.json"))? {
        for session in sample.sessions {
            texts.extend(session.turns.iter().map(crate::locomo::Turn::memory_text));
        }
    }
    let cran = crate::cranfield::load(&data_dir.join("cranfield"))?;
    for doc in cran.docs {
        for sentence in doc.content().split(" .") {
            let s = sentence.trim();
            if s.len() > 20 {
                texts.push(s.to_owned());
            }
        }
    }
    Ok(texts)
}

/// `n` texts: the base texts first, then pairs of them in a fixed
/// pseudo-random order.
pub fn texts(data_dir: &Path, n: usize) -> Result<Vec<String>, DatasetError> {
    let base = base_texts(data_dir)?;
    let mut out: Vec<String> = base.iter().take(n).cloned().collect();
    let len = base.len().max(1);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < n {
        // xorshift64: a fixed sequence, so every run builds the same corpus.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = usize::try_from(x % len as u64).unwrap_or(0);
        let j = usize::try_from((x >> 32) % len as u64).unwrap_or(0);
        out.push(format!("{} {}", base[i], base[j]));
    }
    Ok(out)
}

/// Queries for benchmarks: the LoCoMo questions.
pub fn queries(data_dir: &Path) -> Result<Vec<String>, DatasetError> {
    Ok(
        crate::locomo::load(&data_dir.join("locomo/locomo-dev.json"))?
            .into_iter()
            .flat_map(|s| s.questions.into_iter().map(|q| q.text))
            .collect(),
    )
}
