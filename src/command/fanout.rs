//! What watchers receive: a published event shared by every receiver, its watch object built
//! at most once ([`PublishedEvent`]), and the per-object subscriptions of pinned watches
//! ([`ObjectSubscription`]).

use crate::event::Event;
use serde_json::{json, Value};
use std::sync::Arc;

/// A published event, for watchers: shared by every receiver, so the work of turning it into
/// a watch object (decoding its body, serializing the object) is done once however many
/// watchers see it.
pub type Published = Arc<PublishedEvent>;

/// One durable event as watchers receive it ([`super::Hub::subscribe`]), with its watch object built
/// at most once.
#[derive(Debug)]
pub struct PublishedEvent {
    event: Arc<Event>,
    watch: std::sync::OnceLock<Option<WatchObject>>,
}

/// The object a watch event carries: the event's body with `metadata.resourceVersion` set to
/// the event's seq, and its JSON text serialized on first use.
#[derive(Debug)]
pub struct WatchObject {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub watch_type: &'static str,
    pub object: Value,
    json: std::sync::OnceLock<String>,
}

impl WatchObject {
    /// The object as JSON text (serialized once, then shared).
    pub fn json(&self) -> &str {
        self.json.get_or_init(|| self.object.to_string())
    }
}

impl PublishedEvent {
    pub fn new(event: Arc<Event>) -> PublishedEvent {
        PublishedEvent {
            event,
            watch: std::sync::OnceLock::new(),
        }
    }

    /// The event as logged.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The watch object of this event, decoded on first use; `None` for notes, token events
    /// and bodies that do not decode.
    pub fn watch_object(&self) -> Option<&WatchObject> {
        self.watch
            .get_or_init(|| {
                let ev = &self.event;
                let watch_type = ev.event_type().filter(|t| !t.is_note() && !t.is_token())?.watch_type();
                ev.kind()?;
                let mut object = ev.object().ok()?;
                object["metadata"]["resourceVersion"] = json!(ev.seq.to_string());
                Some(WatchObject {
                    watch_type,
                    object,
                    json: std::sync::OnceLock::new(),
                })
            })
            .as_ref()
    }
}

impl std::ops::Deref for PublishedEvent {
    type Target = Event;
    fn deref(&self) -> &Event {
        &self.event
    }
}

/// One pinned receiver's sending half, with the id [`super::Hub::unsubscribe_object`] removes it by.
pub(super) struct PinnedSender {
    pub(super) id: u64,
    pub(super) tx: tokio::sync::mpsc::Sender<Published>,
}

/// Events an object subscriber may be behind before it is dropped ([`super::Hub::subscribe_object`]).
pub const PINNED_BUFFER: usize = 256;

/// A subscription to one object's events ([`super::Hub::subscribe_object`]).
pub struct ObjectSubscription {
    /// The object's published events, in seq order.
    pub rx: tokio::sync::mpsc::Receiver<Published>,
    /// What [`super::Hub::unsubscribe_object`] takes.
    pub id: u64,
}
