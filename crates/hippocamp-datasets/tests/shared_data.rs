//! Parses the real evaluation data when it is present.

#![allow(clippy::unwrap_used)]

use hippocamp_datasets::{cranfield, locomo};

fn dir() -> Option<std::path::PathBuf> {
    hippocamp_testkit::shared_data()
}

#[test]
fn locomo_dev_half_parses() {
    let Some(dir) = dir() else { return };
    let samples = locomo::load(&dir.join("locomo/locomo-dev.json")).unwrap();
    assert_eq!(samples.len(), 5);
    let turns: usize = samples
        .iter()
        .flat_map(|s| s.sessions.iter().map(|x| x.turns.len()))
        .sum();
    assert_eq!(turns, 2_960);
    let questions: usize = samples.iter().map(|s| s.questions.len()).sum();
    assert!(questions > 1_000, "{questions}");
    assert!(
        samples
            .iter()
            .flat_map(|s| &s.sessions)
            .all(|s| s.start_ms.is_some())
    );
}

#[test]
fn cranfield_parses() {
    let Some(dir) = dir() else { return };
    let c = cranfield::load(&dir.join("cranfield")).unwrap();
    assert_eq!(c.docs.len(), 1_400);
    assert_eq!(c.queries.len(), 225);
    assert_eq!(c.qrels.len(), 225);
    assert!(
        c.qrels
            .values()
            .flat_map(|m| m.values())
            .all(|g| (1..=4).contains(g))
    );
}
