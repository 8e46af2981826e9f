//! The real-world corpus (`../shared/corpus`, manifests from public repositories of people who
//! run these clusters): every MachineConfig and MachineConfigPool is either accepted, rendered
//! and, where a pool selects it, applied to a sandbox node without error, or refused with an
//! error naming the field and the rule. Skips, saying why, where the corpus is absent (a clone
//! outside the mco workspace).

mod common;

use common::*;
use mco::client::ClientError;
use mco::manifest::{parse_documents, Manifest, ManifestErrorReason};
use mco::model::{Kind, NodeAnnotations};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn corpus_files() -> Option<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if !root.is_dir() {
        return None;
    }
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n != "SOURCES.md") {
                out.push(p);
            }
        }
    }
    out.sort();
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_is_accepted_rendered_and_applied_or_refused_with_a_field() {
    let Some(files) = corpus_files() else {
        eprintln!("SKIPPED corpus test: ../shared/corpus not found (it exists only inside the mco workspace)");
        return;
    };
    let c = Cluster::start(1, 2).await;
    let initial: Vec<String> = ["master", "worker"]
        .iter()
        .map(|p| c.pool(p).spec.configuration.name)
        .collect();
    // Pause the built-in pools so that the whole corpus rolls out once, at the end.
    for p in ["master", "worker"] {
        c.client
            .merge_patch(Kind::MachineConfigPool, p, &json!({"spec": {"paused": true}}), false)
            .await
            .unwrap();
    }
    let (mut accepted, mut refused, mut unsupported) = (0, 0, 0);
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).to_string();
        for doc in parse_documents(&text) {
            let m = match doc {
                Ok(m) => m,
                Err(e) => {
                    match e.reason {
                        ManifestErrorReason::NotSupportedYet
                        | ManifestErrorReason::UnmanagedKind
                        | ManifestErrorReason::Butane => unsupported += 1,
                        _ => {
                            assert!(
                                e.field.as_deref().is_some_and(|f| !f.is_empty()),
                                "{}: refused without a field: {e}",
                                f.display()
                            );
                            if e.kind.as_deref().and_then(Kind::parse).is_some_and(Kind::is_generic) {
                                eprintln!("corpus: refused {}: {e}", f.display());
                            }
                            refused += 1;
                        }
                    }
                    continue;
                }
            };
            let (kind, mut obj) = match &m {
                Manifest::MachineConfig(mc) => (Kind::MachineConfig, serde_json::to_value(mc).unwrap()),
                Manifest::MachineConfigPool(p) => (Kind::MachineConfigPool, serde_json::to_value(p).unwrap()),
                Manifest::MachineConfiguration(m) => (Kind::MachineConfiguration, serde_json::to_value(m).unwrap()),
                Manifest::Other { kind, object } => (*kind, object.clone()),
            };
            if kind == Kind::MachineConfigPool && ["master", "worker"].contains(&m.name()) {
                continue; // the built-in pools exist already (and stay paused until the end)
            }
            obj["metadata"].as_object_mut().unwrap().remove("resourceVersion");
            match c.client.create(kind, &obj, None).await {
                Ok(_) => accepted += 1,
                Err(ClientError::Status(s)) if s.reason == "AlreadyExists" => accepted += 1,
                Err(ClientError::Status(s)) if s.reason == "Invalid" => {
                    let causes = s.details.map(|d| d.causes).unwrap_or_default();
                    assert!(
                        !causes.is_empty() && causes.iter().all(|c| !c.field.is_empty() && !c.message.is_empty()),
                        "{}: {}",
                        f.display(),
                        s.message
                    );
                    if kind.is_generic() {
                        eprintln!("corpus: refused {}: {}", f.display(), s.message);
                    }
                    refused += 1;
                }
                Err(e) => panic!("{}: {} {}: {e}", f.display(), kind, m.name()),
            }
        }
    }
    eprintln!(
        "corpus: {accepted} objects accepted, {refused} refused with a field, {unsupported} of kinds not supported yet"
    );
    assert!(accepted >= 60, "most of the corpus is accepted ({accepted})");
    for p in ["master", "worker"] {
        c.client
            .merge_patch(Kind::MachineConfigPool, p, &json!({"spec": {"paused": false}}), false)
            .await
            .unwrap();
    }
    let keys = c.keys();
    c.wait_for(
        "every pool rendered without error, every generated MachineConfig in a render, every node Done on its pool's config",
        Duration::from_secs(120),
        |s| {
            // A pool may only fail to render because nothing selects it (the built-in `arbiter`
            // pool has MachineConfigs only in an arbiter topology): MCO's own RenderDegraded.
            let pools_ok = s.pools.values().all(|p| {
                p.condition("RenderDegraded").is_none_or(|c| {
                    c.status != "True" || c.message.contains("no MachineConfigs found matching selector")
                })
            });
            let nodes_ok = s.nodes.values().all(|n| {
                let a = NodeAnnotations::read(n, &keys);
                let pool = if n.metadata.name.as_deref().unwrap_or("").starts_with("master") {
                    "master"
                } else {
                    "worker"
                };
                a.state == "Done" && a.current_config == s.pools[pool].spec.configuration.name
            });
            let rendered = ["master", "worker"]
                .iter()
                .zip(&initial)
                .all(|(p, t0)| s.pools[*p].spec.configuration.name != *t0);
            // The generated kinds are judged, and what they generated is rendered: a generated
            // MachineConfig can land after a first re-render, which then renders again.
            let judged = [Kind::KubeletConfig, Kind::ContainerRuntimeConfig].iter().all(|k| {
                s.objects
                    .get(k)
                    .into_iter()
                    .flatten()
                    .all(|(_, o)| o["status"]["conditions"].as_array().and_then(|c| c.last()).is_some_and(|c| c["type"].is_string()))
            });
            let generated_rendered = s
                .machine_configs
                .iter()
                .filter(|(_, mc)| {
                    mc.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.kind == "KubeletConfig" || r.kind == "ContainerRuntimeConfig")
                })
                .all(|(n, _)| {
                    s.pools
                        .values()
                        .any(|p| p.spec.configuration.source.iter().any(|src| src.name == *n))
                });
            pools_ok && nodes_ok && rendered && judged && generated_rendered
        },
    )
    .await;
    let st = c.server.hub.state().clone();
    // Every KubeletConfig and ContainerRuntimeConfig is judged: Success with its generated
    // MachineConfig in a pool's render, or Failure naming the field and the rule.
    for kind in [Kind::KubeletConfig, Kind::ContainerRuntimeConfig] {
        for (name, o) in st.objects.get(&kind).into_iter().flatten() {
            // The last condition is the legacy Success/Failure both kinds write.
            let cond = o["status"]["conditions"]
                .as_array()
                .and_then(|c| c.last())
                .unwrap_or(&serde_json::Value::Null);
            let msg = cond["message"].as_str().unwrap_or("");
            match cond["type"].as_str() {
                Some("Success") => {
                    let uid = o["metadata"]["uid"].as_str().unwrap();
                    let generated: Vec<&String> = st
                        .machine_configs
                        .iter()
                        .filter(|(_, mc)| mc.metadata.owner_references.iter().flatten().any(|r| r.uid == uid))
                        .map(|(n, _)| n)
                        .collect();
                    assert!(!generated.is_empty(), "{kind} {name}: Success without a MachineConfig");
                    for g in generated {
                        assert!(
                            st.pools
                                .values()
                                .any(|p| p.spec.configuration.source.iter().any(|s| s.name == *g)),
                            "{g} is in no render"
                        );
                    }
                    eprintln!("corpus: {kind} {name}: Success");
                }
                Some("Failure") => {
                    assert!(
                        msg.starts_with("Error: ") && msg.contains("(spec."),
                        "{kind} {name}: {msg}"
                    );
                    eprintln!("corpus: {kind} {name}: {msg}");
                }
                other => panic!("{kind} {name}: no condition ({other:?})"),
            }
        }
    }
    for (pool, node) in [("master", "master-0"), ("worker", "worker-0")] {
        let target = &st.pools[pool].spec.configuration.name;
        let cfg = mco::ignition::parse_config(st.machine_configs[target].spec.config.as_ref().unwrap(), "spec.config")
            .unwrap();
        assert!(!cfg.storage.files.is_empty(), "{pool} renders corpus files");
        for file in &cfg.storage.files {
            let on_disk = std::fs::read(c.root(node).join(file.path.trim_start_matches('/'))).unwrap();
            assert_eq!(
                on_disk,
                mco::ignition::file_contents(file).unwrap(),
                "{node}:{}",
                file.path
            );
        }
    }

    c.stop().await;
}
