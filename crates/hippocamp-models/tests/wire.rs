//! Both clients against a loopback server speaking their real wire
//! formats, including malformed and hostile replies.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use hippocamp_core::{Deadline, Error, Field, Stage};
use hippocamp_models::scripted::{Reply, Scripted};
use hippocamp_models::{
    Content, FunctionCall, FunctionResponse, MODEL, ModelConfig, ModelLimits, ModelRequest, Part,
    Provider, ToolChoice, ToolDeclaration, USER, connect,
};
use serde_json::{Value, json};

fn config(provider: Provider, base: String) -> ModelConfig {
    ModelConfig {
        provider,
        base_url: base,
        model: "m-1".into(),
        api_key: Some("sk-test".into()),
        limits: ModelLimits::default(),
    }
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(10))
}

/// A conversation with every kind of content: a user turn, a model turn
/// with a tool call, the tool's result, and the offer of one tool.
fn conversation() -> ModelRequest {
    ModelRequest {
        system: Some("Be brief.".into()),
        contents: vec![
            Content {
                role: Some(USER.into()),
                parts: vec![Part::text("Where do I live?")],
            },
            Content {
                role: Some(MODEL.into()),
                parts: vec![Part::call(FunctionCall {
                    id: Some("call_7".into()),
                    name: "load_memory".into(),
                    args: json!({"query": "home city"}),
                })],
            },
            Content {
                role: Some(USER.into()),
                parts: vec![Part::response(FunctionResponse {
                    id: Some("call_7".into()),
                    name: "load_memory".into(),
                    response: json!({"hits": [{"content": "Lisbon"}]}),
                })],
            },
        ],
        tools: vec![ToolDeclaration {
            name: "load_memory".into(),
            description: "Search memory".into(),
            parameters: json!({"type": "object",
                "properties": {"query": {"type": "string", "maxLength": 100}},
                "required": ["query"], "additionalProperties": false}),
        }],
        tool_choice: ToolChoice::Required,
        temperature: Some(0.0),
        max_output_tokens: Some(64),
    }
}

#[tokio::test]
async fn openai_requests_carry_messages_tools_and_tool_results() {
    let server = Scripted::start(vec![Reply::openai_calls(&[(
        "call_8",
        "load_memory",
        r#"{"query": "Lisbon", "limit": 2}"#,
    )])])
    .await
    .unwrap();
    let m = connect(config(Provider::Openai, server.url("/v1"))).unwrap();
    let r = m.generate(&conversation(), soon()).await.unwrap();
    let calls: Vec<_> = r.function_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id.as_deref(), Some("call_8"));
    assert_eq!(calls[0].args, json!({"query": "Lisbon", "limit": 2}));
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));

    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].key.as_deref(), Some("Bearer sk-test"));
    let body = seen[0].json();
    assert_eq!(body["model"], "m-1");
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        msgs[1],
        json!({"role": "user", "content": "Where do I live?"})
    );
    assert_eq!(msgs[2]["role"], "assistant");
    let call = &msgs[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_7");
    assert_eq!(call["type"], "function");
    // Arguments travel as a JSON string.
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"query": "home city"}));
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_7");
    let result: Value = serde_json::from_str(msgs[3]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["hits"][0]["content"], "Lisbon");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "load_memory");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["properties"]["query"]["maxLength"],
        100
    );
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["temperature"], 0.0);
    assert_eq!(body["max_tokens"], 64);
}

#[tokio::test]
async fn openai_text_answers_and_usage_are_read() {
    let server = Scripted::start(vec![Reply::openai_text("You live in Lisbon.")])
        .await
        .unwrap();
    let m = connect(config(Provider::Openai, server.url("/v1"))).unwrap();
    let r = m.generate(&conversation(), soon()).await.unwrap();
    assert_eq!(r.text(), "You live in Lisbon.");
    assert_eq!(r.function_calls().count(), 0);
    assert_eq!(r.usage.unwrap().input_tokens, 10);
}

async fn outcome(provider: Provider, reply: Reply, limits: ModelLimits) -> Result<(), Error> {
    let server = Scripted::start(vec![reply]).await.unwrap();
    let mut c = config(provider, server.url("/v1"));
    c.limits = limits;
    let m = connect(c).unwrap();
    m.generate(&conversation(), Deadline::after(Duration::from_secs(5)))
        .await
        .map(drop)
}

#[tokio::test]
async fn statuses_become_typed_errors_for_both_providers() {
    for p in [Provider::Openai, Provider::Gemini] {
        let d = ModelLimits::default();
        let e = outcome(p, Reply::raw(429, "slow down"), d.clone())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Overloaded(_)), "{p:?}: {e}");
        for s in [500, 502, 503] {
            let e = outcome(p, Reply::raw(s, "{}"), d.clone())
                .await
                .unwrap_err();
            assert!(matches!(e, Error::Unavailable(_)), "{p:?} {s}: {e}");
        }
        let e = outcome(p, Reply::raw(400, r#"{"error":"bad"}"#), d.clone())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidReply { .. }), "{p:?}: {e}");
    }
}

#[tokio::test]
async fn hostile_openai_replies_are_invalid_replies() {
    let cases: Vec<(&str, Reply)> = vec![
        ("not JSON", Reply::raw(200, "<html>oops</html>")),
        ("no choices", Reply::json(&json!({"choices": []}))),
        (
            "wrong shape",
            Reply::json(&json!({"choices": [{"message": 5}]})),
        ),
        (
            "arguments not JSON",
            Reply::openai_calls(&[("c", "load_memory", "{query: nope")]),
        ),
        (
            "arguments not an object",
            Reply::openai_calls(&[("c", "load_memory", "[1, 2]")]),
        ),
        ("no tool name", Reply::openai_calls(&[("c", "", "{}")])),
    ];
    for (what, reply) in cases {
        let e = outcome(Provider::Openai, reply, ModelLimits::default())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidReply { .. }), "{what}: {e}");
    }
}

#[tokio::test]
async fn replies_over_the_byte_bound_are_not_read_and_slow_ones_time_out() {
    for p in [Provider::Openai, Provider::Gemini] {
        let small = ModelLimits {
            max_reply_bytes: 2_048,
            ..ModelLimits::default()
        };
        let huge = Reply::openai_text(&"x".repeat(10_000));
        let e = outcome(p, huge, small).await.unwrap_err();
        assert!(matches!(e, Error::InvalidReply { .. }), "{p:?}: {e}");

        let quick = ModelLimits {
            timeout_ms: 200,
            ..ModelLimits::default()
        };
        let slow = Reply::openai_text("late").after(Duration::from_secs(3));
        let e = outcome(p, slow, quick).await.unwrap_err();
        assert!(matches!(e, Error::Timeout(Stage::Model)), "{p:?}: {e}");
    }
}

#[tokio::test]
async fn a_request_over_the_byte_bound_is_never_sent() {
    for p in [Provider::Openai, Provider::Gemini] {
        let server = Scripted::start(vec![Reply::openai_text("unused")])
            .await
            .unwrap();
        let mut c = config(p, server.url("/v1"));
        c.limits.max_request_bytes = 1_024;
        let m = connect(c).unwrap();
        let mut r = conversation();
        r.contents[0].parts[0] = Part::text("y".repeat(5_000));
        let e = m.generate(&r, soon()).await.unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidArgument {
                    field: Field::Body,
                    ..
                }
            ),
            "{p:?}: {e}"
        );
        assert!(server.requests().is_empty());
    }
}

#[tokio::test]
async fn gemini_requests_use_its_own_parts_and_schema_field() {
    let server = Scripted::start(vec![Reply::gemini(&json!([{"text": "Lisbon."}]))])
        .await
        .unwrap();
    let m = connect(config(Provider::Gemini, server.url("/v1beta"))).unwrap();
    let r = m.generate(&conversation(), soon()).await.unwrap();
    assert_eq!(r.text(), "Lisbon.");
    assert_eq!(r.usage.unwrap().output_tokens, 2);
    let seen = server.requests();
    assert_eq!(seen[0].path, "/v1beta/models/m-1:generateContent");
    assert_eq!(seen[0].key.as_deref(), Some("sk-test"));
    let body = seen[0].json();
    assert_eq!(body["systemInstruction"]["parts"][0]["text"], "Be brief.");
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents[0]["role"], "user");
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][0]["functionCall"]["name"],
        "load_memory"
    );
    assert_eq!(
        contents[1]["parts"][0]["functionCall"]["args"],
        json!({"query": "home city"})
    );
    assert_eq!(contents[2]["role"], "user");
    assert_eq!(contents[2]["parts"][0]["functionResponse"]["id"], "call_7");
    let decl = &body["tools"][0]["functionDeclarations"][0];
    assert_eq!(decl["name"], "load_memory");
    assert_eq!(decl["parametersJsonSchema"]["required"][0], "query");
    assert_eq!(body["toolConfig"]["functionCallingConfig"]["mode"], "ANY");
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 64);
}

#[tokio::test]
async fn gemini_thought_signatures_go_back_exactly_as_received() {
    // Not canonical base64, with escapes: it must still come back as sent.
    let sig = "CiQB0/+a=\u{00e9}\\\"x\n==";
    let server = Scripted::start(vec![
        Reply::gemini(&json!([
            {"text": "plan", "thought": true, "thoughtSignature": sig},
            {"functionCall": {"id": "fc1", "name": "load_memory", "args": {"query": "q"}},
             "thoughtSignature": sig},
            {"executableCode": {"code": "print(1)"}}
        ])),
        Reply::gemini(&json!([{"text": "done"}])),
    ])
    .await
    .unwrap();
    let m = connect(config(Provider::Gemini, server.url("/v1beta"))).unwrap();
    let first = m.generate(&conversation(), soon()).await.unwrap();
    // The unknown part kind is dropped; the two known parts keep theirs.
    assert_eq!(first.content.parts.len(), 2);
    for p in &first.content.parts {
        assert_eq!(
            p.thought_signature.as_deref().unwrap().as_bytes(),
            sig.as_bytes()
        );
    }
    let call = first.function_calls().next().unwrap();
    assert_eq!(call.id.as_deref(), Some("fc1"));

    let mut next = conversation();
    next.contents.push(first.content.clone());
    m.generate(&next, soon()).await.unwrap();
    let body = server.requests()[1].json();
    let sent = body["contents"].as_array().unwrap().last().unwrap();
    assert_eq!(sent["role"], "model");
    assert_eq!(sent["parts"][0]["thoughtSignature"].as_str().unwrap(), sig);
    assert_eq!(sent["parts"][0]["thought"], true);
    assert_eq!(sent["parts"][1]["thoughtSignature"].as_str().unwrap(), sig);
}

#[tokio::test]
async fn hostile_gemini_replies_are_invalid_replies() {
    let cases: Vec<(&str, Reply)> = vec![
        ("not JSON", Reply::raw(200, "garbage")),
        ("no candidates", Reply::json(&json!({"candidates": []}))),
        (
            "blocked",
            Reply::json(&json!({"promptFeedback": {"blockReason": "SAFETY"}})),
        ),
        (
            "args not an object",
            Reply::gemini(&json!([{"functionCall": {"name": "f", "args": "x"}}])),
        ),
        (
            "no name",
            Reply::gemini(&json!([{"functionCall": {"name": "", "args": {}}}])),
        ),
        ("parts not a list", Reply::gemini(&json!({"text": "x"}))),
    ];
    for (what, reply) in cases {
        let e = outcome(Provider::Gemini, reply, ModelLimits::default())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidReply { .. }), "{what}: {e}");
    }
}

#[test]
fn configs_refuse_unknown_keys_and_hide_the_key() {
    let c: Result<ModelConfig, _> = serde_json::from_value(json!({
        "provider": "openai", "base_url": "http://x", "model": "m", "temprature": 1}));
    assert!(c.is_err());
    let c: ModelConfig = serde_json::from_value(json!({
        "provider": "gemini", "base_url": "http://x", "model": "m", "api_key": "secret"}))
    .unwrap();
    assert!(!format!("{c:?}").contains("secret"));
    let bad = ModelConfig {
        limits: ModelLimits {
            timeout_ms: 0,
            ..ModelLimits::default()
        },
        ..c
    };
    assert!(connect(bad).is_err());
}
