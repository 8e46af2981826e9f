//! One list-then-watch loop for every watcher of the API (the daemon's node watch, `mco get
//! -w`, `mco rollout status` / `apply --wait`): [`Watcher`] lists the selected objects, watches
//! from the list's resourceVersion, resumes a cut or ended watch from the newest resourceVersion
//! it saw and lists again only when the server answers `410 Expired`.
//!
//! It is kube-runtime's `watcher` state machine (kube-rs `kube-runtime/src/watcher.rs`: `Empty`
//! → list → `InitListed` → watch → `Watching`; a cut goes back to `InitListed`, a 410 to
//! `Empty`) and client-go's reflector (`k8s.io/client-go/tools/cache/reflector.go`:
//! `ListAndWatch`, `isExpiredError`, BOOKMARKs advancing `lastSyncResourceVersion`), over
//! [`Client`] so that every watch goes through its failover. It knows nothing about what the
//! objects mean.

use super::backoff::Backoff;
use super::{Client, ClientError, Selectors, StatusError, WatchEvent};
use crate::model::Kind;
use futures_util::{Stream, StreamExt};
use serde_json::Value;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

/// What a [`Watcher`] reports, each with the resourceVersion it brings the watcher to.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A list (the first, or a re-list after `410 Expired`): every selected object as of the
    /// list's `resourceVersion`, replacing whatever was known (kube-runtime's `Restarted`,
    /// client-go's `Replace`). Empty when nothing matches.
    Listed {
        objects: Vec<Value>,
        resource_version: String,
    },
    /// An `ADDED` or `MODIFIED` watch event: the object as it is now.
    Applied { object: Value, resource_version: String },
    /// A `DELETED` watch event (the object was deleted, or stopped matching the selectors):
    /// its last state.
    Deleted { object: Value, resource_version: String },
}

/// Why [`Watcher::next`] returned no event this time (it retries on the next call).
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The list failed, the server refused the watch (other than with 410), or a watch line
    /// was undecodable.
    #[error(transparent)]
    Request(#[from] ClientError),
    /// An `ERROR` event other than 410 ended the watch (a store failure is a 500): its Status.
    #[error("the watch ended: {}", .0.message)]
    Ended(StatusError),
}

type EventStream = Pin<Box<dyn Stream<Item = Result<WatchEvent, ClientError>> + Send>>;

/// Where the watcher stands (kube-runtime's `State`).
enum State {
    /// Nothing listed, or the watch's resourceVersion expired: list next.
    Empty,
    /// Listed or cut at `rv`: open a watch from it next.
    Resume { rv: String },
    /// A watch the server accepted, delivering changes after `rv` (the newest seen).
    Watching { rv: String, stream: EventStream },
}

/// Lists, then watches, the objects of one kind that some [`Selectors`] select.
///
/// [`Watcher::next`] returns the next [`Event`], or an error it will retry after a pause:
/// - a list that failed, or a watch the server refused (other than with 410): the
///   [`WatchError::Request`];
/// - a watch cut (`ClientError::Transport` mid-stream) or ended by the server: nothing; the
///   watcher re-watches from the newest resourceVersion seen (an event's object's, or a
///   `BOOKMARK`'s), through [`Client`]'s failover, so no change is missed or repeated;
/// - `410 Expired` (the answer to opening a watch, or an `ERROR` event carrying code 410: the
///   resourceVersion was compacted away): nothing; the watcher lists again, and its next event
///   is [`Event::Listed`];
/// - any other `ERROR` event: [`WatchError::Ended`] with its Status, then a resume;
/// - an undecodable watch line: [`ClientError::Decode`], then a resume.
///
/// Each failure pauses as [`Backoff`] says (1 s, doubling up to 60 s); a watch the server
/// accepts resets the pause. A cut watch is re-opened at once unless it was opened less than
/// the current pause ago (a server that accepts and closes at once costs one request a second).
///
/// `next` is cancel-safe: dropping its future (in a `select!` against a shutdown) loses no
/// event and leaves the watcher where it was; dropping the watcher ends its watch.
pub struct Watcher {
    client: Client,
    kind: Kind,
    selectors: Selectors,
    state: State,
    /// The pause after a failure (and the least time between two watches opened after
    /// cuts); an accepted watch resets it.
    backoff: Backoff,
    /// No request before this (the pause after a failure or a quick cut).
    not_before: Option<Instant>,
    /// When the current watch was accepted.
    opened: Instant,
}

impl Watcher {
    /// A watcher of the `kind` objects `selectors` select; it lists first.
    pub fn new(client: Client, kind: Kind, selectors: Selectors) -> Watcher {
        Watcher {
            client,
            kind,
            selectors,
            state: State::Empty,
            backoff: Backoff::default(),
            not_before: None,
            opened: Instant::now(),
        }
    }

    /// A watcher of the one `kind` object named `name` (field selector `metadata.name`, as the
    /// kubelet watches its own Node).
    pub fn named(client: Client, kind: Kind, name: &str) -> Watcher {
        let selectors = Selectors {
            label: None,
            field: Some(format!("metadata.name={name}")),
        };
        Watcher::new(client, kind, selectors)
    }

    /// The same watcher, starting with a watch from `resource_version` instead of a list (the
    /// caller already read the objects, e.g. with a GET); a 410 still lists.
    pub fn from_version(mut self, resource_version: &str) -> Watcher {
        self.state = State::Resume {
            rv: resource_version.to_string(),
        };
        self
    }

    /// The same watcher pausing `min` after a first failure, doubling up to `max`.
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Watcher {
        self.backoff = Backoff::between(min, max);
        self
    }

    /// The newest resourceVersion the watcher has reached (`None` before its first list).
    pub fn resource_version(&self) -> Option<&str> {
        match &self.state {
            State::Empty => None,
            State::Resume { rv } | State::Watching { rv, .. } => Some(rv),
        }
    }

    /// The next event, waiting as long as it takes; an error is reported once and retried on
    /// the next call (see [`Watcher`]).
    pub async fn next(&mut self) -> Result<Event, WatchError> {
        loop {
            if let Some(at) = self.not_before {
                tokio::time::sleep_until(at).await;
                self.not_before = None;
            }
            match &mut self.state {
                State::Empty => {
                    let list = match self.client.list_selected(self.kind, &self.selectors, None).await {
                        Ok(list) => list,
                        Err(e) => return Err(self.failed(e.into())),
                    };
                    let Some(rv) = list["metadata"]["resourceVersion"].as_str().map(str::to_string) else {
                        let e = ClientError::Decode(format!("a list of {} without a resourceVersion", self.kind));
                        return Err(self.failed(e.into()));
                    };
                    let objects = match list {
                        Value::Object(mut m) => match m.remove("items") {
                            Some(Value::Array(items)) => items,
                            _ => Vec::new(),
                        },
                        _ => Vec::new(),
                    };
                    self.state = State::Resume { rv: rv.clone() };
                    return Ok(Event::Listed {
                        objects,
                        resource_version: rv,
                    });
                }
                State::Resume { rv } => {
                    let rv = rv.clone();
                    match self.client.watch_selected(self.kind, &self.selectors, Some(&rv)).await {
                        Ok(stream) => {
                            tracing::debug!(kind = %self.kind, resource_version = %rv, "watching");
                            self.backoff.reset();
                            self.opened = Instant::now();
                            self.state = State::Watching {
                                rv,
                                stream: Box::pin(stream),
                            };
                        }
                        Err(ClientError::Status(st)) if st.code == 410 => {
                            tracing::warn!(kind = %self.kind, resource_version = %rv, "watch expired (410), re-listing");
                            self.state = State::Empty;
                        }
                        Err(e) => return Err(self.failed(e.into())),
                    }
                }
                State::Watching { rv, stream } => {
                    let ev = match stream.next().await {
                        Some(Ok(ev)) => ev,
                        Some(Err(ClientError::Transport { source, .. })) => {
                            tracing::warn!(kind = %self.kind, resource_version = %rv, error = %super::error_chain(&source), "watch cut, resuming");
                            self.cut();
                            continue;
                        }
                        None => {
                            tracing::info!(kind = %self.kind, resource_version = %rv, "watch ended, resuming");
                            self.cut();
                            continue;
                        }
                        Some(Err(e)) => {
                            let rv = rv.clone();
                            self.state = State::Resume { rv };
                            return Err(self.failed(e.into()));
                        }
                    };
                    let WatchEvent { type_, object } = ev;
                    if type_ == "ERROR" {
                        let st: StatusError = serde_json::from_value(object).unwrap_or_default();
                        if st.code == 410 {
                            tracing::warn!(kind = %self.kind, resource_version = %rv, "watch expired (410), re-listing");
                            self.state = State::Empty;
                            continue;
                        }
                        let rv = rv.clone();
                        self.state = State::Resume { rv };
                        return Err(self.failed(WatchError::Ended(st)));
                    }
                    if let Some(v) = object["metadata"]["resourceVersion"].as_str() {
                        *rv = v.to_string();
                    }
                    let resource_version = rv.clone();
                    match type_.as_str() {
                        "ADDED" | "MODIFIED" => {
                            return Ok(Event::Applied {
                                object,
                                resource_version,
                            })
                        }
                        "DELETED" => {
                            return Ok(Event::Deleted {
                                object,
                                resource_version,
                            })
                        }
                        // BOOKMARK: only the resourceVersion moves.
                        _ => {}
                    }
                }
            }
        }
    }

    /// The watcher as a [`Stream`] of [`Watcher::next`]'s results (it never ends).
    pub fn into_stream(self) -> impl Stream<Item = Result<Event, WatchError>> + Send {
        futures_util::stream::unfold(self, |mut w| async move {
            let r = w.next().await;
            Some((r, w))
        })
    }

    /// A failure: pause before the next request, doubling the pause.
    fn failed(&mut self, e: WatchError) -> WatchError {
        self.not_before = Some(Instant::now() + self.backoff.failed());
        e
    }

    /// A cut or ended watch: resume from its newest resourceVersion, at once unless it was
    /// accepted less than the current pause ago.
    fn cut(&mut self) {
        if let State::Watching { rv, .. } = &self.state {
            self.state = State::Resume { rv: rv.clone() };
        }
        let earliest = self.opened + self.backoff.current();
        if earliest > Instant::now() {
            self.not_before = Some(earliest);
        }
    }
}

#[cfg(test)]
mod tests;
