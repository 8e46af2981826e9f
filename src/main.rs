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
        /// Snapshot the state every N events: bounds start-up and time-travel reads.
        #[arg(long, default_value_t = mco::store::SNAPSHOT_EVERY)]
        snapshot_interval: u64,
        /// Also serve the Machine Config Server alone on this address (MCO: 22623/22624).
        #[arg(long)]
        mcs_listen: Option<SocketAddr>,
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
        /// A manifest file, a directory of them, or `-` for stdin (repeatable).
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Why: recorded in the event log with every change this makes.
        #[arg(long)]
        reason: Option<String>,
        /// Change nothing: show what it would do (rendered configs, node changes, drains,
        /// reboots, rollout waves).
        #[arg(long)]
        dry_run: bool,
    },
    /// List objects or show one: machineconfigpool|mcp, machineconfig|mc, nodes.
    Get {
        /// machineconfigpool|mcp, machineconfig|mc, node.
        kind: String,
        /// One object's name (default: every object of the kind).
        name: Option<String>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
        /// Read the objects as they were at an RFC 3339 time or `rv:N` (time travel).
        #[arg(long)]
        at: Option<String>,
    },
    /// Show one object in detail.
    Describe {
        /// machineconfigpool|mcp, machineconfig|mc, node.
        kind: String,
        /// The object's name.
        name: String,
        /// Show the object as it was at an RFC 3339 time or `rv:N` (time travel).
        #[arg(long)]
        at: Option<String>,
    },
    /// Delete one object.
    Delete {
        /// machineconfigpool|mcp, machineconfig|mc, node.
        kind: String,
        /// The object's name.
        name: String,
        /// Why: recorded in the event log.
        #[arg(long)]
        reason: Option<String>,
        /// Change nothing: show what deleting it would do.
        #[arg(long)]
        dry_run: bool,
    },
    /// Restore a pool's source MachineConfigs to what they were when a prior render was
    /// produced; the pool then renders that exact config again and rolls it out.
    Rollback {
        /// `mcp` (machineconfigpool).
        kind: String,
        /// The pool.
        pool: String,
        /// The rendered config to return to.
        #[arg(long, conflicts_with = "at", required_unless_present = "at")]
        to: Option<String>,
        /// Return to the render the pool targeted at this RFC 3339 time or `rv:N`.
        #[arg(long)]
        at: Option<String>,
        #[command(flatten)]
        flags: RollbackFlags,
    },
    /// Rollout operations.
    #[command(subcommand)]
    Rollout(RolloutCommand),
    /// The event log's size and retention.
    #[command(subcommand)]
    Store(StoreCommand),
    /// What changed between two rendered configs, each item attributed: `mco diff RENDERED_A
    /// RENDERED_B`, `mco diff mcp POOL --from P [--to P]`, `mco diff node NODE --from P [--to P]`.
    Diff {
        /// A rendered config, or `mcp` / `node`.
        a: String,
        /// A rendered config, or the pool's / node's name.
        b: String,
        /// With mcp/node: the earlier point, an RFC 3339 time or `rv:N`.
        #[arg(long)]
        from: Option<String>,
        /// With mcp/node: the later point (default: now).
        #[arg(long)]
        to: Option<String>,
        /// Output format (json and yaml give the structured diff).
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
    /// The audit history from the event log: `RV TIME ACTOR EVENT OBJECT SUMMARY`.
    History {
        /// Only events about this kind (machineconfigpool|mcp, machineconfig|mc, node).
        kind: Option<String>,
        /// Only events about the object of this name.
        name: Option<String>,
        /// Only events at or after this point: an RFC 3339 time or `rv:N`.
        #[arg(long)]
        since: Option<String>,
        /// Only events at or before this point: an RFC 3339 time or `rv:N`.
        #[arg(long)]
        until: Option<String>,
        /// Only events caused by this actor (`cli`, `kubectl`, `daemon:worker-0`, `controller:render`).
        #[arg(long)]
        actor: Option<String>,
        /// Only events of this type (`MachineConfigUpdated`, `NodeStateChanged`, ...).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// Show at most the newest N events.
        #[arg(long)]
        limit: Option<usize>,
        /// Output format: wide adds the client's reason.
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<OutputFormat>,
    },
}

#[derive(Subcommand)]
enum RolloutCommand {
    /// Back to the render the pool targeted before its current one (`mco rollback --to` it).
    Undo {
        /// `mcp` (machineconfigpool).
        kind: String,
        /// The pool.
        pool: String,
        #[command(flatten)]
        flags: RollbackFlags,
    },
}

/// What `rollback` and `rollout undo` share.
#[derive(clap::Args)]
struct RollbackFlags {
    /// Show the plan and its impact; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Why: recorded in the event log (default: "rollback of pool P to R").
    #[arg(long)]
    reason: Option<String>,
    /// Proceed even when other pools' rendered configs change too.
    #[arg(long)]
    force: bool,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Events, snapshots, bytes on disk, oldest readable resourceVersion, events per kind.
    Stats,
    /// Remove the history before a point; reads before it then answer 410 Expired.
    Compact {
        /// `rv:N` or an RFC 3339 time.
        #[arg(long)]
        before: String,
    },
}

/// `mco rollback` and `mco rollout undo`.
async fn rollback(
    server: &str,
    kind: &str,
    pool: &str,
    target: cli::rollback::Target,
    flags: RollbackFlags,
) -> anyhow::Result<String> {
    init_tracing("warn");
    let client = cli::connect(server).await?.with_reason(flags.reason);
    let options = cli::rollback::Options {
        dry_run: flags.dry_run,
        force: flags.force,
    };
    cli::rollback::rollback(&client, kind, pool, target, options).await
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
            snapshot_interval,
            mcs_listen,
        } => {
            init_tracing("info,tower_http=warn");
            let running = mco::server::start(mco::server::ServerConfig {
                data_dir,
                listen,
                group,
                drain_hook,
                max_request_body_bytes,
                snapshot_every: snapshot_interval,
                mcs_listen,
            })
            .await?;
            println!("mco server listening on {}", running.url());
            if let Some(a) = running.mcs_addr {
                println!("Machine Config Server listening on http://{a}");
            }
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
        Command::Apply { files, reason, dry_run } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?.with_reason(reason);
            let (out, ok) = if dry_run {
                cli::apply_dry_run(&client, &files).await?
            } else {
                cli::apply(&client, &files).await?
            };
            print!("{out}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Get { kind, name, output, at } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!(
                "{}",
                cli::get(&client, &kind, name.as_deref(), output, at.as_deref()).await?
            );
        }
        Command::Describe { kind, name, at } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::describe(&client, &kind, &name, at.as_deref()).await?);
        }
        Command::Delete {
            kind,
            name,
            reason,
            dry_run,
        } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?.with_reason(reason);
            let run = if dry_run { cli::Run::DryRun } else { cli::Run::Write };
            print!("{}", cli::delete(&client, &kind, &name, run).await?);
        }
        Command::Rollback {
            kind,
            pool,
            to,
            at,
            flags,
        } => {
            let target = match (to, at) {
                (Some(r), _) => cli::rollback::Target::Render(r),
                (None, Some(at)) => cli::rollback::Target::At(at),
                (None, None) => anyhow::bail!("give --to RENDERED or --at TIME|rv:N"),
            };
            print!("{}", rollback(&server, &kind, &pool, target, flags).await?);
        }
        Command::Rollout(RolloutCommand::Undo { kind, pool, flags }) => {
            let target = cli::rollback::Target::Previous;
            print!("{}", rollback(&server, &kind, &pool, target, flags).await?);
        }
        Command::Store(StoreCommand::Stats) => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::store::stats(&client).await?);
        }
        Command::Store(StoreCommand::Compact { before }) => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            print!("{}", cli::store::compact(&client, &before).await?);
        }
        Command::Diff { a, b, from, to, output } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            let (text, differs) = cli::diff::diff(&client, &a, &b, from.as_deref(), to.as_deref(), output).await?;
            print!("{text}");
            if differs {
                return Ok(ExitCode::from(1));
            }
        }
        Command::History {
            kind,
            name,
            since,
            until,
            actor,
            event_type,
            limit,
            output,
        } => {
            init_tracing("warn");
            let client = cli::connect(&server).await?;
            let args = cli::history::HistoryArgs {
                kind,
                name,
                since,
                until,
                actor,
                event_type,
                limit,
                output,
            };
            print!("{}", cli::history::history(&client, &args).await?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
