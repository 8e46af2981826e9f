//! The write side of the history surface: rollbacks, impact previews and store maintenance.
//!
//! - `POST /apis/history.mco.dev/v1/rollbacks` `{"pool", "to" | "at" | "undo", "dryRun",
//!   "force"}`: restores the pool's source MachineConfigs to what they were when the target
//!   render was produced ([`crate::rollback`]), as one atomic batch with the caller's actor
//!   and reason; answers the plan and its impact. Refused (409) when other pools would change,
//!   unless `force`; a dry run only answers.
//! - `POST /apis/history.mco.dev/v1/previews` `{"apply": [objects], "delete": [{"kind",
//!   "name"}]}`: admits the writes without appending them and answers their impact
//!   ([`crate::preview`]).
//! - `GET /apis/history.mco.dev/v1/store/stats` and `POST .../store/compactions`
//!   `{"before": "rv:N" | TIME}`: [`crate::store::Store::stats`] and
//!   [`crate::store::Store::compact`].

use super::points::{rendered_at_error, store_error};
use super::request::{typed_body, user_actor};
use super::{ApiError, ApiState};
use crate::command::{Actor, Hub, Mutation};
use crate::event::EventType;
use crate::model::Kind;
use crate::preview::{impact, propose};
use crate::query::{rendered_at, Point};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

/// Routes of the rollbacks, previews and store maintenance (merged into the API router).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route("/apis/history.mco.dev/v1/rollbacks", post(rollback))
        .route("/apis/history.mco.dev/v1/previews", post(preview))
        .route("/apis/history.mco.dev/v1/store/stats", get(store_stats))
        .route("/apis/history.mco.dev/v1/store/compactions", post(compact))
}

/// The body of a rollback request.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackRequest {
    pub pool: String,
    /// A rendered config of the pool.
    #[serde(default)]
    pub to: Option<String>,
    /// A point (RFC 3339 time or `rv:N`): the render the pool targeted then.
    #[serde(default)]
    pub at: Option<String>,
    /// The render the pool targeted before its current one.
    #[serde(default)]
    pub undo: bool,
    #[serde(default)]
    pub dry_run: bool,
    /// Proceed even when other pools' rendered configs change.
    #[serde(default)]
    pub force: bool,
}

fn status(code: StatusCode, reason: &'static str, message: String) -> ApiError {
    ApiError {
        code,
        reason,
        message,
        details: json!({}),
    }
}

/// The render the pool targeted before `current`, from its history.
fn previous_render(hub: &Hub, pool: &str, current: &str) -> Result<String, ApiError> {
    let store = hub.store();
    let seqs = store
        .object_seqs(Kind::MachineConfigPool.as_str(), pool, 0, hub.published_seq())
        .map_err(store_error)?;
    for seq in seqs.into_iter().rev() {
        let Some(ev) = store.event(seq).map_err(store_error)? else {
            continue;
        };
        if ev.event_type() != Some(EventType::PoolConfigurationSet) {
            continue;
        }
        let body = ev.object().unwrap_or(Value::Null);
        let name = body["spec"]["configuration"]["name"].as_str().unwrap_or("");
        if !name.is_empty() && name != current {
            return Ok(name.to_string());
        }
    }
    // The pool's earlier targets were compacted away: the state at the cut still says what it
    // targeted then.
    let cut = store.oldest_readable();
    if cut > 0 {
        let then = store.state_at(cut).map_err(store_error)?;
        if let Some(name) = then.pools.get(pool).map(|p| p.spec.configuration.name.clone()) {
            if !name.is_empty() && name != current {
                return Ok(name);
            }
        }
    }
    Err(status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("pool {pool:?} has no render before {current} in the retained history"),
    ))
}

/// `POST /apis/history.mco.dev/v1/rollbacks`.
pub async fn rollback(
    State(st): State<ApiState>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let req: RollbackRequest = typed_body(&headers, &body, &hub.limits(), "Rollback")?;
    let now = hub.state().clone();
    let pool_now = now.pools.get(&req.pool).ok_or_else(|| {
        status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("machineconfigpools {:?} not found", req.pool),
        )
    })?;
    let current = pool_now.spec.configuration.name.clone();
    let target = match (&req.to, &req.at, req.undo) {
        (Some(to), None, false) => to.clone(),
        (None, Some(at), false) => {
            let seq = Point::parse(at)
                .map_err(ApiError::bad_request)?
                .seq(hub)
                .map_err(store_error)?;
            let store = hub.store().clone();
            let then = super::support::off_runtime(move || store.state_at(seq).map_err(store_error)).await?;
            let name = then
                .pools
                .get(&req.pool)
                .map(|p| p.spec.configuration.name.clone())
                .unwrap_or_default();
            if name.is_empty() {
                return Err(status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!(
                        "pool {:?} had no rendered config at {at} (resourceVersion {seq})",
                        req.pool
                    ),
                ));
            }
            name
        }
        (None, None, true) => previous_render(hub, &req.pool, &current)?,
        _ => return Err(ApiError::bad_request("give exactly one of to, at, undo")),
    };
    let (_, produced_at) = rendered_at(hub, &target, hub.published_seq()).map_err(rendered_at_error)?;
    let store = hub.store().clone();
    let then = super::support::off_runtime(move || Ok(store.state_at(produced_at)))
        .await?
        .map_err(|e| match e {
            crate::store::StoreError::Compacted { .. } => status(
                StatusCode::GONE,
                "Expired",
                format!("the sources of {target} were compacted away (it was produced at resourceVersion {produced_at}, before the retained history)"),
            ),
            other => store_error(other),
        })?;
    let plan = crate::rollback::plan(&then, &now, &req.pool, &target, produced_at).map_err(|e| {
        let code = match e {
            crate::rollback::RollbackError::NoPool(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        status(
            code,
            if code == StatusCode::NOT_FOUND {
                "NotFound"
            } else {
                "Invalid"
            },
            e.to_string(),
        )
    })?;
    let after = propose(&now, &plan.mutations).map_err(ApiError::bad_request)?;
    let impact = impact(&now, &after, hub.keys(), st.clock.now());
    let mut answer = serde_json::to_value(&plan).expect("a plan serializes");
    answer["apiVersion"] = json!(crate::history::API_VERSION);
    answer["kind"] = json!("Rollback");
    answer["impact"] = serde_json::to_value(&impact).expect("an impact serializes");
    answer["dryRun"] = json!(req.dry_run);
    answer["applied"] = json!(false);
    if !plan.other_pools.is_empty() && !req.force {
        let pools: Vec<String> = plan.other_pools.iter().map(|(p, r)| format!("{p} (-> {r})")).collect();
        let message = format!(
            "rolling pool {} back to {target} also changes pool(s) {}: the restored MachineConfigs feed them too; repeat with force to proceed",
            req.pool,
            pools.join(", ")
        );
        if !req.dry_run {
            return Err(status(StatusCode::CONFLICT, "Conflict", message));
        }
        answer["warning"] = json!(message);
    }
    if req.dry_run {
        return Ok(Json(answer).into_response());
    }
    let (mut actor, _): (Actor, _) = user_actor(&user, &headers);
    if actor.reason.is_empty() {
        actor.reason = format!("rollback of pool {} to {target}", req.pool);
    }
    let detail = format!("rollback of pool {} to {target}", req.pool);
    hub.batch(plan.mutations.clone(), &detail, &actor)
        .await
        .map_err(|e| ApiError::from_command(e, hub.group()))?;
    answer["applied"] = json!(true);
    answer["resourceVersion"] = json!(hub.published_seq().to_string());
    Ok(Json(answer).into_response())
}

/// The body of a preview request.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// Manifests as `mco apply` reads them: created when absent; when present, the object
    /// `mco apply` would leave ([`crate::apply::result`]: kubectl's three-way merge against the
    /// stored object and its last-applied annotation).
    #[serde(default)]
    pub apply: Vec<Value>,
    /// `{"kind", "name"}` of objects to delete.
    #[serde(default)]
    pub delete: Vec<Value>,
}

/// `POST /apis/history.mco.dev/v1/previews`.
pub async fn preview(
    State(st): State<ApiState>,
    axum::Extension(user): axum::Extension<crate::auth::User>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let req: PreviewRequest = typed_body(&headers, &body, &hub.limits(), "Preview")?;
    super::limits::check_documents(req.apply.len() + req.delete.len(), hub.limits().max_documents)?;
    let now = hub.state().clone();
    let mut mutations = Vec::new();
    for obj in req.apply {
        let kind = obj["kind"]
            .as_str()
            .and_then(Kind::parse)
            .ok_or_else(|| ApiError::bad_request(format!("unknown kind {}", obj["kind"])))?;
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        // Exactly what `mco apply` will write (the one definition, [`crate::apply::result`]):
        // the three-way merge against the stored object, so keys the manifest no longer has
        // since the last apply are gone from the preview too.
        mutations.push(match now.get_json(kind, &name) {
            Some(current) => Mutation::Replace {
                kind,
                name,
                object: crate::apply::result(&obj, Some(&current)),
            },
            None => Mutation::Create {
                kind,
                object: crate::apply::result(&obj, None),
            },
        });
    }
    for d in req.delete {
        let kind = d["kind"]
            .as_str()
            .and_then(Kind::parse)
            .ok_or_else(|| ApiError::bad_request(format!("unknown kind {}", d["kind"])))?;
        let name = d["name"].as_str().unwrap_or("").to_string();
        mutations.push(Mutation::Delete { kind, name });
    }
    // Admission exactly as the writes would get it, appending nothing.
    let (mut actor, _) = user_actor(&user, &headers);
    actor.dry_run = true;
    hub.batch(mutations.clone(), "", &actor)
        .await
        .map_err(|e| ApiError::from_command(e, hub.group()))?;
    let mutations: Vec<Mutation> = mutations
        .into_iter()
        .map(|m| match m {
            Mutation::Create { kind, object } | Mutation::Replace { kind, object, .. } => {
                let name = object["metadata"]["name"].as_str().unwrap_or("").to_string();
                let object = crate::command::normalize(kind, object, hub.group())
                    .map_err(|e| ApiError::from_command(e, hub.group()))?;
                Ok(if now.get_json(kind, &name).is_some() {
                    Mutation::Replace { kind, name, object }
                } else {
                    Mutation::Create { kind, object }
                })
            }
            delete => Ok(delete),
        })
        .collect::<Result<_, ApiError>>()?;
    let after = propose(&now, &mutations).map_err(ApiError::bad_request)?;
    let impact = impact(&now, &after, hub.keys(), st.clock.now());
    let mut answer = serde_json::to_value(&impact).expect("an impact serializes");
    answer["apiVersion"] = json!(crate::history::API_VERSION);
    answer["kind"] = json!("Impact");
    Ok(Json(answer).into_response())
}

/// `GET /apis/history.mco.dev/v1/store/stats`.
pub async fn store_stats(State(st): State<ApiState>) -> Result<Response, ApiError> {
    let store = st.hub.store().clone();
    let stats = tokio::task::spawn_blocking(move || store.stats())
        .await
        .expect("stats task")
        .map_err(store_error)?;
    let mut v = serde_json::to_value(&stats).expect("stats serialize");
    v["apiVersion"] = json!(crate::history::API_VERSION);
    v["kind"] = json!("StoreStats");
    Ok(Json(v).into_response())
}

/// The body of a compaction request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// Remove the history before this point (`rv:N` or an RFC 3339 time).
    pub before: String,
}

/// `POST /apis/history.mco.dev/v1/store/compactions`.
pub async fn compact(
    State(st): State<ApiState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let hub = st.hub.clone();
    let req: CompactRequest = typed_body(&headers, &body, &hub.limits(), "Compaction")?;
    let newest = hub.published_seq();
    let before = match Point::parse(&req.before).map_err(ApiError::bad_request)? {
        Point::Seq(n) => n,
        Point::TimeMs(t) => match hub.store().seq_at_time(t) {
            Ok(n) => n + 1,
            // Before the retained history: already compacted, nothing to do.
            Err(crate::store::StoreError::Compacted { .. }) => 0,
            Err(e) => return Err(store_error(e)),
        },
    };
    if before > newest + 1 {
        return Err(ApiError::bad_request(format!(
            "cannot compact before {}: the newest resourceVersion is {newest}",
            req.before
        )));
    }
    let store = hub.store().clone();
    let report = tokio::task::spawn_blocking(move || store.compact(before))
        .await
        .expect("compaction task")
        .map_err(store_error)?;
    hub.store().flush().await.map_err(store_error)?;
    let mut v = serde_json::to_value(&report).expect("report serializes");
    v["apiVersion"] = json!(crate::history::API_VERSION);
    v["kind"] = json!("Compaction");
    Ok(Json(v).into_response())
}
