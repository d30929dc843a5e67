//! `virtwork churn`: lifecycle churn on a run's VMs for a while (see k8s/churn.rs for the
//! requests, crate::churn for the schedule).
//!
//! Glue: resolves the seed, finds the fleet, records the execution (kind `churn`) and its
//! events in the audit database, drives the schedule (or prints it with `--dry-run`) and
//! reports. The first Ctrl-C stops new actions only: the client's request gate stays open so
//! every VM churn stopped can be started again; a second one exits at once.
//!
//! Must not: decide which VM gets which action (the scheduler does) or send requests itself
//! (k8s/churn.rs does).

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::churn::{action_ended, churn_params, restored};
use crate::audit::{Auditor, CommandKind, Event, Execution, ExecutionStatus};
use crate::churn::{ChurnSpec, ChurnTally, Schedule};
use crate::config::ChurnSettings;
use crate::error::{Error, Result};
use crate::k8s::churn::{ChurnEvent, Fleet, SETTLE_TIMEOUT, drive, find_fleet};
use crate::k8s::client::{Cluster, connect_from_env};
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::ApiContext;
use crate::model::OutputFormat;
use crate::report::churn::{ChurnStatus, ChurnSummary, churn_json, schedule_text, summary_text};

/// Time allowed for listing the fleet.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `virtwork churn` with its resolved settings.
pub async fn churn(settings: &ChurnSettings) -> Result<()> {
    let auditor = Auditor::open(settings.global.audit.recording_path())?;
    let access = &settings.global.cluster;
    let cluster = connect_from_env(
        &access.kubeconfig,
        access.context.as_deref(),
        access.rate_limit,
    )
    .await?;
    let churn_id = uuid::Uuid::new_v4();
    let seed = settings.seed.unwrap_or_else(|| fastrand::u64(..));
    let execution = start_execution(settings, &auditor, &cluster, churn_id);
    let cancel = CancellationToken::new();
    super::install_interrupt_handler(cancel.clone());
    let ctx = api_context(&cluster, Instant::now() + LIST_TIMEOUT, cancel.clone());
    let fleet = match find_fleet(&ctx, &settings.scope).await {
        Ok(fleet) if fleet.running.is_empty() => Err(no_running_vms(settings, &fleet)),
        other => other,
    };
    let fleet = match fleet {
        Ok(fleet) => fleet,
        Err(error) => {
            let failed: Result<()> = Err(error);
            execution.finish(&failed);
            return failed;
        }
    };
    let spec = ChurnSpec {
        rate: settings.rate,
        duration: settings.duration,
        share: settings.share,
        actions: settings.actions.clone(),
        seed,
    };
    let schedule = Schedule::new(&fleet.running, &spec);
    let mut run_ids: Vec<&str> = schedule
        .selected
        .iter()
        .map(|i| fleet.running[*i].run_id.as_str())
        .collect();
    run_ids.sort_unstable();
    run_ids.dedup();
    execution.link_cleanup_to_runs(&run_ids);
    let tally = if settings.dry_run {
        ChurnTally::default()
    } else {
        churn_fleet(&cluster, &fleet, &schedule, &ctx, &execution, churn_id).await
    };
    let status = match () {
        () if settings.dry_run => ChurnStatus::DryRun,
        () if cancel.is_cancelled() => ChurnStatus::Interrupted,
        () if tally.has_failures() => ChurnStatus::CompletedWithErrors,
        () => ChurnStatus::Completed,
    };
    let summary = ChurnSummary {
        status,
        churn_id: churn_id.to_string(),
        namespace: settings.scope.namespace.as_deref(),
        run_id_filter: settings.scope.run_id.as_deref(),
        seed,
        rate: settings.rate,
        duration: settings.duration,
        share: settings.share,
        actions: &settings.actions,
        vms_found: fleet.total,
        vms: &fleet.running,
        schedule: &schedule,
        tally: &tally,
    };
    report(settings, &summary)?;
    conclude(&execution, status, &tally)
}

fn start_execution(
    settings: &ChurnSettings,
    auditor: &Auditor,
    cluster: &Cluster,
    churn_id: uuid::Uuid,
) -> Execution {
    let namespace = settings.scope.namespace.as_deref().unwrap_or("*");
    let kubeconfig = settings.global.cluster.kubeconfig_given.clone();
    let params = churn_params(namespace, kubeconfig, settings.dry_run);
    let execution = auditor.start_execution(churn_id, &params);
    execution.set_cluster_context(&cluster.context);
    let kind = if settings.dry_run {
        CommandKind::ChurnDryRun
    } else {
        CommandKind::Churn
    };
    execution.record_event(&Event::execution_started(kind, churn_id));
    execution
}

fn api_context(cluster: &Cluster, deadline: Instant, cancel: CancellationToken) -> ApiContext {
    ApiContext {
        client: cluster.client.clone(),
        policy: RetryPolicy::until(deadline),
        cancel,
    }
}

fn no_running_vms(settings: &ChurnSettings, fleet: &Fleet) -> Error {
    let run = settings
        .scope
        .run_id
        .as_deref()
        .map_or(String::new(), |id| format!(" of run {id}"));
    let place = settings
        .scope
        .namespace
        .as_deref()
        .map_or("any namespace".to_string(), |ns| format!("namespace {ns}"));
    Error::runtime(format!(
        "no running VMs{run} in {place} ({} VMs found): nothing to churn",
        fleet.total
    ))
}

/// Drives the schedule, recording each ended action and each restore as it happens.
async fn churn_fleet(
    cluster: &Cluster,
    fleet: &Fleet,
    schedule: &Schedule,
    list_ctx: &ApiContext,
    execution: &Execution,
    churn_id: uuid::Uuid,
) -> ChurnTally {
    let started = Instant::now();
    let duration = schedule
        .slots()
        .last()
        .map_or(Duration::ZERO, |slot| slot.at);
    let actions = api_context(
        cluster,
        started + duration + SETTLE_TIMEOUT + Duration::from_secs(30),
        list_ctx.cancel.clone(),
    );
    // Restores run after an interrupt: their own token, which nothing cancels (a second
    // Ctrl-C exits the process).
    let restore = api_context(
        cluster,
        started + duration + SETTLE_TIMEOUT * 2 + Duration::from_secs(60),
        CancellationToken::new(),
    );
    let churn_id = churn_id.to_string();
    drive(
        &actions,
        &restore,
        &fleet.running,
        schedule,
        &churn_id,
        |event| match event {
            ChurnEvent::Ended { vm, action, result } => {
                if let Some(row) = action_ended(vm, *action, result) {
                    execution.record_event(&row);
                }
            }
            ChurnEvent::Restored { vm, result } => {
                match result {
                    Ok(()) => tracing::info!(vm = %vm.display_name(), "started again"),
                    Err(error) => {
                        tracing::warn!(vm = %vm.display_name(), %error, "could not start again")
                    }
                }
                execution.record_event(&restored(vm, result));
            }
        },
    )
    .await
}

fn report(settings: &ChurnSettings, summary: &ChurnSummary<'_>) -> Result<()> {
    let text = match (settings.global.output, summary.status) {
        (OutputFormat::Json | OutputFormat::Yaml, _) => {
            super::document_text(settings.global.output, &churn_json(summary))?
        }
        (OutputFormat::Text, ChurnStatus::DryRun) => schedule_text(summary),
        (OutputFormat::Text, _) => summary_text(summary),
    };
    super::write_stdout(&text)
}

/// Closes the audit record and maps the status to the exit code (130 interrupted, 1 when
/// something failed).
fn conclude(execution: &Execution, status: ChurnStatus, tally: &ChurnTally) -> Result<()> {
    let failures = tally.failures.len() + tally.not_restored.len();
    let result = match status {
        ChurnStatus::Interrupted => Err(Error::Interrupted),
        ChurnStatus::CompletedWithErrors => Err(Error::runtime(format!(
            "churn finished with {failures} failures (see the summary)"
        ))),
        ChurnStatus::Completed | ChurnStatus::DryRun => Ok(()),
    };
    match &result {
        Err(Error::Interrupted) => execution.complete_execution(ExecutionStatus::Cancelled, None),
        other => execution.finish(other),
    }
    result
}
