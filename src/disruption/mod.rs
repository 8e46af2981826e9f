//! Node disruption policy (MCO's NDP, mco-facts section 6): the `operator.openshift.io/v1`
//! MachineConfiguration `cluster` object, its admission rules, the defaults merged into its
//! status, and the pure planning of what a node does after writing an update.
//!
//! Owns: [`MachineConfiguration`] and its policy types; [`validate_machine_configuration`]
//! (6.1); [`default_cluster_policies`] and [`merge_cluster_policies`] (6.2); [`calculate_actions`]
//! (6.3); [`drain_required`] with [`registries_change_is_safe`] (6.4). No IO: the daemon carries
//! the plan out through `host::Host`.

use crate::ignition::Config;
use crate::model::ObjectMeta;
use crate::validation::{FieldError, Invalid};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// API group and version of the kind (`operator.openshift.io/v1`).
pub const API_VERSION: &str = "operator.openshift.io/v1";
/// The API group of MachineConfiguration.
pub const GROUP: &str = "operator.openshift.io";
/// The only name a MachineConfiguration may have (MCO's ValidatingAdmissionPolicy
/// `machineconfiguration-guards`).
pub const CLUSTER: &str = "cluster";
/// Node annotation (mco's own) in which the daemon records the actions it chose for the update
/// in progress, e.g. `Restart chronyd.service for rendered-worker-<hash>` (one history event, shown by `mco describe node`).
pub const ACTIONS_ANNOTATION: &str = "mco.dev/post-config-actions";

/// The rendered config an [`ACTIONS_ANNOTATION`] value was chosen for (`<actions> for
/// <config>`); `None` when the value has no such suffix.
pub fn actions_config(value: &str) -> Option<&str> {
    value.rsplit_once(" for ").map(|(_, config)| config)
}
/// The registries file whose default policy is `Special` (6.2, 6.4).
pub const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";

/// Spec lists (`files`, `units`) hold at most this many entries (6.1).
const MAX_SPEC_ENTRIES: usize = 50;
/// Each `actions` list holds at most this many entries (6.1).
const MAX_ACTIONS: usize = 10;
/// A service name is at most this long (`NodeDisruptionPolicyServiceName`).
const MAX_SERVICE_NAME: usize = 255;
/// systemd unit suffixes a service name may end with.
const SERVICE_TYPES: [&str; 12] = [
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// The MachineConfiguration kind (`vendor/github.com/openshift/api/operator/v1/
/// types_machineconfiguration.go`). Fields mco does not act on (managementState, logLevel,
/// managedBootImages, ...) are kept as given in `other`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfiguration {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineConfigurationSpec,
    #[serde(default)]
    pub status: MachineConfigurationStatus,
}

/// `spec` of a MachineConfiguration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationSpec {
    /// The user's node disruption policies (merged over the defaults into the status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy: Option<NodeDisruptionPolicyConfig>,
    /// Every other spec field, as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Spec fields MCO acts on that mco has nothing to act on, refused naming the field so that a
/// MachineConfiguration is never accepted and silently ignored:
///
/// - `irreconcilableValidationOverrides` (openshift/api operator/v1, MCO 4.20, feature gate
///   `IrreconcilableMachineConfig`): MCO's render controller and daemon skip the day-2 check of
///   the listed `storage.disks`, `storage.filesystems`, `storage.raid` sections
///   (`pkg/controller/common/reconcile.go` `isConfigReconcilable`); mco refuses those sections in
///   every MachineConfig at admission (it does not manage them), so there is nothing to relax;
/// - `managedBootImages.machineManagers` non-empty: mco manages no machine sets;
/// - `bootImageSkewEnforcement.mode` other than `None`: mco has no boot images.
///
/// `managementState`, `logLevel`, `unsupportedConfigOverrides`, `observedConfig` and the
/// revision fields are ignored by MCO too and are kept as given; `operatorLogLevel` sets MCO's
/// own verbosity and is kept as given (mco's is `RUST_LOG`).
fn validate_unsupported(other: &Map<String, Value>) -> Vec<FieldError> {
    let mut out = Vec::new();
    if other
        .get("irreconcilableValidationOverrides")
        .is_some_and(|v| !v.is_null())
    {
        out.push(FieldError::new(
            "spec.irreconcilableValidationOverrides",
            "Forbidden: mco refuses storage.disks, storage.filesystems and storage.raid in every MachineConfig (it does not manage them), so there are no irreconcilable changes to allow",
        ));
    }
    if other
        .get("managedBootImages")
        .and_then(|m| m.get("machineManagers"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        out.push(FieldError::new(
            "spec.managedBootImages.machineManagers",
            "Forbidden: mco manages no machine sets, so it cannot update their boot images",
        ));
    }
    if let Some(mode) = other
        .get("bootImageSkewEnforcement")
        .and_then(|b| b.get("mode"))
        .and_then(Value::as_str)
        .filter(|m| *m != "None")
    {
        out.push(FieldError::new(
            "spec.bootImageSkewEnforcement.mode",
            format!(
                "Forbidden: mco has no boot images to enforce a skew on (mode {})",
                crate::gofmt::quote(mode)
            ),
        ));
    }
    out
}

/// `status` of a MachineConfiguration, written by mco's operator controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationStatus {
    /// The `metadata.generation` the status was computed from (the daemon waits for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_disruption_policy_status: Option<NodeDisruptionPolicyStatus>,
    /// Conditions and other status fields, as given.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `status.nodeDisruptionPolicyStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyStatus {
    /// Defaults merged with the user's policies (6.2).
    #[serde(default)]
    pub cluster_policies: NodeDisruptionPolicyConfig,
}

/// `spec.nodeDisruptionPolicy` and `status.nodeDisruptionPolicyStatus.clusterPolicies` (one
/// shape; the status may also hold [`ActionType::Special`]).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyConfig {
    /// Per file or directory path (at most 50 in a spec, 100 in the status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FilePolicy>,
    /// Per unit name (at most 50 in a spec, 100 in the status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitPolicy>,
    /// For SSH key and password changes.
    #[serde(default, skip_serializing_if = "SshKeyPolicy::is_empty")]
    pub sshkey: SshKeyPolicy,
}

/// Actions for changes to the file at `path` or, for a directory, anything under it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FilePolicy {
    /// Absolute path of a file, or of a directory whose files it covers.
    pub path: String,
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// Actions for changes to the systemd unit `name` (its dropins included).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct UnitPolicy {
    /// Unit name with its suffix (`chronyd.service`).
    pub name: String,
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

/// Actions for any SSH key (or password hash) change.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SshKeyPolicy {
    /// Actions in the order they run.
    #[serde(default)]
    pub actions: Vec<Action>,
}

impl SshKeyPolicy {
    fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// One action: `{type, reload: {serviceName}, restart: {serviceName}}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Action {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: ActionType,
    /// The service to reload; required iff `type` is Reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<ServiceRef>,
    /// The service to restart; required iff `type` is Restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<ServiceRef>,
}

/// `{serviceName: crio.service}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    /// `${NAME}${SERVICETYPE}`, at most 255 characters ([`check_service_name`]).
    pub service_name: String,
}

/// The action types (`NodeDisruptionPolicyStatusActionType`); `Special` is status-only.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionType {
    /// Drain and reboot (the default for any change no policy matches).
    Reboot,
    /// Drain before writing; no reboot.
    Drain,
    /// `systemctl reload <reload.serviceName>`.
    Reload,
    /// `systemctl restart <restart.serviceName>`.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing (MCO's `SkipReboot` event).
    None,
    /// MCO-internal, status only: `registries.conf`, drain unless the change is safe, then
    /// reload crio.
    Special,
}

impl ActionType {
    /// The wire name (`Reboot`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ActionType::Reboot => "Reboot",
            ActionType::Drain => "Drain",
            ActionType::Reload => "Reload",
            ActionType::Restart => "Restart",
            ActionType::DaemonReload => "DaemonReload",
            ActionType::None => "None",
            ActionType::Special => "Special",
        }
    }
}

impl Action {
    /// An action without a service (`Reboot`, `Drain`, `DaemonReload`, `None`, `Special`).
    pub fn of(kind: ActionType) -> Action {
        Action {
            kind,
            reload: None,
            restart: None,
        }
    }
    /// `Reload <service>`.
    pub fn reload(service: &str) -> Action {
        Action {
            reload: Some(ServiceRef {
                service_name: service.into(),
            }),
            ..Action::of(ActionType::Reload)
        }
    }
    /// `Restart <service>`.
    pub fn restart(service: &str) -> Action {
        Action {
            restart: Some(ServiceRef {
                service_name: service.into(),
            }),
            ..Action::of(ActionType::Restart)
        }
    }
}

impl std::fmt::Display for Action {
    /// `Reboot`, `Reload crio.service`, `Restart chronyd.service`, ...
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_str())?;
        let service = self.reload.as_ref().or(self.restart.as_ref());
        if let Some(s) = service {
            write!(f, " {}", s.service_name)?;
        }
        Ok(())
    }
}

/// Admission of a MachineConfiguration (mco-facts 6.1): the name must be `cluster`; `files` and
/// `units` at most 50 entries, unique by path / name; each `actions` list 1..10 entries with
/// `Reboot` and `None` standing alone; `reload` required iff `Reload`, `restart` iff `Restart`;
/// service and unit names `${NAME}${SERVICETYPE}` (at most 255 characters); `Special` is not
/// user-settable; file paths absolute. Messages are the CRD's (CEL rules and enum) texts.
pub fn validate_machine_configuration(mc: &MachineConfiguration) -> Result<(), Invalid> {
    let mut causes = crate::model::validate_object_meta(&mc.metadata);
    let name = mc.metadata.name.clone().unwrap_or_default();
    if name != CLUSTER {
        causes.push(FieldError::new(
            "metadata.name",
            "Only a single object of MachineConfiguration is allowed and it must be named cluster.",
        ));
    }
    if let Some(p) = &mc.spec.node_disruption_policy {
        causes.extend(validate_policy_spec(p, "spec.nodeDisruptionPolicy"));
    }
    causes.extend(validate_unsupported(&mc.spec.other));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "MachineConfiguration".into(),
            name,
            causes,
        })
    }
}

/// The CRD's enum check on every `actions[].type` of a raw MachineConfiguration, run before it
/// is decoded so that an unknown type gets the API server's message (`Unsupported value:
/// "Bounce": supported values: ...`) naming the field, not a decoder error. `Special` passes
/// here and is refused by [`validate_policy_spec`] with the same message.
pub fn check_action_types(raw: &Value) -> Result<(), Invalid> {
    let mut causes = Vec::new();
    let policy = &raw["spec"]["nodeDisruptionPolicy"];
    let mut lists: Vec<(String, &Value)> = vec![(
        "spec.nodeDisruptionPolicy.sshkey.actions".into(),
        &policy["sshkey"]["actions"],
    )];
    for key in ["files", "units"] {
        for (i, entry) in policy[key].as_array().into_iter().flatten().enumerate() {
            lists.push((
                format!("spec.nodeDisruptionPolicy.{key}[{i}].actions"),
                &entry["actions"],
            ));
        }
    }
    for (at, actions) in lists {
        for (j, a) in actions.as_array().into_iter().flatten().enumerate() {
            let t = &a["type"];
            let known = t.as_str().is_some_and(|t| {
                [
                    "Reboot",
                    "Drain",
                    "Reload",
                    "Restart",
                    "DaemonReload",
                    "None",
                    "Special",
                ]
                .contains(&t)
            });
            if !known {
                causes.push(FieldError::new(
                    format!("{at}[{j}].type"),
                    format!("Unsupported value: {}: supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\"", crate::gofmt::quote(&match t { Value::String(s) => s.clone(), other => other.to_string() })),
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "MachineConfiguration".into(),
            name: raw["metadata"]["name"].as_str().unwrap_or("").to_string(),
            causes,
        })
    }
}

/// The 6.1 rules for one `spec.nodeDisruptionPolicy` at field path `at`.
pub fn validate_policy_spec(p: &NodeDisruptionPolicyConfig, at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    for (list, len) in [("files", p.files.len()), ("units", p.units.len())] {
        if len > MAX_SPEC_ENTRIES {
            causes.push(FieldError::new(
                format!("{at}.{list}"),
                format!("Too many: {len}: must have at most {MAX_SPEC_ENTRIES} items"),
            ));
        }
    }
    for (i, f) in p.files.iter().enumerate() {
        let field = format!("{at}.files[{i}]");
        if !f.path.starts_with('/') {
            causes.push(FieldError::new(
                format!("{field}.path"),
                format!("Invalid value: {:?}: path must be an absolute path", f.path),
            ));
        }
        if p.files[..i].iter().any(|o| o.path == f.path) {
            causes.push(FieldError::new(
                field.clone(),
                format!("Duplicate value: {{\"path\":{:?}}}", f.path),
            ));
        }
        causes.extend(validate_actions(&f.actions, &format!("{field}.actions")));
    }
    for (i, u) in p.units.iter().enumerate() {
        let field = format!("{at}.units[{i}]");
        if let Err(m) = check_service_name(&u.name) {
            causes.push(FieldError::new(format!("{field}.name"), m));
        }
        if p.units[..i].iter().any(|o| o.name == u.name) {
            causes.push(FieldError::new(
                field.clone(),
                format!("Duplicate value: {{\"name\":{:?}}}", u.name),
            ));
        }
        causes.extend(validate_actions(&u.actions, &format!("{field}.actions")));
    }
    if !p.sshkey.actions.is_empty() {
        causes.extend(validate_actions(&p.sshkey.actions, &format!("{at}.sshkey.actions")));
    }
    causes
}

fn validate_actions(actions: &[Action], at: &str) -> Vec<FieldError> {
    let mut causes = Vec::new();
    if actions.is_empty() {
        causes.push(FieldError::new(at, "Required value"));
    }
    if actions.len() > MAX_ACTIONS {
        causes.push(FieldError::new(
            at,
            format!("Too many: {}: must have at most {MAX_ACTIONS} items", actions.len()),
        ));
    }
    for (t, word) in [(ActionType::Reboot, "Reboot"), (ActionType::None, "None")] {
        if actions.len() > 1 && actions.iter().any(|a| a.kind == t) {
            causes.push(FieldError::new(
                at,
                format!("Invalid value: \"array\": {word} action can only be specified standalone, as it will override any other actions"),
            ));
        }
    }
    for (i, a) in actions.iter().enumerate() {
        let field = format!("{at}[{i}]");
        if a.kind == ActionType::Special {
            causes.push(FieldError::new(
                format!("{field}.type"),
                "Unsupported value: \"Special\": supported values: \"Reboot\", \"Drain\", \"Reload\", \"Restart\", \"DaemonReload\", \"None\"",
            ));
        }
        for (t, svc, word, key) in [
            (ActionType::Reload, &a.reload, "Reload", "reload"),
            (ActionType::Restart, &a.restart, "Restart", "restart"),
        ] {
            if (a.kind == t) != svc.is_some() {
                causes.push(FieldError::new(
                    field.clone(),
                    format!(
                        "Invalid value: \"object\": {key} is required when type is {word}, and forbidden otherwise"
                    ),
                ));
            }
            if let Some(s) = svc {
                if let Err(m) = check_service_name(&s.service_name) {
                    causes.push(FieldError::new(format!("{field}.{key}.serviceName"), m));
                }
            }
        }
    }
    causes
}

/// `NodeDisruptionPolicyServiceName`: `^[a-zA-Z0-9:._\\-]+\..` and a systemd unit suffix, at most
/// 255 characters. Errors carry the CRD's messages.
pub fn check_service_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_SERVICE_NAME {
        return Err(format!("Too long: may not be more than {MAX_SERVICE_NAME} bytes"));
    }
    if !SERVICE_TYPES.iter().any(|t| name.ends_with(t)) {
        return Err(format!("Invalid value: \"string\": Invalid ${{SERVICETYPE}} in service name. Expected format is ${{NAME}}${{SERVICETYPE}}, where ${{SERVICETYPE}} must be one of {}.", SERVICE_TYPES.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ")));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || ":._\\-".contains(c);
    let head_ok = name
        .find(|c: char| !ok_char(c))
        .map_or(name.len(), |i| i)
        .min(name.len());
    // The regex needs one or more allowed characters, then a '.', then any character.
    let prefix = &name[..head_ok];
    let valid = prefix
        .char_indices()
        .any(|(i, c)| i > 0 && c == '.' && i + 1 < name.len());
    if !valid {
        return Err("Invalid value: \"string\": Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be atleast 1 character long and can only consist of alphabets, digits, \":\", \"-\", \"_\", \".\", and \"\\\"".into());
    }
    Ok(())
}

/// MCO's default cluster policies, in MCO's order (`pkg/apihelpers/apihelpers.go`
/// `defaultClusterPolicies`, mco-facts 6.2).
pub fn default_cluster_policies() -> NodeDisruptionPolicyConfig {
    use ActionType as T;
    let file = |path: &str, actions: Vec<Action>| FilePolicy {
        path: path.into(),
        actions,
    };
    let crio_reload = || vec![Action::reload("crio.service")];
    NodeDisruptionPolicyConfig {
        files: vec![
            file("/var/lib/kubelet/config.json", vec![Action::of(T::None)]),
            file("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", crio_reload()),
            file("/etc/containers/policy.json", crio_reload()),
            file(REGISTRIES_CONF, vec![Action::of(T::Special)]),
            file("/etc/containers/registries.d", crio_reload()),
            file("/etc/crio/policies", crio_reload()),
            file("/etc/nmstate/openshift", vec![Action::of(T::None)]),
            file(
                "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                vec![
                    Action::restart("coreos-update-ca-trust.service"),
                    Action::restart("crio.service"),
                ],
            ),
            file(
                "/etc/kubernetes/credential-providers",
                vec![Action::restart("kubelet.service")],
            ),
            file(
                "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
                vec![Action::of(T::DaemonReload), Action::restart("kubelet.service")],
            ),
            file("/etc/iri-registry", vec![Action::restart("iri-registry.service")]),
            file(
                "/usr/local/bin/load-registry-image.sh",
                vec![Action::restart("iri-registry.service")],
            ),
            file(
                "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                vec![Action::restart("coreos-update-ca-trust.service")],
            ),
        ],
        units: vec![UnitPolicy {
            name: "iri-registry.service".into(),
            actions: vec![Action::of(T::DaemonReload), Action::restart("iri-registry.service")],
        }],
        sshkey: SshKeyPolicy {
            actions: vec![Action::of(T::None)],
        },
    }
}

/// MCO's `MergeClusterPolicies` (mco-facts 6.2): the defaults, with a user file policy of the
/// same path replacing the default in place (else appended), the same for units by name, and
/// user sshkey actions replacing the default when non-empty.
pub fn merge_cluster_policies(user: Option<&NodeDisruptionPolicyConfig>) -> NodeDisruptionPolicyConfig {
    let mut out = default_cluster_policies();
    let Some(user) = user else { return out };
    for f in &user.files {
        match out.files.iter_mut().find(|d| d.path == f.path) {
            Some(d) => *d = f.clone(),
            None => out.files.push(f.clone()),
        }
    }
    for u in &user.units {
        match out.units.iter_mut().find(|d| d.name == u.name) {
            Some(d) => *d = u.clone(),
            None => out.units.push(u.clone()),
        }
    }
    if !user.sshkey.actions.is_empty() {
        out.sshkey = user.sshkey.clone();
    }
    out
}

/// The status a MachineConfiguration should have for its spec and generation: `clusterPolicies`
/// merged, `observedGeneration` = `metadata.generation`; other status fields kept.
pub fn desired_status(mc: &MachineConfiguration) -> MachineConfigurationStatus {
    MachineConfigurationStatus {
        observed_generation: mc.metadata.generation,
        node_disruption_policy_status: Some(NodeDisruptionPolicyStatus {
            cluster_policies: merge_cluster_policies(mc.spec.node_disruption_policy.as_ref()),
        }),
        other: mc.status.other.clone(),
    }
}

/// What changed between two rendered configs, as the planner needs it (MCO's
/// `machineConfigDiff` and `CalculateConfigFileDiffs` / unit diffs, `pkg/daemon/update.go`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// osImageURL, kernelArguments, fips, kernelType or extensions changed (always Reboot).
    pub os: bool,
    /// File paths added, removed or changed in any field, in new-then-removed order.
    pub files: Vec<String>,
    /// Unit names added, removed or changed (dropins included).
    pub units: Vec<String>,
    /// `passwd.users` changed (SSH keys, password hash).
    pub passwd: bool,
}

impl Changes {
    /// The file paths and unit names that differ between `old` and `new`; `os` is passed in
    /// (the caller compares the MachineConfig fields outside Ignition).
    pub fn between(old: &Config, new: &Config, os: bool) -> Changes {
        let mut files = Vec::new();
        for f in &new.storage.files {
            if old.storage.files.iter().find(|o| o.path == f.path) != Some(f) {
                files.push(f.path.clone());
            }
        }
        for f in &old.storage.files {
            if !new.storage.files.iter().any(|n| n.path == f.path) {
                files.push(f.path.clone());
            }
        }
        let mut units = Vec::new();
        for u in &new.systemd.units {
            if old.systemd.units.iter().find(|o| o.name == u.name) != Some(u) {
                units.push(u.name.clone());
            }
        }
        for u in &old.systemd.units {
            if !new.systemd.units.iter().any(|n| n.name == u.name) {
                units.push(u.name.clone());
            }
        }
        Changes {
            os,
            files,
            units,
            passwd: old.passwd.users != new.passwd.users,
        }
    }
}

/// The policy whose path is the longest equal to `path` or a parent directory of it (a prefix
/// ending at a path separator), MCO's `FindClosestFilePolicyPathMatch`.
pub fn closest_file_policy<'a>(path: &str, policies: &'a [FilePolicy]) -> Option<&'a FilePolicy> {
    policies
        .iter()
        .filter(|p| {
            let dir = p.path.trim_end_matches('/');
            path == p.path || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|p| p.path.trim_end_matches('/').len())
}

/// MCO's `calculatePostConfigChangeNodeDisruptionActionFromMCDiffs` (mco-facts 6.3, steps 2-7;
/// the force file's Reboot is the caller's): `[Reboot]` for OS-level changes; `[None]` without
/// file, unit or passwd changes; else each changed file's closest policy (none -> `[Reboot]`),
/// each changed unit's exact policy (none -> `[Reboot]`), then the sshkey actions; any Reboot
/// collapses the list to `[Reboot]`, None is dropped beside other actions.
pub fn calculate_actions(changes: &Changes, policies: &NodeDisruptionPolicyConfig) -> Vec<Action> {
    let reboot = || vec![Action::of(ActionType::Reboot)];
    if changes.os {
        return reboot();
    }
    if changes.files.is_empty() && changes.units.is_empty() && !changes.passwd {
        return vec![Action::of(ActionType::None)];
    }
    let mut out = Vec::new();
    for path in &changes.files {
        match closest_file_policy(path, &policies.files) {
            Some(p) => out.extend(p.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    for unit in &changes.units {
        match policies.units.iter().find(|p| &p.name == unit) {
            Some(p) => out.extend(p.actions.iter().cloned()),
            None => return reboot(),
        }
    }
    if changes.passwd {
        out.extend(policies.sshkey.actions.iter().cloned());
    }
    if out.iter().any(|a| a.kind == ActionType::Reboot) {
        return reboot();
    }
    if out.iter().any(|a| a.kind != ActionType::None) {
        out.retain(|a| a.kind != ActionType::None);
    } else {
        out = vec![Action::of(ActionType::None)];
    }
    out
}

/// What a node does for one update: the actions (6.3) and whether it drains first (6.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The actions after the writes, in order (`[Reboot]` alone when the node reboots).
    pub actions: Vec<Action>,
    /// Whether the node drains before the writes.
    pub drain: bool,
}

impl Plan {
    /// `[Reboot]` with a drain: the force file's plan, and the plan when a config cannot be read.
    pub fn reboot() -> Plan {
        Plan {
            actions: vec![Action::of(ActionType::Reboot)],
            drain: true,
        }
    }

    /// Whether the plan reboots.
    pub fn reboots(&self) -> bool {
        reboots(&self.actions)
    }

    /// The actions as one line: `Restart chronyd.service, DaemonReload`.
    pub fn summary(&self) -> String {
        self.actions
            .iter()
            .map(Action::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The plan for moving a node from `old` to `new` under `policies` (the cluster policies, or
/// [`default_cluster_policies`] when there is no MachineConfiguration `cluster`). OS-level
/// changes are MCO's `machineConfigDiff` fields (osImageURL, kernelArguments, fips, kernelType
/// with `""` = `default`, extensions). Errors: an Ignition config that does not parse.
pub fn plan(
    old: &crate::model::MachineConfig,
    new: &crate::model::MachineConfig,
    policies: &NodeDisruptionPolicyConfig,
) -> Result<Plan, String> {
    let parse = |mc: &crate::model::MachineConfig| -> Result<Config, String> {
        match &mc.spec.config {
            None | Some(Value::Null) => Ok(Config::default()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
        }
    };
    let (oc, nc) = (parse(old)?, parse(new)?);
    let (o, n) = (&old.spec, &new.spec);
    let kernel = |k: &str| if k.is_empty() { "default" } else { k }.to_string();
    let os = o.os_image_url != n.os_image_url
        || o.kernel_arguments != n.kernel_arguments
        || o.fips != n.fips
        || kernel(&o.kernel_type) != kernel(&n.kernel_type)
        || o.extensions != n.extensions;
    let actions = calculate_actions(&Changes::between(&oc, &nc, os), policies);
    let registries = |c: &Config| {
        c.storage
            .files
            .iter()
            .find(|f| f.path == REGISTRIES_CONF)
            .map(|f| crate::ignition::file_contents(f).unwrap_or_default())
    };
    let drain = drain_required(&actions, registries(&oc).as_deref(), registries(&nc).as_deref());
    Ok(Plan { actions, drain })
}

/// The cluster policies in force for a MachineConfiguration `cluster` (`None`: absent): its
/// status when the operator has caught up with its generation, else the same merge computed
/// here from its spec (mco does not make the daemon wait for the status, as MCO's 2 minute
/// poll does).
pub fn policies_for(cluster: Option<&MachineConfiguration>) -> NodeDisruptionPolicyConfig {
    match cluster {
        None => default_cluster_policies(),
        Some(m) => match (&m.status.node_disruption_policy_status, m.status.observed_generation) {
            (Some(s), g) if g == m.metadata.generation => s.cluster_policies.clone(),
            _ => merge_cluster_policies(m.spec.node_disruption_policy.as_ref()),
        },
    }
}

/// Whether the plan reboots.
pub fn reboots(actions: &[Action]) -> bool {
    actions.iter().any(|a| a.kind == ActionType::Reboot)
}

/// MCO's drain decision on the NDP path (mco-facts 6.4): drain for Reboot or Drain; for
/// Special, drain unless the `registries.conf` change is safe (`old`/`new` are the file's
/// contents, `None` when absent).
pub fn drain_required(actions: &[Action], old_registries: Option<&[u8]>, new_registries: Option<&[u8]>) -> bool {
    if actions
        .iter()
        .any(|a| matches!(a.kind, ActionType::Reboot | ActionType::Drain))
    {
        return true;
    }
    if actions.iter().any(|a| a.kind == ActionType::Special) {
        return !registries_change_is_safe(old_registries, new_registries);
    }
    false
}

/// One `[[registry]]` of containers-registries.conf(5), the fields the safe-change rules read.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct Registry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<Mirror>,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct Mirror {
    #[serde(default)]
    location: String,
    #[serde(default)]
    pull_from_mirror: String,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct RegistriesConf {
    #[serde(default)]
    unqualified_search_registries: Vec<String>,
    #[serde(default)]
    registry: Vec<Registry>,
}

impl Registry {
    fn key(&self) -> &str {
        if self.prefix.is_empty() {
            &self.location
        } else {
            &self.prefix
        }
    }
}

const DIGEST_ONLY: &str = "digest-only";

/// MCO's `isSafeContainerRegistryConfChanges` (`pkg/daemon/drain.go`, mco-facts 6.4): the
/// search list only extended at its end; no registry removed; an existing registry keeps its
/// prefix, location, blocked and insecure, loses no mirror, and an existing mirror's
/// `pull-from-mirror` only changes to `digest-only`; every new mirror is digest-only (or the
/// registry `mirror-by-digest-only`); a new registry has only digest-only mirrors (or, with none,
/// `mirror-by-digest-only = true`). A file that does not parse as TOML is not safe (MCO fails the
/// update there; mco drains and goes on).
pub fn registries_change_is_safe(old: Option<&[u8]>, new: Option<&[u8]>) -> bool {
    let parse = |b: Option<&[u8]>| -> Option<RegistriesConf> {
        match b {
            None => Some(RegistriesConf::default()),
            Some(b) => toml::from_str(std::str::from_utf8(b).ok()?).ok(),
        }
    };
    let (Some(old), Some(new)) = (parse(old), parse(new)) else {
        return false;
    };
    if !new
        .unqualified_search_registries
        .starts_with(&old.unqualified_search_registries)
    {
        return false;
    }
    for o in &old.registry {
        let Some(n) = new.registry.iter().find(|n| n.key() == o.key()) else {
            return false;
        };
        if n.prefix != o.prefix || n.location != o.location || n.blocked != o.blocked || n.insecure != o.insecure {
            return false;
        }
        for om in &o.mirror {
            let Some(nm) = n.mirror.iter().find(|m| m.location == om.location) else {
                return false;
            };
            if nm.pull_from_mirror != om.pull_from_mirror && nm.pull_from_mirror != DIGEST_ONLY {
                return false;
            }
        }
        for nm in &n.mirror {
            let added = !o.mirror.iter().any(|m| m.location == nm.location);
            if added && nm.pull_from_mirror != DIGEST_ONLY && !n.mirror_by_digest_only {
                return false;
            }
        }
    }
    for n in &new.registry {
        if old.registry.iter().any(|o| o.key() == n.key()) {
            continue;
        }
        let ok = if n.mirror.is_empty() {
            n.mirror_by_digest_only
        } else {
            n.mirror.iter().all(|m| m.pull_from_mirror == DIGEST_ONLY)
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests;
