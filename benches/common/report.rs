//! The benches' shared summary: each figure of DESIGN.md section 8 (and issue 13) is printed as
//! one `report:` line beside the floor measured in the same run, which `benches/report.sh`
//! gathers into one table. Included by each bench with `#[path = "common/report.rs"] mod report;`.
#![allow(dead_code)] // each bench uses its part

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Durations recorded from inside criterion's timing closures (criterion keeps only its own
/// statistics), for medians and percentiles.
pub type Samples = Arc<Mutex<Vec<Duration>>>;

/// The median of `s`, or `None` when the benchmark did not run (filtered out).
pub fn median(s: &Samples) -> Option<Duration> {
    percentile(s, 50.0)
}

/// Percentile `p` (0–100, nearest rank) of `s`, or `None` when empty.
pub fn percentile(s: &Samples, p: f64) -> Option<Duration> {
    let mut v = s.lock().unwrap().clone();
    v.sort();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len().max(1)) - 1).copied()
}

/// A duration as the report prints it: in milliseconds, or in microseconds under 0.1 ms.
pub fn ms(d: Duration) -> String {
    if d < Duration::from_micros(100) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

/// One row of the report: what was measured, mco's figure, the floor's (same run), their
/// ratio and the target. The line starts with `report: ` and its fields are separated by
/// ` | ` (the table `benches/report.sh` prints).
pub fn row(metric: &str, mco: &str, floor: &str, ratio: f64, target: &str) {
    println!("report: {metric} | {mco} | {floor} | {ratio:.2}× | {target}");
}

/// [`row`] for two durations, the ratio being `mco / floor`.
pub fn row_times(metric: &str, mco: Duration, floor: Duration, target: &str) {
    row(
        metric,
        &ms(mco),
        &ms(floor),
        mco.as_secs_f64() / floor.as_secs_f64(),
        target,
    );
}

/// Runs `f`, recording its duration in `s`: for criterion's `iter` closures.
pub fn timed<T>(s: &Samples, f: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = f();
    s.lock().unwrap().push(started.elapsed());
    out
}

/// Bytes of the files under `dir`, recursively (a store's size on disk).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}
