//! `mco describe`: one object in detail, as `kubectl describe` lays it out.
//!
//! Owns the layout: identity; for a pool its selectors, target and counts, ONE conditions
//! table, its nodes (desired/current/state/reason); for a MachineConfig the pools that select
//! it, a summary of its files, units, kernel arguments and extensions (and a rendered config's
//! attribution); for a node its status, pool and MCO annotations; for the generated-config
//! kinds their spec, observedGeneration, conditions and generated MachineConfigs; then the
//! object's recent
//! events from the log (`/api/v1/events`). Reads only through [`Client`].

use super::output;
use super::{describe_error, parse_kind};
use crate::client::Client;
use crate::model::{Keys, Kind, MachineConfig, MachineConfigPool, Node, NodeAnnotations};
use anyhow::anyhow;
use serde_json::Value;

/// How many of the object's newest events `describe` shows.
pub const EVENTS_SHOWN: usize = 10;

/// `mco describe KIND NAME [--at TIME|rv:N]` (`at`: the object as it was then).
pub async fn describe(client: &Client, kind: &str, name: &str, at: Option<&str>) -> anyhow::Result<String> {
    let kind = parse_kind(kind)?;
    let obj: Value = client
        .get_at(kind, name, at)
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let keys = Keys::new(client.group());
    let mut out = identity(&obj);
    let pools: Vec<MachineConfigPool> = match client.list_at(Kind::MachineConfigPool, at).await {
        Ok(l) => serde_json::from_value(l["items"].clone()).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let nodes: Vec<Node> = match client.list_at(Kind::Node, at).await {
        Ok(l) => serde_json::from_value(l["items"].clone()).unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let membership =
        crate::rollout::pools_for_nodes(&pools.iter().collect::<Vec<_>>(), &nodes.iter().collect::<Vec<_>>());
    match kind {
        Kind::MachineConfigPool => {
            let p: MachineConfigPool = serde_json::from_value(obj.clone())?;
            out.push_str(&pool_text(&p));
            let mine: Vec<&Node> = nodes
                .iter()
                .filter(|n| {
                    membership
                        .primary
                        .get(n.metadata.name.as_deref().unwrap_or(""))
                        .map(String::as_str)
                        == Some(name)
                })
                .collect();
            out.push_str("Nodes:\n");
            if mine.is_empty() {
                out.push_str("  <none>\n");
            } else {
                let rows = mine
                    .iter()
                    .map(|n| {
                        let a = NodeAnnotations::read(n, &keys);
                        vec![
                            n.metadata.name.clone().unwrap_or_default(),
                            output::node_status(n),
                            a.desired_config,
                            a.current_config,
                            a.state,
                            none_if_empty(a.reason),
                        ]
                    })
                    .collect();
                out.push_str(&indent(&output::table(
                    &["NODE", "STATUS", "DESIRED", "CURRENT", "STATE", "REASON"],
                    rows,
                )));
            }
        }
        Kind::MachineConfig => {
            let mc: MachineConfig = serde_json::from_value(obj.clone())?;
            let selecting: Vec<&str> = pools
                .iter()
                .filter(|p| crate::model::selector_matches(p.spec.machine_config_selector.as_ref(), &mc.metadata))
                .map(|p| p.name())
                .collect();
            out.push_str(&format!(
                "Selected By:  {}\n",
                if selecting.is_empty() {
                    "<no pool>".to_string()
                } else {
                    selecting
                        .iter()
                        .map(|p| format!("machineconfigpool/{p}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
            out.push_str(&attribution_text(&mc));
            out.push_str(&machine_config_text(&obj));
        }
        Kind::Node => {
            let n: Node = serde_json::from_value(obj.clone())?;
            let a = NodeAnnotations::read(&n, &keys);
            let boot = n
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.boot_id.clone())
                .unwrap_or_default();
            out.push_str(&format!("Status:       {}\n", output::node_status(&n)));
            out.push_str(&format!(
                "Pool:         {}\n",
                none_if_empty(membership.primary.get(name).cloned().unwrap_or_default())
            ));
            out.push_str(&format!("Boot ID:      {}\n", none_if_empty(boot)));
            out.push_str("Machine Config:\n");
            out.push_str(&format!("  Desired:    {}\n", none_if_empty(a.desired_config)));
            out.push_str(&format!("  Current:    {}\n", none_if_empty(a.current_config)));
            out.push_str(&format!("  State:      {}\n", none_if_empty(a.state)));
            out.push_str(&format!("  Reason:     {}\n", none_if_empty(a.reason)));
        }
        _ => {
            let mcs: Vec<Value> = match client.list_at(Kind::MachineConfig, at).await {
                Ok(l) => l["items"].as_array().cloned().unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            out.push_str(&generated_kind_text(kind, &obj, &mcs));
            if matches!(
                kind,
                Kind::ImageDigestMirrorSet | Kind::ImageTagMirrorSet | Kind::ImageContentSourcePolicy | Kind::Image
            ) {
                out.push_str(&registries_error_text(client, at).await);
            }
        }
    }
    out.push_str(&events_text(client, kind, name, output::moment(client, at).await?).await);
    Ok(out)
}

/// The error that keeps the registries config from being regenerated (a conflicting
/// `mirrorSourcePolicy`, ...), computed from every input as the controller does; empty when
/// there is none. MCO only logs it in the controller; mco also shows it here.
async fn registries_error_text(client: &Client, at: Option<&str>) -> String {
    async fn items<T: serde::de::DeserializeOwned>(client: &Client, kind: Kind, at: Option<&str>) -> Vec<T> {
        match client.list_at(kind, at).await {
            Ok(l) => serde_json::from_value(l["items"].clone()).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }
    let inputs = crate::generate::registries::Inputs {
        idms: items(client, Kind::ImageDigestMirrorSet, at).await,
        itms: items(client, Kind::ImageTagMirrorSet, at).await,
        icsp: items(client, Kind::ImageContentSourcePolicy, at).await,
        image: items::<crate::model::Image>(client, Kind::Image, at)
            .await
            .into_iter()
            .find(|i| i.metadata.name.as_deref() == Some("cluster")),
    };
    match crate::generate::registries::generated_files("", &inputs) {
        Err(e) => format!("Registries Config Error: {e} (the previous registries config is kept)\n"),
        Ok(_) => String::new(),
    }
}

/// A generated-config kind (KubeletConfig, ContainerRuntimeConfig, the mirror sets, Image):
/// its spec, `observedGeneration`, its conditions, and the MachineConfigs generated from it
/// (those it owns; for the registries inputs, every `99-<pool>-generated-registries`, which
/// all of them feed).
fn generated_kind_text(kind: Kind, obj: &Value, mcs: &[Value]) -> String {
    let mut out = String::from("Spec:\n");
    let spec = &obj["spec"];
    if spec.is_null() || spec.as_object().is_some_and(|o| o.is_empty()) {
        out.push_str("  <none>\n");
    } else {
        out.push_str(&indent(&output::to_yaml(spec)));
    }
    if kind.has_status() {
        let status = &obj["status"];
        out.push_str(&format!(
            "Observed Generation: {}\n",
            status["observedGeneration"].as_i64().unwrap_or(0)
        ));
        out.push_str("Conditions:\n");
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        if conditions.is_empty() {
            out.push_str("  <none>\n");
        } else {
            let cell = |c: &Value, k: &str| match &c[k] {
                Value::Null => String::new(),
                v => super::jsonpath::scalar(v),
            };
            let rows = conditions
                .iter()
                .map(|c| {
                    vec![
                        cell(c, "type"),
                        cell(c, "status"),
                        cell(c, "lastTransitionTime"),
                        cell(c, "reason"),
                        cell(c, "message"),
                    ]
                })
                .collect();
            out.push_str(&indent(&output::table(
                &["TYPE", "STATUS", "LAST TRANSITION", "REASON", "MESSAGE"],
                rows,
            )));
        }
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    let uid = obj["metadata"]["uid"].as_str();
    let registries_input = matches!(
        kind,
        Kind::ImageDigestMirrorSet | Kind::ImageTagMirrorSet | Kind::ImageContentSourcePolicy | Kind::Image
    );
    let mut generated: Vec<&str> = mcs
        .iter()
        .filter(|mc| {
            let mc_name = mc["metadata"]["name"].as_str().unwrap_or("");
            if registries_input {
                return mc_name.starts_with("99-") && mc_name.ends_with("-generated-registries");
            }
            mc["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["kind"] == kind.as_str() && r["name"] == name && (uid.is_none() || r["uid"].as_str() == uid))
        })
        .filter_map(|mc| mc["metadata"]["name"].as_str())
        .collect();
    generated.sort();
    out.push_str(&format!(
        "Generated MachineConfigs: {}\n",
        if generated.is_empty() {
            "<none>".to_string()
        } else {
            generated
                .iter()
                .map(|n| format!("machineconfig/{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    out
}

fn none_if_empty(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

fn indent(t: &str) -> String {
    t.lines().map(|l| format!("  {l}\n")).collect()
}

/// Name, labels, annotations (without the last-applied copy, as kubectl describe), kind,
/// creation time, resourceVersion, owners, and a node's last chosen post-config actions
/// ([`crate::disruption::ACTIONS_ANNOTATION`]).
fn identity(obj: &Value) -> String {
    let meta = &obj["metadata"];
    let map_line = |v: &Value| -> String {
        match v.as_object() {
            Some(m) if m.keys().any(|k| k != super::LAST_APPLIED) => m
                .iter()
                .filter(|(k, _)| *k != super::LAST_APPLIED)
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
    for o in meta["ownerReferences"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "Owned By:     {}/{}\n",
            o["kind"].as_str().unwrap_or(""),
            o["name"].as_str().unwrap_or("")
        ));
    }
    if let Some(actions) = meta["annotations"][crate::disruption::ACTIONS_ANNOTATION].as_str() {
        out.push_str(&format!("Post-config Actions (last update): {actions}\n"));
    }
    out
}

fn selector_text(sel: Option<&crate::model::LabelSelector>) -> String {
    let v = serde_json::to_value(sel).unwrap_or(Value::Null);
    let mut parts: Vec<String> = v["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    for e in v["matchExpressions"].as_array().into_iter().flatten() {
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(format!(
            "{} {} ({})",
            e["key"].as_str().unwrap_or(""),
            e["operator"].as_str().unwrap_or("").to_ascii_lowercase(),
            values.join(",")
        ));
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

/// A pool: selectors, target, sources, counts, and one conditions table.
fn pool_text(p: &MachineConfigPool) -> String {
    let mut out = String::new();
    let s = &p.status;
    out.push_str(&format!(
        "Machine Config Selector: {}\n",
        selector_text(p.spec.machine_config_selector.as_ref())
    ));
    out.push_str(&format!(
        "Node Selector:           {}\n",
        selector_text(p.spec.node_selector.as_ref())
    ));
    out.push_str(&format!("Paused:                  {}\n", p.spec.paused));
    out.push_str(&format!(
        "Max Unavailable:         {}\n",
        p.spec
            .max_unavailable
            .as_ref()
            .map(|m| serde_json::to_value(m)
                .map(|v| super::jsonpath::scalar(&v))
                .unwrap_or_default())
            .unwrap_or_else(|| "1".into())
    ));
    out.push_str(&format!(
        "Target Config:           {}\n",
        none_if_empty(p.spec.configuration.name.clone())
    ));
    let sources: Vec<String> = p.spec.configuration.source.iter().map(|r| r.name.clone()).collect();
    out.push_str(&format!(
        "  Sources:               {}\n",
        if sources.is_empty() {
            "<none>".into()
        } else {
            sources.join(", ")
        }
    ));
    out.push_str(&format!(
        "Current Config:          {}\n",
        none_if_empty(s.configuration.name.clone())
    ));
    out.push_str(&format!(
        "Machines:                {} total, {} ready, {} updated, {} unavailable, {} degraded\n",
        s.machine_count,
        s.ready_machine_count,
        s.updated_machine_count,
        s.unavailable_machine_count,
        s.degraded_machine_count
    ));
    out.push_str("Conditions:\n");
    if s.conditions.is_empty() {
        out.push_str("  <none>\n");
    } else {
        let rows = s
            .conditions
            .iter()
            .map(|c| {
                vec![
                    c.type_.clone(),
                    c.status.clone(),
                    c.last_transition_time
                        .as_ref()
                        .and_then(|t| serde_json::to_value(t).ok())
                        .map(|v| super::jsonpath::scalar(&v))
                        .unwrap_or_default(),
                    c.reason.clone(),
                    c.message.clone(),
                ]
            })
            .collect();
        out.push_str(&indent(&output::table(
            &["TYPE", "STATUS", "LAST TRANSITION", "REASON", "MESSAGE"],
            rows,
        )));
    }
    out
}

/// A MachineConfig's content in brief: Ignition version, files (path, mode, overwrite, size of
/// the source), units (enabled/mask, dropins), SSH keys, kernel arguments, extensions, kernel
/// type, FIPS, OS image.
fn machine_config_text(obj: &Value) -> String {
    let spec = &obj["spec"];
    let cfg = &spec["config"];
    let mut out = String::new();
    out.push_str(&format!(
        "Ignition Version: {}\n",
        cfg["ignition"]["version"].as_str().unwrap_or("<none>")
    ));
    let files = cfg["storage"]["files"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("Files:        {}\n", files.len()));
    if !files.is_empty() {
        let rows = files
            .iter()
            .map(|f| {
                vec![
                    f["path"].as_str().unwrap_or("").to_string(),
                    f["mode"]
                        .as_u64()
                        .map(|m| format!("{m:04o}"))
                        .unwrap_or_else(|| "<default>".into()),
                    f["overwrite"]
                        .as_bool()
                        .map(|b| b.to_string())
                        .unwrap_or_else(|| "false".into()),
                    f["contents"]["source"]
                        .as_str()
                        .map(|s| format!("{} bytes", s.len()))
                        .unwrap_or_else(|| "<none>".into()),
                ]
            })
            .collect();
        out.push_str(&indent(&output::table(&["PATH", "MODE", "OVERWRITE", "SOURCE"], rows)));
    }
    let units = cfg["systemd"]["units"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("Units:        {}\n", units.len()));
    if !units.is_empty() {
        let rows = units
            .iter()
            .map(|u| {
                let dropins: Vec<&str> = u["dropins"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d["name"].as_str())
                    .collect();
                vec![
                    u["name"].as_str().unwrap_or("").to_string(),
                    u["enabled"]
                        .as_bool()
                        .map(|b| b.to_string())
                        .unwrap_or_else(|| "-".into()),
                    u["mask"].as_bool().unwrap_or(false).to_string(),
                    u["contents"].is_string().to_string(),
                    if dropins.is_empty() {
                        "<none>".into()
                    } else {
                        dropins.join(",")
                    },
                ]
            })
            .collect();
        out.push_str(&indent(&output::table(
            &["NAME", "ENABLED", "MASK", "CONTENTS", "DROPINS"],
            rows,
        )));
    }
    let keys: usize = cfg["passwd"]["users"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| u["sshAuthorizedKeys"].as_array().map_or(0, Vec::len))
        .sum();
    if keys > 0 {
        out.push_str(&format!("SSH Keys:     {keys}\n"));
    }
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    };
    for (title, v) in [
        ("Kernel Arguments", &spec["kernelArguments"]),
        ("Extensions", &spec["extensions"]),
    ] {
        let l = list(v);
        if !l.is_empty() {
            out.push_str(&format!("{title}: {}\n", l.join(" ")));
        }
    }
    for (title, v) in [
        ("Kernel Type", &spec["kernelType"]),
        ("OS Image URL", &spec["osImageURL"]),
    ] {
        if let Some(s) = v.as_str().filter(|s| !s.is_empty()) {
            out.push_str(&format!("{title}: {s}\n"));
        }
    }
    if spec["fips"].as_bool() == Some(true) {
        out.push_str("FIPS:         true\n");
    }
    out
}

/// The object's newest [`EVENTS_SHOWN`] events from the log, as kubectl describe's Events
/// table (`TYPE REASON AGE FROM MESSAGE`); under `--at` (`at`, [`output::moment`]) only the
/// events up to that moment, their AGE relative to it.
async fn events_text(client: &Client, kind: Kind, name: &str, at: Option<jiff::Timestamp>) -> String {
    let selector = format!("involvedObject.kind={},involvedObject.name={name}", kind.as_str());
    let path = format!(
        "/api/v1/events?fieldSelector={}",
        percent_encoding::utf8_percent_encode(&selector, percent_encoding::NON_ALPHANUMERIC)
    );
    let time = |e: &Value| {
        e["lastTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    };
    let events: Vec<Value> = match client.get_path::<Value>(&path).await {
        Ok(v) => v["items"].as_array().cloned().unwrap_or_default(),
        Err(_) => return "Events:       <unavailable>\n".into(),
    };
    let events: Vec<Value> = events
        .into_iter()
        .filter(|e| at.is_none_or(|at| time(e).is_none_or(|t| t <= at)))
        .collect();
    if events.is_empty() {
        return "Events:       <none>\n".into();
    }
    let skip = events.len().saturating_sub(EVENTS_SHOWN);
    let rows = events[skip..]
        .iter()
        .map(|e| {
            let age = time(e)
                .map(|t| crate::gofmt::human_duration((at.unwrap_or_else(jiff::Timestamp::now) - t).get_seconds()))
                .unwrap_or_default();
            vec![
                e["type"].as_str().unwrap_or("").to_string(),
                e["reason"].as_str().unwrap_or("").to_string(),
                age,
                e["source"]["component"].as_str().unwrap_or("").to_string(),
                e["message"].as_str().unwrap_or("").to_string(),
            ]
        })
        .collect();
    let mut out = format!("Events:       newest {} of {}\n", events.len() - skip, events.len());
    out.push_str(&indent(&output::table(
        &["TYPE", "REASON", "AGE", "FROM", "MESSAGE"],
        rows,
    )));
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every generated-config kind describes without decoding into a core type: spec,
    /// observedGeneration, conditions and the MachineConfigs generated from it.
    #[test]
    fn generated_kinds_show_spec_conditions_and_their_machine_configs() {
        let kc = json!({"kind": "KubeletConfig", "metadata": {"name": "max-pods", "uid": "u1"},
            "spec": {"kubeletConfig": {"maxPods": 100}},
            "status": {"observedGeneration": 2, "conditions": [{"type": "Success", "status": "True", "message": "Success"}]}});
        let mcs = vec![
            json!({"metadata": {"name": "99-worker-generated-kubelet",
                "ownerReferences": [{"kind": "KubeletConfig", "name": "max-pods", "uid": "u1"}]}}),
            json!({"metadata": {"name": "99-worker-generated-kubelet-1",
                "ownerReferences": [{"kind": "KubeletConfig", "name": "other", "uid": "u2"}]}}),
            json!({"metadata": {"name": "99-worker-generated-registries"}}),
        ];
        let t = generated_kind_text(Kind::KubeletConfig, &kc, &mcs);
        assert!(t.contains("maxPods: 100"), "{t}");
        assert!(t.contains("Observed Generation: 2"), "{t}");
        assert!(t.contains("Success"), "{t}");
        assert!(
            t.contains("Generated MachineConfigs: machineconfig/99-worker-generated-kubelet\n"),
            "{t}"
        );
        let idms = json!({"kind": "ImageDigestMirrorSet", "metadata": {"name": "d"},
            "spec": {"imageDigestMirrors": [{"source": "quay.io/a", "mirrors": ["m/a"]}]}});
        let t = generated_kind_text(Kind::ImageDigestMirrorSet, &idms, &mcs);
        assert!(t.contains("machineconfig/99-worker-generated-registries"), "{t}");
        assert!(t.contains("Conditions:\n  <none>"), "{t}");
        // ICSP has no status subresource: no conditions section.
        let icsp = json!({"kind": "ImageContentSourcePolicy", "metadata": {"name": "p"}, "spec": {}});
        let t = generated_kind_text(Kind::ImageContentSourcePolicy, &icsp, &mcs);
        assert!(!t.contains("Conditions"), "{t}");
        assert!(t.contains("Spec:\n  <none>"), "{t}");
    }
}
