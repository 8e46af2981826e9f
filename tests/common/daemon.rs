//! A test's own `mco daemon` processes: [`TestDaemon`], supervised by the test instead of a
//! [`Cluster`]'s supervisor so it can restart one, and [`Cluster::spawn_daemon`].

use super::*;

/// One `mco daemon` process supervised by the test itself instead of a [`Cluster`]'s supervisor,
/// so the test can restart it: a reboot (exit status 75) is handled as `mco up` does (empty
/// `<root>/run`, start again), [`TestDaemon::restart`] stops the process (SIGTERM to its own pid)
/// and starts it again without touching `run`, as a crash or a `systemctl restart` would.
pub struct TestDaemon {
    restart: tokio::sync::mpsc::UnboundedSender<()>,
    stop: CancellationToken,
    kill: CancellationToken,
    task: JoinHandle<()>,
}

impl TestDaemon {
    /// Starts the daemon of `node` on `root` against `server`; its stderr goes to
    /// `<logs>/<node>.log`.
    /// `token_file`: the node's token (`--token-file`).
    pub fn start(
        server: String,
        node: mco::up::LocalNode,
        root: PathBuf,
        logs: PathBuf,
        token_file: Option<PathBuf>,
    ) -> TestDaemon {
        TestDaemon::start_with_args(server, node, root, logs, token_file, Vec::new())
    }

    /// [`TestDaemon::start`] with more arguments for `mco daemon` (`--lease-renew-interval`).
    pub fn start_with_args(
        server: String,
        node: mco::up::LocalNode,
        root: PathBuf,
        logs: PathBuf,
        token_file: Option<PathBuf>,
        extra: Vec<String>,
    ) -> TestDaemon {
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&logs).unwrap();
        let (restart, mut restarts) = tokio::sync::mpsc::unbounded_channel::<()>();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let kill = CancellationToken::new();
        let killed = kill.clone();
        let task = tokio::spawn(async move {
            loop {
                let mut cmd = daemon_command(&server, &node, &root, token_file.as_deref(), &logs);
                cmd.args(&extra);
                let mut child = cmd.spawn().expect("mco daemon starts");
                let terminate = |child: &tokio::process::Child| {
                    if let Some(pid) = child.id() {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid as i32),
                            nix::sys::signal::Signal::SIGTERM,
                        );
                    }
                };
                tokio::select! {
                    status = child.wait() => {
                        if status.ok().and_then(|s| s.code()) == Some(mco::daemon::REBOOT_EXIT_CODE) {
                            mco::up::empty_run_dir(&root);
                        }
                    }
                    Some(()) = restarts.recv() => {
                        terminate(&child);
                        let _ = child.wait().await;
                    }
                    _ = stopped.cancelled() => {
                        terminate(&child);
                        let _ = child.wait().await;
                        return;
                    }
                    _ = killed.cancelled() => {
                        let _ = child.kill().await;
                        return;
                    }
                }
            }
        });
        TestDaemon {
            restart,
            stop,
            kill,
            task,
        }
    }

    /// SIGKILLs the process, as a power-off (nothing of its shutdown runs), and waits for it.
    pub async fn kill(self) {
        self.kill.cancel();
        let _ = self.task.await;
    }

    /// Stops the running process and starts a new one (the node does not reboot: `run` stays).
    pub fn restart(&self) {
        self.restart.send(()).expect("the daemon's supervisor runs");
    }

    /// Stops the daemon and waits for its process to exit.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

impl Cluster {
    /// A [`TestDaemon`] for `node` on its root under this cluster's data dir.
    pub fn spawn_daemon(&self, node: &mco::up::LocalNode) -> TestDaemon {
        // The node's own token when the cluster issued one ([`Cluster::node_token_file`]),
        // else the admin's (a test's extra node).
        let own = self.data_dir.join("tokens").join(format!("{}.token", node.name));
        let token_file = if own.exists() {
            own
        } else {
            self.data_dir.join(mco::credentials::ADMIN_TOKEN_FILE)
        };
        TestDaemon::start(
            self.server.url(),
            node.clone(),
            self.root(&node.name),
            self.data_dir.join("logs"),
            Some(token_file),
        )
    }
}

/// `mco daemon` for `node` against `server` on the sandbox `root`, as `mco up` starts it
/// (`--reboot-seconds 0`, the node's labels, its token file when given), stderr appended to
/// `<logs>/<node>.log`, killed when dropped.
pub fn daemon_command(
    server: &str,
    node: &mco::up::LocalNode,
    root: &Path,
    token_file: Option<&Path>,
    logs: &Path,
) -> tokio::process::Command {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("{}.log", node.name)))
        .unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mco"));
    cmd.args([
        "daemon",
        "--server",
        server,
        "--node",
        &node.name,
        "--reboot-seconds",
        "0",
    ])
    .arg("--root")
    .arg(root)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(log)
    .kill_on_drop(true);
    if let Some(t) = token_file {
        cmd.arg("--token-file").arg(t);
    }
    for (k, v) in &node.labels {
        cmd.arg("--label").arg(format!("{k}={v}"));
    }
    cmd
}
