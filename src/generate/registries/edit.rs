//! registries.conf as MCO edits it: a port of openshift/runtime-utils `pkg/registries`
//! (`EditRegistriesConfig`, `mergedMirrorSets`, the topological sort of `topo.go`,
//! `ScopeIsNestedInsideScope`) over the sysregistriesv2 `V2RegistriesConf` fields MCO's
//! template and edits use, encoded as MCO's TOML encoder writes them.

use crate::model::ImageMirrors;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `pull-from-mirror` of digest and tag mirror sets (sysregistriesv2 `MirrorByDigestOnly`,
/// `MirrorByTagOnly`).
pub const DIGEST_ONLY: &str = "digest-only";
pub const TAG_ONLY: &str = "tag-only";

/// One mirror-set object: `(kind, object name, entries, pull-from-mirror)`.
pub type MirrorSet = (&'static str, String, Vec<ImageMirrors>, &'static str);

/// runtime-utils `mirrorsContainsARealMirror`: a mirror set whose mirrors are all its source
/// (or that has none) is not a mirror set and is ignored, its `mirrorSourcePolicy` included.
pub fn has_real_mirror(m: &ImageMirrors) -> bool {
    m.mirrors.iter().any(|x| *x != m.source)
}

/// One mirror of a registry (sysregistriesv2 `Endpoint`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub location: String,
    pub insecure: bool,
    /// `digest-only`, `tag-only` or empty.
    pub pull_from_mirror: String,
}

/// One `[[registry]]` (sysregistriesv2 `Registry`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    /// A wildcard scope (`*.example.com`); empty for a plain one.
    pub prefix: String,
    pub location: String,
    pub insecure: bool,
    pub blocked: bool,
    pub mirror_by_digest_only: bool,
    pub mirrors: Vec<Endpoint>,
}

impl Registry {
    /// runtime-utils `registryScope`: the prefix when set, else the location.
    pub fn scope(&self) -> &str {
        if self.prefix.is_empty() {
            &self.location
        } else {
            &self.prefix
        }
    }
}

/// A registries.conf (sysregistriesv2 `V2RegistriesConf`: the fields MCO's template and edits
/// use).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    pub unqualified_search_registries: Vec<String>,
    pub short_name_mode: String,
    pub registries: Vec<Registry>,
}

fn get_str(t: &toml::Value, k: &str) -> String {
    t.get(k).and_then(toml::Value::as_str).unwrap_or("").to_string()
}

fn get_bool(t: &toml::Value, k: &str) -> bool {
    t.get(k).and_then(toml::Value::as_bool).unwrap_or(false)
}

fn endpoint(e: &toml::Value) -> Endpoint {
    Endpoint {
        location: get_str(e, "location"),
        insecure: get_bool(e, "insecure"),
        pull_from_mirror: get_str(e, "pull-from-mirror"),
    }
}

impl RegistriesConf {
    /// Decodes a registries.conf (version 2).
    ///
    /// Errors: it is not TOML ("error unmarshalling registries config: ...").
    pub fn parse(text: &str) -> Result<RegistriesConf, String> {
        let t: toml::Value = toml::Value::Table(
            text.parse()
                .map_err(|e| format!("error unmarshalling registries config: {e}"))?,
        );
        let array = |v: Option<&toml::Value>| v.and_then(toml::Value::as_array).cloned().unwrap_or_default();
        Ok(RegistriesConf {
            unqualified_search_registries: array(t.get("unqualified-search-registries"))
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            short_name_mode: get_str(&t, "short-name-mode"),
            registries: array(t.get("registry"))
                .iter()
                .map(|r| {
                    let e = endpoint(r);
                    Registry {
                        prefix: get_str(r, "prefix"),
                        location: e.location,
                        insecure: e.insecure,
                        blocked: get_bool(r, "blocked"),
                        mirror_by_digest_only: get_bool(r, "mirror-by-digest-only"),
                        mirrors: array(r.get("mirror")).iter().map(endpoint).collect(),
                    }
                })
                .collect(),
        })
    }

    /// Encodes it as MCO's TOML encoder (BurntSushi `toml`) writes `V2RegistriesConf`: the
    /// top-level keys in struct order (zero values too), then each `[[registry]]` with
    /// `prefix` always and the other keys only when set (`omitempty`), its mirrors as
    /// `[[registry.mirror]]`, nested tables indented by two spaces.
    pub fn encode(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let list: Vec<String> = self.unqualified_search_registries.iter().map(|s| q(s)).collect();
        let mut out = format!(
            "unqualified-search-registries = [{}]\nshort-name-mode = {}\nadditional-layer-store-auth-helper = \"\"\n",
            list.join(", "),
            q(&self.short_name_mode)
        );
        for r in &self.registries {
            out.push_str(&format!("\n[[registry]]\n  prefix = {}\n", q(&r.prefix)));
            if !r.location.is_empty() {
                out.push_str(&format!("  location = {}\n", q(&r.location)));
            }
            for (set, key) in [
                (r.insecure, "insecure"),
                (r.blocked, "blocked"),
                (r.mirror_by_digest_only, "mirror-by-digest-only"),
            ] {
                if set {
                    out.push_str(&format!("  {key} = true\n"));
                }
            }
            for m in &r.mirrors {
                out.push_str("\n  [[registry.mirror]]\n");
                if !m.location.is_empty() {
                    out.push_str(&format!("    location = {}\n", q(&m.location)));
                }
                if m.insecure {
                    out.push_str("    insecure = true\n");
                }
                if !m.pull_from_mirror.is_empty() {
                    out.push_str(&format!("    pull-from-mirror = {}\n", q(&m.pull_from_mirror)));
                }
            }
        }
        out
    }
}

/// runtime-utils `ScopeIsNestedInsideScope`: `sub` equals `sup`, is a namespace or repository
/// inside it, or (for a wildcard `sup` such as `*.example.com`) is on one of its subdomains.
pub fn scope_is_nested(sub: &str, sup: &str) -> bool {
    if sub == sup {
        return true;
    }
    if sub.len() > sup.len() && sub.starts_with(sup) && sub.as_bytes()[sup.len()] == b'/' {
        return true;
    }
    let Some(domain) = sup.strip_prefix('*').filter(|_| sup.starts_with("*.")) else {
        return false;
    };
    match sub.split_once(':') {
        Some((host, _)) => host.ends_with(domain) && !host.contains('/'),
        None => sub.split('/').next().unwrap_or("").ends_with(domain),
    }
}

/// runtime-utils `topoGraph.Sorted`: Kahn's algorithm over the nodes of `edges` (a repeated
/// edge counts once), the queue seeded with the nodes without predecessors in name order, each
/// node's newly freed successors queued in name order; when the queue runs dry with nodes left
/// (a cycle), the first unused node in name order is taken.
pub fn topo_sorted(edges: &[(String, String)]) -> Vec<String> {
    let mut ins: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut outs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, b) in edges {
        ins.entry(a).or_default();
        outs.entry(b).or_default();
        outs.entry(a).or_default().insert(b);
        ins.entry(b).or_default().insert(a);
    }
    let all: Vec<&str> = ins.keys().copied().collect();
    let mut queue: VecDeque<&str> = all.iter().copied().filter(|n| ins[n].is_empty()).collect();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    let mut next_unused = 0;
    while !queue.is_empty() || next_unused < all.len() {
        let node = match queue.pop_front() {
            Some(n) => n,
            None => {
                next_unused += 1;
                match all[next_unused - 1] {
                    n if used.contains(n) => continue,
                    n => n,
                }
            }
        };
        used.insert(node);
        out.push(node.to_string());
        let mut batch: Vec<&str> = Vec::new();
        for succ in &outs[node] {
            let pending = ins.get_mut(succ).expect("every node has an entry");
            pending.remove(node);
            if pending.is_empty() && !used.contains(succ) {
                batch.push(succ);
            }
        }
        batch.sort();
        queue.extend(batch);
    }
    out
}

/// One source's mirrors merged from every set naming it, runtime-utils `mergedMirrors`: an edge
/// between consecutive mirrors of each set and from its last mirror to the source (unless the
/// set lists the source), sorted by [`topo_sorted`]; the source is dropped when it ends the
/// order (sysregistriesv2 tries it last anyway) and kept where a set placed it before another
/// mirror.
pub fn merged_mirrors(source: &str, sets: &[Vec<String>]) -> Vec<String> {
    let mut edges: Vec<(String, String)> = Vec::new();
    for m in sets {
        for w in m.windows(2) {
            edges.push((w[0].clone(), w[1].clone()));
        }
        if !m.iter().any(|x| x == source) {
            if let Some(last) = m.last() {
                edges.push((last.clone(), source.to_string()));
            }
        }
    }
    let mut sorted = topo_sorted(&edges);
    if sorted.last().map(String::as_str) == Some(source) {
        sorted.pop();
    }
    sorted
}

/// runtime-utils `EditRegistriesConfig` over `conf` (the template's registries.conf): the
/// merged digest mirror sets (sources in name order), then the tag ones, add their mirrors to
/// each source's entry (created when missing: a wildcard scope as `prefix`, any other as
/// `location`), `NeverContactSource` blocks the source; blocked scopes get entries; each
/// insecure scope marks its entry, every entry nested inside it and every mirror nested inside
/// it insecure; each blocked scope blocks its entry and every entry nested inside it; last, an
/// entry nested inside a mirrored source with no mirrors of its own gets the source's mirrors
/// with its sub-path appended. Sets without a real mirror ([`has_real_mirror`]) are ignored.
///
/// Errors: a wildcard source with a nested entry to adjust (runtime-utils' "internal error:
/// mirrorsAdjustedForNestedScope for a wildcard scope").
pub fn edit_registries_conf(
    conf: &mut RegistriesConf,
    insecure: &[String],
    blocked: &[String],
    sets: &[MirrorSet],
) -> Result<(), String> {
    fn entry<'a>(conf: &'a mut RegistriesConf, scope: &str) -> &'a mut Registry {
        let i = match conf.registries.iter().position(|r| r.scope() == scope) {
            Some(i) => i,
            None => {
                let mut r = Registry::default();
                if scope.starts_with("*.") {
                    r.prefix = scope.into();
                } else {
                    r.location = scope.into();
                }
                conf.registries.push(r);
                conf.registries.len() - 1
            }
        };
        &mut conf.registries[i]
    }
    // (pull-from-mirror, source, merged mirrors, NeverContactSource), digest before tag.
    let mut merged: Vec<(&str, String, Vec<String>, bool)> = Vec::new();
    for pull in [DIGEST_ONLY, TAG_ONLY] {
        let mut by_source: BTreeMap<&str, (Vec<Vec<String>>, bool)> = BTreeMap::new();
        for (_, _, list, _) in sets.iter().filter(|s| s.3 == pull) {
            for m in list.iter().filter(|m| has_real_mirror(m)) {
                let e = by_source.entry(&m.source).or_default();
                e.0.push(m.mirrors.clone());
                e.1 |= m.mirror_source_policy.as_deref() == Some("NeverContactSource");
            }
        }
        for (source, (lists, never)) in by_source {
            merged.push((pull, source.to_string(), merged_mirrors(source, &lists), never));
        }
    }
    for (pull, source, mirrors, never) in &merged {
        let r = entry(conf, source);
        r.blocked |= *never;
        r.mirrors.extend(mirrors.iter().map(|m| Endpoint {
            location: m.clone(),
            insecure: false,
            pull_from_mirror: pull.to_string(),
        }));
    }
    for scope in blocked {
        entry(conf, scope);
    }
    for scope in insecure {
        entry(conf, scope).insecure = true;
        for r in &mut conf.registries {
            if scope_is_nested(r.scope(), scope) {
                r.insecure = true;
            }
            for m in &mut r.mirrors {
                if scope_is_nested(&m.location, scope) {
                    m.insecure = true;
                }
            }
        }
    }
    for scope in blocked {
        entry(conf, scope).blocked = true;
        for r in &mut conf.registries {
            if scope_is_nested(r.scope(), scope) {
                r.blocked = true;
            }
        }
    }
    for (_, source, _, _) in &merged {
        let mirrored = entry(conf, source).clone();
        let mirrored_scope = mirrored.scope();
        for r in &mut conf.registries {
            let scope = r.scope().to_string();
            if scope != mirrored_scope && scope_is_nested(&scope, mirrored_scope) && r.mirrors.is_empty() {
                if mirrored_scope.starts_with("*.") {
                    return Err(format!(
                        "internal error: mirrorsAdjustedForNestedScope for a wildcard scope {mirrored_scope:?}"
                    ));
                }
                let rest = &scope[mirrored_scope.len()..];
                r.mirrors = mirrored
                    .mirrors
                    .iter()
                    .map(|m| Endpoint {
                        location: format!("{}{rest}", m.location),
                        ..m.clone()
                    })
                    .collect();
            }
        }
    }
    Ok(())
}
