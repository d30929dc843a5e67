//! Boot-storm control and waiting values: how many VMs may be starting at once
//! (`--max-starting`), how long creation is spread over (`--ramp`), and how long a VM may sit
//! in a state that needs someone to act before the wait gives up (`--fail-fast`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::Invalid;
use super::counts::{Count, MAX_TIMEOUT_SECS};
use super::duration::parse_duration;

/// Most VMs allowed to be starting (created, not yet ready) at once.
pub const MAX_STARTING: u32 = 50_000;

/// `--max-starting`: VMs created but not yet ready, at most.
pub type MaxStarting = Count<MAX_STARTING>;

/// How creation is paced: both limits may apply at once; `Pacing::default()` is unpaced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pacing {
    pub max_starting: Option<MaxStarting>,
    pub ramp: Option<Ramp>,
}

/// `--ramp`: a duration of 1 s to 7 days written with units (`90s`, `10m`, `1h30m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ramp(Duration);

impl Ramp {
    pub fn new(duration: Duration) -> Option<Self> {
        (duration >= Duration::from_secs(1) && duration.as_secs() <= MAX_TIMEOUT_SECS)
            .then_some(Ramp(duration))
    }

    pub const fn get(self) -> Duration {
        self.0
    }
}

const RAMP_FORM: &str =
    "expected a duration with units such as 90s, 10m or 1h30m (h, m, s), from 1s to 7 days";

impl FromStr for Ramp {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Invalid::Expected(format!(
                "{RAMP_FORM} (a bare number has no unit: did you mean \"{text}s\" or \"{text}m\"?)"
            )));
        }
        parse_duration(text)
            .and_then(Ramp::new)
            .ok_or_else(|| Invalid::Expected(RAMP_FORM.to_string()))
    }
}

/// `--fail-fast[=GRACE]`: off, or how long a VM may stay in a stuck state (ErrImagePull,
/// ErrorUnschedulable, DataVolumeError, CrashLoopBackOff, ...) before the wait gives up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailFast(Option<Ramp>);

impl FailFast {
    /// The grace period of a bare `--fail-fast`: long enough for a registry or a scheduler
    /// hiccup to clear (the kubelet retries a pull after 10 s, 20 s, 40 s), far shorter than
    /// the default `--timeout`.
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);

    /// The grace period; None: off (wait until `--timeout`).
    pub fn grace(self) -> Option<Duration> {
        self.0.map(Ramp::get)
    }
}

const FAIL_FAST_FORM: &str = "expected on, off, or a grace period with units such as 30s, 2m \
     or 1h (h, m, s), from 1s to 7 days";

impl FromStr for FailFast {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let word = text.trim().to_ascii_lowercase();
        match word.as_str() {
            "on" | "true" | "yes" => return Ok(FailFast(Ramp::new(Self::DEFAULT_GRACE))),
            "off" | "false" | "no" => return Ok(FailFast(None)),
            _ => {}
        }
        if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Invalid::Expected(format!(
                "{FAIL_FAST_FORM} (a bare number has no unit: did you mean \"{word}s\"?)"
            )));
        }
        parse_duration(&word)
            .and_then(Ramp::new)
            .map(|grace| FailFast(Some(grace)))
            .ok_or_else(|| Invalid::Expected(FAIL_FAST_FORM.to_string()))
    }
}

impl fmt::Display for FailFast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(grace) => grace.fmt(f),
            None => f.write_str("off"),
        }
    }
}

impl fmt::Display for Ramp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 || secs == 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_read_units_and_print_back() {
        for (text, secs, shown) in [
            ("10m", 600, "10m"),
            ("90s", 90, "1m30s"),
            ("1h30m", 5400, "1h30m"),
            (" 2h ", 7200, "2h"),
            ("1m5s", 65, "1m5s"),
        ] {
            let ramp: Ramp = text.parse().unwrap();
            assert_eq!(ramp.get(), Duration::from_secs(secs), "{text}");
            assert_eq!(ramp.to_string(), shown);
        }
        for bad in [
            "", "0s", "10x", "m", "5m1h", "1m1m", "8d", "169h", "-5m", "1.5m",
        ] {
            let err = bad.parse::<Ramp>().unwrap_err().to_string();
            assert!(
                err.starts_with("expected a duration with units"),
                "{bad}: {err}"
            );
        }
        let bare = "30".parse::<Ramp>().unwrap_err().to_string();
        assert!(bare.contains("did you mean \"30s\""), "{bare}");
    }

    #[test]
    fn fail_fast_is_off_on_or_a_grace_period() {
        assert_eq!("off".parse::<FailFast>().unwrap().grace(), None);
        assert_eq!(FailFast::default().grace(), None);
        assert_eq!(
            "on".parse::<FailFast>().unwrap().grace(),
            Some(FailFast::DEFAULT_GRACE)
        );
        let two_minutes: FailFast = "2m".parse().unwrap();
        assert_eq!(two_minutes.grace(), Some(Duration::from_secs(120)));
        assert_eq!(two_minutes.to_string(), "2m");
        assert_eq!("True".parse::<FailFast>().unwrap().to_string(), "1m");
        let bare = "30".parse::<FailFast>().unwrap_err().to_string();
        assert!(bare.contains("did you mean \"30s\""), "{bare}");
        for bad in ["", "soon", "0s", "8d"] {
            let err = bad.parse::<FailFast>().unwrap_err().to_string();
            assert!(
                err.starts_with("expected on, off, or a grace period"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn max_starting_is_a_bounded_count() {
        assert_eq!("50".parse::<MaxStarting>().unwrap().get(), 50);
        assert!("0".parse::<MaxStarting>().is_err());
    }
}
