//! A Rust agent on hippocamp: a model on any OpenAI-compatible endpoint,
//! in-memory memory, artifacts and sessions, memory preload and the
//! `load_memory` tool, two turns of one session.
//!
//! ```sh
//! scripts/chat-model.sh start   # or any OpenAI-compatible endpoint
//! cargo run --release --example agent -- http://127.0.0.1:18030/v1 smollm2
//! ```

use std::sync::Arc;

use hippocamp_agent::{Agent, AgentServices, PreloadOptions, Runner, RunnerOptions, builtins};
use hippocamp_artifacts::{ArtifactLimits, InMemoryArtifacts};
use hippocamp_core::MemoryScope;
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore, NewEntry, WriteOptions};
use hippocamp_models::{ModelConfig, ModelLimits, Provider, ToolChoice};
use hippocamp_sessions::{InMemorySessions, SessionLimits};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(model)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: agent BASE_URL MODEL (e.g. http://127.0.0.1:18030/v1 smollm2)");
    };
    let memory: Arc<dyn MemoryStore> = Arc::new(InMemoryStore::new(MemoryConfig::default())?);
    let scope = MemoryScope::parse("demo", "alice")?;
    memory
        .add_entry(
            &scope,
            NewEntry::new("Alice lives in Lisbon and keeps two cats."),
            &WriteOptions::default(),
        )
        .await?;
    let services = AgentServices {
        sessions: Arc::new(InMemorySessions::new(SessionLimits::default())?),
        memory: Some(memory),
        artifacts: Some(Arc::new(InMemoryArtifacts::new(ArtifactLimits::default())?)),
        outbox: None,
    };
    let runner = Runner::new(
        Agent {
            name: "assistant".into(),
            model: hippocamp_models::connect(ModelConfig {
                provider: Provider::Openai,
                base_url: url,
                model,
                api_key: std::env::var("HIPPOCAMP_MODEL_API_KEY").ok(),
                limits: ModelLimits::default(),
            })?,
            instruction: "You are a helpful assistant. Answer briefly.".into(),
            tools: builtins(&["load_memory"])?,
        },
        services,
        RunnerOptions {
            preload: Some(PreloadOptions::default()),
            first_tool_choice: Some(ToolChoice::Required),
            temperature: Some(0.0),
            max_output_tokens: Some(160),
            ..RunnerOptions::default()
        },
    )?;
    for message in ["Where do I live?", "How many cats do I have?"] {
        let out = runner.run("demo", "alice", "s1", message).await?;
        println!(
            "> {message}\n{}\n({} model calls, {} tool calls)",
            out.answer, out.model_calls, out.tool_calls
        );
    }
    Ok(())
}
