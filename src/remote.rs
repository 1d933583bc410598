//! The CLI as a client of a running server (`--server URL --token T`).
//! Paths are built segment by segment, so scope names and artifact names
//! are percent-encoded exactly once; an error reply becomes an error
//! carrying the server's code and message.

use anyhow::{Context as _, bail};
use reqwest::{Method, Url};
use serde_json::Value;

/// An error reply of the server.
#[derive(Debug, thiserror::Error)]
#[error("{message} ({code}, HTTP {status})")]
pub(crate) struct ServerError {
    pub(crate) status: u16,
    pub(crate) code: String,
    pub(crate) message: String,
}

/// A server and the token to use with it.
#[derive(Debug, Clone)]
pub(crate) struct Remote {
    base: Url,
    token: String,
    http: reqwest::Client,
}

impl Remote {
    pub(crate) fn new(server: &str, token: Option<&str>) -> anyhow::Result<Self> {
        let Some(token) = token else {
            bail!("--server needs --token (or HIPPOCAMP_TOKEN)");
        };
        let base = Url::parse(server).with_context(|| format!("--server {server} is not a URL"))?;
        if !matches!(base.scheme(), "http" | "https") {
            bail!("--server must be an http:// or https:// URL");
        }
        Ok(Self {
            base,
            token: token.to_owned(),
            http: reqwest::Client::builder()
                .build()
                .context("starting the HTTP client")?,
        })
    }

    /// The URL of `segments` (each percent-encoded) under the server.
    pub(crate) fn url(&self, segments: &[&str]) -> anyhow::Result<Url> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| anyhow::anyhow!("--server cannot have a path"))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    pub(crate) fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        self.http.request(method, url).bearer_auth(&self.token)
    }

    /// Sends and returns the reply, or the server's error as an error.
    pub(crate) async fn send(
        &self,
        rq: reqwest::RequestBuilder,
    ) -> anyhow::Result<reqwest::Response> {
        let r = rq.send().await.context("the server did not answer")?;
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        match (body["code"].as_str(), body["message"].as_str()) {
            (Some(code), Some(message)) => Err(ServerError {
                status: status.as_u16(),
                code: code.to_owned(),
                message: message.to_owned(),
            }
            .into()),
            _ => bail!("the server answered HTTP {status}"),
        }
    }

    /// A JSON request and its JSON reply.
    pub(crate) async fn json(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut rq = self.request(method, self.url(segments)?).query(query);
        if let Some(b) = body {
            rq = rq.json(b);
        }
        let r = self.send(rq).await?;
        if r.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        Ok(r.json().await?)
    }
}
