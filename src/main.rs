//! The `mco` binary: parses arguments, initialises logging, dispatches to the library.

use clap::{Parser, Subcommand};
use mco::cli::{self, OutputFormat, DEFAULT_LISTEN};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mco",
    version,
    about = "A Machine Config Operator: declarative OS configuration for fleets of Linux nodes"
)]
struct Args {
    /// Address of the mco server for client commands.
    #[arg(long, global = true, env = "MCO_SERVER")]
    server: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a server and local sandboxed nodes on this machine.
    Up {
        #[arg(long, default_value = "./mco-data")]
        data_dir: PathBuf,
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        #[arg(long, default_value_t = 1)]
        masters: usize,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// API group served and used for node annotations.
        #[arg(long, env = "MCO_GROUP", default_value = mco::model::DEFAULT_GROUP)]
        group: String,
    },
    /// Run the control plane: event log, controllers, REST API.
    Server {
        #[arg(long, default_value = "./mco-data")]
        data_dir: PathBuf,
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        #[arg(long, env = "MCO_GROUP", default_value = mco::model::DEFAULT_GROUP)]
        group: String,
        /// Program run with the node name to evict workloads during a drain.
        #[arg(long)]
        drain_hook: Option<String>,
        /// Largest request body accepted, in bytes (larger ones get 413 RequestEntityTooLarge).
        #[arg(long, default_value_t = mco::api::DEFAULT_MAX_REQUEST_BODY_BYTES)]
        max_request_body_bytes: usize,
    },
    /// Run the node agent for one node.
    Daemon {
        /// Node name.
        #[arg(long)]
        node: String,
        /// Root of the node's filesystem: `/` for a real host, any directory for a sandbox.
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// Node label `key=value` (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
    },
    /// Create or update objects from manifests (files, directories, `-` for stdin).
    Apply {
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
    },
    /// List objects or show one: machineconfigpool|mcp, machineconfig|mc, nodes.
    Get {
        kind: String,
        name: Option<String>,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
    /// Show one object in detail.
    Describe { kind: String, name: String },
    /// Delete one object.
    Delete { kind: String, name: String },
}

fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    // Colours only on a terminal: `mco up` sends daemon logs to files.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime starts");
    match rt.block_on(dispatch(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(args: Args) -> anyhow::Result<ExitCode> {
    let server = cli::server_url(args.server.as_deref());
    match args.command {
        Command::Up {
            data_dir,
            listen,
            masters,
            workers,
            group,
        } => {
            init_tracing("info,tower_http=warn");
            mco::up::run(mco::up::UpConfig {
                data_dir,
                listen,
                masters,
                workers,
                group,
            })
            .await?;
        }
        Command::Server {
            data_dir,
            listen,
            group,
            drain_hook,
            max_request_body_bytes,
        } => {
            init_tracing("info,tower_http=warn");
            let running = mco::server::start(mco::server::ServerConfig {
                data_dir,
                listen,
                group,
                drain_hook,
                max_request_body_bytes,
            })
            .await?;
            println!("mco server listening on {}", running.url());
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            running.stop().await;
        }
        Command::Daemon { node, root, labels } => {
            init_tracing("info");
            let labels: BTreeMap<String, String> = labels
                .iter()
                .map(|l| {
                    l.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .unwrap_or((l.clone(), String::new()))
                })
                .collect();
            let host: std::sync::Arc<dyn mco::host::Host> = if root == std::path::Path::new("/") {
                std::sync::Arc::new(mco::host::RealHost::new())
            } else {
                std::sync::Arc::new(mco::host::SandboxHost::init(&root)?)
            };
            let shutdown = tokio_util::sync::CancellationToken::new();
            let s2 = shutdown.clone();
            tokio::spawn(async move {
                if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                }
                s2.cancel();
            });
            let exit = mco::daemon::run(mco::daemon::DaemonConfig { server, node, labels }, host, shutdown).await?;
            if exit == mco::daemon::Exit::Reboot {
                return Ok(ExitCode::from(mco::daemon::REBOOT_EXIT_CODE as u8));
            }
        }
        Command::Apply { files } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            let (out, ok) = cli::apply(&client, &files).await?;
            print!("{out}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Get { kind, name, output } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::get(&client, &kind, name.as_deref(), output).await?);
        }
        Command::Describe { kind, name } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::describe(&client, &kind, &name).await?);
        }
        Command::Delete { kind, name } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::delete(&client, &kind, &name).await?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
