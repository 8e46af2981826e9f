//! `policy.mco.dev/v1` DriftPolicy: mco's own response to config drift for the
//! MachineConfigPools its `spec.poolSelector` matches (issue 30, item 3).
//!
//! Owns the serde shapes only, cluster-scoped, kept as JSON in the projection like the other
//! generic kinds. MCO's kinds are not changed by it (no field is added to a rendered
//! MachineConfig nor to a pool): the daemon reads the policies itself, as it reads the
//! MachineConfiguration `cluster` for the node disruption policy. The rules (globs, the first
//! match, overlapping policies) and the admission are in [`crate::drift`].

use super::machine_config::null_default;
use super::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

/// A DriftPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftPolicy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    pub spec: DriftPolicySpec,
}

/// `spec` of a DriftPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftPolicySpec {
    /// The pools governed, matched against the pools' labels (an empty or absent selector
    /// matches nothing, as a pool's nodeSelector in MCO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_selector: Option<LabelSelector>,
    /// The rules, first match wins: a drifted path takes the action of the first rule with a
    /// glob matching it; no match: `Degrade` (MCO's behaviour).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<DriftRule>,
}

/// One rule: path globs and the action for a drift of a path they match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftRule {
    /// Absolute node path globs ([`crate::drift::glob_match`]): `*` and `?` within one path
    /// segment, `**` any number of segments, `[abc]`/`[a-z]`/`[!a]` character classes.
    #[serde(default)]
    pub paths: Vec<String>,
    /// `Degrade`, `Revert` or `Report` ([`crate::drift::Action`]); kept as text so that a bad
    /// value is refused by admission with the field named, as kube-apiserver's enum check.
    #[serde(default)]
    pub action: String,
}

impl DriftPolicy {
    /// The printer columns after the name (`kubectl get driftpolicies`, `mco get dp`): RULES
    /// (how many), ACTIONS (each action the rules use, in rule order, without repeats), POOLS
    /// (the pool selector's `matchLabels` as `k=v`, `<none>` for an empty selector).
    pub fn columns(&self) -> [String; 3] {
        let none = || "<none>".to_string();
        let mut actions: Vec<&str> = Vec::new();
        for r in &self.spec.rules {
            if !actions.contains(&r.action.as_str()) {
                actions.push(&r.action);
            }
        }
        let pools = self
            .spec
            .pool_selector
            .as_ref()
            .map(|s| {
                let mut parts: Vec<String> = s
                    .match_labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                for e in s.match_expressions.iter().flatten() {
                    parts.push(format!("{} {}", e.key, e.operator));
                }
                parts.join(",")
            })
            .filter(|s| !s.is_empty());
        [
            self.spec.rules.len().to_string(),
            if actions.is_empty() { none() } else { actions.join(",") },
            pools.unwrap_or_else(none),
        ]
    }
}
