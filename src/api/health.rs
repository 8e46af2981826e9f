//! Health and version: `/healthz` and `/livez` (always ok), `/readyz` (not ready while the
//! event log cannot store writes) and `/version` (kube-apiserver's version object).

use super::ApiState;
use crate::command::StoreFault;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

/// Routes of the health checks and the version (merged into the API router).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/readyz/store", get(readyz_store))
        .route("/livez", get(|| async { "ok" }))
        // kube-apiserver registers the version at `/version/` (its go-restful web service's
        // root route) and answers `/version` too: the Python client's VersionApi asks for the
        // former.
        .route("/version", get(version))
        .route("/version/", get(version))
}

/// `/readyz`: `ok`, or, while the event log cannot store writes (under its space reserve, or
/// an append or flush failed), 500 with kube-apiserver's failed-check shape and its public
/// wording, `[-]store failed: reason withheld`, then `readyz check failed`: the endpoint is
/// unauthenticated, so the reason (which names paths and errno text) is given only by the
/// check's own path, `/readyz/store`, to an authenticated caller
/// (`k8s.io/apiserver/pkg/server/healthz/healthz.go`, "don't include the error since this
/// endpoint is public"). `/healthz` and `/livez` stay ok: the process recovers by itself once
/// writes succeed again.
async fn readyz(State(st): State<ApiState>) -> Response {
    match store_check(&st) {
        None => "ok".into_response(),
        Some(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]store failed: reason withheld\nreadyz check failed\n",
        )
            .into_response(),
    }
}

/// `/readyz/store`, the store check alone (authenticated, as every path but the public ones):
/// `ok`, or 500 `internal server error: <why>` as kube-apiserver's per-check handler answers.
async fn readyz_store(State(st): State<ApiState>) -> Response {
    match store_check(&st) {
        None => "ok".into_response(),
        Some(why) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {why}\n"),
        )
            .into_response(),
    }
}

/// Why the store check fails, `None` when it passes. Under the space reserve: not ready; back
/// over it: ready again, even before a write (a reserve fault is judged afresh, not remembered).
fn store_check(st: &ApiState) -> Option<String> {
    if let Some(why) = st.hub.store().remote().and_then(|log| log.unready()) {
        return Some(why);
    }
    match st.hub.check_space() {
        Err(e) => Some(e.to_string()),
        Ok(()) => st
            .hub
            .store_fault()
            .filter(|f| !matches!(f, StoreFault::Reserve(_)))
            .map(|f| f.to_string()),
    }
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1", "minor": "33", "gitVersion": concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"
    }))
}
