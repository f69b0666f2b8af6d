//! Calendar arithmetic for display and filters, with no clock and no platform dependency
//! (it runs in the browser too).

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2026-12-02 17:04:05 UTC`
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]Z` (UTC) or integer epoch milliseconds.
/// `end_of_day` makes a bare date mean its last millisecond (for inclusive upper bounds).
pub fn parse_time(input: &str, end_of_day: bool) -> Option<i64> {
    let s = input.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Some(ms);
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.trim_end_matches('Z'))),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let day_ms = days_from_civil(y, m, d) * 86_400_000;
    match time {
        None if end_of_day => Some(day_ms + 86_399_999),
        None => Some(day_ms),
        Some(t) => {
            let mut hms = t.split(':');
            let h: i64 = hms.next()?.parse().ok()?;
            let mi: i64 = hms.next()?.parse().ok()?;
            let sec: i64 = match hms.next() {
                Some(x) => x.split('.').next()?.parse().ok()?,
                None => 0,
            };
            if h > 23 || mi > 59 || sec > 60 {
                return None;
            }
            Some(day_ms + ((h * 60 + mi) * 60 + sec) * 1000)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_ms(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_ms(1_795_975_445_000), "2026-11-29 18:04:05 UTC");
        assert_eq!(format_ms(951_782_400_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn parses_dates_and_round_trips() {
        assert_eq!(parse_time("1970-01-01", false), Some(0));
        assert_eq!(parse_time("1970-01-01", true), Some(86_399_999));
        assert_eq!(
            parse_time("2000-02-29T00:00:00Z", false),
            Some(951_782_400_000)
        );
        assert_eq!(parse_time("12345", false), Some(12345));
        for ms in [0_i64, 951_782_400_000, 1_795_975_445_000, 4_102_444_800_000] {
            let text = format_ms(ms).replace(" UTC", "").replacen(' ', "T", 1);
            assert_eq!(parse_time(&text, false), Some(ms), "{text}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-12-32",
            "2026-12-01T25:00",
            "2026-12",
        ] {
            assert_eq!(parse_time(bad, false), None, "{bad}");
        }
    }
}
