//! HTTP client of mco's Kubernetes-style REST API, used by the CLI and the node daemon.
//!
//! Owns request building (paths, identity headers), error decoding (`Status` objects into
//! [`ClientError::Status`]), the watch stream and the failover over a list of servers (several
//! `mco server`s on one etcd: a request refused a connection by one goes to the next, see
//! [`Client`]). [`watcher`] is the one list-watch-resume loop over it. It knows nothing about
//! tables or node updates.

use crate::model::Kind;
use futures_util::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

use crate::protocol::{ACTOR_HEADER, REASON_HEADER};

pub mod backoff;
pub mod watcher;

/// A Kubernetes `Status` failure as the server sent it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StatusError {
    #[serde(default)]
    pub code: u16,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub details: Option<Box<StatusDetails>>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StatusDetails {
    #[serde(default)]
    pub causes: Vec<StatusCause>,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StatusCause {
    #[serde(default)]
    pub field: String,
    #[serde(default)]
    pub message: String,
}

/// Errors of [`Client`] calls.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with a `Status` failure (NotFound, Conflict, Invalid, ...).
    #[error("{}", .0.message)]
    Status(StatusError),
    /// The request did not get an answer; the message carries the cause's whole chain (a TLS
    /// failure such as "invalid peer certificate: UnknownIssuer" is in its sources). `server`
    /// names the server that failed, or every server of a list when none could be connected to.
    #[error("cannot reach the mco server at {server}: {}", error_chain(.source))]
    Transport { server: String, source: reqwest::Error },
    #[error("unexpected answer from the mco server: {0}")]
    Decode(String),
}

impl ClientError {
    /// The Kubernetes reason (`NotFound`, `Conflict`, ...) when the server gave one.
    pub fn reason(&self) -> Option<&str> {
        match self {
            ClientError::Status(s) => Some(s.reason.as_str()),
            _ => None,
        }
    }
    pub fn is_not_found(&self) -> bool {
        self.reason() == Some("NotFound")
    }
    pub fn is_conflict(&self) -> bool {
        self.reason() == Some("Conflict")
    }
}

/// `error: cause: deeper cause`, each distinct message once.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !parts.iter().any(|p| p.contains(&m)) {
            parts.push(m);
        }
        cur = c.source();
    }
    parts.join(": ")
}

/// A non-Status body reduced to its first non-empty line, at most 120 characters: an HTML page
/// or a proxy's error never lands whole in a log or an error message.
pub fn first_line(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(120).collect();
    if line.chars().count() > 120 || text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        out.push_str(" ...");
    }
    out
}

/// One line of a watch stream (`{"type": "ADDED|MODIFIED|DELETED|ERROR|BOOKMARK", "object": ...}`).
#[derive(Clone, Debug, Deserialize)]
pub struct WatchEvent {
    #[serde(rename = "type")]
    pub type_: String,
    pub object: Value,
}

/// `?asOf=<at>` (percent-encoded), or nothing.
fn as_of_query(at: Option<&str>) -> String {
    match at {
        Some(a) => format!(
            "?asOf={}",
            percent_encoding::utf8_percent_encode(a, percent_encoding::NON_ALPHANUMERIC)
        ),
        None => String::new(),
    }
}

/// What a list or a watch selects (`labelSelector`, `fieldSelector`, Kubernetes' syntax).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selectors {
    /// `-l`: `role=worker`, `zone in (a,b)`, `!key`.
    pub label: Option<String>,
    /// `--field-selector`: `metadata.name=worker-0`, `metadata.name!=x`.
    pub field: Option<String>,
}

impl Selectors {
    /// The query parameters (`labelSelector=...&fieldSelector=...`), percent-encoded, each
    /// preceded by `&`.
    fn query(&self) -> String {
        let enc = |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
        let mut q = String::new();
        if let Some(l) = self.label.as_deref().filter(|l| !l.is_empty()) {
            q.push_str(&format!("&labelSelector={}", enc(l)));
        }
        if let Some(f) = self.field.as_deref().filter(|f| !f.is_empty()) {
            q.push_str(&format!("&fieldSelector={}", enc(f)));
        }
        q
    }
}

/// What the reason header percent-encodes: controls, `%`, and (always) every non-ASCII byte.
const REASON_ENCODE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%');

/// Whether a bearer token may be sent to `server` (`https://host:port`, `http://host:port`, or
/// `host:port`, which is plain HTTP here): over TLS always, over plain HTTP only to a loopback
/// address (`127.0.0.0/8`, `::1`, `localhost`), where no one else is on the wire. kubectl never
/// sends credentials over plain HTTP (kubernetes/kubectl#744); mco keeps loopback for local
/// sandboxes. A client holding a token never sends it elsewhere ([`Client::request`] leaves it
/// out, and the CLI refuses to start, `cli::connect`).
pub fn credentials_allowed(server: &str) -> bool {
    let (scheme, rest) = server.split_once("://").unwrap_or(("http", server));
    if scheme.eq_ignore_ascii_case("https") {
        return true;
    }
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A secret that `{:?}` does not print.
#[derive(Clone)]
struct Redacted(String);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How long an idle pooled connection is kept: shorter than the server's header-read timeout
/// ([`crate::api::listen::DEFAULT_HEADER_READ_TIMEOUT`], 10 s), which on HTTP/1.1 also bounds
/// the wait for the next request on a kept-alive connection. A client that kept connections
/// longer (reqwest's default is 90 s) would now and then send a request on a connection the
/// server is closing at that moment, and fail with a connection reset (seen by `mco sim` with
/// 10,000 nodes waiting for their turn).
pub const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether a request that got no answer may be sent again to the next server: `GET` (reads
/// and watches) and `PATCH` (this client sends only JSON merge patches, RFC 7386, and one
/// applied twice gives the object it gave once; one carrying a resourceVersion is refused
/// with a Conflict the second time, never applied twice). Creates, replaces, deletes and the
/// other `POST`s fail over only on connection errors (nothing was sent).
fn repeatable(method: &reqwest::Method) -> bool {
    *method == reqwest::Method::GET || *method == reqwest::Method::PATCH
}

/// How long a request keeps going round a list of servers while every one refuses the
/// connection: longer than a failover (a killed writer's etcd lease, `--etcd-lease-ttl`, 5 s by
/// default, then the standby starts listening), so that a command issued during one succeeds.
pub const FAILOVER_BOUND: Duration = Duration::from_secs(15);

/// The pause after a round in which every server of a list refused the connection.
pub const FAILOVER_PAUSE: Duration = Duration::from_millis(250);

/// The servers of a comma-separated list (`https://10.0.0.11:7443,https://10.0.0.12:7443`),
/// each trimmed and without a trailing `/`; empty elements are dropped.
pub fn server_list(servers: &str) -> Vec<String> {
    servers
        .split(',')
        .map(|s| s.trim().trim_end_matches('/').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Client of one mco server, or of a list of them (replicas on one etcd log, of which one
/// listens at a time). Cheap to clone; clones share the server in use.
///
/// Failover: a request that fails with a connection error (nothing was sent, so retrying is
/// safe for writes too) is sent to the next server of the list, which becomes the one in use;
/// so is a request safe to repeat ([`repeatable`]: a read, a watch, a merge patch) that got no
/// answer at all, such as one sent on a kept-alive connection to a server killed meanwhile
/// (connection reset, "connection closed before message completed").
/// After a round in which every server refused, it pauses [`FAILOVER_PAUSE`] and goes round
/// again, for at most [`FAILOVER_BOUND`] in all (a list of one server is tried once). Any
/// answer, a `Status` failure (4xx, 5xx) included, is returned as it is; a watch re-opened
/// after a cut goes through the same failover, so it resumes from its resourceVersion on
/// whichever server serves now (resourceVersions are one sequence across the servers).
#[derive(Clone, Debug)]
pub struct Client {
    /// At least one, as given (`http://host:port`, `https://host:port`).
    servers: std::sync::Arc<[String]>,
    /// Index in `servers` of the one in use (shared by clones).
    current: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// How long a request goes round the list ([`FAILOVER_BOUND`]).
    failover_bound: Duration,
    group: String,
    actor: String,
    /// Sent as the reason of every write (`x-mco-reason`), recorded in the event log.
    reason: Option<String>,
    /// Bearer token sent with every request (`Authorization: Bearer`), to each server for
    /// which [`credentials_allowed`].
    token: Option<Redacted>,
    http: reqwest::Client,
    /// `Warning` headers of the answers so far, taken with [`Client::take_warnings`].
    warnings: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The `fieldValidation` of every create, update and patch (`Strict`, `Warn`, `Ignore`;
    /// `None`: the server's default), as kubectl's `--validate` sends it.
    field_validation: Option<&'static str>,
    /// Every write is a server-side dry run (`dryRun=All`): admitted, not stored.
    dry_run: bool,
}

impl Client {
    /// A client for `server` (`http://127.0.0.1:6443`, or a comma-separated list of servers,
    /// [`server_list`]) serving the API group `group`, identifying itself as `actor`.
    pub fn new(server: &str, group: &str, actor: &str) -> Client {
        Client::new_trusting(server, group, actor, None)
    }

    /// Like [`Client::new`], verifying an `https://` server against `trust`'s CA only (no
    /// system roots; without a trust no server certificate verifies).
    pub fn new_trusting(server: &str, group: &str, actor: &str, trust: Option<&crate::tls::Trust>) -> Client {
        let tls = crate::tls::client_config(trust).expect("the CA was checked when read");
        let mut servers = server_list(server);
        if servers.is_empty() {
            servers.push(server.trim().to_string());
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(CLIENT_IDLE_TIMEOUT)
            .tls_backend_preconfigured(tls);
        if servers.iter().any(|s| !s.to_ascii_lowercase().starts_with("https://")) {
            // Plain HTTP never goes through a proxy (HTTP_PROXY, ALL_PROXY): the request, its
            // token included, would cross the network in clear to the proxy. Go's clients
            // never proxy loopback either; TLS goes through a proxy as an opaque tunnel.
            builder = builder.no_proxy();
        }
        let http = builder.build().expect("HTTP client builds");
        Client {
            servers: servers.into(),
            current: Default::default(),
            failover_bound: FAILOVER_BOUND,
            group: group.to_string(),
            actor: actor.to_string(),
            reason: None,
            token: None,
            http,
            warnings: Default::default(),
            field_validation: None,
            dry_run: false,
        }
    }

    /// Like [`Client::new`] but asks the server which API group it serves (`GET /apis`), so that
    /// a client works against a server configured for the alauda group without a flag.
    pub async fn connect(server: &str, actor: &str) -> Result<Client, ClientError> {
        Client::connect_with(server, actor, None, None).await
    }

    /// [`Client::connect`] sending `token` as its bearer token (from the first request on) and
    /// verifying an `https://` server against `trust` ([`Client::new_trusting`]).
    pub async fn connect_with(
        server: &str,
        actor: &str,
        token: Option<String>,
        trust: Option<&crate::tls::Trust>,
    ) -> Result<Client, ClientError> {
        Client::connect_within(server, actor, token, trust, FAILOVER_BOUND).await
    }

    /// [`Client::connect_with`], the client going round its list of servers for at most
    /// `bound` ([`Client::with_failover_bound`]), its discovery request included.
    pub async fn connect_within(
        server: &str,
        actor: &str,
        token: Option<String>,
        trust: Option<&crate::tls::Trust>,
        bound: Duration,
    ) -> Result<Client, ClientError> {
        let probe = Client::new_trusting(server, crate::model::DEFAULT_GROUP, actor, trust)
            .with_token(token)
            .with_failover_bound(bound);
        let apis: Value = probe.get_path("/apis").await?;
        let group = apis["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["name"].as_str())
            .find(|g| g.starts_with("machineconfiguration."))
            .ok_or_else(|| {
                ClientError::Decode(format!(
                    "{server}/apis lists no machineconfiguration.* API group (is it an mco server?)"
                ))
            })?
            .to_string();
        Ok(Client { group, ..probe })
    }

    /// The same client, giving `reason` for every change it makes (`mco apply --reason`): the
    /// event log records it beside the actor.
    pub fn with_reason(mut self, reason: Option<String>) -> Client {
        self.reason = reason.filter(|r| !r.is_empty());
        self
    }

    /// The same client, authenticating every request with bearer `token` ([`crate::auth`]).
    pub fn with_token(mut self, token: Option<String>) -> Client {
        self.token = token
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(Redacted);
        self
    }

    /// The same client, asking the server to treat unknown fields of its writes as `mode` says
    /// (`fieldValidation=Strict|Warn|Ignore`, what kubectl sends for `--validate`).
    pub fn with_field_validation(mut self, mode: &'static str) -> Client {
        self.field_validation = Some(mode);
        self
    }

    /// The same client, whose writes are server-side dry runs (`dryRun=All`, kubectl's
    /// `--dry-run=server`).
    pub fn with_dry_run(mut self) -> Client {
        self.dry_run = true;
        self
    }

    /// `path` with the client's `fieldValidation` and `dryRun` query parameters, for a write.
    fn write_path(&self, path: &str) -> String {
        let mut params = Vec::new();
        if let Some(mode) = self.field_validation {
            params.push(format!("fieldValidation={mode}"));
        }
        if self.dry_run {
            params.push("dryRun=All".to_string());
        }
        match params.is_empty() {
            true => path.to_string(),
            false => format!(
                "{path}{}{}",
                if path.contains('?') { '&' } else { '?' },
                params.join("&")
            ),
        }
    }

    /// The same client, going round its list of servers for at most `bound` (instead of
    /// [`FAILOVER_BOUND`]); `Duration::ZERO`: one round.
    pub fn with_failover_bound(mut self, bound: Duration) -> Client {
        self.failover_bound = bound;
        self
    }

    /// The server's warnings (unknown fields, ...) since the last call, oldest first.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().expect("warnings lock"))
    }

    /// The server in use (the last one that answered, or the first of the list).
    pub fn server(&self) -> &str {
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        &self.servers[i % self.servers.len()]
    }

    /// Every server of the list, in the order given.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The API group this client addresses (and whose annotation keys the server uses).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Collection path of a kind, e.g. `/apis/<group>/v1/machineconfigs` or `/api/v1/nodes`;
    /// for a namespaced kind, the list across every namespace (`/apis/coordination.k8s.io/v1/leases`).
    pub fn collection_path(&self, kind: Kind) -> String {
        match kind {
            Kind::Node => "/api/v1/nodes".to_string(),
            _ => format!("/apis/{}/{}", kind.api_version(&self.group), kind.plural()),
        }
    }

    /// The collection of a namespaced kind in namespace `ns`
    /// (`/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases`).
    pub fn namespaced_collection_path(&self, kind: Kind, ns: &str) -> String {
        format!(
            "/apis/{}/namespaces/{ns}/{}",
            kind.api_version(&self.group),
            kind.plural()
        )
    }

    /// The path of one object; for a namespaced kind `name` is its store key
    /// `<namespace>/<name>` ([`crate::model::namespaced_key`]), or a bare name in
    /// `kube-node-lease`, the one namespace mco's own objects live in.
    fn object_path(&self, kind: Kind, name: &str) -> String {
        if kind.is_namespaced() {
            let ns = crate::model::key_namespace(name).unwrap_or(crate::model::NODE_LEASE_NAMESPACE);
            return format!(
                "{}/{}",
                self.namespaced_collection_path(kind, ns),
                crate::model::key_name(name)
            );
        }
        format!("{}/{}", self.collection_path(kind), name)
    }

    /// A request to `server` (one of the list): the actor, the token when
    /// [`credentials_allowed`] for that server, the reason.
    fn request_to(&self, server: &str, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self
            .http
            .request(method, format!("{server}{path}"))
            .header(ACTOR_HEADER, &self.actor);
        let req = match &self.token {
            Some(t) if credentials_allowed(server) => req.bearer_auth(&t.0),
            _ => req,
        };
        match &self.reason {
            // Percent-encoded, so any text fits in a header; the server decodes it.
            Some(r) => req.header(
                REASON_HEADER,
                percent_encoding::utf8_percent_encode(r, REASON_ENCODE)
                    .to_string()
                    .as_str(),
            ),
            None => req,
        }
    }

    /// The list as errors name it: `A`, or `A, B (each tried for 15 s)`.
    fn tried(&self) -> String {
        match &self.servers[..] {
            [one] => one.clone(),
            all => format!(
                "{} (each tried for {} s)",
                all.join(", "),
                self.failover_bound.as_secs()
            ),
        }
    }

    /// Sends `method path` (the request `extra` completes: body, headers) to the server in use,
    /// failing over on connection errors as [`Client`] says. Returns the server that answered
    /// and its answer, whatever its status.
    async fn dispatch(
        &self,
        method: reqwest::Method,
        path: &str,
        extra: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<(String, reqwest::Response), ClientError> {
        use std::sync::atomic::Ordering::Relaxed;
        let n = self.servers.len();
        let deadline = tokio::time::Instant::now() + self.failover_bound;
        loop {
            let first = self.current.load(Relaxed);
            let mut last = None;
            for i in 0..n {
                let at = (first + i) % n;
                let server = &self.servers[at];
                match extra(self.request_to(server, method.clone(), path)).send().await {
                    Ok(resp) => {
                        if at != first % n {
                            tracing::info!(server = %server, "failed over to the next mco server");
                        }
                        self.current.store(at, Relaxed);
                        return Ok((server.clone(), resp));
                    }
                    Err(source) if n > 1 && (source.is_connect() || repeatable(&method)) => {
                        tracing::debug!(server = %server, error = %error_chain(&source), "no answer, trying the next server");
                        last = Some(source);
                    }
                    Err(source) => {
                        return Err(ClientError::Transport {
                            server: server.clone(),
                            source,
                        })
                    }
                }
            }
            let source = last.expect("a list of several servers");
            if tokio::time::Instant::now() + FAILOVER_PAUSE > deadline {
                return Err(ClientError::Transport {
                    server: self.tried(),
                    source,
                });
            }
            tokio::time::sleep(FAILOVER_PAUSE).await;
        }
    }

    /// `POST` a JSON body to any path and decode the JSON answer.
    pub async fn post_path<T: DeserializeOwned>(&self, path: &str, body: &Value) -> Result<T, ClientError> {
        self.send(reqwest::Method::POST, path, |r| r.json(body)).await
    }

    /// `DELETE` any path and decode the JSON answer.
    pub async fn delete_path<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(reqwest::Method::DELETE, path, |r| r).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        extra: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let (server, resp) = self.dispatch(method, path, extra).await?;
        let status = resp.status();
        for w in resp.headers().get_all("warning") {
            if let Ok(text) = w.to_str() {
                // `299 - "text"`: keep the text.
                let quoted = text.splitn(3, ' ').nth(2).unwrap_or(text);
                let inner = quoted
                    .strip_prefix('"')
                    .and_then(|q| q.strip_suffix('"'))
                    .unwrap_or(quoted);
                let text = inner.replace("\\\"", "\"");
                self.warnings.lock().expect("warnings lock").push(text);
            }
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|source| ClientError::Transport { server, source })?;
        if !status.is_success() {
            let mut st: StatusError = serde_json::from_slice(&bytes).unwrap_or_else(|_| StatusError {
                message: format!("HTTP {status}: {}", first_line(&bytes)),
                ..Default::default()
            });
            st.code = status.as_u16();
            return Err(ClientError::Status(st));
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }

    /// `GET` any path and decode its JSON.
    pub async fn get_path<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.send(reqwest::Method::GET, path, |r| r).await
    }

    /// Get one object.
    pub async fn get<T: DeserializeOwned>(&self, kind: Kind, name: &str) -> Result<T, ClientError> {
        self.get_path(&self.object_path(kind, name)).await
    }

    /// Get one object as it was at `at` (an RFC 3339 time or `rv:N`; `None`: now).
    pub async fn get_at(&self, kind: Kind, name: &str, at: Option<&str>) -> Result<Value, ClientError> {
        self.get_path(&format!("{}{}", self.object_path(kind, name), as_of_query(at)))
            .await
    }

    /// List a kind as it was at `at` (an RFC 3339 time or `rv:N`; `None`: now).
    pub async fn list_at(&self, kind: Kind, at: Option<&str>) -> Result<Value, ClientError> {
        self.get_path(&format!("{}{}", self.collection_path(kind), as_of_query(at)))
            .await
    }

    /// List the objects of a kind that `selectors` select, as they were at `at` (an RFC 3339
    /// time or `rv:N`; `None`: now).
    pub async fn list_selected(
        &self,
        kind: Kind,
        selectors: &Selectors,
        at: Option<&str>,
    ) -> Result<Value, ClientError> {
        let mut query = selectors.query();
        if let Some(a) = at {
            query.push_str(&as_of_query(Some(a)).replacen('?', "&", 1));
        }
        let path = match query.strip_prefix('&') {
            Some(q) => format!("{}?{q}", self.collection_path(kind)),
            None => self.collection_path(kind),
        };
        self.get_path(&path).await
    }

    /// List a kind; returns the `*List` object (`items`, `metadata.resourceVersion`).
    pub async fn list(&self, kind: Kind) -> Result<Value, ClientError> {
        self.get_path(&self.collection_path(kind)).await
    }

    /// Create an object (POST; a namespaced one in its `metadata.namespace`). `reason` is
    /// recorded in the event log.
    pub async fn create(&self, kind: Kind, obj: &Value, reason: Option<&str>) -> Result<Value, ClientError> {
        let path = match obj["metadata"]["namespace"].as_str().filter(|_| kind.is_namespaced()) {
            Some(ns) => self.namespaced_collection_path(kind, ns),
            None => self.collection_path(kind),
        };
        self.send(reqwest::Method::POST, &self.write_path(&path), |req| {
            let req = req.json(obj);
            match reason {
                Some(r) => req.header(REASON_HEADER, r),
                None => req,
            }
        })
        .await
    }

    /// Replace an object (PUT); the server checks `metadata.resourceVersion` when set.
    pub async fn replace(
        &self,
        kind: Kind,
        name: &str,
        obj: &Value,
        reason: Option<&str>,
    ) -> Result<Value, ClientError> {
        self.send(
            reqwest::Method::PUT,
            &self.write_path(&self.object_path(kind, name)),
            |req| {
                let req = req.json(obj);
                match reason {
                    Some(r) => req.header(REASON_HEADER, r),
                    None => req,
                }
            },
        )
        .await
    }

    /// Replace an object's `status` subresource (PUT `<object>/status`); the server checks
    /// `metadata.resourceVersion` when set.
    pub async fn replace_status(&self, kind: Kind, name: &str, obj: &Value) -> Result<Value, ClientError> {
        let path = format!("{}/status", self.object_path(kind, name));
        self.send(reqwest::Method::PUT, &path, |req| req.json(obj)).await
    }

    /// JSON merge patch (RFC 7386) of an object, or of its `status` subresource.
    pub async fn merge_patch(&self, kind: Kind, name: &str, patch: &Value, status: bool) -> Result<Value, ClientError> {
        self.patch(kind, name, status, "application/merge-patch+json", patch.to_string())
            .await
    }

    /// A patch of an object (or its `status`) of content type `content_type`
    /// (`application/merge-patch+json`, `application/json-patch+json`,
    /// `application/strategic-merge-patch+json`) with body `body`.
    pub async fn patch(
        &self,
        kind: Kind,
        name: &str,
        status: bool,
        content_type: &str,
        body: String,
    ) -> Result<Value, ClientError> {
        let mut path = self.object_path(kind, name);
        if status {
            path.push_str("/status");
        }
        self.send(reqwest::Method::PATCH, &self.write_path(&path), |req| {
            req.header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.clone())
        })
        .await
    }

    /// Delete an object.
    pub async fn delete(&self, kind: Kind, name: &str) -> Result<Value, ClientError> {
        self.send(reqwest::Method::DELETE, &self.object_path(kind, name), |r| r)
            .await
    }

    /// Watch a kind (optionally one object by name) from `resource_version` (exclusive; `None`
    /// starts with the current objects as ADDED events, as Kubernetes does).
    pub async fn watch(
        &self,
        kind: Kind,
        name: Option<&str>,
        resource_version: Option<&str>,
    ) -> Result<impl Stream<Item = Result<WatchEvent, ClientError>> + use<>, ClientError> {
        let selectors = Selectors {
            label: None,
            field: name.map(|n| format!("metadata.name={n}")),
        };
        self.watch_selected(kind, &selectors, resource_version).await
    }

    /// Watch the objects of a kind that `selectors` select, from `resource_version` (as
    /// [`Client::watch`]). An object that stops matching arrives as DELETED. The watch is
    /// opened with the failover of every request; a stream that is cut later ends with a
    /// [`ClientError::Transport`], and the caller re-watches from the last resourceVersion it
    /// saw, which reaches the next server when this one is gone.
    pub async fn watch_selected(
        &self,
        kind: Kind,
        selectors: &Selectors,
        resource_version: Option<&str>,
    ) -> Result<impl Stream<Item = Result<WatchEvent, ClientError>> + use<>, ClientError> {
        let mut path = format!("{}?watch=true{}", self.collection_path(kind), selectors.query());
        if let Some(rv) = resource_version {
            path.push_str(&format!("&resourceVersion={rv}"));
        }
        let (server, resp) = self.dispatch(reqwest::Method::GET, &path, |r| r).await?;
        if !resp.status().is_success() {
            let code = resp.status().as_u16();
            let body = resp.bytes().await.unwrap_or_default();
            let mut st: StatusError = serde_json::from_slice(&body).unwrap_or_default();
            st.code = code;
            return Err(ClientError::Status(st));
        }
        let bytes = resp.bytes_stream();
        Ok(lines(bytes).map(move |line| match line {
            Ok(l) => serde_json::from_slice::<WatchEvent>(&l).map_err(|e| ClientError::Decode(e.to_string())),
            Err(source) => Err(ClientError::Transport {
                server: server.clone(),
                source,
            }),
        }))
    }
}

/// Splits a byte stream into newline-terminated lines (without the newline), skipping blanks.
fn lines<S>(stream: S) -> impl Stream<Item = Result<Vec<u8>, reqwest::Error>>
where
    S: Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Unpin,
{
    futures_util::stream::unfold(
        (stream, Vec::<u8>::new(), false),
        |(mut stream, mut buf, done)| async move {
            loop {
                if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let line = line[..line.len() - 1].to_vec();
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some((Ok(line), (stream, buf, done)));
                }
                if done {
                    return None;
                }
                match stream.next().await {
                    Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                    Some(Err(e)) => return Some((Err(e), (stream, buf, true))),
                    None => {
                        if buf.iter().all(u8::is_ascii_whitespace) {
                            return None;
                        }
                        let line = std::mem::take(&mut buf);
                        return Some((Ok(line), (stream, buf, true)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod credential_tests {
    use super::{credentials_allowed, server_list, Client};

    /// A comma-separated list, trimmed, empty elements and trailing slashes dropped; the first
    /// server is the one in use until a failover.
    #[test]
    fn server_lists() {
        assert_eq!(
            server_list(" https://10.0.0.11:7443/, https://10.0.0.12:7443,,"),
            ["https://10.0.0.11:7443", "https://10.0.0.12:7443"]
        );
        assert_eq!(server_list("http://127.0.0.1:7443"), ["http://127.0.0.1:7443"]);
        let c = Client::new("http://127.0.0.1:1,http://127.0.0.1:2", "g", "t");
        assert_eq!(c.servers(), ["http://127.0.0.1:1", "http://127.0.0.1:2"]);
        assert_eq!(c.server(), "http://127.0.0.1:1");
    }

    /// Tokens go over TLS, or over plain HTTP to loopback only.
    #[test]
    fn tokens_travel_over_tls_or_loopback_only() {
        for ok in [
            "https://10.0.0.10:7443",
            "HTTPS://mco.example.com",
            "http://127.0.0.1:7443",
            "http://127.8.9.10:1",
            "http://[::1]:7443/",
            "http://localhost:7443",
            "127.0.0.1:7443",
        ] {
            assert!(credentials_allowed(ok), "{ok}");
        }
        for no in [
            "http://10.0.0.10:7443",
            "192.0.2.2:9999",
            "http://[2001:db8::1]:7443",
            "http://mco.example.com",
            "http://localhost.example.com:7443",
        ] {
            assert!(!credentials_allowed(no), "{no}");
        }
    }
}
