//! The server reaches stores only through `hippocamp-services`, which
//! hands out governed handles: it names no store implementation, so no
//! route can open one around the gate.

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
