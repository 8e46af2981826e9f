//! Kubernetes list selectors as query strings: `labelSelector` and `fieldSelector`.

use serde_json::Value;

/// One requirement of a label selector string (`a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`).
#[derive(Clone, Debug, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector` query; all requirements must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelQuery(Vec<Req>);

impl LabelQuery {
    /// Parses the Kubernetes selector syntax; errors name the offending requirement.
    pub fn parse(s: &str) -> Result<LabelQuery, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
            if words.len() == 2 {
                let rest = words[1].trim_start();
                let (op, set) = if let Some(r) = rest.strip_prefix("notin") {
                    ("notin", r)
                } else if let Some(r) = rest.strip_prefix("in") {
                    ("in", r)
                } else {
                    ("", rest)
                };
                if !op.is_empty() {
                    let set = set.trim();
                    let inner = set
                        .strip_prefix('(')
                        .and_then(|x| x.strip_suffix(')'))
                        .ok_or_else(|| format!("invalid label selector {part:?}: expected a (value, ...) set"))?;
                    let vals = inner
                        .split(',')
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                        .collect();
                    let key = words[0].to_string();
                    reqs.push(if op == "in" {
                        Req::In(key, vals)
                    } else {
                        Req::NotIn(key, vals)
                    });
                    continue;
                }
            }
            if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Req::Ne(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some(k) = part.strip_prefix('!') {
                reqs.push(Req::NotExists(k.trim().into()));
            } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                reqs.push(Req::Exists(part.into()));
            } else {
                return Err(format!("invalid label selector {part:?}"));
            }
        }
        for r in &reqs {
            validate(r)?;
        }
        Ok(LabelQuery(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy the query.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
        })
    }
}

/// apimachinery's checks of one requirement (k8s.io/apimachinery pkg/labels/selector.go
/// `NewRequirement`): the key a qualified name, each value a label value (so `a=b=c`, whose
/// value holds `=`, is refused), and `in`/`notin` sets not empty.
fn validate(r: &Req) -> Result<(), String> {
    let (key, values): (&str, Vec<&str>) = match r {
        Req::Eq(k, v) | Req::Ne(k, v) => (k, vec![v.as_str()]),
        Req::Exists(k) | Req::NotExists(k) => (k, vec![]),
        Req::In(k, vs) | Req::NotIn(k, vs) => {
            if vs.is_empty() {
                return Err(
                    "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty".into(),
                );
            }
            (k, vs.iter().map(String::as_str).collect())
        }
    };
    let errs = crate::model::qualified_name_errors(key);
    if !errs.is_empty() {
        return Err(format!(
            "unable to parse requirement: Invalid value: {key:?}: {}",
            errs.join("; ")
        ));
    }
    for v in values {
        let errs = crate::model::label_value_errors(v);
        if !errs.is_empty() {
            return Err(format!(
                "unable to parse requirement: Invalid value: {v:?}: {}",
                errs.join("; ")
            ));
        }
    }
    Ok(())
}

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The fields a `fieldSelector` may name for `kind`, as kube-apiserver's selectable fields:
/// `metadata.name` for every cluster-scoped kind (custom resources: apiextensions-apiserver's
/// `objectMetaFieldsSet`), with `metadata.namespace` for a namespaced one (Lease,
/// `DefaultClusterScopedAttr`'s namespaced twin), and for Nodes also `spec.unschedulable`
/// (`pkg/registry/core/node/strategy.go` `NodeToSelectableFields`, the way to list cordoned
/// nodes).
pub fn selectable_fields(kind: crate::model::Kind) -> &'static [&'static str] {
    match kind {
        crate::model::Kind::Node => &["metadata.name", "spec.unschedulable"],
        k if k.is_namespaced() => &["metadata.name", "metadata.namespace"],
        _ => &["metadata.name"],
    }
}

/// One requirement of a field selector: `field=value` (or `==`), `field!=value`.
#[derive(Clone, Debug, PartialEq)]
struct FieldReq {
    field: String,
    value: String,
    negated: bool,
}

/// A parsed `fieldSelector` over the fields [`selectable_fields`] allows (`=`, `==`, `!=`,
/// comma-separated, all must hold).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldQuery {
    reqs: Vec<FieldReq>,
}

impl FieldQuery {
    /// Parses a selector naming only `metadata.name` (what every kind allows).
    ///
    /// Errors: `invalid field selector "x"`, `field label not supported: spec.x` (kube-apiserver's
    /// words, a 400).
    pub fn parse(s: &str) -> Result<FieldQuery, String> {
        Self::parse_with(s, &["metadata.name"])
    }

    /// Parses a selector for a list of `kind`: the fields of [`selectable_fields`].
    pub fn parse_for(kind: crate::model::Kind, s: &str) -> Result<FieldQuery, String> {
        Self::parse_with(s, selectable_fields(kind))
    }

    fn parse_with(s: &str, allowed: &[&str]) -> Result<FieldQuery, String> {
        let mut q = FieldQuery::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, value, negated) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, false)
            } else {
                return Err(format!("invalid field selector {part:?}"));
            };
            let field = field.trim();
            if !allowed.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            q.reqs.push(FieldReq {
                field: field.into(),
                value: value.trim().into(),
                negated,
            });
        }
        Ok(q)
    }

    /// The single name this query pins, if any.
    pub fn name(&self) -> Option<&str> {
        self.reqs
            .iter()
            .find(|r| r.field == "metadata.name" && !r.negated)
            .map(|r| r.value.as_str())
    }

    /// The query of a list in namespace `ns` (`namespaces/<ns>/<plural>`): this one and
    /// `metadata.namespace=<ns>`, as kube-apiserver's storage filters a namespaced list; this
    /// one for `None` (a cluster-scoped kind, or every namespace).
    pub fn in_namespace(mut self, ns: Option<&str>) -> FieldQuery {
        if let Some(ns) = ns {
            self.reqs.push(FieldReq {
                field: "metadata.namespace".into(),
                value: ns.into(),
                negated: false,
            });
        }
        self
    }

    /// The store key of the single object this query pins for a list of `kind`, if any: the
    /// name, or for a namespaced kind `<namespace>/<name>` when both are pinned.
    pub fn key(&self, kind: crate::model::Kind) -> Option<String> {
        let name = self.name()?;
        if !kind.is_namespaced() {
            return Some(name.to_string());
        }
        let ns = self
            .reqs
            .iter()
            .find(|r| r.field == "metadata.namespace" && !r.negated)?;
        Some(crate::model::namespaced_key(&ns.value, name))
    }

    /// Whether `obj` (its JSON as served) meets every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs
            .iter()
            .all(|r| (field_value(obj, &r.field) == r.value) != r.negated)
    }
}

/// A selectable field's value as kube-apiserver's field set holds it: a name as is, a boolean
/// as Go's `strconv.FormatBool` (`spec.unschedulable` absent is `false`).
fn field_value(obj: &Value, field: &str) -> String {
    match field {
        "metadata.name" => obj["metadata"]["name"].as_str().unwrap_or("").to_string(),
        "metadata.namespace" => obj["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
        "spec.unschedulable" => obj["spec"]["unschedulable"].as_bool().unwrap_or(false).to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let o = json!({"metadata": {"name": "a", "labels": {"role": "worker", "zone": "b"}}});
        for (sel, want) in [
            ("role=worker", true),
            ("role==worker,zone=b", true),
            ("role!=worker", false),
            ("role", true),
            ("!role", false),
            ("zone in (a,b)", true),
            ("zone notin (a, b)", false),
            ("missing notin (x)", true),
        ] {
            assert_eq!(LabelQuery::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
        assert!(LabelQuery::parse("zone in a,b").is_err());
        // apimachinery NewRequirement refuses these (kubectl gets 400 BadRequest).
        for bad in ["bad key=x", "a=b=c", "k in ()", "k notin ()", "-a=b", "a=-b"] {
            assert!(LabelQuery::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            LabelQuery::parse("k in ()").unwrap_err(),
            "unable to parse requirement: for 'in', 'notin' operators, values set can't be empty"
        );
    }

    #[test]
    fn field_selector_name_only() {
        let o = json!({"metadata": {"name": "worker-0"}});
        assert!(FieldQuery::parse("metadata.name=worker-0").unwrap().matches(&o));
        assert!(!FieldQuery::parse("metadata.name!=worker-0").unwrap().matches(&o));
        assert!(FieldQuery::parse("spec.x=1").is_err());
    }
}
