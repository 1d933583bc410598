//! The in-memory store runs the conformance suite.

use hippocamp_artifacts::conformance::InMemoryFactory;

hippocamp_artifacts::artifact_conformance_tests!(InMemoryFactory::default());
