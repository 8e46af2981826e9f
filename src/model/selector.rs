//! Kubernetes label-selector semantics (matchLabels AND matchExpressions).

use super::{LabelSelector, ObjectMeta};
use std::collections::BTreeMap;

/// True when the selector is absent or selects nothing explicit (`{}`).
///
/// MCO treats such a pool selector as matching *nothing* (`pkg/helpers/helpers.go`,
/// `pkg/controller/render/render_controller.go`), unlike plain Kubernetes where `{}` matches all.
pub fn selector_is_empty(sel: Option<&LabelSelector>) -> bool {
    match sel {
        None => true,
        Some(s) => {
            s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        }
    }
}

/// Whether `labels` satisfy `sel`. An empty selector (see [`selector_is_empty`]) matches nothing.
/// Operators: `In`, `NotIn`, `Exists`, `DoesNotExist`; unknown operators never match.
pub fn selector_matches(sel: Option<&LabelSelector>, meta: &ObjectMeta) -> bool {
    if selector_is_empty(sel) {
        return false;
    }
    let sel = sel.expect("non-empty selector");
    let empty = BTreeMap::new();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    if let Some(ml) = &sel.match_labels {
        if ml.iter().any(|(k, v)| labels.get(k) != Some(v)) {
            return false;
        }
    }
    for req in sel.match_expressions.iter().flatten() {
        let value = labels.get(&req.key);
        let values = req.values.as_deref().unwrap_or(&[]);
        let ok = match req.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LabelSelectorRequirement;

    fn meta(labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn empty_selector_matches_nothing() {
        assert!(!selector_matches(None, &meta(&[("a", "b")])));
        assert!(!selector_matches(
            Some(&LabelSelector::default()),
            &meta(&[])
        ));
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "role".into(),
                operator: "In".into(),
                values: Some(vec!["worker".into(), "infra".into()]),
            }]),
        };
        assert!(selector_matches(Some(&sel), &meta(&[("role", "infra")])));
        assert!(!selector_matches(Some(&sel), &meta(&[("role", "master")])));
        assert!(!selector_matches(Some(&sel), &meta(&[])));
        let sel = LabelSelector {
            match_labels: Some([("a".to_string(), "".to_string())].into()),
            match_expressions: None,
        };
        assert!(selector_matches(Some(&sel), &meta(&[("a", "")])));
        assert!(!selector_matches(Some(&sel), &meta(&[("a", "x")])));
    }
}
