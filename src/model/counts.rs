//! Bounded numbers: counts (VMs, cores, concurrency, burst), the timeout in seconds and the
//! request rate. The upper bounds keep a typo from planning millions of VMs or overflowing a
//! deadline.

use std::fmt;
use std::str::FromStr;

use super::Invalid;
use super::duration::parse_duration;

/// Most VMs per workload (per role for client/server workloads).
pub const MAX_VM_COUNT: u32 = 10_000;
/// Most concurrent VM creations.
pub const MAX_VM_CONCURRENCY: u32 = 1_000;
/// Most client-side burst above the request rate.
pub const MAX_BURST: u32 = 100_000;
/// Longest timeout: seven days.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;
/// Highest client-side request rate, per second.
pub const MAX_QPS: f64 = 100_000.0;

/// A whole number from 1 to `MAX`, written in decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Count<const MAX: u32>(u32);

/// VMs per workload.
pub type VmCount = Count<MAX_VM_COUNT>;
/// CPU cores per VM.
pub type CpuCores = Count<{ u32::MAX }>;
/// Concurrent VM creations.
pub type VmConcurrency = Count<MAX_VM_CONCURRENCY>;
/// Client-side request burst.
pub type Burst = Count<MAX_BURST>;

impl<const MAX: u32> Count<MAX> {
    /// `n` when it is within 1..=MAX.
    pub const fn new(n: u32) -> Option<Self> {
        if n >= 1 && n <= MAX {
            Some(Count(n))
        } else {
            None
        }
    }

    pub const fn get(self) -> u32 {
        self.0
    }
}

impl<const MAX: u32> FromStr for Count<MAX> {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        text.trim()
            .parse::<u32>()
            .ok()
            .and_then(Self::new)
            .ok_or_else(|| {
                Invalid::Expected(if MAX == u32::MAX {
                    "expected a whole number of at least 1".to_string()
                } else {
                    format!("expected a whole number from 1 to {MAX}")
                })
            })
    }
}

impl<const MAX: u32> fmt::Display for Count<MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A timeout in whole seconds, 0 to seven days. Zero is only meaningful when nothing waits;
/// the command that waits refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeoutSecs(u64);

impl TimeoutSecs {
    pub const fn new(secs: u64) -> Option<Self> {
        if secs <= MAX_TIMEOUT_SECS {
            Some(TimeoutSecs(secs))
        } else {
            None
        }
    }

    pub const fn get(self) -> u64 {
        self.0
    }
}

impl FromStr for TimeoutSecs {
    type Err = Invalid;

    /// Seconds (`600`) or a duration with units (`10m`, `1h30m`), as `--ramp` is written.
    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        let secs = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse::<u64>().ok()
        } else {
            parse_duration(text).map(|duration| duration.as_secs())
        };
        secs.and_then(Self::new).ok_or_else(|| {
            Invalid::Expected(format!(
                "expected seconds (600) or a duration with units (10m, 1h30m), at most {MAX_TIMEOUT_SECS} s (7 days)"
            ))
        })
    }
}

impl fmt::Display for TimeoutSecs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Client-side API requests per second, 1 to [`MAX_QPS`] (fractions allowed).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Qps(f64);

impl Qps {
    pub fn new(rate: f64) -> Option<Self> {
        (rate.is_finite() && (1.0..=MAX_QPS).contains(&rate)).then_some(Qps(rate))
    }

    pub const fn get(self) -> f64 {
        self.0
    }
}

impl FromStr for Qps {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        text.trim()
            .parse::<f64>()
            .ok()
            .and_then(Self::new)
            .ok_or_else(|| {
                Invalid::Expected(format!(
                    "expected a number of requests per second from 1 to {MAX_QPS}"
                ))
            })
    }
}

impl fmt::Display for Qps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A strict decimal integer: optional `-`, ASCII digits, nothing else (no `+`, no spaces),
/// the form workload params and the signal-params annotation hold integers in.
pub fn parse_int(value: &str) -> Option<i64> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_bounded() {
        assert_eq!("10000".parse::<VmCount>().unwrap().get(), 10_000);
        assert_eq!(" 7 ".parse::<VmCount>().unwrap().get(), 7);
        for bad in ["0", "10001", "-1", "1.5", "0x10", "", "4000000000"] {
            let err = bad.parse::<VmCount>().unwrap_err().to_string();
            assert_eq!(err, "expected a whole number from 1 to 10000", "{bad}");
        }
        assert!("4000000".parse::<CpuCores>().is_ok());
        assert_eq!(
            "0".parse::<CpuCores>().unwrap_err().to_string(),
            "expected a whole number of at least 1"
        );
    }

    #[test]
    fn timeouts_allow_zero_up_to_a_week() {
        assert_eq!("0".parse::<TimeoutSecs>().unwrap().get(), 0);
        assert_eq!("604800".parse::<TimeoutSecs>().unwrap().get(), 604_800);
        assert_eq!("10m".parse::<TimeoutSecs>().unwrap().get(), 600);
        assert_eq!(" 1h30m ".parse::<TimeoutSecs>().unwrap().get(), 5400);
        assert_eq!("168h".parse::<TimeoutSecs>().unwrap().get(), 604_800);
        for bad in [
            "604801",
            "18446744073709551615",
            "99999999999999999999h",
            "169h",
            "soon",
            "-1",
            "1.5",
            "",
            "10 m",
        ] {
            let err = bad.parse::<TimeoutSecs>().unwrap_err().to_string();
            assert!(err.contains("7 days"), "{bad}: {err}");
        }
    }

    #[test]
    fn rates_are_finite_and_bounded() {
        assert_eq!("20.5".parse::<Qps>().unwrap().get(), 20.5);
        for bad in ["0", "0.5", "1e300", "inf", "NaN", "fast", "100001"] {
            assert!(bad.parse::<Qps>().is_err(), "{bad}");
        }
    }
}
