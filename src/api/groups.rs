//! The API groups mco serves and their discovery: the configured MachineConfig group, its
//! alias (answered through [`alias_group`], which rewrites the `apiVersion` of the answer) and
//! the fixed groups of the other kinds; `/api`, `/api/v1`, `/apis/<group>[/<version>]` and the
//! OpenAPI v3 index and documents. The `/apis` list, which adds the groups of the other
//! surfaces, is the router's ([`super::router`]).

use super::{discovery, openapi, ApiError, ApiState};
use crate::command::Hub;
use crate::model::Kind;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::Response;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;

/// Routes of the core and group discovery and of OpenAPI (merged into the API router).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/api", get(|| async { Json(discovery::core_versions()) }))
        .route("/api/v1", get(|| async { Json(discovery::core_v1()) }))
        .route("/apis/{group}", get(api_group))
        .route("/apis/{group}/{version}", get(api_group_v1))
        .route(
            "/openapi/v3",
            get(|State(st): State<ApiState>| async move { Json(openapi::index(&served_groups(&st.hub), st.hub.group())) }),
        )
        .route("/openapi/v3/api/v1", get(|| async { Json(openapi::core_document()) }))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi_group))
}

/// The API groups served: the configured one first (its annotation keys are used), then the
/// other accepted one as an alias, so that manifests naming either group work with kubectl.
fn served_groups(hub: &Hub) -> Vec<String> {
    let mut g = vec![hub.group().to_string()];
    g.extend(
        crate::model::ACCEPTED_GROUPS
            .iter()
            .filter(|x| **x != hub.group())
            .map(|x| x.to_string()),
    );
    g.push(crate::disruption::GROUP.to_string());
    g
}

/// Every API group with a kind mco stores: the MachineConfig groups ([`served_groups`]) and
/// the fixed groups of the other kinds (`config.openshift.io`, `operator.openshift.io`).
pub(crate) fn served_api_groups(hub: &Hub) -> Vec<String> {
    let mut g = served_groups(hub);
    for k in Kind::ALL {
        if let Some(fixed) = k.info().group.filter(|f| !f.is_empty()) {
            if !g.iter().any(|x| x == fixed) {
                g.push(fixed.to_string());
            }
        }
    }
    g
}

/// Answers requests made through the alias group with that group's `apiVersion`: the objects
/// are stored once, under the configured group.
pub(super) async fn alias_group(
    State(st): State<ApiState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path_group = req
        .uri()
        .path()
        .strip_prefix("/apis/")
        .and_then(|r| r.split('/').next())
        .unwrap_or("")
        .to_string();
    let hub_group = st.hub.group().to_string();
    if path_group == hub_group || !crate::model::ACCEPTED_GROUPS.contains(&path_group.as_str()) {
        return next.run(req).await;
    }
    let resp = next.run(req).await;
    let (from, to) = (format!("\"{hub_group}/v1\""), format!("\"{path_group}/v1\""));
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    use futures_util::StreamExt;
    let stream = body
        .into_data_stream()
        .map(move |chunk| chunk.map(|b| Bytes::from(String::from_utf8_lossy(&b).replace(&from, &to))));
    Response::from_parts(parts, Body::from_stream(stream))
}

async fn api_group(State(st): State<ApiState>, Path(group): Path<String>) -> Result<Json<Value>, ApiError> {
    served_api_groups(&st.hub)
        .contains(&group)
        .then(|| Json(discovery::group(&group, st.hub.group())))
        .ok_or_else(ApiError::not_found_path)
}

async fn api_group_v1(
    State(st): State<ApiState>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    served_api_groups(&st.hub)
        .contains(&group)
        .then(|| discovery::group_version(&group, &version, st.hub.group()))
        .flatten()
        .map(Json)
        .ok_or_else(ApiError::not_found_path)
}

async fn openapi_group(
    State(st): State<ApiState>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    served_api_groups(&st.hub)
        .contains(&group)
        .then(|| openapi::group_document(&group, &version, st.hub.group()))
        .flatten()
        .map(Json)
        .ok_or_else(ApiError::not_found_path)
}
