//! Following the log: the events after a resourceVersion, in seq order, for watches
//! (`?watch=true` on object lists, the history and `/api/v1/events`).
//!
//! Owns [`Follower`]. Live events come from the hub's broadcast, shared by every watcher (one
//! decode and one serialization of each object, whatever the number of watchers: the
//! Kubernetes watch cache does the same); the log is read only to fill a gap (the events
//! between a watch's resourceVersion and its subscription, or those a lagging receiver
//! missed). Before this, every watcher re-read and decoded every event from the store, so a
//! write cost O(watchers) store reads and a blocking-pool task each.

use crate::command::{object_key, Hub, ObjectSubscription, Published, PublishedEvent};
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
    /// The log could not be read to fill a gap: [`StoreError::Compacted`] when a compaction
    /// removed events the follower had not handed out yet (the client must re-list, as after
    /// Kubernetes' 410 Expired), else the store's error.
    Store(StoreError),
    /// The blocking task reading the log failed.
    Task(String),
}

impl From<StoreError> for FollowError {
    fn from(e: StoreError) -> Self {
        FollowError::Store(e)
    }
}

/// `Err(Compacted)` when a compaction removed events after `after` while they were being read
/// (it records its cut before removing anything, so checking after the read is enough).
fn check_not_compacted(hub: &Hub, after: u64) -> Result<(), StoreError> {
    let oldest = hub.store().oldest_readable();
    if oldest > after {
        return Err(StoreError::Compacted { seq: after, oldest });
    }
    Ok(())
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
                let events = read_gap(&self.hub, self.last, until, None).await?;
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
            let until = *from;
            let events = read_gap(&self.hub, self.last, until, Some((*kind, name.clone()))).await?;
            self.last = until;
            if !events.is_empty() {
                return Ok(events);
            }
        }
        loop {
            let Some(first) = sub.rx.recv().await else {
                // Dropped for falling behind: subscribe again, then read the gap.
                let (k, n) = (*kind, name.clone());
                let old = std::mem::replace(sub, self.hub.subscribe_object(k.as_str(), &n));
                self.hub.unsubscribe_object(k.as_str(), &n, old.id);
                *from = self.hub.published_seq();
                return Box::pin(self.next_of_one()).await;
            };
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

/// The logged events in (`after`, `until`], of one object (through the per-object index) or
/// all, read on the blocking pool; `Compacted` when a compaction removed some of them meanwhile.
async fn read_gap(
    hub: &Arc<Hub>,
    after: u64,
    until: u64,
    only: Option<(Kind, String)>,
) -> Result<Vec<Published>, FollowError> {
    let hub = hub.clone();
    tokio::task::spawn_blocking(move || {
        let store = hub.store();
        let shared = |e: Event| Arc::new(PublishedEvent::new(Arc::new(e)));
        let events = match only {
            Some((kind, name)) => store
                .object_seqs(kind.as_str(), &name, after, until)?
                .into_iter()
                .filter_map(|seq| store.event(seq).transpose())
                .map(|r| r.map(shared))
                .collect::<Result<Vec<_>, _>>()?,
            None => store
                .read_range(after, until)
                .map(|r| r.map(shared))
                .collect::<Result<_, _>>()?,
        };
        check_not_compacted(&hub, after)?;
        Ok(events)
    })
    .await
    .map_err(|e| FollowError::Task(e.to_string()))?
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
            None => s
                .list_json(kind)
                .into_iter()
                .map(|o| (object_key(kind, &o), o))
                .collect(),
        };
        (objects, s.seq)
    };
    if rv >= now || hub.kind_changed_at(kind) <= rv {
        return Ok(objects.into_values().collect());
    }
    let store = hub.store();
    let rebuilt = || -> Result<Vec<Value>, StoreError> {
        let then = store.state_at(rv)?;
        Ok(match only {
            Some(n) => then.get_json(kind, n).into_iter().collect(),
            None => then.list_json(kind),
        })
    };
    if store.oldest_readable() > 0 || (only.is_none() && now - rv > store.snapshot_every()) {
        return rebuilt();
    }
    let from_index = match only {
        // One object: its version at `rv`, straight from the index.
        Some(n) => match store.object_event_at(kind.as_str(), n, rv)? {
            Some(e) => watch_object_at(&e)?.into_iter().collect(),
            None => Vec::new(),
        },
        None => {
            let mut touched = BTreeSet::new();
            for ev in store.read_range(rv, now) {
                let ev = ev?;
                if ev.object_kind == kind.as_str() {
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
            objects.into_values().collect()
        }
    };
    // A compaction that ran meanwhile may have removed what the index reads found (it
    // records its cut first): then the snapshot it left answers, or `rv` is gone.
    if store.oldest_readable() > 0 {
        return rebuilt();
    }
    Ok(from_index)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Actor, Mutation};
    use crate::model::DEFAULT_GROUP;
    use crate::store::Store;
    use serde_json::json;

    fn node(name: &str, n: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"n": n.to_string()}}})
    }

    async fn relabel(hub: &Hub, name: &str, n: usize) {
        let m = Mutation::Replace {
            kind: Kind::Node,
            name: name.into(),
            object: node(name, n),
        };
        hub.batch(vec![m], "", &Actor::new("test")).await.unwrap();
    }

    /// A pinned follower gets its object's events exactly once and in order: those before it
    /// subscribed from the index, the later ones through its subscription, and, when it fell
    /// more than PINNED_BUFFER events behind (a client not reading), the ones it missed from
    /// the index again; other objects' events never reach it.
    #[tokio::test]
    async fn a_pinned_follower_gets_every_event_of_its_object_once_even_after_falling_behind() {
        let hub = Hub::open(Store::temporary().unwrap(), DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        for name in ["a", "b"] {
            hub.create(Kind::Node, node(name, 0), &actor).await.unwrap();
        }
        let start = hub.published_seq();
        relabel(&hub, "a", 1).await;
        relabel(&hub, "b", 1).await;
        let mut f = Follower::pinned(hub.clone(), start, Kind::Node, "a".into());
        let total = crate::command::PINNED_BUFFER + 50;
        for n in 2..=total {
            relabel(&hub, "a", n).await;
            relabel(&hub, "b", n).await;
        }
        let mut seen = Vec::new();
        while seen.len() < total {
            let events = tokio::time::timeout(std::time::Duration::from_secs(10), f.next())
                .await
                .expect("events within 10 s")
                .unwrap();
            for e in events {
                assert_eq!(e.name, "a", "only its object's events");
                let labels = &e.watch_object().unwrap().object["metadata"]["labels"];
                seen.push(labels["n"].as_str().unwrap().parse::<usize>().unwrap());
            }
        }
        assert_eq!(seen, (1..=total).collect::<Vec<_>>());
        relabel(&hub, "a", total + 1).await;
        let next = f.next().await.unwrap();
        assert_eq!(next.len(), 1, "live again after catching up");
    }

    /// A compaction that removes events a follower has yet to read from the log ends it with
    /// `Compacted` (the watch then ends with 410 Expired), for the whole log and for one
    /// object, instead of skipping them.
    #[tokio::test]
    async fn a_compaction_past_what_a_follower_handed_out_ends_it_with_compacted() {
        let hub = Hub::open(Store::temporary().unwrap(), DEFAULT_GROUP).unwrap();
        hub.create(Kind::Node, node("a", 0), &Actor::new("test")).await.unwrap();
        let start = hub.published_seq();
        for n in 1..=5 {
            relabel(&hub, "a", n).await;
        }
        // Followers from `start` that subscribed after the writes: they read them from the log.
        let mut all = Follower::new(hub.clone(), start);
        let mut one = Follower::pinned(hub.clone(), start, Kind::Node, "a".into());
        hub.store().compact(hub.published_seq() - 1).unwrap();
        for f in [&mut all, &mut one] {
            match f.next().await {
                Err(FollowError::Store(StoreError::Compacted { .. })) => {}
                other => panic!("expected Compacted, got {:?}", other.map(|v| v.len())),
            }
        }
    }
}
