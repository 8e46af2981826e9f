//! The hub: the store, the projection and the fan-out, and the commit protocol every write goes
//! through (see the module head of [`crate::command`]).

mod tokens;
mod writes;

use super::fanout::PinnedSender;
use super::object::{conflict, set_resource_version};
use super::snapshotter::Snapshotter;
use super::{
    Actor, CommandError, ObjectSubscription, Published, PublishedEvent, StoreFault, MAX_OBJECT_BYTES, PINNED_BUFFER,
};
use crate::event::{Event, EventType, SCHEMA_VERSION};
use crate::model::{Keys, Kind};
use crate::state::State;
use crate::store::{Store, StoreError};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{broadcast, watch};

/// What [`Hub::prepare_update`] found.
enum Prepared {
    /// The update changes nothing: the stored object.
    Unchanged(Value),
    Change(Change),
}

/// One object change ready to become an event.
struct Change {
    kind: Kind,
    name: String,
    event_type: EventType,
    object: Value,
    /// `Some(0)`: the object must not exist; `Some(rv)`: it must be at rv; `None`: no check.
    expected_rv: Option<u64>,
    detail: String,
}

/// Writes appended to the log but not yet durable, hence not yet visible to readers.
///
/// Writers check their expected resourceVersions against this overlay first (it is the head of
/// the log), readers never see it: [`Hub::state`] is the projection as of the last durable,
/// published event.
#[derive(Default)]
struct Pending {
    /// Appended events in seq order, waiting for their flush.
    queue: VecDeque<Arc<Event>>,
    /// The newest pending version of each object: its seq and the event whose body is the
    /// object (`None`: deleted). The event is shared with `queue`; a writer that reads the
    /// object parses the body.
    head: HashMap<(Kind, String), PendingHead>,
}

/// An object's newest pending version: its seq and the event carrying it (`None`: deleted).
type PendingHead = (u64, Option<Arc<Event>>);

/// What [`Hub::judge_and_append`] did with a batch it admitted.
enum Judged {
    /// Appended (not yet durable): the objects as stored.
    Appended(Vec<Value>),
    /// A dry run: the objects as they would be stored, and the newest pending version judged.
    DryRun { objects: Vec<Value>, judged: u64 },
}

/// A batch [`Hub::judge_and_append`] refused: the error, and the newest pending (not yet
/// readable) version it was judged against (0: none), which the answer waits for.
struct Refused {
    error: CommandError,
    judged: u64,
}

/// The control plane's shared core: store + projection + fan-out.
///
/// A write is checked and appended under the `pending` lock (so appends are serialised and
/// their expected resourceVersions are judged against the log's head), flushed outside it (so
/// concurrent writers share one fsync), and only then folded into the readable projection and
/// published, in seq order, by whichever writer's flush covered it. Readers therefore never see
/// an object or a list resourceVersion that a crash could still take back.
pub struct Hub {
    store: Store,
    /// The projection readers see, replaced whole by each publish ([`Hub::state`]). The lock
    /// is held only to clone or swap the `Arc`, never while reading or folding.
    state: RwLock<Arc<State>>,
    pending: Mutex<Pending>,
    /// Serialises publishing so the projection and the watchers advance in seq order.
    publish_lock: Mutex<()>,
    events_tx: broadcast::Sender<Published>,
    changed_tx: watch::Sender<u64>,
    /// Bumped (to the seq) when a published batch revoked a token ([`Hub::revocations`]).
    revoked_tx: watch::Sender<u64>,
    keys: Keys,
    /// This server's metrics (appends and flushes are recorded here).
    metrics: Arc<crate::metrics::Metrics>,
    /// The last append or flush failure (a full disk, an I/O error), until a write succeeds
    /// again: `/readyz` reports it.
    store_fault: Mutex<Option<StoreFault>>,
    /// The store's directory and the free bytes its filesystem must keep ([`Hub::set_space_reserve`]).
    space_reserve: Mutex<Option<(std::path::PathBuf, u64)>>,
    /// The input limits admission and the render controller apply ([`Hub::set_limits`]).
    limits: RwLock<crate::limits::Limits>,
    /// The seq of the newest published event that changed an object of each kind
    /// ([`Hub::kind_changed_at`]), updated by the publisher before it swaps the projection
    /// in; a kind absent here has not changed since the hub opened at `opened_at`.
    kind_changed: Mutex<HashMap<Kind, u64>>,
    opened_at: u64,
    /// Receivers of one object's events ([`Hub::subscribe_object`]), by object kind and name:
    /// a watch pinned to a name (every node daemon's) is sent that object's events only,
    /// instead of every event through [`Hub::subscribe`].
    pinned: Mutex<HashMap<(String, String), Vec<PinnedSender>>>,
    next_pin: std::sync::atomic::AtomicU64,
    /// Writes the projection's snapshots off the write path.
    snapshotter: Snapshotter,
}

impl Hub {
    /// Opens the hub over `store`, rebuilding the projection (newest snapshot + replay).
    pub fn open(store: Store, group: &str) -> Result<Arc<Hub>, StoreError> {
        let mut state = store.load_state()?;
        state.keep_encoded();
        state.keep_index(&Keys::new(group));
        let seq = state.seq;
        let metrics = Arc::new(crate::metrics::Metrics::new());
        store.record_fsyncs(metrics.fsync_seconds.clone());
        let (events_tx, _) = broadcast::channel(4096);
        let (changed_tx, _) = watch::channel(seq);
        let (revoked_tx, _) = watch::channel(seq);
        Ok(Arc::new(Hub {
            state: RwLock::new(Arc::new(state)),
            pending: Mutex::new(Pending::default()),
            publish_lock: Mutex::new(()),
            events_tx,
            changed_tx,
            revoked_tx,
            keys: Keys::new(group),
            metrics,
            store_fault: Mutex::new(None),
            space_reserve: Mutex::new(None),
            limits: RwLock::new(crate::limits::Limits::default()),
            kind_changed: Mutex::new(HashMap::new()),
            opened_at: seq,
            pinned: Mutex::new(HashMap::new()),
            next_pin: std::sync::atomic::AtomicU64::new(0),
            snapshotter: Snapshotter::start(store.clone()),
            store,
        }))
    }

    /// Refuses writes while the filesystem holding `dir` (the store's directory) has fewer than
    /// `bytes` available to this process (`statvfs` `f_bavail`), as etcd's space quota raises
    /// its NOSPACE alarm: the store itself never meets a full disk (sled 0.34 latches its first
    /// I/O error until reopened), and writes resume by themselves once space is freed.
    pub fn set_space_reserve(&self, dir: &std::path::Path, bytes: u64) {
        *self.space_reserve.lock().expect("reserve lock") = (bytes > 0).then(|| (dir.to_path_buf(), bytes));
    }

    /// `Err` with [`CommandError::InsufficientStorage`] while the store's filesystem is under
    /// its reserve; `Ok` without a reserve or when `statvfs` fails.
    pub fn check_space(&self) -> Result<(), CommandError> {
        let Some((dir, reserve)) = self.space_reserve.lock().expect("reserve lock").clone() else {
            return Ok(());
        };
        let Ok(st) = nix::sys::statvfs::statvfs(&dir) else {
            return Ok(());
        };
        // fsblkcnt_t and c_ulong are u64 on 64-bit Linux but narrower elsewhere.
        #[allow(clippy::unnecessary_cast)]
        let available = st.blocks_available() as u64 * st.fragment_size() as u64;
        if available < reserve {
            return Err(CommandError::InsufficientStorage {
                path: dir.display().to_string(),
                available,
                reserve,
            });
        }
        Ok(())
    }

    /// Why the last write could not be stored (append or flush failed), while no write has
    /// succeeded since; `None` when the store takes writes.
    pub fn store_fault(&self) -> Option<StoreFault> {
        self.store_fault.lock().expect("store fault lock").clone()
    }

    /// Records the outcome of an append or flush for [`Hub::store_fault`].
    fn note_store<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        let mut fault = self.store_fault.lock().expect("store fault lock");
        match &r {
            Ok(_) => *fault = None,
            Err(e) => {
                if fault.is_none() {
                    tracing::error!(error = %e, "the event log cannot store writes");
                }
                *fault = Some(StoreFault::Store(e.to_string()));
            }
        }
        r
    }

    /// The input limits of this server ([`crate::limits::Limits`], defaults until
    /// [`Hub::set_limits`]).
    pub fn limits(&self) -> crate::limits::Limits {
        self.limits.read().expect("limits lock").clone()
    }

    /// Replaces the input limits (the server sets them once at start).
    pub fn set_limits(&self, limits: crate::limits::Limits) {
        *self.limits.write().expect("limits lock") = limits;
    }

    /// This server's metrics registry.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The served API group (`machineconfiguration.openshift.io` by default).
    pub fn group(&self) -> &str {
        &self.keys.group
    }

    /// Annotation keys under the served group.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The projection as of the last durable event: an immutable snapshot (a clone of an
    /// `Arc`, taken under a lock held only for that clone), so a reader holding it for a long
    /// LIST or a controller pass never delays a write, and a write never delays a read.
    pub fn state(&self) -> Arc<State> {
        self.state.read().expect("state lock poisoned").clone()
    }

    /// The seq of the newest published event that changed an object of `kind` (created,
    /// updated or deleted it; notes do not count), or the seq the hub opened at when none has
    /// since (an upper bound: what happened before the open is not tracked). Read it after
    /// taking a [`Hub::state`] snapshot to judge that snapshot (it moves before the projection
    /// does): the objects of `kind` in it are those of every state from this seq to the
    /// snapshot's `seq` (the pages of a list are served from the present while this is not
    /// past the list's resourceVersion).
    pub fn kind_changed_at(&self, kind: Kind) -> u64 {
        let changed = self.kind_changed.lock().expect("kind changed lock poisoned");
        changed.get(&kind).copied().unwrap_or(self.opened_at)
    }

    /// The resourceVersion readers see: the seq of the last durable, published event. Reads of
    /// the log (history, watches) must not go past it.
    pub fn published_seq(&self) -> u64 {
        *self.changed_tx.borrow()
    }

    /// Live events, published in seq order after they are durable. A receiver that lags fills
    /// the gap from the store, up to [`Hub::published_seq`].
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.events_tx.subscribe()
    }

    /// The published events of one object (`kind` as [`Kind::as_str`], and name), in seq
    /// order, from now on: what a watch pinned to a name needs, without receiving (and
    /// skipping) every other object's events as a [`Hub::subscribe`] receiver does. Every event
    /// after the [`Hub::published_seq`] read once this returns is sent to it (publishing moves
    /// the head and sends to subscribers under one lock), unless it falls [`PINNED_BUFFER`]
    /// events behind: then it is dropped and its receiver ends (`recv` gives `None`), so the
    /// subscriber subscribes again and reads what it missed from the log. End it with
    /// [`Hub::unsubscribe_object`].
    pub fn subscribe_object(&self, kind: &str, name: &str) -> ObjectSubscription {
        let (tx, rx) = tokio::sync::mpsc::channel(PINNED_BUFFER);
        let id = self.next_pin.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut pinned = self.pinned.lock().expect("pinned lock poisoned");
        pinned
            .entry((kind.to_string(), name.to_string()))
            .or_default()
            .push(PinnedSender { id, tx });
        ObjectSubscription { rx, id }
    }

    /// Ends a [`Hub::subscribe_object`] subscription.
    pub fn unsubscribe_object(&self, kind: &str, name: &str, id: u64) {
        let mut pinned = self.pinned.lock().expect("pinned lock poisoned");
        let key = (kind.to_string(), name.to_string());
        if let Some(v) = pinned.get_mut(&key) {
            v.retain(|p| p.id != id);
            if v.is_empty() {
                pinned.remove(&key);
            }
        }
    }

    /// Wakes whenever the projection changed (value = last published seq).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed_tx.subscribe()
    }

    /// Wakes only when a published batch revoked a token (value = that batch's last seq), so
    /// that what holds a token (an open watch) re-checks it without waking on every write.
    pub fn revocations(&self) -> watch::Receiver<u64> {
        self.revoked_tx.subscribe()
    }

    /// The newest version of an object (the log's head, durable or not) and its
    /// resourceVersion; NotFound when absent. Writers base their changes on it.
    fn current(&self, kind: Kind, name: &str) -> Result<(Value, u64), CommandError> {
        let not_found = || CommandError::NotFound {
            kind,
            name: name.to_string(),
        };
        let head = self
            .pending
            .lock()
            .expect("pending lock poisoned")
            .head
            .get(&(kind, name.to_string()))
            .cloned();
        if let Some((seq, event)) = head {
            // Parsed outside the lock every append takes.
            let event = event.ok_or_else(not_found)?;
            let object = event.object().expect("a pending body is JSON this process encoded");
            return Ok((object, seq));
        }
        let st = self.state();
        let cur = st.get_json(kind, name).ok_or_else(not_found)?;
        Ok((cur, st.resource_version(kind, name).unwrap_or(0)))
    }

    /// Whether an object exists at the log's head: what a write to it is judged against
    /// ([`Hub::current`]), so a handler choosing between create and update (server-side
    /// apply) chooses as the write will be judged; answered once that version is readable
    /// ([`Hub::readable`]), so an answer built on it agrees with the GET that follows.
    ///
    /// Errors: the store's flush error.
    pub async fn exists(&self, kind: Kind, name: &str) -> Result<bool, CommandError> {
        let found = self.current(kind, name).is_ok();
        self.answer_for(kind, name, Ok(found)).await
    }

    /// The seq of the newest version of an object that readers do not see yet (its pending
    /// head, a deletion included), or 0 when readers see its newest version.
    fn unreadable_seq(&self, kind: Kind, name: &str) -> u64 {
        let pending = self.pending.lock().expect("pending lock poisoned");
        pending.head.get(&(kind, name.to_string())).map_or(0, |(seq, _)| *seq)
    }

    /// Waits until readers see every event up to `seq`: a version a write was judged against
    /// and is about to be answered from without an append of its own (a Conflict, AlreadyExists
    /// or NotFound, a no-op update, a dry run). Kubernetes answers such a write from etcd's
    /// committed head (`GuaranteedUpdate` in `k8s.io/apiserver/pkg/storage/etcd3/store.go`
    /// re-reads it on a failed compare), so the GET that follows a 409 returns the newer
    /// version; here the head can hold a write appended but not yet flushed, so the answer
    /// waits for the flush that covers it (joining the group commit under way, or running it
    /// when the writer that appended it was cancelled or its flush failed) and its publish.
    ///
    /// Errors: the store's flush error (then the version is still not readable, and the
    /// caller answers with that error instead).
    pub(super) async fn readable(&self, seq: u64) -> Result<(), CommandError> {
        if self.published_seq() >= seq {
            return Ok(());
        }
        self.flush_and_publish().await
    }

    /// `answer`, a write's answer judged against object `kind/name` without an append of its
    /// own, given once the version it was judged against is readable ([`Hub::readable`]).
    pub(super) async fn answer_for<T>(
        &self,
        kind: Kind,
        name: &str,
        answer: Result<T, CommandError>,
    ) -> Result<T, CommandError> {
        self.readable(self.unreadable_seq(kind, name)).await?;
        answer
    }

    /// Appends the changes as one atomic batch, waits for durability, then folds and
    /// publishes everything the flush covered. A batch refused (or a dry run) is answered once
    /// the versions it was judged against are readable ([`Hub::readable`]).
    ///
    /// Errors: AlreadyExists / NotFound / Conflict when an expected resourceVersion does not
    /// match the log's head (nothing is appended); a store error from the append (nothing is
    /// appended) or from the flush (the batch is in the log and becomes visible with the next
    /// successful flush, as a Kubernetes write that timed out may still happen).
    async fn commit(&self, changes: Vec<Change>, actor: &Actor) -> Result<Vec<Value>, CommandError> {
        match self.judge_and_append(changes, actor) {
            Ok(Judged::Appended(objects)) => {
                self.flush_and_publish().await?;
                Ok(objects)
            }
            Ok(Judged::DryRun { objects, judged }) => {
                self.readable(judged).await?;
                Ok(objects)
            }
            Err(Refused { error, judged }) => {
                self.readable(judged).await?;
                Err(error)
            }
        }
    }

    /// The part of [`Hub::commit`] under the `pending` lock: every change judged against the
    /// log's head, the events built, and (but for a dry run) appended.
    fn judge_and_append(&self, changes: Vec<Change>, actor: &Actor) -> Result<Judged, Refused> {
        let mut pending = self.pending.lock().expect("pending lock poisoned");
        // The newest pending (not yet readable) version judged: the answer waits for it.
        let mut judged = 0;
        let refused = |error: CommandError, judged: u64| Refused { error, judged };
        let mut versions = Vec::with_capacity(changes.len());
        {
            let st = self.state();
            for c in &changes {
                let have = match pending.head.get(&(c.kind, c.name.clone())) {
                    Some((seq, body)) => {
                        judged = judged.max(*seq);
                        body.as_ref().map(|_| *seq)
                    }
                    None => st.resource_version(c.kind, &c.name),
                };
                check_expected(c, have).map_err(|e| refused(e, judged))?;
                versions.push(have);
            }
        }
        let mut seq = self.store.last_seq();
        let time_ms = jiff::Timestamp::now().as_millisecond();
        let mut events = Vec::with_capacity(changes.len());
        let mut heads = Vec::with_capacity(changes.len());
        let mut objects = Vec::with_capacity(changes.len());
        for mut c in changes {
            seq += 1;
            let deletion = c.event_type.is_deletion();
            let note = c.event_type.is_note();
            if !deletion && !note {
                set_resource_version(&mut c.object, seq);
            }
            events.push(Event {
                schema: SCHEMA_VERSION,
                seq,
                id: *uuid::Uuid::now_v7().as_bytes(),
                time_ms,
                event_type: c.event_type.as_str().to_string(),
                object_kind: c.kind.as_str().to_string(),
                name: c.name.clone(),
                actor: actor.name.clone(),
                reason: actor.reason.clone(),
                detail: c.detail,
                body: serde_json::to_vec(&c.object).expect("JSON encodes"),
            });
            let size = events.last().map_or(0, |e| e.body.len());
            if !deletion && size > MAX_OBJECT_BYTES {
                let e = CommandError::TooLarge {
                    kind: c.kind,
                    name: c.name,
                    size,
                };
                return Err(refused(e, judged));
            }
            // One entry per event (notes set no head), so they zip with `events`.
            heads.push((!note).then_some(((c.kind, c.name), !deletion)));
            objects.push(c.object);
        }
        if actor.dry_run {
            // Admitted, not appended: answer as the API server does for dryRun=All, with
            // the version the object has (none for a create).
            for (o, have) in objects.iter_mut().zip(versions) {
                if let Some(m) = o["metadata"].as_object_mut() {
                    match have {
                        Some(rv) => m.insert("resourceVersion".into(), json!(rv.to_string())),
                        None => m.remove("resourceVersion"),
                    };
                }
            }
            return Ok(Judged::DryRun { objects, judged });
        }
        self.append_locked(&mut pending, events, heads)
            .map_err(|e| refused(e, 0))?;
        Ok(Judged::Appended(objects))
    }

    /// The tail every append shares, under the `pending` lock once the events are built and
    /// judged (a dry run never gets here): the disk reserve ([`Hub::check_space`]), the append
    /// (its failure noted for [`Hub::store_fault`]), the append metrics, and the events queued
    /// in the overlay. `heads` zips with `events`: the object key each one sets as the log's
    /// head (and whether the object is present after it), `None` for events about no object.
    ///
    /// Errors: InsufficientStorage under the reserve; the store's append error.
    fn append_locked(
        &self,
        pending: &mut Pending,
        events: Vec<Event>,
        heads: Vec<Option<((Kind, String), bool)>>,
    ) -> Result<(), CommandError> {
        if let Err(e) = self.check_space() {
            *self.store_fault.lock().expect("store fault lock") = Some(StoreFault::Reserve(e.to_string()));
            return Err(e);
        }
        let started = std::time::Instant::now();
        self.note_store(self.store.append(&events))?;
        self.metrics.append_seconds.observe(started.elapsed().as_secs_f64());
        for e in &events {
            self.metrics.appended(&e.event_type);
        }
        for (event, head) in events.into_iter().map(Arc::new).zip(heads) {
            if let Some((key, present)) = head {
                pending.head.insert(key, (event.seq, present.then(|| event.clone())));
            }
            pending.queue.push_back(event);
        }
        Ok(())
    }

    /// Waits for the store to make the appended events durable (group commit: one flush covers
    /// every writer queued meanwhile; its failure noted for [`Hub::store_fault`]), then
    /// publishes them.
    ///
    /// Errors: the store's flush error.
    async fn flush_and_publish(&self) -> Result<(), CommandError> {
        let started = std::time::Instant::now();
        self.note_store(self.store.flush().await)?;
        self.metrics.flush_seconds.observe(started.elapsed().as_secs_f64());
        self.publish_durable()?;
        Ok(())
    }

    /// Folds every queued event the store has made durable into the projection, in seq order,
    /// then drops it from the overlay and publishes it to watchers and controllers.
    fn publish_durable(&self) -> Result<(), StoreError> {
        let _turn = self.publish_lock.lock().expect("publish lock poisoned");
        let durable = self.store.flushed_seq();
        let ready: Vec<Arc<Event>> = {
            let pending = self.pending.lock().expect("pending lock poisoned");
            pending.queue.iter().take_while(|e| e.seq <= durable).cloned().collect()
        };
        let Some(last) = ready.last().map(|e| e.seq) else {
            return Ok(());
        };
        let snapshot = {
            // Fold into a copy (the maps are persistent: the copy shares every object, and a
            // fold copies only the paths it changes), then swap it in. Readers keep the
            // snapshot they hold; only this publisher (under `publish_lock`) folds.
            let mut st = State::clone(&self.state());
            let before = st.seq;
            let mut kinds = HashMap::new();
            for e in &ready {
                st.apply(e);
                if e.object_kind == Kind::Node.as_str() {
                    if let Some(n) = st.nodes.get(&e.name) {
                        // `mcd_state` holds the time of the event that set the node's state.
                        let a = crate::model::NodeAnnotations::view(n, &self.keys);
                        self.metrics.node_observed(&e.name, &a, e.time_ms as f64 / 1000.0);
                    }
                }
                if let (Some(kind), Some(t)) = (e.kind(), e.event_type()) {
                    if !t.is_note() {
                        kinds.insert(kind, e.seq);
                    }
                }
            }
            // `kind_changed` moves before the projection does, so a reader that sees the new
            // projection also sees the kinds it changed ([`Hub::kind_changed_at`]).
            self.kind_changed
                .lock()
                .expect("kind changed lock poisoned")
                .extend(kinds);
            let every = self.store.snapshot_every();
            let st = Arc::new(st);
            *self.state.write().expect("state lock poisoned") = st.clone();
            (before / every != st.seq / every).then_some(st)
        };
        {
            // The projection now holds these events: the overlay entries they set are no
            // longer needed (a later pending write to the same object keeps its own entry).
            let mut pending = self.pending.lock().expect("pending lock poisoned");
            while pending.queue.front().is_some_and(|e| e.seq <= last) {
                let e = pending.queue.pop_front().expect("front exists");
                if let Some(kind) = e.kind() {
                    let key = (kind, e.name.clone());
                    if pending.head.get(&key).is_some_and(|(seq, _)| *seq <= last) {
                        pending.head.remove(&key);
                    }
                }
            }
        }
        let revoked = ready.iter().any(|e| e.event_type == EventType::TokenRevoked.as_str());
        {
            let mut pinned = self.pinned.lock().expect("pinned lock poisoned");
            // The head moves first, under the lock the object subscribers register under: a
            // subscriber registered after this reads a head that covers every event sent
            // before its registration ([`Hub::subscribe_object`]), and an event a watcher
            // receives is never past the head it reads.
            self.changed_tx.send_modify(|v| *v = (*v).max(last));
            for e in ready {
                let e = Arc::new(PublishedEvent::new(e));
                let key = (!pinned.is_empty()).then(|| (e.object_kind.clone(), e.name.clone()));
                if let Some(subs) = key.and_then(|k| pinned.get_mut(&k)) {
                    // A subscriber that is gone, or PINNED_BUFFER events behind (a client not
                    // reading its watch), is dropped: its receiver ends and it re-subscribes,
                    // reading what it missed from the index.
                    subs.retain(|s| s.tx.try_send(e.clone()).is_ok());
                }
                let _ = self.events_tx.send(e);
            }
        }
        if revoked {
            self.revoked_tx.send_modify(|v| *v = (*v).max(last));
        }
        if let Some(s) = snapshot {
            self.snapshotter.submit(s);
        }
        Ok(())
    }
}

/// Checks a change's expected resourceVersion against what the log's head holds (`have`).
fn check_expected(c: &Change, have: Option<u64>) -> Result<(), CommandError> {
    match (c.expected_rv, have) {
        (Some(0), Some(_)) => Err(CommandError::AlreadyExists {
            kind: c.kind,
            name: c.name.clone(),
        }),
        (Some(0), None) | (None, _) => Ok(()),
        (Some(_), None) => Err(CommandError::NotFound {
            kind: c.kind,
            name: c.name.clone(),
        }),
        (Some(want), Some(have)) if want != have => Err(conflict(c.kind, &c.name)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{Scope, Update};

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    }

    fn rv_of(object: &Value) -> u64 {
        object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
    }

    /// An update setting the label `x` to `v`.
    fn label_x(v: &'static str) -> impl Fn(&Value) -> Result<Value, CommandError> {
        move |cur: &Value| {
            let mut n = cur.clone();
            n["metadata"]["labels"] = json!({"x": v});
            Ok(n)
        }
    }

    /// Readers never see what a crash could take back: while writers commit concurrently, the
    /// projection's seq and every object's resourceVersion stay at or below the flushed seq.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_never_run_ahead_of_durability() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (hub, done) = (hub.clone(), done.clone());
            tokio::task::spawn_blocking(move || {
                let mut checks = 0u64;
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let st = hub.state();
                    let newest = st
                        .nodes
                        .values()
                        .filter_map(|n| n.metadata.resource_version.clone())
                        .filter_map(|rv| rv.parse::<u64>().ok())
                        .max()
                        .unwrap_or(0);
                    let seen = st.seq.max(newest);
                    drop(st);
                    let durable = hub.store().flushed_seq();
                    assert!(
                        seen <= durable,
                        "a reader saw seq {seen} while only {durable} was durable"
                    );
                    checks += 1;
                }
                checks
            })
        };
        let mut writers = Vec::new();
        for w in 0..4 {
            let hub = hub.clone();
            writers.push(tokio::spawn(async move {
                let actor = Actor::new("test");
                for i in 0..40 {
                    hub.create(Kind::Node, node(&format!("n-{w}-{i}")), &actor)
                        .await
                        .unwrap();
                }
            }));
        }
        for w in writers {
            w.await.unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(reader.await.unwrap() > 0);
        let st = hub.state();
        assert_eq!(st.nodes.len(), 160);
        assert_eq!(st.seq, hub.store().last_seq());
        assert_eq!(hub.published_seq(), st.seq);
    }

    /// The live projection keeps each event body as the object's JSON (no second
    /// serialization per fold): the body must be, byte for byte, what the typed object folded
    /// from it serializes to: every typed kind and a generic one (generic kinds keep their JSON
    /// as is), after creates (server-set metadata put where ObjectMeta serializes it), updates
    /// that drop the resourceVersion, status writes and an `update_many`.
    #[tokio::test]
    async fn kept_json_is_the_typed_serialization_of_every_object() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        let mc = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": "99-worker-x", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
            "spec": {"config": {"ignition": {"version": "3.2.0"}, "storage": {"files": [
                {"path": "/etc/x", "contents": {"source": "data:,x"}, "mode": 420}]}},
                "kernelArguments": ["a=1"]}});
        let pool = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfigPool",
            "metadata": {"name": "worker", "uid": "client-set", "labels": {"b": "1", "a": "2"}},
            "spec": {"machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
                "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}, "maxUnavailable": "10%"}});
        let kubelet = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig",
            "metadata": {"name": "set-max-pods"},
            "spec": {"machineConfigPoolSelector": {"matchLabels": {"pools.operator.machineconfiguration.openshift.io/worker": ""}},
                "kubeletConfig": {"maxPods": 250}}});
        let cluster = json!({"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration",
            "metadata": {"name": "cluster"}, "spec": {"managementState": "Managed"}});
        hub.create(Kind::MachineConfig, mc, &actor).await.unwrap();
        hub.create(Kind::MachineConfigPool, pool, &actor).await.unwrap();
        hub.create(Kind::KubeletConfig, kubelet, &actor).await.unwrap();
        hub.create(Kind::MachineConfiguration, cluster, &actor).await.unwrap();
        hub.create(Kind::Node, node("n0"), &actor).await.unwrap();
        hub.update(Kind::Node, "n0", Scope::Main, None, &actor, |cur| {
            let mut next = cur.clone();
            next["metadata"]["annotations"] = json!({"z": "1", "a": "2"});
            next["metadata"].as_object_mut().unwrap().remove("resourceVersion");
            next["spec"]["unschedulable"] = json!(true);
            Ok(next)
        })
        .await
        .unwrap();
        hub.update(Kind::Node, "n0", Scope::Status, None, &actor, |cur| {
            let mut next = cur.clone();
            next["status"] = json!({"nodeInfo": {"bootID": "b1", "machineID": "m", "systemUUID": "s",
                "kernelVersion": "k", "osImage": "o", "containerRuntimeVersion": "c", "kubeletVersion": "v",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}});
            Ok(next)
        })
        .await
        .unwrap();
        hub.update(Kind::MachineConfigPool, "worker", Scope::Status, None, &actor, |cur| {
            let mut next = cur.clone();
            next["status"] = json!({"machineCount": 1, "conditions": [{"type": "Updated", "status": "True"}]});
            Ok(next)
        })
        .await
        .unwrap();
        hub.update(Kind::MachineConfig, "99-worker-x", Scope::Main, None, &actor, |cur| {
            let mut next = cur.clone();
            next["spec"]["kernelArguments"] = json!(["b=2"]);
            Ok(next)
        })
        .await
        .unwrap();
        let results = hub
            .update_many(
                &[Update {
                    kind: Kind::Node,
                    name: "n0".into(),
                    scope: Scope::Main,
                    precondition: None,
                    f: Box::new(|cur| {
                        let mut next = cur.clone();
                        next["metadata"]["annotations"]["z"] = json!("2");
                        Ok(next)
                    }),
                }],
                &actor,
            )
            .await
            .unwrap();
        assert!(results[0].is_ok());
        assert!(
            hub.pending.lock().unwrap().head.is_empty(),
            "nothing stays pending after a flush"
        );
        let st = hub.state();
        let mut checked = 0;
        for kind in Kind::ALL {
            for name in st.names_from(kind, "").map(str::to_string).collect::<Vec<_>>() {
                let mut kept = Vec::new();
                assert!(st.write_json(kind, &name, &mut kept));
                let typed = serde_json::to_vec(&st.get_json(kind, &name).unwrap()).unwrap();
                assert_eq!(
                    String::from_utf8(kept).unwrap(),
                    String::from_utf8(typed).unwrap(),
                    "{kind}/{name}"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 5);
        let n0 = st.get_json(Kind::Node, "n0").unwrap();
        assert_eq!(n0["metadata"]["annotations"], json!({"a": "2", "z": "2"}));
        assert_eq!(n0["metadata"]["resourceVersion"], json!(st.seq.to_string()));
    }

    /// A writer that reads an object whose newest version is still pending (appended, not yet
    /// flushed) gets it from the pending event's body, with its resourceVersion; a pending
    /// deletion reads as NotFound.
    #[tokio::test]
    async fn the_pending_head_reads_as_the_event_body() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        hub.create(Kind::Node, node("n0"), &actor).await.unwrap();
        let mut body = hub.state().get_json(Kind::Node, "n0").unwrap();
        body["metadata"]["labels"] = json!({"pending": "yes"});
        body["metadata"]["resourceVersion"] = json!("7");
        let event = Arc::new(Event::for_test(7, EventType::NodeUpdated, "Node", "n0", &body));
        hub.pending
            .lock()
            .unwrap()
            .head
            .insert((Kind::Node, "n0".into()), (7, Some(event)));
        assert_eq!(hub.current(Kind::Node, "n0").unwrap(), (body, 7));
        hub.pending
            .lock()
            .unwrap()
            .head
            .insert((Kind::Node, "n0".into()), (8, None));
        assert!(matches!(
            hub.current(Kind::Node, "n0"),
            Err(CommandError::NotFound { .. })
        ));
    }

    /// Appends `object` (version `after` + 1, or its deletion) and leaves it unflushed, as a
    /// writer cancelled during its flush (a client that hung up) leaves its write.
    fn append_unflushed(hub: &Hub, object: Value, after: u64, deletion: bool) {
        let change = Change {
            kind: Kind::Node,
            name: "n".into(),
            event_type: if deletion {
                EventType::NodeDeleted
            } else {
                EventType::NodeUpdated
            },
            object,
            expected_rv: Some(after),
            detail: String::new(),
        };
        assert!(matches!(
            hub.judge_and_append(vec![change], &Actor::new("gone")),
            Ok(Judged::Appended(_))
        ));
        assert_eq!(hub.store().last_seq(), after + 1);
    }

    /// An answer judged against a write that is appended but not readable (its writer went
    /// away before the flush) is given only once that write is readable: a writer refused with
    /// a Conflict, answered with a no-op, or told NotFound by a pending deletion runs the flush
    /// itself, so the GET that follows returns the version it was judged against; before, such
    /// a 409 repeated, unexplained, until some other write flushed the log.
    #[tokio::test]
    async fn an_answer_judged_against_an_unflushed_write_waits_until_it_is_readable() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        let created = hub.create(Kind::Node, node("n"), &actor).await.unwrap();
        let rv = rv_of(&created);
        let readable = |hub: &Hub| hub.state().resource_version(Kind::Node, "n");

        append_unflushed(&hub, label_x("a")(&created).unwrap(), rv, false);
        assert_eq!(readable(&hub), Some(rv), "not readable before a flush");
        let e = hub
            .update(Kind::Node, "n", Scope::Main, Some(rv), &actor, label_x("b"))
            .await
            .unwrap_err();
        assert!(matches!(e, CommandError::Conflict { .. }), "{e}");
        assert_eq!(
            readable(&hub),
            Some(rv + 1),
            "the 409 is explained by a readable version"
        );

        let body = hub.state().get_json(Kind::Node, "n").unwrap();
        append_unflushed(&hub, label_x("c")(&body).unwrap(), rv + 1, false);
        let same = hub
            .update(Kind::Node, "n", Scope::Main, None, &actor, label_x("c"))
            .await
            .unwrap();
        assert_eq!(same["metadata"]["resourceVersion"], json!((rv + 2).to_string()));
        assert_eq!(readable(&hub), Some(rv + 2), "a no-op's answer is readable");

        let body = hub.state().get_json(Kind::Node, "n").unwrap();
        append_unflushed(&hub, body, rv + 2, true);
        let e = hub
            .update(Kind::Node, "n", Scope::Main, None, &actor, label_x("d"))
            .await
            .unwrap_err();
        assert!(matches!(e, CommandError::NotFound { .. }), "{e}");
        assert_eq!(readable(&hub), None, "the deletion is readable");
        assert!(hub.pending.lock().unwrap().head.is_empty());
    }

    /// A delete's preconditions are judged against the log's head, as the delete is: an object
    /// deleted and created again under its name, both appended but not yet readable, is not
    /// deleted under the first object's uid (the API judged the uid against what readers saw,
    /// and then deleted the second object).
    #[tokio::test]
    async fn delete_preconditions_are_judged_against_the_log_head() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        let created = hub.create(Kind::Node, node("n"), &actor).await.unwrap();
        let rv = rv_of(&created);
        let first_uid = created["metadata"]["uid"].as_str().unwrap().to_string();
        append_unflushed(&hub, created.clone(), rv, true);
        let mut again = created.clone();
        again["metadata"]["uid"] = json!("second-uid");
        let recreate = Change {
            kind: Kind::Node,
            name: "n".into(),
            event_type: EventType::NodeRegistered,
            object: again,
            expected_rv: Some(0),
            detail: String::new(),
        };
        assert!(matches!(
            hub.judge_and_append(vec![recreate], &Actor::new("gone")),
            Ok(Judged::Appended(_))
        ));
        let readable_uid = |hub: &Hub| hub.state().get_json(Kind::Node, "n").unwrap()["metadata"]["uid"].clone();
        assert_eq!(
            readable_uid(&hub),
            json!(first_uid),
            "readers still see the first object"
        );

        let stale = crate::command::Preconditions {
            uid: Some(first_uid.clone()),
            resource_version: None,
        };
        let e = hub
            .delete_if(Kind::Node, "n", &stale, crate::command::Propagation::Background, &actor)
            .await
            .unwrap_err();
        match e {
            CommandError::Conflict { message, .. } => assert_eq!(
                message,
                format!("Precondition failed: UID in precondition: {first_uid}, UID in object meta: second-uid")
            ),
            other => panic!("expected a Conflict, got {other}"),
        }
        assert_eq!(
            readable_uid(&hub),
            json!("second-uid"),
            "the 409 is explained by a readable version"
        );

        let current = crate::command::Preconditions {
            uid: Some("second-uid".into()),
            resource_version: Some((rv + 2).to_string()),
        };
        hub.delete_if(
            Kind::Node,
            "n",
            &current,
            crate::command::Propagation::Background,
            &actor,
        )
        .await
        .unwrap();
        assert!(
            hub.state().get_json(Kind::Node, "n").is_none(),
            "deleted under its own uid"
        );
    }

    /// `update_many` is one commit (consecutive seqs, one timestamp) of the updates that change
    /// something; a missing object, a stale precondition and a no-op are judged one by one.
    #[tokio::test]
    async fn update_many_is_one_commit_judged_per_object() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        for n in ["n0", "n1", "n2", "n3"] {
            hub.create(Kind::Node, node(n), &actor).await.unwrap();
        }
        let before = hub.store().last_seq();
        let label = |name: &str, precondition: Option<u64>, value: &'static str| Update {
            kind: Kind::Node,
            name: name.to_string(),
            scope: Scope::Main,
            precondition,
            f: Box::new(move |cur| {
                let mut next = cur.clone();
                if !value.is_empty() {
                    next["metadata"]["labels"] = json!({"x": value});
                }
                Ok(next)
            }),
        };
        let updates = [
            label("n0", None, "a"),
            label("absent", None, "a"),
            label("n1", None, "b"),
            label("n2", Some(1), "c"),
            label("n3", None, ""),
        ];
        let results = hub.update_many(&updates, &actor).await.unwrap();
        assert_eq!(results[0].as_ref().unwrap()["metadata"]["labels"]["x"], "a");
        assert!(
            matches!(results[1], Err(CommandError::NotFound { .. })),
            "{:?}",
            results[1]
        );
        assert_eq!(results[2].as_ref().unwrap()["metadata"]["labels"]["x"], "b");
        assert!(
            matches!(results[3], Err(CommandError::Conflict { .. })),
            "{:?}",
            results[3]
        );
        assert_eq!(results[4].as_ref().unwrap()["metadata"]["resourceVersion"], "4");
        let events: Vec<Event> = hub.store().read_after(before).map(Result::unwrap).collect();
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["n0", "n1"]);
        assert_eq!(events[0].seq + 1, events[1].seq);
        assert_eq!(events[0].time_ms, events[1].time_ms);
        let st = hub.state();
        assert_eq!(st.seq, before + 2);
        assert_eq!(st.resource_version(Kind::Node, "n1"), Some(before + 2));
    }

    /// A writer judges its expected resourceVersion against the log's head: two updates based
    /// on the same version cannot both win, even while the first is not yet durable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_updates_from_one_version_conflict() {
        let hub = Hub::open(Store::temporary().unwrap(), crate::model::DEFAULT_GROUP).unwrap();
        let actor = Actor::new("test");
        let created = hub.create(Kind::Node, node("n"), &actor).await.unwrap();
        let rv = rv_of(&created);
        let label = label_x;
        let (a, b) = tokio::join!(
            hub.update(Kind::Node, "n", Scope::Main, Some(rv), &actor, label("a")),
            hub.update(Kind::Node, "n", Scope::Main, Some(rv), &actor, label("b")),
        );
        assert!(a.is_ok() != b.is_ok(), "exactly one wins: {a:?} / {b:?}");
        let loser = a.err().or(b.err()).unwrap();
        assert!(matches!(loser, CommandError::Conflict { .. }), "{loser}");
    }
}
