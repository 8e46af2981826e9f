//! Manifests: user documents (YAML or JSON) in, typed MachineConfig / MachineConfigPool out.
//!
//! Owns the first wire format of DESIGN.md section 3: splitting a text into documents, reading
//! each into JSON values with the YAML rules Kubernetes users expect, unwrapping `kind: List`,
//! refusing kinds mco does not manage (with the document, kind and name), deserializing the two
//! managed kinds with the field path of any type error, and the object-level validation MCO runs
//! before rendering ([`validate_machine_config`], [`validate_pool`]).
//!
//! Pure: no IO, no clock. It must not render, store or apply anything.
//!
//! YAML reading rules (serde-saphyr, chosen to match what `kubectl` users get from go-yaml v2
//! where it matters and to never silently change a value):
//! - an unquoted integer with a leading zero is **octal** (YAML 1.1, go-yaml v2 and so kubectl):
//!   `mode: 0644` reads as 420, which is 0o644, the permission the author meant. A quoted
//!   `"0644"` stays a string (and is then refused as a mode with a type error naming the field).
//!   `0o644` (YAML 1.2) is octal too. An unquoted `09` is not octal: it reads as the float 9.0
//!   (as go-yaml v2 reads it), which an integer field such as `mode` then refuses.
//! - only `true`/`false` (any case) are booleans: `yes`, `no`, `on`, `off` stay strings, so
//!   `enabled: yes` is a type error at its path instead of a silent boolean.
//! - duplicate keys in one mapping are an error.
//! - empty and comment-only documents are skipped; document numbers count the others.

use crate::ignition::{self, Config};
use crate::model::{MachineConfig, MachineConfigPool, Node, ACCEPTED_GROUPS};
use crate::validation::{FieldError, Invalid};
use serde_json::Value;
use std::fmt;

/// One object mco manages, as read from a manifest.
#[derive(Clone, Debug, PartialEq)]
pub enum Manifest {
    MachineConfig(MachineConfig),
    MachineConfigPool(MachineConfigPool),
    MachineConfiguration(crate::disruption::MachineConfiguration),
    /// A kind stored as JSON ([`Kind::is_generic`]): KubeletConfig, ContainerRuntimeConfig,
    /// the mirror sets, Image; `object` is its typed round trip.
    Other {
        kind: crate::model::Kind,
        object: Value,
    },
}

impl Manifest {
    /// `MachineConfig` or `MachineConfigPool`.
    pub fn kind(&self) -> &'static str {
        match self {
            Manifest::MachineConfig(_) => "MachineConfig",
            Manifest::MachineConfigPool(_) => "MachineConfigPool",
            Manifest::MachineConfiguration(_) => "MachineConfiguration",
            Manifest::Other { kind, .. } => kind.as_str(),
        }
    }

    /// `metadata.name` (`""` when absent; [`validate_machine_config`] and [`validate_pool`]
    /// refuse that).
    pub fn name(&self) -> &str {
        match self {
            Manifest::MachineConfig(mc) => mc.name(),
            Manifest::MachineConfigPool(pool) => pool.name(),
            Manifest::MachineConfiguration(m) => m.metadata.name.as_deref().unwrap_or(""),
            Manifest::Other { object, .. } => object["metadata"]["name"].as_str().unwrap_or(""),
        }
    }

    /// The stored kind of the document.
    pub fn stored_kind(&self) -> crate::model::Kind {
        match self {
            Manifest::MachineConfig(_) => crate::model::Kind::MachineConfig,
            Manifest::MachineConfigPool(_) => crate::model::Kind::MachineConfigPool,
            Manifest::MachineConfiguration(_) => crate::model::Kind::MachineConfiguration,
            Manifest::Other { kind, .. } => *kind,
        }
    }
}

/// Why a document was refused: the machine-readable part of a [`ManifestError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestErrorReason {
    /// Not YAML or JSON (the message carries the parser's line and column).
    Syntax,
    /// The document is a scalar or a list, not a mapping.
    NotAnObject,
    /// No `kind` (and not a Butane config).
    MissingKind,
    /// A Butane config: it must be translated with `butane` first.
    Butane,
    /// A kind MCO has and mco will have, not implemented yet (ControllerConfig).
    NotSupportedYet,
    /// A kind MCO itself does not manage (ClusterRole, ServiceAccount, ...).
    UnmanagedKind,
    /// A managed kind under an apiVersion mco does not serve.
    ApiVersion,
    /// A managed kind whose fields do not have the right types (`field` names the value).
    Invalid,
}

/// A document (or `kind: List` item) that could not be read as a managed object.
///
/// `document` is 0-based among the non-empty documents of the text; `item` is the 0-based
/// index inside `items` of a `kind: List`. Display is one line, 1-based for people:
/// `document 2, items[3] (MachineConfig "99-foo"): spec.config: invalid type: ...`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    pub document: usize,
    pub item: Option<usize>,
    /// The document's `kind`, when it has one.
    pub kind: Option<String>,
    /// The document's `metadata.name`, when it has one.
    pub name: Option<String>,
    /// Path of the offending field (`apiVersion`, `spec.maxUnavailable`), when known.
    pub field: Option<String>,
    pub reason: ManifestErrorReason,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document + 1)?;
        if let Some(i) = self.item {
            write!(f, ", items[{i}]")?;
        }
        match (&self.kind, &self.name) {
            (Some(k), Some(n)) => write!(f, " ({k} {n:?})")?,
            (Some(k), None) => write!(f, " ({k})")?,
            (None, Some(n)) => write!(f, " ({n:?})")?,
            (None, None) => {}
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Kinds of MCO that mco will manage but does not yet.
pub const NOT_SUPPORTED_YET: &[&str] = &["ControllerConfig"];

/// Reads every object of a manifest text: multi-document YAML, one JSON document, or either
/// holding a `kind: List` (or `<Kind>List`) whose `items` are read one by one.
///
/// Returns one result per object, in order. Never panics and never stops at a bad document: a
/// bad document gives an `Err` naming it and the others are still read. A YAML syntax error
/// spoils only the document it is in (documents are split at `---` / `...` lines, which YAML
/// forbids inside a document at column 0).
pub fn parse_documents(text: &str) -> Vec<Result<Manifest, ManifestError>> {
    let mut out = Vec::new();
    for d in parse_with_source(text) {
        out.push(match d {
            Ok(d) => Ok(d.manifest),
            Err(e) => Err(e),
        });
    }
    out
}

/// An accepted document: the typed object and the mapping exactly as written (what
/// `kubectl apply` records as the last-applied configuration).
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub manifest: Manifest,
    pub raw: Value,
}

/// Like [`parse_documents`], keeping each object's mapping as written.
pub fn parse_with_source(text: &str) -> Vec<Result<Document, ManifestError>> {
    let mut out = Vec::new();
    let trimmed = text.trim_start_matches('\u{feff}').trim_start();
    if trimmed.starts_with('{') {
        if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
            read_object(0, None, value, &mut out);
            return out;
        }
    }
    let mut document = 0;
    for (first_line, chunk) in split_documents(text) {
        // Pad with newlines so that parser errors carry the line number in the whole text.
        let padded = format!("{}{}", "\n".repeat(first_line), chunk);
        let parsed = crate::limits::on_yaml_stack(crate::limits::DEFAULT_MAX_JSON_DEPTH, || {
            serde_saphyr::from_multiple_with_options::<Value>(&padded, yaml_options())
        });
        match parsed {
            Ok(values) => {
                for value in values {
                    read_object(document, None, value, &mut out);
                    document += 1;
                }
            }
            Err(e) => {
                out.push(Err(ManifestError {
                    document,
                    item: None,
                    kind: None,
                    name: None,
                    field: None,
                    reason: ManifestErrorReason::Syntax,
                    message: format!(
                        "not valid YAML: {}",
                        crate::limits::yaml_error_message(&e, &crate::limits::Limits::default())
                    ),
                }));
                document += 1;
            }
        }
    }
    out
}

/// The YAML options of [`crate::limits::yaml_options`] with the default limits: alias
/// expansion ("billion laughs") and depth bounded.
fn yaml_options() -> serde_saphyr::Options {
    crate::limits::yaml_options(&crate::limits::Limits::default())
}

/// Splits a YAML stream into `(first line number, text)` per document. A document starts at a
/// `---` line and ends at the next `---` or at a `...` line; directives and comments before a
/// `---` travel with the document they precede.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    fn is_marker(line: &str, marker: &str) -> bool {
        line.strip_prefix(marker)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    }
    fn is_prelude(chunk: &str) -> bool {
        chunk.lines().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || l.starts_with('%')
        })
    }
    let mut docs = Vec::new();
    let mut start = 0;
    let mut current = String::new();
    for (n, line) in text.split_inclusive('\n').enumerate() {
        if is_marker(line, "...") {
            docs.push((start, std::mem::take(&mut current)));
            continue;
        }
        // Comments and directives before a `---` belong to the document it opens.
        if is_marker(line, "---") && !is_prelude(&current) {
            docs.push((start, std::mem::take(&mut current)));
        }
        if current.is_empty() {
            start = n;
        }
        current.push_str(line);
    }
    docs.push((start, current));
    docs.retain(|(_, d)| !is_prelude(d));
    docs
}

fn error(
    document: usize,
    item: Option<usize>,
    value: &Value,
    reason: ManifestErrorReason,
    field: Option<String>,
    message: String,
) -> ManifestError {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    ManifestError {
        document,
        item,
        kind: text(value.get("kind")),
        name: text(value.pointer("/metadata/name")),
        field,
        reason,
        message,
    }
}

fn read_object(document: usize, item: Option<usize>, value: Value, out: &mut Vec<Result<Document, ManifestError>>) {
    use ManifestErrorReason as R;
    if !value.is_object() {
        let what = match &value {
            Value::Array(_) => "a list",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            _ => "empty",
        };
        let message = format!("expected a Kubernetes object (a mapping with apiVersion and kind), got {what}");
        out.push(Err(error(document, item, &value, R::NotAnObject, None, message)));
        return;
    }
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    match kind.as_str() {
        "" if value.get("variant").is_some() && value.get("version").is_some() => {
            let message = "this is a Butane config, not a MachineConfig: translate it with `butane` first \
                           (e.g. `butane --files-dir . config.bu -o machineconfig.yaml`)"
                .to_string();
            out.push(Err(error(document, item, &value, R::Butane, None, message)));
        }
        "" => {
            let message = "document has no kind".to_string();
            out.push(Err(error(
                document,
                item,
                &value,
                R::MissingKind,
                Some("kind".into()),
                message,
            )));
        }
        "MachineConfig" | "MachineConfigPool" => {
            if let Err(e) = check_api_version(&value, &kind) {
                out.push(Err(error(
                    document,
                    item,
                    &value,
                    R::ApiVersion,
                    Some("apiVersion".into()),
                    e,
                )));
                return;
            }
            let parsed = if kind == "MachineConfig" {
                serde_path_to_error::deserialize::<_, MachineConfig>(&value).map(Manifest::MachineConfig)
            } else {
                serde_path_to_error::deserialize::<_, MachineConfigPool>(&value).map(Manifest::MachineConfigPool)
            };
            out.push(
                parsed
                    .map(|manifest| Document {
                        manifest,
                        raw: value.clone(),
                    })
                    .map_err(|e| {
                        let path = e.path().to_string();
                        let field = (path != ".").then_some(path);
                        error(document, item, &value, R::Invalid, field, e.into_inner().to_string())
                    }),
            );
        }
        k if k == "List" || (k.ends_with("List") && value.get("items").is_some()) => match value.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, it) in items.iter().enumerate() {
                    read_object(document, Some(i), it.clone(), out);
                }
            }
            Some(_) => {
                let message = "items must be a list".to_string();
                out.push(Err(error(
                    document,
                    item,
                    &value,
                    R::Invalid,
                    Some("items".into()),
                    message,
                )));
            }
        },
        "MachineConfiguration" => {
            let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            if api_version != crate::disruption::API_VERSION {
                let got = if api_version.is_empty() {
                    "missing".to_string()
                } else {
                    format!("{api_version:?}")
                };
                let message = format!(
                    "apiVersion {got} is not served for MachineConfiguration (served: {})",
                    crate::disruption::API_VERSION
                );
                out.push(Err(error(
                    document,
                    item,
                    &value,
                    R::ApiVersion,
                    Some("apiVersion".into()),
                    message,
                )));
                return;
            }
            if let Err(invalid) = crate::disruption::check_action_types(&value) {
                let cause = invalid.causes.into_iter().next().expect("an Invalid has a cause");
                out.push(Err(error(
                    document,
                    item,
                    &value,
                    R::Invalid,
                    Some(cause.field),
                    cause.message,
                )));
                return;
            }
            out.push(
                serde_path_to_error::deserialize(&value)
                    .map(|m| Document {
                        manifest: Manifest::MachineConfiguration(m),
                        raw: value.clone(),
                    })
                    .map_err(|e| {
                        let path = e.path().to_string();
                        let field = (path != ".").then_some(path);
                        error(document, item, &value, R::Invalid, field, e.into_inner().to_string())
                    }),
            );
        }
        k if generic_kind(k).is_some() => {
            let kind = generic_kind(k).expect("checked");
            let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let wanted: Vec<String> = ACCEPTED_GROUPS.iter().map(|g| kind.api_version(g)).collect();
            if !wanted.iter().any(|w| w == api_version) {
                let got = if api_version.is_empty() {
                    "missing".to_string()
                } else {
                    format!("{api_version:?}")
                };
                let message = format!("apiVersion {got} is not served for {k} (use {})", wanted[0]);
                out.push(Err(error(
                    document,
                    item,
                    &value,
                    R::ApiVersion,
                    Some("apiVersion".into()),
                    message,
                )));
                return;
            }
            out.push(
                crate::generate::decode(kind, value.clone())
                    .map(|object| Document {
                        manifest: Manifest::Other { kind, object },
                        raw: value.clone(),
                    })
                    .map_err(|(path, message)| {
                        let field = (!path.is_empty()).then_some(path);
                        error(document, item, &value, R::Invalid, field, message)
                    }),
            );
        }
        k if NOT_SUPPORTED_YET.contains(&k) => {
            let message = format!("{k} is not supported yet");
            out.push(Err(error(document, item, &value, R::NotSupportedYet, None, message)));
        }
        k => {
            let message = format!("kind {k} is not managed by mco (it manages MachineConfig, MachineConfigPool, KubeletConfig, ContainerRuntimeConfig, ImageDigestMirrorSet, ImageTagMirrorSet, ImageContentSourcePolicy, Image and MachineConfiguration)");
            out.push(Err(error(document, item, &value, R::UnmanagedKind, None, message)));
        }
    }
}

/// The generic stored kind named `k` exactly (`KubeletConfig`, ...), if any.
fn generic_kind(k: &str) -> Option<crate::model::Kind> {
    crate::model::Kind::ALL
        .into_iter()
        .find(|x| x.is_generic() && x.as_str() == k)
}

fn check_api_version(value: &Value, kind: &str) -> Result<(), String> {
    let api_version = value.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let ok = api_version
        .split_once('/')
        .is_some_and(|(group, version)| version == "v1" && ACCEPTED_GROUPS.contains(&group));
    if ok {
        return Ok(());
    }
    let served: Vec<String> = ACCEPTED_GROUPS.iter().map(|g| format!("{g}/v1")).collect();
    let got = if api_version.is_empty() {
        "missing".to_string()
    } else {
        format!("{api_version:?}")
    };
    Err(format!(
        "apiVersion {got} is not served for {kind}: use {}",
        served.join(" or ")
    ))
}

/// Extensions MCO can install (`SupportedExtensions`, `pkg/controller/common/helpers.go`).
pub const SUPPORTED_EXTENSIONS: &[&str] = &[
    "two-node-ha",
    "ipsec",
    "usbguard",
    "kerberos",
    "kernel-devel",
    "sandboxed-containers",
    "sysstat",
];

/// Accepted `spec.kernelType` values (`""` means `default`).
pub const KERNEL_TYPES: &[&str] = &["", "default", "realtime", "64k-pages"];

/// Validates a MachineConfig as MCO's `ValidateMachineConfig` does
/// (`pkg/controller/common/helpers.go`), collecting every cause:
///
/// - `metadata`: Kubernetes' rules for every kind ([`crate::model::validate_object_meta`]:
///   name, labels, annotations, finalizers, owner references).
/// - `spec.kernelType`: one of [`KERNEL_TYPES`] (`kernelType=X is invalid`).
/// - `spec.extensions[i]`: in [`SUPPORTED_EXTENSIONS`] (`invalid extensions found: [X]`, MCO's
///   `validateExtensions`). MCO checks this only when `spec.config` is present (an
///   extensions-only MC slips through and fails on the node); mco always checks.
/// - `kernel-devel` with a kernelType other than default: refused, as MCO refuses it at render
///   (`installing kernel-devel extension is not supported with kernelType: X`).
/// - `spec.config`: [`ignition::parse_config`] at `spec.config`.
///
/// Returns the parsed Ignition config, `None` when the MC has no `spec.config` (an empty `{}`
/// gives `Some(Config::default())`).
pub fn validate_machine_config(mc: &MachineConfig) -> Result<Option<Config>, Invalid> {
    validate_machine_config_with(mc, crate::limits::ContentLimits::default())
}

/// [`validate_machine_config`] with the limit of one file's contents, decoded and decompressed
/// ([`crate::limits::Limits::max_file_bytes`]).
pub fn validate_machine_config_with(
    mc: &MachineConfig,
    limits: crate::limits::ContentLimits,
) -> Result<Option<Config>, Invalid> {
    let mut causes = crate::model::validate_object_meta(&mc.metadata);
    let kernel_type = mc.spec.kernel_type.as_str();
    if !KERNEL_TYPES.contains(&kernel_type) {
        causes.push(FieldError::new(
            "spec.kernelType",
            format!("kernelType={kernel_type} is invalid"),
        ));
    }
    for (i, ext) in mc.spec.extensions.iter().enumerate() {
        let field = format!("spec.extensions[{i}]");
        if !SUPPORTED_EXTENSIONS.contains(&ext.as_str()) {
            let supported = SUPPORTED_EXTENSIONS.join(", ");
            causes.push(FieldError::new(
                field,
                format!("invalid extensions found: [{ext}] (supported extensions: {supported})"),
            ));
        } else if ext == "kernel-devel" && !matches!(kernel_type, "" | "default") {
            let message = format!("installing kernel-devel extension is not supported with kernelType: {kernel_type}");
            causes.push(FieldError::new(field, message));
        }
    }
    let config = match &mc.spec.config {
        None => None,
        Some(raw) => match ignition::parse_config_with(raw, "spec.config", limits) {
            Ok(config) => Some(config),
            Err(errors) => {
                causes.extend(errors);
                None
            }
        },
    };
    if causes.is_empty() {
        Ok(config)
    } else {
        Err(Invalid {
            kind: "MachineConfig".into(),
            name: mc.name().to_string(),
            causes,
        })
    }
}

/// Validates a MachineConfigPool, collecting every cause:
///
/// - `metadata`: Kubernetes' rules for every kind ([`crate::model::validate_object_meta`]), and
///   a name of at most 211 characters, so that its rendered configs' names
///   (`rendered-<pool>-<32 hex digits>`) are valid MachineConfig names
///   ([`crate::model::validate_pool_name`]).
/// - `spec.maxUnavailable`: an integer >= 0 or a percentage string `N%` (MCO reads it with
///   `intstr.GetScaledValueFromIntOrPercent` in `pkg/controller/node/node_controller.go`, which
///   refuses `"50 percent"`, `"60"` and `"40 %"`).
/// - `spec.machineConfigSelector` and `spec.nodeSelector`: Kubernetes' label-selector rules
///   ([`crate::model::validate_label_selector`]: keys and values, operators In/NotIn with
///   `values`, Exists/DoesNotExist without), then MCO's custom-pool admission rule
///   ([`inherits_worker`]).
///
/// `status` is ignored: it is the controllers' to write.
pub fn validate_pool(pool: &MachineConfigPool) -> Result<(), Invalid> {
    let mut causes = crate::model::validate_object_meta(&pool.metadata);
    causes.extend(crate::model::validate_pool_name(pool.name()));
    if let Some(mu) = &pool.spec.max_unavailable {
        if let Err(message) = check_max_unavailable(mu) {
            causes.push(FieldError::new("spec.maxUnavailable", message));
        }
    }
    causes.extend(crate::model::validate_label_selector(
        pool.spec.machine_config_selector.as_ref(),
        "spec.machineConfigSelector",
    ));
    causes.extend(crate::model::validate_label_selector(
        pool.spec.node_selector.as_ref(),
        "spec.nodeSelector",
    ));
    if !inherits_worker(pool.spec.machine_config_selector.as_ref()) {
        causes.push(FieldError::new("spec.machineConfigSelector", INHERIT_WORKER_MESSAGE));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "MachineConfigPool".into(),
            name: pool.name().to_string(),
            causes,
        })
    }
}

/// The message of MCO's custom-pool admission rule, word for word (the ValidatingAdmissionPolicy
/// `custom-machine-config-pool-selector`).
pub const INHERIT_WORKER_MESSAGE: &str = "All custom MachineConfigPools must inherit from the worker pool \
and must have a machineConfigSelector that matches for a 'machineconfiguration.openshift.io/role: worker' label";

/// MCO's ValidatingAdmissionPolicy `custom-machine-config-pool-selector`
/// (`manifests/machineconfigcontroller/custom-machine-config-pool-selector-validatingadmissionpolicy.yaml`,
/// mco-facts section 2): a pool's machineConfigSelector must be matchLabels role ==
/// master|worker|arbiter, or a `role In [...]` containing `worker`, or a `role NotIn [...]` not
/// containing it. An absent or empty selector is let through: it selects nothing, and the render
/// controller reports that (mco-facts 1.2).
pub fn inherits_worker(sel: Option<&crate::model::LabelSelector>) -> bool {
    use crate::model::ROLE_LABEL;
    if crate::model::selector_is_empty(sel) {
        return true;
    }
    let sel = sel.expect("non-empty selector");
    let by_label = sel
        .match_labels
        .as_ref()
        .and_then(|m| m.get(ROLE_LABEL))
        .is_some_and(|r| ["master", "worker", "arbiter"].contains(&r.as_str()));
    let by_expression = sel.match_expressions.iter().flatten().any(|e| {
        let values = e.values.as_deref().unwrap_or(&[]);
        let has_worker = values.iter().any(|v| v == "worker");
        e.key == ROLE_LABEL && ((e.operator == "In" && has_worker) || (e.operator == "NotIn" && !has_worker))
    });
    by_label || by_expression
}

fn check_max_unavailable(mu: &crate::model::IntOrString) -> Result<(), String> {
    use crate::model::IntOrString;
    match mu {
        IntOrString::Int(n) if *n >= 0 => Ok(()),
        IntOrString::Int(n) => Err(format!(
            "invalid value {n}: must be an integer >= 0 or a percentage such as \"50%\""
        )),
        IntOrString::String(s) => {
            let digits = s.strip_suffix('%').unwrap_or("");
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                Ok(())
            } else {
                Err(format!(
                    "invalid value {s:?}: must be an integer >= 0 or a percentage such as \"50%\""
                ))
            }
        }
    }
}

/// Validates a Node as the API server does on create and update: Kubernetes' metadata rules
/// ([`crate::model::validate_object_meta`]; a Node name is a DNS-1123 subdomain,
/// `ValidateNodeName`). The rest of a Node is the kubelet's and the daemon's to write.
pub fn validate_node(node: &Node) -> Result<(), Invalid> {
    let causes = crate::model::validate_object_meta(&node.metadata);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Invalid {
            kind: "Node".into(),
            name: node.metadata.name.clone().unwrap_or_default(),
            causes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Summary of one parse result: `Kind/name` or `ERR <reason> <field>: <message>`.
    fn summary(r: &Result<Manifest, ManifestError>) -> String {
        match r {
            Ok(m) => format!("{}/{}", m.kind(), m.name()),
            Err(e) => format!("ERR {:?} {}", e.reason, e),
        }
    }

    fn check(text: &str, expected: &[&str]) {
        let got: Vec<String> = parse_documents(text).iter().map(summary).collect();
        assert_eq!(got.len(), expected.len(), "{got:#?}");
        for (g, e) in got.iter().zip(expected) {
            assert!(g.contains(e), "{g:?} does not contain {e:?}");
        }
    }

    const MC: &str = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: a\n";

    #[test]
    fn documents_and_kinds() {
        check("", &[]);
        check("# only a comment\n---\n# another\n...\n", &[]);
        check(MC, &["MachineConfig/a"]);
        check(
            &format!("---\n{MC}---\n\n---\n{}", MC.replace("name: a", "name: b")),
            &["MachineConfig/a", "MachineConfig/b"],
        );
        check(&MC.replace("openshift.io", "alauda.io"), &["MachineConfig/a"]);
        check(
            r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool", "metadata": {"name": "worker"}}, {"kind": "ServiceAccount", "metadata": {"name": "sa"}}]}"#,
            &[
                "MachineConfigPool/worker",
                "document 1, items[1] (ServiceAccount \"sa\"): kind ServiceAccount is not managed by mco",
            ],
        );
        check(
            "kind: KubeletConfig\napiVersion: machineconfiguration.openshift.io/v1\nmetadata: {name: k}\n",
            &["KubeletConfig/k"],
        );
        check(
            "kind: MachineConfiguration\napiVersion: operator.openshift.io/v1\nmetadata: {name: cluster}\n",
            &["MachineConfiguration/cluster"],
        );
        check(
            "kind: ControllerConfig\nmetadata: {name: machine-config-controller}\n",
            &["NotSupportedYet document 1 (ControllerConfig \"machine-config-controller\"): ControllerConfig is not supported yet"],
        );
        check(
            "variant: openshift\nversion: 4.15.0\n",
            &["ERR Butane document 1: this is a Butane config, not a MachineConfig: translate it with `butane` first"],
        );
        check(
            "metadata: {name: x}\n",
            &["ERR MissingKind document 1 (\"x\"): kind: document has no kind"],
        );
        check("- a\n- b\n", &["NotAnObject"]);
        check(&MC.replace("/v1", "/v2"), &["ERR ApiVersion document 1 (MachineConfig \"a\"): apiVersion: apiVersion \"machineconfiguration.openshift.io/v2\" is not served"]);
        check(
            &format!("{MC}---\nkind: [unclosed\n---\n{}", MC.replace("name: a", "name: c")),
            &[
                "MachineConfig/a",
                "ERR Syntax document 2: not valid YAML: unclosed bracket '[' at line 6, column 7",
                "MachineConfig/c",
            ],
        );
        check(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: p}\nspec:\n  paused: yes\n",
            &["ERR Invalid document 1 (MachineConfigPool \"p\"): spec.paused: invalid type: string \"yes\""],
        );
        check(
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: p}\nspec:\n  maxUnavailable: [1]\n",
            &["ERR Invalid document 1 (MachineConfigPool \"p\"): spec.maxUnavailable:"],
        );
    }

    #[test]
    fn yaml_scalars_follow_kubectl() {
        let mc = |tail: &str| -> Manifest {
            parse_documents(&format!("{MC}spec:\n  config:\n    ignition: {{version: 3.2.0}}\n    storage:\n      files:\n      - path: /etc/a\n{tail}")).remove(0).unwrap()
        };
        let mode = |m: Manifest| match m {
            Manifest::MachineConfig(mc) => mc.spec.config.unwrap().pointer("/storage/files/0/mode").cloned(),
            _ => unreachable!(),
        };
        assert_eq!(mode(mc("        mode: 0644\n")), Some(serde_json::json!(420)));
        assert_eq!(mode(mc("        mode: 420\n")), Some(serde_json::json!(420)));
        assert_eq!(mode(mc("        mode: \"0644\"\n")), Some(serde_json::json!("0644")));
        assert_eq!(mode(mc("        mode: 0o644\n")), Some(serde_json::json!(420)));
        let on = |m: Manifest| match m {
            Manifest::MachineConfig(mc) => mc.spec.config.unwrap().pointer("/storage/files/0/overwrite").cloned(),
            _ => unreachable!(),
        };
        assert_eq!(on(mc("        overwrite: yes\n")), Some(serde_json::json!("yes")));
        assert_eq!(on(mc("        overwrite: on\n")), Some(serde_json::json!("on")));
        assert_eq!(on(mc("        overwrite: True\n")), Some(serde_json::json!(true)));
        // Not octal: a float, as go-yaml v2 reads it; refused later where an integer is expected.
        assert_eq!(mode(mc("        mode: 09\n")), Some(serde_json::json!(9.0)));
    }

    fn parse_one(yaml: &str) -> Manifest {
        parse_documents(yaml).remove(0).unwrap()
    }

    /// Validates the single object in `yaml`; `expected` lists `(field, message substring)`
    /// pairs, all present and nothing else; empty means valid.
    fn check_valid(yaml: &str, expected: &[(&str, &str)]) {
        let got = match parse_one(yaml) {
            Manifest::MachineConfig(mc) => validate_machine_config(&mc).err(),
            Manifest::MachineConfigPool(p) => validate_pool(&p).err(),
            Manifest::MachineConfiguration(m) => crate::disruption::validate_machine_configuration(&m).err(),
            Manifest::Other { kind, object } => crate::generate::admit(kind, &object).err(),
        };
        let causes = got.map(|i| i.causes).unwrap_or_default();
        for (field, msg) in expected {
            assert!(
                causes.iter().any(|c| c.field == *field && c.message.contains(msg)),
                "missing {field}: {msg} in {causes:#?}"
            );
        }
        assert_eq!(causes.len(), expected.len(), "{causes:#?}");
    }

    fn mc(name: &str, spec: &str) -> String {
        format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: {name}\nspec:\n{spec}")
    }

    fn pool(name: &str, spec: &str) -> String {
        format!("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: {name}\nspec:\n{spec}")
    }

    #[test]
    fn machine_config_rules() {
        check_valid(&mc("99-worker-ok", "  kernelArguments: [a=b]\n"), &[]);
        check_valid(&mc("kargs", "  config: {}\n  kernelArguments: [a]\n"), &[]);
        check_valid(
            &mc("\"\"", "  kernelType: realtime\n"),
            &[("metadata.name", "Required value: name or generateName is required")],
        );
        check_valid(
            &mc("Bad_Name", "  kernelType: default\n"),
            &[("metadata.name", "RFC 1123 subdomain")],
        );
        check_valid(
            &mc("a", "  kernelType: 64k-pages\n  extensions: [usbguard, sysstat]\n"),
            &[],
        );
        check_valid(
            &mc("a", "  kernelType: rt\n"),
            &[("spec.kernelType", "kernelType=rt is invalid")],
        );
        check_valid(
            &mc("a", "  extensions: [usbguard, wireshark]\n"),
            &[("spec.extensions[1]", "invalid extensions found: [wireshark]")],
        );
        check_valid(
            &mc("a", "  kernelType: realtime\n  extensions: [kernel-devel]\n"),
            &[(
                "spec.extensions[0]",
                "installing kernel-devel extension is not supported with kernelType: realtime",
            )],
        );
        check_valid(&mc("a", "  kernelType: default\n  extensions: [kernel-devel]\n"), &[]);
        // All causes together: name, kernelType and the Ignition config.
        check_valid(
            &mc("A", "  kernelType: x\n  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/foo, mode: 644}\n"),
            &[
                ("metadata.name", "RFC 1123"),
                ("spec.kernelType", "kernelType=x is invalid"),
                ("spec.config.storage.files[0].mode", "invalid mode 01204 for /etc/foo, cannot exceed 0777"),
            ],
        );
        check_valid(&mc("a", "  config:\n    ignition: {version: 2.2.0}\n"), &[]);
        check_valid(
            &mc("a", "  config:\n    ignition: {version: 2.2.0}\n    storage:\n      files:\n      - {filesystem: oem, path: /etc/foo}\n"),
            &[("spec.config.storage.files[0].filesystem", "filesystem \"oem\" is not supported")],
        );
        // A YAML octal mode is the permission the author meant.
        let octal = mc("a", "  config:\n    ignition: {version: 3.2.0}\n    storage:\n      files:\n      - {path: /etc/foo, mode: 0644}\n");
        let Manifest::MachineConfig(m) = parse_one(&octal) else {
            unreachable!()
        };
        let config = validate_machine_config(&m).unwrap().unwrap();
        assert_eq!(config.storage.files[0].mode, Some(0o644));
        let Manifest::MachineConfig(m) = parse_one(&mc("a", "  osImageURL: quay.io/x@sha256:0\n")) else {
            unreachable!()
        };
        assert_eq!(validate_machine_config(&m), Ok(None));
    }

    #[test]
    fn pool_rules() {
        check_valid(&pool("worker", "  maxUnavailable: 1\n"), &[]);
        check_valid(&pool("worker", "  maxUnavailable: 0\n"), &[]);
        check_valid(&pool("worker", "  maxUnavailable: 50%\n"), &[]);
        check_valid(
            &pool("worker", "  maxUnavailable: -1\n"),
            &[("spec.maxUnavailable", "invalid value -1")],
        );
        for bad in ["50 percent", "60", "40 %", "%", "x%"] {
            check_valid(
                &pool("worker", &format!("  maxUnavailable: \"{bad}\"\n")),
                &[("spec.maxUnavailable", "must be an integer >= 0 or a percentage")],
            );
        }
        check_valid(
            &pool("", "  paused: true\n"),
            &[("metadata.name", "Required value: name or generateName is required")],
        );
        let selector = |exprs: &str| {
            pool(
                "infra",
                &format!("  machineConfigSelector:\n    matchExpressions:\n{exprs}"),
            )
        };
        check_valid(
            &selector("    - {key: machineconfiguration.openshift.io/role, operator: In, values: [worker, infra]}\n    - {key: x, operator: Exists}\n"),
            &[],
        );
        // MCO's custom-pool admission rule: a custom pool must inherit worker.
        check_valid(
            &selector("    - {key: machineconfiguration.openshift.io/role, operator: In, values: [etcd]}\n"),
            &[("spec.machineConfigSelector", "must inherit from the worker pool")],
        );
        check_valid(
            &selector("    - {key: machineconfiguration.openshift.io/role, operator: NotIn, values: [master]}\n"),
            &[],
        );
        check_valid(
            &selector("    - {key: role, operator: In}\n    - {key: x, operator: DoesNotExist, values: [a]}\n    - {key: y, operator: Equals, values: [a]}\n    - {key: '', operator: Exists}\n"),
            &[
                ("spec.machineConfigSelector.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
                ("spec.machineConfigSelector.matchExpressions[1].values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
                ("spec.machineConfigSelector.matchExpressions[2].operator", "Invalid value: \"Equals\": not a valid selector operator"),
                ("spec.machineConfigSelector.matchExpressions[3].key", "Invalid value: \"\": name part must be non-empty"),
                ("spec.machineConfigSelector.matchExpressions[3].key", "name part must consist of alphanumeric characters"),
                ("spec.machineConfigSelector", "must inherit from the worker pool"),
            ],
        );
        check_valid(
            &pool(
                "p",
                "  nodeSelector:\n    matchExpressions:\n    - {key: a, operator: NotIn, values: []}\n",
            ),
            &[("spec.nodeSelector.matchExpressions[0].values", "must be specified")],
        );
    }

    /// Outcomes SOURCES.md of the corpus calls for: `(path suffix, substring of the summary)`.
    const CORPUS_EXPECTATIONS: &[(&str, &str)] = &[
        ("skipvalidationmachineconfig.yaml", "spec.config.ignition.version: parsing Ignition config failed: invalid version"),
        ("goodmachineconfig.yaml", "ok MachineConfig/99-test-file"),
        ("disable-chronyd.yaml", "ok MachineConfig/disable-chronyd"),
        ("akraino-machineconfig-master.yaml", "ok MachineConfig/99-akraino-sec-master"),
        ("sctp_module_mc.yaml", "ok MachineConfig/load-sctp-module"),
        ("akraino-kubehunter.yaml", "kind ClusterRole is not managed by mco"),
        ("akraino-kubehunter.yaml", "kind ServiceAccount is not managed by mco"),
        ("00-fedramp-chrony-master.yaml", "ok MachineConfig/00-master-chrony"),
        ("51-worker-rh-registry-trust.yaml", "ok MachineConfig/51-worker-rh-registry-trust"),
        ("mc-40-kata-remote-config.yaml", "ok MachineConfig/40-worker-kata-remote-config"),
        ("ocpbugs-60768-mc.yaml", "MachineConfig \"99-installer-ignition-master\" is invalid: spec.config.storage.disks: mco does not manage storage.disks"),
        ("ocpbugs-60768-mc.yaml", "ok MachineConfig/99-master-ssh"),
        ("4.16.0-compact-mc.yaml", "ok MachineConfig/rendered-master-"),
        ("mc-container-mount-namespace.yaml", "ok MachineConfig/container-mount-namespace"),
        ("cve-2026-31431-disable-algif-aead/01-machineconfig.yaml", "ok MachineConfig/99-master-disable-algif-aead"),
        ("99-zfs-autobuild.bu", "translate it with `butane` first"),
        ("kubeletconfig.crd.yaml", "ok KubeletConfig/set-max-pods"),
        ("node-disruption-policy.yaml", "ok MachineConfiguration/cluster"),
        // Offline render output: its ownerReference has no apiVersion and no uid, which the API
        // server refuses (apimachinery ValidateOwnerReferences).
        ("performance-addon-operators/testdata/render-expected-output/manual_machineconfig.yaml", "MachineConfig \"50-performance-manual\" is invalid: metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty, metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"),
        ("4.15.0-ec2-b02-cos-not-annotated-mcp.yaml", "ok MachineConfigPool/zbeast"),
        ("mco-sanitize/testdata/expected/default-config/machineconfig.yaml", "spec.config.ignition.version"),
    ];

    /// Every file of the shared real-world corpus: no panic, and every MachineConfig or
    /// MachineConfigPool either validates or is refused with field paths. Prints one line per
    /// file to compare with the corpus' SOURCES.md.
    #[test]
    fn corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
        let root = root.as_path();
        if !root.is_dir() {
            eprintln!(
                "SKIPPED corpus: {} not found (it lives beside the repository in the mco workspace)",
                root.display()
            );
            return;
        }
        let mut files = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n != "SOURCES.md") {
                    files.push(path);
                }
            }
        }
        files.sort();
        assert!(!files.is_empty());
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut outcomes = Vec::new();
            for r in parse_documents(&text) {
                outcomes.push(match r {
                    Err(e) => format!("REFUSED {e}"),
                    Ok(m) => {
                        let verdict = match &m {
                            Manifest::MachineConfig(mc) => validate_machine_config(mc).map(drop),
                            Manifest::MachineConfigPool(p) => validate_pool(p),
                            Manifest::MachineConfiguration(m) => crate::disruption::validate_machine_configuration(m),
                            Manifest::Other { kind, object } => crate::generate::admit(*kind, object),
                        };
                        match verdict {
                            Ok(()) => format!("ok {}/{}", m.kind(), m.name()),
                            Err(invalid) => {
                                assert!(!invalid.causes.is_empty());
                                for c in &invalid.causes {
                                    assert!(!c.field.is_empty(), "{invalid}");
                                }
                                format!("INVALID {invalid}")
                            }
                        }
                    }
                });
            }
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let line = outcomes.join(" | ");
            for (file, want) in CORPUS_EXPECTATIONS {
                if rel.ends_with(file) {
                    assert!(line.contains(want), "{rel}: {line}\ndoes not contain {want:?}");
                }
            }
            let short: Vec<String> = outcomes.iter().map(|o| o.chars().take(300).collect()).collect();
            eprintln!("corpus {rel}: {}", short.join(" | "));
        }
    }
}
