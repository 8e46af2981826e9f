//! KubeletConfig (mco-facts 8.1): validation, the key-presence merge over the role's base
//! kubelet configuration, and the generated MachineConfig `99-<pool>-generated-kubelet[-n]`.
//!
//! MCO `pkg/controller/kubelet-config/kubelet_config_controller.go` and `helpers.go`. Where mco
//! differs: MCO decodes the user's KubeletConfiguration into Go structs and merges with mergo's
//! `WithOverride`, so a zero value the user wrote cannot replace a template value (MCO
//! special-cases `protectKernelDefaults: false` by text). mco follows mergo for `""`, empty
//! lists/maps and zero durations, but lets an explicit `false` or `0` win ([`merge_user`]).
//! Keys the kubelet does not know are kept (MCO's typed decode drops them).

use super::templates::{self, ign_file, TemplateSettings};
use crate::model::{label, KubeletConfig, LabelSelector, MachineConfig, MachineConfigPool, OwnerReference, ROLE_LABEL};
use serde_json::{Map, Value};

pub mod accept;
pub mod schema;

/// A KubeletConfig MCO's controller refuses: the field path and MCO's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// `spec.kubeletConfig.cgroupDriver`, or `spec.machineConfigPoolSelector`.
    pub field: String,
    /// MCO's error text (`KubeletConfiguration: cgroupDriver is not allowed to be set, ...`).
    pub message: String,
}

impl RuleError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> RuleError {
        RuleError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The condition message: MCO's `Error: <message>`, with the field path appended.
    pub fn condition_message(&self) -> String {
        format!("Error: {} ({})", self.message, self.field)
    }
}

/// The kubelet log-level dropin MCO writes for `spec.logLevel`.
pub const LOGGING_DROPIN: &str = "/etc/systemd/system/kubelet.service.d/20-logging.conf";
/// The node-sizing env file MCO writes for `systemReserved` and `autoSizingReserved`.
pub const NODE_SIZING_ENV: &str = "/etc/node-sizing-enabled.env";

/// The pools a KubeletConfig (or ContainerRuntimeConfig) selector matches, by pool labels.
/// An empty or absent selector matches nothing (MCO: "does not match any MachineConfigPools").
pub fn matching_pools<'a>(
    selector: Option<&LabelSelector>,
    pools: impl IntoIterator<Item = &'a MachineConfigPool>,
) -> Vec<&'a MachineConfigPool> {
    pools
        .into_iter()
        .filter(|p| crate::model::selector_matches(selector, &p.metadata))
        .collect()
}

/// The node label MCO's `isControlPlanePool` looks for (`ctrlcommon.MasterLabel`).
pub const MASTER_LABEL: &str = "node-role.kubernetes.io/master";

/// MCO's `isControlPlanePool` (`pkg/controller/kubelet-config/helpers.go`): the pools `master`
/// and `arbiter`, and any pool whose nodeSelector requires the master role label (in
/// `matchLabels`, or a `matchExpressions` entry on it with `Exists` or `In`).
pub fn is_control_plane(pool: &MachineConfigPool) -> bool {
    if matches!(pool.name(), "master" | "arbiter") {
        return true;
    }
    let Some(sel) = pool.spec.node_selector.as_ref() else {
        return false;
    };
    sel.match_labels.as_ref().is_some_and(|m| m.contains_key(MASTER_LABEL))
        || sel
            .match_expressions
            .iter()
            .flatten()
            .any(|e| e.key == MASTER_LABEL && matches!(e.operator.as_str(), "Exists" | "In"))
}

/// [`validate_spec`], then MCO's per-pool `validateStaticPodPathGivenPool`: a control-plane
/// pool refuses the key `staticPodPath` written at all (MCO looks for it in the raw JSON, so an
/// explicit `""` or `null` counts), any other pool refuses a non-empty one.
///
/// Errors: the first violated rule, with its field.
pub fn validate(kc: &KubeletConfig, pool: &MachineConfigPool) -> Result<(), RuleError> {
    validate_spec(kc)?;
    let Some(user) = kc.spec.kubelet_config.as_ref().filter(|u| !u.is_null()) else {
        return Ok(());
    };
    let field = "spec.kubeletConfig.staticPodPath";
    if is_control_plane(pool) {
        if user.get("staticPodPath").is_some() {
            return Err(RuleError::new(
                field,
                format!(
                    "KubeletConfiguration: staticPodPath is not allowed to be set for control plane pool {}",
                    crate::gofmt::quote(pool.name())
                ),
            ));
        }
    } else if let Some(p) = user["staticPodPath"].as_str().filter(|p| !p.is_empty()) {
        return Err(RuleError::new(
            field,
            format!(
                "KubeletConfiguration: staticPodPath must be empty for pool {}, but contains: {p}",
                crate::gofmt::quote(pool.name())
            ),
        ));
    }
    Ok(())
}

/// MCO's `validateUserKubeletConfig` (`helpers.go`), which the controller runs before it looks
/// for pools or suffixes: `logLevel` in 0..10, then the decode of `spec.kubeletConfig` into
/// `KubeletConfiguration` (`DecodeKubeletConfig`; [`schema::check`] reproduces its type
/// errors: "KubeletConfig could not be unmarshalled, err: ..."), then the forbidden fields and
/// combinations. (The CRD refuses a `logLevel` outside 0..10 at admission already,
/// [`super::admit`]; the controller's check stays for objects stored before.)
///
/// Errors: the first violated rule, with its field.
pub fn validate_spec(kc: &KubeletConfig) -> Result<(), RuleError> {
    let user = kc.spec.kubelet_config.clone().unwrap_or(Value::Null);
    let path = |k: &str| format!("spec.kubeletConfig.{k}");
    if let Some(l) = kc.spec.log_level {
        if !(0..=10).contains(&l) {
            return Err(RuleError::new(
                "spec.logLevel",
                format!("KubeletConfig's LogLevel is not valid [0,10]: {l}"),
            ));
        }
    }
    if let Err(e) = schema::check(&user) {
        return Err(RuleError::new(
            if e.path.is_empty() {
                "spec.kubeletConfig".to_string()
            } else {
                path(&e.path)
            },
            format!("KubeletConfig could not be unmarshalled, err: {}", e.message),
        ));
    }
    let get = |k: &str| user.get(k).filter(|v| !v.is_null());
    let text = go_text;
    for key in ["cgroupDriver", "clusterDNS", "clusterDomain", "featureGates"] {
        if let Some(v) = get(key).filter(|v| !is_empty(v)) {
            return Err(RuleError::new(
                path(key),
                format!(
                    "KubeletConfiguration: {key} is not allowed to be set, but contains: {}",
                    text(v)
                ),
            ));
        }
    }
    if let Some(v) = get("failSwapOn") {
        return Err(RuleError::new(
            path("failSwapOn"),
            format!(
                "KubeletConfiguration: failSwapOn is not allowed to be set, but contains: {}",
                text(v)
            ),
        ));
    }
    if let Some(v) = user.pointer("/memorySwap/swapBehavior").filter(|v| !is_empty(v)) {
        return Err(RuleError::new(
            "spec.kubeletConfig.memorySwap.swapBehavior",
            format!(
                "KubeletConfiguration: swapBehavior is not allowed to be set, but contains: {}",
                text(v)
            ),
        ));
    }
    if get("systemReserved").is_some_and(|v| !is_empty(v)) && kc.spec.auto_sizing_reserved == Some(true) {
        return Err(RuleError::new(
            "spec.kubeletConfig.systemReserved",
            "KubeletConfiguration: autoSizingReserved and systemdReserved cannot be set together",
        ));
    }
    let (src, sc) = (get("systemReservedCgroup"), get("systemCgroups"));
    if let (Some(a), Some(b)) = (src.filter(|v| !is_empty(v)), sc.filter(|v| !is_empty(v))) {
        if a != b {
            return Err(RuleError::new(
                path("systemReservedCgroup"),
                format!(
                    "KubeletConfiguration: systemReservedCgroup ({}) must match systemCgroups ({})",
                    text(a),
                    text(b)
                ),
            ));
        }
    }
    if let Some(p) = &kc.spec.tls_security_profile {
        tls_settings(p)?;
    }
    Ok(())
}

/// A value as Go's `%v`/`%s` prints it in MCO's messages: strings bare, lists `[a b]`, maps
/// `map[k:v]` with sorted keys.
fn go_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_text).collect::<Vec<_>>().join(" ")),
        Value::Object(o) => {
            let mut kv: Vec<String> = o.iter().map(|(k, v)| format!("{k}:{}", go_text(v))).collect();
            kv.sort();
            format!("map[{}]", kv.join(" "))
        }
        other => other.to_string(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Merges the user's KubeletConfiguration over the template's, MCO's
/// `mergo.Merge(original, user, WithOverride)` with one deliberate difference:
///
/// - objects (structs and maps) merge key by key, recursively, as mergo does;
/// - a value Go counts as zero for its field ([`schema::is_zero`]: `""`, `[]`, `{}`, a zero
///   duration such as `0s`) never replaces the template's value, as with mergo: the kubelet
///   refuses several of them (`containerRuntimeEndpoint: ""`, `nodeStatusUpdateFrequency: 0s`)
///   and its defaulting treats the others as "unset", so real clusters rely on the template's;
/// - mco differs for `false` and numeric `0`: written explicitly they win (MCO cannot tell them
///   from "unset" except `protectKernelDefaults: false`, which it detects textually); the
///   kubelet accepts both;
/// - `null` means "not written".
pub fn merge_user(base: &mut Value, user: &Value) {
    merge_fields(base, user, Some(schema::FIELDS));
}

fn merge_fields(base: &mut Value, user: &Value, fields: Option<&[(&str, schema::Ty)]>) {
    let (Value::Object(b), Value::Object(u)) = (base, user) else {
        return;
    };
    for (k, v) in u {
        let t = fields.and_then(|f| f.iter().find(|(n, _)| n == k)).map(|(_, t)| *t);
        if v.is_null() || schema::is_zero(t, v) {
            continue;
        }
        match b.get_mut(k) {
            Some(existing) if existing.is_object() && v.is_object() => {
                let inner = match t {
                    Some(schema::Ty::Struct(f)) => Some(f),
                    _ => None,
                };
                merge_fields(existing, v, inner)
            }
            _ => {
                b.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The `enforceNodeAllocatable` keys of system-reserved enforcement
/// (`kubeletypes.SystemReservedEnforcementKey`, `SystemReservedCompressibleEnforcementKey`).
const SYSTEM_RESERVED_KEYS: [&str; 2] = ["system-reserved", "system-reserved-compressible"];

fn str_list(v: &Value) -> Vec<&str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// MCO's fix-ups in `generateKubeletIgnFiles` (`helpers.go`), after the merge:
///
/// 1. when the user wrote a `kubeletConfig` with a non-empty `enforceNodeAllocatable` that has
///    no system-reserved entry, and no `systemReservedCgroup` (absent or `""`), the template's
///    `systemReservedCgroup` is cleared (otherwise it is kept: the kubelet refuses
///    system-reserved enforcement without that cgroup);
/// 2. when the merged `reservedSystemCPUs` is non-empty, `systemReservedCgroup` is cleared and
///    `enforceNodeAllocatable` loses its `system-reserved*` entries, keeping the others in
///    order, with `pods` put first when it is missing (the kubelet refuses `--reserved-cpus`
///    with `--system-reserved-cgroup`).
///
/// `user` is the user's `spec.kubeletConfig` (`None` when not written).
pub fn reserved_fixups(conf: &mut Value, user: Option<&Value>) {
    let obj = conf.as_object_mut().expect("kubelet config is an object");
    if let Some(u) = user {
        let enforce = str_list(&u["enforceNodeAllocatable"]);
        if u["systemReservedCgroup"].as_str().unwrap_or("").is_empty()
            && !enforce.is_empty()
            && !enforce.iter().any(|e| SYSTEM_RESERVED_KEYS.contains(e))
        {
            obj.remove("systemReservedCgroup");
        }
    }
    if obj
        .get("reservedSystemCPUs")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        obj.remove("systemReservedCgroup");
        let current = obj.get("enforceNodeAllocatable").cloned().unwrap_or(Value::Null);
        let mut kept: Vec<&str> = str_list(&current)
            .into_iter()
            .filter(|e| !SYSTEM_RESERVED_KEYS.contains(e))
            .collect();
        if !kept.contains(&"pods") {
            kept.insert(0, "pods");
        }
        obj.insert("enforceNodeAllocatable".into(), serde_json::json!(kept));
    }
}

/// MCO's last check in `generateKubeletIgnFiles`: the merged `systemReservedCgroup` and
/// `systemCgroups`, when both are set, must be equal.
///
/// Errors: "invalid merged configuration: systemReservedCgroup (A) must match systemCgroups
/// (B)", on the field the user wrote (`systemCgroups` if it did, else `systemReservedCgroup`).
pub fn merged_cgroups_match(conf: &Value, user: Option<&Value>) -> Result<(), RuleError> {
    let get = |k: &str| conf[k].as_str().filter(|s| !s.is_empty());
    if let (Some(a), Some(b)) = (get("systemReservedCgroup"), get("systemCgroups")) {
        if a != b {
            let field = if user.is_some_and(|u| u.get("systemCgroups").is_some()) {
                "spec.kubeletConfig.systemCgroups"
            } else {
                "spec.kubeletConfig.systemReservedCgroup"
            };
            return Err(RuleError::new(
                field,
                format!("invalid merged configuration: systemReservedCgroup ({a}) must match systemCgroups ({b})"),
            ));
        }
    }
    Ok(())
}

/// IANA names of the ciphers of the TLS profiles (`github.com/openshift/api/config/v1`
/// `TLSProfiles`, translated with library-go's `OpenSSLToIANACipherSuites`; TLS 1.3 suites are
/// not configurable in Go and are left out, as MCO's translation does).
const INTERMEDIATE: [&str; 6] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];
const OLD_EXTRA: [&str; 11] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
];

/// OpenSSL cipher name to IANA (library-go `openSSLToIANACiphersMap`, the configurable ones).
fn openssl_to_iana(name: &str) -> Option<&'static str> {
    Some(match name {
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-ECDSA-AES128-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-RSA-AES128-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
        "ECDHE-ECDSA-AES128-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
        "ECDHE-RSA-AES128-SHA" => "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "ECDHE-ECDSA-AES256-SHA" => "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
        "ECDHE-RSA-AES256-SHA" => "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
        "AES128-GCM-SHA256" => "TLS_RSA_WITH_AES_128_GCM_SHA256",
        "AES256-GCM-SHA384" => "TLS_RSA_WITH_AES_256_GCM_SHA384",
        "AES128-SHA256" => "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "AES128-SHA" => "TLS_RSA_WITH_AES_128_CBC_SHA",
        "AES256-SHA" => "TLS_RSA_WITH_AES_256_CBC_SHA",
        _ => return None,
    })
}

/// `(tlsMinVersion, tlsCipherSuites)` of a `tlsSecurityProfile` (`type`: Old, Intermediate,
/// Modern, Custom; an empty type is Intermediate, the default profile).
///
/// Errors: an unknown type (`spec.tlsSecurityProfile.type`).
pub fn tls_settings(profile: &Value) -> Result<(String, Vec<String>), RuleError> {
    let owned = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match profile["type"].as_str().unwrap_or("") {
        "" | "Intermediate" => Ok(("VersionTLS12".into(), owned(&INTERMEDIATE))),
        "Modern" => Ok(("VersionTLS13".into(), Vec::new())),
        "Old" => {
            let mut c = owned(&INTERMEDIATE);
            c.extend(owned(&OLD_EXTRA));
            Ok(("VersionTLS10".into(), c))
        }
        "Custom" => {
            let custom = &profile["custom"];
            let min = custom["minTLSVersion"].as_str().unwrap_or("VersionTLS12").to_string();
            let ciphers = custom["ciphers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter_map(openssl_to_iana)
                .map(str::to_string)
                .collect();
            Ok((min, ciphers))
        }
        other => Err(RuleError::new(
            "spec.tlsSecurityProfile.type",
            format!("unsupported TLS profile type {other:?} (Old, Intermediate, Modern or Custom)"),
        )),
    }
}

/// The files of the generated MachineConfig for `pool`: the role's base kubelet
/// configuration ([`templates::base_kubelet_config`]) with the KubeletConfig applied
/// ([`kubelet_files`]).
///
/// Errors: [`validate`]'s and [`kubelet_files`]'.
pub fn generated_files(
    kc: &KubeletConfig,
    pool: &MachineConfigPool,
    settings: &TemplateSettings,
) -> Result<Vec<(String, String)>, RuleError> {
    validate(kc, pool)?;
    let base = templates::base_kubelet_config(templates::template_role(pool.name()), settings);
    kubelet_files(kc, base)
}

/// MCO's `generateKubeletIgnFiles` over the base configuration `base` (the role's template
/// kubelet.conf as JSON), as its controller calls it: the `tlsSecurityProfile` of the object
/// replaces the TLS settings, `systemReserved` cpu, memory and ephemeral-storage move to the
/// node-sizing env file, the user's `kubeletConfig` is merged ([`merge_user`], without its
/// `featureGates`), then the fix-ups ([`reserved_fixups`]) and the cgroup check
/// ([`merged_cgroups_match`]); last, mco checks the result against the kubelet's own
/// validation ([`accept::check`]), where MCO would write a kubelet.conf the kubelet refuses.
///
/// Returns `(path, contents)` in MCO's order: the node-sizing env file when `systemReserved`
/// has cpu, memory or ephemeral-storage or `autoSizingReserved` is set, the logging dropin when
/// `logLevel` is set, then `kubelet.conf` (YAML).
///
/// Errors: a [`RuleError`] naming the field.
pub fn kubelet_files(kc: &KubeletConfig, mut conf: Value) -> Result<Vec<(String, String)>, RuleError> {
    let written = kc.spec.kubelet_config.as_ref().filter(|u| !u.is_null());
    let mut user = written.cloned().unwrap_or(Value::Object(Map::new()));
    // systemReserved cpu, memory and ephemeral-storage go to the node-sizing env file.
    let reserved = user.get("systemReserved").cloned().unwrap_or(Value::Null);
    if let Some(sr) = user.get_mut("systemReserved").and_then(Value::as_object_mut) {
        for k in ["cpu", "memory", "ephemeral-storage"] {
            sr.remove(k);
        }
        if sr.is_empty() {
            user.as_object_mut().expect("object").remove("systemReserved");
        }
    }
    if let Some(o) = user.as_object_mut() {
        o.remove("featureGates");
    }
    if let Some(p) = &kc.spec.tls_security_profile {
        let (min, ciphers) = tls_settings(p)?;
        conf["tlsMinVersion"] = Value::String(min);
        if ciphers.is_empty() {
            conf.as_object_mut().expect("object").remove("tlsCipherSuites");
        } else {
            conf["tlsCipherSuites"] = serde_json::json!(ciphers);
        }
    }
    merge_user(&mut conf, &user);
    reserved_fixups(&mut conf, written);
    merged_cgroups_match(&conf, written)?;
    accept::check(&conf).map_err(|e| {
        RuleError::new(
            format!("spec.kubeletConfig.{}", e.field),
            format!("the kubelet would refuse the merged kubelet.conf: {}", e.message),
        )
    })?;
    let mut files = Vec::new();
    // MCO writes the env file when the user reserved memory, cpu or ephemeral-storage (then with
    // NODE_SIZING_ENABLED=false), else when `autoSizingReserved` is set.
    let reserved_set = reserved.as_object().is_some_and(|m| {
        ["cpu", "memory", "ephemeral-storage"]
            .iter()
            .any(|k| m.contains_key(*k))
    });
    if reserved_set {
        files.push((NODE_SIZING_ENV.to_string(), node_sizing_env(None, &reserved)));
    } else if kc.spec.auto_sizing_reserved.is_some() {
        files.push((
            NODE_SIZING_ENV.to_string(),
            node_sizing_env(kc.spec.auto_sizing_reserved, &reserved),
        ));
    }
    if let Some(l) = kc.spec.log_level {
        files.push((
            LOGGING_DROPIN.to_string(),
            format!("[Service]\nEnvironment=\"KUBELET_LOG_LEVEL={l}\"\n"),
        ));
    }
    files.push((
        templates::KUBELET_CONF.to_string(),
        serde_saphyr::to_string(&conf).expect("YAML renders"),
    ));
    Ok(files)
}

/// MCO's `createNewKubeletDynamicSystemReservedIgnition`: `NODE_SIZING_ENABLED` from
/// `autoSizingReserved` (false when unset) and the reserved values with MCO's defaults
/// (memory 1Gi, cpu 500m, ephemeral-storage 1Gi).
pub fn node_sizing_env(auto: Option<bool>, reserved: &Value) -> String {
    let v = |k: &str, d: &str| match &reserved[k] {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::String(_) | Value::Null => d.to_string(),
        other => other.to_string(),
    };
    format!(
        "NODE_SIZING_ENABLED={}\nSYSTEM_RESERVED_MEMORY={}\nSYSTEM_RESERVED_CPU={}\nSYSTEM_RESERVED_ES={}\n",
        auto.unwrap_or(false),
        v("memory", "1Gi"),
        v("cpu", "500m"),
        v("ephemeral-storage", "1Gi")
    )
}

/// The generated MachineConfig `name` for `pool` from `files`, owned by the object `owner`
/// (`(apiVersion, kind, name, uid)`), labelled with the pool's role and stamped with the
/// controller version (annotation key `generated_by`).
pub fn machine_config(
    name: &str,
    pool: &str,
    files: &[(String, String)],
    owner: OwnerReference,
    generated_by: &str,
) -> MachineConfig {
    let files = files.iter().map(|(p, c)| ign_file(p, c)).collect();
    let mut mc = templates::machine_config(name, pool, files, vec![]);
    mc.metadata.owner_references = Some(vec![owner]);
    mc.metadata.annotations = Some([(generated_by.to_string(), crate::model::CONTROLLER_VERSION.to_string())].into());
    debug_assert_eq!(label(&mc.metadata, ROLE_LABEL), Some(pool));
    mc
}

#[cfg(test)]
mod tests;
