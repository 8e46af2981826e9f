//! KubeletConfig (mco-facts 8.1): validation, the key-presence merge over the role's base
//! kubelet configuration, and the generated MachineConfig `99-<pool>-generated-kubelet[-n]`.
//!
//! MCO `pkg/controller/kubelet-config/kubelet_config_controller.go` and `helpers.go`. Where mco
//! differs: MCO decodes the user's KubeletConfiguration into Go structs and merges with mergo's
//! `WithOverride`, so a zero value the user wrote (`false`, `0`, `""`, `[]`) cannot replace a
//! template value (MCO special-cases `protectKernelDefaults: false` by text). mco merges by key
//! presence: every key the user wrote wins, whatever its value ([`merge_present`]); `null`
//! means "not written". Keys the kubelet does not know are kept (MCO's typed decode drops them).

use super::templates::{self, ign_file, TemplateSettings};
use crate::model::{label, KubeletConfig, LabelSelector, MachineConfig, MachineConfigPool, OwnerReference, ROLE_LABEL};
use serde_json::{Map, Value};

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

/// Whether MCO treats the pool as control plane (`master`, `arbiter`, or a nodeSelector on the
/// master or control-plane role label).
pub fn is_control_plane(pool: &MachineConfigPool) -> bool {
    if matches!(pool.name(), "master" | "arbiter") {
        return true;
    }
    let sel = pool.spec.node_selector.as_ref();
    let keys = [
        "node-role.kubernetes.io/master",
        "node-role.kubernetes.io/control-plane",
    ];
    sel.and_then(|s| s.match_labels.as_ref())
        .is_some_and(|m| keys.iter().any(|k| m.contains_key(*k)))
}

/// MCO's `validateUserKubeletConfig` for one pool: the forbidden fields and combinations.
///
/// Errors: the first violated rule, with its field.
pub fn validate(kc: &KubeletConfig, pool: &MachineConfigPool) -> Result<(), RuleError> {
    let user = kc.spec.kubelet_config.clone().unwrap_or(Value::Null);
    if !(user.is_object() || user.is_null()) {
        return Err(RuleError::new(
            "spec.kubeletConfig",
            "KubeletConfiguration: must be an object",
        ));
    }
    let get = |k: &str| user.get(k).filter(|v| !v.is_null());
    let path = |k: &str| format!("spec.kubeletConfig.{k}");
    let text = go_text;
    if let Some(l) = kc.spec.log_level {
        if !(1..=10).contains(&l) {
            return Err(RuleError::new(
                "spec.logLevel",
                format!("KubeletConfig's LogLevel is not valid [1,10]: {l}"),
            ));
        }
    }
    for (key, empty_is_unset) in [
        ("cgroupDriver", true),
        ("clusterDNS", true),
        ("clusterDomain", true),
        ("featureGates", true),
    ] {
        if let Some(v) = get(key) {
            let set = !empty_is_unset || !is_empty(v);
            if set {
                return Err(RuleError::new(
                    path(key),
                    format!(
                        "KubeletConfiguration: {key} is not allowed to be set, but contains: {}",
                        text(v)
                    ),
                ));
            }
        }
    }
    if let Some(v) = get("staticPodPath") {
        if is_control_plane(pool) {
            return Err(RuleError::new(
                path("staticPodPath"),
                format!(
                    "KubeletConfiguration: staticPodPath is not allowed to be set for control plane pool {}",
                    pool.name()
                ),
            ));
        }
        if !is_empty(v) {
            return Err(RuleError::new(
                path("staticPodPath"),
                format!(
                    "KubeletConfiguration: staticPodPath is not allowed to be set, but contains: {}",
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
                    "KubeletConfiguration: systemReservedCgroup ({}) must be equal to systemCgroups ({})",
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

/// Merges `user` over `base` by key presence: objects merge key by key, recursively; any other
/// value the user wrote (including `false`, `0`, `""`, `[]`) replaces the base value; `null`
/// keeps the base value.
pub fn merge_present(base: &mut Value, user: &Value) {
    match (base, user) {
        (Value::Object(b), Value::Object(u)) => {
            for (k, v) in u {
                if v.is_null() {
                    continue;
                }
                match b.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge_present(existing, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, u) if !u.is_null() => *b = u.clone(),
        _ => {}
    }
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

/// The files of the generated MachineConfig for `pool`: the merged `kubelet.conf` (YAML),
/// the logging dropin when `logLevel` is set, the node-sizing env file when `systemReserved`
/// or `autoSizingReserved` is set. `(path, contents)` in MCO's order.
///
/// Errors: [`validate`]'s.
pub fn generated_files(
    kc: &KubeletConfig,
    pool: &MachineConfigPool,
    settings: &TemplateSettings,
) -> Result<Vec<(String, String)>, RuleError> {
    validate(kc, pool)?;
    let mut conf = templates::base_kubelet_config(templates::template_role(pool.name()), settings);
    let mut user = kc.spec.kubelet_config.clone().unwrap_or(Value::Object(Map::new()));
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
    if let Some(p) = &kc.spec.tls_security_profile {
        let (min, ciphers) = tls_settings(p)?;
        conf["tlsMinVersion"] = Value::String(min);
        if ciphers.is_empty() {
            conf.as_object_mut().expect("object").remove("tlsCipherSuites");
        } else {
            conf["tlsCipherSuites"] = serde_json::json!(ciphers);
        }
    }
    merge_present(&mut conf, &user);
    let mut files = vec![(
        templates::KUBELET_CONF.to_string(),
        serde_saphyr::to_string(&conf).expect("YAML renders"),
    )];
    if let Some(l) = kc.spec.log_level {
        files.push((
            LOGGING_DROPIN.to_string(),
            format!("[Service]\nEnvironment=\"KUBELET_LOG_LEVEL={l}\"\n"),
        ));
    }
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
