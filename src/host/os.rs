//! The OS image, kernel type and extensions of a node (mco-facts 1.7, 4.2.j, 4.4): what a
//! config asks for ([`OsState::of`]), the RPM packages behind each extension, the commands
//! an rpm-ostree host runs to get there, and the after-boot check. Pure; the hosts run it.

use crate::model::MachineConfigSpec;
use serde::{Deserialize, Serialize};

/// The packages of each allow-listed extension (MCO `SupportedExtensions`,
/// `pkg/controller/common/helpers.go`). `two-node-ha`'s packages are not in the facts: mco
/// uses the pacemaker stack (unverified against MCO's source).
pub const EXTENSION_PACKAGES: &[(&str, &[&str])] = &[
    ("two-node-ha", &["pacemaker", "pcs", "fence-agents-all"]),
    ("ipsec", &["NetworkManager-libreswan", "libreswan"]),
    ("usbguard", &["usbguard"]),
    ("kerberos", &["krb5-workstation", "libkadm5"]),
    ("kernel-devel", &["kernel-devel", "kernel-headers"]),
    ("sandboxed-containers", &["kata-containers"]),
    ("sysstat", &["sysstat"]),
];

/// The packages of one extension (empty for one outside the allow-list).
pub fn packages_of(extension: &str) -> &'static [&'static str] {
    EXTENSION_PACKAGES
        .iter()
        .find(|(e, _)| *e == extension)
        .map_or(&[], |(_, p)| p)
}

/// What the OS of a node is (booted) or should be (from a config).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OsState {
    /// `osImageURL` (empty: the image the node was installed with).
    #[serde(rename = "osImageURL")]
    pub os_image_url: String,
    /// Canonical kernel type: `default`, `realtime` or `64k-pages`.
    pub kernel_type: String,
    /// Installed extension packages, sorted, without duplicates.
    pub packages: Vec<String>,
}

impl OsState {
    /// The state a config asks for: its osImageURL, canonical kernel type (`""` = `default`)
    /// and the packages of its extensions.
    pub fn of(spec: &MachineConfigSpec) -> OsState {
        let mut packages: Vec<String> = spec
            .extensions
            .iter()
            .flat_map(|e| packages_of(e).iter().map(|p| p.to_string()))
            .collect();
        packages.sort();
        packages.dedup();
        OsState {
            os_image_url: spec.os_image_url.clone(),
            kernel_type: canonical_kernel(&spec.kernel_type),
            packages,
        }
    }

    /// The `rpm-ostree` invocations that move an rpm-ostree host from `self` to `to`, in MCO's
    /// order: rebase (osImageURL changed), kernel switch (non-default kernel), extensions
    /// (`update --install/--uninstall`).
    pub fn rpm_ostree_commands(&self, to: &OsState) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        if !to.os_image_url.is_empty() && to.os_image_url != self.os_image_url {
            out.push(s(&[
                "rebase",
                "--experimental",
                &format!("ostree-unverified-registry:{}", to.os_image_url),
            ]));
        }
        let default = [
            "kernel",
            "kernel-core",
            "kernel-modules",
            "kernel-modules-core",
            "kernel-modules-extra",
        ];
        let target: &[&str] = match to.kernel_type.as_str() {
            "realtime" => &["kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra"],
            "64k-pages" => &[
                "kernel-64k-core",
                "kernel-64k-modules",
                "kernel-64k-modules-core",
                "kernel-64k-modules-extra",
            ],
            _ => &[],
        };
        if !target.is_empty() {
            let mut cmd = s(&["override", "remove"]);
            cmd.extend(s(&default));
            for p in target {
                cmd.push("--install".into());
                cmd.push(p.to_string());
            }
            out.push(cmd);
        }
        let mut ext = vec!["update".to_string()];
        for p in to.packages.iter().filter(|p| !self.packages.contains(p)) {
            ext.extend(["--install".to_string(), p.clone()]);
        }
        for p in self.packages.iter().filter(|p| !to.packages.contains(p)) {
            ext.extend(["--uninstall".to_string(), p.clone()]);
        }
        if ext.len() > 1 {
            out.push(ext);
        }
        out
    }

    /// The after-boot check of `booted` against this expected state. MCO's texts: `expected
    /// target osImageURL X, have Y` (checked when a URL is expected), `extension packages not
    /// installed correctly: [pkg ...]`; mco adds `expected kernel type X, have Y`.
    pub fn check_booted(&self, booted: &OsState) -> Result<(), String> {
        if !self.os_image_url.is_empty() && self.os_image_url != booted.os_image_url {
            return Err(format!(
                "expected target osImageURL {:?}, have {:?}",
                self.os_image_url, booted.os_image_url
            ));
        }
        if self.kernel_type != booted.kernel_type {
            return Err(format!(
                "expected kernel type {}, have {}",
                self.kernel_type, booted.kernel_type
            ));
        }
        let missing: Vec<&str> = self
            .packages
            .iter()
            .filter(|p| !booted.packages.contains(p))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "extension packages not installed correctly: [{}]",
                missing.join(" ")
            ));
        }
        Ok(())
    }
}

/// The booted state of an rpm-ostree host from `rpm-ostree status --json` and the running
/// kernel's release (`/proc/sys/kernel/osrelease`): the booted deployment's
/// `container-image-reference` without its transport (`ostree-unverified-registry:`,
/// `ostree-unverified-image:docker://`, `ostree-image-signed:docker://`, as MCO compares pullspecs),
/// its `requested-packages`, and the kernel type from the release (`rt` -> realtime, `64k` ->
/// 64k-pages). `None` when there is no booted deployment.
pub fn booted_from_rpm_ostree(status: &serde_json::Value, osrelease: &str) -> Option<OsState> {
    let booted = status["deployments"]
        .as_array()?
        .iter()
        .find(|d| d["booted"] == serde_json::Value::Bool(true))?;
    let reference = booted["container-image-reference"].as_str().unwrap_or("");
    let image = [
        "ostree-unverified-registry:",
        "ostree-unverified-image:docker://",
        "ostree-image-signed:docker://",
    ]
    .iter()
    .find_map(|p| reference.strip_prefix(p))
    .unwrap_or(reference);
    let mut packages: Vec<String> = booted["requested-packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    packages.sort();
    packages.dedup();
    let kernel = if osrelease.contains("+64k") || osrelease.contains(".64k") {
        "64k-pages"
    } else if osrelease.contains(".rt") || osrelease.contains("+rt") {
        "realtime"
    } else {
        "default"
    };
    Some(OsState {
        os_image_url: image.to_string(),
        kernel_type: kernel.into(),
        packages,
    })
}

/// `""` and `default` are the same kernel (MCO `CanonicalizeKernelType`).
pub fn canonical_kernel(k: &str) -> String {
    if k.is_empty() {
        "default".into()
    } else {
        k.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str, kernel: &str, ext: &[&str]) -> MachineConfigSpec {
        MachineConfigSpec {
            os_image_url: url.into(),
            kernel_type: kernel.into(),
            extensions: ext.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn booted_state_of_an_rpm_ostree_host() {
        let status = serde_json::json!({"deployments": [
            {"booted": false, "container-image-reference": "ostree-unverified-registry:quay.io/old"},
            {"booted": true, "container-image-reference": "ostree-unverified-registry:quay.io/os@sha256:1",
             "requested-packages": ["usbguard"]}]});
        let b = booted_from_rpm_ostree(&status, "5.14.0-284.rt14.284.el9_2.x86_64").unwrap();
        assert_eq!(b.os_image_url, "quay.io/os@sha256:1");
        assert_eq!(b.kernel_type, "realtime");
        assert_eq!(b.packages, ["usbguard"]);
        let b = booted_from_rpm_ostree(&status, "5.14.0-284.el9.x86_64").unwrap();
        assert_eq!(b.kernel_type, "default");
        assert!(booted_from_rpm_ostree(&serde_json::json!({"deployments": []}), "").is_none());
    }

    #[test]
    fn states_commands_and_checks() {
        let a = OsState::of(&spec("", "", &["usbguard", "usbguard"]));
        assert_eq!(a.kernel_type, "default");
        assert_eq!(a.packages, ["usbguard"]);
        let b = OsState::of(&spec("quay.io/os@sha256:1", "realtime", &["kerberos"]));
        let cmds = a.rpm_ostree_commands(&b);
        assert_eq!(
            cmds[0],
            [
                "rebase",
                "--experimental",
                "ostree-unverified-registry:quay.io/os@sha256:1"
            ]
        );
        assert_eq!(cmds[1][..3], ["override", "remove", "kernel"]);
        assert!(cmds[1].ends_with(&["--install".into(), "kernel-rt-modules-extra".into()]));
        assert_eq!(
            cmds[2],
            [
                "update",
                "--install",
                "krb5-workstation",
                "--install",
                "libkadm5",
                "--uninstall",
                "usbguard"
            ]
        );
        assert!(a.rpm_ostree_commands(&a).is_empty());
        assert_eq!(b.check_booted(&b), Ok(()));
        assert!(b
            .check_booted(&a)
            .unwrap_err()
            .starts_with("expected target osImageURL \"quay.io/os@sha256:1\""));
        let mut rt = b.clone();
        rt.packages.clear();
        assert_eq!(
            b.check_booted(&rt).unwrap_err(),
            "extension packages not installed correctly: [krb5-workstation libkadm5]"
        );
    }
}
