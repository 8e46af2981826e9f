//! ContainerRuntimeConfig (mco-facts 8.2): validation and the CRI-O dropins and
//! `storage.conf` of `99-<pool>-generated-containerruntime[-n]`.
//!
//! MCO `pkg/controller/container-runtime-config/helpers.go` (`validateUserContainerRuntimeConfig`,
//! `createCRIODropinFiles`). Files are TOML written with the `toml` crate.

use super::kubelet::RuleError;
use super::quantity;
use crate::gofmt;
use crate::model::{ContainerRuntimeConfig, ContainerRuntimeConfiguration, StorePath};
use serde_json::Value;

const LOG_LEVELS: [&str; 7] = ["error", "fatal", "panic", "warn", "info", "debug", "trace"];

/// MCO's `storePathRegexp`, `^/[a-zA-Z0-9/._-]+$`.
fn valid_store_path(p: &str) -> bool {
    p.starts_with('/') && p.len() > 1 && p.chars().all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
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
    // MCO refuses only values in (0, 8 KiB]: 0 means the default and a negative value
    // (`-1`) unlimited, which its own e2e test applies.
    if let Some(v) = &cfg.log_size_max {
        let q = quantity::parse_json(v)
            .map_err(|e| err(f("logSizeMax"), format!("invalid LogSizeMax {}: {e}", json_text(v))))?;
        if q.value() > 0 && q.value() <= MIN_LOG_SIZE {
            return Err(err(
                f("logSizeMax"),
                format!(
                    "invalid LogSizeMax {}, cannot be less than 8kB",
                    gofmt::quote(&q.to_string())
                ),
            ));
        }
    }
    if let Some(v) = &cfg.overlay_size {
        let q = quantity::parse_json(v)
            .map_err(|e| err(f("overlaySize"), format!("invalid overlaySize {}: {e}", json_text(v))))?;
        if q.value() < 0 {
            return Err(err(
                f("overlaySize"),
                format!(
                    "invalid overlaySize {}, cannot be less than 0",
                    gofmt::quote(&q.to_string())
                ),
            ));
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
            if let Err(m) = store_path(&s.path, key) {
                return Err(err(format!("spec.containerRuntimeConfig.{key}[{i}].path"), m));
            }
        }
    }
    Ok(())
}

/// MCO's `validateStorePath`, with its messages (`field` as MCO names it,
/// `AdditionalLayerStores`, ...).
fn store_path(path: &str, key: &str) -> Result<(), String> {
    let mut field = key.to_string();
    field[..1].make_ascii_uppercase();
    if path.is_empty() {
        return Err(format!("invalid {field}: path must not be empty"));
    }
    if !valid_store_path(path) {
        return Err(format!(
            "invalid {field} path {}: must be an absolute path containing only alphanumeric characters, '/', '.', '_', and '-'",
            gofmt::quote(path)
        ));
    }
    if path.contains("//") {
        return Err(format!(
            "invalid {field} path {}: must not contain consecutive forward slashes",
            gofmt::quote(path)
        ));
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

/// A JSON value as written, for messages about a value that is not a quantity.
fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => gofmt::quote(s),
        other => other.to_string(),
    }
}

/// MCO's `minLogSize` (bytes).
const MIN_LOG_SIZE: i128 = 8192;

/// The ContainerRuntimeConfig CRD's own rules (`0000_80_machine-config_01_containerruntimeconfigs.crd.yaml`
/// in openshift/api): `logSizeMax` and `overlaySize` are int-or-string quantities matching the
/// quantity pattern, `defaultRuntime` one of `crun`, `runc`; with the API server's messages.
pub fn admit(decoded: &Value) -> Vec<crate::validation::FieldError> {
    let cfg = &decoded["spec"]["containerRuntimeConfig"];
    let mut out = Vec::new();
    for key in ["logSizeMax", "overlaySize"] {
        let at = format!("spec.containerRuntimeConfig.{key}");
        let ok = match &cfg[key] {
            Value::Null => true,
            Value::Number(n) => n.is_i64() || n.is_u64(),
            Value::String(s) => quantity::Quantity::parse(s).is_ok(),
            _ => false,
        };
        if !ok {
            out.push(crate::validation::FieldError::new(
                at.clone(),
                format!(
                    "Invalid value: {}: {at} in body should match '{}'",
                    json_text(&cfg[key]),
                    quantity::PATTERN
                ),
            ));
        }
    }
    if let Some(r) = cfg["defaultRuntime"]
        .as_str()
        .filter(|r| !matches!(*r, "crun" | "runc"))
    {
        out.push(crate::validation::FieldError::new(
            "spec.containerRuntimeConfig.defaultRuntime",
            format!(
                "Unsupported value: {}: supported values: \"crun\", \"runc\"",
                gofmt::quote(r)
            ),
        ));
    }
    out
}

fn err(field: impl Into<String>, message: impl Into<String>) -> RuleError {
    RuleError {
        field: field.into(),
        message: message.into(),
    }
}

/// A `[crio.runtime]` dropin with one key, as MCO's TOML encoder (BurntSushi `toml`) writes
/// it: `[crio]`, then `[crio.runtime]` and the key indented.
fn runtime_dropin(key: &str, value: toml::Value) -> String {
    format!("[crio]\n  [crio.runtime]\n    {key} = {value}\n")
}

/// The files of the generated MachineConfig, in MCO's order: `/etc/containers/storage.conf`
/// when a non-zero overlay size or additional stores are set (`needsStorageUpdate`), then one
/// CRI-O dropin per setting under `/etc/crio/crio.conf.d/01-ctrcfg-<setting>`
/// (`createCRIODropinFiles`; `logSizeMax` only when it is not zero, written as its value in
/// bytes, `-1` for unlimited). `(path, contents)`.
///
/// Errors: [`validate`]'s.
pub fn generated_files(c: &ContainerRuntimeConfig) -> Result<Vec<(String, String)>, RuleError> {
    validate(c)?;
    let cfg = c.spec.container_runtime_config.clone().unwrap_or_default();
    let dir = "/etc/crio/crio.conf.d";
    let mut out = Vec::new();
    let overlay = cfg
        .overlay_size
        .as_ref()
        .and_then(|v| quantity::parse_json(v).ok())
        .filter(|q| !q.is_zero());
    let layers = cfg.additional_layer_stores.clone().unwrap_or_default();
    let images = cfg.additional_image_stores.clone().unwrap_or_default();
    if overlay.is_some() || !layers.is_empty() || !images.is_empty() {
        out.push((
            "/etc/containers/storage.conf".into(),
            storage_conf(overlay.as_ref(), &layers, &images),
        ));
    }
    if let Some(l) = cfg.log_level.as_ref().filter(|l| !l.is_empty()) {
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
    if let Some(q) = cfg
        .log_size_max
        .as_ref()
        .and_then(|v| quantity::parse_json(v).ok())
        .filter(|q| !q.is_zero())
    {
        let bytes = i64::try_from(q.value()).unwrap_or(i64::MAX);
        out.push((
            format!("{dir}/01-ctrcfg-logSizeMax"),
            runtime_dropin("log_size_max", bytes.into()),
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
    Ok(out)
}

/// `/etc/containers/storage.conf` (containers-storage.conf(5)) with the overlay size and
/// additional stores; layer stores are read-only (`:ref` suffix, as MCO writes them).
fn storage_conf(size: Option<&quantity::Quantity>, layers: &[StorePath], images: &[StorePath]) -> String {
    let mut overlay = toml::Table::new();
    // MCO writes the quantity's canonical string (`OverlaySize.String()`).
    if let Some(q) = size {
        overlay.insert("size".into(), q.to_string().into());
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
    //! The tables named after MCO's tests are ported from
    //! `pkg/controller/container-runtime-config/*_test.go` with their expected values.
    use super::*;
    use serde_json::json;

    fn ctrcfg(c: Value) -> ContainerRuntimeConfig {
        serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"containerRuntimeConfig": c}})).unwrap()
    }

    fn check(c: Value, field: &str, message: &str) {
        let e = validate(&ctrcfg(c)).unwrap_err();
        assert_eq!((e.field.as_str(), e.message.as_str()), (field, message));
    }

    fn file<'a>(files: &'a [(String, String)], path: &str) -> Option<&'a str> {
        files.iter().find(|(p, _)| p == path).map(|(_, c)| c.as_str())
    }

    /// MCO TestContainerRuntimeConfigOptions, and each rule's message as MCO words it.
    #[test]
    fn mco_container_runtime_config_options() {
        for bad in [
            json!({"pidsLimit": 10}),
            json!({"pidsLimit": -10}),
            json!({"logSizeMax": "3k"}),
            json!({"logLevel": "invalid"}),
            json!({"defaultRuntime": "invalid"}),
        ] {
            assert!(validate(&ctrcfg(bad.clone())).is_err(), "{bad}");
        }
        for ok in [
            json!({"pidsLimit": 2048}),
            json!({"pidsLimit": 0}),
            json!({"logSizeMax": "10k"}),
            json!({"logLevel": "debug"}),
            json!({"defaultRuntime": "crun"}),
        ] {
            validate(&ctrcfg(ok.clone())).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
        check(
            json!({"pidsLimit": 19}),
            "spec.containerRuntimeConfig.pidsLimit",
            "invalid PidsLimit 19",
        );
        // MCO refuses only (0, 8 KiB], quoting the quantity's canonical string.
        check(
            json!({"logSizeMax": "8Ki"}),
            "spec.containerRuntimeConfig.logSizeMax",
            "invalid LogSizeMax \"8Ki\", cannot be less than 8kB",
        );
        check(
            json!({"logSizeMax": 8000}),
            "spec.containerRuntimeConfig.logSizeMax",
            "invalid LogSizeMax \"8k\", cannot be less than 8kB",
        );
        for ok in [
            json!({"logSizeMax": "-1"}),
            json!({"logSizeMax": -1}),
            json!({"logSizeMax": 0}),
            json!({"logSizeMax": 8193}),
        ] {
            validate(&ctrcfg(ok.clone())).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        }
        check(
            json!({"overlaySize": "-1G"}),
            "spec.containerRuntimeConfig.overlaySize",
            "invalid overlaySize \"-1G\", cannot be less than 0",
        );
        check(
            json!({"logLevel": "verbose"}),
            "spec.containerRuntimeConfig.logLevel",
            "invalid LogLevel \"verbose\", must be one of error, fatal, panic, warn, info, debug, or trace",
        );
        check(
            json!({"defaultRuntime": "kata"}),
            "spec.containerRuntimeConfig.defaultRuntime",
            "invalid DefaultRuntime \"kata\", must be one of crun, runc",
        );
    }

    /// MCO TestValidateStorePath (through the additional stores, with MCO's field names).
    #[test]
    fn mco_validate_store_path() {
        for ok in ["/var/lib/stargz-store", "/mnt/nfs-images/cache_v1.0"] {
            validate(&ctrcfg(json!({"additionalLayerStores": [{"path": ok}]}))).unwrap();
        }
        for (path, msg) in [
            ("", "invalid AdditionalLayerStores: path must not be empty"),
            ("var/lib/store", "must be an absolute path"),
            ("/var/lib/my store", "must be an absolute path"),
            ("/var/lib/store@v1", "must be an absolute path"),
            ("/var//lib/store", "must not contain consecutive forward slashes"),
        ] {
            let e = validate(&ctrcfg(json!({"additionalLayerStores": [{"path": path}]}))).unwrap_err();
            assert_eq!(e.field, "spec.containerRuntimeConfig.additionalLayerStores[0].path");
            assert!(e.message.contains(msg), "{path}: {}", e.message);
        }
    }

    /// MCO TestCreateCRIODropinFiles: a zero logSizeMax writes no dropin; 10G is written in
    /// bytes, in the encoder's layout. `-1` (unlimited, MCO's e2e object) is written as is.
    #[test]
    fn mco_create_crio_dropin_files() {
        let files = generated_files(&ctrcfg(json!({"logSizeMax": "0k"}))).unwrap();
        assert!(file(&files, "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax").is_none());
        let files = generated_files(&ctrcfg(json!({"logSizeMax": "10G"}))).unwrap();
        assert_eq!(
            file(&files, "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax"),
            Some("[crio]\n  [crio.runtime]\n    log_size_max = 10000000000\n")
        );
        let files = generated_files(&ctrcfg(json!({"logSizeMax": "-1"}))).unwrap();
        let size: toml::Table = file(&files, "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(size["crio"]["runtime"]["log_size_max"].as_integer(), Some(-1));
    }

    /// MCO TestUpdateStorageConfig: a zero overlaySize is not applied (no storage.conf at all:
    /// `needsStorageUpdate`), 10G is written as the quantity's string.
    #[test]
    fn mco_update_storage_config() {
        let files = generated_files(&ctrcfg(json!({"overlaySize": "0k", "pidsLimit": 2048}))).unwrap();
        assert!(file(&files, "/etc/containers/storage.conf").is_none());
        let files = generated_files(&ctrcfg(json!({"overlaySize": "10G"}))).unwrap();
        let st: toml::Table = file(&files, "/etc/containers/storage.conf").unwrap().parse().unwrap();
        assert_eq!(st["storage"]["options"]["overlay"]["size"].as_str(), Some("10G"));
    }

    /// The dropins are `[crio.runtime]` TOML, after storage.conf, in MCO's order.
    #[test]
    fn dropins_in_mcos_order() {
        let files = generated_files(&ctrcfg(
            json!({"pidsLimit": 2048, "logLevel": "debug", "logSizeMax": "64Ki", "overlaySize": "10G"}),
        ))
        .unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/etc/containers/storage.conf",
                "/etc/crio/crio.conf.d/01-ctrcfg-logLevel",
                "/etc/crio/crio.conf.d/01-ctrcfg-pidsLimit",
                "/etc/crio/crio.conf.d/01-ctrcfg-logSizeMax"
            ]
        );
        let pids: toml::Table = files[2].1.parse().unwrap();
        assert_eq!(pids["crio"]["runtime"]["pids_limit"].as_integer(), Some(2048));
        let size: toml::Table = files[3].1.parse().unwrap();
        assert_eq!(size["crio"]["runtime"]["log_size_max"].as_integer(), Some(65536));
    }

    /// The CRD's quantity pattern and `defaultRuntime` enum, at admission.
    #[test]
    fn crd_rules_at_admission() {
        let obj = |c: Value| json!({"spec": {"containerRuntimeConfig": c}});
        assert!(admit(&obj(
            json!({"logSizeMax": "-1", "overlaySize": "10G", "defaultRuntime": "runc"})
        ))
        .is_empty());
        let e = admit(&obj(json!({"logSizeMax": "lots"})));
        assert_eq!(e[0].field, "spec.containerRuntimeConfig.logSizeMax");
        assert!(e[0]
            .message
            .starts_with("Invalid value: \"lots\": spec.containerRuntimeConfig.logSizeMax in body should match"));
        assert_eq!(
            admit(&obj(json!({"defaultRuntime": "kata"})))[0].field,
            "spec.containerRuntimeConfig.defaultRuntime"
        );
    }
}
