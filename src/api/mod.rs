//! The REST API: Kubernetes-style paths over the hub, errors as `Status` objects, the Ignition
//! endpoint for new nodes, health.
//!
//! Owns HTTP concerns only: routing, query parsing, identity (the caller's declared component
//! from the `x-mco-actor` header, decided here in [`actor_of`]), content types, watch streaming.
//! Every write goes through [`crate::command::Hub`]. Served paths (DESIGN.md section 3b):
//! `/apis/<group>/v1/{machineconfigs,machineconfigpools}[/{name}[/status]]`,
//! `/api/v1/nodes[/{name}[/status]]`, `/config/{pool}`, `/healthz`, `/readyz`, `/version`,
//! `/api`, `/apis`.

mod errors;
pub mod selectors;

pub use errors::ApiError;

use crate::client::{ACTOR_HEADER, REASON_HEADER};
use crate::command::{Actor, CommandError, Hub, Scope};
use crate::model::Kind;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use selectors::{FieldQuery, LabelQuery};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct ApiState {
    pub hub: Arc<Hub>,
    /// Cancelled at shutdown; ends every open watch so graceful shutdown does not hang.
    pub shutdown: CancellationToken,
}

/// Serves the API on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    hub: Arc<Hub>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(ApiState {
        hub,
        shutdown: shutdown.clone(),
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// The axum router of the whole API.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/apis", get(api_groups))
        .route("/config/{pool}", get(machine_config_server))
        .route("/api/v1/{plural}", get(list_core).post(create_core))
        .route(
            "/api/v1/{plural}/{name}",
            get(get_core).put(replace_core).patch(patch_core).delete(delete_core),
        )
        .route(
            "/api/v1/{plural}/{name}/status",
            get(get_core).put(replace_core_status).patch(patch_core_status),
        )
        .route("/apis/{group}/v1/{plural}", get(list_group).post(create_group))
        .route(
            "/apis/{group}/v1/{plural}/{name}",
            get(get_group)
                .put(replace_group)
                .patch(patch_group)
                .delete(delete_group),
        )
        .route(
            "/apis/{group}/v1/{plural}/{name}/status",
            get(get_group).put(replace_group_status).patch(patch_group_status),
        )
        .fallback(|| async { ApiError::not_found_path() })
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// The identity of a request: the caller's declared component (`x-mco-actor`, default
/// `anonymous`) and reason (`x-mco-reason`). Authentication will replace the declaration here.
pub fn actor_of(headers: &HeaderMap) -> Actor {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut name = h(ACTOR_HEADER);
    if name.is_empty() {
        let ua = h("user-agent");
        name = if ua.starts_with("kubectl") {
            "kubectl".into()
        } else {
            "anonymous".into()
        };
    }
    Actor {
        name,
        reason: h(REASON_HEADER),
    }
}

fn core_kind(plural: &str) -> Result<Kind, ApiError> {
    match plural {
        "nodes" => Ok(Kind::Node),
        _ => Err(ApiError::not_found_path()),
    }
}

fn group_kind(st: &ApiState, group: &str, plural: &str) -> Result<Kind, ApiError> {
    if group != st.hub.group() {
        return Err(ApiError::not_found_path());
    }
    match plural {
        "machineconfigs" => Ok(Kind::MachineConfig),
        "machineconfigpools" => Ok(Kind::MachineConfigPool),
        _ => Err(ApiError::not_found_path()),
    }
}

/// Query parameters of list/watch/get.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    #[serde(default)]
    watch: Option<String>,
    #[serde(default)]
    label_selector: Option<String>,
    #[serde(default)]
    field_selector: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1", "minor": "33", "gitVersion": concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"
    }))
}

async fn api_versions() -> Json<Value> {
    Json(
        json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}),
    )
}

async fn api_groups(State(st): State<ApiState>) -> Json<Value> {
    let g = st.hub.group();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
        "name": g, "versions": [{"groupVersion": format!("{g}/v1"), "version": "v1"}],
        "preferredVersion": {"groupVersion": format!("{g}/v1"), "version": "v1"}
    }]}))
}

/// The Machine Config Server endpoint: the pool's rendered Ignition config.
///
/// MCO `pkg/server/cluster_server.go`: serves `spec.configuration.name` when
/// `status.updatedMachineCount > 0`, else `status.configuration.name`; an unknown pool is a 500
/// (MCO's code, not its docs' 404). mco serves Ignition 3.4.0 whatever the Accept header asks.
async fn machine_config_server(State(st): State<ApiState>, Path(pool): Path<String>) -> Response {
    let state = st.hub.state();
    let Some(p) = state.pools.get(&pool) else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not fetch pool {pool}: not found"),
        )
            .into_response();
    };
    let name = if p.status.updated_machine_count > 0 || p.status.configuration.name.is_empty() {
        &p.spec.configuration.name
    } else {
        &p.status.configuration.name
    };
    let Some(mc) = state.machine_configs.get(name) else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("could not fetch config {name}: not found"),
        )
            .into_response();
    };
    let config = mc
        .spec
        .config
        .clone()
        .unwrap_or_else(|| json!({"ignition": {"version": crate::ignition::RENDERED_VERSION}}));
    ([(header::CONTENT_TYPE, "application/json")], config.to_string()).into_response()
}

// ---- handlers: thin adapters from paths to the generic operations ----

async fn list_core(
    State(st): State<ApiState>,
    Path(plural): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    list(&st, core_kind(&plural)?, q)
}
async fn list_group(
    State(st): State<ApiState>,
    Path((group, plural)): Path<(String, String)>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    list(&st, group_kind(&st, &group, &plural)?, q)
}
async fn get_core(State(st): State<ApiState>, Path(p): Path<HashMap<String, String>>) -> Result<Json<Value>, ApiError> {
    get_one(&st, core_kind(&p["plural"])?, &p["name"])
}
async fn get_group(
    State(st): State<ApiState>,
    Path(p): Path<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    get_one(&st, group_kind(&st, &p["group"], &p["plural"])?, &p["name"])
}
async fn create_core(
    State(st): State<ApiState>,
    Path(plural): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    create(&st, core_kind(&plural)?, &headers, &body).await
}
async fn create_group(
    State(st): State<ApiState>,
    Path((group, plural)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    create(&st, group_kind(&st, &group, &plural)?, &headers, &body).await
}
async fn replace_core(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    replace(&st, core_kind(&plural)?, &name, Scope::Main, &headers, &body).await
}
async fn replace_core_status(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    replace(&st, core_kind(&plural)?, &name, Scope::Status, &headers, &body).await
}
async fn replace_group(
    State(st): State<ApiState>,
    Path((group, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    replace(
        &st,
        group_kind(&st, &group, &plural)?,
        &name,
        Scope::Main,
        &headers,
        &body,
    )
    .await
}
async fn replace_group_status(
    State(st): State<ApiState>,
    Path((group, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    replace(
        &st,
        status_kind(group_kind(&st, &group, &plural)?)?,
        &name,
        Scope::Status,
        &headers,
        &body,
    )
    .await
}
async fn patch_core(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    patch(&st, core_kind(&plural)?, &name, Scope::Main, &headers, &body).await
}
async fn patch_core_status(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    patch(&st, core_kind(&plural)?, &name, Scope::Status, &headers, &body).await
}
async fn patch_group(
    State(st): State<ApiState>,
    Path((group, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    patch(
        &st,
        group_kind(&st, &group, &plural)?,
        &name,
        Scope::Main,
        &headers,
        &body,
    )
    .await
}
async fn patch_group_status(
    State(st): State<ApiState>,
    Path((group, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    patch(
        &st,
        status_kind(group_kind(&st, &group, &plural)?)?,
        &name,
        Scope::Status,
        &headers,
        &body,
    )
    .await
}
async fn delete_core(
    State(st): State<ApiState>,
    Path((plural, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    delete(&st, core_kind(&plural)?, &name, &headers).await
}
async fn delete_group(
    State(st): State<ApiState>,
    Path((group, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    delete(&st, group_kind(&st, &group, &plural)?, &name, &headers).await
}

/// MachineConfigs have no status subresource.
fn status_kind(kind: Kind) -> Result<Kind, ApiError> {
    if kind == Kind::MachineConfig {
        Err(ApiError::not_found_path())
    } else {
        Ok(kind)
    }
}

// ---- generic operations ----

fn list(st: &ApiState, kind: Kind, q: ListQuery) -> Result<Response, ApiError> {
    let labels = LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    let fields = FieldQuery::parse(q.field_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    if matches!(q.watch.as_deref(), Some("true") | Some("1")) {
        let from = match q.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(rv) => Some(
                rv.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
            ),
        };
        return Ok(watch(st, kind, labels, fields, from));
    }
    let (items, seq) = {
        let state = st.hub.state();
        let items: Vec<Value> = state
            .list_json(kind)
            .into_iter()
            .filter(|o| labels.matches(o) && fields.matches(o))
            .collect();
        (items, state.seq)
    };
    Ok(Json(json!({
        "apiVersion": kind.api_version(st.hub.group()),
        "kind": format!("{}List", kind.as_str()),
        "metadata": {"resourceVersion": seq.to_string()},
        "items": items,
    }))
    .into_response())
}

fn get_one(st: &ApiState, kind: Kind, name: &str) -> Result<Json<Value>, ApiError> {
    st.hub.state().get_json(kind, name).map(Json).ok_or_else(|| {
        ApiError::from_command(
            CommandError::NotFound {
                kind,
                name: name.into(),
            },
            st.hub.group(),
        )
    })
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

async fn create(st: &ApiState, kind: Kind, headers: &HeaderMap, body: &[u8]) -> Result<Response, ApiError> {
    let obj = parse_body(body)?;
    let created = st
        .hub
        .create(kind, obj, &actor_of(headers))
        .await
        .map_err(|e| ApiError::from_command(e, st.hub.group()))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
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

async fn replace(
    st: &ApiState,
    kind: Kind,
    name: &str,
    scope: Scope,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Json<Value>, ApiError> {
    let obj = parse_body(body)?;
    let pre = precondition(&obj)?;
    st.hub
        .update(kind, name, scope, pre, &actor_of(headers), |_| Ok(obj.clone()))
        .await
        .map(Json)
        .map_err(|e| ApiError::from_command(e, st.hub.group()))
}

async fn patch(
    st: &ApiState,
    kind: Kind,
    name: &str,
    scope: Scope,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Json<Value>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let patch_doc = parse_body(body)?;
    enum How {
        Merge,
        Json(json_patch::Patch),
    }
    let how = if content_type.starts_with("application/json-patch+json") {
        How::Json(
            serde_json::from_value(patch_doc.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?,
        )
    } else if content_type.starts_with("application/merge-patch+json")
        || content_type.starts_with("application/strategic-merge-patch+json")
    {
        How::Merge
    } else {
        return Err(ApiError::unsupported_media_type(content_type));
    };
    let pre = if matches!(how, How::Merge) {
        precondition(&patch_doc)?
    } else {
        None
    };
    st.hub
        .update(kind, name, scope, pre, &actor_of(headers), |cur| {
            let mut doc = cur.clone();
            match &how {
                How::Merge => json_patch::merge(&mut doc, &patch_doc),
                How::Json(p) => json_patch::patch(&mut doc, p)
                    .map_err(|e| CommandError::BadRequest(format!("the JSON patch does not apply: {e}")))?,
            }
            Ok(doc)
        })
        .await
        .map(Json)
        .map_err(|e| ApiError::from_command(e, st.hub.group()))
}

async fn delete(st: &ApiState, kind: Kind, name: &str, headers: &HeaderMap) -> Result<Json<Value>, ApiError> {
    let obj = st
        .hub
        .delete(kind, name, None, &actor_of(headers))
        .await
        .map_err(|e| ApiError::from_command(e, st.hub.group()))?;
    Ok(Json(obj))
}

/// Streams watch events (`{"type","object"}` lines) for `kind` after `from` (or, without a
/// resourceVersion, the current objects as ADDED first), until the client goes or shutdown.
fn watch(st: &ApiState, kind: Kind, labels: LabelQuery, fields: FieldQuery, from: Option<u64>) -> Response {
    let hub = st.hub.clone();
    let shutdown = st.shutdown.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let mut live = hub.subscribe();
    let kind_name = kind.as_str();
    let line = move |t: &str, obj: Value| -> Option<Bytes> {
        (labels.matches(&obj) && fields.matches(&obj)).then(|| {
            let mut s = json!({"type": t, "object": obj}).to_string();
            s.push('\n');
            Bytes::from(s)
        })
    };
    let from_event = move |ev: &crate::event::Event| -> Option<(String, Value)> {
        if ev.object_kind != kind_name {
            return None;
        }
        let t = ev.event_type()?.watch_type();
        let mut obj = ev.object().ok()?;
        obj["metadata"]["resourceVersion"] = json!(ev.seq.to_string());
        Some((t.to_string(), obj))
    };
    tokio::spawn(async move {
        let mut last = match from {
            Some(rv) => rv,
            None => {
                let (objs, seq) = {
                    let s = hub.state();
                    (s.list_json(kind), s.seq)
                };
                for o in objs {
                    if let Some(b) = line("ADDED", o) {
                        if tx.send(Ok(b)).await.is_err() {
                            return;
                        }
                    }
                }
                seq
            }
        };
        let store = hub.store().clone();
        // Sends the logged events in (last, until], in order.
        macro_rules! catch_up {
            ($until:expr) => {
                let until: u64 = $until;
                let pending: Vec<_> = store.read_range(last, until).collect();
                for ev in pending {
                    let Ok(ev) = ev else { return };
                    last = ev.seq;
                    if let Some((t, o)) = from_event(&ev) {
                        if let Some(b) = line(&t, o) {
                            if tx.send(Ok(b)).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            };
        }
        let now = *hub.changes().borrow();
        catch_up!(now);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
                r = live.recv() => match r {
                    Ok(ev) => {
                        if ev.seq <= last { continue; }
                        catch_up!(ev.seq);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let now = *hub.changes().borrow();
                        catch_up!(now);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
