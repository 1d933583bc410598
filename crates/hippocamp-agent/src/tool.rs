//! The [`Tool`] contract and the agent's validated set of tools.
//!
//! A tool declares its name, description, a strict JSON Schema for its
//! arguments (an object schema with `additionalProperties: false`,
//! compiled once when the runner is built) and the capabilities it
//! needs. Arguments are validated against the schema before `execute`
//! runs; a tool only ever gets a [`ToolContext`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use hippocamp_models::ToolDeclaration;
use serde_json::Value;

use crate::capability::CapabilitySet;
use crate::context::ToolContext;
use crate::error::{AgentError, Result};

/// Longest tool name (the providers' own bound).
pub const MAX_TOOL_NAME: usize = 64;
/// Most tools one agent may offer.
pub const MAX_TOOLS: usize = 64;

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync + fmt::Debug {
    /// Name, description and argument schema, as the model sees them.
    fn declaration(&self) -> ToolDeclaration;

    /// The operations its context may perform.
    fn capabilities(&self) -> CapabilitySet;

    /// Runs one call with arguments that passed the schema; the result is
    /// a JSON object sent back to the model and kept in the session.
    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<Value>;
}

/// A tool of a [`ToolSet`], with its compiled schema.
pub struct Registered {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) declaration: ToolDeclaration,
    pub(crate) capabilities: CapabilitySet,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Registered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("name", &self.declaration.name)
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// A validated set of tools (unique names, strict schemas compiled
/// once): the runner's, and the MCP server's.
#[derive(Debug, Default)]
pub struct ToolSet {
    tools: Vec<Registered>,
    by_name: HashMap<String, usize>,
}

fn invalid(detail: String) -> AgentError {
    AgentError::InvalidOptions(detail)
}

/// Checks a declaration: a valid name, and a strict object schema.
fn check_declaration(d: &ToolDeclaration) -> Result<jsonschema::Validator> {
    let name_ok = !d.name.is_empty()
        && d.name.len() <= MAX_TOOL_NAME
        && d.name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !name_ok {
        return Err(invalid(format!(
            "tool name `{}` must be 1..={MAX_TOOL_NAME} of A-Z a-z 0-9 _ -",
            d.name
        )));
    }
    let p = &d.parameters;
    if p.get("type").and_then(Value::as_str) != Some("object")
        || p.get("additionalProperties") != Some(&Value::Bool(false))
    {
        return Err(invalid(format!(
            "tool `{}`: its parameters must be an object schema with \"additionalProperties\": false",
            d.name
        )));
    }
    jsonschema::validator_for(p).map_err(|e| {
        invalid(format!(
            "tool `{}`: its schema does not compile: {e}",
            d.name
        ))
    })
}

impl ToolSet {
    /// Checks and compiles `tools`.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Self> {
        if tools.len() > MAX_TOOLS {
            return Err(invalid(format!("at most {MAX_TOOLS} tools")));
        }
        let mut b = Self::default();
        for tool in tools {
            let declaration = tool.declaration();
            let validator = check_declaration(&declaration)?;
            if b.by_name.contains_key(&declaration.name) {
                return Err(invalid(format!(
                    "two tools are named `{}`",
                    declaration.name
                )));
            }
            b.by_name.insert(declaration.name.clone(), b.tools.len());
            b.tools.push(Registered {
                capabilities: tool.capabilities(),
                tool,
                declaration,
                validator,
            });
        }
        Ok(b)
    }

    /// Every declaration, in order.
    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.tools.iter().map(|t| t.declaration.clone()).collect()
    }

    /// Every tool, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Registered> {
        self.tools.iter()
    }

    /// The tool named `name`, or `UnknownTool`.
    pub fn get(&self, name: &str) -> Result<&Registered> {
        self.by_name
            .get(name)
            .map(|&i| &self.tools[i])
            .ok_or_else(|| AgentError::UnknownTool(name.chars().take(MAX_TOOL_NAME).collect()))
    }
}

impl Registered {
    /// The tool.
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// Its declaration.
    pub fn declaration(&self) -> &ToolDeclaration {
        &self.declaration
    }

    /// What it declared.
    pub fn capabilities(&self) -> CapabilitySet {
        self.capabilities
    }

    /// Checks `args` against the schema (the first violation is named).
    pub fn check(&self, args: &Value) -> Result<()> {
        self.validator
            .validate(args)
            .map_err(|e| AgentError::InvalidToolArguments {
                tool: self.declaration.name.clone(),
                detail: format!("{e} (at `{}`)", e.instance_path()),
            })
    }
}
