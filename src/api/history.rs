//! The history surface of the API, read-only and Kubernetes-style:
//! `history.mco.dev/v1` `events` (the audit log: filters, `limit`/`continue`, watch, Table) and
//! `/api/v1/events` (the same log as `core/v1` Events, for `kubectl get events` and
//! `kubectl describe`).
//!
//! Owns query parsing (field selectors `object.kind`, `object.name`, `actor`, `type`, and
//! `pool` for a pool's story: the pool, its renders, its MachineConfigs and nodes;
//! `since`/`until` as RFC 3339 times or `rv:N`) and pagination; the query itself (the choice
//! between the per-object index and a scan of the log) is [`crate::query::events`]. Reads never
//! go past the published (durable) seq. The shapes of the entries are [`crate::history`]'s.

use super::points::{expired, store_error};
use super::{table, ApiError, ApiState};
use crate::command::Hub;
use crate::event::Event;
use crate::history::{self, Filter};
use crate::query::{self, Point};
use crate::store::StoreError;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;

/// Routes of `history.mco.dev`'s discovery and events (merged into the API router; the
/// group's diffs, rollbacks, previews and store maintenance mount their own).
pub fn routes() -> Router<ApiState> {
    Router::new()
        .route(
            "/apis/history.mco.dev",
            get(|| async { Json(super::discovery::group(history::GROUP, "")) }),
        )
        .route("/apis/history.mco.dev/v1", get(|| async { Json(discovery_v1()) }))
        .route("/apis/history.mco.dev/v1/events", get(list_events))
        .route("/apis/history.mco.dev/v1/events/{seq}", get(get_event))
}

/// `/apis/history.mco.dev/v1`: `events`, read-only.
pub fn discovery_v1() -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": history::API_VERSION, "resources": [
        {"name": "events", "singularName": "event", "namespaced": false, "kind": "Event", "verbs": ["get", "list", "watch"], "shortNames": ["hist"]},
    ]})
}

/// Query parameters of history reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryParams {
    field_selector: Option<String>,
    limit: Option<String>,
    #[serde(rename = "continue")]
    continue_: Option<String>,
    since: Option<String>,
    until: Option<String>,
    watch: Option<String>,
    resource_version: Option<String>,
    include_object: Option<String>,
    timeout_seconds: Option<String>,
    /// `oldest` (the default) or `newest`: the order of a list's entries.
    order: Option<String>,
}

/// Most entries answered in one page when the client sets no `limit`.
const DEFAULT_PAGE: usize = 500;

/// The `key=value` (or `key==value`) pairs of a `fieldSelector`.
fn selector_pairs(selector: Option<&str>) -> Result<Vec<(&str, &str)>, ApiError> {
    selector
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|part| {
            part.split_once("==")
                .or_else(|| part.split_once('='))
                .ok_or_else(|| ApiError::bad_request(format!("invalid field selector {part:?}")))
        })
        .collect()
}

/// The filter of a history query: field selectors plus `since`/`until`/`continue`.
fn filter_of(hub: &Hub, q: &HistoryParams) -> Result<Filter, ApiError> {
    let mut f = Filter {
        until: hub.published_seq(),
        ..Default::default()
    };
    for (k, v) in selector_pairs(q.field_selector.as_deref())? {
        let v = Some(v.to_string());
        match k {
            "object.kind" => f.kind = v,
            "object.name" => f.name = v,
            "actor" => f.actor = v,
            "type" => f.event_type = v,
            "pool" => {
                let gone = query::deleted_machine_configs(hub).map_err(store_error)?;
                f.about = Some(history::About::pool(&hub.state(), v.as_deref().unwrap_or(""), &gone));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                "\"{other}\" is not a known field selector: only \"object.kind\", \"object.name\", \"actor\", \"type\", \"pool\""
            )))
            }
        }
    }
    if let Some(s) = q.since.as_deref().filter(|s| !s.is_empty()) {
        f.after = match Point::parse(s).map_err(ApiError::bad_request)? {
            // since rv:N includes N
            Point::Seq(n) => n.saturating_sub(1),
            // since a time includes events at that millisecond
            Point::TimeMs(t) => match hub.store().seq_at_time(t - 1) {
                Ok(n) => n,
                Err(StoreError::Compacted { .. }) => hub.store().oldest_readable(),
                Err(e) => return Err(store_error(e)),
            },
        };
    }
    if let Some(u) = q.until.as_deref().filter(|s| !s.is_empty()) {
        let until = match Point::parse(u).map_err(ApiError::bad_request)?.seq(hub) {
            Ok(n) => n,
            Err(StoreError::Compacted { .. }) => 0,
            Err(e) => return Err(store_error(e)),
        };
        f.until = f.until.min(until);
    }
    f.newest_first = match q.order.as_deref() {
        None | Some("") | Some("oldest") => false,
        Some("newest") => true,
        Some(o) => {
            return Err(ApiError::bad_request(format!(
                "invalid order {o:?}: \"oldest\" (the default) or \"newest\""
            )))
        }
    };
    if let Some(c) = q.continue_.as_deref().filter(|s| !s.is_empty()) {
        let edge: u64 = c
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid continue token {c:?}")))?;
        if f.newest_first {
            // The token is the oldest seq the previous page answered: this page ends below it.
            f.until = f.until.min(edge.saturating_sub(1));
        } else {
            f.after = f.after.max(edge);
        }
    }
    Ok(f)
}

fn limit_of(q: &HistoryParams) -> Result<usize, ApiError> {
    match q.limit.as_deref() {
        None | Some("") | Some("0") => Ok(DEFAULT_PAGE),
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}"))),
    }
}

fn table_response(t: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, table::CONTENT_TYPE)], t).into_response()
}

/// A list's (or Table's) `metadata`: its resourceVersion and, when more entries remain, the
/// `continue` token of the next page (kubectl follows it: without it, `kubectl get` stops at
/// its first chunk).
fn list_metadata(rv: u64, more: Option<u64>) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = more {
        metadata["continue"] = json!(c.to_string());
    }
    metadata
}

fn col(name: &str, type_: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// The Table of history entries: `RV TIME ACTOR EVENT OBJECT SUMMARY` (wide adds `REASON`),
/// written row by row from the borrowed entries ([`table::Writer`]).
fn history_table(entries: &[Value], metadata: Value) -> Vec<u8> {
    let columns = [
        col(
            "RV",
            "string",
            "name",
            "The log sequence number (resourceVersion) of the event.",
            0,
        ),
        col("Time", "string", "", "When the event was appended (UTC).", 0),
        col("Actor", "string", "", "Who caused it.", 0),
        col("Event", "string", "", "The event type.", 0),
        col("Object", "string", "", "The object it is about.", 0),
        col("Summary", "string", "", "What happened.", 0),
        col("Reason", "string", "", "The reason the client gave.", 1),
    ];
    let mut w = table::Writer::new(&columns, &metadata, "Metadata", 1024 + entries.len() * 512);
    for e in entries {
        let object = format!(
            "{}/{}",
            e["object"]["kind"].as_str().unwrap_or("").to_lowercase(),
            e["object"]["name"].as_str().unwrap_or("")
        );
        let cells = (
            &e["metadata"]["name"],
            &e["time"],
            &e["actor"],
            &e["type"],
            object,
            &e["summary"],
            &e["reason"],
        );
        w.row(&cells, &e["metadata"], |_| {});
    }
    w.finish()
}

async fn list_events(
    State(st): State<ApiState>,
    Query(q): Query<HistoryParams>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if matches!(q.watch.as_deref(), Some("true") | Some("1")) {
        return watch_events(&st, &q).await;
    }
    let hub = st.hub.clone();
    let (items, more, rv) = super::support::off_runtime(move || {
        let filter = filter_of(&hub, &q)?;
        let (events, more) = query::events(&hub, &filter, limit_of(&q)?).map_err(store_error)?;
        let include = q.include_object.as_deref() == Some("Object");
        let items: Vec<Value> = events
            .iter()
            .map(|e| history::entry(e, hub.group(), include, hub.keys()))
            .collect();
        Ok((items, more, filter.until))
    })
    .await?;
    let metadata = list_metadata(rv, more);
    if table::wants_table(super::request::accept(&headers)) {
        return Ok(table_response(history_table(&items, metadata)));
    }
    Ok(
        Json(json!({"apiVersion": history::API_VERSION, "kind": "EventList", "metadata": metadata, "items": items}))
            .into_response(),
    )
}

async fn get_event(
    State(st): State<ApiState>,
    Path(seq): Path<String>,
    Query(q): Query<HistoryParams>,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let not_found = || ApiError {
        code: StatusCode::NOT_FOUND,
        reason: "NotFound",
        message: format!("events.{} {seq:?} not found", history::GROUP),
        details: json!({"name": seq, "group": history::GROUP, "kind": "events"}),
    };
    let n: u64 = seq.parse().map_err(|_| not_found())?;
    if n > hub.published_seq() {
        return Err(not_found());
    }
    if n < hub.store().oldest_readable() {
        return Err(expired(n, hub.store().oldest_readable()));
    }
    let ev = hub.store().event(n).map_err(store_error)?.ok_or_else(not_found)?;
    let include = q.include_object.as_deref() != Some("None");
    Ok(Json(history::entry(&ev, hub.group(), include, hub.keys())).into_response())
}

/// `?watch=true`: every new entry the filter selects, as `ADDED`, after `resourceVersion`
/// (default: now).
async fn watch_events(st: &ApiState, q: &HistoryParams) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let timeout = super::support::watch_timeout(q.timeout_seconds.as_deref())?;
    let mut filter = filter_of(hub, q)?;
    let from = match watch_start(hub, q).await? {
        Ok(from) => from,
        Err(expired) => return Ok(expired),
    };
    filter.after = filter.after.max(from);
    filter.until = u64::MAX;
    let (group, keys) = (hub.group().to_string(), hub.keys().clone());
    Ok(stream_log(st, Vec::new(), filter.after, timeout, move |ev| {
        filter
            .matches(ev)
            .then(|| history::entry(ev, &group, false, &keys).to_string().into_bytes())
    }))
}

/// The watch start of a history stream: `resourceVersion` (default: now), waited for when
/// newer than the log; `Err(response)` with Kubernetes' 410 ERROR event when older than the
/// retained history.
async fn watch_start(hub: &Hub, q: &HistoryParams) -> Result<Result<u64, Response>, ApiError> {
    let from = match q.resource_version.as_deref() {
        None | Some("") | Some("0") => hub.published_seq(),
        Some(rv) => rv
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
    };
    super::request::wait_for_resource_version(hub, from).await?;
    if from < hub.store().oldest_readable() {
        return Ok(Err(super::watch::watch_error(expired(
            from,
            hub.store().oldest_readable(),
        ))));
    }
    Ok(Ok(from))
}

/// Streams `initial` (objects' JSON) as `ADDED` lines (a watch's synthetic initial state), then
/// `{"type": "ADDED", "object": ...}` lines for every logged event after `after` that
/// `object_of` maps to an object's JSON, in seq order, until the client goes, shutdown, or `timeout`
/// (`timeoutSeconds`) has passed.
fn stream_log<F>(
    st: &ApiState,
    initial: Vec<Vec<u8>>,
    after: u64,
    timeout: Option<std::time::Duration>,
    object_of: F,
) -> Response
where
    F: Fn(&Event) -> Option<Vec<u8>> + Send + 'static,
{
    let hub = st.hub.clone();
    let shutdown = st.shutdown.clone();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let mut follower = super::follow::Follower::new(hub, after);
    super::support::spawn_stream(st, timeout, async move {
        for object in initial {
            if tx.send(Ok(added_line(&object))).await.is_err() {
                return;
            }
        }
        loop {
            let Some(events) = super::watch::next_for_watch(&mut follower, &tx, &shutdown).await else {
                return;
            };
            for ev in events {
                if let Some(object) = object_of(ev.event()) {
                    if tx.send(Ok(added_line(&object))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `{"type":"ADDED","object":<object>}` and a newline: one watch line of an object's JSON.
fn added_line(object: &[u8]) -> Bytes {
    let mut line = Vec::with_capacity(object.len() + 30);
    line.extend_from_slice(br#"{"type":"ADDED","object":"#);
    line.extend_from_slice(object);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

/// `GET /api/v1/events` (and the namespaced path kubectl uses): the log as `core/v1` Events,
/// oldest first. `fieldSelector` takes `involvedObject.kind`, `involvedObject.name`,
/// `involvedObject.uid`, `involvedObject.namespace` (ignored: mco's kinds are cluster-scoped),
/// `type` and `reason`; with a name only that object's events are read (the per-object index).
/// `limit`/`continue` page through them; without a name the newest [`DEFAULT_PAGE`] log entries
/// are the window, paged or not. A namespace (`/api/v1/namespaces/<ns>/events`) selects as
/// `metadata.namespace` does: every derived Event lives in `default`.
pub async fn core_events(
    st: &ApiState,
    q: &HistoryParams,
    namespace: Option<&str>,
    as_table: bool,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    // Checked on lists too, as Kubernetes decodes it with every ListOptions.
    let timeout = super::support::watch_timeout(q.timeout_seconds.as_deref())?;
    let (mut filter, mut extra) = core_filter(hub, q)?;
    if let Some(ns) = namespace {
        // A namespaced list sees that namespace's Events only (here: all of them, or none).
        extra.fields.push(("metadata.namespace".into(), ns.to_string()));
    }
    let include_object = q.include_object.as_deref() == Some("Object");
    if matches!(q.watch.as_deref(), Some("true") | Some("1")) {
        return watch_core_events(st, q, timeout, filter, extra, as_table, include_object).await;
    }
    if let Some(c) = q.continue_.as_deref().filter(|s| !s.is_empty()) {
        filter.after = c
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid continue token {c:?}")))?;
    } else {
        newest_window(&mut filter);
    }
    let limit = match q.limit.as_deref() {
        None | Some("") | Some("0") => usize::MAX - 1,
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
    };
    let rv = filter.until;
    let (items, more) = core_items(st, filter, extra, limit).await?;
    let metadata = list_metadata(rv, more);
    if as_table {
        return Ok(table_response(core_table(&items, metadata, include_object)));
    }
    Ok(Json(json!({"kind": "EventList", "apiVersion": "v1", "metadata": metadata, "items": items})).into_response())
}

/// `GET /api/v1/namespaces/<ns>/events/<name>`: the Event a list names `name`
/// (`<object>.<seq as 16 hex digits>`, [`history::core_event`]), derived from the log entry at
/// that seq, so `kubectl describe events` and a client's read of one Event work. Not found, in
/// kube-apiserver's words (`events "NAME" not found`, 404): a name of another shape, a seq not
/// written yet or compacted away, another object's name, a namespace other than `default`.
pub async fn core_event_named(
    st: &ApiState,
    namespace: Option<&str>,
    name: &str,
    as_table: bool,
    include: &str,
) -> Result<Response, ApiError> {
    let not_found = || ApiError {
        code: StatusCode::NOT_FOUND,
        reason: "NotFound",
        message: format!("events {name:?} not found"),
        details: json!({"name": name, "kind": "events"}),
    };
    let seq = name
        .rsplit_once('.')
        .filter(|(_, hex)| hex.len() == 16)
        .and_then(|(_, hex)| u64::from_str_radix(hex, 16).ok())
        .filter(|seq| *seq >= 1 && *seq <= st.hub.published_seq())
        .ok_or_else(not_found)?;
    if namespace.is_some_and(|ns| ns != "default") {
        return Err(not_found());
    }
    let hub = st.hub.clone();
    let event = super::support::off_runtime(move || {
        let ev = hub.store().event(seq).map_err(store_error)?;
        Ok(ev.map(|e| history::core_event(&e, hub.group(), hub.keys())))
    })
    .await?
    .filter(|e| e["metadata"]["name"] == name)
    .ok_or_else(not_found)?;
    if as_table {
        let rv = event["metadata"]["resourceVersion"].clone();
        return Ok(table_response(core_table(
            &[event],
            json!({"resourceVersion": rv}),
            include == "Object",
        )));
    }
    Ok(Json(event).into_response())
}

/// A list of Events without a name reads the newest [`DEFAULT_PAGE`] log entries only, paged
/// or not: kubectl asks in chunks of 500 and follows `continue`, and must get the same window
/// as a client that asks for everything (and a watch's initial state is that window too).
fn newest_window(filter: &mut Filter) {
    if filter.name.is_none() {
        filter.after = filter.until.saturating_sub(DEFAULT_PAGE as u64);
    }
}

/// The derived Events of the log entries `filter` selects (at most `limit` entries), those
/// `extra` matches, read off the runtime: the items and the continue point.
async fn core_items(
    st: &ApiState,
    filter: Filter,
    extra: CoreSelectors,
    limit: usize,
) -> Result<(Vec<Value>, Option<u64>), ApiError> {
    let hub = st.hub.clone();
    super::support::off_runtime(move || {
        let (events, more) = query::events(&hub, &filter, limit).map_err(store_error)?;
        let items: Vec<Value> = events
            .iter()
            .map(|e| history::core_event(e, hub.group(), hub.keys()))
            .filter(|e| extra.matches(e))
            .collect();
        Ok((items, more))
    })
    .await
}

/// Field selectors of `/api/v1/events` that are judged on the derived Event: each a field path
/// (as Kubernetes' Event field selectors name them) and the value it must have; an absent field
/// is the empty string, as in Kubernetes.
#[derive(Clone, Debug, Default)]
struct CoreSelectors {
    fields: Vec<(String, String)>,
    /// `involvedObject.kind=Lease` was asked for: the leases' events are shown.
    leases: bool,
}

impl CoreSelectors {
    fn matches(&self, e: &Value) -> bool {
        // A node lease's renewals are its heartbeat, not news: Kubernetes records no Event for
        // them, and neither does `/api/v1/events` unless asked for leases by kind.
        if e["involvedObject"]["kind"] == "Lease" && !self.leases {
            return false;
        }
        self.fields.iter().all(|(path, want)| {
            // The `source` selector is the source's component.
            let path = if path == "source" { "source.component" } else { path };
            let got = path.split('.').fold(e, |v, k| &v[k]);
            got.as_str().unwrap_or("") == want
        })
    }
}

/// The field selectors of `/api/v1/events`, as Kubernetes accepts them.
fn core_filter(hub: &Hub, q: &HistoryParams) -> Result<(Filter, CoreSelectors), ApiError> {
    let mut filter = Filter {
        until: hub.published_seq(),
        ..Default::default()
    };
    let mut extra = CoreSelectors::default();
    for (k, v) in selector_pairs(q.field_selector.as_deref())? {
        match k {
            // Served from the log's index.
            "involvedObject.kind" => {
                extra.leases = v == "Lease";
                filter.kind = Some(v.to_string())
            }
            "involvedObject.name" => filter.name = Some(v.to_string()),
            // Kubernetes' other selectable Event fields, judged on the derived Event.
            "involvedObject.uid"
            | "type"
            | "reason"
            | "involvedObject.namespace"
            | "metadata.namespace"
            | "involvedObject.apiVersion"
            | "involvedObject.fieldPath"
            | "involvedObject.resourceVersion"
            | "source"
            | "reportingComponent"
            | "metadata.name" => extra.fields.push((k.to_string(), v.to_string())),
            other => return Err(ApiError::bad_request(format!("field label not supported: {other}"))),
        }
    }
    Ok((filter, extra))
}

/// `kubectl get events -w`: every new Event the selectors match, as `ADDED` (a one-row
/// Table when kubectl asks for Tables), after `resourceVersion`. Without one (or with `0`) the
/// watch first sends the Events a list would return now, as `ADDED`, then follows from that
/// list's point: Kubernetes' "get state and start at most recent" (and "start at any") watch
/// semantics, which `kubectl events -w` relies on to show the old ones.
async fn watch_core_events(
    st: &ApiState,
    q: &HistoryParams,
    timeout: Option<std::time::Duration>,
    mut filter: Filter,
    extra: CoreSelectors,
    as_table: bool,
    include_object: bool,
) -> Result<Response, ApiError> {
    let hub = &st.hub;
    let initial_state = matches!(q.resource_version.as_deref(), None | Some("") | Some("0"));
    let mut initial = Vec::new();
    if initial_state {
        // `core_filter` set `until` to the head: the list is taken there and the watch follows
        // from there, so no Event falls between them.
        let mut window = filter.clone();
        newest_window(&mut window);
        let (items, _) = core_items(st, window, extra.clone(), usize::MAX - 1).await?;
        initial = items
            .into_iter()
            .map(|event| {
                let rv = event["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                if as_table {
                    core_table(std::slice::from_ref(&event), list_metadata(rv, None), include_object)
                } else {
                    event.to_string().into_bytes()
                }
            })
            .collect();
        filter.after = filter.until;
    } else {
        filter.after = match watch_start(hub, q).await? {
            Ok(from) => from,
            Err(expired) => return Ok(expired),
        };
    }
    filter.until = u64::MAX;
    let (group, keys) = (hub.group().to_string(), hub.keys().clone());
    Ok(stream_log(st, initial, filter.after, timeout, move |ev| {
        if !filter.matches(ev) {
            return None;
        }
        let event = history::core_event(ev, &group, &keys);
        if !extra.matches(&event) {
            return None;
        }
        Some(if as_table {
            core_table(
                std::slice::from_ref(&event),
                list_metadata(ev.seq, None),
                include_object,
            )
        } else {
            event.to_string().into_bytes()
        })
    }))
}

/// The Table `kubectl get events` prints: `LAST SEEN TYPE REASON OBJECT MESSAGE` (wide:
/// `SUBOBJECT SOURCE FIRST SEEN COUNT NAME`), as the Kubernetes API server prints Events;
/// written row by row from the borrowed Events ([`table::Writer`]).
fn core_table(items: &[Value], metadata: Value, include_object: bool) -> Vec<u8> {
    let now = jiff::Timestamp::now();
    let ago = |t: &Value| {
        t.as_str()
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| crate::gofmt::human_duration((now - t).get_seconds()))
            .unwrap_or_else(|| "<unknown>".into())
    };
    let columns = [
        col("Last Seen", "string", "", "Time since the most recent occurrence.", 0),
        col("Type", "string", "", "Type of this event (Normal, Warning).", 0),
        col("Reason", "string", "", "Why the action was taken.", 0),
        col("Object", "string", "", "The object this event is about.", 0),
        col(
            "Message",
            "string",
            "",
            "A human-readable description of the status of this operation.",
            0,
        ),
        col("Subobject", "string", "", "", 1),
        col("Source", "string", "", "The component reporting this event.", 1),
        col("First Seen", "string", "", "Time since the first occurrence.", 1),
        col("Count", "string", "", "How many times this event has occurred.", 1),
        col("Name", "string", "name", "", 1),
    ];
    // includeObject=Object (kubectl --sort-by) gets the whole Event.
    let include = if include_object { "Object" } else { "Metadata" };
    let mut w = table::Writer::new(&columns, &metadata, include, 1024 + items.len() * 512);
    for e in items {
        let object = format!(
            "{}/{}",
            e["involvedObject"]["kind"].as_str().unwrap_or("").to_lowercase(),
            e["involvedObject"]["name"].as_str().unwrap_or("")
        );
        let cells = (
            ago(&e["lastTimestamp"]),
            &e["type"],
            &e["reason"],
            object,
            &e["message"],
            "",
            &e["source"]["component"],
            ago(&e["firstTimestamp"]),
            &e["count"],
            &e["metadata"]["name"],
        );
        w.row(&cells, &e["metadata"], |out| {
            serde_json::to_writer(out, e).expect("JSON encodes")
        });
    }
    w.finish()
}
