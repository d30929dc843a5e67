//! Judging a signal that follows a load profile: phase by phase over the window, instead of
//! one average against one threshold.
//!
//! The profile's clock is the guest unit's first start, which nothing outside the guest
//! records; it is found as the start (not before the VMI was created, and before the window
//! for a VM older than [`BOOT_ALLOWANCE_SECS`], so the whole window is judged) whose expected
//! shape best explains the series, by correlation, so a VM whose load does not move with its
//! profile cannot be fitted into passing. Then every phase of the profile inside the window
//! is judged on the samples wholly inside it (after the rate window and the driver's
//! latency), if it holds at least [`MIN_PHASE_SAMPLES`] (else it is not judged, and says
//! why): at least its floor (half of its level's load above idle, less the payload's own
//! pauses) and at most its ceiling (its level plus
//! [`crate::signals::contract::CEILING_SHARE`] of the profile's amplitude); a pass needs a
//! judged phase at every level the window holds, a periodic profile's also a judged phase
//! with judged phases on both sides (two adjacent phases alone fit a guest at twice the
//! period), and the observed shape must move by at least half the expected amplitude. A
//! young VM whose series only a clock start later than the fit allows explains is too
//! young, not off its profile.
//!
//! Entry point for other judges (e.g. a disruption check on the same contract):
//! [`judge_profile`] — a pure function of a [`ProfiledCheck`] (from
//! `crate::signals::contract::checks`), one VM's samples `(unix seconds, value)` as a range
//! query returns them, their [`RangeSpec`] (see `crate::verify::range_spec`), the VMI's
//! creation time and a [`FitCache`] shared across VMs; it returns a [`ProfileReport`] whose
//! `status` is the verdict.
//!
//! Pure: samples in, a [`ProfileReport`] out. Must not: query anything or know how a level
//! maps to a value (the contract's [`ProfiledCheck`] does).

use serde::Serialize;

use super::evaluate::{BOOT_ALLOWANCE_SECS, Verdict};
use crate::profile_schedule::{LoadProfile, Schedule};
use crate::signals::contract::ProfiledCheck;

/// Seconds a phase change may take to reach the load tool (the driver's tick and restart).
pub const DRIVER_LATENCY_SECS: f64 = 2.0;
/// Least correlation between the observed and the expected shape for the fit to count.
pub const MIN_CORRELATION: f64 = 0.5;
/// Least share of the expected amplitude the observed shape must show (before pauses).
const MIN_AMPLITUDE_SHARE: f64 = 0.5;
/// Fewest samples a phase is judged on: fewer (a 30 s scrape, a short phase) say too little
/// against noise, so such a phase is not judged, and says why.
pub const MIN_PHASE_SAMPLES: usize = 6;
/// Most candidate clock starts tried in the coarse pass (then refined to a second).
const COARSE_CANDIDATES: usize = 720;
/// Points of each rate window averaged for the expected value of one sample.
const RATE_POINTS: usize = 5;

/// The samples a range query returned for one VM and how they were taken.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeSpec {
    /// Time of the first and last sample asked for (Unix seconds).
    pub start: f64,
    pub end: f64,
    /// Seconds between samples.
    pub step: f64,
    /// Seconds each sample's rate (or maximum) covers, ending at the sample.
    pub rate_window: f64,
}

/// How one phase of the profile showed in the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    /// When the phase began and ended (RFC 3339, clipped to the window).
    pub start: String,
    pub end: String,
    pub level: u32,
    /// The signal at this level at full effect.
    pub expected: f64,
    /// The least and most the phase may average (no least at level 0).
    pub min: Option<f64>,
    pub max: f64,
    /// The average of the samples judged; None when none was.
    pub observed: Option<f64>,
    pub samples: usize,
    pub status: PhaseStatus,
    /// Why a phase was not judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The verdict on one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    Pass,
    /// Averaged under the level's floor.
    Below,
    /// Averaged over the level's ceiling: the load did not come down.
    Above,
    /// Too short in the window to hold [`MIN_PHASE_SAMPLES`] past the rate window and the
    /// phase change (its `reason` says how many it held).
    NotJudged,
}

/// The verdict on a profiled signal and what it rests on (`--output json` carries it whole).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileReport {
    /// The profile, as its run gave it.
    pub shape: String,
    pub status: Verdict,
    /// One line saying what the verdict rests on.
    pub summary: String,
    /// The profile's clock start that best explains the series (RFC 3339).
    pub clock_start: Option<String>,
    /// Correlation of the observed with the expected shape at that start.
    pub correlation: Option<f64>,
    /// The factor between level and signal measured from the highest phases (profiles
    /// whose level has no fixed relation to the signal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor_per_level: Option<f64>,
    pub phases: Vec<PhaseReport>,
}

fn rfc3339(unix: f64) -> String {
    jiff::Timestamp::from_second(unix.floor() as i64)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{unix:.0}"))
}

/// The profile's level at `t` with its clock started at `start` (0 before it: nothing runs).
fn level_at(schedule: &Schedule, start: f64, t: f64) -> u32 {
    if t < start {
        0
    } else {
        schedule.level_at((t - start) as u64)
    }
}

/// The level a sample at `t` reads on average (its rate window spans earlier levels too).
fn expected_level(schedule: &Schedule, start: f64, t: f64, rate_window: f64) -> f64 {
    let sum: f64 = (0..RATE_POINTS)
        .map(|k| {
            let back = rate_window * k as f64 / (RATE_POINTS - 1) as f64;
            f64::from(level_at(schedule, start, t - back))
        })
        .sum();
    sum / RATE_POINTS as f64
}

/// A VM's samples with their mean and spread computed once, to correlate against many
/// candidate shapes.
struct Observed {
    values: Vec<f64>,
    mean: f64,
    /// Sum of squared deviations from the mean.
    spread: f64,
}

impl Observed {
    fn new(values: impl Iterator<Item = f64>) -> Observed {
        let values: Vec<f64> = values.collect();
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let spread = values.iter().map(|v| (v - mean).powi(2)).sum();
        Observed {
            values,
            mean,
            spread,
        }
    }

    /// Pearson correlation with `expected` (as long as the samples; None when either is flat
    /// or there are fewer than three samples), whether `expected` is flat, and its first value.
    fn correlation(&self, expected: &mut dyn Iterator<Item = f64>) -> (Option<f64>, bool, f64) {
        let (mut sum, mut squares, mut cross) = (0.0, 0.0, 0.0);
        let (mut first, mut is_flat) = (None::<f64>, true);
        for (o, e) in self.values.iter().zip(expected) {
            match first {
                None => first = Some(e),
                Some(f) if f != e => is_flat = false,
                Some(_) => {}
            }
            sum += e;
            squares += e * e;
            cross += (o - self.mean) * e;
        }
        let n = self.values.len() as f64;
        let variance = squares - sum * sum / n.max(1.0);
        let rho = (self.values.len() >= 3 && self.spread > 1e-12 && variance > 1e-9)
            .then(|| cross / (self.spread * variance).sqrt());
        (rho, is_flat, first.unwrap_or(0.0))
    }
}

/// How far back a clock start can matter: one period (earlier starts repeat a later one) or,
/// for a ramp, its duration (earlier starts all hold the high level).
fn cycle_secs(profile: &LoadProfile, schedule: &Schedule) -> f64 {
    profile
        .period()
        .unwrap_or_else(|| schedule.phases.last().map_or(0, |p| p.at)) as f64
}

/// How the clock start was found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fit {
    /// The start whose expected shape correlates best with the series (the correlation).
    Correlated(f64),
    /// No start explains the series, but one puts the whole window in a single level (a ramp
    /// in its hold): the series is judged against that level.
    OneLevel,
    /// The series correlates with no start at all (flat against a moving profile).
    Unexplained,
}

impl Fit {
    /// Whether the fit is too weak to trust: the series does not follow the profile's shape.
    fn is_weak(self) -> bool {
        match self {
            Fit::Correlated(c) => c < MIN_CORRELATION,
            Fit::OneLevel => false,
            Fit::Unexplained => true,
        }
    }
}

/// The expected level of every coarse candidate clock start at every point of a range's
/// sample grid: computed once per profile and range, shared by every VM judged on them (a
/// fleet of one profile costs one table, then a correlation per VM and candidate).
struct Grid {
    profile: LoadProfile,
    range: RangeSpec,
    /// The latest start allowed ([`latest_start`]).
    latest: f64,
    /// Candidate starts, evenly spaced from one cycle before the range to `latest`.
    starts: Vec<f64>,
    spacing: f64,
    /// `expected[c][k]`: the level a sample at grid point k reads with start `starts[c]`.
    expected: Vec<Vec<f64>>,
}

impl Grid {
    fn new(profile: LoadProfile, schedule: &Schedule, range: RangeSpec, latest: f64) -> Grid {
        // From one cycle before the first sample's rate window: earlier starts repeat a later one.
        let lo = range.start - range.rate_window - cycle_secs(&profile, schedule);
        let hi = latest.max(lo);
        let count = COARSE_CANDIDATES.min((hi - lo).ceil() as usize + 1).max(1);
        let spacing = if count > 1 {
            (hi - lo) / (count - 1) as f64
        } else {
            0.0
        };
        let points = grid_points(&range);
        let starts: Vec<f64> = (0..count).map(|i| lo + spacing * i as f64).collect();
        let expected = starts
            .iter()
            .map(|start| {
                (0..points)
                    .map(|k| {
                        let t = range.start + range.step * k as f64;
                        expected_level(schedule, *start, t, range.rate_window)
                    })
                    .collect()
            })
            .collect();
        Grid {
            profile,
            range,
            latest,
            starts,
            spacing,
            expected,
        }
    }
}

/// Points of a range's sample grid (start, start + step, ... up to end).
fn grid_points(range: &RangeSpec) -> usize {
    if range.step <= 0.0 || range.end < range.start {
        return 0;
    }
    ((range.end - range.start) / range.step).floor() as usize + 1
}

/// The expected-level tables of the profiles and ranges judged so far (one per profiled
/// group and profile; a handful at most, so a list).
#[derive(Default)]
pub struct FitCache {
    grids: Vec<Grid>,
}

impl FitCache {
    fn grid(
        &mut self,
        profile: LoadProfile,
        schedule: &Schedule,
        range: &RangeSpec,
        latest: f64,
    ) -> &Grid {
        let found = self
            .grids
            .iter()
            .position(|g| g.profile == profile && g.range == *range && g.latest == latest);
        let index = match found {
            Some(i) => i,
            None => {
                self.grids
                    .push(Grid::new(profile, schedule, *range, latest));
                self.grids.len() - 1
            }
        };
        &self.grids[index]
    }
}

/// The clock start that best explains `samples`, its correlation, and the spacing of the
/// candidates it was chosen among (the fit's uncertainty, at least a second). When no start
/// explains the series well but one puts the whole window in a single level (a ramp that
/// reached its hold), that start is taken: a weak fit to noise must not invent phases.
fn fit_start(
    profile: LoadProfile,
    schedule: &Schedule,
    samples: &[(f64, f64)],
    range: &RangeSpec,
    earliest: Option<f64>,
    cache: &mut FitCache,
) -> (f64, Fit, f64) {
    let latest = latest_start(&profile, range, earliest);
    let grid = cache.grid(profile, schedule, range, latest);
    let indexed = on_grid(samples, range);
    let observed = Observed::new(indexed.iter().map(|(_, v)| *v));
    let earliest = earliest.unwrap_or(f64::NEG_INFINITY);
    let mut best = (
        grid.starts
            .first()
            .copied()
            .unwrap_or(range.start)
            .max(earliest),
        None::<f64>,
    );
    let mut flat: Option<f64> = None;
    let mut consider =
        |start: f64, e: &mut dyn Iterator<Item = f64>, best: &mut (f64, Option<f64>)| {
            let (s, is_flat, first) = observed.correlation(e);
            if flat.is_none() && is_flat && first > 0.0 {
                flat = Some(start);
            }
            if s.is_some_and(|s| best.1.is_none_or(|b| s > b)) {
                *best = (start, s);
            }
        };
    for (c, start) in grid.starts.iter().enumerate() {
        if *start < earliest {
            continue;
        }
        let row = &grid.expected[c];
        consider(*start, &mut indexed.iter().map(|(k, _)| row[*k]), &mut best);
    }
    let at = |start: f64| {
        move |(k, _): &(usize, f64)| {
            expected_level(
                schedule,
                start,
                range.start + range.step * *k as f64,
                range.rate_window,
            )
        }
    };
    // A VMI younger than the grid's first candidate: its creation is a candidate too.
    if earliest.is_finite() && grid.starts.first().is_some_and(|s| *s < earliest) {
        consider(earliest, &mut indexed.iter().map(at(earliest)), &mut best);
    }
    // Refine around the coarse best to about a second.
    let spacing = grid.spacing;
    let mut uncertainty = spacing.max(1.0);
    if spacing > 1.0 && best.1.is_some() {
        let center = best.0;
        let fine = (2.0 * spacing / 120.0).max(1.0);
        let mut t = (center - spacing).max(earliest);
        while t <= (center + spacing).min(latest) {
            consider(t, &mut indexed.iter().map(at(t)), &mut best);
            t += fine;
        }
        uncertainty = fine;
    }
    match (flat, best.1) {
        (Some(start), c) if c.is_none_or(|c| c < MIN_CORRELATION) => {
            (start, Fit::OneLevel, uncertainty)
        }
        (_, Some(c)) => (best.0, Fit::Correlated(c), uncertainty),
        (_, None) => (best.0, Fit::Unexplained, uncertainty),
    }
}

/// The latest clock start the fit may choose: before the window for a VM older than
/// [`BOOT_ALLOWANCE_SECS`] at the window's start (or of unknown age), else up to that long
/// after its VMI's creation; and a periodic profile keeps at least one whole period after
/// its start inside the window, so a late start never leaves too little to tell a shape
/// from noise, nor leaves the early part of the window unjudged.
fn latest_start(profile: &LoadProfile, range: &RangeSpec, earliest: Option<f64>) -> f64 {
    let window_start = range.start - range.rate_window;
    let by_age = earliest.map_or(window_start, |e| {
        (e + BOOT_ALLOWANCE_SECS).max(window_start)
    });
    by_age.min(range.end - profile.period().unwrap_or(0) as f64)
}

/// Each sample with its point on the range's grid (Prometheus evaluates a range query exactly
/// on it); samples off the grid are left out.
fn on_grid(samples: &[(f64, f64)], range: &RangeSpec) -> Vec<(usize, f64)> {
    let points = grid_points(range);
    samples
        .iter()
        .filter_map(|(t, v)| {
            let k = ((t - range.start) / range.step).round();
            let on_point = (t - range.start - k * range.step).abs() < 0.5;
            (k >= 0.0 && (k as usize) < points && on_point).then_some((k as usize, *v))
        })
        .collect()
}

/// The longest phase of the profile, in seconds (a ramp's hold counts as endless).
fn longest_phase(schedule: &Schedule) -> f64 {
    let phases = &schedule.phases;
    let Some(period) = schedule.repeat_every else {
        return f64::INFINITY;
    };
    phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let next = phases.get(i + 1).map_or(period, |n| n.at);
            (next - p.at) as f64
        })
        .fold(0.0, f64::max)
}

/// The phases of the profile inside [from, to] for a clock started at `start`: (begin, end,
/// level), the time before the start left out.
fn phases_in(schedule: &Schedule, start: f64, from: f64, to: f64) -> Vec<(f64, f64, u32)> {
    let mut bounds: Vec<(f64, u32)> = Vec::new();
    let begin = from.max(start);
    if begin >= to {
        return Vec::new();
    }
    match schedule.repeat_every {
        Some(period) => {
            let period = period as f64;
            let first_cycle = ((begin - start) / period).floor();
            let mut cycle = first_cycle;
            while start + cycle * period < to {
                for phase in &schedule.phases {
                    let at = start + cycle * period + phase.at as f64;
                    bounds.push((at, phase.level));
                }
                cycle += 1.0;
            }
        }
        None => {
            for phase in &schedule.phases {
                bounds.push((start + phase.at as f64, phase.level));
            }
        }
    }
    let mut out: Vec<(f64, f64, u32)> = Vec::new();
    for (i, (at, level)) in bounds.iter().enumerate() {
        let end = bounds.get(i + 1).map_or(f64::INFINITY, |(next, _)| *next);
        let (a, b) = (at.max(begin), end.min(to));
        if a >= b {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.2 == *level && (last.1 - a).abs() < 1e-9 => last.1 = b,
            _ => out.push((a, b, *level)),
        }
    }
    out
}

/// Judges `samples` (one VM's, time-ordered) against the profile of `check`. `earliest` is
/// when the VMI was created, before which the profile's clock cannot have started.
pub fn judge_profile(
    check: &ProfiledCheck,
    samples: &[(f64, f64)],
    range: &RangeSpec,
    earliest: Option<f64>,
    cache: &mut FitCache,
) -> ProfileReport {
    let profile = &check.profile;
    let schedule = profile.schedule();
    let mut report = ProfileReport {
        shape: profile.describe(),
        status: Verdict::NotExpected,
        summary: String::new(),
        clock_start: None,
        correlation: None,
        factor_per_level: None,
        phases: Vec::new(),
    };
    if let Some((status, summary)) = before_the_fit(profile, samples, range, earliest) {
        report.status = status;
        report.summary = summary;
        return report;
    }
    let (start, fit, uncertainty) = fit_start(*profile, &schedule, samples, range, earliest, cache);
    if fit.is_weak()
        && let Some(late) = late_start(check, &schedule, samples, range, earliest)
    {
        report.status = Verdict::TooYoung;
        report.clock_start = Some(rfc3339(late));
        report.summary = format!(
            "the profile's clock appears to have started at {}, {:.0}s before the window's end: less than one {}s period to judge; wait (--wait)",
            rfc3339(late),
            (range.end - late).max(0.0),
            profile.period().unwrap_or(0)
        );
        return report;
    }
    report.clock_start = Some(rfc3339(start));
    if let Fit::Correlated(c) = fit {
        report.correlation = Some((c * 1000.0).round() / 1000.0);
    }
    let fitted = Fitted {
        start,
        uncertainty,
        settle: range.rate_window + DRIVER_LATENCY_SECS + uncertainty,
    };
    judge_phases(check, &schedule, &fitted, fit, samples, range, &mut report);
    report
}

/// The verdict of a series no clock can be fitted to yet: a window shorter than the
/// profile's period (not expected), no samples (too young while the VMI is, else no data),
/// or a VMI younger than one period (too young). None when the fit can go ahead.
fn before_the_fit(
    profile: &LoadProfile,
    samples: &[(f64, f64)],
    range: &RangeSpec,
    earliest: Option<f64>,
) -> Option<(Verdict, String)> {
    let window = range.end - range.start + range.rate_window;
    if let Some(period) = profile.period()
        && window + 1.0 < period as f64
    {
        return Some((
            Verdict::NotExpected,
            format!(
                "the {window:.0}s window is shorter than the profile's period ({period}s), so its phases cannot be told apart: use --window {period}s or longer"
            ),
        ));
    }
    if samples.is_empty() {
        // A VMI younger than two rate windows (and a minute to boot) may not have had the two
        // scrapes inside one rate window that a sample needs.
        let age = earliest.map(|created| range.end - created);
        return Some(match age.filter(|a| *a < 2.0 * range.rate_window + 60.0) {
            Some(age) => (
                Verdict::TooYoung,
                format!(
                    "the VMI is {:.0}s old and its series holds no {:.0}s rate in the window yet: wait (--wait)",
                    age.max(0.0),
                    range.rate_window
                ),
            ),
            None => (Verdict::NoData, "no samples in the window".into()),
        });
    }
    if let (Some(period), Some(created)) = (profile.period(), earliest)
        && created + period as f64 > range.end
    {
        return Some((
            Verdict::TooYoung,
            format!(
                "the VMI is {:.0}s old, less than one {period}s period of its profile: wait (--wait)",
                (range.end - created).max(0.0)
            ),
        ));
    }
    None
}

/// Judges each phase of the window under the fitted clock and sets the report's phases,
/// factor per level and verdict.
fn judge_phases(
    check: &ProfiledCheck,
    schedule: &Schedule,
    fitted: &Fitted,
    fit: Fit,
    samples: &[(f64, f64)],
    range: &RangeSpec,
    report: &mut ProfileReport,
) {
    let (judged, skipped) = measure_phases(check, schedule, fitted, samples, range);
    let factor = level_factor(check, &judged);
    report.factor_per_level = is_relative(check).then_some(factor).filter(|f| *f > 0.0);
    let (phases, failed) = phase_reports(check, &judged, &skipped, factor, range);
    report.phases = phases;
    let amplitude = shape_amplitude(check, &judged, factor);
    let judgeable = longest_phase(schedule) - fitted.settle - fitted.uncertainty
        >= range.step * (MIN_PHASE_SAMPLES - 1) as f64;
    let levels =
        |it: &mut dyn Iterator<Item = u32>| it.collect::<std::collections::BTreeSet<u32>>();
    let judged_levels = levels(&mut judged.iter().map(|m| m.level));
    let window_levels = levels(
        &mut judged
            .iter()
            .map(|m| m.level)
            .chain(skipped.iter().map(|s| s.2)),
    );
    (report.status, report.summary) = verdict(
        Judged {
            phases: judged.len(),
            failed,
            judgeable,
            unjudged_levels: window_levels.len() - judged_levels.len(),
            bounded: periodic_with_levels(&check.profile, schedule)
                .then(|| has_bounded_phase(&judged)),
        },
        fit,
        amplitude,
        fitted.settle,
    );
}

/// A clock start later than the fit may choose that explains a young VM's series: only for
/// a periodic profile whose VMI is young enough that its clock may have started less than a
/// period before the window's end (the fit keeps a whole period inside the window). It
/// explains the series when it correlates (at least [`MIN_CORRELATION`]) and the series moves
/// with it by at least [`MIN_AMPLITUDE_SHARE`] of the expected amplitude, so a VM stuck at
/// one level never passes as young by a start that fits its noise.
fn late_start(
    check: &ProfiledCheck,
    schedule: &Schedule,
    samples: &[(f64, f64)],
    range: &RangeSpec,
    earliest: Option<f64>,
) -> Option<f64> {
    let period = check.profile.period()? as f64;
    let created = earliest?;
    let from = (range.end - period).max(created);
    let to = (created + BOOT_ALLOWANCE_SECS).min(range.end);
    if to <= from {
        return None;
    }
    let observed = Observed::new(samples.iter().map(|(_, v)| *v));
    let expected = |start: f64| -> Vec<f64> {
        samples
            .iter()
            .map(|(t, _)| expected_level(schedule, start, *t, range.rate_window))
            .collect()
    };
    let step = (range.step / 2.0).max(1.0);
    let mut best: Option<(f64, f64)> = None;
    let mut start = from;
    while start <= to {
        let (rho, _, _) = observed.correlation(&mut expected(start).into_iter());
        if let Some(rho) = rho.filter(|r| best.is_none_or(|(_, b)| *r > b)) {
            best = Some((start, rho));
        }
        start += step;
    }
    let (start, _) = best.filter(|(_, rho)| *rho >= MIN_CORRELATION)?;
    let levels = expected(start);
    let mean = levels.iter().sum::<f64>() / levels.len() as f64;
    let variance: f64 = levels.iter().map(|e| (e - mean).powi(2)).sum();
    let covariance: f64 = levels
        .iter()
        .zip(&observed.values)
        .map(|(e, o)| (e - mean) * (o - observed.mean))
        .sum();
    let top = levels.iter().copied().fold(0.0, f64::max);
    // The value of one level: the mapping's, or (relative) what the top samples show.
    let per_level = match is_relative(check) {
        false => check.nominal(1, 0.0) - check.nominal(0, 0.0),
        true => {
            let high: Vec<f64> = levels
                .iter()
                .zip(&observed.values)
                .filter(|(e, _)| **e >= 0.9 * top)
                .map(|(_, o)| *o)
                .collect();
            high.iter().sum::<f64>() / high.len().max(1) as f64 / top.max(1e-9)
        }
    };
    let moves = variance > 0.0
        && per_level > 0.0
        && covariance / variance / per_level >= MIN_AMPLITUDE_SHARE;
    moves.then_some(start)
}

/// The fitted clock: its start, how far off it may be, and how long after a phase change
/// samples still carry the previous level (the rate window, the driver's latency and that
/// uncertainty).
struct Fitted {
    start: f64,
    uncertainty: f64,
    settle: f64,
}

/// One phase with samples to judge: their average, how many, the phase's level and bounds
/// in time, and the share of the judged span guaranteed to carry load.
struct Measured {
    mean: f64,
    samples: usize,
    level: u32,
    from: f64,
    to: f64,
    active: f64,
}

/// A phase not judged: (from, to, level, samples it held past the settling time).
type Skipped = (f64, f64, u32, usize);

/// The phases inside the window with the samples wholly inside each (past the settling
/// time), and the phases holding fewer than [`MIN_PHASE_SAMPLES`].
fn measure_phases(
    check: &ProfiledCheck,
    schedule: &Schedule,
    fitted: &Fitted,
    samples: &[(f64, f64)],
    range: &RangeSpec,
) -> (Vec<Measured>, Vec<Skipped>) {
    let (mut judged, mut skipped) = (Vec::new(), Vec::new());
    let window_start = range.start - range.rate_window;
    for (from, to, level) in phases_in(schedule, fitted.start, window_start, range.end) {
        let (first, last) = (from + fitted.settle, to - fitted.uncertainty);
        let inside: Vec<f64> = samples
            .iter()
            .filter(|(t, _)| *t >= first && *t <= last)
            .map(|(_, v)| *v)
            .collect();
        if inside.len() < MIN_PHASE_SAMPLES {
            skipped.push((from, to, level, inside.len()));
            continue;
        }
        // The span the judged samples' rates cover, of which the payload's own pause may
        // take up to the quiet gap.
        let covered = last - first + range.rate_window;
        judged.push(Measured {
            mean: inside.iter().sum::<f64>() / inside.len() as f64,
            samples: inside.len(),
            level,
            from,
            to,
            active: ((covered - check.quiet_gap_secs) / covered).clamp(0.0, 1.0),
        });
    }
    (judged, skipped)
}

/// The value per level of a profile without a fixed one (measured from the phases at the
/// highest level judged); 0 otherwise, where the mapping's own factor applies.
fn level_factor(check: &ProfiledCheck, judged: &[Measured]) -> f64 {
    let top = judged.iter().map(|m| m.level).max().unwrap_or(0);
    if !is_relative(check) || top == 0 {
        return 0.0;
    }
    let highest: Vec<f64> = judged
        .iter()
        .filter(|m| m.level == top)
        .map(|m| m.mean)
        .collect();
    highest.iter().sum::<f64>() / highest.len() as f64 / f64::from(top)
}

/// Every phase's report, in time order, and how many judged phases are off their level.
fn phase_reports(
    check: &ProfiledCheck,
    judged: &[Measured],
    skipped: &[Skipped],
    factor: f64,
    range: &RangeSpec,
) -> (Vec<PhaseReport>, usize) {
    let mut failed = 0;
    let mut phases: Vec<(f64, PhaseReport)> = judged
        .iter()
        .map(|m| {
            let min = check.floor(m.level, factor, m.active);
            let max = check.ceiling(m.level, factor);
            // A relative profile whose highest phases show nothing has no load at all.
            let no_load = is_relative(check) && factor <= 0.0 && m.level > 0;
            let status = if no_load || min.is_some_and(|least| m.mean < least) {
                PhaseStatus::Below
            } else if m.mean > max {
                PhaseStatus::Above
            } else {
                PhaseStatus::Pass
            };
            failed += usize::from(status != PhaseStatus::Pass);
            let report = PhaseReport {
                start: rfc3339(m.from.max(range.start - range.rate_window)),
                end: rfc3339(m.to),
                level: m.level,
                expected: check.nominal(m.level, factor),
                min,
                max,
                observed: Some(m.mean),
                samples: m.samples,
                status,
                reason: None,
            };
            (m.from, report)
        })
        .collect();
    phases.extend(skipped.iter().map(|&(from, to, level, held)| {
        let report = PhaseReport {
            start: rfc3339(from),
            end: rfc3339(to),
            level,
            expected: check.nominal(level, factor),
            min: None,
            max: check.ceiling(level, factor),
            observed: None,
            samples: held,
            status: PhaseStatus::NotJudged,
            reason: Some(format!(
                "{held} sample(s) past the rate window and the level change, fewer than the {MIN_PHASE_SAMPLES} a phase is judged on"
            )),
        };
        (from, report)
    }));
    phases.sort_by(|a, b| a.0.total_cmp(&b.0));
    (phases.into_iter().map(|(_, p)| p).collect(), failed)
}

/// What the phase judging found: phases judged, how many off their level, and whether the
/// profile's longest phase can hold a sample past the settling time at all.
struct Judged {
    phases: usize,
    failed: usize,
    judgeable: bool,
    /// Levels the window holds whose every phase was too short to judge.
    unjudged_levels: usize,
    /// For a periodic profile of more than one level: whether a judged phase has judged
    /// phases on both sides (its start and end both seen where the clock puts them).
    bounded: Option<bool>,
}

/// Whether the profile repeats and changes level (a ramp, or a step between equal levels,
/// has no period to mistake).
fn periodic_with_levels(profile: &LoadProfile, schedule: &Schedule) -> bool {
    let levels: std::collections::BTreeSet<u32> = schedule.phases.iter().map(|p| p.level).collect();
    profile.period().is_some() && levels.len() > 1
}

/// Whether three judged phases follow each other without a gap: the middle one's start and
/// end are both seen where the clock puts them, so a guest at another period cannot pass
/// (at twice the period, two adjacent phases can each sit inside one of its longer phases).
fn has_bounded_phase(judged: &[Measured]) -> bool {
    let mut spans: Vec<(f64, f64)> = judged.iter().map(|m| (m.from, m.to)).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut run = 0;
    let mut end = f64::NAN;
    for (from, to) in spans {
        run = match (from - end).abs() < 1e-6 {
            true => run + 1,
            false => 1,
        };
        if run >= 3 {
            return true;
        }
        end = to;
    }
    false
}

/// The verdict and its one-line summary from the judged phases, the fit and the shape's
/// amplitude (share shown, share needed). A weak fit fails before anything else: a series that
/// follows no clock start must never pass, nor be excused as not expected.
fn verdict(
    judged: Judged,
    fit: Fit,
    amplitude: Option<(f64, f64)>,
    settle: f64,
) -> (Verdict, String) {
    phases_too_short(&judged, settle)
        .or_else(|| weak_fit(fit))
        .or_else(|| phase_shortfall(&judged, settle))
        .or_else(|| amplitude_shortfall(amplitude))
        .unwrap_or_else(|| {
            let n = judged.phases;
            let one_level = match amplitude {
                None => " (the window holds one level only)",
                Some(_) => "",
            };
            (
                Verdict::Pass,
                format!("{n} of {n} judged phase(s) at the profile's level{one_level}"),
            )
        })
}

/// Not expected: the profile's phases cannot hold enough samples past the settling time.
fn phases_too_short(judged: &Judged, settle: f64) -> Option<(Verdict, String)> {
    (!judged.judgeable).then(|| {
        (
            Verdict::NotExpected,
            format!(
                "the profile's phases are too short to hold {MIN_PHASE_SAMPLES} samples past the {settle:.0}s rate window and level change: lengthen the profile's period (the rate window is three scrape intervals)"
            ),
        )
    })
}

/// Off profile: the series follows no clock start.
fn weak_fit(fit: Fit) -> Option<(Verdict, String)> {
    fit.is_weak().then(|| {
        let best = match fit {
            Fit::Correlated(c) => format!("{c:.2}"),
            _ => "none".to_string(),
        };
        (
            Verdict::OffProfile,
            format!(
                "the series does not follow the profile's shape (best correlation {best} at any clock start since the VMI began)"
            ),
        )
    })
}

/// What the judged phases say before the amplitude: none judged, some off the level
/// (off profile), a level of the window unjudged, or no phase bounded on both sides (not
/// expected). None when they allow a pass.
fn phase_shortfall(judged: &Judged, settle: f64) -> Option<(Verdict, String)> {
    let n = judged.phases;
    if n == 0 {
        return Some((
            Verdict::NotExpected,
            format!(
                "no phase in the window holds {MIN_PHASE_SAMPLES} samples past the {settle:.0}s rate window and the level change: use a longer --window"
            ),
        ));
    }
    if judged.failed > 0 {
        return Some((
            Verdict::OffProfile,
            format!(
                "{} of {n} judged phase(s) off the profile's level",
                judged.failed
            ),
        ));
    }
    // A pass must rest on every level the window holds: one judged level alone cannot tell
    // a guest at the wrong period from one following the profile.
    if judged.unjudged_levels > 0 {
        return Some((
            Verdict::NotExpected,
            format!(
                "{} level(s) of the window have no phase holding {MIN_PHASE_SAMPLES} samples past the {settle:.0}s rate window and the level change, so the shape cannot be told: use a longer --window",
                judged.unjudged_levels
            ),
        ));
    }
    (judged.bounded == Some(false)).then(|| {
        (
            Verdict::NotExpected,
            format!(
                "{n} judged phase(s) at the profile's level, but none with judged phases on both sides, so the window cannot tell the profile's period from a longer one: use a --window of at least one and a half periods plus {:.0}s per phase",
                settle
            ),
        )
    })
}

/// Off profile: the load moves by less of the profile's amplitude than needed.
fn amplitude_shortfall(amplitude: Option<(f64, f64)>) -> Option<(Verdict, String)> {
    let (share, needed) = amplitude.filter(|(share, needed)| share < needed)?;
    Some((
        Verdict::OffProfile,
        format!(
            "the load moves by {:.0} % of the profile's amplitude, less than {:.0} %",
            share * 100.0,
            needed * 100.0
        ),
    ))
}

fn is_relative(check: &ProfiledCheck) -> bool {
    matches!(
        check.mapping,
        crate::signals::contract::LevelMapping::Relative
    )
}

/// How much of the expected amplitude the judged phases show (least-squares slope of the
/// phases' averages on their expected values) and the share required (less where the
/// payload's pauses may take part of a phase); None with fewer than two distinct levels.
fn shape_amplitude(check: &ProfiledCheck, judged: &[Measured], factor: f64) -> Option<(f64, f64)> {
    let first = judged.first()?.level;
    judged.iter().any(|m| m.level != first).then_some(())?;
    let points: Vec<(f64, f64)> = judged
        .iter()
        .map(|m| (check.nominal(m.level, factor), m.mean))
        .collect();
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let least_active = judged.iter().map(|m| m.active).fold(1.0, f64::min);
    Some((sxy / sxx, MIN_AMPLITUDE_SHARE * least_active))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Window;
    use crate::profile_schedule::Levels;
    use crate::signals::contract::LevelMapping;

    fn cpu_step(period: u64) -> ProfiledCheck {
        ProfiledCheck {
            profile: LoadProfile::step(Levels { low: 10, high: 90 }, period, 50).unwrap(),
            mapping: LevelMapping::Absolute {
                idle: 0.0,
                per_level: 0.01,
            },
            quiet_gap_secs: 0.0,
        }
    }

    const T0: f64 = 1_800_000_000.0;

    /// Samples every `step` s over `window` s ending at T0 + window, of a guest whose busy
    /// fraction is `busy(t)` (t in Unix seconds), each averaged over the rate window.
    fn sampled(
        window: f64,
        step: f64,
        rate: f64,
        busy: impl Fn(f64) -> f64,
    ) -> (Vec<(f64, f64)>, RangeSpec) {
        let range = RangeSpec {
            start: T0 + rate,
            end: T0 + window,
            step,
            rate_window: rate,
        };
        let mut samples = Vec::new();
        let mut t = range.start;
        while t <= range.end {
            let avg = (0..30)
                .map(|k| busy(t - rate * k as f64 / 29.0))
                .sum::<f64>()
                / 30.0;
            samples.push((t, avg));
            t += step;
        }
        (samples, range)
    }

    /// A guest at `high` for the first half of every `period` s from `start`, then `low`.
    fn stepping(start: f64, period: f64, high: f64, low: f64) -> impl Fn(f64) -> f64 {
        move |t: f64| {
            if (t - start).rem_euclid(period) < period / 2.0 {
                high
            } else {
                low
            }
        }
    }

    /// A guest following a 10/90 step of `period` s whose clock started at `start`.
    fn following(start: f64, period: f64) -> impl Fn(f64) -> f64 {
        stepping(start, period, 0.88, 0.11)
    }

    /// Judges with a fresh cache.
    fn judge(
        check: &ProfiledCheck,
        (samples, range): (Vec<(f64, f64)>, RangeSpec),
        earliest: Option<f64>,
    ) -> ProfileReport {
        judge_profile(check, &samples, &range, earliest, &mut FitCache::default())
    }

    #[test]
    fn a_vm_following_its_step_passes_with_its_clock_found() {
        let check = cpu_step(120);
        let start = T0 - 1000.0 + 37.0;
        let (samples, range) = sampled(600.0, 5.0, 15.0, following(start, 120.0));
        let report = judge_profile(
            &check,
            &samples,
            &range,
            Some(T0 - 1200.0),
            &mut FitCache::default(),
        );
        assert_eq!(report.status, Verdict::Pass, "{report:#?}");
        assert!(report.correlation.unwrap() > 0.9);
        // The clock is found modulo the period, within a few seconds.
        let found = jiff::Timestamp::from_str_like(&report.clock_start.clone().unwrap());
        let offset = (found - start).rem_euclid(120.0);
        assert!(offset.min(120.0 - offset) <= 3.0, "{offset} {report:#?}");
        let judged = report
            .phases
            .iter()
            .filter(|p| p.status == PhaseStatus::Pass)
            .count();
        assert!(judged >= 8, "{report:#?}");
        assert!(
            report
                .phases
                .iter()
                .all(|p| p.status != PhaseStatus::Below && p.status != PhaseStatus::Above)
        );
    }

    trait FromStrLike {
        fn from_str_like(text: &str) -> f64;
    }
    impl FromStrLike for jiff::Timestamp {
        fn from_str_like(text: &str) -> f64 {
            text.parse::<jiff::Timestamp>().unwrap().as_second() as f64
        }
    }

    #[test]
    fn a_flat_vm_fails_whatever_its_level() {
        let check = cpu_step(120);
        for level in [0.05, 0.47, 0.9] {
            let (samples, range) = sampled(600.0, 5.0, 15.0, |_| level);
            let report = judge_profile(&check, &samples, &range, None, &mut FitCache::default());
            assert_eq!(report.status, Verdict::OffProfile, "{level}: {report:#?}");
            assert!(report.status.is_missing());
        }
        // Noise around a middle level cannot be fitted into passing either.
        let (samples, range) = sampled(600.0, 5.0, 15.0, |t| 0.47 + 0.03 * (t * 0.7).sin());
        let report = judge_profile(&check, &samples, &range, None, &mut FitCache::default());
        assert_eq!(report.status, Verdict::OffProfile, "{report:#?}");
    }

    #[test]
    fn a_vm_younger_than_one_period_is_too_young_not_judged() {
        let check = cpu_step(120);
        let range_end = T0 + 600.0;
        let report = judge(
            &check,
            sampled(600.0, 5.0, 15.0, following(T0, 120.0)),
            Some(range_end - 100.0),
        );
        assert_eq!(report.status, Verdict::TooYoung, "{report:#?}");
        assert!(report.status.is_missing());
        assert!(
            report.summary.contains("less than one 120s period"),
            "{}",
            report.summary
        );
    }

    /// A young VM stuck at its high level: no clock start, however late, may excuse it (a
    /// start at the window's end leaves no phase to judge, which must not read as "not
    /// expected").
    #[test]
    fn a_young_vm_stuck_high_fails_whatever_clock_start_fits_its_noise() {
        let check = cpu_step(30);
        for seed in [0.3, 0.7, 1.1, 1.9] {
            let noisy = move |t: f64| 0.87 + 0.01 * (t * seed).sin() + 0.005 * (t * 3.1).cos();
            let report = judge(&check, sampled(90.0, 1.0, 3.0, noisy), Some(T0 - 10.0));
            assert_eq!(report.status, Verdict::OffProfile, "{seed}: {report:#?}");
        }
    }

    #[test]
    fn a_vm_stuck_high_in_its_low_phases_fails_above() {
        let check = cpu_step(120);
        let start = T0 - 500.0;
        // High phases right, low phases only down to 70 %.
        let report = judge(
            &check,
            sampled(600.0, 5.0, 15.0, stepping(start, 120.0, 0.9, 0.7)),
            None,
        );
        assert_eq!(report.status, Verdict::OffProfile, "{report:#?}");
        assert!(
            report.phases.iter().any(|p| p.status == PhaseStatus::Above),
            "{report:#?}"
        );
        assert!(
            report.summary.contains("off the profile's level"),
            "{}",
            report.summary
        );
    }

    /// A guest stepping at twice the declared period: two adjacent phases can each sit inside
    /// one of its longer phases, so a window without a phase judged on both sides never
    /// passes it, and a window of several periods fails it.
    #[test]
    fn a_guest_at_twice_the_period_never_passes() {
        let check = cpu_step(120);
        let mut excused = 0;
        for offset in (0..240).step_by(10) {
            let guest = stepping(T0 - 1000.0 + f64::from(offset), 240.0, 0.88, 0.11);
            let short = judge(&check, sampled(150.0, 5.0, 15.0, &guest), None);
            assert_ne!(short.status, Verdict::Pass, "{offset}: {short:#?}");
            // Where its two judged phases pass: not expected, saying why.
            excused += usize::from(
                short.status == Verdict::NotExpected
                    && short
                        .summary
                        .contains("none with judged phases on both sides"),
            );
            let long = judge(&check, sampled(480.0, 5.0, 15.0, &guest), None);
            assert_eq!(long.status, Verdict::OffProfile, "{offset}: {long:#?}");
        }
        assert!(excused > 0);
        // A guest following the profile passes once a phase is judged on both sides.
        for offset in (0..120).step_by(15) {
            let guest = following(T0 - 1000.0 + f64::from(offset), 120.0);
            let report = judge(&check, sampled(240.0, 5.0, 15.0, guest), None);
            assert_eq!(report.status, Verdict::Pass, "{offset}: {report:#?}");
        }
    }

    /// A young VM whose profile started less than a period before the window's end (boot
    /// took a while) is too young, its clock named; one without a single rate yet is too young
    /// rather than without data; an old one without samples has no data.
    #[test]
    fn a_young_vm_whose_clock_started_late_is_too_young_not_off_profile() {
        let check = cpu_step(120);
        let end = T0 + 600.0;
        let (created, start) = (end - 150.0, end - 70.0);
        let busy = move |t: f64| {
            if t < start {
                0.02
            } else {
                following(start, 120.0)(t)
            }
        };
        let report = judge(&check, sampled(600.0, 5.0, 15.0, busy), Some(created));
        assert_eq!(report.status, Verdict::TooYoung, "{report:#?}");
        assert!(
            report.summary.contains("appears to have started"),
            "{}",
            report.summary
        );
        let found = jiff::Timestamp::from_str_like(report.clock_start.as_deref().unwrap());
        assert!((found - start).abs() <= 5.0, "{found} {report:#?}");
        // The same young VM stuck high is off profile: no late start moves with it.
        let report = judge(&check, sampled(600.0, 5.0, 15.0, |_| 0.87), Some(created));
        assert_eq!(report.status, Verdict::OffProfile, "{report:#?}");

        let range = sampled(600.0, 5.0, 15.0, |_| 0.5).1;
        let none = |created: f64| {
            judge_profile(&check, &[], &range, Some(created), &mut FitCache::default())
        };
        assert_eq!(none(end - 30.0).status, Verdict::TooYoung);
        assert_eq!(none(end - 3600.0).status, Verdict::NoData);
    }

    #[test]
    fn a_window_shorter_than_the_period_is_not_judged() {
        let check = cpu_step(600);
        let (samples, range) = sampled(300.0, 5.0, 15.0, following(T0, 600.0));
        let report = judge_profile(&check, &samples, &range, None, &mut FitCache::default());
        assert_eq!(report.status, Verdict::NotExpected);
        assert!(
            report.summary.contains("--window 600s"),
            "{}",
            report.summary
        );
    }

    #[test]
    fn the_clock_does_not_start_before_the_vmi() {
        // The VMI was created 100 s into the window; the guest idled while booting, then the
        // profile began at 160 s.
        let check = cpu_step(120);
        let created = T0 + 100.0;
        let start = T0 + 160.0;
        let busy = move |t: f64| {
            if t < start {
                0.02
            } else {
                following(start, 120.0)(t)
            }
        };
        let (samples, range) = sampled(720.0, 5.0, 15.0, busy);
        let report = judge_profile(
            &check,
            &samples,
            &range,
            Some(created),
            &mut FitCache::default(),
        );
        assert_eq!(report.status, Verdict::Pass, "{report:#?}");
        let found = jiff::Timestamp::from_str_like(report.clock_start.as_deref().unwrap());
        assert!(
            found >= created && (found - start).abs() <= 3.0,
            "{found} {report:#?}"
        );
    }

    #[test]
    fn a_relative_profile_is_judged_against_its_highest_phases() {
        let check = ProfiledCheck {
            profile: LoadProfile::step(Levels { low: 50, high: 500 }, 120, 50).unwrap(),
            mapping: LevelMapping::Relative,
            quiet_gap_secs: 10.0,
        };
        let start = T0 - 333.0;
        let good = stepping(start, 120.0, 900.0, 95.0);
        let report = judge(&check, sampled(600.0, 5.0, 15.0, good), None);
        assert_eq!(report.status, Verdict::Pass, "{report:#?}");
        assert!(
            (report.factor_per_level.unwrap() - 1.8).abs() < 0.1,
            "{report:#?}"
        );
        let (samples, range) = sampled(600.0, 5.0, 15.0, |_| 0.0);
        let report = judge_profile(&check, &samples, &range, None, &mut FitCache::default());
        assert_eq!(report.status, Verdict::OffProfile, "{report:#?}");
    }

    #[test]
    fn a_ramp_holding_its_high_level_is_judged_as_one_phase() {
        let check = ProfiledCheck {
            profile: LoadProfile::ramp(Levels { low: 10, high: 90 }, 300).unwrap(),
            mapping: LevelMapping::Absolute {
                idle: 0.0,
                per_level: 0.01,
            },
            quiet_gap_secs: 0.0,
        };
        let (samples, range) = sampled(300.0, 5.0, 15.0, |_| 0.9);
        let report = judge_profile(
            &check,
            &samples,
            &range,
            Some(T0 - 7200.0),
            &mut FitCache::default(),
        );
        assert_eq!(report.status, Verdict::Pass, "{report:#?}");
        assert!(
            report.summary.contains("one level only"),
            "{}",
            report.summary
        );
        let (samples, range) = sampled(300.0, 5.0, 15.0, |_| 0.2);
        let report = judge_profile(
            &check,
            &samples,
            &range,
            Some(T0 - 7200.0),
            &mut FitCache::default(),
        );
        assert_eq!(report.status, Verdict::OffProfile, "{report:#?}");
    }

    /// The cost of judging a fleet: 1,000 VMs of one 10-minute step profile, a 20-minute
    /// window of 240 samples each, clocks spread over the period. Figures in
    /// docs/performance.md (`cargo test --release --lib bench_judge_1000_profiled_vms -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn bench_judge_1000_profiled_vms() {
        let check = cpu_step(600);
        let mut cache = FitCache::default();
        let started = std::time::Instant::now();
        let mut passed = 0;
        for vm in 0..1000 {
            let start = T0 - 600.0 + (vm as f64 * 0.6);
            let (samples, range) = sampled(1200.0, 5.0, 15.0, following(start, 600.0));
            let report = judge_profile(&check, &samples, &range, Some(T0 - 3600.0), &mut cache);
            passed += usize::from(report.status == Verdict::Pass);
        }
        eprintln!(
            "judged 1000 profiled VMs in {:.2} s ({passed} passed)",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(passed, 1000);
    }

    /// A deterministic generator for the rate measurement below (no dependency needed).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        fn pick<T: Copy>(&mut self, from: &[T]) -> T {
            from[(self.next() * from.len() as f64) as usize % from.len()]
        }
    }

    /// How a simulated guest behaves against its declared 10/90 % cpu step of `period` s.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Guest {
        Following,
        DoublePeriod,
        StuckHigh,
        StuckLow,
        /// Its low phases only come down half-way.
        HalfDown,
    }

    /// Samples as Prometheus returns a range query of `rate(counter[3 x scrape])` over a
    /// guest scraped every `scrape` s (scrape times offset by `phase`), with multiplicative
    /// noise on each scrape interval's busy time.
    fn scraped(
        range: &RangeSpec,
        scrape: f64,
        phase: f64,
        noise: f64,
        rng: &mut Lcg,
        busy: &dyn Fn(f64) -> f64,
        born: f64,
    ) -> Vec<(f64, f64)> {
        // The counter at every scrape from the VMI's birth (or 2 periods of margin).
        let first = (range.start - range.rate_window - scrape).max(born);
        let mut t = (first / scrape).ceil() * scrape + phase;
        let mut counter = 0.0;
        let mut scrapes: Vec<(f64, f64)> = Vec::new();
        while t <= range.end {
            if let Some(&(last, _)) = scrapes.last() {
                let parts = 10;
                let dt = (t - last) / parts as f64;
                let work: f64 = (0..parts)
                    .map(|k| busy(last + dt * (k as f64 + 0.5)) * dt)
                    .sum();
                counter += work * (1.0 + noise * (2.0 * rng.next() - 1.0));
            }
            scrapes.push((t, counter));
            t += scrape;
        }
        let mut out = Vec::new();
        let mut at = range.start;
        while at <= range.end + 1e-9 {
            let inside: Vec<&(f64, f64)> = scrapes
                .iter()
                .filter(|(s, _)| *s > at - range.rate_window && *s <= at)
                .collect();
            if let (Some(a), Some(b)) = (inside.first(), inside.last())
                && b.0 > a.0
            {
                out.push((at, (b.1 - a.1) / (b.0 - a.0)));
            }
            at += range.step;
        }
        out
    }

    /// What a simulation of `count` VMs found: verdicts by guest and status, the wrong ones,
    /// and why following guests did not pass.
    #[derive(Default)]
    struct Simulated {
        verdicts: usize,
        tally: std::collections::BTreeMap<(String, &'static str), usize>,
        wrong: Vec<String>,
        reasons: std::collections::BTreeMap<String, usize>,
    }

    /// Simulated VMs judged as verify judges them: windows of 1 to 4 periods, scrapes every
    /// 5 s and 30 s, noise up to 10 %, clock and scrape offsets over the whole period and
    /// interval, old and young VMs, and guests following, at twice the period, stuck high,
    /// stuck low or coming half-way down. Wrong: a following guest failing (other than too
    /// young), or a faulty one passing. Deterministic: the first n VMs are the same for any
    /// count.
    fn simulate(count: usize) -> Simulated {
        let mut rng = Lcg(0x5eed);
        let mut out = Simulated::default();
        let now = T0;
        for _ in 0..count {
            let period = rng.pick(&[60u64, 120, 300, 600]);
            let scrape = rng.pick(&[5.0, 30.0]);
            let windows = 1.0 + 3.0 * rng.next();
            let window = Window::from_secs((period as f64 * windows).round() as u64).unwrap();
            let noise = rng.pick(&[0.0, 0.05, 0.1]);
            let guest = rng.pick(&[
                Guest::Following,
                Guest::Following,
                Guest::DoublePeriod,
                Guest::StuckHigh,
                Guest::StuckLow,
                Guest::HalfDown,
            ]);
            let range = crate::verify::range_spec(window, scrape, now);
            let window_start = range.start - range.rate_window;
            // Old (created long before the window) or young (created inside it).
            let young = rng.next() < 0.3;
            let created = match young {
                true => window_start + rng.next() * (range.end - window_start) * 0.5,
                false => window_start - 600.0 - rng.next() * 3600.0,
            };
            let start = created + 20.0 + rng.next() * 60.0;
            let declared = period as f64;
            let busy = move |t: f64| -> f64 {
                if t < start {
                    return 0.02;
                }
                let at = (t - start).rem_euclid(match guest {
                    Guest::DoublePeriod => 2.0 * declared,
                    _ => declared,
                });
                let high = at
                    < match guest {
                        Guest::DoublePeriod => declared,
                        _ => declared / 2.0,
                    };
                match (guest, high) {
                    (Guest::StuckHigh, _) => 0.873,
                    (Guest::StuckLow, _) => 0.097,
                    (_, true) => 0.873,
                    (Guest::HalfDown, false) => 0.5,
                    (_, false) => 0.097,
                }
            };
            let phase = rng.next() * scrape;
            let samples = scraped(&range, scrape, phase, noise, &mut rng, &busy, created);
            let report = judge_profile(
                &cpu_step(period),
                &samples,
                &range,
                Some(created),
                &mut FitCache::default(),
            );
            out.verdicts += 1;
            let status = report.status;
            *out.tally
                .entry((format!("{guest:?}"), status.as_str()))
                .or_default() += 1;
            if guest == Guest::Following && status != Verdict::Pass {
                // The reason without its figures (ages, times), so like reasons add up.
                let why: String = report
                    .summary
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .take(70)
                    .collect();
                *out.reasons.entry(why).or_default() += 1;
            }
            let is_wrong = match guest {
                Guest::Following => status.is_missing() && status != Verdict::TooYoung,
                _ => status == Verdict::Pass,
            };
            if is_wrong {
                out.wrong.push(format!(
                    "{guest:?} period {period} window {window} scrape {scrape} noise {noise} young {young}: {} ({})",
                    status.as_str(),
                    report.summary
                ));
            }
        }
        out
    }

    /// The first 240 simulated VMs: every verdict right (runs with the unit tests).
    #[test]
    fn profile_verdicts_are_right_for_240_simulated_vms() {
        let run = simulate(240);
        assert_eq!(run.verdicts, 240);
        // Both kinds of guest are present, and following guests do pass.
        assert!(
            run.tally
                .get(&("Following".into(), "pass"))
                .is_some_and(|n| *n >= 20)
        );
        assert!(
            run.tally
                .contains_key(&("DoublePeriod".into(), "off profile"))
        );
        assert!(run.wrong.is_empty(), "{:#?}", run.wrong);
    }

    /// The wrong-verdict rate over 2,400 simulated VMs, with the tally. Figures in
    /// docs/performance.md (`cargo test --release --lib profile_wrong_verdict_rate --
    /// --ignored --nocapture`).
    #[test]
    #[ignore]
    fn profile_wrong_verdict_rate() {
        let run = simulate(2400);
        for ((guest, status), n) in &run.tally {
            eprintln!("{guest:>13} {status:>13}: {n}");
        }
        for (why, n) in &run.reasons {
            eprintln!("following, not passed {n:>4}: {why}");
        }
        for w in &run.wrong {
            eprintln!("WRONG {w}");
        }
        eprintln!("{} wrong verdict(s) in {}", run.wrong.len(), run.verdicts);
        assert!(run.verdicts >= 1000);
        assert!(
            run.wrong.is_empty(),
            "{} wrong of {}",
            run.wrong.len(),
            run.verdicts
        );
    }

    #[test]
    fn phases_are_cut_at_the_clock_and_merged_across_cycles() {
        let schedule = LoadProfile::step(Levels { low: 1, high: 2 }, 100, 50)
            .unwrap()
            .schedule();
        let phases = phases_in(&schedule, 1000.0, 900.0, 1160.0);
        assert_eq!(
            phases,
            vec![
                (1000.0, 1050.0, 2),
                (1050.0, 1100.0, 1),
                (1100.0, 1150.0, 2),
                (1150.0, 1160.0, 1)
            ]
        );
    }
}
