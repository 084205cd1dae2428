//! Durations and timestamps as kube-apiserver prints them.
//!
//! [`human_duration`] is `k8s.io/apimachinery/pkg/util/duration.HumanDuration`
//! (the `Age` column of every server-side Table); [`parse_rfc3339`] and
//! [`format_rfc3339`] read and write `metav1.Time` (`2026-11-21T15:12:23Z`)
//! with `jiff` (the date library k8s-openapi already uses).

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;

/// `HumanDuration` from apimachinery: a short duration with ~2-3 significant
/// figures, e.g. `"2m43s"`, `"4d22h"`, `"16d"`, `"3y45d"`.
///
/// Every branch of the Go function is kept: whole seconds below 2 minutes,
/// `XmYs` below 10 minutes, minutes below 3 hours, `XhYm` below 8 hours,
/// hours below 2 days, `XdYh` below 8 days, days below 2 years, `XyYd` below
/// 8 years, then years. Go's negative branches (`"0s"`, `"<invalid>"`) are in
/// [`human_duration_signed`].
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 2 * MINUTE {
        return format!("{secs}s");
    }
    let minutes = secs / MINUTE;
    if minutes < 10 {
        let s = secs % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = secs / HOUR;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// `HumanDuration` for a signed number of seconds, as the `Age` column sees it
/// when a timestamp lies in the future (clock skew): one second early still
/// prints `"0s"`, two or more print `"<invalid>"`.
pub fn human_duration_signed(secs: i64) -> String {
    if secs < -1 {
        "<invalid>".to_string()
    } else if secs < 0 {
        "0s".to_string()
    } else {
        human_duration(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// Unix seconds of an RFC 3339 timestamp such as `2026-11-21T15:12:23Z`,
/// `2026-11-21T15:12:23.123456Z` or `2026-11-21T17:12:23+02:00`.
///
/// Fractional seconds are dropped (the result is the whole second at or
/// before the instant). Returns `None` for anything that is not a valid
/// date and time, as Go's `time.Parse(time.RFC3339, …)` would reject it —
/// except that an offset without a colon (`+0200`) is read too.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    // jiff also reads other ISO 8601 spellings, and leap seconds; Go's
    // RFC 3339 wants the `T` (or `t`) between date and time and no second 60.
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't')) || s.get(17..19) == Some("60") {
        return None;
    }
    let ts: jiff::Timestamp = s.parse().ok()?;
    // Whole seconds at or before the instant.
    Some(ts.as_second() - i64::from(ts.subsec_nanosecond() < 0))
}

/// `t` the way `metav1.Time` marshals: UTC, whole seconds (the fraction
/// dropped), e.g. `2026-11-21T15:12:23Z`. The one way sitegrid writes a time.
pub fn format_timestamp(t: jiff::Timestamp) -> String {
    // Whole seconds at or before the instant.
    format_rfc3339(t.as_second() - i64::from(t.subsec_nanosecond() < 0))
}

/// `t` as [`format_timestamp`] writes it (times before 1970 as 1970).
pub fn format_system_time(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    format_rfc3339(secs)
}

/// The current time as [`format_timestamp`] writes it.
pub fn now_rfc3339() -> String {
    format_timestamp(jiff::Timestamp::now())
}

/// Formats unix seconds the way `metav1.Time` marshals: UTC, whole seconds,
/// e.g. `2026-11-21T15:12:23Z`.
pub fn format_rfc3339(unix_secs: i64) -> String {
    match jiff::Timestamp::from_second(unix_secs) {
        // Whole seconds: jiff prints no fraction, and `Z` for UTC.
        Ok(ts) => ts.to_string(),
        // Beyond jiff's range (years -9999..=9999): no Kubernetes object has such a time.
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * HOUR;

    fn hd(secs: u64) -> String {
        human_duration(Duration::from_secs(secs))
    }

    #[test]
    fn human_duration_seconds_below_two_minutes() {
        assert_eq!(hd(0), "0s");
        assert_eq!(hd(59), "59s");
        assert_eq!(hd(119), "119s");
        // Sub-second parts are truncated, as Go's int(d.Seconds()).
        assert_eq!(human_duration(Duration::from_millis(119_999)), "119s");
    }

    #[test]
    fn human_duration_minutes_and_seconds_below_ten_minutes() {
        assert_eq!(hd(120), "2m");
        assert_eq!(hd(163), "2m43s");
        assert_eq!(hd(170), "2m50s");
        assert_eq!(hd(599), "9m59s");
    }

    #[test]
    fn human_duration_minutes_below_three_hours() {
        assert_eq!(hd(600), "10m");
        assert_eq!(hd(659), "10m");
        assert_eq!(hd(3 * 3600 - 1), "179m");
    }

    #[test]
    fn human_duration_hours_and_minutes_below_eight_hours() {
        assert_eq!(hd(3 * 3600), "3h");
        assert_eq!(hd(3 * 3600 + 60), "3h1m");
        assert_eq!(hd(8 * 3600 - 1), "7h59m");
    }

    #[test]
    fn human_duration_hours_below_two_days() {
        assert_eq!(hd(8 * 3600), "8h");
        assert_eq!(hd(48 * 3600 - 1), "47h");
    }

    #[test]
    fn human_duration_days_and_hours_below_eight_days() {
        assert_eq!(hd(2 * DAY), "2d");
        assert_eq!(hd(4 * DAY + 22 * HOUR + 59 * MINUTE), "4d22h");
        assert_eq!(hd(8 * DAY - 1), "7d23h");
    }

    #[test]
    fn human_duration_days_below_two_years() {
        assert_eq!(hd(8 * DAY), "8d");
        assert_eq!(hd(16 * DAY + 5 * HOUR), "16d");
        assert_eq!(hd(730 * DAY - 1), "729d");
    }

    #[test]
    fn human_duration_years_and_days_below_eight_years() {
        assert_eq!(hd(730 * DAY), "2y");
        assert_eq!(hd((3 * 365 + 45) * DAY), "3y45d");
        assert_eq!(hd(8 * 365 * DAY - 1), "7y364d");
    }

    #[test]
    fn human_duration_years_from_eight_years() {
        assert_eq!(hd(8 * 365 * DAY), "8y");
        assert_eq!(hd(20 * 365 * DAY + 100 * DAY), "20y");
    }

    #[test]
    fn human_duration_signed_tolerates_one_second_of_skew() {
        assert_eq!(human_duration_signed(-1), "0s");
        assert_eq!(human_duration_signed(-2), "<invalid>");
        assert_eq!(human_duration_signed(163), "2m43s");
    }

    #[test]
    fn parses_kubernetes_timestamps() {
        // date -u -d 2026-11-21T15:12:23Z +%s
        assert_eq!(parse_rfc3339("2026-11-21T15:12:23Z"), Some(1_795_273_943));
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-02-29T23:59:59Z"), Some(951_868_799));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(-1));
    }

    #[test]
    fn parses_fractions_and_offsets() {
        let base = Some(1_795_273_943);
        assert_eq!(parse_rfc3339("2026-11-21T15:12:23.999999Z"), base);
        assert_eq!(parse_rfc3339("2026-11-21T17:12:23+02:00"), base);
        assert_eq!(parse_rfc3339("2026-11-21T10:42:23.5-04:30"), base);
    }

    #[test]
    fn rejects_malformed_timestamps() {
        for bad in [
            "",
            "2026-11-21",
            "2026-11-21 15:12:23Z",
            "2026-11-21T15:12:23",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-21T24:00:00Z",
            "2026-11-21T15:60:00Z",
            "2026-11-21T15:12:60Z",
            "2026-11-21T15:12:23.Z",
            "2026-11-21T15:12:23Zjunk",
            "2026-1a-21T15:12:23Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn formats_unix_seconds() {
        assert_eq!(format_rfc3339(1_795_273_943), "2026-11-21T15:12:23Z");
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_rfc3339(951_868_799), "2000-02-29T23:59:59Z");
        let late = jiff::Timestamp::new(1_795_273_943, 999_999_999).unwrap();
        assert_eq!(format_timestamp(late), "2026-11-21T15:12:23Z");
        let early = jiff::Timestamp::new(-1, 500_000_000).unwrap();
        assert_eq!(format_timestamp(early), "1969-12-31T23:59:59Z");
        let then = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_273_943_250);
        assert_eq!(format_system_time(then), "2026-11-21T15:12:23Z");
    }

    #[test]
    fn format_and_parse_round_trip_across_calendar_edges() {
        // Every day boundary from 1899 to 2101 plus an odd second offset.
        let mut t = -2_208_988_800 - 86_400 * 365;
        while t < 4_133_980_800 {
            let s = format_rfc3339(t + 3_723);
            assert_eq!(parse_rfc3339(&s), Some(t + 3_723), "{s}");
            t += 86_400;
        }
    }
}
