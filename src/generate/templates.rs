//! The template configs of each role (mco-facts 9): `01-<role>-kubelet` and
//! `01-<role>-container-runtime`, built from the files in `config/templates/` and the cluster
//! settings a real cluster supplies through its ControllerConfig (cluster DNS IP, cluster
//! domain).
//!
//! MCO `pkg/controller/template/render.go` renders `templates/<role>/<name>/_base` (then
//! platform layers) with Go's text/template; mco ships the `_base` layer only (no platform to
//! template for) and substitutes the few `{{.Field}}` values it knows. Custom roles use the
//! worker templates, as in MCO.

use crate::model::{MachineConfig, ObjectMeta, ROLE_LABEL};
use serde_json::{json, Value};

/// The platform the nodes run: which template configs they get (`mco server --platform`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Platform {
    /// OpenShift nodes (the default, MCO's): `00-<role>`, `01-<role>-kubelet` (kubelet.conf
    /// and the enabled `kubelet.service`) and `01-<role>-container-runtime` (registries.conf,
    /// policy.json, CRI-O's `00-default`).
    #[default]
    Openshift,
    /// Plain hosts with no kubelet or CRI-O: `00-<role>` only. OpenShift's `kubelet.service`
    /// needs `/usr/bin/kubelet`, `crio.service` and `/etc/node-sizing.env`; on a plain host it
    /// fails and restarts every 10 s.
    None,
}

impl Platform {
    /// The name `--platform` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Openshift => "openshift",
            Platform::None => "none",
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Platform {
    type Err = String;

    fn from_str(s: &str) -> Result<Platform, String> {
        match s {
            "openshift" => Ok(Platform::Openshift),
            "none" => Ok(Platform::None),
            other => Err(format!("unknown platform {other:?}: expected openshift or none")),
        }
    }
}

/// Values a real cluster supplies through its ControllerConfig, and the platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateSettings {
    /// The cluster DNS service IP (`ControllerConfig.spec.dns.clusterDNSIP`), written to
    /// kubelet.conf `clusterDNS`.
    pub cluster_dns_ip: String,
    /// The cluster domain (`cluster.local` in MCO's template).
    pub cluster_domain: String,
    /// Which template configs there are ([`template_configs`]).
    pub platform: Platform,
}

impl Default for TemplateSettings {
    /// OpenShift's defaults: service network 172.30.0.0/16, DNS at .10, `cluster.local`.
    fn default() -> Self {
        TemplateSettings {
            cluster_dns_ip: "172.30.0.10".into(),
            cluster_domain: "cluster.local".into(),
            platform: Platform::Openshift,
        }
    }
}

/// MCO's `templates/<role>/01-<role>-kubelet/_base/files/kubelet.yaml`, per role: master's
/// has `failSwapOn: true` and neither `systemReservedCgroup` nor `enforceNodeAllocatable`.
const KUBELET_WORKER_YAML: &str = include_str!("../../config/templates/kubelet/kubelet-worker.yaml");
const KUBELET_MASTER_YAML: &str = include_str!("../../config/templates/kubelet/kubelet-master.yaml");
const KUBELET_SERVICE: &str = include_str!("../../config/templates/kubelet/kubelet.service");
const REGISTRIES_CONF: &str = include_str!("../../config/templates/container-runtime/registries.conf");
const POLICY_JSON: &str = include_str!("../../config/templates/container-runtime/policy.json");
const CRIO_DEFAULT: &str = include_str!("../../config/templates/container-runtime/00-default");

/// The paths the template configs write.
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";
pub const REGISTRIES_CONF_PATH: &str = "/etc/containers/registries.conf";
pub const POLICY_JSON_PATH: &str = "/etc/containers/policy.json";
pub const CRIO_DEFAULT_PATH: &str = "/etc/crio/crio.conf.d/00-default";

/// The role whose templates a pool uses: `master` and `worker` their own, custom pools worker's.
pub fn template_role(pool: &str) -> &str {
    if pool == "master" {
        "master"
    } else {
        "worker"
    }
}

fn fill(text: &str, role: &str, s: &TemplateSettings) -> String {
    // The APIServer's default TLS profile (Intermediate), as MCO's template controller renders
    // `{{.TLSMinVersion}}` and `{{- range .TLSCipherSuites }}` when no APIServer sets one.
    let (min, ciphers) = super::kubelet::tls_settings(&json!({})).expect("the default profile is known");
    let list: String = ciphers.iter().map(|c| format!("\n  - {c}")).collect();
    text.replace("{{.ClusterDNSIP}}", &s.cluster_dns_ip)
        .replace("{{.ClusterDomain}}", &s.cluster_domain)
        .replace("{{.TLSMinVersion}}", &min)
        .replace("{{.TLSCipherSuites}}", &list)
        .replace("{{.Role}}", role)
}

/// The role's `kubelet.conf` as the template controller writes it into `01-<role>-kubelet`:
/// the template text with the cluster values filled in (MCO writes the rendered template as is,
/// not re-encoded).
pub fn kubelet_conf_text(role: &str, s: &TemplateSettings) -> String {
    let text = if role == "master" {
        KUBELET_MASTER_YAML
    } else {
        KUBELET_WORKER_YAML
    };
    fill(text, role, s)
}

/// The role's base kubelet configuration (a KubeletConfiguration as JSON, keys in file order):
/// what a KubeletConfig is merged over (MCO `generateOriginalKubeletConfigWithFeatureGates`
/// decodes the same rendered template).
pub fn base_kubelet_config(role: &str, s: &TemplateSettings) -> Value {
    serde_saphyr::from_str(&kubelet_conf_text(role, s)).expect("config/templates/kubelet/kubelet-<role>.yaml parses")
}

/// The base `/etc/containers/registries.conf` every role starts from.
pub fn base_registries_conf() -> &'static str {
    REGISTRIES_CONF
}

/// The base `/etc/containers/policy.json` every role starts from.
pub fn base_policy_json() -> &'static str {
    POLICY_JSON
}

/// An Ignition file entry as MCO's generated configs write them: mode 0644, overwrite, contents
/// as a data URL (`ctrlcommon.NewIgnFileBytesOverwriting`).
pub fn ign_file(path: &str, contents: &str) -> Value {
    json!({"path": path, "mode": 420, "overwrite": true, "contents": {"source": data_url(contents)}})
}

/// `data:,<percent-encoded>`: a data URL Ignition decodes to `contents`.
pub fn data_url(contents: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'/');
    format!("data:,{}", percent_encoding::utf8_percent_encode(contents, SET))
}

/// A MachineConfig named `name` for `role` with Ignition 3.4.0 `storage.files` and
/// `systemd.units`.
pub fn machine_config(name: &str, role: &str, files: Vec<Value>, units: Vec<Value>) -> MachineConfig {
    let mut config = json!({"ignition": {"version": "3.4.0"}});
    if !files.is_empty() {
        config["storage"] = json!({"files": files});
    }
    if !units.is_empty() {
        config["systemd"] = json!({"units": units});
    }
    MachineConfig {
        api_version: "machineconfiguration.openshift.io/v1".into(),
        kind: "MachineConfig".into(),
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([(ROLE_LABEL.to_string(), role.to_string())].into()),
            ..Default::default()
        },
        spec: crate::model::MachineConfigSpec {
            config: Some(config),
            ..Default::default()
        },
    }
}

/// The template MachineConfigs of `role`: `01-<role>-kubelet` (kubelet.conf and the enabled
/// `kubelet.service`) and `01-<role>-container-runtime` (registries.conf, policy.json, CRI-O's
/// `00-default`). `role` is the role name; another role gets worker's contents under its own
/// names (the template controller itself makes them for `master` and `worker` only, as MCO's).
/// None on [`Platform::None`].
pub fn template_configs(role: &str, s: &TemplateSettings) -> Vec<MachineConfig> {
    if s.platform == Platform::None {
        return Vec::new();
    }
    let t = template_role(role);
    let kubelet_conf = kubelet_conf_text(t, s);
    let kubelet = machine_config(
        &format!("01-{role}-kubelet"),
        role,
        vec![ign_file(KUBELET_CONF, &kubelet_conf)],
        vec![json!({"name": "kubelet.service", "enabled": true, "contents": fill(KUBELET_SERVICE, t, s)})],
    );
    let runtime = machine_config(
        &format!("01-{role}-container-runtime"),
        role,
        vec![
            ign_file(REGISTRIES_CONF_PATH, REGISTRIES_CONF),
            ign_file(POLICY_JSON_PATH, POLICY_JSON),
            ign_file(CRIO_DEFAULT_PATH, CRIO_DEFAULT),
        ],
        vec![],
    );
    vec![kubelet, runtime]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_kubelet_config_carries_mcos_defaults_and_the_cluster_settings() {
        let s = TemplateSettings {
            cluster_dns_ip: "10.0.0.10".into(),
            cluster_domain: "example.local".into(),
            ..Default::default()
        };
        let k = base_kubelet_config("worker", &s);
        assert_eq!(k["clusterDNS"], json!(["10.0.0.10"]));
        assert_eq!(k["clusterDomain"], "example.local");
        assert_eq!(k["maxPods"], 250);
        assert_eq!(k["podPidsLimit"], 4096);
        assert_eq!(k["protectKernelDefaults"], true);
        assert_eq!(k["cgroupDriver"], "systemd");
        assert_eq!(k["serverTLSBootstrap"], true);
    }

    /// MCO's current `templates/{worker,master}/01-<role>-kubelet/_base/files/kubelet.yaml`:
    /// worker has `failSwapOn: false`, `memorySwap.swapBehavior: NoSwap`,
    /// `systemReservedCgroup` and `enforceNodeAllocatable: [pods, system-reserved-compressible]`;
    /// master has `failSwapOn: true` and no reserved cgroup or enforcement; both take the
    /// default TLS profile (Intermediate) and pass the kubelet's validation.
    #[test]
    fn kubelet_templates_are_mcos_per_role() {
        let s = TemplateSettings::default();
        let w = base_kubelet_config("worker", &s);
        assert_eq!(w["failSwapOn"], false);
        assert_eq!(w["memorySwap"], json!({"swapBehavior": "NoSwap"}));
        assert_eq!(w["systemCgroups"], "/system.slice");
        assert_eq!(w["systemReservedCgroup"], "/system.slice");
        assert_eq!(
            w["enforceNodeAllocatable"],
            json!(["pods", "system-reserved-compressible"])
        );
        assert_eq!(w["tlsMinVersion"], "VersionTLS12");
        assert_eq!(w["tlsCipherSuites"].as_array().unwrap().len(), 6);
        assert!(w.get("shutdownGracePeriod").is_none());
        let m = base_kubelet_config("master", &s);
        assert_eq!(m["failSwapOn"], true);
        assert_eq!(m["memorySwap"], json!({"swapBehavior": "NoSwap"}));
        assert!(m.get("systemReservedCgroup").is_none() && m.get("enforceNodeAllocatable").is_none());
        let mut keys: Vec<&String> = w.as_object().unwrap().keys().collect();
        keys.retain(|k| !["systemReservedCgroup", "enforceNodeAllocatable"].contains(&k.as_str()));
        assert_eq!(keys, m.as_object().unwrap().keys().collect::<Vec<_>>());
        for k in [&w, &m] {
            super::super::kubelet::accept::check(k).unwrap();
        }
        // The template config carries the rendered text itself, as MCO's does.
        let text = kubelet_conf_text("worker", &s);
        assert!(
            text.contains("tlsCipherSuites:\n  - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"),
            "{text}"
        );
        let mc = &template_configs("worker", &s)[0];
        let src = mc.spec.config.as_ref().unwrap()["storage"]["files"][0]["contents"]["source"].clone();
        assert_eq!(src, json!(data_url(&text)));
    }

    #[test]
    fn custom_roles_reuse_the_worker_templates() {
        let s = TemplateSettings::default();
        assert_eq!(template_role("infra"), "worker");
        let worker = template_configs("worker", &s);
        let names: Vec<&str> = worker.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["01-worker-kubelet", "01-worker-container-runtime"]);
        let unit = |mcs: &[MachineConfig]| {
            mcs[0].spec.config.as_ref().unwrap()["systemd"]["units"][0]["contents"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(unit(&worker).contains("node-role.kubernetes.io/worker"));
        assert!(unit(&template_configs("master", &s)).contains("node-role.kubernetes.io/master"));
    }

    #[test]
    fn a_plain_host_platform_has_no_kubelet_or_cri_o_configs() {
        let none = TemplateSettings {
            platform: "none".parse().unwrap(),
            ..Default::default()
        };
        for role in ["master", "worker", "infra"] {
            assert!(template_configs(role, &none).is_empty(), "{role}");
        }
        assert_eq!(template_configs("worker", &TemplateSettings::default()).len(), 2);
        assert_eq!("openshift".parse::<Platform>().unwrap(), Platform::default());
        assert_eq!(
            "aws".parse::<Platform>().unwrap_err(),
            r#"unknown platform "aws": expected openshift or none"#
        );
    }

    #[test]
    fn every_template_config_passes_machine_config_validation() {
        for role in ["master", "worker", "infra"] {
            for mc in template_configs(role, &TemplateSettings::default()) {
                crate::manifest::validate_machine_config(&mc).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
