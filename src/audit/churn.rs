//! The audit record of `virtwork churn`: its execution parameters and one event per ended
//! action and per VM started again, built here so the recorder stays generic.
//!
//! Must not: decide what churn does; see the configuration.

use crate::churn::latency::Latencies;
use crate::churn::observe::SkipCause;
use crate::churn::{ActionResult, ChurnVm};
use crate::model::ChurnAction;

use super::event::{Event, EventType};
use super::records::{CommandKind, ExecutionParams};

/// The `audit_log` row of a churn: the namespace it looked in (`*` for all) and, in
/// `linked_run_ids` (set by the command), the runs whose VMs it touched.
pub fn churn_params(
    namespace: &str,
    kubeconfig_path: Option<String>,
    dry_run: bool,
) -> ExecutionParams {
    let command = if dry_run {
        CommandKind::ChurnDryRun
    } else {
        CommandKind::Churn
    };
    ExecutionParams::creating_nothing(command, namespace.to_string(), kubeconfig_path, dry_run)
}

fn event(event_type: EventType, message: String, error: Option<String>) -> Event {
    Event {
        event_type,
        message,
        error_detail: error,
        vm_name: None,
        workload_name: None,
    }
}

/// `<action> <ns>/<vm>: succeeded` (`churn_action`) or `... failed` (`churn_action_failed`,
/// the error in `error_detail`); `<action> <ns>/<vm>: skipped: <why>` or `... ended early:
/// <why>` (`churn_skipped`) for a VM left alone or deleted or replaced meanwhile; `None` for
/// an action an interrupt cut short and for slots no VM could take (those are counted in the
/// summary, not recorded one by one).
pub fn action_ended(vm: &ChurnVm, action: ChurnAction, result: &ActionResult) -> Option<Event> {
    let name = vm.display_name();
    match result {
        ActionResult::Succeeded => Some(event(
            EventType::ChurnAction,
            format!("{action} {name}: succeeded"),
            None,
        )),
        ActionResult::Failed(error) => Some(event(
            EventType::ChurnActionFailed,
            format!("{action} {name}: failed"),
            Some(error.clone()),
        )),
        ActionResult::Skipped(
            cause @ (SkipCause::VmReplaced | SkipCause::VmDeleted | SkipCause::NotRunning),
        ) => Some(event(
            EventType::ChurnSkipped,
            format!("{action} {name}: skipped: {}", cause.describe()),
            None,
        )),
        ActionResult::CutShort(why) => Some(event(
            EventType::ChurnSkipped,
            format!("{action} {name}: ended early: {}", why.describe()),
            None,
        )),
        ActionResult::Abandoned | ActionResult::Skipped(_) => None,
    }
}

/// `Left <ns>/<vm> alone: <why>` (`churn_skipped`): a VM owed a start that is no longer the
/// VM churn stopped.
pub fn restore_skipped(vm: &ChurnVm, why: &str) -> Event {
    event(
        EventType::ChurnSkipped,
        format!("Left {} alone: {why}", vm.display_name()),
        None,
    )
}

/// `churn_latency`: the percentiles of `--output json`'s `latency` object, as JSON.
pub fn latency_event(latencies: &Latencies) -> Event {
    event(EventType::ChurnLatency, latencies.json().to_string(), None)
}

/// `Started <ns>/<vm> again` (`churn_restored`) or `Could not start <ns>/<vm> again`
/// (`churn_restore_failed`).
pub fn restored(vm: &ChurnVm, result: &Result<(), String>) -> Event {
    let name = vm.display_name();
    match result {
        Ok(()) => event(
            EventType::ChurnRestored,
            format!("Started {name} again"),
            None,
        ),
        Err(error) => event(
            EventType::ChurnRestoreFailed,
            format!("Could not start {name} again"),
            Some(error.clone()),
        ),
    }
}
