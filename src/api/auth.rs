//! The HTTP side of authentication and authorization ([`crate::auth`] holds the rules).
//!
//! Owns the middleware every route passes ([`authenticate`]: bearer token → [`User`] in the
//! request's extensions, or kube-apiserver's 401; the request's authorizer attributes
//! ([`attributes`]) → its 403), the public paths (health, version, the dashboard's static
//! files), the token API (`/apis/auth.mco.dev/v1/tokens`: issue, list, get, revoke; admin
//! only) and Kubernetes' self reviews (`selfsubjectaccessreviews` for `kubectl auth can-i`,
//! `selfsubjectreviews` for `kubectl auth whoami`) with their discovery documents, and the
//! issuing of the tokens in the credential files a server writes for its own operators and
//! sandbox nodes ([`crate::credentials`]).

use super::{ApiError, ApiState};
use crate::auth::{self, Attributes, TokenKind, TokenRecord, User};
use crate::command::Actor;
use crate::credentials::{node_token_file, read_secret_file, write_secret_file, ADMIN_TOKEN_FILE};
use crate::event::EventType;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{json, Value};

/// Paths answered without credentials: health and version (Kubernetes' `system:public-info-viewer`
/// allows them unauthenticated) and the dashboard's static files (`/`, `/ui`, `/ui/...`), which
/// hold no data: every API call the page makes carries the token.
pub fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/livez" | "/version" | "/version/" | "/" | "/ui"
    ) || path.starts_with("/ui/")
}

/// The bearer token of a request (`Authorization: Bearer <token>`; the scheme is
/// case-insensitive, as in kube-apiserver).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The user a bearer token authenticates, if it is a token in force now (a revoked one is gone
/// from the state from the event that revoked it on). Looked up by SHA-256: the secret itself
/// is never compared.
pub fn user_of(st: &ApiState, token: &str) -> Option<User> {
    let hash = auth::hash(token);
    st.hub.state().token_by_hash(&hash).map(User::of)
}

/// Middleware: authenticates (401 `Unauthorized` without a token in force), impersonates
/// ([`impersonate`]: 400 or 403 as kube-apiserver), authorizes (403 with kube-apiserver's
/// message) and puts the [`User`] the request runs as in its extensions for the handlers.
/// Public paths ([`is_public`]) pass without credentials.
pub async fn authenticate(
    State(st): State<ApiState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = req.uri().path().to_string();
    let user = bearer(req.headers()).and_then(|t| user_of(&st, t));
    let user = match user.map(|u| impersonate(u, req.headers())).transpose() {
        Ok(u) => u,
        Err(e) => {
            drain_refused(req, st.max_request_body_bytes).await;
            return e.into_response();
        }
    };
    if is_public(&path) {
        if let Some(u) = user {
            req.extensions_mut().insert(u);
        }
        return next.run(req).await;
    }
    let Some(user) = user else {
        drain_refused(req, st.max_request_body_bytes).await;
        return ApiError::unauthorized().into_response();
    };
    let attrs = attributes(req.method(), &path, req.uri().query().unwrap_or(""));
    if !auth::authorize(&user, &attrs) {
        tracing::info!(user = %user.name, verb = %attrs.verb, resource = %attrs.resource, name = %attrs.name, path = %path, "forbidden");
        drain_refused(req, st.max_request_body_bytes).await;
        return ApiError::forbidden(auth::forbidden_message(&user, &attrs), &attrs).into_response();
    }
    req.extensions_mut().insert(user);
    next.run(req).await
}

/// The user a request runs as: `user`, or the one its impersonation headers name
/// ([`auth::Impersonation`]), which `user` must be allowed to impersonate (the `impersonate`
/// verb on each of `users`, `groups`, `userextras`, `uids`: admins only), as kube-apiserver's
/// impersonation filter decides (`k8s.io/apiserver/pkg/endpoints/filters/impersonation.go`).
/// The request is then authorized, admitted (NodeRestriction for a node identity) and
/// recorded (`admin as alice`) as that user.
///
/// Errors: 400 for groups, extra or a uid without a user; 403 with kube-apiserver's message
/// for the first thing `user` may not impersonate (`users "alice" is forbidden: User "reader"
/// cannot impersonate resource "users" in API group "" at the cluster scope`).
pub fn impersonate(user: User, headers: &HeaderMap) -> Result<User, ApiError> {
    let pairs = headers
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("impersonate-"))
        .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)));
    let Some(imp) = auth::Impersonation::from_headers(pairs).map_err(ApiError::bad_request)? else {
        return Ok(user);
    };
    for (_, attrs) in imp.checks() {
        if !auth::authorize(&user, &attrs) {
            tracing::info!(user = %user.name, resource = %attrs.resource, name = %attrs.name, "impersonation forbidden");
            return Err(ApiError::forbidden(auth::forbidden_message(&user, &attrs), &attrs));
        }
    }
    let as_user = user.impersonating(&imp);
    tracing::debug!(user = %user.name, as_user = %as_user.name, groups = ?as_user.groups, "impersonating");
    Ok(as_user)
}

/// How long a refused request's body is read at most before the 401/403 is sent.
const DRAIN_ON_REFUSAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads and drops a refused request's body, up to the request body limit (`limit` bytes) and
/// for at most [`DRAIN_ON_REFUSAL`], before the answer, as the 413 does: a client still sending
/// its body when the answer and the stream's reset (HTTP/2) or the close (HTTP/1.1) arrive
/// reports a framing error or a broken pipe instead of the Status.
async fn drain_refused(req: axum::extract::Request, limit: usize) {
    let body = req.into_body();
    let _ = tokio::time::timeout(DRAIN_ON_REFUSAL, axum::body::to_bytes(body, limit)).await;
}

/// The authorizer attributes of a request, as kube-apiserver's `RequestInfoResolver` derives
/// them: `/api/v1/<resource>[/<name>[/<subresource>]]` and
/// `/apis/<group>/<version>/<resource>...` (with `namespaces/<ns>/` skipped) are resource
/// requests whose verb comes from the method (GET or HEAD of a collection is `list`, or
/// `watch` with `watch=true`; DELETE of a collection is `deletecollection`); every other path
/// is a non-resource request with the lower-case method as its verb (`get` for HEAD too).
pub fn attributes(method: &Method, path: &str, query: &str) -> Attributes {
    // HEAD is GET without the body: allowed wherever GET is (a bootstrap token's
    // `HEAD /config/worker`, a reader's `HEAD /metrics`).
    let non_resource = || {
        let verb = if method == Method::HEAD {
            "get".to_string()
        } else {
            method.as_str().to_ascii_lowercase()
        };
        Attributes::path(&verb, path)
    };
    let (group, rest) = if let Some(r) = path.strip_prefix("/api/v1/") {
        ("", r)
    } else if let Some(r) = path.strip_prefix("/apis/") {
        let mut it = r.splitn(3, '/');
        match (it.next(), it.next(), it.next()) {
            (Some(g), Some(_v), Some(rest)) if !rest.is_empty() => (g, rest),
            _ => return non_resource(),
        }
    } else {
        return non_resource();
    };
    let decoded: Vec<String> = rest
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let mut segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let mut namespace = String::new();
    if segs.len() >= 3 && segs[0] == "namespaces" {
        namespace = segs[1].to_string();
        segs.drain(..2);
    }
    let Some(resource) = segs.first().copied() else {
        return non_resource();
    };
    let name = segs.get(1).copied().unwrap_or("");
    let sub = segs.get(2..).map(|s| s.join("/")).unwrap_or_default();
    let watch = query
        .split('&')
        .any(|kv| matches!(kv, "watch=true" | "watch=1" | "watch=True"));
    let lower;
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET" | "HEAD", true) if watch => "watch",
        ("GET" | "HEAD", true) => "list",
        ("GET" | "HEAD", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (m, _) => {
            lower = m.to_ascii_lowercase();
            &lower
        }
    };
    Attributes {
        namespace,
        ..Attributes::resource(verb, group, resource, &sub, name)
    }
}

/// Routes of the token API and the self reviews (merged into the API router).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            "/apis/auth.mco.dev",
            get(|| async { Json(super::discovery::group(auth::GROUP, "")) }),
        )
        .route("/apis/auth.mco.dev/v1", get(|| async { Json(tokens_discovery()) }))
        .route("/apis/auth.mco.dev/v1/tokens", get(list_tokens).post(create_token))
        .route("/apis/auth.mco.dev/v1/tokens/{id}", get(get_token).delete(revoke_token))
        .route(
            "/apis/authorization.k8s.io",
            get(|| async { Json(super::discovery::group("authorization.k8s.io", "")) }),
        )
        .route(
            "/apis/authorization.k8s.io/v1",
            get(|| async {
                Json(review_discovery(
                    "authorization.k8s.io/v1",
                    &[
                        ("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                        ("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
                    ],
                ))
            }),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            post(self_subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            post(self_subject_rules_review),
        )
        .route(
            "/apis/authentication.k8s.io",
            get(|| async { Json(super::discovery::group("authentication.k8s.io", "")) }),
        )
        .route(
            "/apis/authentication.k8s.io/v1",
            get(|| async {
                Json(review_discovery(
                    "authentication.k8s.io/v1",
                    &[("selfsubjectreviews", "SelfSubjectReview")],
                ))
            }),
        )
        .route(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            post(self_subject_review),
        )
}

/// The API groups this module serves, for `/apis`.
pub const GROUPS: [&str; 3] = [auth::GROUP, "authorization.k8s.io", "authentication.k8s.io"];

fn tokens_discovery() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": auth::API_VERSION, "resources": [
        {"name": "tokens", "singularName": "token", "namespaced": false, "kind": "Token", "verbs": ["create", "delete", "get", "list"]},
    ]})
}

fn review_discovery(group_version: &str, reviews: &[(&str, &str)]) -> Value {
    let resources: Vec<Value> = reviews
        .iter()
        .map(|(plural, kind)| json!({"name": plural, "singularName": kind.to_ascii_lowercase(), "namespaced": false, "kind": kind, "verbs": ["create"]}))
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

/// A token record as an API object (never the hash; the secret only in the answer to its
/// creation, under `status.token`).
fn token_object(t: &TokenRecord) -> Value {
    let mut spec = json!({"kind": t.kind, "identity": t.identity, "groups": t.groups});
    if let Some(n) = &t.node {
        spec["node"] = json!(n);
    }
    if !t.labels.is_empty() {
        spec["labels"] = json!(t.labels);
    }
    json!({"apiVersion": auth::API_VERSION, "kind": "Token",
        "metadata": {"name": t.id, "creationTimestamp": t.created}, "spec": spec})
}

/// The caller as an event actor: its user name (`admin as alice` when impersonating), with
/// its reason header.
fn actor(user: &User, headers: &HeaderMap) -> Actor {
    let mut a = super::request::actor_of(headers);
    a.name = user.actor_name();
    a
}

async fn list_tokens(State(st): State<ApiState>) -> Json<Value> {
    let s = st.hub.state();
    let items: Vec<Value> = s.tokens.values().map(|t| token_object(t)).collect();
    Json(json!({"apiVersion": auth::API_VERSION, "kind": "TokenList",
        "metadata": {"resourceVersion": s.seq.to_string()}, "items": items}))
}

fn token_not_found(id: &str) -> ApiError {
    ApiError {
        code: StatusCode::NOT_FOUND,
        reason: "NotFound",
        message: format!("tokens.{} {id:?} not found", auth::GROUP),
        details: json!({"name": id, "group": auth::GROUP, "kind": "tokens"}),
    }
}

async fn get_token(State(st): State<ApiState>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    let s = st.hub.state();
    s.tokens
        .get(&id)
        .map(|t| Json(token_object(t)))
        .ok_or_else(|| token_not_found(&id))
}

/// The body of a token request (`POST /apis/auth.mco.dev/v1/tokens`); other fields (apiVersion,
/// kind, metadata) are ignored.
#[derive(Debug, Default, serde::Deserialize)]
struct TokenRequest {
    #[serde(default)]
    spec: TokenSpec,
}

/// `spec` of a [`TokenRequest`].
#[derive(Debug, Default, serde::Deserialize)]
struct TokenSpec {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    identity: Option<String>,
    /// The labels a node token's node registers with ([`TokenRecord::labels`]).
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

/// Issues a token for `spec.kind` (`admin`, `reader`, `node`, `bootstrap`), `spec.node` (node
/// tokens), `spec.labels` (node tokens: the labels its node registers with, the admin's
/// decision of its role) and `spec.identity` (the user name of an admin or reader token).
/// Answers 201 with
/// the token object and the secret in `status.token`, shown this once.
async fn create_token(
    State(st): State<ApiState>,
    Extension(user): Extension<User>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let req: TokenRequest = super::request::typed_body(&headers, &body, &st.hub.limits(), "Token")?;
    let spec = &req.spec;
    let kind_s = spec.kind.as_str();
    let kind = TokenKind::parse(kind_s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "spec.kind: Unsupported value: {kind_s:?}: supported values: \"admin\", \"reader\", \"node\", \"bootstrap\""
        ))
    })?;
    let (mut record, secret) = new_token(kind, spec.node.as_deref(), spec.identity.as_deref())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    auth::check_token_labels(kind, &spec.labels).map_err(|e| ApiError::bad_request(e.to_string()))?;
    record.labels = spec.labels.clone();
    // One identity, one kind (a reader named like an admin would make the history's actor and
    // the 403 messages ambiguous): judged by the hub under its append lock.
    issue(&st.hub, &record, &actor(&user, &headers)).await?;
    let mut obj = token_object(&record);
    obj["status"] = json!({"token": secret});
    Ok((StatusCode::CREATED, Json(obj)).into_response())
}

/// A new token record and its secret (not yet recorded).
///
/// Errors: [`auth::identity`]'s.
pub fn new_token(
    kind: TokenKind,
    node: Option<&str>,
    name: Option<&str>,
) -> Result<(TokenRecord, String), auth::TokenError> {
    let id = auth::new_id();
    let (identity, groups) = auth::identity(kind, &id, node, name)?;
    let secret = auth::new_secret();
    let record = TokenRecord {
        id,
        kind,
        identity,
        groups,
        node: node.map(str::to_string),
        labels: Default::default(),
        hash: auth::hash(&secret),
        created: jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .to_string(),
    };
    Ok((record, secret))
}

/// Appends `TokenIssued` for `record` through the hub.
pub async fn issue(hub: &crate::command::Hub, record: &TokenRecord, actor: &Actor) -> Result<(), ApiError> {
    hub.record_token(EventType::TokenIssued, record, actor)
        .await
        .map_err(|e| ApiError::from_command(e, hub.group()))
}

async fn revoke_token(
    State(st): State<ApiState>,
    Extension(user): Extension<User>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let record = st
        .hub
        .state()
        .tokens
        .get(&id)
        .cloned()
        .ok_or_else(|| token_not_found(&id))?;
    st.hub
        .record_token(EventType::TokenRevoked, &record, &actor(&user, &headers))
        .await
        .map_err(|e| ApiError::from_command(e, st.hub.group()))?;
    Ok(Json(token_object(&record)))
}

/// `SelfSubjectAccessReview` (`kubectl auth can-i`): whether the caller may do what
/// `spec.resourceAttributes` (verb, group, resource, subresource, name) or
/// `spec.nonResourceAttributes` (path, verb) describe, by [`auth::authorize`] (RBAC alone, as
/// in Kubernetes: admission rules such as NodeRestriction are not consulted).
async fn self_subject_access_review(
    Extension(user): Extension<User>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut review: Value = match protobuf::self_subject_access_review(&body) {
        Some(r) => r,
        None => serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid SelfSubjectAccessReview: {e}")))?,
    };
    let typed: AccessReview = review_of(&review, "SelfSubjectAccessReview")?;
    let attrs = if let Some(r) = typed.spec.resource_attributes {
        let mut a = Attributes::resource(&r.verb, &r.group, &r.resource, &r.subresource, &r.name);
        if a.resource == "*" || a.verb == "*" || a.group == "*" {
            // Wildcards ask for every resource or verb: only admins have them all.
            a.verb = "*".into();
        }
        a
    } else if let Some(r) = typed.spec.non_resource_attributes {
        Attributes::path(&r.verb, &r.path)
    } else {
        return Err(ApiError::bad_request(
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    };
    let allowed = auth::allowed_by(&user, &attrs);
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!("SelfSubjectAccessReview");
    review["metadata"] = json!({"creationTimestamp": null});
    review["status"] = match allowed {
        Some(role) => json!({"allowed": true, "reason": format!("mco: {role} may {}", attrs.verb)}),
        None => json!({"allowed": false}),
    };
    Ok((StatusCode::CREATED, Json(review)))
}

/// A `SelfSubjectAccessReview` as far as mco reads it: each field of the type Kubernetes
/// gives it (`authorization.k8s.io/v1`), others ignored.
#[derive(Debug, Default, serde::Deserialize)]
struct AccessReview {
    #[serde(default)]
    spec: AccessReviewSpec,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AccessReviewSpec {
    #[serde(default)]
    resource_attributes: Option<ResourceAttributes>,
    #[serde(default)]
    non_resource_attributes: Option<NonResourceAttributes>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct ResourceAttributes {
    verb: String,
    group: String,
    resource: String,
    subresource: String,
    name: String,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct NonResourceAttributes {
    verb: String,
    path: String,
}

/// Decodes a review request (`kind` names it in errors) as `T`: an object whose fields have
/// their Kubernetes types.
///
/// Errors: 400 `SelfSubjectAccessReview in version "v1" cannot be handled as a
/// SelfSubjectAccessReview: json: cannot unmarshal array into Go value of type
/// v1.SelfSubjectAccessReview`, or naming the field (`spec.resourceAttributes.verb: invalid
/// type: ...`).
fn review_of<T: serde::de::DeserializeOwned>(v: &Value, kind: &str) -> Result<T, ApiError> {
    let prefix = format!("{kind} in version \"v1\" cannot be handled as a {kind}");
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "{prefix}: json: cannot unmarshal {} into Go value of type v1.{kind}",
            crate::validation::json_type(v)
        )));
    }
    serde_path_to_error::deserialize(v)
        .map_err(|e| ApiError::bad_request(format!("{prefix}: {}: {}", e.path(), e.inner())))
}

/// Checks the body of a review whose request mco has nothing to read from
/// (`SelfSubjectRulesReview`, `SelfSubjectReview`): empty, protobuf (kubectl's typed clients)
/// or a JSON object.
///
/// Errors: [`review_of`]'s for JSON of another type; 400 for a body that is not JSON.
fn check_review_body(body: &[u8], kind: &str) -> Result<(), ApiError> {
    if body.is_empty() || body.starts_with(b"k8s\0") {
        return Ok(());
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("invalid {kind}: {e}")))?;
    review_of::<serde::de::IgnoredAny>(&v, kind).map(drop)
}

/// `SelfSubjectRulesReview` (`kubectl auth can-i --list`): the rules the caller holds
/// ([`auth::rules`]), cluster-wide (the request's namespace changes nothing: mco's objects are
/// cluster-scoped), complete.
async fn self_subject_rules_review(
    State(st): State<ApiState>,
    Extension(user): Extension<User>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_review_body(&body, "SelfSubjectRulesReview")?;
    let mut groups = super::groups::served_api_groups(&st.hub);
    groups.push(crate::history::GROUP.to_string());
    groups.extend(GROUPS.iter().map(|g| g.to_string()));
    let (resource_rules, non_resource_rules) = auth::rules(&user, &groups);
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null}, "spec": {},
            "status": {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false},
        })),
    ))
}

/// `SelfSubjectReview` (`kubectl auth whoami`): the user name and groups the request runs as,
/// plus the token id and kind under `extra`; for an impersonated user, its uid and extra as
/// the request named them (as kube-apiserver answers).
async fn self_subject_review(
    Extension(user): Extension<User>,
    #[cfg_attr(not(feature = "failpoints"), allow(unused_variables))] headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_review_body(&body, "SelfSubjectReview")?;
    // Failpoint `api::whoami::panic` (feature `failpoints`; its test sets the action `panic`):
    // only a request carrying `x-mco-test-panic` reaches it, so that the test of the panic
    // layer makes no other test's request panic.
    fail::fail_point!("api::whoami::panic", headers.contains_key("x-mco-test-panic"), |_| Err(
        ApiError::internal("failpoint api::whoami::panic")
    ));
    let mut info = json!({"username": user.name, "groups": user.groups});
    if user.impersonator.is_some() {
        if !user.uid.is_empty() {
            info["uid"] = json!(user.uid);
        }
        if !user.extra.is_empty() {
            info["extra"] = json!(user.extra);
        }
    } else {
        info["extra"] = json!({"mco.dev/token-id": [user.token_id], "mco.dev/token-kind": [user.kind.as_str()]});
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "status": {"userInfo": info},
        })),
    ))
}

/// The actor of the tokens a server issues to itself at start-up.
const BOOTSTRAP_ACTOR: &str = "mco-server";

/// At start-up: when no admin token is in force (a new data dir, or every admin token was
/// revoked), issues one and writes it to `<data_dir>/admin.token` (0600). Whoever can start
/// the server on the data dir owns the log anyway, so this is the recovery path for a lost
/// admin token too. Returns whether it issued one.
///
/// Errors: the append or the file write.
pub async fn bootstrap_admin(hub: &crate::command::Hub, data_dir: &std::path::Path) -> anyhow::Result<bool> {
    if hub.state().tokens.values().any(|t| t.kind == TokenKind::Admin) {
        return Ok(false);
    }
    let (record, secret) = new_token(TokenKind::Admin, None, None)?;
    // The file first: a crash between the two leaves an unused file, never a token no one has.
    write_secret_file(&data_dir.join(ADMIN_TOKEN_FILE), &secret)?;
    hub.record_token(EventType::TokenIssued, &record, &Actor::new(BOOTSTRAP_ACTOR))
        .await?;
    tracing::info!(id = %record.id, file = %data_dir.join(ADMIN_TOKEN_FILE).display(), "issued the first admin token");
    Ok(true)
}

/// The token file of sandbox node `node` (`<data_dir>/tokens/<node>.token`), issuing a node
/// token recording `labels` (the labels its node registers with, its role among them:
/// [`TokenRecord::labels`]) when the file is missing or its token is no longer in force for
/// that node with those labels (idempotent across restarts: the log keeps the hash, the file
/// the secret).
///
/// Errors: a bad node name or label, the append or the file write.
pub async fn ensure_node_token(
    hub: &crate::command::Hub,
    data_dir: &std::path::Path,
    node: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<std::path::PathBuf> {
    let path = node_token_file(data_dir, node);
    auth::check_token_labels(TokenKind::Node, labels)?;
    let mut stale = None;
    if let Some(secret) = read_secret_file(&path) {
        let hash = auth::hash(&secret);
        let held = hub
            .state()
            .token_by_hash(&hash)
            .filter(|t| t.kind == TokenKind::Node && t.node.as_deref() == Some(node))
            .cloned();
        match held {
            Some(t) if &t.labels == labels => return Ok(path),
            // The node's labels changed (or the token predates them): replaced, and revoked.
            other => stale = other,
        }
    }
    let (mut record, secret) = new_token(TokenKind::Node, Some(node), None)?;
    record.labels = labels.clone();
    write_secret_file(&path, &secret)?;
    hub.record_token(EventType::TokenIssued, &record, &Actor::new(BOOTSTRAP_ACTOR))
        .await?;
    if let Some(old) = stale {
        hub.record_token(EventType::TokenRevoked, &old, &Actor::new(BOOTSTRAP_ACTOR))
            .await?;
    }
    Ok(path)
}

/// The few Kubernetes protobuf messages mco reads: kubectl's typed clients send built-in kinds
/// (here `SelfSubjectAccessReview`) as `application/vnd.kubernetes.protobuf`: the `k8s\0` magic,
/// then a `runtime.Unknown` envelope whose `raw` field holds the message
/// (`k8s.io/apimachinery/pkg/runtime/serializer/protobuf`). Answers are JSON, which the client
/// accepts (`Accept: application/vnd.kubernetes.protobuf, */*`).
mod protobuf {
    use serde_json::{json, Value};

    /// The length-delimited fields of a message, in order (other wire types skipped); `None`
    /// for a malformed message.
    fn fields(mut b: &[u8]) -> Option<Vec<(u64, &[u8])>> {
        fn varint(b: &mut &[u8]) -> Option<u64> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let (&byte, rest) = b.split_first()?;
                *b = rest;
                v |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    return Some(v);
                }
            }
            None
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b)?;
            match key & 7 {
                0 => {
                    varint(&mut b)?;
                }
                1 => b = b.get(8..)?,
                5 => b = b.get(4..)?,
                2 => {
                    let len = usize::try_from(varint(&mut b)?).ok()?;
                    out.push((key >> 3, b.get(..len)?));
                    b = &b[len..];
                }
                _ => return None,
            }
        }
        Some(out)
    }

    fn field<'a>(fs: &[(u64, &'a [u8])], n: u64) -> Option<&'a [u8]> {
        fs.iter().rev().find(|(k, _)| *k == n).map(|(_, v)| *v)
    }

    fn string(fs: &[(u64, &[u8])], n: u64) -> String {
        field(fs, n)
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }

    /// A protobuf `SelfSubjectAccessReview` (`k8s.io/api/authorization/v1/generated.proto`:
    /// spec = 2; ResourceAttributes namespace 1, verb 2, group 3, version 4, resource 5,
    /// subresource 6, name 7; NonResourceAttributes path 1, verb 2) as its JSON; `None` when
    /// `body` is not one.
    pub fn self_subject_access_review(body: &[u8]) -> Option<Value> {
        let envelope = fields(body.strip_prefix(b"k8s\0")?)?;
        let review = fields(field(&envelope, 2)?)?;
        let spec = fields(field(&review, 2).unwrap_or_default())?;
        let mut out = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}});
        if let Some(r) = field(&spec, 1) {
            let r = fields(r)?;
            out["spec"]["resourceAttributes"] = json!({
                "namespace": string(&r, 1), "verb": string(&r, 2), "group": string(&r, 3), "version": string(&r, 4),
                "resource": string(&r, 5), "subresource": string(&r, 6), "name": string(&r, 7),
            });
        } else if let Some(r) = field(&spec, 2) {
            let r = fields(r)?;
            out["spec"]["nonResourceAttributes"] = json!({"path": string(&r, 1), "verb": string(&r, 2)});
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_follow_kube_apiservers_request_info() {
        let a = |m: Method, p: &str, q: &str| attributes(&m, p, q);
        assert_eq!(
            a(Method::PATCH, "/api/v1/nodes/worker-1", ""),
            Attributes::resource("patch", "", "nodes", "", "worker-1")
        );
        assert_eq!(
            a(Method::PUT, "/api/v1/nodes/w/status", ""),
            Attributes::resource("update", "", "nodes", "status", "w")
        );
        assert_eq!(
            a(Method::GET, "/api/v1/nodes", "watch=true&x=1"),
            Attributes::resource("watch", "", "nodes", "", "")
        );
        assert_eq!(
            a(Method::GET, "/api/v1/nodes", ""),
            Attributes::resource("list", "", "nodes", "", "")
        );
        assert_eq!(
            a(Method::GET, "/api/v1/namespaces/default/events", ""),
            Attributes {
                namespace: "default".into(),
                ..Attributes::resource("list", "", "events", "", "")
            }
        );
        assert_eq!(
            a(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/w",
                ""
            ),
            Attributes {
                namespace: "kube-node-lease".into(),
                ..Attributes::resource("update", "coordination.k8s.io", "leases", "", "w")
            }
        );
        assert_eq!(
            a(
                Method::DELETE,
                "/apis/machineconfiguration.openshift.io/v1/machineconfigs",
                ""
            ),
            Attributes::resource(
                "deletecollection",
                "machineconfiguration.openshift.io",
                "machineconfigs",
                "",
                ""
            )
        );
        assert_eq!(
            a(Method::POST, "/apis/history.mco.dev/v1/rollbacks", ""),
            Attributes::resource("create", "history.mco.dev", "rollbacks", "", "")
        );
        assert_eq!(
            a(Method::GET, "/apis/machineconfiguration.openshift.io/v1", ""),
            Attributes::path("get", "/apis/machineconfiguration.openshift.io/v1")
        );
        assert_eq!(
            a(Method::GET, "/config/worker", ""),
            Attributes::path("get", "/config/worker")
        );
        // HEAD is authorized as GET, on paths as on resources.
        assert_eq!(
            a(Method::HEAD, "/config/worker", ""),
            Attributes::path("get", "/config/worker")
        );
        assert_eq!(
            a(Method::HEAD, "/api/v1/nodes/w", ""),
            Attributes::resource("get", "", "nodes", "", "w")
        );
        assert_eq!(
            a(Method::GET, "/api/v1/nodes/a%2Fb", ""),
            Attributes::resource("get", "", "nodes", "", "a/b")
        );
    }

    #[test]
    fn bearer_tokens_are_read_as_kube_apiserver_reads_them() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "bearer  abc ".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn kubectls_protobuf_access_review_is_read() {
        // `kubectl auth can-i create machineconfigs` as kubectl 1.32 sends it.
        let body: &[u8] = &[
            107, 56, 115, 0, 10, 50, 10, 23, 97, 117, 116, 104, 111, 114, 105, 122, 97, 116, 105, 111, 110, 46, 107,
            56, 115, 46, 105, 111, 47, 118, 49, 18, 23, 83, 101, 108, 102, 83, 117, 98, 106, 101, 99, 116, 65, 99, 99,
            101, 115, 115, 82, 101, 118, 105, 101, 119, 18, 106, 10, 16, 10, 0, 18, 0, 26, 0, 34, 0, 42, 0, 50, 0, 56,
            0, 66, 0, 18, 76, 10, 74, 10, 7, 100, 101, 102, 97, 117, 108, 116, 18, 6, 99, 114, 101, 97, 116, 101, 26,
            33, 109, 97, 99, 104, 105, 110, 101, 99, 111, 110, 102, 105, 103, 117, 114, 97, 116, 105, 111, 110, 46,
            111, 112, 101, 110, 115, 104, 105, 102, 116, 46, 105, 111, 34, 0, 42, 14, 109, 97, 99, 104, 105, 110, 101,
            99, 111, 110, 102, 105, 103, 115, 50, 0, 58, 0, 26, 8, 8, 0, 18, 0, 26, 0, 32, 0, 26, 0, 34, 0,
        ];
        let r = protobuf::self_subject_access_review(body).unwrap();
        assert_eq!(
            r["spec"]["resourceAttributes"],
            serde_json::json!({"namespace": "default", "verb": "create", "group": "machineconfiguration.openshift.io",
                "version": "", "resource": "machineconfigs", "subresource": "", "name": ""})
        );
        assert!(protobuf::self_subject_access_review(b"{}").is_none());
        assert!(protobuf::self_subject_access_review(b"k8s\0\x12\xff").is_none());
    }

    #[test]
    fn public_paths_are_health_version_and_static_files() {
        for p in [
            "/healthz",
            "/readyz",
            "/livez",
            "/version",
            "/version/",
            "/",
            "/ui",
            "/ui/",
            "/ui/app.js",
        ] {
            assert!(is_public(p), "{p}");
        }
        for p in [
            "/metrics",
            "/config/worker",
            "/api",
            "/apis",
            "/api/v1/nodes",
            "/openapi/v3",
            "/uix",
        ] {
            assert!(!is_public(p), "{p}");
        }
    }
}
