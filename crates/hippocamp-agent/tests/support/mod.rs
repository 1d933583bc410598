//! What the runner tests share: in-memory stores, a memory store that
//! can be made hostile or stuck, and an OpenAI-compatible model on a
//! scripted loopback server.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use hippocamp_agent::{Agent, AgentServices, Runner, RunnerOptions, Tool};
use hippocamp_artifacts::{
    ArtifactLimits, ArtifactName, ArtifactScope, ArtifactStore, InMemoryArtifacts, PutOptions,
};
use hippocamp_core::{CallOptions, EntryId, MemoryScope, Result, SessionId};
use hippocamp_memory::{
    AddOutcome, Event, InMemoryStore, IngestReport, MemoryConfig, MemoryStore, NewEntry,
    SearchRequest, SearchResults, WriteOptions,
};
use hippocamp_models::scripted::{Reply, Scripted};
use hippocamp_models::{Model, ModelConfig, ModelLimits, Provider, connect};
use hippocamp_sessions::{InMemorySessions, SessionLimits, SessionStore};

/// How [`Wrapped`] behaves.
pub const NORMAL: u8 = 0;
/// Searches answer with another user's entries.
pub const FOREIGN_SEARCH: u8 = 1;
/// Adds are applied to another user and answered with that entry.
pub const FOREIGN_ADD: u8 = 2;
/// `add_events` never returns.
pub const STUCK_EVENTS: u8 = 3;
/// Every search takes 30 s.
pub const SLOW_SEARCH: u8 = 4;

/// An in-memory store whose behaviour a test can change.
#[derive(Debug)]
pub struct Wrapped {
    pub inner: InMemoryStore,
    pub mode: AtomicU8,
    /// Searches asked of it.
    pub searches: std::sync::atomic::AtomicUsize,
    /// `add_events` calls asked of it.
    pub event_calls: std::sync::atomic::AtomicUsize,
    /// The next this many `add_events` calls fail (`Unavailable`).
    pub fail_events: std::sync::atomic::AtomicUsize,
}

impl Wrapped {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: InMemoryStore::new(MemoryConfig::default()).unwrap(),
            mode: AtomicU8::new(NORMAL),
            searches: std::sync::atomic::AtomicUsize::new(0),
            event_calls: std::sync::atomic::AtomicUsize::new(0),
            fail_events: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    pub fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn mode(&self) -> u8 {
        self.mode.load(Ordering::SeqCst)
    }
}

pub fn stranger() -> MemoryScope {
    MemoryScope::parse("app", "mallory").unwrap()
}

#[async_trait]
impl hippocamp_memory::MemoryLayer for Wrapped {
    type Inner = InMemoryStore;
    fn inner(&self) -> &InMemoryStore {
        &self.inner
    }
    async fn add_entry(
        &self,
        scope: &MemoryScope,
        entry: NewEntry,
        opts: &WriteOptions,
    ) -> Result<AddOutcome> {
        if self.mode() == FOREIGN_ADD {
            return self.inner.add_entry(&stranger(), entry, opts).await;
        }
        self.inner.add_entry(scope, entry, opts).await
    }
    async fn add_events(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        events: &[Event],
        opts: &WriteOptions,
    ) -> Result<IngestReport> {
        self.event_calls.fetch_add(1, Ordering::SeqCst);
        if self.mode() == STUCK_EVENTS {
            std::future::pending::<()>().await;
        }
        let failing = self
            .fail_events
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(hippocamp_core::Error::Unavailable("injected".into()));
        }
        self.inner.add_events(scope, session, events, opts).await
    }
    async fn search(
        &self,
        scope: &MemoryScope,
        request: &SearchRequest,
        opts: &CallOptions,
    ) -> Result<SearchResults> {
        self.searches.fetch_add(1, Ordering::SeqCst);
        if self.mode() == SLOW_SEARCH {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        }
        if self.mode() == FOREIGN_SEARCH {
            let mut mine = self.inner.search(scope, request, opts).await?;
            let theirs = self.inner.search(&stranger(), request, opts).await?;
            mine.hits.extend(theirs.hits);
            return Ok(mine);
        }
        self.inner.search(scope, request, opts).await
    }
}

/// One test's world.
pub struct World {
    pub server: Scripted,
    pub memory: Arc<Wrapped>,
    pub artifacts: Arc<InMemoryArtifacts>,
    pub sessions: Arc<InMemorySessions>,
}

pub fn scope() -> MemoryScope {
    MemoryScope::parse("app", "alice").unwrap()
}

impl World {
    pub async fn new(script: Vec<Reply>) -> Self {
        Self {
            server: Scripted::start(script).await.unwrap(),
            memory: Wrapped::new(),
            artifacts: Arc::new(InMemoryArtifacts::new(ArtifactLimits::default()).unwrap()),
            sessions: Arc::new(InMemorySessions::new(SessionLimits::default()).unwrap()),
        }
    }

    pub fn model(&self) -> Arc<dyn Model> {
        self.model_of(Provider::Openai, "/v1")
    }

    pub fn model_of(&self, provider: Provider, path: &str) -> Arc<dyn Model> {
        connect(ModelConfig {
            provider,
            base_url: self.server.url(path),
            model: "scripted".into(),
            api_key: None,
            limits: ModelLimits::default(),
        })
        .unwrap()
    }

    pub fn services(&self) -> AgentServices {
        AgentServices {
            sessions: self.sessions.clone() as Arc<dyn SessionStore>,
            memory: Some(self.memory.clone() as Arc<dyn MemoryStore>),
            artifacts: Some(self.artifacts.clone() as Arc<dyn ArtifactStore>),
            outbox: None,
        }
    }

    pub fn runner(&self, tools: Vec<Arc<dyn Tool>>, options: RunnerOptions) -> Runner {
        self.runner_with("You help Alice.", tools, options)
    }

    pub fn runner_with(
        &self,
        instruction: &str,
        tools: Vec<Arc<dyn Tool>>,
        options: RunnerOptions,
    ) -> Runner {
        self.try_runner_with(instruction, tools, options).unwrap()
    }

    pub fn try_runner_with(
        &self,
        instruction: &str,
        tools: Vec<Arc<dyn Tool>>,
        options: RunnerOptions,
    ) -> hippocamp_agent::Result<Runner> {
        Runner::new(
            Agent {
                name: "helper".into(),
                model: self.model(),
                instruction: instruction.into(),
                tools,
            },
            self.services(),
            options,
        )
    }

    /// How many of alice's entries a lexical search for `q` finds, read
    /// from the store itself (no mode of the wrapper applies).
    pub async fn found(&self, q: &str) -> usize {
        self.memory
            .inner
            .search(
                &scope(),
                &hippocamp_memory::SearchRequest::new(q),
                &hippocamp_core::CallOptions::default(),
            )
            .await
            .unwrap()
            .hits
            .len()
    }

    pub async fn remember(&self, scope: &MemoryScope, text: &str) -> EntryId {
        self.memory
            .inner
            .add_entry(scope, NewEntry::new(text), &WriteOptions::default())
            .await
            .unwrap()
            .entry
            .id
    }

    pub async fn put(&self, scope: &ArtifactScope, name: &str, bytes: &'static [u8], mime: &str) {
        self.artifacts
            .put(
                scope,
                &ArtifactName::new(name).unwrap(),
                bytes.into(),
                &PutOptions {
                    mime_type: hippocamp_artifacts::MimeType::new(mime).unwrap(),
                    ..PutOptions::default()
                },
            )
            .await
            .unwrap();
    }

    /// Every stored event of alice's session `s`, as JSON text.
    pub async fn session_json(&self, s: &str) -> String {
        let got = self
            .sessions
            .get(
                &scope(),
                &SessionId::new(s).unwrap(),
                &hippocamp_core::CallOptions::default(),
            )
            .await
            .unwrap();
        serde_json::to_string(&got.events).unwrap()
    }
}
