//! The settings each command runs with. Every field means one thing, and each command gets
//! only its own struct; the types say what was validated.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::AuditCommand;
use crate::k8s::client::RateLimit;
use crate::k8s::scope::Scope;
use crate::model::Window;
use crate::model::{
    DnsLabel, DryRunMode, LogFormat, OutputFormat, Quantity, ReadyCondition, RunIdSelector, Secret,
    TimeoutSecs,
};
use crate::plan::PlanInput;

/// What every command shares.
#[derive(Debug, Clone)]
pub struct GlobalSettings {
    pub namespace: DnsLabel,
    pub cluster: ClusterAccess,
    pub audit: AuditDb,
    pub log_format: LogFormat,
    pub verbose: bool,
    pub output: OutputFormat,
    /// Whether log lines carry ANSI colours (`--color`, `NO_COLOR`, stderr a terminal).
    pub ansi: bool,
    /// Warnings about accepted but legacy or ineffective inputs, logged once logging is up.
    pub notices: Vec<String>,
}

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct ClusterAccess {
    /// Kubeconfig files in merge order (the explicit key, or the `KUBECONFIG` list); empty
    /// means the in-cluster service account, then `~/.kube/config`.
    pub kubeconfig: Vec<PathBuf>,
    /// The kubeconfig value as the user gave it (key, else `KUBECONFIG`), for the audit record.
    pub kubeconfig_given: Option<String>,
    /// The kubeconfig context to use (`--context`); None: the current context.
    pub context: Option<String>,
    pub rate_limit: RateLimit,
}

/// The audit database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditDb {
    /// Whether runs and cleanups are recorded (`--no-audit` clears it).
    pub enabled: bool,
    pub path: PathBuf,
}

impl AuditDb {
    /// The database to record into, `None` when auditing is off.
    pub fn recording_path(&self) -> Option<&Path> {
        self.enabled.then_some(self.path.as_path())
    }
}

/// `virtwork run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub global: GlobalSettings,
    /// Everything the planner needs.
    pub plan: PlanInput,
    /// `None`: a real run.
    pub dry_run: Option<DryRunMode>,
    /// Wait for the VMs to become ready (`--no-wait` clears it).
    pub wait_for_ready: bool,
    /// Bounds the whole run; at least 1 when waiting.
    pub timeout: TimeoutSecs,
    pub ready_condition: ReadyCondition,
    /// `--fail-fast`: give up on the wait once a VM stayed stuck this long.
    pub fail_fast: crate::model::FailFast,
    pub vm_concurrency: usize,
    /// `--max-starting`, `--ramp`.
    pub pacing: crate::model::Pacing,
    /// The workloads `--params` (or `VIRTWORK_PARAMS`) and the configuration file's
    /// `workloads.<name>` sections name, checked against the known workloads once the catalog
    /// is read.
    pub param_prefixes: Vec<crate::plan::ParamPrefixes>,
}

/// `virtwork cleanup`.
#[derive(Debug, Clone)]
pub struct CleanupSettings {
    pub global: GlobalSettings,
    /// Preview only (`--dry-run`, or `dry-run` from the environment or file).
    pub dry_run: bool,
    pub delete_namespace: bool,
    /// `--run-id` as given; resolved once the cluster is reached.
    pub run_id: Option<RunIdSelector>,
    /// Delete without asking (`--yes`).
    pub yes: bool,
    /// Wait until every deleted object is gone (`--wait`).
    pub wait: bool,
    /// Bounds the whole cleanup, waiting included; at least 1 with `--wait`.
    pub timeout: TimeoutSecs,
    pub all_namespaces: bool,
}

/// `virtwork status`.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    pub global: GlobalSettings,
    /// `--run-id` as given; resolved once the cluster is reached.
    pub run_id: Option<RunIdSelector>,
    pub all_namespaces: bool,
    /// `-o wide`: one row per VM instead of one line per run.
    pub wide: bool,
    /// `--watch`: follow the runs until they are ready or one failed.
    pub watch: bool,
    /// With `--watch`: how long a VM may stay stuck before following ends (None: until the
    /// timeout).
    pub fail_fast: Option<std::time::Duration>,
    /// Bounds the whole command (with `--watch`, the whole following).
    pub timeout: TimeoutSecs,
}

/// `virtwork validate`.
#[derive(Debug, Clone)]
pub struct ValidateSettings {
    pub global: GlobalSettings,
    pub catalog_dir: PathBuf,
    /// Entries to check; empty: every entry in the directory.
    pub entries: Vec<String>,
    /// What each entry is test-built with: the built-in defaults.
    pub sample: SampleBuild,
}

/// The built-in defaults a catalog entry is test-built with by `validate`.
#[derive(Debug, Clone)]
pub struct SampleBuild {
    pub namespace: DnsLabel,
    pub cpu_cores: u32,
    pub memory: Quantity,
    pub disk_size: Quantity,
}

/// `virtwork audit`.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub global: GlobalSettings,
    pub command: AuditCommand,
    /// Only executions in this namespace: `--namespace` when given on the command line (the
    /// configured default namespace must not hide other runs).
    pub namespace_filter: Option<DnsLabel>,
}

/// `virtwork report`.
#[derive(Debug, Clone)]
pub struct ReportSettings {
    pub global: GlobalSettings,
    /// The runs on the page as given (resolved against the audit database by the command,
    /// which also drops repeats).
    pub run_ids: Vec<RunIdSelector>,
    /// The page's file; its directory exists and it is not a directory itself.
    pub html: PathBuf,
    /// Where the load and alert sections come from; None with `--no-prometheus`.
    pub prometheus: Option<PrometheusTarget>,
    /// Where catalog workloads' signals are read from (for the disruption timeline).
    pub catalog_dir: PathBuf,
}

/// Where `virtwork verify` finds Prometheus.
#[derive(Debug, Clone, PartialEq)]
pub enum PrometheusTarget {
    /// Through the API server's service proxy (see verify/prometheus.rs for the order).
    Discover,
    /// At this URL (never with userinfo), sending `credential`.
    Url {
        url: http::Uri,
        credential: PrometheusCredential,
    },
}

/// What verify sends to a `--prometheus` URL (never over plain http unless allowed).
#[derive(Debug, Clone, PartialEq)]
pub enum PrometheusCredential {
    /// No token (the default).
    None,
    /// The token of `--prometheus-token-file`.
    Token(Secret),
    /// The kubeconfig's own bearer token (`--prometheus-use-cluster-token`).
    ClusterToken,
}

/// `virtwork verify`.
#[derive(Debug, Clone)]
pub struct VerifySettings {
    pub global: GlobalSettings,
    /// The run's namespace (None: every namespace) and run id (the text of `--run-id` until
    /// the command resolves it).
    pub scope: Scope,
    /// `--run-id` as given.
    pub run_id: Option<RunIdSelector>,
    pub window: Window,
    /// Some(timeout) with `--wait`.
    pub wait: Option<Duration>,
    pub prometheus: PrometheusTarget,
    /// Where catalog VMs' entries are read from (their signals are never read from the cluster).
    pub catalog_dir: PathBuf,
    /// `--show-queries`: the text table gets a QUERY column.
    pub show_queries: bool,
    /// `--alerts`, `--expect-alert`, `--forbid-alert`.
    pub alerts: crate::verify::alerts::AlertChecks,
    pub output: OutputFormat,
}

/// The window `virtwork disruption` looks at, as given (made concrete by the command, which
/// knows the time and reads the audit database).
#[derive(Debug, Clone, PartialEq)]
pub enum DisruptionSpan {
    /// `--since`: ending now.
    Since(Window),
    /// `--from` [`--to`, else now].
    Between {
        from: jiff::Timestamp,
        to: Option<jiff::Timestamp>,
    },
    /// `--execution`: the start and end of a recorded execution (its run id, or a prefix
    /// resolved against the audit database).
    Execution(RunIdSelector),
}

/// `virtwork disruption`.
#[derive(Debug, Clone)]
pub struct DisruptionSettings {
    pub global: GlobalSettings,
    /// The run's namespace (None: every namespace) and run id (the text of `--run-id` until
    /// the command resolves it).
    pub scope: Scope,
    /// `--run-id` as given.
    pub run_id: Option<RunIdSelector>,
    pub span: DisruptionSpan,
    /// `--max-interruption`; None: two scrape intervals, once known.
    pub max_interruption: Option<Duration>,
    pub allow_restarts: crate::model::AllowRestarts,
    /// None with `--no-prometheus`.
    pub prometheus: Option<PrometheusTarget>,
    pub catalog_dir: PathBuf,
    pub output: OutputFormat,
}

/// `virtwork churn`: the scope (flags only) and the `churn-*` keys.
#[derive(Debug, Clone)]
pub struct ChurnSettings {
    pub global: GlobalSettings,
    /// The run's namespace (None: every namespace) and run id (None: every run; the text of
    /// `--run-id` until the command resolves it).
    pub scope: Scope,
    /// `--run-id` as given.
    pub run_id: Option<RunIdSelector>,
    pub duration: Duration,
    pub rate: crate::model::ChurnRate,
    pub share: crate::model::Share,
    pub actions: crate::model::ChurnActions,
    /// `None`: a random seed, reported so the schedule can be repeated.
    pub seed: Option<u64>,
    pub dry_run: bool,
    /// `--yes`: no confirmation without `--run-id`.
    pub yes: bool,
    /// Consecutive identical failures that stop churn (0: never).
    pub max_failures: u32,
}
