//! PURE planning: Config + Registry -> Plan, with every Kubernetes object already rendered.
//!
//! No I/O and no async: dry-run prints a Plan, `run` applies it, and tests of "what would
//! be created" need neither a cluster nor a runtime.

use k8s_openapi::api::core::v1::{Secret, Service};

use crate::k8s::kubevirt::VirtualMachine;

/// Everything one run will create, in creation order, fully rendered.
#[derive(Debug, Clone)]
pub struct Plan {
    /// UUID v4 of this run; on the `virtwork/run-id` label of every object.
    pub run_id: String,
    pub namespace: String,
    /// Workloads planned (not skipped), in plan order.
    pub workloads: Vec<PlannedWorkload>,
    /// Workloads skipped because their YAML section says `enabled: false`.
    pub skipped: Vec<String>,
    /// Services, sorted by name.
    pub services: Vec<PlannedService>,
    /// VMs in plan order (workload order, then role order, then index).
    pub vms: Vec<PlannedVm>,
}

/// One workload's effective settings, as recorded in the audit database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedWorkload {
    pub name: String,
    pub vm_count: u32,
    pub cpu_cores: u32,
    pub memory: String,
    /// Data disk size when the workload has data disks.
    pub data_disk_size: Option<String>,
    pub requires_service: bool,
}

/// A Service with the workload it belongs to.
#[derive(Debug, Clone)]
pub struct PlannedService {
    pub workload: String,
    pub service: Service,
}

/// One VM with its cloud-init Secret.
#[derive(Debug, Clone)]
pub struct PlannedVm {
    pub name: String,
    pub workload: String,
    pub role: Option<String>,
    /// `<vm>-cloudinit`, key `userdata`.
    pub secret: Secret,
    pub vm: VirtualMachine,
    /// Names of the DataVolumes its templates create.
    pub data_volumes: Vec<String>,
}
