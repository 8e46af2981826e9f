//! Diff tests: each section, attribution on both sides, provenance from the caller.

use super::*;
use crate::render::{render_pool, ATTRIBUTION_ANNOTATION};
use serde_json::{json, Value};

fn mc(name: &str, spec: Value) -> MachineConfig {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}}, "spec": spec})).unwrap()
}

fn pool() -> crate::model::MachineConfigPool {
    serde_json::from_value(json!({"metadata": {"name": "worker"},
        "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}}}}))
    .unwrap()
}

/// The rendered config of `mcs`, annotated with its attribution as the render controller does.
fn rendered(mcs: &[MachineConfig]) -> MachineConfig {
    let refs: Vec<&MachineConfig> = mcs.iter().collect();
    let r = render_pool(&pool(), &refs).unwrap();
    let mut out = MachineConfig {
        spec: r.spec,
        ..Default::default()
    };
    out.metadata.name = Some(r.name);
    out.metadata.annotations = Some([(ATTRIBUTION_ANNOTATION.to_string(), r.attribution.to_annotation())].into());
    out
}

fn files(fs: Value) -> Value {
    json!({"ignition": {"version": "3.4.0"}, "storage": {"files": fs}})
}

#[test]
fn every_changed_item_is_named_and_attributed() {
    let base = mc(
        "00-worker",
        json!({"config": files(json!([{"path": "/etc/base", "contents": {"source": "data:,base"}}]))}),
    );
    let chrony_v1 = mc(
        "99-worker-chrony",
        json!({"config": {"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/chrony.conf", "contents": {"source": "data:,server%20a%0Adriftfile%20x%0A"}}]},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA old"]}]},
        "systemd": {"units": [{"name": "chronyd.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=1\n"}]}]}},
        "kernelArguments": ["nosmt"]}),
    );
    let chrony_v2 = mc(
        "99-worker-chrony",
        json!({"config": {"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/chrony.conf", "mode": 384, "contents": {"source": "data:,server%20b%0Adriftfile%20x%0A"}}]},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA new"]}]},
        "systemd": {"units": [{"name": "chronyd.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\nNice=2\n"}]}]}},
        "kernelArguments": ["nosmt", "hugepages=4"], "kernelType": "realtime"}),
    );
    let extra = mc(
        "99-worker-extra",
        json!({"config": files(json!([{"path": "/etc/extra", "contents": {"source": "data:,e"}}]))}),
    );
    let a = rendered(&[base.clone(), chrony_v1]);
    let b = rendered(&[base, chrony_v2, extra]);
    let prov = |at: u64| {
        move |mc: &str| {
            Some(Provenance {
                actor: format!("cli@{at}"),
                time: "2026-12-01T00:00:00Z".into(),
                reason: String::new(),
                resource_version: at,
                event: format!("{mc} changed"),
            })
        }
    };
    let (pa, pb) = (prov(10), prov(20));
    let d = diff(
        Input {
            config: &a,
            provenance: &pa,
        },
        Input {
            config: &b,
            provenance: &pb,
        },
    )
    .unwrap();
    let find = |section: Section, name: &str| {
        d.items
            .iter()
            .find(|i| i.section == section && i.name == name)
            .unwrap_or_else(|| panic!("{section:?} {name} in {:#?}", d.items))
    };

    let chrony = find(Section::File, "/etc/chrony.conf");
    assert_eq!(chrony.change, Change::Changed);
    assert_eq!(chrony.fields, ["contents", "mode"]);
    assert!(chrony.unified.contains("-server a\n+server b\n"), "{}", chrony.unified);
    assert!(
        chrony
            .unified
            .starts_with(&format!("--- a/etc/chrony.conf ({})", a.name())),
        "{}",
        chrony.unified
    );
    let (from, to) = (chrony.from.as_ref().unwrap(), chrony.to.as_ref().unwrap());
    assert_eq!(
        (from.source.as_str(), to.source.as_str()),
        ("99-worker-chrony", "99-worker-chrony")
    );
    assert_eq!(from.changed_by.as_ref().unwrap().resource_version, 10);
    assert_eq!(to.changed_by.as_ref().unwrap().resource_version, 20);
    assert_eq!(
        (from.value.as_str(), to.value.as_str()),
        ("mode 0644 owner root:root", "mode 0600 owner root:root")
    );

    let extra = find(Section::File, "/etc/extra");
    assert_eq!((extra.change, extra.from.is_none()), (Change::Added, true));
    assert_eq!(extra.to.as_ref().unwrap().source, "99-worker-extra");
    assert!(extra.unified.contains("+e"), "{}", extra.unified);
    assert!(
        d.items.iter().all(|i| i.name != "/etc/base"),
        "unchanged files are not items"
    );

    let dropin = find(Section::Dropin, "chronyd.service/10-x.conf");
    assert!(dropin.unified.contains("-Nice=1\n+Nice=2\n"));
    assert_eq!(find(Section::SshKey, "ssh-ed25519 AAAA old").change, Change::Removed);
    assert_eq!(
        find(Section::SshKey, "ssh-ed25519 AAAA new")
            .to
            .as_ref()
            .unwrap()
            .source,
        "99-worker-chrony"
    );
    let karg = find(Section::KernelArgument, "hugepages=4");
    assert_eq!(karg.change, Change::Added);
    assert!(d.items.iter().all(|i| i.name != "nosmt"));
    let kt = find(Section::KernelType, "");
    assert_eq!(
        (
            kt.from.as_ref().unwrap().value.as_str(),
            kt.to.as_ref().unwrap().value.as_str()
        ),
        ("default", "realtime")
    );
    assert_eq!(kt.to.as_ref().unwrap().source, "99-worker-chrony");

    // The same render on both sides: nothing.
    let same = diff(
        Input {
            config: &a,
            provenance: &pa,
        },
        Input {
            config: &a,
            provenance: &pa,
        },
    )
    .unwrap();
    assert!(same.items.is_empty());
}

#[test]
fn units_and_binary_files() {
    let svc = "[Service]\nExecStart=/bin/true\n";
    let a = rendered(&[mc(
        "00-worker",
        json!({"config": {"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/bin", "contents": {"source": "data:;base64,AAEC"}}]},
        "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": svc}]}}}),
    )]);
    let b = rendered(&[mc(
        "00-worker",
        json!({"config": {"ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/bin", "contents": {"source": "data:;base64,AAED"}}]},
        "systemd": {"units": [{"name": "a.service", "enabled": false, "contents": svc}]}}}),
    )]);
    let none = |_: &str| None;
    let d = diff(
        Input {
            config: &a,
            provenance: &none,
        },
        Input {
            config: &b,
            provenance: &none,
        },
    )
    .unwrap();
    let unit = d.items.iter().find(|i| i.section == Section::Unit).unwrap();
    assert_eq!(unit.fields, ["enabled"]);
    assert!(unit.unified.is_empty());
    assert_eq!(unit.to.as_ref().unwrap().value, "disabled, with contents");
    let bin = d.items.iter().find(|i| i.name == "/etc/bin").unwrap();
    assert_eq!(bin.fields, ["contents"]);
}
