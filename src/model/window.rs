//! A Prometheus range window (`verify --window`): whole seconds, at least one, written in
//! Prometheus' duration grammar (`90s`, `5m`, `1h30m`) and printed in its shortest spelling.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::Invalid;

/// A range-vector window (`--window`), at least one second, whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(u64);

impl Window {
    /// The window used when `--window` is not given.
    pub const DEFAULT: Window = Window(300);

    /// A window of `seconds` (at least 1).
    pub fn from_secs(seconds: u64) -> Option<Self> {
        (seconds >= 1).then_some(Window(seconds))
    }

    pub fn as_secs(self) -> u64 {
        self.0
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_secs(self.0)
    }

    /// Parses a Prometheus duration made of whole units, largest first: `90s`, `5m`,
    /// `1h30m`, `2d`. Returns a message naming the accepted form on failure.
    pub fn parse(text: &str) -> Result<Self, String> {
        const FORM: &str = "a duration such as 30s, 5m or 1h30m (units s, m, h, d, w; at least 1s)";
        let units: [(&str, u64); 5] = [
            ("w", 604_800),
            ("d", 86_400),
            ("h", 3_600),
            ("m", 60),
            ("s", 1),
        ];
        let mut rest = text.trim();
        if rest.is_empty() {
            return Err(FORM.to_string());
        }
        let mut total: u64 = 0;
        let mut last_rank = usize::MAX;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(FORM.to_string());
            }
            let number: u64 = rest[..digits].parse().map_err(|_| FORM.to_string())?;
            rest = &rest[digits..];
            let Some((rank, (unit, secs))) = units
                .iter()
                .enumerate()
                .find(|(_, (u, _))| rest.starts_with(u) && !rest[u.len()..].starts_with('s'))
            else {
                return Err(FORM.to_string());
            };
            // Units must be given largest first and once each, as Prometheus requires.
            if last_rank != usize::MAX && rank <= last_rank {
                return Err(FORM.to_string());
            }
            last_rank = rank;
            rest = &rest[unit.len()..];
            total = number
                .checked_mul(*secs)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(|| FORM.to_string())?;
        }
        Window::from_secs(total).ok_or_else(|| FORM.to_string())
    }
}

impl fmt::Display for Window {
    /// The shortest Prometheus spelling: `5m`, `90s` → `1m30s`, `3600` → `1h`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut left = self.0;
        for (unit, secs) in [
            ("w", 604_800u64),
            ("d", 86_400),
            ("h", 3_600),
            ("m", 60),
            ("s", 1),
        ] {
            if left >= secs {
                write!(f, "{}{unit}", left / secs)?;
                left %= secs;
            }
        }
        Ok(())
    }
}

impl FromStr for Window {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        Window::parse(text).map_err(|form| Invalid::Expected(format!("expected {form}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_like_prometheus_and_print_shortest() {
        for (text, secs) in [
            ("5m", 300),
            ("90s", 90),
            ("1h30m", 5400),
            ("2d", 172_800),
            ("1w", 604_800),
        ] {
            assert_eq!(Window::parse(text).unwrap().as_secs(), secs, "{text}");
        }
        for bad in [
            "", "5", "m", "0s", "5mm", "30s5m", "1.5m", "5ms", "-5m", "5 m", "5x",
        ] {
            assert!(Window::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Window::from_secs(90).unwrap().to_string(), "1m30s");
        assert_eq!(Window::from_secs(3600).unwrap().to_string(), "1h");
        assert_eq!(Window::DEFAULT.to_string(), "5m");
    }
}
