//! The retry delay of every client loop mco runs against its server: the daemon's failed
//! passes, its connection and registration retries, and [`super::watcher::Watcher`]'s failed
//! lists and watches. One rule, written once: a failure waits the current delay, which then
//! doubles up to a ceiling; a success resets it.
//!
//! The bounds are mco's own (1 s to 60 s): MCO's daemon requeues a failed sync through its
//! rate-limited workqueue and client-go's reflector backs off 800 ms to 30 s, neither of which
//! a daemon outside Kubernetes inherits; one pair of bounds keeps every loop of a node agent
//! in step after an outage.

use std::time::Duration;

/// First delay after a failure.
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);

/// Longest delay: each failure doubles the delay up to this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A doubling retry delay between `min` and `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Default for Backoff {
    /// [`MIN_BACKOFF`] to [`MAX_BACKOFF`].
    fn default() -> Self {
        Backoff::between(MIN_BACKOFF, MAX_BACKOFF)
    }
}

impl Backoff {
    /// A delay starting at `min` and doubling up to `max` (at least `min`).
    pub fn between(min: Duration, max: Duration) -> Backoff {
        Backoff {
            min,
            max: max.max(min),
            current: min,
        }
    }

    /// The delay the next failure waits.
    pub fn current(&self) -> Duration {
        self.current
    }

    /// A failure: returns the delay to wait now and doubles the next one, up to the ceiling.
    pub fn failed(&mut self) -> Duration {
        let wait = self.current;
        self.current = (self.current * 2).min(self.max);
        wait
    }

    /// A success: the next failure waits the first delay again.
    pub fn reset(&mut self) {
        self.current = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_ceiling_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        b.reset();
        assert_eq!(b.current(), MIN_BACKOFF);
        let mut tight = Backoff::between(Duration::from_millis(30), Duration::from_millis(10));
        assert_eq!(
            tight.failed(),
            Duration::from_millis(30),
            "a ceiling under the floor is the floor"
        );
        assert_eq!(tight.current(), Duration::from_millis(30));
    }
}
