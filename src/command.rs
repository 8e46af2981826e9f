//! The one write path: validate, turn a change into an event, append, fold, publish.
//!
//! Owns [`Hub`], which holds the store, the projection and the fan-out to watchers and
//! controllers. API handlers and controllers call [`Hub::create`], [`Hub::update`] and
//! [`Hub::delete`]; nothing else appends to the log. Every append carries the object's expected
//! resourceVersion (optimistic concurrency; a mismatch is [`CommandError::Conflict`], HTTP 409).
//! A write is acknowledged only after the store flushed it (group commit).

use crate::event::{Event, EventType, SCHEMA_VERSION};
use crate::model::{self, Keys, Kind, MachineConfig, MachineConfigPool, Node};
use crate::state::State;
use crate::store::{Store, StoreError, SNAPSHOT_EVERY};
use crate::validation::{FieldError, Invalid};
use serde_json::{json, Value};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use tokio::sync::{broadcast, watch};

/// Who is writing and why, recorded in every event (DESIGN.md section 3b).
#[derive(Clone, Debug, Default)]
pub struct Actor {
    /// `cli`, `daemon:worker-1`, `controller:render`, ...
    pub name: String,
    /// Free-text reason given by the client (may be empty).
    pub reason: String,
}

impl Actor {
    pub fn new(name: impl Into<String>) -> Actor {
        Actor {
            name: name.into(),
            reason: String::new(),
        }
    }
}

/// Which part of an object an update may change (Kubernetes' main resource vs `/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// metadata and spec; status is kept as stored.
    Main,
    /// status only; metadata and spec are kept as stored.
    Status,
}

/// Typed failures of a command, mapped one to one onto Kubernetes `Status` reasons.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{kind} {name:?} not found")]
    NotFound { kind: Kind, name: String },
    #[error("{kind} {name:?} already exists")]
    AlreadyExists { kind: Kind, name: String },
    #[error("Operation cannot be fulfilled on {kind} {name:?}: {message}")]
    Conflict { kind: Kind, name: String, message: String },
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One object change ready to become an event.
struct Change {
    kind: Kind,
    name: String,
    event_type: EventType,
    object: Value,
    /// `Some(0)`: the object must not exist; `Some(rv)`: it must be at rv; `None`: no check.
    expected_rv: Option<u64>,
    detail: String,
}

/// A published event, for watchers.
pub type Published = Arc<Event>;

/// The control plane's shared core: store + projection + fan-out.
pub struct Hub {
    store: Store,
    state: RwLock<State>,
    write_lock: tokio::sync::Mutex<()>,
    events_tx: broadcast::Sender<Published>,
    changed_tx: watch::Sender<u64>,
    keys: Keys,
}

impl Hub {
    /// Opens the hub over `store`, rebuilding the projection (newest snapshot + replay).
    pub fn open(store: Store, group: &str) -> Result<Arc<Hub>, StoreError> {
        let state = store.load_state()?;
        let seq = state.seq;
        let (events_tx, _) = broadcast::channel(4096);
        let (changed_tx, _) = watch::channel(seq);
        Ok(Arc::new(Hub {
            store,
            state: RwLock::new(state),
            write_lock: tokio::sync::Mutex::new(()),
            events_tx,
            changed_tx,
            keys: Keys::new(group),
        }))
    }

    /// The served API group (`machineconfiguration.openshift.io` by default).
    pub fn group(&self) -> &str {
        &self.keys.group
    }

    /// Annotation keys under the served group.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A read view of the projection. Hold it briefly: writers wait for it.
    pub fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().expect("state lock poisoned")
    }

    /// Live events, published after they are durable. Receivers must fill gaps from the store
    /// (two writers' events can be published out of seq order).
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.events_tx.subscribe()
    }

    /// Wakes whenever the projection changed (value = last seq).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed_tx.subscribe()
    }

    /// Creates an object. Status of a pool is ignored on create (controllers own it).
    pub async fn create(&self, kind: Kind, object: Value, actor: &Actor) -> Result<Value, CommandError> {
        let mut object = object;
        let generate = object["metadata"]["generateName"].as_str().unwrap_or("").to_string();
        if object_name(&object).is_empty() && !generate.is_empty() {
            // Kubernetes' generateName: the prefix plus five random characters.
            let suffix: String = uuid::Uuid::now_v7()
                .simple()
                .to_string()
                .chars()
                .rev()
                .take(5)
                .collect();
            object["metadata"]["name"] = json!(format!("{generate}{suffix}"));
        }
        let mut object = normalize(kind, object, self.group())?;
        let name = object_name(&object);
        if name.is_empty() {
            return Err(Invalid {
                kind: kind.to_string(),
                name,
                causes: vec![FieldError::new("metadata.name", "Required value: name is required")],
            }
            .into());
        }
        let meta = &mut object["metadata"];
        meta["uid"] = json!(uuid::Uuid::now_v7().to_string());
        meta["creationTimestamp"] = serde_json::to_value(model::now()).expect("time serializes");
        if let Some(m) = meta.as_object_mut() {
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
        }
        if kind != Kind::Node {
            meta["generation"] = json!(1);
        }
        if kind == Kind::MachineConfigPool {
            object["status"] = json!({});
            object = normalize(kind, object, self.group())?;
        }
        let event_type = match kind {
            Kind::MachineConfig if is_rendered(&object) => EventType::RenderedConfigGenerated,
            Kind::MachineConfig => EventType::MachineConfigCreated,
            Kind::MachineConfigPool => EventType::PoolCreated,
            Kind::Node => EventType::NodeRegistered,
        };
        let change = Change {
            kind,
            name,
            event_type,
            object,
            expected_rv: Some(0),
            detail: String::new(),
        };
        Ok(self.commit(vec![change], actor).await?.remove(0))
    }

    /// Updates an object with `f(current) -> new`, within `scope`. `precondition` is the
    /// resourceVersion the caller based its change on (a mismatch is a Conflict); without one,
    /// a concurrent change makes the update retry on the newer object (as Kubernetes' patch).
    /// An update that changes nothing appends nothing and returns the stored object.
    pub async fn update<F>(
        &self,
        kind: Kind,
        name: &str,
        scope: Scope,
        precondition: Option<u64>,
        actor: &Actor,
        f: F,
    ) -> Result<Value, CommandError>
    where
        F: Fn(&Value) -> Result<Value, CommandError>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (current, rv) = self.current(kind, name)?;
            if let Some(p) = precondition {
                if p != rv {
                    return Err(conflict(kind, name));
                }
            }
            let proposed = f(&current)?;
            let new = merge_scope(kind, &current, proposed, scope, self.group())?;
            if strip_rv(&new) == strip_rv(&current) {
                return Ok(current);
            }
            let (event_type, detail) = classify(kind, &current, &new, scope, &self.keys);
            let change = Change {
                kind,
                name: name.to_string(),
                event_type,
                object: new,
                expected_rv: Some(rv),
                detail,
            };
            match self.commit(vec![change], actor).await {
                Err(CommandError::Conflict { .. }) if precondition.is_none() && attempts < 5 => continue,
                other => return other.map(|mut v| v.remove(0)),
            }
        }
    }

    /// Deletes an object; returns it as it was.
    pub async fn delete(
        &self,
        kind: Kind,
        name: &str,
        precondition: Option<u64>,
        actor: &Actor,
    ) -> Result<Value, CommandError> {
        let (current, rv) = self.current(kind, name)?;
        if precondition.is_some_and(|p| p != rv) {
            return Err(conflict(kind, name));
        }
        let event_type = match kind {
            Kind::MachineConfig => EventType::MachineConfigDeleted,
            Kind::MachineConfigPool => EventType::PoolDeleted,
            Kind::Node => EventType::NodeDeleted,
        };
        let change = Change {
            kind,
            name: name.to_string(),
            event_type,
            object: current.clone(),
            expected_rv: Some(rv),
            detail: String::new(),
        };
        self.commit(vec![change], actor).await?;
        Ok(current)
    }

    /// The stored object and its resourceVersion; NotFound when absent.
    fn current(&self, kind: Kind, name: &str) -> Result<(Value, u64), CommandError> {
        let st = self.state();
        let cur = st.get_json(kind, name).ok_or_else(|| CommandError::NotFound {
            kind,
            name: name.to_string(),
        })?;
        Ok((cur, st.resource_version(kind, name).unwrap_or(0)))
    }

    /// Appends the changes as one atomic batch, folds them, waits for durability, publishes.
    async fn commit(&self, changes: Vec<Change>, actor: &Actor) -> Result<Vec<Value>, CommandError> {
        let guard = self.write_lock.lock().await;
        {
            let st = self.state();
            for c in &changes {
                let have = st.resource_version(c.kind, &c.name);
                match (c.expected_rv, have) {
                    (Some(0), Some(_)) => {
                        return Err(CommandError::AlreadyExists {
                            kind: c.kind,
                            name: c.name.clone(),
                        })
                    }
                    (Some(0), None) | (None, _) => {}
                    (Some(_), None) => {
                        return Err(CommandError::NotFound {
                            kind: c.kind,
                            name: c.name.clone(),
                        })
                    }
                    (Some(want), Some(have)) if want != have => return Err(conflict(c.kind, &c.name)),
                    _ => {}
                }
            }
        }
        let mut seq = self.store.last_seq();
        let time_ms = jiff::Timestamp::now().as_millisecond();
        let mut events = Vec::with_capacity(changes.len());
        let mut objects = Vec::with_capacity(changes.len());
        for mut c in changes {
            seq += 1;
            if !c.event_type.is_deletion() {
                c.object["metadata"]["resourceVersion"] = json!(seq.to_string());
            }
            events.push(Event {
                schema: SCHEMA_VERSION,
                seq,
                id: *uuid::Uuid::now_v7().as_bytes(),
                time_ms,
                event_type: c.event_type.as_str().to_string(),
                object_kind: c.kind.as_str().to_string(),
                name: c.name,
                actor: actor.name.clone(),
                reason: actor.reason.clone(),
                detail: c.detail,
                body: serde_json::to_vec(&c.object).expect("JSON encodes"),
            });
            objects.push(c.object);
        }
        self.store.append(&events)?;
        let snapshot = {
            let mut st = self.state.write().expect("state lock poisoned");
            let before = st.seq;
            for e in &events {
                st.apply(e);
            }
            (before / SNAPSHOT_EVERY != st.seq / SNAPSHOT_EVERY).then(|| st.clone())
        };
        if let Some(s) = snapshot {
            self.store.write_snapshot(&s)?;
        }
        drop(guard);
        self.store.flush().await?;
        for e in events {
            let _ = self.events_tx.send(Arc::new(e));
        }
        self.changed_tx.send_modify(|v| *v = (*v).max(seq));
        Ok(objects)
    }
}

fn conflict(kind: Kind, name: &str) -> CommandError {
    CommandError::Conflict {
        kind,
        name: name.to_string(),
        message: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

/// `metadata.name` of a JSON object, `""` when absent.
pub fn object_name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

fn strip_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    v
}

/// A rendered config: a MachineConfig owned by a pool and stamped by the controller.
fn is_rendered(v: &Value) -> bool {
    let owned_by_pool = v["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "MachineConfigPool"));
    owned_by_pool
        && v["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("rendered-"))
}

/// Parses `object` as `kind` (type errors name the field), validates it, and re-serializes it
/// in canonical shape with `apiVersion`/`kind` filled in.
pub fn normalize(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    let decoded = decode(kind, object, group)?;
    validate(kind, &decoded)?;
    Ok(decoded)
}

/// The typed round trip of [`normalize`] without the semantic validation: type errors name the
/// field; unknown fields are dropped (compare with the input to find them).
pub fn decode(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    let name = object_name(&object);
    let invalid = |field: String, message: String| Invalid {
        kind: kind.to_string(),
        name: name.clone(),
        causes: vec![FieldError::new(field, message)],
    };
    if let Some(k) = object.get("kind").and_then(Value::as_str) {
        if !k.is_empty() && k != kind.as_str() {
            return Err(CommandError::BadRequest(format!("the body is a {k}, not a {kind}")));
        }
    }
    let mut out = match kind {
        Kind::MachineConfig => {
            serde_json::to_value(parse_typed::<MachineConfig>(object).map_err(|(f, m)| invalid(f, m))?)
        }
        Kind::MachineConfigPool => {
            serde_json::to_value(parse_typed::<MachineConfigPool>(object).map_err(|(f, m)| invalid(f, m))?)
        }
        Kind::Node => serde_json::to_value(parse_typed::<Node>(object).map_err(|(f, m)| invalid(f, m))?),
    }
    .expect("model objects serialize");
    out["apiVersion"] = json!(kind.api_version(group));
    out["kind"] = json!(kind.as_str());
    Ok(out)
}

/// The semantic validation of a decoded object (MachineConfig and MachineConfigPool rules).
fn validate(kind: Kind, decoded: &Value) -> Result<(), CommandError> {
    match kind {
        Kind::MachineConfig => {
            let mc: MachineConfig =
                serde_json::from_value(decoded.clone()).map_err(|e| CommandError::BadRequest(e.to_string()))?;
            crate::manifest::validate_machine_config(&mc)?;
        }
        Kind::MachineConfigPool => {
            let p: MachineConfigPool =
                serde_json::from_value(decoded.clone()).map_err(|e| CommandError::BadRequest(e.to_string()))?;
            crate::manifest::validate_pool(&p)?;
        }
        Kind::Node => {
            // Kubernetes' metadata rules (MachineConfigs and pools get them from their own rules).
            let node: Node =
                serde_json::from_value(decoded.clone()).map_err(|e| CommandError::BadRequest(e.to_string()))?;
            crate::manifest::validate_node(&node)?;
        }
    }
    Ok(())
}

fn parse_typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        (
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })
}

/// Builds the stored object from the current one and a proposed one, keeping what `scope`
/// does not own, server-managed metadata, and bumping `generation` when the spec changed.
fn merge_scope(kind: Kind, current: &Value, proposed: Value, scope: Scope, group: &str) -> Result<Value, CommandError> {
    let mut new = match scope {
        Scope::Main => {
            let mut p = proposed;
            if kind != Kind::MachineConfig {
                p["status"] = current.get("status").cloned().unwrap_or(Value::Null);
            }
            p
        }
        Scope::Status => {
            let mut c = current.clone();
            c["status"] = proposed.get("status").cloned().unwrap_or(Value::Null);
            c
        }
    };
    if new["metadata"]["name"] != current["metadata"]["name"] {
        return Err(CommandError::BadRequest(format!(
            "the name of the object ({}) does not match the name in the URL ({})",
            new["metadata"]["name"].as_str().unwrap_or(""),
            current["metadata"]["name"].as_str().unwrap_or("")
        )));
    }
    for k in ["uid", "creationTimestamp", "generation"] {
        new["metadata"][k] = current["metadata"][k].clone();
    }
    if kind != Kind::Node && new.get("spec") != current.get("spec") {
        let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
        new["metadata"]["generation"] = json!(g + 1);
    }
    let mut out = normalize(kind, new, group)?;
    if kind == Kind::Node || out["metadata"]["generation"].is_null() {
        if let Some(m) = out["metadata"].as_object_mut() {
            if m.get("generation").is_some_and(Value::is_null) {
                m.remove("generation");
            }
        }
    }
    Ok(out)
}

/// Picks the event type of an update and a one-line summary of what changed.
fn classify(kind: Kind, old: &Value, new: &Value, scope: Scope, keys: &Keys) -> (EventType, String) {
    match (kind, scope) {
        (Kind::MachineConfig, _) => (EventType::MachineConfigUpdated, String::new()),
        (Kind::MachineConfigPool, Scope::Status) => (EventType::PoolStatusUpdated, pool_status_detail(new)),
        (Kind::MachineConfigPool, Scope::Main) => {
            if old["spec"]["configuration"] != new["spec"]["configuration"] {
                let name = new["spec"]["configuration"]["name"].as_str().unwrap_or("");
                (
                    EventType::PoolConfigurationSet,
                    format!("spec.configuration.name: {name}"),
                )
            } else {
                (EventType::PoolUpdated, String::new())
            }
        }
        (Kind::Node, Scope::Status) => (EventType::NodeStatusUpdated, String::new()),
        (Kind::Node, Scope::Main) => {
            let ann = |v: &Value, k: &str| v["metadata"]["annotations"][k].as_str().unwrap_or("").to_string();
            let mut parts = Vec::new();
            let mut changed = |key: String, short: &str| {
                let (a, b) = (ann(old, &key), ann(new, &key));
                if a != b {
                    parts.push(format!("{short}: {a:?} -> {b:?}"));
                    true
                } else {
                    false
                }
            };
            let desired = changed(keys.desired_config(), "desiredConfig");
            let current = changed(keys.current_config(), "currentConfig");
            let state = changed(keys.state(), "state");
            let reason = changed(keys.reason(), "reason");
            let drain_req = changed(keys.desired_drain(), "desiredDrain");
            let drain_done = changed(keys.last_applied_drain(), "lastAppliedDrain");
            let unsched = |v: &Value| v["spec"]["unschedulable"].as_bool().unwrap_or(false);
            let cordon = unsched(old) != unsched(new);
            if cordon {
                parts.push(format!("unschedulable: {} -> {}", unsched(old), unsched(new)));
            }
            let t = if desired {
                EventType::NodeDesiredConfigSet
            } else if current || state || reason {
                EventType::NodeStateChanged
            } else if drain_req {
                EventType::NodeDrainRequested
            } else if drain_done && unsched(new) {
                EventType::NodeDrained
            } else if cordon && unsched(new) {
                EventType::NodeCordoned
            } else if drain_done || cordon {
                EventType::NodeUncordoned
            } else {
                EventType::NodeUpdated
            };
            (t, parts.join("; "))
        }
    }
}

fn pool_status_detail(v: &Value) -> String {
    let s = &v["status"];
    let cond = |t: &str| {
        s["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == t))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string()
    };
    format!(
        "machines {}/{} updated, {} ready, {} unavailable, {} degraded; Updated={} Updating={} Degraded={}",
        s["updatedMachineCount"],
        s["machineCount"],
        s["readyMachineCount"],
        s["unavailableMachineCount"],
        s["degradedMachineCount"],
        cond("Updated"),
        cond("Updating"),
        cond("Degraded")
    )
}
