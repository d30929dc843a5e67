//! The figures a run's page shows, computed from its audit records (pure): how long each
//! stage took, the time-to-ready percentiles per phase, the histogram, the cumulative
//! created/ready curves, the slowest VMs, the failures and the churn actions in time.
//!
//! The same for what Prometheus answered: the band of each signal across the VMs, each VM's
//! mean against the threshold, and the alerts' firing spans.
//!
//! Owns: reading the records' timestamps as offsets from the run's start and every statistic
//! derived from them. Must not: render, or read the database or Prometheus.

use std::collections::BTreeMap;

use crate::audit::query::{EventRow, ExecutionDetail, VmRow, seconds_between};
use crate::disruption::Assessed;
use crate::disruption::report::Context;
use crate::signals::contract::{LevelMapping, ProfiledCheck, Unit};
use crate::verify::evaluate::Verdict;

/// One run as recorded: its own detail, the churn executions that acted on its VMs, and
/// what Prometheus holds about it (or why the page has none).
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub detail: ExecutionDetail,
    /// Churn executions linked to the run, each with its events, oldest first.
    pub churns: Vec<ExecutionDetail>,
    pub load: Fetched<Load>,
    pub alerts: Fetched<Vec<AlertSpan>>,
    /// What `virtwork disruption`'s analysis found over the run's window, or why the page
    /// has none (no cluster reachable, the VMs gone).
    pub disruption: Fetched<Disruption>,
}

/// The disruption analysis of the run's window ([`crate::disruption`]): every VM of the run
/// still in the cluster with its migrations, restarts and interruptions judged, and how the
/// analysis was made (Prometheus, or why interruptions were not measured; the budget).
#[derive(Debug, Clone)]
pub struct Disruption {
    pub vms: Vec<Assessed>,
    pub context: Context,
}

/// Data read from outside the audit database, or why there is none (shown on the page).
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched<T> {
    Data(T),
    Missing(String),
}

/// The load section of one run: every signal drawn, where the VMs' params came from, and
/// verify's verdicts or why there are none.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub series: Vec<SignalSeries>,
    /// Where each VM's params (and so its thresholds) came from, in words.
    pub params_from: String,
    /// How verify judged the VMs (e.g. "over the last 2h"), or why it did not.
    pub verdicts: Result<String, String>,
    /// Verdicts that belong to no drawn signal (a catalog VM without its local entry, a
    /// built-in whose recorded profile is unusable), by VM name.
    pub undrawn: Vec<(String, String, Judged)>,
}

/// One signal of one workload over the run's window (built-in, or declared by a catalog
/// entry): each VM's samples, threshold, verdict and expected shape.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalSeries {
    pub workload: String,
    pub signal: String,
    pub description: String,
    pub unit: Unit,
    /// Declared by a catalog entry rather than built in.
    pub catalog: bool,
    /// Why some VMs have no samples although Prometheus was read (e.g. a cap on queries).
    pub note: Option<String>,
    pub vms: BTreeMap<String, VmSignal>,
}

/// One VM's share of a [`SignalSeries`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VmSignal {
    /// (seconds since the run started, value).
    pub samples: Vec<(f64, f64)>,
    /// What verify requires of this VM, from its own params (None: not expected).
    pub threshold: Option<f64>,
    /// verify's verdict over the report's window (None: verify did not judge it).
    pub verdict: Option<Judged>,
    /// A profiled VM's expected shape.
    pub expected: Option<Expected>,
}

/// verify's verdict on one signal of one VM.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub verdict: Verdict,
    pub observed: Option<f64>,
    /// verify's note or error (why not expected, the profile's summary, a rejected query).
    pub note: Option<String>,
}

/// A profiled VM's load profile as the signal should follow it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The profile in words (e.g. "step: level 90 ...").
    pub shape: String,
    /// Where the profile's clock was taken from, in words.
    pub clock_from: String,
    /// Each phase change in the window: (seconds since the run started, level, value at
    /// full effect); the last one holds to the window's end.
    pub points: Vec<(f64, u32, f64)>,
}

/// The word a verdict is shown by (the shape of the mark carries it too).
pub fn verdict_word(verdict: Verdict) -> String {
    verdict.as_str().to_uppercase()
}

/// The expected shape of `check` over `[from, to]` seconds since the run started, its clock
/// started at `clock` (same scale; nothing runs before it), `factor` per level for profiles
/// whose level has no fixed value (None there: no shape can be drawn).
pub fn expected_points(
    check: &ProfiledCheck,
    factor: Option<f64>,
    clock: f64,
    from: f64,
    to: f64,
) -> Option<Vec<(f64, u32, f64)>> {
    let factor = match check.mapping {
        LevelMapping::Absolute { .. } => 1.0,
        LevelMapping::Relative => factor?,
    };
    let schedule = check.profile.schedule();
    let level = |t: f64| match t < clock {
        true => 0,
        false => schedule.level_at((t - clock).floor() as u64),
    };
    // Whole seconds up to 2,000 probes: a phase shorter than a probe is a rounding of the
    // drawing, not of the judging (verify judges phases from the schedule itself).
    let step = ((to - from) / 2000.0).max(1.0);
    let mut points: Vec<(f64, u32, f64)> = Vec::new();
    let mut t = from;
    while t <= to {
        let at = level(t);
        if points.last().is_none_or(|p| p.1 != at) {
            points.push((t, at, check.nominal(at, factor)));
        }
        t += step;
    }
    Some(points)
}

/// The expected shape as a line that holds each level until the next change.
pub fn expected_line(expected: &Expected, end: f64) -> Vec<(f64, f64)> {
    let mut line: Vec<(f64, f64)> = expected.points.iter().map(|p| (p.0, p.2)).collect();
    if let Some(last) = expected.points.last()
        && last.0 < end
    {
        line.push((end, last.2));
    }
    line
}

/// The distinct thresholds of a signal's VMs, each with how many VMs it holds, lowest first.
pub fn thresholds(series: &SignalSeries) -> Vec<(f64, usize)> {
    let mut out: Vec<(f64, usize)> = Vec::new();
    let mut all: Vec<f64> = series.vms.values().filter_map(|v| v.threshold).collect();
    all.sort_by(f64::total_cmp);
    for th in all {
        match out.last_mut() {
            Some(last) if last.0 == th => last.1 += 1,
            _ => out.push((th, 1)),
        }
    }
    out
}

/// How many VMs got each verdict, in verdict order (failures after passes), with the VMs
/// verify did not judge last as `None`.
pub fn verdict_counts<'a>(
    judged: impl IntoIterator<Item = Option<&'a Judged>>,
) -> Vec<(Option<Verdict>, usize)> {
    let mut counts: Vec<(Option<Verdict>, usize)> = Vec::new();
    for j in judged {
        let key = j.map(|j| j.verdict);
        match counts.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 += 1,
            None => counts.push((key, 1)),
        }
    }
    counts.sort_by_key(|(k, _)| k.map_or(u8::MAX, verdict_rank));
    counts
}

/// Passes first, then what is not a failure, then failures (alphabetically by word).
fn verdict_rank(v: Verdict) -> u8 {
    match v {
        Verdict::Pass => 0,
        Verdict::NotExpected => 1,
        Verdict::TooYoung => 2,
        Verdict::Below => 3,
        Verdict::OffProfile => 4,
        Verdict::NoData => 5,
        Verdict::Stale => 6,
        Verdict::NotRunning => 7,
        Verdict::Error => 8,
        Verdict::Unverifiable => 9,
    }
}

/// The lowest, median and highest value across the VMs at each sampled moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Band {
    pub low: Vec<(f64, f64)>,
    pub median: Vec<(f64, f64)>,
    pub high: Vec<(f64, f64)>,
}

/// The band of `series` across its VMs (a 1,000-VM signal becomes three lines).
pub fn band(series: &SignalSeries) -> Band {
    let mut at: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for vm in series.vms.values() {
        for &(t, v) in &vm.samples {
            at.entry(t.round() as i64).or_default().push(v);
        }
    }
    let mut band = Band::default();
    for (t, mut values) in at {
        values.sort_by(f64::total_cmp);
        let t = t as f64;
        band.low.push((t, values[0]));
        band.median.push((t, values[(values.len() - 1) / 2]));
        band.high.push((t, values[values.len() - 1]));
    }
    band
}

/// A VM's mean over the window (None: no samples).
pub fn mean(samples: &[(f64, f64)]) -> Option<f64> {
    (!samples.is_empty()).then(|| samples.iter().map(|s| s.1).sum::<f64>() / samples.len() as f64)
}

/// The VMs in the order the page lists them: those verify failed first, then by mean, lowest
/// first, then those without samples, then by name.
pub fn vm_order(series: &SignalSeries) -> Vec<(&str, Option<f64>, &VmSignal)> {
    let mut rows: Vec<(&str, Option<f64>, &VmSignal)> = series
        .vms
        .iter()
        .map(|(name, vm)| (name.as_str(), mean(&vm.samples), vm))
        .collect();
    let failed = |vm: &VmSignal| vm.verdict.as_ref().is_some_and(|j| j.verdict.is_missing());
    rows.sort_by(|a, b| {
        failed(b.2)
            .cmp(&failed(a.2))
            .then_with(|| match (a.1, b.1) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (x, y) => y.is_some().cmp(&x.is_some()),
            })
            .then_with(|| a.0.cmp(b.0))
    });
    rows
}

/// One alert firing for one VM without a gap: from its first to its last firing sample.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSpan {
    pub alert: String,
    pub vm: String,
    /// Seconds since the run started.
    pub from: f64,
    pub until: f64,
    /// Still firing at the last sample of the window.
    pub firing_at_end: bool,
}

/// The spans of each (alert, VM)'s firing samples (seconds since the run started), a gap of
/// more than `step` ending one; `end` is the window's last moment.
pub fn alert_spans(
    firing: &BTreeMap<(String, String), Vec<f64>>,
    step: f64,
    end: f64,
) -> Vec<AlertSpan> {
    let mut spans = Vec::new();
    for ((alert, vm), times) in firing {
        let mut times = times.clone();
        times.sort_by(f64::total_cmp);
        let mut start: Option<(f64, f64)> = None;
        for t in times {
            start = match start {
                Some((from, last)) if t - last <= step * 1.5 => Some((from, t)),
                Some((from, last)) => {
                    spans.push(span(alert, vm, from, last, step, end));
                    Some((t, t))
                }
                None => Some((t, t)),
            };
        }
        if let Some((from, last)) = start {
            spans.push(span(alert, vm, from, last, step, end));
        }
    }
    spans.sort_by(|a, b| {
        a.from
            .total_cmp(&b.from)
            .then_with(|| a.alert.cmp(&b.alert))
    });
    spans
}

fn span(alert: &str, vm: &str, from: f64, last: f64, step: f64, end: f64) -> AlertSpan {
    AlertSpan {
        alert: alert.to_string(),
        vm: vm.to_string(),
        from,
        until: last,
        firing_at_end: end - last < step * 1.5,
    }
}

/// Nearest-rank percentiles of a set of whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub count: usize,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

/// Nearest-rank percentiles of `values`; `None` when there are none.
pub fn percentiles(values: &[i64]) -> Option<Percentiles> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = |p: usize| sorted[(p * sorted.len()).div_ceil(100).max(1) - 1];
    (!sorted.is_empty()).then(|| Percentiles {
        count: sorted.len(),
        p50: rank(50),
        p90: rank(90),
        p99: rank(99),
        max: sorted[sorted.len() - 1],
    })
}

/// One readiness phase: what it measures and its percentiles over the VMs that reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub name: &'static str,
    pub measured: &'static str,
    pub stats: Option<Percentiles>,
}

/// Seconds from the run's start to the VM's creation.
fn created_offset(run_start: &str, vm: &VmRow) -> Option<i64> {
    seconds_between(Some(run_start), vm.created_at.as_deref())
}

/// The four phases of a VM's way to ready: created (from the run's start), then scheduled,
/// running and ready (each from the VM's creation).
pub fn phases(detail: &ExecutionDetail) -> Vec<Phase> {
    let start = &detail.execution.started_at;
    let of = |f: &dyn Fn(&VmRow) -> Option<i64>| -> Option<Percentiles> {
        percentiles(&detail.vms.iter().filter_map(f).collect::<Vec<_>>())
    };
    vec![
        Phase {
            name: "created",
            measured: "from the run's start",
            stats: of(&|vm| created_offset(start, vm)),
        },
        Phase {
            name: "scheduled",
            measured: "from the VM's creation",
            stats: of(&|vm| vm.seconds_to_scheduled),
        },
        Phase {
            name: "running",
            measured: "from the VM's creation",
            stats: of(&|vm| vm.seconds_to_running),
        },
        Phase {
            name: "ready",
            measured: "from the VM's creation",
            stats: of(&|vm| vm.seconds_to_ready),
        },
    ]
}

/// One stage of the run and how long it took (`None` when the records do not say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub name: &'static str,
    pub seconds: Option<i64>,
    pub explains: &'static str,
}

/// Planning and preflight, creation, the readiness wait, and the whole run.
pub fn stages(detail: &ExecutionDetail) -> Vec<Stage> {
    let e = &detail.execution;
    let earliest = |f: fn(&VmRow) -> Option<&String>| detail.vms.iter().filter_map(f).min();
    let latest = |f: fn(&VmRow) -> Option<&String>| detail.vms.iter().filter_map(f).max();
    let first_created = earliest(|v| v.created_at.as_ref());
    let last_created = latest(|v| v.created_at.as_ref());
    let last_ready = latest(|v| v.ready_at.as_ref());
    let all_ready = !detail.vms.is_empty() && detail.vms.iter().all(|v| v.ready_at.is_some());
    let wait_end = if all_ready {
        last_ready
    } else {
        e.completed_at.as_ref()
    };
    let between = |a: Option<&String>, b: Option<&String>| {
        seconds_between(a.map(String::as_str), b.map(String::as_str))
    };
    vec![
        Stage {
            name: "plan and preflight",
            seconds: between(Some(&e.started_at), first_created),
            explains: "from the start to the first VM accepted",
        },
        Stage {
            name: "create VMs",
            seconds: between(first_created, last_created),
            explains: "from the first VM accepted to the last",
        },
        Stage {
            name: "wait for readiness",
            seconds: between(last_created, wait_end),
            explains: if all_ready {
                "from the last VM accepted to the last VM ready"
            } else {
                "from the last VM accepted to the end of the run (not every VM became ready)"
            },
        },
        Stage {
            name: "whole run",
            seconds: e.duration_seconds,
            explains: "from the start to the end, as recorded",
        },
    ]
}

/// One histogram bin: VMs whose time falls in `[lo, hi)` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bin {
    pub lo: i64,
    pub hi: i64,
    pub count: usize,
}

/// At most 24 bins of a round width (1, 2, 5, 10, 15, 30 s, then minutes) covering `values`.
pub fn histogram(values: &[i64]) -> Vec<Bin> {
    let Some(max) = values.iter().copied().max() else {
        return Vec::new();
    };
    let max = max.max(0);
    const WIDTHS: [i64; 14] = [
        1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200,
    ];
    let width = WIDTHS
        .iter()
        .copied()
        .find(|w| max / w < 24)
        .unwrap_or_else(|| (max / 24 + 1).max(1));
    let mut bins: Vec<Bin> = (0..=max / width)
        .map(|i| Bin {
            lo: i * width,
            hi: (i + 1) * width,
            count: 0,
        })
        .collect();
    for &v in values {
        bins[(v.max(0) / width) as usize].count += 1;
    }
    bins
}

/// The count reached at each offset: `(seconds, how many so far)`, one point per distinct
/// second (a curve of 1,000 VMs has at most as many points as distinct seconds).
pub fn cumulative(offsets: &[i64]) -> Vec<(f64, f64)> {
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (i, &t) in sorted.iter().enumerate() {
        let point = (t as f64, (i + 1) as f64);
        match points.last_mut() {
            Some(last) if last.0 == point.0 => *last = point,
            _ => points.push(point),
        }
    }
    points
}

/// Offsets from the run's start at which VMs were created and became ready.
pub fn created_and_ready(detail: &ExecutionDetail) -> (Vec<i64>, Vec<i64>) {
    let start = Some(detail.execution.started_at.as_str());
    let offsets = |f: fn(&VmRow) -> Option<&str>| {
        detail
            .vms
            .iter()
            .filter_map(|vm| seconds_between(start, f(vm)))
            .collect::<Vec<_>>()
    };
    (
        offsets(|v| v.created_at.as_deref()),
        offsets(|v| v.ready_at.as_deref()),
    )
}

/// The `n` VMs that took longest to become ready, those that never did first.
pub fn slowest(detail: &ExecutionDetail, n: usize) -> Vec<&VmRow> {
    let mut vms: Vec<&VmRow> = detail.vms.iter().collect();
    // Never ready sorts as slowest; ties by name so the page is deterministic.
    vms.sort_by(|a, b| {
        let key = |v: &VmRow| v.seconds_to_ready.unwrap_or(i64::MAX);
        key(b).cmp(&key(a)).then_with(|| a.vm_name.cmp(&b.vm_name))
    });
    vms.truncate(n);
    vms
}

/// Something that went wrong, with its reason as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub at: String,
    pub what: String,
    pub reason: String,
}

/// The run's error, then each failed creation or readiness, in recorded order.
pub fn failures(detail: &ExecutionDetail) -> Vec<Failure> {
    let e = &detail.execution;
    let mut found = Vec::new();
    if let Some(summary) = &e.error_summary {
        found.push(Failure {
            at: e
                .completed_at
                .clone()
                .unwrap_or_else(|| e.started_at.clone()),
            what: format!("the {}", e.command),
            reason: summary.clone(),
        });
    }
    for event in &detail.events {
        if matches!(event.event_type.as_str(), "vm_failed" | "vm_timeout") {
            found.push(Failure {
                at: event.occurred_at.clone(),
                what: event_subject(event),
                reason: event
                    .error_detail
                    .clone()
                    .or_else(|| event.message.clone())
                    .unwrap_or_default(),
            });
        }
    }
    found
}

fn event_subject(event: &EventRow) -> String {
    event
        .vm_name
        .clone()
        .or_else(|| event.message.clone())
        .unwrap_or_else(|| event.event_type.clone())
}

/// One churn action or restart as the timeline shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnMark {
    /// Seconds from the run's start to when it ended (as recorded).
    pub at: i64,
    /// `restart`, `stop-start`, `migrate` or `start again`.
    pub action: String,
    /// `<namespace>/<vm>` as recorded.
    pub vm: String,
    pub failed: bool,
    pub error: Option<String>,
    pub churn_run: String,
}

/// The churn events of every churn execution linked to the run, by time.
pub fn churn_marks(run: &RunRecord) -> Vec<ChurnMark> {
    let start = Some(run.detail.execution.started_at.as_str());
    let mut marks: Vec<ChurnMark> = run
        .churns
        .iter()
        .flat_map(|churn| {
            churn.events.iter().filter_map(move |event| {
                let (action, vm) = churn_event(event)?;
                Some(ChurnMark {
                    at: seconds_between(start, Some(&event.occurred_at))?,
                    action,
                    vm,
                    failed: event.event_type.ends_with("_failed"),
                    error: event.error_detail.clone(),
                    churn_run: churn.execution.run_id.clone(),
                })
            })
        })
        .collect();
    marks.sort_by_key(|m| m.at);
    marks
}

/// `(action, vm)` of a churn event, read from its recorded message (docs/audit-schema.md):
/// `<action> <ns>/<vm>: succeeded|failed`, `Started <ns>/<vm> again`, `Could not start
/// <ns>/<vm> again`.
fn churn_event(event: &EventRow) -> Option<(String, String)> {
    let message = event.message.as_deref()?;
    match event.event_type.as_str() {
        "churn_action" | "churn_action_failed" => {
            let (action, rest) = message.split_once(' ')?;
            let (vm, _) = rest.rsplit_once(": ")?;
            Some((action.to_string(), vm.to_string()))
        }
        "churn_restored" => {
            let vm = message.strip_prefix("Started ")?.strip_suffix(" again")?;
            Some(("start again".into(), vm.to_string()))
        }
        "churn_restore_failed" => {
            let vm = message
                .strip_prefix("Could not start ")?
                .strip_suffix(" again")?;
            Some(("start again".into(), vm.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::audit::query::ExecutionRecord;

    /// A recorded execution started at `started` (RFC 3339) with `events`.
    pub(crate) fn detail(started: &str, events: Vec<EventRow>) -> ExecutionDetail {
        ExecutionDetail {
            execution: ExecutionRecord {
                run_id: "3f1c7a00-0000-4000-8000-000000000001".into(),
                command: "run".into(),
                status: "success".into(),
                namespace: "ns".into(),
                kubeconfig_path: None,
                cluster_context: None,
                container_disk_image: None,
                default_cpu_cores: None,
                default_memory: None,
                data_disk_size: None,
                workloads: Vec::new(),
                total_vm_count: None,
                total_workload_count: None,
                dry_run: false,
                ssh_auth_configured: false,
                cleanup_mode: None,
                wait_for_ready: true,
                ready_timeout_seconds: None,
                linked_run_ids: Vec::new(),
                deleted: None,
                started_at: started.into(),
                completed_at: None,
                duration_seconds: None,
                error_summary: None,
            },
            workloads: Vec::new(),
            vms: Vec::new(),
            resources: Vec::new(),
            events,
            linked_cleanups: Vec::new(),
        }
    }

    /// How a disruption analysis of the window was made: Prometheus read.
    pub(crate) fn context() -> Context {
        Context {
            namespace: Some("ns".into()),
            run_id: None,
            span: crate::disruption::Span {
                from: 1_772_359_200.0,
                to: 1_772_362_800.0,
            },
            span_from: "the run's window".into(),
            prometheus: Ok("prometheus-k8s in monitoring".into()),
            step: Some(15.0),
            scrape_interval: Some(15.0),
            budget: crate::disruption::Budget {
                max_interruption: Some(30.0),
                max_interruption_from: "two scrape intervals of 15s".into(),
                allow_restarts: crate::model::AllowRestarts::None,
            },
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(
            percentiles(&values),
            Some(Percentiles {
                count: 100,
                p50: 50,
                p90: 90,
                p99: 99,
                max: 100
            })
        );
        let one = percentiles(&[7]).unwrap();
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert_eq!(percentiles(&[]), None);
    }

    #[test]
    fn histogram_bins_are_round_and_count_every_value() {
        // 119 s in bins of 5 s: 24 bins, the widest count under 24 that is round.
        let bins = histogram(&[0, 4, 5, 9, 10, 119]);
        let first = Bin {
            lo: 0,
            hi: 5,
            count: 2,
        };
        assert_eq!(bins[0], first);
        assert_eq!(bins[1].count, 2);
        assert_eq!(bins.last().unwrap().hi, 120);
        assert_eq!(bins.iter().map(|b| b.count).sum::<usize>(), 6);
        assert!(bins.len() <= 24);
        assert!(histogram(&[]).is_empty());
    }

    #[test]
    fn cumulative_has_one_point_per_second() {
        assert_eq!(
            cumulative(&[5, 3, 3, 9]),
            vec![(3.0, 2.0), (5.0, 3.0), (9.0, 4.0)]
        );
    }

    fn vm(samples: Vec<(f64, f64)>, threshold: f64, verdict: Option<Verdict>) -> VmSignal {
        VmSignal {
            samples,
            threshold: Some(threshold),
            verdict: verdict.map(|verdict| Judged {
                verdict,
                observed: None,
                note: None,
            }),
            expected: None,
        }
    }

    #[test]
    fn band_order_thresholds_and_verdict_counts_across_vms() {
        let series = SignalSeries {
            workload: "cpu".into(),
            signal: "vcpu-busy".into(),
            description: String::new(),
            unit: Unit::VcpuFraction,
            catalog: false,
            note: None,
            vms: BTreeMap::from([
                (
                    "a".to_string(),
                    vm(vec![(0.0, 0.9), (30.0, 0.8)], 0.5, Some(Verdict::Pass)),
                ),
                (
                    "b".to_string(),
                    vm(vec![(0.0, 0.1), (30.0, 0.3)], 0.15, Some(Verdict::Pass)),
                ),
                (
                    "c".to_string(),
                    vm(vec![(0.0, 0.5)], 0.5, Some(Verdict::Below)),
                ),
                ("d".to_string(), vm(Vec::new(), 0.5, None)),
            ]),
        };
        let b = band(&series);
        assert_eq!(b.low, vec![(0.0, 0.1), (30.0, 0.3)]);
        assert_eq!(b.median, vec![(0.0, 0.5), (30.0, 0.3)]);
        assert_eq!(b.high, vec![(0.0, 0.9), (30.0, 0.8)]);
        // Failed first (whatever its mean), then the lowest mean, then no samples.
        let order: Vec<&str> = vm_order(&series).iter().map(|r| r.0).collect();
        assert_eq!(order, vec!["c", "b", "a", "d"]);
        assert!((vm_order(&series)[1].1.unwrap() - 0.2).abs() < 1e-9);
        // Each VM's own threshold, distinct ones counted.
        assert_eq!(thresholds(&series), vec![(0.15, 1), (0.5, 3)]);
        let counts = verdict_counts(series.vms.values().map(|v| v.verdict.as_ref()));
        assert_eq!(
            counts,
            vec![
                (Some(Verdict::Pass), 2),
                (Some(Verdict::Below), 1),
                (None, 1)
            ]
        );
        assert_eq!(verdict_word(Verdict::NoData), "NO DATA");
    }

    #[test]
    fn an_expected_shape_follows_the_schedule_from_its_clock() {
        use crate::profile_schedule::{Levels, LoadProfile};
        let profile = LoadProfile::step(Levels { low: 10, high: 90 }, 60, 50).unwrap();
        let check = ProfiledCheck {
            profile,
            mapping: LevelMapping::Absolute {
                idle: 0.0,
                per_level: 0.01,
            },
            quiet_gap_secs: 0.0,
        };
        // Clock 20 s into the window: nothing before it, then high for 30 s, low for 30 s.
        let points = expected_points(&check, None, 20.0, 0.0, 140.0).unwrap();
        let levels: Vec<(f64, u32)> = points.iter().map(|p| (p.0, p.1)).collect();
        assert_eq!(
            levels,
            vec![
                (0.0, 0),
                (20.0, 90),
                (50.0, 10),
                (80.0, 90),
                (110.0, 10),
                (140.0, 90)
            ]
        );
        assert!((points[1].2 - 0.9).abs() < 1e-9);
        let expected = Expected {
            shape: profile.describe(),
            clock_from: "test".into(),
            points: points[..3].to_vec(),
        };
        assert_eq!(
            expected_line(&expected, 70.0).last(),
            Some(&(70.0, 0.1)),
            "the last level holds to the end"
        );
        // A profile with no fixed value per level cannot be drawn without a measured factor.
        let relative = ProfiledCheck {
            mapping: LevelMapping::Relative,
            ..check
        };
        assert!(expected_points(&relative, None, 0.0, 0.0, 60.0).is_none());
        assert_eq!(
            expected_points(&relative, Some(2.0), 0.0, 0.0, 10.0).unwrap()[0].2,
            180.0
        );
    }

    #[test]
    fn alert_spans_split_at_gaps_and_know_when_still_firing() {
        let firing = BTreeMap::from([(
            ("Hot".to_string(), "vm-1".to_string()),
            vec![60.0, 90.0, 120.0, 300.0, 330.0],
        )]);
        let spans = alert_spans(&firing, 30.0, 330.0);
        assert_eq!(spans.len(), 2);
        assert_eq!(
            (spans[0].from, spans[0].until, spans[0].firing_at_end),
            (60.0, 120.0, false)
        );
        assert_eq!(
            (spans[1].from, spans[1].until, spans[1].firing_at_end),
            (300.0, 330.0, true)
        );
    }

    #[test]
    fn churn_messages_name_the_action_and_vm() {
        let event = |kind: &str, message: &str| EventRow {
            occurred_at: "2026-01-01T00:00:00Z".into(),
            event_type: kind.into(),
            message: Some(message.into()),
            error_detail: None,
            vm_name: None,
            workload: None,
        };
        assert_eq!(
            churn_event(&event("churn_action", "migrate ns/vm-1: succeeded")),
            Some(("migrate".into(), "ns/vm-1".into()))
        );
        assert_eq!(
            churn_event(&event(
                "churn_restore_failed",
                "Could not start ns/a: b again"
            )),
            Some(("start again".into(), "ns/a: b".into()))
        );
        assert_eq!(churn_event(&event("vm_ready", "VM x is ready")), None);
    }
}
