//! Ignition config merge: the fold of Ignition's `config/merge/merge.go` as MCO applies it in
//! `MergeMachineConfigs` (`pkg/controller/common/helpers.go`), over mco's [`ignition`] types.
//!
//! Owns the per-field rules of one merge step (child on top of parent) and the final overwrite
//! defaulting. It must not order the inputs, parse raw JSON or decide reconcilability: see the
//! parent module.

use crate::ignition::{self, Config, Dropin, File, IgnitionSection, NodeUser, Resource, Unit, User};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// A list keyed by a string (path, name, device), preserving first-insertion order.
///
/// Same key: merged in place at the parent's position; new keys appended. Removal leaves a
/// tombstone so indexes stay valid; [`Keyed::into_vec`] drops them.
struct Keyed<T> {
    items: Vec<Option<T>>,
    index: HashMap<String, usize>,
}

impl<T> Keyed<T> {
    fn new() -> Keyed<T> {
        Keyed {
            items: Vec::new(),
            index: HashMap::new(),
        }
    }

    fn upsert(&mut self, key: &str, item: T, merge: impl FnOnce(&mut T, T)) {
        match self.index.get(key) {
            Some(&i) => match &mut self.items[i] {
                Some(existing) => merge(existing, item),
                slot => *slot = Some(item),
            },
            None => {
                self.index.insert(key.to_string(), self.items.len());
                self.items.push(Some(item));
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(i) = self.index.remove(key) {
            self.items[i] = None;
        }
    }

    fn into_vec(self) -> Vec<T> {
        self.items.into_iter().flatten().collect()
    }
}

/// Raw JSON list entries (directories, links, disks, ...) keyed by one string field.
struct RawKeyed {
    key_field: &'static str,
    list: Keyed<Value>,
    /// Whether any input set the section (so an explicit `[]` survives as `[]`).
    seen: bool,
}

impl RawKeyed {
    fn new(key_field: &'static str) -> RawKeyed {
        RawKeyed {
            key_field,
            list: Keyed::new(),
            seen: false,
        }
    }

    fn entries(value: &Option<Value>) -> &[Value] {
        match value {
            Some(Value::Array(a)) => a,
            _ => &[],
        }
    }

    fn key_of(&self, entry: &Value) -> String {
        entry
            .get(self.key_field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }

    fn merge(&mut self, child: &Option<Value>) {
        if child.as_ref().is_some_and(|v| !v.is_null()) {
            self.seen = true;
        }
        for entry in Self::entries(child) {
            let key = self.key_of(entry);
            self.list.upsert(&key, entry.clone(), merge_value);
        }
    }

    fn finish(self) -> Option<Value> {
        let items = self.list.into_vec();
        if items.is_empty() && !self.seen {
            None
        } else {
            Some(Value::Array(items))
        }
    }
}

/// Recursive merge of raw JSON: objects merge key by key (a `null` child value keeps the
/// parent's), anything else (scalars, lists) is replaced by the child's value.
fn merge_value(parent: &mut Value, child: Value) {
    match (parent, child) {
        (Value::Object(p), Value::Object(c)) => merge_map(p, c),
        (_, Value::Null) => {}
        (p, c) => *p = c,
    }
}

fn merge_map(parent: &mut Map<String, Value>, child: Map<String, Value>) {
    for (k, v) in child {
        match parent.get_mut(&k) {
            Some(existing) => merge_value(existing, v),
            None => {
                if !v.is_null() {
                    parent.insert(k, v);
                }
            }
        }
    }
}

fn merge_opt_value(parent: &mut Option<Value>, child: &Option<Value>) {
    match (parent.as_mut(), child) {
        (_, None) | (_, Some(Value::Null)) => {}
        (Some(p), Some(c)) => merge_value(p, c.clone()),
        (None, Some(c)) => *parent = Some(c.clone()),
    }
}

fn replace_if_set<T: Clone>(parent: &mut Option<T>, child: &Option<T>) {
    if child.is_some() {
        parent.clone_from(child);
    }
}

/// The data URL of the empty file, given to rendered files that have no source.
pub const EMPTY_SOURCE: &str = "data:,";

/// The accumulated result of merging configs one after another.
pub(super) struct Merger {
    ignition: IgnitionSection,
    files: Keyed<File>,
    directories: RawKeyed,
    links: RawKeyed,
    disks: RawKeyed,
    raid: RawKeyed,
    filesystems: RawKeyed,
    luks: RawKeyed,
    trees: Option<Value>,
    units: Keyed<Unit>,
    users: Keyed<User>,
    groups: RawKeyed,
    kernel_arguments: Option<KernelArguments>,
}

/// Ignition 3.3+ `kernelArguments`: one key space for both lists.
#[derive(Default)]
struct KernelArguments {
    should_exist: Vec<Value>,
    should_not_exist: Vec<Value>,
}

impl Merger {
    /// An empty base config (MCO: "empty config with the internal version").
    pub(super) fn new() -> Merger {
        Merger {
            ignition: IgnitionSection::default(),
            files: Keyed::new(),
            directories: RawKeyed::new("path"),
            links: RawKeyed::new("path"),
            disks: RawKeyed::new("device"),
            raid: RawKeyed::new("name"),
            filesystems: RawKeyed::new("device"),
            luks: RawKeyed::new("name"),
            trees: None,
            units: Keyed::new(),
            users: Keyed::new(),
            groups: RawKeyed::new("name"),
            kernel_arguments: None,
        }
    }

    /// Merges `child` on top of everything merged so far (Ignition `Merge(parent, child)`).
    pub(super) fn merge(&mut self, child: &Config) {
        let ign = &child.ignition;
        merge_opt_value(&mut self.ignition.config, &ign.config);
        merge_opt_value(&mut self.ignition.timeouts, &ign.timeouts);
        merge_opt_value(&mut self.ignition.security, &ign.security);
        merge_opt_value(&mut self.ignition.proxy, &ign.proxy);

        // Files, directories and links share one key space (the path): a child entry of one
        // kind removes a parent entry of another kind at the same path.
        let storage = &child.storage;
        for f in &storage.files {
            self.directories.list.remove(&f.path);
            self.links.list.remove(&f.path);
        }
        for d in RawKeyed::entries(&storage.directories) {
            let path = self.directories.key_of(d);
            self.files.remove(&path);
            self.links.list.remove(&path);
        }
        for l in RawKeyed::entries(&storage.links) {
            let path = self.links.key_of(l);
            self.files.remove(&path);
            self.directories.list.remove(&path);
        }
        for f in &storage.files {
            let mut f = f.clone();
            normalise_compression(&mut f);
            let path = f.path.clone();
            self.files.upsert(&path, f, merge_file);
        }
        self.directories.merge(&storage.directories);
        self.links.merge(&storage.links);
        self.disks.merge(&storage.disks);
        self.raid.merge(&storage.raid);
        self.filesystems.merge(&storage.filesystems);
        self.luks.merge(&storage.luks);
        merge_opt_value(&mut self.trees, &storage.trees);

        for u in &child.systemd.units {
            self.units.upsert(&u.name, u.clone(), merge_unit);
        }
        for u in &child.passwd.users {
            self.users.upsert(&u.name, u.clone(), merge_user);
        }
        self.groups.merge(&child.passwd.groups);

        if let Some(ka) = &child.kernel_arguments {
            self.merge_kernel_arguments(ka);
        }
    }

    fn merge_kernel_arguments(&mut self, child: &Value) {
        let acc = self.kernel_arguments.get_or_insert_with(KernelArguments::default);
        let list = |name: &str| child.get(name).and_then(Value::as_array).cloned().unwrap_or_default();
        for arg in list("shouldExist") {
            acc.should_not_exist.retain(|a| *a != arg);
            if !acc.should_exist.contains(&arg) {
                acc.should_exist.push(arg);
            }
        }
        for arg in list("shouldNotExist") {
            acc.should_exist.retain(|a| *a != arg);
            if !acc.should_not_exist.contains(&arg) {
                acc.should_not_exist.push(arg);
            }
        }
    }

    /// The merged config with `version` = [`ignition::RENDERED_VERSION`] and every file whose
    /// `overwrite` is unset defaulted to `true` (MCO: set after all merges; explicit `false` kept).
    ///
    /// A file so defaulted that has no `contents.source` also gets [`EMPTY_SOURCE`]: Ignition
    /// refuses `overwrite: true` without a source ("overwrite must be false if source is
    /// unspecified"), which MCO's defaulting runs into, while MCO's daemon writes such a file as
    /// the empty file. With the empty data URL, a new node's Ignition and a running node's
    /// daemon both write the empty file (a deliberate difference from MCO, whose rendered config
    /// is then invalid for new nodes).
    pub(super) fn finish(self) -> Config {
        let mut files = self.files.into_vec();
        for f in &mut files {
            if f.overwrite.is_none() {
                f.overwrite = Some(true);
                let contents = f.contents.get_or_insert_with(Resource::default);
                if contents.source.is_none() {
                    contents.source = Some(EMPTY_SOURCE.to_string());
                    contents.compression = None;
                }
            }
        }
        let kernel_arguments = self.kernel_arguments.map(|ka| {
            let mut m = Map::new();
            if !ka.should_exist.is_empty() {
                m.insert("shouldExist".into(), Value::Array(ka.should_exist));
            }
            if !ka.should_not_exist.is_empty() {
                m.insert("shouldNotExist".into(), Value::Array(ka.should_not_exist));
            }
            Value::Object(m)
        });
        Config {
            ignition: IgnitionSection {
                version: ignition::RENDERED_VERSION.to_string(),
                ..self.ignition
            },
            storage: ignition::Storage {
                files,
                directories: self.directories.finish(),
                links: self.links.finish(),
                disks: self.disks.finish(),
                raid: self.raid.finish(),
                filesystems: self.filesystems.finish(),
                luks: self.luks.finish(),
                trees: self.trees,
            },
            systemd: ignition::Systemd {
                units: self.units.into_vec(),
            },
            passwd: ignition::Passwd {
                users: self.users.into_vec(),
                groups: self.groups.finish(),
            },
            kernel_arguments,
        }
    }
}

/// MCO's compression quirk: an unset compression becomes `""` before the merge step (so it
/// replaces the parent's `gzip`) and `""` becomes unset after it. Net effect: the child's
/// compression, with `""` read as unset.
fn normalise_compression(f: &mut File) {
    if let Some(c) = &mut f.contents {
        if c.compression.as_deref() == Some("") {
            c.compression = None;
        }
    }
}

fn merge_file(parent: &mut File, child: File) {
    replace_if_set(&mut parent.overwrite, &child.overwrite);
    replace_if_set(&mut parent.mode, &child.mode);
    merge_node_user(&mut parent.user, child.user);
    merge_node_user(&mut parent.group, child.group);
    // The child's compression always wins (see `normalise_compression`), even when the child
    // sets no contents at all.
    let compression = child.contents.as_ref().and_then(|c| c.compression.clone());
    match (&mut parent.contents, child.contents) {
        (Some(p), Some(c)) => merge_resource(p, c),
        (p @ None, Some(c)) => *p = Some(c),
        (_, None) => {}
    }
    if let Some(c) = &mut parent.contents {
        c.compression = compression;
    }
    match (&mut parent.append, child.append) {
        (Some(Value::Array(p)), Some(Value::Array(c))) => p.extend(c),
        (p, Some(c)) if !c.is_null() => *p = Some(c),
        _ => {}
    }
}

fn merge_node_user(parent: &mut Option<NodeUser>, child: Option<NodeUser>) {
    match (parent.as_mut(), child) {
        (Some(p), Some(c)) => {
            replace_if_set(&mut p.id, &c.id);
            replace_if_set(&mut p.name, &c.name);
        }
        (None, Some(c)) => *parent = Some(c),
        (_, None) => {}
    }
}

fn merge_resource(parent: &mut Resource, child: Resource) {
    replace_if_set(&mut parent.source, &child.source);
    merge_opt_value(&mut parent.http_headers, &child.http_headers);
    match (parent.verification.as_mut(), child.verification) {
        (Some(p), Some(c)) => replace_if_set(&mut p.hash, &c.hash),
        (None, Some(c)) => parent.verification = Some(c),
        (_, None) => {}
    }
}

fn merge_unit(parent: &mut Unit, child: Unit) {
    replace_if_set(&mut parent.enabled, &child.enabled);
    replace_if_set(&mut parent.mask, &child.mask);
    replace_if_set(&mut parent.contents, &child.contents);
    for d in child.dropins {
        match parent.dropins.iter_mut().find(|p| p.name == d.name) {
            Some(p) => merge_dropin(p, d),
            None => parent.dropins.push(d),
        }
    }
}

fn merge_dropin(parent: &mut Dropin, child: Dropin) {
    replace_if_set(&mut parent.contents, &child.contents);
}

fn merge_user(parent: &mut User, child: User) {
    for key in child.ssh_authorized_keys {
        if !parent.ssh_authorized_keys.contains(&key) {
            parent.ssh_authorized_keys.push(key);
        }
    }
    replace_if_set(&mut parent.password_hash, &child.password_hash);
    merge_map(&mut parent.other, child.other);
}
