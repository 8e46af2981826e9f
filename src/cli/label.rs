//! `mco label` and `mco annotate`: kubectl's verbs for nodes, pools and MachineConfigs
//! (moving a node to another pool is a label change).
//!
//! Owns the `key=value` / `key-` argument grammar and kubectl's `--overwrite` rule; writes are
//! JSON merge patches of `metadata.labels` / `metadata.annotations` through [`Client`].

use super::{describe_error, resource_name};
use crate::client::{Client, Selectors};
use crate::model::Kind;
use anyhow::{anyhow, bail};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Which metadata map the verb edits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Labels,
    Annotations,
}

impl Field {
    fn key(self) -> &'static str {
        match self {
            Field::Labels => "labels",
            Field::Annotations => "annotations",
        }
    }
}

/// One change: set `key` to a value, or remove it (`key-`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Set(String, String),
    Remove(String),
}

/// The arguments of `mco label|annotate`.
#[derive(Debug, Default)]
pub struct LabelArgs {
    /// `KIND NAME... key=value... key-...` or `KIND/NAME... key=value...`.
    pub args: Vec<String>,
    pub overwrite: bool,
    pub selectors: Selectors,
    /// `--all`: every object of the kind.
    pub all: bool,
}

/// One object to change, or (name `None`) every object of the kind that `-l`/`--all` selects.
pub type Target = (Kind, Option<String>);

/// Splits the positional arguments into targets and changes as kubectl's
/// `cmdutil.GetResourcesAndPairs` and `parseLabels` do (k8s.io/kubectl pkg/cmd/label,
/// pkg/cmd/annotate): the first argument containing `=` (not first) or ending in `-` (not `-`
/// alone) starts the changes, so `node-role.kubernetes.io/infra-` is a removal; every later
/// argument must be a change; a key both set and removed is refused.
pub fn split(field: Field, args: &[String]) -> anyhow::Result<(Vec<Target>, Vec<Change>)> {
    let what = match field {
        Field::Labels => "label",
        Field::Annotations => "annotation",
    };
    let is_change = |s: &str| (s.contains('=') && !s.starts_with('=')) || (s.ends_with('-') && s != "-");
    let mut resources = Vec::new();
    let mut pairs = Vec::new();
    for a in args {
        match (pairs.is_empty(), is_change(a)) {
            (_, true) => pairs.push(a.clone()),
            (true, false) => resources.push(a.clone()),
            (false, false) => bail!("all resources must be specified before {what} changes: {a}"),
        }
    }
    let mut changes = Vec::new();
    for c in &pairs {
        if c.contains('=') {
            let parts: Vec<&str> = c.split('=').collect();
            if field == Field::Labels && parts.len() != 2 {
                bail!("invalid label spec: {c}");
            }
            let (k, v) = c.split_once('=').unwrap_or((c, ""));
            changes.push(Change::Set(k.to_string(), v.to_string()));
        } else if let Some(k) = c.strip_suffix('-') {
            changes.push(Change::Remove(k.to_string()));
        }
    }
    for c in &changes {
        if let Change::Remove(k) = c {
            if changes.iter().any(|o| matches!(o, Change::Set(sk, _) if sk == k)) {
                bail!(
                    "can not both modify and remove {} in the same command",
                    match field {
                        Field::Labels => "a label",
                        Field::Annotations => "an annotation",
                    }
                );
            }
        }
    }
    if changes.is_empty() {
        bail!("at least one {what} update is required");
    }
    if resources.is_empty() {
        bail!("one or more resources must be specified as <resource> <name> or <resource>/<name>");
    }
    Ok((super::resource_args(&resources)?, changes))
}

/// The merge patch of `changes` against the object's current map, kubectl's rules
/// (pkg/cmd/label `validateNoOverwrites`, pkg/cmd/annotate `validateNoAnnotationOverwrites`):
/// setting a key to a *different* value needs `overwrite`; setting it to the value it has is no
/// change; removing a missing key is a no-op (`label "k" not found.` for labels, printed by
/// [`run`]). `None` when nothing changes.
pub fn patch(
    field: Field,
    current: &BTreeMap<String, String>,
    changes: &[Change],
    overwrite: bool,
) -> anyhow::Result<Option<Value>> {
    if !overwrite {
        let clashes: Vec<String> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Set(k, v) => current
                    .get(k)
                    .filter(|old| *old != v)
                    .map(|old| format!("'{k}' already has a value ({old})")),
                Change::Remove(_) => None,
            })
            .collect();
        match (field, clashes.as_slice()) {
            (_, []) => {}
            (Field::Labels, [one]) => bail!("{one}, and --overwrite is false"),
            (Field::Labels, many) => bail!(
                "[{}]",
                many.iter()
                    .map(|m| format!("{m}, and --overwrite is false"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (Field::Annotations, many) => {
                bail!(
                    "--overwrite is false but found the following declared annotation(s): {}",
                    many.join("; ")
                )
            }
        }
    }
    let mut m = Map::new();
    for c in changes {
        match c {
            Change::Set(k, v) => {
                if current.get(k) != Some(v) {
                    m.insert(k.clone(), Value::String(v.clone()));
                }
            }
            Change::Remove(k) => {
                if current.contains_key(k) {
                    m.insert(k.clone(), Value::Null);
                }
            }
        }
    }
    if m.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::json!({"metadata": {field.key(): m}})))
}

/// What kubectl prints after the object's name (pkg/cmd/label `updateDataChangeMsg`; annotate
/// always prints `annotated`): `not labeled` when nothing changed, `unlabeled` when the object
/// got shorter without `--overwrite`, else `labeled`.
pub fn outcome(
    field: Field,
    current: &BTreeMap<String, String>,
    patch: Option<&Value>,
    overwrite: bool,
) -> &'static str {
    if field == Field::Annotations {
        return "annotated";
    }
    let Some(p) = patch else {
        return "not labeled";
    };
    let mut new = current.clone();
    for (k, v) in p["metadata"][field.key()].as_object().into_iter().flatten() {
        match v.as_str() {
            Some(v) => {
                new.insert(k.clone(), v.to_string());
            }
            None => {
                new.remove(k);
            }
        }
    }
    let len = |m: &BTreeMap<String, String>| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0);
    if !overwrite && len(&new) < len(current) {
        "unlabeled"
    } else {
        "labeled"
    }
}

/// `mco label` / `mco annotate`. Returns the lines for stdout, the errors for stderr (as
/// kubectl prints them) and whether every object changed as asked.
pub async fn run(client: &Client, field: Field, args: &LabelArgs) -> anyhow::Result<(String, String, bool)> {
    let (targets, changes) = split(field, &args.args)?;
    let mut objects: Vec<(Kind, String)> = Vec::new();
    for (kind, name) in targets {
        match name {
            Some(n) => objects.push((kind, n)),
            None if args.all || args.selectors.label.is_some() || args.selectors.field.is_some() => {
                let list = client
                    .list_selected(kind, &args.selectors, None)
                    .await
                    .map_err(|e| anyhow!(describe_error(&e)))?;
                for o in list["items"].as_array().into_iter().flatten() {
                    objects.push((kind, o["metadata"]["name"].as_str().unwrap_or("").to_string()));
                }
            }
            None => bail!("resource(s) were provided, but no name was specified (give names, -l SELECTOR or --all)"),
        }
    }
    let mut out = String::new();
    let mut errs = String::new();
    let mut ok = true;
    for (kind, name) in objects {
        let what = format!("{}/{name}", resource_name(kind, client.group()));
        let current: Value = match client.get(kind, &name).await {
            Ok(c) => c,
            Err(e) => {
                ok = false;
                errs.push_str(&format!("{}\n", describe_error(&e)));
                continue;
            }
        };
        let map: BTreeMap<String, String> =
            serde_json::from_value(current["metadata"][field.key()].clone()).unwrap_or_default();
        if field == Field::Labels {
            for c in &changes {
                if let Change::Remove(k) = c {
                    if !map.contains_key(k) {
                        out.push_str(&format!("label {k:?} not found.\n"));
                    }
                }
            }
        }
        match patch(field, &map, &changes, args.overwrite) {
            Err(e) => {
                ok = false;
                errs.push_str(&format!("error: {e}\n"));
            }
            Ok(None) => out.push_str(&format!("{what} {}\n", outcome(field, &map, None, args.overwrite))),
            Ok(Some(p)) => match client.merge_patch(kind, &name, &p, false).await {
                Ok(_) => out.push_str(&format!("{what} {}\n", outcome(field, &map, Some(&p), args.overwrite))),
                Err(e) => {
                    ok = false;
                    errs.push_str(&format!("{}\n", describe_error(&e)));
                }
            },
        }
    }
    Ok((out, errs, ok))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_split_as_kubectl() {
        // k8s.io/kubectl pkg/cmd/util GetResourcesAndPairs and pkg/cmd/label parseLabels.
        let sp = |v: &[&str]| split(Field::Labels, &s(v));
        let (t, c) = sp(&["node", "worker-0", "worker-1", "a=b", "c-"]).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(c, vec![Change::Set("a".into(), "b".into()), Change::Remove("c".into())]);
        let (t, _) = sp(&["mcp/worker", "x="]).unwrap();
        assert_eq!(t, vec![(Kind::MachineConfigPool, Some("worker".into()))]);
        // A prefixed key ending in '-' is a removal, alone or among others.
        let (t, c) = sp(&["node", "worker-1", "node-role.kubernetes.io/infra-"]).unwrap();
        assert_eq!(t, vec![(Kind::Node, Some("worker-1".into()))]);
        assert_eq!(c, vec![Change::Remove("node-role.kubernetes.io/infra".into())]);
        let (t, c) = sp(&["node/worker-1", "a=b", "node-role.kubernetes.io/infra-"]).unwrap();
        assert_eq!(t, vec![(Kind::Node, Some("worker-1".into()))]);
        assert_eq!(c.len(), 2);
        let e = |v: &[&str]| sp(v).unwrap_err().to_string();
        assert_eq!(e(&["node", "worker-0"]), "at least one label update is required");
        assert_eq!(
            e(&["node", "w", "a=b", "worker-1"]),
            "all resources must be specified before label changes: worker-1"
        );
        assert_eq!(
            e(&["node", "w", "a=x", "a-"]),
            "can not both modify and remove a label in the same command"
        );
        assert_eq!(
            split(Field::Annotations, &s(&["node", "w", "a=x", "a-"]))
                .unwrap_err()
                .to_string(),
            "can not both modify and remove an annotation in the same command"
        );
        assert_eq!(e(&["node", "w", "a=b=c"]), "invalid label spec: a=b=c");
        assert_eq!(e(&["mcp", "mcp/worker", "a=b"]), crate::cli::MIXED_RESOURCE_ARGS);
        assert!(sp(&["a=b"]).is_err());
    }

    #[test]
    fn overwrite_rules() {
        let cur: BTreeMap<String, String> = [("role".to_string(), "worker".to_string())].into();
        let set = |v: &str| vec![Change::Set("role".into(), v.into())];
        let e = patch(Field::Labels, &cur, &set("infra"), false)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "'role' already has a value (worker), and --overwrite is false");
        assert_eq!(
            patch(Field::Labels, &cur, &set("infra"), true).unwrap(),
            Some(json!({"metadata": {"labels": {"role": "infra"}}}))
        );
        // The same value is no clash and no change: "not labeled" (annotate: "annotated").
        assert_eq!(patch(Field::Labels, &cur, &set("worker"), false).unwrap(), None);
        assert_eq!(outcome(Field::Labels, &cur, None, false), "not labeled");
        assert_eq!(outcome(Field::Annotations, &cur, None, false), "annotated");
        let rm = patch(Field::Labels, &cur, &[Change::Remove("role".into())], false).unwrap();
        assert_eq!(rm, Some(json!({"metadata": {"labels": {"role": null}}})));
        assert_eq!(outcome(Field::Labels, &cur, rm.as_ref(), false), "unlabeled");
        assert_eq!(outcome(Field::Labels, &cur, rm.as_ref(), true), "labeled");
        assert_eq!(
            patch(Field::Labels, &cur, &[Change::Remove("x".into())], false).unwrap(),
            None
        );
    }
}
