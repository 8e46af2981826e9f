//! ContainerRuntimeConfig (mco-facts 8.2): validation and the CRI-O dropins and
//! `storage.conf` of `99-<pool>-generated-containerruntime[-n]`.
//!
//! MCO `pkg/controller/container-runtime-config/helpers.go` (`validateUserContainerRuntimeConfig`,
//! `createCRIODropinFiles`). Files are TOML written with the `toml` crate.

use super::kubelet::RuleError;
use crate::model::{ContainerRuntimeConfig, ContainerRuntimeConfiguration, StorePath};
use serde_json::Value;

/// Parses a Kubernetes quantity (`8193`, `64Ki`, `1G`, `10.5Mi`) to bytes.
pub fn quantity_bytes(v: &Value) -> Option<i128> {
    let s = match v {
        Value::Number(n) => return n.as_i64().map(i128::from),
        Value::String(s) => s.trim(),
        _ => return None,
    };
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let mult: f64 = match unit {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    Some((n * mult).ceil() as i128)
}

const LOG_LEVELS: [&str; 7] = ["error", "fatal", "panic", "warn", "info", "debug", "trace"];

fn valid_store_path(p: &str) -> bool {
    p.starts_with('/')
        && !p.contains("//")
        && p.len() > 1
        && p.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
}

/// MCO's validation of `spec.containerRuntimeConfig`.
///
/// Errors: the first violated rule, with its field path.
pub fn validate(c: &ContainerRuntimeConfig) -> Result<(), RuleError> {
    let Some(cfg) = &c.spec.container_runtime_config else {
        return Err(err("spec.containerRuntimeConfig", "containerRuntimeConfig must be set"));
    };
    let f = |k: &str| format!("spec.containerRuntimeConfig.{k}");
    if let Some(p) = cfg.pids_limit {
        if p != 0 && p < 20 {
            return Err(err(f("pidsLimit"), format!("invalid PidsLimit {p}")));
        }
    }
    if let Some(v) = &cfg.log_size_max {
        match quantity_bytes(v) {
            Some(b) if b <= 8192 && b != 0 => {
                return Err(err(
                    f("logSizeMax"),
                    format!("invalid LogSizeMax {}, cannot be less than 8kB", q(v)),
                ))
            }
            None => {
                return Err(err(
                    f("logSizeMax"),
                    format!("invalid LogSizeMax {}, not a quantity", q(v)),
                ))
            }
            _ => {}
        }
    }
    if let Some(v) = &cfg.overlay_size {
        match quantity_bytes(v) {
            Some(b) if b < 0 => {
                return Err(err(
                    f("overlaySize"),
                    format!("invalid overlaySize {}, cannot be less than 0", q(v)),
                ))
            }
            None => {
                return Err(err(
                    f("overlaySize"),
                    format!("invalid overlaySize {}, not a quantity", q(v)),
                ))
            }
            _ => {}
        }
    }
    if let Some(l) = &cfg.log_level {
        if !LOG_LEVELS.contains(&l.as_str()) {
            return Err(err(
                f("logLevel"),
                format!("invalid LogLevel {l:?}, must be one of error, fatal, panic, warn, info, debug, or trace"),
            ));
        }
    }
    if let Some(r) = &cfg.default_runtime {
        if !matches!(r.as_str(), "" | "runc" | "crun") {
            return Err(err(
                f("defaultRuntime"),
                format!("invalid DefaultRuntime {r:?}, must be one of crun, runc"),
            ));
        }
    }
    for (key, stores) in stores(cfg) {
        for (i, s) in stores.iter().enumerate() {
            if !valid_store_path(&s.path) {
                return Err(err(
                    format!("spec.containerRuntimeConfig.{key}[{i}].path"),
                    format!(
                        "invalid path {:?}: must be absolute, match ^/[a-zA-Z0-9/._-]+$ and not contain //",
                        s.path
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn stores(cfg: &ContainerRuntimeConfiguration) -> [(&'static str, &[StorePath]); 3] {
    [
        (
            "additionalLayerStores",
            cfg.additional_layer_stores.as_deref().unwrap_or(&[]),
        ),
        (
            "additionalImageStores",
            cfg.additional_image_stores.as_deref().unwrap_or(&[]),
        ),
        (
            "additionalArtifactStores",
            cfg.additional_artifact_stores.as_deref().unwrap_or(&[]),
        ),
    ]
}

fn q(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn err(field: impl Into<String>, message: impl Into<String>) -> RuleError {
    RuleError {
        field: field.into(),
        message: message.into(),
    }
}

/// A `[crio.runtime]` dropin with one key.
fn runtime_dropin(key: &str, value: toml::Value) -> String {
    let mut runtime = toml::Table::new();
    runtime.insert(key.into(), value);
    let mut crio = toml::Table::new();
    crio.insert("runtime".into(), toml::Value::Table(runtime));
    let mut root = toml::Table::new();
    root.insert("crio".into(), toml::Value::Table(crio));
    toml::to_string(&root).expect("TOML renders")
}

/// The files of the generated MachineConfig: one CRI-O dropin per setting under
/// `/etc/crio/crio.conf.d/01-ctrcfg-<setting>`, and `/etc/containers/storage.conf` when an
/// overlay size or additional stores are set. `(path, contents)`.
///
/// Errors: [`validate`]'s.
pub fn generated_files(c: &ContainerRuntimeConfig) -> Result<Vec<(String, String)>, RuleError> {
    validate(c)?;
    let cfg = c.spec.container_runtime_config.clone().unwrap_or_default();
    let dir = "/etc/crio/crio.conf.d";
    let mut out = Vec::new();
    if let Some(l) = &cfg.log_level {
        out.push((
            format!("{dir}/01-ctrcfg-logLevel"),
            runtime_dropin("log_level", l.clone().into()),
        ));
    }
    if let Some(p) = cfg.pids_limit {
        out.push((
            format!("{dir}/01-ctrcfg-pidsLimit"),
            runtime_dropin("pids_limit", p.into()),
        ));
    }
    if let Some(v) = &cfg.log_size_max {
        let b = quantity_bytes(v).unwrap_or(0) as i64;
        out.push((
            format!("{dir}/01-ctrcfg-logSizeMax"),
            runtime_dropin("log_size_max", b.into()),
        ));
    }
    if let Some(r) = cfg.default_runtime.as_ref().filter(|r| !r.is_empty()) {
        out.push((
            format!("{dir}/01-ctrcfg-defaultRuntime"),
            runtime_dropin("default_runtime", r.clone().into()),
        ));
    }
    if let Some(a) = cfg.additional_artifact_stores.as_ref().filter(|a| !a.is_empty()) {
        let paths: Vec<toml::Value> = a.iter().map(|s| s.path.clone().into()).collect();
        out.push((
            format!("{dir}/01-ctrcfg-additionalArtifactStores"),
            runtime_dropin("additional_artifact_stores", toml::Value::Array(paths)),
        ));
    }
    let layers = cfg.additional_layer_stores.clone().unwrap_or_default();
    let images = cfg.additional_image_stores.clone().unwrap_or_default();
    if cfg.overlay_size.is_some() || !layers.is_empty() || !images.is_empty() {
        out.push((
            "/etc/containers/storage.conf".into(),
            storage_conf(&cfg, &layers, &images),
        ));
    }
    Ok(out)
}

/// `/etc/containers/storage.conf` (containers-storage.conf(5)) with the overlay size and
/// additional stores; layer stores are read-only (`:ref` suffix, as MCO writes them).
fn storage_conf(cfg: &ContainerRuntimeConfiguration, layers: &[StorePath], images: &[StorePath]) -> String {
    let mut overlay = toml::Table::new();
    if let Some(v) = &cfg.overlay_size {
        let s = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        overlay.insert("size".into(), s.into());
    }
    overlay.insert("mountopt".into(), "nodev,metacopy=on".into());
    let mut options = toml::Table::new();
    let list = |v: Vec<String>| toml::Value::Array(v.into_iter().map(toml::Value::from).collect());
    options.insert(
        "additionalimagestores".into(),
        list(images.iter().map(|s| s.path.clone()).collect()),
    );
    options.insert(
        "additionallayerstores".into(),
        list(layers.iter().map(|s| format!("{}:ref", s.path)).collect()),
    );
    options.insert("overlay".into(), toml::Value::Table(overlay));
    let mut storage = toml::Table::new();
    storage.insert("driver".into(), "overlay".into());
    storage.insert("runroot".into(), "/run/containers/storage".into());
    storage.insert("graphroot".into(), "/var/lib/containers/storage".into());
    storage.insert("options".into(), toml::Value::Table(options));
    let mut root = toml::Table::new();
    root.insert("storage".into(), toml::Value::Table(storage));
    toml::to_string(&root).expect("TOML renders")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctrcfg(c: Value) -> ContainerRuntimeConfig {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"containerRuntimeConfig": c}})).unwrap()
    }

    fn check(c: Value, field: &str, message_start: &str) {
        let e = validate(&ctrcfg(c)).unwrap_err();
        assert_eq!(e.field, field);
        assert!(e.message.starts_with(message_start), "{}", e.message);
    }

    #[test]
    fn each_rule_names_its_field() {
        check(
            json!({"pidsLimit": 19}),
            "spec.containerRuntimeConfig.pidsLimit",
            "invalid PidsLimit 19",
        );
        check(
            json!({"logSizeMax": "8Ki"}),
            "spec.containerRuntimeConfig.logSizeMax",
            "invalid LogSizeMax \"8Ki\", cannot be less than 8kB",
        );
        check(
            json!({"overlaySize": "-1G"}),
            "spec.containerRuntimeConfig.overlaySize",
            "invalid overlaySize",
        );
        check(
            json!({"logLevel": "verbose"}),
            "spec.containerRuntimeConfig.logLevel",
            "invalid LogLevel",
        );
        check(
            json!({"defaultRuntime": "kata"}),
            "spec.containerRuntimeConfig.defaultRuntime",
            "invalid DefaultRuntime",
        );
        check(
            json!({"additionalImageStores": [{"path": "/ok"}, {"path": "/a//b"}]}),
            "spec.containerRuntimeConfig.additionalImageStores[1].path",
            "invalid path",
        );
        for ok in [
            json!({"pidsLimit": 0}),
            json!({"pidsLimit": 20}),
            json!({"logSizeMax": 8193}),
            json!({"logSizeMax": "1Mi"}),
            json!({"defaultRuntime": "runc"}),
        ] {
            validate(&ctrcfg(ok.clone())).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
    }

    #[test]
    fn dropins_are_crio_runtime_toml_and_storage_conf_only_when_needed() {
        let files = generated_files(&ctrcfg(
            json!({"pidsLimit": 2048, "logLevel": "debug", "logSizeMax": "64Ki"}),
        ))
        .unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/etc/crio/crio.conf.d/01-ctrcfg-logLevel",
                "/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit",
                "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax"
            ]
        );
        let pids: toml::Table = files[1].1.parse().unwrap();
        assert_eq!(pids["crio"]["runtime"]["pids_limit"].as_integer(), Some(2048));
        let size: toml::Table = files[2].1.parse().unwrap();
        assert_eq!(size["crio"]["runtime"]["log_size_max"].as_integer(), Some(65536));
        let files = generated_files(&ctrcfg(json!({"overlaySize": "10G"}))).unwrap();
        assert_eq!(files[0].0, "/etc/containers/storage.conf");
        let st: toml::Table = files[0].1.parse().unwrap();
        assert_eq!(st["storage"]["options"]["overlay"]["size"].as_str(), Some("10G"));
    }
}
