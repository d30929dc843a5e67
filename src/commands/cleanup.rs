//! `virtwork cleanup`: find by label what virtwork created in scope (a namespace, every
//! namespace with `-A`, optionally one run) and delete it.
//!
//! Flow: connect → start the audit record → discover (lists only) → log the preview →
//! nothing to do / dry run / confirmation → delete (VMs, then the rest, then the namespace)
//! → audit → optional `--wait` → summary on stdout, logs on stderr. Deletion errors do not
//! stop the others; they are reported at the end and make the exit code 1.
//!
//! The confirmation prompt goes to stderr (stdout carries only the summary). Without a
//! terminal on stdin and without `--yes`, the answer is read from the pipe
//! (`echo yes | virtwork cleanup`), but an empty stdin (EOF before any answer) refuses
//! (exit 2) instead of counting as "no": nobody was there to answer. The prompt itself
//! (asking again on a terminal, `VIRTWORK_ASSUME_TTY=1`) is commands/prompt.rs, shared with
//! churn.

use std::io::IsTerminal;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::prompt::{Answer, Confirmation, ask_until_clear, confirmation, stdin_is_terminal};
use crate::audit::{
    Auditor, CleanupMode, CommandKind, Event, Execution, ExecutionParams, ExecutionStatus,
    ResourceKind,
};
use crate::config::CleanupSettings;
use crate::error::{Error, Result};
use crate::k8s::cleanup::{
    CleanupOutcome, DeleteFailure, Discovery, GoneTracker, WaitResult, discover, execute,
    wait_until_gone,
};
use crate::k8s::client::{Cluster, RateLimit};
use crate::k8s::namespace::TOOL_NAMESPACE;
use crate::k8s::retry::RetryPolicy;
use crate::k8s::scope::{ApiContext, Scope};
use crate::model::{LogFormat, ManagedKind, NamespaceOutcome, OutputFormat};
use crate::report::cleanup::{
    CleanupStatus, CleanupSummary, Found, WaitReport, preview_with_kept, summary_json, summary_text,
};

/// The prompt, written to stderr so stdout carries only the summary.
pub const PROMPT: &str = "Proceed with deletion? (yes/NO): ";
/// Deletions from which a cleanup on a terminal shows a live view, as `run` does.
const LIVE_VIEW_MIN_OBJECTS: usize = 20;

/// The live view of a large deletion or wait (`template`: indicatif's): drawn only on a
/// terminal with human-readable logs (log lines print above it); `None` otherwise.
fn live_view(
    objects: usize,
    log_format: LogFormat,
    template: &str,
) -> Option<indicatif::ProgressBar> {
    let live = objects >= LIVE_VIEW_MIN_OBJECTS
        && log_format == LogFormat::Text
        && std::io::stderr().is_terminal();
    live.then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(objects as u64),
            indicatif::ProgressDrawTarget::stderr(),
        );
        let style = indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        crate::logging::print_above(Some(bar.clone()));
        bar
    })
}

/// Writes the summary to stdout in the configured format.
fn print_summary(output: OutputFormat, summary: &CleanupSummary) -> Result<()> {
    let text = match output {
        OutputFormat::Json | OutputFormat::Yaml => {
            super::document_text(output, &summary_json(summary))?
        }
        OutputFormat::Text => summary_text(summary),
    };
    super::write_stdout(&text)
}

/// The error for a namespace `--delete-namespace` named but cleanup kept (exit 1: the user
/// asked for it to be gone, and scripts must not carry on as if it were).
fn kept_error(namespace: &str, reason: &str) -> Error {
    Error::runtime(format!(
        "kept namespace {namespace}: {reason}; everything else in scope was cleaned up"
    ))
}

/// Lists up to three items of a one-line error, then how many more.
fn first_few(items: &[String]) -> String {
    let mut text = items.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 3 {
        text.push_str(&format!("; and {} more", items.len() - 3));
    }
    text
}

fn log_preview(scope: &Scope, discovery: &Discovery) {
    let counts = discovery.counts();
    let run_ids = discovery.run_ids();
    tracing::info!(
        namespace = scope.namespace_display(),
        vms = counts.vms,
        vmis = counts.vmis,
        services = counts.services,
        secrets = counts.secrets,
        dvs = counts.dvs,
        pvcs = counts.pvcs,
        migrations = counts.migrations,
        total = counts.total(),
        run_id_filter = scope.run_id.as_deref(),
        run_ids = (!run_ids.is_empty()).then(|| run_ids.join(", ")),
        delete_namespace = discovery.deletes_namespace(),
        "resources to be deleted"
    );
}

/// Records the deletions in the audit database: linked runs, deleted names, counts, event.
fn audit_deletions(execution: &Execution, run_ids: &[String], outcome: &CleanupOutcome) {
    execution.link_cleanup_to_runs(run_ids);
    let namespaces: std::collections::BTreeSet<&str> = outcome
        .deleted
        .iter()
        .map(|o| o.namespace.as_str())
        .collect();
    for ns in namespaces {
        let names = |kind: ManagedKind| -> Vec<&str> {
            outcome
                .deleted
                .iter()
                .filter(|o| o.kind == kind && o.namespace == ns)
                .map(|o| o.name.as_str())
                .collect()
        };
        execution.mark_vms_deleted(ns, &names(ManagedKind::VirtualMachine), run_ids);
        for (kind, resource) in [
            (ManagedKind::Service, ResourceKind::Service),
            (ManagedKind::Secret, ResourceKind::Secret),
            (ManagedKind::DataVolume, ResourceKind::DataVolume),
            (
                ManagedKind::PersistentVolumeClaim,
                ResourceKind::PersistentVolumeClaim,
            ),
        ] {
            execution.mark_resources_deleted(resource, ns, &names(kind), run_ids);
        }
    }
    let deleted = outcome.deleted_counts();
    let namespace = outcome.namespace.as_ref().map(|(_, o)| o);
    execution.record_cleanup_counts(&deleted, namespace);
    execution.record_event(&Event::cleanup_completed(&deleted));
}

/// The audit record's parameters of a cleanup.
fn execution_params(settings: &CleanupSettings, scope: &Scope, context: &str) -> ExecutionParams {
    let dry_run = settings.dry_run;
    let command = if dry_run {
        CommandKind::CleanupDryRun
    } else {
        CommandKind::Cleanup
    };
    ExecutionParams {
        cluster_context: Some(context.to_string()),
        cleanup_mode: Some(match (dry_run, &scope.run_id) {
            (true, _) => CleanupMode::DryRun,
            (false, Some(_)) => CleanupMode::RunId,
            (false, None) => CleanupMode::All,
        }),
        wait_for_ready: settings.wait,
        ready_timeout_seconds: Some(settings.timeout.get()),
        ..ExecutionParams::creating_nothing(
            command,
            settings.global.namespace.to_string(),
            settings.global.cluster.kubeconfig_given.clone(),
            dry_run,
        )
    }
}

/// Runs `virtwork cleanup` with its resolved settings.
pub async fn cleanup(settings: &CleanupSettings) -> Result<()> {
    let auditor = Auditor::open(settings.global.audit.recording_path())?;
    let access = &settings.global.cluster;
    let cluster = super::connect(access).await?;
    let mut cleanup = Cleanup::start(settings, &auditor, &cluster);
    let discovery = cleanup.discover(&cluster).await?;
    if let Some(end) = cleanup.end_before_deleting(&discovery) {
        return end;
    }
    if !cleanup.confirmed(&discovery).await? {
        return cleanup.abort();
    }
    let outcome = cleanup.delete(&discovery).await;
    let remaining = cleanup.wait_for_deletions(&discovery, &outcome).await;
    cleanup.conclude(&outcome, &remaining)
}

/// One cleanup in progress: what its steps share.
struct Cleanup<'a> {
    settings: &'a CleanupSettings,
    scope: Scope,
    execution: Execution,
    ctx: ApiContext,
    cancel: CancellationToken,
    /// `--timeout`: it bounds the whole cleanup (lists, deletes and `--wait`), except the
    /// time a person takes to answer the prompt.
    timeout: Duration,
    started: Instant,
    summary: CleanupSummary,
}

impl<'a> Cleanup<'a> {
    /// Starts the audit record and the interrupt handler; the clock of `--timeout` starts.
    fn start(settings: &'a CleanupSettings, auditor: &Auditor, cluster: &Cluster) -> Self {
        let scope = Scope {
            namespace: (!settings.all_namespaces).then(|| settings.global.namespace.to_string()),
            // The text given until `discover` resolves it: a prefix alone matches nothing.
            run_id: settings.run_id.as_ref().map(|id| id.to_string()),
        };
        let run_id = uuid::Uuid::new_v4();
        let execution = auditor.start_execution(
            run_id,
            &execution_params(settings, &scope, &cluster.context),
        );
        let cancel = CancellationToken::new();
        cluster.gate.stop_when(&cancel);
        super::install_interrupt_handler(cancel.clone());
        let timeout = Duration::from_secs(settings.timeout.get().max(1));
        let started = Instant::now();
        let ctx = ApiContext {
            client: cluster.client.clone(),
            policy: RetryPolicy::until(started + timeout),
            cancel: cancel.clone(),
        };
        let mut summary = CleanupSummary::new(
            run_id.to_string(),
            scope.namespace.clone(),
            scope.run_id.clone(),
        );
        summary.dry_run = settings.dry_run;
        Cleanup {
            settings,
            scope,
            execution,
            ctx,
            cancel,
            timeout,
            started,
            summary,
        }
    }

    /// Lists everything in scope and decides about the namespace; logs and records what was
    /// found. A failure ends the audit record.
    async fn discover(&mut self, cluster: &Cluster) -> Result<Discovery> {
        // virtwork never deletes the namespace it runs in.
        let mut own_namespaces = vec![TOOL_NAMESPACE.to_string()];
        own_namespaces.extend(cluster.home_namespace.clone());
        let reached = crate::k8s::reach::reach(cluster, &self.ctx.policy, &self.cancel).await;
        let resolved = match reached {
            Ok(()) => self.resolve_run().await,
            Err(e) => Err(e),
        };
        let found = match resolved {
            Ok(()) => {
                discover(
                    &self.ctx,
                    &self.scope,
                    self.settings.delete_namespace,
                    &own_namespaces,
                )
                .await
            }
            Err(e) => Err(e),
        };
        match &found {
            Ok(discovery) => self.record_found(discovery),
            Err(_) => self.execution.finish(&found),
        }
        found
    }

    /// Narrows the scope to the run `--run-id` names (a prefix resolved among the runs on
    /// the cluster and in the audit database).
    async fn resolve_run(&mut self) -> Result<()> {
        let db = &self.settings.global.audit.path;
        let selector = self.settings.run_id.as_ref();
        let unscoped = Scope {
            run_id: None,
            ..self.scope.clone()
        };
        self.scope = super::run_ids::scope_on_cluster(&unscoped, selector, &self.ctx, db).await?;
        self.summary.run_id_filter = self.scope.run_id.clone();
        Ok(())
    }

    fn record_found(&mut self, discovery: &Discovery) {
        log_preview(&self.scope, discovery);
        if let Some((namespace, reason)) = discovery.kept_namespace() {
            tracing::warn!(namespace, reason, "namespace will be kept");
        }
        self.summary.found = Found::of(discovery);
        for failure in &discovery.unlisted {
            tracing::warn!(kind = %failure.kind.noun(), error = %failure.error, "kind not listed: its objects are not deleted");
        }
        self.summary.warnings = discovery.unlisted.iter().map(|f| f.error.clone()).collect();
        self.summary.failures = unlisted_failures(discovery);
        self.summary.namespace_outcome =
            discovery
                .kept_namespace()
                .map(|(_, reason)| NamespaceOutcome::Kept {
                    reason: reason.to_string(),
                });
        if discovery.to_delete.is_empty() {
            tracing::info!("nothing to clean up");
        }
    }

    /// The end of the command when nothing will be deleted: nothing found (a namespace asked
    /// for and refused is not a silent success), or a dry run.
    fn end_before_deleting(&mut self, discovery: &Discovery) -> Option<Result<()>> {
        let dry_run = self.settings.dry_run;
        if discovery.is_empty() && !dry_run {
            let end = match discovery.kept_namespace() {
                _ if !discovery.unlisted.is_empty() => (
                    CleanupStatus::CompletedWithErrors,
                    Err(unlisted_error(&unlisted_failures(discovery))),
                ),
                Some((namespace, reason)) => (
                    CleanupStatus::NamespaceKept,
                    Err(kept_error(namespace, reason)),
                ),
                None => (CleanupStatus::NothingToCleanUp, Ok(())),
            };
            return Some(self.end(end));
        }
        if discovery.is_empty()
            && discovery.kept_namespace().is_none()
            && discovery.unlisted.is_empty()
        {
            return Some(self.end((CleanupStatus::NothingToCleanUp, Ok(()))));
        }
        if dry_run {
            tracing::info!("dry-run mode — no resources were deleted");
            // A preview missing a kind is not the whole picture: say so with exit 1.
            let result = match discovery.unlisted.as_slice() {
                [] => Ok(()),
                _ => Err(unlisted_error(&unlisted_failures(discovery))),
            };
            return Some(self.end((CleanupStatus::DryRun, result)));
        }
        None
    }

    /// Asks before deleting unless `--yes` or `--run-id` make it unnecessary; `Ok(false)`
    /// when the answer is no. The time spent at the prompt is given back to `--timeout`.
    async fn confirmed(&mut self, discovery: &Discovery) -> Result<bool> {
        let stdin_tty = stdin_is_terminal();
        // Deleting the namespace reaches beyond the named run (other runs, foreign objects),
        // so `--run-id` alone does not skip the prompt then.
        let run_scoped = self.scope.run_id.is_some() && !discovery.deletes_namespace();
        let ask_mode = confirmation(self.settings.yes, run_scoped, stdin_tty);
        if ask_mode == Confirmation::NotNeeded {
            return Ok(true);
        }
        crate::terminal::to_stderr(&preview_with_kept(
            self.scope.namespace.as_deref(),
            self.scope.run_id.as_deref(),
            &self.summary.found,
            self.summary.namespace_kept(),
        ));
        let used = self.started.elapsed();
        let reply = ask_until_clear(PROMPT, ask_mode, &self.cancel).await;
        let answered = match reply {
            // On a terminal, Ctrl-D is a "no"; from a pipe, it means nobody answered.
            Ok(Answer::Nothing) if ask_mode == Confirmation::Ask => Ok(false),
            Ok(Answer::Nothing) => Err(nobody_answered(discovery)),
            Ok(answer) => Ok(answer == Answer::Yes),
            Err(err) => Err(err),
        };
        match answered {
            Ok(true) => {
                self.ctx.policy =
                    RetryPolicy::until(Instant::now() + self.timeout.saturating_sub(used));
            }
            Ok(false) => {}
            Err(_) => self.execution.finish(&answered),
        }
        answered
    }

    /// The user declined: nothing deleted, recorded as aborted. A requested deletion that
    /// did not happen is exit 1, so `echo n | virtwork cleanup && ...` does not go on as if
    /// the namespace were clean.
    fn abort(&mut self) -> Result<()> {
        tracing::info!("cleanup aborted by user");
        self.execution
            .complete_execution(ExecutionStatus::Aborted, None);
        self.summary.status = CleanupStatus::Aborted;
        print_summary(self.settings.global.output, &self.summary)?;
        Err(Error::runtime(
            "cleanup aborted at the prompt: nothing was deleted (answer y or yes, or pass --yes)",
        ))
    }

    /// What is left of `--timeout` (the prompt's time given back).
    fn time_left(&self) -> Duration {
        self.ctx
            .policy
            .attempt_deadline
            .saturating_duration_since(Instant::now())
    }

    /// Deletes what discovery found (VMs, then the rest, then the namespace) and records what
    /// happened in the audit database and the summary.
    async fn delete(&mut self, discovery: &Discovery) -> CleanupOutcome {
        if let Some(warning) = rate_bound_warning(
            discovery.to_delete.len() + usize::from(discovery.namespace.is_some()),
            self.settings.global.cluster.rate_limit,
            self.time_left(),
            self.timeout,
        ) {
            tracing::warn!("{warning}");
        }
        self.execution.record_event(&Event::cleanup_started(
            self.scope.namespace_display(),
            self.scope.run_id.as_deref(),
        ));
        let view = live_view(
            discovery.to_delete.len(),
            self.settings.global.log_format,
            "{spinner} [{elapsed_precise}] deleting {bar:30} {pos}/{len} objects {wide_msg}",
        );
        let progress = || {
            if let Some(bar) = &view {
                bar.inc(1);
            }
        };
        let outcome = execute(&self.ctx, discovery, &progress).await;
        if let Some(bar) = view {
            bar.finish_and_clear();
            crate::logging::print_above(None);
        }
        audit_deletions(&self.execution, &discovery.run_ids(), &outcome);
        let summary = &mut self.summary;
        summary.deleted = outcome.deleted_counts().into();
        summary.already_gone = outcome.already_gone_counts().into();
        summary.not_attempted = outcome.not_attempted.len();
        summary.namespace_outcome = outcome.namespace.as_ref().map(|(_, o)| o.clone());
        summary.warnings = discovery.unlisted.iter().map(|f| f.error.clone()).collect();
        summary.warnings.extend(outcome.failure_lines());
        summary.failures = unlisted_failures(discovery);
        summary.failures.extend(outcome.failures.iter().cloned());
        if let Some((namespace, reason)) = outcome.namespace_kept() {
            tracing::warn!(namespace, reason, "namespace kept");
        }
        outcome
    }

    /// With `--wait` (and no interrupt): waits until what was deleted is gone, within what is
    /// left of `--timeout`. Returns what was still present when the time ran out.
    async fn wait_for_deletions(
        &mut self,
        discovery: &Discovery,
        outcome: &CleanupOutcome,
    ) -> Vec<String> {
        if !self.settings.wait || outcome.interrupted {
            return Vec::new();
        }
        let mut tracker = gone_tracker(discovery, outcome, self.scope.namespace.as_deref());
        let view = live_view(
            discovery.to_delete.len(),
            self.settings.global.log_format,
            "{spinner} [{elapsed_precise}] waiting {wide_msg}",
        );
        let progress = |present: usize| {
            if let Some(bar) = &view {
                bar.set_message(format!("for {present} deleted objects to be gone"));
            }
        };
        let time_left = self.time_left();
        let result =
            wait_until_gone(&self.ctx, &self.scope, &mut tracker, time_left, &progress).await;
        if let Some(bar) = view {
            bar.finish_and_clear();
            crate::logging::print_above(None);
        }
        let (all_gone, remaining) = match &result {
            WaitResult::AllGone => (true, Vec::new()),
            WaitResult::TimedOut(left) | WaitResult::Interrupted(left) => (false, left.clone()),
        };
        self.summary.wait = Some(WaitReport {
            all_gone,
            remaining,
        });
        match result {
            WaitResult::TimedOut(left) => left,
            WaitResult::AllGone | WaitResult::Interrupted(_) => Vec::new(),
        }
    }

    /// Logs the result, decides the status and ends the command.
    fn conclude(&mut self, outcome: &CleanupOutcome, remaining: &[String]) -> Result<()> {
        log_completion(outcome, &self.summary.warnings);
        let interrupted = outcome.interrupted || self.cancel.is_cancelled();
        let mut end = final_status(interrupted, outcome, remaining, self.timeout);
        let unlisted: Vec<DeleteFailure> = self
            .summary
            .failures
            .iter()
            .filter(|f| f.name.is_empty())
            .cloned()
            .collect();
        if !unlisted.is_empty() && !interrupted {
            let mut message = unlisted_error(&unlisted).to_string();
            if let Err(other) = &end.1 {
                message = format!("{other}; {message}");
            }
            end = (
                CleanupStatus::CompletedWithErrors,
                Err(Error::runtime(message)),
            );
        }
        self.end(end)
    }

    /// Records the end in the audit database (its status read from the result), prints the
    /// summary and returns the result.
    fn end(&mut self, (status, result): (CleanupStatus, Result<()>)) -> Result<()> {
        self.summary.status = status;
        self.execution.finish(&result);
        print_summary(self.settings.global.output, &self.summary)?;
        result
    }
}

/// The warning, before the first delete, that the deletes cannot all be sent at `--qps` in
/// what is left of `--timeout`: said when it is known, not after the time ran out.
fn rate_bound_warning(
    deletes: usize,
    rate_limit: RateLimit,
    left: Duration,
    timeout: Duration,
) -> Option<String> {
    let needed = rate_limit.least_time_for(deletes);
    (needed > left).then(|| {
        format!(
            "{deletes} deletes at --qps {} take at least {}s but {}s of --timeout {}s are left: \
             what is not deleted in time stays for the next cleanup; raise --timeout (or --qps)",
            rate_limit.qps,
            needed.as_secs().max(1),
            left.as_secs(),
            timeout.as_secs()
        )
    })
}

/// The kinds discovery could not list, as entries of the summary's failures (`name` empty).
fn unlisted_failures(discovery: &Discovery) -> Vec<DeleteFailure> {
    discovery
        .unlisted
        .iter()
        .map(|u| DeleteFailure {
            kind: u.kind,
            namespace: u.namespace.clone(),
            name: String::new(),
            error: u.error.clone(),
        })
        .collect()
}

/// The error of a cleanup that could not list some kinds: everything else was deleted, these
/// kinds' objects (if any) were not.
fn unlisted_error(unlisted: &[DeleteFailure]) -> Error {
    let lines: Vec<String> = unlisted.iter().map(|f| f.error.clone()).collect();
    Error::runtime(format!(
        "cleanup could not list {} kind(s), whose objects were not deleted: {}",
        unlisted.len(),
        first_few(&lines)
    ))
}

/// The refusal when stdin is a pipe that gave no answer: nobody was there to confirm.
fn nobody_answered(discovery: &Discovery) -> Error {
    Error::input(format!(
        "cleanup would delete {} object(s){} but stdin is not a terminal and gave no \
         answer: pass --yes (-y) to delete without a prompt, pipe the answer \
         (`echo yes | virtwork cleanup`), or use --dry-run to preview",
        discovery.counts().total(),
        if discovery.deletes_namespace() {
            " and the namespace"
        } else {
            ""
        }
    ))
}

/// What `--wait` waits for: every deleted object, the VMIs garbage collection removes with
/// their deleted VMs, and the namespace when it was deleted.
fn gone_tracker(
    discovery: &Discovery,
    outcome: &CleanupOutcome,
    namespace: Option<&str>,
) -> GoneTracker {
    let deleted_vms: std::collections::BTreeSet<(&str, &str)> = outcome
        .deleted
        .iter()
        .chain(&outcome.already_gone)
        .filter(|o| o.kind == ManagedKind::VirtualMachine)
        .map(|o| (o.namespace.as_str(), o.name.as_str()))
        .collect();
    let dependents = discovery
        .owned_vmis
        .iter()
        .filter(|vmi| deleted_vms.contains(&(vmi.namespace.as_str(), vmi.name.as_str())));
    let namespace = outcome.namespace_deleted().then_some(namespace).flatten();
    GoneTracker::new(outcome.deleted.iter().chain(dependents), namespace)
}

/// The `cleanup complete` log line and one `cleanup warning` per failed delete.
fn log_completion(outcome: &CleanupOutcome, warnings: &[String]) {
    let deleted = outcome.deleted_counts();
    tracing::info!(
        dry_run = false,
        vms_deleted = deleted.vms,
        vmis_deleted = deleted.vmis,
        services_deleted = deleted.services,
        secrets_deleted = deleted.secrets,
        dvs_deleted = deleted.dvs,
        pvcs_deleted = deleted.pvcs,
        namespace_deleted = outcome.namespace_deleted(),
        "cleanup complete"
    );
    for warning in warnings {
        tracing::warn!(error = warning.as_str(), "cleanup warning");
    }
}

/// How a cleanup that deleted ended, first match wins: interrupted, failed deletes, the
/// namespace kept, `--wait` timed out, completed. The error (if any) is the command's.
fn final_status(
    interrupted: bool,
    outcome: &CleanupOutcome,
    remaining: &[String],
    timeout: Duration,
) -> (CleanupStatus, Result<()>) {
    if interrupted {
        return (CleanupStatus::Interrupted, Err(Error::Interrupted));
    }
    if outcome.has_failures() {
        let failures = outcome.failure_lines();
        let mut message = format!(
            "cleanup could not delete {} object(s): {}",
            failures.len(),
            first_few(&failures)
        );
        if let Some((namespace, reason)) = outcome.namespace_kept() {
            message.push_str(&format!("; kept namespace {namespace}: {reason}"));
        }
        return (
            CleanupStatus::CompletedWithErrors,
            Err(Error::runtime(message)),
        );
    }
    if let Some((namespace, reason)) = outcome.namespace_kept() {
        return (
            CleanupStatus::NamespaceKept,
            Err(kept_error(namespace, reason)),
        );
    }
    if !remaining.is_empty() {
        let message = format!(
            "timed out after {}s waiting for {} deleted object(s) to disappear: {}",
            timeout.as_secs(),
            remaining.len(),
            first_few(remaining)
        );
        return (CleanupStatus::WaitTimedOut, Err(Error::runtime(message)));
    }
    (CleanupStatus::Completed, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_status_puts_an_interrupt_before_failures_and_failures_before_the_kept_namespace() {
        let timeout = Duration::from_secs(5);
        let mut outcome = CleanupOutcome::default();
        let (status, result) = final_status(false, &outcome, &[], timeout);
        assert_eq!(status, CleanupStatus::Completed);
        assert!(result.is_ok());

        let (status, result) = final_status(false, &outcome, &["VM ns/a".into()], timeout);
        assert_eq!(status, CleanupStatus::WaitTimedOut);
        assert_eq!(
            result.unwrap_err().to_string(),
            "timed out after 5s waiting for 1 deleted object(s) to disappear: VM ns/a"
        );

        outcome.record_namespace(
            "ns",
            NamespaceOutcome::Kept {
                reason: "not ours".into(),
            },
        );
        let (status, result) = final_status(false, &outcome, &["VM ns/a".into()], timeout);
        assert_eq!(status, CleanupStatus::NamespaceKept);
        assert_eq!(
            result.unwrap_err().to_string(),
            "kept namespace ns: not ours; everything else in scope was cleaned up"
        );

        outcome.failures.push(crate::k8s::cleanup::DeleteFailure {
            kind: ManagedKind::Secret,
            namespace: "ns".into(),
            name: "s".into(),
            error: "forbidden".into(),
        });
        let (status, result) = final_status(false, &outcome, &[], timeout);
        assert_eq!(status, CleanupStatus::CompletedWithErrors);
        assert_eq!(
            result.unwrap_err().to_string(),
            "cleanup could not delete 1 object(s): deleting secret ns/s: forbidden; \
             kept namespace ns: not ours"
        );

        let (status, result) = final_status(true, &outcome, &[], timeout);
        assert_eq!(status, CleanupStatus::Interrupted);
        assert!(matches!(result, Err(Error::Interrupted)));
    }

    #[test]
    fn a_cleanup_that_cannot_finish_at_its_rate_is_warned_about_before_it_starts() {
        let rate = RateLimit {
            qps: 50.0,
            burst: 100,
        };
        let timeout = Duration::from_secs(600);
        // 40,000 deletes (10,000 VMs and their objects): 798 s at 50/s after the burst.
        let warning = rate_bound_warning(40_000, rate, Duration::from_secs(590), timeout)
            .expect("800 s of deletes cannot fit in 590 s");
        assert!(
            warning.starts_with(
                "40000 deletes at --qps 50 take at least 798s but 590s of --timeout 600s are left"
            ),
            "{warning}"
        );
        assert_eq!(
            rate_bound_warning(20_000, rate, Duration::from_secs(590), timeout),
            None,
            "398 s fit"
        );
        assert_eq!(
            rate_bound_warning(100, rate, Duration::ZERO, timeout),
            None,
            "the burst goes at once"
        );
    }

    #[test]
    fn long_error_lists_are_shortened() {
        let items: Vec<String> = (1..=5).map(|i| format!("e{i}")).collect();
        assert_eq!(first_few(&items), "e1; e2; e3; and 2 more");
        assert_eq!(first_few(&items[..2]), "e1; e2");
    }
}
