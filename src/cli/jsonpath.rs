//! kubectl's `-o jsonpath=TEMPLATE` and `-o custom-columns=SPEC` for `mco get`.
//!
//! Owns the translation of kubectl's JSONPath dialect (k8s.io/client-go/util/jsonpath: `{...}`
//! templates, `{range ...}{end}`, quoted literals, `\.` escapes in names) to RFC 9535 queries,
//! which the `serde_json_path` crate evaluates. Owns nothing about fetching objects.

use serde_json::Value;
use serde_json_path::JsonPath;

/// One piece of a parsed template.
#[derive(Debug)]
enum Node {
    Text(String),
    Path(Query),
    Range(Query, Vec<Node>),
}

/// A compiled kubectl path expression, with what client-go's evaluator needs beyond RFC 9535:
/// each literal array index (`[99]`) and the query of the array it indexes, so that an index
/// past the end is an error ("array index out of bounds"), as kubectl reports it, rather than
/// nothing printed.
#[derive(Debug)]
struct Query {
    path: JsonPath,
    indexes: Vec<(JsonPath, i64)>,
}

impl Query {
    fn compile(expr: &str) -> Result<Query, String> {
        let (rfc, indexes) = translate(expr)?;
        let parse = |q: &str| JsonPath::parse(q).map_err(|e| format!("invalid JSONPath {expr:?}: {e}"));
        Ok(Query {
            path: parse(&rfc)?,
            indexes: indexes
                .into_iter()
                .map(|(prefix, i)| Ok((parse(&prefix)?, i)))
                .collect::<Result<_, String>>()?,
        })
    }

    /// The matched values, or client-go's error for a literal index past an array's end
    /// (k8s.io/client-go/util/jsonpath jsonpath.go `evalArray`).
    fn eval<'v>(&self, at: &'v Value) -> Result<Vec<&'v Value>, String> {
        for (array, index) in &self.indexes {
            for v in array.query(at).all() {
                if let Value::Array(items) = v {
                    let len = items.len() as i64;
                    if *index >= len || *index < -len {
                        return Err(format!("array index out of bounds: index {index}, length {len}"));
                    }
                }
            }
        }
        Ok(self.path.query(at).all())
    }
}

/// A parsed kubectl JSONPath template such as `{.items[*].metadata.name}` or
/// `{range .items[*]}{.metadata.name}{"\n"}{end}`.
#[derive(Debug)]
pub struct Template {
    nodes: Vec<Node>,
}

impl Template {
    /// Parses `template`; errors name the offending expression.
    pub fn parse(template: &str) -> Result<Template, String> {
        let mut stack: Vec<(Option<Query>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                stack.last_mut().expect("stack").1.push(Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                stack
                    .last_mut()
                    .expect("stack")
                    .1
                    .push(Node::Text(rest[..open].to_string()));
            }
            let close =
                closing_brace(&rest[open..]).ok_or_else(|| format!("unclosed action in template {template:?}"))? + open;
            let inner = rest[open + 1..close].trim();
            rest = &rest[close + 1..];
            if let Some(expr) = inner.strip_prefix("range ") {
                stack.push((Some(Query::compile(expr.trim())?), Vec::new()));
            } else if inner == "end" {
                let (path, body) = stack.pop().expect("stack");
                let Some(path) = path else {
                    return Err(format!("{{end}} without {{range}} in template {template:?}"));
                };
                stack.last_mut().expect("stack").1.push(Node::Range(path, body));
            } else if let Some(lit) = quoted(inner) {
                stack.last_mut().expect("stack").1.push(Node::Text(lit));
            } else {
                stack
                    .last_mut()
                    .expect("stack")
                    .1
                    .push(Node::Path(Query::compile(inner)?));
            }
        }
        // kubectl (client-go jsonpath) accepts a `{range}` left open: it runs to the end.
        while stack.len() > 1 {
            let (path, body) = stack.pop().expect("stack");
            let path = path.expect("only ranges are pushed");
            stack.last_mut().expect("stack").1.push(Node::Range(path, body));
        }
        Ok(Template {
            nodes: stack.pop().expect("stack").1,
        })
    }

    /// Evaluates the template against `root`: kubectl prints several results of one
    /// expression separated by spaces, strings bare and other values as JSON.
    ///
    /// Errors: a literal index past the end of an array (`array index out of bounds: index 99,
    /// length 3`), as kubectl's evaluator reports it (the command then fails).
    pub fn render(&self, root: &Value) -> Result<String, String> {
        let mut out = String::new();
        render_nodes(&self.nodes, root, &mut out)?;
        Ok(out)
    }
}

/// kubectl's wording for a template that fails while it runs (k8s.io/kubectl pkg/cmd/get
/// `JSONPathPrinter`: "error executing jsonpath ...: Error executing template: ...").
pub fn execution_error(e: String) -> anyhow::Error {
    anyhow::anyhow!("error executing jsonpath: Error executing template: {e}")
}

fn render_nodes(nodes: &[Node], at: &Value, out: &mut String) -> Result<(), String> {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Path(p) => {
                let values: Vec<String> = p.eval(at)?.into_iter().map(scalar).collect();
                out.push_str(&values.join(" "));
            }
            Node::Range(p, body) => {
                for v in p.eval(at)? {
                    render_nodes(body, v, out)?;
                }
            }
        }
    }
    Ok(())
}

/// A value as kubectl's jsonpath prints it: strings bare, the rest as Go's `json.Marshal`
/// writes them (compact, object keys sorted).
pub fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => sorted(other).to_string(),
    }
}

/// `v` with every object's keys in sorted order (Go marshals maps sorted).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// A value as Go's `fmt` `%v` prints it, which kubectl's custom-columns printer uses:
/// `map[k:v k2:v2]` (keys sorted), `[a b]`, `<nil>`.
pub fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.into_iter().map(|k| format!("{k}:{}", go_value(&m[k]))).collect();
            format!("map[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// The index of the `}` closing the action opening `s` (which starts with `{`), skipping
/// quoted strings and nested brackets.
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '}' => return Some(i),
                _ => {}
            },
        }
    }
    None
}

/// `"text"` with Go escapes (`\n`, `\t`, `\"`, `\\`) → the text.
fn quoted(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Parses one kubectl path expression (`.metadata.name`, `$.items[*]`, `..name`,
/// `.metadata.annotations.example\.com/key`, `.status.conditions[?(@.type=="Ready")].status`)
/// into an RFC 9535 query.
pub fn to_query(expr: &str) -> Result<JsonPath, String> {
    let rfc = to_rfc9535(expr)?;
    JsonPath::parse(&rfc).map_err(|e| format!("invalid JSONPath {expr:?}: {e}"))
}

/// The RFC 9535 text of a kubectl path expression: names become `['name']` (so `/`, `-` and
/// escaped dots are plain characters), brackets pass through, `@` at the start reads as `$`.
/// A bracket holding one quoted name is a field path as client-go reads it: `['a\.b/c']` is the
/// key `a.b/c`, `['a.b']` the key `b` inside `a`.
pub fn to_rfc9535(expr: &str) -> Result<String, String> {
    translate(expr).map(|(rfc, _)| rfc)
}

/// `[N]` with a literal integer, if `bracket` is one.
fn literal_index(bracket: &str) -> Option<i64> {
    bracket.strip_prefix('[')?.strip_suffix(']')?.trim().parse().ok()
}

/// `'text'` or `"text"` alone in a bracket → the text (escapes kept for the name splitter).
fn quoted_name(bracket: &str) -> Option<String> {
    let inner = bracket.strip_prefix('[')?.strip_suffix(']')?.trim();
    let q = inner.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = inner.strip_prefix(q)?.strip_suffix(q)?;
    (!body.contains(q)).then(|| body.to_string())
}

/// The RFC 9535 text of `expr` and, for each literal array index in it, the query of the array
/// it indexes (the text so far) and the index.
fn translate(expr: &str) -> Result<(String, Vec<(String, i64)>), String> {
    let mut indexes = Vec::new();
    let s = expr.trim();
    let s = s.strip_prefix('$').or_else(|| s.strip_prefix('@')).unwrap_or(s);
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::from("$");
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                if chars.get(i) == Some(&'.') {
                    // `..name` / `..[sel]`: RFC 9535's descendant segment.
                    out.push_str("..");
                    i += 1;
                    if chars.get(i) == Some(&'[') {
                        continue;
                    }
                } else if chars.get(i).is_none() {
                    // `{.}`: the current object.
                    break;
                }
                let mut name = String::new();
                while let Some(&c) = chars.get(i) {
                    if c == '\\' && chars.get(i + 1).is_some() {
                        name.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    if c == '.' || c == '[' {
                        break;
                    }
                    name.push(c);
                    i += 1;
                }
                if name.is_empty() {
                    return Err(format!("invalid JSONPath {expr:?}: empty name at position {i}"));
                }
                if name == "*" {
                    out.push_str("[*]");
                } else {
                    out.push_str(&format!("['{}']", name.replace('\\', "\\\\").replace('\'', "\\'")));
                }
            }
            '[' => {
                let start = i;
                let mut depth = 0;
                let mut quote: Option<char> = None;
                while i < chars.len() {
                    let c = chars[i];
                    match quote {
                        Some(q) if c == q => quote = None,
                        Some(_) => {}
                        None => match c {
                            '\'' | '"' => quote = Some(c),
                            '[' => depth += 1,
                            ']' => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        },
                    }
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(format!("invalid JSONPath {expr:?}: unclosed '['"));
                }
                let bracket: String = chars[start..=i].iter().collect();
                if let Some(n) = literal_index(&bracket) {
                    indexes.push((out.clone(), n));
                    out.push_str(&bracket);
                } else if let Some(name) = quoted_name(&bracket) {
                    // client-go parses the quoted text as a field path: unescaped dots separate
                    // names, `\.` is a dot inside one.
                    let mut seg = String::new();
                    let mut names = Vec::new();
                    let mut it = name.chars().peekable();
                    while let Some(c) = it.next() {
                        match c {
                            '\\' if it.peek() == Some(&'.') => seg.push(it.next().expect("peeked")),
                            '.' => names.push(std::mem::take(&mut seg)),
                            c => seg.push(c),
                        }
                    }
                    names.push(seg);
                    for n in names {
                        out.push_str(&format!("['{}']", n.replace('\\', "\\\\").replace('\'', "\\'")));
                    }
                } else {
                    out.push_str(&bracket);
                }
                i += 1;
            }
            c if out == "$" && i == 0 => {
                // A bare name at the start (`metadata.name`), as kubectl's custom-columns allow.
                let _ = c;
                let rest: String = chars.iter().collect();
                return translate(&format!(".{rest}"));
            }
            c => return Err(format!("invalid JSONPath {expr:?}: unexpected {c:?} at position {i}")),
        }
    }
    Ok((out, indexes))
}

/// One `HEADER:PATH` of `-o custom-columns=`.
#[derive(Debug)]
pub struct Column {
    pub header: String,
    pub path: JsonPath,
}

/// Parses `-o custom-columns=NAME:.metadata.name,STATE:.metadata.annotations.x\.io/state`.
pub fn custom_columns(spec: &str) -> Result<Vec<Column>, String> {
    let mut cols = Vec::new();
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (header, path) = part.split_once(':').ok_or_else(|| {
            format!("custom-columns format: expected HEADER:JSONPATH pairs separated by commas, got {part:?}")
        })?;
        let path = path.trim();
        let path = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')).unwrap_or(path);
        cols.push(Column {
            header: header.to_string(),
            path: to_query(path)?,
        });
    }
    if cols.is_empty() {
        return Err("custom-columns format: give at least one HEADER:JSONPATH column".into());
    }
    Ok(cols)
}

/// The cell of one custom column: results joined by `,`, `<none>` when nothing matched
/// (kubectl's custom-columns printer).
pub fn cell(col: &Column, obj: &Value) -> String {
    let found = col.path.query(obj).all();
    if found.is_empty() {
        return "<none>".into();
    }
    found.into_iter().map(go_value).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(expr: &str, want: &str) {
        assert_eq!(to_rfc9535(expr).unwrap(), want, "{expr}");
    }

    #[test]
    fn kubectl_paths_translate() {
        check(".metadata.name", "$['metadata']['name']");
        check("$.items[*].metadata.name", "$['items'][*]['metadata']['name']");
        check(
            r".metadata.annotations.machineconfiguration\.openshift\.io/state",
            "$['metadata']['annotations']['machineconfiguration.openshift.io/state']",
        );
        check(
            r#".status.conditions[?(@.type=="Ready")].status"#,
            r#"$['status']['conditions'][?(@.type=="Ready")]['status']"#,
        );
        check("..name", "$..['name']");
        check("metadata.name", "$['metadata']['name']");
        check(".items.*", "$['items'][*]");
        // A quoted name in brackets is a field path, as client-go parses it.
        check(
            r".metadata.labels['kubernetes\.io/hostname']",
            "$['metadata']['labels']['kubernetes.io/hostname']",
        );
        check(
            ".metadata.labels['kubernetes.io/hostname']",
            "$['metadata']['labels']['kubernetes']['io/hostname']",
        );
        check(r#".metadata["name"]"#, "$['metadata']['name']");
        assert!(to_rfc9535(".a[0").is_err());
    }

    /// client-go's evaluator fails on a literal index past the end (jsonpath.go `evalArray`);
    /// slices and wildcards past the end select nothing.
    #[test]
    fn an_index_past_the_end_is_an_error() {
        let list = json!({"items": [{"n": 1}, {"n": 2}, {"n": 3}]});
        let t = Template::parse("{.items[99]}").unwrap();
        assert_eq!(
            t.render(&list).unwrap_err(),
            "array index out of bounds: index 99, length 3"
        );
        let t = Template::parse("{.items[-4].n}").unwrap();
        assert_eq!(
            t.render(&list).unwrap_err(),
            "array index out of bounds: index -4, length 3"
        );
        assert_eq!(Template::parse("{.items[2].n}").unwrap().render(&list).unwrap(), "3");
        assert_eq!(Template::parse("{.items[-1].n}").unwrap().render(&list).unwrap(), "3");
        assert_eq!(Template::parse("{.items[5:9]}").unwrap().render(&list).unwrap(), "");
        let t = Template::parse("{range .items[*]}{.n}{end}").unwrap();
        assert_eq!(t.render(&list).unwrap(), "123");
    }

    #[test]
    fn templates_render_as_kubectl() {
        let list = json!({"items": [
            {"metadata": {"name": "a", "labels": {"x": "1"}}},
            {"metadata": {"name": "b"}}
        ]});
        let t = Template::parse("{.items[*].metadata.name}").unwrap();
        assert_eq!(t.render(&list).unwrap(), "a b");
        let t = Template::parse(r#"{range .items[*]}{.metadata.name}{"\t"}{.metadata.labels}{"\n"}{end}"#).unwrap();
        assert_eq!(t.render(&list).unwrap(), "a\t{\"x\":\"1\"}\nb\t\n");
        let t = Template::parse("name={.metadata.name}").unwrap();
        assert_eq!(t.render(&list["items"][0]).unwrap(), "name=a");
        assert!(Template::parse("{.items[}").is_err());
    }

    #[test]
    fn custom_columns_cells() {
        let cols = custom_columns(r"NAME:.metadata.name,ZONE:.metadata.labels.topology\.kubernetes\.io/zone").unwrap();
        let o = json!({"metadata": {"name": "w", "labels": {"topology.kubernetes.io/zone": "z"}}});
        assert_eq!(cols[0].header, "NAME");
        assert_eq!(cell(&cols[1], &o), "z");
        assert_eq!(cell(&cols[1], &json!({"metadata": {}})), "<none>");
        assert!(custom_columns("NAME").is_err());
    }

    #[test]
    fn objects_print_as_kubectl() {
        // jsonpath: Go's json.Marshal (sorted keys); custom-columns: fmt %v (map[k:v]).
        let o = json!({"metadata": {"labels": {"z": "1", "a": "2"}, "list": ["x", "y"]}});
        let t = Template::parse("{.metadata.labels}").unwrap();
        assert_eq!(t.render(&o).unwrap(), r#"{"a":"2","z":"1"}"#);
        let cols = custom_columns("L:.metadata.labels,X:.metadata.list").unwrap();
        assert_eq!(cell(&cols[0], &o), "map[a:2 z:1]");
        assert_eq!(cell(&cols[1], &o), "[x y]");
        // An open {range} runs to the end of the template, as client-go's parser allows.
        let t = Template::parse("{range .metadata.list[*]}<{@}>").unwrap();
        assert_eq!(t.render(&o).unwrap(), "<x><y>");
    }
}
