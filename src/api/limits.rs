//! Request limits, as the Kubernetes API server applies them, and the Status each gets.
//!
//! Also owns the JSON nesting check of every JSON body (400 BadRequest, before any handler
//! parses it; [`crate::limits::check_json_depth`]), the JSON patch operation limit
//! (kube-apiserver's 10,000, 413), the objects-per-preview limit (413) and the count of open
//! watches per client (429 TooManyRequests, [`WatchCounter`]).
//!
//! Owns the request body limit (kube-apiserver `--max-request-body-bytes`, 3 MiB by default):
//! a larger body is answered with Kubernetes' `Status` (`reason: RequestEntityTooLarge`, code
//! 413, `Request entity too large: limit is N`) only after the body has been read to its end, so
//! that a client still writing it sees the Status instead of a broken pipe or a reset
//! connection. It must not parse bodies (the handlers do) nor judge object sizes (the command
//! layer does, [`crate::command::MAX_OBJECT_BYTES`]).

use super::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;

/// kube-apiserver's default `--max-request-body-bytes` (3 MiB).
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How much of an oversized body is read and thrown away so the client can finish sending
/// before the answer (clients such as `kubectl apply` send twice the manifest, with its
/// last-applied annotation): beyond it, or after [`MAX_DRAIN_TIME`], the connection is closed
/// after the Status (the client may then see a reset, as with any server).
const MAX_DRAINED_BYTES: usize = 1024 * 1024 * 1024;

/// How long an oversized body is drained at most.
const MAX_DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(30);

/// Kubernetes' `NewRequestEntityTooLargeError`.
pub fn too_large(detail: impl std::fmt::Display) -> ApiError {
    ApiError {
        code: StatusCode::PAYLOAD_TOO_LARGE,
        reason: "RequestEntityTooLarge",
        message: format!("Request entity too large: {detail}"),
        details: json!({}),
    }
}

/// What [`limit_body`] holds a body to.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Bytes ([`DEFAULT_MAX_REQUEST_BODY_BYTES`]).
    pub max_body: usize,
    /// Nesting of a JSON body ([`crate::limits::Limits::max_json_depth`]).
    pub max_json_depth: usize,
}

/// Middleware: buffers the request body up to `limits.max_body` bytes and passes it on; a
/// larger body (announced by `Content-Length` or found while reading) is drained and answered
/// with 413. A JSON body (a `*json` content type, or none) nesting deeper than
/// `limits.max_json_depth` is answered with 400 BadRequest, `the request body is not valid
/// JSON: the JSON nests deeper than the limit of N levels (at byte B) (--max-json-depth)`.
pub async fn limit_body(State(limits): State<BodyLimits>, req: Request, next: Next) -> Response {
    let limit = limits.max_body;
    let (parts, body) = req.into_parts();
    let announced = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = body.into_data_stream();
    let mut buf = Vec::new();
    let mut over = announced.is_some_and(|n| n > limit as u64);
    let mut drained = 0usize;
    let deadline = tokio::time::Instant::now() + MAX_DRAIN_TIME;
    let close = || {
        let mut resp = too_large(format!("limit is {limit}")).into_response();
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        resp
    };
    loop {
        let next_chunk = if over {
            // Draining: bounded in time as well as in bytes.
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(c) => c,
                Err(_) => return close(),
            }
        } else {
            stream.next().await
        };
        let Some(chunk) = next_chunk else { break };
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => return ApiError::bad_request(format!("reading the request body: {e}")).into_response(),
        };
        if !over && buf.len() + chunk.len() > limit {
            over = true;
            drained = buf.len();
            buf = Vec::new();
        }
        if over {
            drained += chunk.len();
            if drained > MAX_DRAINED_BYTES {
                return close();
            }
        } else {
            buf.extend_from_slice(&chunk);
        }
    }
    if over {
        return too_large(format!("limit is {limit}")).into_response();
    }
    let media = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if media.is_empty() || media.ends_with("json") {
        if let Err(e) = crate::limits::check_json_depth(&buf, limits.max_json_depth) {
            return ApiError::bad_request(format!("the request body is not valid JSON: {e} (--max-json-depth)"))
                .into_response();
        }
    }
    next.run(Request::from_parts(parts, Body::from(Bytes::from(buf)))).await
}

/// kube-apiserver's limit on the operations of one JSON patch
/// ([`crate::limits::MAX_JSON_PATCH_OPERATIONS`]): 413 `Request entity too large: The allowed
/// maximum operations in a JSON patch is 10000, got N`.
pub fn check_json_patch(patch: &json_patch::Patch) -> Result<(), ApiError> {
    let n = patch.0.len();
    if n > crate::limits::MAX_JSON_PATCH_OPERATIONS {
        return Err(too_large(format!(
            "The allowed maximum operations in a JSON patch is {}, got {n}",
            crate::limits::MAX_JSON_PATCH_OPERATIONS
        )));
    }
    Ok(())
}

/// [`crate::limits::Limits::max_documents`] for one request carrying several objects (a
/// preview): 413 `Request entity too large: N objects in one request, the limit is M per apply
/// (--max-documents)`.
pub fn check_documents(n: usize, limit: usize) -> Result<(), ApiError> {
    if n > limit {
        return Err(too_large(format!(
            "{n} objects in one request, the limit is {limit} per apply (--max-documents)"
        )));
    }
    Ok(())
}

/// Middleware: a request whose line and headers ([`crate::limits::header_bytes`], the URL
/// included) exceed [`crate::limits::Limits::max_header_bytes`] is answered 431 with a Status
/// (`reason: RequestHeaderFieldsTooLarge`, `Request header fields too large: the request line
/// and headers are N bytes, the limit is M (--max-header-bytes)`), before authentication.
/// Go's server, which kube-apiserver runs on, answers the same code as plain text; requests
/// beyond the connection's read buffer get the HTTP layer's bare 431 (`listen.rs`).
pub async fn limit_headers(State(st): State<super::ApiState>, req: Request, next: Next) -> Response {
    let limit = st.hub.limits().max_header_bytes;
    let uri = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let n = crate::limits::header_bytes(
        req.method().as_str(),
        uri,
        req.headers().iter().map(|(k, v)| (k.as_str().len(), v.len())),
    );
    if n > limit {
        return ApiError {
            code: StatusCode::from_u16(431).expect("a valid code"),
            reason: "RequestHeaderFieldsTooLarge",
            message: format!(
                "Request header fields too large: the request line and headers are {n} bytes, the limit is {limit} (--max-header-bytes)"
            ),
            details: json!({}),
        }
        .into_response();
    }
    next.run(req).await
}

/// Middleware: a request with `watch=true` (or `1`) in its query takes a place among its
/// client's open watches ([`WatchCounter::acquire`], the client being the authenticated
/// identity, [`crate::auth::User::name`], never a header the caller declares) or gets 429; the place is held by the response body, so it is freed
/// when the stream ends or the client goes away. Covers every watch the API serves (objects,
/// history events, core Events).
pub async fn limit_watches(State(st): State<super::ApiState>, req: Request, next: Next) -> Response {
    let watching = req.uri().query().is_some_and(|q| {
        q.split('&')
            .any(|kv| matches!(kv.split_once('='), Some(("watch", "true" | "1"))))
    });
    if !watching {
        return next.run(req).await;
    }
    // Authentication runs first (an outer layer); a request without a user never gets here.
    let user = req.extensions().get::<crate::auth::User>().cloned();
    let client = user
        .as_ref()
        .map_or_else(|| "anonymous".to_string(), |u| u.name.clone());
    let slot = match st.watches.acquire(&client, st.hub.limits().max_watches_per_client) {
        Ok(s) => s,
        Err(e) => return e.into_response(),
    };
    let (parts, body) = next.run(req).await.into_parts();
    let held = body.into_data_stream().map(move |chunk| {
        let _ = &slot;
        chunk
    });
    // A revoked token's watches end at once (the client's next request gets 401), so revoking
    // a dashboard's reader token stops what it reads.
    let revoked = revoked(st.hub.clone(), user.map(|u| u.token_id));
    Response::from_parts(parts, Body::from_stream(held.take_until(revoked)))
}

/// Completes when the token `token_id` is no longer in force (revoked: `TokenRevoked`); never
/// without a token.
async fn revoked(hub: std::sync::Arc<crate::command::Hub>, token_id: Option<String>) {
    let Some(id) = token_id else {
        return std::future::pending().await;
    };
    let mut revocations = hub.revocations();
    while hub.state().tokens.contains_key(&id) {
        if revocations.changed().await.is_err() {
            // The hub is gone (shutdown): the shutdown ends the stream anyway.
            return std::future::pending().await;
        }
    }
}

/// Open watches per client (the authenticated identity, [`crate::auth::User::name`]): shared by the
/// handlers; a [`WatchSlot`] gives its place back when the watch ends.
#[derive(Clone, Debug, Default)]
pub struct WatchCounter(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>);

/// One open watch of one client; dropping it (the stream ended) frees the place.
#[derive(Debug)]
pub struct WatchSlot {
    counter: WatchCounter,
    client: String,
}

impl WatchCounter {
    /// Takes a place for a new watch of `client`, if it holds fewer than `limit`.
    ///
    /// Errors: 429 TooManyRequests (Kubernetes' `NewTooManyRequests`, with
    /// `retryAfterSeconds: 1`), `Too many requests: client "X" already has N open watches, the
    /// limit is N per client (--max-watches-per-client)`.
    pub fn acquire(&self, client: &str, limit: usize) -> Result<WatchSlot, ApiError> {
        let mut open = self.0.lock().expect("watch counter lock");
        let n = open.entry(client.to_string()).or_insert(0);
        if *n >= limit {
            return Err(ApiError {
                code: StatusCode::TOO_MANY_REQUESTS,
                reason: "TooManyRequests",
                message: format!(
                    "Too many requests: client {client:?} already has {n} open watches, the limit is {limit} per client (--max-watches-per-client)"
                ),
                details: json!({"retryAfterSeconds": 1}),
            });
        }
        *n += 1;
        Ok(WatchSlot {
            counter: self.clone(),
            client: client.to_string(),
        })
    }

    /// Watches `client` holds open now.
    pub fn open(&self, client: &str) -> usize {
        self.0
            .lock()
            .expect("watch counter lock")
            .get(client)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.counter.0.lock().expect("watch counter lock");
        if let Some(n) = open.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.client);
            }
        }
    }
}
