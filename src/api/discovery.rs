//! Kubernetes discovery documents, so that the stock kubectl finds mco's kinds:
//! `/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/v1`.
//!
//! Legacy discovery only: kubectl asks for aggregated discovery (`apidiscovery.k8s.io/v2`)
//! first and falls back to these plain documents when the answer is not of that type.

use serde_json::{json, Value};

/// One served resource as discovery describes it.
struct Resource {
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    short: &'static [&'static str],
    status: bool,
}

const GROUP_RESOURCES: [Resource; 2] = [
    Resource {
        plural: "machineconfigs",
        singular: "machineconfig",
        kind: "MachineConfig",
        short: &["mc"],
        status: false,
    },
    Resource {
        plural: "machineconfigpools",
        singular: "machineconfigpool",
        kind: "MachineConfigPool",
        short: &["mcp"],
        status: true,
    },
];

/// `operator.openshift.io/v1`: the node disruption policy's kind.
const OPERATOR_RESOURCES: [Resource; 1] = [Resource {
    plural: "machineconfigurations",
    singular: "machineconfiguration",
    kind: "MachineConfiguration",
    short: &[],
    status: true,
}];

const CORE_RESOURCES: [Resource; 1] = [Resource {
    plural: "nodes",
    singular: "node",
    kind: "Node",
    short: &["no"],
    status: true,
}];

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

fn resource_list(group_version: &str, resources: &[Resource], alias: bool) -> Value {
    let mut out = Vec::new();
    for r in resources {
        // An alias group gets no short names: `kubectl get mcp` resolves to the configured
        // group alone, without kubectl's ambiguity warning.
        // No categories: MCO's CRDs and nodes are not in `kubectl get all`.
        let short: &[&str] = if alias { &[] } else { r.short };
        out.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": false, "kind": r.kind,
            "verbs": VERBS, "shortNames": short,
        }));
        if r.status {
            out.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": false, "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out})
}

/// `/api/v1`: nodes, and events (read-only, synthesised from the event log).
pub fn core_v1() -> Value {
    let mut list = resource_list("v1", &CORE_RESOURCES, false);
    if let Some(r) = list["resources"].as_array_mut() {
        r.push(
            json!({"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
            "verbs": ["get", "list"], "shortNames": ["ev"]}),
        );
    }
    list
}

/// `/apis/<group>/v1`: machineconfigs and machineconfigpools; `alias` for the accepted group
/// that is not the configured one.
pub fn group_v1(group: &str, alias: bool) -> Value {
    if group == crate::disruption::GROUP {
        return resource_list(&format!("{group}/v1"), &OPERATOR_RESOURCES, false);
    }
    resource_list(&format!("{group}/v1"), &GROUP_RESOURCES, alias)
}

/// `/apis/<group>`.
pub fn group(group: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv})
}

/// `/apis`, listing `groups` in order of preference.
pub fn groups(groups: &[String]) -> Value {
    let list: Vec<Value> = groups
        .iter()
        .map(|name| {
            let mut g = group(name);
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
