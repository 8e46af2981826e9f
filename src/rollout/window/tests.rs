//! Window arithmetic: Go's duration syntax (the examples and messages of `src/time/format.go`),
//! the field errors, worked daylight-saving cases in Europe/Berlin, and property tests across
//! the DST changes of several zones (a 30-minute change in Australia/Lord_Howe among them).

use super::*;
use jiff::civil::{date, DateTime};
use jiff::tz::AmbiguousOffset;
use proptest::prelude::*;

fn window(schedule: &str, duration: &str, tz: &str) -> Window {
    Window::parse(
        &MaintenanceWindow {
            schedule: schedule.into(),
            duration: duration.into(),
            time_zone: Some(tz.into()),
        },
        "w",
    )
    .unwrap()
}

fn utc(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn go_durations() {
    let ok = |s: &str, secs: f64| assert_eq!(parse_go_duration(s), Ok(SignedDuration::from_secs_f64(secs)), "{s}");
    ok("0", 0.0);
    ok("5s", 5.0);
    ok("30s", 30.0);
    ok("1478s", 1478.0);
    ok("-5s", -5.0);
    ok("+5s", 5.0);
    ok("5.0s", 5.0);
    ok("5.6s", 5.6);
    ok("5.s", 5.0);
    ok(".5s", 0.5);
    ok("1.004s", 1.004);
    ok("100.00100s", 100.001);
    ok("10ns", 1e-8);
    ok("11us", 11e-6);
    ok("12µs", 12e-6);
    ok("12μs", 12e-6);
    ok("13ms", 0.013);
    ok("14s", 14.0);
    ok("15m", 900.0);
    ok("16h", 57600.0);
    ok("3h30m", 12600.0);
    ok("10.5s4m", 250.5);
    ok("-2m3.4s", -123.4);
    ok("1h2m3s4ms5us6ns", 3723.004005006);
    ok("39h9m14.425s", 140954.425);
    assert_eq!(parse_go_duration(""), Err(r#"time: invalid duration """#.into()));
    assert_eq!(
        parse_go_duration("3"),
        Err(r#"time: missing unit in duration "3""#.into())
    );
    assert_eq!(parse_go_duration("-"), Err(r#"time: invalid duration "-""#.into()));
    assert_eq!(parse_go_duration("s"), Err(r#"time: invalid duration "s""#.into()));
    assert_eq!(parse_go_duration("."), Err(r#"time: invalid duration ".""#.into()));
    assert_eq!(parse_go_duration("-."), Err(r#"time: invalid duration "-.""#.into()));
    assert_eq!(parse_go_duration(".s"), Err(r#"time: invalid duration ".s""#.into()));
    assert_eq!(
        parse_go_duration("1d"),
        Err(r#"time: unknown unit "d" in duration "1d""#.into())
    );
    assert_eq!(
        parse_go_duration("9223372036854775810ns"),
        Err(r#"time: invalid duration "9223372036854775810ns""#.into())
    );
    assert_eq!(
        parse_go_duration("-9223372036854775808ns"),
        Ok(SignedDuration::from_nanos(i64::MIN))
    );
}

#[test]
fn bad_windows_name_their_fields() {
    let bad = MaintenanceWindow {
        schedule: "0 2 * *".into(),
        duration: "4d".into(),
        time_zone: Some("Mars/Olympus".into()),
    };
    let errors = Window::parse(&bad, "spec.maintenanceWindows[0]").unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.maintenanceWindows[0].schedule",
            "spec.maintenanceWindows[0].duration",
            "spec.maintenanceWindows[0].timeZone"
        ]
    );
    assert_eq!(
        errors[2].message,
        r#"Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus"#
    );
    assert!(
        errors[1].message.contains(r#"unknown unit "d""#),
        "{}",
        errors[1].message
    );
    let tz = MaintenanceWindow {
        schedule: "CRON_TZ=UTC 0 2 * * *".into(),
        duration: "1h".into(),
        time_zone: None,
    };
    assert!(Window::parse(&tz, "w").unwrap_err()[0]
        .message
        .ends_with("cannot use TZ or CRON_TZ in schedule, use timeZone field instead"));
    for zone in ["", "../etc/passwd", "-x", "Europe//Berlin"] {
        assert!(time_zone(zone).is_err(), "{zone:?}");
    }
    assert!(parse_schedule("0 0 2 * * *").is_err(), "6 fields");
    assert!(parse_schedule("61 2 * * *").is_err());
    assert!(parse_schedule("@daily").is_ok());
}

/// Saturday 02:00 Berlin for 4 hours, seen from a Friday, inside, and after.
#[test]
fn a_weekly_window() {
    let w = [window("0 2 * * 6", "4h", "Europe/Berlin")];
    // Friday 2026-12-04 15:00 UTC: the next window opens Saturday 02:00 CET (01:00 UTC).
    match state(&w, utc("2026-12-04T15:00:00Z")) {
        WindowState::Closed { opens: Some(z) } => {
            assert_eq!(z.timestamp(), utc("2026-12-05T01:00:00Z"));
            assert_eq!(z.to_string(), "2026-12-05T02:00:00+01:00[Europe/Berlin]");
        }
        s => panic!("{s:?}"),
    }
    assert_eq!(
        state(&w, utc("2026-12-05T01:00:00Z")),
        WindowState::Open {
            closes: utc("2026-12-05T05:00:00Z")
        }
    );
    assert!(matches!(
        state(&w, utc("2026-12-05T05:00:00Z")),
        WindowState::Closed { .. }
    ));
    assert_eq!(state(&[], utc("2026-12-05T05:00:00Z")), WindowState::Always);
}

/// Europe/Berlin springs forward on 2026-03-29 at 02:00 (to 03:00 CEST) and falls back on
/// 2026-10-25 at 03:00 (to 02:00 CET).
#[test]
fn berlin_dst_changes() {
    let w = [window("30 2 * * *", "1h", "Europe/Berlin")];
    // Spring: 02:30 does not exist; the window opens at 03:00 CEST = 01:00 UTC, for 1 hour.
    let WindowState::Closed { opens: Some(z) } = state(&w, utc("2026-03-28T12:00:00Z")) else {
        panic!()
    };
    assert_eq!(z.timestamp(), utc("2026-03-29T01:00:00Z"));
    assert_eq!(
        state(&w, z.timestamp()),
        WindowState::Open {
            closes: utc("2026-03-29T02:00:00Z")
        }
    );
    // Autumn: 02:30 happens twice (00:30 and 01:30 UTC); the window opens once, at the first,
    // and closes an elapsed hour later, at the second 02:30.
    let WindowState::Closed { opens: Some(z) } = state(&w, utc("2026-10-24T12:00:00Z")) else {
        panic!()
    };
    assert_eq!(z.timestamp(), utc("2026-10-25T00:30:00Z"));
    assert_eq!(
        state(&w, utc("2026-10-25T01:00:00Z")),
        WindowState::Open {
            closes: utc("2026-10-25T01:30:00Z")
        }
    );
    let WindowState::Closed { opens: Some(z) } = state(&w, utc("2026-10-25T01:30:00Z")) else {
        panic!("the second 02:30 opens nothing")
    };
    assert_eq!(z.timestamp(), utc("2026-10-26T01:30:00Z"), "next day, 02:30 CET");
}

/// Overlapping and touching windows run together.
#[test]
fn overlapping_windows_chain() {
    let w = [
        window("0 1 * * *", "2h", "UTC"),
        window("0 3 * * *", "1h", "UTC"),
        window("30 1 * * *", "1h", "UTC"),
    ];
    assert_eq!(
        state(&w, utc("2026-01-01T01:10:00Z")),
        WindowState::Open {
            closes: utc("2026-01-01T04:00:00Z")
        }
    );
    let every_minute = [window("* * * * *", "1h", "UTC")];
    assert!(matches!(
        state(&every_minute, utc("2026-01-01T00:00:30Z")),
        WindowState::Open { .. }
    ));
}

const ZONES: [&str; 7] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "America/Santiago",
    "Europe/London",
    "UTC",
];

fn instant() -> impl Strategy<Value = Timestamp> {
    // 2024-01-01 .. 2028-01-01
    (1_704_067_200i64..1_830_297_600).prop_map(|s| Timestamp::from_second(s).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A daily fixed-time window, at any instant of four years in zones with DST changes:
    /// open exactly on [start, start + duration) of elapsed time; closed until the next start,
    /// which opens it; a start is the schedule's wall-clock time, or, when the clock springs
    /// over that time, the first instant after the gap on that day; one start per local day.
    #[test]
    fn daily_windows_across_dst(zone in 0..ZONES.len(), hour in 0i8..24, minute in 0i8..60,
                                minutes in 1i64..(22 * 60), now in instant(), frac in 0.0f64..1.0) {
        let tz_name = ZONES[zone];
        let d = SignedDuration::from_mins(minutes);
        let w = window(&format!("{minute} {hour} * * *"), &format!("{minutes}m"), tz_name);
        let tz = w.tz.clone();
        let start_rule = |z: &Zoned| {
            let wanted: DateTime = z.date().at(hour, minute, 0, 0);
            match tz.to_ambiguous_zoned(wanted).offset() {
                AmbiguousOffset::Unambiguous { .. } => prop_assert_eq!(z.datetime(), wanted),
                AmbiguousOffset::Fold { .. } => {
                    let first = tz.to_ambiguous_zoned(wanted).earlier().unwrap();
                    prop_assert_eq!(z.timestamp(), first.timestamp());
                }
                AmbiguousOffset::Gap { .. } => {
                    let before = (z.timestamp() - SignedDuration::from_nanos(1)).to_zoned(tz.clone());
                    prop_assert!(before.datetime() < wanted && wanted < z.datetime(), "{z} skips {wanted}");
                }
            }
            Ok(())
        };
        let windows = [w.clone()];
        match state(&windows, now) {
            WindowState::Open { closes } => {
                let start = w.last_start(now).unwrap();
                prop_assert!(start.timestamp() <= now && now < closes);
                prop_assert_eq!(closes.duration_since(start.timestamp()), d);
                start_rule(&start)?;
            }
            WindowState::Closed { opens } => {
                let opens = opens.unwrap();
                prop_assert!(opens.timestamp() > now);
                start_rule(&opens)?;
                prop_assert_eq!(state(&windows, opens.timestamp()), WindowState::Open { closes: opens.timestamp() + d });
                let gap = opens.timestamp().duration_since(now);
                let between = now + SignedDuration::from_secs_f64(gap.as_secs_f64() * frac);
                prop_assert!(matches!(state(&windows, between), WindowState::Closed { .. }), "closed at {between}");
                let next = w.next_start(opens.timestamp()).unwrap();
                prop_assert_eq!(next.date(), opens.date().tomorrow().unwrap(), "one start per local day");
            }
            WindowState::Always => prop_assert!(false),
        }
    }

    /// Whatever the zone, a window's state at `now` agrees with a walk over its starts: open
    /// iff some start lies in (now - duration, now].
    #[test]
    fn open_iff_a_start_lies_within_a_duration(zone in 0..ZONES.len(), hour in 0i8..24,
                                              dow in 0u8..7, minutes in 1i64..(72 * 60), now in instant()) {
        let w = window(&format!("0 {hour} * * {dow}"), &format!("{minutes}m"), ZONES[zone]);
        let d = SignedDuration::from_mins(minutes);
        let from = now - d - SignedDuration::from_hours(24 * 8);
        let mut z = w.next_start(from).unwrap();
        let mut open = false;
        while z.timestamp() <= now {
            open |= now < z.timestamp() + d;
            z = w.next_start(z.timestamp()).unwrap();
        }
        prop_assert_eq!(matches!(state(&[w], now), WindowState::Open { .. }), open);
    }
}

#[test]
fn a_date_is_a_date() {
    // The DST dates the worked cases rely on, from the tz database itself.
    let tz = TimeZone::get("Europe/Berlin").unwrap();
    let gap = tz.to_ambiguous_zoned(date(2026, 3, 29).at(2, 30, 0, 0)).offset();
    assert!(matches!(gap, AmbiguousOffset::Gap { .. }));
    let fold = tz.to_ambiguous_zoned(date(2026, 10, 25).at(2, 30, 0, 0)).offset();
    assert!(matches!(fold, AmbiguousOffset::Fold { .. }));
}
