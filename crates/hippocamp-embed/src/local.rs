//! A local BERT-family sentence-transformer (e.g. all-MiniLM-L6-v2) on the
//! CPU with candle: tokenise with the model's `tokenizer.json` (padded to
//! the longest text of the batch, never to the file's fixed length),
//! run the encoder, mean-pool the token states under the attention mask,
//! L2-normalise.
//!
//! The weights are read into memory (`from_buffered_safetensors`) rather
//! than memory-mapped: mapping is `unsafe` in candle and this crate forbids
//! unsafe code; the 90 MB copy costs a fraction of a second at start.
//! Inference runs on a blocking thread, a call's texts in forward passes
//! of similar lengths (shortest first; at most `embed.local.chunk_inputs`
//! texts and that many times 256 padded bytes each), and at most
//! `embed.local.max_concurrent_batches` calls infer at once (a call waits
//! for a slot within its deadline). A call that outlives its deadline
//! returns `Timeout` at the deadline; its work stops before its next
//! chunk and gives its slot back then, so abandoned calls cannot pile up
//! on the blocking pool (candle cannot stop a forward pass midway: one
//! chunk is what a late call costs).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use hippocamp_core::{Deadline, Error, Problem, Result, Stage};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{EmbedLimits, Embedder, InputKind, LocalLimits, Vector, check_reply, check_request};

const SERVICE: &str = "the local embedding model";

struct Model {
    bert: BertModel,
    tokenizer: Tokenizer,
}

/// A sentence-transformer loaded from a directory holding `config.json`,
/// `model.safetensors` and `tokenizer.json`.
#[derive(Clone)]
pub struct LocalEmbedder {
    model: Arc<Model>,
    name: String,
    dimension: usize,
    limits: EmbedLimits,
    local: LocalLimits,
    /// One permit per call allowed to infer at once; held by the
    /// inference itself, so a call abandoned at its deadline keeps it
    /// until its work really stops.
    slots: Arc<tokio::sync::Semaphore>,
    /// Forward passes run (chunks), for tests and diagnostics.
    passes: Arc<AtomicU64>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("name", &self.name)
            .field("dimension", &self.dimension)
            .finish_non_exhaustive()
    }
}

fn load_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::config(
        "embedder.model_dir",
        Problem::Malformed(format!("{what}: {e}")),
    )
}

fn infer(e: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("{SERVICE} failed: {e}"))
}

impl LocalEmbedder {
    /// Loads the model in `dir`; its name is the directory's (or its
    /// parent's, for a directory called `model`).
    pub fn load(dir: &Path, limits: EmbedLimits, local: LocalLimits) -> Result<Self> {
        limits.validate()?;
        local.validate()?;
        let read = |f: &str| -> Result<Vec<u8>> {
            std::fs::read(dir.join(f)).map_err(|e| load_err(&format!("cannot read {f}"), e))
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| load_err("config.json", e))?;
        let vb = VarBuilder::from_buffered_safetensors(
            read("model.safetensors")?,
            DType::F32,
            &Device::Cpu,
        )
        .map_err(|e| load_err("model.safetensors", e))?;
        let bert = BertModel::load(vb, &config).map_err(|e| load_err("the weights", e))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| load_err("tokenizer.json", e))?;
        // The shipped file pads every input to a fixed length; padding to
        // the batch's longest text is as exact (the mask hides padding)
        // and much faster.
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: config.max_position_embeddings.min(512),
                ..TruncationParams::default()
            }))
            .map_err(|e| load_err("tokenizer.json", e))?;
        let name = model_name(dir);
        Ok(Self {
            model: Arc::new(Model { bert, tokenizer }),
            name,
            dimension: config.hidden_size,
            limits,
            slots: Arc::new(tokio::sync::Semaphore::new(
                usize::try_from(local.max_concurrent_batches).unwrap_or(1),
            )),
            local,
            passes: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Forward passes run so far (one per chunk).
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }
}

fn model_name(dir: &Path) -> String {
    let dir: PathBuf = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let last = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    match last.as_deref() {
        Some("model") => dir
            .parent()
            .and_then(Path::file_name)
            .map_or_else(|| "model".to_owned(), |n| n.to_string_lossy().into_owned()),
        Some(n) => n.to_owned(),
        None => "local-model".to_owned(),
    }
}

/// Padded bytes a forward pass may hold per input of `chunk_inputs`: a
/// pass of 32 inputs holds 32 texts of 256 bytes (about 64 tokens, a
/// long chat turn), or fewer longer ones.
const PASS_BYTES_PER_INPUT: usize = 256;

/// The forward passes of `texts`, as indices: by length, shortest first,
/// so each pass pads its texts to a similar length, and each holds at
/// most `chunk` texts and at most `chunk × 256` padded bytes (its count
/// times its longest): one pass padded a reranking call's 20 short turns
/// to its longest one.
fn passes_of(texts: &[String], chunk: usize) -> Vec<Vec<usize>> {
    let chunk = chunk.max(1);
    let budget = chunk * PASS_BYTES_PER_INPUT;
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut pass: Vec<usize> = Vec::new();
    for i in order {
        let longest = texts[i].len().max(1);
        if !pass.is_empty() && (pass.len() == chunk || (pass.len() + 1) * longest > budget) {
            out.push(std::mem::take(&mut pass));
        }
        pass.push(i);
    }
    if !pass.is_empty() {
        out.push(pass);
    }
    out
}

impl Model {
    /// [`Model::embed`] pass by pass ([`passes_of`]), stopping before the
    /// next pass once `stop` is set or `deadline` has passed.
    fn embed_chunked(
        &self,
        texts: &[String],
        chunk: usize,
        stop: &AtomicBool,
        deadline: Deadline,
        passes: &AtomicU64,
    ) -> Result<Vec<Vector>> {
        let mut out: Vec<Option<Vector>> = vec![None; texts.len()];
        for part in passes_of(texts, chunk) {
            if stop.load(Ordering::Relaxed) || deadline.expired() {
                return Err(Error::Timeout(Stage::Embedding));
            }
            passes.fetch_add(1, Ordering::Relaxed);
            let batch: Vec<String> = part.iter().map(|&i| texts[i].clone()).collect();
            for (i, v) in part.iter().zip(self.embed(&batch)?) {
                out[*i] = Some(v);
            }
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| infer("a text was not embedded")))
            .collect()
    }

    /// Mean-pooled, normalised sentence vectors.
    fn embed(&self, texts: &[String]) -> Result<Vec<Vector>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(infer)?;
        let rows = encodings.len();
        let cols = encodings.first().map_or(0, |e| e.get_ids().len());
        let flat = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Vec<u32> {
            encodings
                .iter()
                .flat_map(|e| f(e).iter().copied())
                .collect()
        };
        let tensor = |v: Vec<u32>| Tensor::from_vec(v, (rows, cols), &Device::Cpu).map_err(infer);
        let ids = tensor(flat(&|e| e.get_ids()))?;
        let types = tensor(flat(&|e| e.get_type_ids()))?;
        let mask = tensor(flat(&|e| e.get_attention_mask()))?;
        let states = self
            .bert
            .forward(&ids, &types, Some(&mask))
            .map_err(infer)?;
        let mask = mask
            .to_dtype(DType::F32)
            .and_then(|m| m.unsqueeze(2))
            .map_err(infer)?;
        let summed = states
            .broadcast_mul(&mask)
            .and_then(|s| s.sum(1))
            .map_err(infer)?;
        let counts = mask
            .sum(1)
            .and_then(|c| c.clamp(1e-9, f64::MAX))
            .map_err(infer)?;
        let mean = summed.broadcast_div(&counts).map_err(infer)?;
        let norms = mean
            .sqr()
            .and_then(|s| s.sum_keepdim(1))
            .and_then(|s| s.sqrt())
            .and_then(|n| n.clamp(1e-12, f64::MAX))
            .map_err(infer)?;
        mean.broadcast_div(&norms)
            .and_then(|t| t.to_vec2::<f32>())
            .map_err(infer)
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model(&self) -> &str {
        &self.name
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn limits(&self) -> &EmbedLimits {
        &self.limits
    }

    fn describe_limits(&self) -> Vec<hippocamp_core::LimitInfo> {
        let mut all = self.limits.describe();
        all.extend(self.local.describe());
        all
    }

    async fn embed(
        &self,
        texts: &[String],
        _kind: InputKind,
        deadline: Deadline,
    ) -> Result<Vec<Vector>> {
        check_request(&self.limits, texts)?;
        deadline.check(Stage::Embedding)?;
        let late = |_| Error::Timeout(Stage::Embedding);
        let slot = tokio::time::timeout(
            deadline.remaining(),
            Arc::clone(&self.slots).acquire_owned(),
        )
        .await
        .map_err(late)?
        .map_err(infer)?;
        let model = Arc::clone(&self.model);
        let owned = texts.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let (chunk, passes) = (
            usize::try_from(self.local.chunk_inputs).unwrap_or(1),
            Arc::clone(&self.passes),
        );
        let job = {
            let stop = Arc::clone(&stop);
            tokio::task::spawn_blocking(move || {
                let _slot = slot;
                model.embed_chunked(&owned, chunk, &stop, deadline, &passes)
            })
        };
        let Ok(done) = tokio::time::timeout(deadline.remaining(), job).await else {
            // The work stops before its next chunk.
            stop.store(true, Ordering::Relaxed);
            return Err(Error::Timeout(Stage::Embedding));
        };
        let vectors = done.map_err(infer)??;
        check_reply(
            SERVICE,
            &self.limits,
            &self.name,
            None,
            texts.len(),
            self.dimension,
            &vectors,
        )?;
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_group_similar_lengths_within_both_bounds() {
        let texts: Vec<String> = [10, 1_000, 20, 5_000, 30, 15]
            .iter()
            .map(|n| "x".repeat(*n))
            .collect();
        let passes = passes_of(&texts, 4);
        assert_eq!(passes, vec![vec![0, 5, 2, 4], vec![1], vec![3]]);
        let passes = passes_of(&texts, 2);
        assert_eq!(passes, vec![vec![0, 5], vec![2, 4], vec![1], vec![3]]);
        let mut seen: Vec<usize> = passes.concat();
        seen.sort_unstable();
        assert_eq!(seen, (0..texts.len()).collect::<Vec<_>>());
        assert!(passes_of(&[], 4).is_empty());
    }
}
