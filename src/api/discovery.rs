//! Kubernetes discovery documents, so that the stock kubectl finds mco's kinds:
//! `/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/v1`.
//!
//! Legacy discovery only: kubectl asks for aggregated discovery (`apidiscovery.k8s.io/v2`)
//! first and falls back to these plain documents when the answer is not of that type.

use serde_json::{json, Value};

use crate::model::{Kind, ACCEPTED_GROUPS};

/// The kinds served under `group`/`version` (`configured`: the configured MachineConfig group,
/// whose kinds the other accepted group serves as an alias).
pub(crate) fn kinds_of(group: &str, version: &str, configured: &str) -> Vec<Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| {
            let i = k.info();
            let g_ok = match i.group {
                None => group == configured || ACCEPTED_GROUPS.contains(&group),
                Some(g) => g == group,
            };
            g_ok && i.version == version && !k.group(configured).is_empty()
        })
        .collect()
}

/// The versions of `group`, preferred first.
fn versions_of(group: &str, configured: &str) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for k in Kind::ALL {
        let i = k.info();
        let g_ok = match i.group {
            None => ACCEPTED_GROUPS.contains(&group) || group == configured,
            Some(g) => g == group,
        };
        if g_ok && !v.contains(&i.version) {
            v.push(i.version);
        }
    }
    v
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn resource_list(group_version: &str, kinds: &[Kind], alias: bool) -> Value {
    let mut out = Vec::new();
    for k in kinds {
        let r = k.info();
        // An alias group gets no short names: `kubectl get mcp` resolves to the configured
        // group alone, without kubectl's ambiguity warning.
        // No categories: MCO's CRDs and nodes are not in `kubectl get all`.
        let short: &[&str] = if alias { &[] } else { r.short };
        out.push(json!({
            "name": r.plural, "singularName": r.name.to_ascii_lowercase(), "namespaced": false, "kind": r.name,
            "verbs": VERBS, "shortNames": short,
        }));
        if r.status {
            out.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": false, "kind": r.name,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out})
}

/// `/api/v1`: nodes, and events (read-only, synthesised from the event log).
pub fn core_v1() -> Value {
    let mut list = resource_list("v1", &[Kind::Node], false);
    if let Some(r) = list["resources"].as_array_mut() {
        r.push(
            json!({"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
            "verbs": ["get", "list"], "shortNames": ["ev"]}),
        );
    }
    list
}

/// `/apis/<group>/<version>`: the kinds served there, `None` for an unknown version. The
/// accepted MachineConfig group that is not `configured` is an alias (no short names).
pub fn group_version(group: &str, version: &str, configured: &str) -> Option<Value> {
    let kinds = kinds_of(group, version, configured);
    if kinds.is_empty() {
        return None;
    }
    let alias = ACCEPTED_GROUPS.contains(&group) && group != configured;
    Some(resource_list(&format!("{group}/{version}"), &kinds, alias))
}

/// `/apis/<group>`.
pub fn group(group: &str, configured: &str) -> Value {
    let mut versions: Vec<Value> = versions_of(group, configured)
        .into_iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    if versions.is_empty() {
        versions.push(json!({"groupVersion": format!("{group}/v1"), "version": "v1"}));
    }
    let preferred = versions[0].clone();
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`, listing `groups` in order of preference.
pub fn groups(groups: &[String], configured: &str) -> Value {
    let list: Vec<Value> = groups
        .iter()
        .map(|name| {
            let mut g = group(name, configured);
            if let Some(m) = g.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            g
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list})
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}
