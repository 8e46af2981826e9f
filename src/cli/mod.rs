//! `mco get|describe|apply|delete|history|diff|rollback|store`: a kubectl-like client of the REST API.
//!
//! Owns argument shapes of the client verbs, reading manifests from files, directories and
//! stdin, and printing tables/YAML/JSON. Talks to the server only through [`crate::client`].

pub mod diff;
pub mod history;
pub mod output;
pub mod rollback;
pub mod store;

use crate::client::{Client, ClientError};
use crate::manifest::{parse_with_source, validate_machine_config, validate_pool, Manifest};
use crate::model::{Keys, Kind};
use anyhow::{anyhow, Context};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The address `mco up` and `mco server` listen on by default, and the CLI's default server.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";

/// `-o` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
    Wide,
    Name,
}

/// `kind.group` as kubectl prints resources (`machineconfigpool.machineconfiguration.openshift.io`).
fn resource_name(kind: Kind, group: &str) -> String {
    match kind {
        Kind::Node => "node".into(),
        k => format!(
            "{}.{}",
            k.as_str().to_ascii_lowercase(),
            k.fixed_group().unwrap_or(group)
        ),
    }
}

fn parse_kind(s: &str) -> anyhow::Result<Kind> {
    Kind::parse(s).ok_or_else(|| {
        anyhow!("the server doesn't have a resource type {s:?} (known: machineconfigpool|mcp, machineconfig|mc, node|nodes, machineconfiguration)")
    })
}

/// Explains a client error the way kubectl does (`Error from server (NotFound): ...`).
pub fn describe_error(e: &ClientError) -> String {
    match e {
        ClientError::Status(s) => {
            let mut m = format!(
                "Error from server ({}): {}",
                if s.reason.is_empty() { "Unknown" } else { &s.reason },
                s.message
            );
            if let Some(d) = &s.details {
                if d.causes.len() > 1 {
                    for c in &d.causes {
                        m.push_str(&format!("\n  * {}: {}", c.field, c.message));
                    }
                }
            }
            m
        }
        other => format!("error: {other}"),
    }
}

/// `mco get KIND [NAME] [-o ...] [--at TIME|rv:N]`: `at` reads the objects as they were then.
pub async fn get(
    client: &Client,
    kind: &str,
    name: Option<&str>,
    output: Option<OutputFormat>,
    at: Option<&str>,
) -> anyhow::Result<String> {
    let kind = parse_kind(kind)?;
    let keys = Keys::new(client.group());
    let items: Vec<Value> = match name {
        Some(n) => vec![client
            .get_at(kind, n, at)
            .await
            .map_err(|e| anyhow!(describe_error(&e)))?],
        None => {
            let list = client
                .list_at(kind, at)
                .await
                .map_err(|e| anyhow!(describe_error(&e)))?;
            list["items"].as_array().cloned().unwrap_or_default()
        }
    };
    Ok(match output {
        Some(OutputFormat::Json) => {
            let v = if name.is_some() {
                items[0].clone()
            } else {
                serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
            };
            serde_json::to_string_pretty(&v)? + "\n"
        }
        Some(OutputFormat::Yaml) => {
            let v = if name.is_some() {
                items[0].clone()
            } else {
                serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
            };
            output::to_yaml(&v)
        }
        Some(OutputFormat::Name) => items
            .iter()
            .map(|o| {
                format!(
                    "{}/{}\n",
                    resource_name(kind, client.group()),
                    o["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect(),
        wide => {
            if items.is_empty() {
                return Ok("No resources found\n".into());
            }
            let wide = wide == Some(OutputFormat::Wide);
            let rows = items.iter().map(|o| output::row(kind, o, &keys, wide)).collect();
            output::table(&output::headers(kind, wide), rows)
        }
    })
}

/// `mco describe KIND NAME [--at TIME|rv:N]`: the object's identity, then its spec and status
/// as indented YAML (as it was at `at`, when given).
pub async fn describe(client: &Client, kind: &str, name: &str, at: Option<&str>) -> anyhow::Result<String> {
    let kind = parse_kind(kind)?;
    let obj: Value = client
        .get_at(kind, name, at)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let meta = &obj["metadata"];
    let map_line = |v: &Value| -> String {
        match v.as_object() {
            Some(m) if !m.is_empty() => m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("\n              "),
            _ => "<none>".into(),
        }
    };
    let mut out = String::new();
    out.push_str(&format!("Name:         {}\n", meta["name"].as_str().unwrap_or("")));
    out.push_str(&format!("Labels:       {}\n", map_line(&meta["labels"])));
    out.push_str(&format!("Annotations:  {}\n", map_line(&meta["annotations"])));
    out.push_str(&format!("API Version:  {}\n", obj["apiVersion"].as_str().unwrap_or("")));
    out.push_str(&format!("Kind:         {}\n", obj["kind"].as_str().unwrap_or("")));
    out.push_str(&format!(
        "Created:      {}\n",
        meta["creationTimestamp"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "Resource Version: {}\n",
        meta["resourceVersion"].as_str().unwrap_or("")
    ));
    if let Some(owners) = meta["ownerReferences"].as_array() {
        for o in owners {
            out.push_str(&format!(
                "Owned By:     {}/{}\n",
                o["kind"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            ));
        }
    }
    if let Some(actions) = meta["annotations"][crate::disruption::ACTIONS_ANNOTATION].as_str() {
        out.push_str(&format!("Post-config Actions (last update): {actions}\n"));
    }
    if kind == Kind::MachineConfig {
        if let Ok(mc) = serde_json::from_value::<crate::model::MachineConfig>(obj.clone()) {
            out.push_str(&attribution_text(&mc));
        }
    }
    for section in ["spec", "status"] {
        if let Some(v) = obj.get(section).filter(|v| !v.is_null()) {
            let mut title = section.to_string();
            title[..1].make_ascii_uppercase();
            out.push_str(&format!("{title}:\n"));
            if kind == Kind::MachineConfigPool && section == "status" {
                out.push_str(&pool_conditions(v));
            }
            for line in output::to_yaml(v).lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// A rendered config's sources and which of them wrote each item (its attribution
/// annotation); empty for other MachineConfigs.
fn attribution_text(mc: &crate::model::MachineConfig) -> String {
    let Some(a) = crate::render::Attribution::of(mc) else {
        return String::new();
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut add = |what: &str, item: &str, source: &str| rows.push(vec![what.into(), item.into(), source.into()]);
    for (path, src) in &a.files {
        add("file", path, src);
    }
    for (unit, src) in &a.units {
        add("unit", unit, src);
    }
    for (dropin, src) in &a.dropins {
        add("dropin", dropin, src);
    }
    for (key, src) in &a.ssh_keys {
        let short: String = key.chars().take(40).collect();
        add("ssh key", &short, src);
    }
    if let Some(src) = &a.password_hash {
        add("password hash", "core", src);
    }
    for k in &a.kernel_arguments {
        add("kernel argument", &k.value, &k.source);
    }
    for e in &a.extensions {
        add("extension", &e.value, &e.source);
    }
    for (what, src) in [
        ("kernelType", &a.kernel_type),
        ("fips", &a.fips),
        ("osImageURL", &a.os_image_url),
    ] {
        if let Some(src) = src {
            add(what, "", src);
        }
    }
    let mut out = format!("Sources:      {}\n", a.sources.join(", "));
    if !rows.is_empty() {
        out.push_str("Attribution:\n");
        for line in output::table(&["ITEM", "NAME", "WRITTEN BY"], rows).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn pool_conditions(status: &Value) -> String {
    let Some(conds) = status["conditions"].as_array().filter(|c| !c.is_empty()) else {
        return String::new();
    };
    let rows = conds
        .iter()
        .map(|c| {
            ["type", "status", "lastTransitionTime", "reason", "message"]
                .iter()
                .map(|k| c[*k].as_str().unwrap_or("").to_string())
                .collect()
        })
        .collect();
    let t = output::table(&["TYPE", "STATUS", "LAST TRANSITION", "REASON", "MESSAGE"], rows);
    let mut out = String::from("  Conditions:\n");
    for l in t.lines() {
        out.push_str("    ");
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Asks the server what `body` (`{"apply": [...], "delete": [...]}`) would do and prints it.
async fn preview(client: &Client, body: Value) -> anyhow::Result<(String, bool)> {
    let answer: Value = match client
        .post_path(&format!("/apis/{}/previews", crate::history::API_VERSION), &body)
        .await
    {
        Ok(a) => a,
        Err(e) => return Ok((format!("{}\n", describe_error(&e)), false)),
    };
    let mut out = String::new();
    for w in client.take_warnings() {
        out.push_str(&format!("Warning: {w}\n"));
    }
    let impact: crate::preview::Impact = serde_json::from_value(answer)?;
    out.push_str(&crate::preview::render_text(&impact));
    out.push_str("dry run: nothing was changed\n");
    Ok((out, true))
}

/// `mco delete KIND NAME [--dry-run]`: with [`Run::DryRun`], previews the impact instead.
pub async fn delete(client: &Client, kind: &str, name: &str, run: Run) -> anyhow::Result<String> {
    let kind = parse_kind(kind)?;
    if run == Run::DryRun {
        let (out, ok) = preview(
            client,
            serde_json::json!({"delete": [{"kind": kind.as_str(), "name": name}]}),
        )
        .await?;
        if !ok {
            return Err(anyhow!(out.trim_end().to_string()));
        }
        return Ok(out);
    }
    client
        .delete(kind, name)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    Ok(format!("{} {name:?} deleted\n", resource_name(kind, client.group())))
}

/// Reads every manifest file named by `-f` (a file, a directory's `.yaml`/`.yml`/`.json` files,
/// or `-` for stdin), returning `(source, text)` pairs in order.
pub fn read_sources(paths: &[PathBuf]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).context("reading stdin")?;
            out.push(("<stdin>".to_string(), s));
        } else if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && is_manifest_file(f))
                .collect();
            files.sort();
            for f in files {
                out.push((
                    f.display().to_string(),
                    std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?,
                ));
            }
        } else {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(p).with_context(|| {
                    format!(
                        "the path {:?} does not exist or cannot be read",
                        p.display().to_string()
                    )
                })?,
            ));
        }
    }
    Ok(out)
}

fn is_manifest_file(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Outcome of applying one object.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Configured,
    Unchanged,
}

/// The annotation kubectl keeps the last applied manifest in; mco uses the same one, so that
/// `mco apply` and `kubectl apply` take turns on the same objects.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `mco apply -f`: reads and validates every document first, and writes nothing when any is
/// refused (a typo in the third document must not leave the first two applied). Then creates
/// each object, or updates it with kubectl's three-way merge: fields of the manifest are set,
/// fields removed from the manifest since the last apply are removed, fields the manifest never
/// mentioned (like a pool's `spec.configuration`, owned by the render controller) are kept.
/// Returns the printed lines and whether all succeeded.
pub async fn apply(client: &Client, paths: &[PathBuf]) -> anyhow::Result<(String, bool)> {
    apply_as(client, paths, Run::Write).await
}

/// `mco apply -f --dry-run`: nothing is written; the server admits the objects and previews
/// their impact (pools, rendered names, node changes, drains and reboots, rollout waves).
pub async fn apply_dry_run(client: &Client, paths: &[PathBuf]) -> anyhow::Result<(String, bool)> {
    apply_as(client, paths, Run::DryRun).await
}

/// Whether a client verb writes or only previews.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    Write,
    DryRun,
}

async fn apply_as(client: &Client, paths: &[PathBuf], run: Run) -> anyhow::Result<(String, bool)> {
    let mut out = String::new();
    let mut docs = Vec::new();
    let mut refused = false;
    for (source, text) in read_sources(paths)? {
        for doc in parse_with_source(&text) {
            let checked = doc.map_err(|e| e.to_string()).and_then(|d| {
                let valid = match &d.manifest {
                    Manifest::MachineConfig(mc) => validate_machine_config(mc).map(|_| ()),
                    Manifest::MachineConfigPool(p) => validate_pool(p),
                    Manifest::MachineConfiguration(m) => crate::disruption::validate_machine_configuration(m),
                };
                valid.map(|_| d).map_err(|e| e.to_string())
            });
            match checked {
                Ok(d) => docs.push(d),
                Err(e) => {
                    refused = true;
                    out.push_str(&format!("error: {source}: {e}\n"));
                }
            }
        }
    }
    if refused {
        out.push_str("error: nothing was applied: fix the documents above and apply again\n");
        return Ok((out, false));
    }
    if docs.is_empty() {
        out.push_str("error: no objects passed to apply\n");
        return Ok((out, false));
    }
    if run == Run::DryRun {
        let objects: Vec<Value> = docs.into_iter().map(|d| d.raw).collect();
        return preview(client, serde_json::json!({"apply": objects})).await;
    }
    let mut ok = true;
    for d in docs {
        let kind = match &d.manifest {
            Manifest::MachineConfig(_) => Kind::MachineConfig,
            Manifest::MachineConfigPool(_) => Kind::MachineConfigPool,
            Manifest::MachineConfiguration(_) => Kind::MachineConfiguration,
        };
        let name = d.manifest.name().to_string();
        let result = apply_one(client, kind, &name, d.raw).await;
        for w in client.take_warnings() {
            out.push_str(&format!("Warning: {w}\n"));
        }
        match result {
            Ok(a) => out.push_str(&format!(
                "{}/{name} {}\n",
                resource_name(kind, client.group()),
                match a {
                    Applied::Created => "created",
                    Applied::Configured => "configured",
                    Applied::Unchanged => "unchanged",
                }
            )),
            Err(e) => {
                ok = false;
                out.push_str(&format!("{}\n", describe_error(&e)));
            }
        }
    }
    Ok((out, ok))
}

async fn apply_one(client: &Client, kind: Kind, name: &str, raw: Value) -> Result<Applied, ClientError> {
    let mut modified = raw;
    if let Some(m) = modified.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = modified["metadata"].as_object_mut() {
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            m.remove(k);
        }
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(LAST_APPLIED);
        }
    }
    let mut with_annotation = modified.clone();
    with_annotation["metadata"]["annotations"][LAST_APPLIED] = Value::String(modified.to_string());
    let current: Value = match client.get(kind, name).await {
        Ok(c) => c,
        Err(e) if e.is_not_found() => {
            client.create(kind, &with_annotation, Some("apply")).await?;
            return Ok(Applied::Created);
        }
        Err(e) => return Err(e),
    };
    let original: Option<Value> = current["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok());
    let patch = three_way_patch(original.as_ref(), &with_annotation, &current);
    if patch.as_object().is_none_or(|p| p.is_empty()) {
        return Ok(Applied::Unchanged);
    }
    let after = client.merge_patch(kind, name, &patch, false).await?;
    Ok(
        if after["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
            Applied::Unchanged
        } else {
            Applied::Configured
        },
    )
}

/// kubectl's three-way JSON merge patch: set what `modified` says where `current` differs,
/// delete what `original` (the last applied manifest) had and `modified` no longer has.
pub fn three_way_patch(original: Option<&Value>, modified: &Value, current: &Value) -> Value {
    let mut patch = serde_json::Map::new();
    if let Some(m) = modified.as_object() {
        for (k, mv) in m {
            match (mv, current.get(k)) {
                (Value::Object(_), Some(cv @ Value::Object(_))) => {
                    let sub = three_way_patch(original.and_then(|o| o.get(k)), mv, cv);
                    if sub.as_object().is_some_and(|s| !s.is_empty()) {
                        patch.insert(k.clone(), sub);
                    }
                }
                (_, cv) if cv != Some(mv) => {
                    patch.insert(k.clone(), mv.clone());
                }
                _ => {}
            }
        }
    }
    if let Some(o) = original.and_then(Value::as_object) {
        for k in o.keys() {
            if modified.get(k).is_none() && current.get(k).is_some() {
                patch.insert(k.clone(), Value::Null);
            }
        }
    }
    Value::Object(patch)
}

/// Resolves the server URL: `--server`/`MCO_SERVER`, else the default `mco up` address.
pub fn server_url(flag: Option<&str>) -> String {
    let s = flag.map(str::to_string).unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    if s.starts_with("http://") || s.starts_with("https://") {
        s
    } else {
        format!("http://{s}")
    }
}

/// Fails with a readable message when no server answers.
pub async fn connect(server: &str) -> anyhow::Result<Client> {
    Client::connect(server, "cli").await.map_err(|e| match e {
        ClientError::Transport { .. } => {
            anyhow!("{e}\nIs `mco up` (or `mco server`) running? Set --server or MCO_SERVER to its address.")
        }
        other => anyhow!(describe_error(&other)),
    })
}

#[cfg(test)]
mod tests {
    use super::three_way_patch;
    use serde_json::json;

    #[test]
    fn three_way_patch_keeps_what_the_manifest_never_named() {
        let current = json!({"spec": {"paused": true, "configuration": {"name": "rendered-x"}, "maxUnavailable": 2}});
        let original = json!({"spec": {"paused": true, "maxUnavailable": 2}});
        let modified = json!({"spec": {"paused": true}});
        // maxUnavailable was applied before and is gone from the manifest: removed;
        // configuration was never applied: kept; paused unchanged: not in the patch.
        assert_eq!(
            three_way_patch(Some(&original), &modified, &current),
            json!({"spec": {"maxUnavailable": null}})
        );
        assert_eq!(three_way_patch(Some(&original), &original, &current), json!({}));
        assert_eq!(
            three_way_patch(None, &json!({"spec": {"paused": false}}), &current),
            json!({"spec": {"paused": false}})
        );
    }
}
