//! The command-line surface, as clap derive definitions only.
//!
//! Every flag that maps to a configuration key is an `Option` so that "not given" is
//! distinguishable from "given with the default value": the configuration layers explicitly
//! given flags over `VIRTWORK_*` env, the YAML file and defaults. Values are parsed into their
//! model types by clap itself (`FromStr`, `ValueEnum`), so a bad flag fails with the same
//! "expected ..." reason as a bad variable or YAML key. No logic lives here.
//!
//! Help shows a command's own flags first, then the global ones under "Global options"; a
//! global flag that does nothing for a command is hidden there ([`command`]).
//!
//! Must not: depend on anything but the model.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::model::{
    AccessMode, Burst, ColorChoice, CpuCores, DnsLabel, DryRunFlag, EvictionStrategy, GuestOs,
    ImageRef, LogFormat, OutputChoice, PublicKey, Qps, Quantity, ReadyCondition, RunIdSelector,
    Secret, SshUser, StorageClassName, Switch, TimeoutSecs, VmConcurrency, VmCount, VolumeMode,
};

/// Create VMs on OpenShift Virtualization / KubeVirt with continuous workloads.
#[derive(Debug, Parser)]
#[command(
    name = "virtwork",
    about = "Create VMs on OpenShift with continuous workloads",
    long_about = "virtwork creates virtual machines on clusters with OpenShift Virtualization \
(KubeVirt) and runs continuous workloads inside them — CPU, memory, disk I/O, PostgreSQL, \
network throughput and latency, and chaos — to produce realistic metrics. The workloads run \
under systemd inside the guests and keep running after virtwork exits.",
    version = VERSION_LINE,
    long_version = LONG_VERSION,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// What `--version` prints after the program name: the same lines as `virtwork version`.
const LONG_VERSION: &str = concat!(
    "version ",
    env!("CARGO_PKG_VERSION"),
    "\n  commit: ",
    env!("VIRTWORK_COMMIT"),
    "\n  built:  ",
    env!("VIRTWORK_DATE")
);
const VERSION_LINE: &str = concat!("version ", env!("CARGO_PKG_VERSION"));

/// The help heading of the flags every command accepts.
pub const GLOBAL_HEADING: &str = "Global options";

/// Flags accepted by every subcommand (before or after its name), shown under
/// [`GLOBAL_HEADING`]; those that do nothing for a command are hidden there ([`command`]).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = GLOBAL_HEADING)]
pub struct GlobalArgs {
    /// Kubernetes namespace for VMs [env: VIRTWORK_NAMESPACE] [default: virtwork]
    #[arg(short = 'n', long, global = true, value_name = "NAME")]
    pub namespace: Option<DnsLabel>,

    /// Path to kubeconfig file [env: VIRTWORK_KUBECONFIG, KUBECONFIG]
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use [env: VIRTWORK_CONTEXT] [default: the current context]
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,

    /// Path to YAML config file
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Enable verbose (debug) output [env: VIRTWORK_VERBOSE]
    #[arg(short = 'v', long, global = true)]
    pub verbose: bool,

    /// Enable audit logging to SQLite [env: VIRTWORK_AUDIT] [default: true]
    // `--audit=false` is the Go tool's spelling, still accepted (with a warning).
    #[arg(
        long,
        global = true,
        overrides_with = "no_audit",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        value_name = "BOOL"
    )]
    pub audit: Option<Switch>,

    /// Disable audit logging
    #[arg(long, global = true, overrides_with = "audit")]
    pub no_audit: bool,

    /// Path to audit database file [env: VIRTWORK_AUDIT_DB] [default:
    /// $XDG_STATE_HOME/virtwork/virtwork.db, else ~/.local/state/virtwork/virtwork.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub audit_db: Option<PathBuf>,

    /// Log format on stderr [env: VIRTWORK_LOG_FORMAT] [default: text]
    #[arg(long, global = true, value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Format of the result on stdout [env: VIRTWORK_OUTPUT] [default: text]
    #[arg(short = 'o', long, global = true, value_enum, value_name = "FORMAT")]
    pub output: Option<OutputChoice>,

    /// Colour in log lines: auto (a terminal, and NO_COLOR unset), always or never
    #[arg(long, global = true, value_enum, value_name = "WHEN")]
    pub color: Option<ColorChoice>,

    /// Client-side API request rate limit, requests per second [env: VIRTWORK_QPS] [default: 50]
    #[arg(long, global = true, value_name = "N")]
    pub qps: Option<Qps>,

    /// Client-side API request burst above --qps [env: VIRTWORK_BURST] [default: 100]
    #[arg(long, global = true, value_name = "N")]
    pub burst: Option<Burst>,

    /// Warnings for given global flags that do nothing for the command (filled by the
    /// binary from clap's matches; see `usage::inert_flag_notices`).
    #[arg(skip)]
    pub inert_flags: Vec<String>,
}

/// Global flags (argument ids) that do nothing for the subcommand `name`: hidden from its
/// help and completion (still accepted, so a wrapper passing them everywhere keeps working).
pub fn inert_global_flags(name: &str) -> &'static [&'static str] {
    match name {
        // Read the audit database (a --run-id prefix; disruption's --execution and churn
        // causes), never record.
        "status" | "verify" | "disruption" => &["audit", "no_audit"],
        "validate" => &[
            "namespace",
            "kubeconfig",
            "context",
            "qps",
            "burst",
            "audit",
            "no_audit",
            "audit_db",
        ],
        "audit" => &["kubeconfig", "context", "qps", "burst", "audit", "no_audit"],
        "report" => &["namespace", "audit", "no_audit", "output"],
        "version" => &[
            "namespace",
            "kubeconfig",
            "context",
            "config",
            "audit",
            "no_audit",
            "audit_db",
            "log_format",
            "qps",
            "burst",
        ],
        "completion" | "man" => &[
            "namespace",
            "kubeconfig",
            "context",
            "config",
            "audit",
            "no_audit",
            "audit_db",
            "log_format",
            "output",
            "color",
            "qps",
            "burst",
            "verbose",
        ],
        _ => &[],
    }
}

/// The command line as parsed and documented (help, completion, man page): [`Cli`] with
/// each subcommand's inert global flags hidden. A hidden copy of a global flag on the
/// subcommand stops clap propagating the shown one there; its value still reaches
/// [`GlobalArgs`].
pub fn command() -> clap::Command {
    let cli = Cli::command();
    let globals: Vec<clap::Arg> = cli
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .cloned()
        .collect();
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    names.iter().fold(cli, |cli, name| {
        cli.mut_subcommand(name, |sub| {
            globals
                .iter()
                .filter(|arg| inert_global_flags(name).contains(&arg.get_id().as_str()))
                .fold(sub, |sub, arg| sub.arg(arg.clone().hide(true)))
        })
    })
}

/// The command line as shell completion and the man page describe it: every subcommand
/// carries the global flags that do something there, and only those (completion scripts
/// offer hidden flags too, so [`command`]'s hidden copies would not keep them out).
pub fn documented_command() -> clap::Command {
    let cli = Cli::command();
    let globals: Vec<clap::Arg> = cli
        .get_arguments()
        .filter(|arg| arg.is_global_set())
        .map(|arg| arg.clone().global(false))
        .collect();
    with_useful_globals(cli.mut_args(|arg| arg.global(false)), &globals, None)
}

/// Adds to each subcommand of `command` (recursively) the `globals` not inert for its
/// top-level subcommand (`top`, or its own name at the top level).
fn with_useful_globals(
    command: clap::Command,
    globals: &[clap::Arg],
    top: Option<&str>,
) -> clap::Command {
    command.mut_subcommands(|sub| {
        let name = top.unwrap_or(sub.get_name()).to_string();
        let sub = globals
            .iter()
            .filter(|arg| !inert_global_flags(&name).contains(&arg.get_id().as_str()))
            .fold(sub, |sub, arg| sub.arg(arg.clone()));
        with_useful_globals(sub, globals, Some(&name))
    })
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create VMs and start workloads
    #[command(
        long_about = "Plan a fleet of VMs for the selected workloads, create the namespace, \
Services, cloud-init Secrets and VirtualMachines, and wait until the VMs run. Each workload \
is injected through cloud-init as a systemd service inside the guest."
    )]
    Run(Box<RunArgs>),

    /// Delete what virtwork's labels mark in the namespaces in scope
    #[command(
        long_about = "Delete what cleanup finds by virtwork's labels in the namespaces in scope \
(--namespace, or every namespace with --all-namespaces): VMs, VMIs, migrations, services, \
secrets, data volumes and claims labelled app.kubernetes.io/managed-by=virtwork that also carry \
a virtwork/run-id label (the given run's with --run-id), and with --delete-namespace the \
namespace unless it holds something virtwork did not create. Objects without those labels, or in other namespaces, \
are not touched. A kind it cannot list (no permission, not served) is reported, the rest is \
still deleted, and the command exits 1."
    )]
    Cleanup(CleanupArgs),

    /// Validate catalog entries
    #[command(
        long_about = "Check catalog entries: YAML parsing, service file presence, storage \
constraints, service port ranges, role-to-service alignment and placeholder consistency."
    )]
    Validate(ValidateArgs),

    /// Show the runs present on the cluster and their VMs
    Status(StatusArgs),

    /// Check that each VM's workload shows up in Prometheus
    #[command(
        long_about = "Find the run's VMs on the cluster and query Prometheus for each \
workload's expected signals (KubeVirt's per-VMI metrics): vCPU time for cpu, guest memory \
for memory, data-disk traffic and IOPS for disk and database, interface traffic for network \
and tps, filesystem fill for chaos-disk. Prints the query, the observed value, the threshold \
and the verdict per VM and signal. Exit 0 when every expected signal is present, 1 when one \
is missing. Prometheus is found at the cluster's monitoring route (OpenShift's \
openshift-monitoring/thanos-querier Route, over verified https with your kubeconfig token), \
else through the API server's service proxy (openshift-monitoring/thanos-querier, then \
monitoring/prometheus-k8s), unless --prometheus gives its URL (sent no token unless \
--prometheus-token-file or --prometheus-use-cluster-token says which)."
    )]
    Verify(VerifyArgs),

    /// Restart, stop and start, and live-migrate a share of a run's VMs at a steady rate
    #[command(
        long_about = "For --duration, take lifecycle actions on a share of a run's running \
VMs at --rate: restart (KubeVirt's restart subresource), stop-start (stop, then start once \
the VMI is gone) and migrate (a VirtualMachineInstanceMigration labelled for cleanup). No VM \
gets two actions at once; each VM is read again before every action and acted on only while \
it is the VM churn listed. Without --run-id churn asks before acting on every run in scope \
(--yes skips the question). Ctrl-C starts nothing new, starts every VM churn stopped, reports \
and exits 130. --dry-run prints the schedule."
    )]
    Churn(ChurnArgs),

    /// Report what a window (an upgrade, a drain, a churn) did to each VM and its workload
    #[command(
        long_about = "Over a window (--since, --from/--to, or the time of a recorded churn \
with --execution), report per VM its live migrations (start, end, duration, source and target \
node, result: from VirtualMachineInstanceMigration objects and the VMI's migrationState, else \
from Prometheus' kubevirt_vmi_migration_* series and node changes of kubevirt_vmi_info), its \
restarts (a new VMI, a vCPU counter reset; the cause when the audit database recorded a churn \
action) and, when Prometheus is reachable (found as verify finds it), how long its workload's \
expected signal was absent or below the contract verify judges by. Exit 0 when every VM stayed \
within the budget (--max-interruption, --allow-restarts), 1 when one did not."
    )]
    Disruption(DisruptionArgs),

    /// Query the local audit database
    #[command(subcommand)]
    Audit(AuditCommand),

    /// Write one self-contained HTML page about recorded runs, with charts
    #[command(
        long_about = "Read the audit database and write one HTML page about the given runs: \
what was asked and created, how long each stage took, what failed and why, time to ready \
(created, scheduled, running, ready: a histogram, percentiles and the slowest VMs), the \
churn actions taken on the run's VMs and, from Prometheus (found as verify finds it, or \
--prometheus), each workload's signals across the VMs and the alerts that fired. Repeat \
--run-id to compare runs side by side. The page \
loads nothing from the network and needs no JavaScript: charts are inline SVG, each with a \
table of its data."
    )]
    Report(ReportArgs),

    /// Print the version information
    Version,

    /// Generate shell completions
    Completion {
        /// Shell to generate completions for
        #[arg(value_enum)]
        shell: CompletionShell,
    },

    /// Print the man page (roff) to stdout
    Man,
}

/// Flags of `virtwork run`.
#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Workloads to deploy (comma-separated) [env: VIRTWORK_WORKLOADS] [default: all built-ins]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub workloads: Option<Vec<String>>,

    /// Number of VMs per workload [env: VIRTWORK_VM_COUNT] [default: 1]
    #[arg(long, value_name = "N")]
    pub vm_count: Option<VmCount>,

    /// CPU cores per VM [env: VIRTWORK_CPU_CORES] [default: 2]
    #[arg(long, value_name = "N")]
    pub cpu_cores: Option<CpuCores>,

    /// Memory per VM, a Kubernetes quantity (e.g. 2Gi) [env: VIRTWORK_MEMORY] [default: 2Gi]
    #[arg(long, value_name = "QUANTITY")]
    pub memory: Option<Quantity>,

    /// Data disk size for disk-backed workloads [env: VIRTWORK_DISK_SIZE] [default: 10Gi]
    #[arg(long, visible_alias = "data-disk-size", value_name = "QUANTITY")]
    pub disk_size: Option<Quantity>,

    /// StorageClass of the data disks (default: the cluster's virtualization default class,
    /// else its default class) [env: VIRTWORK_STORAGE_CLASS]
    #[arg(long, value_name = "NAME")]
    pub storage_class: Option<StorageClassName>,

    /// Access mode of the data disks; ReadWriteMany lets VMs with data disks live-migrate
    /// [env: VIRTWORK_ACCESS_MODE] [default: the StorageClass's StorageProfile decides]
    #[arg(long, value_enum, value_name = "MODE")]
    pub access_mode: Option<AccessMode>,

    /// Volume mode of the data disks: Filesystem (a disk image file on the volume) or Block
    /// (the raw device); the guest formats its disk either way [env: VIRTWORK_VOLUME_MODE]
    /// [default: the StorageClass's StorageProfile decides]
    #[arg(long, value_enum, ignore_case = true, value_name = "MODE")]
    pub volume_mode: Option<VolumeMode>,

    /// What a node drain does to each VM: auto decides per VM from the schedulable nodes
    /// and the VM's storage so that no VM's own eviction strategy blocks a drain; the drain
    /// still needs a node with room and a matching node selector
    /// [env: VIRTWORK_EVICTION_STRATEGY] [default: auto]
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub eviction_strategy: Option<EvictionStrategy>,

    /// Container disk image for VMs [env: VIRTWORK_CONTAINER_DISK_IMAGE]
    /// [default: quay.io/containerdisks/fedora:42]
    #[arg(long, value_name = "IMAGE")]
    pub container_disk_image: Option<ImageRef>,

    /// Guest OS family the payloads are written for: auto (from the image name), fedora or
    /// debian [env: VIRTWORK_GUEST_OS] [default: auto]
    #[arg(long, value_name = "OS")]
    pub guest_os: Option<GuestOs>,

    /// Print the objects without creating them (client), or submit them with dryRun=All
    /// (server). Values: `client`, `server`
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "client",
        value_name = "MODE"
    )]
    pub dry_run: Option<DryRunFlag>,

    /// Skip waiting for VM readiness
    // `--no-wait=true|false` is the Go tool's spelling, still accepted (with a warning).
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        value_name = "BOOL"
    )]
    pub no_wait: Option<Switch>,

    /// Time limit for the whole run, creation and readiness: seconds or a duration (10m, 1h) [env: VIRTWORK_TIMEOUT] [default: 10m]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<TimeoutSecs>,

    /// What "ready" means [env: VIRTWORK_READY_CONDITION] [default: running]
    #[arg(long, value_enum, value_name = "CONDITION")]
    pub ready_condition: Option<ReadyCondition>,

    /// Stop waiting once a VM stayed ErrImagePull, ErrorUnschedulable, DataVolumeError,
    /// CrashLoopBackOff... for GRACE (bare flag: 1m) [env: VIRTWORK_FAIL_FAST] [default: off]
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "on",
        value_name = "GRACE"
    )]
    pub fail_fast: Option<crate::model::FailFast>,

    /// SSH user for VMs; an empty value creates no user [env: VIRTWORK_SSH_USER] [default: virtwork]
    #[arg(long, value_name = "USER")]
    pub ssh_user: Option<SshUser>,

    /// SSH password for VMs (stored in cloud-init only as a SHA-512 crypt hash)
    /// [env: VIRTWORK_SSH_PASSWORD]
    #[arg(long, value_name = "PASSWORD")]
    pub ssh_password: Option<Secret>,

    /// SSH authorized key (repeatable, or comma-separated) [env: VIRTWORK_SSH_AUTHORIZED_KEYS]
    // A value starting with '-' (a pasted `-----BEGIN ... PRIVATE KEY-----`) must reach the
    // key parser, which refuses it without echoing it, instead of clap's "unexpected argument".
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "KEY",
        allow_hyphen_values = true
    )]
    pub ssh_key: Vec<PublicKey>,

    /// SSH public key file path (repeatable)
    #[arg(long, value_delimiter = ',', value_name = "PATH")]
    pub ssh_key_file: Vec<PathBuf>,

    /// Max concurrent VM creation operations [env: VIRTWORK_VM_CONCURRENCY] [default: 10]
    #[arg(long, value_name = "N")]
    pub vm_concurrency: Option<VmConcurrency>,

    /// Most VMs starting at once (created, not yet ready); creation resumes as VMs become
    /// ready [env: VIRTWORK_MAX_STARTING]
    #[arg(long, value_name = "N")]
    pub max_starting: Option<crate::model::MaxStarting>,

    /// Spread VM creation evenly over this duration, e.g. 10m or 1h30m [env: VIRTWORK_RAMP]
    #[arg(long, value_name = "DURATION")]
    pub ramp: Option<crate::model::Ramp>,

    /// Per-workload params (comma-separated workload.key=value pairs) [env: VIRTWORK_PARAMS]
    #[arg(long, value_name = "PAIRS")]
    pub params: Option<String>,

    /// Path to catalog directory [env: VIRTWORK_CATALOG_DIR] [default: ~/.virtwork/catalog]
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,

    /// Catalog entries to load (comma-separated) [env: VIRTWORK_FROM_CATALOG]
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub from_catalog: Option<Vec<DnsLabel>>,
}

/// Flags of `virtwork cleanup`.
#[derive(Debug, Args, Clone, Default)]
pub struct CleanupArgs {
    /// Also delete the namespace
    #[arg(long, conflicts_with = "all_namespaces")]
    pub delete_namespace: bool,

    /// Only delete resources from this specific run: its id, or at least its first 6 hex
    /// digits (the run tag in VM names)
    #[arg(long, value_name = "ID")]
    pub run_id: Option<RunIdSelector>,

    /// Print intent without destroying resources
    // `--dry-run=true|false` is the Go tool's spelling, still accepted (with a warning).
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "",
        value_name = "BOOL"
    )]
    pub dry_run: Option<Switch>,

    /// Skip confirmation prompt and proceed with cleanup
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Wait until every deleted object is gone
    #[arg(long)]
    pub wait: bool,

    /// Time limit, --wait included: seconds or a duration (10m, 1h) [env: VIRTWORK_TIMEOUT] [default: 10m]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<TimeoutSecs>,

    /// Look in every namespace instead of --namespace
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,
}

/// Flags of `virtwork validate`.
#[derive(Debug, Args, Clone, Default)]
pub struct ValidateArgs {
    /// Catalog entries to check (default: every entry in the catalog directory)
    pub entries: Vec<String>,

    /// Path to catalog directory [env: VIRTWORK_CATALOG_DIR] [default: ~/.virtwork/catalog]
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
}

/// Flags of `virtwork status`.
#[derive(Debug, Args, Clone, Default)]
pub struct StatusArgs {
    /// Only show this run: its id, or at least its first 6 hex digits
    #[arg(long, value_name = "ID")]
    pub run_id: Option<RunIdSelector>,

    /// Look in every namespace instead of --namespace
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,

    /// Follow the runs until every VM runs and is ready (exit 0) or one failed (exit 1),
    /// showing each change (as lines when stdout is not a terminal)
    #[arg(long, short = 'w')]
    pub watch: bool,

    /// With --watch: stop (exit 1) once a VM stayed ErrImagePull, ErrorUnschedulable,
    /// CrashLoopBackOff... for GRACE; off: until --timeout [env: VIRTWORK_FAIL_FAST] [default: 1m]
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "on",
        value_name = "GRACE",
        requires = "watch"
    )]
    pub fail_fast: Option<crate::model::FailFast>,

    /// Time limit: seconds or a duration (30s, 2m) [env: VIRTWORK_TIMEOUT] [default: 1m, with
    /// --watch 10m]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<TimeoutSecs>,
}

/// Flags of `virtwork verify`. Values are typed here (parsed once); see
/// `config::VerifySettings::resolve` for how they combine with the configuration.
#[derive(Debug, Args, Clone, Default)]
pub struct VerifyArgs {
    /// Only verify this run: its id, or at least its first 6 hex digits
    #[arg(long, value_name = "ID")]
    pub run_id: Option<RunIdSelector>,

    /// Look in every namespace instead of --namespace
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,

    /// Range of the rate queries, a Prometheus duration (e.g. 30s, 5m, 1h) [default: 5m]
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<crate::model::Window>,

    /// Poll until every expected signal is present (and every --expect-alert has fired) or
    /// --timeout passes
    #[arg(long)]
    pub wait: bool,

    /// How long --wait keeps polling: seconds or a duration (10m, 1h) [default: 10m]
    #[arg(long, value_name = "DURATION", requires = "wait")]
    pub timeout: Option<TimeoutSecs>,

    /// Prometheus base URL (http or https), instead of finding it through the API server
    #[arg(long, value_name = "URL", value_parser = parse_prometheus_url)]
    pub prometheus: Option<http::Uri>,

    /// File holding the bearer token to send to --prometheus (a regular file of at most
    /// 64 KiB; readable by you only) [default: no token]
    #[arg(long, value_name = "PATH", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,

    /// Send the kubeconfig's own bearer token to --prometheus (it authenticates you to the
    /// cluster: use it only with a URL the cluster itself serves)
    #[arg(
        long,
        requires = "prometheus",
        conflicts_with = "prometheus_token_file"
    )]
    pub prometheus_use_cluster_token: bool,

    /// Send the token even though --prometheus is a plain http:// URL, readable by anyone
    /// on the network path
    #[arg(long, requires = "prometheus")]
    pub prometheus_allow_http_token: bool,

    /// Catalog whose entries judge catalog VMs [env: VIRTWORK_CATALOG_DIR] [default: ~/.virtwork/catalog]
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,

    /// Add each signal's PromQL to the text table (JSON always has it)
    #[arg(long)]
    pub show_queries: bool,

    /// Also report the alerts that fired for the VMs during the window (ALERTS)
    #[arg(long)]
    pub alerts: bool,

    /// Fail unless this alert fired for one of the VMs during the window (repeatable)
    #[arg(long, value_name = "NAME", value_parser = parse_alert_name)]
    pub expect_alert: Vec<String>,

    /// Fail if this alert fired for any of the VMs during the window (repeatable)
    #[arg(long, value_name = "NAME", value_parser = parse_alert_name)]
    pub forbid_alert: Vec<String>,
}

/// An alert name as Prometheus spells them (a metric name without ':').
fn parse_alert_name(text: &str) -> Result<String, String> {
    let mut chars = text.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(text.to_string())
    } else {
        Err("expected an alert name: letters, digits and '_', not starting with a digit (e.g. VirtworkExpectedSignalMissing)".into())
    }
}

/// Flags of `virtwork disruption`. See `config::DisruptionSettings::resolve`.
#[derive(Debug, Args)]
pub struct DisruptionArgs {
    /// Only this run's VMs: its id, or at least its first 6 hex digits
    #[arg(long, value_name = "ID")]
    pub run_id: Option<RunIdSelector>,

    /// Look in every namespace instead of --namespace
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,

    /// The window ends now and began this long ago (e.g. 30m, 2h) [default: 1h]
    #[arg(long, value_name = "DURATION", value_parser = parse_window, conflicts_with_all = ["from", "execution"])]
    pub since: Option<crate::model::Window>,

    /// Start of the window, RFC 3339 (e.g. 2026-12-05T10:00:00Z)
    #[arg(long, value_name = "TIME", value_parser = parse_timestamp, conflicts_with = "execution")]
    pub from: Option<jiff::Timestamp>,

    /// End of the window, RFC 3339 [default: now]
    #[arg(long, value_name = "TIME", value_parser = parse_timestamp, requires = "from")]
    pub to: Option<jiff::Timestamp>,

    /// Take the window of this recorded execution (a churn's run id in the audit database,
    /// or at least its first 6 hex digits)
    #[arg(long, value_name = "ID")]
    pub execution: Option<RunIdSelector>,

    /// Longest workload interruption within the budget (e.g. 30s, 2m) [default: two scrape
    /// intervals]
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub max_interruption: Option<crate::model::Window>,

    /// Which VMs may restart within the budget
    #[arg(long, value_enum, value_name = "WHICH")]
    pub allow_restarts: Option<crate::model::AllowRestarts>,

    /// Prometheus base URL (http or https), instead of finding it through the API server
    #[arg(long, value_name = "URL", value_parser = parse_prometheus_url)]
    pub prometheus: Option<http::Uri>,

    /// File holding the bearer token to send to --prometheus (a regular file of at most
    /// 64 KiB; readable by you only) [default: no token]
    #[arg(long, value_name = "PATH", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,

    /// Send the kubeconfig's own bearer token to --prometheus (use it only with a URL the
    /// cluster itself serves)
    #[arg(
        long,
        requires = "prometheus",
        conflicts_with = "prometheus_token_file"
    )]
    pub prometheus_use_cluster_token: bool,

    /// Send the token even though --prometheus is a plain http:// URL
    #[arg(long, requires = "prometheus")]
    pub prometheus_allow_http_token: bool,

    /// Do not look for Prometheus: migrations and restarts from the API alone
    #[arg(long, conflicts_with = "prometheus")]
    pub no_prometheus: bool,

    /// Catalog whose entries judge catalog VMs [env: VIRTWORK_CATALOG_DIR] [default: ~/.virtwork/catalog]
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
}

/// An RFC 3339 instant (`2026-12-05T10:00:00Z`, `2026-12-05T12:00:00+02:00`).
fn parse_timestamp(text: &str) -> Result<jiff::Timestamp, String> {
    text.trim().parse::<jiff::Timestamp>().map_err(|_| {
        "expected an RFC 3339 time with a UTC offset, such as 2026-12-05T10:00:00Z".to_string()
    })
}

/// Flags of `virtwork churn`. Values are typed here (parsed once); see
/// `config::ChurnSettings::resolve` for how they combine with the configuration.
#[derive(Debug, Args, Clone, Default)]
pub struct ChurnArgs {
    /// Only churn this run's VMs: its id, or at least its first 6 hex digits [default: every
    /// run in scope]
    #[arg(long, value_name = "ID")]
    pub run_id: Option<RunIdSelector>,

    /// Look in every namespace instead of --namespace
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,

    /// How long to keep churning, e.g. 90s, 10m or 1h30m [env: VIRTWORK_CHURN_DURATION]
    /// [default: 10m]
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<crate::model::Ramp>,

    /// Actions started per second, minute or hour: 30/m, 2/s, 100/h; a bare number is per
    /// minute [env: VIRTWORK_CHURN_RATE] [default: 6/m]
    #[arg(long, value_name = "N/UNIT")]
    pub rate: Option<crate::model::ChurnRate>,

    /// Percentage of the running VMs to act on, e.g. 25 or 25% [env: VIRTWORK_CHURN_SHARE]
    /// [default: 100]
    #[arg(long, visible_alias = "percent", value_name = "PERCENT")]
    pub share: Option<crate::model::Share>,

    /// Actions to take, optionally weighted: restart,stop-start=2,migrate
    /// [env: VIRTWORK_CHURN_ACTIONS] [default: restart,stop-start,migrate]
    #[arg(long, value_name = "LIST")]
    pub actions: Option<crate::model::ChurnActions>,

    /// Seed of the VM selection and the action draw, to repeat a schedule
    /// [env: VIRTWORK_CHURN_SEED] [default: random, printed in the summary]
    #[arg(long, value_name = "N")]
    pub seed: Option<crate::model::ChurnSeed>,

    /// Print the schedule without acting
    #[arg(long)]
    pub dry_run: bool,

    /// Churn every run in scope without asking (needed without --run-id when stdin is not a
    /// terminal)
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Stop (and start again every VM churn stopped) after this many consecutive actions
    /// failed the same way; 0 never stops [default: 5]
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u32>,
}

/// Flags of `virtwork report`.
#[derive(Debug, Args, Clone, Default)]
pub struct ReportArgs {
    /// The run to report on: its id, or at least its first 6 hex digits; repeat to compare
    /// runs side by side
    #[arg(long = "run-id", value_name = "ID", required = true)]
    pub run_ids: Vec<RunIdSelector>,

    /// The HTML file to write (a regular file, replaced when it exists), or - for standard
    /// output
    #[arg(long, value_name = "FILE", required = true)]
    pub html: PathBuf,

    /// Prometheus base URL (http or https) for the load and alert sections, instead of
    /// finding it through the API server as verify does
    #[arg(long, value_name = "URL", value_parser = parse_prometheus_url)]
    pub prometheus: Option<http::Uri>,

    /// File holding the bearer token to send to --prometheus (a regular file of at most
    /// 64 KiB; readable by you only) [default: no token]
    #[arg(long, value_name = "PATH", requires = "prometheus")]
    pub prometheus_token_file: Option<PathBuf>,

    /// Send the kubeconfig's own bearer token to --prometheus (use it only with a URL the
    /// cluster itself serves)
    #[arg(
        long,
        requires = "prometheus",
        conflicts_with = "prometheus_token_file"
    )]
    pub prometheus_use_cluster_token: bool,

    /// Send the token even though --prometheus is a plain http:// URL
    #[arg(long, requires = "prometheus")]
    pub prometheus_allow_http_token: bool,

    /// Build the page from the audit database alone: no cluster, no Prometheus
    #[arg(long, conflicts_with = "prometheus")]
    pub no_prometheus: bool,

    /// Catalog whose entries judge catalog VMs [env: VIRTWORK_CATALOG_DIR] [default: ~/.virtwork/catalog]
    #[arg(long, value_name = "DIR")]
    pub catalog_dir: Option<PathBuf>,
}

fn parse_window(text: &str) -> Result<crate::model::Window, String> {
    crate::model::Window::parse(text)
}

fn parse_prometheus_url(text: &str) -> Result<http::Uri, String> {
    const FORM: &str = "expected an http:// or https:// URL such as https://thanos-querier-openshift-monitoring.apps.example.com";
    let uri: http::Uri = text.parse().map_err(|_| FORM.to_string())?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    if !scheme_ok || uri.host().is_none_or(str::is_empty) || uri.query().is_some() {
        return Err(FORM.to_string());
    }
    Ok(uri)
}

#[derive(Debug, Subcommand, Clone)]
pub enum AuditCommand {
    /// List recorded executions, newest first
    List {
        /// Show at most N executions
        #[arg(long, default_value_t = 20, value_name = "N")]
        limit: u32,

        /// Only executions with this status (in_progress, success, failed, aborted, cancelled)
        #[arg(long, value_name = "STATUS")]
        status: Option<String>,
    },
    /// Show one execution: parameters, workloads, VMs, events and linked cleanups
    Show {
        /// The run id to show, or at least its first 6 hex digits
        run_id: RunIdSelector,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}
