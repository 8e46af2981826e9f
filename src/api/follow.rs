//! Following the log: the events after a resourceVersion, in seq order, for watches
//! (`?watch=true` on object lists, the history and `/api/v1/events`).
//!
//! Owns [`Follower`]. Live events come from the hub's broadcast, shared by every watcher (one
//! decode and one serialization of each object, whatever the number of watchers: the
//! Kubernetes watch cache does the same); the log is read only to fill a gap (the events
//! between a watch's resourceVersion and its subscription, or those a lagging receiver
//! missed). Before this, every watcher re-read and decoded every event from the store, so a
//! write cost O(watchers) store reads and a blocking-pool task each.

use crate::command::{object_name, Hub, ObjectSubscription, Published, PublishedEvent};
use crate::event::Event;
use crate::model::Kind;
use crate::store::StoreError;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;

/// Why a [`Follower`] stopped.
#[derive(Debug)]
pub enum FollowError {
    /// The hub is gone (the server is stopping).
    Closed,
    /// The log could not be read to fill a gap.
    Store(String),
}

impl From<StoreError> for FollowError {
    fn from(e: StoreError) -> Self {
        FollowError::Store(e.to_string())
    }
}

/// The published events after a resourceVersion, in seq order, each exactly once.
pub struct Follower {
    hub: Arc<Hub>,
    live: Live,
    /// Live events received but not yet handed out, in seq order, all after `last`.
    buffered: VecDeque<Published>,
    /// The seq of the last event handed out (or the resourceVersion followed from).
    last: u64,
}

/// Where a follower's live events come from.
enum Live {
    /// Every published event ([`Hub::subscribe`]).
    All(Receiver<Published>),
    /// One object's events ([`Hub::subscribe_object`]); every one of them after `from` (the
    /// published head when it subscribed) arrives here, the earlier ones are read from the log
    /// through the per-object index.
    One {
        kind: Kind,
        name: String,
        sub: ObjectSubscription,
        from: u64,
    },
}

impl Follower {
    /// Follows the log after `after` (a resourceVersion). Subscribes at once, so no event
    /// published from now on is missed; the ones before are read from the log.
    pub fn new(hub: Arc<Hub>, after: u64) -> Follower {
        let live = Live::All(hub.subscribe());
        Follower {
            hub,
            live,
            buffered: VecDeque::new(),
            last: after,
        }
    }

    /// Follows one object's events after `after` (a watch with
    /// `fieldSelector=metadata.name=...`, as every node daemon's): it is sent that object's
    /// events alone (not every event, to skip), and the ones before its subscription are read
    /// through the per-object index instead of the whole range.
    pub fn pinned(hub: Arc<Hub>, after: u64, kind: Kind, name: String) -> Follower {
        let sub = hub.subscribe_object(kind.as_str(), &name);
        // Read after subscribing: the hub publishes an event to its object's subscribers and
        // moves the head under one lock, so every event after `from` reaches `sub`.
        let from = hub.published_seq();
        Follower {
            live: Live::One { kind, name, sub, from },
            buffered: VecDeque::new(),
            last: after,
            hub,
        }
    }

    /// The next events after the last one handed out (at least one), waiting until one is
    /// published. Contiguous live events are handed out as received; a gap (events before
    /// the subscription, or missed by a receiver that lagged) is filled from the log, read on
    /// the blocking pool, up to the published head.
    pub async fn next(&mut self) -> Result<Vec<Published>, FollowError> {
        if let Live::One { .. } = self.live {
            return self.next_of_one().await;
        }
        loop {
            self.drain_ready();
            if self.buffered.front().is_some_and(|e| e.seq == self.last + 1) {
                let mut out = Vec::new();
                while let Some(e) = self.buffered.front().filter(|e| e.seq == self.last + 1) {
                    self.last = e.seq;
                    out.push(self.buffered.pop_front().expect("front exists"));
                }
                return Ok(out);
            }
            let head = self.hub.published_seq();
            if head > self.last {
                // A gap: up to the first buffered event, or to the head.
                let until = self.buffered.front().map_or(head, |e| e.seq - 1).min(head);
                let (hub, after) = (self.hub.clone(), self.last);
                let events = tokio::task::spawn_blocking(move || {
                    hub.store()
                        .read_range(after, until)
                        .map(|r| r.map(shared))
                        .collect::<Result<Vec<_>, _>>()
                })
                .await
                .map_err(|e| FollowError::Store(e.to_string()))??;
                // The log has no holes, but if it had, the range is done either way.
                self.last = until;
                if !events.is_empty() {
                    return Ok(events);
                }
                continue;
            }
            let Live::All(live) = &mut self.live else {
                unreachable!("one object is followed by next_of_one")
            };
            match live.recv().await {
                Ok(e) => self.push(e),
                Err(RecvError::Lagged(_)) => self.buffered.clear(),
                Err(RecvError::Closed) => return Err(FollowError::Closed),
            }
        }
    }

    /// [`Follower::next`] for one object: its events up to the subscription from the index
    /// (once), then those sent to its subscription.
    async fn next_of_one(&mut self) -> Result<Vec<Published>, FollowError> {
        let Live::One { kind, name, sub, from } = &mut self.live else {
            unreachable!("called for one object")
        };
        if self.last < *from {
            let (hub, after, until, kind, name) = (self.hub.clone(), self.last, *from, *kind, name.clone());
            let events = tokio::task::spawn_blocking(move || {
                let store = hub.store();
                store
                    .object_seqs(kind.as_str(), &name, after, until)?
                    .into_iter()
                    .filter_map(|seq| store.event(seq).transpose())
                    .map(|r| r.map(shared))
                    .collect::<Result<Vec<_>, _>>()
            })
            .await
            .map_err(|e| FollowError::Store(e.to_string()))??;
            self.last = until;
            if !events.is_empty() {
                return Ok(events);
            }
        }
        loop {
            let first = sub.rx.recv().await.ok_or(FollowError::Closed)?;
            let mut out = Vec::new();
            let mut next = Some(first);
            while let Some(e) = next {
                if e.seq > self.last {
                    self.last = e.seq;
                    out.push(e);
                }
                next = sub.rx.try_recv().ok();
            }
            if !out.is_empty() {
                return Ok(out);
            }
        }
    }

    /// Moves the live events already received into the buffer, without waiting.
    fn drain_ready(&mut self) {
        loop {
            let Live::All(live) = &mut self.live else { return };
            match live.try_recv() {
                Ok(e) => self.push(e),
                // What was missed is read from the log (the buffer's events stay valid, but
                // the gap before them is filled first).
                Err(TryRecvError::Lagged(_)) => self.buffered.clear(),
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }

    fn push(&mut self, e: Published) {
        if e.seq > self.last && self.buffered.back().is_none_or(|b| e.seq > b.seq) {
            self.buffered.push_back(e);
        }
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Live::One { kind, name, sub, .. } = &self.live {
            self.hub.unsubscribe_object(kind.as_str(), name, sub.id);
        }
    }
}

/// A logged event as live events are shared.
fn shared(e: Event) -> Published {
    Arc::new(PublishedEvent::new(Arc::new(e)))
}

/// The objects of `kind` as of resourceVersion `rv` (only the one named `only`, when the watch
/// pins a name): what a watch from `rv` must assume its client holds. Built from the present
/// and the log after `rv`: the objects no event touched since are as they are now, the others
/// are read at `rv` through the per-object index, so the cost is the events after `rv`, not a
/// rebuild of the whole state per watcher (kube-apiserver's watch cache serves a watch from
/// its window of recent events the same way). Rebuilds the state at `rv` only where the log
/// was compacted or the range is longer than the snapshot interval (then a snapshot is the
/// cheaper start). Blocking: reads the store.
pub fn objects_at(hub: &Hub, kind: Kind, rv: u64, only: Option<&str>) -> Result<Vec<Value>, StoreError> {
    let (mut objects, now): (BTreeMap<String, Value>, u64) = {
        let s = hub.state();
        let objects = match only {
            Some(n) => s.get_json(kind, n).map(|o| (n.to_string(), o)).into_iter().collect(),
            None => s.list_json(kind).into_iter().map(|o| (object_name(&o), o)).collect(),
        };
        (objects, s.seq)
    };
    if rv >= now || hub.kind_changed_at(kind) <= rv {
        return Ok(objects.into_values().collect());
    }
    let store = hub.store();
    if let (Some(n), 0) = (only, store.oldest_readable()) {
        // One object: its version at `rv`, straight from the index.
        let then = store.object_event_at(kind.as_str(), n, rv)?;
        return Ok(then
            .map(|e| watch_object_at(&e))
            .transpose()?
            .flatten()
            .into_iter()
            .collect());
    }
    if store.oldest_readable() > 0 || now - rv > store.snapshot_every() {
        let then = store.state_at(rv)?;
        return Ok(match only {
            Some(n) => then.get_json(kind, n).into_iter().collect(),
            None => then.list_json(kind),
        });
    }
    let mut touched = BTreeSet::new();
    for ev in store.read_range(rv, now) {
        let ev = ev?;
        if ev.object_kind == kind.as_str() && only.is_none_or(|n| n == ev.name) {
            touched.insert(ev.name);
        }
    }
    for name in touched {
        match store.object_event_at(kind.as_str(), &name, rv)? {
            Some(e) => match watch_object_at(&e)? {
                Some(o) => objects.insert(name, o),
                None => objects.remove(&name),
            },
            None => objects.remove(&name),
        };
    }
    Ok(objects.into_values().collect())
}

/// The object as an event left it (its resourceVersion the event's seq), `None` when the event
/// deleted it.
fn watch_object_at(e: &Event) -> Result<Option<Value>, StoreError> {
    if e.event_type().is_some_and(|t| t.is_deletion()) {
        return Ok(None);
    }
    let mut o = e.object().map_err(|err| StoreError::Corrupt {
        seq: e.seq,
        tree: "events",
        what: format!("the event body does not decode: {err}"),
    })?;
    o["metadata"]["resourceVersion"] = serde_json::json!(e.seq.to_string());
    Ok(Some(o))
}
