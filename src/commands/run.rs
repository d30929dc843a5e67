//! `virtwork run`: plan the fleet from the run settings, apply it to the cluster, wait and
//! report.
//!
//! [`run`] plans (pure, exits 2 on bad input before any cluster call), opens the audit
//! database, then either renders the plan (`--dry-run`, no cluster contacted) or takes the
//! real-run path ([`run_on_cluster`]): connect (rate-limited client), start the audit
//! record, preflight, apply (namespace, Services, Secrets + VMs), wait for readiness over one
//! watch, then print the summary (text or `--output json`) on stdout. `--dry-run=server` goes
//! the same way with `dryRun=All` and no wait. The first SIGINT/SIGTERM starts no new request
//! (those in flight get a short grace to answer), records the run as `cancelled`, prints what
//! exists and the cleanup command and exits 130; a second one exits 130 at once.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::{
    Auditor, CommandKind, Event, Execution, ExecutionParams, ResourceKind, VmRecord, WorkloadStatus,
};
use crate::config::RunSettings;
use crate::error::{Error, Outcome, Result};
use crate::k8s::apply::{Applied, ApplyEvent, ApplyOptions, apply_plan};
use crate::k8s::client::Cluster;
use crate::k8s::pacing::{PaceGate, Pacer};
use crate::k8s::preflight::{PreflightNeeds, preflight};
use crate::k8s::ready::{
    ReadinessObserver, ReadinessTracker, ReadinessWatch, Transition, VmReadiness, WaitOutcome,
    WatchStats, wait_for_ready_with,
};
use crate::k8s::retry::RetryPolicy;
use crate::model::{DryRunMode, KindCounts, LogFormat, OutputFormat, RunId};
use crate::plan::{ParamPrefixes, Plan, build_plan, check_param_prefixes};
use crate::report::{self, RunProgress, RunSummary, VmSummary};
use crate::workloads::Registry;

/// Runs `virtwork run` with its resolved settings.
pub async fn run(settings: &RunSettings) -> Result<()> {
    let input = &settings.plan;
    let registry = Registry::with_catalog(&input.catalog_dir, &input.from_catalog)?;
    let mut plan = build_plan(input, &registry, RunId::new_v4())?;
    for prefixes in &settings.param_prefixes {
        plan.warnings
            .extend(param_prefix_warnings(prefixes, &plan, &registry, input)?);
    }
    for skipped in &plan.skipped {
        tracing::info!(workload = %skipped, reason = "disabled in config", "workload skipped");
    }
    for warning in &plan.warnings {
        tracing::warn!(warning = %warning, "plan warning");
    }
    let auditor = Auditor::open(settings.global.audit.recording_path())?;
    match settings.dry_run {
        Some(DryRunMode::Client) => dry_run_client(settings, &plan, &auditor),
        Some(DryRunMode::Server) | None => run_on_cluster(settings, &plan, &auditor).await,
    }
}

/// Checks the `--params` prefixes (or a config file section's name) against the planned workloads, the built-ins and the
/// entries of the catalog directory (see [`check_param_prefixes`]).
fn param_prefix_warnings(
    prefixes: &ParamPrefixes,
    plan: &Plan,
    registry: &Registry,
    input: &crate::plan::PlanInput,
) -> Result<Vec<String>> {
    // A section that disables its workload is what made it skipped: nothing to say.
    if prefixes.section && prefixes.workloads.iter().all(|w| plan.skipped.contains(w)) {
        return Ok(Vec::new());
    }
    let planned: Vec<&str> = plan.workloads.iter().map(|w| w.name.as_str()).collect();
    let catalog = crate::workloads::catalog::entry_names(&input.catalog_dir);
    let mut known: Vec<&str> = registry.names();
    known.extend(catalog.iter().map(String::as_str));
    known.sort_unstable();
    known.dedup();
    check_param_prefixes(prefixes, &planned, &known)
}

/// The audit record's parameters of a run. Holds no credential: SSH access is only whether
/// it was configured.
pub fn execution_params(settings: &RunSettings, command: CommandKind) -> ExecutionParams {
    ExecutionParams {
        command,
        namespace: settings.global.namespace.to_string(),
        kubeconfig_path: settings.global.cluster.kubeconfig_given.clone(),
        cluster_context: None,
        container_disk_image: Some(settings.plan.container_disk_image.to_string()),
        default_cpu_cores: Some(settings.plan.cpu_cores),
        default_memory: Some(settings.plan.memory.to_string()),
        data_disk_size: Some(settings.plan.disk_size.to_string()),
        workloads: Vec::new(),
        total_vm_count: None,
        total_workload_count: None,
        dry_run: settings.dry_run.is_some(),
        ssh_auth_configured: settings.plan.ssh.auth_configured(),
        cleanup_mode: None,
        wait_for_ready: settings.wait_for_ready,
        ready_timeout_seconds: Some(settings.timeout.get()),
    }
}

/// The start of every run's audit record, dry runs included: started, each skipped workload,
/// the workloads, then `Planned N VMs across W workloads`.
fn record_plan(execution: &Execution, command: CommandKind, plan: &Plan) {
    let run_uuid = plan.run_id.as_uuid();
    execution.record_event(&Event::execution_started(command, run_uuid));
    for skipped in &plan.skipped {
        execution.record_event(&Event::workload_skipped(skipped));
    }
    execution.record_workloads(plan);
    execution.record_event(&Event::planned(
        plan.vms.len(),
        plan.workloads.len() + plan.skipped.len(),
    ));
}

/// `--dry-run`: print the plan (YAML stream, or the JSON plan document); no cluster call.
fn dry_run_client(settings: &RunSettings, plan: &Plan, auditor: &Auditor) -> Result<()> {
    let run_uuid = plan.run_id.as_uuid();
    let params = execution_params(settings, CommandKind::DryRun).with_plan(plan);
    let execution = auditor.start_execution(run_uuid, &params);
    record_plan(&execution, CommandKind::DryRun, plan);
    tracing::info!(total_vms = plan.vms.len(), "dry run mode");
    match settings.global.output {
        format @ (OutputFormat::Json | OutputFormat::Yaml) => {
            let doc = crate::render::plan_json(plan, "client")?;
            let text = serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::runtime(format!("rendering the plan as JSON: {e}")))?;
            super::write_stdout(&super::document_text(format, &text)?)?;
        }
        // Streamed: each document is built and written in turn, so memory stays flat in
        // the number of VMs.
        OutputFormat::Text => write_yaml_stdout(plan)?,
    }
    execution.finish(&Ok(()));
    // The summary is logged after a dry run too: the counts of what would be created.
    // Nothing was created: the counts are what a real run would create.
    tracing::info!(
        run_id = %plan.run_id,
        namespace = %plan.namespace,
        vms_planned = plan.vms.len(),
        services_planned = plan.services.len(),
        secrets_planned = plan.vms.len(),
        container_image = %settings.plan.container_disk_image,
        dry_run = true,
        "deployment summary"
    );
    Ok(())
}

/// The dry-run YAML stream on stdout, buffered; a closed pipe ends it quietly.
fn write_yaml_stdout(plan: &Plan) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let written = crate::render::write_dry_run_yaml(plan, &mut out)
        .and_then(|()| out.flush().map_err(crate::render::RenderError::Write));
    match written {
        Ok(()) => Ok(()),
        Err(crate::render::RenderError::Render(e)) => Err(e),
        Err(crate::render::RenderError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(())
        }
        Err(crate::render::RenderError::Write(e)) => Err(super::write_failed(e)),
    }
}

/// Applies `plan` to the cluster the settings name (a real run or `--dry-run=server`),
/// recording it through `auditor`, and prints the outcome on stdout.
pub async fn run_on_cluster(settings: &RunSettings, plan: &Plan, auditor: &Auditor) -> Result<()> {
    let server_dry_run = settings.dry_run == Some(DryRunMode::Server);
    let cancel = CancellationToken::new();
    super::install_interrupt_handler(cancel.clone());

    let cluster = &settings.global.cluster;
    let cluster = super::connect(cluster).await?;
    cluster.gate.stop_when(&cancel);
    let run_uuid = plan.run_id.as_uuid();
    let command = if server_dry_run {
        CommandKind::DryRun
    } else {
        CommandKind::Run
    };
    let mut params = execution_params(settings, command).with_plan(plan);
    params.cluster_context = Some(cluster.context.clone());
    let execution = auditor.start_execution(run_uuid, &params);
    record_plan(&execution, command, plan);

    let (summary, result) = drive(settings, plan, &cluster, &execution, &cancel).await;

    if !server_dry_run {
        // A run that ended well created every workload; any other end leaves them failed.
        let status = if result.is_ok() {
            WorkloadStatus::Created
        } else {
            WorkloadStatus::Failed
        };
        for workload in &plan.workloads {
            execution.set_workload_status(&workload.name, status);
        }
    }
    execution.finish(&result);

    tracing::info!(
        run_id = %summary.run_id,
        namespace = %summary.namespace,
        vms_created = summary.created.vms,
        services_created = summary.created.services,
        secrets_created = summary.created.secrets,
        container_image = %summary.container_image,
        dry_run = server_dry_run,
        status = summary.status.as_str(),
        "deployment summary"
    );
    print_summary(settings.global.output, &summary)?;
    result
}

/// Everything after the audit start; returns the summary in every case.
async fn drive(
    settings: &RunSettings,
    plan: &Plan,
    cluster: &Cluster,
    execution: &Execution,
    cancel: &CancellationToken,
) -> (RunSummary, Result<()>) {
    let server_dry_run = settings.dry_run == Some(DryRunMode::Server);
    let started = Instant::now();
    let run = Drive {
        settings,
        plan,
        cluster,
        execution,
        cancel,
        server_dry_run,
        wait: settings.wait_for_ready && !server_dry_run,
        started,
        deadline: started + Duration::from_secs(settings.timeout.get().max(1)),
    };
    let mut summary = empty_summary(settings, plan, server_dry_run);
    let result = run.steps(&mut summary).await;
    summary.status = Outcome::of(&result);
    summary.error = result.as_ref().err().map(|e| match e {
        Error::Interrupted => "interrupted by signal".to_string(),
        other => other.to_string(),
    });
    summary.api_requests = cluster.gate.requests_sent();
    (summary, result)
}

/// One run against the cluster (a real one or `--dry-run=server`): what its steps share.
#[derive(Clone, Copy)]
struct Drive<'a> {
    settings: &'a RunSettings,
    plan: &'a Plan,
    cluster: &'a Cluster,
    execution: &'a Execution,
    cancel: &'a CancellationToken,
    server_dry_run: bool,
    /// Whether readiness is waited for (never in a server dry run).
    wait: bool,
    started: Instant,
    /// `--timeout` bounds the whole run: readiness gets what creation left of it.
    deadline: Instant,
}

/// What creation and the readiness watch, run side by side, leave behind.
struct Fleet {
    applied: std::result::Result<Applied, (Error, Applied)>,
    /// When creation ended.
    created_at: Instant,
    /// When the API server accepted each VM, by plan index (the start of its time to ready).
    created_times: Vec<Option<jiff::Timestamp>>,
    /// `None` when readiness was not waited for or the namespace never came to exist.
    waited: Option<Waited>,
    tracker: ReadinessTracker,
    progress: RunProgress,
}

/// How the readiness watch ended.
struct Waited {
    outcome: WaitOutcome,
    stats: WatchStats,
    ended: Instant,
}

impl Drive<'_> {
    /// Preflight, creation alongside the readiness watch, then the readiness results into
    /// the summary and the audit record.
    async fn steps(&self, summary: &mut RunSummary) -> Result<()> {
        let (namespace_exists, nodes) = match self.preflight().await {
            Ok(found) => found,
            Err(e) => {
                summary.create_duration = self.started.elapsed();
                return Err(e);
            }
        };
        if self.server_dry_run && !namespace_exists {
            return Err(server_dry_run_needs_namespace(&self.plan.namespace));
        }
        // The eviction strategies `auto` gives depend on how many nodes can take VMs.
        let Some(nodes) = nodes else {
            return self.create_and_wait(summary).await;
        };
        let plan = self.plan.for_topology(nodes);
        if nodes == 1 {
            for warning in plan.single_node_warnings() {
                tracing::warn!(warning = %warning, "preflight warning");
            }
        }
        Drive {
            plan: &plan,
            ..*self
        }
        .create_and_wait(summary)
        .await
    }

    /// Creation alongside the readiness watch, then the readiness results into the summary
    /// and the audit record.
    async fn create_and_wait(&self, summary: &mut RunSummary) -> Result<()> {
        let mut fleet = self.create_and_watch().await;
        summary.create_duration = fleet.created_at.saturating_duration_since(self.started);
        for (vm, at) in summary.vms.iter_mut().zip(&fleet.created_times) {
            vm.created_at = *at;
        }
        let (applied, stopped) = match fleet.applied {
            Ok(applied) => (applied, None),
            Err((error, applied)) => (applied, Some(error)),
        };
        fill_created(summary, self.plan, &applied, self.server_dry_run);
        fleet.progress.finish();
        if let Some(error) = stopped
            && !self.stopped_by_wait(&error, fleet.waited.as_ref())
        {
            return Err(error);
        }
        let Some(waited) = fleet.waited else {
            return Ok(());
        };
        summary.wait_duration = Some(waited.ended.saturating_duration_since(fleet.created_at));
        summary.vms_ready = fleet.tracker.ready_count();
        tracing::debug!(
            reconnects = waited.stats.reconnects,
            "readiness watch finished"
        );
        self.record_readiness(summary, &fleet.tracker, &waited.outcome);
        self.wait_result(waited.outcome, &fleet.tracker)
    }

    /// Checks the cluster can take the plan, logging warnings and storage notes; returns
    /// whether the namespace exists already and how many nodes can take VMs (if known).
    async fn preflight(&self) -> Result<(bool, Option<usize>)> {
        let needs = PreflightNeeds::from_plan(self.plan, self.wait);
        let report = preflight(self.cluster, &needs, self.deadline, self.cancel).await?;
        for warning in report.warnings {
            tracing::warn!(warning = %warning, "preflight warning");
        }
        for note in report.storage {
            tracing::info!("preflight: {note}");
        }
        Ok((report.namespace_exists, report.schedulable_nodes))
    }

    /// Creates the plan's objects while one watch follows the VMs' readiness. The watch
    /// starts once the namespace exists, so every VM's phases are seen from its first one,
    /// and `--max-starting` admits a creation only when an earlier VM became ready.
    async fn create_and_watch(&self) -> Fleet {
        let plan = self.plan;
        let (ready_tx, ready_rx) = tokio::sync::watch::channel(0usize);
        let (namespace_tx, namespace_rx) = tokio::sync::watch::channel(false);
        let apply_cancel = self.cancel.child_token();
        let wait_cancel = self.cancel.child_token();
        let options = self.apply_options(ready_rx, &apply_cancel);
        let plan_index = plan_index(plan);
        let live =
            std::io::stderr().is_terminal() && self.settings.global.log_format == LogFormat::Text;
        let max_starting = self.settings.pacing.max_starting.map(|n| n.get());
        let progress = RunProgress::new(plan.vms.len(), live, max_starting);
        let mut created_times: Vec<Option<jiff::Timestamp>> = vec![None; plan.vms.len()];
        let image = self.settings.plan.container_disk_image.to_string();
        let mut on_event = |event: ApplyEvent| {
            match &event {
                ApplyEvent::NamespaceEnsured { .. } => {
                    namespace_tx.send_replace(true);
                }
                ApplyEvent::VmCreated { name, .. } => {
                    progress.vm_created(name);
                    if let Some(&i) = plan_index.get(name.as_str()) {
                        created_times[i] = Some(jiff::Timestamp::now());
                    }
                }
                _ => {}
            }
            record_apply_event(
                &event,
                plan,
                &plan_index,
                &plan.namespace,
                &image,
                self.execution,
            )
        };
        let mut tracker = ReadinessTracker::new(
            plan.vms.iter().map(|v| v.name.clone()),
            self.settings.ready_condition,
        )
        .with_fail_fast(self.settings.fail_fast.grace());
        let creating = self.create(&options, &mut on_event, &progress, &wait_cancel);
        let waiting = self.watch_readiness(
            &mut tracker,
            &progress,
            &ready_tx,
            namespace_rx,
            &wait_cancel,
            &apply_cancel,
        );
        let ((applied, created_at), waited) = tokio::join!(creating, waiting);
        Fleet {
            applied,
            created_at,
            created_times,
            waited,
            tracker,
            progress,
        }
    }

    /// How creation is sent: bounded concurrency, the retry deadline, and the pace gate when
    /// `--max-starting` or `--ramp` is given (never in a server dry run, where nothing starts).
    fn apply_options(
        &self,
        ready: tokio::sync::watch::Receiver<usize>,
        cancel: &CancellationToken,
    ) -> ApplyOptions {
        let pacer = Pacer::new(self.plan.vms.len(), self.settings.pacing);
        let pace = (pacer.is_paced() && !self.server_dry_run)
            .then(|| Arc::new(PaceGate::new(pacer, ready)));
        ApplyOptions {
            run_id: self.plan.run_id.to_string(),
            namespace: self.plan.namespace.clone(),
            policy: RetryPolicy::until(self.deadline),
            cancel: cancel.clone(),
            vm_concurrency: self.settings.vm_concurrency,
            server_dry_run: self.server_dry_run,
            pace,
        }
    }

    /// Applies the plan; when creation fails, nothing more will be created, so the watch
    /// stops too. Returns the result and when creation ended.
    async fn create(
        &self,
        options: &ApplyOptions,
        on_event: &mut (dyn FnMut(ApplyEvent) + Send),
        progress: &RunProgress,
        wait_cancel: &CancellationToken,
    ) -> (std::result::Result<Applied, (Error, Applied)>, Instant) {
        let plan = self.plan;
        tracing::info!(
            vm_count = plan.vms.len(),
            vm_concurrency = self.settings.vm_concurrency,
            pacing = report::pacing_line(&self.settings.pacing).unwrap_or_else(|| "none".into()),
            "creating VMs"
        );
        let applied = apply_plan(&self.cluster.client, plan, options, on_event).await;
        let created_at = Instant::now();
        progress.creation_finished(self.wait && applied.is_ok());
        if applied.is_err() {
            wait_cancel.cancel();
        } else if self.wait {
            let left = self.deadline.saturating_duration_since(created_at);
            tracing::info!(
                vm_count = plan.vms.len(),
                timeout = %report::human_duration(left),
                "waiting for VMs to become ready"
            );
        }
        (applied, created_at)
    }

    /// Watches the VMs' readiness from the moment the namespace exists until all are ready,
    /// one failed, the deadline passed or the watch died; in all but the first case creating
    /// more would not help, so creation is stopped.
    async fn watch_readiness(
        &self,
        tracker: &mut ReadinessTracker,
        progress: &RunProgress,
        ready: &tokio::sync::watch::Sender<usize>,
        mut namespace: tokio::sync::watch::Receiver<bool>,
        cancel: &CancellationToken,
        apply_cancel: &CancellationToken,
    ) -> Option<Waited> {
        if !self.wait || namespace.wait_for(|exists| *exists).await.is_err() {
            return None;
        }
        let mut observer = PacedObserver { progress, ready };
        let run_id = self.plan.run_id.to_string();
        let watch = ReadinessWatch::new(
            &self.plan.namespace,
            &run_id,
            self.plan.data_volume_count() > 0,
        );
        let (outcome, stats) = wait_for_ready_with(
            self.cluster.client.clone(),
            &watch,
            tracker,
            self.deadline.saturating_duration_since(Instant::now()),
            cancel,
            &mut observer,
        )
        .await;
        if outcome != WaitOutcome::AllReady {
            apply_cancel.cancel();
        }
        Some(Waited {
            outcome,
            stats,
            ended: Instant::now(),
        })
    }

    /// Whether creation stopped only because the wait ended first (a VM failed, the timeout,
    /// a dead watch): then the wait's outcome is the reason to report, not the interrupt.
    fn stopped_by_wait(&self, error: &Error, waited: Option<&Waited>) -> bool {
        matches!(error, Error::Interrupted)
            && !self.cancel.is_cancelled()
            && waited.is_some_and(|w| w.outcome != WaitOutcome::AllReady)
    }

    /// Each VM's phases and ready time into the summary and the audit record, with a
    /// `vm_ready` or `vm_timeout` event (none for VMs left pending by an interrupt).
    fn record_readiness(
        &self,
        summary: &mut RunSummary,
        tracker: &ReadinessTracker,
        outcome: &WaitOutcome,
    ) {
        let index = plan_index(self.plan);
        let execution = self.execution;
        for state in tracker.vms() {
            if let Some(vm) = index.get(state.name.as_str()).map(|&i| &mut summary.vms[i]) {
                vm.phase = Some(state.phase.clone());
                vm.status.clone_from(&state.status);
                vm.message.clone_from(&state.message);
                vm.scheduled_at = state.scheduled_at;
                vm.running_at = state.running_at;
                vm.ready_at = state.ready_at;
            }
            if state.scheduled_at.is_some() || state.running_at.is_some() {
                execution.update_vm_timeline(&state.name, state.scheduled_at, state.running_at);
            }
            match state.ready_at {
                Some(at) => {
                    execution.update_vm_ready(&state.name, &state.phase, at);
                    execution.record_event(&Event::vm_ready(&state.name));
                }
                None if *outcome == WaitOutcome::Cancelled => {
                    execution.update_vm_phase(&state.name, &state.phase);
                }
                None => {
                    execution.update_vm_failed(&state.name, Some(&state.phase));
                    let why = state
                        .failure
                        .clone()
                        .unwrap_or_else(|| self.why_not_ready(state, outcome));
                    execution.record_event(&Event::vm_timeout(&state.name, &why));
                }
            }
        }
    }

    /// Why a VM that neither became ready nor failed is not ready, for its audit event.
    fn why_not_ready(&self, state: &VmReadiness, outcome: &WaitOutcome) -> String {
        let unmet = self.settings.ready_condition.unmet_phrase();
        match outcome {
            WaitOutcome::TimedOut => format!(
                "not {unmet} after {}s ({})",
                self.settings.timeout,
                state.describe()
            ),
            WaitOutcome::Stuck { vm, grace, .. } if *vm == state.name => format!(
                "{} for {}, --fail-fast gave up",
                state.describe(),
                report::human_duration(*grace)
            ),
            _ => format!("not {unmet} when the wait ended ({})", state.describe()),
        }
    }

    /// The run's result from how the readiness watch ended.
    fn wait_result(&self, outcome: WaitOutcome, tracker: &ReadinessTracker) -> Result<()> {
        let settings = self.settings;
        match outcome {
            WaitOutcome::AllReady => {
                tracing::info!(vm_count = self.plan.vms.len(), "all VMs ready");
                Ok(())
            }
            WaitOutcome::Cancelled => Err(Error::Interrupted),
            WaitOutcome::Failed { vm, reason } => Err(Error::runtime(format!(
                "VM {}/{vm} failed: its VirtualMachineInstance reached phase Failed ({reason})",
                self.plan.namespace
            ))),
            WaitOutcome::WatchFailed(message) => Err(Error::runtime(message)),
            WaitOutcome::Stuck {
                vm, status, grace, ..
            } => Err(Error::runtime(format!(
                "--fail-fast: VM {}/{vm} has been {status} for {}, a state that needs someone \
                 to act; {}",
                self.plan.namespace,
                report::human_duration(grace),
                not_ready_list(tracker, settings)
            ))),
            WaitOutcome::TimedOut => Err(Error::runtime(format!(
                "readiness timeout after {}s: {}",
                settings.timeout,
                not_ready_list(tracker, settings)
            ))),
        }
    }
}

/// `2 of 3 VMs not running: a (ErrImagePull: <why>), b (Starting)`.
fn not_ready_list(tracker: &ReadinessTracker, settings: &RunSettings) -> String {
    let pending: Vec<String> = tracker
        .not_ready()
        .iter()
        .map(|v| format!("{} ({})", v.name, v.describe()))
        .collect();
    format!(
        "{} of {} VMs not {}: {}",
        pending.len(),
        tracker.total(),
        settings.ready_condition.unmet_phrase(),
        pending.join(", ")
    )
}

/// The refusal of `--dry-run=server` into a namespace that does not exist: the server
/// dry-runs namespaced objects only inside an existing namespace.
fn server_dry_run_needs_namespace(namespace: &str) -> Error {
    Error::runtime(format!(
        "--dry-run=server needs namespace {namespace} to exist (the API server validates \
         namespaced objects only in an existing namespace): create it first, or use \
         --dry-run to render the objects locally"
    ))
}

/// Plan index of each VM, by name.
fn plan_index(plan: &Plan) -> HashMap<&str, usize> {
    plan.vms
        .iter()
        .enumerate()
        .map(|(i, vm)| (vm.name.as_str(), i))
        .collect()
}

fn empty_summary(settings: &RunSettings, plan: &Plan, server_dry_run: bool) -> RunSummary {
    RunSummary {
        status: Outcome::Failed,
        run_id: plan.run_id.to_string(),
        namespace: plan.namespace.clone(),
        server_dry_run,
        container_image: settings.plan.container_disk_image.to_string(),
        ready_condition: settings.ready_condition.to_string(),
        planned: KindCounts {
            services: plan.services.len(),
            secrets: plan.vms.len(),
            vms: plan.vms.len(),
            dvs: plan.data_volume_count(),
            ..KindCounts::default()
        },
        created: KindCounts::default(),
        create_duration: Duration::ZERO,
        wait_duration: None,
        vms_ready: 0,
        vms: plan
            .vms
            .iter()
            .map(|vm| VmSummary {
                name: vm.name.clone(),
                workload: vm.workload.clone(),
                role: vm.role.clone(),
                created: false,
                phase: None,
                status: None,
                message: None,
                created_at: None,
                scheduled_at: None,
                running_at: None,
                ready_at: None,
            })
            .collect(),
        api_requests: 0,
        pacing: settings.pacing,
        error: None,
        audit_db: settings
            .global
            .audit
            .recording_path()
            .map(|path| path.display().to_string()),
    }
}

fn fill_created(summary: &mut RunSummary, plan: &Plan, applied: &Applied, server_dry_run: bool) {
    if server_dry_run {
        // Nothing persisted: "created" stays zero; the summary reports what was validated.
        return;
    }
    summary.created = KindCounts {
        services: applied.services.len(),
        secrets: applied.secrets.len(),
        vms: applied.vms.len(),
        dvs: plan
            .vms
            .iter()
            .filter(|vm| applied.vms.binary_search(&vm.name).is_ok())
            .map(|vm| vm.data_volumes.len())
            .sum(),
        ..KindCounts::default()
    };
    for vm in &mut summary.vms {
        vm.created = applied.vms.binary_search(&vm.name).is_ok();
    }
}

/// Feeds readiness to the live view and the ready count to `--max-starting`'s gate.
struct PacedObserver<'a> {
    progress: &'a RunProgress,
    ready: &'a tokio::sync::watch::Sender<usize>,
}

impl ReadinessObserver for PacedObserver<'_> {
    fn changed(&mut self, tracker: &ReadinessTracker, transitions: &[Transition]) {
        self.ready.send_replace(tracker.ready_count());
        self.progress.observe(tracker, transitions);
    }
}

/// Logs and audits one apply step.
fn record_apply_event(
    event: &ApplyEvent,
    plan: &Plan,
    plan_index: &HashMap<&str, usize>,
    namespace: &str,
    image: &str,
    execution: &Execution,
) {
    match event {
        ApplyEvent::NamespaceEnsured { namespace, created } => {
            tracing::info!(namespace = %namespace, created = *created, "namespace ensured");
        }
        ApplyEvent::ServiceCreated { name, workload } => {
            tracing::info!(service_name = %name, namespace = %namespace, "service created");
            execution.record_resource(ResourceKind::Service, name, namespace);
            execution.record_event(&Event::service_created(name, workload));
        }
        ApplyEvent::SecretCreated { name, .. } => {
            tracing::debug!(secret_name = %name, namespace = %namespace, "secret created");
            execution.record_resource(ResourceKind::Secret, name, namespace);
        }
        ApplyEvent::VmCreated { name, workload } => {
            tracing::debug!(vm_name = %name, namespace = %namespace, workload = %workload, "vm created");
            let planned_vm = plan_index.get(name.as_str()).map(|&i| &plan.vms[i]);
            let planned_workload = plan.workloads.iter().find(|w| &w.name == workload);
            if let (Some(vm), Some(w)) = (planned_vm, planned_workload) {
                execution.record_vm(&VmRecord::from_planned(vm, w, namespace, image));
            }
            execution.record_event(&Event::vm_created(name));
        }
        ApplyEvent::VmFailed { name, error } => {
            tracing::error!(vm_name = %name, error = %error, "vm creation failed");
            execution.record_event(&Event::vm_failed(name, error));
        }
    }
}

fn print_summary(output: OutputFormat, summary: &RunSummary) -> Result<()> {
    let text = match output {
        // Streamed: at 10,000 VMs the text is 8 MB.
        OutputFormat::Json => {
            return super::write_json_stdout(&report::run_summary_document(summary));
        }
        OutputFormat::Yaml => {
            let doc = serde_json::to_string_pretty(&report::run_summary_document(summary))
                .map_err(|e| Error::runtime(format!("rendering the run summary: {e}")))?;
            super::document_text(output, &doc)?
        }
        OutputFormat::Text => {
            // Nothing happened on the cluster: the error line on stderr says it all.
            let touched = summary.created.vms + summary.created.secrets + summary.created.services;
            if summary.status != Outcome::Success && touched == 0 {
                return Ok(());
            }
            report::run_summary_text(summary)
        }
    };
    super::write_stdout(&text)
}
