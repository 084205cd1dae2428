//! Durations and timestamps as kube-apiserver prints them.
//!
//! [`human_duration`] is `k8s.io/apimachinery/pkg/util/duration.HumanDuration`
//! (the `Age` column of every server-side Table); [`parse_rfc3339`] and
//! [`format_rfc3339`] read and write `metav1.Time` (`2026-11-21T15:12:23Z`)
//! without a date library, using the proleptic Gregorian calendar.

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

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

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400); // [0, 399]
    let mp = (i64::from(month) + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both casts are of values proven in range by the arithmetic above.
    (year, month as u32, day as u32)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        _ => 28,
    }
}

/// Parses `n` ASCII digits at the start of `s`.
fn digits(s: &[u8], n: usize) -> Option<u32> {
    let part = s.get(..n)?;
    part.iter().try_fold(0u32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

/// Unix seconds of an RFC 3339 timestamp such as `2026-11-21T15:12:23Z`,
/// `2026-11-21T15:12:23.123456Z` or `2026-11-21T17:12:23+02:00`.
///
/// Fractional seconds are dropped (the result is the whole second at or
/// before the instant). Returns `None` for anything that is not a valid
/// date and time, as Go's `time.Parse(time.RFC3339, …)` would reject it.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let sep = |i: usize, c: u8| b.get(i).copied() == Some(c);
    if !(sep(4, b'-') && sep(7, b'-') && (sep(10, b'T') || sep(10, b't')))
        || !(sep(13, b':') && sep(16, b':'))
    {
        return None;
    }
    let year = i64::from(digits(b, 4)?);
    let month = digits(&b[5..], 2)?;
    let day = digits(&b[8..], 2)?;
    let hour = digits(&b[11..], 2)?;
    let minute = digits(&b[14..], 2)?;
    let second = digits(&b[17..], 2)?;
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    let mut rest = &b[19..];
    if let Some((b'.', frac)) = rest.split_first() {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        rest = &frac[n..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), hh1, hh2, b':', mm1, mm2] => {
            let hh = digits(&[*hh1, *hh2], 2)?;
            let mm = digits(&[*mm1, *mm2], 2)?;
            if hh > 23 || mm > 59 {
                return None;
            }
            let off = i64::from(hh * 3600 + mm * 60);
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };

    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some(secs - offset)
}

/// Formats unix seconds the way `metav1.Time` marshals: UTC, whole seconds,
/// e.g. `2026-11-21T15:12:23Z`.
pub fn format_rfc3339(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(DAY as i64);
    let of_day = unix_secs.rem_euclid(DAY as i64);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        (of_day / 60) % 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "2026-11-21T15:12:23+0200",
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
