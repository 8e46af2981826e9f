//! Health and version: `/healthz` and `/livez` (always ok), `/readyz` (not ready while the
//! event log cannot store writes) and `/version` (kube-apiserver's version object).

use super::ApiState;
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
        .route("/livez", get(|| async { "ok" }))
        // kube-apiserver registers the version at `/version/` (its go-restful web service's
        // root route) and answers `/version` too: the Python client's VersionApi asks for the
        // former.
        .route("/version", get(version))
        .route("/version/", get(version))
}

/// `/readyz`: `ok`, or, while the event log cannot store writes (under its space reserve, or
/// an append or flush failed), 500 with
/// kube-apiserver's failed-check shape (`[-]store failed: <the store error>`, then
/// `readyz check failed`). `/healthz` and `/livez` stay ok: the process recovers by itself
/// once writes succeed again.
async fn readyz(State(st): State<ApiState>) -> Response {
    // Under the space reserve: not ready; back over it: ready again, even before a write.
    let fault = match st.hub.check_space() {
        Err(e) => Some(e.to_string()),
        Ok(()) => st
            .hub
            .store_fault()
            .filter(|f| !f.starts_with("the event log's filesystem")),
    };
    match fault {
        None => "ok".into_response(),
        Some(why) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]store failed: {why}\nreadyz check failed\n"),
        )
            .into_response(),
    }
}

async fn version() -> Json<Value> {
    Json(json!({
        "major": "1", "minor": "33", "gitVersion": concat!("v1.33.0-mco-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "rustc", "platform": "linux/amd64"
    }))
}
