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
    // A name may be in a folder of examples/ (`policy/rollout-policy.yaml`).
    let is_name = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
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

/// The units an example writes, with their dropins (`(unit name, contents, [(dropin name,
/// contents)])`), and the directories of the files the same config writes.
type ExampleUnit = (String, String, Vec<(String, String)>);

fn units_of(text: &str) -> (Vec<ExampleUnit>, Vec<String>) {
    let (mut units, mut dirs) = (Vec::new(), Vec::new());
    for doc in mco::manifest::parse_documents(text) {
        let Ok(mco::manifest::Manifest::MachineConfig(mc)) = doc else {
            continue;
        };
        let cfg = mco::daemon::apply::ignition_config(&mc).unwrap();
        for f in &cfg.storage.files {
            dirs.extend(mco::host::parent_dir(&f.path).map(String::from));
        }
        for u in &cfg.systemd.units {
            let Some(contents) = u.contents.clone().filter(|c| !c.is_empty()) else {
                continue;
            };
            let dropins = u
                .dropins
                .iter()
                .map(|d| (d.name.clone(), d.contents.clone().unwrap_or_default()))
                .collect();
            units.push((u.name.clone(), contents, dropins));
        }
    }
    (units, dirs)
}

/// Each absolute path a unit's commands write through a shell redirect (`> /p`, `>> /p`)
/// whose directory nothing creates before the unit runs: not one the unit has systemd create
/// (`StateDirectory=` under `/var/lib`, `RuntimeDirectory=` under `/run`, `CacheDirectory=`,
/// `LogsDirectory=`, `ConfigurationDirectory=`), not one the config writes a file into, not
/// one every host has.
fn writes_without_a_directory(unit: &ExampleUnit, config_dirs: &[String]) -> Vec<String> {
    let (_, contents, dropins) = unit;
    let texts: Vec<&str> = std::iter::once(contents.as_str())
        .chain(dropins.iter().map(|(_, c)| c.as_str()))
        .collect();
    let mut made: Vec<String> = config_dirs.to_vec();
    made.extend(["/tmp", "/var/tmp", "/run", "/var/log", "/etc", "/dev"].map(String::from));
    let mut commands = Vec::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let base = match key.trim() {
            "StateDirectory" => "/var/lib",
            "RuntimeDirectory" => "/run",
            "CacheDirectory" => "/var/cache",
            "LogsDirectory" => "/var/log",
            "ConfigurationDirectory" => "/etc",
            k if k.starts_with("Exec") => {
                commands.push(value.to_string());
                continue;
            }
            _ => continue,
        };
        made.extend(value.split_whitespace().map(|d| format!("{base}/{d}")));
    }
    let mut missing = Vec::new();
    for cmd in commands {
        for (i, _) in cmd.match_indices('>') {
            let rest = cmd[i + 1..].trim_start_matches('>').trim_start();
            if rest.starts_with('&') {
                continue;
            }
            let target: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace() && !"'\";)|&".contains(*c))
                .collect();
            if !target.starts_with('/') {
                continue;
            }
            let dir = mco::host::parent_dir(&target).unwrap_or("/");
            if !made.iter().any(|m| m == dir) {
                missing.push(target);
            }
        }
    }
    missing
}

/// Every unit an example writes can run on a real systemd host: `systemd-analyze verify`
/// accepts it with its dropins (where systemd-analyze is installed), and every file its
/// commands write lands in a directory something creates first (`unit-with-dropin.yaml` once
/// wrote into `/var/lib/node-exporter/textfile`, which nothing created: the unit failed at
/// every boot of a real host).
#[test]
fn every_example_unit_can_run_on_a_real_host() {
    let verify = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !verify {
        eprintln!("systemd-analyze is not installed: the units' syntax is not verified");
    }
    let mut seen = 0;
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let (units, dirs) = units_of(&std::fs::read_to_string(&path).unwrap());
        for unit in &units {
            seen += 1;
            let name = format!("{}: {}", path.display(), unit.0);
            assert_eq!(writes_without_a_directory(unit, &dirs), Vec::<String>::new(), "{name}");
            if !verify {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join(&unit.0);
            std::fs::write(&file, &unit.1).unwrap();
            let dropins = dir.path().join(format!("{}.d", unit.0));
            std::fs::create_dir_all(&dropins).unwrap();
            for (d, c) in &unit.2 {
                std::fs::write(dropins.join(d), c).unwrap();
            }
            let out = std::process::Command::new("systemd-analyze")
                .arg("verify")
                .arg(&file)
                .output()
                .unwrap();
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "{name}: systemd-analyze verify: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert!(seen > 0, "the examples have units");
    // The check catches the defect it is for: the unit as it was, without StateDirectory=.
    let before = std::fs::read_to_string(examples().join("unit-with-dropin.yaml"))
        .unwrap()
        .replace("StateDirectory=node-exporter/textfile", "");
    let (units, dirs) = units_of(&before);
    assert_eq!(
        writes_without_a_directory(&units[0], &dirs),
        ["/var/lib/node-exporter/textfile/boot.prom"]
    );
}
