//! The projection: in-memory objects folded from the event log.
//!
//! Owns [`State`] and its total [`State::apply`]. No validation and no business logic happen
//! here: every event was validated before it was appended, so replay can never be refused.

use crate::disruption::MachineConfiguration;
use crate::event::Event;
use crate::model::{Keys, Kind, MachineConfig, MachineConfigPool, Node};
use crate::rollout::FleetIndex;
use imbl::OrdMap;
use serde::{Deserialize, Serialize};

pub use crate::model::Objects;

/// Every object mco stores, keyed by name, as of log sequence number `seq`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Sequence number of the last applied event (the list resourceVersion).
    pub seq: u64,
    pub machine_configs: Objects<MachineConfig>,
    pub pools: Objects<MachineConfigPool>,
    pub nodes: Objects<Node>,
    /// MachineConfigurations (only `cluster` is admitted). Absent from snapshots written before
    /// the kind existed.
    #[serde(default)]
    pub machine_configurations: Objects<MachineConfiguration>,
    /// Every other kind ([`Kind::is_generic`]) as its JSON, by kind and name.
    #[serde(default)]
    pub objects: OrdMap<Kind, Objects<serde_json::Value>>,
    /// Bearer tokens in force, by id ([`crate::auth`]): folded from `TokenIssued` and
    /// `TokenRevoked`. Absent from snapshots written before authentication existed.
    #[serde(default)]
    pub tokens: Objects<crate::auth::TokenRecord>,
    /// Token ids by secret hash, derived from `tokens` ([`State::token_by_hash`]: every API
    /// request looks its bearer token up, and a fleet holds a token per node). Not stored:
    /// rebuilt by [`State::reindex`] when a state is read from a snapshot.
    #[serde(skip)]
    token_ids: imbl::HashMap<String, String>,
    /// Each object's JSON, in the hub's live projection only ([`State::keep_encoded`]).
    #[serde(skip)]
    encoded: Encoded,
    /// What the controllers read about nodes and pools, kept by each fold in the hub's live
    /// projection only ([`State::keep_index`]). Derived, never stored, and not part of a
    /// state's equality.
    #[serde(skip)]
    fleet: Fleet,
}

/// The optional [`FleetIndex`], ignored by equality like [`Encoded`].
#[derive(Clone, Debug, Default)]
struct Fleet(Option<FleetIndex>);

impl PartialEq for Fleet {
    fn eq(&self, _: &Fleet) -> bool {
        true
    }
}

/// Each object's JSON text, encoded once when the object is folded in, so that a list copies
/// bytes instead of serializing every object again ([`State::write_json`]). Kept only where
/// [`State::keep_encoded`] turned it on (the hub's projection, which serves most lists): a
/// time-travel state encodes what it serves on demand instead of paying for every object.
/// Derived, never stored, and not part of a state's equality.
#[derive(Clone, Default)]
struct Encoded {
    on: bool,
    json: OrdMap<Kind, OrdMap<String, std::sync::Arc<[u8]>>>,
}

impl PartialEq for Encoded {
    fn eq(&self, _: &Encoded) -> bool {
        true
    }
}

impl std::fmt::Debug for Encoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: usize = self.json.values().map(|m| m.len()).sum();
        write!(f, "Encoded({} objects, on: {})", n, self.on)
    }
}

impl State {
    /// Folds one event into the state. Total: an event this build cannot read (unknown type or
    /// kind, or a body that no longer decodes) is logged and skipped, never an error.
    pub fn apply(&mut self, ev: &Event) {
        self.seq = self.seq.max(ev.seq);
        if let Some(t) = ev.event_type().filter(|t| t.is_token()) {
            if t.is_deletion() {
                if let Some(r) = self.tokens.remove(&ev.name) {
                    self.token_ids.remove(&r.hash);
                }
            } else {
                match serde_json::from_slice::<crate::auth::TokenRecord>(&ev.body) {
                    Ok(r) => {
                        if let Some(old) = self.tokens.get(&ev.name) {
                            self.token_ids.remove(&old.hash);
                        }
                        self.token_ids.insert(r.hash.clone(), ev.name.clone());
                        self.tokens.insert(ev.name.clone(), std::sync::Arc::new(r));
                    }
                    Err(e) => tracing::error!(seq = ev.seq, error = %e, "token event body does not decode; skipped"),
                }
            }
            return;
        }
        let (Some(t), Some(kind)) = (ev.event_type(), ev.kind()) else {
            tracing::warn!(seq = ev.seq, event_type = %ev.event_type, kind = %ev.object_kind, "skipping event unknown to this build");
            return;
        };
        if t.is_note() {
            return;
        }
        let pool_before = match (kind, &self.fleet.0) {
            (Kind::MachineConfigPool, Some(_)) => self.pools.get(&ev.name).cloned(),
            _ => None,
        };
        if t.is_deletion() {
            match kind {
                Kind::MachineConfig => self.machine_configs.remove(&ev.name).map(|_| ()),
                Kind::MachineConfigPool => self.pools.remove(&ev.name).map(|_| ()),
                Kind::Node => self.nodes.remove(&ev.name).map(|_| ()),
                Kind::MachineConfiguration => self.machine_configurations.remove(&ev.name).map(|_| ()),
                k => self.objects.entry(k).or_default().remove(&ev.name).map(|_| ()),
            };
            if self.encoded.on {
                if let Some(m) = self.encoded.json.get_mut(&kind) {
                    m.remove(&ev.name);
                }
            }
            self.reindex_fleet(kind, &ev.name, pool_before);
            return;
        }
        let res = match kind {
            Kind::MachineConfig => serde_json::from_slice(&ev.body).map(|o| {
                self.machine_configs.insert(ev.name.clone(), o);
            }),
            Kind::MachineConfigPool => serde_json::from_slice(&ev.body).map(|o| {
                self.pools.insert(ev.name.clone(), o);
            }),
            Kind::Node => serde_json::from_slice(&ev.body).map(|o| {
                self.nodes.insert(ev.name.clone(), o);
            }),
            Kind::MachineConfiguration => serde_json::from_slice(&ev.body).map(|o| {
                self.machine_configurations.insert(ev.name.clone(), o);
            }),
            k => serde_json::from_slice(&ev.body).map(|o| {
                self.objects.entry(k).or_default().insert(ev.name.clone(), o);
            }),
        };
        match res {
            Err(e) => tracing::error!(seq = ev.seq, error = %e, "event body does not decode; skipped"),
            Ok(()) => {
                if self.encoded.on {
                    // The body is the object's JSON as its typed form serializes it (the hub
                    // writes it so: `command::set_resource_version`), so it is kept as is;
                    // debug builds (every test) check it on each fold.
                    #[cfg(debug_assertions)]
                    {
                        let mut typed = Vec::new();
                        self.serialize_object(kind, &ev.name, &mut typed);
                        debug_assert!(
                            typed == ev.body,
                            "event {} ({} {}) has a body other than its object's serialization:\n{}\n{}",
                            ev.seq,
                            ev.object_kind,
                            ev.name,
                            String::from_utf8_lossy(&ev.body),
                            String::from_utf8_lossy(&typed)
                        );
                    }
                    self.encoded
                        .json
                        .entry(kind)
                        .or_default()
                        .insert(ev.name.clone(), ev.body.as_slice().into());
                }
                self.reindex_fleet(kind, &ev.name, pool_before);
            }
        }
    }

    /// Keeps the [`FleetIndex`] true after object `name` of `kind` changed (`pool_before`: the
    /// pool as it was, for a pool).
    fn reindex_fleet(&mut self, kind: Kind, name: &str, pool_before: Option<std::sync::Arc<MachineConfigPool>>) {
        let Some(ix) = &mut self.fleet.0 else {
            return;
        };
        match kind {
            Kind::Node => ix.node_changed(name, self.nodes.get(name).map(|n| &**n), &self.pools),
            Kind::MachineConfigPool => ix.pool_changed(
                pool_before.as_deref(),
                self.pools.get(name).map(|p| &**p),
                &self.pools,
                &self.nodes,
            ),
            _ => {}
        }
    }

    /// Keeps the [`FleetIndex`] from now on (the hub's live projection), reading node
    /// annotations under `keys`: built now (O(nodes × pools)), then kept by each fold.
    pub fn keep_index(&mut self, keys: &Keys) {
        self.fleet.0 = Some(FleetIndex::build(keys, &self.pools, &self.nodes));
    }

    /// Drops the [`FleetIndex`] (a copy whose objects change without a fold, as a preview's).
    pub fn forget_index(&mut self) {
        self.fleet.0 = None;
    }

    /// The fleet index: the one kept by the folds, or one built now from the objects (O(nodes
    /// × pools)) where none is kept. Either way it equals [`FleetIndex::build`] of this state.
    pub fn fleet(&self, keys: &Keys) -> std::borrow::Cow<'_, FleetIndex> {
        match &self.fleet.0 {
            Some(ix) if ix.keys() == keys => std::borrow::Cow::Borrowed(ix),
            _ => std::borrow::Cow::Owned(FleetIndex::build(keys, &self.pools, &self.nodes)),
        }
    }

    /// Keeps each object's JSON from now on (the hub's live projection): encodes every object
    /// now, then keeps each folded event's body as its object's JSON ([`State::write_json`]
    /// copies it). The bodies folded from then on must be what the typed object serializes to,
    /// byte for byte, as the hub writes them (`command::set_resource_version`); the replay of the
    /// log at open ([`crate::store::Store::load_state`]) runs before this is turned on.
    pub fn keep_encoded(&mut self) {
        self.encoded.on = true;
        for kind in Kind::ALL {
            let names: Vec<String> = self.names_from(kind, "").map(str::to_string).collect();
            for name in names {
                self.encode(kind, &name);
            }
        }
    }

    /// Drops the kept JSON (a copy whose objects will be changed without a fold, as a preview
    /// does): [`State::write_json`] then serializes each object.
    pub fn forget_encoded(&mut self) {
        self.encoded = Encoded::default();
    }

    /// Encodes one present object into the kept JSON.
    fn encode(&mut self, kind: Kind, name: &str) {
        let mut json = Vec::new();
        if self.serialize_object(kind, name, &mut json) {
            self.encoded
                .json
                .entry(kind)
                .or_default()
                .insert(name.to_string(), json.into());
        }
    }

    /// The token whose secret hashes to `hash` ([`crate::auth::hash`]), if it is in force:
    /// one hash-map lookup (a linear scan only if this state was deserialized without
    /// [`State::reindex`]).
    pub fn token_by_hash(&self, hash: &str) -> Option<&crate::auth::TokenRecord> {
        if self.token_ids.len() != self.tokens.len() {
            return self.tokens.values().find(|t| t.hash == hash).map(|t| &**t);
        }
        self.token_ids
            .get(hash)
            .and_then(|id| self.tokens.get(id))
            .map(|t| &**t)
    }

    /// Rebuilds what is derived from the stored maps (the token index) after the state was
    /// read from a snapshot.
    pub fn reindex(&mut self) {
        self.token_ids = self.tokens.iter().map(|(id, t)| (t.hash.clone(), id.clone())).collect();
    }

    /// Whether every object is the very same as in `other` (a state this one was folded from
    /// by events that changed no object: notes, tokens): compares the persistent maps' roots,
    /// O(number of kinds). `false` can be a false alarm (a fold that rewrote a map to equal
    /// content), never the reverse.
    pub fn same_objects(&self, other: &State) -> bool {
        self.machine_configs.ptr_eq(&other.machine_configs)
            && self.pools.ptr_eq(&other.pools)
            && self.nodes.ptr_eq(&other.nodes)
            && self.machine_configurations.ptr_eq(&other.machine_configurations)
            && self.objects.ptr_eq(&other.objects)
    }

    /// Appends one object's JSON to `out` (the same bytes as serialising [`State::get_json`],
    /// without building the `Value`): copied from the kept JSON ([`State::keep_encoded`]),
    /// else serialized from the typed object; `false` when absent.
    pub fn write_json(&self, kind: Kind, name: &str, out: &mut Vec<u8>) -> bool {
        match self.encoded.json.get(&kind).and_then(|m| m.get(name)) {
            Some(json) => {
                out.extend_from_slice(json);
                true
            }
            None => self.serialize_object(kind, name, out),
        }
    }

    /// Serializes one object from its typed form into `out`; `false` when absent.
    fn serialize_object(&self, kind: Kind, name: &str, out: &mut Vec<u8>) -> bool {
        fn write<T: Serialize>(o: Option<&T>, out: &mut Vec<u8>) -> bool {
            o.map(|o| serde_json::to_writer(out, o).expect("model objects serialize"))
                .is_some()
        }
        match kind {
            Kind::MachineConfig => write(self.machine_configs.get(name), out),
            Kind::MachineConfigPool => write(self.pools.get(name), out),
            Kind::Node => write(self.nodes.get(name), out),
            Kind::MachineConfiguration => write(self.machine_configurations.get(name), out),
            k => write(self.objects.get(&k).and_then(|m| m.get(name)), out),
        }
    }

    /// The JSON of one object, if present.
    pub fn get_json(&self, kind: Kind, name: &str) -> Option<serde_json::Value> {
        match kind {
            Kind::MachineConfig => self.machine_configs.get(name).map(to_json),
            Kind::MachineConfigPool => self.pools.get(name).map(to_json),
            Kind::Node => self.nodes.get(name).map(to_json),
            Kind::MachineConfiguration => self.machine_configurations.get(name).map(to_json),
            k => self.objects.get(&k).and_then(|m| m.get(name)).map(|o| (**o).clone()),
        }
    }

    /// JSON of every object of a kind, ordered by name.
    pub fn list_json(&self, kind: Kind) -> Vec<serde_json::Value> {
        match kind {
            Kind::MachineConfig => self.machine_configs.values().map(to_json).collect(),
            Kind::MachineConfigPool => self.pools.values().map(to_json).collect(),
            Kind::Node => self.nodes.values().map(to_json).collect(),
            Kind::MachineConfiguration => self.machine_configurations.values().map(to_json).collect(),
            k => self
                .objects
                .get(&k)
                .map(|m| m.values().map(|o| (**o).clone()).collect())
                .unwrap_or_default(),
        }
    }

    /// The names of the objects of a kind from `start` on (inclusive), in name order: where a
    /// page of a list begins ([`crate::api`]'s `limit`/`continue`), without building the JSON
    /// of the objects before it.
    pub fn names_from<'a>(&'a self, kind: Kind, start: &'a str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        fn from<'a, V>(m: &'a Objects<V>, start: &'a str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
            use std::ops::Bound;
            Box::new(
                m.range::<_, str>((Bound::Included(start), Bound::Unbounded))
                    .map(|(k, _)| k.as_str()),
            )
        }
        match kind {
            Kind::MachineConfig => from(&self.machine_configs, start),
            Kind::MachineConfigPool => from(&self.pools, start),
            Kind::Node => from(&self.nodes, start),
            Kind::MachineConfiguration => from(&self.machine_configurations, start),
            k => match self.objects.get(&k) {
                Some(m) => from(m, start),
                None => Box::new(std::iter::empty()),
            },
        }
    }

    /// Objects with an ownerReference to `uid` (Kubernetes dependents), by kind and name.
    /// Empty for an empty uid.
    pub fn dependents_of(&self, uid: &str) -> Vec<(Kind, String)> {
        if uid.is_empty() {
            return Vec::new();
        }
        let owned = |m: &crate::model::ObjectMeta| m.owner_references.iter().flatten().any(|r| r.uid == uid);
        let mut out = Vec::new();
        out.extend(
            self.machine_configs
                .iter()
                .filter(|(_, o)| owned(&o.metadata))
                .map(|(n, _)| (Kind::MachineConfig, n.clone())),
        );
        out.extend(
            self.pools
                .iter()
                .filter(|(_, o)| owned(&o.metadata))
                .map(|(n, _)| (Kind::MachineConfigPool, n.clone())),
        );
        out.extend(
            self.nodes
                .iter()
                .filter(|(_, o)| owned(&o.metadata))
                .map(|(n, _)| (Kind::Node, n.clone())),
        );
        for (k, objs) in &self.objects {
            out.extend(
                objs.iter()
                    .filter(|(_, o)| json_owned_by(o, uid))
                    .map(|(n, _)| (*k, n.clone())),
            );
        }
        out
    }

    /// The objects of a generic kind decoded as `T` (objects that no longer decode are skipped).
    pub fn typed<T: serde::de::DeserializeOwned>(&self, kind: Kind) -> Vec<T> {
        self.objects
            .get(&kind)
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(|v| T::deserialize(&**v).ok())
            .collect()
    }

    /// Objects whose owners are all gone: every ownerReference names a kind mco stores and no
    /// object of that kind and name has its uid (Kubernetes' garbage collector looks a
    /// dependent's owner up by its coordinates and compares the uid, so an owner deleted and
    /// created again under the same name does not own the old dependents). References to kinds
    /// mco does not store (a ControllerConfig in a cluster dump) cannot be resolved, so an
    /// object with one is never reported. O(objects) reads of the references, and one lookup
    /// per reference: nothing is decoded or hashed for objects without owners.
    pub fn orphaned_dependents(&self) -> Vec<(Kind, String)> {
        // An ownerReference's kind is exact (not `Kind::parse`'s plurals and short names).
        let stored_kind = |kind: &str| Kind::ALL.iter().copied().find(|k| k.as_str() == kind);
        let gone = |kind: Kind, name: &str, uid: &str| self.uid_of(kind, name) != Some(uid);
        let orphaned = |refs: &[(&str, &str, &str)]| {
            !refs.is_empty()
                && refs
                    .iter()
                    .all(|(k, n, u)| stored_kind(k).is_some_and(|k| gone(k, n, u)))
        };
        fn typed(m: &crate::model::ObjectMeta) -> Vec<(&str, &str, &str)> {
            m.owner_references
                .iter()
                .flatten()
                .map(|r| (r.kind.as_str(), r.name.as_str(), r.uid.as_str()))
                .collect()
        }
        let mut out = Vec::new();
        let mut check = |kind: Kind, name: &String, refs: Vec<(&str, &str, &str)>| {
            if orphaned(&refs) {
                out.push((kind, name.clone()));
            }
        };
        for (n, o) in &self.machine_configs {
            if o.metadata.owner_references.is_some() {
                check(Kind::MachineConfig, n, typed(&o.metadata));
            }
        }
        for (n, o) in &self.pools {
            if o.metadata.owner_references.is_some() {
                check(Kind::MachineConfigPool, n, typed(&o.metadata));
            }
        }
        for (n, o) in &self.nodes {
            if o.metadata.owner_references.is_some() {
                check(Kind::Node, n, typed(&o.metadata));
            }
        }
        for (k, objs) in &self.objects {
            for (n, o) in objs {
                let Some(refs) = o["metadata"]["ownerReferences"].as_array() else {
                    continue;
                };
                let refs: Vec<(&str, &str, &str)> = refs
                    .iter()
                    .map(|r| {
                        let get = |f: &str| r[f].as_str().unwrap_or("");
                        (get("kind"), get("name"), get("uid"))
                    })
                    .collect();
                check(*k, n, refs);
            }
        }
        out
    }

    /// The uid of object `name` of `kind`, if it exists (`""` when it has none).
    fn uid_of(&self, kind: Kind, name: &str) -> Option<&str> {
        fn uid(m: &crate::model::ObjectMeta) -> &str {
            m.uid.as_deref().unwrap_or("")
        }
        match kind {
            Kind::MachineConfig => self.machine_configs.get(name).map(|o| uid(&o.metadata)),
            Kind::MachineConfigPool => self.pools.get(name).map(|o| uid(&o.metadata)),
            Kind::Node => self.nodes.get(name).map(|o| uid(&o.metadata)),
            Kind::MachineConfiguration => self.machine_configurations.get(name).map(|o| uid(&o.metadata)),
            k => self
                .objects
                .get(&k)?
                .get(name)
                .map(|o| o["metadata"]["uid"].as_str().unwrap_or("")),
        }
    }

    /// The resourceVersion (seq) an object was last changed at, if present.
    pub fn resource_version(&self, kind: Kind, name: &str) -> Option<u64> {
        let rv = match kind {
            Kind::MachineConfig => self.machine_configs.get(name).map(|o| &o.metadata.resource_version),
            Kind::MachineConfigPool => self.pools.get(name).map(|o| &o.metadata.resource_version),
            Kind::Node => self.nodes.get(name).map(|o| &o.metadata.resource_version),
            Kind::MachineConfiguration => self
                .machine_configurations
                .get(name)
                .map(|o| &o.metadata.resource_version),
            k => {
                let o = self.objects.get(&k)?.get(name)?;
                return o["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .or(Some(0));
            }
        }?;
        rv.as_deref().and_then(|s| s.parse().ok()).or(Some(0))
    }
}

fn json_owned_by(o: &serde_json::Value, uid: &str) -> bool {
    o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

fn to_json<T: Serialize>(o: &T) -> serde_json::Value {
    serde_json::to_value(o).expect("model objects serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{TokenKind, TokenRecord};
    use crate::event::EventType;

    fn token_event(seq: u64, t: EventType, id: &str, hash: &str) -> Event {
        let record = TokenRecord {
            id: id.into(),
            kind: TokenKind::Node,
            identity: format!("system:node:{id}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
            node: Some(id.into()),
            labels: Default::default(),
            hash: hash.into(),
            created: "2026-12-01T00:00:00Z".into(),
        };
        Event::for_test(seq, t, crate::auth::EVENT_KIND, id, &record)
    }

    /// The token index follows issue, re-issue and revocation, and is rebuilt for a state read
    /// back from its snapshot form.
    #[test]
    fn tokens_are_found_by_hash_through_issue_revoke_and_a_snapshot() {
        let mut s = State::default();
        s.apply(&token_event(1, EventType::TokenIssued, "a", "h1"));
        s.apply(&token_event(2, EventType::TokenIssued, "b", "h2"));
        s.apply(&token_event(3, EventType::TokenIssued, "a", "h3"));
        assert_eq!(
            s.token_by_hash("h1").map(|t| t.id.as_str()),
            None,
            "re-issued: the old hash is gone"
        );
        assert_eq!(s.token_by_hash("h3").map(|t| t.id.as_str()), Some("a"));
        s.apply(&token_event(4, EventType::TokenRevoked, "b", "h2"));
        assert!(s.token_by_hash("h2").is_none());
        let mut back: State = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        back.reindex();
        assert_eq!(back, s);
        assert_eq!(back.token_by_hash("h3").map(|t| t.id.as_str()), Some("a"));
    }

    /// A Node event whose body is in the key order the typed Node serializes to (ObjectMeta's
    /// fields are alphabetical), as the hub writes bodies.
    fn node_event(seq: u64, label: &str) -> Event {
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"labels": {"l": label}, "name": "worker-0"}});
        Event::for_test(seq, EventType::NodeUpdated, "Node", "worker-0", &body)
    }

    /// A fold copies only what it changes: a reader's snapshot keeps its objects, and events
    /// that change no object (a token) leave every object map the very same
    /// ([`State::same_objects`], which lets the controllers skip a pass).
    #[test]
    fn folds_share_unchanged_objects_and_leave_snapshots_alone() {
        let mut s = State::default();
        s.apply(&node_event(1, "a"));
        let snapshot = std::sync::Arc::new(s.clone());
        s.apply(&token_event(2, EventType::TokenIssued, "t", "h"));
        assert!(s.same_objects(&snapshot), "a token event changes no object");
        s.apply(&node_event(3, "b"));
        assert!(!s.same_objects(&snapshot));
        assert_eq!(snapshot.nodes["worker-0"].metadata.labels.as_ref().unwrap()["l"], "a");
        assert_eq!(s.nodes["worker-0"].metadata.labels.as_ref().unwrap()["l"], "b");
    }

    /// The kept JSON of the live projection is what serializing the object gives (for bodies
    /// in the typed form's key order, as the hub writes them), follows updates and deletions,
    /// and takes no part in equality.
    #[test]
    fn kept_json_follows_folds() {
        let (mut live, mut plain) = (State::default(), State::default());
        live.keep_encoded();
        let mut delete = node_event(3, "");
        delete.event_type = EventType::NodeDeleted.as_str().into();
        for (i, e) in [node_event(1, "a"), node_event(2, "b")].iter().enumerate() {
            live.apply(e);
            plain.apply(e);
            assert_eq!(live, plain, "after event {i}");
            let (mut kept, mut made) = (Vec::new(), Vec::new());
            assert!(live.write_json(Kind::Node, "worker-0", &mut kept));
            assert!(plain.write_json(Kind::Node, "worker-0", &mut made));
            assert_eq!(kept, made);
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&kept).unwrap(),
                plain.get_json(Kind::Node, "worker-0").unwrap()
            );
        }
        live.apply(&delete);
        assert!(!live.write_json(Kind::Node, "worker-0", &mut Vec::new()));
    }

    /// Kubernetes' garbage collector's rule: a dependent is orphaned when every owner it names
    /// is gone, and an owner created again under the same name (a new uid) does not own it.
    #[test]
    fn dependents_are_orphaned_when_no_owner_with_their_uid_exists() {
        use std::sync::Arc;
        let owned = |name: &str, refs: serde_json::Value| -> Arc<MachineConfig> {
            Arc::new(
                serde_json::from_value(serde_json::json!({"metadata": {"name": name, "ownerReferences": refs}}))
                    .unwrap(),
            )
        };
        let owner_ref = |kind: &str, name: &str, uid: &str| serde_json::json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": uid});
        let mut st = State::default();
        let pool: MachineConfigPool =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "worker", "uid": "u-2"}})).unwrap();
        st.pools.insert("worker".into(), Arc::new(pool));
        let refs = |uid: &str| serde_json::json!([owner_ref("MachineConfigPool", "worker", uid)]);
        st.machine_configs.insert("owned".into(), owned("owned", refs("u-2")));
        st.machine_configs
            .insert("recreated".into(), owned("recreated", refs("u-1")));
        st.machine_configs.insert(
            "gone".into(),
            owned(
                "gone",
                serde_json::json!([owner_ref("MachineConfigPool", "infra", "u-3")]),
            ),
        );
        st.machine_configs.insert(
            "unknown-kind".into(),
            owned(
                "unknown-kind",
                serde_json::json!([owner_ref("ControllerConfig", "c", "u-4")]),
            ),
        );
        st.machine_configs.insert(
            "one-owner-left".into(),
            owned(
                "one-owner-left",
                serde_json::json!([
                    owner_ref("MachineConfigPool", "infra", "u-3"),
                    owner_ref("MachineConfigPool", "worker", "u-2")
                ]),
            ),
        );
        assert_eq!(
            st.orphaned_dependents(),
            vec![
                (Kind::MachineConfig, "gone".to_string()),
                (Kind::MachineConfig, "recreated".to_string())
            ]
        );
    }
}
