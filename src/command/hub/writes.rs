//! The write entry points of the hub: create, batch, update (one or many, each judged per
//! object), delete with its propagation to dependents, and notes. Each prepares its changes
//! against the log's head and hands them to the one commit ([`Hub::commit`]).

use super::{Change, Hub, Prepared};
use crate::command::classify::{classify, deletion_type, is_rendered, update_type};
use crate::command::object::{conflict, merge_scope, remove_owner_reference, same_but_rv};
use crate::command::{
    check_shape, normalize_with, object_key, object_name, Actor, CommandError, Mutation, Preconditions, Propagation,
    Scope, Update,
};
use crate::event::EventType;
use crate::model::{self, Kind};
use crate::validation::{FieldError, Invalid};
use serde_json::{json, Value};

impl Hub {
    /// Creates an object. Status of a pool is ignored on create (controllers own it).
    pub async fn create(&self, kind: Kind, object: Value, actor: &Actor) -> Result<Value, CommandError> {
        let change = self.prepare_create(kind, object)?;
        Ok(self.commit(vec![change], actor).await?.remove(0))
    }

    /// Validates a new object and turns it into its creation event (uid, creationTimestamp,
    /// generation, generateName filled in).
    fn prepare_create(&self, kind: Kind, object: Value) -> Result<Change, CommandError> {
        check_shape(kind, &object)?;
        let mut object = object;
        let generate = object["metadata"]["generateName"].as_str().unwrap_or("").to_string();
        if object_name(&object).is_empty() && !generate.is_empty() {
            // Kubernetes' generateName: the prefix plus five random characters.
            let suffix: String = uuid::Uuid::now_v7()
                .simple()
                .to_string()
                .chars()
                .rev()
                .take(5)
                .collect();
            object["metadata"]["name"] = json!(format!("{generate}{suffix}"));
        }
        let max_file_bytes = self.limits().object_contents();
        let mut object = normalize_with(kind, object, self.group(), max_file_bytes)?;
        let name = object_key(kind, &object);
        if object_name(&object).is_empty() {
            return Err(Invalid {
                kind: kind.to_string(),
                name,
                causes: vec![FieldError::new("metadata.name", "Required value: name is required")],
            }
            .into());
        }
        let meta = &mut object["metadata"];
        meta["uid"] = json!(uuid::Uuid::now_v7().to_string());
        meta["creationTimestamp"] = serde_json::to_value(model::now()).expect("time serializes");
        if let Some(m) = meta.as_object_mut() {
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
        }
        if kind.has_generation() {
            meta["generation"] = json!(1);
        }
        if kind.is_generic() && kind.has_status() {
            // Status is the controllers' (the status subresource), as on Kubernetes.
            if let Some(o) = object.as_object_mut() {
                o.remove("status");
            }
        }
        if kind == Kind::MachineConfigPool {
            object["status"] = json!({});
            object = normalize_with(kind, object, self.group(), max_file_bytes)?;
        }
        let event_type = match kind {
            Kind::MachineConfig if is_rendered(&object) => EventType::RenderedConfigGenerated,
            Kind::MachineConfig => EventType::MachineConfigCreated,
            Kind::MachineConfigPool => EventType::PoolCreated,
            Kind::Node => EventType::NodeRegistered,
            Kind::MachineConfiguration => EventType::MachineConfigurationCreated,
            _ => EventType::ObjectCreated,
        };
        Ok(Change {
            kind,
            name,
            event_type,
            object,
            expected_rv: Some(0),
            detail: String::new(),
        })
    }

    /// Applies several writes as one atomic batch (all appended, or none): a rollback's
    /// restore of many MachineConfigs is one step of the history. Each [`Mutation`] is
    /// validated as its single-object form is; `detail` is recorded on every event.
    ///
    /// Errors: the first mutation's error (NotFound, AlreadyExists, Conflict, Invalid); nothing
    /// is appended then.
    pub async fn batch(
        &self,
        mutations: Vec<Mutation>,
        detail: &str,
        actor: &Actor,
    ) -> Result<Vec<Value>, CommandError> {
        // Replaces and deletes are based on the newest versions; a concurrent write makes the
        // whole batch retry on the newer ones.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.batch_once(mutations.clone(), detail, actor).await {
                Err(CommandError::Conflict { .. }) if attempts < 5 => continue,
                other => return other,
            }
        }
    }

    async fn batch_once(
        &self,
        mutations: Vec<Mutation>,
        detail: &str,
        actor: &Actor,
    ) -> Result<Vec<Value>, CommandError> {
        let mut judged = 0;
        match self.prepare_batch(mutations, detail, &mut judged) {
            Ok(changes) if !changes.is_empty() => self.commit(changes, actor).await,
            // Refused, or nothing to change: answered once what it was judged against is
            // readable.
            answer => {
                self.readable(judged).await?;
                answer.map(|_| Vec::new())
            }
        }
    }

    /// The changes of a batch; `judged` is raised to the newest unreadable version read.
    fn prepare_batch(
        &self,
        mutations: Vec<Mutation>,
        detail: &str,
        judged: &mut u64,
    ) -> Result<Vec<Change>, CommandError> {
        let mut changes = Vec::with_capacity(mutations.len());
        for m in mutations {
            if let Mutation::Replace { kind, name, .. } | Mutation::Delete { kind, name } = &m {
                *judged = (*judged).max(self.unreadable_seq(*kind, name));
            }
            let mut change = match m {
                Mutation::Create { kind, object } => self.prepare_create(kind, object)?,
                Mutation::Replace { kind, name, object } => {
                    let (current, rv) = self.current(kind, &name)?;
                    let new = merge_scope(
                        kind,
                        &current,
                        object,
                        Scope::Main,
                        self.group(),
                        self.limits().object_contents(),
                    )?;
                    if same_but_rv(&new, &current) {
                        continue;
                    }
                    let (event_type, detail) = classify(kind, &current, &new, Scope::Main, &self.keys);
                    Change {
                        kind,
                        name,
                        event_type,
                        object: new,
                        expected_rv: Some(rv),
                        detail,
                    }
                }
                Mutation::Delete { kind, name } => {
                    let (current, rv) = self.current(kind, &name)?;
                    Change {
                        kind,
                        name,
                        event_type: deletion_type(kind),
                        object: current,
                        expected_rv: Some(rv),
                        detail: String::new(),
                    }
                }
            };
            if !detail.is_empty() {
                change.detail = if change.detail.is_empty() {
                    detail.to_string()
                } else {
                    format!("{detail}; {}", change.detail)
                };
            }
            changes.push(change);
        }
        Ok(changes)
    }

    /// Updates an object with `f(current) -> new`, within `scope`. `precondition` is the
    /// resourceVersion the caller based its change on (a mismatch is a Conflict); without one,
    /// a concurrent change makes the update retry on the newer object (as Kubernetes' patch).
    /// An update that changes nothing appends nothing and returns the stored object. Every
    /// answer is readable when it is given: a refusal or a no-op judged against a version not
    /// yet flushed waits for it ([`Hub::readable`]), so the GET that follows returns that
    /// version or a newer one.
    pub async fn update<F>(
        &self,
        kind: Kind,
        name: &str,
        scope: Scope,
        precondition: Option<u64>,
        actor: &Actor,
        f: F,
    ) -> Result<Value, CommandError>
    where
        F: Fn(&Value) -> Result<Value, CommandError>,
    {
        let mut attempts = 0;
        loop {
            attempts += 1;
            // A refusal or a no-op is answered once what it was judged against is readable.
            let change = match self.prepare_update(kind, name, scope, precondition, &f) {
                Ok(Prepared::Change(c)) => c,
                Ok(Prepared::Unchanged(current)) => return self.answer_for(kind, name, Ok(current)).await,
                Err(e) => return self.answer_for(kind, name, Err(e)).await,
            };
            match self.commit(vec![change], actor).await {
                Err(CommandError::Conflict { .. }) if precondition.is_none() && attempts < 5 => continue,
                other => return other.map(|mut v| v.remove(0)),
            }
        }
    }

    /// Applies many updates that are one decision (the node controller targeting N nodes, a
    /// status sweep) as one atomic append and one flush: one event per changed object, as
    /// [`Hub::update`] would append them one by one, in one batch.
    ///
    /// Each [`Update`] is judged on its own: one that fails (its object is gone, its
    /// precondition does not match, `f` refuses, the result is invalid or too large) gets its
    /// error in the returned vector, in the order given, and the others are still written; one
    /// that changes nothing appends nothing and gets the stored object. A concurrent write to
    /// one of the objects between the read and the append makes the whole batch re-read and
    /// retry (at most 5 times), as [`Hub::update`] retries. The names must be distinct.
    ///
    /// Errors (nothing appended, or, for a flush failure, appended but not yet visible): store
    /// errors, and a Conflict still standing after the retries.
    pub async fn update_many(
        &self,
        updates: &[Update<'_>],
        actor: &Actor,
    ) -> Result<Vec<Result<Value, CommandError>>, CommandError> {
        // Updates refused as too large (their size), left out of the later attempts.
        let mut dropped: Vec<Option<usize>> = updates.iter().map(|_| None).collect();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut results: Vec<Option<Result<Value, CommandError>>> = updates.iter().map(|_| None).collect();
            let mut changes = Vec::new();
            let mut owners = Vec::new();
            // The newest unreadable version an answer without an append was judged against.
            let mut judged = 0;
            for (i, u) in updates.iter().enumerate() {
                if let Some(size) = dropped[i] {
                    results[i] = Some(Err(CommandError::TooLarge {
                        kind: u.kind,
                        name: u.name.clone(),
                        size,
                    }));
                    continue;
                }
                match self.prepare_update(u.kind, &u.name, u.scope, u.precondition, &*u.f) {
                    Ok(Prepared::Change(c)) => {
                        changes.push(c);
                        owners.push(i);
                    }
                    answer => {
                        judged = judged.max(self.unreadable_seq(u.kind, &u.name));
                        results[i] = Some(answer.map(|p| match p {
                            Prepared::Unchanged(current) => current,
                            Prepared::Change(_) => unreachable!("matched above"),
                        }));
                    }
                }
            }
            if !changes.is_empty() {
                match self.commit(changes, actor).await {
                    Ok(objects) => {
                        for (i, o) in owners.into_iter().zip(objects) {
                            results[i] = Some(Ok(o));
                        }
                    }
                    Err(CommandError::TooLarge { kind, name, size }) => {
                        // That one object is refused; the others are tried again without it.
                        if let Some(i) = owners
                            .iter()
                            .copied()
                            .find(|&i| updates[i].kind == kind && updates[i].name == name)
                        {
                            dropped[i] = Some(size);
                            continue;
                        }
                        return Err(CommandError::TooLarge { kind, name, size });
                    }
                    Err(CommandError::Conflict { .. } | CommandError::NotFound { .. }) if attempts < 5 => continue,
                    Err(e) => return Err(e),
                }
            }
            self.readable(judged).await?;
            return Ok(results
                .into_iter()
                .map(|r| r.expect("every update has a result"))
                .collect());
        }
    }

    /// Reads the newest version of an object, checks `precondition`, applies `f` within
    /// `scope` and validates the result: the change to append, or the stored object when `f`
    /// changes nothing.
    fn prepare_update(
        &self,
        kind: Kind,
        name: &str,
        scope: Scope,
        precondition: Option<u64>,
        f: &dyn Fn(&Value) -> Result<Value, CommandError>,
    ) -> Result<Prepared, CommandError> {
        let (current, rv) = self.current(kind, name)?;
        if let Some(p) = precondition {
            if p != rv {
                return Err(conflict(kind, name));
            }
        }
        let proposed = f(&current)?;
        let new = merge_scope(
            kind,
            &current,
            proposed,
            scope,
            self.group(),
            self.limits().object_contents(),
        )?;
        if same_but_rv(&new, &current) {
            return Ok(Prepared::Unchanged(current));
        }
        let (event_type, detail) = classify(kind, &current, &new, scope, &self.keys);
        Ok(Prepared::Change(Change {
            kind,
            name: name.to_string(),
            event_type,
            object: new,
            expected_rv: Some(rv),
            detail,
        }))
    }

    /// Deletes an object and handles its dependents (objects whose `ownerReferences` name its
    /// uid, such as a pool's rendered configs) as Kubernetes' garbage collector does, in the
    /// same atomic batch: [`Propagation::Background`] and [`Propagation::Foreground`] delete
    /// them (never a Node: `controller/gc.rs`), [`Propagation::Orphan`] keeps them and removes
    /// the reference. Returns the object as it was.
    ///
    /// Errors: NotFound; Conflict when `precondition` (a resourceVersion) does not match.
    pub async fn delete(
        &self,
        kind: Kind,
        name: &str,
        precondition: Option<u64>,
        propagation: Propagation,
        actor: &Actor,
    ) -> Result<Value, CommandError> {
        let preconditions = Preconditions::resource_version(precondition);
        self.delete_if(kind, name, &preconditions, propagation, actor).await
    }

    /// [`Hub::delete`] under a DeleteOptions' `preconditions` (uid and resourceVersion), judged
    /// against the log's head as the delete is.
    ///
    /// Errors: NotFound; Conflict worded as kube-apiserver's when a precondition fails.
    pub async fn delete_if(
        &self,
        kind: Kind,
        name: &str,
        preconditions: &Preconditions,
        propagation: Propagation,
        actor: &Actor,
    ) -> Result<Value, CommandError> {
        // Without a precondition a concurrent write (a controller touching the object or a
        // dependent) makes the delete retry on the newer versions, as Kubernetes' delete does.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.delete_once(kind, name, preconditions, propagation, actor).await {
                Err(CommandError::Conflict { .. }) if preconditions.is_empty() && attempts < 5 => continue,
                other => return other,
            }
        }
    }

    async fn delete_once(
        &self,
        kind: Kind,
        name: &str,
        preconditions: &Preconditions,
        propagation: Propagation,
        actor: &Actor,
    ) -> Result<Value, CommandError> {
        let (current, rv) = match self.current(kind, name) {
            Ok(found) => found,
            Err(e) => return self.answer_for(kind, name, Err(e)).await,
        };
        let uid = current["metadata"]["uid"].as_str().unwrap_or("");
        if let Some(message) = preconditions.failure(uid, &rv.to_string()) {
            let refused = CommandError::Conflict {
                kind,
                name: name.to_string(),
                message,
            };
            return self.answer_for(kind, name, Err(refused)).await;
        }
        let owner = Change {
            kind,
            name: name.to_string(),
            event_type: deletion_type(kind),
            object: current.clone(),
            expected_rv: Some(rv),
            detail: String::new(),
        };
        let uid = current["metadata"]["uid"].as_str().unwrap_or("");
        let what = format!("{kind} {name:?}");
        let mut dependents = Vec::new();
        // Collected first: the read guard must be gone before `current` locks again.
        let found = self.state().dependents_of(uid);
        for (dkind, dname) in found {
            // A Node is never deleted with an owner (nor collected: `controller/gc.rs` says
            // why); Orphan still drops the reference.
            if dkind == Kind::Node && propagation != Propagation::Orphan {
                continue;
            }
            let Ok((object, drv)) = self.current(dkind, &dname) else {
                continue;
            };
            dependents.push(match propagation {
                Propagation::Background | Propagation::Foreground => Change {
                    kind: dkind,
                    name: dname,
                    event_type: deletion_type(dkind),
                    object,
                    expected_rv: Some(drv),
                    detail: format!("deleted with its owner {what} (propagationPolicy {propagation})"),
                },
                Propagation::Orphan => {
                    let mut object = object;
                    remove_owner_reference(&mut object, uid);
                    Change {
                        kind: dkind,
                        name: dname,
                        event_type: update_type(dkind),
                        object,
                        expected_rv: Some(drv),
                        detail: format!("ownerReference to {what} removed (propagationPolicy Orphan)"),
                    }
                }
            });
        }
        // Foreground: dependents go first, as the owner waits for them in Kubernetes.
        let changes = match propagation {
            Propagation::Foreground => dependents.into_iter().chain([owner]).collect(),
            _ => std::iter::once(owner).chain(dependents).collect(),
        };
        self.commit(changes, actor).await?;
        Ok(current)
    }

    /// Records a note about an object (an event that does not change it, such as MCO's
    /// `SelectingAll` warning): it is in the history and `/api/v1/events`, not in the object.
    ///
    /// Errors: NotFound when the object does not exist; store errors.
    pub async fn note(
        &self,
        kind: Kind,
        name: &str,
        event_type: EventType,
        detail: &str,
        actor: &Actor,
    ) -> Result<(), CommandError> {
        debug_assert!(event_type.is_note());
        let (object, _) = match self.current(kind, name) {
            Ok(found) => found,
            Err(e) => return self.answer_for(kind, name, Err(e)).await,
        };
        let change = Change {
            kind,
            name: name.to_string(),
            event_type,
            object,
            expected_rv: None,
            detail: detail.to_string(),
        };
        self.commit(vec![change], actor).await.map(drop)
    }
}
