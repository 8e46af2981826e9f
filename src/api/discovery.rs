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

fn resource_list(group_version: &str, resources: &[Resource]) -> Value {
    let mut out = Vec::new();
    for r in resources {
        out.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": false, "kind": r.kind,
            "verbs": VERBS, "shortNames": r.short, "categories": ["all"],
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

/// `/api/v1`: nodes.
pub fn core_v1() -> Value {
    resource_list("v1", &CORE_RESOURCES)
}

/// `/apis/<group>/v1`: machineconfigs and machineconfigpools.
pub fn group_v1(group: &str) -> Value {
    resource_list(&format!("{group}/v1"), &GROUP_RESOURCES)
}

/// `/apis/<group>`.
pub fn group(group: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv})
}

/// `/apis`.
pub fn groups(group: &str) -> Value {
    let mut g = self::group(group);
    if let Some(m) = g.as_object_mut() {
        m.remove("kind");
        m.remove("apiVersion");
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [g]})
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}
