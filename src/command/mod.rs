//! The one write path: validate, turn a change into an event, append, fold, publish.
//!
//! Owns [`Hub`], which holds the store, the projection and the fan-out to watchers and
//! controllers. API handlers and controllers call [`Hub::create`], [`Hub::update`] and
//! [`Hub::delete`]; nothing else appends to the log. Every append carries the object's expected
//! resourceVersion (optimistic concurrency; a mismatch is [`CommandError::Conflict`], HTTP 409).
//! A write is acknowledged only after the store flushed it (group commit).

mod hub;

pub use hub::*;
