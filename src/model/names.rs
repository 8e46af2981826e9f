//! Kubernetes' rules for object metadata and label selectors, with Kubernetes' messages.
//!
//! Owns the one place where names, labels, annotations, finalizers, owner references and label
//! selectors of every kind are checked, as the API server checks them
//! (`k8s.io/apimachinery/pkg/api/validation/objectmeta.go` `ValidateObjectMetaAccessor`,
//! `pkg/apis/meta/v1/validation/validation.go` `ValidateLabels` / `ValidateLabelSelector`,
//! `pkg/util/validation/validation.go` and `pkg/api/validate/content` for the formats). Field
//! errors read as Kubernetes prints them: the field path, then `Invalid value: "<value>": ...`,
//! `Required value: ...`, `Forbidden: ...` or `Too long: ...` (`pkg/util/validation/field`).
//! Pure: it only reads values.

use super::{LabelSelector, ObjectMeta};
use crate::validation::FieldError;

/// Longest object name: a DNS-1123 subdomain (`DNS1123SubdomainMaxLength`).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// Longest label value and label-key name part (`LabelValueMaxLength`, `labelKeyMaxLength`).
pub const LABEL_VALUE_MAX: usize = 63;

/// Total size of an object's annotations, keys plus values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Longest MachineConfigPool name: its rendered configs are named
/// `rendered-<pool>-<32 hex digits>` ([`crate::render::rendered_name`]), which must itself be
/// a MachineConfig name of at most [`DNS1123_SUBDOMAIN_MAX`] characters.
pub const POOL_NAME_MAX: usize = DNS1123_SUBDOMAIN_MAX - "rendered-".len() - "-".len() - 32;

const DNS1123_SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Kubernetes' `RegexError`: the message, examples, and the regular expression.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{re}')"));
    out
}

/// Kubernetes' `MaxLenError`.
fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// A string quoted as Go's `%q` quotes it (how Kubernetes prints a bad value).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `field: Invalid value: "<value>": <detail>` (Kubernetes `field.Invalid` with a string).
pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> FieldError {
    FieldError::new(field, format!("Invalid value: {}: {detail}", go_quote(value)))
}

fn is_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Kubernetes `IsDNS1123Subdomain`: the reasons `value` is not a DNS-1123 subdomain (empty when
/// it is one): at most 253 characters of dot-separated lowercase RFC 1123 labels.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !value.split('.').all(is_dns1123_label) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Kubernetes `IsDNS1123Label`: the reasons `value` is not a DNS-1123 label (empty when it is
/// one): at most 63 lowercase alphanumeric characters or `-`, alphanumeric at both ends. A
/// namespace's name (`ValidateNamespaceName`).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !is_dns1123_label(value) {
        errs.push(regex_error(
            DNS1123_LABEL_MSG,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Kubernetes `IsQualifiedName` / `content.IsLabelKey`: the reasons `value` is not a label key
/// (an optional DNS-1123 subdomain prefix and `/`, then a name part of at most 63 characters).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_VALUE_MAX)));
    }
    if !is_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// Kubernetes `IsValidLabelValue`: empty, or at most 63 characters shaped like a label key name.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !is_label_key_name(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `ValidateLabels` at `at` (`metadata.labels`, `spec.nodeSelector.matchLabels`).
fn validate_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
    at: &str,
    errors: &mut Vec<FieldError>,
) {
    for (k, v) in labels {
        for msg in qualified_name_errors(k) {
            errors.push(invalid(at, k, &msg));
        }
        for msg in label_value_errors(v) {
            errors.push(invalid(at, v, &msg));
        }
    }
}

/// Kubernetes `ValidateObjectMetaAccessor` for a cluster-scoped object, as the API server runs it
/// on create and update (`metadata.`-prefixed field paths, all errors collected):
///
/// - `name`: required (`Required value: name or generateName is required`) and a DNS-1123
///   subdomain (MachineConfig and MachineConfigPool as custom resources, Node by
///   `ValidateNodeName`);
/// - `labels`: keys are qualified names, values label values;
/// - `annotations`: keys are qualified names (compared in lower case), and keys plus values are
///   at most 262144 bytes in all (`Too long: must have at most 262144 bytes`);
/// - `finalizers`: qualified names;
/// - `ownerReferences`: `apiVersion` has a version, `kind`, `name` and `uid` are set, at most
///   one has `controller: true`.
pub fn validate_object_meta(meta: &ObjectMeta) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match meta.name.as_deref().unwrap_or("") {
        "" => errors.push(FieldError::new(
            "metadata.name",
            "Required value: name or generateName is required",
        )),
        name => {
            for msg in dns1123_subdomain_errors(name) {
                errors.push(invalid("metadata.name", name, &msg));
            }
        }
    }
    validate_labels(meta.labels.iter().flatten(), "metadata.labels", &mut errors);
    let mut size = 0;
    for (k, v) in meta.annotations.iter().flatten() {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            errors.push(invalid("metadata.annotations", k, &msg));
        }
        size += k.len() + v.len();
    }
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(FieldError::new(
            "metadata.annotations",
            format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        ));
    }
    for f in meta.finalizers.iter().flatten() {
        for msg in qualified_name_errors(f) {
            errors.push(invalid("metadata.finalizers", f, &msg));
        }
    }
    let mut controller: Option<String> = None;
    for r in meta.owner_references.iter().flatten() {
        let at = "metadata.ownerReferences";
        let version = match r.api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => *v,
            [_, v] => *v,
            _ => "",
        };
        if version.is_empty() {
            errors.push(invalid(
                format!("{at}.apiVersion"),
                &r.api_version,
                "version must not be empty",
            ));
        }
        for (field, value) in [("kind", &r.kind), ("name", &r.name), ("uid", &r.uid)] {
            if value.is_empty() {
                errors.push(invalid(format!("{at}.{field}"), value, "must not be empty"));
            }
        }
        if r.controller == Some(true) {
            let this = format!("{}/{}", r.kind, r.name);
            match &controller {
                Some(first) => errors.push(FieldError::new(
                    at,
                    format!("Invalid value: {} owner references: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}", meta.owner_references.as_ref().map_or(0, Vec::len)),
                )),
                None => controller = Some(this),
            }
        }
    }
    errors
}

/// Kubernetes `ValidateLabelSelector` at `at` (e.g. `spec.nodeSelector`): `matchLabels` as
/// labels; each `matchExpressions[i]` with operator `In`/`NotIn` needs `values` (`Required
/// value: must be specified when `operator` is 'In' or 'NotIn'`), `Exists`/`DoesNotExist` must
/// have none (`Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'`),
/// any other operator is `not a valid selector operator`; every value is a label value and the
/// key a qualified name.
pub fn validate_label_selector(sel: Option<&LabelSelector>, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(sel) = sel else { return errors };
    validate_labels(
        sel.match_labels.iter().flatten(),
        &format!("{at}.matchLabels"),
        &mut errors,
    );
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let f = format!("{at}.matchExpressions[{i}]");
        let values = req.values.as_deref().unwrap_or(&[]);
        match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError::new(
                format!("{f}.values"),
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::new(
                format!("{f}.values"),
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(invalid(format!("{f}.operator"), other, "not a valid selector operator")),
        }
        for (j, v) in values.iter().enumerate() {
            for msg in label_value_errors(v) {
                errors.push(invalid(format!("{f}.values[{j}]"), v, &msg));
            }
        }
        for msg in qualified_name_errors(&req.key) {
            errors.push(invalid(format!("{f}.key"), &req.key, &msg));
        }
    }
    errors
}

/// The MachineConfigPool name rule on top of [`validate_object_meta`]: at most
/// [`POOL_NAME_MAX`] (211) characters, so that `rendered-<pool>-<32 hex digits>` is a valid
/// MachineConfig name. Returns the error, if any.
pub fn validate_pool_name(name: &str) -> Option<FieldError> {
    (name.len() > POOL_NAME_MAX && name.len() <= DNS1123_SUBDOMAIN_MAX).then(|| {
        invalid(
            "metadata.name",
            name,
            &format!(
                "{}: the pool's rendered configs are named rendered-<pool>-<32 hex digits>, which must be a MachineConfig name of at most {DNS1123_SUBDOMAIN_MAX} characters",
                max_len_error(POOL_NAME_MAX)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LabelSelectorRequirement, OwnerReference};
    use std::collections::BTreeMap;

    const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        }
    }

    /// `expected`: every error as `field: message`, in order.
    fn check(errors: Vec<FieldError>, expected: &[String]) {
        let got: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn names() {
        for ok in [
            "a",
            "worker",
            "99-worker-ssh",
            "rendered-worker-0123",
            "a.b-c.d",
            &"a".repeat(253),
        ] {
            check(validate_object_meta(&meta(ok)), &[]);
        }
        check(
            validate_object_meta(&meta("Bad_Node NAME")),
            &[format!("metadata.name: Invalid value: \"Bad_Node NAME\": {SUBDOMAIN}")],
        );
        for bad in ["-a", "a-", "a..b", ".a", "A", "a_b", "a/b", "é"] {
            check(
                validate_object_meta(&meta(bad)),
                &[format!("metadata.name: Invalid value: {}: {SUBDOMAIN}", go_quote(bad))],
            );
        }
        let long = "a".repeat(254);
        check(
            validate_object_meta(&meta(&long)),
            &[format!(
                "metadata.name: Invalid value: \"{long}\": must be no more than 253 characters"
            )],
        );
        check(
            validate_object_meta(&ObjectMeta::default()),
            &["metadata.name: Required value: name or generateName is required".to_string()],
        );
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), r#""a\"b\\c\nd\x01""#);
    }

    #[test]
    fn labels_and_annotations() {
        let mut m = meta("a");
        m.labels = Some(BTreeMap::from([
            (
                "machineconfiguration.openshift.io/role".to_string(),
                "worker".to_string(),
            ),
            ("node-role.kubernetes.io/worker".to_string(), String::new()),
            ("bad key!".to_string(), "x".to_string()),
            ("a/b/c".to_string(), "x".to_string()),
            ("Upper.Case/x".to_string(), "x".to_string()),
            ("/x".to_string(), "x".to_string()),
            ("k".to_string(), "bad value!".to_string()),
            ("k2".to_string(), "v".repeat(64)),
            ("n".repeat(64), "x".to_string()),
        ]));
        check(
            validate_object_meta(&m),
            &[
                "metadata.labels: Invalid value: \"/x\": prefix part must be non-empty".to_string(),
                format!("metadata.labels: Invalid value: \"Upper.Case/x\": prefix part {SUBDOMAIN}"),
                "metadata.labels: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_string(),
                format!("metadata.labels: Invalid value: \"bad key!\": {NAME_PART}"),
                format!("metadata.labels: Invalid value: \"bad value!\": {LABEL_VALUE}"),
                format!("metadata.labels: Invalid value: \"{}\": must be no more than 63 characters", "v".repeat(64)),
                format!("metadata.labels: Invalid value: \"{}\": name part must be no more than 63 characters", "n".repeat(64)),
            ],
        );
        let mut m = meta("a");
        m.annotations = Some(BTreeMap::from([
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{}".to_string(),
            ),
            (
                "Machineconfiguration.OpenShift.io/desiredConfig".to_string(),
                "x".to_string(),
            ),
            ("bad key".to_string(), "x".to_string()),
        ]));
        check(
            validate_object_meta(&m),
            &[format!("metadata.annotations: Invalid value: \"bad key\": {NAME_PART}")],
        );
        let mut m = meta("a");
        m.annotations = Some(BTreeMap::from([(
            "a".to_string(),
            "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1),
        )]));
        check(validate_object_meta(&m), &[]);
        m.annotations = Some(BTreeMap::from([(
            "ab".to_string(),
            "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1),
        )]));
        check(
            validate_object_meta(&m),
            &["metadata.annotations: Too long: must have at most 262144 bytes".to_string()],
        );
    }

    #[test]
    fn finalizers_and_owner_references() {
        let mut m = meta("a");
        m.finalizers = Some(vec!["example.com/cleanup".into(), "bad finalizer".into()]);
        let owner = |api_version: &str, kind: &str, name: &str, uid: &str, controller: bool| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: None,
        };
        m.owner_references = Some(vec![
            owner(
                "machineconfiguration.openshift.io/v1",
                "MachineConfigPool",
                "worker",
                "u1",
                true,
            ),
            owner("machineconfiguration.openshift.io/", "", "", "", false),
            owner("v1", "Node", "n", "u2", true),
        ]);
        check(
            validate_object_meta(&m),
            &[
                format!("metadata.finalizers: Invalid value: \"bad finalizer\": {NAME_PART}"),
                "metadata.ownerReferences.apiVersion: Invalid value: \"machineconfiguration.openshift.io/\": version must not be empty".to_string(),
                "metadata.ownerReferences.kind: Invalid value: \"\": must not be empty".to_string(),
                "metadata.ownerReferences.name: Invalid value: \"\": must not be empty".to_string(),
                "metadata.ownerReferences.uid: Invalid value: \"\": must not be empty".to_string(),
                "metadata.ownerReferences: Invalid value: 3 owner references: Only one reference can have Controller set to true. Found \"true\" in references for MachineConfigPool/worker and Node/n".to_string(),
            ],
        );
    }

    #[test]
    fn selectors() {
        let expr = |key: &str, op: &str, values: Option<Vec<&str>>| LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.map(|v| v.into_iter().map(String::from).collect()),
        };
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "node-role.kubernetes.io/infra".to_string(),
                String::new(),
            )])),
            match_expressions: Some(vec![
                expr(
                    "machineconfiguration.openshift.io/role",
                    "In",
                    Some(vec!["worker", "infra"]),
                ),
                expr("a", "Exists", None),
                expr("b", "In", None),
                expr("c", "NotIn", Some(vec![])),
                expr("d", "DoesNotExist", Some(vec!["x"])),
                expr("e", "Equals", Some(vec!["x"])),
                expr("", "Exists", None),
                expr("f", "In", Some(vec!["ok", "not ok"])),
            ]),
        };
        let at = "spec.nodeSelector";
        check(
            validate_label_selector(Some(&sel), at),
            &[
                format!("{at}.matchExpressions[2].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
                format!("{at}.matchExpressions[3].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
                format!("{at}.matchExpressions[4].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
                format!("{at}.matchExpressions[5].operator: Invalid value: \"Equals\": not a valid selector operator"),
                format!("{at}.matchExpressions[6].key: Invalid value: \"\": name part must be non-empty"),
                format!("{at}.matchExpressions[6].key: Invalid value: \"\": {NAME_PART}"),
                format!("{at}.matchExpressions[7].values[1]: Invalid value: \"not ok\": {LABEL_VALUE}"),
            ],
        );
        check(validate_label_selector(None, at), &[]);
    }

    #[test]
    fn pool_names_leave_room_for_the_rendered_name() {
        assert_eq!(POOL_NAME_MAX, 211);
        let ok = "p".repeat(211);
        assert!(validate_pool_name(&ok).is_none());
        assert_eq!(format!("rendered-{ok}-{}", "0".repeat(32)).len(), 253);
        let long = "p".repeat(212);
        let e = validate_pool_name(&long).unwrap();
        assert_eq!(e.field, "metadata.name");
        assert!(
            e.message.starts_with(&format!(
                "Invalid value: \"{long}\": must be no more than 211 characters: the pool's rendered configs are named"
            )),
            "{}",
            e.message
        );
        // Longer than any name: the subdomain rule already says so.
        assert!(validate_pool_name(&"p".repeat(254)).is_none());
    }
}
