//! `mco get`: kubectl's `get` for mco's kinds — several names or `KIND/NAME` arguments,
//! `-l`/`--field-selector`, `-o yaml|json|wide|name|jsonpath=…|custom-columns=…`, and
//! `-w`/`--watch` (table rows printed as objects change, from the watch API).
//!
//! Owns target resolution and printing; talks to the server only through [`Client`] (`-w`
//! through a [`Watcher`]: resumed after a cut, listed again on 410 Expired).

use super::jsonpath::{self, Column, Template};
use super::output::{self, RowContext};
use super::{describe_error, parse_kind, resource_name};
use crate::client::watcher::{Event, WatchError, Watcher};
use crate::client::{Client, Selectors};
use crate::model::{Keys, Kind, MachineConfigPool, Node};
use anyhow::{anyhow, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;

/// `-o` of `mco get`.
#[derive(Debug)]
pub enum GetOutput {
    Table,
    Wide,
    Yaml,
    Json,
    Name,
    JsonPath(Template),
    CustomColumns(Vec<Column>),
}

impl GetOutput {
    /// Parses `-o`: `wide`, `yaml`, `json`, `name`, `jsonpath=TEMPLATE`,
    /// `custom-columns=HEADER:PATH,...`.
    pub fn parse(s: Option<&str>) -> anyhow::Result<GetOutput> {
        let Some(s) = s else { return Ok(GetOutput::Table) };
        Ok(match s {
            "wide" => GetOutput::Wide,
            "yaml" => GetOutput::Yaml,
            "json" => GetOutput::Json,
            "name" => GetOutput::Name,
            _ => {
                if let Some(t) = s
                    .strip_prefix("jsonpath=")
                    .or_else(|| s.strip_prefix("jsonpath-as-json="))
                {
                    if t.is_empty() {
                        // kubectl pkg/cmd/get/get_flags.go (JSONPathPrintFlags).
                        bail!("error: template format specified but no template given");
                    }
                    GetOutput::JsonPath(Template::parse(t).map_err(|e| anyhow!("error: {e}"))?)
                } else if s == "jsonpath" || s == "jsonpath-as-json" {
                    bail!("error: template format specified but no template given");
                } else if let Some(c) = s.strip_prefix("custom-columns=") {
                    GetOutput::CustomColumns(jsonpath::custom_columns(c).map_err(|e| anyhow!("error: {e}"))?)
                } else {
                    bail!(
                        "error: unable to match a printer suitable for the output format {s:?}, the allowed formats are: \
                         custom-columns,json,jsonpath,name,wide,yaml"
                    )
                }
            }
        })
    }
}

/// The arguments of `mco get`.
#[derive(Debug, Default)]
pub struct GetArgs {
    /// `KIND [NAME...]`, `KIND,KIND`, or `KIND/NAME...`.
    pub targets: Vec<String>,
    pub selectors: Selectors,
    /// `-o` as typed.
    pub output: Option<String>,
    /// `--at TIME|rv:N`: read as of then.
    pub at: Option<String>,
    /// `-w`: after the listing, print each change.
    pub watch: bool,
    /// `--watch-only`: print only the changes.
    pub watch_only: bool,
    /// `--no-headers`: tables without their header line.
    pub no_headers: bool,
    /// `--show-labels`: a last LABELS column (`k=v,...`, `<none>`).
    pub show_labels: bool,
    /// `-L KEY`: a column per label key.
    pub label_columns: Vec<String>,
    /// `--sort-by JSONPATH`: each kind's objects in the order of that field ([`sort_by`]).
    pub sort_by: Option<String>,
}

/// kubectl's label columns (printers `decorateTable`): one column per `-L` key, headed by the
/// key's last `/` segment upper-cased, holding the value or nothing; then `LABELS` with
/// `--show-labels` (sorted `k=v` joined by `,`, `<none>` when there are none).
pub fn label_cells(args: &GetArgs, headers: &mut Vec<String>, rows: &mut [Vec<String>], objects: &[Value]) {
    for key in &args.label_columns {
        headers.push(key.rsplit('/').next().unwrap_or(key).to_uppercase());
    }
    if args.show_labels {
        headers.push("LABELS".into());
    }
    for (row, o) in rows.iter_mut().zip(objects) {
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
        for key in &args.label_columns {
            row.push(labels.get(key).cloned().unwrap_or_default());
        }
        if args.show_labels {
            let all: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            row.push(if all.is_empty() { "<none>".into() } else { all.join(",") });
        }
    }
}

/// A table as text, without its header line when `no_headers`.
fn table_text(headers: &[String], rows: Vec<Vec<String>>, no_headers: bool) -> String {
    let h: Vec<&str> = headers.iter().map(String::as_str).collect();
    let t = output::table(&h, rows);
    if no_headers {
        t.split_once('\n').map(|(_, rest)| rest.to_string()).unwrap_or_default()
    } else {
        t
    }
}

/// What to read: one kind and the names asked for (empty: all that the selectors select).
#[derive(Debug, PartialEq)]
pub struct Target {
    pub kind: Kind,
    pub names: Vec<String>,
}

/// Resolves `KIND NAME...`, `KIND1,KIND2` and `KIND/NAME...` as kubectl does (its errors too).
pub fn resolve(targets: &[String]) -> anyhow::Result<Vec<Target>> {
    let Some(first) = targets.first() else {
        bail!(
            "You must specify the type of resource to get. Valid resource types: machineconfigpool (mcp), \
             machineconfig (mc), node (no)"
        );
    };
    let slashed = targets.iter().filter(|a| a.contains('/')).count();
    if slashed > 0 && slashed != targets.len() {
        bail!("{}", super::MIXED_RESOURCE_ARGS);
    }
    if slashed > 0 {
        let mut out: Vec<Target> = Vec::new();
        for t in targets {
            let (k, n) = super::split_resource_name(t)?;
            let kind = parse_kind(&k)?;
            match out.iter_mut().find(|t| t.kind == kind) {
                Some(t) => t.names.push(n),
                None => out.push(Target { kind, names: vec![n] }),
            }
        }
        return Ok(out);
    }
    let names: Vec<String> = targets[1..].to_vec();
    let kinds = first
        .split(',')
        .filter(|k| !k.is_empty())
        .map(parse_kind)
        .collect::<anyhow::Result<Vec<Kind>>>()?;
    if kinds.len() > 1 && !names.is_empty() {
        // kubectl looks each name up in every kind; mco asks for KIND/NAME instead.
        bail!("with several kinds, name the objects as KIND/NAME (e.g. mcp/worker node/worker-0)");
    }
    Ok(kinds
        .into_iter()
        .map(|kind| Target {
            kind,
            names: names.clone(),
        })
        .collect())
}

/// The objects read for one target, and the errors of names that could not be read.
struct Read {
    kind: Kind,
    items: Vec<Value>,
    errors: Vec<String>,
}

async fn read(client: &Client, t: &Target, args: &GetArgs) -> anyhow::Result<Read> {
    let mut r = Read {
        kind: t.kind,
        items: Vec::new(),
        errors: Vec::new(),
    };
    if t.names.is_empty() {
        let list = client
            .list_selected(t.kind, &args.selectors, args.at.as_deref())
            .await
            .map_err(|e| anyhow!(describe_error(&e)))?;
        r.items = list["items"].as_array().cloned().unwrap_or_default();
    } else {
        for n in &t.names {
            match client.get_at(t.kind, n, args.at.as_deref()).await {
                Ok(o) => r.items.push(o),
                Err(e) => r.errors.push(describe_error(&e)),
            }
        }
    }
    Ok(r)
}

/// The row context for `kind`: each node's pool when the table is wide, and the moment the
/// read shows (AGE under `--at` is relative to it, [`output::moment`]).
async fn row_context(client: &Client, kind: Kind, wide: bool, at: Option<&str>) -> anyhow::Result<RowContext> {
    let mut ctx = RowContext {
        keys: Keys::new(client.group()),
        wide,
        pools: Default::default(),
        at: output::moment(client, at).await?,
    };
    if wide && kind == Kind::Node {
        let pools = client.list_at(Kind::MachineConfigPool, at).await.ok();
        let nodes = client.list_at(Kind::Node, at).await.ok();
        if let (Some(pools), Some(nodes)) = (pools, nodes) {
            let pools: Vec<MachineConfigPool> = serde_json::from_value(pools["items"].clone()).unwrap_or_default();
            let nodes: Vec<Node> = serde_json::from_value(nodes["items"].clone()).unwrap_or_default();
            let p: Vec<&MachineConfigPool> = pools.iter().collect();
            let n: Vec<&Node> = nodes.iter().collect();
            ctx.pools = crate::rollout::pools_for_nodes(&p, &n).primary;
        }
    }
    Ok(ctx)
}

/// kubectl's `--show-managed-fields=false` default for `-o json|yaml`: `metadata.managedFields`
/// dropped from the object or from each item of a list.
/// Reads with `get_mut`, never `v["key"]` on a mutable value: indexing a JSON object mutably
/// inserts a missing key as `null` (a single object would print `items: null`, which kubectl
/// then cannot apply).
fn hide_managed_fields(mut v: Value) -> Value {
    fn drop_from(o: &mut Value) {
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
    }
    drop_from(&mut v);
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(drop_from);
    }
    v
}

fn list_of(items: Vec<Value>) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items})
}

/// `mco get`, printing to `out`. Returns whether every named object was found (kubectl exits
/// 1 otherwise, after printing the others). With `-w` it returns only when the watch ends.
pub async fn run(client: &Client, args: &GetArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<bool> {
    let format = GetOutput::parse(args.output.as_deref())?;
    let targets = resolve(&args.targets)?;
    if (args.selectors.label.is_some() || args.selectors.field.is_some()) && targets.iter().any(|t| !t.names.is_empty())
    {
        bail!("name cannot be provided when a selector is specified");
    }
    if args.watch || args.watch_only {
        if targets.len() != 1 || targets[0].names.len() > 1 {
            bail!("you may only specify a single resource type and at most one name with --watch");
        }
        if args.at.is_some() {
            bail!("--watch follows changes from now on: it cannot be combined with --at");
        }
        return watch(client, &targets[0], args, &format, out).await;
    }
    let mut reads = Vec::new();
    for t in &targets {
        let mut r = read(client, t, args).await?;
        if let Some(expr) = &args.sort_by {
            super::sort::sort_by(&mut r.items, expr)?;
        }
        reads.push(r);
    }
    let mut ok = true;
    for r in &reads {
        for e in &r.errors {
            eprintln!("{e}");
            ok = false;
        }
    }
    let single = targets.len() == 1 && targets[0].names.len() == 1;
    let all: Vec<(Kind, Value)> = reads
        .iter()
        .flat_map(|r| r.items.iter().map(move |o| (r.kind, o.clone())))
        .collect();
    match &format {
        GetOutput::Json | GetOutput::Yaml | GetOutput::JsonPath(_) => {
            // kubectl renders an empty list too (`{.items}` prints `[]`, `{.kind}` `List`).
            let v = if single {
                match all.first() {
                    Some((_, o)) => o.clone(),
                    None => return Ok(ok),
                }
            } else {
                list_of(all.into_iter().map(|(_, o)| o).collect())
            };
            let v = hide_managed_fields(v);
            match &format {
                GetOutput::Json => writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?,
                GetOutput::Yaml => write!(out, "{}", output::to_yaml(&v))?,
                GetOutput::JsonPath(t) => write!(out, "{}", t.render(&v).map_err(jsonpath::execution_error)?)?,
                _ => unreachable!(),
            }
        }
        GetOutput::Name => {
            for (kind, o) in &all {
                writeln!(out, "{}", name_line(*kind, o, client.group()))?;
            }
        }
        GetOutput::CustomColumns(cols) => {
            let headers: Vec<&str> = cols.iter().map(|c| c.header.as_str()).collect();
            let rows = all
                .iter()
                .map(|(_, o)| cols.iter().map(|c| jsonpath::cell(c, o)).collect())
                .collect();
            if !all.is_empty() {
                let headers: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
                write!(out, "{}", table_text(&headers, rows, args.no_headers))?;
            }
        }
        GetOutput::Table | GetOutput::Wide => {
            let wide = matches!(format, GetOutput::Wide);
            // kubectl get: with several kinds asked for, NAME is `kind.group/name`.
            let with_kind = targets.len() > 1;
            let mut first = true;
            for r in reads.iter().filter(|r| !r.items.is_empty()) {
                let ctx = row_context(client, r.kind, wide, args.at.as_deref()).await?;
                let mut rows: Vec<Vec<String>> = r
                    .items
                    .iter()
                    .map(|o| {
                        let mut row = output::row(r.kind, o, &ctx);
                        if with_kind {
                            if let Some(c) = row.first_mut() {
                                *c = name_line(r.kind, o, client.group());
                            }
                        }
                        row
                    })
                    .collect();
                let mut headers: Vec<String> = output::headers(r.kind, wide).iter().map(|h| h.to_string()).collect();
                label_cells(args, &mut headers, &mut rows, &r.items);
                if !first {
                    writeln!(out)?;
                }
                first = false;
                write!(out, "{}", table_text(&headers, rows, args.no_headers))?;
            }
        }
    }
    // kubectl says "No resources found" only with its human-readable printers.
    if reads.iter().all(|r| r.items.is_empty())
        && ok
        && !matches!(format, GetOutput::Json | GetOutput::Yaml | GetOutput::JsonPath(_))
    {
        eprintln!("No resources found");
    }
    Ok(ok)
}

fn name_line(kind: Kind, o: &Value, group: &str) -> String {
    format!(
        "{}/{}",
        resource_name(kind, group),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// `mco get -w`: the current objects (unless `--watch-only`), then one row (or object, or
/// name) per change, as kubectl prints them; DELETED objects print their last state.
async fn watch(
    client: &Client,
    t: &Target,
    args: &GetArgs,
    format: &GetOutput,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<bool> {
    let mut selectors = args.selectors.clone();
    if let Some(n) = t.names.first() {
        selectors.field = Some(format!("metadata.name={n}"));
    }
    // The list, then its changes: a cut or ended watch (the server stopped, or the writer
    // failed over to a standby) is resumed from the last resourceVersion seen, on the next
    // server of a `--server` list (resourceVersions are one sequence across servers), so no
    // change is printed twice or missed; a 410 Expired lists again (below).
    let mut watcher = Watcher::new(client.clone(), t.kind, selectors);
    let items = match watcher.next().await {
        Ok(Event::Listed { objects, .. }) => objects,
        Ok(_) => unreachable!("a watcher lists first"),
        Err(e) => bail!(watch_error(&e)),
    };
    if let Some(n) = t.names.first() {
        if items.is_empty() {
            bail!(
                "Error from server (NotFound): {} {n:?} not found",
                resource_name(t.kind, client.group())
            );
        }
    }
    let wide = matches!(format, GetOutput::Wide);
    let ctx = row_context(client, t.kind, wide, None).await?;
    let headers: Vec<String> = match format {
        GetOutput::CustomColumns(cols) => cols.iter().map(|c| c.header.clone()).collect(),
        _ => output::headers(t.kind, wide).iter().map(|h| h.to_string()).collect(),
    };
    let cells = |o: &Value| -> Vec<String> {
        match format {
            GetOutput::CustomColumns(cols) => cols.iter().map(|c| jsonpath::cell(c, o)).collect(),
            _ => output::row(t.kind, o, &ctx),
        }
    };
    let tabular = matches!(format, GetOutput::Table | GetOutput::Wide | GetOutput::CustomColumns(_));
    let first_rows: Vec<Vec<String>> = if args.watch_only {
        Vec::new()
    } else {
        items.iter().map(cells).collect()
    };
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut widths = output::widths(&header_refs, &first_rows);
    let mut printed_header = false;
    let print_one = |o: &Value,
                     out: &mut (dyn Write + Send),
                     widths: &mut Vec<usize>,
                     printed_header: &mut bool|
     -> anyhow::Result<()> {
        match format {
            GetOutput::Json => writeln!(out, "{}", serde_json::to_string_pretty(o)?)?,
            GetOutput::Yaml => write!(out, "---\n{}", output::to_yaml(o))?,
            GetOutput::Name => writeln!(out, "{}", name_line(t.kind, o, client.group()))?,
            GetOutput::JsonPath(tpl) => write!(out, "{}", tpl.render(o).map_err(jsonpath::execution_error)?)?,
            _ => {
                let row = cells(o);
                if !*printed_header {
                    *widths = output::widths(&header_refs, std::slice::from_ref(&row))
                        .into_iter()
                        .zip(widths.iter())
                        .map(|(a, b)| a.max(*b))
                        .collect();
                    write!(out, "{}", output::line(&headers, widths))?;
                    *printed_header = true;
                }
                write!(out, "{}", output::line(&row, widths))?;
            }
        }
        out.flush()?;
        Ok(())
    };
    if !args.watch_only {
        if tabular && !items.is_empty() {
            write!(out, "{}", output::line(&headers, &widths))?;
            printed_header = true;
        }
        for o in &items {
            if tabular {
                write!(out, "{}", output::line(&cells(o), &widths))?;
            } else {
                print_one(o, out, &mut widths, &mut printed_header)?;
            }
        }
        out.flush()?;
    }
    // What was printed last of each object, so that a re-list prints what changed meanwhile.
    let mut known: BTreeMap<String, Value> = items.into_iter().map(|o| (object_key(&o), o)).collect();
    loop {
        match watcher.next().await {
            Ok(Event::Applied { object, .. }) => {
                print_one(&object, out, &mut widths, &mut printed_header)?;
                known.insert(object_key(&object), object);
            }
            Ok(Event::Deleted { object, .. }) => {
                print_one(&object, out, &mut widths, &mut printed_header)?;
                known.remove(&object_key(&object));
            }
            // After 410 Expired: the objects that changed while unwatched, then the last state
            // of those deleted meanwhile (client-go's reflector replaces its store the same way).
            Ok(Event::Listed { objects, .. }) => {
                for o in relisted(&mut known, objects) {
                    print_one(&o, out, &mut widths, &mut printed_header)?;
                }
            }
            Err(e) => bail!(watch_error(&e)),
        }
    }
}

/// `namespace/name` of an object (a cluster-scoped one's namespace is empty).
fn object_key(o: &Value) -> String {
    let m = &o["metadata"];
    format!(
        "{}/{}",
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().unwrap_or("")
    )
}

/// What a re-list (after 410 Expired) shows of the objects `known` held: each listed object
/// that is new or differs from its known state, then the last known state of each object the
/// list no longer has (deleted meanwhile, as a DELETED event prints it). `known` becomes the
/// list (client-go's reflector replaces its store the same way).
fn relisted(known: &mut BTreeMap<String, Value>, objects: Vec<Value>) -> Vec<Value> {
    let mut gone = std::mem::take(known);
    let mut show = Vec::new();
    for o in objects {
        let key = object_key(&o);
        if gone.remove(&key).is_none_or(|was| was != o) {
            show.push(o.clone());
        }
        known.insert(key, o);
    }
    show.extend(gone.into_values());
    show
}

/// A watch's failure as `get -w` reports it: the request's error as every verb does, or the
/// ERROR event's message.
fn watch_error(e: &WatchError) -> String {
    match e {
        WatchError::Request(e) => describe_error(e),
        WatchError::Ended(_) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A single object keeps exactly its own keys (no `items: null` added), so kubectl can
    /// apply what `mco get NAME -o yaml` prints; a list loses managedFields from every item.
    #[test]
    fn hiding_managed_fields_adds_no_keys() {
        let obj = serde_json::json!({"kind": "MachineConfig", "metadata": {"name": "a", "managedFields": []}});
        assert_eq!(
            hide_managed_fields(obj),
            serde_json::json!({"kind": "MachineConfig", "metadata": {"name": "a"}})
        );
        let list = list_of(vec![
            serde_json::json!({"metadata": {"name": "a", "managedFields": []}}),
            serde_json::json!({}),
        ]);
        let want = list_of(vec![
            serde_json::json!({"metadata": {"name": "a"}}),
            serde_json::json!({}),
        ]);
        assert_eq!(hide_managed_fields(list), want);
    }

    fn t(args: &[&str]) -> anyhow::Result<Vec<Target>> {
        resolve(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn targets_resolve_as_kubectl() {
        assert_eq!(
            t(&["mcp", "worker", "master"]).unwrap(),
            vec![Target {
                kind: Kind::MachineConfigPool,
                names: vec!["worker".into(), "master".into()]
            }]
        );
        assert_eq!(
            t(&["mcp/worker", "node/worker-0", "mcp/master"]).unwrap(),
            vec![
                Target {
                    kind: Kind::MachineConfigPool,
                    names: vec!["worker".into(), "master".into()]
                },
                Target {
                    kind: Kind::Node,
                    names: vec!["worker-0".into()]
                }
            ]
        );
        assert_eq!(t(&["mcp,nodes"]).unwrap().len(), 2);
        assert!(t(&["mcp", "mcp/worker"])
            .unwrap_err()
            .to_string()
            .contains("resource/name form"));
        assert!(t(&["mcp/worker", "master"]).is_err());
        assert!(t(&["pods"])
            .unwrap_err()
            .to_string()
            .contains("doesn't have a resource type"));
        assert!(t(&[]).is_err());
        // k8s.io/cli-runtime builder.go splitResourceTypeName's messages.
        for bad in [&["mcp/"][..], &["/worker"], &["mcp,node/worker"]] {
            assert_eq!(
                t(bad).unwrap_err().to_string(),
                "arguments in resource/name form must have a single resource and name"
            );
        }
        assert_eq!(
            t(&["mcp/a/b"]).unwrap_err().to_string(),
            "arguments in resource/name form may not have more than one slash"
        );
    }

    /// A re-list shows what changed while unwatched: a changed and a new object, then the last
    /// state of a deleted one; an unchanged one is not shown again.
    #[test]
    fn a_relist_shows_what_changed_meanwhile() {
        let obj = |name: &str, rv: &str| serde_json::json!({"metadata": {"name": name, "resourceVersion": rv}});
        let mut known: BTreeMap<String, Value> = [obj("a", "1"), obj("b", "2"), obj("c", "3")]
            .into_iter()
            .map(|o| (object_key(&o), o))
            .collect();
        let shown = relisted(&mut known, vec![obj("a", "1"), obj("b", "7"), obj("d", "8")]);
        assert_eq!(shown, [obj("b", "7"), obj("d", "8"), obj("c", "3")]);
        assert_eq!(known.keys().collect::<Vec<_>>(), ["/a", "/b", "/d"]);
    }

    #[test]
    fn output_formats_parse() {
        assert!(matches!(GetOutput::parse(None).unwrap(), GetOutput::Table));
        assert!(matches!(
            GetOutput::parse(Some("jsonpath={.metadata.name}")).unwrap(),
            GetOutput::JsonPath(_)
        ));
        assert!(matches!(
            GetOutput::parse(Some("custom-columns=N:.metadata.name")).unwrap(),
            GetOutput::CustomColumns(_)
        ));
        let e = GetOutput::parse(Some("table")).unwrap_err().to_string();
        assert!(e.contains("allowed formats"), "{e}");
        assert!(GetOutput::parse(Some("jsonpath={.a[}")).is_err());
    }
}
