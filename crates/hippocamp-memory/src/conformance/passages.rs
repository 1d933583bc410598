//! Long entries as passages: every store ranks a long entry by its best
//! passage, returns that passage's byte range with the hit, and forgets
//! the passages with the entry. Every store runs this through
//! `memory_conformance_tests!`.

use std::fmt::Write as _;

use super::{StoreFactory, c, lexical, scope, w};
use crate::entry::NewEntry;
use crate::{MemoryConfig, MemoryStore};

/// About 6 KiB of code with one line of fact in the middle.
fn long_turn() -> String {
    let mut text = String::new();
    for i in 0..60 {
        let _ = writeln!(text, "let value_{i} = compute(input_{i}, {i}); // step {i}");
    }
    text.push_str("Note to self: my locker code is 4417, the blue locker.\n");
    for i in 60..120 {
        let _ = writeln!(text, "assert_eq!(value_{i}, expected_{i});");
    }
    text
}

/// Short turns that each say one of the query's words.
const SHORT: [&str; 4] = [
    "I need a new locker at the gym",
    "the locker room was crowded today",
    "what was the code for the wifi",
    "the code review took all afternoon",
];

async fn ids(store: &dyn MemoryStore, query: &str) -> Vec<String> {
    let s = scope("app", "u");
    store
        .search(&s, &lexical(query), &c())
        .await
        .unwrap()
        .hits
        .iter()
        .map(|h| h.entry.content.clone())
        .collect()
}

/// A one-line fact inside a long turn, the only entry that says both of
/// the query's words, outranks short turns that each say one of them; the
/// hit says where the fact is; erasing the entry or the user leaves
/// nothing of its passages behind. With passages off, length
/// normalisation buries it below them.
pub async fn long_entries_rank_by_their_best_passage(f: &dyn StoreFactory) {
    let s = scope("app", "u");
    let long = long_turn();
    let store = f.open(MemoryConfig::default()).await;
    let added = store
        .add_entry(&s, NewEntry::new(&long), &w())
        .await
        .unwrap();
    for t in SHORT {
        store.add_entry(&s, NewEntry::new(t), &w()).await.unwrap();
    }
    let r = store
        .search(&s, &lexical("what is my locker code"), &c())
        .await
        .unwrap();
    assert_eq!(r.hits.len(), 5);
    assert_eq!(
        r.hits[0].entry.id, added.entry.id,
        "the long turn ranks first"
    );
    let span = r.hits[0].passage.expect("a long hit says where it matched");
    let (start, end) = (
        usize::try_from(span.start).unwrap(),
        usize::try_from(span.end).unwrap(),
    );
    assert!(end - start <= 1_536 && end <= long.len(), "{span:?}");
    assert!(long[start..end].contains("my locker code is 4417"));
    assert!(
        r.hits[1..].iter().all(|h| h.passage.is_none()),
        "a short entry is one passage"
    );
    // Erased with the entry: nothing says 4417 any more.
    store.delete_entry(&s, &added.entry.id, &c()).await.unwrap();
    assert!(ids(&*store, "4417").await.is_empty());
    assert_eq!(ids(&*store, "locker code").await.len(), 4);
    // And with the user: nothing.
    store
        .add_entry(&s, NewEntry::new(&long), &w())
        .await
        .unwrap();
    store.delete_user(&s, &c()).await.unwrap();
    assert!(ids(&*store, "locker code 4417").await.is_empty());
    // Passages off: the long turn is one document again, and buried.
    let mut config = MemoryConfig::default();
    config.passages.enabled = false;
    let plain = f.open(config).await;
    let added = plain
        .add_entry(&s, NewEntry::new(&long), &w())
        .await
        .unwrap();
    for t in SHORT {
        plain.add_entry(&s, NewEntry::new(t), &w()).await.unwrap();
    }
    let r = plain
        .search(&s, &lexical("what is my locker code"), &c())
        .await
        .unwrap();
    assert_eq!(
        r.hits[4].entry.id, added.entry.id,
        "last, below every short turn"
    );
    assert!(r.hits.iter().all(|h| h.passage.is_none()));
    assert!(
        plain.capabilities().search.passages.max_bytes > 0
            && !plain.capabilities().search.passages.enabled
    );
}
