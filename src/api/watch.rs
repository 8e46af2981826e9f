//! Watch streaming of objects (`?watch=true` on a list): [`watch`] sends the objects'
//! changes as `{"type","object"}` lines after a resourceVersion, with selector membership
//! (an object that starts matching is ADDED, one that stops is DELETED) and one-row Tables;
//! [`next_for_watch`] drives a [`Follower`] for any watch (objects, history, Events) and ends it
//! with the Status its failure maps to ([`watch_error_line`]).

use super::follow::{objects_at, FollowError, Follower};
use super::points::store_error;
use super::selectors::{FieldQuery, LabelQuery};
use super::support::spawn_stream;
use super::{table, ApiError, ApiState};
use crate::command::Published;
use crate::model::Kind;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A watch answered with one `ERROR` event carrying a Status, as the Kubernetes API server
/// ends a watch it cannot serve (a resourceVersion older than the retained history is
/// `410 Expired`; clients such as client-go's reflector then list again).
pub(crate) fn watch_error(e: ApiError) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], watch_error_line(e)).into_response()
}

/// The `{"type":"ERROR","object":<Status>}` line that ends a watch (Kubernetes sends 410
/// Expired this way when the watch's resourceVersion is compacted away: the client re-lists).
pub(crate) fn watch_error_line(e: ApiError) -> String {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": e.message, "reason": e.reason, "details": e.details, "code": e.code.as_u16()});
    format!("{}\n", json!({"type": "ERROR", "object": status}))
}

/// The Status a watch ends with when its follower stopped (410 Expired after a compaction,
/// 500 for a store or task failure); `None` when the server is stopping.
fn error_status(e: FollowError) -> Option<ApiError> {
    match e {
        FollowError::Closed => None,
        FollowError::Store(e) => {
            tracing::warn!(error = %e, "watch: cannot read the log");
            Some(store_error(e))
        }
        FollowError::Task(e) => Some(ApiError::internal(e)),
    }
}

/// [`Follower::next`] for a watch streaming into `tx`: `None` when the watch must end
/// (shutdown, the client gone, or the follower stopped: then its error line is sent first).
pub(super) async fn next_for_watch(
    follower: &mut Follower,
    tx: &mpsc::Sender<Result<Bytes, Infallible>>,
    shutdown: &CancellationToken,
) -> Option<Vec<Published>> {
    tokio::select! {
        _ = shutdown.cancelled() => None,
        _ = tx.closed() => None,
        r = follower.next() => match r {
            Ok(events) => Some(events),
            Err(e) => {
                if let Some(e) = error_status(e) {
                    let _ = tx.send(Ok(Bytes::from(watch_error_line(e)))).await;
                }
                None
            }
        },
    }
}

/// What each watch event carries.
#[derive(Clone)]
pub(super) enum WatchShape {
    Object,
    /// A one-row Table, with the `includeObject` setting.
    Table(String),
}

/// Streams watch events (`{"type","object"}` lines) for `kind` after `from` (or, without a
/// resourceVersion, the current objects as ADDED first), until the client goes, shutdown, or
/// `timeout` (`timeoutSeconds`) has passed: then the stream ends cleanly, as Kubernetes ends
/// a watch whose time is up, and the client watches again from its last resourceVersion.
pub(super) fn watch(
    st: &ApiState,
    kind: Kind,
    labels: LabelQuery,
    fields: FieldQuery,
    from: Option<u64>,
    shape: WatchShape,
    timeout: Option<Duration>,
) -> Response {
    let hub = st.hub.clone();
    let shutdown = st.shutdown.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let keys = hub.keys().clone();
    // A watch that pins a name (`fieldSelector=metadata.name=...`, as every node daemon's)
    // skips other objects' events before looking at them.
    let only = fields.key(kind);
    // Objects the client currently sees through its selectors: an object that starts matching
    // is ADDED, one that stops matching is DELETED, as the Kubernetes watch cache does.
    let mut members: std::collections::HashSet<String> = std::collections::HashSet::new();
    // One watch line for `obj`, or none when the client does not see the change. `shared` is
    // the published event's watch object, whose text is serialized once for every watcher.
    let mut line = move |t: &str, obj: &Value, shared: Option<&crate::command::WatchObject>| -> Option<Bytes> {
        let key = crate::command::object_key(kind, obj);
        let name = key.as_str();
        let matches = labels.matches(obj) && fields.matches(obj);
        let was = members.contains(name);
        let t = match (t, matches, was) {
            ("DELETED", _, true) => {
                members.remove(name);
                "DELETED"
            }
            ("DELETED", _, false) => return None,
            (_, true, false) => {
                members.insert(name.to_string());
                "ADDED"
            }
            (t, true, true) => t,
            (_, false, true) => {
                members.remove(name);
                "DELETED"
            }
            (_, false, false) => return None,
        };
        let s = match &shape {
            WatchShape::Object => match shared {
                Some(w) => format!("{{\"type\":\"{t}\",\"object\":{}}}\n", w.json()),
                None => format!("{{\"type\":\"{t}\",\"object\":{obj}}}\n"),
            },
            WatchShape::Table(include) => {
                let rv = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let mut s = format!("{{\"type\":\"{t}\",\"object\":").into_bytes();
                s.extend_from_slice(&table::of_object(kind, obj, &keys, rv, include));
                s.extend_from_slice(b"}\n");
                return Some(Bytes::from(s));
            }
        };
        Some(Bytes::from(s))
    };
    let stream = async move {
        let last = match from {
            Some(rv) => {
                // What the client saw at `rv`: it is told of later entries and exits only.
                // The blocking task holds the hub, not a store clone: `stop` waits for the
                // hub's holders, so the data dir is released only once it is done.
                let (h, only) = (hub.clone(), only.clone());
                let then = tokio::task::spawn_blocking(move || objects_at(&h, kind, rv, only.as_deref())).await;
                // Without what the client held at `rv`, the changes after it cannot be told
                // right (a deletion would be dropped): the watch ends with the error instead.
                let failed = match then {
                    Ok(Ok(objects)) => {
                        for o in &objects {
                            let _ = line("PRIMING", o, None);
                        }
                        None
                    }
                    Ok(Err(e)) => Some(store_error(e)),
                    Err(e) => Some(ApiError::internal(e.to_string())),
                };
                if let Some(e) = failed {
                    tracing::warn!(error = %e.message, "watch: cannot read the objects at {rv}");
                    let _ = tx.send(Ok(Bytes::from(watch_error_line(e)))).await;
                    return;
                }
                rv
            }
            None => {
                let (objs, seq) = {
                    let s = hub.state();
                    let objs = match only.as_deref() {
                        Some(n) => s.get_json(kind, n).into_iter().collect(),
                        None => s.list_json(kind),
                    };
                    (objs, s.seq)
                };
                for o in &objs {
                    if let Some(b) = line("ADDED", o, None) {
                        if tx.send(Ok(b)).await.is_err() {
                            return;
                        }
                    }
                }
                seq
            }
        };
        let mut follower = match &only {
            Some(n) => Follower::pinned(hub.clone(), last, kind, n.clone()),
            None => Follower::new(hub.clone(), last),
        };
        loop {
            let Some(events) = next_for_watch(&mut follower, &tx, &shutdown).await else {
                return;
            };
            for ev in events {
                if ev.object_kind != kind.as_str() || only.as_deref().is_some_and(|n| n != ev.name) {
                    continue;
                }
                let Some(w) = ev.watch_object() else { continue };
                if let Some(b) = line(w.watch_type, &w.object, Some(w)) {
                    if tx.send(Ok(b)).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    spawn_stream(st, timeout, stream);
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
