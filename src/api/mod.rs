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
//! `/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/v1`, `/openapi/v2`, `/openapi/v3[/...]`,
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
mod last_applied;
mod limits;
pub mod listen;
pub mod mcs;
pub mod metrics;
mod node_restriction;
mod openapi;
mod openapi_kinds;
mod openapi_meta;
mod openapi_v2;
mod pages;
mod points;
mod request;
mod resources;
mod rollbacks;
pub mod selectors;
mod support;
pub mod table;
pub mod ui;
mod watch;

pub use errors::ApiError;
pub use limits::{WatchCounter, DEFAULT_MAX_REQUEST_BODY_BYTES};
pub use mcs::ignition_version_for;
pub use request::{actor_of, check_list_query, prefix_from_user_agent, user_actor};
use support::catch_panics;

use crate::command::Hub;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
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
    /// The controllers' clock: previews read the RolloutPolicies' windows at its time.
    pub clock: crate::controller::Clock,
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
    Router::new()
        .merge(health::routes())
        .merge(groups::routes())
        .route(
            "/apis",
            get(|State(st): State<ApiState>| async move {
                let mut groups = groups::discovered_api_groups(&st.hub);
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
        .merge(resources::routes(&state))
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
