//! The filesystem store, alone and behind the router, runs the conformance
//! suite.

mod support;

use hippocamp_router::RouterConfig;
use support::factory::FsFactory;

mod plain {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(FsFactory::default());
}

mod routed {
    use super::*;

    hippocamp_artifacts::artifact_conformance_tests!(hippocamp_routed::artifacts::routed_factory(
        FsFactory::default(),
        RouterConfig {
            idle_scope_timeout_ms: 1,
            ..RouterConfig::default()
        }
    ));
}
