//! A complete, valid [`PlanInput`] for tests and benchmarks that plan without going through
//! flag/env/YAML resolution (the configuration has its own tests). Included with `#[path]`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use virtwork::model::{Secret, SshAccess};
use virtwork::plan::PlanInput;

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

/// The run id of every planned test fleet.
pub const RUN_ID: &str = "3f1c7a2e-9b4d-4c1a-8e2f-0a9b8c7d6e5f";

/// The built-in defaults, the given built-ins, `vm_count` VMs each, no SSH credentials.
pub fn plan_input(workloads: &[&str], vm_count: u32) -> PlanInput {
    PlanInput {
        namespace: "virtwork".parse().unwrap(),
        container_disk_image: "quay.io/containerdisks/fedora:42".parse().unwrap(),
        guest_os: Default::default(),
        disk_size: "10Gi".parse().unwrap(),
        storage_class: None,
        access_mode: Default::default(),
        volume_mode: Default::default(),
        cpu_cores: 2,
        memory: "2Gi".parse().unwrap(),
        eviction_strategy: Default::default(),
        workload_probe: false,
        vm_count,
        workloads: workloads.iter().map(|s| s.to_string()).collect(),
        from_catalog: Vec::new(),
        workload_overrides: BTreeMap::new(),
        ssh: SshAccess::default(),
        catalog_dir: repo_catalog_dir(),
    }
}

/// SSH fully on: a user with a password (hashed into the user-data) and a key.
pub fn with_ssh(mut input: PlanInput) -> PlanInput {
    input.ssh = SshAccess {
        user: Some("virtwork".parse().unwrap()),
        password: Some(Secret::new("s3cret-Passw0rd")),
        authorized_keys: vec![
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH1bS7gN0mS0bq0h7xv8C6w0yq9mJm8g5kPq3v6YF2aQ test@example"
                .parse()
                .unwrap(),
        ],
    };
    input
}

/// The example entries shipped in the repository's `catalog/`.
pub fn repo_catalog_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("catalog")
}
