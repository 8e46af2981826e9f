//! `GET /apis/history.mco.dev/v1/diffs`: attributed diffs between two rendered configs, for
//! `mco diff` and dashboards.
//!
//! Owns resolving what to compare (two rendered names; a pool's target, or a node's
//! currentConfig, at two points in time) and the provenance of each side's sources from the
//! history (the last change of a source MachineConfig at or before the render,
//! [`crate::query::provenance`]). The comparison itself is [`crate::diff`]'s.

use super::points::{rendered_at_error, store_error};
use super::{ApiError, ApiState};
use crate::command::Hub;
use crate::diff;
use crate::query::{provenance, rendered_at, Point};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

/// Query of a diff: `from`/`to` are rendered names, or points (`TIME` | `rv:N`) of `pool` or
/// `node`; `to` defaults to now.
#[derive(Debug, Default, Deserialize)]
pub struct DiffParams {
    from: Option<String>,
    to: Option<String>,
    pool: Option<String>,
    node: Option<String>,
}

/// The route of the diffs (merged into the API router).
pub fn routes() -> Router<ApiState> {
    Router::new().route("/apis/history.mco.dev/v1/diffs", get(get_diff))
}

fn not_found(what: String) -> ApiError {
    ApiError {
        code: StatusCode::NOT_FOUND,
        reason: "NotFound",
        message: what,
        details: json!({}),
    }
}

/// The seq a point names; `None` is now.
fn seq_of(hub: &Hub, point: Option<&str>) -> Result<u64, ApiError> {
    match point.filter(|p| !p.is_empty()) {
        None => Ok(hub.published_seq()),
        Some(p) => {
            let seq = Point::parse(p)
                .map_err(ApiError::bad_request)?
                .seq(hub)
                .map_err(store_error)?;
            if seq > hub.published_seq() {
                return Err(ApiError::bad_request(format!(
                    "{p} is in the future: the newest resourceVersion is {}",
                    hub.published_seq()
                )));
            }
            Ok(seq)
        }
    }
}

/// The rendered config name `pool` targeted, or `node` was on, at `seq`.
fn name_at(hub: &Hub, q: &DiffParams, seq: u64) -> Result<String, ApiError> {
    let state = hub.store().state_at(seq).map_err(store_error)?;
    if let Some(pool) = &q.pool {
        let p = state
            .pools
            .get(pool)
            .ok_or_else(|| not_found(format!("pool {pool:?} did not exist at resourceVersion {seq}")))?;
        return Ok(p.spec.configuration.name.clone());
    }
    let node = q.node.as_deref().unwrap_or("");
    let n = state
        .nodes
        .get(node)
        .ok_or_else(|| not_found(format!("node {node:?} did not exist at resourceVersion {seq}")))?;
    Ok(crate::model::NodeAnnotations::read(n, hub.keys()).current_config)
}

/// Diffs two rendered configs with the provenance of their sources.
pub fn diff_renders(hub: &Hub, from: &str, to: &str, until: u64) -> Result<diff::RenderDiff, ApiError> {
    let (a, created_a) = rendered_at(hub, from, until).map_err(rendered_at_error)?;
    let (b, created_b) = rendered_at(hub, to, until).map_err(rendered_at_error)?;
    let pa = |mc: &str| provenance(hub, mc, created_a);
    let pb = |mc: &str| provenance(hub, mc, created_b);
    diff::diff(
        diff::Input {
            config: &a,
            provenance: &pa,
        },
        diff::Input {
            config: &b,
            provenance: &pb,
        },
    )
    .map_err(ApiError::bad_request)
}

/// `GET /apis/history.mco.dev/v1/diffs`.
pub async fn get_diff(State(st): State<ApiState>, Query(q): Query<DiffParams>) -> Result<Response, ApiError> {
    // Reads the log (the renders' history, states at two points): off the async runtime.
    super::support::off_runtime(move || diff_response(&st.hub, &q)).await
}

fn diff_response(hub: &Hub, q: &DiffParams) -> Result<Response, ApiError> {
    let now = hub.published_seq();
    let (from, to, points) = if q.pool.is_some() || q.node.is_some() {
        let (fa, fb) = (seq_of(hub, q.from.as_deref())?, seq_of(hub, q.to.as_deref())?);
        if q.from.as_deref().unwrap_or("").is_empty() {
            return Err(ApiError::bad_request("from is required: a time or rv:N"));
        }
        (name_at(hub, q, fa)?, name_at(hub, q, fb)?, Some((fa, fb)))
    } else {
        match (q.from.as_deref(), q.to.as_deref()) {
            (Some(a), Some(b)) if !a.is_empty() && !b.is_empty() => (a.to_string(), b.to_string(), None),
            _ => {
                return Err(ApiError::bad_request(
                    "give from and to (two rendered configs), or pool or node with from (and to)",
                ))
            }
        }
    };
    for name in [&from, &to] {
        if name.is_empty() {
            return Err(not_found("no rendered config at that point".into()));
        }
    }
    let d = diff_renders(hub, &from, &to, now)?;
    let mut out = serde_json::to_value(&d).expect("a diff serializes");
    out["apiVersion"] = json!(crate::history::API_VERSION);
    out["kind"] = json!("RenderDiff");
    if let Some((fa, fb)) = points {
        out["fromResourceVersion"] = json!(fa);
        out["toResourceVersion"] = json!(fb);
    }
    Ok(Json(out).into_response())
}
