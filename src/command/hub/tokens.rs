//! Token events: issuing and revoking an API token is an event like any other (the log keeps
//! its hash, never the secret), appended through the hub.

use super::Hub;
use crate::command::{Actor, CommandError};
use crate::event::{Event, EventType, SCHEMA_VERSION};

impl Hub {
    /// Records a token change ([`EventType::TokenIssued`] with the new record,
    /// [`EventType::TokenRevoked`] with the record as it was) as one event about no [`Kind`]
    /// (`object_kind` [`crate::auth::EVENT_KIND`], name the token id), appended, flushed and
    /// published through the same commit tail as every other write (the disk reserve, the
    /// store-fault bookkeeping of `/readyz`, dry run, the metrics), so that tokens are audited
    /// history too. The record never holds the secret, only its hash.
    ///
    /// Errors: `BadRequest` naming the id when issuing an id already in force or revoking one
    /// that is not; store errors.
    pub async fn record_token(
        &self,
        event_type: EventType,
        record: &crate::auth::TokenRecord,
        actor: &Actor,
    ) -> Result<(), CommandError> {
        debug_assert!(event_type.is_token());
        // A refusal or a dry run is judged against the queued (not yet readable) token events
        // too: it is answered once they are readable ([`Hub::readable`]).
        let (answer, judged) = self.judge_token(event_type, record, actor);
        match answer {
            Ok(true) => {}
            answer => {
                self.readable(judged).await?;
                return answer.map(drop);
            }
        }
        self.flush_and_publish().await?;
        Ok(())
    }

    /// The part of [`Hub::record_token`] under the `pending` lock: the change judged and, but
    /// for a dry run (`Ok(false)`), appended (`Ok(true)`); with the newest queued seq judged.
    fn judge_token(
        &self,
        event_type: EventType,
        record: &crate::auth::TokenRecord,
        actor: &Actor,
    ) -> (Result<bool, CommandError>, u64) {
        let mut pending = self.pending.lock().expect("pending lock poisoned");
        let judged = pending.queue.back().map_or(0, |e| e.seq);
        let answer = (|| {
            let exists = self.state().tokens.contains_key(&record.id)
                || pending
                    .queue
                    .iter()
                    .rev()
                    .find(|e| e.object_kind == crate::auth::EVENT_KIND && e.name == record.id)
                    .is_some_and(|e| e.event_type == EventType::TokenIssued.as_str());
            if event_type == EventType::TokenIssued {
                // One identity, one kind, judged here under the append lock so that two
                // concurrent issues cannot both pass: the tokens in force and those queued.
                let queued = pending
                    .queue
                    .iter()
                    .filter(|e| {
                        e.object_kind == crate::auth::EVENT_KIND && e.event_type == EventType::TokenIssued.as_str()
                    })
                    .filter_map(|e| serde_json::from_slice::<crate::auth::TokenRecord>(&e.body).ok());
                let state = self.state();
                let other_kind = |t: &crate::auth::TokenRecord| t.identity == record.identity && t.kind != record.kind;
                // The tokens in force are read in place (a clone of each made issuing N tokens
                // cost O(N^2) copies).
                let holder = match state.tokens.values().find(|t| other_kind(t)) {
                    Some(t) => Some((t.kind.to_string(), t.id.clone())),
                    None => queued
                        .into_iter()
                        .find(|t| other_kind(t))
                        .map(|t| (t.kind.to_string(), t.id)),
                };
                if let Some((kind, id)) = holder {
                    return Err(CommandError::BadRequest(format!(
                        "spec.identity: Invalid value: {:?}: already the identity of {kind} token {id}; give another --name",
                        record.identity
                    )));
                }
            }
            match (event_type, exists) {
                (EventType::TokenIssued, true) => {
                    return Err(CommandError::BadRequest(format!(
                        "token {:?} already exists",
                        record.id
                    )))
                }
                (EventType::TokenRevoked, false) => {
                    return Err(CommandError::BadRequest(format!("token {:?} not found", record.id)))
                }
                _ => {}
            }
            let ev = Event {
                schema: SCHEMA_VERSION,
                seq: self.store.last_seq() + 1,
                id: *uuid::Uuid::now_v7().as_bytes(),
                time_ms: jiff::Timestamp::now().as_millisecond(),
                event_type: event_type.as_str().to_string(),
                object_kind: crate::auth::EVENT_KIND.to_string(),
                name: record.id.clone(),
                actor: actor.name.clone(),
                reason: actor.reason.clone(),
                detail: format!("{} token for {}", record.kind, record.identity),
                body: serde_json::to_vec(record).expect("JSON encodes"),
            };
            if actor.dry_run {
                // Judged, not appended (dryRun=All), as every other write.
                return Ok(false);
            }
            self.append_locked(&mut pending, vec![ev], vec![None])?;
            Ok(true)
        })();
        (answer, judged)
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::TokenKind;
    use crate::command::{Actor, CommandError, Hub};
    use crate::event::EventType;
    use crate::store::Store;

    fn admin_record() -> crate::auth::TokenRecord {
        crate::api::auth::new_token(TokenKind::Admin, None, Some("ops"))
            .unwrap()
            .0
    }

    /// A token write meets the disk reserve as every other write does: refused before the
    /// store, nothing appended, and `/readyz`'s fault set.
    #[tokio::test]
    async fn a_token_write_under_the_space_reserve_is_refused_and_noted() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        hub.set_space_reserve(dir.path(), u64::MAX);
        let before = hub.store().last_seq();
        let err = hub
            .record_token(EventType::TokenIssued, &admin_record(), &Actor::new("test"))
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::InsufficientStorage { .. }), "{err}");
        assert_eq!(hub.store().last_seq(), before);
        assert!(hub.store_fault().is_some());
        assert!(hub.state().tokens.is_empty());
    }

    /// A dry-run token write is judged (a revoke of an unknown token still fails) but never
    /// appended.
    #[tokio::test]
    async fn a_dry_run_token_write_is_judged_and_not_appended() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let mut actor = Actor::new("test");
        actor.dry_run = true;
        let record = admin_record();
        hub.record_token(EventType::TokenIssued, &record, &actor).await.unwrap();
        assert_eq!(hub.store().last_seq(), 0);
        assert!(hub.state().tokens.is_empty());
        let err = hub
            .record_token(EventType::TokenRevoked, &record, &actor)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        hub.record_token(EventType::TokenIssued, &record, &Actor::new("test"))
            .await
            .unwrap();
        assert_eq!(hub.state().tokens.len(), 1);
    }
}
