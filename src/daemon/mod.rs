//! The node agent (MCO's machine-config-daemon): applies rendered configs to one node.
//!
//! Owns the daemon's policy: what to write ([`apply`]), how to check the node
//! ([`validate`]), drift watching ([`drift`]) and the update state machine speaking to the server
//! ([`agent`]). It acts on the node only through [`crate::host::Host`] and on the cluster only
//! through the public REST API ([`crate::client::Client`]); it must not touch the store.
//!
//! Run it with [`run`]; a supervisor restarts it after [`Exit::Reboot`] (see [`agent`]).

pub mod actions;
pub mod agent;
pub mod apply;
pub mod drift;
pub mod report;
pub mod validate;

pub use agent::{run, DaemonConfig, Exit, REBOOT_EXIT_CODE};

#[cfg(test)]
pub(crate) mod test_support {
    use crate::host::SandboxHost;
    use crate::model::{MachineConfig, ObjectMeta};

    /// A fresh sandbox node (kept alive by the returned directory).
    pub fn sandbox() -> (tempfile::TempDir, SandboxHost) {
        let dir = tempfile::tempdir().unwrap();
        let host = SandboxHost::init(dir.path()).unwrap();
        (dir, host)
    }

    /// A MachineConfig named `name` with Ignition config `config`.
    pub fn mc(name: &str, config: serde_json::Value) -> MachineConfig {
        MachineConfig {
            api_version: "machineconfiguration.openshift.io/v1".into(),
            kind: "MachineConfig".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: crate::model::MachineConfigSpec {
                config: Some(config),
                ..Default::default()
            },
        }
    }
}
