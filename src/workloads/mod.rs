//! The Workload contract, the registry of workload factories, and the built-in workloads.
//!
//! A workload is a pure data producer: given its effective settings it says how many VMs
//! it needs in which roles, what cloud-init user-data each role boots with, which data
//! disks and which Service it needs. It performs no I/O and knows nothing of the cluster;
//! plan.rs turns its answers into Kubernetes objects.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::SshConfig;
use crate::error::Result;

/// Settings every factory receives, shared by all workloads of a run.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    pub namespace: String,
    pub data_disk_size: String,
    pub ssh: SshConfig,
    pub catalog_dir: PathBuf,
}

/// The effective settings of one workload (global values refined by its YAML section),
/// with params already validated against the workload's schema.
#[derive(Debug, Clone)]
pub struct WorkloadSettings {
    pub vm_count: u32,
    pub cpu_cores: u32,
    pub memory: String,
    /// User-given param values (validated); absent keys take the schema default.
    pub params: BTreeMap<String, String>,
}

/// How many VMs a role needs. Single-role workloads have one spec with `role: None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSpec {
    pub role: Option<String>,
    pub vm_count: u32,
}

/// CPU and memory of each VM of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmResources {
    pub cpu_cores: u32,
    pub memory: String,
}

/// A blank data disk attached to every VM of a workload, backed by a DataVolumeTemplate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDisk {
    /// Disk and volume name inside the VM spec (e.g. `datadisk`).
    pub name: String,
    /// DataVolume base name; the per-VM DataVolume is `<dv_base>-<vm name>`.
    pub dv_base: String,
    /// virtio serial, visible in the guest as `/dev/disk/by-id/virtio-<serial>`.
    pub serial: String,
    /// Kubernetes quantity.
    pub size: String,
}

/// A port of a workload Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortSpec {
    pub name: String,
    pub port: u16,
    /// `TCP` or `UDP`.
    pub protocol: String,
}

/// A ClusterIP Service a workload needs (e.g. the iperf3 server endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    pub name: String,
    /// Pod selector; always includes `app.kubernetes.io/component` (SPEC §1 item 4).
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<ServicePortSpec>,
}

/// The contract every workload (built-in or catalog) fulfils. Object-safe.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// Workload name, also the `app.kubernetes.io/component` label value.
    fn name(&self) -> &str;
    /// Roles in creation order with their VM counts.
    fn roles(&self) -> Vec<RoleSpec>;
    /// The complete `#cloud-config` user-data for VMs of `role` (`None` for single-role).
    fn userdata(&self, role: Option<&str>) -> Result<String>;
    /// CPU and memory per VM.
    fn resources(&self) -> VmResources;
    /// Data disks per VM, in attachment order.
    fn data_disks(&self) -> Vec<DataDisk> {
        Vec::new()
    }
    /// The Service this workload needs, if any.
    fn service(&self) -> Option<ServiceSpec> {
        None
    }
    /// Total VMs over all roles.
    fn vm_count(&self) -> u32 {
        self.roles().iter().map(|r| r.vm_count).sum()
    }
}
