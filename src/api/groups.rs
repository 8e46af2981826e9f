//! The API groups mco serves and their discovery: the configured MachineConfig group, its
//! alias (answered through [`alias_group`], which rewrites the `apiVersion` of the answer) and
//! the fixed groups of the other kinds; `/api`, `/api/v1`, `/apis/<group>[/<version>]` and the
//! OpenAPI v3 index and documents. The `/apis` list, which adds the groups of the other
//! surfaces, is the router's ([`super::router`]).

use super::{discovery, openapi_kinds, openapi_v2, ApiError, ApiState};
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
            get(|State(st): State<ApiState>| async move {
                Json(openapi_kinds::index(&discovered_api_groups(&st.hub), st.hub.group()))
            }),
        )
        .route("/openapi/v2", get(openapi_v2))
        .route(
            "/openapi/v3/api/v1",
            get(|| async { Json(openapi_kinds::core_document()) }),
        )
        .route("/openapi/v3/apis/{group}/{version}", get(openapi_group))
}

/// The API groups served: the configured one first (its annotation keys are used), then the
/// other accepted one as an alias (not discovered: [`discovered_api_groups`]), so that
/// manifests naming either group are accepted.
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

/// The API groups discovery lists (`/apis`, the OpenAPI index): [`served_api_groups`] without
/// the alias. The other accepted MachineConfig group is still served at its paths (manifests
/// naming it are accepted by `mco apply` and by requests to those paths), but listing it too
/// would show every MachineConfig kind twice, and a discovery-based client looking a kind up
/// by name alone (the Python client's DynamicClient) fails with `ResourceNotUniqueError`:
/// kube-apiserver lists each served kind once.
pub(crate) fn discovered_api_groups(hub: &Hub) -> Vec<String> {
    let alias = |g: &String| crate::model::ACCEPTED_GROUPS.contains(&g.as_str()) && g != hub.group();
    served_api_groups(hub).into_iter().filter(|g| !alias(g)).collect()
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
    let served = served_api_groups(&st.hub).contains(&group) || openapi_kinds::is_other_group(&group);
    served
        .then(|| openapi_kinds::any_group_document(&group, &version, st.hub.group()))
        .flatten()
        .map(Json)
        .ok_or_else(ApiError::not_found_path)
}

/// `/openapi/v2`: protobuf when the client asks for it (kubectl), JSON otherwise.
async fn openapi_v2(State(st): State<ApiState>, headers: axum::http::HeaderMap) -> Response {
    let groups = discovered_api_groups(&st.hub);
    let wants_protobuf = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| openapi_v2::PROTOBUF_ACCEPTED.iter().any(|p| a.contains(p)));
    let (content_type, body) = if wants_protobuf {
        (
            openapi_v2::PROTOBUF,
            openapi_v2::protobuf_document(st.hub.group(), &groups),
        )
    } else {
        let doc = openapi_v2::json_document(st.hub.group(), &groups);
        ("application/json", serde_json::to_vec(&doc).unwrap_or_default())
    };
    Response::builder()
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap_or_default()
}
