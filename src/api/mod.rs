//! The REST API: Kubernetes-style paths over the hub, errors as `Status` objects, discovery,
//! OpenAPI and Table answers for kubectl, the Ignition endpoint for new nodes, health.
//!
//! Owns HTTP concerns only: routing, query parsing, identity (the authenticated user of
//! [`auth::authenticate`] is every event's actor; the caller's declared component from the
//! `x-mco-actor` header or its user agent only names its field manager), content types, field
//! validation and field ownership, watch streaming. Every write goes through
//! [`crate::command::Hub`]. Served paths (DESIGN.md section 3b):
//! `/apis/<group>/v1/{machineconfigs,machineconfigpools}[/{name}[/status]]`,
//! `/api/v1/nodes[/{name}[/status]]`, `/api/v1/events` (from the event log), `/api/v1/pods`
//! (always empty: mco runs no workloads), `/config/{pool}`, `/healthz`, `/readyz`, `/version`,
//! `/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/v1`, `/openapi/v3[/...]`,
//! `/apis/auth.mco.dev/v1/tokens[/{id}]`, `/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`,
//! `/apis/authentication.k8s.io/v1/selfsubjectreviews` ([`auth`]: every path but health,
//! version and the dashboard's files needs a bearer token).

pub mod auth;
mod diffs;
mod discovery;
mod errors;
pub mod fields;
mod follow;
mod groups;
mod health;
pub mod history;
mod limits;
pub mod listen;
pub mod mcs;
pub mod metrics;
mod node_restriction;
mod openapi;
mod pages;
mod points;
mod rollbacks;
pub mod selectors;
mod support;
pub mod table;
pub mod ui;
mod watch;

pub use errors::ApiError;
pub use limits::{WatchCounter, DEFAULT_MAX_REQUEST_BODY_BYTES};
use node_restriction::{admit_node_write, pool_keys_for};
use support::{catch_panics, off_runtime, watch_timeout};
use watch::{watch, watch_error, WatchShape};

use crate::command::{Actor, CommandError, Hub, Propagation, Scope};
use crate::model::Kind;
use crate::protocol::{ACTOR_HEADER, REASON_HEADER};
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use selectors::{FieldQuery, LabelQuery};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct ApiState {
    pub hub: Arc<Hub>,
    /// Cancelled at shutdown; ends every open watch so graceful shutdown does not hang.
    pub shutdown: CancellationToken,
    /// Largest request body accepted, in bytes ([`DEFAULT_MAX_REQUEST_BODY_BYTES`]).
    pub max_request_body_bytes: usize,
    /// The streaming tasks behind open watches. Each holds the hub (and so the store's lock)
    /// until it sees `shutdown`; [`crate::server::RunningServer::stop`] waits for them, so a
    /// stopped server has released its data dir.
    pub tasks: tokio_util::task::TaskTracker,
    /// Open watches per client, held to [`crate::limits::Limits::max_watches_per_client`].
    pub watches: WatchCounter,
}

/// Serves the API on `listener` in plain HTTP with the default [`listen::ConnLimits`] until
/// `state.shutdown` is cancelled ([`listen::serve`] for TLS and other limits).
pub async fn serve(listener: tokio::net::TcpListener, state: ApiState) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let app = router(state);
    listen::serve(listener, app, None, listen::ConnLimits::default(), shutdown).await
}

/// The axum router of the whole API.
pub fn router(state: ApiState) -> Router {
    let resource = || {
        get(handle_get)
            .post(handle_post)
            .put(handle_put)
            .patch(handle_patch)
            .delete(handle_delete)
    };
    Router::new()
        .merge(health::routes())
        .merge(groups::routes())
        .route(
            "/apis",
            get(|State(st): State<ApiState>| async move {
                let mut groups = groups::served_api_groups(&st.hub);
                groups.push(crate::history::GROUP.to_string());
                groups.extend(auth::GROUPS.iter().map(|g| g.to_string()));
                Json(discovery::groups(&groups, st.hub.group()))
            }),
        )
        .route("/config/{*pool}", get(mcs::config_handler))
        .merge(history::routes())
        .merge(diffs::routes())
        .merge(rollbacks::routes())
        .merge(auth::routes())
        .merge(ui::routes())
        .merge(metrics::routes())
        .route("/api/v1/{*rest}", resource())
        .route(
            "/apis/{group}/v1/{*rest}",
            resource().layer(axum::middleware::from_fn_with_state(state.clone(), groups::alias_group)),
        )
        .route("/apis/{group}/v1alpha1/{*rest}", resource())
        .fallback(|| async { ApiError::not_found_path() })
        .layer(axum::middleware::from_fn(errors::status_for_bare_405))
        .layer(axum::middleware::from_fn_with_state(
            limits::BodyLimits {
                max_body: state.max_request_body_bytes,
                max_json_depth: state.hub.limits().max_json_depth,
            },
            limits::limit_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limits::limit_watches,
        ))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::authenticate))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            limits::limit_headers,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .layer(catch_panics(state.hub.metrics().clone()))
        .layer(tower_http::trace::TraceLayer::new_for_http().on_failure(log_failure))
        .with_state(state)
}

/// The level a failed response is logged at: ERROR for the server's own failures, INFO for the
/// one 5xx a client causes: 504 `Too large resource version` (a resourceVersion newer than the
/// log, which kube-apiserver also answers 504 and does not log as an error).
fn failure_level(class: &tower_http::classify::ServerErrorsFailureClass) -> tracing::Level {
    match class {
        tower_http::classify::ServerErrorsFailureClass::StatusCode(StatusCode::GATEWAY_TIMEOUT) => tracing::Level::INFO,
        _ => tracing::Level::ERROR,
    }
}

/// [`tower_http::trace::TraceLayer`]'s failure log at [`failure_level`].
fn log_failure(
    class: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    let ms = latency.as_millis();
    if failure_level(&class) == tracing::Level::INFO {
        tracing::info!(classification = %class, latency = %format!("{ms} ms"), "client error answered with a 5xx");
    } else {
        tracing::error!(classification = %class, latency = %format!("{ms} ms"), "response failed");
    }
}

/// The answer to a method a route does not take: 405 with the route's `Allow` (axum's method
/// router adds it), for every caller. Set on every route *after* the authentication layer
/// ([`router`], [`mcs::router`]): a route's default 405 is replaced, not wrapped, so the method
/// is checked before the token and the role, as for MCO's server (`pkg/server/api.go`: `GET`
/// and `HEAD` only, 405 otherwise) and as the README states (`POST /config/worker` is 405 for
/// a bootstrap token, never a 403 that hides it). Nothing is read or served: the method list
/// of a route is no secret. Held by `tests/mcs.rs`,
/// `head_goes_where_get_goes_and_methods_are_checked_before_roles`.
pub async fn method_not_allowed() -> Response {
    // kube-apiserver's Status body (this answer does not pass through the bare-405 middleware,
    // [`errors::status_for_bare_405`], which sits inside the authentication layer).
    ApiError::method_not_allowed().into_response()
}

/// The caller's declared component (`x-mco-actor`; `kubectl` for kubectl's user agent; else
/// `anonymous`) as the actor's name, and its reason (`x-mco-reason`). The declaration is
/// untrusted: handlers replace the name with the authenticated user ([`user_actor`]) and use
/// the declaration only as the default field manager, which Kubernetes also takes from the
/// client.
pub fn actor_of(headers: &HeaderMap) -> Actor {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut name = h(ACTOR_HEADER);
    if name.is_empty() {
        name = prefix_from_user_agent(&h("user-agent"));
    }
    Actor {
        name,
        reason: percent_encoding::percent_decode_str(&h(REASON_HEADER))
            .decode_utf8_lossy()
            .into_owned(),
        dry_run: false,
    }
}

/// The field manager of a client that names none: its User-Agent up to the first `/`, without
/// unprintable characters, at most 128 bytes (`kubectl/v1.33.0 (linux/amd64) …` → `kubectl`,
/// `OpenAPI-Generator/33.1.0/python` → `OpenAPI-Generator`; no User-Agent → empty), as
/// kube-apiserver's `prefixFromUserAgent` (`staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/create.go`, limit `FieldManagerMaxLength`).
pub fn prefix_from_user_agent(user_agent: &str) -> String {
    const FIELD_MANAGER_MAX_LENGTH: usize = 128;
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or("").chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The paths of `cur` that `new` changes once `new` has its kind's defaults (the typed round
/// trip the hub stores it through): a field the body leaves to its default is no change, so a
/// write of the stored object without its defaulted fields records no manager and, with
/// nothing else changed, appends nothing, as kube-apiserver's field manager compares the
/// defaulted objects.
fn changed_after_defaults(
    group: &str,
    kind: Kind,
    cur: &Value,
    new: &Value,
) -> std::collections::BTreeSet<fields::FieldPath> {
    let raw = fields::changed_paths(cur, new);
    // Nothing changed as sent: nothing changes with defaults either (the stored object has
    // them), so the typed round trip is spent only on writes that change something.
    if raw.is_empty() {
        return raw;
    }
    match crate::command::decode(kind, new.clone(), group) {
        Ok(defaulted) => fields::changed_paths(cur, &defaulted),
        Err(_) => raw,
    }
}

/// The actor of an authenticated request: the user's name (what the event log records as who
/// did it; `admin as alice` for an admin impersonating alice, [`crate::auth::User::actor_name`]),
/// the reason header, and the declared component kept apart as the field manager default
/// ([`actor_of`]: the client's, as in Kubernetes, whoever it runs as).
pub fn user_actor(user: &crate::auth::User, headers: &HeaderMap) -> (Actor, String) {
    let mut actor = actor_of(headers);
    let declared = std::mem::replace(&mut actor.name, user.actor_name());
    (actor, declared)
}

pub use mcs::ignition_version_for;

// ---- resource requests ----

/// What a resource path addresses.
#[derive(Clone, Debug, PartialEq)]
enum Target {
    Collection(Kind),
    Object(Kind, String, Scope),
    /// `/api/v1/events` (`None`) or `/api/v1/namespaces/<ns>/events`: Kubernetes Events
    /// synthesised from the event log (they all live in `default`).
    Events(Option<String>),
    /// `/api/v1/pods`: always empty (mco runs no workloads); `kubectl describe node` lists them.
    Pods,
}

/// Resolves `/api/v1/...` and `/apis/<group>/v1/...` paths.
fn target(hub: &Hub, uri: &Uri) -> Result<Target, ApiError> {
    let path = uri.path();
    let (rest, core, group, version) = if let Some(r) = path.strip_prefix("/api/v1/") {
        (r, true, String::new(), "v1".to_string())
    } else if let Some(r) = path.strip_prefix("/apis/") {
        let mut it = r.splitn(3, '/');
        let (g, v, rest) = (
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
        );
        if !groups::served_api_groups(hub).iter().any(|x| x == g) {
            return Err(ApiError::not_found_path());
        }
        (rest, false, g.to_string(), v.to_string())
    } else {
        return Err(ApiError::not_found_path());
    };
    // Path segments are percent-decoded, as Kubernetes' request info resolver does.
    let decoded: Vec<String> = rest
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let mut segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let mut namespace = None;
    if core && segs.len() >= 3 && segs[0] == "namespaces" && matches!(segs[2], "events" | "pods") {
        namespace = Some(segs[1].to_string());
        segs.drain(..2);
    }
    let kind = match (core, segs.first().copied()) {
        (true, Some("events")) if segs.len() == 1 => return Ok(Target::Events(namespace)),
        (true, Some("pods")) if segs.len() == 1 => return Ok(Target::Pods),
        (true, Some("nodes")) => Kind::Node,
        (false, Some(plural)) => Kind::ALL
            .into_iter()
            .find(|k| {
                let i = k.info();
                let group_ok = match i.group {
                    None => crate::model::ACCEPTED_GROUPS.contains(&group.as_str()),
                    Some(g) => g == group,
                };
                i.plural == plural && i.version == version && group_ok
            })
            .ok_or_else(ApiError::not_found_path)?,
        _ => return Err(ApiError::not_found_path()),
    };
    match segs[1..] {
        [] => Ok(Target::Collection(kind)),
        [name] => Ok(Target::Object(kind, name.to_string(), Scope::Main)),
        [name, "status"] if kind.has_status() => Ok(Target::Object(kind, name.to_string(), Scope::Status)),
        _ => Err(ApiError::not_found_path()),
    }
}

/// How long a read asking for a resourceVersion newer than the log waits for it to appear
/// (kube-apiserver's watch cache `blockTimeout`, 3 s) before answering "Too large resource
/// version".
const FRESHNESS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits (at most [`FRESHNESS_WAIT`]) until the log has published `rv`.
///
/// Errors: Kubernetes' `NewTooLargeResourceVersionError` (504 Timeout, `Timeout: Too large
/// resource version: <rv>, current: <seq>`, cause `ResourceVersionTooLarge`, retry after 1 s).
pub(crate) async fn wait_for_resource_version(hub: &Hub, rv: u64) -> Result<(), ApiError> {
    let mut changes = hub.changes();
    let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
    while *changes.borrow_and_update() < rv {
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            let current = hub.published_seq();
            return Err(ApiError {
                code: StatusCode::GATEWAY_TIMEOUT,
                reason: "Timeout",
                message: format!("Timeout: Too large resource version: {rv}, current: {current}"),
                details: json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            });
        }
    }
    Ok(())
}

/// The `resourceVersion` query parameter: `None` for absent, empty or `0` (any version).
fn requested_resource_version(q: &Params) -> Result<Option<u64>, ApiError> {
    match q.resource_version.as_deref() {
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}"))),
    }
}

/// Checks the query string of a list or watch request (`watch`, `resourceVersion`,
/// `resourceVersionMatch`, `labelSelector`, `fieldSelector`, `fieldValidation`, `dryRun`,
/// `asOf`) with the rules the handlers apply before touching the state, and returns the
/// requested resourceVersion (`None`: any). The entry point of the `watch_query` fuzz target.
///
/// Errors: the 400 Status a request with that query gets.
pub fn check_list_query(query: &str) -> Result<Option<u64>, ApiError> {
    let uri: Uri = format!("/?{query}")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let Query(q) = Query::<Params>::try_from_uri(&uri).map_err(|e| ApiError::bad_request(e.to_string()))?;
    LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    FieldQuery::parse(q.field_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    validation(&q)?;
    dry_run_value(q.dry_run.as_deref())?;
    if let Some(point) = q.as_of.as_deref().filter(|s| !s.is_empty()) {
        crate::query::Point::parse(point).map_err(ApiError::bad_request)?;
    }
    requested_resource_version(&q)
}

/// Query parameters mco understands.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    watch: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    resource_version: Option<String>,
    include_object: Option<String>,
    field_manager: Option<String>,
    field_validation: Option<String>,
    force: Option<String>,
    dry_run: Option<String>,
    propagation_policy: Option<String>,
    orphan_dependents: Option<String>,
    resource_version_match: Option<String>,
    as_of: Option<String>,
    limit: Option<String>,
    #[serde(rename = "continue")]
    continue_: Option<String>,
    timeout_seconds: Option<String>,
}

impl Params {
    fn flag(v: &Option<String>) -> bool {
        matches!(v.as_deref(), Some("true") | Some("1"))
    }
}

pub(crate) fn accept(headers: &HeaderMap) -> &str {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn api_err(hub: &Hub) -> impl Fn(CommandError) -> ApiError + '_ {
    move |e| ApiError::from_command(e, hub.group())
}

async fn handle_get(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let as_table = table::wants_table(accept(&headers));
    let include = q.include_object.clone().unwrap_or_else(|| "Metadata".into());
    match target(hub, &uri)? {
        Target::Events(namespace) => {
            let Query(hq) = Query::<history::HistoryParams>::try_from_uri(&uri)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            history::core_events(&st, &hq, namespace.as_deref(), as_table).await
        }
        Target::Pods => Ok(Json(json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": hub.state().seq.to_string()}, "items": []})).into_response()),
        Target::Collection(kind) => {
            let labels = LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
            let fields =
                FieldQuery::parse_for(kind, q.field_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
            let watching = Params::flag(&q.watch);
            let timeout = watch_timeout(q.timeout_seconds.as_deref())?;
            let limit = pages::parse_limit(q.limit.as_deref())?;
            let token = match q.continue_.as_deref().filter(|t| !t.is_empty() && !watching) {
                Some(t) => Some(pages::Token::decode(t)?),
                None => None,
            };
            let versioned = q.resource_version.as_deref().is_some_and(|rv| !rv.is_empty() && rv != "0")
                || q.as_of.as_deref().is_some_and(|a| !a.is_empty());
            if token.is_some() && versioned {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let past = as_of(hub, &q, watching).await?;
            let requested = requested_resource_version(&q)?;
            if let Some(rv) = requested {
                wait_for_resource_version(hub, rv).await?;
            }
            if watching {
                let from = requested;
                if let Some(rv) = from.filter(|rv| *rv < hub.store().oldest_readable()) {
                    return Ok(watch_error(points::expired(rv, hub.store().oldest_readable())));
                }
                let shape = if as_table { WatchShape::Table(include) } else { WatchShape::Object };
                return Ok(watch(&st, kind, labels, fields, from, shape, timeout));
            }
            let table = as_table.then_some(include);
            let req = pages::ListRequest {
                kind,
                labels,
                fields,
                limit,
                table,
            };
            pages::serve(hub, req, token, past).await
        }
        Target::Object(kind, name, _) => {
            let past = as_of(hub, &q, false).await?;
            if past.is_none() {
                if let Some(rv) = requested_resource_version(&q)? {
                    wait_for_resource_version(hub, rv).await?;
                }
            }
            let (obj, seq) = match &past {
                Some(then) => (then.get_json(kind, &name), then.seq),
                None => {
                    let state = hub.state();
                    (state.get_json(kind, &name), state.seq)
                }
            };
            let obj = obj.ok_or_else(|| api_err(hub)(CommandError::NotFound { kind, name }))?;
            if as_table {
                return Ok(table_response(table::table(kind, &[obj], hub.keys(), seq, &include)));
            }
            Ok(Json(obj).into_response())
        }
    }
}

/// A time-travel read: the state as of `resourceVersion=N&resourceVersionMatch=Exact`
/// (Kubernetes' semantics, extended to single gets) or `asOf=<RFC 3339 time | rv:N>`; `None`
/// for a read of the present. The cost is one snapshot plus at most the snapshot interval of
/// events ([`crate::store::Store::state_at`]).
///
/// Errors as Kubernetes words them: `resourceVersionMatch` without a `resourceVersion`, with
/// `0`, or on a watch (400); a version newer than the log (504 "Too large resource version",
/// after waiting for it); one older than the retained history (410 Expired).
async fn as_of(hub: &Hub, q: &Params, watching: bool) -> Result<Option<crate::state::State>, ApiError> {
    let exact = match q.resource_version_match.as_deref() {
        None | Some("") | Some("NotOlderThan") => false,
        Some("Exact") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
            )))
        }
    };
    if q.resource_version_match.as_deref().is_some_and(|m| !m.is_empty()) {
        if watching {
            return Err(ApiError::bad_request("resourceVersionMatch is forbidden for watch"));
        }
        match q.resource_version.as_deref() {
            None | Some("") => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            Some("0") if exact => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                ))
            }
            _ => {}
        }
    }
    let seq = match (exact, q.as_of.as_deref().filter(|s| !s.is_empty())) {
        (true, _) => requested_resource_version(q)?.unwrap_or(0),
        (false, Some(point)) => {
            let point = crate::query::Point::parse(point).map_err(ApiError::bad_request)?;
            let store = hub.store().clone();
            off_runtime(move || point.seq_in(&store).map_err(points::store_error)).await?
        }
        (false, None) => return Ok(None),
    };
    wait_for_resource_version(hub, seq).await?;
    if seq == hub.published_seq() {
        let now = crate::state::State::clone(&hub.state());
        if now.seq == seq {
            return Ok(Some(now));
        }
    }
    let store = hub.store().clone();
    off_runtime(move || store.state_at(seq).map(Some).map_err(points::store_error)).await
}

fn table_response(t: Value) -> Response {
    ([(header::CONTENT_TYPE, table::CONTENT_TYPE)], t.to_string()).into_response()
}

/// Parses a request body: JSON, or YAML for `application/apply-patch+yaml` and `*yaml` types.
fn parse_body(headers: &HeaderMap, body: &[u8], limits: &crate::limits::Limits) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if !media.is_empty() && !media.ends_with("json") && !media.ends_with("yaml") {
        return Err(ApiError {
            code: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            reason: "UnsupportedMediaType",
            message: "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".into(),
            details: json!({}),
        });
    }
    if ct.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not UTF-8: {e}")))?;
        return crate::limits::on_yaml_stack(limits.max_json_depth, || {
            serde_saphyr::from_str_with_options::<Value>(text, crate::limits::yaml_budget_options(limits))
                .map_err(|e| crate::limits::yaml_error_message(&e, limits))
        })
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// Decodes the JSON (or YAML) body of one of mco's own request kinds (a token, a rollback, a
/// preview, a compaction, a daemon's report) as `T`: the body must be an object, and each
/// field of its type. `what` names the request in the error.
///
/// Errors: 400 `invalid <what>: json: cannot unmarshal array into Go value of type <what>` for
/// a body of another JSON type, `invalid <what>: spec.kind: invalid type: ...` naming the field
/// otherwise; [`parse_body`]'s for the media type and the syntax.
pub(crate) fn typed_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
    limits: &crate::limits::Limits,
    what: &str,
) -> Result<T, ApiError> {
    let v = parse_body(headers, body, limits)?;
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "invalid {what}: json: cannot unmarshal {} into Go value of type {what}",
            crate::validation::json_type(&v)
        )));
    }
    serde_path_to_error::deserialize(&v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::bad_request(format!("invalid {what}: {}", e.inner()))
        } else {
            ApiError::bad_request(format!("invalid {what}: {path}: {}", e.inner()))
        }
    })
}

fn precondition(obj: &Value) -> Result<Option<u64>, ApiError> {
    match obj["metadata"]["resourceVersion"].as_str() {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
    }
}

/// How unknown fields are treated (`fieldValidation`; Kubernetes' default is Warn).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Validation {
    Strict,
    Warn,
    Ignore,
}

fn validation(q: &Params) -> Result<Validation, ApiError> {
    match q.field_validation.as_deref() {
        None | Some("") | Some("Warn") => Ok(Validation::Warn),
        Some("Strict") => Ok(Validation::Strict),
        Some("Ignore") => Ok(Validation::Ignore),
        Some(o) => Err(ApiError::bad_request(format!(
            "fieldValidation must be one of Strict, Warn, Ignore, not {o:?}"
        ))),
    }
}

/// Checks `input` for fields the schema does not know: an error under Strict, warnings under
/// Warn. Returns the warnings to send.
fn check_fields(
    hub: &Hub,
    kind: Kind,
    input: &Value,
    duplicates: &[String],
    mode: Validation,
) -> Result<Vec<String>, CommandError> {
    check_fields_in(hub.group(), kind, input, duplicates, mode)
}

/// Adds a warning when a MachineConfig is selected by no pool: it will never be rendered (an
/// easy mistake, e.g. a role label under another group than `machineconfiguration.openshift.io`).
fn selection_warning(hub: &Hub, kind: Kind, obj: &Value, mut warnings: Vec<String>) -> Vec<String> {
    if kind != Kind::MachineConfig {
        return warnings;
    }
    let Ok(mc) = serde_json::from_value::<crate::model::MachineConfig>(obj.clone()) else {
        return warnings;
    };
    if crate::render::is_rendered_config(&mc) {
        return warnings;
    }
    let selected = hub
        .state()
        .pools
        .values()
        .any(|p| crate::model::selector_matches(p.spec.machine_config_selector.as_ref(), &mc.metadata));
    if !selected {
        warnings.push(format!(
            "MachineConfig {:?} is not selected by any MachineConfigPool (pools select on the label {}=<role>)",
            mc.name(),
            crate::model::ROLE_LABEL
        ));
    }
    warnings
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {:?}", w)) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

/// The field manager of a write: `fieldManager`, else the caller's declared component.
fn manager(q: &Params, declared: &str) -> String {
    q.field_manager
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| declared.to_string())
}

fn now_string() -> String {
    serde_json::to_value(crate::model::now())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The request's actor ([`user_actor`]: the authenticated user) with Kubernetes' `dryRun`
/// query parameter (`All` makes the write a dry run; any other value is refused as Kubernetes
/// refuses it), and the declared component for the field manager.
fn request_actor(user: &crate::auth::User, headers: &HeaderMap, q: &Params) -> Result<(Actor, String), ApiError> {
    let (mut actor, declared) = user_actor(user, headers);
    actor.dry_run = dry_run_value(q.dry_run.as_deref())?;
    Ok((actor, declared))
}

fn dry_run_value(v: Option<&str>) -> Result<bool, ApiError> {
    match v {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

async fn handle_post(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let Target::Collection(kind) = target(hub, &uri)? else {
        return Err(ApiError::method_not_allowed());
    };
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mut obj = parse_body(&headers, &body, &hub.limits())?;
    crate::command::check_shape(kind, &obj).map_err(api_err(hub))?;
    admit_node_write(
        &user,
        kind,
        obj["metadata"]["name"].as_str().unwrap_or(""),
        Scope::Main,
        None,
        &obj,
        &pool_keys,
    )
    .map_err(api_err(hub))?;
    if kind == Kind::Node {
        crate::auth::registration_labels(&user, &mut obj);
    }
    let dups = fields::duplicate_fields(&body);
    let warnings = check_fields(hub, kind, &obj, &dups, validation(&q)?).map_err(api_err(hub))?;
    let paths = fields::leaf_paths(&obj);
    fields::record(
        &mut obj,
        &manager(&q, &declared),
        "Update",
        &paths,
        &kind.api_version(hub.group()),
        &now_string(),
    );
    let created = hub.create(kind, obj, &actor).await.map_err(api_err(hub))?;
    let warnings = selection_warning(hub, kind, &created, warnings);
    Ok(with_warnings(
        (StatusCode::CREATED, Json(created)).into_response(),
        &warnings,
    ))
}

async fn handle_put(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let (kind, name, scope) = object_write_target(hub, &uri)?;
    let obj = parse_body(&headers, &body, &hub.limits())?;
    crate::command::check_shape(kind, &obj).map_err(api_err(hub))?;
    let mode = if scope == Scope::Main {
        validation(&q)?
    } else {
        Validation::Ignore
    };
    let warnings = check_fields(hub, kind, &obj, &fields::duplicate_fields(&body), mode).map_err(api_err(hub))?;
    let pre = precondition(&obj)?;
    // Custom resources need a resourceVersion on update (nodes allow unconditional updates);
    // one that does not exist is NotFound first, whatever the body says: an update never
    // creates (`AllowCreateOnUpdate` is false for custom resources and Nodes alike).
    let exists = hub.state().get_json(kind, &name).is_some();
    if pre.is_none() && scope == Scope::Main && kind != Kind::Node && exists {
        let invalid = crate::validation::Invalid {
            kind: kind.to_string(),
            name: name.clone(),
            causes: vec![crate::validation::FieldError::new(
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )],
        };
        return Err(api_err(hub)(CommandError::Invalid(invalid)));
    }
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mgr = manager(&q, &declared);
    let api_version = kind.api_version(hub.group());
    let group = hub.group().to_string();
    let updated = hub
        .update(kind, &name, scope, pre, &actor, |cur| {
            let mut new = obj.clone();
            admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
            if new["metadata"].get("managedFields").is_none() {
                new["metadata"]["managedFields"] = cur["metadata"]["managedFields"].clone();
            }
            if scope == Scope::Main {
                let changed = changed_after_defaults(&group, kind, cur, &new);
                fields::record(&mut new, &mgr, "Update", &changed, &api_version, &now_string());
            }
            Ok(new)
        })
        .await
        .map_err(api_err(hub))?;
    let warnings = selection_warning(hub, kind, &updated, warnings);
    Ok(with_warnings(Json(updated).into_response(), &warnings))
}

/// The object a PUT or PATCH addresses; refuses collections.
fn object_write_target(hub: &Hub, uri: &Uri) -> Result<(Kind, String, Scope), ApiError> {
    let Target::Object(kind, name, scope) = target(hub, uri)? else {
        return Err(ApiError::method_not_allowed());
    };
    Ok((kind, name, scope))
}

/// The patch types mco accepts.
enum PatchKind {
    Merge(Value),
    Json(json_patch::Patch),
    Strategic(Value),
    Apply(Value),
}

async fn handle_patch(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let (kind, name, scope) = object_write_target(hub, &uri)?;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let doc = parse_body(&headers, &body, &hub.limits())?;
    let dups = fields::duplicate_fields(&body);
    // The patch document's own type, as kube-apiserver decodes it first (`error decoding
    // patch: ...`): a JSON patch is an array of operations, every other patch an object.
    let json_patch = ct.starts_with("application/json-patch+json");
    if (json_patch && !doc.is_array()) || (!json_patch && !doc.is_object()) {
        let want = if json_patch {
            "[]handlers.jsonPatchOp"
        } else {
            "map[string]interface {}"
        };
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type {want}",
            crate::validation::json_type(&doc)
        )));
    }
    let how = if json_patch {
        let patch: json_patch::Patch =
            serde_json::from_value(doc).map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
        limits::check_json_patch(&patch)?;
        PatchKind::Json(patch)
    } else if ct.starts_with("application/merge-patch+json") {
        PatchKind::Merge(doc)
    } else if ct.starts_with("application/strategic-merge-patch+json") {
        if kind != Kind::Node {
            return Err(ApiError::unsupported_patch(kind.as_str()));
        }
        PatchKind::Strategic(doc)
    } else if ct.starts_with("application/apply-patch+yaml") {
        PatchKind::Apply(doc)
    } else {
        return Err(ApiError::unsupported_patch(kind.as_str()));
    };
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mgr = manager(&q, &declared);
    let mode = if scope == Scope::Main {
        validation(&q)?
    } else {
        Validation::Ignore
    };
    let api_version = kind.api_version(hub.group());
    let group = hub.group().to_string();
    if let PatchKind::Apply(applied) = &how {
        if q.field_manager.as_deref().unwrap_or("").is_empty() {
            return Err(ApiError::bad_request(
                "PATCH requests for apply must include the fieldManager query parameter",
            ));
        }
        crate::command::check_shape(kind, applied).map_err(api_err(hub))?;
        let warnings = check_fields(hub, kind, applied, &dups, mode).map_err(api_err(hub))?;
        let force = Params::flag(&q.force);
        let exists = hub.state().get_json(kind, &name).is_some();
        if !exists && scope == Scope::Main {
            let mut obj = fields::server_side_apply(None, applied, &mgr, force, &api_version, &now_string())
                .map_err(|c| ApiError::apply_conflict(&c))?;
            obj["metadata"]["name"] = json!(name);
            admit_node_write(&user, kind, &name, scope, None, &obj, &pool_keys).map_err(api_err(hub))?;
            if kind == Kind::Node {
                crate::auth::registration_labels(&user, &mut obj);
            }
            let created = hub.create(kind, obj, &actor).await.map_err(api_err(hub))?;
            let warnings = selection_warning(hub, kind, &created, warnings);
            return Ok(with_warnings(
                (StatusCode::CREATED, Json(created)).into_response(),
                &warnings,
            ));
        }
        let conflict = std::sync::Mutex::new(None);
        let r = hub
            .update(kind, &name, scope, None, &actor, |cur| {
                let new = fields::server_side_apply(Some(cur), applied, &mgr, force, &api_version, &now_string())
                    .map_err(|c| {
                        let msg = c.message();
                        *conflict.lock().expect("lock") = Some(c);
                        CommandError::BadRequest(msg)
                    })?;
                admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
                Ok(new)
            })
            .await;
        if let Some(c) = conflict.into_inner().expect("lock") {
            return Err(ApiError::apply_conflict(&c));
        }
        let applied_obj = r.map_err(api_err(hub))?;
        let warnings = selection_warning(hub, kind, &applied_obj, warnings);
        return Ok(with_warnings(Json(applied_obj).into_response(), &warnings));
    }
    let pre = match &how {
        PatchKind::Merge(d) | PatchKind::Strategic(d) => precondition(d)?,
        _ => None,
    };
    let warnings = std::sync::Mutex::new(Vec::new());
    let not_applied = std::sync::Mutex::new(None);
    let updated = hub
        .update(kind, &name, scope, pre, &actor, |cur| {
            let mut new = cur.clone();
            match &how {
                PatchKind::Merge(p) => json_patch::merge(&mut new, p),
                PatchKind::Strategic(p) => fields::strategic_merge(&mut new, p),
                PatchKind::Json(p) => {
                    new = fields::apply_json_patch(&new, p).map_err(|e| {
                        let message = e.to_string();
                        *not_applied.lock().expect("lock") = Some(message.clone());
                        CommandError::BadRequest(message)
                    })?
                }
                PatchKind::Apply(_) => unreachable!("handled above"),
            }
            // A patch may replace the whole object or its metadata with another type.
            crate::command::check_shape(kind, &new)?;
            admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
            *warnings.lock().expect("lock") = check_fields_in(&group, kind, &new, &dups, mode)?;
            if scope == Scope::Main {
                let changed = changed_after_defaults(&group, kind, cur, &new);
                fields::record(&mut new, &mgr, "Update", &changed, &api_version, &now_string());
            }
            Ok(new)
        })
        .await;
    if let Some(cause) = not_applied.into_inner().expect("lock") {
        return Err(ApiError::patch_does_not_apply(cause));
    }
    let updated = updated.map_err(api_err(hub))?;
    let warnings = warnings.into_inner().expect("lock");
    let warnings = selection_warning(hub, kind, &updated, warnings);
    Ok(with_warnings(Json(updated).into_response(), &warnings))
}

/// [`check_fields`] without a hub (inside update closures). Unknown keys inside a
/// MachineConfig's Ignition config are only ever warnings, as Ignition itself warns about unused
/// keys (and MCO's CRD preserves unknown fields there).
fn check_fields_in(
    group: &str,
    kind: Kind,
    input: &Value,
    duplicates: &[String],
    mode: Validation,
) -> Result<Vec<String>, CommandError> {
    if mode == Validation::Ignore {
        return Ok(Vec::new());
    }
    // Unknown fields are judged on the typed round trip alone, before semantic validation, as
    // the API server's strict decoding comes before validation.
    let normalized = crate::command::decode(kind, input.clone(), group)?;
    let unknown = fields::unknown_fields(input, &normalized);
    let msgs: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .chain(duplicates.iter().map(|f| format!("duplicate field {f:?}")))
        .collect();
    if mode == Validation::Strict && !msgs.is_empty() {
        return Err(CommandError::BadRequest(format!(
            "{k} in version \"v1\" cannot be handled as a {k}: strict decoding error: {}",
            msgs.join(", "),
            k = kind.as_str()
        )));
    }
    let mut warnings = msgs;
    if kind == Kind::MachineConfig {
        warnings.extend(
            fields::unknown_ignition_keys(&input["spec"]["config"])
                .into_iter()
                .map(|f| format!("unknown field {f:?}")),
        );
    }
    Ok(warnings)
}

async fn handle_delete(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let (mut actor, _) = request_actor(&user, &headers, &q)?;
    // kubectl sends DeleteOptions in the body: honour dryRun and the uid/resourceVersion
    // preconditions.
    let opts = delete_options(&headers, &body, &hub.limits())?;
    for v in opts.dry_run.iter().flatten() {
        actor.dry_run |= dry_run_value(Some(v))?;
    }
    match target(hub, &uri)? {
        Target::Object(kind, name, Scope::Main) => {
            let current = hub.state().get_json(kind, &name);
            let current = current.ok_or_else(|| {
                api_err(hub)(CommandError::NotFound {
                    kind,
                    name: name.clone(),
                })
            })?;
            let pre = opts.preconditions.clone().unwrap_or_default();
            for (field, want) in [("UID", &pre.uid), ("ResourceVersion", &pre.resource_version)] {
                let Some(want) = want.as_deref() else { continue };
                let key = if field == "UID" { "uid" } else { "resourceVersion" };
                let have = current["metadata"][key].as_str().unwrap_or("");
                if want != have {
                    return Err(ApiError::from_command(
                        CommandError::Conflict {
                            kind,
                            name: name.clone(),
                            message: format!(
                                "Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}"
                            ),
                        },
                        hub.group(),
                    ));
                }
            }
            let rv = pre.resource_version.as_deref().and_then(|r| r.parse().ok());
            let propagation = propagation(&q, &opts)?;
            let obj = hub
                .delete(kind, &name, rv, propagation, &actor)
                .await
                .map_err(api_err(hub))?;
            Ok(Json(obj).into_response())
        }
        // deletecollection: every object the label/field selectors match.
        Target::Collection(kind) => {
            let labels = LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
            let fields = FieldQuery::parse_for(kind, q.field_selector.as_deref().unwrap_or(""))
                .map_err(ApiError::bad_request)?;
            let names: Vec<String> = hub
                .state()
                .list_json(kind)
                .into_iter()
                .filter(|o| labels.matches(o) && fields.matches(o))
                .map(|o| crate::command::object_name(&o))
                .collect();
            let propagation = propagation(&q, &opts)?;
            let mut items = Vec::new();
            for n in names {
                match hub.delete(kind, &n, None, propagation, &actor).await {
                    Ok(o) => items.push(o),
                    Err(CommandError::NotFound { .. }) => {}
                    Err(e) => return Err(api_err(hub)(e)),
                }
            }
            Ok(Json(
                json!({"apiVersion": kind.api_version(hub.group()), "kind": format!("{}List", kind.as_str()),
                "metadata": {"resourceVersion": hub.state().seq.to_string()}, "items": items}),
            )
            .into_response())
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// The DeleteOptions of a DELETE's body (none when it is empty), decoded as kube-apiserver
/// decodes them: a body of another JSON type, or a field of the wrong type (`"dryRun": "All"`,
/// which must not become a real delete), is refused.
///
/// Errors: 400 `DeleteOptions in version "v1" cannot be handled as a DeleteOptions: ...`
/// naming the field; the media type and body limits of [`parse_body`].
fn delete_options(
    headers: &HeaderMap,
    body: &[u8],
    limits: &crate::limits::Limits,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions, ApiError> {
    if body.is_empty() {
        return Ok(Default::default());
    }
    let v = parse_body(headers, body, limits)?;
    let prefix = "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions";
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "{prefix}: json: cannot unmarshal {} into Go value of type v1.DeleteOptions",
            crate::validation::json_type(&v)
        )));
    }
    serde_path_to_error::deserialize(&v)
        .map_err(|e| ApiError::bad_request(format!("{prefix}: {}: {}", e.path(), e.inner())))
}

/// The DeleteOptions `propagationPolicy` (body or query; the deprecated `orphanDependents:
/// true` means Orphan), Background when unset, as for Kubernetes custom resources.
fn propagation(
    q: &Params,
    opts: &k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
) -> Result<Propagation, ApiError> {
    let policy = opts
        .propagation_policy
        .as_deref()
        .or(q.propagation_policy.as_deref())
        .filter(|p| !p.is_empty());
    let orphan = opts
        .orphan_dependents
        .or(q.orphan_dependents.as_deref().map(|o| o == "true"));
    match (policy, orphan) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "orphanDependents and deletionPropagation cannot be both set",
        )),
        (None, Some(true)) => Ok(Propagation::Orphan),
        (None, _) => Ok(Propagation::Background),
        (Some(p), None) => Propagation::parse(p).ok_or_else(|| {
            ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))
        }),
    }
}
