//! The snapshot writer: a thread that serializes the projection's snapshots off the write path.

use crate::state::State;
use crate::store::Store;
use std::sync::Arc;

/// The thread that writes snapshots ([`Store::write_snapshot`]): publishing hands it the
/// projection (an `Arc` of a persistent state, so nothing is copied) and goes on, so no write
/// waits for a snapshot's serialization, whatever the state's size. Snapshots are written in
/// the order they were taken; dropping the hub waits for the ones queued (a server that stops
/// leaves every snapshot it took).
pub(super) struct Snapshotter {
    tx: Option<std::sync::mpsc::Sender<Arc<State>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Snapshotter {
    pub(super) fn start(store: Store) -> Snapshotter {
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

    pub(super) fn submit(&self, state: Arc<State>) {
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
