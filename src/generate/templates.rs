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

/// Values a real cluster supplies through its ControllerConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateSettings {
    /// The cluster DNS service IP (`ControllerConfig.spec.dns.clusterDNSIP`), written to
    /// kubelet.conf `clusterDNS`.
    pub cluster_dns_ip: String,
    /// The cluster domain (`cluster.local` in MCO's template).
    pub cluster_domain: String,
}

impl Default for TemplateSettings {
    /// OpenShift's defaults: service network 172.30.0.0/16, DNS at .10, `cluster.local`.
    fn default() -> Self {
        TemplateSettings {
            cluster_dns_ip: "172.30.0.10".into(),
            cluster_domain: "cluster.local".into(),
        }
    }
}

const KUBELET_YAML: &str = include_str!("../../config/templates/kubelet/kubelet.yaml");
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
    text.replace("{{.ClusterDNSIP}}", &s.cluster_dns_ip)
        .replace("{{.ClusterDomain}}", &s.cluster_domain)
        .replace("{{.Role}}", role)
}

/// The role's base kubelet configuration (a KubeletConfiguration as JSON, keys in file order).
pub fn base_kubelet_config(role: &str, s: &TemplateSettings) -> Value {
    serde_saphyr::from_str(&fill(KUBELET_YAML, role, s)).expect("config/templates/kubelet/kubelet.yaml parses")
}

/// The base `/etc/containers/registries.conf` every role starts from.
pub fn base_registries_conf() -> &'static str {
    REGISTRIES_CONF
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
pub fn template_configs(role: &str, s: &TemplateSettings) -> Vec<MachineConfig> {
    let t = template_role(role);
    let kubelet_conf = serde_saphyr::to_string(&base_kubelet_config(t, s)).expect("YAML renders");
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
    fn every_template_config_passes_machine_config_validation() {
        for role in ["master", "worker", "infra"] {
            for mc in template_configs(role, &TemplateSettings::default()) {
                crate::manifest::validate_machine_config(&mc).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
