//! The job-store conformance suite on the in-memory store.

hippocamp_outbox::job_store_conformance_tests!(hippocamp_outbox::conformance::InMemoryJobFactory);
