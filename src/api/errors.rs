//! Kubernetes `Status` error bodies and their HTTP codes.

use crate::command::CommandError;
use crate::model::Kind;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// An API failure rendered as a `Status` object (`kind: Status, status: Failure`).
#[derive(Debug)]
pub struct ApiError {
    pub code: StatusCode,
    /// Kubernetes reason: `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
    pub details: Value,
}

/// `machineconfigs.machineconfiguration.openshift.io`, or `nodes` for the core group: the
/// resource name Kubernetes puts in its messages.
fn resource(kind: Kind, group: &str) -> String {
    match kind {
        Kind::Node => "nodes".into(),
        k => format!("{}.{}", k.plural(), k.group(group)),
    }
}

impl ApiError {
    /// 401, exactly as kube-apiserver answers a request without valid credentials
    /// (`k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go`: message and reason
    /// `Unauthorized`, empty `metadata`, no details).
    pub fn unauthorized() -> ApiError {
        ApiError {
            code: StatusCode::UNAUTHORIZED,
            reason: "Unauthorized",
            message: "Unauthorized".into(),
            details: Value::Null,
        }
    }

    /// 403 of a request the authorizer denied: `message` from
    /// [`crate::auth::forbidden_message`], details `{name, group, kind: <resource>}` as
    /// `errors.NewForbidden` fills them (empty fields left out).
    pub fn forbidden(message: String, a: &crate::auth::Attributes) -> ApiError {
        let mut details = serde_json::Map::new();
        for (k, v) in [("name", &a.name), ("group", &a.group), ("kind", &a.resource)] {
            if !v.is_empty() {
                details.insert(k.into(), json!(v));
            }
        }
        ApiError {
            code: StatusCode::FORBIDDEN,
            reason: "Forbidden",
            message,
            details: Value::Object(details),
        }
    }

    pub fn not_found_path() -> ApiError {
        ApiError {
            code: StatusCode::NOT_FOUND,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: json!({}),
        }
    }

    /// 500 InternalError, with kube-apiserver's "Internal error occurred: " prefix.
    pub fn internal(message: impl std::fmt::Display) -> ApiError {
        ApiError {
            code: StatusCode::INTERNAL_SERVER_ERROR,
            reason: "InternalError",
            message: format!("Internal error occurred: {message}"),
            details: json!({}),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            code: StatusCode::BAD_REQUEST,
            reason: "BadRequest",
            message: message.into(),
            details: json!({}),
        }
    }

    /// A JSON patch whose operations do not apply to the stored object (a failed `test`, a
    /// `remove` or `replace` of a missing path): 422 as kube-apiserver answers it
    /// (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go` `applyJSPatch`:
    /// `NewGenericServerResponse(422, …)`), its message kube's fixed text and the patch
    /// library's error as the cause (`UnexpectedServerResponse`).
    pub fn patch_does_not_apply(cause: impl Into<String>) -> ApiError {
        ApiError {
            code: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message: "the server rejected our request due to an error in our request".into(),
            details: json!({"causes": [{"reason": "UnexpectedServerResponse", "message": cause.into()}]}),
        }
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError {
            code: StatusCode::METHOD_NOT_ALLOWED,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: json!({}),
        }
    }

    /// 415 for a patch type the kind does not take; Kubernetes' wording (strategic merge patch
    /// is refused for custom resources, as for MCO's CRDs).
    pub fn unsupported_patch(kind: &str) -> ApiError {
        let accepted = if kind == "Node" {
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
        } else {
            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        };
        ApiError {
            code: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            reason: "UnsupportedMediaType",
            message: format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
            details: json!({}),
        }
    }

    /// 409 for a server-side apply conflict, one cause per conflicting field.
    pub fn apply_conflict(c: &crate::api::fields::Conflicts) -> ApiError {
        ApiError {
            code: StatusCode::CONFLICT,
            reason: "Conflict",
            message: c.message(),
            details: json!({"causes": c.0.iter().map(|(m, v, p)| json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {m:?} using {v}"),
                "field": format!(".{}", p.join(".")),
            })).collect::<Vec<_>>()}),
        }
    }

    /// Maps a command failure onto the Kubernetes reason, code and message wording.
    pub fn from_command(e: CommandError, group: &str) -> ApiError {
        match e {
            CommandError::NotFound { kind, name } => {
                let name = crate::model::key_name(&name);
                ApiError {
                    code: StatusCode::NOT_FOUND,
                    reason: "NotFound",
                    message: format!("{} {name:?} not found", resource(kind, group)),
                    details: json!({"name": name, "group": group_of(kind, group), "kind": kind.plural()}),
                }
            }
            CommandError::AlreadyExists { kind, name } => {
                let name = crate::model::key_name(&name);
                ApiError {
                    code: StatusCode::CONFLICT,
                    reason: "AlreadyExists",
                    message: format!("{} {name:?} already exists", resource(kind, group)),
                    details: json!({"name": name, "group": group_of(kind, group), "kind": kind.plural()}),
                }
            }
            CommandError::Conflict { kind, name, message } => {
                let name = crate::model::key_name(&name);
                ApiError {
                    code: StatusCode::CONFLICT,
                    reason: "Conflict",
                    message: format!(
                        "Operation cannot be fulfilled on {} {name:?}: {message}",
                        resource(kind, group)
                    ),
                    details: json!({"name": name, "group": group_of(kind, group), "kind": kind.plural()}),
                }
            }
            e @ CommandError::TooLarge { .. } => crate::api::limits::too_large(e),
            CommandError::Invalid(inv) => {
                let kind = Kind::parse(&inv.kind);
                let qualified = match kind {
                    Some(Kind::Node) | None => inv.kind.clone(),
                    Some(k) => format!("{}.{}", inv.kind, k.group(group)),
                };
                let list: Vec<String> = inv
                    .causes
                    .iter()
                    .map(|c| {
                        if c.field.is_empty() {
                            c.message.clone()
                        } else {
                            format!("{}: {}", c.field, c.message)
                        }
                    })
                    .collect();
                let joined = if list.len() == 1 {
                    list[0].clone()
                } else {
                    format!("[{}]", list.join(", "))
                };
                ApiError {
                    code: StatusCode::UNPROCESSABLE_ENTITY,
                    reason: "Invalid",
                    message: format!("{qualified} {:?} is invalid: {joined}", inv.name),
                    details: json!({
                        "name": inv.name,
                        "group": kind.map(|k| group_of(k, group)).unwrap_or_default(),
                        "kind": inv.kind,
                        "causes": inv.causes.iter().map(|c| json!({"reason": cause_reason(&c.message), "message": c.message, "field": c.field})).collect::<Vec<_>>(),
                    }),
                }
            }
            CommandError::BadRequest(m) => ApiError::bad_request(m),
            CommandError::Forbidden { kind, name, message } => {
                let name = crate::model::key_name(&name);
                ApiError {
                    code: StatusCode::FORBIDDEN,
                    reason: "Forbidden",
                    message: format!("{} {name:?} is forbidden: {message}", resource(kind, group)),
                    details: json!({"name": name, "group": group_of(kind, group), "kind": kind.plural()}),
                }
            }
            // etcd unreachable (no quorum, a partition) or this server deposed: the write was
            // not acknowledged and may succeed on retry, against this server or the new writer.
            CommandError::Store(
                e @ (crate::store::StoreError::Etcd(_)
                | crate::store::StoreError::Fenced { .. }
                | crate::store::StoreError::HeadMoved { .. }),
            ) => ApiError {
                code: StatusCode::SERVICE_UNAVAILABLE,
                reason: "ServiceUnavailable",
                message: format!("the event log is unavailable: {e}"),
                details: json!({}),
            },
            CommandError::Store(e) => ApiError {
                code: StatusCode::INTERNAL_SERVER_ERROR,
                reason: "InternalError",
                message: format!("Internal error occurred: {e}"),
                details: json!({}),
            },
            e @ CommandError::InsufficientStorage { .. } => ApiError {
                code: StatusCode::INTERNAL_SERVER_ERROR,
                reason: "InternalError",
                message: format!("Internal error occurred: {e}"),
                details: json!({}),
            },
        }
    }
}

/// The `StatusCause` reason Kubernetes gives a field error, read from the error type that
/// starts its message (`field.ErrorType.String()`, apimachinery `validation/field/errors.go`):
/// `Required value` is `FieldValueRequired`, `Forbidden` is `FieldValueForbidden`, and so on;
/// other messages (Ignition's and MCO's rules) are `FieldValueInvalid`.
fn cause_reason(message: &str) -> &'static str {
    const TYPES: [(&str, &str); 7] = [
        ("Required value", "FieldValueRequired"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Not found", "FieldValueNotFound"),
    ];
    TYPES
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or("FieldValueInvalid", |(_, reason)| reason)
}

fn group_of(kind: Kind, group: &str) -> String {
    kind.group(group)
}

/// Middleware: a 405 without a body (axum's answer for a method a route has no handler for,
/// e.g. `GET .../store/compactions`) becomes the Kubernetes Status every other 405 is
/// (`reason: MethodNotAllowed`, [`ApiError::method_not_allowed`]), keeping axum's `Allow` header
/// listing the methods the route takes.
pub async fn status_for_bare_405(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let res = next.run(req).await;
    if res.status() != StatusCode::METHOD_NOT_ALLOWED || res.headers().contains_key(axum::http::header::CONTENT_TYPE) {
        return res;
    }
    let allow = res.headers().get(axum::http::header::ALLOW).cloned();
    let mut status = ApiError::method_not_allowed().into_response();
    if let Some(allow) = allow {
        status.headers_mut().insert(axum::http::header::ALLOW, allow);
    }
    status
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "details": self.details, "code": self.code.as_u16(),
        });
        if self.details.is_null() {
            // kube-apiserver's 401 has no details at all.
            body.as_object_mut().expect("object").remove("details");
        }
        (self.code, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::cause_reason;

    #[test]
    fn cause_reasons_follow_the_field_error_type() {
        for (message, reason) in [
            ("Required value: name or generateName is required", "FieldValueRequired"),
            (
                "Forbidden: may not be specified when `operator` is 'Exists'",
                "FieldValueForbidden",
            ),
            ("Too long: must have at most 262144 bytes", "FieldValueTooLong"),
            (
                "Unsupported value: \"x\": supported values: \"In\"",
                "FieldValueNotSupported",
            ),
            (
                "Invalid value: \"Bad_Node\": a lowercase RFC 1123 subdomain",
                "FieldValueInvalid",
            ),
            (
                "invalid mode 01204 for /etc/foo, cannot exceed 0777",
                "FieldValueInvalid",
            ),
        ] {
            assert_eq!(cause_reason(message), reason, "{message}");
        }
    }
}
