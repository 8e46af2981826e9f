//! The `machineconfiguration.openshift.io/v1` MachineConfigNode (README "MachineConfigNode"):
//! one object per node, named after it and owned by it, saying which phase of an update the
//! node is in, as MCO 4.20 serves it.
//!
//! Owns the kind's serde shape (openshift/api `machineconfiguration/v1/
//! types_machineconfignode.go`, release-4.20), its admission (the CRD's rules, with their
//! messages), the MachineConfigNode the controllers create for a node (MCO
//! `pkg/operator/sync.go` `syncMachineConfigNodes`), and MCO's one status writer, ported whole:
//! [`apply_step`] is `pkg/upgrademonitor/upgrade_monitor.go` `generateAndApplyMachineConfigNodes`
//! and each [`Step`] constructor one of its call sites in `pkg/daemon` and
//! `pkg/controller/drain`, with its condition type, reason, status and message verbatim. Pure:
//! the time is passed in.

use super::{ObjectMeta, OwnerReference, Time};
use crate::validation::FieldError;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Serialize};

/// The placeholder of a config version not known yet (`upgrademonitor.NotYetSet`).
pub const NOT_YET_SET: &str = "not-yet-set";

/// The condition types of MCO 4.20's update progress (`StateProgress`), in the order MCO adds
/// the ones a new status does not have yet (`allConditionTypes`).
pub const CONDITION_TYPES: [&str; 12] = [
    UPDATE_PREPARED,
    UPDATE_EXECUTED,
    UPDATE_POST_ACTION_COMPLETE,
    UPDATE_COMPLETE,
    RESUMED,
    DRAINED,
    APPLIED_FILES_AND_OS,
    CORDONED,
    REBOOTED_NODE,
    UPDATED,
    UNCORDONED,
    NODE_DEGRADED,
];

/// The daemon validated the new config against the current one.
pub const UPDATE_PREPARED: &str = "UpdatePrepared";
/// The body of the update: cordon, drain, files and OS.
pub const UPDATE_EXECUTED: &str = "UpdateExecuted";
/// The post-config action (reboot, reload, none) is done.
pub const UPDATE_POST_ACTION_COMPLETE: &str = "UpdatePostActionComplete";
/// The core of the update is complete (uncordoned).
pub const UPDATE_COMPLETE: &str = "UpdateComplete";
/// The daemon resumed normal operations on its config.
pub const RESUMED: &str = "Resumed";
/// Child of UpdateExecuted: the drain.
pub const DRAINED: &str = "Drained";
/// Child of UpdateExecuted: files and OS written.
pub const APPLIED_FILES_AND_OS: &str = "AppliedFilesAndOS";
/// Child of UpdateExecuted: the cordon.
pub const CORDONED: &str = "Cordoned";
/// The reboot (Unknown while it is required, True once the node came back).
pub const REBOOTED_NODE: &str = "RebootedNode";
/// The node is on its desired config.
pub const UPDATED: &str = "Updated";
/// Child of UpdateComplete: the uncordon.
pub const UNCORDONED: &str = "Uncordoned";
/// The last update failed.
pub const NODE_DEGRADED: &str = "NodeDegraded";

/// A MachineConfigNode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNode {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: MachineConfigNodeSpec,
    /// Go's `Status` is a struct without `omitempty`: always written; `null` reads as empty
    /// (as Go decodes `null` into a struct).
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: MachineConfigNodeStatus,
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `MCOObjectReference`: a node or pool by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectName {
    #[serde(default)]
    pub name: String,
}

/// `MachineConfigNodeSpec` (release-4.20: node, pool, configVersion; all required).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeSpec {
    #[serde(default)]
    pub node: ObjectName,
    #[serde(default)]
    pub pool: ObjectName,
    #[serde(default)]
    pub config_version: SpecConfigVersion,
}

/// `MachineConfigNodeSpecMachineConfigVersion`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecConfigVersion {
    #[serde(default)]
    pub desired: String,
}

/// `MachineConfigNodeStatusMachineConfigVersion` (`current` is written even when empty, as
/// Go's `json:"current"`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusConfigVersion {
    #[serde(default)]
    pub current: String,
    #[serde(default)]
    pub desired: String,
}

/// `MachineConfigNodeStatus` (the pinned-image-set fields of release-4.20 are not served: mco
/// has no PinnedImageSet).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigNodeStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<StatusConfigVersion>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl MachineConfigNode {
    /// The condition of `type_`, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// The MachineConfigNode of a node as MCO's operator creates it (`syncMachineConfigNodes`, then
/// `GenerateAndApplyMachineConfigNodeSpec`): named after the node, owned by it (`apiVersion v1`,
/// `kind Node`, its uid), `spec.node` and `spec.pool`, and `spec.configVersion.desired` the
/// node's `desiredConfig` ([`NOT_YET_SET`] while it has none).
pub fn for_node(node: &str, uid: &str, pool: &str, desired_config: &str, api_version: &str) -> MachineConfigNode {
    MachineConfigNode {
        api_version: api_version.to_string(),
        kind: "MachineConfigNode".into(),
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: uid.to_string(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: MachineConfigNodeSpec {
            node: ObjectName { name: node.to_string() },
            pool: ObjectName { name: pool.to_string() },
            config_version: SpecConfigVersion {
                desired: desired_or_placeholder(desired_config),
            },
        },
        status: MachineConfigNodeStatus::default(),
    }
}

/// `desired`, or [`NOT_YET_SET`] when empty (what the CRD's required field gets).
pub fn desired_or_placeholder(desired: &str) -> String {
    if desired.is_empty() { NOT_YET_SET } else { desired }.to_string()
}

/// One condition MCO sets (`upgrademonitor.Condition` with its status).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

/// One call of MCO's status writer: a parent condition and, for the phases with one, a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub parent: Set,
    pub child: Option<Set>,
}

const TRUE: &str = "True";
const FALSE: &str = "False";
const UNKNOWN: &str = "Unknown";

fn set(type_: &'static str, status: &'static str, reason: &str, message: impl Into<String>) -> Set {
    Set {
        type_,
        status,
        reason: reason.to_string(),
        message: message.into(),
    }
}

fn parent(type_: &'static str, status: &'static str, reason: &str, message: impl Into<String>) -> Step {
    Step {
        parent: set(type_, status, reason, message),
        child: None,
    }
}

/// A parent with its child, whose reason is `<Parent><Child>` as MCO builds it.
fn with_child(p: Set, child: &'static str, status: &'static str, message: impl Into<String>) -> Step {
    let reason = format!("{}{child}", p.type_);
    Step {
        child: Some(set(child, status, &reason, message)),
        parent: p,
    }
}

/// The call sites, each named after where MCO makes it (release-4.20).
impl Step {
    /// `pkg/daemon/daemon.go` `syncNode`, an update needed: Updated False.
    pub fn needs_update(node: &str) -> Step {
        parent(UPDATED, FALSE, UPDATED, format!("Node {node} needs an update"))
    }
    /// `syncNode`, nothing to update: Updated True (which resets every other condition).
    pub fn updated(node: &str) -> Step {
        parent(UPDATED, TRUE, UPDATED, format!("Node {node} Updated"))
    }
    /// `pkg/daemon/update.go` `update`, the configs reconcilable. `Post Cfg Actions` prints the
    /// legacy action list, which is empty (`[]`) whenever node disruption policies decide, i.e.
    /// after the first boot.
    pub fn prepared(drain: bool) -> Step {
        parent(
            UPDATE_PREPARED,
            TRUE,
            UPDATE_PREPARED,
            format!("Update Compatible. Post Cfg Actions: [] Drain Required: {drain}"),
        )
    }
    /// `update`, the configs not reconcilable: UpdatePrepared Unknown.
    pub fn not_compatible(old: &str, new: &str, err: &str) -> Step {
        parent(
            UPDATE_PREPARED,
            UNKNOWN,
            UPDATE_PREPARED,
            format!(
                "Update Failed compatibility validation. MachineConfigs {old} and {new} are not compatible. Err: {err}"
            ),
        )
    }
    /// `update`, no drain needed: UpdateExecuted Unknown, Drained False.
    pub fn drain_not_required() -> Step {
        let m = "Node Drain Not required for this update.";
        with_child(set(UPDATE_EXECUTED, UNKNOWN, DRAINED, m), DRAINED, FALSE, m)
    }
    /// `pkg/controller/drain/drain_controller.go`, the node cordoned: Cordoned True.
    pub fn cordoned(unschedulable: bool) -> Step {
        with_child(
            set(
                UPDATE_EXECUTED,
                UNKNOWN,
                CORDONED,
                "Cordoned Node as part of update executed phase",
            ),
            CORDONED,
            TRUE,
            format!("Cordoned node. The node is reporting Unschedulable = {unschedulable}"),
        )
    }
    /// The drain controller, draining: Drained Unknown.
    pub fn draining(desired_drainer: &str, last_applied_drainer: &str) -> Step {
        with_child(
            set(UPDATE_EXECUTED, UNKNOWN, DRAINED, "Draining Node as part of update executed phase"),
            DRAINED,
            UNKNOWN,
            format!("Draining node. The drain will not be complete until desired drainer {desired_drainer} matches current drainer {last_applied_drainer}"),
        )
    }
    /// The drain controller, an eviction failed: Drained Unknown with the error.
    pub fn drain_failed(err: &str, desired_drainer: &str, last_applied_drainer: &str) -> Step {
        with_child(
            set(UPDATE_EXECUTED, UNKNOWN, DRAINED, "Node Drain has not succeeded"),
            DRAINED,
            UNKNOWN,
            format!("Error: Node Drain has not succeeded. Error is: {err} The drain will not be complete until desired drainer {desired_drainer} matches current drainer {last_applied_drainer}"),
        )
    }
    /// The drain controller, drained: Drained True.
    pub fn drained(desired_drainer: &str) -> Step {
        with_child(
            set(
                UPDATE_EXECUTED,
                UNKNOWN,
                DRAINED,
                "Drained Node as part of update executed phase",
            ),
            DRAINED,
            TRUE,
            format!(
                "Drained node. The drain is complete as the desired drainer matches current drainer: {desired_drainer}"
            ),
        )
    }
    /// `update`, before writing: UpdateExecuted and AppliedFilesAndOS Unknown. MCO's `%s` is
    /// `"not"` or `""`, so a needed update reads `OS will  need an update` (two spaces).
    pub fn applying(os: bool, ssh: bool) -> Step {
        let (o, s) = (if os { "" } else { "not" }, if ssh { "" } else { "not" });
        with_child(
            set(UPDATE_EXECUTED, UNKNOWN, APPLIED_FILES_AND_OS, "Updating the Files and OS on disk as a part of the in progress phase"),
            APPLIED_FILES_AND_OS,
            UNKNOWN,
            format!("Applying files and new OS config to node. OS will {o} need an update. SSH Keys will {s} need an update"),
        )
    }
    /// `update`, written: UpdateExecuted and AppliedFilesAndOS True.
    pub fn applied(os: bool, ssh: bool) -> Step {
        let (o, s) = (if os { "" } else { "not" }, if ssh { "" } else { "not" });
        with_child(
            set(
                UPDATE_EXECUTED,
                TRUE,
                APPLIED_FILES_AND_OS,
                "Updated the Files and OS on disk as a part of the in progress phase",
            ),
            APPLIED_FILES_AND_OS,
            TRUE,
            format!(
                "Applied files and new OS config to node. OS did {o} need an update. SSH Keys did {s} need an update"
            ),
        )
    }
    /// `performPostConfigChangeNodeDisruptionAction`, Reboot: RebootedNode Unknown.
    pub fn reboot_required() -> Step {
        parent(REBOOTED_NODE, UNKNOWN, REBOOTED_NODE, "Upgrade requires a reboot.")
    }
    /// `syncNode` after the reboot (the `Rebooting` post-config action): RebootedNode True.
    pub fn rebooted() -> Step {
        parent(REBOOTED_NODE, TRUE, REBOOTED_NODE, "Node has rebooted")
    }
    /// The None action: UpdatePostActionComplete True, reason `None`.
    pub fn no_reboot() -> Step {
        parent(
            UPDATE_POST_ACTION_COMPLETE,
            TRUE,
            "None",
            "Changes do not require a reboot",
        )
    }
    /// A Reload, Special (`crio`) or DaemonReload (`daemon-reload`) action done
    /// (`executeReloadServiceNodeDisruptionAction`). A Restart sets no condition in MCO.
    pub fn reloaded(service: &str) -> Step {
        parent(
            UPDATE_POST_ACTION_COMPLETE,
            TRUE,
            UPDATE_POST_ACTION_COMPLETE,
            format!("Node has reloaded service {service}"),
        )
    }
    /// `updateConfigAndState`, in the desired config after the update (reboot or rebootless).
    pub fn resumed_applying(config: &str) -> Step {
        parent(
            RESUMED,
            TRUE,
            RESUMED,
            format!("In desired config {config}. Resumed normal operations. Applying proper annotations."),
        )
    }
    /// `syncNode` at the daemon's start, once the first run's checks are done.
    pub fn resumed(config: &str) -> Step {
        parent(
            RESUMED,
            TRUE,
            RESUMED,
            format!("In desired config {config}. Resumed normal operations."),
        )
    }
    /// The drain controller, uncordoned: UpdateComplete and Uncordoned True.
    pub fn uncordoned(unschedulable: bool) -> Step {
        with_child(
            set(
                UPDATE_COMPLETE,
                TRUE,
                UNCORDONED,
                "Uncordoned Node as part of completing upgrade phase",
            ),
            UNCORDONED,
            TRUE,
            format!("UnCordoned node. The node is reporting Unschedulable = {unschedulable}"),
        )
    }
    /// `reportMachineNodeDegradeStatus`: NodeDegraded True with the error, False on success.
    pub fn degraded(node: &str, err: Option<&str>) -> Step {
        match err {
            Some(e) => parent(
                NODE_DEGRADED,
                TRUE,
                NODE_DEGRADED,
                format!("Node {node} upgrade failure. {e}"),
            ),
            None => parent(
                NODE_DEGRADED,
                FALSE,
                NODE_DEGRADED,
                format!("Node {node} upgrade succeeded"),
            ),
        }
    }
}

fn condition(s: &Set, now: &Time) -> Condition {
    Condition {
        type_: s.type_.to_string(),
        status: s.status.to_string(),
        reason: s.reason.clone(),
        message: s.message.clone(),
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

/// MCO's status writer (`generateAndApplyMachineConfigNodes`) on `mcn`, the node's
/// `desiredConfig` and `currentConfig` annotations given: returns `false` (and leaves `mcn`
/// as it was) when the parent condition already has this status and message, as MCO returns
/// without writing.
///
/// A first status gets the parent, the child and every other type `False`/`NotYetOccurred`.
/// Later: the child replaced (or added), the parent replaced (or added); a parent `Updated`
/// resets every other condition not `False` to `False` with the message prefixed `Action during
/// update to <spec desired>: `. `status.configVersion.desired` is the node's desiredConfig,
/// except while UpdatePrepared is not True ([`NOT_YET_SET`]); `current` its currentConfig when
/// set; `observedGeneration` the object's generation + 1 (MCO writes `Generation + 1`).
///
/// MCO's branch for an `Updated` True that is not the parent ("sensed disruption via a manual
/// update") writes a new condition and then copies the unchanged one back over it, so it
/// changes nothing; it is left out here for that reason.
pub fn apply_step(mcn: &mut MachineConfigNode, step: &Step, desired: &str, current: &str, now: &Time) -> bool {
    let new_parent = condition(&step.parent, now);
    let new_child = step.child.as_ref().map(|c| condition(c, now));
    let reset = step.parent.type_ == UPDATED;
    let conditions = &mut mcn.status.conditions;
    if conditions.is_empty() {
        conditions.push(new_parent.clone());
        conditions.extend(new_child.clone());
        for t in CONDITION_TYPES {
            if !conditions.iter().any(|c| c.type_ == t) {
                conditions.push(Condition {
                    type_: t.to_string(),
                    message: format!("This node has not yet entered the {t} phase"),
                    reason: "NotYetOccurred".into(),
                    last_transition_time: now.clone(),
                    status: FALSE.into(),
                    observed_generation: None,
                });
            }
        }
    } else {
        if let Some(old) = conditions.iter().find(|c| c.type_ == new_parent.type_) {
            if old.status == new_parent.status && old.message == new_parent.message {
                return false;
            }
        }
        let (mut found_parent, mut found_child) = (false, false);
        let spec_desired = mcn.spec.config_version.desired.clone();
        for c in conditions.iter_mut() {
            match &new_child {
                Some(child) if c.type_ == child.type_ => {
                    found_child = true;
                    *c = child.clone();
                    continue;
                }
                _ => {}
            }
            if c.type_ == new_parent.type_ {
                found_parent = true;
                *c = new_parent.clone();
            } else if reset && c.status != FALSE {
                c.status = FALSE.into();
                c.message = format!("Action during update to {spec_desired}: {}", c.message);
                c.last_transition_time = now.clone();
            }
        }
        if !found_child {
            conditions.extend(new_child);
        }
        if !found_parent {
            conditions.push(new_parent);
        }
    }
    let prepared = step.parent.type_ == UPDATE_PREPARED;
    let desired = if (prepared && step.parent.status == TRUE) || (!prepared && !desired.is_empty()) {
        desired.to_string()
    } else {
        NOT_YET_SET.to_string()
    };
    let version = mcn.status.config_version.get_or_insert_with(Default::default);
    version.desired = desired;
    if !current.is_empty() {
        version.current = current.to_string();
    }
    mcn.status.observed_generation = mcn.metadata.generation.unwrap_or(0) + 1;
    true
}

/// One of MCO's printer columns (`additionalPrinterColumns`).
pub struct Column {
    pub name: &'static str,
    /// `string` or `date`.
    pub type_: &'static str,
    path: ColumnPath,
    /// 0: always shown; 1: `-o wide` only.
    pub priority: i32,
}

/// Where a column's value is: a field three levels down, or the status of the condition of a
/// type (`.status.conditions[?(@.type=="X")].status`).
enum ColumnPath {
    Field(&'static str, &'static str, &'static str),
    Condition(&'static str),
}

impl Column {
    /// The column's value in `obj` (its JSONPath's result), `None` when there is none.
    pub fn value<'a>(&self, obj: &'a serde_json::Value) -> Option<&'a str> {
        match self.path {
            ColumnPath::Field(a, b, "") => obj[a][b].as_str(),
            ColumnPath::Field(a, b, c) => obj[a][b][c].as_str(),
            ColumnPath::Condition(ty) => obj["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == ty)?["status"]
                .as_str(),
        }
    }
}

const fn column(name: &'static str, type_: &'static str, path: ColumnPath, priority: i32) -> Column {
    Column {
        name,
        type_,
        path,
        priority,
    }
}

/// MCO's printer columns of MachineConfigNode, in the CRD's order (openshift/api release-4.20
/// `0000_80_machine-config_01_machineconfignodes-Default.crd.yaml`); `Name` comes before them.
pub const MCN_COLUMNS: [Column; 15] = [
    column("PoolName", "string", ColumnPath::Field("spec", "pool", "name"), 0),
    column(
        "DesiredConfig",
        "string",
        ColumnPath::Field("spec", "configVersion", "desired"),
        0,
    ),
    column(
        "CurrentConfig",
        "string",
        ColumnPath::Field("status", "configVersion", "current"),
        0,
    ),
    column("Updated", "string", ColumnPath::Condition(UPDATED), 0),
    column("Age", "date", ColumnPath::Field("metadata", "creationTimestamp", ""), 0),
    column("UpdatePrepared", "string", ColumnPath::Condition(UPDATE_PREPARED), 1),
    column("UpdateExecuted", "string", ColumnPath::Condition(UPDATE_EXECUTED), 1),
    column(
        "UpdatePostActionComplete",
        "string",
        ColumnPath::Condition(UPDATE_POST_ACTION_COMPLETE),
        1,
    ),
    column("UpdateComplete", "string", ColumnPath::Condition(UPDATE_COMPLETE), 1),
    column("Resumed", "string", ColumnPath::Condition(RESUMED), 1),
    column(
        "UpdatedFilesAndOS",
        "string",
        ColumnPath::Condition(APPLIED_FILES_AND_OS),
        1,
    ),
    column("CordonedNode", "string", ColumnPath::Condition(CORDONED), 1),
    column("DrainedNode", "string", ColumnPath::Condition(DRAINED), 1),
    column("RebootedNode", "string", ColumnPath::Condition(REBOOTED_NODE), 1),
    column("UncordonedNode", "string", ColumnPath::Condition(UNCORDONED), 1),
];

/// The CRD's message for a name that is not a DNS-1123 subdomain.
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.";

/// The admission of a MachineConfigNode: Kubernetes' metadata rules and the CRD's
/// (release-4.20 `0000_80_machine-config_01_machineconfignodes-Default.crd.yaml`): the spec's
/// names required and DNS-1123 subdomains of at most 253 characters, `spec.node.name` equal to
/// `metadata.name`, at most 20 conditions each with a known status, a reason of the
/// `metav1.Condition` pattern and a type, and `status.observedGeneration` at least 1 when set.
pub fn validate_machine_config_node(mcn: &MachineConfigNode) -> Vec<FieldError> {
    let mut errors = super::validate_object_meta(&mcn.metadata);
    let mut name = |field: &str, value: &str, required: bool| {
        if value.is_empty() {
            if required {
                errors.push(FieldError::new(field, "Required value"));
            }
        } else if value.len() > 253 {
            errors.push(FieldError::new(
                field,
                "Too long: may not be more than 253 bytes".to_string(),
            ));
        } else if !super::dns1123_subdomain_errors(value).is_empty() {
            errors.push(FieldError::new(
                field,
                format!("Invalid value: \"string\": {SUBDOMAIN_MSG}"),
            ));
        }
    };
    name("spec.node.name", &mcn.spec.node.name, true);
    name("spec.pool.name", &mcn.spec.pool.name, true);
    name("spec.configVersion.desired", &mcn.spec.config_version.desired, true);
    if let Some(v) = &mcn.status.config_version {
        name("status.configVersion.current", &v.current, false);
        name("status.configVersion.desired", &v.desired, true);
    }
    if mcn.metadata.name.as_deref().unwrap_or("") != mcn.spec.node.name {
        errors.push(FieldError::new(
            "<nil>",
            "Invalid value: \"object\": spec.node.name should match metadata.name",
        ));
    }
    let conditions = &mcn.status.conditions;
    if conditions.len() > 20 {
        errors.push(FieldError::new(
            "status.conditions",
            format!("Too many: {}: must have at most 20 items", conditions.len()),
        ));
    }
    for (i, c) in conditions.iter().enumerate() {
        let at = |f: &str| format!("status.conditions[{i}].{f}");
        if ![TRUE, FALSE, UNKNOWN].contains(&c.status.as_str()) {
            errors.push(FieldError::new(
                at("status"),
                format!(
                    "Unsupported value: {}: supported values: \"True\", \"False\", \"Unknown\"",
                    super::go_quote(&c.status)
                ),
            ));
        }
        if !reason_ok(&c.reason) {
            errors.push(FieldError::new(
                at("reason"),
                format!("Invalid value: {}: status.conditions[{i}].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'", super::go_quote(&c.reason)),
            ));
        }
        if c.type_.is_empty() {
            errors.push(FieldError::new(at("type"), "Required value"));
        }
    }
    if mcn.status.observed_generation < 0 {
        errors.push(FieldError::new(
            "status.observedGeneration",
            format!(
                "Invalid value: {}: status.observedGeneration in body should be greater than or equal to 1",
                mcn.status.observed_generation
            ),
        ));
    }
    errors
}

/// `metav1.Condition`'s reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024.
fn reason_ok(r: &str) -> bool {
    let b = r.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    !b.is_empty()
        && b.len() <= 1024
        && b[0].is_ascii_alphabetic()
        && b.iter().all(inner)
        && (b.len() == 1 || b[b.len() - 1].is_ascii_alphanumeric() || b[b.len() - 1] == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(1_700_000_000 + s).unwrap())
    }

    fn status_of(m: &MachineConfigNode, ty: &str) -> (String, String) {
        let c = m.condition(ty).unwrap();
        (c.status.clone(), c.message.clone())
    }

    /// The first status has every type; a repeated parent writes nothing; `Updated` True resets
    /// the rest with MCO's prefix; the status's desired config waits for UpdatePrepared True.
    #[test]
    fn the_status_writer_follows_mco() {
        let mut m = for_node(
            "w1",
            "uid",
            "worker",
            "rendered-1",
            "machineconfiguration.openshift.io/v1",
        );
        assert!(apply_step(
            &mut m,
            &Step::resumed("rendered-1"),
            "rendered-1",
            "rendered-1",
            &t(0)
        ));
        assert_eq!(m.status.conditions.len(), 12);
        assert_eq!(m.status.conditions[0].type_, RESUMED);
        let dr = m.condition(DRAINED).unwrap();
        assert_eq!((dr.status.as_str(), dr.reason.as_str()), ("False", "NotYetOccurred"));
        assert_eq!(dr.message, "This node has not yet entered the Drained phase");
        assert!(!apply_step(
            &mut m,
            &Step::resumed("rendered-1"),
            "rendered-1",
            "rendered-1",
            &t(1)
        ));
        assert!(apply_step(
            &mut m,
            &Step::updated("w1"),
            "rendered-1",
            "rendered-1",
            &t(2)
        ));
        assert_eq!(
            status_of(&m, RESUMED),
            (
                "False".into(),
                "Action during update to rendered-1: In desired config rendered-1. Resumed normal operations.".into()
            )
        );
        assert!(apply_step(
            &mut m,
            &Step::not_compatible("a", "b", "x"),
            "rendered-2",
            "rendered-1",
            &t(3)
        ));
        assert_eq!(m.status.config_version.as_ref().unwrap().desired, NOT_YET_SET);
        assert!(apply_step(
            &mut m,
            &Step::prepared(true),
            "rendered-2",
            "rendered-1",
            &t(4)
        ));
        assert_eq!(m.status.config_version.as_ref().unwrap().desired, "rendered-2");
        assert!(apply_step(
            &mut m,
            &Step::cordoned(true),
            "rendered-2",
            "rendered-1",
            &t(5)
        ));
        let c = m.condition(CORDONED).unwrap();
        assert_eq!(c.reason, "UpdateExecutedCordoned");
        assert_eq!(m.status.observed_generation, 1);
        assert_eq!(
            Step::applying(false, true).child.unwrap().message,
            "Applying files and new OS config to node. OS will not need an update. SSH Keys will  need an update"
        );
    }

    #[test]
    fn admission_names_the_field() {
        let mut m = for_node("w1", "uid", "worker", "", "v");
        assert_eq!(validate_machine_config_node(&m), vec![]);
        assert_eq!(m.spec.config_version.desired, NOT_YET_SET);
        m.spec.node.name = "w2".into();
        m.status.conditions.push(Condition {
            type_: "X".into(),
            status: "Maybe".into(),
            reason: "bad reason".into(),
            message: String::new(),
            last_transition_time: t(0),
            observed_generation: None,
        });
        let e: Vec<String> = validate_machine_config_node(&m).iter().map(|e| e.to_string()).collect();
        assert_eq!(
            e,
            [
                "<nil>: Invalid value: \"object\": spec.node.name should match metadata.name",
                "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\"",
                "status.conditions[0].reason: Invalid value: \"bad reason\": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'",
            ]
        );
    }
}
