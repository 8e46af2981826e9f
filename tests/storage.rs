//! Storage faults for real: the server's data dir on a small tmpfs (root only: each test says it
//! skipped, and why, otherwise) that is filled up while the server runs. With the space reserve
//! (the default) writes are refused with a clear 500 before the store meets the full disk,
//! `/readyz` says not ready (`/readyz/store` says why), and once space is freed both recover without a restart.
//! Without a reserve the store meets ENOSPC itself: a clear 500 naming the store error and
//! `/readyz` not ready, and since sled 0.34 latches its first I/O error a restart takes writes
//! again, with every acknowledged one kept.

use mco::model::Kind;
use mco::server::{self, ServerConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        if !nix::unistd::Uid::effective().is_root() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }
    fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the filesystem of `dir` with `filler` until a write fails for lack of space.
fn fill(filler: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(filler).unwrap();
    let chunk = vec![0xa5u8; 64 * 1024];
    loop {
        if let Err(e) = f.write_all(&chunk).and_then(|_| f.sync_all()) {
            assert_eq!(e.raw_os_error(), Some(nix::libc::ENOSPC), "{e}");
            return;
        }
    }
}

/// Waits (at most 30 s) until the worker pool has rendered MachineConfig `name` in and its
/// status has caught up with that render.
async fn settle_render(s: &server::RunningServer, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut changes = s.hub.changes();
    loop {
        let done = s.hub.state().pools.get("worker").is_some_and(|p| {
            p.spec.configuration.source.iter().any(|r| r.name == name)
                && p.status.configuration.name == p.spec.configuration.name
        });
        if done {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker pool never rendered {name}"
        );
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), changes.changed()).await;
    }
}

fn mc(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {"ignition": {"version": "3.4.0"},
                 "storage": {"files": [{"path": format!("/etc/{name}"), "contents": {"source": format!("data:,{}", "x".repeat(2048))}}]}}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_space_reserve_writes_are_refused_and_resume_when_space_is_freed() {
    let Some(fs) = Tmpfs::mount("16m") else {
        eprintln!(
            "SKIPPED under_the_space_reserve_writes_are_refused_and_resume_when_space_is_freed: mounting a tmpfs needs root"
        );
        return;
    };
    let data = fs.path().join("data");
    let reserve = 4 * 1024 * 1024;
    let s = server::start(ServerConfig {
        data_dir: data.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        store_reserve_bytes: reserve,
        ..Default::default()
    })
    .await
    .expect("server starts");
    let client = s.admin_client("test");
    let http = reqwest::Client::new();
    client
        .create(Kind::MachineConfig, &mc("99-before"), None)
        .await
        .unwrap();
    // The controllers' writes that follow (the worker pool's new render and its status) land
    // first: the reserve judges a write before it starts, so a disk filled to the last byte
    // while one is in flight is the other test's case (the store meets the full disk).
    settle_render(&s, "99-before").await;
    let filler = fs.path().join("filler");
    fill(&filler);
    let e = client
        .create(Kind::MachineConfig, &mc("99-full"), None)
        .await
        .unwrap_err();
    let mco::client::ClientError::Status(st) = &e else {
        panic!("not a Status: {e}");
    };
    eprintln!("under the reserve: {} {}: {}", st.code, st.reason, st.message);
    assert_eq!((st.code, st.reason.as_str()), (500, "InternalError"), "{st:?}");
    assert!(
        st.message.contains(&format!(
            "under the reserve of {reserve} bytes: writes are refused until space is freed"
        )),
        "{st:?}"
    );
    let ready = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
    assert_eq!(ready.status(), 500);
    let why = ready.text().await.unwrap();
    // The public endpoint withholds the reason (kube-apiserver's healthz); the check's own
    // path gives it to an authenticated caller.
    assert_eq!(why, "[-]store failed: reason withheld\nreadyz check failed\n");
    let check = s
        .admin_http()
        .get(format!("{}/readyz/store", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(check.status(), 500);
    let why = check.text().await.unwrap();
    assert!(
        why.starts_with("internal server error: the event log's filesystem"),
        "{why}"
    );
    assert_eq!(
        http.get(format!("{}/readyz/store", s.url()))
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "the reason is not public"
    );
    assert_eq!(
        http.get(format!("{}/healthz", s.url())).send().await.unwrap().status(),
        200
    );
    // Space is freed: ready again and writes work, without a restart.
    std::fs::remove_file(&filler).unwrap();
    let ready = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
    client.create(Kind::MachineConfig, &mc("99-full"), None).await.unwrap();
    client
        .get::<serde_json::Value>(Kind::MachineConfig, "99-before")
        .await
        .unwrap();
    s.stop().await;
    drop(fs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_writes_clearly_and_a_restart_resumes_them() {
    let Some(fs) = Tmpfs::mount("16m") else {
        eprintln!("SKIPPED a_full_disk_fails_writes_clearly_and_a_restart_resumes_them: mounting a tmpfs needs root");
        return;
    };
    let data = fs.path().join("data");
    let s = server::start(ServerConfig {
        data_dir: data.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        // No reserve: the store itself meets the full disk.
        store_reserve_bytes: 0,
        ..Default::default()
    })
    .await
    .expect("server starts");
    let client = s.admin_client("test");
    let http = reqwest::Client::new();
    client
        .create(Kind::MachineConfig, &mc("99-before"), None)
        .await
        .unwrap();
    assert_eq!(
        http.get(format!("{}/readyz", s.url())).send().await.unwrap().status(),
        200
    );

    let filler = fs.path().join("filler");
    fill(&filler);
    // Writes fail with a 500 naming the store error (sled may absorb the first few in its
    // buffers; within a bounded number of writes one must fail).
    let mut failure = None;
    for i in 0..200 {
        match client
            .create(Kind::MachineConfig, &mc(&format!("99-full-{i}")), None)
            .await
        {
            Ok(_) => continue,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let e = failure.expect("a write fails on a full disk");
    let mco::client::ClientError::Status(st) = &e else {
        panic!("not a Status: {e}");
    };
    eprintln!("full disk: {} {}: {}", st.code, st.reason, st.message);
    assert_eq!(st.code, 500, "{st:?}");
    assert!(st.message.contains("No space left on device"), "{st:?}");
    let ready = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
    assert_eq!(ready.status(), 500);
    assert_eq!(
        ready.text().await.unwrap(),
        "[-]store failed: reason withheld\nreadyz check failed\n"
    );
    let check = s
        .admin_http()
        .get(format!("{}/readyz/store", s.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(check.status(), 500);
    let why = check.text().await.unwrap();
    assert!(why.contains("No space left on device"), "{why}");
    eprintln!("readyz: {why}");
    // /healthz (liveness) stays ok: the process is alive and will recover.
    assert_eq!(
        http.get(format!("{}/healthz", s.url())).send().await.unwrap().status(),
        200
    );

    // Space returns. sled 0.34 latches its first I/O error (every later operation of that
    // `Db` returns it), so the server stays not-ready and refuses writes (never hangs, never
    // says ok) until it is restarted: a stop releases the data dir at once, and the restarted
    // server has every acknowledged write and takes new ones.
    std::fs::remove_file(&filler).unwrap();
    let e = client
        .create(Kind::MachineConfig, &mc("99-latched"), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("No space left on device"), "{e}");
    let stopped = tokio::time::Instant::now();
    s.stop().await;
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        stopped.elapsed()
    );
    let s = server::start(ServerConfig {
        data_dir: data.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        store_reserve_bytes: 0,
        ..Default::default()
    })
    .await
    .expect("the server restarts on the same data dir");
    let client = s.admin_client("test");
    client
        .get::<serde_json::Value>(Kind::MachineConfig, "99-before")
        .await
        .expect("the acknowledged write survived");
    client.create(Kind::MachineConfig, &mc("99-after"), None).await.unwrap();
    let ready = http.get(format!("{}/readyz", s.url())).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    s.stop().await;
    drop(fs);
}
