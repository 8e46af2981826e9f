//! Events: the past-tense facts the log records, and their on-disk envelope.
//!
//! Owns the event vocabulary ([`EventType`]) and the forever format of one log record
//! ([`Event`]): a plain bincode 1.3.3 struct whose `body` is the JSON of the object *after* the
//! change (the object as it was, for a deletion). bincode only ever sees this flat struct
//! (no `skip_serializing_if`, no tagged enums, no `serde_json::Value`), which it round-trips
//! exactly; the object shapes live in JSON, which k8s-openapi types need anyway (deps.md 2.2).
//! Changing the envelope means a new [`SCHEMA_VERSION`] and a numbered migration under
//! `migrations/`.

use crate::model::Kind;
use serde::{Deserialize, Serialize};

/// Version of the store written by this build (`migrations/0003-checksums.md`: the store frames
/// each envelope with a CRC-32, [`crate::store::record`]; the envelope itself is unchanged since
/// `0001-initial.md`, whose events still decode).
pub const SCHEMA_VERSION: u32 = 4;

/// What happened. Stored by name (not by index), so adding a type never breaks old logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    MachineConfigCreated,
    MachineConfigUpdated,
    MachineConfigDeleted,
    /// The render controller created a `rendered-<pool>-<hash>` MachineConfig.
    RenderedConfigGenerated,
    PoolCreated,
    PoolUpdated,
    PoolDeleted,
    /// The render controller pointed a pool's `spec.configuration` at a rendered config.
    PoolConfigurationSet,
    /// Pool `status` changed (counts, conditions, `status.configuration`).
    PoolStatusUpdated,
    NodeRegistered,
    NodeUpdated,
    NodeDeleted,
    /// Node `status` changed (conditions, boot id).
    NodeStatusUpdated,
    /// The rollout controller set a node's `desiredConfig`.
    NodeDesiredConfigSet,
    /// The daemon reported `currentConfig`, `state` or `reason`.
    NodeStateChanged,
    /// The daemon asked for a drain or an uncordon (`desiredDrain`).
    NodeDrainRequested,
    /// The drain controller cordoned the node and completed the drain (`lastAppliedDrain`).
    NodeDrained,
    /// The node was uncordoned: by the drain controller (`lastAppliedDrain`) or by a user.
    NodeUncordoned,
    /// A user cordoned the node (`spec.unschedulable`) without a drain request.
    NodeCordoned,
    /// A note, not a change: the pool's nodeSelector is `{}` (MCO's Warning event
    /// `SelectingAll`, `pkg/controller/node/node_controller.go`); its nodes are not updated.
    PoolSelectingAll,
    /// An object of a kind without its own vocabulary was created (KubeletConfig,
    /// ContainerRuntimeConfig, the mirror sets, Image: [`Kind::is_generic`]).
    ObjectCreated,
    /// Such an object's `spec` or metadata changed.
    ObjectUpdated,
    /// Such an object's `status` changed (a controller's `Success`/`Failure` condition).
    ObjectStatusUpdated,
    /// Such an object was deleted.
    ObjectDeleted,
    MachineConfigurationCreated,
    MachineConfigurationUpdated,
    MachineConfigurationDeleted,
    /// The daemon chose its node disruption actions for an update (annotation
    /// `mco.dev/post-config-actions`, [`crate::disruption`]).
    NodeActionsChosen,
    /// A note: a managed path of the node drifted from its rendered config (the daemon's
    /// drift report): the path, the kind of mismatch, the DriftPolicy action and the rule that
    /// chose it, MCO's message, then the diff ([`crate::drift::DriftRecord::detail`]). MCO's
    /// Warning event `ConfigDriftDetected`.
    NodeConfigDrifted,
    /// A note: the daemon rewrote a drifted path from the rendered config (DriftPolicy
    /// `Revert`): what it wrote and the diff it undid.
    NodeConfigReverted,
    /// A bearer token was issued ([`crate::auth`]): the body is its
    /// [`crate::auth::TokenRecord`] (id, kind, identity, SHA-256, time), never the secret.
    /// `object_kind` is [`crate::auth::EVENT_KIND`], the name the token id.
    TokenIssued,
    /// A bearer token was revoked: requests carrying it are refused from the next one on.
    TokenRevoked,
}

impl EventType {
    pub const ALL: [EventType; 32] = [
        EventType::MachineConfigCreated,
        EventType::MachineConfigUpdated,
        EventType::MachineConfigDeleted,
        EventType::RenderedConfigGenerated,
        EventType::PoolCreated,
        EventType::PoolUpdated,
        EventType::PoolDeleted,
        EventType::PoolConfigurationSet,
        EventType::PoolStatusUpdated,
        EventType::NodeRegistered,
        EventType::NodeUpdated,
        EventType::NodeDeleted,
        EventType::NodeStatusUpdated,
        EventType::NodeDesiredConfigSet,
        EventType::NodeStateChanged,
        EventType::NodeDrainRequested,
        EventType::NodeDrained,
        EventType::NodeUncordoned,
        EventType::NodeCordoned,
        EventType::PoolSelectingAll,
        EventType::ObjectCreated,
        EventType::ObjectUpdated,
        EventType::ObjectStatusUpdated,
        EventType::ObjectDeleted,
        EventType::MachineConfigurationCreated,
        EventType::MachineConfigurationUpdated,
        EventType::MachineConfigurationDeleted,
        EventType::NodeActionsChosen,
        EventType::TokenIssued,
        EventType::TokenRevoked,
        EventType::NodeConfigDrifted,
        EventType::NodeConfigReverted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::MachineConfigCreated => "MachineConfigCreated",
            EventType::MachineConfigUpdated => "MachineConfigUpdated",
            EventType::MachineConfigDeleted => "MachineConfigDeleted",
            EventType::RenderedConfigGenerated => "RenderedConfigGenerated",
            EventType::PoolCreated => "PoolCreated",
            EventType::PoolUpdated => "PoolUpdated",
            EventType::PoolDeleted => "PoolDeleted",
            EventType::PoolConfigurationSet => "PoolConfigurationSet",
            EventType::PoolStatusUpdated => "PoolStatusUpdated",
            EventType::NodeRegistered => "NodeRegistered",
            EventType::NodeUpdated => "NodeUpdated",
            EventType::NodeDeleted => "NodeDeleted",
            EventType::NodeStatusUpdated => "NodeStatusUpdated",
            EventType::NodeDesiredConfigSet => "NodeDesiredConfigSet",
            EventType::NodeStateChanged => "NodeStateChanged",
            EventType::NodeDrainRequested => "NodeDrainRequested",
            EventType::NodeDrained => "NodeDrained",
            EventType::NodeUncordoned => "NodeUncordoned",
            EventType::NodeCordoned => "NodeCordoned",
            EventType::PoolSelectingAll => "PoolSelectingAll",
            EventType::ObjectCreated => "ObjectCreated",
            EventType::ObjectUpdated => "ObjectUpdated",
            EventType::ObjectStatusUpdated => "ObjectStatusUpdated",
            EventType::ObjectDeleted => "ObjectDeleted",
            EventType::MachineConfigurationCreated => "MachineConfigurationCreated",
            EventType::MachineConfigurationUpdated => "MachineConfigurationUpdated",
            EventType::MachineConfigurationDeleted => "MachineConfigurationDeleted",
            EventType::NodeActionsChosen => "NodeActionsChosen",
            EventType::TokenIssued => "TokenIssued",
            EventType::TokenRevoked => "TokenRevoked",
            EventType::NodeConfigDrifted => "NodeConfigDrifted",
            EventType::NodeConfigReverted => "NodeConfigReverted",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// True for the types that remove their object from the projection.
    pub fn is_deletion(self) -> bool {
        matches!(
            self,
            EventType::MachineConfigDeleted
                | EventType::PoolDeleted
                | EventType::NodeDeleted
                | EventType::MachineConfigurationDeleted
                | EventType::ObjectDeleted
                | EventType::TokenRevoked
        )
    }

    /// True for the token events (folded into [`crate::state::State::tokens`], about no
    /// [`Kind`]).
    pub fn is_token(self) -> bool {
        matches!(self, EventType::TokenIssued | EventType::TokenRevoked)
    }

    /// True for notes: events about an object that do not change it (the projection and
    /// watches skip them; the history and `/api/v1/events` show them).
    pub fn is_note(self) -> bool {
        matches!(
            self,
            EventType::PoolSelectingAll | EventType::NodeConfigDrifted | EventType::NodeConfigReverted
        )
    }

    /// The Kubernetes Event `reason` and whether its `type` is `Warning`, for notes that
    /// reproduce one of MCO's events; `None` for changes.
    pub fn k8s_event(self) -> Option<(&'static str, bool)> {
        match self {
            EventType::PoolSelectingAll => Some(("SelectingAll", true)),
            EventType::NodeConfigDrifted => Some((crate::model::CONFIG_DRIFT_DETECTED, true)),
            EventType::NodeConfigReverted => Some(("ConfigDriftReverted", false)),
            _ => None,
        }
    }

    /// True for the types that create their object.
    pub fn is_creation(self) -> bool {
        matches!(
            self,
            EventType::MachineConfigCreated
                | EventType::RenderedConfigGenerated
                | EventType::PoolCreated
                | EventType::NodeRegistered
                | EventType::MachineConfigurationCreated
                | EventType::ObjectCreated
                | EventType::TokenIssued
        )
    }

    /// The Kubernetes watch event type (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn watch_type(self) -> &'static str {
        if self.is_creation() {
            "ADDED"
        } else if self.is_deletion() {
            "DELETED"
        } else {
            "MODIFIED"
        }
    }
}

/// One record of the log, exactly as stored (bincode 1.3.3, fixed field order).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Envelope schema version ([`SCHEMA_VERSION`] when written by this build).
    pub schema: u32,
    /// Log sequence number, the resourceVersion of the change. Strictly increasing.
    pub seq: u64,
    /// UUIDv7 of the event (time-ordered, unique across stores).
    pub id: [u8; 16],
    /// Wall-clock time of the append, milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// [`EventType::as_str`].
    pub event_type: String,
    /// [`Kind::as_str`] of the object.
    pub object_kind: String,
    /// Object name.
    pub name: String,
    /// Who caused it: the authenticated user (`admin`, `system:node:worker-1`; before
    /// authentication, the client's declared `cli`, `daemon:worker-1`) or `controller:render`, ...
    pub actor: String,
    /// Free-text reason given by the client (may be empty).
    pub reason: String,
    /// Short human summary of what changed (`state: Working -> Done`).
    pub detail: String,
    /// JSON of the object after the change (before it, for a deletion). Encoded as one byte
    /// string (`serde_bytes`): bincode 1.3.3 writes a byte string exactly as the sequence of
    /// u8 it wrote before (u64 length, then the bytes), without a call per byte.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
}

/// Errors decoding a stored record.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("event envelope does not decode: {0}")]
    Envelope(#[from] bincode::Error),
    #[error("event {seq} has schema {schema}, newer than this build's {SCHEMA_VERSION}")]
    TooNew { seq: u64, schema: u32 },
}

#[cfg(test)]
impl Event {
    /// A test event of type `t` on `kind`/`name` with `body` as its JSON: actor `test`, zero id
    /// and time, no reason or detail.
    pub(crate) fn for_test(seq: u64, t: EventType, kind: &str, name: &str, body: &impl Serialize) -> Event {
        Event {
            schema: SCHEMA_VERSION,
            seq,
            id: [0; 16],
            time_ms: 0,
            event_type: t.as_str().into(),
            object_kind: kind.into(),
            name: name.into(),
            actor: "test".into(),
            reason: String::new(),
            detail: String::new(),
            body: serde_json::to_vec(body).expect("test bodies encode"),
        }
    }
}

impl Event {
    /// The typed event type; `None` only for a type unknown to this build.
    pub fn event_type(&self) -> Option<EventType> {
        EventType::parse(&self.event_type)
    }

    pub fn kind(&self) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == self.object_kind)
    }

    /// The event id as a UUID.
    pub fn uuid(&self) -> uuid::Uuid {
        uuid::Uuid::from_bytes(self.id)
    }

    /// The object body as JSON.
    pub fn object(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::from_slice(&self.body)
    }

    /// Encodes for storage.
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("a plain struct always encodes")
    }

    /// Encodes for storage, appending to `out` (the store frames it with its checksum).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        bincode::serialize_into(out, self).expect("a plain struct always encodes")
    }

    /// Decodes a stored record, refusing schemas newer than this build.
    pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
        let ev: Event = bincode::deserialize(bytes)?;
        if ev.schema > SCHEMA_VERSION {
            return Err(DecodeError::TooNew {
                seq: ev.seq,
                schema: ev.schema,
            });
        }
        Ok(ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_round_trips_through_the_store_encoding() {
        for (i, t) in EventType::ALL.into_iter().enumerate() {
            let body = serde_json::json!({"metadata": {"name": format!("obj-{i}")}, "spec": {"fips": false, "list": [], "s": ""}});
            let ev = Event {
                schema: SCHEMA_VERSION,
                seq: 1 << (i + 8),
                id: *uuid::Uuid::now_v7().as_bytes(),
                time_ms: 1_700_000_000_000 + i as i64,
                event_type: t.as_str().to_string(),
                object_kind: Kind::ALL[i % Kind::ALL.len()].as_str().to_string(),
                name: format!("obj-{i}"),
                actor: "controller:render".into(),
                reason: if i % 2 == 0 { String::new() } else { "because".into() },
                detail: "state: Working -> Done".into(),
                body: serde_json::to_vec(&body).unwrap(),
            };
            let back = Event::decode(&ev.encode()).unwrap();
            assert_eq!(back, ev);
            assert_eq!(back.event_type(), Some(t));
            assert_eq!(back.object().unwrap(), body);
        }
    }

    #[test]
    fn newer_schema_is_refused() {
        let ev = Event {
            schema: SCHEMA_VERSION + 1,
            seq: 7,
            id: [0; 16],
            time_ms: 0,
            event_type: "PoolCreated".into(),
            object_kind: "MachineConfigPool".into(),
            name: "x".into(),
            actor: String::new(),
            reason: String::new(),
            detail: String::new(),
            body: b"{}".to_vec(),
        };
        assert!(matches!(
            Event::decode(&ev.encode()),
            Err(DecodeError::TooNew { seq: 7, .. })
        ));
    }
}
