//! The child `mco server` a run starts (killed and its data dir removed on drop) and the
//! `/proc` sampling of a process's CPU and memory.

use super::{files_needed, SimConfig};
use anyhow::Context;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A child `mco server` and what to read about it.
///
/// Dropping it, on any path out of the run (success, a failed node, a timeout, Ctrl-C),
/// kills the server and removes the data dir the simulator made: a 10,000-node run leaves
/// nearly a gigabyte there.
pub(super) struct Child {
    pub(super) proc: tokio::process::Child,
    pub(super) pid: u32,
    /// A data dir the simulator made (removed at the end).
    pub(super) made: Option<PathBuf>,
}

impl Drop for Child {
    fn drop(&mut self) {
        let Some(dir) = self.made.take() else { return };
        // SIGKILL, then wait (bounded) until the process no longer runs, so that no write of
        // its lands in the directory after it is removed.
        let _ = self.proc.start_kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while process_running(self.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Whether `pid` exists and is not a zombie (`/proc/<pid>/stat`'s state field).
pub(super) fn process_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

pub(super) async fn start_child(cfg: &SimConfig) -> anyhow::Result<(Child, String, String)> {
    use tokio::io::AsyncBufReadExt;
    let (dir, made) = match &cfg.data_dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = std::env::temp_dir().join(format!("mco-sim-{}", uuid::Uuid::now_v7()));
            (d.clone(), Some(d))
        }
    };
    let bin = match &cfg.server_bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?,
    };
    let mut command = tokio::process::Command::new(&bin);
    command
        .arg("server")
        .arg("--data-dir")
        .arg(&dir)
        .arg("--listen")
        .arg("127.0.0.1:0")
        // Every simulated daemon holds its watch open on its own connection, as real nodes
        // do: a server for N nodes needs N connections and room for the requests beside them
        // (the default cap, 1,024, is for fleets up to about a thousand nodes).
        .arg("--max-connections")
        .arg(
            files_needed(cfg.nodes)
                .max(crate::api::listen::DEFAULT_MAX_CONNECTIONS as u64)
                .to_string(),
        )
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    // Tied to this process: a simulator killed outright (SIGKILL) takes its server with it.
    let proc = crate::process::spawn_tied(command, nix::sys::signal::Signal::SIGTERM)
        .await
        .with_context(|| format!("starting {} server", bin.display()))?;
    let pid = proc.id().context("child server pid")?;
    let mut child = Child { proc, pid, made };
    let stdout = child.proc.stdout.take().context("child stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("the child server did not say where it listens within 60 s")??
            .context("the child server exited before listening")?;
        if let Some(u) = line.strip_prefix("mco server listening on ") {
            break u.trim().to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let token = std::fs::read_to_string(dir.join(crate::credentials::ADMIN_TOKEN_FILE))
        .context("reading the child server's admin.token")?
        .trim()
        .to_string();
    Ok((child, url, token))
}

/// user+sys CPU seconds of `pid` (`/proc/<pid>/stat` fields 14, 15).
pub(super) fn cpu_secs(pid: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // After ")": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    (ticks(11) + ticks(12)) / hz
}

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
pub(super) fn rss(pid: u32) -> (Option<u64>, Option<u64>) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, None);
    };
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
