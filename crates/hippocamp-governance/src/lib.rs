//! Governance that every path goes through: the [`Policy`] contract and
//! its fail-closed [`consult`], the static policy of the `[policy]`
//! configuration section, consent records, the audit log, [`PolicyChecked`],
//! the memory store wrapper the services bundle hands to the server, the
//! CLI, the outbox (admission and delivery), the runner and the MCP
//! server, and [`GovernedArtifacts`], its counterpart for artifacts
//! (lifetimes and legal holds).
//!
//! The stores enforce the obligations a policy attaches (expiry,
//! retention, legal hold); this crate decides them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod artifacts;
pub mod audit;
pub mod checked;
pub mod consent;
pub mod gate;
pub mod policy;
pub mod sessions;
pub mod static_policy;

pub use artifacts::GovernedArtifacts;
pub use audit::{
    AuditEvent, AuditLog, AuditPage, AuditRecord, InMemoryAudit, NewAuditRecord, RedbAudit,
};
pub use checked::PolicyChecked;
pub use consent::{
    Consent, ConsentScope, ConsentStore, InMemoryConsents, NewConsent, RedbConsents,
};
pub use gate::Gate;
pub use policy::{
    Action, ArtifactTerms, Decision, Grant, Policy, PolicyInfo, Question, Resource, consult,
};
pub use sessions::GovernedSessions;
pub use static_policy::{AppPolicy, MetadataRule, PolicyConfig, StaticPolicy};
