//! The effect journal: a tool's effect is never left without a record in
//! its session.
//!
//! A tool can change a store (add a memory, write an artifact) before the
//! event holding its result is appended. The intent is already durable by
//! then: the model's answer naming every call of the round (tool, call
//! id, arguments) is appended before any tool runs. If the append of the
//! results fails, the runner keeps that event (at most
//! [`MAX_PENDING`] sessions, in memory) and writes it first on the next
//! run of that session. A runner that never saw it (a restart, or one
//! past the bound) finds, at the start of the next run, calls without a
//! result and writes one for each saying the call was interrupted and its
//! effect may have happened, with an `interrupted` context effect naming
//! the tool and call id. Either way a provider never sees a call without
//! its result, and an audit of the session sees every call.

use std::collections::{HashMap, HashSet};

use hippocamp_core::{MemoryScope, SessionId};
use hippocamp_models::{Content, FunctionResponse, Part, USER};
use hippocamp_sessions::{Actions, SessionEvent};
use parking_lot::Mutex;
use serde_json::json;

/// Sessions whose failed result event a runner keeps at most.
pub const MAX_PENDING: usize = 1_024;

/// The result events a runner could not append, by session.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pending: Mutex<HashMap<(MemoryScope, SessionId), SessionEvent>>,
}

impl Journal {
    /// Keeps `event` (a round's results) for the next run of `session`.
    pub(crate) fn keep(&self, scope: &MemoryScope, session: &SessionId, event: SessionEvent) {
        let mut p = self.pending.lock();
        if p.len() < MAX_PENDING || p.contains_key(&(scope.clone(), session.clone())) {
            p.insert((scope.clone(), session.clone()), event);
        }
        // Past the bound the session's calls are found unanswered instead.
    }

    /// The events to append before a new run of `session` whose stored
    /// events are `history`: the kept results of its calls that have none,
    /// then an `interrupted` result for every other such call. Ids are
    /// left to the caller.
    pub(crate) fn recover(
        &self,
        scope: &MemoryScope,
        session: &SessionId,
        history: &[SessionEvent],
        now_ms: i64,
    ) -> Vec<SessionEvent> {
        let kept = self
            .pending
            .lock()
            .remove(&(scope.clone(), session.clone()));
        let mut open = unanswered(history);
        let mut out = Vec::new();
        if let Some(event) = kept {
            let ids = response_ids(&event);
            if !ids.is_empty() && ids.iter().all(|id| open.iter().any(|(c, _)| c == id)) {
                open.retain(|(c, _)| !ids.contains(c));
                out.push(event);
            }
        }
        if open.is_empty() {
            return out;
        }
        let parts = open
            .iter()
            .map(|(id, name)| {
                Part::response(FunctionResponse {
                    id: Some(id.clone()),
                    name: name.clone(),
                    response: json!({"error": {
                        "code": "interrupted",
                        "message": "the run ended before this call's result was recorded; its effect may or may not have happened",
                    }}),
                })
            })
            .collect();
        let effects = open
            .iter()
            .map(|(id, name)| json!({"interrupted": {"tool": name, "call_id": id}}))
            .collect();
        let mut event = SessionEvent::text("", hippocamp_sessions::event::TOOL, now_ms, "");
        event.content = Some(Content {
            role: Some(USER.into()),
            parts,
        });
        event.actions = Actions {
            context_effects: effects,
        };
        out.push(event);
        out
    }
}

/// The (call id, tool) of every call in `history` without a result, in
/// order.
fn unanswered(history: &[SessionEvent]) -> Vec<(String, String)> {
    let answered: HashSet<String> = history.iter().flat_map(response_ids).collect();
    history
        .iter()
        .filter_map(|e| e.content.as_ref())
        .flat_map(|c| &c.parts)
        .filter_map(|p| p.function_call.as_ref())
        .filter_map(|c| Some((c.id.clone()?, c.name.clone())))
        .filter(|(id, _)| !answered.contains(id))
        .collect()
}

fn response_ids(event: &SessionEvent) -> Vec<String> {
    event
        .content
        .as_ref()
        .map(|c| {
            c.parts
                .iter()
                .filter_map(|p| p.function_response.as_ref()?.id.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use hippocamp_models::FunctionCall;

    use super::*;

    fn scope() -> (MemoryScope, SessionId) {
        (
            MemoryScope::parse("app", "alice").unwrap_or_else(|_| unreachable!()),
            SessionId::new("s").unwrap_or_else(|_| unreachable!()),
        )
    }

    fn calls(ids: &[&str]) -> SessionEvent {
        let mut e = SessionEvent::text("m", "agent", 1, "");
        e.content = Some(Content {
            role: Some("model".into()),
            parts: ids
                .iter()
                .map(|id| {
                    Part::call(FunctionCall {
                        id: Some((*id).into()),
                        name: "memory_add".into(),
                        args: json!({}),
                    })
                })
                .collect(),
        });
        e
    }

    fn results(ids: &[&str]) -> SessionEvent {
        let mut e = SessionEvent::text("r", "tool", 2, "");
        e.content = Some(Content {
            role: Some(USER.into()),
            parts: ids
                .iter()
                .map(|id| {
                    Part::response(FunctionResponse {
                        id: Some((*id).into()),
                        name: "memory_add".into(),
                        response: json!({"id": "mem-1"}),
                    })
                })
                .collect(),
        });
        e
    }

    #[test]
    fn answered_calls_need_nothing() {
        let (s, id) = scope();
        let j = Journal::default();
        assert!(
            j.recover(&s, &id, &[calls(&["a"]), results(&["a"])], 3)
                .is_empty()
        );
    }

    #[test]
    fn a_kept_result_comes_first_and_the_rest_are_interrupted() {
        let (s, id) = scope();
        let j = Journal::default();
        j.keep(&s, &id, results(&["a"]));
        let out = j.recover(&s, &id, &[calls(&["a", "b"])], 3);
        assert_eq!(out.len(), 2);
        assert_eq!(response_ids(&out[0]), ["a"]);
        assert_eq!(response_ids(&out[1]), ["b"]);
        assert_eq!(
            out[1].actions.context_effects[0]["interrupted"]["call_id"],
            "b"
        );
        // Taken once.
        assert_eq!(j.recover(&s, &id, &[calls(&["a", "b"])], 3).len(), 1);
    }

    #[test]
    fn a_kept_result_already_stored_is_dropped() {
        let (s, id) = scope();
        let j = Journal::default();
        j.keep(&s, &id, results(&["a"]));
        assert!(
            j.recover(&s, &id, &[calls(&["a"]), results(&["a"])], 3)
                .is_empty()
        );
    }
}
