//! The resource handlers: GET (one object, a list or a watch, in the present or at a past
//! resourceVersion, [`as_of`]), POST, PUT, PATCH (merge, JSON, strategic merge for nodes,
//! server-side apply) and DELETE (one object or a collection) on the `/api/v1/...` and
//! `/apis/<group>/v1/...` paths; field checks (unknown and duplicate fields under
//! `fieldValidation`), field ownership, and the warnings the answers carry. Every write goes
//! through [`crate::command::Hub`].

use super::groups::alias_group;
use super::node_restriction::{admit_node_write, pool_keys_for};
use super::request::{
    accept, delete_options, dry_run_value, manager, now_string, object_write_target, parse_body, precondition,
    propagation, request_actor, requested_resource_version, set_request_namespace, target, validation,
    wait_for_resource_version, Params, Target, Validation,
};
use super::selectors::{FieldQuery, LabelQuery};
use super::support::{off_runtime, watch_timeout};
use super::watch::{watch, watch_error, WatchShape};
use super::{fields, history, last_applied, limits, pages, points, table, ApiError, ApiState};
use crate::command::{CommandError, Hub, Scope};
use crate::model::Kind;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The resource routes: the five verbs on every `/api/v1/...` and `/apis/<group>/v1/...` path
/// (answered through the alias middleware for the other accepted group), and `v1alpha1`.
pub fn routes(state: &ApiState) -> Router<ApiState> {
    let resource = || {
        get(handle_get)
            .post(handle_post)
            .put(handle_put)
            .patch(handle_patch)
            .delete(handle_delete)
    };
    Router::new()
        .route("/api/v1/{*rest}", resource())
        .route(
            "/apis/{group}/v1/{*rest}",
            resource().layer(axum::middleware::from_fn_with_state(state.clone(), alias_group)),
        )
        .route("/apis/{group}/v1alpha1/{*rest}", resource())
}

/// The paths of `cur` that `new` changes once `new` has its kind's defaults (the typed round
/// trip the hub stores it through): a field the body leaves to its default is no change, so a
/// write of the stored object without its defaulted fields records no manager and, with
/// nothing else changed, appends nothing, as kube-apiserver's field manager compares the
/// defaulted objects.
fn changed_after_defaults(
    group: &str,
    kind: Kind,
    cur: &Value,
    new: &Value,
) -> std::collections::BTreeSet<fields::FieldPath> {
    let raw = fields::changed_paths(cur, new);
    // Nothing changed as sent: nothing changes with defaults either (the stored object has
    // them), so the typed round trip is spent only on writes that change something.
    if raw.is_empty() {
        return raw;
    }
    match crate::command::decode(kind, new.clone(), group) {
        Ok(defaulted) => fields::changed_paths(cur, &defaulted),
        Err(_) => raw,
    }
}

fn api_err(hub: &Hub) -> impl Fn(CommandError) -> ApiError + '_ {
    move |e| ApiError::from_command(e, hub.group())
}

async fn handle_get(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let as_table = table::wants_table(accept(&headers));
    let include = q.include_object.clone().unwrap_or_else(|| "Metadata".into());
    match target(hub, &uri)? {
        Target::Events(namespace) => {
            let Query(hq) = Query::<history::HistoryParams>::try_from_uri(&uri)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            history::core_events(&st, &hq, namespace.as_deref(), as_table).await
        }
        Target::Event(namespace, name) => {
            history::core_event_named(&st, namespace.as_deref(), &name, as_table, &include).await
        }
        Target::Pods => Ok(Json(json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": hub.state().seq.to_string()}, "items": []})).into_response()),
        Target::Collection(kind, namespace) => {
            let labels = LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
            let fields = FieldQuery::parse_for(kind, q.field_selector.as_deref().unwrap_or(""))
                .map_err(ApiError::bad_request)?
                .in_namespace(namespace.as_deref());
            let watching = Params::flag(&q.watch);
            let timeout = watch_timeout(q.timeout_seconds.as_deref())?;
            let limit = pages::parse_limit(q.limit.as_deref())?;
            let token = match q.continue_.as_deref().filter(|t| !t.is_empty() && !watching) {
                Some(t) => Some(pages::Token::decode(t)?),
                None => None,
            };
            let versioned = q.resource_version.as_deref().is_some_and(|rv| !rv.is_empty() && rv != "0")
                || q.as_of.as_deref().is_some_and(|a| !a.is_empty());
            if token.is_some() && versioned {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let past = as_of(hub, &q, watching).await?;
            let requested = requested_resource_version(&q)?;
            if let Some(rv) = requested {
                wait_for_resource_version(hub, rv).await?;
            }
            if watching {
                let from = requested;
                if let Some(rv) = from.filter(|rv| *rv < hub.store().oldest_readable()) {
                    return Ok(watch_error(points::expired(rv, hub.store().oldest_readable())));
                }
                let shape = if as_table { WatchShape::Table(include) } else { WatchShape::Object };
                return Ok(watch(&st, kind, labels, fields, from, shape, timeout));
            }
            let table = as_table.then_some(include);
            let req = pages::ListRequest {
                kind,
                labels,
                fields,
                limit,
                table,
            };
            pages::serve(hub, req, token, past).await
        }
        Target::Object(kind, name, _) => {
            let past = as_of(hub, &q, false).await?;
            if past.is_none() {
                if let Some(rv) = requested_resource_version(&q)? {
                    wait_for_resource_version(hub, rv).await?;
                }
            }
            let state = past.map_or_else(|| hub.state(), std::sync::Arc::new);
            if state.names_from(kind, &name).next() != Some(name.as_str()) {
                return Err(api_err(hub)(CommandError::NotFound { kind, name }));
            }
            if as_table {
                return Ok(table::one(&state, kind, &name, hub.keys(), &include));
            }
            let mut body = Vec::new();
            state.write_json(kind, &name, &mut body);
            Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response())
        }
    }
}

/// A time-travel read: the state as of `resourceVersion=N&resourceVersionMatch=Exact`
/// (Kubernetes' semantics, extended to single gets) or `asOf=<RFC 3339 time | rv:N>`; `None`
/// for a read of the present. The cost is one snapshot plus at most the snapshot interval of
/// events ([`crate::store::Store::state_at`]).
///
/// Errors as Kubernetes words them: `resourceVersionMatch` without a `resourceVersion`, with
/// `0`, or on a watch (400); a version newer than the log (504 "Too large resource version",
/// after waiting for it); one older than the retained history (410 Expired).
async fn as_of(hub: &Hub, q: &Params, watching: bool) -> Result<Option<crate::state::State>, ApiError> {
    let exact = match q.resource_version_match.as_deref() {
        None | Some("") | Some("NotOlderThan") => false,
        Some("Exact") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\""
            )))
        }
    };
    if q.resource_version_match.as_deref().is_some_and(|m| !m.is_empty()) {
        if watching {
            return Err(ApiError::bad_request("resourceVersionMatch is forbidden for watch"));
        }
        match q.resource_version.as_deref() {
            None | Some("") => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            Some("0") if exact => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                ))
            }
            _ => {}
        }
    }
    let seq = match (exact, q.as_of.as_deref().filter(|s| !s.is_empty())) {
        (true, _) => requested_resource_version(q)?.unwrap_or(0),
        (false, Some(point)) => {
            let point = crate::query::Point::parse(point).map_err(ApiError::bad_request)?;
            let store = hub.store().clone();
            off_runtime(move || point.seq_in(&store).map_err(points::store_error)).await?
        }
        (false, None) => return Ok(None),
    };
    wait_for_resource_version(hub, seq).await?;
    if seq == hub.published_seq() {
        let now = crate::state::State::clone(&hub.state());
        if now.seq == seq {
            return Ok(Some(now));
        }
    }
    let store = hub.store().clone();
    off_runtime(move || store.state_at(seq).map(Some).map_err(points::store_error)).await
}

/// Checks `input` for fields the schema does not know: an error under Strict, warnings under
/// Warn. Returns the warnings to send.
fn check_fields(
    hub: &Hub,
    kind: Kind,
    input: &Value,
    duplicates: &[String],
    mode: Validation,
) -> Result<Vec<String>, CommandError> {
    check_fields_in(hub.group(), kind, input, duplicates, mode)
}

/// Adds a warning when a MachineConfig is selected by no pool: it will never be rendered (an
/// easy mistake, e.g. a role label under another group than `machineconfiguration.openshift.io`).
fn selection_warning(hub: &Hub, kind: Kind, obj: &Value, mut warnings: Vec<String>) -> Vec<String> {
    if kind != Kind::MachineConfig {
        return warnings;
    }
    let Ok(mc) = serde_json::from_value::<crate::model::MachineConfig>(obj.clone()) else {
        return warnings;
    };
    if crate::render::is_rendered_config(&mc) {
        return warnings;
    }
    let selected = hub
        .state()
        .pools
        .values()
        .any(|p| crate::model::selector_matches(p.spec.machine_config_selector.as_ref(), &mc.metadata));
    if !selected {
        warnings.push(format!(
            "MachineConfig {:?} is not selected by any MachineConfigPool (pools select on the label {}=<role>)",
            mc.name(),
            crate::model::ROLE_LABEL
        ));
    }
    warnings
}

fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = HeaderValue::from_str(&format!("299 - {:?}", w)) {
            resp.headers_mut().append("warning", v);
        }
    }
    resp
}

async fn handle_post(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let Target::Collection(kind, namespace) = target(hub, &uri)? else {
        return Err(ApiError::method_not_allowed());
    };
    // A namespaced kind is created in a namespace only (kube-apiserver has no create route on
    // the all-namespaces path).
    if kind.is_namespaced() && namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mut obj = parse_body(&headers, &body, &hub.limits())?;
    crate::command::check_shape(kind, &obj).map_err(api_err(hub))?;
    if let Some(ns) = &namespace {
        set_request_namespace(&mut obj, ns)?;
    }
    admit_node_write(
        &user,
        kind,
        &crate::command::object_key(kind, &obj),
        Scope::Main,
        None,
        &obj,
        &pool_keys,
    )
    .map_err(api_err(hub))?;
    if kind == Kind::Node {
        crate::auth::registration_labels(&user, &mut obj);
    }
    let dups = fields::duplicate_fields(&body);
    let warnings = check_fields(hub, kind, &obj, &dups, validation(&q)?).map_err(api_err(hub))?;
    let paths = fields::leaf_paths(&obj);
    fields::record(
        &mut obj,
        &manager(&q, &declared),
        "Update",
        &paths,
        &kind.api_version(hub.group()),
        &now_string(),
    );
    let created = hub.create(kind, obj, &actor).await.map_err(api_err(hub))?;
    let warnings = selection_warning(hub, kind, &created, warnings);
    Ok(with_warnings(
        (StatusCode::CREATED, Json(created)).into_response(),
        &warnings,
    ))
}

async fn handle_put(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let (kind, name, scope) = object_write_target(hub, &uri)?;
    let mut obj = parse_body(&headers, &body, &hub.limits())?;
    crate::command::check_shape(kind, &obj).map_err(api_err(hub))?;
    if let Some(ns) = crate::model::key_namespace(&name).filter(|_| kind.is_namespaced()) {
        set_request_namespace(&mut obj, ns)?;
    }
    let mode = if scope == Scope::Main {
        validation(&q)?
    } else {
        Validation::Ignore
    };
    let warnings = check_fields(hub, kind, &obj, &fields::duplicate_fields(&body), mode).map_err(api_err(hub))?;
    let pre = precondition(&obj)?;
    // Custom resources need a resourceVersion on update (nodes allow unconditional updates);
    // one that does not exist is NotFound first, whatever the body says: an update never
    // creates (`AllowCreateOnUpdate` is false for custom resources and Nodes alike). Existence
    // is judged at the log's head, as the update itself is.
    let exists = hub.exists(kind, &name).await.map_err(api_err(hub))?;
    if pre.is_none() && scope == Scope::Main && kind != Kind::Node && exists {
        let invalid = crate::validation::Invalid {
            kind: kind.to_string(),
            name: name.clone(),
            causes: vec![crate::validation::FieldError::new(
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            )],
        };
        return Err(api_err(hub)(CommandError::Invalid(invalid)));
    }
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mgr = manager(&q, &declared);
    let api_version = kind.api_version(hub.group());
    let group = hub.group().to_string();
    let updated = hub
        .update(kind, &name, scope, pre, &actor, |cur| {
            let mut new = obj.clone();
            admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
            if new["metadata"].get("managedFields").is_none() {
                new["metadata"]["managedFields"] = cur["metadata"]["managedFields"].clone();
            }
            if scope == Scope::Main {
                let changed = changed_after_defaults(&group, kind, cur, &new);
                fields::record(&mut new, &mgr, "Update", &changed, &api_version, &now_string());
            }
            Ok(new)
        })
        .await
        .map_err(api_err(hub))?;
    let warnings = selection_warning(hub, kind, &updated, warnings);
    Ok(with_warnings(Json(updated).into_response(), &warnings))
}

/// The patch types mco accepts.
enum PatchKind {
    Merge(Value),
    Json(json_patch::Patch),
    Strategic(Value),
    Apply(Value),
}

async fn handle_patch(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let pool_keys = pool_keys_for(&user, hub);
    let (kind, name, scope) = object_write_target(hub, &uri)?;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let doc = parse_body(&headers, &body, &hub.limits())?;
    let dups = fields::duplicate_fields(&body);
    // The patch document's own type, as kube-apiserver decodes it first (`error decoding
    // patch: ...`): a JSON patch is an array of operations, every other patch an object.
    let json_patch = ct.starts_with("application/json-patch+json");
    if (json_patch && !doc.is_array()) || (!json_patch && !doc.is_object()) {
        let want = if json_patch {
            "[]handlers.jsonPatchOp"
        } else {
            "map[string]interface {}"
        };
        return Err(ApiError::bad_request(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type {want}",
            crate::validation::json_type(&doc)
        )));
    }
    let how = if json_patch {
        let patch: json_patch::Patch =
            serde_json::from_value(doc).map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
        limits::check_json_patch(&patch)?;
        PatchKind::Json(patch)
    } else if ct.starts_with("application/merge-patch+json") {
        PatchKind::Merge(doc)
    } else if ct.starts_with("application/strategic-merge-patch+json") {
        // Built-in kinds take strategic merge patches (Lease has no list with a merge key:
        // the patch merges as a JSON merge patch); custom resources do not.
        if !matches!(kind, Kind::Node | Kind::Lease) {
            return Err(ApiError::unsupported_patch(kind.as_str()));
        }
        PatchKind::Strategic(doc)
    } else if ct.starts_with("application/apply-patch+yaml") {
        PatchKind::Apply(doc)
    } else {
        return Err(ApiError::unsupported_patch(kind.as_str()));
    };
    let (actor, declared) = request_actor(&user, &headers, &q)?;
    let mgr = manager(&q, &declared);
    let mode = if scope == Scope::Main {
        validation(&q)?
    } else {
        Validation::Ignore
    };
    let api_version = kind.api_version(hub.group());
    let group = hub.group().to_string();
    if let PatchKind::Apply(applied) = &how {
        if q.field_manager.as_deref().unwrap_or("").is_empty() {
            return Err(ApiError::bad_request(
                "PATCH requests for apply must include the fieldManager query parameter",
            ));
        }
        crate::command::check_shape(kind, applied).map_err(api_err(hub))?;
        let warnings = check_fields(hub, kind, applied, &dups, mode).map_err(api_err(hub))?;
        let force = Params::flag(&q.force);
        // Create or update as the write will be judged: at the log's head, not the projection
        // (an object created but not yet readable is updated, not created twice).
        let exists = hub.exists(kind, &name).await.map_err(api_err(hub))?;
        if !exists && scope == Scope::Main {
            let mut obj = last_applied::server_side_apply(None, applied, &mgr, force, &api_version, &now_string())
                .map_err(|c| ApiError::apply_conflict(&c))?;
            obj["metadata"]["name"] = json!(crate::model::key_name(&name));
            if let Some(ns) = crate::model::key_namespace(&name).filter(|_| kind.is_namespaced()) {
                set_request_namespace(&mut obj, ns)?;
            }
            admit_node_write(&user, kind, &name, scope, None, &obj, &pool_keys).map_err(api_err(hub))?;
            if kind == Kind::Node {
                crate::auth::registration_labels(&user, &mut obj);
            }
            let created = hub.create(kind, obj, &actor).await.map_err(api_err(hub))?;
            let warnings = selection_warning(hub, kind, &created, warnings);
            return Ok(with_warnings(
                (StatusCode::CREATED, Json(created)).into_response(),
                &warnings,
            ));
        }
        let conflict = std::sync::Mutex::new(None);
        let r = hub
            .update(kind, &name, scope, None, &actor, |cur| {
                let new = last_applied::server_side_apply(Some(cur), applied, &mgr, force, &api_version, &now_string())
                    .map_err(|c| {
                        let msg = c.message();
                        *conflict.lock().expect("lock") = Some(c);
                        CommandError::BadRequest(msg)
                    })?;
                admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
                Ok(new)
            })
            .await;
        if let Some(c) = conflict.into_inner().expect("lock") {
            return Err(ApiError::apply_conflict(&c));
        }
        let applied_obj = r.map_err(api_err(hub))?;
        let warnings = selection_warning(hub, kind, &applied_obj, warnings);
        return Ok(with_warnings(Json(applied_obj).into_response(), &warnings));
    }
    let pre = match &how {
        PatchKind::Merge(d) | PatchKind::Strategic(d) => precondition(d)?,
        _ => None,
    };
    let warnings = std::sync::Mutex::new(Vec::new());
    let not_applied = std::sync::Mutex::new(None);
    let updated = hub
        .update(kind, &name, scope, pre, &actor, |cur| {
            let mut new = cur.clone();
            match &how {
                PatchKind::Merge(p) => json_patch::merge(&mut new, p),
                PatchKind::Strategic(p) => fields::strategic_merge(&mut new, p),
                PatchKind::Json(p) => {
                    new = fields::apply_json_patch(&new, p).map_err(|message| {
                        *not_applied.lock().expect("lock") = Some(message.clone());
                        CommandError::BadRequest(message)
                    })?
                }
                PatchKind::Apply(_) => unreachable!("handled above"),
            }
            // A patch may replace the whole object or its metadata with another type.
            crate::command::check_shape(kind, &new)?;
            admit_node_write(&user, kind, &name, scope, Some(cur), &new, &pool_keys)?;
            *warnings.lock().expect("lock") = check_fields_in(&group, kind, &new, &dups, mode)?;
            if scope == Scope::Main {
                let changed = changed_after_defaults(&group, kind, cur, &new);
                fields::record(&mut new, &mgr, "Update", &changed, &api_version, &now_string());
            }
            Ok(new)
        })
        .await;
    if let Some(cause) = not_applied.into_inner().expect("lock") {
        return Err(ApiError::patch_does_not_apply(cause));
    }
    let updated = updated.map_err(api_err(hub))?;
    let warnings = warnings.into_inner().expect("lock");
    let warnings = selection_warning(hub, kind, &updated, warnings);
    Ok(with_warnings(Json(updated).into_response(), &warnings))
}

/// [`check_fields`] without a hub (inside update closures). Unknown keys inside a
/// MachineConfig's Ignition config are only ever warnings, as Ignition itself warns about unused
/// keys (and MCO's CRD preserves unknown fields there).
fn check_fields_in(
    group: &str,
    kind: Kind,
    input: &Value,
    duplicates: &[String],
    mode: Validation,
) -> Result<Vec<String>, CommandError> {
    if mode == Validation::Ignore {
        return Ok(Vec::new());
    }
    // Unknown fields are judged on the typed round trip alone, before semantic validation, as
    // the API server's strict decoding comes before validation.
    let normalized = crate::command::decode(kind, input.clone(), group)?;
    let unknown = fields::unknown_fields(input, &normalized);
    let msgs: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .chain(duplicates.iter().map(|f| format!("duplicate field {f:?}")))
        .collect();
    if mode == Validation::Strict && !msgs.is_empty() {
        return Err(CommandError::BadRequest(format!(
            "{k} in version \"v1\" cannot be handled as a {k}: strict decoding error: {}",
            msgs.join(", "),
            k = kind.as_str()
        )));
    }
    let mut warnings = msgs;
    if kind == Kind::MachineConfig {
        warnings.extend(
            fields::unknown_ignition_keys(&input["spec"]["config"])
                .into_iter()
                .map(|f| format!("unknown field {f:?}")),
        );
    }
    Ok(warnings)
}

async fn handle_delete(
    State(st): State<ApiState>,
    uri: Uri,
    Query(q): Query<Params>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let (mut actor, _) = request_actor(&user, &headers, &q)?;
    // kubectl sends DeleteOptions in the body: honour dryRun and the uid/resourceVersion
    // preconditions.
    let opts = delete_options(&headers, &body, &hub.limits())?;
    for v in opts.dry_run.iter().flatten() {
        actor.dry_run |= dry_run_value(Some(v))?;
    }
    match target(hub, &uri)? {
        Target::Object(kind, name, Scope::Main) => {
            // NodeRestriction judges a node's deletes of leases too (its own lease only).
            if kind == Kind::Lease {
                admit_node_write(&user, kind, &name, Scope::Main, None, &Value::Null, &Default::default())
                    .map_err(api_err(hub))?;
            }
            // The preconditions are judged by the Hub against the log's head, as the delete
            // is (an object created again but not yet readable has a new uid).
            let pre = opts.preconditions.clone().unwrap_or_default();
            let preconditions = crate::command::Preconditions {
                uid: pre.uid,
                resource_version: pre.resource_version,
            };
            let propagation = propagation(&q, &opts)?;
            let obj = hub
                .delete_if(kind, &name, &preconditions, propagation, &actor)
                .await
                .map_err(api_err(hub))?;
            Ok(Json(obj).into_response())
        }
        // deletecollection: every object the label/field selectors match.
        Target::Collection(kind, namespace) => {
            let labels = LabelQuery::parse(q.label_selector.as_deref().unwrap_or("")).map_err(ApiError::bad_request)?;
            let fields = FieldQuery::parse_for(kind, q.field_selector.as_deref().unwrap_or(""))
                .map_err(ApiError::bad_request)?
                .in_namespace(namespace.as_deref());
            let names: Vec<String> = hub
                .state()
                .list_json(kind)
                .into_iter()
                .filter(|o| labels.matches(o) && fields.matches(o))
                .map(|o| crate::command::object_key(kind, &o))
                .collect();
            let propagation = propagation(&q, &opts)?;
            let mut items = Vec::new();
            for n in names {
                match hub.delete(kind, &n, None, propagation, &actor).await {
                    Ok(o) => items.push(o),
                    Err(CommandError::NotFound { .. }) => {}
                    Err(e) => return Err(api_err(hub)(e)),
                }
            }
            Ok(Json(
                json!({"apiVersion": kind.api_version(hub.group()), "kind": format!("{}List", kind.as_str()),
                "metadata": {"resourceVersion": hub.state().seq.to_string()}, "items": items}),
            )
            .into_response())
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
