//! The timed HTTP context every simulated node and the admin share: who calls ([`Caller`], each
//! with its own connections), the base URL and group, each call's latency recorded by verb.

use super::report::Progress;
use super::SimConfig;
use crate::model::Keys;
use anyhow::{bail, Context};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Who makes a call: a bearer token and the HTTP client (its own connections) it is sent
/// with. Each simulated node has its own, as each real daemon has its own process and
/// connection: over TLS the client speaks HTTP/2, and one connection shared by a fleet
/// allows only the server's 200 concurrent streams, so a fleet of watches beyond that
/// starved every other call (issue 24, item 11). The admin has its own too, so its polls of
/// the pool are never queued behind the nodes' watches.
#[derive(Clone)]
pub(super) struct Caller {
    pub(super) token: String,
    pub(super) http: reqwest::Client,
}

/// What every simulated node shares.
pub(super) struct Ctx {
    pub(super) base: String,
    pub(super) group: String,
    pub(super) keys: Keys,
    /// The TLS settings each [`Caller`]'s client is built with.
    pub(super) tls: rustls::ClientConfig,
    pub(super) progress: Arc<Progress>,
    pub(super) cfg: SimConfig,
}

impl Ctx {
    /// A caller with `token` and an HTTP client of its own (its own connection pool).
    pub(super) fn caller(&self, token: String) -> anyhow::Result<Caller> {
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(self.tls.clone())
            .pool_idle_timeout(crate::client::CLIENT_IDLE_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Caller { token, http })
    }

    /// One timed request; the answer's JSON, or an error naming the status and body.
    pub(super) async fn call(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        path: &str,
        who: &Caller,
        body: Option<(&str, &Value)>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut req = who
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&who.token);
        if let Some((content_type, b)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(serde_json::to_vec(b)?);
        }
        let start = Instant::now();
        let resp = req.send().await.with_context(|| format!("{verb} {path}"))?;
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.with_context(|| format!("{verb} {path}"))?;
        self.progress.lat.record(verb, start);
        let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((code, v))
    }

    pub(super) async fn ok(
        &self,
        verb: &'static str,
        method: reqwest::Method,
        path: &str,
        who: &Caller,
        body: Option<(&str, &Value)>,
    ) -> anyhow::Result<Value> {
        let (code, v) = self.call(verb, method, path, who, body).await?;
        if !(200..300).contains(&code) {
            bail!("{verb} {path}: {code} {}", v["message"].as_str().unwrap_or(""));
        }
        Ok(v)
    }

    pub(super) fn node_path(&self, name: &str) -> String {
        format!("/api/v1/nodes/{name}")
    }

    pub(super) fn mc_path(&self, name: &str) -> String {
        format!("/apis/{}/v1/machineconfigs/{name}", self.group)
    }

    pub(super) fn pool_path(&self, name: &str) -> String {
        format!("/apis/{}/v1/machineconfigpools/{name}", self.group)
    }
}

pub(super) const MERGE: &str = "application/merge-patch+json";
pub(super) const JSON: &str = "application/json";
