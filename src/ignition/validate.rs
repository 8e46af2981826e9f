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
use super::names::{
    check_dropin_name, check_id, check_node_path, check_owner_name, check_unit_name, CORE_SSH_KEYS_PATH,
    SYSTEMD_UNIT_DIR,
};
use super::types::{Config, File, NodeUser, Resource, Unit, User};
use crate::validation::FieldError;
use serde_json::Value;
use sha2::Digest;
use std::collections::{HashMap, HashSet};
use std::io::Read;

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
/// `3.0,3.1,3.2,3.3,3.4,3.5`.
fn supported_list() -> String {
    SUPPORTED_VERSIONS
        .iter()
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
    check_version(raw, prefix).map_err(|e| vec![e])?;
    let config = deserialize_config(raw, prefix)?;
    let errors = validate_config(&config, prefix);
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
    let spec2 = semver.major == 2
        && (0..=2).contains(&semver.minor)
        && semver.patch == 0
        && semver.pre_release.is_empty()
        && semver.metadata.is_empty();
    if spec2 {
        return Err(FieldError::new(
            field,
            format!(
                "parsing Ignition config failed: Ignition spec 2.x (version {version}) is not supported yet; translate it to spec 3 (for example with ignition-config-translator or butane). Supported spec versions: {supported}"
            ),
        ));
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
///   names as shadow-utils creates them; the contents rules of [`validate_resource`]; no
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
    let mut errors = Vec::new();
    validate_ignition_section(config, prefix, &mut errors);
    // Spec 3.0.0 knows only sha512 hashes (sha256 came with 3.1.0).
    let sha256_ok = SemVer::parse(&config.ignition.version)
        .and_then(|v| v.accepted_minor())
        .is_none_or(|minor| minor >= 1);
    let mut paths = HashSet::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        let at = format!("{prefix}.storage.files[{i}]");
        validate_file(file, &at, sha256_ok, &mut errors);
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
    validate_path_conflicts(config, prefix, &mut errors);
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

fn validate_file(file: &File, at: &str, sha256_ok: bool, errors: &mut Vec<FieldError>) {
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
    if let Some(contents) = &file.contents {
        validate_resource(contents, &format!("{at}.contents"), sha256_ok, errors);
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
fn validate_resource(res: &Resource, at: &str, sha256_ok: bool, errors: &mut Vec<FieldError>) {
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
        return;
    };
    let fetched = match check_scheme(source).and_then(|()| decode_data_url(source)) {
        Ok(bytes) => bytes,
        Err(msg) => {
            errors.push(FieldError::new(format!("{at}.source"), msg));
            return;
        }
    };
    let contents = if compression == "gzip" {
        match gunzip(&fetched) {
            Ok(c) => c,
            Err(msg) => {
                errors.push(FieldError::new(format!("{at}.source"), msg));
                return;
            }
        }
    } else {
        fetched
    };
    if let Some((function, expected)) = expected {
        if let Err(msg) = verify_hash(function, expected, &contents, compression == "gzip") {
            errors.push(FieldError::new(&hash_field, msg));
        }
    }
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
            "unsupported source scheme {s:?}: only data URLs are supported, mco does not fetch remote content"
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

/// What a config puts at a node path, for the conflict checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    /// `storage.files[i]`.
    File(usize),
    /// `systemd.units[i]` with contents.
    Unit(usize),
    /// `systemd.units[i]` masked (a symlink to `/dev/null`).
    MaskedUnit(usize),
    /// `systemd.units[i].dropins[j]` with contents.
    Dropin(usize, usize),
    /// The `core` user's SSH keys (`passwd.users[i]`).
    SshKeys(usize),
}

impl Writer {
    fn field(self, prefix: &str) -> String {
        match self {
            Writer::File(i) => format!("{prefix}.storage.files[{i}].path"),
            Writer::Unit(i) | Writer::MaskedUnit(i) => format!("{prefix}.systemd.units[{i}].name"),
            Writer::Dropin(i, j) => format!("{prefix}.systemd.units[{i}].dropins[{j}].name"),
            Writer::SshKeys(i) => format!("{prefix}.passwd.users[{i}].sshAuthorizedKeys"),
        }
    }
}

/// Checks how the node paths of different entries relate (see [`validate_config`]). Only entries
/// whose own path or name is valid take part; their own errors are reported elsewhere.
fn validate_path_conflicts(config: &Config, prefix: &str, errors: &mut Vec<FieldError>) {
    let mut others: Vec<(String, Writer)> = Vec::new();
    for (i, unit) in config.systemd.units.iter().enumerate() {
        if check_unit_name(&unit.name).is_err() {
            continue;
        }
        let unit_path = format!("{SYSTEMD_UNIT_DIR}/{}", unit.name);
        if unit.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            others.push((unit_path.clone(), Writer::Unit(i)));
        }
        if unit.mask == Some(true) {
            others.push((unit_path, Writer::MaskedUnit(i)));
        }
        for (j, dropin) in unit.dropins.iter().enumerate() {
            if check_dropin_name(&dropin.name).is_ok() && dropin.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                let path = format!("{SYSTEMD_UNIT_DIR}/{}.d/{}", unit.name, dropin.name);
                others.push((path, Writer::Dropin(i, j)));
            }
        }
    }
    if let Some(i) = config.passwd.users.iter().position(|u| u.name == "core") {
        others.push((CORE_SSH_KEYS_PATH.to_string(), Writer::SshKeys(i)));
    }
    let mut files: HashMap<&str, usize> = HashMap::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        if check_node_path(&file.path).is_ok() {
            files.entry(file.path.as_str()).or_insert(i);
        }
    }
    // Same path.
    for (path, writer) in &others {
        let Some(&i) = files.get(path.as_str()) else { continue };
        let field = Writer::File(i).field(prefix);
        let by = writer.field(prefix);
        let message = match writer {
            Writer::Unit(_) | Writer::Dropin(..) => {
                format!("path conflicts with systemd unit or dropin: {path} is written from {by}")
            }
            Writer::MaskedUnit(_) => format!(
                "path conflicts with systemd unit or dropin: {by} is masked, which replaces {path} with a symlink to /dev/null"
            ),
            Writer::SshKeys(_) => format!(
                "path conflicts with the core user's SSH keys: the daemon writes {by} to {path}"
            ),
            Writer::File(_) => unreachable!("files are not in the list of other writers"),
        };
        errors.push(FieldError::new(field, message));
    }
    // A file that would have to be a directory.
    let all = config
        .storage
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| check_node_path(&f.path).is_ok())
        .map(|(i, f)| (f.path.as_str(), Writer::File(i)))
        .chain(others.iter().map(|(p, w)| (p.as_str(), *w)));
    let mut reported = HashSet::new();
    for (path, writer) in all {
        let mut parent = path;
        while let Some((dir, _)) = parent.rsplit_once('/') {
            if dir.is_empty() {
                break;
            }
            if let Some(&i) = files.get(dir) {
                if reported.insert(i) {
                    errors.push(FieldError::new(
                        Writer::File(i).field(prefix),
                        format!(
                            "path {dir} is a file here and a directory of {} ({path}): one path cannot be both",
                            writer.field(prefix)
                        ),
                    ));
                }
            }
            parent = dir;
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

/// Decompresses gzip as Go's `compress/gzip` reader does for Ignition and MCO: every member of
/// a multi-member stream, checksums verified, an empty input refused.
fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if bytes.is_empty() {
        return Err("gzip contents do not decompress: EOF (the source is empty)".to_string());
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip contents do not decompress: {e}"))?;
    Ok(out)
}

/// The bytes a file entry puts on disk: its `contents.source` decoded ([`decode_data_url`]) and
/// gunzipped when `contents.compression` is `gzip` (MCO `DecodeIgnitionFileContents`,
/// `pkg/daemon/file_writers.go`). No contents or no source is the empty file.
///
/// Errors: a non-`data:` source, an undecodable data URL, gzip that does not decompress, an
/// unknown compression.
pub fn file_contents(file: &File) -> Result<Vec<u8>, String> {
    let Some(contents) = &file.contents else {
        return Ok(Vec::new());
    };
    let Some(source) = contents.source.as_deref() else {
        return Ok(Vec::new());
    };
    check_scheme(source)?;
    let bytes = decode_data_url(source)?;
    match contents.compression.as_deref().unwrap_or("") {
        "" => Ok(bytes),
        "gzip" => gunzip(&bytes),
        other => Err(format!(
            "invalid compression method {other:?}: must be \"\" or \"gzip\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::UNIT_SUFFIXES;
    use serde_json::json;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn b64(data: &[u8]) -> String {
        // Minimal encoder for test data (standard alphabet, padded).
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn file_contents_decodes_and_gunzips() {
        let plain: File = serde_json::from_value(json!({"path": "/a", "contents": {"source": "data:,x%0A"}})).unwrap();
        assert_eq!(file_contents(&plain).unwrap(), b"x\n");
        let source = format!("data:;base64,{}", b64(&gzip(b"zipped\n")));
        let gz: File =
            serde_json::from_value(json!({"path": "/a", "contents": {"source": source, "compression": "gzip"}}))
                .unwrap();
        assert_eq!(file_contents(&gz).unwrap(), b"zipped\n");
        let empty: File = serde_json::from_value(json!({"path": "/a"})).unwrap();
        assert_eq!(file_contents(&empty).unwrap(), b"");
        let bad: File =
            serde_json::from_value(json!({"path": "/a", "contents": {"source": "data:,x", "compression": "gzip"}}))
                .unwrap();
        assert!(file_contents(&bad).unwrap_err().contains("gzip"));
    }

    /// Parses `config` at prefix `spec.config`; `expected` lists `(field, message substring)`
    /// pairs that must all be present, and nothing else; empty means accepted.
    fn check(config: Value, expected: &[(&str, &str)]) {
        let got = match parse_config(&config, "spec.config") {
            Ok(_) => Vec::new(),
            Err(errors) => errors,
        };
        for (field, msg) in expected {
            assert!(
                got.iter().any(|e| e.field == *field && e.message.contains(msg)),
                "missing {field}: {msg}\nin {got:#?}\nfor {config}"
            );
        }
        assert_eq!(got.len(), expected.len(), "unexpected errors {got:#?} for {config}");
    }

    fn files(files: Value) -> Value {
        json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
    }

    fn units(units: Value) -> Value {
        json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": units}})
    }

    const SUPPORTED: &str = "Supported spec versions: 3.0,3.1,3.2,3.3,3.4,3.5";

    #[test]
    fn versions() {
        check(json!({}), &[]);
        check(Value::Null, &[]);
        // go-semver reads numbers with Go's ParseInt (leading zeros) and drops an empty
        // pre-release or build suffix: Ignition accepts these spellings of 3.4.0.
        for v in [
            "3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "03.4.0", "3.04.00", "3.4.0-", "3.4.0+",
        ] {
            check(json!({"ignition": {"version": v}}), &[]);
        }
        let field = "spec.config.ignition.version";
        let spec2 = format!("parsing Ignition config failed: Ignition spec 2.x (version 2.2.0) is not supported yet; translate it to spec 3 (for example with ignition-config-translator or butane). {SUPPORTED}");
        check(json!({"ignition": {"version": "2.2.0"}}), &[(field, &spec2)]);
        check(
            json!({"ignition": {"version": "2.0.0"}}),
            &[(field, "is not supported yet")],
        );
        // Not a semantic version: Ignition's ErrInvalidVersion (config/util GetConfigVersion).
        let invalid = format!("parsing Ignition config failed: invalid version. {SUPPORTED}");
        for v in [
            "",
            "3.2",
            "badversion",
            "3",
            "v3.4.0",
            "3.4.0.1",
            " 3.4.0",
            "3.4.x",
            "3.4.0-a..b",
            "3.4.0+b_1",
            "-3.4.0",
            "+3.4.0",
            "3.-4.0",
            "3.+4.0",
        ] {
            check(json!({"ignition": {"version": v}}), &[(field, &invalid)]);
        }
        check(json!({"storage": {"files": []}}), &[(field, &invalid)]);
        check(
            json!({"ignition": {"version": null}, "storage": {}}),
            &[(field, &invalid)],
        );
        // Well-formed but not a version mco knows: ErrUnknownVersion (ParseCompatibleVersion).
        let unknown = format!("parsing Ignition config failed: unknown version. {SUPPORTED}");
        for v in [
            "3.99.0",
            "4.0.0",
            "3.5.0-experimental",
            "3.4.0-experimental",
            "3.6.0",
            "3.4.1",
            "3.4.0+build1",
            "1.0.0",
            "2.3.0",
            "2.2.1",
            "0.0.0",
        ] {
            check(json!({"ignition": {"version": v}}), &[(field, &unknown)]);
        }
        check(json!({"ignition": {"version": 3.2}}), &[(field, "must be a string")]);
        check(json!("text"), &[("spec.config", "expected an object")]);
    }

    #[test]
    fn modes() {
        check(files(json!([{"path": "/etc/foo", "mode": 420}])), &[]);
        check(files(json!([{"path": "/etc/foo", "mode": 0o777}])), &[]);
        check(
            files(json!([{"path": "/etc/foo", "mode": 644}])),
            &[(
                "spec.config.storage.files[0].mode",
                "invalid mode 01204 for /etc/foo, cannot exceed 0777",
            )],
        );
        // setuid/setgid/sticky: within Ignition's range, refused by MCO.
        check(
            files(json!([{"path": "/etc/foo", "mode": 0o4755}])),
            &[(
                "spec.config.storage.files[0].mode",
                "invalid mode 04755 for /etc/foo, cannot exceed 0777",
            )],
        );
        check(
            files(json!([{"path": "/etc/foo", "mode": 0o7777}])),
            &[(
                "spec.config.storage.files[0].mode",
                "invalid mode 07777 for /etc/foo, cannot exceed 0777",
            )],
        );
        // Outside Ignition's 0..=07777: Ignition's own error comes first.
        for mode in [-1, 0o10000, 0o100644] {
            check(
                files(json!([{"path": "/etc/foo", "mode": mode}])),
                &[("spec.config.storage.files[0].mode", "illegal file mode")],
            );
        }
        check(
            files(json!([{"path": "/etc/foo", "mode": "0644"}])),
            &[("spec.config.storage.files[0].mode", "invalid type: string \"0644\"")],
        );
    }

    #[test]
    fn type_errors_name_each_entry() {
        check(
            files(json!([{"path": "/a", "mode": "x"}, {"path": "/b"}, {"path": "/c", "overwrite": "yes"}])),
            &[
                ("spec.config.storage.files[0].mode", "invalid type"),
                ("spec.config.storage.files[2].overwrite", "invalid type"),
            ],
        );
        check(
            units(json!([{"name": "a.service", "enabled": "yes"}])),
            &[("spec.config.systemd.units[0].enabled", "invalid type")],
        );
        check(
            json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/a", "contents": {"_REDACTED": "x", "length": 3, "source": 5}}]}}),
            &[("spec.config.storage.files[0].contents.source", "invalid type")],
        );
    }

    #[test]
    fn file_rules() {
        let f = |i: usize, rest: &str| format!("spec.config.storage.files[{i}].{rest}");
        check(files(json!([{"mode": 420}])), &[(&f(0, "path"), "path not specified")]);
        check(
            files(json!([{"path": "etc/foo"}])),
            &[(&f(0, "path"), "path not absolute")],
        );
        for p in ["/etc//foo", "/etc/./foo", "/etc/../foo", "/etc/foo/"] {
            check(
                files(json!([{"path": p}])),
                &[(&f(0, "path"), "path is not fully simplified")],
            );
        }
        check(
            files(json!([{"path": "/a"}, {"path": "/b"}, {"path": "/a"}])),
            &[(&f(2, "path"), "duplicate entry defined")],
        );
        check(
            files(json!([{"path": "/a", "overwrite": true}])),
            &[(&f(0, "overwrite"), "overwrite must be false if source is unspecified")],
        );
        check(files(json!([{"path": "/a", "overwrite": false}])), &[]);
        check(
            files(json!([{"path": "/a", "user": {"id": 0, "name": "root"}}])),
            &[(&f(0, "user"), "cannot set both id and name")],
        );
        check(
            files(json!([{"path": "/a", "group": {"id": 0, "name": "root"}}])),
            &[(&f(0, "group"), "cannot set both id and name")],
        );
        check(
            files(json!([{"path": "/a", "user": {"name": "root"}, "group": {"id": 0}}])),
            &[],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:,x", "compression": "bzip2"}}])),
            &[(&f(0, "contents.compression"), "invalid compression method \"bzip2\"")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:,x", "compression": ""}}])),
            &[],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "https://example.com/a"}}])),
            &[(
                &f(0, "contents.source"),
                "only data URLs are supported, mco does not fetch remote content",
            )],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:,%zz"}}])),
            &[(
                &f(0, "contents.source"),
                "rfc2396: invalid char 0x25 in unescape sequence",
            )],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:;base64,YQ="}}])),
            &[(&f(0, "contents.source"), "illegal base64 data at input byte 3")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:,notgzip", "compression": "gzip"}}])),
            &[(&f(0, "contents.source"), "gzip contents do not decompress")],
        );
        let gz = format!("data:;base64,{}", b64(&gzip(b"ok")));
        check(
            files(json!([{"path": "/a", "contents": {"source": gz, "compression": "gzip"}}])),
            &[],
        );
        check(
            files(json!([{"path": "/a", "append": [{"source": "data:,x"}]}])),
            &[(&f(0, "append"), "ignition file /a includes append")],
        );
        check(files(json!([{"path": "/a", "append": []}])), &[]);
        check(
            files(json!([{"path": DAEMON_FORCE_FILE}])),
            &[(
                &f(0, "path"),
                "cannot create /run/machine-config-daemon-force via Ignition",
            )],
        );
        // All errors are collected, not only the first.
        check(
            files(json!([{"path": "rel", "mode": 644}, {"path": "/b", "overwrite": true}])),
            &[
                (&f(0, "path"), "not absolute"),
                (&f(0, "mode"), "cannot exceed 0777"),
                (&f(1, "overwrite"), "overwrite must be false"),
            ],
        );
    }

    #[test]
    fn verification() {
        let f = "spec.config.storage.files[0].contents.verification.hash";
        let sha512_a = hex::encode(sha2::Sha512::digest(b"a"));
        let sha256_a = hex::encode(sha2::Sha256::digest(b"a"));
        let with_hash = |version: &str, source: Option<&str>, hash: String, gzip: bool| {
            let mut contents = json!({"verification": {"hash": hash}});
            if let Some(s) = source {
                contents["source"] = json!(s);
            }
            if gzip {
                contents["compression"] = json!("gzip");
            }
            json!({"ignition": {"version": version}, "storage": {"files": [{"path": "/a", "contents": contents}]}})
        };
        let v32 = |source: Option<&str>, hash: String| with_hash("3.2.0", source, hash, false);
        check(v32(Some("data:,a"), format!("sha512-{sha512_a}")), &[]);
        check(v32(Some("data:,a"), format!("sha512-{}", sha512_a.to_uppercase())), &[]);
        check(v32(Some("data:;base64,YQ=="), format!("sha256-{sha256_a}")), &[]);
        check(
            v32(Some("data:,b"), format!("sha512-{sha512_a}")),
            &[(
                f,
                &format!(
                    "hash verification failed (calculated {} but expected {sha512_a})",
                    hex::encode(sha2::Sha512::digest(b"b"))
                ),
            )],
        );
        // Ignition's messages (config/shared/errors/errors.go), with a short explanation after.
        check(
            v32(Some("data:,a"), "md5-abc".into()),
            &[(f, "unrecognized hash function")],
        );
        check(
            v32(Some("data:,a"), "SHA512-abc".into()),
            &[(f, "unrecognized hash function")],
        );
        check(
            v32(Some("data:,a"), "sha512-abc".into()),
            &[(f, "incorrect size for hash sum")],
        );
        check(
            v32(Some("data:,a"), "sha256-abc".into()),
            &[(f, "incorrect size for hash sum")],
        );
        check(
            v32(Some("data:,a"), "nodash".into()),
            &[(f, "malformed hash specifier")],
        );
        check(v32(Some("data:,a"), String::new()), &[(f, "malformed hash specifier")]);
        // Right length, not hex: Ignition only finds out when it fetches; mco says it at once.
        check(
            v32(Some("data:,a"), format!("sha512-{}", "z".repeat(128))),
            &[(f, "hash verification failed")],
        );
        check(
            v32(None, format!("sha512-{sha512_a}")),
            &[(f, "source must be specified if verification is specified")],
        );
        // sha256 arrived with spec 3.1.0.
        check(
            with_hash("3.0.0", Some("data:,a"), format!("sha256-{sha256_a}"), false),
            &[(f, "unrecognized hash function")],
        );
        check(
            with_hash("3.1.0", Some("data:,a"), format!("sha256-{sha256_a}"), false),
            &[],
        );
        check(
            with_hash("3.0.0", Some("data:,a"), format!("sha512-{sha512_a}"), false),
            &[],
        );
        // The hash is over the decompressed contents, as Ignition hashes what it writes
        // (internal/resource/url.go, decompressCopyHashAndVerify).
        let zipped = format!("data:;base64,{}", b64(&gzip(b"hello\n")));
        let sha512_hello = hex::encode(sha2::Sha512::digest(b"hello\n"));
        check(
            with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_hello}"), true),
            &[],
        );
        let file: File = serde_json::from_value(
            with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_hello}"), true)["storage"]["files"][0].clone(),
        )
        .unwrap();
        assert_eq!(file_contents(&file).unwrap(), b"hello\n");
        // The digest of the compressed bytes is not what Ignition checks.
        let sha512_zipped = hex::encode(sha2::Sha512::digest(gzip(b"hello\n")));
        check(
            with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_zipped}"), true),
            &[(f, "the hash is over the decompressed contents")],
        );
    }

    #[test]
    fn unit_rules() {
        let u = |i: usize, rest: &str| format!("spec.config.systemd.units[{i}].{rest}");
        for suffix in UNIT_SUFFIXES {
            check(units(json!([{"name": format!("x{suffix}"), "enabled": true}])), &[]);
        }
        check(
            units(json!([{"name": "x.conf"}])),
            &[(&u(0, "name"), "invalid systemd unit extension")],
        );
        check(
            units(json!([{"name": ""}])),
            &[(&u(0, "name"), "unit name not specified")],
        );
        check(
            units(json!([{"name": "a.service"}, {"name": "a.service"}])),
            &[(&u(1, "name"), "duplicate entry defined")],
        );
        // systemd's unit_name_is_valid: templates and instances yes, paths no.
        for ok in [
            "foo@.service",
            "foo@bar.service",
            "postgresql@9.3-main.service",
            "a:b\\x2dc.mount",
        ] {
            check(units(json!([{"name": ok, "enabled": true}])), &[]);
        }
        for (bad, rule) in [
            ("/root/example.service", "character '/' is not allowed"),
            ("../../etc/x.service", "character '/' is not allowed"),
            ("a/b.service", "character '/' is not allowed"),
            (".service", "the name before the suffix is empty"),
            ("@x.service", "the name before '@' is empty"),
            ("foo bar.service", "character ' ' is not allowed"),
        ] {
            check(units(json!([{"name": bad, "enabled": true}])), &[(&u(0, "name"), rule)]);
        }
        let long = format!("{}.service", "a".repeat(248));
        check(
            units(json!([{"name": long}])),
            &[(&u(0, "name"), "at most 255 are allowed")],
        );
        for (bad, rule) in [
            ("x/y.conf", "a file name, not a path"),
            ("../x.conf", "a file name, not a path"),
            (".conf", "hidden files"),
            ("", "dropin name not specified"),
        ] {
            check(
                units(json!([{"name": "a.service", "dropins": [{"name": bad, "contents": "[Service]\nX=1"}]}])),
                &[(&u(0, "dropins[0].name"), rule)],
            );
        }
        let good = "# comment\n; other\n\n[Unit]\nDescription=x\n[Service]\nExecStart=/bin/sh -c \\\n  'echo [not a section]'\nEnvironment=A=b\n";
        check(units(json!([{"name": "a.service", "contents": good}])), &[]);
        check(units(json!([{"name": "a.service", "contents": ""}])), &[]);
        check(
            units(json!([{"name": "a.service", "contents": "Description=x\n[Unit]\n"}])),
            &[(&u(0, "contents"), "outside any [Section]")],
        );
        check(
            units(json!([{"name": "a.service", "contents": "[Unit\n"}])),
            &[(&u(0, "contents"), "section header not closed")],
        );
        check(
            units(json!([{"name": "a.service", "contents": "[Unit]\njunk\n"}])),
            &[(&u(0, "contents"), "expected Key=value")],
        );
        check(
            units(
                json!([{"name": "a.service", "dropins": [{"name": "10-a.conf", "contents": "[Service]\nX=1"}, {"name": "10-a.conf"}, {"name": "b.txt"}, {"name": "c.conf", "contents": "X=1"}]}]),
            ),
            &[
                (&u(0, "dropins[1].name"), "duplicate entry defined"),
                (&u(0, "dropins[2].name"), "invalid systemd drop-in extension"),
                (&u(0, "dropins[3].contents"), "outside any [Section]"),
            ],
        );
    }

    #[test]
    fn passwd_rules() {
        let cfg = |users: Value| json!({"ignition": {"version": "3.2.0"}, "passwd": {"users": users}});
        check(
            cfg(json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"], "passwordHash": "$6$x"}])),
            &[],
        );
        check(cfg(json!(null)), &[]);
        check(
            cfg(json!([{"name": "admin"}])),
            &[(
                "spec.config.passwd.users[0].name",
                "ignition passwd user section contains unsupported changes: non-core user (\"admin\"",
            )],
        );
        check(
            cfg(json!([{"name": "core", "homeDir": "/home/x", "uid": 1000, "groups": ["wheel"], "shell": null}])),
            &[
                (
                    "spec.config.passwd.users[0].homeDir",
                    "user field homeDir is not supported",
                ),
                ("spec.config.passwd.users[0].uid", "user field uid is not supported"),
                (
                    "spec.config.passwd.users[0].groups",
                    "user field groups is not supported",
                ),
            ],
        );
        check(
            cfg(json!([{"name": "core"}, {"name": "core"}])),
            &[("spec.config.passwd.users[1].name", "duplicate entry defined")],
        );
    }

    #[test]
    fn refused_sections() {
        let v = json!({"version": "3.4.0"});
        for (section, pointer_value, field) in [
            (
                "passwd.groups",
                json!({"ignition": v, "passwd": {"groups": [{"name": "g"}]}}),
                "spec.config.passwd.groups",
            ),
            (
                "storage.directories",
                json!({"ignition": v, "storage": {"directories": [{"path": "/d"}]}}),
                "spec.config.storage.directories",
            ),
            (
                "storage.links",
                json!({"ignition": v, "storage": {"links": [{"path": "/l", "target": "/t"}]}}),
                "spec.config.storage.links",
            ),
            (
                "storage.disks",
                json!({"ignition": v, "storage": {"disks": [{"device": "/dev/sdb"}]}}),
                "spec.config.storage.disks",
            ),
            (
                "storage.raid",
                json!({"ignition": v, "storage": {"raid": [{"name": "r"}]}}),
                "spec.config.storage.raid",
            ),
            (
                "storage.filesystems",
                json!({"ignition": v, "storage": {"filesystems": [{"path": "/var"}]}}),
                "spec.config.storage.filesystems",
            ),
            (
                "storage.luks",
                json!({"ignition": v, "storage": {"luks": [{"name": "root"}]}}),
                "spec.config.storage.luks",
            ),
            (
                "storage.trees",
                json!({"ignition": v, "storage": {"trees": [{"local": "x"}]}}),
                "spec.config.storage.trees",
            ),
            (
                "kernelArguments",
                json!({"ignition": v, "kernelArguments": {"shouldExist": ["a=b"]}}),
                "spec.config.kernelArguments",
            ),
        ] {
            check(pointer_value, &[(field, &format!("mco does not manage {section}"))]);
        }
        check(
            json!({"ignition": v, "storage": {"directories": [], "links": null, "disks": []}, "passwd": {"groups": []}, "kernelArguments": {"shouldExist": [], "shouldNotExist": null}}),
            &[],
        );
        check(
            json!({"ignition": {"version": "3.2.0", "config": {"replace": {"verification": {}}}}}),
            &[],
        );
        check(
            json!({"ignition": {"version": "3.2.0", "config": {"replace": {"source": "https://x/y.ign"}}}}),
            &[(
                "spec.config.ignition.config.replace.source",
                "remote Ignition configs are not supported",
            )],
        );
        check(
            json!({"ignition": {"version": "3.2.0", "config": {"merge": [{"source": null}, {"source": "data:,{}"}]}}}),
            &[(
                "spec.config.ignition.config.merge[1].source",
                "remote Ignition configs are not supported",
            )],
        );
    }

    #[test]
    fn paths_ids_and_owner_names() {
        let f = |i: usize, rest: &str| format!("spec.config.storage.files[{i}].{rest}");
        check(
            files(json!([{"path": "/", "contents": {"source": "data:,x"}}])),
            &[(&f(0, "path"), "root directory")],
        );
        check(files(json!([{"path": "/etc/a\u{0}b"}])), &[(&f(0, "path"), "NUL byte")]);
        let long = format!("/etc/{}", "n".repeat(256));
        check(
            files(json!([{"path": long}])),
            &[(&f(0, "path"), "Linux file names are at most 255 bytes")],
        );
        let deep = format!("/{}", vec!["d".repeat(254); 17].join("/"));
        check(
            files(json!([{"path": deep}])),
            &[(&f(0, "path"), "Linux paths are at most 4095 bytes")],
        );
        // Linux uid_t/gid_t: 0..=4294967294.
        check(
            files(json!([{"path": "/a", "user": {"id": 4294967294u64}, "group": {"id": 0}}])),
            &[],
        );
        check(
            files(json!([{"path": "/a", "user": {"id": -1}}])),
            &[(&f(0, "user.id"), "invalid user id -1")],
        );
        check(
            files(json!([{"path": "/a", "group": {"id": 4294967295u64}}])),
            &[(
                &f(0, "group.id"),
                "invalid group id 4294967295: Linux group ids are 0 to 4294967294",
            )],
        );
        check(
            files(json!([{"path": "/a", "user": {"name": "root"}, "group": {"name": "wheel"}}])),
            &[],
        );
        check(files(json!([{"path": "/a", "user": {"name": ""}}])), &[]);
        check(
            files(json!([{"path": "/a", "user": {"name": "bad name"}}])),
            &[(&f(0, "user.name"), "invalid user name \"bad name\"")],
        );
        check(
            files(json!([{"path": "/a", "group": {"name": "a:b"}}])),
            &[(&f(0, "group.name"), "invalid group name")],
        );
        check(
            files(json!([{"path": "/a", "user": {"id": -1, "name": "x y"}}])),
            &[
                (&f(0, "user"), "cannot set both id and name"),
                (&f(0, "user.id"), "invalid user id -1"),
                (&f(0, "user.name"), "invalid user name"),
            ],
        );
        // Source schemes: Ignition's messages, mco's refusal of remote content.
        check(
            files(json!([{"path": "/a", "contents": {"source": "foo:bar"}}])),
            &[(&f(0, "contents.source"), "invalid url scheme")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "/etc/x"}}])),
            &[(&f(0, "contents.source"), "invalid url scheme")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "s3://b/k"}}])),
            &[(&f(0, "contents.source"), "mco does not fetch remote content")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "DATA:,x"}}])),
            &[(&f(0, "contents.source"), "missing data prefix")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:;base64,aGk"}}])),
            &[(&f(0, "contents.source"), "illegal base64 data at input byte 0")],
        );
        check(
            files(
                json!([{"path": "/a", "contents": {"source": "data:,x", "httpHeaders": [{"name": "a", "value": "b"}]}}]),
            ),
            &[(
                &f(0, "contents.httpHeaders"),
                "cannot use HTTP headers with this source scheme",
            )],
        );
        check(
            files(
                json!([{"path": "/a", "overwrite": false, "contents": {"httpHeaders": [{"name": "a", "value": "b"}]}}]),
            ),
            &[(&f(0, "contents.httpHeaders"), "unable to parse url")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:,", "compression": "gzip"}}])),
            &[(&f(0, "contents.source"), "gzip contents do not decompress: EOF")],
        );
    }

    #[test]
    fn paths_of_different_sections() {
        let cfg = |files: Value, units: Value| json!({"ignition": {"version": "3.4.0"}, "storage": {"files": files}, "systemd": {"units": units}});
        let file = |path: &str| json!({"path": path, "contents": {"source": "data:,x"}});
        let f0 = "spec.config.storage.files[0].path";
        // Ignition 3.1+ (config/v3_*/types/config.go): units and dropins with contents count.
        check(
            cfg(json!([file("/etc/systemd/system/foo.service")]), json!([{"name": "foo.service", "contents": "[Unit]\n"}])),
            &[(f0, "path conflicts with systemd unit or dropin: /etc/systemd/system/foo.service is written from spec.config.systemd.units[0].name")],
        );
        check(
            cfg(
                json!([file("/etc/systemd/system/foo.service.d/10-x.conf")]),
                json!([{"name": "foo.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]),
            ),
            &[(f0, "path conflicts with systemd unit or dropin")],
        );
        // Without contents they write nothing there (Ignition's non-conflicting cases).
        check(
            cfg(
                json!([
                    file("/etc/systemd/system/foo.service"),
                    file("/etc/systemd/system/bar.service.d/x.conf")
                ]),
                json!([{"name": "foo.service", "enabled": true}, {"name": "bar.service", "dropins": [{"name": "x.conf"}]}, {"name": "baz.service", "contents": ""}]),
            ),
            &[],
        );
        // A masked unit is a symlink to /dev/null at the unit's path.
        check(
            cfg(
                json!([file("/etc/systemd/system/foo.service")]),
                json!([{"name": "foo.service", "mask": true}]),
            ),
            &[(f0, "spec.config.systemd.units[0].name is masked")],
        );
        // The core user's SSH keys file.
        let mut keys = cfg(json!([file(CORE_SSH_KEYS_PATH)]), json!([]));
        keys["passwd"] = json!({"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]});
        check(keys.clone(), &[(f0, "path conflicts with the core user's SSH keys")]);
        keys["storage"]["files"][0]["path"] = json!("/home/core/.ssh");
        check(
            keys,
            &[(
                f0,
                "path /home/core/.ssh is a file here and a directory of spec.config.passwd.users[0].sshAuthorizedKeys",
            )],
        );
        // A file cannot be the directory of another file, unit or dropin.
        check(
            cfg(json!([file("/etc/a"), file("/etc/a/b"), file("/etc/a/c")]), json!([])),
            &[(
                f0,
                "path /etc/a is a file here and a directory of spec.config.storage.files[1].path (/etc/a/b)",
            )],
        );
        check(
            cfg(
                json!([file("/etc/systemd/system/foo.service.d")]),
                json!([{"name": "foo.service", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]}]),
            ),
            &[(
                f0,
                "is a file here and a directory of spec.config.systemd.units[0].dropins[0].name",
            )],
        );
        check(cfg(json!([file("/etc/a"), file("/etc/ab/c")]), json!([])), &[]);
    }

    /// The render controller validates the merged config: a clash of two MachineConfigs that
    /// are each valid is found by `validate_config` alone.
    #[test]
    fn merged_configs_are_checked_by_validate_config() {
        let merged: Config = serde_json::from_value(json!({
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/systemd/system/foo.service", "overwrite": true, "contents": {"source": "data:,x"}}]},
            "systemd": {"units": [{"name": "foo.service", "contents": "[Unit]\n"}]}
        }))
        .unwrap();
        let errors = validate_config(&merged, "spec.config");
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!(errors[0].field, "spec.config.storage.files[0].path");
        assert!(errors[0]
            .message
            .starts_with("path conflicts with systemd unit or dropin"));
    }
}
