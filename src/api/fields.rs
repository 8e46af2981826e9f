//! Field-level machinery of the Kubernetes API: unknown-field detection (`fieldValidation`),
//! field ownership (`metadata.managedFields`, FieldsV1), server-side apply, and strategic merge
//! patch for Nodes.
//!
//! Lists are atomic everywhere (owned and replaced as a whole), which is what MCO's CRDs
//! declare for `kernelArguments` and is good enough for single-manager use of the others.

use serde_json::{json, Value};
use std::collections::BTreeSet;

/// A field path (`["spec", "paused"]`).
pub type FieldPath = Vec<String>;

/// Metadata fields the server owns: never tracked, never applied.
const SERVER_META: [&str; 6] = [
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "name",
];

/// Leaf paths of an object's user-settable fields (metadata labels/annotations/..., spec). Maps
/// recurse, lists and scalars are leaves; `apiVersion`, `kind`, `status` and server-managed
/// metadata are skipped.
pub fn leaf_paths(obj: &Value) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    if let Some(m) = obj.as_object() {
        for (k, v) in m {
            match k.as_str() {
                "apiVersion" | "kind" | "status" => {}
                "metadata" => {
                    if let Some(mm) = v.as_object() {
                        for (mk, mv) in mm {
                            if !SERVER_META.contains(&mk.as_str()) {
                                walk(mv, vec!["metadata".into(), mk.clone()], &mut out);
                            }
                        }
                    }
                }
                _ => walk(v, vec![k.clone()], &mut out),
            }
        }
    }
    out
}

fn walk(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, c) in m {
                let mut p = path.clone();
                p.push(k.clone());
                walk(c, p, out);
            }
        }
        _ => {
            out.insert(path);
        }
    }
}

/// The value at a path, if present.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, k| v.get(k))
}

fn set_at(obj: &mut Value, path: &[String], value: Value) {
    let mut cur = obj;
    for k in &path[..path.len() - 1] {
        if !cur.get(k).is_some_and(Value::is_object) {
            cur[k.as_str()] = json!({});
        }
        cur = &mut cur[k.as_str()];
    }
    cur[path[path.len() - 1].as_str()] = value;
}

fn remove_at(obj: &mut Value, path: &[String]) {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut cur = obj;
    for k in parents {
        match cur.get_mut(k) {
            Some(c) => cur = c,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// Paths whose values differ between `old` and `new` (added, changed or removed leaves).
pub fn changed_paths(old: &Value, new: &Value) -> BTreeSet<FieldPath> {
    let (a, b) = (leaf_paths(old), leaf_paths(new));
    a.union(&b)
        .filter(|p| value_at(old, p) != value_at(new, p))
        .cloned()
        .collect()
}

/// FieldsV1 of a set of paths: `{"f:spec": {"f:paused": {}}}`.
pub fn to_fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = json!({});
    for p in paths {
        let mut cur = &mut root;
        for k in p {
            let key = format!("f:{k}");
            if !cur.get(&key).is_some_and(Value::is_object) {
                cur[key.as_str()] = json!({});
            }
            cur = &mut cur[key.as_str()];
        }
    }
    root
}

/// Paths of a FieldsV1 value (leaves are the empty objects).
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn go(v: &Value, path: FieldPath, out: &mut BTreeSet<FieldPath>) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    if let Some(name) = k.strip_prefix("f:") {
                        let mut p = path.clone();
                        p.push(name.to_string());
                        go(c, p, out);
                    }
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    go(v, Vec::new(), &mut out);
    out
}

/// Whether `a` is `b` or lies under it (or the other way round): ownership overlaps.
fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// Records that `manager` (operation `Update` or `Apply`) now owns `paths`, taking them from
/// every other entry. For `Apply` the manager's set becomes exactly `paths`.
pub fn record(
    obj: &mut Value,
    manager: &str,
    operation: &str,
    paths: &BTreeSet<FieldPath>,
    api_version: &str,
    now: &str,
) {
    record_taking(obj, manager, operation, paths, paths, api_version, now);
}

/// [`record`] where only `taken` is removed from the other managers: an apply that sets a
/// field to the value it already has co-owns it (Kubernetes' shared ownership).
fn record_taking(
    obj: &mut Value,
    manager: &str,
    operation: &str,
    paths: &BTreeSet<FieldPath>,
    taken: &BTreeSet<FieldPath>,
    api_version: &str,
    now: &str,
) {
    if paths.is_empty() && operation == "Update" {
        return;
    }
    let entries: Vec<Value> = obj["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut mine: BTreeSet<FieldPath> = if operation == "Apply" {
        paths.clone()
    } else {
        BTreeSet::new()
    };
    for e in entries {
        let is_mine = e["manager"] == manager && e["operation"] == operation;
        let mut owned = from_fields_v1(&e["fieldsV1"]);
        if is_mine {
            if operation == "Update" {
                mine.extend(owned.into_iter().filter(|p| !paths.iter().any(|q| overlaps(p, q))));
                mine.extend(paths.iter().cloned());
            }
            continue;
        }
        owned.retain(|p| !taken.iter().any(|q| overlaps(p, q)));
        if !owned.is_empty() {
            let mut e = e.clone();
            e["fieldsV1"] = to_fields_v1(&owned);
            out.push(e);
        }
    }
    if operation == "Update" && mine.is_empty() {
        mine = paths.clone();
    }
    let mut entry = json!({"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
        "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&mine)});
    if manager.is_empty() {
        // A client with neither a field manager nor a User-Agent: Kubernetes omits the
        // manager (`ManagedFieldsEntry.Manager` is `omitempty`).
        entry.as_object_mut().expect("an object").remove("manager");
    }
    out.push(entry);
    obj["metadata"]["managedFields"] = Value::Array(out);
}

/// A server-side apply conflict: a field the applier sets to another value is owned by
/// another manager.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts(pub Vec<(String, String, FieldPath)>);

impl Conflicts {
    /// Kubernetes' wording: `Apply failed with 1 conflict: conflict with "m" using v1: .spec.paused`.
    pub fn message(&self) -> String {
        let n = self.0.len();
        let list: Vec<String> = self
            .0
            .iter()
            .map(|(m, v, p)| format!("conflict with {m:?} using {v}: .{}", p.join(".")))
            .collect();
        if n == 1 {
            format!("Apply failed with 1 conflict: {}", list[0])
        } else {
            format!("Apply failed with {n} conflicts: {}", list.join("\n"))
        }
    }
}

/// Server-side apply of `applied` by `manager` onto `current` (None: creation). Fields this
/// manager applied before and no longer applies are removed unless another manager owns them.
pub fn server_side_apply(
    current: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
    now: &str,
) -> Result<Value, Conflicts> {
    let paths = leaf_paths(applied);
    let Some(current) = current else {
        let mut obj = applied.clone();
        record(&mut obj, manager, "Apply", &paths, api_version, now);
        return Ok(obj);
    };
    let entries: Vec<Value> = current["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut conflicts = Vec::new();
    let mut previously_mine = BTreeSet::new();
    let mut owned_by_others = BTreeSet::new();
    for e in &entries {
        let owned = from_fields_v1(&e["fieldsV1"]);
        if e["manager"] == manager && e["operation"] == "Apply" {
            previously_mine = owned;
            continue;
        }
        for p in &owned {
            owned_by_others.insert(p.clone());
            if !force && paths.iter().any(|q| overlaps(p, q)) {
                let q = paths.iter().find(|q| overlaps(p, q)).expect("found");
                if value_at(current, q) != value_at(applied, q) {
                    conflicts.push((
                        e["manager"].as_str().unwrap_or("").to_string(),
                        e["apiVersion"].as_str().unwrap_or("").to_string(),
                        p.clone(),
                    ));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(Conflicts(conflicts));
    }
    let mut obj = current.clone();
    for p in previously_mine.difference(&paths) {
        if !owned_by_others.contains(p) {
            remove_at(&mut obj, p);
        }
    }
    for p in &paths {
        set_at(&mut obj, p, value_at(applied, p).cloned().unwrap_or(Value::Null));
    }
    let taken: BTreeSet<FieldPath> = paths
        .iter()
        .filter(|p| value_at(current, p) != value_at(applied, p))
        .cloned()
        .collect();
    record_taking(&mut obj, manager, "Apply", &paths, &taken, api_version, now);
    Ok(obj)
}

/// Keys that occur twice in one JSON object of `body`, as paths (`metadata.name`,
/// `spec.config.storage.files[0].path`), in the order met. Kubernetes' strict decoding
/// (`sigs.k8s.io/json`) reports them as `duplicate field "<path>"`; a parsed
/// [`serde_json::Value`] silently keeps the last value. A body that is not JSON has none.
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    use serde::de::DeserializeSeed;
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Duplicates {
        path: String::new(),
        out: &mut out,
    }
    .deserialize(&mut de);
    out
}

/// A serde visitor that walks any JSON value, recording duplicate keys with their path.
struct Duplicates<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Duplicates<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Duplicates {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Duplicates {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }
}

/// Fields of `input` that the typed `normalized` form dropped: unknown to the schema. Empty
/// values (`null`, `""`, `[]`, `{}`, `false`, `0`) are not reported: the typed form omits
/// defaults. `spec.config` (raw Ignition, preserved as is) is not descended into.
pub fn unknown_fields(input: &Value, normalized: &Value) -> Vec<String> {
    dropped_fields(
        input,
        normalized,
        "",
        &["spec.config", "status", "metadata.managedFields"],
    )
}

/// Keys of a raw Ignition config (`spec.config`) that mco's Ignition types do not know, with
/// their paths (`spec.config.storage.filez`): Ignition's "unused key" warnings. A spec 2
/// config is not checked (its keys are spec 2's, translated at render).
pub fn unknown_ignition_keys(raw: &Value) -> Vec<String> {
    if !raw.is_object() || crate::ignition::spec2::is_spec2(raw) {
        return Vec::new();
    }
    match serde_json::from_value::<crate::ignition::Config>(raw.clone()).map(serde_json::to_value) {
        Ok(Ok(typed)) => dropped_fields(raw, &typed, "spec.config", &[]),
        _ => Vec::new(),
    }
}

/// Fields of `input` absent from `normalized` (paths below `prefix`; `skip` paths are not
/// descended into). Empty values are not reported: typed forms omit defaults.
fn dropped_fields(input: &Value, normalized: &Value, prefix: &str, skip: &[&str]) -> Vec<String> {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
        }
    }
    fn go(a: &Value, b: &Value, path: &str, skip: &[&str], out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(am), Value::Object(bm)) => {
                for (k, av) in am {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if skip.contains(&p.as_str()) {
                        continue;
                    }
                    match bm.get(k) {
                        Some(bv) => go(av, bv, &p, skip, out),
                        // A known map the typed form omitted as empty: name what is inside.
                        None if av.is_object() => go(av, &Value::Object(Default::default()), &p, skip, out),
                        None if !empty(av) => out.push(p),
                        None => {}
                    }
                }
            }
            (Value::Array(aa), Value::Array(ba)) => {
                for (i, (av, bv)) in aa.iter().zip(ba).enumerate() {
                    go(av, bv, &format!("{path}[{i}]"), skip, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    go(input, normalized, prefix, skip, &mut out);
    out
}

/// Applies a JSON patch (RFC 6902) to a copy of `doc` and returns the copy: all operations
/// or none, as Kubernetes applies one.
///
/// Patches a copy with `json_patch::patch_unsafe` instead of calling `json_patch::patch` in
/// place: json-patch 5.0.0's `patch` promises to leave the document as it was when an
/// operation fails, but a `move` whose `from` exists and whose `path` does not is left half
/// done (the source removed), and its undo path ends in `unreachable!` (found by the `patch`
/// fuzz target; `fuzz/corpus/patch/crash-move-half-applied` replays it).
///
/// Errors: the first operation that does not apply, worded as kube-apiserver's JSON patch
/// library words it ([`go_patch_error`]).
pub fn apply_json_patch(doc: &Value, patch: &json_patch::Patch) -> Result<Value, String> {
    let mut out = doc.clone();
    match json_patch::patch_unsafe(&mut out, patch) {
        Ok(()) => Ok(out),
        // `out` is the document as the failing operation found it (the ones before applied).
        Err(e) => Err(go_patch_error(&out, patch, &e)),
    }
}

/// The message of a JSON patch operation that does not apply, as evanphx/json-patch (which
/// kube-apiserver applies JSON patches with, `staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/patch.go` `applyJSPatch`) words it, for the operations whose failures clients
/// meet: a `test` that fails (`testing value /spec/paused failed: test failed`; a missing
/// parent: `test operation does not apply: is missing path: …: missing value`), a `remove` of
/// a missing key (`error in remove for path: '/spec/x': Unable to remove nonexistent key: x:
/// missing value`), index or parent, and an `add` under a missing parent. Others keep
/// json-patch's own message (the operation, its path and the reason). `doc` is the document
/// as the failing operation found it.
pub fn go_patch_error(doc: &Value, patch: &json_patch::Patch, e: &json_patch::PatchError) -> String {
    use json_patch::{PatchErrorKind, PatchOperation};
    let path = e.path.as_str();
    let key = e.path.last().map(|t| t.decoded().into_owned()).unwrap_or_default();
    let parent = e.path.parent().and_then(|p| doc.pointer(p.as_str()));
    match (patch.0.get(e.operation), &e.kind, parent) {
        (Some(PatchOperation::Test(_)), PatchErrorKind::TestFailed, _)
        | (Some(PatchOperation::Test(_)), PatchErrorKind::InvalidPointer, Some(_)) => {
            format!("testing value {path} failed: test failed")
        }
        (Some(PatchOperation::Test(_)), PatchErrorKind::InvalidPointer, None) => {
            format!("test operation does not apply: is missing path: {path}: missing value")
        }
        (Some(PatchOperation::Remove(_)), PatchErrorKind::InvalidPointer, Some(Value::Array(_))) => {
            format!(
                "error in remove for path: '{path}': Unable to access invalid index: {key}: invalid index referenced"
            )
        }
        (Some(PatchOperation::Remove(_)), PatchErrorKind::InvalidPointer, Some(Value::Object(_))) => {
            format!("error in remove for path: '{path}': Unable to remove nonexistent key: {key}: missing value")
        }
        (Some(PatchOperation::Remove(_)), PatchErrorKind::InvalidPointer, _) => {
            format!("remove operation does not apply: doc is missing path: \"{path}\": missing value")
        }
        (Some(PatchOperation::Add(_)), PatchErrorKind::InvalidPointer, None) => {
            format!("add operation does not apply: doc is missing path: \"{path}\": missing value")
        }
        _ => e.to_string(),
    }
}

/// Strategic merge patch (the subset Nodes need): JSON merge semantics for maps, `$patch:
/// delete|replace` directives, `$setElementOrder/...` and `$retainKeys` ignored,
/// `$deleteFromPrimitiveList/<k>`, and lists merged by key where Kubernetes declares a merge
/// key (`type` for conditions and addresses, `uid` for ownerReferences); other lists replace.
pub fn strategic_merge(doc: &mut Value, patch: &Value) {
    fn merge_key(field: &str) -> Option<&'static str> {
        match field {
            "conditions" | "addresses" => Some("type"),
            "ownerReferences" => Some("uid"),
            _ => None,
        }
    }
    fn go(doc: &mut Value, patch: &Value) {
        let Some(pm) = patch.as_object() else {
            *doc = patch.clone();
            return;
        };
        match pm.get("$patch").and_then(Value::as_str) {
            Some("replace") => {
                let mut p = pm.clone();
                p.remove("$patch");
                *doc = Value::Object(p);
                return;
            }
            Some("delete") => {
                *doc = Value::Null;
                return;
            }
            _ => {}
        }
        if !doc.is_object() {
            *doc = json!({});
        }
        for (k, v) in pm {
            if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
                continue;
            }
            if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
                let del: Vec<Value> = v.as_array().cloned().unwrap_or_default();
                if let Some(list) = doc.get_mut(field).and_then(Value::as_array_mut) {
                    list.retain(|x| !del.contains(x));
                }
                continue;
            }
            let dm = doc.as_object_mut().expect("object");
            if v.is_null() {
                dm.remove(k);
                continue;
            }
            match (merge_key(k), v.as_array(), dm.get_mut(k).and_then(Value::as_array_mut)) {
                (Some(key), Some(items), Some(existing)) => {
                    for item in items {
                        let id = item.get(key);
                        let pos = existing.iter().position(|e| e.get(key) == id);
                        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, delete) {
                            (Some(i), true) => {
                                existing.remove(i);
                            }
                            (Some(i), false) => go(&mut existing[i], item),
                            (None, false) => {
                                let mut e = Value::Null;
                                go(&mut e, item);
                                existing.push(e);
                            }
                            (None, true) => {}
                        }
                    }
                }
                _ => {
                    let slot = dm.entry(k.clone()).or_insert(Value::Null);
                    if v.is_object() {
                        go(slot, v);
                        if slot.is_null() {
                            dm.remove(k);
                        }
                    } else {
                        *slot = v.clone();
                    }
                }
            }
        }
    }
    go(doc, patch);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips() {
        let o = json!({"apiVersion": "x", "metadata": {"name": "a", "labels": {"k": "v"}}, "spec": {"paused": true, "sel": {"m": {"a": "b"}}, "l": [1]}});
        let p = leaf_paths(&o);
        assert_eq!(p.len(), 4);
        let f = to_fields_v1(&p);
        assert_eq!(f["f:spec"]["f:paused"], json!({}));
        assert_eq!(from_fields_v1(&f), p);
    }

    #[test]
    fn ssa_conflicts_force_and_removal() {
        let applied =
            json!({"metadata": {"name": "w", "labels": {"a": "1"}}, "spec": {"paused": true, "maxUnavailable": 2}});
        let created = server_side_apply(None, &applied, "alice", false, "v1", "t").unwrap();
        assert_eq!(created["spec"]["paused"], true);
        // Another manager changes paused through an update.
        let mut other = created.clone();
        other["spec"]["paused"] = json!(false);
        let ch = changed_paths(&created, &other);
        record(&mut other, "bob", "Update", &ch, "v1", "t");
        // alice re-applies paused: true -> conflict with bob.
        let e = server_side_apply(Some(&other), &applied, "alice", false, "v1", "t").unwrap_err();
        assert_eq!(
            e.message(),
            "Apply failed with 1 conflict: conflict with \"bob\" using v1: .spec.paused"
        );
        let forced = server_side_apply(Some(&other), &applied, "alice", true, "v1", "t").unwrap();
        assert_eq!(forced["spec"]["paused"], true);
        // alice stops applying maxUnavailable: it is removed.
        let less = json!({"metadata": {"name": "w", "labels": {"a": "1"}}, "spec": {"paused": true}});
        let after = server_side_apply(Some(&forced), &less, "alice", false, "v1", "t").unwrap();
        assert!(after["spec"].get("maxUnavailable").is_none());
    }

    #[test]
    fn ssa_same_value_is_co_owned() {
        let a = json!({"metadata": {"name": "m", "labels": {"r": "w"}}, "spec": {"kernelArguments": ["a=1"]}});
        let obj = server_side_apply(None, &a, "A", false, "v1", "t").unwrap();
        let b = json!({"metadata": {"name": "m"}, "spec": {"kernelArguments": ["a=1"]}});
        let obj = server_side_apply(Some(&obj), &b, "B", false, "v1", "t").unwrap();
        // B stops applying kernelArguments: A still owns them, so they stay.
        let b2 = json!({"metadata": {"name": "m", "labels": {"x": "z"}}});
        let obj = server_side_apply(Some(&obj), &b2, "B", false, "v1", "t").unwrap();
        assert_eq!(obj["spec"]["kernelArguments"], json!(["a=1"]));
        let managers: Vec<&str> = obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert!(managers.contains(&"A") && managers.contains(&"B"), "{managers:?}");
    }

    #[test]
    fn unknown_fields_ignore_defaults() {
        let input = json!({"spec": {"paused": false, "bogus": 1, "kernelType": "", "config": {"x": 1}}, "metadata": {"name": "a", "nope": "x"}});
        let normalized = json!({"spec": {"paused": false, "config": {"x": 1}}, "metadata": {"name": "a"}});
        let mut got = unknown_fields(&input, &normalized);
        got.sort();
        assert_eq!(got, vec!["metadata.nope".to_string(), "spec.bogus".to_string()]);
    }

    #[test]
    fn unknown_ignition_keys_are_named() {
        let raw = json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [{"path": "/a", "filesystem": "root", "mode": 420}]}});
        assert_eq!(
            unknown_ignition_keys(&raw),
            vec!["spec.config.storage.files[0].filesystem".to_string()]
        );
        let raw = json!({"ignition": {"version": "3.4.0"}, "storage": {"filez": [{"path": "/a"}]}});
        assert_eq!(
            unknown_ignition_keys(&raw),
            vec!["spec.config.storage.filez".to_string()]
        );
    }

    #[test]
    fn strategic_merge_for_nodes() {
        let mut n = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "False"}]}});
        strategic_merge(
            &mut n,
            &json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "False"}], "$setElementOrder/conditions": [{"type": "Ready"}]}}),
        );
        assert_eq!(n["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(n["spec"]["unschedulable"], true);
        assert_eq!(n["status"]["conditions"][0]["status"], "False");
        assert_eq!(n["status"]["conditions"].as_array().unwrap().len(), 2);
    }
}
