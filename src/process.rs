//! Child processes that live exactly as long as mco does.
//!
//! Owns the spawning of every long-lived child (node daemons under `mco up`, the drain hook).
//! Such children are asked to die with their parent through `PR_SET_PDEATHSIG`, so that a
//! `kill -9` of `mco up` leaves no daemon acting on a node root. But Linux sends that signal
//! when the *thread* that forked the child exits, not the process (`prctl(2)`): tokio's blocking
//! threads retire after 10 s idle, and `block_in_place` turns a worker into one, so a child
//! forked from a runtime thread could be killed at random long before mco stops. Every child is
//! therefore forked from one dedicated thread that never exits: its death signal then comes
//! exactly when mco itself dies, however it dies.
//!
//! It must not decide what to run or supervise restarts (see [`crate::up`]).

use nix::sys::signal::Signal;
use std::io;
use std::sync::mpsc;
use std::sync::OnceLock;
use tokio::process::{Child, Command};
use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// One spawn request for the spawner thread.
struct Request {
    command: Command,
    /// The runtime of the caller: the child is registered with it (reaping, `wait`).
    runtime: Handle,
    reply: oneshot::Sender<io::Result<Child>>,
}

/// The sender to the spawner thread; the static keeps it, so the thread never ends.
static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();

fn spawner() -> &'static mpsc::Sender<Request> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("mco-child-spawner".into())
            .spawn(move || {
                for mut req in rx {
                    let _runtime = req.runtime.enter();
                    let _ = req.reply.send(req.command.spawn());
                }
            })
            .expect("the child spawner thread starts");
        tx
    })
}

/// Spawns `command` so that the kernel sends it `signal` when this process dies (and only
/// then), whatever thread the caller runs on. The child is registered with the caller's tokio
/// runtime: await [`Child::wait`] as usual.
///
/// If this process is already gone when the child starts (the fork raced with our death), the
/// child does not run its program.
///
/// Errors: the program cannot be started (`ENOENT`, permissions), or the death signal cannot be
/// set. Must be called from within a tokio runtime.
pub async fn spawn_tied(mut command: Command, signal: Signal) -> io::Result<Child> {
    let parent = nix::unistd::getpid();
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe and touch no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(io::Error::other("the parent exited before the child started"));
            }
            Ok(())
        });
    }
    let (reply, answer) = oneshot::channel();
    let gone = || io::Error::other("the child spawner thread is gone");
    spawner()
        .send(Request {
            command,
            runtime: Handle::current(),
            reply,
        })
        .map_err(|_| gone())?;
    answer.await.map_err(|_| gone())?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::time::Duration;

    fn sleeper() -> Command {
        let mut c = Command::new("sleep");
        c.arg("30").kill_on_drop(true);
        c
    }

    /// Why this module exists, and that it works: a child whose death signal was set on a
    /// short-lived thread dies when that thread exits; one spawned through [`spawn_tied`] from
    /// the same kind of thread lives on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn children_outlive_the_thread_that_asked_for_them() {
        let rt = Handle::current();
        // The kernel's rule: PDEATHSIG follows the forking thread.
        let mut direct = std::thread::spawn({
            let rt = rt.clone();
            move || {
                let _g = rt.enter();
                let mut c = sleeper();
                // SAFETY: as in spawn_tied.
                unsafe {
                    c.pre_exec(|| nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(io::Error::from));
                }
                c.spawn().unwrap()
            }
        })
        .join()
        .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), direct.wait())
            .await
            .expect("the child of an exited thread is signalled")
            .unwrap();
        assert_eq!(status.signal(), Some(Signal::SIGTERM as i32));

        // Through the spawner: the asking thread exits, the child stays.
        let mut tied = std::thread::spawn(move || rt.block_on(spawn_tied(sleeper(), Signal::SIGTERM)).unwrap())
            .join()
            .unwrap();
        let early = tokio::time::timeout(Duration::from_secs(1), tied.wait()).await;
        assert!(
            early.is_err(),
            "the tied child died with the thread that asked: {early:?}"
        );
        tied.kill().await.unwrap();
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error() {
        let err = spawn_tied(Command::new("/nonexistent/mco-test-program"), Signal::SIGTERM)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
