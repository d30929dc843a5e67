//! The words of `virtwork churn`: which lifecycle actions it takes ([`ChurnAction`], weighted
//! in [`ChurnActions`]), how often ([`ChurnRate`]) and on what share of a run's VMs
//! ([`Share`]), each parsed once from its flag with an "expected ..." reason.
//!
//! Must not: decide when or on which VM an action happens (the scheduler in src/churn.rs does).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use super::Invalid;

/// One lifecycle action churn takes on a VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChurnAction {
    /// `virtualmachines/{name}/restart`: KubeVirt deletes the VMI and starts a new one.
    Restart,
    /// `virtualmachines/{name}/stop`, then `/start` once the VMI is gone.
    StopStart,
    /// A `VirtualMachineInstanceMigration` of the VM's VMI (live migration).
    Migrate,
}

impl ChurnAction {
    /// Every action, in the order reports list them.
    pub const ALL: [ChurnAction; 3] = [
        ChurnAction::Restart,
        ChurnAction::StopStart,
        ChurnAction::Migrate,
    ];

    /// The flag spelling (`restart`, `stop-start`, `migrate`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChurnAction::Restart => "restart",
            ChurnAction::StopStart => "stop-start",
            ChurnAction::Migrate => "migrate",
        }
    }

    /// The JSON key (`restart`, `stop_start`, `migrate`).
    pub fn key(self) -> &'static str {
        match self {
            ChurnAction::Restart => "restart",
            ChurnAction::StopStart => "stop_start",
            ChurnAction::Migrate => "migrate",
        }
    }
}

impl fmt::Display for ChurnAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const ACTIONS_FORM: &str = "expected a comma-separated list of restart, stop-start and migrate, \
each optionally weighted as action=N (N from 1 to 1000), e.g. restart=3,migrate";

/// `--actions`: the actions to take and their relative weights (each 1–1000), in flag order,
/// each action at most once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnActions(Vec<(ChurnAction, u32)>);

impl ChurnActions {
    /// The actions with their weights, in the order given.
    pub fn weighted(&self) -> &[(ChurnAction, u32)] {
        &self.0
    }
}

impl Default for ChurnActions {
    /// All three, equally weighted.
    fn default() -> Self {
        ChurnActions(ChurnAction::ALL.iter().map(|a| (*a, 1)).collect())
    }
}

impl FromStr for ChurnActions {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let invalid = |extra: String| Invalid::Expected(format!("{ACTIONS_FORM}{extra}"));
        let mut out: Vec<(ChurnAction, u32)> = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (name, weight) = match item.split_once('=') {
                Some((name, weight)) => (name.trim(), Some(weight.trim())),
                None => (item, None),
            };
            let action = ChurnAction::ALL
                .into_iter()
                .find(|a| a.as_str() == name)
                .ok_or_else(|| {
                    let names = ChurnAction::ALL.map(ChurnAction::as_str);
                    invalid(match super::suggest(name, &names) {
                        Some(near) => format!(" (did you mean {near:?}?)"),
                        None => String::new(),
                    })
                })?;
            let weight = match weight {
                None => 1,
                Some(w) => w
                    .parse::<u32>()
                    .ok()
                    .filter(|w| (1..=1000).contains(w))
                    .ok_or_else(|| invalid(String::new()))?,
            };
            if out.iter().any(|(a, _)| *a == action) {
                return Err(invalid(format!(" ({action} is given twice)")));
            }
            out.push((action, weight));
        }
        Ok(ChurnActions(out))
    }
}

impl fmt::Display for ChurnActions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|(a, w)| match w {
                1 => a.to_string(),
                w => format!("{a}={w}"),
            })
            .collect();
        f.write_str(&items.join(","))
    }
}

/// Longest `--rate` count per unit.
pub const MAX_CHURN_RATE: u32 = 100_000;

const RATE_FORM: &str = "expected actions per time unit such as 30/m, 2/s or 100/h (a bare \
number is per minute), from 1 to 100000 per unit";

/// `--rate`: actions started per second, minute or hour, evenly spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChurnRate {
    count: u32,
    per: Duration,
}

impl ChurnRate {
    /// `count` actions every `per` (1 s, 1 min or 1 h), `count` within 1..=[`MAX_CHURN_RATE`].
    pub fn new(count: u32, per: Duration) -> Option<Self> {
        let unit = [1, 60, 3600].contains(&per.as_secs()) && per.subsec_nanos() == 0;
        ((1..=MAX_CHURN_RATE).contains(&count) && unit).then_some(ChurnRate { count, per })
    }

    /// Time between two action starts.
    pub fn interval(self) -> Duration {
        self.per / self.count
    }

    /// Actions per minute (for reports).
    pub fn per_minute(self) -> f64 {
        f64::from(self.count) * 60.0 / self.per.as_secs_f64()
    }

    /// Actions in `duration`: the whole intervals that start before it ends.
    pub fn actions_in(self, duration: Duration) -> u64 {
        let interval = self.interval().as_nanos().max(1);
        duration.as_nanos().div_ceil(interval) as u64
    }
}

impl FromStr for ChurnRate {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        let (count, unit) = text.split_once('/').unwrap_or((text, "m"));
        let per = match unit.trim() {
            "s" | "sec" | "second" => 1,
            "m" | "min" | "minute" => 60,
            "h" | "hour" => 3600,
            _ => return Err(Invalid::Expected(RATE_FORM.to_string())),
        };
        count
            .trim()
            .parse::<u32>()
            .ok()
            .and_then(|n| ChurnRate::new(n, Duration::from_secs(per)))
            .ok_or_else(|| Invalid::Expected(RATE_FORM.to_string()))
    }
}

impl fmt::Display for ChurnRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// `--share`: the percentage (1–100) of a run's running VMs churn acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Share(u8);

impl Share {
    pub const ALL: Share = Share(100);

    pub fn new(percent: u8) -> Option<Self> {
        (1..=100).contains(&percent).then_some(Share(percent))
    }

    pub fn percent(self) -> u8 {
        self.0
    }

    /// How many of `n` VMs the share covers: rounded up, so any share of a non-empty fleet
    /// touches at least one VM.
    pub fn of(self, n: usize) -> usize {
        (n * usize::from(self.0)).div_ceil(100)
    }
}

impl FromStr for Share {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        let text = text.trim();
        text.strip_suffix('%')
            .unwrap_or(text)
            .trim()
            .parse::<u8>()
            .ok()
            .and_then(Share::new)
            .ok_or_else(|| {
                Invalid::Expected("expected a percentage from 1 to 100, e.g. 25 or 25%".into())
            })
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

/// `--seed`: the seed of churn's VM selection and action draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChurnSeed(pub u64);

impl FromStr for ChurnSeed {
    type Err = Invalid;

    fn from_str(text: &str) -> Result<Self, Invalid> {
        text.trim().parse::<u64>().map(ChurnSeed).map_err(|_| {
            Invalid::Expected(format!("expected a whole number from 0 to {}", u64::MAX))
        })
    }
}

impl fmt::Display for ChurnSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_read_names_and_weights() {
        let parsed: ChurnActions = "restart=3, migrate".parse().unwrap();
        assert_eq!(
            parsed.weighted(),
            &[(ChurnAction::Restart, 3), (ChurnAction::Migrate, 1)]
        );
        assert_eq!(parsed.to_string(), "restart=3,migrate");
        assert_eq!(
            ChurnActions::default().to_string(),
            "restart,stop-start,migrate"
        );
        let typo = "restrat".parse::<ChurnActions>().unwrap_err().to_string();
        assert!(typo.contains("did you mean \"restart\""), "{typo}");
        for bad in ["", "restart,restart", "migrate=0", "stop=2", "restart=x"] {
            let err = bad.parse::<ChurnActions>().unwrap_err().to_string();
            assert!(
                err.starts_with("expected a comma-separated list"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn rates_read_units_and_default_to_per_minute() {
        let per_minute: ChurnRate = "30".parse().unwrap();
        assert_eq!(per_minute, "30/m".parse().unwrap());
        assert_eq!(per_minute.interval(), Duration::from_secs(2));
        assert_eq!("2/s".parse::<ChurnRate>().unwrap().per_minute(), 120.0);
        assert_eq!("60/h".parse::<ChurnRate>().unwrap().to_string(), "60/h");
        assert_eq!(
            "120/m"
                .parse::<ChurnRate>()
                .unwrap()
                .actions_in(Duration::from_secs(5)),
            10
        );
        for bad in ["0/m", "1.5/s", "3/d", "x", "100001/s", "-1"] {
            let err = bad.parse::<ChurnRate>().unwrap_err().to_string();
            assert!(
                err.starts_with("expected actions per time unit"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn shares_round_up_and_stay_in_range() {
        assert_eq!("25%".parse::<Share>().unwrap().of(10), 3);
        assert_eq!("1".parse::<Share>().unwrap().of(10), 1);
        assert_eq!(Share::ALL.of(7), 7);
        assert_eq!("50".parse::<Share>().unwrap().of(0), 0);
        for bad in ["0", "101", "half", "-5%"] {
            assert!(bad.parse::<Share>().is_err(), "{bad}");
        }
    }
}
