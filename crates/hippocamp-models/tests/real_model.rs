//! The chat-completions client against a real small model
//! (SmolLM2-135M-Instruct on llama.cpp, `scripts/chat-model.sh start`):
//! a required tool call comes back as a parsed call, and the tool's
//! result sent back as a `role: tool` message is accepted and answered.
//! A 135M model does not answer well; the wire is what is tested.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hippocamp_core::Deadline;
use hippocamp_models::{
    Content, FunctionResponse, ModelConfig, ModelLimits, ModelRequest, Part, Provider, ToolChoice,
    ToolDeclaration, USER, connect,
};
use serde_json::json;

#[tokio::test]
async fn a_real_model_calls_a_required_tool_and_reads_its_result() {
    let Some(url) =
        hippocamp_testkit::env("HIPPOCAMP_TEST_CHAT_URL", "scripts/chat-model.sh start")
    else {
        return;
    };
    let model = connect(ModelConfig {
        provider: Provider::Openai,
        base_url: url,
        model: std::env::var("HIPPOCAMP_TEST_CHAT_MODEL").unwrap_or_else(|_| "smollm2".into()),
        api_key: None,
        limits: ModelLimits::default(),
    })
    .unwrap();
    let mut request = ModelRequest {
        system: Some("You answer questions about the user. Use the tools.".into()),
        contents: vec![Content {
            role: Some(USER.into()),
            parts: vec![Part::text("Which city do I live in?")],
        }],
        tools: vec![ToolDeclaration {
            name: "load_memory".into(),
            description: "Search the user's long-term memory.".into(),
            parameters: json!({"type": "object",
                "properties": {"query": {"type": "string", "maxLength": 64}},
                "required": ["query"], "additionalProperties": false}),
        }],
        tool_choice: ToolChoice::Required,
        temperature: Some(0.0),
        max_output_tokens: Some(200),
    };
    let deadline = || Deadline::after(Duration::from_mins(2));
    let first = model.generate(&request, deadline()).await.unwrap();
    let call = first.function_calls().next().cloned().expect("a tool call");
    assert_eq!(call.name, "load_memory");
    assert!(call.args["query"].is_string(), "{:?}", call.args);
    assert!(call.id.is_some());

    request.contents.push(first.content.clone());
    request.contents.push(Content {
        role: Some(USER.into()),
        parts: vec![Part::response(FunctionResponse {
            id: call.id.clone(),
            name: call.name.clone(),
            response: json!({"hits": [{"content": "The user lives in Lisbon."}]}),
        })],
    });
    request.tool_choice = ToolChoice::None;
    let answer = model.generate(&request, deadline()).await.unwrap();
    assert!(!answer.text().trim().is_empty());
    assert_eq!(answer.function_calls().count(), 0);
}
