//! `mco delete`: `KIND NAME...`, `KIND/NAME...`, `-f FILE|DIR|-` and `-l SELECTOR`, as kubectl.
//!
//! Owns finding which objects the arguments name; each delete goes through
//! [`super::delete`] (and its `--dry-run` preview).

use super::{describe_error, read_sources, Run};
use crate::client::{Client, Selectors};
use crate::manifest::parse_with_source;
use crate::model::Kind;
use anyhow::{anyhow, bail};
use std::path::PathBuf;

/// The arguments of `mco delete`.
#[derive(Debug, Default)]
pub struct DeleteArgs {
    pub targets: Vec<String>,
    pub files: Vec<PathBuf>,
    pub selectors: Selectors,
    pub all: bool,
    pub ignore_not_found: bool,
    pub run: Option<Run>,
}

/// The objects named by `-f` manifests: kind and name of every document, even one that would
/// not pass validation (deleting it needs only its identity).
pub fn objects_in_files(files: &[PathBuf]) -> anyhow::Result<Vec<(Kind, String)>> {
    let mut out = Vec::new();
    for (source, text) in read_sources(files)? {
        for d in parse_with_source(&text) {
            match d {
                Ok(d) => {
                    let kind = d.manifest.stored_kind();
                    out.push((kind, d.manifest.name().to_string()));
                }
                Err(e) => match (e.kind.as_deref().and_then(Kind::parse), e.name.clone()) {
                    (Some(k), Some(n)) => out.push((k, n)),
                    _ => bail!("{source}: {e}"),
                },
            }
        }
    }
    Ok(out)
}

/// `mco delete`; returns the lines for stdout, those for stderr (each failed delete's error, as
/// kubectl prints it there) and whether every delete succeeded.
pub async fn run(client: &Client, args: &DeleteArgs) -> anyhow::Result<(String, String, bool)> {
    let mut objects: Vec<(Kind, String)> = Vec::new();
    let selecting = args.selectors.label.is_some() || args.selectors.field.is_some() || args.all;
    if !args.files.is_empty() {
        if !args.targets.is_empty() {
            bail!("when -f is given, give no KIND or NAME arguments");
        }
        objects = objects_in_files(&args.files)?;
    } else {
        if args.targets.is_empty() {
            bail!("give KIND NAME..., KIND/NAME..., -f FILE, or KIND with -l SELECTOR / --all");
        }
        for (kind, name) in super::resource_args(&args.targets)? {
            match name {
                Some(n) => {
                    if selecting {
                        bail!("name cannot be provided when a selector is specified");
                    }
                    objects.push((kind, n));
                }
                None => {
                    if !selecting {
                        bail!(
                            "resource(s) were provided, but no name was specified (give names, -l SELECTOR or --all)"
                        );
                    }
                    let list = client
                        .list_selected(kind, &args.selectors, None)
                        .await
                        .map_err(|e| anyhow!(describe_error(&e)))?;
                    for o in list["items"].as_array().into_iter().flatten() {
                        objects.push((kind, o["metadata"]["name"].as_str().unwrap_or("").to_string()));
                    }
                    if objects.is_empty() {
                        return Ok(("No resources found\n".into(), String::new(), true));
                    }
                }
            }
        }
    }
    let run = args.run.unwrap_or(Run::Write);
    let (mut out, mut errs) = (String::new(), String::new());
    let mut ok = true;
    for (kind, name) in objects {
        match super::delete(client, kind.as_str(), &name, run).await {
            Ok(s) => out.push_str(&s),
            Err(e) => {
                let msg = e.to_string();
                if args.ignore_not_found && msg.contains("(NotFound)") {
                    continue;
                }
                ok = false;
                errs.push_str(&format!("{msg}\n"));
            }
        }
    }
    Ok((out, errs, ok))
}
