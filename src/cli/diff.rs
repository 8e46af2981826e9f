//! `mco diff`: what changed between two rendered configs, each item attributed to the
//! MachineConfig that wrote it on each side and to who last changed that MachineConfig.
//!
//! Forms: `mco diff RENDERED_A RENDERED_B`, `mco diff mcp POOL --from P [--to P]`,
//! `mco diff node NODE --from P [--to P]`, a point being an RFC 3339 time or `rv:N`. Reads
//! `GET /apis/history.mco.dev/v1/diffs`.

use super::{describe_error, output, OutputFormat};
use crate::client::Client;
use crate::diff::{Change, Item, RenderDiff, Section, Side};
use crate::model::Kind;
use anyhow::{anyhow, bail};
use serde_json::Value;

fn enc(v: &str) -> String {
    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The query for the arguments (see the module's forms).
pub fn query(a: &str, b: &str, from: Option<&str>, to: Option<&str>) -> anyhow::Result<String> {
    match Kind::parse(a) {
        Some(kind @ (Kind::MachineConfigPool | Kind::Node)) => {
            let Some(from) = from else {
                bail!("mco diff {a} {b} needs --from TIME|rv:N (and optionally --to)");
            };
            let key = if kind == Kind::Node { "node" } else { "pool" };
            let mut q = format!("{key}={}&from={}", enc(b), enc(from));
            if let Some(to) = to {
                q.push_str(&format!("&to={}", enc(to)));
            }
            Ok(q)
        }
        _ if from.is_some() || to.is_some() => bail!("--from/--to go with `mco diff mcp POOL` or `mco diff node NODE`"),
        _ => Ok(format!("from={}&to={}", enc(a), enc(b))),
    }
}

fn section_name(s: Section) -> &'static str {
    match s {
        Section::File => "file",
        Section::Unit => "unit",
        Section::Dropin => "dropin",
        Section::SshKey => "ssh key",
        Section::PasswordHash => "password hash of",
        Section::KernelArgument => "kernel argument",
        Section::Extension => "extension",
        Section::KernelType => "kernelType",
        Section::Fips => "fips",
        Section::OsImageUrl => "osImageURL",
    }
}

fn side_line(label: &str, s: &Side) -> String {
    let mut line = format!("  {label} ");
    if s.source.is_empty() {
        line.push_str("(no attribution recorded)");
    } else {
        line.push_str(&s.source);
        if let Some(p) = &s.changed_by {
            let time = p
                .time
                .split_once('.')
                .map(|(h, _)| format!("{h}Z"))
                .unwrap_or(p.time.clone());
            line.push_str(&format!(
                ", last changed by {} at {time} (rv {}, {})",
                p.actor, p.resource_version, p.event
            ));
            if !p.reason.is_empty() {
                line.push_str(&format!(": {:?}", p.reason));
            }
        }
    }
    if !s.value.is_empty() {
        line.push_str(&format!("; {}", s.value));
    }
    line + "\n"
}

/// One item as text: a header line, the attribution of each side, the unified diff.
pub fn render_item(item: &Item) -> String {
    let change = match item.change {
        Change::Added => "added".to_string(),
        Change::Removed => "removed".to_string(),
        Change::Changed if item.fields.is_empty() => "changed".to_string(),
        Change::Changed => format!("changed ({})", item.fields.join(", ")),
    };
    let name = if item.name.is_empty() {
        String::new()
    } else {
        format!(" {}", item.name)
    };
    let mut out = format!("{}{name}: {change}\n", section_name(item.section));
    if let Some(f) = &item.from {
        out.push_str(&side_line("before:", f));
    }
    if let Some(t) = &item.to {
        out.push_str(&side_line("after: ", t));
    }
    out.push_str(&item.unified);
    out
}

/// The whole diff as text.
pub fn render(d: &RenderDiff) -> String {
    let mut out = format!("diff {} -> {}\n", d.from, d.to);
    if d.items.is_empty() {
        out.push_str("no differences\n");
    }
    for item in &d.items {
        out.push('\n');
        out.push_str(&render_item(item));
    }
    out
}

/// `mco diff ...`: the text (or JSON/YAML) and whether the renders differ (the command then
/// exits 1, as `kubectl diff` and `diff` do).
pub async fn diff(
    client: &Client,
    a: &str,
    b: &str,
    from: Option<&str>,
    to: Option<&str>,
    format: Option<OutputFormat>,
) -> anyhow::Result<(String, bool)> {
    let q = query(a, b, from, to)?;
    let v: Value = client
        .get_path(&format!("/apis/{}/diffs?{q}", crate::history::API_VERSION))
        .await
        .map_err(|e| anyhow!(describe_error(&e)))?;
    let differs = v["items"].as_array().is_some_and(|i| !i.is_empty());
    let text = match format {
        Some(OutputFormat::Json) => serde_json::to_string_pretty(&v)? + "\n",
        Some(OutputFormat::Yaml) => output::to_yaml(&v),
        _ => {
            let d: RenderDiff = serde_json::from_value(v)?;
            render(&d)
        }
    };
    Ok((text, differs))
}
