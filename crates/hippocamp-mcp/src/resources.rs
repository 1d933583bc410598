//! The user's artifacts as MCP resources. A resource's URI is the API v1
//! URL of the version,
//! `{base}/v1/apps/{app}/users/{user}[/sessions/{session}]/artifacts/{name}?version=N`
//! (each segment percent-encoded once; the name's `/` separate segments),
//! the same string the ADK artifact service returns as `canonical_uri`.
//! Listing pages through the user scope's names (each at its latest
//! version); reading accepts the user scope or one of the user's
//! sessions, and nothing else: a URI of another scope is not found.

use base64::Engine as _;
use hippocamp_agent::context::MAX_ATTACHMENT_BYTES;
use hippocamp_artifacts::{ArtifactName, ArtifactScope, ArtifactStore, PageRequest, Selector};
use hippocamp_core::{CallOptions, MemoryScope};
use percent_encoding::percent_decode_str;
use rmcp::model::{ListResourcesResult, ReadResourceResult, Resource, ResourceContents};

use crate::{Authority, Backends};

/// Resources per listing page.
pub const PAGE: u64 = 50;
/// Largest artifact a resource read returns (bytes).
pub const MAX_READ_BYTES: u64 = hippocamp_agent::builtin::MAX_ARTIFACT_BYTES;

const _: () = assert!(MAX_READ_BYTES <= MAX_ATTACHMENT_BYTES);

/// The API v1 URL of a version.
pub fn uri(
    base: &str,
    scope: &MemoryScope,
    session: Option<&str>,
    name: &str,
    version: u64,
) -> String {
    let Ok(mut url) = url::Url::parse(base) else {
        return String::new();
    };
    if let Ok(mut p) = url.path_segments_mut() {
        p.pop_if_empty().extend([
            "v1",
            "apps",
            scope.app().as_str(),
            "users",
            scope.user().as_str(),
        ]);
        if let Some(s) = session {
            p.extend(["sessions", s]);
        }
        p.push("artifacts").extend(name.split('/'));
    }
    url.set_query(Some(&format!("version={version}")));
    url.to_string()
}

/// What a URI names, if it is one of ours in `who`'s scope.
fn parse(who: &Authority, uri: &str) -> Option<(ArtifactScope, ArtifactName, u64)> {
    let url = url::Url::parse(uri).ok()?;
    let base = url::Url::parse(&who.base_url).ok()?;
    if url.origin() != base.origin() {
        return None;
    }
    let version: u64 = url
        .query_pairs()
        .find(|(k, _)| k == "version")
        .and_then(|(_, v)| v.parse().ok())?;
    let segs: Vec<String> = url
        .path_segments()?
        .map(|s| {
            percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(std::borrow::Cow::into_owned)
        })
        .collect::<Option<_>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (app, user, session, rest) = match s.as_slice() {
        [
            "v1",
            "apps",
            app,
            "users",
            user,
            "sessions",
            session,
            "artifacts",
            rest @ ..,
        ] => (*app, *user, Some(*session), rest),
        ["v1", "apps", app, "users", user, "artifacts", rest @ ..] => (*app, *user, None, rest),
        _ => return None,
    };
    // Scope is authority: only the caller's own user.
    if app != who.scope.app().as_str() || user != who.scope.user().as_str() || rest.is_empty() {
        return None;
    }
    let scope = match session {
        Some(sess) => ArtifactScope::session(app, user, sess).ok()?,
        None => ArtifactScope::user(app, user).ok()?,
    };
    Some((scope, ArtifactName::new(rest.join("/")).ok()?, version))
}

/// One page of the user scope's artifacts, after `cursor` (a name).
pub async fn list(
    store: &dyn ArtifactStore,
    who: &Authority,
    cursor: Option<String>,
) -> hippocamp_core::Result<ListResourcesResult> {
    let scope = ArtifactScope::user(who.scope.app().as_str(), who.scope.user().as_str())?;
    let page = PageRequest {
        cursor: cursor.map(ArtifactName::new).transpose()?,
        limit: Some(PAGE),
    };
    let call = CallOptions::default();
    let names = store.list_names(&scope, &page, &call).await?;
    let mut items = Vec::with_capacity(names.items.len());
    for n in &names.items {
        // A name whose last version went away between the two calls is
        // left out rather than failing the page.
        let Ok(m) = store.head(&scope, n, Selector::Latest, &call).await else {
            continue;
        };
        if m.scope != scope || &m.name != n {
            return Err(hippocamp_core::Error::foreign_record(
                "the artifact store",
                "a version record",
            ));
        }
        items.push(
            Resource::new(
                uri(&who.base_url, &who.scope, None, n.as_str(), m.version),
                n.as_str(),
            )
            .with_mime_type(m.mime_type.as_str())
            .with_size(m.size)
            .with_description(format!("version {} of {}", m.version, n)),
        );
    }
    let mut r = ListResourcesResult::with_all_items(items);
    r.next_cursor = names.next_cursor.map(|c| c.as_str().to_owned());
    Ok(r)
}

/// Reads the version `uri` names, text for text types, a blob otherwise;
/// `Ok(None)` when it names nothing of `who`'s.
pub async fn read(
    backends: &Backends,
    who: &Authority,
    uri_text: &str,
) -> hippocamp_core::Result<Option<ReadResourceResult>> {
    let Some(store) = &backends.artifacts else {
        return Ok(None);
    };
    let Some((scope, name, version)) = parse(who, uri_text) else {
        return Ok(None);
    };
    let read = hippocamp_agent::context::read_checked(
        store.as_ref(),
        &scope,
        &name,
        Selector::Version(version),
        MAX_READ_BYTES,
        CallOptions::default(),
    )
    .await;
    let (meta, bytes) = match read {
        Ok(r) => r,
        Err(hippocamp_agent::AgentError::Service(hippocamp_core::Error::NotFound(_))) => {
            return Ok(None);
        }
        Err(e) => return Err(e.into_service_error()),
    };
    let mime = meta.mime_type.as_str();
    let contents = match std::str::from_utf8(&bytes) {
        Ok(t) if hippocamp_agent::builtin::is_text(mime) => {
            ResourceContents::text(t, uri_text).with_mime_type(mime)
        }
        _ => ResourceContents::blob(
            base64::engine::general_purpose::STANDARD.encode(&bytes),
            uri_text,
        )
        .with_mime_type(mime),
    };
    Ok(Some(ReadResourceResult::new(vec![contents])))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn uris_round_trip_and_only_the_callers_scope_parses() {
        let base = "http://127.0.0.1:8765";
        let me = Authority {
            scope: MemoryScope::parse("my app", "u/1").unwrap(),
            permissions: BTreeSet::new(),
            base_url: base.into(),
            caller: hippocamp_core::Caller::default(),
        };
        let u = uri(base, &me.scope, Some("s 1"), "notes/a b.md", 3);
        assert_eq!(
            u,
            "http://127.0.0.1:8765/v1/apps/my%20app/users/u%2F1/sessions/s%201/artifacts/notes/a%20b.md?version=3"
        );
        let (scope, name, v) = parse(&me, &u).unwrap();
        assert_eq!(
            scope,
            ArtifactScope::session("my app", "u/1", "s 1").unwrap()
        );
        assert_eq!((name.as_str(), v), ("notes/a b.md", 3));
        let other = Authority {
            scope: MemoryScope::parse("my app", "u2").unwrap(),
            ..me.clone()
        };
        assert!(parse(&other, &u).is_none());
        let elsewhere = Authority {
            base_url: "http://127.0.0.1:9999".into(),
            ..me.clone()
        };
        assert!(parse(&elsewhere, &u).is_none());
        assert!(parse(&me, &u.replace("?version=3", "")).is_none());
    }
}
