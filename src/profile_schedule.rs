//! Load profiles: how a workload's intensity changes over time, as a pure schedule.
//!
//! Owns the shapes (`step`, `ramp`, `sine`, `spike`; `steady` is the absence of a profile)
//! with their checked parameters, the [`Schedule`] a guest driver follows (levels at offsets in
//! seconds from the profile's start, repeating every period or held after the last one), the
//! level expected at any moment (what the driver runs, and what a check of the guest's load
//! compares against), and the duration grammar of the profile params (`90`, `90s`, `10m`, `1h`).
//! A level is a plain number whose meaning belongs to the workload (percent of each CPU, IOPS,
//! ...); 0 means "no load process at all".
//!
//! Must not: know workloads, param names or the guest; do I/O.

use std::fmt::Write as _;

/// The shape names a user may give, `steady` (no profile) first.
pub const SHAPES: &[&str] = &["steady", "step", "ramp", "sine", "spike"];

/// Shortest period, ramp or burst: the driver's clock ticks in whole seconds and a phase
/// change reaches the load tool within about a second, so shorter phases would be mostly
/// transition.
pub const MIN_SECONDS: u64 = 10;
/// Longest period or ramp: a week.
pub const MAX_SECONDS: u64 = 7 * 24 * 3600;
/// Most phases one sine period or one ramp is cut into: enough for a smooth shape in any
/// metric scraped every 30 s, few enough for the driver to restart the load tool rarely.
pub const MAX_STEPS: u64 = 60;
/// Shortest phase of a sine or a ramp.
const MIN_STEP_SECONDS: u64 = 5;

/// The accepted form of a duration, for error messages.
pub const DURATION_FORM: &str = "a duration in seconds, or with an s, m or h suffix (e.g. 90, 90s, 10m, 1h), from 10s to 7 days";

/// Seconds of a duration like `90`, `90s`, `10m` or `1h`, within [`MIN_SECONDS`]..=[`MAX_SECONDS`].
pub fn parse_duration(value: &str) -> Option<u64> {
    let (digits, unit) = match value.as_bytes().last()? {
        b's' => (&value[..value.len() - 1], 1),
        b'm' => (&value[..value.len() - 1], 60),
        b'h' => (&value[..value.len() - 1], 3600),
        _ => (value, 1),
    };
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = digits.parse::<u64>().ok()? * unit;
    (MIN_SECONDS..=MAX_SECONDS)
        .contains(&seconds)
        .then_some(seconds)
}

/// The two levels a profile moves between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    pub low: u32,
    pub high: u32,
}

/// A load profile other than `steady`. Build one with its checked constructor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadProfile {
    /// `high` for the first `duty_percent` of every `period`, then `low`.
    Step {
        levels: Levels,
        period: u64,
        duty_percent: u32,
    },
    /// From `low` to `high` in even steps over `duration`, then `high` for good.
    Ramp { levels: Levels, duration: u64 },
    /// `low` at the start of every `period`, `high` at its middle, following a cosine.
    Sine { levels: Levels, period: u64 },
    /// `low`, with a burst of `high` lasting `burst` at the end of every `period`.
    Spike {
        levels: Levels,
        period: u64,
        burst: u64,
    },
}

fn check_levels(levels: Levels) -> Result<Levels, String> {
    if levels.low >= levels.high {
        return Err(format!(
            "the low level ({}) must be below the high level ({})",
            levels.low, levels.high
        ));
    }
    Ok(levels)
}

impl LoadProfile {
    /// A step profile; `duty_percent` is the share of each period at the high level (1-99).
    pub fn step(levels: Levels, period: u64, duty_percent: u32) -> Result<Self, String> {
        if !(1..=99).contains(&duty_percent) {
            return Err(format!(
                "the duty cycle must be from 1 to 99 percent, got {duty_percent}"
            ));
        }
        let high_for = period * u64::from(duty_percent) / 100;
        if high_for < MIN_STEP_SECONDS || period - high_for < MIN_STEP_SECONDS {
            return Err(format!(
                "a period of {period} s at {duty_percent} % leaves a phase shorter than {MIN_STEP_SECONDS} s; lengthen the period or move the duty cycle toward 50"
            ));
        }
        Ok(LoadProfile::Step {
            levels: check_levels(levels)?,
            period,
            duty_percent,
        })
    }

    /// A ramp from `low` to `high` over `duration` seconds, then held.
    pub fn ramp(levels: Levels, duration: u64) -> Result<Self, String> {
        Ok(LoadProfile::Ramp {
            levels: check_levels(levels)?,
            duration,
        })
    }

    /// A sine (cosine from `low`) with the given `period` seconds.
    pub fn sine(levels: Levels, period: u64) -> Result<Self, String> {
        Ok(LoadProfile::Sine {
            levels: check_levels(levels)?,
            period,
        })
    }

    /// Bursts of `burst` seconds at `high` every `period` seconds, `low` in between.
    pub fn spike(levels: Levels, period: u64, burst: u64) -> Result<Self, String> {
        if burst + MIN_STEP_SECONDS > period {
            return Err(format!(
                "a burst of {burst} s does not fit a period of {period} s with {MIN_STEP_SECONDS} s at the low level; shorten the burst or lengthen the period"
            ));
        }
        Ok(LoadProfile::Spike {
            levels: check_levels(levels)?,
            period,
            burst,
        })
    }

    /// The shape's name, as a user gives it.
    /// The two levels the profile moves between.
    pub fn levels(&self) -> Levels {
        match *self {
            LoadProfile::Step { levels, .. }
            | LoadProfile::Ramp { levels, .. }
            | LoadProfile::Sine { levels, .. }
            | LoadProfile::Spike { levels, .. } => levels,
        }
    }

    /// The length of one cycle; None for a ramp, which holds its last level.
    pub fn period(&self) -> Option<u64> {
        match *self {
            LoadProfile::Step { period, .. }
            | LoadProfile::Sine { period, .. }
            | LoadProfile::Spike { period, .. } => Some(period),
            LoadProfile::Ramp { .. } => None,
        }
    }

    pub fn shape(&self) -> &'static str {
        match self {
            LoadProfile::Step { .. } => "step",
            LoadProfile::Ramp { .. } => "ramp",
            LoadProfile::Sine { .. } => "sine",
            LoadProfile::Spike { .. } => "spike",
        }
    }

    /// One line saying what the profile does.
    pub fn describe(&self) -> String {
        match *self {
            LoadProfile::Step {
                levels,
                period,
                duty_percent,
            } => format!(
                "step: level {} for {duty_percent} % of every {period} s, then {}",
                levels.high, levels.low
            ),
            LoadProfile::Ramp { levels, duration } => format!(
                "ramp: level {} to {} over {duration} s, then held",
                levels.low, levels.high
            ),
            LoadProfile::Sine { levels, period } => format!(
                "sine: level {} to {} and back every {period} s",
                levels.low, levels.high
            ),
            LoadProfile::Spike {
                levels,
                period,
                burst,
            } => format!(
                "spike: level {}, with {burst} s at {} at the end of every {period} s",
                levels.low, levels.high
            ),
        }
    }

    /// The phases the driver follows.
    pub fn schedule(&self) -> Schedule {
        match *self {
            LoadProfile::Step {
                levels,
                period,
                duty_percent,
            } => Schedule::repeating(
                period,
                vec![
                    Phase::new(0, levels.high),
                    Phase::new(period * u64::from(duty_percent) / 100, levels.low),
                ],
            ),
            LoadProfile::Ramp { levels, duration } => ramp_schedule(levels, duration),
            LoadProfile::Sine { levels, period } => sine_schedule(levels, period),
            LoadProfile::Spike {
                levels,
                period,
                burst,
            } => Schedule::repeating(
                period,
                vec![
                    Phase::new(0, levels.low),
                    Phase::new(period - burst, levels.high),
                ],
            ),
        }
    }
}

/// How many even steps `span` seconds and `rise` levels are cut into.
fn steps(span: u64, rise: u32) -> u64 {
    (span / MIN_STEP_SECONDS)
        .min(MAX_STEPS)
        .min(u64::from(rise))
        .max(1)
}

fn ramp_schedule(levels: Levels, duration: u64) -> Schedule {
    let rise = levels.high - levels.low;
    let n = steps(duration, rise);
    let mut phases: Vec<Phase> = (0..n)
        .map(|i| {
            let level = u64::from(levels.low) + u64::from(rise) * i / n;
            Phase::new(duration * i / n, level as u32)
        })
        .collect();
    phases.push(Phase::new(duration, levels.high));
    Schedule::held(phases)
}

fn sine_schedule(levels: Levels, period: u64) -> Schedule {
    let rise = f64::from(levels.high - levels.low);
    let n = steps(period, u32::MAX);
    let phases = (0..n)
        .map(|i| {
            // The curve's value where the step starts: the first step is exactly `low` and,
            // for an even count, the middle one exactly `high`.
            let angle = std::f64::consts::TAU * i as f64 / n as f64;
            let level = f64::from(levels.low) + rise * (1.0 - angle.cos()) / 2.0;
            Phase::new(period * i / n, level.round() as u32)
        })
        .collect();
    Schedule::repeating(period, phases)
}

/// From `at` seconds after the profile's start (within a period, for a repeating schedule),
/// the load runs at `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub at: u64,
    pub level: u32,
}

impl Phase {
    pub fn new(at: u64, level: u32) -> Self {
        Phase { at, level }
    }
}

/// Phases in time order, the first at 0, neighbours at different levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub phases: Vec<Phase>,
    /// `Some(period)`: the phases repeat every period; `None`: the last one is held.
    pub repeat_every: Option<u64>,
}

impl Schedule {
    fn repeating(period: u64, phases: Vec<Phase>) -> Self {
        Schedule {
            phases: merged(phases),
            repeat_every: Some(period),
        }
    }

    fn held(phases: Vec<Phase>) -> Self {
        Schedule {
            phases: merged(phases),
            repeat_every: None,
        }
    }

    /// The level `elapsed` seconds after the profile's start.
    pub fn level_at(&self, elapsed: u64) -> u32 {
        let t = self.repeat_every.map_or(elapsed, |period| elapsed % period);
        self.phases
            .iter()
            .take_while(|phase| phase.at <= t)
            .last()
            .map_or(0, |phase| phase.level)
    }

    /// The text the guest driver reads: `#` comment lines, `repeat <seconds>` (0 = hold the
    /// last phase), then one `<offset seconds> <level>` line per phase.
    pub fn render(&self, comment: &str) -> String {
        let mut out = String::new();
        for line in comment.lines() {
            let _ = writeln!(out, "# {line}");
        }
        let _ = writeln!(out, "repeat {}", self.repeat_every.unwrap_or(0));
        for phase in &self.phases {
            let _ = writeln!(out, "{} {}", phase.at, phase.level);
        }
        out
    }
}

/// Drops phases that repeat their predecessor's level (a sine's flat top, a ramp's rounding).
fn merged(phases: Vec<Phase>) -> Vec<Phase> {
    let mut out: Vec<Phase> = Vec::with_capacity(phases.len());
    for phase in phases {
        if out.last().is_none_or(|last| last.level != phase.level) {
            out.push(phase);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEVELS: Levels = Levels { low: 20, high: 90 };

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Some(90));
        assert_eq!(parse_duration("90s"), Some(90));
        assert_eq!(parse_duration("10m"), Some(600));
        assert_eq!(parse_duration("1h"), Some(3600));
        assert_eq!(parse_duration("168h"), Some(MAX_SECONDS));
        for bad in [
            "", "s", "9s", "169h", "1d", "1.5m", "-10", "10 m", "1h30m", "99999999",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_step_is_high_for_the_duty_cycle_then_low_every_period() {
        let schedule = LoadProfile::step(LEVELS, 60, 25).unwrap().schedule();
        assert_eq!(schedule.phases, vec![Phase::new(0, 90), Phase::new(15, 20)]);
        let levels: Vec<u32> = [0, 14, 15, 59, 60, 74, 75, 3600 + 14]
            .iter()
            .map(|t| schedule.level_at(*t))
            .collect();
        assert_eq!(levels, [90, 90, 20, 20, 90, 90, 20, 90]);
        assert_eq!(schedule.render("cpu"), "# cpu\nrepeat 60\n0 90\n15 20\n");
    }

    #[test]
    fn a_ramp_climbs_in_even_steps_and_holds_the_high_level() {
        let schedule = LoadProfile::ramp(LEVELS, 600).unwrap().schedule();
        assert_eq!(schedule.repeat_every, None);
        assert_eq!(schedule.phases.len(), 61);
        assert_eq!(schedule.phases[0], Phase::new(0, 20));
        assert_eq!(schedule.phases[30], Phase::new(300, 55));
        assert_eq!(schedule.phases[60], Phase::new(600, 90));
        assert_eq!(schedule.level_at(599), 88);
        assert_eq!(schedule.level_at(10_000_000), 90);
        // Fewer levels than steps: one step per level, none repeated.
        let short = LoadProfile::ramp(Levels { low: 1, high: 4 }, 600)
            .unwrap()
            .schedule();
        assert_eq!(
            short.phases,
            vec![
                Phase::new(0, 1),
                Phase::new(200, 2),
                Phase::new(400, 3),
                Phase::new(600, 4)
            ]
        );
    }

    #[test]
    fn a_sine_starts_low_peaks_mid_period_and_repeats() {
        let schedule = LoadProfile::sine(Levels { low: 0, high: 100 }, 3600)
            .unwrap()
            .schedule();
        assert_eq!(schedule.repeat_every, Some(3600));
        assert_eq!(schedule.level_at(0), 0);
        assert_eq!(schedule.level_at(1800), 100);
        assert_eq!(schedule.level_at(900), 50);
        assert_eq!(schedule.level_at(3600 + 1800), 100);
        assert!(schedule.phases.len() <= MAX_STEPS as usize);
        // A short period: one step per 5 s.
        let short = LoadProfile::sine(LEVELS, 60).unwrap().schedule();
        assert_eq!(short.phases.len(), 12);
        assert!(short.phases.windows(2).all(|w| w[1].at - w[0].at == 5));
        assert_eq!(short.level_at(30), 90);
    }

    #[test]
    fn a_spike_bursts_at_the_end_of_every_period() {
        let schedule = LoadProfile::spike(LEVELS, 300, 30).unwrap().schedule();
        assert_eq!(
            schedule.phases,
            vec![Phase::new(0, 20), Phase::new(270, 90)]
        );
        assert_eq!(schedule.level_at(299), 90);
        assert_eq!(schedule.level_at(300), 20);
    }

    #[test]
    fn impossible_shapes_say_why() {
        let inverted = Levels { low: 90, high: 20 };
        assert_eq!(
            LoadProfile::step(inverted, 60, 50).unwrap_err(),
            "the low level (90) must be below the high level (20)"
        );
        assert!(
            LoadProfile::step(LEVELS, 60, 100)
                .unwrap_err()
                .contains("from 1 to 99 percent")
        );
        assert!(
            LoadProfile::step(LEVELS, 20, 90)
                .unwrap_err()
                .contains("shorter than 5 s")
        );
        assert!(
            LoadProfile::spike(LEVELS, 60, 60)
                .unwrap_err()
                .contains("does not fit a period of 60 s")
        );
    }
}
