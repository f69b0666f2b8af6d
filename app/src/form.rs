//! Numbers typed into the pages' forms. Plain functions (no server, no browser) so that they
//! are tested directly: every input becomes a number through a checked conversion and an
//! explicit range, and a bad one is a field error naming the form's field.

use std::ops::RangeInclusive;

use crate::error::AppError;

/// An optional whole number: empty is `None`; anything else must be an integer in `range`.
pub fn int_in(
    field: &str,
    value: &str,
    range: RangeInclusive<i64>,
) -> Result<Option<i64>, AppError> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let n = v
        .parse::<i64>()
        .map_err(|_| AppError::field(field, "must be a whole number"))?;
    if !range.contains(&n) {
        return Err(AppError::field(
            field,
            format!("must be between {} and {}", range.start(), range.end()),
        ));
    }
    Ok(Some(n))
}

/// An optional number of seconds in `range`, as milliseconds (the API's unit).
pub fn seconds_as_ms(
    field: &str,
    value: &str,
    range: RangeInclusive<i64>,
) -> Result<Option<i64>, AppError> {
    match int_in(field, value, range)? {
        None => Ok(None),
        Some(s) => s
            .checked_mul(1000)
            .map(Some)
            .ok_or_else(|| AppError::field(field, "is too large")),
    }
}

/// The job form's time fields, in seconds (the API's ranges, in milliseconds, divided by 1000).
pub const DURATION_S: RangeInclusive<i64> = 0..=2_592_000;
pub const MAX_RUNTIME_S: RangeInclusive<i64> = 1..=2_592_000;
pub const ABORT_TIMEOUT_S: RangeInclusive<i64> = 1..=600;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_become_milliseconds_without_overflow() {
        assert_eq!(seconds_as_ms("duration_s", "", DURATION_S), Ok(None));
        assert_eq!(
            seconds_as_ms("duration_s", " 60 ", DURATION_S),
            Ok(Some(60_000))
        );
        assert_eq!(
            seconds_as_ms("max_runtime_s", "2592000", MAX_RUNTIME_S),
            Ok(Some(2_592_000_000))
        );
        for (field, value, range) in [
            ("duration_s", "9223372036854775807", DURATION_S),
            ("duration_s", "-1", DURATION_S),
            ("duration_s", "2592001", DURATION_S),
            ("max_runtime_s", "0", MAX_RUNTIME_S),
            ("abort_timeout_s", "-9223372036854775807", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "-9223372036854775808", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "601", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "99999999999999999999", ABORT_TIMEOUT_S),
            ("abort_timeout_s", "1.5", ABORT_TIMEOUT_S),
        ] {
            let e = seconds_as_ms(field, value, range).unwrap_err();
            assert!(e.message_for(field).is_some(), "{field}={value}: {e:?}");
        }
        // Even an unbounded range cannot wrap.
        assert!(seconds_as_ms("x", "9223372036854775807", i64::MIN..=i64::MAX).is_err());
        assert!(seconds_as_ms("x", "-9223372036854775807", i64::MIN..=i64::MAX).is_err());
    }

    #[test]
    fn whole_numbers_stay_in_range() {
        assert_eq!(int_in("gpu_milli", "500", 0..=16_000), Ok(Some(500)));
        assert!(int_in("gpu_milli", "16001", 0..=16_000).is_err());
        assert!(int_in("gpu_milli", "abc", 0..=16_000).is_err());
    }
}
