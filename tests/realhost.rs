//! mco on real systemd hosts: Debian bookworm containers booted by `systemd-nspawn -b`
//! (tests/common/nspawn.rs: systemd as PID 1, the real `systemctl`, real reboots with a new boot
//! id) joined to a real TLS server on the test's loopback exactly as README "Running as services"
//! joins a node: `mco server init`, `mco token create --kind node`, the binary, the unit,
//! `/etc/mco/daemon.env`, the CA and the token installed, `systemctl enable --now mco-daemon`.
//! Each test drives one node through the server: first join, a file change and its reboot, a
//! power-off that makes its Node NotReady (its lease unrenewed past the grace period), a
//! unit and a dropin through the real systemctl, a template instance, a mask and presets, drift
//! on the real root (put back, and the force file), the original file back when its
//! MachineConfig is deleted, rebootless changes (the daemon killed and restarted by systemd, an
//! SSH key for a real `core` user, a disruption policy's service restart), every example of
//! `examples/` written as rendered (files, modes, unit states), kernel arguments through a
//! BootLoaderSpec entry and on a host without a boot setup, and repeated
//! update-and-reboot rounds (`MCO_REALHOST_ROUNDS`, default 5) that must boot exactly once per
//! update and never report a reboot as failed.
//!
//! Runs where the machine allows it (root, `systemd-nspawn`, `debootstrap` or a cached root file
//! system); otherwise each test says why it skipped, and under `CI=true` fails instead.

mod common;

use common::nspawn::{self, Host};
use common::*;
use mco::model::NodeAnnotations;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Deadlines: generous, for a loaded 2-core machine (a reboot takes about 1 s when idle).
const BOOT: Duration = Duration::from_secs(90);
const ROLLOUT: Duration = Duration::from_secs(90);

/// The server's node-monitor grace period for these hosts and their daemons' lease renewal
/// interval: short, so a powered-off host goes NotReady within the test, long enough that a
/// reboot on a loaded machine (a few seconds) does not.
const GRACE: Duration = Duration::from_secs(10);
const RENEW: &str = "1s";
/// How long past the grace period a NotReady may take (a controller pass, a flush).
const NOT_READY_MARGIN: Duration = Duration::from_secs(20);

/// The role label the node registers with (and its token records).
const WORKER: &str = "node-role.kubernetes.io/worker=";

/// A real host joined as a worker to a server of its own. The host is declared first so that it
/// is dropped (its container killed) before the server stops.
struct RealNode {
    host: Host,
    c: Cluster,
    name: String,
    data: tempfile::TempDir,
}

/// The mco binary installed on the hosts: this build's, or `MCO_REALHOST_MCO` (a copy taken
/// when builds of other trees share the target directory and replace this one's).
fn mco_binary() -> PathBuf {
    std::env::var_os("MCO_REALHOST_MCO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_mco")))
}

/// Runs `mco args` (the binary of [`mco_binary`]) with `env`, deadline 60 s: stdout, or a panic
/// naming the command and its stderr.
async fn mco(args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = tokio::process::Command::new(mco_binary());
    cmd.args(args).stdin(std::process::Stdio::null()).kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("mco {args:?} did not finish within 60 s"))
        .unwrap();
    assert!(
        o.status.success(),
        "mco {args:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

impl RealNode {
    /// A booted real host `name` joined to a new server, Done on its pool's rendered config;
    /// `None` when this machine cannot boot real hosts (`test` says why, or fails under CI).
    /// The steps are README "Running as services", in its order.
    async fn join(test: &str, name: &str) -> Option<RealNode> {
        if !nspawn::available(test) {
            return None;
        }
        let started = Instant::now();
        let host = {
            let name = name.to_string();
            // May build the cached root file system first (about a minute, once per machine).
            tokio::task::spawn_blocking(move || Host::create(&name)).await.unwrap()
        };
        let data = tempfile::tempdir().unwrap();
        let d = data.path().join("mco-data");
        let dir = d.to_str().unwrap();
        // 1. The control plane: the CA and serving certificate, then the server (TLS).
        mco(&["server", "init", "--data-dir", dir], &[]).await;
        let c = Cluster::start_tls_in_with_grace(d.clone(), GRACE).await;
        let ca = d.join("pki/ca.crt");
        // 2. The node's token, issued by the admin with its role.
        let url = c.server.url();
        let admin = d.join(mco::credentials::ADMIN_TOKEN_FILE);
        let token = mco(
            &["token", "create", "--kind", "node", "--node", name, "--label", WORKER],
            &[
                ("MCO_SERVER", Path::new(&url)),
                ("MCO_TOKEN_FILE", &admin),
                ("MCO_CA_FILE", &ca),
            ],
        )
        .await;
        let mut node = RealNode {
            host,
            c,
            name: name.into(),
            data,
        };
        let h = &mut node.host;
        // 3. On the node: the binary, the unit, the CA, daemon.env and the token (0600).
        std::fs::copy(mco_binary(), h.path("/usr/local/bin/mco")).unwrap();
        let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/systemd/mco-daemon.service");
        h.write(
            "/etc/systemd/system/mco-daemon.service",
            &std::fs::read(unit).unwrap(),
            0o644,
        );
        h.write("/etc/mco/ca.crt", &std::fs::read(&ca).unwrap(), 0o644);
        let env =
            format!("MCO_SERVER={url}\nMCO_CA_FILE=/etc/mco/ca.crt\nMCO_NODE={name}\nMCO_LABELS=--label={WORKER}\nMCO_LEASE_RENEW_INTERVAL={RENEW}\n");
        h.write("/etc/mco/daemon.env", env.as_bytes(), 0o644);
        h.write("/etc/mco/node.token", token.as_bytes(), 0o600);
        h.boot();
        h.wait_booted(BOOT).await;
        // 4. `systemctl daemon-reload && systemctl enable --now mco-daemon`.
        for args in [
            &["systemctl", "daemon-reload"][..],
            &["systemctl", "enable", "--now", "mco-daemon.service"],
        ] {
            let (ok, _, err) = h.exec(args).await;
            assert!(ok, "{args:?} on {name}: {err}");
        }
        // The daemon registers the Node; the pool's rendered config becomes its desiredConfig.
        node.c
            .wait_node_done(name, ROLLOUT, |n| !node_boot_id(n).is_empty())
            .await;
        node.assert_reported_boot().await;
        eprintln!(
            "{test}: {name} joined and Done in {:.1?} ({} boots)",
            started.elapsed(),
            node.host.boots()
        );
        Some(node)
    }

    /// The status of the Node's Ready condition (`True`, `False`, `Unknown`).
    fn ready_status(&self) -> String {
        node_ready(&self.c.server.hub.state().nodes[&self.name]).0
    }

    /// The boot id the Node reports is the host's own (`/proc/sys/kernel/random/boot_id`).
    async fn assert_reported_boot(&self) -> String {
        let reported = self.c.boot_id(&self.name);
        self.host.wait_booted(BOOT).await;
        assert_eq!(reported, self.host.boot_id().await, "{}: bootID of the Node", self.name);
        reported
    }

    fn annotations(&self) -> NodeAnnotations {
        self.c.annotations(&self.name)
    }

    /// Applies `yaml` (a manifest written to a file, as `mco apply -f` reads it).
    async fn apply(&self, file: &str, yaml: &str) {
        let p: PathBuf = self.data.path().join(file);
        std::fs::write(&p, yaml).unwrap();
        self.c.apply(&[p]).await;
    }

    /// Waits until the worker pool targets a config other than `old`, the node is Done on it
    /// and reports a boot id other than `boot` (it rebooted for it); panics if the node is
    /// seen Degraded meanwhile (a reboot reported as failed). The new config's name.
    async fn wait_rebooted_into(&self, old: &str, boot: &str) -> String {
        self.wait_done_past(old, Boot::Other(boot)).await
    }

    /// [`RealNode::wait_rebooted_into`] for an update applied without a reboot: the node
    /// reports the same boot id `boot` throughout (panics on a reboot).
    async fn wait_updated_in_place(&self, old: &str, boot: &str) -> String {
        self.wait_done_past(old, Boot::Same(boot)).await
    }

    async fn wait_done_past(&self, old: &str, boot: Boot<'_>) -> String {
        let keys = self.c.keys();
        let wrong = RefCell::new(None);
        self.c
            .wait_for(&format!("{} Done past {old}, {boot:?}", self.name), ROLLOUT, |s| {
                let Some(n) = s.nodes.get(&self.name) else { return false };
                let a = NodeAnnotations::read(n, &keys);
                let booted = node_boot_id(n);
                if a.state == "Degraded" {
                    wrong
                        .borrow_mut()
                        .get_or_insert(format!("went Degraded: {:?}", a.reason));
                    return true; // stop waiting: reported below
                }
                if let Boot::Same(b) = boot {
                    if booted != b {
                        wrong.borrow_mut().get_or_insert(format!("rebooted (boot id {booted})"));
                        return true;
                    }
                }
                let target = s.pools.get("worker").map(|p| p.spec.configuration.name.clone());
                target.as_deref().is_some_and(|t| t != old && a.desired_config == t)
                    && a.state == "Done"
                    && a.current_config == a.desired_config
                    && match boot {
                        Boot::Other(b) => booted != b && !booted.is_empty(),
                        Boot::Same(_) => true,
                    }
            })
            .await;
        if let Some(what) = wrong.into_inner() {
            panic!("{} {what} during an update past {old} ({boot:?})", self.name);
        }
        self.annotations().current_config
    }

    /// Waits (deadline 60 s) until `f` holds for the node's annotations and boot id.
    async fn wait_node(&self, what: &str, f: impl Fn(&NodeAnnotations, &str) -> bool) {
        let keys = self.c.keys();
        self.c
            .wait_for(&format!("{}: {what}", self.name), Duration::from_secs(60), |s| {
                s.nodes
                    .get(&self.name)
                    .is_some_and(|n| f(&NodeAnnotations::read(n, &keys), &node_boot_id(n)))
            })
            .await;
    }

    /// The value of `property` of `unit` (`systemctl show -p PROPERTY --value UNIT`).
    async fn unit_property(&self, unit: &str, property: &str) -> String {
        let (ok, out, err) = self
            .host
            .exec(&["systemctl", "show", "-p", property, "--value", unit])
            .await;
        assert!(ok, "{unit} {property}: {err}");
        out.trim().to_string()
    }
}

/// What an update does to the boot: a reboot (a boot id other than this one) or none.
#[derive(Clone, Copy, Debug)]
enum Boot<'a> {
    Other(&'a str),
    Same(&'a str),
}

/// A MachineConfig for the workers writing `path` with `content` (mode 0644).
fn file_mc(name: &str, path: &str, content: &str) -> String {
    let data = percent_encoding::utf8_percent_encode(content, percent_encoding::NON_ALPHANUMERIC);
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: {name}
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: {path}
          mode: 420
          overwrite: true
          contents:
            source: \"data:,{data}\"
"
    )
}

/// First boot: the host joins and reports Done with its real boot id; a file change is written
/// on the real root, the host really reboots (nspawn booted it again, a new boot id) and the
/// config is confirmed after the boot; powered off, the host stays down and its Node goes
/// NotReady, counted unavailable in its pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_host_joins_and_reboots_for_a_file_change() {
    let Some(node) = RealNode::join("a_real_host_joins_and_reboots_for_a_file_change", "rh-join").await else {
        return;
    };
    let (old, boot, boots) = (
        node.annotations().current_config,
        node.c.boot_id(&node.name),
        node.host.boots(),
    );
    node.c.apply(&[examples().join("chrony.yaml")]).await;
    let new = node.wait_rebooted_into(&old, &boot).await;
    assert_eq!(
        node.host.boots(),
        boots + 1,
        "one boot for one update: {:?}",
        node.host.exits()
    );
    assert_eq!(node.host.exits().last(), Some(&Some(133)), "a reboot, not a power-off");
    let now = node.assert_reported_boot().await;
    assert_ne!(now, boot);
    let chrony = std::fs::read_to_string(node.host.path("/etc/chrony.conf")).unwrap();
    assert!(chrony.contains("server ntp1.example.net iburst"), "{chrony}");
    assert_eq!(mode_of(&node.host.path("/etc/chrony.conf")), 0o644);
    // Confirmed after the boot: the daemon on the new boot records the config as current.
    let a = node.annotations();
    assert_eq!((a.current_config.as_str(), a.state.as_str()), (new.as_str(), "Done"));
    // Powered off, the host stays down (nspawn exits 0 and is not booted again), and its Node
    // goes NotReady once its lease is older than the grace period, as the node lifecycle
    // controller of Kubernetes marks it (Ready Unknown, NodeStatusUnknown).
    assert_eq!(node.ready_status(), "True");
    assert_eq!(node.host.power_off(BOOT).await, Some(0));
    assert_eq!(node.host.boots(), boots + 1);
    let off = Instant::now();
    node.c
        .wait_for(
            &format!("{} NotReady after its power-off", node.name),
            GRACE + NOT_READY_MARGIN,
            |s| s.nodes.get(&node.name).is_some_and(|n| node_ready(n).0 == "Unknown"),
        )
        .await;
    let (status, reason) = node_ready(&node.c.server.hub.state().nodes[&node.name]);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "NodeStatusUnknown"));
    eprintln!(
        "{}: NotReady {:.1?} after the power-off (grace {GRACE:?})",
        node.name,
        off.elapsed()
    );
    // The pool controller's next pass counts it unavailable (MCO's getUnavailableMachines).
    node.c
        .wait_for(
            "the NotReady node counted unavailable in its pool",
            NOT_READY_MARGIN,
            |s| s.pools["worker"].status.unavailable_machine_count == 1,
        )
        .await;
}

/// A unit and a dropin (examples/unit-with-dropin.yaml) are written, enabled through the real
/// systemctl, and run by the real systemd at the next boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_and_its_dropin_are_enabled_through_the_real_systemctl() {
    let test = "a_unit_and_its_dropin_are_enabled_through_the_real_systemctl";
    let Some(node) = RealNode::join(test, "rh-unit").await else {
        return;
    };
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&[examples().join("unit-with-dropin.yaml")]).await;
    node.wait_rebooted_into(&old, &boot).await;
    node.host.wait_booted(BOOT).await;
    let unit = "textfile-collector.service";
    let (_, enabled, _) = node.host.exec(&["systemctl", "is-enabled", unit]).await;
    assert_eq!(enabled.trim(), "enabled");
    let (ok, show, err) = node
        .host
        .exec(&["systemctl", "show", "-p", "DropInPaths,Environment,Result", unit])
        .await;
    assert!(ok, "{err}");
    assert!(
        show.contains(&format!("/etc/systemd/system/{unit}.d/10-environment.conf")),
        "{show}"
    );
    assert!(show.contains("TEXTFILE_DIR=/var/lib/node-exporter/textfile"), "{show}");
    assert!(show.contains("Result=success"), "{show}");
    // It ran at this boot (a oneshot wanted by multi-user.target, finished before boot ended).
    let prom = std::fs::read_to_string(node.host.path("/var/lib/node-exporter/textfile/boot.prom")).unwrap();
    assert!(prom.starts_with("node_boot_time_seconds "), "{prom}");
}

/// Drift on the real root: a managed file changed behind the daemon's back is flagged, the node
/// Degraded with a reason naming the path; put back, the node is Done again without a reboot;
/// drifted again, the force file (`/run/machine-config-daemon-force`) makes the daemon rewrite
/// it and reboot, Done after the boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_on_the_real_root_is_flagged() {
    let Some(node) = RealNode::join("drift_on_the_real_root_is_flagged", "rh-drift").await else {
        return;
    };
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.apply("drift.yaml", &file_mc("99-worker-drift", "/etc/mco-drift", "managed\n"))
        .await;
    node.wait_rebooted_into(&old, &boot).await;
    let file = node.host.path("/etc/mco-drift");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "managed\n");
    let want = r#"content mismatch for file "/etc/mco-drift""#;
    let boot = node.c.boot_id(&node.name);
    std::fs::write(&file, "changed by hand\n").unwrap();
    let degraded = |a: &NodeAnnotations, _: &str| a.state == "Degraded" && a.reason == want;
    node.wait_node("Degraded by the drift", degraded).await;
    std::fs::write(&file, "managed\n").unwrap();
    node.wait_node("Done once the file is put back, no reboot", |a, b| {
        a.state == "Done" && b == boot
    })
    .await;
    std::fs::write(&file, "changed again\n").unwrap();
    node.wait_node("Degraded by the second drift", degraded).await;
    let (ok, _, err) = node.host.exec(&["touch", "/run/machine-config-daemon-force"]).await;
    assert!(ok, "{err}");
    node.wait_node("Done after the force file's rewrite and reboot", |a, b| {
        a.state == "Done" && b != boot && !b.is_empty()
    })
    .await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "managed\n");
    assert_eq!(node.c.boot_id(&node.name), node.assert_reported_boot().await);
}

/// Repeated update-and-reboot rounds (`MCO_REALHOST_ROUNDS`, default 5): each update boots the
/// host exactly once (no second boot after a reboot falsely reported failed), the node is never
/// seen Degraded, and each round's file is on the real root after its boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_and_reboot_rounds_boot_once_per_update() {
    let test = "update_and_reboot_rounds_boot_once_per_update";
    let rounds: usize = std::env::var("MCO_REALHOST_ROUNDS")
        .ok()
        .map(|r| r.parse().expect("MCO_REALHOST_ROUNDS is a number"))
        .unwrap_or(5);
    let Some(node) = RealNode::join(test, "rh-rounds").await else {
        return;
    };
    let first = node.host.boots();
    let started = Instant::now();
    let mut times = Vec::new();
    for round in 1..=rounds {
        let t = Instant::now();
        let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
        let content = format!("round {round}\n");
        node.apply("round.yaml", &file_mc("99-worker-round", "/etc/mco-round", &content))
            .await;
        node.wait_rebooted_into(&old, &boot).await;
        assert_eq!(
            std::fs::read_to_string(node.host.path("/etc/mco-round")).unwrap(),
            content
        );
        assert_eq!(
            node.host.boots(),
            first + round,
            "round {round}: one boot per update; nspawn exits {:?}",
            node.host.exits()
        );
        times.push(t.elapsed().as_secs_f64());
    }
    let exits = node.host.exits();
    assert!(
        exits.iter().all(|e| *e == Some(133)),
        "every nspawn exit a reboot: {exits:?}"
    );
    let journal = node.host.journal("mco-daemon.service", 100_000);
    let failed = journal.lines().filter(|l| l.contains("failed to reboot")).count();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    eprintln!(
        "{test}: {rounds} updates, {} boots after the join, {failed} reboot failures logged, {:.1?} in all; per round median {:.2} s, max {:.2} s",
        node.host.boots() - first,
        started.elapsed(),
        times.get(times.len() / 2).copied().unwrap_or_default(),
        times.last().copied().unwrap_or_default()
    );
    assert_eq!(failed, 0, "no reboot reported failed:\n{journal}");
}

/// Deleting a MachineConfig restores the file it replaced: the host's own `/etc/motd` is saved
/// before examples/gzip-motd.yaml replaces it, and put back, byte for byte, when that
/// MachineConfig is deleted (MCO's `.mcdorig` backups), each through a real reboot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_machineconfig_restores_the_original_file() {
    let test = "deleting_a_machineconfig_restores_the_original_file";
    let Some(node) = RealNode::join(test, "rh-orig").await else {
        return;
    };
    let motd = node.host.path("/etc/motd");
    let original = std::fs::read(&motd).unwrap();
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&[examples().join("gzip-motd.yaml")]).await;
    let with = node.wait_rebooted_into(&old, &boot).await;
    assert_ne!(
        std::fs::read(&motd).unwrap(),
        original,
        "gzip-motd.yaml wrote /etc/motd"
    );
    let boot = node.c.boot_id(&node.name);
    node.c
        .client
        .delete(mco::model::Kind::MachineConfig, "99-worker-motd")
        .await
        .unwrap();
    node.wait_rebooted_into(&with, &boot).await;
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&motd).unwrap()),
        String::from_utf8_lossy(&original),
        "the host's own /etc/motd is back"
    );
}

/// Changes a real host takes without a reboot, the boot id the same throughout: the daemon
/// killed (SIGKILL) is started again by systemd (`Restart=always`) and carries on; an SSH key
/// for a real `core` user (MCO: sshkey policy None); a file whose disruption policy restarts a
/// service, restarted by the real systemctl (a new InvocationID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebootless_changes_on_a_real_host() {
    let Some(node) = RealNode::join("rebootless_changes_on_a_real_host", "rh-live").await else {
        return;
    };
    let daemon = "mco-daemon.service";
    // Restart=always: the killed daemon is started again (RestartSec=2s).
    let pid = node.unit_property(daemon, "MainPID").await;
    // The main process only: `systemctl kill` also signals the unit's cgroup, which fails with
    // EIO in a container on this host's hybrid cgroup hierarchy while another container runs.
    let (ok, _, err) = node.host.exec(&["sh", "-c", &format!("kill -KILL {pid}")]).await;
    assert!(ok, "kill {pid}: {err}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (restarts, state) = (
            node.unit_property(daemon, "NRestarts").await,
            node.unit_property(daemon, "ActiveState").await,
        );
        if restarts != "0" && state == "active" && node.unit_property(daemon, "MainPID").await != pid {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{daemon} not restarted: NRestarts={restarts} {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await; // poll interval of a deadline wait
    }
    // An SSH key for a real user, written by the restarted daemon.
    let (ok, _, err) = node.host.exec(&["useradd", "-m", "core"]).await;
    assert!(ok, "useradd core: {err}");
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&[examples().join("ssh-key.yaml")]).await;
    let ssh = node.wait_updated_in_place(&old, &boot).await;
    let keys = node.host.path("/home/core/.ssh/authorized_keys.d/ignition");
    let text = std::fs::read_to_string(&keys).unwrap();
    assert!(text.contains("ops@example.net"), "{text}");
    let (_, uid, _) = node.host.exec(&["id", "-u", "core"]).await;
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&keys).unwrap().uid().to_string(),
        uid.trim(),
        "owned by core"
    );
    assert_eq!(mode_of(&keys), 0o600);
    // A service of our own and its config file (a new unit: a reboot).
    let probe = |conf: &str| {
        format!(
            "{}    systemd:
      units:
        - name: mco-probe.service
          enabled: true
          contents: |
            [Unit]
            Description=restarted when /etc/mco-probe.conf changes
            [Service]
            ExecStart=/usr/bin/sleep infinity
            [Install]
            WantedBy=multi-user.target
",
            file_mc("99-worker-probe", "/etc/mco-probe.conf", conf)
        )
    };
    node.apply("probe.yaml", &probe("v1\n")).await;
    let v1 = node.wait_rebooted_into(&ssh, &boot).await;
    node.host.wait_booted(BOOT).await;
    assert_eq!(node.unit_property("mco-probe.service", "ActiveState").await, "active");
    // The policy: a change of the file restarts the service, no drain, no reboot.
    node.apply(
        "policy.yaml",
        "apiVersion: operator.openshift.io/v1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
      - path: /etc/mco-probe.conf
        actions:
          - type: Restart
            restart:
              serviceName: mco-probe.service
",
    )
    .await;
    node.c
        .wait_for("the operator merged the policy into the status", ROLLOUT, |s| {
            s.machine_configurations
                .get("cluster")
                .and_then(|m| m.status.node_disruption_policy_status.as_ref())
                .is_some_and(|p| p.cluster_policies.files.iter().any(|f| f.path == "/etc/mco-probe.conf"))
        })
        .await;
    let (boot, invocation) = (
        node.c.boot_id(&node.name),
        node.unit_property("mco-probe.service", "InvocationID").await,
    );
    node.apply("probe.yaml", &probe("v2\n")).await;
    node.wait_updated_in_place(&v1, &boot).await;
    assert_eq!(
        std::fs::read_to_string(node.host.path("/etc/mco-probe.conf")).unwrap(),
        "v2\n"
    );
    assert_eq!(node.unit_property("mco-probe.service", "ActiveState").await, "active");
    assert_ne!(
        node.unit_property("mco-probe.service", "InvocationID").await,
        invocation,
        "mco-probe.service restarted by the policy"
    );
}

/// Units the real systemctl enables other than plainly: a template's instance enabled (and
/// running after the reboot), a masked unit, and two units without `enabled` preset by the
/// host's own preset policy (Debian's enables what it does not name; a preset file the same
/// MachineConfig writes disables the other); deleting the MachineConfig undoes each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_masks_and_presets_through_the_real_systemctl() {
    let test = "instances_masks_and_presets_through_the_real_systemctl";
    let Some(node) = RealNode::join(test, "rh-units").await else {
        return;
    };
    let service = "          contents: |
            [Unit]
            Description=a unit of the real-host test
            [Service]
            ExecStart=/usr/bin/sleep infinity
            [Install]
            WantedBy=multi-user.target
";
    let yaml = format!(
        "{}    systemd:
      units:
        - name: mco-echo@.service
{service}        - name: mco-echo@alpha.service
          enabled: true
        - name: mco-masked.service
          mask: true
        - name: mco-preset-on.service
{service}        - name: mco-preset-off.service
{service}",
        file_mc(
            "99-worker-units",
            "/etc/systemd/system-preset/10-mco.preset",
            "disable mco-preset-off.service\n"
        )
    );
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.apply("units.yaml", &yaml).await;
    let with = node.wait_rebooted_into(&old, &boot).await;
    node.host.wait_booted(BOOT).await;
    let enabled = |unit: &'static str| {
        let host = &node.host;
        async move { host.exec(&["systemctl", "is-enabled", unit]).await.1.trim().to_string() }
    };
    assert_eq!(enabled("mco-echo@alpha.service").await, "enabled");
    assert_eq!(
        node.unit_property("mco-echo@alpha.service", "ActiveState").await,
        "active"
    );
    assert_eq!(enabled("mco-masked.service").await, "masked");
    assert_eq!(enabled("mco-preset-on.service").await, "enabled");
    assert_eq!(enabled("mco-preset-off.service").await, "disabled");
    // Deleted: the instance's link, the mask and the preset file are gone.
    let boot = node.c.boot_id(&node.name);
    node.c
        .client
        .delete(mco::model::Kind::MachineConfig, "99-worker-units")
        .await
        .unwrap();
    node.wait_rebooted_into(&with, &boot).await;
    node.host.wait_booted(BOOT).await;
    for unit in ["mco-echo@alpha.service", "mco-masked.service", "mco-preset-on.service"] {
        assert!(
            !node.host.path(&format!("/etc/systemd/system/{unit}")).exists(),
            "{unit}"
        );
        assert_ne!(enabled(unit).await, "enabled", "{unit}");
        assert_ne!(enabled(unit).await, "masked", "{unit}");
    }
    let wants = node.host.path("/etc/systemd/system/multi-user.target.wants");
    for unit in ["mco-echo@alpha.service", "mco-preset-on.service"] {
        assert!(!wants.join(unit).exists(), "{unit} still wanted");
    }
    assert!(!node.host.path("/etc/systemd/system-preset/10-mco.preset").exists());
}

/// Every example in `examples/` applied at once on a real host (one render, one reboot) is
/// written there as rendered: each file with its bytes and mode on the real root, each unit
/// enabled or masked as its config says, through the real `systemctl`. Left out:
/// `kernel-args.yaml`, whose check after the boot fails in a container by design (the kernel
/// and its command line are the host's; the kernel-argument backends' file edits are tested in
/// `host::boot`), and `policy/` (a RolloutPolicy, no node files).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_is_written_on_a_real_host() {
    let Some(node) = RealNode::join("every_example_is_written_on_a_real_host", "rh-examples").await else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(examples())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kernel-args.yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 15, "the examples: {files:?}");
    // ssh-key.yaml's keys go to the `core` user's home, which a plain host does not have.
    let (ok, _, err) = node.host.exec(&["useradd", "-m", "core"]).await;
    assert!(ok, "useradd core: {err}");
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&files).await;
    let new = node.wait_rebooted_into(&old, &boot).await;
    let mut checked = 0;
    for (path, (bytes, mode)) in rendered_files(&node.c, &new) {
        let real = node.host.path(&path);
        let on_disk = std::fs::read(&real).unwrap_or_else(|e| panic!("{path} of {new} on the real host: {e}"));
        assert!(on_disk == bytes, "{path}: the bytes of {new}");
        assert_eq!(mode_of(&real), mode, "{path}: mode of {new}");
        checked += 1;
    }
    let mc = node.c.server.hub.state().machine_configs[&new].as_ref().clone();
    let units = mco::daemon::apply::ignition_config(&mc).unwrap().systemd.units;
    for u in &units {
        let want = match (u.mask, u.enabled) {
            (Some(true), _) => "masked",
            (_, Some(true)) => "enabled",
            (_, Some(false)) => "disabled",
            _ => continue,
        };
        let (_, out, _) = node.host.exec(&["systemctl", "is-enabled", &u.name]).await;
        assert_eq!(out.trim(), want, "{}: systemctl is-enabled on the real host", u.name);
        // An enabled unit started at the boot and did not fail there.
        let (_, state, _) = node.host.exec(&["systemctl", "is-failed", &u.name]).await;
        assert_ne!(state.trim(), "failed", "{} failed at the boot on the real host", u.name);
        checked += 1;
    }
    eprintln!(
        "{} examples: {checked} files and unit states of {new} as rendered",
        files.len()
    );
    assert!(checked > 10, "{checked} paths checked");
}

/// Kernel arguments on a real host through BootLoaderSpec entries (no grubby): the daemon, as
/// root under systemd, appends them to the `options` line of the machine's entry and reboots;
/// after the boot its check finds them missing from `/proc/cmdline` and the node goes Degraded
/// with MCO's message (by design here: a container's kernel and command line are the host's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_arguments_go_into_the_boot_loader_spec_entry_of_a_real_host() {
    let test = "kernel_arguments_go_into_the_boot_loader_spec_entry_of_a_real_host";
    let Some(node) = RealNode::join(test, "rh-bls").await else {
        return;
    };
    let id = std::fs::read_to_string(node.host.path("/etc/machine-id")).unwrap();
    let entry = format!("/boot/loader/entries/{}-6.1.0-28-amd64.conf", id.trim());
    let before = "title Debian GNU/Linux 12\nversion 6.1.0-28-amd64\nlinux /vmlinuz-6.1.0-28-amd64\noptions root=/dev/vda1 ro quiet\n";
    node.host.write(&entry, before.as_bytes(), 0o644);
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&[examples().join("kernel-args.yaml")]).await;
    node.wait_node("Degraded after the reboot for the kernel arguments", |a, booted| {
        booted != boot && a.state == "Degraded"
    })
    .await;
    let a = node.annotations();
    assert_ne!(a.desired_config, old);
    assert!(
        a.reason
            .contains("missing expected kernel arguments: [audit=1 audit_backlog_limit=8192]"),
        "{:?}",
        a.reason
    );
    let after = std::fs::read_to_string(node.host.path(&entry)).unwrap();
    assert_eq!(
        after,
        before.replace("quiet\n", "quiet audit=1 audit_backlog_limit=8192\n"),
        "the entry's options line"
    );
}

/// Kernel arguments on a real host with no boot setup mco can use (a plain Debian container:
/// no rpm-ostree, grubby, BootLoaderSpec entries, /etc/default/grub or /etc/kernel/cmdline):
/// the node goes Degraded at once with a reason that names what is missing and the way out,
/// without a reboot and without a file of the update left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_arguments_on_a_real_host_without_a_boot_setup_degrade_with_the_way_out() {
    let test = "kernel_arguments_on_a_real_host_without_a_boot_setup_degrade_with_the_way_out";
    let Some(node) = RealNode::join(test, "rh-noboot").await else {
        return;
    };
    let (old, boot) = (node.annotations().current_config, node.c.boot_id(&node.name));
    node.c.apply(&[examples().join("kernel-args.yaml")]).await;
    node.wait_node("Degraded on the kernel arguments", |a, _| a.state == "Degraded")
        .await;
    let a = node.annotations();
    assert!(
        a.reason
            .contains("no boot loader configuration to set kernel arguments in"),
        "{:?}",
        a.reason
    );
    assert!(
        a.reason.contains("/etc/default/grub"),
        "names what is missing: {:?}",
        a.reason
    );
    assert!(a.reason.contains("Install grubby"), "says the way out: {:?}", a.reason);
    assert_eq!(a.current_config, old, "rolled back, not moved");
    assert_eq!(node.c.boot_id(&node.name), boot, "no reboot");
    assert_eq!(node.host.boots(), 1);
}
