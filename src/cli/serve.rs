//! The process commands of the command line: `mco up`, `mco server` (and `server init`),
//! `mco daemon` and `mco sim`, each starting long-running work with its logging, its stop
//! signals and its start-up lines on stdout.

use super::args::*;
use crate::cli;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Runs one of the process commands (`up`, `server`, `daemon`, `sim`; [`super::run::run`]
/// hands over only these). `global_server` and `global_token` are the `--server` and `--token`
/// given before the command.
pub(super) async fn run(
    command: Command,
    global_server: Option<String>,
    global_token: Option<String>,
) -> anyhow::Result<ExitCode> {
    match command {
        Command::Up {
            serve,
            masters,
            workers,
            reboot_seconds,
            no_tls,
            ha,
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
                node_monitor_grace_period: serve.node_monitor_grace_period,
                ha,
            })
            .await?;
        }
        Command::Server {
            action:
                Some(ServerAction::Init {
                    data_dir,
                    tls_sans,
                    ca_cert,
                    ca_key,
                }),
            ..
        } => {
            let pki = crate::tls::Pki::in_data_dir(&data_dir);
            let adopted = match (&ca_cert, &ca_key) {
                (Some(c), Some(k)) => crate::tls::adopt_ca(&pki, c, k)?,
                _ => false,
            };
            let r = crate::tls::ensure_pki(&pki, &tls_sans)?;
            let said = |new: bool| if new { "generated" } else { "kept" };
            let ca_said = if adopted {
                "copied from --ca-cert"
            } else {
                said(r.new_ca)
            };
            println!("CA {ca_said}: {}", pki.ca_cert().display());
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
            store,
            platform,
        } => {
            init_tracing("info,tower_http=warn", serve.log_format);
            let etcd = store.etcd(serve.listen)?;
            let signals = StopSignals::install();
            let serve_json = serve.log_format == LogFormat::Json;
            let pki = crate::tls::Pki::in_data_dir(&serve.data_dir);
            let tls = match (tls_cert, tls_key) {
                (Some(cert), Some(key)) => Some(crate::tls::TlsFiles { cert, key }),
                _ => pki.has_serving().then(|| pki.serving()),
            };
            let connections = serve.connections();
            let mut signals = signals;
            // A standby waits for the writer lease inside the start: a stop signal ends it too.
            let running = tokio::select! {
                started = crate::up::start_server(crate::server::ServerConfig {
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
                    platform,
                },
                etcd,
                node_monitor_grace_period: serve.node_monitor_grace_period,
                clock: crate::controller::Clock::system(),
            })
             => started?,
                () = signals.next() => {
                    tracing::info!("stopped before serving");
                    return Ok(ExitCode::SUCCESS);
                }
            };
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
            let fenced = tokio::select! {
                () = signals.wait() => false,
                () = running.fenced() => true,
            };
            running.stop().await;
            if fenced {
                anyhow::bail!(
                    "lost the etcd writer lease of the event log (another server may write it now); \
                     stopping so that the supervisor starts this server again as a standby"
                );
            }
        }
        Command::Daemon {
            conn,
            node,
            root,
            labels,
            reboot_seconds,
            reboot_timeout,
            supervise,
            log_format,
            token_file,
            lease_renew_interval,
            kubelet_healthz_endpoint,
            kubelet_healthz_interval,
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
                    extra_args: supervised_args(
                        lease_renew_interval,
                        kubelet_healthz_endpoint,
                        kubelet_healthz_interval,
                    ),
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
                lease_renew_interval,
                kubelet_healthz: kubelet_healthz_endpoint.map(|endpoint| {
                    crate::daemon::kubelet_health::KubeletHealthz {
                        endpoint,
                        interval: kubelet_healthz_interval,
                    }
                }),
            };
            let exit = crate::daemon::run(config, host, shutdown.clone()).await?;
            if exit == crate::daemon::Exit::Reboot {
                let real = root == std::path::Path::new("/");
                // A real host: wait to be stopped by the shutdown the reboot starts, as MCO's
                // daemon does (`pkg/daemon/update.go` `reboot()` sleeps until SIGTERM); exiting
                // first would let systemd start the daemon again on the same boot. A sandbox
                // node: its machine is down for the reboot's length, then its boot ends.
                let wait = if real {
                    reboot_timeout
                } else {
                    Duration::from_secs(reboot_seconds)
                };
                let stopped = tokio::select! {
                    _ = tokio::time::sleep(wait) => false,
                    _ = shutdown.cancelled() => true,
                };
                if real && stopped {
                    return Ok(ExitCode::SUCCESS);
                }
                if real {
                    tracing::error!(
                        waited = ?wait,
                        "the requested reboot has not happened; exiting so that the next start asks for it again"
                    );
                } else {
                    // The sandbox's reboot: its tmpfs emptied (the next start is a new boot id).
                    crate::up::empty_run_dir(&root);
                }
                return Ok(ExitCode::from(crate::daemon::REBOOT_EXIT_CODE as u8));
            }
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
                .or_else(|| global_server.clone())
                .map(|s| cli::server_url(Some(&s)));
            if let Some(s) = &server {
                cli::check_address(s)?;
                anyhow::ensure!(
                    crate::client::server_list(s).len() == 1,
                    "{s}: mco sim drives one server (give the address of the one that listens)"
                );
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
        _ => unreachable!("only the process commands are run here"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes one line to stdout, ignoring a closed stdout, for the commands that keep SIGPIPE
/// ignored: a supervisor that read what it needed of the server's start-up lines (the listening
/// line) and closed the pipe, or `mco sim | head`, must not end in `println!`'s panic on EPIPE.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
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
        self.next().await;
    }

    /// Waits for the next SIGTERM or SIGINT, keeping the handlers for later ones.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Logs to stderr: `RUST_LOG` or `default` decides what; `format` how (JSON lines carry the
/// current spans' fields: node, pool, rendered config).
pub(super) fn init_tracing(default: &str, format: LogFormat) {
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

/// The `mco daemon` flags `--supervise` hands on to the agent it runs: the lease interval and
/// the kubelet health monitor's, as given (durations in milliseconds).
fn supervised_args(lease: Duration, healthz: Option<String>, healthz_interval: Duration) -> Vec<String> {
    let mut args = vec!["--lease-renew-interval".to_string(), format!("{}ms", lease.as_millis())];
    if let Some(endpoint) = healthz {
        args.extend([
            "--kubelet-healthz-endpoint".to_string(),
            endpoint,
            "--kubelet-healthz-interval".to_string(),
            format!("{}ms", healthz_interval.as_millis()),
        ]);
    }
    args
}
