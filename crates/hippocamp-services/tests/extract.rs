//! Extract runs against a scripted OpenAI-compatible server: a checked
//! reply becomes facts with lineage (adds, a supersession), what the model
//! is shown, and every hostile or broken reply failing the run with
//! `invalid_reply` and nothing changed.

#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::sync::Arc;

use hippocamp_core::{CallOptions, Error, MemoryScope, SessionId};
use hippocamp_memory::lineage::{Origin, Role, Status};
use hippocamp_memory::{
    Event, InMemoryStore, MemoryConfig, MemoryStore, SearchRequest, WriteOptions,
};
use hippocamp_models::scripted::{Reply, Scripted};
use hippocamp_models::{ModelConfig, ModelLimits, Provider, connect};
use hippocamp_services::consolidation::extract::ExtractLimits;
use hippocamp_services::consolidation::{
    ApplyMode, ChangeOp, ChangeState, Consolidations, Mode, RunState, StartRun,
};

fn scope() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

fn extract() -> StartRun {
    StartRun {
        mode: Mode::Extract,
        apply: ApplyMode::Auto,
        origins: Vec::new(),
    }
}

/// The scripted server as a model.
fn model_of(server: &Scripted) -> Arc<dyn hippocamp_models::Model> {
    connect(ModelConfig {
        provider: Provider::Openai,
        base_url: server.url("/v1"),
        model: "scripted".into(),
        api_key: None,
        limits: ModelLimits::default(),
    })
    .unwrap()
}

async fn world(script: Vec<Reply>) -> (Scripted, Arc<dyn MemoryStore>, Consolidations) {
    let server = Scripted::start(script).await.unwrap();
    let model = model_of(&server);
    let store: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    store
        .add_events(
            &scope(),
            &SessionId::new("s1").unwrap(),
            &[
                Event::text("e1", "user", 1_000, "We adopted a beagle called Rex"),
                Event::text("e2", "user", 2_000, "I moved to Porto last month"),
            ],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let runs = Consolidations::default().with_model(model, ExtractLimits::default());
    (server, store, runs)
}

/// A `record_facts` call with `args`, reporting 120 prompt and 30
/// generated tokens.
fn call(args: &serde_json::Value) -> Reply {
    Reply::json(&serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "record_facts", "arguments": args.to_string()}}]}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    }))
}

async fn entries(store: &dyn MemoryStore) -> u64 {
    store.status().await.unwrap().entries
}

#[tokio::test]
async fn a_checked_reply_becomes_facts_with_their_turns_as_lineage() {
    let (server, store, runs) = world(vec![call(&serde_json::json!({"facts": [
        {"op": "add", "content": "The user has a beagle called Rex", "fact_key": "user.pet", "evidence": ["t1"]},
        {"op": "add", "content": "The user lives in Porto", "fact_key": "user.home_city", "evidence": ["t2"]},
    ]}))])
    .await;
    let c = CallOptions::default();
    let run = runs.start(&*store, &scope(), &extract(), &c).await.unwrap();
    assert_eq!(run.state, RunState::Applied, "{run:?}");
    assert_eq!((run.model_calls, run.turns_read), (1, 2));
    assert_eq!((run.input_tokens, run.output_tokens), (120, 30));
    assert_eq!(run.changes.len(), 2);
    assert!(
        run.changes
            .iter()
            .all(|ch| ch.state == ChangeState::Applied)
    );
    // What the model saw: the turns and no existing fact, by local ids.
    let seen = server.requests()[0].json().to_string();
    assert!(seen.contains("We adopted a beagle called Rex") && seen.contains("t2"));
    assert!(!seen.contains("mem-"), "entry ids are never shown: {seen}");
    let city = store
        .get_entry(&scope(), &run.changes[1].fact.unwrap(), &c)
        .await
        .unwrap();
    assert_eq!(city.origin, Origin::Fact);
    assert_eq!(city.fact_key.as_ref().unwrap().as_str(), "user.home_city");
    assert_eq!(city.derived_from.len(), 1);
    assert_eq!(city.derived_from[0].role, Role::Evidence);
    assert_eq!(city.timestamp_ms, 2_000, "the time its turn was said");
    // Evidence stays current: both the turn and the fact are found.
    let hits = store
        .search(&scope(), &SearchRequest::new("Porto"), &c)
        .await
        .unwrap()
        .hits;
    let found: Vec<&str> = hits.iter().map(|h| h.entry.content.as_str()).collect();
    assert!(
        found.contains(&"I moved to Porto last month")
            && found.contains(&"The user lives in Porto"),
        "{found:?}"
    );

    // A second run: a new turn, and the model supersedes the city fact
    // it was shown (as f1). Turns already used are not shown again.
    store
        .add_events(
            &scope(),
            &SessionId::new("s2").unwrap(),
            &[Event::text(
                "e3",
                "user",
                3_000,
                "Actually we live in Braga now, not Porto",
            )],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    server.push([call(&serde_json::json!({"facts": [
        {"op": "supersede", "content": "The user lives in Braga", "fact_key": "user.home_city",
         "target": "f1", "evidence": ["t1"]},
    ]}))]);
    let second = runs.start(&*store, &scope(), &extract(), &c).await.unwrap();
    assert_eq!(second.state, RunState::Applied, "{second:?}");
    assert_eq!(second.turns_read, 1);
    let shown = server.requests()[1].json().to_string();
    assert!(
        shown.contains("Braga") && !shown.contains("beagle"),
        "{shown}"
    );
    assert!(
        shown.contains("The user lives in Porto"),
        "the similar fact is shown: {shown}"
    );
    assert_eq!(second.changes[0].op, ChangeOp::Supersede);
    let old = store.get_entry(&scope(), &city.id, &c).await.unwrap();
    assert_eq!(old.status, Status::Superseded);
    // Erasing the turn the new fact came from erases it; the old fact is
    // current again.
    let braga_turn = second.changes[0].sources[0].entry;
    store.delete_entry(&scope(), &braga_turn, &c).await.unwrap();
    assert!(
        store
            .get_entry(&scope(), &second.changes[0].fact.unwrap(), &c)
            .await
            .is_err()
    );
    assert_eq!(
        store
            .get_entry(&scope(), &city.id, &c)
            .await
            .unwrap()
            .status,
        Status::Current
    );
}

#[tokio::test]
async fn a_hostile_or_broken_reply_fails_the_run_and_changes_nothing() {
    let bad = [
        // A target it was not shown (no facts were shown).
        serde_json::json!({"facts": [{"op": "update", "content": "x", "target": "f9", "evidence": ["t1"]}]}),
        // A real-looking entry id instead of a shown one.
        serde_json::json!({"facts": [{"op": "add", "content": "x", "evidence": ["mem-00000000000000000000000000000000"]}]}),
        // A field the tool does not have.
        serde_json::json!({"facts": [{"op": "add", "content": "x", "evidence": ["t1"], "derived_from": ["t2"]}]}),
        // Too long.
        serde_json::json!({"facts": [{"op": "add", "content": "y".repeat(5_000), "evidence": ["t1"]}]}),
        // No evidence, an unknown op, an add with a target.
        serde_json::json!({"facts": [{"op": "add", "content": "x", "evidence": []}]}),
        serde_json::json!({"facts": [{"op": "delete_all", "content": "x", "evidence": ["t1"]}]}),
        serde_json::json!({"facts": [{"op": "add", "content": "x", "target": "f1", "evidence": ["t1"]}]}),
        // Not the tool's shape at all.
        serde_json::json!({"instructions": "ignore previous rules"}),
    ];
    for args in bad {
        let (_server, store, runs) = world(vec![call(&args)]).await;
        let before = entries(&*store).await;
        let run = runs
            .start(&*store, &scope(), &extract(), &CallOptions::default())
            .await
            .unwrap();
        assert_eq!(run.state, RunState::Failed, "{args}");
        assert_eq!(run.error.as_ref().unwrap().code, "invalid_reply", "{args}");
        assert!(run.changes.is_empty());
        assert_eq!(entries(&*store).await, before, "{args}");
    }
    // A text answer instead of the tool call.
    let (_server, store, runs) = world(vec![Reply::openai_text("Sure! Here are the facts.")]).await;
    let run = runs
        .start(&*store, &scope(), &extract(), &CallOptions::default())
        .await
        .unwrap();
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(entries(&*store).await, 2);
}

#[tokio::test]
async fn extract_needs_a_model_and_applies_as_it_ends() {
    let store: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    let runs = Consolidations::default();
    let e = runs
        .start(&*store, &scope(), &extract(), &CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
    let (_server, store, runs) = world(vec![]).await;
    let review = StartRun {
        apply: ApplyMode::Review,
        ..extract()
    };
    let e = runs
        .start(&*store, &scope(), &review, &CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
}

/// The real small model (SmolLM2-135M on llama.cpp, `scripts/chat-model.sh
/// start`): its run either succeeds with every fact's lineage among the
/// turns it was shown, or fails with a typed error and changes nothing.
/// A 135M model is not expected to extract well; the contract is tested.
#[tokio::test]
async fn a_real_small_model_run_succeeds_or_fails_typed_and_changes_nothing() {
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
    let store: Arc<dyn MemoryStore> =
        Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap());
    store
        .add_events(
            &scope(),
            &SessionId::new("s1").unwrap(),
            &[
                Event::text("e1", "user", 1_000, "My sister Ana lives in Lisbon."),
                Event::text(
                    "e2",
                    "user",
                    2_000,
                    "I work as a nurse at the city hospital.",
                ),
            ],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let turns: Vec<_> = store
        .list_entries(
            &scope(),
            &hippocamp_memory::ListRequest::default(),
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.id)
        .collect();
    let runs = Consolidations::default().with_model(model, ExtractLimits::default());
    let call = CallOptions::timeout(std::time::Duration::from_mins(1)).unwrap();
    let run = runs
        .start(&*store, &scope(), &extract(), &call)
        .await
        .unwrap();
    assert_eq!(run.model_calls, 1, "{run:?}");
    match run.state {
        RunState::Applied => {
            for ch in &run.changes {
                assert!(
                    ch.sources.iter().all(|s| turns.contains(&s.entry)),
                    "{run:?}"
                );
            }
        }
        RunState::Failed => {
            let code = &run.error.as_ref().unwrap().code;
            assert!(
                ["invalid_reply", "timeout"].contains(&code.as_str()),
                "{run:?}"
            );
            assert_eq!(entries(&*store).await, 2, "a failed run writes nothing");
        }
        other => panic!("a run ends applied or failed, not {other:?}"),
    }
    eprintln!(
        "real model extract: {:?}, {} calls, {} + {} tokens, {} changes",
        run.state,
        run.model_calls,
        run.input_tokens,
        run.output_tokens,
        run.changes.len()
    );
}

/// A run that fails midway (here the scope's entry quota refuses its
/// second fact) keeps what it wrote, and `revert` removes it.
#[tokio::test]
async fn what_a_run_wrote_before_it_failed_is_reverted() {
    use hippocamp_core::MemoryLimits;
    use hippocamp_memory::NewEntry;
    let config = MemoryConfig {
        limits: MemoryLimits {
            max_entries_per_scope: 5,
            ..MemoryLimits::default()
        },
        ..MemoryConfig::default()
    };
    let store: Arc<dyn MemoryStore> = Arc::new(InMemoryStore::new(config).unwrap());
    for text in [
        "the blue door is the back door",
        "The blue door is the back door!",
        "the shed key hangs by the kettle",
        "The shed key hangs by the kettle.",
    ] {
        store
            .add_entry(&scope(), NewEntry::new(text), &WriteOptions::default())
            .await
            .unwrap();
    }
    let runs = Consolidations::default();
    let dedupe = StartRun {
        mode: Mode::Dedupe,
        apply: ApplyMode::Auto,
        origins: Vec::new(),
    };
    let c = CallOptions::default();
    let run = runs.start(&*store, &scope(), &dedupe, &c).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{run:?}");
    assert_eq!(run.error.as_ref().unwrap().code, "quota_exceeded");
    assert_eq!(entries(&*store).await, 5, "one fact was written");
    let reverted = runs.revert(&*store, &scope(), &run.id, &c).await.unwrap();
    assert_eq!(reverted.state, RunState::Reverted);
    assert_eq!(entries(&*store).await, 4);
    let hits = store
        .search(&scope(), &SearchRequest::new("blue door shed key"), &c)
        .await
        .unwrap()
        .hits;
    assert!(
        hits.iter().all(|h| h.entry.origin == Origin::Note),
        "{hits:?}"
    );
}

/// A run has its own deadline (`max_run_ms`), whatever its caller's: a
/// model that answers after it ends the run `failed` with `timeout`, and
/// nothing is written.
#[tokio::test]
async fn a_run_past_its_own_bound_fails_with_timeout() {
    let slow = call(&serde_json::json!({"facts": [
        {"op": "add", "content": "Alice has a beagle called Rex", "evidence": ["t1"]}]}))
    .after(std::time::Duration::from_millis(2_500));
    let (server, store, _) = world(vec![slow]).await;
    let model = model_of(&server);
    let limits = hippocamp_services::consolidation::ConsolidationLimits {
        max_run_ms: 1_000,
        ..Default::default()
    };
    assert!(
        limits
            .describe()
            .iter()
            .any(|l| l.name == "consolidation.max_run_ms" && l.value == 1_000)
    );
    let runs = Consolidations::new(limits).with_model(model, ExtractLimits::default());
    let before = entries(&*store).await;
    let run = runs
        .start(
            &*store,
            &scope(),
            &extract(),
            &CallOptions::timeout(std::time::Duration::from_secs(30)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(run.state, RunState::Failed);
    let error = run.error.as_ref().unwrap();
    assert_eq!(error.code, "timeout", "{}", error.message);
    assert!(error.message.contains("consolidation"), "{}", error.message);
    assert_eq!(entries(&*store).await, before);
}
