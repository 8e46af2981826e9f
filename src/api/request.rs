//! Request parsing of the resource handlers: what a path addresses ([`Target`]), the query
//! parameters ([`Params`], [`check_list_query`]), resourceVersion freshness
//! ([`wait_for_resource_version`]), request bodies (JSON or YAML, [`typed_body`] for mco's own
//! request kinds, DeleteOptions, preconditions), `fieldValidation`, `dryRun`, and the caller's
//! identity (the actor, [`user_actor`], and its field manager).

use super::groups::served_api_groups;
use super::selectors::{FieldQuery, LabelQuery};
use super::ApiError;
use crate::command::{Actor, Hub, Propagation, Scope};
use crate::model::Kind;
use crate::protocol::{ACTOR_HEADER, REASON_HEADER};
use axum::extract::Query;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use serde::Deserialize;
use serde_json::{json, Value};

/// The caller's declared component (`x-mco-actor`; `kubectl` for kubectl's user agent; else
/// `anonymous`) as the actor's name, and its reason (`x-mco-reason`). The declaration is
/// untrusted: handlers replace the name with the authenticated user ([`user_actor`]) and use
/// the declaration only as the default field manager, which Kubernetes also takes from the
/// client.
pub fn actor_of(headers: &HeaderMap) -> Actor {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let mut name = h(ACTOR_HEADER);
    if name.is_empty() {
        name = prefix_from_user_agent(&h("user-agent"));
    }
    Actor {
        name,
        reason: percent_encoding::percent_decode_str(&h(REASON_HEADER))
            .decode_utf8_lossy()
            .into_owned(),
        dry_run: false,
    }
}

/// The field manager of a client that names none: its User-Agent up to the first `/`, without
/// unprintable characters, at most 128 bytes (`kubectl/v1.33.0 (linux/amd64) …` → `kubectl`,
/// `OpenAPI-Generator/33.1.0/python` → `OpenAPI-Generator`; no User-Agent → empty), as
/// kube-apiserver's `prefixFromUserAgent` (`staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/create.go`, limit `FieldManagerMaxLength`).
pub fn prefix_from_user_agent(user_agent: &str) -> String {
    const FIELD_MANAGER_MAX_LENGTH: usize = 128;
    let mut out = String::new();
    for c in user_agent.split('/').next().unwrap_or("").chars() {
        if c.is_control() {
            continue;
        }
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

/// The actor of an authenticated request: the user's name (what the event log records as who
/// did it; `admin as alice` for an admin impersonating alice, [`crate::auth::User::actor_name`]),
/// the reason header, and the declared component kept apart as the field manager default
/// ([`actor_of`]: the client's, as in Kubernetes, whoever it runs as).
pub fn user_actor(user: &crate::auth::User, headers: &HeaderMap) -> (Actor, String) {
    let mut actor = actor_of(headers);
    let declared = std::mem::replace(&mut actor.name, user.actor_name());
    (actor, declared)
}

/// What a resource path addresses.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Target {
    /// A kind's collection; for a namespaced kind, in one namespace (`namespaces/<ns>/<plural>`)
    /// or, `None`, across all of them (`<plural>`, list and watch only).
    Collection(Kind, Option<String>),
    /// One object by its store key (`<namespace>/<name>` for a namespaced kind,
    /// [`crate::model::namespaced_key`]).
    Object(Kind, String, Scope),
    /// `/api/v1/events` (`None`) or `/api/v1/namespaces/<ns>/events`: Kubernetes Events
    /// synthesised from the event log (they all live in `default`).
    Events(Option<String>),
    /// `/api/v1/namespaces/<ns>/events/<name>` (or without the namespace): one of those Events.
    Event(Option<String>, String),
    /// `/api/v1/pods`: always empty (mco runs no workloads); `kubectl describe node` lists them.
    Pods,
}

/// Resolves `/api/v1/...` and `/apis/<group>/v1/...` paths.
pub(super) fn target(hub: &Hub, uri: &Uri) -> Result<Target, ApiError> {
    let path = uri.path();
    let (rest, core, group, version) = if let Some(r) = path.strip_prefix("/api/v1/") {
        (r, true, String::new(), "v1".to_string())
    } else if let Some(r) = path.strip_prefix("/apis/") {
        let mut it = r.splitn(3, '/');
        let (g, v, rest) = (
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
            it.next().unwrap_or(""),
        );
        if !served_api_groups(hub).iter().any(|x| x == g) {
            return Err(ApiError::not_found_path());
        }
        (rest, false, g.to_string(), v.to_string())
    } else {
        return Err(ApiError::not_found_path());
    };
    // Path segments are percent-decoded, as Kubernetes' request info resolver does.
    let decoded: Vec<String> = rest
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let mut segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let mut namespace = None;
    if segs.len() >= 3 && segs[0] == "namespaces" && (!core || matches!(segs[2], "events" | "pods")) {
        namespace = Some(segs[1].to_string());
        segs.drain(..2);
    }
    let kind = match (core, segs.first().copied()) {
        (true, Some("events")) if segs.len() == 1 => return Ok(Target::Events(namespace)),
        (true, Some("events")) if segs.len() == 2 => return Ok(Target::Event(namespace, segs[1].to_string())),
        (true, Some("pods")) if segs.len() == 1 => return Ok(Target::Pods),
        (true, Some("nodes")) => Kind::Node,
        (false, Some(plural)) => Kind::ALL
            .into_iter()
            .find(|k| {
                let i = k.info();
                let group_ok = match i.group {
                    None => crate::model::ACCEPTED_GROUPS.contains(&group.as_str()),
                    Some(g) => g == group,
                };
                i.plural == plural && i.version == version && group_ok
            })
            .ok_or_else(ApiError::not_found_path)?,
        _ => return Err(ApiError::not_found_path()),
    };
    // A namespaced kind's objects are addressed in their namespace only; a cluster-scoped
    // kind has no namespaced paths (kube-apiserver installs neither route: 404).
    if namespace.is_some() != kind.is_namespaced() && !(namespace.is_none() && segs.len() == 1) {
        return Err(ApiError::not_found_path());
    }
    let key = |name: &str| match &namespace {
        Some(ns) => crate::model::namespaced_key(ns, name),
        None => name.to_string(),
    };
    match segs[1..] {
        [] => Ok(Target::Collection(kind, namespace)),
        [name] => Ok(Target::Object(kind, key(name), Scope::Main)),
        [name, "status"] if kind.has_status() => Ok(Target::Object(kind, key(name), Scope::Status)),
        _ => Err(ApiError::not_found_path()),
    }
}

/// Sets a namespaced object's `metadata.namespace` to the request's when it has none, as
/// kube-apiserver's `rest.BeforeCreate` and `BeforeUpdate` take it from the request.
///
/// Errors: 400 `the namespace of the provided object does not match the namespace sent on the
/// request` when it names another.
pub(super) fn set_request_namespace(obj: &mut Value, ns: &str) -> Result<(), ApiError> {
    match obj["metadata"]["namespace"].as_str() {
        None | Some("") => {
            obj["metadata"]["namespace"] = json!(ns);
            Ok(())
        }
        Some(n) if n == ns => Ok(()),
        Some(_) => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
}

/// The object a PUT or PATCH addresses; refuses collections.
pub(super) fn object_write_target(hub: &Hub, uri: &Uri) -> Result<(Kind, String, Scope), ApiError> {
    let Target::Object(kind, name, scope) = target(hub, uri)? else {
        return Err(ApiError::method_not_allowed());
    };
    Ok((kind, name, scope))
}

/// How long a read asking for a resourceVersion newer than the log waits for it to appear
/// (kube-apiserver's watch cache `blockTimeout`, 3 s) before answering "Too large resource
/// version".
const FRESHNESS_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits (at most [`FRESHNESS_WAIT`]) until the log has published `rv`.
///
/// Errors: Kubernetes' `NewTooLargeResourceVersionError` (504 Timeout, `Timeout: Too large
/// resource version: <rv>, current: <seq>`, cause `ResourceVersionTooLarge`, retry after 1 s).
pub(crate) async fn wait_for_resource_version(hub: &Hub, rv: u64) -> Result<(), ApiError> {
    let mut changes = hub.changes();
    let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
    while *changes.borrow_and_update() < rv {
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            let current = hub.published_seq();
            return Err(ApiError {
                code: StatusCode::GATEWAY_TIMEOUT,
                reason: "Timeout",
                message: format!("Timeout: Too large resource version: {rv}, current: {current}"),
                details: json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
            });
        }
    }
    Ok(())
}

/// The `resourceVersion` query parameter: `None` for absent, empty or `0` (any version).
pub(super) fn requested_resource_version(q: &Params) -> Result<Option<u64>, ApiError> {
    match q.resource_version.as_deref() {
        None | Some("") | Some("0") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}"))),
    }
}

/// Checks the query string of a list or watch request (`watch`, `resourceVersion`,
/// `resourceVersionMatch`, `labelSelector`, `fieldSelector`, `fieldValidation`, `dryRun`,
/// `asOf`) with the rules the handlers apply before touching the state, and returns the
/// requested resourceVersion (`None`: any). The entry point of the `watch_query` fuzz target.
///
/// Errors: the 400 Status a request with that query gets.
pub fn check_list_query(query: &str) -> Result<Option<u64>, ApiError> {
    let uri: Uri = format!("/?{query}")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let Query(q) = Query::<Params>::try_from_uri(&uri).map_err(|e| ApiError::bad_request(e.to_string()))?;
    LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    FieldQuery::parse(q.field_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
    validation(&q)?;
    dry_run_value(q.dry_run.as_deref())?;
    if let Some(point) = q.as_of.as_deref().filter(|s| !s.is_empty()) {
        crate::query::Point::parse(point).map_err(ApiError::bad_request)?;
    }
    requested_resource_version(&q)
}

/// Query parameters mco understands.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Params {
    pub(super) watch: Option<String>,
    pub(super) label_selector: Option<String>,
    pub(super) field_selector: Option<String>,
    pub(super) resource_version: Option<String>,
    pub(super) include_object: Option<String>,
    pub(super) field_manager: Option<String>,
    pub(super) field_validation: Option<String>,
    pub(super) force: Option<String>,
    pub(super) dry_run: Option<String>,
    pub(super) propagation_policy: Option<String>,
    pub(super) orphan_dependents: Option<String>,
    pub(super) resource_version_match: Option<String>,
    pub(super) as_of: Option<String>,
    pub(super) limit: Option<String>,
    #[serde(rename = "continue")]
    pub(super) continue_: Option<String>,
    pub(super) timeout_seconds: Option<String>,
}

impl Params {
    pub(super) fn flag(v: &Option<String>) -> bool {
        matches!(v.as_deref(), Some("true") | Some("1"))
    }
}

pub(crate) fn accept(headers: &HeaderMap) -> &str {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// Parses a request body: JSON, or YAML for `application/apply-patch+yaml` and `*yaml` types.
pub(super) fn parse_body(headers: &HeaderMap, body: &[u8], limits: &crate::limits::Limits) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct.split(';').next().unwrap_or("").trim();
    if !media.is_empty() && !media.ends_with("json") && !media.ends_with("yaml") {
        return Err(ApiError {
            code: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            reason: "UnsupportedMediaType",
            message: "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml".into(),
            details: json!({}),
        });
    }
    if ct.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not UTF-8: {e}")))?;
        return crate::limits::on_yaml_stack(limits.max_json_depth, || {
            serde_saphyr::from_str_with_options::<Value>(text, crate::limits::yaml_budget_options(limits))
                .map_err(|e| crate::limits::yaml_error_message(&e, limits))
        })
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid YAML: {e}")));
    }
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// Decodes the JSON (or YAML) body of one of mco's own request kinds (a token, a rollback, a
/// preview, a compaction, a daemon's report) as `T`: the body must be an object, and each
/// field of its type. `what` names the request in the error.
///
/// Errors: 400 `invalid <what>: json: cannot unmarshal array into Go value of type <what>` for
/// a body of another JSON type, `invalid <what>: spec.kind: invalid type: ...` naming the field
/// otherwise; [`parse_body`]'s for the media type and the syntax.
pub(crate) fn typed_body<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
    limits: &crate::limits::Limits,
    what: &str,
) -> Result<T, ApiError> {
    let v = parse_body(headers, body, limits)?;
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "invalid {what}: json: cannot unmarshal {} into Go value of type {what}",
            crate::validation::json_type(&v)
        )));
    }
    serde_path_to_error::deserialize(&v).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::bad_request(format!("invalid {what}: {}", e.inner()))
        } else {
            ApiError::bad_request(format!("invalid {what}: {path}: {}", e.inner()))
        }
    })
}

pub(super) fn precondition(obj: &Value) -> Result<Option<u64>, ApiError> {
    match obj["metadata"]["resourceVersion"].as_str() {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
    }
}

/// How unknown fields are treated (`fieldValidation`; Kubernetes' default is Warn).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Validation {
    Strict,
    Warn,
    Ignore,
}

pub(super) fn validation(q: &Params) -> Result<Validation, ApiError> {
    match q.field_validation.as_deref() {
        None | Some("") | Some("Warn") => Ok(Validation::Warn),
        Some("Strict") => Ok(Validation::Strict),
        Some("Ignore") => Ok(Validation::Ignore),
        Some(o) => Err(ApiError::bad_request(format!(
            "fieldValidation must be one of Strict, Warn, Ignore, not {o:?}"
        ))),
    }
}

/// The field manager of a write: `fieldManager`, else the caller's declared component.
pub(super) fn manager(q: &Params, declared: &str) -> String {
    q.field_manager
        .clone()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| declared.to_string())
}

pub(super) fn now_string() -> String {
    serde_json::to_value(crate::model::now())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The request's actor ([`user_actor`]: the authenticated user) with Kubernetes' `dryRun`
/// query parameter (`All` makes the write a dry run; any other value is refused as Kubernetes
/// refuses it), and the declared component for the field manager.
pub(super) fn request_actor(
    user: &crate::auth::User,
    headers: &HeaderMap,
    q: &Params,
) -> Result<(Actor, String), ApiError> {
    let (mut actor, declared) = user_actor(user, headers);
    actor.dry_run = dry_run_value(q.dry_run.as_deref())?;
    Ok((actor, declared))
}

pub(super) fn dry_run_value(v: Option<&str>) -> Result<bool, ApiError> {
    match v {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

/// The DeleteOptions of a DELETE's body (none when it is empty), decoded as kube-apiserver
/// decodes them: a body of another JSON type, or a field of the wrong type (`"dryRun": "All"`,
/// which must not become a real delete), is refused.
///
/// Errors: 400 `DeleteOptions in version "v1" cannot be handled as a DeleteOptions: ...`
/// naming the field; the media type and body limits of [`parse_body`].
pub(super) fn delete_options(
    headers: &HeaderMap,
    body: &[u8],
    limits: &crate::limits::Limits,
) -> Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions, ApiError> {
    if body.is_empty() {
        return Ok(Default::default());
    }
    let v = parse_body(headers, body, limits)?;
    let prefix = "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions";
    if !v.is_object() {
        return Err(ApiError::bad_request(format!(
            "{prefix}: json: cannot unmarshal {} into Go value of type v1.DeleteOptions",
            crate::validation::json_type(&v)
        )));
    }
    serde_path_to_error::deserialize(&v)
        .map_err(|e| ApiError::bad_request(format!("{prefix}: {}: {}", e.path(), e.inner())))
}

/// The DeleteOptions `propagationPolicy` (body or query; the deprecated `orphanDependents:
/// true` means Orphan), Background when unset, as for Kubernetes custom resources.
pub(super) fn propagation(
    q: &Params,
    opts: &k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions,
) -> Result<Propagation, ApiError> {
    let policy = opts
        .propagation_policy
        .as_deref()
        .or(q.propagation_policy.as_deref())
        .filter(|p| !p.is_empty());
    let orphan = opts
        .orphan_dependents
        .or(q.orphan_dependents.as_deref().map(|o| o == "true"));
    match (policy, orphan) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "orphanDependents and deletionPropagation cannot be both set",
        )),
        (None, Some(true)) => Ok(Propagation::Orphan),
        (None, _) => Ok(Propagation::Background),
        (Some(p), None) => Propagation::parse(p).ok_or_else(|| {
            ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            ))
        }),
    }
}
