//! A complete, valid [`Config`] for tests and benchmarks that plan without going through
//! flag/env/YAML loading (the loader has its own tests). Included with `#[path]`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use virtwork::cli::{LogFormat, OutputFormat, ReadyCondition};
use virtwork::config::{AuditSettings, Config, Secret, SshConfig};

/// The nine built-ins, sorted (the `--workloads` default).
pub const ALL_BUILTINS: [&str; 9] = [
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

/// Reference defaults, the given built-ins, `vm_count` VMs each, no SSH credentials.
pub fn config(workloads: &[&str], vm_count: u32) -> Config {
    Config {
        namespace: "virtwork".into(),
        kubeconfig: Vec::new(),
        kubeconfig_given: None,
        container_disk_image: "quay.io/containerdisks/fedora:42".into(),
        disk_size: "10Gi".into(),
        cpu_cores: 2,
        memory: "2Gi".into(),
        wait_for_ready: true,
        timeout_secs: 600,
        ready_condition: ReadyCondition::Running,
        dry_run: None,
        verbose: false,
        log_format: LogFormat::Text,
        output: OutputFormat::Text,
        ssh: SshConfig::default(),
        audit: AuditSettings {
            enabled: false,
            db_path: PathBuf::from("virtwork.db"),
        },
        vm_concurrency: 10,
        qps: 50.0,
        burst: 100,
        catalog_dir: repo_catalog_dir(),
        from_catalog: Vec::new(),
        workloads: workloads.iter().map(|s| s.to_string()).collect(),
        workloads_explicit: true,
        vm_count,
        workload_overrides: BTreeMap::new(),
    }
}

/// SSH fully on: a user with a password (hashed into the user-data) and a key.
pub fn with_ssh(mut config: Config) -> Config {
    config.ssh = SshConfig {
        user: Some("virtwork".into()),
        password: Some(Secret::new("s3cret-Passw0rd")),
        authorized_keys: vec![
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH1bS7gN0mS0bq0h7xv8C6w0yq9mJm8g5kPq3v6YF2aQ test@example"
                .into(),
        ],
    };
    config
}

/// The example entries shipped in the repository's `catalog/`.
pub fn repo_catalog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}
