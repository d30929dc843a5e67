//! The disruption analysis of each run's window, for the timeline of `virtwork report`: the
//! same listing, Prometheus queries and judging as `virtwork disruption --run-id <run>`
//! ([`crate::commands::disruption::analyse`]), over the run's window (from its start to its
//! first cleanup, or now; at most a week), with that command's default budget.
//!
//! Owns: reaching the cluster once for all runs and turning a cluster that cannot be
//! reached, a run whose VMs are gone, or a failed analysis into the reason the page gives.
//! Only an interrupt ends the command. Must not: analyse anything itself.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prometheus::{RunWindow, fetched};
use crate::commands::disruption::{Request, analyse, list_objects, read_churn};
use crate::config::ReportSettings;
use crate::disruption::Span;
use crate::error::{Error, Result};
use crate::htmlreport::RunRecord;
use crate::htmlreport::data::{Disruption, Fetched};
use crate::k8s::client::Cluster;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope};
use crate::model::AllowRestarts;
use crate::verify::prometheus::PrometheusApi;

/// How long transient failures of the cluster and Prometheus are retried, per run.
const DEADLINE: Duration = Duration::from_secs(60);

/// The kubeconfig's cluster, or the reason the page gives for its absence (only an
/// interrupt is an error). Reached once for the load section and the timeline.
pub async fn connect_or_why(
    settings: &ReportSettings,
    cancel: &CancellationToken,
) -> Result<std::result::Result<Cluster, String>> {
    match connect(settings, cancel).await {
        Ok(cluster) => Ok(Ok(cluster)),
        Err(Error::Interrupted) => Err(Error::Interrupted),
        Err(err) => {
            let why = format!("no cluster reachable: {err}");
            tracing::warn!(
                "{}",
                crate::terminal::safe(&why, crate::terminal::LINE_CHARS)
            );
            Ok(Err(why))
        }
    }
}

/// Fills each run's disruption analysis, or the reason it is missing.
pub async fn add(
    settings: &ReportSettings,
    prometheus: std::result::Result<&PrometheusApi, &String>,
    cluster: std::result::Result<&Cluster, &String>,
    runs: &mut [RunRecord],
    cancel: &CancellationToken,
) -> Result<()> {
    let cluster = match cluster {
        Ok(cluster) => cluster,
        Err(why) => {
            for run in runs.iter_mut() {
                run.disruption = Fetched::Missing(why.clone());
            }
            return Ok(());
        }
    };
    for run in runs.iter_mut() {
        let ctx = ApiContext {
            client: cluster.client.clone(),
            policy: RetryPolicy::until(Instant::now() + DEADLINE),
            cancel: cancel.clone(),
        };
        run.disruption = match fetched(analysed(settings, prometheus, run, &ctx).await)? {
            Fetched::Data(Ok(found)) => Fetched::Data(found),
            Fetched::Data(Err(why)) | Fetched::Missing(why) => Fetched::Missing(why),
        };
    }
    Ok(())
}

/// The kubeconfig's cluster, answering.
async fn connect(settings: &ReportSettings, cancel: &CancellationToken) -> Result<Cluster> {
    let access = &settings.global.cluster;
    let cluster = crate::commands::connect(access).await?;
    cluster.gate.stop_when(cancel);
    let policy = RetryPolicy::until(Instant::now() + DEADLINE);
    crate::k8s::reach::reach(&cluster, &policy, cancel).await?;
    Ok(cluster)
}

/// One run's analysis; `Ok(Err(why))` when the cluster holds none of its VMs.
async fn analysed(
    settings: &ReportSettings,
    prometheus: std::result::Result<&PrometheusApi, &String>,
    run: &RunRecord,
    ctx: &ApiContext,
) -> Result<std::result::Result<Disruption, String>> {
    let e = &run.detail.execution;
    if run.detail.vms.is_empty() {
        return Ok(Err("the run created no VMs".into()));
    }
    let Some(window) = RunWindow::of(run) else {
        return Ok(Err("the run's start time is not readable".into()));
    };
    // The page's window is at least two query steps long; the analysis' ends now at the
    // latest (a moment not yet scraped would read as an interruption).
    let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
    let span = Span {
        from: window.start as f64,
        to: (window.end as f64).min(now),
    };
    let scope = Scope {
        namespace: Some(e.namespace.clone()),
        run_id: Some(e.run_id.clone()),
    };
    let listed = list_objects(&scope, ctx).await?;
    if listed.vms.is_empty() {
        let cleaned = run
            .detail
            .linked_cleanups
            .iter()
            .find(|c| c.command.starts_with("cleanup"))
            .map_or(String::new(), |c| {
                format!(" (cleanup {} ran at {})", c.run_id, c.started_at)
            });
        return Ok(Err(format!(
            "no VM of the run is left in namespace {}{cleaned}, so the cluster holds nothing to \
             read",
            e.namespace
        )));
    }
    let db = &settings.global.audit.path;
    let churn = read_churn(db, span)?;
    let request = Request {
        scope: &scope,
        span,
        span_from: "the run's window".into(),
        churn: &churn,
        audit_db: db,
        catalog_dir: &settings.catalog_dir,
        max_interruption: None,
        allow_restarts: AllowRestarts::default(),
    };
    let (vms, context) = analyse(&listed, &request, prometheus, ctx).await?;
    Ok(Ok(Disruption { vms, context }))
}
