//! The Status answers of reads at a point of the log: a store error as the API answers it
//! (a point before the retained history is Kubernetes' 410 Expired), and a rendered config the
//! history does not hold. A leaf: the surfaces that read the log (history, diffs, rollbacks,
//! list pages, watches) all map their errors here.

use super::ApiError;
use crate::query::RenderedAtError;
use crate::store::StoreError;
use axum::http::StatusCode;
use serde_json::json;

/// 410 Expired, as Kubernetes answers a read before the retained history.
pub fn expired(seq: u64, oldest: u64) -> ApiError {
    ApiError {
        code: StatusCode::GONE,
        reason: "Expired",
        message: format!("too old resource version: {seq} ({oldest})"),
        details: json!({}),
    }
}

/// A store error as the API answers it (Compacted is 410 Expired).
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Compacted { seq, oldest } => expired(seq, oldest),
        other => ApiError::internal(other),
    }
}

/// A [`crate::query::rendered_at`] error as the API answers it: the store's error
/// ([`store_error`]), 404 for a rendered config the history does not hold, 400 for a logged
/// body that does not decode.
pub fn rendered_at_error(e: RenderedAtError) -> ApiError {
    match e {
        RenderedAtError::Store(e) => store_error(e),
        e @ RenderedAtError::Unknown(_) => ApiError {
            code: StatusCode::NOT_FOUND,
            reason: "NotFound",
            message: e.to_string(),
            details: json!({}),
        },
        RenderedAtError::Decode(e) => ApiError::bad_request(e.to_string()),
    }
}
