//! The key table: every configuration key once, with its type and its YAML and environment
//! spellings. From it come [`Partial`] (one source's values), the precedence merge, the YAML
//! and environment readers' dispatch and [`env_keys`].
//!
//! Adding a key is one line here (see docs/architecture.md, "Adding a configuration key").

use std::path::PathBuf;

use super::value::{KeyValue, Raw, Source, Sourced};
use crate::error::{Error, Result};
use crate::model::{
    AccessMode, Burst, CpuCores, DnsLabel, DryRunMode, EvictionStrategy, GuestOs, ImageRef,
    LogFormat, OutputChoice, PublicKey, Qps, Quantity, ReadyCondition, Secret, SshUser,
    StorageClassName, TimeoutSecs, VmConcurrency, VmCount, VolumeMode,
};

/// One key's spellings: canonical YAML name (hyphenated), other YAML names, and the
/// environment variables that set it (canonical first; it wins over the aliases).
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub key: &'static str,
    pub yaml_aliases: &'static [&'static str],
    pub env: &'static [&'static str],
}

macro_rules! configuration_keys {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $key:literal $(| $alias:literal)*, env [$($var:literal),+];
    )*) => {
        /// The values one source (flags, environment, YAML file, defaults) gives, each with the
        /// input it came from. `None`: this source does not set the key.
        #[derive(Debug, Clone, Default)]
        pub struct Partial {
            $( $(#[doc = $doc])* pub $field: Option<Sourced<$ty>>, )*
        }

        impl Partial {
            /// Field by field, this layer's value where it has one, else `lower`'s.
            pub fn or(self, lower: Partial) -> Partial {
                Partial { $( $field: self.$field.or(lower.$field), )* }
            }

            /// Parses `raw` as the value of the key named `key` (canonical spelling).
            pub fn set(&mut self, key: &str, raw: Raw<'_>, source: Source) -> Result<()> {
                match key {
                    $( $key => {
                        let value = <$ty as KeyValue>::from_raw(raw, &source)?;
                        self.$field = Some(Sourced::new(value, source));
                    } )*
                    other => {
                        return Err(Error::runtime(format!(
                            "configuration key {other:?} is not in the key table"
                        )));
                    }
                }
                Ok(())
            }
        }

        /// Every key, in table order.
        pub const KEYS: &[KeySpec] = &[
            $( KeySpec { key: $key, yaml_aliases: &[$($alias),*], env: &[$($var),+] }, )*
        ];
    };
}

configuration_keys! {
    namespace: DnsLabel = "namespace", env ["VIRTWORK_NAMESPACE"];
    /// A file path; empty means "none" (then `KUBECONFIG`, in-cluster, `~/.kube/config`).
    kubeconfig: PathBuf = "kubeconfig", env ["VIRTWORK_KUBECONFIG"];
    /// The kubeconfig context; none or empty: the kubeconfig's current context.
    context: String = "context", env ["VIRTWORK_CONTEXT"];
    verbose: bool = "verbose", env ["VIRTWORK_VERBOSE"];
    audit: bool = "audit", env ["VIRTWORK_AUDIT"];
    audit_db: PathBuf = "audit-db", env ["VIRTWORK_AUDIT_DB"];
    log_format: LogFormat = "log-format", env ["VIRTWORK_LOG_FORMAT"];
    output: OutputChoice = "output", env ["VIRTWORK_OUTPUT"];
    qps: Qps = "qps", env ["VIRTWORK_QPS"];
    burst: Burst = "burst", env ["VIRTWORK_BURST"];
    container_disk_image: ImageRef = "container-disk-image", env ["VIRTWORK_CONTAINER_DISK_IMAGE"];
    /// The guest OS family payloads are written for; `auto` infers it from the image name.
    guest_os: GuestOs = "guest-os", env ["VIRTWORK_GUEST_OS"];
    disk_size: Quantity = "disk-size" | "data-disk-size",
        env ["VIRTWORK_DISK_SIZE", "VIRTWORK_DATA_DISK_SIZE"];
    /// The StorageClass of every data disk; none: CDI's default (virtualization, then
    /// Kubernetes default class).
    storage_class: StorageClassName = "storage-class", env ["VIRTWORK_STORAGE_CLASS"];
    access_mode: AccessMode = "access-mode", env ["VIRTWORK_ACCESS_MODE"];
    /// The data disks' volume mode; none: the class's StorageProfile decides.
    volume_mode: VolumeMode = "volume-mode", env ["VIRTWORK_VOLUME_MODE"];
    cpu_cores: CpuCores = "cpu-cores", env ["VIRTWORK_CPU_CORES"];
    memory: Quantity = "memory", env ["VIRTWORK_MEMORY"];
    wait_for_ready: bool = "wait-for-ready", env ["VIRTWORK_WAIT_FOR_READY"];
    timeout: TimeoutSecs = "timeout", env ["VIRTWORK_TIMEOUT"];
    ready_condition: ReadyCondition = "ready-condition", env ["VIRTWORK_READY_CONDITION"];
    /// `Some(None)`: explicitly off.
    dry_run: Option<DryRunMode> = "dry-run", env ["VIRTWORK_DRY_RUN"];
    ssh_user: SshUser = "ssh-user", env ["VIRTWORK_SSH_USER"];
    ssh_password: Secret = "ssh-password", env ["VIRTWORK_SSH_PASSWORD"];
    ssh_authorized_keys: Vec<PublicKey> = "ssh-authorized-keys",
        env ["VIRTWORK_SSH_AUTHORIZED_KEYS"];
    vm_concurrency: VmConcurrency = "vm-concurrency", env ["VIRTWORK_VM_CONCURRENCY"];
    catalog_dir: PathBuf = "catalog-dir", env ["VIRTWORK_CATALOG_DIR"];
    from_catalog: Vec<DnsLabel> = "from-catalog", env ["VIRTWORK_FROM_CATALOG"];
    vm_count: VmCount = "vm-count", env ["VIRTWORK_VM_COUNT"];
    /// The built-in workloads to run. (YAML `workloads:` is the per-workload sections instead.)
    workloads: Vec<String> = "workloads", env ["VIRTWORK_WORKLOADS"];
    /// `workload.key=value,...`, parsed when resolved. Flag and environment only.
    params: String = "params", env ["VIRTWORK_PARAMS"];
    max_starting: crate::model::MaxStarting = "max-starting", env ["VIRTWORK_MAX_STARTING"];
    ramp: crate::model::Ramp = "ramp", env ["VIRTWORK_RAMP"];
    /// What a node drain does to each VM; `auto` decides per VM.
    eviction_strategy: EvictionStrategy = "eviction-strategy", env ["VIRTWORK_EVICTION_STRATEGY"];
    /// How long a VM may stay ErrImagePull, ErrorUnschedulable, ... before `run` gives up.
    fail_fast: crate::model::FailFast = "fail-fast", env ["VIRTWORK_FAIL_FAST"];
    /// `virtwork churn`: how long, how often, on what share, which actions, which seed.
    churn_duration: crate::model::Ramp = "churn-duration", env ["VIRTWORK_CHURN_DURATION"];
    churn_rate: crate::model::ChurnRate = "churn-rate", env ["VIRTWORK_CHURN_RATE"];
    churn_share: crate::model::Share = "churn-share", env ["VIRTWORK_CHURN_SHARE"];
    churn_actions: crate::model::ChurnActions = "churn-actions", env ["VIRTWORK_CHURN_ACTIONS"];
    churn_seed: crate::model::ChurnSeed = "churn-seed", env ["VIRTWORK_CHURN_SEED"];
}

/// Every `VIRTWORK_*` environment variable the configuration reads (canonical names, then
/// aliases, in key order). The deployment manifests and docs are checked against this list.
pub fn env_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter().flat_map(|spec| spec.env.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_layers_win_key_by_key() {
        let mut flags = Partial::default();
        flags
            .set("memory", Raw::Text("3Gi"), Source::Flag("--memory"))
            .unwrap();
        let mut env = Partial::default();
        env.set("memory", Raw::Text("2Gi"), Source::Env("VIRTWORK_MEMORY"))
            .unwrap();
        env.set(
            "cpu-cores",
            Raw::Text("4"),
            Source::Env("VIRTWORK_CPU_CORES"),
        )
        .unwrap();
        let merged = flags.or(env);
        let memory = merged.memory.unwrap();
        assert_eq!(
            (memory.value.as_str(), memory.source),
            ("3Gi", Source::Flag("--memory"))
        );
        assert_eq!(
            merged.cpu_cores.unwrap().source,
            Source::Env("VIRTWORK_CPU_CORES")
        );
        assert!(merged.timeout.is_none());
    }

    #[test]
    fn every_key_has_a_unique_spelling() {
        let mut seen = std::collections::BTreeSet::new();
        for spec in KEYS {
            for name in std::iter::once(spec.key).chain(spec.yaml_aliases.iter().copied()) {
                assert!(seen.insert(name), "{name} twice");
                assert_eq!(name, name.to_ascii_lowercase().replace('_', "-"));
            }
        }
        let vars: Vec<&str> = env_keys().collect();
        assert_eq!(
            vars.len(),
            vars.iter().collect::<std::collections::BTreeSet<_>>().len()
        );
        assert!(vars.iter().all(|v| v.starts_with("VIRTWORK_")));
    }
}
