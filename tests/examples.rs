//! Every example the README names is in `examples/` and is accepted or refused as the README
//! says: each one `mco apply --dry-run` admits (the server's admission and impact preview,
//! nothing written), and `bad-driver.yaml`, applied, is stored with MCO's refusal in its
//! `Accepted` condition and generates nothing.

mod common;

use common::*;
use mco::model::Kind;
use std::time::Duration;

/// The example files the README names: `examples/<file>` anywhere, and each `` `<file>` `` of
/// the examples table's first column.
fn named_in_readme() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let is_name = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    let yaml = |s: &str| s.ends_with(".yaml") || s.ends_with(".yml");
    let mut names: Vec<String> = Vec::new();
    for (i, _) in readme.match_indices("examples/") {
        let name: String = readme[i + "examples/".len()..]
            .chars()
            .take_while(|c| is_name(*c))
            .collect();
        if yaml(&name) {
            names.push(name);
        }
    }
    for line in readme.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        for cell in first.split('`').skip(1).step_by(2) {
            if yaml(cell) && cell.chars().all(is_name) {
                names.push(cell.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_the_readme_names_exists_and_is_admitted_as_it_says() {
    let names = named_in_readme();
    for want in [
        "chrony.yaml",
        "max-pods-500.yaml",
        "bad-driver.yaml",
        "kubeletconfig.yaml",
    ] {
        assert!(names.iter().any(|n| n == want), "the README names {want}: {names:?}");
    }
    let missing: Vec<&String> = names.iter().filter(|n| !examples().join(n).is_file()).collect();
    assert!(missing.is_empty(), "named in the README, not in examples/: {missing:?}");

    let c = Cluster::start(0, 1).await;
    for n in &names {
        let (out, ok) = mco::cli::apply_dry_run(&c.client, &[examples().join(n)])
            .await
            .expect("the dry run runs");
        assert!(ok, "examples/{n} is admitted:\n{out}");
        assert!(out.contains("dry run: nothing was changed"), "{n}: {out}");
    }
    for name in ["bad-driver", "max-pods-500", "set-max-pods"] {
        assert!(
            c.server.hub.state().get_json(Kind::KubeletConfig, name).is_none(),
            "the dry runs wrote nothing ({name})"
        );
    }

    // bad-driver: stored; MCO's refusal in Accepted (False) and the legacy Failure (True);
    // no MachineConfig generated for it.
    c.apply(&[examples().join("bad-driver.yaml")]).await;
    let message = "Error: KubeletConfiguration: cgroupDriver is not allowed to be set, but contains: cgroupfs";
    c.wait_for("bad-driver refused in its conditions", Duration::from_secs(30), |s| {
        let Some(kc) = s.get_json(Kind::KubeletConfig, "bad-driver") else {
            return false;
        };
        let conds = kc["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let has = |t: &str, st: &str| {
            conds.iter().any(|c| {
                c["type"] == t && c["status"] == st && c["message"].as_str().is_some_and(|m| m.starts_with(message))
            })
        };
        kc["status"]["observedGeneration"] == kc["metadata"]["generation"]
            && has("Accepted", "False")
            && has("Failure", "True")
    })
    .await;
    let generated: Vec<String> = c
        .server
        .hub
        .state()
        .machine_configs
        .values()
        .filter(|mc| {
            mc.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.kind == "KubeletConfig" && r.name == "bad-driver")
        })
        .map(|mc| mc.name().to_string())
        .collect();
    assert_eq!(generated, Vec::<String>::new(), "nothing generated for bad-driver");
    c.stop().await;
}
