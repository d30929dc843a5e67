//! Configuration layering through the public loader: precedence of every key (flag > env >
//! file > default), both YAML spellings, per-workload sections, params merging, aliases, list
//! variables, kubeconfig and SSH key resolution, and the cleanup loader.

use std::io::Write;
use std::path::PathBuf;

use virtwork::cli::{
    CleanupArgs, DryRunMode, GlobalArgs, LogFormat, OutputFormat, ReadyCondition, RunArgs,
    StatusArgs,
};
use virtwork::config::{BUILTIN_WORKLOADS, CommandFlags, Config};
use virtwork::error::Error;

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

fn load(global: &GlobalArgs, run: &RunArgs, pairs: &[(&str, &str)]) -> Config {
    Config::load(global, run, &env(pairs)).unwrap_or_else(|e| panic!("load failed: {e}"))
}

fn input_error(result: Result<Config, Error>) -> String {
    match result {
        Err(Error::Input(message)) => {
            assert!(!message.contains('\n'), "multi-line error: {message}");
            message
        }
        Err(other) => panic!("expected Error::Input, got {other:?}"),
        Ok(config) => panic!("expected an error, got {config:?}"),
    }
}

/// One key of the precedence table: how each source spells it, a distinct value per source,
/// and how to read the effective value back from the Config.
struct Case {
    key: &'static str,
    env: &'static str,
    /// (file, env, flag) values as written in each source.
    values: [&'static str; 3],
    default: &'static str,
    set_flag: fn(&mut GlobalArgs, &mut RunArgs, &str),
    get: fn(&Config) -> String,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            key: "namespace",
            env: "VIRTWORK_NAMESPACE",
            values: ["from-file", "from-env", "from-flag"],
            default: "virtwork",
            set_flag: |g, _, v| g.namespace = Some(v.into()),
            get: |c| c.namespace.clone(),
        },
        Case {
            key: "kubeconfig",
            env: "VIRTWORK_KUBECONFIG",
            values: ["/file/kc", "/env/kc", "/flag/kc"],
            default: "[]",
            set_flag: |g, _, v| g.kubeconfig = Some(v.into()),
            get: |c| {
                if c.kubeconfig.is_empty() {
                    "[]".into()
                } else {
                    c.kubeconfig[0].display().to_string()
                }
            },
        },
        Case {
            key: "verbose",
            env: "VIRTWORK_VERBOSE",
            values: ["true", "false", "true"],
            default: "false",
            set_flag: |g, _, _| g.verbose = true,
            get: |c| c.verbose.to_string(),
        },
        Case {
            key: "audit",
            env: "VIRTWORK_AUDIT",
            values: ["false", "true", "false"],
            default: "true",
            set_flag: |g, _, _| g.no_audit = true,
            get: |c| c.audit.enabled.to_string(),
        },
        Case {
            key: "audit-db",
            env: "VIRTWORK_AUDIT_DB",
            values: ["file.db", "env.db", "flag.db"],
            default: "virtwork.db",
            set_flag: |g, _, v| g.audit_db = Some(v.into()),
            get: |c| c.audit.db_path.display().to_string(),
        },
        Case {
            key: "log-format",
            env: "VIRTWORK_LOG_FORMAT",
            values: ["json", "text", "json"],
            default: "text",
            set_flag: |g, _, _| g.log_format = Some(LogFormat::Json),
            get: |c| format!("{:?}", c.log_format).to_lowercase(),
        },
        Case {
            key: "output",
            env: "VIRTWORK_OUTPUT",
            values: ["json", "text", "json"],
            default: "text",
            set_flag: |g, _, _| g.output = Some(OutputFormat::Json),
            get: |c| format!("{:?}", c.output).to_lowercase(),
        },
        Case {
            key: "qps",
            env: "VIRTWORK_QPS",
            values: ["10", "20.5", "30"],
            default: "50",
            set_flag: |g, _, v| g.qps = Some(v.into()),
            get: |c| c.qps.to_string(),
        },
        Case {
            key: "burst",
            env: "VIRTWORK_BURST",
            values: ["11", "22", "33"],
            default: "100",
            set_flag: |g, _, v| g.burst = Some(v.into()),
            get: |c| c.burst.to_string(),
        },
        Case {
            key: "container-disk-image",
            env: "VIRTWORK_CONTAINER_DISK_IMAGE",
            values: ["file/img:1", "env/img:2", "flag/img:3"],
            default: "quay.io/containerdisks/fedora:42",
            set_flag: |_, r, v| r.container_disk_image = Some(v.into()),
            get: |c| c.container_disk_image.clone(),
        },
        Case {
            key: "disk-size",
            env: "VIRTWORK_DISK_SIZE",
            values: ["11Gi", "12Gi", "13Gi"],
            default: "10Gi",
            set_flag: |_, r, v| r.disk_size = Some(v.into()),
            get: |c| c.disk_size.clone(),
        },
        Case {
            key: "cpu-cores",
            env: "VIRTWORK_CPU_CORES",
            values: ["3", "4", "5"],
            default: "2",
            set_flag: |_, r, v| r.cpu_cores = Some(v.into()),
            get: |c| c.cpu_cores.to_string(),
        },
        Case {
            key: "memory",
            env: "VIRTWORK_MEMORY",
            values: ["3Gi", "4Gi", "5Gi"],
            default: "2Gi",
            set_flag: |_, r, v| r.memory = Some(v.into()),
            get: |c| c.memory.clone(),
        },
        Case {
            key: "wait-for-ready",
            env: "VIRTWORK_WAIT_FOR_READY",
            values: ["false", "true", "false"],
            default: "true",
            set_flag: |_, r, _| r.no_wait = true,
            get: |c| c.wait_for_ready.to_string(),
        },
        Case {
            key: "timeout",
            env: "VIRTWORK_TIMEOUT",
            values: ["100", "200", "300"],
            default: "600",
            set_flag: |_, r, v| r.timeout = Some(v.into()),
            get: |c| c.timeout_secs.to_string(),
        },
        Case {
            key: "ready-condition",
            env: "VIRTWORK_READY_CONDITION",
            values: ["ready", "agent-connected", "ready"],
            default: "running",
            set_flag: |_, r, _| r.ready_condition = Some(ReadyCondition::Ready),
            get: |c| match c.ready_condition {
                ReadyCondition::Running => "running".into(),
                ReadyCondition::Ready => "ready".into(),
                ReadyCondition::AgentConnected => "agent-connected".into(),
                ReadyCondition::Workload => "workload".into(),
            },
        },
        Case {
            key: "dry-run",
            env: "VIRTWORK_DRY_RUN",
            values: ["client", "server", "client"],
            default: "off",
            set_flag: |_, r, _| r.dry_run = Some(DryRunMode::Client),
            get: |c| {
                c.dry_run
                    .map_or("off".into(), |m| format!("{m:?}").to_lowercase())
            },
        },
        Case {
            key: "ssh-user",
            env: "VIRTWORK_SSH_USER",
            values: ["fileuser", "envuser", "flaguser"],
            default: "virtwork",
            set_flag: |_, r, v| r.ssh_user = Some(v.into()),
            get: |c| c.ssh.user.clone().unwrap_or_default(),
        },
        Case {
            key: "ssh-password",
            env: "VIRTWORK_SSH_PASSWORD",
            values: ["filepw", "envpw", "flagpw"],
            default: "-",
            set_flag: |_, r, v| r.ssh_password = Some(v.into()),
            get: |c| {
                c.ssh
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
            set_flag: |_, r, v| r.ssh_key = vec![v.into()],
            get: |c| c.ssh.authorized_keys.join("|"),
        },
        Case {
            key: "vm-concurrency",
            env: "VIRTWORK_VM_CONCURRENCY",
            values: ["4", "5", "6"],
            default: "10",
            set_flag: |_, r, v| r.vm_concurrency = Some(v.into()),
            get: |c| c.vm_concurrency.to_string(),
        },
        Case {
            key: "catalog-dir",
            env: "VIRTWORK_CATALOG_DIR",
            values: ["/file/cat", "/env/cat", "/flag/cat"],
            default: "/home/tester/.virtwork/catalog",
            set_flag: |_, r, v| r.catalog_dir = Some(v.into()),
            get: |c| c.catalog_dir.display().to_string(),
        },
        Case {
            key: "from-catalog",
            env: "VIRTWORK_FROM_CATALOG",
            values: ["file-a", "env-a,env-b", "flag-a"],
            default: "",
            set_flag: |_, r, v| r.from_catalog = Some(vec![v.into()]),
            get: |c| c.from_catalog.join(","),
        },
        Case {
            key: "vm-count",
            env: "VIRTWORK_VM_COUNT",
            values: ["2", "3", "4"],
            default: "1",
            set_flag: |_, r, v| r.vm_count = Some(v.into()),
            get: |c| c.vm_count.to_string(),
        },
    ]
}

#[test]
fn every_key_follows_flag_env_file_default_precedence() {
    for case in cases() {
        let [file_value, env_value, flag_value] = case.values;
        let file = yaml_file(&format!("{}: {:?}\n", case.key, file_value));

        let none = load(&GlobalArgs::default(), &RunArgs::default(), &[]);
        assert_eq!((case.get)(&none), case.default, "{}: default", case.key);

        let file_global = GlobalArgs {
            config: Some(file.path().to_path_buf()),
            ..GlobalArgs::default()
        };
        let from_file = load(&file_global, &RunArgs::default(), &[]);
        assert_eq!(
            (case.get)(&from_file),
            file_value,
            "{}: file beats default",
            case.key
        );

        let from_env = load(&file_global, &RunArgs::default(), &[(case.env, env_value)]);
        assert_eq!(
            (case.get)(&from_env),
            env_value,
            "{}: env beats file",
            case.key
        );

        let mut global = file_global.clone();
        let mut run = RunArgs::default();
        (case.set_flag)(&mut global, &mut run, flag_value);
        let from_flag = load(&global, &run, &[(case.env, env_value)]);
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
    let all = load(&GlobalArgs::default(), &RunArgs::default(), &[]);
    assert_eq!(all.workloads, BUILTIN_WORKLOADS.to_vec());
    assert!(!all.workloads_explicit);

    let from_env = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("VIRTWORK_WORKLOADS", "tps, cpu")],
    );
    assert_eq!(from_env.workloads, vec!["tps", "cpu"]);
    assert!(from_env.workloads_explicit);

    let run = RunArgs {
        workloads: Some(vec!["memory".into()]),
        ..RunArgs::default()
    };
    let from_flag = load(
        &GlobalArgs::default(),
        &run,
        &[("VIRTWORK_WORKLOADS", "tps")],
    );
    assert_eq!(from_flag.workloads, vec!["memory"]);
}

#[test]
fn catalog_entries_alone_clear_the_default_workloads() {
    let only_catalog = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("VIRTWORK_FROM_CATALOG", "redis-bench,nginx")],
    );
    assert!(only_catalog.workloads.is_empty());
    assert_eq!(only_catalog.from_catalog, vec!["redis-bench", "nginx"]);

    let both = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[
            ("VIRTWORK_FROM_CATALOG", "redis-bench"),
            ("VIRTWORK_WORKLOADS", "cpu"),
        ],
    );
    assert_eq!(both.workloads, vec!["cpu"]);
    assert!(both.workloads_explicit);
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
    let load_file = |path: PathBuf| {
        let global = GlobalArgs {
            config: Some(path),
            ..GlobalArgs::default()
        };
        load(&global, &RunArgs::default(), &[])
    };
    let hyphen = load_file(a.path().to_path_buf());
    let underscore = load_file(b.path().to_path_buf());
    assert_eq!(format!("{hyphen:?}"), format!("{underscore:?}"));
    assert_eq!(hyphen.cpu_cores, 3);
    assert_eq!(hyphen.vm_count, 2);
    assert_eq!(hyphen.dry_run, Some(DryRunMode::Client));
    let cpu = &hyphen.workload_overrides["cpu"];
    assert_eq!(
        (
            cpu.vm_count,
            cpu.cpu_cores,
            cpu.memory.as_deref(),
            cpu.enabled
        ),
        (Some(4), Some(6), Some("1Gi"), Some(true))
    );
    assert_eq!(cpu.params["cpu-load-percent"], "50");
    assert_eq!(hyphen.workload_overrides["disk"].enabled, Some(false));
}

#[test]
fn per_workload_values_are_kept_beside_global_flags() {
    let file = yaml_file("workloads:\n  cpu:\n    cpu-cores: 8\n    vm-count: 3\n");
    let global = GlobalArgs {
        config: Some(file.path().to_path_buf()),
        ..GlobalArgs::default()
    };
    let run = RunArgs {
        cpu_cores: Some("4".into()),
        vm_count: Some("5".into()),
        ..RunArgs::default()
    };
    let config = load(&global, &run, &[]);
    assert_eq!((config.cpu_cores, config.vm_count), (4, 5));
    let cpu = &config.workload_overrides["cpu"];
    assert_eq!((cpu.cpu_cores, cpu.vm_count), (Some(8), Some(3)));
}

#[test]
fn params_flag_beats_env_and_merges_over_yaml_key_by_key() {
    let file = yaml_file(
        "workloads:\n  cpu:\n    params:\n      cpu-load-percent: 10\n      cpu-method: all\n",
    );
    let global = GlobalArgs {
        config: Some(file.path().to_path_buf()),
        ..GlobalArgs::default()
    };
    let from_env = load(
        &global,
        &RunArgs::default(),
        &[("VIRTWORK_PARAMS", "cpu.cpu-load-percent=20,disk.runtime=5")],
    );
    let cpu = &from_env.workload_overrides["cpu"].params;
    assert_eq!(cpu["cpu-load-percent"], "20");
    assert_eq!(cpu["cpu-method"], "all");
    assert_eq!(from_env.workload_overrides["disk"].params["runtime"], "5");

    let run = RunArgs {
        params: Some("cpu.cpu-load-percent=30".into()),
        ..RunArgs::default()
    };
    let from_flag = load(
        &global,
        &run,
        &[("VIRTWORK_PARAMS", "cpu.cpu-load-percent=20,disk.runtime=5")],
    );
    assert_eq!(
        from_flag.workload_overrides["cpu"].params["cpu-load-percent"],
        "30"
    );
    assert!(
        !from_flag.workload_overrides.contains_key("disk"),
        "env params ignored when the flag is given"
    );
}

#[test]
fn params_errors_name_their_source() {
    let run = RunArgs {
        params: Some("cpu".into()),
        ..RunArgs::default()
    };
    assert_eq!(
        input_error(Config::load(&GlobalArgs::default(), &run, &env(&[]))),
        r#"parsing --params: missing workload prefix (expected workload.key=value): "cpu""#
    );
    assert_eq!(
        input_error(Config::load(
            &GlobalArgs::default(),
            &RunArgs::default(),
            &env(&[("VIRTWORK_PARAMS", "cpu.x")])
        )),
        r#"parsing VIRTWORK_PARAMS: missing '=' in param (expected workload.key=value): "cpu.x""#
    );
}

#[test]
fn data_disk_size_is_an_alias_and_the_canonical_name_wins() {
    let alias = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("VIRTWORK_DATA_DISK_SIZE", "7Gi")],
    );
    assert_eq!(alias.disk_size, "7Gi");
    let both = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[
            ("VIRTWORK_DATA_DISK_SIZE", "7Gi"),
            ("VIRTWORK_DISK_SIZE", "8Gi"),
        ],
    );
    assert_eq!(both.disk_size, "8Gi");
}

#[test]
fn empty_environment_values_count_as_unset() {
    let config = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("VIRTWORK_CPU_CORES", ""), ("VIRTWORK_NAMESPACE", "")],
    );
    assert_eq!(
        (config.cpu_cores, config.namespace.as_str()),
        (2, "virtwork")
    );
}

#[test]
fn audit_flags_both_work() {
    let on = GlobalArgs {
        audit: true,
        ..GlobalArgs::default()
    };
    let config = load(&on, &RunArgs::default(), &[("VIRTWORK_AUDIT", "false")]);
    assert!(config.audit.enabled, "--audit beats VIRTWORK_AUDIT=false");
    let off = GlobalArgs {
        no_audit: true,
        ..GlobalArgs::default()
    };
    assert!(!load(&off, &RunArgs::default(), &[]).audit.enabled);
}

#[test]
fn kubeconfig_list_is_split_like_kubectl_and_the_explicit_key_wins() {
    let list = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("KUBECONFIG", "/a/one:/b/two::")],
    );
    assert_eq!(
        list.kubeconfig,
        vec![PathBuf::from("/a/one"), PathBuf::from("/b/two")]
    );
    assert_eq!(list.kubeconfig_given.as_deref(), Some("/a/one:/b/two::"));
    let explicit = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[
            ("KUBECONFIG", "/a/one:/b/two"),
            ("VIRTWORK_KUBECONFIG", "/c/three"),
        ],
    );
    assert_eq!(explicit.kubeconfig, vec![PathBuf::from("/c/three")]);
    let none = load(&GlobalArgs::default(), &RunArgs::default(), &[]);
    assert!(none.kubeconfig.is_empty() && none.kubeconfig_given.is_none());
}

#[test]
fn ssh_keys_resolve_flags_then_env_then_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("id.pub");
    std::fs::write(&key_file, format!("# my keys\n{KEY_B}\n\n{KEY_C}\n")).unwrap();
    let run = RunArgs {
        ssh_key: vec![KEY_A.into()],
        ssh_key_file: vec![key_file],
        ..RunArgs::default()
    };
    let config = load(
        &GlobalArgs::default(),
        &run,
        &[("VIRTWORK_SSH_AUTHORIZED_KEYS", KEY_C)],
    );
    assert_eq!(config.ssh.authorized_keys, vec![KEY_A, KEY_B, KEY_C]);
    assert!(config.ssh.auth_configured());

    let env_list = format!("{KEY_A}, {KEY_B}");
    let config = load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &[("VIRTWORK_SSH_AUTHORIZED_KEYS", env_list.as_str())],
    );
    assert_eq!(config.ssh.authorized_keys, vec![KEY_A, KEY_B]);
}

#[test]
fn empty_ssh_user_means_no_account_and_passwords_never_print() {
    let run = RunArgs {
        ssh_user: Some(String::new()),
        ..RunArgs::default()
    };
    assert_eq!(load(&GlobalArgs::default(), &run, &[]).ssh.user, None);
    let run = RunArgs {
        ssh_password: Some("hunter2".into()),
        ..RunArgs::default()
    };
    let config = load(&GlobalArgs::default(), &run, &[]);
    assert!(!format!("{config:?}").contains("hunter2"));
}

#[test]
fn cleanup_loader_reads_preview_wait_and_run_id() {
    let preview = Config::load_for_cleanup(
        &GlobalArgs::default(),
        &CleanupArgs::default(),
        &env(&[("VIRTWORK_DRY_RUN", "true"), ("VIRTWORK_NAMESPACE", "ns1")]),
    )
    .unwrap();
    assert!(preview.dry_run.is_some());
    assert_eq!(preview.namespace, "ns1");
    assert!(!preview.wait_for_ready, "cleanup waits only with --wait");

    let zero_timeout = CleanupArgs {
        timeout: Some("0".into()),
        ..CleanupArgs::default()
    };
    assert!(Config::load_for_cleanup(&GlobalArgs::default(), &zero_timeout, &env(&[])).is_ok());
    let waiting = CleanupArgs {
        wait: true,
        ..zero_timeout
    };
    let message = input_error(Config::load_for_cleanup(
        &GlobalArgs::default(),
        &waiting,
        &env(&[]),
    ));
    assert!(message.contains("--timeout"), "{message}");

    let bad_id = CleanupArgs {
        run_id: Some("1234".into()),
        ..CleanupArgs::default()
    };
    let message = input_error(Config::load_for_cleanup(
        &GlobalArgs::default(),
        &bad_id,
        &env(&[]),
    ));
    assert!(message.contains("--run-id"), "{message}");
    let good_id = CleanupArgs {
        run_id: Some("0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f".into()),
        ..CleanupArgs::default()
    };
    assert!(Config::load_for_cleanup(&GlobalArgs::default(), &good_id, &env(&[])).is_ok());
}

#[test]
fn cleanup_and_status_do_not_require_workloads() {
    let config = Config::load_for(
        &GlobalArgs::default(),
        CommandFlags::Status(&StatusArgs::default()),
        &env(&[("VIRTWORK_WORKLOADS", ",")]),
    )
    .unwrap();
    assert!(config.workloads.is_empty());
    let message = input_error(Config::load(
        &GlobalArgs::default(),
        &RunArgs::default(),
        &env(&[("VIRTWORK_WORKLOADS", ",")]),
    ));
    assert_eq!(
        message,
        "no workloads specified: use --workloads or --from-catalog"
    );
}

#[test]
fn run_without_waiting_accepts_a_zero_timeout() {
    let run = RunArgs {
        no_wait: true,
        timeout: Some("0".into()),
        ..RunArgs::default()
    };
    assert_eq!(load(&GlobalArgs::default(), &run, &[]).timeout_secs, 0);
    let waiting = RunArgs {
        timeout: Some("0".into()),
        ..RunArgs::default()
    };
    let message = input_error(Config::load(&GlobalArgs::default(), &waiting, &env(&[])));
    assert!(message.contains("--timeout"), "{message}");
}

#[test]
fn builtin_names_match_the_registry() {
    let registry = virtwork::workloads::Registry::builtin();
    assert_eq!(registry.names(), BUILTIN_WORKLOADS.to_vec());
}

#[test]
fn explicit_empty_workloads_with_catalog_entries_run_only_the_catalog() {
    let run = RunArgs {
        workloads: Some(vec![String::new()]),
        from_catalog: Some(vec!["redis-bench".into()]),
        ..RunArgs::default()
    };
    let config = load(&GlobalArgs::default(), &run, &[]);
    assert!(config.workloads.is_empty() && config.workloads_explicit);
    assert_eq!(config.from_catalog, vec!["redis-bench"]);
}
