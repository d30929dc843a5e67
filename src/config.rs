//! Layered configuration: defaults < YAML file (`--config`) < `VIRTWORK_*` env < given flags.
//!
//! Produces one fully typed, validated [`Config`] or a precise [`Error::Input`] naming the
//! offending flag, variable, file or key. Nothing else in the program reads flags or the
//! environment afterwards. The only I/O here is reading the config file and SSH key files.
//!
//! Each source becomes one figment provider holding canonical (hyphenated) keys; figment merges
//! them in precedence order and remembers, per value, which provider supplied it. Every value is
//! kept as text until it is parsed here, so an error can name the input exactly as the user
//! spelled it (`--cpu-cores`, `VIRTWORK_CPU_CORES`, `cpu_cores in ./virtwork.yaml`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};

use crate::cli::{
    CleanupArgs, DryRunMode, GlobalArgs, LogFormat, OutputFormat, ReadyCondition, RunArgs,
    StatusArgs, ValidateArgs,
};
use crate::error::{Error, Result};

/// The built-in workload names, sorted. Also the default `--workloads` list.
pub const BUILTIN_WORKLOADS: [&str; 9] = crate::workloads::BUILTIN_NAMES;

/// Default container disk image for every VM.
pub const DEFAULT_IMAGE: &str = "quay.io/containerdisks/fedora:42";
/// Default namespace.
pub const DEFAULT_NAMESPACE: &str = "virtwork";
/// Default data disk size for disk-backed workloads.
pub const DEFAULT_DISK_SIZE: &str = "10Gi";
/// Default memory per VM.
pub const DEFAULT_MEMORY: &str = "2Gi";
/// Default CPU cores per VM.
pub const DEFAULT_CPU_CORES: u32 = 2;
/// Default VMs per workload (per role for multi-role workloads).
pub const DEFAULT_VM_COUNT: u32 = 1;
/// Default readiness timeout, seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// Default time limit of `virtwork status`, seconds (it only lists).
pub const DEFAULT_STATUS_TIMEOUT_SECS: u64 = 60;
/// Default SSH user (a locked account unless a password or key is given).
pub const DEFAULT_SSH_USER: &str = "virtwork";
/// Default audit database path (relative to the working directory).
pub const DEFAULT_AUDIT_DB: &str = "virtwork.db";
/// Default bound on concurrent VM creations.
pub const DEFAULT_VM_CONCURRENCY: usize = 10;
/// Default client-side rate limit, requests per second.
pub const DEFAULT_QPS: f64 = 50.0;
/// Default client-side burst.
pub const DEFAULT_BURST: u32 = 100;
/// Upper bounds that keep a typo from planning millions of VMs or overflowing a deadline.
pub const MAX_VM_COUNT: u32 = 10_000;
pub const MAX_VM_CONCURRENCY: u32 = 1_000;
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 3600;
pub const MAX_QPS: f64 = 100_000.0;
pub const MAX_BURST: u32 = 100_000;
/// Catalog directory below `$HOME` when none is configured.
pub const DEFAULT_CATALOG_SUBDIR: &str = ".virtwork/catalog";

/// A value that must never reach logs, debug output or the audit database.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The plain value; call only where it is consumed (hashing).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// SSH access injected into every guest through cloud-init.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SshConfig {
    /// `None` when the user explicitly asked for no account (`--ssh-user ""`).
    pub user: Option<String>,
    pub password: Option<Secret>,
    /// Validated OpenSSH public keys, one per entry, in the order given.
    pub authorized_keys: Vec<String>,
}

impl SshConfig {
    /// Whether any credential was configured (recorded in the audit DB instead of the credential).
    pub fn auth_configured(&self) -> bool {
        self.password.is_some() || !self.authorized_keys.is_empty()
    }
}

/// Per-workload refinements from YAML `workloads.<name>` and `--params`.
/// Each `Some` value beats the corresponding global value for that workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadOverride {
    /// `Some(false)` skips the workload.
    pub enabled: Option<bool>,
    pub vm_count: Option<u32>,
    pub cpu_cores: Option<u32>,
    /// Validated positive Kubernetes quantity.
    pub memory: Option<String>,
    /// Raw param values, validated against the workload's schema when planning.
    pub params: BTreeMap<String, String>,
}

/// Audit database settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    pub enabled: bool,
    pub db_path: PathBuf,
}

/// The effective, validated configuration of one invocation.
#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    /// Kubeconfig paths in merge order (explicit key, or the `KUBECONFIG` list); empty means
    /// in-cluster service account, then `~/.kube/config`.
    pub kubeconfig: Vec<PathBuf>,
    /// The kubeconfig value as the user gave it (flag/env/YAML, else `KUBECONFIG`), for the
    /// audit record.
    pub kubeconfig_given: Option<String>,
    pub container_disk_image: String,
    pub disk_size: String,
    pub cpu_cores: u32,
    pub memory: String,
    /// run: wait for VM readiness (`--no-wait` clears it). cleanup: `--wait` was given.
    pub wait_for_ready: bool,
    pub timeout_secs: u64,
    pub ready_condition: ReadyCondition,
    /// `None` = a real run; `Some(Client)` = render only; `Some(Server)` = dryRun=All.
    /// For cleanup any `Some` means "preview only".
    pub dry_run: Option<DryRunMode>,
    pub verbose: bool,
    pub log_format: LogFormat,
    pub output: OutputFormat,
    pub ssh: SshConfig,
    pub audit: AuditSettings,
    pub vm_concurrency: usize,
    pub qps: f64,
    pub burst: u32,
    pub catalog_dir: PathBuf,
    /// Catalog entries to run, in order.
    pub from_catalog: Vec<String>,
    /// Built-in workloads to run, in order (already resolved: flag > env > all built-ins,
    /// cleared when only catalog entries were asked for). Workloads whose override says
    /// `enabled: false` are still listed; the planner skips them.
    pub workloads: Vec<String>,
    /// Whether the workload list was given explicitly (flag or env) rather than defaulted.
    pub workloads_explicit: bool,
    pub vm_count: u32,
    /// Per-workload refinements keyed by workload name.
    pub workload_overrides: BTreeMap<String, WorkloadOverride>,
}

/// The command-specific flags that feed the configuration.
#[derive(Debug, Clone, Copy)]
pub enum CommandFlags<'a> {
    Run(&'a RunArgs),
    Cleanup(&'a CleanupArgs),
    Validate(&'a ValidateArgs),
    Status(&'a StatusArgs),
    /// Commands with only the global flags (audit).
    GlobalOnly,
}

impl Config {
    /// Loads the configuration for `virtwork run`.
    ///
    /// `env` is the process environment as (name, value) pairs, passed in so tests can
    /// drive every layer without touching the real environment.
    pub fn load(global: &GlobalArgs, run: &RunArgs, env: &[(String, String)]) -> Result<Config> {
        Config::load_for(global, CommandFlags::Run(run), env)
    }

    /// Loads the configuration for `virtwork cleanup`: `--dry-run` (or `VIRTWORK_DRY_RUN` /
    /// YAML `dry-run`) means preview, `--timeout` bounds `--wait`, `--run-id` must be a UUID.
    pub fn load_for_cleanup(
        global: &GlobalArgs,
        cleanup: &CleanupArgs,
        env: &[(String, String)],
    ) -> Result<Config> {
        Config::load_for(global, CommandFlags::Cleanup(cleanup), env)
    }

    /// Loads the configuration for any command. Every key of every source is validated, so a
    /// bad value is reported the same way whichever command reads the file or environment.
    pub fn load_for(
        global: &GlobalArgs,
        flags: CommandFlags<'_>,
        env: &[(String, String)],
    ) -> Result<Config> {
        let env = EnvView::new(env);
        let file = match &global.config {
            Some(path) => Some(load_yaml_file(path)?),
            None => None,
        };
        let flag_layer = flag_layer(global, flags)?;
        let env_layer = env_layer(&env);

        let mut figment = Figment::new();
        if let Some(file) = &file {
            figment = figment.merge(file.layer.clone());
        }
        let layers = Resolved {
            figment: figment.merge(env_layer).merge(flag_layer),
        };
        build_config(&layers, file, &env, flags)
    }
}

// ---------------------------------------------------------------------------------------------
// Key table

/// One configuration key: canonical (hyphenated) name, the environment variables that set it
/// (canonical first, then aliases), and the YAML spellings accepted besides the canonical one.
struct KeySpec {
    key: &'static str,
    env: &'static [&'static str],
    yaml_aliases: &'static [&'static str],
}

const fn spec(
    key: &'static str,
    env: &'static [&'static str],
    yaml_aliases: &'static [&'static str],
) -> KeySpec {
    KeySpec {
        key,
        env,
        yaml_aliases,
    }
}

/// Every scalar/list key. `workloads` (the YAML map of per-workload sections) and `params`
/// are handled on their own; `workloads` from env/flags is the selection list.
const KEYS: &[KeySpec] = &[
    spec("namespace", &["VIRTWORK_NAMESPACE"], &[]),
    spec("kubeconfig", &["VIRTWORK_KUBECONFIG"], &[]),
    spec("verbose", &["VIRTWORK_VERBOSE"], &[]),
    spec("audit", &["VIRTWORK_AUDIT"], &[]),
    spec("audit-db", &["VIRTWORK_AUDIT_DB"], &["audit_db"]),
    spec("log-format", &["VIRTWORK_LOG_FORMAT"], &["log_format"]),
    spec("output", &["VIRTWORK_OUTPUT"], &[]),
    spec("qps", &["VIRTWORK_QPS"], &[]),
    spec("burst", &["VIRTWORK_BURST"], &[]),
    spec(
        "container-disk-image",
        &["VIRTWORK_CONTAINER_DISK_IMAGE"],
        &["container_disk_image"],
    ),
    spec(
        "disk-size",
        &["VIRTWORK_DISK_SIZE", "VIRTWORK_DATA_DISK_SIZE"],
        &["disk_size", "data-disk-size", "data_disk_size"],
    ),
    spec("cpu-cores", &["VIRTWORK_CPU_CORES"], &["cpu_cores"]),
    spec("memory", &["VIRTWORK_MEMORY"], &[]),
    spec(
        "wait-for-ready",
        &["VIRTWORK_WAIT_FOR_READY"],
        &["wait_for_ready"],
    ),
    spec("timeout", &["VIRTWORK_TIMEOUT"], &[]),
    spec(
        "ready-condition",
        &["VIRTWORK_READY_CONDITION"],
        &["ready_condition"],
    ),
    spec("dry-run", &["VIRTWORK_DRY_RUN"], &["dry_run"]),
    spec("ssh-user", &["VIRTWORK_SSH_USER"], &["ssh_user"]),
    spec(
        "ssh-password",
        &["VIRTWORK_SSH_PASSWORD"],
        &["ssh_password"],
    ),
    spec(
        "ssh-authorized-keys",
        &["VIRTWORK_SSH_AUTHORIZED_KEYS"],
        &["ssh_authorized_keys"],
    ),
    spec(
        "vm-concurrency",
        &["VIRTWORK_VM_CONCURRENCY"],
        &["vm_concurrency"],
    ),
    spec("catalog-dir", &["VIRTWORK_CATALOG_DIR"], &["catalog_dir"]),
    spec(
        "from-catalog",
        &["VIRTWORK_FROM_CATALOG"],
        &["from_catalog"],
    ),
    spec("vm-count", &["VIRTWORK_VM_COUNT"], &["vm_count"]),
    spec("workloads", &["VIRTWORK_WORKLOADS"], &[]),
    spec("params", &["VIRTWORK_PARAMS"], &[]),
];

/// Top-level YAML keys that are not accepted as plain keys (they come from elsewhere).
const FLAG_OR_ENV_ONLY: &[&str] = &["params"];

/// Every `VIRTWORK_*` environment variable the configuration reads (canonical names, then
/// aliases, in key order). The deployment manifests and docs are checked against this list.
pub fn env_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter().flat_map(|spec| spec.env.iter().copied())
}

/// Keys of a `workloads.<name>` YAML section, canonical spelling.
const WORKLOAD_SECTION_KEYS: &[&str] = &["enabled", "vm-count", "cpu-cores", "memory", "params"];

// ---------------------------------------------------------------------------------------------
// Sources as figment providers

/// One configuration source: canonical keys mapped to text (or a list of text), plus how the
/// user spelled each key in this source, used to name the input in errors.
#[derive(Clone)]
struct Layer {
    name: String,
    values: Dict,
    spelled: BTreeMap<String, String>,
}

impl Layer {
    fn new(name: impl Into<String>) -> Self {
        Layer {
            name: name.into(),
            values: Dict::new(),
            spelled: BTreeMap::new(),
        }
    }

    fn set(&mut self, key: &str, value: Value, spelled: impl Into<String>) {
        self.values.insert(key.to_string(), value);
        self.spelled.insert(key.to_string(), spelled.into());
    }

    fn set_text(&mut self, key: &str, text: impl Into<String>, spelled: impl Into<String>) {
        self.set(key, Value::from(text.into()), spelled);
    }

    fn set_list(&mut self, key: &str, items: Vec<String>, spelled: impl Into<String>) {
        self.set(key, Value::from(items), spelled);
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        let spelled = self.spelled.clone();
        Metadata::named(self.name.clone()).interpolater(move |_: &Profile, keys: &[&str]| {
            let key = keys.join(".");
            spelled.get(&key).cloned().unwrap_or(key)
        })
    }

    fn data(&self) -> std::result::Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.values.clone()))
    }
}

/// A merged value as text, with the input that supplied it.
enum Raw {
    One(String),
    Many(Vec<String>),
}

struct Sourced {
    raw: Raw,
    /// The input as the user wrote it: `--cpu-cores`, `VIRTWORK_CPU_CORES`, `cpu_cores in f.yaml`.
    source: String,
}

impl Sourced {
    /// The single text value; a list where one value is expected is an error.
    fn text(&self) -> Result<&str> {
        match &self.raw {
            Raw::One(text) => Ok(text),
            Raw::Many(_) => Err(Error::input(format!(
                "invalid value for {}: expected a single value, got a list",
                self.source
            ))),
        }
    }

    /// The list value; a single string is split on commas, items trimmed, empties dropped.
    fn list(&self) -> Vec<String> {
        match &self.raw {
            Raw::One(text) => split_list(text),
            Raw::Many(items) => items
                .iter()
                .map(|item| item.trim().to_string())
                .filter(|item| !item.is_empty())
                .collect(),
        }
    }
}

struct Resolved {
    figment: Figment,
}

impl Resolved {
    fn get(&self, key: &str) -> Option<Sourced> {
        let value = self.figment.find_value(key).ok()?;
        let source = self
            .figment
            .get_metadata(value.tag())
            .map(|md| md.interpolate(&Profile::Default, &[key]))
            .unwrap_or_else(|| key.to_string());
        let raw = match value {
            Value::Array(_, items) => Raw::Many(items.iter().filter_map(value_text).collect()),
            other => Raw::One(value_text(&other)?),
        };
        Some(Sourced { raw, source })
    }
}

fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(_, s) => Some(s.clone()),
        Value::Char(_, c) => Some(c.to_string()),
        Value::Bool(_, b) => Some(b.to_string()),
        Value::Num(_, n) => n
            .to_i128()
            .map(|i| i.to_string())
            .or_else(|| n.to_f64().map(|f| f.to_string())),
        _ => None,
    }
}

/// Splits a comma list, trimming items and dropping empty ones.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_string)
        .collect()
}

/// The environment slice, with "last definition wins" and empty values treated as unset.
struct EnvView {
    vars: BTreeMap<String, String>,
}

impl EnvView {
    fn new(env: &[(String, String)]) -> Self {
        let mut vars = BTreeMap::new();
        for (name, value) in env {
            vars.insert(name.clone(), value.clone());
        }
        EnvView { vars }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

fn env_layer(env: &EnvView) -> Layer {
    let mut layer = Layer::new("environment");
    for spec in KEYS {
        // The canonical variable wins over its aliases.
        if let Some((name, value)) = spec
            .env
            .iter()
            .find_map(|name| env.get(name).map(|v| (*name, v)))
        {
            layer.set_text(spec.key, value, name);
        }
    }
    layer
}

fn flag_layer(global: &GlobalArgs, flags: CommandFlags<'_>) -> Result<Layer> {
    let mut layer = Layer::new("command line");
    let text = |layer: &mut Layer, key: &str, value: &Option<String>, flag: &str| {
        if let Some(value) = value {
            layer.set_text(key, value.clone(), flag);
        }
    };
    text(&mut layer, "namespace", &global.namespace, "--namespace");
    let kubeconfig = global.kubeconfig.as_deref().map(path_text);
    text(&mut layer, "kubeconfig", &kubeconfig, "--kubeconfig");
    if global.verbose {
        layer.set_text("verbose", "true", "--verbose");
    }
    if global.no_audit {
        layer.set_text("audit", "false", "--no-audit");
    } else if global.audit {
        layer.set_text("audit", "true", "--audit");
    }
    let audit_db = global.audit_db.as_deref().map(path_text);
    text(&mut layer, "audit-db", &audit_db, "--audit-db");
    if let Some(format) = global.log_format {
        layer.set_text("log-format", log_format_name(format), "--log-format");
    }
    if let Some(format) = global.output {
        layer.set_text("output", output_name(format), "--output");
    }
    text(&mut layer, "qps", &global.qps, "--qps");
    text(&mut layer, "burst", &global.burst, "--burst");

    match flags {
        CommandFlags::Run(run) => {
            if let Some(list) = &run.workloads {
                layer.set_list("workloads", list.clone(), "--workloads");
            }
            text(&mut layer, "vm-count", &run.vm_count, "--vm-count");
            text(&mut layer, "cpu-cores", &run.cpu_cores, "--cpu-cores");
            text(&mut layer, "memory", &run.memory, "--memory");
            text(&mut layer, "disk-size", &run.disk_size, "--disk-size");
            text(
                &mut layer,
                "container-disk-image",
                &run.container_disk_image,
                "--container-disk-image",
            );
            if let Some(mode) = run.dry_run {
                layer.set_text("dry-run", dry_run_name(mode), "--dry-run");
            }
            if run.no_wait {
                layer.set_text("wait-for-ready", "false", "--no-wait");
            }
            text(&mut layer, "timeout", &run.timeout, "--timeout");
            if let Some(condition) = run.ready_condition {
                layer.set_text(
                    "ready-condition",
                    ready_condition_name(condition),
                    "--ready-condition",
                );
            }
            text(&mut layer, "ssh-user", &run.ssh_user, "--ssh-user");
            text(
                &mut layer,
                "ssh-password",
                &run.ssh_password,
                "--ssh-password",
            );
            let keys = keys_from_flags(&run.ssh_key, &run.ssh_key_file)?;
            if !keys.is_empty() {
                let spelled = if run.ssh_key.is_empty() {
                    "--ssh-key-file"
                } else {
                    "--ssh-key"
                };
                layer.set_list("ssh-authorized-keys", keys, spelled);
            }
            text(
                &mut layer,
                "vm-concurrency",
                &run.vm_concurrency,
                "--vm-concurrency",
            );
            text(&mut layer, "params", &run.params, "--params");
            let catalog_dir = run.catalog_dir.as_deref().map(path_text);
            text(&mut layer, "catalog-dir", &catalog_dir, "--catalog-dir");
            if let Some(list) = &run.from_catalog {
                layer.set_list("from-catalog", list.clone(), "--from-catalog");
            }
        }
        CommandFlags::Cleanup(cleanup) => {
            if cleanup.dry_run {
                layer.set_text("dry-run", "true", "--dry-run");
            }
            text(&mut layer, "timeout", &cleanup.timeout, "--timeout");
        }
        CommandFlags::Validate(validate) => {
            let catalog_dir = validate.catalog_dir.as_deref().map(path_text);
            text(&mut layer, "catalog-dir", &catalog_dir, "--catalog-dir");
        }
        CommandFlags::Status(status) => {
            text(&mut layer, "timeout", &status.timeout, "--timeout");
        }
        CommandFlags::GlobalOnly => {}
    }
    Ok(layer)
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn log_format_name(format: LogFormat) -> &'static str {
    match format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    }
}

fn output_name(format: OutputFormat) -> &'static str {
    match format {
        OutputFormat::Text => "text",
        OutputFormat::Json => "json",
    }
}

fn dry_run_name(mode: DryRunMode) -> &'static str {
    match mode {
        DryRunMode::Client => "client",
        DryRunMode::Server => "server",
    }
}

fn ready_condition_name(condition: ReadyCondition) -> &'static str {
    match condition {
        ReadyCondition::Running => "running",
        ReadyCondition::Ready => "ready",
        ReadyCondition::AgentConnected => "agent-connected",
        ReadyCondition::Workload => "workload",
    }
}

/// Inline `--ssh-key` values followed by the keys in each `--ssh-key-file` (one per line,
/// blank and `#` lines skipped), every one checked to be an OpenSSH public key.
fn keys_from_flags(inline: &[String], files: &[PathBuf]) -> Result<Vec<String>> {
    let mut keys = Vec::new();
    for key in inline {
        let key = key.trim();
        if key.is_empty() {
            continue;
        }
        check_public_key(key, "--ssh-key")?;
        keys.push(key.to_string());
    }
    for path in files {
        let content = std::fs::read_to_string(path).map_err(|err| {
            Error::input(format!(
                "cannot read --ssh-key-file {}: {}",
                path.display(),
                io_reason(&err)
            ))
        })?;
        if content.contains("PRIVATE KEY") {
            return Err(Error::input(format!(
                "--ssh-key-file {} holds a private key; give the public key file (usually ending in .pub)",
                path.display()
            )));
        }
        for (index, line) in content.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            check_public_key(
                line,
                &format!("--ssh-key-file {} line {}", path.display(), index + 1),
            )?;
            keys.push(line.to_string());
        }
    }
    Ok(keys)
}

/// The reason of an I/O error without the "(os error N)" noise.
fn io_reason(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_string(),
        std::io::ErrorKind::InvalidData => "not valid UTF-8 text".to_string(),
        _ => err.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// YAML file

struct FileSource {
    layer: Layer,
    /// Per-workload sections, already validated.
    workloads: BTreeMap<String, WorkloadOverride>,
}

fn load_yaml_file(path: &Path) -> Result<FileSource> {
    let shown = path.display().to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !matches!(ext.as_str(), "" | "yaml" | "yml" | "json") {
        return Err(Error::input(format!(
            "--config {shown}: unsupported file type \".{ext}\"; expected a YAML file (.yaml, .yml) or JSON (.json)"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|err| {
        Error::input(format!("cannot read --config {shown}: {}", io_reason(&err)))
    })?;
    let document: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|err| {
        let place = err
            .location()
            .map(|l| format!(" at line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        let reason = err.to_string();
        let reason = reason.split(" at line ").next().unwrap_or(&reason);
        Error::input(format!(
            "--config {shown}: not valid YAML{place}: {}",
            one_line(reason)
        ))
    })?;
    let mapping = match document {
        serde_yaml::Value::Null => serde_yaml::Mapping::new(),
        serde_yaml::Value::Mapping(m) => m,
        _ => {
            return Err(Error::input(format!(
                "--config {shown}: expected a mapping of keys (e.g. \"namespace: virtwork\") at the top level"
            )));
        }
    };

    let mut layer = Layer::new(format!("config file {shown}"));
    let mut workloads = BTreeMap::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let accepted: Vec<&str> = KEYS
        .iter()
        .map(|s| s.key)
        .filter(|k| !FLAG_OR_ENV_ONLY.contains(k))
        .collect();
    for (key, value) in mapping {
        let spelled = yaml_key_text(&key, &shown)?;
        let canonical = canonical_key(&spelled);
        if let Some(previous) = seen.insert(canonical.clone(), spelled.clone()) {
            return Err(Error::input(format!(
                "{shown}: key \"{spelled}\" repeats \"{previous}\"; give it once"
            )));
        }
        if canonical == "workloads" {
            workloads = parse_workload_sections(value, &shown)?;
            continue;
        }
        let Some(spec) = KEYS
            .iter()
            .find(|s| s.key == canonical && !FLAG_OR_ENV_ONLY.contains(&s.key))
        else {
            if canonical == "params" {
                return Err(Error::input(format!(
                    "{shown}: \"{spelled}\" is not a top-level key; put params under workloads.<name>.params (e.g. \"workloads: {{cpu: {{params: {{cpu-load-percent: 50}}}}}}\")"
                )));
            }
            return Err(unknown_key_error(&spelled, &shown, "", &accepted));
        };
        let source = format!("{spelled} in {shown}");
        match yaml_value(value, &source)? {
            None => {}
            Some(value) => layer.set(spec.key, value, source),
        }
    }
    Ok(FileSource { layer, workloads })
}

/// Canonical spelling of a YAML key: lowercase with hyphens, aliases resolved.
fn canonical_key(spelled: &str) -> String {
    let hyphenated = spelled.to_ascii_lowercase().replace('_', "-");
    for spec in KEYS {
        if spec.key == hyphenated
            || spec
                .yaml_aliases
                .iter()
                .any(|a| a.replace('_', "-") == hyphenated)
        {
            return spec.key.to_string();
        }
    }
    hyphenated
}

fn yaml_key_text(key: &serde_yaml::Value, file: &str) -> Result<String> {
    match key {
        serde_yaml::Value::String(s) => Ok(s.clone()),
        serde_yaml::Value::Number(n) => Ok(n.to_string()),
        serde_yaml::Value::Bool(b) => Ok(b.to_string()),
        _ => Err(Error::input(format!(
            "{file}: keys must be plain strings such as \"namespace\""
        ))),
    }
}

fn unknown_key_error(spelled: &str, file: &str, section: &str, accepted: &[&str]) -> Error {
    let hyphenated = spelled.to_ascii_lowercase().replace('_', "-");
    let hint = match crate::workloads::params::suggest(&hyphenated, accepted) {
        Some(s) => format!(" (did you mean \"{s}\"?)"),
        None => String::new(),
    };
    Error::input(format!(
        "{file}: unknown key \"{section}{spelled}\"{hint}; accepted keys: {}",
        accepted.join(", ")
    ))
}

/// A YAML scalar or list as a figment value of text; `null` means "not set".
fn yaml_value(value: serde_yaml::Value, source: &str) -> Result<Option<Value>> {
    match value {
        serde_yaml::Value::Null => Ok(None),
        serde_yaml::Value::Sequence(items) => {
            let mut texts = Vec::new();
            for item in items {
                match yaml_scalar(&item) {
                    Some(text) => texts.push(text),
                    None => {
                        return Err(Error::input(format!(
                            "invalid value for {source}: list items must be plain values"
                        )));
                    }
                }
            }
            Ok(Some(Value::from(texts)))
        }
        other => match yaml_scalar(&other) {
            Some(text) => Ok(Some(Value::from(text))),
            None => Err(Error::input(format!(
                "invalid value for {source}: expected a single value or a list, got a mapping"
            ))),
        },
    }
}

fn yaml_scalar(value: &serde_yaml::Value) -> Option<String> {
    match value {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Tagged(tagged) => yaml_scalar(&tagged.value),
        _ => None,
    }
}

fn parse_workload_sections(
    value: serde_yaml::Value,
    file: &str,
) -> Result<BTreeMap<String, WorkloadOverride>> {
    let mapping = match value {
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => {
            return Err(Error::input(format!(
                "invalid value for workloads in {file}: expected a mapping of workload name to settings (e.g. \"workloads: {{cpu: {{vm-count: 2}}}}\")"
            )));
        }
    };
    let mut sections = BTreeMap::new();
    for (name, section) in mapping {
        let name = yaml_key_text(&name, file)?;
        if !is_dns_label(&name) {
            return Err(Error::input(format!(
                "invalid workload name {name:?} under workloads in {file}: expected a workload name such as \"cpu\""
            )));
        }
        let mut parsed = WorkloadOverride::default();
        let entries = match section {
            serde_yaml::Value::Null => serde_yaml::Mapping::new(),
            serde_yaml::Value::Mapping(m) => m,
            _ => {
                return Err(Error::input(format!(
                    "invalid value for workloads.{name} in {file}: expected a mapping with keys {}",
                    WORKLOAD_SECTION_KEYS.join(", ")
                )));
            }
        };
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (key, value) in entries {
            let spelled = yaml_key_text(&key, file)?;
            let canonical = spelled.to_ascii_lowercase().replace('_', "-");
            let source = format!("workloads.{name}.{spelled} in {file}");
            if let Some(previous) = seen.insert(canonical.clone(), spelled.clone()) {
                return Err(Error::input(format!(
                    "{file}: key \"workloads.{name}.{spelled}\" repeats \"{previous}\"; give it once"
                )));
            }
            if matches!(value, serde_yaml::Value::Null) {
                continue;
            }
            match canonical.as_str() {
                "enabled" => parsed.enabled = Some(parse_bool(&scalar(&value, &source)?, &source)?),
                "vm-count" => {
                    parsed.vm_count = Some(parse_count(
                        &scalar(&value, &source)?,
                        &source,
                        MAX_VM_COUNT,
                    )?)
                }
                "cpu-cores" => {
                    parsed.cpu_cores =
                        Some(parse_count(&scalar(&value, &source)?, &source, u32::MAX)?)
                }
                "memory" => {
                    let text = scalar(&value, &source)?;
                    check_quantity(&text, &source)?;
                    parsed.memory = Some(text);
                }
                "params" => parsed.params = parse_yaml_params(value, &source)?,
                _ => {
                    return Err(unknown_key_error(
                        &spelled,
                        file,
                        &format!("workloads.{name}."),
                        WORKLOAD_SECTION_KEYS,
                    ));
                }
            }
        }
        sections.insert(name, parsed);
    }
    Ok(sections)
}

fn scalar(value: &serde_yaml::Value, source: &str) -> Result<String> {
    yaml_scalar(value).ok_or_else(|| {
        Error::input(format!(
            "invalid value for {source}: expected a single value"
        ))
    })
}

fn parse_yaml_params(value: serde_yaml::Value, source: &str) -> Result<BTreeMap<String, String>> {
    let serde_yaml::Value::Mapping(entries) = value else {
        return Err(Error::input(format!(
            "invalid value for {source}: expected a mapping of param name to value (e.g. \"params: {{cpu-load-percent: 50}}\")"
        )));
    };
    let mut params = BTreeMap::new();
    for (key, value) in entries {
        let key = yaml_scalar(&key).unwrap_or_default();
        if key.trim().is_empty() {
            return Err(Error::input(format!(
                "invalid key in {source}: param names must be non-empty strings"
            )));
        }
        let Some(text) = yaml_scalar(&value) else {
            return Err(Error::input(format!(
                "invalid value for param {key:?} in {source}: expected a single value"
            )));
        };
        params.insert(key.trim().to_string(), text);
    }
    Ok(params)
}

// ---------------------------------------------------------------------------------------------
// Building the Config

fn build_config(
    layers: &Resolved,
    file: Option<FileSource>,
    env: &EnvView,
    flags: CommandFlags<'_>,
) -> Result<Config> {
    let namespace = match layers.get("namespace") {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            check_namespace(&text, &v.source)?;
            text
        }
        None => DEFAULT_NAMESPACE.to_string(),
    };

    let (kubeconfig, kubeconfig_given) = match layers.get("kubeconfig") {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            if text.is_empty() {
                (Vec::new(), None)
            } else {
                (vec![PathBuf::from(&text)], Some(text))
            }
        }
        None => match env.get("KUBECONFIG") {
            Some(list) => {
                let paths: Vec<PathBuf> = list
                    .split(':')
                    .filter(|p| !p.is_empty())
                    .map(PathBuf::from)
                    .collect();
                (paths, Some(list.to_string()))
            }
            None => (Vec::new(), None),
        },
    };

    let verbose = bool_key(layers, "verbose", false)?;
    let audit_enabled = bool_key(layers, "audit", true)?;
    let audit_db = match layers.get("audit-db") {
        Some(v) => {
            let text = v.text()?.to_string();
            if text.trim().is_empty() {
                return Err(Error::input(format!(
                    "invalid value \"\" for {}: expected a file path such as virtwork.db",
                    v.source
                )));
            }
            PathBuf::from(text)
        }
        None => PathBuf::from(DEFAULT_AUDIT_DB),
    };
    let log_format = match layers.get("log-format") {
        Some(v) => match v.text()?.trim().to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(choice_error(other, &v.source, &["text", "json"])),
        },
        None => LogFormat::Text,
    };
    let output = match layers.get("output") {
        Some(v) => match v.text()?.trim().to_ascii_lowercase().as_str() {
            "text" => OutputFormat::Text,
            "json" => OutputFormat::Json,
            other => return Err(choice_error(other, &v.source, &["text", "json"])),
        },
        None => OutputFormat::Text,
    };
    let qps = match layers.get("qps") {
        Some(v) => parse_rate(v.text()?, &v.source)?,
        None => DEFAULT_QPS,
    };
    let burst = count_key(layers, "burst", DEFAULT_BURST, MAX_BURST)?;

    let container_disk_image = match layers.get("container-disk-image") {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            check_image(&text, &v.source)?;
            text
        }
        None => DEFAULT_IMAGE.to_string(),
    };
    let disk_size = quantity_key(layers, "disk-size", DEFAULT_DISK_SIZE)?;
    let memory = quantity_key(layers, "memory", DEFAULT_MEMORY)?;
    let cpu_cores = count_key(layers, "cpu-cores", DEFAULT_CPU_CORES, u32::MAX)?;
    let vm_count = count_key(layers, "vm-count", DEFAULT_VM_COUNT, MAX_VM_COUNT)?;
    let vm_concurrency = count_key(
        layers,
        "vm-concurrency",
        DEFAULT_VM_CONCURRENCY as u32,
        MAX_VM_CONCURRENCY,
    )? as usize;

    let wait_for_ready = match flags {
        CommandFlags::Cleanup(cleanup) => {
            // Validate the shared key anyway so a bad value is reported consistently.
            bool_key(layers, "wait-for-ready", true)?;
            cleanup.wait
        }
        _ => bool_key(layers, "wait-for-ready", true)?,
    };
    let timeout_secs = match layers.get("timeout") {
        Some(v) => {
            let text = v.text()?.trim();
            let value = text
                .parse::<u64>()
                .ok()
                .filter(|secs| *secs <= MAX_TIMEOUT_SECS)
                .ok_or_else(|| {
                    Error::input(format!(
                        "invalid value {text:?} for {}: expected a whole number of seconds from 1 to {MAX_TIMEOUT_SECS} (7 days)",
                        v.source
                    ))
                })?;
            if value < 1 && wait_for_ready {
                return Err(Error::input(format!(
                    "invalid value {text:?} for {}: expected a whole number of seconds, at least 1 when waiting (--wait, or run without --no-wait)",
                    v.source
                )));
            }
            value
        }
        None if matches!(flags, CommandFlags::Status(_)) => DEFAULT_STATUS_TIMEOUT_SECS,
        None => DEFAULT_TIMEOUT_SECS,
    };
    let ready_condition = match layers.get("ready-condition") {
        Some(v) => match v.text()?.trim().to_ascii_lowercase().as_str() {
            "running" => ReadyCondition::Running,
            "ready" => ReadyCondition::Ready,
            "agent-connected" => ReadyCondition::AgentConnected,
            "workload" => ReadyCondition::Workload,
            other => {
                return Err(choice_error(
                    other,
                    &v.source,
                    &["running", "ready", "agent-connected", "workload"],
                ));
            }
        },
        None => ReadyCondition::Running,
    };
    let dry_run = match layers.get("dry-run") {
        Some(v) => {
            let text = v.text()?.trim().to_ascii_lowercase();
            match text.as_str() {
                "client" => Some(DryRunMode::Client),
                "server" => Some(DryRunMode::Server),
                other => match bool_word(other) {
                    Some(true) => Some(DryRunMode::Client),
                    Some(false) => None,
                    None => {
                        return Err(choice_error(
                            other,
                            &v.source,
                            &["true", "false", "client", "server"],
                        ));
                    }
                },
            }
        }
        None => None,
    };

    let ssh = ssh_config(layers)?;

    let from_catalog = match layers.get("from-catalog") {
        Some(v) => {
            let names = v.list();
            check_unique_names(&names, &v.source, "catalog entry")?;
            names
        }
        None => Vec::new(),
    };
    let catalog_dir = match layers.get("catalog-dir") {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            if text.is_empty() {
                return Err(Error::input(format!(
                    "invalid value \"\" for {}: expected a directory path",
                    v.source
                )));
            }
            expand_home(&text, env)
        }
        None => match env.get("HOME") {
            Some(home) => Path::new(home).join(DEFAULT_CATALOG_SUBDIR),
            None => {
                if !from_catalog.is_empty() || matches!(flags, CommandFlags::Validate(_)) {
                    return Err(Error::input(
                        "cannot find the catalog directory: HOME is not set; give --catalog-dir or VIRTWORK_CATALOG_DIR",
                    ));
                }
                PathBuf::from(DEFAULT_CATALOG_SUBDIR)
            }
        },
    };

    let (workloads, workloads_explicit) = match layers.get("workloads") {
        Some(v) => {
            let names = v.list();
            check_builtin_names(&names, &v.source)?;
            (names, true)
        }
        None if !from_catalog.is_empty() => (Vec::new(), false),
        None => (
            BUILTIN_WORKLOADS.iter().map(|s| s.to_string()).collect(),
            false,
        ),
    };
    if matches!(flags, CommandFlags::Run(_)) && workloads.is_empty() && from_catalog.is_empty() {
        return Err(Error::input(
            "no workloads specified: use --workloads or --from-catalog",
        ));
    }

    let mut workload_overrides = file.map(|f| f.workloads).unwrap_or_default();
    if let Some(v) = layers.get("params") {
        let text = v.text()?;
        let parsed = parse_params(text)
            .map_err(|reason| Error::input(format!("parsing {}: {reason}", v.source)))?;
        for (workload, params) in parsed {
            let entry = workload_overrides.entry(workload).or_default();
            for (key, value) in params {
                entry.params.insert(key, value);
            }
        }
    }

    let run_id_filter = match flags {
        CommandFlags::Cleanup(cleanup) => cleanup.run_id.as_deref(),
        CommandFlags::Status(status) => status.run_id.as_deref(),
        _ => None,
    };
    if let Some(id) = run_id_filter {
        check_run_id(id, "--run-id")?;
    }

    Ok(Config {
        namespace,
        kubeconfig,
        kubeconfig_given,
        container_disk_image,
        disk_size,
        cpu_cores,
        memory,
        wait_for_ready,
        timeout_secs,
        ready_condition,
        dry_run,
        verbose,
        log_format,
        output,
        ssh,
        audit: AuditSettings {
            enabled: audit_enabled,
            db_path: audit_db,
        },
        vm_concurrency,
        qps,
        burst,
        catalog_dir,
        from_catalog,
        workloads,
        workloads_explicit,
        vm_count,
        workload_overrides,
    })
}

fn ssh_config(layers: &Resolved) -> Result<SshConfig> {
    let user = match layers.get("ssh-user") {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            if text.is_empty() {
                None
            } else {
                check_user_name(&text, &v.source)?;
                Some(text)
            }
        }
        None => Some(DEFAULT_SSH_USER.to_string()),
    };
    let password = match layers.get("ssh-password") {
        Some(v) => {
            let text = v.text()?;
            if text.contains(['\n', '\r', '\0']) {
                // Never echo the value: it is a credential.
                return Err(Error::input(format!(
                    "invalid value for {}: the password must be a single line",
                    v.source
                )));
            }
            (!text.is_empty()).then(|| Secret::new(text))
        }
        None => None,
    };
    let authorized_keys = match layers.get("ssh-authorized-keys") {
        Some(v) => {
            let keys = v.list();
            for key in &keys {
                check_public_key(key, &v.source)?;
            }
            keys
        }
        None => Vec::new(),
    };
    if user.is_none() && (password.is_some() || !authorized_keys.is_empty()) {
        return Err(Error::input(
            "an SSH password or key was given but --ssh-user is empty; give a user name such as virtwork",
        ));
    }
    Ok(SshConfig {
        user,
        password,
        authorized_keys,
    })
}

fn expand_home(text: &str, env: &EnvView) -> PathBuf {
    match (text.strip_prefix("~/"), env.get("HOME")) {
        (Some(rest), Some(home)) => Path::new(home).join(rest),
        _ if text == "~" => env
            .get("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| text.into()),
        _ => PathBuf::from(text),
    }
}

fn bool_key(layers: &Resolved, key: &str, default: bool) -> Result<bool> {
    match layers.get(key) {
        Some(v) => parse_bool(v.text()?, &v.source),
        None => Ok(default),
    }
}

fn count_key(layers: &Resolved, key: &str, default: u32, max: u32) -> Result<u32> {
    match layers.get(key) {
        Some(v) => parse_count(v.text()?, &v.source, max),
        None => Ok(default),
    }
}

fn quantity_key(layers: &Resolved, key: &str, default: &str) -> Result<String> {
    match layers.get(key) {
        Some(v) => {
            let text = v.text()?.trim().to_string();
            check_quantity(&text, &v.source)?;
            Ok(text)
        }
        None => Ok(default.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// Value parsers and validators. Each error names the input and the accepted form.

fn bool_word(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "yes" | "on" => Some(true),
        "false" | "f" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn parse_bool(text: &str, source: &str) -> Result<bool> {
    bool_word(text).ok_or_else(|| {
        Error::input(format!(
            "invalid value {text:?} for {source}: expected true or false"
        ))
    })
}

/// A whole number from 1 to `max` (VM counts, cores, concurrency, burst).
fn parse_count(text: &str, source: &str, max: u32) -> Result<u32> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ if max == u32::MAX => Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a whole number of at least 1"
        ))),
        _ => Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a whole number from 1 to {max}"
        ))),
    }
}

fn parse_rate(text: &str, source: &str) -> Result<f64> {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && (1.0..=MAX_QPS).contains(&n) => Ok(n),
        _ => Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a number of requests per second from 1 to {MAX_QPS}"
        ))),
    }
}

fn choice_error(text: &str, source: &str, accepted: &[&str]) -> Error {
    Error::input(format!(
        "invalid value {text:?} for {source}: expected one of {}",
        accepted.join(", ")
    ))
}

/// Whether `text` is an RFC 1123 DNS label (what Kubernetes requires of namespace names).
pub fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

fn check_namespace(text: &str, source: &str) -> Result<()> {
    if is_dns_label(text) {
        Ok(())
    } else {
        Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a DNS-1123 label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )))
    }
}

fn check_image(text: &str, source: &str) -> Result<()> {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a container image reference such as {DEFAULT_IMAGE}"
        )))
    } else {
        Ok(())
    }
}

fn check_user_name(text: &str, source: &str) -> Result<()> {
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if first_ok && rest_ok && text.len() <= 32 {
        Ok(())
    } else {
        Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a Linux user name (at most 32 lowercase letters, digits, '_' or '-', starting with a letter or '_'), or \"\" for no user"
        )))
    }
}

fn check_unique_names(names: &[String], source: &str, what: &str) -> Result<()> {
    let mut seen = BTreeSet::new();
    for name in names {
        if !is_dns_label(name) {
            return Err(Error::input(format!(
                "invalid {what} {name:?} in {source}: expected a name of lowercase letters, digits and '-' such as redis-bench"
            )));
        }
        if !seen.insert(name) {
            return Err(Error::input(format!(
                "{what} {name:?} is listed twice in {source}; give each once"
            )));
        }
    }
    Ok(())
}

/// Checks built-in workload names, with the reference's message for unknown ones.
fn check_builtin_names(names: &[String], source: &str) -> Result<()> {
    let mut seen = BTreeSet::new();
    for name in names {
        if BUILTIN_WORKLOADS.contains(&name.as_str()) && !seen.insert(name) {
            return Err(Error::input(format!(
                "workload {name:?} is listed twice in {source}; give each once"
            )));
        }
    }
    if !names.is_empty() {
        crate::workloads::check_builtin_names(names)
            .map_err(|err| Error::input(format!("{source}: {err}")))?;
    }
    Ok(())
}

/// Checks a run id (`--run-id`, `audit show <id>`): a UUID in its hyphenated form.
pub fn check_run_id(text: &str, source: &str) -> Result<()> {
    match uuid::Uuid::parse_str(text) {
        Ok(_) if text.len() == 36 => Ok(()),
        _ => Err(Error::input(format!(
            "invalid value {text:?} for {source}: expected a run id (UUID) such as 0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f"
        ))),
    }
}

/// OpenSSH public key algorithms accepted in authorized keys.
const KEY_TYPES: &[&str] = &[
    "ssh-ed25519",
    "ssh-rsa",
    "ssh-dss",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
];

/// Checks one authorized-keys entry: `[options] <type> <base64> [comment]` on one line.
/// The key itself is never echoed (a pasted private key must not end up in a log).
fn check_public_key(key: &str, source: &str) -> Result<()> {
    if key.contains("PRIVATE KEY") {
        return Err(Error::input(format!(
            "{source} holds a private key; give the public key (the .pub file)"
        )));
    }
    let single_line = !key.chars().any(|c| c.is_control() && c != '\t');
    let tokens: Vec<&str> = key.split_whitespace().collect();
    let well_formed = tokens.iter().enumerate().any(|(i, token)| {
        let known = KEY_TYPES.contains(token) || token.ends_with("-cert-v01@openssh.com");
        known
            && tokens.get(i + 1).is_some_and(|blob| {
                blob.len() >= 16
                    && blob
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
            })
    });
    if single_line && well_formed {
        Ok(())
    } else {
        Err(Error::input(format!(
            "invalid SSH public key in {source}: expected one line \"<type> <base64> [comment]\" such as \"ssh-ed25519 AAAAC3Nz... user@host\""
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// Kubernetes quantities

/// Parses a Kubernetes resource quantity (`^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$`,
/// with the suffixes Kubernetes accepts) and returns its value in base units.
pub fn parse_quantity(text: &str) -> std::result::Result<f64, String> {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'+') => (1.0, &text[1..]),
        Some(b'-') => (-1.0, &text[1..]),
        _ => (1.0, text),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    if number.is_empty() || !number.chars().any(|c| c.is_ascii_digit()) {
        return Err("it does not start with a number".to_string());
    }
    if number.matches('.').count() > 1 {
        return Err("the number has more than one decimal point".to_string());
    }
    let value: f64 = number
        .parse()
        .map_err(|_| "the number is malformed".to_string())?;
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        other => {
            let exponent = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .filter(|e| {
                    let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
                })
                .and_then(|e| e.parse::<i32>().ok());
            match exponent {
                Some(exp) => 10f64.powi(exp),
                None => return Err(format!("unknown suffix {other:?}")),
            }
        }
    };
    Ok(sign * value * multiplier)
}

fn check_quantity(text: &str, source: &str) -> Result<()> {
    let problem = match parse_quantity(text) {
        Ok(value) if value > 0.0 => return Ok(()),
        Ok(_) => "it is not positive".to_string(),
        Err(reason) => reason,
    };
    Err(Error::input(format!(
        "invalid value {text:?} for {source}: expected a positive Kubernetes quantity such as 2Gi, 512Mi or 10G ({problem})"
    )))
}

// ---------------------------------------------------------------------------------------------
// --params

/// Parses the `--params` grammar (`workload.key=value,...`) into workload -> key -> value.
/// Errors are the reference's exact texts (inventory §2.5), without the source prefix.
pub fn parse_params(
    text: &str,
) -> std::result::Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let mut parsed: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for pair in text.trim().split(',') {
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let Some((workload, rest)) = pair.split_once('.') else {
            return Err(format!(
                "missing workload prefix (expected workload.key=value): {pair:?}"
            ));
        };
        if workload.is_empty() {
            return Err(format!("empty workload name in {pair:?}"));
        }
        let Some((key, value)) = rest.split_once('=') else {
            return Err(format!(
                "missing '=' in param (expected workload.key=value): {pair:?}"
            ));
        };
        if key.is_empty() {
            return Err(format!("empty param key in {pair:?}"));
        }
        parsed
            .entry(workload.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(parsed)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_layer_names_values_the_way_the_user_wrote_them() {
        let mut file = Layer::new("config file f.yaml");
        file.set_text("cpu-cores", "1", "cpu_cores in f.yaml");
        file.set_text("memory", "1Gi", "memory in f.yaml");
        let env = env_layer(&EnvView::new(&env_pairs(&[("VIRTWORK_MEMORY", "2Gi")])));
        let run = RunArgs {
            vm_count: Some("3".into()),
            ..RunArgs::default()
        };
        let flags = flag_layer(&GlobalArgs::default(), CommandFlags::Run(&run)).unwrap();
        let resolved = Resolved {
            figment: Figment::new().merge(file).merge(env).merge(flags),
        };
        assert_eq!(
            resolved.get("cpu-cores").unwrap().source,
            "cpu_cores in f.yaml"
        );
        assert_eq!(resolved.get("memory").unwrap().source, "VIRTWORK_MEMORY");
        assert_eq!(resolved.get("vm-count").unwrap().source, "--vm-count");
        assert!(resolved.get("timeout").is_none());
    }

    #[test]
    fn env_aliases_are_named_as_given() {
        let env = env_layer(&EnvView::new(&env_pairs(&[
            ("VIRTWORK_DATA_DISK_SIZE", "0"),
            ("VIRTWORK_VERBOSE", ""),
        ])));
        let resolved = Resolved {
            figment: Figment::new().merge(env),
        };
        assert_eq!(
            resolved.get("disk-size").unwrap().source,
            "VIRTWORK_DATA_DISK_SIZE"
        );
        assert!(resolved.get("verbose").is_none(), "empty values are unset");
    }

    #[test]
    fn booleans_accept_the_usual_words_only() {
        for yes in ["true", "TRUE", "t", "1", "yes", "On"] {
            assert_eq!(bool_word(yes), Some(true), "{yes}");
        }
        for no in ["false", "F", "0", "no", "off"] {
            assert_eq!(bool_word(no), Some(false), "{no}");
        }
        for bad in ["", "maybe", "2", "y"] {
            assert_eq!(bool_word(bad), None, "{bad}");
        }
    }

    #[test]
    fn counts_are_bounded() {
        assert_eq!(
            parse_count("10000", "--vm-count", MAX_VM_COUNT).unwrap(),
            10_000
        );
        for bad in ["0", "10001", "-1", "1.5", "0x10", ""] {
            let err = parse_count(bad, "--vm-count", MAX_VM_COUNT).unwrap_err();
            assert!(err.to_string().contains("from 1 to 10000"), "{bad}: {err}");
        }
        assert!(parse_count("4000000", "--cpu-cores", u32::MAX).is_ok());
    }

    #[test]
    fn home_is_expanded_in_paths() {
        let env = EnvView::new(&env_pairs(&[("HOME", "/home/u")]));
        assert_eq!(expand_home("~/cat", &env), PathBuf::from("/home/u/cat"));
        assert_eq!(expand_home("/abs", &env), PathBuf::from("/abs"));
        assert_eq!(expand_home("~", &env), PathBuf::from("/home/u"));
    }

    #[test]
    fn quantities_follow_the_kubernetes_grammar() {
        for ok in [
            "2Gi", "512Mi", "1", "1.5G", "100m", "1e3", "1E+2", "+4Ki", "0.5", ".5Gi",
        ] {
            assert!(parse_quantity(ok).unwrap() > 0.0, "{ok}");
        }
        for bad in [
            "", "Gi", "2GB", "2 Gi", "1..2", "10MiB", "1e", "abc", "1x", "--1",
        ] {
            assert!(parse_quantity(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_quantity("2Gi").unwrap(),
            2.0 * 1024.0 * 1024.0 * 1024.0
        );
        assert_eq!(parse_quantity("-1").unwrap(), -1.0);
        assert_eq!(parse_quantity("1e3").unwrap(), 1000.0);
    }

    #[test]
    fn zero_and_negative_quantities_are_rejected() {
        for bad in ["0", "0Gi", "-1Gi", "-0.5"] {
            let err = check_quantity(bad, "--memory").unwrap_err().to_string();
            assert!(err.contains("not positive"), "{err}");
        }
    }

    #[test]
    fn params_grammar_matches_the_reference() {
        let parsed =
            parse_params(" cpu.cpu-load-percent=50 , ,disk.runtime=a=b,cpu.cpu-method=all")
                .unwrap();
        assert_eq!(parsed["cpu"]["cpu-load-percent"], "50");
        assert_eq!(parsed["cpu"]["cpu-method"], "all");
        assert_eq!(parsed["disk"]["runtime"], "a=b");
        assert_eq!(
            parse_params("nodot").unwrap_err(),
            r#"missing workload prefix (expected workload.key=value): "nodot""#
        );
        assert_eq!(
            parse_params(".key=v").unwrap_err(),
            r#"empty workload name in ".key=v""#
        );
        assert_eq!(
            parse_params("cpu.key").unwrap_err(),
            r#"missing '=' in param (expected workload.key=value): "cpu.key""#
        );
        assert_eq!(
            parse_params("cpu.=v").unwrap_err(),
            r#"empty param key in "cpu.=v""#
        );
        assert!(parse_params("  ").unwrap().is_empty());
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("virtwork"));
        assert!(is_dns_label("a-1"));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn public_keys() {
        let good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx user@host";
        assert!(check_public_key(good, "--ssh-key").is_ok());
        assert!(
            check_public_key("from=\"10.0.0.1\" ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB", "k").is_ok()
        );
        for bad in [
            "hello",
            "ssh-ed25519",
            "ssh-ed25519 short",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5$$$",
        ] {
            assert!(check_public_key(bad, "--ssh-key").is_err(), "{bad}");
        }
        let err = check_public_key("-----BEGIN OPENSSH PRIVATE KEY-----", "--ssh-key").unwrap_err();
        assert!(err.to_string().contains("private key"));
    }

    #[test]
    fn yaml_key_spellings_are_canonicalised() {
        assert_eq!(canonical_key("cpu_cores"), "cpu-cores");
        assert_eq!(canonical_key("data_disk_size"), "disk-size");
        assert_eq!(canonical_key("Namespace"), "namespace");
        assert_eq!(canonical_key("bogus_key"), "bogus-key");
    }
}
