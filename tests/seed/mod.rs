//! Shared by tests/cleanup.rs and tests/status.rs: a fake cluster with the binary's
//! kubeconfig and audit database in a temp dir, seeding of virtwork-shaped runs and foreign
//! objects, and queries of the managed state. Seeding goes straight into the fixture's store;
//! its controllers then create VMIs, DataVolumes and PVCs as KubeVirt and CDI would.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{FakeApiServer, Options};

pub const NS: &str = "virtwork";
pub const RUN_A: &str = "0b6c4a8e-3f1d-4d2a-9c7e-5a1b2c3d4e5f";
pub const RUN_B: &str = "7d3e2f10-8a4b-4c5d-9e6f-0a1b2c3d4e5f";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The annotation virtwork puts on a namespace it creates.
pub const CREATED_BY_RUN: &str = "virtwork/created-by-run";
/// Upper bound for the fixture's controllers to settle (a hang guard, not a timing check).
pub const SETTLE: Duration = Duration::from_secs(30);
/// Every kind cleanup handles, as fixture resource names.
pub const KINDS: [&str; 6] = [
    "virtualmachines",
    "virtualmachineinstances",
    "services",
    "secrets",
    "datavolumes",
    "persistentvolumeclaims",
];

/// One `audit_log` row of a cleanup execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    pub command: String,
    pub status: String,
    pub cleanup_mode: Option<String>,
    pub linked_run_ids: Option<String>,
    pub vms_deleted: Option<i64>,
    pub error_summary: Option<String>,
}

pub struct Cluster {
    pub server: FakeApiServer,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    pub fn start() -> Self {
        Self::with(Options::default())
    }

    pub fn with(options: Options) -> Self {
        let server = FakeApiServer::start(options);
        let dir = tempfile::tempdir().unwrap();
        server
            .write_kubeconfig(dir.path().join("kubeconfig"))
            .unwrap();
        let cluster = Cluster { server, dir };
        cluster.namespace(NS, true);
        cluster
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("audit.db")
    }

    /// Creates a namespace; when `managed`, as `virtwork run` creates one (labelled, and
    /// annotated with the creating run, which makes it deletable by `--delete-namespace`).
    pub fn namespace(&self, name: &str, managed: bool) {
        let metadata = if managed {
            json!({ "name": name, "labels": { MANAGED_BY: "virtwork" },
                    "annotations": { CREATED_BY_RUN: RUN_A } })
        } else {
            json!({ "name": name })
        };
        self.server.insert(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": metadata,
        }));
    }

    /// Creates a namespace the way earlier virtwork versions left one: labelled managed-by
    /// virtwork (they labelled every namespace they ran in) but with no creator annotation.
    pub fn legacy_labelled_namespace(&self, name: &str) {
        self.server.insert(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": name, "labels": { MANAGED_BY: "virtwork" } },
        }));
    }

    /// Seeds one run of `vms` VMs of `workload` (with a data disk each) into `ns`, as
    /// `virtwork run` creates them, and waits for the controllers' VMIs, DVs and PVCs.
    pub fn seed_run(&self, ns: &str, run_id: &str, workload: &str, vms: usize) -> Vec<String> {
        self.seed_run_with_image(
            ns,
            run_id,
            workload,
            vms,
            "quay.io/containerdisks/fedora:42",
        )
    }

    /// Like [`Cluster::seed_run`] with a container disk image (the fixture fails VMs whose
    /// image contains `fail`).
    pub fn seed_run_with_image(
        &self,
        ns: &str,
        run_id: &str,
        workload: &str,
        vms: usize,
        image: &str,
    ) -> Vec<String> {
        self.seed_run_within(ns, run_id, workload, vms, image, SETTLE)
    }

    /// Like [`Cluster::seed_run_with_image`], waiting up to `settle` for the controllers (a
    /// hang guard sized for hundreds of VMs on a loaded machine).
    pub fn seed_run_within(
        &self,
        ns: &str,
        run_id: &str,
        workload: &str,
        vms: usize,
        image: &str,
        settle: Duration,
    ) -> Vec<String> {
        let labels = |name: &str| {
            json!({
                MANAGED_BY: "virtwork",
                "app.kubernetes.io/name": name,
                "app.kubernetes.io/component": workload,
                "virtwork/run-id": run_id,
            })
        };
        self.server.insert(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": format!("virtwork-{workload}"), "namespace": ns, "labels": labels("virtwork") },
            "spec": { "selector": { "app.kubernetes.io/component": workload }, "ports": [{ "name": "p", "port": 5201, "protocol": "TCP" }] },
        }));
        let mut names = Vec::new();
        for i in 0..vms {
            let vm = format!("virtwork-{workload}-{i}");
            let vm_labels = labels(&format!("virtwork-{workload}"));
            self.server.insert(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": { "name": format!("{vm}-cloudinit"), "namespace": ns, "labels": vm_labels },
                "data": { "userdata": "I2Nsb3VkLWNvbmZpZwo=" },
            }));
            self.server.insert(json!({
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                "metadata": { "name": vm, "namespace": ns, "labels": vm_labels },
                "spec": {
                    "runStrategy": "Always",
                    "dataVolumeTemplates": [{
                        "metadata": { "name": format!("data-{vm}"), "labels": vm_labels },
                        "spec": { "source": { "blank": {} }, "storage": { "resources": { "requests": { "storage": "1Gi" } } } },
                    }],
                    "template": {
                        "metadata": { "labels": vm_labels },
                        "spec": {
                            "domain": { "cpu": { "cores": 1 }, "memory": { "guest": "1Gi" }, "devices": {} },
                            "volumes": [
                                { "name": "rootdisk", "containerDisk": { "image": image } },
                                { "name": "cloudinit", "cloudInitNoCloud": { "secretRef": { "name": format!("{vm}-cloudinit") } } },
                                { "name": "datadisk", "dataVolume": { "name": format!("data-{vm}") } },
                            ],
                        },
                    },
                },
            }));
            names.push(vm);
        }
        let settled = self.server.wait_until(settle, |s| {
            names.iter().all(|vm| {
                s.get("virtualmachineinstances", ns, vm).is_some()
                    && s.get("persistentvolumeclaims", ns, &format!("data-{vm}"))
                        .is_some()
            })
        });
        assert!(settled, "fixture controllers did not create VMIs/PVCs");
        names
    }

    /// Seeds objects virtwork must never touch: no labels, another manager's labels, and a
    /// VM that merely looks like ours.
    pub fn seed_foreign(&self, ns: &str) {
        let inserts = [
            json!({ "apiVersion": "v1", "kind": "Secret",
                    "metadata": { "name": "unlabelled", "namespace": ns }, "data": {} }),
            json!({ "apiVersion": "v1", "kind": "Secret",
                    "metadata": { "name": "helm-release", "namespace": ns,
                                  "labels": { MANAGED_BY: "Helm", "virtwork/run-id": RUN_A } }, "data": {} }),
            json!({ "apiVersion": "v1", "kind": "Service",
                    "metadata": { "name": "other-app", "namespace": ns,
                                  "labels": { "app.kubernetes.io/name": "virtwork" } },
                    "spec": { "ports": [{ "port": 80, "protocol": "TCP" }] } }),
            json!({ "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": { "name": "virtwork-audit-data", "namespace": ns },
                    "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } }),
            json!({ "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "metadata": { "name": "virtwork-cpu-9", "namespace": ns,
                                  "labels": { "app.kubernetes.io/component": "cpu" } },
                    "spec": { "runStrategy": "Halted", "template": { "spec": { "domain": { "devices": {} } } } } }),
        ];
        for object in inserts {
            self.server.insert(object);
        }
    }

    pub fn foreign_present(&self, ns: &str) -> bool {
        [
            ("secrets", "unlabelled"),
            ("secrets", "helm-release"),
            ("services", "other-app"),
            ("persistentvolumeclaims", "virtwork-audit-data"),
            ("virtualmachines", "virtwork-cpu-9"),
        ]
        .iter()
        .all(|(kind, name)| self.server.get(kind, ns, name).is_some())
    }

    /// Objects of `resource` in `ns` labelled managed-by=virtwork (optionally of one run).
    pub fn managed(&self, resource: &str, ns: &str, run_id: Option<&str>) -> Vec<String> {
        self.server
            .objects(resource, Some(ns))
            .into_iter()
            .filter(|o| o["metadata"]["labels"][MANAGED_BY] == "virtwork")
            .filter(|o| run_id.is_none_or(|id| o["metadata"]["labels"]["virtwork/run-id"] == id))
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    }

    pub fn managed_total(&self, ns: &str, run_id: Option<&str>) -> usize {
        KINDS
            .iter()
            .map(|k| self.managed(k, ns, run_id).len())
            .sum()
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_virtwork"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            // By variable, not flag: `--audit-db` given to a command that records nothing
            // (`status`) earns a warning line on stderr.
            .env("VIRTWORK_AUDIT_DB", self.db())
            .arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        crate::support::process::default_signals(&mut cmd);
        cmd
    }

    /// Runs virtwork with `stdin` (None = /dev/null) and extra environment.
    pub fn run(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied());
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(text.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// The audit rows of cleanup executions, oldest first.
    pub fn cleanup_audit(&self) -> Vec<AuditRow> {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        let mut stmt = conn
            .prepare(
                "SELECT command, status, cleanup_mode, linked_run_ids, vms_deleted, error_summary
                 FROM audit_log WHERE command LIKE 'cleanup%' ORDER BY id",
            )
            .unwrap();
        stmt.query_map([], |r| {
            Ok(AuditRow {
                command: r.get(0)?,
                status: r.get(1)?,
                cleanup_mode: r.get(2)?,
                linked_run_ids: r.get(3)?,
                vms_deleted: r.get(4)?,
                error_summary: r.get(5)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn json_doc(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}): {}",
            text(&output.stdout)
        )
    })
}

/// How a guarded child process ended.
pub struct Guarded {
    /// None when it had to be killed (still running at the guard, or over the memory limit).
    pub output: Option<Output>,
    /// Largest resident set size seen while it ran, in KiB (Linux `/proc`; 0 elsewhere).
    pub peak_rss_kib: u64,
}

pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs `cmd`, sampling its memory every 20 ms; kills it when it outlives `guard` or grows
/// past `limit_kib` (hang and runaway guards: the caller asserts on what happened).
pub fn run_guarded(mut cmd: Command, guard: Duration, limit_kib: u64) -> Guarded {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + guard;
    let mut peak = 0;
    loop {
        if child.try_wait().unwrap().is_some() {
            return Guarded {
                output: Some(child.wait_with_output().unwrap()),
                peak_rss_kib: peak,
            };
        }
        peak = peak.max(rss_kib(child.id()).unwrap_or(0));
        if peak > limit_kib || std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Guarded {
                output: None,
                peak_rss_kib: peak,
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
