//! The metrics surface: `GET /metrics` (OpenMetrics or text 0.0.4, by `Accept`), `POST
//! /apis/metrics.mco.dev/v1/reports` (node daemons report drifts and failed reboots, so the
//! server's `/metrics` covers the fleet), and the middleware timing every API request and
//! counting open watches. Owns no state: it records into the hub's [`crate::metrics::Metrics`].

use super::{ApiError, ApiState};
use crate::metrics::Format;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::StreamExt;

use crate::protocol::REPORTS_PATH;

/// The routes of this surface.
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/metrics", get(scrape))
        .route(REPORTS_PATH, post(report))
}

/// `GET /metrics` in the format the scrape's `Accept` asks for ([`Format::negotiate`]):
/// OpenMetrics for Prometheus, text 0.0.4 otherwise, as kube-apiserver negotiates.
async fn scrape(State(st): State<ApiState>, headers: axum::http::HeaderMap) -> Response {
    let format = Format::negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let text = {
        let state = st.hub.state();
        st.hub.metrics().encode_as(&state, st.hub.keys(), format)
    };
    ([(header::CONTENT_TYPE, format.content_type())], text).into_response()
}

/// A daemon's report. A node identity may report about its own node only (NodeRestriction's
/// rule, applied to reports): another node's report is Forbidden. A report carrying a drift
/// record is also written to the log as a note on the Node (`NodeConfigDrifted`,
/// `NodeConfigReverted`); a detail over the limits is refused as any write is.
async fn report(
    State(st): State<ApiState>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let r: crate::metrics::Report = super::request::typed_body(&headers, &body, &st.hub.limits(), "Report")?;
    if r.node.is_empty() {
        return Err(ApiError::bad_request("invalid Report: node: must not be empty"));
    }
    if let Err(message) = crate::auth::node_may_write(&user, &r.node) {
        let attrs = crate::auth::Attributes::resource("create", "metrics.mco.dev", "reports", "", "");
        return Err(ApiError::forbidden(
            format!("reports.metrics.mco.dev is forbidden: {message}"),
            &attrs,
        ));
    }
    st.hub.metrics().report(&r);
    if let Some(d) = &r.drift {
        // The drift's record in the log: a note on the Node, by the node's own identity.
        // The action is the event's reason: `history::core_event` serves a Degrade's note
        // under its own type, MCO's ConfigDriftDetected being the Degraded write's.
        let (mut actor, _) = super::request::user_actor(&user, &headers);
        actor.reason = d.action.clone();
        let event = match r.kind {
            crate::metrics::ReportKind::DriftReverted => crate::event::EventType::NodeConfigReverted,
            _ => crate::event::EventType::NodeConfigDrifted,
        };
        st.hub
            .note(crate::model::Kind::Node, &r.node, event, &d.detail(), &actor)
            .await
            .map_err(|e| ApiError::from_command(e, st.hub.group()))?;
    }
    Ok(Json(
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
    ))
}

/// The Kubernetes verb and resource of a request (`list`/`machineconfigpools`,
/// `patch`/`nodes/status`), or `None` for a non-resource path or a watch.
pub fn verb_and_resource(method: &str, path: &str, query: &str) -> Option<(&'static str, String)> {
    let rest = path.strip_prefix("/api/v1/").or_else(|| {
        let r = path.strip_prefix("/apis/")?;
        let mut parts = r.splitn(3, '/');
        let (_group, version, rest) = (parts.next()?, parts.next()?, parts.next()?);
        (version == "v1").then_some(rest)
    })?;
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let (resource, named) = match segments.as_slice() {
        [r] => (r.to_string(), false),
        [r, _name] => (r.to_string(), true),
        [r, _name, sub, ..] => (format!("{r}/{sub}"), true),
        _ => return None,
    };
    let watch = query.split('&').any(|p| p == "watch=true" || p == "watch=1");
    let verb = match (method, named) {
        (_, _) if watch => return None,
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "deletecollection",
        ("DELETE", true) => "delete",
        _ => return None,
    };
    Some((verb, resource))
}

/// Times API requests by verb and resource; counts a watch as open until its body is dropped.
pub async fn track(State(st): State<ApiState>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let watching = method == "GET" && query.split('&').any(|p| p == "watch=true" || p == "watch=1");
    let started = std::time::Instant::now();
    let resp = next.run(req).await;
    let metrics = st.hub.metrics().clone();
    if watching && resp.status().is_success() {
        metrics.watch_connections.inc();
        let guard = WatchGuard(metrics);
        let (parts, body) = resp.into_parts();
        let stream = body.into_data_stream().map(move |chunk| {
            let _ = &guard;
            chunk
        });
        return Response::from_parts(parts, axum::body::Body::from_stream(stream));
    }
    if let Some((verb, resource)) = verb_and_resource(&method, &path, &query) {
        metrics.request(verb, &resource, started.elapsed());
    }
    resp
}

/// Decrements the open-watch gauge when the watch's body is dropped.
struct WatchGuard(std::sync::Arc<crate::metrics::Metrics>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.watch_connections.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::verb_and_resource;

    #[test]
    fn verbs_and_resources_as_kubernetes_names_them() {
        let g = "/apis/machineconfiguration.openshift.io/v1";
        assert_eq!(
            verb_and_resource("GET", &format!("{g}/machineconfigpools"), ""),
            Some(("list", "machineconfigpools".into()))
        );
        assert_eq!(
            verb_and_resource("PATCH", "/api/v1/nodes/worker-0/status", ""),
            Some(("patch", "nodes/status".into()))
        );
        assert_eq!(
            verb_and_resource("GET", "/api/v1/nodes/worker-0", ""),
            Some(("get", "nodes".into()))
        );
        assert_eq!(verb_and_resource("GET", "/api/v1/nodes", "watch=true"), None);
        assert_eq!(verb_and_resource("GET", "/healthz", ""), None);
    }
}
