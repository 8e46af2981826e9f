//! `mco edit KIND NAME`: kubectl edit's loop. The object is read, written to a temporary file
//! after kubectl's header comment (none in JSON), and opened in `$KUBE_EDITOR`, `$EDITOR` or `vi`; what is
//! saved is sent as the JSON merge patch of the read object to the saved one, as kubectl sends
//! it: no resourceVersion unless the file changes it, so the status a controller writes while
//! the editor is open is no conflict (a changed resourceVersion in the file is one).
//!
//! Owns the loop, its messages and its exit codes; the server judges the object. Sources:
//! k8s.io/kubectl pkg/cmd/util/editor/editoptions.go (`EditOptions.Run`: no change, empty file,
//! syntax error and invalid object reopened with the reasons in the header, `preservedFile`,
//! `editResults.addError`, `visitToPatch`: the merge patch, its preconditions, `skipped` and
//! `edited`), pkg/cmd/util/editor/editor.go (`defaultEnvEditor`, `Launch`,
//! `LaunchTempFile`), pkg/cmd/util/helpers.go (`StripComments`, `ManualStrip`).

use super::{describe_error, resource_name};
use crate::client::{Client, ClientError};
use crate::model::Kind;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The arguments of `edit`.
#[derive(clap::Args, Clone)]
pub struct EditArgs {
    #[command(flatten)]
    pub conn: super::conn::Conn,
    /// `KIND NAME` or `KIND/NAME`.
    #[arg(required = true, num_args = 1..=2, value_name = "KIND[/NAME]")]
    pub target: Vec<String>,
    /// Edit in this format, yaml (the default) or json, and print the saved object in it
    /// instead of `KIND/NAME edited`.
    #[arg(short = 'o', long = "output", value_parser = ["yaml", "json"])]
    pub output: Option<String>,
    /// Print the patch sent (`Patch: {...}`) before it is applied.
    #[arg(long)]
    pub output_patch: bool,
    /// Unknown fields of the edited object: `strict` (the default: the server refuses the
    /// patch), `warn` or `ignore`, as kubectl's flag.
    #[arg(long, value_name = "MODE", default_value = "strict", num_args = 0..=1, require_equals = true,
          default_missing_value = "strict", value_parser = super::validate::Validate::parse)]
    pub validate: super::validate::Validate,
}

/// kubectl's header of the file to edit, then one block per reason the last save failed.
const HEADER: &str = "# Please edit the object below. Lines beginning with a '#' will be ignored,
# and an empty file will abort the edit. If an error occurs while saving this file will be
# reopened with the relevant failures.
#
";

/// Why the last save was refused: a heading and its causes, written into the next header.
#[derive(Debug, Default, Clone)]
struct Reason {
    head: String,
    other: Vec<String>,
}

/// kubectl's `hashOnLineBreak`: a line break inside a reason continues the comment.
fn hash_on_line_break(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::new();
    for (i, c) in s.char_indices() {
        if c == '\n' && i + 1 < b.len() && b[i + 1] != b'#' {
            out.push_str("\n# ");
        } else {
            out.push(c);
        }
    }
    out
}

/// The header with `reasons` (kubectl's `editHeader.writeTo`).
fn header(reasons: &[Reason]) -> String {
    let mut out = HEADER.to_string();
    for r in reasons {
        let colon = if r.other.is_empty() { "" } else { ":" };
        out.push_str(&format!("# {}{colon}\n", hash_on_line_break(&r.head)));
        for o in &r.other {
            out.push_str(&format!("# * {}\n", hash_on_line_break(o)));
        }
        out.push_str("#\n");
    }
    out
}

/// kubectl's `ManualStrip`: every line whose text starts with `#` (not `#!`) dropped.
pub fn manual_strip(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.starts_with('#') && !t.starts_with("#!") {
            continue;
        }
        out.push_str(line);
        if i < lines.len() - 1 {
            out.push('\n');
        }
    }
    out
}

/// kubectl's `StripComments`: the document as JSON (comments gone, key order kept), or the
/// text without comment lines when it is not YAML.
fn strip_comments(text: &str) -> String {
    match serde_saphyr::from_str::<Value>(text) {
        Ok(v) => v.to_string(),
        Err(_) => manual_strip(text),
    }
}

/// kubectl's `hasLines`: a line that is neither empty nor a comment.
fn has_lines(text: &str) -> bool {
    text.lines().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    })
}

/// The editor command: `$KUBE_EDITOR`, else `$EDITOR`, else `vi`; split at spaces, or run by
/// `$SHELL -c` (default `/bin/bash`) when it holds quotes or backslashes (`defaultEnvEditor`).
fn editor() -> (Vec<String>, bool) {
    let editor = ["KUBE_EDITOR", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|e| !e.is_empty())
        .unwrap_or_else(|| "vi".to_string());
    if !editor.contains(' ') {
        return (vec![editor], false);
    }
    if !editor.contains(['"', '\'', '\\']) {
        return (editor.split(' ').map(str::to_string).collect(), false);
    }
    let shell = std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/bash".to_string());
    (vec![shell, "-c".to_string(), editor], true)
}

/// Writes `text` to a new `mco-edit-<n><ext>` in the temporary directory, runs the editor on
/// it and reads it back (`LaunchTempFile`): the saved text and the file, or the error and the
/// file (kept).
fn launch(ext: &str, text: &str) -> Result<(String, PathBuf), (String, Option<PathBuf>)> {
    let mut file = None;
    for _ in 0..100 {
        let mut n = [0u8; 4];
        getrandom::fill(&mut n).map_err(|e| (e.to_string(), None))?;
        let path = std::env::temp_dir().join(format!("mco-edit-{}{ext}", u32::from_le_bytes(n)));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(text.as_bytes())
                    .map_err(|e| (e.to_string(), Some(path.clone())))?;
                file = Some(path);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err((e.to_string(), None)),
        }
    }
    let path = file.ok_or_else(|| ("no free temporary file name".to_string(), None))?;
    let (mut args, shell) = editor();
    let shown = args.join(" ");
    let abs = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    match shell {
        true => {
            let last = args.pop().expect("the editor");
            args.push(format!("{last} {}", crate::gofmt::quote(&abs.display().to_string())));
        }
        false => args.push(abs.display().to_string()),
    }
    let status = std::process::Command::new(&args[0]).args(&args[1..]).status();
    match status {
        Ok(s) if s.success() => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err((format!("unable to launch the editor {shown:?}"), Some(path)))
        }
        _ => return Err((format!("there was a problem with the editor {shown:?}"), Some(path))),
    }
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok((t, path)),
        Err(e) => Err((e.to_string(), Some(path))),
    }
}

/// What the loop ends with: stdout, stderr, the exit code.
#[derive(Debug, Default)]
pub struct Ended {
    pub out: String,
    pub err: String,
    pub ok: bool,
}

impl Ended {
    /// kubectl's `preservedFile`: where the edited file was kept, then the error (exit 1).
    fn preserved(mut self, error: &str, file: Option<&Path>) -> Ended {
        if let Some(f) = file.filter(|f| f.exists()) {
            self.err.push_str(&format!(
                "A copy of your changes has been stored to {}\n",
                crate::gofmt::quote(&f.display().to_string())
            ));
        }
        self.err.push_str(&super::error_line(error));
        self.err.push('\n');
        self.ok = false;
        self
    }

    fn done(mut self, err: &str) -> Ended {
        self.err.push_str(err);
        self.ok = true;
        self
    }
}

fn without_managed_fields(mut v: Value) -> Value {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// The object as kubectl's printers write it: JSON as Go's `json.MarshalIndent(obj, "", "    ")`
/// of an unstructured object (keys sorted, HTML characters escaped), or YAML.
fn print(v: &Value, json: bool) -> String {
    match json {
        true => {
            let sorted: Value = serde_json::from_str(&crate::apply::go_json(v)).expect("JSON of a value");
            let mut buf = Vec::new();
            let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
            serde::Serialize::serialize(&sorted, &mut ser).expect("JSON of a value");
            let text = String::from_utf8(buf).expect("JSON is UTF-8");
            text.replace('<', "\\u003c")
                .replace('>', "\\u003e")
                .replace('&', "\\u0026")
                + "\n"
        }
        false => super::output::to_yaml(v),
    }
}

/// A YAML error on one line, as Go's YAML errors read (`yaml: line 6 column 14: ...`).
fn yaml_error(e: &impl std::fmt::Display) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    format!("yaml: {}", first.strip_prefix("error: ").unwrap_or(first))
}

/// Why kubectl's validation refuses a saved file before anything is sent (its
/// `paramVerifyingSchema.ValidateBytes` and `getObjectKind`: the YAML error, or the aggregate
/// of `invalid object to validate`, `apiVersion not set`, `kind not set`, ...).
fn not_an_object<E: std::fmt::Display>(parsed: &Result<Value, E>) -> Option<String> {
    let v = match parsed {
        Ok(v) => v,
        Err(e) => return Some(yaml_error(e)),
    };
    let mut errs = Vec::new();
    if !v.is_object() {
        errs.push("invalid object to validate");
    }
    for (field, unset, not_string) in [
        ("apiVersion", "apiVersion not set", "apiVersion isn't string type"),
        ("kind", "kind not set", "kind isn't string type"),
    ] {
        match v.get(field) {
            None | Some(Value::Null) => errs.push(unset),
            Some(Value::String(_)) => {}
            Some(_) => errs.push(not_string),
        }
    }
    match errs.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        all => Some(format!("[{}]", all.join(", "))),
    }
}

/// What `mco edit` was asked for besides the object.
#[derive(Clone, Copy, Debug, Default)]
pub struct EditOptions<'a> {
    /// `-o yaml|json`: edit in that format and print the saved object in it.
    pub output: Option<&'a str>,
    /// `--output-patch`: print the patch before it is sent.
    pub output_patch: bool,
    /// Whether the file is validated (any `--validate` but `ignore`): a file that is not YAML
    /// is then an invalid object, as kubectl's validation reports it.
    pub validate: bool,
}

/// One `mco edit` of object `name` of `kind`: the loop of kubectl edit, the editor run in this
/// process's terminal.
pub async fn edit(client: &Client, kind: Kind, name: &str, opts: EditOptions<'_>) -> Ended {
    let EditOptions {
        output,
        output_patch,
        validate,
    } = opts;
    let json = output == Some("json");
    // `-o`: the saved (or skipped) object is printed in that format, as kubectl's printer does.
    let printed = |obj: &Value, op: &str, shown: &str| match output {
        Some(_) => print(&without_managed_fields(obj.clone()), json),
        None => format!("{shown} {op}\n"),
    };
    let mut end = Ended::default();
    let original = match client.get::<Value>(kind, name).await {
        Ok(v) => without_managed_fields(v),
        Err(e) => {
            end.err = format!("{}\n", describe_error(&e));
            return end;
        }
    };
    let resource = match kind.group(client.group()).as_str() {
        "" => kind.plural().to_string(),
        g => format!("{}.{g}", kind.plural()),
    };
    let shown = format!("{}/{name}", resource_name(kind, client.group()));
    let ext = if json { ".json" } else { ".yaml" };
    let (mut reasons, mut contains_error) = (Vec::<Reason>::new(), false);
    let (mut original_text, mut edited, mut file) = (String::new(), String::new(), None::<PathBuf>);
    loop {
        // JSON has no comments: kubectl writes no header there.
        let mut buf = if json { String::new() } else { header(&reasons) };
        if contains_error {
            buf.push_str(&manual_strip(&edited));
        } else {
            buf.push_str(&print(&original, json));
            original_text = buf.clone();
        }
        let before = std::mem::take(&mut edited);
        let path = match launch(ext, &buf) {
            Ok((text, path)) => {
                edited = text;
                path
            }
            Err((e, _)) => return end.preserved(&e, file.as_deref()),
        };
        if contains_error && strip_comments(&before) == strip_comments(&edited) {
            return end.preserved("Edit cancelled, no valid changes were saved.", Some(&path));
        }
        if let Some(old) = file.take() {
            let _ = std::fs::remove_file(old);
        }
        let parsed = serde_saphyr::from_str::<Value>(&edited).map(without_managed_fields);
        // kubectl's validation (any --validate but ignore) reads the file first: one that is
        // not YAML, or not an object naming its apiVersion and kind, is an invalid object,
        // reported as one, the file reopened.
        if let (Some(why), true) = (not_an_object(&parsed), validate) {
            end.err.push_str(&format!("error: {resource} {name:?} is invalid\n"));
            reasons = vec![Reason {
                head: format!("{resource} {name:?} was not valid"),
                other: vec![format!(
                    "<nil>: Invalid value: \"The edited file failed validation\": {why}"
                )],
            }];
            (contains_error, file) = (true, Some(path));
            continue;
        }
        if strip_comments(&original_text) == strip_comments(&edited) {
            let _ = std::fs::remove_file(&path);
            return end.done("Edit cancelled, no changes made.\n");
        }
        if !has_lines(&edited) {
            let _ = std::fs::remove_file(&path);
            return end.done("Edit cancelled, saved file was empty.\n");
        }
        file = Some(path.clone());
        reasons.clear();
        let parsed = match parsed {
            Ok(v) => v,
            Err(e) => {
                contains_error = true;
                reasons.push(Reason {
                    head: format!("The edited file had a syntax error: {}", yaml_error(&e)),
                    other: Vec::new(),
                });
                continue;
            }
        };
        if parsed == original {
            let _ = std::fs::remove_file(&path);
            end.out.push_str(&printed(&parsed, "skipped", &shown));
            end.ok = true;
            return end;
        }
        let patch = crate::apply::three_way_patch(Some(&original), &parsed, &original);
        let changed_identity = ["apiVersion", "kind"].iter().any(|k| patch.get(k).is_some())
            || patch.get("metadata").and_then(|m| m.get("name")).is_some();
        if changed_identity {
            return end.preserved("At least one of apiVersion, kind and name was changed", Some(&path));
        }
        if output_patch {
            end.out.push_str(&format!("Patch: {}\n", crate::apply::go_json(&patch)));
        }
        match client.merge_patch(kind, name, &patch, false).await {
            Ok(saved) => {
                let _ = std::fs::remove_file(&path);
                end.out.push_str(&printed(&saved, "edited", &shown));
                end.ok = true;
                return end;
            }
            Err(ClientError::Status(st)) if st.reason == "Invalid" => {
                end.err.push_str(&format!("error: {resource} {name:?} is invalid\n"));
                let causes = st.details.iter().flat_map(|d| &d.causes);
                reasons.push(Reason {
                    head: format!("{resource} {name:?} was not valid"),
                    other: causes.map(|c| format!("{}: {}", c.field, c.message)).collect(),
                });
                contains_error = true;
            }
            Err(e) if e.is_not_found() => {
                end.err.push_str(&format!(
                    "error: {resource} {name:?} could not be found on the server\nThe edits you made on deleted resources have been saved to {}\n",
                    crate::gofmt::quote(&path.display().to_string())
                ));
                return end;
            }
            Err(e) => {
                let why = match &e {
                    ClientError::Status(st) => st.message.clone(),
                    other => other.to_string(),
                };
                end.err.push_str(&format!(
                    "error: {resource} {name:?} could not be patched: {why}\nYou can run `mco apply -f {}` to try this update again.\n",
                    path.display()
                ));
                return end;
            }
        }
    }
}

/// `mco edit`.
pub async fn run(a: EditArgs) -> anyhow::Result<ExitCode> {
    let (kind, name) = match a.target.as_slice() {
        [one] => super::split_resource_name(one)?,
        [kind, name] => (kind.clone(), name.clone()),
        _ => anyhow::bail!("give KIND NAME or KIND/NAME"),
    };
    let kind = super::parse_kind(&kind)?;
    let client = super::connect(&a.conn.url())
        .await?
        .with_field_validation(a.validate.field_validation());
    let opts = EditOptions {
        output: a.output.as_deref(),
        output_patch: a.output_patch,
        validate: a.validate != super::validate::Validate::Ignore,
    };
    let end = edit(&client, kind, &name, opts).await;
    print!("{}", end.out);
    eprint!("{}", end.err);
    Ok(if end.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_carries_the_reasons_and_comments_are_stripped() {
        let h = header(&[Reason {
            head: "machineconfigpools.x \"w\" was not valid".into(),
            other: vec!["spec.maxUnavailable: Invalid value: \"x\"".into()],
        }]);
        assert!(h.ends_with(
            "#\n# machineconfigpools.x \"w\" was not valid:\n# * spec.maxUnavailable: Invalid value: \"x\"\n#\n"
        ));
        assert_eq!(manual_strip("# a\nb: 1\n  # c\n#!x\n"), "b: 1\n#!x\n");
        assert!(!has_lines("# only\n\n"));
        assert_eq!(strip_comments(&format!("{HEADER}a: 1\n")), strip_comments("a: 1"));
        assert_eq!(hash_on_line_break("a\nb\n#c"), "a\n# b\n#c");
    }
}
