//! Server-side printing: `meta.k8s.io/v1` Table responses with MCO's printer columns.
//!
//! Columns as MCO's CRDs declare them (`additionalPrinterColumns`, mco-facts section 11), and
//! for nodes as the Kubernetes API server prints them (`NAME STATUS ROLES AGE VERSION`, wide:
//! `INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME`) and leases
//! (`NAME HOLDER AGE`), MachineConfigNodes as MCO's CRD. Ages are computed here,
//! as the API server does for `date` columns.

use crate::gofmt::human_duration;
use crate::model::machine_config_node::MCN_COLUMNS;
use crate::model::{annotation, Keys, Kind, MachineConfig, MachineConfigPool, Node, ObjectMeta};
use crate::state::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::borrow::Cow;

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

/// A Table's JSON as an answer, with [`CONTENT_TYPE`].
pub fn table_response(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
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
        // mco's own kind: [`crate::model::DriftPolicy::columns`].
        Kind::DriftPolicy => vec![
            name,
            col("Rules", "integer", "", "How many rules (.spec.rules)", 0),
            col("Actions", "string", "", "The actions the rules use, in rule order (.spec.rules[].action)", 0),
            col("Pools", "string", "", "The pool selector's labels (.spec.poolSelector)", 0),
            col("Age", "date", "", "", 0),
        ],
        // KubeletConfig, ContainerRuntimeConfig, the mirror sets, Image, MachineConfiguration: no
        // additionalPrinterColumns in their CRDs: the API server's default Name and Age.
        _ => vec![name, col("Age", "date", "", "", 0)],
    }
}

/// What a row's `object` holds: kube-apiserver's `includeObject` (`None`, `Metadata`, the
/// default, or `Object`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    fn parse(include: &str) -> Include {
        match include {
            "None" => Include::None,
            "Object" => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// One cell as the Table's JSON carries it: a string, an integer or null (a CRD column whose
/// JSONPath finds nothing).
enum Cell<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Null,
}

impl Serialize for Cell<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Str(v) => s.serialize_str(v),
            Cell::Int(n) => s.serialize_i64(*n),
            Cell::Null => s.serialize_unit(),
        }
    }
}

fn text<'a>(s: impl Into<Cow<'a, str>>) -> Cell<'a> {
    Cell::Str(s.into())
}

/// An object a row is printed from: typed where the projection holds it typed, else its JSON.
#[derive(Clone, Copy)]
enum Source<'a> {
    Node(&'a Node),
    Pool(&'a MachineConfigPool),
    Config(&'a MachineConfig),
    /// A typed kind printed with the default columns (MachineConfiguration).
    Meta(&'a ObjectMeta),
    Json(&'a Value),
}

impl<'a> Source<'a> {
    fn metadata(self) -> Option<&'a ObjectMeta> {
        match self {
            Source::Node(n) => Some(&n.metadata),
            Source::Pool(p) => Some(&p.metadata),
            Source::Config(mc) => Some(&mc.metadata),
            Source::Meta(m) => Some(m),
            Source::Json(_) => None,
        }
    }

    fn name(self) -> Cell<'a> {
        match (self.metadata(), self) {
            (Some(m), _) => text(m.name.as_deref().unwrap_or("")),
            (None, Source::Json(o)) => text(o["metadata"]["name"].as_str().unwrap_or("")),
            (None, _) => text(""),
        }
    }
}

/// What every row of one Table shares: the moment ages are computed at, the annotation keys.
struct Printer {
    kind: Kind,
    now: jiff::Timestamp,
    generated_by: String,
}

impl Printer {
    fn new(kind: Kind, keys: &Keys) -> Printer {
        Printer {
            kind,
            now: jiff::Timestamp::now(),
            generated_by: keys.generated_by(),
        }
    }

    /// A `date` column: the age of the object, as the API server prints it.
    fn age(&self, o: Source<'_>) -> Cell<'static> {
        let created = match (o.metadata(), o) {
            (Some(m), _) => m.creation_timestamp.as_ref().map(|t| t.0),
            (None, Source::Json(v)) => v["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|s| s.parse::<jiff::Timestamp>().ok()),
            (None, _) => None,
        };
        text(created.map_or_else(|| "<unknown>".into(), |t| human_duration((self.now - t).get_seconds())))
    }

    /// The cells of one object's row, borrowing from it where they can.
    fn cells<'a>(&self, o: Source<'a>) -> Vec<Cell<'a>> {
        match (self.kind, o) {
            (Kind::MachineConfigPool, Source::Pool(p)) => {
                let s = &p.status;
                vec![
                    o.name(),
                    text(s.configuration.name.as_str()),
                    text(p.condition_status("Updated")),
                    text(p.condition_status("Updating")),
                    text(p.condition_status("Degraded")),
                    Cell::Int(s.machine_count.into()),
                    Cell::Int(s.ready_machine_count.into()),
                    Cell::Int(s.updated_machine_count.into()),
                    Cell::Int(s.degraded_machine_count.into()),
                    self.age(o),
                ]
            }
            (Kind::MachineConfig, Source::Config(mc)) => vec![
                o.name(),
                text(annotation(&mc.metadata, &self.generated_by)),
                text(mc.ignition_version()),
                self.age(o),
            ],
            (Kind::Node, Source::Node(n)) => {
                let mut cells = node_cells(n);
                cells.insert(0, o.name());
                cells.insert(3, self.age(o));
                cells
            }
            (Kind::Lease, Source::Json(v)) => vec![
                o.name(),
                text(v["spec"]["holderIdentity"].as_str().unwrap_or("")),
                self.age(o),
            ],
            // The API server's CRD table convertor: each column's JSONPath, a missing value a
            // null cell, a `date` column an age.
            (Kind::MachineConfigNode, Source::Json(v)) => std::iter::once(o.name())
                .chain(MCN_COLUMNS.iter().map(|c| match c.type_ {
                    "date" => self.age(o),
                    _ => c.value(v).map_or(Cell::Null, text),
                }))
                .collect(),
            (Kind::RolloutPolicy, Source::Json(v)) => {
                let p = crate::model::RolloutPolicy::deserialize(v).unwrap_or_default();
                let [pools, windows, canary] = p.columns();
                let windows: i64 = windows.parse().unwrap_or(0);
                vec![o.name(), text(pools), Cell::Int(windows), text(canary), self.age(o)]
            }
            (Kind::DriftPolicy, Source::Json(v)) => {
                let p = crate::model::DriftPolicy::deserialize(v).unwrap_or_default();
                let [rules, actions, pools] = p.columns();
                let rules: i64 = rules.parse().unwrap_or(0);
                vec![o.name(), Cell::Int(rules), text(actions), text(pools), self.age(o)]
            }
            _ => vec![o.name(), self.age(o)],
        }
    }
}

/// kube-apiserver's `printNode` (`pkg/printers/internalversion/printers.go`) without the name
/// and age: STATUS, ROLES, VERSION, then the wide columns INTERNAL-IP, EXTERNAL-IP, OS-IMAGE,
/// KERNEL-VERSION, CONTAINER-RUNTIME.
fn node_cells(n: &Node) -> Vec<Cell<'_>> {
    let status = n.status.as_ref();
    let st = crate::model::node_status(n);
    let mut roles: Vec<&str> = n
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, v)| {
            k.strip_prefix("node-role.kubernetes.io/")
                .or_else(|| (k == "kubernetes.io/role").then_some(v.as_str()))
        })
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort_unstable();
    roles.dedup();
    let roles = if roles.is_empty() {
        text("<none>")
    } else {
        text(roles.join(","))
    };
    let info = status.and_then(|s| s.node_info.as_ref());
    let addr = |t: &str| {
        status
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .find(|a| a.type_ == t)
            .map_or(text("<none>"), |a| text(a.address.as_str()))
    };
    fn known(v: Option<&String>) -> Cell<'_> {
        match v.map(String::as_str) {
            None | Some("") => text("<unknown>"),
            Some(v) => text(v),
        }
    }
    vec![
        text(st),
        roles,
        text(info.map_or("", |i| i.kubelet_version.as_str())),
        addr("InternalIP"),
        addr("ExternalIP"),
        known(info.map(|i| &i.os_image)),
        known(info.map(|i| &i.kernel_version)),
        known(info.map(|i| &i.container_runtime_version)),
    ]
}

/// The object of `kind` named `name` in `state`, as a row is printed from it.
fn source<'a>(state: &'a State, kind: Kind, name: &str) -> Option<Source<'a>> {
    match kind {
        Kind::Node => state.nodes.get(name).map(|n| Source::Node(n)),
        Kind::MachineConfigPool => state.pools.get(name).map(|p| Source::Pool(p)),
        Kind::MachineConfig => state.machine_configs.get(name).map(|mc| Source::Config(mc)),
        Kind::MachineConfiguration => state
            .machine_configurations
            .get(name)
            .map(|m| Source::Meta(&m.metadata)),
        k => state.objects.get(&k).and_then(|m| m.get(name)).map(|o| Source::Json(o)),
    }
}

/// A Table being written: its head on creation, then one row at a time, straight into the body
/// (no tree of the rows is built).
pub(super) struct Writer {
    out: Vec<u8>,
    include: Include,
    rows: usize,
}

impl Writer {
    /// `{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":…,"columnDefinitions":[…],"rows":[`;
    /// `include` is the `includeObject` parameter (`None`, `Metadata` (the default), `Object`).
    pub(super) fn new<C: Serialize + ?Sized>(columns: &C, metadata: &Value, include: &str, capacity: usize) -> Writer {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(br#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":"#);
        serde_json::to_writer(&mut out, metadata).expect("JSON encodes");
        out.extend_from_slice(br#","columnDefinitions":"#);
        serde_json::to_writer(&mut out, columns).expect("JSON encodes");
        out.extend_from_slice(br#","rows":["#);
        Writer {
            out,
            include: Include::parse(include),
            rows: 0,
        }
    }

    /// One row: its cells, then its `object` (`null`, a `PartialObjectMetadata` of `metadata`,
    /// or the whole object as `whole` writes it).
    pub(super) fn row<C: Serialize + ?Sized, M: Serialize + ?Sized>(
        &mut self,
        cells: &C,
        metadata: &M,
        whole: impl FnOnce(&mut Vec<u8>),
    ) {
        if self.rows > 0 {
            self.out.push(b',');
        }
        self.rows += 1;
        self.out.extend_from_slice(br#"{"cells":"#);
        serde_json::to_writer(&mut self.out, cells).expect("JSON encodes");
        self.out.extend_from_slice(br#","object":"#);
        match self.include {
            Include::None => self.out.extend_from_slice(b"null"),
            Include::Object => whole(&mut self.out),
            Include::Metadata => {
                self.out
                    .extend_from_slice(br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#);
                serde_json::to_writer(&mut self.out, metadata).expect("JSON encodes");
                self.out.push(b'}');
            }
        }
        self.out.push(b'}');
    }

    /// The Table's JSON.
    pub(super) fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(b"]}");
        self.out
    }
}

/// The Table of the objects of `kind` named `names` in `state` (absent names are skipped),
/// with `metadata` as the Table's (`resourceVersion`, `continue`, `remainingItemCount`);
/// `include` is the `includeObject` parameter (`None`, `Metadata` (the default), `Object`).
///
/// One pass, no intermediate tree: each row's cells are read from the typed object (or the
/// JSON of a generic kind) and written straight into the body; `includeObject=Metadata`
/// serializes the borrowed `metadata` (kube-apiserver's `AsPartialObjectMetadata` copies all of
/// `ObjectMeta`, managedFields included, `k8s.io/apiserver/pkg/endpoints/handlers/response.go`
/// `asTable`), and `Object` copies the object's kept JSON ([`State::write_json`]).
pub fn from_state(
    state: &State,
    kind: Kind,
    names: &[String],
    keys: &Keys,
    metadata: &Value,
    include: &str,
) -> Vec<u8> {
    let printer = Printer::new(kind, keys);
    let mut w = Writer::new(&columns(kind), metadata, include, 1024 + names.len() * 512);
    for name in names {
        let Some(o) = source(state, kind, name) else { continue };
        let cells = printer.cells(o);
        let whole = |out: &mut Vec<u8>| {
            state.write_json(kind, name, out);
        };
        match (o.metadata(), o) {
            (Some(m), _) => w.row(&cells, m, whole),
            (None, Source::Json(v)) => w.row(&cells, &v["metadata"], whole),
            (None, _) => unreachable!("a typed source has metadata"),
        }
    }
    w.finish()
}

/// The one-row Table answer of the object of `kind` named `name` in `state` (a GET), at the
/// state's resourceVersion; `include` as for [`from_state`].
pub fn one(state: &State, kind: Kind, name: &str, keys: &Keys, include: &str) -> Response {
    let metadata = json!({"resourceVersion": state.seq.to_string()});
    table_response(from_state(state, kind, &[name.to_string()], keys, &metadata, include))
}

/// The one-row Table of `obj` (an object of `kind` as served, a watch event's), at
/// resourceVersion `rv`; `include` as for [`from_state`]. A typed kind's cells are read from
/// the typed object decoded from `obj` by reference.
pub fn of_object(kind: Kind, obj: &Value, keys: &Keys, rv: u64, include: &str) -> Vec<u8> {
    let printer = Printer::new(kind, keys);
    let metadata = json!({"resourceVersion": rv.to_string()});
    let mut w = Writer::new(&columns(kind), &metadata, include, 4096);
    let whole = |out: &mut Vec<u8>| serde_json::to_writer(out, obj).expect("JSON encodes");
    let mut row = |o: Source<'_>| w.row(&printer.cells(o), &obj["metadata"], whole);
    match kind {
        Kind::Node => row(Source::Node(&Node::deserialize(obj).unwrap_or_default())),
        Kind::MachineConfigPool => row(Source::Pool(&MachineConfigPool::deserialize(obj).unwrap_or_default())),
        Kind::MachineConfig => row(Source::Config(&MachineConfig::deserialize(obj).unwrap_or_default())),
        _ => row(Source::Json(obj)),
    }
    w.finish()
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
        let t: Value = serde_json::from_slice(&of_object(Kind::Node, &n, &Keys::default(), 7, "None")).unwrap();
        let c = &t["rows"][0]["cells"];
        assert_eq!(c[1], "Ready,SchedulingDisabled");
        assert_eq!(c[2], "infra,worker");
        assert_eq!(c[4], "v1");
    }
}
