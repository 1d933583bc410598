//! Every tool in process: called for one user through the same function
//! the MCP handler uses, over in-memory stores; the list follows the
//! permissions; another user sees nothing of the first.

#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::BTreeSet;
use std::sync::Arc;

use hippocamp_artifacts::{ArtifactLimits, ArtifactStore, InMemoryArtifacts};
use hippocamp_core::MemoryScope;
use hippocamp_core::Permission;
use hippocamp_mcp::tools::{Tools, call, list};
use hippocamp_mcp::{Authority, Backends};
use hippocamp_memory::{InMemoryStore, MemoryConfig, MemoryStore};
use serde_json::{Value, json};

fn who(user: &str, perms: &[Permission]) -> Authority {
    Authority {
        scope: MemoryScope::parse("demo", user).unwrap(),
        permissions: perms.iter().copied().collect::<BTreeSet<_>>(),
        base_url: "http://127.0.0.1:8765".into(),
        caller: hippocamp_core::Caller::token("t-test"),
    }
}

fn backends() -> Backends {
    Backends {
        memory: Some(
            Arc::new(InMemoryStore::new(MemoryConfig::default()).unwrap()) as Arc<dyn MemoryStore>,
        ),
        artifacts: Some(
            Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap())
                as Arc<dyn ArtifactStore>,
        ),
    }
}

async fn ok(tools: &Tools, a: &Authority, b: &Backends, name: &str, args: Value) -> Value {
    let r = call(tools, a, b, name, args.as_object().cloned())
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{name}: {r:?}");
    r.structured_content.unwrap()
}

#[tokio::test]
async fn every_tool_works_for_its_user_and_only_for_them() {
    let tools = Tools::new().unwrap();
    let b = backends();
    let alice = who("alice", &[Permission::Admin]);
    let bob = who("bob", &[Permission::Admin]);
    let names: Vec<String> = list(&alice, &b)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "memory_search",
            "load_memory",
            "memory_add",
            "memory_ingest",
            "memory_delete",
            "memory_forget_session",
            "artifact_list",
            "artifact_versions",
            "artifact_get",
            "artifact_put",
            "artifact_delete",
            "memory"
        ]
    );
    let added = ok(
        &tools,
        &alice,
        &b,
        "memory_add",
        json!({"content": "Alice keeps bees"}),
    )
    .await;
    let id = added["id"].as_str().unwrap().to_owned();
    ok(
        &tools,
        &alice,
        &b,
        "memory_ingest",
        json!({"events": [
        {"id": "t1", "author": "user", "text": "I also grow tomatoes"}]}),
    )
    .await;
    // Turns without ids, in two calls, are two turns (ids are per call).
    for text in ["I keep a rain barrel", "I compost kitchen scraps"] {
        let events = json!({"events": [{"author": "user", "text": text}]});
        let r = ok(&tools, &alice, &b, "memory_ingest", events).await;
        assert_eq!(r["added"], 1, "{r}");
    }
    for search in ["memory_search", "load_memory"] {
        let r = ok(
            &tools,
            &alice,
            &b,
            search,
            json!({"query": "bees tomatoes", "limit": 5}),
        )
        .await;
        // Both matches (their session neighbours may follow: lexical
        // search adds session cohesion).
        let contents: Vec<&str> = r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|h| h["content"].as_str())
            .collect();
        assert!(
            contents.contains(&"Alice keeps bees") && contents.contains(&"I also grow tomatoes"),
            "{search}: {contents:?}"
        );
        // Each hit names its origin: an ingested turn, or a note added
        // directly.
        for h in r["hits"].as_array().unwrap() {
            let want = if h["content"] == "Alice keeps bees" {
                "note"
            } else {
                "turn"
            };
            assert_eq!(h["origin"], want, "{search}: {h}");
        }
        let theirs = ok(&tools, &bob, &b, search, json!({"query": "bees tomatoes"})).await;
        assert!(theirs["hits"].as_array().unwrap().is_empty(), "{search}");
    }
    // Bob cannot delete Alice's entry: it is not in his scope.
    assert_eq!(
        ok(&tools, &bob, &b, "memory_delete", json!({"id": id})).await["deleted"],
        0
    );
    assert_eq!(
        ok(&tools, &alice, &b, "memory_delete", json!({"id": id})).await["deleted"],
        1
    );
    let refused = call(
        &tools,
        &alice,
        &b,
        "memory_forget_session",
        json!({"confirm": "other"}).as_object().cloned(),
    )
    .await
    .unwrap();
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert_eq!(
        ok(
            &tools,
            &alice,
            &b,
            "memory_forget_session",
            json!({"confirm": "mcp"})
        )
        .await["deleted"],
        3,
        "ingested turns went to the `mcp` session"
    );

    let put = ok(
        &tools,
        &alice,
        &b,
        "artifact_put",
        json!({"name": "notes/a.txt", "text": "hello"}),
    )
    .await;
    assert_eq!(put["version"], 1);
    ok(
        &tools,
        &alice,
        &b,
        "artifact_put",
        json!({"name": "pic.bin", "data_base64": "AAEC", "mime_type": "image/png"}),
    )
    .await;
    ok(
        &tools,
        &alice,
        &b,
        "artifact_put",
        json!({"name": "s.txt", "text": "in a session", "session": "s1"}),
    )
    .await;
    let names = ok(&tools, &alice, &b, "artifact_list", json!({})).await;
    assert_eq!(names["names"], json!(["notes/a.txt", "pic.bin"]));
    assert_eq!(
        ok(
            &tools,
            &alice,
            &b,
            "artifact_list",
            json!({"session": "s1"})
        )
        .await["names"],
        json!(["s.txt"])
    );
    assert!(
        ok(&tools, &bob, &b, "artifact_list", json!({})).await["names"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let versions = ok(
        &tools,
        &alice,
        &b,
        "artifact_versions",
        json!({"name": "notes/a.txt"}),
    )
    .await;
    assert_eq!(versions["versions"][0]["version"], 1);

    // Text comes back as text, other types as an embedded blob resource
    // whose URI is the version's API v1 URL.
    let text = call(
        &tools,
        &alice,
        &b,
        "artifact_get",
        json!({"name": "notes/a.txt"}).as_object().cloned(),
    )
    .await
    .unwrap();
    assert_eq!(text.content[0].as_text().unwrap().text, "hello");
    let blob = call(
        &tools,
        &alice,
        &b,
        "artifact_get",
        json!({"name": "pic.bin"}).as_object().cloned(),
    )
    .await
    .unwrap();
    let v = serde_json::to_value(&blob.content[0]).unwrap();
    assert_eq!(v["type"], "resource");
    assert_eq!(v["resource"]["blob"], "AAEC");
    assert_eq!(v["resource"]["mimeType"], "image/png");
    assert_eq!(
        v["resource"]["uri"],
        "http://127.0.0.1:8765/v1/apps/demo/users/alice/artifacts/pic.bin?version=1"
    );
    let missing = call(
        &tools,
        &bob,
        &b,
        "artifact_get",
        json!({"name": "notes/a.txt"}).as_object().cloned(),
    )
    .await
    .unwrap();
    assert_eq!(missing.is_error, Some(true));
    assert_eq!(missing.structured_content.unwrap()["error"], "not_found");

    let gone = ok(
        &tools,
        &alice,
        &b,
        "artifact_delete",
        json!({"name": "notes/a.txt", "version": "all"}),
    )
    .await;
    assert_eq!(gone["deleted"], json!([1]));

    // Anthropic's memory tool: files under /memories as versions.
    let made = ok(
        &tools,
        &alice,
        &b,
        "memory",
        json!({"command": "create", "path": "/memories/bees.md", "file_text": "three hives\n"}),
    )
    .await;
    assert_eq!(
        made["result"],
        "File created successfully at: /memories/bees.md"
    );
    let edited = ok(
        &tools,
        &alice,
        &b,
        "memory",
        json!({"command": "str_replace", "path": "/memories/bees.md", "old_str": "three", "new_str": "four"}),
    )
    .await;
    assert!(
        edited["result"].as_str().unwrap().contains("four hives"),
        "{edited}"
    );
    let refused = ok(
        &tools,
        &alice,
        &b,
        "memory",
        json!({"command": "view", "path": "/memories/../etc"}),
    )
    .await;
    assert_eq!(refused["success"], false, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("would escape /memories"),
        "{refused}"
    );
    let versions = ok(
        &tools,
        &alice,
        &b,
        "artifact_versions",
        json!({"name": ".memories/bees.md"}),
    )
    .await;
    assert_eq!(
        versions["versions"].as_array().unwrap().len(),
        2,
        "{versions}"
    );

    // Bad arguments are a tool error with the typed code, not a panic.
    let bad = call(
        &tools,
        &alice,
        &b,
        "memory_search",
        json!({"query": "x", "user": "bob"}).as_object().cloned(),
    )
    .await
    .unwrap();
    assert_eq!(bad.is_error, Some(true));
    assert_eq!(
        bad.structured_content.unwrap()["error"],
        "invalid_arguments"
    );
    // An unknown tool, or the runner-only one, is not offered at all.
    assert!(
        call(&tools, &alice, &b, "load_artifacts", None)
            .await
            .is_none()
    );
    assert!(
        call(&tools, &alice, &b, "no_such_tool", None)
            .await
            .is_none()
    );
}

#[tokio::test]
async fn the_tool_list_follows_the_permissions() {
    let tools = Tools::new().unwrap();
    let b = backends();
    let reader = who(
        "alice",
        &[Permission::MemoryRead, Permission::ArtifactsRead],
    );
    let names: Vec<String> = list(&reader, &b)
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "memory_search",
            "load_memory",
            "artifact_list",
            "artifact_versions",
            "artifact_get"
        ]
    );
    // A write tool is not even callable for a reader.
    assert!(
        call(
            &tools,
            &reader,
            &b,
            "memory_add",
            json!({"content": "x"}).as_object().cloned()
        )
        .await
        .is_none()
    );
    assert_eq!(
        b.memory.as_ref().unwrap().status().await.unwrap().entries,
        0
    );
    let nothing = who("alice", &[]);
    assert!(list(&nothing, &b).is_empty());
    let no_artifacts = Backends {
        artifacts: None,
        ..b.clone()
    };
    let admin = who("alice", &[Permission::Admin]);
    assert!(
        list(&admin, &no_artifacts)
            .iter()
            .all(|t| t.name.starts_with("memory") || t.name == "load_memory")
    );
}

#[tokio::test]
async fn resources_page_through_the_user_scope_only() {
    let b = backends();
    let store = b.artifacts.clone().unwrap();
    let alice = who("alice", &[Permission::ArtifactsRead]);
    let scope = hippocamp_artifacts::ArtifactScope::user("demo", "alice").unwrap();
    for i in 0..60 {
        let name = hippocamp_artifacts::ArtifactName::new(format!("f{i:02}.txt")).unwrap();
        store
            .put(
                &scope,
                &name,
                b"x".as_slice().into(),
                &hippocamp_artifacts::PutOptions::default(),
            )
            .await
            .unwrap();
    }
    let first = hippocamp_mcp::resources::list(store.as_ref(), &alice, None)
        .await
        .unwrap();
    assert_eq!(first.resources.len(), 50);
    let next = first.next_cursor.clone().unwrap();
    let second = hippocamp_mcp::resources::list(store.as_ref(), &alice, Some(next))
        .await
        .unwrap();
    assert_eq!(second.resources.len(), 10);
    assert!(second.next_cursor.is_none());
    assert_eq!(second.resources[9].name, "f59.txt");
    let bob = who("bob", &[Permission::ArtifactsRead]);
    assert!(
        hippocamp_mcp::resources::list(store.as_ref(), &bob, None)
            .await
            .unwrap()
            .resources
            .is_empty()
    );
    // A URI of Alice's read as Bob names nothing.
    let uri = first.resources[0].uri.clone();
    assert!(
        hippocamp_mcp::resources::read(&b, &alice, &uri)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        hippocamp_mcp::resources::read(&b, &bob, &uri)
            .await
            .unwrap()
            .is_none()
    );
}

/// `memory_add` with an idempotency key: a model's retried call stores
/// the fact once (`duplicate: true`), and other content under the same key
/// is refused as a conflict.
#[tokio::test]
async fn a_retried_memory_add_with_its_key_stores_once() {
    let tools = Tools::new().unwrap();
    let b = backends();
    let alice = who("alice", &[Permission::Admin]);
    let args = json!({"content": "Alice keeps bees", "idempotency_key": "call-7"});
    let first = ok(&tools, &alice, &b, "memory_add", args.clone()).await;
    let again = ok(&tools, &alice, &b, "memory_add", args).await;
    assert_eq!(first["id"], again["id"]);
    assert_eq!(
        (first["duplicate"].clone(), again["duplicate"].clone()),
        (json!(false), json!(true))
    );
    let other = call(
        &tools,
        &alice,
        &b,
        "memory_add",
        json!({"content": "Alice keeps wasps", "idempotency_key": "call-7"})
            .as_object()
            .cloned(),
    )
    .await
    .unwrap();
    assert_eq!(other.is_error, Some(true), "{other:?}");
    let hits = ok(
        &tools,
        &alice,
        &b,
        "memory_search",
        json!({"query": "keeps"}),
    )
    .await;
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1, "{hits}");
}

/// `memory_add` with a secret in its content: the fact is stored with the
/// secret redacted, and the reply says where it was (the model learns the
/// stored text differs from what it sent).
#[tokio::test]
async fn memory_add_redacts_a_secret_and_says_where() {
    let tools = Tools::new().unwrap();
    let b = backends();
    let alice = who("alice", &[Permission::Admin]);
    let content = "the deploy key is AKIAIOSFODNN7EXAMPLE for staging";
    let added = ok(
        &tools,
        &alice,
        &b,
        "memory_add",
        json!({"content": content}),
    )
    .await;
    assert_eq!(
        added["redacted"],
        json!([{"kind": "aws_access_key_id", "start": 18, "end": 38}]),
        "{added}"
    );
    let hits = ok(
        &tools,
        &alice,
        &b,
        "memory_search",
        json!({"query": "deploy key"}),
    )
    .await;
    assert_eq!(
        hits["hits"][0]["content"], "the deploy key is [REDACTED] for staging",
        "{hits}"
    );
    let plain = ok(
        &tools,
        &alice,
        &b,
        "memory_add",
        json!({"content": "no secret here"}),
    )
    .await;
    assert_eq!(plain["redacted"], json!([]));
}
