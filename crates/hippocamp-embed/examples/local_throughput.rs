//! Embedding throughput of a local model: `cargo run --release -p
//! hippocamp-embed --features local --example local_throughput -- MODEL_DIR
//! [CHUNK_INPUTS]`. Embeds LoCoMo-like short texts (~20 words) in batches
//! of 1, 8, 32 and 128 and prints texts per second for each; the model
//! runs forward passes of `CHUNK_INPUTS` texts (default: the
//! `embed.local.chunk_inputs` default).

use std::time::{Duration, Instant};

use hippocamp_core::Deadline;
use hippocamp_embed::local::LocalEmbedder;
use hippocamp_embed::{EmbedLimits, Embedder, InputKind};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: local_throughput MODEL_DIR")?;
    let mut local = hippocamp_embed::LocalLimits::default();
    if let Some(chunk) = std::env::args().nth(2) {
        local.chunk_inputs = chunk.parse()?;
    }
    println!("chunk_inputs: {}", local.chunk_inputs);
    let started = Instant::now();
    let e = LocalEmbedder::load(std::path::Path::new(&dir), EmbedLimits::default(), local)?;
    println!("load: {:.2} s", started.elapsed().as_secs_f64());
    let words = "I went hiking with my sister last weekend and we saw a waterfall near the old mill by the lake";
    let texts: Vec<String> = (0..256).map(|i| format!("{i}: {words}")).collect();
    for batch in [1usize, 8, 32, 128] {
        let started = Instant::now();
        let mut n = 0;
        while started.elapsed() < Duration::from_secs(5) {
            for chunk in texts.chunks(batch) {
                e.embed(
                    chunk,
                    InputKind::Passage,
                    Deadline::after(Duration::from_mins(1)),
                )
                .await?;
                n += chunk.len();
            }
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        println!("batch {batch:>3}: {rate:.0} texts/s");
    }
    Ok(())
}
