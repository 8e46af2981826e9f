//! `mco apply -f`: the documents of the files read and checked all before anything is sent
//! (admission's rules, and with `--validate=strict` the unknown fields), then each object
//! created or patched with kubectl's three-way merge (`crate::apply::plan`), or previewed
//! (`--dry-run`: the impact), or dry-run as kubectl's `--dry-run=client|server`.
//!
//! Owns the order of those steps and their output lines (kubectl's `KIND/NAME created`,
//! `configured`, `unchanged`, with the dry-run suffixes); the merge is `crate::apply`'s, the
//! previews the server's.

use super::{describe_error, preview, read_sources, resource_name, validate, verbs, Run};
use crate::client::{Client, ClientError};
use crate::manifest::{parse_with_source, validate_machine_config, validate_pool, Manifest};
use crate::model::Kind;
use serde_json::Value;
use std::path::PathBuf;

/// What a verb prints, line by line, each to its stream as kubectl prints it: results on
/// stdout, `Warning:` lines and errors on stderr (client-go's warning handler and kubectl's
/// `CheckErr` write there). [`Printed::text`] is the whole transcript in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Printed {
    lines: Vec<(bool, String)>,
}

impl Printed {
    /// A line (with its newline) for stdout.
    pub fn out(&mut self, line: String) {
        self.lines.push((false, line));
    }

    /// A line (with its newline) for stderr.
    pub fn err(&mut self, line: String) {
        self.lines.push((true, line));
    }

    /// What goes to stdout.
    pub fn stdout(&self) -> String {
        self.lines.iter().filter(|(e, _)| !e).map(|(_, l)| l.as_str()).collect()
    }

    /// What goes to stderr.
    pub fn stderr(&self) -> String {
        self.lines.iter().filter(|(e, _)| *e).map(|(_, l)| l.as_str()).collect()
    }

    /// Both streams interleaved, in the order printed.
    pub fn text(&self) -> String {
        self.lines.iter().map(|(_, l)| l.as_str()).collect()
    }
}

/// Outcome of applying one object.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Created,
    Configured,
    Unchanged,
}

/// `mco apply -f`: reads and validates every document first, and writes nothing when any is
/// refused (a typo in the third document must not leave the first two applied). Then creates
/// each object, or updates it with kubectl's three-way merge: fields of the manifest are set,
/// fields removed from the manifest since the last apply are removed, fields the manifest never
/// mentioned (like a pool's `spec.configuration`, owned by the render controller) are kept.
/// Returns the printed lines and whether all succeeded.
pub async fn apply(client: &Client, paths: &[PathBuf]) -> anyhow::Result<(String, bool)> {
    apply_validated(client, paths, validate::Validate::Strict).await
}

/// [`apply`] with kubectl's `--validate` mode: `Strict` refuses every object before any is
/// written when one has an unknown field; `Warn` prints the server's warnings; `Ignore` says
/// nothing of them. The writes carry the mode as `fieldValidation`.
pub async fn apply_validated(
    client: &Client,
    paths: &[PathBuf],
    mode: validate::Validate,
) -> anyhow::Result<(String, bool)> {
    apply_kubectl_dry_run(client, paths, mode, verbs::DryRun::None).await
}

/// [`apply_validated`] with kubectl's `--dry-run=client|server`: the same validation first
/// (strict mode refuses an unknown field before anything is sent, in every dry run, where
/// kubectl's client dry run leaves the check to a server it never writes to), then `client`
/// sends no write and prints kubectl's `created (dry run)` / `configured (dry run)`; `server`
/// sends every write with `dryRun=All` and prints `(server dry run)`. `None`: a real apply.
pub async fn apply_kubectl_dry_run(
    client: &Client,
    paths: &[PathBuf],
    mode: validate::Validate,
    dry: verbs::DryRun,
) -> anyhow::Result<(String, bool)> {
    let (printed, ok) = apply_printed(client, paths, mode, dry).await?;
    Ok((printed.text(), ok))
}

/// [`apply_kubectl_dry_run`] with each line on its stream ([`Printed`]): what `mco apply`
/// prints.
pub async fn apply_printed(
    client: &Client,
    paths: &[PathBuf],
    mode: validate::Validate,
    dry: verbs::DryRun,
) -> anyhow::Result<(Printed, bool)> {
    let mut client = client.clone().with_field_validation(mode.field_validation());
    if dry == verbs::DryRun::Server {
        client = client.with_dry_run();
    }
    apply_as(&client, paths, Run::Write, mode, dry).await
}

/// `mco apply -f --dry-run`: nothing is written; the server admits the objects and previews
/// their impact (pools, rendered names, node changes, drains and reboots, rollout waves). An
/// unknown field is refused first, as by a strict apply.
pub async fn apply_dry_run(client: &Client, paths: &[PathBuf]) -> anyhow::Result<(String, bool)> {
    apply_dry_run_validated(client, paths, validate::Validate::Strict).await
}

/// [`apply_dry_run`] with kubectl's `--validate` mode.
pub async fn apply_dry_run_validated(
    client: &Client,
    paths: &[PathBuf],
    mode: validate::Validate,
) -> anyhow::Result<(String, bool)> {
    let (printed, ok) = apply_dry_run_printed(client, paths, mode).await?;
    Ok((printed.text(), ok))
}

/// [`apply_dry_run_validated`] with each line on its stream ([`Printed`]).
pub async fn apply_dry_run_printed(
    client: &Client,
    paths: &[PathBuf],
    mode: validate::Validate,
) -> anyhow::Result<(Printed, bool)> {
    apply_as(client, paths, Run::DryRun, mode, verbs::DryRun::None).await
}

/// The steps of every apply: read, check all, then preview ([`Run::DryRun`]) or write each.
async fn apply_as(
    client: &Client,
    paths: &[PathBuf],
    run: Run,
    mode: validate::Validate,
    dry: verbs::DryRun,
) -> anyhow::Result<(Printed, bool)> {
    let mut out = Printed::default();
    let mut docs = Vec::new();
    let mut refused = false;
    let sources: Vec<(String, Vec<_>)> = read_sources(paths)?
        .into_iter()
        .map(|(source, text)| (source, parse_with_source(&text)))
        .collect();
    let count: usize = sources.iter().map(|(_, docs)| docs.len()).sum();
    let limit = crate::limits::DEFAULT_MAX_DOCUMENTS;
    if count > limit {
        out.err(format!(
            "error: the files hold {count} objects (documents and List items), the limit is {limit} per apply: apply them in smaller sets\n"
        ));
        return Ok((out, false));
    }
    for (source, parsed) in sources {
        for doc in parsed {
            let checked = doc.map_err(|e| e.to_string()).and_then(|d| {
                let valid = match &d.manifest {
                    Manifest::MachineConfig(mc) => validate_machine_config(mc).map(|_| ()),
                    Manifest::MachineConfigPool(p) => validate_pool(p),
                    Manifest::MachineConfiguration(m) => crate::disruption::validate_machine_configuration(m),
                    Manifest::Other { kind, object } => crate::generate::admit(*kind, object),
                };
                valid.map_err(|e| e.to_string())?;
                let unknown = match mode {
                    validate::Validate::Strict => {
                        validate::unknown_fields(d.manifest.stored_kind(), &d.raw, client.group())
                    }
                    _ => Vec::new(),
                };
                match unknown.is_empty() {
                    true => Ok(d),
                    false => Err(validate::strict_error(
                        &resource_name(d.manifest.stored_kind(), client.group()),
                        d.manifest.name(),
                        &unknown,
                    )),
                }
            });
            match checked {
                Ok(d) => docs.push(d),
                Err(e) => {
                    refused = true;
                    out.err(format!("error: {source}: {e}\n"));
                }
            }
        }
    }
    if refused {
        out.err("error: nothing was applied: fix the documents above and apply again\n".into());
        return Ok((out, false));
    }
    if docs.is_empty() {
        out.err("error: no objects passed to apply\n".into());
        return Ok((out, false));
    }
    if run == Run::DryRun {
        let objects: Vec<Value> = docs.into_iter().map(|d| d.raw).collect();
        let (text, ok) = preview(client, serde_json::json!({"apply": objects})).await?;
        match ok {
            true => out.out(text),
            false => out.err(text),
        }
        return Ok((out, ok));
    }
    let mut ok = true;
    for d in docs {
        let kind = d.manifest.stored_kind();
        let name = d.manifest.name().to_string();
        let result = apply_one(client, kind, &name, d.raw, dry).await;
        for w in client.take_warnings() {
            if mode != validate::Validate::Ignore || !w.starts_with("unknown field ") {
                out.err(format!("Warning: {w}\n"));
            }
        }
        match result {
            Ok(a) => out.out(format!(
                "{}/{name} {}{}\n",
                resource_name(kind, client.group()),
                match a {
                    Applied::Created => "created",
                    Applied::Configured => "configured",
                    Applied::Unchanged => "unchanged",
                },
                dry.suffix()
            )),
            Err(e) => {
                ok = false;
                out.err(format!("{}\n", describe_error(&e)));
            }
        }
    }
    Ok((out, ok))
}

/// One object of `mco apply`: created, patched with kubectl's three-way merge, or left alone.
/// A client dry run sends nothing and says `configured` of any object that exists (kubectl's
/// apply computes no patch then); a server dry run's answer keeps the stored resourceVersion,
/// so any patch it takes is `configured`.
async fn apply_one(
    client: &Client,
    kind: Kind,
    name: &str,
    raw: Value,
    dry: verbs::DryRun,
) -> Result<Applied, ClientError> {
    let current: Option<Value> = match client.get(kind, name).await {
        Ok(c) => Some(c),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    match (dry, current.is_some()) {
        (verbs::DryRun::Client, true) => return Ok(Applied::Configured),
        (verbs::DryRun::Client, false) => return Ok(Applied::Created),
        _ => {}
    }
    match crate::apply::plan(&raw, current.as_ref()) {
        crate::apply::Plan::Create(body) => {
            client.create(kind, &body, Some("apply")).await?;
            Ok(Applied::Created)
        }
        crate::apply::Plan::Unchanged => Ok(Applied::Unchanged),
        crate::apply::Plan::Patch(patch) => {
            let after = client.merge_patch(kind, name, &patch, false).await?;
            if dry == verbs::DryRun::Server {
                return Ok(Applied::Configured);
            }
            let same =
                current.is_some_and(|c| after["metadata"]["resourceVersion"] == c["metadata"]["resourceVersion"]);
            Ok(if same { Applied::Unchanged } else { Applied::Configured })
        }
    }
}
