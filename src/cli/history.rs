//! `mco history [KIND [NAME]]`: the audit log, one line per event
//! (`RV TIME ACTOR EVENT OBJECT SUMMARY`), read from `history.mco.dev/v1` `events`. For a pool
//! (`mco history mcp worker`) it is the pool's story: the pool, its rendered configs, the
//! MachineConfigs it selects and its nodes.

use super::{describe_error, output, parse_kind, OutputFormat};
use crate::client::Client;
use anyhow::anyhow;
use serde_json::{json, Value};

/// What `mco history` asks for.
#[derive(Clone, Debug, Default)]
pub struct HistoryArgs {
    pub kind: Option<String>,
    pub name: Option<String>,
    /// `TIME` (RFC 3339) or `rv:N`: events at or after it.
    pub since: Option<String>,
    /// `TIME` or `rv:N`: events at or before it.
    pub until: Option<String>,
    pub actor: Option<String>,
    /// Event type (`MachineConfigUpdated`, ...).
    pub event_type: Option<String>,
    /// At most this many events (the newest are kept when it cuts).
    pub limit: Option<usize>,
    pub output: Option<OutputFormat>,
}

/// Percent-encodes a query value.
fn enc(v: &str) -> String {
    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Fetches every entry the arguments select, following `continue` tokens.
pub async fn fetch(client: &Client, args: &HistoryArgs) -> anyhow::Result<Vec<Value>> {
    let mut selectors = Vec::new();
    let kind = args.kind.as_deref().map(parse_kind).transpose()?;
    match (kind, &args.name) {
        // A pool's story: the pool, its renders, the MachineConfigs it selects, its nodes.
        (Some(crate::model::Kind::MachineConfigPool), Some(n)) => selectors.push(format!("pool={n}")),
        (k, n) => {
            if let Some(k) = k {
                selectors.push(format!("object.kind={}", k.as_str()));
            }
            if let Some(n) = n {
                selectors.push(format!("object.name={n}"));
            }
        }
    }
    if let Some(a) = &args.actor {
        selectors.push(format!("actor={a}"));
    }
    if let Some(t) = &args.event_type {
        selectors.push(format!("type={t}"));
    }
    let mut query = vec![format!("fieldSelector={}", enc(&selectors.join(",")))];
    if let Some(s) = &args.since {
        query.push(format!("since={}", enc(s)));
    }
    if let Some(u) = &args.until {
        query.push(format!("until={}", enc(u)));
    }
    let mut items = Vec::new();
    let mut cont: Option<String> = None;
    loop {
        let mut q = query.clone();
        q.push("limit=500".into());
        if let Some(c) = &cont {
            q.push(format!("continue={}", enc(c)));
        }
        let page: Value = client
            .get_path(&format!("/apis/{}/events?{}", crate::history::API_VERSION, q.join("&")))
            .await
            .map_err(|e| anyhow!(describe_error(&e)))?;
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        cont = page["metadata"]["continue"].as_str().map(str::to_string);
        if cont.is_none() {
            break;
        }
    }
    if let Some(limit) = args.limit {
        let skip = items.len().saturating_sub(limit);
        items.drain(..skip);
    }
    Ok(items)
}

/// `mco history`: prints the entries as a table (wide adds the client's reason), JSON or YAML.
pub async fn history(client: &Client, args: &HistoryArgs) -> anyhow::Result<String> {
    let items = fetch(client, args).await?;
    let list = || json!({"apiVersion": crate::history::API_VERSION, "kind": "EventList", "items": items});
    Ok(match args.output {
        Some(OutputFormat::Json) => serde_json::to_string_pretty(&list())? + "\n",
        Some(OutputFormat::Yaml) => output::to_yaml(&list()),
        Some(OutputFormat::Name) => items
            .iter()
            .map(|e| {
                format!(
                    "event.{}/{}\n",
                    crate::history::GROUP,
                    e["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect(),
        wide => {
            if items.is_empty() {
                return Ok("No events found\n".into());
            }
            let wide = wide == Some(OutputFormat::Wide);
            let mut headers = vec!["RV", "TIME", "ACTOR", "EVENT", "OBJECT", "SUMMARY"];
            if wide {
                headers.push("REASON");
            }
            let rows = items
                .iter()
                .map(|e| {
                    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
                    let time = s(&e["time"]);
                    // Seconds are enough on a terminal: 2026-12-01T10:00:00Z.
                    let time = match time.split_once('.') {
                        Some((head, _)) => format!("{head}Z"),
                        None => time,
                    };
                    let mut row = vec![
                        s(&e["metadata"]["name"]),
                        time,
                        s(&e["actor"]),
                        s(&e["type"]),
                        format!("{}/{}", s(&e["object"]["kind"]).to_lowercase(), s(&e["object"]["name"])),
                        s(&e["summary"]),
                    ];
                    if wide {
                        row.push(s(&e["reason"]));
                    }
                    row
                })
                .collect();
            let mut out = output::table(&headers, rows);
            out.push_str(&drift_diffs(&items));
            out
        }
    })
}

/// The diffs of the drift events in `items` (`NodeConfigDrifted`, `NodeConfigReverted`: the
/// lines of `detail` after its first), each under a line naming its event, after the table.
fn drift_diffs(items: &[Value]) -> String {
    let mut out = String::new();
    for e in items {
        let t = e["type"].as_str().unwrap_or("");
        if t != "NodeConfigDrifted" && t != "NodeConfigReverted" {
            continue;
        }
        let detail = e["detail"].as_str().unwrap_or("");
        let Some((_, diff)) = detail.split_once('\n') else {
            continue;
        };
        out.push_str(&format!(
            "\nrv {} {} node/{}:\n",
            e["metadata"]["name"].as_str().unwrap_or(""),
            t,
            e["object"]["name"].as_str().unwrap_or("")
        ));
        for line in diff.lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}
