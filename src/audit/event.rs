//! The audit events (`events` rows): their types and the constructors whose message texts are
//! exactly the reference's. VM events name their VM, which the recorder resolves to its
//! `vm_details` row and workload.
//!
//! Must not: write the database (the recorder does).

use std::fmt;

use uuid::Uuid;

use super::records::CommandKind;
use crate::model::KindCounts;

/// The reference's event types (`events.event_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    ExecutionStarted,
    WorkloadSkipped,
    ServiceCreated,
    VmCreated,
    VmFailed,
    VmReady,
    VmTimeout,
    CleanupStarted,
    CleanupCompleted,
    /// `virtwork churn`: one action ended (see `audit/churn.rs`).
    ChurnAction,
    ChurnActionFailed,
    /// `virtwork churn`: a VM it stopped was started again, or could not be.
    ChurnRestored,
    ChurnRestoreFailed,
    /// `virtwork churn`: a VM left alone (deleted, replaced, not running) or an action it
    /// cut short.
    ChurnSkipped,
    /// `virtwork churn`: the latency percentiles, once at the end (JSON in the message).
    ChurnLatency,
}

impl EventType {
    pub const ALL: [EventType; 15] = [
        EventType::ExecutionStarted,
        EventType::WorkloadSkipped,
        EventType::ServiceCreated,
        EventType::VmCreated,
        EventType::VmFailed,
        EventType::VmReady,
        EventType::VmTimeout,
        EventType::CleanupStarted,
        EventType::CleanupCompleted,
        EventType::ChurnAction,
        EventType::ChurnActionFailed,
        EventType::ChurnRestored,
        EventType::ChurnRestoreFailed,
        EventType::ChurnSkipped,
        EventType::ChurnLatency,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::ExecutionStarted => "execution_started",
            EventType::WorkloadSkipped => "workload_skipped",
            EventType::ServiceCreated => "service_created",
            EventType::VmCreated => "vm_created",
            EventType::VmFailed => "vm_failed",
            EventType::VmReady => "vm_ready",
            EventType::VmTimeout => "vm_timeout",
            EventType::CleanupStarted => "cleanup_started",
            EventType::CleanupCompleted => "cleanup_completed",
            EventType::ChurnAction => "churn_action",
            EventType::ChurnActionFailed => "churn_action_failed",
            EventType::ChurnRestored => "churn_restored",
            EventType::ChurnRestoreFailed => "churn_restore_failed",
            EventType::ChurnSkipped => "churn_skipped",
            EventType::ChurnLatency => "churn_latency",
        }
    }
}

/// One row for `events`, built by the constructors below so the message texts are exactly the
/// reference's. VM events are linked to their `vm_details` row (and its workload) by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event_type: EventType,
    pub message: String,
    pub error_detail: Option<String>,
    /// VM the event is about; resolves `events.vm_id` and `events.workload_id`.
    pub vm_name: Option<String>,
    /// Workload the event is about; resolves `events.workload_id`.
    pub workload_name: Option<String>,
}

impl Event {
    fn new(event_type: EventType, message: String) -> Self {
        Event {
            event_type,
            message,
            error_detail: None,
            vm_name: None,
            workload_name: None,
        }
    }

    fn about_vm(mut self, vm_name: &str) -> Self {
        self.vm_name = Some(vm_name.to_string());
        self
    }

    /// Links the event to a workload by name (e.g. a `vm_failed` whose VM has no row).
    pub fn with_workload(mut self, workload: &str) -> Self {
        self.workload_name = Some(workload.to_string());
        self
    }

    fn with_error(mut self, error: impl fmt::Display) -> Self {
        self.error_detail = Some(error.to_string());
        self
    }

    /// `Starting <run|dry-run|cleanup…> with run-id <uuid>`.
    pub fn execution_started(command: CommandKind, run_id: Uuid) -> Self {
        Self::new(
            EventType::ExecutionStarted,
            format!("Starting {} with run-id {run_id}", command.as_str()),
        )
    }

    /// `Planned <P> VMs across <W> workloads` (W counts requested workloads, skipped included).
    pub fn planned(vm_count: usize, workload_count: usize) -> Self {
        Self::new(
            EventType::ExecutionStarted,
            format!("Planned {vm_count} VMs across {workload_count} workloads"),
        )
    }

    /// `Workload "<n>" disabled via config (enabled: false)`.
    pub fn workload_skipped(workload: &str) -> Self {
        Self::new(
            EventType::WorkloadSkipped,
            format!("Workload \"{workload}\" disabled via config (enabled: false)"),
        )
    }

    /// `Service <name> created`, linked to the workload that owns the Service.
    pub fn service_created(service: &str, workload: &str) -> Self {
        let mut event = Self::new(
            EventType::ServiceCreated,
            format!("Service {service} created"),
        );
        event.workload_name = Some(workload.to_string());
        event
    }

    /// `VM <vm> created`.
    pub fn vm_created(vm: &str) -> Self {
        Self::new(EventType::VmCreated, format!("VM {vm} created")).about_vm(vm)
    }

    /// `Failed to create VM <vm>` with the error as detail.
    pub fn vm_failed(vm: &str, error: impl fmt::Display) -> Self {
        Self::new(EventType::VmFailed, format!("Failed to create VM {vm}"))
            .about_vm(vm)
            .with_error(error)
    }

    /// `VM <vm> is ready`.
    pub fn vm_ready(vm: &str) -> Self {
        Self::new(EventType::VmReady, format!("VM {vm} is ready")).about_vm(vm)
    }

    /// `VM <vm> failed readiness check` with the error as detail (timeouts and other failures).
    pub fn vm_timeout(vm: &str, error: impl fmt::Display) -> Self {
        Self::new(
            EventType::VmTimeout,
            format!("VM {vm} failed readiness check"),
        )
        .about_vm(vm)
        .with_error(error)
    }

    /// `Starting cleanup (namespace: <ns>, run-id filter: "<id>")` (empty filter = all runs).
    pub fn cleanup_started(namespace: &str, run_id_filter: Option<&str>) -> Self {
        Self::new(
            EventType::CleanupStarted,
            format!(
                "Starting cleanup (namespace: {namespace}, run-id filter: \"{}\")",
                run_id_filter.unwrap_or("")
            ),
        )
    }

    /// `Deleted <v> VMs, <s> services, <x> secrets, <d> DVs, <p> PVCs`.
    pub fn cleanup_completed(counts: &KindCounts) -> Self {
        Self::new(
            EventType::CleanupCompleted,
            format!(
                "Deleted {} VMs, {} services, {} secrets, {} DVs, {} PVCs",
                counts.vms, counts.services, counts.secrets, counts.dvs, counts.pvcs
            ),
        )
    }
}
