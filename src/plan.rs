//! PURE planning: PlanInput + Registry -> Plan, with every Kubernetes object already rendered.
//!
//! No I/O and no async: dry-run prints a Plan, `run` applies it, and tests of "what would
//! be created" need neither a cluster nor a runtime. Everything a user's input can get wrong
//! about the objects (names too long or not DNS-1123, duplicate workloads, colliding names,
//! oversized cloud-init) is rejected here as [`Error::Input`], before anything is printed or
//! sent. Order is deterministic: workloads in request order (built-ins, then catalog
//! entries), roles in the workload's order, VMs by index; Services sorted by name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    HTTPGetAction, LocalObjectReference, Secret, Service, ServicePort,
    ServiceSpec as K8sServiceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cloudinit::check_userdata_size;
use crate::error::{Error, Result};
use crate::kubevirt::{
    CloudInitNoCloudSource, ContainerDiskSource, Cpu, DataVolumeBlankImage, DataVolumeSource,
    DataVolumeSpec, DataVolumeTemplateSpec, DataVolumeVolumeSource, Devices, Disk, DiskTarget,
    DomainSpec, Interface, InterfaceMasquerade, Network, PodNetwork, Probe, ResourceRequirements,
    StorageResources, StorageSpec, VirtualMachine, VirtualMachineInstanceSpec,
    VirtualMachineInstanceTemplateSpec, VirtualMachineSpec, Volume,
};
use crate::labels;
use crate::model::{
    AccessMode, DNS_SUBDOMAIN_MAX_LEN, DnsLabel, EvictionStrategy, ImageRef, Quantity, RunId,
    SshAccess, StorageClassName, VolumeMode, is_dns_subdomain,
};
use crate::workloads::{
    DataDisk, GuestOs, Registry, VmResources, Workload, WorkloadOptions, WorkloadSettings, scripts,
};

/// DNS-1123 label and label-value length limit.
pub const MAX_LABEL_LEN: usize = DnsLabel::MAX_LEN;
/// DNS-1123 subdomain length limit.
pub const MAX_SUBDOMAIN_LEN: usize = DNS_SUBDOMAIN_MAX_LEN;
/// Key of the user-data entry in each cloud-init Secret (KubeVirt's NoCloud convention).
pub const USERDATA_KEY: &str = "userdata";
/// Disk/volume names every VM has; workload data disks must not reuse them.
pub const CONTAINER_DISK: &str = "containerdisk";
pub const CLOUDINIT_DISK: &str = "cloudinitdisk";
const NETWORK_NAME: &str = "default";
const DISK_BUS: &str = "virtio";
const RUN_STRATEGY: &str = "Always";
/// `app.kubernetes.io/name` of Services (VMs and Secrets use `virtwork-<workload>`).
const SERVICE_NAME_LABEL: &str = "virtwork";

/// What planning needs: the fleet-wide values, the workloads asked for and their refinements.
#[derive(Debug, Clone)]
pub struct PlanInput {
    pub namespace: DnsLabel,
    pub container_disk_image: ImageRef,
    /// The guest OS family of every workload without its own `guest-os`.
    pub guest_os: GuestOs,
    /// Data disk size of disk-backed built-ins.
    pub disk_size: Quantity,
    /// StorageClass of data disks without a per-workload one; `None`: CDI's default.
    pub storage_class: Option<StorageClassName>,
    /// `None`: the class's StorageProfile decides (CDI fills it in).
    pub access_mode: Option<AccessMode>,
    /// `None`: the class's StorageProfile decides (CDI fills it in).
    pub volume_mode: Option<VolumeMode>,
    pub cpu_cores: u32,
    pub memory: Quantity,
    /// What a node drain does to VMs of workloads without their own `eviction-strategy`.
    pub eviction_strategy: EvictionStrategy,
    /// Whether VMs carry the workload readiness probe (`--ready-condition workload`): only
    /// then does readiness depend on the guest agent running commands for KubeVirt.
    pub workload_probe: bool,
    /// VMs per workload (per role for client/server workloads).
    pub vm_count: u32,
    /// Built-in workloads to run, in order. Workloads whose override says `enabled: false`
    /// are still listed; the planner skips them.
    pub workloads: Vec<String>,
    /// Catalog entries to run, in order (valid entry names).
    pub from_catalog: Vec<String>,
    /// Per-workload refinements keyed by workload name.
    pub workload_overrides: BTreeMap<String, WorkloadOverride>,
    pub ssh: SshAccess,
    pub catalog_dir: PathBuf,
}

/// Per-workload refinements from YAML `workloads.<name>` and `--params`. Each `Some` value
/// beats the corresponding fleet-wide value for that workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadOverride {
    /// `Some(false)` skips the workload.
    pub enabled: Option<bool>,
    pub vm_count: Option<u32>,
    pub cpu_cores: Option<u32>,
    pub memory: Option<Quantity>,
    pub guest_os: Option<GuestOs>,
    pub storage_class: Option<StorageClassName>,
    pub access_mode: Option<AccessMode>,
    pub volume_mode: Option<VolumeMode>,
    pub eviction_strategy: Option<EvictionStrategy>,
    /// Seconds the workload's VMs get to shut down; `None`: the workload's own
    /// ([`Workload::termination_grace_seconds`]).
    pub termination_grace_period: Option<u32>,
    /// Raw param values, validated against the workload's schema when planning.
    pub params: BTreeMap<String, String>,
}

/// Everything one run will create, in creation order. Services are rendered; each VM is a
/// small per-VM part (name, DataVolume names) sharing its workload role's [`RoleTemplate`]
/// (user-data rendered once per role), and its Secret and VirtualMachine objects are built
/// from the two when sent or printed ([`PlannedVm::secret`], [`PlannedVm::vm`]), so memory
/// does not grow with user-data size x VM count. Still a pure value: building an object
/// twice gives the same object, and dry-run prints exactly what apply sends.
#[derive(Debug, Clone)]
pub struct Plan {
    /// On the `virtwork/run-id` label of every object.
    pub run_id: RunId,
    pub namespace: String,
    /// Workloads planned (not skipped), in plan order.
    pub workloads: Vec<PlannedWorkload>,
    /// Workloads skipped because their YAML section says `enabled: false`.
    pub skipped: Vec<String>,
    /// Things the user should know that do not stop the run (e.g. a guest OS family that
    /// had to be guessed); the command logs them as warnings.
    pub warnings: Vec<String>,
    /// Services, sorted by name.
    pub services: Vec<PlannedService>,
    /// VMs in plan order (workload order, then role order, then index).
    pub vms: Vec<PlannedVm>,
}

impl Plan {
    /// The cloud-init Secrets, in VM order (each built on demand).
    pub fn secrets(&self) -> impl Iterator<Item = Secret> + '_ {
        self.vms.iter().map(PlannedVm::secret)
    }

    /// Number of DataVolumes the VMs' templates will create.
    pub fn data_volume_count(&self) -> usize {
        self.vms.iter().map(|vm| vm.data_volumes.len()).sum()
    }

    /// The plan for a cluster with `schedulable_nodes` (what preflight listed): with one,
    /// `auto` gives every VM eviction strategy `None` ([`EvictionChoice::kubevirt_name`]).
    /// Templates are copied once per role, not per VM.
    pub fn for_topology(&self, schedulable_nodes: usize) -> Plan {
        let single_node = schedulable_nodes == 1;
        let mut copies: Vec<(Arc<RoleTemplate>, Arc<RoleTemplate>)> = Vec::new();
        let mut plan = self.clone();
        for vm in &mut plan.vms {
            let copy = match copies
                .iter()
                .find(|(old, _)| Arc::ptr_eq(old, &vm.template))
            {
                Some((_, copy)) => copy.clone(),
                None => {
                    let copy = Arc::new(RoleTemplate {
                        single_node,
                        ..(*vm.template).clone()
                    });
                    copies.push((vm.template.clone(), copy.clone()));
                    copy
                }
            };
            vm.template = copy;
        }
        plan
    }

    /// Workloads whose chosen strategy migrates although the cluster has a single
    /// schedulable node: every eviction of their VMs waits for a target node that never comes.
    pub fn single_node_warnings(&self) -> Vec<String> {
        let named: BTreeSet<&str> = self
            .vms
            .iter()
            .filter(|vm| {
                matches!(
                    vm.template.eviction.chosen,
                    EvictionStrategy::LiveMigrate | EvictionStrategy::LiveMigrateIfPossible
                )
            })
            .map(|vm| vm.workload.as_str())
            .collect();
        named
            .into_iter()
            .map(|workload| {
                format!(
                    "eviction-strategy of workload {workload:?} migrates, but the cluster has one \
                     schedulable node: a node drain or upgrade waits for a migration target that \
                     never comes; use auto or none"
                )
            })
            .collect()
    }
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
    /// The params its expected signals depend on: what its VMs' `virtwork/signal-params`
    /// annotation holds, recorded in the audit database so verify judges by them.
    pub signal_params: crate::workloads::signal_params::SignalParams,
}

/// A Service with the workload it belongs to.
#[derive(Debug, Clone)]
pub struct PlannedService {
    pub workload: String,
    pub service: Service,
}

/// What every VM of one workload role shares, rendered once: the user-data (shared, not
/// copied, by every VM of the role), labels, resources, disks, probe and annotations.
#[derive(Debug, Clone)]
pub struct RoleTemplate {
    namespace: String,
    image: String,
    userdata: Arc<str>,
    vm_labels: BTreeMap<String, String>,
    secret_labels: BTreeMap<String, String>,
    cpu_cores: u32,
    memory: Quantity,
    disks: Vec<crate::workloads::DataDisk>,
    storage: DiskStorage,
    readiness_probe: Option<Probe>,
    eviction: EvictionChoice,
    /// The cluster has one schedulable node ([`Plan::for_topology`]).
    single_node: bool,
    grace: u32,
    annotations: BTreeMap<String, String>,
}

/// One VM: its own small parts plus its role's shared [`RoleTemplate`]. The Secret
/// (`<vm>-cloudinit`, key `userdata`) and the VirtualMachine are built from them on demand.
#[derive(Debug, Clone)]
pub struct PlannedVm {
    pub name: String,
    pub workload: String,
    pub role: Option<String>,
    /// Names of the DataVolumes its templates create.
    pub data_volumes: Vec<String>,
    template: Arc<RoleTemplate>,
}

impl PlannedVm {
    /// Name of its cloud-init Secret.
    pub fn secret_name(&self) -> String {
        format!("{}-cloudinit", self.name)
    }

    /// The rendered `#cloud-config` user-data (shared by every VM of the role).
    pub fn userdata(&self) -> &Arc<str> {
        &self.template.userdata
    }

    /// The cloud-init Secret, built now (the user-data is copied into it only for as long
    /// as the object lives).
    pub fn secret(&self) -> Secret {
        let t = &self.template;
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name()),
                namespace: Some(t.namespace.clone()),
                labels: Some(t.secret_labels.clone()),
                ..Default::default()
            },
            string_data: Some(BTreeMap::from([(
                USERDATA_KEY.to_string(),
                t.userdata.to_string(),
            )])),
            ..Default::default()
        }
    }

    /// The VirtualMachine, built now.
    pub fn vm(&self) -> VirtualMachine {
        let t = &self.template;
        build_vm(VmInputs {
            name: &self.name,
            namespace: &t.namespace,
            labels: &t.vm_labels,
            image: &t.image,
            cpu_cores: t.cpu_cores,
            memory: &t.memory,
            secret_name: &self.secret_name(),
            disks: &t.disks,
            storage: &t.storage,
            data_volumes: &self.data_volumes,
            readiness_probe: &t.readiness_probe,
            eviction_strategy: t.eviction.kubevirt_name(t.single_node),
            grace: t.grace,
            annotations: &t.annotations,
        })
    }

    /// The StorageClass its DataVolumes name; None for CDI's default (or no data disks).
    pub fn storage_class(&self) -> Option<&str> {
        self.template.storage.class.as_deref()
    }

    /// The access mode its DataVolumes ask for; None when the class's StorageProfile decides.
    pub fn access_mode(&self) -> Option<AccessMode> {
        self.template.storage.access_mode
    }

    /// The volume mode of the VM's data disks; `None`: the StorageProfile decides.
    pub fn volume_mode(&self) -> Option<VolumeMode> {
        self.template.storage.volume_mode
    }

    /// Whether `other` shares this VM's role template (the same rendered user-data).
    pub fn shares_template_with(&self, other: &PlannedVm) -> bool {
        Arc::ptr_eq(&self.template, &other.template)
    }
}

/// One requested workload with its effective settings (global values refined by its
/// `workloads.<name>` section and `--params`).
#[derive(Debug, Clone)]
pub struct WorkloadRequest {
    pub name: String,
    pub settings: WorkloadSettings,
}

/// The requested workloads in plan order plus the names skipped by `enabled: false`.
#[derive(Debug, Clone)]
pub struct Requests {
    pub planned: Vec<WorkloadRequest>,
    pub skipped: Vec<String>,
    /// Warnings from resolving the requests (see [`Plan::warnings`]).
    pub warnings: Vec<String>,
}

/// Plans a run: resolves the requested workloads, validates each one's params and builds
/// it from `registry` (built-ins plus loaded catalog entries), then renders and validates
/// every object. Pure: the same inputs give the same plan.
pub fn build_plan(input: &PlanInput, registry: &Registry, run_id: RunId) -> Result<Plan> {
    let requests = resolve_requests(input)?;
    let mut options = workload_options(input);
    options.planned_workloads = requests.planned.iter().map(|r| r.name.clone()).collect();
    options.run_tag = run_id.name_tag();
    let workloads = requests
        .planned
        .iter()
        .map(|request| registry.create(&request.name, &request.settings, &options))
        .collect::<Result<Vec<_>>>()?;
    let mut plan = plan_workloads(input, run_id, &workloads, requests.skipped)?;
    let planning_warnings = std::mem::replace(&mut plan.warnings, requests.warnings);
    plan.warnings.extend(planning_warnings);
    Ok(plan)
}

/// The workloads a `--params` value's prefixes or a configuration file's
/// `workloads.<name>` section name, and where they came from (`--params`, `VIRTWORK_PARAMS`,
/// `workloads.<name> of --config <file>`), so a typo in a name is caught instead of silently
/// ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamPrefixes {
    pub source: String,
    pub workloads: Vec<String>,
    /// A configuration file's section: one that disables its workload (`enabled: false`)
    /// is accounted for by the skip, not warned about.
    pub section: bool,
}

/// Checks `prefixes` against the workloads this run plans (`planned`) and the workloads that
/// exist at all (`known`: built-ins and catalog entries). A prefix naming no workload is bad
/// input with a did-you-mean (a typo would otherwise leave the load at its default and an
/// alert test "pass" on the wrong load); a known workload this run does not plan is a warning,
/// returned.
pub fn check_param_prefixes(
    prefixes: &ParamPrefixes,
    planned: &[&str],
    known: &[&str],
) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    for prefix in &prefixes.workloads {
        if planned.contains(&prefix.as_str()) {
            continue;
        }
        if known.contains(&prefix.as_str()) {
            warnings.push(format!(
                "{} sets {} for workload {prefix:?}, which this run does not plan \
                 (planned: {}); they are ignored",
                prefixes.source,
                if prefixes.section {
                    "settings"
                } else {
                    "params"
                },
                planned.join(", ")
            ));
            continue;
        }
        let hint = match crate::model::suggest(prefix, planned)
            .or_else(|| crate::model::suggest(prefix, known))
        {
            Some(name) => format!("; did you mean {name:?}?"),
            None => String::new(),
        };
        return Err(Error::input(format!(
            "invalid workload {prefix:?} in {}: expected a built-in or catalog workload \
             ({}){hint}",
            prefixes.source,
            known.join(", ")
        )));
    }
    Ok(warnings)
}

/// Resolves which workloads run and with which settings.
///
/// Order is `input.workloads` then `input.from_catalog`. A name listed twice is an input
/// error (it would plan colliding VMs). The per-workload override beats the global value
/// for vm-count, cpu-cores and memory.
pub fn resolve_requests(input: &PlanInput) -> Result<Requests> {
    let mut seen = BTreeSet::new();
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    for name in input.workloads.iter().chain(&input.from_catalog) {
        if !seen.insert(name.as_str()) {
            let both = input.workloads.contains(name) && input.from_catalog.contains(name);
            return Err(Error::input(if both {
                format!(
                    "workload {name:?} is given both as a built-in (--workloads) and a catalog \
                     entry (--from-catalog); a name can run once per run — rename the catalog \
                     entry directory"
                )
            } else {
                format!(
                    "workload {name:?} is listed more than once; each workload runs once per \
                     run — use --vm-count or workloads.{name}.vm-count for more VMs"
                )
            }));
        }
        let overrides = input.workload_overrides.get(name);
        if overrides.and_then(|o| o.enabled) == Some(false) {
            skipped.push(name.clone());
            continue;
        }
        let settings = WorkloadSettings {
            vm_count: overrides.and_then(|o| o.vm_count).unwrap_or(input.vm_count),
            cpu_cores: overrides
                .and_then(|o| o.cpu_cores)
                .unwrap_or(input.cpu_cores),
            memory: overrides
                .and_then(|o| o.memory.clone())
                .unwrap_or_else(|| input.memory.clone()),
            params: overrides.map(|o| o.params.clone()).unwrap_or_default(),
            guest_family: {
                let chosen = overrides.and_then(|o| o.guest_os).unwrap_or(input.guest_os);
                let family = chosen.resolve(input.container_disk_image.as_str());
                // One image, so one guess: warn once however many workloads guessed.
                if let Some(warning) = family.warning
                    && !warnings.contains(&warning)
                {
                    warnings.push(warning);
                }
                family.family
            },
        };
        if settings.vm_count == 0 {
            return Err(Error::input(format!(
                "vm-count for workload {name:?} must be at least 1, got 0"
            )));
        }
        if settings.cpu_cores == 0 {
            return Err(Error::input(format!(
                "cpu-cores for workload {name:?} must be at least 1, got 0"
            )));
        }
        planned.push(WorkloadRequest {
            name: name.clone(),
            settings,
        });
    }
    if planned.is_empty() && skipped.is_empty() {
        return Err(Error::input(
            "no workloads specified: use --workloads or --from-catalog",
        ));
    }
    Ok(Requests {
        planned,
        skipped,
        warnings,
    })
}

/// The options every workload factory receives for this run.
pub fn workload_options(input: &PlanInput) -> WorkloadOptions {
    WorkloadOptions {
        namespace: input.namespace.clone(),
        data_disk_size: input.disk_size.clone(),
        ssh: input.ssh.clone(),
        catalog_dir: input.catalog_dir.clone(),
        planned_workloads: Vec::new(),
        ready_endpoint: input.workload_probe,
        run_tag: String::new(),
    }
}

/// Renders every object for already-constructed workloads (in plan order) and validates the
/// whole plan. `skipped` is carried into the plan for reporting.
pub fn plan_workloads(
    input: &PlanInput,
    run_id: RunId,
    workloads: &[Box<dyn Workload>],
    skipped: Vec<String>,
) -> Result<Plan> {
    let mut plan = Plan {
        run_id,
        namespace: input.namespace.to_string(),
        workloads: Vec::with_capacity(workloads.len()),
        skipped,
        warnings: Vec::new(),
        services: Vec::new(),
        vms: Vec::new(),
    };
    let fleet = Fleet {
        namespace: input.namespace.as_str(),
        image: input.container_disk_image.as_str(),
        run_id: &run_id.to_string(),
        workload_probe: input.workload_probe,
    };
    for workload in workloads {
        let overrides = input.workload_overrides.get(workload.name());
        let storage = DiskStorage {
            class: overrides
                .and_then(|o| o.storage_class.as_ref())
                .or(input.storage_class.as_ref())
                .map(|class| class.to_string()),
            access_mode: overrides.and_then(|o| o.access_mode).or(input.access_mode),
            volume_mode: overrides.and_then(|o| o.volume_mode).or(input.volume_mode),
        };
        let eviction = overrides
            .and_then(|o| o.eviction_strategy)
            .unwrap_or(input.eviction_strategy);
        let grace = overrides
            .and_then(|o| o.termination_grace_period)
            .unwrap_or_else(|| workload.termination_grace_seconds());
        let choices = WorkloadChoices {
            storage,
            eviction,
            grace,
        };
        plan_one(&fleet, workload.as_ref(), &choices, &mut plan)?;
    }
    plan.services
        .sort_by(|a, b| a.service.metadata.name.cmp(&b.service.metadata.name));
    check_unique_names(&plan)?;
    Ok(plan)
}

/// What every object of the run shares.
struct Fleet<'a> {
    namespace: &'a str,
    image: &'a str,
    run_id: &'a str,
    /// Whether VMs carry the workload readiness probe.
    workload_probe: bool,
}

/// Where one workload's data disks live.
#[derive(Debug, Clone)]
struct DiskStorage {
    /// `None`: CDI's default class.
    class: Option<String>,
    /// `None`: the class's StorageProfile decides.
    access_mode: Option<AccessMode>,
    /// `None`: the class's StorageProfile decides (CDI picks the volume mode of the first
    /// claim property set offering the access mode).
    volume_mode: Option<VolumeMode>,
}

/// What the configuration chose for one workload's VMs.
struct WorkloadChoices {
    storage: DiskStorage,
    eviction: EvictionStrategy,
    /// Shutdown grace in seconds.
    grace: u32,
}

/// Adds one workload to `plan`: its summary, its Service, and each role's VMs sharing that
/// role's template.
fn plan_one(
    fleet: &Fleet<'_>,
    workload: &dyn Workload,
    choices: &WorkloadChoices,
    plan: &mut Plan,
) -> Result<()> {
    let (storage, eviction) = (&choices.storage, choices.eviction);
    let name = workload.name();
    let resources = workload.resources();
    let disks = workload.data_disks();
    check_workload(name, &resources, &disks)?;
    if let Some(warning) = eviction_warning(name, eviction, &disks, storage.access_mode) {
        plan.warnings.push(warning);
    }
    if let Some(warning) = grace_warning(name, choices.grace, &disks) {
        plan.warnings.push(warning);
    }
    let service = workload.service();
    let roles = workload.roles();
    plan.workloads.push(PlannedWorkload {
        name: name.to_string(),
        vm_count: roles.iter().map(|r| r.vm_count).sum(),
        cpu_cores: resources.cpu_cores,
        memory: resources.memory.to_string(),
        data_disk_size: disks.first().map(|d| d.size.to_string()),
        requires_service: service.is_some(),
        signal_params: recordable_signal_params(workload),
    });
    if let Some(spec) = service {
        plan.services.push(PlannedService {
            workload: name.to_string(),
            service: build_service(fleet.namespace, fleet.run_id, name, spec)?,
        });
    }
    let role_parts = RoleParts {
        resources: &resources,
        disks: &disks,
        storage,
        eviction: EvictionChoice {
            chosen: eviction,
            migratable: live_migratable(&disks, storage.access_mode),
        },
        grace: choices.grace,
        annotations: signal_annotations(workload),
    };
    for role_spec in roles {
        let role = role_spec.role.as_deref();
        let template = role_template(fleet, workload, role, &role_parts)?;
        plan_vms(name, role, role_spec.vm_count, &disks, &template, plan)?;
    }
    Ok(())
}

/// What every role of one workload shares.
struct RoleParts<'a> {
    resources: &'a VmResources,
    disks: &'a [DataDisk],
    storage: &'a DiskStorage,
    eviction: EvictionChoice,
    grace: u32,
    annotations: BTreeMap<String, String>,
}

/// A workload's size and disk names, checked before anything of it is planned.
fn check_workload(name: &str, resources: &VmResources, disks: &[DataDisk]) -> Result<()> {
    validate_workload_name(name)?;
    if resources.cpu_cores == 0 {
        return Err(Error::input(format!(
            "cpu-cores for workload {name:?} must be at least 1, got 0"
        )));
    }
    for disk in disks {
        if disk.name == CONTAINER_DISK || disk.name == CLOUDINIT_DISK {
            return Err(Error::input(format!(
                "data disk name {:?} of workload {name:?} is reserved; choose another name",
                disk.name
            )));
        }
        validate_dns_label(&format!("data disk name of workload {name:?}"), &disk.name)?;
    }
    Ok(())
}

/// The template the VMs of one role share: user-data rendered (and size-checked) once,
/// labels, size, disks and the readiness probe.
fn role_template(
    fleet: &Fleet<'_>,
    workload: &dyn Workload,
    role: Option<&str>,
    parts: &RoleParts<'_>,
) -> Result<Arc<RoleTemplate>> {
    let (name, run_id) = (workload.name(), fleet.run_id);
    if let Some(role) = role {
        validate_label_value(labels::ROLE, role, &format!("role of workload {name:?}"))?;
    }
    // The probe asks the guest's readiness endpoint, which the payload serves only when
    // readiness is asked to mean "the workload runs".
    let probe = if fleet.workload_probe {
        workload_probe(name, &workload.workload_units(role))?
    } else {
        None
    };
    let userdata = workload
        .userdata(role)
        .map_err(|err| with_context(err, &cloud_init_context(name, role)))?;
    check_userdata_size(&userdata, &cloud_init_context(name, role))?;
    let mut vm_labels = object_labels(&format!("virtwork-{name}"), name, run_id, role);
    if let Some(shape) = workload
        .signal_params()
        .get(crate::workloads::profile_keys::PROFILE)
    {
        vm_labels.insert(labels::LOAD_PROFILE.to_string(), shape.clone());
    }
    Ok(Arc::new(RoleTemplate {
        namespace: fleet.namespace.to_string(),
        image: fleet.image.to_string(),
        userdata: Arc::from(userdata),
        vm_labels,
        secret_labels: object_labels(&format!("virtwork-{name}"), name, run_id, None),
        cpu_cores: parts.resources.cpu_cores,
        memory: parts.resources.memory.clone(),
        disks: parts.disks.to_vec(),
        storage: parts.storage.clone(),
        readiness_probe: probe,
        eviction: parts.eviction,
        single_node: false,
        grace: parts.grace,
        annotations: parts.annotations.clone(),
    }))
}

/// Adds `count` VMs of one role, named `virtwork-<workload>-<run tag>[-<role>]-<index>`, with
/// their DataVolume names checked. The run tag keeps the VMs (and their Secrets and
/// DataVolumes) of every run in a namespace apart, so a fleet grows by running again.
fn plan_vms(
    name: &str,
    role: Option<&str>,
    count: u32,
    disks: &[DataDisk],
    template: &Arc<RoleTemplate>,
    plan: &mut Plan,
) -> Result<()> {
    plan.vms.reserve(count as usize);
    let tag = plan.run_id.name_tag();
    for index in 0..count {
        let vm_name = match role {
            Some(role) => format!("virtwork-{name}-{tag}-{role}-{index}"),
            None => format!("virtwork-{name}-{tag}-{index}"),
        };
        validate_dns_label(&format!("VM name (workload {name:?})"), &vm_name)?;
        let data_volumes: Vec<String> = disks
            .iter()
            .map(|d| format!("{}-{vm_name}", d.dv_base))
            .collect();
        for dv in &data_volumes {
            validate_dns_subdomain(&format!("DataVolume name (workload {name:?})"), dv)?;
        }
        plan.vms.push(PlannedVm {
            name: vm_name,
            workload: name.to_string(),
            role: role.map(str::to_string),
            data_volumes,
            template: Arc::clone(template),
        });
    }
    Ok(())
}

fn cloud_init_context(workload: &str, role: Option<&str>) -> String {
    match role {
        Some(role) => format!("workload {workload:?} role {role:?}"),
        None => format!("workload {workload:?}"),
    }
}

/// Prefixes an input error with what was being planned; other errors pass unchanged.
fn with_context(err: Error, context: &str) -> Error {
    match err {
        Error::Input(msg) => Error::Input(format!("generating cloud-init for {context}: {msg}")),
        other => other,
    }
}

/// The labels of a VM (with role), Secret (without) or DataVolume template.
fn object_labels(
    name_label: &str,
    component: &str,
    run_id: &str,
    role: Option<&str>,
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::from([
        (labels::NAME.to_string(), name_label.to_string()),
        (
            labels::MANAGED_BY.to_string(),
            labels::MANAGED_BY_VALUE.to_string(),
        ),
        (labels::COMPONENT.to_string(), component.to_string()),
        (labels::RUN_ID.to_string(), run_id.to_string()),
    ]);
    if let Some(role) = role {
        map.insert(labels::ROLE.to_string(), role.to_string());
    }
    map
}

fn build_service(
    namespace: &str,
    run_id: &str,
    workload: &str,
    spec: crate::workloads::ServiceSpec,
) -> Result<Service> {
    validate_dns1035_label(&format!("Service name (workload {workload:?})"), &spec.name)?;
    if spec.selector.is_empty() {
        return Err(Error::input(format!(
            "Service {:?} of workload {workload:?} has an empty selector (it would select \
             every pod in the namespace)",
            spec.name
        )));
    }
    if spec.ports.is_empty() {
        return Err(Error::input(format!(
            "Service {:?} of workload {workload:?} declares no ports",
            spec.name
        )));
    }
    for (key, value) in &spec.selector {
        validate_label_value(key, value, &format!("selector of Service {:?}", spec.name))?;
    }
    // The workload's selector (component, role) alone would also capture another run's VMs
    // and any foreign pod carrying the same component label; the VM templates carry
    // managed-by and the run id, so requiring them confines the Service to this run.
    let mut selector = spec.selector;
    selector.insert(
        labels::MANAGED_BY.to_string(),
        labels::MANAGED_BY_VALUE.to_string(),
    );
    selector.insert(labels::RUN_ID.to_string(), run_id.to_string());
    selector
        .entry(labels::COMPONENT.to_string())
        .or_insert_with(|| workload.to_string());
    let ports = spec
        .ports
        .iter()
        .map(|p| ServicePort {
            name: Some(p.name.clone()),
            port: i32::from(p.port),
            target_port: Some(IntOrString::Int(i32::from(p.port))),
            protocol: Some(p.protocol.clone()),
            ..Default::default()
        })
        .collect();
    Ok(Service {
        metadata: ObjectMeta {
            name: Some(spec.name),
            namespace: Some(namespace.to_string()),
            labels: Some(object_labels(SERVICE_NAME_LABEL, workload, run_id, None)),
            ..Default::default()
        },
        spec: Some(K8sServiceSpec {
            selector: Some(selector),
            ports: Some(ports),
            ..Default::default()
        }),
        status: None,
    })
}

struct VmInputs<'a> {
    name: &'a str,
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    image: &'a str,
    cpu_cores: u32,
    memory: &'a Quantity,
    secret_name: &'a str,
    disks: &'a [crate::workloads::DataDisk],
    storage: &'a DiskStorage,
    data_volumes: &'a [String],
    readiness_probe: &'a Option<Probe>,
    eviction_strategy: &'static str,
    grace: u32,
    annotations: &'a BTreeMap<String, String>,
}

/// How often the readiness probe runs, how long one run may take and how many failures in
/// a row make a ready VM unready. Generous: the guests are busy by design (a saturated CPU
/// slows the guest agent), and a unit between restarts should not flap the condition.
pub const PROBE_PERIOD_SECONDS: i32 = 15;
pub const PROBE_TIMEOUT_SECONDS: i32 = 10;
pub const PROBE_FAILURE_THRESHOLD: i32 = 3;

/// The readiness probe of a VM whose workload runs as `units`: an `httpGet` to the guest's
/// readiness endpoint ([`crate::workloads::with_ready_endpoint`]), which answers 200 exactly
/// while every unit is active. KubeVirt copies an HTTP probe onto the virt-launcher pod,
/// where the kubelet runs it against the pod address that masquerade binding forwards to the
/// guest; no guest agent is involved, so neither its RPC filter nor SELinux's confinement of
/// what it runs (`virt_qemu_ga_t`, refused unit status by systemd) can keep a running
/// workload unready. `None` for a workload without units.
pub fn workload_probe(workload: &str, units: &[String]) -> Result<Option<Probe>> {
    if units.is_empty() {
        return Ok(None);
    }
    for unit in units {
        scripts::check_ready_unit(workload, unit)?;
    }
    Ok(Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some(scripts::READY_PATH.to_string()),
            port: IntOrString::Int(i32::from(scripts::READY_PORT)),
            ..Default::default()
        }),
        period_seconds: Some(PROBE_PERIOD_SECONDS),
        timeout_seconds: Some(PROBE_TIMEOUT_SECONDS),
        failure_threshold: Some(PROBE_FAILURE_THRESHOLD),
        success_threshold: Some(1),
        initial_delay_seconds: None,
        ..Default::default()
    }))
}

/// Whether KubeVirt can live-migrate a VM with these data disks, as far as the plan can
/// tell: its containerdisk and cloud-init disk are copied during migration, but a volume must
/// be shared (ReadWriteMany) for the target node to use it (KubeVirt sets
/// LiveMigratable=False otherwise). `None`: the access mode is left to the class's
/// StorageProfile, so only the cluster knows.
pub fn live_migratable(disks: &[DataDisk], access_mode: Option<AccessMode>) -> Option<bool> {
    if disks.is_empty() {
        return Some(true);
    }
    access_mode.map(|mode| mode == AccessMode::ReadWriteMany)
}

/// What a VM's eviction strategy is decided from: the strategy chosen and whether the VM can
/// migrate. The cluster's topology (learnt by preflight) completes the decision for `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionChoice {
    pub chosen: EvictionStrategy,
    /// See [`live_migratable`].
    pub migratable: Option<bool>,
}

impl EvictionChoice {
    /// KubeVirt's `evictionStrategy` for the VM. `auto` never lets a VM block a node drain:
    /// on a cluster with one schedulable node (Single Node OpenShift) there is nowhere to
    /// migrate to, so every VM gets `None` (the eviction is granted and the VM starts again
    /// when the node returns; a migration would leave its target Pending, answer every
    /// eviction 429 and hang the drain or upgrade); with several, a VM that can migrate gets
    /// `LiveMigrate`, one that cannot `None` (shut down, restarted elsewhere by run strategy
    /// `Always`), and one whose storage the cluster chooses `LiveMigrateIfPossible`, which
    /// follows KubeVirt's live `LiveMigratable` condition and so is right whichever mode the
    /// StorageProfile gives. Setting it on every VM also overrides the cluster-wide default
    /// (HCO's topology-aware one included), under which KubeVirt could deny evictions for as
    /// long as the drain retries. Without topology (`--dry-run`, nodes not listable): the
    /// several-node choice.
    pub fn kubevirt_name(self, single_node: bool) -> &'static str {
        match (self.chosen.kubevirt_name(), self.migratable) {
            (Some(name), _) => name,
            (None, _) if single_node => "None",
            (None, Some(true)) => "LiveMigrate",
            (None, Some(false)) => "None",
            (None, None) => "LiveMigrateIfPossible",
        }
    }
}

/// The shortest shutdown grace that lets a guest writing to a data disk stop its writers
/// and flush: below it a stop, restart or eviction can cut a write short.
pub const MIN_DATA_DISK_GRACE_SECS: u32 = 60;

/// The warning for a data-disk workload given less than [`MIN_DATA_DISK_GRACE_SECS`] to
/// shut down (only an override can: the default for such workloads is longer).
fn grace_warning(workload: &str, grace: u32, disks: &[DataDisk]) -> Option<String> {
    (!disks.is_empty() && grace < MIN_DATA_DISK_GRACE_SECS).then(|| {
        format!(
            "termination-grace-period {grace} s for workload {workload:?} \
             (workloads.{workload}.termination-grace-period): its VMs write to data disks, and \
             KubeVirt powers a guest off once the grace period ends, so a stop, restart or \
             eviction can cut a write short; give it at least {MIN_DATA_DISK_GRACE_SECS} s \
             (the default is {})",
            crate::workloads::DATA_DISK_GRACE_SECS
        )
    })
}

/// The warning for a strategy chosen by hand that makes the workload's VMs block drains.
fn eviction_warning(
    workload: &str,
    chosen: EvictionStrategy,
    disks: &[DataDisk],
    access_mode: Option<AccessMode>,
) -> Option<String> {
    let mode = access_mode?;
    (chosen == EvictionStrategy::LiveMigrate && live_migratable(disks, access_mode) == Some(false))
        .then(|| {
            format!(
                "eviction-strategy live-migrate for workload {workload:?}: its {mode} data \
                 disks cannot live-migrate, so KubeVirt denies the eviction of its VMs and a node \
                 drain waits for them forever; use auto or none, or --access-mode ReadWriteMany"
            )
        })
}

/// The workload's signal params as every record of them holds them (the VMs' annotation and
/// the audit database): one value, so the two cannot differ at run time.
fn recordable_signal_params(
    workload: &dyn Workload,
) -> crate::workloads::signal_params::SignalParams {
    let params = workload.signal_params();
    crate::workloads::signal_params::SignalParams::recordable(
        workload.name(),
        params.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )
}

/// What `virtwork verify` reads back from each VM: the params its expected signals depend
/// on (JSON) and, for a catalog entry, the digest of its signals, so verify can tell whether
/// the local entry is the one the run used (none when there is nothing). The queries
/// themselves stay off the cluster: anyone who may patch a VM could rewrite them.
fn signal_annotations(workload: &dyn Workload) -> BTreeMap<String, String> {
    use crate::signals::contract::{
        SIGNAL_PARAMS_ANNOTATION, SIGNALS_DIGEST_ANNOTATION, signals_digest,
    };
    let mut out = BTreeMap::new();
    let params = recordable_signal_params(workload);
    if !params.is_empty() {
        out.insert(SIGNAL_PARAMS_ANNOTATION.to_string(), params.to_json());
    }
    let custom = workload.custom_signals();
    if !custom.is_empty() {
        out.insert(
            SIGNALS_DIGEST_ANNOTATION.to_string(),
            signals_digest(&custom),
        );
    }
    out
}

/// The VirtualMachine the Go tool created (containerdisk root, cloud-init NoCloud, masquerade
/// pod network, optional data disks), plus run labels on the DataVolume templates.
fn build_vm(input: VmInputs<'_>) -> VirtualMachine {
    let (mut disks, mut volumes) = boot_disks(&input);
    let mut templates = Vec::with_capacity(input.disks.len());
    for (disk, dv_name) in input.disks.iter().zip(input.data_volumes) {
        disks.push(Disk {
            name: disk.name.clone(),
            disk: virtio(),
            serial: Some(disk.serial.clone()),
        });
        volumes.push(Volume {
            name: disk.name.clone(),
            data_volume: Some(DataVolumeVolumeSource {
                name: dv_name.clone(),
            }),
            ..Default::default()
        });
        templates.push(data_volume_template(&input, disk, dv_name));
    }
    VirtualMachine {
        metadata: ObjectMeta {
            name: Some(input.name.to_string()),
            namespace: Some(input.namespace.to_string()),
            labels: Some(input.labels.clone()),
            annotations: (!input.annotations.is_empty()).then(|| input.annotations.clone()),
            ..Default::default()
        },
        spec: VirtualMachineSpec {
            run_strategy: Some(RUN_STRATEGY.to_string()),
            template: VirtualMachineInstanceTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(input.labels.clone()),
                    ..Default::default()
                }),
                spec: Some(VirtualMachineInstanceSpec {
                    domain: DomainSpec {
                        cpu: Some(Cpu {
                            cores: Some(input.cpu_cores),
                        }),
                        devices: Devices {
                            disks,
                            interfaces: vec![Interface {
                                name: NETWORK_NAME.to_string(),
                                masquerade: Some(InterfaceMasquerade {}),
                            }],
                        },
                        resources: Some(ResourceRequirements {
                            requests: BTreeMap::from([(
                                "memory".to_string(),
                                k8s_quantity(input.memory),
                            )]),
                            ..Default::default()
                        }),
                    },
                    readiness_probe: input.readiness_probe.clone(),
                    eviction_strategy: Some(input.eviction_strategy.to_string()),
                    termination_grace_period_seconds: Some(i64::from(input.grace)),
                    networks: vec![Network {
                        name: NETWORK_NAME.to_string(),
                        pod: Some(PodNetwork {}),
                    }],
                    volumes,
                }),
            },
            data_volume_templates: templates,
        },
        status: None,
    }
}

/// A disk on the virtio bus.
fn virtio() -> Option<DiskTarget> {
    Some(DiskTarget {
        bus: Some(DISK_BUS.to_string()),
    })
}

/// The two disks every VM boots with: the container disk (the image) and the cloud-init
/// disk (its Secret).
fn boot_disks(input: &VmInputs<'_>) -> (Vec<Disk>, Vec<Volume>) {
    let disks = vec![
        Disk {
            name: CONTAINER_DISK.to_string(),
            disk: virtio(),
            serial: None,
        },
        Disk {
            name: CLOUDINIT_DISK.to_string(),
            disk: virtio(),
            serial: None,
        },
    ];
    let volumes = vec![
        Volume {
            name: CONTAINER_DISK.to_string(),
            container_disk: Some(ContainerDiskSource {
                image: input.image.to_string(),
            }),
            ..Default::default()
        },
        Volume {
            name: CLOUDINIT_DISK.to_string(),
            cloud_init_no_cloud: Some(CloudInitNoCloudSource {
                secret_ref: Some(LocalObjectReference {
                    name: input.secret_name.to_string(),
                }),
            }),
            ..Default::default()
        },
    ];
    (disks, volumes)
}

/// The blank DataVolume CDI creates for one data disk of the VM.
fn data_volume_template(
    input: &VmInputs<'_>,
    disk: &DataDisk,
    dv_name: &str,
) -> DataVolumeTemplateSpec {
    DataVolumeTemplateSpec {
        metadata: ObjectMeta {
            name: Some(dv_name.to_string()),
            // The run's labels, so cleanup finds DataVolumes/PVCs by label even when
            // garbage collection of the owner reference lags.
            labels: Some(input.labels.clone()),
            ..Default::default()
        },
        spec: DataVolumeSpec {
            source: Some(DataVolumeSource {
                blank: Some(DataVolumeBlankImage {}),
            }),
            storage: Some(StorageSpec {
                access_modes: input
                    .storage
                    .access_mode
                    .map(|mode| vec![mode.as_str().to_string()])
                    .unwrap_or_default(),
                volume_mode: input
                    .storage
                    .volume_mode
                    .map(|mode| mode.as_str().to_string()),
                storage_class_name: input.storage.class.clone(),
                resources: Some(StorageResources {
                    requests: BTreeMap::from([("storage".to_string(), k8s_quantity(&disk.size))]),
                }),
            }),
        },
    }
}

/// Every object name is unique within its kind; a clash means two workloads would fight
/// over one object (e.g. a catalog entry `network-server` next to the `network` workload).
fn check_unique_names(plan: &Plan) -> Result<()> {
    let mut vms: BTreeMap<&str, &str> = BTreeMap::new();
    let mut dvs: BTreeMap<&str, &str> = BTreeMap::new();
    for vm in &plan.vms {
        if let Some(other) = vms.insert(&vm.name, &vm.workload) {
            return Err(name_clash("VM", &vm.name, other, &vm.workload));
        }
        for dv in &vm.data_volumes {
            if let Some(other) = dvs.insert(dv, &vm.workload) {
                return Err(name_clash("DataVolume", dv, other, &vm.workload));
            }
        }
    }
    // Secret names derive 1:1 from unique VM names; Services are checked here.
    let mut services: BTreeMap<&str, &str> = BTreeMap::new();
    for svc in &plan.services {
        let name = svc.service.metadata.name.as_deref().unwrap_or_default();
        if let Some(other) = services.insert(name, &svc.workload) {
            return Err(name_clash("Service", name, other, &svc.workload));
        }
    }
    Ok(())
}

fn name_clash(kind: &str, name: &str, first: &str, second: &str) -> Error {
    if first == second {
        Error::input(format!(
            "workload {first:?} would create the {kind} {name:?} twice"
        ))
    } else {
        Error::input(format!(
            "workloads {first:?} and {second:?} would both create the {kind} {name:?}; run \
             them in separate namespaces or rename the catalog entry"
        ))
    }
}

/// A workload name becomes the component label, part of `virtwork-<name>` (a label value)
/// and of every VM name, so it must be a DNS-1123 label short enough for all of them.
fn validate_workload_name(name: &str) -> Result<()> {
    validate_dns_label("workload name", name)?;
    let name_label = format!("virtwork-{name}");
    if name_label.len() > MAX_LABEL_LEN {
        return Err(Error::input(format!(
            "workload name {name:?} is too long: the label {}={name_label:?} would be {} \
             characters, the limit is {MAX_LABEL_LEN}",
            labels::NAME,
            name_label.len()
        )));
    }
    Ok(())
}

/// DNS-1123 label: lowercase alphanumerics and '-', starting and ending alphanumeric, ≤ 63.
fn validate_dns_label(what: &str, value: &str) -> Result<()> {
    if DnsLabel::is_valid(value) {
        return Ok(());
    }
    Err(Error::input(if value.len() > MAX_LABEL_LEN {
        format!(
            "{what} {value:?} is {} characters; Kubernetes allows at most {MAX_LABEL_LEN} — \
             use a shorter workload, role or namespace name",
            value.len()
        )
    } else {
        format!(
            "{what} {value:?} is not a valid DNS-1123 label (lowercase letters, digits and '-', \
             starting and ending with a letter or digit, e.g. \"my-workload\")"
        )
    }))
}

/// DNS-1035 label (Service names): a DNS-1123 label that starts with a letter.
fn validate_dns1035_label(what: &str, value: &str) -> Result<()> {
    validate_dns_label(what, value)?;
    if !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(Error::input(format!(
            "{what} {value:?} must start with a lowercase letter"
        )));
    }
    Ok(())
}

/// DNS-1123 subdomain (Kubernetes' rule for DataVolume and PVC names): at most 253
/// characters; dot-separated parts of lowercase letters, digits and '-', each starting and
/// ending with a letter or digit, of any length.
fn validate_dns_subdomain(what: &str, value: &str) -> Result<()> {
    if is_dns_subdomain(value) {
        return Ok(());
    }
    Err(Error::input(if value.len() > MAX_SUBDOMAIN_LEN {
        format!(
            "{what} {value:?} is {} characters; Kubernetes allows at most {MAX_SUBDOMAIN_LEN} \
             — use a shorter workload, role or storage name",
            value.len()
        )
    } else {
        format!(
            "{what} {value:?} is not a valid DNS-1123 subdomain (lowercase letters, digits, '-' \
             and '.', each dot-separated part starting and ending with a letter or digit)"
        )
    }))
}

/// Label value: empty, or ≤ 63 of alphanumerics, '-', '_', '.', starting and ending
/// alphanumeric.
fn validate_label_value(key: &str, value: &str, what: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let valid = bytes.is_empty()
        || (bytes.len() <= MAX_LABEL_LEN
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    Err(Error::input(format!(
        "{what} {value:?} cannot be the value of label {key}: at most {MAX_LABEL_LEN} letters, \
         digits, '-', '_' or '.', starting and ending with a letter or digit"
    )))
}

/// The API type of a quantity; the one conversion.
fn k8s_quantity(quantity: &Quantity) -> K8sQuantity {
    K8sQuantity(quantity.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(size: &str) -> DataDisk {
        DataDisk {
            name: "datadisk".into(),
            dv_base: "data".into(),
            serial: "s".into(),
            size: size.parse().unwrap(),
        }
    }

    #[test]
    fn a_data_disk_workload_under_a_minute_of_grace_is_warned_about() {
        let disks = [disk("1Gi")];
        let warning = grace_warning("database", 20, &disks).unwrap();
        assert!(
            warning.starts_with(
                "termination-grace-period 20 s for workload \"database\" \
                 (workloads.database.termination-grace-period)"
            ) && warning.ends_with("give it at least 60 s (the default is 120)"),
            "{warning}"
        );
        assert_eq!(grace_warning("database", 60, &disks), None);
        assert_eq!(grace_warning("cpu", 0, &[]), None);
    }

    #[test]
    fn auto_eviction_follows_topology_and_what_the_plan_knows_of_the_storage() {
        use AccessMode::*;
        use EvictionStrategy as E;
        let rwo_disk = [disk("1Gi")];
        let name = |chosen, disks: &[DataDisk], mode, single| {
            EvictionChoice {
                chosen,
                migratable: live_migratable(disks, mode),
            }
            .kubevirt_name(single)
        };
        // Several nodes: migrate what can, evict what cannot, follow KubeVirt where the
        // StorageProfile decides.
        assert_eq!(name(E::Auto, &[], None, false), "LiveMigrate");
        assert_eq!(name(E::Auto, &rwo_disk, Some(ReadWriteOnce), false), "None");
        assert_eq!(
            name(E::Auto, &rwo_disk, Some(ReadWriteOncePod), false),
            "None"
        );
        assert_eq!(
            name(E::Auto, &rwo_disk, Some(ReadWriteMany), false),
            "LiveMigrate"
        );
        assert_eq!(
            name(E::Auto, &rwo_disk, None, false),
            "LiveMigrateIfPossible"
        );
        // One node: nowhere to migrate to.
        for mode in [None, Some(ReadWriteMany), Some(ReadWriteOnce)] {
            assert_eq!(name(E::Auto, &[], mode, true), "None");
            assert_eq!(name(E::Auto, &rwo_disk, mode, true), "None");
        }
        // A strategy chosen by hand is kept whatever the topology.
        assert_eq!(name(E::None, &[], Some(ReadWriteMany), false), "None");
        assert_eq!(name(E::LiveMigrate, &[], None, true), "LiveMigrate");
        assert_eq!(
            name(
                E::LiveMigrateIfPossible,
                &rwo_disk,
                Some(ReadWriteOnce),
                false
            ),
            "LiveMigrateIfPossible"
        );
        let warn = |disks: &[DataDisk], mode| eviction_warning("w", E::LiveMigrate, disks, mode);
        assert!(warn(&rwo_disk, Some(ReadWriteOnce)).is_some());
        assert!(warn(&rwo_disk, Some(ReadWriteMany)).is_none());
        assert!(warn(&rwo_disk, None).is_none());
        assert!(warn(&[], Some(ReadWriteOnce)).is_none());
    }

    #[test]
    fn data_volume_names_follow_the_subdomain_rule_not_the_label_rule() {
        let long = format!("{}-virtwork-catalog-entry-0", "s".repeat(60));
        assert!(long.len() > MAX_LABEL_LEN);
        assert!(validate_dns_subdomain("DataVolume name", &long).is_ok());
        assert!(validate_dns_subdomain("DataVolume name", "a.b-c").is_ok());
        let err = validate_dns_subdomain("DataVolume name", &"a".repeat(254))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("254 characters; Kubernetes allows at most 253"),
            "{err}"
        );
        for bad in ["a..b", "-a", "a-", "A", "a_b"] {
            let err = validate_dns_subdomain("DataVolume name", bad).unwrap_err();
            assert!(
                err.to_string().contains("not a valid DNS-1123 subdomain"),
                "{bad}"
            );
        }
    }

    #[test]
    fn label_values() {
        assert!(validate_label_value("k", "", "x").is_ok());
        assert!(validate_label_value("k", "a.b_c-d", "x").is_ok());
        assert!(validate_label_value("k", "a b", "x").is_err());
        assert!(validate_label_value("k", &"a".repeat(64), "x").is_err());
    }
}
