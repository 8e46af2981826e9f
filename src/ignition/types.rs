//! Serde shapes of an Ignition 3.x config (superset of 3.0.0 to 3.4.0).
//!
//! Every optional field is an `Option` so that the merge can tell "unset" from "set to the
//! default" (Ignition's pointer fields, `config/merge/merge.go`). `null` lists read as empty.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A whole Ignition config.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    #[serde(default, deserialize_with = "null_default")]
    pub ignition: IgnitionSection,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Storage::is_empty"
    )]
    pub storage: Storage,
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Systemd::is_empty"
    )]
    pub systemd: Systemd,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    /// Ignition 3.3+ `kernelArguments` (shouldExist/shouldNotExist): refused by mco.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_arguments: Option<Value>,
}

/// The `ignition` section: version plus the sections mco passes through untouched
/// (`config`, `timeouts`, `security`, `proxy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IgnitionSection {
    #[serde(default, deserialize_with = "null_default")]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Value>,
}

/// `storage`. Only `files` is managed; the others are kept raw to be refused with a path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directories: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystems: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub luks: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trees: Option<Value>,
}

impl Storage {
    /// True when no section is set (so `storage` is left out when serialising).
    pub fn is_empty(&self) -> bool {
        *self == Storage::default()
    }
}

/// A file entry (`storage.files[i]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct File {
    #[serde(default, deserialize_with = "null_default")]
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    /// Permission bits as an integer (JSON numbers are decimal: `420` is 0o644).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeUser>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<NodeGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<Resource>,
    /// Refused by mco (MCO: `ignition file <path> includes append`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<Value>,
}

/// Owner of a file: by numeric id or by name (not both).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NodeUser {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Group of a file: by numeric id or by name (not both).
pub type NodeGroup = NodeUser;

/// File contents: a `data:` URL, optionally gzip-compressed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `None`, `""` or `"gzip"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_headers: Option<Value>,
}

/// `contents.verification`: an optional hash of the contents.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Verification {
    /// `sha512-<hex>` or (spec 3.1.0 and later) `sha256-<hex>` of the contents Ignition writes:
    /// the decoded data URL *after* gzip decompression (Ignition
    /// `config/v3_*/types/verification.go`; `internal/resource/url.go` hashes the decompressed
    /// stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// `systemd`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Systemd {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
}

impl Systemd {
    /// True when there are no units.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

/// A systemd unit (`systemd.units[i]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Unit {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub dropins: Vec<Dropin>,
}

/// A unit dropin (`systemd.units[i].dropins[j]`), written to `/etc/systemd/system/<unit>.d/<name>`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Dropin {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
}

/// `passwd`. Only the `core` user with `sshAuthorizedKeys` (and `passwordHash`) is managed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Passwd {
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<User>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Value>,
}

impl Passwd {
    /// True when no user and no group is set.
    pub fn is_empty(&self) -> bool {
        *self == Passwd::default()
    }
}

/// A `passwd.users[i]` entry. Fields mco does not manage are kept in `other` to be refused.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct User {
    #[serde(default, deserialize_with = "null_default")]
    pub name: String,
    #[serde(default, deserialize_with = "null_default", skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    /// Any other user field (`uid`, `homeDir`, `groups`, ...): refused.
    #[serde(flatten)]
    pub other: serde_json::Map<String, Value>,
}

/// The Ignition version every rendered config carries (DESIGN.md section 5, seed 001).
pub const RENDERED_VERSION: &str = "3.4.0";
