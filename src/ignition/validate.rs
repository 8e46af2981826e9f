//! Parsing and validation of one Ignition 3.x config as a MachineConfig carries it.
//!
//! Owns the rules that decide whether a raw `spec.config` is acceptable: the spec version, the
//! Ignition validation rules MCO runs (`ValidateIgnition` in `pkg/controller/common/helpers.go`,
//! vendored `ignition/v2/config/v3_5/types`), MCO's own file-mode rule, and the day-2
//! reconcilability rules of `pkg/controller/common/reconcile.go` applied to a single config
//! (a section mco cannot reconcile is refused up front, not at render time). Also owns the
//! decoding of file contents (`data:` URLs, gzip).
//!
//! Pure: no IO, no clock. It must not merge configs (the render module does) nor fetch anything:
//! mco only understands `data:` URLs.

use super::types::{Config, File, Resource, Unit, User};
use crate::validation::FieldError;
use serde_json::Value;
use sha2::Digest;
use std::collections::HashSet;
use std::io::Read;

/// Ignition spec versions mco accepts and names in its error messages (DESIGN.md section 5).
///
/// 3.5.0 is accepted too ([`ACCEPTED_EXTRA_VERSIONS`]) because it adds nothing mco manages;
/// rendered configs are 3.4.0 ([`super::RENDERED_VERSION`]).
pub const SUPPORTED_VERSIONS: &[&str] = &["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0"];

/// Versions accepted on input beyond [`SUPPORTED_VERSIONS`] (real cluster dumps of current
/// OpenShift carry 3.5.0, MCO's internal version `InternalMCOIgnitionVersion`).
pub const ACCEPTED_EXTRA_VERSIONS: &[&str] = &["3.5.0"];

/// The suffixes a systemd unit name may end in (Ignition `validateUnitName`,
/// `config/shared/validations/unit.go`).
pub const UNIT_SUFFIXES: &[&str] = &[
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// The file the MCD reads as "force an update"; MCO refuses to create it through Ignition
/// (`pkg/controller/common/reconcile.go`, `constants.MachineConfigDaemonForceFile`).
pub const DAEMON_FORCE_FILE: &str = "/run/machine-config-daemon-force";

/// Every accepted version, as error messages list them (MCO's message lists every version it
/// parses, mco-facts 1.6).
fn supported_list() -> String {
    SUPPORTED_VERSIONS
        .iter()
        .chain(ACCEPTED_EXTRA_VERSIONS)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses and validates a raw Ignition config.
///
/// `raw` is the config as the user wrote it (`spec.config` of a MachineConfig); `prefix` is its
/// field path, e.g. `spec.config`, and starts every returned [`FieldError::field`]
/// (`spec.config.storage.files[2].mode`).
///
/// - `{}` (and `null`) is valid and yields [`Config::default()`]: MCO accepts an empty config so
///   that kernelArguments-only MachineConfigs work (`IgnParseWrapper`).
/// - Any other config must declare `ignition.version` in [`SUPPORTED_VERSIONS`] (or 3.5.0). A
///   missing or empty version, an unparseable one or an unsupported one is refused at
///   `<prefix>.ignition.version` with MCO's wording (`parsing Ignition config failed: invalid
///   version. Supported spec versions: ...`); spec 2.x is refused as not supported yet. A bad
///   version is the only error returned: the rest of the config cannot be read without it.
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

/// Checks `ignition.version` of a non-empty raw config.
fn check_version(raw: &Value, prefix: &str) -> Result<(), FieldError> {
    let field = format!("{prefix}.ignition.version");
    let version = match raw.pointer("/ignition/version") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(FieldError::new(
                field,
                format!(
                    "parsing Ignition config failed: version must be a string such as \"3.4.0\", got {}. Supported spec versions: {}",
                    json_type(other),
                    supported_list()
                ),
            ))
        }
    };
    if version.is_empty() {
        return Err(FieldError::new(
            field,
            format!(
                "parsing Ignition config failed: unknown version. Supported spec versions: {}",
                supported_list()
            ),
        ));
    }
    if SUPPORTED_VERSIONS.contains(&version) || ACCEPTED_EXTRA_VERSIONS.contains(&version) {
        return Ok(());
    }
    let major = version.split('.').next().unwrap_or("");
    let well_formed = version.split('.').count() == 3
        && version
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if well_formed && major == "2" {
        return Err(FieldError::new(
            field,
            format!(
                "parsing Ignition config failed: Ignition spec {major}.x (version {version}) is not supported yet; translate it to spec 3 (for example with ignition-config-translator or butane). Supported spec versions: {}",
                supported_list()
            ),
        ));
    }
    Err(FieldError::new(
        field,
        format!(
            "parsing Ignition config failed: invalid version. Supported spec versions: {}",
            supported_list()
        ),
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
/// with a field path under `prefix`. [`parse_config`] calls it; it is public so that a config
/// built in code (a rendered config) can be checked the same way.
///
/// Rules (MCO `ValidateIgnition` + Ignition's `Validate` + `isConfigReconcilable`):
/// - files: path required, absolute and clean (`path not specified`, `path not absolute`, `path is
///   not fully simplified`); no two files with one path (`duplicate entry defined`); mode within
///   0..=0o777 (`invalid mode 0o1204 for /etc/foo, cannot exceed 0o777`); `overwrite: true` needs
///   a source; user/group not both id and name; compression `""` or `gzip`; source a decodable
///   `data:` URL whose gzip (if any) decompresses; verification hash well formed and matching;
///   no `append`; not [`DAEMON_FORCE_FILE`].
/// - units: name ends in one of [`UNIT_SUFFIXES`], unique; dropins end in `.conf`, unique within
///   their unit; unit and dropin contents parse as systemd unit files ([`parse_unit_file`]).
/// - passwd.users: only `core`, only `sshAuthorizedKeys` and `passwordHash`, unique.
/// - refused sections (non-empty): passwd.groups, storage.directories/links/disks/raid/
///   filesystems/luks/trees, Ignition `kernelArguments`, and `ignition.config.merge/replace`
///   with a source.
pub fn validate_config(config: &Config, prefix: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    validate_ignition_section(config, prefix, &mut errors);
    let mut paths = HashSet::new();
    for (i, file) in config.storage.files.iter().enumerate() {
        let at = format!("{prefix}.storage.files[{i}]");
        validate_file(file, &at, &mut errors);
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

fn validate_file(file: &File, at: &str, errors: &mut Vec<FieldError>) {
    let path_field = format!("{at}.path");
    if let Err(msg) = check_path(&file.path) {
        errors.push(FieldError::new(&path_field, msg));
    }
    if file.path == DAEMON_FORCE_FILE {
        errors.push(FieldError::new(
            &path_field,
            format!("cannot create {DAEMON_FORCE_FILE} via Ignition"),
        ));
    }
    if let Some(mode) = file.mode {
        if mode < 0 {
            errors.push(FieldError::new(format!("{at}.mode"), "illegal file mode"));
        } else if mode > 0o777 {
            errors.push(FieldError::new(
                format!("{at}.mode"),
                format!("invalid mode {mode:#o} for {}, cannot exceed 0o777", file.path),
            ));
        }
    }
    if file.append.as_ref().is_some_and(is_non_empty) {
        errors.push(FieldError::new(
            format!("{at}.append"),
            format!("ignition file {} includes append", file.path),
        ));
    }
    for (name, owner) in [("user", &file.user), ("group", &file.group)] {
        if owner
            .as_ref()
            .is_some_and(|o| o.id.is_some() && o.name.as_deref().is_some_and(|n| !n.is_empty()))
        {
            errors.push(FieldError::new(format!("{at}.{name}"), "cannot set both id and name"));
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
        validate_resource(contents, &format!("{at}.contents"), errors);
    }
}

/// Ignition's path rules: required, absolute, and equal to its `path.Clean` form.
fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("path not specified");
    }
    if !path.starts_with('/') {
        return Err("path not absolute");
    }
    if path != "/" && (path.ends_with('/') || path.split('/').skip(1).any(|c| c.is_empty() || c == "." || c == "..")) {
        return Err("path is not fully simplified");
    }
    Ok(())
}

fn validate_resource(res: &Resource, at: &str, errors: &mut Vec<FieldError>) {
    let compression = res.compression.as_deref().unwrap_or("");
    let compression_ok = matches!(compression, "" | "gzip");
    if !compression_ok {
        errors.push(FieldError::new(
            format!("{at}.compression"),
            format!("invalid compression method {compression:?}: must be \"\" or \"gzip\""),
        ));
    }
    if res.http_headers.as_ref().is_some_and(is_non_empty) {
        errors.push(FieldError::new(
            format!("{at}.httpHeaders"),
            "httpHeaders are only allowed with http(s) sources, which mco does not fetch",
        ));
    }
    let hash = res.verification.as_ref().and_then(|v| v.hash.as_deref());
    let Some(source) = res.source.as_deref() else {
        if hash.is_some() {
            errors.push(FieldError::new(
                format!("{at}.verification.hash"),
                "verification requires a source",
            ));
        }
        return;
    };
    let fetched = match check_scheme(source).and_then(|()| decode_data_url(source)) {
        Ok(bytes) => bytes,
        Err(msg) => {
            errors.push(FieldError::new(format!("{at}.source"), msg));
            return;
        }
    };
    if let Some(hash) = hash {
        if let Err(msg) = verify_hash(hash, &fetched) {
            errors.push(FieldError::new(format!("{at}.verification.hash"), msg));
        }
    }
    if compression == "gzip" {
        if let Err(msg) = gunzip(&fetched) {
            errors.push(FieldError::new(format!("{at}.source"), msg));
        }
    }
}

fn check_scheme(source: &str) -> Result<(), String> {
    let scheme = source.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("data") => Ok(()),
        Some(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) => Err(
            format!("unsupported source scheme {s:?}: only data URLs are supported, mco does not fetch remote content"),
        ),
        _ => Err("source is not a URL: only data URLs (data:[<mediatype>][;base64],<data>) are supported".to_string()),
    }
}

/// Checks a `sha512-<hex>` / `sha256-<hex>` hash against the fetched (not decompressed) bytes,
/// as Ignition does (`config/v3_*/types/verification.go`).
fn verify_hash(hash: &str, fetched: &[u8]) -> Result<(), String> {
    let (function, expected) = hash
        .split_once('-')
        .ok_or_else(|| format!("invalid hash {hash:?}: expected sha512-<hex> or sha256-<hex>"))?;
    let actual = match function {
        "sha512" => hex::encode(sha2::Sha512::digest(fetched)),
        "sha256" => hex::encode(sha2::Sha256::digest(fetched)),
        _ => {
            return Err(format!(
                "unsupported hash function {function:?}: expected sha512 or sha256"
            ))
        }
    };
    if expected.len() != actual.len() || !expected.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "invalid hash {hash:?}: expected {} hex digits after \"{function}-\"",
            actual.len()
        ));
    }
    if !expected.eq_ignore_ascii_case(&actual) {
        return Err(format!("hash mismatch: the contents have {function}-{actual}"));
    }
    Ok(())
}

fn validate_unit(unit: &Unit, at: &str, errors: &mut Vec<FieldError>) {
    if unit.name.is_empty() {
        errors.push(FieldError::new(format!("{at}.name"), "unit name not specified"));
    } else if !UNIT_SUFFIXES
        .iter()
        .any(|s| unit.name.ends_with(s) && unit.name.len() > s.len())
    {
        errors.push(FieldError::new(
            format!("{at}.name"),
            format!(
                "invalid systemd unit extension for {}: must end in one of {}",
                unit.name,
                UNIT_SUFFIXES.join(" ")
            ),
        ));
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
        if dropin.name.is_empty() {
            errors.push(FieldError::new(format!("{dat}.name"), "dropin name not specified"));
        } else if !dropin.name.ends_with(".conf") || dropin.name.contains('/') {
            errors.push(FieldError::new(
                format!("{dat}.name"),
                format!(
                    "invalid systemd unit dropin extension for {}: must end in .conf",
                    dropin.name
                ),
            ));
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
        errors.push(FieldError::new(
            format!("{at}.name"),
            format!("unexpected user with name: {}. Only core user is supported", user.name),
        ));
    }
    for (key, value) in &user.other {
        if is_non_empty(value) && !matches!(value, Value::Bool(false)) {
            errors.push(FieldError::new(
                format!("{at}.{key}"),
                format!("user field {key} is not supported: mco only manages sshAuthorizedKeys and passwordHash of user core (MCO: SSH keys and password hash are the only reconcilable user fields)"),
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

/// Decodes a `data:` URL (RFC 2397 as the fetch standard reads it, via the `data-url` crate).
///
/// - `data:;base64,<b64>`: base64; ASCII whitespace is ignored, missing padding is tolerated
///   (forgiving-base64), wrong padding or a non-base64 character is an error.
/// - `data:,<text>`: percent-decoded; `+` is kept as `+` (not a space); a `%` not followed by two
///   hex digits is an error (the fetch standard would keep it literally; Ignition's Go decoder
///   refuses it). A `#` is kept as content, as MCO's daemon decodes the whole string
///   (`DecodeIgnitionFileContents`).
/// - `data:,` is the empty file.
///
/// Errors are human messages (`invalid data URL: ...`); the caller adds the field path.
pub fn decode_data_url(source: &str) -> Result<Vec<u8>, String> {
    let url = data_url::DataUrl::process(source).map_err(|e| format!("invalid data URL: {e}"))?;
    let (head, body) = source.split_once(',').unwrap_or((source, ""));
    if head.trim_end().to_ascii_lowercase().ends_with(";base64") {
        return match url.decode_to_vec() {
            Ok((bytes, None)) => Ok(bytes),
            Ok((_, Some(_))) => Err("invalid data URL: '#' in base64 content".to_string()),
            Err(_) => Err("invalid data URL: invalid base64 content (bad character or padding)".to_string()),
        };
    }
    check_percent_escapes(body)?;
    // The fetch standard stops at '#' (a fragment); MCO's decoder keeps it as content.
    let mut out = Vec::new();
    let mut rest = body.to_string();
    loop {
        let url = format!("data:,{rest}");
        let part = data_url::DataUrl::process(&url).map_err(|e| format!("invalid data URL: {e}"))?;
        let (bytes, fragment) = part.decode_to_vec().map_err(|_| "invalid data URL".to_string())?;
        out.extend_from_slice(&bytes);
        match fragment {
            Some(f) => {
                out.push(b'#');
                rest = f.to_percent_encoded();
            }
            None => return Ok(out),
        }
    }
}

fn check_percent_escapes(body: &str) -> Result<(), String> {
    let b = body.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'%' && !(i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
            let shown: String = body[i..].chars().take(3).collect();
            return Err(format!(
                "invalid data URL: bad percent escape {shown:?} at byte {i} of the data"
            ));
        }
    }
    Ok(())
}

fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
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
    use serde_json::json;
    use std::io::Write;

    /// `expected`: `Ok(bytes)` or `Err(substring of the message)`.
    fn check_url(input: &str, expected: Result<&[u8], &str>) {
        let got = decode_data_url(input);
        match (got, expected) {
            (Ok(bytes), Ok(want)) => assert_eq!(bytes, want, "{input}"),
            (Err(msg), Err(want)) => assert!(msg.contains(want), "{input}: {msg:?} does not contain {want:?}"),
            (got, want) => panic!("{input}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn data_urls() {
        check_url("data:,", Ok(b""));
        check_url("data:,hello%20world%0A", Ok(b"hello world\n"));
        check_url("data:text/plain;charset=utf-8,a+b", Ok(b"a+b"));
        check_url("data:,%23!/bin/sh", Ok(b"#!/bin/sh"));
        check_url("data:,a#b#c", Ok(b"a#b#c"));
        check_url("data:;base64,aGVsbG8K", Ok(b"hello\n"));
        check_url("data:text/plain;charset=utf-8;base64,YQ==", Ok(b"a"));
        check_url("data:;base64,YQ", Ok(b"a"));
        check_url("data:,bad%zzescape", Err("bad percent escape \"%zz\""));
        check_url("data:,trailing%2", Err("bad percent escape"));
        check_url("data:;base64,YQ=", Err("invalid base64"));
        check_url("data:;base64,Y===", Err("invalid base64"));
        check_url("data:;base64,!!!!", Err("invalid base64"));
        check_url("data:text/plain", Err("missing comma"));
        check_url("https://example.com/x", Err("not a valid data url"));
    }

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

    const SUPPORTED: &str = "Supported spec versions: 3.0.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0";

    #[test]
    fn versions() {
        check(json!({}), &[]);
        check(Value::Null, &[]);
        for v in ["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"] {
            check(json!({"ignition": {"version": v}}), &[]);
        }
        let field = "spec.config.ignition.version";
        check(
            json!({"ignition": {"version": "2.2.0"}}),
            &[(field, "spec 2.x (version 2.2.0) is not supported yet")],
        );
        check(json!({"ignition": {"version": "2.2.0"}}), &[(field, SUPPORTED)]);
        let invalid = format!("parsing Ignition config failed: invalid version. {SUPPORTED}");
        check(json!({"ignition": {"version": "3.9.0"}}), &[(field, &invalid)]);
        check(json!({"ignition": {"version": "badversion"}}), &[(field, &invalid)]);
        check(json!({"ignition": {"version": "4.0.0"}}), &[(field, &invalid)]);
        check(
            json!({"ignition": {"version": "3.5.0-experimental"}}),
            &[(field, &invalid)],
        );
        let unknown = format!("parsing Ignition config failed: unknown version. {SUPPORTED}");
        check(json!({"ignition": {"version": ""}}), &[(field, &unknown)]);
        check(json!({"storage": {"files": []}}), &[(field, &unknown)]);
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
                "invalid mode 0o1204 for /etc/foo, cannot exceed 0o777",
            )],
        );
        check(
            files(json!([{"path": "/etc/foo", "mode": -1}])),
            &[("spec.config.storage.files[0].mode", "illegal file mode")],
        );
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
            &[(&f(0, "contents.source"), "bad percent escape")],
        );
        check(
            files(json!([{"path": "/a", "contents": {"source": "data:;base64,YQ="}}])),
            &[(&f(0, "contents.source"), "invalid base64")],
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
                (&f(0, "mode"), "cannot exceed 0o777"),
                (&f(1, "overwrite"), "overwrite must be false"),
            ],
        );
    }

    #[test]
    fn verification() {
        let f = "spec.config.storage.files[0].contents.verification.hash";
        let sha512_a = hex::encode(sha2::Sha512::digest(b"a"));
        let sha256_a = hex::encode(sha2::Sha256::digest(b"a"));
        let with_hash = |source: Option<&str>, hash: String| {
            let mut contents = json!({"verification": {"hash": hash}});
            if let Some(s) = source {
                contents["source"] = json!(s);
            }
            files(json!([{"path": "/a", "contents": contents}]))
        };
        check(with_hash(Some("data:,a"), format!("sha512-{sha512_a}")), &[]);
        check(with_hash(Some("data:;base64,YQ=="), format!("sha256-{sha256_a}")), &[]);
        check(
            with_hash(Some("data:,b"), format!("sha512-{sha512_a}")),
            &[(f, "hash mismatch")],
        );
        check(
            with_hash(Some("data:,a"), "md5-abc".to_string()),
            &[(f, "unsupported hash function \"md5\"")],
        );
        check(
            with_hash(Some("data:,a"), "sha512-xyz".to_string()),
            &[(f, "invalid hash")],
        );
        check(with_hash(Some("data:,a"), "nodash".to_string()), &[(f, "invalid hash")]);
        check(
            with_hash(None, format!("sha512-{sha512_a}")),
            &[(f, "verification requires a source")],
        );
        // The hash is over the fetched bytes, before decompression.
        let zipped = gzip(b"x");
        let source = format!("data:;base64,{}", b64(&zipped));
        let mut config = with_hash(
            Some(&source),
            format!("sha256-{}", hex::encode(sha2::Sha256::digest(&zipped))),
        );
        config["storage"]["files"][0]["contents"]["compression"] = json!("gzip");
        check(config, &[]);
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
                (&u(0, "dropins[2].name"), "must end in .conf"),
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
                "unexpected user with name: admin. Only core user is supported",
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
}
