//! `--validate` of `mco apply`: kubectl's flag (k8s.io/kubectl pkg/cmd/util `GetValidationDirective`:
//! `strict` or `true`, `warn`, `ignore` or `false`; `strict` by default) and the unknown-field
//! check it makes before anything is written.
//!
//! Owns the mode and the client-side check of a manifest: the fields the server's strict
//! decoding refuses ([`crate::api::fields::unknown_fields`] of the typed round trip, what
//! `fieldValidation=Strict` answers 400 for) and the unknown keys of a MachineConfig's Ignition
//! config (`spec.config.storage.file`), which the server only warns about (MCO's CRD preserves
//! unknown fields there, and Ignition itself warns about unused keys): in strict mode `mco
//! apply` refuses both, naming the object and the field, and writes nothing.

use crate::model::Kind;
use serde_json::Value;

/// How unknown fields of the applied objects are treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Validate {
    /// An unknown field is an error; nothing is written (kubectl's default).
    #[default]
    Strict,
    /// An unknown field is a warning; the object is written without it.
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

impl Validate {
    /// kubectl's spellings (`GetValidationDirective`), its message for any other value.
    pub fn parse(s: &str) -> Result<Validate, String> {
        match s.to_ascii_lowercase().as_str() {
            "strict" | "true" => Ok(Validate::Strict),
            "warn" => Ok(Validate::Warn),
            "ignore" | "false" => Ok(Validate::Ignore),
            _ => Err(format!(
                "invalid - validate option {s:?}; must be one of: strict (or true), warn, ignore (or false)"
            )),
        }
    }

    /// The `fieldValidation` query value kubectl sends for this mode.
    pub fn field_validation(self) -> &'static str {
        match self {
            Validate::Strict => "Strict",
            Validate::Warn => "Warn",
            Validate::Ignore => "Ignore",
        }
    }
}

/// The unknown fields of one manifest object of `kind` (`raw`, as read), with their paths:
/// those the server's strict decoding refuses, then the unknown Ignition keys of a
/// MachineConfig. Empty when the object does not decode at all (the apply reports that error).
pub fn unknown_fields(kind: Kind, raw: &Value, group: &str) -> Vec<String> {
    let mut out = match crate::command::decode(kind, raw.clone(), group) {
        Ok(normalized) => crate::api::fields::unknown_fields(raw, &normalized),
        Err(_) => Vec::new(),
    };
    if kind == Kind::MachineConfig {
        out.extend(crate::api::fields::unknown_ignition_keys(&raw["spec"]["config"]));
    }
    out
}

/// The strict-mode error of an object with unknown `fields`: kubectl's strict decoding text
/// (`strict decoding error: unknown field "spec.x"`) after the object's name.
pub fn strict_error(resource: &str, name: &str, fields: &[String]) -> String {
    let list: Vec<String> = fields.iter().map(|f| format!("unknown field {f:?}")).collect();
    format!("{resource} {name:?}: strict decoding error: {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_spellings_and_message() {
        assert_eq!(Validate::parse("true"), Ok(Validate::Strict));
        assert_eq!(Validate::parse("Strict"), Ok(Validate::Strict));
        assert_eq!(Validate::parse("false"), Ok(Validate::Ignore));
        assert_eq!(Validate::parse("warn"), Ok(Validate::Warn));
        assert_eq!(
            Validate::parse("x").unwrap_err(),
            "invalid - validate option \"x\"; must be one of: strict (or true), warn, ignore (or false)"
        );
    }

    #[test]
    fn an_ignition_typo_and_a_spec_typo_are_both_found() {
        let mc = serde_json::json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "x"},
            "spec": {"kernelTypo": "a", "config": {"ignition": {"version": "3.4.0"}, "storage": {"file": [{"path": "/etc/a"}]}}}
        });
        let found = unknown_fields(Kind::MachineConfig, &mc, "machineconfiguration.openshift.io");
        assert_eq!(found, ["spec.kernelTypo", "spec.config.storage.file"]);
    }
}
