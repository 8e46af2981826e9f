//! The one write path: validate, turn a change into an event, append, fold, publish.
//!
//! Owns [`Hub`], which holds the store, the projection and the fan-out to watchers and
//! controllers. API handlers and controllers call [`Hub::create`], [`Hub::update`] and
//! [`Hub::delete`]; nothing else appends to the log. Every append carries the object's expected
//! resourceVersion (optimistic concurrency; a mismatch is [`CommandError::Conflict`], HTTP 409).
//! A write is acknowledged only after the store flushed it (group commit).

mod classify;
mod fanout;
mod hub;
mod object;
mod snapshotter;
mod vocab;

pub use crate::admission::{object_key, object_name};
pub use fanout::{ObjectSubscription, Published, PublishedEvent, WatchObject, PINNED_BUFFER};
pub use hub::Hub;
pub use vocab::{
    Actor, CommandError, Mutation, Preconditions, Propagation, Scope, StoreFault, Update, MAX_OBJECT_BYTES,
};

use crate::model::Kind;
use serde_json::Value;

/// [`crate::admission::check_shape`], its refusal as a [`CommandError`].
pub fn check_shape(kind: Kind, object: &Value) -> Result<(), CommandError> {
    Ok(crate::admission::check_shape(kind, object)?)
}

/// [`crate::admission::normalize`], its refusal as a [`CommandError`].
pub fn normalize(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    Ok(crate::admission::normalize(kind, object, group)?)
}

/// [`crate::admission::normalize_with`], its refusal as a [`CommandError`].
pub fn normalize_with(
    kind: Kind,
    object: Value,
    group: &str,
    limits: crate::limits::ContentLimits,
) -> Result<Value, CommandError> {
    Ok(crate::admission::normalize_with(kind, object, group, limits)?)
}

/// [`crate::admission::decode`], its refusal as a [`CommandError`].
pub fn decode(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    Ok(crate::admission::decode(kind, object, group)?)
}
