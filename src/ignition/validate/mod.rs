//! Parsing and validation of one Ignition 3.x config as a MachineConfig carries it.
//!
//! Owns the rules that decide whether a raw `spec.config` is acceptable: the spec version, the
//! Ignition validation rules MCO runs (`ValidateIgnition` in `pkg/controller/common/helpers.go`,
//! vendored `ignition/v2/config/v3_5/types`), MCO's own file-mode rule, the day-2
//! reconcilability rules of `pkg/controller/common/reconcile.go` applied to a single config
//! (a section mco cannot reconcile is refused up front, not at render time), and what a node can
//! never apply (see [`super::names`]). Also owns turning file contents into bytes
//! ([`file_contents`]: the data URL decoder of [`super::dataurl`], then gzip).
//!
//! Pure: no IO, no clock. It must not merge configs (the render module does) nor fetch anything:
//! mco only understands `data:` URLs.

use super::dataurl::decode_data_url;
use super::names::{check_dropin_name, check_id, check_node_path, check_owner_name, check_unit_name};
use super::types::{Config, File, NodeUser, Resource, Unit, User};
use crate::validation::FieldError;
use serde_json::Value;
use sha2::Digest;
use std::collections::HashSet;

/// Ignition spec versions mco accepts and names in its error messages (DESIGN.md section 5).
///
/// 3.5.0 is accepted too ([`ACCEPTED_EXTRA_VERSIONS`]) because it adds nothing mco manages;
/// rendered configs are 3.4.0 ([`super::RENDERED_VERSION`]).
pub const SUPPORTED_VERSIONS: &[&str] = &["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0"];

/// Versions accepted on input beyond [`SUPPORTED_VERSIONS`] (real cluster dumps of current
/// OpenShift carry 3.5.0, MCO's internal version `InternalMCOIgnitionVersion`).
pub const ACCEPTED_EXTRA_VERSIONS: &[&str] = &["3.5.0"];

/// The file the MCD reads as "force an update"; MCO refuses to create it through Ignition
/// (`pkg/controller/common/reconcile.go`, `constants.MachineConfigDaemonForceFile`).
pub const DAEMON_FORCE_FILE: &str = "/run/machine-config-daemon-force";

/// The accepted versions as MCO's messages list them: minor versions joined by `,`
/// (`IgnitionConverterSingleton().GetSupportedMinorVersions()`, mco-facts 1.6), e.g.
/// `2.2,3.0,3.1,3.2,3.3,3.4,3.5` (mco-facts 1.6).
fn supported_list() -> String {
    // Spec 2.2 input is accepted and translated (`ignition::spec2`), as MCO's
    // ParseAndConvertConfig does, so MCO lists it first.
    ["2.2.0"]
        .iter()
        .chain(SUPPORTED_VERSIONS)
        .chain(ACCEPTED_EXTRA_VERSIONS)
        .map(|v| v.rsplit_once('.').map_or(*v, |(minor, _)| minor))
        .collect::<Vec<_>>()
        .join(",")
}

/// A semantic version as `github.com/coreos/go-semver` reads it (`Version.Set`): build metadata
/// after the first `+`, a pre-release after the first `-`, then exactly three dot-separated
/// integers (Go `strconv.ParseInt`, base 10: leading zeros are accepted; a sign cannot occur,
/// as `+` and `-` were split off before).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SemVer<'a> {
    major: i64,
    minor: i64,
    patch: i64,
    pre_release: &'a str,
    metadata: &'a str,
}

impl<'a> SemVer<'a> {
    fn parse(s: &'a str) -> Option<SemVer<'a>> {
        let (rest, metadata) = s.split_once('+').unwrap_or((s, ""));
        let (core, pre_release) = rest.split_once('-').unwrap_or((rest, ""));
        let identifier_ok = |id: &str| {
            id.is_empty()
                || id
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        };
        if !identifier_ok(pre_release) || !identifier_ok(metadata) {
            return None;
        }
        let mut parts = core.splitn(3, '.');
        let mut number = || -> Option<i64> {
            let p = parts.next()?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse().ok()
        };
        Some(SemVer {
            major: number()?,
            minor: number()?,
            patch: number()?,
            pre_release,
            metadata,
        })
    }

    /// The minor version of a 3.x release mco accepts (3.0.0 to 3.5.0, no pre-release).
    fn accepted_minor(&self) -> Option<i64> {
        let release = self.pre_release.is_empty() && self.metadata.is_empty() && self.patch == 0;
        (release && self.major == 3 && (0..=5).contains(&self.minor)).then_some(self.minor)
    }
}

/// Parses and validates a raw Ignition config.
///
/// `raw` is the config as the user wrote it (`spec.config` of a MachineConfig); `prefix` is its
/// field path, e.g. `spec.config`, and starts every returned [`FieldError::field`]
/// (`spec.config.storage.files[2].mode`).
///
/// - `{}` (and `null`) is valid and yields [`Config::default()`]: MCO accepts an empty config so
///   that kernelArguments-only MachineConfigs work (`IgnParseWrapper`).
/// - Any other config must declare `ignition.version` 3.0.0 to 3.5.0. The version is read as
///   Ignition reads it (`config/util.GetConfigVersion`, then `ParseCompatibleVersion`) and
///   refused at `<prefix>.ignition.version` with MCO's wording (`IgnParseWrapper`): a string
///   that is not a semantic version (`""`, missing, `3.2`, `badversion`) is
///   `parsing Ignition config failed: invalid version. Supported spec versions: 3.0,...,3.5`; a
///   well-formed version mco does not know (`3.99.0`, `4.0.0`, `3.5.0-experimental`) is
///   `... unknown version. ...`; spec 2.0 to 2.2 is refused as not supported yet. A bad version
///   is the only error returned: the rest of the config cannot be read without it.
/// - Type errors (a string where a number is expected, ...) name the path of the bad value; one
///   per file, unit and user entry, plus one for the rest of the config.
/// - Then every rule of [`validate_config`] runs and all its errors are returned together.
pub fn parse_config(raw: &Value, prefix: &str) -> Result<Config, Vec<FieldError>> {
    parse_config_with(raw, prefix, crate::limits::ContentLimits::default())
}

/// [`parse_config`] with the limit of one file's contents, decoded and decompressed
/// ([`crate::limits::Limits::max_file_bytes`]), instead of its default.
pub fn parse_config_with(
    raw: &Value,
    prefix: &str,
    limits: crate::limits::ContentLimits,
) -> Result<Config, Vec<FieldError>> {
    let obj = match raw {
        Value::Null => return Ok(Config::default()),
        Value::Object(o) => o,
        other => {
            return Err(vec![FieldError::new(
                prefix,
                format!(
                    "parsing Ignition config failed: expected an object, got {}",
                    json_type(other)
                ),
            )])
        }
    };
    if obj.is_empty() {
        return Ok(Config::default());
    }
    if super::spec2::is_spec2(raw) {
        // MCO translates spec 2 with ign-converter; errors keep the user's (spec 2) paths.
        let t = super::spec2::translate(raw, prefix)?;
        let remap = |errs: Vec<FieldError>| -> Vec<FieldError> {
            errs.into_iter()
                .map(|e| FieldError::new(t.original_path(prefix, &e.field), e.message))
                .collect()
        };
        let config = deserialize_config(&t.config, prefix).map_err(remap)?;
        let errors = validate_config_with(&config, prefix, limits);
        return if errors.is_empty() {
            Ok(config)
        } else {
            Err(remap(errors))
        };
    }
    check_version(raw, prefix).map_err(|e| vec![e])?;
    let config = deserialize_config(raw, prefix)?;
    let errors = validate_config_with(&config, prefix, limits);
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(errors)
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Checks `ignition.version` of a non-empty raw config (see [`parse_config`]).
fn check_version(raw: &Value, prefix: &str) -> Result<(), FieldError> {
    let field = format!("{prefix}.ignition.version");
    let supported = supported_list();
    let version = match raw.pointer("/ignition/version") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(FieldError::new(
                field,
                format!(
                    "parsing Ignition config failed: version must be a string such as \"3.4.0\", got {}. Supported spec versions: {supported}",
                    json_type(other)
                ),
            ))
        }
    };
    let Some(semver) = SemVer::parse(version) else {
        return Err(FieldError::new(
            field,
            format!("parsing Ignition config failed: invalid version. Supported spec versions: {supported}"),
        ));
    };
    if semver.accepted_minor().is_some() {
        return Ok(());
    }
    Err(FieldError::new(
        field,
        format!("parsing Ignition config failed: unknown version. Supported spec versions: {supported}"),
    ))
}

fn path_error(prefix: &str, e: serde_path_to_error::Error<serde_json::Error>) -> FieldError {
    let path = e.path().to_string();
    let field = if path == "." {
        prefix.to_string()
    } else if path.starts_with('[') {
        format!("{prefix}{path}")
    } else {
        format!("{prefix}.{path}")
    };
    FieldError::new(field, e.into_inner().to_string())
}

/// Deserializes one list entry on its own, keeping the path of a type error.
type EntryCheck = fn(&Value) -> Result<(), serde_path_to_error::Error<serde_json::Error>>;

/// Deserializes the whole config; on a type error, deserializes each file, unit and user on its
/// own so that every bad entry is reported, not only the first.
fn deserialize_config(raw: &Value, prefix: &str) -> Result<Config, Vec<FieldError>> {
    let first = match serde_path_to_error::deserialize::<_, Config>(raw) {
        Ok(c) => return Ok(c),
        Err(e) => path_error(prefix, e),
    };
    let mut errors = Vec::new();
    let mut rest = raw.clone();
    let lists: [(&str, &str, EntryCheck); 3] = [
        ("/storage/files", "storage.files", |v| {
            serde_path_to_error::deserialize::<_, File>(v).map(drop)
        }),
        ("/systemd/units", "systemd.units", |v| {
            serde_path_to_error::deserialize::<_, Unit>(v).map(drop)
        }),
        ("/passwd/users", "passwd.users", |v| {
            serde_path_to_error::deserialize::<_, User>(v).map(drop)
        }),
    ];
    for (pointer, path, check) in lists {
        if let Some(Value::Array(items)) = raw.pointer(pointer) {
            for (i, item) in items.iter().enumerate() {
                if let Err(e) = check(item) {
                    errors.push(path_error(&format!("{prefix}.{path}[{i}]"), e));
                }
            }
            if let Some(v) = rest.pointer_mut(pointer) {
                *v = Value::Array(Vec::new());
            }
        }
    }
    if let Err(e) = serde_path_to_error::deserialize::<_, Config>(&rest) {
        errors.push(path_error(prefix, e));
    }
    if errors.is_empty() {
        // The piecewise pass found nothing (should not happen): report the whole-config error.
        errors.push(first);
    }
    Err(errors)
}

/// Runs every validation rule over an already deserialized config and returns all errors, each
/// with a field path under `prefix`. [`parse_config`] calls it; the render controller calls it
/// on a pool's merged config, so that two MachineConfigs that are each valid but clash once
/// merged are refused before anything is written. Every rule therefore lives here, not in
/// [`parse_config`].
///
/// Rules (MCO `ValidateIgnition` + Ignition's `Validate` + `isConfigReconcilable` + what a node
/// can never apply):
/// - files: path rules of [`check_node_path`] (Ignition's `path not specified`, `path not
///   absolute`, `path is not fully simplified`, then `/`, NUL, `PATH_MAX`, `NAME_MAX`); no two
///   files with one path (`duplicate entry defined`); mode 0..=0o7777 (Ignition `illegal file
///   mode`) and at most 0o777 (MCO `invalid mode 01204 for /etc/foo, cannot exceed 0777`);
///   `overwrite: true` needs a source; user/group not both id and name, ids 0..=4294967294,
///   names as shadow-utils creates them; the contents rules of `validate_resource` (below); no
///   `append`; not [`DAEMON_FORCE_FILE`].
/// - paths of different sections: a file whose path is a unit or dropin path with contents
///   (Ignition 3.1+ `path conflicts with systemd unit or dropin`, `config/v3_*/types/config.go`),
///   the path of a masked unit (masking replaces it with a symlink to `/dev/null`), or the
///   `core` user's SSH key file; a file whose path is a parent directory of another path the
///   config writes.
/// - units: names as [`check_unit_name`] (Ignition's suffix list, then systemd's
///   `unit_name_is_valid`), unique; dropins as [`check_dropin_name`], unique within their unit;
///   unit and dropin contents parse as systemd unit files ([`parse_unit_file`]).
/// - passwd.users: only `core`, only `sshAuthorizedKeys` and `passwordHash`, unique.
/// - refused sections (non-empty): passwd.groups, storage.directories/links/disks/raid/
///   filesystems/luks/trees, Ignition `kernelArguments`, and `ignition.config.merge/replace`
///   with a source.
pub fn validate_config(config: &Config, prefix: &str) -> Vec<FieldError> {
    validate_config_with(config, prefix, crate::limits::ContentLimits::default())
}

/// [`validate_config`] with the limit of one file's contents, decoded and decompressed
/// ([`crate::limits::Limits::max_file_bytes`]): a larger file is refused at
/// `<prefix>.storage.files[N].contents.source` with `Too long: may not be more than N bytes
/// ...`, and a gzip bomb is inflated only up to the limit ([`crate::limits::gunzip_capped`]);
/// files whose contents add up past [`crate::limits::ContentLimits::max_total_bytes`] are
/// refused once, at `<prefix>.storage.files`, naming the limit (each file is inflated at most
/// up to what remains of that budget, so the whole config costs at most the budget).
pub fn validate_config_with(config: &Config, prefix: &str, limits: crate::limits::ContentLimits) -> Vec<FieldError> {
    let max_file_bytes = limits.max_file_bytes;
    let mut total: u64 = 0;
    let mut over_total = false;
    let mut errors = Vec::new();
    validate_ignition_section(config, prefix, &mut errors);
    // Spec 3.0.0 knows only sha512 hashes (sha256 came with 3.1.0).
    let sha256_ok = SemVer::parse(&config.ignition.version)
        .and_then(|v| v.accepted_minor())
        .is_none_or(|minor| minor >= 1);
    let mut paths = HashSet::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        let at = format!("{prefix}.storage.files[{i}]");
        let budget = limits.max_total_bytes.saturating_sub(total);
        match validate_file(file, &at, sha256_ok, max_file_bytes, budget, &mut errors) {
            Size::Known(n) => total = total.saturating_add(n),
            Size::Unknown => {}
            Size::OverBudget if !over_total => {
                over_total = true;
                errors.push(FieldError::new(
                    format!("{prefix}.storage.files"),
                    limits.total_refusal(),
                ));
            }
            Size::OverBudget => {}
        }
        if !file.path.is_empty() && !paths.insert(file.path.as_str()) {
            errors.push(FieldError::new(format!("{at}.path"), "duplicate entry defined"));
        }
    }
    let mut units = HashSet::new();
    for (i, unit) in config.systemd.units.iter().enumerate() {
        let at = format!("{prefix}.systemd.units[{i}]");
        validate_unit(unit, &at, &mut errors);
        if !unit.name.is_empty() && !units.insert(unit.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), "duplicate entry defined"));
        }
    }
    let mut users = HashSet::new();
    for (i, user) in config.passwd.users.iter().enumerate() {
        let at = format!("{prefix}.passwd.users[{i}]");
        validate_user(user, &at, &mut errors);
        if !users.insert(user.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), "duplicate entry defined"));
        }
    }
    super::conflicts::validate_path_conflicts(config, prefix, &mut errors);
    let s = &config.storage;
    let refused: [(&str, &Option<Value>); 9] = [
        ("passwd.groups", &config.passwd.groups),
        ("storage.directories", &s.directories),
        ("storage.links", &s.links),
        ("storage.disks", &s.disks),
        ("storage.raid", &s.raid),
        ("storage.filesystems", &s.filesystems),
        ("storage.luks", &s.luks),
        ("storage.trees", &s.trees),
        ("kernelArguments", &config.kernel_arguments),
    ];
    for (section, value) in refused {
        if value.as_ref().is_some_and(is_non_empty) {
            let hint = if section == "kernelArguments" {
                " (use spec.kernelArguments of the MachineConfig instead)"
            } else {
                ""
            };
            errors.push(FieldError::new(
                format!("{prefix}.{section}"),
                format!("mco does not manage {section}: changes to it cannot be reconciled on a running node (MCO refuses them day 2){hint}"),
            ));
        }
    }
    errors
}

/// True when a raw section holds something: `null`, `[]`, `{}` and objects whose values are all
/// empty (`{"shouldExist": []}`) count as empty.
fn is_non_empty(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => o.values().any(is_non_empty),
        _ => true,
    }
}

fn validate_ignition_section(config: &Config, prefix: &str, errors: &mut Vec<FieldError>) {
    let Some(Value::Object(cfg)) = &config.ignition.config else {
        return;
    };
    let remote = |field: String| {
        FieldError::new(
            field,
            "remote Ignition configs are not supported: mco does not fetch remote content",
        )
    };
    if let Some(replace) = cfg.get("replace") {
        if has_source(replace) {
            errors.push(remote(format!("{prefix}.ignition.config.replace.source")));
        }
    }
    if let Some(Value::Array(merge)) = cfg.get("merge") {
        for (i, m) in merge.iter().enumerate() {
            if has_source(m) {
                errors.push(remote(format!("{prefix}.ignition.config.merge[{i}].source")));
            }
        }
    }
}

fn has_source(resource: &Value) -> bool {
    matches!(resource.get("source"), Some(Value::String(s)) if !s.is_empty())
}

/// The decoded size of a file's contents, as [`validate_file`] found it.
enum Size {
    /// This many bytes.
    Known(u64),
    /// Not known (no contents, or they were refused for another reason).
    Unknown,
    /// More than the budget left for the config's files.
    OverBudget,
}

fn validate_file(
    file: &File,
    at: &str,
    sha256_ok: bool,
    max_file_bytes: u64,
    budget: u64,
    errors: &mut Vec<FieldError>,
) -> Size {
    let path_field = format!("{at}.path");
    if let Err(msg) = check_node_path(&file.path) {
        errors.push(FieldError::new(&path_field, msg));
    }
    if file.path == DAEMON_FORCE_FILE {
        errors.push(FieldError::new(
            &path_field,
            format!("cannot create {DAEMON_FORCE_FILE} via Ignition"),
        ));
    }
    if let Some(mode) = file.mode {
        if !(0..=0o7777).contains(&mode) {
            // Ignition `validateMode` (config/v3_*/types/mode.go).
            errors.push(FieldError::new(format!("{at}.mode"), "illegal file mode"));
        } else if mode > 0o777 {
            // MCO `validateIgn3FileModes`: Go's `%#o` prints octal with a leading 0.
            errors.push(FieldError::new(
                format!("{at}.mode"),
                format!("invalid mode 0{mode:o} for {}, cannot exceed 0777", file.path),
            ));
        }
    }
    if file.append.as_ref().is_some_and(is_non_empty) {
        errors.push(FieldError::new(
            format!("{at}.append"),
            format!("ignition file {} includes append", file.path),
        ));
    }
    for (what, owner) in [("user", &file.user), ("group", &file.group)] {
        if let Some(owner) = owner {
            validate_owner(owner, what, &format!("{at}.{what}"), errors);
        }
    }
    let source = file.contents.as_ref().and_then(|c| c.source.as_deref());
    if file.overwrite == Some(true) && source.is_none() {
        errors.push(FieldError::new(
            format!("{at}.overwrite"),
            "overwrite must be false if source is unspecified",
        ));
    }
    match &file.contents {
        Some(contents) => validate_resource(
            contents,
            &format!("{at}.contents"),
            sha256_ok,
            max_file_bytes,
            budget,
            errors,
        ),
        None => Size::Unknown,
    }
}

/// A file's `user` or `group`: Ignition's `cannot set both id and name`, then the id range and
/// the name rule of [`super::names`].
fn validate_owner(owner: &NodeUser, what: &str, at: &str, errors: &mut Vec<FieldError>) {
    let name = owner.name.as_deref().filter(|n| !n.is_empty());
    if owner.id.is_some() && name.is_some() {
        errors.push(FieldError::new(at, "cannot set both id and name"));
    }
    if let Some(id) = owner.id {
        if let Err(msg) = check_id(id, what) {
            errors.push(FieldError::new(format!("{at}.id"), msg));
        }
    }
    if let Some(name) = name {
        if let Err(msg) = check_owner_name(name, what) {
            errors.push(FieldError::new(format!("{at}.name"), msg));
        }
    }
}

/// The contents of a file (`storage.files[i].contents`), with Ignition's messages
/// (`config/shared/errors/errors.go`) where Ignition has a rule:
/// - `compression`: `""` or `gzip` (`invalid compression method`);
/// - `httpHeaders`: only with an http(s) source (`unable to parse url` without a source,
///   `cannot use HTTP headers with this source scheme` otherwise);
/// - `verification.hash`: needs a source (`source must be specified if verification is
///   specified`), `<function>-<hex>` (`malformed hash specifier`), `sha512` or, from spec 3.1,
///   `sha256` (`unrecognized hash function`), of the right length (`incorrect size for hash
///   sum`), and it must match the contents *after* decompression, as Ignition hashes what it
///   writes (`internal/resource/url.go`, `decompressCopyHashAndVerify`: `hash verification
///   failed (calculated ... but expected ...)`);
/// - `source`: a `data:` URL as [`decode_data_url`] reads it (other schemes Ignition knows are
///   refused because mco does not fetch; others are `invalid url scheme`), whose gzip (if any)
///   decompresses.
fn validate_resource(
    res: &Resource,
    at: &str,
    sha256_ok: bool,
    max_file_bytes: u64,
    budget: u64,
    errors: &mut Vec<FieldError>,
) -> Size {
    let compression = res.compression.as_deref().unwrap_or("");
    let compression_ok = matches!(compression, "" | "gzip");
    if !compression_ok {
        errors.push(FieldError::new(
            format!("{at}.compression"),
            format!("invalid compression method {compression:?}: must be \"\" or \"gzip\""),
        ));
    }
    if res.http_headers.as_ref().is_some_and(is_non_empty) {
        let msg = match res.source.as_deref() {
            None | Some("") => "unable to parse url: httpHeaders need an http(s) source",
            Some(_) => "cannot use HTTP headers with this source scheme: httpHeaders are only allowed with http(s) sources, which mco does not fetch",
        };
        errors.push(FieldError::new(format!("{at}.httpHeaders"), msg));
    }
    let hash_field = format!("{at}.verification.hash");
    let hash = res.verification.as_ref().and_then(|v| v.hash.as_deref());
    let expected = match hash {
        None => None,
        Some(_) if res.source.is_none() => {
            errors.push(FieldError::new(
                &hash_field,
                "source must be specified if verification is specified",
            ));
            None
        }
        Some(h) => match parse_hash(h, sha256_ok) {
            Ok(parsed) => Some(parsed),
            Err(msg) => {
                errors.push(FieldError::new(&hash_field, msg));
                None
            }
        },
    };
    let Some(source) = res.source.as_deref() else {
        return Size::Unknown;
    };
    let fetched = match check_scheme(source).and_then(|()| decode_data_url(source)) {
        Ok(bytes) => bytes,
        Err(msg) => {
            errors.push(FieldError::new(format!("{at}.source"), msg));
            return Size::Unknown;
        }
    };
    if fetched.len() as u64 > max_file_bytes {
        errors.push(FieldError::new(
            format!("{at}.source"),
            too_long(max_file_bytes, "decoded"),
        ));
        return Size::Unknown;
    }
    let contents = if compression == "gzip" {
        // Inflated at most up to what is left of the config's budget.
        let cap = max_file_bytes.min(budget);
        match crate::limits::gunzip_capped(&fetched, cap) {
            Ok(c) => c,
            Err(crate::limits::GunzipError::TooLarge { .. }) if cap < max_file_bytes => return Size::OverBudget,
            Err(e) => {
                errors.push(FieldError::new(format!("{at}.source"), e.to_string()));
                return Size::Unknown;
            }
        }
    } else {
        fetched
    };
    if contents.len() as u64 > budget {
        return Size::OverBudget;
    }
    if let Some((function, expected)) = expected {
        if let Err(msg) = verify_hash(function, expected, &contents, compression == "gzip") {
            errors.push(FieldError::new(&hash_field, msg));
        }
    }
    Size::Known(contents.len() as u64)
}

/// The URL scheme of a source, as Go's `net/url` reads it (case-insensitive). `data` passes;
/// the remote schemes Ignition fetches are refused because mco does not fetch; anything else is
/// Ignition's `invalid url scheme` (or `unable to parse url` when there is no valid scheme).
fn check_scheme(source: &str) -> Result<(), String> {
    let scheme = source
        .split_once(':')
        .map(|(s, _)| s)
        .filter(|s| {
            s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        })
        .map(str::to_ascii_lowercase);
    match scheme.as_deref() {
        Some("data") => Ok(()),
        Some(s @ ("http" | "https" | "tftp" | "s3" | "gs" | "arn" | "oem")) => Err(format!(
            "unsupported source scheme {s:?}: mco serves only embedded data (data: URLs); mco does not fetch remote content, as a node agent must never fetch arbitrary URLs as root"
        )),
        Some(_) => {
            Err("invalid url scheme: only data URLs (data:[<mediatype>][;base64],<data>) are supported".to_string())
        }
        None if source.starts_with(':') => Err("unable to parse url: missing protocol scheme".to_string()),
        None => {
            Err("invalid url scheme: only data URLs (data:[<mediatype>][;base64],<data>) are supported".to_string())
        }
    }
}

/// Ignition's `Verification.Validate` (`config/v3_*/types/verification.go`): `(function, hex)`.
fn parse_hash(hash: &str, sha256_ok: bool) -> Result<(&str, &str), String> {
    let (function, sum) = hash
        .split_once('-')
        .ok_or_else(|| "malformed hash specifier: expected <function>-<hex digest>, e.g. sha512-...".to_string())?;
    let hex_len = match function {
        "sha512" => 128,
        "sha256" if sha256_ok => 64,
        "sha256" => return Err("unrecognized hash function: sha256 needs Ignition spec 3.1.0 or later".to_string()),
        _ => return Err(format!("unrecognized hash function {function:?}: use sha512 or sha256")),
    };
    if sum.len() != hex_len {
        return Err(format!(
            "incorrect size for hash sum: {function} needs {hex_len} hex digits, got {}",
            sum.len()
        ));
    }
    Ok((function, sum))
}

/// Compares the hash of the contents Ignition writes (decompressed) with the expected digest.
fn verify_hash(function: &str, expected: &str, contents: &[u8], decompressed: bool) -> Result<(), String> {
    let actual = match function {
        "sha256" => hex::encode(sha2::Sha256::digest(contents)),
        _ => hex::encode(sha2::Sha512::digest(contents)),
    };
    if expected.eq_ignore_ascii_case(&actual) {
        return Ok(());
    }
    let over = if decompressed {
        " (the hash is over the decompressed contents, as Ignition checks it)"
    } else {
        ""
    };
    Err(format!(
        "hash verification failed (calculated {actual} but expected {expected}){over}"
    ))
}

fn validate_unit(unit: &Unit, at: &str, errors: &mut Vec<FieldError>) {
    if let Err(msg) = check_unit_name(&unit.name) {
        errors.push(FieldError::new(format!("{at}.name"), msg));
    }
    if let Some(contents) = &unit.contents {
        if let Err(msg) = parse_unit_file(contents) {
            errors.push(FieldError::new(
                format!("{at}.contents"),
                format!("invalid unit content: {msg}"),
            ));
        }
    }
    let mut names = HashSet::new();
    for (j, dropin) in unit.dropins.iter().enumerate() {
        let dat = format!("{at}.dropins[{j}]");
        if let Err(msg) = check_dropin_name(&dropin.name) {
            errors.push(FieldError::new(format!("{dat}.name"), msg));
        }
        if !dropin.name.is_empty() && !names.insert(dropin.name.as_str()) {
            errors.push(FieldError::new(format!("{dat}.name"), "duplicate entry defined"));
        }
        if let Some(contents) = &dropin.contents {
            if let Err(msg) = parse_unit_file(contents) {
                errors.push(FieldError::new(
                    format!("{dat}.contents"),
                    format!("invalid unit content: {msg}"),
                ));
            }
        }
    }
}

fn validate_user(user: &User, at: &str, errors: &mut Vec<FieldError>) {
    if user.name != "core" {
        // MCO `validatePasswdChanges` (pkg/controller/common/reconcile.go).
        errors.push(FieldError::new(
            format!("{at}.name"),
            format!(
                "ignition passwd user section contains unsupported changes: non-core user ({:?}: mco manages only the core user's SSH keys and password hash)",
                user.name
            ),
        ));
    }
    for (key, value) in &user.other {
        if is_non_empty(value) && !matches!(value, Value::Bool(false)) {
            errors.push(FieldError::new(
                format!("{at}.{key}"),
                format!("user field {key} is not supported: mco only manages sshAuthorizedKeys and passwordHash of user core (MCO: SSH keys and password hash are not reconcilable)"),
            ));
        }
    }
}

/// Checks that `text` is a systemd unit file as Ignition reads it (go-systemd
/// `unit.Deserialize`): blank lines, comments (`#`, `;`), section headers `[Name]`, and
/// `Key=value` lines inside a section, with `\` line continuations.
///
/// Returns the sections' names in order. Errors: a key before any section, a line that is
/// neither, an unterminated section header, an empty key.
pub fn parse_unit_file(text: &str) -> Result<Vec<String>, String> {
    let mut sections = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("line {}: section header not closed with ']'", n + 1))?;
            if name.is_empty() {
                return Err(format!("line {}: empty section name", n + 1));
            }
            sections.push(name.to_string());
            continue;
        }
        let (key, _) = line
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected Key=value, a [Section] or a comment", n + 1))?;
        if key.trim().is_empty() {
            return Err(format!("line {}: empty key", n + 1));
        }
        if sections.is_empty() {
            return Err(format!("line {}: key {} is outside any [Section]", n + 1, key.trim()));
        }
        // Continuation lines belong to this value, whatever they contain.
        let mut current = line;
        while current.ends_with('\\') {
            match lines.next() {
                Some((_, next)) => current = next.trim_end(),
                None => break,
            }
        }
    }
    Ok(sections)
}

/// Decompresses gzip as Go's `compress/gzip` reader does for Ignition and MCO (every member of
/// a multi-member stream, checksums verified, an empty input refused), at most `cap` bytes
/// ([`crate::limits::gunzip_capped`]).
fn gunzip(bytes: &[u8], cap: u64) -> Result<Vec<u8>, String> {
    crate::limits::gunzip_capped(bytes, cap).map_err(|e| e.to_string())
}

/// The refusal of contents over [`crate::limits::Limits::max_file_bytes`], in
/// Kubernetes' `field.TooLong` wording.
fn too_long(cap: u64, how: &str) -> String {
    format!(
        "Too long: may not be more than {cap} bytes once {how} (the limit of one file's contents, --max-file-bytes)"
    )
}

/// The bytes a file entry puts on disk: its `contents.source` decoded ([`decode_data_url`]) and
/// gunzipped when `contents.compression` is `gzip` (MCO `DecodeIgnitionFileContents`,
/// `pkg/daemon/file_writers.go`). No contents or no source is the empty file.
///
/// Errors: a non-`data:` source, an undecodable data URL, gzip that does not decompress, an
/// unknown compression, contents over [`crate::limits::DEFAULT_MAX_FILE_BYTES`] (the daemon
/// never writes more than that, whatever the server admitted).
pub fn file_contents(file: &File) -> Result<Vec<u8>, String> {
    file_contents_with(file, crate::limits::DEFAULT_MAX_FILE_BYTES)
}

/// [`file_contents`] with another limit of one file's contents, decoded and decompressed.
pub fn file_contents_with(file: &File, max_file_bytes: u64) -> Result<Vec<u8>, String> {
    let Some(contents) = &file.contents else {
        return Ok(Vec::new());
    };
    let Some(source) = contents.source.as_deref() else {
        return Ok(Vec::new());
    };
    check_scheme(source)?;
    let bytes = decode_data_url(source)?;
    if bytes.len() as u64 > max_file_bytes {
        return Err(too_long(max_file_bytes, "decoded"));
    }
    match contents.compression.as_deref().unwrap_or("") {
        "" => Ok(bytes),
        "gzip" => gunzip(&bytes, max_file_bytes),
        other => Err(format!(
            "invalid compression method {other:?}: must be \"\" or \"gzip\""
        )),
    }
}

#[cfg(test)]
mod tests;
