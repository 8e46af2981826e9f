//! The shared task helpers of the handlers: [`spawn_stream`] runs the task behind a watch
//! (ended at shutdown or its `timeoutSeconds`, its panics counted), [`off_runtime`] runs store
//! scans on the blocking pool, [`watch_timeout`] parses `timeoutSeconds`, and [`catch_panics`]
//! is the layer answering a panicking handler with a 500 Status.

use super::{ApiError, ApiState};
use axum::body::Body;
use axum::response::IntoResponse;
use std::sync::Arc;
use std::time::Duration;

/// Runs the task behind a streaming answer (a watch) until it ends or the server shuts down,
/// whichever comes first: a client that stops reading, leaving the task waiting for room in its
/// channel, must not keep the hub (and the data dir's lock) after [`ApiState::shutdown`].
/// Tracked in [`ApiState::tasks`] so that stopping the server waits for it.
///
/// With a `timeout` (a watch's `timeoutSeconds`) the task is dropped once it has passed:
/// dropping it drops its sender, so the body ends cleanly after what was sent, as Kubernetes
/// ends a watch whose time is up (the client watches again from its last resourceVersion).
pub(crate) fn spawn_stream<F>(st: &ApiState, timeout: Option<Duration>, task: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let shutdown = st.shutdown.clone();
    let metrics = st.hub.metrics().clone();
    st.tasks.spawn(async move {
        let expired = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        // A panic in the stream ends it (the client sees the body end) and is counted as a
        // handler's would be.
        let task = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(task));
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = expired => {}
            r = task => if let Err(panic) = r {
                tracing::error!(panic = %panic_message(&*panic), "a watch stream panicked");
                metrics.handler_panicked();
            }
        }
    });
}

/// The text of a panic's payload (`panic!("...")` gives a `&str` or a `String`).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The layer that answers a request whose handler or middleware panicked with
/// kube-apiserver's 500 `InternalError` Status (its `WithPanicRecovery` filter, in
/// `k8s.io/apiserver/pkg/server/filters`), logs the panic and counts it in `metrics`
/// (`mco_api_handler_panics_total`): the process and the other requests carry on.
pub(crate) fn catch_panics(
    metrics: Arc<crate::metrics::Metrics>,
) -> tower_http::catch_panic::CatchPanicLayer<impl tower_http::catch_panic::ResponseForPanic<ResponseBody = Body>> {
    tower_http::catch_panic::CatchPanicLayer::custom(move |panic: Box<dyn std::any::Any + Send + 'static>| {
        let message = panic_message(&*panic);
        tracing::error!(panic = %message, "a request handler panicked");
        metrics.handler_panicked();
        ApiError::internal("the request handler panicked (counted in mco_api_handler_panics_total)").into_response()
    })
}

/// A watch's `timeoutSeconds` (Kubernetes' ListOptions; client-go's reflectors send 5–10
/// minutes): absent, empty or 0 is no limit (mco has no `--min-request-timeout`); negative
/// ends the watch at once, as a Go timer of a negative duration fires at once.
///
/// Errors: 400 naming the parameter when it is not an integer.
pub(crate) fn watch_timeout(raw: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some(raw) = raw.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let secs: i64 = raw
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid value {raw:?} for timeoutSeconds: not an integer")))?;
    Ok(match secs {
        0 => None,
        s if s < 0 => Some(Duration::ZERO),
        s => Some(Duration::from_secs(s.unsigned_abs())),
    })
}

/// Runs a store scan or other long synchronous work (history queries, time-travel
/// `state_at`, diffs) on tokio's blocking pool, so that no request handler holds an async
/// worker thread while it reads the log. A panic in `f` is re-raised in the handler, where
/// [`catch_panics`] answers 500 InternalError and counts it.
pub(crate) async fn off_runtime<T, F>(f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        // Re-raised in the handler, so that the panic layer ([`catch_panics`]) answers and
        // counts it like any other.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ApiError::internal(e)),
    }
}
