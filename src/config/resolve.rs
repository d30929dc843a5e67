//! From the merged layers to each command's settings.
//!
//! [`Layers::load`] parses every source (flags > environment > YAML file > defaults) and
//! merges them key by key; each `XSettings::resolve` then takes what its command needs and
//! applies the checks that involve more than one key (a password without a user, a zero
//! timeout while waiting, catalog entries without a catalog directory).

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::defaults::{self, CATALOG_SUBDIR};
use super::env::{self, EnvView};
use super::flags;
use super::params::parse_params;
use super::partial::Partial;
use super::settings::{
    AuditDb, AuditSettings, ChurnSettings, CleanupSettings, ClusterAccess, DisruptionSettings,
    DisruptionSpan, GlobalSettings, ReportSettings, RunSettings, SampleBuild, StatusSettings,
    ValidateSettings, VerifySettings,
};
use super::value::{Source, Sourced, check_minimum};
use super::yaml::{self, FileLayer};
use crate::cli::{
    AuditCommand, ChurnArgs, CleanupArgs, DisruptionArgs, GlobalArgs, ReportArgs, RunArgs,
    StatusArgs, ValidateArgs, VerifyArgs,
};
use crate::error::{Error, Result};
use crate::k8s::client::RateLimit;
use crate::k8s::scope::Scope;
use crate::model::Window;
use crate::model::{
    DnsLabel, MIN_DISK_SIZE, MIN_VM_MEMORY, OutputFormat, ReadyCondition, SshAccess, TimeoutSecs,
};
use crate::plan::{PlanInput, WorkloadOverride};
use crate::workloads::{BUILTIN_NAMES, check_builtin_names};

/// Set by the Go tool's example deployment; read only to say that it does nothing.
const CLEANUP_MODE_ENV: &str = "VIRTWORK_CLEANUP_MODE";

/// `virtwork status`'s time limit when none is configured.
const STATUS_DEFAULT_TIMEOUT: TimeoutSecs = match TimeoutSecs::new(60) {
    Some(timeout) => timeout,
    None => panic!("60 s is a valid timeout"),
};

/// Every source parsed and merged, plus what is not a key: the per-workload YAML sections
/// and the environment (for `KUBECONFIG` and `HOME`).
struct Layers {
    merged: Partial,
    /// Warnings about inputs that are accepted but legacy or without effect.
    notices: Vec<String>,
    sections: BTreeMap<String, WorkloadOverride>,
    /// The configuration file as messages name it (empty without one).
    file: String,
    env: EnvView,
    /// `--color` (a flag only: `NO_COLOR` is its environment form).
    color: Option<crate::model::ColorChoice>,
}

impl Layers {
    /// `flags` are the command's flag layer; the file is `--config`'s. Every key of every
    /// source is parsed whatever the command, so a bad value is reported the same way by all.
    fn load(
        global: &GlobalArgs,
        flags: Partial,
        mut notices: Vec<String>,
        env: &[(String, String)],
    ) -> Result<Layers> {
        let env = EnvView::new(env);
        let file = match &global.config {
            Some(path) => yaml::load(path)?,
            None => FileLayer::default(),
        };
        notices.extend(flags::legacy_global(global));
        if env.get(CLEANUP_MODE_ENV).is_some() {
            notices.push(format!(
                "{CLEANUP_MODE_ENV} has no effect (cleanup chooses its mode from --run-id and --dry-run); remove it"
            ));
        }
        notices.extend(file.notices.iter().cloned());
        let merged = flags
            .or(env::layer(&env)?)
            .or(file.partial)
            .or(defaults::layer()?);
        Ok(Layers {
            merged,
            notices,
            sections: file.sections,
            file: file.shown,
            env,
            color: global.color,
        })
    }
}

/// The value of a key that has a built-in default (so some layer always sets it).
fn required<'a, T>(slot: &'a Option<Sourced<T>>, key: &str) -> Result<&'a Sourced<T>> {
    slot.as_ref().ok_or_else(|| {
        Error::runtime(format!(
            "configuration key {key} has no value and no built-in default"
        ))
    })
}

impl GlobalSettings {
    /// The settings every command shares, for a command with only the global flags.
    pub fn resolve(global: &GlobalArgs, env: &[(String, String)]) -> Result<GlobalSettings> {
        GlobalSettings::from_layers(&Layers::load(
            global,
            flags::global(global),
            Vec::new(),
            env,
        )?)
    }

    fn from_layers(layers: &Layers) -> Result<GlobalSettings> {
        let p = &layers.merged;
        let (kubeconfig, kubeconfig_given) = match &p.kubeconfig {
            Some(given) if given.value.as_os_str().is_empty() => (Vec::new(), None),
            Some(given) => (
                vec![given.value.clone()],
                Some(given.value.to_string_lossy().into_owned()),
            ),
            // kubectl's rule: a colon-separated list of files, merged in order.
            None => match layers.env.get("KUBECONFIG") {
                Some(list) => (
                    list.split(':')
                        .filter(|p| !p.is_empty())
                        .map(PathBuf::from)
                        .collect(),
                    Some(list.to_string()),
                ),
                None => (Vec::new(), None),
            },
        };
        let audit_db = match &p.audit_db {
            Some(given) if given.value.as_os_str().is_empty() => {
                return Err(Error::input(format!(
                    "invalid value \"\" for {}: expected a file path such as virtwork.db",
                    given.source
                )));
            }
            Some(given) => expand_home(&given.value, layers.env.get("HOME")),
            None => default_audit_db(layers.env.get("XDG_STATE_HOME"), layers.env.get("HOME")),
        };
        Ok(GlobalSettings {
            namespace: required(&p.namespace, "namespace")?.value.clone(),
            cluster: ClusterAccess {
                kubeconfig,
                kubeconfig_given,
                context: p
                    .context
                    .as_ref()
                    .map(|given| given.value.trim().to_string())
                    .filter(|context| !context.is_empty()),
                rate_limit: RateLimit {
                    qps: required(&p.qps, "qps")?.value.get(),
                    burst: required(&p.burst, "burst")?.value.get(),
                },
            },
            audit: AuditDb {
                enabled: required(&p.audit, "audit")?.value,
                path: audit_db,
            },
            log_format: required(&p.log_format, "log-format")?.value,
            verbose: required(&p.verbose, "verbose")?.value,
            output: required(&p.output, "output")?.value.format(),
            ansi: layers.color.unwrap_or_default().use_ansi(
                layers.env.get("NO_COLOR").is_some_and(|v| !v.is_empty()),
                std::io::stderr().is_terminal(),
            ),
            notices: layers.notices.clone(),
        })
    }
}

impl RunSettings {
    /// The settings of `virtwork run`. `env` is the process environment as (name, value) pairs.
    pub fn resolve(
        global: &GlobalArgs,
        args: &RunArgs,
        env: &[(String, String)],
    ) -> Result<RunSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::run(args)?),
            flags::legacy_run(args),
            env,
        )?;
        let p = &layers.merged;
        let from_catalog = unique_catalog_entries(p)?;
        let workloads = match &p.workloads {
            Some(given) => {
                check_workload_names(given)?;
                given.value.clone()
            }
            // Catalog entries alone run alone; give --workloads too to run both.
            None if !from_catalog.is_empty() => Vec::new(),
            None => BUILTIN_NAMES.iter().map(|s| s.to_string()).collect(),
        };
        let wait_for_ready = required(&p.wait_for_ready, "wait-for-ready")?.value;
        let timeout = required(&p.timeout, "timeout")?;
        if wait_for_ready {
            refuse_zero_timeout(timeout)?;
        }
        let global_settings = GlobalSettings::from_layers(&layers)?;
        let ready_condition = required(&p.ready_condition, "ready-condition")?.value;
        let memory = required(&p.memory, "memory")?;
        check_minimum(&memory.value, &MIN_VM_MEMORY, &memory.source)?;
        let disk_size = required(&p.disk_size, "disk-size")?;
        check_minimum(&disk_size.value, &MIN_DISK_SIZE, &disk_size.source)?;
        let plan = PlanInput {
            namespace: global_settings.namespace.clone(),
            container_disk_image: required(&p.container_disk_image, "container-disk-image")?
                .value
                .clone(),
            guest_os: required(&p.guest_os, "guest-os")?.value,
            disk_size: disk_size.value.clone(),
            storage_class: p.storage_class.as_ref().map(|given| given.value.clone()),
            access_mode: p.access_mode.as_ref().map(|given| given.value),
            volume_mode: p.volume_mode.as_ref().map(|given| given.value),
            cpu_cores: required(&p.cpu_cores, "cpu-cores")?.value.get(),
            memory: memory.value.clone(),
            eviction_strategy: required(&p.eviction_strategy, "eviction-strategy")?.value,
            workload_probe: ready_condition == ReadyCondition::Workload,
            vm_count: required(&p.vm_count, "vm-count")?.value.get(),
            catalog_dir: catalog_dir(&layers, !from_catalog.is_empty())?,
            workloads,
            from_catalog,
            workload_overrides: workload_overrides(&layers)?,
            ssh: ssh_access(p)?,
        };
        Ok(RunSettings {
            global: global_settings,
            plan,
            dry_run: required(&p.dry_run, "dry-run")?.value,
            wait_for_ready,
            timeout: timeout.value,
            ready_condition,
            fail_fast: required(&p.fail_fast, "fail-fast")?.value,
            vm_concurrency: required(&p.vm_concurrency, "vm-concurrency")?.value.get() as usize,
            pacing: pacing(p, wait_for_ready)?,
            param_prefixes: param_prefixes(&layers)?,
        })
    }
}

impl CleanupSettings {
    /// The settings of `virtwork cleanup`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &CleanupArgs,
        env: &[(String, String)],
    ) -> Result<CleanupSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::cleanup(args)),
            flags::legacy_cleanup(args),
            env,
        )?;
        let p = &layers.merged;
        let timeout = required(&p.timeout, "timeout")?;
        if args.wait {
            refuse_zero_timeout(timeout)?;
        }
        Ok(CleanupSettings {
            global: GlobalSettings::from_layers(&layers)?,
            dry_run: required(&p.dry_run, "dry-run")?.value.is_some(),
            delete_namespace: args.delete_namespace,
            run_id: args.run_id.clone(),
            yes: args.yes,
            wait: args.wait,
            timeout: timeout.value,
            all_namespaces: args.all_namespaces,
        })
    }
}

impl StatusSettings {
    /// The settings of `virtwork status`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &StatusArgs,
        env: &[(String, String)],
    ) -> Result<StatusSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::status(args)),
            Vec::new(),
            env,
        )?;
        let timeout = required(&layers.merged.timeout, "timeout")?;
        let fail_fast = required(&layers.merged.fail_fast, "fail-fast")?;
        Ok(StatusSettings {
            global: GlobalSettings::from_layers(&layers)?,
            run_id: args.run_id.clone(),
            all_namespaces: args.all_namespaces,
            wide: required(&layers.merged.output, "output")?.value.is_wide(),
            watch: args.watch,
            // Following ends on a failure; a VM stuck for a minute (an image that cannot be
            // pulled, no node that fits) is one unless the user says to wait longer.
            fail_fast: match fail_fast.source {
                Source::Default(_) => Some(crate::model::FailFast::DEFAULT_GRACE),
                _ => fail_fast.value.grace(),
            },
            // A plain status only lists: the shared key's default (sized for waiting on VMs)
            // would leave a user staring at an unreachable cluster for ten minutes. --watch
            // waits on VMs, as run does.
            timeout: match timeout.source {
                Source::Default(_) if !args.watch => STATUS_DEFAULT_TIMEOUT,
                _ => timeout.value,
            },
        })
    }
}

impl ValidateSettings {
    /// The settings of `virtwork validate`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &ValidateArgs,
        env: &[(String, String)],
    ) -> Result<ValidateSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::validate(args)),
            Vec::new(),
            env,
        )?;
        let defaults = defaults::layer()?;
        Ok(ValidateSettings {
            global: GlobalSettings::from_layers(&layers)?,
            catalog_dir: catalog_dir(&layers, true)?,
            entries: args.entries.clone(),
            sample: SampleBuild {
                namespace: required(&defaults.namespace, "namespace")?.value.clone(),
                cpu_cores: required(&defaults.cpu_cores, "cpu-cores")?.value.get(),
                memory: required(&defaults.memory, "memory")?.value.clone(),
                disk_size: required(&defaults.disk_size, "disk-size")?.value.clone(),
            },
        })
    }
}

/// `virtwork verify --wait`'s polling limit when `--timeout` is not given.
const VERIFY_DEFAULT_WAIT: TimeoutSecs = match TimeoutSecs::new(600) {
    Some(timeout) => timeout,
    None => panic!("600 s is a valid timeout"),
};

impl VerifySettings {
    /// The settings of `virtwork verify`; reads `--prometheus-token-file`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &VerifyArgs,
        env: &[(String, String)],
    ) -> Result<VerifySettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::verify(args)),
            Vec::new(),
            env,
        )?;
        let mut global = GlobalSettings::from_layers(&layers)?;
        let prometheus = super::prometheus::target(args, &mut global.notices)?;
        if let Some(timeout) = args.timeout {
            refuse_zero_timeout(&Sourced::new(timeout, Source::Flag("--timeout")))?;
        }
        Ok(VerifySettings {
            scope: Scope {
                namespace: (!args.all_namespaces).then(|| global.namespace.to_string()),
                run_id: args.run_id.as_ref().map(|id| id.to_string()),
            },
            run_id: args.run_id.clone(),
            window: args.window.unwrap_or(Window::DEFAULT),
            wait: args.wait.then(|| {
                std::time::Duration::from_secs(args.timeout.unwrap_or(VERIFY_DEFAULT_WAIT).get())
            }),
            prometheus,
            catalog_dir: catalog_dir(&layers, false)?,
            show_queries: args.show_queries,
            alerts: crate::verify::alerts::AlertChecks {
                report: args.alerts,
                expect: args.expect_alert.clone(),
                forbid: args.forbid_alert.clone(),
            },
            output: global.output,
            global,
        })
    }
}

/// The longest window `disruption` reads (its queries stay bounded in points, not in time,
/// but a month of a fleet's migrations is not an upgrade).
const MAX_DISRUPTION_WINDOW_SECS: u64 = 7 * 86_400;

impl DisruptionSettings {
    /// The settings of `virtwork disruption`; reads `--prometheus-token-file`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &DisruptionArgs,
        env: &[(String, String)],
    ) -> Result<DisruptionSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::disruption(args)),
            Vec::new(),
            env,
        )?;
        let mut global = GlobalSettings::from_layers(&layers)?;
        let prometheus = match args.no_prometheus {
            true => None,
            false => Some(super::prometheus::target(args, &mut global.notices)?),
        };
        Ok(DisruptionSettings {
            scope: Scope {
                namespace: (!args.all_namespaces).then(|| global.namespace.to_string()),
                run_id: args.run_id.as_ref().map(|id| id.to_string()),
            },
            run_id: args.run_id.clone(),
            span: disruption_span(args)?,
            max_interruption: args.max_interruption.map(Window::as_duration),
            allow_restarts: args.allow_restarts.unwrap_or_default(),
            prometheus,
            catalog_dir: catalog_dir(&layers, false)?,
            output: global.output,
            global,
        })
    }
}

/// The window as the flags give it; `--to` before `--from`, or a window longer than
/// [`MAX_DISRUPTION_WINDOW_SECS`], is refused.
fn disruption_span(args: &DisruptionArgs) -> Result<DisruptionSpan> {
    let too_long = |flag: &str, given: &str| {
        Error::input(format!(
            "invalid value \"{given}\" for {flag}: the window may be at most 7d; look at one upgrade or drain at a time"
        ))
    };
    if let Some(id) = &args.execution {
        return Ok(DisruptionSpan::Execution(id.clone()));
    }
    let Some(from) = args.from else {
        let since = args.since.unwrap_or(Window::from_secs(3_600).expect("1h"));
        if since.as_secs() > MAX_DISRUPTION_WINDOW_SECS {
            return Err(too_long("--since", &since.to_string()));
        }
        return Ok(DisruptionSpan::Since(since));
    };
    let end = args.to.unwrap_or_else(jiff::Timestamp::now);
    if end <= from {
        return Err(Error::input(format!(
            "invalid value \"{end}\" for --to: expected a time after --from {from}"
        )));
    }
    if (end.as_second() - from.as_second()) as u64 > MAX_DISRUPTION_WINDOW_SECS {
        return Err(too_long("--from", &from.to_string()));
    }
    Ok(DisruptionSpan::Between { from, to: args.to })
}

impl ChurnSettings {
    /// The settings of `virtwork churn`.
    pub fn resolve(
        global: &GlobalArgs,
        args: &ChurnArgs,
        env: &[(String, String)],
    ) -> Result<ChurnSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::churn(args)),
            Vec::new(),
            env,
        )?;
        let p = &layers.merged;
        let global = GlobalSettings::from_layers(&layers)?;
        let duration = required(&p.churn_duration, "churn-duration")?;
        let rate = required(&p.churn_rate, "churn-rate")?;
        // Bounded at parse time: a schedule is generated lazily, but its length sizes the
        // reports, the dry run and the time the cluster is churned.
        if let Err(actions) = crate::churn::check_bounds(rate.value, duration.value.get()) {
            return Err(Error::input(format!(
                "{} {} for {} {}s is {actions} actions; expected at most {} per churn: lower \
                 the rate or the duration (or run several churns)",
                rate.source,
                rate.value,
                duration.source,
                duration.value.get().as_secs(),
                crate::churn::MAX_CHURN_ACTIONS
            )));
        }
        Ok(ChurnSettings {
            scope: Scope {
                namespace: (!args.all_namespaces).then(|| global.namespace.to_string()),
                run_id: args.run_id.as_ref().map(|id| id.to_string()),
            },
            run_id: args.run_id.clone(),
            duration: required(&p.churn_duration, "churn-duration")?.value.get(),
            rate: required(&p.churn_rate, "churn-rate")?.value,
            share: required(&p.churn_share, "churn-share")?.value,
            actions: required(&p.churn_actions, "churn-actions")?.value.clone(),
            seed: p.churn_seed.as_ref().map(|given| given.value.0),
            dry_run: args.dry_run,
            yes: args.yes,
            max_failures: args
                .max_failures
                .unwrap_or(crate::churn::DEFAULT_MAX_FAILURE_STREAK),
            global,
        })
    }
}

/// `--output`, else `VIRTWORK_OUTPUT`, for commands with no other settings (`version`): a
/// broken configuration file must not stop `virtwork version` from saying what it is.
pub fn output_format(global: &GlobalArgs, env: &[(String, String)]) -> Result<OutputFormat> {
    if let Some(output) = global.output {
        return Ok(output.format());
    }
    let mut layer = Partial::default();
    if let Some(text) = EnvView::new(env).get("VIRTWORK_OUTPUT") {
        layer.set(
            "output",
            super::value::Raw::Text(text),
            Source::Env("VIRTWORK_OUTPUT"),
        )?;
    }
    Ok(layer
        .output
        .map(|given| given.value.format())
        .unwrap_or_default())
}

impl AuditSettings {
    /// The settings of `virtwork audit`.
    pub fn resolve(
        global: &GlobalArgs,
        command: &AuditCommand,
        env: &[(String, String)],
    ) -> Result<AuditSettings> {
        let layers = Layers::load(global, flags::global(global), Vec::new(), env)?;
        Ok(AuditSettings {
            global: GlobalSettings::from_layers(&layers)?,
            command: command.clone(),
            namespace_filter: global.namespace.clone(),
        })
    }
}

impl ReportSettings {
    /// The settings of `virtwork report`: the runs in the order given (a repeated one once)
    /// and a page path that can be written (an existing directory, or a missing parent
    /// directory, is refused before anything is read).
    pub fn resolve(
        global: &GlobalArgs,
        args: &ReportArgs,
        env: &[(String, String)],
    ) -> Result<ReportSettings> {
        let layers = Layers::load(
            global,
            flags::global(global).or(flags::report(args)),
            Vec::new(),
            env,
        )?;
        let run_ids = args.run_ids.clone();
        let html = &args.html;
        if html.is_dir() {
            return Err(Error::input(format!(
                "--html {}: is a directory; expected the path of the page to write, e.g. {}",
                html.display(),
                html.join("report.html").display()
            )));
        }
        let parent = html.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent.filter(|p| !p.is_dir()) {
            return Err(Error::input(format!(
                "--html {}: directory {} does not exist; create it or write the page elsewhere",
                html.display(),
                parent.display()
            )));
        }
        let mut global = GlobalSettings::from_layers(&layers)?;
        // The Prometheus flags mean what they mean for verify, checked by the same rules.
        let as_verify = VerifyArgs {
            prometheus: args.prometheus.clone(),
            prometheus_token_file: args.prometheus_token_file.clone(),
            prometheus_use_cluster_token: args.prometheus_use_cluster_token,
            prometheus_allow_http_token: args.prometheus_allow_http_token,
            ..VerifyArgs::default()
        };
        let prometheus = if args.no_prometheus {
            None
        } else {
            Some(super::prometheus::target(&as_verify, &mut global.notices)?)
        };
        Ok(ReportSettings {
            global,
            run_ids,
            html: html.clone(),
            prometheus,
            catalog_dir: catalog_dir(&layers, false)?,
        })
    }
}

/// `--max-starting` and `--ramp`. A starting limit is closed by readiness, so it needs the
/// readiness wait.
fn pacing(p: &super::partial::Partial, wait_for_ready: bool) -> Result<crate::model::Pacing> {
    if let (Some(given), false) = (&p.max_starting, wait_for_ready) {
        return Err(Error::input(format!(
            "{} needs the readiness wait (creation resumes as VMs become ready): drop              --no-wait, or pace creation with --ramp instead",
            given.source
        )));
    }
    Ok(crate::model::Pacing {
        max_starting: p.max_starting.as_ref().map(|given| given.value),
        ramp: p.ramp.as_ref().map(|given| given.value),
    })
}

fn refuse_zero_timeout(timeout: &Sourced<TimeoutSecs>) -> Result<()> {
    if timeout.value.get() == 0 {
        return Err(Error::input(format!(
            "invalid value \"0\" for {}: expected seconds or a duration (10m), at least 1s when waiting (--wait, or run without --no-wait)",
            timeout.source
        )));
    }
    Ok(())
}

/// Built-in workload names: each once, each known (with a did-you-mean hint).
fn check_workload_names(given: &Sourced<Vec<String>>) -> Result<()> {
    let mut seen = BTreeSet::new();
    for name in &given.value {
        if BUILTIN_NAMES.contains(&name.as_str()) && !seen.insert(name) {
            return Err(Error::input(format!(
                "workload {name:?} is listed twice in {}; give each once",
                given.source
            )));
        }
    }
    check_builtin_names(&given.value)
        .map_err(|err| Error::input(format!("{}: {err}", given.source)))
}

/// The catalog entries to run, each once.
fn unique_catalog_entries(p: &Partial) -> Result<Vec<String>> {
    let Some(given) = &p.from_catalog else {
        return Ok(Vec::new());
    };
    let mut seen = BTreeSet::new();
    for name in &given.value {
        if !seen.insert(name) {
            return Err(Error::input(format!(
                "catalog entry {:?} is listed twice in {}; give each once",
                name.as_str(),
                given.source
            )));
        }
    }
    Ok(given.value.iter().map(DnsLabel::to_string).collect())
}

/// The catalog directory: the key (with `~` expanded), else `$HOME/.virtwork/catalog`.
/// Without HOME that default is an error only when a catalog is `needed`.
fn catalog_dir(layers: &Layers, needed: bool) -> Result<PathBuf> {
    let home = layers.env.get("HOME");
    match &layers.merged.catalog_dir {
        Some(given) if given.value.as_os_str().is_empty() => Err(Error::input(format!(
            "invalid value \"\" for {}: expected a directory path",
            given.source
        ))),
        Some(given) => Ok(expand_home(&given.value, home)),
        None => match home {
            Some(home) => Ok(Path::new(home).join(CATALOG_SUBDIR)),
            None if needed => Err(Error::input(
                "cannot find the catalog directory: HOME is not set; give --catalog-dir or VIRTWORK_CATALOG_DIR",
            )),
            None => Ok(PathBuf::from(CATALOG_SUBDIR)),
        },
    }
}

/// Where the audit history lives unless `audit-db` says otherwise: the XDG state directory
/// (`$XDG_STATE_HOME/virtwork/virtwork.db`, else `~/.local/state/virtwork/virtwork.db`), so
/// the history does not depend on the working directory. Without a usable HOME either (a
/// bare container), `virtwork.db` in the working directory, as before.
pub fn default_audit_db(xdg_state_home: Option<&str>, home: Option<&str>) -> PathBuf {
    const FILE: &str = "virtwork/virtwork.db";
    // The XDG spec ignores a relative value.
    match (xdg_state_home, home) {
        (Some(state), _) if Path::new(state).is_absolute() => Path::new(state).join(FILE),
        (_, Some(home)) if Path::new(home).is_absolute() => {
            Path::new(home).join(".local/state").join(FILE)
        }
        _ => PathBuf::from("virtwork.db"),
    }
}

fn expand_home(path: &Path, home: Option<&str>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => Path::new(home).join(rest),
        _ => path.to_path_buf(),
    }
}

/// The YAML sections with `--params` (else `VIRTWORK_PARAMS`) merged over them key by key.
fn workload_overrides(layers: &Layers) -> Result<BTreeMap<String, WorkloadOverride>> {
    let mut overrides = layers.sections.clone();
    if let Some(given) = &layers.merged.params {
        let parsed = parse_params(&given.value)
            .map_err(|reason| Error::input(format!("parsing {}: {reason}", given.source)))?;
        for (workload, params) in parsed {
            overrides.entry(workload).or_default().params.extend(params);
        }
    }
    Ok(overrides)
}

/// The workloads `--params` (else `VIRTWORK_PARAMS`) names, with the input's spelling, and
/// each per-workload section of the configuration file, named by its key, so a misspelt
/// workload in either is caught rather than silently ignored.
fn param_prefixes(layers: &Layers) -> Result<Vec<crate::plan::ParamPrefixes>> {
    let mut prefixes: Vec<crate::plan::ParamPrefixes> = layers
        .sections
        .keys()
        .map(|name| crate::plan::ParamPrefixes {
            source: format!("workloads.{name} of --config {}", layers.file),
            workloads: vec![name.clone()],
            section: true,
        })
        .collect();
    if let Some(given) = &layers.merged.params {
        let parsed = parse_params(&given.value)
            .map_err(|reason| Error::input(format!("parsing {}: {reason}", given.source)))?;
        prefixes.push(crate::plan::ParamPrefixes {
            source: given.source.to_string(),
            workloads: parsed.into_keys().collect(),
            section: false,
        });
    }
    Ok(prefixes)
}

fn ssh_access(p: &Partial) -> Result<SshAccess> {
    let user = required(&p.ssh_user, "ssh-user")?;
    let password = p
        .ssh_password
        .as_ref()
        .map(|given| given.value.clone())
        .filter(|password| !password.is_empty());
    let authorized_keys = p
        .ssh_authorized_keys
        .as_ref()
        .map(|given| given.value.clone())
        .unwrap_or_default();
    if user.value.0.is_none() && (password.is_some() || !authorized_keys.is_empty()) {
        return Err(Error::input(format!(
            "an SSH password or key was given but {} is empty; give a user name such as virtwork",
            user.source
        )));
    }
    Ok(SshAccess {
        user: user.value.0.clone(),
        password,
        authorized_keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_is_expanded_in_paths() {
        let home = Some("/home/u");
        assert_eq!(
            expand_home(Path::new("~/cat"), home),
            PathBuf::from("/home/u/cat")
        );
        assert_eq!(expand_home(Path::new("/abs"), home), PathBuf::from("/abs"));
        assert_eq!(expand_home(Path::new("~"), home), PathBuf::from("/home/u"));
        assert_eq!(expand_home(Path::new("~/x"), None), PathBuf::from("~/x"));
    }

    #[test]
    fn every_command_resolves_from_defaults_alone() {
        let env = [("HOME".to_string(), "/home/u".to_string())];
        let global = GlobalArgs::default();
        let run = RunSettings::resolve(&global, &RunArgs::default(), &env).unwrap();
        assert_eq!(run.plan.workloads, BUILTIN_NAMES);
        assert_eq!(run.plan.memory.as_str(), "2Gi");
        CleanupSettings::resolve(&global, &CleanupArgs::default(), &env).unwrap();
        StatusSettings::resolve(&global, &StatusArgs::default(), &env).unwrap();
        let validate = ValidateSettings::resolve(&global, &ValidateArgs::default(), &env).unwrap();
        assert_eq!(
            validate.catalog_dir,
            PathBuf::from("/home/u/.virtwork/catalog")
        );
    }
}
