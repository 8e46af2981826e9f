//! The dispatch of the command line: one arm per verb of [`super::args::Command`], each calling
//! its verb module (`get`, `describe`, `rollout`, ...) or starting a process (`up`, `server`,
//! `daemon`, `sim`), plus the process-level helpers those arms share (logging, signals).

use super::args::*;
use crate::cli;
use std::process::ExitCode;

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

/// Prints `printed`'s stdout lines, then its stderr lines (kubectl apply prints the results
/// as it goes and its aggregated errors at the end).
fn print_both(printed: &cli::Printed) {
    use std::io::Write as _;
    print!("{}", printed.stdout());
    let _ = std::io::stdout().flush();
    eprint!("{}", printed.stderr());
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
        super::serve::init_tracing("warn", LogFormat::Text);
    }
    match args.command {
        cmd @ (Command::Up { .. } | Command::Server { .. } | Command::Daemon { .. } | Command::Sim { .. }) => {
            return super::serve::run(cmd, args.server, global_token).await;
        }
        Command::Apply {
            conn,
            files,
            reason,
            dry_run,
            wait,
            timeout,
            validate,
        } => {
            let client = cli::connect(&conn.url()).await?.with_reason(reason);
            // Parsed here, not by clap, so a bad value is kubectl's message alone.
            let dry_run = dry_run
                .map(|d| ApplyDryRun::parse(&d))
                .transpose()
                .map_err(|e| anyhow::anyhow!(e))?;
            match dry_run {
                Some(ApplyDryRun::Preview) => {
                    let (printed, ok) = cli::apply_dry_run_printed(&client, &files, validate).await?;
                    print_both(&printed);
                    return Ok(exit(ok));
                }
                Some(ApplyDryRun::Kubectl(dry)) if dry != cli::verbs::DryRun::None => {
                    let (printed, ok) = cli::apply_printed(&client, &files, validate, dry).await?;
                    print_both(&printed);
                    return Ok(exit(ok));
                }
                _ => {}
            }
            let (mut expected, before) = if wait {
                (
                    cli::rollout::expected_targets(&client, cli::raw_documents(&files)?).await?,
                    Some(cli::rollout::snapshot(&client).await?),
                )
            } else {
                (Vec::new(), None)
            };
            let (printed, ok) = cli::apply_printed(&client, &files, validate, cli::verbs::DryRun::None).await?;
            print_both(&printed);
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
            sort_by,
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
                sort_by,
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
            let (out, errs, ok) = cli::delete::run(&client, &args).await?;
            print!("{out}");
            eprint!("{errs}");
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
            // Right after an apply the pool may not target the new render yet: wait for it.
            let expect = cli::rollout::pending_target(&client, &pool).await;
            println!(
                "{}",
                cli::rollout::status(
                    &client,
                    &pool,
                    expect.as_deref(),
                    cli::rollout::Deadline::from_flag(timeout),
                    watch,
                    display
                )
                .await?
            );
        }
        Command::Cordon(a) => return cli::verbs::run_node(a, cli::verbs::NodeVerb::Cordon).await,
        Command::Uncordon(a) => return cli::verbs::run_node(a, cli::verbs::NodeVerb::Uncordon).await,
        Command::Drain(a) => return cli::verbs::run_node(a.node, cli::verbs::NodeVerb::Drain).await,
        Command::Patch(a) => return cli::verbs::run_patch(a).await,
        Command::Edit(a) => return cli::edit::run(a).await,
        Command::Explain(a) => return cli::explain::run(a).await,
        Command::Rollout(RolloutCommand::Pause(a)) => return cli::verbs::run_pause(a, true).await,
        Command::Rollout(RolloutCommand::Resume(a)) => return cli::verbs::run_pause(a, false).await,
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
        Command::Store(StoreCommand::Export { data_dir, store, file }) => {
            eprint!("{}", cli::store::export(&data_dir, &store, &file).await?);
        }
        Command::Store(StoreCommand::Import { data_dir, store, file }) => {
            print!("{}", cli::store::import(&data_dir, &store, &file).await?);
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
