//! The vocabulary of a write: who writes ([`Actor`]), what part of an object ([`Scope`]), the
//! writes themselves ([`Mutation`], [`Update`], [`Propagation`]) and how one fails
//! ([`CommandError`], one variant per Kubernetes `Status` reason).

use crate::model::Kind;
use crate::store::StoreError;
use crate::validation::Invalid;
use serde_json::Value;

/// Who is writing and why, recorded in every event (DESIGN.md section 3b), and whether the
/// write is only a dry run.
#[derive(Clone, Debug, Default)]
pub struct Actor {
    /// The authenticated user (`admin`, `system:node:worker-1`) or a controller
    /// (`controller:render`).
    pub name: String,
    /// Free-text reason given by the client (may be empty).
    pub reason: String,
    /// Kubernetes' `dryRun=All`: the write is validated and admitted (expected versions, size,
    /// dependents) and answered with the object as it would be, but nothing is appended.
    pub dry_run: bool,
}

impl Actor {
    pub fn new(name: impl Into<String>) -> Actor {
        Actor {
            name: name.into(),
            ..Default::default()
        }
    }
}

/// Which part of an object an update may change (Kubernetes' main resource vs `/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// metadata and spec; status is kept as stored.
    Main,
    /// status only; metadata and spec are kept as stored.
    Status,
}

/// Typed failures of a command, mapped one to one onto Kubernetes `Status` reasons.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{kind} {name:?} not found")]
    NotFound { kind: Kind, name: String },
    #[error("{kind} {name:?} already exists")]
    AlreadyExists { kind: Kind, name: String },
    #[error("Operation cannot be fulfilled on {kind} {name:?}: {message}")]
    Conflict { kind: Kind, name: String, message: String },
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    BadRequest(String),
    /// The object's stored JSON would exceed [`MAX_OBJECT_BYTES`].
    #[error("{kind} {name:?} is {size} bytes, the limit for a stored object is {MAX_OBJECT_BYTES} bytes")]
    TooLarge { kind: Kind, name: String, size: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Refused by an admission rule about the caller (NodeRestriction, [`crate::auth`]):
    /// `message` follows `<resource> "<name>" is forbidden: ` (HTTP 403).
    #[error("{kind} {name:?} is forbidden: {message}")]
    Forbidden { kind: Kind, name: String, message: String },
    /// The event log's filesystem has less free space than the reserve ([`super::Hub::set_space_reserve`]):
    /// the write is refused before it reaches the store, so the store never meets a full disk.
    #[error("the event log's filesystem ({path}) has {available} bytes free, under the reserve of {reserve} bytes: writes are refused until space is freed")]
    InsufficientStorage { path: String, available: u64, reserve: u64 },
}

/// Largest stored object, in bytes of JSON: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which Kubernetes objects live under and MCO sizes its
/// rendered configs by (`MaxMachineConfigSize`, `pkg/controller/common/constants.go`).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// One write of a [`super::Hub::batch`].
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Create `object` (it must not exist).
    Create { kind: Kind, object: Value },
    /// Replace the main resource (metadata and spec) of `name` with `object`, based on its
    /// newest version; status is kept.
    Replace { kind: Kind, name: String, object: Value },
    /// Delete `name` (its dependents are not handled: use [`super::Hub::delete`] for that).
    Delete { kind: Kind, name: String },
}

/// One write of a [`super::Hub::update_many`]: `f(current) -> new` of one object within `scope`, as
/// [`super::Hub::update`] takes it.
pub struct Update<'a> {
    pub kind: Kind,
    pub name: String,
    pub scope: Scope,
    /// The resourceVersion the caller based its change on (a mismatch fails this update with
    /// Conflict); `None`: based on the newest version.
    pub precondition: Option<u64>,
    /// The change: the object as it should be, from the object as it is.
    #[allow(clippy::type_complexity)]
    pub f: Box<dyn Fn(&Value) -> Result<Value, CommandError> + Send + Sync + 'a>,
}

impl Update<'_> {
    /// The status write of a controller sweep: `object` (a typed object, serialized here) as the
    /// new status of `kind` `name`, based on the resourceVersion it carries.
    pub fn status_of<T: serde::Serialize>(
        kind: Kind,
        name: String,
        object: &T,
        resource_version: Option<&str>,
    ) -> Self {
        let obj = serde_json::to_value(object).expect("serializes");
        Update {
            kind,
            name,
            scope: Scope::Status,
            precondition: resource_version.and_then(|s| s.parse().ok()),
            f: Box::new(move |_| Ok(obj.clone())),
        }
    }
}

/// A delete's preconditions (Kubernetes' `metav1.Preconditions`, from DeleteOptions): the
/// object is deleted only while its `metadata.uid` and `metadata.resourceVersion` are these
/// (each compared as a string, as kube-apiserver compares them). Judged in the Hub against
/// the log's head, so an object deleted and created again under the same name, whose new
/// version is appended but not yet readable, is not deleted under the old uid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The uid the object must have.
    pub uid: Option<String>,
    /// The resourceVersion the object must have.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// Only a resourceVersion, or none: what a controller that read the object passes.
    pub fn resource_version(rv: Option<u64>) -> Self {
        Preconditions {
            uid: None,
            resource_version: rv.map(|rv| rv.to_string()),
        }
    }

    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.uid.is_none() && self.resource_version.is_none()
    }

    /// The first precondition an object with `uid` at `resource_version` fails, worded as
    /// kube-apiserver's `Preconditions.Check` words it
    /// (`staging/src/k8s.io/apiserver/pkg/storage/interfaces.go`; the apiserver answers it as
    /// a 409 Conflict), or `None` when it passes.
    pub fn failure(&self, uid: &str, resource_version: &str) -> Option<String> {
        [
            ("UID", uid, &self.uid),
            ("ResourceVersion", resource_version, &self.resource_version),
        ]
        .into_iter()
        .find_map(|(field, have, want)| {
            let want = want.as_deref()?;
            (want != have).then(|| {
                format!("Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}")
            })
        })
    }
}

/// What happens to an object's dependents when it is deleted (Kubernetes DeleteOptions
/// `propagationPolicy`; the default for mco's kinds is Background, as for custom resources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the dependents too (after the owner).
    #[default]
    Background,
    /// Delete the dependents too, before the owner.
    Foreground,
    /// Keep the dependents and remove their reference to the owner.
    Orphan,
}

impl Propagation {
    /// Parses a `propagationPolicy` value; `None` for anything else.
    pub fn parse(s: &str) -> Option<Propagation> {
        match s {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

impl std::fmt::Display for Propagation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        })
    }
}

impl From<crate::admission::AdmissionError> for CommandError {
    fn from(e: crate::admission::AdmissionError) -> CommandError {
        match e {
            crate::admission::AdmissionError::Invalid(i) => CommandError::Invalid(i),
            crate::admission::AdmissionError::BadRequest(m) => CommandError::BadRequest(m),
        }
    }
}

/// Why the event log cannot store writes, while no write has succeeded since
/// ([`super::Hub::store_fault`], `/readyz`). Typed, so readiness never depends on an error's
/// wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreFault {
    /// The filesystem is under the disk reserve: writes are refused before they reach the
    /// store, and readiness comes back as soon as space is freed, before any write.
    Reserve(String),
    /// An append or a flush failed (an I/O error, a full disk the store met).
    Store(String),
}

impl std::fmt::Display for StoreFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreFault::Reserve(why) | StoreFault::Store(why) => f.write_str(why),
        }
    }
}
