//! kubectl-style output: tables with the MCO printer columns, ages, YAML/JSON.

use crate::gofmt::human_duration;
use crate::model::machine_config_node::MCN_COLUMNS;
use crate::model::{Keys, Kind, MachineConfig, MachineConfigPool, Node, NodeAnnotations, Time};
use comfy_table::{presets, CellAlignment, Table};
use serde_json::Value;

/// AGE column of an object created at `created`, as seen at `at` (the moment a `--at` read
/// shows, [`moment`]; `None`: the present, read at each call, as a watch needs).
pub fn age(created: Option<&Time>, at: Option<jiff::Timestamp>) -> String {
    match created {
        None => "<unknown>".into(),
        Some(t) => human_duration((at.unwrap_or_else(jiff::Timestamp::now) - t.0).get_seconds()),
    }
}

/// The moment a `--at` read shows: the time given by `--at TIME`; for `--at rv:N` the time of
/// event N in the log (`GET /apis/history.mco.dev/v1/events/N`, its `time`); `None` without
/// `--at` (the present). Every AGE printed for such a read is relative to it.
/// Errors: event N cannot be read (compacted, not yet written).
pub async fn moment(client: &crate::client::Client, at: Option<&str>) -> anyhow::Result<Option<jiff::Timestamp>> {
    let Some(at) = at else {
        return Ok(None);
    };
    match crate::query::Point::parse(at).map_err(|e| anyhow::anyhow!(e))? {
        crate::query::Point::TimeMs(ms) => Ok(Some(jiff::Timestamp::from_millisecond(ms)?)),
        crate::query::Point::Seq(n) => {
            let ev: Value = client
                .get_path(&format!("/apis/{}/events/{n}", crate::history::API_VERSION))
                .await
                .map_err(|e| anyhow::anyhow!(super::describe_error(&e)))?;
            ev["time"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .map(Some)
                .ok_or_else(|| anyhow::anyhow!("event {n} of the log has no time"))
        }
    }
}

/// Column widths of a table (the widest cell of each column, headers included), so that
/// `mco get -w` can print later rows aligned under the first ones.
pub fn widths(headers: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    w
}

/// One line of a table with the given column widths (three spaces between columns, no
/// trailing blanks), as kubectl's tabwriter prints it.
pub fn line(cells: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, c) in cells.iter().enumerate() {
        out.push_str(c);
        if i + 1 < cells.len() {
            let w = widths.get(i).copied().unwrap_or(0);
            out.push_str(&" ".repeat(w.saturating_sub(c.chars().count()) + 3));
        }
    }
    out.trim_end().to_string() + "\n"
}

/// Renders rows under upper-case headers, left-aligned, columns three spaces apart (kubectl's
/// tabwriter layout).
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING);
    t.set_header(headers.to_vec());
    for r in rows {
        t.add_row(r);
    }
    let n = headers.len();
    for (i, col) in t.column_iter_mut().enumerate() {
        col.set_padding((0, if i + 1 == n { 0 } else { 3 }));
        col.set_cell_alignment(CellAlignment::Left);
    }
    let mut out: String = t.to_string().lines().map(|l| l.trim_end().to_string() + "\n").collect();
    if out.is_empty() {
        out.push('\n');
    }
    out
}

/// The headers `mco get` prints for a kind (the seeds' columns).
pub fn headers(kind: Kind, wide: bool) -> Vec<&'static str> {
    match kind {
        Kind::MachineConfigPool => vec![
            "NAME",
            "CONFIG",
            "UPDATED",
            "UPDATING",
            "DEGRADED",
            "MACHINECOUNT",
            "READYMACHINECOUNT",
            "UPDATEDMACHINECOUNT",
            "DEGRADEDMACHINECOUNT",
            "AGE",
        ],
        Kind::MachineConfig => vec!["NAME", "GENERATEDBYCONTROLLER", "IGNITIONVERSION", "AGE"],
        Kind::Node if wide => vec![
            "NODE", "STATUS", "DESIRED", "CURRENT", "STATE", "POOL", "REASON", "BOOT ID",
        ],
        Kind::Node => vec!["NODE", "STATUS", "DESIRED", "CURRENT", "STATE"],
        // Every namespace's, as `kubectl get leases -A`.
        Kind::Lease => vec!["NAMESPACE", "NAME", "HOLDER", "AGE"],
        // kubectl's headers of MCO's printer columns (upper-cased names; wide adds priority 1).
        Kind::MachineConfigNode => {
            static HEADERS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
                std::iter::once("NAME".to_string())
                    .chain(MCN_COLUMNS.iter().map(|c| c.name.to_ascii_uppercase()))
                    .collect()
            });
            let shown = MCN_COLUMNS.iter().filter(|c| wide || c.priority == 0).count();
            HEADERS.iter().take(1 + shown).map(String::as_str).collect()
        }
        Kind::RolloutPolicy => vec!["NAME", "POOLS", "WINDOWS", "CANARY", "AGE"],
        Kind::DriftPolicy => vec!["NAME", "RULES", "ACTIONS", "POOLS", "AGE"],
        _ => vec!["NAME", "AGE"],
    }
}

/// What a row needs besides its object: annotation keys, `-o wide`, and each node's pool.
#[derive(Clone, Debug, Default)]
pub struct RowContext {
    pub keys: Keys,
    pub wide: bool,
    /// Node name → its primary pool ([`crate::rollout::pools_for_nodes`]); filled for `-o wide`.
    pub pools: std::collections::BTreeMap<String, String>,
    /// The moment a `--at` read shows ([`moment`]; `None`: the present): AGE is relative to it.
    pub at: Option<jiff::Timestamp>,
}

pub use crate::model::node_status;

/// One table row of an object (as JSON from the API).
pub fn row(kind: Kind, obj: &Value, ctx: &RowContext) -> Vec<String> {
    let (keys, wide) = (&ctx.keys, ctx.wide);
    match kind {
        Kind::MachineConfigPool => {
            let p: MachineConfigPool = serde_json::from_value(obj.clone()).unwrap_or_default();
            let s = &p.status;
            vec![
                p.name().to_string(),
                s.configuration.name.clone(),
                p.condition_status("Updated").to_string(),
                p.condition_status("Updating").to_string(),
                p.condition_status("Degraded").to_string(),
                s.machine_count.to_string(),
                s.ready_machine_count.to_string(),
                s.updated_machine_count.to_string(),
                s.degraded_machine_count.to_string(),
                age(p.metadata.creation_timestamp.as_ref(), ctx.at),
            ]
        }
        Kind::MachineConfig => {
            let mc: MachineConfig = serde_json::from_value(obj.clone()).unwrap_or_default();
            vec![
                mc.name().to_string(),
                crate::model::annotation(&mc.metadata, &keys.generated_by()).to_string(),
                mc.ignition_version().to_string(),
                age(mc.metadata.creation_timestamp.as_ref(), ctx.at),
            ]
        }
        Kind::Node => {
            let n: Node = serde_json::from_value(obj.clone()).unwrap_or_default();
            let a = NodeAnnotations::read(&n, keys);
            let name = n.metadata.name.clone().unwrap_or_default();
            let mut r = vec![
                name.clone(),
                node_status(&n),
                a.desired_config,
                a.current_config,
                a.state,
            ];
            if wide {
                let boot_id = n
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .map(|i| i.boot_id.clone())
                    .unwrap_or_default();
                let or_none = |s: String| if s.is_empty() { "<none>".to_string() } else { s };
                r.push(or_none(ctx.pools.get(&name).cloned().unwrap_or_default()));
                r.push(or_none(a.reason));
                r.push(or_none(boot_id));
            }
            r
        }
        Kind::Lease => {
            let meta: crate::model::ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
            vec![
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
                obj["spec"]["holderIdentity"].as_str().unwrap_or("").to_string(),
                age(meta.creation_timestamp.as_ref(), ctx.at),
            ]
        }
        Kind::MachineConfigNode => {
            let meta: crate::model::ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
            std::iter::once(meta.name.clone().unwrap_or_default())
                .chain(
                    MCN_COLUMNS
                        .iter()
                        .filter(|c| wide || c.priority == 0)
                        .map(|c| match c.type_ {
                            "date" => age(meta.creation_timestamp.as_ref(), ctx.at),
                            _ => c.value(obj).unwrap_or("<none>").to_string(),
                        }),
                )
                .collect()
        }
        Kind::RolloutPolicy => {
            let p: crate::model::RolloutPolicy = serde_json::from_value(obj.clone()).unwrap_or_default();
            let [pools, windows, canary] = p.columns();
            let name = p.metadata.name.clone().unwrap_or_default();
            vec![
                name,
                pools,
                windows,
                canary,
                age(p.metadata.creation_timestamp.as_ref(), ctx.at),
            ]
        }
        Kind::DriftPolicy => {
            let p: crate::model::DriftPolicy = serde_json::from_value(obj.clone()).unwrap_or_default();
            let [rules, actions, pools] = p.columns();
            let name = p.metadata.name.clone().unwrap_or_default();
            vec![
                name,
                rules,
                actions,
                pools,
                age(p.metadata.creation_timestamp.as_ref(), ctx.at),
            ]
        }
        _ => {
            let meta: crate::model::ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
            vec![
                meta.name.clone().unwrap_or_default(),
                age(meta.creation_timestamp.as_ref(), ctx.at),
            ]
        }
    }
}

/// YAML of a JSON value (quotes ambiguous scalars so kubectl reads back the same values).
pub fn to_yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# cannot render YAML: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_layout() {
        let t = table(
            &["NAME", "AGE"],
            vec![vec!["worker".into(), "5m".into()], vec!["m".into(), "1s".into()]],
        );
        assert_eq!(t, "NAME     AGE\nworker   5m\nm        1s\n");
    }
}
