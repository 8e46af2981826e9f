//! Maintenance windows of a RolloutPolicy: when is a window open, when does it close, when does
//! the next one open, across time zones and their daylight-saving changes.
//!
//! Owns the window arithmetic and Go's duration syntax. A window opens at each time its
//! 5-field cron `schedule` names, read as wall-clock time in its `timeZone` (the `croner`
//! crate, on `jiff` zoned times), and stays open for `duration` of elapsed time. Daylight
//! saving follows croner's Vixie-cron/OCPS rules: a fixed start time that falls in a gap (the
//! clock springs forward over it) opens the window at the first instant after the gap, on the
//! same day; a fixed start time that happens twice (the clock falls back) opens it once, at the
//! first. Because the duration is elapsed time, a 4h window over a change of clocks ends 4
//! hours after it opened, whatever the wall clock then says.
//!
//! Pure: time is a parameter.

use crate::model::{invalid, MaintenanceWindow};
use crate::validation::FieldError;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

/// One parsed maintenance window.
#[derive(Clone, Debug)]
pub struct Window {
    cron: croner::Cron,
    /// Elapsed time the window stays open (> 0).
    pub duration: SignedDuration,
    /// The zone the schedule is read in.
    pub tz: TimeZone,
    /// The zone's name as given (`UTC` when absent).
    pub zone_name: String,
    /// The schedule as given.
    pub schedule: String,
}

/// Whether nodes may be newly targeted at a time, and until or from when.
#[derive(Clone, Debug, PartialEq)]
pub enum WindowState {
    /// The policy has no windows: always.
    Always,
    /// Inside a window that closes at `closes` (the end of the run of windows that overlap or
    /// touch the current one).
    Open { closes: Timestamp },
    /// Outside every window; the next opens at `opens` (in its window's zone), `None` when no
    /// schedule ever matches again.
    Closed { opens: Option<Zoned> },
}

/// Most windows a run of overlapping windows is followed through for its end (a schedule
/// every minute with a duration of an hour overlaps itself 60 times).
const MAX_CHAIN: usize = 1_000;

impl Window {
    /// Parses one window of `spec.maintenanceWindows[i]`; `at` is that field's path. Errors
    /// name the field: `schedule` (5 fields; a `TZ=`/`CRON_TZ=` prefix refused as a CronJob's,
    /// `pkg/apis/batch/validation/validation.go` validateScheduleFormat), `duration` (Go's
    /// `time.ParseDuration`, positive), `timeZone` (an IANA name: `unknown time zone X`, Go's
    /// `time.LoadLocation` text that a CronJob's `spec.timeZone` answers).
    pub fn parse(w: &MaintenanceWindow, at: &str) -> Result<Window, Vec<FieldError>> {
        let mut errors = Vec::new();
        let cron = if w.schedule.contains("TZ") {
            errors.push(invalid(
                format!("{at}.schedule"),
                &w.schedule,
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
            None
        } else {
            match parse_schedule(&w.schedule) {
                Ok(c) => Some(c),
                Err(e) => {
                    errors.push(invalid(format!("{at}.schedule"), &w.schedule, &e));
                    None
                }
            }
        };
        let duration = match parse_go_duration(&w.duration) {
            Ok(d) if d.is_positive() => Some(d),
            Ok(_) => {
                errors.push(invalid(format!("{at}.duration"), &w.duration, "must be greater than 0"));
                None
            }
            Err(e) => {
                errors.push(invalid(format!("{at}.duration"), &w.duration, &e));
                None
            }
        };
        let zone_name = w.time_zone.clone().unwrap_or_else(|| "UTC".to_string());
        let tz = match time_zone(&zone_name) {
            Ok(tz) => Some(tz),
            Err(e) => {
                errors.push(invalid(format!("{at}.timeZone"), &zone_name, &e));
                None
            }
        };
        match (cron, duration, tz) {
            (Some(cron), Some(duration), Some(tz)) if errors.is_empty() => Ok(Window {
                cron,
                duration,
                tz,
                zone_name,
                schedule: w.schedule.clone(),
            }),
            _ => Err(errors),
        }
    }

    /// The start of the latest window that started at or before `now`.
    pub fn last_start(&self, now: Timestamp) -> Option<Zoned> {
        self.cron
            .find_previous_occurrence(&now.to_zoned(self.tz.clone()), true)
            .ok()
    }

    /// The start of the first window strictly after `now`.
    pub fn next_start(&self, now: Timestamp) -> Option<Zoned> {
        self.cron
            .find_next_occurrence(&now.to_zoned(self.tz.clone()), false)
            .ok()
    }

    /// When the window open at `now` closes, `None` when this window is not open at `now`.
    /// A window started at `s` is open on `[s, s + duration)`.
    pub fn closes(&self, now: Timestamp) -> Option<Timestamp> {
        let start = self.last_start(now)?;
        let end = start.timestamp().checked_add(self.duration).ok()?;
        (now < end).then_some(end)
    }
}

/// A 5-field cron schedule (no seconds, no year field), croner's syntax: numbers, ranges,
/// steps, lists, month and weekday names, `@daily`-style nicknames; day-of-month and
/// day-of-week match when either does (Vixie cron's OR) unless one is `*`.
pub fn parse_schedule(s: &str) -> Result<croner::Cron, String> {
    if s.split_whitespace().count() != 5 && !s.trim_start().starts_with('@') {
        return Err(format!(
            "expected exactly 5 fields (minute hour day-of-month month day-of-week), found {}",
            s.split_whitespace().count()
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(s)
        .map_err(|e| e.to_string())
}

/// The IANA time zone `name` from the time zone database (the system's, else the copy built
/// into mco). Refused with Go's `unknown time zone <name>` (`time.LoadLocation`), also for a
/// name with an empty, `.`, `..` or `-`-leading part, as a CronJob's `spec.timeZone`.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    let unknown = || format!("unknown time zone {name}");
    if name.is_empty()
        || name
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == ".." || p.starts_with('-'))
    {
        return Err(unknown());
    }
    if name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| unknown())
}

/// The state of a set of windows at `now`: [`WindowState::Always`] for none; open when any is
/// open, closing at the end of the run of windows that overlap or touch (a window that opens
/// before or as the current one closes extends it); else closed until the earliest next start.
pub fn state(windows: &[Window], now: Timestamp) -> WindowState {
    if windows.is_empty() {
        return WindowState::Always;
    }
    let Some(mut closes) = windows.iter().filter_map(|w| w.closes(now)).max() else {
        let opens = windows
            .iter()
            .filter_map(|w| w.next_start(now))
            .min_by_key(|z| z.timestamp());
        return WindowState::Closed { opens };
    };
    // Follow the windows that open before the run ends, starts in time order, at most
    // MAX_CHAIN of them (the run then ends there for now: the next pass looks again).
    let mut from = now;
    for _ in 0..MAX_CHAIN {
        // The earliest next start, with the longest duration of the windows opening then.
        let Some(next) = windows
            .iter()
            .filter_map(|w| w.next_start(from).map(|z| (z.timestamp(), w.duration)))
            .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        else {
            break;
        };
        if next.0 > closes {
            break;
        }
        if let Ok(end) = next.0.checked_add(next.1) {
            closes = closes.max(end);
        }
        from = next.0;
    }
    WindowState::Open { closes }
}

/// Go's `time.ParseDuration` (`src/time/format.go`): a possibly signed sequence of decimal
/// numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`,
/// `m`, `h`), such as `300ms`, `-1.5h` or `2h45m`; `0` alone needs no unit. Go's messages:
/// `time: invalid duration "x"`, `time: missing unit in duration "1"`, `time: unknown unit
/// "d" in duration "1d"`.
pub fn parse_go_duration(orig: &str) -> Result<SignedDuration, String> {
    let quote = crate::gofmt::quote;
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next() {
        if c == '-' || c == '+' {
            neg = c == '-';
            s = &s[1..];
        }
    }
    if s == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const MAX: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        let b = s.as_bytes()[0];
        if !(b == b'.' || b.is_ascii_digit()) {
            return Err(invalid());
        }
        // The integer part (leadingInt: overflow past 1<<63 is an error).
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut v: u64 = 0;
        for c in s[..digits].bytes() {
            if v > MAX / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(c - b'0');
            if v > MAX {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        // The fraction (leadingFraction: digits past overflow are ignored).
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for c in rest[..n].bytes() {
                if overflow {
                    continue;
                }
                if f > (MAX - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > MAX {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = n > 0;
            s = &rest[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let u = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match u {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => return Err(format!("time: unknown unit {} in duration {}", quote(u), quote(orig))),
        };
        if v > MAX / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > MAX {
                return Err(invalid());
            }
        }
        d += v;
        if d > MAX {
            return Err(invalid());
        }
    }
    if neg {
        return Ok(SignedDuration::from_nanos((-(d as i128)) as i64));
    }
    if d > MAX - 1 {
        return Err(invalid());
    }
    Ok(SignedDuration::from_nanos(d as i64))
}

#[cfg(test)]
mod tests;
