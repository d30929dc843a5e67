//! What an audit record says, as values: the status and kind words the database stores, the
//! run description ([`ExecutionParams`], which holds no credential by construction), the
//! workload and VM rows, and the one timestamp format of every timestamp column.
//!
//! Must not: write or read the database (the recorder and the queries do).

use std::fmt;

use crate::error::Outcome;
use crate::plan::{Plan, PlannedVm, PlannedWorkload};

/// `error_summary` recorded for an execution stopped by SIGINT/SIGTERM.
pub const SUMMARY_INTERRUPTED: &str = "interrupted by signal";
/// `error_summary` recorded when the user declines the cleanup prompt.
pub const SUMMARY_DECLINED: &str = "user declined confirmation";

/// The current time as stored in every timestamp column: UTC RFC 3339, second precision.
pub fn timestamp_now() -> String {
    format_timestamp(jiff::Timestamp::now())
}

/// Formats a timestamp the way the audit database stores it (`2026-01-01T00:00:00Z`).
pub fn format_timestamp(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The value of `audit_log.command`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandKind {
    Run,
    DryRun,
    Cleanup,
    CleanupDryRun,
    Churn,
    ChurnDryRun,
}

impl CommandKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandKind::Run => "run",
            CommandKind::DryRun => "dry-run",
            CommandKind::Cleanup => "cleanup",
            CommandKind::CleanupDryRun => "cleanup --dry-run",
            CommandKind::Churn => "churn",
            CommandKind::ChurnDryRun => "churn --dry-run",
        }
    }
}

/// The value of `audit_log.cleanup_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupMode {
    All,
    RunId,
    DryRun,
}

impl CleanupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupMode::All => "all",
            CleanupMode::RunId => "run-id",
            CleanupMode::DryRun => "dry-run",
        }
    }
}

/// Values of `audit_log.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExecutionStatus {
    InProgress,
    Success,
    Failed,
    /// The user declined the cleanup confirmation.
    Aborted,
    /// Interrupted by SIGINT/SIGTERM.
    Cancelled,
}

impl ExecutionStatus {
    /// Every status, in the order `virtwork audit list --status` documents them.
    pub const ALL: [ExecutionStatus; 5] = [
        ExecutionStatus::InProgress,
        ExecutionStatus::Success,
        ExecutionStatus::Failed,
        ExecutionStatus::Aborted,
        ExecutionStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::InProgress => "in_progress",
            ExecutionStatus::Success => Outcome::Success.as_str(),
            ExecutionStatus::Failed => Outcome::Failed.as_str(),
            ExecutionStatus::Aborted => "aborted",
            ExecutionStatus::Cancelled => Outcome::Cancelled.as_str(),
        }
    }

    /// Parses a status as stored (`in_progress`, `success`, ...).
    pub fn parse(value: &str) -> Option<ExecutionStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }
}

/// A finished command's status: the outcome of its result.
impl From<Outcome> for ExecutionStatus {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Success => ExecutionStatus::Success,
            Outcome::Failed => ExecutionStatus::Failed,
            Outcome::Cancelled => ExecutionStatus::Cancelled,
        }
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Values of `workload_details.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadStatus {
    Pending,
    Created,
    Failed,
}

impl WorkloadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadStatus::Pending => "pending",
            WorkloadStatus::Created => "created",
            WorkloadStatus::Failed => "failed",
        }
    }
}

/// Values of `resource_details.resource_type` (and the kinds cleanup marks deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    Service,
    Secret,
    DataVolume,
    PersistentVolumeClaim,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Service => "Service",
            ResourceKind::Secret => "Secret",
            ResourceKind::DataVolume => "DataVolume",
            ResourceKind::PersistentVolumeClaim => "PersistentVolumeClaim",
        }
    }
}

/// Parameters of one execution (`audit_log` at start). Holds no credential by construction:
/// SSH access is only the `ssh_auth_configured` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionParams {
    pub command: CommandKind,
    pub namespace: String,
    /// The kubeconfig value the user gave (not the resolved `$KUBECONFIG`).
    pub kubeconfig_path: Option<String>,
    /// Current context name, `in-cluster`, or `None` when no cluster was contacted.
    pub cluster_context: Option<String>,
    pub container_disk_image: Option<String>,
    pub default_cpu_cores: Option<u32>,
    pub default_memory: Option<String>,
    pub data_disk_size: Option<String>,
    /// Workloads actually planned, in plan order (`workloads_csv`).
    pub workloads: Vec<String>,
    pub total_vm_count: Option<u32>,
    pub total_workload_count: Option<u32>,
    pub dry_run: bool,
    pub ssh_auth_configured: bool,
    pub cleanup_mode: Option<CleanupMode>,
    pub wait_for_ready: bool,
    pub ready_timeout_seconds: Option<u64>,
}

impl ExecutionParams {
    /// An execution that creates nothing (cleanup, churn): every field about what a run plans
    /// is empty.
    pub fn creating_nothing(
        command: CommandKind,
        namespace: String,
        kubeconfig_path: Option<String>,
        dry_run: bool,
    ) -> Self {
        ExecutionParams {
            command,
            namespace,
            kubeconfig_path,
            cluster_context: None,
            container_disk_image: None,
            default_cpu_cores: None,
            default_memory: None,
            data_disk_size: None,
            workloads: Vec::new(),
            total_vm_count: None,
            total_workload_count: None,
            dry_run,
            ssh_auth_configured: false,
            cleanup_mode: None,
            wait_for_ready: false,
            ready_timeout_seconds: None,
        }
    }

    /// Fills `workloads_csv` and the totals from the plan that will be applied.
    pub fn with_plan(mut self, plan: &Plan) -> Self {
        self.workloads = plan.workloads.iter().map(|w| w.name.clone()).collect();
        self.total_vm_count = Some(saturating_u32(plan.vms.len()));
        self.total_workload_count = Some(saturating_u32(plan.workloads.len()));
        self
    }
}

pub(super) fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One planned workload (`workload_details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRecord {
    pub workload_type: String,
    pub vm_count: u32,
    pub cpu_cores: u32,
    pub memory: String,
    /// Data disk size when the workload has data disks (`has_data_disk` follows from it).
    pub data_disk_size: Option<String>,
    pub requires_service: bool,
}

impl From<&PlannedWorkload> for WorkloadRecord {
    fn from(w: &PlannedWorkload) -> Self {
        WorkloadRecord {
            workload_type: w.name.clone(),
            vm_count: w.vm_count,
            cpu_cores: w.cpu_cores,
            memory: w.memory.clone(),
            data_disk_size: w.data_disk_size.clone(),
            requires_service: w.requires_service,
        }
    }
}

/// One created VM (`vm_details`). Linked to its workload row by `component`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmRecord {
    pub vm_name: String,
    pub namespace: String,
    /// The workload name.
    pub component: String,
    pub role: Option<String>,
    pub cpu_cores: u32,
    pub memory: String,
    pub container_disk_image: String,
    pub data_disk_size: Option<String>,
    /// Phase observed at creation, if any.
    pub phase: Option<String>,
}

impl VmRecord {
    /// The record for a planned VM of `workload` in `namespace`, booting `image`.
    pub fn from_planned(
        vm: &PlannedVm,
        workload: &PlannedWorkload,
        namespace: &str,
        image: &str,
    ) -> Self {
        VmRecord {
            vm_name: vm.name.clone(),
            namespace: namespace.to_string(),
            component: vm.workload.clone(),
            role: vm.role.clone(),
            cpu_cores: workload.cpu_cores,
            memory: workload.memory.clone(),
            container_disk_image: image.to_string(),
            data_disk_size: workload.data_disk_size.clone(),
            phase: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_rfc3339_with_second_precision() {
        let ts: jiff::Timestamp = "2026-01-01T12:34:56.789+02:00".parse().unwrap();
        assert_eq!(format_timestamp(ts), "2026-01-01T10:34:56Z");
    }
}
