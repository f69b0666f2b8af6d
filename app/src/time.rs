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

/// The earliest instant [`parse_time`] accepts: 0000-01-01T00:00:00Z.
pub const MIN_MS: i64 = -62_167_219_200_000;
/// The latest instant [`parse_time`] accepts: 9999-12-31T23:59:59.999Z.
pub const MAX_MS: i64 = 253_402_300_799_999;

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An unsigned decimal of 1 to `max_len` ASCII digits (no sign, no spaces).
fn digits(text: &str, max_len: usize) -> Option<i64> {
    if text.is_empty() || text.len() > max_len || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Parses `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS[.fff]]Z` (UTC) or integer epoch milliseconds,
/// between the years 0000 and 9999 ([`MIN_MS`]..=[`MAX_MS`]); anything else is `None`.
/// `end_of_day` makes a bare date mean its last millisecond (for inclusive upper bounds).
pub fn parse_time(input: &str, end_of_day: bool) -> Option<i64> {
    let s = input.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(ms) = s.parse::<i64>() {
        return (MIN_MS..=MAX_MS).contains(&ms).then_some(ms);
    }
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t.strip_suffix('Z').unwrap_or(t))),
        None => (s, None),
    };
    let mut parts = date.split('-');
    let y = digits(parts.next()?, 4)?;
    let m = u32::try_from(digits(parts.next()?, 2)?).ok()?;
    let d = u32::try_from(digits(parts.next()?, 2)?).ok()?;
    if parts.next().is_some() || !(1..=12).contains(&m) || !(1..=days_in_month(y, m)).contains(&d) {
        return None;
    }
    // Years 0..=9999 keep every product below well inside i64.
    let day_ms = days_from_civil(y, m, d).checked_mul(86_400_000)?;
    let ms = match time {
        None if end_of_day => day_ms.checked_add(86_399_999)?,
        None => day_ms,
        Some(t) => {
            let mut hms = t.split(':');
            let h = digits(hms.next()?, 2)?;
            let mi = digits(hms.next()?, 2)?;
            let sec = match hms.next() {
                Some(x) => {
                    let (whole, frac) = x.split_once('.').unwrap_or((x, "0"));
                    digits(frac, 9)?;
                    digits(whole, 2)?
                }
                None => 0,
            };
            if hms.next().is_some() || h > 23 || mi > 59 || sec > 60 {
                return None;
            }
            day_ms.checked_add(((h * 60 + mi) * 60 + sec) * 1000)?
        }
    };
    (MIN_MS..=MAX_MS).contains(&ms).then_some(ms)
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
        assert_eq!(parse_time("2024-02-29", false), Some(1_709_164_800_000));
        assert_eq!(
            parse_time("2026-01-01T05:03:00.250Z", false),
            Some(1_767_243_780_000)
        );
        assert_eq!(parse_time("0000-01-01", false), Some(MIN_MS));
        assert_eq!(parse_time("9999-12-31", true), Some(MAX_MS));
        assert_eq!(parse_time(&MAX_MS.to_string(), false), Some(MAX_MS));
        assert_eq!(parse_time(&(MAX_MS + 1).to_string(), false), None);
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
            "2026-02-30",
            // Out of range: the year overflowed the millisecond arithmetic.
            "99999999999999-01-01",
            "10000-01-01",
            "9223372036854775807",
            "-9223372036854775808",
            // Signs are not digits: negative hours, minutes or seconds.
            "2026-01-01T-5:-3:00Z",
            "2026-01-01T05:-3:00Z",
            "2026-01-01T05:03:-1Z",
            "2026-01-01T+5:03:00Z",
            "+2026-01-01",
            "2026-01-01T05:03:00:00Z",
            "2026-01-01T05:03:00.-5Z",
        ] {
            assert_eq!(parse_time(bad, false), None, "{bad}");
        }
    }
}
