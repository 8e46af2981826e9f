//! Server-side printing: `meta.k8s.io/v1` Table responses with MCO's printer columns.
//!
//! Columns as MCO's CRDs declare them (`additionalPrinterColumns`, mco-facts section 11), and
//! for nodes as the Kubernetes API server prints them (`NAME STATUS ROLES AGE VERSION`, wide:
//! `INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME`) and leases
//! (`NAME HOLDER AGE`), MachineConfigNodes as MCO's CRD. Ages are computed here,
//! as the API server does for `date` columns.

use crate::gofmt::human_duration;
use crate::model::machine_config_node::MCN_COLUMNS;
use crate::model::{annotation, Keys, Kind, MachineConfig, MachineConfigPool, Node};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// Whether an `Accept` header asks for a Table (`application/json;as=Table;v=v1;g=meta.k8s.io`).
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table")
            && params.contains(&"g=meta.k8s.io")
            && (params.contains(&"v=v1") || params.contains(&"v=v1beta1"))
    })
}

/// The content type of a Table answer.
pub const CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// A Table as an answer, with [`CONTENT_TYPE`].
pub fn table_response(t: Value) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], t.to_string()).into_response()
}

fn col(name: &str, type_: &str, format: &str, description: &str, priority: i32) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// Column definitions of a kind.
pub fn columns(kind: Kind) -> Vec<Value> {
    let name = col("Name", "string", "name", "Name must be unique within a namespace.", 0);
    match kind {
        Kind::MachineConfigPool => vec![
            name,
            col("Config", "string", "", "The rendered MachineConfig the pool's nodes are on (.status.configuration.name)", 0),
            col("Updated", "string", "", "When all the machines in the pool are updated to the correct machine config.", 0),
            col("Updating", "string", "", "When at least one of machine is not either not updated or is in the process of updating to the desired machine config.", 0),
            col("Degraded", "string", "", "When progress is blocked on updating one or more nodes or the pool configuration is failing.", 0),
            col("MachineCount", "number", "", "Total number of machines in the machine config pool", 0),
            col("ReadyMachineCount", "number", "", "Total number of ready machines targeted by the pool", 0),
            col("UpdatedMachineCount", "number", "", "Total number of machines targeted by the pool that have the CurrentMachineConfig as their config", 0),
            col("DegradedMachineCount", "number", "", "Total number of machines marked degraded (or unreconcilable)", 0),
            col("Age", "date", "", "", 0),
        ],
        Kind::MachineConfig => vec![
            name,
            col("GeneratedByController", "string", "", "Version of the controller that generated the machineconfig. This will be empty if the machineconfig is not managed by a controller.", 0),
            col("IgnitionVersion", "string", "", "Version of the Ignition Config defined in the machineconfig.", 0),
            col("Age", "date", "", "", 0),
        ],
        Kind::Node => vec![
            name,
            col("Status", "string", "", "The status of the node", 0),
            col("Roles", "string", "", "The roles of the node", 0),
            col("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0),
            col("Version", "string", "", "Kubelet Version reported by the node.", 0),
            col("Internal-IP", "string", "", "List of addresses reachable to the node.", 1),
            col("External-IP", "string", "", "List of addresses reachable to the node.", 1),
            col("OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
            col("Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
            col("Container-Runtime", "string", "", "Container runtime version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1),
        ],
        // kube-apiserver's printer (`pkg/printers/internalversion/printers.go`, `printLease`).
        Kind::Lease => vec![
            name,
            col("Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.", 0),
            col("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0),
        ],
        // MCO's CRD (openshift/api release-4.20 `machineconfignodes` additionalPrinterColumns,
        // no descriptions): the five columns, then ten more for `-o wide` (priority 1).
        Kind::MachineConfigNode => std::iter::once(name)
            .chain(MCN_COLUMNS.iter().map(|c| col(c.name, c.type_, "", "", c.priority)))
            .collect(),
        // mco's own kind: [`crate::model::RolloutPolicy::columns`].
        Kind::RolloutPolicy => vec![
            name,
            col("Pools", "string", "", "The pools the policy governs, each with its rollout phase (.status.pools[].phase)", 0),
            col("Windows", "integer", "", "How many maintenance windows (.spec.maintenanceWindows)", 0),
            col("Canary", "string", "", "The canary wave's size (.spec.canary.size)", 0),
            col("Age", "date", "", "", 0),
        ],
        // KubeletConfig, ContainerRuntimeConfig, the mirror sets, Image, MachineConfiguration: no
        // additionalPrinterColumns in their CRDs: the API server's default Name and Age.
        _ => vec![name, col("Age", "date", "", "", 0)],
    }
}

fn age_of(obj: &Value) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map(|t| human_duration((jiff::Timestamp::now() - t).get_seconds()))
        .unwrap_or_else(|| "<unknown>".into())
}

/// The cells of one object's row.
pub fn cells(kind: Kind, obj: &Value, keys: &Keys) -> Vec<Value> {
    let name = json!(obj["metadata"]["name"].as_str().unwrap_or(""));
    match kind {
        Kind::MachineConfigPool => {
            let p: MachineConfigPool = serde_json::from_value(obj.clone()).unwrap_or_default();
            let s = &p.status;
            vec![
                name,
                json!(s.configuration.name),
                json!(p.condition_status("Updated")),
                json!(p.condition_status("Updating")),
                json!(p.condition_status("Degraded")),
                json!(s.machine_count),
                json!(s.ready_machine_count),
                json!(s.updated_machine_count),
                json!(s.degraded_machine_count),
                json!(age_of(obj)),
            ]
        }
        Kind::MachineConfig => {
            let mc: MachineConfig = serde_json::from_value(obj.clone()).unwrap_or_default();
            vec![
                name,
                json!(annotation(&mc.metadata, &keys.generated_by())),
                json!(mc.ignition_version()),
                json!(age_of(obj)),
            ]
        }
        Kind::Node => {
            let n: Node = serde_json::from_value(obj.clone()).unwrap_or_default();
            let status = n.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.as_str());
            let mut st = match ready {
                Some("True") => "Ready".to_string(),
                Some(_) => "NotReady".to_string(),
                None => "Unknown".to_string(),
            };
            if n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
                st.push_str(",SchedulingDisabled");
            }
            let mut roles: Vec<String> = n
                .metadata
                .labels
                .iter()
                .flatten()
                .filter_map(|(k, v)| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .map(str::to_string)
                        .or_else(|| (k == "kubernetes.io/role").then(|| v.clone()))
                })
                .filter(|r| !r.is_empty())
                .collect();
            roles.sort();
            roles.dedup();
            let roles = if roles.is_empty() {
                "<none>".to_string()
            } else {
                roles.join(",")
            };
            let info = status.node_info.unwrap_or_default();
            let addr = |t: &str| {
                status
                    .addresses
                    .iter()
                    .flatten()
                    .find(|a| a.type_ == t)
                    .map(|a| a.address.clone())
                    .unwrap_or_else(|| "<none>".into())
            };
            vec![
                name,
                json!(st),
                json!(roles),
                json!(age_of(obj)),
                json!(info.kubelet_version),
                json!(addr("InternalIP")),
                json!(addr("ExternalIP")),
                json!(if info.os_image.is_empty() {
                    "<unknown>".to_string()
                } else {
                    info.os_image
                }),
                json!(if info.kernel_version.is_empty() {
                    "<unknown>".to_string()
                } else {
                    info.kernel_version
                }),
                json!(if info.container_runtime_version.is_empty() {
                    "<unknown>".to_string()
                } else {
                    info.container_runtime_version
                }),
            ]
        }
        Kind::Lease => vec![
            name,
            json!(obj["spec"]["holderIdentity"].as_str().unwrap_or("")),
            json!(age_of(obj)),
        ],
        // The API server's CRD table convertor: each column's JSONPath, a missing value a
        // null cell, a `date` column an age.
        Kind::MachineConfigNode => std::iter::once(name)
            .chain(MCN_COLUMNS.iter().map(|c| match c.type_ {
                "date" => json!(age_of(obj)),
                _ => c.value(obj).map_or(Value::Null, |v| json!(v)),
            }))
            .collect(),
        Kind::RolloutPolicy => {
            let p: crate::model::RolloutPolicy = serde_json::from_value(obj.clone()).unwrap_or_default();
            let [pools, windows, canary] = p.columns();
            let windows: i64 = windows.parse().unwrap_or(0);
            vec![name, json!(pools), json!(windows), json!(canary), json!(age_of(obj))]
        }
        _ => vec![name, json!(age_of(obj))],
    }
}

/// `PartialObjectMetadata` of an object, the row's `object` with `includeObject=Metadata`.
fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
}

/// A Table of `objects`; `include` is the `includeObject` parameter (`None`, `Metadata`
/// (default), `Object`).
pub fn table(kind: Kind, objects: &[Value], keys: &Keys, resource_version: u64, include: &str) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let object = match include {
                "None" => Value::Null,
                "Object" => o.clone(),
                _ => partial(o),
            };
            json!({"cells": cells(kind, o, keys), "object": object})
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version.to_string()},
        "columnDefinitions": columns(kind),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers() {
        assert!(wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
    }

    #[test]
    fn node_status_and_roles() {
        let n = json!({"metadata": {"name": "worker-0", "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": ""}},
            "spec": {"unschedulable": true}, "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1"}}});
        let c = cells(Kind::Node, &n, &Keys::default());
        assert_eq!(c[1], "Ready,SchedulingDisabled");
        assert_eq!(c[2], "infra,worker");
        assert_eq!(c[4], "v1");
    }
}
