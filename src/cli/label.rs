//! `mco label` and `mco annotate`: kubectl's verbs for nodes, pools and MachineConfigs
//! (moving a node to another pool is a label change).
//!
//! Owns the `key=value` / `key-` argument grammar and kubectl's `--overwrite` rule; writes are
//! JSON merge patches of `metadata.labels` / `metadata.annotations` through [`Client`].

use super::{describe_error, parse_kind, resource_name};
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
    fn done(self) -> &'static str {
        match self {
            Field::Labels => "labeled",
            Field::Annotations => "annotated",
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

/// Splits the positional arguments into targets and changes (kubectl: the first argument
/// with `=` or ending in `-` starts the changes).
pub fn split(args: &[String]) -> anyhow::Result<(Vec<Target>, Vec<Change>)> {
    let is_change = |a: &str| a.contains('=') || (a.ends_with('-') && !a.contains('/'));
    let cut = args.iter().position(|a| is_change(a)).unwrap_or(args.len());
    let (targets, changes) = args.split_at(cut);
    let mut changes_out = Vec::new();
    for c in changes {
        if let Some((k, v)) = c.split_once('=') {
            if k.is_empty() {
                bail!("invalid label spec: {c:?}");
            }
            changes_out.push(Change::Set(k.to_string(), v.to_string()));
        } else if let Some(k) = c.strip_suffix('-') {
            changes_out.push(Change::Remove(k.to_string()));
        } else {
            bail!("invalid label spec: {c:?}: give key=value to set or key- to remove");
        }
    }
    if changes_out.is_empty() {
        bail!("at least one label update is required");
    }
    let mut out = Vec::new();
    match targets {
        [] => bail!("one or more resources must be specified as <resource> <name> or <resource>/<name>"),
        [first, ..] if first.contains('/') => {
            for t in targets {
                let (k, n) = t
                    .split_once('/')
                    .ok_or_else(|| anyhow!("mixed resource/name and resource name arguments: {t:?}"))?;
                out.push((parse_kind(k)?, Some(n.to_string())));
            }
        }
        [kind, names @ ..] => {
            let kind = parse_kind(kind)?;
            if names.is_empty() {
                out.push((kind, None));
            }
            for n in names {
                out.push((kind, Some(n.clone())));
            }
        }
    }
    Ok((out, changes_out))
}

/// The merge patch of `changes` against the object's current map, kubectl's rules: setting a
/// key that already exists needs `overwrite` (kubectl: `'k' already has a value (v), and
/// --overwrite is false`), removing a missing key is a no-op. `None` when nothing changes.
pub fn patch(
    field: Field,
    current: &BTreeMap<String, String>,
    changes: &[Change],
    overwrite: bool,
) -> anyhow::Result<Option<Value>> {
    let mut m = Map::new();
    for c in changes {
        match c {
            Change::Set(k, v) => {
                if let Some(old) = current.get(k) {
                    if !overwrite {
                        bail!("'{k}' already has a value ({old}), and --overwrite is false");
                    }
                    if old == v {
                        continue;
                    }
                }
                m.insert(k.clone(), Value::String(v.clone()));
            }
            Change::Remove(k) => {
                if current.contains_key(k) {
                    m.insert(k.clone(), Value::Null);
                } else if field == Field::Labels {
                    eprintln!("label {k:?} not found.");
                }
            }
        }
    }
    if m.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::json!({"metadata": {field.key(): m}})))
}

/// `mco label` / `mco annotate`. Returns the printed lines and whether every object changed
/// as asked.
pub async fn run(client: &Client, field: Field, args: &LabelArgs) -> anyhow::Result<(String, bool)> {
    let (targets, changes) = split(&args.args)?;
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
    let mut ok = true;
    for (kind, name) in objects {
        let what = format!("{}/{name}", resource_name(kind, client.group()));
        let current: Value = match client.get(kind, &name).await {
            Ok(c) => c,
            Err(e) => {
                ok = false;
                out.push_str(&format!("{}\n", describe_error(&e)));
                continue;
            }
        };
        let map: BTreeMap<String, String> =
            serde_json::from_value(current["metadata"][field.key()].clone()).unwrap_or_default();
        match patch(field, &map, &changes, args.overwrite) {
            Err(e) => {
                ok = false;
                out.push_str(&format!("error: {what}: {e}\n"));
            }
            Ok(None) => out.push_str(&format!("{what} not {}\n", field.done())),
            Ok(Some(p)) => match client.merge_patch(kind, &name, &p, false).await {
                Ok(_) => out.push_str(&format!("{what} {}\n", field.done())),
                Err(e) => {
                    ok = false;
                    out.push_str(&format!("{}\n", describe_error(&e)));
                }
            },
        }
    }
    Ok((out, ok))
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
        let (t, c) = split(&s(&["node", "worker-0", "worker-1", "a=b", "c-"])).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(c, vec![Change::Set("a".into(), "b".into()), Change::Remove("c".into())]);
        let (t, _) = split(&s(&["mcp/worker", "x="])).unwrap();
        assert_eq!(t, vec![(Kind::MachineConfigPool, Some("worker".into()))]);
        assert!(split(&s(&["node", "worker-0"])).is_err());
        assert!(split(&s(&["a=b"])).is_err());
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
        assert_eq!(patch(Field::Labels, &cur, &set("worker"), true).unwrap(), None);
        assert_eq!(
            patch(Field::Annotations, &cur, &[Change::Remove("role".into())], false).unwrap(),
            Some(json!({"metadata": {"annotations": {"role": null}}}))
        );
        assert_eq!(
            patch(Field::Labels, &cur, &[Change::Remove("x".into())], false).unwrap(),
            None
        );
    }
}
