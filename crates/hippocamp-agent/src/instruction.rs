//! Instruction templates: `{artifact.NAME}` (or `{{artifact.NAME}}`,
//! whitespace allowed inside the braces, a trailing `?` for optional) is
//! replaced by the UTF-8 text of the latest version of artifact NAME in
//! the run's exact session scope. The record is verified (scope, name,
//! size, SHA-256) like every tool read; the whole instruction is bounded
//! by `max_instruction_bytes`. A missing required artifact is a typed
//! error; a name that looks like a secret is refused when the runner is
//! built; text that is not a valid placeholder stays literal.

use hippocamp_artifacts::{ArtifactName, ArtifactScope, ArtifactStore, Selector};
use hippocamp_core::CallOptions;

use crate::context::read_checked;
use crate::error::{AgentError, Bound, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Text(String),
    Artifact { name: ArtifactName, optional: bool },
}

/// A parsed instruction template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    segments: Vec<Segment>,
}

/// Parses one placeholder body (between the braces), if it is one.
fn placeholder(body: &str) -> Option<(String, bool)> {
    let b = body.trim();
    let rest = b.strip_prefix("artifact.")?;
    let (name, optional) = match rest.strip_suffix('?') {
        Some(n) => (n.trim_end(), true),
        None => (rest, false),
    };
    ArtifactName::new(name).ok()?;
    Some((name.to_owned(), optional))
}

impl Instruction {
    /// Parses `template`; a placeholder naming a secret-looking artifact
    /// is refused.
    pub fn compile(template: &str) -> Result<Self> {
        let mut segments = Vec::new();
        let mut text = String::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let double = rest[open..].starts_with("{{");
            let start = open + if double { 2 } else { 1 };
            let close_pat = if double { "}}" } else { "}" };
            let found = rest[start..].find(close_pat).and_then(|end| {
                let body = &rest[start..start + end];
                (!body.contains('{'))
                    .then(|| placeholder(body))
                    .flatten()
                    .map(|p| (p, start + end + close_pat.len()))
            });
            let Some(((name, optional), after)) = found else {
                text.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
                continue;
            };
            if hippocamp_core::secrets::is_sensitive_key(&name) {
                return Err(AgentError::InvalidOptions(format!(
                    "the instruction names the secret-looking artifact `{name}`"
                )));
            }
            text.push_str(&rest[..open]);
            if !text.is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut text)));
            }
            segments.push(Segment::Artifact {
                name: ArtifactName::new(name)?,
                optional,
            });
            rest = &rest[after..];
        }
        text.push_str(rest);
        if !text.is_empty() {
            segments.push(Segment::Text(text));
        }
        Ok(Self { segments })
    }

    /// Whether it has placeholders (and so needs an artifact store).
    pub fn has_placeholders(&self) -> bool {
        self.segments
            .iter()
            .any(|s| matches!(s, Segment::Artifact { .. }))
    }

    /// The instruction with every placeholder resolved in `scope`.
    pub async fn resolve(
        &self,
        artifacts: Option<&dyn ArtifactStore>,
        scope: &ArtifactScope,
        max_bytes: u64,
        call: CallOptions,
    ) -> Result<String> {
        let mut out = String::new();
        for s in &self.segments {
            match s {
                Segment::Text(t) => out.push_str(t),
                Segment::Artifact { name, optional } => {
                    let read = match artifacts {
                        Some(a) => read_checked(a, scope, name, Selector::Latest, max_bytes, call)
                            .await
                            .map(Some),
                        None => Ok(None),
                    };
                    match read {
                        Ok(Some((_, bytes))) => {
                            let text = std::str::from_utf8(&bytes).map_err(|_| {
                                AgentError::InvalidInstructionArtifact {
                                    name: name.to_string(),
                                    detail: "it is not UTF-8 text".into(),
                                }
                            })?;
                            out.push_str(text);
                        }
                        Ok(None) | Err(AgentError::Service(hippocamp_core::Error::NotFound(_)))
                            if *optional => {}
                        Ok(None) | Err(AgentError::Service(hippocamp_core::Error::NotFound(_))) => {
                            return Err(AgentError::InstructionArtifactNotFound(name.to_string()));
                        }
                        Err(AgentError::Service(hippocamp_core::Error::InvalidArgument {
                            field: hippocamp_core::Field::Body,
                            ..
                        })) => {
                            return Err(AgentError::BoundExceeded(Bound::InstructionBytes(
                                max_bytes,
                            )));
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
            if out.len() as u64 > max_bytes {
                return Err(AgentError::BoundExceeded(Bound::InstructionBytes(
                    max_bytes,
                )));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn placeholders_parse_and_anything_else_stays_literal() {
        let i = Instruction::compile(
            "Hi {artifact.guide.txt}; {{ artifact.notes/a.md? }} {x} {artifact./bad} {",
        )
        .unwrap();
        assert_eq!(
            i.segments,
            vec![
                Segment::Text("Hi ".into()),
                Segment::Artifact {
                    name: ArtifactName::new("guide.txt").unwrap(),
                    optional: false
                },
                Segment::Text("; ".into()),
                Segment::Artifact {
                    name: ArtifactName::new("notes/a.md").unwrap(),
                    optional: true
                },
                Segment::Text(" {x} {artifact./bad} {".into()),
            ]
        );
        assert!(!Instruction::compile("plain").unwrap().has_placeholders());
        assert!(matches!(
            Instruction::compile("{artifact.client_secret}"),
            Err(AgentError::InvalidOptions(_))
        ));
    }
}
