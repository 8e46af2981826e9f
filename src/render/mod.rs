//! Rendering: the MachineConfigs a pool selects, merged into one rendered config.
//!
//! Owns the merge order and per-field merge rules of MCO's `MergeMachineConfigs`
//! (`pkg/controller/common/helpers.go`), the rendered name (`rendered-<pool>-<hash>`, DESIGN.md
//! section 5), the selection of a pool's inputs (`pkg/controller/render/render_controller.go`)
//! and the day-2 reconcilability check (`pkg/controller/common/reconcile.go`).
//!
//! Pure: no IO, no clock, no store. It must not validate inputs (they were validated on
//! admission by [`crate::ignition`]), create objects, or touch pool status: the render
//! controller does that with what these functions return.

mod attribution;
mod merge;
mod reconcile;

pub use attribution::{Attribution, Sourced, ATTRIBUTION_ANNOTATION};
pub use reconcile::check_reconcilable;

use crate::ignition;
use crate::model::{
    annotation, label, LabelSelector, MachineConfig, MachineConfigPool, MachineConfigSpec, ACCEPTED_GROUPS, ROLE_LABEL,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Why a pool could not be rendered. `Display` is the inner message; the pool condition wraps it
/// with [`render_degraded_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// MCO 1.2.4: the pool's machineConfigSelector matches no (non-rendered) MachineConfig.
    #[error("no MachineConfigs found matching selector {selector}")]
    NoMachineConfigs {
        /// The selector as Kubernetes prints it (`machineconfiguration.openshift.io/role=worker`).
        selector: String,
    },
    /// MCO `MergeMachineConfigs`: an input MachineConfig has no labels at all.
    #[error("cannot find label in MachineConfig {name}")]
    NoLabels {
        /// The MachineConfig's name.
        name: String,
    },
    /// MCO `MergeMachineConfigs`: `kernel-devel` requested with a non-default kernelType.
    #[error("installing kernel-devel extension is not supported with kernelType: {kernel_type}")]
    KernelDevel {
        /// The merged kernelType (`realtime` or `64k-pages`).
        kernel_type: String,
    },
    /// A stored `spec.config` that does not parse as Ignition 3.x (admission should prevent it).
    #[error("parsing Ignition config of MachineConfig {name} failed: {message}")]
    Parse {
        /// The MachineConfig's name.
        name: String,
        /// The parser's message.
        message: String,
    },
}

/// The RenderDegraded condition message for a render error (MCO 1.6,
/// `pkg/controller/render/render_controller.go`): `Failed to render configuration for pool
/// <pool>: <error>`.
pub fn render_degraded_message(pool: &str, err: &RenderError) -> String {
    format!("Failed to render configuration for pool {pool}: {err}")
}

/// `kernelType` values that replace the default kernel (MCO `KernelTypeRealtime`, `KernelType64kPages`).
const NON_DEFAULT_KERNELS: [&str; 2] = ["realtime", "64k-pages"];
/// The kernelType of a rendered config when no input asks for another kernel.
pub const KERNEL_TYPE_DEFAULT: &str = "default";

/// The `generated-by-controller-version` annotation of an MC under any accepted group, `""` when
/// absent.
fn generated_by(mc: &MachineConfig) -> &str {
    generated_by_meta(&mc.metadata)
}

fn generated_by_meta(meta: &crate::model::ObjectMeta) -> &str {
    ACCEPTED_GROUPS
        .iter()
        .map(|g| annotation(meta, &format!("{g}/generated-by-controller-version")))
        .find(|v| !v.is_empty())
        .unwrap_or("")
}

/// Whether `mc` is a rendered config: rendered configs are outputs, never inputs of a render,
/// and their creation is logged as `RenderedConfigGenerated`. [`is_rendered_metadata`].
pub fn is_rendered_config(mc: &MachineConfig) -> bool {
    is_rendered_metadata(&mc.metadata)
}

/// The one rendered-config rule, on an MC's metadata: owned by a pool (MCO's render controller
/// sets the pool as the controller owner, `pkg/controller/render/render_controller.go`), or
/// named `rendered-*` with the `generated-by-controller-version` annotation the controller
/// stamps (mco-facts 1.5), which a rendered config keeps when it is restored from a backup
/// without its ownerReferences.
pub fn is_rendered_metadata(meta: &crate::model::ObjectMeta) -> bool {
    let owned_by_pool = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "MachineConfigPool");
    let name = meta.name.as_deref().unwrap_or("");
    owned_by_pool || (name.starts_with("rendered-") && !generated_by_meta(meta).is_empty())
}

/// MCO merge order (mco-facts 1.3): MCs labelled `machineconfiguration.openshift.io/role=worker`
/// sorted by name, then every other MC sorted by name. Errors if an MC has no labels at all.
fn merge_order<'a>(mcs: &[&'a MachineConfig]) -> Result<Vec<&'a MachineConfig>, RenderError> {
    if let Some(mc) = mcs
        .iter()
        .find(|mc| mc.metadata.labels.as_ref().is_none_or(|l| l.is_empty()))
    {
        return Err(RenderError::NoLabels {
            name: mc.name().to_string(),
        });
    }
    let mut sorted = mcs.to_vec();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    let (mut ordered, others): (Vec<_>, Vec<_>) = sorted
        .into_iter()
        .partition(|mc| label(&mc.metadata, ROLE_LABEL) == Some("worker"));
    ordered.extend(others);
    Ok(ordered)
}

/// Parses a stored `spec.config`; `None`, `null` and `{}` are "no config"; spec 2 is
/// translated to spec 3 first ([`ignition::spec2`]).
fn parse_stored(name: &str, raw: Option<&Value>) -> Result<Option<ignition::Config>, RenderError> {
    match raw {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) if m.is_empty() => Ok(None),
        Some(v) if ignition::spec2::is_spec2(v) => {
            let t = ignition::spec2::translate(v, "spec.config").map_err(|e| RenderError::Parse {
                name: name.to_string(),
                message: e.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "),
            })?;
            serde::Deserialize::deserialize(&t.config)
                .map(Some)
                .map_err(|e: serde_json::Error| RenderError::Parse {
                    name: name.to_string(),
                    message: e.to_string(),
                })
        }
        Some(v) => serde::Deserialize::deserialize(v)
            .map(Some)
            .map_err(|e: serde_json::Error| RenderError::Parse {
                name: name.to_string(),
                message: e.to_string(),
            }),
    }
}

/// Merges MachineConfigs into one spec, reproducing MCO `MergeMachineConfigs`
/// (`pkg/controller/common/helpers.go`, mco-facts 1.3 and 1.4).
///
/// - Order: worker-role MCs by name, then all others by name; later wins.
/// - `config`: Ignition merge (files by path field by field, units and dropins by name, users by
///   name with `sshAuthorizedKeys` as an ordered union; a later plain file drops an earlier
///   `gzip` flag), then every file with unset `overwrite` gets `true`. Output version is
///   [`ignition::RENDERED_VERSION`] (3.4.0, DESIGN.md section 5), always present.
/// - `kernelArguments`, `extensions`: concatenated in merge order, duplicates kept.
/// - `fips`: OR. `kernelType`: last `realtime`/`64k-pages` wins, else `default`.
/// - `osImageURL`, `baseOSExtensionsContainerImage`: last non-empty value among MCs without a
///   generated-by-controller-version annotation (mco has no ControllerConfig: the base is `""`).
///
/// Errors: an MC without labels ([`RenderError::NoLabels`]), `kernel-devel` with a non-default
/// kernel ([`RenderError::KernelDevel`]), an unparsable stored config ([`RenderError::Parse`]).
/// An empty input gives an empty config.
pub fn merge_machine_configs(mcs: &[&MachineConfig]) -> Result<MachineConfigSpec, RenderError> {
    let ordered = merge_order(mcs)?;
    merge_ordered(&ordered).map(|(spec, _)| spec)
}

fn merge_ordered(ordered: &[&MachineConfig]) -> Result<(MachineConfigSpec, Attribution), RenderError> {
    let mut merger = merge::Merger::new();
    let mut attribution = Attribution::default();
    let mut out = MachineConfigSpec {
        kernel_type: KERNEL_TYPE_DEFAULT.to_string(),
        ..Default::default()
    };
    for mc in ordered {
        let spec = &mc.spec;
        let cfg = parse_stored(mc.name(), spec.config.as_ref())?;
        if let Some(cfg) = &cfg {
            merger.merge(cfg);
        }
        attribution.record(mc.name(), spec, cfg.as_ref(), generated_by(mc).is_empty());
        out.kernel_arguments.extend(spec.kernel_arguments.iter().cloned());
        out.extensions.extend(spec.extensions.iter().cloned());
        out.fips |= spec.fips;
        if NON_DEFAULT_KERNELS.contains(&spec.kernel_type.as_str()) {
            out.kernel_type.clone_from(&spec.kernel_type);
        }
        if generated_by(mc).is_empty() {
            if !spec.os_image_url.is_empty() {
                out.os_image_url.clone_from(&spec.os_image_url);
            }
            if !spec.base_os_extensions_container_image.is_empty() {
                out.base_os_extensions_container_image
                    .clone_from(&spec.base_os_extensions_container_image);
            }
        }
    }
    if out.kernel_type != KERNEL_TYPE_DEFAULT && out.extensions.iter().any(|e| e == "kernel-devel") {
        return Err(RenderError::KernelDevel {
            kernel_type: out.kernel_type,
        });
    }
    let config = merger.finish();
    out.config = Some(serde_json::to_value(&config).expect("Ignition config serialises to JSON"));
    Ok((out, attribution))
}

/// The rendered config name: `rendered-<pool>-<first 32 hex digits of SHA-256>` over the
/// canonical JSON of `spec` (object keys sorted recursively, no whitespace).
///
/// A pure function of the merged spec, so the same sources always give the same name (rollback
/// relies on it, mco-facts section 10). Deliberately not MCO's salted MD5 over go-yaml output
/// (`pkg/controller/render/hash.go`, DESIGN.md section 5).
pub fn rendered_name(pool: &str, spec: &MachineConfigSpec) -> String {
    let value = serde_json::to_value(spec).expect("MachineConfigSpec serialises to JSON");
    let canonical = serde_json::to_string(&canonical(value)).expect("JSON value serialises");
    let digest = Sha256::digest(canonical.as_bytes());
    format!("rendered-{pool}-{}", &hex::encode(digest)[..32])
}

/// Rebuilds every object with its keys in sorted order (serde_json keeps insertion order here).
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// The result of rendering a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    /// `rendered-<pool>-<hash>`, see [`rendered_name`].
    pub name: String,
    /// The merged spec, see [`merge_machine_configs`].
    pub spec: MachineConfigSpec,
    /// Source MachineConfig names in merge order (worker-role first), for `spec.configuration.source`.
    pub sources: Vec<String>,
    /// Which source wrote each item ([`ATTRIBUTION_ANNOTATION`] on the rendered config).
    pub attribution: Attribution,
}

/// Renders a pool: selects the MachineConfigs its `spec.machineConfigSelector` matches
/// (an empty selector matches nothing; rendered configs are never inputs, see
/// [`is_rendered_config`]), merges them and names the result.
///
/// Errors: [`RenderError::NoMachineConfigs`] when nothing is selected (MCO
/// `pkg/controller/render/render_controller.go`, mco-facts 1.2.4), else the merge's errors.
pub fn render_pool(pool: &MachineConfigPool, all_mcs: &[&MachineConfig]) -> Result<Rendered, RenderError> {
    let selector = pool.spec.machine_config_selector.as_ref();
    let selected: Vec<&MachineConfig> = all_mcs
        .iter()
        .copied()
        .filter(|mc| !is_rendered_config(mc) && crate::model::selector_matches(selector, &mc.metadata))
        .collect();
    if selected.is_empty() {
        return Err(RenderError::NoMachineConfigs {
            selector: selector_string(selector),
        });
    }
    let ordered = merge_order(&selected)?;
    let (spec, attribution) = merge_ordered(&ordered)?;
    Ok(Rendered {
        name: rendered_name(pool.name(), &spec),
        spec,
        sources: ordered.iter().map(|mc| mc.name().to_string()).collect(),
        attribution,
    })
}

/// A label selector as Kubernetes prints it (`labels.Selector.String()`): requirements sorted by
/// key, `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined by `,`. Empty -> `<none>`.
pub fn selector_string(sel: Option<&LabelSelector>) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(sel) = sel {
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push((k.clone(), format!("{k}={v}")));
        }
        for r in sel.match_expressions.iter().flatten() {
            let mut values = r.values.clone().unwrap_or_default();
            values.sort();
            let k = &r.key;
            let text = match r.operator.as_str() {
                "In" => format!("{k} in ({})", values.join(",")),
                "NotIn" => format!("{k} notin ({})", values.join(",")),
                "Exists" => k.clone(),
                "DoesNotExist" => format!("!{k}"),
                op => format!("{k} {op} ({})", values.join(",")),
            };
            reqs.push((k.clone(), text));
        }
    }
    if reqs.is_empty() {
        return "<none>".to_string();
    }
    reqs.sort();
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests;
