//! The hub: the store, the projection and the fan-out, and the commit protocol every write goes
//! through (see the module head of [`crate::command`]).

use crate::event::{Event, EventType, SCHEMA_VERSION};
use crate::model::{self, Keys, Kind, MachineConfig, MachineConfigPool, Node};
use crate::state::State;
use crate::store::{Store, StoreError};
use crate::validation::{FieldError, Invalid};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::{broadcast, watch};

/// Who is writing and why, recorded in every event (DESIGN.md section 3b), and whether the
/// write is only a dry run.
#[derive(Clone, Debug, Default)]
pub struct Actor {
    /// The authenticated user (`admin`, `system:node:worker-1`) or a controller
    /// (`controller:render`).
    pub name: String,
    /// Free-text reason given by the client (may be empty).
    pub reason: String,
    /// Kubernetes' `dryRun=All`: the write is validated and admitted (expected versions, size,
    /// dependents) and answered with the object as it would be, but nothing is appended.
    pub dry_run: bool,
}

impl Actor {
    pub fn new(name: impl Into<String>) -> Actor {
        Actor {
            name: name.into(),
            ..Default::default()
        }
    }
}

/// Which part of an object an update may change (Kubernetes' main resource vs `/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// metadata and spec; status is kept as stored.
    Main,
    /// status only; metadata and spec are kept as stored.
    Status,
}

/// Typed failures of a command, mapped one to one onto Kubernetes `Status` reasons.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{kind} {name:?} not found")]
    NotFound { kind: Kind, name: String },
    #[error("{kind} {name:?} already exists")]
    AlreadyExists { kind: Kind, name: String },
    #[error("Operation cannot be fulfilled on {kind} {name:?}: {message}")]
    Conflict { kind: Kind, name: String, message: String },
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    BadRequest(String),
    /// The object's stored JSON would exceed [`MAX_OBJECT_BYTES`].
    #[error("{kind} {name:?} is {size} bytes, the limit for a stored object is {MAX_OBJECT_BYTES} bytes")]
    TooLarge { kind: Kind, name: String, size: usize },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Refused by an admission rule about the caller (NodeRestriction, [`crate::auth`]):
    /// `message` follows `<resource> "<name>" is forbidden: ` (HTTP 403).
    #[error("{kind} {name:?} is forbidden: {message}")]
    Forbidden { kind: Kind, name: String, message: String },
    /// The event log's filesystem has less free space than the reserve ([`Hub::set_space_reserve`]):
    /// the write is refused before it reaches the store, so the store never meets a full disk.
    #[error("the event log's filesystem ({path}) has {available} bytes free, under the reserve of {reserve} bytes: writes are refused until space is freed")]
    InsufficientStorage { path: String, available: u64, reserve: u64 },
}

/// Largest stored object, in bytes of JSON: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which Kubernetes objects live under and MCO sizes its
/// rendered configs by (`MaxMachineConfigSize`, `pkg/controller/common/constants.go`).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// One write of a [`Hub::batch`].
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Create `object` (it must not exist).
    Create { kind: Kind, object: Value },
    /// Replace the main resource (metadata and spec) of `name` with `object`, based on its
    /// newest version; status is kept.
    Replace { kind: Kind, name: String, object: Value },
    /// Delete `name` (its dependents are not handled: use [`Hub::delete`] for that).
    Delete { kind: Kind, name: String },
}

/// One write of a [`Hub::update_many`]: `f(current) -> new` of one object within `scope`, as
/// [`Hub::update`] takes it.
pub struct Update<'a> {
    pub kind: Kind,
    pub name: String,
    pub scope: Scope,
    /// The resourceVersion the caller based its change on (a mismatch fails this update with
    /// Conflict); `None`: based on the newest version.
    pub precondition: Option<u64>,
    /// The change: the object as it should be, from the object as it is.
    #[allow(clippy::type_complexity)]
    pub f: Box<dyn Fn(&Value) -> Result<Value, CommandError> + Send + Sync + 'a>,
}

impl Update<'_> {
    /// The status write of a controller sweep: `object` (a typed object, serialized here) as the
    /// new status of `kind` `name`, based on the resourceVersion it carries.
    pub fn status_of<T: serde::Serialize>(
        kind: Kind,
        name: String,
        object: &T,
        resource_version: Option<&str>,
    ) -> Self {
        let obj = serde_json::to_value(object).expect("serializes");
        Update {
            kind,
            name,
            scope: Scope::Status,
            precondition: resource_version.and_then(|s| s.parse().ok()),
            f: Box::new(move |_| Ok(obj.clone())),
        }
    }
}

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

/// A published event, for watchers: shared by every receiver, so the work of turning it into
/// a watch object (decoding its body, serializing the object) is done once however many
/// watchers see it.
pub type Published = Arc<PublishedEvent>;

/// One durable event as watchers receive it ([`Hub::subscribe`]), with its watch object built
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
    store_fault: Mutex<Option<String>>,
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

/// The thread that writes snapshots ([`Store::write_snapshot`]): publishing hands it the
/// projection (an `Arc` of a persistent state, so nothing is copied) and goes on, so no write
/// waits for a snapshot's serialization, whatever the state's size. Snapshots are written in
/// the order they were taken; dropping the hub waits for the ones queued (a server that stops
/// leaves every snapshot it took).
struct Snapshotter {
    tx: Option<std::sync::mpsc::Sender<Arc<State>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Snapshotter {
    fn start(store: Store) -> Snapshotter {
        let (tx, rx) = std::sync::mpsc::channel::<Arc<State>>();
        let thread = std::thread::Builder::new()
            .name("mco-snapshot".into())
            .spawn(move || {
                for state in rx {
                    if state.seq < store.oldest_readable() {
                        // A compaction cut the log past it meanwhile (and wrote its own).
                        continue;
                    }
                    // A snapshot only bounds replay: events are already durable, so a failed
                    // one costs a longer replay, never data.
                    if let Err(e) = store.write_snapshot(&state) {
                        tracing::error!(seq = state.seq, error = %e, "snapshot not written");
                    }
                }
            })
            .expect("snapshot thread starts");
        Snapshotter {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    fn submit(&self, state: Arc<State>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(state);
        }
    }
}

impl Drop for Snapshotter {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One pinned receiver's sending half, with the id [`Hub::unsubscribe_object`] removes it by.
struct PinnedSender {
    id: u64,
    tx: tokio::sync::mpsc::Sender<Published>,
}

/// Events an object subscriber may be behind before it is dropped ([`Hub::subscribe_object`]).
pub const PINNED_BUFFER: usize = 256;

/// A subscription to one object's events ([`Hub::subscribe_object`]).
pub struct ObjectSubscription {
    /// The object's published events, in seq order.
    pub rx: tokio::sync::mpsc::Receiver<Published>,
    /// What [`Hub::unsubscribe_object`] takes.
    pub id: u64,
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
    pub fn store_fault(&self) -> Option<String> {
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
                *fault = Some(e.to_string());
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
        let name = object_name(&object);
        if name.is_empty() {
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
        if kind != Kind::Node {
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
        let mut changes = Vec::with_capacity(mutations.len());
        for m in mutations {
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
        if changes.is_empty() {
            return Ok(Vec::new());
        }
        self.commit(changes, actor).await
    }

    /// Updates an object with `f(current) -> new`, within `scope`. `precondition` is the
    /// resourceVersion the caller based its change on (a mismatch is a Conflict); without one,
    /// a concurrent change makes the update retry on the newer object (as Kubernetes' patch).
    /// An update that changes nothing appends nothing and returns the stored object.
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
            let change = match self.prepare_update(kind, name, scope, precondition, &f)? {
                Prepared::Unchanged(current) => return Ok(current),
                Prepared::Change(c) => c,
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
                    Ok(Prepared::Unchanged(current)) => results[i] = Some(Ok(current)),
                    Ok(Prepared::Change(c)) => {
                        changes.push(c);
                        owners.push(i);
                    }
                    Err(e) => results[i] = Some(Err(e)),
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
        // Without a precondition a concurrent write (a controller touching the object or a
        // dependent) makes the delete retry on the newer versions, as Kubernetes' delete does.
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.delete_once(kind, name, precondition, propagation, actor).await {
                Err(CommandError::Conflict { .. }) if precondition.is_none() && attempts < 5 => continue,
                other => return other,
            }
        }
    }

    async fn delete_once(
        &self,
        kind: Kind,
        name: &str,
        precondition: Option<u64>,
        propagation: Propagation,
        actor: &Actor,
    ) -> Result<Value, CommandError> {
        let (current, rv) = self.current(kind, name)?;
        if precondition.is_some_and(|p| p != rv) {
            return Err(conflict(kind, name));
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
        let (object, _) = self.current(kind, name)?;
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

    /// Records a token change ([`EventType::TokenIssued`] with the new record,
    /// [`EventType::TokenRevoked`] with the record as it was) as one event about no [`Kind`]
    /// (`object_kind` [`crate::auth::EVENT_KIND`], name the token id), appended, flushed and
    /// published like every other write, so that tokens are audited history too. The record
    /// never holds the secret, only its hash.
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
        {
            let mut pending = self.pending.lock().expect("pending lock poisoned");
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
            self.store.append(std::slice::from_ref(&ev))?;
            self.metrics.appended(&ev.event_type);
            pending.queue.push_back(Arc::new(ev));
        }
        self.store.flush().await?;
        self.publish_durable()?;
        Ok(())
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

    /// Appends the changes as one atomic batch, waits for durability, then folds and
    /// publishes everything the flush covered.
    ///
    /// Errors: AlreadyExists / NotFound / Conflict when an expected resourceVersion does not
    /// match the log's head (nothing is appended); a store error from the append (nothing is
    /// appended) or from the flush (the batch is in the log and becomes visible with the next
    /// successful flush, as a Kubernetes write that timed out may still happen).
    async fn commit(&self, changes: Vec<Change>, actor: &Actor) -> Result<Vec<Value>, CommandError> {
        let objects = {
            let mut pending = self.pending.lock().expect("pending lock poisoned");
            let mut versions = Vec::with_capacity(changes.len());
            {
                let st = self.state();
                for c in &changes {
                    let have = match pending.head.get(&(c.kind, c.name.clone())) {
                        Some((seq, body)) => body.as_ref().map(|_| *seq),
                        None => st.resource_version(c.kind, &c.name),
                    };
                    check_expected(c, have)?;
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
                    return Err(CommandError::TooLarge {
                        kind: c.kind,
                        name: c.name,
                        size,
                    });
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
                return Ok(objects);
            }
            if let Err(e) = self.check_space() {
                *self.store_fault.lock().expect("store fault lock") = Some(e.to_string());
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
            objects
        };
        let started = std::time::Instant::now();
        self.note_store(self.store.flush().await)?;
        self.metrics.flush_seconds.observe(started.elapsed().as_secs_f64());
        self.publish_durable()?;
        Ok(objects)
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

/// Sets `metadata.resourceVersion` to `seq` and puts `metadata`'s keys in the order
/// ObjectMeta serializes its fields (alphabetical), so that the event body is the JSON the
/// stored object serializes to, byte for byte: the live projection keeps the body as the
/// object's JSON ([`State::apply`]). The write path adds server-set fields (uid,
/// creationTimestamp, generation, resourceVersion) and removes others after the typed
/// round trip, which moves keys.
fn set_resource_version(object: &mut Value, seq: u64) {
    object["metadata"]["resourceVersion"] = Value::String(seq.to_string());
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.sort_keys();
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

/// What happens to an object's dependents when it is deleted (Kubernetes DeleteOptions
/// `propagationPolicy`; the default for mco's kinds is Background, as for custom resources).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the dependents too (after the owner).
    #[default]
    Background,
    /// Delete the dependents too, before the owner.
    Foreground,
    /// Keep the dependents and remove their reference to the owner.
    Orphan,
}

impl Propagation {
    /// Parses a `propagationPolicy` value; `None` for anything else.
    pub fn parse(s: &str) -> Option<Propagation> {
        match s {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

impl std::fmt::Display for Propagation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        })
    }
}

fn deletion_type(kind: Kind) -> EventType {
    match kind {
        Kind::MachineConfig => EventType::MachineConfigDeleted,
        Kind::MachineConfigPool => EventType::PoolDeleted,
        Kind::Node => EventType::NodeDeleted,
        Kind::MachineConfiguration => EventType::MachineConfigurationDeleted,
        _ => EventType::ObjectDeleted,
    }
}

fn update_type(kind: Kind) -> EventType {
    match kind {
        Kind::MachineConfig => EventType::MachineConfigUpdated,
        Kind::MachineConfigPool => EventType::PoolUpdated,
        Kind::Node => EventType::NodeUpdated,
        Kind::MachineConfiguration => EventType::MachineConfigurationUpdated,
        _ => EventType::ObjectUpdated,
    }
}

/// Removes every ownerReference with `uid` (and the list when it ends up empty).
fn remove_owner_reference(object: &mut Value, uid: &str) {
    let Some(meta) = object["metadata"].as_object_mut() else {
        return;
    };
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain(|r| r["uid"].as_str() != Some(uid));
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

fn conflict(kind: Kind, name: &str) -> CommandError {
    CommandError::Conflict {
        kind,
        name: name.to_string(),
        message: "the object has been modified; please apply your changes to the latest version and try again".into(),
    }
}

/// `metadata.name` of a JSON object, `""` when absent.
pub fn object_name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// Whether two objects are equal but for `metadata.resourceVersion` (compared in place: a
/// batch of 10,000 updates compares 10,000 pairs).
fn same_but_rv(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let meta_eq = |x: &Value, y: &Value| match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => {
            let rest = |m: &'_ serde_json::Map<String, Value>| m.keys().filter(|k| *k != "resourceVersion").count();
            rest(x) == rest(y)
                && x.iter()
                    .filter(|(k, _)| *k != "resourceVersion")
                    .all(|(k, v)| match y.get(k) {
                        Some(w) if k == "managedFields" => same_managed_fields(v, w),
                        Some(w) => v == w,
                        None => false,
                    })
        }
        _ => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match b.get(k) {
            Some(w) if k == "metadata" => meta_eq(v, w),
            Some(w) => v == w,
            None => false,
        })
}

/// Whether two `managedFields` lists differ at most in their entries' `time`: a write that
/// only moves a timestamp (the same server-side apply again) is no write, as Kubernetes'
/// `IgnoreManagedFieldsTimestampsTransformer` (`staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/fieldmanager`, 1.27+) keeps the old timestamps when nothing else changed.
fn same_managed_fields(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return a == b;
    };
    let untimed = |e: &Value| match e.as_object() {
        Some(m) => m
            .iter()
            .filter(|(k, _)| *k != "time")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => serde_json::Map::new(),
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| untimed(x) == untimed(y))
}

/// A rendered config: a MachineConfig owned by a pool and stamped by the controller.
fn is_rendered(v: &Value) -> bool {
    let owned_by_pool = v["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "MachineConfigPool"));
    owned_by_pool
        && v["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("rendered-"))
}

/// Checks the shape every write relies on before it touches the object: a JSON object whose
/// `metadata`, when present and not null, is an object too. Everything deeper is judged by the
/// typed decode ([`normalize`]), which names the field.
///
/// Errors: BadRequest with kube-apiserver's decoding prefix and Go's message, e.g.
/// `MachineConfig in version "v1" cannot be handled as a MachineConfig: json: cannot unmarshal
/// array into Go value of type map[string]interface {}`, or `... into Go struct field
/// MachineConfig.metadata of type v1.ObjectMeta`.
pub fn check_shape(kind: Kind, object: &Value) -> Result<(), CommandError> {
    let prefix = || {
        format!(
            "{k} in version \"{v}\" cannot be handled as a {k}",
            k = kind.as_str(),
            v = kind.info().version
        )
    };
    if !object.is_object() {
        return Err(CommandError::BadRequest(format!(
            "{}: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            prefix(),
            crate::validation::json_type(object)
        )));
    }
    match object.get("metadata") {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(m) => Err(CommandError::BadRequest(format!(
            "{}: json: cannot unmarshal {} into Go struct field {}.metadata of type v1.ObjectMeta",
            prefix(),
            crate::validation::json_type(m),
            kind.as_str()
        ))),
    }
}

/// Parses `object` as `kind` (type errors name the field), validates it, and re-serializes it
/// in canonical shape with `apiVersion`/`kind` filled in.
pub fn normalize(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    normalize_with(kind, object, group, crate::limits::ContentLimits::default())
}

/// [`normalize`] with the limits of a MachineConfig's files, decoded and decompressed: each
/// ([`crate::limits::Limits::max_file_bytes`]) and together
/// ([`crate::limits::Limits::max_object_contents_bytes`], or the rendered config's limit).
pub fn normalize_with(
    kind: Kind,
    object: Value,
    group: &str,
    max_file_bytes: crate::limits::ContentLimits,
) -> Result<Value, CommandError> {
    decode_checked(kind, object, group, Some(max_file_bytes))
}

/// The typed round trip of [`normalize`] without the semantic validation: type errors name the
/// field; unknown fields are dropped (compare with the input to find them).
pub fn decode(kind: Kind, object: Value, group: &str) -> Result<Value, CommandError> {
    decode_checked(kind, object, group, None)
}

/// [`decode`], then, with `check` (the file size limit), [`validate`]. The kinds with a typed
/// model (Node, MachineConfig, MachineConfigPool) are validated on the typed object the decode
/// parsed, before it is serialized: one parse per write, not a second one from the result (a
/// node patch, the fleet's commonest write, was parsed twice).
fn decode_checked(
    kind: Kind,
    object: Value,
    group: &str,
    check: Option<crate::limits::ContentLimits>,
) -> Result<Value, CommandError> {
    let name = object_name(&object);
    let invalid = |field: String, message: String| Invalid {
        kind: kind.to_string(),
        name: name.clone(),
        causes: vec![FieldError::new(field, message)],
    };
    if let Some(k) = object.get("kind").and_then(Value::as_str) {
        if !k.is_empty() && k != kind.as_str() {
            return Err(CommandError::BadRequest(format!("the body is a {k}, not a {kind}")));
        }
    }
    let mut out = match kind {
        Kind::MachineConfig => {
            let mc = parse_typed::<MachineConfig>(object).map_err(|(f, m)| invalid(f, m))?;
            if let Some(max_file_bytes) = check {
                crate::manifest::validate_machine_config_with(&mc, max_file_bytes)?;
            }
            serde_json::to_value(mc)
        }
        Kind::MachineConfigPool => {
            let pool = parse_typed::<MachineConfigPool>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                crate::manifest::validate_pool(&pool)?;
            }
            serde_json::to_value(pool)
        }
        Kind::Node => {
            let mut node = parse_typed::<Node>(object).map_err(|(f, m)| invalid(f, m))?;
            fill_node_structs(&mut node);
            if check.is_some() {
                // Kubernetes' metadata rules (MachineConfigs and pools get them from their own rules).
                crate::manifest::validate_node(&node)?;
            }
            serde_json::to_value(node)
        }
        Kind::MachineConfiguration => serde_json::to_value(
            parse_typed::<crate::disruption::MachineConfiguration>(object).map_err(|(f, m)| invalid(f, m))?,
        ),
        k => Ok(crate::generate::decode(k, object).map_err(|(f, m)| invalid(f, m))?),
    }
    .expect("model objects serialize");
    out["apiVersion"] = json!(kind.api_version(group));
    out["kind"] = json!(kind.as_str());
    if check.is_some() {
        validate(kind, &out)?;
    }
    Ok(out)
}

/// Fills in what kube-apiserver always serializes for a Node, because its Go types hold them
/// as structs, not pointers (`k8s.io/api/core/v1` `Node.Spec`, `Node.Status`,
/// `NodeStatus.DaemonEndpoints`, `NodeStatus.NodeInfo`): `spec: {}`, and a status with
/// `daemonEndpoints.kubeletEndpoint.Port` 0 and every `nodeInfo` string, empty until the node
/// reports them. Clients read `node.spec.unschedulable` and `node.status.nodeInfo` without
/// checking for absence (the Python client raises AttributeError on a missing `spec`).
fn fill_node_structs(node: &mut Node) {
    use k8s_openapi::api::core::v1::{DaemonEndpoint, NodeDaemonEndpoints};
    node.spec.get_or_insert_with(Default::default);
    let status = node.status.get_or_insert_with(Default::default);
    let endpoints = status.daemon_endpoints.get_or_insert_with(NodeDaemonEndpoints::default);
    endpoints.kubelet_endpoint.get_or_insert(DaemonEndpoint { port: 0 });
    status.node_info.get_or_insert_with(Default::default);
}

/// The semantic validation of a decoded object of a kind without a typed model in
/// [`decode_checked`] (MachineConfiguration, the generated kinds).
fn validate(kind: Kind, decoded: &Value) -> Result<(), CommandError> {
    match kind {
        // Validated on their typed objects by `decode_checked`.
        Kind::MachineConfig | Kind::MachineConfigPool | Kind::Node => {}
        Kind::MachineConfiguration => {
            crate::disruption::check_action_types(decoded)?;
            let m: crate::disruption::MachineConfiguration =
                serde_json::from_value(decoded.clone()).map_err(|e| CommandError::BadRequest(e.to_string()))?;
            crate::disruption::validate_machine_configuration(&m)?;
        }
        k => crate::generate::admit(k, decoded)?,
    }
    Ok(())
}

/// Deserializes `v` as `T`; on failure, the path of the offending field and the message.
/// The object is read directly first and only a refused one is read again through
/// `serde_path_to_error` for the path (its tracking allocates a segment per field read).
fn parse_typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, (String, String)> {
    if let Ok(t) = T::deserialize(&v) {
        return Ok(t);
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        (
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })
}

/// Builds the stored object from the current one and a proposed one, keeping what `scope`
/// does not own, server-managed metadata, and bumping `generation` when the spec changed.
fn merge_scope(
    kind: Kind,
    current: &Value,
    proposed: Value,
    scope: Scope,
    group: &str,
    max_file_bytes: crate::limits::ContentLimits,
) -> Result<Value, CommandError> {
    check_shape(kind, &proposed)?;
    let mut new = match scope {
        Scope::Main => {
            let mut p = proposed;
            if kind.has_status() {
                p["status"] = current.get("status").cloned().unwrap_or(Value::Null);
            }
            p
        }
        Scope::Status => {
            let mut c = current.clone();
            c["status"] = proposed.get("status").cloned().unwrap_or(Value::Null);
            c
        }
    };
    if new["metadata"]["name"] != current["metadata"]["name"] {
        return Err(CommandError::BadRequest(format!(
            "the name of the object ({}) does not match the name on the URL ({})",
            new["metadata"]["name"].as_str().unwrap_or(""),
            current["metadata"]["name"].as_str().unwrap_or("")
        )));
    }
    for k in ["uid", "creationTimestamp", "generation"] {
        new["metadata"][k] = current["metadata"][k].clone();
    }
    // A status write leaves the spec as stored, validated under the rules of its own write:
    // the kinds validated on their JSON (MachineConfiguration and the generated kinds) are not
    // re-validated then, as Kubernetes' status subresource ignores the spec and CRD validation
    // ratchets unchanged values, so that a rule added later cannot make a stored object's
    // controller unable to write its status.
    let ratchet = scope == Scope::Status
        && !matches!(kind, Kind::MachineConfig | Kind::MachineConfigPool | Kind::Node)
        && new.get("spec") == current.get("spec");
    let mut out = if ratchet {
        decode(kind, new, group)?
    } else {
        normalize_with(kind, new, group, max_file_bytes)?
    };
    // The spec compared with its defaults, as stored: a body that leaves a field to its
    // default changes nothing (kube-apiserver compares the decoded, defaulted objects).
    if kind != Kind::Node && out.get("spec") != current.get("spec") {
        let g = current["metadata"]["generation"].as_i64().unwrap_or(1);
        out["metadata"]["generation"] = json!(g + 1);
    }
    if kind == Kind::Node || out["metadata"]["generation"].is_null() {
        if let Some(m) = out["metadata"].as_object_mut() {
            if m.get("generation").is_some_and(Value::is_null) {
                m.remove("generation");
            }
        }
    }
    Ok(out)
}

/// Picks the event type of an update and a one-line summary of what changed.
fn classify(kind: Kind, old: &Value, new: &Value, scope: Scope, keys: &Keys) -> (EventType, String) {
    match (kind, scope) {
        (Kind::MachineConfig, _) => (EventType::MachineConfigUpdated, String::new()),
        (Kind::MachineConfiguration, Scope::Main) => (EventType::MachineConfigurationUpdated, String::new()),
        (Kind::MachineConfiguration, Scope::Status) => (
            EventType::MachineConfigurationUpdated,
            format!("status: observedGeneration {}", new["status"]["observedGeneration"]),
        ),
        (Kind::MachineConfigPool, Scope::Status) => (EventType::PoolStatusUpdated, pool_status_detail(new)),
        (Kind::MachineConfigPool, Scope::Main) => {
            if old["spec"]["configuration"] != new["spec"]["configuration"] {
                let name = new["spec"]["configuration"]["name"].as_str().unwrap_or("");
                (
                    EventType::PoolConfigurationSet,
                    format!("spec.configuration.name: {name}"),
                )
            } else {
                (EventType::PoolUpdated, String::new())
            }
        }
        (Kind::Node, Scope::Status) => {
            let boot = |v: &Value| v["status"]["nodeInfo"]["bootID"].as_str().unwrap_or("").to_string();
            let (a, b) = (boot(old), boot(new));
            let detail = if a != b {
                format!("bootID: {a:?} -> {b:?}")
            } else {
                String::new()
            };
            (EventType::NodeStatusUpdated, detail)
        }
        (Kind::Node, Scope::Main) => {
            // Each side's annotations are looked up once and compared as borrowed strings: the
            // node controller classifies one update per node it targets.
            fn annotations(v: &Value) -> Option<&serde_json::Map<String, Value>> {
                v["metadata"]["annotations"].as_object()
            }
            let (old_ann, new_ann) = (annotations(old), annotations(new));
            fn ann<'a>(m: Option<&'a serde_json::Map<String, Value>>, k: &str) -> &'a str {
                m.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("")
            }
            let mut parts = Vec::new();
            let mut changed = |key: &str, short: &str| {
                let (a, b) = (ann(old_ann, key), ann(new_ann, key));
                if a != b {
                    parts.push(format!("{short}: {a:?} -> {b:?}"));
                    true
                } else {
                    false
                }
            };
            let desired = changed(&keys.desired_config(), "desiredConfig");
            let current = changed(&keys.current_config(), "currentConfig");
            let state = changed(&keys.state(), "state");
            let reason = changed(&keys.reason(), "reason");
            let drain_req = changed(&keys.desired_drain(), "desiredDrain");
            let drain_done = changed(&keys.last_applied_drain(), "lastAppliedDrain");
            changed(&keys.post_config_action(), "postConfigAction");
            let actions = changed(crate::disruption::ACTIONS_ANNOTATION, "actions");
            let unsched = |v: &Value| v["spec"]["unschedulable"].as_bool().unwrap_or(false);
            let cordon = unsched(old) != unsched(new);
            if cordon {
                parts.push(format!("unschedulable: {} -> {}", unsched(old), unsched(new)));
            }
            let t = if desired {
                EventType::NodeDesiredConfigSet
            } else if current || state || reason {
                EventType::NodeStateChanged
            } else if drain_req {
                EventType::NodeDrainRequested
            } else if actions {
                EventType::NodeActionsChosen
            } else if drain_done && unsched(new) {
                EventType::NodeDrained
            } else if cordon && unsched(new) {
                EventType::NodeCordoned
            } else if drain_done || cordon {
                EventType::NodeUncordoned
            } else {
                EventType::NodeUpdated
            };
            (t, parts.join("; "))
        }
        (_, Scope::Status) => (EventType::ObjectStatusUpdated, crate::generate::status_detail(new)),
        (_, Scope::Main) => (EventType::ObjectUpdated, String::new()),
    }
}

fn pool_status_detail(v: &Value) -> String {
    let s = &v["status"];
    let cond = |t: &str| {
        s["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == t))
            .and_then(|c| c["status"].as_str())
            .unwrap_or("")
            .to_string()
    };
    format!(
        "machines {}/{} updated, {} ready, {} unavailable, {} degraded; Updated={} Updating={} Degraded={}",
        s["updatedMachineCount"],
        s["machineCount"],
        s["readyMachineCount"],
        s["unavailableMachineCount"],
        s["degradedMachineCount"],
        cond("Updated"),
        cond("Updating"),
        cond("Degraded")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status write does not re-validate a stored spec of a JSON-validated kind (Kubernetes'
    /// status subresource with validation ratcheting): a KubeletConfig stored when `logLevel:
    /// 11` was still admitted keeps getting its conditions; a spec write is validated.
    #[test]
    fn status_writes_ratchet_the_stored_spec() {
        let current = json!({"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "KubeletConfig",
            "metadata": {"name": "old", "generation": 1}, "spec": {"logLevel": 11}});
        let mut proposed = current.clone();
        proposed["status"] = json!({"observedGeneration": 1, "conditions": [{"type": "Accepted", "status": "False"}]});
        let out = merge_scope(
            Kind::KubeletConfig,
            &current,
            proposed.clone(),
            Scope::Status,
            crate::model::DEFAULT_GROUP,
            crate::limits::ContentLimits::default(),
        )
        .unwrap();
        assert_eq!(out["status"]["conditions"][0]["type"], "Accepted");
        let mut spec_write = proposed;
        spec_write["spec"]["logLevel"] = json!(12);
        assert!(merge_scope(
            Kind::KubeletConfig,
            &current,
            spec_write,
            Scope::Main,
            crate::model::DEFAULT_GROUP,
            crate::limits::ContentLimits::default()
        )
        .is_err());
    }

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
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
        let rv: u64 = created["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let label = |v: &'static str| {
            move |cur: &Value| {
                let mut n = cur.clone();
                n["metadata"]["labels"] = json!({"x": v});
                Ok(n)
            }
        };
        let (a, b) = tokio::join!(
            hub.update(Kind::Node, "n", Scope::Main, Some(rv), &actor, label("a")),
            hub.update(Kind::Node, "n", Scope::Main, Some(rv), &actor, label("b")),
        );
        assert!(a.is_ok() != b.is_ok(), "exactly one wins: {a:?} / {b:?}");
        let loser = a.err().or(b.err()).unwrap();
        assert!(matches!(loser, CommandError::Conflict { .. }), "{loser}");
    }
}
