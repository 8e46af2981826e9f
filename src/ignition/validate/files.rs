//! The rules of storage entries: files, directories and links (paths, modes, owners), their
//! resources (`data:` URLs, compression, hashes, size budgets), and a file's contents as bytes.

use super::is_non_empty;
use crate::ignition::decode_data_url;
use crate::ignition::{check_id, check_node_path, check_owner_name, File, NodeUser, Resource};
use crate::validation::FieldError;
use serde_json::Value;
use sha2::Digest;

/// The file the MCD reads as "force an update"; MCO refuses to create it through Ignition
/// (`pkg/controller/common/reconcile.go`, `constants.MachineConfigDaemonForceFile`).
pub const DAEMON_FORCE_FILE: &str = "/run/machine-config-daemon-force";

pub(super) fn has_source(resource: &Value) -> bool {
    matches!(resource.get("source"), Some(Value::String(s)) if !s.is_empty())
}

/// The decoded size of a file's contents, as [`validate_file`] found it.
pub(super) enum Size {
    /// This many bytes.
    Known(u64),
    /// Not known (no contents, or they were refused for another reason).
    Unknown,
    /// More than the budget left for the config's files.
    OverBudget,
}

pub(super) fn validate_file(
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
pub(super) fn validate_owner(owner: &NodeUser, what: &str, at: &str, errors: &mut Vec<FieldError>) {
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
pub(super) fn validate_resource(
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
pub(super) fn check_scheme(source: &str) -> Result<(), String> {
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
pub(super) fn parse_hash(hash: &str, sha256_ok: bool) -> Result<(&str, &str), String> {
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
pub(super) fn verify_hash(function: &str, expected: &str, contents: &[u8], decompressed: bool) -> Result<(), String> {
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

/// Decompresses gzip as Go's `compress/gzip` reader does for Ignition and MCO (every member of
/// a multi-member stream, checksums verified, an empty input refused), at most `cap` bytes
/// ([`crate::limits::gunzip_capped`]).
pub(super) fn gunzip(bytes: &[u8], cap: u64) -> Result<Vec<u8>, String> {
    crate::limits::gunzip_capped(bytes, cap).map_err(|e| e.to_string())
}

/// The refusal of contents over [`crate::limits::Limits::max_file_bytes`], in
/// Kubernetes' `field.TooLong` wording.
pub(super) fn too_long(cap: u64, how: &str) -> String {
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
