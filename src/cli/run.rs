//! The dispatch of the command line: one arm per verb of [`super::args::Command`], each calling
//! its verb module (`get`, `describe`, `rollout`, ...) or starting a process (`up`, `server`,
//! `daemon`, `sim`), plus the process-level helpers those arms share (logging, signals).

use super::args::*;
use crate::cli;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `mco rollback` and `mco rollout undo`.
async fn rollback(
    server: &str,
    kind: &str,
    pool: &str,
    target: cli::rollback::Target,
    flags: RollbackFlags,
) -> anyhow::Result<String> {
    let client = cli::connect(server).await?.with_reason(flags.reason);
    let options = cli::rollback::Options {
        dry_run: flags.dry_run,
        force: flags.force,
    };
    cli::rollback::rollback(&client, kind, pool, target, options).await
}

/// `mco label` and `mco annotate`.
async fn label(
    conn: &Conn,
    field: cli::label::Field,
    args: Vec<String>,
    overwrite: bool,
    selectors: SelectorArgs,
    all: bool,
) -> anyhow::Result<ExitCode> {
    let client = cli::connect(&conn.url()).await?;
    let args = cli::label::LabelArgs {
        args,
        overwrite,
        selectors: selectors.selectors(),
        all,
    };
    let (out, errs, ok) = cli::label::run(&client, field, &args).await?;
    print!("{out}");
    eprint!("{errs}");
    Ok(exit(ok))
}

/// Logs to stderr: `RUST_LOG` or `default` decides what; `format` how (JSON lines carry the
/// current spans' fields: node, pool, rendered config).
fn init_tracing(default: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(true).init(),
        // Colours only on a terminal: `mco up` sends daemon logs to files.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

/// Writes one line to stdout, ignoring a closed stdout, for the commands that keep SIGPIPE
/// ignored: a supervisor that read what it needed of the server's start-up lines (the listening
/// line) and closed the pipe, or `mco sim | head`, must not end in `println!`'s panic on EPIPE.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `KIND NAME` or `KIND/NAME` → (kind, name).
fn kind_and_name(kind: String, name: Option<String>, what: &str) -> anyhow::Result<(String, String)> {
    match (kind.split_once('/'), name) {
        (Some((k, n)), None) => Ok((k.to_string(), n.to_string())),
        (None, Some(n)) => Ok((kind, n)),
        (Some(_), Some(_)) => anyhow::bail!("give either KIND NAME or KIND/NAME, not both"),
        (None, None) => anyhow::bail!("give the {what}'s name: KIND NAME or KIND/NAME"),
    }
}

/// SIGTERM and SIGINT handlers. Installed before the work starts, so that a signal arriving
/// while the server is still starting (after its first log line) stops it cleanly instead of
/// killing the process with the default action.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> StopSignals {
        use tokio::signal::unix::{signal, SignalKind};
        StopSignals {
            term: signal(SignalKind::terminate()).expect("SIGTERM handler installs"),
            int: signal(SignalKind::interrupt()).expect("SIGINT handler installs"),
        }
    }

    /// Waits for the first SIGTERM or SIGINT.
    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Runs one command line: each verb's work, its output on stdout and its exit code. Errors are
/// the caller's to print ([`crate::cli::error_line`]).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.server.is_some()
        && matches!(
            args.command,
            Command::Up { .. } | Command::Server { .. } | Command::Completion { .. }
        )
    {
        anyhow::bail!("--server is an option of the client commands: `mco up` and `mco server` listen with --listen");
    }
    let _ = GLOBAL_SERVER.set(args.server.clone());
    let global_token = args.token.clone();
    if !matches!(args.command, Command::Daemon { .. }) {
        let _ = cli::credentials::TOKEN_FLAG.set(global_token.clone().map(|t| (t, "the token of --token".to_string())));
    }
    // `mco up` and `mco server` are no clients: the CA they use is the one of their own data dir,
    // so a client's `MCO_CA_FILE` (perhaps a leftover naming another data dir's CA, not written
    // yet) is not read for them, and `mco up` hands its daemons every credential by flag with
    // the client variables removed from their environment ([`crate::up::CLIENT_ENV`]).
    if !matches!(args.command, Command::Up { .. } | Command::Server { .. }) {
        cli::set_trust(cli::resolve_trust(args.certificate_authority.as_deref())?);
    }
    if !matches!(
        args.command,
        Command::Up { .. } | Command::Server { .. } | Command::Daemon { .. }
    ) {
        init_tracing("warn", LogFormat::Text);
    }
    match args.command {
        Command::Up {
            serve,
            masters,
            workers,
            reboot_seconds,
            no_tls,
        } => {
            init_tracing("info,tower_http=warn", serve.log_format);
            crate::up::run(crate::up::UpConfig {
                data_dir: serve.data_dir.clone(),
                listen: serve.listen,
                masters,
                workers,
                group: serve.group.clone(),
                reboot_seconds,
                log_json: serve.log_format == LogFormat::Json,
                tls: !no_tls,
                tls_sans: serve.tls_sans.clone(),
                allow_insecure_listen: serve.allow_insecure_listen,
                connections: serve.connections(),
                limits: serve.limits.limits(),
            })
            .await?;
        }
        Command::Server {
            action: Some(ServerAction::Init { data_dir, tls_sans }),
            ..
        } => {
            let pki = crate::tls::Pki::in_data_dir(&data_dir);
            let r = crate::tls::ensure_pki(&pki, &tls_sans)?;
            let said = |new: bool| if new { "generated" } else { "kept" };
            println!("CA {}: {}", said(r.new_ca), pki.ca_cert().display());
            println!(
                "serving certificate {}: {} (for {})",
                said(r.new_serving),
                pki.server_cert().display(),
                r.sans.join(", ")
            );
            println!(
                "`mco server --data-dir {}` now serves TLS; clients trust {} (--certificate-authority or MCO_CA_FILE)",
                data_dir.display(),
                pki.ca_cert().display()
            );
        }
        Command::Server {
            action: None,
            serve,
            tls_cert,
            tls_key,
            drain_hook,
            max_request_body_bytes,
            snapshot_interval,
            mcs_listen,
            store_reserve_bytes,
            cluster_dns,
            cluster_domain,
        } => {
            init_tracing("info,tower_http=warn", serve.log_format);
            let signals = StopSignals::install();
            let serve_json = serve.log_format == LogFormat::Json;
            let pki = crate::tls::Pki::in_data_dir(&serve.data_dir);
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(crate::tls::TlsFiles { cert, key }),
                _ => pki.has_serving().then(|| pki.serving()),
            };
            let connections = serve.connections();
            let running = crate::up::start_server(crate::server::ServerConfig {
                data_dir: serve.data_dir,
                listen: serve.listen,
                tls,
                connections,
                store_reserve_bytes,
                allow_insecure_listen: serve.allow_insecure_listen,
                group: serve.group,
                drain_hook,
                max_request_body_bytes,
                limits: serve.limits.limits(),
                snapshot_every: snapshot_interval,
                mcs_listen,
                templates: crate::generate::templates::TemplateSettings {
                    cluster_dns_ip: cluster_dns,
                    cluster_domain,
                },
                ..Default::default()
            })
            .await?;
            if serve_json {
                // The json layer's line shape (timestamp, level, fields.message, target), on
                // stdout where the text line goes, so a supervisor parsing JSON sees JSON only.
                announce(format_args!(
                    "{}",
                    serde_json::json!({
                        "timestamp": jiff::Timestamp::now().to_string(),
                        "level": "INFO",
                        "fields": {"message": "mco server listening", "url": running.url()},
                        "target": "mco",
                    })
                ));
            } else {
                announce(format_args!("mco server listening on {}", running.url()));
            }
            if let Some(u) = running.mcs_url() {
                announce(format_args!("Machine Config Server listening on {u}"));
            }
            if running.admin_token().is_some() {
                // The kubeconfig trusts the generated CA when the server serves the generated PKI.
                let ca_file = (running.url().starts_with("https://") && pki.has_serving()).then(|| pki.ca_cert());
                let kubeconfig = crate::up::write_kubeconfig(&running, &running.data_dir, ca_file.as_deref())?;
                announce(format_args!(
                    "admin token in {}, kubeconfig in {} (both 0600)",
                    running.data_dir.join(crate::credentials::ADMIN_TOKEN_FILE).display(),
                    kubeconfig.display()
                ));
            }
            signals.wait().await;
            running.stop().await;
        }
        Command::Daemon {
            conn,
            node,
            root,
            labels,
            reboot_seconds,
            supervise,
            log_format,
            token_file,
        } => {
            init_tracing("info", log_format);
            // The daemon's write-path failpoints (tests/crash_daemon.rs) are configured from
            // FAILPOINTS once, for every command, by `failpoints()` in `main`: a second
            // `FailScenario` would wait forever for the first one's lock.
            let token = match &token_file {
                Some(f) => Some((
                    crate::credentials::read_secret_file(f).ok_or_else(|| {
                        anyhow::anyhow!(
                            "--token-file {}: no token in it (missing, unreadable or empty)",
                            f.display()
                        )
                    })?,
                    format!("the token in --token-file/$MCO_TOKEN_FILE ({})", f.display()),
                )),
                None => None,
            };
            let _ = cli::credentials::TOKEN_FLAG
                .set(token.or(global_token.map(|t| (t, "the token of --token".to_string()))));
            // --token-file, else what every client command reads (MCO_TOKEN, kubeconfig, ...),
            // in the one order of `cli::credentials`.
            let creds = cli::credentials::for_server(&conn.url(), cli::explicit_trust());
            let token = creds.token.clone();
            cli::check_daemon_server(&conn.url()).await?;
            let labels: BTreeMap<String, String> = labels
                .iter()
                .map(|l| {
                    l.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .unwrap_or((l.clone(), String::new()))
                })
                .collect();
            let shutdown = tokio_util::sync::CancellationToken::new();
            let s2 = shutdown.clone();
            let signals = StopSignals::install();
            tokio::spawn(async move {
                signals.wait().await;
                s2.cancel();
            });
            if supervise {
                anyhow::ensure!(
                    root != std::path::Path::new("/"),
                    "--supervise is for sandbox roots; on a real host run the daemon under systemd (config/systemd/mco-daemon.service)"
                );
                let process = crate::up::DaemonProcess {
                    exe: std::env::current_exe()?,
                    url: conn.url(),
                    node: crate::up::LocalNode { name: node, labels },
                    root,
                    log_dir: None,
                    reboot_seconds,
                    log_json: log_format == LogFormat::Json,
                    token_file,
                    ca_file: cli::trust().map(|t| PathBuf::from(t.source)),
                };
                crate::up::supervise(process, shutdown).await;
                return Ok(ExitCode::SUCCESS);
            }
            let host: std::sync::Arc<dyn crate::host::Host> = if root == std::path::Path::new("/") {
                std::sync::Arc::new(crate::host::RealHost::new())
            } else {
                std::sync::Arc::new(crate::host::SandboxHost::open(&root)?)
            };
            let config = crate::daemon::DaemonConfig {
                server: conn.url(),
                node,
                labels,
                token,
                trust: creds.trust.clone(),
            };
            let exit = crate::daemon::run(config, host, shutdown.clone()).await?;
            if exit == crate::daemon::Exit::Reboot {
                // The machine is down while it reboots: nothing runs for the reboot's length.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(reboot_seconds)) => {}
                    _ = shutdown.cancelled() => {}
                }
                return Ok(ExitCode::from(crate::daemon::REBOOT_EXIT_CODE as u8));
            }
        }
        Command::Apply {
            conn,
            files,
            reason,
            dry_run,
            wait,
            timeout,
        } => {
            let client = cli::connect(&conn.url()).await?.with_reason(reason);
            if dry_run {
                let (out, ok) = cli::apply_dry_run(&client, &files).await?;
                print!("{out}");
                return Ok(exit(ok));
            }
            let (mut expected, before) = if wait {
                (
                    cli::rollout::expected_targets(&client, cli::raw_documents(&files)?).await?,
                    Some(cli::rollout::snapshot(&client).await?),
                )
            } else {
                (Vec::new(), None)
            };
            let (out, ok) = cli::apply(&client, &files).await?;
            print!("{out}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
            let given = cli::rollout::Deadline::from_flag(timeout);
            let deadline = given.map(|t| (tokio::time::Instant::now() + t.given, t.given));
            if let Some(before) = before {
                // Generated kinds re-render pools only once their controllers ran: wait for them.
                let left = deadline.map(|(d, _)| d.saturating_duration_since(tokio::time::Instant::now()));
                let raws = cli::raw_documents(&files)?;
                for (pool, rendered) in cli::rollout::generated_targets(&client, &before, &raws, left).await? {
                    expected.retain(|(p, _)| *p != pool);
                    expected.push((pool, rendered));
                }
            }
            for (pool, rendered) in expected {
                let left = deadline.map(|(d, given)| cli::rollout::Deadline {
                    left: d.saturating_duration_since(tokio::time::Instant::now()),
                    given,
                });
                let display = cli::rollout::Display::detect();
                println!(
                    "{}",
                    cli::rollout::status(&client, &pool, Some(&rendered), left, true, display).await?
                );
            }
        }
        Command::Get {
            conn,
            targets,
            selectors,
            output,
            watch,
            watch_only,
            at,
            no_headers,
            show_labels,
            label_columns,
        } => {
            let client = cli::connect(&conn.url()).await?;
            let args = cli::get::GetArgs {
                targets,
                selectors: selectors.selectors(),
                output,
                at,
                watch,
                watch_only,
                no_headers,
                show_labels,
                label_columns,
            };
            let mut stdout = std::io::stdout();
            return Ok(exit(cli::get::run(&client, &args, &mut stdout).await?));
        }
        Command::Describe { conn, targets, at } => {
            // kubectl describe: every named object, or every object of a KIND given alone,
            // separated by a blank line. The kind string goes to `cli::describe` as given.
            let client = cli::connect(&conn.url()).await?;
            let mut objects: Vec<(String, String)> = Vec::new();
            if targets.iter().any(|t| t.contains('/')) {
                if !targets.iter().all(|t| t.contains('/')) {
                    anyhow::bail!("{}", cli::MIXED_RESOURCE_ARGS);
                }
                for t in &targets {
                    objects.push(cli::split_resource_name(t)?);
                }
            } else if targets.len() > 1 {
                objects.extend(targets[1..].iter().map(|n| (targets[0].clone(), n.clone())));
            } else {
                let kind = crate::model::Kind::parse(&targets[0])
                    .ok_or_else(|| anyhow::anyhow!("the server doesn't have a resource type {:?}", targets[0]))?;
                let list = client
                    .list(kind)
                    .await
                    .map_err(|e| anyhow::anyhow!(cli::describe_error(&e)))?;
                for o in list["items"].as_array().into_iter().flatten() {
                    let name = o["metadata"]["name"].as_str().unwrap_or("").to_string();
                    objects.push((targets[0].clone(), name));
                }
                if objects.is_empty() {
                    eprintln!("No resources found");
                }
            }
            let mut first = true;
            for (kind, name) in objects {
                let text = cli::describe(&client, &kind, &name, at.as_deref()).await?;
                if first {
                    print!("{text}");
                    first = false;
                } else {
                    print!("\n\n{text}");
                }
            }
        }
        Command::Delete {
            conn,
            targets,
            files,
            selectors,
            all,
            ignore_not_found,
            reason,
            dry_run,
        } => {
            let client = cli::connect(&conn.url()).await?.with_reason(reason);
            let args = cli::delete::DeleteArgs {
                targets,
                files,
                selectors: selectors.selectors(),
                all,
                ignore_not_found,
                run: Some(if dry_run { cli::Run::DryRun } else { cli::Run::Write }),
            };
            let (out, ok) = cli::delete::run(&client, &args).await?;
            print!("{out}");
            return Ok(exit(ok));
        }
        Command::Label {
            conn,
            args,
            overwrite,
            selectors,
            all,
        } => return label(&conn, cli::label::Field::Labels, args, overwrite, selectors, all).await,
        Command::Annotate {
            conn,
            args,
            overwrite,
            selectors,
            all,
        } => return label(&conn, cli::label::Field::Annotations, args, overwrite, selectors, all).await,
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Args::command(), "mco", &mut std::io::stdout());
        }
        Command::Rollback {
            conn,
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
            print!("{}", rollback(&conn.url(), &kind, &pool, target, flags).await?);
        }
        Command::Rollout(RolloutCommand::Status {
            conn,
            kind,
            pool,
            timeout,
            watch,
        }) => {
            let (kind, pool) = kind_and_name(kind, pool, "pool")?;
            anyhow::ensure!(
                crate::model::Kind::parse(&kind) == Some(crate::model::Kind::MachineConfigPool),
                "rollout status follows pools: mco rollout status mcp POOL"
            );
            let client = cli::connect(&conn.url()).await?;
            let display = cli::rollout::Display::detect();
            println!(
                "{}",
                cli::rollout::status(
                    &client,
                    &pool,
                    None,
                    cli::rollout::Deadline::from_flag(timeout),
                    watch,
                    display
                )
                .await?
            );
        }
        Command::Rollout(RolloutCommand::Undo {
            conn,
            kind,
            pool,
            flags,
        }) => {
            let target = cli::rollback::Target::Previous;
            print!("{}", rollback(&conn.url(), &kind, &pool, target, flags).await?);
        }
        Command::Token(TokenCommand::Create {
            conn,
            kind,
            node,
            name,
            labels,
        }) => {
            let client = cli::connect(&conn.url()).await?;
            let labels = cli::token::parse_labels(&labels)?;
            let (secret, about) = cli::token::create(&client, &kind, node.as_deref(), name.as_deref(), &labels).await?;
            print!("{secret}");
            eprintln!("{about}");
        }
        Command::Sim {
            server,
            nodes,
            max_unavailable,
            apply_ms,
            reboot_ms,
            jitter,
            failure_rate,
            data_dir,
            concurrency,
            timeout,
            new_nodes,
            json,
        } => {
            // The client commands' rule for a scheme-less address: https when a CA is set up.
            let server = server
                .or_else(|| args.server.clone())
                .map(|s| cli::server_url(Some(&s)));
            if let Some(s) = &server {
                cli::check_address(s)?;
            }
            let creds = server
                .as_ref()
                .map(|s| cli::credentials::for_server(s, cli::explicit_trust()));
            let token = creds.as_ref().and_then(|c| c.token.clone());
            let trust = creds.and_then(|c| c.trust);
            let given = server.is_some();
            let run = crate::sim::run(crate::sim::SimConfig {
                nodes,
                max_unavailable,
                apply: Duration::from_millis(apply_ms),
                reboot: Duration::from_millis(reboot_ms),
                jitter,
                failure_rate,
                server,
                token,
                trust,
                data_dir,
                server_bin: None,
                timeout,
                concurrency,
                new_nodes,
            });
            // Ctrl-C, SIGTERM or SIGHUP drops the run: its child server is killed and the data
            // dir it made removed.
            use tokio::signal::unix::{signal, SignalKind};
            let (mut term, mut hup) = (signal(SignalKind::terminate())?, signal(SignalKind::hangup())?);
            let stopped = if given {
                "the simulated fleet was stopped (the server given by --server runs on)"
            } else {
                "the simulated fleet and its server were stopped"
            };
            let show = |report: &crate::sim::Report| -> anyhow::Result<()> {
                if json {
                    announce(format_args!("{}", serde_json::to_string_pretty(report)?));
                } else {
                    announce(format_args!("{}", crate::sim::render(report).trim_end()));
                }
                Ok(())
            };
            let report = tokio::select! {
                r = run => match r {
                    Ok(r) => r,
                    // --timeout: the report of what was done, then the error (exit 1).
                    Err(e) => {
                        if let Some(t) = e.downcast_ref::<crate::sim::TimedOut>() {
                            show(&t.report)?;
                        }
                        return Err(e);
                    }
                },
                _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted: {stopped}"),
                _ = term.recv() => anyhow::bail!("terminated: {stopped}"),
                _ = hup.recv() => anyhow::bail!("hung up: {stopped}"),
            };
            show(&report)?;
        }
        Command::Token(TokenCommand::List { conn }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::token::list(&client).await?);
        }
        Command::Token(TokenCommand::Revoke { conn, id }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::token::revoke(&client, &id).await?);
        }
        Command::Store(StoreCommand::Stats { conn }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::store::stats(&client).await?);
        }
        Command::Store(StoreCommand::Verify {
            data_dir,
            drop_snapshot,
            output,
        }) => {
            let (report, ok) = cli::store::verify(&data_dir, drop_snapshot, output.is_some())?;
            print!("{report}");
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Store(StoreCommand::Truncate { data_dir, after }) => {
            print!("{}", cli::store::truncate(&data_dir, after)?);
        }
        Command::Store(StoreCommand::Compact { conn, before }) => {
            let client = cli::connect(&conn.url()).await?;
            print!("{}", cli::store::compact(&client, &before).await?);
        }
        Command::Diff {
            conn,
            a,
            b,
            from,
            to,
            output,
        } => {
            let client = cli::connect(&conn.url()).await?;
            let (text, differs) = cli::diff::diff(&client, &a, &b, from.as_deref(), to.as_deref(), output).await?;
            print!("{text}");
            if differs {
                return Ok(ExitCode::from(1));
            }
        }
        Command::History {
            conn,
            kind,
            name,
            since,
            until,
            actor,
            event_type,
            limit,
            output,
        } => {
            let client = cli::connect(&conn.url()).await?;
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
