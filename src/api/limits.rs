//! Request size limits, as the Kubernetes API server applies them.
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

/// Middleware: buffers the request body up to `limit` bytes and passes it on; a larger body
/// (announced by `Content-Length` or found while reading) is drained and answered with 413.
pub async fn limit_body(State(limit): State<usize>, req: Request, next: Next) -> Response {
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
    next.run(Request::from_parts(parts, Body::from(Bytes::from(buf)))).await
}
