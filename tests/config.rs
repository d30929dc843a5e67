//! Configuration layering through the real command-line parser and the per-command settings:
//! precedence of every key (flag > env > file > default), both YAML spellings, per-workload
//! sections, params merging, aliases, list variables, kubeconfig and SSH key resolution, and
//! the cleanup and status settings.

use std::io::Write;
use std::path::PathBuf;

use clap::Parser;
use virtwork::cli::{Cli, Command};
use virtwork::config::{ChurnSettings, CleanupSettings, RunSettings, StatusSettings};
use virtwork::error::Error;
use virtwork::model::DryRunMode;
use virtwork::workloads::BUILTIN_NAMES;

const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAaaaaaaaaaaaaaaaaaaaaaaaaaaa a@host";
const KEY_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbbbbbbbbbbbbbbbbbbbbbbbbbbb b@host";
const KEY_C: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCcccccccccccccccc c@host";

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all = vec![("HOME".to_string(), "/home/tester".to_string())];
    all.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    all
}

fn yaml_file(content: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(content.as_bytes()).unwrap();
    file
}

/// `virtwork <args>` parsed by the real command-line definition.
fn parse<S: AsRef<str>>(args: &[S]) -> Cli {
    let argv = std::iter::once("virtwork").chain(args.iter().map(AsRef::as_ref));
    Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"))
}

/// The settings of `virtwork run <args>` in environment `pairs` (plus HOME).
fn try_run<S: AsRef<str>>(args: &[S], pairs: &[(&str, &str)]) -> Result<RunSettings, Error> {
    let mut argv = vec!["run".to_string()];
    argv.extend(args.iter().map(|a| a.as_ref().to_string()));
    let cli = parse(&argv);
    let Command::Run(run) = cli.command else {
        unreachable!()
    };
    RunSettings::resolve(&cli.global, &run, &env(pairs))
}

fn run<S: AsRef<str>>(args: &[S], pairs: &[(&str, &str)]) -> RunSettings {
    try_run(args, pairs).unwrap_or_else(|e| panic!("resolve failed: {e}"))
}

fn try_cleanup(args: &[&str], pairs: &[(&str, &str)]) -> Result<CleanupSettings, Error> {
    let mut argv = vec!["cleanup"];
    argv.extend(args);
    let cli = parse(&argv);
    let Command::Cleanup(cleanup) = cli.command else {
        unreachable!()
    };
    CleanupSettings::resolve(&cli.global, &cleanup, &env(pairs))
}

fn input_error<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
    match result {
        Err(Error::Input(message)) => {
            assert!(!message.contains('\n'), "multi-line error: {message}");
            message
        }
        Err(other) => panic!("expected Error::Input, got {other:?}"),
        Ok(settings) => panic!("expected an error, got {settings:?}"),
    }
}

/// One key of the precedence table: how each source spells it, a distinct value per source,
/// and how to read the effective value back from the run settings.
struct Case {
    key: &'static str,
    env: &'static str,
    /// (file, env, flag) values as written in each source.
    values: [&'static str; 3],
    default: &'static str,
    flag: Flag,
    get: fn(&RunSettings) -> String,
}

/// How the flag is given: with the value, or as a switch that sets it.
enum Flag {
    Value(&'static str),
    Switch(&'static str),
}

impl Flag {
    fn args(&self, value: &str) -> Vec<String> {
        match self {
            Flag::Value(name) => vec![name.to_string(), value.to_string()],
            Flag::Switch(name) => vec![name.to_string()],
        }
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            key: "namespace",
            env: "VIRTWORK_NAMESPACE",
            values: ["from-file", "from-env", "from-flag"],
            default: "virtwork",
            flag: Flag::Value("--namespace"),
            get: |s| s.global.namespace.to_string(),
        },
        Case {
            key: "kubeconfig",
            env: "VIRTWORK_KUBECONFIG",
            values: ["/file/kc", "/env/kc", "/flag/kc"],
            default: "[]",
            flag: Flag::Value("--kubeconfig"),
            get: |s| match s.global.cluster.kubeconfig.first() {
                None => "[]".into(),
                Some(path) => path.display().to_string(),
            },
        },
        Case {
            key: "context",
            env: "VIRTWORK_CONTEXT",
            values: ["file-ctx", "env-ctx", "flag-ctx"],
            default: "-",
            flag: Flag::Value("--context"),
            get: |s| {
                s.global
                    .cluster
                    .context
                    .clone()
                    .unwrap_or_else(|| "-".into())
            },
        },
        Case {
            key: "verbose",
            env: "VIRTWORK_VERBOSE",
            values: ["true", "false", "true"],
            default: "false",
            flag: Flag::Switch("--verbose"),
            get: |s| s.global.verbose.to_string(),
        },
        Case {
            key: "audit",
            env: "VIRTWORK_AUDIT",
            values: ["false", "true", "false"],
            default: "true",
            flag: Flag::Switch("--no-audit"),
            get: |s| s.global.audit.enabled.to_string(),
        },
        Case {
            key: "audit-db",
            env: "VIRTWORK_AUDIT_DB",
            values: ["file.db", "env.db", "flag.db"],
            default: "/home/tester/.local/state/virtwork/virtwork.db",
            flag: Flag::Value("--audit-db"),
            get: |s| s.global.audit.path.display().to_string(),
        },
        Case {
            key: "log-format",
            env: "VIRTWORK_LOG_FORMAT",
            values: ["json", "text", "json"],
            default: "text",
            flag: Flag::Value("--log-format"),
            get: |s| s.global.log_format.to_string(),
        },
        Case {
            key: "output",
            env: "VIRTWORK_OUTPUT",
            values: ["json", "text", "json"],
            default: "text",
            flag: Flag::Value("--output"),
            get: |s| s.global.output.to_string(),
        },
        Case {
            key: "qps",
            env: "VIRTWORK_QPS",
            values: ["10", "20.5", "30"],
            default: "50",
            flag: Flag::Value("--qps"),
            get: |s| s.global.cluster.rate_limit.qps.to_string(),
        },
        Case {
            key: "burst",
            env: "VIRTWORK_BURST",
            values: ["11", "22", "33"],
            default: "100",
            flag: Flag::Value("--burst"),
            get: |s| s.global.cluster.rate_limit.burst.to_string(),
        },
        Case {
            key: "container-disk-image",
            env: "VIRTWORK_CONTAINER_DISK_IMAGE",
            values: ["file/img:1", "env/img:2", "flag/img:3"],
            default: "quay.io/containerdisks/fedora:42",
            flag: Flag::Value("--container-disk-image"),
            get: |s| s.plan.container_disk_image.to_string(),
        },
        Case {
            key: "guest-os",
            env: "VIRTWORK_GUEST_OS",
            values: ["fedora", "debian", "fedora"],
            default: "auto",
            flag: Flag::Value("--guest-os"),
            get: |s| s.plan.guest_os.to_string(),
        },
        Case {
            key: "storage-class",
            env: "VIRTWORK_STORAGE_CLASS",
            values: ["file-class", "env-class", "flag-class"],
            default: "-",
            flag: Flag::Value("--storage-class"),
            get: |s| {
                s.plan
                    .storage_class
                    .as_ref()
                    .map_or("-".into(), |c| c.to_string())
            },
        },
        Case {
            key: "access-mode",
            env: "VIRTWORK_ACCESS_MODE",
            values: ["ReadWriteMany", "ReadWriteOncePod", "ReadWriteMany"],
            // None given: the StorageClass's StorageProfile decides.
            default: "-",
            flag: Flag::Value("--access-mode"),
            get: |s| s.plan.access_mode.map_or("-".into(), |m| m.to_string()),
        },
        Case {
            key: "volume-mode",
            env: "VIRTWORK_VOLUME_MODE",
            values: ["Block", "Filesystem", "Block"],
            // None given: the StorageClass's StorageProfile decides.
            default: "-",
            flag: Flag::Value("--volume-mode"),
            get: |s| s.plan.volume_mode.map_or("-".into(), |m| m.to_string()),
        },
        Case {
            key: "eviction-strategy",
            env: "VIRTWORK_EVICTION_STRATEGY",
            values: ["none", "live-migrate-if-possible", "live-migrate"],
            default: "auto",
            flag: Flag::Value("--eviction-strategy"),
            get: |s| s.plan.eviction_strategy.to_string(),
        },
        Case {
            key: "disk-size",
            env: "VIRTWORK_DISK_SIZE",
            values: ["11Gi", "12Gi", "13Gi"],
            default: "10Gi",
            flag: Flag::Value("--disk-size"),
            get: |s| s.plan.disk_size.to_string(),
        },
        Case {
            key: "cpu-cores",
            env: "VIRTWORK_CPU_CORES",
            values: ["3", "4", "5"],
            default: "2",
            flag: Flag::Value("--cpu-cores"),
            get: |s| s.plan.cpu_cores.to_string(),
        },
        Case {
            key: "memory",
            env: "VIRTWORK_MEMORY",
            values: ["3Gi", "4Gi", "5Gi"],
            default: "2Gi",
            flag: Flag::Value("--memory"),
            get: |s| s.plan.memory.to_string(),
        },
        Case {
            key: "wait-for-ready",
            env: "VIRTWORK_WAIT_FOR_READY",
            values: ["false", "true", "false"],
            default: "true",
            flag: Flag::Switch("--no-wait"),
            get: |s| s.wait_for_ready.to_string(),
        },
        Case {
            key: "timeout",
            env: "VIRTWORK_TIMEOUT",
            values: ["100", "200", "300"],
            default: "600",
            flag: Flag::Value("--timeout"),
            get: |s| s.timeout.to_string(),
        },
        Case {
            key: "ready-condition",
            env: "VIRTWORK_READY_CONDITION",
            values: ["ready", "agent-connected", "ready"],
            default: "running",
            flag: Flag::Value("--ready-condition"),
            get: |s| s.ready_condition.to_string(),
        },
        Case {
            key: "fail-fast",
            env: "VIRTWORK_FAIL_FAST",
            values: ["30s", "off", "1m"],
            default: "off",
            flag: Flag::Switch("--fail-fast"),
            get: |s| s.fail_fast.to_string(),
        },
        Case {
            key: "dry-run",
            env: "VIRTWORK_DRY_RUN",
            values: ["client", "server", "client"],
            default: "off",
            flag: Flag::Switch("--dry-run"),
            get: |s| s.dry_run.map_or("off".into(), |m| m.to_string()),
        },
        Case {
            key: "ssh-user",
            env: "VIRTWORK_SSH_USER",
            values: ["fileuser", "envuser", "flaguser"],
            default: "virtwork",
            flag: Flag::Value("--ssh-user"),
            get: |s| {
                s.plan
                    .ssh
                    .user
                    .as_ref()
                    .map(|u| u.to_string())
                    .unwrap_or_default()
            },
        },
        Case {
            key: "ssh-password",
            env: "VIRTWORK_SSH_PASSWORD",
            values: ["filepw", "envpw", "flagpw"],
            default: "-",
            flag: Flag::Value("--ssh-password"),
            get: |s| {
                s.plan
                    .ssh
                    .password
                    .as_ref()
                    .map_or("-".into(), |p| p.expose().to_string())
            },
        },
        Case {
            key: "ssh-authorized-keys",
            env: "VIRTWORK_SSH_AUTHORIZED_KEYS",
            values: [KEY_A, KEY_B, KEY_C],
            default: "",
            flag: Flag::Value("--ssh-key"),
            get: |s| keys(s).join("|"),
        },
        Case {
            key: "vm-concurrency",
            env: "VIRTWORK_VM_CONCURRENCY",
            values: ["4", "5", "6"],
            default: "10",
            flag: Flag::Value("--vm-concurrency"),
            get: |s| s.vm_concurrency.to_string(),
        },
        Case {
            key: "catalog-dir",
            env: "VIRTWORK_CATALOG_DIR",
            values: ["/file/cat", "/env/cat", "/flag/cat"],
            default: "/home/tester/.virtwork/catalog",
            flag: Flag::Value("--catalog-dir"),
            get: |s| s.plan.catalog_dir.display().to_string(),
        },
        Case {
            key: "from-catalog",
            env: "VIRTWORK_FROM_CATALOG",
            values: ["file-a", "env-a,env-b", "flag-a"],
            default: "",
            flag: Flag::Value("--from-catalog"),
            get: |s| s.plan.from_catalog.join(","),
        },
        Case {
            key: "vm-count",
            env: "VIRTWORK_VM_COUNT",
            values: ["2", "3", "4"],
            default: "1",
            flag: Flag::Value("--vm-count"),
            get: |s| s.plan.vm_count.to_string(),
        },
        Case {
            key: "max-starting",
            env: "VIRTWORK_MAX_STARTING",
            values: ["20", "30", "40"],
            default: "unlimited",
            flag: Flag::Value("--max-starting"),
            get: |s| {
                s.pacing
                    .max_starting
                    .map_or("unlimited".into(), |n| n.to_string())
            },
        },
        Case {
            key: "ramp",
            env: "VIRTWORK_RAMP",
            values: ["10m", "1h30m", "45s"],
            default: "none",
            flag: Flag::Value("--ramp"),
            get: |s| s.pacing.ramp.map_or("none".into(), |r| r.to_string()),
        },
    ]
}

fn keys(settings: &RunSettings) -> Vec<String> {
    settings
        .plan
        .ssh
        .authorized_keys
        .iter()
        .map(|k| k.to_string())
        .collect()
}

#[test]
fn every_key_follows_flag_env_file_default_precedence() {
    let cases = cases();
    // Every key of the table is covered, except the workload selection and params (their own
    // tests below).
    let covered: Vec<&str> = cases.iter().map(|c| c.key).collect();
    for spec in virtwork::config::KEYS {
        assert!(
            covered.contains(&spec.key)
                || matches!(spec.key, "workloads" | "params")
                || CHURN_CASES.iter().any(|c| c.0 == spec.key),
            "{} has no precedence case",
            spec.key
        );
    }
    for case in cases {
        let [file_value, env_value, flag_value] = case.values;
        let file = yaml_file(&format!("{}: {:?}\n", case.key, file_value));
        let config = file.path().display().to_string();
        let none: [&str; 0] = [];

        let defaults = run(&none, &[]);
        assert_eq!((case.get)(&defaults), case.default, "{}: default", case.key);

        let from_file = run(&["--config", &config], &[]);
        assert_eq!(
            (case.get)(&from_file),
            file_value,
            "{}: file beats default",
            case.key
        );

        let from_env = run(&["--config", &config], &[(case.env, env_value)]);
        assert_eq!(
            (case.get)(&from_env),
            env_value,
            "{}: env beats file",
            case.key
        );

        let mut args = vec!["--config".to_string(), config.clone()];
        args.extend(case.flag.args(flag_value));
        let from_flag = run(&args, &[(case.env, env_value)]);
        assert_eq!(
            (case.get)(&from_flag),
            flag_value,
            "{}: flag beats env",
            case.key
        );

        // The file value must differ from the default, and so on, or the test proves nothing.
        let distinct = [
            case.default.to_string(),
            (case.get)(&from_file),
            (case.get)(&from_env),
            (case.get)(&from_flag),
        ];
        assert_ne!(distinct[0], distinct[1], "{}", case.key);
        assert_ne!(distinct[1], distinct[2], "{}", case.key);
        assert_ne!(distinct[2], distinct[3], "{}", case.key);
    }
}

#[test]
fn workloads_come_from_flag_then_env_then_all_builtins() {
    let none: [&str; 0] = [];
    assert_eq!(run(&none, &[]).plan.workloads, BUILTIN_NAMES.to_vec());
    let from_env = run(&none, &[("VIRTWORK_WORKLOADS", "tps, cpu")]);
    assert_eq!(from_env.plan.workloads, vec!["tps", "cpu"]);
    let from_flag = run(&["--workloads", "memory"], &[("VIRTWORK_WORKLOADS", "tps")]);
    assert_eq!(from_flag.plan.workloads, vec!["memory"]);
}

#[test]
fn catalog_entries_alone_clear_the_default_workloads() {
    let none: [&str; 0] = [];
    let only_catalog = run(&none, &[("VIRTWORK_FROM_CATALOG", "redis-bench,nginx")]);
    assert!(only_catalog.plan.workloads.is_empty());
    assert_eq!(only_catalog.plan.from_catalog, vec!["redis-bench", "nginx"]);

    let both = run(
        &none,
        &[
            ("VIRTWORK_FROM_CATALOG", "redis-bench"),
            ("VIRTWORK_WORKLOADS", "cpu"),
        ],
    );
    assert_eq!(both.plan.workloads, vec!["cpu"]);
}

const HYPHENATED: &str = r#"
namespace: spelled
container-disk-image: example.com/img:1
disk-size: 20Gi
cpu-cores: 3
memory: 3Gi
wait-for-ready: false
timeout: 30
ready-condition: ready
dry-run: true
verbose: true
audit: false
audit-db: x.db
ssh-user: someone
ssh-password: pw
ssh-authorized-keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAaaaaaaaaaaaaaaaaaaaaaaaaaaa a@host"]
vm-concurrency: 3
catalog-dir: /cat
from-catalog: [entry-one]
vm-count: 2
log-format: json
workloads:
  cpu:
    vm-count: 4
    cpu-cores: 6
    memory: 1Gi
    enabled: true
    eviction-strategy: live-migrate
    params:
      cpu-load-percent: 50
  disk:
    enabled: false
"#;

#[test]
fn hyphen_and_underscore_yaml_spellings_load_identically() {
    let underscored = HYPHENATED
        .lines()
        .map(|line| match line.split_once(':') {
            Some((key, rest)) if !key.contains("cpu-load-percent") => {
                format!("{}:{rest}", key.replace('-', "_"))
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(underscored.contains("cpu_cores: 3") && underscored.contains("    vm_count: 4"));
    let a = yaml_file(HYPHENATED);
    let b = yaml_file(&underscored);
    let load_file = |path: PathBuf| run(&["--config".to_string(), path.display().to_string()], &[]);
    let hyphen = load_file(a.path().to_path_buf());
    let underscore = load_file(b.path().to_path_buf());
    // The file's name appears only where messages name it (the sections' sources).
    let shown = |settings: &RunSettings, file: &tempfile::NamedTempFile| {
        format!("{settings:?}").replace(&file.path().display().to_string(), "<file>")
    };
    assert_eq!(shown(&hyphen, &a), shown(&underscore, &b));
    assert_eq!(hyphen.plan.cpu_cores, 3);
    assert_eq!(hyphen.plan.vm_count, 2);
    assert_eq!(hyphen.dry_run, Some(DryRunMode::Client));
    let cpu = &hyphen.plan.workload_overrides["cpu"];
    assert_eq!(
        (
            cpu.vm_count,
            cpu.cpu_cores,
            cpu.memory.as_ref().map(|m| m.as_str()),
            cpu.enabled
        ),
        (Some(4), Some(6), Some("1Gi"), Some(true))
    );
    assert_eq!(cpu.params["cpu-load-percent"], "50");
    assert_eq!(
        cpu.eviction_strategy,
        Some(virtwork::model::EvictionStrategy::LiveMigrate)
    );
    assert_eq!(hyphen.plan.workload_overrides["disk"].enabled, Some(false));
}

#[test]
fn per_workload_values_are_kept_beside_global_flags() {
    let file = yaml_file("workloads:\n  cpu:\n    cpu-cores: 8\n    vm-count: 3\n");
    let config = file.path().display().to_string();
    let settings = run(
        &["--config", &config, "--cpu-cores", "4", "--vm-count", "5"],
        &[],
    );
    assert_eq!((settings.plan.cpu_cores, settings.plan.vm_count), (4, 5));
    let cpu = &settings.plan.workload_overrides["cpu"];
    assert_eq!((cpu.cpu_cores, cpu.vm_count), (Some(8), Some(3)));
}

#[test]
fn params_flag_beats_env_and_merges_over_yaml_key_by_key() {
    let file = yaml_file(
        "workloads:\n  cpu:\n    params:\n      cpu-load-percent: 10\n      cpu-method: all\n",
    );
    let config = file.path().display().to_string();
    let env_params = [("VIRTWORK_PARAMS", "cpu.cpu-load-percent=20,disk.runtime=5")];
    let from_env = run(&["--config", &config], &env_params);
    let cpu = &from_env.plan.workload_overrides["cpu"].params;
    assert_eq!(cpu["cpu-load-percent"], "20");
    assert_eq!(cpu["cpu-method"], "all");
    assert_eq!(
        from_env.plan.workload_overrides["disk"].params["runtime"],
        "5"
    );

    let from_flag = run(
        &["--config", &config, "--params", "cpu.cpu-load-percent=30"],
        &env_params,
    );
    assert_eq!(
        from_flag.plan.workload_overrides["cpu"].params["cpu-load-percent"],
        "30"
    );
    assert!(
        !from_flag.plan.workload_overrides.contains_key("disk"),
        "env params ignored when the flag is given"
    );
}

#[test]
fn params_errors_name_their_source() {
    assert_eq!(
        input_error(try_run(&["--params", "cpu"], &[])),
        r#"parsing --params: missing workload prefix (expected workload.key=value): "cpu""#
    );
    let none: [&str; 0] = [];
    assert_eq!(
        input_error(try_run(&none, &[("VIRTWORK_PARAMS", "cpu.x")])),
        r#"parsing VIRTWORK_PARAMS: missing '=' in param (expected workload.key=value): "cpu.x""#
    );
}

#[test]
fn data_disk_size_is_an_alias_and_the_canonical_name_wins() {
    let none: [&str; 0] = [];
    let alias = run(&none, &[("VIRTWORK_DATA_DISK_SIZE", "7Gi")]);
    assert_eq!(alias.plan.disk_size.as_str(), "7Gi");
    let both = run(
        &none,
        &[
            ("VIRTWORK_DATA_DISK_SIZE", "7Gi"),
            ("VIRTWORK_DISK_SIZE", "8Gi"),
        ],
    );
    assert_eq!(both.plan.disk_size.as_str(), "8Gi");
    let flag_alias = run(&["--data-disk-size", "9Gi"], &[]);
    assert_eq!(flag_alias.plan.disk_size.as_str(), "9Gi");
}

#[test]
fn empty_environment_values_count_as_unset() {
    let none: [&str; 0] = [];
    let settings = run(
        &none,
        &[("VIRTWORK_CPU_CORES", ""), ("VIRTWORK_NAMESPACE", "")],
    );
    assert_eq!(
        (settings.plan.cpu_cores, settings.global.namespace.as_str()),
        (2, "virtwork")
    );
}

#[test]
fn audit_flags_both_work() {
    let on = run(&["--audit"], &[("VIRTWORK_AUDIT", "false")]);
    assert!(
        on.global.audit.enabled,
        "--audit beats VIRTWORK_AUDIT=false"
    );
    assert!(!run(&["--no-audit"], &[]).global.audit.enabled);
    assert!(run(&["-v"], &[]).global.verbose, "-v is --verbose");
    assert_eq!(
        run(&["--no-audit"], &[]).global.audit.recording_path(),
        None
    );
}

#[test]
fn kubeconfig_list_is_split_like_kubectl_and_the_explicit_key_wins() {
    let none: [&str; 0] = [];
    let list = run(&none, &[("KUBECONFIG", "/a/one:/b/two::")]);
    assert_eq!(
        list.global.cluster.kubeconfig,
        vec![PathBuf::from("/a/one"), PathBuf::from("/b/two")]
    );
    assert_eq!(
        list.global.cluster.kubeconfig_given.as_deref(),
        Some("/a/one:/b/two::")
    );
    let explicit = run(
        &none,
        &[
            ("KUBECONFIG", "/a/one:/b/two"),
            ("VIRTWORK_KUBECONFIG", "/c/three"),
        ],
    );
    assert_eq!(
        explicit.global.cluster.kubeconfig,
        vec![PathBuf::from("/c/three")]
    );
    let unset = run(&none, &[]);
    assert!(unset.global.cluster.kubeconfig.is_empty());
    assert!(unset.global.cluster.kubeconfig_given.is_none());
}

#[test]
fn ssh_keys_resolve_flags_then_env_then_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("id.pub");
    std::fs::write(&key_file, format!("# my keys\n{KEY_B}\n\n{KEY_C}\n")).unwrap();
    let settings = run(
        &[
            "--ssh-key",
            KEY_A,
            "--ssh-key-file",
            &key_file.display().to_string(),
        ],
        &[("VIRTWORK_SSH_AUTHORIZED_KEYS", KEY_C)],
    );
    assert_eq!(keys(&settings), vec![KEY_A, KEY_B, KEY_C]);
    assert!(settings.plan.ssh.auth_configured());

    let env_list = format!("{KEY_A}, {KEY_B}");
    let none: [&str; 0] = [];
    let settings = run(
        &none,
        &[("VIRTWORK_SSH_AUTHORIZED_KEYS", env_list.as_str())],
    );
    assert_eq!(keys(&settings), vec![KEY_A, KEY_B]);
}

#[test]
fn empty_ssh_user_means_no_account_and_passwords_never_print() {
    assert_eq!(run(&["--ssh-user", ""], &[]).plan.ssh.user, None);
    let settings = run(&["--ssh-password", "hunter2"], &[]);
    assert!(!format!("{settings:?}").contains("hunter2"));
}

#[test]
fn cleanup_reads_preview_and_timeout_once() {
    let preview = try_cleanup(
        &[],
        &[("VIRTWORK_DRY_RUN", "true"), ("VIRTWORK_NAMESPACE", "ns1")],
    )
    .unwrap();
    assert!(preview.dry_run);
    assert_eq!(preview.global.namespace.as_str(), "ns1");
    assert!(!preview.wait, "cleanup waits only with --wait");
    assert!(try_cleanup(&["--dry-run"], &[]).unwrap().dry_run);
    assert!(
        !try_cleanup(&[], &[("VIRTWORK_DRY_RUN", "false")])
            .unwrap()
            .dry_run,
        "an explicit false is no preview"
    );

    assert!(try_cleanup(&["--timeout", "0"], &[]).is_ok());
    let message = input_error(try_cleanup(&["--wait", "--timeout", "0"], &[]));
    assert!(message.contains("--timeout"), "{message}");
    let message = input_error(try_cleanup(&["--wait"], &[("VIRTWORK_TIMEOUT", "0")]));
    assert!(message.contains("VIRTWORK_TIMEOUT"), "{message}");

    let good_id = try_cleanup(&["--run-id", "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f"], &[]).unwrap();
    assert_eq!(
        good_id.run_id.unwrap().to_string(),
        "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f"
    );
}

#[test]
fn status_does_not_require_workloads() {
    let cli = parse(&["status"]);
    let Command::Status(status) = cli.command else {
        unreachable!()
    };
    // Run refuses an empty selection when it plans (tests/cli.rs, tests/plan.rs); status never
    // plans, so the same environment is fine.
    let settings =
        StatusSettings::resolve(&cli.global, &status, &env(&[("VIRTWORK_WORKLOADS", ",")]));
    assert!(settings.is_ok(), "{settings:?}");
}

#[test]
fn run_without_waiting_accepts_a_zero_timeout() {
    let settings = run(&["--no-wait", "--timeout", "0"], &[]);
    assert_eq!(settings.timeout.get(), 0);
    let message = input_error(try_run(&["--timeout", "0"], &[]));
    assert!(message.contains("--timeout"), "{message}");
}

#[test]
fn explicit_empty_workloads_with_catalog_entries_run_only_the_catalog() {
    let settings = run(&["--workloads", "", "--from-catalog", "redis-bench"], &[]);
    assert!(settings.plan.workloads.is_empty());
    assert_eq!(settings.plan.from_catalog, vec!["redis-bench"]);
}

#[test]
fn every_command_validates_every_key_the_same_way() {
    // A bad value is reported by any command that reads the environment, not only by run.
    for command in ["status", "cleanup"] {
        let cli = parse(&[command]);
        let env = env(&[("VIRTWORK_CPU_CORES", "abc")]);
        let err = match cli.command {
            Command::Status(args) => StatusSettings::resolve(&cli.global, &args, &env).unwrap_err(),
            Command::Cleanup(args) => {
                CleanupSettings::resolve(&cli.global, &args, &env).unwrap_err()
            }
            _ => unreachable!(),
        };
        assert_eq!(
            err.to_string(),
            r#"invalid value "abc" for VIRTWORK_CPU_CORES: expected a whole number of at least 1"#
        );
    }
}

#[test]
fn pacing_values_are_checked_at_the_edge_with_one_line_errors() {
    let ramp = input_error(try_run::<&str>(&[], &[("VIRTWORK_RAMP", "10")]));
    assert_eq!(
        ramp,
        "invalid value \"10\" for VIRTWORK_RAMP: expected a duration with units such as 90s, 10m \
         or 1h30m (h, m, s), from 1s to 7 days (a bare number has no unit: did you mean \"10s\" \
         or \"10m\"?)"
    );
    let file = yaml_file("max_starting: 0\n");
    let config = file.path().display().to_string();
    let zero = input_error(try_run(&["--config", &config], &[]));
    assert!(
        zero.starts_with("invalid value \"0\" for max_starting in ")
            && zero.ends_with("expected a whole number from 1 to 50000"),
        "{zero}"
    );
    // A starting limit is closed by readiness: without the wait it could never reopen.
    let no_wait = input_error(try_run(&["--max-starting", "5", "--no-wait"], &[]));
    assert!(
        no_wait.starts_with("--max-starting needs the readiness wait"),
        "{no_wait}"
    );
    let paced = run(&["--ramp", "1h30m", "--max-starting", "25"], &[]);
    assert_eq!(paced.pacing.ramp.unwrap().get().as_secs(), 5400);
    assert_eq!(paced.pacing.max_starting.unwrap().get(), 25);
}

/// `--config` reads only a regular file of at most 1 MiB: `/dev/zero`, a FIFO (which would
/// block a reader until someone writes) and a directory are refused at once, by name.
#[test]
fn config_files_must_be_small_regular_files() {
    const NOT_REGULAR: &str = "is not a regular file (a FIFO, device or socket); give a file";
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.yaml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, format!("# {}\nvm-count: 1\n", "x".repeat(2 << 20))).unwrap();
    let cases = [
        ("/dev/zero".to_string(), NOT_REGULAR),
        (fifo.display().to_string(), NOT_REGULAR),
        (
            big.display().to_string(),
            "is larger than 1024 KiB, the most virtwork reads",
        ),
        (dir.path().display().to_string(), "is a directory"),
    ];
    let (sender, results) = std::sync::mpsc::channel();
    let paths: Vec<String> = cases.iter().map(|(p, _)| p.clone()).collect();
    std::thread::spawn(move || {
        for path in paths {
            let message = input_error(try_run(&["--config", path.as_str()], &[]));
            sender.send(message).unwrap();
        }
    });
    for (path, reason) in cases {
        let message = results
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("--config {path} did not fail promptly"));
        assert_eq!(
            message,
            format!("cannot read --config {path}: {reason}"),
            "{path}"
        );
    }
}
/// The `virtwork churn` keys: (key, env, [file, env, flag] values, default, flag), read back
/// from the churn settings.
const CHURN_CASES: [(&str, &str, [&str; 3], &str, &str); 5] = [
    (
        "churn-duration",
        "VIRTWORK_CHURN_DURATION",
        ["5m", "1h", "90s"],
        "600",
        "--duration",
    ),
    (
        "churn-rate",
        "VIRTWORK_CHURN_RATE",
        ["30/m", "2/s", "100/h"],
        "6/m",
        "--rate",
    ),
    (
        "churn-share",
        "VIRTWORK_CHURN_SHARE",
        ["25", "50", "75"],
        "100%",
        "--share",
    ),
    (
        "churn-actions",
        "VIRTWORK_CHURN_ACTIONS",
        ["restart", "migrate=2", "stop-start"],
        "restart,stop-start,migrate",
        "--actions",
    ),
    (
        "churn-seed",
        "VIRTWORK_CHURN_SEED",
        ["1", "2", "3"],
        "random",
        "--seed",
    ),
];

fn churn(args: &[String], pairs: &[(&str, &str)]) -> ChurnSettings {
    let mut argv = vec!["churn".to_string()];
    argv.extend(args.iter().cloned());
    let cli = parse(&argv);
    let Command::Churn(churn) = cli.command else {
        unreachable!()
    };
    ChurnSettings::resolve(&cli.global, &churn, &env(pairs)).unwrap_or_else(|e| panic!("{e}"))
}

fn churn_value(key: &str, s: &ChurnSettings) -> String {
    match key {
        "churn-duration" => s.duration.as_secs().to_string(),
        "churn-rate" => s.rate.to_string(),
        "churn-share" => s.share.to_string(),
        "churn-actions" => s.actions.to_string(),
        "churn-seed" => s.seed.map_or("random".into(), |n| n.to_string()),
        other => panic!("{other}"),
    }
}

/// How a value reads back: durations in seconds, shares with their percent sign.
fn churn_shown(key: &str, value: &str) -> String {
    match key {
        "churn-duration" => value
            .parse::<virtwork::model::Ramp>()
            .unwrap()
            .get()
            .as_secs()
            .to_string(),
        "churn-share" => format!("{value}%"),
        _ => value.to_string(),
    }
}

#[test]
fn churn_keys_follow_flag_env_file_default_precedence() {
    for (key, env_name, [file_value, env_value, flag_value], default, flag) in CHURN_CASES {
        let file = yaml_file(&format!("{key}: {file_value:?}\n"));
        let config = vec!["--config".to_string(), file.path().display().to_string()];
        assert_eq!(
            churn_value(key, &churn(&[], &[])),
            default,
            "{key}: default"
        );
        let from_file = churn(&config, &[]);
        assert_eq!(
            churn_value(key, &from_file),
            churn_shown(key, file_value),
            "{key}: file"
        );
        let from_env = churn(&config, &[(env_name, env_value)]);
        assert_eq!(
            churn_value(key, &from_env),
            churn_shown(key, env_value),
            "{key}: env"
        );
        let mut args = config.clone();
        args.extend([flag.to_string(), flag_value.to_string()]);
        let from_flag = churn(&args, &[(env_name, env_value)]);
        assert_eq!(
            churn_value(key, &from_flag),
            churn_shown(key, flag_value),
            "{key}: flag"
        );
    }
    // A bad value names the input as spelled.
    let cli = parse(&["churn"]);
    let Command::Churn(args) = cli.command else {
        unreachable!()
    };
    let bad = ChurnSettings::resolve(&cli.global, &args, &env(&[("VIRTWORK_CHURN_RATE", "fast")]));
    let message = input_error(bad);
    assert!(
        message.starts_with("invalid value \"fast\" for VIRTWORK_CHURN_RATE: expected actions"),
        "{message}"
    );
}
