//! The read side of the event log that is not HTTP: history queries (the events a
//! [`Filter`] selects, through the per-object index or a scan), the MachineConfigs the log
//! remembers after their deletion, the rendered config as the log recorded it at a point,
//! the provenance of a render's sources, and [`Point`], a position in the log given as
//! `rv:N` or a time. The API's history, diffs and rollbacks and the CLI's `--at` read through
//! here; the shapes of history entries are [`crate::history`]'s.

use crate::command::Hub;
use crate::diff::Provenance;
use crate::event::{Event, EventType};
use crate::history::Filter;
use crate::model::{Kind, MachineConfig};
use crate::store::{Store, StoreError};

/// A time (`2026-12-01T10:00:00Z`) or a resourceVersion (`rv:42`) given as a bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Point {
    Seq(u64),
    TimeMs(i64),
}

impl Point {
    /// Parses `rv:N` (or a bare number) and RFC 3339 times.
    pub fn parse(s: &str) -> Result<Point, String> {
        if let Some(n) = s
            .strip_prefix("rv:")
            .or((!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then_some(s))
        {
            return n
                .parse()
                .map(Point::Seq)
                .map_err(|_| format!("invalid resourceVersion {n:?}"));
        }
        s.parse::<jiff::Timestamp>()
            .map(|t| Point::TimeMs(t.as_millisecond()))
            .map_err(|e| format!("{s:?} is neither rv:N nor an RFC 3339 time: {e}"))
    }

    /// The last seq at or before this point.
    pub fn seq(self, hub: &Hub) -> Result<u64, StoreError> {
        self.seq_in(hub.store())
    }

    /// [`Point::seq`] in a store (a scan for a time: run it off the async runtime).
    pub fn seq_in(self, store: &Store) -> Result<u64, StoreError> {
        match self {
            Point::Seq(n) => Ok(n),
            Point::TimeMs(t) => store.seq_at_time(t),
        }
    }
}

/// The last version of every MachineConfig the retained log has that no longer exists (their
/// deletion events carry the object as it was), for a pool's story.
pub fn deleted_machine_configs(hub: &Hub) -> Result<Vec<MachineConfig>, StoreError> {
    let kind = Kind::MachineConfig.as_str();
    // One projection for the whole answer, and only what it has folded in: an event appended
    // but not yet durable (a create in flight) is neither a present nor a deleted object yet.
    let state = hub.state();
    let mut out = Vec::new();
    for (name, seq) in hub.store().names(kind)? {
        if seq > state.seq || state.machine_configs.contains_key(&name) {
            continue;
        }
        if let Some(ev) = hub.store().event(seq)? {
            if let Ok(mc) = serde_json::from_slice(&ev.body) {
                out.push(mc);
            }
        }
    }
    Ok(out)
}

/// Runs a history query: the events `filter` selects, oldest first (newest first with
/// `filter.newest_first`), at most `limit`, and the continue token when more remain (the seq of
/// the last event answered). With a name, only that object's events are read (the per-object
/// index); otherwise the log is scanned from `filter.after` (from `filter.until` down, newest
/// first).
pub fn events(hub: &Hub, filter: &Filter, limit: usize) -> Result<(Vec<Event>, Option<u64>), StoreError> {
    let store = hub.store();
    let mut out = Vec::new();
    let push = |ev: Event, out: &mut Vec<Event>| -> bool {
        if filter.matches(&ev) {
            out.push(ev);
        }
        out.len() > limit
    };
    if let Some(about) = &filter.about {
        let mut seqs = Vec::new();
        for (kind, name) in &about.objects {
            seqs.extend(store.object_seqs(kind, name, filter.after, filter.until)?);
        }
        for (kind, prefix) in &about.prefixes {
            seqs.extend(store.prefix_seqs(kind, prefix, filter.after, filter.until)?);
        }
        seqs.sort_unstable();
        seqs.dedup();
        if filter.newest_first {
            seqs.reverse();
        }
        for seq in seqs {
            if let Some(ev) = store.event(seq)? {
                if push(ev, &mut out) {
                    break;
                }
            }
        }
    } else if let Some(name) = &filter.name {
        let kinds: Vec<&str> = match &filter.kind {
            Some(k) => vec![k.as_str()],
            None => Kind::ALL.iter().map(|k| k.as_str()).collect(),
        };
        let mut seqs = Vec::new();
        for k in kinds {
            seqs.extend(store.object_seqs(k, name, filter.after, filter.until)?);
        }
        seqs.sort_unstable();
        if filter.newest_first {
            seqs.reverse();
        }
        for seq in seqs {
            if let Some(ev) = store.event(seq)? {
                if push(ev, &mut out) {
                    break;
                }
            }
        }
    } else if filter.newest_first {
        for ev in store.read_range(filter.after, filter.until).rev() {
            if push(ev?, &mut out) {
                break;
            }
        }
    } else {
        for ev in store.read_range(filter.after, filter.until) {
            if push(ev?, &mut out) {
                break;
            }
        }
    }
    if out.len() > limit {
        out.truncate(limit);
        let last = out.last().map(|e| e.seq);
        return Ok((out, last));
    }
    Ok((out, None))
}

/// Why [`rendered_at`] found no rendered config.
#[derive(Debug, thiserror::Error)]
pub enum RenderedAtError {
    /// The log could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Neither the retained history nor the state at its cut holds a config of that name.
    #[error("rendered config {0:?} is not in the history")]
    Unknown(String),
    /// The logged body does not decode as a MachineConfig.
    #[error("{0}")]
    Decode(serde_json::Error),
}

/// A rendered config by name, as the log last recorded it at or before `until` (it may have
/// been deleted since), and the seq of the event that created it; for one whose events were
/// compacted away, the config as the state at the cut holds it and the cut's seq.
pub fn rendered_at(hub: &Hub, name: &str, until: u64) -> Result<(MachineConfig, u64), RenderedAtError> {
    let store = hub.store();
    let seqs = store.object_seqs(Kind::MachineConfig.as_str(), name, 0, until)?;
    let unknown = || RenderedAtError::Unknown(name.to_string());
    let mut created = None;
    let mut last = None;
    for seq in seqs {
        let ev = store.event(seq)?.ok_or_else(unknown)?;
        if matches!(
            ev.event_type(),
            Some(EventType::RenderedConfigGenerated | EventType::MachineConfigCreated)
        ) {
            created = Some(seq);
        }
        last = Some(ev);
    }
    let Some(ev) = last else {
        // Its events were compacted away: the state left at the cut still has it, as it was
        // there (and its sources as they were at the cut).
        let cut = store.oldest_readable();
        if cut > 0 {
            let then = store.state_at(cut)?;
            if let Some(mc) = then.machine_configs.get(name) {
                return Ok(((**mc).clone(), cut));
            }
        }
        return Err(unknown());
    };
    let mc: MachineConfig = serde_json::from_slice(&ev.body).map_err(RenderedAtError::Decode)?;
    Ok((mc, created.unwrap_or(ev.seq)))
}

/// The last change of MachineConfig `source` at or before `at`.
pub fn provenance(hub: &Hub, source: &str, at: u64) -> Option<Provenance> {
    let store = hub.store();
    let seq = *store
        .object_seqs(Kind::MachineConfig.as_str(), source, 0, at)
        .ok()?
        .last()?;
    let ev = store.event(seq).ok()??;
    Some(Provenance {
        actor: ev.actor.clone(),
        time: crate::history::event_time(&ev),
        reason: ev.reason.clone(),
        resource_version: ev.seq,
        event: ev.event_type.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::deleted_machine_configs;
    use crate::command::{Actor, Hub};
    use crate::event::{Event, EventType, SCHEMA_VERSION};
    use crate::model::Kind;
    use crate::store::Store;
    use serde_json::json;

    fn mc(name: &str) -> serde_json::Value {
        json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name, "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {}})
    }

    /// The deleted MachineConfigs are judged as of the published projection: a deleted one is
    /// listed; one whose create is appended but not yet durable (hence not published) is not.
    #[tokio::test]
    async fn deleted_machine_configs_read_only_what_is_published() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        hub.create(Kind::MachineConfig, mc("99-gone"), &actor).await.unwrap();
        hub.create(Kind::MachineConfig, mc("99-kept"), &actor).await.unwrap();
        hub.delete(Kind::MachineConfig, "99-gone", None, Default::default(), &actor)
            .await
            .unwrap();
        let names = |hub: &Hub| -> Vec<String> {
            deleted_machine_configs(hub)
                .unwrap()
                .iter()
                .map(|m| m.name().to_string())
                .collect()
        };
        assert_eq!(names(&hub), ["99-gone"]);
        // A create appended to the log past the published projection, as a writer's in flight.
        let seq = hub.store().last_seq() + 1;
        let ev = Event {
            schema: SCHEMA_VERSION,
            seq,
            id: *uuid::Uuid::now_v7().as_bytes(),
            time_ms: 0,
            event_type: EventType::MachineConfigCreated.as_str().to_string(),
            object_kind: Kind::MachineConfig.as_str().to_string(),
            name: "99-in-flight".into(),
            actor: "test".into(),
            reason: String::new(),
            detail: String::new(),
            body: serde_json::to_vec(&mc("99-in-flight")).unwrap(),
        };
        hub.store().append(std::slice::from_ref(&ev)).unwrap();
        assert!(hub.state().seq < seq);
        assert_eq!(names(&hub), ["99-gone"]);
    }
}
