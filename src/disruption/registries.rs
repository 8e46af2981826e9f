//! The safe changes of `registries.conf` (mco-facts 6.4, MCO's
//! `isSafeContainerRegistryConfChanges`): a change that needs no drain.

use serde::Deserialize;

/// One `[[registry]]` of containers-registries.conf(5), the fields the safe-change rules read.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct Registry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<Mirror>,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct Mirror {
    #[serde(default)]
    location: String,
    #[serde(default)]
    pull_from_mirror: String,
}

#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "kebab-case")]
struct RegistriesConf {
    #[serde(default)]
    unqualified_search_registries: Vec<String>,
    #[serde(default)]
    registry: Vec<Registry>,
}

impl Registry {
    fn key(&self) -> &str {
        if self.prefix.is_empty() {
            &self.location
        } else {
            &self.prefix
        }
    }
}

const DIGEST_ONLY: &str = "digest-only";

/// MCO's `isSafeContainerRegistryConfChanges` (`pkg/daemon/drain.go`, mco-facts 6.4): the
/// search list only extended at its end; no registry removed; an existing registry keeps its
/// prefix, location, blocked and insecure, loses no mirror, and an existing mirror's
/// `pull-from-mirror` only changes to `digest-only`; every new mirror is digest-only (or the
/// registry `mirror-by-digest-only`); a new registry has only digest-only mirrors (or, with none,
/// `mirror-by-digest-only = true`). A file that does not parse as TOML is not safe (MCO fails the
/// update there; mco drains and goes on).
pub fn registries_change_is_safe(old: Option<&[u8]>, new: Option<&[u8]>) -> bool {
    let parse = |b: Option<&[u8]>| -> Option<RegistriesConf> {
        match b {
            None => Some(RegistriesConf::default()),
            Some(b) => toml::from_str(std::str::from_utf8(b).ok()?).ok(),
        }
    };
    let (Some(old), Some(new)) = (parse(old), parse(new)) else {
        return false;
    };
    if !new
        .unqualified_search_registries
        .starts_with(&old.unqualified_search_registries)
    {
        return false;
    }
    for o in &old.registry {
        let Some(n) = new.registry.iter().find(|n| n.key() == o.key()) else {
            return false;
        };
        if n.prefix != o.prefix || n.location != o.location || n.blocked != o.blocked || n.insecure != o.insecure {
            return false;
        }
        for om in &o.mirror {
            let Some(nm) = n.mirror.iter().find(|m| m.location == om.location) else {
                return false;
            };
            if nm.pull_from_mirror != om.pull_from_mirror && nm.pull_from_mirror != DIGEST_ONLY {
                return false;
            }
        }
        for nm in &n.mirror {
            let added = !o.mirror.iter().any(|m| m.location == nm.location);
            if added && nm.pull_from_mirror != DIGEST_ONLY && !n.mirror_by_digest_only {
                return false;
            }
        }
    }
    for n in &new.registry {
        if old.registry.iter().any(|o| o.key() == n.key()) {
            continue;
        }
        let ok = if n.mirror.is_empty() {
            n.mirror_by_digest_only
        } else {
            n.mirror.iter().all(|m| m.pull_from_mirror == DIGEST_ONLY)
        };
        if !ok {
            return false;
        }
    }
    true
}
