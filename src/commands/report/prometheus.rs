//! Prometheus for `virtwork report`: reaching it, the run's window (shared with the load
//! section, [`super::load`]) and the alerts that fired for the run's VMs (one range query of
//! `ALERTS` per run).
//!
//! Owns: reaching Prometheus as verify does (the cluster's monitoring route or service proxy,
//! or `--prometheus` with the credential the settings chose), the run's window (from its
//! start to its cleanup, or now; at most a week, at most 240 steps), and turning answers into
//! [`AlertSpan`]s. A Prometheus that cannot be reached, or rejects a
//! query, becomes the reason the page gives; only an interrupt ends the command. Must not:
//! judge the signals (the page shows them against the threshold; verify judges).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::commands::prometheus_reach::{at_url, reach_prometheus};
use crate::config::{PrometheusTarget, ReportSettings};
use crate::error::{Error, Result};
use crate::htmlreport::RunRecord;
use crate::htmlreport::data::{AlertSpan, Fetched, alert_spans};
use crate::k8s::client::RequestGate;
use crate::k8s::retry::RetryPolicy;
use crate::model::Window;
use crate::signals::promql::Matchers;
use crate::verify::evaluate::RangeAnswer;
use crate::verify::prometheus::PrometheusApi;

/// How long transient failures of Prometheus are retried, per run.
const DEADLINE: Duration = Duration::from_secs(30);
/// Most points a chart's line gets.
const MAX_STEPS: u64 = 240;
/// Finest step: Prometheus scrapes KubeVirt's metrics every 15-30 s.
pub const MIN_STEP: u64 = 15;
/// Longest window read: a week after the run started.
const MAX_SPAN: u64 = 7 * 24 * 3600;
/// Longest `name=~` alternation sent; beyond it the answer is filtered by name instead.
const NAME_PATTERN_MAX_CHARS: usize = 4_000;

/// Prometheus as the settings name it, or the reason the page gives for its absence (only
/// an interrupt is an error).
pub async fn reach_or_why(
    settings: &ReportSettings,
    cancel: &CancellationToken,
) -> Result<std::result::Result<PrometheusApi, String>> {
    let Some(target) = &settings.prometheus else {
        return Ok(Err("left out with --no-prometheus".into()));
    };
    match reach(settings, target, cancel).await {
        Ok(api) => Ok(Ok(api)),
        Err(Error::Interrupted) => Err(Error::Interrupted),
        Err(err) => {
            let why = format!("no Prometheus reachable: {err}");
            tracing::warn!(
                "{}",
                crate::terminal::safe(&why, crate::terminal::LINE_CHARS)
            );
            Ok(Err(why))
        }
    }
}

/// Fills each run's alerts, or the reason they are missing.
pub async fn add(
    prometheus: std::result::Result<&PrometheusApi, &String>,
    runs: &mut [RunRecord],
    cancel: &CancellationToken,
) -> Result<()> {
    let api = match prometheus {
        Ok(api) => api,
        Err(why) => {
            set_missing(runs, why);
            return Ok(());
        }
    };
    for run in runs.iter_mut() {
        let Some(window) = RunWindow::of(run) else {
            set_missing(
                std::slice::from_mut(run),
                "the run's start time is not readable",
            );
            continue;
        };
        let policy = RetryPolicy::until(Instant::now() + DEADLINE);
        run.alerts = fetched(alerts(api, run, &window, &policy, cancel).await)?;
    }
    Ok(())
}

fn set_missing(runs: &mut [RunRecord], why: &str) {
    for run in runs {
        run.alerts = Fetched::Missing(why.to_string());
    }
}

/// An answer, or the reason the page gives for its absence (an interrupt stays an error).
pub fn fetched<T>(result: Result<T>) -> Result<Fetched<T>> {
    match result {
        Ok(data) => Ok(Fetched::Data(data)),
        Err(Error::Interrupted) => Err(Error::Interrupted),
        Err(err) => Ok(Fetched::Missing(err.to_string())),
    }
}

/// Prometheus as the settings name it (the same places and credentials as verify); a URL
/// needs no cluster connection.
async fn reach(
    settings: &ReportSettings,
    target: &PrometheusTarget,
    cancel: &CancellationToken,
) -> Result<PrometheusApi> {
    let access = &settings.global.cluster;
    match target {
        PrometheusTarget::Url { url, credential } => {
            let gate = RequestGate::new(access.rate_limit)?;
            at_url(access, url, credential, gate).await
        }
        PrometheusTarget::Discover => {
            let cluster = crate::commands::connect(access).await?;
            reach_prometheus(access, target, &cluster, cancel).await
        }
    }
}

/// The range a run's page reads, in Unix seconds.
pub struct RunWindow {
    pub start: u64,
    pub end: u64,
    step: u64,
}

impl RunWindow {
    /// From the run's start to the first cleanup of its objects, or now.
    pub fn of(run: &RunRecord) -> Option<RunWindow> {
        let unix = |text: &str| {
            text.parse::<jiff::Timestamp>()
                .ok()
                .and_then(|t| u64::try_from(t.as_second()).ok())
        };
        let start = unix(&run.detail.execution.started_at)?;
        let now = u64::try_from(jiff::Timestamp::now().as_second()).unwrap_or(start);
        let cleaned = run
            .detail
            .linked_cleanups
            .iter()
            .filter(|c| c.command.starts_with("cleanup"))
            .find_map(|c| unix(&c.started_at));
        let end = cleaned
            .unwrap_or(now)
            .min(now)
            .min(start + MAX_SPAN)
            .max(start + 2 * MIN_STEP);
        let step = ((end - start) / MAX_STEPS).max(MIN_STEP);
        Some(RunWindow { start, end, step })
    }

    /// What each sample of a chart's line covers: two steps, at least a minute (two scrapes
    /// at KubeVirt's usual 30 s), so a run younger than verify's default 5 minutes is not
    /// read diluted by the time before its series began.
    pub fn rate_window(&self) -> Window {
        Window::from_secs((2 * self.step).max(60)).unwrap_or(Window::DEFAULT)
    }

    pub fn range(&self) -> (u64, u64, u64) {
        (self.start, self.end, self.step)
    }

    /// Samples as (seconds since the run started, value).
    pub fn offsets(&self, samples: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
        let start = self.start as f64;
        samples.into_iter().map(|(t, v)| (t - start, v)).collect()
    }
}

/// The firing spans of every alert about the run's VMs (ALERTS, state firing, in the run's
/// namespace), each series named `alertname|name` by the query.
async fn alerts(
    api: &PrometheusApi,
    run: &RunRecord,
    window: &RunWindow,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Vec<AlertSpan>> {
    let d = &run.detail;
    let wanted: BTreeSet<&str> = d.vms.iter().map(|v| v.vm_name.as_str()).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let pattern = wanted
        .iter()
        .map(|n| n.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join("|");
    let mut m = Matchers::default()
        .with("alertstate", "firing")
        .with("namespace", &d.execution.namespace);
    if pattern.len() <= NAME_PATTERN_MAX_CHARS {
        m = m.with_op("name", "=~", &pattern);
    }
    let query = format!("label_join(ALERTS{{{m}}}, \"name\", \"|\", \"alertname\", \"name\")");
    let series = match api
        .query_range(&query, window.range(), policy, cancel)
        .await?
    {
        RangeAnswer::Series(series) => series,
        RangeAnswer::Rejected { error_type, error } => {
            return Err(Error::runtime(format!(
                "Prometheus rejected the ALERTS query ({error_type}): {error}"
            )));
        }
    };
    let mut firing: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for (key, samples) in series {
        let Some((alert, vm)) = key.split_once('|') else {
            continue;
        };
        if wanted.contains(vm) {
            firing
                .entry((alert.to_string(), vm.to_string()))
                .or_default()
                .extend(window.offsets(samples).into_iter().map(|(t, _)| t));
        }
    }
    let end = (window.end - window.start) as f64;
    Ok(alert_spans(&firing, window.step as f64, end))
}
