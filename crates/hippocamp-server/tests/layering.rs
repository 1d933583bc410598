//! The server reaches stores only through `hippocamp-services`, which
//! hands out governed handles: it names no store implementation, so no
//! route can open one around the gate. The MCP adapter is handed its
//! stores and names neither the services nor a store.

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
