//! The server reaches stores only through `hippocamp-services`, which
//! hands out governed handles: it names no store implementation, so no
//! route can open one around the gate. The MCP adapter is handed its
//! stores and names neither the services nor a store. A store contract
//! names no implementation it could be served by: not the router, not an
//! embedding client, not another contract's wire client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Crates that implement a store (or its storage engine).
const STORES: &[&str] = &[
    "hippocamp-memory-redb",
    "hippocamp-artifacts-fs",
    "hippocamp-artifacts-object",
    "hippocamp-outbox-redb",
    "hippocamp-sessions-redb",
    "hippocamp-postgres",
    "hippocamp-durable",
    "redb",
];

fn dependencies(krate: &str) -> Vec<String> {
    let path = format!("{}/../{krate}/Cargo.toml", env!("CARGO_MANIFEST_DIR"));
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn the_mcp_adapter_depends_on_neither_the_services_nor_a_store() {
    let deps = dependencies("hippocamp-mcp");
    assert!(deps.iter().any(|d| d == "hippocamp-core"), "{deps:?}");
    let named: Vec<&String> = deps
        .iter()
        .filter(|d| *d == "hippocamp-services" || STORES.contains(&d.as_str()))
        .collect();
    assert!(named.is_empty(), "the MCP adapter names {named:?}");
}

#[test]
fn the_server_depends_on_no_store_implementation() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&manifest).unwrap();
    let deps = doc["dependencies"].as_table().unwrap();
    let named: Vec<&String> = deps
        .keys()
        .filter(|k| STORES.contains(&k.as_str()))
        .collect();
    assert!(named.is_empty(), "the server names store crates: {named:?}");
    // The check itself can fail: the services crate does name them.
    let services = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../hippocamp-services/Cargo.toml"
    ))
    .unwrap();
    let doc: toml::Table = toml::from_str(&services).unwrap();
    let deps = doc["dependencies"].as_table().unwrap();
    assert!(deps.keys().any(|k| STORES.contains(&k.as_str())));
}

/// The contract crates (what a store or a client implements).
const CONTRACTS: &[&str] = &[
    "hippocamp-memory",
    "hippocamp-artifacts",
    "hippocamp-sessions",
    "hippocamp-outbox",
    "hippocamp-governance",
];

#[test]
fn contracts_name_no_router_and_no_embedding_client() {
    for krate in CONTRACTS {
        let deps = dependencies(krate);
        assert!(
            deps.iter().any(|d| d == "hippocamp-core"),
            "{krate}: {deps:?}"
        );
        assert!(
            !deps
                .iter()
                .any(|d| d == "hippocamp-router" || d == "hippocamp-routed"),
            "{krate} names the router: {deps:?}"
        );
    }
    // Memory takes the `Embedder` contract only: no HTTP or local client.
    let path = format!(
        "{}/../hippocamp-memory/Cargo.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let embed = &doc["dependencies"]["hippocamp-embed"];
    let features = embed.get("features").and_then(toml::Value::as_array);
    assert!(features.is_none_or(Vec::is_empty), "{embed:?}");
    let root: toml::Table = toml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        root["workspace"]["dependencies"]["hippocamp-embed"]["default-features"].as_bool(),
        Some(false),
        "the workspace's hippocamp-embed must not turn on its HTTP client by default"
    );
    // The model client takes message parts from core, not the session
    // store's contract.
    let models = dependencies("hippocamp-models");
    assert!(
        !models.iter().any(|d| d == "hippocamp-sessions"),
        "{models:?}"
    );
    // The check can fail: the routed layer does name the router.
    assert!(
        dependencies("hippocamp-routed")
            .iter()
            .any(|d| d == "hippocamp-router")
    );
}
