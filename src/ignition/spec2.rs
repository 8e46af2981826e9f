//! Ignition spec 2 input (2.0.0, 2.1.0, 2.2.0), translated to spec 3 as MCO does with
//! ign-converter (`pkg/controller/common/helpers.go`: `removeIgnDuplicateFilesUnitsUsers`, then
//! `convertIgnition22to34` = ign-converter `v23tov30.Translate(cfg, {"root": "/"})` and the 3.x
//! up-translations).
//!
//! Owns: recognising a spec 2 config ([`is_spec2`]), the refusals that only make sense on the
//! spec 2 shape (a file on another filesystem than `root`, `append`, networkd units, a user other
//! than `core`), named with their spec 2 field path, and the translation ([`translate`]) with a
//! map from translated list indices back to the user's, so that errors found on the translated
//! config still name the field the user wrote. Pure: JSON in, JSON out.
//!
//! The stored MachineConfig keeps the spec 2 config exactly as given; the translation happens
//! wherever a config is parsed (admission, render).

use crate::validation::FieldError;
use serde_json::{json, Map, Value};

/// The spec 3 version a translated config carries (mco's internal version).
pub const TRANSLATED_VERSION: &str = "3.4.0";

/// Whether `raw` declares Ignition spec 2.0.0, 2.1.0 or 2.2.0 (what MCO's spec 2 parser,
/// Ignition's `config/v2_2`, accepts).
pub fn is_spec2(raw: &Value) -> bool {
    matches!(
        raw.pointer("/ignition/version").and_then(Value::as_str),
        Some("2.0.0" | "2.1.0" | "2.2.0")
    )
}

/// A translated config and, per translated list, the index each entry had in the spec 2 input.
#[derive(Clone, Debug, PartialEq)]
pub struct Translated {
    /// The spec 3 config (version [`TRANSLATED_VERSION`]).
    pub config: Value,
    /// `files[i]` of the translation came from `storage.files[files[i]]` of the input.
    pub files: Vec<usize>,
    /// The same for `systemd.units`.
    pub units: Vec<usize>,
    /// The same for `passwd.users` (at most one entry: the last user, keys of all).
    pub users: Vec<usize>,
}

impl Translated {
    /// Rewrites a field path of the translated config (`spec.config.storage.files[0].mode`) to
    /// the spec 2 input's (`spec.config.storage.files[3].mode`).
    pub fn original_path(&self, prefix: &str, field: &str) -> String {
        for (list, map) in [
            ("storage.files", &self.files),
            ("systemd.units", &self.units),
            ("passwd.users", &self.users),
        ] {
            let head = format!("{prefix}.{list}[");
            if let Some(rest) = field.strip_prefix(&head) {
                if let Some((i, tail)) = rest.split_once(']') {
                    if let Some(orig) = i.parse::<usize>().ok().and_then(|i| map.get(i)) {
                        return format!("{head}{orig}]{tail}");
                    }
                }
            }
        }
        field.to_string()
    }
}

fn list<'a>(raw: &'a Value, pointer: &str) -> &'a [Value] {
    raw.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn non_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

/// Translates a spec 2 config (`raw`, at field path `prefix`) to spec 3.
///
/// Refused, with the spec 2 field path: a file whose `filesystem` is not `root` (MCO maps only
/// `root` to `/`); a file with `append: true` (`ignition file <path> includes append`); any
/// `networkd.units` (ign-converter cannot translate them); a user other than `core` (MCO's
/// `unexpected user with name: <name>. Only core user is supported`).
///
/// Then, as MCO: duplicate files (by path) keep the last entry, duplicate units (by name) keep
/// the last entry's fields and gain the earlier entries' dropins whose names it lacks, and both
/// lists come out in reverse order of their last occurrence (MCO walks them backwards); all
/// users collapse into the last one with every SSH key, de-duplicated in order. Per entry:
/// `path` kept, `mode`, `contents`, `user`, `group` and `overwrite` carried over; units'
/// deprecated `enable: true` becomes `enabled: true`, `mask: false` and empty `contents` are
/// dropped; `ignition.config.append` becomes `merge`. Sections spec 3 has under the same name
/// (directories, links, disks, raid, filesystems, groups) are carried over for the spec 3
/// validation to judge.
pub fn translate(raw: &Value, prefix: &str) -> Result<Translated, Vec<FieldError>> {
    let mut errors = Vec::new();
    let files = list(raw, "/storage/files");
    for (i, f) in files.iter().enumerate() {
        let at = format!("{prefix}.storage.files[{i}]");
        match f.get("filesystem").and_then(Value::as_str) {
            Some("root") => {}
            Some(other) => errors.push(FieldError::new(
                format!("{at}.filesystem"),
                format!("filesystem {other:?} is not supported: MCO translates spec 2 files on the \"root\" filesystem only"),
            )),
            None => errors.push(FieldError::new(
                format!("{at}.filesystem"),
                "Required value: spec 2 files name their filesystem, and MCO translates only \"root\"",
            )),
        }
        if f.get("append").and_then(Value::as_bool) == Some(true) {
            let path = f.get("path").and_then(Value::as_str).unwrap_or("");
            errors.push(FieldError::new(
                format!("{at}.append"),
                format!("ignition file {path} includes append"),
            ));
        }
    }
    if non_empty(raw.pointer("/networkd/units")) {
        errors.push(FieldError::new(
            format!("{prefix}.networkd.units"),
            "networkd units cannot be translated to Ignition spec 3 (ign-converter refuses them); write them as files under /etc/systemd/network",
        ));
    }
    let users = list(raw, "/passwd/users");
    for (i, u) in users.iter().enumerate() {
        let name = u.get("name").and_then(Value::as_str).unwrap_or("");
        if name != "core" {
            errors.push(FieldError::new(
                format!("{prefix}.passwd.users[{i}].name"),
                format!("unexpected user with name: {name}. Only core user is supported"),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    // removeIgnDuplicateFilesUnitsUsers: walk backwards, first seen (= last given) wins.
    let mut out_files: Vec<(usize, Value)> = Vec::new();
    for (i, f) in files.iter().enumerate().rev() {
        let path = f.get("path");
        if out_files.iter().any(|(_, o)| o.get("path") == path) {
            continue;
        }
        out_files.push((i, translate_file(f)));
    }
    let mut out_units: Vec<(usize, Value)> = Vec::new();
    for (i, u) in list(raw, "/systemd/units").iter().enumerate().rev() {
        let name = u.get("name");
        if let Some((_, kept)) = out_units.iter_mut().find(|(_, o)| o.get("name") == name) {
            for d in list(u, "/dropins") {
                let have = kept["dropins"]
                    .as_array()
                    .is_some_and(|ds| ds.iter().any(|k| k.get("name") == d.get("name")));
                if !have {
                    match kept["dropins"].as_array_mut() {
                        Some(ds) => ds.push(translate_dropin(d)),
                        None => kept["dropins"] = json!([translate_dropin(d)]),
                    }
                }
            }
            continue;
        }
        out_units.push((i, translate_unit(u)));
    }
    let mut out_users = Vec::new();
    let mut user_index = Vec::new();
    if let Some(last) = users.last() {
        let mut user = last.as_object().cloned().unwrap_or_default();
        let mut keys: Vec<Value> = Vec::new();
        for u in users.iter().rev() {
            for k in list(u, "/sshAuthorizedKeys") {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        if !keys.is_empty() {
            user.insert("sshAuthorizedKeys".into(), Value::Array(keys));
        }
        out_users.push(Value::Object(user));
        user_index.push(users.len() - 1);
    }

    let mut ignition = Map::new();
    ignition.insert("version".into(), json!(TRANSLATED_VERSION));
    if let Some(c) = raw.pointer("/ignition/config").and_then(Value::as_object) {
        let mut config = Map::new();
        if let Some(a) = c.get("append") {
            config.insert("merge".into(), a.clone());
        }
        if let Some(r) = c.get("replace") {
            config.insert("replace".into(), r.clone());
        }
        ignition.insert("config".into(), Value::Object(config));
    }
    for key in ["timeouts", "security"] {
        if let Some(v) = raw.pointer(&format!("/ignition/{key}")) {
            ignition.insert(key.into(), v.clone());
        }
    }
    let mut storage = Map::new();
    if !out_files.is_empty() {
        storage.insert("files".into(), out_files.iter().map(|(_, f)| f.clone()).collect());
    }
    for key in ["directories", "links", "disks", "raid", "filesystems"] {
        if let Some(v) = raw.pointer(&format!("/storage/{key}")).filter(|v| non_empty(Some(v))) {
            storage.insert(key.into(), v.clone());
        }
    }
    let mut config = Map::new();
    config.insert("ignition".into(), Value::Object(ignition));
    if !storage.is_empty() {
        config.insert("storage".into(), Value::Object(storage));
    }
    if !out_units.is_empty() {
        config.insert(
            "systemd".into(),
            json!({"units": out_units.iter().map(|(_, u)| u.clone()).collect::<Vec<_>>()}),
        );
    }
    let mut passwd = Map::new();
    if !out_users.is_empty() {
        passwd.insert("users".into(), Value::Array(out_users));
    }
    if let Some(g) = raw.pointer("/passwd/groups").filter(|v| non_empty(Some(v))) {
        passwd.insert("groups".into(), g.clone());
    }
    if !passwd.is_empty() {
        config.insert("passwd".into(), Value::Object(passwd));
    }
    Ok(Translated {
        config: Value::Object(config),
        files: out_files.iter().map(|(i, _)| *i).collect(),
        units: out_units.iter().map(|(i, _)| *i).collect(),
        users: user_index,
    })
}

fn copy(from: &Value, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k).filter(|v| !v.is_null()) {
            to.insert((*k).to_string(), v.clone());
        }
    }
}

fn translate_file(f: &Value) -> Value {
    let mut out = Map::new();
    copy(f, &mut out, &["path", "overwrite", "mode", "user", "group"]);
    if let Some(c) = f.get("contents").and_then(Value::as_object) {
        let mut contents = Map::new();
        for k in ["source", "compression"] {
            if let Some(v) = c.get(k).filter(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
                contents.insert(k.into(), v.clone());
            }
        }
        if let Some(h) = c
            .get("verification")
            .and_then(|v| v.get("hash"))
            .filter(|h| !h.is_null())
        {
            contents.insert("verification".into(), json!({"hash": h}));
        }
        out.insert("contents".into(), Value::Object(contents));
    }
    Value::Object(out)
}

fn translate_unit(u: &Value) -> Value {
    let mut out = Map::new();
    copy(u, &mut out, &["name", "enabled"]);
    if u.get("enable").and_then(Value::as_bool) == Some(true) {
        out.insert("enabled".into(), json!(true));
    }
    if u.get("mask").and_then(Value::as_bool) == Some(true) {
        out.insert("mask".into(), json!(true));
    }
    if let Some(c) = u.get("contents").filter(|c| c.as_str().is_some_and(|s| !s.is_empty())) {
        out.insert("contents".into(), c.clone());
    }
    let dropins: Vec<Value> = list(u, "/dropins").iter().map(translate_dropin).collect();
    if !dropins.is_empty() {
        out.insert("dropins".into(), Value::Array(dropins));
    }
    Value::Object(out)
}

fn translate_dropin(d: &Value) -> Value {
    let mut out = Map::new();
    copy(d, &mut out, &["name"]);
    if let Some(c) = d.get("contents").filter(|c| c.as_str().is_some_and(|s| !s.is_empty())) {
        out.insert("contents".into(), c.clone());
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(r: Result<Translated, Vec<FieldError>>) -> Vec<String> {
        r.err().unwrap().iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn the_sctp_module_config_translates() {
        // openshift-kni/cnf-features-deploy feature-configs/deploy/sctp/sctp_module_mc.yaml
        let raw = json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [
            {"contents": {"source": "data:,", "verification": {}}, "filesystem": "root", "mode": 420, "path": "/etc/modprobe.d/sctp-blacklist.conf"},
            {"contents": {"source": "data:text/plain;charset=utf-8,sctp"}, "filesystem": "root", "mode": 420, "path": "/etc/modules-load.d/sctp-load.conf"}]}});
        assert!(is_spec2(&raw));
        let t = translate(&raw, "spec.config").unwrap();
        assert_eq!(
            t.config,
            json!({"ignition": {"version": "3.4.0"}, "storage": {"files": [
                {"path": "/etc/modules-load.d/sctp-load.conf", "mode": 420, "contents": {"source": "data:text/plain;charset=utf-8,sctp"}},
                {"path": "/etc/modprobe.d/sctp-blacklist.conf", "mode": 420, "contents": {"source": "data:,"}}]}})
        );
        assert_eq!(t.files, [1, 0]);
        assert_eq!(
            t.original_path("spec.config", "spec.config.storage.files[0].mode"),
            "spec.config.storage.files[1].mode"
        );
    }

    #[test]
    fn duplicates_keep_the_last_and_units_gather_dropins() {
        // TestRemoveIgnDuplicateFilesAndUnits (mco-facts 13.6)
        let raw = json!({"ignition": {"version": "2.2.0"},
            "storage": {"files": [
                {"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,old"}},
                {"filesystem": "root", "path": "/etc/a", "contents": {"source": "data:,new"}}]},
            "systemd": {"units": [
                {"name": "testUnit", "contents": "old", "dropins": [{"name": "one", "contents": "old"}]},
                {"name": "testUnit", "contents": "mid", "dropins": [{"name": "one", "contents": "new"}]},
                {"name": "testUnit", "contents": "new", "enable": true, "mask": false, "dropins": [{"name": "two", "contents": "new"}]}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}, {"name": "core", "sshAuthorizedKeys": ["k3", "k1"]}]}});
        let t = translate(&raw, "spec.config").unwrap();
        assert_eq!(
            t.config["storage"]["files"],
            json!([{"path": "/etc/a", "contents": {"source": "data:,new"}}])
        );
        assert_eq!(
            t.config["systemd"]["units"],
            json!([{"name": "testUnit", "enabled": true, "contents": "new",
                "dropins": [{"name": "two", "contents": "new"}, {"name": "one", "contents": "new"}]}])
        );
        assert_eq!(
            t.config["passwd"]["users"],
            json!([{"name": "core", "sshAuthorizedKeys": ["k3", "k1", "k2"]}])
        );
        assert_eq!(
            (t.files.as_slice(), t.units.as_slice(), t.users.as_slice()),
            (&[1][..], &[2][..], &[1][..])
        );
    }

    #[test]
    fn refusals_name_the_spec2_field() {
        let raw = json!({"ignition": {"version": "2.2.0"},
            "storage": {"files": [
                {"filesystem": "var", "path": "/lib/a"},
                {"path": "/etc/b"},
                {"filesystem": "root", "path": "/etc/c", "append": true}]},
            "networkd": {"units": [{"name": "a.network"}]},
            "passwd": {"users": [{"name": "alice"}]}});
        assert_eq!(
            fields(translate(&raw, "spec.config")),
            [
                "spec.config.storage.files[0].filesystem: filesystem \"var\" is not supported: MCO translates spec 2 files on the \"root\" filesystem only",
                "spec.config.storage.files[1].filesystem: Required value: spec 2 files name their filesystem, and MCO translates only \"root\"",
                "spec.config.storage.files[2].append: ignition file /etc/c includes append",
                "spec.config.networkd.units: networkd units cannot be translated to Ignition spec 3 (ign-converter refuses them); write them as files under /etc/systemd/network",
                "spec.config.passwd.users[0].name: unexpected user with name: alice. Only core user is supported",
            ]
        );
    }

    #[test]
    fn versions() {
        for (v, yes) in [
            ("2.2.0", true),
            ("2.1.0", true),
            ("2.0.0", true),
            ("2.3.0", false),
            ("3.0.0", false),
            ("2.2", false),
        ] {
            assert_eq!(is_spec2(&json!({"ignition": {"version": v}})), yes, "{v}");
        }
    }
}
