//! The in-memory store runs the conformance suite.

hippocamp_sessions::session_store_conformance_tests!(
    hippocamp_sessions::conformance::InMemoryFactory
);
