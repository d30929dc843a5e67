//! The duration grammar of the command line (`--ramp`, `--fail-fast`, timeouts): whole numbers
//! each followed by `h`, `m` or `s`, largest unit first, each unit at most once (`1h30m`,
//! `10m`, `90s`).
//!
//! Owns that one grammar, so every flag that takes a duration reads it the same way. Must not:
//! bound or name the value (each type that reads a duration states its own range and form).

use std::time::Duration;

/// `1h30m`, `10m`, `90s`: whole numbers each followed by h, m or s, largest unit first,
/// each unit at most once.
pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    let mut any = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        if number.is_empty() || unit >= last_unit {
            return None;
        }
        let n: u64 = number.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        number.clear();
        last_unit = unit;
        any = true;
    }
    (any && number.is_empty()).then(|| Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_come_largest_first_each_once() {
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        for bad in ["", "90", "5m1h", "1m1m", "m", "1.5m", "-5m", "10x"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
