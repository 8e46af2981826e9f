//! The audit history: events of the log as the API and the CLI show them.
//!
//! Owns the shape of one history entry (`history.mco.dev/v1` `Event`), its one-line summary
//! (`applied machineconfig/99-worker-chrony generation 3`, `node worker-1 Working → Done on
//! rendered-worker-3f2a…`), the filters of a history query, and the derived Kubernetes
//! `core/v1` Event that `kubectl get events` and `kubectl describe` print. Pure: it reads events
//! handed to it and never touches the store (the API layer runs the queries).

use crate::event::{Event, EventType};
use crate::model::Kind;
use serde_json::{json, Value};

/// The API group and version of history entries.
pub const GROUP: &str = "history.mco.dev";
/// `history.mco.dev/v1`.
pub const API_VERSION: &str = "history.mco.dev/v1";

/// Which events a history query returns. `None` fields match anything; `after < seq <= until`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Object kind (`MachineConfig`, `MachineConfigPool`, `Node`).
    pub kind: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Who caused the event (the authenticated user: `admin`, `system:node:worker-0`; or
    /// `controller:render`). An impersonated write's actor, `admin as alice`, matches `admin`,
    /// `alice` and itself.
    pub actor: Option<String>,
    /// Event type (`MachineConfigUpdated`, ...).
    pub event_type: Option<String>,
    /// Only events after this seq.
    pub after: u64,
    /// Only events up to this seq.
    pub until: u64,
    /// When set, only events about these objects (`(kind, name)`) or about objects of a kind
    /// whose name starts with a prefix (`(kind, "rendered-worker-")`): a pool's story.
    pub about: Option<About>,
    /// Newest first (`?order=newest`): the query reads from `until` down, and its continue
    /// token is the oldest seq answered (the next page ends below it).
    pub newest_first: bool,
}

/// The objects a pool's story is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct About {
    /// `(kind, name)` of each object.
    pub objects: Vec<(String, String)>,
    /// `(kind, name prefix)`: every object of the kind whose name starts with it.
    pub prefixes: Vec<(String, String)>,
}

impl About {
    /// The story of pool `pool` in `state`: the pool, its rendered configs (every one the log
    /// has, by their `rendered-<pool>-` prefix), the MachineConfigs it selects now and the
    /// deleted ones in `gone` (their last version) that it selects, and the nodes that are its
    /// members now.
    pub fn pool(state: &crate::state::State, pool: &str, gone: &[crate::model::MachineConfig]) -> About {
        let mut objects = vec![(Kind::MachineConfigPool.as_str().to_string(), pool.to_string())];
        if let Some(p) = state.pools.get(pool) {
            for mc in state.machine_configs.values().map(|m| &**m).chain(gone) {
                if !crate::render::is_rendered_config(mc)
                    && crate::model::selector_matches(p.spec.machine_config_selector.as_ref(), &mc.metadata)
                {
                    objects.push((Kind::MachineConfig.as_str().to_string(), mc.name().to_string()));
                }
            }
            let pools: Vec<&crate::model::MachineConfigPool> = state.pools.values().map(|o| &**o).collect();
            let nodes: Vec<&crate::model::Node> = state.nodes.values().map(|o| &**o).collect();
            let membership = crate::rollout::pools_for_nodes(&pools, &nodes);
            for n in membership.nodes_of(pool) {
                objects.push((Kind::Node.as_str().to_string(), n.clone()));
            }
        }
        About {
            objects,
            prefixes: vec![(Kind::MachineConfig.as_str().to_string(), format!("rendered-{pool}-"))],
        }
    }

    fn matches(&self, ev: &Event) -> bool {
        self.objects.iter().any(|(k, n)| *k == ev.object_kind && *n == ev.name)
            || self
                .prefixes
                .iter()
                .any(|(k, p)| *k == ev.object_kind && ev.name.starts_with(p.as_str()))
    }
}

impl Filter {
    /// Whether `ev` passes every set field.
    pub fn matches(&self, ev: &Event) -> bool {
        ev.seq > self.after
            && ev.seq <= self.until
            && self.about.as_ref().is_none_or(|a| a.matches(ev))
            && self.kind.as_ref().is_none_or(|k| *k == ev.object_kind)
            && self.name.as_ref().is_none_or(|n| *n == ev.name)
            && self.actor.as_ref().is_none_or(|a| {
                *a == ev.actor
                    || ev
                        .actor
                        .split_once(" as ")
                        .is_some_and(|(by, user)| a == by || a == user)
            })
            && self.event_type.as_ref().is_none_or(|t| *t == ev.event_type)
    }
}

/// RFC 3339 of an event's append time (milliseconds).
pub fn event_time(ev: &Event) -> String {
    jiff::Timestamp::from_millisecond(ev.time_ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// Shortens `rendered-<pool>-<32 hex>` to its first 4 hex digits and an ellipsis, as the
/// summaries print it.
pub fn short(name: &str) -> String {
    match name.rsplit_once('-') {
        Some((head, hash)) if name.starts_with("rendered-") && hash.len() == 32 => format!("{head}-{}…", &hash[..4]),
        _ => name.to_string(),
    }
}

/// The value of one `field: "old" -> "new"` part of an event's detail (the format
/// [`crate::command`] writes), as `(old, new)`.
fn detail_change<'a>(detail: &'a str, field: &str) -> Option<(&'a str, &'a str)> {
    detail.split("; ").find_map(|part| {
        let rest = part.strip_prefix(field)?.strip_prefix(": ")?;
        let (old, new) = rest.split_once(" -> ")?;
        Some((old.trim_matches('"'), new.trim_matches('"')))
    })
}

/// The source MachineConfigs a rendered config was merged from (its attribution annotation).
fn rendered_sources(body: &Value) -> Vec<String> {
    body["metadata"]["annotations"][crate::render::ATTRIBUTION_ANNOTATION]
        .as_str()
        .and_then(|a| serde_json::from_str::<Value>(a).ok())
        .and_then(|a| a["sources"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// One line saying what an event did.
pub fn summary(ev: &Event, body: &Value, keys: &crate::model::Keys) -> String {
    let kind = ev.object_kind.to_lowercase();
    let name = &ev.name;
    let generation = body["metadata"]["generation"].as_i64();
    let Some(t) = ev.event_type() else {
        return format!("{} {kind}/{name}", ev.event_type);
    };
    let ann = |key: String| body["metadata"]["annotations"][key].as_str().unwrap_or("").to_string();
    match t {
        EventType::TokenIssued => format!("issued token {name}: {}", ev.detail),
        EventType::TokenRevoked => format!("revoked token {name}: {}", ev.detail),
        EventType::MachineConfigurationUpdated if ev.detail.starts_with("status:") => {
            format!("{kind}/{name} {}", ev.detail)
        }
        EventType::MachineConfigCreated
        | EventType::MachineConfigUpdated
        | EventType::PoolCreated
        | EventType::PoolUpdated
        | EventType::MachineConfigurationCreated
        | EventType::MachineConfigurationUpdated
        | EventType::ObjectCreated
        | EventType::ObjectUpdated => match generation {
            Some(g) => format!("applied {kind}/{name} generation {g}"),
            None => format!("applied {kind}/{name}"),
        },
        EventType::ObjectStatusUpdated => format!("{kind}/{name}: {}", ev.detail),
        EventType::MachineConfigDeleted
        | EventType::PoolDeleted
        | EventType::NodeDeleted
        | EventType::MachineConfigurationDeleted
        | EventType::ObjectDeleted => {
            let why = if ev.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", ev.detail)
            };
            format!("deleted {kind}/{name}{why}")
        }
        EventType::RenderedConfigGenerated => {
            let sources = rendered_sources(body);
            if sources.is_empty() {
                format!("rendered {}", short(name))
            } else {
                format!("rendered {} from {}", short(name), sources.join(", "))
            }
        }
        EventType::PoolConfigurationSet => {
            let target = body["spec"]["configuration"]["name"].as_str().unwrap_or("");
            format!("pool {name} now targets {}", short(target))
        }
        EventType::PoolStatusUpdated => format!("pool {name}: {}", ev.detail),
        EventType::PoolSelectingAll => format!("pool {name}: {}", ev.detail),
        // The first line; the diff that follows is in `detail` (`mco history` prints it).
        EventType::NodeConfigDrifted => format!("node {name}: drift of {}", ev.detail.lines().next().unwrap_or("")),
        EventType::NodeConfigReverted => {
            format!("node {name}: revert of {}", ev.detail.lines().next().unwrap_or(""))
        }
        EventType::NodeRegistered => format!("node {name} registered"),
        EventType::NodeDesiredConfigSet => {
            format!("node {name} targeted at {}", short(&ann(keys.desired_config())))
        }
        EventType::NodeStateChanged => {
            // A node between configs names both: a Degraded while updating failed on the
            // desired one, not on the one it still runs.
            let (on, desired) = (ann(keys.current_config()), ann(keys.desired_config()));
            let current = if desired.is_empty() || desired == on {
                short(&on)
            } else {
                format!("{} (updating to {})", short(&on), short(&desired))
            };
            let reason = ann(keys.reason());
            let because = if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            };
            match detail_change(&ev.detail, "state") {
                Some((old, new)) if !old.is_empty() => format!("node {name} {old} → {new} on {current}{because}"),
                Some((_, new)) => format!("node {name} {new} on {current}{because}"),
                None => format!("node {name} {} on {current}{because}", ann(keys.state())),
            }
        }
        EventType::NodeDrainRequested => {
            let what = ann(keys.desired_drain());
            match what.split_once('-') {
                Some((verb, config)) => format!("node {name} asks to {verb} for {}", short(config)),
                None => format!("node {name} drain request {what}"),
            }
        }
        EventType::NodeActionsChosen => {
            let actions = ann(crate::disruption::ACTIONS_ANNOTATION.to_string());
            match actions.rsplit_once(" for ") {
                Some((what, config)) => format!("node {name} plans {what} for {}", short(config)),
                None => format!("node {name} plans {actions}"),
            }
        }
        EventType::NodeDrained => format!("node {name} cordoned and drained"),
        EventType::NodeUncordoned => format!("node {name} uncordoned"),
        EventType::NodeCordoned => format!("node {name} cordoned"),
        EventType::NodeUpdated => match detail_change(&ev.detail, "postConfigAction") {
            Some((_, "Rebooting")) => format!("node {name} reboots into {}", short(&ann(keys.desired_config()))),
            Some(("Rebooting", _)) => format!("node {name} is back from its reboot"),
            _ if ev.detail.is_empty() => format!("node {name} updated"),
            _ => format!("node {name}: {}", ev.detail),
        },
        EventType::NodeStatusUpdated => match detail_change(&ev.detail, "bootID") {
            Some((old, new)) if !old.is_empty() => {
                // The tail of a UUIDv7 boot id is its random part; the head is a timestamp.
                format!("node {name} booted (boot id …{})", &new[new.len().saturating_sub(8)..])
            }
            Some(_) => format!("node {name} reports ready"),
            None => match detail_change(&ev.detail, "Ready") {
                Some((_, "True")) => format!("node {name} Ready"),
                Some((_, status)) => format!("node {name} NotReady (Ready {status})"),
                None => format!("node {name} status updated"),
            },
        },
    }
}

/// The `history.mco.dev/v1` `Event` object of a log event; with `include_body`, the object as
/// the event left it (as it was, for a deletion) under `object.body`.
pub fn entry(ev: &Event, group: &str, include_body: bool, keys: &crate::model::Keys) -> Value {
    let mut body = ev.object().unwrap_or(Value::Null);
    if ev.object_kind == crate::auth::EVENT_KIND {
        // A token's hash stays in the log (the state is folded from it) but is never served.
        if let Some(m) = body.as_object_mut() {
            m.remove("hash");
        }
    }
    let time = event_time(ev);
    let api_version = Kind::parse(&ev.object_kind)
        .map(|k| k.api_version(group))
        .unwrap_or_default();
    let mut object = json!({
        "kind": ev.object_kind, "name": ev.name, "apiVersion": api_version,
        "uid": body["metadata"]["uid"], "resourceVersion": body["metadata"]["resourceVersion"],
    });
    if let Some(g) = body["metadata"]["generation"].as_i64() {
        object["generation"] = json!(g);
    }
    let summary = summary(ev, &body, keys);
    if include_body {
        object["body"] = body;
    }
    json!({
        "apiVersion": API_VERSION, "kind": "Event",
        "metadata": {"name": ev.seq.to_string(), "resourceVersion": ev.seq.to_string(), "uid": ev.uuid().to_string(), "creationTimestamp": time},
        "seq": ev.seq, "time": time, "type": ev.event_type, "object": object,
        "actor": ev.actor, "reason": ev.reason, "detail": ev.detail, "summary": summary,
    })
}

/// The Kubernetes `core/v1` Event derived from a log event, for `kubectl get events` and
/// `kubectl describe`: `reason` is MCO's event reason for the notes that reproduce one
/// (`SelectingAll`, `ConfigDriftDetected` for the drift of a path a DriftPolicy does not
/// Degrade for, `ConfigDriftReverted`, and [`crate::model::DAEMON_WARNINGS`] for a daemon's
/// Degraded after a failed on-disk check, whose message is the validation error as MCO's) and
/// the event type otherwise; `message` is the summary
/// (with the client's reason, when given); `type` is `Warning` for MCO's warnings, a node
/// reporting Degraded or Unreconcilable and a pool status with `Degraded=True`;
/// `source.component` is the actor.
pub fn core_event(ev: &Event, group: &str, keys: &crate::model::Keys) -> Value {
    let body = ev.object().unwrap_or(Value::Null);
    // A drift the node is Degraded for has MCO's ConfigDriftDetected from its Degraded write
    // (one per drift, as MCO); its note is served under its own type.
    let degrade_note = ev.event_type() == Some(EventType::NodeConfigDrifted) && ev.reason == "Degrade";
    let note = ev.event_type().and_then(EventType::k8s_event).filter(|_| !degrade_note);
    let state = body["metadata"]["annotations"][keys.state()].as_str().unwrap_or("");
    let degraded =
        ev.event_type() == Some(EventType::NodeStateChanged) && matches!(state, "Degraded" | "Unreconcilable");
    let pool_degraded = ev.event_type() == Some(EventType::PoolStatusUpdated) && ev.detail.contains("Degraded=True");
    let daemon_warning = crate::model::DAEMON_WARNINGS
        .into_iter()
        .find(|w| degraded && state == "Degraded" && ev.reason == *w);
    let drift = daemon_warning.is_some();
    let warning = note.is_some_and(|(_, w)| w) || degraded || pool_degraded;
    let reason = match (daemon_warning, note) {
        (Some(w), _) => w,
        (None, Some((r, _))) => r,
        (None, None) => ev.event_type.as_str(),
    };
    let mut message = match note {
        _ if drift => {
            crate::model::validation_error(body["metadata"]["annotations"][keys.reason()].as_str().unwrap_or(""))
                .to_string()
        }
        Some(_) => ev.detail.clone(),
        None => summary(ev, &body, keys),
    };
    let drift_note = matches!(
        ev.event_type(),
        Some(EventType::NodeConfigDrifted | EventType::NodeConfigReverted)
    );
    // A drift note's reason is its action, which its summary names already.
    if !ev.reason.is_empty() && !drift && !drift_note {
        message = format!("{message} (reason: {})", ev.reason);
    }
    let api_version = Kind::parse(&ev.object_kind)
        .map(|k| k.api_version(group))
        .unwrap_or_default();
    // An ObjectReference's fields are `omitempty`: an object without a uid (a token), or a kind
    // mco does not serve, leaves them out rather than sending null or "".
    let mut involved = json!({"kind": ev.object_kind, "name": ev.name});
    for (field, value) in [
        ("uid", &body["metadata"]["uid"]),
        ("apiVersion", &json!(api_version)),
        ("resourceVersion", &body["metadata"]["resourceVersion"]),
    ] {
        if value.as_str().is_some_and(|v| !v.is_empty()) {
            involved[field] = value.clone();
        }
    }
    // metav1.Time is written in whole seconds (RFC 3339, `Time.MarshalJSON`).
    let time = jiff::Timestamp::from_second(ev.time_ms.div_euclid(1000))
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string();
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{}.{:016x}", ev.name, ev.seq), "namespace": "default", "resourceVersion": ev.seq.to_string(), "uid": ev.uuid().to_string(), "creationTimestamp": time},
        "involvedObject": involved,
        "reason": reason, "message": message,
        "source": {"component": ev.actor}, "reportingComponent": ev.actor, "reportingInstance": "",
        "firstTimestamp": time, "lastTimestamp": time, "eventTime": null, "count": 1,
        "type": if warning { "Warning" } else { "Normal" },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Keys;

    fn ev(seq: u64, t: EventType, kind: &str, name: &str, detail: &str, body: Value) -> Event {
        Event {
            id: [1; 16],
            time_ms: 1_764_000_000_000,
            actor: "cli".into(),
            detail: detail.into(),
            ..Event::for_test(seq, t, kind, name, &body)
        }
    }

    #[test]
    fn summaries_say_what_happened() {
        let k = Keys::default();
        let g = "machineconfiguration.openshift.io";
        let r = "rendered-worker-3f2a0123456789abcdef0123456789ab";
        let check = |e: Event, want: &str| {
            let body = e.object().unwrap();
            assert_eq!(summary(&e, &body, &k), want);
        };
        check(
            ev(
                3,
                EventType::MachineConfigUpdated,
                "MachineConfig",
                "99-worker-chrony",
                "",
                json!({"metadata": {"generation": 3}}),
            ),
            "applied machineconfig/99-worker-chrony generation 3",
        );
        let sources = json!({"sources": ["00-worker", "99-worker-chrony"]}).to_string();
        check(
            ev(
                4,
                EventType::RenderedConfigGenerated,
                "MachineConfig",
                r,
                "",
                json!({"metadata": {"annotations": {crate::render::ATTRIBUTION_ANNOTATION: sources}}}),
            ),
            "rendered rendered-worker-3f2a… from 00-worker, 99-worker-chrony",
        );
        check(
            ev(
                5,
                EventType::NodeStateChanged,
                "Node",
                "worker-1",
                "currentConfig: \"a\" -> \"b\"; state: \"Working\" -> \"Done\"",
                json!({"metadata": {"annotations": {format!("{g}/currentConfig"): r, format!("{g}/state"): "Done"}}}),
            ),
            "node worker-1 Working → Done on rendered-worker-3f2a…",
        );
        check(
            ev(
                6,
                EventType::NodeStateChanged,
                "Node",
                "worker-1",
                "state: \"Done\" -> \"Degraded\"; reason: \"\" -> \"x\"",
                json!({"metadata": {"annotations": {format!("{g}/currentConfig"): r, format!("{g}/state"): "Degraded", format!("{g}/reason"): "content mismatch for file \"/etc/a\""}}}),
            ),
            "node worker-1 Done → Degraded on rendered-worker-3f2a…: content mismatch for file \"/etc/a\"",
        );
        let other = "rendered-worker-b18e0123456789abcdef0123456789ab";
        check(
            ev(
                6,
                EventType::NodeStateChanged,
                "Node",
                "worker-0",
                "state: \"Working\" -> \"Degraded\"",
                json!({"metadata": {"annotations": {format!("{g}/currentConfig"): r, format!("{g}/desiredConfig"): other, format!("{g}/state"): "Degraded", format!("{g}/reason"): "boom"}}}),
            ),
            "node worker-0 Working → Degraded on rendered-worker-3f2a… (updating to rendered-worker-b18e…): boom",
        );
        check(
            ev(7, EventType::MachineConfigDeleted, "MachineConfig", "x", "deleted with its owner MachineConfigPool \"infra\" (propagationPolicy Background)", json!({})),
            "deleted machineconfig/x (deleted with its owner MachineConfigPool \"infra\" (propagationPolicy Background))",
        );
        // The node-lifecycle controller's verdicts.
        let ready = |seq, detail: &str| ev(seq, EventType::NodeStatusUpdated, "Node", "worker-1", detail, json!({}));
        check(
            ready(8, "Ready: \"True\" -> \"Unknown\""),
            "node worker-1 NotReady (Ready Unknown)",
        );
        check(ready(9, "Ready: \"Unknown\" -> \"True\""), "node worker-1 Ready");
    }

    #[test]
    fn filters_and_core_events() {
        let e = ev(
            9,
            EventType::PoolSelectingAll,
            "MachineConfigPool",
            "p",
            "This machineconfigpool is selecting all nodes. A non-empty selector is required.",
            json!({"metadata": {"uid": "u"}}),
        );
        let f = Filter {
            kind: Some("MachineConfigPool".into()),
            until: 10,
            ..Default::default()
        };
        assert!(f.matches(&e));
        assert!(!Filter {
            actor: Some("kubectl".into()),
            until: 10,
            ..Default::default()
        }
        .matches(&e));
        assert!(!Filter {
            until: 8,
            ..Default::default()
        }
        .matches(&e));
        let core = core_event(&e, "machineconfiguration.openshift.io", &Keys::default());
        assert_eq!(core["reason"], "SelectingAll");
        assert_eq!(core["type"], "Warning");
        assert_eq!(core["involvedObject"]["uid"], "u");
        let entry = entry(&e, "machineconfiguration.openshift.io", false, &Keys::default());
        assert_eq!(entry["seq"], 9);
        assert_eq!(entry["object"]["kind"], "MachineConfigPool");
        assert!(entry["object"].get("body").is_none());
    }
}
