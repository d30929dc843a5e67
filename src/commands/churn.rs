//! `virtwork churn`: lifecycle churn on a run's VMs for a while (see k8s/churn.rs for the
//! requests, crate::churn for the schedule).
//!
//! Glue: resolves the seed, reaches the server (nothing listening fails at once), finds the
//! fleet, records the execution (kind `churn`) and its events in the audit database, asks
//! for confirmation when no `--run-id` narrows it (unless `--yes`), checks the permissions
//! the chosen actions need, drives the schedule with a progress line (or streams it with
//! `--dry-run`) and reports. The first Ctrl-C stops new actions only: the client's request gate stays open so
//! every VM churn stopped can be started again; a second one exits at once.
//!
//! Must not: decide which VM gets which action (the scheduler does) or send requests itself
//! (k8s/churn.rs does).

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prompt::{Answer, Confirmation, ask_until_clear, confirmation, stdin_is_terminal};
use crate::audit::churn::{action_ended, churn_params, latency_event, restore_skipped, restored};
use crate::audit::{Auditor, CommandKind, Event, Execution, ExecutionStatus};
use crate::churn::{ChurnSpec, ChurnTally, ChurnVm, Schedule};
use crate::config::ChurnSettings;
use crate::error::{Error, Result};
use crate::k8s::churn::{
    ChurnEvent, DriveOptions, Fleet, MIGRATION_PENDING_LIMIT, SETTLE_TIMEOUT, check_permissions,
    drive, find_fleet,
};
use crate::k8s::client::Cluster;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::ApiContext;
use crate::model::{ChurnAction, LogFormat, OutputFormat};
use crate::report::churn::{
    ChurnStatus, ChurnSummary, churn_json, dry_run_head_json, progress_line, summary_text,
    write_dry_run_json, write_dry_run_yaml, write_schedule_text,
};

/// Time allowed for listing the fleet.
const LIST_TIMEOUT: Duration = Duration::from_secs(120);

/// The confirmation prompt without `--run-id`, on stderr.
const PROMPT: &str = "Proceed with churn? (yes/NO): ";
/// How often the progress goes to the log when stderr is no terminal.
const PROGRESS_LOG_EVERY: Duration = Duration::from_secs(5);

/// Runs `virtwork churn` with its resolved settings.
pub async fn churn(settings: &ChurnSettings) -> Result<()> {
    let auditor = Auditor::open(settings.global.audit.recording_path())?;
    let access = &settings.global.cluster;
    let cluster = super::connect(access).await?;
    let churn_id = uuid::Uuid::new_v4();
    let seed = settings.seed.unwrap_or_else(|| fastrand::u64(..));
    let execution = start_execution(settings, &auditor, &cluster, churn_id);
    let cancel = CancellationToken::new();
    super::install_interrupt_handler(cancel.clone());
    let ctx = api_context(&cluster, Instant::now() + LIST_TIMEOUT, cancel.clone());
    let (resolved, fleet) = match reach_and_list(settings, &cluster, &ctx).await {
        Ok(found) => found,
        Err(error) => return fail(&execution, error),
    };
    let settings = &resolved;
    let spec = ChurnSpec {
        rate: settings.rate,
        duration: settings.duration,
        share: settings.share,
        actions: settings.actions.clone(),
        seed,
    };
    let schedule = Schedule::new(&fleet.running, &spec);
    let selected: Vec<&ChurnVm> = schedule
        .selected
        .iter()
        .map(|i| &fleet.running[*i])
        .collect();
    let mut run_ids: Vec<&str> = selected.iter().map(|vm| vm.run_id.as_str()).collect();
    run_ids.sort_unstable();
    run_ids.dedup();
    execution.link_cleanup_to_runs(&run_ids);
    let mut summary = ChurnSummary {
        status: ChurnStatus::DryRun,
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
        tally: &ChurnTally::default(),
    };
    if settings.dry_run {
        write_dry_run(settings, &summary)?;
        return conclude(&execution, ChurnStatus::DryRun, &ChurnTally::default());
    }
    if let Err(error) = cleared(settings, &ctx, &selected, &run_ids).await {
        return fail(&execution, error);
    }
    let tally = churn_fleet(
        settings, &cluster, &fleet, &schedule, &ctx, &execution, churn_id,
    )
    .await;
    let status = match () {
        () if cancel.is_cancelled() => ChurnStatus::Interrupted,
        () if tally.has_failures() => ChurnStatus::CompletedWithErrors,
        () => ChurnStatus::Completed,
    };
    summary.status = status;
    summary.tally = &tally;
    report(settings, &summary)?;
    conclude(&execution, status, &tally)
}

/// Reaches the server (like run, status and cleanup, nothing listening fails at once),
/// resolves `--run-id` (a prefix among the runs on the cluster and in the audit database)
/// and lists the fleet; no running VM in scope is an error.
async fn reach_and_list(
    settings: &ChurnSettings,
    cluster: &Cluster,
    ctx: &ApiContext,
) -> Result<(ChurnSettings, Fleet)> {
    crate::k8s::reach::reach(cluster, &ctx.policy, &ctx.cancel).await?;
    let unscoped = crate::k8s::scope::Scope {
        run_id: None,
        ..settings.scope.clone()
    };
    let db = &settings.global.audit.path;
    let scope =
        super::run_ids::scope_on_cluster(&unscoped, settings.run_id.as_ref(), ctx, db).await?;
    let settings = ChurnSettings {
        scope,
        ..settings.clone()
    };
    match find_fleet(ctx, &settings.scope).await {
        Ok(fleet) if fleet.running.is_empty() => Err(no_running_vms(&settings, &fleet)),
        Ok(fleet) => Ok((settings, fleet)),
        Err(error) => Err(error),
    }
}

/// Everything that must hold before the first action: the user's confirmation when no
/// `--run-id` narrows churn, and the permissions the chosen actions need where they act.
async fn cleared(
    settings: &ChurnSettings,
    ctx: &ApiContext,
    selected: &[&ChurnVm],
    run_ids: &[&str],
) -> Result<()> {
    confirm(settings, selected, run_ids, &ctx.cancel).await?;
    let namespaces: BTreeSet<String> = selected.iter().map(|vm| vm.namespace.clone()).collect();
    let kinds: Vec<ChurnAction> = settings
        .actions
        .weighted()
        .iter()
        .map(|(a, _)| *a)
        .collect();
    check_permissions(ctx, &kinds, &namespaces).await
}

/// Ends the audit record with `error` and returns it.
fn fail(execution: &Execution, error: Error) -> Result<()> {
    let failed: Result<()> = Err(error);
    execution.finish(&failed);
    failed
}

/// Without `--run-id` churn acts on every run in scope: it asks first, unless `--yes`. A
/// pipe that gives no answer refuses (exit 2), as cleanup does.
async fn confirm(
    settings: &ChurnSettings,
    selected: &[&ChurnVm],
    run_ids: &[&str],
    cancel: &CancellationToken,
) -> Result<()> {
    let stdin_tty = stdin_is_terminal();
    let mode = confirmation(settings.yes, settings.scope.run_id.is_some(), stdin_tty);
    if mode == Confirmation::NotNeeded {
        return Ok(());
    }
    let place = settings
        .scope
        .namespace
        .as_deref()
        .map_or("every namespace".to_string(), |ns| {
            format!("namespace {ns}")
        });
    let what = format!(
        "churn would act on {} VM(s) of {} run(s) in {place} (no --run-id given): {}",
        selected.len(),
        run_ids.len(),
        run_ids.join(", ")
    );
    crate::terminal::to_stderr(&format!(
        "{}\n",
        crate::terminal::safe(&what, crate::terminal::LINE_CHARS)
    ));
    match ask_until_clear(PROMPT, mode, cancel).await? {
        Answer::Yes => Ok(()),
        Answer::Nothing if mode == Confirmation::Piped => Err(Error::input(
            "churn without --run-id acts on every run in scope, but stdin is not a terminal \
             and gave no answer: pass --run-id <uuid> to churn one run, --yes (-y) to churn \
             them all without a prompt, or --dry-run to preview; nothing was touched",
        )),
        Answer::No | Answer::Unclear | Answer::Nothing => {
            Err(Error::runtime("churn not confirmed; nothing was touched"))
        }
    }
}

/// A dry run's schedule, streamed to stdout (a million slots never sit in memory).
fn write_dry_run(settings: &ChurnSettings, summary: &ChurnSummary<'_>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let written = match settings.global.output {
        OutputFormat::Text => write_schedule_text(summary, &mut out),
        OutputFormat::Json => write_dry_run_json(summary, &mut out),
        OutputFormat::Yaml => {
            let head = super::document_text(OutputFormat::Yaml, &dry_run_head_json(summary))?;
            write_dry_run_yaml(summary, &head, &mut out)
        }
    }
    .and_then(|()| out.flush());
    match written {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(super::write_failed),
    }
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

/// Where churn's progress goes: a live line on a terminal, else a log line every
/// [`PROGRESS_LOG_EVERY`].
struct Shown {
    live: bool,
    last_logged: Option<Instant>,
}

impl Shown {
    /// Shows `event` and records it in the audit database.
    fn event(&mut self, event: &ChurnEvent, execution: &Execution) {
        match event {
            ChurnEvent::Progress(progress) => {
                let line =
                    crate::terminal::safe(&progress_line(progress), crate::terminal::LINE_CHARS);
                if self.live {
                    let mut stderr = std::io::stderr().lock();
                    let _ = write!(stderr, "\r\x1b[2K{line}");
                    let _ = stderr.flush();
                } else if self
                    .last_logged
                    .is_none_or(|at| at.elapsed() >= PROGRESS_LOG_EVERY)
                {
                    self.last_logged = Some(Instant::now());
                    tracing::info!("{line}");
                }
            }
            ChurnEvent::Ended { vm, action, result } => {
                if let Some(row) = action_ended(vm, *action, result) {
                    execution.record_event(&row);
                }
            }
            ChurnEvent::Stopping { reason } => {
                tracing::warn!("stopping churn: {reason}; starting again every VM it stopped");
            }
            ChurnEvent::RestoreSkipped { vm, why } => {
                tracing::warn!(vm = %vm.display_name(), "not started again: {why}");
                execution.record_event(&restore_skipped(vm, why));
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
        }
    }
}

/// Drives the schedule, recording each ended action and each restore as it happens, and
/// showing progress: a live line on a terminal, an INFO line every [`PROGRESS_LOG_EVERY`]
/// otherwise.
async fn churn_fleet(
    settings: &ChurnSettings,
    cluster: &Cluster,
    fleet: &Fleet,
    schedule: &Schedule,
    list_ctx: &ApiContext,
    execution: &Execution,
    churn_id: uuid::Uuid,
) -> ChurnTally {
    let started = Instant::now();
    let duration = schedule.last_at();
    // Retries of a single request never outlast the churn plus its longest wait; each action
    // bounds its own wait (see k8s/churn.rs).
    let longest = SETTLE_TIMEOUT.max(MIGRATION_PENDING_LIMIT + Duration::from_secs(3600));
    let actions = api_context(
        cluster,
        started + duration + longest,
        list_ctx.cancel.clone(),
    );
    // Restores run after an interrupt: their own token, which nothing cancels (a second
    // Ctrl-C exits the process).
    let restore = api_context(
        cluster,
        started + duration + longest + SETTLE_TIMEOUT * 2,
        CancellationToken::new(),
    );
    let churn_id = churn_id.to_string();
    let live = std::io::stderr().is_terminal() && settings.global.log_format == LogFormat::Text;
    let mut shown = Shown {
        live,
        last_logged: None,
    };
    let options = DriveOptions {
        churn_id: &churn_id,
        max_failure_streak: settings.max_failures,
    };
    let tally = drive(
        &actions,
        &restore,
        &fleet.running,
        schedule,
        &options,
        |event| shown.event(event, execution),
    )
    .await;
    if live {
        crate::terminal::to_stderr("\r\x1b[2K");
    }
    execution.record_event(&latency_event(&tally.latencies));
    tally
}

fn report(settings: &ChurnSettings, summary: &ChurnSummary<'_>) -> Result<()> {
    let text = match settings.global.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            super::document_text(settings.global.output, &churn_json(summary))?
        }
        OutputFormat::Text => summary_text(summary),
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
