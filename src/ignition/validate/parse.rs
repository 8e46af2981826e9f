//! Decoding a raw `spec.config`: the spec version check (with MCO's message listing the accepted
//! versions) and the decode into [`Config`] with each error's field path.

use super::validate_config_with;
use crate::ignition::{Config, File, Unit, User};
use crate::validation::FieldError;
use serde_json::Value;

/// Ignition spec versions mco accepts and names in its error messages (DESIGN.md section 5).
///
/// 3.5.0 is accepted too ([`ACCEPTED_EXTRA_VERSIONS`]) because it adds nothing mco manages;
/// rendered configs are 3.4.0 ([`super::RENDERED_VERSION`]).
pub const SUPPORTED_VERSIONS: &[&str] = &["3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0"];

/// Versions accepted on input beyond [`SUPPORTED_VERSIONS`] (real cluster dumps of current
/// OpenShift carry 3.5.0, MCO's internal version `InternalMCOIgnitionVersion`).
pub const ACCEPTED_EXTRA_VERSIONS: &[&str] = &["3.5.0"];

/// The accepted versions as MCO's messages list them: minor versions joined by `,`
/// (`IgnitionConverterSingleton().GetSupportedMinorVersions()`, mco-facts 1.6), e.g.
/// `2.2,3.0,3.1,3.2,3.3,3.4,3.5` (mco-facts 1.6).
pub(super) fn supported_list() -> String {
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
pub(super) struct SemVer<'a> {
    major: i64,
    minor: i64,
    patch: i64,
    pre_release: &'a str,
    metadata: &'a str,
}

impl<'a> SemVer<'a> {
    pub(super) fn parse(s: &'a str) -> Option<SemVer<'a>> {
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
    pub(super) fn accepted_minor(&self) -> Option<i64> {
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
    if crate::ignition::spec2::is_spec2(raw) {
        // MCO translates spec 2 with ign-converter; errors keep the user's (spec 2) paths.
        let t = crate::ignition::spec2::translate(raw, prefix)?;
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

pub(super) fn json_type(v: &Value) -> &'static str {
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
pub(super) fn check_version(raw: &Value, prefix: &str) -> Result<(), FieldError> {
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

pub(super) fn path_error(prefix: &str, e: serde_path_to_error::Error<serde_json::Error>) -> FieldError {
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
pub(super) type EntryCheck = fn(&Value) -> Result<(), serde_path_to_error::Error<serde_json::Error>>;

/// Deserializes the whole config; on a type error, deserializes each file, unit and user on its
/// own so that every bad entry is reported, not only the first.
pub(super) fn deserialize_config(raw: &Value, prefix: &str) -> Result<Config, Vec<FieldError>> {
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
