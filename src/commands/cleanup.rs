//! `virtwork cleanup`: find everything virtwork created by label and delete it.
//!
//! Flow: connect → start the audit record → discover (lists only) → log the preview →
//! nothing to do / dry run / confirmation → delete (VMs, then the rest, then the namespace)
//! → audit → optional `--wait` → summary on stdout, logs on stderr. Deletion errors do not
//! stop the others; they are reported at the end and make the exit code 1.
//!
//! The confirmation prompt goes to stderr (stdout carries only the summary). Without a
//! terminal on stdin and without `--yes`, the answer is read from the pipe
//! (`echo yes | virtwork cleanup`), but an empty stdin (EOF before any answer) refuses
//! (exit 2) instead of counting as "no": nobody was there to answer. Testing hook:
//! `VIRTWORK_ASSUME_TTY=1` makes stdin count as a terminal.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::recorder::{
    Auditor, CleanupMode, CommandKind, Event, ExecutionParams, ExecutionStatus, ResourceKind,
};
use crate::config::CleanupSettings;
use crate::error::{Error, Result};
use crate::k8s::cleanup::{
    ApiContext, CleanupOutcome, Discovery, GoneTracker, ManagedKind, NamespaceOutcome, Scope,
    WaitResult, discover, execute, wait_until_gone,
};
use crate::k8s::client::connect_from_env;
use crate::k8s::namespace::TOOL_NAMESPACE;
use crate::k8s::retry::RetryPolicy;
use crate::model::OutputFormat;
use crate::report::cleanup::{
    CleanupStatus, CleanupSummary, Found, WaitReport, preview_with_kept, summary_json, summary_text,
};

/// The prompt, as in the reference (written to stderr here).
pub const PROMPT: &str = "Proceed with deletion? (yes/NO): ";
/// Environment variable that makes stdin count as a terminal (testing hook).
pub const ASSUME_TTY_ENV: &str = "VIRTWORK_ASSUME_TTY";

/// Whether the user must confirm before anything is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    /// `--yes` or `--run-id` was given: delete without asking.
    NotNeeded,
    /// Ask on the terminal.
    Ask,
    /// Read the answer from stdin, which is not a terminal (a pipe or a file); EOF before
    /// any answer refuses.
    Piped,
}

/// What was read at the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Yes,
    /// Any other line (an empty one included).
    No,
    /// End of input before any answer.
    Nothing,
}

/// Decides whether to prompt. `--run-id` skips the prompt, as in the reference: naming one
/// run is already a deliberate choice (`run_scoped` is false when the namespace would be
/// deleted too).
pub fn confirmation(yes: bool, run_scoped: bool, stdin_is_terminal: bool) -> Confirmation {
    if yes || run_scoped {
        Confirmation::NotNeeded
    } else if stdin_is_terminal {
        Confirmation::Ask
    } else {
        Confirmation::Piped
    }
}

/// Whether stdin counts as a terminal (`VIRTWORK_ASSUME_TTY=1` is the testing hook).
pub fn stdin_counts_as_terminal(is_terminal: bool, assume_tty: Option<&str>) -> bool {
    is_terminal || assume_tty.is_some_and(|v| v.trim() == "1")
}

/// Only `yes` (trimmed, any case) confirms; anything else, an empty line and EOF (`None`)
/// decline.
pub fn answer_confirms(line: Option<&str>) -> bool {
    line.is_some_and(|l| l.trim().eq_ignore_ascii_case("yes"))
}

/// The answer in one read line (`None`: EOF before any byte).
pub fn answer(line: Option<&str>) -> Answer {
    match line {
        None => Answer::Nothing,
        Some(_) if answer_confirms(line) => Answer::Yes,
        Some(_) => Answer::No,
    }
}

/// Prints the prompt on stderr and reads one line from stdin. The read runs on its own
/// thread so Ctrl-C at the prompt interrupts at once (and an unanswered read cannot keep
/// the process alive).
async fn ask(cancel: &CancellationToken) -> Result<Answer> {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(PROMPT.as_bytes());
    let _ = stderr.flush();
    drop(stderr);
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = match std::io::stdin().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line)),
            Err(e) => Err(e),
        };
        let _ = tx.send(read);
    });
    tokio::select! {
        () = cancel.cancelled() => Err(Error::Interrupted),
        read = rx => match read {
            Ok(Ok(line)) => Ok(answer(line.as_deref())),
            Ok(Err(e)) => Err(Error::Io { context: "reading the confirmation from", path: "stdin".into(), source: e }),
            Err(_) => Ok(Answer::Nothing),
        },
    }
}

/// Writes the summary to stdout in the configured format.
fn print_summary(output: OutputFormat, summary: &CleanupSummary) -> Result<()> {
    let text = match output {
        OutputFormat::Json => format!("{}\n", summary_json(summary)),
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
        total = counts.total(),
        run_id_filter = scope.run_id.as_deref(),
        run_ids = (!run_ids.is_empty()).then(|| run_ids.join(", ")),
        delete_namespace = discovery.deletes_namespace(),
        "resources to be deleted"
    );
}

/// Records the deletions in the audit database: linked runs, deleted names, counts, event.
fn audit_deletions(
    execution: &crate::audit::recorder::Execution,
    run_ids: &[String],
    outcome: &CleanupOutcome,
) {
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
    ExecutionParams {
        command: if dry_run {
            CommandKind::CleanupDryRun
        } else {
            CommandKind::Cleanup
        },
        namespace: settings.global.namespace.to_string(),
        kubeconfig_path: settings.global.cluster.kubeconfig_given.clone(),
        cluster_context: Some(context.to_string()),
        // What a run creates; a cleanup creates nothing.
        container_disk_image: None,
        default_cpu_cores: None,
        default_memory: None,
        data_disk_size: None,
        workloads: Vec::new(),
        total_vm_count: None,
        total_workload_count: None,
        dry_run,
        ssh_auth_configured: false,
        cleanup_mode: Some(match (dry_run, &scope.run_id) {
            (true, _) => CleanupMode::DryRun,
            (false, Some(_)) => CleanupMode::RunId,
            (false, None) => CleanupMode::All,
        }),
        wait_for_ready: settings.wait,
        ready_timeout_seconds: Some(settings.timeout.get()),
    }
}

/// Runs `virtwork cleanup` with its resolved settings.
pub async fn cleanup(settings: &CleanupSettings) -> Result<()> {
    let scope = Scope {
        namespace: (!settings.all_namespaces).then(|| settings.global.namespace.to_string()),
        run_id: settings.run_id.map(|id| id.to_string()),
    };
    let dry_run = settings.dry_run;
    let output = settings.global.output;
    let auditor = Auditor::open(settings.global.audit.recording_path())?;
    let access = &settings.global.cluster;
    let cluster = connect_from_env(&access.kubeconfig, access.rate_limit).await?;

    let run_id = uuid::Uuid::new_v4();
    let execution = auditor.start_execution(
        run_id,
        &execution_params(settings, &scope, &cluster.context),
    );

    let cancel = CancellationToken::new();
    cluster.gate.stop_when(&cancel);
    super::install_interrupt_handler(cancel.clone());
    // --timeout bounds the whole cleanup (lists, deletes and --wait), except the time a person
    // takes to answer the prompt.
    let timeout = Duration::from_secs(settings.timeout.get().max(1));
    let started = Instant::now();
    let mut ctx = ApiContext {
        client: cluster.client.clone(),
        policy: RetryPolicy::until(started + timeout),
        cancel: cancel.clone(),
    };
    let mut summary = CleanupSummary::new(
        run_id.to_string(),
        scope.namespace.clone(),
        scope.run_id.clone(),
    );
    summary.dry_run = dry_run;

    // virtwork never deletes the namespace it runs in.
    let mut own_namespaces = vec![TOOL_NAMESPACE.to_string()];
    own_namespaces.extend(cluster.home_namespace.clone());
    let discovery = match discover(&ctx, &scope, settings.delete_namespace, &own_namespaces).await {
        Ok(d) => d,
        Err(err) => {
            let status = if matches!(err, Error::Interrupted) {
                ExecutionStatus::Cancelled
            } else {
                ExecutionStatus::Failed
            };
            execution.complete_execution(status, Some(&err.to_string()));
            return Err(err);
        }
    };
    log_preview(&scope, &discovery);
    if let Some((namespace, reason)) = discovery.kept_namespace() {
        tracing::warn!(namespace, reason, "namespace will be kept");
    }
    summary.found = Found::of(&discovery);
    summary.namespace_outcome =
        discovery
            .kept_namespace()
            .map(|(_, reason)| NamespaceOutcome::Kept {
                reason: reason.to_string(),
            });
    let run_ids = discovery.run_ids();

    if discovery.to_delete.is_empty() {
        tracing::info!("nothing to clean up");
    }
    if discovery.is_empty() && !dry_run {
        if let Some((namespace, reason)) = discovery.kept_namespace() {
            // Asked to delete the namespace and refused: not a silent success.
            let err = kept_error(namespace, reason);
            execution.complete_execution(ExecutionStatus::Failed, Some(&err.to_string()));
            summary.status = CleanupStatus::NamespaceKept;
            print_summary(output, &summary)?;
            return Err(err);
        }
        execution.complete_execution(ExecutionStatus::Success, None);
        summary.status = CleanupStatus::NothingToCleanUp;
        return print_summary(output, &summary);
    }
    if discovery.is_empty() && discovery.kept_namespace().is_none() {
        execution.complete_execution(ExecutionStatus::Success, None);
        summary.status = CleanupStatus::NothingToCleanUp;
        return print_summary(output, &summary);
    }
    if dry_run {
        tracing::info!("dry-run mode — no resources were deleted");
        execution.complete_execution(ExecutionStatus::Success, None);
        summary.status = CleanupStatus::DryRun;
        return print_summary(output, &summary);
    }

    let stdin_tty = stdin_counts_as_terminal(
        std::io::stdin().is_terminal(),
        std::env::var(ASSUME_TTY_ENV).ok().as_deref(),
    );
    // Deleting the namespace reaches beyond the named run (other runs, foreign objects), so
    // `--run-id` alone does not skip the prompt then.
    let run_scoped = scope.run_id.is_some() && !discovery.deletes_namespace();
    let ask_mode = confirmation(settings.yes, run_scoped, stdin_tty);
    if ask_mode != Confirmation::NotNeeded {
        eprint!(
            "{}",
            preview_with_kept(
                scope.namespace.as_deref(),
                scope.run_id.as_deref(),
                &summary.found,
                summary.namespace_kept(),
            )
        );
        let used = started.elapsed();
        let answered = match ask(&cancel).await {
            // On a terminal, Ctrl-D is a "no"; from a pipe, it means nobody answered.
            Ok(Answer::Nothing) if ask_mode == Confirmation::Ask => Ok(Answer::No),
            Ok(Answer::Nothing) => Err(Error::input(format!(
                "cleanup would delete {} object(s){} but stdin is not a terminal and gave no \
                 answer: pass --yes (-y) to delete without a prompt, pipe the answer \
                 (`echo yes | virtwork cleanup`), or use --dry-run to preview",
                discovery.counts().total(),
                if discovery.deletes_namespace() {
                    " and the namespace"
                } else {
                    ""
                }
            ))),
            other => other,
        };
        match answered {
            Ok(Answer::Yes) => {
                if ask_mode == Confirmation::Piped {
                    // A piped answer is not echoed: end the prompt's line.
                    eprintln!();
                }
                ctx.policy = RetryPolicy::until(Instant::now() + timeout.saturating_sub(used));
            }
            Ok(_) => {
                tracing::info!("cleanup aborted by user");
                execution.complete_execution(ExecutionStatus::Aborted, None);
                summary.status = CleanupStatus::Aborted;
                return print_summary(output, &summary);
            }
            Err(err) => {
                let status = if matches!(err, Error::Interrupted) {
                    ExecutionStatus::Cancelled
                } else {
                    ExecutionStatus::Failed
                };
                execution.complete_execution(status, Some(&err.to_string()));
                return Err(err);
            }
        }
    }

    execution.record_event(&Event::cleanup_started(
        scope.namespace_display(),
        scope.run_id.as_deref(),
    ));
    let outcome = execute(&ctx, &discovery).await;
    audit_deletions(&execution, &run_ids, &outcome);

    summary.deleted = outcome.deleted_counts().into();
    summary.already_gone = outcome.already_gone_counts().into();
    summary.not_attempted = outcome.not_attempted.len();
    summary.namespace_outcome = outcome.namespace.as_ref().map(|(_, o)| o.clone());
    summary.warnings = outcome.failure_lines();
    if let Some((namespace, reason)) = outcome.namespace_kept() {
        tracing::warn!(namespace, reason, "namespace kept");
    }
    summary.failures = outcome.failures.clone();

    let mut remaining = Vec::new();
    if settings.wait && !outcome.interrupted {
        // Wait for what we deleted and for the VMIs garbage collection removes with their VMs.
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
        let namespace = outcome
            .namespace_deleted()
            .then_some(scope.namespace.as_deref())
            .flatten();
        let mut tracker = GoneTracker::new(outcome.deleted.iter().chain(dependents), namespace);
        let wait_scope = Scope {
            namespace: scope.namespace.clone(),
            run_id: scope.run_id.clone(),
        };
        let left = ctx
            .policy
            .attempt_deadline
            .saturating_duration_since(Instant::now());
        let result = wait_until_gone(&ctx, &wait_scope, &mut tracker, left).await;
        summary.wait = Some(match &result {
            WaitResult::AllGone => WaitReport {
                all_gone: true,
                remaining: Vec::new(),
            },
            WaitResult::TimedOut(left) | WaitResult::Interrupted(left) => WaitReport {
                all_gone: false,
                remaining: left.clone(),
            },
        });
        if let WaitResult::TimedOut(left) = result {
            remaining = left;
        }
    }

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
    for warning in &summary.warnings {
        tracing::warn!(error = warning.as_str(), "cleanup warning");
    }

    let interrupted = outcome.interrupted || cancel.is_cancelled();
    let (status, audit_status, error) = if interrupted {
        (
            CleanupStatus::Interrupted,
            ExecutionStatus::Cancelled,
            Some(Error::Interrupted),
        )
    } else if outcome.has_failures() {
        let failures = outcome.failure_lines();
        let mut message = format!(
            "cleanup could not delete {} object(s): {}",
            failures.len(),
            first_few(&failures)
        );
        if let Some((namespace, reason)) = outcome.namespace_kept() {
            message.push_str(&format!("; kept namespace {namespace}: {reason}"));
        }
        (
            CleanupStatus::CompletedWithErrors,
            ExecutionStatus::Failed,
            Some(Error::runtime(message)),
        )
    } else if let Some((namespace, reason)) = outcome.namespace_kept() {
        (
            CleanupStatus::NamespaceKept,
            ExecutionStatus::Failed,
            Some(kept_error(namespace, reason)),
        )
    } else if !remaining.is_empty() {
        let message = format!(
            "timed out after {}s waiting for {} deleted object(s) to disappear: {}",
            timeout.as_secs(),
            remaining.len(),
            first_few(&remaining)
        );
        (
            CleanupStatus::WaitTimedOut,
            ExecutionStatus::Failed,
            Some(Error::runtime(message)),
        )
    } else {
        (CleanupStatus::Completed, ExecutionStatus::Success, None)
    };
    summary.status = status;
    execution.complete_execution(
        audit_status,
        error.as_ref().map(ToString::to_string).as_deref(),
    );
    print_summary(output, &summary)?;
    match error {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_and_run_id_skip_the_prompt() {
        assert_eq!(confirmation(true, false, false), Confirmation::NotNeeded);
        assert_eq!(confirmation(false, true, false), Confirmation::NotNeeded);
        assert_eq!(confirmation(false, false, true), Confirmation::Ask);
        assert_eq!(confirmation(false, false, false), Confirmation::Piped);
    }

    #[test]
    fn eof_before_an_answer_is_nothing_and_an_empty_line_is_no() {
        assert_eq!(answer(None), Answer::Nothing);
        assert_eq!(answer(Some("\n")), Answer::No);
        assert_eq!(answer(Some("yes\n")), Answer::Yes);
    }

    #[test]
    fn only_yes_confirms() {
        for yes in ["yes", "YES", "  yes  \n", "Yes\r\n"] {
            assert!(answer_confirms(Some(yes)), "{yes:?}");
        }
        for no in ["no", "", "\n", "y", "maybe", "yes please"] {
            assert!(!answer_confirms(Some(no)), "{no:?}");
        }
        assert!(!answer_confirms(None), "EOF declines");
    }

    #[test]
    fn the_tty_hook_needs_exactly_one() {
        assert!(stdin_counts_as_terminal(true, None));
        assert!(stdin_counts_as_terminal(false, Some("1")));
        assert!(!stdin_counts_as_terminal(false, Some("0")));
        assert!(!stdin_counts_as_terminal(false, Some("")));
        assert!(!stdin_counts_as_terminal(false, None));
    }

    #[test]
    fn long_error_lists_are_shortened() {
        let items: Vec<String> = (1..=5).map(|i| format!("e{i}")).collect();
        assert_eq!(first_few(&items), "e1; e2; e3; and 2 more");
        assert_eq!(first_few(&items[..2]), "e1; e2");
    }
}
