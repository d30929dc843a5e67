//! No-code catalog workloads: `<catalog-dir>/<entry>/` with `*.service` files and an optional
//! `workload.yaml` (packages, typed params, roles, storage, one Service).
//!
//! Loading is strict: unknown manifest keys, bad names, sizes, serials, mounts, ports and
//! param defaults are input errors naming the entry and file. Only regular files directly
//! inside the entry directory are read (never a symbolic link, which could ship
//! `~/.kube/config` to every guest), each at most [`MAX_FILE_BYTES`] and together at most
//! [`MAX_ENTRY_BYTES`]; unit file names must pass [`check_unit_file_name`]. `{{key}}` placeholders are
//! replaced by validated param values in one pass (values are never re-scanned); list
//! params are written comma-joined, dict params as `k=v` pairs comma-joined.
//!
//! An entry may opt in to load profiles with a `profile` section: one of its units, run by the
//! load-profile driver ([`profile_driver::driven`]) through a drop-in when the user picks a
//! profile, and a level script from the entry directory that runs the load at the level given
//! as `$1`. Without a profile the user-data is exactly what the entry renders without the
//! section.
//!
//! Must not: run anything in the guest but the entry's files and the shared driver; let a
//! value reach a guest file unvalidated.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::params::{ParamDef, ParamSchema, ParamType, ResolvedParams, StrRule, check_value};
use super::profile_driver::{self, LevelScale};
use super::profile_keys;
use super::scripts::{DataMount, daemon_reload, enable_now};
use super::{
    DataDisk, GuestFamily, RenderedRole, RenderedWorkload, RoleSpec, ServicePortSpec, ServiceSpec,
    Workload, WorkloadDefinition, WorkloadOptions, WorkloadSettings, WorkloadSource, family,
    with_guest_agent, with_ready_endpoint,
};
use crate::cloudinit::{CloudConfig, UserAccount, WriteFile};
use crate::error::{Error, Result};
use crate::model::{DnsLabel, MIN_DISK_SIZE, Quantity};
use crate::profile_schedule::LoadProfile;

/// The manifest file name inside an entry directory.
pub const MANIFEST: &str = "workload.yaml";
/// Disk names the VM spec already uses.
const RESERVED_DISKS: &[&str] = &["containerdisk", "cloudinitdisk", "datadisk"];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    packages: Vec<String>,
    #[serde(default)]
    params: Vec<ManifestParam>,
    #[serde(default)]
    roles: Vec<ManifestRole>,
    #[serde(default)]
    storage: Vec<ManifestStorage>,
    #[serde(default)]
    service: Option<ManifestService>,
    /// Expected signals for `virtwork verify` (PromQL templates over one VMI).
    #[serde(default)]
    signals: Vec<crate::signals::contract::CustomSignal>,
    /// Opts the entry in to load profiles.
    #[serde(default)]
    profile: Option<ManifestProfile>,
}

/// The manifest's `profile` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestProfile {
    /// The unit whose ExecStart the driver replaces.
    unit: String,
    /// File in the entry directory run with the level as `$1`.
    #[serde(rename = "level-script", alias = "level_script")]
    level_script: String,
    /// What a level is, e.g. "sysbench events per second (--rate)".
    meaning: String,
    max: i64,
    #[serde(rename = "default-low", alias = "default_low")]
    default_low: i64,
    #[serde(rename = "default-high", alias = "default_high")]
    default_high: i64,
    /// Params only the steady load reads: given next to a profile they are an error.
    #[serde(default, rename = "steady-params", alias = "steady_params")]
    steady_params: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestParam {
    key: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    default: Option<serde_yaml::Value>,
    #[serde(default, alias = "description")]
    desc: Option<String>,
    /// Lower bound of an `int` param (default 0).
    #[serde(default)]
    min: Option<i64>,
    /// Upper bound of an `int` param (default 2147483647).
    #[serde(default)]
    max: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestRole {
    name: String,
    #[serde(default, rename = "vm-count", alias = "vm_count")]
    vm_count: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestStorage {
    #[serde(default)]
    name: String,
    #[serde(default)]
    size: String,
    #[serde(default)]
    serial: String,
    #[serde(default)]
    mount: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestService {
    #[serde(default)]
    ports: Vec<ManifestPort>,
    #[serde(default, rename = "selector-role", alias = "selector_role")]
    selector_role: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestPort {
    #[serde(default)]
    name: String,
    port: i64,
    #[serde(default)]
    protocol: String,
}

/// A loaded, validated catalog entry.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    pub name: String,
    pub dir: PathBuf,
    pub schema: ParamSchema,
    /// Service files keyed by file name (`x.service`), sorted.
    units: BTreeMap<String, String>,
    /// The level script's text when the manifest opts in to load profiles.
    level_script: Option<String>,
    manifest: Manifest,
}

/// Placeholder findings of an entry, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlaceholderReport {
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// Largest level a catalog entry may declare (`profile.max`); levels are 32-bit in the
/// schedule.
pub const MAX_PROFILE_LEVEL: i64 = 1_000_000_000;

/// Longest `profile.meaning`: it is shown in param descriptions.
const MAX_MEANING_CHARS: usize = 120;

/// Where a profile's drop-in goes for `unit`.
fn profile_drop_in_path(unit: &str) -> String {
    format!(
        "{}/{unit}.d/virtwork-load-profile.conf",
        super::scripts::UNIT_DIR
    )
}

/// Largest single file of an entry (a unit file or the manifest). Units are a few KiB; the cap
/// stops a stray large file from being read at all.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Largest total of an entry's files. Everything read ends up in a cloud-init user-data
/// Secret, which Kubernetes caps at 1 MiB, so a larger entry could never be deployed.
pub const MAX_ENTRY_BYTES: u64 = 1024 * 1024;

/// Whether `name` may be installed as a systemd unit file: `[A-Za-z0-9@._-]` only, no leading
/// `-` (it would read as an option to `systemctl`), a non-empty stem, and a `.service` or
/// `.timer` suffix. The name reaches a guest command line, so the check is strict.
pub fn check_unit_file_name(name: &str) -> std::result::Result<(), String> {
    let stem = name
        .strip_suffix(".service")
        .or_else(|| name.strip_suffix(".timer"));
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'@' | b'.' | b'_' | b'-'));
    match stem {
        Some(stem) if !stem.is_empty() && chars_ok && !name.starts_with(['-', '.', '@']) => Ok(()),
        _ => Err(
            "not a usable unit file name: expected letters, digits, '@', '.', '_' and '-' only, \
             not starting with '-', '.' or '@', ending in .service or .timer (e.g. stress.service)"
                .to_string(),
        ),
    }
}

/// Bytes of an entry read so far, against [`MAX_ENTRY_BYTES`].
#[derive(Debug, Default)]
struct EntryBudget {
    used: u64,
}

/// Reads `dir/file` if it exists: `None` when absent, `Some(Err(problem))` when it must not be
/// used. Only a regular file directly inside the entry directory is read: a symbolic link
/// (which could point at `~/.kube/config` and ship it to every guest), a directory, a FIFO or
/// a device is refused, and so is a file over [`MAX_FILE_BYTES`] or one that would take the
/// entry over [`MAX_ENTRY_BYTES`]. The opened file must be the very inode that was checked,
/// so swapping in a link between the check and the read is caught too.
fn read_entry_file(
    dir: &Path,
    file: &str,
    budget: &mut EntryBudget,
) -> Option<std::result::Result<String, String>> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;

    let path = dir.join(file);
    let checked = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return Some(Err(format!("cannot be read: {e}"))),
    };
    let kind = checked.file_type();
    if kind.is_symlink() {
        return Some(Err(
            "is a symbolic link; catalog files must be regular files inside \
                         the entry directory (copy the file into the entry instead)"
                .to_string(),
        ));
    }
    if !kind.is_file() {
        return Some(Err(
            "is not a regular file; catalog files must be regular files \
                         inside the entry directory"
                .to_string(),
        ));
    }
    let too_big = |size: u64| {
        format!(
            "is {size} bytes, over the {} KiB limit for one catalog file",
            MAX_FILE_BYTES / 1024
        )
    };
    if checked.len() > MAX_FILE_BYTES {
        return Some(Err(too_big(checked.len())));
    }
    let opened = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => return Some(Err(format!("cannot be read: {e}"))),
    };
    let same_file = opened
        .metadata()
        .is_ok_and(|m| m.is_file() && m.dev() == checked.dev() && m.ino() == checked.ino());
    if !same_file {
        return Some(Err(
            "changed while being read (replaced by a link or another file)".to_string(),
        ));
    }
    let mut bytes = Vec::new();
    if let Err(e) = opened.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes) {
        return Some(Err(format!("cannot be read: {e}")));
    }
    let size = bytes.len() as u64;
    if size > MAX_FILE_BYTES {
        return Some(Err(too_big(size)));
    }
    budget.used += size;
    if budget.used > MAX_ENTRY_BYTES {
        return Some(Err(format!(
            "takes the entry's files over {} KiB in total (they must fit the 1 MiB cloud-init \
             user-data limit)",
            MAX_ENTRY_BYTES / 1024
        )));
    }
    Some(String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string()))
}

/// The entry's `.service` files by name (hidden files skipped), within the entry's budget.
fn read_units(
    dir: &Path,
    budget: &mut EntryBudget,
) -> std::result::Result<BTreeMap<String, String>, String> {
    let unreadable =
        |e: std::io::Error| format!("reading the entry directory {}: {e}", dir.display());
    let mut unit_names = Vec::new();
    for item in std::fs::read_dir(dir).map_err(unreadable)? {
        let file_name = item
            .map_err(unreadable)?
            .file_name()
            .to_string_lossy()
            .into_owned();
        // Hidden files (editor lock and swap files) are never part of an entry.
        if file_name.starts_with('.') || !file_name.ends_with(".service") {
            continue;
        }
        check_unit_file_name(&file_name).map_err(|msg| format!("file {file_name:?}: {msg}"))?;
        unit_names.push(file_name);
    }
    unit_names.sort();
    let mut units = BTreeMap::new();
    for file_name in unit_names {
        let content = read_entry_file(dir, &file_name, budget)
            .ok_or_else(|| format!("file {file_name:?} disappeared while loading"))
            .and_then(|r| r.map_err(|msg| format!("file {file_name:?}: {msg}")))?;
        units.insert(file_name, content);
    }
    if units.is_empty() {
        return Err("catalog entry has no .service files".to_string());
    }
    Ok(units)
}

/// The entry's manifest; a missing or empty `workload.yaml` is the default manifest.
fn read_manifest(dir: &Path, budget: &mut EntryBudget) -> std::result::Result<Manifest, String> {
    match read_entry_file(dir, MANIFEST, budget) {
        None => Ok(Manifest::default()),
        Some(Err(msg)) => Err(format!("file {MANIFEST:?}: {msg}")),
        Some(Ok(text)) if text.trim().is_empty() => Ok(Manifest::default()),
        Some(Ok(text)) => serde_yaml::from_str(&text).map_err(|e| {
            format!(
                "parsing {}: {}",
                dir.join(MANIFEST).display(),
                e.to_string().replace('\n', " ")
            )
        }),
    }
}

/// Most catalog directory entries looked at when naming the entries that exist.
const MAX_LISTED_ENTRIES: usize = 1000;

/// The names of the entries (subdirectories, hidden ones skipped) in `catalog_dir`, sorted; an
/// unreadable or missing directory has none. Used only to tell a catalog workload that this
/// run does not select from a name that exists nowhere.
pub fn entry_names(catalog_dir: &Path) -> Vec<String> {
    let Ok(items) = std::fs::read_dir(catalog_dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = items
        .take(MAX_LISTED_ENTRIES)
        .filter_map(|item| item.ok())
        .filter(|item| item.file_type().is_ok_and(|t| t.is_dir()))
        .map(|item| item.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

impl CatalogEntry {
    /// Loads and validates `<catalog_dir>/<name>`. Placeholders are not checked here
    /// (see [`placeholder_report`](Self::placeholder_report)).
    pub fn load(catalog_dir: &Path, name: &str) -> Result<CatalogEntry> {
        let fail = |msg: String| Error::input(format!("catalog entry {name:?}: {msg}"));
        let dir = catalog_dir.join(name);
        // A linked entry could point anywhere (another user's tree, `~/.ssh`): like its files,
        // an entry must be a real directory inside the catalog.
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(fail(format!(
                "{} is a symbolic link; catalog entries must be directories inside the catalog \
                 directory (copy the entry there instead)",
                dir.display()
            )));
        }
        if !dir.is_dir() {
            return Err(fail(format!(
                "catalog entry not found (no directory {})",
                dir.display()
            )));
        }
        if !DnsLabel::is_valid(name) {
            return Err(fail(
                "entry name must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters); rename the directory".to_string(),
            ));
        }
        let mut budget = EntryBudget::default();
        let units = read_units(&dir, &mut budget).map_err(&fail)?;
        let manifest_path = dir.join(MANIFEST);
        let manifest = read_manifest(&dir, &mut budget).map_err(&fail)?;
        let schema = validate_manifest(name, &manifest).map_err(|msg| {
            fail(format!(
                "validating manifest {}: {msg}",
                manifest_path.display()
            ))
        })?;

        if manifest.roles.len() > 1 {
            for role in &manifest.roles {
                if !units.contains_key(&format!("{}.service", role.name)) {
                    return Err(Error::input(format!(
                        "role {:?} in catalog entry {name:?}: missing .service file for declared role (expected {}.service)",
                        role.name, role.name
                    )));
                }
            }
        }
        let level_script = match &manifest.profile {
            None => None,
            Some(profile) => {
                check_profile_unit(&profile.unit, &manifest.roles, &units).map_err(&fail)?;
                Some(read_level_script(&dir, &profile.level_script, &mut budget).map_err(&fail)?)
            }
        };
        Ok(CatalogEntry {
            name: name.to_string(),
            dir,
            schema,
            units,
            level_script,
            manifest,
        })
    }

    /// Whether the manifest opts in to load profiles.
    pub fn supports_profiles(&self) -> bool {
        self.manifest.profile.is_some()
    }

    /// Whether `key` is a profile param the entry gained: virtwork reads it, the entry's files
    /// need not.
    fn is_read_by_virtwork(&self, key: &str) -> bool {
        self.supports_profiles() && profile_keys::is_profile_key(key)
    }

    /// The manifest's storage as data disks.
    fn data_disks(&self) -> Result<Vec<DataDisk>> {
        self.manifest
            .storage
            .iter()
            .map(|s| {
                // Checked when the manifest was loaded; parsed into its type here.
                let size = s.size.parse().map_err(|e: crate::model::Invalid| {
                    Error::input(e.message(&format!("storage {:?} size", s.name), &s.size))
                })?;
                Ok(DataDisk {
                    name: s.name.clone(),
                    dv_base: s.name.clone(),
                    serial: s.serial.clone(),
                    size,
                })
            })
            .collect()
    }

    /// The signals the manifest declares (validated when loaded).
    pub fn signals(&self) -> &[crate::signals::contract::CustomSignal] {
        &self.manifest.signals
    }

    /// Whether the entry has more than one role.
    pub fn is_multi_role(&self) -> bool {
        self.manifest.roles.len() > 1
    }

    /// Service file names, sorted.
    pub fn unit_files(&self) -> impl Iterator<Item = &str> {
        self.units.keys().map(String::as_str)
    }

    /// The name used for a service file in findings: the role for multi-role entries, the
    /// file name otherwise (as the reference reports them).
    fn shown_file<'a>(&self, file: &'a str) -> &'a str {
        if self.is_multi_role() {
            file.strip_suffix(".service").unwrap_or(file)
        } else {
            file
        }
    }

    /// Undeclared placeholders (errors) and declared-but-unused params (warnings).
    pub fn placeholder_report(&self) -> PlaceholderReport {
        let mut used = BTreeSet::new();
        let mut errors = BTreeSet::new();
        let units = self
            .units
            .iter()
            .map(|(file, content)| (self.shown_file(file), content.as_str()));
        let level_script = self
            .manifest
            .profile
            .as_ref()
            .zip(self.level_script.as_deref())
            .map(|(profile, text)| (profile.level_script.as_str(), text));
        for (file, content) in units.chain(level_script) {
            for key in placeholders(content) {
                if self.schema.get(key).is_some() {
                    used.insert(key.to_string());
                } else {
                    errors.insert(format!(
                        "placeholder {{{{{key}}}}} in {file} does not match any declared param"
                    ));
                }
            }
        }
        let warnings = self
            .schema
            .defs()
            .filter(|d| !used.contains(&d.key) && !self.is_read_by_virtwork(&d.key))
            .map(|d| format!("declared param {:?} is not used in any service file", d.key))
            .collect();
        PlaceholderReport {
            errors: errors.into_iter().collect(),
            warnings,
        }
    }

    /// The registry definition; loading for a run also rejects undeclared placeholders.
    pub fn into_definition(self) -> Result<WorkloadDefinition> {
        if let Some(error) = self.placeholder_report().errors.first() {
            return Err(Error::input(format!(
                "catalog entry {:?}: {error}",
                self.name
            )));
        }
        let name = self.name.clone();
        let schema = self.schema.clone();
        let source = WorkloadSource::Catalog(self.dir.clone());
        Ok(WorkloadDefinition::new(
            &name,
            schema,
            source,
            Box::new(move |settings, options| {
                Ok(Box::new(self.build(settings, options)?) as Box<dyn Workload>)
            }),
        ))
    }

    /// Renders the entry's user-data (once per role) for `settings`.
    pub fn build(
        &self,
        settings: &WorkloadSettings,
        options: &WorkloadOptions,
    ) -> Result<RenderedWorkload> {
        let params = self.schema.resolve(&settings.params)?;
        let driven = self.driven_unit(&params, &settings.params)?;
        let driven = driven.as_ref();
        let user = UserAccount::from_ssh(&options.ssh)?;
        let vm_count = settings.vm_count.max(1);
        let family = settings.guest_family;
        let mut roles = Vec::new();
        if self.is_multi_role() {
            for role in &self.manifest.roles {
                let file = format!("{}.service", role.name);
                let count = match role.vm_count {
                    Some(n) if n >= 1 => n as u32,
                    _ => vm_count,
                };
                let config = self.cloud_config(
                    &[(file.as_str(), self.units[&file].as_str())],
                    &params,
                    driven,
                    user.clone(),
                    family,
                    options.ready_endpoint,
                )?;
                let what = format!("catalog workload {:?} role {:?}", self.name, role.name);
                roles.push(RenderedRole {
                    spec: RoleSpec {
                        role: Some(role.name.clone()),
                        vm_count: count,
                    },
                    userdata: config.render_checked(&what)?,
                    units: vec![file],
                });
            }
        } else {
            let files: Vec<(&str, &str)> = self
                .units
                .iter()
                .map(|(f, c)| (f.as_str(), c.as_str()))
                .collect();
            let config = self.cloud_config(
                &files,
                &params,
                driven,
                user,
                family,
                options.ready_endpoint,
            )?;
            let count = match self.manifest.roles.first().and_then(|r| r.vm_count) {
                Some(n) if n >= 1 => n as u32,
                _ => vm_count,
            };
            roles.push(RenderedRole {
                spec: RoleSpec {
                    role: None,
                    vm_count: count,
                },
                userdata: config.render_checked(&format!("catalog workload {:?}", self.name))?,
                units: self.units.keys().cloned().collect(),
            });
        }
        Ok(RenderedWorkload {
            name: self.name.clone(),
            roles,
            resources: super::VmResources {
                cpu_cores: settings.cpu_cores,
                memory: settings.memory.clone(),
            },
            data_disks: self.data_disks()?,
            service: self.service_spec(),
            signal_params: BTreeMap::new(),
            custom_signals: self.manifest.signals.clone(),
        })
    }

    /// The unit a load profile drives and the files that make it do so, or `None` when the
    /// user picked no profile (or the entry has none). `given` are the user's params, for
    /// [`profile_driver::from_params`]'s checks of keys that would be ignored.
    fn driven_unit(
        &self,
        params: &ResolvedParams,
        given: &BTreeMap<String, String>,
    ) -> Result<Option<DrivenUnit>> {
        let (Some(profile), Some(level_script)) = (&self.manifest.profile, &self.level_script)
        else {
            return Ok(None);
        };
        let steady_keys: Vec<&str> = profile.steady_params.iter().map(String::as_str).collect();
        let Some(shape) = profile_driver::from_params(&self.name, params, given, &steady_keys)?
        else {
            return Ok(None);
        };
        Ok(Some(DrivenUnit::new(
            &self.name,
            &profile.unit,
            &shape,
            substitute(level_script, &self.schema, params),
        )))
    }

    /// One role's cloud-config: the entry's packages (plus xfsprogs when it has storage),
    /// a mount unit per storage disk that every service file requires (through a drop-in,
    /// since the service files are the entry author's), the service files, the load-profile
    /// files when `driven` is one of them, and the guest agent every payload gets.
    fn cloud_config(
        &self,
        files: &[(&str, &str)],
        params: &ResolvedParams,
        driven: Option<&DrivenUnit>,
        user: Option<UserAccount>,
        family: GuestFamily,
        ready_endpoint: bool,
    ) -> Result<CloudConfig> {
        let mut config = CloudConfig {
            packages: self.manifest.packages.clone(),
            user,
            ..Default::default()
        };
        let mounts: Vec<DataMount> = self
            .manifest
            .storage
            .iter()
            .map(|s| DataMount::new(&s.serial, &s.mount))
            .collect();
        if !mounts.is_empty() {
            let xfs = family::base_profile(family).xfs_package.to_string();
            if !config.packages.contains(&xfs) {
                config.packages.push(xfs);
            }
        }
        for mount in &mounts {
            for file in mount.files() {
                if !config.write_files.iter().any(|f| f.path == file.path) {
                    config.write_files.push(file);
                }
            }
        }
        config.runcmd.push(daemon_reload());
        for (file, content) in files {
            config.write_files.push(WriteFile::new(
                &format!("{}/{file}", super::scripts::UNIT_DIR),
                substitute(content, &self.schema, params),
                "0644",
            ));
            if !mounts.is_empty() {
                let mut drop_in = String::from("[Unit]\n");
                for mount in &mounts {
                    drop_in.push_str(&format!("RequiresMountsFor={}\n", mount.mount));
                }
                config.write_files.push(WriteFile::new(
                    &format!(
                        "{}/{file}.d/virtwork-storage.conf",
                        super::scripts::UNIT_DIR
                    ),
                    drop_in,
                    "0644",
                ));
            }
            if let Some(driven) = driven.filter(|d| d.unit == *file) {
                config.write_files.extend(driven.files.iter().cloned());
            }
            config.runcmd.push(enable_now(file));
        }
        let config = with_guest_agent(config, family);
        if !ready_endpoint {
            return Ok(config);
        }
        let units: Vec<String> = files.iter().map(|(f, _)| f.to_string()).collect();
        with_ready_endpoint(config, &self.name, &units)
    }

    fn service_spec(&self) -> Option<ServiceSpec> {
        let service = self.manifest.service.as_ref()?;
        let mut selector =
            BTreeMap::from([(crate::labels::COMPONENT.to_string(), self.name.clone())]);
        // Single-role VMs carry no role label: the component alone selects all of them.
        if self.is_multi_role()
            && let Some(role) = &service.selector_role
        {
            selector.insert(crate::labels::ROLE.to_string(), role.clone());
        }
        Some(ServiceSpec {
            name: format!("virtwork-{}", self.name),
            selector,
            ports: service
                .ports
                .iter()
                .map(|p| ServicePortSpec {
                    name: p.name.clone(),
                    port: p.port as u16,
                    protocol: if p.protocol.is_empty() {
                        "TCP".to_string()
                    } else {
                        p.protocol.to_ascii_uppercase()
                    },
                })
                .collect(),
        })
    }
}

/// A catalog unit under a load profile: the driver, the schedule, the level script and the
/// drop-in that points the unit's ExecStart at the driver.
#[derive(Debug, Clone)]
struct DrivenUnit {
    unit: String,
    files: Vec<WriteFile>,
}

impl DrivenUnit {
    /// `unit` of entry `entry` following `shape`, with the substituted `level_script`.
    fn new(entry: &str, unit: &str, shape: &LoadProfile, level_script: String) -> Self {
        let (exec_start, mut files) = profile_driver::driven(entry, shape, level_script);
        files.push(WriteFile::new(
            &profile_drop_in_path(unit),
            profile_driver::driver_drop_in(&exec_start, &shape.describe()),
            "0644",
        ));
        DrivenUnit {
            unit: unit.to_string(),
            files,
        }
    }
}

/// Keys of every `{{key}}` in `text`, in order (the reference's `\{\{([^}]+)\}\}`).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut keys = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let inner_len = after.find('}').unwrap_or(after.len());
        if inner_len > 0 && after[inner_len..].starts_with("}}") {
            keys.push(&after[..inner_len]);
            rest = &after[inner_len + 2..];
        } else {
            rest = &rest[start + 1..];
        }
    }
    keys
}

/// Replaces declared placeholders by their (validated) values in one pass.
fn substitute(text: &str, schema: &ParamSchema, params: &ResolvedParams) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let inner_len = after.find('}').unwrap_or(after.len());
        if inner_len > 0 && after[inner_len..].starts_with("}}") {
            let key = &after[..inner_len];
            out.push_str(&rest[..start]);
            match schema.get(key) {
                Some(def) => out.push_str(&render_value(def.kind, params.str(key))),
                None => out.push_str(&rest[start..start + inner_len + 4]),
            }
            rest = &after[inner_len + 2..];
        } else {
            out.push_str(&rest[..start + 1]);
            rest = &rest[start + 1..];
        }
    }
    out.push_str(rest);
    out
}

fn render_value(kind: ParamType, value: &str) -> String {
    match kind {
        ParamType::List(_) | ParamType::Dict(_) => value.replace(';', ","),
        _ => value.to_string(),
    }
}

/// Checks a parsed manifest and builds its param schema. Each part is checked by its own
/// step; the first problem found is the error.
fn validate_manifest(entry: &str, manifest: &Manifest) -> std::result::Result<ParamSchema, String> {
    validate_packages(&manifest.packages)?;
    let mut defs = validate_params(&manifest.params)?;
    let role_names = validate_roles(&manifest.roles)?;
    validate_storage(&manifest.storage)?;
    if let Some(service) = &manifest.service {
        validate_service(service, &role_names)?;
    }
    validate_signals(&manifest.signals)?;
    if let Some(profile) = &manifest.profile {
        defs.extend(validate_profile(profile, &defs)?);
    }
    Ok(ParamSchema::new(entry, defs))
}

/// The `profile` section: file names of the closed unit-name character set, a one-line
/// meaning, levels within `1..=`[`MAX_PROFILE_LEVEL`] with the low default below the high
/// one, steady params that the manifest declares, and no declared param taking a profile
/// param's name. Returns the profile params the entry gains.
fn validate_profile(
    profile: &ManifestProfile,
    declared: &[ParamDef],
) -> std::result::Result<Vec<ParamDef>, String> {
    check_unit_file_name(&profile.unit)
        .map_err(|msg| format!("profile unit {:?}: {msg}", profile.unit))?;
    check_level_script_name(&profile.level_script)?;
    let meaning = &profile.meaning;
    if meaning.trim().is_empty()
        || meaning.chars().count() > MAX_MEANING_CHARS
        || meaning.chars().any(char::is_control)
    {
        return Err(format!(
            "profile meaning {meaning:?} must be one line of at most {MAX_MEANING_CHARS} characters saying what a level is (e.g. \"sysbench events per second (--rate)\")"
        ));
    }
    if !(1..=MAX_PROFILE_LEVEL).contains(&profile.max) {
        return Err(format!(
            "profile max {} must be an integer from 1 to {MAX_PROFILE_LEVEL} (the largest level)",
            profile.max
        ));
    }
    let max = profile.max;
    if !(0..max).contains(&profile.default_low) {
        return Err(format!(
            "profile default-low {} must be an integer from 0 to {} (below max)",
            profile.default_low,
            max - 1
        ));
    }
    if !(1..=max).contains(&profile.default_high) || profile.default_high <= profile.default_low {
        return Err(format!(
            "profile default-high {} must be an integer above default-low ({}) and at most max ({max})",
            profile.default_high, profile.default_low
        ));
    }
    if let Some(def) = declared
        .iter()
        .find(|d| profile_keys::is_profile_key(&d.key))
    {
        return Err(format!(
            "param {:?} takes the name of a load-profile param; rename it (an entry with a profile section gets profile and the profile-* params from virtwork)",
            def.key
        ));
    }
    for key in &profile.steady_params {
        if !declared.iter().any(|d| &d.key == key) {
            return Err(format!(
                "profile steady-params: {key:?} is not a declared param (expected keys from params, e.g. [loop-delay])"
            ));
        }
    }
    Ok(profile_driver::param_defs(LevelScale {
        meaning,
        max,
        default_low: profile.default_low,
        default_high: profile.default_high,
    }))
}

/// A level script's file name: letters, digits, '.', '_' and '-', not starting with '.' or
/// '-', and not a unit or the manifest (those are read as such).
fn check_level_script_name(name: &str) -> std::result::Result<(), String> {
    let chars_ok = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    let is_other_file = name == MANIFEST || name.ends_with(".service") || name.ends_with(".timer");
    if !chars_ok || name.starts_with(['.', '-']) || is_other_file {
        return Err(format!(
            "profile level-script {name:?} must be the name of a file in the entry directory: letters, digits, '.', '_' and '-', not starting with '.' or '-', not a .service/.timer file or {MANIFEST} (e.g. level.sh)"
        ));
    }
    Ok(())
}

/// The profile's unit must be one the entry installs: any of its service files, or for a
/// multi-role entry a role's `<role>.service` (no other file reaches a guest).
fn check_profile_unit(
    unit: &str,
    roles: &[ManifestRole],
    units: &BTreeMap<String, String>,
) -> std::result::Result<(), String> {
    let installed: Vec<String> = if roles.len() > 1 {
        roles
            .iter()
            .map(|r| format!("{}.service", r.name))
            .collect()
    } else {
        units.keys().cloned().collect()
    };
    if installed.iter().any(|u| u == unit) {
        return Ok(());
    }
    Err(format!(
        "profile unit {unit:?} is not a service file the entry installs (expected one of: {})",
        installed.join(", ")
    ))
}

/// The level script's text: a regular file of the entry starting with `#!`, since the driver
/// executes it.
fn read_level_script(
    dir: &Path,
    name: &str,
    budget: &mut EntryBudget,
) -> std::result::Result<String, String> {
    let text = read_entry_file(dir, name, budget)
        .ok_or_else(|| {
            format!(
                "profile level-script {name:?}: no such file in {} (expected a script that runs the load in the foreground at the level given as $1)",
                dir.display()
            )
        })?
        .map_err(|msg| format!("profile level-script {name:?}: {msg}"))?;
    if !text.starts_with("#!") {
        return Err(format!(
            "profile level-script {name:?} must start with a #! line (e.g. #!/bin/bash): the load-profile driver executes it"
        ));
    }
    Ok(text)
}

/// Package names are passed to the guest's package manager: a closed character set, and no
/// leading '-' that it would read as an option.
fn validate_packages(packages: &[String]) -> std::result::Result<(), String> {
    for package in packages {
        let ok = !package.starts_with('-')
            && !package.is_empty()
            && package.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-' | b':')
            });
        if !ok {
            return Err(format!(
                "package {package:?} is not a package name (letters, digits, '.', '_', '+', '-', ':')"
            ));
        }
    }
    Ok(())
}

/// Param declarations: safe unique keys, a known type, min/max only on ints, and a default
/// that the type accepts (placeholders must always have a value).
fn validate_params(params: &[ManifestParam]) -> std::result::Result<Vec<ParamDef>, String> {
    let mut defs = Vec::new();
    let mut seen = BTreeSet::new();
    for p in params {
        let key_ok = !p.key.is_empty()
            && p.key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !key_ok {
            return Err(format!(
                "param key {:?} must be letters, digits, '-' and '_'",
                p.key
            ));
        }
        if !seen.insert(p.key.clone()) {
            return Err(format!("param {:?} is declared twice", p.key));
        }
        let type_name = p.kind.as_deref().unwrap_or("string").to_ascii_lowercase();
        let kind = match type_name.as_str() {
            "int" | "integer" => {
                let (min, max) = (p.min.unwrap_or(0), p.max.unwrap_or(i64::from(i32::MAX)));
                if min > max {
                    return Err(format!(
                        "param {:?}: min {min} is greater than max {max}",
                        p.key
                    ));
                }
                ParamType::Int { min, max }
            }
            "bool" | "boolean" => ParamType::Bool,
            "list" => ParamType::List(StrRule::Token),
            "dict" => ParamType::Dict(StrRule::Token),
            "string" | "" => ParamType::Str(StrRule::Token),
            other => {
                return Err(format!(
                    "param {:?}: unknown type {other:?}; expected int, bool, string, list or dict",
                    p.key
                ));
            }
        };
        if (p.min.is_some() || p.max.is_some()) && !matches!(kind, ParamType::Int { .. }) {
            return Err(format!(
                "param {:?}: min/max apply only to int params",
                p.key
            ));
        }
        let default = match &p.default {
            None => String::new(),
            Some(v) => crate::yaml::scalar_text(v)
                .ok_or_else(|| format!("param {:?}: default must be a scalar value", p.key))?,
        };
        if default.is_empty() {
            return Err(format!(
                "param {:?}: a default value is required (placeholders must always have a value)",
                p.key
            ));
        }
        check_value(kind, &default)
            .map_err(|accepted| format!("param {:?} default {default:?}: {accepted}", p.key))?;
        defs.push(ParamDef {
            key: p.key.clone(),
            kind,
            default,
            description: p.desc.clone().unwrap_or_default(),
        });
    }

    Ok(defs)
}

/// Role names become parts of VM names: DNS labels, unique, with a bounded vm-count.
fn validate_roles(roles: &[ManifestRole]) -> std::result::Result<BTreeSet<String>, String> {
    let mut role_names = BTreeSet::new();
    for role in roles {
        if !DnsLabel::is_valid(&role.name) {
            return Err(format!(
                "role name {:?} must be a DNS-1123 label (lowercase letters, digits and '-')",
                role.name
            ));
        }
        if !role_names.insert(role.name.clone()) {
            return Err(format!("role {:?} is declared twice", role.name));
        }
        if role.vm_count.is_some_and(|n| n > 1000) {
            return Err(format!(
                "role {:?}: vm-count must be at most 1000",
                role.name
            ));
        }
    }

    Ok(role_names)
}

/// Extra disks: names that are DNS labels and not reserved, valid sizes, serials the guest
/// sees under /dev/disk/by-id, and safe absolute mount paths.
fn validate_storage(storage: &[ManifestStorage]) -> std::result::Result<(), String> {
    let mut storage_names = BTreeSet::new();
    for s in storage {
        if s.name.is_empty() {
            return Err("storage name must not be empty".to_string());
        }
        if RESERVED_DISKS.contains(&s.name.as_str()) {
            return Err(format!(
                "{:?}: storage name conflicts with reserved disk name",
                s.name
            ));
        }
        if !DnsLabel::is_valid(&s.name) {
            return Err(format!(
                "{:?}: storage name must be a DNS-1123 label (lowercase letters, digits and '-')",
                s.name
            ));
        }
        if !storage_names.insert(s.name.clone()) {
            return Err(format!("{:?}: duplicate storage name", s.name));
        }
        match s.size.parse::<Quantity>() {
            Err(_) => {
                return Err(format!(
                    "{:?}: storage size must be a valid quantity (e.g. 10Gi, 500Mi)",
                    s.size
                ));
            }
            Ok(size) if size.is_below(&MIN_DISK_SIZE) => {
                return Err(format!(
                    "{:?}: storage size must be at least {} ({})",
                    s.size, MIN_DISK_SIZE.text, MIN_DISK_SIZE.why
                ));
            }
            Ok(_) => {}
        }
        if s.serial.is_empty() {
            return Err("storage serial must not be empty".to_string());
        }
        if s.serial.len() > 20 {
            return Err(format!(
                "{:?}: storage serial must be at most 20 characters",
                s.serial
            ));
        }
        if !s
            .serial
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!(
                "{:?}: storage serial must be letters, digits, '-' and '_'",
                s.serial
            ));
        }
        if !s.mount.starts_with('/') {
            return Err(format!(
                "{:?}: storage mount must be an absolute path",
                s.mount
            ));
        }
        check_value(ParamType::Str(StrRule::MountPath), &s.mount)
            .map_err(|accepted| format!("{:?}: storage mount must be {accepted}", s.mount))?;
    }

    Ok(())
}

/// The entry's Service: valid ports and protocols, names where Kubernetes requires them, and
/// a selector role that the manifest declares.
fn validate_service(
    service: &ManifestService,
    role_names: &BTreeSet<String>,
) -> std::result::Result<(), String> {
    if service.ports.is_empty() {
        return Err("service must declare at least one port".to_string());
    }
    for port in &service.ports {
        if !(1..=65535).contains(&port.port) {
            return Err(format!(
                "{}: service port must be between 1 and 65535",
                port.port
            ));
        }
        if !port.protocol.is_empty()
            && !port.protocol.eq_ignore_ascii_case("tcp")
            && !port.protocol.eq_ignore_ascii_case("udp")
        {
            return Err(format!(
                "{:?}: service protocol must be TCP or UDP",
                port.protocol
            ));
        }
        let name_ok = port.name.len() <= 15
            && (port.name.is_empty() || DnsLabel::is_valid(&port.name))
            && (port.name.is_empty() || port.name.bytes().any(|b| b.is_ascii_lowercase()));
        if !name_ok {
            return Err(format!(
                "{:?}: service port name must be at most 15 lowercase letters, digits and '-' with at least one letter",
                port.name
            ));
        }
        if port.name.is_empty() && service.ports.len() > 1 {
            return Err("service ports must be named when there is more than one".to_string());
        }
    }
    if let Some(role) = &service.selector_role
        && !role_names.contains(role)
    {
        return Err(format!(
            "service selector-role {role:?} is not a declared role (declared: {})",
            role_names.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(())
}

/// Signal names are DNS-1123 labels, unique; thresholds finite and not negative; queries
/// valid templates (see signals/promql.rs: only `{{namespace}}`, `{{name}}`, `{{window}}`).
fn validate_signals(
    signals: &[crate::signals::contract::CustomSignal],
) -> std::result::Result<(), String> {
    let mut names = BTreeSet::new();
    for signal in signals {
        if !DnsLabel::is_valid(&signal.name) {
            return Err(format!(
                "signal name {:?} must be lowercase letters, digits and '-' (e.g. http-requests)",
                signal.name
            ));
        }
        if !names.insert(signal.name.as_str()) {
            return Err(format!("signal {:?} is declared twice", signal.name));
        }
        if !signal.threshold.is_finite() || signal.threshold < 0.0 {
            return Err(format!(
                "signal {:?}: threshold {} must be a number of at least 0",
                signal.name, signal.threshold
            ));
        }
        crate::signals::promql::validate_template(&signal.query)
            .map_err(|e| format!("signal {:?}: query: {e}", signal.name))?;
    }
    Ok(())
}
