//! The runner's errors, named for outcomes.

use hippocamp_core::Error as ServiceError;
use thiserror::Error;

use crate::capability::Capability;

/// A hard bound of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `max_model_calls` model calls were made without a final answer.
    ModelCalls(u64),
    /// The model asked for more than `max_tool_calls_per_round` calls.
    ToolCallsPerRound(u64),
    /// A model request would be larger than `max_request_bytes`.
    RequestBytes {
        /// Its size.
        bytes: u64,
        /// The bound.
        max: u64,
    },
    /// The run's deadline passed.
    Deadline,
    /// More than 8 artifacts would be attached to one request.
    Attachments(u64),
    /// Attached artifacts would exceed 10 MiB together.
    AttachmentBytes(u64),
    /// The resolved instruction is longer than `max_instruction_bytes`.
    InstructionBytes(u64),
}

/// What went wrong.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A service (store, model, outbox) refused or failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// A tool used an operation it did not declare.
    #[error("tool `{tool}` did not declare the capability `{capability}`")]
    CapabilityDenied {
        /// The tool.
        tool: String,
        /// What it tried.
        capability: Capability,
    },
    /// Tool arguments do not match the tool's schema.
    #[error("invalid arguments for tool `{tool}`: {detail}")]
    InvalidToolArguments {
        /// The tool.
        tool: String,
        /// The first violation.
        detail: String,
    },
    /// The model called a tool the agent does not have.
    #[error("the agent has no tool named `{0}`")]
    UnknownTool(String),
    /// A hard bound of the run was reached; the events so far are kept.
    #[error("run bound reached: {0:?}")]
    BoundExceeded(Bound),
    /// The runner's options or the agent's tools are not valid.
    #[error("invalid runner options: {0}")]
    InvalidOptions(String),
    /// An instruction placeholder names an artifact that is not there.
    #[error("the instruction's artifact `{0}` does not exist")]
    InstructionArtifactNotFound(String),
    /// An instruction placeholder's artifact cannot be used.
    #[error("the instruction's artifact `{name}` cannot be used: {detail}")]
    InvalidInstructionArtifact {
        /// The artifact.
        name: String,
        /// Why.
        detail: String,
    },
    /// The run answered, but its events were not admitted to the durable
    /// ingestion outbox (the answer and its events are in the session).
    #[error("the run's events were not admitted for durable ingestion: {}", .0.source)]
    IngestionNotAdmitted(Box<NotAdmitted>),
}

impl AgentError {
    /// The service error for a caller outside a run (a route, an MCP
    /// resource, a memory tool on a context): a service's own error as it
    /// is, anything else `Unavailable` with this error's text.
    pub fn into_service_error(self) -> ServiceError {
        match self {
            AgentError::Service(e) => e,
            other => ServiceError::Unavailable(other.to_string()),
        }
    }

    /// A stable snake_case name of the error kind (what a tool result or
    /// an API reply carries as `error`).
    pub fn code(&self) -> &'static str {
        match self {
            AgentError::Service(e) => e.code(),
            AgentError::CapabilityDenied { .. } => "capability_denied",
            AgentError::InvalidToolArguments { .. } => "invalid_arguments",
            AgentError::UnknownTool(_) => "unknown_tool",
            AgentError::BoundExceeded(_) => "bound_exceeded",
            AgentError::InvalidOptions(_) => "invalid_options",
            AgentError::InstructionArtifactNotFound(_) => "instruction_artifact_not_found",
            AgentError::InvalidInstructionArtifact { .. } => "invalid_instruction_artifact",
            AgentError::IngestionNotAdmitted(_) => "ingestion_not_admitted",
        }
    }
}

/// A run whose durable ingestion was refused.
#[derive(Debug)]
pub struct NotAdmitted {
    /// The final answer.
    pub answer: String,
    /// Why the outbox refused.
    pub source: ServiceError,
}

/// The runner's result type.
pub type Result<T, E = AgentError> = std::result::Result<T, E>;
