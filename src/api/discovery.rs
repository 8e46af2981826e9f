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
    v.sort_by_key(|x| version_priority(x));
    v
}

/// Sort key of a version as Kubernetes orders a group's versions (apimachinery
/// `version.CompareKubeAwareVersionStrings`): GA before beta before alpha, a higher number first
/// within each; so `operator.openshift.io` prefers `v1` (MachineConfiguration) to `v1alpha1`
/// (ImageContentSourcePolicy).
fn version_priority(v: &str) -> (u8, std::cmp::Reverse<u32>, std::cmp::Reverse<u32>) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits = |s: &str| s.chars().take_while(char::is_ascii_digit).collect::<String>();
    let major = digits(rest);
    let tail = &rest[major.len()..];
    let major = major.parse().unwrap_or(0);
    let (stage, minor) = if let Some(m) = tail.strip_prefix("beta") {
        (1, m.parse().unwrap_or(0))
    } else if let Some(m) = tail.strip_prefix("alpha") {
        (2, m.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stage, std::cmp::Reverse(major), std::cmp::Reverse(minor))
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
            "name": r.plural, "singularName": r.name.to_ascii_lowercase(), "namespaced": r.namespaced, "kind": r.name,
            "verbs": VERBS, "shortNames": short,
        }));
        if r.status {
            out.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.name,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out})
}

/// `/api/v1`: nodes, events (read-only, synthesised from the event log) and pods (always empty).
pub fn core_v1() -> Value {
    let mut list = resource_list("v1", &[Kind::Node], false);
    if let Some(r) = list["resources"].as_array_mut() {
        r.push(
            json!({"name": "events", "singularName": "event", "namespaced": true, "kind": "Event",
            "verbs": ["get", "list", "watch"], "shortNames": ["ev"]}),
        );
        // Always empty (mco runs no workloads), and in the `all` category as kube-apiserver's
        // pods are, so `kubectl get all` answers "No resources found" instead of an unknown
        // resource type.
        r.push(
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
            "verbs": ["get", "list"], "shortNames": ["po"], "categories": ["all"]}),
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_group_prefers_its_ga_version() {
        assert_eq!(
            super::versions_of("operator.openshift.io", crate::model::DEFAULT_GROUP),
            ["v1", "v1alpha1"]
        );
        let mut v = vec!["v1alpha1", "v1beta1", "v2", "v1", "v2beta1"];
        v.sort_by_key(|x| super::version_priority(x));
        assert_eq!(v, ["v2", "v1", "v2beta1", "v1beta1", "v1alpha1"]);
    }
}
