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
pub mod kubelet_health;
pub mod lease;
pub mod managed;
mod mcn;
pub mod node_api;
pub mod paths;
pub mod phase;
pub mod reboot;
pub mod report;
pub mod resources;
mod respond;
pub mod validate;

pub use agent::{run, DaemonConfig, Exit, REBOOT_EXIT_CODE};

/// Keeps the daemon's heap in one malloc arena. glibc gives each thread that allocates its own
/// arena (up to 8 per core), and each keeps the memory freed in it: the daemon's few threads
/// (runtime workers, blocking file I/O, the inotify loop) would each hold a parse's worth.
/// One arena costs nothing measurable in a process this quiet (DESIGN.md section 8: ≤ 15 MiB
/// resident with 1,000 managed files). Call before the daemon starts any thread; a no-op off
/// glibc.
pub fn limit_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Returns the heap pages freed since the last call to the kernel (glibc's `malloc_trim`,
/// which also releases free pages inside the heap). Called when a config has been applied or
/// found on disk and its drift monitor watches it: the transient buffers of fetching, parsing
/// and writing a large config are gone by then, and glibc would otherwise keep them resident.
/// A no-op off glibc.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

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
