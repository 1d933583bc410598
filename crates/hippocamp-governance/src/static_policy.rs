//! The static policy: per-app lifetimes, consent and legal holds from the
//! `[policy]` section of the configuration file.
//!
//! ```toml
//! [policy]
//! timeout_ms = 1000
//!
//! [policy.apps.support]
//! ttl_ms = 2592000000          # entries expire 30 days after they are written
//! retention_ms = 86400000      # and cannot be deleted in their first day
//! consent_required = true      # ingestion needs a recorded consent
//! erase_on_withdrawal = true   # withdrawing it erases the user's memory
//! legal_holds = ["user-17"]    # these users' data cannot be erased
//! suspended = false            # true: every operation on the app's data is refused
//!
//! [[policy.apps.support.rules]]
//! match = { kind = "chit_chat" }   # a metadata filter
//! ttl_ms = 3600000
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_core::{AppName, Error, Filter, MemoryScope, Problem, Result, UserId, deadline};
use hippocamp_memory::{ObligationRules, Obligations};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::consent::{ConsentScope, ConsentStore};
use crate::policy::{
    Action, AppLifetime, ArtifactTerms, Decision, Grant, Policy, PolicyInfo, Question,
};

/// The longest TTL or retention accepted: 100 years.
pub const MAX_LIFETIME_MS: u64 = 100 * 365 * 24 * 3_600_000;
/// Metadata rules one app may have.
pub const MAX_RULES_PER_APP: usize = 32;
/// Users one app may hold.
pub const MAX_HOLDS_PER_APP: usize = 10_000;
/// The default policy timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 1_000;

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}

/// The `[policy]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// How long the policy may take to answer, 1..=60,000 ms (an answer
    /// later than this is a denial).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Per app.
    #[serde(default)]
    pub apps: BTreeMap<String, AppPolicy>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            apps: BTreeMap::new(),
        }
    }
}

/// One app's policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppPolicy {
    /// Entries expire this long after they are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Entries cannot be deleted until this long after they are written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    /// Ingestion needs a recorded consent covering memory.
    #[serde(default)]
    pub consent_required: bool,
    /// Withdrawing consent erases the user's memory (else it only stops
    /// ingestion and cancels queued work).
    #[serde(default)]
    pub erase_on_withdrawal: bool,
    /// Users whose data is under a legal hold: nothing of theirs can be
    /// deleted or erased, and what they add is held too.
    #[serde(default)]
    pub legal_holds: Vec<String>,
    /// Lifetimes by metadata, first match wins.
    #[serde(default)]
    pub rules: Vec<MetadataRule>,
    /// Artifact versions expire this long after they are stored (the
    /// legal holds above hold the users' artifacts too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ttl_ms: Option<u64>,
    /// The app is suspended: every operation on its data (memory, agent
    /// sessions, artifacts; reads, writes and erasures alike) is refused
    /// (`app_suspended`) until this is lifted. An operator's freeze, e.g.
    /// during an incident.
    #[serde(default)]
    pub suspended: bool,
}

/// Lifetimes for entries whose metadata matches a filter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataRule {
    /// A metadata filter (the search filter language).
    #[serde(rename = "match")]
    pub matches: Map<String, Value>,
    /// Replaces the app's TTL for matching entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Replaces the app's retention for matching entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
}

fn lifetime(key: String, v: Option<u64>) -> Result<()> {
    match v {
        Some(ms) if ms == 0 || ms > MAX_LIFETIME_MS => Err(Error::config(
            key,
            Problem::OutOfRange {
                value: i128::from(ms),
                min: 1,
                max: i128::from(MAX_LIFETIME_MS),
            },
        )),
        _ => Ok(()),
    }
}

#[derive(Debug)]
struct Compiled {
    ttl_ms: Option<u64>,
    retention_ms: Option<u64>,
    consent_required: bool,
    erase_on_withdrawal: bool,
    holds: HashSet<String>,
    rules: Vec<(Filter, Option<u64>, Option<u64>)>,
    artifact_ttl_ms: Option<u64>,
    suspended: bool,
}

impl PolicyConfig {
    /// Checks every value (names, ranges, filters, counts).
    pub fn validate(&self) -> Result<()> {
        self.compile().map(drop)
    }

    fn compile(&self) -> Result<HashMap<String, Compiled>> {
        let max_ms = u64::try_from(deadline::MAX_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
        if self.timeout_ms == 0 || self.timeout_ms > max_ms {
            return Err(Error::config(
                "policy.timeout_ms",
                Problem::OutOfRange {
                    value: i128::from(self.timeout_ms),
                    min: 1,
                    max: i128::from(max_ms),
                },
            ));
        }
        let mut out = HashMap::new();
        for (app, p) in &self.apps {
            let at = |k: &str| format!("policy.apps.{app}.{k}");
            AppName::new(app.as_str()).map_err(|_| {
                Error::config(
                    format!("policy.apps.{app}"),
                    Problem::Malformed("not a valid app name".into()),
                )
            })?;
            lifetime(at("ttl_ms"), p.ttl_ms)?;
            lifetime(at("retention_ms"), p.retention_ms)?;
            lifetime(at("artifact_ttl_ms"), p.artifact_ttl_ms)?;
            if p.legal_holds.len() > MAX_HOLDS_PER_APP {
                return Err(Error::config(
                    at("legal_holds"),
                    Problem::TooMany {
                        count: p.legal_holds.len(),
                        max: MAX_HOLDS_PER_APP,
                    },
                ));
            }
            for u in &p.legal_holds {
                UserId::new(u.as_str()).map_err(|_| {
                    Error::config(
                        at("legal_holds"),
                        Problem::Malformed(format!("`{u}` is not a valid user id")),
                    )
                })?;
            }
            if p.rules.len() > MAX_RULES_PER_APP {
                return Err(Error::config(
                    at("rules"),
                    Problem::TooMany {
                        count: p.rules.len(),
                        max: MAX_RULES_PER_APP,
                    },
                ));
            }
            let mut rules = Vec::new();
            for (i, r) in p.rules.iter().enumerate() {
                let rule = |k: &str| format!("policy.apps.{app}.rules[{i}].{k}");
                lifetime(rule("ttl_ms"), r.ttl_ms)?;
                lifetime(rule("retention_ms"), r.retention_ms)?;
                let filter = Filter::parse(
                    &Value::Object(r.matches.clone()),
                    hippocamp_core::MemoryLimits::default().json(),
                )
                .map_err(|e| Error::config(rule("match"), Problem::Malformed(e.to_string())))?;
                rules.push((filter, r.ttl_ms, r.retention_ms));
            }
            out.insert(
                app.clone(),
                Compiled {
                    ttl_ms: p.ttl_ms,
                    retention_ms: p.retention_ms,
                    consent_required: p.consent_required,
                    erase_on_withdrawal: p.erase_on_withdrawal,
                    holds: p.legal_holds.iter().cloned().collect(),
                    rules,
                    artifact_ttl_ms: p.artifact_ttl_ms,
                    suspended: p.suspended,
                },
            );
        }
        Ok(out)
    }
}

/// The static policy over a consent store.
#[derive(Debug)]
pub struct StaticPolicy {
    config: PolicyConfig,
    apps: HashMap<String, Compiled>,
    consents: Arc<dyn ConsentStore>,
}

impl StaticPolicy {
    /// Compiles `config`; consents are looked up in `consents`.
    pub fn new(config: PolicyConfig, consents: Arc<dyn ConsentStore>) -> Result<Self> {
        let apps = config.compile()?;
        Ok(Self {
            config,
            apps,
            consents,
        })
    }
}

impl StaticPolicy {
    /// `Ok(consent id)` when `app` needs no consent (`None`) or `scope`
    /// has one that `covers`; else the denial.
    async fn consented(
        &self,
        app: &Compiled,
        scope: &MemoryScope,
        covers: fn(ConsentScope) -> bool,
    ) -> Result<std::result::Result<Option<String>, Decision>> {
        if !app.consent_required {
            return Ok(Ok(None));
        }
        Ok(match self.consents.get(scope).await? {
            Some(c) if covers(c.scope) => Ok(Some(c.consent_id)),
            _ => Err(Decision::deny("consent_required")),
        })
    }
}

impl Compiled {
    /// The obligations a write in this app gets at `now` (`held`: the
    /// user is under a legal hold).
    fn grant(&self, held: bool, now: u64) -> Grant {
        let app = self;
        let obligations = Obligations {
            expires_at_ms: after(now, app.ttl_ms),
            retain_until_ms: after(now, app.retention_ms),
            legal_hold: held,
        };
        let by_metadata = ObligationRules::new(
            app.rules
                .iter()
                .map(|(f, ttl, ret)| {
                    (
                        f.clone(),
                        Obligations {
                            expires_at_ms: after(now, ttl.or(app.ttl_ms)),
                            retain_until_ms: after(now, ret.or(app.retention_ms)),
                            legal_hold: held,
                        },
                    )
                })
                .collect(),
        );
        Grant {
            obligations,
            by_metadata,
            consent_id: None,
        }
    }
}

fn after(now: u64, ms: Option<u64>) -> Option<u64> {
    ms.map(|ms| now.saturating_add(ms))
}

#[async_trait]
impl Policy for StaticPolicy {
    async fn decide(&self, q: &Question<'_>) -> Result<Decision> {
        // Keeping data longer than the app's lifetimes (a restored file's
        // retention or hold, a library caller's own), in any app: the
        // operator on the machine may, a remote token may not.
        if q.action == Action::Retain && q.caller.kind == hippocamp_core::CallerKind::Token {
            return Ok(Decision::deny("retention_not_granted"));
        }
        let Some(app) = q.app.and_then(|a| self.apps.get(a.as_str())) else {
            return Ok(Decision::Allow);
        };
        // A suspended app's data is out of reach on every path, its own
        // artifacts included.
        if app.suspended {
            return Ok(Decision::deny("app_suspended"));
        }
        let Some(scope) = q.scope else {
            return Ok(Decision::Allow);
        };
        let held = app.holds.contains(scope.user().as_str());
        match q.action {
            // Writes of memory (entries, corrections) and of the agent's
            // conversation need a consent covering memory; a correction
            // gets the obligations of its new metadata like a new entry.
            Action::Ingest | Action::Update | Action::Append => {
                if q.action == Action::Update && held {
                    return Ok(Decision::deny("legal_hold"));
                }
                let consent_id = match self
                    .consented(app, scope, ConsentScope::covers_memory)
                    .await?
                {
                    Ok(id) => id,
                    Err(denied) => return Ok(denied),
                };
                Ok(Decision::AllowWith(Grant {
                    consent_id,
                    ..app.grant(held, q.now_ms)
                }))
            }
            // An artifact write needs a consent covering artifacts.
            Action::PutArtifact => {
                match self
                    .consented(app, scope, ConsentScope::covers_artifacts)
                    .await?
                {
                    Ok(_) => Ok(Decision::Allow),
                    Err(denied) => Ok(denied),
                }
            }
            Action::Delete | Action::Erase if held => Ok(Decision::deny("legal_hold")),
            _ => Ok(Decision::Allow),
        }
    }

    fn describe(&self) -> PolicyInfo {
        let mut consent_required = Vec::new();
        let mut legal_holds = BTreeSet::new();
        let mut lifetimes = Vec::new();
        for (name, app) in &self.config.apps {
            if app.consent_required {
                consent_required.push(name.clone());
            }
            for u in &app.legal_holds {
                legal_holds.insert(format!("{name}/{u}"));
            }
            if app.ttl_ms.is_some()
                || app.retention_ms.is_some()
                || !app.rules.is_empty()
                || app.artifact_ttl_ms.is_some()
            {
                lifetimes.push(AppLifetime {
                    app: name.clone(),
                    ttl_ms: app.ttl_ms,
                    retention_ms: app.retention_ms,
                    metadata_rules: app.rules.len(),
                    artifact_ttl_ms: app.artifact_ttl_ms,
                });
            }
        }
        PolicyInfo {
            kind: "static".to_owned(),
            timeout_ms: self.config.timeout_ms,
            consent_required,
            legal_holds: legal_holds.into_iter().collect(),
            lifetimes,
        }
    }

    fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.config.timeout_ms)
    }

    fn erases_on_withdrawal(&self, scope: &MemoryScope) -> bool {
        self.apps
            .get(scope.app().as_str())
            .is_some_and(|a| a.erase_on_withdrawal)
    }

    fn held_scopes(&self) -> Vec<MemoryScope> {
        self.config
            .apps
            .iter()
            .flat_map(|(app, p)| {
                p.legal_holds
                    .iter()
                    .filter_map(move |u| MemoryScope::parse(app, u).ok())
            })
            .collect()
    }

    fn artifact_terms(&self, app: &AppName, user: Option<&UserId>) -> ArtifactTerms {
        match self.apps.get(app.as_str()) {
            None => ArtifactTerms::default(),
            Some(a) => ArtifactTerms {
                ttl_ms: a.artifact_ttl_ms,
                legal_hold: user.is_some_and(|u| a.holds.contains(u.as_str())),
            },
        }
    }
}
