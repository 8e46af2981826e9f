//! The controllers' clock: the time the time-dependent decisions read (RolloutPolicy windows,
//! bake times, heal caps), the system's by default, or a manual one that tests set.
//!
//! Owns "what time is it" for the control loop and the wake-up when a manual clock is set, so
//! a test moves time forward instead of sleeping. Durations the loop itself waits (render
//! delay, retries, lease expiry) stay on tokio's monotonic clock.

use jiff::{SignedDuration, Timestamp};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The system clock, or a manual one shared by its clones.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<Manual>>,
}

#[derive(Debug)]
struct Manual {
    now: Mutex<Timestamp>,
    changed: watch::Sender<()>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock that reads `start` until it is set or advanced.
    pub fn manual(start: Timestamp) -> Clock {
        Clock {
            manual: Some(Arc::new(Manual {
                now: Mutex::new(start),
                changed: watch::channel(()).0,
            })),
        }
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        match &self.manual {
            None => Timestamp::now(),
            Some(m) => *m.now.lock().expect("clock lock"),
        }
    }

    /// Sets a manual clock to `t` and wakes the controllers (a no-op on the system clock).
    pub fn set(&self, t: Timestamp) {
        if let Some(m) = &self.manual {
            *m.now.lock().expect("clock lock") = t;
            m.changed.send_replace(());
        }
    }

    /// Moves a manual clock forward by `d`.
    pub fn advance(&self, d: SignedDuration) {
        self.set(self.now() + d);
    }

    /// Whether this is a manual clock.
    pub fn is_manual(&self) -> bool {
        self.manual.is_some()
    }

    /// A receiver of a manual clock's changes (`None` for the system clock): the loop keeps
    /// one across passes, so a `set` during a pass still wakes the next wait.
    pub fn watch(&self) -> Option<watch::Receiver<()>> {
        self.manual.as_ref().map(|m| m.changed.subscribe())
    }

    /// How long the loop should sleep until `t` by this clock: the difference for the system
    /// clock; for a manual clock, no earlier wake than its next `set` (returned as `None`).
    pub fn until(&self, t: Timestamp) -> Option<std::time::Duration> {
        if self.is_manual() {
            return (t <= self.now()).then_some(std::time::Duration::ZERO);
        }
        let d = t.duration_since(self.now());
        Some(d.try_into().unwrap_or(std::time::Duration::ZERO))
    }
}
