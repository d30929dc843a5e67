//! The Workload contract, the registry of workload factories, and the built-in workloads.
//!
//! A workload is a pure data producer: given its effective settings it says how many VMs
//! it needs in which roles, what cloud-init user-data each role boots with, which data
//! disks and which Service it needs. It performs no I/O and knows nothing of the cluster;
//! plan.rs turns its answers into Kubernetes objects.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::Result;
use crate::model::{DnsLabel, Quantity, SshAccess};
pub use family::{GuestFamily, GuestOs};

/// Settings every factory receives, shared by all workloads of a run.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    pub namespace: DnsLabel,
    pub data_disk_size: Quantity,
    pub ssh: SshAccess,
    pub catalog_dir: PathBuf,
    /// Names of every workload planned in this run (so a workload can aim at another's
    /// Service, e.g. chaos-network's probe at the network server).
    pub planned_workloads: Vec<String>,
    /// The VMs carry the workload readiness probe (an `httpGet` to the guest): payloads
    /// serve the readiness endpoint it asks ([`with_ready_endpoint`]).
    pub ready_endpoint: bool,
    /// The run's name tag ([`crate::model::RunId::name_tag`]), part of the built-in Services'
    /// names so the Services of two runs in one namespace never share a name; empty: none
    /// (`validate`, which renders payloads outside any run).
    pub run_tag: String,
}

impl WorkloadOptions {
    /// The name of this run's Service `base`: `<base>-<run tag>`.
    pub fn service_name(&self, base: &str) -> String {
        if self.run_tag.is_empty() {
            base.to_string()
        } else {
            format!("{base}-{}", self.run_tag)
        }
    }

    /// Where clients reach this run's Service `base`:
    /// `<base>-<run tag>.<namespace>.svc.cluster.local`.
    pub fn service_host(&self, base: &str) -> String {
        format!(
            "{}.{}.svc.cluster.local",
            self.service_name(base),
            self.namespace
        )
    }
}

/// The effective settings of one workload (global values refined by its YAML section),
/// with params already validated against the workload's schema.
#[derive(Debug, Clone)]
pub struct WorkloadSettings {
    pub vm_count: u32,
    pub cpu_cores: u32,
    pub memory: Quantity,
    /// User-given param values (validated); absent keys take the schema default.
    pub params: BTreeMap<String, String>,
    /// The guest OS family the payload is rendered for.
    pub guest_family: GuestFamily,
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
    pub memory: Quantity,
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
    pub size: Quantity,
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
    /// Pod selector; always includes `app.kubernetes.io/component`, so a Service never
    /// selects VMs of another workload.
    pub selector: BTreeMap<String, String>,
    pub ports: Vec<ServicePortSpec>,
}

/// Shutdown grace of a VM without data disks: KubeVirt's own default, written out so the
/// VM says what it gets.
pub const GRACE_SECS: u32 = 30;
/// Shutdown grace of a VM with data disks: the guest's systemd waits up to its
/// `DefaultTimeoutStopSec` (90 s) for a unit to stop (a database checkpointing, fio's I/O in
/// flight) before it unmounts the data disk; 120 s lets that whole stop finish.
pub const DATA_DISK_GRACE_SECS: u32 = 120;

/// The contract every workload (built-in or catalog) fulfils. Object-safe.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// Workload name, also the `app.kubernetes.io/component` label value.
    fn name(&self) -> &str;
    /// Roles in creation order with their VM counts.
    fn roles(&self) -> Vec<RoleSpec>;
    /// The complete `#cloud-config` user-data for VMs of `role` (`None` for single-role).
    fn userdata(&self, role: Option<&str>) -> Result<String>;
    /// The systemd units that must all be active for the workload of `role` to be running:
    /// what the VM's readiness probe checks. Empty for an unknown role.
    fn workload_units(&self, role: Option<&str>) -> Vec<String>;
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
    /// Seconds a VM of this workload gets to shut down (ACPI power button) at a stop,
    /// restart or eviction before KubeVirt destroys it: [`DATA_DISK_GRACE_SECS`] with data
    /// disks, whose writers (PostgreSQL, fio, chaos-disk) must stop and the file system be
    /// unmounted, else [`GRACE_SECS`].
    fn termination_grace_seconds(&self) -> u32 {
        if self.data_disks().is_empty() {
            GRACE_SECS
        } else {
            DATA_DISK_GRACE_SECS
        }
    }
    /// Total VMs over all roles.
    fn vm_count(&self) -> u32 {
        self.roles().iter().map(|r| r.vm_count).sum()
    }
    /// The params its expected signals depend on, recorded on each VM for `virtwork verify`
    /// (only the keys the signal contract reads).
    fn signal_params(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }
    /// Signals a catalog entry declares in its manifest.
    fn custom_signals(&self) -> Vec<crate::signals::contract::CustomSignal> {
        Vec::new()
    }
}

pub mod catalog;
pub mod chaos_disk;
pub mod chaos_network;
pub mod chaos_process;
pub mod cpu;
pub mod database;
pub mod disk;
pub mod family;
pub mod memory;
pub mod network;
pub mod params;
pub mod profile_driver;
pub mod profile_keys;
pub mod scripts;
pub mod signal_params;
pub mod tps;

use std::path::Path;

use crate::cloudinit::{CloudConfig, UserAccount};
use crate::error::Error;
use params::{ParamSchema, ResolvedParams};

/// Role name of the serving side of a client/server workload.
pub const ROLE_SERVER: &str = "server";
/// Role name of the load-generating side of a client/server workload.
pub const ROLE_CLIENT: &str = "client";

/// Builds a workload from its effective settings. Params are already validated.
pub type Factory =
    Box<dyn Fn(&WorkloadSettings, &WorkloadOptions) -> Result<Box<dyn Workload>> + Send + Sync>;

/// Where a registered workload comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadSource {
    BuiltIn,
    /// A no-code catalog entry directory.
    Catalog(PathBuf),
}

/// A registered workload: its param schema and the factory that builds it.
pub struct WorkloadDefinition {
    pub name: String,
    pub schema: ParamSchema,
    pub source: WorkloadSource,
    factory: Factory,
}

impl std::fmt::Debug for WorkloadDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadDefinition")
            .field("name", &self.name)
            .field("schema", &self.schema)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl WorkloadDefinition {
    /// A definition from its parts.
    pub fn new(name: &str, schema: ParamSchema, source: WorkloadSource, factory: Factory) -> Self {
        WorkloadDefinition {
            name: name.to_string(),
            schema,
            source,
            factory,
        }
    }

    /// Validates `settings.params` against the schema, then builds the workload (which
    /// renders its user-data once per role).
    pub fn create(
        &self,
        settings: &WorkloadSettings,
        options: &WorkloadOptions,
    ) -> Result<Box<dyn Workload>> {
        params::validate_params(&self.schema, &settings.params)?;
        (self.factory)(settings, options)
    }
}

/// The workloads a run can plan: the nine built-ins plus any loaded catalog entries.
#[derive(Debug, Default)]
pub struct Registry {
    definitions: BTreeMap<String, WorkloadDefinition>,
}

/// Names of the built-in workloads, sorted (the `--workloads` default).
pub const BUILTIN_NAMES: [&str; 9] = [
    "chaos-disk",
    "chaos-network",
    "chaos-process",
    "cpu",
    "database",
    "disk",
    "memory",
    "network",
    "tps",
];

impl Registry {
    /// The nine built-in workloads.
    pub fn builtin() -> Self {
        let mut registry = Registry::default();
        let builtins: [(&str, ParamSchema, Factory); 9] = [
            (cpu::NAME, cpu::schema(), Box::new(cpu::build)),
            (memory::NAME, memory::schema(), Box::new(memory::build)),
            (disk::NAME, disk::schema(), Box::new(disk::build)),
            (
                database::NAME,
                database::schema(),
                Box::new(database::build),
            ),
            (network::NAME, network::schema(), Box::new(network::build)),
            (tps::NAME, tps::schema(), Box::new(tps::build)),
            (
                chaos_disk::NAME,
                chaos_disk::schema(),
                Box::new(chaos_disk::build),
            ),
            (
                chaos_network::NAME,
                chaos_network::schema(),
                Box::new(chaos_network::build),
            ),
            (
                chaos_process::NAME,
                chaos_process::schema(),
                Box::new(chaos_process::build),
            ),
        ];
        for (name, schema, factory) in builtins {
            registry.insert(WorkloadDefinition::new(
                name,
                schema,
                WorkloadSource::BuiltIn,
                factory,
            ));
        }
        registry
    }

    /// The built-ins plus the catalog `entries` (in order) loaded from `catalog_dir`.
    /// A name listed twice, or naming a built-in, is an input error.
    pub fn with_catalog(catalog_dir: &Path, entries: &[String]) -> Result<Self> {
        let mut registry = Registry::builtin();
        for (i, entry) in entries.iter().enumerate() {
            if entries[..i].contains(entry) {
                return Err(Error::input(format!(
                    "catalog entry {entry:?} is listed more than once in --from-catalog; list each entry once"
                )));
            }
            registry.add_catalog_entry(catalog_dir, entry)?;
        }
        Ok(registry)
    }

    /// Loads catalog entry `name` from `catalog_dir` and registers it.
    pub fn add_catalog_entry(&mut self, catalog_dir: &Path, name: &str) -> Result<()> {
        if let Some(existing) = self.definitions.get(name) {
            return Err(Error::input(match existing.source {
                WorkloadSource::BuiltIn => format!(
                    "catalog entry {name:?}: catalog entry conflicts with built-in workload name; rename the entry directory"
                ),
                WorkloadSource::Catalog(_) => {
                    format!("catalog entry {name:?} is already loaded; list each entry once")
                }
            }));
        }
        let entry = catalog::CatalogEntry::load(catalog_dir, name)?;
        self.insert(entry.into_definition()?);
        Ok(())
    }

    fn insert(&mut self, definition: WorkloadDefinition) {
        self.definitions.insert(definition.name.clone(), definition);
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.definitions.keys().map(String::as_str).collect()
    }

    /// The definition of `name`; unknown names get the reference's message.
    pub fn get(&self, name: &str) -> Result<&WorkloadDefinition> {
        self.definitions.get(name).ok_or_else(|| {
            Error::input(format!(
                "workload {name:?} not found; available: {}; workload not found",
                self.names().join(", ")
            ))
        })
    }

    /// The param schema of `name`.
    pub fn schema(&self, name: &str) -> Result<&ParamSchema> {
        Ok(&self.get(name)?.schema)
    }

    /// Validates params and builds workload `name`.
    pub fn create(
        &self,
        name: &str,
        settings: &WorkloadSettings,
        options: &WorkloadOptions,
    ) -> Result<Box<dyn Workload>> {
        self.get(name)?.create(settings, options)
    }
}

/// Checks `--workloads` names against the built-ins (the message lists the available names,
/// with a did-you-mean hint per unknown name). An empty list passes: the planner refuses a run with
/// nothing to plan.
pub fn check_builtin_names(names: &[String]) -> Result<()> {
    let available = BUILTIN_NAMES.join(", ");
    let unknown: Vec<String> = names
        .iter()
        .filter(|n| !BUILTIN_NAMES.contains(&n.as_str()))
        .map(|n| match crate::model::suggest(n, &BUILTIN_NAMES) {
            Some(s) => format!("{n:?} (did you mean {s:?}?)"),
            None => format!("{n:?}"),
        })
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::input(format!(
            "unknown workload(s): {}; available: {available}; workload not found",
            unknown.join(", ")
        )))
    }
}

/// A workload whose user-data was rendered once per role at construction; every built-in
/// and catalog workload is one of these. Cheap to query for any number of VMs.
#[derive(Debug, Clone)]
pub struct RenderedWorkload {
    pub name: String,
    /// Roles in creation order with their rendered user-data and workload units.
    pub roles: Vec<RenderedRole>,
    pub resources: VmResources,
    pub data_disks: Vec<DataDisk>,
    pub service: Option<ServiceSpec>,
    /// See [`Workload::signal_params`].
    pub signal_params: BTreeMap<String, String>,
    /// See [`Workload::custom_signals`].
    pub custom_signals: Vec<crate::signals::contract::CustomSignal>,
}

/// One role of a [`RenderedWorkload`].
#[derive(Debug, Clone)]
pub struct RenderedRole {
    pub spec: RoleSpec,
    pub userdata: String,
    /// Units that must be active (see [`Workload::workload_units`]).
    pub units: Vec<String>,
}

impl RenderedWorkload {
    fn role(&self, role: Option<&str>) -> Option<&RenderedRole> {
        match role {
            // The workload's default user-data is its first role's (the reference's
            // CloudInitUserdata of a multi-role workload is the server's).
            None => self.roles.first(),
            Some(r) => self
                .roles
                .iter()
                .find(|x| x.spec.role.as_deref() == Some(r)),
        }
    }
}

impl Workload for RenderedWorkload {
    fn name(&self) -> &str {
        &self.name
    }

    fn roles(&self) -> Vec<RoleSpec> {
        self.roles.iter().map(|r| r.spec.clone()).collect()
    }

    fn userdata(&self, role: Option<&str>) -> Result<String> {
        match self.role(role) {
            Some(found) => Ok(found.userdata.clone()),
            None => {
                let expected: Vec<String> = self
                    .roles
                    .iter()
                    .filter_map(|r| r.spec.role.as_ref().map(|r| format!("'{r}'")))
                    .collect();
                Err(Error::input(format!(
                    "unknown {} workload role: {:?}; expected {}",
                    self.name,
                    role.unwrap_or_default(),
                    if expected.is_empty() {
                        "no role (single-role workload)".to_string()
                    } else {
                        expected.join(" or ")
                    }
                )))
            }
        }
    }

    fn workload_units(&self, role: Option<&str>) -> Vec<String> {
        self.role(role).map(|r| r.units.clone()).unwrap_or_default()
    }

    fn resources(&self) -> VmResources {
        self.resources.clone()
    }

    fn data_disks(&self) -> Vec<DataDisk> {
        self.data_disks.clone()
    }

    fn service(&self) -> Option<ServiceSpec> {
        self.service.clone()
    }

    fn signal_params(&self) -> BTreeMap<String, String> {
        self.signal_params.clone()
    }

    fn custom_signals(&self) -> Vec<crate::signals::contract::CustomSignal> {
        self.custom_signals.clone()
    }
}

/// What every built-in needs while building: resolved params, the SSH account (password
/// hashed once per workload), the effective VM count and the guest family.
pub(crate) struct BuildContext {
    pub name: &'static str,
    pub params: ResolvedParams,
    pub user: Option<UserAccount>,
    pub vm_count: u32,
    pub resources: VmResources,
    pub family: GuestFamily,
    /// See [`WorkloadOptions::ready_endpoint`].
    pub ready_endpoint: bool,
}

/// The cloud-config of one role plus the units its readiness probe checks.
pub(crate) struct RolePayload {
    pub config: CloudConfig,
    pub units: Vec<String>,
}

impl RolePayload {
    pub(crate) fn new(config: CloudConfig, units: &[&str]) -> Self {
        RolePayload {
            config,
            units: units.iter().map(|u| u.to_string()).collect(),
        }
    }
}

/// Adds what every payload needs whatever the workload: the QEMU guest agent, installed and
/// running first (KubeVirt's AgentConnected condition and guest information depend on it).
/// Readiness never depends on what the agent may run: see [`with_ready_endpoint`].
pub(crate) fn with_guest_agent(mut config: CloudConfig, family: GuestFamily) -> CloudConfig {
    let agent = family::base_profile(family);
    config
        .packages
        .insert(0, agent.guest_agent_package.to_string());
    config
        .runcmd
        .insert(0, scripts::enable_now(agent.guest_agent_unit));
    config
}

/// Adds the readiness endpoint the workload readiness probe asks: a socket-activated
/// responder on [`scripts::READY_PORT`] answering 200 exactly while every one of `units` is
/// active. Its socket is enabled by the first `runcmd` lines, so it answers 503 from before
/// the workload starts; until then the connection is refused, which fails the probe too.
/// Nothing for a payload without units (its VMs carry no probe).
pub(crate) fn with_ready_endpoint(
    mut config: CloudConfig,
    workload: &str,
    units: &[String],
) -> Result<CloudConfig> {
    if units.is_empty() {
        return Ok(config);
    }
    for unit in units {
        scripts::check_ready_unit(workload, unit)?;
    }
    config
        .write_files
        .extend(scripts::ready_endpoint_files(units));
    config.runcmd.splice(
        0..0,
        [
            scripts::daemon_reload(),
            scripts::enable_now(scripts::READY_SOCKET),
        ],
    );
    Ok(config)
}

impl BuildContext {
    /// The resolved params the signal contract reads.
    fn signal_params(&self) -> BTreeMap<String, String> {
        use crate::signals::contract::{profiled_signal_name, signal_params};
        let mut recorded = signal_params(self.name, self.params.iter());
        // A profiled VM records its whole profile for verify; a steady one nothing of it, so
        // its annotation stays as it was.
        let profiled = profiled_signal_name(self.name).is_some()
            && self.params.str(profile_keys::PROFILE) != "steady";
        if profiled {
            recorded.extend(
                self.params
                    .iter()
                    .filter(|(k, _)| profile_driver::RECORDED_KEYS.contains(k))
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            );
        }
        recorded
    }

    pub(crate) fn new(
        name: &'static str,
        schema: &ParamSchema,
        settings: &WorkloadSettings,
        options: &WorkloadOptions,
    ) -> Result<Self> {
        Ok(BuildContext {
            name,
            params: schema.resolve(&settings.params)?,
            user: UserAccount::from_ssh(&options.ssh)?,
            vm_count: settings.vm_count.max(1),
            ready_endpoint: options.ready_endpoint,
            resources: VmResources {
                cpu_cores: settings.cpu_cores,
                memory: settings.memory.clone(),
            },
            family: settings.guest_family,
        })
    }

    /// Renders `payload` (with the guest agent and the SSH account added) for `role`.
    fn render(&self, payload: RolePayload, role: Option<&str>) -> Result<(String, Vec<String>)> {
        let mut config = with_guest_agent(payload.config, self.family);
        if self.ready_endpoint {
            config = with_ready_endpoint(config, self.name, &payload.units)?;
        }
        config.user = self.user.clone();
        let what = match role {
            Some(r) => format!("workload {:?} role {r:?}", self.name),
            None => format!("workload {:?}", self.name),
        };
        Ok((config.render_checked(&what)?, payload.units))
    }

    /// A single-role workload with `payload` on each of its VMs.
    pub(crate) fn single(self, payload: RolePayload) -> Result<RenderedWorkload> {
        let (userdata, units) = self.render(payload, None)?;
        Ok(RenderedWorkload {
            name: self.name.to_string(),
            roles: vec![RenderedRole {
                spec: RoleSpec {
                    role: None,
                    vm_count: self.vm_count,
                },
                userdata,
                units,
            }],
            signal_params: self.signal_params(),
            resources: self.resources,
            data_disks: Vec::new(),
            service: None,
            custom_signals: Vec::new(),
        })
    }

    /// A client/server workload: `vm_count` servers then `vm_count` clients.
    pub(crate) fn server_client(
        self,
        server: RolePayload,
        client: RolePayload,
        service: ServiceSpec,
    ) -> Result<RenderedWorkload> {
        let mut roles = Vec::with_capacity(2);
        for (role, payload) in [(ROLE_SERVER, server), (ROLE_CLIENT, client)] {
            let (userdata, units) = self.render(payload, Some(role))?;
            roles.push(RenderedRole {
                spec: RoleSpec {
                    role: Some(role.to_string()),
                    vm_count: self.vm_count,
                },
                userdata,
                units,
            });
        }
        Ok(RenderedWorkload {
            name: self.name.to_string(),
            roles,
            signal_params: self.signal_params(),
            resources: self.resources,
            data_disks: Vec::new(),
            service: Some(service),
            custom_signals: Vec::new(),
        })
    }
}

/// The blank data disk of disk-backed built-ins (`datadisk`, sized by `--disk-size`).
pub(crate) fn data_disk(dv_base: &str, serial: &str, options: &WorkloadOptions) -> DataDisk {
    DataDisk {
        name: "datadisk".to_string(),
        dv_base: dv_base.to_string(),
        serial: serial.to_string(),
        size: options.data_disk_size.clone(),
    }
}

/// A Service selecting `component`'s VMs of `role`: both labels, because selecting by role
/// alone would also reach another workload's VMs of the same role.
pub(crate) fn role_service(
    name: &str,
    component: &str,
    role: &str,
    ports: &[(&str, u16)],
) -> ServiceSpec {
    ServiceSpec {
        name: name.to_string(),
        selector: BTreeMap::from([
            (crate::labels::COMPONENT.to_string(), component.to_string()),
            (crate::labels::ROLE.to_string(), role.to_string()),
        ]),
        ports: ports
            .iter()
            .map(|(n, p)| ServicePortSpec {
                name: n.to_string(),
                port: *p,
                protocol: "TCP".to_string(),
            })
            .collect(),
    }
}
