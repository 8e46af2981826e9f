//! `mco explain RESOURCE[.field.path]`: kubectl explain's documentation of a kind and its
//! fields, read from the server's `/openapi/v3` as kubectl reads it, printed in kubectl's
//! `plaintext` shape (`GROUP`/`KIND`/`VERSION`, `FIELD: name <type>`, `DESCRIPTION`, `FIELDS`,
//! `--recursive`), with its errors and exit code 1.
//!
//! Owns the resolution of the argument against discovery and the rendering; it never reads a
//! schema from mco's own code, only what the server serves. Sources (kubectl 1.33):
//! k8s.io/kubectl pkg/cmd/explain/explain.go (`Run`: the argument, `--api-version`),
//! pkg/explain/explain.go (`SplitAndParseResourceRequestWithMatchingPrefix`),
//! pkg/explain/v2/explain.go (`printModelDescriptionWithGenerator`: the group-version's
//! document), pkg/explain/v2/templates/plaintext.tmpl (the output, ported template by template:
//! `output`, `fieldList`, `fieldDetail`, `description`, `typeGuess`, `extractEnum`) and
//! pkg/explain/v2/funcs.go (`wrap`: go-wordwrap's `WrapString`;
//! `indent`; `resolveRef`). Go templates range over a map in key order: so do these.

use crate::client::Client;
use serde_json::Value;
use std::collections::BTreeSet;

/// The arguments of `explain`.
#[derive(clap::Args, Clone)]
pub struct ExplainArgs {
    #[command(flatten)]
    pub conn: super::conn::Conn,
    /// `RESOURCE` or `RESOURCE.field.path` (`mcp`, `mc.spec.config`, `nodes.spec`).
    #[arg(required = true, value_name = "RESOURCE[.FIELD...]")]
    pub resource: Vec<String>,
    /// Print the names of all fields, nested ones indented, without descriptions.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub recursive: Option<bool>,
    /// The kind in this group-version (`machineconfiguration.openshift.io/v1`, `v1`).
    #[arg(long, value_name = "GROUP/VERSION")]
    pub api_version: Option<String>,
    /// Output format: plaintext (kubectl's default; the only one mco prints).
    #[arg(long, default_value = "plaintext", value_name = "FORMAT")]
    pub output: String,
}

/// A served resource as discovery lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: String,
    pub version: String,
    /// The plural name (`machineconfigpools`).
    pub plural: String,
    singular: String,
    short: Vec<String>,
}

impl Resource {
    /// apimachinery's `GroupVersionResource.String()`: `group/version, Resource=plural`.
    fn gvr(&self) -> String {
        format!("{}/{}, Resource={}", self.group, self.version, self.plural)
    }

    /// `GroupResource.String()`: `plural.group`, or `plural` in the core group.
    fn group_resource(&self) -> String {
        match self.group.is_empty() {
            true => self.plural.clone(),
            false => format!("{}.{}", self.plural, self.group),
        }
    }
}

/// Every resource the server's discovery lists (subresources left out), in kubectl's priority
/// order: the core group, then each group of `/apis` in its order, its preferred version first.
pub async fn discover(client: &Client) -> Result<Vec<Resource>, crate::client::ClientError> {
    let mut gvs: Vec<(String, String)> = Vec::new();
    let core: Value = client.get_path("/api").await?;
    for v in core["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        gvs.push((String::new(), v.to_string()));
    }
    let groups: Value = client.get_path("/apis").await?;
    for g in groups["groups"].as_array().into_iter().flatten() {
        let name = g["name"].as_str().unwrap_or_default();
        let preferred = g["preferredVersion"]["version"].as_str().unwrap_or_default();
        let mut versions: Vec<&str> = g["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["version"].as_str())
            .collect();
        versions.sort_by_key(|v| *v != preferred);
        gvs.extend(versions.into_iter().map(|v| (name.to_string(), v.to_string())));
    }
    let mut out = Vec::new();
    for (group, version) in gvs {
        let path = match group.is_empty() {
            true => format!("/api/{version}"),
            false => format!("/apis/{group}/{version}"),
        };
        let list: Value = client.get_path(&path).await?;
        for r in list["resources"].as_array().into_iter().flatten() {
            let plural = r["name"].as_str().unwrap_or_default();
            if plural.contains('/') {
                continue;
            }
            let singular = match r["singularName"].as_str().filter(|s| !s.is_empty()) {
                Some(s) => s.to_string(),
                None => r["kind"].as_str().unwrap_or_default().to_ascii_lowercase(),
            };
            out.push(Resource {
                group: group.clone(),
                version: version.clone(),
                plural: plural.to_string(),
                singular,
                short: r["shortNames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// kubectl's RESTMapper `ResourcesFor` on a bare resource name: a short name expands to its
/// resource first (the shortcut expander), then plural or singular names match, case-insensitively.
fn resources_for<'a>(all: &'a [Resource], name: &str) -> Vec<&'a Resource> {
    let name = name.to_ascii_lowercase();
    if let Some(short) = all.iter().find(|r| r.short.contains(&name)) {
        return all
            .iter()
            .filter(|r| r.group == short.group && r.plural == short.plural)
            .collect();
    }
    all.iter().filter(|r| r.plural == name || r.singular == name).collect()
}

fn no_type(name: &str) -> String {
    format!("the server doesn't have a resource type {name:?}")
}

/// The resource and field path `arg` names: kubectl's
/// `SplitAndParseResourceRequestWithMatchingPrefix` (`RESOURCE.GROUP.field` when a resource's
/// `plural.group` prefixes the argument), or with `--api-version` its plain
/// `SplitAndParseResourceRequest` and the group-version replaced. The error is the line kubectl
/// prints: the mapper's text bare, the group-version's after `error: `.
pub fn resolve(all: &[Resource], arg: &str, api_version: Option<&str>) -> Result<(Resource, Vec<String>), String> {
    let arg = arg.strip_suffix('.').unwrap_or(arg);
    let parts: Vec<&str> = arg.split('.').collect();
    let fields = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let found = resources_for(all, parts[0]);
    let Some(first) = found.first() else {
        return Err(no_type(parts[0]));
    };
    if let Some(gv) = api_version {
        let (group, version) = match gv.matches('/').count() {
            0 => ("", gv),
            1 => gv.split_once('/').expect("one slash"),
            _ => return Err(format!("error: unexpected GroupVersion string: {gv}")),
        };
        let mut r = (*first).clone();
        (r.group, r.version) = (group.to_string(), version.to_string());
        return Ok((r, fields(&parts[1..])));
    }
    for r in &found {
        let gr = r.group_resource();
        if let Some(rest) = arg.strip_prefix(gr.as_str()) {
            let path = match rest.is_empty() {
                true => Vec::new(),
                false => fields(&rest.split('.').collect::<Vec<_>>()[1..]),
            };
            return Ok(((*r).clone(), path));
        }
    }
    Ok(((*first).clone(), fields(&parts[1..])))
}

/// What a render printed before it failed, and the error (kubectl's template output goes to
/// stdout as it is produced; the error then ends the command).
#[derive(Debug, PartialEq, Eq)]
pub struct Failed {
    pub printed: String,
    pub error: String,
}

/// Go template truth: false for a missing value, `false`, 0, `""`, an empty list or map.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// A field of a schema, when it is truthy.
fn get<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema.get(key).filter(|v| truthy(Some(v)))
}

/// `additionalProperties` when it is a schema (not a boolean) and truthy.
fn additional(schema: &Value) -> Option<&Value> {
    get(schema, "additionalProperties").filter(|v| !v.is_boolean())
}

/// Go's `%v` of a JSON value as kubectl's templates print it.
fn go_print(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        Value::Null => "<nil>".to_string(),
        other => other.to_string(),
    }
}

/// The sorted keys and values of a map (Go's `range` over a map).
fn sorted(v: Option<&Value>) -> Vec<(&String, &Value)> {
    let mut out: Vec<_> = v.and_then(Value::as_object).into_iter().flatten().collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// kubectl 1.33's `wrap`: go-wordwrap 1.0.1's `WrapString` at `lim` characters (breaks at
/// white space other than no-break space, keeps the text's own line breaks; a word longer
/// than the limit stays whole).
pub fn wrap(lim: usize, s: &str) -> String {
    let (mut buf, mut word, mut space) = (String::new(), String::new(), String::new());
    let (mut current, mut word_len, mut space_len) = (0usize, 0usize, 0usize);
    for c in s.chars() {
        if c == '\n' {
            flush(&mut buf, &space, &word, current + space_len <= lim);
            (space, word) = (String::new(), String::new());
            (space_len, word_len, current) = (0, 0, 0);
            buf.push('\n');
        } else if c.is_whitespace() && c != '\u{a0}' {
            if space.is_empty() || !word.is_empty() {
                current += space_len + word_len;
                buf.push_str(&space);
                buf.push_str(&word);
                (space, word) = (String::new(), String::new());
                (space_len, word_len) = (0, 0);
            }
            space.push(c);
            space_len += 1;
        } else {
            word.push(c);
            word_len += 1;
            if current + space_len + word_len > lim && word_len < lim {
                buf.push('\n');
                current = 0;
                space.clear();
                space_len = 0;
            }
        }
    }
    flush(&mut buf, &space, &word, current + space_len <= lim);
    buf
}

/// go-wordwrap's flush of the pending spaces and word at a line break or the end: spaces alone
/// are dropped when they would pass the limit (`fits` false).
fn flush(buf: &mut String, space: &str, word: &str, fits: bool) {
    if !word.is_empty() || fits {
        buf.push_str(space);
    }
    buf.push_str(word);
}

/// kubectl's `indent`: `n` spaces before the text and after each of its line breaks.
pub fn indent(n: usize, s: &str) -> String {
    let pad = " ".repeat(n);
    format!("{pad}{}", s.replace('\n', &format!("\n{pad}")))
}

/// The renderer over one group-version's OpenAPI v3 document.
struct Render<'a> {
    doc: &'a Value,
    recursive: bool,
}

type History = BTreeSet<String>;

impl<'a> Render<'a> {
    /// `resolveRef`: a fragment-only `$ref` (`#/components/schemas/X`) followed through the
    /// document; `None` when it is not one or leads nowhere (or to an empty map).
    fn resolve_ref(&self, r: Option<&Value>) -> Option<&'a Value> {
        let fragment = r?.as_str()?.strip_prefix('#')?;
        let mut cur = self.doc;
        for k in fragment.split('/').filter(|k| !k.is_empty()) {
            cur = cur.get(k).filter(|v| v.is_object())?;
        }
        Some(cur).filter(|v| truthy(Some(v)))
    }

    fn ref_string(schema: &Value) -> String {
        get(schema, "$ref").map(go_print).unwrap_or_default()
    }

    /// The `output` template: follows the field path, then the description and field list.
    fn output(&self, schema: &'a Value, history: &History, path: &[String], out: &mut String) -> Result<(), String> {
        let r = Self::ref_string(schema);
        let mut next = history.clone();
        next.insert(r.clone());
        let resolved = self.resolve_ref(schema.get("$ref")).unwrap_or(schema);
        if path.is_empty() {
            out.push_str("DESCRIPTION:\n");
            let mut d = String::new();
            self.description(resolved, &mut d);
            let d = if d.is_empty() { "<empty>".to_string() } else { d };
            out.push_str(&indent(4, &wrap(76, &d)));
            out.push('\n');
            let mut fields = String::new();
            self.field_list(resolved, 1, &History::new(), &mut fields)?;
            if !fields.is_empty() {
                out.push_str("FIELDS:\n");
                out.push_str(&fields);
            }
        } else if !r.is_empty() && history.contains(&r) {
            // A cycle: nothing.
        } else if let Some(sub) = get(resolved, "properties").and_then(|p| get(p, &path[0])) {
            if path.len() == 1 {
                out.push_str(&format!("FIELD: {} <{}>\n", path[0], self.type_guess(sub)?));
                out.push_str(&extract_enum(sub, true, -1, 0));
                out.push_str("\n\n");
            }
            self.output(sub, &History::new(), &path[1..], out)?;
        } else if let Some(items) = get(resolved, "items") {
            self.output(items, &next, path, out)?;
        } else if let Some(ap) = additional(resolved) {
            self.output(ap, &next, path, out)?;
        } else {
            for sub in resolved.get("allOf").and_then(Value::as_array).into_iter().flatten() {
                let mut one = String::new();
                self.output(sub, &next, path, &mut one)?;
                if !one.is_empty() {
                    out.push_str(&one);
                    break;
                }
            }
        }
        Ok(())
    }

    /// The `fieldList` template: each property (`fieldDetail`), nested ones when recursive,
    /// then those of `allOf`, `items` and `additionalProperties`; a `$ref` seen on the way ends it.
    fn field_list(&self, schema: &'a Value, level: usize, history: &History, out: &mut String) -> Result<(), String> {
        let r = Self::ref_string(schema);
        if !r.is_empty() && history.contains(&r) {
            return Ok(());
        }
        let mut next = history.clone();
        next.insert(r);
        let resolved = self.resolve_ref(schema.get("$ref")).unwrap_or(schema);
        for (name, v) in sorted(resolved.get("properties")) {
            self.field_detail(name, resolved, level, out)?;
            if self.recursive {
                self.field_list(v, level + 1, &next, out)?;
            }
        }
        for sub in resolved.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            self.field_list(sub, level, &next, out)?;
        }
        if let Some(items) = get(resolved, "items") {
            self.field_list(items, level, &next, out)?;
        }
        if let Some(ap) = additional(resolved) {
            self.field_list(ap, level, &next, out)?;
        }
        Ok(())
    }

    /// The `fieldDetail` template: `name\t<type>` (` -required-`, the first four enum values),
    /// then, unless recursive, the field's own description wrapped and indented.
    fn field_detail(&self, name: &str, schema: &Value, level: usize, out: &mut String) -> Result<(), String> {
        let pad = level * 2;
        let field = &schema["properties"][name];
        out.push_str(&indent(pad, name));
        out.push_str(&format!("\t<{}>", self.type_guess(field)?));
        let required = schema["required"]
            .as_array()
            .is_some_and(|r| r.iter().any(|x| x == name));
        if required {
            out.push_str(" -required-");
        }
        out.push_str(&extract_enum(field, false, 4, pad));
        out.push('\n');
        if !self.recursive {
            let d = get(field, "description").map(go_print);
            let d = d.unwrap_or_else(|| "<no description>".to_string());
            out.push_str(&indent(pad + 2, &wrap(78usize.saturating_sub(pad), &d)));
            out.push_str("\n\n");
        }
        Ok(())
    }

    /// The `description` template: the (resolved) schema's description, then those of its
    /// `allOf`, `items` and `additionalProperties`, each followed by a line break.
    fn description(&self, schema: &Value, out: &mut String) {
        let s = self.resolve_ref(schema.get("$ref")).unwrap_or(schema);
        if !truthy(Some(s)) {
            return;
        }
        if let Some(d) = get(s, "description") {
            out.push_str(&go_print(d));
            out.push('\n');
        }
        for sub in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
            self.description(sub, out);
        }
        if let Some(items) = get(s, "items") {
            self.description(items, out);
        }
        if let Some(ap) = additional(s) {
            self.description(ap, out);
        }
    }

    /// The `typeGuess` template: `[]T`, `map[string]T`, a referenced object's short name, the
    /// type, or `Object`.
    fn type_guess(&self, schema: &Value) -> Result<String, String> {
        if !truthy(Some(schema)) {
            return Err("expected schema argument to subtemplate 'typeguess'".to_string());
        }
        if let Some(items) = get(schema, "items") {
            return Ok(format!("[]{}", self.type_guess(items)?));
        }
        if let Some(ap) = additional(schema) {
            return Ok(format!("map[string]{}", self.type_guess(ap)?));
        }
        let all_of = schema.get("allOf").and_then(Value::as_array);
        if let (Some([one]), false) = (all_of.map(Vec::as_slice), truthy(schema.get("properties"))) {
            return self.type_guess(one);
        }
        if let Some(r) = get(schema, "$ref") {
            let target = self.resolve_ref(Some(r));
            let ty = target.and_then(|t| get(t, "type"));
            return Ok(match ty {
                Some(t) if t != "object" => go_print(t),
                _ => {
                    let name = go_print(r);
                    let last = name.rsplit('/').next().unwrap_or_default();
                    let short = last.rsplit('.').next().unwrap_or_default();
                    if short.is_empty() { "Object" } else { short }.to_string()
                }
            });
        }
        Ok(match get(schema, "type") {
            Some(t) if t == "object" => "Object".to_string(),
            Some(t) => go_print(t),
            None => "Object".to_string(),
        })
    }
}

/// The `extractEnum` template: `ENUM:` and one value a line (`long`), or `\n<pad>enum: a, b`
/// with at most `limit` values then `, ....`; `""` for the empty string.
fn extract_enum(schema: &Value, long: bool, limit: i64, pad: usize) -> String {
    let Some(values) = get(schema, "enum").and_then(Value::as_array) else {
        return String::new();
    };
    let mut out = match long {
        true => "ENUM:".to_string(),
        false => format!("\n{}enum: ", " ".repeat(pad)),
    };
    for (i, v) in values.iter().enumerate() {
        if limit > -1 && i as i64 >= limit {
            out.push_str(", ....");
            break;
        }
        if i > 0 && !long {
            out.push_str(", ");
        } else if long {
            out.push_str("\n    ");
        }
        match v.as_str() {
            Some("") => out.push_str("\"\""),
            _ => out.push_str(&go_print(v)),
        }
    }
    out
}

/// Go's `%v` of a group-version-kind map (`map[group:g kind:K version:v]`, keys sorted).
fn go_map(v: &Value) -> String {
    let items: Vec<String> = sorted(Some(v))
        .into_iter()
        .map(|(k, v)| format!("{k}:{}", go_print(v)))
        .collect();
    format!("map[{}]", items.join(" "))
}

/// kubectl's `plaintext` explain of resource `r`, field path `path`, from the group-version's
/// OpenAPI v3 `doc`: the text, or what was printed before the error and the error.
pub fn render(doc: &Value, r: &Resource, path: &[String], recursive: bool) -> Result<String, Failed> {
    let prefix = match r.group.is_empty() {
        true => "/api".to_string(),
        false => format!("/apis/{}", r.group),
    };
    let (v, res) = (&r.version, &r.plural);
    let searched = [
        format!("{prefix}/{v}/{res}"),
        format!("{prefix}/{v}/{res}/{{name}}"),
        format!("{prefix}/{v}/namespaces/{{namespace}}/{res}"),
        format!("{prefix}/{v}/namespaces/{{namespace}}/{res}/{{name}}"),
    ];
    let mut gvk: Option<&Value> = None;
    for p in &searched {
        let Some(element) = get(&doc["paths"], p) else { continue };
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(op) = get(element, method) {
                gvk = op.get("x-kubernetes-group-version-kind");
                if truthy(gvk) {
                    break;
                }
            }
        }
    }
    let fail = |printed: &str, error: String| Failed {
        printed: printed.to_string(),
        error,
    };
    let Some(gvk) = gvk.filter(|g| truthy(Some(g))) else {
        return Err(fail(
            "",
            format!("error: GVR ({}) not found in OpenAPI schema", r.gvr()),
        ));
    };
    let mut out = String::new();
    if let Some(g) = get(gvk, "group") {
        out.push_str(&format!("GROUP:      {}\n", go_print(g)));
    }
    out.push_str(&format!("KIND:       {}\n", go_print(&gvk["kind"])));
    out.push_str(&format!("VERSION:    {}\n\n", go_print(&gvk["version"])));
    let render = Render { doc, recursive };
    let mut body = String::new();
    for (_, s) in sorted(doc.get("components").and_then(|c| c.get("schemas"))) {
        let listed = s["x-kubernetes-group-version-kind"].as_array();
        if listed.is_some_and(|l| l.contains(gvk)) {
            render
                .output(s, &History::new(), path, &mut body)
                .map_err(|e| fail(&out, format!("error: {e}")))?;
            if body.is_empty() {
                let last = path.last().cloned().unwrap_or_default();
                return Err(fail(&out, format!("error: field {last:?} does not exist")));
            }
            break;
        }
    }
    if body.is_empty() {
        return Err(fail(
            &out,
            format!("error: GVK {} not found in OpenAPI schema", go_map(gvk)),
        ));
    }
    out.push_str(&body);
    out.push('\n');
    Ok(out)
}

/// `mco explain`: prints the explanation, or kubectl's error (exit 1).
pub async fn run(a: ExplainArgs) -> anyhow::Result<std::process::ExitCode> {
    let [arg] = a.resource.as_slice() else {
        anyhow::bail!("We accept only this format: explain RESOURCE");
    };
    if a.output != "plaintext" {
        anyhow::bail!("unrecognized format: {}", a.output);
    }
    let client = super::connect(&a.conn.url()).await?;
    let err = |e: crate::client::ClientError| anyhow::anyhow!(super::describe_error(&e));
    let all = discover(&client).await.map_err(err)?;
    let (r, path) = match resolve(&all, arg, a.api_version.as_deref()) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("{e}");
            return Ok(std::process::ExitCode::FAILURE);
        }
    };
    let index: Value = client.get_path("/openapi/v3").await.map_err(err)?;
    let key = match r.group.is_empty() {
        true => format!("api/{}", r.version),
        false => format!("apis/{}/{}", r.group, r.version),
    };
    let Some(url) = index["paths"][&key]["serverRelativeURL"].as_str() else {
        anyhow::bail!("couldn't find resource for \"{}\"", r.gvr());
    };
    let doc: Value = client.get_path(url).await.map_err(err)?;
    match render(&doc, &r, &path, a.recursive.unwrap_or(false)) {
        Ok(text) => {
            print!("{text}");
            Ok(std::process::ExitCode::SUCCESS)
        }
        Err(f) => {
            print!("{}", f.printed);
            eprintln!("{}", f.error);
            Ok(std::process::ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_keeps_long_words() {
        assert_eq!(wrap(10, "aaa bbb ccc ddd"), "aaa bbb\nccc ddd");
        assert_eq!(wrap(5, "abcdefgh ij"), "abcdefgh\nij");
        assert_eq!(wrap(76, "one.\ntwo\n"), "one.\ntwo\n");
        assert_eq!(indent(4, "a\nb"), "    a\n    b");
    }

    fn res(group: &str, plural: &str, singular: &str, short: &[&str]) -> Resource {
        Resource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            singular: singular.into(),
            short: short.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_argument_resolves_as_kubectls_mapper_does() {
        let all = [
            res("", "events", "event", &["ev"]),
            res("m.io", "machineconfigpools", "machineconfigpool", &["mcp"]),
            res("history.mco.dev", "events", "event", &[]),
        ];
        let (r, p) = resolve(&all, "mcp.spec.paused", None).unwrap();
        assert_eq!(
            (r.plural.as_str(), p),
            ("machineconfigpools", vec!["spec".to_string(), "paused".into()])
        );
        let (r, p) = resolve(&all, "MachineConfigPool.", None).unwrap();
        assert_eq!((r.group.as_str(), p.len()), ("m.io", 0));
        let (r, p) = resolve(&all, "machineconfigpools.m.io.spec", None).unwrap();
        assert_eq!((r.group.as_str(), p), ("m.io", vec!["spec".to_string()]));
        assert_eq!(
            resolve(&all, "nope.spec", None).unwrap_err(),
            r#"the server doesn't have a resource type "nope""#
        );
        let (r, _) = resolve(&all, "mcp", Some("m.io/v2")).unwrap();
        assert_eq!(r.gvr(), "m.io/v2, Resource=machineconfigpools");
    }
}
