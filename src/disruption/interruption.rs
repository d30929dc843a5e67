//! How long a VM's workload was interrupted over the window: the time its expected signals
//! (verify's contract: each built-in signal's series present, and at least its threshold
//! where the contract sets one for the rate window used) were absent or below, read from
//! range queries on one grid of sample times.
//!
//! Pure: samples in, intervals out. The resolution is the grid's step: an interval starts
//! at the first sample found wanting and ends one step after the last.
//!
//! Must not: query anything or decide the budget.

use serde::Serialize;

/// The sample times of the range queries: `start + i * step` for `i < points`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub start: f64,
    pub step: f64,
    pub points: usize,
}

impl Grid {
    pub fn time(&self, i: usize) -> f64 {
        self.start + i as f64 * self.step
    }

    fn index(&self, t: f64) -> Option<usize> {
        let i = ((t - self.start) / self.step).round();
        (i >= 0.0 && (i as usize) < self.points).then_some(i as usize)
    }

    pub fn end(&self) -> f64 {
        self.time(self.points.saturating_sub(1))
    }
}

/// One expected signal of a VM: its samples and the least each must show (None: present
/// is enough).
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub samples: &'a [(f64, f64)],
    pub threshold: Option<f64>,
}

/// One interruption.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub start: f64,
    pub end: f64,
    /// Still interrupted at the end of the window.
    pub ongoing: bool,
}

impl Interval {
    pub fn seconds(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }
}

/// A VM's interruptions over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interruption {
    pub intervals: Vec<Interval>,
    pub longest_seconds: f64,
    pub total_seconds: f64,
}

/// Whether each grid point meets every expected signal.
fn good_points(expected: &[Expected], grid: Grid) -> Vec<bool> {
    let mut met = vec![0usize; grid.points];
    for signal in expected {
        for &(t, v) in signal.samples {
            let Some(i) = grid.index(t) else { continue };
            if signal.threshold.is_none_or(|min| v >= min) {
                met[i] += 1;
            }
        }
    }
    met.into_iter().map(|n| n >= expected.len()).collect()
}

/// The interruptions of one VM whose expected signals are `expected` (None: nothing to
/// measure by). With `first_start` (the VM itself was created in the window, at that
/// time), the points before its signals were first met are its first boot, not an
/// interruption, and a VM that never met them is interrupted from its creation, not from
/// before it existed (a fresh VM under `--since 7d` read as interrupted for seven days);
/// otherwise every point counts.
pub fn measure(
    expected: &[Expected],
    grid: Grid,
    first_start: Option<f64>,
) -> Option<Interruption> {
    if expected.is_empty() || grid.points == 0 {
        return None;
    }
    let good = good_points(expected, grid);
    let first = match first_start {
        Some(created) => good.iter().position(|g| *g).unwrap_or_else(|| {
            let at_or_after = ((created - grid.start) / grid.step).ceil().max(0.0) as usize;
            at_or_after.min(grid.points - 1)
        }),
        None => 0,
    };
    let mut intervals = Vec::new();
    let mut run: Option<usize> = None;
    for (i, ok) in good.iter().enumerate().skip(first) {
        match (ok, run) {
            (false, None) => run = Some(i),
            (true, Some(a)) => {
                intervals.push(Interval {
                    start: grid.time(a),
                    end: grid.time(i),
                    ongoing: false,
                });
                run = None;
            }
            _ => {}
        }
    }
    if let Some(a) = run {
        intervals.push(Interval {
            start: grid.time(a),
            end: grid.end() + grid.step,
            ongoing: true,
        });
    }
    Some(Interruption {
        longest_seconds: intervals.iter().map(Interval::seconds).fold(0.0, f64::max),
        // A fold from +0.0: an empty sum is 0, not -0.
        total_seconds: intervals
            .iter()
            .map(Interval::seconds)
            .fold(0.0, |a, b| a + b),
        intervals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: Grid = Grid {
        start: 0.0,
        step: 10.0,
        points: 10,
    };

    fn series(values: &[Option<f64>]) -> Vec<(f64, f64)> {
        values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i as f64 * 10.0, v)))
            .collect()
    }

    #[test]
    fn absent_or_below_threshold_points_make_intervals_on_the_grid() {
        let cpu = series(&[
            Some(0.9),
            Some(0.9),
            Some(0.1),
            None,
            Some(0.9),
            Some(0.9),
            Some(0.9),
            Some(0.9),
            None,
            None,
        ]);
        let found = measure(
            &[Expected {
                samples: &cpu,
                threshold: Some(0.5),
            }],
            GRID,
            None,
        )
        .unwrap();
        assert_eq!(
            found.intervals,
            vec![
                Interval {
                    start: 20.0,
                    end: 40.0,
                    ongoing: false
                },
                Interval {
                    start: 80.0,
                    end: 100.0,
                    ongoing: true
                },
            ]
        );
        assert_eq!((found.longest_seconds, found.total_seconds), (20.0, 40.0));
        // Presence alone is owed without a threshold; every signal must be met.
        let other = series(&[Some(0.0); 10]);
        let found = measure(
            &[
                Expected {
                    samples: &other,
                    threshold: None,
                },
                Expected {
                    samples: &cpu,
                    threshold: None,
                },
            ],
            GRID,
            None,
        )
        .unwrap();
        assert_eq!(found.total_seconds, 30.0);
        assert!(measure(&[], GRID, None).is_none());
    }

    #[test]
    fn a_first_boot_in_the_window_is_not_an_interruption_but_a_later_gap_is() {
        let booting = series(&[
            None,
            None,
            Some(0.9),
            Some(0.9),
            None,
            Some(0.9),
            Some(0.9),
            Some(0.9),
            Some(0.9),
            Some(0.9),
        ]);
        let e = [Expected {
            samples: &booting,
            threshold: Some(0.5),
        }];
        assert_eq!(measure(&e, GRID, Some(0.0)).unwrap().total_seconds, 10.0);
        assert_eq!(measure(&e, GRID, None).unwrap().total_seconds, 30.0);
        // Never met: interrupted throughout, whatever its age.
        let dead = series(&[Some(0.01); 10]);
        let e = [Expected {
            samples: &dead,
            threshold: Some(0.5),
        }];
        let found = measure(&e, GRID, Some(0.0)).unwrap();
        assert_eq!(
            (found.longest_seconds, found.intervals[0].ongoing),
            (100.0, true)
        );
        // Created late in the window and never met: interrupted from its creation on.
        let found = measure(&e, GRID, Some(45.0)).unwrap();
        assert_eq!(
            (found.intervals[0].start, found.longest_seconds),
            (50.0, 50.0)
        );
    }
}
