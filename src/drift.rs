//! Pure: the rules of a DriftPolicy (`policy.mco.dev/v1`, [`crate::model::DriftPolicy`]): its
//! admission, its path globs, which action a drifted path takes on a node of a pool, the kind
//! of mismatch a drift message names and the bounded diff of a drifted file.
//!
//! MCO degrades a node on any drift of a managed path (`pkg/daemon/config_drift_monitor.go`,
//! mco-facts 5); a DriftPolicy lets a pool choose per path: [`Action::Degrade`] (MCO's, also
//! the default when no rule matches), [`Action::Revert`] (the daemon rewrites the path from the
//! rendered config) or [`Action::Report`] (recorded, the node stays Done).
//!
//! Overlapping policies: every policy selecting the pool counts; their rules are taken policy
//! by policy in name order, each policy's rules in their order, and the first rule with a glob
//! matching the path decides ([`resolve`]). Deterministic, and the same "by name" order that
//! decides between RolloutPolicies.

use crate::model::{invalid, validate_label_selector, validate_object_meta, DriftPolicy, MachineConfigPool};
use crate::validation::FieldError;

/// What a drift of a path does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// The node goes Degraded with MCO's message (MCO's behaviour).
    Degrade,
    /// The daemon rewrites the path from the rendered config through its atomic write path;
    /// the node stays Done.
    Revert,
    /// Recorded (history, metric, Event); the node stays Done and the path stays drifted.
    Report,
}

impl Action {
    /// Every action, in the order the API lists them.
    pub const ALL: [Action; 3] = [Action::Degrade, Action::Report, Action::Revert];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Degrade => "Degrade",
            Action::Revert => "Revert",
            Action::Report => "Report",
        }
    }

    /// The action spelled exactly as the API does (case-sensitive, as a Kubernetes enum).
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// The action for a path and the rule that chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    /// `<policy>: spec.rules[i]`, or `None` for the default (no rule matched).
    pub rule: Option<String>,
}

/// The rules in force for one pool: `(policy, rule index, globs, action)` in decision order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<(String, usize, Vec<String>, Action)>,
}

/// The rules of every valid policy selecting `pool` (none: `pool` is `None`, the node is in no
/// pool), policies in name order. An invalid policy (stored before a stricter admission) is
/// skipped, as a RolloutPolicy that does not parse is.
pub fn resolve(policies: &[DriftPolicy], pool: Option<&MachineConfigPool>) -> Rules {
    let Some(pool) = pool else {
        return Rules::default();
    };
    let mut selected: Vec<&DriftPolicy> = policies
        .iter()
        .filter(|p| crate::model::selector_matches(p.spec.pool_selector.as_ref(), &pool.metadata))
        .filter(|p| validate(p).is_empty())
        .collect();
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules = Vec::new();
    for p in selected {
        let name = p.metadata.name.clone().unwrap_or_default();
        for (i, r) in p.spec.rules.iter().enumerate() {
            let action = Action::parse(&r.action).unwrap_or(Action::Degrade);
            rules.push((name.clone(), i, r.paths.clone(), action));
        }
    }
    Rules { rules }
}

impl Rules {
    /// The action for a drift of `path`: the first rule with a matching glob, else Degrade.
    pub fn decide(&self, path: &str) -> Decision {
        self.rules
            .iter()
            .find(|(_, _, globs, _)| globs.iter().any(|g| glob_match(g, path)))
            .map(|(policy, i, _, action)| Decision {
                action: *action,
                rule: Some(format!("{policy}: spec.rules[{i}]")),
            })
            .unwrap_or(Decision {
                action: Action::Degrade,
                rule: None,
            })
    }

    /// No rule at all: every drift is MCO's.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// Admission of a DriftPolicy: Kubernetes' metadata rules, `spec.poolSelector` as a label
/// selector, at least one rule, each with at least one glob ([`check_glob`]) and a supported
/// action, in kube-apiserver's words: `spec.rules[1].action: Unsupported value: "Fix":
/// supported values: "Degrade", "Report", "Revert"`.
pub fn validate(p: &DriftPolicy) -> Vec<FieldError> {
    let mut errors = validate_object_meta(&p.metadata);
    errors.extend(validate_label_selector(
        p.spec.pool_selector.as_ref(),
        "spec.poolSelector",
    ));
    if p.spec.rules.is_empty() {
        errors.push(FieldError::new("spec.rules", "Required value"));
    }
    let supported = Action::ALL.map(|a| format!("\"{}\"", a.as_str())).join(", ");
    for (i, r) in p.spec.rules.iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        if r.paths.is_empty() {
            errors.push(FieldError::new(format!("{at}.paths"), "Required value"));
        }
        for (j, g) in r.paths.iter().enumerate() {
            if let Err(e) = check_glob(g) {
                errors.push(invalid(format!("{at}.paths[{j}]"), g, &e));
            }
        }
        if r.action.is_empty() {
            errors.push(FieldError::new(format!("{at}.action"), "Required value"));
        } else if Action::parse(&r.action).is_none() {
            errors.push(FieldError::new(
                format!("{at}.action"),
                format!(
                    "Unsupported value: {}: supported values: {supported}",
                    crate::gofmt::quote(&r.action)
                ),
            ));
        }
    }
    errors
}

/// Whether `glob` is a valid path glob: absolute, no empty segment, `**` only as a whole
/// segment, every `[` closed with a non-empty class. Errors name the rule broken.
pub fn check_glob(glob: &str) -> Result<(), String> {
    if !glob.starts_with('/') {
        return Err("must be an absolute path glob (start with \"/\")".into());
    }
    if glob.len() > 1 && glob.ends_with('/') {
        return Err("must not end with \"/\"".into());
    }
    for seg in glob[1..].split('/') {
        if seg.is_empty() {
            return Err("must not contain an empty path segment (\"//\")".into());
        }
        if seg.contains("**") && seg != "**" {
            return Err("\"**\" must be a whole path segment".into());
        }
        let b = seg.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'[' => match class_end(b, i) {
                    Some(end) => i = end,
                    None => return Err("unterminated character class \"[\"".into()),
                },
                b']' => return Err("unmatched \"]\"".into()),
                _ => {}
            }
            i += 1;
        }
    }
    Ok(())
}

/// The index of the `]` closing the class opened at `b[open]`, or `None`. A `]` right after
/// `[` or `[!` is a member, as in shells.
fn class_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if b.get(i) == Some(&b'!') {
        i += 1;
    }
    if b.get(i) == Some(&b']') {
        i += 1;
    }
    while i < b.len() {
        if b[i] == b']' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Whether node path `path` matches `glob` ([`check_glob`]'s syntax): segment by segment, `**`
/// matches zero or more whole segments, `*` any run of characters within a segment, `?` one
/// character, `[...]` one character of the class (`[!...]` not of it). An invalid glob matches
/// nothing.
pub fn glob_match(glob: &str, path: &str) -> bool {
    if check_glob(glob).is_err() || !path.starts_with('/') {
        return false;
    }
    let g: Vec<&str> = glob[1..].split('/').collect();
    let p: Vec<&str> = path[1..].split('/').collect();
    segments_match(&g, &p)
}

fn segments_match(g: &[&str], p: &[&str]) -> bool {
    match g.first() {
        None => p.is_empty(),
        Some(&"**") => (0..=p.len()).any(|k| segments_match(&g[1..], &p[k..])),
        Some(seg) => {
            !p.is_empty() && segment_match(seg.as_bytes(), p[0].as_bytes()) && segments_match(&g[1..], &p[1..])
        }
    }
}

fn segment_match(g: &[u8], s: &[u8]) -> bool {
    match g.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|k| segment_match(&g[1..], &s[k..])),
        Some(b'?') => !s.is_empty() && segment_match(&g[1..], &s[1..]),
        Some(b'[') => {
            let Some(end) = class_end(g, 0) else { return false };
            !s.is_empty() && class_has(&g[1..end], s[0]) && segment_match(&g[end + 1..], &s[1..])
        }
        Some(c) => s.first() == Some(c) && segment_match(&g[1..], &s[1..]),
    }
}

fn class_has(class: &[u8], c: u8) -> bool {
    let (negated, class) = match class.first() {
        Some(b'!') => (true, &class[1..]),
        _ => (false, class),
    };
    let mut i = 0;
    let mut found = false;
    while i < class.len() {
        if i + 2 < class.len() && class[i + 1] == b'-' {
            found |= class[i] <= c && c <= class[i + 2];
            i += 3;
        } else {
            found |= class[i] == c;
            i += 1;
        }
    }
    found != negated
}

/// The kind of mismatch a drift message names (the monitor's texts, MCO's
/// `pkg/daemon/on_disk_validation.go`): `missing` (the file is gone), `mode`, `contents`, `unit`
/// (a masked unit's link), `unreadable` or `other`. Ownership is not checked (MCO does not
/// either, mco-facts 5); unit enablement is checked at each update's pre-flight, not by the
/// monitor.
pub fn mismatch(message: &str) -> &'static str {
    if message.starts_with("could not stat file") && message.ends_with("no such file or directory") {
        "missing"
    } else if message.starts_with("mode mismatch") {
        "mode"
    } else if message.starts_with("content mismatch") {
        "contents"
    } else if message.starts_with("state validation:") || message.starts_with("unit ") {
        "unit"
    } else if message.starts_with("could not") {
        "unreadable"
    } else {
        "other"
    }
}

/// What the log records about one drift of one path (the history's `NodeConfigDrifted`
/// event) or its revert (`NodeConfigReverted`): sent by the daemon with its drift report
/// ([`crate::metrics::Report::drift`]) and written by the server as a note on the Node.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    /// The node path.
    pub path: String,
    /// [`mismatch`] of the message.
    pub mismatch: String,
    /// [`Action::as_str`].
    pub action: String,
    /// The rule that chose the action ([`Decision::rule`]); empty for the default.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rule: String,
    /// The monitor's message (MCO's validation text).
    pub message: String,
    /// [`contents_diff`] from the disk to the rendered config; empty without a content change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff: String,
    /// For a revert: what was written (`reverted to rendered-worker-… (12 bytes, mode 0644)`,
    /// and the disruption actions taken); empty for a detection.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reverted: String,
}

impl DriftRecord {
    /// The event's `detail`: one line (`/etc/chrony.conf: contents mismatch, Revert by
    /// p: spec.rules[0]: content mismatch for file "/etc/chrony.conf"`, or the revert's line),
    /// then the diff.
    pub fn detail(&self) -> String {
        let mut line = if self.reverted.is_empty() {
            let by = if self.rule.is_empty() {
                " (no DriftPolicy rule matched)".to_string()
            } else {
                format!(" by {}", self.rule)
            };
            format!(
                "{}: {} mismatch, {}{by}: {}",
                self.path, self.mismatch, self.action, self.message
            )
        } else {
            format!("{}: {}", self.path, self.reverted)
        };
        if !self.diff.is_empty() {
            line.push('\n');
            line.push_str(&self.diff);
        }
        line
    }
}

/// At most this many bytes of diff are recorded per drift; the rest is counted.
pub const MAX_DIFF_BYTES: usize = 8 * 1024;

/// The diff of a drifted file's contents, from what is on disk to what the rendered config
/// holds: a unified diff (`--- <path> (on disk)`, `+++ <path> (rendered)`) when both sides
/// are text (UTF-8 without NUL), cut at a line boundary after [`MAX_DIFF_BYTES`] with
/// `... N more bytes of diff`; for binary contents one line saying so with both sizes; empty
/// when the contents are equal.
pub fn contents_diff(path: &str, on_disk: &[u8], rendered: &[u8]) -> String {
    if on_disk == rendered {
        return String::new();
    }
    match (as_text(on_disk), as_text(rendered)) {
        (Some(a), Some(b)) => {
            let full = crate::diff::unified(a, b, &format!("{path} (on disk)"), &format!("{path} (rendered)"));
            bound(full)
        }
        _ => format!(
            "binary contents differ: {} bytes on disk, {} bytes in the rendered config\n",
            on_disk.len(),
            rendered.len()
        ),
    }
}

/// `b` as text: UTF-8 without NUL.
fn as_text(b: &[u8]) -> Option<&str> {
    std::str::from_utf8(b).ok().filter(|s| !s.contains('\0'))
}

fn bound(full: String) -> String {
    if full.len() <= MAX_DIFF_BYTES {
        return full;
    }
    let mut cut = full[..MAX_DIFF_BYTES].rfind('\n').map_or(0, |i| i + 1);
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... {} more bytes of diff\n", &full[..cut], full.len() - cut)
}

#[cfg(test)]
mod tests;
