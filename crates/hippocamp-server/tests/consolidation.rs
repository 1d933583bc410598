//! Consolidation over real HTTP: a dedupe run merges copies into one fact
//! with lineage, shows its changes, is reverted, waits for review, skips
//! what was erased before it was applied, and never outlives an erasure.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::many_single_char_names
)]

mod support;

use hippocamp_server::Profile;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{ALICE, TestServer, entry, search, send_json as send};

async fn add(s: &TestServer, t: &str, text: &str, ts: u64) -> String {
    let (st, b) = send(
        s,
        Method::POST,
        &format!("{ALICE}/memory/entries"),
        t,
        Some(entry(text, ts)),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{b}");
    b["entry"]["id"].as_str().unwrap().to_owned()
}

async fn start(s: &TestServer, t: &str, body: Value) -> Value {
    let (st, b) = send(
        s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations?wait=true"),
        t,
        Some(body),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    b
}

async fn get(s: &TestServer, t: &str, path: &str) -> (StatusCode, Value) {
    send(s, Method::GET, &format!("{ALICE}{path}"), t, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedupe_run_merges_copies_into_a_fact_that_can_be_reverted() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let a = add(&s, &t, "My favourite colour is blue.", 10).await;
    let b = add(&s, &t, "my favourite colour is BLUE", 20).await;
    let c = add(&s, &t, "Favourite colour: blue", 30).await;
    let other = add(&s, &t, "My favourite colour used to be red", 5).await;
    let run = start(&s, &t, json!({"mode": "dedupe"})).await;
    assert_eq!(run["state"], "applied", "{run}");
    assert_eq!(run["entries_read"], 4);
    assert_eq!(run["model_calls"], 0);
    let changes = run["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{run}");
    assert_eq!(changes[0]["state"], "applied");
    let fact = changes[0]["fact"].as_str().unwrap().to_owned();
    // Search finds the fact, not its copies; the other colour stays.
    let hits = search(&s, &t, "favourite colour").await;
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.contains(&"Favourite colour: blue".to_owned()));
    let (_, e) = get(&s, &t, &format!("/memory/entries/{fact}")).await;
    assert_eq!(e["origin"], "fact");
    assert_eq!(e["derived_from"].as_array().unwrap().len(), 3);
    let (_, e) = get(&s, &t, &format!("/memory/entries/{a}")).await;
    assert_eq!(
        (e["status"].as_str(), e["merged_into"].as_str()),
        (Some("merged"), Some(fact.as_str()))
    );
    let (st, l) = get(&s, &t, &format!("/memory/entries/{fact}/lineage")).await;
    assert_eq!(st, StatusCode::OK, "{l}");
    let mut sources: Vec<&str> = l["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["entry"].as_str().unwrap())
        .collect();
    sources.sort_unstable();
    let mut want = vec![a.as_str(), b.as_str(), c.as_str()];
    want.sort_unstable();
    assert_eq!(sources, want);
    // The run, shown: its sources and what it wrote, read now.
    let id = run["id"].as_str().unwrap();
    let (st, shown) = get(&s, &t, &format!("/memory/consolidations/{id}")).await;
    assert_eq!(st, StatusCode::OK);
    let ch = &shown["changes"][0];
    assert_eq!(ch["before"].as_array().unwrap().len(), 3);
    assert_eq!(ch["after"], "Favourite colour: blue");
    let (_, list) = get(&s, &t, "/memory/consolidations").await;
    assert_eq!(list["runs"][0]["id"], id);
    // A second run finds nothing more to merge.
    let again = start(&s, &t, json!({"mode": "dedupe"})).await;
    assert_eq!(again["changes"].as_array().unwrap().len(), 0, "{again}");
    // Revert: the fact goes, the copies are current again.
    let (st, reverted) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations/{id}/revert"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{reverted}");
    assert_eq!(reverted["state"], "reverted");
    let (st, _) = get(&s, &t, &format!("/memory/entries/{fact}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, e) = get(&s, &t, &format!("/memory/entries/{a}")).await;
    assert!(e.get("status").is_none(), "{e}");
    assert_eq!(search(&s, &t, "favourite colour").await.len(), 4);
    // Reverting twice is a conflict, and changes nothing.
    let (st, b2) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations/{id}/revert"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b2["code"].as_str()),
        (StatusCode::CONFLICT, Some("run_conflict"))
    );
    let _ = other;
    // The user's erasure forgets their run records too.
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory?confirm=shop/alice"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (_, list) = get(&s, &t, "/memory/consolidations").await;
    assert_eq!(list["runs"].as_array().unwrap().len(), 0, "{list}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_run_waits_for_apply_and_skips_what_was_erased_since() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let a = add(&s, &t, "the dog is called Rex", 1).await;
    add(&s, &t, "The dog is called Rex!", 2).await;
    add(&s, &t, "our cat sleeps on the red sofa", 3).await;
    add(&s, &t, "Our cat sleeps on the red sofa.", 4).await;
    let run = start(&s, &t, json!({"mode": "dedupe", "apply": "review"})).await;
    assert_eq!(run["state"], "proposed", "{run}");
    assert_eq!(run["changes"].as_array().unwrap().len(), 2);
    // Nothing is written before apply.
    assert_eq!(search(&s, &t, "dog Rex").await.len(), 2);
    let id = run["id"].as_str().unwrap();
    let (_, shown) = get(&s, &t, &format!("/memory/consolidations/{id}")).await;
    assert!(
        shown["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["after"].is_string()),
        "{shown}"
    );
    // One of the dog's copies is erased before the run is applied.
    let (st, _) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/entries/{a}"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, applied) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations/{id}/apply"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{applied}");
    assert_eq!(applied["state"], "applied");
    let states: Vec<&str> = applied["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    assert!(
        states.contains(&"skipped") && states.contains(&"applied"),
        "{applied}"
    );
    let skipped = applied["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["state"] == "skipped")
        .unwrap();
    assert!(skipped["reason"].as_str().unwrap().contains("erased"));
    // The erased copy's text is in no run record.
    let (_, shown) = get(&s, &t, &format!("/memory/consolidations/{id}")).await;
    assert!(
        !shown.to_string().contains("\"the dog is called Rex\""),
        "{shown}"
    );
    assert_eq!(search(&s, &t, "cat sofa").await.len(), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasing_a_merged_entry_erases_the_fact_and_runs_answer_typed_errors() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let a = add(&s, &t, "the wifi password hint is the cat's name", 1).await;
    add(&s, &t, "The wifi password hint is the cat's name.", 2).await;
    let run = start(&s, &t, json!({"mode": "dedupe"})).await;
    let fact = run["changes"][0]["fact"].as_str().unwrap().to_owned();
    let (st, b) = send(
        &s,
        Method::DELETE,
        &format!("{ALICE}/memory/entries/{a}"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(b["deleted"], 2, "{b}");
    let (st, _) = get(&s, &t, &format!("/memory/entries/{fact}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(search(&s, &t, "wifi hint").await.len(), 1);
    // The run can no longer be reverted: its fact was erased.
    let id = run["id"].as_str().unwrap();
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations/{id}/revert"),
        &t,
        None,
    )
    .await;
    assert_eq!(
        (st, b["code"].as_str()),
        (StatusCode::CONFLICT, Some("run_conflict"))
    );
    // Modes that need a model are refused, typed.
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations?wait=true"),
        &t,
        Some(json!({"mode": "extract"})),
    )
    .await;
    assert_eq!(
        (st, b["code"].as_str()),
        (StatusCode::NOT_IMPLEMENTED, Some("unsupported"))
    );
    // Unknown options are refused.
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations"),
        &t,
        Some(json!({"mode": "dedupe", "depth": 3})),
    )
    .await;
    assert_eq!(
        (st, b["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_argument"))
    );
    // Without ?wait the run starts and answers 202 with its id.
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations"),
        &t,
        Some(json!({"mode": "dedupe"})),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let id = b["run"]["id"].as_str().unwrap().to_owned();
    let mut state = String::new();
    for _ in 0..100 {
        let (_, r) = get(&s, &t, &format!("/memory/consolidations/{id}")).await;
        state = r["state"].as_str().unwrap().to_owned();
        if state != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state, "applied");
    // Another user's token cannot read alice's runs.
    let rival = s.all_permissions("shop", Some("bob"));
    let (st, _) = get(&s, &rival, "/memory/consolidations").await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    s.stop().await;
}

/// `[consolidation.apps.shop]`: after the outbox delivered two events to a
/// user, a run starts by itself (asked and run as the outbox) and merges
/// the repeated turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_starts_a_run_after_enough_delivered_events() {
    use hippocamp_memory::lineage::Origin;
    use hippocamp_services::consolidation::auto::AutoRun;
    use hippocamp_services::consolidation::{ApplyMode, Mode};
    let s = TestServer::start(Profile::Durable, |c| {
        c.consolidation.apps.insert(
            "shop".into(),
            AutoRun {
                mode: Mode::Dedupe,
                apply: ApplyMode::Auto,
                after_events: 2,
                origins: vec![Origin::Turn],
                idle_ms: None,
            },
        );
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    let events = json!({"events": [
        {"id": "e1", "author": "user", "timestamp_ms": 1,
         "content": {"role": "user", "parts": [{"text": "Remind me: the boiler code is under the stairs"}]}},
        {"id": "e2", "author": "user", "timestamp_ms": 2,
         "content": {"role": "user", "parts": [{"text": "remind me, the boiler code is under the stairs!"}]}},
    ]});
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s1/ingest"),
        &t,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    let mut runs = Value::Null;
    for _ in 0..200 {
        let (_, r) = get(&s, &t, "/memory/consolidations").await;
        if r["runs"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["state"] == "applied"))
        {
            runs = r;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let run = &runs["runs"][0];
    assert_eq!(run["state"], "applied", "{runs}");
    assert_eq!(run["changes"].as_array().unwrap().len(), 1, "{run}");
    let hits = search(&s, &t, "boiler code stairs").await;
    assert_eq!(hits.len(), 1, "{hits:?}");
    // Another app's deliveries start nothing.
    let other = s.all_permissions("zoo", Some("alice"));
    let events = json!({"events": [
        {"id": "z1", "author": "user", "timestamp_ms": 1, "content": {"role": "user", "parts": [{"text": "the otter is called Pip"}]}},
        {"id": "z2", "author": "user", "timestamp_ms": 2, "content": {"role": "user", "parts": [{"text": "The otter is called Pip."}]}},
    ]});
    let (st, _) = send(
        &s,
        Method::POST,
        "/v1/apps/zoo/users/alice/memory/sessions/s1/ingest",
        &other,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (_, r) = send(
        &s,
        Method::GET,
        "/v1/apps/zoo/users/alice/memory/consolidations",
        &other,
        None,
    )
    .await;
    assert_eq!(r["runs"].as_array().unwrap().len(), 0, "{r}");
    s.stop().await;
}

/// `idle_ms`: a user whose deliveries stopped below the threshold gets a
/// run once no delivery came for that long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_user_gets_a_run_below_the_threshold() {
    use hippocamp_memory::lineage::Origin;
    use hippocamp_services::consolidation::auto::AutoRun;
    use hippocamp_services::consolidation::{ApplyMode, Mode};
    let s = TestServer::start(Profile::Durable, |c| {
        c.consolidation.apps.insert(
            "shop".into(),
            AutoRun {
                mode: Mode::Dedupe,
                apply: ApplyMode::Auto,
                after_events: 1_000,
                origins: vec![Origin::Turn],
                idle_ms: Some(1_000),
            },
        );
    })
    .await;
    let t = s.all_permissions("shop", Some("alice"));
    let events = json!({"events": [
        {"id": "e1", "author": "user", "timestamp_ms": 1,
         "content": {"role": "user", "parts": [{"text": "The wifi name is Harbour Light 5G"}]}},
        {"id": "e2", "author": "user", "timestamp_ms": 2,
         "content": {"role": "user", "parts": [{"text": "the wifi name is harbour light 5g."}]}},
    ]});
    let (st, b) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/sessions/s1/ingest"),
        &t,
        Some(events),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{b}");
    // Not before the idle time.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, r) = get(&s, &t, "/memory/consolidations").await;
    assert_eq!(r["runs"].as_array().unwrap().len(), 0, "{r}");
    let mut state = Value::Null;
    for _ in 0..200 {
        let (_, r) = get(&s, &t, "/memory/consolidations").await;
        if let Some(run) = r["runs"].as_array().and_then(|a| a.first())
            && run["state"] != "running"
        {
            state = run["state"].clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(state, "applied");
    assert_eq!(search(&s, &t, "wifi name").await.len(), 1);
    s.stop().await;
}

/// Run records are kept in the data directory: a proposed run is listed
/// and applied after a restart, and a user's erasure forgets the records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposed_run_outlives_a_restart_and_is_forgotten_with_its_user() {
    let s = TestServer::start(Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    add(&s, &t, "the dog is called Rex", 1).await;
    add(&s, &t, "The dog is called Rex!", 2).await;
    let run = start(&s, &t, json!({"mode": "dedupe", "apply": "review"})).await;
    assert_eq!(run["state"], "proposed", "{run}");
    let id = run["id"].as_str().unwrap().to_owned();
    let dir = s.stop_keeping().await;
    let s = TestServer::start_in(dir, Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (st, listed) = get(&s, &t, "/memory/consolidations").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(listed["runs"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed["runs"][0]["state"], "proposed");
    let (st, applied) = send(
        &s,
        Method::POST,
        &format!("{ALICE}/memory/consolidations/{id}/apply"),
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{applied}");
    assert_eq!(applied["state"], "applied");
    assert_eq!(search(&s, &t, "dog Rex").await.len(), 1);
    let (st, _) = send(
        &s,
        Method::DELETE,
        "/v1/apps/shop/users/alice/memory?confirm=shop/alice",
        &t,
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let dir = s.stop_keeping().await;
    let s = TestServer::start_in(dir, Profile::Durable, |_| {}).await;
    let t = s.all_permissions("shop", Some("alice"));
    let (_, listed) = get(&s, &t, "/memory/consolidations").await;
    assert_eq!(listed["runs"], json!([]), "{listed}");
    s.stop().await;
}
