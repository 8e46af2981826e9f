//! The `mco` binary: parses the command line ([`mco::cli::args`]), sets the process-wide
//! policies (failpoints, SIGPIPE, the daemon's allocator limit), starts the runtime and hands
//! over to [`mco::cli::run::run`].

use clap::Parser as _;
use mco::cli::args::{Args, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    // A usage error exits 1, as kubectl's (cobra's) do, not clap's 2; help and version exit 0.
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    #[cfg(feature = "failpoints")]
    let _failpoints = failpoints();
    if !matches!(
        args.command,
        Command::Up { .. } | Command::Server { .. } | Command::Daemon { .. } | Command::Sim { .. }
    ) {
        // As kubectl (a Go program dies of SIGPIPE on a closed stdout): `mco get mc -o json |
        // head -1` ends quietly instead of reporting EPIPE. Rust starts with SIGPIPE ignored;
        // the long-running commands keep it ignored (their sockets and pipes report errors; the
        // simulator must live to remove its child server's data dir).
        // SAFETY: called before any thread starts; SIG_DFL is a valid disposition.
        unsafe {
            let _ = nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl);
        }
    }
    if matches!(args.command, Command::Daemon { .. }) {
        mco::daemon::limit_allocator();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    match rt.block_on(mco::cli::run::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", mco::cli::error_line(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// With the `failpoints` feature and `FAILPOINTS=name=action;...` in the environment, the `fail`
/// crate's failpoints are configured from it (tests/crash_server.rs, tests/crash_daemon.rs),
/// once per process (a `FailScenario` holds a global lock while it lives), and a panic, which is what
/// a failpoint's `panic` action does, aborts the process at once, as a crash at that step would.
#[cfg(feature = "failpoints")]
fn failpoints() -> Option<fail::FailScenario<'static>> {
    std::env::var_os("FAILPOINTS")?;
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    Some(fail::FailScenario::setup())
}
